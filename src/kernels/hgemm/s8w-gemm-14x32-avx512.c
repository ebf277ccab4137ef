/* int8-weight GEMM micro-kernels (S8W), AVX-512 F: tile 14 x 32 with fp32
 * A (hgemm-impl.h; the fp16 kernel's tile): per depth step two 16-byte
 * loads of B, sign-extended by vpmovsxbd zmm and converted by vcvtdq2ps
 * (exact), into the 2 B registers; 28 accumulators, 1 broadcast. */
#include "hgemm-ukernel.h"
#include "hv-avx512.h"

#define HK_S8 1
#define MR 14
#define HK_TABLE kn_s8w_gemm_ukernel_14x32__avx512
#define HK_TO_HALF NULL
#define HK_ROUND_HALF hv_round_half

static inline V hv_s8(const int8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

#include "hgemm-impl.h"
