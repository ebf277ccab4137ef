/* int8 calibration, internal view (the public API is kiln.h's "int8
 * calibration" section; docs/CALIBRATION.md describes the methods and the
 * cache file).
 *
 * Layers: histogram.c and calibration.c (the |x| histogram, the threshold
 * methods, the calibration table and its text file) use only src/core, so
 * that the importer's Q/DQ writer and the builder's precision assignment
 * can read a table; the calibrator (src/builder/calibrator.c) drives a
 * context through the public API (kn_context_set_observer) and declares
 * its functions here too, but lives in the builder, above src/engine. */
#ifndef KN_QUANT_H
#define KN_QUANT_H

#include "core/core.h"

/* Histogram of |x| for one tensor over every sample seen.
 *
 * `bins` bins of equal width cover [0, bins * width).  The range adapts
 * to the data in one pass: the first non-zero values set width so that
 * their largest |x| falls in the last bin; when a later value reaches past
 * the range, groups of k adjacent bins are merged into one (k the smallest
 * integer that makes the range hold it), which widens every bin k times.
 * Merging whole bins keeps every count exact (no value is ever split
 * between bins or redistributed); the price is resolution: the final
 * range is below max|x| + the range before the last merge, so at worst
 * twice max|x| (then half the bins lie above every value).
 * Exact zeros (ReLU outputs, padding) are counted apart as well as in bin
 * 0: the MSE method knows they quantize without error.  NaN and infinities
 * are counted in `nonfinite` and left out of everything else. */
typedef struct kn_hist {
  int32_t bins;
  double width;       /* 0 until a non-zero finite value has been seen */
  uint64_t *count;    /* [bins] */
  uint64_t n;         /* finite values, zeros included */
  uint64_t zeros;
  uint64_t nonfinite;
  float min, max;     /* of the finite values; +inf / -inf when none */
  float amax;         /* max |x| of the finite values (0 when none) */
} kn_hist;

#define KN_CALIB_MIN_BINS 128 /* the entropy method's 128 quantized levels */
#define KN_CALIB_MAX_BINS (1 << 20)

kn_status kn_hist_init(kn_hist *h, int32_t bins, kn_error *err) KN_WUR;
void kn_hist_free(kn_hist *h);
void kn_hist_add(kn_hist *h, const float *x, int64_t n);

/* The symmetric threshold (amax) a method chooses for h, in [0, h->amax]:
 * KN_CALIB_MINMAX h->amax; KN_CALIB_PERCENTILE the `param` percentile
 * (0 < param <= 100) of |x|, interpolated within its bin;
 * KN_CALIB_ENTROPY TensorRT's minimum KL(P||Q) over 128 quantized levels;
 * KN_CALIB_MSE the bin edge minimizing kn_hist_mse.  0 for an empty or
 * all-zero histogram. */
double kn_hist_threshold(const kn_hist *h, kn_calib_method method, double param);
/* The expected squared error per value of symmetric int8 quantization at
 * threshold t (scale t / 127, |q| <= 127, values past t clipped) over h's
 * values, each bin's values taken as spread evenly over the bin and exact
 * zeros as exact.  For the MSE method and its tests. */
double kn_hist_mse(const kn_hist *h, double t);

/* A table under construction (calibrator.c, the parser): entries are
 * appended in order; kn_calibration_index sorts the lookup index and
 * names the first duplicate. */
struct kn_calibration {
  kn_calib_method method;
  double param;      /* the percentile for KN_CALIB_PERCENTILE, else 0 */
  int64_t samples;
  int32_t n, cap;
  kn_calib_range *r; /* names owned */
  int32_t *sorted;   /* indices of r, sorted by name */
};
kn_status kn_calibration_new(kn_calib_method method, double param, int64_t samples,
                             kn_calibration **out, kn_error *err) KN_WUR;
/* Appends a copy of name; amax, min, max as given (scale derived). */
kn_status kn_calibration_append(kn_calibration *c, const char *name, size_t name_len,
                                float amax, float min, float max, kn_error *err) KN_WUR;
/* Builds the lookup index; returns the index of a name listed twice (its
 * second entry), or -1.  -2 when out of memory. */
int32_t kn_calibration_index(kn_calibration *c);

/* The cache file's name syntax (docs/CALIBRATION.md "Names"): appends name
 * as it is written in the file (bare, or quoted with escapes) to buf,
 * NUL-terminated and cut short to fit; returns the length it needs. */
size_t kn_calib_name_write(const char *name, char *buf, size_t size);

#endif
