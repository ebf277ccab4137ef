/*
 * fp32 GEMM micro-kernels, portable C: register tile 4 x 16.
 *
 * Plain loops with constant trip counts that gcc and clang vectorise for
 * the baseline ISA (SSE2: 16 xmm, NEON: 32 q registers hold the 4 x 16
 * accumulators as 16 vectors).  Used where no x86 kernel applies, and as
 * a third implementation the tests compare with.  One function per row
 * count mr in [1, 4].
 */
#include "ukernel.h"

#define MR 4
#define NR 16

static inline __attribute__((always_inline)) void
ukernel(const int mr, int64_t kc, const float *restrict a, int64_t as,
        const float *restrict b, int64_t bs, float *restrict c, int64_t ldc, int64_t nr,
        const kn_sgemm_ustore *s) {
  float t[MR][NR];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < NR; j++) t[r][j] = 0.0f;
  for (int64_t kk = 0; kk < kc; kk++) {
    for (int r = 0; r < mr; r++) {
      const float av = a[r];
      for (int j = 0; j < NR; j++) t[r][j] += av * b[j];
    }
    a += as;
    b += bs;
  }
  int64_t n = nr < NR ? nr : NR;
  for (int r = 0; r < mr; r++) {
    float *cr = c + r * ldc;
    const float *rr = s->res ? s->res + r * s->ldr : NULL;
    for (int64_t j = 0; j < n; j++) {
      float v = t[r][j];
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
#undef UK

const kn_sgemm_ukernels kn_f32_gemm_ukernel_4x16__portable = {
    MR, NR, {ukernel_1, ukernel_2, ukernel_3, ukernel_4}};
