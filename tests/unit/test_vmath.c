/* The exp, erf, tanh and sigmoid approximations of the elementwise kernels
 * (src/kernels/eltwise/eltwise-impl.h) against double-precision libm, on
 * every ISA this machine has: a dense sweep of float bit patterns (every
 * 256th pattern, with a varying low byte: 2^24 values covering every
 * exponent, both signs, denormals, infinities and NaNs), or all 2^32 with
 * KILN_LONG_TESTS=1.  Asserts the maximum errors documented in
 * eltwise-impl.h and the special values (NaN, +-inf, overflow, underflow). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/eltwise/eltwise.h"

typedef double (*ref_fn)(double);
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* x * sigmoid(x) as the reference op computes it: NaN at -inf */
static double ref_silu(double x) { return isinf(x) && x < 0 ? NAN : x / (1.0 + exp(-x)); }

typedef struct fn_case {
  const char *name;
  int op;
  ref_fn ref;
  double max_ulp, max_rel, max_abs; /* documented in eltwise-impl.h */
  float ulp_from;    /* ulps and relative errors over x >= this only */
  double abs_below;  /* below it, the largest absolute error allowed */
} fn_case;

typedef struct errs {
  double ulp, rel, abs;
  float worst_x;
} errs;

/* error of a (float) against the exact r (double), in ulps of r's float spacing */
static double ulp_err(float a, double r) {
  int e;
  frexp(r, &e);
  double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
  return fabs((double)a - r) / ulp;
}

#define BATCH 4096

static void sweep(kn_isa isa, const fn_case *fc, uint64_t step, errs *er) {
  int op = fc->op;
  ref_fn ref = fc->ref;
  const kn_ew_ukernels *k = kn_ew_get(isa);
  float *x = malloc(BATCH * sizeof *x), *y = malloc(BATCH * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  memset(er, 0, sizeof *er);
  uint64_t total = (UINT64_C(1) << 32) / step;
  for (uint64_t base = 0; base < total; base += BATCH) {
    for (int i = 0; i < BATCH; i++) {
      uint64_t idx = base + (uint64_t)i;
      uint32_t bits = (uint32_t)(idx * step + (step > 1 ? (idx * 37u) % step : 0));
      memcpy(&x[i], &bits, 4);
    }
    k->unary(op, NULL, x, y, BATCH);
    for (int i = 0; i < BATCH; i++) {
      float xi = x[i], yi = y[i];
      if (isnan(xi)) {
        if (!isnan(yi)) fail_msg("isa %s op %d: f(NaN) = %g, expected NaN", kn_isa_name(isa), op, yi);
        continue;
      }
      double r = ref((double)xi);
      float rf = (float)r;
      if (isnan(r)) {
        if (!isnan(yi))
          fail_msg("isa %s op %d: f(%a) = %a, expected NaN", kn_isa_name(isa), op, xi, yi);
        continue;
      }
      if (xi < fc->ulp_from) {
        if (!(fabs((double)yi - r) <= fc->abs_below))
          fail_msg("isa %s op %d: f(%a) = %a, expected %a within %g", kn_isa_name(isa), op, xi,
                   yi, r, fc->abs_below);
        continue;
      }
      if (isinf(rf)) {
        if (yi != rf)
          fail_msg("isa %s op %d: f(%a) = %a, expected %a", kn_isa_name(isa), op, xi, yi, rf);
        continue;
      }
      if (!isfinite(yi))
        fail_msg("isa %s op %d: f(%a) = %a, expected %a", kn_isa_name(isa), op, xi, yi, r);
      double u = ulp_err(yi, r), ad = fabs((double)yi - r);
      if (u > er->ulp) {
        er->ulp = u;
        er->worst_x = xi;
      }
      if (ad > er->abs) er->abs = ad;
      if (fabs(r) >= FLT_MIN && ad / fabs(r) > er->rel) er->rel = ad / fabs(r);
    }
  }
  free(x);
  free(y);
}

static const fn_case cases[] = {
    {"exp", KN_VOP_EXP, exp, 1.2, 1e-7, INFINITY, -INFINITY, 0},
    {"erf", KN_VOP_ERF, erf, 1.6, 1.1e-7, 9.2e-8, -INFINITY, 0},
    {"tanh", KN_ACT_TANH, tanh, 1.6, 1.6e-7, INFINITY, -INFINITY, 0},
    {"sigmoid", KN_ACT_SIGMOID, ref_sigmoid, 2.5, 1.9e-7, INFINITY, -INFINITY, 0},
    {"silu", KN_ACT_SILU, ref_silu, 2.5, 2e-7, INFINITY, -88.0f, 6e-37},
};

static void test_sweep(void **state) {
  (void)state;
  const char *lt = getenv("KILN_LONG_TESTS");
  uint64_t step = lt && strcmp(lt, "1") == 0 ? 1 : 256;
  uint64_t f = kn_cpu_features();
  int bad = 0;
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      errs e;
      sweep((kn_isa)isa, &cases[c], step, &e);
      printf("%-8s %-7s max %.3f ulp (at %a), rel %.3g, abs %.3g\n", kn_isa_name((kn_isa)isa),
             cases[c].name, e.ulp, (double)e.worst_x, e.rel, e.abs);
      if (e.ulp > cases[c].max_ulp || e.rel > cases[c].max_rel || e.abs > cases[c].max_abs)
        bad += printf("  above the documented %.3g ulp, rel %.3g, abs %.3g\n", cases[c].max_ulp,
                      cases[c].max_rel, cases[c].max_abs) > 0;
    }
  }
  assert_int_equal(bad, 0);
}

