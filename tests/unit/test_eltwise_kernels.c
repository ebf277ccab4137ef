/* The vectorised elementwise kernels (src/kernels/eltwise) against the
 * reference ops: each ukernel directly against scalar C on every length
 * that exercises the vector tails, and every wired op (unary activations,
 * Clip, Gelu, binary ops with broadcasting, Softmax / LogSoftmax of every
 * opset's axis rule, Layer/Instance/GroupNormalization, ElementwiseChain)
 * through the executor with its fast tactic, on every ISA this machine has,
 * with 1 and 2 threads (which must agree bit for bit). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

#include "core/cpu.h"
#include "kernels/eltwise/eltwise.h"
#include "ops/ewchain.h"
#include "ops/tactic.h"

static const int64_t sizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 1000};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* ---- ukernels against scalar C ------------------------------------------------ */

static double ref_unary(int op, const kn_act_params *p, double x) {
  switch (op) {
  case KN_ACT_RELU: return x < 0 ? 0 : x;
  case KN_ACT_CLIP: return x < p->lo ? p->lo : (x > p->hi ? p->hi : x);
  case KN_ACT_LEAKYRELU: return x < 0 ? p->alpha * x : x;
  case KN_ACT_HARDSIGMOID: return fmax(0, fmin(1, p->alpha * x + p->beta));
  case KN_ACT_HARDSWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
  case KN_ACT_SIGMOID: return 1 / (1 + exp(-x));
  case KN_ACT_SILU: return x / (1 + exp(-x));
  case KN_ACT_TANH: return tanh(x);
  case KN_ACT_GELU: return 0.5 * x * (1 + erf(x * M_SQRT1_2));
  case KN_ACT_GELU_TANH:
    return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case KN_VOP_EXP: return exp(x);
  case KN_VOP_ERF: return erf(x);
  case KN_VOP_NEG: return -x;
  case KN_VOP_ABS: return fabs(x);
  case KN_VOP_SQRT: return sqrt(x);
  case KN_VOP_RECIPROCAL: return 1 / x;
  default: return x;
  }
}

static void fill(float *x, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = 0; i < n; i++) x[i] = scale * tk_pseudo(&seed);
}

static void check_close(const char *what, int isa, int64_t i, double got, double want) {
  if (isnan(want) && isnan(got)) return;
  if (got == want) return;
  if (!(fabs(got - want) <= 2e-6 + 2e-6 * fabs(want)))
    fail_msg("%s (%s) element %lld: %.9g, expected %.9g", what, kn_isa_name((kn_isa)isa),
             (long long)i, got, want);
}

static void test_unary_ukernel(void **state) {
  (void)state;
  enum { CAP = 1024 };
  float *x = malloc(CAP * sizeof *x), *y = malloc(CAP * sizeof *y), *z = malloc(CAP * sizeof *z);
  assert_true(x && y && z);
  kn_act_params p = {.alpha = 0.15f, .beta = 0.45f, .lo = -0.75f, .hi = 1.5f};
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    const kn_ew_ukernels *k = kn_ew_get((kn_isa)isa);
    for (int op = 0; op < KN_VOP_COUNT; op++)
      for (int s = 0; s < N_SIZES; s++) {
        int64_t n = sizes[s];
        fill(x, n, 11 + (uint32_t)s, 6.0f);
        y[n] = z[n] = 12345.0f; /* guards: nothing past n is written */
        k->unary(op, &p, x, y, n);
        memcpy(z, x, (size_t)n * sizeof *z);
        k->unary(op, &p, z, z, n); /* in place */
        assert_true(y[n] == 12345.0f && z[n] == 12345.0f);
        for (int64_t i = 0; i < n; i++) {
          check_close("unary", isa, i, y[i], ref_unary(op, &p, x[i]));
          assert_memory_equal(&y[i], &z[i], sizeof(float));
        }
        /* kn_f32_act is the same kernel */
        if (op < KN_ACT_COUNT && n > 0) {
          kn_act_params a = p;
          a.act = (kn_act)op;
          kn_f32_act((kn_isa)isa, &a, x, z, n);
          assert_memory_equal(y, z, (size_t)n * sizeof *y);
        }
      }
  }
  free(x);
  free(y);
  free(z);
}

