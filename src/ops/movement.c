/* Data movement ops: Transpose, Concat, Split, Slice, Expand, Tile, Pad,
 * Trilu, DepthToSpace, SpaceToDepth, ReverseSequence.
 *
 * Most of them are one strided gather: every output element reads the
 * input at `offset + sum(index_k * stride_k)`, with strides chosen per op
 * (permuted for Transpose, scaled for Slice, 0 along broadcast dims for
 * Expand and Tile).  gather_strided merges contiguous dims and copies the
 * innermost run with memcpy when it is dense.  String elements are
 * duplicated: string tensors own their elements.  The copy kernels that
 * Transpose, Concat, Split and Slice run in a built model are
 * src/tactics/movement_tactics.c. */
#include "movement.h"

/* Tile views its output with twice the input's rank. */
#define GATHER_MAX_RANK (2 * KN_MAX_RANK)

/* ---- helpers ------------------------------------------------------------ */

static double no_flops(const kn_op_ctx *ctx) {
  (void)ctx;
  return 0;
}

static kn_status oom(kn_op_ctx *ctx) {
  return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
}

#define STRIDED_LOOP(T)                                                      \
  do {                                                                       \
    T *d_ = (T *)dst + o;                                                    \
    const T *s_ = (const T *)src + p;                                        \
    for (int64_t j = 0; j < len; j++) d_[j] = s_[j * s];                     \
  } while (0)

/* dst (dense, shape dims[0..r)) = src[off + sum idx_k * strides[k]]. */
static kn_status gather_strided(kn_op_ctx *ctx, kn_dtype dt, void *dst,
                                const void *src, int32_t rank, const int64_t *dims,
                                const int64_t *strides, int64_t off) {
  int64_t d[GATHER_MAX_RANK], st[GATHER_MAX_RANK];
  int32_t r = 0;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) return KN_OK;
    if (dims[i] == 1) continue;
    if (r > 0 && st[r - 1] == strides[i] * dims[i]) { /* merge with previous */
      d[r - 1] *= dims[i];
      st[r - 1] = strides[i];
      continue;
    }
    d[r] = dims[i];
    st[r] = strides[i];
    r++;
  }
  if (r == 0) {
    d[0] = 1;
    st[0] = 1;
    r = 1;
  }
  size_t es = kn_dtype_size(dt);
  int64_t len = d[r - 1], s = st[r - 1];
  int64_t idx[GATHER_MAX_RANK] = {0};
  int64_t p = off, o = 0;
  for (;;) {
    if (dt == KN_DTYPE_STRING) {
      char **dd = (char **)dst + o;
      char *const *ss = (char *const *)src + p;
      for (int64_t j = 0; j < len; j++) {
        free(dd[j]);
        dd[j] = kn_strdup(ss[j * s] ? ss[j * s] : "");
        if (!dd[j]) return oom(ctx);
      }
    } else if (s == 1) {
      memcpy((char *)dst + (size_t)o * es, (const char *)src + (size_t)p * es,
             (size_t)len * es);
    } else {
      switch (es) {
      case 1: STRIDED_LOOP(uint8_t); break;
      case 2: STRIDED_LOOP(uint16_t); break;
      case 4: STRIDED_LOOP(uint32_t); break;
      default: STRIDED_LOOP(uint64_t); break;
      }
    }
    o += len;
    int32_t k = r - 2;
    for (; k >= 0; k--) {
      p += st[k];
      if (++idx[k] < d[k]) break;
      p -= st[k] * d[k];
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  return KN_OK;
}

/* Reads an integer input of at most `max` values into vals.  *known is
 * false when the values are not available (static inference). */
static kn_status ints_input(kn_op_ctx *ctx, int32_t i, const char *what, int64_t *vals,
                            int64_t max, int64_t *n, bool *known) {
  const kn_tensor *t = kn_in(ctx, i);
  *known = false;
  *n = -1;
  if (!t) {
    if (!ctx->static_infer)
      return kn_op_fail(ctx, KN_ERR_MISSING, "%s (input %d) is required", what, (int)i);
    return KN_OK;
  }
  if (t->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s (input %d) must be 1-D, got rank %d", what,
                      (int)i, (int)t->rank);
  if (t->dtype && !kn_dtype_is_int(t->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "%s (input %d) must be an integer tensor, got %s",
                      what, (int)i, kn_dtype_name(t->dtype));
  if (t->rank == 1) *n = t->dims[0];
  if (t->rank == 0) *n = 1;
  if (*n > max)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s (input %d) has %lld values, at most %lld expected",
                      what, (int)i, (long long)*n, (long long)max);
  if (t->rank < 0 || !kn_has_data(t)) {
    if (!ctx->static_infer)
      return kn_op_fail(ctx, KN_ERR_MISSING, "%s (input %d) has no values", what, (int)i);
    return KN_OK;
  }
  kn_status st = kn_read_ints(ctx, t, vals, max, n);
  if (st) return st;
  *known = true;
  return KN_OK;
}

static void all_unknown(int64_t *d) {
  for (int32_t i = 0; i < KN_MAX_RANK; i++) d[i] = -1;
}

/* ---- Transpose ---------------------------------------------------------- */

static kn_status transpose_perm(kn_op_ctx *ctx, int32_t r, int32_t *perm) {
  const int64_t *p;
  int32_t n = kn_attr_ints(ctx, "perm", &p);
  if (!kn_attr_get(ctx, "perm")) {
    for (int32_t i = 0; i < r; i++) perm[i] = r - 1 - i;
    return KN_OK;
  }
  if (n != r)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "'perm' has %d entries for an input of rank %d",
                      (int)n, (int)r);
  bool seen[KN_MAX_RANK] = {false};
  for (int32_t i = 0; i < r; i++) {
    int64_t v = p[i] < 0 ? p[i] + r : p[i];
    if (v < 0 || v >= r || seen[v])
      return kn_op_fail(ctx, KN_ERR_SHAPE, "'perm' is not a permutation of 0..%d",
                        (int)r - 1);
    seen[v] = true;
    perm[i] = (int32_t)v;
  }
  return KN_OK;
}