/* Exact special values every ISA must give. */
static void test_special(void **state) {
  (void)state;
  static const float xs[] = {0.0f, -0.0f, INFINITY, -INFINITY, 88.72283f, 88.7229f, -87.33655f,
                             -103.972f, -104.0f, -200.0f, 1e-45f, -1e-45f, 10.0f, -10.0f, 3.92f,
                             5.0f, -5.0f};
  const int n = (int)(sizeof xs / sizeof xs[0]);
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    const kn_ew_ukernels *k = kn_ew_get((kn_isa)isa);
    float y[32];
    k->unary(KN_VOP_EXP, NULL, xs, y, n);
    assert_true(y[0] == 1.0f && y[1] == 1.0f && y[2] == INFINITY && y[3] == 0.0f);
    assert_true(isfinite(y[4]) && y[5] == INFINITY && y[8] == 0.0f && y[9] == 0.0f);
    assert_true(y[7] > 0.0f && y[7] < FLT_MIN); /* denormal result, not flushed */
    assert_true(y[10] == 1.0f && y[11] == 1.0f);
    k->unary(KN_VOP_ERF, NULL, xs, y, n);
    assert_true(y[0] == 0.0f && !signbit(y[0]) && y[1] == 0.0f && signbit(y[1]));
    assert_true(y[2] == 1.0f && y[3] == -1.0f && y[12] == 1.0f && y[13] == -1.0f);
    assert_true(y[15] == 1.0f && y[16] == -1.0f);
    k->unary(KN_ACT_TANH, NULL, xs, y, n);
    assert_true(y[0] == 0.0f && signbit(y[1]) && y[2] == 1.0f && y[3] == -1.0f);
    assert_true(y[12] == 1.0f && y[13] == -1.0f);
    k->unary(KN_ACT_SIGMOID, NULL, xs, y, n);
    assert_true(y[0] == 0.5f && y[1] == 0.5f && y[2] == 1.0f && y[3] == 0.0f);
    assert_true(y[11] == 0.5f && y[9] == 0.0f);
    float nan_in[3] = {NAN, -NAN, NAN};
    for (int op = 0; op < KN_VOP_COUNT; op++) {
      if (op == KN_ACT_NONE || op == KN_ACT_HARDSIGMOID || op == KN_ACT_CLIP) continue;
      kn_act_params p = {.act = (kn_act)op, .alpha = 0.1f, .beta = 0.5f, .lo = -1, .hi = 1};
      k->unary(op, &p, nan_in, y, 3);
      for (int i = 0; i < 3; i++)
        if (!isnan(y[i])) fail_msg("%s op %d: NaN gave %g", kn_isa_name((kn_isa)isa), op, y[i]);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_special),
      cmocka_unit_test(test_sweep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
