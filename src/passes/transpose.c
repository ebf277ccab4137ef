/* Layout-op cleanup: cancels, merges and sinks Transposes, and merges
 * chains of Reshape/Flatten/Squeeze/Unsqueeze.  Every rewrite only moves
 * data differently, so results stay bit for bit the same.
 *
 *  - Transpose(p1) -> Transpose(p2) becomes one Transpose by q[j] =
 *    p1[p2[j]], or nothing when q is the identity.
 *  - A Transpose(p) sinks below an elementwise op that alone reads it
 *    (op(T(x)) = T(op(x)) elementwise); below a binary one when the other
 *    operand is a Transpose(p) of the same p that the op alone reads (two
 *    Transposes become one: broadcasting between two operands of the same
 *    rank commutes with permuting both alike) or is of one element and of
 *    rank at most p's (broadcasting it never depends on position).  A
 *    Transpose only sinks when that pays: walking down through such ops it
 *    meets another Transpose (they then compose) or a binary op whose other
 *    operand is a matching Transpose (they then merge).
 *  - Reshape/Flatten/Squeeze/Unsqueeze -> one of them becomes one Reshape
 *    to the second's statically known shape (one unknown dim becomes -1;
 *    a zero dim, which Reshape would read as "copy", is left alone).
 *
 * Every intermediate removed must have the rewritten node as its only
 * reader (a graph output or a subgraph reference counts as a reader).  A
 * perm that is not known (no attribute and an input of unknown rank) or
 * not a permutation leaves the node alone; a Transpose or reshape of a
 * constant is left to constant folding. */
#include "pattern.h"

typedef struct tp_state {
  kn_pass_ctx *ctx;
  kn_graph *g;
  kn_pat p;
} tp_state;

static bool is_transpose(const kn_graph *g, int32_t i) {
  if (i < 0) return false;
  const kn_node *n = &g->nodes[i];
  return kn_pat_is(n, "Transpose") && n->n_inputs == 1 && n->n_outputs == 1 &&
         n->inputs[0] >= 0 && n->outputs[0] >= 0;
}

/* The permutation of Transpose node i into perm[0..*rank); false when not
 * known or not valid. */
static bool get_perm(const kn_graph *g, int32_t i, int64_t *perm, int32_t *rank) {
  const kn_node *n = &g->nodes[i];
  int32_t in_rank = kn_pat_rank(g, n->inputs[0]);
  const kn_attr *a = kn_node_attr(n, "perm");
  if (a) {
    if (a->type != KN_ATTR_INTS || a->n > KN_MAX_RANK || (in_rank >= 0 && in_rank != a->n))
      return false;
    *rank = a->n;
    bool seen[KN_MAX_RANK] = {false};
    for (int32_t d = 0; d < a->n; d++) {
      int64_t v = a->ints[d];
      if (v < 0 || v >= a->n || seen[v]) return false;
      seen[v] = true;
      perm[d] = v;
    }
    return true;
  }
  if (in_rank < 0 || in_rank > KN_MAX_RANK) return false;
  *rank = in_rank;
  for (int32_t d = 0; d < in_rank; d++) perm[d] = in_rank - 1 - d;
  return true;
}

static bool same_perm(const int64_t *a, int32_t ra, const int64_t *b, int32_t rb) {
  if (ra != rb) return false;
  for (int32_t d = 0; d < ra; d++)
    if (a[d] != b[d]) return false;
  return true;
}

static bool is_const(const kn_graph *g, int32_t v) {
  kn_tensor t;
  return kn_pat_const(g, v, &t);
}

static bool is_unary(const kn_node *n) {
  static const char *const ops[] = {
      "Abs",     "Acos",     "Acosh",      "Asin",        "Asinh",   "Atan",
      "Atanh",   "BitwiseNot", "Cast",     "Ceil",        "Celu",    "Clip",
      "Cos",     "Cosh",     "Elu",        "Erf",         "Exp",     "Floor",
      "HardSigmoid", "HardSwish", "Identity", "IsInf",    "IsNaN",   "LeakyRelu",
      "Log",     "Mish",     "Neg",        "Not",         "Reciprocal", "Relu",
      "Round",   "Selu",     "Shrink",     "Sigmoid",     "Sign",    "Sin",
      "Sinh",    "Softplus", "Softsign",   "Sqrt",        "Tan",     "Tanh",
      "ThresholdedRelu"};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    if (kn_pat_is(n, ops[k])) return true;
  return false;
}

