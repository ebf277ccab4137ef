/* Depthwise convolution kernels (f32-dwconv-impl.h) for AVX-512: 16
 * lanes, k-masks for the borders (masked loads never touch the lanes
 * outside the mask, so border vectors read straight from the tensor). */
#include <immintrin.h>

#include <stdbool.h>
#include <stdint.h>

typedef __m512 V;
typedef __mmask16 M;
#define VN 16
#define DW_ENTRY kn_f32_dwconv_rows__avx512

static inline M m_lanes(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > VN ? VN : hi;
  if (lo >= hi) return 0;
  return (M)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}
static inline M m_and(M a, M b) { return (M)(a & b); }
static inline M m_all(void) { return (M)0xffff; }
static inline M m_none(void) { return (M)0; }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_ld2u(const float *p) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + VN));
}
static inline V v_ldm(const float *p, M m) { return _mm512_maskz_loadu_ps(m, p); }
static inline V v_ld2(const float *p, M m0, M m1) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, p), even,
                                _mm512_maskz_loadu_ps(m1, p + VN));
}
static inline V v_ldg(const float *p, int64_t s, M m) {
  __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                     13, 14, 15),
                                   _mm512_set1_epi32((int32_t)s));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, p, 4);
}
static inline void v_stm(float *p, V v, M m) { _mm512_mask_storeu_ps(p, m, v); }
static inline V v_set(float f) { return _mm512_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }

#include "kernels/conv/f32-dwconv-impl.h"
