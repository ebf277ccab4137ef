/*
 * conv_winograd's per-ISA pieces (private to src/kernels/conv): the driver
 * (winograd.c) owns the loops, the blocking and the threads; each ISA file
 * (f32-winograd-{avx512,avx2,portable}.c, all from winograd-impl.h)
 * provides the three inner kernels below, vectorised over VN tiles at once
 * (one tile per vector lane).
 *
 * Layouts (floats; xi = 6 * row + column of the 6x6 Winograd domain):
 *   U  (packed weights): [m panel of MR][xi][c][MR], zero rows past m.
 *   V  (one block of tiles): [xi][chunk][c][CW], CW = 2 * VN lanes per
 *      chunk, lane = tile of the block; written by `input`, read by `gemm`.
 *   M  (products, one m panel): [xi][MR][ldm], read by `output`.
 */
#ifndef KN_WINOGRAD_H
#define KN_WINOGRAD_H

#include "kernels/kernels.h"

#define KN_WG_NPOS 36 /* 6x6 Winograd domain of F(4x4, 3x3) */
#define KN_WG_VN_MAX 16

/* VN lanes (tiles) of the image: where each tile's data is, which of its
 * 6x6 input window lies inside the image, and where its 4x4 output goes. */
typedef struct kn_wg_lanes {
  int32_t in_off[KN_WG_VN_MAX];  /* input plane offset of the window's top left */
  uint32_t rbits[6], cbits[6];   /* lanes whose window row a / column b is inside */
  uint8_t cmask[KN_WG_VN_MAX];   /* per lane: window columns b inside (bit b) */
  int32_t out_off[KN_WG_VN_MAX]; /* output plane offset of the tile's top left */
  uint8_t nrows[KN_WG_VN_MAX];   /* output rows of the tile (0: lane unused) */
  uint8_t ncols[KN_WG_VN_MAX];   /* output columns of the tile */
} kn_wg_lanes;

/* Epilogue the output kernel applies while the tile is in registers:
 * y = clamp(P + bias (+ res if res_first)) (+ res if !res_first),
 * clamp = [lo, hi] when `clamp` (Relu, Clip), else none. */
typedef struct kn_wg_epi {
  bool clamp, res_first;
  float lo, hi;
} kn_wg_epi;

typedef struct kn_wg_ukernels {
  int32_t vn, mr;
  /* B^T d B of VN tiles of one input plane (w: its row length) into
   * dst[xi * xs] (VN floats each); lanes outside the image read zeros. */
  void (*input)(const float *plane, int64_t w, const kn_wg_lanes *ln, float *dst, int64_t xs);
  /* mo[r][j] = sum_k u[k][r] v[k][j] for r < MR, j < nv * VN (nv 1 or 2):
   * u one packed [k][MR] slice of U, v one [k][CW] chunk of V. */
  void (*gemm)(int64_t k, const float *u, const float *v, float *mo, int64_t ldm, int32_t nv);
  /* A^T m A + bias of VN tiles of one output channel (m[xi * ms], VN
   * floats each) into the output plane y (row length ow), with the
   * epilogue (res: the residual's plane, or NULL). */
  void (*output)(const float *m, int64_t ms, float bias, const kn_wg_lanes *ln, float *y,
                 const float *res, int64_t ow, const kn_wg_epi *e);
} kn_wg_ukernels;

extern const kn_wg_ukernels kn_f32_winograd_f43__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_wg_ukernels kn_f32_winograd_f43__avx2;
extern const kn_wg_ukernels kn_f32_winograd_f43__avx512;
#endif

#endif
