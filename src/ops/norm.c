/* Normalisation ops: BatchNormalization (every opset form, inference and
 * training mode), InstanceNormalization, LayerNormalization,
 * GroupNormalization (18 and 21 forms), LRN, MeanVarianceNormalization and
 * Dropout.
 *
 * Statistics are accumulated in double with two passes (mean, then squared
 * deviations), so variances are never negative.  float32 runs directly on
 * the tensors; float16 / bfloat16 are converted to a float32 buffer, float64
 * runs in double.  The rarely used LRN, MVN and batch statistics of training
 * mode go through a double buffer.  The vectorised float32 row kernels of
 * Instance-, Layer- and GroupNormalization are src/tactics/norm_tactics.c. */
#include "norm.h"

#include <math.h>

static const kn_dtype norm_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                      KN_DTYPE_BF16, 0};

/* ---- working buffers ---------------------------------------------------- */

/* The compute view of an input/output pair: float (f32 in place, or a
 * converted f16/bf16 copy shared by x and y) or double (f64 in place). */
typedef struct nbuf {
  bool dbl;
  const float *xf;
  float *yf;
  const double *xd;
  double *yd;
  float *own;
  int64_t n;
} nbuf;

static kn_status nbuf_begin(kn_op_ctx *ctx, const kn_tensor *x, kn_tensor *y, nbuf *b) {
  memset(b, 0, sizeof *b);
  b->n = kn_tensor_numel(x);
  if (x->dtype == KN_DTYPE_F64) {
    b->dbl = true;
    b->xd = x->data;
    b->yd = y->data;
    return KN_OK;
  }
  if (x->dtype == KN_DTYPE_F32) {
    b->xf = x->data;
    b->yf = y->data;
    return KN_OK;
  }
  float *f = kn_malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof(float));
  if (!f)
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory converting %lld elements",
                      (long long)b->n);
  kn_convert(x->data, x->dtype, f, KN_DTYPE_F32, b->n);
  b->own = f;
  b->xf = f;
  b->yf = f;
  return KN_OK;
}

/* Writes a converted result back into y and frees the buffer. */
static void nbuf_end(nbuf *b, kn_tensor *y) {
  if (!b->own) return;
  kn_convert(b->own, KN_DTYPE_F32, y->data, y->dtype, b->n);
  free(b->own);
  b->own = NULL;
}

/* n values of t (or `fill` when t is NULL) as float or double (by dbl). */
static void *load_params(const kn_tensor *t, int64_t n, bool dbl, double fill) {
  void *p = kn_malloc((size_t)(n > 0 ? n : 1) * (dbl ? sizeof(double) : sizeof(float)));
  if (!p) return NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = t ? kn_load_f64(t->data, t->dtype, i) : fill;
    if (dbl) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
  }
  return p;
}

/* Whole tensor as doubles (NULL on OOM). */
static double *load_all_f64(const kn_tensor *t, int64_t n) {
  double *d = kn_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!d) return NULL;
  if (t->dtype == KN_DTYPE_F32) {
    const float *f = t->data;
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
  } else {
    for (int64_t i = 0; i < n; i++) d[i] = kn_load_f64(t->data, t->dtype, i);
  }
  return d;
}

static void store_all_f64(kn_tensor *t, const double *d, int64_t n) {
  if (t->dtype == KN_DTYPE_F32) {
    float *f = t->data;
    for (int64_t i = 0; i < n; i++) f[i] = (float)d[i];
  } else {
    for (int64_t i = 0; i < n; i++) kn_store_f64(t->data, t->dtype, i, d[i]);
  }
}

static kn_status oom(kn_op_ctx *ctx) {
  return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
}

/* ---- kernels ------------------------------------------------------------- */

/* y[(i*P + p)*inner + s] = x[...] * a[p] + b[p] */
#define AFFINE_KERNEL(NAME, T)                                                 \
  static void NAME(const T *x, T *y, int64_t n, int64_t P, int64_t inner,      \
                   const T *a, const T *b) {                                   \
    for (int64_t i = 0; i < n; i++)                                            \
      for (int64_t p = 0; p < P; p++) {                                        \
        const T *xs = x + (i * P + p) * inner;                                 \
        T *ys = y + (i * P + p) * inner;                                       \
        T av = a[p], bv = b[p];                                                \
        for (int64_t s = 0; s < inner; s++) ys[s] = xs[s] * av + bv;           \
      }                                                                        \
  }
AFFINE_KERNEL(affine_f32, float)
AFFINE_KERNEL(affine_f64, double)

