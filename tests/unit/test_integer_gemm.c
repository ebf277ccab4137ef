/* MatMulInteger on the int8 GEMM (tactic qgemm_integer, src/ops/matmul.c)
 * and DynamicQuantizeLinear's vector quantizer (src/ops/quant.c): the graph
 * ONNX Runtime's dynamic quantization writes for a MatMul with a weight,
 *
 *   x -> DynamicQuantizeLinear -> MatMulInteger(xq, Bq, xz, bz) -> Cast(float)
 *
 * run on the fast kernels gives the reference kernels' results bit for bit
 * (the s32 sums are exact): s8 and u8 weights, B's zero point absent, 0,
 * nonzero, per column; A of rank 1, 2 and 3; every ISA this CPU has, on 1
 * and 2 threads; and a context without VNNI (the block packed for VNNI is
 * not used: the reference kernel runs). */
#include "testkit.h"

#include <string.h>

#include "core/cpu.h"
#include "passes/pass.h"
#include "ops/tactic.h"

typedef enum { ZB_NONE, ZB_ZERO, ZB_SCALAR, ZB_COLUMN } zb_kind;

typedef enum { CHAIN_NONE, CHAIN_CAST, CHAIN_SCALE, CHAIN_SCALE_COLUMN } chain_kind;

typedef struct icase {
  bool u8_weights;
  zb_kind zb;
  int32_t a_rank; /* 1: [k]; 2: [m, k]; 3: [2, m, k] */
  int64_t m, k, n;
  /* CHAIN_NONE: outputs Cast(s) and s (nothing to fuse); else the chain the
   * integer_gemm pass fuses: Cast(s) alone, or times Mul(a_scale, b_scale)
   * with b_scale one value or one per column (operands swapped when odd) */
  chain_kind chain;
  bool swapped;
  bool bias; /* then Add(., bias[n]) */
} icase;

static kn_ir_model *make(const icase *c) {
  kn_ir_model *mo = tk_model_new(13);
  kn_graph *g = mo->graph;
  int64_t ad[3];
  int32_t r = 0;
  if (c->a_rank == 3) ad[r++] = 2;
  if (c->a_rank >= 2) ad[r++] = c->m;
  ad[r++] = c->k;
  int32_t x = tk_input(g, "x", r, ad);
  int32_t dq[3];
  tk_node_n(g, "DynamicQuantizeLinear", 1, &x, 3, dq);
  int32_t xq = dq[0], xz = dq[2];
  int64_t wd[2] = {c->k, c->n};
  uint8_t *w = kn_malloc((size_t)(c->k * c->n)), zb[512];
  uint32_t seed = (uint32_t)(c->k * 31 + c->n);
  for (int64_t i = 0; i < c->k * c->n; i++) w[i] = (uint8_t)(tk_pseudo(&seed) * 127.0f + 128.0f);
  for (int64_t j = 0; j < c->n; j++) zb[j] = (uint8_t)(tk_pseudo(&seed) * 100.0f + 128.0f);
  kn_dtype wt = c->u8_weights ? KN_DTYPE_U8 : KN_DTYPE_I8;
  int32_t in[4] = {xq, tk_const_typed(g, wt, 2, wd, w), xz, -1};
  uint8_t zscalar = c->zb == ZB_ZERO ? (c->u8_weights ? 128 : 0) : (c->u8_weights ? 121 : 7);
  int64_t nd = c->n;
  if (c->zb == ZB_ZERO || c->zb == ZB_SCALAR) in[3] = tk_const_typed(g, wt, 0, NULL, &zscalar);
  if (c->zb == ZB_COLUMN) in[3] = tk_const_typed(g, wt, 1, &nd, zb);
  int32_t y = tk_node(g, "MatMulInteger", c->zb == ZB_NONE ? 3 : 4, in);
  int32_t f = tk_node(g, "Cast", 1, &y);
  assert_true(kn_node_set_int(tk_last(g), "to", KN_DTYPE_F32));
  if (c->chain >= CHAIN_SCALE) {
    float bs[512];
    for (int64_t j = 0; j < c->n; j++) bs[j] = 0.001f + 0.0007f * tk_pseudo(&seed);
    int32_t bsv = c->chain == CHAIN_SCALE_COLUMN ? tk_const_f32(g, 1, &nd, bs)
                                                 : tk_const_scalar(g, bs[0]);
    int32_t sin[2] = {c->swapped ? bsv : dq[1], c->swapped ? dq[1] : bsv};
    int32_t sc = tk_node(g, "Mul", 2, sin);
    int32_t min[2] = {c->swapped ? sc : f, c->swapped ? f : sc};
    f = tk_node(g, "Mul", 2, min);
  }
  if (c->bias) {
    float bv[512];
    for (int64_t j = 0; j < c->n; j++) bv[j] = 3.0f * tk_pseudo(&seed);
    int32_t bc = tk_const_f32(g, 1, &nd, bv);
    f = tk_node(g, "Add", 2, (int32_t[]){c->swapped ? bc : f, c->swapped ? f : bc});
  }
  tk_output(g, f);
  if (c->chain == CHAIN_NONE) tk_output(g, y);
  free(w);
  tk_prepare(mo);
  return mo;
}

