/* Tactics of the quantization family (src/ops/quant.c): float32
 * QuantizeLinear per tensor and DynamicQuantizeLinear on the int8 GEMM
 * family's vector kernels (kernels/qgemm), bit for bit the reference's
 * loops. */
#include "tactics.h"

#include "kernels/qgemm/qgemm.h"
#include "ops/quant.h"

/* fp32 x: per-tensor quantization on the vector quantizer (the Q/DQ pairs
 * ONNX Runtime's quantizer leaves around Add, pools and concatenations run
 * 25x faster than the reference loop did) */
static int32_t quant_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return n->n_inputs >= 2 && n->inputs[0] >= 0 &&
                 g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32
             ? KN_TACTIC_eltwise
             : 0;
}

/* y = saturate(round_half_even(x / scale) + zero) into u8 or s8, per
 * tensor, on the vector quantizers; other cases run the reference. */
static kn_status quant_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *s = kn_in(ctx, 1), *zp = kn_in(ctx, 2);
  bool per_tensor;
  kn_status st = kn_quant_per_tensor(ctx, &per_tensor);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (!per_tensor || x->dtype != KN_DTYPE_F32 || s->dtype != KN_DTYPE_F32 ||
      (y->dtype != KN_DTYPE_U8 && y->dtype != KN_DTYPE_I8))
    return ctx->node->op->run(ctx);
  float sv = *(const float *)s->data;
  int32_t z = zp ? (int32_t)kn_load_i64(zp->data, zp->dtype, 0) : 0;
  int64_t n = kn_tensor_numel(x);
  kn_qgemm_impl impl = kn_qgemm_impl_for(ctx->rt->isa, ctx->rt->features);
  if (y->dtype == KN_DTYPE_I8) kn_qgemm_quantize_s8(impl, n, x->data, sv, z, y->data);
  else kn_qgemm_quantize(impl, 1, n, x->data, n, sv, z, y->data, n);
  return KN_OK;
}

/* fp32 x: the range and the quantization on the vector kernels
 * (kn_qgemm_range, kn_qgemm_quantize: the reference loops' results) */
static int32_t dynq_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return n->n_inputs == 1 && n->inputs[0] >= 0 &&
                 g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32
             ? KN_TACTIC_eltwise
             : 0;
}

static kn_status dynq_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  const float *xd = x->data;
  int64_t n = kn_tensor_numel(x);
  kn_qgemm_impl impl = kn_qgemm_impl_for(ctx->rt->isa, ctx->rt->features);
  float mn = 0.0f, mx = 0.0f; /* the range always includes 0; NaNs are left out */
  kn_qgemm_range(impl, n, xd, &mn, &mx);
  float scale, zp;
  kn_dynq_scale(mn, mx, &scale, &zp);
  uint8_t *y = kn_out(ctx, 0)->data;
  if (n > 0) kn_qgemm_quantize(impl, 1, n, xd, n, scale, (int32_t)zp, y, n);
  kn_dynq_store(ctx, scale, zp);
  return KN_OK;
}

const kn_op_tactics kn_tactics_quant[] = {
    {NULL, "QuantizeLinear", .select = quant_select, .run = quant_fast},
    {NULL, "DynamicQuantizeLinear", .select = dynq_select, .run = dynq_fast},
    KN_TACTICS_END,
};
