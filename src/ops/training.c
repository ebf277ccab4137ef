/* Optimizer steps of the ai.onnx.preview.training domain: Adagrad, Adam,
 * Momentum.  Each updates n tensors at once; inputs are R, T, then n
 * tensors per group (X, G, then the optimizer's state), outputs the new X
 * and the new state.  X, G and the state of one tensor share a shape; the
 * arithmetic is done in double and stored in X's dtype (float or double). */
#include "op.h"

#include <math.h>

typedef enum { OPT_ADAGRAD, OPT_ADAM, OPT_MOMENTUM } opt_kind;

/* groups of inputs per tensor (X, G, state...) and of outputs */
static int32_t in_groups(opt_kind k) { return k == OPT_ADAM ? 4 : 3; }
static int32_t out_groups(opt_kind k) { return k == OPT_ADAM ? 3 : 2; }

static kn_status opt_check(kn_op_ctx *ctx, opt_kind k, int32_t *n_out) {
  int32_t gi = in_groups(k), go = out_groups(k);
  int32_t nt = (ctx->n_in - 2) / gi;
  if (nt < 1 || (ctx->n_in - 2) % gi != 0)
    return kn_op_fail(ctx, KN_ERR_PARSE,
                      "expects R, T and %d inputs per optimized tensor, got %d inputs",
                      gi, ctx->n_in);
  if (ctx->n_out > nt * go)
    return kn_op_fail(ctx, KN_ERR_PARSE, "has %d outputs, at most %d expected (%d per tensor)",
                      ctx->n_out, nt * go, go);
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t;
    kn_status st = kn_in_req(ctx, i, &t);
    if (st) return st;
    if (i >= 2 && t->dtype && t->dtype != KN_DTYPE_F32 && t->dtype != KN_DTYPE_F64)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected float32 or float64",
                        i, kn_dtype_name(t->dtype));
  }
  const kn_tensor *t = kn_in(ctx, 1);
  if (t->dtype && t->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "T must be int64, got %s", kn_dtype_name(t->dtype));
  for (int32_t x = 0; x < nt; x++) {
    const kn_tensor *X = kn_in(ctx, 2 + x);
    for (int32_t g = 1; g < gi; g++) {
      const kn_tensor *o = kn_in(ctx, 2 + g * nt + x);
      bool same = X->rank < 0 || o->rank < 0 || X->rank == o->rank;
      for (int32_t d = 0; same && X->rank >= 0 && d < X->rank && o->rank >= 0; d++)
        same = X->dims[d] < 0 || o->dims[d] < 0 || X->dims[d] == o->dims[d];
      if (!same) {
        char a[96], b[96];
        return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d has shape %s but X (input %d) has %s",
                          2 + g * nt + x, kn_shape_str(o->rank, o->dims, a, sizeof a),
                          2 + x, kn_shape_str(X->rank, X->dims, b, sizeof b));
      }
    }
  }
  *n_out = nt;
  return KN_OK;
}

static kn_status opt_infer_kind(kn_op_ctx *ctx, opt_kind k) {
  int32_t nt;
  kn_status st = opt_check(ctx, k, &nt);
  if (st) return st;
  for (int32_t o = 0; o < ctx->n_out; o++) kn_out_like(ctx, o, 2 + o % nt + (o / nt == 0 ? 0 : (o / nt + 1) * nt), 0);
  return KN_OK;
}

