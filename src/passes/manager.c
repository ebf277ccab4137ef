/* The pass table and the pass manager. */
#include "pass.h"

const kn_pass_def kn_passes[] = {
#define KN_PASS(name, summary) {#name, summary, kn_pass_##name},
#include "passes.inc"
#undef KN_PASS
};
const int32_t kn_n_passes = (int32_t)(sizeof kn_passes / sizeof kn_passes[0]);

const kn_pass_def *kn_pass_find(const char *name) {
  for (int32_t i = 0; i < kn_n_passes; i++)
    if (!strcmp(kn_passes[i].name, name)) return &kn_passes[i];
  return NULL;
}

static bool disabled(const kn_optimize_options *o, const char *name) {
  for (int32_t i = 0; o && i < o->n_disabled; i++)
    if (!strcmp(o->disabled[i], name)) return true;
  return false;
}

#define KN_MAX_ROUNDS 16
/* Subgraphs nested deeper than this are left as imported. */
#define KN_MAX_SUBGRAPH_DEPTH 8

/* The passes over graph g until none changes it (at most KN_MAX_ROUNDS),
 * then over each subgraph of its nodes (If branches, Loop and Scan
 * bodies), which are optimized like the top-level graph: their steps get
 * the same fusions, folding and layouts, and the runtime prepares them
 * once (exec.c) instead of interpreting the imported body. */
static kn_status optimize_graph(kn_pass_ctx *ctx, const kn_optimize_options *o, kn_graph *g,
                                int32_t depth) {
  kn_ir_model *m = ctx->m;
  kn_error *err = ctx->err;
  for (int round = 0; round < KN_MAX_ROUNDS; round++) {
    bool any = false;
    for (int32_t p = 0; p < kn_n_passes; p++) {
      if (disabled(o, kn_passes[p].name)) continue;
      bool changed = false;
      kn_status st = kn_passes[p].run(ctx, g, &changed);
      if (!st && changed) {
        st = kn_graph_compact(g, m->label, err);
        if (!st) st = kn_ops_prepare(m, err);
      }
      if (st) {
        kn_error_prefix(err, "optimization pass '%s'%s", kn_passes[p].name,
                        g->parent ? " (in a subgraph)" : "");
        return st;
      }
      any |= changed;
    }
    if (!any) break;
  }
  if (depth >= KN_MAX_SUBGRAPH_DEPTH) return KN_OK;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t a = 0; a < g->nodes[i].n_attrs; a++) {
      kn_attr *at = &g->nodes[i].attrs[a];
      int32_t cnt = at->type == KN_ATTR_GRAPH ? 1 : at->type == KN_ATTR_GRAPHS ? at->n : 0;
      for (int32_t k = 0; k < cnt; k++) {
        kn_graph *sg = at->type == KN_ATTR_GRAPH ? at->g : at->graphs[k];
        kn_status st = sg ? optimize_graph(ctx, o, sg, depth + 1) : KN_OK;
        if (st) return st;
      }
    }
  return KN_OK;
}

kn_status kn_optimize(kn_ir_model *m, const kn_optimize_options *o, kn_error *err) {
  for (int32_t i = 0; o && i < o->n_disabled; i++)
    if (!kn_pass_find(o->disabled[i]))
      return kn_fail(err, KN_ERR_INVALID_ARG, "no optimization pass is named '%s'",
                     o->disabled[i]);
  kn_pass_ctx ctx = {.m = m, .err = err,
                     .fold_max_bytes = o && o->fold_max_bytes ? o->fold_max_bytes
                                                              : ((int64_t)16 << 20),
                     .machine = o ? o->machine : NULL,
                     .decisions = o ? o->decisions : NULL};
  return optimize_graph(&ctx, o, m->graph, 0);
}
