/* Pooling: MaxPool, AveragePool, LpPool (1-D to 6-D windows), their Global
 * forms, MaxUnpool and MaxRoiPool.
 *
 * Window geometry follows the ONNX spec (and onnxruntime where the spec is
 * silent): per spatial dim, effective kernel ek = (k-1)*dilation+1;
 *  NOTSET  out = floor|ceil((in + pad_begin + pad_end - ek) / stride) + 1,
 *          where with ceil_mode a last window starting past the input and the
 *          begin pad is dropped (PyTorch's rule);
 *  VALID   the same with no pads;
 *  SAME_*  out = ceil(in / stride), pads split evenly, the odd one at the
 *          end (SAME_UPPER) or the beginning (SAME_LOWER).
 * Padding never takes part in a max; averages divide by the count of input
 * elements in the window, or with count_include_pad by the window clipped to
 * the padded input.  MaxPool's Indices are flat offsets into X (row-major, or
 * column-major over the spatial dims when storage_order = 1).
 *
 * The kernels run on float (float32, and float16 / bfloat16 / int8 / uint8
 * converted to float, all exact for those types) or on double for float64.
 * The vectorised float32 pools (and those of the channels-last steps) are
 * src/tactics/pooling_tactics.c. */
#include "pooling.h"

#include <math.h>

#define POOL_MAX_SP KN_POOL_MAX_SP
/* Bounds on attributes so that window arithmetic cannot overflow int64. */
#define POOL_ATTR_MAX ((int64_t)1 << 31)

typedef kn_pool_mode pool_mode;
#define POOL_MAX KN_POOL_MAX
#define POOL_AVG KN_POOL_AVG
#define POOL_LP KN_POOL_LP
typedef kn_pool_geo pool_geo;
typedef kn_pool_opts pool_opts;

static const kn_dtype pool_float_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                            KN_DTYPE_BF16, 0};
static const kn_dtype pool_max_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                          KN_DTYPE_BF16, KN_DTYPE_I8, KN_DTYPE_U8, 0};

/* Reads a per-spatial-dim attribute list: absent -> dflt, else exactly
 * `want` values each in [lo, POOL_ATTR_MAX]. */
static kn_status pool_attr_list(kn_op_ctx *ctx, const char *name, int32_t want,
                                int64_t dflt, int64_t lo, int64_t *vals) {
  const int64_t *v;
  int32_t n = kn_attr_ints(ctx, name, &v);
  if (!kn_attr_get(ctx, name)) {
    for (int32_t i = 0; i < want; i++) vals[i] = dflt;
    return KN_OK;
  }
  if (n != want)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "attribute '%s' has %d values, expected %d",
                      name, (int)n, (int)want);
  for (int32_t i = 0; i < n; i++) {
    if (v[i] < lo || v[i] > POOL_ATTR_MAX)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "attribute '%s'[%d] = %lld is out of range [%lld, %lld]", name,
                        (int)i, (long long)v[i], (long long)lo, (long long)POOL_ATTR_MAX);
    vals[i] = v[i];
  }
  return KN_OK;
}

