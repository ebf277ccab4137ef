/* The pooling family (src/ops/pooling.c): what its tactics
 * (src/tactics/pooling_tactics.c, which also runs the channels-last pools of
 * src/ops/layout.c) share with the reference ops. */
#ifndef KN_OPS_POOLING_H
#define KN_OPS_POOLING_H

#include "op.h"

#define KN_POOL_MAX_SP (KN_MAX_RANK - 2)

typedef enum kn_pool_mode { KN_POOL_MAX, KN_POOL_AVG, KN_POOL_LP } kn_pool_mode;

/* A pool's windows per spatial dim: input and output sizes, kernel,
 * strides, dilations, pads at the beginning and end. */
typedef struct kn_pool_geo {
  int32_t ns; /* spatial rank */
  int64_t in[KN_POOL_MAX_SP], out[KN_POOL_MAX_SP], k[KN_POOL_MAX_SP], s[KN_POOL_MAX_SP],
      d[KN_POOL_MAX_SP], pb[KN_POOL_MAX_SP], pe[KN_POOL_MAX_SP];
} kn_pool_geo;

typedef struct kn_pool_opts {
  kn_pool_mode mode;
  bool count_include_pad;
  double p;          /* LpPool exponent */
  int storage_order; /* MaxPool Indices layout */
} kn_pool_opts;

/* Options of a pool of mode m from the node's attributes (checked). */
kn_status kn_pool_opts_of(kn_op_ctx *ctx, kn_pool_mode m, kn_pool_opts *o) KN_WUR;
/* Fills g from the attributes and x's shape ([N, C, spatial...]).  Output
 * dims whose input dim is unknown are -1.  has_dil: this op version has a
 * dilations attribute. */
kn_status kn_pool_geometry(kn_op_ctx *ctx, const kn_tensor *x, kn_pool_geo *g,
                           bool has_dil) KN_WUR;
/* MaxPool, AveragePool, LpPool at run time on x: options, geometry, and
 * *ind, MaxPool's Indices output when it is wanted (else NULL). */
kn_status kn_pool_plan(kn_op_ctx *ctx, const kn_tensor *x, kn_pool_opts *o, kn_pool_geo *g,
                       int64_t **ind) KN_WUR;

#endif
