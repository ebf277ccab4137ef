/* Tactics of the binary family (src/ops/binary.c): float32 Add, Sub, Mul,
 * Div, PRelu and the variadic Min, Max, Sum, Mean on the vectorised
 * broadcasting kernels (kernels/eltwise). */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/binary.h"

/* The kn_vbin of a two-input op or variadic op, -1 when it has none. */
static int bin_vop(const char *name) {
  static const struct {
    const char *name;
    int op;
  } map[] = {{"Add", KN_VBIN_ADD}, {"Sub", KN_VBIN_SUB}, {"Mul", KN_VBIN_MUL},
             {"Div", KN_VBIN_DIV}, {"PRelu", KN_VBIN_PRELU}, {"Max", KN_VBIN_MAX},
             {"Min", KN_VBIN_MIN}, {"Sum", KN_VBIN_ADD}, {"Mean", KN_VBIN_ADD}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, name) == 0) return map[i].op;
  return -1;
}

/* Every input float32: the vectorised kernels. */
static int32_t bin_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (bin_vop(n->op_type) < 0 || n->n_inputs < 1) return 0;
  for (int32_t i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] < 0 || g->values[n->inputs[i]].type.dtype != KN_DTYPE_F32) return 0;
  return KN_TACTIC_eltwise;
}

static kn_status bin_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  int vop = bin_vop(ctx->node->op_type);
  if (ctx->node->tactic != KN_TACTIC_eltwise || vop < 0 || !a || !b ||
      a->dtype != KN_DTYPE_F32 || b->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  kn_binary_args r;
  kn_status st = kn_binary_begin(ctx, &r);
  if (st) return st;
  kn_ew_broadcast(ctx->rt, vop, a->data, a->rank, a->dims, b->data, r.rb, r.db, r.o->data, r.ro,
                  r.dout);
  return KN_OK;
}

static kn_status var_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *in0 = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_eltwise || !in0 || in0->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  int32_t ro;
  int64_t dout[KN_MAX_RANK];
  kn_tensor *o;
  kn_status st = kn_variadic_begin(ctx, &ro, dout, &o);
  if (st) return st;
  int op = bin_vop(ctx->node->op_type);
  KN_ASSERT(op >= 0);
  float *y = o->data;
  if (ctx->n_in == 1) {
    if (y != in0->data) memmove(y, in0->data, (size_t)kn_tensor_numel(o) * sizeof(float));
    return KN_OK;
  }
  const kn_tensor *in1 = kn_in(ctx, 1);
  kn_ew_broadcast(ctx->rt, op, in0->data, in0->rank, in0->dims, in1->data, in1->rank, in1->dims,
                  y, ro, dout);
  for (int32_t i = 2; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    kn_ew_broadcast(ctx->rt, op, y, ro, dout, t->data, t->rank, t->dims, y, ro, dout);
  }
  if (strcmp(ctx->node->op_type, "Mean") == 0) {
    float cnt = (float)ctx->n_in;
    kn_ew_broadcast(ctx->rt, KN_VBIN_DIV, y, ro, dout, &cnt, 0, NULL, y, ro, dout);
  }
  return KN_OK;
}

#define BIN(NAME) {NULL, NAME, .select = bin_select, .run = bin_fast_run}
#define VAR(NAME) {NULL, NAME, .select = bin_select, .run = var_fast_run}

const kn_op_tactics kn_tactics_binary[] = {
    BIN("Add"), BIN("Sub"), BIN("Mul"), BIN("Div"), BIN("PRelu"),
    VAR("Min"), VAR("Max"), VAR("Sum"), VAR("Mean"),
    KN_TACTICS_END,
};
