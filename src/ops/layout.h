/* Channels-last steps (src/ops/layout.c): what the channels_last pass and
 * the conv / pool families share about them. */
#ifndef KN_OPS_LAYOUT_H
#define KN_OPS_LAYOUT_H

#include "kernels/kernels.h"
#include "op.h"

/* The channels-last op (domain "kiln") computing op `op` of `domain`, or
 * NULL when there is none; *nhwc_inputs: bit i set when its input i is a
 * 4-D channels-last tensor (the outputs always are). */
const char *kn_nhwc_op_for(const char *domain, const char *op, uint32_t *nhwc_inputs);

/* [N, H, W, C] dims -> [N, C, H, W] and back (4 entries; in == out allowed). */
void kn_dims_to_nchw(const int64_t *nhwc, int64_t *nchw);
void kn_dims_to_nhwc(const int64_t *nchw, int64_t *nhwc);

/* dst [n, c, h, w] <- src [n, h, w, c] (to_nchw) or the reverse, es bytes
 * per element; nchw: the NCHW dims.  A plain loop: for reference kernels
 * and constants, not for the hot path (Transpose steps use kernels/copy). */
void kn_layout_permute(const int64_t *nchw, size_t es, const void *src, void *dst,
                       bool to_nchw);

/* Fast runs of the channels-last steps (*done = false: not a case the
 * tactic takes, the reference runs instead). */
kn_status kn_fused_conv_nhwc_fast(kn_op_ctx *ctx, bool *done) KN_WUR; /* fused.c */
/* The FusedConv activation named by the node's attributes <prefix>activation,
 * <prefix>activation_alpha, ... (fused.c). */
kn_status kn_fused_conv_act(kn_op_ctx *ctx, const char *prefix, kn_act_params *act,
                            bool *res_first) KN_WUR;
kn_status kn_pool_nhwc_fast(kn_op_ctx *ctx, bool *done) KN_WUR;       /* pool.c */
int32_t kn_pool_nhwc_select(const kn_graph *g, const kn_node *n, int32_t isa);

/* A Conv / FusedConv whose best tactic is channels-first (conv.c): one
 * the NCHW Winograd F(4,3) kernel would take that the channels-last one
 * cannot (none today: kept so that a future channels-first-only tactic has
 * one place to say so). */
bool kn_conv_prefers_nchw(const kn_graph *g, const kn_node *n);

#endif
