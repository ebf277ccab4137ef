/*
 * The channels-last depthwise convolution row kernels
 * (f32-dwconv-nhwc.h), written once against f32-nhwc-vec.h and
 * instantiated per ISA: f32-dwconv-nhwc-avx512.c (16 channels a vector,
 * 8 output pixels a block), -avx2.c (8 channels, 4 pixels) and
 * -portable.c (8 channels, 4 pixels, generic loop only).  The including
 * file defines DWN_ENTRY (the kn_dwn_rows_fn to define) and DWN_P (pixels
 * per block).
 *
 * Scheme: the output is computed one channel vector at a time (the
 * channel block is the outer loop, so its kh*kw weight vectors stay in L1
 * or registers over all the rows of the call), one output row at a time,
 * in blocks of DWN_P pixels along the row.  For each tap the weight
 * vector is loaded once and multiplied into the block's DWN_P
 * accumulators; with stride 1 the input vector of column ix feeds up to
 * kw of them, and the compiler keeps it for all (the loads of a block are
 * plain loads of fixed offsets, which it merges): a 3x3 stride-1 block of
 * 8 pixels does 72 FMAs on 3 x 10 input + 9 weight loads, so the FMAs set
 * the pace (2 FMAs and 2 loads a cycle on Zen 4/5 and Skylake-X).
 *
 * Borders without branches in the inner loop: each row is split into
 * left border pixels, interior blocks (every tap's column inside the
 * image: no test, no mask) and right border pixels, done one pixel at a
 * time with a column test per tap.  Rows in the top or bottom padding are
 * skipped by narrowing the row's ky range.  The channel tail (c not a
 * multiple of VN) takes masked loads and stores; the packed weights are
 * zero past c, so their loads never need a mask.
 *
 * Specialised (taps unrolled, offsets constant): kw 3 and 5, horizontal
 * stride 1 and 2, dilation 1 (any kh, vertical stride).  Everything else
 * takes the same code with the horizontal geometry at run time.
 *
 * The input-channel scale s (FusedConv's S) multiplies each input vector
 * as it is read, so the products are those of conv(x * s): scaling the
 * weights instead would round differently.
 *
 * Tap order: every output is bias, then ky ascending, kx ascending, one
 * FMA each (taps in the padding skipped), whatever the block it falls in.
 */
#ifndef DWN_ENTRY
#error "define the vector interface and DWN_ENTRY before including f32-dwconv-nhwc-impl.h"
#endif

#include <math.h>

#include "kernels/conv/f32-dwconv-nhwc.h"

#define DWN_INLINE static inline __attribute__((always_inline))
#define DWN_PMAX 8

/* One channel block of one image: the constants of every row. */
typedef struct dwn_blk {
  const float *x;   /* image b's input, at channel c0 */
  const float *w;   /* packed weights at channel c0 */
  float *y;         /* image b's output at channel c0 */
  const float *res; /* image b's residual at channel c0, or NULL */
  bool res_after;
  V bias, sv, lo, hi;
  M m;                                /* the channel tail's lanes */
  int64_t c, cp, h, iw, oh, ow;       /* c: pixel stride of x, y, res */
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  int64_t oxa, oxb; /* interior output columns: every tap inside [0, iw) */
} dwn_blk;

DWN_INLINE V dwn_ld(const dwn_blk *B, const float *p, const int TAIL, const int SCALE) {
  V v = TAIL ? v_ldm(p, B->m) : v_ld(p);
  return SCALE ? v_mul(v, B->sv) : v;
}

/* (+res) act (+res), store: act is min(hi, max(lo, x)), which is Relu,
 * Clip or nothing, with the operand order of the NCHW kernel. */
DWN_INLINE void dwn_out(const dwn_blk *B, V v, int64_t off, const int TAIL) {
  if (B->res && !B->res_after) v = v_add(v, TAIL ? v_ldm(B->res + off, B->m) : v_ld(B->res + off));
  v = v_min(B->hi, v_max(B->lo, v));
  if (B->res && B->res_after) v = v_add(v, TAIL ? v_ldm(B->res + off, B->m) : v_ld(B->res + off));
  if (TAIL) v_stm(B->y + off, v, B->m);
  else v_st(B->y + off, v);
}

