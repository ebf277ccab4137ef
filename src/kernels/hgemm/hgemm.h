/*
 * Reduced-precision GEMM (bf16 and fp16 storage, fp32 arithmetic) in the
 * BLIS style of src/kernels/gemm:
 *
 *   C[m,n] = alpha * A[m,k] * B[k,n], then the fused epilogue (kernels.h)
 *
 * B is a weight, packed once (at build or load) with kn_hgemm_pack_b for
 * one ISA.  A is an activation, row-major, fp32 or of B's type, packed per
 * cache block inside kn_hgemm.  C is fp32 or of B's type.  Every product
 * is accumulated in fp32; the epilogue (bias, residual: fp32 arrays) runs
 * in fp32 before an output in half precision is rounded.
 *
 *   KN_HGEMM_BF16  A rounded to bf16 (round to nearest even) while it is
 *                  packed, unless it already is bf16; B bf16.  Products of
 *                  two bf16 values are exact in fp32, so every ISA sums the
 *                  same exact products and differs from another only in
 *                  the order of the fp32 additions (vdpbf16ps adds a k
 *                  pair's two products before the accumulator; the AVX2 and
 *                  portable kernels add them one at a time).  Bound:
 *                  |C - exact sum of the rounded inputs| <= about
 *                  k * 2^-24 * sum_k |a*b| (tests/unit/test_hgemm.c checks
 *                  (k + 4) * 2^-23 of it).  vdpbf16ps treats bf16 denormals
 *                  (|x| < 2^-126, as fp32's) as zero; the others keep them.
 *   KN_HGEMM_F16   B fp16 (weight-only compression: half the bytes of fp32
 *                  weights, for memory-bound GEMV and small-M shapes),
 *                  converted exactly to fp32 in the micro-kernel
 *                  (vcvtph2ps); A fp32, or fp16 converted exactly while
 *                  packing; fp32 FMAs as kn_sgemm.  An fp16 C is rounded to
 *                  nearest even (vcvtps2ph; kn_f32_to_f16 in portable C,
 *                  the same bits for all but NaN payloads).  With round_a
 *                  an fp32 A is rounded to fp16 (nearest even, as
 *                  kn_f32_to_f16) while it is packed: the product of
 *                  fp16-stored activations (KN_PRECISION_FP16 steps).
 *   KN_HGEMM_S8W   weight-only int8: B quantized per output column,
 *                  symmetric, w_scale[j] = max_k |B[k][j]| / 127 (1 for an
 *                  all-zero column), q = clamp(round_half_even(B /
 *                  w_scale[j]), -127, 127), in fp32 arithmetic (B finite).
 *                  A quarter of fp32's weight bytes, for memory-bound GEMV
 *                  and small-M shapes.  The micro-kernel widens q to fp32
 *                  exactly (vpmovsxbd + vcvtdq2ps), sums A * q with fp32
 *                  FMAs over all of k, and scales each output once:
 *                  C = (alpha * w_scale[j]) * sum_k A * q, then the
 *                  epilogue as F16's.  A fp32 (round_a as F16: to fp16
 *                  while packing), C fp32; no half A or C.  Bound as
 *                  F16's on the dequantized weights w_scale[j] * q.
 *
 * Packed B (what kn_hgemm_pack_b writes; uint16 elements): panels of
 * NR = kn_hgemm_nr(isa) columns, panel-major, zero-padded past n:
 *   F16:  panel j holds, for each kk in [0, k), the NR values
 *         B[kk][j*NR .. j*NR+NR) (as kn_sgemm's packed B, in halves);
 *   BF16: k is padded to even and taken in pairs (kk = 2p, 2p+1): panel j
 *         holds, for each pair p, NR pairs (B[2p][c], B[2p+1][c]) for
 *         c in [j*NR, j*NR+NR): the layout vdpbf16ps multiplies, and the
 *         AVX2 kernel splits by a 16-bit shift (low half) and a mask
 *         (high half).
 *   S8W:  one relocatable block of bytes (offsets from its start, no
 *         pointers; the block 4-byte aligned), N = round_up(max(n,1), NR):
 *           [0, 4N)           float w_scale[N] (0 past n)
 *           [S, S + N*k)      S = round_up(4N, 64): int8 panels as F16's,
 *                             panel j holds, for each kk in [0, k), the NR
 *                             values q[kk][j*NR .. j*NR+NR) (0 past n)
 *         so a GEMV streams the panels in address order, NR bytes a step;
 *         kn_hgemm_pack_b_size counts it in uint16 elements, as the others.
 * The layout depends on the ISA only through NR (8 portable, 16 AVX2, 32
 * AVX-512, with or without AVX512_BF16), not on the cache blocking.
 *
 * Threads split C into rectangles of whole register tiles, every element
 * computed by one thread with the same micro-kernel and k blocks whatever
 * their number: the results are bit-identical for any thread count, for a
 * given ISA (and bf16_dot) and blocking.
 */