/* Normalise `rows` contiguous rows of `len` elements each to zero mean and
 * unit variance, then scale and shift.  Parameters: element j of row r uses
 * index (r % pmod) * pmul + j / seg of sc and bi (LayerNorm: pmod 1, seg 1;
 * InstanceNorm: pmod C, pmul 1, seg len; GroupNorm: per group or channel).
 * mean_out / inv_out (per row) may be NULL. */
#define ROWNORM_KERNEL(NAME, T)                                                \
  static void NAME(const T *x, T *y, int64_t rows, int64_t len, double eps,    \
                   int64_t seg, int64_t pmod, int64_t pmul, const T *sc,       \
                   const T *bi, double *mean_out, double *inv_out) {           \
    for (int64_t r = 0; r < rows; r++) {                                       \
      const T *xr = x + r * len;                                               \
      T *yr = y + r * len;                                                     \
      double s = 0, v = 0;                                                     \
      for (int64_t j = 0; j < len; j++) s += xr[j];                            \
      double mean = len ? s / (double)len : 0;                                 \
      for (int64_t j = 0; j < len; j++) {                                      \
        double d = xr[j] - mean;                                               \
        v += d * d;                                                            \
      }                                                                        \
      v = len ? v / (double)len : 0;                                           \
      double inv = 1.0 / sqrt(v + eps);                                        \
      if (mean_out) mean_out[r] = mean;                                        \
      if (inv_out) inv_out[r] = inv;                                           \
      int64_t pb = (r % pmod) * pmul;                                          \
      T m = (T)mean, iv = (T)inv;                                              \
      if (seg == 1) {                                                          \
        const T *scr = sc + pb, *bir = bi + pb;                                \
        for (int64_t j = 0; j < len; j++)                                      \
          yr[j] = (xr[j] - m) * iv * scr[j] + bir[j];                          \
      } else {                                                                 \
        for (int64_t j0 = 0; j0 < len; j0 += seg) {                            \
          int64_t p = pb + j0 / seg;                                           \
          T a = iv * sc[p], b = bi[p] - m * a;                                 \
          for (int64_t j = j0; j < j0 + seg; j++) yr[j] = xr[j] * a + b;       \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }
ROWNORM_KERNEL(rownorm_f32, float)
ROWNORM_KERNEL(rownorm_f64, double)

void kn_ref_layernorm_rows(const float *x, float *y, int64_t rows, int64_t len, double eps,
                           const float *scale, const float *bias) {
  rownorm_f32(x, y, rows, len, eps, 1, 1, 0, scale, bias, NULL, NULL);
}

/* Runs the reference row kernel on x -> y as r plans it. */
static kn_status rownorm_run(kn_op_ctx *ctx, const kn_tensor *x, kn_tensor *y,
                             const kn_norm_rows *r) {
  nbuf b;
  kn_status st = nbuf_begin(ctx, x, y, &b);
  if (st) return st;
  if (b.dbl)
    rownorm_f64(b.xd, b.yd, r->rows, r->len, r->eps, r->seg, r->pmod, r->pmul, r->sc, r->bi,
                r->mean, r->inv);
  else
    rownorm_f32(b.xf, b.yf, r->rows, r->len, r->eps, r->seg, r->pmod, r->pmul, r->sc, r->bi,
                r->mean, r->inv);
  nbuf_end(&b, y);
  return KN_OK;
}

kn_status kn_norm_rows_done(kn_op_ctx *ctx, kn_norm_rows *r, kn_status st) {
  if (!st && r->mean) store_all_f64(kn_out(ctx, 1), r->mean, r->rows);
  if (!st && r->inv) store_all_f64(kn_out(ctx, 2), r->inv, r->rows);
  free(r->sc);
  free(r->bi);
  free(r->mean);
  free(r->inv);
  memset(r, 0, sizeof *r);
  return st == KN_ERR_OOM ? oom(ctx) : st;
}

/* The reference run of a row normalisation planned by `plan`. */
static kn_status rows_run(kn_op_ctx *ctx,
                          kn_status (*plan)(kn_op_ctx *, const kn_tensor *, kn_norm_rows *)) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  kn_norm_rows r;
  kn_status st = plan(ctx, x, &r);
  if (st || r.skip) return st;
  return kn_norm_rows_done(ctx, &r, rownorm_run(ctx, x, y, &r));
}

/* Checks that parameter input i has exactly n elements (when known). */
static kn_status check_param(kn_op_ctx *ctx, int32_t i, const char *what, int64_t n) {
  const kn_tensor *t = kn_in(ctx, i);
  if (!t) return KN_OK;
  kn_status st = kn_check_dtype(ctx, i, t, norm_types);
  if (st) return st;
  if (n < 0 || !kn_shape_known(t)) return KN_OK;
  int64_t m = kn_tensor_numel(t);
  if (m != n) {
    char s[128];
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d (%s) has shape %s, expected %lld elements",
                      (int)i, what, kn_shape_str(t->rank, t->dims, s, sizeof s),
                      (long long)n);
  }
  return KN_OK;
}

/* ---- BatchNormalization -------------------------------------------------- */

typedef struct bn_cfg {
  bool spatial, training;
  double eps, momentum;
  int64_t n, P, inner; /* Y = X * a[p] + b[p] over (n, P, inner) */
} bn_cfg;

static kn_status bn_config(kn_op_ctx *ctx, const kn_tensor *x, bn_cfg *c) {
  memset(c, 0, sizeof *c);
  c->spatial = ctx->opset >= 9 || kn_attr_int(ctx, "spatial", 1) != 0;
  c->eps = kn_attr_float(ctx, "epsilon", 1e-5f);
  c->momentum = kn_attr_float(ctx, "momentum", 0.9f);
  if (!(c->eps >= 0) || !isfinite(c->eps))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "epsilon %g must be finite and >= 0", c->eps);
  if (ctx->opset >= 14) {
    int64_t tm = kn_attr_int(ctx, "training_mode", 0);
    if (tm != 0 && tm != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "training_mode is %lld, expected 0 or 1",
                        (long long)tm);
    c->training = tm == 1;
  } else {
    /* Before 14 the optional statistics outputs are what selects training;
     * is_test is ignored, like onnxruntime, so inference models that left it
     * at its default 0 still run as inference. */
    for (int32_t i = 1; i < ctx->n_out; i++)
      if (kn_out_wanted(ctx, i)) c->training = true;
  }
  if (x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X has rank %d, expected N x C x ...", (int)x->rank);
  c->n = c->P = c->inner = -1;
  if (x->rank >= 0 && kn_shape_known(x)) {
    c->n = x->dims[0];
    c->P = x->dims[1];
    c->inner = 1;
    for (int32_t i = 2; i < x->rank; i++) {
      if (c->spatial) c->inner *= x->dims[i];
      else c->P *= x->dims[i];
    }
  } else if (x->rank >= 0 && c->spatial) {
    c->P = x->dims[1];
  }
  return KN_OK;
}

static kn_status bn_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  bn_cfg c;
  st = bn_config(ctx, x, &c);
  if (st) return st;
  static const char *const names[] = {"scale", "B", "mean", "var"};
  for (int32_t i = 1; i <= 4; i++) {
    const kn_tensor *p;
    st = kn_in_req(ctx, i, &p);
    if (!st) st = check_param(ctx, i, names[i - 1], c.P);
    if (st) return st;
    if (ctx->opset < 15 && p->dtype && x->dtype && p->dtype != x->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected %s like X",
                        (int)i, kn_dtype_name(p->dtype), kn_dtype_name(x->dtype));
  }
  kn_out_like(ctx, 0, 0, 0);
  /* running mean / var (and, before 14, saved mean / var) are shaped like mean. */
  for (int32_t i = 1; i < ctx->n_out; i++) {
    if (ctx->opset >= 14 && i > 2)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "has %d outputs, expected at most 3",
                        (int)ctx->n_out);
    kn_out_like(ctx, i, 3, 0);
  }
  return KN_OK;
}

