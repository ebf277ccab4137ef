/*
 * Epilogue fusion: a float32 Conv, Gemm or MatMul (by a constant 2-D B with
 * A of rank >= 2), or a FusedConv / FusedGemm made earlier, absorbs what
 * follows it into one FusedConv / FusedGemm step (src/ops/fused.c):
 *
 *   1. bias Adds of a constant that does not enlarge the result and, for a
 *      convolution, varies only along the channel axis ([M,1,1], [1,M,1,1],
 *      a scalar); for a matrix product any constant that broadcasts to the
 *      result ([N], [1,N], [M,N]).  Folded into B / C (C: beta * C + c).
 *   2. one activation: Relu, Clip (constant or absent bounds), LeakyRelu,
 *      HardSigmoid, HardSwish (ONNX or kiln), Sigmoid, Tanh, Gelu (kiln or
 *      ONNX, erf or tanh), SiLU written x * Sigmoid(x), and GELU written in erf form
 *      (x / sqrt2 or x * (1/sqrt2), then Erf, + 1, and the products with x
 *      and 0.5 in any association and operand order);
 *   3. one residual Add of another tensor that broadcasts to the result
 *      without enlarging it, before or after the activation (the fused
 *      node's residual_before_activation says which).
 * Every absorbed intermediate must be read by its pattern alone and not be
 * a graph output.  A dimension unknown in both the result and the residual
 * is taken as equal; FusedConv/FusedGemm refuse at run time a residual that
 * turns out larger.  ConvTranspose is not fused (it stays a separate step).
 */
#include "pass.h"

#include <float.h>
#include <math.h>

#define MAX_ABSORB 16

typedef struct chain {
  int32_t head;
  bool conv;         /* FusedConv, else FusedGemm */
  int32_t in0, in1;  /* X, W or A, B */
  int32_t bias;      /* value or -1 */
  bool beta_one;     /* bias was rebuilt: beta is now 1 */
  int64_t m;         /* channels (conv) */
  int32_t rank;      /* of the result */
  int64_t dims[KN_MAX_RANK];
  const char *act;   /* NULL: none yet */
  bool act_from_head;
  float alpha, beta, lo, hi;
  bool has_alpha, has_beta, has_lo, has_hi;
  int32_t z;
  bool res_first;
  int32_t cur;       /* value the chain produces now */
  int32_t nodes[MAX_ABSORB];
  int32_t n;
} chain;

/* ---- small graph queries ------------------------------------------------- */

static bool is_op(const kn_node *n, const char *op) {
  return !n->dead && !strcmp(n->op_type, op) && !*n->domain;
}

static bool is_kiln(const kn_node *n, const char *op) {
  return !n->dead && !strcmp(n->op_type, op) && !strcmp(n->domain, KN_DOMAIN);
}

/* Constant float32 tensor behind v (an initializer that is not a graph
 * input, a folded constant or a Constant node's tensor), or NULL. */
static const kn_tensor *f32_const(const kn_graph *g, int32_t v) {
  if (v < 0) return NULL;
  const kn_value *val = &g->values[v];
  const kn_tensor *t = NULL;
  if (val->constant && !val->is_input && val->outer < 0) {
    t = val->constant;
  } else if (val->producer >= 0 && val->producer < g->n_nodes) {
    const kn_node *p = &g->nodes[val->producer];
    if (is_op(p, "Constant") && p->n_outputs == 1 && p->outputs[0] == v) {
      const kn_attr *a = kn_node_attr(p, "value");
      if (a && a->type == KN_ATTR_TENSOR) t = &a->t;
    }
  }
  if (!t || t->dtype != KN_DTYPE_F32 || t->rank < 0 || !kn_has_data(t)) return NULL;
  return t;
}

/* One-element float32 constant of rank <= max_rank. */
static bool f32_scalar(const kn_graph *g, int32_t v, int32_t max_rank, double *out) {
  const kn_tensor *t = f32_const(g, v);
  if (!t || kn_tensor_numel(t) != 1 || t->rank > max_rank) return false;
  *out = ((const float *)t->data)[0];
  return true;
}

