/*
 * The vector operations igemm-impl.h is written against, in AVX-512 (one
 * zmm of 16 floats), shared by the 6 x 64 and 8 x 16 tile families.  The
 * including file defines MR, NV and KN_IGEMM_TABLE, then includes
 * igemm-impl.h.
 */
#ifndef KN_F32_IGEMM_AVX512_H
#define KN_F32_IGEMM_AVX512_H

#include <immintrin.h>
#include <stdint.h>

typedef __m512 V;
#define VL 16

static inline V v_zero(void) { return _mm512_setzero_ps(); }
static inline V v_set1(float f) { return _mm512_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline __mmask16 v_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }
static inline V v_ldn(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(v_mask(n), p); }
static inline void v_stn(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, v_mask(n), v); }

#endif
