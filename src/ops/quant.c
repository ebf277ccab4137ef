/*
 * Linear quantization: QuantizeLinear, DequantizeLinear (per tensor, per
 * axis, and opset 21 blocked), DynamicQuantizeLinear.
 *
 * Quantize: y = saturate(round_half_even(x / scale) + zero_point)
 * Dequantize: y = (x - zero_point) * scale
 * float32 data is computed in float32, as the ONNX reference does, so that
 * ties round the same way.  The float32 QuantizeLinear and
 * DynamicQuantizeLinear on the int8 GEMM family's vector kernels are
 * src/tactics/quant_tactics.c.
 */
#include "quant.h"

#include <math.h>

/* How scale / zero point map onto x: per tensor, along `axis` (one value
 * per index), or in blocks of `bs` along `axis` (opset 21). */
typedef enum qmode { Q_TENSOR, Q_AXIS, Q_BLOCK } qmode;

typedef struct qlayout {
  qmode mode;
  int64_t outer, dim, inner; /* x viewed as [outer, dim, inner] around axis */
  int64_t bs, nb;            /* block size and blocks along axis */
} qlayout;

static bool same_shape(const kn_tensor *a, const kn_tensor *b) {
  if (a->rank != b->rank) return false;
  for (int32_t i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Checks scale (and zp, when given) against x and fills L.  Shapes that
 * are not fully known (static inference) are skipped. */
static kn_status q_layout(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *scale,
                          const kn_tensor *zp, qlayout *L) {
  memset(L, 0, sizeof *L);
  if (!kn_shape_known(x) || !kn_shape_known(scale) || (zp && !kn_shape_known(zp)))
    return KN_OK;
  if (zp && !same_shape(scale, zp)) {
    char a[128], b[128];
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "scale (%s) and zero point (%s) must have the same shape",
                      kn_shape_str(scale->rank, scale->dims, a, sizeof a),
                      kn_shape_str(zp->rank, zp->dims, b, sizeof b));
  }
  int64_t bs = kn_attr_int(ctx, "block_size", 0);
  if (bs < 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "block_size must be >= 0, got %lld",
                      (long long)bs);
  int64_t nscale = kn_tensor_numel(scale);
  L->outer = 1;
  L->dim = kn_tensor_numel(x);
  L->inner = 1;
  if (bs == 0 && scale->rank <= 1 && nscale == 1) {
    L->mode = Q_TENSOR;
    return KN_OK;
  }
  if (x->rank == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "a scalar input needs a one-element scale, got %lld elements",
                      (long long)nscale);
  int32_t axis;
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 1), x->rank, &axis);
  if (st) return st;
  L->outer = 1;
  for (int32_t i = 0; i < axis; i++) L->outer *= x->dims[i];
  L->dim = x->dims[axis];
  L->inner = 1;
  for (int32_t i = axis + 1; i < x->rank; i++) L->inner *= x->dims[i];
  char a[128], b[128];
  if (bs == 0) {
    if (scale->rank != 1 || scale->dims[0] != L->dim)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "scale of shape %s must be a scalar or 1-D with %lld "
                        "elements (x is %s, axis %d)",
                        kn_shape_str(scale->rank, scale->dims, a, sizeof a),
                        (long long)L->dim, kn_shape_str(x->rank, x->dims, b, sizeof b),
                        (int)axis);
    L->mode = Q_AXIS;
    L->bs = 1;
    L->nb = L->dim;
    return KN_OK;
  }
  L->mode = Q_BLOCK;
  L->bs = bs;
  L->nb = (L->dim + bs - 1) / bs;
  bool ok = scale->rank == x->rank;
  for (int32_t i = 0; ok && i < x->rank; i++)
    ok = scale->dims[i] == (i == axis ? L->nb : x->dims[i]);
  if (!ok)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "blocked scale of shape %s does not fit x %s with block_size "
                      "%lld on axis %d",
                      kn_shape_str(scale->rank, scale->dims, a, sizeof a),
                      kn_shape_str(x->rank, x->dims, b, sizeof b), (long long)bs,
                      (int)axis);
  return KN_OK;
}

static inline int64_t q_index(const qlayout *L, int64_t o, int64_t d, int64_t in) {
  switch (L->mode) {
  case Q_TENSOR: return 0;
  case Q_AXIS: return d;
  default: return (o * L->nb + d / L->bs) * L->inner + in;
  }
}

static void q_range(kn_dtype t, double *lo, double *hi) {
  switch (t) {
  case KN_DTYPE_U8: *lo = 0; *hi = 255; break;
  case KN_DTYPE_I8: *lo = -128; *hi = 127; break;
  case KN_DTYPE_U16: *lo = 0; *hi = 65535; break;
  case KN_DTYPE_I16: *lo = -32768; *hi = 32767; break;
  default: *lo = -2147483648.0; *hi = 2147483647.0; break;
  }
}

