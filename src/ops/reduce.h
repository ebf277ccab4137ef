/* The reductions (src/ops/reduce.c): what their tactics
 * (src/tactics/reduce_tactics.c) share with the reference ops. */
#ifndef KN_OPS_REDUCE_H
#define KN_OPS_REDUCE_H

#include "op.h"

/* A Reduce* input viewed as merged dims: adjacent dims that are all
 * reduced or all kept are one, dims of size 1 dropped; os[k] is the output
 * stride of dim k, 0 when it is reduced.  The last dim is then either a
 * contiguous run summed into one output (os 0) or a row of outputs. */
typedef struct kn_reduce_plan {
  int32_t r;
  int64_t d[KN_MAX_RANK], os[KN_MAX_RANK];
} kn_reduce_plan;

/* The plan of node ctx's reduction of x (its axes, keepdims and
 * noop_with_empty_axes as the reference reads them); *noop: the output is
 * the input unchanged. */
kn_status kn_reduce_view(kn_op_ctx *ctx, const kn_tensor *x, kn_reduce_plan *p,
                         bool *noop) KN_WUR;
/* The plan for a reduced-dims mask. */
void kn_reduce_plan_of(const kn_tensor *x, const bool *mask, kn_reduce_plan *p);

#endif
