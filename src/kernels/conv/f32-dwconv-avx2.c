/* Depthwise convolution kernels (f32-dwconv-impl.h) for AVX2 + FMA: 8
 * lanes, vmaskmovps for the borders (masked-off lanes are not read). */
#include <immintrin.h>

#include <stdbool.h>
#include <stdint.h>

typedef __m256 V;
typedef __m256i M;
#define VN 8
#define DW_ENTRY kn_f32_dwconv_rows__avx2

static inline M m_lanes(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo > VN ? VN : lo;
  hi = hi < 0 ? 0 : hi > VN ? VN : hi;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32((int32_t)lo - 1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)hi), iota));
}
static inline M m_and(M a, M b) { return _mm256_and_si256(a, b); }
static inline M m_all(void) { return _mm256_set1_epi32(-1); }
static inline M m_none(void) { return _mm256_setzero_si256(); }
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_even(__m256 a, __m256 b) {
  /* within each 128-bit half [a0 a2 b0 b2], then the halves in order */
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
}
static inline V v_ld2u(const float *p) { return v_even(_mm256_loadu_ps(p), _mm256_loadu_ps(p + VN)); }
static inline V v_ldm(const float *p, M m) { return _mm256_maskload_ps(p, m); }
static inline V v_ld2(const float *p, M m0, M m1) {
  return v_even(_mm256_maskload_ps(p, m0), _mm256_maskload_ps(p + VN, m1));
}
static inline V v_ldg(const float *p, int64_t s, M m) {
  __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                   _mm256_set1_epi32((int32_t)s));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, idx, _mm256_castsi256_ps(m), 4);
}
static inline void v_stm(float *p, V v, M m) { _mm256_maskstore_ps(p, m, v); }
static inline V v_set(float f) { return _mm256_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }

#include "kernels/conv/f32-dwconv-impl.h"
