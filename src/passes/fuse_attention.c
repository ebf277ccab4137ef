/*
 * Attention recognition: scaled dot-product attention as HF BERT (and torch
 * nn.MultiheadAttention-style code) exports it,
 *
 *   Qh = Transpose(Reshape(q, [B, S, H, Dk]), 0 2 1 3)
 *   Kt = Transpose(Reshape(k, [B, S, H, Dk]), 0 2 3 1)
 *        | Transpose(Transpose(Reshape(k, ...), 0 2 1 3), 0 1 3 2)
 *   Vh = Transpose(Reshape(v, [B, S, H, Dv]), 0 2 1 3)
 *   s  = MatMul(Qh, Kt)  [/ c | * c | c *]  [+ mask | mask +]
 *   O  = MatMul(Softmax(s, last axis), Vh)
 *   y  = Reshape(Transpose(O, 0 2 1 3), [B, S, H*Dv])
 *
 * becomes one kiln Attention(q, k, v[, mask]) with num_heads H and scale
 * (src/ops/attention.c), computed flash-style without the S x S matrix.
 *
 * Any other form (match_heads below) becomes an Attention in per-head mode
 * (q_perm, k_perm, v_perm, out_perm): Softmax over the last axis of rank-3
 * or rank-4 scores MatMul(Qh, Kt) [* c | / c] [+ mask], then MatMul with
 * Vh, where Qh, Kt and Vh are any per-head tensors ([B,H,S,D], [B*H,S,D],
 * keys pre-transposed or transposed by a Transpose) and scalar constant
 * scales may sit on Q or K before the product (torch's
 * scaled_dot_product_attention scales both by sqrt(scale)).  The Transposes
 * around Qh, Kt, Vh and the result fold into the permutations; whatever made
 * the per-head tensors (Reshape, Slice, Split or Gather of one packed QKV
 * projection) stays and feeds the op.  The mask is any float tensor of rank
 * <= the scores' rank, constant or computed.
 *
 * Checked exactly: every permutation; each Reshape's target, constant or
 * computed at run time by Shape -> Gather -> Unsqueeze -> Concat chains (read
 * symbolically: an element is a constant or "dim i of value X"), keeps the
 * batch and sequence dims of its input and splits / merges the heads with
 * the same H everywhere and Dk equal for q and k; the scale is a
 * one-element float constant; the Softmax is over the last axis; a mask has
 * rank <= 4 and a head dim of 1 or H (its other dims broadcast as the Add
 * did: the op checks them when it runs).  Every intermediate must have its
 * pattern node as only reader, except that Shape nodes may read the
 * transposed result when all they feed is Gathers of dims 0 and 1 (batch and
 * sequence, the same in the fused result, which they then read instead).
 * float32 only.
 */
#include "pattern.h"

#include <math.h>

#define ATT_MAX 32
#define ATT_SHAPES 8
#define SYM_DEPTH 12

typedef struct att_match {
  int32_t q, k, v, mask, y;
  int64_t H, Dk, Dv;
  float scale;
  int32_t nodes[ATT_MAX];
  int32_t n;
  int32_t shapes[ATT_SHAPES]; /* Shape nodes to point at y */
  int32_t n_shapes;
} att_match;

static void add_node(att_match *m, int32_t i) {
  KN_ASSERT(m->n < ATT_MAX);
  m->nodes[m->n++] = i;
}

/* ---- symbolic shape vectors ---------------------------------------------- */

/* One element of a 1-D shape tensor: the constant c (v < 0) or dim i of
 * value v (whose static dim is unknown). */
typedef struct sym {
  int64_t c;
  int32_t v, i;
} sym;

static sym sym_dim(const kn_graph *g, int32_t v, int32_t i) {
  int64_t d = g->values[v].type.dims[i];
  return d >= 0 ? (sym){d, -1, 0} : (sym){0, v, i};
}

