/* Indexing ops that read: Gather, GatherElements, GatherND, NonZero, OneHot,
 * Compress, Unique.
 *
 * All are data movement: elements are copied by size (strings duplicated),
 * never converted.  Index inputs are validated before any element is read;
 * an out-of-range index is a KN_ERR_SHAPE error naming the index.  NonZero
 * and Compress have data-dependent output shapes, computed in the runtime
 * infer pass (and at load when the input is a constant); Unique sizes its
 * outputs in run.  Gather's copy kernel (and its IO-model loop nest) is
 * src/tactics/gather_tactics.c. */
#include "gather.h"

#include <math.h>

static const kn_dtype index_types[] = {KN_DTYPE_I32, KN_DTYPE_I64, 0};

static kn_status rank_limit(kn_op_ctx *ctx, int64_t rank) {
  if (rank > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "output rank %lld exceeds kiln's limit of %d",
                      (long long)rank, KN_MAX_RANK);
  return KN_OK;
}

/* ---- Gather ------------------------------------------------------------ */

static kn_status gather_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ix;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &ix))) return st;
  if ((st = kn_check_dtype(ctx, 1, ix, index_types))) return st;
  if (x->rank < 0 || ix->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
    return KN_OK;
  }
  if (x->rank < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "data must have rank >= 1, got a scalar");
  int32_t axis;
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis))) return st;
  int32_t r = x->rank + ix->rank - 1;
  if ((st = rank_limit(ctx, r))) return st;
  int64_t d[KN_MAX_RANK];
  int32_t k = 0;
  for (int32_t i = 0; i < axis; i++) d[k++] = x->dims[i];
  for (int32_t i = 0; i < ix->rank; i++) d[k++] = ix->dims[i];
  for (int32_t i = axis + 1; i < x->rank; i++) d[k++] = x->dims[i];
  kn_out_set(ctx, 0, x->dtype, r, d);
  return KN_OK;
}

static kn_status gather_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int32_t axis;
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis))) return st;
  int64_t outer = kn_dims_prod(x->dims, 0, axis), n = x->dims[axis];
  int64_t inner = kn_dims_prod(x->dims, axis + 1, x->rank);
  int64_t ni = kn_tensor_numel(ix);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  int64_t *idx = kn_malloc((size_t)(ni ? ni : 1) * sizeof *idx);
  if (!idx) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int64_t j = 0; j < ni; j++)
    if ((st = kn_gather_index(ctx, ix, j, n, "Gather", &idx[j]))) goto done;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ni; j++)
      if ((st = kn_copy_elems(ctx, y->data, (o * ni + j) * inner, x->data,
                           (o * n + idx[j]) * inner, inner, x->dtype)))
        goto done;
done:
  free(idx);
  return st;
}

/* ---- GatherElements ------------------------------------------------------ */

static kn_status gather_el_check(kn_op_ctx *ctx, const kn_tensor *x,
                                 const kn_tensor *ix, int32_t *axis) {
  kn_status st;
  if (x->rank < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "data must have rank >= 1, got a scalar");
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, axis))) return st;
  if (ix->rank != x->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "indices must have the rank of data (%d), got %d",
                      (int)x->rank, (int)ix->rank);
  for (int32_t i = 0; i < x->rank; i++)
    if (i != *axis && x->dims[i] >= 0 && ix->dims[i] > x->dims[i])
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "indices dim %d is %lld, larger than data's %lld", (int)i,
                        (long long)ix->dims[i], (long long)x->dims[i]);
  return KN_OK;
}

static kn_status gather_el_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ix;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &ix))) return st;
  if ((st = kn_check_dtype(ctx, 1, ix, index_types))) return st;
  if (x->rank >= 0 && ix->rank >= 0) {
    int32_t axis;
    if ((st = gather_el_check(ctx, x, ix, &axis))) return st;
  }
  kn_out_set(ctx, 0, x->dtype, ix->rank, ix->dims);
  return KN_OK;
}

/* Walk every element of an index tensor of shape `dims`; for each, the
 * offset in a tensor of strides `st` with the axis coordinate left out. */
