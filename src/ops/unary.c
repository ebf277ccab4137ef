/*
 * Elementwise ops on one tensor.  Each math op is one row of un_defs: a
 * float32 loop and a float64 loop generated from one expression (tgmath
 * picks expf or exp by the element type), plus, for ops defined on
 * integers, a function on int64 (unsigned dtypes flagged so that u64
 * values above INT64_MAX stay right).  float16/bfloat16 run through the
 * float32 loop in chunks.  IsNaN, IsInf, Not, BitwiseNot and Clip have
 * their own entry points.  The vectorised float32 kernels of the common
 * activations and Clip are src/tactics/unary_tactics.c.
 */
#include "unary.h"

#include <float.h>
#include <tgmath.h>

typedef kn_unary_params uparams;

typedef void (*un_f32)(int64_t n, const float *x, float *y, const uparams *p);
typedef void (*un_f64)(int64_t n, const double *x, double *y, const uparams *p);
/* Integer form; `uns`: x holds an unsigned value (bits of a uint64). */
typedef int64_t (*un_int)(int64_t x, bool uns, const uparams *p);

#define UN_KERNELS(NAME, EXPR)                                                 \
  static void NAME##_f32(int64_t n, const float *X, float *Y,                  \
                         const uparams *p) {                                   \
    typedef float T;                                                           \
    (void)p;                                                                   \
    for (int64_t i = 0; i < n; i++) {                                          \
      T x = X[i];                                                              \
      Y[i] = (T)(EXPR);                                                        \
    }                                                                          \
  }                                                                            \
  static void NAME##_f64(int64_t n, const double *X, double *Y,                \
                         const uparams *p) {                                   \
    typedef double T;                                                          \
    (void)p;                                                                   \
    for (int64_t i = 0; i < n; i++) {                                          \
      T x = X[i];                                                              \
      Y[i] = (T)(EXPR);                                                        \
    }                                                                          \
  }

#define SOFTPLUS(x) ((x) > 0 ? (x) + log1p(exp(-(x))) : log1p(exp(x)))

UN_KERNELS(abs, fabs(x))
UN_KERNELS(neg, -x)
UN_KERNELS(sqrt, sqrt(x))
UN_KERNELS(exp, exp(x))
UN_KERNELS(log, log(x))
UN_KERNELS(erf, erf(x))
UN_KERNELS(tanh, tanh(x))
UN_KERNELS(sigmoid, x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)))
UN_KERNELS(relu, x < 0 ? 0 : x)
UN_KERNELS(leakyrelu, x < 0 ? (T)p->alpha * x : x)
UN_KERNELS(elu, x < 0 ? (T)p->alpha * (exp(x) - 1) : x)
UN_KERNELS(selu, (T)p->gamma * (x > 0 ? x : (T)p->alpha * (exp(x) - 1)))
UN_KERNELS(celu, (x > 0 ? x : 0) +
                     (x < 0 ? (T)p->alpha * (exp(x / (T)p->alpha) - 1) : 0))
UN_KERNELS(hardsigmoid, fmax((T)0, fmin((T)1, (T)p->alpha * x + (T)p->beta)))
UN_KERNELS(hardswish, x * fmax((T)0, fmin((T)1, x / 6 + (T)0.5)))
UN_KERNELS(softplus, SOFTPLUS(x))
UN_KERNELS(softsign, x / (1 + fabs(x)))
UN_KERNELS(reciprocal, 1 / x)
UN_KERNELS(floor, floor(x))
UN_KERNELS(ceil, ceil(x))
UN_KERNELS(round, rint(x))
UN_KERNELS(sign, x > 0 ? 1 : (x < 0 ? -1 : x))
UN_KERNELS(sin, sin(x))
UN_KERNELS(cos, cos(x))
UN_KERNELS(tan, tan(x))
UN_KERNELS(asin, asin(x))
UN_KERNELS(acos, acos(x))
UN_KERNELS(atan, atan(x))
UN_KERNELS(sinh, sinh(x))
UN_KERNELS(cosh, cosh(x))
UN_KERNELS(asinh, asinh(x))
UN_KERNELS(acosh, acosh(x))
UN_KERNELS(atanh, atanh(x))
UN_KERNELS(thresholdedrelu, x > (T)p->alpha ? x : 0)
UN_KERNELS(shrink, x < -(T)p->lambd ? x + (T)p->bias
                                    : (x > (T)p->lambd ? x - (T)p->bias : 0))
UN_KERNELS(mish, x * tanh(SOFTPLUS(x)))

