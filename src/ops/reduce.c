/* Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare,
 * ArgMax, ArgMin, TopK, CumSum.
 *
 * The Reduce* kernels read the input once in memory order and accumulate
 * into one accumulator per output element (double for floats and for the
 * ops whose result is not an integer, int64 with wrap-around for integer
 * sums and products so int64 stays exact).  Adjacent dims that are all
 * reduced or all kept are merged first, so the inner loop is either a
 * contiguous sum into one accumulator or an element-wise update of a row
 * of accumulators. */
#include "reduce.h"

#include <math.h>

/* ---- helpers ------------------------------------------------------------ */

static kn_status oom(kn_op_ctx *ctx) {
  return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
}

static inline double ld_f64(const void *p, kn_dtype dt, int64_t i) {
  if (dt == KN_DTYPE_F32) return ((const float *)p)[i];
  return kn_load_f64(p, dt, i);
}

/* int64 view of an integer element in which signed comparison orders the
 * values correctly (uint64 has its sign bit flipped). */
static inline int64_t ld_key(const void *p, kn_dtype dt, int64_t i) {
  int64_t v = kn_load_i64(p, dt, i);
  return dt == KN_DTYPE_U64 ? (int64_t)((uint64_t)v ^ ((uint64_t)1 << 63)) : v;
}

static inline int64_t key_to_val(int64_t k, kn_dtype dt) {
  return dt == KN_DTYPE_U64 ? (int64_t)((uint64_t)k ^ ((uint64_t)1 << 63)) : k;
}

/* Smallest and largest value of an integer dtype, in ld_key's order. */
static void int_limits(kn_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
  case KN_DTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
  case KN_DTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
  case KN_DTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
  case KN_DTYPE_U8: *lo = 0; *hi = UINT8_MAX; break;
  case KN_DTYPE_BOOL: *lo = 0; *hi = 1; break;
  case KN_DTYPE_U16: *lo = 0; *hi = UINT16_MAX; break;
  case KN_DTYPE_U32: *lo = 0; *hi = UINT32_MAX; break;
  default: *lo = INT64_MIN; *hi = INT64_MAX; break; /* I64, U64 (flipped) */
  }
}

/* ---- Reduce* ------------------------------------------------------------ */

typedef enum rop {
  ROP_SUM, ROP_MEAN, ROP_MAX, ROP_MIN, ROP_PROD, ROP_L1, ROP_L2,
  ROP_LOGSUM, ROP_LOGSUMEXP, ROP_SUMSQ
} rop;

static const struct {
  const char *name;
  rop op;
} rop_names[] = {
    {"ReduceSum", ROP_SUM},       {"ReduceMean", ROP_MEAN},
    {"ReduceMax", ROP_MAX},       {"ReduceMin", ROP_MIN},
    {"ReduceProd", ROP_PROD},     {"ReduceL1", ROP_L1},
    {"ReduceL2", ROP_L2},         {"ReduceLogSum", ROP_LOGSUM},
    {"ReduceLogSumExp", ROP_LOGSUMEXP}, {"ReduceSumSquare", ROP_SUMSQ},
};

static rop reduce_op(const kn_op_ctx *ctx) {
  for (size_t i = 0; i < sizeof rop_names / sizeof rop_names[0]; i++)
    if (!strcmp(ctx->node->op_type, rop_names[i].name)) return rop_names[i].op;
  KN_ASSERT(!"reduce op not in the table");
  return ROP_SUM;
}

/* Which dims are reduced.  *noop: return the input unchanged; *unknown:
 * axes not available yet (static inference). */
typedef struct rspec {
  bool mask[KN_MAX_RANK];
  bool keepdims, noop, unknown;
} rspec;

