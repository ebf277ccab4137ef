/* Shape ops: Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size,
 * ConstantOfShape, Range, Identity, EyeLike.
 *
 * Most of these only rearrange metadata; their run copies the input's
 * elements unchanged into an output the executor already allocated. */
#include "op.h"

#include <math.h>

/* ---- helpers ------------------------------------------------------------ */

static void out_unknown(kn_op_ctx *ctx, int32_t i, kn_dtype dtype) {
  kn_out_set(ctx, i, dtype, -1, NULL);
}

/* Copy every element of src into dst (same element count, same dtype);
 * string elements are duplicated so dst owns its own. */
static kn_status copy_all(kn_op_ctx *ctx, kn_tensor *dst, const kn_tensor *src) {
  int64_t n = kn_tensor_numel(src);
  if (n != kn_tensor_numel(dst) || dst->dtype != src->dtype)
    return kn_op_fail(ctx, KN_ERR_INTERNAL, "output buffer does not match input");
  return kn_copy_elems(ctx, dst->data, 0, src->data, 0, n, src->dtype);
}

static kn_status copy_run(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  return copy_all(ctx, o, x);
}

static double no_flops(const kn_op_ctx *ctx) {
  (void)ctx;
  return 0;
}

/* Reads a 1-D integer input holding at most KN_MAX_RANK values. *known is
 * false (and KN_OK returned) when its values are not available yet; *len
 * then holds its length, or -1 when that is unknown too. */
static kn_status small_ints_input(kn_op_ctx *ctx, int32_t i, const char *what,
                                  int64_t *vals, int64_t *len, bool *known) {
  const kn_tensor *t = kn_in(ctx, i);
  *known = false;
  *len = -1;
  if (!t) return KN_OK;
  if (t->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s (input %d) must be 1-D, got rank %d",
                      what, (int)i, (int)t->rank);
  if (t->rank == 1) *len = t->dims[0];
  if (t->rank == 0) *len = 1;
  if (t->dtype && !kn_dtype_is_int(t->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "%s (input %d) must be an integer tensor, got %s",
                      what, (int)i, kn_dtype_name(t->dtype));
  if (*len > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "%s (input %d) has %lld values, kiln supports "
                      "ranks up to %d", what, (int)i, (long long)*len, KN_MAX_RANK);
  if (!kn_has_data(t) || t->rank < 0) return KN_OK;
  kn_status st = kn_read_ints(ctx, t, vals, KN_MAX_RANK, len);
  if (st) return st;
  *known = true;
  return KN_OK;
}

/* ---- Reshape ------------------------------------------------------------ */

static kn_status reshape_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  int64_t shp[KN_MAX_RANK];
  int64_t n = 0;
  if (ctx->opset < 5) {
    const int64_t *v;
    int32_t c = kn_attr_ints(ctx, "shape", &v);
    if (!kn_attr_get(ctx, "shape"))
      return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'shape' is required before opset 5");
    if (c > KN_MAX_RANK)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "target shape has %d dims, kiln supports up to %d",
                        (int)c, KN_MAX_RANK);
    for (int32_t i = 0; i < c; i++) shp[i] = v[i];
    n = c;
  } else {
    bool known;
    st = small_ints_input(ctx, 1, "shape", shp, &n, &known);
    if (st) return st;
    if (!known) {
      if (!ctx->static_infer)
        return kn_op_fail(ctx, KN_ERR_MISSING, "input 1 (shape) is required");
      int64_t d[KN_MAX_RANK];
      for (int32_t i = 0; i < KN_MAX_RANK; i++) d[i] = -1;
      kn_out_set(ctx, 0, dt, n >= 0 ? (int32_t)n : -1, d);
      return KN_OK;
    }
  }
  bool allowzero = ctx->opset >= 14 && kn_attr_int(ctx, "allowzero", 0) != 0;
  int32_t xr = x ? x->rank : -1;
  int64_t xn = x ? kn_tensor_numel(x) : -1;
  int64_t out[KN_MAX_RANK];
  int32_t infer_at = -1;
  bool has_zero = false, unknown = false;
  int64_t prod = 1;
  for (int32_t i = 0; i < n; i++) {
    int64_t v = shp[i];
    if (v == -1) {
      if (infer_at >= 0)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "target shape has more than one -1");
      infer_at = i;
      out[i] = -1;
      continue;
    }
    if (v < -1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "target shape dim %d is %lld, expected >= -1",
                        (int)i, (long long)v);
    if (v == 0 && !allowzero) {
      if (xr >= 0 && i >= xr)
        return kn_op_fail(ctx, KN_ERR_SHAPE,
                          "target dim %d is 0 (copy) but the input has only %d dims",
                          (int)i, (int)xr);
      v = xr >= 0 ? x->dims[i] : -1;
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    if (v < 0) unknown = true;
    else if (v > 0 && prod > INT64_MAX / v)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "target shape overflows");
    else prod *= v;
  }
  if (allowzero && has_zero && infer_at >= 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "allowzero=1 with both 0 and -1 in the target shape");
  char sa[128], sb[128];
  if (infer_at >= 0) {
    if (xn >= 0 && !unknown) {
      if (prod == 0 || xn % prod != 0)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                          kn_shape_str(x->rank, x->dims, sa, sizeof sa), (long long)xn,
                          kn_shape_str((int32_t)n, out, sb, sizeof sb));
      out[infer_at] = xn / prod;
    }
  } else if (xn >= 0 && !unknown && xn != prod) {
    return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                      kn_shape_str(x->rank, x->dims, sa, sizeof sa), (long long)xn,
                      kn_shape_str((int32_t)n, out, sb, sizeof sb));
  }
  kn_out_set(ctx, 0, dt, (int32_t)n, out);
  return KN_OK;
}

