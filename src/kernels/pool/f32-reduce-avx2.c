/* Plane reductions for global pooling, AVX2: 4 ymm partials (32 floats
 * per step), scalar tail folded into the first partial, fixed combining
 * order. */
#include <immintrin.h>
#include <math.h>

#include "kernels/pool/pool-kernels.h"

static float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static float sum_avx2(const float *x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; i++) s += x[i];
  return s;
}

static float max_avx2(const float *x, int64_t n) {
  __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_max_ps(_mm256_loadu_ps(x + i), a0);
    a1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_max_ps(_mm256_loadu_ps(x + i), a0);
  float m = hmax(_mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

const kn_reduce_fns kn_f32_reduce__avx2 = {sum_avx2, max_avx2};
