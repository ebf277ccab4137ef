/* The softmax family (src/ops/softmax.c): what its tactics
 * (src/tactics/softmax_tactics.c) share with the reference ops. */
#ifndef KN_OPS_SOFTMAX_H
#define KN_OPS_SOFTMAX_H

#include "op.h"

/* The lanes Softmax, LogSoftmax or Hardmax normalise in x (rank and dims
 * known): outer blocks of len elements at stride inner, from the node's
 * axis and opset.  Fails when the axis is out of range. */
kn_status kn_softmax_geometry(kn_op_ctx *ctx, const kn_tensor *x, int64_t *outer, int64_t *len,
                              int64_t *inner) KN_WUR;

#endif
