/* Memory under a workspace budget (src/plan/budget.c, src/plan/patch.c):
 * small generated models (a stem with a strided pool, a residual block, a
 * channel concat, strided convs, average pooling) are optimized, planned
 * without a cap, then planned again under 60% of that arena.  The second
 * plan must fit, be sound (kn_plan_check: no two live tensors share a byte
 * except in-place pairs and Concat parts), have steps in bands, and record
 * its decision; through an engine file its results must equal the
 * unconstrained graph's: bit for bit on the reference kernels (a band step
 * is the same step on fewer rows), within rounding on the fast ones (a
 * Winograd tile may fall differently within a band).  A cap nothing can
 * reach fails with one line naming the smallest arena and the shortfall. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "passes/pass.h"
#include "plan/budget.h"
#include "plan/patch.h"
#include "ops/tactic.h"
#include "testkit.h"

static int32_t conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t k, int64_t stride,
                    uint32_t seed) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin, k, k}, seed, 0);
  int32_t b = tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0);
  int32_t y = tk_node(g, "Conv", 3, (int32_t[]){x, w, b});
  int64_t p = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){p, p, p, p}, 4));
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){k, k}, 2));
  if (stride != 1)
    assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){stride, stride}, 2));
  return y;
}

static int32_t relu(kn_graph *g, int32_t x) { return tk_node(g, "Relu", 1, (int32_t[]){x}); }

static int32_t pool(kn_graph *g, const char *op, int32_t x, int64_t k, int64_t s) {
  int32_t y = tk_node(g, op, 1, (int32_t[]){x});
  int64_t p = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){k, k}, 2));
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){p, p, p, p}, 4));
  assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){s, s}, 2));
  return y;
}

/* The head after the early layers: a strided conv, then a global pool
 * (so the run's output is not the graph's). */
static void head(kn_graph *g, int32_t x, int64_t c) {
  int32_t y = relu(g, conv(g, x, c, 16, 3, 2, 90));
  tk_output(g, tk_node(g, "GlobalAveragePool", 1, (int32_t[]){y}));
}

/* stem conv, max pool /2, a bottleneck with its residual, strided head */
static kn_ir_model *residual_model(void) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 3, 40, 24});
  int32_t s = relu(g, conv(g, x, 3, 8, 3, 1, 1));
  int32_t p = pool(g, "MaxPool", s, 3, 2);
  int32_t a = relu(g, conv(g, p, 8, 4, 1, 1, 10));
  int32_t b = relu(g, conv(g, a, 4, 4, 3, 1, 20));
  int32_t c = conv(g, b, 4, 8, 1, 1, 30);
  int32_t r = relu(g, tk_node(g, "Add", 2, (int32_t[]){c, p}));
  head(g, r, 8);
  tk_prepare(m);
  return m;
}

/* two branches joined on channels, a strided conv and an average pool */
static kn_ir_model *concat_model(void) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 3, 36, 20});
  int32_t s = relu(g, conv(g, x, 3, 8, 3, 1, 1));
  int32_t a = relu(g, conv(g, s, 8, 8, 3, 1, 40));
  int32_t b = relu(g, conv(g, s, 8, 8, 1, 1, 50));
  int32_t c = tk_node(g, "Concat", 2, (int32_t[]){a, b});
  assert_true(kn_node_set_int(tk_last(g), "axis", 1));
  int32_t d = relu(g, conv(g, c, 16, 8, 5, 2, 60));
  int32_t e = pool(g, "AveragePool", d, 3, 1);
  head(g, e, 8);
  tk_prepare(m);
  return m;
}

static void optimize(kn_ir_model *m) {
  kn_error err;
  kn_optimize_options o = {0};
  if (kn_optimize(m, &o, &err)) fail_msg("%s", err.msg);
}

static int32_t count_bands(const kn_graph *g) {
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += kn_patch_is_band(&g->nodes[i]);
  return n;
}

/* m planned (under `workspace` when not 0) through an engine file, run on
 * this machine's kernels (or the reference), TK_FILL_SEEDED then
 * TK_FILL_PATTERN on one context. */
