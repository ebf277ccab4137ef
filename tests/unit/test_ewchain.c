/* The ewchain pass and the ElementwiseChain op on small hand-built
 * graphs: chains with broadcast inputs (row vectors, scalars, [C,1,1]),
 * diamonds, every opcode, the near misses where it must not fire, and
 * results equal to the unfused graph's through the executor.  When the
 * real models are cached (~/.cache/kiln/models), the number of chains
 * after the whole optimizer is printed. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "ops/ewchain.h"
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
      if (p[k] != q[k] && !(isnan(p[k]) && isnan(q[k])) && !(fabsf(p[k] - q[k]) <= 1e-5f + 1e-4f * fabsf(q[k])))
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

static int32_t kiln_node(kn_graph *g, const char *op, int32_t in) {
  int32_t o = kn_graph_add_fresh_value(g, op);
  assert_true(o >= 0);
  assert_true(kn_graph_new_node(g, op, "kiln", op, 1, &in, 1, &o) >= 0);
  return o;
}

static const kn_node *chain(const kn_graph *g) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, "ElementwiseChain")) return &g->nodes[i];
  return NULL;
}

static int32_t n_covered(const kn_node *n) {
  int32_t c = 1;
  for (const char *s = n->covers; s && *s; s++) c += *s == ',';
  return c;
}

static const int64_t X4[] = {2, 3, 4, 5};

/* ---- where it fires ------------------------------------------------------ */

/* Sub a row vector, Mul by [C,1,1], Add a scalar, Relu: one step. */
static void test_broadcast_chain(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, X4);
  int32_t y = node(g, "Sub", 2, (int32_t[]){x, const_rand(g, 1, (int64_t[]){5}, 1, 0)});
  y = node(g, "Mul", 2, (int32_t[]){const_rand(g, 3, (int64_t[]){3, 1, 1}, 2, 0), y});
  y = node(g, "Add", 2, (int32_t[]){y, const_scalar(g, 0.25f)});
  y = node(g, "Relu", 1, &y);
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(g, NULL), 1);
  const kn_node *c = chain(g);
  assert_non_null(c);
  assert_string_equal(c->domain, "kiln");
  assert_int_equal(c->n_inputs, 4);
  assert_int_equal(n_covered(c), 4);
  assert_string_equal(c->name, "Relu");
  assert_int_equal(g->values[c->outputs[0]].type.rank, 4);
  kn_ir_model_free(m);
}

/* x * sigmoid(x) * scale (SiLU times a per-channel scale, as in EfficientNet's
 * squeeze-excite), and an inner diamond t * sigmoid(t) with t = x + b. */
static void test_diamonds(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, X4);
  int32_t s = node(g, "Sigmoid", 1, &x);
  int32_t y = node(g, "Mul", 2, (int32_t[]){x, s});
  y = node(g, "Mul", 2, (int32_t[]){y, input(g, "scale", 4, (int64_t[]){2, 3, 1, 1})});
  output(g, y);
  int32_t t = node(g, "Add", 2, (int32_t[]){x, const_rand(g, 2, (int64_t[]){4, 5}, 3, 0)});
  int32_t u = node(g, "Mul", 2, (int32_t[]){t, node(g, "Sigmoid", 1, &t)});
  u = node(g, "Mul", 2, (int32_t[]){u, u}); /* one value read twice by one node */
  output(g, u);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(g, NULL), 2);
  assert_int_equal(count_op(g, "ElementwiseChain"), 2);
  assert_int_equal(n_covered(&g->nodes[0]) + n_covered(&g->nodes[1]), 7);
  kn_ir_model_free(m);
}