static kn_status transpose_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (!x || x->rank < 0) {
    const int64_t *p;
    int32_t n = kn_attr_ints(ctx, "perm", &p);
    int64_t d[KN_MAX_RANK];
    all_unknown(d);
    kn_out_set(ctx, 0, x ? x->dtype : KN_DTYPE_UNDEFINED,
               kn_attr_get(ctx, "perm") && n <= KN_MAX_RANK ? n : -1, d);
    return KN_OK;
  }
  int32_t perm[KN_MAX_RANK];
  st = transpose_perm(ctx, x->rank, perm);
  if (st) return st;
  int64_t d[KN_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) d[i] = x->dims[perm[i]];
  kn_out_set(ctx, 0, x->dtype, x->rank, d);
  return KN_OK;
}

kn_status kn_transpose_strides(kn_op_ctx *ctx, const kn_tensor *x, int64_t *strides) {
  int32_t perm[KN_MAX_RANK];
  kn_status st = transpose_perm(ctx, x->rank, perm);
  if (st) return st;
  int64_t xs[KN_MAX_RANK];
  kn_strides(x->rank, x->dims, xs);
  for (int32_t i = 0; i < x->rank; i++) strides[i] = xs[perm[i]];
  return KN_OK;
}

static kn_status transpose_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t s[KN_MAX_RANK];
  kn_status st = kn_transpose_strides(ctx, x, s);
  if (st) return st;
  return gather_strided(ctx, x->dtype, o->data, x->data, o->rank, o->dims, s, 0);
}

/* ---- Concat ------------------------------------------------------------- */

static kn_status concat_infer(kn_op_ctx *ctx) {
  int64_t axis_attr = kn_attr_int(ctx, "axis", 1);
  if (ctx->opset >= 4 && !kn_attr_get(ctx, "axis"))
    return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'axis' is required");
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int32_t r = -1;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t;
    kn_status st = kn_in_need(ctx, i, &t);
    if (st) return st;
    if (!t) continue;
    if (t->dtype && dt && t->dtype != dt)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, input 0 has %s", (int)i,
                        kn_dtype_name(t->dtype), kn_dtype_name(dt));
    if (t->dtype) dt = t->dtype;
    if (t->rank >= 0) {
      if (r >= 0 && t->rank != r)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d has rank %d, expected %d", (int)i,
                          (int)t->rank, (int)r);
      r = t->rank;
    }
  }
  if (r < 0) {
    kn_out_set(ctx, 0, dt, -1, NULL);
    return KN_OK;
  }
  if (r == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot concatenate scalars");
  int32_t axis;
  kn_status st = kn_axis(ctx, axis_attr, r, &axis);
  if (st) return st;
  int64_t d[KN_MAX_RANK];
  all_unknown(d);
  int64_t sum = 0;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t || t->rank < 0) {
      sum = -1;
      continue;
    }
    for (int32_t k = 0; k < r; k++) {
      if (k == axis) continue;
      if (t->dims[k] < 0) continue;
      if (d[k] >= 0 && d[k] != t->dims[k]) {
        char sa[128];
        return kn_op_fail(ctx, KN_ERR_SHAPE,
                          "input %d has shape %s: dim %d is %lld, other inputs have %lld",
                          (int)i, kn_shape_str(t->rank, t->dims, sa, sizeof sa), (int)k,
                          (long long)t->dims[k], (long long)d[k]);
      }
      d[k] = t->dims[k];
    }
    if (t->dims[axis] < 0 || sum < 0) sum = -1;
    else if (sum > INT64_MAX - t->dims[axis])
      return kn_op_fail(ctx, KN_ERR_LIMIT, "concatenated size overflows");
    else sum += t->dims[axis];
  }
  d[axis] = sum;
  kn_out_set(ctx, 0, dt, r, d);
  return KN_OK;
}

static kn_status concat_run(kn_op_ctx *ctx) {
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int32_t axis;
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 1), o->rank, &axis);
  if (st) return st;
  int64_t outer = kn_shape_numel(axis, o->dims);
  int64_t inner = kn_shape_numel(o->rank - axis - 1, o->dims + axis + 1);
  int64_t orow = o->dims[axis] * inner, at = 0;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t) continue;
    int64_t row = t->dims[axis] * inner;
    bool placed = outer == 1 && t->dtype != KN_DTYPE_STRING &&
                  (char *)o->data + (size_t)at * kn_dtype_size(o->dtype) == t->data;
    for (int64_t q = 0; q < outer && row > 0 && !placed; q++) {
      st = kn_copy_elems(ctx, o->data, q * orow + at, t->data, q * row, row, o->dtype);
      if (st) return st;
    }
    at += row;
  }
  return KN_OK;
}

/* ---- Split -------------------------------------------------------------- */

