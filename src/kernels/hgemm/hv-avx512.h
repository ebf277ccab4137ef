/* The vector operations of hgemm-impl.h for AVX-512 F (zmm, 16 lanes),
 * included by the *-avx512.c kernel files only. */
#include <immintrin.h>

typedef __m512 V;
#define VL 16

static inline V hv_zero(void) { return _mm512_setzero_ps(); }
static inline V hv_set1(float f) { return _mm512_set1_ps(f); }
static inline V hv_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V hv_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V hv_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V hv_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V hv_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V hv_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void hv_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline __mmask16 hv_mask(int64_t n) {
  return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}
static inline V hv_ldn(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(hv_mask(n), p); }
static inline void hv_stn(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, hv_mask(n), v); }