static kn_status reduce_spec(kn_op_ctx *ctx, rop op, int32_t r, rspec *sp) {
  int64_t axes[KN_MAX_RANK];
  int64_t n = 0;
  bool from_input = (op == ROP_SUM && ctx->opset >= 13) || ctx->opset >= 18;
  sp->keepdims = kn_attr_int(ctx, "keepdims", 1) != 0;
  sp->noop = sp->unknown = false;
  if (!from_input) {
    const int64_t *v;
    int32_t c = kn_attr_ints(ctx, "axes", &v);
    if (c > r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "'axes' has %d values for rank %d", (int)c, (int)r);
    for (int32_t i = 0; i < c; i++) axes[i] = v[i];
    n = c;
  } else if (ctx->n_in > 1 && ctx->in[1]) {
    const kn_tensor *a = kn_in(ctx, 1);
    if (!a) {
      if (!ctx->static_infer)
        return kn_op_fail(ctx, KN_ERR_DTYPE, "axes (input 1) must be a tensor");
      sp->unknown = true;
      return KN_OK;
    }
    if (a->dtype && a->dtype != KN_DTYPE_I64)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "axes must be int64, got %s", kn_dtype_name(a->dtype));
    if (a->rank > 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axes must be 1-D, got rank %d", (int)a->rank);
    if (!kn_has_data(a) || a->rank < 0) {
      if (!ctx->static_infer) return kn_op_fail(ctx, KN_ERR_MISSING, "axes have no values");
      sp->unknown = true;
      return KN_OK;
    }
    kn_status st = kn_read_ints(ctx, a, axes, r, &n);
    if (st) return st;
  }
  if (n == 0 && from_input && kn_attr_int(ctx, "noop_with_empty_axes", 0)) {
    sp->noop = true;
    for (int32_t i = 0; i < r; i++) sp->mask[i] = false;
    return KN_OK;
  }
  for (int32_t i = 0; i < r; i++) sp->mask[i] = n == 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (a < -(int64_t)r || a >= r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is out of range for rank %d",
                        (long long)a, (int)r);
    if (a < 0) a += r;
    if (sp->mask[a]) return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated", (long long)a);
    sp->mask[a] = true;
  }
  return KN_OK;
}

static kn_status reduce_dtype_ok(kn_op_ctx *ctx, rop op, kn_dtype dt) {
  if (!dt) return KN_OK;
  bool ok = kn_dtype_is_float(dt) || kn_dtype_is_int(dt) ||
            (dt == KN_DTYPE_BOOL && (op == ROP_MAX || op == ROP_MIN));
  if (!ok)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 has dtype %s, expected a numeric type",
                      kn_dtype_name(dt));
  return KN_OK;
}

static kn_status reduce_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  rop op = reduce_op(ctx);
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  st = reduce_dtype_ok(ctx, op, dt);
  if (st) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, dt, -1, NULL);
    return KN_OK;
  }
  rspec sp;
  st = reduce_spec(ctx, op, x->rank, &sp);
  if (st) return st;
  int64_t d[KN_MAX_RANK];
  if (sp.unknown) {
    for (int32_t i = 0; i < KN_MAX_RANK; i++) d[i] = -1;
    kn_out_set(ctx, 0, dt, sp.keepdims ? x->rank : -1, d);
    return KN_OK;
  }
  int32_t o = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (!sp.mask[i]) d[o++] = x->dims[i];
    else if (sp.keepdims) d[o++] = 1;
  }
  kn_out_set(ctx, 0, dt, o, d);
  return KN_OK;
}

typedef kn_reduce_plan rplan;

kn_status kn_reduce_view(kn_op_ctx *ctx, const kn_tensor *x, kn_reduce_plan *p, bool *noop) {
  rspec sp;
  kn_status st = reduce_spec(ctx, reduce_op(ctx), x->rank, &sp);
  if (st) return st;
  *noop = sp.noop;
  kn_reduce_plan_of(x, sp.mask, p);
  return KN_OK;
}

static void reduce_plan(const kn_tensor *x, const bool *mask, rplan *p) {
  kn_reduce_plan_of(x, mask, p);
}

