/* MatMul, Gemm and FusedGemm in reduced precision (src/tactics/gemm/gemm_lowp.c),
 * for every ISA this machine has, on 1 and 2 threads, over shapes with
 * 1s, primes, vector tails and GEMV rows.
 *
 * The oracle is the same graph on the reference kernels with the rounding
 * made explicit: the input goes through what the precision does to it
 * (QuantizeLinear -> DequantizeLinear with the step's scale and zero point
 * for int8; Cast to bfloat16 / float16 and back for bf16 / fp16; nothing
 * for the weight-only fp16-weights and int8-weights) and the weights are
 * replaced by their rounded values (per-channel s8 times its scale for
 * int8 and int8-weights; bf16; fp16).  What is left between the two is the order and
 * precision of the fp32 sums and of the dequantization, so outputs must
 * agree to 2e-5 of the output's largest magnitude (a value quantized into
 * the wrong bucket, a wrong zero point or scale, a dropped epilogue or a
 * column off by one all miss it by orders of magnitude).
 *
 * The int8 cases also run with the CPU features withheld (the packed
 * block, made for this CPU, is then not used and the op packs per run)
 * and with alpha != 1 (A quantized ahead). */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "tactics/gemm/gemm_tactic.h"
#include "ops/op.h"
#include "builder/step_precision.h"
#include "ops/tactic.h"

typedef enum { OP_MATMUL, OP_GEMM_TB, OP_FUSED } op_kind;

typedef struct pcase {
  op_kind op;
  int64_t m, k, n;
  int32_t prec;
  float a_scale;
  int32_t a_zero;
  float alpha;
  kn_act act;
  bool residual;
} pcase;

/* What the precision does to the weights, in place: B is rows x cols,
 * the output channels its rows (per_row) or columns. */
static void round_weights(float *b, int64_t rows, int64_t cols, bool per_row, int32_t prec) {
  int64_t nel = rows * cols;
  if (prec == KN_PRECISION_INT8 || prec == KN_PRECISION_INT8_WEIGHTS) {
    int8_t *q = malloc((size_t)nel);
    float *sc = malloc((size_t)(per_row ? rows : cols) * sizeof(float));
    assert_non_null(q);
    assert_non_null(sc);
    kn_quantize_weights_s8(b, rows, cols, per_row, NULL, q, sc);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        b[r * cols + c] = (float)q[r * cols + c] * sc[per_row ? r : c];
    free(q);
    free(sc);
  } else if (prec == KN_PRECISION_BF16) {
    for (int64_t i = 0; i < nel; i++) b[i] = kn_bf16_to_f32(kn_f32_to_bf16(b[i]));
  } else {
    for (int64_t i = 0; i < nel; i++) b[i] = kn_f16_to_f32(kn_f32_to_f16(b[i]));
  }
}

/* The input as the step sees it (ref: the explicit rounding). */
static int32_t step_input(kn_graph *g, int32_t x, const pcase *c, bool ref) {
  if (!ref || c->prec == KN_PRECISION_FP16_WEIGHTS || c->prec == KN_PRECISION_INT8_WEIGHTS)
    return x;
  if (c->prec == KN_PRECISION_INT8) {
    int32_t in[3] = {x, tk_const_scalar(g, c->a_scale), tk_const_u8(g, (uint8_t)c->a_zero)};
    int32_t q = tk_node(g, "QuantizeLinear", 3, in);
    in[0] = q;
    return tk_node(g, "DequantizeLinear", 3, in);
  }
  int32_t h = tk_node(g, "Cast", 1, &x);
  assert_true(kn_node_set_int(tk_last(g), "to",
                              c->prec == KN_PRECISION_BF16 ? KN_DTYPE_BF16 : KN_DTYPE_F16));
  int32_t f = tk_node(g, "Cast", 1, &h);
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F32));
  return f;
}

