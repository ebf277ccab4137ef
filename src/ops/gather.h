/* The gathering family (src/ops/gather.c): what its tactics
 * (src/tactics/gather_tactics.c) share with the reference ops. */
#ifndef KN_OPS_GATHER_H
#define KN_OPS_GATHER_H

#include "op.h"

/* An index read from t[i], made non-negative against `dim`; fails (naming
 * the op `what` and the element) when it is outside [-dim, dim).  Inline:
 * the gathers call it per index. */
static inline kn_status kn_gather_index(kn_op_ctx *ctx, const kn_tensor *t, int64_t i,
                                        int64_t dim, const char *what, int64_t *out) {
  int64_t v = kn_load_i64(t->data, t->dtype, i);
  if (v < -dim || v >= dim)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "%s index %lld (element %lld) is out of range for a "
                      "dimension of size %lld",
                      what, (long long)v, (long long)i, (long long)dim);
  *out = v < 0 ? v + dim : v;
  return KN_OK;
}

#endif
