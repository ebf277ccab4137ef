/*
 * The depthwise convolution row kernels (f32-dwconv.h), written once
 * against a small vector interface and instantiated per ISA:
 * f32-dwconv-avx512.c (16 lanes), f32-dwconv-avx2.c (8) and
 * f32-dwconv-portable.c (4, plain C).  The including file defines:
 *
 *   V, VN             float vector and its lanes
 *   M                 lane mask of loads and stores; VM: of comparisons
 *   DW_ENTRY          name of the kn_dw_rows_fn to define
 *   m_lanes(lo, hi)   lanes j with lo <= j < hi (any int64 bounds)
 *   m_and, m_all, m_none
 *   v_ld(p), v_st(p, v)   unaligned load / store of VN floats
 *   v_ldm(p, m)       lane j = p[j] where m, else 0; lanes outside m are
 *                     never read (p may point outside the tensor there)
 *   v_ld2(p, m0, m1)  lane j = p[2j]: the even elements of p[0..2VN);
 *                     m0 masks p[0..VN), m1 p[VN..2VN); v_ld2u(p) unmasked
 *   v_ldg(p, s, m)    lane j = p[j*s] where m, else 0 (a gather)
 *   v_stm(p, v, m)    store the lanes in m
 *   v_set v_add v_fma(a, b, c) = a*b + c, v_max v_min (x86 operand order:
 *                     the second operand when either is NaN)
 *
 * Scheme (XNNPACK's CHW depthwise kernels work the same way): the output
 * is computed in blocks of R rows x VN columns straight from the NCHW
 * input.  For each input row the block reads, and each kernel column kx,
 * one vector of input is loaded (masked at the left and right borders,
 * zero for rows in the top and bottom padding) and multiplied into every
 * output row of the block it feeds, with the weights broadcast once per
 * plane and kept in registers.  A 3x3 stride-1 block of 4 rows thus does
 * 36 FMAs on 18 loads (6 rows x 3 columns) instead of 36 on 36: Zen 4/5
 * and Skylake-X issue 2 FMAs and 2 vector loads a cycle, so the FMAs set
 * the pace.  Stride 2 loads 2 VN floats per tap and keeps the even ones
 * (one permute).  Bias starts the accumulators; the residual and the
 * activations of kn_f32_dwconv_inline_act (Relu, Clip: one min and one
 * max) are applied in registers just before the store.  No strip copy,
 * no scratch, no second pass.
 *
 * Specialised (unrolled, weights in registers): 3x3, stride 1 and 2
 * (equal in both dims), dilation 1 (why not 5x5: see DW_SPEC below).  Everything else (other kernel
 * sizes, strides, dilations) takes the generic loop: one output row at a
 * time, weights broadcast per tap, strides above 2 by gathers.
 *
 * Tap order: every output element is bias, then ky ascending, kx
 * ascending, one FMA each (zero-masked padding rows included, so a
 * block's rows are computed the same whichever block they fall in).
 */
#ifndef DW_ENTRY
#error "define the vector interface before including f32-dwconv-impl.h"
#endif

#include <math.h>

#include "kernels/conv/f32-dwconv.h"

#define DW_INLINE static inline __attribute__((always_inline))

/* The activation in the loop: min(hi, max(lo, x)), which is Relu (0,
 * +inf), Clip, and no activation (-inf, +inf), with the operand order of
 * src/kernels/eltwise's (NaN stays NaN). */
typedef struct dw_actv {
  V lo, hi;
} dw_actv;

DW_INLINE V dw_act(const dw_actv *p, V x) { return v_min(p->hi, v_max(p->lo, x)); }

static dw_actv dw_actv_of(const kn_act_params *a) {
  dw_actv v = {v_set(-INFINITY), v_set(INFINITY)};
  if (a->act == KN_ACT_RELU) v.lo = v_set(0.0f);
  if (a->act == KN_ACT_CLIP) v.lo = v_set(a->lo), v.hi = v_set(a->hi);
  return v;
}

