/* The pooling family (src/ops/pooling.c): what the channels-last pooling
 * steps (layout.c) run and select. */
#ifndef KN_OPS_POOLING_H
#define KN_OPS_POOLING_H

#include "op.h"

/* The fast run of a channels-last pool (*done = false: not a case the
 * tactic takes, the reference runs instead), and its tactic. */
kn_status kn_pool_nhwc_fast(kn_op_ctx *ctx, bool *done) KN_WUR;
int32_t kn_pool_nhwc_select(const kn_graph *g, const kn_node *n, int32_t isa);

#endif
