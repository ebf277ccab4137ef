/*
 * Resize fast paths (tactic `resize`): fp32, the last two axes of a
 * [planes, H, W] tensor resized, every leading axis unchanged.
 *
 * The op builds the per-axis tables with the reference's own coordinate
 * and weight code (src/ops/resize.c), so every coordinate transformation
 * mode, nearest mode, extrapolation and exclude_outside gives the
 * reference's indices and weights; the kernels then compute exactly what
 * the reference computes, in its order and in double precision (one pass
 * over H into a row buffer, one over W, then rounding to float), so the
 * results are bit-identical to the reference kernel, on any ISA and thread
 * count.  Cubic and antialiased filters stay on the reference.
 *
 * Work is split over output rows; consecutive output rows with the same
 * source taps (upsampling) copy the row just written instead of
 * recomputing it.
 */
#ifndef KN_RESIZE_H
#define KN_RESIZE_H

#include "kernels/kernels.h"

/* Taps of one axis (n_out entries each).  Linear: out[o] = w0[o] * in[i0[o]]
 * + w1[o] * in[i1[o]] as the reference sums them; w0[o] NaN marks an
 * output outside tf_crop_and_resize's roi (it gets the extrapolation
 * value; i0, i1 are then 0).  Nearest: i0 only, -1 outside the roi.
 * identity: the reference skips this axis (linear only). */
typedef struct kn_resize_taps {
  int64_t n_in, n_out;
  const int32_t *i0, *i1;
  const double *w0, *w1;
  bool identity;
} kn_resize_taps;

/* Scratch bytes kn_f32_resize_linear2d needs on `threads` threads. */
size_t kn_f32_resize_linear2d_scratch(int64_t w_in, int32_t threads);

/* y [planes, h->n_out, w->n_out] from x [planes, h->n_in, w->n_in]. */
void kn_f32_resize_linear2d(kn_isa isa, kn_pool *pool, const float *x, float *y,
                            int64_t planes, const kn_resize_taps *h, const kn_resize_taps *w,
                            double extrap, void *scratch);
void kn_f32_resize_nearest2d(kn_isa isa, kn_pool *pool, const float *x, float *y,
                             int64_t planes, const kn_resize_taps *h, const kn_resize_taps *w,
                             float extrap);

/* Per-ISA row kernels (resize.c holds the portable ones and the loops). */
typedef struct kn_resize_rows {
  /* tmp[j] = (0 + w0 * a[j]) + w1 * b[j] for j < n, as the reference sums
   * (a or b NULL: that term is left out, as the reference skips a zero
   * weight); both NULL: tmp[j] = 0 */
  void (*h_pass)(const float *a, double w0, const float *b, double w1, double *tmp, int64_t n);
  /* y[o] = (float)(w0[o] * tmp[i0[o]] + w1[o] * tmp[i1[o]]) for o < n */
  void (*w_pass)(const double *tmp, const kn_resize_taps *w, double extrap, float *y);
  /* y[o] = i0[o] < 0 ? extrap : row[i0[o]] */
  void (*nearest_row)(const float *row, const int32_t *idx, int64_t n, float extrap, float *y);
} kn_resize_rows;

#ifdef KN_HAVE_X86_KERNELS
extern const kn_resize_rows kn_f32_resize_rows__avx512;
extern const kn_resize_rows kn_f32_resize_rows__avx2;
#endif

#endif
