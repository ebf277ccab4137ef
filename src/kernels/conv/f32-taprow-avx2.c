/* Tap-row kernels (taprows.h) for AVX2 + FMA: 4 ymm accumulators (32
 * outputs) per pass, then single vectors with a masked store for the
 * tail.  Loads may run past n (the strip is padded to whole vectors). */
#include <immintrin.h>

#include "kernels/conv/taprows.h"

static inline __m256i tail_mask(int64_t left) {
  static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t l = left >= 8 ? 8 : left;
  return _mm256_loadu_si256((const __m256i *)(m + 8 - l));
}

static void max_avx2(const float *const *src, int32_t ntaps, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const float *s = src[0] + i;
    __m256 a0 = _mm256_loadu_ps(s), a1 = _mm256_loadu_ps(s + 8);
    __m256 a2 = _mm256_loadu_ps(s + 16), a3 = _mm256_loadu_ps(s + 24);
    for (int32_t t = 1; t < ntaps; t++) {
      s = src[t] + i;
      a0 = _mm256_max_ps(_mm256_loadu_ps(s), a0);
      a1 = _mm256_max_ps(_mm256_loadu_ps(s + 8), a1);
      a2 = _mm256_max_ps(_mm256_loadu_ps(s + 16), a2);
      a3 = _mm256_max_ps(_mm256_loadu_ps(s + 24), a3);
    }
    _mm256_storeu_ps(y + i, a0);
    _mm256_storeu_ps(y + i + 8, a1);
    _mm256_storeu_ps(y + i + 16, a2);
    _mm256_storeu_ps(y + i + 24, a3);
  }
  for (; i < n; i += 8) {
    __m256 a0 = _mm256_loadu_ps(src[0] + i);
    for (int32_t t = 1; t < ntaps; t++) a0 = _mm256_max_ps(_mm256_loadu_ps(src[t] + i), a0);
    _mm256_maskstore_ps(y + i, tail_mask(n - i), a0);
  }
}

static void avg_avx2(const float *const *src, int32_t ntaps, const float *dx, float dy,
                     float *y, int64_t n) {
  int64_t i = 0;
  __m256 vdy = _mm256_set1_ps(dy);
  for (; i + 8 <= n; i += 8) {
    __m256 a0 = _mm256_loadu_ps(src[0] + i);
    for (int32_t t = 1; t < ntaps; t++) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(src[t] + i));
    _mm256_storeu_ps(y + i, _mm256_div_ps(a0, _mm256_mul_ps(vdy, _mm256_loadu_ps(dx + i))));
  }
  for (; i < n; i++) {
    float a = src[0][i];
    for (int32_t t = 1; t < ntaps; t++) a += src[t][i];
    y[i] = a / (dy * dx[i]);
  }
}

static void deint2_avx2(const float *src, int64_t n, float *even, float *odd) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
    /* within each 128-bit half: [a0 a2 b0 b2], then put the halves in order */
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(even + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8)));
    _mm256_storeu_ps(odd + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xd8)));
  }
  for (; j < n; j++) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

const kn_taprow_fns kn_f32_taprow__avx2 = {max_avx2, avg_avx2, deint2_avx2};
