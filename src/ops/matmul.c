/*
 * Matrix products: MatMul, Gemm, MatMulInteger, QLinearMatMul, Det.
 *
 * The float32 products run on the portable reference GEMM kn_f32_gemm
 * (src/kernels/gemm/ref-gemm.h), which the convolutions share.
 */
#include "gemm_tactic.h"
#include "op.h"
#include "core/cpu.h"
#include "kernels/qgemm/qgemm.h"
#include "ops/tactic.h"
#include "kernels/gemm/ref-gemm.h"

#include <math.h>

/* ---- float64 and integer GEMMs (float32: kernels/gemm/ref-gemm.h) -------- */

/* float64: C += alpha * op(A) op(B), i-k-j with a contiguous inner loop. */
static void f64_gemm(int64_t m, int64_t n, int64_t k, double alpha,
                     const double *a, int64_t lda, bool ta, const double *b,
                     int64_t ldb, bool tb, double *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    double *ci = c + i * ldc;
    for (int64_t p = 0; p < k; p++) {
      double av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
      if (av == 0.0) continue;
      if (!tb) {
        const double *bp = b + p * ldb;
        for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j];
      } else {
        for (int64_t j = 0; j < n; j++) ci[j] += av * b[j * ldb + p];
      }
    }
  }
}

/* Integers: wrap-around arithmetic in uint64 (exact modulo 2^bits). */
static void u64_gemm(int64_t m, int64_t n, int64_t k, uint64_t alpha,
                     const uint64_t *a, int64_t lda, bool ta, const uint64_t *b,
                     int64_t ldb, bool tb, uint64_t *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    uint64_t *ci = c + i * ldc;
    for (int64_t p = 0; p < k; p++) {
      uint64_t av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
      if (!tb) {
        const uint64_t *bp = b + p * ldb;
        for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j];
      } else {
        for (int64_t j = 0; j < n; j++) ci[j] += av * b[j * ldb + p];
      }
    }
  }
}

/* ---- shared helpers ----------------------------------------------------- */

static bool is_half(kn_dtype t) { return t == KN_DTYPE_F16 || t == KN_DTYPE_BF16; }

static uint64_t *tensor_to_u64(const kn_tensor *t) {
  int64_t n = kn_tensor_numel(t);
  uint64_t *d = kn_malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
  if (!d) return NULL;
  for (int64_t i = 0; i < n; i++) d[i] = (uint64_t)kn_load_i64(t->data, t->dtype, i);
  return d;
}

static double dim_or_one(int64_t d) { return d < 0 ? 1.0 : (double)d; }

static kn_status oom(kn_op_ctx *ctx) {
  return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for scratch buffers");
}

/* ---- MatMul geometry (numpy.matmul) ---------------------------------- */

typedef struct mm_geom {
  int64_t m, n, k;
  int32_t batch_rank;            /* output batch dims */
  int64_t batch[KN_MAX_RANK];
  int64_t a_bstride[KN_MAX_RANK]; /* in matrices, 0 where broadcast */
  int64_t b_bstride[KN_MAX_RANK];
  int64_t batches;               /* product of batch dims */
  int64_t a_batches, b_batches;  /* matrices held by A and B */
} mm_geom;

/* Output shape of matmul(a, b); unknown parts stay unknown.  Fills g when
 * both shapes are fully known. */
static kn_status mm_shape(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                          int32_t *rout, int64_t *dout, mm_geom *g) {
  if (a->rank == 0 || b->rank == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "matrix product inputs must have rank >= 1, got ranks %d and %d",
                      (int)a->rank, (int)b->rank);
  if (a->rank < 0 || b->rank < 0) {
    *rout = -1;
    return KN_OK;
  }
  int32_t ra = a->rank, rb = b->rank;
  int64_t ka = a->dims[ra - 1];
  int64_t kb = rb == 1 ? b->dims[0] : b->dims[rb - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) {
    char sa[128], sb[128];
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "inner dimensions differ: A is %s, B is %s (%lld vs %lld)",
                      kn_shape_str(ra, a->dims, sa, sizeof sa),
                      kn_shape_str(rb, b->dims, sb, sizeof sb), (long long)ka,
                      (long long)kb);
  }
  int32_t rba = ra > 2 ? ra - 2 : 0, rbb = rb > 2 ? rb - 2 : 0;
  int32_t rbo;
  int64_t bo[KN_MAX_RANK];
  kn_status st = kn_broadcast(ctx, rba, a->dims, rbb, b->dims, &rbo, bo);
  if (st) return st;
  int32_t r = 0;
  for (int32_t i = 0; i < rbo; i++) dout[r++] = bo[i];
  int64_t m = ra >= 2 ? a->dims[ra - 2] : 1;
  int64_t n = rb >= 2 ? b->dims[rb - 1] : 1;
  if (ra >= 2) dout[r++] = m;
  if (rb >= 2) dout[r++] = n;
  *rout = r;
  if (!g) return KN_OK;
  memset(g, 0, sizeof *g);
  g->m = m;
  g->n = n;
  g->k = ka;
  g->batch_rank = rbo;
  g->batches = 1;
  for (int32_t i = 0; i < rbo; i++) {
    g->batch[i] = bo[i];
    g->batches *= bo[i];
  }
  kn_broadcast_strides(rba, a->dims, rbo, bo, g->a_bstride);
  kn_broadcast_strides(rbb, b->dims, rbo, bo, g->b_bstride);
  g->a_batches = kn_shape_numel(rba, a->dims);
  g->b_batches = kn_shape_numel(rbb, b->dims);
  return KN_OK;
}

