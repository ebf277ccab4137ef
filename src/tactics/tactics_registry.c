/* The tactics registry (tactics.h): lookup, binding and selection. */
#include "tactics.h"

static const kn_op_tactics *const families[] = {
#define KN_TACTICS_FAMILY(f) kn_tactics_##f,
#include "tactic_families.inc"
#undef KN_TACTICS_FAMILY
    NULL,
};

const kn_op_tactics *kn_tactics_for(const char *domain, const char *op_type) {
  if (!op_type) return NULL;
  for (size_t f = 0; families[f]; f++)
    for (const kn_op_tactics *t = families[f]; t->op_type; t++)
      if (!strcmp(t->op_type, op_type) && kn_domain_eq(t->domain, domain)) return t;
  return NULL;
}

void kn_tactics_foreach(void (*fn)(const kn_op_tactics *t, void *arg), void *arg) {
  for (size_t f = 0; families[f]; f++)
    for (const kn_op_tactics *t = families[f]; t->op_type; t++) fn(t, arg);
}

static void bind_graph(kn_graph *g) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    n->impl = kn_tactics_for(n->domain, n->op_type);
    for (int32_t a = 0; a < n->n_attrs; a++) {
      kn_attr *at = &n->attrs[a];
      if (at->type == KN_ATTR_GRAPH && at->g) bind_graph(at->g);
      if (at->type == KN_ATTR_GRAPHS)
        for (int32_t k = 0; k < at->n; k++) bind_graph(at->graphs[k]);
    }
  }
}

void kn_tactics_bind(struct kn_ir_model *m) { bind_graph(m->graph); }

static void select_graph(kn_graph *g, int32_t isa, bool reference) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    n->impl = kn_tactics_for(n->domain, n->op_type);
    int32_t t = 0;
    if (!reference && n->impl && n->impl->select) t = n->impl->select(g, n, isa);
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

uint32_t kn_tactics_packed_inputs(const kn_graph *g, const kn_node *n) {
  const kn_op_tactics *t = kn_tactics_of(n);
  if (!n->tactic || !t || !t->pack) return 0;
  return t->replaces ? t->replaces(g, n) : 1u << 1;
}
