/* Internal view of models and contexts, for the CLI's inspection code and
 * the conformance tests (which feed sequences and optionals). */
#ifndef KN_ENGINE_H
#define KN_ENGINE_H

#include "exec.h"

struct kn_model {
  kn_ir_model *ir;
  int32_t n_inputs;  /* graph inputs not backed by an initializer */
  int32_t *inputs;   /* indices into ir->graph->inputs */
};

const kn_ir_model *kn_model_ir(const kn_model *m);
/* Bind any kind of value (tensor, sequence, none) to input `index`. */
kn_status kn_context_set_input_slot(kn_context *ctx, int32_t index,
                                    const kn_slot *s, kn_error *err) KN_WUR;
const kn_slot *kn_context_output_slot(const kn_context *ctx, int32_t index);

#endif