static kn_ir_model *make(const pcase *c, bool ref) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  bool tb = c->op == OP_GEMM_TB;
  int64_t ad3[3] = {2, c->m, c->k}, ad2[2] = {c->m, c->k};
  int64_t bd[2] = {tb ? c->n : c->k, tb ? c->k : c->n};
  bool batched = c->op != OP_GEMM_TB && c->m % 2 == 1 && c->m > 1;
  int32_t a = batched ? tk_input(g, "a", 3, ad3) : tk_input(g, "a", 2, ad2);
  int32_t z = -1;
  if (c->residual) {
    int64_t zd[3] = {2, c->m, c->n};
    z = batched ? tk_input(g, "z", 3, zd) : tk_input(g, "z", 2, zd + 1);
  }
  int32_t b = tk_const_rand(g, 2, bd, 11, 0.0f);
  if (ref) round_weights(g->values[b].constant->data, bd[0], bd[1], tb, c->prec);
  int32_t x = step_input(g, a, c, ref);
  int32_t y = kn_graph_add_fresh_value(g, "y");
  int32_t in[4] = {x, b, -1, -1}, nin = 2;
  if (c->op == OP_MATMUL) {
    assert_true(kn_graph_new_node(g, "MatMul", "", "mm", 2, in, 1, &y) >= 0);
  } else {
    in[nin++] = tk_const_rand(g, 1, &c->n, 5, 0.1f);
    if (c->op == OP_FUSED && z >= 0) in[nin++] = z;
    const char *op = c->op == OP_FUSED ? "FusedGemm" : "Gemm";
    assert_true(kn_graph_new_node(g, op, c->op == OP_FUSED ? KN_DOMAIN : "", "step", nin, in, 1,
                                  &y) >= 0);
    kn_node *n = tk_last(g);
    if (tb) assert_true(kn_node_set_int(n, "transB", 1));
    assert_true(kn_node_set_float(n, "alpha", c->alpha));
    if (c->op == OP_FUSED) assert_true(kn_node_set_string(n, "activation", kn_act_name(c->act)));
  }
  tk_output(g, y);
  if (!ref) {
    kn_node *n = tk_last(g);
    n->precision = c->prec;
    if (c->prec == KN_PRECISION_INT8) {
      assert_true(kn_node_set_input_quant(n, c->a_scale, (int32_t)c->a_zero));
    }
  }
  tk_prepare(m);
  return m;
}

static void check(const tk_results *fast, const tk_results *ref, const pcase *c, int isa,
                  int threads, bool withheld) {
  char what[256];
  snprintf(what, sizeof what, "%s op %d m %lld k %lld n %lld isa %s threads %d%s",
           kn_precision_name(c->prec), (int)c->op, (long long)c->m, (long long)c->k,
           (long long)c->n, kn_isa_name((kn_isa)isa), threads,
           withheld ? " (features withheld)" : "");
  tk_assert_near_ref(fast, ref, what);
}

static void run_case(const pcase *c) {
  kn_ir_model *fast_m = make(c, false), *ref_m = make(c, true);
  uint64_t feat = kn_cpu_features();
  tk_results ref = tk_run(ref_m, TK_FILL_SEEDED);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    assert_int_equal(tk_fast_tactic(fast_m, fast_m->graph->nodes[fast_m->graph->n_nodes - 1].op_type,
                                    isa),
                     KN_TACTIC_gemm_packed);
    for (int threads = 1; threads <= 2; threads++) {
      tk_results fast = tk_run_fast(fast_m, TK_FILL_SEEDED, isa, threads);
      check(&fast, &ref, c, isa, threads, false);
      tk_results_free(&fast);
      if (c->prec == KN_PRECISION_INT8 && isa == KN_ISA_AVX512) {
        /* a block this CPU "cannot run": packed per run with the AVX2 impl */
        tk_results again = tk_run_fast_features(fast_m, TK_FILL_SEEDED, isa, threads,
                                                feat & ~KN_CPU_BIT(AVX512VNNI));
        check(&again, &ref, c, isa, threads, true);
        tk_results_free(&again);
      }
    }
  }
  tk_results_free(&ref);
  kn_ir_model_free(fast_m);
  kn_ir_model_free(ref_m);
}

static const int64_t shapes[][3] = {
    {1, 64, 100}, {33, 70, 45}, {17, 31, 33}, {5, 1, 7},  {2, 300, 129},
    {64, 257, 96}, {14, 32, 32}, {15, 33, 31}, {1, 768, 17}, {29, 16, 1},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static void sweep(int32_t prec) {
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int op = 0; op < 3; op++) {
      pcase c = {.op = (op_kind)op, .m = shapes[s][0], .k = shapes[s][1], .n = shapes[s][2],
                 .prec = prec, .a_scale = 4.0f / 255.0f, .a_zero = 128, .alpha = 1.0f,
                 .act = KN_ACT_NONE};
      if (op == OP_FUSED) {
        c.act = s % 3 == 0 ? KN_ACT_RELU : s % 3 == 1 ? KN_ACT_GELU : KN_ACT_NONE;
        c.residual = s % 2 == 0;
      }
      if (s % 4 == 3) { /* a narrower range: values past it saturate */
        c.a_scale = 1.5f / 255.0f;
        c.a_zero = 60;
      }
      if (op == OP_GEMM_TB && s % 3 == 2) c.alpha = 0.5f;
      run_case(&c);
    }
}

