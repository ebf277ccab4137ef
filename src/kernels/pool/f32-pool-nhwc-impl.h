/*
 * Channels-last pooling kernels (f32-pool-nhwc.h), written once against
 * kernels/conv/f32-nhwc-vec.h and instantiated per ISA (the including
 * file defines the interface and POOLN_FNS, the table to define).
 *
 * 2-D windows: for each output pixel the window's valid rows and columns
 * are computed once (padding never enters: it never wins a max and adds
 * nothing to a sum), then the channels go by in blocks of 4 vectors (4
 * independent accumulators, each tap 4 loads of one contiguous pixel),
 * then single vectors with a masked tail.  Taps in (ky, kx) order; sums
 * start from -0.0 (so a window whose first tap is inside gives exactly
 * the NCHW kernel's sum) and are divided by dy * dx as there.  Pooling
 * moves more bytes than it computes, so no register blocking over
 * pixels.
 *
 * Global pooling: per block of 4 channel vectors, 8 accumulators (even
 * and odd pixels apart, combined once at the end), enough independent
 * adds to cover their latency.
 */
#ifndef POOLN_FNS
#error "define the vector interface and POOLN_FNS before including f32-pool-nhwc-impl.h"
#endif

#include <math.h>

#include "kernels/pool/f32-pool-nhwc.h"

#define POOLN_INLINE static inline __attribute__((always_inline))

/* Channels [c0, c0 + NV*VN) (the last vector masked by m when TAIL) of
 * one output pixel: rows [ky0, ky1) x columns [kx0, kx1) of the window
 * whose top-left input is (iy0, ix0). */
POOLN_INLINE void pooln_pixel(const kn_pool2d *p, int64_t c, const float *x, float *y,
                              int64_t iy0, int64_t ix0, int64_t ky0, int64_t ky1, int64_t kx0,
                              int64_t kx1, V div, M m, const int NV, const int MAX,
                              const int TAIL) {
  V acc[4];
#pragma GCC unroll 4
  for (int k = 0; k < NV; k++) acc[k] = v_set(MAX ? -INFINITY : -0.0f);
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *xr = x + (iy0 + ky * p->dh) * p->w * c;
    for (int64_t kx = kx0; kx < kx1; kx++) {
      const float *xp = xr + (ix0 + kx * p->dw) * c;
#pragma GCC unroll 4
      for (int k = 0; k < NV; k++) {
        V v = TAIL && k == NV - 1 ? v_ldm(xp + k * VN, m) : v_ld(xp + k * VN);
        acc[k] = MAX ? v_max(v, acc[k]) : v_add(acc[k], v);
      }
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < NV; k++) {
    V v = MAX ? acc[k] : v_div(acc[k], div);
    if (TAIL && k == NV - 1) v_stm(y + k * VN, v, m);
    else v_st(y + k * VN, v);
  }
}

POOLN_INLINE void pooln_rows_t(const kn_pooln_args *a, int64_t b, int64_t oy0, int64_t oy1,
                               const int MAX) {
  const kn_pool2d *p = a->p;
  const int64_t c = a->c;
  const float *xb = a->x + b * p->h * p->w * c;
  float *yb = a->y + b * p->oh * p->ow * c;
  const int64_t cb4 = c / (4 * VN) * (4 * VN);
  const M m = m_tail(c % VN ? c % VN : VN);
  for (int64_t oy = oy0; oy < oy1; oy++) {
    int64_t iy0 = oy * p->sh - p->pt, ky0, ky1;
    nhwc_taps_inside(iy0, p->h, p->kh, p->dh, &ky0, &ky1);
    float dy = MAX ? 0.0f
                   : (float)kn_pool_avg_count(oy, p->h, p->kh, p->sh, p->dh, p->pt, p->pb,
                                              p->count_include_pad);
    for (int64_t ox = 0; ox < p->ow; ox++) {
      int64_t ix0 = ox * p->sw - p->pl, kx0, kx1;
      nhwc_taps_inside(ix0, p->w, p->kw, p->dw, &kx0, &kx1);
      V div = v_set(0.0f);
      if (!MAX)
        div = v_set(dy * (float)kn_pool_avg_count(ox, p->w, p->kw, p->sw, p->dw, p->pl, p->pr,
                                                  p->count_include_pad));
      float *yp = yb + (oy * p->ow + ox) * c;
      int64_t c0 = 0;
      for (; c0 < cb4; c0 += 4 * VN)
        pooln_pixel(p, c, xb + c0, yp + c0, iy0, ix0, ky0, ky1, kx0, kx1, div, m, 4, MAX, 0);
      for (; c0 + VN <= c; c0 += VN)
        pooln_pixel(p, c, xb + c0, yp + c0, iy0, ix0, ky0, ky1, kx0, kx1, div, m, 1, MAX, 0);
      if (c0 < c)
        pooln_pixel(p, c, xb + c0, yp + c0, iy0, ix0, ky0, ky1, kx0, kx1, div, m, 1, MAX, 1);
    }
  }
}

