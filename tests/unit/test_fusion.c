/* Weight folding (fold_bn) and epilogue fusion (fuse_act) on small
 * hand-built graphs: where each fires, where it must not, and that the
 * graph's results stay the same up to float rounding.  When the exported
 * real models are cached (~/.cache/kiln/models), their op histograms after
 * the whole optimizer are printed and checked for the fusions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "passes/pass.h"
#include "testkit.h"

/* ---- helpers ----------------------------------------------------------- */

/* Runs the passes (then dce) and checks the results; returns whether the
 * first changed the graph. */
static bool passes_keep_results(kn_ir_model *m, kn_pass_fn first, kn_pass_fn second) {
  return tk_passes_keep_close(m, first, second, false);
}

static void conv_attrs(kn_node *n, int64_t pad, int64_t group) {
  assert_true(kn_node_set_ints(n, "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (group != 1) assert_true(kn_node_set_int(n, "group", group));
}

static const int64_t D1[] = {1, 3, 6, 6};

/* ---- fold_bn ------------------------------------------------------------ */

static void test_fold_bn_conv(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, D1);
  int32_t w = tk_const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 1, 0);
  int32_t b = tk_const_rand(g, 1, (int64_t[]){4}, 2, 0);
  int32_t y = tk_node(g, "Conv", 3, (int32_t[]){x, w, b});
  conv_attrs(tk_last(g), 1, 1);
  int64_t d4 = 4;
  y = tk_node(g, "BatchNormalization", 5,
           (int32_t[]){y, tk_const_rand(g, 1, &d4, 3, 0), tk_const_rand(g, 1, &d4, 4, 0),
                       tk_const_rand(g, 1, &d4, 5, 0), tk_const_rand(g, 1, &d4, 6, 2.0f)});
  assert_true(kn_node_set_float(tk_last(g), "epsilon", 1e-3f));
  y = tk_node(g, "Mul", 2, (int32_t[]){tk_const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 7, 0), y});
  y = tk_node(g, "Add", 2, (int32_t[]){y, tk_const_rand(g, 3, (int64_t[]){4, 1, 1}, 8, 0)});
  y = tk_node(g, "Sub", 2, (int32_t[]){y, tk_const_scalar(g, 0.25f)});
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(tk_count_op(g, NULL), 1);
  assert_int_equal(tk_count_op(g, "Conv"), 1);
  assert_non_null(g->nodes[0].covers);
  assert_non_null(strstr(g->nodes[0].covers, "BatchNormalization"));
  kn_ir_model_free(m);
}

static void test_fold_bn_conv_transpose_group(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 4, 5, 5});
  /* C = 4, group 2, M/g = 3: 6 output channels */
  int32_t w = tk_const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 11, 0);
  int32_t y = tk_node(g, "ConvTranspose", 2, (int32_t[]){x, w});
  assert_true(kn_node_set_int(tk_last(g), "group", 2));
  assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){2, 2}, 2));
  y = tk_node(g, "Mul", 2, (int32_t[]){y, tk_const_rand(g, 4, (int64_t[]){1, 6, 1, 1}, 12, 0)});
  y = tk_node(g, "Add", 2, (int32_t[]){y, tk_const_rand(g, 3, (int64_t[]){6, 1, 1}, 13, 0)});
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(tk_count_op(g, NULL), 1);
  assert_int_equal(g->nodes[0].n_inputs, 3); /* a bias was added */
  kn_ir_model_free(m);
}

