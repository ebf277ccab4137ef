/* Tap-row kernels (taprows.h) for AVX-512: 4 zmm accumulators (64
 * outputs) per pass, then single vectors with a masked store for the
 * tail.
 * Loads may run past n (the strip is padded to whole vectors). */
#include <immintrin.h>

#include "kernels/conv/taprows.h"

static inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static void max_avx512(const float *const *src, int32_t ntaps, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const float *s = src[0] + i;
    __m512 a0 = _mm512_loadu_ps(s), a1 = _mm512_loadu_ps(s + 16);
    __m512 a2 = _mm512_loadu_ps(s + 32), a3 = _mm512_loadu_ps(s + 48);
    for (int32_t t = 1; t < ntaps; t++) {
      s = src[t] + i;
      a0 = _mm512_max_ps(_mm512_loadu_ps(s), a0);
      a1 = _mm512_max_ps(_mm512_loadu_ps(s + 16), a1);
      a2 = _mm512_max_ps(_mm512_loadu_ps(s + 32), a2);
      a3 = _mm512_max_ps(_mm512_loadu_ps(s + 48), a3);
    }
    _mm512_storeu_ps(y + i, a0);
    _mm512_storeu_ps(y + i + 16, a1);
    _mm512_storeu_ps(y + i + 32, a2);
    _mm512_storeu_ps(y + i + 48, a3);
  }
  for (; i < n; i += 16) {
    __m512 a0 = _mm512_loadu_ps(src[0] + i);
    for (int32_t t = 1; t < ntaps; t++) a0 = _mm512_max_ps(_mm512_loadu_ps(src[t] + i), a0);
    _mm512_mask_storeu_ps(y + i, tail_mask(n - i), a0);
  }
}

static void avg_avx512(const float *const *src, int32_t ntaps, const float *dx, float dy,
                       float *y, int64_t n) {
  __m512 vdy = _mm512_set1_ps(dy);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = tail_mask(n - i);
    __m512 a0 = _mm512_loadu_ps(src[0] + i);
    for (int32_t t = 1; t < ntaps; t++) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(src[t] + i));
    /* masked load: dx holds exactly n values */
    __m512 d = _mm512_mul_ps(vdy, _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), k, dx + i));
    _mm512_mask_storeu_ps(y + i, k, _mm512_div_ps(a0, d));
  }
}

static void deint2_avx512(const float *src, int64_t n, float *even, float *odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 a = _mm512_loadu_ps(src + 2 * j), b = _mm512_loadu_ps(src + 2 * j + 16);
    _mm512_storeu_ps(even + j, _mm512_permutex2var_ps(a, ie, b));
    _mm512_storeu_ps(odd + j, _mm512_permutex2var_ps(a, io, b));
  }
  for (; j < n; j++) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

const kn_taprow_fns kn_f32_taprow__avx512 = {max_avx512, avg_avx512, deint2_avx512};
