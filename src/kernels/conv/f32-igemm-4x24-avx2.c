/*
 * Indirect-GEMM micro-kernels for conv_igemm_nhwc, AVX2 + FMA: tiles of up
 * to 4 output pixels x 24 output channels (3 ymm).
 *
 * Why 4 x 24: 12 accumulators + 3 weight vectors + 1 broadcast = 16 ymm.
 * Per depth step: 12 FMAs against 3 vector loads and 4 broadcasts (7 loads
 * per 12 FMAs; a 6 x 16 tile needs 8 per 12), and 4 row pointers.  The 8-
 * and 16-column variants serve channel tails (at most 7 lanes wasted).
 */
#include <immintrin.h>

typedef __m256 V;
#define VL 8
#define MR 4
#define NV 3
#define KN_IGEMM_TABLE kn_f32_igemm_ukernel_4x24__avx2

static inline V v_zero(void) { return _mm256_setzero_ps(); }
static inline V v_set1(float f) { return _mm256_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline __m256i v_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V v_ldn(const float *p, int64_t n) {
  return n == VL ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, v_mask(n));
}
static inline void v_stn(float *p, V v, int64_t n) {
  if (n == VL) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, v_mask(n), v);
}

#include "kernels/conv/igemm-impl.h"

#define ROWS(N)                                                                            \
  KN_IGEMM_FN(1, N)                                                                        \
  KN_IGEMM_FN(2, N)                                                                        \
  KN_IGEMM_FN(3, N)                                                                        \
  KN_IGEMM_FN(4, N)
ROWS(1)
ROWS(2)
ROWS(3)
#undef ROWS

#define ROWS(N) {igemm_1x##N, igemm_2x##N, igemm_3x##N, igemm_4x##N}
const kn_igemm_ukernels KN_IGEMM_TABLE = {MR, MR, VL, NV, {ROWS(1), ROWS(2), ROWS(3)}};
