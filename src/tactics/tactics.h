/*
 * Tactics: the fast paths of the ops, one place per op family, between the
 * reference ops (src/ops: the ONNX contract, inference and the reference
 * kernel) and the kernels (src/kernels).
 *
 * Each family that has fast kernels defines a table kn_tactics_<family>[]
 * (src/tactics/<family>_tactics.c, or src/tactics/<family>/ for the big ones) of
 * kn_op_tactics, one entry per op it serves, ended by KN_TACTICS_END;
 * families are listed once in src/tactics/tactic_families.inc.  An entry names
 * its op by domain and op_type (kn_tactics_for looks it up) and holds the
 * op's hooks:
 *
 *  select      the tactic (src/ops/tactics.inc) for node n of graph g,
 *              from the static types of its values and the ISA; 0 keeps
 *              the reference kernel.  Called at build for every node
 *              (kn_tactics_select).
 *  pack        prepacks the node's constant inputs (weights) for its tactic
 *              and ISA into *packed, a kn_packed block (kn_packed_alloc;
 *              NULL: nothing to pack).  Called once at build (and at engine
 *              load when the file holds no block for this machine's ISA)
 *              for top-level nodes whose tactic is not 0; the run gets it
 *              as ctx->packed.  The run must still work (packing per run,
 *              or the reference kernel) when ctx->packed is NULL.  Blocks
 *              are freed with kn_packed_free.
 *  tiling      the cache tiling node n runs with on target's machine, into
 *              buf: the blocking its pack hook chose ("kc 256 mc 144 nc
 *              3072"), or what its kernel plans from the capacities on one
 *              thread (more threads split that plan); an empty string:
 *              none.  `packed` is the node's block (NULL when it has none).
 *  loops       node n's loop nest for the IO model (loops.h), from the
 *              static types of g; false when the shapes are not known (or
 *              the op has no reuse to model: then it is counted as
 *              streaming its tensors once).
 *  candidates  every tactic that can run node n on `isa`, the `select`
 *              choice first, into out (at most max); returns the count.
 *              NULL: the select choice is the only one.  The builder times
 *              them (src/builder/timing.c).
 *  precisions  bit p (1u << kn_precision) for every precision node n can
 *              run in with some tactic on `isa`; fp32 is always allowed.
 *              NULL: fp32 only.  The builder sets n->precision (src/builder/
 *              step_precision.c) before tactics are selected: `select`,
 *              `candidates` and `pack` then honour it, and `run` reads it
 *              from ctx->node.
 *  run         the fast run: called instead of the op's reference run when
 *              the node's tactic is not 0 and the run has a runtime
 *              (ctx->rt: ISA, thread pool, scratch; ctx->packed: the
 *              node's block or NULL).  Outputs are allocated as for the
 *              reference run but not zeroed: the run writes every element.
 *              A case the tactic does not take (a dtype, a broadcast, a
 *              run-time shape it does not cover, a tactic id that is not
 *              one of its own: engines name them) is handed to the op's
 *              reference run, ctx->node->op->run, unchanged.
 *  replaces    the constant inputs (bit i: input i) whose bytes node n's
 *              fast run does not read once it has its block, packed for
 *              this ISA, and runs at the shapes it was packed for: what the
 *              block holds in their place.  NULL: input 1 alone (the weight
 *              operand: W of a convolution, B of a GEMM); the others (a
 *              bias, zero points) are taken to be read as they are.  An
 *              engine drops the pages of such originals (docs/MEMORY.md,
 *              "Resident memory"); a run that hands a case over to the
 *              reference still reads them, from the file.
 *
 * Every hook is optional.  Nodes point at their entry (kn_node.impl), set
 * with their tactic (kn_tactics_select) and when a model or engine is
 * loaded (kn_tactics_bind); passes and the IO model, which also see nodes
 * before tactics are selected, use kn_tactics_of.  Code that gives nodes a
 * tactic by hand (tests, benchmarks) binds them too: kn_tactics_run runs
 * an unbound node's reference.
 */
#ifndef KN_TACTICS_H
#define KN_TACTICS_H

#include "ops/op.h"
#include "ops/tactic.h"
#include "tactics/loops.h"

/* What a pack hook packs for: the ISA of the kernels, and the machine
 * whose capacities choose their blocking (NULL: this machine as the OS
 * reports it, kn_machine_from_os). */
typedef struct kn_target {
  int32_t isa;
  const kn_machine *machine;
} kn_target;

/* One core's L1d and L2 and the L3 of t's machine (kn_machine_caches;
 * target.c). */
void kn_target_caches(const kn_target *t, size_t *l1d, size_t *l2, size_t *l3);

