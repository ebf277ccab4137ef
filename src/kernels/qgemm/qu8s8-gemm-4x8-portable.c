/*
 * int8 GEMM micro-kernels, portable C: register tile 4 x 8, K in groups
 * of 4 (the VNNI layout: one column's 4 depth steps contiguous).
 *
 * Plain loops with constant trip counts for the compiler to vectorise (the
 * fallback off x86-64, not a fast path: 128x768x768 at 7 GOP/s against the
 * portable fp32 GEMM's 10.5 here; 2.3 with 32-bit products).  One named accumulator
 * row per A row (as the fp32 portable kernel) keeps the tile in
 * registers.  Sums wrap-free by the k bound of qgemm.h; the dequantizing
 * subtraction is done in uint32 so that no signed overflow is ever
 * formed.
 */
#include "qgemm-ukernel.h"

#define MR 4
#define NR 8
#define G 4

static inline __attribute__((always_inline)) void
ukernel(const int mr, int64_t kg, const uint8_t *restrict a, const int8_t *restrict b,
        int64_t nr, const kn_qgemm_ustore *s) {
  int32_t c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0};
  for (int64_t g = 0; g < kg; g++) {
    for (int q = 0; q < G; q++) {
      /* u8 x s8 products fit in int16 ([-32640, 32385]): 16-bit
       * multiplies (SSE2's pmullw; it has no 32-bit one) widened to s32 */
      const int16_t a0 = a[q], a1 = mr > 1 ? a[G + q] : 0, a2 = mr > 2 ? a[2 * G + q] : 0;
      const int16_t a3 = mr > 3 ? a[3 * G + q] : 0;
      for (int j = 0; j < NR; j++) {
        const int16_t bv = b[j * G + q];
        c0[j] += (int16_t)(a0 * bv);
        if (mr > 1) c1[j] += (int16_t)(a1 * bv);
        if (mr > 2) c2[j] += (int16_t)(a2 * bv);
        if (mr > 3) c3[j] += (int16_t)(a3 * bv);
      }
    }
    a += MR * G;
    b += NR * G;
  }
  int32_t *rows[MR] = {c0, c1, c2, c3};
  for (int r = 0; r < mr; r++) {
    int32_t *t = rows[r];
    if (s->load)
      for (int j = 0; j < NR; j++) t[j] += s->acc[r * NR + j];
    if (!s->final) {
      for (int j = 0; j < NR; j++) s->acc[r * NR + j] = t[j];
      continue;
    }
    int64_t n = nr < NR ? nr : NR;
    if (s->si) {
      int32_t *sr = s->si + r * s->ldc;
      for (int64_t j = 0; j < n; j++)
        sr[j] = (int32_t)((uint32_t)t[j] - (uint32_t)s->a_zero * (uint32_t)s->colsum[j]);
      continue;
    }
    float *cr = s->c + r * s->ldc;
    for (int64_t j = 0; j < n; j++) {
      uint32_t d = (uint32_t)t[j] - (uint32_t)s->a_zero * (uint32_t)s->colsum[j];
      cr[j] = (float)(int32_t)d * (s->a_scale * s->w_scale[j]);
    }
  }
}

#define UK(R)                                                                           \
  static void ukernel_##R(int64_t kg, const void *a, const void *b, int64_t nr,         \
                          const kn_qgemm_ustore *s) {                                   \
    ukernel(R, kg, a, b, nr, s);                                                        \
  }
UK(1)
UK(2)
UK(3)
UK(4)
#undef UK

static void quant(int64_t n, const float *x, float scale, int32_t zero, uint8_t *y) {
  const float z = (float)zero;
  for (int64_t j = 0; j < n; j++) y[j] = kn_qgemm_quant1(x[j], scale, z);
}

const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_4x8__portable = {
    .mr = MR, .nr = NR, .g = G, .esize = 1, .kchunk = 1,
    .fn = {ukernel_1, ukernel_2, ukernel_3, ukernel_4},
    .quant = quant};