kn_status kn_pool_geometry(kn_op_ctx *ctx, const kn_tensor *x, pool_geo *g, bool has_dil) {
  const int64_t *ks;
  int32_t ns = kn_attr_ints(ctx, "kernel_shape", &ks);
  if (!kn_attr_get(ctx, "kernel_shape") || ns < 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "attribute 'kernel_shape' is required");
  if (ns > POOL_MAX_SP)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "kernel_shape has %d dims, at most %d supported",
                      (int)ns, POOL_MAX_SP);
  if (x->rank >= 0 && x->rank != ns + 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input has rank %d, expected %d (N, C and %d spatial dims of kernel_shape)",
                      (int)x->rank, (int)ns + 2, (int)ns);
  g->ns = ns;
  kn_status st = pool_attr_list(ctx, "kernel_shape", ns, 1, 1, g->k);
  if (!st) st = pool_attr_list(ctx, "strides", ns, 1, 1, g->s);
  if (!st && has_dil) st = pool_attr_list(ctx, "dilations", ns, 1, 1, g->d);
  if (st) return st;
  if (!has_dil)
    for (int32_t i = 0; i < ns; i++) g->d[i] = 1;
  int64_t pads[2 * POOL_MAX_SP];
  st = pool_attr_list(ctx, "pads", 2 * ns, 0, 0, pads);
  if (st) return st;
  const char *ap = kn_attr_str(ctx, "auto_pad", "NOTSET");
  int mode;
  if (strcmp(ap, "NOTSET") == 0 || ap[0] == 0) mode = 0;
  else if (strcmp(ap, "VALID") == 0) mode = 1;
  else if (strcmp(ap, "SAME_UPPER") == 0) mode = 2;
  else if (strcmp(ap, "SAME_LOWER") == 0) mode = 3;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "auto_pad '%s' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", ap);
  int64_t ceil_mode = kn_attr_int(ctx, "ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "ceil_mode is %lld, expected 0 or 1",
                      (long long)ceil_mode);
  for (int32_t i = 0; i < ns; i++) {
    int64_t in = x->rank >= 0 ? x->dims[i + 2] : -1;
    int64_t ek = (g->k[i] - 1) * g->d[i] + 1, s = g->s[i];
    g->in[i] = in;
    g->pb[i] = mode == 0 ? pads[i] : 0;
    g->pe[i] = mode == 0 ? pads[i + ns] : 0;
    if (in < 0) {
      g->out[i] = -1;
      continue;
    }
    if (mode >= 2) {
      int64_t out = in == 0 ? 0 : (in - 1) / s + 1;
      int64_t need = (out - 1) * s + ek - in;
      if (need < 0) need = 0;
      g->pb[i] = mode == 2 ? need / 2 : need - need / 2;
      g->pe[i] = need - g->pb[i];
      g->out[i] = out;
      continue;
    }
    int64_t total = in + g->pb[i] + g->pe[i];
    if (total < ek)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "spatial dim %d: padded input size %lld is smaller than the "
                        "(dilated) kernel %lld",
                        (int)i, (long long)total, (long long)ek);
    int64_t out = ceil_mode ? (total - ek + s - 1) / s + 1 : (total - ek) / s + 1;
    if (ceil_mode && (out - 1) * s >= in + g->pb[i]) out--;
    g->out[i] = out;
  }
  return KN_OK;
}

/* Output dims N, C, out... (unknown parts -1). */
static void pool_out_dims(const kn_tensor *x, const pool_geo *g, int64_t *dims) {
  dims[0] = x->rank >= 0 ? x->dims[0] : -1;
  dims[1] = x->rank >= 0 ? x->dims[1] : -1;
  for (int32_t i = 0; i < g->ns; i++) dims[i + 2] = g->out[i];
}

/* One kernel per compute type T.  For every output point the valid kernel
 * range [lo, hi) of each dim is computed once; the window is then walked
 * with an odometer over the outer dims and a plain loop over the innermost.
 * x, y: the planes (N*C of them); ind: MaxPool indices or NULL. */