/* ---- Flatten ------------------------------------------------------------ */

static kn_status flatten_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (!x || x->rank < 0) {
    int64_t d[2] = {-1, -1};
    kn_out_set(ctx, 0, x ? x->dtype : KN_DTYPE_UNDEFINED, 2, d);
    return KN_OK;
  }
  int64_t axis = kn_attr_int(ctx, "axis", 1);
  int32_t r = x->rank;
  if (axis < -(int64_t)r || axis > r || (ctx->opset < 11 && axis < 0))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is out of range for rank %d",
                      (long long)axis, (int)r);
  if (axis < 0) axis += r;
  int64_t d[2];
  d[0] = kn_shape_numel((int32_t)axis, x->dims);
  d[1] = kn_shape_numel(r - (int32_t)axis, x->dims + axis);
  kn_out_set(ctx, 0, x->dtype, 2, d);
  return KN_OK;
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------ */

/* Axes from the attribute (before opset 13) or input 1.  *n == -1: not
 * known yet (static inference); *present false: not given at all. */
static kn_status read_axes(kn_op_ctx *ctx, int64_t *axes, int64_t *n, bool *present) {
  *present = false;
  *n = 0;
  if (ctx->opset < 13) {
    const int64_t *v;
    int32_t c = kn_attr_ints(ctx, "axes", &v);
    if (!kn_attr_get(ctx, "axes")) return KN_OK;
    if (c > KN_MAX_RANK)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "'axes' has %d values, at most %d supported",
                        (int)c, KN_MAX_RANK);
    for (int32_t i = 0; i < c; i++) axes[i] = v[i];
    *n = c;
    *present = true;
    return KN_OK;
  }
  if (!kn_in(ctx, 1)) {
    if (ctx->static_infer && ctx->n_in > 1 && ctx->in[1]) {
      *present = true;
      *n = -1;
    }
    return KN_OK;
  }
  bool known;
  int64_t len;
  kn_status st = small_ints_input(ctx, 1, "axes", axes, &len, &known);
  if (st) return st;
  *present = true;
  *n = known ? len : -1;
  if (!known && !ctx->static_infer)
    return kn_op_fail(ctx, KN_ERR_MISSING, "input 1 (axes) has no values");
  return KN_OK;
}

