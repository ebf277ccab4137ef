/*
 * NhwcExpandDwConv (domain "kiln"), made by src/passes/fuse_expand_dw.c
 * from the two channels-last steps of an inverted-residual block:
 *
 *   T = NhwcFusedConv(X, WE, BE)    1x1, stride 1, no pads, group 1
 *   Y = NhwcFusedConv(T, WD, BD)    depthwise: group = channels of T
 *
 * Inputs X [N, H, W, C] (channels-last), WE [E, C, 1, 1], WD [E, 1, kH,
 * kW], and the biases BE [E] and BD [E] (each may be omitted).  The attributes
 * are the depthwise step's (FusedConv's: kernel_shape, strides, pads,
 * dilations, group, activation, activation_*), plus the expansion's
 * activation as expand_activation, expand_activation_alpha,
 * expand_activation_beta, expand_activation_min and
 * expand_activation_max.  Neither step has a residual or an input scale.
 *
 * Shape inference and the reference kernel (tactic 0) are those of the
 * two NhwcFusedConv steps run one after the other (the reference makes T
 * in a buffer of its own), so the fused step is by construction the pair
 * it replaces.  The fast tactic, conv_expand_dw_nhwc, never makes T whole
 * (kernels/conv/expand-dw-nhwc.c): its results are bit-identical to
 * conv_igemm_nhwc followed by conv_depthwise_nhwc.
 */
#include "op.h"

#include "conv_fast.h"
#include "fused.h"
#include "ops/tactic.h"

#define PREFIX "expand_"
#define PREFIX_LEN 7
#define MAX_ATTRS 32

/* The two steps the node stands for: e (the expansion: the attributes
 * named expand_*, without the prefix) and d (the depthwise conv: the
 * others), both NhwcFusedConv on the reference tactic.  Their attribute
 * arrays borrow the node's (names into the node's strings). */
typedef struct edw_nodes {
  kn_node e, d;
  kn_attr ea[MAX_ATTRS], da[MAX_ATTRS];
} edw_nodes;

static kn_status split_nodes(kn_op_ctx *ctx, edw_nodes *s) {
  const kn_node *n = ctx->node;
  if (n->n_attrs > MAX_ATTRS)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "%d attributes, expected at most %d",
                      (int)n->n_attrs, MAX_ATTRS);
  const kn_op_def *conv = kn_op_in(kn_ops_layout, KN_DOMAIN, "NhwcFusedConv");
  KN_ASSERT(conv);
  s->e = s->d = *n;
  s->e.op_type = s->d.op_type = (char *)"NhwcFusedConv";
  s->e.op = s->d.op = conv;
  s->e.tactic = s->d.tactic = KN_TACTIC_reference;
  s->e.covers = s->d.covers = NULL;
  s->e.n_attrs = s->d.n_attrs = 0;
  s->e.attrs = s->ea;
  s->d.attrs = s->da;
  for (int32_t i = 0; i < n->n_attrs; i++) {
    const kn_attr *a = &n->attrs[i];
    if (!strncmp(a->name, PREFIX, PREFIX_LEN)) {
      s->ea[s->e.n_attrs] = *a;
      s->ea[s->e.n_attrs++].name = a->name + PREFIX_LEN;
    } else {
      s->da[s->d.n_attrs++] = *a;
    }
  }
  return KN_OK;
}

/* ctx for sub-step `node` with inputs in[0..3) and output slot out. */
static kn_op_ctx sub_ctx(const kn_op_ctx *ctx, const kn_node *node, kn_slot **in,
                         kn_slot **out) {
  kn_op_ctx c = *ctx;
  c.node = node;
  c.opset = 1;
  c.n_in = 3;
  c.in = in;
  c.n_out = 1;
  c.out = out;
  c.rt = NULL;
  c.packed = NULL;
  return c;
}

