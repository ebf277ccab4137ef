/*
 * int8 GEMM micro-kernels, AVX-512 VNNI: register tile 14 x 32, K in
 * groups of 4.
 *
 * vpdpbusd multiplies the 4 u8 of each s32 lane of its first source by the
 * 4 s8 of the same lane of its second and adds the four products to the
 * s32 lane (no intermediate saturation).  A packed B vector holds, per
 * lane, one column's 4 consecutive depth steps; the A operand is a 4-byte
 * group of one row broadcast to every lane (vpbroadcastd from memory).
 * The tile is the fp32 kernel's (f32-gemm-14x32-avx512.c): 28
 * accumulators + 2 B vectors + a broadcast = 31 zmm; per group 2 loads,
 * 14 broadcasts and 28 vpdpbusd of 64 multiply-adds each.  On Zen 4
 * (512-bit ops as two 256-bit halves, one vpdpbusd zmm a cycle) this loop
 * runs at 450 GOP/s of the 469 a register-only loop reaches, on data in L1.
 *
 * A is packed in chunks of KC = 16 groups (qgemm.h: kchunk): per chunk, row
 * r's 64 bytes (16 groups of 4) at r * 64.  The kernel reads the same
 * bytes as with one group per row interleave, but packing is a copy of 64
 * contiguous bytes per row and chunk (or 64 quantized fp32 values), not a
 * 4-byte transpose: with the old layout, packing A (libc memcpy of 4 bytes
 * per row and group) took more time than the products on n = 64 shapes.
 *
 * Only this file is compiled with -mavx512vnni (CMake: *-avx512vnni.c);
 * the driver calls it only when cpuid reports AVX512VNNI.  One function
 * per row count; 1 and 2 rows split k over 4 and 2 chains (integer sums:
 * any order is exact).
 */
#include <immintrin.h>

#include "qgemm-ukernel.h"

#define MR 14
#define NR 32
#define G 4
#define KC 16          /* groups per A chunk */
#define CHUNK (KC * G) /* bytes of one row in a chunk */
/* B prefetched 32 groups (4 KiB of a packed panel) ahead, as the fp32
 * kernel does, for weights that come from DRAM. */
#define PF_G 32

