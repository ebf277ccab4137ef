/*
 * fp32 pooling over NCHW planes: 2-D MaxPool / AveragePool windows (any
 * kernel, stride, dilation, pads, ceil_mode as resolved by the op into
 * the output size) and the global max / average over whole planes.
 *
 * Semantics match src/ops/pooling.c: padding never wins a max (it reads as
 * -inf) and adds nothing to a sum; an average divides by the number of
 * input elements in the window, or with count_include_pad by the window
 * clipped to the padded input (the op's formula, dim by dim).  Sums are
 * accumulated in float (the reference uses double): results differ by
 * float rounding.  NaN inputs are not propagated the way the reference
 * does (vector max keeps the non-NaN operand).
 *
 * Work is split over planes (and row chunks when there are few planes);
 * each output is computed in one fixed order, so any thread count gives
 * the same bits.  The caller passes scratch of kn_f32_pool2d_scratch
 * bytes for the pool's thread count and the same `caches` (the capacities
 * the row chunks are sized by; NULL: the common sizes, kernels.h).
 */
#ifndef KN_POOL_KERNELS_H
#define KN_POOL_KERNELS_H

#include "kernels/kernels.h"

typedef struct kn_pool2d {
  int64_t planes; /* n * c */
  int64_t h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr; /* pads: top, left, bottom, right */
  bool is_max;
  bool count_include_pad;
} kn_pool2d;

size_t kn_f32_pool2d_scratch(kn_isa isa, const kn_pool2d *p, int32_t threads,
                             const kn_caches *caches);
void kn_f32_pool2d(kn_isa isa, kn_pool *pool, const kn_pool2d *p, const float *x, float *y,
                   void *scratch, const kn_caches *caches);

/* y[i] = max or mean of the `size` values of plane i of x, i < planes. */
void kn_f32_global_pool(kn_isa isa, kn_pool *pool, bool is_max, int64_t planes, int64_t size,
                        const float *x, float *y);

/* Per-ISA plane reductions (internal). */
typedef struct kn_reduce_fns {
  float (*sum)(const float *x, int64_t n);
  float (*max)(const float *x, int64_t n);
} kn_reduce_fns;

#ifdef KN_HAVE_X86_KERNELS
extern const kn_reduce_fns kn_f32_reduce__avx2;
extern const kn_reduce_fns kn_f32_reduce__avx512;
#endif

/* Channels-last: x [n, h, w, c], y [n, oh, ow, c]; p->planes is n (images)
 * and `c` the channels; same semantics as kn_f32_pool2d. */
size_t kn_f32_pool2d_nhwc_scratch(kn_isa isa, const kn_pool2d *p, int64_t c, int32_t threads);
void kn_f32_pool2d_nhwc(kn_isa isa, kn_pool *pool, const kn_pool2d *p, int64_t c,
                        const float *x, float *y, void *scratch);
/* y[b, c] = max or mean over the `size` pixels of image b of x [n, size, c].
 * scratch: kn_f32_global_pool_nhwc_scratch bytes (the partial results of
 * blocks of pixels on large maps; never 0). */
size_t kn_f32_global_pool_nhwc_scratch(int64_t n, int64_t size, int64_t c);
void kn_f32_global_pool_nhwc(kn_isa isa, kn_pool *pool, bool is_max, int64_t n, int64_t size,
                             int64_t c, const float *x, float *y, void *scratch);

#endif
