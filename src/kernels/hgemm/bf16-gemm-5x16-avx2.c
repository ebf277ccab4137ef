/* bf16 GEMM micro-kernels, AVX2 + FMA (no bf16 arithmetic): tile 5 x 16,
 * bf16 B widened to fp32 by integer shifts (hgemm-impl.h).  Registers: 10
 * accumulators, the two widened B vectors of one half of a pair, one
 * broadcast and the high-half mask: 14 of 16.  The fp32 kernel's 6 x 16
 * needed 17 and gcc kept an accumulator and the mask on the stack: BERT's
 * 128x768x768 ran at 0.5x of kn_sgemm, 0.86x with 5 rows (bench_hgemm,
 * AVX2, 1 thread). */
#include "hgemm-ukernel.h"
#include "hv-avx2.h"

#define HK_BF16 1
#define MR 5
#define HK_TABLE kn_bf16_gemm_ukernel_5x16__avx2
#define HK_TO_HALF NULL

/* VL columns of a k pair (VL uint32 pairs): the even k's values ... */
static inline V hv_bf16_lo(const uint16_t *p) {
  __m256i x = _mm256_loadu_si256((const __m256i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}
/* ... and the odd k's */
static inline V hv_bf16_hi(const uint16_t *p) {
  __m256i x = _mm256_loadu_si256((const __m256i *)p);
  return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int32_t)0xffff0000u)));
}

#include "hgemm-impl.h"
