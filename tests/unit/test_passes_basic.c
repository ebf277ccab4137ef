/* The basic passes (noop, constfold, cse) on small hand-built graphs: where
 * each fires, where it must not, and that the graph's results are the same
 * before and after (bit for bit: these passes change no arithmetic). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/exec.h"
#include "passes/pass.h"

/* ---- building graphs ---------------------------------------------------- */

static kn_ir_model *model_new(void) {
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  assert_non_null(m);
  m->graph = kn_graph_new(NULL);
  m->opsets = kn_calloc(1, sizeof *m->opsets);
  assert_non_null(m->graph);
  assert_non_null(m->opsets);
  m->n_opsets = 1;
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = 13;
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
  memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  append(&g->inputs, &g->n_inputs, v);
  return v;
}

static void output(kn_graph *g, int32_t v) {
  g->values[v].is_output = true;
  append(&g->outputs, &g->n_outputs, v);
}

static int32_t const_f32(kn_graph *g, int32_t rank, const int64_t *dims, const float *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL), KN_OK);
  memcpy(t.data, vals, (size_t)kn_tensor_numel(&t) * sizeof(float));
  int32_t v = kn_graph_add_constant(g, "c", &t);
  assert_true(v >= 0);
  return v;
}

/* rank 1 (or a scalar when n < 0: one element vals[0]) */
static int32_t const_i64(kn_graph *g, int32_t n, const int64_t *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  int64_t d = n < 0 ? 1 : n;
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_I64, n < 0 ? 0 : 1, &d, NULL), KN_OK);
  memcpy(t.data, vals, (size_t)d * sizeof(int64_t));
  int32_t v = kn_graph_add_constant(g, "k", &t);
  assert_true(v >= 0);
  return v;
}

/* A node with n_out fresh outputs; returns its first output's index. */
static int32_t node_n(kn_graph *g, const char *op, int32_t n_in, const int32_t *in,
                      int32_t n_out, int32_t *outs) {
  int32_t o[4];
  for (int32_t i = 0; i < n_out; i++) {
    o[i] = kn_graph_add_fresh_value(g, op);
    assert_true(o[i] >= 0);
    if (outs) outs[i] = o[i];
  }
  assert_true(kn_graph_new_node(g, op, "", op, n_in, in, n_out, o) >= 0);
  return o[0];
}

static int32_t node(kn_graph *g, const char *op, int32_t n_in, const int32_t *in) {
  return node_n(g, op, n_in, in, 1, NULL);
}

static kn_node *last(kn_graph *g) { return &g->nodes[g->n_nodes - 1]; }

static void prepare(kn_ir_model *m) {
  kn_error err;
  kn_status st = kn_graph_finish(m->graph, m->label, &err);
  if (!st) st = kn_ops_prepare(m, &err);
  if (st) fail_msg("%s", err.msg);
}

/* ---- running passes and graphs ------------------------------------------ */

static bool run_pass(kn_ir_model *m, kn_pass_fn fn, int64_t cap) {
  kn_error err;
  kn_pass_ctx ctx = {.m = m, .err = &err, .fold_max_bytes = cap};
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

/* Runs the graph with every (non-constant) input filled from a fixed
 * pattern. */
static results run_graph(kn_ir_model *m) {
  kn_graph *g = m->graph;
  kn_slot *in = kn_calloc((size_t)g->n_inputs + 1, sizeof *in);
  const kn_slot **pin = kn_calloc((size_t)g->n_inputs + 1, sizeof *pin);
  results r = {g->n_outputs, kn_calloc((size_t)g->n_outputs + 1, sizeof(kn_slot))};
  assert_non_null(in);
  assert_non_null(pin);
  assert_non_null(r.outs);
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->constant) continue;
    in[i].kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&in[i].t, v->type.dtype, v->type.rank, v->type.dims, NULL),
                     KN_OK);
    float *d = in[i].t.data;
    for (int64_t k = 0; k < kn_tensor_numel(&in[i].t); k++)
      d[k] = (float)((k * 37 + i * 11) % 23) * 0.25f - 2.5f;
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