/* Matrix indices of A and B for output batch `idx` (row-major). */
static void mm_batch_index(const mm_geom *g, int64_t idx, int64_t *ia,
                           int64_t *ib) {
  int64_t oa = 0, ob = 0;
  for (int32_t d = g->batch_rank - 1; d >= 0; d--) {
    int64_t x = idx % g->batch[d];
    idx /= g->batch[d];
    oa += x * g->a_bstride[d];
    ob += x * g->b_bstride[d];
  }
  *ia = oa;
  *ib = ob;
}

/* ---- MatMul ------------------------------------------------------------ */

static const kn_dtype matmul_types[] = {
    KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_F16, KN_DTYPE_BF16, KN_DTYPE_I32,
    KN_DTYPE_I64, KN_DTYPE_U32, KN_DTYPE_U64, 0};

static kn_status same_dtype(kn_op_ctx *ctx, const kn_tensor *a,
                            const kn_tensor *b, int32_t ib) {
  if (a->dtype && b->dtype && a->dtype != b->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE,
                      "input %d has dtype %s but input 0 has %s; they must match",
                      (int)ib, kn_dtype_name(b->dtype), kn_dtype_name(a->dtype));
  return KN_OK;
}

static kn_status matmul_infer(kn_op_ctx *ctx) {
  const kn_tensor *a, *b;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &a)) || (st = kn_in_req(ctx, 1, &b))) return st;
  if ((st = kn_check_dtype(ctx, 0, a, matmul_types)) ||
      (st = kn_check_dtype(ctx, 1, b, matmul_types)) ||
      (st = same_dtype(ctx, a, b, 1)))
    return st;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  if ((st = mm_shape(ctx, a, b, &r, d, NULL))) return st;
  kn_out_set(ctx, 0, a->dtype ? a->dtype : b->dtype, r, d);
  return KN_OK;
}

/* out (batches x m x n, zeroed) += a @ b for any dtype in matmul_types. */
static kn_status matmul_compute(kn_op_ctx *ctx, const mm_geom *g,
                                const kn_tensor *a, const kn_tensor *b,
                                kn_tensor *y) {
  int64_t m = g->m, n = g->n, k = g->k;
  int64_t sa = m * k, sb = k * n, sy = m * n;
  kn_dtype t = y->dtype;
  if (sy == 0 || g->batches == 0) return KN_OK;
  if (t == KN_DTYPE_F32) {
    for (int64_t bi = 0; bi < g->batches; bi++) {
      int64_t ia, ib;
      mm_batch_index(g, bi, &ia, &ib);
      if (!kn_f32_gemm(m, n, k, 1.0f, (const float *)a->data + ia * sa, k, false,
                       (const float *)b->data + ib * sb, n, false,
                       (float *)y->data + bi * sy, n))
        return oom(ctx);
    }
    return KN_OK;
  }
  if (t == KN_DTYPE_F64) {
    for (int64_t bi = 0; bi < g->batches; bi++) {
      int64_t ia, ib;
      mm_batch_index(g, bi, &ia, &ib);
      f64_gemm(m, n, k, 1.0, (const double *)a->data + ia * sa, k, false,
               (const double *)b->data + ib * sb, n, false,
               (double *)y->data + bi * sy, n);
    }
    return KN_OK;
  }
  if (is_half(t)) {
    float *fa = kn_tensor_f32(a), *fb = kn_tensor_f32(b);
    float *fy = kn_calloc((size_t)sy, sizeof(float));
    kn_status st = KN_OK;
    if (!fa || !fb || !fy) st = oom(ctx);
    for (int64_t bi = 0; !st && bi < g->batches; bi++) {
      int64_t ia, ib;
      mm_batch_index(g, bi, &ia, &ib);
      memset(fy, 0, (size_t)sy * sizeof(float));
      if (!kn_f32_gemm(m, n, k, 1.0f, fa + ia * sa, k, false, fb + ib * sb, n,
                       false, fy, n))
        st = oom(ctx);
      else
        kn_convert(fy, KN_DTYPE_F32, (uint16_t *)y->data + bi * sy, t, sy);
    }
    free(fa);
    free(fb);
    free(fy);
    return st;
  }
  /* integers */
  uint64_t *ua = tensor_to_u64(a), *ub = tensor_to_u64(b);
  uint64_t *uy = kn_calloc((size_t)sy, sizeof(uint64_t));
  kn_status st = KN_OK;
  if (!ua || !ub || !uy) st = oom(ctx);
  for (int64_t bi = 0; !st && bi < g->batches; bi++) {
    int64_t ia, ib;
    mm_batch_index(g, bi, &ia, &ib);
    memset(uy, 0, (size_t)sy * sizeof(uint64_t));
    u64_gemm(m, n, k, 1, ua + ia * sa, k, false, ub + ib * sb, n, false, uy, n);
    for (int64_t i = 0; i < sy; i++) kn_store_i64(y->data, t, bi * sy + i, (int64_t)uy[i]);
  }
  free(ua);
  free(ub);
  free(uy);
  return st;
}


