/* One-row products against a raw B (gemv-impl.h), portable C: GCC/Clang
 * vectors of 4 floats, blocks of 8 (32 columns). */
#include <string.h>

#include "gemm-ukernel.h"

typedef float V __attribute__((vector_size(16)));
#define VL 4
#define GV_NV 8
#define KN_GEMV_FN kn_f32_gemv__portable

static inline V gv_zero(void) { return (V){0}; }
static inline V gv_set1(float f) { return (V){f, f, f, f}; }
static inline V gv_ld(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
/* as the portable GEMM kernels: a * b + c (fused only where the compiler
 * contracts it for the target) */
static inline V gv_fma(V a, V b, V c) { return a * b + c; }
static inline void gv_st(float *p, V v) { memcpy(p, &v, sizeof v); }
static inline V gv_ldn(const float *p, int64_t n) {
  V v = gv_zero();
  for (int64_t l = 0; l < n; l++) v[l] = p[l];
  return v;
}
static inline void gv_stn(float *p, V v, int64_t n) {
  for (int64_t l = 0; l < n; l++) p[l] = v[l];
}

#include "gemv-impl.h"
