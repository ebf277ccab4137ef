/*
 * Graph optimization passes.  Each pass is one file src/passes/<name>.c
 * defining kn_pass_<name>, listed once in passes.inc (the order there is
 * the order they run in).  A pass edits the top-level graph in place with
 * the IR editing API (ir.h), sets *changed when it did anything, and must
 * keep the model's results equal to the unoptimized graph's up to float
 * rounding.  After a pass that changed something the manager compacts the
 * graph and re-runs op resolution and shape inference, so a pass always
 * sees resolved ops (node->op) and inferred value types.
 */
#ifndef KN_PASS_H
#define KN_PASS_H

#include "ops/op.h"
#include "core/machine.h"

typedef struct kn_pass_ctx {
  kn_ir_model *m;
  kn_error *err;
  int64_t fold_max_bytes; /* constant folding: largest tensor it may create */
  /* the machine the IO model weighs fusions for (NULL: the fallback
   * description), and where passes record what it decided (NULL: not kept) */
  const kn_machine *machine;
  kn_lines *decisions;
} kn_pass_ctx;

typedef kn_status (*kn_pass_fn)(kn_pass_ctx *ctx, kn_graph *g, bool *changed);

typedef struct kn_pass_def {
  const char *name;    /* what --disable-pass takes */
  const char *summary; /* one line for `kiln build --help` */
  kn_pass_fn run;
} kn_pass_def;

#define KN_PASS(name, summary) \
  kn_status kn_pass_##name(kn_pass_ctx *ctx, kn_graph *g, bool *changed) KN_WUR;
#include "passes.inc"
#undef KN_PASS

/* The pass table, in run order. */
extern const kn_pass_def kn_passes[];
extern const int32_t kn_n_passes;
const kn_pass_def *kn_pass_find(const char *name);

typedef struct kn_optimize_options {
  const char *const *disabled; /* pass names not to run */
  int32_t n_disabled;
  int64_t fold_max_bytes;      /* 0: default (16 MiB) */
  const kn_machine *machine;   /* for the IO model's decisions; NULL: the fallback */
  kn_lines *decisions;         /* receives them, one line each; NULL: dropped */
} kn_optimize_options;

/* Run every enabled pass over the model until none changes anything. */
kn_status kn_optimize(kn_ir_model *m, const kn_optimize_options *o,
                      kn_error *err) KN_WUR;

#endif
