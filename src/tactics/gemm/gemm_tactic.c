#include "gemm_tactic.h"

#include <math.h>

kn_status kn_gemm_pack_const_b(const kn_graph *g, const kn_node *n, const kn_target *target,
                               int32_t input, bool trans, void **packed, kn_error *err) {
  int32_t isa = target->isa;
  *packed = NULL;
  int32_t v = input < n->n_inputs ? n->inputs[input] : -1;
  const kn_tensor *t = v >= 0 ? g->values[v].constant : NULL;
  if (!t || t->dtype != KN_DTYPE_F32 || t->rank != 2) return KN_OK; /* packs per run */
  if (n->precision != KN_PRECISION_FP32)
    return kn_gemm_lowp_pack(n, t, trans, target, packed, err);
  int64_t k = trans ? t->dims[1] : t->dims[0], nn = trans ? t->dims[0] : t->dims[1];
  size_t floats = kn_sgemm_pack_b_size((kn_isa)isa, k, nn);
  size_t head = (sizeof(kn_gemm_packed) + 63) & ~(size_t)63;
  kn_gemm_packed *p = kn_packed_alloc(head + floats * sizeof(float), isa, n->tactic);
  if (!p) return kn_fail(err, KN_ERR_OOM, "out of memory for %zu packed weights", floats);
  p->b_off = head;
  kn_sgemm_pack_b((kn_isa)isa, k, nn, t->data, t->dims[1], trans, (float *)((char *)p + head));
  size_t l1, l2, l3;
  kn_target_caches(target, &l1, &l2, &l3);
  p->k = k;
  p->n = nn;
  p->blocking = kn_sgemm_blocking_for((kn_isa)isa, l1, l2, l3);
  *packed = p;
  return KN_OK;
}

static bool known_f32(const kn_graph *g, int32_t v, int32_t min_rank) {
  if (v < 0) return false;
  const kn_type *t = &g->values[v].type;
  if (t->kind != KN_KIND_TENSOR || t->dtype != KN_DTYPE_F32 || t->rank < min_rank) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] < 1) return false;
  return true;
}

bool kn_gemm_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l) {
  if (n->n_inputs < 2 || n->n_outputs < 1 || !known_f32(g, n->inputs[0], 1) ||
      !known_f32(g, n->inputs[1], 1) || !known_f32(g, n->outputs[0], 1))
    return false;
  const kn_type *a = &g->values[n->inputs[0]].type, *b = &g->values[n->inputs[1]].type,
                *y = &g->values[n->outputs[0]].type;
  bool matmul = !strcmp(n->op_type, "MatMul");
  const kn_attr *ta = kn_node_attr(n, "transA"), *tb = kn_node_attr(n, "transB");
  bool tra = !matmul && ta && ta->i, trb = !matmul && tb && tb->i;
  int64_t k = tra ? a->dims[0] : a->dims[a->rank - 1];
  int64_t nn = b->rank == 1 ? 1 : trb ? b->dims[0] : b->dims[b->rank - 1];
  int64_t m = y->dims[y->rank - 1] == nn && y->rank >= 2 ? y->dims[y->rank - 2] : 1;
  int64_t batch = kn_shape_numel(y->rank, y->dims) / (m * nn > 0 ? m * nn : 1);
  if (!matmul && a->rank > 2) { /* FusedGemm over A's leading dims: all rows */
    m = kn_shape_numel(a->rank, a->dims) / k;
    batch = 1;
  }
  if (batch < 1 || m < 1 || nn < 1 || k < 1) return false;
  bool a_batched = matmul && a->rank > 2 && kn_shape_numel(a->rank - 2, a->dims) > 1;
  bool b_batched = matmul && b->rank > 2 && kn_shape_numel(b->rank - 2, b->dims) > 1;
  int32_t db = kn_loop_dim(l, "batch", batch), dm = kn_loop_dim(l, "m", m),
          dn = kn_loop_dim(l, "n", nn), dk = kn_loop_dim(l, "k", k);
  uint32_t B = 1u << db, M = 1u << dm, N = 1u << dn, K = 1u << dk;
  kn_loop_tensor_add(l, "A", (a_batched ? B : 0) | M | K, 4, false, false);
  kn_loop_tensor_add(l, "B", (b_batched ? B : 0) | K | N, 4, false,
                     g->values[n->inputs[1]].constant != NULL);
  kn_loop_tensor_add(l, "C", B | M | N, 4, true, false);
  if (!matmul && n->n_inputs > 3 && known_f32(g, n->inputs[3], 1))
    kn_loop_tensor_add(l, "Z", B | M | N, 4, false, false);
  l->flops = 2.0 * (double)batch * (double)m * (double)nn * (double)k;
  const kn_attr *norm = kn_node_attr(n, "norm");
  if (!matmul && norm && norm->type == KN_ATTR_STRING && *norm->s) {
    /* a LayerNormalization of whole rows after the epilogue (fused_gemm.c) */
    kn_loops_add_row_norm(l);
  }
  return true;
}