void kn_reduce_plan_of(const kn_tensor *x, const bool *mask, kn_reduce_plan *p) {
  int64_t os[KN_MAX_RANK], s = 1;
  for (int32_t i = x->rank - 1; i >= 0; i--) {
    os[i] = mask[i] ? 0 : s;
    if (!mask[i]) s *= x->dims[i];
  }
  p->r = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (x->dims[i] == 1) continue;
    if (p->r > 0 && (p->os[p->r - 1] == 0) == (os[i] == 0)) {
      p->d[p->r - 1] *= x->dims[i];
      p->os[p->r - 1] = os[i];
      continue;
    }
    p->d[p->r] = x->dims[i];
    p->os[p->r] = os[i];
    p->r++;
  }
  if (p->r == 0) {
    p->d[0] = 1;
    p->os[0] = 1;
    p->r = 1;
  }
}

/* Accumulate f(x) into acc over the plan (double accumulators).  For
 * ROP_LOGSUMEXP, `shift` holds each output's max and exp(x - max) is summed. */
#define RLOOP(EXPR_RUN, EXPR_ROW)                                            \
  do {                                                                       \
    int64_t idx_[KN_MAX_RANK] = {0}, xo_ = 0, oo_ = 0;                       \
    int64_t len_ = p->d[p->r - 1];                                           \
    bool run_ = p->os[p->r - 1] == 0;                                        \
    for (;;) {                                                               \
      if (run_) {                                                            \
        for (int64_t j = 0; j < len_; j++) { EXPR_RUN; }                     \
      } else {                                                               \
        for (int64_t j = 0; j < len_; j++) { EXPR_ROW; }                     \
      }                                                                      \
      xo_ += len_;                                                           \
      int32_t k_ = p->r - 2;                                                 \
      for (; k_ >= 0; k_--) {                                                \
        oo_ += p->os[k_];                                                    \
        if (++idx_[k_] < p->d[k_]) break;                                    \
        oo_ -= p->os[k_] * p->d[k_];                                         \
        idx_[k_] = 0;                                                        \
      }                                                                      \
      if (k_ < 0) break;                                                     \
    }                                                                        \
  } while (0)

static void accumulate_f64(const rplan *p, const kn_tensor *x, rop op, double *acc,
                           const double *shift) {
  const void *xd = x->data;
  kn_dtype dt = x->dtype;
  if (kn_tensor_numel(x) == 0) return;
  switch (op) {
  case ROP_SUM:
  case ROP_MEAN:
  case ROP_LOGSUM:
    if (dt == KN_DTYPE_F32) {
      const float *xf = xd;
      RLOOP(acc[oo_] += xf[xo_ + j], acc[oo_ + j] += xf[xo_ + j]);
    } else {
      RLOOP(acc[oo_] += ld_f64(xd, dt, xo_ + j), acc[oo_ + j] += ld_f64(xd, dt, xo_ + j));
    }
    break;
  case ROP_L1:
    RLOOP(acc[oo_] += fabs(ld_f64(xd, dt, xo_ + j)),
          acc[oo_ + j] += fabs(ld_f64(xd, dt, xo_ + j)));
    break;
  case ROP_L2:
  case ROP_SUMSQ: {
    double v;
    RLOOP((v = ld_f64(xd, dt, xo_ + j), acc[oo_] += v * v),
          (v = ld_f64(xd, dt, xo_ + j), acc[oo_ + j] += v * v));
    break;
  }
  case ROP_PROD:
    RLOOP(acc[oo_] *= ld_f64(xd, dt, xo_ + j), acc[oo_ + j] *= ld_f64(xd, dt, xo_ + j));
    break;
  case ROP_MAX: {
    double v;
    RLOOP((v = ld_f64(xd, dt, xo_ + j), acc[oo_] = (v > acc[oo_] || v != v) ? v : acc[oo_]),
          (v = ld_f64(xd, dt, xo_ + j),
           acc[oo_ + j] = (v > acc[oo_ + j] || v != v) ? v : acc[oo_ + j]));
    break;
  }
  case ROP_MIN: {
    double v;
    RLOOP((v = ld_f64(xd, dt, xo_ + j), acc[oo_] = (v < acc[oo_] || v != v) ? v : acc[oo_]),
          (v = ld_f64(xd, dt, xo_ + j),
           acc[oo_ + j] = (v < acc[oo_ + j] || v != v) ? v : acc[oo_ + j]));
    break;
  }
  case ROP_LOGSUMEXP:
    RLOOP(acc[oo_] += exp(ld_f64(xd, dt, xo_ + j) - shift[oo_]),
          acc[oo_ + j] += exp(ld_f64(xd, dt, xo_ + j) - shift[oo_ + j]));
    break;
  }
}

