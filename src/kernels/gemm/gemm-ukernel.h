/*
 * The GEMM micro-kernel contract, shared by the family's descriptor for
 * the GEMM driver (gemm.c, driver.h) and the per-ISA kernels
 * (f32-gemm-*.c).  Not part of the family's API.
 *
 * A micro-kernel computes one register tile of mr rows (fixed per
 * function: each ISA provides one function per mr in [1, MR], so tails
 * and thin products waste no FMAs) and nr <= NR columns:
 *
 *   t[r][j] = sum_{kk < kc} a[kk*as + r] * b[kk*bs + j]     (kk in order)
 *   C[r][j] = (accumulate ? C[r][j] : 0) + alpha * t[r][j]
 *            (+ bias, + residual, clamped to [lo, hi]: the fused part,
 *             only on the last k block)
 *
 * a: packed A panel (as = MR) or raw rows used in place (as = 1 for one
 * row, lda for a transposed A).  b: packed B panel (bs = NR) or a raw
 * row-major B used in place (bs = ldb); NR columns are always readable.
 * Columns j >= nr are computed and dropped (masked stores).
 */
#ifndef KN_GEMM_UKERNEL_H
#define KN_GEMM_UKERNEL_H

#include "kernels/kernels.h"

typedef struct kn_sgemm_ustore {
  float alpha;
  bool scale;            /* alpha != 1 */
  bool accumulate;       /* add C's values (k blocks after the first) */
  const float *bias_row; /* NULL, or bias_row[r] for tile row r */
  const float *bias_col; /* NULL, or bias_col[j] for tile column j */
  const float *res;      /* NULL, or res[r*ldr + j] */
  int64_t ldr;
  bool clamp; /* min(max(v, lo), hi): Relu, Clip */
  float lo, hi;
} kn_sgemm_ustore;

typedef void (*kn_sgemm_ukernel_fn)(int64_t kc, const float *a, int64_t as,
                                    const float *b, int64_t bs, float *c, int64_t ldc,
                                    int64_t nr, const kn_sgemm_ustore *s);

/* The int8 family's store (kernels/qgemm/qgemm-ukernel.h states the
 * micro-kernel's contract), here so that the GEMM driver calls those
 * kernels itself (kernels/gemm/driver.h, s32_fn), as it does the fp32
 * ones: a hook per tile cost K = 64 products 3-5%. */
typedef struct kn_qgemm_ustore {
  bool load;      /* add acc (partial sums of earlier k passes) */
  bool final;     /* dequantize to c; else store the sums to acc */
  int32_t *acc;   /* MR x NR partial sums, row stride NR, 64-byte aligned */
  float *c;       /* final: the tile's first element */
  int32_t *si;    /* final, instead of c: the s32 sums (row stride ldc) */
  int64_t ldc;
  const int32_t *colsum;  /* the tile's first column; NR readable */
  const float *w_scale;   /* the same */
  float a_scale;
  int32_t a_zero;
} kn_qgemm_ustore;

typedef void (*kn_qgemm_ukernel_fn)(int64_t kg, const void *a, const void *b, int64_t nr,
                                    const kn_qgemm_ustore *s);

/* One row against a raw row-major B, streamed row by row (gemv-impl.h):
 * c[j] = sum_{kk < k} a[kk*as] * b[kk*ldb + j] for j < n; c overwritten. */
typedef void (*kn_sgemv_fn)(int64_t k, int64_t n, const float *a, int64_t as,
                            const float *b, int64_t ldb, float *c);
void kn_f32_gemv__portable(int64_t k, int64_t n, const float *a, int64_t as, const float *b,
                           int64_t ldb, float *c);
#ifdef KN_HAVE_X86_KERNELS
void kn_f32_gemv__avx2(int64_t k, int64_t n, const float *a, int64_t as, const float *b,
                       int64_t ldb, float *c);
void kn_f32_gemv__avx512(int64_t k, int64_t n, const float *a, int64_t as, const float *b,
                         int64_t ldb, float *c);
#endif

/* Rows of the largest register tile over all ISAs. */
#define KN_SGEMM_MR_MAX 14

/* One ISA's micro-kernels: fn[r - 1] computes r rows; gemv one row
 * against a raw B (gemv-impl.h). */
typedef struct kn_sgemm_ukernels {
  int32_t mr, nr;
  kn_sgemm_ukernel_fn fn[KN_SGEMM_MR_MAX];
  kn_sgemv_fn gemv;
} kn_sgemm_ukernels;

extern const kn_sgemm_ukernels kn_f32_gemm_ukernel_6x8__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_sgemm_ukernels kn_f32_gemm_ukernel_6x16__avx2;
extern const kn_sgemm_ukernels kn_f32_gemm_ukernel_14x32__avx512;
#endif

#endif