#define POOL_KERNEL(NAME, T, POW, SQRT, NEG_INF)                                 \
  static void NAME(const pool_geo *g, const pool_opts *o, int64_t planes,        \
                   const T *x, T *y, int64_t *ind) {                             \
    int32_t ns = g->ns, last = ns - 1;                                           \
    int64_t in_sz = 1, out_sz = 1, istr[POOL_MAX_SP];                            \
    for (int32_t i = ns - 1; i >= 0; i--) {                                      \
      istr[i] = in_sz;                                                           \
      in_sz *= g->in[i];                                                         \
      out_sz *= g->out[i];                                                       \
    }                                                                            \
    for (int64_t p = 0; p < planes; p++) {                                       \
      const T *xp = x + p * in_sz;                                               \
      int64_t oc[POOL_MAX_SP] = {0};                                             \
      for (int64_t op = 0; op < out_sz; op++) {                                  \
        int64_t start[POOL_MAX_SP], lo[POOL_MAX_SP], hi[POOL_MAX_SP];            \
        int64_t cnt = 1, cnt_pad = 1;                                            \
        for (int32_t i = 0; i < ns; i++) {                                       \
          int64_t st = oc[i] * g->s[i] - g->pb[i], d = g->d[i];                  \
          int64_t l = st >= 0 ? 0 : (-st + d - 1) / d;                           \
          int64_t h = st >= g->in[i] ? 0 : (g->in[i] - 1 - st) / d + 1;          \
          if (h > g->k[i]) h = g->k[i];                                          \
          int64_t hp = (g->in[i] + g->pe[i] - 1 - st) / d + 1;                   \
          if (hp > g->k[i]) hp = g->k[i];                                        \
          start[i] = st;                                                         \
          lo[i] = l;                                                             \
          hi[i] = h;                                                             \
          cnt *= h > l ? h - l : 0;                                              \
          cnt_pad *= hp > 0 ? hp : 0;                                            \
        }                                                                        \
        T best = NEG_INF;                                                        \
        int64_t best_at = -1;                                                    \
        double acc = 0;                                                          \
        if (cnt > 0) {                                                           \
          int64_t j[POOL_MAX_SP];                                                \
          for (int32_t i = 0; i < ns; i++) j[i] = lo[i];                         \
          for (;;) {                                                             \
            int64_t base = 0;                                                    \
            for (int32_t i = 0; i < last; i++)                                   \
              base += (start[i] + j[i] * g->d[i]) * istr[i];                     \
            base += start[last];                                                 \
            int64_t dl = g->d[last];                                             \
            if (o->mode == POOL_MAX) {                                           \
              for (int64_t q = lo[last]; q < hi[last]; q++) {                    \
                T v = xp[base + q * dl];                                         \
                if (v > best || best_at < 0) {                                   \
                  best = v;                                                      \
                  best_at = base + q * dl;                                       \
                }                                                                \
              }                                                                  \
            } else if (o->mode == POOL_AVG) {                                    \
              for (int64_t q = lo[last]; q < hi[last]; q++) acc += xp[base + q * dl]; \
            } else if (o->p == 2) {                                              \
              for (int64_t q = lo[last]; q < hi[last]; q++) {                    \
                double v = xp[base + q * dl];                                    \
                acc += v * v;                                                    \
              }                                                                  \
            } else {                                                             \
              for (int64_t q = lo[last]; q < hi[last]; q++)                      \
                acc += POW(fabs((double)xp[base + q * dl]), o->p);               \
            }                                                                    \
            int32_t i = last - 1;                                                \
            for (; i >= 0; i--) {                                                \
              if (++j[i] < hi[i]) break;                                         \
              j[i] = lo[i];                                                      \
            }                                                                    \
            if (i < 0) break;                                                    \
          }                                                                      \
        }                                                                        \
        T *yo = y + p * out_sz + op;                                             \
        if (o->mode == POOL_MAX) {                                               \
          *yo = best;                                                            \
          if (ind) {                                                             \
            int64_t at = best_at;                                                \
            if (at >= 0 && o->storage_order == 1) {                              \
              /* column-major over the spatial dims */                           \
              int64_t rem = at, cm = 0, mul = 1;                                 \
              for (int32_t i = 0; i < ns; i++) {                                 \
                cm += (rem / istr[i]) * mul;                                     \
                rem %= istr[i];                                                  \
                mul *= g->in[i];                                                 \
              }                                                                  \
              at = cm;                                                           \
            }                                                                    \
            ind[p * out_sz + op] = at >= 0 ? p * in_sz + at : -1;                \
          }                                                                      \
        } else if (o->mode == POOL_AVG) {                                        \
          int64_t div = o->count_include_pad ? cnt_pad : cnt;                    \
          *yo = (T)(div > 0 ? acc / (double)div : NAN);                          \
        } else {                                                                 \
          *yo = (T)(o->p == 2 ? SQRT(acc) : POW(acc, 1.0 / o->p));               \
        }                                                                        \
        for (int32_t i = ns - 1; i >= 0; i--) {                                  \
          if (++oc[i] < g->out[i]) break;                                        \
          oc[i] = 0;                                                             \
        }                                                                        \
      }                                                                          \
    }                                                                            \
  }

