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
 * Per-head mode (attributes q_perm, k_perm, v_perm, out_perm, all of the
 * same length r = 3 or 4; num_heads is then not read): for head layouts
 * that keep each head in its own tensor axes, as other exporters write them
 * ([B,H,S,D], [B*H,S,D] 3-D batched MatMuls, keys pre-transposed):
 *
 *   Qh = Transpose(q, q_perm)  [batch.., Sq, Dk]     (batch.. = B, H or N)
 *   Kh = Transpose(k, k_perm)  [batch.., Sk, Dk]
 *   Vh = Transpose(v, v_perm)  [batch.., Sk, Dv]
 *   y  = Transpose(softmax(scale * Qh Kh^T + mask) Vh, out_perm)
 *
 * the mask (rank <= r) broadcasting to [batch.., Sq, Sk] as the Add did.
 * The transposes are never made: they are strides of the kernels' views.
 * Graphs and engines written before this mode keep their meaning (no
 * *_perm attribute: the [B, S, H*D] layout above).
 *
 * Tactic attention_streamed (src/kernels/attention, run by
 * src/tactics/attention_tactics.c) runs the same algorithm with register-blocked
 * products and threads; it needs contiguous features in q, v and y (true
 * of every layout the pass writes) and falls back to the reference
 * otherwise.
 *
 * The reference kernel is computed flash-style: per (batch, head, block of
 * query rows) it streams over blocks of keys keeping a running maximum and
 * sum (the online softmax, Milakov and Gimelshein 2018; Dao et al. 2022),
 * so the Sq x Sk score matrix is never materialised: the live state is one
 * QB x KB score tile plus QB x Dv accumulators.
 */
#include "attention.h"

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
  int32_t r; /* 0: heads packed in the features; 3 or 4: per-head tensors */
  const int64_t *perm[4]; /* per-head mode: q_perm, k_perm, v_perm, out_perm */
  int64_t H, Dk, Dv, B, Sq, Sk, hid_out;
  int32_t out_rank;
  int64_t out_dims[4];
} att_geom;

static const char *const perm_names[4] = {"q_perm", "k_perm", "v_perm", "out_perm"};

static kn_status shape_fail(kn_op_ctx *ctx, const kn_tensor *q, const kn_tensor *k,
                            const kn_tensor *v, const kn_tensor *m, int64_t H) {
  char a[96], b[96], c[96], d[96];
  return kn_op_fail(ctx, KN_ERR_SHAPE,
                    "shapes q %s, k %s, v %s, mask %s do not broadcast to "
                    "[batch, %lld heads, queries, keys]",
                    kn_shape_str(q->rank, q->dims, a, sizeof a),
                    kn_shape_str(k->rank, k->dims, b, sizeof b),
                    kn_shape_str(v->rank, v->dims, c, sizeof c),
                    m ? kn_shape_str(m->rank, m->dims, d, sizeof d) : "none", (long long)H);
}

/* Per-head mode: q, k, v are rank-r tensors whose transposes by q_perm,
 * k_perm, v_perm are [batch.., Sq, Dk], [batch.., Sk, Dk], [batch.., Sk,
 * Dv]; the result [batch.., Sq, Dv] is written transposed by out_perm. */