static void pooln_rows(const kn_pooln_args *a, int64_t b, int64_t oy0, int64_t oy1) {
  if (a->p->is_max) pooln_rows_t(a, b, oy0, oy1, 1);
  else pooln_rows_t(a, b, oy0, oy1, 0);
}

/* Channels [c0, c0 + NV*VN) of the global pool of x ([size, c]). */
POOLN_INLINE void gpooln_block(int64_t size, int64_t c, const float *x, float *y, M m,
                               int64_t div, const int NV, const int MAX, const int TAIL) {
  V a0[4], a1[4];
#pragma GCC unroll 4
  for (int k = 0; k < NV; k++) a0[k] = a1[k] = v_set(MAX ? -INFINITY : -0.0f);
  int64_t i = 0;
  for (; i + 2 <= size; i += 2) {
    const float *p0 = x + i * c, *p1 = p0 + c;
#pragma GCC unroll 4
    for (int k = 0; k < NV; k++) {
      bool t = TAIL && k == NV - 1;
      V v0 = t ? v_ldm(p0 + k * VN, m) : v_ld(p0 + k * VN);
      V v1 = t ? v_ldm(p1 + k * VN, m) : v_ld(p1 + k * VN);
      a0[k] = MAX ? v_max(v0, a0[k]) : v_add(a0[k], v0);
      a1[k] = MAX ? v_max(v1, a1[k]) : v_add(a1[k], v1);
    }
  }
  if (i < size) {
    const float *p0 = x + i * c;
#pragma GCC unroll 4
    for (int k = 0; k < NV; k++) {
      V v0 = TAIL && k == NV - 1 ? v_ldm(p0 + k * VN, m) : v_ld(p0 + k * VN);
      a0[k] = MAX ? v_max(v0, a0[k]) : v_add(a0[k], v0);
    }
  }
  V n = v_set((float)div);
#pragma GCC unroll 4
  for (int k = 0; k < NV; k++) {
    V v = MAX ? v_max(a1[k], a0[k]) : v_div(v_add(a0[k], a1[k]), n);
    if (TAIL && k == NV - 1) v_stm(y + k * VN, v, m);
    else v_st(y + k * VN, v);
  }
}

POOLN_INLINE void gpooln_t(int64_t size, int64_t c, const float *x, float *y, int64_t c0,
                           int64_t c1, int64_t div, const int MAX) {
  M m = m_tail((c1 - c0) % VN ? (c1 - c0) % VN : VN);
  for (; c0 + 4 * VN <= c1; c0 += 4 * VN)
    gpooln_block(size, c, x + c0, y + c0, m, div, 4, MAX, 0);
  for (; c0 + VN <= c1; c0 += VN) gpooln_block(size, c, x + c0, y + c0, m, div, 1, MAX, 0);
  if (c0 < c1) gpooln_block(size, c, x + c0, y + c0, m, div, 1, MAX, 1);
}

static void gpooln(bool is_max, int64_t size, int64_t c, const float *x, float *y, int64_t c0,
                   int64_t c1, int64_t div) {
  if (is_max) gpooln_t(size, c, x, y, c0, c1, div, 1);
  else gpooln_t(size, c, x, y, c0, c1, div, 0);
}

const kn_pooln_fns POOLN_FNS = {pooln_rows, gpooln};
