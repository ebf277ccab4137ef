/* Elementwise kernels in plain C (one "lane"): the vector interface of
 * eltwise-impl.h, so every machine computes the same polynomials as the
 * AVX versions (here with separate multiply and add, which moves results
 * by rounding only). */
#include <math.h>
#include <string.h>

#include "eltwise.h"

typedef float V;
typedef int M;
typedef double VD;
#define VN 1
#define KN_EW_TABLE kn_ew_portable

static inline V v_ld(const float *p) { return *p; }
static inline void v_st(float *p, V v) { *p = v; }
/* never called with VN == 1 (no tails) */
static inline V v_ldn(const float *p, int64_t n, float fill) { return n > 0 ? *p : fill; }
static inline void v_stn(float *p, V v, int64_t n) {
  if (n > 0) *p = v;
}
static inline V v_set(float f) { return f; }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_sub(V a, V b) { return a - b; }
static inline V v_mul(V a, V b) { return a * b; }
static inline V v_div(V a, V b) { return a / b; }
static inline V v_sqrt(V a) { return sqrtf(a); }
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_fnma(V a, V b, V c) { return c - a * b; }
static inline V v_max(V a, V b) { return a > b ? a : b; }
static inline V v_min(V a, V b) { return a < b ? a : b; }
static inline V v_abs(V a) { return fabsf(a); }
static inline V v_neg(V a) { return -a; }
static inline V v_clamp_abs(V a, V lim) { return v_max(v_neg(lim), v_min(lim, a)); }
static inline M v_lt(V a, V b) { return a < b; }
static inline M v_gt(V a, V b) { return a > b; }
static inline M v_nan(V a) { return a != a; }
static inline M v_or(M a, M b) { return a | b; }
static inline V v_sel(M m, V t, V f) { return m ? t : f; }
static inline V v_copysign(V a, V s) { return copysignf(a, s); }
/* round to nearest by adding 1.5 * 2^23 (|x| < 2^22); volatile-free: the
 * sum is rounded to float because C evaluates float arithmetic in float
 * on every target kiln supports (FLT_EVAL_METHOD 0) */
static inline void v_rnd_exp(V x, V *n) {
  float t = x + 12582912.0f;
  *n = t - 12582912.0f;
}
static inline float pow2i(int32_t e) {
  uint32_t bits = (uint32_t)(e + 127) << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
static inline V v_ldexp(V p, V n) {
  int32_t ni = n == n ? (int32_t)n : 0; /* NaN: p is NaN too */
  int32_t n1 = ni / 2, n2 = ni - n1;
  return p * pow2i(n1) * pow2i(n2);
}
static inline float v_hsum(V v) { return v; }
static inline float v_hmax(V v) { return v; }
static inline VD vd_zero(void) { return 0; }
static inline VD vd_acc(VD acc, V x) { return acc + x; }
static inline double vd_hsum(VD v) { return v; }

#include "eltwise-impl.h"
