/*
 * fp32 GEMM (gemm.h): the family's descriptor for the shared driver
 * (driver.h): the per-ISA micro-kernels (gemm-ukernel.h), the packers, the
 * blocking rule, and kn_sgemm as a wrapper that fills them in.
 *
 * What the fp32 family asks of the driver:
 *  - BLIS's loop order (k_outer): B is packed per (column block, pass) and
 *    serves every row block of the task; C accumulates the passes in place;
 *  - tiles of a short row remainder shared with the last full panel
 *    (row_pairs: M = 128 on 14 rows ends in 8 + 8, not 14 + 2);
 *  - operands used in place where packing would not pay: prepacked ones
 *    (weights); a single row, or a transposed A of at most MR rows (a
 *    row's k values are contiguous, or MR rows of A^T are); with at most
 *    2*MR rows, a row-major B (packing would cost a whole extra pass over
 *    B for one or two uses: thin products, K << N).  A single row panel
 *    takes 8 times the depth per pass (nothing to keep in cache between
 *    passes);
 *  - the fused epilogue in the micro-kernel's store (bias, a residual
 *    before the activation, Relu and Clip), the rest by kn_f32_epilogue on
 *    the tile while it is in L1;
 *  - one row against a raw row-major B streamed row by row (gemv-impl.h).
 */
#include "gemm.h"

#include <string.h>

#include "driver.h"
#include "gemm-ukernel.h"

static const kn_sgemm_ukernels *ukernels(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_gemm_ukernel_14x32__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_gemm_ukernel_6x16__avx2;
#else
  (void)isa;
#endif
  return &kn_f32_gemm_ukernel_6x8__portable;
}

int32_t kn_sgemm_mr(kn_isa isa) { return ukernels(isa)->mr; }
int32_t kn_sgemm_nr(kn_isa isa) { return ukernels(isa)->nr; }

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ---- blocking ------------------------------------------------------------------ */

/* The B micro-panel (kc x NR fp32) takes two thirds of L1, the rest is for
 * the A micro-panel streaming through (MR/NR of B's size) and C's tile.
 * Measured on Zen 5 (48 KiB L1, 14x32 tile): kc 256 beats 192 by 5-15% on
 * the BERT shapes (fewer passes over C), 384 and up lose again.  The A
 * block (mc x kc) in half of L2, at most 64 panels.  The B block (kc x
 * nc) in min(L3 / 4, L2): in L2 too when the L3 is shared by many cores
 * (VMs report the whole socket's), 4 to 128 panels so scratch stays
 * small. */
static const kn_gemm_block_rule block_rule = {
    .kc_l1_num = 2, .kc_l1_den = 3, .b_bytes = 4, .kc_max = 512,
    .mc_l2_den = 2, .a_bytes = 4, .mc_panels = 64,
    .nc_b_block = true, .nc_min = 4, .nc_max = 128,
};

kn_sgemm_blocking kn_sgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3) {
  const kn_sgemm_ukernels *uk = ukernels(isa);
  return kn_gemm_driver_blocking(&block_rule, uk->mr, uk->nr, (kn_caches){l1d, l2, l3});
}

/* ---- packing ------------------------------------------------------------------- */

/* Rows [i0, i0+h) x depth [k0, k0+kc) of op(A) as one tile of `as` rows
 * (as values per kk, zero past h). */
static void pack_a_tile(const float *a, int64_t lda, bool trans, int64_t i0, int64_t h,
                        int64_t as, int64_t k0, int64_t kc, float *restrict dst) {
  if (trans) {
    for (int64_t kk = 0; kk < kc; kk++) {
      const float *src = a + (k0 + kk) * lda + i0;
      float *d = dst + kk * as;
      for (int64_t r = 0; r < h; r++) d[r] = src[r];
      for (int64_t r = h; r < as; r++) d[r] = 0.0f;
    }
    return;
  }
  /* k outer: contiguous writes, h sequential read streams (row by row, the
   * strided writes made packing cost as much as a thin product itself). */
  const float *src[KN_SGEMM_MR_MAX];
  for (int64_t r = 0; r < h; r++) src[r] = a + (i0 + r) * lda + k0;
  for (int64_t kk = 0; kk < kc; kk++) {
    float *d = dst + kk * as;
    for (int64_t r = 0; r < h; r++) d[r] = src[r][kk];
    for (int64_t r = h; r < as; r++) d[r] = 0.0f;
  }
}

