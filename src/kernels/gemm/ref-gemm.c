/* The portable float32 reference GEMM (ref-gemm.h): tiled the BLIS way,
 * B packed in KC x NR panels, A in MR x KC panels (alpha folded in), and a
 * 6x8 micro-kernel accumulating in a local tile with constant trip counts
 * so that gcc -O2 / clang vectorise it without intrinsics. */
#include "ref-gemm.h"

#include "core/core.h"

enum { GEMM_MR = 6, GEMM_NR = 8, GEMM_KC = 256, GEMM_MC = 96, GEMM_NC = 1024 };

/* Element (i, k) of op(A) where A is row-major with leading dimension lda. */
static inline float gemm_at(const float *a, int64_t lda, bool trans, int64_t i,
                            int64_t k) {
  return trans ? a[k * lda + i] : a[i * lda + k];
}

/* Packs rows [i0, i0+mc) x cols [k0, k0+kc) of alpha*op(A) into MR-row
 * panels, k-major inside a panel; rows past mc are zero. */
static void gemm_pack_a(const float *a, int64_t lda, bool trans, float alpha,
                        int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                        float *restrict dst) {
  for (int64_t p = 0; p < mc; p += GEMM_MR) {
    int64_t rows = mc - p < GEMM_MR ? mc - p : GEMM_MR;
    for (int64_t k = 0; k < kc; k++) {
      for (int64_t r = 0; r < GEMM_MR; r++)
        dst[k * GEMM_MR + r] =
            r < rows ? alpha * gemm_at(a, lda, trans, i0 + p + r, k0 + k) : 0.0f;
    }
    dst += GEMM_MR * kc;
  }
}

/* Packs rows [k0, k0+kc) x cols [j0, j0+nc) of op(B) into NR-column panels,
 * k-major inside a panel; columns past nc are zero. */
static void gemm_pack_b(const float *b, int64_t ldb, bool trans, int64_t k0,
                        int64_t kc, int64_t j0, int64_t nc, float *restrict dst) {
  for (int64_t q = 0; q < nc; q += GEMM_NR) {
    int64_t cols = nc - q < GEMM_NR ? nc - q : GEMM_NR;
    if (!trans && cols == GEMM_NR) {
      for (int64_t k = 0; k < kc; k++)
        memcpy(dst + k * GEMM_NR, b + (k0 + k) * ldb + j0 + q,
               GEMM_NR * sizeof(float));
    } else {
      for (int64_t k = 0; k < kc; k++)
        for (int64_t c = 0; c < GEMM_NR; c++)
          dst[k * GEMM_NR + c] =
              c < cols ? (trans ? b[(j0 + q + c) * ldb + k0 + k]
                                : b[(k0 + k) * ldb + j0 + q + c])
                       : 0.0f;
    }
    dst += GEMM_NR * kc;
  }
}

/* C[0:mr, 0:nr] += a-panel x b-panel over kc.  One named accumulator row
 * per A row (rather than acc[MR][NR]) lets gcc and clang keep the 6x8 tile
 * in registers: with SSE2 that is 12 of the 16 xmm registers. */
