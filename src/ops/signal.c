/*
 * Signal processing: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
 * MelWeightMatrix (opset 17; DFT's axis moved to an input in opset 20).
 *
 * Transforms compute in double: a power-of-two length uses an iterative
 * radix-2 FFT, a short other length a direct DFT over a twiddle table
 * (exact indices k*j mod n keep it accurate) and a longer one Bluestein's
 * chirp-z algorithm, so every length costs O(n log n).  Complex values
 * are stored as a trailing dimension of 2 (real, imaginary).
 */
#include "op.h"

#include <math.h>

#define KN_PI 3.14159265358979323846

static const kn_dtype float_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                       KN_DTYPE_BF16, 0};
static const kn_dtype int_types[] = {KN_DTYPE_I32, KN_DTYPE_I64, 0};

/* Output dtypes allowed for output_datatype (numeric tensors). */
static bool numeric_dtype(int64_t d) {
  switch (d) {
  case KN_DTYPE_U8: case KN_DTYPE_U16: case KN_DTYPE_U32: case KN_DTYPE_U64:
  case KN_DTYPE_I8: case KN_DTYPE_I16: case KN_DTYPE_I32: case KN_DTYPE_I64:
  case KN_DTYPE_F16: case KN_DTYPE_F32: case KN_DTYPE_F64: case KN_DTYPE_BF16:
    return true;
  default:
    return false;
  }
}

static kn_status output_datatype(kn_op_ctx *ctx, kn_dtype *dt) {
  int64_t d = kn_attr_int(ctx, "output_datatype", KN_DTYPE_F32);
  if (!numeric_dtype(d))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "output_datatype %lld is not a numeric dtype",
                      (long long)d);
  *dt = (kn_dtype)d;
  return KN_OK;
}

/* Integer scalar input `i`: *known false when its value is not available
 * (static inference).  Fails on a non-scalar or non-integer tensor. */
static kn_status int_scalar(kn_op_ctx *ctx, int32_t i, const char *what, int64_t *v,
                            bool *known) {
  const kn_tensor *t = kn_in(ctx, i);
  *known = false;
  if (!t) return KN_OK;
  kn_status st = kn_check_dtype(ctx, i, t, int_types);
  if (st) return st;
  if (t->rank > 1 || (t->rank == 1 && t->dims[0] >= 0 && t->dims[0] != 1))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s must be a scalar", what);
  if (!t->data || t->rank < 0 || kn_tensor_numel(t) != 1) return KN_OK;
  *v = kn_scalar_i64(t);
  *known = true;
  return KN_OK;
}

/* ---- transforms ---------------------------------------------------------- */

/* Direct O(n^2) DFT below this length when n is not a power of two;
 * Bluestein's chirp-z (three power-of-two FFTs of length m >= 2n-1) above. */
#define DFT_DIRECT_MAX 64
/* Longest transform accepted (work buffers are a few times 16 * n bytes). */
#define DFT_MAX_LEN ((int64_t)1 << 24)

typedef enum { DFT_POW2, DFT_DIRECT, DFT_BLUESTEIN } dft_mode;

typedef struct {
  int64_t n, m;      /* transform length; power-of-two FFT length used */
  dft_mode mode;
  double sgn;        /* -1 forward, +1 inverse */
  double *cs, *sn;   /* cos/sin(2 pi k/m), k < m (m == n for POW2/DIRECT) */
  double *re, *im;   /* line buffers: n values in, n values out (m long) */
  double *tre, *tim; /* scratch, m long */
  double *chr, *chi; /* Bluestein chirp e^{sgn*i*pi*j^2/n}, j < n */
  double *bre, *bim; /* Bluestein: FFT of the conjugate chirp filter, m long */
} dft_plan;

static void dft_plan_free(dft_plan *p) {
  free(p->cs);
  free(p->sn);
  free(p->re);
  free(p->im);
  free(p->tre);
  free(p->tim);
  free(p->chr);
  free(p->chi);
  free(p->bre);
  free(p->bim);
  memset(p, 0, sizeof *p);
}

/* In-place radix-2 FFT of length m (a power of two) with twiddle tables of
 * length m; sgn -1 forward, +1 backward (unscaled). */