typedef struct reads {
  int32_t v, count, n_who, who[2];
} reads;

static void count_read(int32_t v, int32_t node, void *arg) {
  reads *r = arg;
  if (v != r->v) return;
  if (r->count < 2) r->who[r->count] = node;
  r->count++;
}

/* Readers of v: node inputs, subgraph references and graph outputs; the
 * first two reading nodes in who. */
static reads readers(const kn_graph *g, int32_t v) {
  reads r = {v, 0, 0, {-1, -1}};
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) kn_node_foreach_read(g, &g->nodes[i], count_read, i, &r);
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) r.count += 2; /* never a sole reader */
  return r;
}

/* The node that alone reads v (once), or -1. */
static int32_t sole_reader(const kn_graph *g, int32_t v) {
  if (v < 0 || g->values[v].is_output) return -1;
  reads r = readers(g, v);
  return r.count == 1 ? r.who[0] : -1;
}

/* Of a two-input node reading v once, the other input, else -1. */
static int32_t other_input(const kn_node *n, int32_t v) {
  if (n->n_inputs != 2) return -1;
  if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
  if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
  return -1;
}

static int32_t out0(const kn_node *n) {
  return n->n_outputs == 1 ? n->outputs[0] : -1;
}

static bool push(chain *c, int32_t node) {
  if (c->n >= MAX_ABSORB) return false;
  c->nodes[c->n++] = node;
  return true;
}

/* ---- absorbing ----------------------------------------------------------- */

static kn_status oom(kn_pass_ctx *ctx) {
  return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
}

/* A constant Add after the product: fold it into the bias.  *done when it
 * was absorbed. */
static kn_status take_bias(kn_pass_ctx *ctx, kn_graph *g, chain *c, bool *done) {
  *done = false;
  int32_t ri = sole_reader(g, c->cur);
  if (ri < 0 || !is_op(&g->nodes[ri], "Add")) return KN_OK;
  int32_t cv = other_input(&g->nodes[ri], c->cur);
  const kn_tensor *k = f32_const(g, cv);
  if (!k || k->rank > c->rank || out0(&g->nodes[ri]) < 0) return KN_OK;
  const kn_tensor *b = NULL;
  if (c->bias >= 0 && !(b = f32_const(g, c->bias))) return KN_OK;
  double beta = 1.0;
  if (!c->conv && !c->beta_one) {
    const kn_attr *a = kn_node_attr(&g->nodes[c->head], "beta");
    beta = a ? (double)a->f : 1.0;
  }
  /* shape of the new bias: conv [M]; gemm the broadcast of C and k */
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  if (c->conv) {
    for (int32_t i = 0; i < k->rank; i++) {
      int32_t oa = c->rank - k->rank + i;
      if (k->dims[i] != 1 && (oa != 1 || k->dims[i] != c->m)) return KN_OK;
    }
    if (b && (b->rank != 1 || b->dims[0] != c->m)) return KN_OK;
    rank = 1;
    dims[0] = c->m;
  } else {
    rank = b && b->rank > k->rank ? b->rank : k->rank;
    for (int32_t i = 0; i < rank; i++) dims[i] = 1;
    const kn_tensor *pair[2] = {k, b};
    for (int32_t p = 0; p < 2; p++) {
      const kn_tensor *t = pair[p];
      if (!t) continue;
      if (t->rank > c->rank) return KN_OK;
      for (int32_t i = 0; i < t->rank; i++) {
        int64_t td = t->dims[i], od = c->dims[c->rank - t->rank + i];
        if (td == 1) continue;
        if (od < 0 || td != od) return KN_OK; /* would enlarge the result */
        dims[rank - t->rank + i] = td;
      }
    }
  }
  kn_tensor nt;
  memset(&nt, 0, sizeof nt);
  if (kn_tensor_alloc(&nt, KN_DTYPE_F32, rank, dims, ctx->err)) return KN_ERR_OOM;
  int64_t n = kn_tensor_numel(&nt);
  int64_t ks[KN_MAX_RANK], bs[KN_MAX_RANK], st[KN_MAX_RANK];
  kn_strides(rank, dims, st);
  if (c->conv) {
    /* k's channel entries are at stride 1 when it has M of them */
    for (int64_t i = 0; i < n; i++) {
      double kv = ((const float *)k->data)[kn_tensor_numel(k) == 1 ? 0 : i];
      double bv = b ? ((const float *)b->data)[i] : 0.0;
      ((float *)nt.data)[i] = (float)(bv + kv);
    }
  } else {
    kn_broadcast_strides(k->rank, k->dims, rank, dims, ks);
    if (b) kn_broadcast_strides(b->rank, b->dims, rank, dims, bs);
    for (int64_t i = 0; i < n; i++) {
      int64_t ko = 0, bo = 0, rem = i;
      for (int32_t d = 0; d < rank; d++) {
        int64_t x = rem / st[d];
        rem %= st[d];
        ko += x * ks[d];
        if (b) bo += x * bs[d];
      }
      double v = (double)((const float *)k->data)[ko];
      if (b) v += beta * (double)((const float *)b->data)[bo];
      ((float *)nt.data)[i] = (float)v;
    }
  }
  int32_t nv = kn_graph_add_constant(g, "fused_bias", &nt);
  kn_tensor_release(&nt);
  if (nv < 0) return oom(ctx);
  if (!push(c, ri)) return KN_OK;
  c->bias = nv;
  c->beta_one = true;
  c->cur = out0(&g->nodes[ri]);
  *done = true;
  return KN_OK;
}

