/* Tactics of the unary family (src/ops/unary.c): float32 activations,
 * Exp, Erf, Neg, Abs, Sqrt, Reciprocal and Clip on the vectorised kernels
 * (kernels/eltwise). */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/unary.h"

/* Ops with a vectorised float32 kernel (src/kernels/eltwise), -1 for the
 * others. */
static int un_vop(const char *name) {
  static const struct {
    const char *name;
    int op;
  } map[] = {
      {"Relu", KN_ACT_RELU},        {"Sigmoid", KN_ACT_SIGMOID},
      {"Tanh", KN_ACT_TANH},        {"LeakyRelu", KN_ACT_LEAKYRELU},
      {"HardSigmoid", KN_ACT_HARDSIGMOID}, {"HardSwish", KN_ACT_HARDSWISH},
      {"Clip", KN_ACT_CLIP},        {"Exp", KN_VOP_EXP},
      {"Erf", KN_VOP_ERF},          {"Neg", KN_VOP_NEG},
      {"Abs", KN_VOP_ABS},          {"Sqrt", KN_VOP_SQRT},
      {"Reciprocal", KN_VOP_RECIPROCAL},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, name) == 0) return map[i].op;
  return -1;
}

/* float32 inputs of the ops above take the vectorised kernels. */
static int32_t un_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0 || un_vop(n->op_type) < 0) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_eltwise : 0;
}

/* Whether the run takes input x (else: the reference). */
static bool un_fast(const kn_op_ctx *ctx, const kn_tensor *x) {
  return ctx->node->tactic == KN_TACTIC_eltwise && x && x->dtype == KN_DTYPE_F32;
}

static kn_status un_fast_run(kn_op_ctx *ctx) {
  int vop = un_vop(ctx->node->op_type);
  if (vop < 0 || !un_fast(ctx, kn_in(ctx, 0))) return ctx->node->op->run(ctx);
  const kn_tensor *x;
  kn_tensor *o;
  kn_unary_params p;
  kn_status st = kn_unary_begin(ctx, &x, &o, &p);
  if (st) return st;
  kn_act_params ap = {.alpha = p.alpha, .beta = p.beta};
  kn_ew_unary(ctx->rt, vop, &ap, x->data, o->data, kn_tensor_numel(x));
  return KN_OK;
}

static kn_status clip_fast_run(kn_op_ctx *ctx) {
  if (!un_fast(ctx, kn_in(ctx, 0))) return ctx->node->op->run(ctx);
  const kn_tensor *x;
  kn_tensor *o;
  kn_status st = kn_clip_begin(ctx, &x, &o);
  if (st) return st;
  double l, h;
  kn_clip_bounds(ctx, &l, &h);
  kn_act_params ap = {.lo = (float)l, .hi = (float)h};
  kn_ew_unary(ctx->rt, KN_ACT_CLIP, &ap, x->data, o->data, kn_tensor_numel(x));
  return KN_OK;
}

#define UN(NAME) {NULL, NAME, .select = un_select, .run = un_fast_run}

const kn_op_tactics kn_tactics_unary[] = {
    UN("Relu"),
    UN("Sigmoid"),
    UN("Tanh"),
    UN("LeakyRelu"),
    UN("HardSigmoid"),
    UN("HardSwish"),
    UN("Exp"),
    UN("Erf"),
    UN("Neg"),
    UN("Abs"),
    UN("Sqrt"),
    UN("Reciprocal"),
    {NULL, "Clip", .select = un_select, .run = clip_fast_run},
    KN_TACTICS_END,
};
