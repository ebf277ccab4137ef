/* The transpose pass on small hand-built graphs: Transpose pairs cancel or
 * compose, Transposes sink through elementwise ops to meet and cancel,
 * Reshape chains merge, and near misses stay as they are.  Every graph is
 * run before and after and must give bit-identical results (the pass only
 * moves data differently). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/exec.h"
#include "passes/pass.h"
#include "testkit.h"

/* ---- building graphs ---------------------------------------------------- */

/* Transpose by perm (rank r); perm NULL: no attribute (reverse). */
static int32_t transpose(kn_graph *g, int32_t x, const int64_t *perm, int32_t r) {
  int32_t v = tk_node(g, "Transpose", 1, &x);
  if (perm) assert_true(kn_node_set_ints(tk_last(g), "perm", perm, r));
  return v;
}

static int32_t unary(kn_graph *g, const char *op, int32_t x) { return tk_node(g, op, 1, &x); }

static int32_t binary(kn_graph *g, const char *op, int32_t a, int32_t b) {
  return tk_node(g, op, 2, (int32_t[]){a, b});
}

/* ---- running passes ---------------------------------------------------- */

/* Runs the transpose pass (then dce), checks the results are bit for bit
 * the same and that the outputs kept their names; returns whether it
 * changed the graph. */
static bool pass_keeps_results(kn_ir_model *m) {
  kn_graph *g = m->graph;
  char *names[8];
  assert_true(g->n_outputs <= 8);
  for (int32_t i = 0; i < g->n_outputs; i++) names[i] = kn_strdup(g->values[g->outputs[i]].name);
  tk_results before = tk_run(m, TK_FILL_PATTERN);
  bool changed = tk_run_pass(m, kn_pass_transpose);
  tk_run_pass(m, kn_pass_dce);
  tk_results after = tk_run(m, TK_FILL_PATTERN);
  tk_assert_same(&before, &after);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    assert_string_equal(g->values[g->outputs[i]].name, names[i]);
    free(names[i]);
  }
  return changed;
}

static const int64_t d234[] = {2, 3, 4};
static const int64_t p120[] = {1, 2, 0}, p201[] = {2, 0, 1}, p021[] = {0, 2, 1};

/* The perm attribute of the only Transpose. */
static const kn_attr *only_perm(const kn_graph *g) {
  assert_int_equal(tk_count_op(g, "Transpose"), 1);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, "Transpose")) return kn_node_attr(&g->nodes[i], "perm");
  return NULL;
}

/* ---- fires -------------------------------------------------------------- */

static void test_cancel_pair(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, d234);
  int32_t v = unary(g, "Relu", x);
  v = transpose(g, v, p120, 3);
  v = transpose(g, v, p201, 3); /* the inverse of p120 */
  tk_output(g, unary(g, "Neg", v));
  /* a pair straight into a graph output: the Relu result takes its name */
  int32_t w = unary(g, "Exp", x);
  tk_output(g, transpose(g, transpose(g, w, NULL, 3), NULL, 3));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  assert_int_equal(tk_count_op(g, "Transpose"), 0);
  assert_int_equal(tk_count_op(g, NULL), 3);
  kn_ir_model_free(m);
}

/* Input straight to output: x cannot become an output, one identity
 * Transpose stays instead of two. */
static void test_cancel_interface(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, d234);
  tk_output(g, transpose(g, transpose(g, x, p120, 3), p201, 3));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  const kn_attr *a = only_perm(g);
  assert_non_null(a);
  for (int32_t d = 0; d < 3; d++) assert_int_equal(a->ints[d], d);
  kn_ir_model_free(m);
}

static void test_compose(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d2345[] = {2, 3, 4, 5};
  const int64_t pa[] = {0, 2, 1, 3}, pb[] = {0, 1, 3, 2};
  int32_t x = tk_input(g, "x", 4, d2345);
  tk_output(g, transpose(g, transpose(g, x, pa, 4), pb, 4));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  const kn_attr *a = only_perm(g);
  const int64_t want[] = {0, 2, 3, 1}; /* q[j] = pa[pb[j]] */
  assert_non_null(a);
  assert_int_equal(a->n, 4);
  for (int32_t d = 0; d < 4; d++) assert_int_equal(a->ints[d], want[d]);
  kn_ir_model_free(m);
}

static void test_sink_unary(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, d234);
  int32_t v = transpose(g, x, p120, 3);
  v = unary(g, "Relu", v);
  v = unary(g, "Exp", v);
  v = tk_node(g, "Cast", 1, &v);
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F64));
  v = unary(g, "Sqrt", v);
  tk_output(g, transpose(g, v, p201, 3));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  assert_int_equal(tk_count_op(g, "Transpose"), 0);
  assert_int_equal(tk_count_op(g, NULL), 4);
  kn_ir_model_free(m);
}

/* Both operands transposed alike: one Transpose after the op, which then
 * composes with the one below; the same with a scalar operand. */
