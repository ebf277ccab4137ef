/*
 * conv_igemm_nhwc in reduced precision (kernels/conv/conv-nhwc-lowp.c):
 * the channels-last convolution of conv.h (x [n, h, w, c], y [n, oh, ow,
 * m] with pixel stride kn_conv2d_ldy, the same epilogue conventions, the
 * input-channel scale s) as GEMMs per group on the int8 (src/kernels/
 * qgemm) or bf16 / fp16 (src/kernels/hgemm) kernels:
 *
 *   C [pixels, m/group] = A [pixels, taps x c/group] x B [taps x c/group, m/group]
 *
 * the depth ordered tap-major, channel inner ([ky][kx][ci], what an NHWC
 * pixel's channels give contiguously).  Types:
 *
 *   INT8  A: u8, a = clamp(round_half_even(x * s / a_scale) + a_zero, 0,
 *         255) (kn_qgemm_quantize); padding is a_zero (the real 0); B: s8
 *         per output channel (the caller quantizes); exact s32 sums,
 *         dequantized in fp32 before the epilogue (qgemm.h).
 *   BF16  A: x * s rounded to bf16 (nearest even), B bf16; fp32 sums.
 *   F16   A: x * s rounded to fp16, B fp16; fp32 sums.
 *   F16W  A: x * s in fp32, B fp16 (weight-only compression).
 *
 * A is never a whole im2col matrix: a task (group, chunk of output
 * pixels, slab of output channels) gathers its chunk's rows into a
 * per-thread buffer (at most half the L2) and runs one GEMM on it (pool
 * NULL: the task is the thread's).  Where a kernel window reads an input
 * pixel more than once (kxk, or the scale s to apply) the input is first
 * converted once, whole, into scratch (u8 / bf16 / fp16: 1/4 to 1/2 of its
 * fp32 bytes), and the gather copies converted values; a 1x1 stride-1
 * unpadded conv without s (and with one slab, below) reads its fp32 rows
 * in place and the GEMM's packing converts them.  Rows of a group-1, undilated window row are one
 * copy of kw x c contiguous values (the 7x7 stem: 7 copies of 21, not 49
 * of 3).
 *
 * B: the weights of each group are cut into slabs of at most 512 output
 * channels (whole NR panels), each slab one packed B block of its kernel
 * (kn_qgemm_pack_b / kn_hgemm_pack_b), so tasks can split the output
 * channels of a layer with few pixels (ResNet-50's 7x7 maps).  Chunks and
 * slabs follow from the geometry and the caches, never from the thread
 * count, and every task is the same GEMM whoever runs it: results are
 * bit-identical for any thread count.
 */
#ifndef KN_CONV_LOWP_H
#define KN_CONV_LOWP_H

#include "kernels/conv/conv.h"
#include "kernels/qgemm/qgemm.h"

typedef enum kn_conv_lowp_type {
  KN_CONV_LOWP_INT8 = 0,
  KN_CONV_LOWP_BF16 = 1,
  KN_CONV_LOWP_F16 = 2,
  KN_CONV_LOWP_F16W = 3,
  KN_CONV_LOWP_TYPE_COUNT
} kn_conv_lowp_type;

/* Which kernels: `isa` for the hgemm kernels (their panel width) and the
 * fp32 epilogue, qimpl for INT8; bf16_dot as kn_hgemm_args.bf16_dot; the
 * input quantization for INT8. */
typedef struct kn_conv_lowp {
  kn_conv_lowp_type type;
  kn_isa isa;
  kn_qgemm_impl qimpl;
  bool bf16_dot;
  float a_scale;
  int32_t a_zero; /* [0, 255] */
} kn_conv_lowp;

/* Bytes of the packed weights (64-byte aligned blocks, one per group and
 * slab); depends on type, isa / qimpl and the geometry. */
size_t kn_conv_nhwc_lowp_pack_size(const kn_conv_lowp *v, const kn_conv2d *g);
/* Packs the weights, given tap-major: w_tm [m][kh][kw][c/group] (fp32 for
 * the half types, rounded as they are packed), or for INT8 q_tm (s8, same
 * layout) with w_scale [m] (per output channel).  dst: pack_size bytes,
 * 64-byte aligned. */
void kn_conv_nhwc_lowp_pack(const kn_conv_lowp *v, const kn_conv2d *g, const float *w_tm,
                            const int8_t *q_tm, const float *w_scale, void *dst);

/* Scratch bytes of a run on `threads` threads (scaled: an s will be
 * passed); `caches` as the run's. */
size_t kn_conv_nhwc_lowp_scratch(const kn_conv_lowp *v, const kn_conv2d *g, int32_t threads,
                                 bool scaled, const kn_caches *caches);
/* The convolution (see the file comment and conv.h's channels-last
 * conventions); wpacked from kn_conv_nhwc_lowp_pack with the same v's
 * type, isa / qimpl and g. */
void kn_conv_nhwc_lowp(const kn_conv_lowp *v, kn_pool *pool, const kn_conv2d *g, const float *x,
                       const float *s, const void *wpacked, const kn_epilogue *ep, float *y,
                       void *scratch, const kn_caches *caches);
/* Its plan on one thread, for kiln inspect: "int8 112px slab 256c". */
void kn_conv_nhwc_lowp_tiling(const kn_conv_lowp *v, const kn_conv2d *g,
                              const kn_caches *caches, char *buf, size_t len);

/* ---- conv_winograd_nhwc / conv_winograd_f23_nhwc in bf16 ---------------------
 * (kernels/conv/winograd-nhwc-bf16.c) 3x3, stride 1, undilated, group 1
 * (kn_f32_conv_winograd_nhwc_fits): Winograd F(tile x tile, 3x3), tile 4
 * (36 products per 16 outputs) or 2 (16 per 4), the products [tiles, c] x
 * [c, m] on the bf16 kernels, the transforms in fp32 (their outputs
 * rounded to bf16 as the products read them); x, s, ep, y as
 * kn_f32_conv_winograd_nhwc. */
size_t kn_bf16_conv_winograd_nhwc_pack_size(kn_isa isa, int tile, const kn_conv2d *g);
/* w [m, c, 3, 3]; temp: c x m floats; dst: pack_size bytes, 64-aligned. */
void kn_bf16_conv_winograd_nhwc_pack(kn_isa isa, int tile, const kn_conv2d *g, const float *w,
                                     float *temp, void *dst);
size_t kn_bf16_conv_winograd_nhwc_scratch(kn_isa isa, bool bf16_dot, int tile,
                                          const kn_conv2d *g, int32_t threads,
                                          const kn_caches *caches);
void kn_bf16_conv_winograd_nhwc(kn_isa isa, bool bf16_dot, int tile, kn_pool *pool,
                                const kn_conv2d *g, const float *x, const float *s,
                                const void *upacked, const kn_epilogue *ep, float *y,
                                void *scratch, const kn_caches *caches);
void kn_bf16_conv_winograd_nhwc_tiling(kn_isa isa, int tile, const kn_conv2d *g,
                                       const kn_caches *caches, char *buf, size_t len);

#endif