POOL_KERNEL(pool_f32, float, pow, sqrt, -INFINITY)
POOL_KERNEL(pool_f64, double, pow, sqrt, -INFINITY)

/* ---- dtype plumbing ------------------------------------------------------ */

/* x converted to float (NULL on OOM); f32 input is returned as is. */
static float *to_f32(const kn_tensor *t, bool *owned) {
  *owned = t->dtype != KN_DTYPE_F32;
  return *owned ? kn_tensor_f32(t) : t->data;
}

/* Stores b into t; integer types saturate (an all-padding max window is
 * -inf and becomes the type's lowest value). */
static void from_f32(kn_tensor *t, const float *b, int64_t n) {
  switch (t->dtype) {
  case KN_DTYPE_I8:
    for (int64_t i = 0; i < n; i++)
      ((int8_t *)t->data)[i] = (int8_t)(b[i] < -128 ? -128 : b[i] > 127 ? 127 : b[i]);
    break;
  case KN_DTYPE_U8:
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)t->data)[i] = (uint8_t)(b[i] < 0 ? 0 : b[i] > 255 ? 255 : b[i]);
    break;
  default:
    kn_convert(b, KN_DTYPE_F32, t->data, t->dtype, n);
    break;
  }
}

/* Runs kernel over all of x into y (both of x's dtype). */
static kn_status pool_apply(kn_op_ctx *ctx, const pool_geo *g, const pool_opts *o,
                            const kn_tensor *x, kn_tensor *y, int64_t *ind) {
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t nx = kn_tensor_numel(x), ny = kn_tensor_numel(y);
  if (nx <= 0 || ny <= 0) return KN_OK;
  if (x->dtype == KN_DTYPE_F64) {
    pool_f64(g, o, planes, x->data, y->data, ind);
    return KN_OK;
  }
  bool own_x;
  float *bx = to_f32(x, &own_x);
  float *by = y->dtype == KN_DTYPE_F32 ? y->data : kn_malloc((size_t)ny * sizeof(float));
  if (!bx || !by) {
    if (own_x) free(bx);
    if (by != y->data) free(by);
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory converting %lld elements",
                      (long long)nx);
  }
  pool_f32(g, o, planes, bx, by, ind);
  if (by != y->data) {
    from_f32(y, by, ny);
    free(by);
  }
  if (own_x) free(bx);
  return KN_OK;
}

/* ---- MaxPool / AveragePool / LpPool ------------------------------------- */

static pool_mode pool_mode_of(const kn_op_ctx *ctx) {
  const char *op = ctx->node->op_type;
  if (strcmp(op, "MaxPool") == 0) return POOL_MAX;
  if (strcmp(op, "AveragePool") == 0) return POOL_AVG;
  return POOL_LP;
}

static bool pool_has_dilations(const kn_op_ctx *ctx, pool_mode m) {
  if (m == POOL_MAX) return ctx->opset >= 10;
  if (m == POOL_AVG) return ctx->opset >= 19;
  return ctx->opset >= 18;
}