static kn_status att_check_heads(kn_op_ctx *ctx, const kn_tensor *q, const kn_tensor *k,
                                 const kn_tensor *v, const kn_tensor *m, att_geom *gm) {
  int32_t r = -1;
  for (int32_t p = 0; p < 4; p++) {
    const int64_t *pv;
    int32_t n = kn_attr_ints(ctx, perm_names[p], &pv);
    if (r < 0) r = n;
    bool ok = n == r && (n == 3 || n == 4);
    uint32_t seen = 0;
    for (int32_t i = 0; ok && i < n; i++) {
      ok = pv[i] >= 0 && pv[i] < n && !(seen & (1u << pv[i]));
      if (ok) seen |= 1u << pv[i];
    }
    if (!ok)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "attribute %s must be a permutation of 3 or 4 axes, like q_perm",
                        perm_names[p]);
    gm->perm[p] = pv;
  }
  gm->r = r;
  const kn_tensor *in3[3] = {q, k, v};
  int64_t L[3][4]; /* logical dims of q, k, v */
  for (int32_t t = 0; t < 3; t++) {
    if (in3[t]->rank >= 0 && in3[t]->rank != r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d has rank %d, expected %d (as %s)",
                        (int)t, (int)in3[t]->rank, (int)r, perm_names[t]);
    for (int32_t a = 0; a < r; a++)
      L[t][a] = in3[t]->rank == r ? in3[t]->dims[gm->perm[t][a]] : -1;
  }
  if (m && m->rank > r)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "mask has rank %d, expected at most %d",
                      (int)m->rank, (int)r);
  int64_t dq = L[0][r - 1], dk = L[1][r - 1];
  if (dq >= 0 && dk >= 0 && dq != dk)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "q has %lld features and k %lld, expected equal",
                      (long long)dq, (long long)dk);
  int64_t ks = L[1][r - 2], vs = L[2][r - 2];
  if (ks >= 0 && vs >= 0 && ks != vs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "k has %lld positions and v %lld, expected equal",
                      (long long)ks, (long long)vs);
  int64_t O[4];
  bool ok = true;
  for (int32_t a = 0; a < r - 2 && ok; a++) {
    ok = bdim(L[0][a], L[1][a], &O[a]) && bdim(O[a], L[2][a], &O[a]);
    int32_t mi = a - (r - (m ? m->rank : 0));
    if (ok && m && m->rank >= 0 && mi >= 0) ok = bdim(O[a], m->dims[mi], &O[a]);
  }
  gm->Sk = ks >= 0 ? ks : vs;
  O[r - 2] = L[0][r - 2];
  if (ok && m && m->rank >= 2) ok = bdim(O[r - 2], m->dims[m->rank - 2], &O[r - 2]);
  if (ok && m && m->rank >= 1) {
    int64_t mk = m->dims[m->rank - 1];
    ok = mk < 0 || mk == 1 || gm->Sk < 0 || mk == gm->Sk;
  }
  if (!ok) return shape_fail(ctx, q, k, v, m, r == 4 ? O[1] : 1);
  O[r - 1] = L[2][r - 1];
  gm->B = O[0];
  gm->H = r == 4 ? O[1] : 1;
  gm->Sq = O[r - 2];
  gm->Dk = dq >= 0 ? dq : dk;
  gm->Dv = O[r - 1];
  gm->out_rank = r;
  for (int32_t t = 0; t < r; t++) gm->out_dims[t] = O[gm->perm[3][t]];
  return KN_OK;
}

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
  memset(gm, 0, sizeof *gm);
  if (kn_attr_get(ctx, "q_perm")) return att_check_heads(ctx, q, k, v, m, gm);
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
  if (!ok) return shape_fail(ctx, q, k, v, m, H);
  gm->out_rank = 3;
  gm->out_dims[0] = gm->B;
  gm->out_dims[1] = gm->Sq;
  gm->out_dims[2] = gm->hid_out;
  return KN_OK;
}

static kn_status att_infer(kn_op_ctx *ctx) {
  att_geom gm;
  kn_status st = att_check(ctx, &gm);
  if (st) return st;
  kn_out_set(ctx, 0, KN_DTYPE_F32, gm.out_rank, gm.out_dims);
  return KN_OK;
}

typedef kn_att_plan att_plan;

/* Strides of the logical axes of x = Transpose(logical, perm)^-1, i.e.
 * logical axis a is x's axis perm[a]; size-1 axes get stride 0 (they
 * broadcast). */
static void head_strides(const kn_tensor *x, const int64_t *perm, int32_t r, int64_t *ls) {
  int64_t s[KN_MAX_RANK];
  kn_strides(x->rank, x->dims, s);
  for (int32_t a = 0; a < r; a++) ls[a] = x->dims[perm[a]] == 1 ? 0 : s[perm[a]];
}

/* Logical strides (b, h, row, feature) from r per-axis strides. */
static void bhsd(const int64_t *ls, int32_t r, int64_t *sb, int64_t *sh, int64_t *si,
                 int64_t *sd) {
  *sb = ls[0];
  *sh = r == 4 ? ls[1] : 0;
  *si = ls[r - 2];
  *sd = ls[r - 1];
}

