/* The gathering family (src/ops/gather.c): what its tactics
 * (src/tactics/gather.c) share with the reference ops. */
#ifndef KN_OPS_GATHER_H
#define KN_OPS_GATHER_H

#include "op.h"

/* An index read from t[i], made non-negative against `dim`; fails (naming
 * the op `what` and the element) when it is outside [-dim, dim). */
kn_status kn_gather_index(kn_op_ctx *ctx, const kn_tensor *t, int64_t i, int64_t dim,
                          const char *what, int64_t *out) KN_WUR;

#endif
