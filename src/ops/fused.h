/* The fused family (src/ops/fused.c): what the channels-last steps
 * (layout.c), the expand-depthwise step (expand_dw.c) and the fused
 * steps' tactics (src/tactics/conv, src/tactics/gemm) share of FusedConv
 * and FusedGemm. */
#ifndef KN_OPS_FUSED_H
#define KN_OPS_FUSED_H

#include "conv_ref.h"
#include "kernels/kernels.h"
#include "op.h"

/* The FusedConv activation named by the node's attributes <prefix>activation,
 * <prefix>activation_alpha, ... */
kn_status kn_fused_conv_act(kn_op_ctx *ctx, const char *prefix, kn_act_params *act,
                            bool *res_first) KN_WUR;

/* FusedConv's input X' at run time: X itself (*x = input 0), or with a
 * channel scale S (input 4) X * S[n, c] made in `scaled` (scaled->data is
 * the caller's to free; NULL when not made). */
kn_status kn_fused_conv_input(kn_op_ctx *ctx, const kn_tensor **x, kn_tensor *scaled) KN_WUR;

/* A FusedConv run on input x (X'): geometry, output, and the epilogue as
 * the kernels take it (bias per output channel, residual z of the output's
 * shape when z_same, else broadcast, activation). */
typedef struct kn_fused_conv_plan {
  kn_conv_geom g;
  kn_tensor *y;
  const float *bias, *z;
  bool z_same, res_first;
  kn_act_params act;
} kn_fused_conv_plan;

/* The plan of ctx's FusedConv on x; *empty when the output has no
 * elements (nothing to compute). */
kn_status kn_fused_conv_begin(kn_op_ctx *ctx, const kn_tensor *x, kn_fused_conv_plan *p,
                              bool *empty) KN_WUR;

/* A FusedGemm run: attributes, the product's rows x n (depth k), output y
 * of shape (rank, dims), and the epilogue as the kernels take it (z: the
 * residual, of the output's exact shape when z_same). */
typedef struct kn_fused_gemm_plan {
  bool ta, tb;
  float alpha, beta;
  int64_t rows, n, k;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  kn_tensor *y;
  kn_act_params act;
  bool res_first, z_same;
  const float *z;
} kn_fused_gemm_plan;

/* The plan of ctx's FusedGemm at run time, checked; *empty when the output
 * has no elements (nothing to compute). */
kn_status kn_fused_gemm_begin(kn_op_ctx *ctx, kn_fused_gemm_plan *p, bool *empty) KN_WUR;
/* The epilogue over y after the product (beta * C broadcast, activation,
 * residual), as the reference applies it. */
kn_status kn_fused_gemm_epilogue(kn_op_ctx *ctx, const kn_fused_gemm_plan *p) KN_WUR;

#endif