/* Output vector: (+res) act (+res), store of the lanes in om (FULL: all). */
DW_INLINE void dw_store(const dw_actv *p, V v, const float *res, bool res_after,
                        float *y, M om, const int FULL) {
  if (res && !res_after) v = v_add(v, FULL ? v_ld(res) : v_ldm(res, om));
  v = dw_act(p, v);
  if (res && res_after) v = v_add(v, FULL ? v_ld(res) : v_ldm(res, om));
  if (FULL) v_st(y, v);
  else v_stm(y, v, om);
}

/* Bounds of the specialised shapes (fixed-size arrays, which the
 * compiler keeps in registers once the loops over them are unrolled). */
#define DW_KMAX 5  /* kernel size */
#define DW_RMAX 4  /* rows per block */
#define DW_NRMAX 16 /* input rows per block: (R - 1) * S + K */

/* Column masks of every vector the table holds (more are computed when
 * needed: only planes wider than DW_VTAB vectors have them). */
#define DW_VTAB 16

/* One call's constants, and the current plane. */
typedef struct dw_plane {
  const float *x; /* the input plane */
  const float *r; /* the residual plane or NULL */
  float *y;       /* the output plane */
  int64_t h, w, oh, ow, pt, pl;
  int64_t nv, va, vb; /* vectors per output row; interior ones: [va, vb) */
  bool res_after;
  M cm[DW_VTAB][2][DW_KMAX]; /* vector v, tap kx: masks of its 1 or 2 loads */
} dw_plane;

/* Masks of tap kx of output vector v: lanes inside [0, w) of its loads. */
DW_INLINE void dw_colmask(const dw_plane *P, int64_t v, int kx, const int S, M *m0, M *m1) {
  int64_t base = v * VN * S + kx - P->pl;
  *m0 = m_lanes(-base, P->w - base);
  *m1 = S == 2 ? m_lanes(-base - VN, P->w - base - VN) : m_none();
}

/* Output vector v of rows [oy, oy + R) of a plane.  EDGE: some of its
 * loads or its store cross the plane's border (then they are masked). */
DW_INLINE void dw_vec(const dw_plane *P, const V *wv, V vb, const dw_actv *ap,
                      const float *const *rows, const M *rm, int64_t oy, int64_t nr,
                      int64_t v, const int KH, const int KW, const int S, const int R,
                      const int RC, const int EDGE) {
  const int NR = (R - 1) * S + KH;
  const int64_t x0 = v * VN;
  V acc[DW_RMAX];
#pragma GCC unroll 8
  for (int i = 0; i < R; i++) acc[i] = vb;
  M cm0[DW_KMAX], cm1[DW_KMAX];
  if (EDGE) {
    if (v < DW_VTAB) {
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; kx++) cm0[kx] = P->cm[v][0][kx], cm1[kx] = P->cm[v][1][kx];
    } else {
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; kx++) dw_colmask(P, v, kx, S, &cm0[kx], &cm1[kx]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NR; t++) {
#pragma GCC unroll 8
    for (int kx = 0; kx < KW; kx++) {
      const float *p = rows[t] + x0 * S + kx - P->pl;
      V in;
      if (EDGE) {
        M m0 = RC ? m_and(cm0[kx], rm[t]) : cm0[kx];
        M m1 = RC ? m_and(cm1[kx], rm[t]) : cm1[kx];
        in = S == 1 ? v_ldm(p, m0) : v_ld2(p, m0, m1);
      } else if (RC) {
        in = S == 1 ? v_ldm(p, rm[t]) : v_ld2(p, rm[t], rm[t]);
      } else {
        in = S == 1 ? v_ld(p) : v_ld2u(p);
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; i++) {
        int ky = t - i * S;
        if (ky >= 0 && ky < KH) acc[i] = v_fma(in, wv[ky * KW + kx], acc[i]);
      }
    }
  }
  M om = EDGE ? m_lanes(0, P->ow - x0) : m_all();
#pragma GCC unroll 8
  for (int i = 0; i < R; i++) {
    if (i >= nr) break;
    int64_t o = (oy + i) * P->ow + x0;
    dw_store(ap, acc[i], P->r ? P->r + o : NULL, P->res_after, P->y + o, om, !EDGE);
  }
}