static void fft_pow2(double *re, double *im, int64_t m, const double *cs,
                     const double *sn, double sgn) {
  for (int64_t i = 1, j = 0; i < m; i++) {
    int64_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      double t = re[i];
      re[i] = re[j];
      re[j] = t;
      t = im[i];
      im[i] = im[j];
      im[j] = t;
    }
  }
  for (int64_t len = 2; len <= m; len <<= 1) {
    int64_t half = len >> 1, step = m / len;
    for (int64_t s = 0; s < m; s += len)
      for (int64_t k = 0; k < half; k++) {
        double wr = cs[k * step], wi = sgn * sn[k * step];
        double xr = re[s + k + half], xi = im[s + k + half];
        double tr = xr * wr - xi * wi, ti = xr * wi + xi * wr;
        re[s + k + half] = re[s + k] - tr;
        im[s + k + half] = im[s + k] - ti;
        re[s + k] += tr;
        im[s + k] += ti;
      }
  }
}

static kn_status dft_plan_make(kn_op_ctx *ctx, dft_plan *p, int64_t n, bool inverse) {
  memset(p, 0, sizeof *p);
  if (n <= 0 || n > DFT_MAX_LEN)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "DFT length %lld is outside 1..%lld",
                      (long long)n, (long long)DFT_MAX_LEN);
  p->n = n;
  p->sgn = inverse ? 1.0 : -1.0;
  if ((n & (n - 1)) == 0) p->mode = DFT_POW2;
  else p->mode = n <= DFT_DIRECT_MAX ? DFT_DIRECT : DFT_BLUESTEIN;
  p->m = n;
  if (p->mode == DFT_BLUESTEIN)
    for (p->m = 1; p->m < 2 * n - 1;) p->m <<= 1;
  int64_t m = p->m;
  size_t sz = (size_t)m * sizeof(double);
  p->cs = kn_malloc(sz);
  p->sn = kn_malloc(sz);
  p->re = kn_malloc(sz);
  p->im = kn_malloc(sz);
  p->tre = kn_malloc(sz);
  p->tim = kn_malloc(sz);
  bool ok = p->cs && p->sn && p->re && p->im && p->tre && p->tim;
  if (ok && p->mode == DFT_BLUESTEIN) {
    p->chr = kn_malloc((size_t)n * sizeof(double));
    p->chi = kn_malloc((size_t)n * sizeof(double));
    p->bre = kn_calloc((size_t)m, sizeof(double));
    p->bim = kn_calloc((size_t)m, sizeof(double));
    ok = p->chr && p->chi && p->bre && p->bim;
  }
  if (!ok) {
    dft_plan_free(p);
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for a DFT of length %lld",
                      (long long)n);
  }
  for (int64_t k = 0; k < m; k++) {
    double a = 2.0 * KN_PI * (double)k / (double)m;
    p->cs[k] = cos(a);
    p->sn[k] = sin(a);
  }
  if (p->mode == DFT_BLUESTEIN) {
    /* chirp_j = e^{sgn i pi j^2 / n}; j^2 is reduced mod 2n for accuracy. */
    for (int64_t j = 0; j < n; j++) {
      int64_t q = (j * j) % (2 * n); /* j < 2^24: no overflow */
      double a = KN_PI * (double)q / (double)n;
      p->chr[j] = cos(a);
      p->chi[j] = p->sgn * sin(a);
    }
    /* filter b_j = conj(chirp_|j|), wrapped around m */
    p->bre[0] = p->chr[0];
    p->bim[0] = -p->chi[0];
    for (int64_t j = 1; j < n; j++) {
      p->bre[j] = p->bre[m - j] = p->chr[j];
      p->bim[j] = p->bim[m - j] = -p->chi[j];
    }
    fft_pow2(p->bre, p->bim, m, p->cs, p->sn, -1.0);
  }
  return KN_OK;
}

/* In-place transform of p->re/p->im (first n values):
 * X[k] = sum_j x[j] e^{sgn 2 pi i jk/n}, scaled by 1/n when inverse. */
