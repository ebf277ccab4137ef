/*
 * Channels-last steps (domain "kiln"), made by the channels_last pass
 * (src/passes/channels_last.c).  Nhwc<Op> computes <Op> with its 4-D
 * activations stored [N, H, W, C] (channels innermost) instead of ONNX's
 * [N, C, H, W]:
 *
 *   NhwcFusedConv          FusedConv (fused.c); X (input 0), the residual Z
 *                          (input 3) and Y are channels-last; W stays
 *                          [M, C/group, kH, kW], B [M], S [N, C]
 *   NhwcMaxPool            MaxPool without the Indices output
 *   NhwcAveragePool        AveragePool
 *   NhwcGlobalAveragePool  GlobalAveragePool (Y is [N, 1, 1, C])
 *   NhwcGlobalMaxPool      GlobalMaxPool
 *
 * with the base op's attributes, unchanged.  An NhwcFusedConv may also
 * write its m output channels into a slice of a wider Y (the
 * concat_inplace pass): with the attributes concat_channels = C and
 * concat_offset = o, Y is [N, H, W, C], channels [o, o + m) are the
 * conv's, the others those of the optional input 5 (Y's shape; the
 * planner lets Y share its buffer, so a chain of convs fills one Concat
 * output without copies).  Without input 5 they are unspecified (zeros
 * from the reference kernel, whatever the arena held from the fast ones):
 * the pass only makes chains whose slices cover every channel.  Such a
 * conv has no residual.  Shape inference, FLOPs and the reference kernel
 * (tactic 0) run the base op on [N, C, H, W] views: the
 * reference transposes the channels-last inputs into buffers of their own,
 * runs the base op's reference and transposes its outputs back, so a
 * channels-last step is by construction the base op up to the layout.  The
 * fast tactics (conv_igemm_nhwc, conv_depthwise_nhwc, pool_nhwc: src/tactics/
 * conv and src/tactics/pooling_tactics.c) read and write channels-last directly
 * (src/kernels/conv, src/kernels/pool).
 */
#include "layout.h"

#include "ops/tactic.h"

typedef struct nhwc_op {
  const char *name;
  const char *base_domain, *base;
  const kn_op_def *family; /* the base op's family table */
  uint32_t nhwc_inputs; /* bit i: input i is a 4-D channels-last tensor */
} nhwc_op;

static const nhwc_op nhwc_ops[] = {
    {"NhwcFusedConv", KN_DOMAIN, "FusedConv", kn_ops_fused, 1u | 8u},
    {"NhwcMaxPool", "", "MaxPool", kn_ops_pooling, 1u},
    {"NhwcAveragePool", "", "AveragePool", kn_ops_pooling, 1u},
    {"NhwcGlobalAveragePool", "", "GlobalAveragePool", kn_ops_pooling, 1u},
    {"NhwcGlobalMaxPool", "", "GlobalMaxPool", kn_ops_pooling, 1u},
};
#define N_NHWC_OPS ((int32_t)(sizeof nhwc_ops / sizeof nhwc_ops[0]))

const char *kn_nhwc_op_for(const char *domain, const char *op, uint32_t *nhwc_inputs) {
  const char *d = domain ? domain : "";
  for (int32_t i = 0; i < N_NHWC_OPS; i++)
    if (!strcmp(nhwc_ops[i].base, op) && !strcmp(nhwc_ops[i].base_domain, d)) {
      if (nhwc_inputs) *nhwc_inputs = nhwc_ops[i].nhwc_inputs;
      return nhwc_ops[i].name;
    }
  return NULL;
}

static const nhwc_op *nhwc_find(const kn_node *n) {
  for (int32_t i = 0; i < N_NHWC_OPS; i++)
    if (!strcmp(nhwc_ops[i].name, n->op_type)) return &nhwc_ops[i];
  return NULL;
}

/* The base op of channels-last op e. */
static const kn_op_def *nhwc_base(const nhwc_op *e) {
  return kn_op_in(e->family, e->base_domain, e->base);
}

void kn_layout_permute(const int64_t *nchw, size_t es, const void *src, void *dst,
                       bool to_nchw) {
  int64_t n = nchw[0], c = nchw[1], hw = nchw[2] * nchw[3];
  const char *s = src;
  char *d = dst;
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t p = 0; p < hw; p++) {
        int64_t i_nchw = (b * c + ch) * hw + p, i_nhwc = (b * hw + p) * c + ch;
        if (to_nchw) memcpy(d + i_nchw * es, s + i_nhwc * es, es);
        else memcpy(d + i_nhwc * es, s + i_nchw * es, es);
      }
}

