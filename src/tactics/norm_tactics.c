/* Tactics of the normalisation family (src/ops/norm.c): float32
 * Instance-, Layer- and GroupNormalization on the vectorised row kernels
 * (kernels/eltwise: kn_ew_norm); other dtypes stay on the reference. */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/norm.h"

static int32_t norm_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_layernorm : 0;
}

/* The step's rows as `plan` plans them, on the row kernels. */
static kn_status rows_fast(kn_op_ctx *ctx,
                           kn_status (*plan)(kn_op_ctx *, const kn_tensor *, kn_norm_rows *)) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_layernorm || x->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  kn_tensor *y = kn_out(ctx, 0);
  kn_norm_rows r;
  kn_status st = plan(ctx, x, &r);
  if (st || r.skip) return st;
  kn_ew_norm(ctx->rt, x->data, y->data, r.rows, r.len, r.eps, r.seg, r.pmod, r.pmul, r.sc, r.bi,
             r.mean, r.inv);
  return kn_norm_rows_done(ctx, &r, KN_OK);
}

static kn_status in_fast(kn_op_ctx *ctx) { return rows_fast(ctx, kn_norm_rows_instance); }
static kn_status gn_fast(kn_op_ctx *ctx) { return rows_fast(ctx, kn_norm_rows_group); }

static kn_status ln_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_layernorm || x->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  int32_t axis;
  kn_status st = kn_layernorm_axis(ctx, x->rank, &axis);
  if (st) return st;
  int64_t rows = 1, len = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < axis) rows *= x->dims[i];
    else len *= x->dims[i];
  }
  const kn_tensor *ts = kn_in(ctx, 1), *tb = kn_in(ctx, 2);
  if (!kn_out_wanted(ctx, 1) && !kn_out_wanted(ctx, 2) && ts && tb &&
      ts->dtype == KN_DTYPE_F32 && tb->dtype == KN_DTYPE_F32 && kn_tensor_numel(ts) == len &&
      kn_tensor_numel(tb) == len) {
    /* scale and bias already hold one value per normalised element */
    kn_ew_norm(ctx->rt, x->data, kn_out(ctx, 0)->data, rows, len,
               kn_attr_float(ctx, "epsilon", 1e-5f), 1, 1, 0, ts->data, tb->data, NULL, NULL);
    return KN_OK;
  }
  return rows_fast(ctx, kn_norm_rows_layer);
}

const kn_op_tactics kn_tactics_norm[] = {
    {NULL, "InstanceNormalization", .select = norm_select, .run = in_fast},
    {NULL, "LayerNormalization", .select = norm_select, .run = ln_fast},
    {NULL, "GroupNormalization", .select = norm_select, .run = gn_fast},
    KN_TACTICS_END,
};
