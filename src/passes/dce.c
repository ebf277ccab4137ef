/* Dead-code elimination: a node none of whose results is read (by a node,
 * a subgraph or the graph's outputs) is removed; removal can make its
 * producers dead in turn, so nodes are visited last to first.  Every op
 * kiln runs is free of side effects, so nothing else keeps a node alive.
 * Constants nothing reads any more (weights folded into new ones, say) are
 * dropped too, so they do not reach the engine file. */
#include "pass.h"

static void unuse(int32_t v, int32_t node, void *arg) {
  (void)node;
  ((int32_t *)arg)[v]--;
}

kn_status kn_pass_dce(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  int32_t *uses = kn_calloc((size_t)g->n_values + 1, sizeof *uses);
  if (!uses) return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
  kn_graph_use_counts(g, uses);
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    bool used = false;
    for (int32_t o = 0; o < n->n_outputs && !used; o++)
      used = n->outputs[o] >= 0 && uses[n->outputs[o]] > 0;
    if (used) continue;
    n->dead = true;
    *changed = true;
    kn_node_foreach_read(g, n, unuse, i, uses);
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    kn_value *val = &g->values[v];
    if (!val->constant || uses[v] > 0 || val->is_input || val->is_output) continue;
    kn_tensor_release(val->constant);
    free(val->constant);
    val->constant = NULL;
    *changed = true;
  }
  free(uses);
  return KN_OK;
}