/* ---- MatMul on the fast GEMM (tactics gemm_packed and gemm) ------------- */

typedef struct mm_batch_task {
  const mm_geom *g;
  kn_isa isa;
  kn_sgemm_args args; /* a, b, c of batch 0; the rest shared */
  char *scratch;
  size_t per_thread;
} mm_batch_task;

static void mm_batch_run(void *arg, int64_t bi, int32_t thread) {
  const mm_batch_task *t = arg;
  int64_t ia, ib;
  mm_batch_index(t->g, bi, &ia, &ib);
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
static kn_status matmul_fast(kn_op_ctx *ctx, const mm_geom *gm, const kn_tensor *a,
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
      mm_batch_index(gm, bi, &ia, &ib);
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

static kn_status matmul_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  int32_t r;
  int64_t d[KN_MAX_RANK];
  mm_geom g;
  kn_status st = mm_shape(ctx, a, b, &r, d, &g);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (fast_tactic(ctx) && y->dtype == KN_DTYPE_F32 && a->dtype == KN_DTYPE_F32 &&
      b->dtype == KN_DTYPE_F32)
    return matmul_fast(ctx, &g, a, b, y);
  return matmul_compute(ctx, &g, a, b, y);
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

/* 2 * M * N * K per output matrix; unknown dims count as 1, and when the
 * output rank is unknown the operands' own dims give the estimate. */
static double matmul_flops(const kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0);
  const kn_tensor *b = kn_in(ctx, strcmp(ctx->node->op_type, "QLinearMatMul") ? 1 : 3);
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!a || !b) return 0;
  double k = a->rank >= 1 ? dim_or_one(a->dims[a->rank - 1])
             : b->rank >= 2 ? dim_or_one(b->dims[b->rank - 2]) : 1;
  double outn = 1;
  if (y && y->rank >= 0) {
    for (int32_t i = 0; i < y->rank; i++) outn *= dim_or_one(y->dims[i]);
  } else {
    for (int32_t i = 0; i + 1 < a->rank; i++) outn *= dim_or_one(a->dims[i]);
    if (b->rank >= 2) outn *= dim_or_one(b->dims[b->rank - 1]);
  }
  return 2.0 * outn * k;
}

/* ---- Gemm --------------------------------------------------------------- */

static kn_status gemm_dims(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                           int64_t *m, int64_t *n, int64_t *k) {
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  *m = *n = *k = -1;
  if (a->rank >= 0 && a->rank != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input A must be 2-D, got rank %d",
                      (int)a->rank);
  if (b->rank >= 0 && b->rank != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input B must be 2-D, got rank %d",
                      (int)b->rank);
  int64_t ka = -1, kb = -1;
  if (a->rank == 2) {
    *m = a->dims[ta ? 1 : 0];
    ka = a->dims[ta ? 0 : 1];
  }
  if (b->rank == 2) {
    *n = b->dims[tb ? 0 : 1];
    kb = b->dims[tb ? 1 : 0];
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "op(A) has %lld columns but op(B) has %lld rows (transA=%d, transB=%d)",
                      (long long)ka, (long long)kb, ta, tb);
  *k = ka >= 0 ? ka : kb;
  return KN_OK;
}

/* C must broadcast unidirectionally to (m, n). */
static kn_status gemm_check_c(kn_op_ctx *ctx, const kn_tensor *c, int64_t m,
                              int64_t n) {
  if (!c || c->rank < 0) return KN_OK;
  if (c->rank > 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input C must have rank <= 2, got %d",
                      (int)c->rank);
  int64_t want[2] = {m, n};
  for (int32_t i = 0; i < c->rank; i++) {
    int64_t cd = c->dims[i], od = want[2 - c->rank + i];
    if (cd < 0 || od < 0 || cd == 1 || cd == od) continue;
    char sc[64];
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input C of shape %s does not broadcast to the output %lldx%lld",
                      kn_shape_str(c->rank, c->dims, sc, sizeof sc), (long long)m,
                      (long long)n);
  }
  return KN_OK;
}

