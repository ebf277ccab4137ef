/*
 * Channels-last regions: convolutions, pools and what runs between them
 * switch to [N, H, W, C] tensors, with Transposes only at the region's edges.
 *
 * Why: kiln's convolution kernels are fastest channels-last
 * (src/kernels/conv/conv.h): an output pixel's channels are one contiguous
 * row, so a convolution is a GEMM with pixels as rows and output channels as
 * columns whose A rows are read in place (no im2col), a depthwise kernel
 * vectorises over channels, and a thin 7x7 map is 49 rows instead of a
 * 49-column tail.  ONNX Runtime (NCHWc), oneDNN (nChw16c) and XNNPACK (NHWC)
 * make the same choice.
 *
 * One sweep in topological order, on float32 4-D tensors with known rank:
 *  - every 2-D Conv / FusedConv with constant 4-D weights becomes an
 *    NhwcFusedConv (src/ops/layout.c), unless its best kernel is
 *    channels-first (kn_conv_prefers_nchw); an input not yet channels-last
 *    gets a Transpose (perm 0,2,3,1) in front, made once per value;
 *  - MaxPool (without Indices), AveragePool, GlobalAveragePool and
 *    GlobalMaxPool whose input is already channels-last become their Nhwc
 *    forms;
 *  - Pad (pads constant, no axes input) of a channels-last input, its pads
 *    permuted;
 *  - an inference BatchNormalization that fold_bn could not fold (after a
 *    Concat or a pool, before a conv as in pre-activation ResNets and
 *    DenseNet) of a channels-last input becomes Mul and Add by [1, 1, 1, C]
 *    constants;
 *  - per-tensor QuantizeLinear and DequantizeLinear of a channels-last input
 *    join it as they are (elementwise, any dtype);
 *  - elementwise ops (unary, binary with broadcasting, Sum/Mean/Max/Min,
 *    PRelu, ElementwiseChain) and Concat on the channel axis join the region
 *    when at least one input is channels-last and every other input is a
 *    4-D tensor (given a Transpose), a constant (stored again permuted, after
 *    padding its shape to rank 4 as broadcasting does) or a scalar; their
 *    broadcasting is unchanged because all operands are permuted alike;
 *  - any other reader of a value the region now makes (Flatten, Reshape,
 *    Softmax, a graph output, a subgraph) reads it through one Transpose
 *    back (perm 0,3,1,2), made once per value.
 * A reorder of a map with H = W = 1 ([N, C, 1, 1], global pooling's result)
 * moves no element: it is a Reshape (an alias, no copy) instead.
 * The rest of the optimizer then cancels Transposes that meet (transpose
 * pass) and drops unused ones (dce).  The step names are the original node
 * names, so `kiln inspect` shows which steps run channels-last (their op
 * is Nhwc<Op>, their tactic *_nhwc) and where the reorders are.
 */
#include "pattern.h"

#include "tactics/conv/conv_fast.h"
#include "ops/layout.h"

typedef struct cl_state {
  kn_graph *g;
  kn_error *err;
  int32_t nv0;     /* values before the pass: the maps below cover them */
  int32_t *twin;   /* channels-last twin of a value, or -1 */
  bool *killed;    /* the value's NCHW producer became channels-last */
  int32_t *adapted; /* permuted copy of a constant, or -1 */
} cl_state;

static const char *const unary_ops[] = {
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Clip", "Elu",
    "Selu", "Celu", "Softplus", "Softsign", "Exp", "Log", "Abs", "Neg", "Sqrt",
    "Reciprocal", "Erf", "Floor", "Ceil", "Round", "Sign", "Gelu", "Mish",
    "ThresholdedRelu", "Identity", NULL};
static const char *const binary_ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min",
                                         "Sum", "Mean", "PRelu", NULL};

static bool in_list(const char *const *l, const char *s) {
  for (; *l; l++)
    if (!strcmp(*l, s)) return true;
  return false;
}