static void dft_exec(dft_plan *p) {
  int64_t n = p->n, m = p->m;
  double *re = p->re, *im = p->im;
  if (p->mode == DFT_POW2) {
    fft_pow2(re, im, n, p->cs, p->sn, p->sgn);
  } else if (p->mode == DFT_DIRECT) {
    for (int64_t k = 0; k < n; k++) {
      double sr = 0, si = 0;
      int64_t idx = 0;
      for (int64_t j = 0; j < n; j++) {
        double wr = p->cs[idx], wi = p->sgn * p->sn[idx];
        sr += re[j] * wr - im[j] * wi;
        si += re[j] * wi + im[j] * wr;
        idx += k;
        if (idx >= n) idx -= n;
      }
      p->tre[k] = sr;
      p->tim[k] = si;
    }
    memcpy(re, p->tre, (size_t)n * sizeof(double));
    memcpy(im, p->tim, (size_t)n * sizeof(double));
  } else {
    /* jk = (j^2 + k^2 - (k-j)^2) / 2: X_k = chirp_k * sum_j (x_j chirp_j)
     * conj(chirp_{k-j}), a convolution done with power-of-two FFTs. */
    double *ar = p->tre, *ai = p->tim;
    for (int64_t j = 0; j < n; j++) {
      ar[j] = re[j] * p->chr[j] - im[j] * p->chi[j];
      ai[j] = re[j] * p->chi[j] + im[j] * p->chr[j];
    }
    memset(ar + n, 0, (size_t)(m - n) * sizeof(double));
    memset(ai + n, 0, (size_t)(m - n) * sizeof(double));
    fft_pow2(ar, ai, m, p->cs, p->sn, -1.0);
    for (int64_t k = 0; k < m; k++) {
      double xr = ar[k] * p->bre[k] - ai[k] * p->bim[k];
      double xi = ar[k] * p->bim[k] + ai[k] * p->bre[k];
      ar[k] = xr;
      ai[k] = xi;
    }
    fft_pow2(ar, ai, m, p->cs, p->sn, 1.0);
    double inv_m = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
      double cr = ar[k] * inv_m, ci = ai[k] * inv_m;
      re[k] = cr * p->chr[k] - ci * p->chi[k];
      im[k] = cr * p->chi[k] + ci * p->chr[k];
    }
  }
  if (p->sgn > 0) {
    double inv = 1.0 / (double)n;
    for (int64_t k = 0; k < n; k++) {
      re[k] *= inv;
      im[k] *= inv;
    }
  }
}

/* Element i of a float tensor as double (fast path for float32). */
static inline double ld(const kn_tensor *t, int64_t i) {
  if (t->dtype == KN_DTYPE_F32) return ((const float *)t->data)[i];
  return kn_load_f64(t->data, t->dtype, i);
}
static inline void stv(kn_tensor *t, int64_t i, double v) {
  if (t->dtype == KN_DTYPE_F32) ((float *)t->data)[i] = (float)v;
  else kn_store_f64(t->data, t->dtype, i, v);
}

/* ---- DFT ----------------------------------------------------------------- */

typedef struct {
  int32_t axis;
  int64_t n;        /* transform length, -1 unknown */
  bool inverse, onesided;
} dft_params;

static kn_status dft_setup(kn_op_ctx *ctx, dft_params *dp, int32_t *rank_out,
                           int64_t *dims) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_status st = kn_check_dtype(ctx, 0, x, float_types);
  if (st) return st;
  dp->inverse = kn_attr_int(ctx, "inverse", 0) != 0;
  dp->onesided = kn_attr_int(ctx, "onesided", 0) != 0;
  *rank_out = -1;
  if (!x || x->rank < 0) return KN_OK;
  int32_t r = x->rank;
  if (r < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input must have rank >= 2 ([batch, signal dims..., 1 or 2]), "
                      "got rank %d", (int)r);
  if (x->dims[r - 1] >= 0 && x->dims[r - 1] != 1 && x->dims[r - 1] != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "last dimension must be 1 (real) or 2 (complex), got %lld",
                      (long long)x->dims[r - 1]);
  int64_t axis;
  if (ctx->opset >= 20) {
    axis = -2;
    bool known;
    if (kn_in(ctx, 2)) {
      if ((st = int_scalar(ctx, 2, "axis", &axis, &known))) return st;
      if (!known) return KN_OK;
    }
  } else {
    axis = kn_attr_int(ctx, "axis", 1);
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "axis %lld is out of range: expected a signal axis of the "
                      "rank %d input (not the last, complex dimension)",
                      (long long)axis, (int)r);
  dp->axis = (int32_t)axis;
  dp->n = x->dims[axis];
  if (kn_in(ctx, 1)) {
    bool known;
    int64_t v = -1;
    if ((st = int_scalar(ctx, 1, "dft_length", &v, &known))) return st;
    dp->n = known ? v : -1;
    if (known && v <= 0)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "dft_length %lld must be positive",
                        (long long)v);
  }
  for (int32_t i = 0; i < r; i++) dims[i] = x->dims[i];
  dims[r - 1] = 2;
  dims[axis] = dp->n < 0 ? -1 : dp->onesided ? dp->n / 2 + 1 : dp->n;
  *rank_out = r;
  return KN_OK;
}

