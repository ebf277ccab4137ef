/*
 * LayerNorm recognition: the decomposed form torch/HF export
 *
 *   mean = ReduceMean(x, axes, keepdims=1)      d = Sub(x, mean)
 *   var  = ReduceMean(Pow(d, 2) | Mul(d, d), the same axes, keepdims=1)
 *   y    = Div(d, Sqrt(Add(var, eps)))           [Mul(y, gamma)] [Add(., beta)]
 *
 * becomes one LayerNormalization(x, gamma, beta) with axis = -k and
 * epsilon = eps, where the axes are the last k axes of x (attribute before
 * opset 18, constant input from 18).  Checked exactly: the same x feeds the
 * first ReduceMean and the Sub; eps is a one-element constant added to the
 * variance; the exponent is exactly 2; d has exactly the two readers (Pow
 * or Mul, and Div as its dividend) and every other intermediate its one
 * pattern reader; gamma and beta are constants of x's dtype that broadcast
 * over the normalised axes only.  Without a constant gamma the fused node
 * gets a one-element scale of 1 and any Mul/Add after it stays; a beta is
 * only taken after a gamma.  LayerNormalization is an opset-17 op: for an
 * older model the kiln-domain alias is written.  float32/float64 only.
 */
#include "pattern.h"

#define LN_MAX 12

typedef struct ln_match {
  int32_t x, y, gamma, beta;
  int32_t k; /* normalised trailing axes */
  float eps;
  int32_t nodes[LN_MAX];
  int32_t n;
} ln_match;

static void add_node(ln_match *m, int32_t i) {
  KN_ASSERT(m->n < LN_MAX);
  m->nodes[m->n++] = i;
}

/* The ReduceMean's axes as a count k of trailing axes of a rank-r input;
 * false unless keepdims=1 and the axes are exactly the last k. */
static bool trailing_axes(const kn_graph *g, const kn_node *n, int32_t r, int32_t *k) {
  const kn_attr *kd = kn_node_attr(n, "keepdims");
  if (kd && (kd->type != KN_ATTR_INT || kd->i != 1)) return false;
  int64_t ax[KN_MAX_RANK];
  int64_t cnt = 0;
  if (n->n_inputs >= 2 && n->inputs[1] >= 0) {
    kn_tensor t;
    if (!kn_pat_const(g, n->inputs[1], &t) || !kn_dtype_is_int(t.dtype) || t.rank != 1 ||
        !t.data)
      return false;
    cnt = kn_tensor_numel(&t);
    if (cnt < 1 || cnt > r) return false;
    for (int64_t i = 0; i < cnt; i++) ax[i] = kn_load_i64(t.data, t.dtype, i);
  } else {
    const kn_attr *a = kn_node_attr(n, "axes");
    if (!a || a->type != KN_ATTR_INTS || a->n < 1 || a->n > r) return false;
    cnt = a->n;
    for (int64_t i = 0; i < cnt; i++) ax[i] = a->ints[i];
  }
  bool seen[KN_MAX_RANK] = {false};
  for (int64_t i = 0; i < cnt; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
    if (a < r - cnt || a >= r || seen[a]) return false;
    seen[a] = true;
  }
  *k = (int32_t)cnt;
  return true;
}

/* A constant usable as LayerNormalization's scale or bias: x's dtype, and
 * broadcasting over the last k axes of x only. */
static bool affine_const(const kn_graph *g, int32_t c, int32_t x, int32_t k) {
  kn_tensor t;
  if (!kn_pat_const(g, c, &t) || t.dtype != kn_pat_dtype(g, x) || t.rank > k || !t.data)
    return false;
  const kn_type *xt = &g->values[x].type;
  for (int32_t d = 0; d < t.rank; d++) {
    int64_t td = t.dims[t.rank - 1 - d], xd = xt->dims[xt->rank - 1 - d];
    if (td != 1 && td != xd) return false;
  }
  return true;
}

