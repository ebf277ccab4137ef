/*
 * The int8 GEMM micro-kernel contract, shared by the family's descriptor
 * for the GEMM driver (qgemm.c, kernels/gemm/driver.h) and the per-ISA
 * kernels (qu8s8-gemm-*.c).  Not part of the family's API.
 *
 * A micro-kernel computes one register tile of mr rows (fixed per
 * function: one function per mr in [1, MR]) and nr <= NR columns over kg
 * groups of G depth steps:
 *
 *   t[r][j] = sum_{g < kg, q < G} A(g, r, q) * b[(g*NR + j)*G + q]
 *             with A(g, r, q) = a[((g/C)*MR + r)*C*G + (g%C)*G + q], C = kchunk
 *   t      += acc[r*NR + j]                          when s->load
 *   t      -= a_zero * colsum[j]                     exactly once (below)
 *   final:  c[r*ldc + j] = (float)t * (a_scale * w_scale[j])   for j < nr
 *           (or, when si is set, si[r*ldc + j] = t: the exact s32 sum)
 *   else:   acc[r*NR + j] = t                        (every r < mr, j < NR)
 *
 * The zero point's compensation enters once: the VNNI kernel starts the
 * first pass (!s->load) from it, so its partial sums in acc carry it; the
 * AVX2 and portable kernels subtract it in the final store.  acc only
 * passes between the kernels of one implementation, and every
 * intermediate is exact in s32 (qgemm.h's bound), so the results agree.
 *
 * a: packed A micro-panel (chunks of C groups of MR rows, row-major in a
 * chunk: C = 1 is one group of every row after the other; rows past mr
 * are not read; a panel starts on a chunk),
 * b: packed B micro-panel (NR columns per group, all readable), both in
 * the layouts of qgemm.h with element types u8/s8 (G = 4) or u16/s16
 * (G = 2).  The s32 sums are exact (k <= KN_QGEMM_K_MAX), so kernels may
 * sum in any order (the thin tiles split k over several chains).
 */
#ifndef KN_QGEMM_UKERNEL_H
#define KN_QGEMM_UKERNEL_H

#include "kernels/gemm/gemm-ukernel.h" /* kn_qgemm_ustore, the store's ABI */

/* y[j] = clamp(round(x[j] / scale) + zero, 0, 255) for j < n: the same bits
 * in every implementation (division, round-half-even, NaN -> 0). */
typedef void (*kn_qgemm_quant_fn)(int64_t n, const float *x, float scale, int32_t zero,
                                  uint8_t *y);

/* Pack `rows` (<= MR) rows of u8 A (row stride lda) / quantize fp32 rows
 * and pack them, kv valid depth steps, as one panel of kg groups: every
 * byte of round_up(kg, kchunk) groups written, zero past kv and for rows
 * >= `rows`.  NULL: the portable packer of qgemm.c. */
typedef void (*kn_qgemm_pack_fn)(const uint8_t *a, int64_t lda, int64_t rows, int64_t kv,
                                 int64_t kg, void *dst);
typedef void (*kn_qgemm_quant_pack_fn)(const float *x, int64_t ldx, int64_t rows, int64_t kv,
                                       int64_t kg, float scale, int32_t zero, void *dst);

/* *lo = min(0, x[j]), *hi = max(0, x[j]) over j < n, NaNs left out (each
 * comparison keeps the running value when x[j] is NaN, as x < lo ? x : lo
 * does; -0 never replaces 0). */
typedef void (*kn_qgemm_range_fn)(int64_t n, const float *x, float *lo, float *hi);

/* Rows of the largest register tile over all implementations. */
#define KN_QGEMM_MR_MAX 14

typedef struct kn_qgemm_ukernels {
  int32_t mr, nr, g;  /* tile, depth group */
  int32_t esize;      /* bytes of a packed element: 1 (u8/s8) or 2 (u16/s16) */
  int32_t kchunk;     /* groups per packed A chunk (qgemm.h) */
  kn_qgemm_ukernel_fn fn[KN_QGEMM_MR_MAX];
  /* the same for an s32 output (s->si), when the kernel has its own set
   * (keeping its fp32 store's code free of the case); NULL: fn handles si */
  kn_qgemm_ukernel_fn fn_s32[KN_QGEMM_MR_MAX];
  kn_qgemm_quant_fn quant;
  kn_qgemm_pack_fn pack_a;             /* NULL: portable */
  kn_qgemm_quant_pack_fn quant_pack_a; /* NULL: portable */
  kn_qgemm_range_fn range;             /* NULL: portable */
} kn_qgemm_ukernels;

/* The scalar quantizer, the definition the vector ones follow. */
static inline uint8_t kn_qgemm_quant1(float x, float scale, float zero) {
  float t = __builtin_nearbyintf(x / scale) + zero;
  t = t > 0.0f ? t : 0.0f; /* NaN -> 0, as max_ps(t, 0) */
  t = t < 255.0f ? t : 255.0f;
  return (uint8_t)t;
}

extern const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_4x8__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_5x16__avx2;
extern const kn_qgemm_ukernels kn_qu8s8_gemm_ukernel_14x32__avx512vnni;
#endif

#endif