kn_status kn_pool_opts_of(kn_op_ctx *ctx, pool_mode m, pool_opts *o) {
  memset(o, 0, sizeof *o);
  o->mode = m;
  int64_t cip = kn_attr_int(ctx, "count_include_pad", 0);
  if (cip != 0 && cip != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "count_include_pad is %lld, expected 0 or 1",
                      (long long)cip);
  o->count_include_pad = cip == 1;
  int64_t so = kn_attr_int(ctx, "storage_order", 0);
  if (so != 0 && so != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "storage_order is %lld, expected 0 or 1",
                      (long long)so);
  o->storage_order = (int)so;
  /* LpPool-1 has a float p; later versions an int. */
  o->p = ctx->opset < 2 ? kn_attr_float(ctx, "p", 2.0f) : (double)kn_attr_int(ctx, "p", 2);
  if (m == POOL_LP && !(o->p > 0))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "p is %g, expected a positive value", o->p);
  return KN_OK;
}

static kn_status pool_infer(kn_op_ctx *ctx) {
  pool_mode m = pool_mode_of(ctx);
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, m == POOL_MAX ? pool_max_types : pool_float_types);
  if (st) return st;
  pool_opts o;
  st = kn_pool_opts_of(ctx, m, &o);
  if (st) return st;
  pool_geo g;
  st = kn_pool_geometry(ctx, x, &g, pool_has_dilations(ctx, m));
  if (st) return st;
  int64_t dims[KN_MAX_RANK];
  pool_out_dims(x, &g, dims);
  kn_out_set(ctx, 0, x->dtype, g.ns + 2, dims);
  if (ctx->n_out > 1) {
    if (m != POOL_MAX)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "has %d outputs, expected 1", (int)ctx->n_out);
    kn_out_set(ctx, 1, KN_DTYPE_I64, g.ns + 2, dims);
  }
  return KN_OK;
}

kn_status kn_pool_plan(kn_op_ctx *ctx, const kn_tensor *x, pool_opts *o, pool_geo *g,
                       int64_t **ind) {
  pool_mode m = pool_mode_of(ctx);
  kn_status st = kn_pool_opts_of(ctx, m, o);
  if (!st) st = kn_pool_geometry(ctx, x, g, pool_has_dilations(ctx, m));
  if (st) return st;
  *ind = NULL;
  if (m == POOL_MAX && kn_out_wanted(ctx, 1)) *ind = kn_out(ctx, 1)->data;
  return KN_OK;
}

static kn_status pool_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  pool_opts o;
  pool_geo g;
  int64_t *ind;
  kn_status st = kn_pool_plan(ctx, x, &o, &g, &ind);
  if (st) return st;
  return pool_apply(ctx, &g, &o, x, kn_out(ctx, 0), ind);
}

static double pool_flops(const kn_op_ctx *ctx) {
  const kn_tensor *y = &ctx->out[0]->t;
  int64_t n = kn_tensor_numel(y);
  const int64_t *ks;
  int32_t nk = kn_attr_ints(ctx, "kernel_shape", &ks);
  double w = 1;
  for (int32_t i = 0; i < nk; i++) w *= (double)ks[i];
  return n > 0 ? (double)n * w : 0;
}

/* ---- Global pools -------------------------------------------------------- */

static kn_status gpool_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, pool_float_types);
  if (st) return st;
  if (x->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
    return KN_OK;
  }
  if (x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input has rank %d, expected N x C x spatial dims",
                      (int)x->rank);
  int64_t dims[KN_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
  kn_out_set(ctx, 0, x->dtype, x->rank, dims);
  if (strcmp(ctx->node->op_type, "GlobalLpPool") == 0) {
    double p = ctx->opset < 2 ? kn_attr_float(ctx, "p", 2.0f) : (double)kn_attr_int(ctx, "p", 2);
    if (!(p > 0)) return kn_op_fail(ctx, KN_ERR_SHAPE, "p is %g, expected a positive value", p);
  }
  return KN_OK;
}

