/* The reference executor: runs IR graphs node by node with the ops'
 * reference kernels, freeing each value after its last use. */
#ifndef KN_EXEC_H
#define KN_EXEC_H

#include "ops/op.h"

/* Bytes of tensors live during a run, against a cap (shared by subgraphs). */
typedef struct kn_mem_budget {
  uint64_t limit;
  uint64_t live;
} kn_mem_budget;

/* Run graph g.  `inputs` has g->n_inputs entries (borrowed; NULL for an
 * input fed by its initializer); `parent_env` holds the values of the
 * enclosing graph (for subgraphs) or NULL.  Outputs are written (owned) into
 * outs[0..g->n_outputs). */
kn_status kn_exec_graph(const kn_ir_model *m, const kn_graph *g,
                        const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;

#endif
