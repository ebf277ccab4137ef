/*
 * Winograd F(4x4, 3x3) kernels in portable C: 4 tiles per vector of GCC /
 * clang vector extensions (an SSE register on a baseline x86-64, a NEON
 * register on arm64), GEMM register tile 6 x 8 (12 vector accumulators of
 * the 16 SSE registers, the shape of f32-gemm-6x8-portable.c).  Gathers and output stores are scalar lane loops.
 */
#include "kernels/conv/winograd.h"

typedef float V __attribute__((vector_size(16)));
typedef int32_t VI __attribute__((vector_size(16)));
typedef uint32_t VM;
#define VN 4
#define MR 6
#define KN_WG_TABLE kn_f32_winograd_f43__portable

static inline V v_zero(void) { return (V){0}; }
static inline V v_set1(float f) { return (V){f, f, f, f}; }
static inline V v_ld(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v_st(float *p, V v) { memcpy(p, &v, sizeof v); }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_sub(V a, V b) { return a - b; }
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_fnma(V a, V b, V c) { return c - a * b; }
static inline VI vi_ld(const int32_t *p) {
  VI v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline VI vi_add(VI a, VI b) { return a + b; }
static inline VI vi_set1(int32_t i) { return (VI){i, i, i, i}; }
static inline VM vm_bits(uint32_t b) { return b; }
static inline VM vm_and(VM a, VM b) { return a & b; }
static inline V v_gather(const float *base, VI idx, VM m) {
  V v = v_zero();
  for (int l = 0; l < VN; l++)
    if (m >> l & 1) v[l] = base[idx[l]];
  return v;
}

static void wg_store(V o[4][4], const kn_wg_lanes *ln, float *y, const float *res, int64_t ow,
                     const kn_wg_epi *e) {
  for (int l = 0; l < VN; l++)
    for (int a = 0; a < ln->nrows[l]; a++) {
      int64_t off = ln->out_off[l] + a * ow;
      for (int b = 0; b < ln->ncols[l]; b++) {
        float v = o[a][b][l];
        if (res && e->res_first) v += res[off + b];
        if (e->clamp) v = v < e->lo ? e->lo : v > e->hi ? e->hi : v;
        if (res && !e->res_first) v += res[off + b];
        y[off + b] = v;
      }
    }
}

#include "kernels/conv/winograd-impl.h"
