/* Indexing ops that write: ScatterND, ScatterElements and its deprecated
 * opset 9 form Scatter.
 *
 * The output starts as a copy of data; updates are then applied in index
 * order (so with reduction "none" a repeated index keeps the last update,
 * as the ONNX reference does).  Every index is validated before anything
 * is written. */
#include "op.h"

typedef enum red_kind { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } red_kind;

static kn_status parse_reduction(kn_op_ctx *ctx, red_kind *out) {
  const char *r = kn_attr_str(ctx, "reduction", "none");
  static const struct {
    const char *name;
    red_kind k;
  } names[] = {{"none", RED_NONE}, {"add", RED_ADD}, {"mul", RED_MUL},
               {"max", RED_MAX},   {"min", RED_MIN}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(r, names[i].name) == 0) {
      *out = names[i].k;
      return KN_OK;
    }
  return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                    "reduction '%s' is not one of none, add, mul, max, min", r);
}

/* dst[di..di+n) = red(dst, src[si..si+n)). */
static kn_status apply(kn_op_ctx *ctx, red_kind red, kn_dtype dt, void *dst,
                       int64_t di, const void *src, int64_t si, int64_t n) {
  if (red == RED_NONE || dt == KN_DTYPE_STRING)
    return kn_copy_elems(ctx, dst, di, src, si, n, dt);
  if (dt == KN_DTYPE_F32) {
    float *d = (float *)dst + di;
    const float *s = (const float *)src + si;
    for (int64_t i = 0; i < n; i++) switch (red) {
      case RED_ADD: d[i] += s[i]; break;
      case RED_MUL: d[i] *= s[i]; break;
      case RED_MAX: d[i] = s[i] > d[i] ? s[i] : d[i]; break;
      default: d[i] = s[i] < d[i] ? s[i] : d[i]; break;
      }
    return KN_OK;
  }
  if (kn_dtype_is_float(dt)) {
    for (int64_t i = 0; i < n; i++) {
      double a = kn_load_f64(dst, dt, di + i), b = kn_load_f64(src, dt, si + i), r;
      switch (red) {
      case RED_ADD: r = a + b; break;
      case RED_MUL: r = a * b; break;
      case RED_MAX: r = b > a ? b : a; break;
      default: r = b < a ? b : a; break;
      }
      kn_store_f64(dst, dt, di + i, r);
    }
    return KN_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t a = kn_load_i64(dst, dt, di + i), b = kn_load_i64(src, dt, si + i), r;
    bool lt = dt == KN_DTYPE_U64 ? (uint64_t)b < (uint64_t)a : b < a;
    switch (red) {
    /* Wrapping arithmetic, as the integer types do. */
    case RED_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
    case RED_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case RED_MAX: r = lt || a == b ? a : b; break;
    default: r = lt ? b : a; break;
    }
    kn_store_i64(dst, dt, di + i, r);
  }
  return KN_OK;
}

static kn_status copy_data(kn_op_ctx *ctx, kn_tensor *y, const kn_tensor *x) {
  return apply(ctx, RED_NONE, x->dtype, y->data, 0, x->data, 0, kn_tensor_numel(x));
}

static kn_status check_updates_dtype(kn_op_ctx *ctx, const kn_tensor *x,
                                     const kn_tensor *u) {
  if (x->dtype && u->dtype && x->dtype != u->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "updates have dtype %s, data has %s",
                      kn_dtype_name(u->dtype), kn_dtype_name(x->dtype));
  return KN_OK;
}

/* ---- ScatterND ------------------------------------------------------------ */

static kn_status scatter_nd_check(kn_op_ctx *ctx, const kn_tensor *x,
                                  const kn_tensor *ix, const kn_tensor *u) {
  if (x->rank < 0 || ix->rank < 0 || u->rank < 0) return KN_OK;
  if (x->rank < 1 || ix->rank < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "data and indices must have rank >= 1");
  int64_t k = ix->dims[ix->rank - 1];
  if (k < 0) return KN_OK;
  if (k < 1 || k > x->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "indices' last dim %lld must be in [1, rank(data) = %d]",
                      (long long)k, (int)x->rank);
  int64_t want = ix->rank - 1 + x->rank - k;
  char s1[128], s2[128];
  bool bad = u->rank != want;
  for (int32_t i = 0; !bad && i < u->rank; i++) {
    int64_t e = i < ix->rank - 1 ? ix->dims[i] : x->dims[k + i - (ix->rank - 1)];
    if (e >= 0 && u->dims[i] >= 0 && e != u->dims[i]) bad = true;
  }
  if (bad)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "updates have shape %s, expected indices.shape[:-1] + "
                      "data.shape[%lld:] with data %s",
                      kn_shape_str(u->rank, u->dims, s1, sizeof s1), (long long)k,
                      kn_shape_str(x->rank, x->dims, s2, sizeof s2));
  return KN_OK;
}

