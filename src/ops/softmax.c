/* Softmax, LogSoftmax and Hardmax (every opset form).
 *
 * Opset < 13 coerces the input to 2-D at `axis` (default 1): rows are
 * dims[:axis], and each row of prod(dims[axis:]) elements is normalised.
 * Opset >= 13 normalises along the single axis `axis` (default -1).  Both
 * map onto one (outer, len, inner) geometry: len elements at stride inner.
 * Softmax subtracts the lane maximum before exponentiating so large inputs
 * do not overflow.  float16/bfloat16 compute in float32, float64 in double.
 * The vectorised float32 Softmax and LogSoftmax are src/tactics/softmax_tactics.c. */
#include "softmax.h"

#include <math.h>

typedef enum sm_kind { SM_SOFT, SM_LOG, SM_HARD } sm_kind;

static const kn_dtype sm_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                    KN_DTYPE_BF16, 0};

kn_status kn_softmax_geometry(kn_op_ctx *ctx, const kn_tensor *x, int64_t *outer,
                             int64_t *len, int64_t *inner) {
  bool coerce = ctx->opset < 13;
  int64_t axis = kn_attr_int(ctx, "axis", coerce ? 1 : -1);
  int32_t r = x->rank, a;
  if (coerce) {
    /* [-r, r]: axis == r makes every element its own row. */
    if (axis < -(int64_t)r || axis > r)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "axis %lld is out of range for a tensor of rank %d",
                        (long long)axis, (int)r);
    a = (int32_t)(axis < 0 ? axis + r : axis);
  } else {
    kn_status st = kn_axis(ctx, axis, r, &a);
    if (st) return st;
  }
  int64_t o = 1, l = 1, in = 1;
  for (int32_t i = 0; i < r; i++) {
    if (i < a) o *= x->dims[i];
    else if (coerce || i == a) l *= x->dims[i];
    else in *= x->dims[i];
  }
  *outer = o;
  *len = l;
  *inner = in;
  return KN_OK;
}

static kn_status sm_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, sm_types);
  if (st) return st;
  if (x->rank >= 0) {
    int64_t o, l, in;
    if (!kn_shape_known(x)) {
      /* Validate the axis only; dims are not needed for that. */
      kn_tensor probe = *x;
      for (int32_t i = 0; i < probe.rank; i++) probe.dims[i] = 1;
      st = kn_softmax_geometry(ctx, &probe, &o, &l, &in);
    } else {
      st = kn_softmax_geometry(ctx, x, &o, &l, &in);
    }
    if (st) return st;
  }
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

/* One kernel per compute type.  Lanes with inner == 1 are contiguous rows;
 * otherwise a whole (len x inner) block is swept row by row with per-lane
 * running max / sum in `acc` (2 * inner values) so memory is read in order. */
#define SM_KERNEL(NAME, T, EXP, LOG)                                          \
  static void NAME(const T *x, T *y, int64_t outer, int64_t len,              \
                   int64_t inner, sm_kind kind, T *acc) {                     \
    if (len == 0) return;                                                     \
    if (inner == 1) {                                                         \
      for (int64_t o = 0; o < outer; o++) {                                   \
        const T *xr = x + o * len;                                            \
        T *yr = y + o * len;                                                  \
        T m = xr[0];                                                          \
        int64_t am = 0;                                                       \
        for (int64_t l = 1; l < len; l++)                                     \
          if (xr[l] > m) {                                                    \
            m = xr[l];                                                        \
            am = l;                                                           \
          }                                                                   \
        if (kind == SM_HARD) {                                                \
          for (int64_t l = 0; l < len; l++) yr[l] = (T)(l == am);             \
          continue;                                                           \
        }                                                                     \
        T s = 0;                                                              \
        if (kind == SM_SOFT) {                                                \
          for (int64_t l = 0; l < len; l++) {                                 \
            T e = EXP(xr[l] - m);                                             \
            yr[l] = e;                                                        \
            s += e;                                                           \
          }                                                                   \
          T inv = (T)1 / s;                                                   \
          for (int64_t l = 0; l < len; l++) yr[l] *= inv;                     \
        } else {                                                              \
          for (int64_t l = 0; l < len; l++) s += EXP(xr[l] - m);              \
          T sh = m + LOG(s);                                                  \
          for (int64_t l = 0; l < len; l++) yr[l] = xr[l] - sh;               \
        }                                                                     \
      }                                                                       \
      return;                                                                 \
    }                                                                         \
    T *mx = acc, *sum = acc + inner;                                          \
    for (int64_t o = 0; o < outer; o++) {                                     \
      const T *xb = x + o * len * inner;                                      \
      T *yb = y + o * len * inner;                                            \
      for (int64_t i = 0; i < inner; i++) {                                   \
        mx[i] = xb[i];                                                        \
        sum[i] = 0;                                                           \
      }                                                                       \
      if (kind == SM_HARD) {                                                  \
        /* sum[] holds the argmax (exact: len < 2^24 in practice for f32). */ \
        for (int64_t l = 1; l < len; l++)                                     \
          for (int64_t i = 0; i < inner; i++)                                 \
            if (xb[l * inner + i] > mx[i]) {                                  \
              mx[i] = xb[l * inner + i];                                      \
              sum[i] = (T)l;                                                  \
            }                                                                 \
        for (int64_t l = 0; l < len; l++)                                     \
          for (int64_t i = 0; i < inner; i++)                                 \
            yb[l * inner + i] = (T)(sum[i] == (T)l);                          \
        continue;                                                             \
      }                                                                       \
      for (int64_t l = 1; l < len; l++)                                       \
        for (int64_t i = 0; i < inner; i++)                                   \
          if (xb[l * inner + i] > mx[i]) mx[i] = xb[l * inner + i];           \
      for (int64_t l = 0; l < len; l++)                                       \
        for (int64_t i = 0; i < inner; i++) {                                 \
          T e = EXP(xb[l * inner + i] - mx[i]);                               \
          if (kind == SM_SOFT) yb[l * inner + i] = e;                         \
          sum[i] += e;                                                        \
        }                                                                     \
      if (kind == SM_SOFT) {                                                  \
        for (int64_t i = 0; i < inner; i++) sum[i] = (T)1 / sum[i];           \
        for (int64_t l = 0; l < len; l++)                                     \
          for (int64_t i = 0; i < inner; i++) yb[l * inner + i] *= sum[i];    \
      } else {                                                                \
        for (int64_t i = 0; i < inner; i++) sum[i] = mx[i] + LOG(sum[i]);     \
        for (int64_t l = 0; l < len; l++)                                     \
          for (int64_t i = 0; i < inner; i++)                                 \
            yb[l * inner + i] = xb[l * inner + i] - sum[i];                   \
      }                                                                       \
    }                                                                         \
  }

