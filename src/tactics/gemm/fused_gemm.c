/* Tactics of FusedGemm (src/ops/fused.c) on the packed GEMM (tactics
 * gemm_packed, gemm).  The epilogue rides in the GEMM, on each tile while
 * it is in cache, when beta * C is a bias per column (C with one value or N
 * values along the last axis) or per row (C of the output's shape with a
 * last dim of 1) and Z is absent or of the output's exact shape; otherwise
 * the product is computed first and the epilogue applied after it as in
 * the reference.  A LayerNormalization fused after it (norm) normalises
 * each block of rows as soon as its last column is final. */
#include "gemm_tactic.h"

#include "kernels/eltwise/eltwise.h"
#include "ops/fused.h"

typedef struct row_norm {
  const kn_ew_ukernels *k;
  float eps;
  const float *sc, *bi;
} row_norm;

static void norm_rows_done(void *arg, float *c, int64_t ldc, int64_t r0, int64_t rows,
                           int64_t n) {
  (void)r0;
  const row_norm *r = arg;
  assert(ldc == n);
  r->k->norm_rows(c, c, rows, n, r->eps, 1, 1, 0, r->sc, r->bi, NULL, NULL);
}

static bool has_norm(kn_op_ctx *ctx) { return *kn_attr_str(ctx, "norm", "") != 0; }

static kn_status fgemm_fast(kn_op_ctx *ctx, const kn_fused_gemm_plan *p) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *c = kn_in(ctx, 2);
  kn_rt *rt = ctx->rt;
  int64_t rows = p->rows, n = p->n;
  float beta = p->beta;
  /* raw B: the blocking of the context's capacities (a packed B keeps the
   * one it was packed with) */
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(rt->isa, &rt->caches);
  kn_sgemm_args g = {.m = rows, .n = n, .k = p->k, .alpha = p->alpha, .a = a->data,
                     .lda = a->dims[a->rank - 1], .trans_a = p->ta, .b = b->data,
                     .ldb = b->dims[1], .trans_b = p->tb, .c = p->y->data, .ldc = n,
                     .blocking = &bl};
  const kn_gemm_packed *pk = kn_gemm_packed_for(ctx, p->k, n);
  if (pk) {
    g.b = NULL;
    g.b_packed = kn_gemm_packed_b(pk);
    g.blocking = &pk->blocking;
  }
  const float *cd = c && beta != 0.0f && kn_tensor_numel(c) > 0 ? c->data : NULL;
  int64_t cn = cd ? kn_tensor_numel(c) : 0;
  int64_t clast = cd && c->rank > 0 ? c->dims[c->rank - 1] : 1;
  bool per_col = cd && (cn == 1 || (cn == n && clast == n));
  bool per_row = cd && !per_col && clast == 1 && cn == rows && c->rank == p->rank;
  for (int32_t i = 0; per_row && i + 1 < p->rank; i++) per_row = c->dims[i] == p->dims[i];
  bool fused = (!cd || per_col || per_row) && (!p->z || p->z_same);
  kn_epilogue ep;
  memset(&ep, 0, sizeof ep);
  ep.act = p->act;
  ep.res = p->z;
  ep.ldr = n;
  ep.res_first = p->res_first;
  if (fused) g.ep = &ep;
  row_norm rn = {kn_ew_get(rt->isa), kn_attr_float(ctx, "norm_epsilon", 1e-5f), NULL, NULL};
  if (has_norm(ctx)) {
    rn.sc = kn_in(ctx, 4)->data;
    rn.bi = kn_in(ctx, 5)->data;
    if (fused) { /* each block of rows as soon as it is final */
      g.rows_done = norm_rows_done;
      g.rows_arg = &rn;
    }
  }
  size_t extra = fused && per_col ? (size_t)n : fused && per_row ? (size_t)rows : 0;
  void *buf, *scratch;
  kn_status st;
  if ((st = kn_gemm_scratch(ctx, &g, kn_rt_threads(rt), extra * sizeof(float), &buf,
                            &scratch)))
    return st;
  if (extra) {
    float *bias = buf;
    for (size_t i = 0; i < extra; i++) bias[i] = beta * cd[cn == 1 ? 0 : i];
    ep.bias = bias;
    ep.bias_per_row = per_row;
  }
  kn_gemm_run(ctx, &g, scratch);
  if (fused) return KN_OK;
  st = kn_fused_gemm_epilogue(ctx, p);
  if (!st && rn.sc)
    kn_ew_norm(rt, p->y->data, p->y->data, rows, n, rn.eps, 1, 1, 0, rn.sc, rn.bi, NULL, NULL);
  return st;
}

kn_status kn_fgemm_fast(kn_op_ctx *ctx) {
  if (ctx->node->tactic != KN_TACTIC_gemm_packed && ctx->node->tactic != KN_TACTIC_gemm)
    return ctx->node->op->run(ctx);
  kn_fused_gemm_plan p;
  bool empty;
  kn_status st = kn_fused_gemm_begin(ctx, &p, &empty);
  if (st || empty) return st;
  return fgemm_fast(ctx, &p);
}

/* fp32, A of known rank >= 2 (2 with transA), B 2-D: the packed GEMM,
 * B prepacked when constant. */
int32_t kn_fgemm_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  const kn_attr *ta = kn_node_attr(n, "transA");
  if (n->n_inputs < 2 || !kn_gemm_f32_rank(g, n->inputs[0], 2, ta && ta->i ? 2 : KN_MAX_RANK) ||
      !kn_gemm_f32_rank(g, n->inputs[1], 2, 2))
    return 0;
  return g->values[n->inputs[1]].constant ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm;
}

kn_status kn_fgemm_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                        void **packed, kn_error *err) {
  *packed = NULL;
  if (n->tactic != KN_TACTIC_gemm_packed) return KN_OK;
  const kn_attr *tb = kn_node_attr(n, "transB");
  return kn_gemm_pack_const_b(g, n, target, 1, tb && tb->i != 0, packed, err);
}

uint32_t kn_fgemm_precisions(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  const kn_attr *tb = kn_node_attr(n, "transB");
  return kn_gemm_precisions(g, n, tb && tb->i != 0);
}
