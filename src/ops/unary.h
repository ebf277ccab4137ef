/* The unary family (src/ops/unary.c): what its tactics
 * (src/tactics/unary_tactics.c) share with the reference ops. */
#ifndef KN_OPS_UNARY_H
#define KN_OPS_UNARY_H

#include "op.h"

/* A unary op's attributes, its defaults where absent. */
typedef struct kn_unary_params {
  float alpha, beta, gamma, lambd, bias;
} kn_unary_params;

/* The start of a unary math op's run (Relu, Exp, ...): input x checked as
 * infer checks it, output 0 ready with x's dtype and shape, attributes. */
kn_status kn_unary_begin(kn_op_ctx *ctx, const kn_tensor **x, kn_tensor **o,
                         kn_unary_params *p) KN_WUR;
/* The same for Clip; kn_clip_bounds: its bounds for a float input (the
 * min / max attributes before opset 11, the optional inputs after). */
kn_status kn_clip_begin(kn_op_ctx *ctx, const kn_tensor **x, kn_tensor **o) KN_WUR;
void kn_clip_bounds(const kn_op_ctx *ctx, double *lo, double *hi);

#endif
