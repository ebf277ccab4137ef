/* The executor's internals, shared by its files (exec.h tells the phases):
 *   exec.c          the runner's lifetime: graph-static tables (op
 *                   contexts, liveness), subgraph runners, kn_runner_run
 *   exec_prepare.c  prepare: signature, plan binding, per-step decisions
 *   exec_run.c      execute: the step loop and the per-run services */
#ifndef KN_EXEC_IMPL_H
#define KN_EXEC_IMPL_H

#include "exec.h"
#include "tactics/tactics.h"

/* Checking builds (cmake -DKILN_EXEC_CHECK=ON, which defines
 * KN_EXEC_CHECK=1) hold kernels to the output contract of ops/op.h:
 * outputs whose contents are unspecified are filled with 0xff bytes (NaN)
 * instead of being left as they are, a fixed step's prepared shapes are
 * compared with its infer on the real values, and its outputs are checked
 * after the kernel. */
#ifndef KN_EXEC_CHECK
#define KN_EXEC_CHECK 0
#endif

/* Where an output's buffer comes from. */
typedef enum kn_exec_bind {
  KN_BIND_ARENA = 0, /* a view into the arena at its planned offset */
  KN_BIND_INPLACE,   /* a view of the arena bytes of its in-place input
                        (output 0 over input inplace_input, or a Concat over
                        its parts): holds the input's values, never zeroed */
  KN_BIND_OUTPUT,    /* a graph output: the buffer the previous run left in
                        outs[j] when its size is the same, else allocated */
  KN_BIND_HEAP,      /* allocated per run, against the memory limit (no
                        plan, no planned slot or too big for it, empty,
                        strings, an output nobody reads) */
} kn_exec_bind;

/* kn_runner.rule: what prepare may do with a step (from the graph). */
#define KN_RULE_SUBGRAPH 1u /* has subgraphs: always dynamic */
#define KN_RULE_SHAPE_OF 2u /* Shape, Size: output values from input shapes */
#define KN_RULE_RANDOM 4u   /* nondeterministic: outputs never valued */

/* Steps whose inputs are all valued are run at prepare when no output has
 * more elements than this (shape arithmetic: Shape -> Gather -> Concat ->
 * Reshape), so that the steps after them can be fixed. */
#define KN_PREPARE_VALUES_MAX 4096

/* One output's placement, as kn_exec_decide makes it. */
typedef struct kn_exec_place {
  uint8_t bind;     /* kn_exec_bind */
  uint8_t zero;     /* zero it before the kernel (reference tactic) */
  uint8_t skip_run; /* an aliasing op over its own input: nothing to copy */
  char *data;       /* ARENA, INPLACE: where */
} kn_exec_place;

/* A step as prepare decided it for the current signature. */
typedef struct kn_step {
  uint8_t fixed;    /* shapes and placements decided; else dynamic */
  uint8_t views;    /* fixed, and every output is ARENA or INPLACE */
  uint8_t skip_run; /* fixed, and the kernel is not called */
  uint8_t inplace;  /* fixed, and output 0 is INPLACE: the run checks that
                       its input really is there (else runs it dynamic) */
  uint32_t zero;    /* fixed: bit o, output o is zeroed before the kernel */
} kn_step;

/* What the steps' op contexts point at (ctx->exec): run_subgraph's view
 * of the run in progress. */
typedef struct kn_exec_frame {
  const kn_ir_model *m;
  const kn_graph *g;
  kn_slot *env;
  kn_mem_budget *mem;
  kn_error *err;
  struct kn_runner *runner;
  kn_slot *outs;            /* the caller's outputs (recycled buffers) */
  const kn_mem_plan *plan;  /* this run's plan and arena, or NULL */
  char *arena;
} kn_exec_frame;

struct kn_runner {
  /* ---- graph-static (kn_runner_create) ---- */
  const kn_ir_model *m;
  const kn_graph *g;
  int32_t nv, nn, max_out;
  kn_slot *env;         /* one slot per value of g */
  kn_slot *scratch;     /* outputs nobody reads (max_out) */
  kn_op_ctx *ctx;       /* per step: its op context (in/out point into env) */
  kn_slot **slots;      /* ctx[i].in and ctx[i].out */
  int32_t *out_index;   /* per value: its index in g->outputs, or -1 */
  int32_t *out_off;     /* per step: its first output in rec and place */
  uint8_t *rule;        /* per step: KN_RULE_* (what prepare may do) */
  int32_t *rel, *rel_off; /* liveness: step i releases rel[rel_off[i] ..
                             rel_off[i + 1]) after it runs */
  int32_t *setup, n_setup; /* constants and outer values, set per run */
  kn_exec_frame fr;
  /* a subgraph's own memory plan and arena (see kn_mem_budget.plan) */
  kn_mem_plan own_plan;
  char *own_arena;
  /* runners of the subgraphs this graph's nodes run */
  int32_t n_sub, cap_sub;
  struct kn_sub_entry {
    const kn_graph *g;
    struct kn_runner *r;
  } *sub;
  /* (A KV cache goes here: persistent buffers, not planned and not
   * released by liveness; see exec.h.) */

