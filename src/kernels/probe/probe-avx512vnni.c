/* Probe loop for AVX-512-VNNI (probe.h): vpdpbusd, 16 lanes each adding
 * four u8 x s8 products into int32, counted as 8 operations a lane. */
#include "probe.h"

#include <immintrin.h>

double kn_probe_dot_i8__avx512vnni(int64_t iters, int32_t *sink) {
  const __m512i u = _mm512_set1_epi8(3), s8 = _mm512_set1_epi8(-2);
  __m512i a[KN_PROBE_CHAINS];
  for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iters; i++)
    for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_dpbusd_epi32(a[j], u, s8);
  __m512i s = a[0];
  for (int j = 1; j < KN_PROBE_CHAINS; j++) s = _mm512_add_epi32(s, a[j]);
  /* the lanes wrap (as vpdpbusd does); sum them unsigned, not as int */
  uint32_t lanes[16], sum = 0;
  _mm512_storeu_si512(lanes, s);
  for (int j = 0; j < 16; j++) sum += lanes[j];
  *sink ^= (int32_t)(sum & 0x7fffffff);
  return (double)iters * KN_PROBE_CHAINS * 16 * 8;
}
