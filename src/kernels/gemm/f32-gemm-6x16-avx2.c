/*
 * fp32 GEMM micro-kernels, AVX2 + FMA: register tile 6 x 16.
 *
 * Why 6 x 16 (BLIS's haswell sgemm tile): 16 columns are two ymm, so the
 * tile holds 12 accumulators, plus two B vectors and one broadcast = 15 of
 * the 16 ymm registers; 12 FMAs per k step against 2 loads and 6
 * broadcasts keep two FMA pipes (latency 4-5) busy.
 *
 * One function per row count mr in [1, 6]; tiles of 1 or 2 rows split k
 * over 4 or 2 partial sums to have enough independent FMA chains (fixed
 * order: deterministic).  Column tails (nr < 16) use masked loads/stores.
 */
#include <immintrin.h>

#include "gemm-ukernel.h"

#define MR 6
#define NR 16

/* B is prefetched PF_K depth steps ahead (4 KiB of a packed panel), for
 * the reason given in the AVX-512 kernel: ResNet-50 on this path (KILN_ISA
 * avx2, 1 thread) 91 -> 84 ms. */
#define PF_K 64

/* Lane masks for the first n of 8 lanes: mask_tab + 8 - n. */
static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static inline __m256i lane_mask(int64_t n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n));
}

static inline __attribute__((always_inline)) void
ukernel(const int mr, const int split, int64_t kc, const float *restrict a, int64_t as,
        const float *restrict b, int64_t bs, float *restrict c, int64_t ldc, int64_t nr,
        const kn_sgemm_ustore *s) {
  __m256 c0[4][MR], c1[4][MR];
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) c0[q][r] = c1[q][r] = _mm256_setzero_ps();
  int64_t kk = 0;
  if (split > 1)
    for (; kk + split <= kc; kk += split) {
#pragma GCC unroll 4
      for (int q = 0; q < split; q++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
          __m256 av = _mm256_broadcast_ss(a + r);
          c0[q][r] = _mm256_fmadd_ps(av, b0, c0[q][r]);
          c1[q][r] = _mm256_fmadd_ps(av, b1, c1[q][r]);
        }
        a += as;
        b += bs;
      }
    }
  for (; kk < kc; kk++) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    if (mr > 2) __builtin_prefetch(b + PF_K * bs, 0, 3); /* see the AVX-512 kernel */
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256 av = _mm256_broadcast_ss(a + r);
      c0[0][r] = _mm256_fmadd_ps(av, b0, c0[0][r]);
      c1[0][r] = _mm256_fmadd_ps(av, b1, c1[0][r]);
    }
    a += as;
    b += bs;
  }
  if (split == 4)
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm256_add_ps(_mm256_add_ps(c0[0][r], c0[1][r]),
                               _mm256_add_ps(c0[2][r], c0[3][r]));
      c1[0][r] = _mm256_add_ps(_mm256_add_ps(c1[0][r], c1[1][r]),
                               _mm256_add_ps(c1[2][r], c1[3][r]));
    }
  else if (split == 2)
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm256_add_ps(c0[0][r], c0[1][r]);
      c1[0][r] = _mm256_add_ps(c1[0][r], c1[1][r]);
    }

  const bool full = nr >= NR;
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
  const __m256 alpha = _mm256_set1_ps(s->alpha);
  const __m256 lo = _mm256_set1_ps(s->lo), hi = _mm256_set1_ps(s->hi);
  __m256 bc0 = _mm256_setzero_ps(), bc1 = _mm256_setzero_ps();
  if (s->bias_col) {
    bc0 = _mm256_maskload_ps(s->bias_col, m0);
    bc1 = _mm256_maskload_ps(s->bias_col + 8, m1);
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    __m256 v0 = c0[0][r], v1 = c1[0][r];
    float *cr = c + r * ldc;
    if (s->scale) {
      v0 = _mm256_mul_ps(v0, alpha);
      v1 = _mm256_mul_ps(v1, alpha);
    }
    if (s->accumulate) {
      if (full) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
      } else {
        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(cr, m0));
        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(cr + 8, m1));
      }
    }
    if (s->bias_row) {
      __m256 br = _mm256_set1_ps(s->bias_row[r]);
      v0 = _mm256_add_ps(v0, br);
      v1 = _mm256_add_ps(v1, br);
    }
    if (s->bias_col) {
      v0 = _mm256_add_ps(v0, bc0);
      v1 = _mm256_add_ps(v1, bc1);
    }
    if (s->res) {
      const float *rr = s->res + r * s->ldr;
      v0 = _mm256_add_ps(v0, _mm256_maskload_ps(rr, m0));
      v1 = _mm256_add_ps(v1, _mm256_maskload_ps(rr + 8, m1));
    }
    if (s->clamp) {
      v0 = _mm256_min_ps(_mm256_max_ps(v0, lo), hi);
      v1 = _mm256_min_ps(_mm256_max_ps(v1, lo), hi);
    }
    if (full) {
      _mm256_storeu_ps(cr, v0);
      _mm256_storeu_ps(cr + 8, v1);
    } else {
      _mm256_maskstore_ps(cr, m0, v0);
      _mm256_maskstore_ps(cr + 8, m1, v1);
    }
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
#undef UK

const kn_sgemm_ukernels kn_f32_gemm_ukernel_6x16__avx2 = {
    MR,
    NR,
    {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6},
    kn_f32_gemv__avx2,
};