static const kn_dtype qint_types[] = {KN_DTYPE_U8, KN_DTYPE_I8, KN_DTYPE_U16,
                                      KN_DTYPE_I16, 0};
static const kn_dtype qfloat_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_BF16, 0};

/* ---- QuantizeLinear -------------------------------------------------------- */

static kn_status quant_out_dtype(kn_op_ctx *ctx, const kn_tensor *zp, kn_dtype *out) {
  int64_t od = kn_attr_int(ctx, "output_dtype", 0);
  if (zp) {
    if (od && zp->dtype && od != zp->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE,
                        "output_dtype %lld differs from the zero point's dtype %s",
                        (long long)od, kn_dtype_name(zp->dtype));
    *out = zp->dtype;
    return KN_OK;
  }
  if (od) {
    bool ok = false;
    for (const kn_dtype *t = qint_types; *t; t++) ok |= (int64_t)*t == od;
    if (!ok)
      return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                        "output_dtype %lld is not supported (uint8, int8, uint16, int16)",
                        (long long)od);
    *out = (kn_dtype)od;
    return KN_OK;
  }
  *out = KN_DTYPE_U8;
  return KN_OK;
}

static kn_status quant_infer(kn_op_ctx *ctx) {
  static const kn_dtype x_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_BF16,
                                     KN_DTYPE_I32, 0};
  const kn_tensor *x, *s, *zp = kn_in(ctx, 2);
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &s)) ||
      (st = kn_check_dtype(ctx, 0, x, x_types)) ||
      (st = kn_check_dtype(ctx, 1, s, qfloat_types)) ||
      (zp && (st = kn_check_dtype(ctx, 2, zp, qint_types))))
    return st;
  kn_dtype ot = KN_DTYPE_U8;
  qlayout L;
  if ((st = quant_out_dtype(ctx, zp, &ot)) || (st = q_layout(ctx, x, s, zp, &L)))
    return st;
  kn_out_like(ctx, 0, 0, ot);
  return KN_OK;
}

kn_status kn_quant_per_tensor(kn_op_ctx *ctx, bool *per_tensor) {
  qlayout L;
  kn_status st = q_layout(ctx, kn_in(ctx, 0), kn_in(ctx, 1), kn_in(ctx, 2), &L);
  *per_tensor = !st && L.mode == Q_TENSOR;
  return st;
}

static kn_status quant_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *s = kn_in(ctx, 1), *zp = kn_in(ctx, 2);
  qlayout L;
  kn_status st = q_layout(ctx, x, s, zp, &L);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  double lo, hi;
  q_range(y->dtype, &lo, &hi);
  bool xf32 = x->dtype == KN_DTYPE_F32, xint = x->dtype == KN_DTYPE_I32;
  for (int64_t o = 0; o < L.outer; o++)
    for (int64_t d = 0; d < L.dim; d++) {
      int64_t base = (o * L.dim + d) * L.inner;
      for (int64_t in = 0; in < L.inner; in++) {
        int64_t qi = q_index(&L, o, d, in);
        float sv = (float)kn_load_f64(s->data, s->dtype, qi);
        double z = zp ? (double)kn_load_i64(zp->data, zp->dtype, qi) : 0.0;
        double v;
        if (xint) {
          v = nearbyint((double)((const int32_t *)x->data)[base + in] / sv);
        } else {
          float xv = xf32 ? ((const float *)x->data)[base + in]
                          : (float)kn_load_f64(x->data, x->dtype, base + in);
          v = nearbyintf(xv / sv);
        }
        v += z;
        if (isnan(v)) v = 0;
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        kn_store_i64(y->data, y->dtype, base + in, (int64_t)v);
      }
    }
  return KN_OK;
}

/* ---- DequantizeLinear ------------------------------------------------------ */

static kn_status dequant_infer(kn_op_ctx *ctx) {
  static const kn_dtype x_types[] = {KN_DTYPE_U8, KN_DTYPE_I8, KN_DTYPE_U16,
                                     KN_DTYPE_I16, KN_DTYPE_I32, 0};
  const kn_tensor *x, *s, *zp = kn_in(ctx, 2);
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &s)) ||
      (st = kn_check_dtype(ctx, 0, x, x_types)) ||
      (st = kn_check_dtype(ctx, 1, s, qfloat_types)) ||
      (zp && (st = kn_check_dtype(ctx, 2, zp, x_types))))
    return st;
  if (zp && x->dtype && zp->dtype && zp->dtype != x->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "zero point is %s but x is %s; they must match",
                      kn_dtype_name(zp->dtype), kn_dtype_name(x->dtype));
  qlayout L;
  if ((st = q_layout(ctx, x, s, zp, &L))) return st;
  /* Before opset 19 the output is float32; since, the scale's type. */
  kn_dtype ot = ctx->opset >= 19 && s->dtype ? s->dtype : KN_DTYPE_F32;
  kn_out_like(ctx, 0, 0, ot);
  return KN_OK;
}

