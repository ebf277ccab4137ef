/* The reduce tactic (src/tactics/reduce_tactics.c) against the reference
 * reductions: float32 ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceSumSquare, ReduceL1 and ReduceL2 over ranks 1 to 5, every kind of
 * axes set (leading, trailing, inner, interleaved, all, negative, none with
 * and without noop_with_empty_axes), keepdims on and off, opset 13 (axes as
 * an attribute) and 18 (as an input).  Max and min must match exactly;
 * the sums (float32 here, double in the reference) to a tolerance
 * relative to the summed magnitudes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testkit.h"

static const char *const ops[] = {"ReduceSum",       "ReduceMean", "ReduceMax", "ReduceMin",
                                  "ReduceSumSquare", "ReduceL1",   "ReduceL2"};

static uint32_t rnd(uint32_t *s, uint32_t n) {
  *s = *s * 1664525u + 1013904223u;
  return (*s >> 8) % n;
}

static void check(kn_ir_model *m, const char *op, int64_t count, const char *what) {
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  bool exact = !strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin");
  /* |x| <= 2: a sum of count terms (squares <= 4) rounds within ~count ulps */
  double tol = 1e-6 * (double)(count + 8) * 4.0;
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    assert_int_equal(tk_fast_tactic(m, op, isa), KN_TACTIC_reduce);
    for (int threads = 1; threads <= 2; threads++) {
      tk_results got = tk_run_fast(m, TK_FILL_SEEDED, isa, threads);
      assert_int_equal(got.n, ref.n);
      const kn_tensor *a = &got.outs[0].t, *b = &ref.outs[0].t;
      assert_int_equal(a->rank, b->rank);
      assert_int_equal(kn_tensor_numel(a), kn_tensor_numel(b));
      const float *x = a->data, *y = b->data;
      for (int64_t i = 0; i < kn_tensor_numel(b); i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (exact ? x[i] != y[i] : !(d <= tol * (1.0 + fabs((double)y[i]))))
          fail_msg("%s [%s, %d threads]: element %lld is %.9g, reference %.9g", what,
                   kn_isa_name((kn_isa)isa), threads, (long long)i, (double)x[i], (double)y[i]);
      }
      tk_results_free(&got);
    }
  }
  tk_results_free(&ref);
}

static void test_reduce(void **state) {
  (void)state;
  static const int64_t sizes[] = {1, 2, 3, 5, 8, 16, 17, 33, 100};
  uint32_t s = 7;
  for (int32_t r = 1; r <= 5; r++)
    for (int32_t rep = 0; rep < 28; rep++) {
      const char *op = ops[rep % 7];
      int64_t opset = rep % 2 ? 18 : 13;
      int64_t dims[5], n = 1;
      for (int32_t i = 0; i < r; i++) n *= dims[i] = sizes[rnd(&s, r >= 4 ? 6 : 9)];
      int64_t axes[5];
      int32_t na = 0;
      for (int32_t i = 0; i < r; i++)
        if (rnd(&s, 2)) axes[na++] = rnd(&s, 2) ? i - r : i;
      bool keep = rnd(&s, 2), noop = na == 0 && opset == 18 && rnd(&s, 2);
      kn_ir_model *m = tk_model_new(opset);
      kn_graph *g = m->graph;
      int32_t in[2] = {tk_input(g, "x", r, dims), -1};
      int32_t nin = 1;
      if (opset == 18 && na > 0) in[nin++] = tk_const_i64(g, na, axes);
      tk_output(g, tk_node(g, op, nin, in));
      kn_node *nd = tk_last(g);
      if (opset == 13 && na > 0) assert_true(kn_node_set_ints(nd, "axes", axes, na));
      assert_true(kn_node_set_int(nd, "keepdims", keep));
      if (noop) assert_true(kn_node_set_int(nd, "noop_with_empty_axes", 1));
      tk_prepare(m);
      int64_t count = na == 0 ? n : 1;
      for (int32_t k = 0; k < na; k++) count *= dims[axes[k] < 0 ? axes[k] + r : axes[k]];
      char what[160];
      snprintf(what, sizeof what, "%s opset %lld rank %d, %d axes, keepdims %d%s", op,
               (long long)opset, (int)r, (int)na, (int)keep, noop ? ", noop" : "");
      check(m, op, count, what);
      kn_ir_model_free(m);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
