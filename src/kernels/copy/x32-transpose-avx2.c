/* 4-byte 2-D transpose with AVX2: 8 x 8 tiles in 8 ymm registers
 * (32-bit unpack, 64-bit shuffle, 128-bit permute: 24 shuffles per 64
 * elements).  Edge tiles, where a full 8-wide load would leave the
 * matrix, go element by element. */
#include <immintrin.h>

#include "copy.h"

static inline void tr8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; g++) {
    s[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int k = 0; k < 4; k++) {
    r[k] = _mm256_permute2f128_ps(s[k], s[4 + k], 0x20);
    r[4 + k] = _mm256_permute2f128_ps(s[k], s[4 + k], 0x31);
  }
}

void kn_x32_transpose__avx2(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd,
                            int64_t rows, int64_t cols) {
  const float *s = (const float *)src;
  float *d = (float *)dst;
  int64_t rf = rows & ~(int64_t)7, cf = cols & ~(int64_t)7;
  for (int64_t r0 = 0; r0 < rf; r0 += 8)
    for (int64_t c0 = 0; c0 < cf; c0 += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps(s + (r0 + i) * lds + c0);
      tr8(v);
      for (int i = 0; i < 8; i++) _mm256_storeu_ps(d + (c0 + i) * ldd + r0, v[i]);
    }
  /* edges: columns past cf for every row, rows past rf for the rest */
  for (int64_t c = cf; c < cols; c++)
    for (int64_t r = 0; r < rows; r++) dst[c * ldd + r] = src[r * lds + c];
  for (int64_t c = 0; c < cf; c++)
    for (int64_t r = rf; r < rows; r++) dst[c * ldd + r] = src[r * lds + c];
}
