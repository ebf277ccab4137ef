/*
 * ewchain: connected groups of float32 elementwise nodes become one kiln
 * ElementwiseChain step (src/ops/ewchain.c) that computes them in one loop
 * over the output, writing no intermediate tensor.
 *
 * A group grows from a root (visited last node first) towards producers.
 * A producer joins when it is a supported op (ewchain.h: Add, Sub, Mul,
 * Div, Max/Min of two, Pow, the unary math and activation ops, Clip with
 * constant bounds, kiln Gelu and HardSwish) on float32, and the value it
 * writes
 *   - is not a graph output and is read only by nodes of the group (a value
 *     read twice inside the group, a diamond, is fine), and
 *   - has the static shape of the root's output, or is smaller and the IO
 *     model says recomputing it is cheaper than storing it.  An
 *     intermediate smaller than the output (a broadcast: x + f(y) with y of
 *     [N, 1]) is recomputed at every broadcast position once it joins: the
 *     extra arithmetic, (output elements - its elements) x its cost
 *     (kn_ew_cost), at the machine's peak, against its own step's
 *     predicted time (mostly the per-step overhead, for a small tensor).
 *     Each such decision is recorded.  It stays correct either way: the
 *     chain reads every input with its broadcast strides against the
 *     output, which is what the unfused ops compute.
 * A QuantizeLinear -> DequantizeLinear pair on a float32 edge (per tensor,
 * the same constant scale and zero point, the DequantizeLinear its only
 * reader: what ONNX Runtime's quantizer leaves around Add and the pools) is
 * one instruction (KN_EW_QDQ_U8 / _S8) that replaces both nodes.
 * Groups of at least two nodes are replaced.  It runs after fuse_act, so
 * conv/gemm epilogues have been taken already.
 */
#include <float.h>
#include <math.h>

#include <stdio.h>

#include "ops/ewchain.h"
#include "pattern.h"
#include "cost/iomodel.h"

/* Instructions per step: enough for decomposed norms, small enough that
 * the scratch slots stay in L1. */
#define EW_MAX_NODES 64

typedef struct ew_ins {
  int64_t op;
  int32_t a, b; /* operand values; b -1 for one-operand ops */
  float c0, c1;
  int32_t also; /* a second node the instruction replaces (a Q/DQ pair's
                   QuantizeLinear), or -1 */
} ew_ins;

static float attr_float(const kn_node *n, const char *name, float dflt) {
  const kn_attr *a = kn_node_attr(n, name);
  return a && a->type == KN_ATTR_FLOAT ? a->f : dflt;
}

static bool is_f32(const kn_graph *g, int32_t v) {
  return v >= 0 && kn_pat_dtype(g, v) == KN_DTYPE_F32 && kn_pat_rank(g, v) >= 0;
}

/* Clip bound input k (opset >= 11): absent, or a constant scalar. */
static bool clip_bound(const kn_graph *g, const kn_node *n, int32_t k, float dflt, float *out) {
  *out = dflt;
  if (n->n_inputs <= k || n->inputs[k] < 0) return true;
  double v;
  if (!kn_pat_scalar(g, n->inputs[k], KN_MAX_RANK, &v)) return false;
  *out = (float)v;
  return true;
}

static const struct {
  const char *name;
  kn_ew_opcode op;
} ew_names[] = {
    {"Add", KN_EW_ADD},       {"Sub", KN_EW_SUB},
    {"Mul", KN_EW_MUL},       {"Div", KN_EW_DIV},
    {"Max", KN_EW_MAX},       {"Min", KN_EW_MIN},
    {"Neg", KN_EW_NEG},       {"Abs", KN_EW_ABS},
    {"Exp", KN_EW_EXP},       {"Log", KN_EW_LOG},
    {"Sqrt", KN_EW_SQRT},     {"Reciprocal", KN_EW_RECIPROCAL},
    {"Relu", KN_EW_RELU},     {"Sigmoid", KN_EW_SIGMOID},
    {"Tanh", KN_EW_TANH},     {"Erf", KN_EW_ERF},
    {"HardSwish", KN_EW_HARDSWISH}, {"Softplus", KN_EW_SOFTPLUS},
};