static void assert_same_results(results *a, results *b) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(a->outs[i].kind, KN_KIND_TENSOR);
    assert_int_equal(b->outs[i].kind, KN_KIND_TENSOR);
    assert_int_equal(x->dtype, y->dtype);
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    size_t bytes = (size_t)kn_tensor_numel(x) * kn_dtype_size(x->dtype);
    assert_memory_equal(x->data, y->data, bytes);
  }
  results_free(a);
  results_free(b);
}

/* Runs `fn` (then dce) and checks the results did not change; returns
 * whether `fn` changed the graph. */
static bool pass_keeps_results(kn_ir_model *m, kn_pass_fn fn, int64_t cap) {
  results before = run_graph(m);
  bool changed = run_pass(m, fn, cap);
  run_pass(m, kn_pass_dce, cap);
  results after = run_graph(m);
  assert_same_results(&before, &after);
  return changed;
}

#define CAP ((int64_t)16 << 20)

/* ---- noop --------------------------------------------------------------- */

static void test_noop_removes(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d23[] = {2, 3};
  int32_t x = input(g, "x", 2, d23);
  int32_t v = node(g, "Identity", 1, &x);
  v = node(g, "Reshape", 2, (int32_t[]){v, const_i64(g, 2, (int64_t[]){2, -1})});
  v = node(g, "Transpose", 1, &v);
  assert_true(kn_node_set_ints(last(g), "perm", (int64_t[]){0, 1}, 2));
  v = node(g, "Cast", 1, &v);
  assert_true(kn_node_set_int(last(g), "to", KN_DTYPE_F32));
  v = node(g, "Pad", 2, (int32_t[]){v, const_i64(g, 4, (int64_t[]){0, 0, 0, 0})});
  v = node(g, "Slice", 3,
           (int32_t[]){v, const_i64(g, 2, (int64_t[]){0, -3}),
                       const_i64(g, 2, (int64_t[]){INT64_MAX, 3})});
  v = node(g, "Concat", 1, &v);
  assert_true(kn_node_set_int(last(g), "axis", 1));
  v = node(g, "Dropout", 1, &v);
  v = node(g, "Expand", 2, (int32_t[]){v, const_i64(g, 2, (int64_t[]){1, 3})});
  v = node(g, "Split", 1, &v);
  v = node(g, "Relu", 1, &v);
  output(g, v);
  prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_noop, CAP));
  assert_int_equal(count_op(g, NULL), 1);
  assert_int_equal(count_op(g, "Relu"), 1);
  assert_int_equal(g->nodes[0].inputs[0], x);
  assert_string_equal(g->values[g->outputs[0]].name, "Relu"); /* interface kept */
  kn_ir_model_free(m);
}

static void test_noop_keeps(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d23[] = {2, 3};
  int32_t x = input(g, "x", 2, d23);
  int32_t r = node(g, "Relu", 1, &x);
  output(g, node(g, "Reshape", 2, (int32_t[]){r, const_i64(g, 2, (int64_t[]){3, 2})}));
  output(g, node(g, "Transpose", 1, &r));
  assert_true(kn_node_set_ints(last(g), "perm", (int64_t[]){1, 0}, 2));
  output(g, node(g, "Cast", 1, &r));
  assert_true(kn_node_set_int(last(g), "to", KN_DTYPE_F64));
  output(g, node(g, "Pad", 2, (int32_t[]){r, const_i64(g, 4, (int64_t[]){0, 1, 0, -1})}));
  output(g, node(g, "Slice", 3,
                 (int32_t[]){r, const_i64(g, 1, (int64_t[]){1}),
                             const_i64(g, 1, (int64_t[]){INT64_MAX})}));
  output(g, node(g, "Slice", 5,  /* everything, but reversed */
                 (int32_t[]){r, const_i64(g, 1, (int64_t[]){-1}),
                             const_i64(g, 1, (int64_t[]){INT64_MIN}),
                             const_i64(g, 1, (int64_t[]){1}),
                             const_i64(g, 1, (int64_t[]){-1})}));
  output(g, node(g, "Expand", 2, (int32_t[]){r, const_i64(g, 3, (int64_t[]){2, 2, 3})}));
  int32_t dm[2];
  node_n(g, "Dropout", 1, &r, 2, dm); /* the mask is read: keep it */
  output(g, dm[0]);
  output(g, dm[1]);
  output(g, node(g, "Identity", 1, &x)); /* a graph input cannot become an output */
  prepare(m);
  int32_t before = count_op(g, NULL);
  assert_false(pass_keeps_results(m, kn_pass_noop, CAP));
  assert_int_equal(count_op(g, NULL), before);
  kn_ir_model_free(m);
}

