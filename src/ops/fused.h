/* The fused family (src/ops/fused.c): what the channels-last steps
 * (layout.c) and the expand-depthwise step (expand_dw.c) run of FusedConv. */
#ifndef KN_OPS_FUSED_H
#define KN_OPS_FUSED_H

#include "kernels/kernels.h"
#include "op.h"

/* The fast run of a channels-last FusedConv (*done = false: not a case the
 * tactic takes, the reference runs instead). */
kn_status kn_fused_conv_nhwc_fast(kn_op_ctx *ctx, bool *done) KN_WUR;
/* The FusedConv activation named by the node's attributes <prefix>activation,
 * <prefix>activation_alpha, ... */
kn_status kn_fused_conv_act(kn_op_ctx *ctx, const char *prefix, kn_act_params *act,
                            bool *res_first) KN_WUR;

#endif
