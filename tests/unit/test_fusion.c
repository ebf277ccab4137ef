/* Weight folding (fold_bn) and epilogue fusion (fuse_act) on small
 * hand-built graphs: where each fires, where it must not, and that the
 * graph's results stay the same up to float rounding.  When the exported
 * real models are cached (~/.cache/kiln/models), their op histograms after
 * the whole optimizer are printed and checked for the fusions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "passes/pass.h"

/* ---- building graphs ---------------------------------------------------- */

static kn_ir_model *model_new(int64_t opset) {
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  assert_non_null(m);
  m->graph = kn_graph_new(NULL);
  m->opsets = kn_calloc(1, sizeof *m->opsets);
  assert_non_null(m->graph);
  assert_non_null(m->opsets);
  m->n_opsets = 1;
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = opset;
  m->label = kn_strdup("test");
  return m;
}

static void append(int32_t **arr, int32_t *n, int32_t v) {
  *arr = kn_realloc(*arr, ((size_t)*n + 1) * sizeof **arr);
  assert_non_null(*arr);
  (*arr)[(*n)++] = v;
}

static int32_t input(kn_graph *g, const char *name, int32_t rank, const int64_t *dims) {
  int32_t v = kn_graph_add_value(g, name);
  assert_true(v >= 0);
  kn_value *val = &g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = rank;
  if (rank > 0) memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  append(&g->inputs, &g->n_inputs, v);
  return v;
}

static void output(kn_graph *g, int32_t v) {
  g->values[v].is_output = true;
  append(&g->outputs, &g->n_outputs, v);
}

/* Deterministic values in about [-1, 1] (+ offset), seeded. */
static float pseudo(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int32_t const_rand(kn_graph *g, int32_t rank, const int64_t *dims, uint32_t seed,
                          float offset) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL), KN_OK);
  float *d = t.data;
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++) d[i] = pseudo(&seed) + offset;
  int32_t v = kn_graph_add_constant(g, "c", &t);
  assert_true(v >= 0);
  return v;
}

static int32_t const_scalar(kn_graph *g, float x) {
  int64_t one = 1;
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 0, &one, NULL), KN_OK);
  ((float *)t.data)[0] = x;
  int32_t v = kn_graph_add_constant(g, "s", &t);
  assert_true(v >= 0);
  return v;
}

/* A Constant node holding a float scalar (as exporters write Clip bounds). */
static int32_t constant_node(kn_graph *g, float x) {
  int32_t o = kn_graph_add_fresh_value(g, "const");
  assert_true(o >= 0);
  assert_true(kn_graph_new_node(g, "Constant", "", "Constant", 0, NULL, 1, &o) >= 0);
  kn_node *n = &g->nodes[g->n_nodes - 1];
  n->attrs = kn_calloc(1, sizeof *n->attrs);
  assert_non_null(n->attrs);
  n->n_attrs = 1;
  n->attrs[0].name = kn_strdup("value");
  n->attrs[0].type = KN_ATTR_TENSOR;
  int64_t one = 1;
  assert_int_equal(kn_tensor_alloc(&n->attrs[0].t, KN_DTYPE_F32, 0, &one, NULL), KN_OK);
  ((float *)n->attrs[0].t.data)[0] = x;
  return o;
}

static int32_t node(kn_graph *g, const char *op, int32_t n_in, const int32_t *in) {
  int32_t o = kn_graph_add_fresh_value(g, op);
  assert_true(o >= 0);
  assert_true(kn_graph_new_node(g, op, "", op, n_in, in, 1, &o) >= 0);
  return o;
}

static kn_node *last(kn_graph *g) { return &g->nodes[g->n_nodes - 1]; }

static void prepare(kn_ir_model *m) {
  kn_error err;
  kn_status st = kn_graph_finish(m->graph, m->label, &err);
  if (!st) st = kn_ops_prepare(m, &err);
  if (st) fail_msg("%s", err.msg);
}

/* ---- running passes and graphs ------------------------------------------ */