static void test_noop_dynamic_shape(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d[] = {-1, 3};
  int32_t x = input(g, "x", 2, d);
  int32_t r = node(g, "Relu", 1, &x);
  /* same shape only when the batch is 2: unknown at build time */
  output(g, node(g, "Reshape", 2, (int32_t[]){r, const_i64(g, 2, (int64_t[]){2, 3})}));
  prepare(m);
  assert_false(run_pass(m, kn_pass_noop, CAP));
  kn_ir_model_free(m);
}

/* ---- constfold ---------------------------------------------------------- */

static void test_constfold_values(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d22[] = {2, 2};
  int32_t x = input(g, "x", 2, d22);
  int32_t a = const_f32(g, 2, d22, (float[]){1, 2, 3, 4});
  int32_t b = const_f32(g, 2, d22, (float[]){0.5f, -1, 8, 0.25f});
  int32_t s = node(g, "Add", 2, (int32_t[]){a, b});
  int32_t t = node(g, "Sqrt", 1, &s);
  output(g, node(g, "Mul", 2, (int32_t[]){x, t}));
  prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_constfold, CAP));
  assert_int_equal(count_op(g, NULL), 1);
  const kn_tensor *c = g->values[g->nodes[0].inputs[1]].constant;
  assert_non_null(c);
  const float *cd = c->data;
  assert_true(cd[0] == sqrtf(1.5f) && cd[1] == 1.0f && cd[3] == sqrtf(4.25f));
  kn_ir_model_free(m);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exported models
 * compute a reshape target. */
static kn_ir_model *shape_chain(const int64_t *xdims) {
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 2, xdims);
  int32_t s = node(g, "Shape", 1, &x);
  int32_t k = node(g, "Gather", 2, (int32_t[]){s, const_i64(g, -1, (int64_t[]){1})});
  int32_t u = node(g, "Unsqueeze", 2, (int32_t[]){k, const_i64(g, 1, (int64_t[]){0})});
  int32_t c = node(g, "Concat", 2, (int32_t[]){u, const_i64(g, 1, (int64_t[]){-1})});
  assert_true(kn_node_set_int(last(g), "axis", 0));
  output(g, node(g, "Reshape", 2, (int32_t[]){x, c}));
  prepare(m);
  return m;
}

static void test_constfold_shape_chain(void **state) {
  (void)state;
  kn_ir_model *m = shape_chain((int64_t[]){1, 128});
  assert_true(pass_keeps_results(m, kn_pass_constfold, CAP));
  assert_int_equal(count_op(m->graph, NULL), 1);
  assert_int_equal(count_op(m->graph, "Reshape"), 1);
  const kn_type *t = &m->graph->values[m->graph->outputs[0]].type;
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->dims[0], 128);
  assert_int_equal(t->dims[1], 1);
  kn_ir_model_free(m);

  /* an unknown dim: Shape is not known at build time, nothing folds */
  m = shape_chain((int64_t[]){1, -1});
  assert_false(run_pass(m, kn_pass_constfold, CAP));
  assert_int_equal(count_op(m->graph, NULL), 5);
  kn_ir_model_free(m);
}

static void test_constfold_cap_and_outputs(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d[] = {1024};
  int32_t x = input(g, "x", 1, d);
  int32_t big = node(g, "ConstantOfShape", 1, (int32_t[]){const_i64(g, 1, d)}); /* 4 KiB */
  output(g, node(g, "Add", 2, (int32_t[]){x, big}));
  const int64_t one[] = {1};
  int32_t c1 = const_f32(g, 1, one, (float[]){2});
  output(g, node(g, "Neg", 1, &c1)); /* a graph output: a constant cannot take its name */
  prepare(m);
  assert_false(run_pass(m, kn_pass_constfold, 1024));
  assert_int_equal(count_op(g, "ConstantOfShape"), 1);
  assert_true(pass_keeps_results(m, kn_pass_constfold, 4096));
  assert_int_equal(count_op(g, "ConstantOfShape"), 0);
  assert_int_equal(count_op(g, "Neg"), 1);
  kn_ir_model_free(m);
}