static double ref_binary(int op, double a, double b) {
  switch (op) {
  case KN_VBIN_ADD: return (float)a + (float)b;
  case KN_VBIN_SUB: return (float)a - (float)b;
  case KN_VBIN_MUL: return (float)a * (float)b;
  case KN_VBIN_DIV: return (float)a / (float)b;
  case KN_VBIN_MAX: return (a > b || a != a) ? a : b;
  case KN_VBIN_MIN: return (a < b || a != a) ? a : b;
  case KN_VBIN_PRELU: return a < 0 ? (float)a * (float)b : a;
  default: return 0;
  }
}

static void test_binary_ukernel(void **state) {
  (void)state;
  enum { CAP = 1024 };
  float *a = malloc(CAP * sizeof *a), *b = malloc(CAP * sizeof *b), *y = malloc(CAP * sizeof *y);
  assert_true(a && b && y);
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    const kn_ew_ukernels *k = kn_ew_get((kn_isa)isa);
    for (int op = 0; op < KN_VBIN_COUNT; op++)
      for (int st = 0; st < 4; st++)
        for (int s = 0; s < N_SIZES; s++) {
          int64_t n = sizes[s];
          int sa = st & 1, sb = st >> 1;
          fill(a, n > 0 ? n : 1, 3, 2.0f);
          fill(b, n > 0 ? n : 1, 5, 2.0f);
          if (n > 5) {
            a[3] = NAN;
            b[5] = NAN;
          }
          y[n] = 12345.0f;
          k->binary(op, a, sa, b, sb, y, n);
          assert_true(y[n] == 12345.0f);
          for (int64_t i = 0; i < n; i++) {
            float want = (float)ref_binary(op, a[sa ? i : 0], b[sb ? i : 0]);
            if (!(isnan(want) && isnan(y[i])) && want != y[i])
              fail_msg("binary op %d (%s) strides %d %d n %lld element %lld: %g, expected %g", op,
                       kn_isa_name((kn_isa)isa), sa, sb, (long long)n, (long long)i, y[i], want);
          }
        }
  }
  free(a);
  free(b);
  free(y);
}

/* The fused epilogue on a tile inside a larger matrix, every activation,
 * bias per row / per column, residual before / after the activation. */
static void test_epilogue(void **state) {
  (void)state;
  enum { LD = 80, ROWS = 9 };
  float c[ROWS * LD], c0[ROWS * LD], res[ROWS * LD], bias[LD];
  fill(res, ROWS * LD, 9, 1.0f);
  fill(bias, LD, 10, 1.0f);
  static const int64_t ns[] = {1, 7, 16, 17, 31, 33, 64};
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    for (int act = 0; act < KN_ACT_COUNT; act++)
      for (int mode = 0; mode < 6; mode++)
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
          int64_t n = ns[t], r0 = 1, cc0 = 3, m = 5;
          kn_epilogue ep = {.act = {.act = (kn_act)act, .alpha = 0.2f, .beta = 0.4f, .lo = -0.5f,
                                    .hi = 0.5f},
                            .bias = mode & 1 ? bias : NULL,
                            .bias_per_row = mode & 2,
                            .res = mode >= 2 ? res : NULL,
                            .ldr = LD,
                            .res_first = mode >= 4};
          fill(c0, ROWS * LD, 12, 3.0f);
          memcpy(c, c0, sizeof c);
          float *tile = c + r0 * LD + cc0;
          kn_f32_epilogue((kn_isa)isa, &ep, tile, LD, r0, m, cc0, n);
          for (int64_t i = 0; i < ROWS; i++)
            for (int64_t j = 0; j < LD; j++) {
              double v = c0[i * LD + j];
              bool in = i >= r0 && i < r0 + m && j >= cc0 && j < cc0 + n;
              if (!in) {
                assert_true(c[i * LD + j] == c0[i * LD + j]);
                continue;
              }
              if (ep.bias) v = (float)(v + (ep.bias_per_row ? bias[i] : bias[j]));
              if (ep.res && ep.res_first) v = (float)(v + res[i * LD + j]);
              v = ref_unary(act, &ep.act, (float)v);
              if (ep.res && !ep.res_first) v += res[i * LD + j];
              check_close("epilogue", isa, i * LD + j, c[i * LD + j], v);
            }
        }
  }
}

