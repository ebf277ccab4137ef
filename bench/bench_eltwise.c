/* GB/s of the vectorised elementwise kernels on real shapes, next to
 * scalar loops written like the reference ops' (src/ops).  Not part of the
 * build; compile against a build's static library:
 *   cc -O3 -Iinclude -Isrc bench/bench_eltwise.c build/libkiln.a \
 *      $(pkg-config --libs libprotobuf-c libxxhash) -lm -lpthread -o /tmp/bench_eltwise
 * Bytes counted: one read and one write of the tensor (the least any
 * implementation moves).  Best of 7 runs of a batch of iterations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "kernels/eltwise/eltwise.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void ref_relu(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? 0 : x[i];
}
static void ref_gelu(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}
static void ref_softmax(const float *x, float *y, int64_t rows, int64_t len) {
  for (int64_t o = 0; o < rows; o++) {
    const float *xr = x + o * len;
    float *yr = y + o * len, m = xr[0], s = 0;
    for (int64_t l = 1; l < len; l++) if (xr[l] > m) m = xr[l];
    for (int64_t l = 0; l < len; l++) s += yr[l] = expf(xr[l] - m);
    float inv = 1 / s;
    for (int64_t l = 0; l < len; l++) yr[l] *= inv;
  }
}
static void ref_ln(const float *x, float *y, int64_t rows, int64_t len, const float *sc,
                   const float *bi) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * len;
    float *yr = y + r * len;
    double s = 0, v = 0;
    for (int64_t j = 0; j < len; j++) s += xr[j];
    double mean = s / (double)len;
    for (int64_t j = 0; j < len; j++) v += (xr[j] - mean) * (xr[j] - mean);
    float m = (float)mean, iv = (float)(1.0 / sqrt(v / (double)len + 1e-5));
    for (int64_t j = 0; j < len; j++) yr[j] = (xr[j] - m) * iv * sc[j] + bi[j];
  }
}

typedef struct bench {
  const char *name;
  int64_t rows, len;
} bench;

static double run(int which, int fast, kn_rt *rt, const float *x, float *y, int64_t rows,
                  int64_t len, const float *sc, const float *bi) {
  int64_t n = rows * len;
  int iters = (int)(2e8 / (double)n / (which == 1 ? 8 : 1)) + 1;
  double best = 1e30;
  for (int rep = 0; rep < 7; rep++) {
    double t0 = now();
    for (int it = 0; it < iters; it++) {
      switch (which) {
      case 0: fast ? kn_ew_unary(rt, KN_ACT_RELU, NULL, x, y, n) : ref_relu(x, y, n); break;
      case 1: fast ? kn_ew_unary(rt, KN_ACT_GELU, NULL, x, y, n) : ref_gelu(x, y, n); break;
      case 2: fast ? kn_ew_softmax(rt, x, y, rows, len, 1, false) : ref_softmax(x, y, rows, len); break;
      default:
        fast ? kn_ew_norm(rt, x, y, rows, len, 1e-5, 1, 1, 0, sc, bi, NULL, NULL)
             : ref_ln(x, y, rows, len, sc, bi);
      }
    }
    double t = (now() - t0) / iters;
    if (t < best) best = t;
  }
  return best;
}

int main(void) {
  static const bench benches[] = {{"relu 1x256x56x56", 256, 56 * 56},
                                  {"gelu 128x3072", 128, 3072},
                                  {"softmax 12x128x128", 12 * 128, 128},
                                  {"layernorm 128x768", 128, 768}};
  kn_rt rt = {.isa = kn_isa_detect(kn_cpu_features())};
  float *sc = malloc(3072 * sizeof *sc), *bi = malloc(3072 * sizeof *bi);
  for (int i = 0; i < 3072; i++) sc[i] = 1.0f + 0.001f * (float)i, bi[i] = 0.01f * (float)(i % 7);
  printf("isa %s, 1 thread\n", kn_isa_name(rt.isa));
  for (int b = 0; b < 4; b++) {
    int64_t n = benches[b].rows * benches[b].len;
    float *x = aligned_alloc(64, (size_t)n * 4), *y = aligned_alloc(64, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 37) % 1001) * 0.006f - 3.0f;
    double tr = run(b, 0, NULL, x, y, benches[b].rows, benches[b].len, sc, bi);
    double tf = run(b, 1, &rt, x, y, benches[b].rows, benches[b].len, sc, bi);
    double bytes = 8.0 * (double)n;
    printf("%-20s reference %8.1f us %6.1f GB/s   fast %8.1f us %6.1f GB/s   x%.1f\n",
           benches[b].name, tr * 1e6, bytes / tr * 1e-9, tf * 1e6, bytes / tf * 1e-9, tr / tf);
    free(x);
    free(y);
  }
  free(sc);
  free(bi);
  free(rt.scratch);
  return 0;
}
