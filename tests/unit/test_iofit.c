/* The IO model's per-family factors (kn_machine.factors): the fit
 * (src/cost/iofit.c) recovers known factors from synthetic timings, the
 * factors survive machine.json and a description without them still
 * loads (factor 1), the model scales each family's roofline by its
 * factor, and the probe's calibration runs fill them (src/builder/
 * machine_calib.c). */
#include "testkit.h"

#include "builder/builder.h"
#include "core/machine.h"
#include "cost/iofit.h"
#include "cost/iomodel.h"

#include <math.h>

static double pseudo01(uint32_t *s) { return (tk_pseudo(s) + 1.0) / 2.0; }

/* Steps of every family with rooflines from 1 us to 3 ms, the overhead,
 * and times that are exactly factor x roofline + overhead: the fit gives
 * the factors back (one thread and all threads apart). */
static void test_fit_recovers_factors(void **state) {
  (void)state;
  double truth[KN_MACHINE_FAMILIES][2];
  kn_io_sample s[KN_MACHINE_FAMILIES * 2 * 12];
  int32_t n = 0;
  uint32_t seed = 5;
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    for (int32_t t = 0; t < 2; t++) {
      truth[f][t] = 0.4 + 4.0 * pseudo01(&seed);
      for (int32_t k = 0; k < 12; k++) {
        double r = 1e-6 * pow(3000.0, pseudo01(&seed)), o = t ? 4e-6 : 1.5e-6;
        s[n++] = (kn_io_sample){f, t == 1, r, o, truth[f][t] * r + o};
      }
    }
  double got[KN_MACHINE_FAMILIES][2];
  kn_io_fit_factors(s, n, got);
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    for (int32_t t = 0; t < 2; t++)
      if (fabs(got[f][t] / truth[f][t] - 1) > 1e-4)
        fail_msg("%s, %s: fitted %.5f, true %.5f", kn_machine_family_name(f), t ? "all" : "one",
                 got[f][t], truth[f][t]);
}

/* With noise of +-20% on each time, the fit stays within a few percent;
 * a family with no sample gets 0 (not fitted). */
static void test_fit_noise_and_missing(void **state) {
  (void)state;
  kn_io_sample s[64];
  int32_t n = 0;
  uint32_t seed = 9;
  for (int32_t k = 0; k < 64; k++) {
    double r = 1e-5 * pow(100.0, pseudo01(&seed)), noise = 1 + 0.2 * tk_pseudo(&seed);
    s[n++] = (kn_io_sample){KN_FAM_CONV, false, r, 1.5e-6, (1.7 * r + 1.5e-6) * noise};
  }
  double got[KN_MACHINE_FAMILIES][2];
  kn_io_fit_factors(s, n, got);
  if (fabs(got[KN_FAM_CONV][0] / 1.7 - 1) > 0.05) fail_msg("fitted %.3f, true 1.7", got[KN_FAM_CONV][0]);
  assert_true(got[KN_FAM_CONV][1] == 0);
  assert_true(got[KN_FAM_GEMM][0] == 0);
  /* a step all overhead says nothing of the factor; with no usable step
   * the fit gives 0 */
  double r = 0, o = 1e-6, m = 2e-6;
  assert_true(kn_io_fit_factor(&r, &o, &m, 1) == 0);
}

