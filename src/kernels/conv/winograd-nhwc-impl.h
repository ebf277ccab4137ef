/*
 * The channels-last Winograd F(4x4, 3x3) transforms (winograd-nhwc.h),
 * written once against a small vector interface and instantiated per ISA
 * by f32-winograd-nhwc-avx512.c (VL = 16), -avx2.c (8) and -portable.c (4).
 * One vector holds VL channels of one tile position, so both transforms
 * are plain vector arithmetic; the channel tail uses masked loads/stores.
 * The including file defines:
 *
 *   V, VL, KN_WGN_TABLE (the kn_wgn_ukernels table to define)
 *   v_zero v_set1 v_ld v_st v_add v_sub v_mul v_min v_max
 *   v_fma(a, b, c) = a * b + c, v_fnma(a, b, c) = c - a * b
 *   v_ldn(p, n) (first n lanes from p, zeros after), v_stn(p, v, n)
 *   WGN_MR        rows of the ISA's GEMM micro-tile (kn_sgemm_mr)
 *   WGN_MRP       WGN_MR rounded up to what wgn_store_panel transposes
 *   wgn_store_panel(t, dst, n)  dst[l * WGN_MR + r] = t[r * VL + l] for
 *                 l < n, r < WGN_MR: one staged [MRP][VL] block into the
 *                 packed-A panel's [channel][MR] order
 *
 * The matrices are Lavin & Gray's, as in winograd-impl.h (the same
 * bt6/at6 arithmetic, so both layouts round alike):
 *   B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0  4 -4 -1 1 0;
 *          0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0  4  0 -5 0 1]
 *   A^T = [1 1  1 1  1 0;  0 1 -1 2 -2 0;  0 1 1 4 4 0;  0 1 -1 8 -8 1]
 */
#ifndef KN_WGN_TABLE
#error "define the vector interface before including winograd-nhwc-impl.h"
#endif

#define WGN_INLINE static inline __attribute__((always_inline))
#define NPOS_ 36

/* Which rows (bit a of *rm) and columns (*cm) of a span x span window at
 * the tile's (iy0, ix0) lie inside the h x w image. */
WGN_INLINE void window_masks(const kn_wgn_tile *t, int span, int64_t h, int64_t w,
                             unsigned *rm, unsigned *cm) {
  *rm = *cm = 0;
  for (int a = 0; a < span; a++) {
    if (t->iy0 + a >= 0 && t->iy0 + a < h) *rm |= 1u << a;
    if (t->ix0 + a >= 0 && t->ix0 + a < w) *cm |= 1u << a;
  }
}

/* One output vector of a tile: bias, the epilogue (residual before or after
 * the clamp) and the store, at y + off (res + off). */
WGN_INLINE void store_out(V v, V bv, V lo, V hi, const float *res, float *y, int64_t off,
                          const kn_wgn_epi *e, int n, bool full) {
  v = v_add(v, bv);
  if (res && e->res_first) v = v_add(v, full ? v_ld(res + off) : v_ldn(res + off, n));
  if (e->clamp) v = v_min(v_max(v, lo), hi);
  if (res && !e->res_first) v = v_add(v, full ? v_ld(res + off) : v_ldn(res + off, n));
  if (full) v_st(y + off, v);
  else v_stn(y + off, v, n);
}

/* out[i] = (B^T d)[i] for one 6-vector d (a row or a column of a tile). */
WGN_INLINE void bt6(const V d[6], V out[6]) {
  const V four = v_set1(4.0f), five = v_set1(5.0f), two = v_set1(2.0f);
  V s12 = v_add(d[1], d[2]), s34 = v_add(d[3], d[4]);
  V d12 = v_sub(d[1], d[2]), d43 = v_sub(d[4], d[3]);
  V d42 = v_sub(d[4], d[2]), d31 = v_sub(d[3], d[1]);
  out[0] = v_fnma(five, d[2], v_fma(four, d[0], d[4]));
  out[1] = v_fnma(four, s12, s34);
  out[2] = v_fma(four, d12, d43);
  out[3] = v_fma(two, d31, d42);
  out[4] = v_fnma(two, d31, d42);
  out[5] = v_fnma(five, d[3], v_fma(four, d[1], d[5]));
}

