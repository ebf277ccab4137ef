/* The reference executor: runs IR graphs node by node with the ops'
 * reference kernels, freeing each value after its last use. */
#ifndef KN_EXEC_H
#define KN_EXEC_H

#include "ops/op.h"
#include "core/threadpool.h"
#include "plan/plan.h"

/* Bytes of tensors live during a run, against a cap (shared by subgraphs),
 * and optionally a memory plan for the top-level graph. */
typedef struct kn_mem_budget {
  uint64_t limit;
  uint64_t live; /* owned bytes only: tensors in the arena do not count */
  /* Optional (both or neither): a plan of the top-level graph being run
   * (kn_plan_memory on this very graph) and an arena of at least
   * plan->arena_bytes bytes, aligned to plan->alignment.  An output whose
   * run-time size fits its planned size is then a view into
   * arena + offset (zeroed first, unless it is a planned in-place output
   * over its input's bytes); any other output is allocated as without a
   * plan.  Graph outputs are never in the arena.  Subgraphs (Loop, Scan
   * and If bodies) do not use it: each subgraph runner plans its own
   * graph once (kn_plan_memory) and keeps an arena of its own when the
   * body's intermediates have static shapes, so that a body run once per
   * iteration is recorded like the top level (no inference, no
   * allocation from the second iteration on).  That arena is not counted
   * in `live`. */
  const kn_mem_plan *plan;
  void *arena;
  /* Optional: called after each top-level step with each tensor it made. */
  void (*observe)(const char *name, const kn_tensor *t, void *arg);
  void *observe_arg;
  /* Optional: the fast kernels' runtime (ISA, threads, scratch).  Nodes
   * whose tactic is not 0 get it as ctx->rt; NULL runs every node with its
   * reference kernel. */
  struct kn_rt *rt;
  /* Optional: per top-level node, its prepacked weights (ctx->packed). */
  const void *const *packed;
  /* Optional: profiling; top-level steps append their spans. */
  struct kn_prof *prof;
  /* Optional: cancellation (kn_context_set_cancel, kn_context_set_deadline),
   * checked before every node of every graph and before every subgraph
   * run (each Loop or Scan iteration): a nonzero cancel(cancel_arg), or
   * deadline_ns > 0 reached on CLOCK_MONOTONIC, stops the run with
   * KN_ERR_CANCELLED. */
  int32_t (*cancel)(void *arg);
  void *cancel_arg;
  int64_t deadline_ns;
} kn_mem_budget;

/* A run's profile (kn_context_set_profiling): spans has room for every
 * step on every thread; pool_spans one per thread, handed to the pool. */
typedef struct kn_prof {
  kn_step_span *spans;
  int32_t n, cap;
  kn_pool_span *pool_spans;
  kn_pool *pool; /* NULL: one thread */
  int32_t threads;
} kn_prof;

/* A graph prepared for repeated runs (a context's top-level graph): the
 * bookkeeping is allocated once, and a run whose input shapes equal the
 * previous run's reuses every step's output shapes and arena pointers
 * instead of running shape inference again (the prepared hot path: a list
 * of kernel calls on fixed pointers).  A step is re-inferred when its op's
 * shapes depend on values (kn_op_def.data_shape, subgraphs, integer inputs
 * computed at run time) or its outputs are not in the arena.  Graph outputs
 * reuse the previous run's buffers (`outs`) when their size is unchanged. */
typedef struct kn_runner kn_runner;
kn_status kn_runner_create(const kn_ir_model *m, const kn_graph *g, kn_runner **out,
                           kn_error *err) KN_WUR;
void kn_runner_free(kn_runner *r);
/* As kn_exec_graph, with the runner's graph; `mem` must carry the same
 * plan and arena on every run. */
kn_status kn_runner_run(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;

/* Run graph g.  `inputs` has g->n_inputs entries (borrowed; NULL for an
 * input fed by its initializer); `parent_env` holds the values of the
 * enclosing graph (for subgraphs) or NULL.  Outputs are written (owned) into
 * outs[0..g->n_outputs). */
kn_status kn_exec_graph(const kn_ir_model *m, const kn_graph *g,
                        const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;

#endif
