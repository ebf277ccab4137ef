/* Channels-last convolutions (NhwcFusedConv on conv_igemm_nhwc) in
 * reduced precision (src/ops/conv_lowp.c, kernels/conv/conv-nhwc-lowp.c),
 * for every ISA this machine has, on 1 and 2 threads, over 1x1, 3x3,
 * 7x7 stride 2, strided, dilated, grouped convolutions with odd channel
 * counts and tails of every vector width, every kind of epilogue
 * (activations, a residual before or after them) and FusedConv's input
 * scale S.
 *
 * The oracle is the same step on the reference kernels with the rounding
 * made explicit, as in test_gemm_precision.c: the input times S (a Mul)
 * goes through QuantizeLinear -> DequantizeLinear with the step's scale
 * and zero point (int8) or a Cast to bfloat16 / float16 and back, and the
 * weights are replaced by their rounded values.  What is left is the
 * order of the fp32 sums and the dequantization, so outputs must agree to
 * 2e-5 of the output's largest magnitude.  1 and 2 threads must agree
 * bit for bit.  The int8 cases also run with VNNI withheld (the packed
 * block is then not used and the op packs per run). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "tactics/gemm/gemm_tactic.h"
#include "ops/op.h"
#include "ops/tactic.h"

typedef struct ccase {
  int64_t n, h, w, c, m, k, stride, dil, pad, group;
  const char *act;
  int32_t residual; /* 0 none, 1 after the activation, 2 before it */
  bool scaled;
} ccase;

typedef struct qparams {
  int32_t prec;
  float a_scale;
  int32_t a_zero;
} qparams;

static int64_t out_dim(const ccase *c, int64_t in) {
  return (in + 2 * c->pad - (c->k - 1) * c->dil - 1) / c->stride + 1;
}

/* What the precision does to the weights [m][rest], in place. */
static void round_weights(float *w, int64_t m, int64_t rest, int32_t prec) {
  int64_t nel = m * rest;
  if (prec == KN_PRECISION_INT8) {
    int8_t *q = malloc((size_t)nel);
    float *sc = malloc((size_t)m * sizeof(float));
    assert_non_null(q);
    assert_non_null(sc);
    kn_quantize_weights_s8(w, m, rest, true, NULL, q, sc);
    for (int64_t i = 0; i < nel; i++) w[i] = (float)q[i] * sc[i / rest];
    free(q);
    free(sc);
  } else if (prec == KN_PRECISION_BF16) {
    for (int64_t i = 0; i < nel; i++) w[i] = kn_bf16_to_f32(kn_f32_to_bf16(w[i]));
  } else {
    for (int64_t i = 0; i < nel; i++) w[i] = kn_f16_to_f32(kn_f32_to_f16(w[i]));
  }
}

/* The input as the step sees it (the reference's explicit rounding). */
static int32_t rounded_input(kn_graph *g, int32_t x, const qparams *q) {
  if (q->prec == KN_PRECISION_FP16_WEIGHTS) return x;
  if (q->prec == KN_PRECISION_INT8) {
    int32_t in[3] = {x, tk_const_scalar(g, q->a_scale), tk_const_u8(g, (uint8_t)q->a_zero)};
    in[0] = tk_node(g, "QuantizeLinear", 3, in);
    return tk_node(g, "DequantizeLinear", 3, in);
  }
  int32_t h = tk_node(g, "Cast", 1, &x);
  assert_true(kn_node_set_int(tk_last(g), "to",
                              q->prec == KN_PRECISION_BF16 ? KN_DTYPE_BF16 : KN_DTYPE_F16));
  int32_t f = tk_node(g, "Cast", 1, &h);
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F32));
  return f;
}

