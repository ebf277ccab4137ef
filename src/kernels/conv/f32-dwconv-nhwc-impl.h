/*
 * The channels-last depthwise convolution row kernels
 * (f32-dwconv-nhwc.h), written once against f32-nhwc-vec.h and
 * instantiated per ISA: f32-dwconv-nhwc-avx512.c (16 channels a vector,
 * 8 output pixels a block), -avx2.c (8 channels, 4 pixels) and
 * -portable.c (8 channels, 4 pixels, generic loop only).  The including
 * file defines DWN_ENTRY (the kn_dwn_rows_fn to define) and DWN_P (pixels
 * per block).
 *
 * Scheme: one output row at a time, in blocks of DWN_P pixels along the
 * row, and inside each block every channel vector in turn.  For each
 * kernel row the block loads the row's KW weight vectors, then walks its
 * (P-1)*S + KW input columns left to right, each loaded once into a
 * register and multiplied into the pixels it feeds: a 3x3 stride-1 block
 * of 8 pixels does 72 FMAs on 3 x 10 input + 9 weight loads, so the FMAs
 * can set the pace (2 FMAs and 2 loads a cycle on Zen 4/5 and Skylake-X).
 * Left to itself the compiler folded each input load into every FMA that
 * used it (3x the loads) and kept each column's offset j * c in its own
 * register (spilled): v_keep and nhwc_step prevent both, which took a
 * 3x3 block from about 85 to 55 cycles.  Channels inside the pixel block
 * keep the input reads sequential (see dwn_rows).
 *
 * Borders: a block whose columns are all inside the image loads
 * unmasked; in a block reaching into the padding (or past the row's end,
 * or over the channel tail) each column inside the image loads as usual
 * (masked on the channel tail) and a padding column is not loaded at all
 * but taken as zeros, which add nothing, as in the NCHW kernel.  Loading
 * padding columns with an empty mask (the pointer then outside the row)
 * cost like a cache miss each on Zen 5: a 7x7 map is all border for a
 * 5x5 kernel, and MnasNet's and EfficientNet-B0's 5x5 layers on 7x7 maps
 * of 1152 channels took 90-110 us instead of 36-43.  The test on the
 * column is a branch the predictor learns (the same pattern every row).
 * Rows in the top or bottom padding are skipped by narrowing the row's ky
 * range.  The packed weights are zero past c, so their loads never need a
 * mask.
 *
 * Specialised (columns in registers, offsets constant): kw 3 and 5,
 * horizontal stride 1 and 2, dilation 1 (any kh, vertical stride).
 * Everything else takes the generic code (geometry at run time, one load
 * per tap, blocks of 4).
 *
 * The input-channel scale s (FusedConv's S) multiplies each input vector
 * as it is read, so the products are those of conv(x * s): scaling the
 * weights instead would round differently.  It takes the generic code.
 *
 * Tap order: every output is bias, then ky ascending, kx ascending, one
 * FMA each, whatever the block it falls in.
 */
#ifndef DWN_ENTRY
#error "define the vector interface and DWN_ENTRY before including f32-dwconv-nhwc-impl.h"
#endif

#include <math.h>

#include "kernels/conv/f32-dwconv-nhwc.h"

#define DWN_INLINE static inline __attribute__((always_inline))
#define DWN_PMAX 8

/* One image: the constants of every row. */
typedef struct dwn_img {
  const float *x;   /* image b's input */
  const float *w;   /* packed weights */
  float *y;         /* image b's output */
  const float *res; /* image b's residual, or NULL */
  const float *bias, *s; /* NULL or [c]; s: image b's scale */
  bool res_after;
  V lo, hi;
  M mt;                          /* lanes of the channel tail (c % VN) */
  int64_t c, cfull, cp, h, iw, oh, ow; /* c: pixel stride of x, y, res */
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  int64_t oxa, oxb; /* interior output columns: every tap inside [0, iw) */
  int64_t cg;       /* channels per group (a multiple of VN, or c) */
  VI idx[KN_DWN_QMAX]; /* narrow groups of q: vi_group(q, i) */
} dwn_img;

/* (+res) act (+res), store: act is min(hi, max(lo, x)), which is Relu,
 * Clip or nothing, with the operand order of the NCHW kernel. */