/* Sizes of the n_out parts along the axis of length dim (-1: unknown). */
static kn_status split_sizes(kn_op_ctx *ctx, int64_t dim, int64_t *sizes) {
  int32_t n = ctx->n_out;
  int64_t vals[1024];
  int64_t cnt = -1;
  bool given = false, known = false;
  if (ctx->opset < 13) {
    const int64_t *v;
    int32_t c = kn_attr_ints(ctx, "split", &v);
    if (kn_attr_get(ctx, "split")) {
      if (c > 1024) return kn_op_fail(ctx, KN_ERR_LIMIT, "too many parts in 'split'");
      for (int32_t i = 0; i < c; i++) vals[i] = v[i];
      cnt = c;
      given = known = true;
    } else if (kn_in(ctx, 1)) { /* Split-1 also took it as an input */
      kn_status st = ints_input(ctx, 1, "split", vals, 1024, &cnt, &known);
      if (st) return st;
      given = true;
    }
  } else if (ctx->n_in > 1 && ctx->in[1]) {
    kn_status st = ints_input(ctx, 1, "split", vals, 1024, &cnt, &known);
    if (st) return st;
    given = true;
  }
  if (given) {
    if (ctx->opset >= 18 && kn_attr_get(ctx, "num_outputs"))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "both 'split' and 'num_outputs' are given");
    if (!known) {
      for (int32_t i = 0; i < n; i++) sizes[i] = -1;
      return KN_OK;
    }
    if (cnt != n)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "'split' has %lld parts but the node has %d "
                        "outputs", (long long)cnt, (int)n);
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++) {
      if (vals[i] < 0 || vals[i] > INT64_MAX / 2 - sum)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "split size %lld is invalid",
                          (long long)vals[i]);
      sum += vals[i];
      sizes[i] = vals[i];
    }
    if (dim >= 0 && sum != dim)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "split sizes add up to %lld, the axis has %lld",
                        (long long)sum, (long long)dim);
    return KN_OK;
  }
  bool uneven = false;
  if (ctx->opset >= 18 && kn_attr_get(ctx, "num_outputs")) {
    int64_t no = kn_attr_int(ctx, "num_outputs", 0);
    if (no != n)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "num_outputs is %lld but the node has %d outputs",
                        (long long)no, (int)n);
    uneven = true;
  }
  if (dim < 0) {
    for (int32_t i = 0; i < n; i++) sizes[i] = -1;
    return KN_OK;
  }
  if (!uneven) {
    if (dim % n != 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axis of size %lld does not split evenly into %d "
                        "parts", (long long)dim, (int)n);
    for (int32_t i = 0; i < n; i++) sizes[i] = dim / n;
    return KN_OK;
  }
  int64_t chunk = dim / n + (dim % n != 0);
  int64_t left = dim;
  for (int32_t i = 0; i < n; i++) {
    sizes[i] = i == n - 1 ? left : chunk;
    if (sizes[i] > left) sizes[i] = left;
    left -= sizes[i];
  }
  if (sizes[n - 1] < 0 || left != 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "axis of size %lld cannot be split into %d parts",
                      (long long)dim, (int)n);
  return KN_OK;
}

kn_status kn_split_parts(kn_op_ctx *ctx, const kn_tensor *x, int32_t *axis, int64_t **parts) {
  *parts = NULL;
  if (ctx->n_out > 1024)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "too many outputs (%d)", (int)ctx->n_out);
  if (!x || x->rank < 0) return KN_OK;
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, axis);
  if (st) return st;
  if (x->rank == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot split a scalar");
  int64_t *sizes = kn_malloc((size_t)ctx->n_out * sizeof *sizes);
  if (!sizes) return oom(ctx);
  st = split_sizes(ctx, x->dims[*axis], sizes);
  if (st) {
    free(sizes);
    return st;
  }
  *parts = sizes;
  return KN_OK;
}

static kn_status split_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int32_t axis;
  int64_t *sizes;
  st = kn_split_parts(ctx, x, &axis, &sizes);
  if (st) return st;
  for (int32_t i = 0; i < ctx->n_out; i++) {
    int64_t d[KN_MAX_RANK];
    if (!sizes) {
      kn_out_set(ctx, i, x ? x->dtype : KN_DTYPE_UNDEFINED, -1, NULL);
      continue;
    }
    memcpy(d, x->dims, sizeof d);
    d[axis] = sizes[i];
    kn_out_set(ctx, i, x->dtype, x->rank, d);
  }
  free(sizes);
  return KN_OK;
}

static kn_status split_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int32_t axis;
  int64_t *sizes;
  kn_status st = kn_split_parts(ctx, x, &axis, &sizes);
  if (st) return st;
  int64_t xs[KN_MAX_RANK], start = 0;
  kn_strides(x->rank, x->dims, xs);
  for (int32_t i = 0; i < ctx->n_out; i++) {
    kn_tensor *o = kn_out_ready(ctx, i);
    if (!o) {
      st = KN_ERR_INTERNAL;
      break;
    }
    st = gather_strided(ctx, x->dtype, o->data, x->data, o->rank, o->dims, xs,
                        start * xs[axis]);
    if (st) break;
    start += sizes[i];
  }
  free(sizes);
  return st;
}

/* ---- Slice -------------------------------------------------------------- */

typedef struct slice_plan {
  int64_t start[KN_MAX_RANK], step[KN_MAX_RANK], len[KN_MAX_RANK];
} slice_plan;

