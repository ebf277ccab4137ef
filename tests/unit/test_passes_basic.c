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
#include "testkit.h"

/* ---- running passes ---------------------------------------------------- */

/* Runs `fn` (then dce) and checks the results did not change; returns
 * whether `fn` changed the graph. */
static bool pass_keeps_results(kn_ir_model *m, kn_pass_fn fn, int64_t cap) {
  tk_results before = tk_run(m, TK_FILL_PATTERN);
  bool changed = tk_run_pass_cap(m, fn, cap);
  tk_run_pass_cap(m, kn_pass_dce, cap);
  tk_results after = tk_run(m, TK_FILL_PATTERN);
  tk_assert_same(&before, &after);
  return changed;
}

#define CAP ((int64_t)16 << 20)

/* ---- noop --------------------------------------------------------------- */

static void test_noop_removes(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d23[] = {2, 3};
  int32_t x = tk_input(g, "x", 2, d23);
  int32_t v = tk_node(g, "Identity", 1, &x);
  v = tk_node(g, "Reshape", 2, (int32_t[]){v, tk_const_i64(g, 2, (int64_t[]){2, -1})});
  v = tk_node(g, "Transpose", 1, &v);
  assert_true(kn_node_set_ints(tk_last(g), "perm", (int64_t[]){0, 1}, 2));
  v = tk_node(g, "Cast", 1, &v);
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F32));
  v = tk_node(g, "Pad", 2, (int32_t[]){v, tk_const_i64(g, 4, (int64_t[]){0, 0, 0, 0})});
  v = tk_node(g, "Slice", 3,
           (int32_t[]){v, tk_const_i64(g, 2, (int64_t[]){0, -3}),
                       tk_const_i64(g, 2, (int64_t[]){INT64_MAX, 3})});
  v = tk_node(g, "Concat", 1, &v);
  assert_true(kn_node_set_int(tk_last(g), "axis", 1));
  v = tk_node(g, "Dropout", 1, &v);
  v = tk_node(g, "Expand", 2, (int32_t[]){v, tk_const_i64(g, 2, (int64_t[]){1, 3})});
  v = tk_node(g, "Split", 1, &v);
  v = tk_node(g, "Relu", 1, &v);
  tk_output(g, v);
  tk_prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_noop, CAP));
  assert_int_equal(tk_count_op(g, NULL), 1);
  assert_int_equal(tk_count_op(g, "Relu"), 1);
  assert_int_equal(g->nodes[0].inputs[0], x);
  assert_string_equal(g->values[g->outputs[0]].name, "Relu"); /* interface kept */
  kn_ir_model_free(m);
}

static void test_noop_keeps(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d23[] = {2, 3};
  int32_t x = tk_input(g, "x", 2, d23);
  int32_t r = tk_node(g, "Relu", 1, &x);
  tk_output(g, tk_node(g, "Reshape", 2, (int32_t[]){r, tk_const_i64(g, 2, (int64_t[]){3, 2})}));
  tk_output(g, tk_node(g, "Transpose", 1, &r));
  assert_true(kn_node_set_ints(tk_last(g), "perm", (int64_t[]){1, 0}, 2));
  tk_output(g, tk_node(g, "Cast", 1, &r));
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F64));
  tk_output(g, tk_node(g, "Pad", 2, (int32_t[]){r, tk_const_i64(g, 4, (int64_t[]){0, 1, 0, -1})}));
  tk_output(g, tk_node(g, "Slice", 3,
                 (int32_t[]){r, tk_const_i64(g, 1, (int64_t[]){1}),
                             tk_const_i64(g, 1, (int64_t[]){INT64_MAX})}));
  tk_output(g, tk_node(g, "Slice", 5,  /* everything, but reversed */
                 (int32_t[]){r, tk_const_i64(g, 1, (int64_t[]){-1}),
                             tk_const_i64(g, 1, (int64_t[]){INT64_MIN}),
                             tk_const_i64(g, 1, (int64_t[]){1}),
                             tk_const_i64(g, 1, (int64_t[]){-1})}));
  tk_output(g, tk_node(g, "Expand", 2, (int32_t[]){r, tk_const_i64(g, 3, (int64_t[]){2, 2, 3})}));
  int32_t dm[2];
  tk_node_n(g, "Dropout", 1, &r, 2, dm); /* the mask is read: keep it */
  tk_output(g, dm[0]);
  tk_output(g, dm[1]);
  tk_output(g, tk_node(g, "Identity", 1, &x)); /* a graph input cannot become an output */
  tk_prepare(m);
  int32_t before = tk_count_op(g, NULL);
  assert_false(pass_keeps_results(m, kn_pass_noop, CAP));
  assert_int_equal(tk_count_op(g, NULL), before);
  kn_ir_model_free(m);
}

