/*
 * Indirect-GEMM micro-kernels for conv_igemm_nhwc in portable C: tiles of
 * up to 4 output pixels x 8 output channels, 2 vectors of 4 floats of
 * GCC / clang vector extensions (an SSE register on a baseline x86-64, a
 * NEON register on arm64): 8 accumulators + 2 weight vectors + 1
 * broadcast fit the 16 SSE registers.
 */
#include <stdint.h>
#include <string.h>

typedef float V __attribute__((vector_size(16)));
#define VL 4
#define MR 4
#define NV 2
#define KN_IGEMM_TABLE kn_f32_igemm_ukernel_4x8__portable

static inline V v_zero(void) { return (V){0}; }
static inline V v_set1(float f) { return (V){f, f, f, f}; }
static inline V v_ld(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_min(V a, V b) {
  V r;
  for (int l = 0; l < VL; l++) r[l] = a[l] < b[l] ? a[l] : b[l];
  return r;
}
static inline V v_max(V a, V b) {
  V r;
  for (int l = 0; l < VL; l++) r[l] = a[l] > b[l] ? a[l] : b[l];
  return r;
}
static inline V v_ldn(const float *p, int64_t n) {
  V v = v_zero();
  for (int64_t l = 0; l < n; l++) v[l] = p[l];
  return v;
}
static inline void v_stn(float *p, V v, int64_t n) {
  for (int64_t l = 0; l < n; l++) p[l] = v[l];
}

#include "kernels/conv/igemm-impl.h"

#define ROWS(N)                                                                            \
  KN_IGEMM_FN(1, N)                                                                        \
  KN_IGEMM_FN(2, N)                                                                        \
  KN_IGEMM_FN(3, N)                                                                        \
  KN_IGEMM_FN(4, N)
ROWS(1)
ROWS(2)
#undef ROWS

#define ROWS(N) {igemm_1x##N, igemm_2x##N, igemm_3x##N, igemm_4x##N}
const kn_igemm_ukernels KN_IGEMM_TABLE = {MR, MR, VL, NV, {ROWS(1), ROWS(2)}};