static kn_status gpool_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  const char *op = ctx->node->op_type;
  pool_mode m = strcmp(op, "GlobalMaxPool") == 0   ? POOL_MAX
                : strcmp(op, "GlobalAveragePool") == 0 ? POOL_AVG
                                                       : POOL_LP;
  double p = ctx->opset < 2 ? kn_attr_float(ctx, "p", 2.0f) : (double)kn_attr_int(ctx, "p", 2);
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t n = kn_tensor_numel(x);
  if (planes <= 0) return KN_OK;
  int64_t sp = n / planes;
  bool own;
  const float *xf = NULL;
  if (x->dtype != KN_DTYPE_F64) {
    xf = to_f32(x, &own);
    if (!xf) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory converting %lld elements",
                               (long long)n);
  }
  const double *xd = x->data;
  for (int64_t q = 0; q < planes; q++) {
    double r;
    if (m == POOL_MAX) {
      r = -INFINITY;
      for (int64_t i = 0; i < sp; i++) {
        double v = xf ? xf[q * sp + i] : xd[q * sp + i];
        if (v > r || i == 0) r = v;
      }
    } else {
      double acc = 0;
      for (int64_t i = 0; i < sp; i++) {
        double v = xf ? xf[q * sp + i] : xd[q * sp + i];
        acc += m == POOL_AVG ? v : p == 2 ? v * v : pow(fabs(v), p);
      }
      r = m == POOL_AVG ? (sp ? acc / (double)sp : NAN) : p == 2 ? sqrt(acc) : pow(acc, 1.0 / p);
    }
    if (y->dtype == KN_DTYPE_F32) ((float *)y->data)[q] = (float)r;
    else if (y->dtype == KN_DTYPE_F16) ((uint16_t *)y->data)[q] = kn_f32_to_f16((float)r);
    else if (y->dtype == KN_DTYPE_BF16) ((uint16_t *)y->data)[q] = kn_f32_to_bf16((float)r);
    else kn_store_f64(y->data, y->dtype, q, r);
  }
  if (xf && own) free((void *)xf);
  return KN_OK;
}

/* ---- MaxUnpool ----------------------------------------------------------- */

/* The unpooled shape implied by X and the attributes (inferred) and the
 * output shape (output_shape when given, else the inferred one). */
static kn_status unpool_shape(kn_op_ctx *ctx, const kn_tensor *x, int64_t *inferred,
                              int64_t *dims) {
  pool_geo g;
  /* Only kernel/strides/pads matter: geometry validates them (no dilations). */
  kn_tensor probe = *x;
  if (probe.rank >= 0)
    for (int32_t i = 2; i < probe.rank; i++) probe.dims[i] = -1;
  kn_status st = kn_pool_geometry(ctx, &probe, &g, false);
  if (st) return st;
  int32_t r = g.ns + 2;
  for (int32_t i = 0; i < r; i++) {
    int64_t in = x->rank >= 0 ? x->dims[i] : -1;
    if (i < 2 || in < 0) {
      inferred[i] = in;
      continue;
    }
    int32_t s = i - 2;
    int64_t v = (in - 1) * g.s[s] - (g.pb[s] + g.pe[s]) + g.k[s];
    if (in == 0 || v < 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "spatial dim %d: input size %lld gives a negative output size",
                        (int)s, (long long)in);
    inferred[i] = v;
  }
  const kn_tensor *os = kn_in(ctx, 2);
  if (!os) {
    memcpy(dims, inferred, (size_t)r * sizeof *dims);
    return KN_OK;
  }
  if (!kn_has_data(os)) {
    for (int32_t i = 0; i < r; i++) dims[i] = -1;
    return KN_OK;
  }
  int64_t n;
  st = kn_read_ints(ctx, os, dims, KN_MAX_RANK, &n);
  if (st) return st;
  if (n != r)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "output_shape has %lld values, expected %d",
                      (long long)n, (int)r);
  for (int32_t i = 0; i < r; i++)
    if (dims[i] < 0 || (inferred[i] >= 0 && dims[i] < inferred[i]))
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "output_shape[%d] is %lld, expected at least the unpooled size %lld",
                        (int)i, (long long)dims[i], (long long)inferred[i]);
  return KN_OK;
}

