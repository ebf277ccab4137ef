#include "tactic.h"

#include "ops/op.h"

#include <stddef.h>

static const char *const names[] = {
#define KN_TACTIC(id, name, summary) [id] = #name,
#include "tactics.inc"
#undef KN_TACTIC
};

const char *kn_tactic_name(int32_t id) {
  if (id < 0 || (size_t)id >= sizeof names / sizeof names[0]) return NULL;
  return names[id];
}

static void select_graph(kn_graph *g, int32_t isa, bool reference) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    int32_t t = !reference && n->op && n->op->select ? n->op->select(g, n, isa) : 0;
    n->tactic = kn_tactic_name(t) ? t : 0;
    for (int32_t a = 0; a < n->n_attrs; a++) {
      kn_attr *at = &n->attrs[a];
      if (at->type == KN_ATTR_GRAPH && at->g) select_graph(at->g, isa, reference);
      if (at->type == KN_ATTR_GRAPHS)
        for (int32_t k = 0; k < at->n; k++) select_graph(at->graphs[k], isa, reference);
    }
  }
}

void kn_tactics_select(struct kn_ir_model *m, int32_t isa, bool reference) {
  select_graph(m->graph, isa, reference);
}
