/* bf16 GEMM micro-kernels, AVX-512 F without AVX512_BF16 (Skylake-X, Ice
 * Lake): tile 12 x 32, bf16 B widened to fp32 by integer shifts
 * (hgemm-impl.h).  12 rows, not the fp32 kernel's 14: 24 accumulators,
 * two widened B vectors, the raw pair vectors they come from, a broadcast
 * and the mask stay within the 32 zmm registers.  Machines with
 * AVX512_BF16 run bf16-gemm-14x32-avx512bf16.c instead (same packed B). */
#include "hgemm-ukernel.h"
#include "hv-avx512.h"

#define HK_BF16 1
#define MR 12
#define HK_TABLE kn_bf16_gemm_ukernel_12x32__avx512
#define HK_TO_HALF NULL

static inline V hv_bf16_lo(const uint16_t *p) {
  __m512i x = _mm512_loadu_si512((const void *)p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
}
static inline V hv_bf16_hi(const uint16_t *p) {
  __m512i x = _mm512_loadu_si512((const void *)p);
  return _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int32_t)0xffff0000u)));
}

#include "hgemm-impl.h"