static kn_status gemm_infer(kn_op_ctx *ctx) {
  const kn_tensor *a, *b, *c = kn_in(ctx, 2);
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &a)) || (st = kn_in_req(ctx, 1, &b))) return st;
  if ((st = kn_check_dtype(ctx, 0, a, matmul_types)) ||
      (st = kn_check_dtype(ctx, 1, b, matmul_types)) ||
      (st = same_dtype(ctx, a, b, 1)))
    return st;
  if (c && (st = same_dtype(ctx, a, c, 2))) return st;
  if (!c && ctx->opset < 11 && ctx->n_in < 3)
    return kn_op_fail(ctx, KN_ERR_MISSING,
                      "input C is required before opset 11 (model opset %lld)",
                      (long long)ctx->opset);
  int64_t m, n, k;
  if ((st = gemm_dims(ctx, a, b, &m, &n, &k))) return st;
  if ((st = gemm_check_c(ctx, c, m, n))) return st;
  int64_t d[2] = {m, n};
  kn_out_set(ctx, 0, a->dtype ? a->dtype : b->dtype, 2, d);
  return KN_OK;
}

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

static kn_status gemm_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *c = kn_in(ctx, 2);
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  float alpha = kn_attr_float(ctx, "alpha", 1.0f);
  float beta = kn_attr_float(ctx, "beta", 1.0f);
  int64_t m, n, k;
  kn_status st = gemm_dims(ctx, a, b, &m, &n, &k);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  kn_dtype t = y->dtype;
  int64_t lda = a->dims[1], ldb = b->dims[1];
  if (m * n == 0) return KN_OK;
  if (fast_tactic(ctx) && t == KN_DTYPE_F32 && a->dtype == t && b->dtype == t &&
      (!c || c->dtype == t))
    return gemm_fast(ctx, a, b, c, ta, tb, alpha, beta, m, n, k, y);
  bool int_type = kn_dtype_is_int(t);

  /* Work buffer w (float/double/uint64 matching the compute type). */
  void *w = NULL;
  bool own_w = false;
  if (t == KN_DTYPE_F32 || t == KN_DTYPE_F64) {
    w = y->data;
  } else {
    size_t es = int_type ? sizeof(uint64_t) : sizeof(float);
    w = kn_calloc((size_t)(m * n), es);
    if (!w) return oom(ctx);
    own_w = true;
  }
  /* beta * C, broadcast */
  if (c && beta != 0.0f && kn_tensor_numel(c) > 0) {
    int64_t cs[2] = {0, 0};
    int64_t od[2] = {m, n};
    kn_broadcast_strides(c->rank, c->dims, 2, od, cs);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        int64_t ci = i * cs[0] + j * cs[1], oi = i * n + j;
        if (t == KN_DTYPE_F64)
          ((double *)w)[oi] = (double)beta * ((const double *)c->data)[ci];
        else if (int_type)
          ((uint64_t *)w)[oi] =
              (uint64_t)(int64_t)beta * (uint64_t)kn_load_i64(c->data, c->dtype, ci);
        else
          ((float *)w)[oi] = beta * (float)kn_load_f64(c->data, c->dtype, ci);
      }
  }
  st = KN_OK;
  if (t == KN_DTYPE_F32) {
    if (!kn_f32_gemm(m, n, k, alpha, a->data, lda, ta, b->data, ldb, tb, w, n))
      st = oom(ctx);
  } else if (t == KN_DTYPE_F64) {
    f64_gemm(m, n, k, alpha, a->data, lda, ta, b->data, ldb, tb, w, n);
  } else if (int_type) {
    uint64_t *ua = tensor_to_u64(a), *ub = tensor_to_u64(b);
    if (!ua || !ub) st = oom(ctx);
    else
      u64_gemm(m, n, k, (uint64_t)(int64_t)alpha, ua, lda, ta, ub, ldb, tb, w, n);
    free(ua);
    free(ub);
    if (!st)
      for (int64_t i = 0; i < m * n; i++)
        kn_store_i64(y->data, t, i, (int64_t)((uint64_t *)w)[i]);
  } else {
    float *fa = kn_tensor_f32(a), *fb = kn_tensor_f32(b);
    if (!fa || !fb) st = oom(ctx);
    else if (!kn_f32_gemm(m, n, k, alpha, fa, lda, ta, fb, ldb, tb, w, n))
      st = oom(ctx);
    free(fa);
    free(fb);
    if (!st) kn_convert(w, KN_DTYPE_F32, y->data, t, m * n);
  }
  if (own_w) free(w);
  return st;
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

static double gemm_flops(const kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  if (!a || !b || a->rank != 2 || b->rank != 2) return 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  return 2.0 * dim_or_one(a->dims[0]) * dim_or_one(a->dims[1]) *
         dim_or_one(b->dims[tb ? 0 : 1]);
}

