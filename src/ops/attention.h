/* kiln's Attention (src/ops/attention.c): what its tactics
 * (src/tactics/attention_tactics.c) share with the reference op. */
#ifndef KN_OPS_ATTENTION_H
#define KN_OPS_ATTENTION_H

#include "kernels/attention/attention-kernels.h"
#include "op.h"

/* Where every element lives: the streamed kernel's arguments (batch, head,
 * row strides) plus the feature strides the reference also handles. */
typedef struct kn_att_plan {
  kn_f32_attention_args a;
  int64_t q_sd, v_se, o_se;
} kn_att_plan;

/* The plan of ctx's step at run time (inputs checked, output ready, the
 * scale); *empty when the output has no elements (nothing to compute). */
kn_status kn_attention_plan(kn_op_ctx *ctx, kn_att_plan *plan, bool *empty) KN_WUR;

#endif
