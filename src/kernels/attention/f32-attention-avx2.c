/*
 * Streamed attention micro-kernels for AVX2 + FMA (see attention.h).
 *
 * GEMM tile: 6 rows x 16 columns (2 ymm) = 12 accumulators, plus 2 B
 * vectors and one broadcast: 15 of the 16 ymm registers (the BLIS Haswell
 * 6x16 shape).  Columns past the last full vector use masked loads and
 * stores; rows past the last full 6 use the tile instantiated for 1..5.
 *
 * exp: the polynomial of kn_attention_expf (f32-attention.c), 8 lanes at a
 * time, 2^n built in the exponent bits.
 */
#include <immintrin.h>
#include <math.h>

#include "attention-kernels.h"

#define MR 6
#define NV 2 /* vectors of 8 columns */
#define UNROLL _Pragma("GCC unroll 8")

/* lanes [0, n) set, n in [0, 8] */
static inline __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), idx);
}

static inline __attribute__((always_inline)) void tile(const int mr, const int nv, __m256i last,
                                                       int64_t k, const float *a, int64_t lda,
                                                       const float *b, int64_t ldb, float *c,
                                                       int64_t ldc, bool accumulate) {
  __m256 acc[MR][NV];
  UNROLL for (int i = 0; i < mr; i++) UNROLL for (int v = 0; v < nv; v++) acc[i][v] =
      _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p++) {
    __m256 bv[NV];
    const float *bp = b + p * ldb;
    UNROLL for (int v = 0; v < nv; v++) bv[v] =
        v == nv - 1 ? _mm256_maskload_ps(bp + 8 * v, last) : _mm256_loadu_ps(bp + 8 * v);
    UNROLL for (int i = 0; i < mr; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
      UNROLL for (int v = 0; v < nv; v++) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  UNROLL for (int i = 0; i < mr; i++) {
    float *ci = c + i * ldc;
    UNROLL for (int v = 0; v < nv; v++) {
      __m256i mk = v == nv - 1 ? last : _mm256_set1_epi32(-1);
      __m256 x = acc[i][v];
      if (accumulate) x = _mm256_add_ps(x, _mm256_maskload_ps(ci + 8 * v, mk));
      _mm256_maskstore_ps(ci + 8 * v, mk, x);
    }
  }
}

#define TILE_CASE(mr, nv)                                      \
  case (mr - 1) * NV + (nv - 1):                               \
    tile(mr, nv, last, k, a, lda, b, ldb, c, ldc, accumulate); \
    break;
#define TILE_ROW(mr) TILE_CASE(mr, 1) TILE_CASE(mr, 2)

static void tile_dispatch(int mr, int nv, __m256i last, int64_t k, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  switch ((mr - 1) * NV + (nv - 1)) {
    TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5) TILE_ROW(6)
  default:
    KN_ASSERT(!"attention tile out of range");
  }
}

static void gemm_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 8 * NV) {
    int64_t nn = n - j0 < 8 * NV ? n - j0 : 8 * NV;
    int nv = (int)((nn + 7) / 8);
    __m256i last = lane_mask(nn - 8 * (nv - 1));
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int mr = (int)(m - i0 < MR ? m - i0 : MR);
      tile_dispatch(mr, nv, last, k, a + i0 * lda, lda, b + j0, ldb, c + i0 * ldc + j0, ldc,
                    accumulate);
    }
  }
}

static inline float hmax8(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

static inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

static float scale_mask_max_avx2(float *s, int64_t n, float scale, const float *mask,
                                 int64_t m_sj) {
  __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY), vmax = ninf;
  __m256 mconst = _mm256_set1_ps(mask && m_sj == 0 ? mask[0] : 0.0f);
  for (int64_t j = 0; j < n; j += 8) {
    __m256i mk = lane_mask(n - j);
    __m256 x = _mm256_mul_ps(_mm256_maskload_ps(s + j, mk), vs);
    if (mask) x = _mm256_add_ps(x, m_sj ? _mm256_maskload_ps(mask + j, mk) : mconst);
    _mm256_maskstore_ps(s + j, mk, x);
    /* tail lanes -inf; max(x, vmax) returns vmax where x is NaN */
    x = _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(mk));
    vmax = _mm256_max_ps(x, vmax);
  }
  return hmax8(vmax);
}

static inline __m256 exp256(__m256 x) {
  __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654475f), _CMP_LT_OQ);
  /* the constant first keeps NaN lanes NaN; the lower clamp keeps 2^n normal */
  x = _mm256_min_ps(_mm256_set1_ps(88.37626266f), x);
  x = _mm256_max_ps(_mm256_set1_ps(-87.33654475f), x);
  __m256 n = _mm256_floor_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)),
                                23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, y);
}

static float exp_sum_avx2(float *s, int64_t n, float m) {
  __m256 vm = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) {
    __m256i mk = lane_mask(n - j);
    __m256 p = exp256(_mm256_sub_ps(_mm256_maskload_ps(s + j, mk), vm));
    _mm256_maskstore_ps(s + j, mk, p);
    sum = _mm256_add_ps(sum, _mm256_and_ps(p, _mm256_castsi256_ps(mk)));
  }
  return hsum8(sum);
}

static void rescale_avx2(float *y, int64_t n, float c) {
  __m256 vc = _mm256_set1_ps(c);
  for (int64_t j = 0; j < n; j += 8) {
    __m256i mk = lane_mask(n - j);
    _mm256_maskstore_ps(y + j, mk, _mm256_mul_ps(_mm256_maskload_ps(y + j, mk), vc));
  }
}

/* 8 keys x 8 features transposed in registers (unpack, shuffle,
 * permute2f128: 24 shuffles per 64 floats); tails element by element. */
void kn_f32_attention_pack_kt__avx2(float *kt, const float *k, int64_t k_sj, int64_t k_sd,
                                    int64_t cols, int64_t dk) {
  if (k_sd != 1) {
    kn_f32_attention_pack_kt_portable(kt, k, k_sj, k_sd, cols, dk);
    return;
  }
  int64_t c8 = cols & ~(int64_t)7, d8 = dk & ~(int64_t)7;
  for (int64_t c = 0; c < c8; c += 8)
    for (int64_t d = 0; d < d8; d += 8) {
      const float *src = k + c * k_sj + d;
      __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + k_sj);
      __m256 r2 = _mm256_loadu_ps(src + 2 * k_sj), r3 = _mm256_loadu_ps(src + 3 * k_sj);
      __m256 r4 = _mm256_loadu_ps(src + 4 * k_sj), r5 = _mm256_loadu_ps(src + 5 * k_sj);
      __m256 r6 = _mm256_loadu_ps(src + 6 * k_sj), r7 = _mm256_loadu_ps(src + 7 * k_sj);
      __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float *dst = kt + d * KN_ATT_KB + c;
      _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(dst + KN_ATT_KB, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(dst + 2 * KN_ATT_KB, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(dst + 3 * KN_ATT_KB, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(dst + 4 * KN_ATT_KB, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(dst + 5 * KN_ATT_KB, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(dst + 6 * KN_ATT_KB, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(dst + 7 * KN_ATT_KB, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  for (int64_t c = 0; c < cols; c++)
    for (int64_t d = c < c8 ? d8 : 0; d < dk; d++) kt[d * KN_ATT_KB + c] = k[c * k_sj + d];
}

const kn_f32_attention_ukernels kn_f32_attention_ukernels__avx2 = {
    gemm_avx2, scale_mask_max_avx2, exp_sum_avx2, rescale_avx2, kn_f32_attention_pack_kt__avx2};
