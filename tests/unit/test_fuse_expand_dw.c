/* Expansion + depthwise fusion (src/passes/fuse_expand_dw.c): the 1x1
 * expansion of an inverted-residual block and the depthwise conv that
 * alone reads it become one NhwcExpandDwConv step (src/ops/expand_dw.c,
 * kernels/conv/expand-dw-nhwc.c) that never writes the expanded tensor.
 *
 * Every case is built three times: as written (the oracle), through the
 * whole optimizer, and through the optimizer without fuse_expand_dw.  It
 * checks how many steps were fused, then the results: the optimized graph
 * close to the oracle, and bit-identical to the graph that kept both
 * steps through the reference kernels and through the fast kernels of
 * every ISA on 1 and 2 threads (the fused kernel runs the same
 * micro-kernels in the same order on each element), the same bits on 1
 * and 2 threads, and through an engine file, run twice on 1 and 2
 * threads.  Shapes are odd (bands that end mid-image, a last band shorter
 * than the others), strides 1 and 2, kernels 3 and 5, dilation 2,
 * asymmetric pads, a batch of 2, with and without biases, with Relu6,
 * SiLU and HardSwish on either step.  Near misses keep their two steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "plan/plan.h"
#include "ops/tactic.h"
#include "testkit.h"

/* ---- building ------------------------------------------------------------ */

typedef struct conv_spec {
  int64_t k, stride, dilation;
  int64_t pads[4]; /* top, left, bottom, right */
  bool bias;
} conv_spec;

static int32_t conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t group,
                    const conv_spec *s, uint32_t seed) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin / group, s->k, s->k}, seed, 0);
  int32_t in[3] = {x, w, s->bias ? tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0) : -1};
  int32_t y = tk_node(g, "Conv", s->bias ? 3 : 2, in);
  kn_node *n = tk_last(g);
  const int64_t *p = s->pads;
  assert_true(kn_node_set_ints(n, "pads", (int64_t[]){p[0], p[1], p[2], p[3]}, 4));
  if (s->stride != 1)
    assert_true(kn_node_set_ints(n, "strides", (int64_t[]){s->stride, s->stride}, 2));
  if (s->dilation != 1)
    assert_true(kn_node_set_ints(n, "dilations", (int64_t[]){s->dilation, s->dilation}, 2));
  if (group != 1) assert_true(kn_node_set_int(n, "group", group));
  return y;
}

/* act: NULL, "Relu6", "Silu" or "HardSwish" (the ops a framework exports) */
static int32_t act(kn_graph *g, int32_t x, const char *a) {
  if (!a) return x;
  if (!strcmp(a, "Relu6")) {
    int32_t in[3] = {x, tk_const_scalar(g, 0.0f), tk_const_scalar(g, 6.0f)};
    return tk_node(g, "Clip", 3, in);
  }
  if (!strcmp(a, "Silu")) {
    int32_t s = tk_node(g, "Sigmoid", 1, (int32_t[]){x});
    return tk_node(g, "Mul", 2, (int32_t[]){x, s});
  }
  return tk_node(g, a, 1, (int32_t[]){x});
}

typedef struct block {
  int64_t n, c, h, w, e;
  conv_spec expand, dw;
  const char *act1, *act2;
  int32_t fused; /* NhwcExpandDwConv steps expected */
  /* near misses */
  bool t_is_output; /* the expanded tensor is also a graph output */
} block;

static kn_ir_model *build(const block *b, bool optimize, bool with_pass) {
  kn_ir_model *m = tk_model_new(14);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){b->n, b->c, b->h, b->w});
  int32_t t = act(g, conv(g, x, b->c, b->e, 1, &b->expand, 11), b->act1);
  int32_t d = act(g, conv(g, t, b->e, b->e, b->e, &b->dw, 21), b->act2);
  /* the block's projection, as in the models */
  conv_spec proj = {.k = 1, .stride = 1, .dilation = 1, .bias = true};
  int32_t y = conv(g, d, b->e, 8, 1, &proj, 31);
  tk_output(g, y);
  if (b->t_is_output) tk_output(g, t);
  tk_prepare(m);
  if (optimize) {
    static const char *const off[] = {"fuse_expand_dw"};
    kn_optimize_options o = {.disabled = off, .n_disabled = with_pass ? 0 : 1};
    kn_error err;
    if (kn_optimize(m, &o, &err)) fail_msg("optimize: %s", err.msg);
  }
  return m;
}

/* ---- checking -------------------------------------------------------------- */

