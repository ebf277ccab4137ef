/*
 * kiln's own activation ops (domain "kiln"), made by the optimizer's
 * pattern passes:
 *   Gelu(x) attr approximate = "none": 0.5 x (1 + erf(x / sqrt 2))
 *                              "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * and kiln-domain aliases of standard ops that are newer than many exported
 * models' opset (HardSwish is opset 14, LayerNormalization opset 17): a
 * pass that recognises the decomposed form in an opset-13 model writes the
 * alias, which runs the standard op's code at the opset that defines it.
 * Their fast paths are src/tactics/activation_tactics.c.
 */
#include "activation.h"

#include <math.h>

static const kn_dtype gelu_types[] = {KN_DTYPE_F32, KN_DTYPE_F64, 0};

kn_status kn_gelu_tanh_attr(kn_op_ctx *ctx, bool *tanh_form) {
  const char *a = kn_attr_str(ctx, "approximate", "none");
  *tanh_form = strcmp(a, "tanh") == 0;
  if (!*tanh_form && strcmp(a, "none") != 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "attribute approximate is '%s', expected 'none' or 'tanh'", a);
  return KN_OK;
}

static kn_status gelu_infer(kn_op_ctx *ctx) {
  bool tf;
  kn_status st = kn_gelu_tanh_attr(ctx, &tf);
  if (st) return st;
  const kn_tensor *x;
  st = kn_in_req(ctx, 0, &x);
  if (!st && x->dtype) st = kn_check_dtype(ctx, 0, x, gelu_types);
  if (st) return st;
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

/* sqrt(2/pi) */
#define KN_GELU_BETA 0.7978845608028654
#define KN_GELU_KAPPA 0.044715

static void gelu_f32(int64_t n, const float *x, float *y, bool tf) {
  if (tf) {
    for (int64_t i = 0; i < n; i++) {
      float v = x[i];
      y[i] = 0.5f * v * (1.0f + tanhf((float)KN_GELU_BETA * (v + (float)KN_GELU_KAPPA * v * v * v)));
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float v = x[i];
      y[i] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
    }
  }
}

static void gelu_f64(int64_t n, const double *x, double *y, bool tf) {
  if (tf) {
    for (int64_t i = 0; i < n; i++) {
      double v = x[i];
      y[i] = 0.5 * v * (1.0 + tanh(KN_GELU_BETA * (v + KN_GELU_KAPPA * v * v * v)));
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      double v = x[i];
      y[i] = 0.5 * v * (1.0 + erf(v * M_SQRT1_2));
    }
  }
}

static kn_status gelu_run(kn_op_ctx *ctx) {
  bool tf;
  kn_status st = kn_gelu_tanh_attr(ctx, &tf);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  int64_t n = kn_tensor_numel(x);
  if (x->dtype == KN_DTYPE_F32) gelu_f32(n, x->data, y->data, tf);
  else gelu_f64(n, x->data, y->data, tf);
  return KN_OK;
}

static double gelu_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  return x && kn_shape_known(x) ? 8.0 * (double)kn_tensor_numel(x) : 0;
}

/* ---- aliases of standard ops --------------------------------------------- */

/* The standard op a kiln-domain alias of the same name runs, from the
 * family that defines it. */
static const kn_op_def *alias_of(const char *op_type) {
  static const struct {
    const char *name;
    const kn_op_def *family;
  } aliases[] = {{"HardSwish", kn_ops_unary}, {"LayerNormalization", kn_ops_norm}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcmp(aliases[i].name, op_type)) return kn_op_in(aliases[i].family, "", op_type);
  return NULL;
}

const kn_op_def *kn_alias_target(const kn_op_ctx *ctx, kn_op_ctx *c) {
  const kn_op_def *d = alias_of(ctx->node->op_type);
  KN_ASSERT(d != NULL);
  *c = *ctx;
  c->opset = d->since;
  return d;
}

static kn_status alias_infer(kn_op_ctx *ctx) {
  kn_op_ctx c;
  const kn_op_def *d = kn_alias_target(ctx, &c);
  return d->infer(&c);
}

static kn_status alias_run(kn_op_ctx *ctx) {
  kn_op_ctx c;
  const kn_op_def *d = kn_alias_target(ctx, &c);
  return d->run(&c);
}

static double alias_flops(const kn_op_ctx *ctx) {
  kn_op_ctx c;
  const kn_op_def *d = kn_alias_target(ctx, &c);
  if (d->flops) return d->flops(&c);
  const kn_tensor *x = kn_in(ctx, 0);
  return x && kn_shape_known(x) ? (double)kn_tensor_numel(x) : 0;
}

const kn_op_def kn_ops_activation[] = {
    {"Gelu", KN_DOMAIN, 1, 1, 1, 1, 1, 1, gelu_infer, gelu_run, gelu_flops},
    {"HardSwish", KN_DOMAIN, 1, 1, 1, 1, 1, 1, alias_infer, alias_run, alias_flops},
    {"LayerNormalization", KN_DOMAIN, 2, 3, 1, 3, 1, 1, alias_infer, alias_run, alias_flops},
    KN_OP_END,
};