/* Prepacked weights (a `pack` hook's) are one relocatable block: a single
 * 64-byte-aligned allocation (kn_packed_alloc) that holds no pointers and
 * starts with this header; the fast run finds its data by offsets from the
 * block's start.  Engine files store blocks verbatim (PACKED section) and
 * a loaded engine maps them in place, so nothing is repacked at load.
 * Blocks are freed with free() unless mapped. */
typedef struct kn_packed {
  uint64_t bytes; /* the whole block, this header included */
  int32_t isa;    /* the kn_isa it was packed for */
  int32_t tactic; /* the step's tactic */
} kn_packed;

/* Blocks from this size up live in their own huge-page mapping
 * (kn_big_alloc: prefaulted, few TLB misses while a step streams them). */
#define KN_PACKED_BIG ((size_t)1 << 20)

/* A zeroed block of `bytes` (header included, rounded up to 64) with its
 * header filled; NULL when out of memory.  Freed with kn_packed_free. */
static inline void *kn_packed_alloc(size_t bytes, int32_t isa, int32_t tactic) {
  size_t n = (bytes + 63) & ~(size_t)63;
  if (!n || n < bytes) return NULL;
  kn_packed *p = n >= KN_PACKED_BIG ? kn_big_alloc(n) : aligned_alloc(64, n);
  if (!p) return NULL;
  if (n < KN_PACKED_BIG) memset(p, 0, n);
  p->bytes = n;
  p->isa = isa;
  p->tactic = tactic;
  return p;
}

/* Frees a block from kn_packed_alloc (not one mapped from an engine). */
static inline void kn_packed_free(void *block) {
  kn_packed *p = block;
  if (!p) return;
  if (p->bytes >= KN_PACKED_BIG) kn_big_free(p, p->bytes);
  else free(p);
}

typedef struct kn_op_tactics {
  const char *domain;  /* NULL or "" for the default domain */
  const char *op_type; /* NULL: the end of a table */
  int32_t (*select)(const kn_graph *g, const kn_node *n, int32_t isa);
  kn_status (*pack)(const kn_graph *g, const kn_node *n, const kn_target *target,
                    void **packed, kn_error *err);
  void (*tiling)(const kn_graph *g, const kn_node *n, const void *packed,
                 const kn_target *target, char *buf, size_t len);
  bool (*loops)(const kn_graph *g, const kn_node *n, kn_loopnest *out);
  int32_t (*candidates)(const kn_graph *g, const kn_node *n, int32_t isa, int32_t *out,
                        int32_t max);
  uint32_t (*precisions)(const kn_graph *g, const kn_node *n, int32_t isa);
  kn_op_fn run;
  uint32_t (*replaces)(const kn_graph *g, const kn_node *n);
} kn_op_tactics;

#define KN_TACTICS_END {NULL, NULL}

#define KN_TACTICS_FAMILY(f) extern const kn_op_tactics kn_tactics_##f[];
#include "tactic_families.inc"
#undef KN_TACTICS_FAMILY

/* The tactics of op `op_type` of `domain`, or NULL when it has none
 * (domains "", NULL and "ai.onnx" are one). */
const kn_op_tactics *kn_tactics_for(const char *domain, const char *op_type);

/* Calls fn for every entry of every family. */
void kn_tactics_foreach(void (*fn)(const kn_op_tactics *t, void *arg), void *arg);

/* n's entry: the one it was bound to, else looked up (nodes not bound yet:
 * passes and the IO model run before tactics are selected). */
static inline const kn_op_tactics *kn_tactics_of(const kn_node *n) {
  return n->impl ? n->impl : kn_tactics_for(n->domain, n->op_type);
}

/* The inputs of node n that its packed block stands in for (its entry's
 * `replaces`, else input 1); 0 when its tactic packs nothing. */
uint32_t kn_tactics_packed_inputs(const kn_graph *g, const kn_node *n);

struct kn_ir_model;
/* Points every node of the model (subgraphs included) at its entry
 * (kn_node.impl; NULL when its op has none).  kn_tactics_select does it
 * too; an engine's nodes get theirs when it is loaded. */
void kn_tactics_bind(struct kn_ir_model *m);

/* Gives every node of the model (subgraphs included) its tactic: its
 * entry's `select` for `isa` (a kn_isa), or 0 (reference) when it has
 * none or `reference` is set; binds the nodes (kn_tactics_bind). */
void kn_tactics_select(struct kn_ir_model *m, int32_t isa, bool reference);

/* Runs the step in ctx: its tactics' fast run when it has a runtime
 * (ctx->rt) and a tactic other than the reference one, else its op's
 * reference run.  What the executor and the tactic timer call. */
static inline kn_status kn_tactics_run(kn_op_ctx *ctx) {
  const kn_node *n = ctx->node;
  const kn_op_tactics *t = n->impl;
  return ctx->rt && n->tactic && t && t->run ? t->run(ctx) : n->op->run(ctx);
}

#endif