#ifndef KN_HGEMM_H
#define KN_HGEMM_H

#include "kernels/gemm/gemm.h"

typedef enum kn_hgemm_type {
  KN_HGEMM_BF16 = 0, /* bfloat16: 8-bit exponent, 7-bit mantissa */
  KN_HGEMM_F16 = 1,  /* IEEE binary16 */
  KN_HGEMM_S8W = 2,  /* int8 weights, fp32 per-column scales (weight-only) */
  KN_HGEMM_TYPE_COUNT
} kn_hgemm_type;

/* Columns per packed B panel for this ISA. */
int32_t kn_hgemm_nr(kn_isa isa);

/* True when the bf16 products of `isa` can run on vdpbf16ps: isa is
 * KN_ISA_AVX512 and cpu_features (kn_cpu_features() bits) has
 * KN_CPU_AVX512BF16.  Packed B is the same either way. */
bool kn_hgemm_bf16_dot(kn_isa isa, uint64_t cpu_features);

/* uint16 elements of a packed B (k x n) of `type` (S8W: its block of
 * bytes, rounded up to a whole element). */
size_t kn_hgemm_pack_b_size(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n);
/* Pack op(B) (trans: B is stored n x k) from fp32, each value rounded to
 * `type` to nearest even (kn_f32_to_bf16 / kn_f32_to_f16), or for S8W
 * quantized per column (above; every byte of the block written). */
void kn_hgemm_pack_b(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n, const float *b,
                     int64_t ldb, bool trans, uint16_t *dst);
/* S8W: byte offset S of the int8 panels in a packed block (the fp32
 * scales are at offset 0). */
size_t kn_hgemm_s8w_panels_offset(kn_isa isa, int64_t n);
/* The same from values already of `type` (bf16 or fp16 initializers; not
 * S8W). */
void kn_hgemm_pack_b_half(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n,
                          const uint16_t *b, int64_t ldb, bool trans, uint16_t *dst);

/* Cache blocking (kc, mc, nc as kn_sgemm_blocking) from cache sizes (0 in
 * one: the common size), and from a kn_caches (NULL: the common sizes).
 * Loop order per task: jc (nc columns) > ic (mc rows) > pc (kc depth): the
 * C block (mc x nc, fp32) stays in L2 across the k blocks, the A block
 * (mc x kc) in L2, a B micro-panel (kc x NR halves) in L1. */
kn_sgemm_blocking kn_hgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3);
static inline kn_sgemm_blocking kn_hgemm_blocking_of(kn_isa isa, const kn_caches *c) {
  kn_caches k = kn_caches_or_common(c);
  return kn_hgemm_blocking_for(isa, k.l1d, k.l2, k.l3);
}

/* Rows [r0, r0 + rows) of C are final (every column, the epilogue and the
 * rounding of a half C done); c points at row r0: float, or uint16 when
 * c_half. */
typedef void (*kn_hgemm_rows_fn)(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows,
                                 int64_t n);

typedef struct kn_hgemm_args {
  kn_hgemm_type type;
  /* bf16 on vdpbf16ps (kn_hgemm_bf16_dot); ignored for F16 */
  bool bf16_dot;
  int64_t m, n, k;
  float alpha;
  /* A: row-major m x k, row stride lda (elements): float, or uint16 of
   * `type` when a_half */
  const void *a;
  int64_t lda;
  bool a_half;
  /* F16 and S8W with an fp32 A: round A to fp16 (nearest even) while it
   * is packed; false: A used as fp32 */
  bool round_a;
  /* B: packed by kn_hgemm_pack_b for this ISA and type (S8W: its block,
   * 4-byte aligned) */
  const uint16_t *b_packed;
  /* C, overwritten (never read): float, or uint16 of `type` when c_half;
   * row stride ldc elements */
  void *c;
  int64_t ldc;
  bool c_half;
  const kn_epilogue *ep; /* NULL: none; bias and residual are fp32 */
  /* called on the thread that computed the rows (threads then split C by
   * rows only), per MC block when a task spans every column, else per
   * task; NULL: none */
  kn_hgemm_rows_fn rows_done;
  void *rows_arg;
  /* NULL: kn_hgemm_blocking_for(isa, 0, 0, 0) */
  const kn_sgemm_blocking *blocking;
} kn_hgemm_args;

/* Scratch bytes for these arguments on `threads` threads (threads times
 * the size for one; depends on sizes, types and the blocking, not on
 * pointers). */
size_t kn_hgemm_scratch_size(kn_isa isa, const kn_hgemm_args *g, int32_t threads);
/* Run on the pool (NULL: this thread); scratch: kn_hgemm_scratch_size
 * bytes, 64-byte aligned. */
void kn_hgemm(kn_isa isa, kn_pool *pool, const kn_hgemm_args *g, void *scratch);

#endif