static void test_noop_dynamic_shape(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d[] = {-1, 3};
  int32_t x = tk_input(g, "x", 2, d);
  int32_t r = tk_node(g, "Relu", 1, &x);
  /* same shape only when the batch is 2: unknown at build time */
  tk_output(g, tk_node(g, "Reshape", 2, (int32_t[]){r, tk_const_i64(g, 2, (int64_t[]){2, 3})}));
  tk_prepare(m);
  assert_false(tk_run_pass_cap(m, kn_pass_noop, CAP));
  kn_ir_model_free(m);
}

/* ---- constfold ---------------------------------------------------------- */

static void test_constfold_values(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d22[] = {2, 2};
  int32_t x = tk_input(g, "x", 2, d22);
  int32_t a = tk_const_f32(g, 2, d22, (float[]){1, 2, 3, 4});
  int32_t b = tk_const_f32(g, 2, d22, (float[]){0.5f, -1, 8, 0.25f});
  int32_t s = tk_node(g, "Add", 2, (int32_t[]){a, b});
  int32_t t = tk_node(g, "Sqrt", 1, &s);
  tk_output(g, tk_node(g, "Mul", 2, (int32_t[]){x, t}));
  tk_prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_constfold, CAP));
  assert_int_equal(tk_count_op(g, NULL), 1);
  const kn_tensor *c = g->values[g->nodes[0].inputs[1]].constant;
  assert_non_null(c);
  const float *cd = c->data;
  assert_true(cd[0] == sqrtf(1.5f) && cd[1] == 1.0f && cd[3] == sqrtf(4.25f));
  kn_ir_model_free(m);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exported models
 * compute a reshape target. */
static kn_ir_model *shape_chain(const int64_t *xdims) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 2, xdims);
  int32_t s = tk_node(g, "Shape", 1, &x);
  int32_t k = tk_node(g, "Gather", 2, (int32_t[]){s, tk_const_i64(g, -1, (int64_t[]){1})});
  int32_t u = tk_node(g, "Unsqueeze", 2, (int32_t[]){k, tk_const_i64(g, 1, (int64_t[]){0})});
  int32_t c = tk_node(g, "Concat", 2, (int32_t[]){u, tk_const_i64(g, 1, (int64_t[]){-1})});
  assert_true(kn_node_set_int(tk_last(g), "axis", 0));
  tk_output(g, tk_node(g, "Reshape", 2, (int32_t[]){x, c}));
  tk_prepare(m);
  return m;
}

static void test_constfold_shape_chain(void **state) {
  (void)state;
  kn_ir_model *m = shape_chain((int64_t[]){1, 128});
  assert_true(pass_keeps_results(m, kn_pass_constfold, CAP));
  assert_int_equal(tk_count_op(m->graph, NULL), 1);
  assert_int_equal(tk_count_op(m->graph, "Reshape"), 1);
  const kn_type *t = &m->graph->values[m->graph->outputs[0]].type;
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->dims[0], 128);
  assert_int_equal(t->dims[1], 1);
  kn_ir_model_free(m);

  /* an unknown dim: Shape is not known at build time, nothing folds */
  m = shape_chain((int64_t[]){1, -1});
  assert_false(tk_run_pass_cap(m, kn_pass_constfold, CAP));
  assert_int_equal(tk_count_op(m->graph, NULL), 5);
  kn_ir_model_free(m);
}