static bool is_binary(const kn_node *n) {
  static const char *const ops[] = {
      "Add",  "Sub",  "Mul",  "Div",  "Pow",  "Mod",  "Max",  "Min",  "Sum",
      "Mean", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "And",  "Or",   "Xor",  "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    if (kn_pat_is(n, ops[k])) return n->n_inputs == 2;
  return false;
}

/* Node r reads v only as its elementwise operand 0 and has one result. */
static bool unary_reads(const kn_node *r, int32_t v) {
  return is_unary(r) && r->n_inputs >= 1 && r->inputs[0] == v && kn_pat_reads(r, v) == 1 &&
         r->n_outputs == 1 && r->outputs[0] >= 0;
}

/* Of one element with a known rank at most `rank`. */
static bool one_element(const kn_graph *g, int32_t v, int32_t rank) {
  const kn_type *t = &g->values[v].type;
  if (t->kind != KN_KIND_TENSOR || t->rank < 0 || t->rank > rank) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] != 1) return false;
  return true;
}

/* The Transpose producing o when it has perm (perm, rank), reads no
 * constant and node r is its result's only reader; else -1. */
static int32_t matching_transpose(const tp_state *s, int32_t o, int32_t r, const int64_t *perm,
                                  int32_t rank) {
  int32_t j = kn_pat_producer(s->g, o, "Transpose");
  int64_t q[KN_MAX_RANK];
  int32_t rq;
  if (!is_transpose(s->g, j) || kn_pat_sole_reader(&s->p, o) != r) return -1;
  if (is_const(s->g, s->g->nodes[j].inputs[0])) return -1;
  if (!get_perm(s->g, j, q, &rq) || !same_perm(perm, rank, q, rq)) return -1;
  return j;
}

/* Binary node r reading v once, with one result. */
static bool binary_reads(const kn_node *r, int32_t v) {
  return is_binary(r) && kn_pat_reads(r, v) == 1 && r->n_outputs == 1 && r->outputs[0] >= 0;
}

/* Whether sinking Transpose i (perm, rank) leads to a cancellation or a
 * merge (see the file comment). */
static bool sinking_pays(const tp_state *s, int32_t i, const int64_t *perm, int32_t rank) {
  const kn_graph *g = s->g;
  int32_t v = g->nodes[i].outputs[0];
  for (int32_t step = 0; step < g->n_nodes; step++) {
    int32_t r = kn_pat_sole_reader(&s->p, v);
    if (r < 0) return false;
    const kn_node *n = &g->nodes[r];
    if (is_transpose(g, r)) return true;
    if (unary_reads(n, v)) {
      v = n->outputs[0];
      continue;
    }
    if (!binary_reads(n, v)) return false;
    int32_t o = kn_pat_other(n, v);
    if (o < 0) return false;
    if (matching_transpose(s, o, r, perm, rank) >= 0) return true;
    if (!one_element(g, o, rank)) return false;
    v = n->outputs[0];
  }
  return false;
}

static kn_status oom(tp_state *s, const char *what) {
  return kn_fail(s->ctx->err, KN_ERR_OOM, "out of memory %s", what);
}

/* Transpose(p1) -> Transpose i (p2). */
static kn_status compose(tp_state *s, int32_t i, bool *fired) {
  kn_graph *g = s->g;
  int32_t t1v = g->nodes[i].inputs[0];
  int32_t j = kn_pat_producer(g, t1v, "Transpose");
  if (!is_transpose(g, j) || kn_pat_sole_reader(&s->p, t1v) != i) return KN_OK;
  int32_t x = g->nodes[j].inputs[0];
  if (is_const(g, x)) return KN_OK;
  int64_t p1[KN_MAX_RANK], p2[KN_MAX_RANK], q[KN_MAX_RANK];
  int32_t r1, r2;
  if (!get_perm(g, j, p1, &r1) || !get_perm(g, i, p2, &r2) || r1 != r2) return KN_OK;
  bool identity = true;
  for (int32_t d = 0; d < r1; d++) {
    q[d] = p1[p2[d]];
    identity &= q[d] == d;
  }
  int32_t y = g->nodes[i].outputs[0];
  if (identity && kn_graph_can_replace(g, y, x)) {
    kn_graph_replace_value(g, y, x);
    g->nodes[i].dead = g->nodes[j].dead = true;
  } else {
    /* one Transpose by q (by the identity when x cannot stand in for y) */
    kn_node *n = &g->nodes[i];
    if (!kn_node_set_ints(n, "perm", q, r1) || !kn_node_add_covers(n, &g->nodes[j]))
      return oom(s, "composing two Transposes");
    n->inputs[0] = x;
    g->nodes[j].dead = true;
    g->values[t1v].producer = -1;
  }
  *fired = true;
  return kn_pat_refresh(&s->p, s->ctx->err);
}