static inline __m512i bcast32(const uint8_t *p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

static inline __mmask16 lane_mask(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* s32: the final store writes the s32 sums to s->si (a separate set of
 * functions, so that the fp32 store's code is what it was without one) */
static inline __attribute__((always_inline)) void
ukernel(const int mr, const int split, const bool s32, int64_t kg, const uint8_t *restrict a,
        const int8_t *restrict b, int64_t nr, const kn_qgemm_ustore *s) {
  __m512i c0[4][MR], c1[4][MR];
  /* the first pass starts from -a_zero * colsum (the zero point's
   * compensation, exact in s32), so the store has no subtraction: a sixth
   * fewer operations in it, which k = 64 shapes notice */
  __m512i z0 = _mm512_setzero_si512(), z1 = z0;
  if (!s->load) {
    const __m512i nza = _mm512_set1_epi32(-s->a_zero);
    z0 = _mm512_mullo_epi32(nza, _mm512_loadu_si512(s->colsum));
    z1 = _mm512_mullo_epi32(nza, _mm512_loadu_si512(s->colsum + 16));
  }
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[q][r] = q == 0 ? z0 : _mm512_setzero_si512();
      c1[q][r] = q == 0 ? z1 : _mm512_setzero_si512();
    }
  /* one chunk of A (mr rows of CHUNK bytes, MR * CHUNK apart) per pass of
   * the outer loop; ap steps through its groups */
  for (int64_t g0 = 0; g0 < kg; g0 += KC, a += MR * CHUNK) {
    const int64_t ge = kg - g0 < KC ? kg - g0 : KC;
    const uint8_t *ap = a;
    int64_t g = 0;
    if (split > 1)
      for (; g + split <= ge; g += split) {
#pragma GCC unroll 4
        for (int q = 0; q < split; q++) {
          const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 14
          for (int r = 0; r < mr; r++) {
            const __m512i av = bcast32(ap + r * CHUNK);
            c0[q][r] = _mm512_dpbusd_epi32(c0[q][r], av, b0);
            c1[q][r] = _mm512_dpbusd_epi32(c1[q][r], av, b1);
          }
          ap += G;
          b += NR * G;
        }
      }
    for (; g < ge; g++) {
      const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
      if (mr > 2) __builtin_prefetch(b + PF_G * NR * G, 0, 3);
#pragma GCC unroll 14
      for (int r = 0; r < mr; r++) {
        const __m512i av = bcast32(ap + r * CHUNK);
        c0[0][r] = _mm512_dpbusd_epi32(c0[0][r], av, b0);
        c1[0][r] = _mm512_dpbusd_epi32(c1[0][r], av, b1);
      }
      ap += G;
      b += NR * G;
    }
  }
#pragma GCC unroll 4
  for (int q = 1; q < split; q++)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[0][r] = _mm512_add_epi32(c0[0][r], c0[q][r]);
      c1[0][r] = _mm512_add_epi32(c1[0][r], c1[q][r]);
    }

  int32_t *acc = s->acc;
  if (!s->final) {
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512i v0 = c0[0][r], v1 = c1[0][r];
      if (s->load) {
        v0 = _mm512_add_epi32(v0, _mm512_load_si512(acc + r * NR));
        v1 = _mm512_add_epi32(v1, _mm512_load_si512(acc + r * NR + 16));
      }
      _mm512_store_si512(acc + r * NR, v0);
      _mm512_store_si512(acc + r * NR + 16, v1);
    }
    return;
  }
  if (s32) { /* the sums themselves (they carry the compensation already) */
    const __mmask16 m0 = lane_mask(nr), m1 = lane_mask(nr - 16);
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512i v0 = c0[0][r], v1 = c1[0][r];
      if (s->load) {
        v0 = _mm512_add_epi32(v0, _mm512_load_si512(acc + r * NR));
        v1 = _mm512_add_epi32(v1, _mm512_load_si512(acc + r * NR + 16));
      }
      int32_t *sr = s->si + r * s->ldc;
      _mm512_mask_storeu_epi32(sr, m0, v0);
      _mm512_mask_storeu_epi32(sr + 16, m1, v1);
    }
    return;
  }
  const __m512 sa = _mm512_set1_ps(s->a_scale);
  const __m512 sc0 = _mm512_mul_ps(sa, _mm512_loadu_ps(s->w_scale));
  const __m512 sc1 = _mm512_mul_ps(sa, _mm512_loadu_ps(s->w_scale + 16));
  const __mmask16 m0 = lane_mask(nr), m1 = lane_mask(nr - 16);
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    __m512i v0 = c0[0][r], v1 = c1[0][r];
    if (s->load) {
      v0 = _mm512_add_epi32(v0, _mm512_load_si512(acc + r * NR));
      v1 = _mm512_add_epi32(v1, _mm512_load_si512(acc + r * NR + 16));
    }
    const __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(v0), sc0);
    const __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(v1), sc1);
    float *cr = s->c + r * s->ldc;
    _mm512_mask_storeu_ps(cr, m0, f0);
    _mm512_mask_storeu_ps(cr + 16, m1, f1);
  }
}

#define UK(R, S)                                                                        \
  static void ukernel_##R(int64_t kg, const void *a, const void *b, int64_t nr,         \
                          const kn_qgemm_ustore *s) {                                   \
    ukernel(R, S, false, kg, a, b, nr, s);                                              \
  }                                                                                     \
  static void ukernel_s32_##R(int64_t kg, const void *a, const void *b, int64_t nr,     \
                              const kn_qgemm_ustore *s) {                               \
    ukernel(R, S, true, kg, a, b, nr, s);                                               \
  }
UK(1, 4)
UK(2, 2)
UK(3, 1)
UK(4, 1)
UK(5, 1)
UK(6, 1)
UK(7, 1)
UK(8, 1)
UK(9, 1)
UK(10, 1)
UK(11, 1)
UK(12, 1)
UK(13, 1)
UK(14, 1)
#undef UK

/* kn_qgemm_quant1's steps on 16 lanes; masked lanes are not stored. */
static void quant(int64_t n, const float *x, float scale, int32_t zero, uint8_t *y) {
  const __m512 sv = _mm512_set1_ps(scale), z = _mm512_set1_ps((float)zero);
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = lane_mask(n - j);
    __m512 t = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + j), sv);
    t = _mm512_add_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
    _mm512_mask_cvtusepi32_storeu_epi8(y + j, m, _mm512_cvttps_epi32(t));
  }
}

/* min/max keep their second operand when the first is NaN (or the two
 * are equal, -0 and 0): x < lo ? x : lo, four chains of 16 lanes */