static void close_to(tk_results *oracle, tk_results *got, const char *what) {
  assert_int_equal(oracle->n, got->n);
  for (int32_t o = 0; o < got->n; o++) {
    const kn_tensor *a = &oracle->outs[o].t, *b = &got->outs[o].t;
    double d = tk_max_abs_diff(a, b), scale = 0;
    for (int64_t i = 0; i < kn_tensor_numel(a); i++)
      scale = fmax(scale, fabs((double)((const float *)a->data)[i]));
    if (!(d <= 1e-4 + 1e-4 * scale))
      fail_msg("%s: output %d differs from the unoptimized graph by %g (scale %g)", what, (int)o,
               d, scale);
  }
}



/* m with this machine's tactics and its plan through an engine file, run
 * on 1 and 2 threads, twice each on different inputs: the bits of the
 * unplanned fast runs. */
static void check_engine(kn_ir_model *m) {
  int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
  tk_results want[2][2]; /* [fill][threads - 1] */
  for (int32_t f = 0; f < 2; f++)
    for (int32_t t = 1; t <= 2; t++) want[f][t - 1] = tk_run_fast(m, (tk_fill)f, isa, t);
  kn_mem_plan plan;
  kn_error err;
  char why[256];
  if (kn_plan_memory(m->graph, 0, &plan, &err)) fail_msg("%s", err.msg);
  if (!kn_plan_check(&plan, why, sizeof why)) fail_msg("plan: %s", why);
  kn_tactics_select(m, isa, false);
  char path[] = "/tmp/kiln_test_expand_dw_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  if (kn_engine_write(m, &plan, NULL, path, &err)) fail_msg("%s", err.msg);
  kn_tactics_select(m, isa, true);
  kn_model *km;
  if (kn_model_load(path, &km, &err)) fail_msg("%s", err.msg);
  unlink(path);
  for (int32_t t = 1; t <= 2; t++) {
    kn_context *c;
    if (kn_context_create(km, &c, &err) || kn_context_set_threads(c, t, &err))
      fail_msg("%s", err.msg);
    static const tk_fill order[3] = {TK_FILL_PATTERN, TK_FILL_SEEDED, TK_FILL_PATTERN};
    for (int32_t r = 0; r < 3; r++) {
      tk_results got = tk_run_context(c, km, order[r]);
      char what[96];
      snprintf(what, sizeof what, "engine (%d threads, run %d)", (int)t, (int)r + 1);
      tk_assert_bits(&want[order[r]][t - 1], &got, what);
      tk_results_free(&got);
    }
    kn_context_free(c);
  }
  for (int32_t f = 0; f < 2; f++)
    for (int32_t t = 0; t < 2; t++) tk_results_free(&want[f][t]);
  kn_model_free(km);
  kn_mem_plan_free(&plan);
}

static void check(const block *b) {
  kn_ir_model *ref = build(b, false, false);
  kn_ir_model *opt = build(b, true, true), *kept = build(b, true, false);
  assert_int_equal(tk_count_op(opt->graph, "NhwcExpandDwConv"), b->fused);
  assert_int_equal(tk_count_op(kept->graph, "NhwcExpandDwConv"), 0);
  /* each fused step replaced one expansion and one depthwise step */
  assert_int_equal(tk_count_op(opt->graph, "NhwcFusedConv"),
                   tk_count_op(kept->graph, "NhwcFusedConv") - 2 * b->fused);
  if (b->fused) {
    const kn_node *n = tk_find_op(opt->graph, "NhwcExpandDwConv");
    assert_non_null(n->covers);
    int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
    assert_int_equal(tk_fast_tactic(opt, "NhwcExpandDwConv", isa),
                     KN_TACTIC_conv_expand_dw_nhwc);
  }

  tk_results oracle = tk_run(ref, TK_FILL_SEEDED);
  tk_results a = tk_run(opt, TK_FILL_SEEDED), k = tk_run(kept, TK_FILL_SEEDED);
  close_to(&oracle, &a, "optimized, reference kernels");
  tk_assert_bits(&k, &a, "optimized, reference kernels, against the graph that kept both steps");
  tk_results_free(&a);
  tk_results_free(&k);
  for (int32_t isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, kn_cpu_features())) continue;
    tk_results one = {0};
    for (int32_t t = 1; t <= 2; t++) {
      char what[128];
      tk_results f = tk_run_fast(opt, TK_FILL_SEEDED, isa, t);
      tk_results kf = tk_run_fast(kept, TK_FILL_SEEDED, isa, t);
      snprintf(what, sizeof what, "fast kernels [%s, %d threads]", kn_isa_name((kn_isa)isa),
               (int)t);
      close_to(&oracle, &f, what);
      snprintf(what, sizeof what,
               "fast kernels [%s, %d threads] against the graph that kept both steps",
               kn_isa_name((kn_isa)isa), (int)t);
      tk_assert_bits(&kf, &f, what);
      tk_results_free(&kf);
      if (t == 1) {
        one = f;
      } else {
        tk_assert_bits(&one, &f, "fast kernels, 1 against 2 threads");
        tk_results_free(&one);
        tk_results_free(&f);
      }
    }
  }
  tk_results_free(&oracle);
  if (b->fused) check_engine(opt);
  kn_ir_model_free(ref);
  kn_ir_model_free(opt);
  kn_ir_model_free(kept);
}

