/*
 * Channels-last Winograd F(4x4, 3x3) transforms for AVX2 + FMA: 8 channels
 * per ymm, the channel tail by vmaskmov loads and stores
 * (winograd-nhwc-impl.h).
 */
#include <immintrin.h>

#include "kernels/conv/winograd-nhwc.h"

typedef __m256 V;
#define VL 8
#define KN_WGN_TABLE kn_f32_winograd_nhwc_f43__avx2

static inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V v_zero(void) { return _mm256_setzero_ps(); }
static inline V v_set1(float f) { return _mm256_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_ldn(const float *p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
static inline void v_stn(float *p, V v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }

#include "kernels/conv/winograd-nhwc-impl.h"