static bool const_ints(const kn_graph *g, int32_t v, int64_t *vals, int32_t max, int32_t *n,
                       int32_t *rank) {
  kn_tensor t;
  if (!kn_pat_const(g, v, &t) || !kn_dtype_is_int(t.dtype) || t.rank > 1 || !t.data)
    return false;
  int64_t cnt = kn_tensor_numel(&t);
  if (cnt < 0 || cnt > max) return false;
  for (int64_t i = 0; i < cnt; i++) vals[i] = kn_load_i64(t.data, t.dtype, i);
  *n = (int32_t)cnt;
  *rank = t.rank;
  return true;
}

/* Integer list attribute or (newer opsets) constant input `k`. */
static bool ints_arg(const kn_graph *g, const kn_node *n, const char *attr, int32_t k,
                     int64_t *vals, int32_t max, int32_t *cnt) {
  const kn_attr *a = kn_node_attr(n, attr);
  if (a) {
    if (a->type != KN_ATTR_INTS || a->n > max) return false;
    for (int32_t i = 0; i < a->n; i++) vals[i] = a->ints[i];
    *cnt = a->n;
    return true;
  }
  int32_t r;
  return n->n_inputs > k && n->inputs[k] >= 0 && const_ints(g, n->inputs[k], vals, max, cnt, &r);
}

/* Evaluates the int64 value v (rank 0 or 1) as a vector of syms; *n its
 * length, *rank its rank.  False when it cannot be read. */
static bool sym_eval(const kn_graph *g, int32_t v, sym *out, int32_t max, int32_t *n,
                     int32_t *rank, int depth) {
  if (depth > SYM_DEPTH || v < 0) return false;
  int64_t c[KN_MAX_RANK];
  if (const_ints(g, v, c, max < KN_MAX_RANK ? max : KN_MAX_RANK, n, rank)) {
    for (int32_t i = 0; i < *n; i++) out[i] = (sym){c[i], -1, 0};
    return true;
  }
  int32_t pi = g->values[v].producer;
  if (pi < 0 || pi >= g->n_nodes) return false;
  const kn_node *p = &g->nodes[pi];
  if (kn_pat_is(p, "Shape")) {
    int32_t x = p->inputs[0], r = kn_pat_rank(g, x);
    if (r < 0 || r > max || kn_node_attr(p, "start") || kn_node_attr(p, "end")) return false;
    for (int32_t i = 0; i < r; i++) out[i] = sym_dim(g, x, i);
    *n = r;
    *rank = 1;
    return true;
  }
  if (kn_pat_is(p, "Gather")) {
    const kn_attr *ax = kn_node_attr(p, "axis");
    if (ax && (ax->type != KN_ATTR_INT || ax->i != 0)) return false;
    sym data[KN_MAX_RANK];
    int32_t dn, dr, in_n, in_r;
    int64_t idx[KN_MAX_RANK];
    if (!sym_eval(g, p->inputs[0], data, KN_MAX_RANK, &dn, &dr, depth + 1) || dr != 1 ||
        !const_ints(g, p->inputs[1], idx, max < KN_MAX_RANK ? max : KN_MAX_RANK, &in_n, &in_r))
      return false;
    for (int32_t i = 0; i < in_n; i++) {
      int64_t j = idx[i] < 0 ? idx[i] + dn : idx[i];
      if (j < 0 || j >= dn) return false;
      out[i] = data[j];
    }
    *n = in_n;
    *rank = in_r;
    return true;
  }
  if (kn_pat_is(p, "Unsqueeze")) {
    int64_t axes[2];
    int32_t na;
    if (!ints_arg(g, p, "axes", 1, axes, 2, &na) || na != 1 || (axes[0] != 0 && axes[0] != -1))
      return false;
    if (!sym_eval(g, p->inputs[0], out, max, n, rank, depth + 1) || *rank != 0) return false;
    *rank = 1;
    return true;
  }
  if (kn_pat_is(p, "Squeeze")) {
    if (!sym_eval(g, p->inputs[0], out, max, n, rank, depth + 1) || *rank != 1 || *n != 1)
      return false;
    *rank = 0;
    return true;
  }
  if (kn_pat_is(p, "Cast")) {
    const kn_attr *to = kn_node_attr(p, "to");
    kn_dtype src = kn_pat_dtype(g, p->inputs[0]);
    if (!to || to->i != KN_DTYPE_I64 || (src != KN_DTYPE_I64 && src != KN_DTYPE_I32)) return false;
    return sym_eval(g, p->inputs[0], out, max, n, rank, depth + 1);
  }
  if (kn_pat_is(p, "Concat")) {
    const kn_attr *ax = kn_node_attr(p, "axis");
    if (!ax || ax->type != KN_ATTR_INT || (ax->i != 0 && ax->i != -1)) return false;
    int32_t tot = 0;
    for (int32_t k = 0; k < p->n_inputs; k++) {
      int32_t pn, pr;
      if (!sym_eval(g, p->inputs[k], out + tot, max - tot, &pn, &pr, depth + 1) || pr != 1)
        return false;
      tot += pn;
    }
    *n = tot;
    *rank = 1;
    return true;
  }
  return false;
}

