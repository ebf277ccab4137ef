/*
 * GELU recognition: the decomposed forms exporters write become one kiln
 * Gelu node (src/ops/activation.c).
 *
 *   erf:   f = Erf(x / 1.4142135)  or  Erf(x * 0.70710678)
 *   tanh:  f = Tanh(0.7978845608 * (x + 0.044715 * x^3)),
 *          x^3 = Pow(x, 3) | x * (x * x) | (x * x) * x
 *   then   a = 1 + f, and y = (x * 0.5) * a | (x * a) * 0.5 | x * (a * 0.5)
 *
 * Commutative operands may come in either order.  Constants must be scalars
 * (one element, rank at most x's, so broadcasting does not grow x) within
 * 1e-6 relative of the values above; 1, 0.5 and the exponent 3 exactly.
 * Every intermediate must have its pattern node as its only reader.  Only
 * float32/float64 x are fused (the kernel's types).
 */
#include "pattern.h"

#define GELU_MAX 12

typedef struct gelu_match {
  int32_t x, y;
  int32_t nodes[GELU_MAX];
  int32_t n;
} gelu_match;

static bool float_value(const kn_graph *g, int32_t v) {
  kn_dtype t = kn_pat_dtype(g, v);
  return t == KN_DTYPE_F32 || t == KN_DTYPE_F64;
}

static int32_t xrank(const kn_graph *g, int32_t x) {
  int32_t r = kn_pat_rank(g, x);
  return r < 0 ? 0 : r;
}

/* Input `c` of a node is a scalar constant that is (near) `want`. */
static bool scalar_is(const kn_graph *g, int32_t c, int32_t x, double want, bool exact) {
  double v;
  if (!kn_pat_scalar(g, c, xrank(g, x), &v)) return false;
  return exact ? v == want : kn_pat_near(v, want);
}

/* Node n is Mul(x, c) or Mul(c, x) with c a scalar (near) `want`; returns
 * x's value index or -1.  When `x` is given (>= 0) it must be that value. */
static int32_t mul_by(const kn_graph *g, const kn_node *n, int32_t x, double want, bool exact) {
  if (!kn_pat_is(n, "Mul") || n->n_inputs != 2) return -1;
  for (int32_t k = 0; k < 2; k++) {
    int32_t v = n->inputs[1 - k], c = n->inputs[k];
    if ((x < 0 || v == x) && v != c && scalar_is(g, c, v, want, exact)) return v;
  }
  return -1;
}

static void add_node(gelu_match *m, int32_t i) {
  KN_ASSERT(m->n < GELU_MAX);
  m->nodes[m->n++] = i;
}

/* From f (the Erf or Tanh result) on: 1 + f, then the three ways of
 * multiplying by x and 0.5.  Fills m->y. */
static bool match_tail(const kn_pat *p, gelu_match *m, int32_t f) {
  const kn_graph *g = p->g;
  int32_t ai = kn_pat_sole_reader_op(p, f, "Add");
  if (ai < 0) return false;
  const kn_node *an = &g->nodes[ai];
  int32_t one = kn_pat_other(an, f);
  if (one < 0 || !scalar_is(g, one, m->x, 1.0, true)) return false;
  add_node(m, ai);
  int32_t a = an->outputs[0];
  int32_t ri = kn_pat_sole_reader_op(p, a, "Mul");
  if (ri < 0) return false;
  const kn_node *r = &g->nodes[ri];
  int32_t o = kn_pat_other(r, a);
  if (o < 0) return false;
  add_node(m, ri);
  int32_t x = m->x;
  if (o != x && scalar_is(g, o, x, 0.5, true)) {
    /* x * (a * 0.5) */
    int32_t r2 = kn_pat_sole_reader_op(p, r->outputs[0], "Mul");
    if (r2 < 0 || kn_pat_other(&g->nodes[r2], r->outputs[0]) != x) return false;
    add_node(m, r2);
    m->y = g->nodes[r2].outputs[0];
    return true;
  }
  if (o == x) {
    /* (x * a) * 0.5 */
    int32_t r2 = kn_pat_sole_reader(p, r->outputs[0]);
    if (r2 < 0 || mul_by(g, &g->nodes[r2], r->outputs[0], 0.5, true) < 0) return false;
    add_node(m, r2);
    m->y = g->nodes[r2].outputs[0];
    return true;
  }
  /* (x * 0.5) * a */
  int32_t hi = kn_pat_producer(g, o, "Mul");
  if (hi < 0 || kn_pat_sole_reader(p, o) != ri || mul_by(g, &g->nodes[hi], x, 0.5, true) < 0)
    return false;
  add_node(m, hi);
  m->y = r->outputs[0];
  return true;
}

