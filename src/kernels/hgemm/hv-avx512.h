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

/* x = fp16-rounded x, to nearest even (vcvtps2ph then vcvtph2ps: the
 * values of kn_f32_to_f16 / kn_f16_to_f32); the tail masked.  A packed A
 * block's rounding for round_a. */
static inline void hv_round_half(float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                                                            _MM_FROUND_TO_NEAREST_INT)));
  if (i < n) {
    __mmask16 m = hv_mask(n - i);
    __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(x + i, m, _mm512_cvtph_ps(h));
  }
}
