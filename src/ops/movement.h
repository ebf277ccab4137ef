/* The data movement family (src/ops/movement.c): what its tactics
 * (src/tactics/movement_tactics.c) share with the reference ops.  Each reads its
 * input x as a strided view: output element idx is x[off + sum idx_k *
 * strides[k]] over the output's dims. */
#ifndef KN_OPS_MOVEMENT_H
#define KN_OPS_MOVEMENT_H

#include "op.h"

/* Transpose: the strides (one per output dim) of its view of x. */
kn_status kn_transpose_strides(kn_op_ctx *ctx, const kn_tensor *x, int64_t *strides) KN_WUR;
/* Slice: the strides and offset of its view of x. */
kn_status kn_slice_view(kn_op_ctx *ctx, const kn_tensor *x, int64_t *strides,
                        int64_t *off) KN_WUR;
/* Split: its axis and the size of each output along it (*parts: n_out
 * values, the caller frees; NULL when x or its rank is not known, or on
 * failure). */
kn_status kn_split_parts(kn_op_ctx *ctx, const kn_tensor *x, int32_t *axis,
                         int64_t **parts) KN_WUR;

/* Pad: per output axis i, maps[i][q] the offset (elements, x's strides)
 * of the input index output index q reads, or -1 for the padding value
 * (fill: one element of x's dtype; sfill for strings); on the innermost
 * axis the output's [run_out, run_out + run_len) reads x's [run_in, ...)
 * contiguously.  kn_pad_plan_free releases the maps. */
typedef struct kn_pad_plan {
  int64_t *map;
  int64_t *maps[KN_MAX_RANK];
  unsigned char fill[8];
  const char *sfill;
  int64_t run_out, run_in, run_len;
} kn_pad_plan;
kn_status kn_pad_plan_make(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *o,
                           kn_pad_plan *p) KN_WUR;
void kn_pad_plan_free(kn_pad_plan *p);

#endif
