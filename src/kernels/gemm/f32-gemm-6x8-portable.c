/*
 * fp32 GEMM micro-kernels, portable C: register tile 6 x 8.
 *
 * Plain loops with constant trip counts that gcc and clang vectorise for
 * the baseline ISA.  Why 6 x 8: with SSE2 (x86-64's baseline, 16 xmm) the
 * tile is 12 accumulators plus two B vectors and a broadcast; a 4 x 16
 * tile (16 accumulators) spills on every k step and ran at a third of the
 * speed.  One named accumulator row per A row (not acc[MR][NR]) is what
 * lets gcc and clang keep the tile in registers.  One function per row
 * count mr in [1, 6].
 */
#include "gemm-ukernel.h"

#define MR 6
#define NR 8

static inline __attribute__((always_inline)) void
ukernel(const int mr, int64_t kc, const float *restrict a, int64_t as,
        const float *restrict b, int64_t bs, float *restrict c, int64_t ldc, int64_t nr,
        const kn_sgemm_ustore *s) {
  float c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0}, c4[NR] = {0}, c5[NR] = {0};
  for (int64_t kk = 0; kk < kc; kk++) {
    const float a0 = a[0], a1 = mr > 1 ? a[1] : 0.0f, a2 = mr > 2 ? a[2] : 0.0f;
    const float a3 = mr > 3 ? a[3] : 0.0f, a4 = mr > 4 ? a[4] : 0.0f;
    const float a5 = mr > 5 ? a[5] : 0.0f;
    for (int j = 0; j < NR; j++) {
      c0[j] += a0 * b[j];
      if (mr > 1) c1[j] += a1 * b[j];
      if (mr > 2) c2[j] += a2 * b[j];
      if (mr > 3) c3[j] += a3 * b[j];
      if (mr > 4) c4[j] += a4 * b[j];
      if (mr > 5) c5[j] += a5 * b[j];
    }
    a += as;
    b += bs;
  }
  float *rows[MR] = {c0, c1, c2, c3, c4, c5};
  int64_t n = nr < NR ? nr : NR;
  for (int r = 0; r < mr; r++) {
    const float *t = rows[r];
    float *cr = c + r * ldc;
    const float *rr = s->res ? s->res + r * s->ldr : NULL;
    for (int64_t j = 0; j < n; j++) {
      float v = t[j];
      if (s->scale) v *= s->alpha;
      if (s->accumulate) v += cr[j];
      if (s->bias_row) v += s->bias_row[r];
      if (s->bias_col) v += s->bias_col[j];
      if (rr) v += rr[j];
      if (s->clamp) {
        v = v > s->lo ? v : s->lo; /* NaN -> lo, as max_ps does */
        v = v < s->hi ? v : s->hi;
      }
      cr[j] = v;
    }
  }
}

#define UK(R)                                                                         \
  static void ukernel_##R(int64_t kc, const float *a, int64_t as, const float *b,     \
                          int64_t bs, float *c, int64_t ldc, int64_t nr,              \
                          const kn_sgemm_ustore *s) {                                 \
    ukernel(R, kc, a, as, b, bs, c, ldc, nr, s);                                      \
  }
UK(1)
UK(2)
UK(3)
UK(4)
UK(5)
UK(6)
#undef UK

const kn_sgemm_ukernels kn_f32_gemm_ukernel_6x8__portable = {
    MR, NR, {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6},
    kn_f32_gemv__portable};