static kn_status bn_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  const kn_tensor *ps[4] = {kn_in(ctx, 1), kn_in(ctx, 2), kn_in(ctx, 3), kn_in(ctx, 4)};
  kn_tensor *y = kn_out(ctx, 0);
  bn_cfg c;
  kn_status st = bn_config(ctx, x, &c);
  if (st) return st;
  int64_t P = c.P;
  double *pv[4] = {NULL, NULL, NULL, NULL};
  double *bmean = NULL, *bvar = NULL;
  void *a = NULL, *b = NULL;
  bool dbl = x->dtype == KN_DTYPE_F64;
  st = KN_ERR_OOM;
  for (int i = 0; i < 4; i++)
    if (!(pv[i] = load_all_f64(ps[i], P))) goto done;
  if (c.training) {
    bmean = kn_calloc((size_t)(P > 0 ? P : 1), sizeof(double));
    bvar = kn_calloc((size_t)(P > 0 ? P : 1), sizeof(double));
    if (!bmean || !bvar) goto done;
    int64_t cnt = c.n * c.inner;
    nbuf nb;
    if ((st = nbuf_begin(ctx, x, y, &nb))) goto done;
    for (int pass = 0; pass < 2; pass++)
      for (int64_t i = 0; i < c.n; i++)
        for (int64_t p = 0; p < P; p++) {
          int64_t base = (i * P + p) * c.inner;
          double acc = 0;
          for (int64_t s = 0; s < c.inner; s++) {
            double v = nb.dbl ? nb.xd[base + s] : nb.xf[base + s];
            if (pass == 0) acc += v;
            else acc += (v - bmean[p]) * (v - bmean[p]);
          }
          if (pass == 0) bmean[p] += acc;
          else bvar[p] += acc;
          if (i == c.n - 1 && cnt > 0) {
            if (pass == 0) bmean[p] /= (double)cnt;
            else bvar[p] /= (double)cnt;
          }
        }
    free(nb.own);
    st = KN_ERR_OOM;
  }
  a = kn_malloc((size_t)(P > 0 ? P : 1) * (dbl ? 8 : 4));
  b = kn_malloc((size_t)(P > 0 ? P : 1) * (dbl ? 8 : 4));
  if (!a || !b) goto done;
  for (int64_t p = 0; p < P; p++) {
    double mean = c.training ? bmean[p] : pv[2][p];
    double var = c.training ? bvar[p] : pv[3][p];
    double av = pv[0][p] / sqrt(var + c.eps), bv = pv[1][p] - mean * av;
    if (dbl) {
      ((double *)a)[p] = av;
      ((double *)b)[p] = bv;
    } else {
      ((float *)a)[p] = (float)av;
      ((float *)b)[p] = (float)bv;
    }
  }
  {
    nbuf nb;
    if ((st = nbuf_begin(ctx, x, y, &nb))) goto done;
    if (nb.dbl) affine_f64(nb.xd, nb.yd, c.n, P, c.inner, a, b);
    else affine_f32(nb.xf, nb.yf, c.n, P, c.inner, a, b);
    nbuf_end(&nb, y);
  }
  /* Statistics outputs: 1 running mean, 2 running var, 3 saved mean,
   * 4 saved var (the batch statistics).  Outside training they pass the
   * given mean / var through. */
  for (int32_t o = 1; o < ctx->n_out && o <= 4; o++) {
    if (!kn_out_wanted(ctx, o)) continue;
    kn_tensor *t = kn_out(ctx, o);
    for (int64_t p = 0; p < P; p++) {
      double v;
      if (!c.training) v = o == 1 || o == 3 ? pv[2][p] : pv[3][p];
      else if (o == 1) v = pv[2][p] * c.momentum + bmean[p] * (1 - c.momentum);
      else if (o == 2) v = pv[3][p] * c.momentum + bvar[p] * (1 - c.momentum);
      else v = o == 3 ? bmean[p] : bvar[p];
      kn_store_f64(t->data, t->dtype, p, v);
    }
  }
  st = KN_OK;