static kn_status gather_el_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int32_t axis;
  if ((st = gather_el_check(ctx, x, ix, &axis))) return st;
  int32_t r = x->rank;
  int64_t xs[KN_MAX_RANK], coord[KN_MAX_RANK] = {0};
  kn_strides(r, x->dims, xs);
  int64_t n = kn_tensor_numel(ix), dim = x->dims[axis];
  int64_t base = 0; /* offset in x of coord with the axis coordinate zeroed */
  for (int64_t i = 0; i < n; i++) {
    int64_t k = 0;
    if ((st = kn_gather_index(ctx, ix, i, dim, "GatherElements", &k))) return st;
    if ((st = kn_copy_elems(ctx, y->data, i, x->data, base + k * xs[axis], 1, x->dtype)))
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

/* ---- GatherND ------------------------------------------------------------ */

static kn_status gather_nd_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ix;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &ix))) return st;
  if ((st = kn_check_dtype(ctx, 1, ix, (const kn_dtype[]){KN_DTYPE_I64, 0}))) return st;
  int64_t b = kn_attr_int(ctx, "batch_dims", 0);
  if (x->rank == 0 || ix->rank == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "data and indices must have rank >= 1");
  if (x->rank < 0 || ix->rank < 0 || ix->dims[ix->rank - 1] < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
    return KN_OK;
  }
  if (b < 0 || b >= x->rank || b >= ix->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "batch_dims %lld must be in [0, min(rank(data)=%d, "
                      "rank(indices)=%d))",
                      (long long)b, (int)x->rank, (int)ix->rank);
  int64_t k = ix->dims[ix->rank - 1];
  if (k < 1 || k > x->rank - b)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "indices' last dim %lld must be in [1, rank(data) - "
                      "batch_dims = %lld]",
                      (long long)k, (long long)(x->rank - b));
  for (int64_t i = 0; i < b; i++)
    if (x->dims[i] >= 0 && ix->dims[i] >= 0 && x->dims[i] != ix->dims[i])
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "batch dim %lld differs: data %lld, indices %lld",
                        (long long)i, (long long)x->dims[i],
                        (long long)ix->dims[i]);
  int64_t r = ix->rank - 1 + x->rank - b - k;
  if ((st = rank_limit(ctx, r))) return st;
  int64_t d[KN_MAX_RANK];
  int32_t o = 0;
  for (int32_t i = 0; i < ix->rank - 1; i++) d[o++] = ix->dims[i];
  for (int64_t i = b + k; i < x->rank; i++) d[o++] = x->dims[i];
  kn_out_set(ctx, 0, x->dtype, (int32_t)r, d);
  return KN_OK;
}

static kn_status gather_nd_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int32_t b = (int32_t)kn_attr_int(ctx, "batch_dims", 0);
  int32_t k = (int32_t)ix->dims[ix->rank - 1];
  int64_t xs[KN_MAX_RANK];
  kn_strides(x->rank, x->dims, xs);
  int64_t batches = kn_dims_prod(x->dims, 0, b);
  int64_t per_batch = kn_dims_prod(ix->dims, b, ix->rank - 1); /* index tuples */
  int64_t slice = kn_dims_prod(x->dims, b + k, x->rank);
  int64_t batch_stride = b > 0 ? xs[b - 1] : 0;
  for (int64_t bi = 0; bi < batches; bi++)
    for (int64_t t = 0; t < per_batch; t++) {
      int64_t tup = bi * per_batch + t, off = bi * batch_stride;
      for (int32_t j = 0; j < k; j++) {
        int64_t v = 0;
        if ((st = kn_gather_index(ctx, ix, tup * k + j, x->dims[b + j], "GatherND", &v)))
          return st;
        off += v * xs[b + j];
      }
      if ((st = kn_copy_elems(ctx, y->data, tup * slice, x->data, off, slice, x->dtype)))
        return st;
    }
  return KN_OK;
}

/* ---- NonZero -------------------------------------------------------------- */