static kn_ir_model *make(const ccase *c, const qparams *q, bool ref) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t oh = out_dim(c, c->h), ow = out_dim(c, c->w);
  int32_t x = tk_input(g, "x", 4, (int64_t[]){c->n, c->h, c->w, c->c});
  int32_t z = c->residual ? tk_input(g, "z", 4, (int64_t[]){c->n, oh, ow, c->m}) : -1;
  int32_t s = c->scaled ? tk_input(g, "s", 2, (int64_t[]){c->n, c->c}) : -1;
  int64_t wd[4] = {c->m, c->c / c->group, c->k, c->k};
  int32_t w = tk_const_rand(g, 4, wd, 11, 0.0f);
  if (ref) round_weights(g->values[w].constant->data, c->m, wd[1] * c->k * c->k, q->prec);
  int32_t b = tk_const_rand(g, 1, &c->m, 5, 0.1f);
  int32_t xin = x;
  if (ref && s >= 0) {
    int32_t sh = tk_const_i64(g, 4, (int64_t[]){c->n, 1, 1, c->c});
    int32_t s4 = tk_node(g, "Reshape", 2, (int32_t[]){s, sh});
    xin = tk_node(g, "Mul", 2, (int32_t[]){x, s4});
  }
  if (ref) xin = rounded_input(g, xin, q);
  int32_t in[5] = {xin, w, b, z, ref ? -1 : s};
  int32_t nin = !ref && s >= 0 ? 5 : z >= 0 ? 4 : 3;
  int32_t y = kn_graph_add_fresh_value(g, "y");
  assert_true(kn_graph_new_node(g, "NhwcFusedConv", KN_DOMAIN, "conv", nin, in, 1, &y) >= 0);
  kn_node *n = tk_last(g);
  assert_true(kn_node_set_ints(n, "kernel_shape", (int64_t[]){c->k, c->k}, 2));
  assert_true(kn_node_set_ints(n, "strides", (int64_t[]){c->stride, c->stride}, 2));
  assert_true(kn_node_set_ints(n, "dilations", (int64_t[]){c->dil, c->dil}, 2));
  assert_true(kn_node_set_ints(n, "pads", (int64_t[]){c->pad, c->pad, c->pad, c->pad}, 4));
  assert_true(kn_node_set_int(n, "group", c->group));
  if (c->act) assert_true(kn_node_set_string(n, "activation", c->act));
  if (c->act && !strcmp(c->act, "Clip")) {
    assert_true(kn_node_set_float(n, "activation_min", -0.5f));
    assert_true(kn_node_set_float(n, "activation_max", 0.75f));
  }
  if (c->residual == 2) assert_true(kn_node_set_int(n, "residual_before_activation", 1));
  if (!ref) {
    n->precision = q->prec;
    if (q->prec == KN_PRECISION_INT8) {
      assert_true(kn_node_set_input_quant(n, q->a_scale, (int32_t)q->a_zero));
    }
  }
  tk_output(g, y);
  tk_prepare(m);
  return m;
}

static void describe(const ccase *c, const qparams *q, char *buf, size_t len) {
  snprintf(buf, len, "%s n%lld %lldx%lld c%lld m%lld k%lld s%lld d%lld p%lld g%lld %s res%d%s",
           kn_precision_name(q->prec), (long long)c->n, (long long)c->h, (long long)c->w,
           (long long)c->c, (long long)c->m, (long long)c->k, (long long)c->stride,
           (long long)c->dil, (long long)c->pad, (long long)c->group, c->act ? c->act : "-",
           c->residual, c->scaled ? " S" : "");
}

static void check(const tk_results *fast, const tk_results *ref, const char *what, int isa,
                  int threads) {
  char full[512];
  snprintf(full, sizeof full, "%s isa %s threads %d", what, kn_isa_name((kn_isa)isa), threads);
  tk_assert_near_ref(fast, ref, full);
}

/* RMS error and largest error of fast against exact, relative to the
 * output's RMS and its largest magnitude. */
static void rel_errors(const tk_results *fast, const tk_results *exact, double *rms,
                       double *mx) {
  const kn_tensor *x = &fast->outs[0].t, *y = &exact->outs[0].t;
  assert_int_equal(kn_tensor_numel(x), kn_tensor_numel(y));
  const float *p = x->data, *r = y->data;
  double amax = 0, se = 0, sr = 0, emax = 0;
  for (int64_t i = 0; i < kn_tensor_numel(y); i++) {
    double e = fabs((double)p[i] - r[i]);
    amax = fmax(amax, fabs(r[i]));
    emax = e == e ? fmax(emax, e) : INFINITY;
    se += e * e;
    sr += (double)r[i] * r[i];
  }
  *rms = sr > 0 ? sqrt(se / sr) : sqrt(se);
  *mx = amax > 0 ? emax / amax : emax;
}