static void test_sink_binary(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d1 = 1;
  int32_t a = tk_input(g, "a", 3, d234), b = tk_input(g, "b", 3, d234);
  int32_t v = binary(g, "Add", transpose(g, a, p120, 3), transpose(g, b, p120, 3));
  v = binary(g, "Mul", v, tk_const_f32(g, 0, &d1, (float[]){1.5f}));
  v = binary(g, "Sub", tk_const_f32(g, 1, &d1, (float[]){0.25f}), v);
  tk_output(g, transpose(g, v, p021, 3));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  const kn_attr *p = only_perm(g);
  const int64_t want[] = {1, 0, 2}; /* p120 then p021 */
  assert_non_null(p);
  for (int32_t d = 0; d < 3; d++) assert_int_equal(p->ints[d], want[d]);
  assert_int_equal(tk_count_op(g, NULL), 4);
  kn_ir_model_free(m);
}

/* Broadcasting between same-rank operands transposed alike, and a
 * comparison (bool result). */
static void test_sink_binary_broadcast_same_rank(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d134[] = {1, 3, 4};
  int32_t a = tk_input(g, "a", 3, d234), b = tk_input(g, "b", 3, d134);
  int32_t v = binary(g, "Max", transpose(g, a, p120, 3), transpose(g, b, p120, 3));
  tk_output(g, transpose(g, v, p201, 3));
  v = binary(g, "Less", transpose(g, a, p021, 3), transpose(g, b, p021, 3));
  tk_output(g, transpose(g, v, p021, 3));
  tk_prepare(m);
  assert_true(pass_keeps_results(m));
  assert_int_equal(tk_count_op(g, "Transpose"), 0);
  assert_int_equal(tk_count_op(g, NULL), 2);
  kn_ir_model_free(m);
}

/* Reshape -> Unsqueeze -> Flatten -> Unsqueeze becomes one Reshape; with a
 * dynamic batch dim the shape holds -1 there. */
static void test_reshape_chain(void **state) {
  (void)state;
  for (int dyn = 0; dyn < 2; dyn++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    const int64_t dx[] = {dyn ? -1 : 2, 3, 4};
    int32_t x = tk_input(g, "x", 3, dx);
    int32_t v = unary(g, "Relu", x);
    v = tk_node(g, "Reshape", 2, (int32_t[]){v, tk_const_i64(g, 3, (int64_t[]){0, 4, 3})});
    v = tk_node(g, "Unsqueeze", 2, (int32_t[]){v, tk_const_i64(g, 1, (int64_t[]){1})});
    v = tk_node(g, "Flatten", 1, &v);
    assert_true(kn_node_set_int(tk_last(g), "axis", 1));
    v = tk_node(g, "Unsqueeze", 2, (int32_t[]){v, tk_const_i64(g, 1, (int64_t[]){1})});
    tk_output(g, unary(g, "Neg", v));
    tk_prepare(m);
    assert_true(pass_keeps_results(m));
    assert_int_equal(tk_count_op(g, NULL), 3);
    assert_int_equal(tk_count_op(g, "Reshape"), 1);
    for (int32_t i = 0; i < g->n_nodes; i++) {
      const kn_node *n = &g->nodes[i];
      if (strcmp(n->op_type, "Reshape")) continue;
      const kn_tensor *s = g->values[n->inputs[1]].constant;
      assert_non_null(s);
      assert_int_equal(kn_tensor_numel(s), 3); /* [N, 1, 12] */
      const int64_t *sd = s->data;
      assert_int_equal(sd[0], dyn ? -1 : 2);
      assert_int_equal(sd[1], 1);
      assert_int_equal(sd[2], 12);
      assert_non_null(n->covers);
    }
    kn_ir_model_free(m);
  }
}

/* Through kn_optimize: the whole pipeline keeps every bit. */
static void test_optimize(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d2345[] = {2, 3, 4, 5};
  const int64_t nchw_nhwc[] = {0, 2, 3, 1}, nhwc_nchw[] = {0, 3, 1, 2};
  int32_t x = tk_input(g, "x", 4, d2345);
  int32_t v = transpose(g, x, nchw_nhwc, 4);
  v = unary(g, "Sigmoid", v);
  v = binary(g, "Mul", v, transpose(g, unary(g, "Tanh", x), nchw_nhwc, 4));
  v = transpose(g, v, nhwc_nchw, 4);
  tk_output(g, unary(g, "Abs", v));
  tk_prepare(m);
  tk_results before = tk_run(m, TK_FILL_PATTERN);
  kn_error err;
  if (kn_optimize(m, NULL, &err)) fail_msg("%s", err.msg);
  tk_results after = tk_run(m, TK_FILL_PATTERN);
  tk_assert_same(&before, &after);
  assert_int_equal(tk_count_op(g, "Transpose"), 0);
  kn_ir_model_free(m);
}

/* ---- must not fire ------------------------------------------------------ */