static bool run_pass(kn_ir_model *m, kn_pass_fn fn) {
  kn_error err;
  kn_pass_ctx ctx = {.m = m, .err = &err, .fold_max_bytes = (int64_t)16 << 20};
  bool changed = false;
  kn_status st = fn(&ctx, m->graph, &changed);
  if (!st && changed) {
    st = kn_graph_compact(m->graph, m->label, &err);
    if (!st) st = kn_ops_prepare(m, &err);
  }
  if (st) fail_msg("%s", err.msg);
  return changed;
}

static int32_t count_op(const kn_graph *g, const char *op) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && (!op || !strcmp(g->nodes[i].op_type, op))) c++;
  return c;
}

static const kn_node *find_op(const kn_graph *g, const char *op) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, op)) return &g->nodes[i];
  return NULL;
}

typedef struct results {
  int32_t n;
  kn_slot *outs;
} results;

static results run_graph(kn_ir_model *m) {
  kn_graph *g = m->graph;
  kn_slot *in = kn_calloc((size_t)g->n_inputs + 1, sizeof *in);
  const kn_slot **pin = kn_calloc((size_t)g->n_inputs + 1, sizeof *pin);
  results r = {g->n_outputs, kn_calloc((size_t)g->n_outputs + 1, sizeof(kn_slot))};
  assert_non_null(in);
  assert_non_null(pin);
  assert_non_null(r.outs);
  uint32_t seed = 7;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->constant) continue;
    in[i].kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&in[i].t, v->type.dtype, v->type.rank, v->type.dims, NULL),
                     KN_OK);
    float *d = in[i].t.data;
    for (int64_t k = 0; k < kn_tensor_numel(&in[i].t); k++) d[k] = 2.0f * pseudo(&seed);
    pin[i] = &in[i];
  }
  kn_mem_budget mem = {UINT64_MAX, 0};
  kn_error err;
  if (kn_exec_graph(m, g, NULL, pin, r.outs, &mem, &err)) fail_msg("%s", err.msg);
  for (int32_t i = 0; i < g->n_inputs; i++) kn_slot_release(&in[i]);
  free(in);
  free(pin);
  return r;
}

static void results_free(results *r) {
  for (int32_t i = 0; i < r->n; i++) kn_slot_release(&r->outs[i]);
  free(r->outs);
}

/* Equal up to float rounding: |a - b| <= 1e-5 + 1e-4 |b|. */
static void assert_close_results(results *a, results *b) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(x->dtype, KN_DTYPE_F32);
    assert_int_equal(y->dtype, KN_DTYPE_F32);
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    const float *p = x->data, *q = y->data;
    for (int64_t k = 0; k < kn_tensor_numel(x); k++)
      if (!(fabsf(p[k] - q[k]) <= 1e-5f + 1e-4f * fabsf(q[k])))
        fail_msg("output %d element %lld: %.9g before, %.9g after", (int)i, (long long)k,
                 (double)p[k], (double)q[k]);
  }
  results_free(a);
  results_free(b);
}

/* Runs the passes (then dce) and checks the results; returns whether the
 * first changed the graph. */
static bool passes_keep_results(kn_ir_model *m, kn_pass_fn first, kn_pass_fn second) {
  results before = run_graph(m);
  bool changed = run_pass(m, first);
  if (second) run_pass(m, second);
  run_pass(m, kn_pass_dce);
  results after = run_graph(m);
  assert_close_results(&before, &after);
  return changed;
}

static void conv_attrs(kn_node *n, int64_t pad, int64_t group) {
  assert_true(kn_node_set_ints(n, "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (group != 1) assert_true(kn_node_set_int(n, "group", group));
}

static const int64_t D1[] = {1, 3, 6, 6};

/* ---- fold_bn ------------------------------------------------------------ */

static void test_fold_bn_conv(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, D1);
  int32_t w = const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 1, 0);
  int32_t b = const_rand(g, 1, (int64_t[]){4}, 2, 0);
  int32_t y = node(g, "Conv", 3, (int32_t[]){x, w, b});
  conv_attrs(last(g), 1, 1);
  int64_t d4 = 4;
  y = node(g, "BatchNormalization", 5,
           (int32_t[]){y, const_rand(g, 1, &d4, 3, 0), const_rand(g, 1, &d4, 4, 0),
                       const_rand(g, 1, &d4, 5, 0), const_rand(g, 1, &d4, 6, 2.0f)});
  assert_true(kn_node_set_float(last(g), "epsilon", 1e-3f));
  y = node(g, "Mul", 2, (int32_t[]){const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 7, 0), y});
  y = node(g, "Add", 2, (int32_t[]){y, const_rand(g, 3, (int64_t[]){4, 1, 1}, 8, 0)});
  y = node(g, "Sub", 2, (int32_t[]){y, const_scalar(g, 0.25f)});
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(count_op(g, NULL), 1);
  assert_int_equal(count_op(g, "Conv"), 1);
  assert_non_null(g->nodes[0].covers);
  assert_non_null(strstr(g->nodes[0].covers, "BatchNormalization"));
  kn_ir_model_free(m);
}

