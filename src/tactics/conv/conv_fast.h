/* The conv tactics (src/tactics/conv): Conv, ConvTranspose, FusedConv,
 * NhwcFusedConv and NhwcExpandDwConv on the fast convolution kernels
 * (src/kernels/conv).  conv_tactics.c: the hooks, the float32 runs and the table
 * kn_tactics_conv; fused_conv.c: FusedConv's and NhwcFusedConv's runs;
 * expand_dw_tactics.c: NhwcExpandDwConv's; conv_lowp.c: reduced precision.  The
 * channels_last pass asks kn_conv_prefers_nchw. */
#ifndef KN_CONV_FAST_H
#define KN_CONV_FAST_H

#include "kernels/conv/conv.h"
#include "kernels/kernels.h"
#include "ops/conv_ref.h"
#include "tactics/tactics.h"

/* Tactic for a Conv, FusedConv or ConvTranspose node from its static
 * types: conv_depthwise, conv_winograd, conv_gemm or conv_transpose_gemm
 * for float32 4-D tensors, else 0 (reference). */
int32_t kn_conv_select(const kn_graph *g, const kn_node *n, int32_t isa);
/* The `tiling` hook of the convolutions: Winograd's block of tile lanes
 * (from the packed block), or the channels-last kernels' plan on the
 * target's capacities. */
void kn_conv_tiling(const kn_graph *g, const kn_node *n, const void *packed,
                    const kn_target *target, char *buf, size_t len);
/* The `loops` hook of the convolutions (Conv, FusedConv, NhwcFusedConv):
 * an implicit GEMM per group: groups g, output pixels p, output channels
 * m of a group, depth k (input channels of a group x taps); the input as
 * its im2col matrix [g, p, k] with the input's real size, weights
 * [g, m, k], output [g, p, m] and a residual like it.  ConvTranspose:
 * false (streamed). */
bool kn_conv_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l);
/* The `candidates` hook of the convolutions: the select choice, and for a
 * 3x3 stride-1 convolution the other of Winograd and the (implicit) GEMM
 * where both can run it. */
int32_t kn_conv_candidates(const kn_graph *g, const kn_node *n, int32_t isa, int32_t *out,
                           int32_t max);
/* Prepacks a constant float32 weight for the node's tactic (*packed NULL
 * when the tactic needs no packing or W is not a constant). */
kn_status kn_conv_pack(const kn_graph *g, const kn_node *n, const kn_target *target, void **packed,
                       kn_error *err) KN_WUR;

/* Runs the node's fast tactic on float32 x, w into y (geometry geo, from
 * kn_conv_geometry; transpose: ConvTranspose) with the epilogue ep (the
 * conventions of kernels/conv/conv.h: bias per output channel, residual
 * of the output's shape), using ctx->rt and ctx->packed.  *done = false
 * when this run is not a case the tactics take (not 2-D): y is then
 * zeroed, ready for the reference driver. */
kn_status kn_conv_fast(kn_op_ctx *ctx, const kn_conv_geom *geo, bool transpose,
                       const kn_tensor *x, const kn_tensor *w, const kn_epilogue *ep,
                       kn_tensor *y, bool *done) KN_WUR;

/* The channels-last tactics (conv_igemm_nhwc, conv_depthwise_nhwc,
 * conv_winograd_nhwc) for an NhwcFusedConv: x [n, h, w, c], geo from the
 * NCHW view, s NULL or the input-channel scale [n, c], ep with the bias per
 * output channel and a residual [n, oh, ow, m].  The m output channels go
 * to channels [y_off, y_off + m) of y [n, oh, ow, C] (C = m, y_off = 0 for
 * a plain conv; a wider C when the conv writes its slice of a Concat in
 * place, then without a residual).  *done = false when the node's tactic
 * is not one of them or the run is not a case they take. */
kn_status kn_conv_nhwc_fast(kn_op_ctx *ctx, const kn_conv_geom *geo, const kn_tensor *x,
                            const float *s, const kn_tensor *w, const kn_epilogue *ep,
                            kn_tensor *y, int64_t y_off, bool *done) KN_WUR;

/* ---- reduced precision (conv_lowp.c) --------------------------------------
 * NhwcFusedConv on conv_igemm_nhwc when n->precision is int8, bf16, fp16
 * or fp16-weights, and bf16 on conv_winograd_nhwc (kernels/conv/
 * conv-lowp.h). */

/* The `precisions` hook of NhwcFusedConv: int8, bf16, fp16 and
 * fp16-weights for a 2-D fp32 convolution with constant weights that is
 * not depthwise (int8: depth taps x c/group <= KN_QGEMM_K_MAX). */
uint32_t kn_conv_precisions(const kn_graph *g, const kn_node *n, int32_t isa);
/* The kernel type (kn_conv_lowp_type) of a precision; false for fp32. */
bool kn_conv_lowp_type_of(int32_t precision, int32_t *type);
/* Pack hook body for such a node: w [m, c/group, kh, kw] fp32. */
kn_status kn_conv_lowp_pack(const kn_node *n, const kn_conv2d *c, const kn_tensor *w,
                            const kn_target *target, void **packed, kn_error *err) KN_WUR;
void kn_conv_lowp_tiling(const kn_node *n, const kn_conv2d *c, const kn_target *target,
                         char *buf, size_t len);
/* Runs the conv at ctx->node's precision (the arguments of
 * kn_f32_conv_nhwc; y already offset to the step's channel slice). */
kn_status kn_conv_lowp_run(kn_op_ctx *ctx, int32_t tactic, const kn_conv2d *c, const float *x,
                           const float *s, const kn_tensor *w, const kn_epilogue *ep,
                           float *y) KN_WUR;

/* The kernels' 2-D geometry (kernels/conv/conv.h) of a complete 2-D geo. */
kn_conv2d kn_conv2d_of(const kn_conv_geom *geo);

/* A Conv / FusedConv whose best tactic is channels-first (conv_tactics.c): one
 * the NCHW Winograd F(4,3) kernel would take that the channels-last one
 * cannot (none today: kept so that a future channels-first-only tactic has
 * one place to say so).  The channels_last pass asks it. */
bool kn_conv_prefers_nchw(const kn_graph *g, const kn_node *n);

/* The runs of FusedConv and NhwcFusedConv (fused_conv.c) and the hooks
 * and run of NhwcExpandDwConv (expand_dw_tactics.c), for the table. */
kn_status kn_fused_conv_fast(kn_op_ctx *ctx);
kn_status kn_nhwc_conv_fast(kn_op_ctx *ctx);
int32_t kn_edw_select(const kn_graph *g, const kn_node *n, int32_t isa);
kn_status kn_edw_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                      void **packed, kn_error *err) KN_WUR;
kn_status kn_edw_fast(kn_op_ctx *ctx);

#endif
