/* The vector operations of hgemm-impl.h for AVX2 + FMA + F16C (ymm, 8
 * lanes), included by the *-avx2.c kernel files only. */
#include <immintrin.h>

typedef __m256 V;
#define VL 8

static inline V hv_zero(void) { return _mm256_setzero_ps(); }
static inline V hv_set1(float f) { return _mm256_set1_ps(f); }
static inline V hv_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V hv_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V hv_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V hv_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V hv_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V hv_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void hv_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline __m256i hv_mask(int64_t n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V hv_ldn(const float *p, int64_t n) { return _mm256_maskload_ps(p, hv_mask(n)); }
static inline void hv_stn(float *p, V v, int64_t n) { _mm256_maskstore_ps(p, hv_mask(n), v); }

/* x = fp16-rounded x, to nearest even (vcvtps2ph then vcvtph2ps: the
 * values of kn_f32_to_f16 / kn_f16_to_f32); the tail masked.  A packed A
 * block's rounding for round_a. */
static inline void hv_round_half(float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                            _MM_FROUND_TO_NEAREST_INT)));
  if (i < n) {
    __m256i m = hv_mask(n - i);
    __m128i h = _mm256_cvtps_ph(_mm256_maskload_ps(x + i, m), _MM_FROUND_TO_NEAREST_INT);
    _mm256_maskstore_ps(x + i, m, _mm256_cvtph_ps(h));
  }
}