/* x * Sigmoid(x): readers of x are exactly the Sigmoid and the Mul. */
static bool match_silu(const kn_graph *g, chain *c, int32_t *y) {
  reads r = readers(g, c->cur);
  if (r.count != 2 || r.who[0] == r.who[1]) return false;
  for (int32_t k = 0; k < 2; k++) {
    int32_t si = r.who[k], mi = r.who[1 - k];
    const kn_node *s = &g->nodes[si], *m = &g->nodes[mi];
    if (!is_op(s, "Sigmoid") || !is_op(m, "Mul") || out0(s) < 0 || out0(m) < 0) continue;
    if (other_input(m, c->cur) != out0(s) || sole_reader(g, out0(s)) != mi) continue;
    if (c->n + 2 > MAX_ABSORB) return false;
    push(c, si);
    push(c, mi);
    *y = out0(m);
    return true;
  }
  return false;
}

/* Node index of a live default-domain `op` producing v, or -1. */
static int32_t producer_op(const kn_graph *g, int32_t v, const char *op) {
  if (v < 0) return -1;
  int32_t p = g->values[v].producer;
  if (p < 0 || p >= g->n_nodes || !is_op(&g->nodes[p], op)) return -1;
  return p;
}

/* GELU in erf form on x = c->cur (see the file comment). */
static bool match_gelu_erf(const kn_graph *g, chain *c, int32_t *y) {
  int32_t x = c->cur, xr = c->rank;
  reads r = readers(g, x);
  if (r.count != 2 || r.who[0] == r.who[1] || xr < 0) return false;
  for (int32_t k = 0; k < 2; k++) {
    int32_t di = r.who[k], m1 = r.who[1 - k];
    const kn_node *d = &g->nodes[di];
    double kv;
    /* d = x / sqrt2 or x * (1 / sqrt2) */
    if (is_op(d, "Div") && d->n_inputs == 2 && d->inputs[0] == x &&
        f32_scalar(g, d->inputs[1], xr, &kv) && fabs(kv - M_SQRT2) <= 1e-6 * M_SQRT2) {
    } else if (is_op(d, "Mul") && f32_scalar(g, other_input(d, x), xr, &kv) &&
               fabs(kv - M_SQRT1_2) <= 1e-6 * M_SQRT1_2) {
    } else {
      continue;
    }
    int32_t ei = sole_reader(g, out0(d));
    if (ei < 0 || !is_op(&g->nodes[ei], "Erf")) continue;
    int32_t ai = sole_reader(g, out0(&g->nodes[ei]));
    if (ai < 0 || !is_op(&g->nodes[ai], "Add") ||
        !f32_scalar(g, other_input(&g->nodes[ai], out0(&g->nodes[ei])), xr, &kv) ||
        kv != 1.0)
      continue;
    int32_t p = out0(&g->nodes[ai]); /* 1 + erf(x / sqrt2) */
    const kn_node *mn = &g->nodes[m1];
    if (!is_op(mn, "Mul") || out0(mn) < 0) continue;
    int32_t o = other_input(mn, x), last = -1, h = -1;
    if (o == p) {
      /* (x * p) * 0.5 */
      last = sole_reader(g, out0(mn));
      if (last < 0 || !is_op(&g->nodes[last], "Mul") ||
          !f32_scalar(g, other_input(&g->nodes[last], out0(mn)), xr, &kv) || kv != 0.5)
        continue;
      if (sole_reader(g, p) != m1) continue;
    } else if (f32_scalar(g, o, xr, &kv) && kv == 0.5) {
      /* (x * 0.5) * p */
      last = sole_reader(g, out0(mn));
      if (last < 0 || !is_op(&g->nodes[last], "Mul") ||
          other_input(&g->nodes[last], out0(mn)) != p || sole_reader(g, p) != last)
        continue;
    } else if ((h = producer_op(g, o, "Mul")) >= 0) {
      /* x * (p * 0.5) */
      const kn_node *hn = &g->nodes[h];
      if (other_input(hn, p) < 0 || !f32_scalar(g, other_input(hn, p), xr, &kv) ||
          kv != 0.5 || sole_reader(g, p) != h || sole_reader(g, o) != m1)
        continue;
      last = m1;
    } else {
      continue;
    }
    int32_t list[6] = {di, ei, ai, m1, last != m1 ? last : h, -1};
    int32_t cnt = 5;
    if (c->n + cnt > MAX_ABSORB) return false;
    for (int32_t i = 0; i < cnt; i++) push(c, list[i]);
    *y = out0(&g->nodes[last]);
    return true;
  }
  return false;
}

