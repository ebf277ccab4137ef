/*
 * fp32 GEMM in the BLIS style: C[m,n] = alpha * op(A)[m,k] * op(B)[k,n],
 * then the fused epilogue (kernels.h), all row-major with leading dims.
 *
 * Either operand may be prepacked once (weights, at build or load) with
 * kn_sgemm_pack_a / kn_sgemm_pack_b for the same ISA and sizes, or given
 * raw (activations, packed per cache block inside kn_sgemm into scratch),
 * or, for B only, produced panel by panel by a callback (implicit GEMM:
 * convolution packs im2col panels straight from the image).
 *
 * Packed layouts (what a b_panel callback must write):
 *   B: panels of NR = kn_sgemm_nr(isa) columns; panel j holds, for each
 *      kk in [0, k), the NR values B[kk][j*NR .. j*NR+NR) contiguously,
 *      zero-padded past n.  A prepacked B stores all panels of all k in
 *      that order (panel-major, k inner).
 *   A: panels of MR = kn_sgemm_mr(isa) rows; panel i holds, for each kk,
 *      the MR values A[i*MR .. i*MR+MR)[kk], zero-padded past m.
 * Neither layout depends on the cache blocking, so a weight packed once
 * serves every machine with the same ISA.
 *
 * Threads split the output into tiles (whole micro-tiles; every element
 * of C is computed by one thread in a fixed k order), so results are
 * bit-identical for a given thread count, and independent of it too.
 * They do depend on the ISA and on the k blocking (kc), which comes from
 * the cache sizes: pass the same kn_sgemm_blocking to compare runs.
 */
#ifndef KN_GEMM_H
#define KN_GEMM_H

#include "kernels/kernels.h"

/* Register tile of the micro-kernel for this ISA. */
int32_t kn_sgemm_mr(kn_isa isa);
int32_t kn_sgemm_nr(kn_isa isa);

/* Floats needed for a prepacked A (m x k) or B (k x n). */
size_t kn_sgemm_pack_a_size(kn_isa isa, int64_t m, int64_t k);
size_t kn_sgemm_pack_b_size(kn_isa isa, int64_t k, int64_t n);
/* Pack op(A) (trans: A is stored k x m) / op(B) (trans: B is stored n x k). */
void kn_sgemm_pack_a(kn_isa isa, int64_t m, int64_t k, const float *a, int64_t lda,
                     bool trans, float *dst);
void kn_sgemm_pack_b(kn_isa isa, int64_t k, int64_t n, const float *b, int64_t ldb,
                     bool trans, float *dst);

/* Writes the packed B panel for rows [k0, k0+kc) and columns
 * [n0, n0+nr) (nr <= NR; zero-pad to NR) into dst (kc * NR floats). */
typedef void (*kn_sgemm_b_panel_fn)(void *arg, int64_t k0, int64_t kc, int64_t n0,
                                    int64_t nr, float *dst);

/* Cache blocking (BLIS's KC, MC, NC), made once at build from the cache
 * capacities of the machine description (kn_machine; `kiln probe`) and
 * kept with the packed weights.
 *   kc: depth of one pass; a B micro-panel (kc x NR) stays in L1 while
 *       the A micro-panels of an MC block stream past it from L2;
 *   mc: rows of the packed A block (mc x kc in about half of L2);
 *   nc: columns of the packed B block (kc x nc in a share of L3). */
typedef struct kn_sgemm_blocking {
  int64_t kc, mc, nc;
} kn_sgemm_blocking;

/* Blocking for `isa` from cache sizes (0 in one: its common size,
 * KN_COMMON_L1D / _L2 / _L3 of kernels.h). */
kn_sgemm_blocking kn_sgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3);
/* The same from a kn_caches (NULL: the common sizes). */
static inline kn_sgemm_blocking kn_sgemm_blocking_of(kn_isa isa, const kn_caches *c) {
  kn_caches k = kn_caches_or_common(c);
  return kn_sgemm_blocking_for(isa, k.l1d, k.l2, k.l3);
}

/* Whole rows [r0, r0 + rows) of C (c points at row r0, row stride ldc,
 * n columns) are final: every column computed and the epilogue applied. */
typedef void (*kn_sgemm_rows_fn)(void *arg, float *c, int64_t ldc, int64_t r0, int64_t rows,
                                 int64_t n);

typedef struct kn_sgemm_args {
  int64_t m, n, k;
  float alpha;
  /* A: raw (a, lda, trans_a) or prepacked (a_packed) */
  const float *a;
  int64_t lda;
  bool trans_a;
  const float *a_packed;
  /* B: raw, prepacked, or a panel callback */
  const float *b;
  int64_t ldb;
  bool trans_b;
  const float *b_packed;
  kn_sgemm_b_panel_fn b_panel;
  void *b_panel_arg;
  /* C, overwritten (never read: no beta) */
  float *c;
  int64_t ldc;
  const kn_epilogue *ep; /* NULL: none */
  /* A row epilogue (a LayerNormalization fused after the product): called
   * on the thread that computed the rows, while they are still in cache:
   * per MC block of rows when one NC block spans all the columns, else
   * for a task's rows at its end.  The threads then split C by rows only.
   * NULL: none. */
  kn_sgemm_rows_fn rows_done;
  void *rows_arg;
  /* NULL: kn_sgemm_blocking_for(isa, 0, 0, 0), the common sizes'; a
   * caller that knows the machine's capacities (ctx->rt->caches, a
   * kernel's kn_caches) passes kn_sgemm_blocking_of them */
  const kn_sgemm_blocking *blocking;
} kn_sgemm_args;

/* Scratch bytes kn_sgemm needs for these arguments on `threads` threads:
 * always threads * kn_sgemm_scratch_size(isa, g, 1), so a caller running
 * several products at once on one pool (say one batch per task) may call
 * kn_sgemm with pool NULL on its thread's share.  Depends on m, n, k, the
 * operand modes (raw, packed, callback) and the blocking, not on pointers. */
size_t kn_sgemm_scratch_size(kn_isa isa, const kn_sgemm_args *g, int32_t threads);
/* Run the GEMM on the pool (NULL: this thread).  scratch: at least
 * kn_sgemm_scratch_size bytes, 64-byte aligned. */
void kn_sgemm(kn_isa isa, kn_pool *pool, const kn_sgemm_args *g, void *scratch);

#endif
