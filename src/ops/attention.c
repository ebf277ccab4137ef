/*
 * Attention (domain "kiln"): scaled dot-product attention over heads, made
 * by the `attention` pass from the MatMul / scale / mask / Softmax / MatMul
 * block that exporters write with its head Reshape/Transposes.
 *
 *   inputs  q [Bq, Sq, H*Dk], k [Bk, Sk, H*Dk], v [Bv, Sk, H*Dv],
 *           mask (optional, additive, rank <= 4, broadcast to [B, H, Sq, Sk])
 *   attrs   num_heads H (required), scale (default 1/sqrt(Dk))
 *   output  [B, Sq, H*Dv]:
 *           out[b, i, h*Dv + e] = sum_j softmax_j(scale * q[b,i,h,:] . k[b,j,h,:]
 *                                                 + mask[b,h,i,j]) * v[b,j,h,e]
 * Batch dims broadcast numpy-style across q, k, v and the mask (as the
 * MatMuls and Add of the unfused block do); a mask with Sq rows also
 * broadcasts a single query row.
 *
 * The reference kernel is computed flash-style: per (batch, head, block of
 * query rows) it streams over blocks of keys keeping a running maximum and
 * sum (the online softmax, Milakov and Gimelshein 2018; Dao et al. 2022),
 * so the Sq x Sk score matrix is never materialised: the live state is one
 * QB x KB score tile plus QB x Dv accumulators.
 */
#include "op.h"

#include <math.h>

#define ATT_QB 16 /* query rows per block */
#define ATT_KB 64 /* keys per block */

static const kn_dtype att_types[] = {KN_DTYPE_F32, 0};

/* Broadcast two dims of which either may be unknown (-1); false when both
 * are known and do not broadcast. */
static bool bdim(int64_t a, int64_t b, int64_t *out) {
  if (a >= 0 && b >= 0) {
    if (a != b && a != 1 && b != 1) return false;
    *out = a == 1 ? b : a;
    return true;
  }
  int64_t known = a >= 0 ? a : b;
  *out = known > 1 ? known : -1;
  return true;
}

typedef struct att_geom {
  int64_t H, Dk, Dv, B, Sq, Sk, hid_out;
} att_geom;

/* Checks the inputs (unknown parts pass) and computes the output geometry. */
static kn_status att_check(kn_op_ctx *ctx, att_geom *gm) {
  const kn_tensor *q, *k, *v, *m = kn_in(ctx, 3);
  kn_status st = kn_in_req(ctx, 0, &q);
  if (!st) st = kn_in_req(ctx, 1, &k);
  if (!st) st = kn_in_req(ctx, 2, &v);
  for (int32_t i = 0; i < 4 && !st; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (t && t->dtype) st = kn_check_dtype(ctx, i, t, att_types);
  }
  if (st) return st;
  int64_t H = kn_attr_int(ctx, "num_heads", 0);
  if (H < 1)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute num_heads is %lld, expected >= 1",
                      (long long)H);
  const kn_tensor *in3[3] = {q, k, v};
  for (int32_t i = 0; i < 3; i++) {
    if (in3[i]->rank >= 0 && in3[i]->rank != 3)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "input %d has rank %d, expected 3 ([batch, sequence, heads*size])",
                        (int)i, (int)in3[i]->rank);
    int64_t hid = in3[i]->rank == 3 ? in3[i]->dims[2] : -1;
    if (hid >= 0 && hid % H)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "input %d has %lld features, not a multiple of num_heads %lld",
                        (int)i, (long long)hid, (long long)H);
  }
  if (m && m->rank > 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "mask has rank %d, expected at most 4", (int)m->rank);
#define DIM(t, i) ((t)->rank == 3 ? (t)->dims[i] : -1)
  int64_t qh = DIM(q, 2), kh = DIM(k, 2), vh = DIM(v, 2);
  if (qh >= 0 && kh >= 0 && qh != kh)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "q has %lld features and k %lld, expected equal",
                      (long long)qh, (long long)kh);
  gm->H = H;
  gm->Dk = qh >= 0 ? qh / H : kh >= 0 ? kh / H : -1;
  gm->Dv = vh >= 0 ? vh / H : -1;
  gm->hid_out = vh;
  int64_t ks = DIM(k, 1), vs = DIM(v, 1);
  if (ks >= 0 && vs >= 0 && ks != vs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "k has %lld positions and v %lld, expected equal",
                      (long long)ks, (long long)vs);
  gm->Sk = ks >= 0 ? ks : vs;
  bool ok = bdim(DIM(q, 0), DIM(k, 0), &gm->B) && bdim(gm->B, DIM(v, 0), &gm->B);
  gm->Sq = DIM(q, 1);
