/* Tactics of the matrix products (src/ops/matmul.c): MatMul and Gemm on
 * the packed GEMM (tactics gemm_packed, gemm; constant B prepacked, reduced
 * precisions through kn_gemm_run), MatMulInteger and MatMulIntegerToFloat
 * on the int8 GEMM (qgemm_integer), and the family's table with FusedGemm
 * (fused_gemm.c). */
#include "gemm_tactic.h"

#include "core/cpu.h"
#include "kernels/qgemm/qgemm.h"
#include "ops/matmul.h"

/* ---- MatMul ------------------------------------------------------------ */

typedef struct mm_batch_task {
  const kn_mm_geom *g;
  kn_isa isa;
  kn_sgemm_args args; /* a, b, c of batch 0; the rest shared */
  char *scratch;
  size_t per_thread;
} mm_batch_task;

static void mm_batch_run(void *arg, int64_t bi, int32_t thread) {
  const mm_batch_task *t = arg;
  int64_t ia, ib;
  kn_mm_batch_index(t->g, bi, &ia, &ib);
  kn_sgemm_args g = t->args;
  g.a += ia * g.m * g.k;
  g.b += ib * g.k * g.n;
  g.c += bi * g.m * g.n;
  kn_sgemm(t->isa, NULL, &g, t->scratch + (size_t)thread * t->per_thread);
}

/* y = a @ b in float32 on ctx->rt.  One product when B is a single matrix
 * (A's batches are then rows of one tall product, and a constant 2-D B
 * comes prepacked); otherwise one product per batch, the batches spread
 * over the threads when there are enough of them. */
static kn_status matmul_fast(kn_op_ctx *ctx, const kn_mm_geom *gm, const kn_tensor *a,
                             const kn_tensor *b, kn_tensor *y) {
  kn_rt *rt = ctx->rt;
  int64_t m = gm->m, n = gm->n, k = gm->k;
  if (m * n == 0 || gm->batches == 0) return KN_OK;
  int32_t threads = kn_rt_threads(rt);
  /* raw B: the blocking of the context's capacities (a packed B keeps the
   * one it was packed with) */
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(rt->isa, &rt->caches);
  kn_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = 1.0f, .a = a->data, .lda = k,
                     .b = b->data, .ldb = n, .c = y->data, .ldc = n, .blocking = &bl};
  void *extra, *scratch;
  kn_status st;
  if (gm->b_batches == 1) {
    g.m = m * gm->batches;
    const kn_gemm_packed *pk = b->rank == 2 ? kn_gemm_packed_for(ctx, k, n) : NULL;
    if (pk) {
      g.b = NULL;
      g.b_packed = kn_gemm_packed_b(pk);
      g.blocking = &pk->blocking;
    }
    if ((st = kn_gemm_scratch(ctx, &g, threads, 0, &extra, &scratch))) return st;
    kn_gemm_run(ctx, &g, scratch);
    return KN_OK;
  }
  mm_batch_task t = {.g = gm, .isa = rt->isa, .args = g};
  t.per_thread = kn_sgemm_scratch_size(rt->isa, &g, 1);
  bool by_batch = threads > 1 && gm->batches >= threads;
  if ((st = kn_gemm_scratch(ctx, &g, threads, 0, &extra, &scratch))) return st;
  t.scratch = scratch;
  if (by_batch) {
    kn_pool_for(rt->pool, gm->batches, mm_batch_run, &t);
  } else {
    for (int64_t bi = 0; bi < gm->batches; bi++) {
      int64_t ia, ib;
      kn_mm_batch_index(gm, bi, &ia, &ib);
      kn_sgemm_args gi = g;
      gi.a += ia * m * k;
      gi.b += ib * k * n;
      gi.c += bi * m * n;
      kn_sgemm(rt->isa, rt->pool, &gi, scratch);
    }
  }
  return KN_OK;
}

static bool fast_tactic(const kn_op_ctx *ctx) {
  return ctx->rt && (ctx->node->tactic == KN_TACTIC_gemm_packed ||
                     ctx->node->tactic == KN_TACTIC_gemm);
}