static void test_fold_bn_conv_transpose_group(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, (int64_t[]){2, 4, 5, 5});
  /* C = 4, group 2, M/g = 3: 6 output channels */
  int32_t w = const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 11, 0);
  int32_t y = node(g, "ConvTranspose", 2, (int32_t[]){x, w});
  assert_true(kn_node_set_int(last(g), "group", 2));
  assert_true(kn_node_set_ints(last(g), "strides", (int64_t[]){2, 2}, 2));
  y = node(g, "Mul", 2, (int32_t[]){y, const_rand(g, 4, (int64_t[]){1, 6, 1, 1}, 12, 0)});
  y = node(g, "Add", 2, (int32_t[]){y, const_rand(g, 3, (int64_t[]){6, 1, 1}, 13, 0)});
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(count_op(g, NULL), 1);
  assert_int_equal(g->nodes[0].n_inputs, 3); /* a bias was added */
  kn_ir_model_free(m);
}

static void test_fold_bn_gemm_matmul(void **state) {
  (void)state;
  /* Gemm with transB, beta and a [1, N] C; then BN over columns and Mul */
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t a = input(g, "a", 2, (int64_t[]){3, 5});
  int32_t y = node(g, "Gemm", 3,
                   (int32_t[]){a, const_rand(g, 2, (int64_t[]){4, 5}, 21, 0),
                               const_rand(g, 2, (int64_t[]){1, 4}, 22, 0)});
  assert_true(kn_node_set_int(last(g), "transB", 1));
  assert_true(kn_node_set_float(last(g), "beta", 0.5f));
  assert_true(kn_node_set_float(last(g), "alpha", 1.5f));
  int64_t d4 = 4;
  y = node(g, "BatchNormalization", 5,
           (int32_t[]){y, const_rand(g, 1, &d4, 23, 0), const_rand(g, 1, &d4, 24, 0),
                       const_rand(g, 1, &d4, 25, 0), const_rand(g, 1, &d4, 26, 2.0f)});
  y = node(g, "Mul", 2, (int32_t[]){y, const_rand(g, 1, &d4, 27, 0)});
  output(g, y);
  /* 2-D MatMul + BN: becomes a Gemm */
  int32_t a2 = input(g, "a2", 2, (int64_t[]){3, 5});
  int32_t y2 = node(g, "MatMul", 2, (int32_t[]){a2, const_rand(g, 2, (int64_t[]){5, 4}, 28, 0)});
  y2 = node(g, "BatchNormalization", 5,
            (int32_t[]){y2, const_rand(g, 1, &d4, 29, 0), const_rand(g, 1, &d4, 30, 0),
                        const_rand(g, 1, &d4, 31, 0), const_rand(g, 1, &d4, 32, 2.0f)});
  output(g, y2);
  /* 3-D MatMul: the Mul folds, the Add (needing a bias) stays */
  int32_t a3 = input(g, "a3", 3, (int64_t[]){2, 3, 5});
  int32_t y3 = node(g, "MatMul", 2, (int32_t[]){a3, const_rand(g, 2, (int64_t[]){5, 4}, 33, 0)});
  y3 = node(g, "Mul", 2, (int32_t[]){y3, const_rand(g, 3, (int64_t[]){1, 1, 4}, 34, 0)});
  y3 = node(g, "Add", 2, (int32_t[]){y3, const_rand(g, 1, &d4, 35, 0)});
  output(g, y3);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(count_op(g, "Gemm"), 2);
  assert_int_equal(count_op(g, "MatMul"), 1);
  assert_int_equal(count_op(g, "BatchNormalization"), 0);
  assert_int_equal(count_op(g, "Mul"), 0);
  assert_int_equal(count_op(g, "Add"), 1);
  kn_ir_model_free(m);
}