/* Output dims of the slice; dims -1 where unknown. */
static kn_status slice_plan_make(kn_op_ctx *ctx, const kn_tensor *x, slice_plan *pl,
                                 int64_t *out) {
  int32_t r = x->rank;
  int64_t starts[KN_MAX_RANK], ends[KN_MAX_RANK], axes[KN_MAX_RANK], steps[KN_MAX_RANK];
  int64_t ns = 0, ne = 0, na = -1, nst = -1;
  bool ks = true, ke = true, ka = true, kst = true;
  if (ctx->opset < 10) {
    const int64_t *v;
    ns = kn_attr_ints(ctx, "starts", &v);
    if (ns > r) goto too_many;
    for (int64_t i = 0; i < ns; i++) starts[i] = v[i];
    ne = kn_attr_ints(ctx, "ends", &v);
    if (ne > r) goto too_many;
    for (int64_t i = 0; i < ne; i++) ends[i] = v[i];
    if (kn_attr_get(ctx, "axes")) {
      na = kn_attr_ints(ctx, "axes", &v);
      if (na > r) goto too_many;
      for (int64_t i = 0; i < na; i++) axes[i] = v[i];
    }
    if (!kn_attr_get(ctx, "starts") || !kn_attr_get(ctx, "ends"))
      return kn_op_fail(ctx, KN_ERR_MISSING, "attributes 'starts' and 'ends' are required");
  } else {
    kn_status st = ints_input(ctx, 1, "starts", starts, r, &ns, &ks);
    if (!st) st = ints_input(ctx, 2, "ends", ends, r, &ne, &ke);
    if (!st && kn_in(ctx, 3)) st = ints_input(ctx, 3, "axes", axes, r, &na, &ka);
    if (!st && kn_in(ctx, 4)) st = ints_input(ctx, 4, "steps", steps, r, &nst, &kst);
    if (st) return st;
    if (ctx->static_infer && ctx->n_in > 3 && ctx->in[3] && !kn_in(ctx, 3)) ka = false;
    if (ctx->static_infer && ctx->n_in > 4 && ctx->in[4] && !kn_in(ctx, 4)) kst = false;
    if (!kn_in(ctx, 1) || !kn_in(ctx, 2)) ks = false;
  }
  if (ns >= 0 && ne >= 0 && ns != ne)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "starts has %lld values, ends %lld", (long long)ns,
                      (long long)ne);
  int64_t n = ns >= 0 ? ns : ne;
  if (na >= 0 && n >= 0 && na != n)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "axes has %lld values, starts %lld", (long long)na,
                      (long long)n);
  if (nst >= 0 && n >= 0 && nst != n)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "steps has %lld values, starts %lld",
                      (long long)nst, (long long)n);
  for (int32_t i = 0; i < r; i++) {
    pl->start[i] = 0;
    pl->step[i] = 1;
    pl->len[i] = x->dims[i];
    out[i] = x->dims[i];
  }
  if (!ka || n < 0) { /* which axes are sliced is unknown */
    for (int32_t i = 0; i < r; i++) out[i] = -1;
    return KN_OK;
  }
  bool seen[KN_MAX_RANK] = {false};
  for (int64_t i = 0; i < n; i++) {
    int64_t a = na >= 0 ? axes[i] : i;
    if (a < -(int64_t)r || a >= r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is out of range for rank %d",
                        (long long)a, (int)r);
    if (a < 0) a += r;
    if (seen[a]) return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated", (long long)a);
    seen[a] = true;
    if (!ks || !ke || !kst || x->dims[a] < 0) {
      out[a] = -1;
      continue;
    }
    int64_t dim = x->dims[a];
    int64_t step = nst >= 0 ? steps[i] : 1;
    if (step == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "step for axis %lld is 0", (long long)a);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim; /* no overflow: dim >= 0 */
    if (e < 0) e += dim;
    if (step > 0) {
      if (s < 0) s = 0;
      if (s > dim) s = dim;
      if (e < 0) e = 0;
      if (e > dim) e = dim;
    } else {
      if (s < 0) s = 0;
      if (s > dim - 1) s = dim - 1;
      if (e < -1) e = -1;
      if (e > dim - 1) e = dim - 1;
    }
    int64_t len;
    if (step > 0) {
      len = e > s ? (int64_t)(((uint64_t)(e - s) + (uint64_t)step - 1) / (uint64_t)step) : 0;
    } else {
      uint64_t ms = (uint64_t)0 - (uint64_t)step;
      len = s > e ? (int64_t)(((uint64_t)(s - e) + ms - 1) / ms) : 0;
    }
    pl->start[a] = len > 0 ? s : 0;
    pl->step[a] = step;
    pl->len[a] = len;
    out[a] = len;
  }
  return KN_OK;
too_many:
  return kn_op_fail(ctx, KN_ERR_SHAPE, "more slice entries than the input's rank %d", (int)r);
}

static kn_status slice_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, x ? x->dtype : KN_DTYPE_UNDEFINED, -1, NULL);
    return KN_OK;
  }
  slice_plan pl;
  int64_t d[KN_MAX_RANK];
  st = slice_plan_make(ctx, x, &pl, d);
  if (st) return st;
  kn_out_set(ctx, 0, x->dtype, x->rank, d);
  return KN_OK;
}

kn_status kn_slice_view(kn_op_ctx *ctx, const kn_tensor *x, int64_t *strides, int64_t *off) {
  slice_plan pl;
  int64_t d[KN_MAX_RANK], xs[KN_MAX_RANK];
  kn_status st = slice_plan_make(ctx, x, &pl, d);
  if (st) return st;
  kn_strides(x->rank, x->dims, xs);
  *off = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    strides[i] = xs[i] * pl.step[i];
    *off += pl.start[i] * xs[i];
  }
  return KN_OK;
}

static kn_status slice_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t s[KN_MAX_RANK], off;
  kn_status st = kn_slice_view(ctx, x, s, &off);
  if (st) return st;
  return gather_strided(ctx, x->dtype, o->data, x->data, o->rank, o->dims, s, off);
}

/* ---- Expand ------------------------------------------------------------- */

static kn_status expand_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  int64_t shp[KN_MAX_RANK], n;
  bool known;
  const kn_tensor *s = kn_in(ctx, 1);
  if (s && s->dtype && s->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "shape (input 1) must be int64, got %s",
                      kn_dtype_name(s->dtype));
  st = ints_input(ctx, 1, "shape", shp, KN_MAX_RANK, &n, &known);
  if (st) return st;
  if (!x || x->rank < 0 || !known) {
    int64_t d[KN_MAX_RANK];
    all_unknown(d);
    if (x && x->rank >= 0 && n >= 0)
      kn_out_set(ctx, 0, dt, (int32_t)(n > x->rank ? n : x->rank), d);
    else
      kn_out_set(ctx, 0, dt, -1, NULL);
    return KN_OK;
  }
  for (int64_t i = 0; i < n; i++)
    if (shp[i] < 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "shape value %lld is negative", (long long)shp[i]);
  int32_t r;
  int64_t d[KN_MAX_RANK];
  st = kn_broadcast(ctx, x->rank, x->dims, (int32_t)n, shp, &r, d);
  if (st) return st;
  kn_out_set(ctx, 0, dt, r, d);
  return KN_OK;
}

static kn_status expand_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t s[KN_MAX_RANK];
  kn_broadcast_strides(x->rank, x->dims, o->rank, o->dims, s);
  return gather_strided(ctx, x->dtype, o->data, x->data, o->rank, o->dims, s, 0);
}