/* ---- MatMulInteger / QLinearMatMul ------------------------------------ */

static const kn_dtype q8_types[] = {KN_DTYPE_U8, KN_DTYPE_I8, 0};

/* A zero point / scale that is per tensor (one element), per row of A
 * (m or a_batches*m elements) or per column of B (n or b_batches*n). */
typedef struct qparam {
  const kn_tensor *t;
  int64_t per;   /* 1: per tensor; else elements per matrix (m or n) */
  bool batched;  /* one set per matrix of the operand */
} qparam;

static kn_status qparam_check(kn_op_ctx *ctx, int32_t input, const kn_tensor *t,
                              int64_t per, int64_t batches, qparam *q) {
  q->t = t;
  q->per = 1;
  q->batched = false;
  if (!t || !kn_shape_known(t) || per < 0) return KN_OK;
  int64_t nel = kn_tensor_numel(t);
  if (nel == 1) return KN_OK;
  if (nel == per) {
    q->per = per;
    return KN_OK;
  }
  if (batches >= 0 && nel == per * batches) {
    q->per = per;
    q->batched = true;
    return KN_OK;
  }
  char s[128];
  return kn_op_fail(ctx, KN_ERR_SHAPE,
                    "input %d of shape %s must have 1 element (per tensor), %lld "
                    "(per row/column) or %lld (per row/column of each matrix)",
                    (int)input, kn_shape_str(t->rank, t->dims, s, sizeof s),
                    (long long)per, (long long)(per * (batches > 0 ? batches : 1)));
}

static inline int64_t qparam_index(const qparam *q, int64_t matrix, int64_t i) {
  if (q->per == 1) return 0;
  return (q->batched ? matrix * q->per : 0) + i;
}

/* acc[bi] (m x n int32 matrices) = sum_k (a - azp)(b - bzp). */
static kn_status mm_int_accumulate(kn_op_ctx *ctx, const mm_geom *g,
                                   const kn_tensor *a, const qparam *azp,
                                   const kn_tensor *b, const qparam *bzp,
                                   int32_t *acc) {
  int64_t m = g->m, n = g->n, k = g->k;
  int32_t *brow = kn_malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof(int32_t));
  if (!brow) return oom(ctx);
  for (int64_t bi = 0; bi < g->batches; bi++) {
    int64_t ia, ib;
    mm_batch_index(g, bi, &ia, &ib);
    /* B with zero points removed */
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) {
        int64_t zp = bzp->t ? kn_load_i64(bzp->t->data, bzp->t->dtype,
                                          qparam_index(bzp, ib, j))
                            : 0;
        brow[p * n + j] =
            (int32_t)(kn_load_i64(b->data, b->dtype, ib * k * n + p * n + j) - zp);
      }
    int32_t *c = acc + bi * m * n;
    for (int64_t i = 0; i < m; i++) {
      int64_t zp = azp->t ? kn_load_i64(azp->t->data, azp->t->dtype,
                                        qparam_index(azp, ia, i))
                          : 0;
      uint32_t *ci = (uint32_t *)(c + i * n);
      for (int64_t p = 0; p < k; p++) {
        int32_t av =
            (int32_t)(kn_load_i64(a->data, a->dtype, ia * m * k + i * k + p) - zp);
        if (!av) continue;
        const int32_t *bp = brow + p * n;
        for (int64_t j = 0; j < n; j++)
          ci[j] += (uint32_t)av * (uint32_t)bp[j]; /* int32 wrap-around */
      }
    }
  }
  free(brow);
  return KN_OK;
}

/* MatMulInteger's checks and output shape; output 0 of dtype `out`. */
static kn_status mmi_infer_as(kn_op_ctx *ctx, kn_dtype out) {
  const kn_tensor *a, *b;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &a)) || (st = kn_in_req(ctx, 1, &b))) return st;
  if ((st = kn_check_dtype(ctx, 0, a, q8_types)) ||
      (st = kn_check_dtype(ctx, 1, b, q8_types)))
    return st;
  const kn_tensor *azp = kn_in(ctx, 2), *bzp = kn_in(ctx, 3);
  if ((azp && (st = kn_check_dtype(ctx, 2, azp, q8_types))) ||
      (bzp && (st = kn_check_dtype(ctx, 3, bzp, q8_types))))
    return st;
  if (azp && a->dtype && azp->dtype && azp->dtype != a->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "a_zero_point dtype %s differs from A's %s",
                      kn_dtype_name(azp->dtype), kn_dtype_name(a->dtype));
  if (bzp && b->dtype && bzp->dtype && bzp->dtype != b->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "b_zero_point dtype %s differs from B's %s",
                      kn_dtype_name(bzp->dtype), kn_dtype_name(b->dtype));
  int32_t r;
  int64_t d[KN_MAX_RANK];
  mm_geom g;
  bool known = kn_shape_known(a) && kn_shape_known(b);
  if ((st = mm_shape(ctx, a, b, &r, d, known ? &g : NULL))) return st;
  if (known) {
    qparam q;
    if ((st = qparam_check(ctx, 2, azp, g.m, g.a_batches, &q)) ||
        (st = qparam_check(ctx, 3, bzp, g.n, g.b_batches, &q)))
      return st;
  }
  kn_out_set(ctx, 0, out, r, d);
  return KN_OK;
}

