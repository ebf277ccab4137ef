/* Tactics of the gathering family (src/ops/gather.c): Gather on the copy
 * kernels (kernels/copy) for every dtype of 1, 2, 4 or 8 bytes, and its
 * loop nest for the IO model. */
#include "tactics.h"

#include "kernels/copy/copy.h"
#include "ops/gather.h"

/* Element sizes the copy kernels move (every dtype but strings). */
static bool gather_dtype_ok(kn_dtype dt) {
  if (!kn_dtype_is_valid(dt) || dt == KN_DTYPE_STRING || dt == KN_DTYPE_UNDEFINED) return false;
  size_t es = kn_dtype_size(dt);
  return es == 1 || es == 2 || es == 4 || es == 8;
}

static int32_t gather_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  return gather_dtype_ok(g->values[n->inputs[0]].type.dtype) ? KN_TACTIC_copy : 0;
}

static kn_status gather_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *ix = kn_in(ctx, 1);
  if (ctx->node->tactic != KN_TACTIC_copy || !gather_dtype_ok(x->dtype))
    return ctx->node->op->run(ctx);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  int32_t axis;
  if ((st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &axis))) return st;
  int64_t outer = kn_dims_prod(x->dims, 0, axis), n = x->dims[axis];
  int64_t inner = kn_dims_prod(x->dims, axis + 1, x->rank);
  int64_t ni = kn_tensor_numel(ix);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  int64_t *fi = kn_rt_scratch(ctx->rt, (size_t)ni * sizeof *fi);
  if (!fi) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int64_t j = 0; j < ni; j++)
    if ((st = kn_gather_index(ctx, ix, j, n, "Gather", &fi[j]))) return st;
  kn_copy_gather(ctx->rt->pool, kn_dtype_size(x->dtype), y->data, x->data, outer, n, inner, fi,
                 ni);
  return KN_OK;
}

/* The IO model's view of a gather: it reads the rows it copies, not the
 * whole table (an embedding lookup touches 128 of BERT's 30522 rows). */
static bool gather_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l) {
  if (n->n_inputs < 2 || n->inputs[1] < 0 || n->n_outputs < 1 || n->outputs[0] < 0) return false;
  const kn_type *y = &g->values[n->outputs[0]].type, *ix = &g->values[n->inputs[1]].type;
  if (y->kind != KN_KIND_TENSOR || y->rank < 0 || ix->kind != KN_KIND_TENSOR || ix->rank < 0 ||
      !kn_dtype_is_valid(y->dtype) || !kn_dtype_is_valid(ix->dtype))
    return false;
  int64_t ny = kn_shape_numel(y->rank, y->dims), ni = kn_shape_numel(ix->rank, ix->dims);
  if (ny < 1 || ni < 0) return false;
  uint32_t es = (uint32_t)kn_dtype_size(y->dtype);
  uint32_t e = 1u << kn_loop_dim(l, "e", ny);
  kn_loop_tensor_add(l, "rows", e, es, false, g->values[n->inputs[0]].constant != NULL);
  int32_t t = kn_loop_tensor_add(l, "indices", e, (uint32_t)kn_dtype_size(ix->dtype), false,
                                 false);
  l->t[t].real_bytes = (double)ni * (double)kn_dtype_size(ix->dtype);
  kn_loop_tensor_add(l, "output", e, es, true, false);
  l->flops = 0;
  return true;
}

const kn_op_tactics kn_tactics_gather[] = {
    {NULL, "Gather", .select = gather_select, .loops = gather_loops, .run = gather_fast},
    KN_TACTICS_END,
};