/* Winograd F(2,3) with bf16 products against fp32 without rounding:
 * within 2.5x the error of the bf16 direct conv (igemm) on the same
 * case, RMS and largest, plus a floor of bf16's own rounding. */
static void check_f23(const tk_results *f23, const tk_results *direct, const tk_results *exact,
                      const char *what, int isa, int threads) {
  double rw, mw, rd, md;
  rel_errors(f23, exact, &rw, &mw);
  rel_errors(direct, exact, &rd, &md);
  if (getenv("KILN_TEST_VERBOSE"))
    printf("%s F(2,3) isa %s: rms %.3g max %.3g (direct: rms %.3g max %.3g)\n", what,
           kn_isa_name((kn_isa)isa), rw, mw, rd, md);
  if (!(rw <= 2.5 * rd + 1e-3) || !(mw <= 2.5 * md + 2e-3))
    fail_msg("%s F(2,3) isa %s threads %d: rms error %.3g, max %.3g; the direct bf16 conv's "
             "%.3g and %.3g (at most 2.5x those expected)",
             what, kn_isa_name((kn_isa)isa), threads, rw, mw, rd, md);
}

static void check_winograd(const tk_results *fast, const tk_results *exact, const char *what,
                           int isa, int threads) {
  const kn_tensor *x = &fast->outs[0].t, *y = &exact->outs[0].t;
  assert_int_equal(kn_tensor_numel(x), kn_tensor_numel(y));
  const float *p = x->data, *r = y->data;
  double amax = 0, se = 0, sr = 0, emax = 0;
  int64_t n = kn_tensor_numel(y);
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)p[i] - r[i]);
    amax = fmax(amax, fabs(r[i]));
    emax = fmax(emax, e);
    if (!(e == e)) emax = INFINITY;
    se += e * e;
    sr += (double)r[i] * r[i];
  }
  if (getenv("KILN_TEST_VERBOSE"))
    printf("%s winograd isa %s: rms %.3g max %.3g\n", what, kn_isa_name((kn_isa)isa),
           sqrt(se / sr), emax / amax);
  if (!(se <= 25e-4 * sr) || !(emax <= 0.1 * amax))
    fail_msg("%s winograd isa %s threads %d: rms error %.3g of the output's, max %.3g of its "
             "largest",
             what, kn_isa_name((kn_isa)isa), threads, sqrt(se / sr), emax / amax);
}

