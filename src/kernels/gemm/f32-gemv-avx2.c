/* One-row products against a raw B (gemv-impl.h), AVX2+FMA: blocks of 12
 * ymm accumulators (96 columns; 16 registers in all). */
#include <immintrin.h>

#include "gemm-ukernel.h"

typedef __m256 V;
#define VL 8
#define GV_NV 12
#define KN_GEMV_FN kn_f32_gemv__avx2

static inline V gv_zero(void) { return _mm256_setzero_ps(); }
static inline V gv_set1(float f) { return _mm256_set1_ps(f); }
static inline V gv_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline V gv_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline void gv_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline __m256i gv_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V gv_ldn(const float *p, int64_t n) { return _mm256_maskload_ps(p, gv_mask(n)); }
static inline void gv_stn(float *p, V v, int64_t n) { _mm256_maskstore_ps(p, gv_mask(n), v); }

#include "gemv-impl.h"