/* Output rows [oy, oy + nr) of a plane, nr <= R, kernel KH x KW, stride S,
 * dilation 1, computed as a block of R rows (the rows past nr are
 * computed and dropped: a plane's last block costs no other code).  RC:
 * some input row of the block is outside the plane (then its loads are
 * masked to zero); without RC every row is inside. */
DW_INLINE void dw_block(const dw_plane *P, const V *wv, V vb, const dw_actv *ap, int64_t oy,
                        int64_t nr, const int KH, const int KW, const int S, const int R,
                        const int RC) {
  const int NR = (R - 1) * S + KH; /* input rows the block reads */
  const float *rows[DW_NRMAX];
  M rm[DW_NRMAX];
  int64_t iy0 = oy * S - P->pt;
#pragma GCC unroll 16
  for (int t = 0; t < NR; t++) {
    int64_t iy = iy0 + t;
    if (RC) {
      bool ok = iy >= 0 && iy < P->h;
      rows[t] = P->x + (ok ? iy : 0) * P->w;
      rm[t] = ok ? m_all() : m_none();
    } else {
      rows[t] = P->x + iy * P->w;
      rm[t] = m_all();
    }
  }
  /* one call site per EDGE: each is inlined once (compile time) */
  for (int64_t v = 0; v < P->nv; v++) {
    if (v >= P->va && v < P->vb) dw_vec(P, wv, vb, ap, rows, rm, oy, nr, v, KH, KW, S, R, RC, 0);
    else dw_vec(P, wv, vb, ap, rows, rm, oy, nr, v, KH, KW, S, R, RC, 1);
  }
}

/* Planes [p0, p1), rows [oy0, oy1), specialised kernel. */
DW_INLINE void dw_planes(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0, int64_t oy1,
                         const int KH, const int KW, const int S, const int R) {
  const kn_conv2d *g = a->g;
  dw_actv ap = dw_actv_of(&a->act);
  const int NR = (R - 1) * S + KH;
  /* (fields one by one: an initializer would zero the mask table too) */
  dw_plane P;
  P.h = g->h, P.w = g->w, P.oh = g->oh, P.ow = g->ow, P.pt = g->pt, P.pl = g->pl;
  P.res_after = a->res_after;
  /* Interior vectors: loads inside [0, w) (S = 2 loads 2 VN floats), a
   * whole vector stored.  Both conditions are monotone in v. */
  P.nv = (g->ow + VN - 1) / VN;
  P.va = (g->pl + VN * S - 1) / (VN * S);
  int64_t room = g->w - (KW - 1) + g->pl - S * VN; /* largest x0 * S */
  int64_t last = room < 0 ? -1 : room / (VN * S);
  if (last > (g->ow - VN) / VN) last = g->ow < VN ? -1 : (g->ow - VN) / VN;
  P.vb = last + 1 > P.va ? last + 1 : P.va;
  for (int64_t v = 0; v < P.nv && v < DW_VTAB; v++)
    for (int kx = 0; kx < KW; kx++) dw_colmask(&P, v, kx, S, &P.cm[v][0][kx], &P.cm[v][1][kx]);
  for (int64_t p = p0; p < p1; p++) {
    int64_t ch = p % g->c;
    P.x = a->x + p * g->h * g->w;
    P.y = a->y + p * g->oh * g->ow;
    P.r = a->res ? a->res + p * g->oh * g->ow : NULL;
    V wv[DW_KMAX * DW_KMAX];
    const float *wt = a->w + ch * KH * KW;
#pragma GCC unroll 32
    for (int t = 0; t < KH * KW; t++) wv[t] = v_set(wt[t]);
    V vb = v_set(a->bias ? a->bias[ch] : 0.0f);
    for (int64_t oy = oy0; oy < oy1; oy += R) {
      int64_t iy0 = oy * S - g->pt, nr = oy1 - oy < R ? oy1 - oy : R;
      if (iy0 >= 0 && iy0 + NR <= g->h) dw_block(&P, wv, vb, &ap, oy, nr, KH, KW, S, R, 0);
      else dw_block(&P, wv, vb, &ap, oy, nr, KH, KW, S, R, 1);
    }
  }
}