/* ---- cse ---------------------------------------------------------------- */

static void test_cse_merges(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d[] = {2, 3}, d3[] = {3};
  int32_t x = input(g, "x", 2, d);
  int32_t r1 = node(g, "LeakyRelu", 1, &x);
  assert_true(kn_node_set_float(last(g), "alpha", 0.1f));
  int32_t r2 = node(g, "LeakyRelu", 1, &x);
  assert_true(kn_node_set_float(last(g), "alpha", 0.1f));
  int32_t c1 = const_f32(g, 1, d3, (float[]){1, 2, 3});
  int32_t c2 = const_f32(g, 1, d3, (float[]){1, 2, 3});
  int32_t m1 = node(g, "Mul", 2, (int32_t[]){r1, c1});
  int32_t m2 = node(g, "Mul", 2, (int32_t[]){r2, c2}); /* equal once r and c merge */
  output(g, node(g, "Sub", 2, (int32_t[]){m1, m2}));
  output(g, m2); /* the merged node's result stays a graph output under its name */
  prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_cse, CAP));
  assert_int_equal(count_op(g, "LeakyRelu"), 1);
  assert_int_equal(count_op(g, "Mul"), 1);
  assert_int_equal(count_op(g, NULL), 3);
  assert_string_equal(g->values[g->outputs[1]].name, "Mul_1");
  kn_ir_model_free(m);
}

static void test_cse_keeps(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  const int64_t d[] = {2, 3}, d3[] = {3};
  int32_t x = input(g, "x", 2, d), y = input(g, "y", 2, d);
  output(g, node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(last(g), "alpha", 0.1f));
  output(g, node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(last(g), "alpha", 0.2f));
  output(g, node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(last(g), "alpha", 0.0f));
  output(g, node(g, "LeakyRelu", 1, &x)); /* -0.0 differs bit for bit: kept apart */
  assert_true(kn_node_set_float(last(g), "alpha", -0.0f));
  output(g, node(g, "Sub", 2, (int32_t[]){x, y}));
  output(g, node(g, "Sub", 2, (int32_t[]){y, x}));
  output(g, node(g, "Add", 2, (int32_t[]){x, const_f32(g, 1, d3, (float[]){1, 2, 3})}));
  output(g, node(g, "Add", 2, (int32_t[]){x, const_f32(g, 1, d3, (float[]){1, 2, 4})}));
  int32_t i1 = node(g, "Relu", 1, &x), i2 = node(g, "Relu", 1, &x);
  output(g, i1); /* both results are graph outputs: merging would lose a name */
  output(g, i2);
  prepare(m);
  int32_t before = count_op(g, NULL);
  assert_false(pass_keeps_results(m, kn_pass_cse, CAP));
  assert_int_equal(count_op(g, NULL), before);
  kn_ir_model_free(m);
}

/* ---- all passes together ------------------------------------------------ */

static void test_optimize_fixed_point(void **state) {
  (void)state;
  kn_ir_model *m = shape_chain((int64_t[]){4, 6});
  results before = run_graph(m);
  kn_error err;
  if (kn_optimize(m, NULL, &err)) fail_msg("%s", err.msg);
  results after = run_graph(m);
  assert_same_results(&before, &after);
  assert_int_equal(count_op(m->graph, NULL), 1);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_noop_removes),
      cmocka_unit_test(test_noop_keeps),
      cmocka_unit_test(test_noop_dynamic_shape),
      cmocka_unit_test(test_constfold_values),
      cmocka_unit_test(test_constfold_shape_chain),
      cmocka_unit_test(test_constfold_cap_and_outputs),
      cmocka_unit_test(test_cse_merges),
      cmocka_unit_test(test_cse_keeps),
      cmocka_unit_test(test_optimize_fixed_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