done:
  for (int i = 0; i < 4; i++) free(pv[i]);
  free(bmean);
  free(bvar);
  free(a);
  free(b);
  if (st == KN_ERR_OOM) return oom(ctx);
  return st;
}

/* ---- InstanceNormalization ----------------------------------------------- */

static kn_status in_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  if (x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input has rank %d, expected N x C x ...",
                      (int)x->rank);
  int64_t C = x->rank >= 2 ? x->dims[1] : -1;
  st = check_param(ctx, 1, "scale", C);
  if (!st) st = check_param(ctx, 2, "B", C);
  if (st) return st;
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

kn_status kn_norm_rows_instance(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) {
  memset(r, 0, sizeof *r);
  int64_t C = x->dims[1], n = kn_tensor_numel(x);
  int64_t rows = x->dims[0] * C;
  if (rows <= 0) {
    r->skip = true;
    return KN_OK;
  }
  int64_t len = n / rows;
  bool dbl = x->dtype == KN_DTYPE_F64;
  *r = (kn_norm_rows){.rows = rows, .len = len, .eps = kn_attr_float(ctx, "epsilon", 1e-5f),
                      .seg = len, .pmod = C, .pmul = 1};
  r->sc = load_params(kn_in(ctx, 1), C, dbl, 1);
  r->bi = load_params(kn_in(ctx, 2), C, dbl, 0);
  if (!r->sc || !r->bi) return kn_norm_rows_done(ctx, r, KN_ERR_OOM);
  return KN_OK;
}

static kn_status in_run(kn_op_ctx *ctx) { return rows_run(ctx, kn_norm_rows_instance); }

/* ---- LayerNormalization -------------------------------------------------- */

kn_status kn_layernorm_axis(kn_op_ctx *ctx, int32_t rank, int32_t *axis) {
  return kn_axis(ctx, kn_attr_int(ctx, "axis", -1), rank, axis);
}

