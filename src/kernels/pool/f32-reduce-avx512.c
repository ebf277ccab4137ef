/* Plane reductions for global pooling, AVX-512: 4 zmm partials (64 floats
 * per step), masked tail, fixed combining order. */
#include <immintrin.h>
#include <math.h>

#include "kernels/pool/pool-kernels.h"

static inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static float sum_avx512(const float *x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static float max_avx512(const float *x, int64_t n) {
  __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_max_ps(_mm512_loadu_ps(x + i), a0);
    a1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i < n; i += 16) a0 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i), a0);
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
}

const kn_reduce_fns kn_f32_reduce__avx512 = {sum_avx512, max_avx512};
