/*
 * integer_gemm: ONNX Runtime's dynamic-quantization chain (quantize_dynamic,
 * and QOperator models), per weighted MatMul
 *
 *   s = MatMulInteger(A, B, a_zero, b_zero)       (s32)
 *   f = Cast(s, to = FLOAT)
 *   y = Mul(f, Mul(a_scale, b_scale))             (optional)
 *   z = Add(y, bias)                              (optional: a constant float
 *                                                  bias of one value per column)
 *
 * becomes one kiln MatMulIntegerToFloat(A, B, a_zero, b_zero[, a_scale,
 * b_scale[, bias]]) step: the int8 GEMM writes fp32 directly, (float)s *
 * (a_scale * b_scale[j]) + bias[j] (the bias in its epilogue), the chain's
 * very bits (each product rounded to fp32 as the
 * Mul nodes round it; fp32 multiplication commutes exactly), so the s32
 * tensor, the Cast and the Mul never exist.  The Mul is taken when its
 * scale is a Mul of a float scalar (the a_scale DynamicQuantizeLinear
 * computes, or any other) and a constant float b_scale of one value or one
 * per column of B; otherwise the step stops at the Cast.  Every
 * intermediate must have its pattern node as its only reader.
 */
#include "pattern.h"

#include <string.h>

/* The Cast's `to` is FLOAT. */
static bool cast_to_float(const kn_node *n) {
  const kn_attr *to = kn_node_attr(n, "to");
  return to && to->type == KN_ATTR_INT && to->i == KN_DTYPE_F32;
}

/* v = Mul(p, q): p a float scalar, q a constant float of one element or
 * one per B column (cols): *a_scale = p, *b_scale = q. */
static bool scale_product(const kn_graph *g, int32_t v, int64_t cols, int32_t *a_scale,
                          int32_t *b_scale) {
  int32_t mi = kn_pat_producer(g, v, "Mul");
  if (mi < 0 || g->nodes[mi].n_inputs != 2) return false;
  const kn_node *m = &g->nodes[mi];
  for (int32_t k = 0; k < 2; k++) {
    int32_t p = m->inputs[k], q = m->inputs[1 - k];
    kn_tensor c;
    if (p < 0 || q < 0 || g->values[p].constant || !kn_pat_const(g, q, &c)) continue;
    const kn_type *pt = &g->values[p].type;
    if (pt->kind != KN_KIND_TENSOR || pt->dtype != KN_DTYPE_F32 || pt->rank != 0) continue;
    int64_t ne = kn_tensor_numel(&c);
    if (c.dtype != KN_DTYPE_F32 || (ne != 1 && (c.rank != 1 || c.dims[0] != cols))) continue;
    *a_scale = p;
    *b_scale = q;
    return true;
  }
  return false;
}

kn_status kn_pass_integer_gemm(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *mm = &g->nodes[i];
    if (!kn_pat_is(mm, "MatMulInteger") || mm->n_inputs < 2 || mm->n_outputs != 1) continue;
    const kn_tensor *b = mm->inputs[1] >= 0 ? g->values[mm->inputs[1]].constant : NULL;
    if (!b || b->rank != 2) continue; /* the fused step needs B's columns */
    int32_t ci = kn_pat_sole_reader_op(&p, mm->outputs[0], "Cast");
    if (ci < 0 || !cast_to_float(&g->nodes[ci])) continue;
    int32_t nodes[4] = {i, ci, -1, -1}, n = 2;
    int32_t in[7] = {-1, -1, -1, -1, -1, -1, -1};
    for (int32_t k = 0; k < mm->n_inputs && k < 4; k++) in[k] = mm->inputs[k];
    int32_t out = g->nodes[ci].outputs[0];
    int32_t ui = kn_pat_sole_reader_op(&p, out, "Mul");
    if (ui >= 0) {
      int32_t sv = kn_pat_other(&g->nodes[ui], out);
      if (sv >= 0 && scale_product(g, sv, b->dims[1], &in[4], &in[5])) {
        nodes[n++] = ui;
        out = g->nodes[ui].outputs[0];
      }
    }
    int32_t ai = kn_pat_sole_reader_op(&p, out, "Add");
    if (ai >= 0) {
      int32_t bv = kn_pat_other(&g->nodes[ai], out);
      kn_tensor c;
      if (bv >= 0 && kn_pat_const(g, bv, &c) && c.dtype == KN_DTYPE_F32 && c.rank == 1 &&
          c.dims[0] == b->dims[1] && kn_pat_rank(g, out) >= 1) {
        in[6] = bv;
        nodes[n++] = ai;
        out = g->nodes[ai].outputs[0];
      }
    }
    int32_t n_in = 7;
    while (n_in > 2 && in[n_in - 1] < 0) n_in--;
    if (kn_pat_replace(&p, nodes, n, i, "MatMulIntegerToFloat", KN_DOMAIN, n_in, in, out,
                       ctx->err) < 0)
      st = KN_ERR_OOM;
    else *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
