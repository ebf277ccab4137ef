/*
 * Depthwise convolution kernels (internal to src/kernels/conv): what the
 * driver (dwconv.c) hands the per-ISA kernels (f32-dwconv-<isa>.c, all
 * generated from f32-dwconv-impl.h).
 *
 * A kernel call computes output rows [oy0, oy1) of planes [p0, p1) (plane
 * = image * c + channel) straight from the NCHW input: no copy, borders by
 * masked loads.  It writes
 *   y = act(conv + bias [+ res])  [+ res]
 * where act is one of the activations the kernels apply inline
 * (kn_f32_dwconv_inline_act); the driver applies any other activation
 * afterwards on the rows while they are in cache.
 *
 * Each output element's taps are accumulated with one FMA each, ky
 * ascending then kx ascending, starting from the bias, whatever the row
 * blocking or the task split: results do not depend on the thread count.
 */
#ifndef KN_F32_DWCONV_H
#define KN_F32_DWCONV_H

#include "kernels/conv/conv.h"

typedef struct kn_dw_args {
  const kn_conv2d *g;
  const float *x, *w; /* input [n, c, h, w], weights [c, 1, kh, kw] */
  const float *bias;  /* NULL or [c] */
  const float *res;   /* NULL or [n, c, oh, ow] */
  bool res_after;     /* res added after act (else before it) */
  kn_act_params act;  /* kn_f32_dwconv_inline_act(act.act) holds */
  float *y;
} kn_dw_args;

/* Activations the kernels apply while the output is in registers (as
 * min(hi, max(lo, x)): two instructions, one compiled loop for all). */
static inline bool kn_f32_dwconv_inline_act(kn_act a) {
  return a == KN_ACT_NONE || a == KN_ACT_RELU || a == KN_ACT_CLIP;
}

typedef void (*kn_dw_rows_fn)(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0,
                              int64_t oy1);

void kn_f32_dwconv_rows__portable(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0,
                                  int64_t oy1);
#ifdef KN_HAVE_X86_KERNELS
void kn_f32_dwconv_rows__avx2(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0,
                              int64_t oy1);
void kn_f32_dwconv_rows__avx512(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0,
                                int64_t oy1);
#endif

#endif