static bool sym_is_const(sym s, int64_t c) { return s.v < 0 && s.c == c; }

/* s stands for dim i of value x: symbolically, or as x's known dim. */
static bool sym_is_dim(const kn_graph *g, sym s, int32_t x, int32_t i) {
  if (s.v >= 0) return s.v == x && s.i == i;
  int64_t d = g->values[x].type.dims[i];
  return d >= 0 && s.c == d;
}

/* Reshape node `ri`'s target as syms (length must be `len`). */
static bool reshape_target(const kn_graph *g, const kn_node *r, sym *t, int32_t len,
                           bool *allowzero) {
  const kn_attr *az = kn_node_attr(r, "allowzero");
  *allowzero = az && az->type == KN_ATTR_INT && az->i != 0;
  int32_t n, rank;
  return r->n_inputs == 2 && sym_eval(g, r->inputs[1], t, KN_MAX_RANK, &n, &rank, 0) &&
         rank == 1 && n == len;
}

/* Dim i of the Reshape's input x is kept: the target element is that dim,
 * or 0 (copy) without allowzero. */
static bool keeps_dim(const kn_graph *g, sym s, int32_t x, int32_t i, bool allowzero) {
  return sym_is_dim(g, s, x, i) || (!allowzero && sym_is_const(s, 0));
}

/* Reshape(x [b, s, H*D]) -> [b, s, H, D]: returns H and D. */
static bool split_heads(const kn_graph *g, const kn_node *r, int64_t *H, int64_t *D) {
  int32_t x = r->inputs[0];
  if (kn_pat_rank(g, x) != 3) return false;
  sym t[KN_MAX_RANK];
  bool az;
  if (!reshape_target(g, r, t, 4, &az)) return false;
  int64_t hid = g->values[x].type.dims[2];
  if (t[2].v >= 0 || t[2].c <= 0 || t[3].v >= 0 || (t[3].c <= 0 && t[3].c != -1)) return false;
  int64_t h = t[2].c, d = t[3].c;
  if (d == -1) {
    if (hid < 0 || hid % h) return false;
    d = hid / h;
  }
  if (hid >= 0 && hid != h * d) return false;
  if (!keeps_dim(g, t[0], x, 0, az)) return false;
  /* -1 for the sequence is exact only when the rest is known to match */
  bool seq_ok = keeps_dim(g, t[1], x, 1, az) || (sym_is_const(t[1], -1) && hid >= 0);
  if (!seq_ok) return false;
  *H = h;
  *D = d;
  return true;
}

/* Reshape(x [b, s, H, D]) -> [b, s, H*D]. */
static bool merge_heads(const kn_graph *g, const kn_node *r, int64_t hd) {
  int32_t x = r->inputs[0];
  sym t[KN_MAX_RANK];
  bool az;
  if (!reshape_target(g, r, t, 3, &az)) return false;
  bool b = keeps_dim(g, t[0], x, 0, az), s = keeps_dim(g, t[1], x, 1, az);
  bool last = sym_is_const(t[2], hd);
  return b && ((s && (last || sym_is_const(t[2], -1))) || (sym_is_const(t[1], -1) && last));
}