static void test_constfold_cap_and_outputs(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d[] = {1024};
  int32_t x = tk_input(g, "x", 1, d);
  int32_t big = tk_node(g, "ConstantOfShape", 1, (int32_t[]){tk_const_i64(g, 1, d)}); /* 4 KiB */
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){x, big}));
  const int64_t one[] = {1};
  int32_t c1 = tk_const_f32(g, 1, one, (float[]){2});
  tk_output(g, tk_node(g, "Neg", 1, &c1)); /* a graph output: a constant cannot take its name */
  tk_prepare(m);
  assert_false(tk_run_pass_cap(m, kn_pass_constfold, 1024));
  assert_int_equal(tk_count_op(g, "ConstantOfShape"), 1);
  assert_true(pass_keeps_results(m, kn_pass_constfold, 4096));
  assert_int_equal(tk_count_op(g, "ConstantOfShape"), 0);
  assert_int_equal(tk_count_op(g, "Neg"), 1);
  kn_ir_model_free(m);
}

/* ---- cse ---------------------------------------------------------------- */

static void test_cse_merges(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d[] = {2, 3}, d3[] = {3};
  int32_t x = tk_input(g, "x", 2, d);
  int32_t r1 = tk_node(g, "LeakyRelu", 1, &x);
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.1f));
  int32_t r2 = tk_node(g, "LeakyRelu", 1, &x);
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.1f));
  int32_t c1 = tk_const_f32(g, 1, d3, (float[]){1, 2, 3});
  int32_t c2 = tk_const_f32(g, 1, d3, (float[]){1, 2, 3});
  int32_t m1 = tk_node(g, "Mul", 2, (int32_t[]){r1, c1});
  int32_t m2 = tk_node(g, "Mul", 2, (int32_t[]){r2, c2}); /* equal once r and c merge */
  tk_output(g, tk_node(g, "Sub", 2, (int32_t[]){m1, m2}));
  tk_output(g, m2); /* the merged node's result stays a graph output under its name */
  tk_prepare(m);
  assert_true(pass_keeps_results(m, kn_pass_cse, CAP));
  assert_int_equal(tk_count_op(g, "LeakyRelu"), 1);
  assert_int_equal(tk_count_op(g, "Mul"), 1);
  assert_int_equal(tk_count_op(g, NULL), 3);
  assert_string_equal(g->values[g->outputs[1]].name, "Mul_1");
  kn_ir_model_free(m);
}

static void test_cse_keeps(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d[] = {2, 3}, d3[] = {3};
  int32_t x = tk_input(g, "x", 2, d), y = tk_input(g, "y", 2, d);
  tk_output(g, tk_node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.1f));
  tk_output(g, tk_node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.2f));
  tk_output(g, tk_node(g, "LeakyRelu", 1, &x));
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.0f));
  tk_output(g, tk_node(g, "LeakyRelu", 1, &x)); /* -0.0 differs bit for bit: kept apart */
  assert_true(kn_node_set_float(tk_last(g), "alpha", -0.0f));
  tk_output(g, tk_node(g, "Sub", 2, (int32_t[]){x, y}));
  tk_output(g, tk_node(g, "Sub", 2, (int32_t[]){y, x}));
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){x, tk_const_f32(g, 1, d3, (float[]){1, 2, 3})}));
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){x, tk_const_f32(g, 1, d3, (float[]){1, 2, 4})}));
  int32_t i1 = tk_node(g, "Relu", 1, &x), i2 = tk_node(g, "Relu", 1, &x);
  tk_output(g, i1); /* both results are graph outputs: merging would lose a name */
  tk_output(g, i2);
  tk_prepare(m);
  int32_t before = tk_count_op(g, NULL);
  assert_false(pass_keeps_results(m, kn_pass_cse, CAP));
  assert_int_equal(tk_count_op(g, NULL), before);
  kn_ir_model_free(m);
}

/* ---- all passes together ------------------------------------------------ */

static void test_optimize_fixed_point(void **state) {
  (void)state;
  kn_ir_model *m = shape_chain((int64_t[]){4, 6});
  tk_results before = tk_run(m, TK_FILL_PATTERN);
  kn_error err;
  if (kn_optimize(m, NULL, &err)) fail_msg("%s", err.msg);
  tk_results after = tk_run(m, TK_FILL_PATTERN);
  tk_assert_same(&before, &after);
  assert_int_equal(tk_count_op(m->graph, NULL), 1);
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