#define NHWC_MAX_IO 8

/* An NhwcFusedConv writing a channel slice (see the header comment). */
typedef struct nhwc_slice {
  bool on;
  int64_t total, off, m; /* Y's channels, the slice's first and its count */
  int32_t base_in;       /* inputs the base op sees (input 5 is not its) */
} nhwc_slice;

static kn_status read_slice(kn_op_ctx *ctx, const nhwc_op *e, nhwc_slice *sl) {
  memset(sl, 0, sizeof *sl);
  sl->base_in = ctx->n_in;
  if (strcmp(e->name, "NhwcFusedConv")) return KN_OK;
  sl->base_in = ctx->n_in < 5 ? ctx->n_in : 5;
  if (!kn_node_attr(ctx->node, "concat_channels")) {
    if (ctx->n_in > 5 && kn_in(ctx, 5))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "input 5 (the output being filled) needs the attribute concat_channels");
    return KN_OK;
  }
  const kn_tensor *w = kn_in(ctx, 1), *z = kn_in(ctx, 3);
  sl->on = true;
  sl->total = kn_attr_int(ctx, "concat_channels", 0);
  sl->off = kn_attr_int(ctx, "concat_offset", 0);
  sl->m = w && w->rank >= 1 ? w->dims[0] : -1;
  if (z && (z->rank != 0 || kn_tensor_numel(z) != 0))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "a conv writing a channel slice (concat_channels) takes no residual");
  if (sl->total < 1 || sl->off < 0 || (sl->m >= 0 && sl->off + sl->m > sl->total))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "channel slice [%lld, %lld + %lld) does not fit concat_channels %lld",
                      (long long)sl->off, (long long)sl->off, (long long)sl->m,
                      (long long)sl->total);
  return KN_OK;
}

/* Input 5 of a slice-writing conv, checked against Y's shape. */
static kn_status slice_into(kn_op_ctx *ctx, const kn_tensor *y, const kn_tensor **into) {
  *into = ctx->n_in > 5 ? kn_in(ctx, 5) : NULL;
  const kn_tensor *t = *into;
  if (!t || !y || y->rank != 4) return KN_OK;
  bool ok = t->dtype == y->dtype && t->rank == 4;
  for (int32_t i = 0; ok && i < 4; i++)
    ok = t->dims[i] < 0 || y->dims[i] < 0 || t->dims[i] == y->dims[i];
  if (!ok) {
    char a[96], b[96];
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input 5 is %s %s, expected the output's %s %s",
                      kn_dtype_name(t->dtype), kn_shape_str(t->rank, t->dims, a, sizeof a),
                      kn_dtype_name(y->dtype), kn_shape_str(y->rank, y->dims, b, sizeof b));
  }
  return KN_OK;
}

/* Y = input 5 (or zeros) with channels [off, off + m) from yc [n*h*w, m]. */
static void slice_fill(const nhwc_slice *sl, const kn_tensor *into, kn_tensor *y,
                       const void *yc) {
  size_t es = kn_dtype_size(y->dtype);
  int64_t px = kn_tensor_numel(y) / sl->total;
  if (!into) memset(y->data, 0, (size_t)kn_tensor_numel(y) * es);
  else if (into->data != y->data) memcpy(y->data, into->data, (size_t)kn_tensor_numel(y) * es);
  for (int64_t p = 0; p < px; p++)
    memcpy((char *)y->data + (size_t)(p * sl->total + sl->off) * es,
           (const char *)yc + (size_t)(p * sl->m) * es, (size_t)sl->m * es);
}

/* Runs the base op's `infer`, `run` or reads its FLOPs (fn / flops) on
 * ctx with channels-last inputs and outputs seen as [N, C, H, W]. */