static void test_fold_bn_must_not(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, D1);
  int64_t d4 = 4;
  /* conv output read twice */
  int32_t c1 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 41, 0)});
  int32_t y1 = node(g, "Mul", 2, (int32_t[]){c1, const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 42, 0)});
  output(g, y1);
  output(g, node(g, "Relu", 1, &c1));
  /* a Mul varying along a spatial axis */
  int32_t c2 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 43, 0)});
  output(g, node(g, "Mul", 2, (int32_t[]){c2, const_rand(g, 4, (int64_t[]){1, 1, 1, 6}, 44, 0)}));
  /* [4] aligns with the last axis, not the channels */
  int32_t c3 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 45, 0)});
  output(g, node(g, "Add", 2, (int32_t[]){c3, const_rand(g, 1, &d4, 46, 0)}));
  /* BN statistics that are graph inputs */
  int32_t mean = input(g, "mean", 1, &d4);
  int32_t c4 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 47, 0)});
  output(g, node(g, "BatchNormalization", 5,
                 (int32_t[]){c4, const_rand(g, 1, &d4, 48, 0), const_rand(g, 1, &d4, 49, 0),
                             mean, const_rand(g, 1, &d4, 50, 2.0f)}));
  /* conv output is a graph output */
  int32_t c5 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 51, 0)});
  output(g, c5);
  output(g, node(g, "Add", 2, (int32_t[]){c5, const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 52, 0)}));
  /* weights that are a graph input */
  int32_t wi = input(g, "w", 4, (int64_t[]){4, 3, 1, 1});
  int32_t c6 = node(g, "Conv", 2, (int32_t[]){x, wi});
  output(g, node(g, "Mul", 2, (int32_t[]){c6, const_scalar(g, 3.0f)}));
  prepare(m);
  int32_t nodes = count_op(g, NULL);
  assert_false(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(count_op(g, NULL), nodes);
  kn_ir_model_free(m);
}

/* ---- fuse_act ----------------------------------------------------------- */

/* ResNet's block end: Conv (+ bias Add) + residual Add + Relu. */
static void test_fuse_conv_residual_relu(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, D1);
  int32_t z = input(g, "z", 4, (int64_t[]){1, 4, 6, 6});
  int32_t y = node(g, "Conv", 3,
                   (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 61, 0),
                               const_rand(g, 1, (int64_t[]){4}, 62, 0)});
  conv_attrs(last(g), 1, 1);
  y = node(g, "Add", 2, (int32_t[]){const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 63, 0), y});
  y = node(g, "Add", 2, (int32_t[]){y, z});
  y = node(g, "Relu", 1, &y);
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(count_op(g, NULL), 1);
  const kn_node *f = find_op(g, "FusedConv");
  assert_non_null(f);
  assert_int_equal(f->n_inputs, 4);
  assert_int_equal(f->inputs[3], z);
  assert_int_equal(kn_node_attr(f, "residual_before_activation")->i, 1);
  assert_string_equal(kn_node_attr(f, "activation")->s, "Relu");
  kn_ir_model_free(m);
}

/* Each activation after a (grouped, depthwise and pointwise) conv, and the
 * residual after the activation. */