/* machine.json keeps the factors and where and when they were fitted. */
static void test_json_round_trip(void **state) {
  (void)state;
  kn_machine m, back;
  kn_machine_fallback(&m);
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++) {
    m.factors[f][0] = 1.0 + 0.125 * f;
    m.factors[f][1] = f == KN_FAM_POOL ? 0 : 2.0 + 0.25 * f; /* one left unmeasured */
  }
  snprintf(m.factors_cpu, sizeof m.factors_cpu, "Test CPU 9000");
  m.factors_family = 26;
  m.factors_model = 2;
  snprintf(m.factors_isa, sizeof m.factors_isa, "avx512");
  snprintf(m.factors_when, sizeof m.factors_when, "2026-12-08T01:40:00Z");
  m.factors_seconds = 0.75;
  char *text = kn_machine_to_json(&m);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"factors\""));
  kn_error err;
  if (kn_machine_from_json(text, strlen(text), "machine.json", &back, &err))
    fail_msg("%s", err.msg);
  free(text);
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    for (int32_t t = 0; t < 2; t++)
      if (fabs(back.factors[f][t] - m.factors[f][t]) > 1e-9)
        fail_msg("%s[%d]: %.4f back for %.4f", kn_machine_family_name(f), t, back.factors[f][t],
                 m.factors[f][t]);
  assert_string_equal(back.factors_cpu, "Test CPU 9000");
  assert_int_equal(back.factors_family, 26);
  assert_int_equal(back.factors_model, 2);
  assert_string_equal(back.factors_isa, "avx512");
  assert_string_equal(back.factors_when, "2026-12-08T01:40:00Z");
  assert_true(fabs(back.factors_seconds - 0.75) < 1e-9);
  assert_true(kn_machine_factor(&back, KN_FAM_POOL, 2) == 1.0); /* unmeasured: 1 */
  assert_true(kn_machine_factor(&back, KN_FAM_GEMM, 1) == 1.0);
  assert_true(kn_machine_factor(&back, KN_FAM_CONV, 1) == 1.125);
  assert_true(kn_machine_factor(&back, KN_FAM_CONV, 2) == 2.25);
  /* a factor out of range is refused, naming it */
  m.factors[KN_FAM_WINOGRAD][0] = 150;
  text = kn_machine_to_json(&m);
  assert_non_null(text);
  kn_status st = kn_machine_from_json(text, strlen(text), "machine.json", &back, &err);
  free(text);
  assert_int_not_equal(st, KN_OK);
  assert_non_null(strstr(err.msg, "factors.families.winograd.one"));
}

/* A description written before the factors existed loads, with every
 * factor unset, and the model predicts as it always did. */
static void test_old_json_loads(void **state) {
  (void)state;
  static const char old[] =
      "{\"format\": \"kiln-machine\", \"version\": 1, \"kiln\": \"0.1.0\",\n"
      " \"source\": \"probe\", \"probe_seconds\": 8.3,\n"
      " \"cpu\": {\"model\": \"Oxide Virtual Turin-like Processor\", \"vendor\": \"AuthenticAMD\",\n"
      "         \"family\": 26, \"model_number\": 2, \"features\": [\"avx2\", \"fma\", \"avx512f\"]},\n"
      " \"cores\": 2, \"threads_per_core\": 1,\n"
      " \"peak\": {\"fp32_gflops\": {\"one\": 216.1, \"all\": 432.9},\n"
      "          \"bf16_gflops\": {\"one\": 403.4, \"all\": 793.2},\n"
      "          \"int8_gops\": {\"one\": 866.8, \"all\": 1738.9}},\n"
      " \"dram_copy_gbs\": {\"one\": 46.7, \"all\": 45.9},\n"
      " \"levels\": [\n"
      "  {\"name\": \"L1\", \"bytes\": 49152, \"line_bytes\": 64, \"shared_by\": 1,\n"
      "   \"read_gbs\": {\"one\": 397.9, \"all\": 796.9}, \"write_gbs\": {\"one\": 216.6, \"all\": 432.8}},\n"
      "  {\"name\": \"L2\", \"bytes\": 1048576, \"line_bytes\": 64, \"shared_by\": 1,\n"
      "   \"read_gbs\": {\"one\": 210.1, \"all\": 417.5}, \"write_gbs\": {\"one\": 212.6, \"all\": 425.4}},\n"
      "  {\"name\": \"L3\", \"bytes\": 30618419, \"line_bytes\": 64, \"shared_by\": 2,\n"
      "   \"read_gbs\": {\"one\": 90.8, \"all\": 181.9}, \"write_gbs\": {\"one\": 102.3, \"all\": 195.8}},\n"
      "  {\"name\": \"DRAM\", \"bytes\": 25232932864, \"line_bytes\": 64, \"shared_by\": 2,\n"
      "   \"read_gbs\": {\"one\": 34.5, \"all\": 37.5}, \"write_gbs\": {\"one\": 34.9, \"all\": 33.0}}]}\n";
  kn_machine m;
  kn_error err;
  if (kn_machine_from_json(old, strlen(old), "machine.json", &m, &err)) fail_msg("%s", err.msg);
  assert_int_equal(m.n_levels, 4);
  assert_string_equal(m.factors_cpu, "");
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    for (int32_t t = 1; t <= 2; t++) assert_true(kn_machine_factor(&m, f, t) == 1.0);
  /* written back, it still has no factors */
  char *text = kn_machine_to_json(&m);
  assert_non_null(text);
  assert_null(strstr(text, "factors"));
  free(text);
}