/* Scalar constant v of dtype t (a float scale, or an 8-bit zero point) as
 * a double; an absent zero point (v < 0) is a u8 0. */
static bool q_param(const kn_graph *g, int32_t v, bool zero, kn_dtype *t, double *out) {
  if (v < 0) {
    *t = KN_DTYPE_U8;
    *out = 0;
    return zero;
  }
  kn_tensor c;
  if (!kn_pat_const(g, v, &c) || c.rank > 1 || kn_tensor_numel(&c) != 1) return false;
  *t = c.dtype;
  if (!zero) {
    if (c.dtype != KN_DTYPE_F32) return false;
    *out = *(const float *)c.data;
    return *out > 0 && isfinite(*out);
  }
  if (c.dtype == KN_DTYPE_U8) *out = *(const uint8_t *)c.data;
  else if (c.dtype == KN_DTYPE_I8) *out = *(const int8_t *)c.data;
  else return false;
  return true;
}

/* DequantizeLinear n of the only reader of a QuantizeLinear, both per
 * tensor with the same constant scale and zero point (u8 or s8), of a
 * float32 x: one QDQ instruction on x that replaces both. */
static bool classify_qdq(const kn_pat *p, const kn_node *n, ew_ins *e) {
  const kn_graph *g = p->g;
  if (!kn_pat_is(n, "DequantizeLinear") || n->n_inputs < 2 || n->n_inputs > 3 ||
      n->n_outputs != 1 || !is_f32(g, n->outputs[0]) || kn_node_attr(n, "block_size"))
    return false;
  int32_t qi = kn_pat_producer(g, n->inputs[0], "QuantizeLinear");
  if (qi < 0 || kn_pat_sole_reader(p, n->inputs[0]) != (int32_t)(n - g->nodes)) return false;
  const kn_node *q = &g->nodes[qi];
  if (q->n_inputs < 2 || q->n_inputs > 3 || !is_f32(g, q->inputs[0]) ||
      kn_node_attr(q, "block_size") || kn_node_attr(q, "output_dtype"))
    return false;
  double qs, qz, ds, dz;
  kn_dtype qst, qzt, dst, dzt;
  if (!q_param(g, q->inputs[1], false, &qst, &qs) ||
      !q_param(g, q->n_inputs > 2 ? q->inputs[2] : -1, true, &qzt, &qz) ||
      !q_param(g, n->inputs[1], false, &dst, &ds) ||
      !q_param(g, n->n_inputs > 2 ? n->inputs[2] : -1, true, &dzt, &dz) || qs != ds ||
      qz != dz || qzt != dzt)
    return false;
  e->op = qzt == KN_DTYPE_I8 ? KN_EW_QDQ_S8 : KN_EW_QDQ_U8;
  e->a = q->inputs[0];
  e->b = -1;
  e->c0 = (float)qs;
  e->c1 = (float)qz;
  e->also = qi;
  return true;
}

