/* Depthwise convolution kernels (f32-dwconv-impl.h) in portable C: vectors
 * of 16 floats as plain arrays (the compiler vectorises them for the
 * baseline ISA; 16 rather than 4 spreads the generic loop's per-tap work
 * over more outputs: 1.7x faster on MobileNetV2's layers), masks as bits.
 * Masked-off lanes are never read; whole-vector masks take plain loads. */
#include <stdbool.h>
#include <stdint.h>

#define VN 16
typedef struct V {
  float f[VN];
} V;
typedef unsigned M;
#define DW_ENTRY kn_f32_dwconv_rows__portable
/* Only the generic loop: unrolling the specialised ones over arrays of
 * floats costs gcc minutes and gains little without a vector ISA. */
#define DW_GENERIC_ONLY

static inline M m_lanes(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > VN ? VN : hi;
  if (lo >= hi) return 0;
  return ((1u << hi) - 1u) & ~((1u << lo) - 1u);
}
static inline M m_and(M a, M b) { return a & b; }
static inline M m_all(void) { return (1u << VN) - 1u; }
static inline M m_none(void) { return 0; }
static inline V v_ld(const float *p) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = p[j];
  return v;
}
static inline void v_st(float *p, V v) {
  for (int j = 0; j < VN; j++) p[j] = v.f[j];
}
static inline V v_ld2u(const float *p) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = p[2 * j];
  return v;
}
static inline V v_ldm(const float *p, M m) {
  if (m == m_all()) return v_ld(p); /* the interior: no per-lane tests */
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = (m >> j) & 1u ? p[j] : 0.0f;
  return v;
}
static inline V v_ld2(const float *p, M m0, M m1) {
  if ((m0 & m1) == m_all()) return v_ld2u(p);
  V v;
  for (int j = 0; j < VN; j++) {
    int e = 2 * j;
    bool on = e < VN ? (m0 >> e) & 1u : (m1 >> (e - VN)) & 1u;
    v.f[j] = on ? p[e] : 0.0f;
  }
  return v;
}
static inline V v_ldg(const float *p, int64_t s, M m) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = (m >> j) & 1u ? p[j * s] : 0.0f;
  return v;
}
static inline void v_stm(float *p, V v, M m) {
  for (int j = 0; j < VN; j++)
    if ((m >> j) & 1u) p[j] = v.f[j];
}
static inline V v_set(float f) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = f;
  return v;
}
#define DW_LANEWISE(name, expr)                 \
  static inline V name(V a, V b) {              \
    V v;                                        \
    for (int j = 0; j < VN; j++) {              \
      float x = a.f[j], y = b.f[j];             \
      v.f[j] = expr;                            \
    }                                           \
    return v;                                   \
  }
DW_LANEWISE(v_add, x + y)
/* as x86 maxps / minps: the second operand when either is NaN */
DW_LANEWISE(v_max, x > y ? x : y)
DW_LANEWISE(v_min, x < y ? x : y)
static inline V v_fma(V a, V b, V c) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = a.f[j] * b.f[j] + c.f[j];
  return v;
}

#include "kernels/conv/f32-dwconv-impl.h"