/* Checks that t broadcasts (one way) to the normalised shape dims[axis:]. */
static kn_status ln_check_bcast(kn_op_ctx *ctx, int32_t i, const kn_tensor *x, int32_t axis) {
  const kn_tensor *t = kn_in(ctx, i);
  if (!t || t->rank < 0) return KN_OK;
  kn_status st = kn_check_dtype(ctx, i, t, norm_types);
  if (st) return st;
  int32_t nr = x->rank - axis;
  bool ok = t->rank <= nr;
  for (int32_t d = 0; ok && d < t->rank; d++) {
    int64_t td = t->dims[t->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
    if (td >= 0 && xd >= 0 && td != 1 && td != xd) ok = false;
  }
  if (!ok) {
    char a[128], b[128];
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input %d has shape %s, which does not broadcast to the normalised "
                      "shape %s",
                      (int)i, kn_shape_str(t->rank, t->dims, a, sizeof a),
                      kn_shape_str(nr, x->dims + axis, b, sizeof b));
  }
  return KN_OK;
}

static kn_status ln_stash(kn_op_ctx *ctx, kn_dtype *dt) {
  int64_t s = kn_attr_int(ctx, "stash_type", 1);
  if (s != KN_DTYPE_F32 && s != KN_DTYPE_BF16 && s != KN_DTYPE_F64 && s != KN_DTYPE_F16)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "stash_type %lld is not a float type",
                      (long long)s);
  *dt = (kn_dtype)s;
  return KN_OK;
}

static kn_status ln_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  kn_dtype stash = KN_DTYPE_F32;
  st = ln_stash(ctx, &stash);
  if (st) return st;
  kn_out_like(ctx, 0, 0, 0);
  if (x->rank < 0) {
    for (int32_t i = 1; i < ctx->n_out; i++) kn_out_set(ctx, i, stash, -1, NULL);
    return KN_OK;
  }
  int32_t axis;
  st = kn_layernorm_axis(ctx, x->rank, &axis);
  if (!st) st = ln_check_bcast(ctx, 1, x, axis);
  if (!st) st = ln_check_bcast(ctx, 2, x, axis);
  if (st) return st;
  int64_t dims[KN_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) dims[i] = i < axis ? x->dims[i] : 1;
  for (int32_t i = 1; i < ctx->n_out; i++) kn_out_set(ctx, i, stash, x->rank, dims);
  return KN_OK;
}

/* t broadcast to the normalised shape (nr dims nd, len elements). */
static void *ln_params(const kn_tensor *t, int32_t nr, const int64_t *nd, int64_t len,
                       bool dbl, double fill) {
  if (!t) return load_params(NULL, len, dbl, fill);
  void *p = kn_malloc((size_t)(len > 0 ? len : 1) * (dbl ? sizeof(double) : sizeof(float)));
  if (!p) return NULL;
  int64_t str[KN_MAX_RANK], idx[KN_MAX_RANK] = {0};
  kn_broadcast_strides(t->rank, t->dims, nr, nd, str);
  int64_t off = 0;
  for (int64_t j = 0; j < len; j++) {
    double v = kn_load_f64(t->data, t->dtype, off);
    if (dbl) ((double *)p)[j] = v;
    else ((float *)p)[j] = (float)v;
    for (int32_t d = nr - 1; d >= 0; d--) {
      off += str[d];
      if (++idx[d] < nd[d]) break;
      off -= str[d] * nd[d];
      idx[d] = 0;
    }
  }
  return p;
}

kn_status kn_norm_rows_layer(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) {
  memset(r, 0, sizeof *r);
  int32_t axis;
  kn_status st = kn_layernorm_axis(ctx, x->rank, &axis);
  if (st) return st;
  int64_t rows = 1, len = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < axis) rows *= x->dims[i];
    else len *= x->dims[i];
  }
  bool dbl = x->dtype == KN_DTYPE_F64;
  int32_t nr = x->rank - axis;
  bool want_m = kn_out_wanted(ctx, 1), want_i = kn_out_wanted(ctx, 2);
  *r = (kn_norm_rows){.rows = rows, .len = len, .eps = kn_attr_float(ctx, "epsilon", 1e-5f),
                      .seg = 1, .pmod = 1, .pmul = 0};
  r->sc = ln_params(kn_in(ctx, 1), nr, x->dims + axis, len, dbl, 1);
  r->bi = ln_params(kn_in(ctx, 2), nr, x->dims + axis, len, dbl, 0);
  r->mean = want_m ? kn_malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double)) : NULL;
  r->inv = want_i ? kn_malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double)) : NULL;
  if (!r->sc || !r->bi || (!r->mean && want_m) || (!r->inv && want_i))
    return kn_norm_rows_done(ctx, r, KN_ERR_OOM);
  return KN_OK;
}