static kn_status check_inputs(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *we = kn_in(ctx, 1), *wd = kn_in(ctx, 2);
  if (x && x->rank >= 0 && x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input 0 has rank %d, expected a 4-D channels-last tensor [N, H, W, C]",
                      (int)x->rank);
  if (we && we->rank >= 0 &&
      (we->rank != 4 || (we->dims[2] >= 0 && we->dims[2] != 1) ||
       (we->dims[3] >= 0 && we->dims[3] != 1)))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input 1 (the expansion's weights) must be [E, C, 1, 1]");
  if (!wd || (wd->rank >= 0 && wd->rank != 4))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input 2 (the depthwise weights) must be [E, 1, kH, kW]");
  return KN_OK;
}

/* T's slot from the expansion's inference (data NULL). */
static kn_status infer_t(kn_op_ctx *ctx, edw_nodes *s, kn_slot *t) {
  memset(t, 0, sizeof *t);
  t->kind = KN_KIND_TENSOR;
  t->t.rank = -1;
  kn_slot *in[3] = {ctx->in[0], ctx->in[1], ctx->n_in > 3 ? ctx->in[3] : NULL};
  kn_slot *out[1] = {t};
  kn_op_ctx c = sub_ctx(ctx, &s->e, in, out);
  return s->e.op->infer(&c);
}

static kn_status edw_infer(kn_op_ctx *ctx) {
  kn_status st = check_inputs(ctx);
  if (st) return st;
  edw_nodes s;
  if ((st = split_nodes(ctx, &s))) return st;
  kn_slot t;
  if ((st = infer_t(ctx, &s, &t))) return st;
  kn_slot *in[3] = {&t, ctx->in[2], ctx->n_in > 4 ? ctx->in[4] : NULL};
  kn_op_ctx c = sub_ctx(ctx, &s.d, in, ctx->out);
  st = s.d.op->infer(&c);
  kn_slot_release(&t);
  return st;
}

/* ---- the fast tactic ------------------------------------------------------ */

typedef struct edw_packed {
  kn_packed hdr;          /* a relocatable block (op.h): tactic and ISA */
  int64_t wedims[4], wddims[4];
  uint64_t we_off, wd_off; /* packed weights, from the block's start (64-byte aligned) */
} edw_packed;

/* Geometries of both steps for x [N, H, W, C] (channels-last dims), the
 * weights' dims and the depthwise step's attributes (the node's own: the
 * expand_* ones are not geometry). */
static bool geometries(kn_op_ctx *dctx, const int64_t *xd, const int64_t *wed,
                       const int64_t *wdd, kn_conv2d *ge, kn_conv2d *gd) {
  for (int32_t i = 0; i < 4; i++)
    if (xd[i] < 0 || wed[i] < 1 || wdd[i] < 1) return false;
  int64_t e = wed[0];
  if (wed[1] != xd[3] || wed[2] != 1 || wed[3] != 1 || wdd[0] != e || wdd[1] != 1) return false;
  *ge = (kn_conv2d){.n = xd[0], .c = xd[3], .h = xd[1], .w = xd[2], .m = e, .oh = xd[1],
                    .ow = xd[2], .group = 1, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1,
                    .dw = 1};
  kn_tensor tv, wv;
  memset(&tv, 0, sizeof tv);
  memset(&wv, 0, sizeof wv);
  tv.dtype = wv.dtype = KN_DTYPE_F32;
  tv.rank = wv.rank = 4;
  int64_t tn[4] = {xd[0], e, xd[1], xd[2]}; /* T as NCHW */
  memcpy(tv.dims, tn, sizeof tn);
  memcpy(wv.dims, wdd, sizeof tn);
  kn_conv_geom geo;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_error err, *saved = dctx->err;
  dctx->err = &err; /* a failure here only means: not this tactic */
  kn_status st = kn_conv_geometry(dctx, &tv, &wv, false, &geo, &r, d, &complete);
  dctx->err = saved;
  if (st || !complete || geo.nd != 2) return false;
  *gd = kn_conv2d_of(&geo);
  return kn_f32_expand_dw_nhwc_fits(ge, gd);
}

/* Static geometries of node n of graph gr; false: not the tactic's case. */
static bool static_geometries(const kn_graph *gr, const kn_node *n, kn_conv2d *ge,
                              kn_conv2d *gd, const kn_tensor **we, const kn_tensor **wd) {
  if (n->n_inputs < 3 || n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[2] < 0)
    return false;
  const kn_value *x = &gr->values[n->inputs[0]], *wev = &gr->values[n->inputs[1]],
                 *wdv = &gr->values[n->inputs[2]];
  if (x->type.dtype != KN_DTYPE_F32 || wev->type.dtype != KN_DTYPE_F32 ||
      wdv->type.dtype != KN_DTYPE_F32 || x->type.rank != 4 || wev->type.rank != 4 ||
      wdv->type.rank != 4)
    return false;
  kn_error err;
  kn_op_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.node = n;
  ctx.err = &err;
  ctx.label = "";
  ctx.static_infer = true;
  if (!geometries(&ctx, x->type.dims, wev->type.dims, wdv->type.dims, ge, gd)) return false;
  if (we) *we = wev->constant && wev->constant->data ? wev->constant : NULL;
  if (wd) *wd = wdv->constant && wdv->constant->data ? wdv->constant : NULL;
  return true;
}

static int32_t edw_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  kn_conv2d ge, gd;
  return static_geometries(g, n, &ge, &gd, NULL, NULL) ? KN_TACTIC_conv_expand_dw_nhwc : 0;
}

