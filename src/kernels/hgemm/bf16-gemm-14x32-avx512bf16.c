/*
 * bf16 GEMM micro-kernels, AVX-512 + AVX512_BF16: tile 14 x 32 on
 * vdpbf16ps (compiled with -mavx512bf16; run only when the CPU has it:
 * kn_hgemm_bf16_dot).
 *
 * One vdpbf16ps multiplies 16 lanes of bf16 pairs and adds both products
 * to 16 fp32 accumulators: with A packed as pairs (hgemm-ukernel.h: one
 * uint32 per row per k pair, broadcast) and B in k pairs (hgemm.h), a
 * 32-column B pair row is two zmm, and a tile is the fp32 kernel's 28
 * accumulators + 2 B vectors + 1 broadcast = 31 registers, for twice the
 * depth per instruction.  Tiles of 1 or 2 rows split the pairs over 4 or
 * 2 partial sums (fixed order) to hide the latency, as elsewhere.
 *
 * A is packed here too (hgemm-ukernel.h's pack_a): in chunks of KCP = 16
 * pairs, row r's 64 bytes per chunk at r * 64, converted from fp32 32
 * values at a time (vcvtne2ps2bf16, or kn_f32_to_bf16's integer rounding
 * where a NaN or denormal is among them: the same bits either way) and
 * stored as whole rows: the driver's portable packer converted one value
 * at a time and interleaved the rows pair by pair, which on BERT's
 * 128x768x3072 took about a quarter of the time and on n = 64 most of it.
 *
 * Numerics (hgemm.h): the products of bf16 values are exact in fp32; the
 * instruction adds a pair's two to the accumulator (round to nearest
 * even, bf16 denormals read as zero, fp32 denormal results flushed), so
 * results differ from the AVX2 and portable kernels in the order of
 * additions only.
 */
#include <immintrin.h>

#include "hgemm-ukernel.h"
#include "hv-avx512.h"

#define MR 14
#define NR 32
/* B prefetched PF_P pairs ahead (4 KiB of a packed panel; the fp32
 * kernel's PF_K reason) on tiles of 3 rows and more */
#define PF_P 32
#define KCP 16 /* pairs per A chunk */

static inline __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

static inline __attribute__((always_inline)) void
ukernel(const int mr, const int split, int64_t kc, const uint32_t *restrict a, int64_t as,
        const uint16_t *restrict b, float *restrict c, int64_t ldc, int64_t nr,
        const kn_sgemm_ustore *s) {
  __m512 c0[4][MR], c1[4][MR];
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) c0[q][r] = c1[q][r] = _mm512_setzero_ps();
  const int64_t pairs = (kc + 1) / 2; /* an odd kc's last pair: zeros in both halves */
  (void)as;
  /* one chunk of A (mr rows of KCP pairs, MR * KCP apart) per pass of
   * the outer loop */
  for (int64_t p0 = 0; p0 < pairs; p0 += KCP, a += MR * KCP) {
    const int64_t pe = pairs - p0 < KCP ? pairs - p0 : KCP;
    const uint32_t *ap = a;
    int64_t p = 0;
    if (split > 1)
      for (; p + split <= pe; p += split) {
#pragma GCC unroll 4
        for (int q = 0; q < split; q++) {
          __m512i b0 = _mm512_loadu_si512((const void *)b);
          __m512i b1 = _mm512_loadu_si512((const void *)(b + NR));
#pragma GCC unroll 14
          for (int r = 0; r < mr; r++) {
            __m512i av = _mm512_set1_epi32((int32_t)ap[r * KCP]);
            c0[q][r] = dot(c0[q][r], av, b0);
            c1[q][r] = dot(c1[q][r], av, b1);
          }
          ap++;
          b += 2 * NR;
        }
      }
    for (; p < pe; p++) {
      __m512i b0 = _mm512_loadu_si512((const void *)b);
      __m512i b1 = _mm512_loadu_si512((const void *)(b + NR));
      if (mr > 2) __builtin_prefetch(b + PF_P * 2 * NR, 0, 3);
#pragma GCC unroll 14
      for (int r = 0; r < mr; r++) {
        __m512i av = _mm512_set1_epi32((int32_t)ap[r * KCP]);
        c0[0][r] = dot(c0[0][r], av, b0);
        c1[0][r] = dot(c1[0][r], av, b1);
      }
      ap++;
      b += 2 * NR;
    }
  }
  if (split == 4)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm512_add_ps(_mm512_add_ps(c0[0][r], c0[1][r]),
                               _mm512_add_ps(c0[2][r], c0[3][r]));
      c1[0][r] = _mm512_add_ps(_mm512_add_ps(c1[0][r], c1[1][r]),
                               _mm512_add_ps(c1[2][r], c1[3][r]));
    }
  else if (split == 2)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm512_add_ps(c0[0][r], c0[1][r]);
      c1[0][r] = _mm512_add_ps(c1[0][r], c1[1][r]);
    }

  /* the store: hgemm-impl.h's, on zmm */
  const bool full = nr >= NR;
  const V alpha = hv_set1(s->alpha), lo = hv_set1(s->lo), hi = hv_set1(s->hi);
  V bc0 = hv_zero(), bc1 = hv_zero();
  if (s->bias_col) {
    bc0 = hv_ldn(s->bias_col, nr);
    bc1 = hv_ldn(s->bias_col + VL, nr - VL);
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    V v0 = c0[0][r], v1 = c1[0][r];
    float *cr = c + r * ldc;
    if (s->scale) {
      v0 = hv_mul(v0, alpha);
      v1 = hv_mul(v1, alpha);
    }
    if (s->accumulate) {
      if (full) {
        v0 = hv_add(v0, hv_ld(cr));
        v1 = hv_add(v1, hv_ld(cr + VL));
      } else {
        v0 = hv_add(v0, hv_ldn(cr, nr));
        v1 = hv_add(v1, hv_ldn(cr + VL, nr - VL));
      }
    }
    if (s->bias_row) {
      V br = hv_set1(s->bias_row[r]);
      v0 = hv_add(v0, br);
      v1 = hv_add(v1, br);
    }
    if (s->bias_col) {
      v0 = hv_add(v0, bc0);
      v1 = hv_add(v1, bc1);
    }
    if (s->res) {
      const float *rr = s->res + r * s->ldr;
      v0 = hv_add(v0, hv_ldn(rr, nr));
      v1 = hv_add(v1, hv_ldn(rr + VL, nr - VL));
    }
    if (s->clamp) {
      v0 = hv_min(hv_max(v0, lo), hi);
      v1 = hv_min(hv_max(v1, lo), hi);
    }
    if (full) {
      hv_st(cr, v0);
      hv_st(cr + VL, v1);
    } else {
      hv_stn(cr, v0, nr);
      hv_stn(cr + VL, v1, nr - VL);
    }
  }
}