/* The instruction node n computes, when it is one the chain supports. */
static bool classify(const kn_pat *p, const kn_node *n, ew_ins *e) {
  const kn_graph *g = p->g;
  e->also = -1;
  if (!n->dead && classify_qdq(p, n, e)) return true;
  if (n->dead || !n->op || n->n_outputs != 1 || !is_f32(g, n->outputs[0]) ||
      n->n_inputs < 1 || !is_f32(g, n->inputs[0]))
    return false;
  e->a = n->inputs[0];
  e->b = -1;
  e->c0 = e->c1 = 0;
  if (!strcmp(n->domain, KN_DOMAIN)) {
    if (n->n_inputs != 1) return false;
    if (!strcmp(n->op_type, "HardSwish")) {
      e->op = KN_EW_HARDSWISH;
      return true;
    }
    if (strcmp(n->op_type, "Gelu")) return false;
    const kn_attr *a = kn_node_attr(n, "approximate");
    const char *s = a && a->type == KN_ATTR_STRING ? a->s : "none";
    if (!strcmp(s, "none")) e->op = KN_EW_GELU;
    else if (!strcmp(s, "tanh")) e->op = KN_EW_GELU_TANH;
    else return false;
    return true;
  }
  if (*n->domain && strcmp(n->domain, "ai.onnx")) return false;
  const char *t = n->op_type;
  if (!strcmp(t, "Pow")) {
    if (n->n_inputs != 2 || n->inputs[1] < 0) return false;
    double x;
    if (kn_pat_scalar(g, n->inputs[1], kn_pat_rank(g, n->inputs[0]), &x)) {
      e->op = KN_EW_POWC; /* Pow converts the exponent to the base's float32 */
      e->c0 = (float)x;
      return true;
    }
    if (!is_f32(g, n->inputs[1])) return false;
    e->op = KN_EW_POW;
    e->b = n->inputs[1];
    return true;
  }
  if (!strcmp(t, "LeakyRelu") || !strcmp(t, "HardSigmoid")) {
    if (n->n_inputs != 1) return false;
    bool leaky = t[0] == 'L';
    e->op = leaky ? KN_EW_LEAKYRELU : KN_EW_HARDSIGMOID;
    e->c0 = attr_float(n, "alpha", leaky ? 0.01f : 0.2f);
    e->c1 = leaky ? 0 : attr_float(n, "beta", 0.5f);
    return true;
  }
  if (!strcmp(t, "Clip")) {
    e->op = KN_EW_CLIP;
    if (n->opset < 11) {
      if (n->n_inputs != 1) return false;
      e->c0 = attr_float(n, "min", -FLT_MAX);
      e->c1 = attr_float(n, "max", FLT_MAX);
      return true;
    }
    return n->n_inputs <= 3 && clip_bound(g, n, 1, -INFINITY, &e->c0) &&
           clip_bound(g, n, 2, INFINITY, &e->c1);
  }
  for (size_t i = 0; i < sizeof ew_names / sizeof ew_names[0]; i++) {
    if (strcmp(t, ew_names[i].name)) continue;
    e->op = ew_names[i].op;
    if (!kn_ew_binary(e->op)) return n->n_inputs == 1;
    if (n->n_inputs != 2 || !is_f32(g, n->inputs[1])) return false;
    e->b = n->inputs[1];
    return true;
  }
  return false;
}