static kn_status unpool_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *ind;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = kn_in_req(ctx, 1, &ind);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, pool_float_types);
  if (st) return st;
  static const kn_dtype i64[] = {KN_DTYPE_I64, 0};
  st = kn_check_dtype(ctx, 1, ind, i64);
  if (st) return st;
  if (x->rank >= 0 && ind->rank >= 0) {
    bool same = x->rank == ind->rank;
    for (int32_t i = 0; same && i < x->rank; i++)
      if (x->dims[i] >= 0 && ind->dims[i] >= 0 && x->dims[i] != ind->dims[i]) same = false;
    if (!same) {
      char a[128], b[128];
      return kn_op_fail(ctx, KN_ERR_SHAPE, "indices shape %s differs from X shape %s",
                        kn_shape_str(ind->rank, ind->dims, b, sizeof b),
                        kn_shape_str(x->rank, x->dims, a, sizeof a));
    }
  }
  int64_t inferred[KN_MAX_RANK], dims[KN_MAX_RANK];
  st = unpool_shape(ctx, x, inferred, dims);
  if (st) return st;
  const int64_t *ks;
  kn_out_set(ctx, 0, x->dtype, kn_attr_ints(ctx, "kernel_shape", &ks) + 2, dims);
  return KN_OK;
}

/* Follows the ONNX reference: indices address the inferred unpooled shape
 * (what MaxPool saw); a larger output_shape holds that block at its start
 * and zeros elsewhere. */
static kn_status unpool_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ind = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t inferred[KN_MAX_RANK], dims[KN_MAX_RANK];
  kn_status st = unpool_shape(ctx, x, inferred, dims);
  if (st) return st;
  int32_t r = x->rank;
  int64_t n = kn_tensor_numel(x), ni = kn_shape_numel(r, inferred);
  int64_t istr[KN_MAX_RANK], ostr[KN_MAX_RANK];
  kn_strides(r, inferred, istr);
  kn_strides(r, y->dims, ostr);
  bool same = memcmp(inferred, y->dims, (size_t)r * sizeof *inferred) == 0;
  size_t es = kn_dtype_size(x->dtype);
  const int64_t *iv = ind->data;
  char *yd = y->data;
  const char *xd = x->data;
  for (int64_t i = 0; i < n; i++) {
    int64_t at = iv[i];
    if (at < 0 || at >= ni)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "index %lld at position %lld is outside the unpooled tensor "
                        "(%lld elements)",
                        (long long)at, (long long)i, (long long)ni);
    if (!same) {
      int64_t rem = at, o = 0;
      for (int32_t d = 0; d < r; d++) {
        o += (rem / istr[d]) * ostr[d];
        rem %= istr[d];
      }
      at = o;
    }
    memcpy(yd + (size_t)at * es, xd + (size_t)i * es, es);
  }
  return KN_OK;
}

/* ---- MaxRoiPool ---------------------------------------------------------- */

static kn_status roipool_params(kn_op_ctx *ctx, int64_t *ph, int64_t *pw, float *scale) {
  const int64_t *ps;
  int32_t n = kn_attr_ints(ctx, "pooled_shape", &ps);
  if (n != 2 || ps[0] < 1 || ps[1] < 1 || ps[0] > POOL_ATTR_MAX || ps[1] > POOL_ATTR_MAX)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "attribute 'pooled_shape' must hold 2 positive values");
  *ph = ps[0];
  *pw = ps[1];
  *scale = kn_attr_float(ctx, "spatial_scale", 1.0f);
  if (!isfinite(*scale))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "spatial_scale must be finite");
  return KN_OK;
}

static kn_status roipool_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *rois;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = kn_in_req(ctx, 1, &rois);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, pool_float_types);
  if (!st) st = kn_check_dtype(ctx, 1, rois, pool_float_types);
  if (st) return st;
  int64_t ph, pw;
  float scale;
  st = roipool_params(ctx, &ph, &pw, &scale);
  if (st) return st;
  if (x->rank >= 0 && x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X has rank %d, expected 4 (N x C x H x W)",
                      (int)x->rank);
  if (rois->rank >= 0 && (rois->rank != 2 || (rois->dims[1] >= 0 && rois->dims[1] != 5)))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "rois must have shape num_rois x 5");
  int64_t dims[4] = {rois->rank >= 0 ? rois->dims[0] : -1, x->rank >= 0 ? x->dims[1] : -1,
                     ph, pw};
  kn_out_set(ctx, 0, x->dtype, 4, dims);
  return KN_OK;
}