/* ---- the pattern --------------------------------------------------------- */

static bool perm_is(const kn_node *n, const int64_t *perm) {
  const kn_attr *a = kn_node_attr(n, "perm");
  if (!a || a->type != KN_ATTR_INTS || a->n != 4) return false;
  for (int32_t i = 0; i < 4; i++)
    if (a->ints[i] != perm[i]) return false;
  return true;
}

static const int64_t P0213[4] = {0, 2, 1, 3}, P0231[4] = {0, 2, 3, 1}, P0132[4] = {0, 1, 3, 2};

/* v = Transpose(Reshape(x), perm) with v read only by `reader`; the Reshape
 * splits heads.  Returns x, or -1. */
static int32_t heads_of(const kn_pat *p, int32_t v, int32_t reader, const int64_t *perm,
                        att_match *m, int64_t *H, int64_t *D) {
  const kn_graph *g = p->g;
  int32_t ti = kn_pat_producer(g, v, "Transpose");
  if (ti < 0 || kn_pat_sole_reader(p, v) != reader || !perm_is(&g->nodes[ti], perm)) return -1;
  int32_t rv = g->nodes[ti].inputs[0];
  int32_t ri = kn_pat_producer(g, rv, "Reshape");
  if (ri < 0 || kn_pat_sole_reader(p, rv) != ti || !split_heads(g, &g->nodes[ri], H, D))
    return -1;
  add_node(m, ti);
  add_node(m, ri);
  return g->nodes[ri].inputs[0];
}

/* The transposed keys: Transpose(Reshape(k), 0 2 3 1), or the same in two
 * steps (0 2 1 3 then 0 1 3 2). */
static int32_t keys_of(const kn_pat *p, int32_t v, int32_t reader, att_match *m, int64_t *H,
                       int64_t *D) {
  const kn_graph *g = p->g;
  int32_t k = heads_of(p, v, reader, P0231, m, H, D);
  if (k >= 0) return k;
  int32_t ti = kn_pat_producer(g, v, "Transpose");
  if (ti < 0 || kn_pat_sole_reader(p, v) != reader || !perm_is(&g->nodes[ti], P0132)) return -1;
  k = heads_of(p, g->nodes[ti].inputs[0], ti, P0213, m, H, D);
  if (k >= 0) add_node(m, ti);
  return k;
}

static bool f32_value(const kn_graph *g, int32_t v) {
  return kn_pat_dtype(g, v) == KN_DTYPE_F32;
}

/* s (read only by `reader`) = MatMul(Qh, Kt) with an optional scale. */
static bool match_scores(const kn_pat *p, int32_t s, int32_t reader, att_match *m) {
  const kn_graph *g = p->g;
  if (kn_pat_sole_reader(p, s) != reader) return false;
  m->scale = 1.0f;
  int32_t di = kn_pat_producer(g, s, "Div"), mi = kn_pat_producer(g, s, "Mul");
  int32_t mm = s, mm_reader = reader;
  double c;
  if (di >= 0) {
    const kn_node *d = &g->nodes[di];
    if (d->n_inputs != 2 || d->inputs[0] == d->inputs[1] || !f32_value(g, d->inputs[1]) ||
        !kn_pat_scalar(g, d->inputs[1], 4, &c) || c == 0)
      return false;
    m->scale = (float)(1.0 / c);
    mm = d->inputs[0];
    mm_reader = di;
    add_node(m, di);
  } else if (mi >= 0) {
    const kn_node *d = &g->nodes[mi];
    int32_t k;
    for (k = 0; k < 2 && d->n_inputs == 2; k++)
      if (d->inputs[k] != d->inputs[1 - k] && kn_pat_producer(g, d->inputs[1 - k], "MatMul") >= 0 &&
          f32_value(g, d->inputs[k]) && kn_pat_scalar(g, d->inputs[k], 4, &c))
        break;
    if (k >= 2 || d->n_inputs != 2) return false;
    m->scale = (float)c;
    mm = d->inputs[1 - k];
    mm_reader = mi;
    add_node(m, mi);
  }
  int32_t qk = kn_pat_producer(g, mm, "MatMul");
  if (qk < 0 || kn_pat_sole_reader(p, mm) != mm_reader) return false;
  const kn_node *n = &g->nodes[qk];
  if (n->inputs[0] == n->inputs[1]) return false;
  add_node(m, qk);
  int64_t hq, dq, hk, dk;
  m->q = heads_of(p, n->inputs[0], qk, P0213, m, &hq, &dq);
  if (m->q < 0) return false;
  m->k = keys_of(p, n->inputs[1], qk, m, &hk, &dk);
  if (m->k < 0 || hq != hk || dq != dk) return false;
  m->H = hq;
  m->Dk = dq;
  return true;
}