static kn_status dft_infer(kn_op_ctx *ctx) {
  dft_params dp;
  int32_t r;
  int64_t dims[KN_MAX_RANK];
  kn_status st = dft_setup(ctx, &dp, &r, dims);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  kn_out_set(ctx, 0, x ? x->dtype : 0, r, dims);
  return KN_OK;
}

static kn_status dft_run(kn_op_ctx *ctx) {
  dft_params dp;
  int32_t r;
  int64_t dims[KN_MAX_RANK];
  kn_status st = dft_setup(ctx, &dp, &r, dims);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  if (r < 0 || dp.n < 0)
    return kn_op_fail(ctx, KN_ERR_INTERNAL, "DFT shape is not known at run time");
  kn_tensor *y = kn_out(ctx, 0);
  if (!y->data && kn_shape_numel(r, dims) > 0 &&
      (st = kn_out_alloc(ctx, 0, x->dtype, r, dims)))
    return st;
  y = kn_out(ctx, 0);
  int64_t len_in = x->dims[dp.axis], len_out = dims[dp.axis];
  int64_t c = x->dims[r - 1];
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < dp.axis; i++) outer *= x->dims[i];
  for (int32_t i = dp.axis + 1; i < r - 1; i++) inner *= x->dims[i];
  if (outer * inner == 0 || len_out == 0) return KN_OK;
  dft_plan p;
  if ((st = dft_plan_make(ctx, &p, dp.n, dp.inverse))) return st;
  int64_t take = len_in < dp.n ? len_in : dp.n;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      for (int64_t j = 0; j < dp.n; j++) {
        if (j < take) {
          int64_t e = ((o * len_in + j) * inner + in) * c;
          p.re[j] = ld(x, e);
          p.im[j] = c == 2 ? ld(x, e + 1) : 0.0;
        } else {
          p.re[j] = p.im[j] = 0.0;
        }
      }
      dft_exec(&p);
      for (int64_t k = 0; k < len_out; k++) {
        int64_t e = ((o * len_out + k) * inner + in) * 2;
        stv(y, e, p.re[k]);
        stv(y, e + 1, p.im[k]);
      }
    }
  dft_plan_free(&p);
  return KN_OK;
}

/* ---- STFT ---------------------------------------------------------------- */

typedef struct {
  int64_t step, frame_len, frames, bins; /* -1 unknown */
  bool onesided;
} stft_params;

