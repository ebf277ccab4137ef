/* The resampling family (src/ops/resize.c): what its tactics
 * (src/tactics/resize_tactics.c) share with the reference ops. */
#ifndef KN_OPS_RESIZE_H
#define KN_OPS_RESIZE_H

#include "op.h"

enum { KN_RESIZE_NEAREST, KN_RESIZE_LINEAR, KN_RESIZE_CUBIC };

/* A Resize / Upsample step's parameters from its attributes and inputs. */
typedef struct kn_resize_params {
  int mode, ctm, nearest; /* mode: KN_RESIZE_*; the others private to resize.c */
  double cubic_a, extrap;
  bool exclude_outside, antialias;
  bool known; /* scales/sizes known: out[] and scale[] are set */
  int32_t rank;
  int64_t in[KN_MAX_RANK], out[KN_MAX_RANK];
  double scale[KN_MAX_RANK];
  double roi_lo[KN_MAX_RANK], roi_hi[KN_MAX_RANK];
} kn_resize_params;

/* The parameters of ctx's step at run time for input x and output y,
 * checked (output size known, no empty axis resized); *empty when y has
 * no elements (nothing to compute). */
kn_status kn_resize_plan(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *y,
                         kn_resize_params *p, bool *empty) KN_WUR;

/* Nearest source index of output o along axis d, -1 outside the roi. */
int64_t kn_resize_nearest_src(const kn_resize_params *p, int32_t d, int64_t o);

/* Taps of one axis: for output o, ntaps (index, weight) pairs; a NaN first
 * weight marks an output outside the roi.  idx and w are the caller's to
 * free (also on failure). */
typedef struct kn_resize_axis_taps {
  int32_t ntaps;
  int64_t *idx;
  double *w;
  bool identity;
} kn_resize_axis_taps;

/* The linear or cubic taps of axis d (p->mode). */
kn_status kn_resize_build_taps(kn_op_ctx *ctx, const kn_resize_params *p, int32_t d,
                               kn_resize_axis_taps *t) KN_WUR;

#endif