/* Integer accumulation (sum, prod, max, min, L1, sum of squares). */
static void accumulate_i64(const rplan *p, const kn_tensor *x, rop op, int64_t *acc) {
  const void *xd = x->data;
  kn_dtype dt = x->dtype;
  if (kn_tensor_numel(x) == 0) return;
  int64_t v;
  switch (op) {
  case ROP_SUM:
    RLOOP(acc[oo_] = (int64_t)((uint64_t)acc[oo_] + (uint64_t)kn_load_i64(xd, dt, xo_ + j)),
          acc[oo_ + j] = (int64_t)((uint64_t)acc[oo_ + j] +
                                   (uint64_t)kn_load_i64(xd, dt, xo_ + j)));
    break;
  case ROP_L1:
    RLOOP((v = kn_load_i64(xd, dt, xo_ + j),
           acc[oo_] = (int64_t)((uint64_t)acc[oo_] + (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v))),
          (v = kn_load_i64(xd, dt, xo_ + j),
           acc[oo_ + j] = (int64_t)((uint64_t)acc[oo_ + j] +
                                    (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v))));
    break;
  case ROP_SUMSQ:
    RLOOP((v = kn_load_i64(xd, dt, xo_ + j),
           acc[oo_] = (int64_t)((uint64_t)acc[oo_] + (uint64_t)v * (uint64_t)v)),
          (v = kn_load_i64(xd, dt, xo_ + j),
           acc[oo_ + j] = (int64_t)((uint64_t)acc[oo_ + j] + (uint64_t)v * (uint64_t)v)));
    break;
  case ROP_PROD:
    RLOOP(acc[oo_] = (int64_t)((uint64_t)acc[oo_] * (uint64_t)kn_load_i64(xd, dt, xo_ + j)),
          acc[oo_ + j] = (int64_t)((uint64_t)acc[oo_ + j] *
                                   (uint64_t)kn_load_i64(xd, dt, xo_ + j)));
    break;
  case ROP_MAX:
    RLOOP((v = ld_key(xd, dt, xo_ + j), acc[oo_] = v > acc[oo_] ? v : acc[oo_]),
          (v = ld_key(xd, dt, xo_ + j), acc[oo_ + j] = v > acc[oo_ + j] ? v : acc[oo_ + j]));
    break;
  case ROP_MIN:
    RLOOP((v = ld_key(xd, dt, xo_ + j), acc[oo_] = v < acc[oo_] ? v : acc[oo_]),
          (v = ld_key(xd, dt, xo_ + j), acc[oo_ + j] = v < acc[oo_ + j] ? v : acc[oo_ + j]));
    break;
  default:
    KN_ASSERT(!"accumulate_i64: not an integer reduction");
  }
}