void kn_gemm_tiling(const kn_graph *g, const kn_node *n, const void *packed,
                    const kn_target *target, char *buf, size_t len) {
  (void)g, (void)n, (void)target;
  const kn_gemm_packed *p = packed;
  if (!p) return; /* a raw B: blocked per run from the context's caches */
  snprintf(buf, len, "kc %lld mc %lld nc %lld", (long long)p->blocking.kc,
           (long long)p->blocking.mc, (long long)p->blocking.nc);
}

const kn_gemm_packed *kn_gemm_packed_for(const kn_op_ctx *ctx, int64_t k, int64_t n) {
  const kn_gemm_packed *p = ctx->packed;
  if (!p || !ctx->rt || p->hdr.isa != (int32_t)ctx->rt->isa || p->k != k || p->n != n) return NULL;
  if (ctx->node->precision != KN_PRECISION_FP32 && !kn_gemm_lowp_block_ok(ctx, p)) return NULL;
  return p;
}

bool kn_gemm_f32_rank(const kn_graph *g, int32_t v, int32_t min_rank, int32_t max_rank) {
  if (v < 0) return false;
  const kn_type *t = &g->values[v].type;
  return t->kind == KN_KIND_TENSOR && t->dtype == KN_DTYPE_F32 && t->rank >= min_rank &&
         t->rank <= max_rank;
}

kn_status kn_gemm_scratch(kn_op_ctx *ctx, const kn_sgemm_args *g, int32_t threads,
                          size_t extra, void **extra_out, void **gemm_out) {
  extra = (extra + 63) / 64 * 64;
  size_t total = extra + (ctx->node->precision == KN_PRECISION_FP32
                              ? kn_sgemm_scratch_size(ctx->rt->isa, g, threads)
                              : kn_gemm_lowp_scratch_size(ctx, g, threads));
  char *s = kn_rt_scratch(ctx->rt, total);
  if (!s) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %zu bytes of GEMM scratch", total);
  *extra_out = s;
  *gemm_out = s + extra;
  return KN_OK;
}

void kn_quantize_weights_s8(const float *b, int64_t rows, int64_t cols, bool per_row,
                            const float *given, int8_t *q, float *scale) {
  int64_t nch = per_row ? rows : cols;
  for (int64_t ch = 0; ch < nch; ch++) {
    float s;
    float amax = 0.0f;
    for (int64_t i = 0; i < (per_row ? cols : rows); i++) {
      float v = fabsf(per_row ? b[ch * cols + i] : b[i * cols + ch]);
      if (v > amax) amax = v; /* NaN is skipped */
    }
    /* a given scale is kept when it still holds the channel (a pass such
     * as fold_bn may have rescaled the weights since) */
    if (given && given[ch] > 0.0f && isfinite(given[ch]) && amax / given[ch] <= 127.5f) {
      s = given[ch];
    } else {
      s = amax > 0.0f && isfinite(amax) ? amax / 127.0f : 1.0f;
    }
    scale[ch] = s;
    for (int64_t i = 0; i < (per_row ? cols : rows); i++) {
      int64_t at = per_row ? ch * cols + i : i * cols + ch;
      float r = nearbyintf(b[at] / s);
      q[at] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r == r ? (int)r : 0);
    }
  }
}

