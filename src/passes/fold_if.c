/*
 * An If whose condition is a constant -> the branch it takes, inlined:
 *
 *   y1.. = If(c) {then_branch} {else_branch}     c constant (folded, or an
 *                                                input pinned at build)
 *   ->  the chosen branch's nodes in the enclosing graph, its outputs
 *       y1.. (through Identity steps the noop pass then removes)
 *
 * Exporters put whole networks inside an If on a configuration input (a
 * voice-activity model on its sample rate; a decoder on whether a KV cache
 * is given).  Once the condition is known the branch is ordinary graph:
 * every pass, the memory plan and the prepacked fast kernels then apply to
 * it, and the If's per-run overhead is gone.
 *
 * The branch's values map to the enclosing graph: its references to outer
 * values to those values, its constants to new constants, every other
 * value to a new value named after it (made unique).  Left alone: a branch
 * with nested subgraphs of its own (their outer references would need
 * remapping) and a condition that is not a one-element constant.
 */
#include "pattern.h"

static kn_status oom(kn_pass_ctx *ctx) {
  return kn_fail(ctx->err, KN_ERR_OOM, "out of memory inlining an If branch");
}

/* Whether branch b takes inputs other than its own initializers. */
static bool has_inputs(const kn_graph *b) {
  for (int32_t i = 0; i < b->n_inputs; i++)
    if (!b->values[b->inputs[i]].constant) return true;
  return false;
}

static bool has_subgraphs(const kn_graph *b) {
  for (int32_t i = 0; i < b->n_nodes; i++)
    for (int32_t a = 0; a < b->nodes[i].n_attrs; a++) {
      kn_attr_type t = b->nodes[i].attrs[a].type;
      if (t == KN_ATTR_GRAPH || t == KN_ATTR_GRAPHS) return true;
    }
  return false;
}

/* Inlines branch b of If node ni of g; the If is marked dead. */
static kn_status inline_branch(kn_pass_ctx *ctx, kn_graph *g, int32_t ni, const kn_graph *b) {
  int32_t *map = kn_calloc((size_t)b->n_values + 1, sizeof *map);
  if (!map) return oom(ctx);
  kn_status st = KN_OK;
  for (int32_t v = 0; v < b->n_values && !st; v++) {
    const kn_value *bv = &b->values[v];
    if (bv->outer >= 0) {
      map[v] = bv->outer;
    } else if (bv->constant) {
      kn_tensor t;
      memset(&t, 0, sizeof t);
      if (kn_tensor_copy(&t, bv->constant, NULL) || (map[v] = kn_graph_add_constant(g, bv->name, &t)) < 0) {
        kn_tensor_release(&t);
        st = oom(ctx);
      }
    } else {
      map[v] = kn_graph_add_fresh_value(g, bv->name);
      if (map[v] < 0) st = oom(ctx);
      else g->values[map[v]].type = bv->type;
    }
  }
  int32_t ins[64], outs[64];
  for (int32_t i = 0; i < b->n_nodes && !st; i++) {
    const kn_node *bn = &b->nodes[i];
    if (bn->n_inputs > 64 || bn->n_outputs > 64) {
      st = kn_fail(ctx->err, KN_ERR_LIMIT, "If branch node '%s' has more than 64 inputs or outputs",
                   bn->name);
      break;
    }
    for (int32_t k = 0; k < bn->n_inputs; k++) ins[k] = bn->inputs[k] >= 0 ? map[bn->inputs[k]] : -1;
    for (int32_t k = 0; k < bn->n_outputs; k++)
      outs[k] = bn->outputs[k] >= 0 ? map[bn->outputs[k]] : -1;
    int32_t nn = kn_graph_new_node(g, bn->op_type, bn->domain, bn->name, bn->n_inputs, ins,
                                   bn->n_outputs, outs);
    if (nn < 0 || !kn_node_copy_attrs(&g->nodes[nn], bn)) {
      st = oom(ctx);
      break;
    }
    g->nodes[nn].opset = bn->opset;
  }
  /* the If's results: Identity of each branch output */
  const kn_node *n = &g->nodes[ni];
  int32_t n_out = n->n_outputs;
  int32_t *ifo = kn_calloc((size_t)n_out + 1, sizeof *ifo);
  char *name = n->name ? kn_strdup(n->name) : NULL;
  int32_t opset = n->opset;
  if (!ifo || !name) st = st ? st : oom(ctx);
  for (int32_t o = 0; o < n_out && !st; o++) ifo[o] = g->nodes[ni].outputs[o];
  for (int32_t o = 0; o < n_out && !st; o++) {
    if (ifo[o] < 0) continue;
    int32_t src = map[b->outputs[o]];
    int32_t nn = kn_graph_new_node(g, "Identity", "", name, 1, &src, 1, &ifo[o]);
    if (nn < 0) st = oom(ctx);
    else g->nodes[nn].opset = opset < 1 ? 1 : opset;
  }
  if (!st) g->nodes[ni].dead = true;
  free(ifo);
  free(name);
  free(map);
  return st;
}

kn_status kn_pass_fold_if(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead || !kn_pat_is(n, "If") || n->n_inputs < 1 || n->inputs[0] < 0) continue;
    kn_tensor c;
    if (!kn_pat_const(g, n->inputs[0], &c) || kn_tensor_numel(&c) != 1 || !c.data ||
        c.dtype == KN_DTYPE_STRING)
      continue;
    bool take = kn_load_f64(c.data, c.dtype, 0) != 0;
    const kn_attr *a = kn_node_attr(n, take ? "then_branch" : "else_branch");
    if (!a || a->type != KN_ATTR_GRAPH || !a->g || has_subgraphs(a->g) ||
        a->g->n_outputs != n->n_outputs || has_inputs(a->g))
      continue;
    kn_status st = inline_branch(ctx, g, i, a->g);
    if (st) return st;
    *changed = true;
  }
  return KN_OK;
}
