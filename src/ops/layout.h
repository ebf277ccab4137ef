/* Channels-last steps (src/ops/layout.c): the channels-last ops that wrap
 * a base op of the conv (fused.h) and pooling (pooling.h) families, and
 * what the channels_last pass needs of them.  The families below never
 * call back into layout.c. */
#ifndef KN_OPS_LAYOUT_H
#define KN_OPS_LAYOUT_H

#include "kernels/kernels.h"
#include "op.h"

/* The channels-last op (domain "kiln") computing op `op` of `domain`, or
 * NULL when there is none; *nhwc_inputs: bit i set when its input i is a
 * 4-D channels-last tensor (the outputs always are). */
const char *kn_nhwc_op_for(const char *domain, const char *op, uint32_t *nhwc_inputs);

/* dst [n, c, h, w] <- src [n, h, w, c] (to_nchw) or the reverse, es bytes
 * per element; nchw: the NCHW dims.  A plain loop: for reference kernels
 * and constants, not for the hot path (Transpose steps use kernels/copy). */
void kn_layout_permute(const int64_t *nchw, size_t es, const void *src, void *dst,
                       bool to_nchw);

#endif