/* One activation after the chain; true when absorbed. */
static bool take_act(kn_graph *g, chain *c) {
  int32_t y = -1;
  int32_t ri = sole_reader(g, c->cur);
  if (ri >= 0) {
    const kn_node *r = &g->nodes[ri];
    if (r->n_inputs < 1 || r->inputs[0] != c->cur || out0(r) < 0) return false;
    const kn_attr *a;
    if (is_op(r, "Relu") || is_op(r, "Sigmoid") || is_op(r, "Tanh") ||
        is_op(r, "HardSwish") || is_kiln(r, "HardSwish")) {
      if (r->n_inputs != 1 || r->n_attrs) return false;
      c->act = r->op_type; /* the fused op's name for it */
    } else if (is_op(r, "LeakyRelu")) {
      c->act = "LeakyRelu";
      a = kn_node_attr(r, "alpha");
      c->alpha = a ? a->f : 0.01f;
      c->has_alpha = true;
    } else if (is_op(r, "HardSigmoid")) {
      c->act = "HardSigmoid";
      a = kn_node_attr(r, "alpha");
      c->alpha = a ? a->f : 0.2f;
      a = kn_node_attr(r, "beta");
      c->beta = a ? a->f : 0.5f;
      c->has_alpha = c->has_beta = true;
    } else if (is_op(r, "Clip")) {
      double lo = -INFINITY, hi = INFINITY;
      if (r->opset < 11) {
        a = kn_node_attr(r, "min");
        lo = a ? a->f : -FLT_MAX;
        a = kn_node_attr(r, "max");
        hi = a ? a->f : FLT_MAX;
      } else {
        if (r->n_inputs > 1 && r->inputs[1] >= 0 && !f32_scalar(g, r->inputs[1], 8, &lo))
          return false;
        if (r->n_inputs > 2 && r->inputs[2] >= 0 && !f32_scalar(g, r->inputs[2], 8, &hi))
          return false;
      }
      c->act = "Clip";
      c->lo = (float)lo;
      c->hi = (float)hi;
      c->has_lo = c->has_hi = true;
    } else if ((is_kiln(r, "Gelu") || is_op(r, "Gelu")) && r->n_inputs == 1) {
      a = kn_node_attr(r, "approximate");
      const char *ap = a && a->type == KN_ATTR_STRING ? a->s : "none";
      for (int32_t i = 0; i < r->n_attrs; i++)
        if (strcmp(r->attrs[i].name, "approximate")) return false;
      if (!strcmp(ap, "none")) c->act = "Gelu";
      else if (!strcmp(ap, "tanh")) c->act = "GeluTanh";
      else return false;
    } else {
      return false;
    }
    if (!push(c, ri)) {
      c->act = NULL;
      return false;
    }
    c->cur = out0(r);
    return true;
  }
  if (match_silu(g, c, &y)) c->act = "Silu";
  else if (match_gelu_erf(g, c, &y)) c->act = "Gelu";
  else return false;
  c->cur = y;
  return true;
}

