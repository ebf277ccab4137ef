/*
 * Channels-last Winograd F(4x4, 3x3) transforms in portable C: 4 channels
 * per vector of GCC / clang vector extensions (an SSE register on a
 * baseline x86-64, a NEON register on arm64); the channel tail through
 * memcpy (winograd-nhwc-impl.h).
 */
#include "kernels/conv/winograd-nhwc.h"

typedef float V __attribute__((vector_size(16)));
typedef int32_t VI __attribute__((vector_size(16)));
#define VL 4
#define KN_WGN_TABLE kn_f32_winograd_nhwc_f43__portable

static inline V v_zero(void) { return (V){0}; }
static inline V v_set1(float f) { return (V){f, f, f, f}; }
static inline V v_ld(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v_st(float *p, V v) { memcpy(p, &v, sizeof v); }
static inline V v_ldn(const float *p, int n) {
  V v = v_zero();
  memcpy(&v, p, (size_t)n * sizeof(float));
  return v;
}
static inline void v_stn(float *p, V v, int n) { memcpy(p, &v, (size_t)n * sizeof(float)); }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_sub(V a, V b) { return a - b; }
static inline V v_mul(V a, V b) { return a * b; }
/* C has no ?: on vectors: select through the comparison's lane masks */
static inline V v_sel(VI m, V a, V b) { return (V)((m & (VI)a) | (~m & (VI)b)); }
static inline V v_min(V a, V b) { return v_sel(a < b, a, b); }
static inline V v_max(V a, V b) { return v_sel(a > b, a, b); }
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_fnma(V a, V b, V c) { return c - a * b; }

#define WGN_MR 6 /* f32-gemm-6x8-portable.c */
#define WGN_MRP 6

static inline void wgn_store_panel(const float *t, float *dst, int n) {
  for (int l = 0; l < n; l++)
    for (int r = 0; r < WGN_MR; r++) dst[l * WGN_MR + r] = t[r * VL + l];
}

#include "kernels/conv/winograd-nhwc-impl.h"