static kn_status stft_setup(kn_op_ctx *ctx, stft_params *sp, int64_t *dims) {
  const kn_tensor *x = kn_in(ctx, 0), *win = kn_in(ctx, 2);
  kn_status st;
  if ((st = kn_check_dtype(ctx, 0, x, float_types))) return st;
  if ((st = kn_check_dtype(ctx, 2, win, float_types))) return st;
  if (x && win && x->dtype && win->dtype && x->dtype != win->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "window has dtype %s, signal has %s",
                      kn_dtype_name(win->dtype), kn_dtype_name(x->dtype));
  sp->onesided = kn_attr_int(ctx, "onesided", 1) != 0;
  sp->step = sp->frame_len = sp->frames = sp->bins = -1;
  bool known;
  int64_t v = -1;
  if ((st = int_scalar(ctx, 1, "frame_step", &v, &known))) return st;
  if (known) {
    if (v <= 0)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "frame_step %lld must be positive",
                        (long long)v);
    sp->step = v;
  }
  if (win && win->rank >= 0 && win->rank != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "window must have rank 1, got rank %d",
                      (int)win->rank);
  int64_t wlen = win && win->rank == 1 ? win->dims[0] : -1;
  int64_t flen = -1;
  if (kn_in(ctx, 3)) {
    if ((st = int_scalar(ctx, 3, "frame_length", &v, &known))) return st;
    if (known) {
      if (v <= 0)
        return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "frame_length %lld must be positive",
                          (long long)v);
      flen = v;
    }
  } else if (!win) {
    return kn_op_fail(ctx, KN_ERR_MISSING,
                      "either the window or frame_length input is required");
  }
  if (wlen >= 0 && flen >= 0 && wlen != flen)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "window length %lld differs from frame_length %lld",
                      (long long)wlen, (long long)flen);
  sp->frame_len = flen >= 0 ? flen : wlen;
  if (sp->frame_len == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "the window is empty");
  dims[0] = dims[1] = dims[2] = -1;
  dims[3] = 2;
  if (!x || x->rank < 0) return KN_OK;
  if (x->rank != 3)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "signal must have shape [batch, length, 1 or 2], got rank %d",
                      (int)x->rank);
  if (x->dims[2] >= 0 && x->dims[2] != 1 && x->dims[2] != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "signal's last dimension must be 1 (real) or 2 (complex), got %lld",
                      (long long)x->dims[2]);
  dims[0] = x->dims[0];
  int64_t L = x->dims[1];
  if (sp->frame_len > 0) {
    sp->bins = sp->onesided ? sp->frame_len / 2 + 1 : sp->frame_len;
    dims[2] = sp->bins;
    if (L >= 0 && L < sp->frame_len)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "signal length %lld is shorter than the frame length %lld",
                        (long long)L, (long long)sp->frame_len);
    if (L >= 0 && sp->step > 0) {
      sp->frames = (L - sp->frame_len) / sp->step + 1;
      dims[1] = sp->frames;
    }
  }
  return KN_OK;
}

static kn_status stft_infer(kn_op_ctx *ctx) {
  stft_params sp;
  int64_t dims[4];
  kn_status st = stft_setup(ctx, &sp, dims);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  kn_out_set(ctx, 0, x ? x->dtype : 0, 4, dims);
  return KN_OK;
}

static kn_status stft_run(kn_op_ctx *ctx) {
  stft_params sp;
  int64_t dims[4];
  kn_status st = stft_setup(ctx, &sp, dims);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0), *win = kn_in(ctx, 2);
  if (sp.frames < 0 || sp.bins < 0 || dims[0] < 0)
    return kn_op_fail(ctx, KN_ERR_INTERNAL, "STFT shape is not known at run time");
  kn_tensor *y = kn_out(ctx, 0);
  if (!y->data && kn_shape_numel(4, dims) > 0 &&
      (st = kn_out_alloc(ctx, 0, x->dtype, 4, dims)))
    return st;
  y = kn_out(ctx, 0);
  if (kn_shape_numel(4, dims) == 0) return KN_OK;
  int64_t B = dims[0], L = x->dims[1], c = x->dims[2], n = sp.frame_len;
  dft_plan p;
  if ((st = dft_plan_make(ctx, &p, n, false))) return st;
  for (int64_t b = 0; b < B; b++)
    for (int64_t f = 0; f < sp.frames; f++) {
      int64_t start = f * sp.step;
      for (int64_t j = 0; j < n; j++) {
        int64_t e = (b * L + start + j) * c;
        double w = win ? ld(win, j) : 1.0;
        p.re[j] = ld(x, e) * w;
        p.im[j] = c == 2 ? ld(x, e + 1) * w : 0.0;
      }
      dft_exec(&p);
      for (int64_t k = 0; k < sp.bins; k++) {
        int64_t e = ((b * sp.frames + f) * sp.bins + k) * 2;
        stv(y, e, p.re[k]);
        stv(y, e + 1, p.im[k]);
      }
    }
  dft_plan_free(&p);
  return KN_OK;
}

/* ---- windows ------------------------------------------------------------- */

/* Generalised cosine window a0 - a1 cos(2 pi n/N) + a2 cos(4 pi n/N). */
typedef struct {
  double a0, a1, a2;
} cosine_window;