static void test_fuse_conv_activations(void **state) {
  (void)state;
  static const char *const acts[] = {"Relu", "Clip", "LeakyRelu", "HardSigmoid",
                                     "HardSwish", "Sigmoid", "Tanh", "Silu"};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
    for (int kind = 0; kind < 3; kind++) {
      kn_ir_model *m = model_new(14);
      kn_graph *g = m->graph;
      int32_t x = input(g, "x", 4, (int64_t[]){2, 4, 7, 7});
      int64_t wd[3][4] = {{6, 2, 3, 3}, {4, 1, 3, 3}, {6, 4, 1, 1}};
      int32_t y = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, wd[kind], 70 + (uint32_t)kind, 0)});
      conv_attrs(last(g), kind == 2 ? 0 : 1, kind == 0 ? 2 : kind == 1 ? 4 : 1);
      int64_t mch = wd[kind][0];
      if (!strcmp(acts[a], "Clip")) {
        y = node(g, "Clip", 3, (int32_t[]){y, constant_node(g, 0.0f), constant_node(g, 0.5f)});
      } else if (!strcmp(acts[a], "Silu")) {
        int32_t s = node(g, "Sigmoid", 1, &y);
        y = node(g, "Mul", 2, (int32_t[]){s, y});
      } else {
        y = node(g, acts[a], 1, &y);
        if (!strcmp(acts[a], "LeakyRelu")) assert_true(kn_node_set_float(last(g), "alpha", 0.3f));
        if (!strcmp(acts[a], "HardSigmoid")) {
          assert_true(kn_node_set_float(last(g), "alpha", 0.3f));
          assert_true(kn_node_set_float(last(g), "beta", 0.4f));
        }
      }
      int32_t z = input(g, "z", 4, (int64_t[]){1, mch, 1, 7}); /* broadcast residual */
      y = node(g, "Add", 2, (int32_t[]){z, y});
      output(g, y);
      prepare(m);
      assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
      if (count_op(g, NULL) != 1) /* dce dropped the Clip bounds' Constants */
        fail_msg("%s kind %d: %d nodes left", acts[a], kind, (int)count_op(g, NULL));
      const kn_node *f = find_op(g, "FusedConv");
      assert_non_null(f);
      assert_string_equal(kn_node_attr(f, "activation")->s, acts[a]);
      assert_int_equal(kn_node_attr(f, "residual_before_activation")->i, 0);
      kn_ir_model_free(m);
    }
  }
}

/* A BERT layer piece: MatMul + bias + erf GELU (both export orders), then
 * MatMul + bias + residual; and a Gemm with alpha, beta, transA. */
static void test_fuse_gemm(void **state) {
  (void)state;
  for (int order = 0; order < 3; order++) {
    kn_ir_model *m = model_new(13);
    kn_graph *g = m->graph;
    int32_t a = input(g, "a", 3, (int64_t[]){2, 3, 8});
    int32_t x = node(g, "MatMul", 2, (int32_t[]){a, const_rand(g, 2, (int64_t[]){8, 6}, 81, 0)});
    x = node(g, "Add", 2, (int32_t[]){const_rand(g, 1, (int64_t[]){6}, 82, 0), x});
    int32_t d = order == 1 ? node(g, "Mul", 2, (int32_t[]){x, const_scalar(g, 0.70710678f)})
                           : node(g, "Div", 2, (int32_t[]){x, const_scalar(g, 1.4142135f)});
    int32_t e = node(g, "Erf", 1, &d);
    int32_t p = node(g, "Add", 2, (int32_t[]){e, const_scalar(g, 1.0f)});
    int32_t y;
    if (order == 0) { /* torch: (x * p) * 0.5 */
      y = node(g, "Mul", 2, (int32_t[]){x, p});
      y = node(g, "Mul", 2, (int32_t[]){y, const_scalar(g, 0.5f)});
    } else if (order == 1) { /* HF: (x * 0.5) * p */
      int32_t h = node(g, "Mul", 2, (int32_t[]){x, const_scalar(g, 0.5f)});
      y = node(g, "Mul", 2, (int32_t[]){h, p});
    } else { /* x * (p * 0.5) */
      int32_t h = node(g, "Mul", 2, (int32_t[]){const_scalar(g, 0.5f), p});
      y = node(g, "Mul", 2, (int32_t[]){h, x});
    }
    int32_t y2 = node(g, "MatMul", 2, (int32_t[]){y, const_rand(g, 2, (int64_t[]){6, 8}, 83, 0)});
    y2 = node(g, "Add", 2, (int32_t[]){y2, const_rand(g, 1, (int64_t[]){8}, 84, 0)});
    y2 = node(g, "Add", 2, (int32_t[]){a, y2});
    output(g, y2);
    /* Gemm: op(A) = A^T, alpha, beta, C [3, 1]; then bias [1, 4] and Tanh */
    int32_t at = input(g, "at", 2, (int64_t[]){5, 3});
    int32_t gm = node(g, "Gemm", 3,
                      (int32_t[]){at, const_rand(g, 2, (int64_t[]){5, 4}, 85, 0),
                                  const_rand(g, 2, (int64_t[]){3, 1}, 86, 0)});
    assert_true(kn_node_set_int(last(g), "transA", 1));
    assert_true(kn_node_set_float(last(g), "alpha", 0.5f));
    assert_true(kn_node_set_float(last(g), "beta", 2.0f));
    gm = node(g, "Add", 2, (int32_t[]){gm, const_rand(g, 2, (int64_t[]){1, 4}, 87, 0)});
    gm = node(g, "Tanh", 1, &gm);
    output(g, gm);
    prepare(m);
    assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
    if (count_op(g, NULL) != 3 || count_op(g, "FusedGemm") != 3)
      fail_msg("order %d: %d nodes, %d FusedGemm", order, (int)count_op(g, NULL),
               (int)count_op(g, "FusedGemm"));
    kn_ir_model_free(m);
  }
}

