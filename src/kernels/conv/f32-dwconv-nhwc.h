/*
 * Channels-last depthwise convolution kernels (internal to
 * src/kernels/conv): what the driver (dwconv-nhwc.c) hands the per-ISA
 * kernels (f32-dwconv-nhwc-<isa>.c, all from f32-dwconv-nhwc-impl.h).
 *
 * A kernel call computes output rows [oy0, oy1) of image b, every
 * channel, straight from the NHWC input (no copy), and writes
 *   y = act(conv + bias [+ res])  [+ res]
 * with act one of kn_f32_dwconv_inline_act's (Relu, Clip, none); the
 * driver applies any other activation afterwards on the rows while they
 * are in cache.  Each output element's taps are accumulated with one FMA
 * each, starting from the bias, ky ascending then kx ascending (kernel
 * rows in the padding skipped, padding columns adding 0): the NCHW
 * kernel's order (the test finds the two bit-equal on this machine), and
 * independent of the row split, so results do not depend on the thread
 * count.
 */
#ifndef KN_F32_DWCONV_NHWC_H
#define KN_F32_DWCONV_NHWC_H

#include "kernels/conv/f32-dwconv.h"

/* Packed weights: [kh * kw][q][cp] with cp = c rounded up to
 * KN_DWN_CALIGN (zeros past c), so every tap's channel vector is one
 * unmasked load on any ISA.
 *
 * Narrow groups: the same kernels run a grouped convolution whose groups
 * have q = c / group input and q output channels (c == m, q in {2, 4, 8}:
 * ResNeXt's 32 groups of 4 and 8).  Lane l of a channel vector is output
 * channel l, of group l / q; for each tap, input channel i of its group is
 * broadcast across the group's lanes by a permutation of the input vector
 * (v_perm) and multiplied by packed weight vector [tap][i], i ascending
 * within the tap.  A group never straddles a vector (q divides the lanes).
 * No input scale (s NULL) on this path.  q = 1 is the depthwise conv. */
#define KN_DWN_CALIGN 16
/* Widest narrow group. */
#define KN_DWN_QMAX 8

typedef struct kn_dwn_args {
  const kn_conv2d *g;
  const float *x;    /* [n, h, w, c] */
  const float *s;    /* NULL or the input-channel scale [n, c] */
  const float *w;    /* packed [kh * kw][q][cp] */
  int64_t cp;        /* channel stride of w */
  int64_t q;         /* channels per group: 1 (depthwise), 2, 4 or 8 */
  const float *bias; /* NULL or [c] */
  const float *res;  /* NULL or [n, oh, ow, c] */
  bool res_after;    /* res added after act (else before it) */
  kn_act_params act; /* kn_f32_dwconv_inline_act(act.act) holds */
  float *y;          /* [n, oh, ow, c] */
  int64_t group_bytes; /* L1d budget of a channel group's input window */
} kn_dwn_args;

/* kn_dwn_args.group_bytes for these capacities: half the L1d (24 KiB of
 * 48 KiB; f32-dwconv-nhwc-impl.h, dwn_group, says why). */
static inline int64_t kn_f32_dwconv_nhwc_group_bytes(const kn_caches *caches) {
  return (int64_t)(kn_caches_or_common(caches).l1d / 2);
}

typedef void (*kn_dwn_rows_fn)(const kn_dwn_args *a, int64_t b, int64_t oy0, int64_t oy1);

void kn_f32_dwconv_nhwc_rows__portable(const kn_dwn_args *a, int64_t b, int64_t oy0,
                                       int64_t oy1);
#ifdef KN_HAVE_X86_KERNELS
void kn_f32_dwconv_nhwc_rows__avx2(const kn_dwn_args *a, int64_t b, int64_t oy0, int64_t oy1);
void kn_f32_dwconv_nhwc_rows__avx512(const kn_dwn_args *a, int64_t b, int64_t oy0,
                                     int64_t oy1);
#endif

#endif