/* P interior pixels ox0.. of row oy, input rows ky in [ky0, ky1). */
DWN_INLINE void dwn_block(const dwn_blk *B, int64_t oy, int64_t ky0, int64_t ky1, int64_t ox0,
                          const int P, const int64_t KW, const int64_t S, const int64_t D,
                          const int TAIL, const int SCALE) {
  const int64_t c = B->c, cp = B->cp;
  V acc[DWN_PMAX];
#pragma GCC unroll 8
  for (int p = 0; p < P; p++) acc[p] = B->bias;
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *xr = B->x + ((oy * B->sh - B->pt + ky * B->dh) * B->iw + ox0 * S - B->pl) * c;
    const float *wk = B->w + ky * KW * cp;
#pragma GCC unroll 8
    for (int64_t kx = 0; kx < KW; kx++) {
      V wv = v_ld(wk + kx * cp);
#pragma GCC unroll 8
      for (int p = 0; p < P; p++)
        acc[p] = v_fma(dwn_ld(B, xr + (p * S + kx * D) * c, TAIL, SCALE), wv, acc[p]);
    }
  }
  int64_t o = (oy * B->ow + ox0) * c;
#pragma GCC unroll 8
  for (int p = 0; p < P; p++) dwn_out(B, acc[p], o + p * c, TAIL);
}

/* One border pixel: a column test per tap. */
DWN_INLINE void dwn_pixel(const dwn_blk *B, int64_t oy, int64_t ky0, int64_t ky1, int64_t ox,
                          const int64_t KW, const int64_t S, const int64_t D, const int TAIL,
                          const int SCALE) {
  const int64_t c = B->c, cp = B->cp, ix0 = ox * S - B->pl;
  V acc = B->bias;
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *xr = B->x + (oy * B->sh - B->pt + ky * B->dh) * B->iw * c;
    const float *wk = B->w + ky * KW * cp;
#pragma GCC unroll 8
    for (int64_t kx = 0; kx < KW; kx++) {
      int64_t ix = ix0 + kx * D;
      if (ix >= 0 && ix < B->iw) acc = v_fma(dwn_ld(B, xr + ix * c, TAIL, SCALE), v_ld(wk + kx * cp), acc);
    }
  }
  dwn_out(B, acc, (oy * B->ow + ox) * c, TAIL);
}

/* Rows [oy0, oy1) of one channel block. */
DWN_INLINE void dwn_rows(const dwn_blk *B, int64_t oy0, int64_t oy1, const int P,
                         const int64_t KW, const int64_t S, const int64_t D, const int TAIL,
                         const int SCALE) {
  const int64_t oxa = B->oxa, oxb = B->oxb, ow = B->ow;
  for (int64_t oy = oy0; oy < oy1; oy++) {
    /* rows of the kernel inside [0, h) */
    int64_t iy0 = oy * B->sh - B->pt;
    int64_t ky0 = iy0 >= 0 ? 0 : (-iy0 + B->dh - 1) / B->dh;
    int64_t ky1 = iy0 >= B->h ? 0 : (B->h - 1 - iy0) / B->dh + 1;
    if (ky1 > B->kh) ky1 = B->kh;
    if (ky1 < ky0) ky1 = ky0;
    int64_t ox = 0;
    for (; ox < oxa; ox++) dwn_pixel(B, oy, ky0, ky1, ox, KW, S, D, TAIL, SCALE);
    for (; ox + P <= oxb; ox += P) dwn_block(B, oy, ky0, ky1, ox, P, KW, S, D, TAIL, SCALE);
    if (P > 4 && oxb - ox >= 4) {
      dwn_block(B, oy, ky0, ky1, ox, 4, KW, S, D, TAIL, SCALE);
      ox += 4;
    }
    if (P > 2 && oxb - ox >= 2) {
      dwn_block(B, oy, ky0, ky1, ox, 2, KW, S, D, TAIL, SCALE);
      ox += 2;
    }
    if (oxb - ox >= 1) dwn_block(B, oy, ky0, ky1, ox++, 1, KW, S, D, TAIL, SCALE);
    for (; ox < ow; ox++) dwn_pixel(B, oy, ky0, ky1, ox, KW, S, D, TAIL, SCALE);
  }
}

typedef void (*dwn_blk_fn)(const dwn_blk *B, int64_t oy0, int64_t oy1);