/* The model: a GEMM step's prediction is its family's factor times the
 * roofline plus the overhead; a reference step (tactic 0, as every step
 * is while the passes run) keeps factor 1. */
static void test_model_applies_factor(void **state) {
  (void)state;
  kn_ir_model *ir = tk_model_new(13);
  kn_graph *g = ir->graph;
  int32_t x = tk_input(g, "x", 2, (int64_t[]){64, 256});
  int32_t w = tk_const_rand(g, 2, (int64_t[]){256, 512}, 3, 0);
  tk_output(g, tk_node(g, "MatMul", 2, (int32_t[]){x, w}));
  tk_prepare(ir);
  kn_node *n = &g->nodes[0];
  kn_machine m;
  kn_machine_fallback(&m);
  kn_io_step plain, scaled, ref;
  n->tactic = KN_TACTIC_gemm_packed;
  kn_io_predict(ir, 0, &m, 1, &plain);
  assert_true(plain.factor == 1.0);
  m.factors[KN_FAM_GEMM][0] = 2.5;
  m.factors[KN_FAM_CONV][0] = 7; /* another family's: no effect */
  kn_io_predict(ir, 0, &m, 1, &scaled);
  assert_true(scaled.factor == 2.5);
  assert_true(scaled.roofline_s == plain.roofline_s);
  double want = 2.5 * plain.roofline_s + plain.time_s[KN_IO_BOUNDARIES + 1];
  if (fabs(scaled.predicted_s - want) > 1e-12) fail_msg("%g s, want %g", scaled.predicted_s, want);
  n->tactic = 0;
  kn_io_predict(ir, 0, &m, 1, &ref);
  assert_true(ref.factor == 1.0);
  /* the tactics' families */
  assert_int_equal(kn_io_family(KN_TACTIC_conv_winograd_nhwc), KN_FAM_WINOGRAD);
  assert_int_equal(kn_io_family(KN_TACTIC_conv_igemm_nhwc), KN_FAM_CONV);
  assert_int_equal(kn_io_family(KN_TACTIC_conv_depthwise_nhwc), KN_FAM_DEPTHWISE);
  assert_int_equal(kn_io_family(KN_TACTIC_attention_streamed), KN_FAM_ATTENTION);
  assert_int_equal(kn_io_family(KN_TACTIC_pool_nhwc), KN_FAM_POOL);
  assert_int_equal(kn_io_family(KN_TACTIC_layernorm), KN_FAM_ELTWISE);
  assert_int_equal(kn_io_family(KN_TACTIC_copy), KN_FAM_COPY);
  assert_int_equal(kn_io_family(0), -1);
  kn_ir_model_free(ir);
}

/* The calibration runs fill a factor for every family their graphs
 * cover, on one thread and all, and say where and when. */
static void test_calibration_fills_factors(void **state) {
  (void)state;
  /* calibration times kernels: under the sanitizers they run 10-50x slower
   * than what the factors describe, and the runs take minutes */
  if (tk_sanitized()) skip();
  kn_machine m;
  kn_machine_fallback(&m);
  kn_error err;
  if (kn_machine_calibrate(&m, 2, &err)) fail_msg("%s", err.msg);
  static const int32_t covered[] = {KN_FAM_GEMM,  KN_FAM_CONV,    KN_FAM_DEPTHWISE,
                                    KN_FAM_ATTENTION, KN_FAM_POOL, KN_FAM_ELTWISE,
                                    KN_FAM_COPY};
  for (size_t k = 0; k < sizeof covered / sizeof covered[0]; k++)
    for (int32_t t = 0; t < 2; t++) {
      double f = m.factors[covered[k]][t];
      if (!(f > 1.0 / 64 && f < 64))
        fail_msg("%s[%d]: factor %g", kn_machine_family_name(covered[k]), t, f);
    }
  assert_string_equal(m.factors_cpu, m.cpu);
  assert_int_equal(m.factors_family, m.family);
  assert_true(m.factors_isa[0] != 0);
  assert_int_equal(strlen(m.factors_when), 20);
  assert_true(m.factors_seconds > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fit_recovers_factors),
      cmocka_unit_test(test_fit_noise_and_missing),
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_old_json_loads),
      cmocka_unit_test(test_model_applies_factor),
      cmocka_unit_test(test_calibration_fills_factors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