static bool is_f32_4d(const kn_graph *g, int32_t v) {
  return v >= 0 && g->values[v].type.rank == 4 && g->values[v].type.dtype == KN_DTYPE_F32;
}

static bool is_const(const kn_graph *g, int32_t v) {
  return v >= 0 && g->values[v].constant && g->values[v].constant->data;
}

static kn_status oom(cl_state *s) {
  return kn_fail(s->err, KN_ERR_OOM, "out of memory making channels-last regions");
}

/* A constant of `dtype` and shape dims (rank dims) holding `data`; -1 on
 * OOM. */
static int32_t add_const(cl_state *s, const char *hint, kn_dtype dtype, int32_t rank,
                         const int64_t *dims, const void *data) {
  kn_tensor t;
  kn_error e;
  if (kn_tensor_alloc(&t, dtype, rank, dims, &e)) return -1;
  memcpy(t.data, data, t.nbytes);
  int32_t r = kn_graph_add_constant(s->g, hint, &t);
  kn_tensor_release(&t);
  return r;
}

/* A Transpose node from value `from` to a fresh value (or to `to` >= 0).
 * `plane`: the NCHW value (from or to) has H = W = 1, so the reorder
 * moves no element and is a Reshape instead (an alias step, no copy). */
static int32_t add_transpose(cl_state *s, int32_t from, int32_t to, bool to_nhwc) {
  kn_graph *g = s->g;
  int32_t nchw = to_nhwc ? from : to;
  const int64_t *d = g->values[nchw].type.dims;
  bool plane = d[2] == 1 && d[3] == 1;
  char hint[256];
  snprintf(hint, sizeof hint, "%s%s", g->values[from >= 0 ? from : to].name,
           to_nhwc ? "_nhwc" : "_nchw");
  char *name = kn_graph_unique_name(g, hint);
  if (!name) return -1;
  if (to < 0) to = kn_graph_add_fresh_value(g, name);
  int32_t ni = -1;
  if (plane && to >= 0) {
    /* [N, C, 1, 1] <-> [N, 1, 1, C]: dim 0 copied (0), C inferred (-1) */
    static const int64_t s_nhwc[4] = {0, 1, 1, -1}, s_nchw[4] = {0, -1, 1, 1};
    snprintf(hint, sizeof hint, "%s_shape", name);
    int32_t sv = add_const(s, hint, KN_DTYPE_I64, 1, (int64_t[]){4}, to_nhwc ? s_nhwc : s_nchw);
    int32_t in[2] = {from, sv};
    ni = sv >= 0 ? kn_graph_new_node(g, "Reshape", "", name, 2, in, 1, &to) : -1;
    free(name);
    return ni < 0 ? -1 : to;
  }
  ni = to >= 0 ? kn_graph_new_node(g, "Transpose", "", name, 1, &from, 1, &to) : -1;
  free(name);
  static const int64_t p_nhwc[4] = {0, 2, 3, 1}, p_nchw[4] = {0, 3, 1, 2};
  if (ni < 0 || !kn_node_set_ints(&g->nodes[ni], "perm", to_nhwc ? p_nhwc : p_nchw, 4))
    return -1;
  return to;
}

/* The channels-last form of 4-D value v (made once). */
static int32_t get_nhwc(cl_state *s, int32_t v) {
  if (s->twin[v] >= 0) return s->twin[v];
  int32_t t = add_transpose(s, v, -1, true);
  if (t >= 0) s->twin[v] = t;
  return t;
}

/* Constant v stored again for channels-last readers: its shape padded to
 * rank 4 with leading ones (as broadcasting aligns it), then permuted
 * (0, 2, 3, 1).  Scalars and one-element constants are returned as is. */