/* Normalise axes against rank r into a mask; fails on range or repeats. */
static kn_status axes_mask(kn_op_ctx *ctx, const int64_t *axes, int64_t n, int32_t r,
                           bool *mask) {
  for (int32_t i = 0; i < r; i++) mask[i] = false;
  for (int64_t i = 0; i < n; i++) {
    int32_t a;
    if (axes[i] < -(int64_t)r || axes[i] >= r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is out of range for rank %d",
                        (long long)axes[i], (int)r);
    a = (int32_t)(axes[i] < 0 ? axes[i] + r : axes[i]);
    if (mask[a])
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated", (long long)axes[i]);
    mask[a] = true;
  }
  return KN_OK;
}

static kn_status squeeze_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t axes[KN_MAX_RANK], n;
  bool present;
  st = read_axes(ctx, axes, &n, &present);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  if (!x || x->rank < 0) {
    out_unknown(ctx, 0, dt);
    return KN_OK;
  }
  int32_t r = x->rank;
  bool mask[KN_MAX_RANK];
  if (present && n < 0) {
    out_unknown(ctx, 0, dt);
    return KN_OK;
  }
  if (present && n > 0) {
    st = axes_mask(ctx, axes, n, r, mask);
    if (st) return st;
    for (int32_t i = 0; i < r; i++)
      if (mask[i] && x->dims[i] >= 0 && x->dims[i] != 1)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot squeeze axis %d of size %lld",
                          (int)i, (long long)x->dims[i]);
  } else {
    for (int32_t i = 0; i < r; i++) {
      if (x->dims[i] < 0) {
        out_unknown(ctx, 0, dt);
        return KN_OK;
      }
      mask[i] = x->dims[i] == 1;
    }
  }
  int64_t d[KN_MAX_RANK];
  int32_t o = 0;
  for (int32_t i = 0; i < r; i++)
    if (!mask[i]) d[o++] = x->dims[i];
  kn_out_set(ctx, 0, dt, o, d);
  return KN_OK;
}

static kn_status unsqueeze_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t axes[KN_MAX_RANK], n;
  bool present;
  st = read_axes(ctx, axes, &n, &present);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  if (!present)
    return kn_op_fail(ctx, KN_ERR_MISSING, "axes are required");
  if (!x || x->rank < 0 || n < 0) {
    out_unknown(ctx, 0, dt);
    return KN_OK;
  }
  int64_t r = x->rank + n;
  if (r > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "output rank %lld exceeds kiln's limit %d",
                      (long long)r, KN_MAX_RANK);
  bool mask[KN_MAX_RANK];
  st = axes_mask(ctx, axes, n, (int32_t)r, mask);
  if (st) return st;
  int64_t d[KN_MAX_RANK];
  int32_t j = 0;
  for (int32_t i = 0; i < r; i++) d[i] = mask[i] ? 1 : x->dims[j++];
  kn_out_set(ctx, 0, dt, (int32_t)r, d);
  return KN_OK;
}

/* ---- Shape / Size ------------------------------------------------------- */

static void shape_range(const kn_op_ctx *ctx, int32_t r, int64_t *start, int64_t *end) {
  int64_t s = 0, e = r;
  if (ctx->opset >= 15) {
    s = kn_attr_int(ctx, "start", 0);
    e = kn_attr_int(ctx, "end", r);
  }
  if (s < 0) s += r;
  if (e < 0) e += r;
  if (s < 0) s = 0;
  if (s > r) s = r;
  if (e < 0) e = 0;
  if (e > r) e = r;
  if (e < s) e = s;
  *start = s;
  *end = e;
}

static kn_status shape_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t d = -1;
  if (x && x->rank >= 0) {
    int64_t s, e;
    shape_range(ctx, x->rank, &s, &e);
    d = e - s;
  }
  kn_out_set(ctx, 0, KN_DTYPE_I64, 1, &d);
  return KN_OK;
}