DWN_INLINE void dwn_out(const dwn_img *B, V v, int64_t off, M m, int TAIL) {
  if (B->res && !B->res_after) v = v_add(v, TAIL ? v_ldm(B->res + off, m) : v_ld(B->res + off));
  v = v_min(B->hi, v_max(B->lo, v));
  if (B->res && B->res_after) v = v_add(v, TAIL ? v_ldm(B->res + off, m) : v_ld(B->res + off));
  if (TAIL) v_stm(B->y + off, v, m);
  else v_st(B->y + off, v);
}

/* Kernel columns of the specialised code at most. */
#define DWN_KWMAX 5

/* P pixels ox0.. of row oy (the first np of them stored), channels
 * [c0, c0 + VN) (the lanes of m), input rows ky in [ky0, ky1).
 * EDGE: some of its columns lie in the padding: every load is masked by
 * its column (padding reads as 0: an FMA that adds nothing, as in the NCHW
 * kernel; a masked-off lane is never read, so the pointer may lie outside
 * the row).  SPEC (KW, S, D constants): each kernel row's (P-1)*S + KW
 * input vectors are loaded once into registers and shared by the pixels
 * they feed; the generic path loads per tap. */
DWN_INLINE void dwn_block(const dwn_img *B, int64_t oy, int64_t ky0, int64_t ky1, int64_t ox0,
                          int64_t np, int64_t c0, M m, const int P, const int64_t KW,
                          const int64_t S, const int64_t D, const int SPEC, const int EDGE,
                          const int SCALE, const int Q) {
  /* the masked code serves the channel tail too; its stores (and bias
   * and residual loads) are masked only on that tail */
  const int TAIL = EDGE && c0 + VN > B->c;
  const int64_t c = B->c, cp = B->cp, ix0 = ox0 * S - B->pl;
  const V bias = !B->bias ? v_set(0.0f) : TAIL ? v_ldm(B->bias + c0, m) : v_ld(B->bias + c0);
  V sv = v_set(1.0f);
  if (SCALE) sv = TAIL ? v_ldm(B->s + c0, m) : v_ld(B->s + c0);
  V acc[DWN_PMAX];
#pragma GCC unroll 8
  for (int p = 0; p < P; p++) acc[p] = bias;
  const int NC = SPEC ? (int)((P - 1) * S + (KW - 1) * D + 1) : 1;
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *xr = B->x + ((oy * B->sh - B->pt + ky * B->dh) * B->iw + ix0) * c + c0;
    const float *wk = B->w + ky * KW * Q * cp + c0;
    if (SPEC) {
      /* the row's KW weight vectors in registers, then its columns left to
       * right, each loaded once (one pointer stepping by c: offsets j * c
       * in registers ran out of them) and multiplied into the pixels it
       * feeds; a pixel's taps still come kx ascending */
      V wv[DWN_KWMAX];
#pragma GCC unroll 8
      for (int64_t kx = 0; kx < KW; kx++) wv[kx] = v_ld(wk + kx * cp);
      const float *xp = xr;
#pragma GCC unroll 32
      for (int j = 0; j < NC; j++) {
        V v = !EDGE || (uint64_t)(ix0 + j) < (uint64_t)B->iw ? (TAIL ? v_ldm(xp, m) : v_ld(xp))
                                                             : v_set(0.0f);
        v = v_keep(SCALE ? v_mul(v, sv) : v);
        xp = nhwc_step(xp, c);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
          const int64_t t = j - p * S; /* = kx * D */
          if (t >= 0 && t % D == 0 && t / D < KW) acc[p] = v_fma(v, wv[t / D], acc[p]);
        }
      }
    } else if (Q > 1) {
      /* narrow groups (f32-dwconv-nhwc.h): the tap's Q weight vectors,
       * then per pixel its input vector, each group's channel i broadcast
       * over the group's lanes */
      for (int64_t kx = 0; kx < KW; kx++) {
        V wq[KN_DWN_QMAX];
#pragma GCC unroll 8
        for (int i = 0; i < Q; i++) wq[i] = v_ld(wk + (kx * Q + i) * cp);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
          int64_t j = p * S + kx * D;
          if (EDGE && (uint64_t)(ix0 + j) >= (uint64_t)B->iw) continue; /* adds 0 */
          V v = v_keep(TAIL ? v_ldm(xr + j * c, m) : v_ld(xr + j * c));
#pragma GCC unroll 8
          for (int i = 0; i < Q; i++) acc[p] = v_fma(v_perm(v, B->idx[i]), wq[i], acc[p]);
        }
      }
    } else {
      for (int64_t kx = 0; kx < KW; kx++) {
        V wv = v_ld(wk + kx * cp);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
          int64_t j = p * S + kx * D;
          V v = EDGE && (uint64_t)(ix0 + j) >= (uint64_t)B->iw ? v_set(0.0f)
                : TAIL                                      ? v_ldm(xr + j * c, m)
                                                            : v_ld(xr + j * c);
          acc[p] = v_fma(SCALE ? v_mul(v, sv) : v, wv, acc[p]);
        }
      }
    }
  }
  int64_t o = (oy * B->ow + ox0) * c + c0;