/* ---- ops through the executor ---------------------------------------------------- */

static void assert_close_keep(const tk_results *a, const tk_results *b, const char *what, int isa) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(kn_tensor_numel(x), kn_tensor_numel(y));
    const float *p = x->data, *q = y->data;
    for (int64_t k = 0; k < kn_tensor_numel(x); k++) {
      if ((isnan(p[k]) && isnan(q[k])) || p[k] == q[k]) continue;
      if (!(fabs((double)p[k] - q[k]) <= 1e-5 + 1e-5 * fabs((double)q[k])))
        fail_msg("%s (%s): output %d element %lld is %.9g, reference %.9g", what,
                 kn_isa_name((kn_isa)isa), (int)i, (long long)k, p[k], q[k]);
    }
  }
}

static void assert_same_keep(const tk_results *a, const tk_results *b, const char *what) {
  for (int32_t i = 0; i < a->n; i++) {
    size_t bytes = (size_t)kn_tensor_numel(&a->outs[i].t) * sizeof(float);
    if (bytes && memcmp(a->outs[i].t.data, b->outs[i].t.data, bytes))
      fail_msg("%s: 1 and 2 threads differ", what);
  }
}

/* Runs m with the reference kernels and, on every ISA with 1 and 2
 * threads, with the fast ones; asserts `op` selects `tactic`. */
static void check_model(kn_ir_model *m, const char *op, int32_t tactic, const char *what) {
  assert_int_equal(tk_fast_tactic(m, op, KN_ISA_PORTABLE), tactic);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    tk_results r1 = tk_run_fast(m, TK_FILL_SEEDED, isa, 1);
    tk_results r2 = tk_run_fast(m, TK_FILL_SEEDED, isa, 2);
    assert_close_keep(&r1, &ref, what, isa);
    assert_same_keep(&r1, &r2, what);
    tk_results_free(&r1);
    tk_results_free(&r2);
  }
  tk_results_free(&ref);
  kn_ir_model_free(m);
}

static kn_node *kiln_domain(kn_graph *g) {
  kn_node *n = tk_last(g);
  free(n->domain);
  n->domain = kn_strdup(KN_DOMAIN);
  assert_non_null(n->domain);
  return n;
}

static void test_unary_ops(void **state) {
  (void)state;
  static const char *const ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Erf", "HardSwish",
                                    "HardSigmoid", "LeakyRelu", "Neg", "Abs", "Sqrt",
                                    "Reciprocal", "Clip", "Gelu", "GeluTanh"};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (int s = 0; s <= N_SIZES; s++) {
      bool big = s == N_SIZES; /* above KN_EW_PARALLEL_MIN: split over threads */
      int64_t dims[2] = {big ? 300 : 1, big ? 257 : sizes[s]};
      const char *op = ops[o];
      bool gelu = !strncmp(op, "Gelu", 4), clip13 = !strcmp(op, "Clip") && (s & 1);
      kn_ir_model *m = tk_model_new(clip13 ? 13 : 14);
      kn_graph *g = m->graph;
      int32_t in[3] = {tk_input(g, "x", 2, dims), -1, -1};
      if (clip13) {
        in[1] = tk_const_scalar(g, -0.6f);
        in[2] = tk_const_scalar(g, 0.9f);
      }
      int32_t y = tk_node(g, gelu ? "Gelu" : op, clip13 ? 3 : 1, in);
      kn_node *n = tk_last(g);
      if (gelu) {
        n = kiln_domain(g);
        if (!strcmp(op, "GeluTanh")) assert_true(kn_node_set_string(n, "approximate", "tanh"));
      }
      if (!strcmp(op, "Clip") && !clip13) {
        assert_true(kn_node_set_float(n, "min", -0.6f));
        assert_true(kn_node_set_float(n, "max", 0.9f));
        m->opsets[0].version = 6;
      }
      if (!strcmp(op, "LeakyRelu")) assert_true(kn_node_set_float(n, "alpha", 0.3f));
      tk_output(g, y);
      tk_prepare(m);
      char what[64];
      snprintf(what, sizeof what, "%s n=%lld", op, (long long)(dims[0] * dims[1]));
      check_model(m, gelu ? "Gelu" : op, KN_TACTIC_eltwise, what);
    }
}