static int32_t adapt_const(cl_state *s, int32_t v) {
  kn_graph *g = s->g;
  const kn_tensor *c = g->values[v].constant;
  if (c->rank > 4) return -2;
  if (kn_tensor_numel(c) <= 1) return v;
  if (s->adapted[v] >= 0) return s->adapted[v];
  int64_t d[4] = {1, 1, 1, 1};
  for (int32_t i = 0; i < c->rank; i++) d[4 - c->rank + i] = c->dims[i];
  int64_t nd[4];
  kn_dims_to_nhwc(d, nd);
  kn_tensor t;
  kn_error e;
  if (kn_tensor_alloc(&t, c->dtype, 4, nd, &e)) return -1;
  kn_layout_permute(d, kn_dtype_size(c->dtype), c->data, t.data, false);
  char hint[256];
  snprintf(hint, sizeof hint, "%s_nhwc", g->values[v].name);
  int32_t a = kn_graph_add_constant(g, hint, &t);
  kn_tensor_release(&t);
  if (a < 0) return -1;
  s->adapted[v] = a;
  return a;
}

typedef enum cl_kind {
  CL_OTHER,
  CL_CONV,
  CL_POOL,
  CL_ELTWISE,
  CL_CONCAT,
  CL_PAD,
  CL_BN,
  CL_QDQ
} cl_kind;

/* A QuantizeLinear or DequantizeLinear with one scale and at most one zero
 * point (per tensor): elementwise, so it runs on channels-last data as it
 * is.  The Q/DQ pairs ONNX Runtime's quantizer leaves around Add and the
 * pools would otherwise cut the region into Transposes (38 on ResNet-50). */
static bool per_tensor_qdq(const kn_graph *g, const kn_node *n) {
  if (n->n_inputs < 2 || n->n_outputs != 1) return false;
  const kn_attr *bs = kn_node_attr(n, "block_size");
  if (bs && bs->i) return false;
  for (int32_t k = 1; k < n->n_inputs && k < 3; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 && k == 2) continue;
    const kn_tensor *c = v >= 0 ? g->values[v].constant : NULL;
    if (!c || c->rank > 1 || kn_tensor_numel(c) != 1) return false;
  }
  return n->n_inputs <= 3;
}

/* An inference BatchNormalization of a 4-D float32 input with constant
 * float32 [C] parameters and only its first output: its per-channel scale
 * gamma / sqrt(var + eps) and shift beta - mean * scale into s, t (C
 * floats each, malloc'd); false when it is not such a node. */
static bool bn_affine(const kn_graph *g, const kn_node *n, float **s, float **t) {
  double eps;
  if (!is_f32_4d(g, n->inputs[0]) || !kn_pat_bn_inference(n, &eps)) return false;
  int64_t c = g->values[n->inputs[0]].type.dims[1];
  const float *p[4];
  for (int32_t i = 0; i < 4; i++) {
    int32_t v = n->inputs[i + 1];
    if (!is_const(g, v)) return false;
    const kn_tensor *k = g->values[v].constant;
    if (k->dtype != KN_DTYPE_F32 || k->rank != 1 || c < 1 || k->dims[0] != c) return false;
    p[i] = k->data;
  }
  if (!s) return true;
  *s = kn_malloc((size_t)c * sizeof(float));
  *t = kn_malloc((size_t)c * sizeof(float));
  if (!*s || !*t) {
    free(*s);
    free(*t);
    *s = *t = NULL;
    return false;
  }
  for (int64_t i = 0; i < c; i++) {
    double shift;
    (*s)[i] = (float)kn_pat_bn_scale(p, i, eps, &shift);
    (*t)[i] = (float)shift;
  }
  return true;
}

/* BatchNormalization node i of a channels-last input: Mul by its scale,
 * Add its shift, both [1, 1, 1, C] (the ewchain pass merges them with
 * what follows). */