/* Shape readers of t (the transposed result [B, S, H, Dv]) that only feed
 * Gathers of dims 0 and 1, so they may read the fused [B, S, H*Dv] instead. */
static bool shape_reader_ok(const kn_pat *p, int32_t si, int32_t t) {
  const kn_graph *g = p->g;
  const kn_node *s = &g->nodes[si];
  if (!kn_pat_is(s, "Shape") || s->inputs[0] != t || kn_node_attr(s, "start") ||
      kn_node_attr(s, "end"))
    return false;
  int32_t out = s->outputs[0], rd[8];
  int32_t nr = kn_pat_readers(p, out, rd, 8);
  if (nr < 0 || nr != p->uses[out]) return false; /* also no graph output */
  for (int32_t i = 0; i < nr; i++) {
    const kn_node *gn = &g->nodes[rd[i]];
    const kn_attr *ax = kn_node_attr(gn, "axis");
    int64_t idx[KN_MAX_RANK];
    int32_t cnt, rank;
    if (!kn_pat_is(gn, "Gather") || gn->inputs[0] != out || gn->inputs[1] == out ||
        (ax && (ax->type != KN_ATTR_INT || ax->i != 0)) ||
        !const_ints(g, gn->inputs[1], idx, KN_MAX_RANK, &cnt, &rank))
      return false;
    for (int32_t j = 0; j < cnt; j++)
      if (idx[j] != 0 && idx[j] != 1) return false;
  }
  return true;
}

static bool softmax_last_axis(const kn_node *sm, int32_t rank) {
  const kn_attr *a = kn_node_attr(sm, "axis");
  int64_t axis = a ? a->i : sm->opset < 13 ? 1 : -1;
  if (a && a->type != KN_ATTR_INT) return false;
  return axis == -1 || axis == rank - 1;
}