static kn_status edw_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                          void **packed, kn_error *err) {
  int32_t isa = target->isa;
  *packed = NULL;
  kn_conv2d ge, gd;
  const kn_tensor *we, *wd;
  if (n->tactic != KN_TACTIC_conv_expand_dw_nhwc ||
      !static_geometries(g, n, &ge, &gd, &we, &wd) || !we || !wd)
    return KN_OK;
  size_t head = (sizeof(edw_packed) + 63) & ~(size_t)63;
  size_t ne = kn_f32_conv_nhwc_pack_size((kn_isa)isa, &ge) * sizeof(float);
  size_t nd = kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, &gd) * sizeof(float);
  size_t ne64 = (ne + 63) & ~(size_t)63;
  edw_packed *p = kn_packed_alloc(head + ne64 + nd, isa, n->tactic);
  if (!p)
    return kn_fail(err, KN_ERR_OOM, "node '%s' (%s): out of memory packing %zu weight bytes",
                   n->name, n->op_type, ne + nd);
  memcpy(p->wedims, we->dims, sizeof p->wedims);
  memcpy(p->wddims, wd->dims, sizeof p->wddims);
  p->we_off = head;
  p->wd_off = head + ne64;
  kn_f32_conv_nhwc_pack((kn_isa)isa, &ge, we->data, (float *)((char *)p + p->we_off));
  kn_f32_dwconv_nhwc_pack((kn_isa)isa, &gd, wd->data, (float *)((char *)p + p->wd_off));
  *packed = p;
  return KN_OK;
}

static void edw_unpack(void *packed) { kn_packed_free(packed); }

/* The fast run; *done = false when it is not the tactic's case.  It reads
 * the node's attributes directly: the depthwise step's geometry and
 * activation are the node's own, the expansion's activation the expand_*
 * ones (no sub-nodes on the hot path). */
static kn_status edw_fast(kn_op_ctx *ctx, bool *done) {
  *done = false;
  const kn_tensor *x = kn_in(ctx, 0), *we = kn_in(ctx, 1), *wd = kn_in(ctx, 2),
                  *be = ctx->n_in > 3 ? kn_in(ctx, 3) : NULL,
                  *bd = ctx->n_in > 4 ? kn_in(ctx, 4) : NULL;
  kn_tensor *y = kn_out(ctx, 0);
  if (!x || !we || !wd || x->dtype != KN_DTYPE_F32 || we->dtype != KN_DTYPE_F32 ||
      wd->dtype != KN_DTYPE_F32 || y->dtype != KN_DTYPE_F32 || x->rank != 4 ||
      we->rank != 4 || wd->rank != 4 || y->rank != 4 || (be && be->dtype != KN_DTYPE_F32) ||
      (bd && bd->dtype != KN_DTYPE_F32))
    return KN_OK;
  kn_conv2d ge, gd;
  if (!geometries(ctx, x->dims, we->dims, wd->dims, &ge, &gd) || gd.oh != y->dims[1] ||
      gd.ow != y->dims[2] || gd.m != y->dims[3])
    return KN_OK;
  if ((be && kn_tensor_numel(be) > 0 && kn_tensor_numel(be) != ge.m) ||
      (bd && kn_tensor_numel(bd) > 0 && kn_tensor_numel(bd) != gd.m))
    return KN_OK;
  kn_epilogue ee = {.bias = be && kn_tensor_numel(be) > 0 ? be->data : NULL};
  kn_epilogue ed = {.bias = bd && kn_tensor_numel(bd) > 0 ? bd->data : NULL};
  bool rf;
  kn_status st = kn_fused_conv_act(ctx, PREFIX, &ee.act, &rf);
  if (!st) st = kn_fused_conv_act(ctx, "", &ed.act, &rf);
  if (st) return st;
  kn_rt *rt = ctx->rt;
  kn_isa isa = rt->isa;
  int32_t threads = kn_rt_threads(rt);
  const edw_packed *pk = ctx->packed;
  const float *wep = NULL, *wdp = NULL;
  size_t ne = 0, nd = 0;
  if (pk && pk->hdr.tactic == KN_TACTIC_conv_expand_dw_nhwc && pk->hdr.isa == (int32_t)isa &&
      !memcmp(pk->wedims, we->dims, sizeof pk->wedims) &&
      !memcmp(pk->wddims, wd->dims, sizeof pk->wddims)) {
    wep = (const float *)((const char *)pk + pk->we_off);
    wdp = (const float *)((const char *)pk + pk->wd_off);
  } else {
    ne = (kn_f32_conv_nhwc_pack_size(isa, &ge) * sizeof(float) + 63) & ~(size_t)63;
    nd = (kn_f32_dwconv_nhwc_pack_size(isa, &gd) * sizeof(float) + 63) & ~(size_t)63;
  }
  size_t kbytes = kn_f32_expand_dw_nhwc_scratch(isa, &ge, &gd, threads, &rt->caches);
  char *scratch = kn_rt_scratch(rt, ne + nd + kbytes);
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  if (ne) {
    kn_f32_conv_nhwc_pack(isa, &ge, we->data, (float *)scratch);
    kn_f32_dwconv_nhwc_pack(isa, &gd, wd->data, (float *)(scratch + ne));
    wep = (const float *)scratch;
    wdp = (const float *)(scratch + ne);
  }
  kn_f32_expand_dw_nhwc(isa, rt->pool, &ge, wep, &ee, &gd, wdp, &ed, x->data, y->data,
                        scratch + ne + nd, &rt->caches);
  *done = true;
  return KN_OK;
}

