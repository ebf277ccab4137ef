/* Channels-last regions (src/passes/channels_last.c, src/ops/layout.c) on
 * hand-built CNN blocks: convolutions, pools and the elementwise ops between
 * them become Nhwc steps with Transposes only at the edges, and the results
 * stay those of the NCHW graph, through the reference (the Nhwc ops'
 * transposing wrappers) and through the fast channels-last kernels on every
 * ISA, 1 and 2 threads. */
#include <math.h>
#include <stdlib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "ops/tactic.h"
#include "testkit.h"

static int32_t conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t k, int64_t group,
                    int64_t stride, uint32_t seed, bool bias) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin / group, k, k}, seed, 0);
  int32_t in[3] = {x, w, bias ? tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0) : -1};
  int32_t y = tk_node(g, "Conv", bias ? 3 : 2, in);
  int64_t pad = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (group != 1) assert_true(kn_node_set_int(tk_last(g), "group", group));
  if (stride != 1)
    assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){stride, stride}, 2));
  return y;
}

static int32_t count_live(const kn_graph *g, const char *prefix) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && !strncmp(g->nodes[i].op_type, prefix, strlen(prefix))) c++;
  return c;
}

/* Runs fuse_act then channels_last (results checked close by the helper),
 * checks how many steps went channels-last and how many Transposes were
 * added, then the fast kernels against the reference. */
/* Fast against reference: close up to rounding, or with `tol` > 0 (the
 * Winograd tactic's transform error) within tol times the output's
 * largest magnitude. */
static void fast_close(tk_results *ref, tk_results *fast, double tol) {
  if (tol <= 0) {
    tk_assert_close(ref, fast, false);
    return;
  }
  assert_int_equal(ref->n, fast->n);
  for (int32_t i = 0; i < ref->n; i++) {
    const kn_tensor *r = &ref->outs[i].t;
    double big = 1;
    for (int64_t k = 0; k < kn_tensor_numel(r); k++)
      big = fmax(big, fabs((double)((const float *)r->data)[k]));
    double d = tk_max_abs_diff(r, &fast->outs[i].t);
    print_message("    output %d: max |fast - reference| %g, largest |reference| %g\n", (int)i,
                  d, big);
    if (d > tol * big) fail_msg("output %d: error %g > %g x %g", (int)i, d, tol, big);
  }
  tk_results_free(ref);
  tk_results_free(fast);
}

static void check_tol(kn_ir_model *m, int32_t min_nhwc, int32_t max_transposes, double tol) {
  kn_graph *g = m->graph;
  tk_prepare(m);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  int32_t t0 = tk_count_op(g, "Transpose");
  tk_passes_keep_close(m, kn_pass_fuse_act, NULL, false);
  tk_passes_keep_close(m, kn_pass_channels_last, NULL, false);
  /* a second sweep finds nothing left to convert */
  assert_false(tk_run_pass(m, kn_pass_channels_last));
  int32_t nhwc = count_live(g, "Nhwc");
  int32_t added = tk_count_op(g, "Transpose") - t0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (getenv("TK_VERBOSE") && !g->nodes[i].dead) print_message("      %s %s\n", g->nodes[i].op_type, g->nodes[i].name);
  print_message("    %d channels-last steps, %d transposes added\n", nhwc, added);
  assert_true(nhwc >= min_nhwc);
  assert_true(added >= 1 && added <= max_transposes);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&ref, &after, false);
  uint64_t feats = kn_cpu_features();
  for (int32_t isa = KN_ISA_PORTABLE; isa <= KN_ISA_AVX512; isa++) {
    if (!kn_isa_available((kn_isa)isa, feats)) continue;
    assert_int_equal(tk_fast_tactic(m, "NhwcFusedConv", isa) > 0, 1);
    tk_results again = tk_run(m, TK_FILL_SEEDED);
    tk_results one = tk_run_fast(m, TK_FILL_SEEDED, isa, 1);
    fast_close(&again, &one, tol);
    one = tk_run_fast(m, TK_FILL_SEEDED, isa, 1);
    tk_results two = tk_run_fast(m, TK_FILL_SEEDED, isa, 2);
    tk_assert_same(&one, &two);
  }
  kn_ir_model_free(m);
}

static void check(kn_ir_model *m, int32_t min_nhwc, int32_t max_transposes) {
  check_tol(m, min_nhwc, max_transposes, 0);
}

/* ResNet's shape: stem conv + pool, a Pad, a bottleneck with a strided
 * projection, the residual Add and Relu, global pooling and a classifier
 * read through Flatten (one Transpose in, one out). */