static kn_status matmul_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  if (!fast_tactic(ctx) || y->dtype != KN_DTYPE_F32 || a->dtype != KN_DTYPE_F32 ||
      b->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  kn_mm_geom g;
  kn_status st = kn_matmul_geometry(ctx, a, b, &g);
  if (st) return st;
  return matmul_fast(ctx, &g, a, b, y);
}

/* fp32 with known ranks: the packed GEMM, B prepacked when constant 2-D. */
static int32_t matmul_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 2 || !kn_gemm_f32_rank(g, n->inputs[0], 1, KN_MAX_RANK) ||
      !kn_gemm_f32_rank(g, n->inputs[1], 1, KN_MAX_RANK))
    return 0;
  const kn_value *b = &g->values[n->inputs[1]];
  return b->constant && b->constant->rank == 2 ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm;
}

static kn_status matmul_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                             void **packed, kn_error *err) {
  *packed = NULL;
  if (n->tactic != KN_TACTIC_gemm_packed) return KN_OK;
  return kn_gemm_pack_const_b(g, n, target, 1, false, packed, err);
}

static uint32_t matmul_precisions(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return strcmp(n->op_type, "MatMul") ? 0 : kn_gemm_precisions(g, n, false);
}

static uint32_t gemm_precisions(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  const kn_attr *tb = kn_node_attr(n, "transB");
  return kn_gemm_precisions(g, n, tb && tb->i != 0);
}

/* ---- Gemm --------------------------------------------------------------- */

/* Gemm in float32 on ctx->rt: Y = alpha * op(A) op(B) + beta * C.  beta * C
 * rides in the GEMM's epilogue when it is a bias per column (C scalar, [N]
 * or [1, N]), per row ([M, 1]) or, with beta = 1, a full [M, N] addend;
 * any other C is added after the product. */
static kn_status gemm_fast(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                           const kn_tensor *c, bool ta, bool tb, float alpha, float beta,
                           int64_t m, int64_t n, int64_t k, kn_tensor *y) {
  kn_rt *rt = ctx->rt;
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(rt->isa, &rt->caches);
  kn_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = alpha, .a = a->data,
                     .lda = a->dims[1], .trans_a = ta, .b = b->data, .ldb = b->dims[1],
                     .trans_b = tb, .c = y->data, .ldc = n, .blocking = &bl};
  const kn_gemm_packed *pk = kn_gemm_packed_for(ctx, k, n);
  if (pk) {
    g.b = NULL;
    g.b_packed = kn_gemm_packed_b(pk);
    g.blocking = &pk->blocking;
  }
  kn_epilogue ep;
  memset(&ep, 0, sizeof ep);
  const float *cd = c && beta != 0.0f && kn_tensor_numel(c) > 0 ? c->data : NULL;
  int64_t cn = cd ? kn_tensor_numel(c) : 0;
  int64_t clast = cd && c->rank > 0 ? c->dims[c->rank - 1] : 1;
  bool per_col = cd && (cn == 1 || (cn == n && clast == n));
  bool per_row = cd && !per_col && c->rank == 2 && clast == 1 && cn == m;
  bool full = cd && !per_col && !per_row && cn == m * n;
  size_t extra = per_col ? (size_t)n : per_row ? (size_t)m : 0;
  void *buf, *scratch;
  kn_status st;
  if (per_col || per_row || (full && beta == 1.0f)) g.ep = &ep;
  if ((st = kn_gemm_scratch(ctx, &g, kn_rt_threads(rt), extra * sizeof(float), &buf,
                            &scratch)))
    return st;
  if (per_col || per_row) {
    float *bias = buf;
    for (size_t i = 0; i < extra; i++) bias[i] = beta * cd[cn == 1 ? 0 : i];
    ep.bias = bias;
    ep.bias_per_row = per_row;
  } else if (full && beta == 1.0f) {
    ep.res = cd;
    ep.ldr = n;
  }
  kn_gemm_run(ctx, &g, scratch);
  if (cd && !g.ep) {
    int64_t cs[2] = {0, 0}, od[2] = {m, n};
    kn_broadcast_strides(c->rank, c->dims, 2, od, cs);
    float *yd = y->data;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) yd[i * n + j] += beta * cd[i * cs[0] + j * cs[1]];
  }
  return KN_OK;
}