static kn_status ln_run(kn_op_ctx *ctx) { return rows_run(ctx, kn_norm_rows_layer); }

/* ---- GroupNormalization -------------------------------------------------- */

/* Opset 18 takes one scale / bias per group, 21 one per channel. */
static kn_status gn_groups(kn_op_ctx *ctx, const kn_tensor *x, int64_t *G) {
  const kn_attr *a = kn_attr_get(ctx, "num_groups");
  if (!a) return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'num_groups' is required");
  *G = kn_attr_int(ctx, "num_groups", 0);
  if (*G < 1) return kn_op_fail(ctx, KN_ERR_SHAPE, "num_groups is %lld, expected >= 1",
                                (long long)*G);
  if (x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X has rank %d, expected N x C x ...", (int)x->rank);
  if (x->rank >= 2 && x->dims[1] >= 0 && x->dims[1] % *G != 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "channels %lld are not divisible by num_groups %lld",
                      (long long)x->dims[1], (long long)*G);
  return KN_OK;
}

static kn_status gn_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  int64_t G;
  st = gn_groups(ctx, x, &G);
  if (st) return st;
  int64_t np = ctx->opset >= 21 ? (x->rank >= 2 ? x->dims[1] : -1) : G;
  st = check_param(ctx, 1, "scale", np);
  if (!st) st = check_param(ctx, 2, "bias", np);
  if (st) return st;
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

kn_status kn_norm_rows_group(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) {
  memset(r, 0, sizeof *r);
  int64_t G;
  kn_status st = gn_groups(ctx, x, &G);
  if (st) return st;
  int64_t N = x->dims[0], C = x->dims[1], n = kn_tensor_numel(x);
  if (N * C <= 0) {
    r->skip = true;
    return KN_OK;
  }
  int64_t sp = n / (N * C), cpg = C / G;
  bool per_channel = ctx->opset >= 21;
  bool dbl = x->dtype == KN_DTYPE_F64;
  int64_t np = per_channel ? C : G;
  *r = (kn_norm_rows){.rows = N * G, .len = cpg * sp,
                      .eps = kn_attr_float(ctx, "epsilon", 1e-5f),
                      .seg = per_channel ? (sp > 0 ? sp : 1) : cpg * sp, .pmod = G,
                      .pmul = per_channel ? cpg : 1};
  r->sc = load_params(kn_in(ctx, 1), np, dbl, 1);
  r->bi = load_params(kn_in(ctx, 2), np, dbl, 0);
  if (!r->sc || !r->bi) return kn_norm_rows_done(ctx, r, KN_ERR_OOM);
  return KN_OK;
}

static kn_status gn_run(kn_op_ctx *ctx) { return rows_run(ctx, kn_norm_rows_group); }

/* ---- LRN ----------------------------------------------------------------- */

static kn_status lrn_size(kn_op_ctx *ctx, int64_t *size) {
  if (!kn_attr_get(ctx, "size"))
    return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'size' is required");
  *size = kn_attr_int(ctx, "size", 0);
  if (*size < 1 || *size > ((int64_t)1 << 40))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "size is %lld, expected >= 1", (long long)*size);
  return KN_OK;
}

static kn_status lrn_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  int64_t size;
  st = lrn_size(ctx, &size);
  if (st) return st;
  if (x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input has rank %d, expected N x C x ...",
                      (int)x->rank);
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

/* y = x / (bias + alpha / size * sum of x^2 over channels
 *          [c - floor((size-1)/2), c + ceil((size-1)/2)]) ^ beta */
static kn_status lrn_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t size;
  kn_status st = lrn_size(ctx, &size);
  if (st) return st;
  double alpha = kn_attr_float(ctx, "alpha", 1e-4f), beta = kn_attr_float(ctx, "beta", 0.75f),
         bias = kn_attr_float(ctx, "bias", 1.0f);
  int64_t N = x->dims[0], C = x->dims[1], n = kn_tensor_numel(x);
  if (N * C <= 0) return KN_OK;
  int64_t sp = n / (N * C);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  double *xd = load_all_f64(x, n);
  double *acc = kn_malloc((size_t)(sp > 0 ? sp : 1) * sizeof(double));
  double *yd = kn_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!xd || !acc || !yd) {
    free(xd);
    free(acc);
    free(yd);
    return oom(ctx);
  }
  for (int64_t b = 0; b < N; b++)
    for (int64_t c = 0; c < C; c++) {
      for (int64_t s = 0; s < sp; s++) acc[s] = 0;
      int64_t c0 = c - lo < 0 ? 0 : c - lo, c1 = c + hi >= C ? C - 1 : c + hi;
      for (int64_t cc = c0; cc <= c1; cc++) {
        const double *xc = xd + (b * C + cc) * sp;
        for (int64_t s = 0; s < sp; s++) acc[s] += xc[s] * xc[s];
      }
      const double *xc = xd + (b * C + c) * sp;
      double *yc = yd + (b * C + c) * sp;
      for (int64_t s = 0; s < sp; s++)
        yc[s] = xc[s] / pow(bias + alpha / (double)size * acc[s], beta);
    }
  store_all_f64(y, yd, n);
  free(xd);
  free(acc);
  free(yd);
  return KN_OK;
}