static bool match(const kn_pat *p, int32_t smi, att_match *m) {
  const kn_graph *g = p->g;
  const kn_node *sm = &g->nodes[smi];
  int32_t a = sm->inputs[0];
  if (kn_pat_rank(g, a) != 4 || !f32_value(g, a) || !softmax_last_axis(sm, 4)) return false;
  add_node(m, smi);
  /* optional additive mask */
  int32_t ai = kn_pat_producer(g, a, "Add");
  bool ok = false;
  if (ai >= 0 && kn_pat_sole_reader(p, a) == smi && g->nodes[ai].n_inputs == 2) {
    const kn_node *an = &g->nodes[ai];
    for (int32_t k = 0; k < 2 && !ok; k++) {
      int32_t s = an->inputs[k], mk = an->inputs[1 - k];
      if (s == mk) break;
      att_match t = *m;
      add_node(&t, ai);
      int32_t mr = kn_pat_rank(g, mk);
      if (!f32_value(g, mk) || mr < 0 || mr > 4 || !match_scores(p, s, ai, &t)) continue;
      if (mr >= 3) {
        int64_t hd = g->values[mk].type.dims[mr - 3];
        if (hd != 1 && hd != t.H) continue;
      }
      t.mask = mk;
      *m = t;
      ok = true;
    }
  }
  if (!ok && !match_scores(p, a, smi, m)) return false;
  /* probs @ Vh */
  int32_t probs = sm->outputs[0];
  int32_t pv = kn_pat_sole_reader_op(p, probs, "MatMul");
  if (pv < 0 || g->nodes[pv].inputs[0] != probs) return false;
  add_node(m, pv);
  int64_t hv;
  m->v = heads_of(p, g->nodes[pv].inputs[1], pv, P0213, m, &hv, &m->Dv);
  if (m->v < 0 || hv != m->H) return false;
  if (!f32_value(g, m->q) || !f32_value(g, m->k) || !f32_value(g, m->v)) return false;
  /* Transpose back and merge heads */
  int32_t o = g->nodes[pv].outputs[0];
  int32_t ti = kn_pat_sole_reader_op(p, o, "Transpose");
  if (ti < 0 || !perm_is(&g->nodes[ti], P0213)) return false;
  add_node(m, ti);
  int32_t t = g->nodes[ti].outputs[0];
  int32_t rd[ATT_SHAPES + 1];
  int32_t nr = kn_pat_readers(p, t, rd, ATT_SHAPES + 1);
  if (nr < 1) return false;
  int32_t ri = -1;
  m->n_shapes = 0;
  for (int32_t i = 0; i < nr; i++) {
    const kn_node *n = &g->nodes[rd[i]];
    if (kn_pat_is(n, "Reshape") && n->inputs[0] == t && n->inputs[1] != t && ri < 0)
      ri = rd[i];
    else if (shape_reader_ok(p, rd[i], t))
      m->shapes[m->n_shapes++] = rd[i];
    else
      return false;
  }
  if (ri < 0 || p->uses[t] != nr || !merge_heads(g, &g->nodes[ri], m->H * m->Dv)) return false;
  add_node(m, ri);
  m->y = g->nodes[ri].outputs[0];
  return true;
}

/* ---- the per-head form -------------------------------------------------------
 * Any exporter's block around Softmax(MatMul(Qh, Kt) [scale] [+ mask]) @ Vh
 * on rank-3 or rank-4 per-head tensors: the Transposes next to Qh, Kt, Vh
 * and the result become the op's q/k/v/out permutations, scalar constant
 * Mul/Div on Q or K (before the product, anywhere among those Transposes)
 * or on the scores fold into its scale.  The Reshapes, Slices, Splits or
 * Gathers that made the per-head tensors stay (Reshape is an alias step,
 * the splits copies): the op reads their results. */

/* Walks back from v (read only by `reader`) through Transposes of rank r
 * and scalar float constant Mul/Div (scale_ok), each read only by the next;
 * returns the tensor reached, with perm such that v[a] = x[perm[a]]. */
static int32_t walk_back(const kn_pat *p, int32_t v, int32_t reader, int32_t r, bool scale_ok,
                         int64_t *perm, double *scale, att_match *m) {
  const kn_graph *g = p->g;
  for (int32_t a = 0; a < r; a++) perm[a] = a;
  for (int32_t steps = 0; steps < 8; steps++) {
    if (kn_pat_sole_reader(p, v) != reader || m->n + 2 > ATT_MAX) return v;
    int32_t ti = kn_pat_producer(g, v, "Transpose");
    if (ti >= 0) {
      const kn_attr *pa = kn_node_attr(&g->nodes[ti], "perm");
      int32_t x = g->nodes[ti].inputs[0];
      if (!pa || pa->type != KN_ATTR_INTS || pa->n != r || kn_pat_rank(g, x) != r) return v;
      int64_t c[KN_MAX_RANK];
      for (int32_t a = 0; a < r; a++) {
        if (pa->ints[a] < 0 || pa->ints[a] >= r) return v;
        c[a] = pa->ints[perm[a]];
      }
      memcpy(perm, c, (size_t)r * sizeof *perm);
      add_node(m, ti);
      reader = ti;
      v = x;
      continue;
    }
    int32_t mi = kn_pat_producer(g, v, "Mul"), di = kn_pat_producer(g, v, "Div");
    int32_t si = mi >= 0 ? mi : di;
    if (!scale_ok || si < 0 || g->nodes[si].n_inputs != 2) return v;
    const kn_node *n = &g->nodes[si];
    double c;
    int32_t k;
    for (k = 0; k < 2; k++) {
      int32_t cv = n->inputs[k], x = n->inputs[1 - k];
      if ((di >= 0 && k == 0) || cv == x) continue;
      if (f32_value(g, cv) && kn_pat_rank(g, cv) <= kn_pat_rank(g, x) &&
          kn_pat_rank(g, x) == r && kn_pat_scalar(g, cv, r, &c) && (mi >= 0 || c != 0))
        break;
    }
    if (k == 2) return v;
    *scale = mi >= 0 ? *scale * c : *scale / c;
    add_node(m, si);
    reader = si;
    v = n->inputs[1 - k];
  }
  return v;
}