static kn_status gemm_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *c = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  kn_dtype t = y->dtype;
  if (!fast_tactic(ctx) || t != KN_DTYPE_F32 || a->dtype != t || b->dtype != t ||
      (c && c->dtype != t))
    return ctx->node->op->run(ctx);
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  float alpha = kn_attr_float(ctx, "alpha", 1.0f);
  float beta = kn_attr_float(ctx, "beta", 1.0f);
  int64_t m, n, k;
  kn_status st = kn_gemm_dims(ctx, a, b, &m, &n, &k);
  if (st) return st;
  if (m * n == 0) return KN_OK;
  return gemm_fast(ctx, a, b, c, ta, tb, alpha, beta, m, n, k, y);
}

/* fp32 2-D operands: the packed GEMM, B prepacked when constant. */
static int32_t gemm_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 2 || !kn_gemm_f32_rank(g, n->inputs[0], 2, 2) ||
      !kn_gemm_f32_rank(g, n->inputs[1], 2, 2) ||
      (n->n_inputs > 2 && n->inputs[2] >= 0 && !kn_gemm_f32_rank(g, n->inputs[2], 0, 2)))
    return 0;
  return g->values[n->inputs[1]].constant ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm;
}

static kn_status gemm_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                           void **packed, kn_error *err) {
  *packed = NULL;
  if (n->tactic != KN_TACTIC_gemm_packed) return KN_OK;
  const kn_attr *tb = kn_node_attr(n, "transB");
  return kn_gemm_pack_const_b(g, n, target, 1, tb && tb->i != 0, packed, err);
}

/* ---- MatMulInteger on the int8 GEMM (tactic qgemm_integer) -------------
 * What ONNX Runtime's dynamic quantization writes for every MatMul with a
 * weight (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul), and what
 * its static QOperator models carry: u8 A (any rank, a per-tensor zero
 * point known only at run time) times a constant 2-D B.  B is packed once
 * for the u8 x s8 kernels (src/kernels/qgemm) as s8: itself, or B - 128
 * for a u8 B (exact).  With B's zero points zb[j] (constant) the product
 * splits exactly:
 *   sum_k (a - za)(b - zb) = sum_k (a - za) b' + (c - zb[j]) * rowsum[i]
 *   b' = b - c (c = 128 for u8 B, 0 for s8), rowsum[i] = sum_k (a - za)
 * The first term is the kernels' s32 output (exact for k <= KN_QGEMM_K_MAX),
 * the second is added per row when some zb[j] != c, in s32 wrap-around as
 * the reference kernel sums: the results are the reference's, bit for bit.
 * A per-row A zero point, an s8 A or a block packed for another CPU take
 * the reference kernel. */

typedef struct mmi_block {
  kn_packed hdr;
  int32_t impl;    /* kn_qgemm_impl the B panels are for */
  int32_t has_corr;/* some c - zb[j] != 0: corr[] applies */
  int64_t k, n;
  uint64_t corr_off; /* int32 corr[n] = c - zb[j] */
  uint64_t b_off;    /* kn_qgemm_pack_b's block */
} mmi_block;

/* The block's layout: the header, corr[n] at MMI_HEAD, then the kernels' B. */
#define MMI_HEAD ((sizeof(mmi_block) + 63) & ~(size_t)63)
static size_t mmi_corr_bytes(int64_t n) {
  return ((size_t)n * sizeof(int32_t) + 63) & ~(size_t)63;
}

/* The constant B (2-D, s8 or u8) and its zero points as corr[j] = c - zb[j]
 * (corr NULL: only checks); false when the node cannot take the tactic. */
