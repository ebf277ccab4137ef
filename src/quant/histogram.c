/* The |x| histogram of a tensor and the four ways to pick an int8
 * threshold from it (quant.h, docs/CALIBRATION.md "Methods"). */
#include "calibration.h"

#include <float.h>
#include <math.h>

#define LEVELS 128 /* positive int8 levels the entropy method quantizes into */

kn_status kn_hist_init(kn_hist *h, int32_t bins, kn_error *err) {
  memset(h, 0, sizeof *h);
  if (bins < KN_CALIB_MIN_BINS || bins > KN_CALIB_MAX_BINS)
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration histogram: %d bins, expected %d to %d",
                   bins, KN_CALIB_MIN_BINS, KN_CALIB_MAX_BINS);
  h->count = kn_calloc((size_t)bins, sizeof *h->count);
  if (!h->count) return kn_fail(err, KN_ERR_OOM, "out of memory for a calibration histogram");
  h->bins = bins;
  h->min = INFINITY;
  h->max = -INFINITY;
  return KN_OK;
}

void kn_hist_free(kn_hist *h) {
  free(h->count);
  memset(h, 0, sizeof *h);
}

/* Widens the range to hold |x| = a by merging groups of k bins. */
static void grow(kn_hist *h, double a) {
  double range = h->width * h->bins;
  if (a < range) return;
  double kd = floor(a / range) + 1;
  /* a range past every float (k > bins merges everything into bin 0) */
  int64_t k = kd > (double)h->bins ? h->bins : (int64_t)kd;
  for (int64_t j = 0; j < h->bins; j++) {
    uint64_t s = 0;
    for (int64_t i = j * k; i < (j + 1) * k && i < h->bins; i++) s += h->count[i];
    h->count[j] = s;
  }
  h->width *= (double)k;
  /* kd beyond bins only for a denormal first range and a huge later value */
  while (a >= h->width * h->bins) h->width *= 2;
}

void kn_hist_add(kn_hist *h, const float *x, int64_t n) {
  float lo = h->min, hi = h->max, amax = 0;
  uint64_t zeros = 0, bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) {
      bad++;
      continue;
    }
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    float a = fabsf(v);
    amax = a > amax ? a : amax;
    zeros += v == 0;
  }
  h->nonfinite += bad;
  h->zeros += zeros;
  h->n += (uint64_t)n - bad;
  h->min = lo;
  h->max = hi;
  if (amax > h->amax) h->amax = amax;
  if (amax == 0) { /* all zeros (or none): bin 0 whatever its width */
    h->count[0] += (uint64_t)n - bad;
    return;
  }
  if (h->width == 0) {
    /* the largest |x| so far lands in the last bin */
    h->width = (double)amax / h->bins * (1 + 1e-7);
    if (!(h->width > 0)) h->width = DBL_MIN;
    while ((double)amax >= h->width * h->bins) h->width *= 2;
  }
  grow(h, amax);
  double inv = 1.0 / h->width;
  int64_t last = h->bins - 1;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) continue;
    int64_t b = (int64_t)(fabs((double)v) * inv);
    h->count[b < last ? b : last]++;
  }
}

/* ---- methods ---------------------------------------------------------------- */

static double percentile(const kn_hist *h, double p) {
  double target = p / 100.0 * (double)h->n, cum = 0;
  if (p >= 100) return h->amax;
  for (int32_t i = 0; i < h->bins; i++) {
    double c = (double)h->count[i];
    if (c > 0 && cum + c >= target) {
      double t = (i + (target - cum) / c) * h->width;
      return t < h->amax ? t : h->amax;
    }
    cum += c;
  }
  return h->amax;
}

static double xlogx(double x) { return x > 0 ? x * log(x) : 0; }

/* TensorRT's entropy calibration (Migacz, "8-bit Inference with TensorRT",
 * GTC 2017): for each candidate i (bins kept, LEVELS .. bins), P is bins
 * [0, i) with the counts past them added to bin i - 1 (clipped values land
 * on the threshold), Q is bins [0, i) quantized into LEVELS groups, each
 * group's count spread evenly over the bins of it where P is not zero;
 * the threshold is (i + 0.5) bin widths for the i of least KL(P||Q).  As
 * NVIDIA's pytorch-quantization does, bin 0 is taken as bin 1's count: a
 * spike of exact zeros (ReLU) says nothing about where to clip.
 * KL is computed per group from prefix sums (sum of P log P, of counts, of
 * non-empty bins), LEVELS logarithms per candidate instead of i. */
