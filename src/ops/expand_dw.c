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
 * it replaces.  The fast tactic, conv_expand_dw_nhwc (src/tactics/conv/
 * expand_dw.c), never makes T whole (kernels/conv/expand-dw-nhwc.c): its
 * results are bit-identical to conv_igemm_nhwc followed by
 * conv_depthwise_nhwc.
 */
#include "op.h"

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

static kn_status edw_run(kn_op_ctx *ctx) {
  kn_status st;
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
    {"NhwcExpandDwConv", KN_DOMAIN, 3, 5, 1, 1, 1, 1, edw_infer, edw_run, edw_flops},
    KN_OP_END,
};