static bool mmi_const_b(const kn_graph *g, const kn_node *n, int32_t *corr, bool *any) {
  if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
  const kn_type *ta = &g->values[n->inputs[0]].type;
  const kn_tensor *b = g->values[n->inputs[1]].constant;
  if (ta->kind != KN_KIND_TENSOR || ta->dtype != KN_DTYPE_U8 || ta->rank < 1) return false;
  if (!b || b->rank != 2 || (b->dtype != KN_DTYPE_I8 && b->dtype != KN_DTYPE_U8) ||
      b->dims[0] < 1 || b->dims[1] < 1 || b->dims[0] > KN_QGEMM_K_MAX)
    return false;
  int64_t nn = b->dims[1];
  const kn_tensor *zb = NULL;
  if (n->n_inputs > 3 && n->inputs[3] >= 0) {
    zb = g->values[n->inputs[3]].constant;
    if (!zb || zb->dtype != b->dtype) return false;
    int64_t ne = kn_tensor_numel(zb);
    if (ne != 1 && (ne != nn || zb->rank != 1)) return false;
  }
  int32_t c = b->dtype == KN_DTYPE_U8 ? 128 : 0;
  if (any) *any = false;
  for (int64_t j = 0; corr && j < nn; j++) {
    int64_t z = zb ? kn_load_i64(zb->data, zb->dtype, kn_tensor_numel(zb) == 1 ? 0 : j) : 0;
    corr[j] = c - (int32_t)z;
    if (corr[j] && any) *any = true;
  }
  return true;
}

/* MatMulIntegerToFloat's constant fp32 b_scale (input 5: one value or one
 * per column of B), or NULL (absent, or not such a constant). */
static const kn_tensor *mmif_b_scale(const kn_graph *g, const kn_node *n) {
  if (strcmp(n->op_type, "MatMulIntegerToFloat") || n->n_inputs < 6 || n->inputs[5] < 0)
    return NULL;
  const kn_tensor *t = g->values[n->inputs[5]].constant;
  const kn_tensor *b = n->inputs[1] >= 0 ? g->values[n->inputs[1]].constant : NULL;
  if (!t || !b || b->rank != 2 || t->dtype != KN_DTYPE_F32 ||
      (kn_tensor_numel(t) != 1 && (t->rank != 1 || t->dims[0] != b->dims[1])))
    return NULL;
  return t;
}

static int32_t mmi_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (!mmi_const_b(g, n, NULL, NULL)) return 0;
  /* the fused op's scales: both or neither, b_scale a constant */
  if (!strcmp(n->op_type, "MatMulIntegerToFloat") && n->n_inputs > 4 && n->inputs[4] >= 0 &&
      !mmif_b_scale(g, n))
    return 0;
  return KN_TACTIC_qgemm_integer;
}

static kn_status mmi_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                          void **packed, kn_error *err) {
  *packed = NULL;
  if (n->tactic != KN_TACTIC_qgemm_integer || !mmi_const_b(g, n, NULL, NULL)) return KN_OK;
  const kn_tensor *b = g->values[n->inputs[1]].constant;
  int64_t k = b->dims[0], nn = b->dims[1];
  kn_qgemm_impl impl = kn_qgemm_impl_for((kn_isa)target->isa, kn_cpu_features());
  size_t head = MMI_HEAD, corr_bytes = mmi_corr_bytes(nn);
  size_t bbytes = kn_qgemm_pack_b_size(impl, k, nn);
  int8_t *bs = kn_malloc((size_t)(k * nn));
  float *ws = kn_malloc((size_t)nn * sizeof(float));
  mmi_block *p = bs && ws ? kn_packed_alloc(head + corr_bytes + bbytes, target->isa,
                                              n->tactic)
                            : NULL;
  if (!p) {
    free(bs);
    free(ws);
    return kn_fail(err, KN_ERR_OOM, "out of memory packing %lld x %lld integer weights",
                   (long long)k, (long long)nn);
  }
  bool any = false;
  mmi_const_b(g, n, (int32_t *)((char *)p + head), &any);
  for (int64_t i = 0; i < k * nn; i++)
    bs[i] = b->dtype == KN_DTYPE_U8 ? (int8_t)((int32_t)((const uint8_t *)b->data)[i] - 128)
                                    : ((const int8_t *)b->data)[i];
  /* MatMulIntegerToFloat: B's scale as the kernels' w_scale (their fp32
   * output is then (float)s32 * (a_scale * w_scale[j]), the fused chain's
   * bits); else ones */
  const kn_tensor *bsc = mmif_b_scale(g, n);
  for (int64_t j = 0; j < nn; j++)
    ws[j] = bsc ? ((const float *)bsc->data)[kn_tensor_numel(bsc) == 1 ? 0 : j] : 1.0f;
  kn_qgemm_pack_b(impl, k, nn, bs, nn, false, ws, (char *)p + head + corr_bytes);
  free(bs);
  free(ws);
  p->impl = (int32_t)impl;
  p->has_corr = any;
  p->k = k;
  p->n = nn;
  p->corr_off = head;
  p->b_off = head + corr_bytes;
  *packed = p;
  return KN_OK;
}

