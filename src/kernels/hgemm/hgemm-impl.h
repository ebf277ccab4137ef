/*
 * bf16 / fp16 GEMM micro-kernels with fp32 A and fp32 FMAs, one template
 * for every ISA (hgemm-ukernel.h's contract, !a_pairs): a tile of MR rows
 * and NR = 2 vectors of columns, as the fp32 kernels of src/kernels/gemm.
 *
 *   HK_BF16: B in k pairs (hgemm.h); per pair, the low halves become fp32
 *            by a 16-bit shift, the high halves by masking the low ones
 *            off; the even k's FMAs then the odd k's (k in order).
 *   HK_F16:  B fp16, converted by the vector unit (vcvtph2ps) per depth
 *            step; no extra registers, so the fp32 tile shapes fit.
 *   HK_S8:   B int8 (S8W), sign-extended to int32 and converted to fp32
 *            per depth step (vpmovsxbd + vcvtdq2ps: exact), the same
 *            registers as HK_F16; the column scales applied in the store
 *            (hgemm-ukernel.h's cs).
 *
 * Tiles of 1 or 2 rows split k over 4 or 2 partial sums (fixed order,
 * deterministic) to have enough FMA chains, as the fp32 kernels do: the
 * GEMV shapes this family is for stream B at memory speed only then.
 *
 * The including file defines V, VL, MR, HK_BF16 or HK_F16, HK_TABLE (the
 * kn_hgemm_ukernels' name), HK_TO_HALF and HK_ROUND_HALF (NULL, the
 * default for the latter, or a function), and
 * hv_zero, hv_set1, hv_fma, hv_add, hv_mul, hv_min, hv_max, hv_ld, hv_st,
 * hv_ldn, hv_stn (first n lanes; n may be <= 0 or > VL), and hv_bf16_lo,
 * hv_bf16_hi (VL columns of a pair), hv_f16 (VL columns of a step) or
 * hv_s8 (VL int8 columns of a step).
 */
#ifndef HK_TABLE
#error "define the vector operations and HK_TABLE before including hgemm-impl.h"
#endif

#define NR (2 * VL)
/* B prefetched this many depth steps ahead on tiles of 3 rows and more
 * (the fp32 kernels' reason: weights come from DRAM in a model). */
#define PF_K 64

#ifndef HK_ROUND_HALF
#define HK_ROUND_HALF NULL
#endif

/* STEP_HALVES: B elements per depth step (of type BT) */
#ifdef HK_BF16
#define STEP_HALVES (2 * NR) /* one k pair */
#else
#define STEP_HALVES NR
#endif
#ifdef HK_S8
typedef int8_t BT;
#else
typedef uint16_t BT;
#endif

static inline __attribute__((always_inline)) void
hk_ukernel(const int mr, const int split, int64_t kc, const float *restrict a, int64_t as,
           const BT *restrict b, float *restrict c, int64_t ldc, int64_t nr,
           const kn_sgemm_ustore *s, const float *restrict cs) {
  V c0[4][MR], c1[4][MR];
#pragma GCC unroll 4
  for (int q = 0; q < split; q++)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) c0[q][r] = c1[q][r] = hv_zero();
#ifdef HK_BF16
  const int64_t steps = kc / 2;
#define HK_STEP(q)                                                           \
  do {                                                                       \
    V b0 = hv_bf16_lo(b), b1 = hv_bf16_lo(b + NR);                          \
    _Pragma("GCC unroll 14") for (int r = 0; r < mr; r++) {                  \
      V av = hv_set1(a[r]);                                                  \
      c0[q][r] = hv_fma(av, b0, c0[q][r]);                                   \
      c1[q][r] = hv_fma(av, b1, c1[q][r]);                                   \
    }                                                                        \
    b0 = hv_bf16_hi(b);                                                      \
    b1 = hv_bf16_hi(b + NR);                                                 \
    _Pragma("GCC unroll 14") for (int r = 0; r < mr; r++) {                  \
      V av = hv_set1(a[as + r]);                                             \
      c0[q][r] = hv_fma(av, b0, c0[q][r]);                                   \
      c1[q][r] = hv_fma(av, b1, c1[q][r]);                                   \
    }                                                                        \
    a += 2 * as;                                                             \
    b += STEP_HALVES;                                                        \
  } while (0)
#else
  const int64_t steps = kc;
#ifdef HK_S8
#define HK_LOADB(p) hv_s8(p)
#else
#define HK_LOADB(p) hv_f16(p)
#endif
#define HK_STEP(q)                                                           \
  do {                                                                       \
    V b0 = HK_LOADB(b), b1 = HK_LOADB(b + VL);                               \
    _Pragma("GCC unroll 14") for (int r = 0; r < mr; r++) {                  \
      V av = hv_set1(a[r]);                                                  \
      c0[q][r] = hv_fma(av, b0, c0[q][r]);                                   \
      c1[q][r] = hv_fma(av, b1, c1[q][r]);                                   \
    }                                                                        \
    a += as;                                                                 \
    b += STEP_HALVES;                                                        \
  } while (0)