/* A residual Add after the chain. */
static bool take_residual(kn_graph *g, chain *c) {
  int32_t ri = sole_reader(g, c->cur);
  if (ri < 0 || !is_op(&g->nodes[ri], "Add") || out0(&g->nodes[ri]) < 0) return false;
  int32_t z = other_input(&g->nodes[ri], c->cur);
  if (z < 0) return false;
  const kn_type *zt = &g->values[z].type;
  if (zt->kind != KN_KIND_TENSOR || zt->dtype != KN_DTYPE_F32 || zt->rank < 0 ||
      zt->rank > c->rank)
    return false;
  for (int32_t i = 0; i < zt->rank; i++) {
    int64_t zd = zt->dims[i], od = c->dims[c->rank - zt->rank + i];
    if (zd == 1 || (zd >= 0 && zd == od) || (zd < 0 && od < 0) || (zd < 0 && od > 1))
      continue;
    return false; /* the Add may enlarge the result */
  }
  if (!push(c, ri)) return false;
  c->z = z;
  c->res_first = c->act == NULL;
  c->cur = out0(&g->nodes[ri]);
  return true;
}

/* ---- heads --------------------------------------------------------------- */

static bool f32_tensor(const kn_graph *g, int32_t v) {
  return v >= 0 && g->values[v].type.kind == KN_KIND_TENSOR &&
         g->values[v].type.dtype == KN_DTYPE_F32;
}

static const char *str_attr(const kn_node *n, const char *name) {
  const kn_attr *a = kn_node_attr(n, name);
  return a && a->type == KN_ATTR_STRING ? a->s : NULL;
}

/* Starts a chain at node hi; false when it cannot head one. */
static bool chain_init(const kn_graph *g, int32_t hi, chain *c) {
  const kn_node *h = &g->nodes[hi];
  memset(c, 0, sizeof *c);
  c->head = hi;
  c->bias = c->z = -1;
  bool conv = is_op(h, "Conv"), gemm = is_op(h, "Gemm"), mm = is_op(h, "MatMul");
  bool fconv = is_kiln(h, "FusedConv"), fgemm = is_kiln(h, "FusedGemm");
  if (!conv && !gemm && !mm && !fconv && !fgemm) return false;
  if (h->n_outputs != 1 || h->n_inputs < 2 || !f32_tensor(g, h->outputs[0]) ||
      !f32_tensor(g, h->inputs[0]) || !f32_tensor(g, h->inputs[1]))
    return false;
  c->conv = conv || fconv;
  c->in0 = h->inputs[0];
  c->in1 = h->inputs[1];
  c->cur = h->outputs[0];
  const kn_type *yt = &g->values[c->cur].type;
  if (yt->rank < 0) return false;
  c->rank = yt->rank;
  memcpy(c->dims, yt->dims, sizeof c->dims);
  if (h->n_inputs > 2) c->bias = h->inputs[2];
  if (mm) {
    const kn_tensor *b = f32_const(g, h->inputs[1]);
    if (!b || b->rank != 2 || g->values[h->inputs[0]].type.rank < 2) return false;
  }
  if (c->conv) {
    const kn_type *wt = &g->values[c->in1].type;
    if (wt->rank < 3 || wt->dims[0] < 0) return false;
    c->m = wt->dims[0];
  }
  if (fconv || fgemm) {
    const char *a = str_attr(h, "activation");
    if (a && *a) {
      c->act = a;
      c->act_from_head = true;
    }
    if (h->n_inputs > 3) c->z = h->inputs[3];
    const kn_attr *r = kn_node_attr(h, "residual_before_activation");
    c->res_first = r && r->i != 0;
  }
  return true;
}