static void att_make_plan(const att_geom *gm, const kn_tensor *q, const kn_tensor *k,
                          const kn_tensor *v, const kn_tensor *m, kn_tensor *y, float scale,
                          att_plan *p) {
  kn_f32_attention_args *a = &p->a;
  memset(p, 0, sizeof *p);
  a->batch = gm->B;
  a->heads = gm->H;
  a->sq = gm->Sq;
  a->sk = gm->Sk;
  a->dk = gm->Dk;
  a->dv = gm->Dv;
  a->scale = scale;
  a->q = q->data;
  a->k = k->data;
  a->v = v->data;
  a->out = y->data;
  int64_t H = gm->H, Dk = gm->Dk, Dv = gm->Dv, Sk = gm->Sk;
  int64_t ms[4] = {0, 0, 0, 0};
  if (gm->r) {
    int32_t r = gm->r;
    int64_t ls[4];
    head_strides(q, gm->perm[0], r, ls);
    bhsd(ls, r, &a->q_sb, &a->q_sh, &a->q_si, &p->q_sd);
    head_strides(k, gm->perm[1], r, ls);
    bhsd(ls, r, &a->k_sb, &a->k_sh, &a->k_sj, &a->k_sd);
    head_strides(v, gm->perm[2], r, ls);
    bhsd(ls, r, &a->v_sb, &a->v_sh, &a->v_sj, &p->v_se);
    int64_t os[KN_MAX_RANK];
    kn_strides(y->rank, y->dims, os);
    for (int32_t t = 0; t < r; t++) ls[gm->perm[3][t]] = os[t];
    bhsd(ls, r, &a->o_sb, &a->o_sh, &a->o_si, &p->o_se);
    /* a feature axis of size 1 got stride 0 above: any stride reads it */
    if (Dk == 1) p->q_sd = a->k_sd = 1;
    if (Dv == 1) p->v_se = p->o_se = 1;
    if (Sk == 1) a->k_sj = 0;
    if (m) {
      int64_t full[4] = {gm->B, H, gm->Sq, Sk}; /* rank 3: no head axis */
      if (r == 3) full[1] = gm->Sq, full[2] = Sk;
      int64_t mst[4] = {0, 0, 0, 0};
      kn_broadcast_strides(m->rank, m->dims, r, full, mst);
      ms[0] = mst[0];
      ms[1] = r == 4 ? mst[1] : 0;
      ms[2] = mst[r - 2];
      ms[3] = mst[r - 1];
    }
  } else {
    int64_t qS = q->dims[1];
    a->q_sb = q->dims[0] == 1 ? 0 : qS * H * Dk;
    a->q_sh = Dk;
    a->q_si = qS == 1 ? 0 : H * Dk;
    a->k_sb = k->dims[0] == 1 ? 0 : Sk * H * Dk;
    a->k_sh = Dk;
    a->k_sj = H * Dk;
    a->k_sd = 1;
    a->v_sb = v->dims[0] == 1 ? 0 : Sk * H * Dv;
    a->v_sh = Dv;
    a->v_sj = H * Dv;
    a->o_sb = gm->Sq * H * Dv;
    a->o_sh = Dv;
    a->o_si = H * Dv;
    p->q_sd = p->v_se = p->o_se = 1;
    if (m) {
      int64_t full[4] = {gm->B, H, gm->Sq, Sk};
      kn_broadcast_strides(m->rank, m->dims, 4, full, ms);
    }
  }
  if (m) {
    a->mask = m->data;
    a->m_sb = ms[0];
    a->m_sh = ms[1];
    a->m_si = ms[2];
    a->m_sj = ms[3];
  }
}

/* One block of `rows` query rows (from row i0) against every key: the
 * online softmax. */
static void att_block(const att_plan *p, int64_t b, int64_t h, int64_t i0, int64_t rows,
                      float *s, float *acc, float *mx, float *sum) {
  const kn_f32_attention_args *w = &p->a;
  int64_t Sk = w->sk, Dk = w->dk, Dv = w->dv;
  const float *q = w->q + b * w->q_sb + h * w->q_sh + i0 * w->q_si;
  const float *k = w->k + b * w->k_sb + h * w->k_sh;
  const float *v = w->v + b * w->v_sb + h * w->v_sh;
  const float *mask = w->mask ? w->mask + b * w->m_sb + h * w->m_sh + i0 * w->m_si : NULL;
  for (int64_t r = 0; r < rows; r++) {
    mx[r] = -INFINITY;
    sum[r] = 0;
  }
  memset(acc, 0, (size_t)(rows * Dv) * sizeof *acc);
  for (int64_t j0 = 0; j0 < Sk; j0 += ATT_KB) {
    int64_t cols = Sk - j0 < ATT_KB ? Sk - j0 : ATT_KB;
    for (int64_t r = 0; r < rows; r++) {
      const float *qr = q + r * w->q_si;
      float *sr = s + r * ATT_KB;
      float bmax = -INFINITY;
      for (int64_t c = 0; c < cols; c++) {
        const float *kr = k + (j0 + c) * w->k_sj;
        float dot = 0;
        for (int64_t d = 0; d < Dk; d++) dot += qr[d * p->q_sd] * kr[d * w->k_sd];
        float x = dot * w->scale;
        if (mask) x += mask[r * w->m_si + (j0 + c) * w->m_sj];
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
        float pr = mnew == -INFINITY ? 0.0f : expf(sr[c] - mnew);
        sum[r] += pr;
        const float *vr = v + (j0 + c) * w->v_sj;
        for (int64_t e = 0; e < Dv; e++) ar[e] += pr * vr[e * p->v_se];
      }
      mx[r] = mnew;
    }
  }
  for (int64_t r = 0; r < rows; r++) {
    float *o = w->out + b * w->o_sb + h * w->o_sh + (i0 + r) * w->o_si;
    for (int64_t e = 0; e < Dv; e++) o[e * p->o_se] = acc[r * Dv + e] / sum[r];
  }
}