static void test_int8(void **state) {
  (void)state;
  sweep(KN_PRECISION_INT8);
}

static void test_bf16(void **state) {
  (void)state;
  sweep(KN_PRECISION_BF16);
}

static void test_fp16(void **state) {
  (void)state;
  sweep(KN_PRECISION_FP16); /* A rounded to fp16 too */
}

static void test_int8_weights(void **state) {
  (void)state;
  sweep(KN_PRECISION_INT8_WEIGHTS);
}

static void test_fp16_weights(void **state) {
  (void)state;
  sweep(KN_PRECISION_FP16_WEIGHTS);
}

/* The hooks: reduced precisions offered only for a 2-D fp32 constant B. */
static void test_precisions_hook(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t ad[2] = {4, 8}, bd[2] = {8, 5};
  int32_t in[2] = {tk_input(g, "a", 2, ad), tk_const_rand(g, 2, bd, 3, 0.0f)};
  tk_node(g, "MatMul", 2, in);
  int32_t in2[2] = {in[0], tk_input(g, "b", 2, bd)};
  tk_node(g, "MatMul", 2, in2);
  tk_prepare(m);
  const kn_node *c = &g->nodes[0], *r = &g->nodes[1];
  uint32_t pc = kn_tactics_of(c)->precisions(g, c, KN_ISA_PORTABLE);
  assert_true(pc & (1u << KN_PRECISION_INT8));
  assert_true(pc & (1u << KN_PRECISION_BF16));
  assert_true(pc & (1u << KN_PRECISION_INT8_WEIGHTS));
  assert_int_equal(kn_tactics_of(r)->precisions(g, r, KN_ISA_PORTABLE), 0);
  kn_ir_model_free(m);
}

/* Which reduced precisions the build may time against fp32 and take back
 * (kn_precisions_time): those from --precision, never an override's. */
static void test_revocable(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t ad[2] = {4, 8}, bd[2] = {8, 8};
  int32_t x = tk_input(g, "a", 2, ad);
  static const char *const names[3] = {"mm0", "mm1", "mm2"};
  for (int32_t k = 0; k < 3; k++) {
    int32_t in[2] = {x, tk_const_rand(g, 2, bd, 3 + (uint32_t)k, 0.0f)};
    int32_t y = kn_graph_add_fresh_value(g, names[k]);
    assert_true(kn_graph_new_node(g, "MatMul", "", names[k], 2, in, 1, &y) >= 0);
    x = y;
  }
  tk_output(g, x);
  tk_prepare(m);
  kn_machine mach;
  kn_machine_fallback(&mach);
  const char *ov[1];
  char pat[300];
  snprintf(pat, sizeof pat, "%s=fp16", names[1]);
  ov[0] = pat;
  uint8_t rev[4] = {9, 9, 9, 9};
  kn_lines dec = {0};
  kn_error err;
  kn_precision_options po = {.precision = KN_PRECISION_BF16, .overrides = ov, .n_overrides = 1,
                             .isa = KN_ISA_PORTABLE, .machine = &mach, .threads = 1,
                             .decisions = &dec, .revocable = rev};
  if (kn_precision_assign(m, &po, &err)) fail_msg("precision: %s", err.msg);
  assert_int_equal(g->nodes[0].precision, KN_PRECISION_BF16);
  assert_int_equal(g->nodes[1].precision, KN_PRECISION_FP16);
  assert_int_equal(rev[0], 1);
  assert_int_equal(rev[1], 0); /* --layer-precision: kept as asked */
  assert_int_equal(rev[2], 1);
  /* weight-only compression is no arithmetic to time: not revocable */
  po = (kn_precision_options){.precision = KN_PRECISION_FP32, .weights = KN_WEIGHTS_INT8,
                              .isa = KN_ISA_PORTABLE, .machine = &mach, .threads = 1,
                              .decisions = &dec, .revocable = rev};
  if (kn_precision_assign(m, &po, &err)) fail_msg("precision: %s", err.msg);
  assert_int_equal(g->nodes[0].precision, KN_PRECISION_INT8_WEIGHTS);
  assert_int_equal(rev[0], 0);
  kn_lines_free(&dec);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_precisions_hook),
      cmocka_unit_test(test_revocable),
      cmocka_unit_test(test_int8),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_fp16_weights),
      cmocka_unit_test(test_fp16),
      cmocka_unit_test(test_int8_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