#pragma GCC unroll 8
  for (int p = 0; p < P; p++)
    if (!EDGE || p < np) dwn_out(B, acc[p], o + p * c, m, TAIL);
}

/* Rows [oy0, oy1): blocks of P pixels, the interior ones unmasked (a
 * row's last block may compute pixels past its end and drop them).  The
 * channel loop is inside the pixel block, so the block's input pixels are
 * read front to back (whole lines, the next block's pixels follow) and
 * the weights stream from L1; with the channels outside, a large image's
 * pixels (c = 1024: 4 KiB apart) would fall into a few L1 sets and a
 * channel vector would touch every page of the image.  Border blocks
 * (pixels in the padding or past the row's end) and every channel tail
 * take the masked code (EDGE). */
DWN_INLINE void dwn_rows(const dwn_img *B0, int64_t oy0, int64_t oy1, const int P,
                         const int64_t KW, const int64_t S, const int64_t D, const int SPEC,
                         const int SCALE, const int Q) {
  /* a local copy: the output stores (float, and V may alias anything)
   * would otherwise make the compiler reload every field after each one */
  const dwn_img L = *B0, *B = &L;
  const int64_t oxa = B->oxa, oxb = B->oxb, ow = B->ow;
  /* channel groups of B->cg floats outermost (all channels but on small
   * maps, see DWN_ENTRY) */
  for (int64_t g0 = 0; g0 < B->c; g0 += B->cg) {
    const int64_t g1 = g0 + B->cg < B->c ? g0 + B->cg : B->c;
    const int64_t gfull = g1 < B->cfull ? g1 : B->cfull;
    for (int64_t oy = oy0; oy < oy1; oy++) {
      /* rows of the kernel inside [0, h) */
      int64_t ky0, ky1;
      nhwc_taps_inside(oy * B->sh - B->pt, B->h, B->kh, B->dh, &ky0, &ky1);
      for (int64_t ox = 0; ox < ow; ox += P) {
        int64_t np = ow - ox < P ? ow - ox : P;
        /* the masked code serves the border blocks and every channel tail:
         * one call site per EDGE, each inlined once (compile time) */
        int64_t c0 = g0;
        if (ox >= oxa && ox + P <= oxb)
          for (; c0 < gfull; c0 += VN)
            dwn_block(B, oy, ky0, ky1, ox, P, c0, m_tail(VN), P, KW, S, D, SPEC, 0, SCALE, Q);
        for (; c0 < g1; c0 += VN)
          dwn_block(B, oy, ky0, ky1, ox, np, c0, c0 < B->cfull ? m_tail(VN) : B->mt, P, KW,
                    S, D, SPEC, 1, SCALE, Q);
      }
    }
  }
}

typedef void (*dwn_rows_fn)(const dwn_img *B, int64_t oy0, int64_t oy1);

/* Channels per group.  With every channel of a block at once, an input
 * line is evicted before the next output rows need it again (their window
 * of kh input rows holds kh * w * c floats), so each is read from L2 or
 * further about kh times.  When the window of a group of whole channel
 * vectors fits in `budget` bytes of L1 (kn_dwn_args.group_bytes, half the
 * L1d), the groups go outermost and each line is read once (isolated, 1
 * thread, 48 KiB L1d: 3x3 on 7x7x960 11.0 -> 7.4 us, 5x5 on 14x14x672
 * 78 -> 63).  Not where the pixel stride puts one vector's lines into too
 * few L1 sets (c a multiple of 1024 floats: every pixel in one set; 64
 * sets of 64-byte lines, the L1d of Zen 4/5 and recent Intel cores, a
 * geometry kn_caches does not describe). */