static kn_status scatter_nd_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ix, *u;
  kn_status st;
  red_kind red = RED_NONE;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &ix)) ||
      (st = kn_in_req(ctx, 2, &u)))
    return st;
  if ((st = parse_reduction(ctx, &red))) return st;
  if ((st = kn_check_dtype(ctx, 1, ix, (const kn_dtype[]){KN_DTYPE_I64, 0}))) return st;
  if ((st = check_updates_dtype(ctx, x, u))) return st;
  if ((st = scatter_nd_check(ctx, x, ix, u))) return st;
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status scatter_nd_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1), *u = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  red_kind red = RED_NONE;
  if ((st = parse_reduction(ctx, &red))) return st;
  int32_t k = (int32_t)ix->dims[ix->rank - 1];
  int64_t xs[KN_MAX_RANK];
  kn_strides(x->rank, x->dims, xs);
  int64_t nt = kn_dims_prod(ix->dims, 0, ix->rank - 1), slice = kn_dims_prod(x->dims, k, x->rank);
  int64_t *off = kn_malloc((size_t)(nt ? nt : 1) * sizeof *off);
  if (!off) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int64_t t = 0; t < nt; t++) {
    int64_t o = 0;
    for (int32_t j = 0; j < k; j++) {
      int64_t v = kn_load_i64(ix->data, ix->dtype, t * k + j), dim = x->dims[j];
      if (v < -dim || v >= dim) {
        free(off);
        return kn_op_fail(ctx, KN_ERR_SHAPE,
                          "index %lld (tuple %lld, position %d) is out of range "
                          "for data dim %d of size %lld",
                          (long long)v, (long long)t, (int)j, (int)j, (long long)dim);
      }
      o += (v < 0 ? v + dim : v) * xs[j];
    }
    off[t] = o;
  }
  if ((st = copy_data(ctx, y, x))) goto done;
  for (int64_t t = 0; t < nt; t++)
    if ((st = apply(ctx, red, x->dtype, y->data, off[t], u->data, t * slice, slice)))
      goto done;
done:
  free(off);
  return st;
}

/* ---- ScatterElements / Scatter ------------------------------------------ */

static kn_status scatter_el_check(kn_op_ctx *ctx, const kn_tensor *x,
                                  const kn_tensor *ix, const kn_tensor *u,
                                  int32_t *axis) {
  kn_status st;
  if (x->rank < 0 || ix->rank < 0) return KN_OK;
  if (x->rank < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "data must have rank >= 1, got a scalar");
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, axis))) return st;
  if (ix->rank != x->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "indices must have the rank of data (%d), got %d",
                      (int)x->rank, (int)ix->rank);
  char s1[128], s2[128];
  if (u->rank >= 0) {
    bool bad = u->rank != ix->rank;
    for (int32_t i = 0; !bad && i < u->rank; i++)
      if (u->dims[i] >= 0 && ix->dims[i] >= 0 && u->dims[i] != ix->dims[i]) bad = true;
    if (bad)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "updates have shape %s, expected the indices' shape %s",
                        kn_shape_str(u->rank, u->dims, s1, sizeof s1),
                        kn_shape_str(ix->rank, ix->dims, s2, sizeof s2));
  }
  for (int32_t i = 0; i < x->rank; i++)
    if (i != *axis && x->dims[i] >= 0 && ix->dims[i] > x->dims[i])
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "indices dim %d is %lld, larger than data's %lld", (int)i,
                        (long long)ix->dims[i], (long long)x->dims[i]);
  return KN_OK;
}

static kn_status scatter_el_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ix, *u;
  kn_status st;
  red_kind red = RED_NONE;
  int32_t axis;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &ix)) ||
      (st = kn_in_req(ctx, 2, &u)))
    return st;
  if ((st = parse_reduction(ctx, &red))) return st;
  if ((st = kn_check_dtype(ctx, 1, ix,
                           (const kn_dtype[]){KN_DTYPE_I32, KN_DTYPE_I64, 0})))
    return st;
  if ((st = check_updates_dtype(ctx, x, u))) return st;
  if ((st = scatter_el_check(ctx, x, ix, u, &axis))) return st;
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status scatter_el_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1), *u = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  red_kind red = RED_NONE;
  int32_t axis;
  if ((st = parse_reduction(ctx, &red))) return st;
  if ((st = scatter_el_check(ctx, x, ix, u, &axis))) return st;
  int32_t r = x->rank;
  int64_t xs[KN_MAX_RANK], coord[KN_MAX_RANK] = {0};
  kn_strides(r, x->dims, xs);
  int64_t n = kn_tensor_numel(ix), dim = x->dims[axis];
  for (int64_t i = 0; i < n; i++) {
    int64_t v = kn_load_i64(ix->data, ix->dtype, i);
    if (v < -dim || v >= dim)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "index %lld (element %lld) is out of range for axis %d "
                        "of size %lld",
                        (long long)v, (long long)i, (int)axis, (long long)dim);
  }
  if ((st = copy_data(ctx, y, x))) return st;
  int64_t base = 0; /* offset in y of coord with the axis coordinate zeroed */
  for (int64_t i = 0; i < n; i++) {
    int64_t v = kn_load_i64(ix->data, ix->dtype, i);
    if (v < 0) v += dim;
    if ((st = apply(ctx, red, x->dtype, y->data, base + v * xs[axis], u->data, i, 1)))
      return st;
    for (int32_t d = r - 1; d >= 0; d--) {
      if (++coord[d] < ix->dims[d]) {
        if (d != axis) base += xs[d];
        break;
      }
      if (d != axis) base -= (coord[d] - 1) * xs[d];
      coord[d] = 0;
    }
  }
  return KN_OK;
}

const kn_op_def kn_ops_scatter[] = {
    {"ScatterND", NULL, 3, 3, 1, 1, 11, 21, scatter_nd_infer, scatter_nd_run, NULL},
    {"ScatterElements", NULL, 3, 3, 1, 1, 11, 21, scatter_el_infer, scatter_el_run, NULL},
    {"Scatter", NULL, 3, 3, 1, 1, 9, 10, scatter_el_infer, scatter_el_run, NULL},
    KN_OP_END,
};
