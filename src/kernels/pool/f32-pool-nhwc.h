/*
 * Channels-last pooling kernels (internal to src/kernels/pool): what the
 * driver (pool-nhwc.c) hands the per-ISA kernels (f32-pool-nhwc-<isa>.c,
 * all from f32-pool-nhwc-impl.h).
 */
#ifndef KN_F32_POOL_NHWC_H
#define KN_F32_POOL_NHWC_H

#include "kernels/pool/pool-kernels.h"

typedef struct kn_pooln_args {
  const kn_pool2d *p;
  int64_t c;
  const float *x; /* [n, h, w, c] */
  float *y;       /* [n, oh, ow, c] */
} kn_pooln_args;

/* Output rows [oy0, oy1) of image b, every channel. */
typedef void (*kn_pooln_rows_fn)(const kn_pooln_args *a, int64_t b, int64_t oy0, int64_t oy1);
/* y[ch] = max, or sum / div, over the `size` pixels of x ([size, c]), for
 * channels [c0, c1) (div = size: the mean; 1: a block's partial sum). */
typedef void (*kn_gpooln_fn)(bool is_max, int64_t size, int64_t c, const float *x, float *y,
                             int64_t c0, int64_t c1, int64_t div);

typedef struct kn_pooln_fns {
  kn_pooln_rows_fn rows;
  kn_gpooln_fn global;
} kn_pooln_fns;

extern const kn_pooln_fns kn_f32_pool_nhwc__portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_pooln_fns kn_f32_pool_nhwc__avx2;
extern const kn_pooln_fns kn_f32_pool_nhwc__avx512;
#endif

/* Divisor of one dim of an average window starting at output index o:
 * src/ops/pooling.c's expressions (as pool.c's NCHW driver), so edge cases
 * agree. */
static inline int64_t kn_pool_avg_count(int64_t o, int64_t in, int64_t k, int64_t s, int64_t d,
                                        int64_t pb, int64_t pe, bool include_pad) {
  int64_t st = o * s - pb;
  if (include_pad) {
    int64_t hp = (in + pe - 1 - st) / d + 1;
    if (hp > k) hp = k;
    return hp > 0 ? hp : 0;
  }
  int64_t l = st >= 0 ? 0 : (-st + d - 1) / d;
  int64_t h = st >= in ? 0 : (in - 1 - st) / d + 1;
  if (h > k) h = k;
  return h > l ? h - l : 0;
}

#endif