/* Erf(x / sqrt 2) or Erf(x * (1 / sqrt 2)). */
static bool match_erf(const kn_pat *p, int32_t ei, gelu_match *m) {
  const kn_graph *g = p->g;
  const kn_node *e = &g->nodes[ei];
  int32_t u = e->inputs[0];
  if (kn_pat_sole_reader(p, u) != ei) return false;
  int32_t di = kn_pat_producer(g, u, "Div"), mi = kn_pat_producer(g, u, "Mul");
  int32_t x = -1;
  if (di >= 0) {
    const kn_node *d = &g->nodes[di];
    if (d->n_inputs == 2 && d->inputs[0] != d->inputs[1] &&
        scalar_is(g, d->inputs[1], d->inputs[0], 1.4142135623730951, false))
      x = d->inputs[0];
    add_node(m, di);
  } else if (mi >= 0) {
    x = mul_by(g, &g->nodes[mi], -1, 0.7071067811865476, false);
    add_node(m, mi);
  }
  if (x < 0 || !float_value(g, x)) return false;
  m->x = x;
  add_node(m, ei);
  return match_tail(p, m, e->outputs[0]);
}

/* x^3 as Pow(x, 3), x * (x * x) or (x * x) * x; c3's producer is ci. */
static bool is_cube(const kn_pat *p, int32_t c3, int32_t x, gelu_match *m) {
  const kn_graph *g = p->g;
  int32_t pi = kn_pat_producer(g, c3, "Pow");
  if (pi >= 0) {
    const kn_node *pw = &g->nodes[pi];
    if (pw->n_inputs != 2 || pw->inputs[0] != x || !scalar_is(g, pw->inputs[1], x, 3.0, true))
      return false;
    add_node(m, pi);
    return true;
  }
  int32_t mi = kn_pat_producer(g, c3, "Mul");
  if (mi < 0) return false;
  const kn_node *mn = &g->nodes[mi];
  int32_t sq = kn_pat_other(mn, x);
  int32_t si = sq >= 0 ? kn_pat_producer(g, sq, "Mul") : -1;
  if (si < 0 || kn_pat_sole_reader(p, sq) != mi) return false;
  const kn_node *sn = &g->nodes[si];
  if (sn->n_inputs != 2 || sn->inputs[0] != x || sn->inputs[1] != x) return false;
  add_node(m, mi);
  add_node(m, si);
  return true;
}

/* Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)). */
static bool match_tanh(const kn_pat *p, int32_t ti, gelu_match *m) {
  const kn_graph *g = p->g;
  const kn_node *t = &g->nodes[ti];
  int32_t u = t->inputs[0];
  int32_t bi = kn_pat_producer(g, u, "Mul");
  if (bi < 0 || kn_pat_sole_reader(p, u) != ti) return false;
  int32_t inner = mul_by(g, &g->nodes[bi], -1, 0.7978845608028654, false);
  int32_t ii = inner >= 0 ? kn_pat_producer(g, inner, "Add") : -1;
  if (ii < 0 || kn_pat_sole_reader(p, inner) != bi) return false;
  const kn_node *in = &g->nodes[ii];
  if (in->n_inputs != 2) return false;
  for (int32_t k = 0; k < 2; k++) {
    int32_t x = in->inputs[1 - k], k3 = in->inputs[k];
    int32_t ki = kn_pat_producer(g, k3, "Mul");
    if (ki < 0 || x == k3 || kn_pat_sole_reader(p, k3) != ii || !float_value(g, x)) continue;
    int32_t c3 = mul_by(g, &g->nodes[ki], -1, 0.044715, false);
    if (c3 < 0 || c3 == x || kn_pat_sole_reader(p, c3) != ki) continue;
    gelu_match s = *m;
    s.x = x;
    add_node(&s, bi);
    add_node(&s, ii);
    add_node(&s, ki);
    if (!is_cube(p, c3, x, &s)) continue;
    add_node(&s, ti);
    if (match_tail(p, &s, t->outputs[0])) {
      *m = s;
      return true;
    }
  }
  return false;
}

kn_status kn_pass_gelu(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *n = &g->nodes[i];
    bool is_erf = kn_pat_is(n, "Erf"), is_tanh = kn_pat_is(n, "Tanh");
    if (!is_erf && !is_tanh) continue;
    gelu_match m = {.x = -1, .y = -1};
    if (!(is_erf ? match_erf(&p, i, &m) : match_tanh(&p, i, &m))) continue;
    int32_t last = g->values[m.y].producer;
    int32_t idx = kn_pat_replace(&p, m.nodes, m.n, last, "Gelu", KN_DOMAIN, 1, &m.x, m.y,
                                 ctx->err);
    if (idx < 0) st = KN_ERR_OOM;
    else if (!kn_node_set_string(&g->nodes[idx], "approximate", is_erf ? "none" : "tanh"))
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory setting a Gelu attribute");
    else *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
