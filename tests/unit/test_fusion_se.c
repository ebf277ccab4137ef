/* Squeeze-and-excite into the next convolution (src/passes/fuse_se.c) on
 * small hand-built SE blocks: the channel scale x * Sigmoid(FC(GAP(x)))
 * disappears into the conv that reads it (an input-channel scale S of
 * FusedConv), the results stay those of the unoptimized graph (through the
 * reference and the fast conv kernels), and near misses stay as they are. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testkit.h"

enum { N = 2, C = 6, HW = 5 };

static int32_t conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t k, int64_t group,
                    uint32_t seed, bool bias) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin / group, k, k}, seed, 0);
  int32_t in[3] = {x, w, bias ? tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0) : -1};
  int32_t y = tk_node(g, "Conv", bias ? 3 : 2, in);
  int64_t pad = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (group != 1) assert_true(kn_node_set_int(tk_last(g), "group", group));
  return y;
}

/* s = Sigmoid(Conv1x1(Relu(Conv1x1(GAP(x))))): [N, C, 1, 1] */
static int32_t excite(kn_graph *g, int32_t x) {
  int32_t p = tk_node(g, "GlobalAveragePool", 1, (int32_t[]){x});
  p = tk_node(g, "Relu", 1, (int32_t[]){conv(g, p, C, 2, 1, 1, 10, true)});
  return tk_node(g, "Sigmoid", 1, (int32_t[]){conv(g, p, 2, C, 1, 1, 20, true)});
}

static const kn_node *fused_conv_with_scale(const kn_graph *g) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!n->dead && !strcmp(n->op_type, "FusedConv") && n->n_inputs == 5 && n->inputs[4] >= 0)
      return n;
  }
  return NULL;
}

/* Runs fuse_act and fuse_se; checks results (reference and fast kernels)
 * and whether the scale was folded. */
static void check(kn_ir_model *m, bool fires) {
  kn_graph *g = m->graph;
  tk_prepare(m);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  int32_t muls = tk_count_op(g, "Mul");
  tk_passes_keep_close(m, kn_pass_fuse_act, kn_pass_fuse_se, false);
  if (fires) {
    assert_int_equal(tk_count_op(g, "Mul"), muls - 1);
    const kn_node *f = fused_conv_with_scale(g);
    assert_non_null(f);
    assert_non_null(strstr(f->covers, "Mul"));
  } else {
    assert_null(fused_conv_with_scale(g));
    assert_int_equal(tk_count_op(g, "Mul"), muls);
  }
  tk_assert_fast_close(m);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&ref, &after, false);
  kn_ir_model_free(m);
}

/* EfficientNet's MBConv tail: SE, then the 1x1 projection with its bias
 * (a FusedConv after fuse_act) and the residual. */
static void test_se_projection(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, HW, HW});
  int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, excite(g, x)});
  y = conv(g, y, C, C, 1, 1, 30, true);
  y = tk_node(g, "Add", 2, (int32_t[]){y, x});
  tk_output(g, y);
  check(m, true);
}

/* The scale first, a plain Conv (no bias, nothing to fuse_act) 3x3. */
static void test_se_plain_conv(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, HW, HW});
  int32_t y = tk_node(g, "Mul", 2, (int32_t[]){excite(g, x), x});
  tk_output(g, conv(g, y, C, 4, 3, 1, 40, false));
  check(m, true);
}

/* A depthwise conv reads the scaled map; the batch is dynamic (the scale
 * is known to have x's batch because it pools x). */
static void test_se_depthwise_dynamic_batch(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){-1, C, HW, HW});
  int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, excite(g, x)});
  y = tk_node(g, "Relu", 1, (int32_t[]){conv(g, y, C, C, 3, C, 50, true)});
  tk_output(g, y);
  check(m, true);
}

/* Near misses: the scaled map also read elsewhere; a [1, C, 1, 1] constant
 * against a batch of 2 (broadcast over the batch: fold_bn's business);
 * a scale that is not per channel ([N, C, H, W]). */
static void test_se_misses(void **state) {
  (void)state;
  for (int c = 0; c < 3; c++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, HW, HW});
    int32_t s = c == 1   ? tk_const_rand(g, 4, (int64_t[]){1, C, 1, 1}, 60, 0)
                : c == 2 ? tk_input(g, "s", 4, (int64_t[]){N, C, HW, HW})
                         : excite(g, x);
    int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, s});
    tk_output(g, conv(g, y, C, 4, 1, 1, 70, true));
    if (c == 0) tk_output(g, y);
    check(m, false);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_se_projection),
      cmocka_unit_test(test_se_plain_conv),
      cmocka_unit_test(test_se_depthwise_dynamic_batch),
      cmocka_unit_test(test_se_misses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
