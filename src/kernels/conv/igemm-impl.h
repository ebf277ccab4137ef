/*
 * The indirect-GEMM micro-kernels (igemm.h) for one ISA, from one
 * template.  The including file defines the vector type and operations:
 *
 *   V, VL (floats per vector), MR (rows of the largest tile), NV (vectors
 *   of the widest panel), v_zero, v_set1, v_ld (unaligned full load),
 *   v_fma(a, b, c) = a*b + c, v_add, v_min, v_max, v_ldn(p, n) (first n
 *   lanes, zeros after), v_stn(p, v, n) (first n lanes), and KN_IGEMM_TABLE
 *   (the name of the kn_igemm_ukernels table to define).
 *
 * Every (rows, vectors) pair is its own function, the loops below unrolled
 * by the compiler for those constants: accumulators stay in registers for
 * the whole depth (taps x channels), one broadcast of each row's value per
 * depth step feeds nv FMAs, and pixel or channel tails run a smaller tile
 * instead of a padded one.
 */
#ifndef KN_IGEMM_TABLE
#error "define the vector operations and KN_IGEMM_TABLE before including igemm-impl.h"
#endif

#include "kernels/conv/igemm.h"

static inline __attribute__((always_inline)) void
igemm_tile(const int mr, const int nv, int64_t taps, int64_t kc, const float *const *restrict a,
           const float *restrict w, float *restrict c, int64_t ldc, int64_t nc,
           const kn_igemm_params *p) {
  V acc[MR][NV];
  /* Bring C's tile towards L1 while the depth loop runs, so the stores at
   * the end wait neither for reads (accumulate, residual) nor for the lines'
   * ownership: with a short depth (pointwise layers on 16-64 channels)
   * those misses are a large part of a tile's time. */
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) __builtin_prefetch(c + r * ldc + v * VL, 1, 3);
  /* c and ldc as if changed: the epilogue computes its row addresses
   * again instead of keeping the prefetches' mr addresses live across the
   * depth loop, which took general registers that gcc then spilled into
   * zmm22-31, so that one weight vector went to the stack and back at
   * every depth step */
  __asm__ volatile("" : "+r"(c), "+r"(ldc));
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) acc[r][v] = v_zero();
  const float *w0 = w;
  for (int64_t t = 0; t < taps; t++) {
    if (p->tap) w = w0 + p->tap[t] * p->tap_stride;
    const float *ap[MR];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) ap[r] = a[r] + p->a_off;
    a += mr;
    for (int64_t k = 0; k < kc; k++) {
      V b[NV];
#pragma GCC unroll 8
      for (int v = 0; v < nv; v++) b[v] = v_ld(w + v * VL);
      w += nv * VL;
#pragma GCC unroll 8
      for (int r = 0; r < mr; r++) {
        V av = v_set1(ap[r][k]);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[r][v] = v_fma(av, b[v], acc[r][v]);
      }
    }
  }
  const V lo = v_set1(p->lo), hi = v_set1(p->hi);
  /* (no early exit from these loops, so that they unroll fully) */
#pragma GCC unroll 8
  for (int v = 0; v < nv; v++) {
    int64_t n = nc - v * VL;
    n = n < 0 ? 0 : n > VL ? VL : n;
    V bias = p->bias && n ? v_ldn(p->bias + v * VL, n) : v_zero();
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      float *cr = c + r * ldc + v * VL;
      const float *rr = p->res ? p->res + r * ldc + v * VL : NULL;
      V x = acc[r][v];
      if (n) {
        if (p->accumulate) x = v_add(x, v_ldn(cr, n));
        x = v_add(x, bias);
        if (rr && !p->res_after) x = v_add(x, v_ldn(rr, n));
        if (p->clamp) x = v_min(v_max(x, lo), hi);
        if (rr && p->res_after) x = v_add(x, v_ldn(rr, n));
        v_stn(cr, x, n);
      }
    }
  }
}

#define KN_IGEMM_FN(R, N)                                                                  \
  static void igemm_##R##x##N(int64_t taps, int64_t kc, const float *const *a,            \
                              const float *w, float *c, int64_t ldc, int64_t nc,          \
                              const kn_igemm_params *p) {                                 \
    igemm_tile(R, N, taps, kc, a, w, c, ldc, nc, p);                                      \
  }