static void run_case(const ccase *c, const qparams *q) {
  char what[192];
  describe(c, q, what, sizeof what);
  if (getenv("KILN_TEST_VERBOSE")) printf("case %s\n", what);
  kn_ir_model *fast_m = make(c, q, false), *ref_m = make(c, q, true);
  uint64_t feat = kn_cpu_features();
  tk_results ref = tk_run(ref_m, TK_FILL_SEEDED);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    /* the first choice: bf16 3x3 stride-1 layers of 16 channels and more
     * on Winograd F(2,3), everything else on the implicit GEMM */
    bool f23_first = q->prec == KN_PRECISION_BF16 && c->k == 3 && c->stride == 1 &&
                     c->dil == 1 && c->group == 1 && c->c >= 16 && c->m >= 16;
    assert_int_equal(tk_fast_tactic(fast_m, "NhwcFusedConv", isa),
                     f23_first ? KN_TACTIC_conv_winograd_f23_nhwc : KN_TACTIC_conv_igemm_nhwc);
    if (q->prec == KN_PRECISION_BF16 && c->k == 3 && c->stride == 1 && c->dil == 1 &&
        c->group == 1) {
      /* bf16 3x3: Winograd (the builder's other candidate) against fp32
       * without the rounding, on the vdpbf16ps kernels and the widening
       * ones, 1 vs 2 threads bit-identical */
      qparams fp = {.prec = KN_PRECISION_FP32};
      kn_ir_model *exact_m = make(c, &fp, false);
      tk_results exact = tk_run(exact_m, TK_FILL_SEEDED);
      int32_t wt = KN_TACTIC_conv_winograd_nhwc;
      tk_results w1 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1, feat, wt);
      check_winograd(&w1, &exact, what, isa, 1);
      tk_results w2 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 2, feat, wt);
      tk_assert_bits(&w1, &w2, what);
      tk_results w3 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 2,
                                         feat & ~KN_CPU_BIT(AVX512BF16), wt);
      check_winograd(&w3, &exact, what, isa, 2);
      /* F(2,3), a candidate always: near the direct conv's error */
      int32_t ft = KN_TACTIC_conv_winograd_f23_nhwc;
      tk_results direct = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1, feat,
                                             KN_TACTIC_conv_igemm_nhwc);
      tk_results f1 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1, feat, ft);
      check_f23(&f1, &direct, &exact, what, isa, 1);
      tk_results f2 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 2, feat, ft);
      tk_assert_bits(&f1, &f2, what);
      tk_results f3 = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1,
                                         feat & ~KN_CPU_BIT(AVX512BF16), ft);
      check_f23(&f3, &direct, &exact, what, isa, 1);
      tk_results_free(&direct);
      tk_results_free(&f1);
      tk_results_free(&f2);
      tk_results_free(&f3);
      tk_results_free(&w1);
      tk_results_free(&w2);
      tk_results_free(&w3);
      tk_results_free(&exact);
      kn_ir_model_free(exact_m);
    }
    tk_results one = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1, feat,
                                        KN_TACTIC_conv_igemm_nhwc);
    check(&one, &ref, what, isa, 1);
    tk_results two = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 2, feat,
                                        KN_TACTIC_conv_igemm_nhwc);
    tk_assert_bits(&one, &two, what);
    tk_results_free(&two);
    if (q->prec == KN_PRECISION_INT8 && isa == KN_ISA_AVX512 &&
        (feat & KN_CPU_BIT(AVX512VNNI))) {
      /* a block this CPU "cannot run": packed per run for the AVX2 impl */
      tk_results again = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 2,
                                            feat & ~KN_CPU_BIT(AVX512VNNI),
                                            KN_TACTIC_conv_igemm_nhwc);
      check(&again, &ref, what, isa, 2);
      tk_results_free(&again);
    }
    if (q->prec == KN_PRECISION_BF16 && isa == KN_ISA_AVX512 &&
        (feat & KN_CPU_BIT(AVX512BF16))) {
      /* the same block on the widening kernels (no vdpbf16ps) */
      tk_results again = tk_run_fast_tactic(fast_m, TK_FILL_SEEDED, isa, 1,
                                            feat & ~KN_CPU_BIT(AVX512BF16),
                                            KN_TACTIC_conv_igemm_nhwc);
      check(&again, &ref, what, isa, 1);
      tk_results_free(&again);
    }
    tk_results_free(&one);
  }
  tk_results_free(&ref);
  kn_ir_model_free(fast_m);
  kn_ir_model_free(ref_m);
}