/* out[i] = (A^T s)[i] for one 6-vector s. */
WGN_INLINE void at6(const V s[6], V out[4]) {
  const V two = v_set1(2.0f), four = v_set1(4.0f), eight = v_set1(8.0f);
  V p12 = v_add(s[1], s[2]), m12 = v_sub(s[1], s[2]);
  V p34 = v_add(s[3], s[4]), m34 = v_sub(s[3], s[4]);
  out[0] = v_add(v_add(s[0], p12), p34);
  out[1] = v_fma(two, m34, m12);
  out[2] = v_fma(four, p34, p12);
  out[3] = v_add(v_fma(eight, m34, m12), s[5]);
}

/* Tile r's window (zeros outside, channels scaled by s) for one slice of
 * n <= VL channels: rows first, then the columns; the 36 results go to
 * t[xi * WGN_MRP * VL] (row r of each xi's staging block). */
WGN_INLINE void input_tile(const float *x, int64_t off0, const float *s, int64_t w, int64_t c,
                           unsigned rm, unsigned cm, int n, bool full, float *t) {
  V sv = s ? (full ? v_ld(s) : v_ldn(s, n)) : v_zero();
  V r[6][6];
  for (int a = 0; a < 6; a++) {
    V d[6];
    for (int b = 0; b < 6; b++) {
      if ((rm >> a & 1) && (cm >> b & 1)) {
        const float *p = x + (off0 + (a * w + b) * c); /* >= 0 when inside */
        d[b] = full ? v_ld(p) : v_ldn(p, n);
        if (s) d[b] = v_mul(d[b], sv);
      } else {
        d[b] = v_zero();
      }
    }
    bt6(d, r[a]);
  }
  for (int b = 0; b < 6; b++) {
    V col[6], o[6];
    for (int a = 0; a < 6; a++) col[a] = r[a][b];
    bt6(col, o);
    for (int a = 0; a < 6; a++) v_st(t + (a * 6 + b) * WGN_MRP * VL, o[a]);
  }
}

/* The input transform of one row panel of `rows` <= MR tiles, straight
 * into kn_sgemm's packed-A layout: per slice of VL channels, each tile's
 * 36 vectors are staged as rows of a [MRP][VL] block per xi (in L1), and
 * each block is transposed into the panel's [channel][MR] order (rows past
 * `rows` zero, as the GEMM's packing pads). */
static void wgn_input(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                      const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs) {
  float stage[NPOS_ * WGN_MRP * VL] __attribute__((aligned(64)));
  unsigned rm[WGN_MR], cm[WGN_MR];
  int64_t off0[WGN_MR];
  for (int r = 0; r < rows; r++) {
    window_masks(&tiles[r], 6, h, w, &rm[r], &cm[r]);
    /* the window's top left may lie outside x: only offsets of positions
     * inside are ever turned into pointers */
    off0[r] = tiles[r].xb + (tiles[r].iy0 * w + tiles[r].ix0) * c;
  }
  for (int xi = 0; xi < NPOS_; xi++)
    for (int r = rows; r < WGN_MRP; r++) v_st(stage + (xi * WGN_MRP + r) * VL, v_zero());
  for (int64_t ci = 0; ci < c; ci += VL) {
    int n = (int)(c - ci < VL ? c - ci : VL);
    bool full = n == VL;
    for (int r = 0; r < rows; r++) {
      const float *sr = s ? s + tiles[r].sb + ci : NULL;
      float *t = stage + r * VL;
      if (full && rm[r] == 0x3f && cm[r] == 0x3f) /* interior: no tests inside */
        input_tile(x, off0[r] + ci, sr, w, c, 0x3f, 0x3f, VL, true, t);
      else if (full)
        input_tile(x, off0[r] + ci, sr, w, c, rm[r], cm[r], VL, true, t);
      else
        input_tile(x, off0[r] + ci, sr, w, c, rm[r], cm[r], n, false, t);
    }
    for (int xi = 0; xi < NPOS_; xi++)
      wgn_store_panel(stage + xi * WGN_MRP * VL, dst + xi * xs + ci * WGN_MR, n);
  }
}

/* The input transform of `rows` tiles into row-major rows, the A of the
 * bf16 products (hgemm rounds it while packing): (B^T d B)_xi of tile r,
 * channel ci at dst[xi * xs + r * ldv + ci], ci < c.  Each slice is staged
 * as input_tile writes it, then copied out (an L1 copy, 1/m of the
 * products' work). */