static void test_resnet_block(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 3, 19, 17});
  int32_t y = tk_node(g, "Relu", 1, (int32_t[]){conv(g, x, 3, 8, 7, 1, 2, 1, true)});
  y = tk_node(g, "MaxPool", 1, (int32_t[]){y});
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){3, 3}, 2));
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){1, 1, 1, 1}, 4));
  assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){2, 2}, 2));
  /* an asymmetric Pad (pads as a constant input, opset 13) */
  int32_t pads = tk_const_i64(g, 8, (int64_t[]){0, 0, 1, 0, 0, 0, 0, 2});
  y = tk_node(g, "Pad", 2, (int32_t[]){y, pads});
  int32_t a = tk_node(g, "Relu", 1, (int32_t[]){conv(g, y, 8, 4, 1, 1, 1, 10, true)});
  a = tk_node(g, "Relu", 1, (int32_t[]){conv(g, a, 4, 4, 3, 1, 2, 20, true)});
  a = conv(g, a, 4, 16, 1, 1, 1, 30, true);
  int32_t sc = conv(g, y, 8, 16, 1, 1, 2, 40, true);
  y = tk_node(g, "Relu", 1, (int32_t[]){tk_node(g, "Add", 2, (int32_t[]){a, sc})});
  y = tk_node(g, "GlobalAveragePool", 1, (int32_t[]){y});
  y = tk_node(g, "Flatten", 1, (int32_t[]){y});
  int32_t w = tk_const_rand(g, 2, (int64_t[]){16, 5}, 50, 0);
  tk_output(g, tk_node(g, "MatMul", 2, (int32_t[]){y, w}));
  check(m, 7, 2);
}

/* x -> QuantizeLinear -> DequantizeLinear, per tensor (u8 zero point z). */
static int32_t qdq(kn_graph *g, int32_t x, float scale, uint8_t z) {
  int32_t s = tk_const_scalar(g, scale), zp = tk_const_u8(g, z);
  int32_t q = tk_node(g, "QuantizeLinear", 3, (int32_t[]){x, s, zp});
  return tk_node(g, "DequantizeLinear", 3, (int32_t[]){q, s, zp});
}

/* ONNX Runtime's Q/DQ form of a residual block: Q/DQ pairs on the Add's
 * inputs and output and on the MaxPool's input, as its quantizer leaves them
 * (the ones before convs are the qdq pass's); they are elementwise per
 * tensor and join the region as they are: no Transposes between the convs.
 * Fast against reference within a quantization step (0.002) of the
 * output's range: a value on a rounding edge may take the next code. */
static void test_qdq_in_region(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 8, 12, 10});
  int32_t a = tk_node(g, "Relu", 1, (int32_t[]){conv(g, x, 8, 8, 3, 1, 1, 60, true)});
  a = conv(g, a, 8, 8, 1, 1, 1, 61, true);
  int32_t sum = tk_node(g, "Add", 2, (int32_t[]){qdq(g, a, 0.002f, 128), qdq(g, x, 0.002f, 120)});
  int32_t y = qdq(g, tk_node(g, "Relu", 1, (int32_t[]){sum}), 0.002f, 0);
  y = tk_node(g, "MaxPool", 1, (int32_t[]){qdq(g, y, 0.002f, 0)});
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){2, 2}, 2));
  tk_output(g, conv(g, y, 8, 4, 3, 1, 1, 62, true));
  /* 3 convs and the pool; Transposes: x in, x's own Q/DQ (before any conv,
   * in NCHW) into the Add, the result out */
  check_tol(m, 4, 3, 0.002);
}

/* MobileNet's and EfficientNet's: depthwise convs, Clip (Relu6) with
 * scalar bounds, a squeeze-and-excite left unfused (its [N, C, 1, 1] scale
 * is channels-last too), a per-channel constant Mul, PRelu, a Concat of two
 * branches on the channel axis, a BatchNormalization after it, AveragePool,
 * and a graph output read in
 * the middle of the region (a Transpose back). */