/* Depth [k0, k0+kc) x columns [col, col+w) of op(B) into one panel of nr
 * columns (nr values per kk, zero-padded past w). */
static void pack_b_panel(int64_t nr, const float *b, int64_t ldb, bool trans, int64_t k0,
                         int64_t kc, int64_t col, int64_t w, float *restrict dst) {
  if (!trans) {
    for (int64_t kk = 0; kk < kc; kk++) {
      const float *src = b + (k0 + kk) * ldb + col;
      float *d = dst + kk * nr;
      memcpy(d, src, (size_t)w * sizeof(float));
      for (int64_t j = w; j < nr; j++) d[j] = 0.0f;
    }
    return;
  }
  for (int64_t j = 0; j < w; j++) {
    const float *src = b + (col + j) * ldb + k0;
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * nr + j] = src[kk];
  }
  for (int64_t j = w; j < nr; j++)
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * nr + j] = 0.0f;
}

size_t kn_sgemm_pack_a_size(kn_isa isa, int64_t m, int64_t k) {
  int64_t mr = kn_sgemm_mr(isa);
  return (size_t)(round_up(max64(m, 1), mr) * max64(k, 1));
}

size_t kn_sgemm_pack_b_size(kn_isa isa, int64_t k, int64_t n) {
  int64_t nr = kn_sgemm_nr(isa);
  return (size_t)(round_up(max64(n, 1), nr) * max64(k, 1));
}

void kn_sgemm_pack_a(kn_isa isa, int64_t m, int64_t k, const float *a, int64_t lda,
                     bool trans, float *dst) {
  int64_t mr = kn_sgemm_mr(isa);
  for (int64_t i = 0; i < m; i += mr)
    pack_a_tile(a, lda, trans, i, min64(mr, m - i), mr, 0, k, dst + i * k);
}

void kn_sgemm_pack_b(kn_isa isa, int64_t k, int64_t n, const float *b, int64_t ldb,
                     bool trans, float *dst) {
  int64_t nr = kn_sgemm_nr(isa);
  for (int64_t col = 0; col < n; col += nr, dst += nr * k)
    pack_b_panel(nr, b, ldb, trans, 0, k, col, min64(nr, n - col), dst);
}

/* ---- the descriptor's hooks ------------------------------------------------------ */

static const kn_sgemm_args *args_of(const kn_gemm_op *op) { return op->ctx; }

static size_t a_panel_bytes(const kn_gemm_op *op, int64_t kc) {
  return (size_t)(op->desc->mr * kc) * sizeof(float);
}

static void pack_a(const kn_gemm_op *op, int64_t i0, int64_t h, int64_t as, int64_t k0,
                   int64_t kc, void *dst) {
  const kn_sgemm_args *g = args_of(op);
  pack_a_tile(g->a, g->lda, g->trans_a, i0, h, as, k0, kc, dst);
}

static void pack_b(const kn_gemm_op *op, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                   void *dst) {
  const kn_sgemm_args *g = args_of(op);
  if (g->b_panel) g->b_panel(g->b_panel_arg, k0, kc, j0, w, dst);
  else pack_b_panel(op->desc->nr, g->b, g->ldb, g->trans_b, k0, kc, j0, w, dst);
}

