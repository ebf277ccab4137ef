/* fp16-weight GEMM micro-kernels, AVX2 + FMA + F16C: tile 6 x 16 with fp32
 * A (hgemm-impl.h); B converted by vcvtph2ps from memory (no extra
 * registers: the fp32 6 x 16 tile's 12 accumulators, 2 B, 1 broadcast). */
#include <string.h>

#include "hgemm-ukernel.h"
#include "hv-avx2.h"

#define HK_F16 1
#define MR 6
#define HK_TABLE kn_f16_gemm_ukernel_6x16__avx2

static inline V hv_f16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* vcvtps2ph, round to nearest even; the tail through a padded buffer, so
 * that every value takes the same instruction. */
static void to_half(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float t[8] = {0};
    uint16_t h[8];
    memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
    memcpy(y + i, h, (size_t)(n - i) * sizeof(uint16_t));
  }
}
#define HK_TO_HALF to_half
#define HK_ROUND_HALF hv_round_half

#include "hgemm-impl.h"
