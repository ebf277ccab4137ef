/* The binary family (src/ops/binary.c): what its tactics
 * (src/tactics/binary_tactics.c) share with the reference ops. */
#ifndef KN_OPS_BINARY_H
#define KN_OPS_BINARY_H

#include "op.h"

/* A two-input op's operands at run time: a, b (checked as infer checks
 * them), b's shape as it broadcasts against a (rb, db: PRelu's slope
 * aligned to the channel axis), and output o with the broadcast shape
 * (ro, dout), ready. */
typedef struct kn_binary_args {
  const kn_tensor *a, *b;
  int32_t rb, ro;
  int64_t db[KN_MAX_RANK], dout[KN_MAX_RANK];
  kn_tensor *o;
} kn_binary_args;

/* The start of a two-input op's run (Add, Mul, PRelu, ...). */
kn_status kn_binary_begin(kn_op_ctx *ctx, kn_binary_args *r) KN_WUR;
/* The start of a variadic op's run (Min, Max, Sum, Mean): inputs checked,
 * output o ready with the broadcast shape (ro, dout). */
kn_status kn_variadic_begin(kn_op_ctx *ctx, int32_t *ro, int64_t *dout, kn_tensor **o) KN_WUR;

#endif
