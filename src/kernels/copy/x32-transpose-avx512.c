/* 4-byte 2-D transpose with AVX-512: 16 x 16 tiles held in 16 zmm
 * registers, transposed in 4 shuffle stages (32-bit unpack, 64-bit unpack,
 * then two 128-bit lane shuffles: 64 shuffles per 256 elements).  Partial
 * tiles at the edges use masked loads and stores, so any size runs in the
 * same loop; three rows into one dense interleaved row (NCHW -> NHWC of an
 * RGB image) have a permute path of their own. */
#include <immintrin.h>

#include "copy.h"

static inline void tr16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* r[4g + k]: rows 4g..4g+3, column 4L + k in 128-bit lane L */
  for (int g = 0; g < 4; g++) {
    __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  /* a 4 x 4 transpose of 128-bit lanes across r[k], r[4+k], r[8+k], r[12+k] */
  for (int k = 0; k < 4; k++) {
    __m512 u0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44);
    __m512 u1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    __m512 u2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
    __m512 u3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    t[k] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    t[8 + k] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

static inline __mmask16 mask_n(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* Three rows into one interleaved row (dst[3c + r] = row r [c]: NCHW ->
 * NHWC of an RGB image) for 16 columns: two two-source permutes per 16
 * outputs instead of a 16 x 16 transpose and 16 three-element stores. */
static int64_t interleave3(const float *s, int64_t lds, float *d, int64_t cols) {
  __m512i i1[3], i2[3];
  for (int j = 0; j < 3; j++) {
    int32_t a[16], b[16];
    for (int e = 0; e < 16; e++) {
      int g = 16 * j + e, p = g / 3, r = g % 3;
      a[e] = r == 0 ? p : r == 1 ? 16 + p : 0;
      b[e] = r == 2 ? 16 + p : e;
    }
    i1[j] = _mm512_loadu_si512(a);
    i2[j] = _mm512_loadu_si512(b);
  }
  int64_t c0 = 0;
  for (; c0 + 16 <= cols; c0 += 16) {
    __m512 x = _mm512_loadu_ps(s + c0), y = _mm512_loadu_ps(s + lds + c0),
           z = _mm512_loadu_ps(s + 2 * lds + c0);
    for (int j = 0; j < 3; j++)
      _mm512_storeu_ps(d + 3 * c0 + 16 * j,
                       _mm512_permutex2var_ps(_mm512_permutex2var_ps(x, i1[j], y), i2[j], z));
  }
  return c0;
}

void kn_x32_transpose__avx512(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd,
                              int64_t rows, int64_t cols) {
  /* the elements are only moved: float loads and shuffles keep every bit */
  const float *s = (const float *)src;
  float *d = (float *)dst;
  if (rows == 3 && ldd == 3) {
    int64_t done = interleave3(s, lds, d, cols);
    s += done;
    d += 3 * done;
    cols -= done;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    int64_t nr = rows - r0 < 16 ? rows - r0 : 16;
    __mmask16 mr = mask_n(nr);
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      int64_t nc = cols - c0 < 16 ? cols - c0 : 16;
      __m512 v[16];
      if (nr == 16 && nc == 16) {
        for (int i = 0; i < 16; i++) v[i] = _mm512_loadu_ps(s + (r0 + i) * lds + c0);
        tr16(v);
        for (int i = 0; i < 16; i++) _mm512_storeu_ps(d + (c0 + i) * ldd + r0, v[i]);
        continue;
      }
      __mmask16 mc = mask_n(nc);
      for (int i = 0; i < 16; i++)
        v[i] = i < nr ? _mm512_maskz_loadu_ps(mc, s + (r0 + i) * lds + c0) : _mm512_setzero_ps();
      tr16(v);
      for (int i = 0; i < nc; i++) _mm512_mask_storeu_ps(d + (c0 + i) * ldd + r0, mr, v[i]);
    }
  }
}