static kn_status nhwc_call(kn_op_ctx *ctx, const nhwc_op *e, kn_op_fn fn,
                           double (*flops)(const kn_op_ctx *), double *flops_out, bool run) {
  const kn_op_def *base = nhwc_base(e);
  KN_ASSERT(base && ctx->n_in <= NHWC_MAX_IO && ctx->n_out <= NHWC_MAX_IO);
  kn_slot in_s[NHWC_MAX_IO], out_s[NHWC_MAX_IO];
  kn_slot *in_p[NHWC_MAX_IO], *out_p[NHWC_MAX_IO];
  memset(in_s, 0, sizeof in_s);
  memset(out_s, 0, sizeof out_s);
  void *slice_buf = NULL;
  nhwc_slice sl;
  kn_status st = read_slice(ctx, e, &sl);
  if (st) return st;
  for (int32_t i = 0; i < sl.base_in; i++) {
    in_p[i] = ctx->in[i];
    const kn_slot *s = ctx->in[i];
    if (!s || s->kind != KN_KIND_TENSOR || s->t.rank != 4 || !(e->nhwc_inputs >> i & 1u))
      continue;
    in_s[i] = *s;
    in_s[i].t.owned = 0;
    kn_dims_to_nchw(s->t.dims, in_s[i].t.dims);
    if (run && s->t.data && kn_tensor_numel(&s->t) > 0) {
      size_t es = kn_dtype_size(s->t.dtype);
      void *buf = kn_malloc(s->t.nbytes ? s->t.nbytes : 1);
      if (!buf) {
        st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for a channels-last input copy");
        goto done;
      }
      kn_layout_permute(in_s[i].t.dims, es, s->t.data, buf, true);
      in_s[i].t.data = buf;
      in_s[i].t.owned = 1; /* ours to free below */
    }
    in_p[i] = &in_s[i];
  }
  for (int32_t o = 0; o < ctx->n_out; o++) {
    out_p[o] = flops ? ctx->out[o] : &out_s[o]; /* flops: the caller's NCHW views */
    if (!run) continue;
    const kn_tensor *y = &ctx->out[o]->t;
    if (ctx->out[o]->kind != KN_KIND_TENSOR || y->rank != 4) {
      out_p[o] = ctx->out[o];
      continue;
    }
    out_s[o].kind = KN_KIND_TENSOR;
    out_s[o].t = *y;
    out_s[o].t.owned = 0;
    kn_dims_to_nchw(y->dims, out_s[o].t.dims);
    if (sl.on && o == 0) { /* the conv's own m channels */
      if (sl.m < 0 || y->dims[3] != sl.total) {
        st = kn_op_fail(ctx, KN_ERR_SHAPE, "output has %lld channels, expected %lld",
                        (long long)y->dims[3], (long long)sl.total);
        goto done;
      }
      out_s[o].t.dims[1] = sl.m;
      out_s[o].t.nbytes = (size_t)kn_tensor_numel(&out_s[o].t) * kn_dtype_size(y->dtype);
    }
    out_s[o].t.data = kn_calloc(out_s[o].t.nbytes ? out_s[o].t.nbytes : 1, 1);
    if (!out_s[o].t.data) {
      st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for a channels-last output copy");
      goto done;
    }
  }
  {
    kn_node tmp = *ctx->node;
    tmp.op_type = (char *)e->base;
    tmp.domain = (char *)e->base_domain;
    tmp.op = base;
    tmp.tactic = KN_TACTIC_reference;
    kn_op_ctx c2 = *ctx;
    c2.node = &tmp;
    /* the newest version of ONNX ops (the pass converts only ops whose
     * attributes mean the same at every version); kiln ops are version 1 */
    c2.opset = e->base_domain[0] ? 1 : KN_MAX_OPSET;
    c2.n_in = sl.base_in;
    c2.in = in_p;
    c2.out = out_p;
    c2.rt = NULL;
    c2.packed = NULL;
    if (flops) {
      *flops_out = flops(&c2);
      goto done;
    }
    st = fn(&c2);
  }
  if (st) goto done;
  for (int32_t o = 0; o < ctx->n_out; o++) {
    if (out_p[o] != &out_s[o] || out_s[o].kind != KN_KIND_TENSOR) continue;
    const kn_tensor *t = &out_s[o].t;
    if (!run) {
      int64_t d[KN_MAX_RANK];
      if (t->rank == 4) kn_dims_to_nhwc(t->dims, d);
      else memcpy(d, t->dims, sizeof d);
      if (sl.on && o == 0 && t->rank == 4) d[3] = sl.total;
      kn_out_set(ctx, o, t->dtype, t->rank, t->rank >= 0 ? d : NULL);
      if (sl.on && o == 0) {
        const kn_tensor *into;
        if ((st = slice_into(ctx, &ctx->out[0]->t, &into))) goto done;
      }
    } else if (sl.on && o == 0) {
      const kn_tensor *into;
      if ((st = slice_into(ctx, &ctx->out[0]->t, &into))) goto done;
      size_t es = kn_dtype_size(t->dtype);
      slice_buf = kn_malloc(t->nbytes ? t->nbytes : 1);
      if (!slice_buf) {
        st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for a channels-last output copy");
        goto done;
      }
      if (kn_tensor_numel(t) > 0) kn_layout_permute(t->dims, es, t->data, slice_buf, false);
      slice_fill(&sl, into, &ctx->out[0]->t, slice_buf);
    } else if (kn_tensor_numel(t) > 0) {
      kn_layout_permute(t->dims, kn_dtype_size(t->dtype), t->data, ctx->out[o]->t.data, false);
    }
  }
done:
  free(slice_buf);
  for (int32_t i = 0; i < sl.base_in; i++)
    if (in_s[i].t.owned) free(in_s[i].t.data);
  if (run)
    for (int32_t o = 0; o < ctx->n_out; o++)
      if (out_p[o] == &out_s[o]) free(out_s[o].t.data);
  return st;
}