/* ---- Tile --------------------------------------------------------------- */

static kn_status tile_repeats(kn_op_ctx *ctx, const kn_tensor *x, int64_t *rep, bool *known) {
  int32_t r = x->rank;
  *known = false;
  if (ctx->opset < 6) { /* Tile-1: tiles and axis scalars */
    const kn_tensor *t = kn_in(ctx, 1), *a = kn_in(ctx, 2);
    if (!t || !a || !kn_has_data(t) || !kn_has_data(a)) {
      if (!ctx->static_infer)
        return kn_op_fail(ctx, KN_ERR_MISSING, "inputs 'tiles' and 'axis' are required");
      return KN_OK;
    }
    if (kn_tensor_numel(t) != 1 || kn_tensor_numel(a) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "'tiles' and 'axis' must be scalars");
    int32_t ax;
    kn_status st = kn_axis(ctx, kn_scalar_i64(a), r, &ax);
    if (st) return st;
    for (int32_t i = 0; i < r; i++) rep[i] = 1;
    rep[ax] = kn_scalar_i64(t);
  } else {
    int64_t n;
    kn_status st = ints_input(ctx, 1, "repeats", rep, KN_MAX_RANK, &n, known);
    if (st) return st;
    if (!*known) return KN_OK;
    if (n != r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "repeats has %lld values, input rank is %d",
                        (long long)n, (int)r);
  }
  for (int32_t i = 0; i < r; i++)
    if (rep[i] < 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "repeat %lld for axis %d is negative",
                        (long long)rep[i], (int)i);
  *known = true;
  return KN_OK;
}

static kn_status tile_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, x ? x->dtype : KN_DTYPE_UNDEFINED, -1, NULL);
    return KN_OK;
  }
  int64_t rep[KN_MAX_RANK], d[KN_MAX_RANK];
  bool known;
  st = tile_repeats(ctx, x, rep, &known);
  if (st) return st;
  for (int32_t i = 0; i < x->rank; i++) {
    if (!known || x->dims[i] < 0) {
      d[i] = -1;
      continue;
    }
    if (rep[i] > 0 && x->dims[i] > INT64_MAX / rep[i])
      return kn_op_fail(ctx, KN_ERR_LIMIT, "tiled size overflows");
    d[i] = x->dims[i] * rep[i];
  }
  kn_out_set(ctx, 0, x->dtype, x->rank, d);
  return KN_OK;
}

static kn_status tile_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t rep[KN_MAX_RANK], xs[KN_MAX_RANK];
  bool known;
  kn_status st = tile_repeats(ctx, x, rep, &known);
  if (st) return st;
  kn_strides(x->rank, x->dims, xs);
  int64_t d[GATHER_MAX_RANK], s[GATHER_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) {
    d[2 * i] = rep[i];
    s[2 * i] = 0;
    d[2 * i + 1] = x->dims[i];
    s[2 * i + 1] = xs[i];
  }
  return gather_strided(ctx, x->dtype, o->data, x->data, 2 * x->rank, d, s, 0);
}

/* ---- Pad ---------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

static kn_status pad_mode(kn_op_ctx *ctx, int *mode) {
  const char *m = kn_attr_str(ctx, "mode", "constant");
  if (!strcmp(m, "constant")) *mode = PAD_CONSTANT;
  else if (!strcmp(m, "reflect")) *mode = PAD_REFLECT;
  else if (!strcmp(m, "edge")) *mode = PAD_EDGE;
  else if (!strcmp(m, "wrap") && ctx->opset >= 19) *mode = PAD_WRAP;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "pad mode '%s' is not one of constant, "
                      "reflect, edge%s", m, ctx->opset >= 19 ? ", wrap" : "");
  return KN_OK;
}

/* Per-axis pads (begin in pads[i], end in pads[r + i]); *known false when
 * they are not available yet. */
static kn_status pad_amounts(kn_op_ctx *ctx, int32_t r, int64_t *pads, bool *known) {
  *known = false;
  if (ctx->opset < 11) {
    const int64_t *v;
    const char *name = ctx->opset < 2 ? "paddings" : "pads";
    int32_t n = kn_attr_ints(ctx, name, &v);
    if (!kn_attr_get(ctx, name))
      return kn_op_fail(ctx, KN_ERR_MISSING, "attribute '%s' is required", name);
    if (n != 2 * r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "'%s' has %d values, expected %d for rank %d",
                        name, (int)n, 2 * (int)r, (int)r);
    for (int32_t i = 0; i < n; i++) pads[i] = v[i];
    *known = true;
    return KN_OK;
  }
  int64_t raw[2 * KN_MAX_RANK], axes[KN_MAX_RANK], n, na = -1;
  bool k1, ka = true;
  kn_status st = ints_input(ctx, 1, "pads", raw, 2 * KN_MAX_RANK, &n, &k1);
  if (st) return st;
  if (ctx->opset >= 18 && ctx->n_in > 3 && ctx->in[3]) {
    if (kn_in(ctx, 3)) {
      st = ints_input(ctx, 3, "axes", axes, KN_MAX_RANK, &na, &ka);
      if (st) return st;
    } else {
      ka = !ctx->static_infer; /* a value-less input at run time: omitted */
    }
  }
  if (!k1 || !ka) return KN_OK;
  if (na < 0) {
    if (n != 2 * r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "pads has %lld values, expected %d for rank %d",
                        (long long)n, 2 * (int)r, (int)r);
    memcpy(pads, raw, (size_t)n * sizeof *pads);
  } else {
    if (n != 2 * na)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "pads has %lld values, expected %lld for %lld axes",
                        (long long)n, (long long)(2 * na), (long long)na);
    bool seen[KN_MAX_RANK] = {false};
    for (int32_t i = 0; i < 2 * r; i++) pads[i] = 0;
    for (int64_t i = 0; i < na; i++) {
      int64_t a = axes[i];
      if (a < -(int64_t)r || a >= r)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is out of range for rank %d",
                          (long long)a, (int)r);
      if (a < 0) a += r;
      if (seen[a]) return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated", (long long)a);
      seen[a] = true;
      pads[a] = raw[i];
      pads[r + a] = raw[na + i];
    }
  }
  *known = true;
  return KN_OK;
}