static int64_t abs_i(int64_t x, bool uns, const uparams *p) {
  (void)p;
  return (uns || x >= 0) ? x : (int64_t)(0 - (uint64_t)x);
}
static int64_t neg_i(int64_t x, bool uns, const uparams *p) {
  (void)p;
  (void)uns;
  return (int64_t)(0 - (uint64_t)x);
}
static int64_t sign_i(int64_t x, bool uns, const uparams *p) {
  (void)p;
  if (uns) return x != 0;
  return (x > 0) - (x < 0);
}
static int64_t relu_i(int64_t x, bool uns, const uparams *p) {
  (void)p;
  return (uns || x > 0) ? x : 0;
}

typedef struct un_def {
  const char *name;
  int16_t since;
  un_f32 f32;
  un_f64 f64;
  un_int fi;          /* NULL: no integer form (float dtypes only) */
  bool ints_via_f64;  /* integers computed through the float64 loop */
  float alpha, beta, gamma;
} un_def;

#define ROW(NAME, OP, SINCE) {NAME, SINCE, OP##_f32, OP##_f64, NULL, false, 0, 0, 0}
#define ROWI(NAME, OP, SINCE) {NAME, SINCE, OP##_f32, OP##_f64, OP##_i, false, 0, 0, 0}
#define ROWA(NAME, OP, SINCE, A, B, G)                                         \
  {NAME, SINCE, OP##_f32, OP##_f64, NULL, false, A, B, G}

static const un_def un_defs[] = {
    ROWI("Abs", abs, 1),
    ROWI("Neg", neg, 1),
    ROW("Sqrt", sqrt, 1),
    ROW("Exp", exp, 1),
    ROW("Log", log, 1),
    ROW("Erf", erf, 9),
    ROW("Tanh", tanh, 1),
    ROW("Sigmoid", sigmoid, 1),
    ROWI("Relu", relu, 1),
    ROWA("LeakyRelu", leakyrelu, 1, 0.01f, 0, 0),
    ROWA("Elu", elu, 1, 1.0f, 0, 0),
    ROWA("Selu", selu, 1, 1.67326319217681884765625f, 0, 1.05070102214813232421875f),
    ROWA("Celu", celu, 12, 1.0f, 0, 0),
    ROWA("HardSigmoid", hardsigmoid, 1, 0.2f, 0.5f, 0),
    ROW("HardSwish", hardswish, 14),
    ROW("Softplus", softplus, 1),
    ROW("Softsign", softsign, 1),
    ROW("Reciprocal", reciprocal, 1),
    ROW("Floor", floor, 1),
    ROW("Ceil", ceil, 1),
    ROW("Round", round, 11),
    ROWI("Sign", sign, 9),
    ROW("Sin", sin, 7),
    ROW("Cos", cos, 7),
    ROW("Tan", tan, 7),
    ROW("Asin", asin, 7),
    ROW("Acos", acos, 7),
    ROW("Atan", atan, 7),
    ROW("Sinh", sinh, 9),
    ROW("Cosh", cosh, 9),
    ROW("Asinh", asinh, 9),
    ROW("Acosh", acosh, 9),
    ROW("Atanh", atanh, 9),
    ROWA("ThresholdedRelu", thresholdedrelu, 1, 1.0f, 0, 0),
    {"Shrink", 9, shrink_f32, shrink_f64, NULL, true, 0, 0, 0},
    ROW("Mish", mish, 18),
};

static const un_def *find_un(const kn_op_ctx *ctx) {
  for (size_t i = 0; i < sizeof un_defs / sizeof un_defs[0]; i++)
    if (strcmp(un_defs[i].name, ctx->node->op_type) == 0) return &un_defs[i];
  KN_ASSERT(!"unary op without a row in un_defs");
  return NULL;
}

static bool dtype_unsigned(kn_dtype t) {
  return t == KN_DTYPE_U8 || t == KN_DTYPE_U16 || t == KN_DTYPE_U32 ||
         t == KN_DTYPE_U64;
}

static kn_status dtype_fail(kn_op_ctx *ctx, kn_dtype t, const char *expected) {
  return kn_op_fail(ctx, KN_ERR_DTYPE, "input has dtype %s, expected %s",
                    kn_dtype_name(t) ? kn_dtype_name(t) : "unknown", expected);
}

static kn_status un_infer(kn_op_ctx *ctx) {
  const un_def *d = find_un(ctx);
  const kn_tensor *x = kn_in(ctx, 0);
  if (x && x->dtype) {
    bool ok = kn_dtype_is_float(x->dtype) ||
              (kn_dtype_is_int(x->dtype) && (d->fi || d->ints_via_f64));
    if (!ok)
      return dtype_fail(ctx, x->dtype,
                        d->fi || d->ints_via_f64 ? "a number type" : "a float type");
  }
  if (!x && !ctx->static_infer)
    return kn_op_fail(ctx, KN_ERR_MISSING, "input 0 is required");
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status out_like_checked(kn_op_ctx *ctx, const kn_tensor *x, kn_dtype dt,
                                  kn_tensor **o) {
  kn_tensor *t = kn_out(ctx, 0);
  bool ok = t->dtype == dt && t->rank == x->rank &&
            (t->data || kn_tensor_numel(x) == 0);
  for (int32_t i = 0; ok && i < x->rank; i++) ok = t->dims[i] == x->dims[i];
  if (!ok) {
    kn_status st = kn_out_alloc(ctx, 0, dt, x->rank, x->dims);
    if (st) return st;
    t = kn_out(ctx, 0);
  }
  *o = t;
  return KN_OK;
}

#define CHUNK 512

/* Half-precision input through a float32 loop, CHUNK elements at a time. */
static void run_half(un_f32 f, const uparams *p, kn_dtype dt, int64_t n,
                     const uint16_t *x, uint16_t *y) {
  float a[CHUNK], b[CHUNK];
  for (int64_t s = 0; s < n; s += CHUNK) {
    int64_t m = n - s < CHUNK ? n - s : CHUNK;
    kn_convert(x + s, dt, a, KN_DTYPE_F32, m);
    f(m, a, b, p);
    kn_convert(b, KN_DTYPE_F32, y + s, dt, m);
  }
}

static kn_status un_begin(kn_op_ctx *ctx, const un_def *d, const kn_tensor **xp, kn_tensor **o,
                          uparams *p) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = un_infer(ctx);
  if (st) return st;
  st = out_like_checked(ctx, x, x->dtype, o);
  if (st) return st;
  *p = (uparams){kn_attr_float(ctx, "alpha", d->alpha), kn_attr_float(ctx, "beta", d->beta),
                 kn_attr_float(ctx, "gamma", d->gamma), kn_attr_float(ctx, "lambd", 0.5f),
                 kn_attr_float(ctx, "bias", 0.0f)};
  *xp = x;
  return KN_OK;
}

kn_status kn_unary_begin(kn_op_ctx *ctx, const kn_tensor **x, kn_tensor **o, uparams *p) {
  return un_begin(ctx, find_un(ctx), x, o, p);
}

static kn_status un_run(kn_op_ctx *ctx) {
  const un_def *d = find_un(ctx);
  const kn_tensor *x;
  kn_tensor *o;
  uparams p;
  kn_status st = un_begin(ctx, d, &x, &o, &p);
  if (st) return st;
  int64_t n = kn_tensor_numel(x);
  switch (x->dtype) {
  case KN_DTYPE_F32: d->f32(n, x->data, o->data, &p); break;
  case KN_DTYPE_F64: d->f64(n, x->data, o->data, &p); break;
  case KN_DTYPE_F16:
  case KN_DTYPE_BF16: run_half(d->f32, &p, x->dtype, n, x->data, o->data); break;
  default:
    if (d->fi) {
      bool uns = dtype_unsigned(x->dtype);
      for (int64_t i = 0; i < n; i++)
        kn_store_i64(o->data, o->dtype, i, d->fi(kn_load_i64(x->data, x->dtype, i), uns, &p));
    } else {
      for (int64_t i = 0; i < n; i++) {
        double v = kn_load_f64(x->data, x->dtype, i), r;
        d->f64(1, &v, &r, &p);
        kn_store_f64(o->data, o->dtype, i, r);
      }
    }
    break;
  }
  return KN_OK;
}

/* ---- IsNaN, IsInf, Not, BitwiseNot --------------------------------------- */

static kn_status pred_infer(kn_op_ctx *ctx) {
  const char *op = ctx->node->op_type;
  const kn_tensor *x = kn_in(ctx, 0);
  bool is_not = strcmp(op, "Not") == 0, is_bnot = strcmp(op, "BitwiseNot") == 0;
  if (x && x->dtype) {
    if (is_not && x->dtype != KN_DTYPE_BOOL) return dtype_fail(ctx, x->dtype, "bool");
    if (is_bnot && !kn_dtype_is_int(x->dtype))
      return dtype_fail(ctx, x->dtype, "an integer type");
    if (!is_not && !is_bnot && !kn_dtype_is_float(x->dtype))
      return dtype_fail(ctx, x->dtype, "a float type");
  }
  if (!x && !ctx->static_infer)
    return kn_op_fail(ctx, KN_ERR_MISSING, "input 0 is required");
  kn_out_like(ctx, 0, 0, is_bnot ? 0 : KN_DTYPE_BOOL);
  return KN_OK;
}

static kn_status pred_run(kn_op_ctx *ctx) {
  const char *op = ctx->node->op_type;
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = pred_infer(ctx);
  if (st) return st;
  bool is_bnot = strcmp(op, "BitwiseNot") == 0;
  kn_tensor *o;
  st = out_like_checked(ctx, x, is_bnot ? x->dtype : KN_DTYPE_BOOL, &o);
  if (st) return st;
  int64_t n = kn_tensor_numel(x);
  uint8_t *y = o->data;
  if (strcmp(op, "Not") == 0) {
    const uint8_t *b = x->data;
    for (int64_t i = 0; i < n; i++) y[i] = !b[i];
  } else if (is_bnot) {
    for (int64_t i = 0; i < n; i++)
      kn_store_i64(o->data, o->dtype, i, ~kn_load_i64(x->data, x->dtype, i));
  } else if (strcmp(op, "IsNaN") == 0) {
    if (x->dtype == KN_DTYPE_F32) {
      const float *f = x->data;
      for (int64_t i = 0; i < n; i++) y[i] = isnan(f[i]) != 0;
    } else {
      for (int64_t i = 0; i < n; i++) y[i] = isnan(kn_load_f64(x->data, x->dtype, i)) != 0;
    }
  } else {
    bool neg = kn_attr_int(ctx, "detect_negative", 1) != 0;
    bool pos = kn_attr_int(ctx, "detect_positive", 1) != 0;
    for (int64_t i = 0; i < n; i++) {
      double v = kn_load_f64(x->data, x->dtype, i);
      y[i] = isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    }
  }
  return KN_OK;
}

/* ---- Clip ---------------------------------------------------------------- */

/* Bound i (1: min, 2: max) when given as an input (opset >= 11). */
static kn_status clip_bound(kn_op_ctx *ctx, const kn_tensor *x, int32_t i,
                            const kn_tensor **b) {
  *b = kn_in(ctx, i);
  if (!*b) return KN_OK;
  if (x && x->dtype && (*b)->dtype && (*b)->dtype != x->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "%s has dtype %s, expected %s like the input",
                      i == 1 ? "min" : "max", kn_dtype_name((*b)->dtype),
                      kn_dtype_name(x->dtype));
  if (kn_shape_known(*b) && kn_tensor_numel(*b) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s must be a scalar, got %lld elements",
                      i == 1 ? "min" : "max", (long long)kn_tensor_numel(*b));
  return KN_OK;
}

static kn_status clip_infer(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *lo, *hi;
  if (x && x->dtype) {
    bool ok = kn_dtype_is_float(x->dtype) ||
              (ctx->opset >= 12 && kn_dtype_is_int(x->dtype));
    if (!ok) return dtype_fail(ctx, x->dtype, "a number type (floats before opset 12)");
  }
  if (ctx->opset >= 11) {
    kn_status st = clip_bound(ctx, x, 1, &lo);
    if (!st) st = clip_bound(ctx, x, 2, &hi);
    if (st) return st;
  }
  if (!x && !ctx->static_infer)
    return kn_op_fail(ctx, KN_ERR_MISSING, "input 0 is required");
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static void clip_f32(int64_t n, const float *x, float *y, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) {
    float t = x[i] < lo ? lo : x[i];
    y[i] = t > hi ? hi : t;
  }
}

kn_status kn_clip_begin(kn_op_ctx *ctx, const kn_tensor **xp, kn_tensor **o) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = clip_infer(ctx);
  if (!st) st = out_like_checked(ctx, x, x->dtype, o);
  if (!st) *xp = x;
  return st;
}

