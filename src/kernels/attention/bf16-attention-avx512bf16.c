/*
 * The bf16 product of streamed attention on vdpbf16ps (attention.h,
 * kn_bf16_attention_gemm_fn): both products of a bf16 Attention step,
 * Q.K^T over the head's features and P.V over a key tile.
 *
 * Tile: 6 rows x 64 columns (4 zmm of fp32 accumulators per row, 24 in
 * all), 4 B vectors of 16 column pairs and one broadcast A pair: 29 of
 * the 32 zmm registers, as the fp32 tile of f32-attention-avx512.c.  Each
 * k pair does 24 vdpbf16ps (two products each) for 4 vector loads and 6
 * 32-bit broadcasts.  Columns past the last full vector are masked, rows
 * past the last full 6 use the same code instantiated for 1..5 rows.
 */
#include <immintrin.h>
#include <string.h>

#include "attention-kernels.h"

#define MR 6
#define NV 4
#define UNROLL _Pragma("GCC unroll 8")

static inline uint32_t pair_at(const uint16_t *p) {
  uint32_t x;
  memcpy(&x, p, sizeof x);
  return x;
}

static inline __attribute__((always_inline)) void tile(const int mr, const int nv,
                                                       __mmask16 last, int64_t kp,
                                                       const uint16_t *a, int64_t lda,
                                                       const uint16_t *b, int64_t ldb,
                                                       float *c, int64_t ldc, bool accumulate) {
  __m512 acc[MR][NV];
  UNROLL for (int i = 0; i < mr; i++) UNROLL for (int v = 0; v < nv; v++) acc[i][v] =
      _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p++) {
    __m512i bv[NV];
    const uint16_t *bp = b + p * ldb;
    UNROLL for (int v = 0; v < nv; v++) bv[v] =
        v == nv - 1 ? _mm512_maskz_loadu_epi32(last, bp + 32 * v)
                    : _mm512_loadu_si512((const void *)(bp + 32 * v));
    UNROLL for (int i = 0; i < mr; i++) {
      __m512i ai = _mm512_set1_epi32((int)pair_at(a + i * lda + 2 * p));
      UNROLL for (int v = 0; v < nv; v++) acc[i][v] =
          _mm512_dpbf16_ps(acc[i][v], (__m512bh)ai, (__m512bh)bv[v]);
    }
  }
  UNROLL for (int i = 0; i < mr; i++) {
    float *ci = c + i * ldc;
    UNROLL for (int v = 0; v < nv; v++) {
      __mmask16 mk = v == nv - 1 ? last : (__mmask16)0xffff;
      __m512 x = acc[i][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, ci + 16 * v));
      _mm512_mask_storeu_ps(ci + 16 * v, mk, x);
    }
  }
}

#define TILE_CASE(mr, nv)                                       \
  case (mr - 1) * NV + (nv - 1):                                \
    tile(mr, nv, last, kp, a, lda, b, ldb, c, ldc, accumulate); \
    break;
#define TILE_ROW(mr) TILE_CASE(mr, 1) TILE_CASE(mr, 2) TILE_CASE(mr, 3) TILE_CASE(mr, 4)

static void tile_dispatch(int mr, int nv, __mmask16 last, int64_t kp, const uint16_t *a,
                          int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                          bool accumulate) {
  switch ((mr - 1) * NV + (nv - 1)) {
    TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5) TILE_ROW(6)
  default:
    KN_ASSERT(!"attention tile out of range");
  }
}

static void gemm_bf16(int64_t m, int64_t n, int64_t kp, const uint16_t *a, int64_t lda,
                      const uint16_t *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 16 * NV) {
    int64_t nn = n - j0 < 16 * NV ? n - j0 : 16 * NV;
    int nv = (int)((nn + 15) / 16);
    int rem = (int)(nn - 16 * (nv - 1));
    __mmask16 last = (__mmask16)(rem == 16 ? 0xffff : (1u << rem) - 1);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int mr = (int)(m - i0 < MR ? m - i0 : MR);
      tile_dispatch(mr, nv, last, kp, a + i0 * lda, lda, b + 2 * j0, ldb, c + i0 * ldc + j0,
                    ldc, accumulate);
    }
  }
}

static inline __mmask16 tail_mask(int64_t n) {
  return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
}

static void convert_bf16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 mk = tail_mask(n - i);
    __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, src + i));
    _mm256_mask_storeu_epi16(dst + i, mk, (__m256i)h);
  }
}

/* 16 columns of two rows at a time: each row rounded to 16 halves, the two
 * interleaved by 16-bit unpacks (within 128-bit lanes) and the lanes put
 * back in order. */
static void interleave_bf16(uint16_t *dst, const float *r0, const float *r1, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 mk = tail_mask(n - i);
    __m256i a = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, r0 + i));
    __m256i b = r1 ? (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, r1 + i))
                   : _mm256_setzero_si256();
    __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
    __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)),
                                   _mm256_permute2x128_si256(lo, hi, 0x31), 1);
    _mm512_mask_storeu_epi32(dst + 2 * i, mk, x);
  }
}

const kn_bf16_attention_ukernels kn_bf16_attention_ukernels__avx512bf16 = {
    gemm_bf16, convert_bf16, interleave_bf16};