/* Two-input ops on broadcasting shapes (a, b). */
static void test_binary_ops(void **state) {
  (void)state;
  typedef struct shp {
    int32_t ra, rb;
    int64_t a[4], b[4];
  } shp;
  static const shp shapes[] = {
      {2, 0, {5, 33}, {0}},            /* scalar */
      {0, 2, {0}, {5, 33}},            /* scalar first */
      {2, 1, {7, 31}, {31}},           /* row */
      {2, 2, {7, 31}, {7, 1}},         /* column */
      {1, 2, {17}, {3, 17}},           /* a broadcast */
      {4, 3, {2, 3, 5, 7}, {3, 1, 7}}, /* general */
      {4, 4, {1, 6, 4, 5}, {1, 6, 1, 1}},
      {2, 1, {300, 257}, {257}}, /* threads */
      {2, 2, {300, 257}, {300, 1}},
      {2, 2, {300, 257}, {300, 257}},
  };
  static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n_shapes + N_SIZES; s++) {
      shp sh;
      if (s < n_shapes) {
        sh = shapes[s];
      } else { /* same shape, every tail length */
        memset(&sh, 0, sizeof sh);
        sh.ra = sh.rb = 1;
        sh.a[0] = sh.b[0] = sizes[s - n_shapes];
      }
      kn_ir_model *m = tk_model_new(13);
      kn_graph *g = m->graph;
      int32_t in[3] = {tk_input(g, "a", sh.ra, sh.a), tk_input(g, "b", sh.rb, sh.b), -1};
      bool three = !strcmp(ops[o], "Sum") || !strcmp(ops[o], "Mean");
      if (three) in[2] = tk_input(g, "c", sh.rb, sh.b);
      int32_t y = tk_node(g, ops[o], three ? 3 : 2, in);
      tk_output(g, y);
      tk_prepare(m);
      char what[64];
      snprintf(what, sizeof what, "%s shapes %d", ops[o], s);
      check_model(m, ops[o], KN_TACTIC_eltwise, what);
    }
  }
  /* PRelu: per-channel slope (unidirectional) */
  kn_ir_model *m = tk_model_new(9);
  kn_graph *g = m->graph;
  int32_t in[2] = {tk_input(g, "x", 4, (int64_t[]){2, 5, 3, 7}),
                   tk_const_rand(g, 3, (int64_t[]){5, 1, 1}, 4, 0.0f)};
  tk_output(g, tk_node(g, "PRelu", 2, in));
  tk_prepare(m);
  check_model(m, "PRelu", KN_TACTIC_eltwise, "PRelu");
}