typedef struct head_match {
  int32_t r;
  int64_t perm[4][4]; /* q, k, v, out */
} head_match;

/* scores s (read only by `reader`) = MatMul(Qh', Kt') [* c | / c], the
 * primes being Qh, Kt through Transposes and scalar scales. */
static bool match_head_scores(const kn_pat *p, int32_t s, int32_t reader, att_match *m,
                              head_match *hm, double *scale) {
  const kn_graph *g = p->g;
  int32_t r = hm->r;
  int64_t id[4];
  int32_t n_before = m->n;
  int32_t mm = walk_back(p, s, reader, r, true, id, scale, m);
  for (int32_t a = 0; a < r; a++)
    if (id[a] != a) return false; /* no Transpose between the product and softmax */
  int32_t qk = kn_pat_producer(g, mm, "MatMul");
  int32_t mm_reader = m->n > n_before ? m->nodes[m->n - 1] : reader;
  if (qk < 0 || kn_pat_sole_reader(p, mm) != mm_reader) return false;
  const kn_node *n = &g->nodes[qk];
  if (n->inputs[0] == n->inputs[1] || kn_pat_rank(g, n->inputs[0]) != r ||
      kn_pat_rank(g, n->inputs[1]) != r)
    return false;
  add_node(m, qk);
  m->q = walk_back(p, n->inputs[0], qk, r, true, hm->perm[0], scale, m);
  int64_t kt[4];
  m->k = walk_back(p, n->inputs[1], qk, r, true, kt, scale, m);
  /* Kh = Kt with its last two axes swapped */
  for (int32_t a = 0; a < r; a++) hm->perm[1][a] = kt[a == r - 2 ? r - 1 : a == r - 1 ? r - 2 : a];
  return true;
}