static void test_fold_bn_gemm_matmul(void **state) {
  (void)state;
  /* Gemm with transB, beta and a [1, N] C; then BN over columns and Mul */
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t a = tk_input(g, "a", 2, (int64_t[]){3, 5});
  int32_t y = tk_node(g, "Gemm", 3,
                   (int32_t[]){a, tk_const_rand(g, 2, (int64_t[]){4, 5}, 21, 0),
                               tk_const_rand(g, 2, (int64_t[]){1, 4}, 22, 0)});
  assert_true(kn_node_set_int(tk_last(g), "transB", 1));
  assert_true(kn_node_set_float(tk_last(g), "beta", 0.5f));
  assert_true(kn_node_set_float(tk_last(g), "alpha", 1.5f));
  int64_t d4 = 4;
  y = tk_node(g, "BatchNormalization", 5,
           (int32_t[]){y, tk_const_rand(g, 1, &d4, 23, 0), tk_const_rand(g, 1, &d4, 24, 0),
                       tk_const_rand(g, 1, &d4, 25, 0), tk_const_rand(g, 1, &d4, 26, 2.0f)});
  y = tk_node(g, "Mul", 2, (int32_t[]){y, tk_const_rand(g, 1, &d4, 27, 0)});
  tk_output(g, y);
  /* 2-D MatMul + BN: becomes a Gemm */
  int32_t a2 = tk_input(g, "a2", 2, (int64_t[]){3, 5});
  int32_t y2 =
      tk_node(g, "MatMul", 2, (int32_t[]){a2, tk_const_rand(g, 2, (int64_t[]){5, 4}, 28, 0)});
  y2 = tk_node(g, "BatchNormalization", 5,
            (int32_t[]){y2, tk_const_rand(g, 1, &d4, 29, 0), tk_const_rand(g, 1, &d4, 30, 0),
                        tk_const_rand(g, 1, &d4, 31, 0), tk_const_rand(g, 1, &d4, 32, 2.0f)});
  tk_output(g, y2);
  /* 3-D MatMul: the Mul folds, the Add (needing a bias) stays */
  int32_t a3 = tk_input(g, "a3", 3, (int64_t[]){2, 3, 5});
  int32_t y3 =
      tk_node(g, "MatMul", 2, (int32_t[]){a3, tk_const_rand(g, 2, (int64_t[]){5, 4}, 33, 0)});
  y3 = tk_node(g, "Mul", 2, (int32_t[]){y3, tk_const_rand(g, 3, (int64_t[]){1, 1, 4}, 34, 0)});
  y3 = tk_node(g, "Add", 2, (int32_t[]){y3, tk_const_rand(g, 1, &d4, 35, 0)});
  tk_output(g, y3);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(tk_count_op(g, "Gemm"), 2);
  assert_int_equal(tk_count_op(g, "MatMul"), 1);
  assert_int_equal(tk_count_op(g, "BatchNormalization"), 0);
  assert_int_equal(tk_count_op(g, "Mul"), 0);
  assert_int_equal(tk_count_op(g, "Add"), 1);
  kn_ir_model_free(m);
}

static void test_fold_bn_must_not(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, D1);
  int64_t d4 = 4;
  /* conv output read twice */
  int32_t c1 =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 41, 0)});
  int32_t y1 =
      tk_node(g, "Mul", 2, (int32_t[]){c1, tk_const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 42, 0)});
  tk_output(g, y1);
  tk_output(g, tk_node(g, "Relu", 1, &c1));
  /* a Mul varying along a spatial axis */
  int32_t c2 =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 43, 0)});
  tk_output(g, tk_node(g, "Mul", 2,
                       (int32_t[]){c2, tk_const_rand(g, 4, (int64_t[]){1, 1, 1, 6}, 44, 0)}));
  /* [4] aligns with the last axis, not the channels */
  int32_t c3 =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 45, 0)});
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){c3, tk_const_rand(g, 1, &d4, 46, 0)}));
  /* BN statistics that are graph inputs */
  int32_t mean = tk_input(g, "mean", 1, &d4);
  int32_t c4 =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 47, 0)});
  tk_output(g, tk_node(g, "BatchNormalization", 5,
                 (int32_t[]){c4, tk_const_rand(g, 1, &d4, 48, 0), tk_const_rand(g, 1, &d4, 49, 0),
                             mean, tk_const_rand(g, 1, &d4, 50, 2.0f)}));
  /* conv output is a graph output */
  int32_t c5 =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 1, 1}, 51, 0)});
  tk_output(g, c5);
  tk_output(g, tk_node(g, "Add", 2,
                       (int32_t[]){c5, tk_const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 52, 0)}));
  /* weights that are a graph input */
  int32_t wi = tk_input(g, "w", 4, (int64_t[]){4, 3, 1, 1});
  int32_t c6 = tk_node(g, "Conv", 2, (int32_t[]){x, wi});
  tk_output(g, tk_node(g, "Mul", 2, (int32_t[]){c6, tk_const_scalar(g, 3.0f)}));
  tk_prepare(m);
  int32_t nodes = tk_count_op(g, NULL);
  assert_false(passes_keep_results(m, kn_pass_fold_bn, NULL));
  assert_int_equal(tk_count_op(g, NULL), nodes);
  kn_ir_model_free(m);
}