#define UK(R, S)                                                                      \
  static void ukernel_##R(int64_t kc, const void *a, int64_t as, const void *b,      \
                          float *c, int64_t ldc, int64_t nr, const kn_sgemm_ustore *s, \
                          const float *cs) {                                            \
    (void)cs; /* bf16: no column scales */                                              \
    ukernel(R, S, kc, (const uint32_t *)a, as, (const uint16_t *)b, c, ldc, nr, s);     \
  }
UK(1, 4)
UK(2, 2)
UK(3, 1)
UK(4, 1)
UK(5, 1)
UK(6, 1)
UK(7, 1)
UK(8, 1)
UK(9, 1)
UK(10, 1)
UK(11, 1)
UK(12, 1)
UK(13, 1)
UK(14, 1)
#undef UK

/* 16 fp32 -> bf16 as kn_f32_to_bf16: NaN quietened (bit 6 of the bf16),
 * else round to nearest even by integer addition; in the low 16 bits of
 * each lane. */
static inline __m512i bf16x16(__m512i x) {
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)),
                       _mm512_and_si512(hi, _mm512_set1_epi32(1))),
      16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
}

/* One panel: `rows` (<= MR) rows of A (fp32, or bf16 when half; row
 * stride lda elements, at the block's first depth step), kc depth steps,
 * in chunks of KCP pairs: row r's pairs [c*KCP, c*KCP + KCP) at
 * dst + (c*MR + r) * KCP (uint32), zero past kc and for rows >= `rows`. */
static void pack_a(const void *a, int64_t lda, bool half, int64_t rows, int64_t kc, void *dst) {
  const int64_t chunks = ((kc + 1) / 2 + KCP - 1) / KCP;
  /* row by row: a row of A is read in address order (one stream; rows of
   * a plain matrix follow each other), the 64-byte stores scatter in L1 */
  for (int64_t r = 0; r < MR; r++) {
    uint32_t *d = (uint32_t *)dst + r * KCP;
    for (int64_t c = 0; c < chunks; c++, d += MR * KCP) {
      const int64_t k0 = c * 2 * KCP;
      const int64_t left = kc - k0;
      const __mmask16 m0 = hv_mask(left), m1 = hv_mask(left - 16);
      __m512i v = _mm512_setzero_si512();
      if (r < rows && half) {
        const uint16_t *src = (const uint16_t *)a + r * lda + k0;
        v = _mm512_maskz_loadu_epi16(_cvtu32_mask32((uint32_t)m0 | (uint32_t)m1 << 16), src);
      } else if (r < rows) {
        const float *src = (const float *)a + r * lda + k0;
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, src), x1 = _mm512_maskz_loadu_ps(m1, src + 16);
        /* vcvtne2ps2bf16 rounds to nearest even as kn_f32_to_bf16 does but
         * reads fp32 denormals as zero and has its own NaN bits: lanes of
         * those classes (fpclass: QNaN, SNaN, denormal) take the integer
         * rounding */
        if (_mm512_fpclass_ps_mask(x0, 0xa1) | _mm512_fpclass_ps_mask(x1, 0xa1)) {
          const __m256i lo = _mm512_cvtepi32_epi16(bf16x16(_mm512_castps_si512(x0)));
          const __m256i hi = _mm512_cvtepi32_epi16(bf16x16(_mm512_castps_si512(x1)));
          v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        } else {
          v = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
        }
      }
      _mm512_storeu_si512(d, v);
    }
  }
}

const kn_hgemm_ukernels kn_bf16_gemm_ukernel_14x32__avx512bf16 = {
    .mr = MR,
    .nr = NR,
    .a_pairs = true,
    .fn = {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,
           ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14},
    .pair_chunk = KCP,
    .pack_a = pack_a,
};
