/* Elementwise kernels for AVX-512 (16 float lanes, masked tails): the
 * vector interface of eltwise-impl.h.  exp scales with vscalefps, which
 * rounds denormal results once and saturates to 0 / inf by itself. */
#include <immintrin.h>

#include "eltwise.h"

typedef __m512 V;
typedef __mmask16 M;
typedef __m512d VD;
#define VN 16
#define KN_EW_TABLE kn_ew_avx512

static inline __mmask16 tail_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_ldn(const float *p, int64_t n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
}
static inline void v_stn(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
static inline V v_set(float f) { return _mm512_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm512_div_ps(a, b); }
static inline V v_sqrt(V a) { return _mm512_sqrt_ps(a); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_abs(V a) { return _mm512_abs_ps(a); }
static inline V v_neg(V a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
static inline V v_clamp_abs(V a, V lim) { return _mm512_range_ps(a, lim, 0x02); }
static inline M v_lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline M v_gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline M v_nan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
static inline M v_or(M a, M b) { return (M)(a | b); }
static inline V v_sel(M m, V t, V f) { return _mm512_mask_blend_ps(m, f, t); }
static inline V v_copysign(V a, V s) {
  return _mm512_or_ps(_mm512_abs_ps(a), _mm512_and_ps(s, _mm512_set1_ps(-0.0f)));
}
static inline void v_rnd_exp(V x, V *n) {
  *n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline V v_ldexp(V p, V n) { return _mm512_scalef_ps(p, n); }
static inline float v_hsum(V v) { return _mm512_reduce_add_ps(v); }
static inline float v_hmax(V v) { return _mm512_reduce_max_ps(v); }
static inline VD vd_zero(void) { return _mm512_setzero_pd(); }
static inline VD vd_acc(VD acc, V x) {
  VD lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
  VD hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  return _mm512_add_pd(acc, _mm512_add_pd(lo, hi));
}
static inline double vd_hsum(VD v) { return _mm512_reduce_add_pd(v); }

#include "eltwise-impl.h"