static kn_status window_setup(kn_op_ctx *ctx, kn_dtype *dt, int64_t *size) {
  kn_status st = output_datatype(ctx, dt);
  if (st) return st;
  bool known;
  *size = -1;
  if ((st = int_scalar(ctx, 0, "size", size, &known))) return st;
  if (!known) *size = -1;
  else if (*size < 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "window size %lld must not be negative",
                      (long long)*size);
  return KN_OK;
}

static kn_status window_infer(kn_op_ctx *ctx) {
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int64_t size;
  kn_status st = window_setup(ctx, &dt, &size);
  if (st) return st;
  kn_out_set(ctx, 0, dt, 1, &size);
  return KN_OK;
}

static kn_status window_run(kn_op_ctx *ctx, cosine_window w) {
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int64_t size;
  kn_status st = window_setup(ctx, &dt, &size);
  if (st) return st;
  if (size < 0) return kn_op_fail(ctx, KN_ERR_MISSING, "window size is not known");
  kn_tensor *y = kn_out(ctx, 0);
  if (!y->data && size > 0 && (st = kn_out_alloc(ctx, 0, dt, 1, &size))) return st;
  y = kn_out(ctx, 0);
  bool periodic = kn_attr_int(ctx, "periodic", 1) != 0;
  double N = (double)(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; i++) {
    double a = N > 0 ? 2.0 * KN_PI * (double)i / N : 0.0;
    stv(y, i, w.a0 - w.a1 * cos(a) + w.a2 * cos(2.0 * a));
  }
  return KN_OK;
}

static kn_status hann_run(kn_op_ctx *ctx) {
  return window_run(ctx, (cosine_window){0.5, 0.5, 0.0});
}
static kn_status hamming_run(kn_op_ctx *ctx) {
  return window_run(ctx, (cosine_window){25.0 / 46.0, 21.0 / 46.0, 0.0});
}
static kn_status blackman_run(kn_op_ctx *ctx) {
  return window_run(ctx, (cosine_window){0.42, 0.5, 0.08});
}

/* ---- MelWeightMatrix ----------------------------------------------------- */

typedef struct {
  int64_t mel_bins, dft_len, sample_rate; /* -1 unknown */
  double lower, upper;
  bool have_edges;
} mel_params;

static kn_status mel_setup(kn_op_ctx *ctx, mel_params *mp, kn_dtype *dt, int64_t *dims) {
  kn_status st = output_datatype(ctx, dt);
  if (st) return st;
  bool k1, k2, k3;
  mp->mel_bins = mp->dft_len = mp->sample_rate = -1;
  if ((st = int_scalar(ctx, 0, "num_mel_bins", &mp->mel_bins, &k1))) return st;
  if ((st = int_scalar(ctx, 1, "dft_length", &mp->dft_len, &k2))) return st;
  if ((st = int_scalar(ctx, 2, "sample_rate", &mp->sample_rate, &k3))) return st;
  if (!k1) mp->mel_bins = -1;
  if (!k2) mp->dft_len = -1;
  if (!k3) mp->sample_rate = -1;
  if (k1 && mp->mel_bins <= 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "num_mel_bins %lld must be positive",
                      (long long)mp->mel_bins);
  if (k2 && mp->dft_len <= 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "dft_length %lld must be positive",
                      (long long)mp->dft_len);
  if (k3 && mp->sample_rate <= 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "sample_rate %lld must be positive",
                      (long long)mp->sample_rate);
  const kn_tensor *lo = kn_in(ctx, 3), *hi = kn_in(ctx, 4);
  if ((st = kn_check_dtype(ctx, 3, lo, float_types))) return st;
  if ((st = kn_check_dtype(ctx, 4, hi, float_types))) return st;
  mp->have_edges = false;
  if (lo && hi && lo->data && hi->data && kn_tensor_numel(lo) == 1 &&
      kn_tensor_numel(hi) == 1) {
    mp->lower = kn_scalar_f64(lo);
    mp->upper = kn_scalar_f64(hi);
    mp->have_edges = true;
    if (!(mp->lower >= 0) || !(mp->upper > mp->lower))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "expected 0 <= lower_edge_hertz < upper_edge_hertz, got %g and %g",
                        mp->lower, mp->upper);
  }
  dims[0] = mp->dft_len < 0 ? -1 : mp->dft_len / 2 + 1;
  dims[1] = mp->mel_bins;
  return KN_OK;
}