static kn_status reduce_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  rop op = reduce_op(ctx);
  rspec sp;
  kn_status st = reduce_spec(ctx, op, x->rank, &sp);
  if (st) return st;
  int64_t nout = kn_tensor_numel(o);
  if (sp.noop) {
    if (nout > 0) memcpy(o->data, x->data, (size_t)nout * kn_dtype_size(x->dtype));
    return KN_OK;
  }
  if (nout == 0) return KN_OK;
  int64_t n_in = kn_tensor_numel(x);
  int64_t count = n_in / nout; /* elements per output; 0 for empty reductions */
  if (n_in == 0) {
    count = 1;
    for (int32_t i = 0; i < x->rank; i++)
      if (sp.mask[i]) count *= x->dims[i];
  }
  rplan p;
  reduce_plan(x, sp.mask, &p);
  kn_dtype dt = x->dtype;
  bool int_path = !kn_dtype_is_float(dt) &&
                  (op == ROP_SUM || op == ROP_PROD || op == ROP_MAX || op == ROP_MIN ||
                   op == ROP_L1 || op == ROP_SUMSQ);
  if (int_path) {
    int64_t *acc = kn_malloc((size_t)nout * sizeof *acc);
    if (!acc) return oom(ctx);
    int64_t lo, hi, init = 0;
    int_limits(dt, &lo, &hi);
    if (op == ROP_PROD) init = 1;
    if (op == ROP_MAX) init = lo;
    if (op == ROP_MIN) init = hi;
    for (int64_t i = 0; i < nout; i++) acc[i] = init;
    accumulate_i64(&p, x, op, acc);
    bool keyed = op == ROP_MAX || op == ROP_MIN;
    for (int64_t i = 0; i < nout; i++)
      kn_store_i64(o->data, dt, i, keyed ? key_to_val(acc[i], dt) : acc[i]);
    free(acc);
    return KN_OK;
  }
  double *acc = kn_malloc((size_t)nout * sizeof *acc);
  double *shift = NULL;
  if (!acc) return oom(ctx);
  double init = 0;
  if (op == ROP_PROD) init = 1;
  if (op == ROP_MAX || op == ROP_LOGSUMEXP) init = -INFINITY;
  if (op == ROP_MIN) init = INFINITY;
  for (int64_t i = 0; i < nout; i++) acc[i] = init;
  if (op == ROP_LOGSUMEXP) {
    accumulate_f64(&p, x, ROP_MAX, acc, NULL);
    shift = acc;
    acc = kn_malloc((size_t)nout * sizeof *acc);
    if (!acc) {
      free(shift);
      return oom(ctx);
    }
    for (int64_t i = 0; i < nout; i++) {
      if (!isfinite(shift[i])) shift[i] = isnan(shift[i]) ? shift[i] : 0;
      acc[i] = 0;
    }
  }
  accumulate_f64(&p, x, op, acc, shift);
  for (int64_t i = 0; i < nout; i++) {
    double v = acc[i];
    switch (op) {
    case ROP_MEAN: v = v / (double)count; break;
    case ROP_L2: v = sqrt(v); break;
    case ROP_LOGSUM: v = log(v); break;
    case ROP_LOGSUMEXP: v = log(v) + shift[i]; break;
    default: break;
    }
    if (dt == KN_DTYPE_F32) ((float *)o->data)[i] = (float)v;
    else kn_store_f64(o->data, dt, i, v);
  }
  free(acc);
  free(shift);
  return KN_OK;
}

static double reduce_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int64_t n = x ? kn_tensor_numel(x) : 0;
  return n > 0 ? (double)n : 0;
}

/* ---- ArgMax / ArgMin ---------------------------------------------------- */

static kn_status arg_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (x && x->dtype && !kn_dtype_is_float(x->dtype) && !kn_dtype_is_int(x->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 has dtype %s, expected a numeric type",
                      kn_dtype_name(x->dtype));
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, KN_DTYPE_I64, -1, NULL);
    return KN_OK;
  }
  if (x->rank == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1");
  int32_t axis;
  st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis);
  if (st) return st;
  bool keep = kn_attr_int(ctx, "keepdims", 1) != 0;
  int64_t d[KN_MAX_RANK];
  int32_t o = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i != axis) d[o++] = x->dims[i];
    else if (keep) d[o++] = 1;
  }
  if (!ctx->static_infer && x->dims[axis] == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot take the arg of an empty axis %d", (int)axis);
  kn_out_set(ctx, 0, KN_DTYPE_I64, o, d);
  return KN_OK;
}