static bool match_heads(const kn_pat *p, int32_t smi, att_match *m, head_match *hm) {
  const kn_graph *g = p->g;
  const kn_node *sm = &g->nodes[smi];
  int32_t a = sm->inputs[0], r = kn_pat_rank(g, a);
  if ((r != 3 && r != 4) || !f32_value(g, a) || !softmax_last_axis(sm, r)) return false;
  hm->r = r;
  add_node(m, smi);
  double scale = 1.0;
  int32_t ai = kn_pat_producer(g, a, "Add");
  bool ok = false;
  if (ai >= 0 && kn_pat_sole_reader(p, a) == smi && g->nodes[ai].n_inputs == 2) {
    const kn_node *an = &g->nodes[ai];
    for (int32_t k = 0; k < 2 && !ok; k++) {
      int32_t s = an->inputs[k], mk = an->inputs[1 - k];
      if (s == mk) break;
      att_match t = *m;
      double sc = 1.0;
      add_node(&t, ai);
      int32_t mr = kn_pat_rank(g, mk);
      if (!f32_value(g, mk) || mr < 0 || mr > r || kn_pat_rank(g, s) != r ||
          !match_head_scores(p, s, ai, &t, hm, &sc))
        continue;
      t.mask = mk;
      *m = t;
      scale = sc;
      ok = true;
    }
  }
  if (!ok && !match_head_scores(p, a, smi, m, hm, &scale)) return false;
  if (!isfinite(scale) || scale == 0) return false;
  m->scale = (float)scale;
  /* probs @ Vh */
  int32_t probs = sm->outputs[0];
  int32_t pv = kn_pat_sole_reader_op(p, probs, "MatMul");
  if (pv < 0 || g->nodes[pv].inputs[0] != probs || g->nodes[pv].inputs[1] == probs) return false;
  int32_t vh = g->nodes[pv].inputs[1];
  if (kn_pat_rank(g, vh) != r || kn_pat_rank(g, g->nodes[pv].outputs[0]) != r) return false;
  add_node(m, pv);
  double one = 1.0;
  m->v = walk_back(p, vh, pv, r, false, hm->perm[2], &one, m);
  if (!f32_value(g, m->q) || !f32_value(g, m->k) || !f32_value(g, m->v)) return false;
  /* the static shapes agree: Sk of Kh and Vh, Dk of Qh and Kh */
  const kn_type *qt = &g->values[m->q].type, *kt = &g->values[m->k].type,
                *vt = &g->values[m->v].type;
  int64_t qd = qt->dims[hm->perm[0][r - 1]], kd = kt->dims[hm->perm[1][r - 1]];
  int64_t ks = kt->dims[hm->perm[1][r - 2]], vs = vt->dims[hm->perm[2][r - 2]];
  if ((qd >= 0 && kd >= 0 && qd != kd) || (ks >= 0 && vs >= 0 && ks != vs)) return false;
  /* Transposes of the result fold into out_perm */
  int32_t o = g->nodes[pv].outputs[0];
  for (int32_t i = 0; i < r; i++) hm->perm[3][i] = i;
  for (int32_t steps = 0; steps < 4 && m->n < ATT_MAX; steps++) {
    int32_t ti = kn_pat_sole_reader_op(p, o, "Transpose");
    if (ti < 0) break;
    const kn_attr *pa = kn_node_attr(&g->nodes[ti], "perm");
    if (!pa || pa->type != KN_ATTR_INTS || pa->n != r) break;
    int64_t c[4];
    bool valid = true;
    for (int32_t t = 0; t < r; t++) {
      valid &= pa->ints[t] >= 0 && pa->ints[t] < r;
      if (valid) c[t] = hm->perm[3][pa->ints[t]];
    }
    if (!valid) break;
    memcpy(hm->perm[3], c, sizeof c);
    add_node(m, ti);
    o = g->nodes[ti].outputs[0];
  }
  m->y = o;
  return true;
}

kn_status kn_pass_attention(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    if (!kn_pat_is(&g->nodes[i], "Softmax")) continue;
    att_match m = {.q = -1, .k = -1, .v = -1, .mask = -1, .y = -1};
    head_match hm = {0};
    bool heads = false;
    if (!match(&p, i, &m)) {
      m = (att_match){.q = -1, .k = -1, .v = -1, .mask = -1, .y = -1};
      if (!match_heads(&p, i, &m, &hm)) continue;
      heads = true;
    }
    int32_t in[4] = {m.q, m.k, m.v, m.mask};
    int32_t last = g->values[m.y].producer;
    for (int32_t s = 0; s < m.n_shapes; s++) g->nodes[m.shapes[s]].inputs[0] = m.y;
    int32_t idx = kn_pat_replace(&p, m.nodes, m.n, last, "Attention", KN_DOMAIN,
                                 m.mask >= 0 ? 4 : 3, in, m.y, ctx->err);
    if (idx < 0) {
      st = KN_ERR_OOM;
      break;
    }
    kn_node *an = &g->nodes[idx];
    bool ok = kn_node_set_float(an, "scale", m.scale);
    if (heads) {
      static const char *const names[4] = {"q_perm", "k_perm", "v_perm", "out_perm"};
      for (int32_t k = 0; k < 4 && ok; k++) ok = kn_node_set_ints(an, names[k], hm.perm[k], hm.r);
    } else {
      ok = ok && kn_node_set_int(an, "num_heads", m.H);
    }
    if (!ok) st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory setting Attention attributes");
    *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