void kn_clip_bounds(const kn_op_ctx *ctx, double *l, double *h) {
  const kn_tensor *lo = ctx->opset >= 11 ? kn_in(ctx, 1) : NULL;
  const kn_tensor *hi = ctx->opset >= 11 ? kn_in(ctx, 2) : NULL;
  if (ctx->opset < 11) {
    *l = kn_attr_float(ctx, "min", -FLT_MAX);
    *h = kn_attr_float(ctx, "max", FLT_MAX);
  } else {
    *l = lo ? kn_scalar_f64(lo) : -INFINITY;
    *h = hi ? kn_scalar_f64(hi) : INFINITY;
  }
}

static kn_status clip_run(kn_op_ctx *ctx) {
  const kn_tensor *x, *lo = NULL, *hi = NULL;
  kn_tensor *o;
  kn_status st = kn_clip_begin(ctx, &x, &o);
  if (st) return st;
  if (ctx->opset >= 11) {
    lo = kn_in(ctx, 1);
    hi = kn_in(ctx, 2);
  }
  int64_t n = kn_tensor_numel(x);
  if (kn_dtype_is_int(x->dtype)) {
    if (dtype_unsigned(x->dtype)) {
      uint64_t l = lo ? (uint64_t)kn_scalar_i64(lo) : 0;
      uint64_t h = hi ? (uint64_t)kn_scalar_i64(hi) : UINT64_MAX;
      for (int64_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)kn_load_i64(x->data, x->dtype, i);
        v = v < l ? l : v;
        kn_store_i64(o->data, o->dtype, i, (int64_t)(v > h ? h : v));
      }
    } else {
      int64_t l = lo ? kn_scalar_i64(lo) : INT64_MIN;
      int64_t h = hi ? kn_scalar_i64(hi) : INT64_MAX;
      for (int64_t i = 0; i < n; i++) {
        int64_t v = kn_load_i64(x->data, x->dtype, i);
        v = v < l ? l : v;
        kn_store_i64(o->data, o->dtype, i, v > h ? h : v);
      }
    }
    return KN_OK;
  }
  double l, h;
  kn_clip_bounds(ctx, &l, &h);
  if (x->dtype == KN_DTYPE_F32) {
    clip_f32(n, x->data, o->data, (float)l, (float)h);
  } else if (x->dtype == KN_DTYPE_F64) {
    const double *xd = x->data;
    double *yd = o->data;
    for (int64_t i = 0; i < n; i++) {
      double t = xd[i] < l ? l : xd[i];
      yd[i] = t > h ? h : t;
    }
  } else {
    float a[CHUNK];
    for (int64_t s = 0; s < n; s += CHUNK) {
      int64_t m = n - s < CHUNK ? n - s : CHUNK;
      for (int64_t i = 0; i < m; i++) a[i] = (float)kn_load_f64(x->data, x->dtype, s + i);
      clip_f32(m, a, a, (float)l, (float)h);
      for (int64_t i = 0; i < m; i++) kn_store_f64(o->data, o->dtype, s + i, a[i]);
    }
  }
  return KN_OK;
}

