/* One-row products against a raw B (gemv-impl.h), AVX-512: blocks of 16
 * zmm accumulators (256 columns). */
#include <immintrin.h>

#include "gemm-ukernel.h"

typedef __m512 V;
#define VL 16
#define GV_NV 16
#define KN_GEMV_FN kn_f32_gemv__avx512

static inline V gv_zero(void) { return _mm512_setzero_ps(); }
static inline V gv_set1(float f) { return _mm512_set1_ps(f); }
static inline V gv_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline V gv_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline void gv_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline __mmask16 gv_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }
static inline V gv_ldn(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(gv_mask(n), p); }
static inline void gv_stn(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, gv_mask(n), v); }

#include "gemv-impl.h"
