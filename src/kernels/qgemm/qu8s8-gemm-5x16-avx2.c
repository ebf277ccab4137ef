/*
 * int8 GEMM micro-kernels, AVX2: register tile 5 x 16, K in groups of 2.
 *
 * AVX2 has no u8 x s8 dot product into s32 (VNNI).  vpmaddubsw adds two
 * u8 x s8 products into s16, which saturates (255 * 127 * 2 > 32767), so
 * it is only exact on weights restricted to 7 bits, as oneDNN's and MLAS's
 * "reduce range" options ask.  Here the weights are stored as s16 when
 * packed and the activations as u16 (zero-extended) pairs, and vpmaddwd
 * adds two exact s16 x s16 products into each s32 lane, as XNNPACK's AVX2
 * qs8 kernels do after extending both operands (we extend once, at
 * packing, instead of on every load): any u8 and s8 values, no
 * saturation.  Per depth pair: 2 B loads, 5 broadcast pairs of A, 10
 * vpmaddwd + 10 vpaddd (16 multiply-adds each, twice an fp32 FMA's 8).
 *
 * Why 5 rows: vpmaddwd does not accumulate, so each product needs a
 * register of its own before its vpaddd.  With 6 rows (12 accumulators,
 * 2 B vectors, a broadcast and the products: more than 16 ymm) gcc 12
 * kept 4 accumulators on the stack and added 12 moves per depth pair;
 * 5 rows (10 accumulators) leave the loop without a stack access.  One
 * function per row count; 1 and 2 rows split k over 4 and 2 chains
 * (integer sums: any order is exact).
 */
#include <immintrin.h>

#include "qgemm-ukernel.h"

#define MR 5
#define NR 16
#define G 2

static const int32_t mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static inline __m256i lane_mask(int64_t n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256((const __m256i *)(mask_tab + 8 - n));
}

static inline __m256i bcast32(const uint16_t *p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

static inline __attribute__((always_inline)) void
ukernel(const int mr, const int split, int64_t kg, const uint16_t *restrict a,
        const int16_t *restrict b, int64_t nr, const kn_qgemm_ustore *s) {
  __m256i c0[4][MR], c1[4][MR];
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) c0[q][r] = c1[q][r] = _mm256_setzero_si256();
  int64_t g = 0;
  if (split > 1)
    for (; g + split <= kg; g += split) {
#pragma GCC unroll 4
      for (int q = 0; q < split; q++) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
          const __m256i av = bcast32(a + r * G);
          c0[q][r] = _mm256_add_epi32(c0[q][r], _mm256_madd_epi16(av, b0));
          c1[q][r] = _mm256_add_epi32(c1[q][r], _mm256_madd_epi16(av, b1));
        }
        a += MR * G;
        b += NR * G;
      }
    }
  for (; g < kg; g++) {
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
    if (mr > 2) __builtin_prefetch(b + 32 * NR * G, 0, 3);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      const __m256i av = bcast32(a + r * G);
      c0[0][r] = _mm256_add_epi32(c0[0][r], _mm256_madd_epi16(av, b0));
      c1[0][r] = _mm256_add_epi32(c1[0][r], _mm256_madd_epi16(av, b1));
    }
    a += MR * G;
    b += NR * G;
  }