static kn_status mmi_infer(kn_op_ctx *ctx) { return mmi_infer_as(ctx, KN_DTYPE_I32); }

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
static mmi_done mmi_fast(kn_op_ctx *ctx, const mm_geom *g, const kn_tensor *a,
                         const qparam *azp, int32_t **sums, float *yf, float a_scale,
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
    *st = oom(ctx);
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

/* The product's geometry and A's and B's zero points (inputs 2 and 3),
 * checked: what MatMulInteger and MatMulIntegerToFloat run with. */
static kn_status mmi_geometry(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                              mm_geom *g, qparam *azp, qparam *bzp) {
  int32_t r;
  int64_t d[KN_MAX_RANK];
  kn_status st;
  if ((st = mm_shape(ctx, a, b, &r, d, g)) ||
      (st = qparam_check(ctx, 2, kn_in(ctx, 2), g->m, g->a_batches, azp)) ||
      (st = qparam_check(ctx, 3, kn_in(ctx, 3), g->n, g->b_batches, bzp)))
    return st;
  return KN_OK;
}

static kn_status mmi_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  mm_geom g;
  qparam azp, bzp;
  kn_status st = mmi_geometry(ctx, a, b, &g, &azp, &bzp);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  int32_t *sums = y->data;
  if (mmi_fast(ctx, &g, a, &azp, &sums, NULL, 1.0f, NULL, &st) != MMI_NOT_TAKEN) return st;
  /* the sums add into y: the executor zeroes only a reference-tactic
   * step's outputs, and a step given this tactic may fall back here */
  memset(y->data, 0, (size_t)kn_tensor_numel(y) * sizeof(int32_t));
  return mm_int_accumulate(ctx, &g, a, &azp, b, &bzp, y->data);
}

/* ---- MatMulIntegerToFloat (kiln) -------------------------------------------
 * What the integer_gemm pass makes of MatMulInteger -> Cast(float) [-> Mul
 * by Mul(a_scale, b_scale)], ONNX Runtime's dynamic-quantization chain:
 *   inputs  A, B, a_zero?, b_zero? (as MatMulInteger), a_scale?, b_scale?, bias?
 *   Y[i][j] = (float)MatMulInteger(A, B, a_zero, b_zero)[i][j] * (a_scale * b_scale[j])
 *             (+ bias[j]: a float of one value per column of B)
 * with a_scale a float scalar and b_scale one float or one per column of B
 * (both or neither; neither: the Cast alone), every product rounded to
 * fp32 as the chain's nodes round it, so the result is the chain's bit for
 * bit (no s32 intermediate in memory: the kernels' fp32 output). */

static kn_status mmif_infer(kn_op_ctx *ctx) {
  kn_status st = mmi_infer_as(ctx, KN_DTYPE_F32);
  if (st) return st;
  static const kn_dtype f32[] = {KN_DTYPE_F32, 0};
  for (int32_t i = 4; i < 6; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (t && (st = kn_check_dtype(ctx, i, t, f32))) return st;
  }
  if ((kn_in(ctx, 4) != NULL) != (kn_in(ctx, 5) != NULL))
    return kn_op_fail(ctx, KN_ERR_MISSING, "a_scale and b_scale must be given together");
  const kn_tensor *bias = kn_in(ctx, 6);
  if (bias && (st = kn_check_dtype(ctx, 6, bias, f32))) return st;
  if (bias && bias->rank != 1 && bias->rank >= 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "bias must have rank 1, got rank %d", (int)bias->rank);
  return KN_OK;
}