static kn_status roipool_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *rois = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t ph, pw;
  float scale;
  kn_status st = roipool_params(ctx, &ph, &pw, &scale);
  if (st) return st;
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
  int64_t R = rois->dims[0];
  for (int64_t r = 0; r < R; r++) {
    double b = kn_load_f64(rois->data, rois->dtype, r * 5);
    if (!(b >= 0 && b < (double)N))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "roi %lld has batch index %g, expected [0, %lld)",
                        (long long)r, b, (long long)N);
    int64_t bi = (int64_t)b;
    double c[4];
    for (int i = 0; i < 4; i++) {
      c[i] = round(kn_load_f64(rois->data, rois->dtype, r * 5 + 1 + i) * scale);
      if (!isfinite(c[i]) || fabs(c[i]) > 1e15)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "roi %lld has a non-finite or huge coordinate",
                          (long long)r);
    }
    int64_t x1 = (int64_t)c[0], y1 = (int64_t)c[1], x2 = (int64_t)c[2], y2 = (int64_t)c[3];
    int64_t rh = y2 - y1 + 1, rw = x2 - x1 + 1;
    if (rh < 1) rh = 1;
    if (rw < 1) rw = 1;
    double bh = (double)rh / (double)ph, bw = (double)rw / (double)pw;
    for (int64_t ch = 0; ch < C; ch++) {
      int64_t plane = (bi * C + ch) * H * W;
      for (int64_t i = 0; i < ph; i++) {
        int64_t hs = (int64_t)floor((double)i * bh) + y1, he = (int64_t)ceil((double)(i + 1) * bh) + y1;
        hs = hs < 0 ? 0 : hs > H ? H : hs;
        he = he < 0 ? 0 : he > H ? H : he;
        for (int64_t j = 0; j < pw; j++) {
          int64_t ws = (int64_t)floor((double)j * bw) + x1, we = (int64_t)ceil((double)(j + 1) * bw) + x1;
          ws = ws < 0 ? 0 : ws > W ? W : ws;
          we = we < 0 ? 0 : we > W ? W : we;
          double m = 0;
          bool any = false;
          for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++) {
              double v = kn_load_f64(x->data, x->dtype, plane + h * W + w);
              if (!any || v > m) m = v;
              any = true;
            }
          kn_store_f64(y->data, y->dtype, ((r * C + ch) * ph + i) * pw + j, any ? m : 0);
        }
      }
    }
  }
  return KN_OK;
}

const kn_op_def kn_ops_pooling[] = {
    {"MaxPool", NULL, 1, 1, 1, 2, 1, 22, pool_infer, pool_run, pool_flops},
    {"AveragePool", NULL, 1, 1, 1, 1, 1, 22, pool_infer, pool_run, pool_flops},
    {"LpPool", NULL, 1, 1, 1, 1, 1, 22, pool_infer, pool_run, pool_flops},
    {"GlobalAveragePool", NULL, 1, 1, 1, 1, 1, 22, gpool_infer, gpool_run, NULL},
    {"GlobalMaxPool", NULL, 1, 1, 1, 1, 1, 22, gpool_infer, gpool_run, NULL},
    {"GlobalLpPool", NULL, 1, 1, 1, 1, 1, 22, gpool_infer, gpool_run, NULL},
    {"MaxUnpool", NULL, 2, 3, 1, 1, 9, 22, unpool_infer, unpool_run, NULL},
    {"MaxRoiPool", NULL, 2, 2, 1, 1, 1, 22, roipool_infer, roipool_run, NULL},
    KN_OP_END,
};