static kn_status dequant_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *s = kn_in(ctx, 1), *zp = kn_in(ctx, 2);
  qlayout L;
  kn_status st = q_layout(ctx, x, s, zp, &L);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  bool yf32 = y->dtype == KN_DTYPE_F32;
  if (L.mode == Q_TENSOR && yf32 && s->dtype == KN_DTYPE_F32 &&
      (x->dtype == KN_DTYPE_U8 || x->dtype == KN_DTYPE_I8)) {
    /* the common case as typed loops that vectorise: the same arithmetic */
    float sv = *(const float *)s->data;
    float z = zp ? (float)kn_load_i64(zp->data, zp->dtype, 0) : 0.0f;
    int64_t n = kn_tensor_numel(x);
    float *yd = y->data;
    if (x->dtype == KN_DTYPE_U8) {
      const uint8_t *xd = x->data;
      for (int64_t i = 0; i < n; i++) yd[i] = ((float)xd[i] - z) * sv;
    } else {
      const int8_t *xd = x->data;
      for (int64_t i = 0; i < n; i++) yd[i] = ((float)xd[i] - z) * sv;
    }
    return KN_OK;
  }
  for (int64_t o = 0; o < L.outer; o++)
    for (int64_t d = 0; d < L.dim; d++) {
      int64_t base = (o * L.dim + d) * L.inner;
      for (int64_t in = 0; in < L.inner; in++) {
        int64_t qi = q_index(&L, o, d, in);
        float sv = (float)kn_load_f64(s->data, s->dtype, qi);
        int64_t z = zp ? kn_load_i64(zp->data, zp->dtype, qi) : 0;
        float v = ((float)kn_load_i64(x->data, x->dtype, base + in) - (float)z) * sv;
        if (yf32) ((float *)y->data)[base + in] = v;
        else kn_store_f64(y->data, y->dtype, base + in, v);
      }
    }
  return KN_OK;
}

/* ---- DynamicQuantizeLinear -------------------------------------------------- */

static kn_status dynq_infer(kn_op_ctx *ctx) {
  static const kn_dtype x_types[] = {KN_DTYPE_F32, 0};
  const kn_tensor *x;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_check_dtype(ctx, 0, x, x_types)))
    return st;
  kn_out_like(ctx, 0, 0, KN_DTYPE_U8);
  kn_out_set(ctx, 1, KN_DTYPE_F32, 0, NULL);
  kn_out_set(ctx, 2, KN_DTYPE_U8, 0, NULL);
  return KN_OK;
}

static float clamp_u8(float v) {
  if (!(v >= 0.0f)) return 0.0f; /* NaN too */
  return v > 255.0f ? 255.0f : v;
}

void kn_dynq_scale(float mn, float mx, float *scale, float *zero) {
  float s = (mx - mn) / 255.0f;
  /* An all-zero input has no range; any scale represents it exactly. */
  if (!(s > 0.0f) || isinf(s)) s = s == 0.0f ? 1.0f : s;
  *scale = s;
  *zero = clamp_u8(nearbyintf((0.0f - mn) / s));
}

void kn_dynq_store(kn_op_ctx *ctx, float scale, float zero) {
  kn_tensor *ts = kn_out(ctx, 1), *tz = kn_out(ctx, 2);
  if (ts->data) *(float *)ts->data = scale;
  if (tz->data) *(uint8_t *)tz->data = (uint8_t)zero;
}

static kn_status dynq_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  const float *xd = x->data;
  int64_t n = kn_tensor_numel(x);
  float mn = 0.0f, mx = 0.0f; /* the range always includes 0; NaNs are left out */
  for (int64_t i = 0; i < n; i++) {
    if (xd[i] < mn) mn = xd[i];
    if (xd[i] > mx) mx = xd[i];
  }
  float scale, zp;
  kn_dynq_scale(mn, mx, &scale, &zp);
  uint8_t *y = kn_out(ctx, 0)->data;
  for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)clamp_u8(nearbyintf(xd[i] / scale) + zp);
  kn_dynq_store(ctx, scale, zp);
  return KN_OK;
}

const kn_op_def kn_ops_quant[] = {
    {"QuantizeLinear", NULL, 2, 3, 1, 1, 10, 21, quant_infer, quant_run, NULL},
    {"DequantizeLinear", NULL, 2, 3, 1, 1, 10, 21, dequant_infer, dequant_run, NULL},
    {"DynamicQuantizeLinear", NULL, 1, 1, 3, 3, 11, 22, dynq_infer, dynq_run, NULL},
    KN_OP_END,
};