static kn_status shape_run(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  int64_t s, e;
  shape_range(ctx, x->rank, &s, &e);
  kn_tensor *ot = kn_out_ready(ctx, 0);
  if (!ot) return KN_ERR_INTERNAL;
  int64_t *o = ot->data;
  for (int64_t i = s; i < e; i++) o[i - s] = x->dims[i];
  return KN_OK;
}

static kn_status size_infer(kn_op_ctx *ctx) {
  kn_out_set(ctx, 0, KN_DTYPE_I64, 0, NULL);
  return KN_OK;
}

static kn_status size_run(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  *(int64_t *)o->data = kn_tensor_numel(x);
  return KN_OK;
}

/* ---- ConstantOfShape ---------------------------------------------------- */

static kn_status cos_value(kn_op_ctx *ctx, const kn_tensor **v) {
  const kn_attr *a = kn_attr_get(ctx, "value");
  *v = NULL;
  if (!a) return KN_OK;
  if (a->type != KN_ATTR_TENSOR)
    return kn_op_fail(ctx, KN_ERR_PARSE, "attribute 'value' must be a tensor");
  if (kn_tensor_numel(&a->t) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "attribute 'value' must hold one element, has %lld",
                      (long long)kn_tensor_numel(&a->t));
  if (a->t.dtype == KN_DTYPE_STRING || !kn_dtype_is_valid(a->t.dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "attribute 'value' has unsupported dtype %s",
                      kn_dtype_name(a->t.dtype) ? kn_dtype_name(a->t.dtype) : "?");
  *v = &a->t;
  return KN_OK;
}

static kn_status cos_infer(kn_op_ctx *ctx) {
  const kn_tensor *v, *s;
  kn_status st = cos_value(ctx, &v);
  if (st) return st;
  kn_dtype dt = v ? v->dtype : KN_DTYPE_F32;
  st = kn_in_need(ctx, 0, &s);
  if (st) return st;
  if (!s) {
    out_unknown(ctx, 0, dt);
    return KN_OK;
  }
  if (s->dtype && s->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 must be int64, got %s",
                      kn_dtype_name(s->dtype));
  int64_t d[KN_MAX_RANK], n;
  bool known;
  st = small_ints_input(ctx, 0, "shape", d, &n, &known);
  if (st) return st;
  if (!known) {
    int64_t u[KN_MAX_RANK];
    for (int32_t i = 0; i < KN_MAX_RANK; i++) u[i] = -1;
    kn_out_set(ctx, 0, dt, n >= 0 ? (int32_t)n : -1, u);
    return KN_OK;
  }
  for (int64_t i = 0; i < n; i++)
    if (d[i] < 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "shape value %lld at %lld is negative",
                        (long long)d[i], (long long)i);
  kn_out_set(ctx, 0, dt, (int32_t)n, d);
  return KN_OK;
}

static kn_status cos_run(kn_op_ctx *ctx) {
  const kn_tensor *v;
  kn_status st = cos_value(ctx, &v);
  if (st) return st;
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  if (!v) return KN_OK; /* float zeros: already zero-filled */
  size_t es = kn_dtype_size(o->dtype);
  int64_t n = kn_tensor_numel(o);
  unsigned char *p = o->data;
  for (int64_t i = 0; i < n; i++) memcpy(p + (size_t)i * es, v->data, es);
  return KN_OK;
}

/* ---- Range -------------------------------------------------------------- */

static const kn_dtype range_types[] = {KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_I16,
                                       KN_DTYPE_I32, KN_DTYPE_I64, 0};

/* Element count of Range(start, limit, delta); -1 with an error set. */
static kn_status range_count(kn_op_ctx *ctx, const kn_tensor *s, const kn_tensor *l,
                             const kn_tensor *d, int64_t *n) {
  if (kn_dtype_is_int(s->dtype)) {
    int64_t a = kn_scalar_i64(s), b = kn_scalar_i64(l), c = kn_scalar_i64(d);
    if (c == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "delta is 0");
    /* Exact in unsigned arithmetic: |limit - start| always fits in uint64. */
    uint64_t span, step;
    if ((c > 0 && b <= a) || (c < 0 && b >= a)) {
      *n = 0;
      return KN_OK;
    }
    span = c > 0 ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
    step = c > 0 ? (uint64_t)c : (uint64_t)0 - (uint64_t)c;
    uint64_t q = span / step + (span % step != 0);
    *n = q > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)q;
  } else {
    double a = kn_scalar_f64(s), b = kn_scalar_f64(l), c = kn_scalar_f64(d);
    if (c == 0 || !isfinite(a) || !isfinite(b) || !isfinite(c))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "start, limit and delta must be finite and "
                        "delta non-zero");
    double q = ceil((b - a) / c);
    if (q > 9.0e18) q = 9.0e18;
    *n = q > 0 ? (int64_t)q : 0;
  }
  return KN_OK;
}