static void test_mobile_block(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  enum { C = 24 };
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 5, 11, 13});
  int32_t y = conv(g, x, 5, C, 1, 1, 1, 1, true);
  int32_t lo = tk_const_scalar(g, 0.0f), hi = tk_const_scalar(g, 6.0f);
  y = tk_node(g, "Clip", 3, (int32_t[]){y, lo, hi});
  y = conv(g, y, C, C, 3, C, 1, 10, true);
  y = tk_node(g, "Clip", 3, (int32_t[]){y, lo, hi});
  int32_t s = tk_node(g, "GlobalAveragePool", 1, (int32_t[]){y});
  s = tk_node(g, "Sigmoid", 1, (int32_t[]){conv(g, s, C, C, 1, 1, 1, 20, true)});
  int32_t mid = tk_node(g, "Mul", 2, (int32_t[]){y, s});
  tk_output(g, mid);
  int32_t k = tk_const_rand(g, 3, (int64_t[]){C, 1, 1}, 30, 0);
  y = tk_node(g, "Mul", 2, (int32_t[]){mid, k});
  int32_t slope = tk_const_rand(g, 3, (int64_t[]){C, 1, 1}, 40, 0);
  y = tk_node(g, "PRelu", 2, (int32_t[]){y, slope});
  int32_t b1 = conv(g, y, C, 7, 5, 1, 2, 50, true);
  int32_t b2 = conv(g, y, C, 9, 3, 1, 2, 60, false);
  y = tk_node(g, "Concat", 2, (int32_t[]){b1, b2});
  assert_true(kn_node_set_int(tk_last(g), "axis", 1));
  /* a BatchNormalization fold_bn cannot fold (it follows a Concat) */
  int32_t bn[5] = {y};
  for (int32_t q = 0; q < 4; q++) /* the variance (q = 3) positive */
    bn[q + 1] = tk_const_rand(g, 1, (int64_t[]){16}, 70 + q, q == 3 ? 2.0f : 0.0f);
  y = tk_node(g, "BatchNormalization", 5, bn);
  assert_true(kn_node_set_float(tk_last(g), "epsilon", 0.5f));
  y = tk_node(g, "AveragePool", 1, (int32_t[]){y});
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){2, 2}, 2));
  tk_output(g, y);
  check(m, 7, 3);
}

/* A region that ends in an op it cannot take (Softmax over channels) and
 * starts again after it: each edge gets its Transpose; a Concat joins the
 * region with its NCHW input transposed in (axis -3 becomes 3). */
static void test_region_edges(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 4, 6, 6});
  int32_t y = conv(g, x, 4, 6, 3, 1, 1, 1, true);
  y = tk_node(g, "Softmax", 1, (int32_t[]){y});
  assert_true(kn_node_set_int(tk_last(g), "axis", 1));
  int32_t sm = y;
  y = conv(g, y, 6, 3, 3, 3, 1, 10, true);
  /* a Concat of a channels-last conv and the Softmax (NCHW) result */
  y = tk_node(g, "Concat", 2, (int32_t[]){y, sm});
  assert_true(kn_node_set_int(tk_last(g), "axis", -3));
  tk_output(g, y);
  check(m, 2, 4);
}

/* Two 3x3 convs of 16 channels on an 8x8 map with a residual: the
 * channels-last Winograd tactic, no Transpose between them. */
static void test_winograd_region(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 16, 8, 8});
  int32_t y = tk_node(g, "Relu", 1, (int32_t[]){conv(g, x, 16, 16, 3, 1, 1, 1, true)});
  y = tk_node(g, "Add", 2, (int32_t[]){conv(g, y, 16, 16, 3, 1, 1, 10, true), x});
  tk_output(g, tk_node(g, "Relu", 1, (int32_t[]){y}));
  tk_prepare(m);
  assert_true(tk_run_pass(m, kn_pass_fuse_act));
  assert_true(tk_run_pass(m, kn_pass_channels_last));
  assert_int_equal(tk_fast_tactic(m, "NhwcFusedConv", KN_ISA_PORTABLE),
                   KN_TACTIC_conv_winograd_nhwc);
  kn_ir_model_free(m);
  m = tk_model_new(13);
  g = m->graph;
  x = tk_input(g, "x", 4, (int64_t[]){2, 16, 8, 8});
  y = tk_node(g, "Relu", 1, (int32_t[]){conv(g, x, 16, 16, 3, 1, 1, 1, true)});
  y = tk_node(g, "Add", 2, (int32_t[]){conv(g, y, 16, 16, 3, 1, 1, 10, true), x});
  tk_output(g, tk_node(g, "Relu", 1, (int32_t[]){y}));
  check_tol(m, 2, 2, 1e-5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resnet_block),
      cmocka_unit_test(test_mobile_block),
      cmocka_unit_test(test_region_edges),
      cmocka_unit_test(test_winograd_region),
      cmocka_unit_test(test_qdq_in_region),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