static bool elem_nonzero(const kn_tensor *t, int64_t i) {
  switch (t->dtype) {
  case KN_DTYPE_STRING: {
    const char *s = ((char *const *)t->data)[i];
    return s && s[0];
  }
  case KN_DTYPE_F32: return ((const float *)t->data)[i] != 0.0f;
  case KN_DTYPE_F64: return ((const double *)t->data)[i] != 0.0;
  case KN_DTYPE_F16:
  case KN_DTYPE_BF16: return (((const uint16_t *)t->data)[i] & 0x7fff) != 0;
  default: break;
  }
  switch (kn_dtype_size(t->dtype)) {
  case 1: return ((const uint8_t *)t->data)[i] != 0;
  case 2: return ((const uint16_t *)t->data)[i] != 0;
  case 4: return ((const uint32_t *)t->data)[i] != 0;
  default: return ((const uint64_t *)t->data)[i] != 0;
  }
}

static kn_status nonzero_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x))) return st;
  int64_t d[2] = {x->rank < 0 ? -1 : (x->rank == 0 ? 1 : x->rank), -1};
  if (kn_has_data(x) && x->rank >= 0) {
    int64_t n = kn_tensor_numel(x), c = 0;
    for (int64_t i = 0; i < n; i++) c += elem_nonzero(x, i);
    d[1] = c;
  }
  kn_out_set(ctx, 0, KN_DTYPE_I64, 2, d);
  return KN_OK;
}

static kn_status nonzero_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  int32_t r = x->rank;
  int64_t n = kn_tensor_numel(x), c = 0;
  for (int64_t i = 0; i < n; i++) c += elem_nonzero(x, i);
  if (y->rank != 2 || y->dims[1] != c || !y->data) {
    int64_t d[2] = {r == 0 ? 1 : r, c};
    kn_status st = kn_out_alloc(ctx, 0, KN_DTYPE_I64, 2, d);
    if (st) return st;
    y = kn_out(ctx, 0);
  }
  int64_t *o = y->data, coord[KN_MAX_RANK] = {0}, j = 0;
  for (int64_t i = 0; i < n; i++) {
    if (elem_nonzero(x, i)) {
      if (r == 0) o[j] = 0;
      for (int32_t d = 0; d < r; d++) o[d * c + j] = coord[d];
      j++;
    }
    for (int32_t d = r - 1; d >= 0; d--) {
      if (++coord[d] < x->dims[d]) break;
      coord[d] = 0;
    }
  }
  return KN_OK;
}

/* ---- OneHot --------------------------------------------------------------- */

static kn_status onehot_depth(kn_op_ctx *ctx, const kn_tensor *depth, int64_t *out) {
  if (kn_tensor_numel(depth) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "depth must have one element, got %lld",
                      (long long)kn_tensor_numel(depth));
  int64_t d;
  if (kn_dtype_is_float(depth->dtype)) {
    double v = kn_scalar_f64(depth);
    if (!(v >= 1 && v < 9.2e18))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "depth %g must be positive", v);
    d = (int64_t)v;
  } else {
    d = kn_scalar_i64(depth);
  }
  if (d < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "depth %lld must be positive", (long long)d);
  *out = d;
  return KN_OK;
}

static kn_status onehot_infer(kn_op_ctx *ctx) {
  const kn_tensor *ix, *depth, *vals;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &ix)) || (st = kn_in_req(ctx, 1, &depth)) ||
      (st = kn_in_req(ctx, 2, &vals)))
    return st;
  if (depth->dtype == KN_DTYPE_STRING || ix->dtype == KN_DTYPE_STRING ||
      depth->dtype == KN_DTYPE_BOOL)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "indices and depth must be numeric");
  if (vals->rank >= 0 && kn_shape_known(vals) && kn_tensor_numel(vals) != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "values must hold two elements [off, on], got %lld",
                      (long long)kn_tensor_numel(vals));
  if (ix->rank < 0) {
    kn_out_set(ctx, 0, vals->dtype, -1, NULL);
    return KN_OK;
  }
  int32_t r = ix->rank + 1, axis;
  if ((st = rank_limit(ctx, r))) return st;
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", -1), r, &axis))) return st;
  int64_t dep = -1;
  if (kn_has_data(depth) && depth->rank >= 0)
    if ((st = onehot_depth(ctx, depth, &dep))) return st;
  int64_t d[KN_MAX_RANK];
  for (int32_t i = 0, j = 0; i < r; i++) d[i] = i == axis ? dep : ix->dims[j++];
  kn_out_set(ctx, 0, vals->dtype, r, d);
  return KN_OK;
}

