/* The vector operations of hgemm-impl.h in portable C: GCC/Clang vectors
 * of 4 floats (SSE2 on x86-64's baseline; 6 x 8 tiles, for the register
 * reasons of gemm/f32-gemm-6x8-portable.c). */
#include <string.h>

#include "core/core.h"

typedef float V __attribute__((vector_size(16)));
typedef uint32_t HU __attribute__((vector_size(16)));
typedef int32_t HI __attribute__((vector_size(16)));
#define VL 4

static inline V hv_zero(void) { return (V){0}; }
static inline V hv_set1(float f) { return (V){f, f, f, f}; }
/* a * b + c: fused only where the compiler contracts it for the target */
static inline V hv_fma(V a, V b, V c) { return a * b + c; }
static inline V hv_add(V a, V b) { return a + b; }
static inline V hv_mul(V a, V b) { return a * b; }
/* as minps / maxps: the second operand when either is NaN */
static inline V hv_min(V a, V b) {
  HI lt = a < b;
  return (V)(((HU)a & (HU)lt) | ((HU)b & ~(HU)lt));
}
static inline V hv_max(V a, V b) {
  HI gt = a > b;
  return (V)(((HU)a & (HU)gt) | ((HU)b & ~(HU)gt));
}
static inline V hv_ld(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void hv_st(float *p, V v) { memcpy(p, &v, sizeof v); }
static inline V hv_ldn(const float *p, int64_t n) {
  V v = hv_zero();
  for (int64_t l = 0; l < n && l < VL; l++) v[l] = p[l];
  return v;
}
static inline void hv_stn(float *p, V v, int64_t n) {
  for (int64_t l = 0; l < n && l < VL; l++) p[l] = v[l];
}

/* x = fp16-rounded x, to nearest even (kn_f32_to_f16 then kn_f16_to_f32).
 * A packed A block's rounding for round_a. */
static inline void hv_round_half(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = kn_f16_to_f32(kn_f32_to_f16(x[i]));
}