static kn_status range_infer(kn_op_ctx *ctx) {
  const kn_tensor *t[3];
  for (int32_t i = 0; i < 3; i++) {
    kn_status st = kn_in_need(ctx, i, &t[i]);
    if (st) return st;
  }
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  for (int32_t i = 0; i < 3; i++) {
    if (!t[i]) continue;
    kn_status st = kn_check_dtype(ctx, i, t[i], range_types);
    if (st) return st;
    if (t[i]->dtype && dt && t[i]->dtype != dt)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "start, limit and delta must share a dtype");
    if (t[i]->dtype) dt = t[i]->dtype;
    if (t[i]->rank > 0 && kn_tensor_numel(t[i]) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d must be a scalar", (int)i);
  }
  int64_t n = -1;
  if (t[0] && t[1] && t[2] && kn_has_data(t[0]) && kn_has_data(t[1]) &&
      kn_has_data(t[2])) {
    for (int32_t i = 0; i < 3; i++)
      if (kn_tensor_numel(t[i]) != 1)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d must be a scalar", (int)i);
    kn_status st = range_count(ctx, t[0], t[1], t[2], &n);
    if (st) return st;
  }
  kn_out_set(ctx, 0, dt, 1, &n);
  return KN_OK;
}

static kn_status range_run(kn_op_ctx *ctx) {
  const kn_tensor *s = kn_in(ctx, 0), *d = kn_in(ctx, 2);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t n = o->dims[0];
  switch (o->dtype) {
  case KN_DTYPE_F32: {
    float a = *(const float *)s->data, c = *(const float *)d->data;
    float *p = o->data;
    for (int64_t i = 0; i < n; i++) p[i] = a + (float)i * c;
    break;
  }
  case KN_DTYPE_F64: {
    double a = *(const double *)s->data, c = *(const double *)d->data;
    double *p = o->data;
    for (int64_t i = 0; i < n; i++) p[i] = a + (double)i * c;
    break;
  }
  default: {
    int64_t a = kn_scalar_i64(s), c = kn_scalar_i64(d), v = a;
    for (int64_t i = 0; i < n; i++, v += c) kn_store_i64(o->data, o->dtype, i, v);
    break;
  }
  }
  return KN_OK;
}

/* ---- Identity ----------------------------------------------------------- */

static kn_status identity_infer(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  kn_slot *out = ctx->out[0];
  if (!in || in->kind == KN_KIND_NONE) {
    if (!ctx->static_infer) {
      kn_slot_release(out);
      return KN_OK;
    }
    out->kind = KN_KIND_NONE;
    out->t.dtype = in ? in->t.dtype : KN_DTYPE_UNDEFINED;
    out->t.rank = in ? in->t.rank : -1;
    if (in) memcpy(out->t.dims, in->t.dims, sizeof out->t.dims);
    out->seq.elem_dtype = in ? in->seq.elem_dtype : KN_DTYPE_UNDEFINED;
    return KN_OK;
  }
  if (in->kind == KN_KIND_TENSOR) {
    kn_out_like(ctx, 0, 0, 0);
    return KN_OK;
  }
  /* sequence: describe it the way the input is described */
  if (ctx->static_infer) {
    out->kind = KN_KIND_SEQUENCE;
    out->seq.elem_dtype = in->seq.elem_dtype;
    out->t.dtype = in->t.dtype;
    out->t.rank = in->t.rank;
    memcpy(out->t.dims, in->t.dims, sizeof out->t.dims);
  }
  return KN_OK;
}