static kn_status onehot_run(kn_op_ctx *ctx) {
  const kn_tensor *ix = kn_in(ctx, 0), *depth = kn_in(ctx, 1), *vals = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int64_t dep;
  int32_t axis;
  if ((st = onehot_depth(ctx, depth, &dep))) return st;
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", -1), ix->rank + 1, &axis))) return st;
  int64_t outer = kn_dims_prod(ix->dims, 0, axis), inner = kn_dims_prod(ix->dims, axis, ix->rank);
  int64_t n = kn_tensor_numel(y);
  /* Fill with off, then set on. */
  for (int64_t i = 0; i < n; i++)
    if ((st = kn_copy_elems(ctx, y->data, i, vals->data, 0, 1, vals->dtype))) return st;
  bool fl = kn_dtype_is_float(ix->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t e = o * inner + i, v;
      if (fl) {
        double f = kn_load_f64(ix->data, ix->dtype, e);
        if (!(f > -9.2e18 && f < 9.2e18)) continue;
        v = (int64_t)f;
      } else {
        v = kn_load_i64(ix->data, ix->dtype, e);
      }
      if (v < -dep || v >= dep) continue;
      if (v < 0) v += dep;
      if ((st = kn_copy_elems(ctx, y->data, (o * dep + v) * inner + i, vals->data, 1,
                           1, vals->dtype)))
        return st;
    }
  return KN_OK;
}

/* ---- Compress ------------------------------------------------------------- */

/* Number of selected slices; fails when a true condition lies beyond `dim`. */
static kn_status compress_count(kn_op_ctx *ctx, const kn_tensor *c, int64_t dim,
                                int64_t *out) {
  int64_t n = kn_tensor_numel(c), k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!kn_load_i64(c->data, c->dtype, i)) continue;
    if (i >= dim)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "condition is true at %lld, beyond the axis length %lld",
                        (long long)i, (long long)dim);
    k++;
  }
  *out = k;
  return KN_OK;
}

static kn_status compress_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *c;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &c))) return st;
  if ((st = kn_check_dtype(ctx, 1, c, (const kn_dtype[]){KN_DTYPE_BOOL, 0}))) return st;
  if (c->rank >= 0 && c->rank != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "condition must be 1-D, got rank %d",
                      (int)c->rank);
  const kn_attr *ax = kn_attr_get(ctx, "axis");
  if (x->rank < 0) {
    if (ax) kn_out_set(ctx, 0, x->dtype, -1, NULL);
    else kn_out_set(ctx, 0, x->dtype, 1, (const int64_t[]){-1});
    return KN_OK;
  }
  int64_t d[KN_MAX_RANK];
  int32_t r, axis = 0;
  if (ax) {
    if (x->rank < 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1 with an axis");
    if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis))) return st;
    r = x->rank;
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)r);
  } else {
    r = 1;
    d[0] = kn_shape_known(x) ? kn_tensor_numel(x) : -1;
  }
  int64_t dim = d[axis];
  d[axis] = -1;
  if (kn_has_data(c) && c->rank == 1 && dim >= 0)
    if ((st = compress_count(ctx, c, dim, &d[axis]))) return st;
  kn_out_set(ctx, 0, x->dtype, r, d);
  return KN_OK;
}

static kn_status compress_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *c = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int64_t outer = 1, dim, inner = 1;
  int32_t axis = 0;
  if (kn_attr_get(ctx, "axis")) {
    if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis))) return st;
    outer = kn_dims_prod(x->dims, 0, axis);
    dim = x->dims[axis];
    inner = kn_dims_prod(x->dims, axis + 1, x->rank);
  } else {
    dim = kn_tensor_numel(x);
  }
  int64_t k = 0;
  if ((st = compress_count(ctx, c, dim, &k))) return st;
  int64_t nc = kn_tensor_numel(c);
  if (nc > dim) nc = dim;
  int64_t j = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < nc; i++)
      if (kn_load_i64(c->data, c->dtype, i)) {
        if ((st = kn_copy_elems(ctx, y->data, j * inner, x->data, (o * dim + i) * inner,
                             inner, x->dtype)))
          return st;
        j++;
      }
  (void)k;
  return KN_OK;
}