kn_status kn_attention_plan(kn_op_ctx *ctx, att_plan *plan, bool *empty) {
  att_geom gm;
  *empty = false;
  kn_status st = att_check(ctx, &gm);
  if (st) return st;
  const kn_tensor *q = kn_in(ctx, 0), *k = kn_in(ctx, 1), *v = kn_in(ctx, 2);
  const kn_tensor *m = kn_in(ctx, 3);
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  int64_t Dk = gm.Dk;
  float scale = kn_attr_float(ctx, "scale", Dk > 0 ? 1.0f / sqrtf((float)Dk) : 1.0f);
  if (kn_tensor_numel(y) == 0) {
    *empty = true;
    return KN_OK;
  }
  att_make_plan(&gm, q, k, v, m, y, scale, plan);
  return KN_OK;
}

static kn_status att_run(kn_op_ctx *ctx) {
  att_plan plan;
  bool empty;
  kn_status st = kn_attention_plan(ctx, &plan, &empty);
  if (st || empty) return st;
  int64_t Dv = plan.a.dv;
  float *s = kn_malloc((size_t)ATT_QB * ATT_KB * sizeof *s);
  float *acc = kn_malloc((size_t)(ATT_QB * (Dv > 0 ? Dv : 1)) * sizeof *acc);
  float *mx = kn_malloc(ATT_QB * sizeof *mx), *sum = kn_malloc(ATT_QB * sizeof *sum);
  if (!s || !acc || !mx || !sum) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the attention work tiles");
    goto done;
  }
  for (int64_t b = 0; b < plan.a.batch; b++)
    for (int64_t h = 0; h < plan.a.heads; h++)
      for (int64_t i0 = 0; i0 < plan.a.sq; i0 += ATT_QB) {
        int64_t rows = plan.a.sq - i0 < ATT_QB ? plan.a.sq - i0 : ATT_QB;
        att_block(&plan, b, h, i0, rows, s, acc, mx, sum);
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
  if (!y || !k || !q || !kn_shape_known(y) || !kn_shape_known(k) || !kn_shape_known(q))
    return 0;
  const int64_t *qp, *kp, *op;
  int32_t r = kn_attr_ints(ctx, "q_perm", &qp);
  double rows, Sk, Dk, Dv;
  if (r) {
    if (kn_attr_ints(ctx, "k_perm", &kp) != r || kn_attr_ints(ctx, "out_perm", &op) != r ||
        q->rank != r || k->rank != r || y->rank != r)
      return 0;
    int32_t ov = 0; /* the output axis holding the features */
    for (int32_t t = 0; t < r; t++)
      if (op[t] == r - 1) ov = t;
    Dv = (double)y->dims[ov];
    Dk = (double)q->dims[qp[r - 1]];
    Sk = (double)k->dims[kp[r - 2]];
    rows = Dv > 0 ? (double)kn_tensor_numel(y) / Dv : 0;
  } else {
    if (y->rank != 3 || k->rank != 3 || q->rank != 3) return 0;
    double H = (double)kn_attr_int(ctx, "num_heads", 1);
    rows = (double)y->dims[0] * (double)y->dims[1] * H;
    Sk = (double)k->dims[1];
    Dk = (double)q->dims[2] / H;
    Dv = (double)y->dims[2] / H;
  }
  return rows * Sk * (2 * Dk + 2 * Dv + 5);
}

const kn_op_def kn_ops_attention[] = {
    {"Attention", KN_DOMAIN, 3, 4, 1, 1, 1, 1, att_infer, att_run, att_flops},
    KN_OP_END,
};
