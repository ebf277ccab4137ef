/*
 * Channels-last Winograd F(4x4, 3x3) transforms for AVX2 + FMA: 8 channels
 * per ymm, the channel tail by vmaskmov loads and stores
 * (winograd-nhwc-impl.h).  The input transform writes the 6-row panels of
 * the 6x16 GEMM (f32-gemm-6x16-avx2.c) through an 8x8 transpose of 8
 * staged rows (6 tiles, 2 zero rows).
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

#define WGN_MR 6
#define WGN_MRP 8

/* dst[l * 6 + r] = t[r * 8 + l], l < n, r < 6 (8x8 transpose). */
static inline void wgn_store_panel(const float *t, float *dst, int n) {
  __m256 r[8], a[8], u[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_load_ps(t + 8 * i);
  for (int i = 0; i < 4; i++) {
    a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* u[4i + k], 128-bit lane j: column 4j + k, rows 4i .. 4i + 3 */
  for (int i = 0; i < 2; i++) {
    u[4 * i] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0xEE);
  }
  const __m256i rows = tail_mask(WGN_MR);
  for (int k = 0; k < 4; k++) {
    if (k < n) _mm256_maskstore_ps(dst + k * WGN_MR, rows, _mm256_permute2f128_ps(u[k], u[4 + k], 0x20));
    if (4 + k < n)
      _mm256_maskstore_ps(dst + (4 + k) * WGN_MR, rows, _mm256_permute2f128_ps(u[k], u[4 + k], 0x31));
  }
}

#include "kernels/conv/winograd-nhwc-impl.h"