static void test_fuse_must_not(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, D1);
  int64_t w1[] = {4, 3, 1, 1};
  /* two readers of the conv output */
  int32_t c1 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 91, 0)});
  output(g, node(g, "Relu", 1, &c1));
  output(g, node(g, "Neg", 1, &c1));
  /* a non-constant addend that enlarges the result */
  int32_t big = input(g, "big", 4, (int64_t[]){2, 4, 6, 6});
  int32_t c3 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 94, 0)});
  output(g, node(g, "Add", 2, (int32_t[]){c3, big}));
  /* a graph output in the middle */
  int32_t c4 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 95, 0)});
  output(g, c4);
  output(g, node(g, "Sigmoid", 1, &c4));
  /* SiLU whose input has a third reader */
  int32_t c5 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 96, 0)});
  int32_t s5 = node(g, "Sigmoid", 1, &c5);
  output(g, node(g, "Mul", 2, (int32_t[]){c5, s5}));
  output(g, node(g, "Neg", 1, &c5));
  /* Clip with a bound that is not constant */
  int32_t hi = input(g, "hi", 0, NULL);
  int32_t c6 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 97, 0)});
  output(g, node(g, "Clip", 3, (int32_t[]){c6, const_scalar(g, 0.0f), hi}));
  /* MatMul by a non-constant B */
  int32_t ma = input(g, "ma", 2, (int64_t[]){3, 5}), mb = input(g, "mb", 2, (int64_t[]){5, 4});
  int32_t mm = node(g, "MatMul", 2, (int32_t[]){ma, mb});
  output(g, node(g, "Relu", 1, &mm));
  prepare(m);
  int32_t nodes = count_op(g, NULL);
  assert_false(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(count_op(g, NULL), nodes);
  kn_ir_model_free(m);

  /* a constant [6] aligns with the width, not the channels: not a bias,
   * but exact as a broadcast residual */
  m = model_new(13);
  g = m->graph;
  x = input(g, "x", 4, D1);
  int32_t c2 = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 92, 0)});
  int32_t k6 = const_rand(g, 1, (int64_t[]){6}, 93, 0);
  output(g, node(g, "Add", 2, (int32_t[]){c2, k6}));
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  const kn_node *f2 = find_op(g, "FusedConv");
  assert_non_null(f2);
  assert_int_equal(f2->n_inputs, 4);
  assert_int_equal(f2->inputs[2], -1);
  assert_int_equal(f2->inputs[3], k6);
  kn_ir_model_free(m);

  /* a graph output after the bias: the bias is absorbed, the Relu is not */
  m = model_new(13);
  g = m->graph;
  x = input(g, "x", 4, D1);
  int32_t c = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, w1, 98, 0)});
  c = node(g, "Add", 2, (int32_t[]){c, const_rand(g, 3, (int64_t[]){4, 1, 1}, 99, 0)});
  output(g, c);
  output(g, node(g, "Relu", 1, &c));
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(count_op(g, "FusedConv"), 1);
  assert_int_equal(count_op(g, "Relu"), 1);
  assert_null(kn_node_attr(find_op(g, "FusedConv"), "activation"));
  kn_ir_model_free(m);
}