  /* ---- plan binding: once per memory plan (kn_exec_bind_plan) ---- */
  const kn_mem_plan *plan_for;
  bool plan_bound;
  int32_t *planned;     /* per value: its tensor in plan_for, or -1 */

  /* ---- a subgraph's prepacked weights: per step, its tactic's pack of
   * its constant weights for own_packed_isa, made at its first prepare and
   * kept while the runner lives (the top-level graph's come with the
   * model, mem->packed) ---- */
  void **own_packed;
  int32_t own_packed_isa;

  /* ---- prepared: once per signature (kn_exec_prepare) ---- */
  bool prepared;
  int64_t n_prepares;
  char *prep_arena;
  struct kn_rt *prep_rt;
  const void *const *prep_packed;
  kn_slot *sig;         /* per graph input: kind, dtype and shape */
  bool *sig_given;
  kn_slot *osig;        /* subgraphs: per value, an outer value's shape */
  kn_step *step;        /* per step */
  kn_tensor *rec;       /* per step output: header (data: views only) */
  uint8_t *place;       /* per step output: kn_exec_bind */
  bool *known;          /* per value: its shape is known at prepare */
  bool *valued;         /* per value: its values are known at prepare and
                           follow from the signature (constants, Shape of a
                           known shape, what steps compute from those) */
  kn_error *err_for;    /* the kn_error the step contexts write to */
};

/* ---- exec.c ---- */
/* A subgraph runner's packed weights for `isa` (r->own_packed), packed now
 * unless they are for that ISA already; a step whose pack fails runs
 * unpacked (its kernel packs per run), as at the top level without
 * prepacked weights. */
void kn_exec_pack_subgraph(kn_runner *r, int32_t isa);

/* ---- exec_prepare.c ---- */
/* Map values to the plan's tensors (plan NULL: none); invalidates the
 * preparation. */
kn_status kn_exec_bind_plan(kn_runner *r, const kn_mem_plan *plan, kn_error *err) KN_WUR;
/* True when the run's signature (inputs, outer values, runtime, packed
 * weights, arena) matches the prepared one. */
bool kn_exec_same_signature(const kn_runner *r, const kn_slot *const *inputs,
                            const kn_slot *parent_env, const kn_mem_budget *mem, char *arena);
/* Prepare every step for this signature (exec.h). */
kn_status kn_exec_prepare(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                          kn_mem_budget *mem, kn_error *err) KN_WUR;
/* Decide where output o of step i (of dtype and complete shape `shape`)
 * goes in this run: in_dtype and in_data are the dtype of the step's
 * in-place input (kn_op_def.inplace_input) and where its bytes are (NULL:
 * not known, not a tensor). */
void kn_exec_decide(const kn_runner *r, const kn_exec_frame *f, int32_t i, int32_t o,
                    const kn_tensor *shape, kn_dtype in_dtype, const void *in_data,
                    kn_exec_place *p);
/* Borrow a value: a view of src with nothing owned (a sequence's item
 * array is private, its items borrowed). */
void kn_exec_borrow(kn_slot *dst, const kn_slot *src);
/* Set the values a run starts from in r->env (clean): constants, outer
 * values (borrowed from parent_env), graph inputs (borrowed). */
void kn_exec_set_inputs(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs);

/* ---- exec_run.c ---- */
/* Execute the prepared steps (exec.h); the runner must be prepared. */
kn_status kn_exec_execute(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                          kn_slot *outs, kn_mem_budget *mem, kn_error *err) KN_WUR;
/* kn_op_ctx.run_subgraph of every step. */
kn_status kn_exec_run_subgraph(kn_op_ctx *ctx, const kn_graph *g, int32_t n_in,
                               const kn_slot *const *in, int32_t n_out, kn_slot *out);

/* ---- exec.c ---- */
/* The runner of subgraph g of r's graph (made at its first use). */
kn_status kn_exec_sub_runner(kn_runner *r, const kn_graph *g, kn_runner **out,
                             kn_error *err) KN_WUR;

/* Bytes a tensor of `shape` needs (0 when empty or of an invalid dtype). */
static inline uint64_t kn_exec_need(const kn_tensor *shape) {
  int64_t cnt = kn_tensor_numel(shape);
  return cnt > 0 && kn_dtype_is_valid(shape->dtype) ? (uint64_t)cnt * kn_dtype_size(shape->dtype)
                                                    : 0;
}

#endif
