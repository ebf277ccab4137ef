/*
 * The indirect-GEMM micro-kernel contract of conv_igemm_nhwc, shared by the
 * driver (conv-nhwc.c) and the per-ISA kernels (f32-igemm-*.c).  Not part
 * of the family's API.
 *
 * One call computes a register tile of mr output pixels (rows, fixed per
 * function) by the columns of one packed weight panel:
 *
 *   t[r][j] = sum over taps t, kk < kc of  a[t*mr + r][a_off + kk] * w[(t*kc + kk)*nrs + j]
 *
 * in that order (taps outer, channels inner), then
 *
 *   C[r][j] = (accumulate ? C[r][j] : 0) + t[r][j] + bias[j]
 *             (+ R[r][j] before or after the clamp to [lo, hi])
 *
 * for j < nc, rows r of C and R at stride ldc (both are [pixel][channel]
 * matrices of the same shape).  a holds taps x mr row pointers ([tap][row]),
 * each with kc readable floats from a_off on: an input pixel's channels of
 * the group, a zero row for a padding tap, or a copy in scratch.  w: the panel, nrs = nv * VL floats
 * per depth step (the panel's width rounded up to the ISA's vector; zero
 * columns beyond the output channels).  Columns j >= nc are computed and
 * dropped (masked stores), so bias and R are read only for j < nc.
 */
#ifndef KN_CONV_IGEMM_H
#define KN_CONV_IGEMM_H

#include "kernels/kernels.h"

typedef struct kn_igemm_params {
  const float *bias; /* NULL, or bias[j] for the tile's column j */
  const float *res;  /* NULL, or R's row 0 of the tile (row stride ldc) */
  bool res_after;    /* add R after the clamp (else before) */
  bool clamp;        /* min(max(v, lo), hi): Relu, Clip */
  bool accumulate;   /* add C's values (depth blocks after the first) */
  int64_t a_off;     /* added to every row pointer (a depth block's first channel) */
  float lo, hi;
  /* NULL: tap t's weights follow tap t-1's (w advances through the taps);
   * else they start at w + tap[t] * tap_stride floats: a block whose
   * pixels all read padding through some taps is given only the others
   * (their pointer rows and tap numbers), with the same sums in the same
   * order minus products of zeros. */
  const int32_t *tap;
  int64_t tap_stride;
} kn_igemm_params;

typedef void (*kn_igemm_fn)(int64_t taps, int64_t kc, const float *const *a,
                            const float *w, float *c, int64_t ldc, int64_t nc,
                            const kn_igemm_params *p);

/* Most rows and vectors of a tile over all ISAs. */
#define KN_IGEMM_MR_MAX 8
#define KN_IGEMM_NV_MAX 4

/* One ISA's micro-kernels: fn[nv - 1][r - 1] computes r rows by nv vectors
 * of vl floats (panel width nv * vl), for r up to mr_max: the main tile
 * has mr rows, and mr_max = mr + 1 where a tail of mr + 1 rows is one
 * tile (7x7 planes on AVX-512). */
typedef struct kn_igemm_ukernels {
  int32_t mr, mr_max; /* rows of the main tile, of the largest */
  int32_t vl, nv;     /* widest panel: nv vectors of vl floats */
  kn_igemm_fn fn[KN_IGEMM_NV_MAX][KN_IGEMM_MR_MAX];
} kn_igemm_ukernels;

extern const kn_igemm_ukernels kn_f32_igemm_ukernel_4x8__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_igemm_ukernels kn_f32_igemm_ukernel_4x24__avx2;
extern const kn_igemm_ukernels kn_f32_igemm_ukernel_6x64__avx512;
extern const kn_igemm_ukernels kn_f32_igemm_ukernel_8x16__avx512; /* <= 16 outputs */
#endif

#endif