static kn_status pad_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int mode;
  st = pad_mode(ctx, &mode);
  if (st) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, x ? x->dtype : KN_DTYPE_UNDEFINED, -1, NULL);
    return KN_OK;
  }
  const kn_tensor *cv = ctx->opset >= 11 ? kn_in(ctx, 2) : NULL;
  if (cv && cv->dtype && x->dtype && cv->dtype != x->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "constant_value has dtype %s, input has %s",
                      kn_dtype_name(cv->dtype), kn_dtype_name(x->dtype));
  if (cv && cv->rank >= 0 && kn_shape_known(cv) && kn_tensor_numel(cv) > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "constant_value must hold one value");
  int32_t r = x->rank;
  int64_t pads[2 * KN_MAX_RANK], d[KN_MAX_RANK];
  bool known;
  st = pad_amounts(ctx, r, pads, &known);
  if (st) return st;
  for (int32_t i = 0; i < r; i++) {
    if (!known || x->dims[i] < 0) {
      d[i] = -1;
      continue;
    }
    int64_t b = pads[i], e = pads[r + i];
    if (b > INT64_MAX / 4 || e > INT64_MAX / 4 || b < -INT64_MAX / 4 || e < -INT64_MAX / 4)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "pad amount out of range");
    d[i] = x->dims[i] + b + e;
    int64_t w = x->dims[i] + (b < 0 ? b : 0) + (e < 0 ? e : 0);
    if (d[i] < 0 || w < 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "pads %lld, %lld leave axis %d of size %lld "
                        "negative", (long long)b, (long long)e, (int)i, (long long)x->dims[i]);
    if (w == 0 && d[i] > 0 && mode != PAD_CONSTANT)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot pad empty axis %d in mode '%s'", (int)i,
                        kn_attr_str(ctx, "mode", "constant"));
  }
  kn_out_set(ctx, 0, x->dtype, r, d);
  return KN_OK;
}

kn_status kn_pad_plan_make(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *o,
                           kn_pad_plan *p) {
  memset(p, 0, sizeof *p);
  p->sfill = "";
  int mode;
  int32_t r = x->rank;
  int64_t pads[2 * KN_MAX_RANK];
  bool known;
  kn_status st = pad_mode(ctx, &mode);
  if (!st) st = pad_amounts(ctx, r, pads, &known);
  if (st) return st;
  kn_dtype dt = x->dtype;
  size_t es = kn_dtype_size(dt);
  /* the padding value, as one element */
  if (ctx->opset < 11) {
    if (dt == KN_DTYPE_STRING)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "string input needs opset 11 or later");
    kn_store_f64(p->fill, dt, 0, kn_attr_float(ctx, "value", 0.0f));
  } else {
    const kn_tensor *cv = kn_in(ctx, 2);
    if (cv && kn_tensor_numel(cv) == 1) {
      if (dt == KN_DTYPE_STRING)
        p->sfill = *(char *const *)cv->data ? *(char *const *)cv->data : "";
      else memcpy(p->fill, cv->data, es);
    }
  }
  if (r == 0) return KN_OK;
  /* per-axis map from output index to input index (-1: padding value);
   * negative pads crop first, then the mode pads the cropped window */
  int64_t sum = 0;
  for (int32_t i = 0; i < r; i++) sum += o->dims[i];
  p->map = kn_malloc((size_t)sum * sizeof *p->map + 1);
  if (!p->map) return oom(ctx);
  int64_t xs[KN_MAX_RANK];
  kn_strides(r, x->dims, xs);
  int64_t at = 0;
  for (int32_t i = 0; i < r; i++) {
    int64_t b = pads[i], e = pads[r + i];
    int64_t lo = b < 0 ? -b : 0, pb = b > 0 ? b : 0;
    int64_t w = x->dims[i] - lo - (e < 0 ? -e : 0);
    p->maps[i] = p->map + at;
    at += o->dims[i];
    for (int64_t q = 0; q < o->dims[i]; q++) {
      int64_t k = q - pb, src;
      if (k >= 0 && k < w) src = k;
      else if (mode == PAD_CONSTANT) src = -1;
      else if (mode == PAD_EDGE) src = k < 0 ? 0 : w - 1;
      else if (mode == PAD_WRAP) src = ((k % w) + w) % w;
      else if (w == 1) src = 0;
      else {
        int64_t per = 2 * (w - 1);
        int64_t m = ((k % per) + per) % per;
        src = m < w ? m : per - m;
      }
      p->maps[i][q] = src < 0 ? -1 : (lo + src) * xs[i];
    }
    if (i == r - 1) p->run_out = pb, p->run_in = lo, p->run_len = w > 0 ? w : 0;
  }
  return KN_OK;
}

void kn_pad_plan_free(kn_pad_plan *p) {
  free(p->map);
  p->map = NULL;
}