/* ---- Unique --------------------------------------------------------------- */

/* Items are slices of x: item i starts at (o * n + i) * inner for every
 * outer o; compared lexicographically over (o, inner). */
typedef struct uniq_ctx {
  const kn_tensor *x;
  int64_t outer, n, inner;
} uniq_ctx;

static int cmp_elem(const kn_tensor *x, int64_t a, int64_t b) {
  switch (x->dtype) {
  case KN_DTYPE_STRING: {
    const char *sa = ((char *const *)x->data)[a], *sb = ((char *const *)x->data)[b];
    int c = strcmp(sa ? sa : "", sb ? sb : "");
    return (c > 0) - (c < 0);
  }
  case KN_DTYPE_U64: {
    uint64_t va = ((const uint64_t *)x->data)[a], vb = ((const uint64_t *)x->data)[b];
    return (va > vb) - (va < vb);
  }
  default:
    break;
  }
  if (kn_dtype_is_float(x->dtype)) {
    double va = kn_load_f64(x->data, x->dtype, a), vb = kn_load_f64(x->data, x->dtype, b);
    bool na = isnan(va), nb = isnan(vb);
    if (na || nb) return (int)na - (int)nb; /* NaN sorts last, equal to NaN */
    return (va > vb) - (va < vb);
  }
  int64_t va = kn_load_i64(x->data, x->dtype, a), vb = kn_load_i64(x->data, x->dtype, b);
  return (va > vb) - (va < vb);
}

static int cmp_item(const uniq_ctx *u, int64_t a, int64_t b) {
  for (int64_t o = 0; o < u->outer; o++)
    for (int64_t k = 0; k < u->inner; k++) {
      int c = cmp_elem(u->x, (o * u->n + a) * u->inner + k, (o * u->n + b) * u->inner + k);
      if (c) return c;
    }
  return 0;
}

/* Stable merge sort of item ids by value. */
static void sort_items(const uniq_ctx *u, int64_t *v, int64_t *tmp, int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = cmp_item(u, v[j], v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid) tmp[k++] = v[i++];
      while (j < hi) tmp[k++] = v[j++];
    }
    memcpy(v, tmp, (size_t)n * sizeof *v);
  }
}

static kn_status unique_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x))) return st;
  const kn_attr *ax = kn_attr_get(ctx, "axis");
  int64_t n = -1;
  if (!ax) {
    kn_out_set(ctx, 0, x->dtype, 1, (const int64_t[]){-1});
    if (x->rank >= 0 && kn_shape_known(x)) n = kn_tensor_numel(x);
  } else if (x->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
  } else {
    int32_t axis;
    if (x->rank < 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1 with an axis");
    if ((st = kn_axis(ctx, ax->i, x->rank, &axis))) return st;
    int64_t d[KN_MAX_RANK];
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
    n = d[axis];
    d[axis] = -1;
    kn_out_set(ctx, 0, x->dtype, x->rank, d);
  }
  int64_t unk = -1;
  kn_out_set(ctx, 1, KN_DTYPE_I64, 1, &unk);
  /* Left unknown even when n is known: run sizes every output itself. */
  (void)n;
  kn_out_set(ctx, 2, KN_DTYPE_I64, 1, &unk);
  kn_out_set(ctx, 3, KN_DTYPE_I64, 1, &unk);
  return KN_OK;
}