static kn_status convert_bn(cl_state *s, int32_t i) {
  kn_graph *g = s->g;
  float *sc = NULL, *sh = NULL;
  if (!bn_affine(g, &g->nodes[i], &sc, &sh)) return oom(s);
  int32_t x = g->nodes[i].inputs[0], y = g->nodes[i].outputs[0];
  int64_t c = g->values[x].type.dims[1];
  char hint[256];
  snprintf(hint, sizeof hint, "%s_scale", g->nodes[i].name);
  int32_t kv = add_const(s, hint, KN_DTYPE_F32, 4, (int64_t[]){1, 1, 1, c}, sc);
  snprintf(hint, sizeof hint, "%s_shift", g->nodes[i].name);
  int32_t bv = kv >= 0 ? add_const(s, hint, KN_DTYPE_F32, 4, (int64_t[]){1, 1, 1, c}, sh) : -1;
  free(sc);
  free(sh);
  snprintf(hint, sizeof hint, "%s_nhwc", g->values[y].name);
  int32_t mid = bv >= 0 ? kn_graph_add_fresh_value(g, hint) : -1;
  int32_t out = mid >= 0 ? kn_graph_add_fresh_value(g, hint) : -1;
  if (out < 0) return oom(s);
  char *name = kn_strdup(g->nodes[i].name);
  snprintf(hint, sizeof hint, "%s_shift", g->nodes[i].name);
  char *name2 = kn_graph_unique_name(g, hint);
  int32_t in1[2] = {s->twin[x], kv}, in2[2] = {mid, bv};
  int32_t m1 = name && name2 ? kn_graph_new_node(g, "Mul", "", name, 2, in1, 1, &mid) : -1;
  int32_t m2 = m1 >= 0 ? kn_graph_new_node(g, "Add", "", name2, 2, in2, 1, &out) : -1;
  bool ok = m2 >= 0 && kn_node_add_covers(&g->nodes[m1], &g->nodes[i]);
  free(name);
  free(name2);
  if (!ok) return oom(s);
  g->nodes[i].dead = true;
  s->twin[y] = out;
  s->killed[y] = true;
  return KN_OK;
}

static cl_kind classify(const kn_graph *g, const kn_node *n) {
  bool onnx = !n->domain[0], kiln = !strcmp(n->domain, KN_DOMAIN);
  if (n->n_inputs < 1 || n->n_outputs < 1) return CL_OTHER;
  int32_t x = n->inputs[0];
  if ((onnx && !strcmp(n->op_type, "Conv")) || (kiln && !strcmp(n->op_type, "FusedConv"))) {
    if (!is_f32_4d(g, x) || n->n_inputs < 2 || !is_const(g, n->inputs[1]) ||
        g->values[n->inputs[1]].constant->rank != 4 || !is_f32_4d(g, n->outputs[0]))
      return CL_OTHER;
    return CL_CONV;
  }
  if (onnx && (!strcmp(n->op_type, "MaxPool") || !strcmp(n->op_type, "AveragePool") ||
               !strcmp(n->op_type, "GlobalAveragePool") ||
               !strcmp(n->op_type, "GlobalMaxPool"))) {
    if (!is_f32_4d(g, x) || (n->n_outputs > 1 && n->outputs[1] >= 0)) return CL_OTHER;
    return CL_POOL;
  }
  if ((onnx || kiln) && (in_list(unary_ops, n->op_type) || in_list(binary_ops, n->op_type) ||
                         (kiln && !strcmp(n->op_type, "ElementwiseChain"))))
    return n->n_outputs == 1 && g->values[n->outputs[0]].type.rank == 4 ? CL_ELTWISE
                                                                        : CL_OTHER;
  if (onnx && !strcmp(n->op_type, "BatchNormalization") && bn_affine(g, n, NULL, NULL))
    return CL_BN;
  if (onnx && (!strcmp(n->op_type, "QuantizeLinear") || !strcmp(n->op_type, "DequantizeLinear")) &&
      per_tensor_qdq(g, n))
    return g->values[n->outputs[0]].type.rank == 4 ? CL_QDQ : CL_OTHER;
  int64_t pads[8];
  if (onnx && !strcmp(n->op_type, "Pad") && is_f32_4d(g, x) && kn_pat_pad_pads(g, n, pads))
    return CL_PAD;
  if (onnx && !strcmp(n->op_type, "Concat") && g->values[n->outputs[0]].type.rank == 4) {
    const kn_attr *a = kn_node_attr(n, "axis");
    if (a && (a->i == 1 || a->i == -3)) return CL_CONCAT;
  }
  return CL_OTHER;
}

