/* The reference convolution of src/ops/conv.c, shared with the fused
 * convolution (src/ops/fused.c): geometry from a Conv node's attributes
 * (which the conv tactics, src/tactics/conv, read too) and the float32
 * forward driver with an epilogue hook. */
#ifndef KN_CONV_REF_H
#define KN_CONV_REF_H

#include "op.h"

typedef struct kn_conv_geom {
  int32_t nd;                 /* spatial dims */
  int64_t n, c, m, group;     /* batch, input channels, output channels */
  int64_t x_sp[KN_MAX_RANK];  /* input spatial dims */
  int64_t y_sp[KN_MAX_RANK];  /* output spatial dims */
  int64_t k[KN_MAX_RANK], s[KN_MAX_RANK], d[KN_MAX_RANK];
  int64_t pb[KN_MAX_RANK], pe[KN_MAX_RANK]; /* pads, begin and end */
  int64_t ksz, x_size, y_size; /* products of k, x_sp, y_sp */
} kn_conv_geom;

/* Geometry of the Conv-like node in ctx (its kernel_shape, strides,
 * dilations, pads, auto_pad, group; `transpose`: ConvTranspose's weight
 * layout and output rule) for input x and weights w.  Output rank and dims
 * into *rout/dout (unknown parts -1); *complete says whether every field of
 * g is set (all shapes known).  Fails with a message naming the node. */
kn_status kn_conv_geometry(kn_op_ctx *ctx, const kn_tensor *x,
                           const kn_tensor *w, bool transpose, kn_conv_geom *g,
                           int32_t *rout, int64_t *dout, bool *complete) KN_WUR;

/* Called by the forward driver once output channels [m0, m0+mc) at
 * positions [p0, p0+pc) of image b hold their final convolution sums, so
 * an epilogue can finish them while they are in cache.  y is the whole
 * output ([n, m, y_size], row stride y_size per channel). */
typedef void (*kn_conv_epilogue_fn)(void *arg, float *y, int64_t b, int64_t m0,
                                    int64_t mc, int64_t p0, int64_t pc);

/* y (zeroed, [n, m, y_sp]) += conv(x, w) in float32, calling epi (when not
 * NULL) on each finished block; every output element is reported exactly
 * once.  False only when scratch memory cannot be allocated. */
bool kn_conv_forward_f32(const kn_conv_geom *g, const float *x, const float *w,
                         float *y, kn_conv_epilogue_fn epi, void *arg) KN_WUR;

#endif