/* Block p (a build's, or an engine file's: trusted only as far as these
 * checks go) holds B for k x n on kernels `impl` at the offsets mmi_pack
 * lays out. */
static bool mmi_block_ok(const mmi_block *p, int64_t k, int64_t n, kn_qgemm_impl impl) {
  if (p->k != k || p->n != n || p->impl != (int32_t)impl || k < 1 || n < 1 ||
      k > KN_QGEMM_K_MAX)
    return false;
  size_t head = MMI_HEAD, corr_bytes = mmi_corr_bytes(n);
  return p->corr_off == head && p->b_off == head + corr_bytes &&
         p->hdr.bytes >= head + corr_bytes + kn_qgemm_pack_b_size(impl, k, n);
}

/* What mmi_fast did. */
typedef enum { MMI_NOT_TAKEN, MMI_SUMS, MMI_FLOATS } mmi_done;

/* The fast path: the exact s32 sums into *sums, or, when yf is given and
 * no zero-point correction is due, fp32 into yf straight from the kernels:
 * (float)s32 * (a_scale * w_scale[j]) with the block's w_scale (the fused
 * chain's bits).  *sums NULL: the sums go to the step's scratch, and *sums
 * points at them.  MMI_NOT_TAKEN: take the reference kernel. */
static mmi_done mmi_fast(kn_op_ctx *ctx, const kn_mm_geom *g, const kn_tensor *a,
                         const kn_mm_qparam *azp, int32_t **sums, float *yf, float a_scale,
                         const kn_epilogue *ep, kn_status *st) {
  const mmi_block *p = ctx->packed;
  kn_rt *rt = ctx->rt;
  if (!rt || !p || a->dtype != KN_DTYPE_U8 || g->b_batches != 1 || azp->per != 1 ||
      p->hdr.isa != (int32_t)rt->isa ||
      !mmi_block_ok(p, g->k, g->n, kn_qgemm_impl_for(rt->isa, rt->features)))
    return MMI_NOT_TAKEN;
  int32_t za = azp->t ? (int32_t)kn_load_i64(azp->t->data, azp->t->dtype, 0) : 0;
  /* B is 2-D: the A matrices follow each other, one product of all rows */
  int64_t m = g->batches * g->m;
  bool floats = yf && !p->has_corr;
  kn_qgemm_args q = {.m = m, .n = g->n, .k = g->k, .a = a->data, .lda = g->k, .a_zero = za,
                     .a_scale = a_scale, .b_packed = (const char *)p + p->b_off};
  if (floats) q.c = yf, q.ldc = g->n, q.ep = ep;
  else q.s = (int32_t *)1, q.lds = g->n; /* sizes only, set below */
  kn_qgemm_impl impl = (kn_qgemm_impl)p->impl;
  size_t ks = (kn_qgemm_scratch_size(impl, &q, kn_rt_threads(rt)) + 63) & ~(size_t)63;
  size_t rows_bytes = p->has_corr ? ((size_t)m * sizeof(int32_t) + 63) & ~(size_t)63 : 0;
  size_t sums_bytes = !floats && !*sums ? (size_t)(m * g->n) * sizeof(int32_t) : 0;
  char *scratch = kn_rt_scratch(rt, ks + rows_bytes + sums_bytes);
  if (!scratch) {
    *st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for scratch buffers");
    return MMI_FLOATS;
  }
  *st = KN_OK;
  if (sums_bytes) *sums = (int32_t *)(scratch + ks + rows_bytes);
  if (!floats) q.s = *sums;
  kn_qgemm(impl, rt->pool, &q, scratch);
  if (floats) return MMI_FLOATS;
  if (p->has_corr) {
    const int32_t *corr = (const int32_t *)((const char *)p + p->corr_off);
    uint32_t *rs = (uint32_t *)(scratch + ks);
    const uint8_t *ad = a->data;
    for (int64_t i = 0; i < m; i++) {
      uint32_t sum = 0;
      for (int64_t kk = 0; kk < g->k; kk++) sum += ad[i * g->k + kk];
      rs[i] = sum - (uint32_t)za * (uint32_t)g->k;
    }
    uint32_t *yd = (uint32_t *)*sums;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < g->n; j++) yd[i * g->n + j] += (uint32_t)corr[j] * rs[i];
  }
  return MMI_SUMS;
}

