/* fp16-weight GEMM micro-kernels, AVX-512 F: tile 14 x 32 with fp32 A
 * (hgemm-impl.h; the fp32 kernel's tile: 28 accumulators, 2 B vectors
 * converted by vcvtph2ps zmm from memory, 1 broadcast). */
#include "hgemm-ukernel.h"
#include "hv-avx512.h"

#define HK_F16 1
#define MR 14
#define HK_TABLE kn_f16_gemm_ukernel_14x32__avx512

static inline V hv_f16(const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* vcvtps2ph zmm, round to nearest even; the tail masked */
static void to_half(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(y + i, m, h);
  }
}
#define HK_TO_HALF to_half
#define HK_ROUND_HALF hv_round_half

#include "hgemm-impl.h"
