/* An explicit zero Pad into the Conv or AveragePool that reads it
 * (src/passes/fuse_pad.c) on small hand-built graphs: the Pad step goes,
 * its pads are added to the reader's (count_include_pad for the pool), the
 * results stay those of the unoptimized graph through the reference and
 * the fast kernels (after channels_last too), and near misses keep their
 * Pad. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testkit.h"

enum { N = 2, C = 5, H = 7, W = 6, M = 4 };

/* Pad of opset >= 11: pads [0, 0, t, l, 0, 0, b, r] as input 1, the value
 * as input 2 (omitted when value_input is false). */
static int32_t pad11(kn_graph *g, int32_t x, const int64_t sp[4], float value, bool value_input,
                     const char *mode) {
  int64_t pads[8] = {0, 0, sp[0], sp[1], 0, 0, sp[2], sp[3]};
  int32_t in[3] = {x, tk_const_i64(g, 8, pads), value_input ? tk_const_scalar(g, value) : -1};
  int32_t y = tk_node(g, "Pad", value_input ? 3 : 2, in);
  if (mode) assert_true(kn_node_set_string(tk_last(g), "mode", mode));
  return y;
}

static int32_t conv(kn_graph *g, int32_t x, int64_t k, const int64_t *pads) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){M, C, k, k}, 7, 0);
  int32_t in[3] = {x, w, tk_const_rand(g, 1, (int64_t[]){M}, 8, 0)};
  int32_t y = tk_node(g, "Conv", 3, in);
  if (pads) assert_true(kn_node_set_ints(tk_last(g), "pads", pads, 4));
  return y;
}

static int32_t avgpool(kn_graph *g, int32_t x, const int64_t *pads, int64_t cip, int64_t ceil) {
  int32_t y = tk_node(g, "AveragePool", 1, &x);
  kn_node *n = tk_last(g);
  assert_true(kn_node_set_ints(n, "kernel_shape", (int64_t[]){3, 3}, 2));
  if (pads) assert_true(kn_node_set_ints(n, "pads", pads, 4));
  if (cip >= 0) assert_true(kn_node_set_int(n, "count_include_pad", cip));
  if (ceil) {
    assert_true(kn_node_set_int(n, "ceil_mode", 1));
    assert_true(kn_node_set_ints(n, "strides", (int64_t[]){2, 2}, 2));
  }
  return y;
}

/* Runs fuse_pad (then channels_last when `nhwc`); checks the Pad count and
 * the results, reference and fast kernels, 1 and 2 threads. */
static void check(kn_ir_model *m, int32_t pads_left, bool nhwc) {
  kn_graph *g = m->graph;
  tk_prepare(m);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  tk_passes_keep_close(m, kn_pass_fuse_pad, nhwc ? kn_pass_channels_last : NULL, false);
  assert_int_equal(tk_count_op(g, "Pad"), pads_left);
  tk_assert_fast_close(m);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&ref, &after, false);
  kn_ir_model_free(m);
}

/* TF "SAME": asymmetric pads before a 3x3 conv with pads of its own, and
 * before a 1x1 conv without; both fused, through channels_last too. */
static void test_pad_into_conv(void **state) {
  (void)state;
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, H, W});
    int32_t p = pad11(g, x, (int64_t[]){0, 1, 1, 2}, 0.0f, true, "constant");
    int32_t y = conv(g, p, 3, (int64_t[]){1, 0, 0, 1});
    int32_t q = pad11(g, x, (int64_t[]){2, 0, 0, 1}, 0.0f, false, NULL);
    int32_t z = conv(g, q, 1, NULL);
    tk_output(g, y);
    tk_output(g, z);
    check(m, 0, nhwc);
  }
}

/* torchvision's Inception: Pad then AveragePool 3x3 stride 1 without pads
 * (count_include_pad unset, then 0), and onto a pool already counting its
 * own pads; fused, results equal (the divisor counts the zeros). */
static void test_pad_into_average_pool(void **state) {
  (void)state;
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, H, W});
    int32_t a = avgpool(g, pad11(g, x, (int64_t[]){1, 1, 1, 1}, 0.0f, true, NULL), NULL, -1, 0);
    int32_t b = avgpool(g, pad11(g, x, (int64_t[]){0, 2, 1, 0}, 0.0f, true, NULL), NULL, 0, 0);
    int32_t c = avgpool(g, pad11(g, x, (int64_t[]){1, 0, 0, 1}, 0.0f, true, NULL),
                        (int64_t[]){0, 1, 1, 0}, 1, 0);
    tk_output(g, a);
    tk_output(g, b);
    tk_output(g, c);
    check(m, 0, nhwc);
  }
}

/* Near misses keep their Pad: a MaxPool (pads read -inf), a non-zero
 * value, reflect mode, a pool excluding its own pads, ceil_mode, a Pad
 * read twice, and pads on the channel axis. */
static void test_pad_kept(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, H, W});
  const int64_t one[4] = {1, 1, 1, 1};
  int32_t mp = pad11(g, x, one, 0.0f, true, NULL);
  int32_t y1 = tk_node(g, "MaxPool", 1, &mp);
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){3, 3}, 2));
  int32_t y2 = conv(g, pad11(g, x, one, 0.5f, true, NULL), 3, NULL);
  int32_t y3 = conv(g, pad11(g, x, one, 0.0f, true, "reflect"), 3, NULL);
  int32_t y4 = avgpool(g, pad11(g, x, one, 0.0f, true, NULL), one, 0, 0);
  int32_t y5 = avgpool(g, pad11(g, x, one, 0.0f, true, NULL), NULL, -1, 1);
  int32_t tw = pad11(g, x, one, 0.0f, true, NULL);
  int32_t y6 = conv(g, tw, 3, NULL);
  int32_t y7 = tk_node(g, "Relu", 1, &tw);
  int64_t cp[8] = {0, 1, 1, 1, 0, 0, 1, 1};
  int32_t y8 = tk_node(g, "Pad", 2, (int32_t[]){x, tk_const_i64(g, 8, cp)});
  int32_t y8c = avgpool(g, y8, NULL, -1, 0);
  int32_t outs[] = {y1, y2, y3, y4, y5, y6, y7, y8c};
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) tk_output(g, outs[k]);
  check(m, 7, false);
}

/* Opset 2's Pad (pads and value as attributes) into a conv. */
static void test_pad_opset2(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(9);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){N, C, H, W});
  int32_t p = tk_node(g, "Pad", 1, &x);
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){0, 0, 1, 0, 0, 0, 0, 1}, 8));
  assert_true(kn_node_set_float(tk_last(g), "value", 0.0f));
  tk_output(g, conv(g, p, 3, NULL));
  check(m, 0, false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pad_into_conv),
      cmocka_unit_test(test_pad_into_average_pool),
      cmocka_unit_test(test_pad_kept),
      cmocka_unit_test(test_pad_opset2),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
