/* Probe loops with 256-bit AVX2 + FMA (probe.h). */
#include "probe.h"

#include <immintrin.h>

double kn_probe_fma_f32__avx2(int64_t iters, float *sink) {
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
  __m256 a[KN_PROBE_CHAINS];
  for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm256_set1_ps((float)j * 0.01f);
  for (int64_t i = 0; i < iters; i++)
    for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm256_fmadd_ps(a[j], x, y);
  __m256 s = a[0];
  for (int j = 1; j < KN_PROBE_CHAINS; j++) s = _mm256_add_ps(s, a[j]);
  float v[8];
  _mm256_storeu_ps(v, s);
  *sink += v[0] + v[7];
  return (double)iters * KN_PROBE_CHAINS * 8 * 2;
}

/* Without VNNI an int8 dot product is vpmaddubsw (u8 x s8 pairs to s16)
 * then vpmaddwd against ones (pairs to s32) and vpaddd: 32 products in
 * three instructions, as int8 GEMMs on AVX2 do it. */
double kn_probe_dot_i8__avx2(int64_t iters, int32_t *sink) {
  const __m256i u = _mm256_set1_epi8(3), s8 = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  __m256i a[KN_PROBE_CHAINS];
  for (int j = 0; j < KN_PROBE_CHAINS; j++) a[j] = _mm256_set1_epi32(j);
  __m256i v = u;
  for (int64_t i = 0; i < iters; i++) {
    __asm__("" : "+x"(v)); /* an operand the compiler cannot hoist */
    for (int j = 0; j < KN_PROBE_CHAINS; j++)
      a[j] = _mm256_add_epi32(a[j], _mm256_madd_epi16(_mm256_maddubs_epi16(v, s8), one));
  }
  __m256i s = a[0];
  for (int j = 1; j < KN_PROBE_CHAINS; j++) s = _mm256_add_epi32(s, a[j]);
  *sink ^= _mm256_extract_epi32(s, 0);
  return (double)iters * KN_PROBE_CHAINS * 32 * 2;
}

uint64_t kn_probe_read__avx2(const void *buf, size_t bytes, int64_t reps) {
  __m256i a[8];
  for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_si256();
  for (int64_t r = 0; r < reps; r++) {
    const char *p = buf, *end = p + bytes;
    for (; p < end; p += KN_PROBE_CHUNK)
      for (int j = 0; j < KN_PROBE_CHUNK / 32; j++)
        a[j & 7] = _mm256_xor_si256(a[j & 7], _mm256_load_si256((const __m256i *)(p + 32 * j)));
    __asm__ volatile("" ::: "memory");
  }
  __m256i s = a[0];
  for (int j = 1; j < 8; j++) s = _mm256_xor_si256(s, a[j]);
  return (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
}

void kn_probe_write__avx2(void *buf, size_t bytes, int64_t reps) {
  for (int64_t r = 0; r < reps; r++) {
    const __m256i v = _mm256_set1_epi64x(r);
    char *p = buf, *end = p + bytes;
    for (; p < end; p += KN_PROBE_CHUNK)
      for (int j = 0; j < KN_PROBE_CHUNK / 32; j++) _mm256_store_si256((__m256i *)(p + 32 * j), v);
    __asm__ volatile("" ::: "memory");
  }
}
