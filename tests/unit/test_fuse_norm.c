/* fuse_norm: a LayerNormalization after a FusedGemm becomes the GEMM's
 * row epilogue when the IO model says the rows stay in the L2.  On small
 * hand-built transformer blocks: where it fires, that the results stay the
 * same (reference kernels before and after; the fast kernels on 1 and 2
 * threads against the reference), that a machine with too small an L2
 * keeps the two steps apart, where it must not fire, and that each
 * decision is recorded with its predicted times. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/machine.h"
#include "passes/pass.h"
#include "testkit.h"

/* Variants of block(): the transformer's, and three the pass must leave. */
enum { PLAIN, TWO_AXES, MEAN_READ, PRE_NORM_OUTPUT };

/* y = LayerNorm(a @ W + b + r) over the last axis (n columns, inner size
 * k) at opset 17; TWO_AXES normalises the last two, MEAN_READ makes the
 * Mean output a graph output, PRE_NORM_OUTPUT the value it normalises. */
static kn_ir_model *block(int64_t rows, int64_t k, int64_t n, int variant) {
  int64_t axis = variant == TWO_AXES ? -2 : -1;
  bool mean_out = variant == MEAN_READ;
  kn_ir_model *m = tk_model_new(17);
  kn_graph *g = m->graph;
  int32_t a = tk_input(g, "a", 3, (int64_t[]){2, rows, k});
  int32_t r = tk_input(g, "r", 3, (int64_t[]){2, rows, n});
  int32_t x =
      tk_node(g, "MatMul", 2, (int32_t[]){a, tk_const_rand(g, 2, (int64_t[]){k, n}, 11, 0)});
  x = tk_node(g, "Add", 2, (int32_t[]){x, tk_const_rand(g, 1, (int64_t[]){n}, 12, 0)});
  x = tk_node(g, "Add", 2, (int32_t[]){r, x});
  int32_t sc = tk_const_rand(g, 1, (int64_t[]){n}, 13, 0);
  int32_t bi = tk_const_rand(g, 1, (int64_t[]){n}, 14, 0);
  if (axis != -1) { /* normalise the last two axes: scale and bias [rows, n] */
    sc = tk_const_rand(g, 2, (int64_t[]){rows, n}, 13, 0);
    bi = tk_const_rand(g, 2, (int64_t[]){rows, n}, 14, 0);
  }
  int32_t outs[2] = {kn_graph_add_fresh_value(g, "y"), mean_out ? kn_graph_add_fresh_value(g, "mean") : -1};
  int32_t in[3] = {x, sc, bi};
  int32_t li = kn_graph_new_node(g, "LayerNormalization", "", "ln", 3, in, mean_out ? 2 : 1, outs);
  assert_true(li >= 0);
  assert_true(kn_node_set_int(&g->nodes[li], "axis", axis));
  assert_true(kn_node_set_float(&g->nodes[li], "epsilon", 1e-5f));
  tk_output(g, outs[0]);
  if (mean_out) tk_output(g, outs[1]);
  if (variant == PRE_NORM_OUTPUT) tk_output(g, x);
  tk_prepare(m);
  return m;
}

/* Runs fuse_norm for machine `mach` (NULL: the fallback), recording its
 * decisions in *lines; returns whether it changed the graph. */
static bool run_fuse_norm(kn_ir_model *m, const kn_machine *mach, kn_lines *lines) {
  kn_error err;
  kn_pass_ctx ctx = {.m = m, .err = &err, .fold_max_bytes = TK_FOLD_CAP, .machine = mach,
                     .decisions = lines};
  bool changed = false;
  kn_status st = kn_pass_fuse_norm(&ctx, m->graph, &changed);
  if (!st && changed) {
    st = kn_graph_compact(m->graph, m->label, &err);
    if (!st) st = kn_ops_prepare(m, &err);
  }
  if (st) fail_msg("%s", err.msg);
  return changed;
}

static const kn_node *fused_gemm(const kn_graph *g) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && !strcmp(g->nodes[i].op_type, "FusedGemm")) return &g->nodes[i];
  return NULL;
}

static bool has_line(const kn_lines *l, const char *needle) {
  for (int32_t i = 0; i < l->n; i++)
    if (strstr(l->s[i], needle)) return true;
  return false;
}

/* BERT's block, scaled down, at several widths.  (The kiln-domain
 * LayerNormalization the layernorm pass makes below opset 17 takes the same
 * path: the exported BERTs have it, test_fusion's real models.) */