static bool same_shape(const kn_type *a, const kn_type *b) {
  if (a->kind != KN_KIND_TENSOR || b->kind != KN_KIND_TENSOR || a->rank < 0 ||
      a->rank != b->rank)
    return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

typedef struct ew_group {
  int32_t n;
  int32_t nodes[EW_MAX_NODES];
  ew_ins ins[EW_MAX_NODES];
} ew_group;

static int32_t group_pos(const ew_group *gr, int32_t node) {
  for (int32_t i = 0; i < gr->n; i++)
    if (gr->nodes[i] == node) return i;
  return -1;
}

/* A static shape smaller than out that broadcasts to it. */
static bool broadcasts_to(const kn_type *a, const kn_type *out) {
  if (a->kind != KN_KIND_TENSOR || out->kind != KN_KIND_TENSOR || a->rank < 0 ||
      out->rank < a->rank)
    return false;
  int64_t na = 1, no = 1;
  for (int32_t d = 0; d < out->rank; d++) {
    int64_t o = out->dims[d], x = d < out->rank - a->rank ? 1 : a->dims[d - (out->rank - a->rank)];
    if (o < 0 || x < 0 || (x != o && x != 1)) return false;
    na *= x;
    no *= o;
  }
  return na < no;
}

/* The IO model's call on recomputing node pr's result (type vt) at every
 * element of out inside the chain instead of storing it (see the header);
 * the decision is recorded. */
static bool recompute_pays(const kn_pass_ctx *ctx, const kn_graph *g, int32_t pr,
                           const kn_type *vt, const kn_type *out, const ew_ins *e) {
  if (g != ctx->m->graph) return false; /* the model predicts top-level steps */
  kn_machine fb;
  const kn_machine *mach = ctx->machine;
  if (!mach) {
    kn_machine_fallback(&fb);
    mach = &fb;
  }
  double nv = (double)kn_shape_numel(vt->rank, vt->dims);
  double no = (double)kn_shape_numel(out->rank, out->dims);
  double peak = mach->fp32_gflops[0] * 1e9;
  double extra_s = peak > 0 ? (no - nv) * kn_ew_cost(e->op) / peak : INFINITY;
  kn_io_step st;
  kn_io_predict(ctx->m, pr, mach, 1, &st);
  bool take = extra_s < st.predicted_s;
  if (ctx->decisions) {
    char line[512], sv[96], so[96];
    snprintf(line, sizeof line,
             "%s: %s of %s %s: recomputing it at each of %.0f elements (%s) costs %.2f us "
             "of arithmetic, storing it as its own step %.2f us",
             g->nodes[pr].name, g->nodes[pr].op_type,
             kn_shape_str(vt->rank, vt->dims, sv, sizeof sv),
             take ? "recomputed in the chain" : "stored", no,
             kn_shape_str(out->rank, out->dims, so, sizeof so), extra_s * 1e6,
             st.predicted_s * 1e6);
    /* out of memory only loses the line: the decision stands */
    (void)kn_lines_add_once(ctx->decisions, line);
  }
  return take;
}

/* Whether the producer of operand v may join the group (see the header). */
static bool can_absorb(const kn_pass_ctx *ctx, const kn_pat *p, const ew_group *gr,
                       const kn_type *out, int32_t v, ew_ins *e) {
  const kn_graph *g = p->g;
  if (v < 0 || v >= p->n) return false;
  const kn_value *val = &g->values[v];
  int32_t pr = val->producer;
  if (pr < 0 || pr >= g->n_nodes || val->is_output || group_pos(gr, pr) >= 0) return false;
  bool same = same_shape(&val->type, out);
  if ((!same && !broadcasts_to(&val->type, out)) || !classify(p, &g->nodes[pr], e))
    return false;
  int32_t reads = 0;
  for (int32_t i = 0; i < gr->n; i++) {
    reads += kn_pat_reads(&g->nodes[gr->nodes[i]], v);
    if (gr->ins[i].also >= 0) reads += kn_pat_reads(&g->nodes[gr->ins[i].also], v);
  }
  if (reads != p->uses[v]) return false;
  return same || recompute_pays(ctx, g, pr, &val->type, out, e);
}

/* Grows the group rooted at its first node to a fixed point (a diamond's
 * shared value joins once all its readers have). */
static void grow(const kn_pass_ctx *ctx, const kn_pat *p, ew_group *gr) {
  const kn_type *out = &p->g->values[p->g->nodes[gr->nodes[0]].outputs[0]].type;
  bool more = true;
  while (more && gr->n < EW_MAX_NODES) {
    more = false;
    for (int32_t i = 0; i < gr->n && gr->n < EW_MAX_NODES; i++) {
      int32_t ops[2] = {gr->ins[i].a, gr->ins[i].b};
      for (int32_t j = 0; j < 2 && gr->n < EW_MAX_NODES; j++) {
        ew_ins e;
        if (!can_absorb(ctx, p, gr, out, ops[j], &e)) continue;
        gr->nodes[gr->n] = p->g->values[ops[j]].producer;
        gr->ins[gr->n++] = e;
        more = true;
      }
    }
  }
}

/* Appends a float-list attribute to a new node (ir.h has no setter). */
static void sort_group(ew_group *gr) {
  for (int32_t i = 1; i < gr->n; i++)
    for (int32_t j = i; j > 0 && gr->nodes[j - 1] > gr->nodes[j]; j--) {
      int32_t t = gr->nodes[j];
      gr->nodes[j] = gr->nodes[j - 1];
      gr->nodes[j - 1] = t;
      ew_ins e = gr->ins[j];
      gr->ins[j] = gr->ins[j - 1];
      gr->ins[j - 1] = e;
    }
}

/* Replaces the group (sorted: nodes in topological order, root last). */
static kn_status replace(kn_pat *p, const ew_group *gr, kn_error *err) {
  kn_graph *g = p->g;
  int32_t ext[2 * EW_MAX_NODES], n_ext = 0;
  int64_t ops[EW_MAX_NODES], args[2 * EW_MAX_NODES];
  float consts[2 * EW_MAX_NODES];
  for (int32_t k = 0; k < gr->n; k++)
    for (int32_t j = 0; j < 2; j++) {
      int32_t v = j ? gr->ins[k].b : gr->ins[k].a;
      if (v < 0 || group_pos(gr, g->values[v].producer) >= 0) continue;
      bool seen = false;
      for (int32_t i = 0; i < n_ext && !seen; i++) seen = ext[i] == v;
      if (!seen) ext[n_ext++] = v;
    }
  for (int32_t k = 0; k < gr->n; k++) {
    ops[k] = gr->ins[k].op;
    consts[2 * k] = gr->ins[k].c0;
    consts[2 * k + 1] = gr->ins[k].c1;
    for (int32_t j = 0; j < 2; j++) {
      int32_t v = j ? gr->ins[k].b : gr->ins[k].a;
      int64_t idx = -1;
      if (v >= 0) {
        int32_t pos = group_pos(gr, g->values[v].producer);
        if (pos >= 0) idx = n_ext + pos;
        for (int32_t i = 0; i < n_ext && pos < 0; i++)
          if (ext[i] == v) idx = i;
      }
      args[2 * k + j] = idx;
    }
  }
  int32_t root = gr->nodes[gr->n - 1];
  int32_t out = g->nodes[root].outputs[0];
  char *name = kn_strdup(g->nodes[root].name);
  int32_t idx = name ? kn_graph_new_node(g, "ElementwiseChain", KN_DOMAIN, name, n_ext, ext,
                                         1, &out)
                     : -1;
  free(name);
  if (idx < 0) goto oom;
  kn_node *nn = &g->nodes[idx];
  if (g->nodes[root].covers && !(nn->covers = kn_strdup(g->nodes[root].covers))) goto oom;
  for (int32_t k = 0; k < gr->n; k++) {
    if (k + 1 < gr->n && !kn_node_add_covers(nn, &g->nodes[gr->nodes[k]])) goto oom;
    if (gr->ins[k].also >= 0 && !kn_node_add_covers(nn, &g->nodes[gr->ins[k].also])) goto oom;
  }
  if (!kn_node_set_ints(nn, "ops", ops, gr->n) ||
      !kn_node_set_ints(nn, "args", args, 2 * gr->n) ||
      !kn_node_set_floats(nn, "consts", consts, 2 * gr->n))
    goto oom;
  for (int32_t k = 0; k < gr->n; k++) {
    g->nodes[gr->nodes[k]].dead = true;
    if (gr->ins[k].also >= 0) g->nodes[gr->ins[k].also].dead = true;
  }
  return kn_pat_refresh(p, err);
oom:
  return kn_fail(err, KN_ERR_OOM, "out of memory fusing '%s' into an ElementwiseChain",
                 g->nodes[root].name);
}

kn_status kn_pass_ewchain(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  ew_group gr;
  for (int32_t i = g->n_nodes - 1; i >= 0 && !st; i--) {
    if (!classify(&p, &g->nodes[i], &gr.ins[0])) continue;
    gr.nodes[0] = i;
    gr.n = 1;
    grow(ctx, &p, &gr);
    /* a lone Q/DQ pair is two steps made one */
    if (gr.n < 2 && gr.ins[0].also < 0) continue;
    sort_group(&gr);
    st = replace(&p, &gr, ctx->err);
    *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
