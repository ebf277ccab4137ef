/*
 * Weight folding: a Conv, ConvTranspose, Gemm or MatMul with constant
 * float32 weights whose result is read only by
 *   - BatchNormalization in inference form (constant scale, B, mean, var;
 *     only output 0 present), or
 *   - Mul / Add / Sub (product first) / Div (product first) by a constant
 *     that varies at most along the output channel (Conv: axis 1; Gemm and
 *     MatMul: the last axis) and does not enlarge the result,
 * becomes one node with new constant weights and bias:
 *   y = P * s[c] + t[c]   =>   W'[c] = W[c] * s[c],  b'[c] = b[c] * s[c] + t[c].
 * Conv weights are [M, C/g, k...] (scaled along M); ConvTranspose weights
 * [C, M/g, k...] (output channel g * M/g + j is column j of group g's
 * rows); Gemm's B is [K, N] or, with transB, [N, K]; MatMul's [K, N].
 * Gemm's C becomes beta * C * s + t (beta then 1).  A MatMul whose fold
 * needs a bias becomes a Gemm when A is 2-D, and is left alone otherwise.
 * Arithmetic in double, results stored as float32; other dtypes, weights
 * that are graph inputs (overridable initializers) and products whose
 * result is a graph output or read twice are left alone.
 */
#include "pattern.h"

typedef enum head_kind { H_CONV, H_CONVT, H_GEMM, H_MATMUL } head_kind;

/* Constant float32 tensor behind value v, or NULL. */
static const kn_tensor *f32_const(const kn_graph *g, int32_t v) {
  if (v < 0) return NULL;
  const kn_value *val = &g->values[v];
  const kn_tensor *t = NULL;
  if (val->constant && !val->is_input && val->outer < 0) {
    t = val->constant;
  } else if (val->producer >= 0) {
    const kn_node *p = &g->nodes[val->producer];
    if (!p->dead && !strcmp(p->op_type, "Constant") && !*p->domain) {
      const kn_attr *a = kn_node_attr(p, "value");
      if (a && a->type == KN_ATTR_TENSOR) t = &a->t;
    }
  }
  if (!t || t->dtype != KN_DTYPE_F32 || t->rank < 0 || !kn_has_data(t)) return NULL;
  return t;
}

/* Readers of v: node input slots (and subgraph references) plus graph
 * outputs; *who receives the last reading node. */
typedef struct reads {
  int32_t v, count, who;
} reads;

static void count_read(int32_t v, int32_t node, void *arg) {
  reads *r = arg;
  if (v == r->v) {
    r->count++;
    r->who = node;
  }
}

static reads readers(const kn_graph *g, int32_t v) {
  reads r = {v, 0, -1};
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) kn_node_foreach_read(g, &g->nodes[i], count_read, i, &r);
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) r.count++;
  return r;
}

static bool is_op(const kn_node *n, const char *op) {
  return !strcmp(n->op_type, op) && !*n->domain;
}

/* The per-channel scale s and shift t (m entries each) that follower f
 * applies to y (rank `rank`, channels along `axis`); false when f is not
 * such a node. */
static bool follower_affine(const kn_graph *g, const kn_node *f, int32_t y,
                            int32_t rank, int32_t axis, int64_t m, double *s,
                            double *t) {
  if (is_op(f, "BatchNormalization")) {
    double eps;
    if (!kn_pat_bn_inference(f, &eps) || f->inputs[0] != y || axis != 1 || rank < 2)
      return false;
    const kn_tensor *p[4];
    const float *pf[4];
    for (int32_t i = 0; i < 4; i++) {
      p[i] = f32_const(g, f->inputs[i + 1]);
      if (!p[i] || kn_tensor_numel(p[i]) != m || p[i]->rank != 1) return false;
      pf[i] = p[i]->data;
    }
    for (int64_t c = 0; c < m; c++) s[c] = kn_pat_bn_scale(pf, c, eps, &t[c]);
    return true;
  }
  bool mul = is_op(f, "Mul"), add = is_op(f, "Add"), sub = is_op(f, "Sub"),
       div = is_op(f, "Div");
  if ((!mul && !add && !sub && !div) || f->n_inputs != 2) return false;
  int32_t ci;
  if (f->inputs[0] == y) ci = 1;
  else if (f->inputs[1] == y && (mul || add)) ci = 0;
  else return false;
  if (f->inputs[ci] == y) return false;
  const kn_tensor *c = f32_const(g, f->inputs[ci]);
  if (!c || c->rank > rank) return false;
  /* c may vary only along the channel axis, where it has 1 or m entries */
  int64_t cm = 1;
  for (int32_t i = 0; i < c->rank; i++) {
    int32_t oa = rank - c->rank + i;
    if (oa == axis) {
      if (c->dims[i] != 1 && c->dims[i] != m) return false;
      cm = c->dims[i];
    } else if (c->dims[i] != 1) {
      return false;
    }
  }
  const float *cv = c->data;
  for (int64_t k = 0; k < m; k++) {
    double v = (double)cv[cm == 1 ? 0 : k];
    if (div && v == 0) return false;
    s[k] = mul ? v : div ? 1.0 / v : 1.0;
    t[k] = add ? v : sub ? -v : 0.0;
  }
  return true;
}