/* Transpose i (perm, rank) now writes y; node r (which read its result)
 * reads its input instead and writes a fresh value that the Transpose
 * reads.  The fresh value's type is y's, un-permuted. */
static kn_status move_below(tp_state *s, int32_t i, int32_t r, const int64_t *perm, int32_t rank) {
  kn_graph *g = s->g;
  int32_t t = g->nodes[i].outputs[0], y = g->nodes[r].outputs[0];
  size_t len = strlen(g->values[y].name) + 8;
  char *hint = kn_malloc(len);
  if (!hint) return oom(s, "sinking a Transpose");
  snprintf(hint, len, "%s_pre", g->values[y].name);
  int32_t u = kn_graph_add_fresh_value(g, hint);
  free(hint);
  if (u < 0) return oom(s, "sinking a Transpose");
  if (!kn_node_set_ints(&g->nodes[i], "perm", perm, rank)) return oom(s, "sinking a Transpose");
  kn_type *ty = &g->values[y].type, *tu = &g->values[u].type;
  tu->kind = KN_KIND_TENSOR;
  tu->dtype = ty->dtype;
  tu->rank = rank;
  for (int32_t d = 0; d < rank; d++)
    tu->dims[perm[d]] = ty->kind == KN_KIND_TENSOR && ty->rank == rank ? ty->dims[d] : -1;
  kn_node *tn = &g->nodes[i], *rn = &g->nodes[r];
  for (int32_t k = 0; k < rn->n_inputs; k++)
    if (rn->inputs[k] == t) rn->inputs[k] = tn->inputs[0];
  rn->outputs[0] = u;
  tn->inputs[0] = u;
  tn->outputs[0] = y;
  g->values[u].producer = r;
  g->values[y].producer = i;
  g->values[t].producer = -1;
  return KN_OK;
}

/* Transpose i below the elementwise op reading it, when that pays. */
static kn_status sink(tp_state *s, int32_t i, bool *fired) {
  kn_graph *g = s->g;
  int32_t t = g->nodes[i].outputs[0];
  int32_t r = kn_pat_sole_reader(&s->p, t);
  if (r < 0 || is_const(g, g->nodes[i].inputs[0])) return KN_OK;
  int64_t perm[KN_MAX_RANK];
  int32_t rank;
  if (!get_perm(g, i, perm, &rank)) return KN_OK;
  const kn_node *n = &g->nodes[r];
  int32_t other_t = -1;
  if (unary_reads(n, t)) {
    /* fine */
  } else if (binary_reads(n, t)) {
    int32_t o = kn_pat_other(n, t);
    if (o < 0) return KN_OK;
    other_t = matching_transpose(s, o, r, perm, rank);
    if (other_t < 0 && !one_element(g, o, rank)) return KN_OK;
  } else {
    return KN_OK;
  }
  if (other_t < 0 && !sinking_pays(s, i, perm, rank)) return KN_OK;
  if (other_t >= 0) {
    /* the op reads the other Transpose's input; that Transpose goes */
    int32_t o = g->nodes[other_t].outputs[0];
    kn_node *rn = &g->nodes[r];
    for (int32_t k = 0; k < rn->n_inputs; k++)
      if (rn->inputs[k] == o) rn->inputs[k] = g->nodes[other_t].inputs[0];
    if (!kn_node_add_covers(&g->nodes[i], &g->nodes[other_t]))
      return oom(s, "merging two Transposes");
    g->nodes[other_t].dead = true;
    g->values[o].producer = -1;
  }
  kn_status st = move_below(s, i, r, perm, rank);
  if (st) return st;
  *fired = true;
  return kn_pat_refresh(&s->p, s->ctx->err);
}