static kn_status nhwc_infer(kn_op_ctx *ctx) {
  const nhwc_op *e = nhwc_find(ctx->node);
  KN_ASSERT(e);
  const kn_tensor *x = kn_in(ctx, 0);
  if (x && x->rank >= 0 && x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input 0 has rank %d, expected a 4-D channels-last tensor [N, H, W, C]",
                      (int)x->rank);
  const kn_op_def *base = nhwc_base(e);
  return nhwc_call(ctx, e, base->infer, NULL, NULL, false);
}

static kn_status nhwc_run(kn_op_ctx *ctx) {
  const nhwc_op *e = nhwc_find(ctx->node);
  KN_ASSERT(e);
  const kn_op_def *base = nhwc_base(e);
  return nhwc_call(ctx, e, base->run, NULL, NULL, true);
}

static double nhwc_flops(const kn_op_ctx *ctx) {
  const nhwc_op *e = nhwc_find(ctx->node);
  const kn_op_def *base = e ? nhwc_base(e) : NULL;
  if (!base || !base->flops) {
    const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
    double n = 1;
    for (int32_t i = 0; y && i < y->rank; i++) n *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
    return y && y->rank >= 0 ? n : 0;
  }
  /* the output slots hold the channels-last types: view them as NCHW */
  kn_op_ctx c = *ctx;
  kn_slot out_s[NHWC_MAX_IO];
  kn_slot *out_p[NHWC_MAX_IO];
  const kn_tensor *w = !strcmp(e->name, "NhwcFusedConv") ? kn_in(ctx, 1) : NULL;
  for (int32_t o = 0; o < ctx->n_out && o < NHWC_MAX_IO; o++) {
    out_s[o] = *ctx->out[o];
    if (out_s[o].kind == KN_KIND_TENSOR && out_s[o].t.rank == 4) {
      kn_dims_to_nchw(ctx->out[o]->t.dims, out_s[o].t.dims);
      /* a conv writing a channel slice computes only its own channels */
      if (o == 0 && w && w->rank >= 1 && w->dims[0] >= 0 &&
          kn_node_attr(ctx->node, "concat_channels"))
        out_s[o].t.dims[1] = w->dims[0];
    }
    out_p[o] = &out_s[o];
  }
  c.out = out_p;
  double f = 0;
  (void)nhwc_call(&c, e, NULL, base->flops, &f, false);
  return f;
}

const kn_op_def kn_ops_layout[] = {
    {"NhwcFusedConv", KN_DOMAIN, 2, 6, 1, 1, 1, 1, nhwc_infer, nhwc_run, nhwc_flops,
     .inplace = KN_INPLACE_ELEMWISE, .inplace_input = 5},
    {"NhwcMaxPool", KN_DOMAIN, 1, 1, 1, 1, 1, 1, nhwc_infer, nhwc_run, nhwc_flops},
    {"NhwcAveragePool", KN_DOMAIN, 1, 1, 1, 1, 1, 1, nhwc_infer, nhwc_run, nhwc_flops},
    {"NhwcGlobalAveragePool", KN_DOMAIN, 1, 1, 1, 1, 1, 1, nhwc_infer, nhwc_run, nhwc_flops},
    {"NhwcGlobalMaxPool", KN_DOMAIN, 1, 1, 1, 1, 1, 1, nhwc_infer, nhwc_run, nhwc_flops},
    KN_OP_END,
};