/* fold_bn then fuse_act then the whole optimizer agree with the original. */
static void test_fold_then_fuse(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, D1);
  int64_t d4 = 4;
  int32_t y = node(g, "Conv", 2, (int32_t[]){x, const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 101, 0)});
  conv_attrs(last(g), 1, 1);
  y = node(g, "BatchNormalization", 5,
           (int32_t[]){y, const_rand(g, 1, &d4, 102, 0), const_rand(g, 1, &d4, 103, 0),
                       const_rand(g, 1, &d4, 104, 0), const_rand(g, 1, &d4, 105, 2.0f)});
  y = node(g, "Clip", 3, (int32_t[]){y, const_scalar(g, 0.0f), const_scalar(g, 6.0f)});
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, kn_pass_fuse_act));
  assert_int_equal(count_op(g, NULL), 1);
  const kn_node *f = find_op(g, "FusedConv");
  assert_non_null(f);
  assert_float_equal(kn_node_attr(f, "activation_max")->f, 6.0f, 0);
  kn_ir_model_free(m);
}

/* ---- real models (skipped when not cached) ------------------------------- */

typedef struct hist {
  const char *op[64];
  int32_t n[64];
  int32_t count;
} hist;

static void histogram(const kn_graph *g, hist *h) {
  memset(h, 0, sizeof *h);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int32_t k = 0;
    while (k < h->count && strcmp(h->op[k], g->nodes[i].op_type)) k++;
    if (k == h->count && h->count < 64) h->op[h->count++] = g->nodes[i].op_type;
    if (k < 64) h->n[k]++;
  }
}

static int32_t hist_get(const hist *h, const char *op) {
  for (int32_t k = 0; k < h->count; k++)
    if (!strcmp(h->op[k], op)) return h->n[k];
  return 0;
}

/* Sigmoids whose only reader is a Mul that also reads the Sigmoid's input
 * (a SiLU left unfused). */
static int32_t silu_pairs(const kn_graph *g) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *s = &g->nodes[i];
    if (strcmp(s->op_type, "Sigmoid")) continue;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      const kn_node *mu = &g->nodes[j];
      if (strcmp(mu->op_type, "Mul") || mu->n_inputs != 2) continue;
      if ((mu->inputs[0] == s->outputs[0] && mu->inputs[1] == s->inputs[0]) ||
          (mu->inputs[1] == s->outputs[0] && mu->inputs[0] == s->inputs[0]))
        c++;
    }
  }
  return c;
}

static void test_real_models(void **state) {
  (void)state;
  const char *home = getenv("HOME");
  static const char *const names[] = {"resnet50", "mobilenet_v2", "efficientnet_b0",
                                      "bert_tiny", "squeezenet1_1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/kiln/models/%s.onnx", home ? home : "", names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
      printf("%s: not cached, skipped\n", names[i]);
      continue;
    }
    fclose(f);
    kn_model *model = NULL;
    kn_error err;
    if (kn_model_load(path, &model, &err)) fail_msg("%s", err.msg);
    kn_ir_model *m = (kn_ir_model *)kn_model_ir(model);
    if (kn_optimize(m, NULL, &err)) fail_msg("%s", err.msg);
    hist h;
    histogram(m->graph, &h);
    printf("%s after optimization (%d nodes):", names[i], (int)m->graph->n_nodes);
    for (int32_t k = 0; k < h.count; k++) printf(" %s %d", h.op[k], (int)h.n[k]);
    printf("\n");
    if (i == 0) {
      assert_int_equal(hist_get(&h, "Relu"), 0);
      assert_int_equal(hist_get(&h, "Add"), 0);
    } else if (i == 1) {
      assert_int_equal(hist_get(&h, "Clip"), 0);
    } else if (i == 2) {
      assert_int_equal(silu_pairs(m->graph), 0);
    }
    kn_model_free(model);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold_bn_conv),
      cmocka_unit_test(test_fold_bn_conv_transpose_group),
      cmocka_unit_test(test_fold_bn_gemm_matmul),
      cmocka_unit_test(test_fold_bn_must_not),
      cmocka_unit_test(test_fuse_conv_residual_relu),
      cmocka_unit_test(test_fuse_conv_activations),
      cmocka_unit_test(test_fuse_gemm),
      cmocka_unit_test(test_fuse_must_not),
      cmocka_unit_test(test_fold_then_fuse),
      cmocka_unit_test(test_real_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