static kn_status oom(kn_pass_ctx *ctx) {
  return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
}

/* Add a float32 constant of the given shape filled from vals (doubles). */
static int32_t add_f32(kn_graph *g, const char *hint, int32_t rank, const int64_t *dims,
                       const double *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  if (kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL)) return -1;
  float *d = t.data;
  int64_t n = kn_tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) d[i] = (float)vals[i];
  int32_t v = kn_graph_add_constant(g, hint, &t);
  kn_tensor_release(&t);
  return v;
}

/* Fold the follower of node hi into it; *done says whether it did. */
static kn_status fold_one(kn_pass_ctx *ctx, kn_graph *g, int32_t hi, bool *done) {
  *done = false;
  kn_node *h = &g->nodes[hi];
  head_kind kind;
  if (is_op(h, "Conv")) kind = H_CONV;
  else if (is_op(h, "ConvTranspose")) kind = H_CONVT;
  else if (is_op(h, "Gemm")) kind = H_GEMM;
  else if (is_op(h, "MatMul")) kind = H_MATMUL;
  else return KN_OK;
  if (h->n_outputs != 1 || h->n_inputs < 2) return KN_OK;
  int32_t y = h->outputs[0];
  if (y < 0 || g->values[y].type.dtype != KN_DTYPE_F32) return KN_OK;
  const kn_tensor *w = f32_const(g, h->inputs[1]);
  const kn_tensor *bias = h->n_inputs > 2 && h->inputs[2] >= 0 ? f32_const(g, h->inputs[2])
                                                                : NULL;
  if (!w || (h->n_inputs > 2 && h->inputs[2] >= 0 && !bias)) return KN_OK;
  /* channel count, output rank and channel axis */
  int64_t m;
  int32_t rank, axis;
  const kn_attr *ga = kn_node_attr(h, "group");
  int64_t group = ga ? ga->i : 1;
  bool tb = false;
  double beta = 1.0;
  switch (kind) {
  case H_CONV:
  case H_CONVT:
    if (w->rank < 3 || group < 1) return KN_OK;
    m = kind == H_CONV ? w->dims[0] : w->dims[1] * group;
    if (kind == H_CONVT && w->dims[0] % group) return KN_OK;
    rank = w->rank;
    axis = 1;
    break;
  case H_GEMM: {
    if (w->rank != 2) return KN_OK;
    const kn_attr *a = kn_node_attr(h, "transB");
    tb = a && a->i != 0;
    a = kn_node_attr(h, "beta");
    beta = a ? (double)a->f : 1.0;
    m = w->dims[tb ? 0 : 1];
    rank = 2;
    axis = 1;
    break;
  }
  default: /* MatMul */
    if (w->rank != 2 || g->values[y].type.rank < 1) return KN_OK;
    m = w->dims[1];
    rank = g->values[y].type.rank;
    axis = rank - 1;
    break;
  }
  if (bias && kind != H_GEMM && (bias->rank != 1 || bias->dims[0] != m)) return KN_OK;
  reads r = readers(g, y);
  if (r.count != 1 || r.who < 0 || g->values[y].is_output) return KN_OK;
  int32_t fi = r.who;
  double *s = kn_malloc((size_t)(m > 0 ? m : 1) * 2 * sizeof(double));
  if (!s) return oom(ctx);
  double *t = s + m;
  if (!follower_affine(g, &g->nodes[fi], y, rank, axis, m, s, t)) {
    free(s);
    return KN_OK;
  }
  bool shift = false;
  for (int64_t c = 0; c < m; c++) shift |= t[c] != 0;
  /* Gemm's C: its rows dim, when it has one that is not broadcast */
  int64_t crows = 1;
  if (kind == H_GEMM && bias) {
    if (bias->rank == 2 && bias->dims[0] != 1) crows = bias->dims[0];
    if ((bias->rank >= 1 && bias->dims[bias->rank - 1] != 1 &&
         bias->dims[bias->rank - 1] != m) ||
        bias->rank > 2) {
      free(s);
      return KN_OK;
    }
  }
  bool to_gemm = false;
  if (kind == H_MATMUL && shift) {
    /* A bias needs a Gemm: only for a 2-D A */
    int32_t a = h->inputs[0];
    if (g->values[a].type.rank != 2) {
      free(s);
      return KN_OK;
    }
    to_gemm = true;
  }

  /* new weights */
  int64_t wn = kn_tensor_numel(w);
  double *wv = kn_malloc((size_t)(wn > 0 ? wn : 1) * sizeof(double));
  int64_t bn = kind == H_GEMM ? crows * m : m;
  double *bv = kn_malloc((size_t)(bn > 0 ? bn : 1) * sizeof(double));
  if (!wv || !bv) {
    free(s);
    free(wv);
    free(bv);
    return oom(ctx);
  }
  const float *wd = w->data;
  int64_t rows01 = w->dims[0] * (w->rank >= 2 ? w->dims[1] : 1);
  int64_t inner = rows01 > 0 ? wn / rows01 : 1;
  for (int64_t i = 0; i < wn; i++) {
    int64_t c;
    switch (kind) {
    case H_CONV: c = w->dims[0] ? i / (wn / w->dims[0]) : 0; break;
    case H_CONVT: {
      int64_t row = i / (w->dims[1] * inner), col = (i / inner) % w->dims[1];
      c = row / (w->dims[0] / group) * w->dims[1] + col;
      break;
    }
    case H_GEMM: c = tb ? i / w->dims[1] : i % w->dims[1]; break;
    default: c = i % w->dims[1]; break;
    }
    wv[i] = (double)wd[i] * s[c];
  }
  /* new bias */
  for (int64_t i = 0; i < bn; i++) {
    int64_t c = i % m;
    double b0 = 0;
    if (bias && kind == H_GEMM) {
      int64_t cr = bias->rank == 2 ? bias->dims[0] : 1;
      int64_t cc = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
      int64_t row = cr == 1 ? 0 : i / m, col = cc == 1 ? 0 : c;
      b0 = beta * (double)((const float *)bias->data)[row * cc + col];
    } else if (bias) {
      b0 = (double)((const float *)bias->data)[c];
    }
    bv[i] = b0 * s[c] + t[c];
  }
  kn_status st = KN_OK;
  int64_t wdims[KN_MAX_RANK];
  memcpy(wdims, w->dims, sizeof wdims);
  int32_t wrank = w->rank;
  int32_t nw = add_f32(g, g->values[h->inputs[1]].name, wrank, wdims, wv);
  int32_t nb = -1;
  if (nw >= 0 && (bias || shift)) {
    int64_t bdims[2] = {crows, m};
    nb = kind == H_GEMM && crows > 1 ? add_f32(g, "folded_bias", 2, bdims, bv)
                                     : add_f32(g, "folded_bias", 1, &m, bv);
  }
  free(s);
  free(wv);
  free(bv);
  if (nw < 0 || ((bias || shift) && nb < 0)) return oom(ctx);

  h = &g->nodes[hi];
  int32_t out = g->nodes[fi].outputs[0];
  int32_t in[3] = {h->inputs[0], nw, nb};
  const char *op = to_gemm ? "Gemm" : h->op_type;
  char *name = kn_strdup(h->name);
  if (!name) return oom(ctx);
  int32_t ni = kn_graph_new_node(g, op, "", name, nb >= 0 ? 3 : 2, in, 1, &out);
  free(name);
  if (ni < 0) return oom(ctx);
  kn_node *nn = &g->nodes[ni];
  h = &g->nodes[hi];
  kn_node *f = &g->nodes[fi];
  nn->opset = h->opset;
  if (!to_gemm && !kn_node_copy_attrs(nn, h)) st = oom(ctx);
  if (!st && kind == H_GEMM && !kn_node_set_float(nn, "beta", 1.0f)) st = oom(ctx);
  if (!st && h->covers && !(nn->covers = kn_strdup(h->covers))) st = oom(ctx);
  if (!st && !kn_node_add_covers(nn, f)) st = oom(ctx);
  if (st) return st;
  h->dead = true;
  f->dead = true;
  *done = true;
  return KN_OK;
}

kn_status kn_pass_fold_bn(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  /* New nodes are appended and visited too, so chains (BN then Mul...)
   * fold in one run. */
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) continue;
    bool done;
    kn_status st = fold_one(ctx, g, i, &done);
    if (st) return st;
    *changed |= done;
  }
  return KN_OK;
}