static void run_engine(kn_ir_model *m, const kn_mem_plan *plan, bool reference,
                       tk_results out[2]) {
  int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
  kn_tactics_select(m, isa, reference);
  char path[] = "/tmp/kiln_test_budget_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  kn_error err;
  if (kn_engine_write(m, plan, NULL, path, &err)) fail_msg("%s", err.msg);
  kn_tactics_select(m, isa, true);
  kn_model *km;
  if (kn_model_load(path, &km, &err)) fail_msg("%s", err.msg);
  unlink(path);
  assert_int_equal(km->plan.arena_bytes, plan->arena_bytes);
  assert_int_equal(km->ir->graph->n_nodes, m->graph->n_nodes); /* the order as built */
  for (int32_t i = 0; i < m->graph->n_nodes; i++)
    assert_string_equal(km->ir->graph->nodes[i].name, m->graph->nodes[i].name);
  kn_context *c;
  if (kn_context_create(km, &c, &err)) fail_msg("%s", err.msg);
  out[0] = tk_run_context(c, km, TK_FILL_SEEDED);
  out[1] = tk_run_context(c, km, TK_FILL_PATTERN);
  kn_context_free(c);
  kn_model_free(km);
}

static void check_model(kn_ir_model *(*make)(void), const char *what) {
  kn_machine mach;
  kn_machine_fallback(&mach);
  kn_error err;
  char why[512];
  kn_ir_model *full = make(), *cut = make();
  optimize(full);
  optimize(cut);
  kn_mem_plan pf, pc;
  if (kn_plan_memory(full->graph, 0, &pf, &err)) fail_msg("%s", err.msg);
  kn_lines dec = {0};
  kn_budget_options o = {.workspace = pf.arena_bytes * 6 / 10, .rewrite = true,
                         .machine = &mach, .threads = 1, .decisions = &dec};
  if (kn_plan_under_budget(cut, &o, &pc, &err)) fail_msg("%s: %s", what, err.msg);
  if (!kn_plan_check(&pc, why, sizeof why)) {
    kn_plan_print(&pc, cut->graph, stderr);
    fail_msg("%s: plan: %s", what, why);
  }
  printf("%s: arena %llu -> %llu bytes (cap %llu), %d steps -> %d (%d in bands)\n", what,
         (unsigned long long)pf.arena_bytes, (unsigned long long)pc.arena_bytes,
         (unsigned long long)o.workspace, full->graph->n_nodes, cut->graph->n_nodes,
         count_bands(cut->graph));
  assert_true(pc.arena_bytes <= o.workspace);
  assert_true(count_bands(cut->graph) > 0);
  assert_int_equal(dec.n, 1);
  assert_non_null(strstr(dec.s[0], "memory: steps "));
  assert_non_null(strstr(dec.s[0], " bands of output rows"));
  for (int reference = 1; reference >= 0; reference--) {
    tk_results a[2], b[2];
    run_engine(full, &pf, reference, a);
    run_engine(cut, &pc, reference, b);
    for (int32_t f = 0; f < 2; f++) {
      if (reference) tk_assert_bits(&a[f], &b[f], "bands against whole, reference kernels");
      tk_assert_close(&b[f], &a[f], false); /* frees both */
    }
  }
  kn_lines_free(&dec);
  kn_mem_plan_free(&pf);
  kn_mem_plan_free(&pc);
  kn_ir_model_free(full);
  kn_ir_model_free(cut);
}

static void test_residual(void **state) {
  (void)state;
  check_model(residual_model, "residual");
}

static void test_concat(void **state) {
  (void)state;
  check_model(concat_model, "concat");
}

/* A cap below anything reachable fails with the smallest arena found and
 * the shortfall; a cap on a graph with nothing to band says so. */
static void test_too_small(void **state) {
  (void)state;
  kn_machine mach;
  kn_machine_fallback(&mach);
  kn_error err = {0};
  kn_ir_model *m = residual_model();
  optimize(m);
  kn_mem_plan p;
  kn_budget_options o = {.workspace = 64, .rewrite = true, .machine = &mach, .threads = 1};
  assert_int_equal(kn_plan_under_budget(m, &o, &p, &err), KN_ERR_LIMIT);
  unsigned long long need = 0, short_by = 0;
  assert_int_equal(sscanf(err.msg,
                          "workspace of 64 bytes is too small: the smallest plan found needs "
                          "%llu bytes (%llu short;",
                          &need, &short_by),
                   2);
  assert_int_equal(need - 64, short_by);
  assert_null(p.tensors);
  kn_ir_model_free(m);

  m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 2, (int64_t[]){16, 16});
  int32_t a = tk_node(g, "MatMul", 2, (int32_t[]){x, x});
  int32_t b = tk_node(g, "MatMul", 2, (int32_t[]){a, x});
  tk_output(g, tk_node(g, "MatMul", 2, (int32_t[]){b, a}));
  tk_prepare(m);
  o.workspace = 1000;
  assert_int_equal(kn_plan_under_budget(m, &o, &p, &err), KN_ERR_LIMIT);
  assert_string_equal(err.msg, "workspace of 1000 bytes is too small: the plan needs 2048 bytes "
                               "(1048 over), and no run of steps can execute in bands to save "
                               "memory");
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_residual),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_too_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
