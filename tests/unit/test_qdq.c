/* The qdq pass (src/passes/qdq.c) and the precision step it feeds
 * (src/builder/step_precision.c): a Q/DQ graph, optimized and given its
 * precisions as the builder does, runs its MatMul / Gemm steps in int8 with
 * the graph's own quantization, and its results equal the Q/DQ graph's on
 * the reference kernels (which run QuantizeLinear and DequantizeLinear as
 * written) to the fp32 summation order: u8 and s8 activations, per-tensor
 * and per-channel weights (axis 0 and 1), a transB Gemm.  Pairs whose scale
 * differs between Q and DQ, or whose consumer has a non-constant weight,
 * are left alone. */
#include "testkit.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "tactics/gemm/gemm_tactic.h"
#include "passes/pass.h"
#include "builder/step_precision.h"

typedef struct qcase {
  bool gemm;        /* Gemm transB=1, else MatMul */
  bool s8;          /* s8 activations (zero point int8) */
  bool per_channel; /* per output channel weight scales */
  float q_scale, dq_scale; /* unequal: the pair must be left alone */
} qcase;

static kn_ir_model *make(const qcase *c, int64_t m, int64_t k, int64_t n) {
  kn_ir_model *mo = tk_model_new(13);
  kn_graph *g = mo->graph;
  int64_t ad[2] = {m, k};
  int32_t x = tk_input(g, "x", 2, ad);
  int32_t zp = c->s8 ? tk_const_typed(g, KN_DTYPE_I8, 0, NULL, &(int8_t){-3})
                     : tk_const_typed(g, KN_DTYPE_U8, 0, NULL, &(uint8_t){125});
  int32_t in[3] = {x, tk_const_scalar(g, c->q_scale), zp};
  int32_t q = tk_node(g, "QuantizeLinear", 3, in);
  int32_t in2[3] = {q, tk_const_scalar(g, c->dq_scale), zp};
  int32_t xd = tk_node(g, "DequantizeLinear", 3, in2);
  /* the weight: int8 codes, stored [n, k] for the Gemm, [k, n] for MatMul */
  int64_t wd[2] = {c->gemm ? n : k, c->gemm ? k : n};
  int8_t *wq = kn_malloc((size_t)(k * n));
  float *ws = kn_malloc((size_t)n * sizeof(float));
  uint32_t seed = 5;
  for (int64_t i = 0; i < k * n; i++) wq[i] = (int8_t)((int)(tk_pseudo(&seed) * 127.0f));
  for (int64_t j = 0; j < n; j++) ws[j] = 0.01f + 0.002f * (float)(j % 7);
  int32_t wv = tk_const_typed(g, KN_DTYPE_I8, 2, wd, wq);
  int64_t nd = n;
  int32_t sv = c->per_channel ? tk_const_typed(g, KN_DTYPE_F32, 1, &nd, ws) : tk_const_scalar(g, 0.02f);
  int32_t win[2] = {wv, sv};
  int32_t w = tk_node(g, "DequantizeLinear", 2, win);
  if (c->per_channel) assert_true(kn_node_set_int(tk_last(g), "axis", c->gemm ? 0 : 1));
  free(wq);
  free(ws);
  int32_t op_in[3] = {xd, w, tk_const_rand(g, 1, &nd, 9, 0.0f)};
  int32_t y = tk_node(g, c->gemm ? "Gemm" : "MatMul", c->gemm ? 3 : 2, op_in);
  if (c->gemm) assert_true(kn_node_set_int(tk_last(g), "transB", 1));
  tk_output(g, y);
  tk_prepare(mo);
  return mo;
}

static void run_case(const qcase *c, int64_t m, int64_t k, int64_t n, bool expect_int8) {
  kn_ir_model *ref = make(c, m, k, n), *opt = make(c, m, k, n);
  kn_error err;
  kn_lines dec = {0};
  kn_optimize_options oo = {.decisions = &dec};
  if (kn_optimize(opt, &oo, &err)) fail_msg("optimize: %s", err.msg);
  uint64_t feat = kn_cpu_features();
  int32_t isa = (int32_t)kn_isa_detect(feat);
  kn_machine mach;
  kn_machine_fallback(&mach);
  kn_precision_options po = {.isa = isa, .machine = &mach, .threads = 1, .decisions = &dec};
  if (kn_precision_assign(opt, &po, &err)) fail_msg("precision: %s", err.msg);
  int32_t int8 = 0, qnodes = 0;
  const kn_graph *g = opt->graph;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int8 += g->nodes[i].precision == KN_PRECISION_INT8;
    qnodes += !strcmp(g->nodes[i].op_type, "QuantizeLinear");
  }
  assert_int_equal(int8, expect_int8 ? 1 : 0);
  assert_int_equal(qnodes, expect_int8 ? 0 : 1);
  tk_results want = tk_run(ref, TK_FILL_SEEDED);
  for (int32_t threads = 1; threads <= 2; threads++) {
    tk_results got = tk_run_fast(opt, TK_FILL_SEEDED, isa, threads);
    const float *p = got.outs[0].t.data, *q = want.outs[0].t.data;
    double amax = 0;
    int64_t cnt = kn_tensor_numel(&want.outs[0].t);
    for (int64_t i = 0; i < cnt; i++) amax = fmax(amax, fabs(q[i]));
    for (int64_t i = 0; i < cnt; i++)
      if (!(fabs((double)p[i] - q[i]) <= 2e-5 * amax + 1e-6))
        fail_msg("%s s8 %d per-channel %d m %lld k %lld n %lld threads %d: element %lld is "
                 "%.9g, the Q/DQ graph's %.9g",
                 c->gemm ? "Gemm" : "MatMul", c->s8, c->per_channel, (long long)m, (long long)k,
                 (long long)n, threads, (long long)i, (double)p[i], (double)q[i]);
    tk_results_free(&got);
  }
  tk_results_free(&want);
  kn_lines_free(&dec);
  kn_ir_model_free(ref);
  kn_ir_model_free(opt);
}

static void test_qdq_int8(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 64, 40}, {9, 37, 33}, {32, 128, 64}, {3, 5, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int v = 0; v < 8; v++) {
      qcase c = {.gemm = v & 1, .s8 = (v >> 1) & 1, .per_channel = (v >> 2) & 1,
                 .q_scale = 0.013f, .dq_scale = 0.013f};
      run_case(&c, shapes[s][0], shapes[s][1], shapes[s][2], true);
    }
}

static void test_qdq_mismatch_left_alone(void **state) {
  (void)state;
  qcase c = {.q_scale = 0.013f, .dq_scale = 0.026f};
  run_case(&c, 4, 16, 8, false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qdq_int8),
      cmocka_unit_test(test_qdq_mismatch_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