static void gemm_ukernel_6x8(int64_t kc, const float *restrict a,
                             const float *restrict b, float *restrict c,
                             int64_t ldc, int64_t mr, int64_t nr) {
  float c0[GEMM_NR] = {0}, c1[GEMM_NR] = {0}, c2[GEMM_NR] = {0};
  float c3[GEMM_NR] = {0}, c4[GEMM_NR] = {0}, c5[GEMM_NR] = {0};
  for (int64_t k = 0; k < kc; k++) {
    const float *bk = b + k * GEMM_NR, *ak = a + k * GEMM_MR;
    float a0 = ak[0], a1 = ak[1], a2 = ak[2], a3 = ak[3], a4 = ak[4], a5 = ak[5];
    for (int j = 0; j < GEMM_NR; j++) {
      c0[j] += a0 * bk[j];
      c1[j] += a1 * bk[j];
      c2[j] += a2 * bk[j];
      c3[j] += a3 * bk[j];
      c4[j] += a4 * bk[j];
      c5[j] += a5 * bk[j];
    }
  }
  if (mr == GEMM_MR && nr == GEMM_NR) {
    for (int j = 0; j < GEMM_NR; j++) {
      c[j] += c0[j];
      c[ldc + j] += c1[j];
      c[2 * ldc + j] += c2[j];
      c[3 * ldc + j] += c3[j];
      c[4 * ldc + j] += c4[j];
      c[5 * ldc + j] += c5[j];
    }
    return;
  }
  float t[GEMM_MR][GEMM_NR];
  for (int j = 0; j < GEMM_NR; j++) {
    t[0][j] = c0[j];
    t[1][j] = c1[j];
    t[2][j] = c2[j];
    t[3][j] = c3[j];
    t[4][j] = c4[j];
    t[5][j] = c5[j];
  }
  for (int64_t r = 0; r < mr; r++)
    for (int64_t j = 0; j < nr; j++) c[r * ldc + j] += t[r][j];
}

/* C[M,N] (leading dimension ldc) += alpha * op(A)[M,K] * op(B)[K,N].
 * op(A) = A^T when trans_a (A then stored [K,M]); same for B.
 * Returns false only when the packing scratch cannot be allocated. */
bool kn_f32_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, bool trans_a, const float *b, int64_t ldb,
                 bool trans_b, float *c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) return true;
  if (m < GEMM_MR / 2) {
    /* Few rows (matrix-vector products): packing B would cost more than
     * the product itself. */
    for (int64_t i = 0; i < m; i++) {
      float *ci = c + i * ldc;
      if (trans_b) {
        for (int64_t j = 0; j < n; j++) {
          const float *bj = b + j * ldb;
          float s = 0.0f;
          for (int64_t p = 0; p < k; p++) s += gemm_at(a, lda, trans_a, i, p) * bj[p];
          ci[j] += alpha * s;
        }
      } else {
        for (int64_t p = 0; p < k; p++) {
          float av = alpha * gemm_at(a, lda, trans_a, i, p);
          const float *bp = b + p * ldb;
          for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j];
        }
      }
    }
    return true;
  }
  int64_t kc_max = k < GEMM_KC ? k : GEMM_KC;
  int64_t nc_max = n < GEMM_NC ? n : GEMM_NC;
  int64_t mc_max = m < GEMM_MC ? m : GEMM_MC;
  int64_t nc_pad = (nc_max + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
  int64_t mc_pad = (mc_max + GEMM_MR - 1) / GEMM_MR * GEMM_MR;
  float *bp = kn_malloc((size_t)(kc_max * nc_pad) * sizeof(float));
  float *ap = kn_malloc((size_t)(kc_max * mc_pad) * sizeof(float));
  if (!bp || !ap) {
    free(bp);
    free(ap);
    return false;
  }
  for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
    int64_t nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
    for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
      int64_t kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
      gemm_pack_b(b, ldb, trans_b, pc, kc, jc, nc, bp);
      for (int64_t ic = 0; ic < m; ic += GEMM_MC) {
        int64_t mc = m - ic < GEMM_MC ? m - ic : GEMM_MC;
        gemm_pack_a(a, lda, trans_a, alpha, ic, mc, pc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += GEMM_NR) {
          int64_t nr = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
          const float *bpanel = bp + (jr / GEMM_NR) * GEMM_NR * kc;
          for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
            int64_t mr = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
            gemm_ukernel_6x8(kc, ap + (ir / GEMM_MR) * GEMM_MR * kc, bpanel,
                             c + (ic + ir) * ldc + jc + jr, ldc, mr, nr);
          }
        }
      }
    }
  }
  free(bp);
  free(ap);
  return true;
}