/* Whether an elementwise node or Concat can read channels-last inputs:
 * one already is, and every other is 4-D, a constant or a scalar. */
static bool joins_region(const cl_state *s, const kn_node *n, cl_kind k) {
  const kn_graph *g = s->g;
  bool any = false;
  for (int32_t i = 0; i < n->n_inputs; i++) {
    int32_t v = n->inputs[i];
    if (v < 0) continue;
    if (v < s->nv0 && s->twin[v] >= 0 && g->values[v].type.rank == 4) {
      any = true;
      continue;
    }
    if (g->values[v].type.rank == 4) continue;
    if (k == CL_CONCAT) return false;
    if (is_const(g, v) && g->values[v].constant->rank <= 4) continue;
    if (g->values[v].type.rank == 0) continue;
    return false;
  }
  return any;
}

/* Replace node i by its channels-last form `op` (domain `domain`);
 * nhwc_mask: inputs that are 4-D activations to read channels-last (the
 * others: constants adapted when `adapt`, else read as they are). */
static kn_status convert(cl_state *s, int32_t i, const char *op, const char *domain,
                         uint32_t nhwc_mask, bool adapt, int32_t *new_index) {
  kn_graph *g = s->g;
  int32_t nin = g->nodes[i].n_inputs, nout = g->nodes[i].n_outputs;
  int32_t *in = kn_malloc((size_t)(nin + nout) * sizeof *in), *out = in + nin;
  if (!in) return oom(s);
  for (int32_t k = 0; k < nin; k++) {
    int32_t v = g->nodes[i].inputs[k];
    in[k] = v;
    if (v < 0) continue;
    if (nhwc_mask >> k & 1u) {
      if (is_const(g, v)) {
        in[k] = adapt_const(s, v);
      } else if (g->values[v].type.rank == 4) {
        in[k] = get_nhwc(s, v);
      }
    } else if (adapt && is_const(g, v)) {
      in[k] = adapt_const(s, v);
    }
    if (in[k] < 0) {
      free(in);
      return oom(s);
    }
  }
  for (int32_t k = 0; k < nout; k++) {
    int32_t v = g->nodes[i].outputs[k];
    out[k] = -1;
    if (v < 0) continue;
    char hint[256];
    snprintf(hint, sizeof hint, "%s_nhwc", g->values[v].name);
    out[k] = kn_graph_add_fresh_value(g, hint);
    if (out[k] < 0) {
      free(in);
      return oom(s);
    }
    s->twin[v] = out[k];
    s->killed[v] = true;
  }
  char *name = kn_strdup(g->nodes[i].name);
  int32_t ni = name ? kn_graph_new_node(g, op, domain, name, nin, in, nout, out) : -1;
  free(name);
  free(in);
  if (ni < 0 || !kn_node_copy_attrs(&g->nodes[ni], &g->nodes[i])) return oom(s);
  /* same name: it covers what the node did, nothing more */
  if (g->nodes[i].covers && !(g->nodes[ni].covers = kn_strdup(g->nodes[i].covers)))
    return oom(s);
  g->nodes[i].dead = true;
  if (new_index) *new_index = ni;
  return KN_OK;
}

