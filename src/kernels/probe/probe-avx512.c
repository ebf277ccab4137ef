/* Probe loops with 512-bit AVX-512 (probe.h). */
#include "probe.h"

#include <immintrin.h>

double kn_probe_fma_f32__avx512(int64_t iters, float *sink) {
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
  __m512 a[KN_PROBE_CHAINS];
  for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_set1_ps((float)j * 0.01f);
  for (int64_t i = 0; i < iters; i++)
    for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm512_fmadd_ps(a[j], x, y);
  __m512 s = a[0];
  for (int j = 1; j < KN_PROBE_CHAINS; j++) s = _mm512_add_ps(s, a[j]);
  *sink += _mm512_reduce_add_ps(s);
  return (double)iters * KN_PROBE_CHAINS * 16 * 2;
}

uint64_t kn_probe_read__avx512(const void *buf, size_t bytes, int64_t reps) {
  __m512i a[8];
  for (int j = 0; j < 8; j++) a[j] = _mm512_setzero_si512();
  for (int64_t r = 0; r < reps; r++) {
    const char *p = buf, *end = p + bytes;
    for (; p < end; p += KN_PROBE_CHUNK)
      for (int j = 0; j < KN_PROBE_CHUNK / 64; j++)
        a[j] = _mm512_xor_si512(a[j], _mm512_load_si512((const void *)(p + 64 * j)));
    __asm__ volatile("" ::: "memory");
  }
  __m512i s = a[0];
  for (int j = 1; j < 8; j++) s = _mm512_xor_si512(s, a[j]);
  return (uint64_t)_mm512_reduce_or_epi64(s);
}

void kn_probe_write__avx512(void *buf, size_t bytes, int64_t reps) {
  for (int64_t r = 0; r < reps; r++) {
    const __m512i v = _mm512_set1_epi64(r);
    char *p = buf, *end = p + bytes;
    for (; p < end; p += KN_PROBE_CHUNK)
      for (int j = 0; j < KN_PROBE_CHUNK / 64; j++) _mm512_store_si512((void *)(p + 64 * j), v);
    __asm__ volatile("" ::: "memory");
  }
}