/* n, h, w, c, m, k, stride, dilation, pad, group, activation, residual, S */
static const ccase cases[] = {
    {1, 9, 7, 16, 32, 1, 1, 1, 0, 1, "Relu", 1, false},   /* 1x1: rows read in place */
    {2, 5, 6, 33, 47, 1, 1, 1, 0, 1, NULL, 2, false},     /* odd channels, batch 2 */
    {1, 6, 6, 24, 70, 1, 1, 1, 0, 1, "Clip", 0, true},    /* 1x1 with S */
    {1, 11, 9, 16, 24, 3, 1, 1, 1, 1, "Relu", 1, false},  /* 3x3 */
    {1, 8, 8, 5, 9, 3, 1, 1, 1, 1, "Sigmoid", 0, true},   /* 3x3, S, tails */
    {1, 15, 13, 3, 20, 7, 2, 1, 3, 1, "Relu", 0, false},  /* the stem: 7x7 s2 on c=3 */
    {2, 9, 10, 12, 17, 3, 2, 1, 1, 1, "Gelu", 2, false},  /* strided 3x3 */
    {1, 12, 12, 8, 16, 3, 1, 2, 2, 1, "Silu", 0, false},  /* dilated */
    {1, 8, 9, 12, 18, 3, 1, 1, 1, 3, "HardSwish", 1, false}, /* grouped */
    {1, 7, 7, 16, 1100, 1, 2, 1, 0, 2, "Relu", 0, true},  /* strided 1x1, 2 slabs a group */
    {1, 5, 4, 24, 530, 1, 1, 1, 0, 1, "Relu", 1, false}, /* 1x1, 2 slabs: converted once */
    {1, 7, 7, 40, 65, 3, 1, 1, 1, 1, "LeakyRelu", 2, false}, /* 7x7 map */
    {1, 1, 1, 19, 13, 1, 1, 1, 0, 1, NULL, 0, false},     /* one pixel */
    {1, 4, 6, 6, 31, 5, 1, 1, 2, 1, "Tanh", 1, true},     /* 5x5, S, residual */
    {1, 6, 6, 160, 40, 3, 1, 1, 1, 1, "Relu", 1, false},  /* k 1440: several depth passes */
    {1, 30, 30, 64, 64, 3, 1, 1, 1, 1, "Relu", 0, false}, /* several chunks of rows */
    {1, 20, 20, 520, 24, 1, 1, 1, 0, 1, NULL, 1, false},  /* 1x1 read in place, 2 passes */
    {1, 9, 8, 24, 40, 1, 2, 1, 0, 1, "Relu", 1, false},   /* strided 1x1: converted as gathered */
    {2, 7, 9, 16, 24, 1, 2, 1, 0, 2, NULL, 0, false},     /* the same, grouped, odd sizes */
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void sweep(int32_t prec, size_t stride) {
  const char *only = getenv("KILN_TEST_CASE"); /* one case, to chase a failure */
  for (size_t i = 0; i < N_CASES; i += stride) {
    if (only && (size_t)atoi(only) != i) continue;
    qparams q = {.prec = prec, .a_scale = 4.0f / 255.0f, .a_zero = 128};
    if (i % 4 == 3) { /* a narrower range: values past it saturate */
      q.a_scale = 1.5f / 255.0f;
      q.a_zero = 60;
    }
    run_case(&cases[i], &q);
  }
}

static void test_int8(void **state) {
  (void)state;
  sweep(KN_PRECISION_INT8, 1);
}

static void test_bf16(void **state) {
  (void)state;
  sweep(KN_PRECISION_BF16, 1);
}

/* fp16 and fp16-weights run the same driver with other element sizes:
 * every other case. */
static void test_fp16(void **state) {
  (void)state;
  sweep(KN_PRECISION_FP16, 2);
  sweep(KN_PRECISION_FP16_WEIGHTS, 2);
}

/* The hook: reduced precisions for a channels-last conv with constant
 * weights, none for a depthwise one. */
static void test_precisions_hook(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 6, 8});
  int32_t w = tk_const_rand(g, 4, (int64_t[]){16, 8, 3, 3}, 3, 0.0f);
  int32_t wd = tk_const_rand(g, 4, (int64_t[]){8, 1, 3, 3}, 4, 0.0f);
  int32_t y1 = kn_graph_add_fresh_value(g, "y1"), y2 = kn_graph_add_fresh_value(g, "y2");
  assert_true(kn_graph_new_node(g, "NhwcFusedConv", KN_DOMAIN, "full", 2, (int32_t[]){x, w}, 1,
                                &y1) >= 0);
  assert_true(kn_graph_new_node(g, "NhwcFusedConv", KN_DOMAIN, "dw", 2, (int32_t[]){x, wd}, 1,
                                &y2) >= 0);
  assert_true(kn_node_set_int(tk_last(g), "group", 8));
  tk_output(g, y1);
  tk_output(g, y2);
  tk_prepare(m);
  const kn_node *full = &g->nodes[0], *dw = &g->nodes[1];
  uint32_t pf = kn_tactics_of(full)->precisions(g, full, KN_ISA_PORTABLE);
  assert_true(pf & (1u << KN_PRECISION_INT8));
  assert_true(pf & (1u << KN_PRECISION_BF16));
  assert_int_equal(kn_tactics_of(dw)->precisions(g, dw, KN_ISA_PORTABLE), 0);
  kn_ir_model_free(m);
}

int main(void) {
  /* bf16 Winograd is a tactic candidate only when asked for (conv.c) */
  setenv("KILN_BF16_WINOGRAD", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_precisions_hook),
      cmocka_unit_test(test_int8),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_fp16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