#undef DIM
  if (ok && m && m->rank >= 0) {
    int32_t r = m->rank;
    const int64_t *md = m->dims;
    if (r >= 4) ok = bdim(gm->B, md[r - 4], &gm->B);
    if (ok && r >= 3 && md[r - 3] >= 0 && md[r - 3] != 1 && md[r - 3] != H) ok = false;
    if (ok && r >= 2) ok = bdim(gm->Sq, md[r - 2], &gm->Sq);
    if (ok && r >= 1 && md[r - 1] >= 0 && md[r - 1] != 1 && gm->Sk >= 0 && md[r - 1] != gm->Sk)
      ok = false;
  }
  if (!ok) {
    char a[96], b[96], c[96], d[96];
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "shapes q %s, k %s, v %s, mask %s do not broadcast to "
                      "[batch, %lld heads, queries, keys]",
                      kn_shape_str(q->rank, q->dims, a, sizeof a),
                      kn_shape_str(k->rank, k->dims, b, sizeof b),
                      kn_shape_str(v->rank, v->dims, c, sizeof c),
                      m ? kn_shape_str(m->rank, m->dims, d, sizeof d) : "none", (long long)H);
  }
  return KN_OK;
}

static kn_status att_infer(kn_op_ctx *ctx) {
  att_geom gm;
  kn_status st = att_check(ctx, &gm);
  if (st) return st;
  int64_t dims[3] = {gm.B, gm.Sq, gm.hid_out};
  kn_out_set(ctx, 0, KN_DTYPE_F32, 3, dims);
  return KN_OK;
}

/* Per-(batch, head) views of the inputs. */
typedef struct att_view {
  const float *q, *k, *v, *mask;
  int64_t q_row, k_row, v_row; /* element stride between positions */
  int64_t q_step;              /* q stride between output rows (0: one row) */
  int64_t m_i, m_j;            /* mask strides along queries and keys */
  float *out;
  int64_t out_row;
} att_view;

/* One block of `rows` query rows against every key: the online softmax. */
static void att_block(const att_view *w, int64_t rows, int64_t Sk, int64_t Dk, int64_t Dv,
                      float scale, float *s, float *acc, float *mx, float *sum) {
  for (int64_t r = 0; r < rows; r++) {
    mx[r] = -INFINITY;
    sum[r] = 0;
  }
  memset(acc, 0, (size_t)(rows * Dv) * sizeof *acc);
  for (int64_t j0 = 0; j0 < Sk; j0 += ATT_KB) {
    int64_t cols = Sk - j0 < ATT_KB ? Sk - j0 : ATT_KB;
    for (int64_t r = 0; r < rows; r++) {
      const float *qr = w->q + r * w->q_step;
      float *sr = s + r * ATT_KB;
      float bmax = -INFINITY;
      for (int64_t c = 0; c < cols; c++) {
        const float *kr = w->k + (j0 + c) * w->k_row;
        float dot = 0;
        for (int64_t d = 0; d < Dk; d++) dot += qr[d] * kr[d];
        float x = dot * scale;
        if (w->mask) x += w->mask[r * w->m_i + (j0 + c) * w->m_j];
        sr[c] = x;
        if (x > bmax) bmax = x;
      }
      float mnew = bmax > mx[r] ? bmax : mx[r];
      /* every score so far -inf: nothing accumulated, weights stay 0 (the
       * row ends as 0/0 = NaN, as Softmax of an all -inf row does) */
      float corr = mx[r] == -INFINITY ? 0.0f : expf(mx[r] - mnew);
      float *ar = acc + r * Dv;
      if (corr != 1.0f) {
        sum[r] *= corr;
        for (int64_t e = 0; e < Dv; e++) ar[e] *= corr;
      }
      for (int64_t c = 0; c < cols; c++) {
        float p = mnew == -INFINITY ? 0.0f : expf(sr[c] - mnew);
        sum[r] += p;
        const float *vr = w->v + (j0 + c) * w->v_row;
        for (int64_t e = 0; e < Dv; e++) ar[e] += p * vr[e];
      }
      mx[r] = mnew;
    }
  }
  for (int64_t r = 0; r < rows; r++) {
    float *o = w->out + r * w->out_row;
    for (int64_t e = 0; e < Dv; e++) o[e] = acc[r * Dv + e] / sum[r];
  }
}

