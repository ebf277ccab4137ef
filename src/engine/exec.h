/* The executor: runs IR graphs step by step (a step is a node of the graph,
 * in order) with the ops' kernels, freeing each value after its last use.
 *
 * A graph run repeatedly (a context's top-level graph, a Loop body) is held
 * by a kn_runner and runs in two phases, in the spirit of TFLite Micro's
 * Prepare/Eval:
 *
 *  prepare (exec_prepare.c), once per input signature: the kinds, dtypes
 *     and shapes of the graph inputs (for a subgraph also of the outer
 *     values it reads), and the plan, arena, runtime and packed weights the
 *     run is given.  Nothing of it depends on input values.  It decides, for
 *     every step:
 *      - fixed or dynamic: a step is fixed when its op's infer completes
 *        its output shapes from what prepare knows: every input's shape
 *        (graph inputs, constants, outer values, outputs of fixed steps),
 *        the values of constants, and the values of small tensors computed
 *        from those and from shapes alone (Shape -> Gather -> Concat ->
 *        Reshape: prepare runs such steps' kernels once, see
 *        KN_PREPARE_VALUES_MAX); the values of graph inputs and of what
 *        other steps compute are withheld (data NULL), so infer fails or
 *        leaves a dim unknown where they matter (ops/op.h).  Dynamic: the
 *        rest -- data-dependent shapes (NonZero, kn_op_def.data_shape,
 *        a Reshape to a shape read from data), control flow (subgraphs),
 *        sequences and optionals, a step reading a dynamic step's output,
 *        and a step whose infer fails (it fails again, with its values and
 *        in order, when it runs);
 *      - for a fixed step: its output shapes, and where each
 *        output lives (kn_exec_bind, exec_impl.h): a view into the arena
 *        (its pointer), over its in-place input's bytes, a graph output
 *        (the caller's buffer, recycled), or allocated per run; which
 *        outputs are zeroed before the kernel (ops/op.h's output contract);
 *        whether the kernel is skipped (an aliasing op over its own input);
 *        its op context (node, inputs, outputs, runtime, packed weights);
 *    and, once per runner (the graph alone decides it), liveness: the
 *    values released after each step.
 *  execute (exec_run.c), every run: a flat list of kernel calls.  A fixed
 *     step takes its prepared output headers (zeroing those marked), calls
 *     the kernel and releases what prepare said; a dynamic step does what
 *     every step did before this split: infer with the values, bind each
 *     output as prepare would (kn_exec_decide), run and check.  Around each
 *     step only per-run services remain: cancellation, profiling spans,
 *     observers, and the memory limit for outputs allocated per run.
 *
 * A run whose signature equals the previous run's executes at once; a new
 * one prepares again first.  Preparing allocates no tables (they are sized
 * at kn_runner_create; only the small values of shape arithmetic are
 * computed into buffers of their own, freed when it ends), so a shape that
 * changes by one dimension (a sequence growing by one token per decode
 * step) costs one walk of the steps calling each fixed step's infer and
 * placing its outputs, with no kernel work beyond shape arithmetic: about
 * what one inferred run of the former executor spent on shapes.  Every
 * step is walked again, though only those downstream of the changed input
 * get new shapes; if decode shows the walk, the place to cut it is
 * kn_exec_prepare: keep the steps whose inputs' shapes (and known values)
 * are unchanged, which a per-value shape comparison against the previous
 * preparation tells.
 *
 * State that outlives a run (a KV cache for LLM decoding) is not built yet.
 * Its place: a table of persistent buffers owned by the runner (beside
 * own_arena in struct kn_runner, exec_impl.h, where a comment marks it),
 * not planned in the arena, not released by liveness and not counted in
 * kn_mem_budget.live, each sized for the profile's MAX sequence and keyed
 * by the graph output / graph input pair it carries from one run to the
 * next (present.i -> past.i).  Prepare would place the output of the step
 * that makes present.i with a fifth kn_exec_bind value, KN_BIND_PERSIST:
 * a view of the persistent buffer with this run's shape, so that the
 * Concat(past, new) appends its new rows in place (as the planner's Concat
 * parts do in the arena: the past input is already there), and the next
 * run's past.i borrows those bytes (kn_exec_set_inputs) instead of the
 * caller copying them out and back in.  A contiguous append needs the
 * sequence axis outermost among the non-unit dims ([S, B, H, D], or B = H
 * = 1); a [B, H, S, D] cache grows inside each head, so its kernel must
 * take a row capacity (an attention op's attribute), not a plain view.
 * Growing by one token changes the signature, so prepare runs per token as
 * above; the persistent buffers stay, and are dropped when the context is
 * reset or the sequence exceeds MAX.
 */
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
   * arena + offset (over its input's bytes when planned in place); any
   * other output is allocated as without a plan.  Graph outputs are never
   * in the arena.  Subgraphs (Loop, Scan and If bodies) do not use it:
   * each subgraph runner plans its own graph once (kn_plan_memory) and
   * keeps an arena of its own when the body's intermediates have static
   * shapes, so that a body run once per iteration is prepared like the top
   * level (no inference, no allocation from the second iteration on).
   * That arena is not counted in `live`. */
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

/* A graph held for repeated runs (a context's top-level graph, a subgraph
 * body): the graph-static tables (liveness, op contexts) are made once at
 * create, the prepared steps once per input signature (see above).  Graph
 * outputs reuse the previous run's buffers (`outs`) when their size is
 * unchanged. */
typedef struct kn_runner kn_runner;
kn_status kn_runner_create(const kn_ir_model *m, const kn_graph *g, kn_runner **out,
                           kn_error *err) KN_WUR;
void kn_runner_free(kn_runner *r);
/* As kn_exec_graph, with the runner's graph: prepares when the signature
 * (or the plan, arena, runtime or packed weights in `mem`) differs from the
 * last run's, then executes.  A failed run forgets its preparation. */
kn_status kn_runner_run(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;
/* How many times r prepared (tests: a plan is reused across runs with the
 * same shapes and made again for a new one). */
int64_t kn_runner_prepare_count(const kn_runner *r);
/* How many of r's steps the last preparation fixed (the rest are dynamic). */
int32_t kn_runner_fixed_count(const kn_runner *r);

/* Run graph g once.  `inputs` has g->n_inputs entries (borrowed; NULL for
 * an input fed by its initializer); `parent_env` holds the values of the
 * enclosing graph (for subgraphs) or NULL.  Outputs are written (owned)
 * into outs[0..g->n_outputs). */
kn_status kn_exec_graph(const kn_ir_model *m, const kn_graph *g,
                        const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;

#endif
