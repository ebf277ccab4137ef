/* Reductions over every spatial axis as global pools
 * (src/passes/global_pool.c) on small hand-built graphs: ReduceMean and
 * ReduceMax with axes as an attribute (opset 13) and as an input (18),
 * negative axes, keepdims 0 (a Flatten after the pool), ranks 4 and 5, and
 * through channels_last into channels-last pool steps; results equal the
 * unoptimized graph's through the reference and the fast kernels on 1 and
 * 2 threads.  Reductions over other axes keep their op. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testkit.h"

/* op(x) over `axes` (attribute before opset 18, input 1 from 18 on),
 * keepdims as given (-1: the default). */
static int32_t reduce(kn_graph *g, int64_t opset, const char *op, int32_t x,
                      const int64_t *axes, int32_t na, int64_t keepdims) {
  int32_t y;
  if (opset >= 18 && na > 0) {
    y = tk_node(g, op, 2, (int32_t[]){x, tk_const_i64(g, na, axes)});
  } else {
    y = tk_node(g, op, 1, &x);
    if (na > 0) assert_true(kn_node_set_ints(tk_last(g), "axes", axes, na));
  }
  if (keepdims >= 0) assert_true(kn_node_set_int(tk_last(g), "keepdims", keepdims));
  return y;
}

/* A conv before the reductions, so that channels_last has a region. */
static int32_t conv(kn_graph *g, int32_t x, int64_t c, int64_t m) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, c, 3, 3}, 3, 0);
  int32_t y = tk_node(g, "Conv", 3, (int32_t[]){x, w, tk_const_rand(g, 1, (int64_t[]){m}, 4, 0)});
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){1, 1, 1, 1}, 4));
  return y;
}

/* Runs global_pool (then channels_last when `nhwc`); checks what is left
 * and the results, reference and fast kernels, 1 and 2 threads. */
static void check(kn_ir_model *m, int32_t reductions_left, int32_t pools, bool nhwc) {
  kn_graph *g = m->graph;
  tk_prepare(m);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  tk_passes_keep_close(m, kn_pass_global_pool, nhwc ? kn_pass_channels_last : NULL, false);
  assert_int_equal(tk_count_op(g, "ReduceMean") + tk_count_op(g, "ReduceMax"), reductions_left);
  int32_t found = tk_count_op(g, "GlobalAveragePool") + tk_count_op(g, "GlobalMaxPool") +
                  tk_count_op(g, "NhwcGlobalAveragePool") + tk_count_op(g, "NhwcGlobalMaxPool");
  assert_int_equal(found, pools);
  tk_assert_fast_close(m);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&ref, &after, false);
  kn_ir_model_free(m);
}

/* x.mean([2, 3]) and x.amax((-1, -2), keepdim=True) after a conv, at
 * opsets 13 and 18, with and without keepdims; all four become pools,
 * channels-last ones after channels_last. */
static void test_spatial_reductions(void **state) {
  (void)state;
  static const int64_t opsets[2] = {13, 18};
  for (int o = 0; o < 2; o++)
    for (int nhwc = 0; nhwc < 2; nhwc++) {
      int64_t opset = opsets[o];
      kn_ir_model *m = tk_model_new(opset);
      kn_graph *g = m->graph;
      int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 3, 9, 7});
      int32_t f = conv(g, x, 3, 19);
      int32_t r = tk_node(g, "Relu", 1, &f);
      tk_output(g, reduce(g, opset, "ReduceMean", r, (int64_t[]){2, 3}, 2, 0));
      tk_output(g, reduce(g, opset, "ReduceMean", r, (int64_t[]){3, 2}, 2, -1));
      tk_output(g, reduce(g, opset, "ReduceMax", f, (int64_t[]){-1, -2}, 2, 1));
      tk_output(g, reduce(g, opset, "ReduceMax", f, (int64_t[]){2, -1}, 2, 0));
      check(m, 0, 4, nhwc);
    }
}

/* Rank 5: the pool covers three spatial axes.  Rank 3 (a mean over the
 * last axis, as in a LayerNorm) keeps its reduction. */
static void test_other_ranks(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t a = tk_input(g, "a", 3, (int64_t[]){2, 5, 11});
  int32_t b = tk_input(g, "b", 5, (int64_t[]){1, 4, 3, 5, 6});
  tk_output(g, reduce(g, 13, "ReduceMean", a, (int64_t[]){2}, 1, 0));
  tk_output(g, reduce(g, 13, "ReduceMax", b, (int64_t[]){4, 2, 3}, 3, 1));
  tk_output(g, reduce(g, 13, "ReduceMean", b, (int64_t[]){-3, -1, 3}, 3, 0));
  check(m, 1, 2, false);
}

/* Near misses keep their reduction: the channel axis too, one of two
 * spatial axes, no axes (every axis), and the batch. */
static void test_reductions_kept(void **state) {
  (void)state;
  static const int64_t opsets[2] = {13, 18};
  for (int o = 0; o < 2; o++) {
    int64_t opset = opsets[o];
    kn_ir_model *m = tk_model_new(opset);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 3, 5, 4});
    tk_output(g, reduce(g, opset, "ReduceMean", x, (int64_t[]){1, 2, 3}, 3, 1));
    tk_output(g, reduce(g, opset, "ReduceMean", x, (int64_t[]){2}, 1, 1));
    tk_output(g, reduce(g, opset, "ReduceMax", x, NULL, 0, 0));
    tk_output(g, reduce(g, opset, "ReduceMax", x, (int64_t[]){0, 3}, 2, 1));
    check(m, 4, 0, false);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spatial_reductions),
      cmocka_unit_test(test_other_ranks),
      cmocka_unit_test(test_reductions_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
