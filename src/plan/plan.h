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
} kn_plan_tensor;

typedef struct kn_mem_plan {
  int32_t n_tensors;
  kn_plan_tensor *tensors;
  uint64_t arena_bytes;       /* the arena's size */
  uint64_t lower_bound_bytes; /* max over steps of the bytes live at that step */
  uint64_t naive_bytes;       /* sum of all planned intermediates */
  uint32_t alignment;         /* every offset is a multiple of it (64) */
} kn_mem_plan;

#endif