static bool is_reshape_like(const kn_graph *g, int32_t i) {
  if (i < 0) return false;
  const kn_node *n = &g->nodes[i];
  return (kn_pat_is(n, "Reshape") || kn_pat_is(n, "Flatten") || kn_pat_is(n, "Squeeze") ||
          kn_pat_is(n, "Unsqueeze")) &&
         n->n_inputs >= 1 && n->inputs[0] >= 0 && n->n_outputs == 1 && n->outputs[0] >= 0;
}

/* reshape-like A -> reshape-like node i: one Reshape to i's static shape. */
static kn_status merge_reshapes(tp_state *s, int32_t i, bool *fired) {
  kn_graph *g = s->g;
  int32_t mid = g->nodes[i].inputs[0];
  int32_t j = g->values[mid].producer;
  if (!is_reshape_like(g, j) || g->nodes[j].outputs[0] != mid) return KN_OK;
  if (kn_pat_sole_reader(&s->p, mid) != i) return KN_OK;
  int32_t x = g->nodes[j].inputs[0], y = g->nodes[i].outputs[0];
  if (is_const(g, x) || kn_ir_model_opset(s->ctx->m, "") < 5) return KN_OK;
  const kn_type *ty = &g->values[y].type;
  if (ty->kind != KN_KIND_TENSOR || ty->rank < 0) return KN_OK;
  int64_t shape[KN_MAX_RANK];
  int32_t unknown = 0;
  for (int32_t d = 0; d < ty->rank; d++) {
    if (ty->dims[d] == 0) return KN_OK;
    if (ty->dims[d] < 0) unknown++;
    shape[d] = ty->dims[d] < 0 ? -1 : ty->dims[d];
  }
  if (unknown > 1) return KN_OK;
  kn_tensor t;
  memset(&t, 0, sizeof t);
  int64_t len = ty->rank;
  if (kn_tensor_alloc(&t, KN_DTYPE_I64, 1, &len, NULL)) return oom(s, "merging Reshapes");
  if (len) memcpy(t.data, shape, (size_t)len * sizeof *shape);
  int32_t c = kn_graph_add_constant(g, "reshape_shape", &t);
  if (c < 0) {
    kn_tensor_release(&t);
    return oom(s, "merging Reshapes");
  }
  char *name = kn_strdup(g->nodes[i].name);
  int32_t nn = name ? kn_graph_new_node(g, "Reshape", "", name, 2, (int32_t[]){x, c}, 1, &y)
                    : -1;
  free(name);
  if (nn < 0) return oom(s, "merging Reshapes");
  /* named after node i, the new node covers what i covered, then j */
  kn_node *r = &g->nodes[nn];
  if (g->nodes[i].covers && !(r->covers = kn_strdup(g->nodes[i].covers)))
    return oom(s, "merging Reshapes");
  if (!kn_node_add_covers(r, &g->nodes[j])) return oom(s, "merging Reshapes");
  g->nodes[i].dead = g->nodes[j].dead = true;
  g->values[y].producer = nn;
  g->values[mid].producer = -1;
  *fired = true;
  return kn_pat_refresh(&s->p, s->ctx->err);
}

/* Sweeps repeat until nothing fires; each rewrite removes a node or moves
 * a Transpose down towards one it will meet, so this ends. */
#define KN_TP_MAX_SWEEPS 64

kn_status kn_pass_transpose(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  tp_state s = {.ctx = ctx, .g = g};
  kn_status st = kn_pat_init(&s.p, g, ctx->err);
  for (int32_t sweep = 0; !st && sweep < KN_TP_MAX_SWEEPS; sweep++) {
    bool any = false;
    for (int32_t i = 0; !st && i < g->n_nodes; i++) {
      if (g->nodes[i].dead) continue;
      bool fired = false;
      if (is_transpose(g, i)) {
        st = compose(&s, i, &fired);
        if (!st && !fired && !g->nodes[i].dead) st = sink(&s, i, &fired);
      } else if (is_reshape_like(g, i)) {
        st = merge_reshapes(&s, i, &fired);
      }
      any |= fired;
    }
    *changed |= any;
    if (!any) break;
  }
  kn_pat_free(&s.p);
  return st;
}