static void test_fuses_and_keeps_results(void **state) {
  (void)state;
  const int64_t shapes[][3] = {{5, 24, 16}, {7, 33, 100}, {1, 16, 257}, {40, 64, 48}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    kn_ir_model *m = block(shapes[s][0], shapes[s][1], shapes[s][2], PLAIN);
    tk_results before = tk_run(m, TK_FILL_SEEDED);
    assert_true(tk_run_pass(m, kn_pass_fuse_act));
    kn_lines lines = {0};
    if (!run_fuse_norm(m, NULL, &lines))
      fail_msg("shape %zu: not fused (%s)", s, lines.n ? lines.s[0] : "no decision");
    assert_int_equal(tk_count_op(m->graph, "LayerNormalization"), 0);
    const kn_node *fg = fused_gemm(m->graph);
    assert_non_null(fg);
    const kn_attr *norm = kn_node_attr(fg, "norm");
    assert_true(norm && !strcmp(norm->s, "LayerNormalization"));
    assert_int_equal(lines.n, 1);
    assert_true(has_line(&lines, "fused into the GEMM's row epilogue"));
    assert_true(has_line(&lines, "us fused,") && has_line(&lines, "us apart"));
    tk_results after = tk_run(m, TK_FILL_SEEDED);
    tk_assert_close(&after, &before, false);
    tk_assert_fast_close(m); /* the row epilogue in the packed GEMM, 1 and 2 threads */
    kn_lines_free(&lines);
    kn_ir_model_free(m);
  }
}

/* The model refuses when a block of whole rows cannot stay in the L2: 8192
 * columns (32 KiB a row) on a machine described with a 16 KiB L2, while the
 * same graph fuses for the fallback machine. */
static void test_refused_when_rows_do_not_fit(void **state) {
  (void)state;
  kn_machine small;
  kn_machine_fallback(&small);
  bool found = false;
  for (int32_t i = 0; i < small.n_levels; i++)
    if (!strcmp(small.levels[i].name, "L2")) {
      small.levels[i].bytes = 16 << 10;
      found = true;
    }
  assert_true(found);
  for (int pass = 0; pass < 2; pass++) {
    kn_ir_model *m = block(4, 16, 8192, PLAIN);
    assert_true(tk_run_pass(m, kn_pass_fuse_act));
    kn_lines lines = {0};
    bool fused = run_fuse_norm(m, pass ? &small : NULL, &lines);
    assert_int_equal(lines.n, 1);
    if (pass) {
      assert_false(fused);
      assert_int_equal(tk_count_op(m->graph, "LayerNormalization"), 1);
      if (!has_line(&lines, "kept out of") || !has_line(&lines, "does not fit the L2"))
        fail_msg("decision: %s", lines.s[0]);
    } else {
      assert_true(fused);
    }
    kn_lines_free(&lines);
    kn_ir_model_free(m);
  }
}

/* Where it must not fire: a norm over more than the last axis, a Mean
 * output that is read, a GEMM result read twice. */
static void test_must_not(void **state) {
  (void)state;
  for (int c = TWO_AXES; c <= PRE_NORM_OUTPUT; c++) {
    kn_ir_model *m = block(5, 24, 16, c);
    assert_true(tk_run_pass(m, kn_pass_fuse_act));
    kn_lines lines = {0};
    if (run_fuse_norm(m, NULL, &lines)) fail_msg("case %d: fused", c);
    assert_int_equal(lines.n, 0); /* not a candidate: nothing to decide */
    kn_ir_model_free(m);
  }
}

/* The whole optimizer: kn_optimize fuses (fuse_act, then fuse_norm), and
 * records the decision when asked. */
static void test_through_optimizer(void **state) {
  (void)state;
  kn_ir_model *m = block(6, 32, 24, PLAIN);
  tk_results before = tk_run(m, TK_FILL_SEEDED);
  kn_lines lines = {0};
  kn_error err;
  kn_optimize_options o = {.decisions = &lines};
  if (kn_optimize(m, &o, &err)) fail_msg("%s", err.msg);
  assert_int_equal(tk_count_op(m->graph, "LayerNormalization"), 0);
  assert_int_equal(tk_count_op(m->graph, "FusedGemm"), 1);
  assert_int_equal(lines.n, 1);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&after, &before, false);
  kn_lines_free(&lines);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fuses_and_keeps_results),
      cmocka_unit_test(test_refused_when_rows_do_not_fit),
      cmocka_unit_test(test_must_not),
      cmocka_unit_test(test_through_optimizer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
