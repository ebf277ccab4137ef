/*
 * Memory planning under a workspace budget: when the lifetime-planned
 * arena (plan.h) is larger than the workspace, trade compute for memory
 * by rewriting the graph, chosen by the IO model's predicted extra time
 * per byte saved, until the plan fits (budget.c).
 */
#ifndef KN_BUDGET_H
#define KN_BUDGET_H

#include "plan.h"
#include "core/machine.h"

typedef struct kn_budget_options {
  uint64_t workspace;        /* cap on the arena in bytes; 0: none */
  bool rewrite;              /* may rewrite the graph (false: only plan and check) */
  const kn_machine *machine; /* the IO model's machine */
  int32_t threads;           /* threads the IO model predicts for */
  kn_lines *decisions;       /* one line per rewrite; NULL: dropped */
} kn_budget_options;

/* Plan m's top-level graph into *out (as kn_plan_memory with no cap).
 * When the arena exceeds o->workspace and o->rewrite is set, rewrite the
 * graph step by step (patch.h: runs of steps in bands of rows) and plan
 * again, until the arena fits; each rewrite is recorded in o->decisions
 * with the bytes it saved and its predicted time.  Fails with KN_ERR_LIMIT
 * when nothing fits, naming the smallest arena reached and how many bytes
 * the workspace is short of it; *out is then empty (the graph may have
 * been rewritten). */
kn_status kn_plan_under_budget(kn_ir_model *m, const kn_budget_options *o, kn_mem_plan *out,
                               kn_error *err) KN_WUR;

#endif
