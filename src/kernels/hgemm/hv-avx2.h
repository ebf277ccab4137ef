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
