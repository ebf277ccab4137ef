/* kiln's activation ops (src/ops/activation.c): what their tactics
 * (src/tactics/activation_tactics.c) share with the reference ops. */
#ifndef KN_OPS_ACTIVATION_H
#define KN_OPS_ACTIVATION_H

#include "op.h"

/* Gelu's form: *tanh_form for approximate = "tanh" (fails unless it is
 * "none" or "tanh"). */
kn_status kn_gelu_tanh_attr(kn_op_ctx *ctx, bool *tanh_form) KN_WUR;

/* A kiln-domain alias (HardSwish, LayerNormalization): the standard op of
 * the same name it runs, and in *c a copy of ctx at the opset that
 * introduced that op (its `since`), whatever the model imports. */
const kn_op_def *kn_alias_target(const kn_op_ctx *ctx, kn_op_ctx *c);

#endif
