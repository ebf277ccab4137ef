/*
 * fp32 convolutions in NCHW (2-D, rank-4 tensors; conv_gemm and
 * conv_transpose_gemm also 3-D, and any tactic 1-D as h = 1), one entry per tactic of
 * src/ops/tactics.inc:
 *
 *   conv_gemm            any group/stride/dilation/padding, 1-D to 3-D
 *                        (the depth fields of kn_conv2d): per (image,
 *                        group) one packed GEMM, A = the group's weights
 *                        [Cout/group, Cin/group*kh*kw] (prepacked), B = the
 *                        image itself for 1x1 stride-1 unpadded kernels,
 *                        else im2col panels written straight from the image
 *                        by the GEMM's B-panel callback (implicit GEMM: no
 *                        im2col matrix ever exists).
 *   conv_depthwise       group == Cin == Cout: a direct kernel vectorised
 *                        over output width (kernels/conv/dwconv.c).
 *   conv_gemm_positions  conv_gemm's product transposed (positions as the
 *                        GEMM's rows) for few output positions, many
 *                        output channels: 1-D convs on short frames.
 *   conv_winograd        3x3, stride 1, dilation 1: F(4x4, 3x3), 36 GEMMs
 *                        per block of tiles over Winograd-domain weights
 *                        transformed once at pack time.
 *   conv_transpose_gemm  ConvTranspose, 1-D to 3-D: GEMM (W^T x image)
 *                        then col2im.
 *
 * Every tactic applies the fused epilogue (kernels.h) to the blocks it
 * finishes, with these conventions for the whole output:
 *   ep->bias  NULL or one value per output channel (the full [Cout] array;
 *             bias_per_row is ignored),
 *   ep->res   NULL or a tensor of the output's shape [n, Cout, oh, ow]
 *             (ep->ldr is ignored),
 * and writes every output element (outputs are not zeroed beforehand).
 *
 * Threads: each kernel splits its work over kn_pool_for tasks that write
 * disjoint outputs, and every output element is computed in one fixed
 * order whatever the split, so results are bit-identical for any thread
 * count.  Kernels allocate nothing: the caller passes scratch of the size
 * the matching *_scratch function returns for the pool's thread count.
 *
 * Tiles: kernels that size blocks by the caches take `caches`, the
 * capacities of the machine the model was built for (an op passes
 * &ctx->rt->caches; NULL: the common sizes, kn_caches_or_common).  A
 * kernel's *_scratch function depends on them as its run does: pass both
 * the same.  With the common sizes every tile is the one these kernels
 * were tuned with on Zen 4/5.
 */
#ifndef KN_CONV_H
#define KN_CONV_H

#include "kernels/kernels.h"

/* Geometry of one 2-D convolution (or transposed convolution: then h, w
 * are the input's dims, oh, ow the output's, and the pads/strides are
 * those of the ConvTranspose node).  Bottom and right pads follow from
 * the output size. */
typedef struct kn_conv2d {
  int64_t n, c, h, w; /* batch, input channels, input height and width */
  int64_t m, oh, ow;  /* output channels, output height and width */
  int64_t group;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl; /* top and left pads */
  /* Channels-last outputs only (conv_igemm_nhwc, conv_winograd_nhwc): floats
   * from one output pixel to the next, when y is a channel slice of a wider
   * tensor (a Concat written in place); 0 means m.  Not with a residual. */
  int64_t ldy;
  /* 3-D convolutions (conv_gemm and conv_transpose_gemm only): the input's
   * depth d, the output's od, the kernel's kd with its stride sd, dilation
   * dd and front pad pf.  kd == 0 is a 2-D convolution, as if d = od = kd =
   * sd = dd = 1 and pf = 0 (kn_conv2d_depth).  A 1-D convolution is a 2-D
   * one with h = oh = kh = 1. */
  int64_t d, od, kd, sd, dd, pf;
} kn_conv2d;

/* The output pixel stride of a channels-last output. */
static inline int64_t kn_conv2d_ldy(const kn_conv2d *g) { return g->ldy > 0 ? g->ldy : g->m; }

/* The depth dims of g, those of a 2-D convolution when g->kd == 0. */
typedef struct kn_conv_depth {
  int64_t d, od, kd, sd, dd, pf;
} kn_conv_depth;
static inline kn_conv_depth kn_conv2d_depth(const kn_conv2d *g) {
  if (g->kd < 1) return (kn_conv_depth){1, 1, 1, 1, 1, 0};
  return (kn_conv_depth){g->d, g->od, g->kd, g->sd, g->dd, g->pf};
}

/* ---- conv_gemm ---------------------------------------------------------- */