static kn_status mmif_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  const kn_tensor *as = kn_in(ctx, 4), *bs = kn_in(ctx, 5), *bias = kn_in(ctx, 6);
  mm_geom g;
  qparam azp, bzp;
  kn_status st = mmi_geometry(ctx, a, b, &g, &azp, &bzp);
  if (st) return st;
  if ((as && kn_tensor_numel(as) != 1) ||
      (bs && kn_tensor_numel(bs) != 1 && kn_tensor_numel(bs) != g.n) ||
      (bias && kn_tensor_numel(bias) != g.n))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "a_scale must have 1 element, b_scale 1 or %lld (B's columns) and bias "
                      "%lld",
                      (long long)g.n, (long long)g.n);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t total = kn_tensor_numel(y);
  if (total == 0) return KN_OK;
  float a_scale = as ? *(const float *)as->data : 1.0f;
  int32_t *sums = NULL, *owned = NULL;
  kn_epilogue ep = {.bias = bias ? bias->data : NULL};
  mmi_done done = mmi_fast(ctx, &g, a, &azp, &sums, y->data, a_scale, bias ? &ep : NULL, &st);
  if (done == MMI_NOT_TAKEN) {
    sums = owned = kn_calloc((size_t)total, sizeof(int32_t)); /* the reference adds into it */
    if (!sums) return oom(ctx);
    st = mm_int_accumulate(ctx, &g, a, &azp, b, &bzp, sums);
  }
  if (!st && done != MMI_FLOATS) {
    float *yd = y->data;
    const float *bsd = bs ? bs->data : NULL;
    bool per_col = bs && kn_tensor_numel(bs) != 1;
    const float *bd = bias ? bias->data : NULL;
    for (int64_t i = 0; i < total; i++) {
      float f = (float)sums[i];
      f = bsd ? f * (a_scale * bsd[per_col ? i % g.n : 0]) : f;
      yd[i] = bd ? f + bd[i % g.n] : f;
    }
  }
  free(owned);
  return st;
}

/* Round half to even and saturate into the range of dtype t. */
static int64_t quant_saturate(double v, kn_dtype t) {
  double r = nearbyint(v);
  double lo = t == KN_DTYPE_U8 ? 0 : -128, hi = t == KN_DTYPE_U8 ? 255 : 127;
  if (isnan(r)) r = 0;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return (int64_t)r;
}

static const kn_dtype scale_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_BF16, 0};

static kn_status qlmm_infer(kn_op_ctx *ctx) {
  const kn_tensor *in[8];
  kn_status st;
  for (int32_t i = 0; i < 8; i++)
    if ((st = kn_in_req(ctx, i, &in[i]))) return st;
  const kn_tensor *a = in[0], *b = in[3];
  if ((st = kn_check_dtype(ctx, 0, a, q8_types)) ||
      (st = kn_check_dtype(ctx, 3, b, q8_types)) ||
      (st = kn_check_dtype(ctx, 7, in[7], q8_types)) ||
      (st = kn_check_dtype(ctx, 1, in[1], scale_types)) ||
      (st = kn_check_dtype(ctx, 4, in[4], scale_types)) ||
      (st = kn_check_dtype(ctx, 6, in[6], scale_types)))
    return st;
  static const int32_t zp_of[3][2] = {{2, 0}, {5, 3}, {7, 7}};
  for (int32_t i = 0; i < 3; i++) {
    const kn_tensor *z = in[zp_of[i][0]], *x = in[zp_of[i][1]];
    if (z->dtype && x->dtype && z->dtype != x->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected %s",
                        (int)zp_of[i][0], kn_dtype_name(z->dtype),
                        kn_dtype_name(x->dtype));
  }
  if (kn_shape_known(in[6]) && kn_tensor_numel(in[6]) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "y_scale must have one element");
  if (kn_shape_known(in[7]) && kn_tensor_numel(in[7]) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "y_zero_point must have one element");
  int32_t r;
  int64_t d[KN_MAX_RANK];
  mm_geom g;
  bool known = kn_shape_known(a) && kn_shape_known(b);
  if ((st = mm_shape(ctx, a, b, &r, d, known ? &g : NULL))) return st;
  if (known) {
    qparam q;
    if ((st = qparam_check(ctx, 1, in[1], g.m, g.a_batches, &q)) ||
        (st = qparam_check(ctx, 2, in[2], g.m, g.a_batches, &q)) ||
        (st = qparam_check(ctx, 4, in[4], g.n, g.b_batches, &q)) ||
        (st = qparam_check(ctx, 5, in[5], g.n, g.b_batches, &q)))
      return st;
  }
  kn_out_set(ctx, 0, in[7]->dtype ? in[7]->dtype : KN_DTYPE_U8, r, d);
  return KN_OK;
}