#endif
  int64_t st = 0;
  if (split > 1)
    for (; st + split <= steps; st += split) {
#pragma GCC unroll 4
      for (int q = 0; q < split; q++) HK_STEP(q);
    }
  for (; st < steps; st++) {
    if (mr > 2) __builtin_prefetch(b + PF_K * STEP_HALVES, 0, 3);
    HK_STEP(0);
  }
#undef HK_STEP
#undef HK_LOADB
#ifdef HK_BF16
  if (kc & 1) { /* the last pair's even half (its odd half is padding) */
    V b0 = hv_bf16_lo(b), b1 = hv_bf16_lo(b + NR);
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      V av = hv_set1(a[r]);
      c0[0][r] = hv_fma(av, b0, c0[0][r]);
      c1[0][r] = hv_fma(av, b1, c1[0][r]);
    }
  }
#endif
  if (split == 4)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[0][r] = hv_add(hv_add(c0[0][r], c0[1][r]), hv_add(c0[2][r], c0[3][r]));
      c1[0][r] = hv_add(hv_add(c1[0][r], c1[1][r]), hv_add(c1[2][r], c1[3][r]));
    }
  else if (split == 2)
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      c0[0][r] = hv_add(c0[0][r], c0[1][r]);
      c1[0][r] = hv_add(c1[0][r], c1[1][r]);
    }

  const bool full = nr >= NR;
  const V alpha = hv_set1(s->alpha), lo = hv_set1(s->lo), hi = hv_set1(s->hi);
  V bc0 = hv_zero(), bc1 = hv_zero(), sc0 = hv_zero(), sc1 = hv_zero();
  if (cs) { /* alpha * the column scales: zero past nr */
    sc0 = hv_mul(hv_ldn(cs, nr), alpha);
    sc1 = hv_mul(hv_ldn(cs + VL, nr - VL), alpha);
  }
  if (s->bias_col) {
    bc0 = hv_ldn(s->bias_col, nr);
    bc1 = hv_ldn(s->bias_col + VL, nr - VL);
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    V v0 = c0[0][r], v1 = c1[0][r];
    float *cr = c + r * ldc;
    if (s->scale) {
      v0 = hv_mul(v0, alpha);
      v1 = hv_mul(v1, alpha);
    }
    if (s->accumulate) {
      if (full) {
        v0 = hv_add(v0, hv_ld(cr));
        v1 = hv_add(v1, hv_ld(cr + VL));
      } else {
        v0 = hv_add(v0, hv_ldn(cr, nr));
        v1 = hv_add(v1, hv_ldn(cr + VL, nr - VL));
      }
    }
    if (cs) {
      v0 = hv_mul(v0, sc0);
      v1 = hv_mul(v1, sc1);
    }
    if (s->bias_row) {
      V br = hv_set1(s->bias_row[r]);
      v0 = hv_add(v0, br);
      v1 = hv_add(v1, br);
    }
    if (s->bias_col) {
      v0 = hv_add(v0, bc0);
      v1 = hv_add(v1, bc1);
    }
    if (s->res) {
      const float *rr = s->res + r * s->ldr;
      v0 = hv_add(v0, hv_ldn(rr, nr));
      v1 = hv_add(v1, hv_ldn(rr + VL, nr - VL));
    }
    if (s->clamp) {
      v0 = hv_min(hv_max(v0, lo), hi);
      v1 = hv_min(hv_max(v1, lo), hi);
    }
    if (full) {
      hv_st(cr, v0);
      hv_st(cr + VL, v1);
    } else {
      hv_stn(cr, v0, nr);
      hv_stn(cr + VL, v1, nr - VL);
    }
  }
}

#define UK(R, S)                                                                      \
  static void hk_ukernel_##R(int64_t kc, const void *a, int64_t as, const void *b,     \
                             float *c, int64_t ldc, int64_t nr,                        \
                             const kn_sgemm_ustore *s, const float *cs) {              \
    hk_ukernel(R, S, kc, (const float *)a, as, (const BT *)b, c, ldc, nr, s, cs);      \
  }
UK(1, 4)
UK(2, 2)
UK(3, 1)
UK(4, 1)
UK(5, 1)
#if MR > 5
UK(6, 1)
#endif
#if MR > 6
UK(7, 1)
UK(8, 1)
UK(9, 1)
UK(10, 1)
UK(11, 1)
UK(12, 1)
#endif
#if MR > 12
UK(13, 1)
UK(14, 1)
#endif
#undef UK

const kn_hgemm_ukernels HK_TABLE = {
    MR,
    NR,
    false,
    {hk_ukernel_1, hk_ukernel_2, hk_ukernel_3, hk_ukernel_4, hk_ukernel_5,
#if MR > 5
     hk_ukernel_6,
#endif
#if MR > 6
     hk_ukernel_7, hk_ukernel_8, hk_ukernel_9, hk_ukernel_10, hk_ukernel_11, hk_ukernel_12,
#endif
#if MR > 12
     hk_ukernel_13, hk_ukernel_14
#endif
    },
    HK_TO_HALF,
    HK_ROUND_HALF,
};