static kn_status arg_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *ot = kn_out_ready(ctx, 0);
  if (!ot) return KN_ERR_INTERNAL;
  int64_t *out = ot->data;
  int32_t axis;
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis);
  if (st) return st;
  bool is_max = !strcmp(ctx->node->op_type, "ArgMax");
  bool last = ctx->opset >= 12 && kn_attr_int(ctx, "select_last_index", 0) != 0;
  int64_t outer = kn_shape_numel(axis, x->dims), n = x->dims[axis];
  int64_t inner = kn_shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  kn_dtype dt = x->dtype;
  bool fl = kn_dtype_is_float(dt);
  for (int64_t a = 0; a < outer; a++) {
    for (int64_t b = 0; b < inner; b++) {
      int64_t base = a * n * inner + b, best = 0;
      if (fl) {
        double bv = ld_f64(x->data, dt, base);
        for (int64_t k = 1; k < n && bv == bv; k++) {
          double v = ld_f64(x->data, dt, base + k * inner);
          bool better = v != v || (is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv));
          if (better) {
            bv = v;
            best = k;
          }
        }
      } else {
        int64_t bv = ld_key(x->data, dt, base);
        for (int64_t k = 1; k < n; k++) {
          int64_t v = ld_key(x->data, dt, base + k * inner);
          bool better = is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
          if (better) {
            bv = v;
            best = k;
          }
        }
      }
      out[a * inner + b] = best;
    }
  }
  return KN_OK;
}

/* ---- TopK --------------------------------------------------------------- */

typedef struct topk_item {
  double f;
  int64_t i;   /* integer key (ld_key order) */
  int64_t idx; /* position along the axis; ties keep the lower first */
} topk_item;

/* NaN sorts above every number so the order is total. */
static int cmp_f(double a, double b) {
  bool na = a != a, nb = b != b;
  if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  return a < b ? -1 : (a > b ? 1 : 0);
}
static int topk_desc_f(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  int c = cmp_f(b->f, a->f);
  return c ? c : (a->idx < b->idx ? -1 : 1);
}
static int topk_asc_f(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  int c = cmp_f(a->f, b->f);
  return c ? c : (a->idx < b->idx ? -1 : 1);
}
static int topk_desc_i(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->i != b->i) return a->i > b->i ? -1 : 1;
  return a->idx < b->idx ? -1 : 1;
}
static int topk_asc_i(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->i != b->i) return a->i < b->i ? -1 : 1;
  return a->idx < b->idx ? -1 : 1;
}

/* k, or -1 when not known yet (static inference). */
static kn_status topk_k(kn_op_ctx *ctx, int64_t *k) {
  *k = -1;
  if (ctx->opset < 10) {
    if (!kn_attr_get(ctx, "k"))
      return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'k' is required before opset 10");
    *k = kn_attr_int(ctx, "k", 0);
  } else {
    const kn_tensor *t = kn_in(ctx, 1);
    if (!t || !kn_has_data(t) || t->rank < 0) {
      if (!ctx->static_infer)
        return kn_op_fail(ctx, KN_ERR_MISSING, "K (input 1) is required");
      return KN_OK;
    }
    if (t->dtype != KN_DTYPE_I64 || kn_tensor_numel(t) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "K must be a 1-element int64 tensor");
    *k = kn_scalar_i64(t);
  }
  if (*k < 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "k is %lld, expected >= 0", (long long)*k);
  return KN_OK;
}

