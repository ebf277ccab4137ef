/* Probe loop for AVX-512-BF16 (probe.h): vdpbf16ps, 16 lanes each adding
 * two bf16 products into fp32, counted as 4 operations a lane. */
#include "probe.h"

#include <immintrin.h>

double kn_probe_dot_bf16__avx512bf16(int64_t iters, float *sink) {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
  __m512 a[KN_PROBE_CHAINS];
  for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_set1_ps((float)j * 0.01f);
  for (int64_t i = 0; i < iters; i++)
    for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_dpbf16_ps(a[j], x, y);
  __m512 s = a[0];
  for (int j = 1; j < KN_PROBE_CHAINS; j++) s = _mm512_add_ps(s, a[j]);
  *sink += _mm512_reduce_add_ps(s);
  return (double)iters * KN_PROBE_CHAINS * 16 * 4;
}
