/*
 * Matrix products: MatMul, Gemm, MatMulInteger, QLinearMatMul, Det.
 *
 * The float32 products run on the portable reference GEMM kn_f32_gemm
 * (src/kernels/gemm/ref-gemm.h), which the convolutions share.  The packed
 * GEMM tactics (MatMul, Gemm) and the int8 GEMM of MatMulInteger and
 * MatMulIntegerToFloat are src/tactics/gemm.
 */
#include "matmul.h"

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

typedef kn_mm_geom mm_geom;

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
      kn_mm_batch_index(g, bi, &ia, &ib);
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
      kn_mm_batch_index(g, bi, &ia, &ib);
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
      kn_mm_batch_index(g, bi, &ia, &ib);
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
    kn_mm_batch_index(g, bi, &ia, &ib);
    memset(uy, 0, (size_t)sy * sizeof(uint64_t));
    u64_gemm(m, n, k, 1, ua + ia * sa, k, false, ub + ib * sb, n, false, uy, n);
    for (int64_t i = 0; i < sy; i++) kn_store_i64(y->data, t, bi * sy + i, (int64_t)uy[i]);
  }
  free(ua);
  free(ub);
  free(uy);
  return st;
}


kn_status kn_matmul_geometry(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                             mm_geom *g) {
  int32_t r;
  int64_t d[KN_MAX_RANK];
  return mm_shape(ctx, a, b, &r, d, g);
}

static kn_status matmul_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  mm_geom g;
  kn_status st = kn_matmul_geometry(ctx, a, b, &g);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  kn_out_zero_for_ref(ctx, 0); /* matmul_compute adds into y */
  return matmul_compute(ctx, &g, a, b, y);
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

kn_status kn_gemm_dims(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b, int64_t *m,
                       int64_t *n, int64_t *k) {
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
  if ((st = kn_gemm_dims(ctx, a, b, &m, &n, &k))) return st;
  if ((st = gemm_check_c(ctx, c, m, n))) return st;
  int64_t d[2] = {m, n};
  kn_out_set(ctx, 0, a->dtype ? a->dtype : b->dtype, 2, d);
  return KN_OK;
}

static kn_status gemm_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *c = kn_in(ctx, 2);
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  float alpha = kn_attr_float(ctx, "alpha", 1.0f);
  float beta = kn_attr_float(ctx, "beta", 1.0f);
  int64_t m, n, k;
  kn_status st = kn_gemm_dims(ctx, a, b, &m, &n, &k);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  kn_dtype t = y->dtype;
  int64_t lda = a->dims[1], ldb = b->dims[1];
  if (m * n == 0) return KN_OK;
  kn_out_zero_for_ref(ctx, 0); /* a float y is the sum below */
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
typedef kn_mm_qparam qparam;

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
    kn_mm_batch_index(g, bi, &ia, &ib);
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

/* The product's geometry and A's and B's zero points (inputs 2 and 3),
 * checked: what MatMulInteger and MatMulIntegerToFloat run with. */
kn_status kn_mmi_geometry(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b, mm_geom *g,
                          qparam *azp, qparam *bzp) {
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
  kn_status st = kn_mmi_geometry(ctx, a, b, &g, &azp, &bzp);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  /* the sums add into y (ops/op.h: a fast tactic's output is not zeroed) */
  kn_out_zero_for_ref(ctx, 0);
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

kn_status kn_mmif_begin(kn_op_ctx *ctx, mm_geom *g, qparam *azp, qparam *bzp, bool *empty) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  const kn_tensor *as = kn_in(ctx, 4), *bs = kn_in(ctx, 5), *bias = kn_in(ctx, 6);
  *empty = false;
  kn_status st = kn_mmi_geometry(ctx, a, b, g, azp, bzp);
  if (st) return st;
  if ((as && kn_tensor_numel(as) != 1) ||
      (bs && kn_tensor_numel(bs) != 1 && kn_tensor_numel(bs) != g->n) ||
      (bias && kn_tensor_numel(bias) != g->n))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "a_scale must have 1 element, b_scale 1 or %lld (B's columns) and bias "
                      "%lld",
                      (long long)g->n, (long long)g->n);
  *empty = kn_tensor_numel(kn_out(ctx, 0)) == 0;
  return KN_OK;
}

void kn_mmif_store(kn_op_ctx *ctx, const int32_t *sums, int64_t n) {
  const kn_tensor *as = kn_in(ctx, 4), *bs = kn_in(ctx, 5), *bias = kn_in(ctx, 6);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t total = kn_tensor_numel(y);
  float a_scale = as ? *(const float *)as->data : 1.0f;
  float *yd = y->data;
  const float *bsd = bs ? bs->data : NULL;
  bool per_col = bs && kn_tensor_numel(bs) != 1;
  const float *bd = bias ? bias->data : NULL;
  for (int64_t i = 0; i < total; i++) {
    float f = (float)sums[i];
    f = bsd ? f * (a_scale * bsd[per_col ? i % n : 0]) : f;
    yd[i] = bd ? f + bd[i % n] : f;
  }
}

static kn_status mmif_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  mm_geom g;
  qparam azp, bzp;
  bool empty;
  kn_status st = kn_mmif_begin(ctx, &g, &azp, &bzp, &empty);
  if (st || empty) return st;
  /* the reference adds into the sums */
  int32_t *sums = kn_calloc((size_t)kn_tensor_numel(kn_out(ctx, 0)), sizeof(int32_t));
  if (!sums) return oom(ctx);
  st = mm_int_accumulate(ctx, &g, a, &azp, b, &bzp, sums);
  if (!st) kn_mmif_store(ctx, sums, g.n);
  free(sums);
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
      kn_mm_batch_index(&g, bi, &ia, &ib);
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
    {"MatMul", NULL, 2, 2, 1, 1, 1, 21, matmul_infer, matmul_run, matmul_flops},
    {"Gemm", NULL, 2, 3, 1, 1, 1, 21, gemm_infer, gemm_run, gemm_flops},
    {"MatMulInteger", NULL, 2, 4, 1, 1, 10, 21, mmi_infer, mmi_run, matmul_flops},
    {"QLinearMatMul", NULL, 8, 8, 1, 1, 10, 21, qlmm_infer, qlmm_run, matmul_flops},
    {"MatMulIntegerToFloat", KN_DOMAIN, 2, 7, 1, 1, 1, 1, mmif_infer, mmif_run, matmul_flops},
    {"Det", NULL, 1, 1, 1, 1, 11, 22, det_infer, det_run, NULL},
    KN_OP_END,
};
