/* The normalisation family (src/ops/norm.c): what its tactics
 * (src/tactics/norm_tactics.c) share with the reference ops. */
#ifndef KN_OPS_NORM_H
#define KN_OPS_NORM_H

#include "op.h"

/* What an Instance-, Layer- or GroupNormalization step normalises: `rows`
 * contiguous rows of `len` elements each, to zero mean and unit variance
 * (eps added to the variance), then scaled and shifted: element j of row r
 * by index (r % pmod) * pmul + j / seg of sc and bi (float, or double for
 * a float64 x).  mean and inv (per row; NULL unless LayerNormalization's
 * outputs 1 and 2 are wanted) receive each row's mean and 1 / std-dev. */
typedef struct kn_norm_rows {
  bool skip; /* nothing to compute: no rows */
  int64_t rows, len, seg, pmod, pmul;
  double eps;
  void *sc, *bi;
  double *mean, *inv;
} kn_norm_rows;

/* The rows of ctx's step at run time (x: its input 0), parameters loaded;
 * r->skip when there are none.  On failure r holds nothing. */
kn_status kn_norm_rows_instance(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) KN_WUR;
kn_status kn_norm_rows_layer(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) KN_WUR;
kn_status kn_norm_rows_group(kn_op_ctx *ctx, const kn_tensor *x, kn_norm_rows *r) KN_WUR;
/* After the rows ran with status st: stores mean and inv into outputs 1
 * and 2 (st KN_OK), frees r's buffers; returns st (KN_ERR_OOM failed with
 * its message). */
kn_status kn_norm_rows_done(kn_op_ctx *ctx, kn_norm_rows *r, kn_status st) KN_WUR;

/* LayerNormalization's axis in [0, rank) (fails when out of range). */
kn_status kn_layernorm_axis(kn_op_ctx *ctx, int32_t rank, int32_t *axis) KN_WUR;

#endif