/* Every opcode in one chain (inputs kept where every op is defined). */
static void test_every_op(void **state) {
  (void)state;
  kn_ir_model *m = model_new(14);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 3, (int64_t[]){3, 5, 300}); /* rows longer than a block */
  int32_t y = node(g, "Abs", 1, &x);
  y = node(g, "Add", 2, (int32_t[]){y, const_scalar(g, 1.0f)});
  y = node(g, "Log", 1, &y);
  y = node(g, "Sqrt", 1, &y);
  y = node(g, "Exp", 1, &y);
  y = node(g, "Neg", 1, &y);
  y = node(g, "Tanh", 1, &y);
  y = node(g, "Erf", 1, &y);
  y = node(g, "Mul", 2, (int32_t[]){y, x});
  y = node(g, "Sigmoid", 1, &y);
  y = node(g, "LeakyRelu", 1, &y);
  assert_true(kn_node_set_float(last(g), "alpha", 0.3f));
  y = node(g, "HardSigmoid", 1, &y);
  assert_true(kn_node_set_float(last(g), "alpha", 0.25f));
  y = node(g, "Sub", 2, (int32_t[]){x, y});
  y = node(g, "HardSwish", 1, &y);
  y = node(g, "Clip", 3, (int32_t[]){y, constant_node(g, -0.5f), constant_node(g, 1.5f)});
  y = node(g, "Softplus", 1, &y);
  y = node(g, "Reciprocal", 1, &y);
  y = node(g, "Pow", 2, (int32_t[]){y, const_scalar(g, 2.0f)});
  y = node(g, "Max", 2, (int32_t[]){y, const_rand(g, 1, (int64_t[]){300}, 4, 0)});
  y = node(g, "Min", 2, (int32_t[]){y, x});
  y = node(g, "Div", 2, (int32_t[]){y, const_rand(g, 2, (int64_t[]){5, 1}, 5, 3.0f)});
  y = node(g, "Relu", 1, &y);
  y = node(g, "Pow", 2, (int32_t[]){y, input(g, "e", 1, (int64_t[]){300})});
  y = kiln_node(g, "Gelu", y);
  y = kiln_node(g, "Gelu", y);
  assert_true(kn_node_set_string(last(g), "approximate", "tanh"));
  y = kiln_node(g, "HardSwish", y);
  output(g, y);
  prepare(m);
  int32_t before = count_op(g, NULL) - 2; /* less the two Constant nodes */
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(g, NULL), 1);
  const kn_node *c = chain(g);
  assert_non_null(c);
  assert_int_equal(n_covered(c), before);
  const kn_attr *ops = kn_node_attr(c, "ops");
  assert_non_null(ops);
  bool seen[KN_EW_COUNT] = {false};
  for (int32_t k = 0; k < ops->n; k++) seen[ops->ints[k]] = true;
  for (int32_t k = 0; k < KN_EW_COUNT; k++)
    if (!seen[k]) fail_msg("opcode %d not exercised", (int)k);
  kn_ir_model_free(m);
}

/* Clip-6 reads its bounds from attributes. */
static void test_clip_attrs(void **state) {
  (void)state;
  kn_ir_model *m = model_new(6);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, X4);
  int32_t y = node(g, "Mul", 2, (int32_t[]){x, const_scalar(g, 4.0f)});
  y = node(g, "Clip", 1, &y);
  assert_true(kn_node_set_float(last(g), "min", -1.0f));
  assert_true(kn_node_set_float(last(g), "max", 2.0f));
  output(g, y);
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(g, "ElementwiseChain"), 1);
  assert_int_equal(count_op(g, NULL), 1);
  kn_ir_model_free(m);
}

/* ---- where it must not fire ---------------------------------------------- */

static void expect_nothing(kn_ir_model *m, int32_t nodes) {
  prepare(m);
  assert_false(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(m->graph, "ElementwiseChain"), 0);
  assert_int_equal(count_op(m->graph, NULL), nodes);
  kn_ir_model_free(m);
}

