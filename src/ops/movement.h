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

#endif