/* One function per (geometry, tail, scale); KW, S, D are constants in
 * the specialised ones and B's fields in the generic one. */
#define DWN_FN(NAME, P, KW, S, D, TAIL, SCALE)                          \
  static void NAME(const dwn_blk *B, int64_t oy0, int64_t oy1) {        \
    dwn_rows(B, oy0, oy1, P, KW, S, D, TAIL, SCALE);                    \
  }
#define DWN_FNS(NAME, P, KW, S, D)                \
  DWN_FN(NAME##_00, P, KW, S, D, 0, 0)            \
  DWN_FN(NAME##_01, P, KW, S, D, 0, 1)            \
  DWN_FN(NAME##_10, P, KW, S, D, 1, 0)            \
  DWN_FN(NAME##_11, P, KW, S, D, 1, 1)            \
  static const dwn_blk_fn NAME[2][2] = {{NAME##_00, NAME##_01}, {NAME##_10, NAME##_11}};

DWN_FNS(dwn_generic, 4, B->kw, B->sw, B->dw)
#ifndef DWN_GENERIC_ONLY
DWN_FNS(dwn_k3s1, DWN_P, 3, 1, 1)
DWN_FNS(dwn_k3s2, DWN_P, 3, 2, 1)
DWN_FNS(dwn_k5s1, DWN_P, 5, 1, 1)
DWN_FNS(dwn_k5s2, DWN_P, 5, 2, 1)
#endif

void DWN_ENTRY(const kn_dwn_args *a, int64_t b, int64_t oy0, int64_t oy1) {
  const kn_conv2d *g = a->g;
  const dwn_blk_fn(*fns)[2] = dwn_generic;
#ifndef DWN_GENERIC_ONLY
  if (g->dw == 1 && (g->sw == 1 || g->sw == 2) && (g->kw == 3 || g->kw == 5)) {
    if (g->kw == 3) fns = g->sw == 1 ? dwn_k3s1 : dwn_k3s2;
    else fns = g->sw == 1 ? dwn_k5s1 : dwn_k5s2;
  }
#endif
  dwn_blk B;
  B.c = g->c, B.cp = a->cp, B.h = g->h, B.iw = g->w, B.oh = g->oh, B.ow = g->ow;
  B.kh = g->kh, B.kw = g->kw, B.sh = g->sh, B.sw = g->sw, B.dh = g->dh, B.dw = g->dw;
  B.pt = g->pt, B.pl = g->pl;
  B.res_after = a->res_after;
  B.lo = v_set(-INFINITY), B.hi = v_set(INFINITY);
  if (a->act.act == KN_ACT_RELU) B.lo = v_set(0.0f);
  if (a->act.act == KN_ACT_CLIP) B.lo = v_set(a->act.lo), B.hi = v_set(a->act.hi);
  /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw-1) * dw < w */
  int64_t oxa = (g->pl + g->sw - 1) / g->sw;
  int64_t num = g->w - 1 - (g->kw - 1) * g->dw + g->pl;
  int64_t oxb = num < 0 ? 0 : num / g->sw + 1;
  if (oxa > g->ow) oxa = g->ow;
  if (oxb > g->ow) oxb = g->ow;
  if (oxb < oxa) oxb = oxa;
  B.oxa = oxa, B.oxb = oxb;
  const int64_t c = g->c;
  const float *xb = a->x + b * g->h * g->w * c;
  float *yb = a->y + b * g->oh * g->ow * c;
  const float *rb = a->res ? a->res + b * g->oh * g->ow * c : NULL;
  for (int64_t c0 = 0; c0 < c; c0 += VN) {
    int tail = c - c0 < VN;
    B.m = m_tail(tail ? c - c0 : VN);
    B.x = xb + c0, B.w = a->w + c0, B.y = yb + c0, B.res = rb ? rb + c0 : NULL;
    B.bias = !a->bias ? v_set(0.0f) : tail ? v_ldm(a->bias + c0, B.m) : v_ld(a->bias + c0);
    B.sv = !a->s ? v_set(1.0f) : tail ? v_ldm(a->s + b * c + c0, B.m) : v_ld(a->s + b * c + c0);
    fns[tail][a->s != NULL](&B, oy0, oy1);
  }
}