/* Replace the chain by one fused node. */
static kn_status rewrite(kn_pass_ctx *ctx, kn_graph *g, chain *c) {
  int32_t in[4] = {c->in0, c->in1, c->bias, c->z};
  int32_t n_in = c->z >= 0 ? 4 : c->bias >= 0 ? 3 : 2;
  int32_t out = c->cur;
  const kn_node *h = &g->nodes[c->head];
  char *name = kn_strdup(h->name);
  if (!name) return oom(ctx);
  int32_t ni = kn_graph_new_node(g, c->conv ? "FusedConv" : "FusedGemm", KN_DOMAIN, name,
                                 n_in, in, 1, &out);
  free(name);
  if (ni < 0) return oom(ctx);
  kn_node *nn = &g->nodes[ni];
  h = &g->nodes[c->head];
  /* a MatMul has no attributes of Gemm's meaning; only kiln's own
   * annotations (the qdq pass's int8 quantization) carry over */
  bool ok = is_op(h, "MatMul") ? kn_node_copy_quant(nn, h) : kn_node_copy_attrs(nn, h);
  if (ok && h->covers) ok = (nn->covers = kn_strdup(h->covers)) != NULL;
  if (ok && c->beta_one && !c->conv) ok = kn_node_set_float(nn, "beta", 1.0f);
  if (ok && c->act && !c->act_from_head) {
    ok = kn_node_set_string(nn, "activation", c->act);
    if (ok && c->has_alpha) ok = kn_node_set_float(nn, "activation_alpha", c->alpha);
    if (ok && c->has_beta) ok = kn_node_set_float(nn, "activation_beta", c->beta);
    if (ok && c->has_lo) ok = kn_node_set_float(nn, "activation_min", c->lo);
    if (ok && c->has_hi) ok = kn_node_set_float(nn, "activation_max", c->hi);
  }
  if (ok && c->z >= 0) ok = kn_node_set_int(nn, "residual_before_activation", c->res_first);
  for (int32_t i = 0; ok && i < c->n; i++) ok = kn_node_add_covers(nn, &g->nodes[c->nodes[i]]);
  if (!ok) return oom(ctx);
  g->nodes[c->head].dead = true;
  for (int32_t i = 0; i < c->n; i++) g->nodes[c->nodes[i]].dead = true;
  return KN_OK;
}

kn_status kn_pass_fuse_act(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    chain c;
    if (g->nodes[i].dead || !chain_init(g, i, &c)) continue;
    for (;;) {
      bool done = false;
      if (!c.act && c.z < 0) {
        kn_status st = take_bias(ctx, g, &c, &done);
        if (st) return st;
        if (done) continue;
      }
      if (!c.act && take_act(g, &c)) continue;
      if (c.z < 0 && take_residual(g, &c)) continue;
      break;
    }
    if (c.n == 0) continue;
    kn_status st = rewrite(ctx, g, &c);
    if (st) return st;
    *changed = true;
  }
  return KN_OK;
}