static double entropy(const kn_hist *h) {
  int32_t nb = h->bins;
  double *c = kn_malloc(sizeof(double) * (size_t)nb * 3 + sizeof(double) * 3);
  if (!c) return h->amax; /* out of memory: fall back to min-max */
  double *cum = c + nb, *cumxl = cum + nb + 1;
  int32_t *nz = kn_malloc(sizeof(int32_t) * ((size_t)nb + 1));
  if (!nz) {
    free(c);
    return h->amax;
  }
  for (int32_t j = 0; j < nb; j++) c[j] = (double)h->count[j];
  c[0] = c[1];
  cum[0] = cumxl[0] = 0;
  nz[0] = 0;
  for (int32_t j = 0; j < nb; j++) {
    cum[j + 1] = cum[j] + c[j];
    cumxl[j + 1] = cumxl[j] + xlogx(c[j]);
    nz[j + 1] = nz[j] + (c[j] > 0);
  }
  double total = cum[nb], best = INFINITY;
  int32_t best_i = nb;
  for (int32_t i = LEVELS; i <= nb; i++) {
    double outl = total - cum[i], kept = cum[i];
    double t = c[i - 1] + outl; /* P's last bin */
    if (kept <= 0) continue;
    /* sum P log P with P = counts / total */
    double plogp = (cumxl[i - 1] + xlogx(t)) / total - log(total);
    double cross = 0; /* sum P log Q */
    for (int32_t g = 0; g < LEVELS; g++) {
      int32_t s = (int32_t)((int64_t)g * i / LEVELS), e = (int32_t)((int64_t)(g + 1) * i / LEVELS);
      if (e <= s) continue;
      double gsum = cum[e] - cum[s], mass = gsum;
      int32_t n_nz = nz[e] - nz[s];
      if (e == i) { /* the group holding P's last bin */
        n_nz += (t > 0) - (c[i - 1] > 0);
        mass += outl;
      }
      if (n_nz == 0 || mass <= 0) continue;
      /* Q over the group's non-empty bins; a group of P mass but no count
       * of its own (only clipped values) gets a tiny Q, a large penalty */
      double q = gsum > 0 ? gsum / ((double)n_nz * kept) : 1e-30;
      cross += mass / total * log(q);
    }
    double kl = plogp - cross;
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  free(c);
  free(nz);
  double th = (best_i + 0.5) * h->width;
  return th < h->amax ? th : h->amax;
}

/* The integral of the rounding error (x - s round(x / s))^2 from -s/2 to x. */
static double round_err_cum(double x, double s) {
  double k = floor(x / s + 0.5), r = x - k * s;
  return k * s * s * s / 12 + (r * r * r + s * s * s / 8) / 3;
}

/* The integral of x's squared error over [a, b] at threshold t. */
static double err_integral(double a, double b, double t) {
  double e = 0;
  if (a < t) {
    double top = b < t ? b : t, s = t / 127;
    e += round_err_cum(top, s) - round_err_cum(a, s);
  }
  if (b > t) {
    double lo = a > t ? a : t;
    e += ((b - t) * (b - t) * (b - t) - (lo - t) * (lo - t) * (lo - t)) / 3;
  }
  return e;
}

double kn_hist_mse(const kn_hist *h, double t) {
  if (h->n == 0 || h->width == 0) return 0;
  if (!(t > 0)) { /* everything quantizes to 0 */
    double e = 0;
    for (int32_t j = 0; j < h->bins; j++) {
      double a = j * h->width, b = a + h->width;
      uint64_t n = h->count[j] - (j == 0 ? h->zeros : 0);
      e += (double)n * (b * b * b - a * a * a) / (3 * h->width);
    }
    return e / (double)h->n;
  }
  double e = 0, w = h->width;
  for (int32_t j = 0; j < h->bins; j++) {
    uint64_t n = h->count[j] - (j == 0 ? h->zeros : 0);
    if (!n) continue;
    /* the last non-empty bin ends at amax: nothing lies past it */
    double a = j * w, b = a + w;
    if (b > h->amax && a < h->amax) b = h->amax;
    if (b <= a) continue;
    e += (double)n * err_integral(a, b, t) / (b - a);
  }
  return e / (double)h->n;
}

/* Candidates: every bin edge below amax, and amax itself.  Each costs a
 * pass over the bins, so the search is coarse (about 128 candidates
 * evenly spaced), then fine (every edge within one coarse step of the
 * coarse best): the error is smooth in the threshold at that scale. */
static double mse(const kn_hist *h) {
  int64_t n_edges = 0; /* edges i * width < amax, i >= 1 */
  while (n_edges < h->bins && (n_edges + 1) * h->width < h->amax) n_edges++;
  int64_t last = n_edges + 1; /* candidate `last` is amax */
  int64_t step = last / 128 > 1 ? last / 128 : 1;
#define CAND(i) ((i) >= last ? (double)h->amax : (double)(i) * h->width)
  int64_t best_i = last;
  double best = kn_hist_mse(h, h->amax);
  for (int64_t i = step; i < last; i += step) {
    double e = kn_hist_mse(h, CAND(i));
    if (e < best) best = e, best_i = i;
  }
  int64_t lo = best_i - step > 1 ? best_i - step : 1;
  int64_t hi = best_i + step < last ? best_i + step : last;
  for (int64_t i = lo; i <= hi; i++) {
    double e = kn_hist_mse(h, CAND(i));
    if (e < best) best = e, best_i = i;
  }
  return CAND(best_i);
#undef CAND
}

double kn_hist_threshold(const kn_hist *h, kn_calib_method method, double param) {
  if (h->n == 0 || h->amax == 0) return 0;
  switch (method) {
  case KN_CALIB_MINMAX: return h->amax;
  case KN_CALIB_PERCENTILE: return percentile(h, param);
  /* fewer non-zero values than bins make no distribution: KL over such a
   * sparse histogram picks its threshold from noise (a pooled vector of
   * 512 values from one sample was clipped at 8.5% of its max, and an
   * ASPP head's int8 output fell to cosine 0.36); the MSE rule fits the
   * values themselves */
  case KN_CALIB_ENTROPY: return h->n - h->zeros < (uint64_t)h->bins ? mse(h) : entropy(h);
  case KN_CALIB_MSE: return mse(h);
  }
  KN_ASSERT(!"unknown calibration method");
  return 0;
}
