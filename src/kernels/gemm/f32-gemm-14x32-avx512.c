/*
 * fp32 GEMM micro-kernels, AVX-512: register tile 14 x 32.
 *
 * Why 14 x 32: 32 columns are two zmm, so a tile holds 28 accumulators,
 * plus two B vectors and one broadcast A value = 31 of the 32 zmm
 * registers.  Per k step that is 28 FMAs against 2 vector loads and 14
 * broadcasts: Zen 4/5 and Skylake-X issue two 512-bit FMAs per cycle with
 * a latency of 4, so 8 independent chains keep both pipes busy and 28 hide
 * the loads well (BLIS's skx sgemm uses a 32x12 tile, 24 accumulators,
 * for the same reasons; oneDNN's brgemm a 6x64 one).
 *
 * One function per row count mr in [1, 14] (the template below, unrolled
 * by the compiler for each constant mr): thin products (GEMV, LSTM steps,
 * the last rows of a matrix) waste no FMAs.  Tiles of 1 or 2 rows have too
 * few chains to hide the FMA latency, so they split k over 4 or 2 partial
 * sums (fixed order: the result is still deterministic).  Column tails
 * (nr < 32) use masked loads and stores.
 */
#include <immintrin.h>

#include "gemm-ukernel.h"

#define MR 14
#define NR 32
/* B is prefetched PF_K depth steps (4 KiB of a packed panel) ahead.  In a
 * model every step's weights have been evicted by the others' since the
 * last run, so prepacked B (Winograd's U above all: 9.4 MB for ResNet-50's
 * 256-channel layers, 4x the direct weights) comes from DRAM, and the
 * hardware prefetcher alone left the products waiting for it: ResNet-50's
 * Winograd steps went 780 -> 615 us (14x14) and 545 -> 444 us (28x28) on
 * one thread, 38.8 -> 36.5 ms summed over all steps (KEXP A/B, interleaved
 * runs).  Tiles of 1 or 2 rows (GEMV-like, B used once) skip it. */
#define PF_K 32

static inline __attribute__((always_inline)) void
ukernel(const int mr, const int split, int64_t kc, const float *restrict a, int64_t as,
        const float *restrict b, int64_t bs, float *restrict c, int64_t ldc, int64_t nr,
        const kn_sgemm_ustore *s) {
  __m512 c0[4][MR], c1[4][MR];
  /* Bring C's tile towards L1 while the k loop runs (kc x mr FMA pairs,
   * long enough to hide an L3 or DRAM miss): the store at the end then
   * neither waits for its reads (accumulate) nor for the lines' ownership.
   * A row of 32 floats spans three lines when C is not 64-byte aligned. */
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    const float *cr = c + r * ldc;
    __builtin_prefetch(cr, 1, 3);
    __builtin_prefetch(cr + 16, 1, 3);
    __builtin_prefetch(cr + NR - 1, 1, 3);
  }
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) c0[q][r] = c1[q][r] = _mm512_setzero_ps();
  int64_t kk = 0;
  if (split > 1)
    for (; kk + split <= kc; kk += split) {
#pragma GCC unroll 4
      for (int q = 0; q < split; q++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 14
        for (int r = 0; r < mr; r++) {
          __m512 av = _mm512_set1_ps(a[r]);
          c0[q][r] = _mm512_fmadd_ps(av, b0, c0[q][r]);
          c1[q][r] = _mm512_fmadd_ps(av, b1, c1[q][r]);
        }
        a += as;
        b += bs;
      }
    }
  for (; kk < kc; kk++) {
    __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    if (mr > 2) {
      __builtin_prefetch(b + PF_K * bs, 0, 3);
      __builtin_prefetch(b + PF_K * bs + 16, 0, 3);
    }
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512 av = _mm512_set1_ps(a[r]);
      c0[0][r] = _mm512_fmadd_ps(av, b0, c0[0][r]);
      c1[0][r] = _mm512_fmadd_ps(av, b1, c1[0][r]);
    }
    a += as;
    b += bs;
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

  uint32_t bits = nr >= NR ? 0xffffffffu : ((1u << nr) - 1u);
  __mmask16 m0 = (__mmask16)(bits & 0xffff), m1 = (__mmask16)(bits >> 16);
  const __m512 alpha = _mm512_set1_ps(s->alpha);
  const __m512 lo = _mm512_set1_ps(s->lo), hi = _mm512_set1_ps(s->hi);
  __m512 bc0 = _mm512_setzero_ps(), bc1 = _mm512_setzero_ps();
  if (s->bias_col) {
    bc0 = _mm512_maskz_loadu_ps(m0, s->bias_col);
    bc1 = _mm512_maskz_loadu_ps(m1, s->bias_col + 16);
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    __m512 v0 = c0[0][r], v1 = c1[0][r];
    float *cr = c + r * ldc;
    if (s->scale) {
      v0 = _mm512_mul_ps(v0, alpha);
      v1 = _mm512_mul_ps(v1, alpha);
    }
    if (s->accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    if (s->bias_row) {
      __m512 br = _mm512_set1_ps(s->bias_row[r]);
      v0 = _mm512_add_ps(v0, br);
      v1 = _mm512_add_ps(v1, br);
    }
    if (s->bias_col) {
      v0 = _mm512_add_ps(v0, bc0);
      v1 = _mm512_add_ps(v1, bc1);
    }
    if (s->res) {
      const float *rr = s->res + r * s->ldr;
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, rr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, rr + 16));
    }
    if (s->clamp) {
      v0 = _mm512_min_ps(_mm512_max_ps(v0, lo), hi);
      v1 = _mm512_min_ps(_mm512_max_ps(v1, lo), hi);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

#define UK(R, S)                                                                      \
  static void ukernel_##R(int64_t kc, const float *a, int64_t as, const float *b,     \
                          int64_t bs, float *c, int64_t ldc, int64_t nr,              \
                          const kn_sgemm_ustore *s) {                                 \
    ukernel(R, S, kc, a, as, b, bs, c, ldc, nr, s);                                   \
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

const kn_sgemm_ukernels kn_f32_gemm_ukernel_14x32__avx512 = {
    MR,
    NR,
    {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,
     ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14},
    kn_f32_gemv__avx512,
};