/* ---- fuse_act ----------------------------------------------------------- */

/* ResNet's block end: Conv (+ bias Add) + residual Add + Relu. */
static void test_fuse_conv_residual_relu(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, D1);
  int32_t z = tk_input(g, "z", 4, (int64_t[]){1, 4, 6, 6});
  int32_t y = tk_node(g, "Conv", 3,
                   (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 61, 0),
                               tk_const_rand(g, 1, (int64_t[]){4}, 62, 0)});
  conv_attrs(tk_last(g), 1, 1);
  y = tk_node(g, "Add", 2, (int32_t[]){tk_const_rand(g, 4, (int64_t[]){1, 4, 1, 1}, 63, 0), y});
  y = tk_node(g, "Add", 2, (int32_t[]){y, z});
  y = tk_node(g, "Relu", 1, &y);
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(tk_count_op(g, NULL), 1);
  const kn_node *f = tk_find_op(g, "FusedConv");
  assert_non_null(f);
  assert_int_equal(f->n_inputs, 4);
  assert_int_equal(f->inputs[3], z);
  assert_int_equal(kn_node_attr(f, "residual_before_activation")->i, 1);
  assert_string_equal(kn_node_attr(f, "activation")->s, "Relu");
  kn_ir_model_free(m);
}

/* Each activation after a (grouped, depthwise and pointwise) conv, and the
 * residual after the activation. */
static void test_fuse_conv_activations(void **state) {
  (void)state;
  static const char *const acts[] = {"Relu", "Clip", "LeakyRelu", "HardSigmoid",
                                     "HardSwish", "Sigmoid", "Tanh", "Silu"};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
    for (int kind = 0; kind < 3; kind++) {
      kn_ir_model *m = tk_model_new(14);
      kn_graph *g = m->graph;
      int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 4, 7, 7});
      int64_t wd[3][4] = {{6, 2, 3, 3}, {4, 1, 3, 3}, {6, 4, 1, 1}};
      int32_t y = tk_node(g, "Conv", 2,
                          (int32_t[]){x, tk_const_rand(g, 4, wd[kind], 70 + (uint32_t)kind, 0)});
      conv_attrs(tk_last(g), kind == 2 ? 0 : 1, kind == 0 ? 2 : kind == 1 ? 4 : 1);
      int64_t mch = wd[kind][0];
      if (!strcmp(acts[a], "Clip")) {
        y = tk_node(g, "Clip", 3,
                    (int32_t[]){y, tk_constant_node(g, 0.0f), tk_constant_node(g, 0.5f)});
      } else if (!strcmp(acts[a], "Silu")) {
        int32_t s = tk_node(g, "Sigmoid", 1, &y);
        y = tk_node(g, "Mul", 2, (int32_t[]){s, y});
      } else {
        y = tk_node(g, acts[a], 1, &y);
        if (!strcmp(acts[a], "LeakyRelu"))
          assert_true(kn_node_set_float(tk_last(g), "alpha", 0.3f));
        if (!strcmp(acts[a], "HardSigmoid")) {
          assert_true(kn_node_set_float(tk_last(g), "alpha", 0.3f));
          assert_true(kn_node_set_float(tk_last(g), "beta", 0.4f));
        }
      }
      int32_t z = tk_input(g, "z", 4, (int64_t[]){1, mch, 1, 7}); /* broadcast residual */
      y = tk_node(g, "Add", 2, (int32_t[]){z, y});
      tk_output(g, y);
      tk_prepare(m);
      assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
      if (tk_count_op(g, NULL) != 1) /* dce dropped the Clip bounds' Constants */
        fail_msg("%s kind %d: %d nodes left", acts[a], kind, (int)tk_count_op(g, NULL));
      const kn_node *f = tk_find_op(g, "FusedConv");
      assert_non_null(f);
      assert_string_equal(kn_node_attr(f, "activation")->s, acts[a]);
      assert_int_equal(kn_node_attr(f, "residual_before_activation")->i, 0);
      kn_ir_model_free(m);
    }
  }
}

