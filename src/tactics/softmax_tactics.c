/* Tactics of the softmax family (src/ops/softmax.c): float32 Softmax and
 * LogSoftmax on the vectorised kernels (kernels/eltwise); Hardmax and the
 * other dtypes stay on the reference kernel. */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/softmax.h"

static int32_t sm_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_softmax : 0;
}

static kn_status sm_run(kn_op_ctx *ctx, bool log) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_softmax || x->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  int64_t outer, len, inner;
  kn_status st = kn_softmax_geometry(ctx, x, &outer, &len, &inner);
  if (st) return st;
  if (kn_tensor_numel(x) <= 0) return KN_OK;
  kn_ew_softmax(ctx->rt, x->data, kn_out(ctx, 0)->data, outer, len, inner, log);
  return KN_OK;
}

static kn_status softmax_run(kn_op_ctx *ctx) { return sm_run(ctx, false); }
static kn_status logsoftmax_run(kn_op_ctx *ctx) { return sm_run(ctx, true); }

const kn_op_tactics kn_tactics_softmax[] = {
    {NULL, "Softmax", .select = sm_select, .run = softmax_run},
    {NULL, "LogSoftmax", .select = sm_select, .run = logsoftmax_run},
    KN_TACTICS_END,
};
