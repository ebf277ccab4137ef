/*
 * HardSwish recognition: x * HardSigmoid(x) with alpha 1/6 and beta 0.5,
 * and x * Clip(x + 3, 0, 6) / 6 (the division by 6 also as a product with
 * 1/6, before or after the product with x) become one HardSwish node,
 * x * max(0, min(1, x / 6 + 0.5)).  HardSwish is an opset-14 op: in a
 * model importing an older opset the kiln-domain alias is written instead.
 *
 * The Clip bounds, the 3 and the 6 must be exact; 1/6 within 1e-6
 * relative.  Constants must be scalars that do not grow x by broadcasting,
 * and every intermediate must have its pattern node as its only reader.
 */
#include "pattern.h"

#define HS_MAX 6

typedef struct hs_match {
  int32_t x, y;
  int32_t nodes[HS_MAX];
  int32_t n;
} hs_match;

static int32_t xrank(const kn_graph *g, int32_t x) {
  int32_t r = kn_pat_rank(g, x);
  return r < 0 ? 0 : r;
}

static bool scalar_is(const kn_graph *g, int32_t c, int32_t x, double want, bool exact) {
  double v;
  if (!kn_pat_scalar(g, c, xrank(g, x), &v)) return false;
  return exact ? v == want : kn_pat_near(v, want);
}

static void add_node(hs_match *m, int32_t i) {
  KN_ASSERT(m->n < HS_MAX);
  m->nodes[m->n++] = i;
}

/* Node i divides v by 6 (Div(v, 6), Mul(v, 1/6), Mul(1/6, v)). */
static bool div_by_6(const kn_graph *g, int32_t i, int32_t v, int32_t x) {
  const kn_node *n = &g->nodes[i];
  if (n->n_inputs != 2) return false;
  if (kn_pat_is(n, "Div"))
    return n->inputs[0] == v && n->inputs[1] != v && scalar_is(g, n->inputs[1], x, 6.0, true);
  if (!kn_pat_is(n, "Mul")) return false;
  int32_t c = kn_pat_other(n, v);
  return c >= 0 && scalar_is(g, c, x, 1.0 / 6.0, false);
}

static bool match_hardsigmoid(const kn_pat *p, int32_t hi, hs_match *m) {
  const kn_graph *g = p->g;
  const kn_node *h = &g->nodes[hi];
  const kn_attr *a = kn_node_attr(h, "alpha"), *b = kn_node_attr(h, "beta");
  double alpha = a && a->type == KN_ATTR_FLOAT ? a->f : 0.2;
  double beta = b && b->type == KN_ATTR_FLOAT ? b->f : 0.5;
  if (!kn_pat_near(alpha, 1.0 / 6.0) || beta != 0.5) return false;
  int32_t x = h->inputs[0];
  int32_t mi = kn_pat_sole_reader_op(p, h->outputs[0], "Mul");
  if (mi < 0 || kn_pat_other(&g->nodes[mi], h->outputs[0]) != x) return false;
  m->x = x;
  add_node(m, hi);
  add_node(m, mi);
  m->y = g->nodes[mi].outputs[0];
  return true;
}

/* Clip bounds 0 and 6: inputs from opset 11, attributes before. */
static bool clip_0_6(const kn_graph *g, const kn_node *c) {
  if (c->opset < 11) {
    const kn_attr *lo = kn_node_attr(c, "min"), *hi = kn_node_attr(c, "max");
    return lo && hi && lo->type == KN_ATTR_FLOAT && hi->type == KN_ATTR_FLOAT && lo->f == 0 &&
           hi->f == 6;
  }
  if (c->n_inputs != 3 || c->inputs[1] < 0 || c->inputs[2] < 0) return false;
  double lo, hi;
  return kn_pat_scalar(g, c->inputs[1], 0, &lo) && kn_pat_scalar(g, c->inputs[2], 0, &hi) &&
         lo == 0 && hi == 6;
}

static bool match_clip(const kn_pat *p, int32_t ci, hs_match *m) {
  const kn_graph *g = p->g;
  const kn_node *c = &g->nodes[ci];
  if (!clip_0_6(g, c)) return false;
  int32_t u = c->inputs[0];
  int32_t ai = kn_pat_producer(g, u, "Add");
  if (ai < 0 || kn_pat_sole_reader(p, u) != ci) return false;
  const kn_node *an = &g->nodes[ai];
  int32_t x = -1;
  for (int32_t k = 0; k < 2 && an->n_inputs == 2 && x < 0; k++)
    if (an->inputs[k] != an->inputs[1 - k] && scalar_is(g, an->inputs[1 - k], an->inputs[k], 3.0, true))
      x = an->inputs[k];
  if (x < 0) return false;
  m->x = x;
  add_node(m, ai);
  add_node(m, ci);
  int32_t r = c->outputs[0];
  int32_t ri = kn_pat_sole_reader(p, r);
  if (ri < 0) return false;
  const kn_node *rn = &g->nodes[ri];
  add_node(m, ri);
  int32_t mid = rn->outputs[0];
  int32_t li = kn_pat_sole_reader(p, mid);
  if (li < 0) return false;
  const kn_node *ln = &g->nodes[li];
  if (kn_pat_is(rn, "Mul") && kn_pat_other(rn, r) == x) {
    /* (x * r) / 6 */
    if (!div_by_6(g, li, mid, x)) return false;
  } else if (div_by_6(g, ri, r, x)) {
    /* x * (r / 6) */
    if (!kn_pat_is(ln, "Mul") || kn_pat_other(ln, mid) != x) return false;
  } else {
    return false;
  }
  add_node(m, li);
  m->y = ln->outputs[0];
  return true;
}

static bool float_value(const kn_graph *g, int32_t v) {
  return kn_dtype_is_float(kn_pat_dtype(g, v));
}

kn_status kn_pass_hardswish(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  bool std_op = kn_ir_model_opset(ctx->m, "") >= 14;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *n = &g->nodes[i];
    hs_match m = {.x = -1, .y = -1};
    bool ok = kn_pat_is(n, "HardSigmoid") ? match_hardsigmoid(&p, i, &m)
              : kn_pat_is(n, "Clip")      ? match_clip(&p, i, &m)
                                          : false;
    if (!ok || !float_value(g, m.x)) continue;
    int32_t last = g->values[m.y].producer;
    if (kn_pat_replace(&p, m.nodes, m.n, last, "HardSwish", std_op ? "" : KN_DOMAIN, 1, &m.x,
                       m.y, ctx->err) < 0)
      st = KN_ERR_OOM;
    else *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