/* Floats of the prepacked weights (every group's A). */
size_t kn_f32_conv_gemm_pack_size(kn_isa isa, const kn_conv2d *g);
/* Packs w ([m, c/group, kh, kw]) for conv_gemm into dst. */
void kn_f32_conv_gemm_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst);
size_t kn_f32_conv_gemm_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                const kn_caches *caches);
void kn_f32_conv_gemm(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                      const float *wpacked, const kn_epilogue *ep, float *y, void *scratch,
                      const kn_caches *caches);

/* ---- conv_gemm_positions ------------------------------------------------- */

/* The product with output positions as the GEMM's rows and output channels
 * as its columns, for few positions and many channels (conv-gemm.c). */
bool kn_f32_conv_gemm_positions_fits(kn_isa isa, const kn_conv2d *g);
size_t kn_f32_conv_gemm_positions_pack_size(kn_isa isa, const kn_conv2d *g);
/* Packs w ([m, c/group, taps]) as the GEMM's B, W^T per group. */
void kn_f32_conv_gemm_positions_pack(kn_isa isa, const kn_conv2d *g, const float *w,
                                     float *dst);
size_t kn_f32_conv_gemm_positions_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                          const kn_caches *caches);
void kn_f32_conv_gemm_positions(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                                const float *wpacked, const kn_epilogue *ep, float *y,
                                void *scratch, const kn_caches *caches);

/* ---- conv_depthwise (group == c == m) ----------------------------------- */

size_t kn_f32_dwconv_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                             const kn_caches *caches);
/* w: [c, 1, kh, kw] as stored in the model (no packing needed). */
void kn_f32_dwconv(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                   const float *w, const kn_epilogue *ep, float *y, void *scratch,
                   const kn_caches *caches);

/* ---- conv_winograd (kh = kw = 3, strides and dilations 1) --------------- */

/* True when the geometry is one Winograd F(4,3) computes. */
bool kn_f32_conv_winograd_fits(const kn_conv2d *g);
size_t kn_f32_conv_winograd_pack_size(kn_isa isa, const kn_conv2d *g);
/* Transforms w to the Winograd domain (G w G^T per output/input channel
 * pair) and packs the 36 [m/group, c/group] matrices for the GEMM. */
void kn_f32_conv_winograd_pack(kn_isa isa, const kn_conv2d *g, size_t l2, const float *w,
                               float *dst);
/* The tile lanes per block that packing chose for its L2 (from the
 * packed weights' header). */
int64_t kn_f32_conv_winograd_block_lanes(const float *packed);
size_t kn_f32_conv_winograd_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads);
void kn_f32_conv_winograd(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                          const float *wpacked, const kn_epilogue *ep, float *y,
                          void *scratch);

/* ---- conv_transpose_gemm ------------------------------------------------ */

/* w: ConvTranspose weights [c, m/group, kh, kw]. */
size_t kn_f32_deconv_pack_size(kn_isa isa, const kn_conv2d *g);
void kn_f32_deconv_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst);
size_t kn_f32_deconv_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                             const kn_caches *caches);
void kn_f32_deconv(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                   const float *wpacked, const kn_epilogue *ep, float *y, void *scratch,
                   const kn_caches *caches);

/* ---- channels-last (NHWC) convolutions -------------------------------------
 *
 * x is [n, h, w, c] and y is [n, oh, ow, m] (channels innermost); the
 * weights are the model's [m, c/group, kh, kw], packed once.  The epilogue
 * conventions are those above with the layout changed: ep->bias one value
 * per output channel ([m], bias_per_row ignored), ep->res NULL or a tensor
 * of y's shape and layout [n, oh, ow, m], any activation.  s: NULL or an
 * input-channel scale [n, c] (FusedConv's S): the conv reads
 * x[b, iy, ix, ci] * s[b, ci].  Every output element is written.  y's
 * pixels are g->ldy floats apart (kn_conv2d_ldy) for conv_igemm_nhwc and
 * conv_winograd_nhwc; the channels between one pixel's m and the next
 * are left alone.
 *
 * conv_igemm_nhwc  any group, stride, dilation, padding: per group an
 *                  indirect GEMM (rows = output pixels, columns = output
 *                  channels, depth = taps x input channels) whose A rows
 *                  are read in place through per-pixel, per-tap pointers
 *                  into x (a zero row for padding), B = the prepacked
 *                  weights, C = y rows.
 * conv_depthwise_nhwc  group == c == m: a direct kernel vectorised over
 *                  channels; also groups of 2, 4 or 8 channels in and out
 *                  (kn_f32_dwconv_nhwc_fits). */
size_t kn_f32_conv_nhwc_pack_size(kn_isa isa, const kn_conv2d *g);
void kn_f32_conv_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst);
/* scaled: the call will pass an input-channel scale s */
size_t kn_f32_conv_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads, bool scaled,
                                const kn_caches *caches);
