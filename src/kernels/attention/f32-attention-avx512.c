/*
 * Streamed attention micro-kernels for AVX-512 (see attention.h).
 *
 * GEMM tile: 6 rows x 64 columns (4 zmm) = 24 accumulators, plus 4 B
 * vectors and one broadcast A value: 29 of the 32 zmm registers.  Each k
 * step does 24 FMAs for 4 vector loads and 6 broadcasts, enough to keep
 * both FMA pipes of a Zen 4/5 core busy from L1.  Columns past the last
 * full vector are masked; rows past the last full 6 use the same tile code
 * instantiated for 1..5 rows.  The attention shapes (64 keys per tile,
 * 64 features per head) are whole tiles.
 *
 * exp: the polynomial of kn_attention_expf (f32-attention.c), 16 lanes at
 * a time, 2^n by _mm512_scalef_ps.
 */
#include <immintrin.h>
#include <math.h>

#include "attention-kernels.h"

#define MR 6
#define NV 4 /* vectors of 16 columns */
#define UNROLL _Pragma("GCC unroll 8")

static inline __attribute__((always_inline)) void tile(const int mr, const int nv,
                                                       __mmask16 last, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const float *b, int64_t ldb, float *c,
                                                       int64_t ldc, bool accumulate) {
  __m512 acc[MR][NV];
  UNROLL for (int i = 0; i < mr; i++) UNROLL for (int v = 0; v < nv; v++) acc[i][v] =
      _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p++) {
    __m512 bv[NV];
    const float *bp = b + p * ldb;
    UNROLL for (int v = 0; v < nv; v++) bv[v] =
        v == nv - 1 ? _mm512_maskz_loadu_ps(last, bp + 16 * v) : _mm512_loadu_ps(bp + 16 * v);
    UNROLL for (int i = 0; i < mr; i++) {
      __m512 ai = _mm512_set1_ps(a[i * lda + p]);
      UNROLL for (int v = 0; v < nv; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  UNROLL for (int i = 0; i < mr; i++) {
    float *ci = c + i * ldc;
    UNROLL for (int v = 0; v < nv; v++) {
      __mmask16 mk = v == nv - 1 ? last : (__mmask16)0xffff;
      __m512 x = acc[i][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, ci + 16 * v));
      _mm512_mask_storeu_ps(ci + 16 * v, mk, x);
    }
  }
}

#define TILE_CASE(mr, nv)                                      \
  case (mr - 1) * NV + (nv - 1):                               \
    tile(mr, nv, last, k, a, lda, b, ldb, c, ldc, accumulate); \
    break;
#define TILE_ROW(mr) TILE_CASE(mr, 1) TILE_CASE(mr, 2) TILE_CASE(mr, 3) TILE_CASE(mr, 4)

static void tile_dispatch(int mr, int nv, __mmask16 last, int64_t k, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                          bool accumulate) {
  switch ((mr - 1) * NV + (nv - 1)) {
    TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5) TILE_ROW(6)
  default:
    KN_ASSERT(!"attention tile out of range");
  }
}

static void gemm_avx512(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 16 * NV) {
    int64_t nn = n - j0 < 16 * NV ? n - j0 : 16 * NV;
    int nv = (int)((nn + 15) / 16);
    int rem = (int)(nn - 16 * (nv - 1));
    __mmask16 last = (__mmask16)(rem == 16 ? 0xffff : (1u << rem) - 1);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int mr = (int)(m - i0 < MR ? m - i0 : MR);
      tile_dispatch(mr, nv, last, k, a + i0 * lda, lda, b + j0, ldb, c + i0 * ldc + j0, ldc,
                    accumulate);
    }
  }
}

static inline __mmask16 tail_mask(int64_t n) {
  return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
}

static float scale_mask_max_avx512(float *s, int64_t n, float scale, const float *mask,
                                   int64_t m_sj) {
  __m512 vs = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
  __m512 mconst = _mm512_set1_ps(mask && m_sj == 0 ? mask[0] : 0.0f);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 mk = tail_mask(n - j);
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, s + j), vs);
    if (mask) x = _mm512_add_ps(x, m_sj ? _mm512_maskz_loadu_ps(mk, mask + j) : mconst);
    _mm512_mask_storeu_ps(s + j, mk, x);
    /* max(x, vmax) returns vmax where x is NaN: NaNs are skipped */
    vmax = _mm512_mask_max_ps(vmax, mk, x, vmax);
  }
  return _mm512_reduce_max_ps(vmax);
}

static inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654475f);
  __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  /* min/max with the constant first keep NaN lanes NaN */
  x = _mm512_min_ps(_mm512_set1_ps(88.37626266f), x);
  __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512 y = _mm512_scalef_ps(p, n);
  return _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
}

static float exp_sum_avx512(float *s, int64_t n, float m) {
  __m512 vm = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 mk = tail_mask(n - j);
    __m512 p = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm));
    _mm512_mask_storeu_ps(s + j, mk, p);
    sum = _mm512_mask_add_ps(sum, mk, sum, p);
  }
  return _mm512_reduce_add_ps(sum);
}

static void rescale_avx512(float *y, int64_t n, float c) {
  __m512 vc = _mm512_set1_ps(c);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 mk = tail_mask(n - j);
    _mm512_mask_storeu_ps(y + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, y + j), vc));
  }
}

const kn_f32_attention_ukernels kn_f32_attention_ukernels__avx512 = {
    gemm_avx512, scale_mask_max_avx512, exp_sum_avx512, rescale_avx512,
    kn_f32_attention_pack_kt__avx2};
