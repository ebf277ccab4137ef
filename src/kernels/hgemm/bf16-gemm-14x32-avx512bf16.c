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
  int64_t p = 0;
  if (split > 1)
    for (; p + split <= pairs; p += split) {
#pragma GCC unroll 4
      for (int q = 0; q < split; q++) {
        __m512i b0 = _mm512_loadu_si512((const void *)b);
        __m512i b1 = _mm512_loadu_si512((const void *)(b + NR));
#pragma GCC unroll 14
        for (int r = 0; r < mr; r++) {
          __m512i av = _mm512_set1_epi32((int32_t)a[r]);
          c0[q][r] = dot(c0[q][r], av, b0);
          c1[q][r] = dot(c1[q][r], av, b1);
        }
        a += as;
        b += 2 * NR;
      }
    }
  for (; p < pairs; p++) {
    __m512i b0 = _mm512_loadu_si512((const void *)b);
    __m512i b1 = _mm512_loadu_si512((const void *)(b + NR));
    if (mr > 2) __builtin_prefetch(b + PF_P * 2 * NR, 0, 3);
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512i av = _mm512_set1_epi32((int32_t)a[r]);
      c0[0][r] = dot(c0[0][r], av, b0);
      c1[0][r] = dot(c1[0][r], av, b1);
    }
    a += as;
    b += 2 * NR;
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

const kn_hgemm_ukernels kn_bf16_gemm_ukernel_14x32__avx512bf16 = {
    MR,
    NR,
    true,
    {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7, ukernel_8,
     ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14},
    NULL,
    NULL,
};