/* Any geometry: one output row at a time, taps in (ky, kx) order with
 * rows in the padding skipped. */
static void dw_generic(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0, int64_t oy1) {
  const kn_conv2d *g = a->g;
  dw_actv ap = dw_actv_of(&a->act);
  const int64_t h = g->h, w = g->w, ow = g->ow, sw = g->sw;
  for (int64_t p = p0; p < p1; p++) {
    int64_t ch = p % g->c;
    const float *xp = a->x + p * h * w, *wt = a->w + ch * g->kh * g->kw;
    V vb = v_set(a->bias ? a->bias[ch] : 0.0f);
    for (int64_t oy = oy0; oy < oy1; oy++) {
      for (int64_t x0 = 0; x0 < ow; x0 += VN) {
        V acc = vb;
        for (int64_t ky = 0; ky < g->kh; ky++) {
          int64_t iy = oy * g->sh - g->pt + ky * g->dh;
          if (iy < 0 || iy >= h) continue;
          const float *row = xp + iy * w;
          for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t base = x0 * sw + kx * g->dw - g->pl;
            V in;
            if (sw == 1) {
              in = v_ldm(row + base, m_lanes(-base, w - base));
            } else if (sw == 2) {
              in = v_ld2(row + base, m_lanes(-base, w - base),
                         m_lanes(-base - VN, w - base - VN));
            } else {
              /* lanes j with 0 <= base + j*sw < w */
              int64_t lo = base < 0 ? (-base + sw - 1) / sw : 0;
              int64_t hi = w - base <= 0 ? 0 : (w - base + sw - 1) / sw;
              in = v_ldg(row + base, sw, m_lanes(lo, hi));
            }
            acc = v_fma(in, v_set(wt[ky * g->kw + kx]), acc);
          }
        }
        int64_t o = p * g->oh * ow + oy * ow + x0;
        dw_store(&ap, acc, a->res ? a->res + o : NULL, a->res_after, a->y + o,
                 m_lanes(0, ow - x0), 0);
      }
    }
  }
}

/* The specialised kernels. */
#define DW_SPEC(KH, KW, S, R)                                                           \
  static void dw_##KH##x##KW##s##S(const kn_dw_args *a, int64_t p0, int64_t p1,         \
                                   int64_t oy0, int64_t oy1) {                          \
    dw_planes(a, p0, p1, oy0, oy1, KH, KW, S, R);                                       \
  }

/* R: 4 rows per block for every shape.  3x3: 9 weights + 4 accumulators
 * + the loaded vectors fit the 16 ymm / 32 zmm registers.  Only 3x3 is
 * specialised: this NCHW kernel is the fallback since channels-last
 * regions (dwconv-nhwc.c serves every depthwise conv with constant
 * weights), and the 5x5 specialisations were 70% of this file's compile
 * time under ASan + UBSan (34 -> 10 s with clang 14); 5x5 takes the
 * generic code. */
#ifndef DW_GENERIC_ONLY
DW_SPEC(3, 3, 1, 4)
DW_SPEC(3, 3, 2, 4)
#endif

void DW_ENTRY(const kn_dw_args *a, int64_t p0, int64_t p1, int64_t oy0, int64_t oy1) {
  kn_dw_rows_fn spec = dw_generic;
#ifndef DW_GENERIC_ONLY
  const kn_conv2d *g = a->g;
  if (g->dh == 1 && g->dw == 1 && g->sh == g->sw && g->kh == g->kw && g->sw <= 2) {
    if (g->kh == 3) spec = g->sw == 1 ? dw_3x3s1 : dw_3x3s2;
  }
#endif
  spec(a, p0, p1, oy0, oy1);
}
