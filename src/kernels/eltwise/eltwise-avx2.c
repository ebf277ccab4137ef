/* Elementwise kernels for AVX2 + FMA (8 float lanes; tails through
 * vmaskmovps): the vector interface of eltwise-impl.h.  exp builds 2^n
 * from the exponent bits in two halves so that denormal results are
 * rounded once (one multiply by a normal power of two is exact). */
#include <immintrin.h>

#include "eltwise.h"

typedef __m256 V;
typedef __m256 M;
typedef __m256d VD;
#define VN 8
#define KN_EW_TABLE kn_ew_avx2

static inline __m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_ldn(const float *p, int64_t n, float fill) {
  __m256i m = tail_mask(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void v_stn(float *p, V v, int64_t n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
static inline V v_set(float f) { return _mm256_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm256_div_ps(a, b); }
static inline V v_sqrt(V a) { return _mm256_sqrt_ps(a); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline V v_neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
static inline V v_clamp_abs(V a, V lim) { return v_max(v_neg(lim), v_min(lim, a)); }
static inline M v_lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline M v_gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline M v_nan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
static inline M v_or(M a, M b) { return _mm256_or_ps(a, b); }
static inline V v_sel(M m, V t, V f) { return _mm256_blendv_ps(f, t, m); }
static inline V v_copysign(V a, V s) {
  V sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(s, sign));
}
/* round to nearest by adding 1.5 * 2^23 (|x| < 2^22) */
static inline void v_rnd_exp(V x, V *n) {
  V magic = _mm256_set1_ps(12582912.0f);
  *n = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
}
static inline V v_ldexp(V p, V n) {
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  __m256i bias = _mm256_set1_epi32(127);
  V s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  V s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
static inline float v_hsum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline float v_hmax(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline VD vd_zero(void) { return _mm256_setzero_pd(); }
static inline VD vd_acc(VD acc, V x) {
  VD lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
  VD hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
  return _mm256_add_pd(acc, _mm256_add_pd(lo, hi));
}
static inline double vd_hsum(VD v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "eltwise-impl.h"
