/* The quantization family (src/ops/quant.c): what its tactics
 * (src/tactics/quant_tactics.c) share with the reference ops. */
#ifndef KN_OPS_QUANT_H
#define KN_OPS_QUANT_H

#include "op.h"

/* Whether QuantizeLinear's scale and zero point (inputs 1 and 2) are one
 * value for the whole of x (input 0); fails as the run does when they do
 * not fit x. */
kn_status kn_quant_per_tensor(kn_op_ctx *ctx, bool *per_tensor) KN_WUR;

/* DynamicQuantizeLinear: the scale and zero point of the range [mn, mx]
 * (which includes 0), and storing them into outputs 1 and 2. */
void kn_dynq_scale(float mn, float mx, float *scale, float *zero);
void kn_dynq_store(kn_op_ctx *ctx, float scale, float zero);

#endif
