/* Tactics of kiln's activation ops (src/ops/activation.c): float32 Gelu
 * on the vectorised kernels (kernels/eltwise), and the kiln-domain aliases
 * of standard ops with the tactics of the op they run. */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/activation.h"

static int32_t gelu_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_eltwise : 0;
}

static kn_status gelu_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_eltwise || !x || x->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  bool tf;
  kn_status st = kn_gelu_tanh_attr(ctx, &tf);
  if (st) return st;
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  kn_ew_unary(ctx->rt, tf ? KN_ACT_GELU_TANH : KN_ACT_GELU, NULL, x->data, y->data,
              kn_tensor_numel(x));
  return KN_OK;
}

/* ---- aliases of standard ops --------------------------------------------- */

/* The tactics of the standard op an alias of the same name runs. */
static const kn_op_tactics *alias_of(const char *op_type) {
  static const struct {
    const char *name;
    const kn_op_tactics *family;
  } aliases[] = {{"HardSwish", kn_tactics_unary}, {"LayerNormalization", kn_tactics_norm}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcmp(aliases[i].name, op_type))
      for (const kn_op_tactics *t = aliases[i].family; t->op_type; t++)
        if (!strcmp(t->op_type, op_type) && kn_domain_eq(t->domain, "")) return t;
  return NULL;
}

static int32_t alias_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  const kn_op_tactics *t = alias_of(n->op_type);
  return t && t->select ? t->select(g, n, isa) : 0;
}

/* The standard op's fast run at the opset that introduced it (what the
 * alias's reference run does with the op's reference run). */
static kn_status alias_fast(kn_op_ctx *ctx) {
  const kn_op_tactics *t = alias_of(ctx->node->op_type);
  kn_op_ctx c;
  kn_alias_target(ctx, &c);
  KN_ASSERT(t && t->run);
  return t->run(&c);
}

const kn_op_tactics kn_tactics_activation[] = {
    {KN_DOMAIN, "Gelu", .select = gelu_select, .run = gelu_fast},
    {KN_DOMAIN, "HardSwish", .select = alias_select, .run = alias_fast},
    {KN_DOMAIN, "LayerNormalization", .select = alias_select, .run = alias_fast},
    KN_TACTICS_END,
};