static void test_must_not(void **state) {
  (void)state;
  {/* the intermediate is also read outside the chain */
    kn_ir_model *m = model_new(13);
    kn_graph *g = m->graph;
    int32_t x = input(g, "x", 4, X4);
    int32_t t = node(g, "Add", 2, (int32_t[]){x, const_scalar(g, 1.0f)});
    output(g, node(g, "Relu", 1, &t));
    int32_t r = node(g, "ReduceSum", 1, &t);
    output(g, r);
    expect_nothing(m, 3);
  }
  {/* a graph output in the middle */
    kn_ir_model *m = model_new(13);
    kn_graph *g = m->graph;
    int32_t x = input(g, "x", 4, X4);
    int32_t t = node(g, "Add", 2, (int32_t[]){x, const_scalar(g, 1.0f)});
    output(g, t);
    output(g, node(g, "Relu", 1, &t));
    expect_nothing(m, 2);
  }
  {/* int32 */
    kn_ir_model *m = model_new(14);
    kn_graph *g = m->graph;
    int32_t x = input(g, "x", 4, X4);
    g->values[x].type.dtype = KN_DTYPE_I32;
    int32_t t = node(g, "Add", 2, (int32_t[]){x, x});
    output(g, node(g, "Mul", 2, (int32_t[]){t, x}));
    prepare(m);
    assert_false(run_pass(m, kn_pass_ewchain));
    assert_int_equal(count_op(g, NULL), 2);
    kn_ir_model_free(m);
  }
  {/* an intermediate broadcast by a later op: sigmoid of [1,3,1,1] scaling x */
    kn_ir_model *m = model_new(13);
    kn_graph *g = m->graph;
    int32_t x = input(g, "x", 4, (int64_t[]){1, 3, 4, 4});
    int32_t s = input(g, "s", 4, (int64_t[]){1, 3, 1, 1});
    int32_t t = node(g, "Sigmoid", 1, &s);
    output(g, node(g, "Mul", 2, (int32_t[]){x, t}));
    expect_nothing(m, 2);
  }
  {/* a lone op, and a Pow whose exponent is an int32 input */
    kn_ir_model *m = model_new(13);
    kn_graph *g = m->graph;
    int32_t x = input(g, "x", 4, X4);
    int32_t e = input(g, "e", 1, (int64_t[]){5});
    g->values[e].type.dtype = KN_DTYPE_I32;
    int32_t t = node(g, "Pow", 2, (int32_t[]){x, e});
    output(g, node(g, "Sigmoid", 1, &t));
    prepare(m);
    assert_false(run_pass(m, kn_pass_ewchain));
    assert_int_equal(count_op(g, NULL), 2);
    kn_ir_model_free(m);
  }
}

/* Part of a chain fuses; the value read outside stays a tensor. */
static void test_partial(void **state) {
  (void)state;
  kn_ir_model *m = model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, X4);
  int32_t t = node(g, "Add", 2, (int32_t[]){x, const_scalar(g, 1.0f)});
  int32_t u = node(g, "Mul", 2, (int32_t[]){t, const_scalar(g, -3.0f)});
  output(g, node(g, "Relu", 1, &u));
  output(g, node(g, "Exp", 1, &t));
  prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(count_op(g, "ElementwiseChain"), 1);
  assert_int_equal(count_op(g, "Add"), 1);
  assert_int_equal(count_op(g, "Exp"), 1);
  assert_int_equal(count_op(g, NULL), 3);
  kn_ir_model_free(m);
}

/* ---- real models (skipped when not cached) ------------------------------- */

static void test_real_models(void **state) {
  (void)state;
  const char *home = getenv("HOME");
  static const char *const names[] = {"efficientnet_b0", "mobilenet_v2", "bert_base",
                                      "bert_tiny", "resnet50", "squeezenet1_1"};
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
    int32_t steps = count_op(m->graph, "ElementwiseChain"), covered = 0;
    for (int32_t k = 0; k < m->graph->n_nodes; k++)
      if (!strcmp(m->graph->nodes[k].op_type, "ElementwiseChain"))
        covered += n_covered(&m->graph->nodes[k]);
    printf("%s: %d ElementwiseChain steps covering %d nodes (%d steps in all):", names[i],
           (int)steps, (int)covered, (int)m->graph->n_nodes);
    for (int32_t k = 0; k < m->graph->n_nodes; k++) {
      const kn_node *n = &m->graph->nodes[k];
      if (getenv("KILN_EWCHAIN_LIST")) printf(" %s", n->op_type);
      else if (!strcmp(n->op_type, "ElementwiseChain")) printf(" [%s]", n->covers);
    }
    printf("\n");
    kn_model_free(model);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast_chain),
      cmocka_unit_test(test_diamonds),
      cmocka_unit_test(test_every_op),
      cmocka_unit_test(test_clip_attrs),
      cmocka_unit_test(test_must_not),
      cmocka_unit_test(test_partial),
      cmocka_unit_test(test_real_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