static kn_status mmi_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  kn_mm_geom g;
  kn_mm_qparam azp, bzp;
  kn_status st = kn_mmi_geometry(ctx, a, b, &g, &azp, &bzp);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  int32_t *sums = y->data;
  if (mmi_fast(ctx, &g, a, &azp, &sums, NULL, 1.0f, NULL, &st) != MMI_NOT_TAKEN) return st;
  return ctx->node->op->run(ctx);
}

/* MatMulIntegerToFloat: fp32 straight from the kernels, or their sums
 * (with a zero-point correction) scaled as the reference scales them. */
static kn_status mmif_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *as = kn_in(ctx, 4), *bias = kn_in(ctx, 6);
  kn_mm_geom g;
  kn_mm_qparam azp, bzp;
  bool empty;
  kn_status st = kn_mmif_begin(ctx, &g, &azp, &bzp, &empty);
  if (st || empty) return st;
  float a_scale = as ? *(const float *)as->data : 1.0f;
  int32_t *sums = NULL;
  kn_epilogue ep = {.bias = bias ? bias->data : NULL};
  mmi_done done = mmi_fast(ctx, &g, a, &azp, &sums, kn_out(ctx, 0)->data, a_scale,
                           bias ? &ep : NULL, &st);
  if (done == MMI_NOT_TAKEN) return ctx->node->op->run(ctx);
  if (!st && done != MMI_FLOATS) kn_mmif_store(ctx, sums, g.n);
  return st;
}

/* ---- the family's table ---------------------------------------------------- */

const kn_op_tactics kn_tactics_gemm[] = {
    {NULL, "MatMul", .select = matmul_select, .pack = matmul_pack, .tiling = kn_gemm_tiling,
     .loops = kn_gemm_loops, .precisions = matmul_precisions, .run = matmul_fast_run},
    {NULL, "Gemm", .select = gemm_select, .pack = gemm_pack, .tiling = kn_gemm_tiling,
     .loops = kn_gemm_loops, .precisions = gemm_precisions, .run = gemm_fast_run},
    {NULL, "MatMulInteger", .select = mmi_select, .pack = mmi_pack, .run = mmi_fast_run},
    {KN_DOMAIN, "MatMulIntegerToFloat", .select = mmi_select, .pack = mmi_pack,
     .run = mmif_fast_run},
    {KN_DOMAIN, "FusedGemm", .select = kn_fgemm_select, .pack = kn_fgemm_pack,
     .tiling = kn_gemm_tiling, .loops = kn_gemm_loops, .precisions = kn_fgemm_precisions,
     .run = kn_fgemm_fast},
    KN_TACTICS_END,
};