/* ---- MeanVarianceNormalization ------------------------------------------- */

/* reduced[d]: dim d is normalised over.  Default axes [0, 2, 3]. */
static kn_status mvn_axes(kn_op_ctx *ctx, int32_t rank, bool *reduced) {
  static const int64_t dflt[] = {0, 2, 3};
  const int64_t *ax;
  int32_t n = kn_attr_ints(ctx, "axes", &ax);
  if (!kn_attr_get(ctx, "axes")) {
    ax = dflt;
    n = 3;
  }
  for (int32_t i = 0; i < rank; i++) reduced[i] = false;
  for (int32_t i = 0; i < n; i++) {
    int32_t a;
    kn_status st = kn_axis(ctx, ax[i], rank, &a);
    if (st) return st;
    if (reduced[a]) return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated", (long long)ax[i]);
    reduced[a] = true;
  }
  return KN_OK;
}

static kn_status mvn_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  if (x->rank >= 0) {
    bool red[KN_MAX_RANK];
    st = mvn_axes(ctx, x->rank, red);
    if (st) return st;
  }
  kn_out_like(ctx, 0, 0, 0);
  return KN_OK;
}

/* y = (x - mean) / (sqrt(var) + 1e-9), statistics over the chosen axes. */
static kn_status mvn_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  bool red[KN_MAX_RANK];
  kn_status st = mvn_axes(ctx, x->rank, red);
  if (st) return st;
  int64_t n = kn_tensor_numel(x);
  if (n <= 0) return KN_OK;
  /* group index of an element: its coordinates along the kept dims */
  int64_t gstr[KN_MAX_RANK], groups = 1, cnt = 1;
  for (int32_t d = x->rank - 1; d >= 0; d--) {
    gstr[d] = red[d] ? 0 : groups;
    if (red[d]) cnt *= x->dims[d];
    else groups *= x->dims[d];
  }
  double *xd = load_all_f64(x, n);
  double *mean = kn_calloc((size_t)groups, sizeof(double));
  double *var = kn_calloc((size_t)groups, sizeof(double));
  if (!xd || !mean || !var) {
    free(xd);
    free(mean);
    free(var);
    return oom(ctx);
  }
  for (int pass = 0; pass < 3; pass++) {
    int64_t idx[KN_MAX_RANK] = {0}, g = 0;
    for (int64_t i = 0; i < n; i++) {
      if (pass == 0) mean[g] += xd[i];
      else if (pass == 1) var[g] += (xd[i] - mean[g]) * (xd[i] - mean[g]);
      else xd[i] = (xd[i] - mean[g]) / (sqrt(var[g]) + 1e-9);
      for (int32_t d = x->rank - 1; d >= 0; d--) {
        g += gstr[d];
        if (++idx[d] < x->dims[d]) break;
        g -= gstr[d] * x->dims[d];
        idx[d] = 0;
      }
    }
    for (int64_t k = 0; k < groups && pass < 2; k++) {
      if (pass == 0) mean[k] /= (double)cnt;
      else var[k] /= (double)cnt;
    }
  }
  store_all_f64(y, xd, n);
  free(xd);
  free(mean);
  free(var);
  return KN_OK;
}

/* ---- Dropout ------------------------------------------------------------- */

static kn_status dropout_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, norm_types);
  if (st) return st;
  if (ctx->opset >= 12) {
    const kn_tensor *r = kn_in(ctx, 1), *t = kn_in(ctx, 2);
    st = kn_check_dtype(ctx, 1, r, norm_types);
    if (st) return st;
    static const kn_dtype b[] = {KN_DTYPE_BOOL, 0};
    st = kn_check_dtype(ctx, 2, t, b);
    if (st) return st;
    if (r && kn_shape_known(r) && kn_tensor_numel(r) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "ratio must be a scalar");
    if (t && kn_shape_known(t) && kn_tensor_numel(t) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "training_mode must be a scalar");
    if (r && kn_has_data(r) && kn_shape_known(r)) {
      double v = kn_scalar_f64(r);
      if (!(v >= 0 && v < 1))
        return kn_op_fail(ctx, KN_ERR_SHAPE, "ratio is %g, expected [0, 1)", v);
    }
  } else {
    double v = kn_attr_float(ctx, "ratio", 0.5f);
    if (!(v >= 0 && v < 1))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "ratio is %g, expected [0, 1)", v);
  }
  kn_out_like(ctx, 0, 0, 0);
  if (ctx->n_out > 1) kn_out_like(ctx, 1, 0, ctx->opset >= 10 ? KN_DTYPE_BOOL : 0);
  return KN_OK;
}