static void test_softmax_ops(void **state) {
  (void)state;
  typedef struct smc {
    int64_t opset, axis;
    int32_t rank;
    int64_t dims[3];
  } smc;
  static const smc cases[] = {
      {13, -1, 3, {3, 5, 33}},   {13, 1, 3, {3, 17, 33}}, {13, 0, 3, {4, 3, 5}},
      {11, 1, 3, {3, 5, 7}},     {11, 2, 3, {3, 5, 7}},   {11, 0, 3, {2, 3, 5}},
      {13, 1, 3, {2, 5, 300}},   /* more lanes than one column chunk */
      {13, -1, 3, {12, 64, 128}}, /* threads over rows */
      {13, 1, 3, {4, 300, 100}},  /* threads over column chunks */
  };
  int n_cases = (int)(sizeof cases / sizeof cases[0]);
  for (int lg = 0; lg < 2; lg++)
    for (int c = 0; c < n_cases + N_SIZES; c++) {
      smc sc;
      if (c < n_cases) {
        sc = cases[c];
      } else {
        int64_t n = sizes[c - n_cases];
        sc = (smc){13, -1, 2, {3, n ? n : 1, 0}};
      }
      kn_ir_model *m = tk_model_new(sc.opset);
      kn_graph *g = m->graph;
      int32_t x = tk_input(g, "x", sc.rank, sc.dims);
      const char *op = lg ? "LogSoftmax" : "Softmax";
      int32_t y = tk_node(g, op, 1, &x);
      assert_true(kn_node_set_int(tk_last(g), "axis", sc.axis));
      tk_output(g, y);
      tk_prepare(m);
      char what[64];
      snprintf(what, sizeof what, "%s case %d", op, c);
      check_model(m, op, KN_TACTIC_softmax, what);
    }
}

static void test_norm_ops(void **state) {
  (void)state;
  /* LayerNormalization over the last axis, every tail length; over two
   * axes; without bias; the kiln alias; mean / inv-std outputs */
  for (int c = 0; c <= N_SIZES + 4; c++) {
    int64_t n = c < N_SIZES ? (sizes[c] ? sizes[c] : 1) : 33;
    bool big = c == N_SIZES, two_axes = c == N_SIZES + 1, no_bias = c == N_SIZES + 2,
         alias = c == N_SIZES + 3, stats = c == N_SIZES + 4;
    int64_t dims[3] = {big ? 300 : 3, 5, big ? 257 : n};
    kn_ir_model *m = tk_model_new(alias ? 13 : 17);
    kn_graph *g = m->graph;
    int32_t pr = two_axes ? 2 : 1;
    int64_t *pd = two_axes ? dims + 1 : dims + 2;
    int32_t in[3] = {tk_input(g, "x", 3, dims), tk_const_rand(g, pr, pd, 5, 1.0f),
                     no_bias ? -1 : tk_const_rand(g, pr, pd, 6, 0.0f)};
    int32_t outs[3];
    tk_node_n(g, "LayerNormalization", no_bias ? 2 : 3, in, stats ? 3 : 1, outs);
    kn_node *nd = tk_last(g);
    if (alias) nd = kiln_domain(g);
    if (two_axes) assert_true(kn_node_set_int(nd, "axis", 1));
    for (int i = 0; i < (stats ? 3 : 1); i++) tk_output(g, outs[i]);
    tk_prepare(m);
    check_model(m, "LayerNormalization", KN_TACTIC_layernorm, "LayerNormalization");
  }
  /* InstanceNormalization, GroupNormalization (per group, per channel) */
  for (int c = 0; c < 3; c++) {
    kn_ir_model *m = tk_model_new(c == 0 ? 13 : c == 1 ? 18 : 21);
    kn_graph *g = m->graph;
    int64_t dims[4] = {2, 6, 5, 7}, np = c == 1 ? 3 : 6;
    int32_t in[3] = {tk_input(g, "x", 4, dims), tk_const_rand(g, 1, &np, 5, 1.0f),
                     tk_const_rand(g, 1, &np, 6, 0.0f)};
    const char *op = c == 0 ? "InstanceNormalization" : "GroupNormalization";
    int32_t y = tk_node(g, op, 3, in);
    if (c) assert_true(kn_node_set_int(tk_last(g), "num_groups", 3));
    tk_output(g, y);
    tk_prepare(m);
    check_model(m, op, KN_TACTIC_layernorm, op);
  }
}

