/*
 * Tap rows: the inner loops of pooling (internal to src/kernels).
 *
 * A window op over a 2-D plane computes, per output row, for every output
 * column ox,  y[ox] = reduce over taps t of  src_t[ox],  where src_t is
 * the input row of tap t read at ox*stride + kx*dilation.  To make every
 * such read a contiguous vector load whatever the stride, dilation and
 * padding, the input rows a task needs are first copied into a strip of
 * "phase rows": row r of the strip holds `sw` phases of `pw` floats, phase
 * q element j = padded_row[j*sw + q], where padded_row is the input row
 * shifted right by the left pad and filled with `pad` outside the input
 * (0 for convolution and average pooling, -inf for max pooling).  Tap
 * (ky, kx) of output row oy then reads phase (kx*dw) % sw of strip row
 * oy*sh + ky*dh at offset (kx*dw) / sw + ox: unit stride, no border cases.
 * This is the idea behind XNNPACK's CHW depthwise kernels (which split
 * stride-2 inputs into even/odd columns), generalised to any stride.
 *
 * pw leaves room to read whole vectors past the last output column, so
 * the row kernels load up to kn_taprow_pad(n) floats from every src and
 * store exactly n.
 */
#ifndef KN_TAPROWS_H
#define KN_TAPROWS_H

#include "kernels/kernels.h"

/* Widest vector any row kernel loads (AVX-512: 16 floats). */
#define KN_TAPROW_VEC 16

static inline int64_t kn_taprow_round(int64_t n) {
  return (n + KN_TAPROW_VEC - 1) / KN_TAPROW_VEC * KN_TAPROW_VEC;
}

/* Floats per phase row for ow outputs and a kernel width kw (dilation dw,
 * stride sw): every tap's read of kn_taprow_round(ow) floats fits. */
static inline int64_t kn_taprow_pw(int64_t ow, int64_t kw, int64_t dw, int64_t sw) {
  return kn_taprow_round(ow) + (kw - 1) * dw / sw + 1;
}

/* Copy input rows [iy0, iy0 + nrows) of plane x (h x w) into a strip of
 * phase rows at dst (nrows * sw * pw floats); rows outside [0, h) and
 * columns outside the input are `pad`. */
void kn_f32_taprow_strip(kn_isa isa, const float *x, int64_t h, int64_t w, int64_t iy0,
                         int64_t nrows, int64_t pl, int64_t sw, int64_t pw, float pad,
                         float *dst);

/* Row kernels, n outputs each, taps in the order given:
 *   max:  y[i] = max_t src[t][i]
 *   avg:  y[i] = (sum_t src[t][i]) / (dy * dx[i])  */
typedef struct kn_taprow_fns {
  void (*max)(const float *const *src, int32_t ntaps, float *y, int64_t n);
  void (*avg)(const float *const *src, int32_t ntaps, const float *dx, float dy, float *y,
              int64_t n);
  /* even[j] = src[2j], odd[j] = src[2j+1] for j < n: stride-2 strips */
  void (*deint2)(const float *src, int64_t n, float *even, float *odd);
} kn_taprow_fns;

const kn_taprow_fns *kn_f32_taprow_fns(kn_isa isa);

#ifdef KN_HAVE_X86_KERNELS
extern const kn_taprow_fns kn_f32_taprow__avx2;
extern const kn_taprow_fns kn_f32_taprow__avx512;
#endif

/* Split of a window op over planes x row chunks: rows per chunk such that
 * there are enough tasks for `threads` and a strip stays small against
 * the L2 of `caches` (NULL: the common sizes). */
int64_t kn_taprow_chunk_rows(int64_t planes, int64_t oh, int64_t sh, int64_t kh, int64_t dh,
                             int64_t sw, int64_t pw, int32_t threads, const kn_caches *caches);

#endif