static kn_status edw_run(kn_op_ctx *ctx) {
  kn_status st;
  if (ctx->rt && ctx->node->tactic == KN_TACTIC_conv_expand_dw_nhwc) {
    bool done = false;
    if ((st = edw_fast(ctx, &done)) || done) return st;
  }
  edw_nodes s;
  if ((st = split_nodes(ctx, &s))) return st;
  /* the reference: the two steps, T in a buffer of its own */
  kn_slot t;
  if ((st = infer_t(ctx, &s, &t))) return st;
  bool known = t.t.rank == 4;
  for (int32_t i = 0; known && i < 4; i++) known = t.t.dims[i] >= 0;
  int64_t dims[4];
  memcpy(dims, t.t.dims, sizeof dims);
  kn_slot_release(&t);
  if (!known)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "the expanded tensor's shape is not known");
  t.kind = KN_KIND_TENSOR;
  if ((st = kn_tensor_alloc(&t.t, KN_DTYPE_F32, 4, dims, ctx->err))) {
    kn_slot_release(&t);
    return st;
  }
  kn_slot *ein[3] = {ctx->in[0], ctx->in[1], ctx->n_in > 3 ? ctx->in[3] : NULL};
  kn_slot *eout[1] = {&t};
  kn_op_ctx ec = sub_ctx(ctx, &s.e, ein, eout);
  st = s.e.op->run(&ec);
  if (!st) {
    kn_slot *din[3] = {&t, ctx->in[2], ctx->n_in > 4 ? ctx->in[4] : NULL};
    kn_op_ctx dc = sub_ctx(ctx, &s.d, din, ctx->out);
    st = s.d.op->run(&dc);
  }
  kn_slot_release(&t);
  return st;
}

static double edw_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *we = kn_in(ctx, 1), *wd = kn_in(ctx, 2);
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!x || !we || !wd || !y || x->rank != 4 || we->rank != 4 || wd->rank != 4 || y->rank != 4)
    return 0;
  double px = 1, py = 1;
  for (int32_t i = 0; i < 3; i++) {
    px *= x->dims[i] < 0 ? 1 : (double)x->dims[i];
    py *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
  }
  double e = we->dims[0] < 0 ? 1 : (double)we->dims[0];
  double c = x->dims[3] < 0 ? 1 : (double)x->dims[3];
  double taps = (wd->dims[2] < 0 ? 1 : (double)wd->dims[2]) *
                (wd->dims[3] < 0 ? 1 : (double)wd->dims[3]);
  /* products, plus bias and activation per element of T and Y */
  return 2.0 * px * e * c + 2.0 * px * e + 2.0 * py * e * taps + 2.0 * py * e;
}

const kn_op_def kn_ops_expand_dw[] = {
    {"NhwcExpandDwConv", KN_DOMAIN, 3, 5, 1, 1, 1, 1, edw_infer, edw_run, edw_flops,
     .select = edw_select, .pack = edw_pack, .unpack = edw_unpack},
    KN_OP_END,
};