static void gemv(const kn_gemm_op *op, int64_t j0, int64_t j1) {
  const kn_sgemm_args *g = args_of(op);
  const kn_sgemm_ukernels *uk = op->desc->uk;
  const float *a = g->a_packed ? g->a_packed : g->a;
  int64_t as = g->a_packed ? uk->mr : g->trans_a ? g->lda : 1;
  float *c = g->c + j0;
  uk->gemv(op->k, j1 - j0, a, as, g->b + j0, g->ldb, c);
  if (g->alpha != 1.0f)
    for (int64_t j = 0; j < j1 - j0; j++) c[j] *= g->alpha;
}

static void rows_done(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  const kn_sgemm_args *g = arg;
  g->rows_done(g->rows_arg, c, ldc, r0, rows, n);
}

/* Narrower rows keep the panel kernels: their B is a few lines per row. */
#define GEMV_MIN_N 64

static void describe(kn_isa isa, const kn_sgemm_args *g, kn_gemm_desc *d, kn_gemm_op *op) {
  const kn_sgemm_ukernels *uk = ukernels(isa);
  *d = (kn_gemm_desc){
      .uk = uk, .mr = uk->mr, .nr = uk->nr, .kunit = 1,
      .kc_scale = 1, .kc_one_panel = 8, .kc_align = 8,
      .k_outer = true, .row_pairs = true, .wide_one_pass = false,
      .acc = KN_GEMM_ACC_C, .fused_store = true,
      /* packing, in FMA-equivalents per float moved; an im2col callback
       * gathers as it packs */
      .cost_a = 4.0, .cost_b = 4.0, .cost_b_fn = 8.0, .coarse_shares = false,
      .a_panel_bytes = a_panel_bytes, .pack_a = pack_a, .pack_b = pack_b,
      .f32_fn = uk->fn, .finish = NULL, .gemv = gemv,
  };
  const int64_t mr = uk->mr, nr = uk->nr, k = g->alpha == 0.0f ? 0 : g->k;
  *op = (kn_gemm_op){
      .desc = d, .ctx = g, .isa = isa, .m = g->m, .n = g->n,
      .k = k, /* alpha 0: as the reference, no product at all */
      .blocking = g->blocking ? *g->blocking : kn_sgemm_blocking_for(isa, 0, 0, 0),
      .a_packed = g->a_packed, .a_ld = (size_t)(mr * g->k) * 4, .a_kb = (size_t)mr * 4,
      .a = g->a, .a_rs = g->trans_a ? 4 : (size_t)g->lda * 4,
      .a_ks = g->trans_a ? (size_t)g->lda * 4 : 4, .a_as = g->trans_a ? g->lda : 1,
      .a_direct_rows = g->trans_a ? mr : 1,
      .b_packed = g->b_packed, .b_ld = (size_t)(nr * g->k) * 4, .b_kb = (size_t)nr * 4,
      .b = g->b, .b_rs = (size_t)g->ldb * 4, .b_cs = 4, .b_bs = g->ldb,
      .b_direct = !g->b_panel && !g->trans_b, .b_fn = g->b_panel != NULL,
      .c = g->c, .ldc = g->ldc, .c_esize = 4, .stage = KN_GEMM_STAGE_C,
      .alpha = g->alpha, .alpha_in_store = g->alpha != 1.0f, .ep = g->ep,
      .rows_done = g->rows_done ? rows_done : NULL, .rows_arg = (void *)g,
  };
  /* One row against a raw row-major B (a MatMul in a Loop body, whose
   * weights are not prepacked; activations times activations): B streams
   * row by row (gemv-impl.h) instead of down its columns panel by panel,
   * with no blocking to work out; each output is the same chain of FMAs
   * whatever the split over threads. */
  op->row_stream = g->m == 1 && !g->b_packed && !g->b_panel && !g->trans_b && g->n >= GEMV_MIN_N;
}

size_t kn_sgemm_scratch_size(kn_isa isa, const kn_sgemm_args *g, int32_t threads) {
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(isa, g, &d, &op);
  return kn_gemm_driver_scratch_size(&op, threads);
}

void kn_sgemm(kn_isa isa, kn_pool *pool, const kn_sgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(isa, g, &d, &op);
  kn_gemm_driver_run(&op, pool, scratch);
}