static kn_status unique_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_status st = KN_OK;
  uniq_ctx u = {x, 1, kn_tensor_numel(x), 1};
  int32_t axis = 0;
  const kn_attr *ax = kn_attr_get(ctx, "axis");
  if (ax) {
    if ((st = kn_axis(ctx, ax->i, x->rank, &axis))) return st;
    u.outer = kn_dims_prod(x->dims, 0, axis);
    u.n = x->dims[axis];
    u.inner = kn_dims_prod(x->dims, axis + 1, x->rank);
  }
  bool sorted = kn_attr_int(ctx, "sorted", 1) != 0;
  int64_t n = u.n, m = n ? n : 1;
  int64_t *perm = kn_malloc((size_t)m * sizeof(int64_t));
  int64_t *tmp = kn_malloc((size_t)m * sizeof(int64_t));
  int64_t *group = kn_malloc((size_t)m * sizeof(int64_t)); /* item -> group */
  int64_t *first = kn_malloc((size_t)m * sizeof(int64_t)); /* group -> item */
  int64_t *cnt = kn_calloc((size_t)m, sizeof(int64_t));
  int64_t *rank_of = kn_malloc((size_t)m * sizeof(int64_t)); /* group -> out pos */
  if (!perm || !tmp || !group || !first || !cnt || !rank_of) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  sort_items(&u, perm, tmp, n);
  int64_t ng = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || cmp_item(&u, perm[i - 1], perm[i]) != 0) first[ng++] = perm[i];
    group[perm[i]] = ng - 1;
    cnt[ng - 1]++;
  }
  /* Output order: sorted groups, or groups by first occurrence. */
  if (sorted) {
    for (int64_t g = 0; g < ng; g++) rank_of[g] = g;
  } else {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
      if (first[group[i]] == i) rank_of[group[i]] = k++;
  }
  int64_t yd[KN_MAX_RANK];
  int32_t yr = ax ? x->rank : 1;
  if (ax) memcpy(yd, x->dims, sizeof(int64_t) * (size_t)x->rank);
  yd[axis] = ng;
  if ((st = kn_out_alloc(ctx, 0, x->dtype, yr, yd))) goto done;
  for (int32_t k = 1; k < 4 && k < ctx->n_out; k++) {
    int64_t d = k == 2 ? n : ng;
    if ((st = kn_out_alloc(ctx, k, KN_DTYPE_I64, 1, &d))) goto done;
  }
  kn_tensor *y = kn_out(ctx, 0);
  for (int64_t g = 0; g < ng; g++)
    for (int64_t o = 0; o < u.outer; o++)
      if ((st = kn_copy_elems(ctx, y->data, (o * ng + rank_of[g]) * u.inner, x->data,
                           (o * n + first[g]) * u.inner, u.inner, x->dtype)))
        goto done;
  if (ctx->n_out > 1) {
    int64_t *oi = kn_out(ctx, 1)->data;
    for (int64_t g = 0; g < ng; g++) oi[rank_of[g]] = first[g];
  }
  if (ctx->n_out > 2) {
    int64_t *inv = kn_out(ctx, 2)->data;
    for (int64_t i = 0; i < n; i++) inv[i] = rank_of[group[i]];
  }
  if (ctx->n_out > 3) {
    int64_t *oc = kn_out(ctx, 3)->data;
    for (int64_t g = 0; g < ng; g++) oc[rank_of[g]] = cnt[g];
  }
done:
  free(perm);
  free(tmp);
  free(group);
  free(first);
  free(cnt);
  free(rank_of);
  return st;
}

const kn_op_def kn_ops_gather[] = {
    {"Gather", NULL, 2, 2, 1, 1, 1, 21, gather_infer, gather_run, NULL},
    {"GatherElements", NULL, 2, 2, 1, 1, 11, 21, gather_el_infer, gather_el_run, NULL},
    {"GatherND", NULL, 2, 2, 1, 1, 11, 21, gather_nd_infer, gather_nd_run, NULL},
    {"NonZero", NULL, 1, 1, 1, 1, 9, 21, nonzero_infer, nonzero_run, NULL, 0, KN_DATA_SHAPE_ALL},
    {"OneHot", NULL, 3, 3, 1, 1, 9, 21, onehot_infer, onehot_run, NULL, 0, KN_DATA_SHAPE_ARGS},
    {"Compress", NULL, 2, 2, 1, 1, 9, 21, compress_infer, compress_run, NULL, 0, KN_DATA_SHAPE_ARGS},
    {"Unique", NULL, 1, 1, 1, 4, 11, 21, unique_infer, unique_run, NULL, 0, KN_DATA_SHAPE_ALL},
    KN_OP_END,
};