static void wgn_input_rows(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                           const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs,
                           int64_t ldv) {
  float stage[NPOS_ * WGN_MRP * VL] __attribute__((aligned(64)));
  for (int r = 0; r < rows; r++) {
    unsigned rm, cm;
    window_masks(&tiles[r], 6, h, w, &rm, &cm);
    int64_t off0 = tiles[r].xb + (tiles[r].iy0 * w + tiles[r].ix0) * c;
    for (int64_t ci = 0; ci < c; ci += VL) {
      int n = (int)(c - ci < VL ? c - ci : VL);
      const float *sr = s ? s + tiles[r].sb + ci : NULL;
      float *d = dst + r * ldv + ci;
      if (n == VL && rm == 0x3f && cm == 0x3f)
        input_tile(x, off0 + ci, sr, w, c, 0x3f, 0x3f, VL, true, stage);
      else
        input_tile(x, off0 + ci, sr, w, c, rm, cm, n, n == VL, stage);
      if (n == VL)
        for (int xi = 0; xi < NPOS_; xi++) v_st(d + xi * xs, v_ld(stage + xi * WGN_MRP * VL));
      else
        for (int xi = 0; xi < NPOS_; xi++) v_stn(d + xi * xs, v_ld(stage + xi * WGN_MRP * VL), n);
    }
  }
}

WGN_INLINE void output_slice(const float *m, int64_t xs, const float *bias, float *y,
                             const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                             const kn_wgn_epi *e, int n, bool full) {
  V t[4][6], o[4][4];
  for (int b = 0; b < 6; b++) {
    V s[6], q[4];
    for (int a = 0; a < 6; a++) s[a] = v_ld(m + (a * 6 + b) * xs);
    at6(s, q);
    for (int a = 0; a < 4; a++) t[a][b] = q[a];
  }
  V bv = bias ? (full ? v_ld(bias) : v_ldn(bias, n)) : v_zero();
  V lo = v_set1(e->lo), hi = v_set1(e->hi);
  for (int a = 0; a < nrows; a++) {
    at6(t[a], o[a]);
    for (int b = 0; b < ncols; b++)
      store_out(o[a][b], bv, lo, hi, res, y, a * ys + b * ps, e, n, full);
  }
}

/* ---- F(2x2, 3x3) (the bf16 products' better-conditioned variant) ----------
 *   B^T = [1 0 -1 0;  0 1 1 0;  0 -1 1 0;  0 1 0 -1]
 *   A^T = [1 1 1 0;  0 1 -1 -1]
 * Entries 0 and +-1 only: the transformed input is a sum of at most four
 * inputs and the output of at most nine products' sums, so rounding the
 * transformed operands to bf16 costs about what rounding x and w does. */

/* out[i] = (B^T d)[i] for one 4-vector d. */
WGN_INLINE void bt4(const V d[4], V out[4]) {
  out[0] = v_sub(d[0], d[2]);
  out[1] = v_add(d[1], d[2]);
  out[2] = v_sub(d[2], d[1]);
  out[3] = v_sub(d[1], d[3]);
}

/* out[i] = (A^T s)[i] for one 4-vector s. */
WGN_INLINE void at4(const V s[4], V out[2]) {
  out[0] = v_add(v_add(s[0], s[1]), s[2]);
  out[1] = v_sub(v_sub(s[1], s[2]), s[3]);
}

/* input_tile for F(2,3): a 4x4 window, the 16 results of its n channels
 * straight to t[xi * ts] (no staging: the rows are the products' A). */
WGN_INLINE void input_tile23(const float *x, int64_t off0, const float *s, int64_t w, int64_t c,
                             unsigned rm, unsigned cm, int n, bool full, float *t, int64_t ts) {
  V sv = s ? (full ? v_ld(s) : v_ldn(s, n)) : v_zero();
  V r[4][4];
  for (int a = 0; a < 4; a++) {
    V d[4];
    for (int b = 0; b < 4; b++) {
      if ((rm >> a & 1) && (cm >> b & 1)) {
        const float *p = x + (off0 + (a * w + b) * c); /* >= 0 when inside */
        d[b] = full ? v_ld(p) : v_ldn(p, n);
        if (s) d[b] = v_mul(d[b], sv);
      } else {
        d[b] = v_zero();
      }
    }
    bt4(d, r[a]);
  }
  for (int b = 0; b < 4; b++) {
    V col[4], o[4];
    for (int a = 0; a < 4; a++) col[a] = r[a][b];
    bt4(col, o);
    for (int a = 0; a < 4; a++) {
      if (full) v_st(t + (a * 4 + b) * ts, o[a]);
      else v_stn(t + (a * 4 + b) * ts, o[a], n);
    }
  }
}