static kn_status mel_infer(kn_op_ctx *ctx) {
  mel_params mp;
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int64_t dims[2];
  kn_status st = mel_setup(ctx, &mp, &dt, dims);
  if (st) return st;
  kn_out_set(ctx, 0, dt, 2, dims);
  return KN_OK;
}

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* Triangular filters whose corners are the spectrogram bins of
 * mel_bins + 2 points evenly spaced on the mel scale, as in the ONNX
 * specification (bins = floor((dft_length + 1) * hz / sample_rate)). */
static kn_status mel_run(kn_op_ctx *ctx) {
  mel_params mp;
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int64_t dims[2];
  kn_status st = mel_setup(ctx, &mp, &dt, dims);
  if (st) return st;
  if (dims[0] < 0 || dims[1] < 0 || mp.sample_rate < 0 || !mp.have_edges)
    return kn_op_fail(ctx, KN_ERR_MISSING, "MelWeightMatrix inputs are not known");
  int64_t nspec = dims[0], nmel = dims[1];
  if (nmel > ((int64_t)1 << 24))
    return kn_op_fail(ctx, KN_ERR_LIMIT, "num_mel_bins %lld is too large", (long long)nmel);
  kn_tensor *y = kn_out(ctx, 0);
  if (!y->data && (st = kn_out_alloc(ctx, 0, dt, 2, dims))) return st;
  y = kn_out(ctx, 0);
  int64_t *bins = kn_malloc((size_t)(nmel + 2) * sizeof *bins);
  double *w = kn_calloc((size_t)(nspec * nmel), sizeof *w);
  if (!bins || !w) {
    free(bins);
    free(w);
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  }
  double lo_mel = hz_to_mel(mp.lower), hi_mel = hz_to_mel(mp.upper);
  double step = (hi_mel - lo_mel) / (double)(nmel + 2);
  for (int64_t i = 0; i < nmel + 2; i++) {
    double hz = mel_to_hz((double)i * step + lo_mel);
    double b = floor((double)(mp.dft_len + 1) * hz / (double)mp.sample_rate);
    /* The last corner is only an exclusive bound, so it may equal nspec. */
    double limit = (double)(i == nmel + 1 ? nspec + 1 : nspec);
    if (!(b >= 0) || b >= limit) {
      free(bins);
      free(w);
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "upper_edge_hertz %g maps past the %lld spectrogram bins of "
                        "dft_length %lld at sample_rate %lld",
                        mp.upper, (long long)nspec, (long long)mp.dft_len,
                        (long long)mp.sample_rate);
    }
    bins[i] = (int64_t)b;
  }
  for (int64_t i = 0; i < nmel; i++) {
    int64_t l = bins[i], c = bins[i + 1], h = bins[i + 2];
    if (c == l) {
      w[c * nmel + i] = 1.0;
    } else {
      for (int64_t j = l; j <= c; j++)
        w[j * nmel + i] = (double)(j - l) / (double)(c - l);
    }
    if (h > c)
      for (int64_t j = c; j < h; j++) w[j * nmel + i] = (double)(h - j) / (double)(h - c);
  }
  for (int64_t k = 0; k < nspec * nmel; k++) stv(y, k, w[k]);
  free(bins);
  free(w);
  return KN_OK;
}

static double signal_flops(const kn_op_ctx *ctx) {
  const kn_tensor *y = &ctx->out[0]->t;
  double n = (double)kn_tensor_numel(y);
  return n > 0 ? n * 10.0 : 0;
}

const kn_op_def kn_ops_signal[] = {
    {"DFT", NULL, 1, 3, 1, 1, 17, 20, dft_infer, dft_run, signal_flops},
    {"STFT", NULL, 2, 4, 1, 1, 17, 17, stft_infer, stft_run, signal_flops},
    {"HannWindow", NULL, 1, 1, 1, 1, 17, 17, window_infer, hann_run, NULL},
    {"HammingWindow", NULL, 1, 1, 1, 1, 17, 17, window_infer, hamming_run, NULL},
    {"BlackmanWindow", NULL, 1, 1, 1, 1, 17, 17, window_infer, blackman_run, NULL},
    {"MelWeightMatrix", NULL, 5, 5, 1, 1, 17, 17, mel_infer, mel_run, NULL},
    KN_OP_END,
};