static kn_status qlmm_run(kn_op_ctx *ctx) {
  const kn_tensor *in[8];
  for (int32_t i = 0; i < 8; i++) in[i] = kn_in(ctx, i);
  const kn_tensor *a = in[0], *b = in[3];
  int32_t r;
  int64_t d[KN_MAX_RANK];
  mm_geom g;
  qparam as, azp, bs, bzp;
  kn_status st;
  if ((st = mm_shape(ctx, a, b, &r, d, &g)) ||
      (st = qparam_check(ctx, 1, in[1], g.m, g.a_batches, &as)) ||
      (st = qparam_check(ctx, 2, in[2], g.m, g.a_batches, &azp)) ||
      (st = qparam_check(ctx, 4, in[4], g.n, g.b_batches, &bs)) ||
      (st = qparam_check(ctx, 5, in[5], g.n, g.b_batches, &bzp)))
    return st;
  kn_tensor *y = kn_out(ctx, 0);
  int64_t total = kn_tensor_numel(y);
  if (total == 0) return KN_OK;
  int32_t *acc = kn_malloc((size_t)total * sizeof(int32_t));
  if (!acc) return oom(ctx);
  memset(acc, 0, (size_t)total * sizeof(int32_t));
  st = mm_int_accumulate(ctx, &g, a, &azp, b, &bzp, acc);
  if (!st) {
    float ys = (float)kn_load_f64(in[6]->data, in[6]->dtype, 0);
    double yzp = (double)kn_load_i64(in[7]->data, in[7]->dtype, 0);
    for (int64_t bi = 0; bi < g.batches; bi++) {
      int64_t ia, ib;
      mm_batch_index(&g, bi, &ia, &ib);
      for (int64_t i = 0; i < g.m; i++) {
        float sa = (float)kn_load_f64(in[1]->data, in[1]->dtype,
                                      qparam_index(&as, ia, i));
        for (int64_t j = 0; j < g.n; j++) {
          float sb = (float)kn_load_f64(in[4]->data, in[4]->dtype,
                                        qparam_index(&bs, ib, j));
          float mult = sa * sb / ys;
          int64_t o = bi * g.m * g.n + i * g.n + j;
          kn_store_i64(y->data, y->dtype, o,
                       quant_saturate((double)acc[o] * mult + yzp, y->dtype));
        }
      }
    }
  }
  free(acc);
  return st;
}

/* ---- Det ---------------------------------------------------------------- */

static const kn_dtype det_types[] = {KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_F16,
                                     KN_DTYPE_BF16, 0};

static kn_status det_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_check_dtype(ctx, 0, x, det_types)))
    return st;
  if (x->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
    return KN_OK;
  }
  if (x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 2, got %d",
                      (int)x->rank);
  int64_t a = x->dims[x->rank - 2], b = x->dims[x->rank - 1];
  if (a >= 0 && b >= 0 && a != b)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "the last two dims must be equal (square matrices), got %lldx%lld",
                      (long long)a, (long long)b);
  kn_out_set(ctx, 0, x->dtype, x->rank - 2, x->dims);
  return KN_OK;
}

static kn_status det_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t n = x->dims[x->rank - 1];
  int64_t count = kn_tensor_numel(y);
  if (count == 0) return KN_OK;
  double *m = kn_malloc((size_t)(n * n > 0 ? n * n : 1) * sizeof(double));
  if (!m) return oom(ctx);
  for (int64_t bi = 0; bi < count; bi++) {
    for (int64_t i = 0; i < n * n; i++)
      m[i] = kn_load_f64(x->data, x->dtype, bi * n * n + i);
    /* LU decomposition with partial pivoting */
    double det = 1.0;
    for (int64_t c = 0; c < n && det != 0.0; c++) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < n; r++)
        if (fabs(m[r * n + c]) > fabs(m[piv * n + c])) piv = r;
      if (m[piv * n + c] == 0.0) {
        det = 0.0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < n; j++) {
          double t = m[c * n + j];
          m[c * n + j] = m[piv * n + j];
          m[piv * n + j] = t;
        }
        det = -det;
      }
      double p = m[c * n + c];
      det *= p;
      for (int64_t r = c + 1; r < n; r++) {
        double f = m[r * n + c] / p;
        if (f == 0.0) continue;
        for (int64_t j = c; j < n; j++) m[r * n + j] -= f * m[c * n + j];
      }
    }
    kn_store_f64(y->data, y->dtype, bi, det);
  }
  free(m);
  return KN_OK;
}

const kn_op_def kn_ops_matmul[] = {
    {"MatMul", NULL, 2, 2, 1, 1, 1, 21, matmul_infer, matmul_run, matmul_flops,
     .select = matmul_select, .pack = matmul_pack, .unpack = kn_gemm_unpack,
     .tiling = kn_gemm_tiling, .loops = kn_gemm_loops, .precisions = matmul_precisions},
    {"Gemm", NULL, 2, 3, 1, 1, 1, 21, gemm_infer, gemm_run, gemm_flops,
     .select = gemm_select, .pack = gemm_pack, .unpack = kn_gemm_unpack,
     .tiling = kn_gemm_tiling, .loops = kn_gemm_loops, .precisions = gemm_precisions},
    {"MatMulInteger", NULL, 2, 4, 1, 1, 10, 21, mmi_infer, mmi_run, matmul_flops,
     .select = mmi_select, .pack = mmi_pack, .unpack = kn_gemm_unpack},
    {"QLinearMatMul", NULL, 8, 8, 1, 1, 10, 21, qlmm_infer, qlmm_run, matmul_flops},
    {"MatMulIntegerToFloat", KN_DOMAIN, 2, 7, 1, 1, 1, 1, mmif_infer, mmif_run, matmul_flops,
     .select = mmi_select, .pack = mmi_pack, .unpack = kn_gemm_unpack},
    {"Det", NULL, 1, 1, 1, 1, 11, 22, det_infer, det_run, NULL},
    KN_OP_END,
};