#define UN(NAME, SINCE)                                                        \
  {NAME, NULL, 1, 1, 1, 1, SINCE, 22, un_infer, un_run, NULL, KN_INPLACE_ELEMWISE}
#define PRED(NAME, SINCE)                                                      \
  {NAME, NULL, 1, 1, 1, 1, SINCE, 22, pred_infer, pred_run, NULL, KN_INPLACE_ELEMWISE}

const kn_op_def kn_ops_unary[] = {
    UN("Abs", 1),
    UN("Neg", 1),
    UN("Sqrt", 1),
    UN("Exp", 1),
    UN("Log", 1),
    UN("Erf", 9),
    UN("Tanh", 1),
    UN("Sigmoid", 1),
    UN("Relu", 1),
    UN("LeakyRelu", 1),
    UN("Elu", 1),
    UN("Selu", 1),
    UN("Celu", 12),
    UN("HardSigmoid", 1),
    UN("HardSwish", 14),
    UN("Softplus", 1),
    UN("Softsign", 1),
    UN("Reciprocal", 1),
    UN("Floor", 1),
    UN("Ceil", 1),
    UN("Round", 11),
    UN("Sign", 9),
    UN("Sin", 7),
    UN("Cos", 7),
    UN("Tan", 7),
    UN("Asin", 7),
    UN("Acos", 7),
    UN("Atan", 7),
    UN("Sinh", 9),
    UN("Cosh", 9),
    UN("Asinh", 9),
    UN("Acosh", 9),
    UN("Atanh", 9),
    UN("ThresholdedRelu", 1),
    UN("Shrink", 9),
    UN("Mish", 18),
    PRED("IsNaN", 9),
    PRED("IsInf", 10),
    PRED("Not", 1),
    PRED("BitwiseNot", 18),
    {"Clip", NULL, 1, 3, 1, 1, 1, 22, clip_infer, clip_run, NULL, KN_INPLACE_ELEMWISE},
    KN_OP_END,
};
