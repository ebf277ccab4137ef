/* int8-weight GEMM micro-kernels (S8W), AVX2 + FMA: tile 6 x 16 with fp32
 * A (hgemm-impl.h; the fp16 kernel's tile): per depth step two 8-byte
 * loads of B, sign-extended by vpmovsxbd ymm and converted by vcvtdq2ps
 * (exact). */
#include "hgemm-ukernel.h"
#include "hv-avx2.h"

#define HK_S8 1
#define MR 6
#define HK_TABLE kn_s8w_gemm_ukernel_6x16__avx2
#define HK_TO_HALF NULL
#define HK_ROUND_HALF hv_round_half

static inline V hv_s8(const int8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

#include "hgemm-impl.h"
