/* QuantizeLinear and DequantizeLinear's fast paths (src/ops/quant.c: the
 * vector quantizer for per-tensor fp32 -> u8 / s8, typed loops for u8 / s8
 * -> fp32), which the Q/DQ pairs ONNX Runtime's quantizer leaves around
 * Add, pools and concatenations run on: their results are the reference
 * loops' bit for bit on ties, NaN, infinities, denormals, out-of-range and
 * random values, every length's tail, u8 and s8, with and without a zero
 * point, on every ISA this CPU has.  (DequantizeLinear's typed loop is the
 * reference path's own common case, the generic loop's arithmetic; here it
 * reads the fast and the reference quantizations.) */
#include "testkit.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"

/* x (n values: specials, ties of the scale, random) -> Q -> DQ for a u8
 * zero point, an s8 one and none; outputs every Q and DQ result. */
static kn_ir_model *make(int64_t n, float scale, uint8_t zu, int8_t zs) {
  kn_ir_model *mo = tk_model_new(13);
  kn_graph *g = mo->graph;
  static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f,
                                  -1e-40f, 1e30f, -1e30f, 3e9f, -3e9f};
  float *x = kn_malloc((size_t)n * sizeof(float));
  uint32_t seed = (uint32_t)n * 17u + 3u;
  for (int64_t i = 0; i < n; i++) {
    int64_t k = i % 40;
    x[i] = k < 12 ? special[k]
           : k < 24 ? scale * ((float)(k - 18) + 0.5f) * (1.0f + (float)(i / 40))
                    : 300.0f * scale * tk_pseudo(&seed);
  }
  int32_t xv = tk_const_typed(g, KN_DTYPE_F32, 1, &n, x);
  free(x);
  int32_t sv = tk_const_scalar(g, scale);
  int32_t zuv = tk_const_typed(g, KN_DTYPE_U8, 0, NULL, &zu), zsv = tk_const_typed(g, KN_DTYPE_I8, 0, NULL, &zs);
  int32_t zp[3] = {zuv, zsv, -1};
  for (int k = 0; k < 3; k++) {
    int32_t in[3] = {xv, sv, zp[k]};
    int32_t q = tk_node(g, "QuantizeLinear", k < 2 ? 3 : 2, in);
    int32_t din[3] = {q, sv, zp[k]};
    int32_t d = tk_node(g, "DequantizeLinear", k < 2 ? 3 : 2, din);
    tk_output(g, q);
    tk_output(g, d);
  }
  tk_prepare(mo);
  return mo;
}

static void same(const tk_results *got, const tk_results *want, const char *what) {
  assert_int_equal(got->n, want->n);
  for (int32_t i = 0; i < got->n; i++) {
    const kn_tensor *a = &got->outs[i].t, *b = &want->outs[i].t;
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->nbytes, b->nbytes);
    size_t es = kn_dtype_size(a->dtype);
    for (int64_t k = 0; k < kn_tensor_numel(a); k++)
      if (memcmp((const char *)a->data + k * es, (const char *)b->data + k * es, es))
        fail_msg("%s: output %d (%s) element %lld differs from the reference loop's", what,
                 (int)i, kn_dtype_name(a->dtype), (long long)k);
  }
}

static void test_quant_fast_paths(void **state) {
  (void)state;
  static const float scales[] = {1.0f, 0.5f, 0.037f};
  static const uint8_t zus[] = {0, 128, 255};
  static const int8_t zss[] = {0, -128, 127};
  static const int64_t ns[] = {1, 15, 16, 17, 63, 64, 65, 301, 4099};
  int32_t best = (int32_t)kn_isa_detect(kn_cpu_features());
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (int b = 0; b < 3; b++) {
      kn_ir_model *mo = make(ns[a], scales[b], zus[(a + b) % 3], zss[(a + 2 * b) % 3]);
      char what[96];
      snprintf(what, sizeof what, "n %lld scale %g", (long long)ns[a], (double)scales[b]);
      tk_results want = tk_run(mo, TK_FILL_SEEDED);
      for (int32_t isa = 0; isa <= best; isa++) {
        tk_results got = tk_run_fast(mo, TK_FILL_SEEDED, isa, 1);
        same(&got, &want, what);
        tk_results_free(&got);
      }
      tk_results_free(&want);
      kn_ir_model_free(mo);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quant_fast_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
