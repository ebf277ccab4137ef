/*
 * Channels-last Winograd F(4x4, 3x3) transforms for AVX-512: 16 channels
 * per zmm, the channel tail by masked loads and stores (winograd-nhwc-impl.h).
 * The input transform writes the 14-row panels of the 14x32 GEMM
 * (f32-gemm-14x32-avx512.c) through a 16x16 transpose of 16 staged rows
 * (14 tiles and 2 zero rows): 64 shuffles per 256 values, against the
 * GEMM's scalar repacking of a row-major V (a quarter of the products'
 * time on 64 channels).
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

#define WGN_MR 14
#define WGN_MRP 16

/* dst[l * 14 + r] = t[r * 16 + l], l < n, r < 14 (16x16 transpose). */
static inline void wgn_store_panel(const float *t, float *dst, int n) {
  __m512 r[16], a[16], u[16];
  for (int i = 0; i < 16; i++) r[i] = _mm512_load_ps(t + 16 * i);
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* u[4i + k], 128-bit lane j: column 4j + k, rows 4i .. 4i + 3 */
  for (int i = 0; i < 4; i++) {
    __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
    __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  const __mmask16 rows = (__mmask16)((1u << WGN_MR) - 1u);
  for (int k = 0; k < 4; k++) {
    __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44);
    __m512 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
    __m512 w0 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44);
    __m512 w1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
    __m512 o[4] = {_mm512_shuffle_f32x4(v0, w0, 0x88), _mm512_shuffle_f32x4(v0, w0, 0xDD),
                   _mm512_shuffle_f32x4(v1, w1, 0x88), _mm512_shuffle_f32x4(v1, w1, 0xDD)};
    for (int j = 0; j < 4; j++)
      if (4 * j + k < n) _mm512_mask_storeu_ps(dst + (4 * j + k) * WGN_MR, rows, o[j]);
  }
}

#include "kernels/conv/winograd-nhwc-impl.h"