static kn_status identity_run(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  kn_slot *out = ctx->out[0];
  if (in && in->kind == KN_KIND_TENSOR && out->kind == KN_KIND_TENSOR &&
      out->t.data && out->t.dtype == in->t.dtype &&
      kn_tensor_numel(&out->t) == kn_tensor_numel(&in->t))
    return copy_all(ctx, &out->t, &in->t);
  kn_slot_release(out);
  if (!in || in->kind == KN_KIND_NONE) return KN_OK;
  kn_status st = kn_slot_copy(out, in, ctx->err);
  if (st) kn_error_prefix(ctx->err, "node '%s' (Identity)", ctx->node->name);
  return st;
}

/* ---- EyeLike ------------------------------------------------------------ */

static kn_status eyelike_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t dta = kn_attr_int(ctx, "dtype", 0);
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  if (kn_attr_get(ctx, "dtype")) {
    if (!kn_dtype_is_valid((int32_t)dta) || dta == KN_DTYPE_STRING)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "attribute 'dtype' %lld is not supported",
                        (long long)dta);
    dt = (kn_dtype)dta;
  }
  if (x && x->dtype == KN_DTYPE_STRING)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 may not be a string tensor");
  if (!x || x->rank < 0) {
    int64_t d[2] = {-1, -1};
    kn_out_set(ctx, 0, dt, 2, d);
    return KN_OK;
  }
  if (x->rank != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input 0 must be 2-D, got rank %d", (int)x->rank);
  kn_out_set(ctx, 0, dt, 2, x->dims);
  return KN_OK;
}

static kn_status eyelike_run(kn_op_ctx *ctx) {
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t k = kn_attr_int(ctx, "k", 0);
  int64_t rows = o->dims[0], cols = o->dims[1];
  for (int64_t i = 0; i < rows; i++) {
    if (k < -rows || k > cols) break;
    int64_t j = i + k;
    if (j >= 0 && j < cols) kn_store_f64(o->data, o->dtype, i * cols + j, 1.0);
  }
  return KN_OK;
}

/* ---- table -------------------------------------------------------------- */

const kn_op_def kn_ops_shape[] = {
    {"Reshape", NULL, 1, 2, 1, 1, 1, 21, reshape_infer, copy_run, no_flops, KN_INPLACE_ALIAS},
    {"Flatten", NULL, 1, 1, 1, 1, 1, 21, flatten_infer, copy_run, no_flops, KN_INPLACE_ALIAS},
    {"Squeeze", NULL, 1, 2, 1, 1, 1, 21, squeeze_infer, copy_run, no_flops, KN_INPLACE_ALIAS},
    {"Unsqueeze", NULL, 1, 2, 1, 1, 1, 21, unsqueeze_infer, copy_run, no_flops, KN_INPLACE_ALIAS},
    {"Shape", NULL, 1, 1, 1, 1, 1, 21, shape_infer, shape_run, no_flops},
    {"Size", NULL, 1, 1, 1, 1, 1, 21, size_infer, size_run, no_flops},
    {"ConstantOfShape", NULL, 1, 1, 1, 1, 9, 21, cos_infer, cos_run, no_flops},
    {"Range", NULL, 3, 3, 1, 1, 11, 21, range_infer, range_run, NULL, 0, KN_DATA_SHAPE_ALL},
    {"Identity", NULL, 1, 1, 1, 1, 1, 21, identity_infer, identity_run, no_flops, KN_INPLACE_ALIAS},
    {"EyeLike", NULL, 1, 1, 1, 1, 9, 21, eyelike_infer, eyelike_run, no_flops},
    KN_OP_END,
};