/* A BERT layer piece: MatMul + bias + erf GELU (both export orders), then
 * MatMul + bias + residual; and a Gemm with alpha, beta, transA. */
static void test_fuse_gemm(void **state) {
  (void)state;
  for (int order = 0; order < 3; order++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t a = tk_input(g, "a", 3, (int64_t[]){2, 3, 8});
    int32_t x =
        tk_node(g, "MatMul", 2, (int32_t[]){a, tk_const_rand(g, 2, (int64_t[]){8, 6}, 81, 0)});
    x = tk_node(g, "Add", 2, (int32_t[]){tk_const_rand(g, 1, (int64_t[]){6}, 82, 0), x});
    int32_t d = order == 1 ? tk_node(g, "Mul", 2, (int32_t[]){x, tk_const_scalar(g, 0.70710678f)})
                           : tk_node(g, "Div", 2, (int32_t[]){x, tk_const_scalar(g, 1.4142135f)});
    int32_t e = tk_node(g, "Erf", 1, &d);
    int32_t p = tk_node(g, "Add", 2, (int32_t[]){e, tk_const_scalar(g, 1.0f)});
    int32_t y;
    if (order == 0) { /* torch: (x * p) * 0.5 */
      y = tk_node(g, "Mul", 2, (int32_t[]){x, p});
      y = tk_node(g, "Mul", 2, (int32_t[]){y, tk_const_scalar(g, 0.5f)});
    } else if (order == 1) { /* HF: (x * 0.5) * p */
      int32_t h = tk_node(g, "Mul", 2, (int32_t[]){x, tk_const_scalar(g, 0.5f)});
      y = tk_node(g, "Mul", 2, (int32_t[]){h, p});
    } else { /* x * (p * 0.5) */
      int32_t h = tk_node(g, "Mul", 2, (int32_t[]){tk_const_scalar(g, 0.5f), p});
      y = tk_node(g, "Mul", 2, (int32_t[]){h, x});
    }
    int32_t y2 =
        tk_node(g, "MatMul", 2, (int32_t[]){y, tk_const_rand(g, 2, (int64_t[]){6, 8}, 83, 0)});
    y2 = tk_node(g, "Add", 2, (int32_t[]){y2, tk_const_rand(g, 1, (int64_t[]){8}, 84, 0)});
    y2 = tk_node(g, "Add", 2, (int32_t[]){a, y2});
    tk_output(g, y2);
    /* Gemm: op(A) = A^T, alpha, beta, C [3, 1]; then bias [1, 4] and Tanh */
    int32_t at = tk_input(g, "at", 2, (int64_t[]){5, 3});
    int32_t gm = tk_node(g, "Gemm", 3,
                      (int32_t[]){at, tk_const_rand(g, 2, (int64_t[]){5, 4}, 85, 0),
                                  tk_const_rand(g, 2, (int64_t[]){3, 1}, 86, 0)});
    assert_true(kn_node_set_int(tk_last(g), "transA", 1));
    assert_true(kn_node_set_float(tk_last(g), "alpha", 0.5f));
    assert_true(kn_node_set_float(tk_last(g), "beta", 2.0f));
    gm = tk_node(g, "Add", 2, (int32_t[]){gm, tk_const_rand(g, 2, (int64_t[]){1, 4}, 87, 0)});
    gm = tk_node(g, "Tanh", 1, &gm);
    tk_output(g, gm);
    tk_prepare(m);
    assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
    if (tk_count_op(g, NULL) != 3 || tk_count_op(g, "FusedGemm") != 3)
      fail_msg("order %d: %d nodes, %d FusedGemm", order, (int)tk_count_op(g, NULL),
               (int)tk_count_op(g, "FusedGemm"));
    kn_ir_model_free(m);
  }
}