/* ---- the cases ------------------------------------------------------------- */

#define PLAIN1 {.k = 1, .stride = 1, .dilation = 1, .bias = true}

/* MobileNetV2: Relu6 on both, 3x3 stride 2, odd sizes (45 x 43 -> 23 x 22) */
static void test_mbv2_stride2(void **state) {
  (void)state;
  block b = {.n = 1, .c = 16, .h = 45, .w = 43, .e = 144, .expand = PLAIN1,
             .dw = {.k = 3, .stride = 2, .dilation = 1, .pads = {1, 1, 1, 1}, .bias = true},
             .act1 = "Relu6", .act2 = "Relu6", .fused = 1};
  check(&b);
}

/* EfficientNet: SiLU on both (the post-pass activations), 5x5 stride 1 */
static void test_effnet_k5(void **state) {
  (void)state;
  block b = {.n = 1, .c = 24, .h = 41, .w = 37, .e = 192, .expand = PLAIN1,
             .dw = {.k = 5, .stride = 1, .dilation = 1, .pads = {2, 2, 2, 2}, .bias = true},
             .act1 = "Silu", .act2 = "Silu", .fused = 1};
  check(&b);
}

/* A batch of 2, dilation 2, no biases and no activations */
static void test_batch_dilated(void **state) {
  (void)state;
  block b = {.n = 2, .c = 8, .h = 33, .w = 35, .e = 256,
             .expand = {.k = 1, .stride = 1, .dilation = 1},
             .dw = {.k = 3, .stride = 1, .dilation = 2, .pads = {2, 2, 2, 2}},
             .fused = 1};
  check(&b);
}

/* TF "SAME" stride 2 (pads only at the bottom and right), HardSwish after
 * the expansion only, a first band that starts inside the image */
static void test_same_pads_hardswish(void **state) {
  (void)state;
  block b = {.n = 1, .c = 12, .h = 48, .w = 40, .e = 160, .expand = PLAIN1,
             .dw = {.k = 3, .stride = 2, .dilation = 1, .pads = {0, 0, 1, 1}, .bias = true},
             .act1 = "HardSwish", .fused = 1};
  check(&b);
}

/* Near misses: the expanded tensor also a graph output; one too small to
 * leave the caches; an expansion with a stride of 2. */
static void test_near_misses(void **state) {
  (void)state;
  block shared = {.n = 1, .c = 16, .h = 45, .w = 43, .e = 144, .expand = PLAIN1,
                  .dw = {.k = 3, .stride = 1, .dilation = 1, .pads = {1, 1, 1, 1}, .bias = true},
                  .act1 = "Relu6", .act2 = "Relu6", .t_is_output = true};
  check(&shared);
  block small = {.n = 1, .c = 8, .h = 16, .w = 16, .e = 64, .expand = PLAIN1,
                 .dw = {.k = 3, .stride = 1, .dilation = 1, .pads = {1, 1, 1, 1}, .bias = true},
                 .act1 = "Relu6"};
  check(&small);
  block strided = {.n = 1, .c = 16, .h = 90, .w = 86, .e = 144,
                   .expand = {.k = 1, .stride = 2, .dilation = 1, .bias = true},
                   .dw = {.k = 3, .stride = 1, .dilation = 1, .pads = {1, 1, 1, 1}, .bias = true},
                   .act1 = "Relu6"};
  check(&strided);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mbv2_stride2),
      cmocka_unit_test(test_effnet_k5),
      cmocka_unit_test(test_batch_dilated),
      cmocka_unit_test(test_same_pads_hardswish),
      cmocka_unit_test(test_near_misses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