static kn_status pad_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int32_t r = x->rank;
  kn_dtype dt = x->dtype;
  size_t es = kn_dtype_size(dt);
  int64_t total = kn_tensor_numel(o);
  if (total == 0) return KN_OK;
  kn_pad_plan pp;
  kn_status st = kn_pad_plan_make(ctx, x, o, &pp);
  if (st) return st;
  if (r == 0) return kn_copy_elems(ctx, o->data, 0, x->data, 0, 1, dt);
  const unsigned char *fill = pp.fill;
  const char *sfill = pp.sfill;
  int64_t *const *maps = pp.maps;
  int64_t idx[KN_MAX_RANK] = {0};
  int64_t inner = o->dims[r - 1];
  const int64_t *last = maps[r - 1];
  int64_t outer = total / inner;
  st = KN_OK;
  for (int64_t q = 0; q < outer && !st; q++) {
    int64_t base = 0;
    bool pad_row = false;
    for (int32_t k = 0; k < r - 1; k++) {
      int64_t m = maps[k][idx[k]];
      if (m < 0) pad_row = true;
      base += m;
    }
    int64_t ob = q * inner;
    if (dt == KN_DTYPE_STRING) {
      char **d = (char **)o->data + ob;
      char *const *sx = x->data;
      for (int64_t j = 0; j < inner; j++) {
        const char *v = (pad_row || last[j] < 0) ? sfill : sx[base + last[j]];
        free(d[j]);
        d[j] = kn_strdup(v ? v : "");
        if (!d[j]) {
          st = oom(ctx);
          break;
        }
      }
    } else if (dt == KN_DTYPE_F32) {
      float *d = (float *)o->data + ob;
      const float *sx = x->data;
      float fv;
      memcpy(&fv, fill, 4);
      for (int64_t j = 0; j < inner; j++)
        d[j] = (pad_row || last[j] < 0) ? fv : sx[base + last[j]];
    } else {
      unsigned char *d = (unsigned char *)o->data + (size_t)ob * es;
      const unsigned char *sx = x->data;
      for (int64_t j = 0; j < inner; j++) {
        const void *v = (pad_row || last[j] < 0) ? (const void *)fill
                                                  : (const void *)(sx + (size_t)(base + last[j]) * es);
        memcpy(d + (size_t)j * es, v, es);
      }
    }
    for (int32_t k = r - 2; k >= 0; k--) {
      if (++idx[k] < o->dims[k]) break;
      idx[k] = 0;
    }
  }
  kn_pad_plan_free(&pp);
  return st;
}

/* ---- Trilu -------------------------------------------------------------- */

static kn_status trilu_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (x && x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 2, got %d", (int)x->rank);
  const kn_tensor *k = kn_in(ctx, 1);
  if (k && k->rank >= 0 && kn_shape_known(k) && kn_tensor_numel(k) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "k must hold one value");
  if (k && k->dtype && k->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "k must be int64, got %s", kn_dtype_name(k->dtype));
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status trilu_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *kt = kn_in(ctx, 1);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  bool upper = kn_attr_int(ctx, "upper", 1) != 0;
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t k = kt ? kn_scalar_i64(kt) : 0;
  int64_t lim = rows + cols + 1;
  if (k > lim) k = lim;
  if (k < -lim) k = -lim;
  int64_t mats = (rows > 0 && cols > 0) ? kn_tensor_numel(x) / (rows * cols) : 0;
  static const char empty[] = "";
  const char *const empty_row = empty;
  for (int64_t m = 0; m < mats; m++) {
    for (int64_t i = 0; i < rows; i++) {
      int64_t lo, hi; /* kept columns [lo, hi) */
      if (upper) {
        lo = i + k < 0 ? 0 : (i + k > cols ? cols : i + k);
        hi = cols;
      } else {
        lo = 0;
        hi = i + k + 1 < 0 ? 0 : (i + k + 1 > cols ? cols : i + k + 1);
      }
      int64_t row = (m * rows + i) * cols;
      kn_status st =
          kn_copy_elems(ctx, o->data, row + lo, x->data, row + lo, hi - lo, x->dtype);
      if (st) return st;
      if (x->dtype == KN_DTYPE_STRING) {
        for (int64_t j = 0; j < cols; j++) {
          if (j >= lo && j < hi) continue;
          st = kn_copy_elems(ctx, o->data, row + j, &empty_row, 0, 1, x->dtype);
          if (st) return st;
        }
      }
    }
  }
  return KN_OK;
}

/* ---- DepthToSpace / SpaceToDepth ---------------------------------------- */

static kn_status blocksize(kn_op_ctx *ctx, int64_t *b) {
  *b = kn_attr_int(ctx, "blocksize", 0);
  if (!kn_attr_get(ctx, "blocksize"))
    return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'blocksize' is required");
  if (*b <= 0 || *b > (1 << 20))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "blocksize %lld is invalid", (long long)*b);
  return KN_OK;
}

static kn_status d2s_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t b;
  st = blocksize(ctx, &b);
  if (st) return st;
  const char *mode = kn_attr_str(ctx, "mode", "DCR");
  if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "mode '%s' is not DCR or CRD", mode);
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  int64_t d[4] = {-1, -1, -1, -1};
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, dt, 4, d);
    return KN_OK;
  }
  if (x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must be 4-D (NCHW), got rank %d", (int)x->rank);
  if (x->dims[1] >= 0 && x->dims[1] % (b * b) != 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "channels %lld are not divisible by blocksize^2 = %lld",
                      (long long)x->dims[1], (long long)(b * b));
  d[0] = x->dims[0];
  d[1] = x->dims[1] < 0 ? -1 : x->dims[1] / (b * b);
  d[2] = x->dims[2] < 0 ? -1 : x->dims[2] * b;
  d[3] = x->dims[3] < 0 ? -1 : x->dims[3] * b;
  kn_out_set(ctx, 0, dt, 4, d);
  return KN_OK;
}

static kn_status d2s_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t b;
  kn_status st = blocksize(ctx, &b);
  if (st) return st;
  bool crd = !strcmp(kn_attr_str(ctx, "mode", "DCR"), "CRD");
  int64_t n = x->dims[0], c = x->dims[1] / (b * b), h = x->dims[2], w = x->dims[3];
  int64_t hw = h * w;
  /* output viewed as [n, c', h, b1, w, b2] */
  int64_t d[6] = {n, c, h, b, w, b};
  int64_t s[6];
  s[0] = x->dims[1] * hw;
  s[2] = w;
  s[4] = 1;
  if (crd) { /* channel = c' * b * b + b1 * b + b2 */
    s[1] = b * b * hw;
    s[3] = b * hw;
    s[5] = hw;
  } else { /* channel = b1 * b * c' + b2 * c' + c' */
    s[1] = hw;
    s[3] = b * c * hw;
    s[5] = c * hw;
  }
  return gather_strided(ctx, x->dtype, o->data, x->data, 6, d, s, 0);
}

