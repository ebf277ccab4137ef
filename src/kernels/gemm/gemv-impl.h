/*
 * One-row products against a raw row-major B, for one ISA, from one
 * template (gemm.c's GEMV path):
 *
 *   c[j] = sum_{kk < k} a[kk*as] * b[kk*ldb + j]      j < n, kk in order
 *
 * B is read row by row, each row's block of columns contiguous, so the
 * whole matrix streams in address order: the panel order of the general
 * kernels walks a raw B down its columns, one or two lines per row and
 * row after row a page apart, which the hardware prefetchers do not
 * follow (a 1024 x 1024 B went at about 25 GB/s that way).  Blocks of
 * GV_NV vectors of columns keep that many independent accumulators, enough
 * to cover the FMA latency; the column tail runs a vector at a time and
 * the last lanes masked.  Each output is one chain of FMAs in k order in
 * every block shape, so the result does not depend on how the columns are
 * split (over threads or blocks).
 *
 * The including file defines V, VL, GV_NV, KN_GEMV_FN (the function's
 * name) and gv_zero, gv_set1, gv_ld, gv_fma, gv_st, gv_ldn, gv_stn.
 */
#ifndef KN_GEMV_FN
#error "define the vector operations and KN_GEMV_FN before including gemv-impl.h"
#endif

static inline __attribute__((always_inline)) void
gemv_block(const int nv, int64_t k, const float *restrict a, int64_t as,
           const float *restrict b, int64_t ldb, float *restrict c) {
  V acc[GV_NV];
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) acc[v] = gv_zero();
  for (int64_t kk = 0; kk < k; kk++) {
    V av = gv_set1(a[kk * as]);
    const float *br = b + kk * ldb;
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) acc[v] = gv_fma(av, gv_ld(br + v * VL), acc[v]);
  }
#pragma GCC unroll 16
  for (int v = 0; v < nv; v++) gv_st(c + v * VL, acc[v]);
}

void KN_GEMV_FN(int64_t k, int64_t n, const float *a, int64_t as, const float *b,
                int64_t ldb, float *c) {
  int64_t j = 0;
  for (; j + GV_NV * VL <= n; j += GV_NV * VL) gemv_block(GV_NV, k, a, as, b + j, ldb, c + j);
  for (; j + 4 * VL <= n; j += 4 * VL) gemv_block(4, k, a, as, b + j, ldb, c + j);
  for (; j + VL <= n; j += VL) gemv_block(1, k, a, as, b + j, ldb, c + j);
  if (j < n) {
    int64_t w = n - j;
    V acc = gv_zero();
    for (int64_t kk = 0; kk < k; kk++)
      acc = gv_fma(gv_set1(a[kk * as]), gv_ldn(b + kk * ldb + j, w), acc);
    gv_stn(c + j, acc, w);
  }
}