void kn_f32_conv_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                      const float *s, const float *wpacked, const kn_epilogue *ep, float *y,
                      void *scratch, const kn_caches *caches);

/* conv_winograd_nhwc  3x3, stride 1, dilation 1, group 1, any padding:
 *                  F(4x4, 3x3) as in conv_winograd, transforms vectorised
 *                  over channels and the 36 products [tiles, c] x [c, m]
 *                  run by kn_sgemm on weights packed in the Winograd
 *                  domain as its B operand (kernels/conv/winograd-nhwc.c). */
bool kn_f32_conv_winograd_nhwc_fits(const kn_conv2d *g);
size_t kn_f32_conv_winograd_nhwc_pack_size(kn_isa isa, const kn_conv2d *g);
/* w [m, c, 3, 3] */
void kn_f32_conv_winograd_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst);
size_t kn_f32_conv_winograd_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                         const kn_caches *caches);
void kn_f32_conv_winograd_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                               const float *s, const float *wpacked, const kn_epilogue *ep,
                               float *y, void *scratch, const kn_caches *caches);

/* The cache tiling each channels-last kernel plans on one thread from
 * `caches` (the same plan its run makes; more threads only split it
 * further), as a short line for kiln inspect:
 *   igemm:    "blk 2x512 54px 64c": a depth block of 2 taps x 512 channels
 *             (of 9 x 512), 54 pixels a task, weight panels of 64 columns;
 *   winograd: "84 tiles kc 256 mc 140": 4x4 output tiles per transformed
 *             block, and the blocking of its GEMMs.
 * (The depthwise kernel's is kn_f32_dwconv_nhwc_post_rows.) */
void kn_f32_conv_nhwc_tiling(kn_isa isa, const kn_conv2d *g, const kn_caches *caches, char *buf,
                             size_t len);
void kn_f32_conv_winograd_nhwc_tiling(kn_isa isa, const kn_conv2d *g, const kn_caches *caches,
                                      char *buf, size_t len);

/* conv_depthwise_nhwc's geometries: depthwise (group == c == m), or
 * narrow groups of q = c / group = m / group channels, q in {2, 4, 8},
 * without an input scale (f32-dwconv-nhwc.h). */
bool kn_f32_dwconv_nhwc_fits(const kn_conv2d *g, bool scaled);
size_t kn_f32_dwconv_nhwc_pack_size(kn_isa isa, const kn_conv2d *g);
void kn_f32_dwconv_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst);
size_t kn_f32_dwconv_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                  const kn_caches *caches);
void kn_f32_dwconv_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                        const float *s, const float *wpacked, const kn_epilogue *ep, float *y,
                        void *scratch, const kn_caches *caches);
/* Output rows [oy0, oy1) of image b of kn_f32_dwconv_nhwc (no input
 * scale), on the calling thread. */
void kn_f32_dwconv_nhwc_rows(kn_isa isa, const kn_conv2d *g, const float *x,
                             const float *wpacked, const kn_epilogue *ep, float *y, int64_t b,
                             int64_t oy0, int64_t oy1, const kn_caches *caches);
/* Output rows per pass of an activation the kernels do not finish in
 * registers (its tile; a quarter of the L2 of output). */
int64_t kn_f32_dwconv_nhwc_post_rows(const kn_conv2d *g, const kn_caches *caches);

/* conv_expand_dw_nhwc  a pointwise expansion (ge: 1x1, stride 1, no pads,
 *                  group 1, c -> e channels, conv_igemm_nhwc's packing and
 *                  epilogue ee, no scale or residual) followed by a
 *                  depthwise conv of the expanded tensor (gd: group == c ==
 *                  m == e, conv_depthwise_nhwc's packing and epilogue ed, no
 *                  residual): y = dw(act(expand(x))).  The expanded tensor
 *                  is never written whole: each task computes a band of
 *                  output rows from the expanded rows it needs, kept in a
 *                  per-thread buffer sized by the L2 and slid down the
 *                  image (kernels/conv/expand-dw-nhwc.c). */
bool kn_f32_expand_dw_nhwc_fits(const kn_conv2d *ge, const kn_conv2d *gd);
size_t kn_f32_expand_dw_nhwc_scratch(kn_isa isa, const kn_conv2d *ge, const kn_conv2d *gd,
                                     int32_t threads, const kn_caches *caches);
void kn_f32_expand_dw_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *ge, const float *we,
                           const kn_epilogue *ee, const kn_conv2d *gd, const float *wd,
                           const kn_epilogue *ed, const float *x, float *y, void *scratch,
                           const kn_caches *caches);

#endif