/* wgn_input_rows for F(2,3): 16 positions, tile r's 4x4 window at
 * (iy0, ix0). */
static void wgn_input_rows23(const float *x, const float *s, int64_t h, int64_t w, int64_t c,
                             const kn_wgn_tile *tiles, int rows, float *dst, int64_t xs,
                             int64_t ldv) {
  for (int r = 0; r < rows; r++) {
    unsigned rm, cm;
    window_masks(&tiles[r], 4, h, w, &rm, &cm);
    int64_t off0 = tiles[r].xb + (tiles[r].iy0 * w + tiles[r].ix0) * c;
    for (int64_t ci = 0; ci < c; ci += VL) {
      int n = (int)(c - ci < VL ? c - ci : VL);
      const float *sr = s ? s + tiles[r].sb + ci : NULL;
      float *d = dst + r * ldv + ci;
      if (n == VL && rm == 0xf && cm == 0xf) /* interior: no tests inside */
        input_tile23(x, off0 + ci, sr, w, c, 0xf, 0xf, VL, true, d, xs);
      else
        input_tile23(x, off0 + ci, sr, w, c, rm, cm, n, n == VL, d, xs);
    }
  }
}

WGN_INLINE void output_slice23(const float *m, int64_t xs, const float *bias, float *y,
                               const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                               const kn_wgn_epi *e, int n, bool full) {
  V t[2][4], o[2][2];
  for (int b = 0; b < 4; b++) {
    V s4[4], q[2];
    for (int a = 0; a < 4; a++) s4[a] = v_ld(m + (a * 4 + b) * xs);
    at4(s4, q);
    t[0][b] = q[0];
    t[1][b] = q[1];
  }
  V bv = bias ? (full ? v_ld(bias) : v_ldn(bias, n)) : v_zero();
  V lo = v_set1(e->lo), hi = v_set1(e->hi);
  for (int a = 0; a < nrows; a++) {
    at4(t[a], o[a]);
    for (int b = 0; b < ncols; b++)
      store_out(o[a][b], bv, lo, hi, res, y, a * ys + b * ps, e, n, full);
  }
}

/* A^T m A of one tile for nch channels, slice by slice: F(4,3) (tile 4)
 * or F(2,3) (tile 2). */
WGN_INLINE void output_tile(const int tile, const float *m, int64_t xs, int64_t nch,
                            const float *bias, float *y, const float *res, int64_t ys,
                            int64_t ps, int nrows, int ncols, const kn_wgn_epi *e) {
  for (int64_t j = 0; j < nch; j += VL) {
    int n = (int)(nch - j < VL ? nch - j : VL);
    const float *bj = bias ? bias + j : NULL, *rj = res ? res + j : NULL;
    /* full vectors and the tail as separate instances (no per-vector test) */
    if (tile == 2 && n == VL)
      output_slice23(m + j, xs, bj, y + j, rj, ys, ps, nrows, ncols, e, VL, true);
    else if (tile == 2)
      output_slice23(m + j, xs, bj, y + j, rj, ys, ps, nrows, ncols, e, n, false);
    else if (n == VL)
      output_slice(m + j, xs, bj, y + j, rj, ys, ps, nrows, ncols, e, VL, true);
    else
      output_slice(m + j, xs, bj, y + j, rj, ys, ps, nrows, ncols, e, n, false);
  }
}

static void wgn_output(const float *m, int64_t xs, int64_t nch, const float *bias, float *y,
                       const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                       const kn_wgn_epi *e) {
  output_tile(4, m, xs, nch, bias, y, res, ys, ps, nrows, ncols, e);
}

static void wgn_output23(const float *m, int64_t xs, int64_t nch, const float *bias, float *y,
                         const float *res, int64_t ys, int64_t ps, int nrows, int ncols,
                         const kn_wgn_epi *e) {
  output_tile(2, m, xs, nch, bias, y, res, ys, ps, nrows, ncols, e);
}

const kn_wgn_ukernels KN_WGN_TABLE = {VL,        WGN_MR,         wgn_input,   wgn_output,
                                      wgn_input_rows, wgn_input_rows23, wgn_output23};
