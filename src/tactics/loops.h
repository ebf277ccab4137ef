/*
 * Loop nests: how an op's step iterates, for the IO model (src/cost/
 * iomodel.h explains the counting).  An op describes its nodes through
 * its tactics' `loops` hook (tactics.h); ops without one are counted as
 * streaming each input and output once.
 */
#ifndef KN_LOOPS_H
#define KN_LOOPS_H

#include "core/core.h"

#define KN_LOOP_MAX_DIMS 6
#define KN_LOOP_MAX_TENSORS 8

typedef struct kn_loop_tensor {
  const char *name;    /* for explanations: "A", "weights", "K" */
  uint32_t dims;       /* bit d set: indexed by dimension d */
  uint32_t elem_bytes; /* bytes per element */
  bool output;
  bool constant;       /* weights: live in DRAM (or L3) before the step */
  /* bytes the tensor really has, when fewer than its index space says
   * (an implicit-GEMM convolution's im2col matrix reads each input pixel
   * once per tap from cache but only once from memory): the counts are
   * scaled down by it; 0: the index space. */
  double real_bytes;
} kn_loop_tensor;

typedef struct kn_loopnest {
  int32_t n_dims; /* loop order: dimension 0 outermost */
  int64_t extent[KN_LOOP_MAX_DIMS];
  char dim_name[KN_LOOP_MAX_DIMS][8];
  int32_t n_tensors;
  kn_loop_tensor t[KN_LOOP_MAX_TENSORS];
  double flops;
  /* bit d: dimension d is tiled whole beyond the L1 (a row epilogue, such
   * as a LayerNormalization fused after a GEMM, needs whole rows) */
  uint32_t whole;
} kn_loopnest;

/* Append a dimension / tensor; return its index. */
int32_t kn_loop_dim(kn_loopnest *l, const char *name, int64_t extent);
int32_t kn_loop_tensor_add(kn_loopnest *l, const char *name, uint32_t dims,
                           uint32_t elem_bytes, bool output, bool constant);

/* A LayerNormalization of whole rows after a GEMM-like nest (a dimension
 * named "n" is its columns): "n" tiled whole beyond the L1, the norm's
 * scale and bias along it, and its flops. */
void kn_loops_add_row_norm(kn_loopnest *l);

#endif