SM_KERNEL(sm_f32, float, expf, logf)
SM_KERNEL(sm_f64, double, exp, log)

/* The Hardmax argmax is kept in a float lane for f32; a len beyond 2^24 could
 * not be represented exactly, so such inputs go through the double kernel. */
#define SM_F32_MAX_LEN ((int64_t)1 << 24)

static kn_status sm_run_kind(kn_op_ctx *ctx, sm_kind kind) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t outer, len, inner;
  kn_status st = kn_softmax_geometry(ctx, x, &outer, &len, &inner);
  if (st) return st;
  int64_t n = kn_tensor_numel(x);
  if (n <= 0) return KN_OK;
  bool dbl = x->dtype == KN_DTYPE_F64 || (kind == SM_HARD && len >= SM_F32_MAX_LEN);
  size_t esz = dbl ? sizeof(double) : sizeof(float);
  void *acc = kn_malloc((size_t)(inner > 1 ? 2 * inner : 1) * esz);
  if (!acc) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %lld lanes", (long long)inner);
  if (x->dtype == KN_DTYPE_F32 && !dbl) {
    sm_f32(x->data, y->data, outer, len, inner, kind, acc);
  } else if (x->dtype == KN_DTYPE_F64) {
    sm_f64(x->data, y->data, outer, len, inner, kind, acc);
  } else {
    /* f16 / bf16 (and huge-len Hardmax on f32): convert, compute, convert back. */
    void *buf = kn_malloc((size_t)n * esz);
    if (!buf) {
      free(acc);
      return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %lld elements", (long long)n);
    }
    if (dbl) {
      double *b = buf;
      kn_convert(x->data, x->dtype, b, KN_DTYPE_F64, n);
      sm_f64(b, b, outer, len, inner, kind, acc);
      kn_convert(b, KN_DTYPE_F64, y->data, y->dtype, n);
    } else {
      float *b = buf;
      kn_convert(x->data, x->dtype, b, KN_DTYPE_F32, n);
      sm_f32(b, b, outer, len, inner, kind, acc);
      kn_convert(b, KN_DTYPE_F32, y->data, x->dtype, n);
    }
    free(buf);
  }
  free(acc);
  return KN_OK;
}

static kn_status softmax_run(kn_op_ctx *ctx) { return sm_run_kind(ctx, SM_SOFT); }
static kn_status logsoftmax_run(kn_op_ctx *ctx) { return sm_run_kind(ctx, SM_LOG); }
static kn_status hardmax_run(kn_op_ctx *ctx) { return sm_run_kind(ctx, SM_HARD); }

static double sm_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int64_t n = x ? kn_tensor_numel(x) : 0;
  return n > 0 ? 4.0 * (double)n : 0;
}

const kn_op_def kn_ops_softmax[] = {
    {"Softmax", NULL, 1, 1, 1, 1, 1, 22, sm_infer, softmax_run, sm_flops},
    {"LogSoftmax", NULL, 1, 1, 1, 1, 1, 22, sm_infer, logsoftmax_run, sm_flops},
    {"Hardmax", NULL, 1, 1, 1, 1, 1, 22, sm_infer, hardmax_run, sm_flops},
    KN_OP_END,
};