static kn_status topk_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  kn_dtype dt = x ? x->dtype : KN_DTYPE_UNDEFINED;
  if (dt && !kn_dtype_is_float(dt) && !kn_dtype_is_int(dt))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 has dtype %s, expected a numeric type",
                      kn_dtype_name(dt));
  int64_t k;
  st = topk_k(ctx, &k);
  if (st) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, dt, -1, NULL);
    kn_out_set(ctx, 1, KN_DTYPE_I64, -1, NULL);
    return KN_OK;
  }
  if (x->rank == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1");
  int32_t axis;
  st = kn_axis(ctx, kn_attr_int(ctx, "axis", -1), x->rank, &axis);
  if (st) return st;
  if (k >= 0 && x->dims[axis] >= 0 && k > x->dims[axis])
    return kn_op_fail(ctx, KN_ERR_SHAPE, "k = %lld exceeds the axis size %lld", (long long)k,
                      (long long)x->dims[axis]);
  int64_t d[KN_MAX_RANK];
  memcpy(d, x->dims, sizeof d);
  d[axis] = k;
  kn_out_set(ctx, 0, dt, x->rank, d);
  kn_out_set(ctx, 1, KN_DTYPE_I64, x->rank, d);
  return KN_OK;
}

static kn_status topk_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int64_t k;
  int32_t axis;
  kn_status st = topk_k(ctx, &k);
  if (!st) st = kn_axis(ctx, kn_attr_int(ctx, "axis", -1), x->rank, &axis);
  if (st) return st;
  kn_tensor *ov = kn_out_ready(ctx, 0);
  if (!ov) return KN_ERR_INTERNAL;
  kn_tensor *oit = kn_out_ready(ctx, 1);
  if (!oit) return KN_ERR_INTERNAL;
  int64_t *oi = oit->data;
  bool largest = ctx->opset < 11 || kn_attr_int(ctx, "largest", 1) != 0;
  int64_t outer = kn_shape_numel(axis, x->dims), n = x->dims[axis];
  int64_t inner = kn_shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  if (k == 0 || outer == 0 || inner == 0) return KN_OK;
  kn_dtype dt = x->dtype;
  bool fl = kn_dtype_is_float(dt);
  size_t es = kn_dtype_size(dt);
  int (*cmp)(const void *, const void *) =
      fl ? (largest ? topk_desc_f : topk_asc_f) : (largest ? topk_desc_i : topk_asc_i);
  topk_item *items = kn_malloc((size_t)n * sizeof *items);
  if (!items) return oom(ctx);
  for (int64_t a = 0; a < outer; a++) {
    for (int64_t b = 0; b < inner; b++) {
      int64_t base = a * n * inner + b;
      for (int64_t q = 0; q < n; q++) {
        int64_t at = base + q * inner;
        items[q].idx = q;
        if (fl) items[q].f = ld_f64(x->data, dt, at);
        else items[q].i = ld_key(x->data, dt, at);
      }
      qsort(items, (size_t)n, sizeof *items, cmp);
      int64_t obase = a * k * inner + b;
      for (int64_t q = 0; q < k; q++) {
        int64_t to = obase + q * inner, from = base + items[q].idx * inner;
        memcpy((char *)ov->data + (size_t)to * es, (const char *)x->data + (size_t)from * es, es);
        if (oi) oi[to] = items[q].idx;
      }
    }
  }
  free(items);
  return KN_OK;
}

/* ---- CumSum ------------------------------------------------------------- */

static kn_status cumsum_axis(kn_op_ctx *ctx, const kn_tensor *x, int32_t *axis, bool *known) {
  const kn_tensor *a = kn_in(ctx, 1);
  *known = false;
  if (a && a->dtype && a->dtype != KN_DTYPE_I32 && a->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "axis must be int32 or int64, got %s",
                      kn_dtype_name(a->dtype));
  if (!a || !kn_has_data(a) || a->rank < 0) {
    if (!ctx->static_infer) return kn_op_fail(ctx, KN_ERR_MISSING, "axis (input 1) is required");
    return KN_OK;
  }
  if (kn_tensor_numel(a) != 1 || a->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "axis must be a scalar");
  kn_status st = kn_axis(ctx, kn_scalar_i64(a), x->rank, axis);
  if (st) return st;
  *known = true;
  return KN_OK;
}

