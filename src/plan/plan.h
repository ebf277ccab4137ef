/*
 * Memory planning.  A run's steps are the nodes of the (optimized)
 * top-level graph in order.  Every intermediate tensor (a value produced by
 * a step and not a graph output) whose size is known gets an offset in one
 * arena; tensors live at the same time never overlap, except where an op
 * lets its output reuse an input's buffer in place.  Graph inputs, graph
 * outputs and constants are pinned outside the arena.
 */
#ifndef KN_PLAN_H
#define KN_PLAN_H

#include "ir/ir.h"

#include <stdio.h>

typedef struct kn_plan_tensor {
  int32_t value;      /* value index in the top-level graph */
  uint64_t bytes;     /* size (the largest the shapes allow) */
  int32_t first;      /* step that produces it */
  int32_t last;       /* last step that reads it (== first if never read) */
  int64_t offset;     /* byte offset in the arena; -1: not in the arena */
  int32_t inplace_of; /* value whose buffer it reuses in place, or -1 */
  /* A part of a Concat's output: the tensor is written where the Concat
   * would copy it, view_offset bytes into value view_of's buffer, and the
   * Concat copies nothing.  -1: not a part.  Not stored in engine files
   * (the offsets are; kn_engine_read leaves -1). */
  int32_t view_of;
  uint64_t view_offset;
} kn_plan_tensor;

typedef struct kn_mem_plan {
  int32_t n_tensors;
  kn_plan_tensor *tensors;
  uint64_t arena_bytes;       /* the arena's size */
  uint64_t lower_bound_bytes; /* max over steps of the bytes live at that step */
  uint64_t naive_bytes;       /* sum of all planned intermediates */
  uint32_t alignment;         /* every offset is a multiple of it (64) */
  /* bytes of the buffers live at each step (n_steps entries, the graph's
   * nodes); NULL in a plan read from an engine file */
  uint64_t *live;
  int32_t n_steps;
} kn_mem_plan;

/* Plan the top-level graph g (steps: its nodes in order).  Tensors are
 * the values its nodes produce, except graph outputs; those whose static
 * type is fully known (a tensor, not a string, every dim >= 0, non-empty)
 * get an offset, the rest -1.  A tensor's lifetime runs from the step that
 * makes it to the last that reads it (subgraph reads included).  An op with
 * kn_op_def.inplace set writes output 0 over its in-place input (input 0,
 * or kn_op_def.inplace_input) when that input is a planned intermediate
 * read last by that step, read by no other input slot of it, and of equal
 * size.  lower_bound_bytes counts such a pair
 * once.  A Concat whose output is planned and whose axis has only
 * size-1 dims before it (each input is then one contiguous run of the
 * output's bytes) takes its inputs as parts (kn_plan_tensor.view_of) when
 * every input is a planned intermediate, read last by the Concat, once:
 * they are made in place and the output's buffer lives from the first of
 * them on.  workspace_cap 0: no cap; otherwise an arena above it fails with
 * KN_ERR_LIMIT saying by how much.  On success *out is owned by the caller
 * (kn_mem_plan_free); on failure it is left empty. */
kn_status kn_plan_memory(const kn_graph *g, uint64_t workspace_cap, kn_mem_plan *out,
                         kn_error *err) KN_WUR;
void kn_mem_plan_free(kn_mem_plan *p);

/* True when the plan is sound: every planned tensor is aligned and inside
 * the arena, and no two tensors live at one step share a byte, except a
 * declared in-place pair (same offset and size, meeting at one step) or a
 * part inside the Concat output holding it (at its view_offset).
 * Otherwise false, with the first problem written to why. */
bool kn_plan_check(const kn_mem_plan *p, char *why, size_t wl);

/* One line per tensor (name, bytes, lifetime, offset), after a summary. */
void kn_plan_print(const kn_mem_plan *p, const kn_graph *g, FILE *f);

#endif