static void range(int64_t n, const float *x, float *lo_out, float *hi_out) {
  __m512 lo[4], hi[4];
  for (int q = 0; q < 4; q++) lo[q] = hi[q] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 64 <= n; j += 64)
    for (int q = 0; q < 4; q++) {
      __m512 v = _mm512_loadu_ps(x + j + 16 * q);
      lo[q] = _mm512_min_ps(v, lo[q]);
      hi[q] = _mm512_max_ps(v, hi[q]);
    }
  for (; j < n; j += 16) { /* masked-off lanes load 0, which the range holds */
    __m512 v = _mm512_maskz_loadu_ps(lane_mask(n - j), x + j);
    lo[0] = _mm512_min_ps(v, lo[0]);
    hi[0] = _mm512_max_ps(v, hi[0]);
  }
  __m512 l = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
  __m512 h = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
  *lo_out = _mm512_reduce_min_ps(l);
  *hi_out = _mm512_reduce_max_ps(h);
}

/* kn_qgemm_quant1 on 16 lanes; lanes past m are 0 (padding). */
static inline __m128i quant16(const float *x, __mmask16 m, __m512 sv, __m512 z) {
  __m512 t = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x), sv);
  t = _mm512_add_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
  t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
  return _mm_maskz_mov_epi8(m, _mm512_cvtusepi32_epi8(_mm512_cvttps_epi32(t)));
}

static inline __mmask64 byte_mask(int64_t n) {
  return n >= 64 ? ~(__mmask64)0 : n <= 0 ? (__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* A panel of `rows` (<= MR) rows, kv valid depth steps, kg groups, in
 * chunks: row r's bytes [c*CHUNK, c*CHUNK + CHUNK) of the panel at
 * dst + c * MR * CHUNK + r * CHUNK, zero past kv and for rows >= `rows`;
 * every byte of the round_up(kg, KC) groups written. */
static void pack_a(const uint8_t *a, int64_t lda, int64_t rows, int64_t kv, int64_t kg,
                   void *dst) {
  const int64_t chunks = (kg + KC - 1) / KC;
  /* row by row: a row of A is read in address order (one stream), the
   * 64-byte stores scatter in L1 */
  for (int64_t r = 0; r < MR; r++) {
    uint8_t *d = (uint8_t *)dst + r * CHUNK;
    for (int64_t c = 0; c < chunks; c++, d += MR * CHUNK) {
      __m512i v = _mm512_setzero_si512();
      if (r < rows) v = _mm512_maskz_loadu_epi8(byte_mask(kv - c * CHUNK), a + r * lda + c * CHUNK);
      _mm512_storeu_si512(d, v);
    }
  }
}

static void quant_pack_a(const float *x, int64_t ldx, int64_t rows, int64_t kv, int64_t kg,
                         float scale, int32_t zero, void *dst) {
  const __m512 sv = _mm512_set1_ps(scale), z = _mm512_set1_ps((float)zero);
  const int64_t chunks = (kg + KC - 1) / KC;
  for (int64_t r = 0; r < MR; r++) {
    uint8_t *d = (uint8_t *)dst + r * CHUNK;
    for (int64_t c = 0; c < chunks; c++, d += MR * CHUNK) {
      if (r >= rows) {
        _mm512_storeu_si512(d, _mm512_setzero_si512());
        continue;
      }
      const int64_t k0 = c * CHUNK;
      const float *xr = x + r * ldx + k0;
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++)
        _mm_storeu_si128((__m128i *)(void *)(d + 16 * q),
                         quant16(xr + 16 * q, lane_mask(kv - k0 - 16 * q), sv, z));
    }
  }
}

const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_14x32__avx512vnni = {
    .mr = MR, .nr = NR, .g = G, .esize = 1, .kchunk = KC,
    .fn = {ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,
           ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14},
    .fn_s32 = {ukernel_s32_1, ukernel_s32_2, ukernel_s32_3, ukernel_s32_4, ukernel_s32_5,
               ukernel_s32_6, ukernel_s32_7, ukernel_s32_8, ukernel_s32_9, ukernel_s32_10,
               ukernel_s32_11, ukernel_s32_12, ukernel_s32_13, ukernel_s32_14},
    .quant = quant,
    .range = range,
    .pack_a = pack_a,
    .quant_pack_a = quant_pack_a,
};
