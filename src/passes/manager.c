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
  for (int round = 0; round < KN_MAX_ROUNDS; round++) {
    bool any = false;
    for (int32_t p = 0; p < kn_n_passes; p++) {
      if (disabled(o, kn_passes[p].name)) continue;
      bool changed = false;
      kn_status st = kn_passes[p].run(&ctx, m->graph, &changed);
      if (!st && changed) {
        st = kn_graph_compact(m->graph, m->label, err);
        if (!st) st = kn_ops_prepare(m, err);
      }
      if (st) {
        kn_error_prefix(err, "optimization pass '%s'", kn_passes[p].name);
        return st;
      }
      any |= changed;
    }
    if (!any) break;
  }
  return KN_OK;
}