static kn_status s2d_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  int64_t b;
  st = blocksize(ctx, &b);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  int64_t d[4] = {-1, -1, -1, -1};
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, dt, 4, d);
    return KN_OK;
  }
  if (x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must be 4-D (NCHW), got rank %d", (int)x->rank);
  for (int32_t i = 2; i < 4; i++)
    if (x->dims[i] >= 0 && x->dims[i] % b != 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "dim %d (%lld) is not divisible by blocksize %lld",
                        (int)i, (long long)x->dims[i], (long long)b);
  if (x->dims[1] > INT64_MAX / (b * b))
    return kn_op_fail(ctx, KN_ERR_LIMIT, "channel count overflows");
  d[0] = x->dims[0];
  d[1] = x->dims[1] < 0 ? -1 : x->dims[1] * b * b;
  d[2] = x->dims[2] < 0 ? -1 : x->dims[2] / b;
  d[3] = x->dims[3] < 0 ? -1 : x->dims[3] / b;
  kn_out_set(ctx, 0, dt, 4, d);
  return KN_OK;
}

static kn_status s2d_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t b;
  kn_status st = blocksize(ctx, &b);
  if (st) return st;
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
  /* out[n, (b1*b + b2)*c + ci, h', w'] = x[n, ci, h'*b + b1, w'*b + b2];
   * output viewed as [n, b1, b2, c, h', w'] */
  int64_t d[6] = {n, b, b, c, h / b, w / b};
  int64_t s[6] = {c * h * w, w, 1, h * w, b * w, b};
  return gather_strided(ctx, x->dtype, o->data, x->data, 6, d, s, 0);
}

/* ---- ReverseSequence ---------------------------------------------------- */

static kn_status revseq_axes(kn_op_ctx *ctx, int32_t *ta, int32_t *ba) {
  int64_t t = kn_attr_int(ctx, "time_axis", 0), b = kn_attr_int(ctx, "batch_axis", 1);
  if ((t != 0 && t != 1) || (b != 0 && b != 1) || t == b)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "time_axis %lld and batch_axis %lld must be 0 and 1 "
                      "in some order", (long long)t, (long long)b);
  *ta = (int32_t)t;
  *ba = (int32_t)b;
  return KN_OK;
}

static kn_status revseq_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *l;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (!st) st = kn_in_need(ctx, 1, &l);
  if (st) return st;
  int32_t ta = 0, ba = 1;
  st = revseq_axes(ctx, &ta, &ba);
  if (st) return st;
  if (l && l->dtype && l->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "sequence_lens must be int64, got %s",
                      kn_dtype_name(l->dtype));
  if (x && x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 2, got %d", (int)x->rank);
  if (l && l->rank >= 0 && l->rank != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "sequence_lens must be 1-D");
  if (x && l && x->rank >= 2 && l->rank == 1 && x->dims[ba] >= 0 && l->dims[0] >= 0 &&
      x->dims[ba] != l->dims[0])
    return kn_op_fail(ctx, KN_ERR_SHAPE, "sequence_lens has %lld values, batch size is %lld",
                      (long long)l->dims[0], (long long)x->dims[ba]);
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status revseq_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *l = kn_in(ctx, 1);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int32_t ta = 0, ba = 1;
  kn_status st = revseq_axes(ctx, &ta, &ba);
  if (st) return st;
  const int64_t *lens = l->data;
  int64_t d0 = x->dims[0], d1 = x->dims[1], maxlen = x->dims[ta];
  int64_t inner = kn_shape_numel(x->rank - 2, x->dims + 2);
  for (int64_t b = 0; b < x->dims[ba]; b++)
    if (lens[b] < 0 || lens[b] > maxlen)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "sequence length %lld for batch %lld is outside "
                        "0..%lld", (long long)lens[b], (long long)b, (long long)maxlen);
  for (int64_t i0 = 0; i0 < d0; i0++) {
    for (int64_t i1 = 0; i1 < d1; i1++) {
      int64_t b = ba == 0 ? i0 : i1, t = ta == 0 ? i0 : i1, len = lens[b];
      int64_t src_t = t < len ? len - 1 - t : t;
      int64_t s0 = ta == 0 ? src_t : i0, s1 = ta == 1 ? src_t : i1;
      st = kn_copy_elems(ctx, o->data, (i0 * d1 + i1) * inner, x->data,
                         (s0 * d1 + s1) * inner, inner, x->dtype);
      if (st) return st;
    }
  }
  return KN_OK;
}

/* ---- table -------------------------------------------------------------- */

const kn_op_def kn_ops_movement[] = {
    {"Transpose", NULL, 1, 1, 1, 1, 1, 21, transpose_infer, transpose_run, no_flops},
    {"Concat", NULL, 1, -1, 1, 1, 1, 21, concat_infer, concat_run, no_flops},
    {"Split", NULL, 1, 2, 1, -1, 1, 21, split_infer, split_run, no_flops},
    {"Slice", NULL, 1, 5, 1, 1, 1, 21, slice_infer, slice_run, no_flops},
    {"Expand", NULL, 2, 2, 1, 1, 8, 21, expand_infer, expand_run, no_flops},
    {"Tile", NULL, 2, 3, 1, 1, 1, 21, tile_infer, tile_run, no_flops},
    {"Pad", NULL, 1, 4, 1, 1, 1, 21, pad_infer, pad_run, no_flops},
    {"Trilu", NULL, 1, 2, 1, 1, 14, 21, trilu_infer, trilu_run, no_flops},
    {"DepthToSpace", NULL, 1, 1, 1, 1, 1, 21, d2s_infer, d2s_run, no_flops},
    {"SpaceToDepth", NULL, 1, 1, 1, 1, 1, 21, s2d_infer, s2d_run, no_flops},
    {"ReverseSequence", NULL, 2, 2, 1, 1, 10, 21, revseq_infer, revseq_run, no_flops},
    KN_OP_END,
};