static kn_status opt_run_kind(kn_op_ctx *ctx, opt_kind k) {
  int32_t nt = (ctx->n_in - 2) / in_groups(k);
  if (kn_tensor_numel(kn_in(ctx, 0)) != 1 || kn_tensor_numel(kn_in(ctx, 1)) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "R and T must be scalars");
  double R = kn_scalar_f64(kn_in(ctx, 0));
  int64_t T = kn_scalar_i64(kn_in(ctx, 1));
  double norm = kn_attr_float(ctx, "norm_coefficient", 0.0f);
  double eps = kn_attr_float(ctx, "epsilon", 1e-6f);
  double decay = kn_attr_float(ctx, "decay_factor", 0.0f);
  double alpha = kn_attr_float(ctx, "alpha", k == OPT_ADAM ? 0.9f : 0.0f);
  double beta = kn_attr_float(ctx, "beta", k == OPT_ADAM ? 0.999f : 0.0f);
  double post = kn_attr_float(ctx, "norm_coefficient_post", 0.0f);
  bool nesterov = strcmp(kn_attr_str(ctx, "mode", "standard"), "nesterov") == 0;
  if (k == OPT_MOMENTUM && !nesterov && strcmp(kn_attr_str(ctx, "mode", "standard"), "standard"))
    return kn_op_fail(ctx, KN_ERR_PARSE, "mode must be 'standard' or 'nesterov', got '%s'",
                      kn_attr_str(ctx, "mode", ""));
  double r_ada = R / (1.0 + (double)T * decay);
  double r_adam = T > 0 ? R * sqrt(1.0 - pow(beta, (double)T)) / (1.0 - pow(alpha, (double)T)) : R;
  double beta_adj = T > 0 ? beta : 1.0;
  for (int32_t x = 0; x < nt; x++) {
    const kn_tensor *X = kn_in(ctx, 2 + x), *G = kn_in(ctx, 2 + nt + x);
    const kn_tensor *S1 = kn_in(ctx, 2 + 2 * nt + x);
    const kn_tensor *S2 = k == OPT_ADAM ? kn_in(ctx, 2 + 3 * nt + x) : NULL;
    kn_tensor *Xo = x < ctx->n_out ? kn_out(ctx, x) : NULL;
    kn_tensor *S1o = nt + x < ctx->n_out ? kn_out(ctx, nt + x) : NULL;
    kn_tensor *S2o = k == OPT_ADAM && 2 * nt + x < ctx->n_out ? kn_out(ctx, 2 * nt + x) : NULL;
    int64_t n = kn_tensor_numel(X);
    for (int64_t i = 0; i < n; i++) {
      double xv = kn_load_f64(X->data, X->dtype, i);
      double g = norm * xv + kn_load_f64(G->data, G->dtype, i);
      double s1 = kn_load_f64(S1->data, S1->dtype, i), s2 = 0, xn;
      if (k == OPT_ADAGRAD) {
        s1 += g * g;
        xn = xv - r_ada * g / (sqrt(s1) + eps);
      } else if (k == OPT_ADAM) {
        s2 = kn_load_f64(S2->data, S2->dtype, i);
        s1 = alpha * s1 + (1 - alpha) * g;
        s2 = beta * s2 + (1 - beta) * g * g;
        xn = (1 - post) * (xv - r_adam * s1 / (sqrt(s2) + eps));
      } else {
        s1 = alpha * s1 + beta_adj * g;
        xn = nesterov ? xv - R * (g + alpha * s1) : xv - R * s1;
      }
      if (Xo) kn_store_f64(Xo->data, Xo->dtype, i, xn);
      if (S1o) kn_store_f64(S1o->data, S1o->dtype, i, s1);
      if (S2o) kn_store_f64(S2o->data, S2o->dtype, i, s2);
    }
  }
  return KN_OK;
}

static kn_status adagrad_infer(kn_op_ctx *c) { return opt_infer_kind(c, OPT_ADAGRAD); }
static kn_status adagrad_run(kn_op_ctx *c) { return opt_run_kind(c, OPT_ADAGRAD); }
static kn_status adam_infer(kn_op_ctx *c) { return opt_infer_kind(c, OPT_ADAM); }
static kn_status adam_run(kn_op_ctx *c) { return opt_run_kind(c, OPT_ADAM); }
static kn_status momentum_infer(kn_op_ctx *c) { return opt_infer_kind(c, OPT_MOMENTUM); }
static kn_status momentum_run(kn_op_ctx *c) { return opt_run_kind(c, OPT_MOMENTUM); }

#define TRAINING "ai.onnx.preview.training"
const kn_op_def kn_ops_training[] = {
    {"Adagrad", TRAINING, 5, -1, 1, -1, 1, 1, adagrad_infer, adagrad_run, NULL},
    {"Adam", TRAINING, 6, -1, 1, -1, 1, 1, adam_infer, adam_run, NULL},
    {"Momentum", TRAINING, 5, -1, 1, -1, 1, 1, momentum_infer, momentum_run, NULL},
    KN_OP_END,
};
