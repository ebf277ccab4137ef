/* int8 calibration (src/quant): the |x| histogram and its merging, the four
 * threshold methods on distributions with known answers (MSE checked
 * against a brute-force search on the raw values), the calibration cache's
 * round trip and its parser's rejections, and the calibrator on tinycnn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "engine/engine.h"
#include "quant/calibration.h"

/* ---- data ------------------------------------------------------------------ */

typedef struct rng {
  uint64_t s;
} rng;

static double uniform01(rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return (double)((r->s * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static double gaussian(rng *r) {
  double u = uniform01(r), v = uniform01(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* The squared error of symmetric int8 quantization at threshold t, mean
 * over the raw values: the quantity the MSE method minimizes. */
static double raw_mse(const float *x, int64_t n, double t) {
  double s = t / 127, e = 0;
  for (int64_t i = 0; i < n; i++) {
    double q = t > 0 ? round(x[i] / s) : 0;
    if (q > 127) q = 127;
    if (q < -127) q = -127;
    double d = x[i] - q * s;
    e += d * d;
  }
  return e / (double)n;
}

static kn_hist hist_of(const float *x, int64_t n, int32_t bins) {
  kn_hist h;
  assert_int_equal(kn_hist_init(&h, bins, NULL), KN_OK);
  kn_hist_add(&h, x, n);
  return h;
}

#define N_UNI 200000

static void test_uniform(void **state) {
  (void)state;
  float *x = malloc(sizeof(float) * N_UNI);
  rng r = {42};
  for (int64_t i = 0; i < N_UNI; i++) x[i] = (float)(uniform01(&r) * 6 - 3); /* [-3, 3) */
  kn_hist h = hist_of(x, N_UNI, KN_CALIB_DEFAULT_BINS);
  double amax = h.amax;
  assert_true(amax > 2.999 && amax < 3.0);
  assert_true(kn_hist_threshold(&h, KN_CALIB_MINMAX, 0) == amax);
  double p = kn_hist_threshold(&h, KN_CALIB_PERCENTILE, 99.99);
  double e = kn_hist_threshold(&h, KN_CALIB_ENTROPY, 0);
  double m = kn_hist_threshold(&h, KN_CALIB_MSE, 0);
  print_message("uniform: amax %.6f percentile %.6f entropy %.6f mse %.6f\n", amax, p, e, m);
  /* no outliers: every method keeps (about) the whole range; the MSE
   * optimum of a uniform density is A / (1 + 1/254) */
  assert_true(fabs(p - amax) < 0.002 * amax);
  assert_true(fabs(e - amax) < 0.02 * amax);
  assert_true(fabs(m - amax / (1 + 1.0 / 254)) < 0.01 * amax);
  assert_true(p <= amax && e <= amax && m <= amax);
  kn_hist_free(&h);
  free(x);
}

/* A Gaussian (sigma 1) with outliers at +-big.  The brute force: raw_mse
 * over thresholds from 0.5 to past the outliers. */
static void gaussian_case(int64_t n_gauss, int n_out, float big, bool mse_clips) {
  int64_t n = n_gauss + n_out;
  float *x = malloc(sizeof(float) * (size_t)n);
  rng r = {7};
  for (int64_t i = 0; i < n_gauss; i++) x[i] = (float)gaussian(&r);
  for (int i = 0; i < n_out; i++) x[n_gauss + i] = i % 2 ? -big : big + (float)i;
  kn_hist h = hist_of(x, n, KN_CALIB_DEFAULT_BINS);
  double amax = h.amax;
  assert_true(amax == big + (float)(n_out - 1 - (n_out - 1) % 2));
  double mm = kn_hist_threshold(&h, KN_CALIB_MINMAX, 0);
  double p = kn_hist_threshold(&h, KN_CALIB_PERCENTILE, 99.99);
  double e = kn_hist_threshold(&h, KN_CALIB_ENTROPY, 0);
  double m = kn_hist_threshold(&h, KN_CALIB_MSE, 0);
  print_message("gaussian + %d outliers at %g in %lld: minmax %.4f percentile %.4f entropy %.4f "
                "mse %.4f\n", n_out, big, (long long)n, mm, p, e, m);
  assert_true(mm == amax);
  /* the 99.99th percentile of |N(0,1)| is 3.89 */
  assert_true(p > 3.6 && p < 4.3);
  assert_true(e > 2.0 && e < 8.0);
  assert_true(m < mm);
  /* coarse, then fine around the coarse best (the MSE curve is smooth) */
  double best = INFINITY, best_t = 0;
  for (double t = 0.5; t <= amax; t += 0.25) {
    double v = raw_mse(x, n, t);
    if (v < best) best = v, best_t = t;
  }
  for (double t = best_t - 0.3, c = best_t; t <= c + 0.3; t += 0.01) {
    double v = raw_mse(x, n, t);
    if (t > 0 && v < best) best = v, best_t = t;
  }
  double at_m = raw_mse(x, n, m), at_max = raw_mse(x, n, mm);
  print_message("  mse: chosen %.4f gives %.6g; brute force %.4f gives %.6g; minmax %.6g\n", m,
                at_m, best_t, best, at_max);
  /* MSE's threshold is (within 3%) the best of the brute-force search */
  assert_true(at_m <= best * 1.03);
  /* the histogram's own estimate agrees with the raw values' */
  assert_true(fabs(kn_hist_mse(&h, m) - at_m) < 0.05 * at_m);
  if (mse_clips) {
    assert_true(m > 2.0 && m < 0.5 * amax);
    assert_true(at_max > 1.5 * at_m);
  } else {
    /* outliers heavy enough in squared error that clipping them costs more
     * than int8's coarser steps over the Gaussian: the true optimum keeps
     * (most of) them, as the brute force confirms */
    assert_true(m > 0.5 * amax);
  }
  kn_hist_free(&h);
  free(x);
}

static void test_gaussian_outliers(void **state) {
  (void)state;
  /* one outlier in 300k: squared error favours clipping it */
  gaussian_case(300000, 1, 30.0f, true);
  /* eight in 200k at 40..46: 4e-5 of the values but most of the squared
   * error; percentile and entropy clip them, MSE keeps them */
  gaussian_case(200000, 8, 40.0f, false);
}

/* The entropy method computes KL per group from prefix sums; this is the
 * same algorithm written out (P and Q built bin by bin for every candidate):
 * both must choose the same threshold. */
static double entropy_direct(const kn_hist *h) {
  int nb = h->bins;
  double *c = malloc(sizeof(double) * (size_t)nb * 3), *P = c + nb, *Q = P + nb;
  for (int j = 0; j < nb; j++) c[j] = (double)h->count[j];
  c[0] = c[1];
  double total = 0, best = INFINITY;
  for (int j = 0; j < nb; j++) total += c[j];
  int bi = nb;
  for (int i = 128; i <= nb; i++) {
    double outl = 0, kept = 0;
    for (int j = i; j < nb; j++) outl += c[j];
    for (int j = 0; j < i; j++) P[j] = c[j], kept += c[j];
    P[i - 1] += outl;
    for (int g = 0; g < 128; g++) {
      int a = (int)((int64_t)g * i / 128), e = (int)((int64_t)(g + 1) * i / 128), nz = 0;
      double sum = 0;
      for (int j = a; j < e; j++) sum += c[j], nz += P[j] > 0;
      for (int j = a; j < e; j++) Q[j] = P[j] > 0 ? (sum > 0 ? sum / nz / kept : 1e-30) : 0;
    }
    double kl = 0;
    for (int j = 0; j < i; j++)
      if (P[j] > 0) kl += P[j] / total * log(P[j] / total / Q[j]);
    if (kl < best) best = kl, bi = i;
  }
  free(c);
  double t = (bi + 0.5) * h->width;
  return t < h->amax ? t : h->amax;
}

static void test_entropy_direct(void **state) {
  (void)state;
  rng r = {5};
  for (int trial = 0; trial < 4; trial++) {
    int n = 40000;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
      double g = gaussian(&r);
      /* ReLU-like, or heavy-tailed (g^3), each with one outlier */
      x[i] = (float)(trial % 2 ? fmax(g, 0) * (1 + trial) : g * g * g);
    }
    x[0] = 30.0f + (float)trial;
    kn_hist h = hist_of(x, n, 512 << (trial % 3));
    double fast = kn_hist_threshold(&h, KN_CALIB_ENTROPY, 0), direct = entropy_direct(&h);
    if (fabs(fast - direct) > 1e-9 * direct)
      fail_msg("trial %d: entropy %.9g, written out %.9g", trial, fast, direct);
    kn_hist_free(&h);
    free(x);
  }
}

/* Fewer non-zero values than bins (a pooled vector of one sample): the
 * entropy method takes the MSE rule's threshold, not KL's over a sparse
 * histogram, which clipped such a vector at a tenth of its max. */
static void test_entropy_sparse(void **state) {
  (void)state;
  rng r = {9};
  enum { NV = 512 };
  float x[NV];
  for (int i = 0; i < NV; i++) x[i] = (float)(fabs(gaussian(&r)) * 0.1); /* ReLU'd features */
  x[7] = 0.85f;
  kn_hist h = hist_of(x, NV, 2048);
  double e = kn_hist_threshold(&h, KN_CALIB_ENTROPY, 0), m = kn_hist_threshold(&h, KN_CALIB_MSE, 0);
  assert_true(e == m);
  assert_true(e > 0.2); /* KL over 2048 bins of 512 values: about 0.07 */
  kn_hist_free(&h);
}

static void test_percentile_known(void **state) {
  (void)state;
  /* |x| uniform over 1 .. 10000 in steps of 1: the P-th percentile is
   * about P * 100 */
  float *x = malloc(sizeof(float) * 10000);
  for (int i = 0; i < 10000; i++) x[i] = (float)(i % 2 ? -(i + 1) : (i + 1));
  kn_hist h = hist_of(x, 10000, KN_CALIB_DEFAULT_BINS);
  double w = h.width;
  assert_true(fabs(kn_hist_threshold(&h, KN_CALIB_PERCENTILE, 50) - 5000) <= w + 1);
  assert_true(fabs(kn_hist_threshold(&h, KN_CALIB_PERCENTILE, 99) - 9900) <= w + 1);
  assert_true(kn_hist_threshold(&h, KN_CALIB_PERCENTILE, 100) == 10000);
  assert_true(h.min == -10000 && h.max == 9999 && h.amax == 10000);
  kn_hist_free(&h);
  free(x);
}

/* The adaptive range: batches that each reach past the range merge bins;
 * the result must be what binning every value at once at the final width
 * gives (merging whole bins loses nothing), and cover every value. */
static void test_histogram_merging(void **state) {
  (void)state;
  enum { B = 256, N = 30000 };
  static const double scale[] = {1.0, 3.7, 3.71, 100.0, 0.5, 1e4};
  float *all = malloc(sizeof(float) * N * 6);
  kn_hist h;
  assert_int_equal(kn_hist_init(&h, B, NULL), KN_OK);
  rng r = {3};
  int64_t n = 0;
  for (int b = 0; b < 6; b++) {
    float *x = all + n;
    for (int i = 0; i < N; i++) x[i] = (float)((uniform01(&r) * 2 - 1) * scale[b]);
    x[0] = 0; /* exact zeros counted apart */
    kn_hist_add(&h, x, N);
    n += N;
    assert_true(h.width * B > h.amax);
  }
  uint64_t total = 0;
  for (int j = 0; j < B; j++) total += h.count[j];
  assert_int_equal(total, n);
  assert_int_equal(h.n, n);
  assert_int_equal(h.zeros, 6);
  float lo = INFINITY, hi = -INFINITY, am = 0;
  uint64_t *direct = calloc(B, sizeof *direct);
  for (int64_t i = 0; i < n; i++) {
    lo = fminf(lo, all[i]);
    hi = fmaxf(hi, all[i]);
    am = fmaxf(am, fabsf(all[i]));
    int64_t j = (int64_t)(fabs((double)all[i]) / h.width);
    direct[j < B ? j : B - 1]++;
  }
  assert_true(lo == h.min && hi == h.max && am == h.amax);
  /* exact up to values on a bin edge, where the two divisions may round
   * apart */
  uint64_t diff = 0;
  for (int j = 0; j < B; j++)
    diff += direct[j] > h.count[j] ? direct[j] - h.count[j] : h.count[j] - direct[j];
  assert_true(diff <= 4);
  /* the range stays within (amax, 2 amax + the range before the last merge] */
  assert_true(h.width * B < 2.0 * h.amax + 1e-9);
  free(direct);
  free(all);
  kn_hist_free(&h);
}

static void test_edge_histograms(void **state) {
  (void)state;
  kn_hist h;
  assert_int_equal(kn_hist_init(&h, 2048, NULL), KN_OK);
  for (int m = 0; m <= KN_CALIB_MSE; m++) assert_true(kn_hist_threshold(&h, m, 99) == 0);
  float z[5] = {0, 0, 0, 0, 0};
  kn_hist_add(&h, z, 5);
  for (int m = 0; m <= KN_CALIB_MSE; m++) assert_true(kn_hist_threshold(&h, m, 99) == 0);
  float v[4] = {NAN, INFINITY, -2.5f, 1e-42f};
  kn_hist_add(&h, v, 4);
  assert_int_equal(h.nonfinite, 2);
  assert_true(h.amax == 2.5f && h.min == -2.5f && h.max == 1e-42f);
  for (int m = 0; m <= KN_CALIB_MSE; m++) {
    double t = kn_hist_threshold(&h, m, 99);
    assert_true(t >= 0 && t <= 2.5);
  }
  /* a denormal range first, then a huge value */
  kn_hist g;
  assert_int_equal(kn_hist_init(&g, 128, NULL), KN_OK);
  float d[2] = {1e-44f, 3e38f};
  kn_hist_add(&g, d, 1);
  kn_hist_add(&g, d + 1, 1);
  assert_true(g.width * 128 > 3e38 && g.width * 128 <= 6e38);
  uint64_t sum = 0;
  for (int j = 0; j < 128; j++) sum += g.count[j];
  assert_true(sum == 2 && g.count[0] >= 1 && g.count[64] + g.count[127] + g.count[0] >= 1);
  kn_hist_free(&g);
  kn_hist_free(&h);
  assert_int_equal(kn_hist_init(&h, 64, NULL), KN_ERR_INVALID_ARG);
}

/* ---- the cache file ------------------------------------------------------- */

static const char *const odd_names[] = {
    "plain", "with space", "quote\"back\\slash", "tab\tnl\nend", "#hash", "a#b", "method",
    "end", "samples", "kiln-calibration", "", "\xc3\xbcnic\xc3\xb8" "de", "\x01" "ctl\x7f",
    "/model/conv1/Conv_output_0"};
#define N_ODD (sizeof odd_names / sizeof *odd_names)

static kn_calibration *odd_table(void) {
  kn_calibration *c;
  assert_int_equal(kn_calibration_new(KN_CALIB_PERCENTILE, 99.95, 17, &c, NULL), KN_OK);
  rng r = {11};
  for (size_t i = 0; i < N_ODD; i++) {
    float lo = (float)(-uniform01(&r) * pow(10, (double)i - 6));
    float hi = (float)(uniform01(&r) * 3e3);
    if (i == 3) lo = -1e-40f, hi = 3.4e38f; /* a denormal and near FLT_MAX */
    float amax = fmaxf(-lo, hi) * (float)uniform01(&r);
    assert_int_equal(kn_calibration_append(c, odd_names[i], strlen(odd_names[i]), amax, lo, hi,
                                           NULL), KN_OK);
  }
  assert_int_equal(kn_calibration_index(c), -1);
  return c;
}

static void test_cache_round_trip(void **state) {
  (void)state;
  kn_calibration *c = odd_table(), *back = NULL;
  char path[] = "/tmp/kiln_calib_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  kn_error err = {0};
  assert_int_equal(kn_calibration_save(c, path, &err), KN_OK);
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  assert_int_not_equal(access(tmp, F_OK), 0); /* renamed away */
  assert_int_equal(kn_calibration_load(path, &back, &err), KN_OK);
  assert_int_equal(kn_calibration_count(back), N_ODD);
  double p;
  assert_int_equal(kn_calibration_method(back, &p), KN_CALIB_PERCENTILE);
  assert_true(p == 99.95f); /* written %.9g, read as a float */
  assert_int_equal(kn_calibration_samples(back), 17);
  for (int32_t i = 0; i < (int32_t)N_ODD; i++) {
    kn_calib_range a, b, g;
    assert_int_equal(kn_calibration_entry(c, i, &a), KN_OK);
    assert_int_equal(kn_calibration_entry(back, i, &b), KN_OK);
    assert_string_equal(a.name, b.name);
    assert_memory_equal(&a.amax, &b.amax, sizeof(float));
    assert_memory_equal(&a.min, &b.min, sizeof(float));
    assert_memory_equal(&a.max, &b.max, sizeof(float));
    assert_true(b.scale == b.amax / 127.0f);
    assert_int_equal(kn_calibration_get(back, odd_names[i], &g), 1);
    assert_string_equal(g.name, odd_names[i]);
    assert_true(g.amax == b.amax);
  }
  kn_calib_range none;
  assert_int_equal(kn_calibration_get(back, "no such tensor", &none), 0);
  assert_int_equal(kn_calibration_entry(back, (int32_t)N_ODD, &none), KN_ERR_INVALID_ARG);
  /* the text itself is a fixed point */
  char *t1 = kn_calibration_to_text(c), *t2 = kn_calibration_to_text(back);
  assert_string_equal(t1, t2);
  assert_non_null(strstr(t1, "kiln-calibration 1\n"));
  assert_non_null(strstr(t1, "\n\"with space\" "));
  assert_non_null(strstr(t1, "\n\"quote\\\"back\\\\slash\" "));
  assert_non_null(strstr(t1, "\n\"tab\\tnl\\nend\" "));
  assert_non_null(strstr(t1, "\n\"#hash\" "));
  assert_non_null(strstr(t1, "\na#b "));
  assert_non_null(strstr(t1, "\n\"method\" "));
  assert_non_null(strstr(t1, "\n\"\" "));
  assert_non_null(strstr(t1, "\n\"\\x01ctl\\x7f\" "));
  assert_non_null(strstr(t1, "\n/model/conv1/Conv_output_0 "));
  assert_non_null(strstr(t1, "\nmethod percentile 99.9499969\n"));
  assert_true(strlen(t1) > 6 && !strcmp(t1 + strlen(t1) - 4, "end\n"));
  free(t1);
  free(t2);
  /* a hand-edited file: comments, blank lines, tabs, CRLF, no final newline */
  const char *edited = "kiln-calibration 1\r\n# edited\r\n\r\n  method\tminmax  \r\nsamples 3\n"
                       "\t# indented comment\nx 1.5 -1 1.5\n\"y z\"\t2  -2 0.5\nend";
  kn_calibration *e;
  assert_int_equal(kn_calibration_parse(edited, strlen(edited), "edited", &e, &err), KN_OK);
  kn_calib_range yz;
  assert_int_equal(kn_calibration_get(e, "y z", &yz), 1);
  assert_true(yz.amax == 2 && yz.min == -2 && yz.max == 0.5f);
  assert_int_equal(kn_calibration_method(e, NULL), KN_CALIB_MINMAX);
  kn_calibration_free(e);
  kn_calibration_free(back);
  kn_calibration_free(c);
  unlink(path);
  /* unwritable and unreadable paths */
  c = odd_table();
  assert_int_equal(kn_calibration_save(c, "/nonexistent/dir/x", &err), KN_ERR_IO);
  assert_non_null(strstr(err.msg, "/nonexistent/dir/x.tmp: cannot write"));
  kn_calibration_free(c);
  assert_int_equal(kn_calibration_load("/nonexistent/calib", &back, &err), KN_ERR_IO);
  assert_non_null(strstr(err.msg, "/nonexistent/calib: cannot open"));
  assert_null(back);
}

typedef struct bad_case {
  const char *text;
  const char *fragment; /* expected in the message, with the line: "f:3: ..." */
} bad_case;

#define HEAD "kiln-calibration 1\nmethod entropy\nsamples 2\n"

static void test_parser_rejects(void **state) {
  (void)state;
  static const bad_case cases[] = {
      {"", "f:1: empty file; expected 'kiln-calibration 1'"},
      {"hello world\n", "f:1: first line is 'hello world', not a kiln calibration file"},
      {"kiln-calibration\n", "f:1: first line is 'kiln-calibration'; expected"},
      {"kiln-calibration 2\nend\n", "f:1: calibration file version 2; expected version 1"},
      {"kiln-calibration 1 extra\n", "f:1: unexpected 'extra' after the version"},
      {"kiln-calibration 1\nmethod entropy\nsamples 2\nx 1 0 1\n",
       "f:4: the file ends without its 'end' line (cut short?)"},
      {"kiln-calibration 1\nmethod entropy\nsamples 2\nx 1 0", "f:4: tensor x: no MAX"},
      {"kiln-calibration 1\nx 1 0 1\n", "f:2: tensor line before the 'method' line"},
      {"kiln-calibration 1\nmethod mse\nx 1 0 1\n", "f:3: tensor line before the 'samples'"},
      {"kiln-calibration 1\nmethod foo\n", "f:2: unknown method 'foo'; expected minmax"},
      {"kiln-calibration 1\nmethod\n", "f:2: 'method' with no name"},
      {"kiln-calibration 1\nmethod percentile\n", "f:2: method percentile: no P"},
      {"kiln-calibration 1\nmethod percentile 150\n", "f:2: percentile 150; expected a "
                                                      "number in (0, 100]"},
      {"kiln-calibration 1\nmethod entropy 3\n", "f:2: unexpected '3' after the method"},
      {"kiln-calibration 1\nmethod entropy\nmethod mse\n",
       "f:3: a second 'method' line (the first is line 2)"},
      {"kiln-calibration 1\nsamples 0\n", "f:2: samples '0'; expected a whole number >= 1"},
      {"kiln-calibration 1\nsamples -3\n", "f:2: samples '-3'"},
      {"kiln-calibration 1\nsamples 99999999999999999999\n", "f:2: samples '9999"},
      {HEAD "samples 3\n", "f:4: a second 'samples' line (the first is line 3)"},
      {HEAD "x 1 0 1\nmethod mse\n", "f:5: a second 'method' line"},
      {"kiln-calibration 1\nmethod mse\nend\n", "f:3: 'end' before a 'samples' line"},
      {HEAD "x 1 0 1 4\nend\n", "f:4: unexpected '4' after MAX"},
      {HEAD "x abc 0 1\nend\n", "f:4: tensor x: AMAX 'abc' is not a number"},
      {HEAD "x nan 0 1\nend\n", "f:4: tensor x: AMAX 'nan' is not a number"},
      {HEAD "x 1 -inf 1\nend\n", "f:4: tensor x: MIN '-inf' is not a number"},
      {HEAD "x 1 0 0x10\nend\n", "f:4: tensor x: MAX '0x10' is not a number"},
      {HEAD "x 1 0 1.5.2\nend\n", "f:4: tensor x: MAX '1.5.2' is not a number"},
      {HEAD "x 1e39 0 1\nend\n", "f:4: tensor x: AMAX '1e39' is out of float range"},
      {HEAD "x -1 0 1\nend\n", "f:4: tensor x: AMAX -1 is negative"},
      {HEAD "x 1 2 1\nend\n", "f:4: tensor x: MIN 2 is above MAX 1; expected MIN <= MAX"},
      {HEAD "\"open 1 0 1\nend\n", "f:4: tensor name \"open 1 0 1... is not closed"},
      {HEAD "\"a\\q\" 1 0 1\nend\n", "f:4: unknown escape '\\q'"},
      {HEAD "\"a\\x4\" 1 0 1\nend\n", "f:4: escape \\x not followed by two hex digits"},
      {HEAD "\"a\\x00\" 1 0 1\nend\n", "f:4: escape \\x00 in a tensor name"},
      {HEAD "\"a\\", "f:4: '\\' at the end of the line"},
      {HEAD "\"ab\"c 1 0 1\nend\n", "f:4: text right after the closing '\"'"},
      {HEAD "a\"b 1 0 1\nend\n", "f:4: byte 0x22 in the bare tensor name 'a'"},
      {HEAD "a\\b 1 0 1\nend\n", "f:4: byte 0x5c in the bare tensor name 'a'"},
      {HEAD "\"a\x01\" 1 0 1\nend\n", "f:4: byte 0x01 inside a quoted tensor name"},
      {HEAD "x\x01y 1 0 1\nend\n", "f:4: byte 0x01 in the bare tensor name 'x'"},
      {HEAD "x 1 0 1\ny 1 0 1\n\"x\" 2 0 2\nend\n",
       "f:6: tensor x listed again (first on line 4); expected each tensor once"},
      {HEAD "end\nx 1 0 1\n", "f:5: 'x 1 0 1' after the 'end' line"},
      {HEAD "end extra\n", "f:4: unexpected 'extra' after 'end'"},
      {HEAD "kiln-calibration 1\n", "f:4: a second 'kiln-calibration' line"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kn_error err = {0};
    kn_calibration *c = (kn_calibration *)1;
    kn_status st = kn_calibration_parse(cases[i].text, strlen(cases[i].text), "f", &c, &err);
    if (st != KN_ERR_PARSE || !strstr(err.msg, cases[i].fragment) || strchr(err.msg, '\n'))
      fail_msg("case %zu: status %d, message '%s', expected '%s'", i, st, err.msg,
               cases[i].fragment);
    assert_null(c);
  }
  /* a NUL byte, which strlen would hide */
  static const char nul[] = "kiln-calibration 1\nmethod mse\nsamples 1\nx\0 1 0 1\nend\n";
  kn_error err = {0};
  kn_calibration *c;
  assert_int_equal(kn_calibration_parse(nul, sizeof nul - 1, "f", &c, &err), KN_ERR_PARSE);
  assert_non_null(strstr(err.msg, "f:4: NUL byte at column 2"));
  /* every prefix of a good file is refused or read, never more */
  kn_calibration *good = odd_table();
  char *text = kn_calibration_to_text(good);
  size_t len = strlen(text);
  for (size_t k = 0; k + 1 < len; k++) { /* len - 1: all but the last newline */
    kn_status st = kn_calibration_parse(text, k, "f", &c, &err);
    if (st == KN_OK) fail_msg("a prefix of %zu of %zu bytes was accepted", k, len);
    assert_int_equal(st, KN_ERR_PARSE);
  }
  assert_int_equal(kn_calibration_parse(text, len, "f", &c, &err), KN_OK);
  kn_calibration_free(c);
  free(text);
  kn_calibration_free(good);
}

/* ---- the calibrator on a model -------------------------------------------- */

static kn_model *load_tinycnn(void) {
  kn_model *m = NULL;
  kn_error err = {0};
  if (kn_model_load(KILN_SOURCE_DIR "/models/tinycnn/model.onnx", &m, &err))
    fail_msg("%s", err.msg);
  return m;
}

static void scaled(const kn_tensor *x, float k, kn_tensor *out) {
  assert_int_equal(kn_tensor_alloc(out, x->dtype, x->rank, x->dims, NULL), KN_OK);
  const float *a = x->data;
  float *b = out->data;
  for (int64_t i = 0; i < kn_tensor_numel(x); i++) b[i] = a[i] * k;
}

static void test_calibrator_tinycnn(void **state) {
  (void)state;
  kn_error err = {0};
  kn_model *m = load_tinycnn();
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.no_optimize = 1;
  bo.tactics = KN_TACTICS_HEURISTIC;
  if (kn_model_build(m, &bo, &err)) fail_msg("%s", err.msg);
  kn_tensor x, x2, x3;
  assert_int_equal(kn_tensor_read_file(KILN_SOURCE_DIR "/models/tinycnn/test_data_set_0/input_0.pb",
                                       &x, NULL, &err), KN_OK);
  scaled(&x, 2.0f, &x2);
  scaled(&x, -0.5f, &x3);
  kn_calib_options o;
  kn_calib_options_init(&o);
  o.threads = 1;
  kn_calibrator *cal;
  assert_int_equal(kn_calibrator_create(m, &o, &cal, &err), KN_OK);
  kn_calibration *t = NULL;
  assert_int_equal(kn_calibrator_finish(cal, KN_CALIB_MINMAX, 0, &t, &err), KN_ERR_MISSING);
  assert_non_null(strstr(err.msg, "no samples"));
  /* a wrong input count or shape records nothing and leaves it usable */
  assert_int_equal(kn_calibrator_add_sample(cal, &x, 2, &err), KN_ERR_INVALID_ARG);
  kn_tensor bad;
  int64_t dims[2] = {3, 5};
  assert_int_equal(kn_tensor_alloc(&bad, KN_DTYPE_F32, 2, dims, NULL), KN_OK);
  assert_int_not_equal(kn_calibrator_add_sample(cal, &bad, 1, &err), KN_OK);
  kn_tensor_release(&bad);
  assert_int_equal(kn_calibrator_sample_count(cal), 0);
  assert_int_equal(kn_calibrator_add_sample(cal, &x, 1, &err), KN_OK);
  assert_int_equal(kn_calibrator_add_sample(cal, &x2, 1, &err), KN_OK);
  assert_int_equal(kn_calibrator_add_sample(cal, &x3, 1, &err), KN_OK);
  assert_int_equal(kn_calibrator_sample_count(cal), 3);
  kn_calibration *tab[4];
  for (int k = 0; k <= KN_CALIB_MSE; k++) {
    if (kn_calibrator_finish(cal, (kn_calib_method)k, 0, &tab[k], &err)) fail_msg("%s", err.msg);
    assert_int_equal(kn_calibration_samples(tab[k]), 3);
  }
  double p;
  assert_int_equal(kn_calibration_method(tab[KN_CALIB_PERCENTILE], &p), KN_CALIB_PERCENTILE);
  assert_true(p == (float)KN_CALIB_DEFAULT_PERCENTILE); /* kept as a float, as in the file */
  /* every float tensor: the input first, then every node output */
  const kn_graph *g = kn_model_ir(m)->graph;
  kn_value_info vi;
  assert_int_equal(kn_model_input_info(m, 0, &vi), KN_OK);
  kn_calib_range r0;
  assert_int_equal(kn_calibration_entry(tab[0], 0, &r0), KN_OK);
  assert_string_equal(r0.name, vi.name);
  /* the input's range is exact: the samples at x1, x2 and x-0.5 */
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < kn_tensor_numel(&x); i++) {
    float v = ((float *)x.data)[i];
    float c[3] = {v, 2 * v, -0.5f * v};
    for (int k = 0; k < 3; k++) lo = fminf(lo, c[k]), hi = fmaxf(hi, c[k]);
  }
  assert_true(r0.min == lo && r0.max == hi && r0.amax == fmaxf(-lo, hi));
  int32_t outputs = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k_out = 0; k_out < g->nodes[i].n_outputs; k_out++) {
      int32_t v = g->nodes[i].outputs[k_out];
      if (v < 0 || g->values[v].type.dtype != KN_DTYPE_F32) continue;
      outputs++;
      kn_calib_range r[4];
      for (int k = 0; k <= KN_CALIB_MSE; k++)
        if (!kn_calibration_get(tab[k], g->values[v].name, &r[k]))
          fail_msg("tensor '%s' (of node '%s') is not in the %s table", g->values[v].name,
                   g->nodes[i].name, kn_calib_method_name((kn_calib_method)k));
      /* min-max is max |x| exactly; the others clip, never widen */
      assert_true(r[0].amax == fmaxf(fabsf(r[0].min), fabsf(r[0].max)));
      for (int k = 1; k <= KN_CALIB_MSE; k++) {
        assert_true(r[k].amax <= r[0].amax);
        assert_true(r[k].min == r[0].min && r[k].max == r[0].max);
      }
    }
  assert_true(outputs >= 5);
  assert_int_equal(kn_calibration_count(tab[0]), outputs + 1);
  for (int k = 0; k <= KN_CALIB_MSE; k++) kn_calibration_free(tab[k]);
  kn_calibrator_free(cal);
  /* an optimized build is refused: its tensors are not the ONNX file's */
  kn_model *opt = load_tinycnn();
  bo.no_optimize = 0;
  if (kn_model_build(opt, &bo, &err)) fail_msg("%s", err.msg);
  assert_int_equal(kn_calibrator_create(opt, NULL, &cal, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "built with optimization"));
  assert_null(cal);
  o.bins = 100;
  assert_int_equal(kn_calibrator_create(m, &o, &cal, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "100 histogram bins; expected 128 to"));
  kn_model_free(opt);
  kn_tensor_release(&x);
  kn_tensor_release(&x2);
  kn_tensor_release(&x3);
  kn_model_free(m);
}

/* A model not built at all runs as imported too. */
static void test_calibrator_unbuilt(void **state) {
  (void)state;
  kn_error err = {0};
  kn_model *m = load_tinycnn();
  kn_tensor x;
  assert_int_equal(kn_tensor_read_file(KILN_SOURCE_DIR "/models/tinycnn/test_data_set_0/input_0.pb",
                                       &x, NULL, &err), KN_OK);
  kn_calibrator *cal;
  assert_int_equal(kn_calibrator_create(m, NULL, &cal, &err), KN_OK);
  if (kn_calibrator_add_sample(cal, &x, 1, &err)) fail_msg("%s", err.msg);
  kn_calibration *t;
  assert_int_equal(kn_calibrator_finish(cal, KN_CALIB_ENTROPY, 0, &t, &err), KN_OK);
  assert_true(kn_calibration_count(t) > 5);
  kn_calibration *t2;
  assert_int_equal(kn_calibrator_finish(cal, KN_CALIB_PERCENTILE, 101, &t2, &err),
                   KN_ERR_INVALID_ARG);
  assert_null(t2);
  kn_calibration_free(t);
  kn_calibrator_free(cal);
  kn_tensor_release(&x);
  kn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uniform),
      cmocka_unit_test(test_gaussian_outliers),
      cmocka_unit_test(test_entropy_direct),
      cmocka_unit_test(test_entropy_sparse),
      cmocka_unit_test(test_percentile_known),
      cmocka_unit_test(test_histogram_merging),
      cmocka_unit_test(test_edge_histograms),
      cmocka_unit_test(test_cache_round_trip),
      cmocka_unit_test(test_parser_rejects),
      cmocka_unit_test(test_calibrator_tinycnn),
      cmocka_unit_test(test_calibrator_unbuilt),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