/* A chain touching every vectorised opcode and a scalar fallback one. */
static void test_ewchain(void **state) {
  (void)state;
  /* t = x + b; gelu; * x; sigmoid; clip; ^2; + tanh(x); erf; leaky;
   * hardswish; max with b; log(sigmoid(.)) (scalar Log); exp(-t);
   * gelu (tanh form); relu */
  static const int64_t ops[] = {KN_EW_ADD,        KN_EW_GELU,  KN_EW_MUL,   KN_EW_SIGMOID,
                                KN_EW_CLIP,       KN_EW_POWC,  KN_EW_TANH,  KN_EW_ADD,
                                KN_EW_ERF,        KN_EW_LEAKYRELU, KN_EW_HARDSWISH, KN_EW_MAX,
                                KN_EW_SIGMOID,    KN_EW_LOG,   KN_EW_NEG,   KN_EW_EXP,
                                KN_EW_GELU_TANH,  KN_EW_RELU};
  enum { N_OPS = sizeof ops / sizeof ops[0] };
  /* operands: 0 = x, 1 = b, 2 + k = result k */
  static const int64_t args[2 * N_OPS] = {0, 1,  2, -1, 3, 0,   4, -1,  5, -1,  6, -1,
                                          0, -1, 7, 8,  9, -1,  10, -1, 11, -1, 12, 1,
                                          13, -1, 14, -1, 15, -1, 16, -1, 17, -1, 18, -1};
  float consts[2 * N_OPS] = {0};
  consts[2 * 4] = 0.1f;
  consts[2 * 4 + 1] = 0.8f;
  consts[2 * 5] = 2.0f;
  consts[2 * 9] = 0.2f;
  for (int c = 0; c <= N_SIZES + 3; c++) {
    int64_t xd[2] = {2, c < N_SIZES ? sizes[c] : 0}, bd[2] = {1, xd[1]};
    int32_t rb = 2;
    if (c == N_SIZES) { /* large: threads */
      xd[0] = 300, xd[1] = 257, bd[1] = 257;
    } else if (c == N_SIZES + 1) { /* column broadcast */
      xd[0] = 37, xd[1] = 5, bd[0] = 37, bd[1] = 1;
    } else if (c == N_SIZES + 2) { /* scalar b */
      xd[0] = 4, xd[1] = 9, rb = 0;
    } else if (c == N_SIZES + 3) { /* x broadcast against a larger b */
      xd[0] = 1, xd[1] = 9, bd[0] = 6, bd[1] = 9;
    }
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t in[2] = {tk_input(g, "x", 2, xd), tk_input(g, "b", rb, bd)};
    int32_t y = tk_node(g, "ElementwiseChain", 2, in);
    kn_node *n = kiln_domain(g);
    assert_true(kn_node_set_ints(n, "ops", ops, N_OPS));
    assert_true(kn_node_set_ints(n, "args", args, 2 * N_OPS));
    assert_true(kn_node_set_floats(n, "consts", consts, 2 * N_OPS));
    tk_output(g, y);
    tk_prepare(m);
    char what[64];
    snprintf(what, sizeof what, "ElementwiseChain case %d", c);
    check_model(m, "ElementwiseChain", KN_TACTIC_eltwise, what);
  }
}

/* Non-float inputs keep the reference kernels. */
static void test_select_dtypes(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 1, (int64_t[]){4});
  g->values[x].type.dtype = KN_DTYPE_I32;
  tk_output(g, tk_node(g, "Relu", 1, &x));
  int32_t in[2] = {x, x};
  tk_output(g, tk_node(g, "Add", 2, in));
  tk_prepare(m);
  assert_int_equal(tk_fast_tactic(m, "Relu", KN_ISA_AVX512), 0);
  assert_int_equal(tk_fast_tactic(m, "Add", KN_ISA_AVX512), 0);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_ukernel), cmocka_unit_test(test_binary_ukernel),
      cmocka_unit_test(test_epilogue),      cmocka_unit_test(test_unary_ops),
      cmocka_unit_test(test_binary_ops),    cmocka_unit_test(test_softmax_ops),
      cmocka_unit_test(test_norm_ops),      cmocka_unit_test(test_ewchain),
      cmocka_unit_test(test_select_dtypes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