static kn_status att_run(kn_op_ctx *ctx) {
  att_geom gm;
  kn_status st = att_check(ctx, &gm);
  if (st) return st;
  const kn_tensor *q = kn_in(ctx, 0), *k = kn_in(ctx, 1), *v = kn_in(ctx, 2);
  const kn_tensor *m = kn_in(ctx, 3);
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  int64_t H = gm.H, Dk = gm.Dk, Dv = gm.Dv, B = gm.B, Sq = gm.Sq, Sk = gm.Sk;
  float scale = kn_attr_float(ctx, "scale", Dk > 0 ? 1.0f / sqrtf((float)Dk) : 1.0f);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  int64_t mstr[4] = {0, 0, 0, 0};
  if (m) {
    int64_t full[4] = {B, H, Sq, Sk};
    kn_broadcast_strides(m->rank, m->dims, 4, full, mstr);
  }
  float *s = kn_malloc((size_t)ATT_QB * ATT_KB * sizeof *s);
  float *acc = kn_malloc((size_t)(ATT_QB * (Dv > 0 ? Dv : 1)) * sizeof *acc);
  float *mx = kn_malloc(ATT_QB * sizeof *mx), *sum = kn_malloc(ATT_QB * sizeof *sum);
  if (!s || !acc || !mx || !sum) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the attention work tiles");
    goto done;
  }
  int64_t qS = q->dims[1];
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i0 = 0; i0 < Sq; i0 += ATT_QB) {
        int64_t rows = Sq - i0 < ATT_QB ? Sq - i0 : ATT_QB;
        int64_t bq = q->dims[0] == 1 ? 0 : b, bk = k->dims[0] == 1 ? 0 : b;
        int64_t bv = v->dims[0] == 1 ? 0 : b;
        int64_t qi = qS == 1 ? 0 : i0;
        att_view w = {
            .q = (const float *)q->data + ((bq * qS + qi) * H + h) * Dk,
            .k = (const float *)k->data + (bk * Sk * H + h) * Dk,
            .v = (const float *)v->data + (bv * Sk * H + h) * Dv,
            .mask = m ? (const float *)m->data + b * mstr[0] + h * mstr[1] + i0 * mstr[2]
                      : NULL,
            .q_row = H * Dk,
            .k_row = H * Dk,
            .v_row = H * Dv,
            .q_step = qS == 1 ? 0 : H * Dk,
            .m_i = mstr[2],
            .m_j = mstr[3],
            .out = (float *)y->data + ((b * Sq + i0) * H + h) * Dv,
            .out_row = H * Dv,
        };
        att_block(&w, rows, Sk, Dk, Dv, scale, s, acc, mx, sum);
      }
done:
  free(s);
  free(acc);
  free(mx);
  free(sum);
  return st;
}

static double att_flops(const kn_op_ctx *ctx) {
  const kn_tensor *y = ctx->out[0] ? &ctx->out[0]->t : NULL;
  const kn_tensor *k = kn_in(ctx, 1), *q = kn_in(ctx, 0);
  if (!y || !k || !q || !kn_shape_known(y) || !kn_shape_known(k) || !kn_shape_known(q) ||
      y->rank != 3 || k->rank != 3 || q->rank != 3)
    return 0;
  double H = (double)kn_attr_int(ctx, "num_heads", 1);
  double rows = (double)y->dims[0] * (double)y->dims[1] * H, Sk = (double)k->dims[1];
  double Dk = (double)q->dims[2] / H, Dv = (double)y->dims[2] / H;
  return rows * Sk * (2 * Dk + 2 * Dv + 5);
}

const kn_op_def kn_ops_attention[] = {
    {"Attention", KN_DOMAIN, 3, 4, 1, 1, 1, 1, att_infer, att_run, att_flops},
    KN_OP_END,
};