static void run_case(const icase *c) {
  kn_ir_model *mo = make(c);
  uint64_t feat = kn_cpu_features();
  int32_t best = (int32_t)kn_isa_detect(feat);
  char what[160];
  snprintf(what, sizeof what, "u8 B %d zb %d A rank %d m %lld k %lld n %lld", c->u8_weights,
           (int)c->zb, c->a_rank, (long long)c->m, (long long)c->k, (long long)c->n);
  assert_int_equal(tk_fast_tactic(mo, "MatMulInteger", best), KN_TACTIC_qgemm_integer);
  tk_results want = tk_run(mo, TK_FILL_SEEDED);
  for (int32_t isa = 0; isa <= best; isa++)
    for (int32_t threads = 1; threads <= 2; threads++) {
      tk_results got = tk_run_fast(mo, TK_FILL_SEEDED, isa, threads);
      tk_assert_bits(&got, &want, what);
      tk_results_free(&got);
    }
  /* an AVX-512 context without VNNI: the VNNI block is not used */
  if (best == KN_ISA_AVX512 && (feat & KN_CPU_BIT(AVX512VNNI))) {
    tk_results got =
        tk_run_fast_features(mo, TK_FILL_SEEDED, best, 2, feat & ~KN_CPU_BIT(AVX512VNNI));
    tk_assert_bits(&got, &want, what);
    tk_results_free(&got);
  }
  tk_results_free(&want);
  kn_ir_model_free(mo);
}

/* The integer_gemm pass: the chain becomes one MatMulIntegerToFloat step
 * whose results are the unfused chain's on the reference kernels, bit for
 * bit, fast or not. */
static void run_fused(const icase *c) {
  kn_ir_model *ref = make(c), *opt = make(c);
  char what[160];
  snprintf(what, sizeof what,
           "fused chain %d swapped %d bias %d u8 B %d zb %d m %lld k %lld n %lld",
           (int)c->chain, c->swapped, c->bias, c->u8_weights, (int)c->zb, (long long)c->m,
           (long long)c->k, (long long)c->n);
  assert_true(tk_run_pass(opt, kn_pass_integer_gemm));
  assert_int_equal(tk_count_op(opt->graph, "MatMulIntegerToFloat"), 1);
  assert_int_equal(tk_count_op(opt->graph, "Cast"), 0);
  assert_int_equal(tk_count_op(opt->graph, "MatMulInteger"), 0);
  assert_int_equal(tk_count_op(opt->graph, "Add"), 0);
  tk_results want = tk_run(ref, TK_FILL_SEEDED);
  tk_results slow = tk_run(opt, TK_FILL_SEEDED);
  tk_assert_bits(&slow, &want, what);
  tk_results_free(&slow);
  uint64_t feat = kn_cpu_features();
  int32_t best = (int32_t)kn_isa_detect(feat);
  for (int32_t isa = 0; isa <= best; isa++)
    for (int32_t threads = 1; threads <= 2; threads++) {
      tk_results got = tk_run_fast(opt, TK_FILL_SEEDED, isa, threads);
      tk_assert_bits(&got, &want, what);
      tk_results_free(&got);
    }
  tk_results_free(&want);
  kn_ir_model_free(ref);
  kn_ir_model_free(opt);
}

static void test_fused_to_float(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{9, 37, 33}, {32, 128, 64}, {1, 300, 70}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int v = 0; v < 24; v++) {
      icase c = {.u8_weights = v & 1, .zb = (v >> 1) & 1 ? ZB_COLUMN : ZB_NONE, .a_rank = 2,
                 .m = shapes[s][0], .k = shapes[s][1], .n = shapes[s][2],
                 .chain = (chain_kind)(CHAIN_CAST + (v >> 2) % 3), .swapped = (v + (int)s) & 1,
                 .bias = v >= 12};
      run_fused(&c);
    }
}

static void test_dynamic_matmul_integer(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 64, 40}, {9, 37, 33}, {32, 128, 64}, {3, 5, 1},
                                      {17, 300, 70}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int v = 0; v < 8; v++) {
      icase c = {.u8_weights = v & 1, .zb = (zb_kind)(v >> 1), .a_rank = 2 + (int32_t)(s % 2),
                 .m = shapes[s][0], .k = shapes[s][1], .n = shapes[s][2]};
      run_case(&c);
    }
  icase vec = {.zb = ZB_COLUMN, .a_rank = 1, .m = 1, .k = 50, .n = 20};
  run_case(&vec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dynamic_matmul_integer),
      cmocka_unit_test(test_fused_to_float),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