#pragma GCC unroll 4
  for (int q = 1; q < split; q++)
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm256_add_epi32(c0[0][r], c0[q][r]);
      c1[0][r] = _mm256_add_epi32(c1[0][r], c1[q][r]);
    }

  int32_t *acc = s->acc;
  if (!s->final) {
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256i v0 = c0[0][r], v1 = c1[0][r];
      if (s->load) {
        v0 = _mm256_add_epi32(v0, _mm256_load_si256((const __m256i *)(acc + r * NR)));
        v1 = _mm256_add_epi32(v1, _mm256_load_si256((const __m256i *)(acc + r * NR + 8)));
      }
      _mm256_store_si256((__m256i *)(acc + r * NR), v0);
      _mm256_store_si256((__m256i *)(acc + r * NR + 8), v1);
    }
    return;
  }
  const __m256i za = _mm256_set1_epi32(s->a_zero);
  const __m256i zc0 = _mm256_mullo_epi32(za, _mm256_loadu_si256((const __m256i *)s->colsum));
  const __m256i zc1 =
      _mm256_mullo_epi32(za, _mm256_loadu_si256((const __m256i *)(s->colsum + 8)));
  const bool full = nr >= NR;
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
  if (s->si) { /* the exact sums, compensated */
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256i v0 = c0[0][r], v1 = c1[0][r];
      if (s->load) {
        v0 = _mm256_add_epi32(v0, _mm256_load_si256((const __m256i *)(acc + r * NR)));
        v1 = _mm256_add_epi32(v1, _mm256_load_si256((const __m256i *)(acc + r * NR + 8)));
      }
      v0 = _mm256_sub_epi32(v0, zc0);
      v1 = _mm256_sub_epi32(v1, zc1);
      int32_t *sr = s->si + r * s->ldc;
      _mm256_maskstore_epi32(sr, m0, v0);
      _mm256_maskstore_epi32(sr + 8, m1, v1);
    }
    return;
  }
  const __m256 sa = _mm256_set1_ps(s->a_scale);
  const __m256 sc0 = _mm256_mul_ps(sa, _mm256_loadu_ps(s->w_scale));
  const __m256 sc1 = _mm256_mul_ps(sa, _mm256_loadu_ps(s->w_scale + 8));
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    __m256i v0 = c0[0][r], v1 = c1[0][r];
    if (s->load) {
      v0 = _mm256_add_epi32(v0, _mm256_load_si256((const __m256i *)(acc + r * NR)));
      v1 = _mm256_add_epi32(v1, _mm256_load_si256((const __m256i *)(acc + r * NR + 8)));
    }
    const __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v0, zc0)), sc0);
    const __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v1, zc1)), sc1);
    float *cr = s->c + r * s->ldc;
    if (full) {
      _mm256_storeu_ps(cr, f0);
      _mm256_storeu_ps(cr + 8, f1);
    } else {
      _mm256_maskstore_ps(cr, m0, f0);
      _mm256_maskstore_ps(cr + 8, m1, f1);
    }
  }
}

#define UK(R, S)                                                                        \
  static void ukernel_##R(int64_t kg, const void *a, const void *b, int64_t nr,         \
                          const kn_qgemm_ustore *s) {                                   \
    ukernel(R, S, kg, a, b, nr, s);                                                     \
  }
UK(1, 4)
UK(2, 2)
UK(3, 1)
UK(4, 1)
UK(5, 1)
#undef UK

/* 8 floats to 8 clamped integers in [0, 255] (kn_qgemm_quant1's steps). */
static inline __m256i quant8(const float *x, __m256 scale, __m256 z) {
  __m256 t = _mm256_div_ps(_mm256_loadu_ps(x), scale);
  t = _mm256_add_ps(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
  t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
  return _mm256_cvttps_epi32(t);
}

static void quant(int64_t n, const float *x, float scale, int32_t zero, uint8_t *y) {
  const __m256 sv = _mm256_set1_ps(scale), z = _mm256_set1_ps((float)zero);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256i p01 = _mm256_packs_epi32(quant8(x + j, sv, z), quant8(x + j + 8, sv, z));
    __m256i p23 = _mm256_packs_epi32(quant8(x + j + 16, sv, z), quant8(x + j + 24, sv, z));
    __m256i u = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), perm);
    _mm256_storeu_si256((__m256i *)(y + j), u);
  }
  for (; j < n; j++) y[j] = kn_qgemm_quant1(x[j], scale, (float)zero);
}

/* min/max keep their second operand when the first is NaN (or the two
 * are equal, -0 and 0): x < lo ? x : lo, four chains of 8 lanes */
static void range(int64_t n, const float *x, float *lo_out, float *hi_out) {
  __m256 lo[4], hi[4];
  for (int q = 0; q < 4; q++) lo[q] = hi[q] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32)
    for (int q = 0; q < 4; q++) {
      __m256 v = _mm256_loadu_ps(x + j + 8 * q);
      lo[q] = _mm256_min_ps(v, lo[q]);
      hi[q] = _mm256_max_ps(v, hi[q]);
    }
  float l[8], h[8];
  _mm256_storeu_ps(l, _mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3])));
  _mm256_storeu_ps(h, _mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3])));
  float mn = 0.0f, mx = 0.0f;
  for (int q = 0; q < 8; q++) {
    mn = l[q] < mn ? l[q] : mn;
    mx = h[q] > mx ? h[q] : mx;
  }
  for (; j < n; j++) {
    mn = x[j] < mn ? x[j] : mn;
    mx = x[j] > mx ? x[j] : mx;
  }
  *lo_out = mn;
  *hi_out = mx;
}

const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_5x16__avx2 = {
    .mr = MR, .nr = NR, .g = G, .esize = 2, .kchunk = 1,
    .fn = {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5},
    .quant = quant,
    .range = range,
};