static kn_status cumsum_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_need(ctx, 0, &x);
  if (st) return st;
  if (x && x->dtype && !kn_dtype_is_float(x->dtype) && !kn_dtype_is_int(x->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 has dtype %s, expected a numeric type",
                      kn_dtype_name(x->dtype));
  if (x && x->rank >= 0) {
    if (x->rank == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1");
    int32_t axis;
    bool known;
    st = cumsum_axis(ctx, x, &axis, &known);
    if (st) return st;
  }
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

static kn_status cumsum_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int32_t axis;
  bool known;
  kn_status st = cumsum_axis(ctx, x, &axis, &known);
  if (st) return st;
  bool excl = kn_attr_int(ctx, "exclusive", 0) != 0;
  bool rev = kn_attr_int(ctx, "reverse", 0) != 0;
  int64_t outer = kn_shape_numel(axis, x->dims), n = x->dims[axis];
  int64_t inner = kn_shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  if (outer == 0 || n == 0 || inner == 0) return KN_OK;
  kn_dtype dt = x->dtype;
  bool fl = kn_dtype_is_float(dt);
  double *af = NULL;
  uint64_t *ai = NULL;
  if (fl) af = kn_malloc((size_t)inner * sizeof *af);
  else ai = kn_malloc((size_t)inner * sizeof *ai);
  if (!af && !ai) return oom(ctx);
  for (int64_t a = 0; a < outer; a++) {
    if (fl) memset(af, 0, (size_t)inner * sizeof *af);
    else memset(ai, 0, (size_t)inner * sizeof *ai);
    for (int64_t s = 0; s < n; s++) {
      int64_t q = rev ? n - 1 - s : s;
      int64_t base = (a * n + q) * inner;
      for (int64_t b = 0; b < inner; b++) {
        if (fl) {
          double v = ld_f64(x->data, dt, base + b);
          if (excl) {
            kn_store_f64(o->data, dt, base + b, af[b]);
            af[b] += v;
          } else {
            af[b] += v;
            kn_store_f64(o->data, dt, base + b, af[b]);
          }
        } else {
          uint64_t v = (uint64_t)kn_load_i64(x->data, dt, base + b);
          if (excl) {
            kn_store_i64(o->data, dt, base + b, (int64_t)ai[b]);
            ai[b] += v;
          } else {
            ai[b] += v;
            kn_store_i64(o->data, dt, base + b, (int64_t)ai[b]);
          }
        }
      }
    }
  }
  free(af);
  free(ai);
  return KN_OK;
}

/* ---- table -------------------------------------------------------------- */

#define REDUCE(name) {name, NULL, 1, 2, 1, 1, 1, 21, reduce_infer, reduce_run, reduce_flops}

const kn_op_def kn_ops_reduce[] = {
    REDUCE("ReduceSum"),
    REDUCE("ReduceMean"),
    REDUCE("ReduceMax"),
    REDUCE("ReduceMin"),
    REDUCE("ReduceProd"),
    REDUCE("ReduceL1"),
    REDUCE("ReduceL2"),
    REDUCE("ReduceLogSum"),
    REDUCE("ReduceLogSumExp"),
    REDUCE("ReduceSumSquare"),
    {"ArgMax", NULL, 1, 1, 1, 1, 1, 21, arg_infer, arg_run, reduce_flops},
    {"ArgMin", NULL, 1, 1, 1, 1, 1, 21, arg_infer, arg_run, reduce_flops},
    {"TopK", NULL, 1, 2, 2, 2, 1, 21, topk_infer, topk_run, reduce_flops},
    {"CumSum", NULL, 2, 2, 1, 1, 11, 21, cumsum_infer, cumsum_run, reduce_flops},
    KN_OP_END,
};