static bool match(const kn_pat *p, int32_t r1, ln_match *m) {
  const kn_graph *g = p->g;
  const kn_node *rm = &g->nodes[r1];
  int32_t x = rm->inputs[0], r = kn_pat_rank(g, x);
  kn_dtype dt = kn_pat_dtype(g, x);
  if (r < 1 || (dt != KN_DTYPE_F32 && dt != KN_DTYPE_F64)) return false;
  if (!trailing_axes(g, rm, r, &m->k)) return false;
  m->x = x;
  add_node(m, r1);
  /* d = x - mean */
  int32_t mean = rm->outputs[0];
  int32_t si = kn_pat_sole_reader_op(p, mean, "Sub");
  if (si < 0) return false;
  const kn_node *s = &g->nodes[si];
  if (s->n_inputs != 2 || s->inputs[0] != x || s->inputs[1] != mean) return false;
  add_node(m, si);
  int32_t d = s->outputs[0];
  /* d's readers: the square and the Div */
  int32_t rd[2];
  if (kn_pat_readers(p, d, rd, 2) != 2) return false;
  int32_t sq = -1, dv = -1;
  for (int32_t i = 0; i < 2; i++) {
    const kn_node *n = &g->nodes[rd[i]];
    if (kn_pat_is(n, "Div") && n->n_inputs == 2 && n->inputs[0] == d && n->inputs[1] != d)
      dv = rd[i];
    else if (kn_pat_is(n, "Pow") && n->n_inputs == 2 && n->inputs[0] == d &&
             n->inputs[1] != d) {
      double e;
      if (kn_pat_scalar(g, n->inputs[1], r, &e) && e == 2.0) sq = rd[i];
    } else if (kn_pat_is(n, "Mul") && n->n_inputs == 2 && n->inputs[0] == d &&
               n->inputs[1] == d) {
      sq = rd[i];
    }
  }
  if (sq < 0 || dv < 0) return false;
  if (p->uses[d] != 1 + kn_pat_reads(&g->nodes[sq], d)) return false;
  add_node(m, sq);
  /* var = mean of the square over the same axes */
  int32_t r2 = kn_pat_sole_reader_op(p, g->nodes[sq].outputs[0], "ReduceMean");
  int32_t k2;
  if (r2 < 0 || g->nodes[r2].inputs[0] != g->nodes[sq].outputs[0] ||
      !trailing_axes(g, &g->nodes[r2], r, &k2) || k2 != m->k)
    return false;
  add_node(m, r2);
  /* + eps, Sqrt, Div */
  int32_t var = g->nodes[r2].outputs[0];
  int32_t ai = kn_pat_sole_reader_op(p, var, "Add");
  double eps;
  if (ai < 0 || !kn_pat_scalar(g, kn_pat_other(&g->nodes[ai], var), r, &eps)) return false;
  add_node(m, ai);
  int32_t qi = kn_pat_sole_reader_op(p, g->nodes[ai].outputs[0], "Sqrt");
  if (qi < 0) return false;
  add_node(m, qi);
  if (kn_pat_sole_reader(p, g->nodes[qi].outputs[0]) != dv ||
      g->nodes[dv].inputs[1] != g->nodes[qi].outputs[0])
    return false;
  add_node(m, dv);
  m->eps = (float)eps;
  m->y = g->nodes[dv].outputs[0];
  /* optional * gamma, then + beta */
  int32_t mi = kn_pat_sole_reader_op(p, m->y, "Mul");
  int32_t gm = mi >= 0 ? kn_pat_other(&g->nodes[mi], m->y) : -1;
  if (gm < 0 || !affine_const(g, gm, x, m->k)) return true;
  add_node(m, mi);
  m->gamma = gm;
  m->y = g->nodes[mi].outputs[0];
  int32_t bi = kn_pat_sole_reader_op(p, m->y, "Add");
  int32_t bt = bi >= 0 ? kn_pat_other(&g->nodes[bi], m->y) : -1;
  if (bt < 0 || !affine_const(g, bt, x, m->k)) return true;
  add_node(m, bi);
  m->beta = bt;
  m->y = g->nodes[bi].outputs[0];
  return true;
}

/* A one-element scale of 1 in dtype dt. */
static int32_t unit_scale(kn_graph *g, kn_dtype dt, kn_error *err) {
  kn_tensor t;
  int64_t one = 1;
  if (kn_tensor_alloc(&t, dt, 1, &one, err)) return -1;
  kn_store_f64(t.data, dt, 0, 1.0);
  int32_t v = kn_graph_add_constant(g, "layernorm_unit_scale", &t);
  kn_tensor_release(&t);
  if (v < 0) kn_fail(err, KN_ERR_OOM, "out of memory adding a LayerNorm scale");
  return v;
}

kn_status kn_pass_layernorm(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  bool std_op = kn_ir_model_opset(ctx->m, "") >= 17;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    if (!kn_pat_is(&g->nodes[i], "ReduceMean")) continue;
    ln_match m = {.x = -1, .y = -1, .gamma = -1, .beta = -1};
    if (!match(&p, i, &m)) continue;
    if (m.gamma < 0 && (m.gamma = unit_scale(g, kn_pat_dtype(g, m.x), ctx->err)) < 0) {
      st = KN_ERR_OOM;
      break;
    }
    int32_t in[3] = {m.x, m.gamma, m.beta};
    int32_t last = g->values[m.y].producer;
    int32_t idx = kn_pat_replace(&p, m.nodes, m.n, last, "LayerNormalization",
                                 std_op ? "" : KN_DOMAIN, m.beta >= 0 ? 3 : 2, in, m.y,
                                 ctx->err);
    if (idx < 0) {
      st = KN_ERR_OOM;
      break;
    }
    if (!kn_node_set_int(&g->nodes[idx], "axis", -m.k) ||
        !kn_node_set_float(&g->nodes[idx], "epsilon", m.eps))
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory setting LayerNormalization attributes");
    *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
