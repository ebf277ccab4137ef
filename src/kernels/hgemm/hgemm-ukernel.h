/*
 * The micro-kernel contract of the bf16/fp16 GEMM family (hgemm.h),
 * shared by the family's descriptor for the GEMM driver (hgemm.c,
 * kernels/gemm/driver.h) and the per-ISA kernels.  Not API.
 *
 * A micro-kernel computes one register tile of mr rows (one function per
 * mr in [1, MR]) and nr <= NR columns, over kc depth steps:
 *
 *   t[r][j] = sum_{kk < kc} a(r, kk) * b(kk, j)        (kk in order)
 *   C[r][j] = (accumulate ? C[r][j] : 0) + alpha * t[r][j], then bias,
 *             residual and clamp as kn_sgemm_ustore says (gemm/gemm-ukernel.h)
 *
 * b: the packed B panel (hgemm.h's layout) at depth k0 (even for bf16):
 * uint16 halves, or int8 for S8W.
 * a, when !a_pairs: fp32 values, a(r, kk) = a[kk*as + r] (a packed panel,
 * as = MR, or one raw row, as = 1).  When a_pairs (vdpbf16ps): a packed
 * panel of uint32 pairs bf16 A(r, 2p) | bf16 A(r, 2p+1) << 16 (the odd
 * half zero past kc) in chunks of C = pair_chunk pairs, row-major in a
 * chunk: pair p of row r at a[((p/C)*MR + r)*C + p%C] (as is unused),
 * written by the kernel table's pack_a.  C is fp32 (the driver's C block
 * buffer when C is half).  Columns j >= nr are computed and dropped.
 *
 * cs (S8W only, on the last k block; else NULL): the per-column weight
 * scales of the tile's columns.  Then alpha is not applied per block
 * (s->scale is false) but once, with the scale, after the accumulation:
 *   C[r][j] = (C[r][j] + t[r][j]) * (alpha * cs[j]), then bias, ...
 * and the blocks before the last only accumulate t (s->alpha is alpha).
 */
#ifndef KN_HGEMM_UKERNEL_H
#define KN_HGEMM_UKERNEL_H

#include "kernels/gemm/gemm-ukernel.h"

typedef void (*kn_hgemm_ukernel_fn)(int64_t kc, const void *a, int64_t as, const void *b,
                                    float *c, int64_t ldc, int64_t nr,
                                    const kn_sgemm_ustore *s, const float *cs);

/* One ISA's kernels for one type. */
typedef struct kn_hgemm_ukernels {
  int32_t mr, nr;
  bool a_pairs; /* A packed as bf16 pairs, else as fp32 */
  kn_hgemm_ukernel_fn fn[KN_SGEMM_MR_MAX];
  /* fp32 -> fp16 of n values, to nearest even (a half C); NULL for bf16 */
  void (*to_half)(const float *x, uint16_t *y, int64_t n);
  /* x[i] = fp16-rounded x[i] (to nearest even, kn_f32_to_f16 then back)
   * for n values: a packed fp32 A block when round_a; NULL for bf16 */
  void (*round_half)(float *x, int64_t n);
  /* a_pairs only: pairs per A chunk, and the packer of one panel: `rows`
   * (<= mr) rows of A (fp32, or bf16 when half; row stride lda elements,
   * a at the block's first depth step), kc depth steps, into the layout
   * above, zero past kc and for rows >= `rows` (ceil(ceil(kc/2) / C)
   * chunks of mr * C uint32) */
  int32_t pair_chunk;
  void (*pack_a)(const void *a, int64_t lda, bool half, int64_t rows, int64_t kc, void *dst);
} kn_hgemm_ukernels;

extern const kn_hgemm_ukernels kn_bf16_gemm_ukernel_6x8__portable;
extern const kn_hgemm_ukernels kn_f16_gemm_ukernel_6x8__portable;
extern const kn_hgemm_ukernels kn_s8w_gemm_ukernel_6x8__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_hgemm_ukernels kn_bf16_gemm_ukernel_5x16__avx2;
extern const kn_hgemm_ukernels kn_f16_gemm_ukernel_6x16__avx2;
extern const kn_hgemm_ukernels kn_s8w_gemm_ukernel_6x16__avx2;
extern const kn_hgemm_ukernels kn_bf16_gemm_ukernel_12x32__avx512;
extern const kn_hgemm_ukernels kn_f16_gemm_ukernel_14x32__avx512;
extern const kn_hgemm_ukernels kn_s8w_gemm_ukernel_14x32__avx512;
extern const kn_hgemm_ukernels kn_bf16_gemm_ukernel_14x32__avx512bf16;
#endif

#endif