/* MT19937 seeded like numpy's RandomState(seed), with uniform doubles built
 * from two draws as numpy does, so that a given seed drops the same
 * elements as the ONNX reference implementation. */
typedef struct mt19937 {
  uint32_t s[624];
  int32_t pos;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
  m->s[0] = seed;
  for (int32_t i = 1; i < 624; i++)
    m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
  m->pos = 624;
}

static uint32_t mt_next(mt19937 *m) {
  if (m->pos >= 624) {
    for (int32_t i = 0; i < 624; i++) {
      uint32_t y = (m->s[i] & 0x80000000u) | (m->s[(i + 1) % 624] & 0x7fffffffu);
      m->s[i] = m->s[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    m->pos = 0;
  }
  uint32_t y = m->s[m->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

static double mt_uniform(mt19937 *m) {
  uint32_t a = mt_next(m) >> 5, b = mt_next(m) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* Inference is the identity with an all-true mask.  Training (opset >= 12
 * with training_mode true) drops elements with probability `ratio` and
 * scales the rest by 1 / (1 - ratio); the mask comes from a generator seeded
 * by the `seed` attribute (0 when absent), so runs are reproducible.
 * Before opset 7 is_test is ignored: kiln only infers. */
static kn_status dropout_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t n = kn_tensor_numel(x);
  bool training = false;
  double ratio = 0.5;
  if (ctx->opset >= 12) {
    const kn_tensor *r = kn_in(ctx, 1), *t = kn_in(ctx, 2);
    if (t && kn_tensor_numel(t) == 1) training = ((const uint8_t *)t->data)[0] != 0;
    if (r && kn_tensor_numel(r) == 1) ratio = kn_scalar_f64(r);
    /* infer checks it too, when it has the value (a ratio computed by an
       earlier step reaches only run: ops/op.h, data_shape) */
    if (!(ratio >= 0 && ratio < 1))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "ratio is %g, expected [0, 1)", ratio);
  }
  bool want_mask = kn_out_wanted(ctx, 1);
  kn_tensor *mask = want_mask ? kn_out(ctx, 1) : NULL;
  if (!training || ratio == 0) {
    if (n > 0) memcpy(y->data, x->data, (size_t)n * kn_dtype_size(x->dtype));
    if (mask) {
      if (mask->dtype == KN_DTYPE_BOOL) memset(mask->data, 1, (size_t)n);
      else
        for (int64_t i = 0; i < n; i++) kn_store_f64(mask->data, mask->dtype, i, 1.0);
    }
    return KN_OK;
  }
  mt19937 *mt = kn_malloc(sizeof *mt);
  if (!mt) return oom(ctx);
  mt_seed(mt, (uint32_t)kn_attr_int(ctx, "seed", 0));
  double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < n; i++) {
    double u = mt_uniform(mt);
    bool keep = u >= ratio;
    double v = keep ? kn_load_f64(x->data, x->dtype, i) * scale : 0;
    kn_store_f64(y->data, y->dtype, i, v);
    if (mask) ((uint8_t *)mask->data)[i] = keep;
  }
  free(mt);
  return KN_OK;
}

const kn_op_def kn_ops_norm[] = {
    {"BatchNormalization", NULL, 5, 5, 1, 5, 1, 22, bn_infer, bn_run, NULL},
    {"InstanceNormalization", NULL, 3, 3, 1, 1, 1, 22, in_infer, in_run, NULL},
    {"LayerNormalization", NULL, 2, 3, 1, 3, 17, 22, ln_infer, ln_run, NULL},
    {"GroupNormalization", NULL, 3, 3, 1, 1, 18, 22, gn_infer, gn_run, NULL},
    {"LRN", NULL, 1, 1, 1, 1, 1, 22, lrn_infer, lrn_run, NULL},
    {"MeanVarianceNormalization", NULL, 1, 1, 1, 1, 9, 22, mvn_infer, mvn_run, NULL},
    {"Dropout", NULL, 1, 3, 1, 2, 1, 22, dropout_infer, dropout_run, NULL},
    KN_OP_END,
};
