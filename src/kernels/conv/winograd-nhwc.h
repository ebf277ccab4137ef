/*
 * conv_winograd_nhwc's per-ISA pieces (private to src/kernels/conv): the
 * driver (winograd-nhwc.c) owns the tiles, blocks, threads and the 36
 * GEMMs (kn_sgemm); each ISA file (f32-winograd-nhwc-{avx512,avx2,
 * portable}.c, all from winograd-nhwc-impl.h) provides the two transforms
 * of one 4x4 output tile, vectorised over channels (VL channels per vector,
 * a masked vector for the tail), so no lane ever crosses a tile and there
 * are no shuffles or gathers.
 *
 * Layouts (floats; xi = 6 * row + column of the 6x6 Winograd domain):
 *   V  one block of T tiles (T a multiple of MR = kn_sgemm_mr): per xi a
 *      packed A of kn_sgemm (gemm.h): panels of MR tiles, [panel][c][MR],
 *      holding (B^T d B)_xi (zero rows past the block's last tile), so the
 *      GEMMs read it in place.
 *   M  the products of a block for channels [m0, m1): [xi][T][ldm].
 */
#ifndef KN_WINOGRAD_NHWC_H
#define KN_WINOGRAD_NHWC_H

#include "kernels/kernels.h"

/* Epilogue of the output transform, while the tile is in registers:
 * y = clamp(P + bias (+ res if res_first)) (+ res if !res_first),
 * clamp = [lo, hi] when `clamp` (Relu, Clip), else none. */
typedef struct kn_wgn_epi {
  bool clamp, res_first;
  float lo, hi;
} kn_wgn_epi;

/* Where one tile's 6x6 input window is: its image at x + xb (and its
 * scale at s + sb), its top left (iy0, ix0), possibly outside the image. */
typedef struct kn_wgn_tile {
  int64_t xb, sb, iy0, ix0;
} kn_wgn_tile;

typedef struct kn_wgn_ukernels {
  int32_t vl, mr; /* channels per vector; rows of the GEMM tile it packs for */
  /* B^T d B of the windows of `rows` <= MR tiles (zeros outside the
   * images [h, w, c]; channels scaled by s when s is not NULL) into one
   * packed-A row panel per xi: dst[xi * xs + ci * MR + r]. */
  void (*input)(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs);
  /* A^T m A of one tile for nch channels (m[xi * xs + j], j < nch), plus
   * bias[j] (bias NULL: none) and the epilogue, into the tile's nrows x
   * ncols outputs: y[a * ys + b * ps + j] (res: the residual, same
   * offsets, or NULL). */
  void (*output)(const float *m, int64_t xs, int64_t nch, const float *bias, float *y,
                 const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                 const kn_wgn_epi *e);
  /* The input transform as `input`, into row-major rows: tile r's
   * channel ci of position xi at dst[xi * xs + r * ldv + ci] (the bf16
   * products' A, kernels/conv/winograd-nhwc-bf16.c). */
  void (*input_rows)(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                     const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs, int64_t ldv);
  /* input_rows and output for F(2x2, 3x3) (winograd-nhwc-impl.h: 4x4
   * windows, 16 positions xi = 4 * row + column, 2x2 output tiles): the
   * bf16 products' better-conditioned variant. */
  void (*input_rows23)(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                       const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs, int64_t ldv);
  void (*output23)(const float *m, int64_t xs, int64_t nch, const float *bias, float *y,
                   const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                   const kn_wgn_epi *e);
} kn_wgn_ukernels;

extern const kn_wgn_ukernels kn_f32_winograd_nhwc_f43__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_wgn_ukernels kn_f32_winograd_nhwc_f43__avx2;
extern const kn_wgn_ukernels kn_f32_winograd_nhwc_f43__avx512;
#endif

/* The ISA's tile transforms (portable ones for an ISA this build lacks);
 * the fp32 and the bf16 Winograd tactics share them. */
const kn_wgn_ukernels *kn_wgn_ukernels_for(kn_isa isa);

/* F(4,3)'s filter transform G (6 x 3): U = G w G^T per 3x3 filter, taken
 * in double by the packers (the 1/6 and 1/24 entries would otherwise add
 * their rounding to the run's error). */
extern const double kn_winograd_f43_g[6][3];

#endif
