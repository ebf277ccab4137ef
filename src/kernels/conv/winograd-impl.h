/*
 * The Winograd F(4x4, 3x3) inner kernels (winograd.h), written once against
 * a small vector interface and instantiated per ISA by
 * f32-winograd-avx512.c (VN = 16, MR = 14), f32-winograd-avx2.c (8, 6) and
 * f32-winograd-portable.c (4 lanes of GCC vector extensions, 6).  One vector
 * lane is one 4x4 output tile, so every transform is plain vector
 * arithmetic with no shuffles; what differs per ISA is how lanes get in
 * (gathers) and out (wg_store).  The including file defines:
 *
 *   V, VN, MR     float vector, its lanes, rows of the GEMM tile
 *   KN_WG_TABLE   name of the kn_wg_ukernels table to define
 *   v_zero v_set1 v_ld v_st v_add v_sub
 *   v_fma(a, b, c) = a * b + c, v_fnma(a, b, c) = c - a * b
 *   either WG_LOAD_ROW and wg_load_row(plane, w, ln, a, d), which fills
 *     d[0..5] with row a of the lanes' input windows (zeros outside),
 *   or gathers: VI, VM (int32 vector, lane mask), vi_ld vi_add vi_set1,
 *     vm_bits(bits) (lane l set when bit l is), vm_and, and
 *     v_gather(base, idx, m) = base[idx[l]] for lanes in m, 0 elsewhere
 *   wg_store(o, ln, y, res, ow, e)  the 4x4 outputs o[row][col] of the
 *                 lanes to their tiles in y, epilogue applied (winograd.h)
 *
 * The matrices are Lavin & Gray's (points 0, +-1, +-2, inf):
 *   B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0  4 -4 -1 1 0;
 *          0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0  4  0 -5 0 1]
 *   A^T = [1 1  1 1  1 0;  0 1 -1 2 -2 0;  0 1 1 4 4 0;  0 1 -1 8 -8 1]
 */
#ifndef KN_WG_TABLE
#error "define the vector interface before including winograd-impl.h"
#endif

#define WG_INLINE static inline __attribute__((always_inline))

/* out[i] = (B^T d)[i] for one 6-vector d (a row or a column of a tile). */
WG_INLINE void bt6(const V d[6], V out[6]) {
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
WG_INLINE void at6(const V s[6], V out[4]) {
  const V two = v_set1(2.0f), four = v_set1(4.0f), eight = v_set1(8.0f);
  V p12 = v_add(s[1], s[2]), m12 = v_sub(s[1], s[2]);
  V p34 = v_add(s[3], s[4]), m34 = v_sub(s[3], s[4]);
  out[0] = v_add(v_add(s[0], p12), p34);
  out[1] = v_fma(two, m34, m12);
  out[2] = v_fma(four, p34, p12);
  out[3] = v_add(v_fma(eight, m34, m12), s[5]);
}

static void wg_input(const float *plane, int64_t w, const kn_wg_lanes *ln, float *dst,
                     int64_t xs) {
#ifndef WG_LOAD_ROW
  VI base = vi_ld(ln->in_off);
  VM cm[6];
  for (int b = 0; b < 6; b++) cm[b] = vm_bits(ln->cbits[b]);
#endif
  V r[6][6]; /* r[a] = (d B)[a]: the rows' transforms, then the columns' */
  for (int a = 0; a < 6; a++) {
    V d[6];
#ifdef WG_LOAD_ROW
    wg_load_row(plane, w, ln, a, d);
#else
    VM rm = vm_bits(ln->rbits[a]);
    VI ia = vi_add(base, vi_set1((int32_t)(a * w)));
    for (int b = 0; b < 6; b++) d[b] = v_gather(plane, vi_add(ia, vi_set1(b)), vm_and(rm, cm[b]));
#endif
    bt6(d, r[a]);
  }
  for (int b = 0; b < 6; b++) {
    V col[6], o[6];
    for (int a = 0; a < 6; a++) col[a] = r[a][b];
    bt6(col, o);
    for (int a = 0; a < 6; a++) v_st(dst + (a * 6 + b) * xs, o[a]);
  }
}

/* MR x (NV * VN) register tile over the whole depth k (no k blocking: a
 * [k][CW] chunk of V is at most 512 x 32 floats and stays in L2). */
WG_INLINE void gemm_tile(const int nv, int64_t k, const float *restrict u, const float *restrict v,
                         float *restrict mo, int64_t ldm) {
  V acc[MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = v_zero();
  for (int64_t kk = 0; kk < k; kk++) {
    V b0 = v_ld(v), b1 = nv > 1 ? v_ld(v + VN) : b0;
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      V a = v_set1(u[r]);
      acc[r][0] = v_fma(a, b0, acc[r][0]);
      if (nv > 1) acc[r][1] = v_fma(a, b1, acc[r][1]);
    }
    u += MR;
    v += 2 * VN;
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++) {
    v_st(mo + r * ldm, acc[r][0]);
    if (nv > 1) v_st(mo + r * ldm + VN, acc[r][1]);
  }
}

static void wg_gemm(int64_t k, const float *u, const float *v, float *mo, int64_t ldm,
                    int32_t nv) {
  if (nv > 1) gemm_tile(2, k, u, v, mo, ldm);
  else gemm_tile(1, k, u, v, mo, ldm);
}

static void wg_output(const float *m, int64_t ms, float bias, const kn_wg_lanes *ln, float *y,
                      const float *res, int64_t ow, const kn_wg_epi *e) {
  V t[4][6], o[4][4];
  for (int c = 0; c < 6; c++) {
    V s[6], q[4];
    for (int a = 0; a < 6; a++) s[a] = v_ld(m + (a * 6 + c) * ms);
    at6(s, q);
    for (int a = 0; a < 4; a++) t[a][c] = q[a];
  }
  V bv = v_set1(bias);
  for (int a = 0; a < 4; a++) {
    at6(t[a], o[a]);
    for (int b = 0; b < 4; b++) o[a][b] = v_add(o[a][b], bv);
  }
  wg_store(o, ln, y, res, ow, e);
}

const kn_wg_ukernels KN_WG_TABLE = {VN, MR, wg_input, wg_gemm, wg_output};