static void test_fuse_must_not(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, D1);
  int64_t w1[] = {4, 3, 1, 1};
  /* two readers of the conv output */
  int32_t c1 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 91, 0)});
  tk_output(g, tk_node(g, "Relu", 1, &c1));
  tk_output(g, tk_node(g, "Neg", 1, &c1));
  /* a non-constant addend that enlarges the result */
  int32_t big = tk_input(g, "big", 4, (int64_t[]){2, 4, 6, 6});
  int32_t c3 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 94, 0)});
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){c3, big}));
  /* a graph output in the middle */
  int32_t c4 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 95, 0)});
  tk_output(g, c4);
  tk_output(g, tk_node(g, "Sigmoid", 1, &c4));
  /* SiLU whose input has a third reader */
  int32_t c5 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 96, 0)});
  int32_t s5 = tk_node(g, "Sigmoid", 1, &c5);
  tk_output(g, tk_node(g, "Mul", 2, (int32_t[]){c5, s5}));
  tk_output(g, tk_node(g, "Neg", 1, &c5));
  /* Clip with a bound that is not constant */
  int32_t hi = tk_input(g, "hi", 0, NULL);
  int32_t c6 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 97, 0)});
  tk_output(g, tk_node(g, "Clip", 3, (int32_t[]){c6, tk_const_scalar(g, 0.0f), hi}));
  /* MatMul by a non-constant B */
  int32_t ma = tk_input(g, "ma", 2, (int64_t[]){3, 5}),
          mb = tk_input(g, "mb", 2, (int64_t[]){5, 4});
  int32_t mm = tk_node(g, "MatMul", 2, (int32_t[]){ma, mb});
  tk_output(g, tk_node(g, "Relu", 1, &mm));
  tk_prepare(m);
  int32_t nodes = tk_count_op(g, NULL);
  assert_false(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(tk_count_op(g, NULL), nodes);
  kn_ir_model_free(m);

  /* a constant [6] aligns with the width, not the channels: not a bias,
   * but exact as a broadcast residual */
  m = tk_model_new(13);
  g = m->graph;
  x = tk_input(g, "x", 4, D1);
  int32_t c2 = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 92, 0)});
  int32_t k6 = tk_const_rand(g, 1, (int64_t[]){6}, 93, 0);
  tk_output(g, tk_node(g, "Add", 2, (int32_t[]){c2, k6}));
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  const kn_node *f2 = tk_find_op(g, "FusedConv");
  assert_non_null(f2);
  assert_int_equal(f2->n_inputs, 4);
  assert_int_equal(f2->inputs[2], -1);
  assert_int_equal(f2->inputs[3], k6);
  kn_ir_model_free(m);

  /* a graph output after the bias: the bias is absorbed, the Relu is not */
  m = tk_model_new(13);
  g = m->graph;
  x = tk_input(g, "x", 4, D1);
  int32_t c = tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, w1, 98, 0)});
  c = tk_node(g, "Add", 2, (int32_t[]){c, tk_const_rand(g, 3, (int64_t[]){4, 1, 1}, 99, 0)});
  tk_output(g, c);
  tk_output(g, tk_node(g, "Relu", 1, &c));
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fuse_act, NULL));
  assert_int_equal(tk_count_op(g, "FusedConv"), 1);
  assert_int_equal(tk_count_op(g, "Relu"), 1);
  assert_null(kn_node_attr(tk_find_op(g, "FusedConv"), "activation"));
  kn_ir_model_free(m);
}

