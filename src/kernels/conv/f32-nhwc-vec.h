/*
 * The small vector interface the channels-last depthwise and pooling
 * templates (f32-dwconv-nhwc-impl.h, pool/f32-pool-nhwc-impl.h) are
 * written against: vectors run along the channels of one pixel, so the
 * only masks are channel tails (lanes [0, n)).  The including per-ISA
 * file defines one of NHWC_AVX512 (16 lanes, k-masks), NHWC_AVX2 (8
 * lanes, vmaskmovps) or NHWC_PORTABLE (8 floats as a plain array, which
 * the compiler vectorises for the baseline).
 *
 *   V, M, VN             vector, lane mask, lanes
 *   m_tail(n)            lanes [0, n), 0 < n <= VN
 *   v_ld v_st            unaligned whole-vector load / store
 *   v_ldm(p, m)          lanes in m from p, 0 elsewhere; lanes outside m
 *                        are never read
 *   v_stm(p, v, m)       store the lanes in m
 *   v_set v_add v_mul v_div v_fma(a, b, c) = a*b + c
 *   v_max v_min          x86 operand order: the second operand when either
 *                        is NaN
 *   nhwc_taps_inside     the taps of a window inside the image
 *   nhwc_step(p, n)      p + n as one pointer add (see there)
 *   VI, vi_group(q, i)   lane-index vector: lane l <- lane (l / q) * q + i
 *   v_perm(v, idx)       lane l <- v's lane idx[l] (grouped convolutions:
 *                        input channel i of each group of q lanes
 *                        broadcast across the group)
 *   v_keep(v)            v, held in a register: a loaded vector used by
 *                        several FMAs is then loaded once (the compiler
 *                        otherwise folds the load into each FMA, which
 *                        made the depthwise kernels load-bound)
 */
#ifndef KN_F32_NHWC_VEC_H
#define KN_F32_NHWC_VEC_H

#include <stdbool.h>
#include <stdint.h>

/* The taps [*k0, *k1) of a k-tap window with dilation d starting at input
 * position i0 that fall inside [0, n) (an empty range when none does). */
static inline void nhwc_taps_inside(int64_t i0, int64_t n, int64_t k, int64_t d, int64_t *k0,
                                    int64_t *k1) {
  int64_t a = i0 >= 0 ? 0 : (-i0 + d - 1) / d;
  int64_t b = i0 >= n ? 0 : (n - 1 - i0) / d + 1;
  if (b > k) b = k;
  *k0 = a;
  *k1 = b < a ? a : b;
}

/* p + n, computed as one add: the compiler would otherwise keep each
 * column's offset j * n in its own register (and spill them). */
static inline const float *nhwc_step(const float *p, int64_t n) {
  p += n;
  __asm__("" : "+r"(p));
  return p;
}

#if defined(NHWC_AVX512)
#include <immintrin.h>
typedef __m512 V;
typedef __mmask16 M;
#define VN 16
static inline M m_tail(int64_t n) { return (M)((1u << n) - 1u); }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_ldm(const float *p, M m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void v_stm(float *p, V v, M m) { _mm512_mask_storeu_ps(p, m, v); }
static inline V v_set(float f) { return _mm512_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm512_div_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_keep(V v) {
  __asm__("" : "+v"(v));
  return v;
}
typedef __m512i VI;
static inline VI vi_group(int q, int i) {
  int32_t ix[16];
  for (int l = 0; l < 16; l++) ix[l] = l / q * q + i;
  return _mm512_loadu_si512(ix);
}
static inline V v_perm(V v, VI idx) { return _mm512_permutexvar_ps(idx, v); }

#elif defined(NHWC_AVX2)
#include <immintrin.h>
typedef __m256 V;
typedef __m256i M;
#define VN 8
static inline M m_tail(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)n),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_ldm(const float *p, M m) { return _mm256_maskload_ps(p, m); }
static inline void v_stm(float *p, V v, M m) { _mm256_maskstore_ps(p, m, v); }
static inline V v_set(float f) { return _mm256_set1_ps(f); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm256_div_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_keep(V v) {
  __asm__("" : "+x"(v));
  return v;
}
typedef __m256i VI;
static inline VI vi_group(int q, int i) {
  int32_t ix[8];
  for (int l = 0; l < 8; l++) ix[l] = l / q * q + i;
  return _mm256_loadu_si256((const __m256i *)ix);
}
static inline V v_perm(V v, VI idx) { return _mm256_permutevar8x32_ps(v, idx); }

#elif defined(NHWC_PORTABLE)
#define VN 8
typedef struct V {
  float f[VN];
} V;
typedef unsigned M;
static inline M m_tail(int64_t n) { return (1u << n) - 1u; }
static inline V v_ld(const float *p) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = p[j];
  return v;
}
static inline void v_st(float *p, V v) {
  for (int j = 0; j < VN; j++) p[j] = v.f[j];
}
static inline V v_ldm(const float *p, M m) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = (m >> j) & 1u ? p[j] : 0.0f;
  return v;
}
static inline void v_stm(float *p, V v, M m) {
  for (int j = 0; j < VN; j++)
    if ((m >> j) & 1u) p[j] = v.f[j];
}
static inline V v_set(float f) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = f;
  return v;
}
#define NHWC_LANEWISE(name, expr)    \
  static inline V name(V a, V b) {   \
    V v;                             \
    for (int j = 0; j < VN; j++) {   \
      float x = a.f[j], y = b.f[j];  \
      v.f[j] = expr;                 \
    }                                \
    return v;                        \
  }
NHWC_LANEWISE(v_add, x + y)
NHWC_LANEWISE(v_mul, x *y)
NHWC_LANEWISE(v_div, x / y)
NHWC_LANEWISE(v_max, x > y ? x : y)
NHWC_LANEWISE(v_min, x < y ? x : y)
#undef NHWC_LANEWISE
static inline V v_keep(V v) { return v; }
typedef struct VI {
  int32_t i[VN];
} VI;
static inline VI vi_group(int q, int i) {
  VI x;
  for (int l = 0; l < VN; l++) x.i[l] = l / q * q + i;
  return x;
}
static inline V v_perm(V v, VI idx) {
  V r;
  for (int l = 0; l < VN; l++) r.f[l] = v.f[idx.i[l]];
  return r;
}
/* the same expression as the NCHW portable kernel (f32-dwconv-portable.c),
 * so both layouts round alike on a given compiler */
static inline V v_fma(V a, V b, V c) {
  V v;
  for (int j = 0; j < VN; j++) v.f[j] = a.f[j] * b.f[j] + c.f[j];
  return v;
}

#else
#error "define NHWC_AVX512, NHWC_AVX2 or NHWC_PORTABLE before including f32-nhwc-vec.h"
#endif

#endif
