/*
 * Channels-last Winograd F(4x4, 3x3) transforms for AVX-512: 16 channels
 * per zmm, the channel tail by masked loads and stores (winograd-nhwc-impl.h).
 */
#include <immintrin.h>

#include "kernels/conv/winograd-nhwc.h"

typedef __m512 V;
#define VL 16
#define KN_WGN_TABLE kn_f32_winograd_nhwc_f43__avx512

static inline V v_zero(void) { return _mm512_setzero_ps(); }
static inline V v_set1(float f) { return _mm512_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_ldn(const float *p, int n) {
  return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
}
static inline void v_stn(float *p, V v, int n) {
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v);
}
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }

#include "kernels/conv/winograd-nhwc-impl.h"