/* fold_bn then fuse_act then the whole optimizer agree with the original. */
static void test_fold_then_fuse(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, D1);
  int64_t d4 = 4;
  int32_t y =
      tk_node(g, "Conv", 2, (int32_t[]){x, tk_const_rand(g, 4, (int64_t[]){4, 3, 3, 3}, 101, 0)});
  conv_attrs(tk_last(g), 1, 1);
  y = tk_node(g, "BatchNormalization", 5,
           (int32_t[]){y, tk_const_rand(g, 1, &d4, 102, 0), tk_const_rand(g, 1, &d4, 103, 0),
                       tk_const_rand(g, 1, &d4, 104, 0), tk_const_rand(g, 1, &d4, 105, 2.0f)});
  y = tk_node(g, "Clip", 3, (int32_t[]){y, tk_const_scalar(g, 0.0f), tk_const_scalar(g, 6.0f)});
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_fold_bn, kn_pass_fuse_act));
  assert_int_equal(tk_count_op(g, NULL), 1);
  const kn_node *f = tk_find_op(g, "FusedConv");
  assert_non_null(f);
  assert_float_equal(kn_node_attr(f, "activation_max")->f, 6.0f, 0);
  kn_ir_model_free(m);
}

/* ---- real models (skipped when not cached) ------------------------------- */

typedef struct hist {
  const char *op[64];
  int32_t n[64];
  int32_t count;
} hist;

static void histogram(const kn_graph *g, hist *h) {
  memset(h, 0, sizeof *h);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int32_t k = 0;
    while (k < h->count && strcmp(h->op[k], g->nodes[i].op_type)) k++;
    if (k == h->count && h->count < 64) h->op[h->count++] = g->nodes[i].op_type;
    if (k < 64) h->n[k]++;
  }
}

static int32_t hist_get(const hist *h, const char *op) {
  for (int32_t k = 0; k < h->count; k++)
    if (!strcmp(h->op[k], op)) return h->n[k];
  return 0;
}

/* Sigmoids whose only reader is a Mul that also reads the Sigmoid's input
 * (a SiLU left unfused). */
static int32_t silu_pairs(const kn_graph *g) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *s = &g->nodes[i];
    if (strcmp(s->op_type, "Sigmoid")) continue;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      const kn_node *mu = &g->nodes[j];
      if (strcmp(mu->op_type, "Mul") || mu->n_inputs != 2) continue;
      if ((mu->inputs[0] == s->outputs[0] && mu->inputs[1] == s->inputs[0]) ||
          (mu->inputs[1] == s->outputs[0] && mu->inputs[0] == s->inputs[0]))
        c++;
    }
  }
  return c;
}

static void test_real_models(void **state) {
  (void)state;
  static const char *const names[] = {"resnet50", "mobilenet_v2", "efficientnet_b0",
                                      "bert_tiny", "squeezenet1_1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    kn_model *model = tk_load_cached_optimized(names[i]);
    if (!model) continue;
    kn_ir_model *m = (kn_ir_model *)kn_model_ir(model);
    hist h;
    histogram(m->graph, &h);
    printf("%s after optimization (%d nodes):", names[i], (int)m->graph->n_nodes);
    for (int32_t k = 0; k < h.count; k++) printf(" %s %d", h.op[k], (int)h.n[k]);
    printf("\n");
    if (i == 0) {
      assert_int_equal(hist_get(&h, "Relu"), 0);
      assert_int_equal(hist_get(&h, "Add"), 0);
    } else if (i == 1) {
      assert_int_equal(hist_get(&h, "Clip"), 0);
    } else if (i == 2) {
      assert_int_equal(silu_pairs(m->graph), 0);
    }
    kn_model_free(model);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold_bn_conv),
      cmocka_unit_test(test_fold_bn_conv_transpose_group),
      cmocka_unit_test(test_fold_bn_gemm_matmul),
      cmocka_unit_test(test_fold_bn_must_not),
      cmocka_unit_test(test_fuse_conv_residual_relu),
      cmocka_unit_test(test_fuse_conv_activations),
      cmocka_unit_test(test_fuse_gemm),
      cmocka_unit_test(test_fuse_must_not),
      cmocka_unit_test(test_fold_then_fuse),
      cmocka_unit_test(test_real_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