kn_status kn_pass_channels_last(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  cl_state s = {.g = g, .err = ctx->err, .nv0 = g->n_values};
  size_t nv = (size_t)(s.nv0 > 0 ? s.nv0 : 1);
  s.twin = kn_malloc(nv * sizeof *s.twin);
  s.adapted = kn_malloc(nv * sizeof *s.adapted);
  s.killed = kn_calloc(nv, sizeof *s.killed);
  kn_status st = KN_OK;
  if (!s.twin || !s.adapted || !s.killed) {
    st = oom(&s);
    goto done;
  }
  for (int32_t v = 0; v < s.nv0; v++) s.twin[v] = s.adapted[v] = -1;
  int32_t n0 = g->n_nodes;
  bool any = false;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    cl_kind k = classify(g, n);
    if (k == CL_CONV && kn_conv_prefers_nchw(g, n)) continue;
    if (k == CL_CONV) {
      /* the residual Z (FusedConv input 3) must be 4-D or a constant */
      if (n->n_inputs > 3 && n->inputs[3] >= 0 && !is_const(g, n->inputs[3]) &&
          g->values[n->inputs[3]].type.rank != 4)
        continue;
      st = convert(&s, i, "NhwcFusedConv", KN_DOMAIN, 1u | 8u, false, NULL);
      any = true;
    } else if (k == CL_POOL) {
      if (s.twin[n->inputs[0]] < 0) continue;
      const char *op = kn_nhwc_op_for("", n->op_type, NULL);
      st = convert(&s, i, op, KN_DOMAIN, 1u, false, NULL);
      any = true;
    } else if (k == CL_BN) {
      if (s.twin[n->inputs[0]] < 0) continue;
      st = convert_bn(&s, i);
      any = true;
    } else if (k == CL_PAD) {
      if (s.twin[n->inputs[0]] < 0) continue;
      /* pads [n0, c0, h0, w0, n1, c1, h1, w1] -> [n0, h0, w0, c0, n1, h1, w1, c1] */
      int64_t p[8], q[8];
      if (!kn_pat_pad_pads(g, n, p)) continue;
      kn_dims_to_nhwc(p, q);
      kn_dims_to_nhwc(p + 4, q + 4);
      bool attr = n->opset < 11;
      int32_t pv = -1;
      if (!attr) {
        char hint[256];
        snprintf(hint, sizeof hint, "%s_nhwc", g->values[n->inputs[1]].name);
        if ((pv = add_const(&s, hint, KN_DTYPE_I64, 1, (int64_t[]){8}, q)) < 0) {
          st = oom(&s);
          break;
        }
      }
      int32_t ni = -1;
      st = convert(&s, i, "Pad", "", 1u, false, &ni);
      if (!st && attr && !kn_node_set_ints(&g->nodes[ni], "pads", q, 8)) st = oom(&s);
      if (!st && !attr) g->nodes[ni].inputs[1] = pv;
      any = true;
    } else if (k == CL_QDQ && joins_region(&s, n, CL_ELTWISE)) {
      /* x channels-last; the scalar scale and zero point as they are */
      st = convert(&s, i, g->nodes[i].op_type, g->nodes[i].domain, 1u, false, NULL);
      any = true;
    } else if ((k == CL_ELTWISE || k == CL_CONCAT) && joins_region(&s, n, k)) {
      uint32_t mask = 0;
      for (int32_t j = 0; j < n->n_inputs && j < 32; j++)
        if (n->inputs[j] >= 0 && !is_const(g, n->inputs[j]) &&
            g->values[n->inputs[j]].type.rank == 4)
          mask |= 1u << j;
      int32_t ni = -1;
      st = convert(&s, i, g->nodes[i].op_type, g->nodes[i].domain, mask, true, &ni);
      if (!st && k == CL_CONCAT && !kn_node_set_int(&g->nodes[ni], "axis", 3)) st = oom(&s);
      any = true;
    }
  }
  if (st || !any) goto done;
  /* Readers left in NCHW (other ops, graph outputs, subgraphs) get one
   * Transpose back per value. */
  int32_t *uses = kn_malloc((size_t)g->n_values * sizeof *uses);
  if (!uses) {
    st = oom(&s);
    goto done;
  }
  kn_graph_use_counts(g, uses);
  for (int32_t v = 0; v < s.nv0 && !st; v++)
    if (s.killed[v] && uses[v] > 0 && add_transpose(&s, s.twin[v], v, false) < 0)
      st = oom(&s);
  free(uses);
  *changed = true;
done:
  free(s.twin);
  free(s.adapted);
  free(s.killed);
  return st;
}