static int64_t dwn_group(const kn_conv2d *g, int64_t oy0, int64_t oy1, int64_t budget) {
  int64_t c = g->c, rows = (oy1 - oy0 - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  int64_t win = (g->kh - 1) * g->dh + g->sh;
  if (rows > win) rows = win;
  if (rows > g->h) rows = g->h;
  int64_t px = rows * g->w; /* input pixels of the window */
  int64_t vec_bytes = px * VN * (int64_t)sizeof(float);
  if (vec_bytes <= 0 || vec_bytes > budget) return c;
  /* L1 sets a vector's pixels fall into: 64 sets of 64-byte lines */
  int64_t lines = c * (int64_t)sizeof(float) / 64 % 64, gcd = 64;
  for (int64_t a = lines; a;) {
    int64_t t = gcd % a;
    gcd = a;
    a = t;
  }
  if (px > 64 / gcd * 8) return c;
  int64_t cg = budget / vec_bytes * VN;
  return cg < c ? cg : c;
}

/* One function per geometry: KW, S, D are constants in the specialised
 * ones and B's fields in the generic one, which also serves every call
 * with an input scale (rare for depthwise convs: a squeeze-excitation
 * scale feeds the projection after them), so that the specialised code
 * exists once (clang with ASan and UBSan took minutes over more copies). */
#define DWN_FN(NAME, P, KW, S, D, SPEC, SCALE, Q)                                  \
  static void NAME(const dwn_img *B, int64_t oy0, int64_t oy1) {                  \
    dwn_rows(B, oy0, oy1, P, KW, S, D, SPEC, SCALE, Q);                           \
  }

DWN_FN(dwn_generic, 4, B->kw, B->sw, B->dw, 0, 0, 1)
DWN_FN(dwn_generic_scaled, 4, B->kw, B->sw, B->dw, 0, 1, 1)
/* narrow groups: generic geometry, DWN_P pixels a block */
DWN_FN(dwn_q2, DWN_P, B->kw, B->sw, B->dw, 0, 0, 2)
DWN_FN(dwn_q4, DWN_P, B->kw, B->sw, B->dw, 0, 0, 4)
DWN_FN(dwn_q8, DWN_P, B->kw, B->sw, B->dw, 0, 0, 8)
#ifndef DWN_GENERIC_ONLY
DWN_FN(dwn_k3s1, DWN_P, 3, 1, 1, 1, 0, 1)
DWN_FN(dwn_k3s2, DWN_P, 3, 2, 1, 1, 0, 1)
DWN_FN(dwn_k5s1, DWN_P, 5, 1, 1, 1, 0, 1)
DWN_FN(dwn_k5s2, DWN_P, 5, 2, 1, 1, 0, 1)
#endif

void DWN_ENTRY(const kn_dwn_args *a, int64_t b, int64_t oy0, int64_t oy1) {
  const kn_conv2d *g = a->g;
  dwn_rows_fn fn = a->s ? dwn_generic_scaled : dwn_generic;
  if (a->q > 1) fn = a->q == 2 ? dwn_q2 : a->q == 4 ? dwn_q4 : dwn_q8;
#ifndef DWN_GENERIC_ONLY
  if (!a->s && a->q == 1 && g->dw == 1 && (g->sw == 1 || g->sw == 2) && (g->kw == 3 || g->kw == 5)) {
    if (g->kw == 3) fn = g->sw == 1 ? dwn_k3s1 : dwn_k3s2;
    else fn = g->sw == 1 ? dwn_k5s1 : dwn_k5s2;
  }
#endif
  const int64_t c = g->c;
  dwn_img B;
  B.c = c, B.cfull = c / VN * VN, B.cp = a->cp, B.h = g->h, B.iw = g->w, B.oh = g->oh;
  B.ow = g->ow, B.kh = g->kh, B.kw = g->kw, B.sh = g->sh, B.sw = g->sw, B.dh = g->dh;
  B.dw = g->dw, B.pt = g->pt, B.pl = g->pl;
  B.mt = m_tail(c % VN);
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
  B.cg = dwn_group(g, oy0, oy1, a->group_bytes);
  B.x = a->x + b * g->h * g->w * c;
  B.y = a->y + b * g->oh * g->ow * c;
  B.res = a->res ? a->res + b * g->oh * g->ow * c : NULL;
  B.w = a->w, B.bias = a->bias, B.s = a->s ? a->s + b * c : NULL;
  for (int i = 0; i < KN_DWN_QMAX; i++) B.idx[i] = vi_group((int)a->q, i < a->q ? i : 0);
  fn(&B, oy0, oy1);
}