static void assert_untouched(kn_ir_model *m, bool run) {
  int32_t before = tk_count_op(m->graph, NULL);
  if (run)
    assert_false(pass_keeps_results(m));
  else
    assert_false(tk_run_pass(m, kn_pass_transpose));
  assert_int_equal(tk_count_op(m->graph, NULL), before);
}

static void test_keep_second_reader(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, d234);
  int32_t t = transpose(g, x, p120, 3);
  tk_output(g, transpose(g, t, p201, 3));
  tk_output(g, unary(g, "Relu", t)); /* reads the intermediate too */
  /* a sink whose Transpose result has a second reader */
  int32_t s = transpose(g, x, p021, 3);
  tk_output(g, transpose(g, unary(g, "Exp", s), p021, 3));
  tk_output(g, unary(g, "Neg", s));
  tk_prepare(m);
  assert_untouched(m, true);
  kn_ir_model_free(m);
}

static void test_keep_graph_output(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, d234);
  int32_t t = transpose(g, x, p120, 3);
  tk_output(g, t);
  tk_output(g, transpose(g, t, p201, 3));
  /* the op between two Transposes is a graph output */
  int32_t r = unary(g, "Relu", transpose(g, x, p021, 3));
  tk_output(g, r);
  tk_output(g, transpose(g, r, p021, 3));
  tk_prepare(m);
  assert_untouched(m, true);
  kn_ir_model_free(m);
}

static void test_keep_broadcast(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t d2 = 2, d3 = 3;
  int32_t x = tk_input(g, "x", 3, d234);
  /* a rank-1 bias along the transposed last axis */
  int32_t v = binary(g, "Add", transpose(g, x, p120, 3),
                     tk_const_f32(g, 1, &d2, (float[]){1.0f, -2.0f}));
  tk_output(g, transpose(g, v, p201, 3));
  /* a same-rank operand that is not transposed */
  int32_t y = tk_input(g, "y", 3, (int64_t[]){4, 3, 2});
  v = binary(g, "Mul", transpose(g, x, NULL, 3), y);
  tk_output(g, transpose(g, v, NULL, 3));
  /* both transposed, but by different perms */
  int32_t z = tk_input(g, "z", 3, (int64_t[]){3, 2, 4});
  v = binary(g, "Sub", transpose(g, x, p120, 3), transpose(g, z, p021, 3));
  tk_output(g, transpose(g, v, p201, 3));
  /* a rank-1 operand of three elements, not constant */
  int32_t w = tk_input(g, "w", 1, &d3);
  v = binary(g, "Div", transpose(g, x, p021, 3), w);
  tk_output(g, transpose(g, v, p021, 3));
  tk_prepare(m);
  assert_untouched(m, true);
  kn_ir_model_free(m);
}

/* A Transpose with no perm over an input of unknown rank, and a sink that
 * would not meet another Transpose (moving it gains nothing). */
static void test_keep_unknown(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", -1, NULL);
  tk_output(g, transpose(g, transpose(g, x, NULL, 0), (int64_t[]){1, 0}, 2));
  tk_prepare(m);
  assert_untouched(m, false);
  kn_ir_model_free(m);

  m = tk_model_new(13);
  g = m->graph;
  x = tk_input(g, "x", 3, d234);
  tk_output(g, unary(g, "Exp", unary(g, "Relu", transpose(g, x, p120, 3))));
  tk_prepare(m);
  assert_untouched(m, true);
  kn_ir_model_free(m);
}

static void test_keep_reshape(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  const int64_t dx[] = {-1, -1, 4};
  int32_t x = tk_input(g, "x", 3, dx);
  /* two unknown dims in the final shape */
  int32_t v = tk_node(g, "Unsqueeze", 2, (int32_t[]){x, tk_const_i64(g, 1, (int64_t[]){0})});
  tk_output(g, tk_node(g, "Squeeze", 2, (int32_t[]){v, tk_const_i64(g, 1, (int64_t[]){0})}));
  /* the intermediate is read twice */
  int32_t y = tk_input(g, "y", 2, (int64_t[]){2, 6});
  v = tk_node(g, "Reshape", 2, (int32_t[]){y, tk_const_i64(g, 2, (int64_t[]){3, 4})});
  tk_output(g, tk_node(g, "Reshape", 2, (int32_t[]){v, tk_const_i64(g, 1, (int64_t[]){12})}));
  tk_output(g, unary(g, "Relu", v));
  tk_prepare(m);
  assert_untouched(m, true);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cancel_pair),
      cmocka_unit_test(test_cancel_interface),
      cmocka_unit_test(test_compose),
      cmocka_unit_test(test_sink_unary),
      cmocka_unit_test(test_sink_binary),
      cmocka_unit_test(test_sink_binary_broadcast_same_rank),
      cmocka_unit_test(test_reshape_chain),
      cmocka_unit_test(test_optimize),
      cmocka_unit_test(test_keep_second_reader),
      cmocka_unit_test(test_keep_graph_output),
      cmocka_unit_test(test_keep_broadcast),
      cmocka_unit_test(test_keep_unknown),
      cmocka_unit_test(test_keep_reshape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
