/*
 * The GEMM driver: one BLIS-style loop nest, blocking, packing plan and
 * thread split for every GEMM family of kiln: fp32 (gemm.h), bf16 / fp16 /
 * int8-weight (hgemm/hgemm.h) and u8 x s8 int8 (qgemm/qgemm.h).  Not part
 * of any family's API: each family's public functions fill a descriptor
 * (kn_gemm_desc: its micro-kernels, packers, constants, as BLIS's context)
 * and the operands of one product (kn_gemm_op), and call kn_gemm_driver_run.
 *
 * What the driver owns:
 *  - the cache blocking from the caches and element sizes (kn_gemm_driver_blocking,
 *    from a family's kn_gemm_block_rule), and per product the depth passes
 *    (equal passes of the family's kc rule, in units of its depth group),
 *    mc and nc;
 *  - the operand modes (A: prepacked, read in place, or packed per block;
 *    B: prepacked, read in place, or packed per block) and the per-thread
 *    scratch: the packed A block, the packed B block, a C block buffer
 *    (mc x nc fp32 results before a half-precision store, or s32 partial
 *    sums between passes), an MR x NR tile buffer;
 *  - the loop nest, per task (a rectangle of whole register tiles of C):
 *
 *      k_outer (fp32, BLIS):           otherwise (C block kept over k):
 *      for jc in steps of NC           for jc in steps of NC
 *        for pc in steps of KC           for ic in steps of MC
 *          B block packed (kc x nc)        for pc in steps of KC
 *          for ic in steps of MC             A block packed (mc x kc)
 *            A block packed (mc x kc)        for jr, ir: micro-kernel
 *            for jr in steps of NR
 *              for ir in steps of MR
 *                micro-kernel
 *
 *    after the last pass of a tile: the epilogue not fused in the store,
 *    then the family's finish (a half C rounded, a u8 C requantized);
 *  - how passes accumulate (kn_gemm_acc): fp32 partial results in C (or the
 *    C block buffer), or exact s32 partial sums in the C block buffer;
 *  - the epilogue split: bias, a residual before the activation, Relu and
 *    Clip in the micro-kernel's store (kn_sgemm_ustore) where the family's
 *    store does them, the rest by kn_f32_epilogue on the finished tile; the
 *    row epilogue (rows_done) per MC block of rows when one NC block spans
 *    every column, else per task;
 *  - the thread split: a tm x tn grid of rectangles of whole register tiles
 *    chosen by a cost model (compute with tile padding, plus packing
 *    repeated per rectangle); every element of C is computed by one task,
 *    with the same micro-kernel and passes whatever the grid, so results do
 *    not depend on the thread count;
 *  - one row against a raw row-major B streamed row by row (the family's
 *    gemv), split over threads by columns.
 *
 * What a family supplies (kn_gemm_desc): MR x NR and the micro-kernels of
 * the ISA (called directly where they have the fp32 store's ABI or the
 * s32 one, kn_qgemm_ustore, else through its kernel hook: one tile, one
 * pass), its A packer (one tile of
 * rows, one pass, converting as it packs), its B packer when B may come
 * raw, the bytes of a packed A panel, its depth group, its pass rules
 * (kc_scale, kc_one_panel, kc_align, wide_one_pass), loop order,
 * tile-sharing rule, accumulation, whether its store fuses the epilogue,
 * the costs of packing for the thread grid, and its finish (the store to a
 * C of another type).
 */
#ifndef KN_GEMM_DRIVER_H
#define KN_GEMM_DRIVER_H

#include "kernels/gemm/gemm-ukernel.h"
#include "kernels/gemm/gemm.h"

/* ---- blocking ------------------------------------------------------------------ */

/* How a family sizes its cache blocks (kn_gemm_driver_blocking):
 *   kc = (L1 * kc_l1_num / kc_l1_den) / (NR * b_bytes): a B micro-panel
 *        (kc x NR elements of b_bytes) in that share of L1; rounded down
 *        to 16, then within [64, kc_max];
 *   mc = (L2 / mc_l2_den) / (kc * a_bytes), whole MR panels: the A block
 *        (mc x kc elements of a_bytes) in that share of L2; within
 *        [MR, mc_panels * MR];
 *   kc_l2_den (nonzero): kc again, now that mc is known, so that the A
 *        block and a B micro-panel ((mc + NR) x kc elements of a_bytes)
 *        take (L2 / kc_l2_den): rounded down to 64, within [64, kc_l2_max];
 *   nc, whole NR panels within [nc_min * NR, nc_max * NR]:
 *        nc_b_block: the B block (kc x nc elements of b_bytes) in
 *        min(L3 / 4, L2) (in L2 too when the L3 is shared by many cores);
 *        else the C block (mc x nc of 4 bytes: fp32 results or s32 sums)
 *        in (L2 / nc_l2_den). */
typedef struct kn_gemm_block_rule {
  int32_t kc_l1_num, kc_l1_den, b_bytes, kc_max;
  int32_t mc_l2_den, a_bytes, mc_panels;
  int32_t kc_l2_den, kc_l2_max;
  bool nc_b_block;
  int32_t nc_l2_den, nc_min, nc_max;
} kn_gemm_block_rule;

/* The blocking of `rule` for an MR x NR tile on caches c (0 in a size:
 * its common size, kernels.h). */
kn_sgemm_blocking kn_gemm_driver_blocking(const kn_gemm_block_rule *rule, int64_t mr,
                                          int64_t nr, kn_caches c);

/* ---- the descriptor ------------------------------------------------------------ */

typedef struct kn_gemm_op kn_gemm_op;

/* How partial results of depth passes accumulate. */
typedef enum kn_gemm_acc {
  /* fp32 in the fp32 result (C, or the C block buffer): the micro-kernel
   * adds the tile's values on every pass but the first (st.accumulate) */
  KN_GEMM_ACC_C,
  /* exact s32 partial sums in the C block buffer, tiles of MR x NR (row
   * stride NR) in the order of the block's row panels then column panels,
   * between passes (one MR x NR tile buffer when there is one pass); the
   * fp32 (or s32) result written on the last pass */
  KN_GEMM_ACC_S32,
} kn_gemm_acc;

/* One micro-kernel call: a tile of C for one depth pass. */
typedef struct kn_gemm_tile {
  int64_t i, j;   /* first row and column of C */
  int64_t h, w;   /* rows (the micro-kernel for h rows; <= MR) and columns (<= NR) */
  int64_t kc;     /* depth of the pass, in units (kn_gemm_desc.kunit steps) */
  bool first, last;
  const void *a;  /* A micro-panel: packed (stride `as` values per depth step:
                   * MR, or a shared tile's height) or raw (in place) */
  int64_t as;
  const void *b;  /* B micro-panel: packed (bs = NR) or raw (bs = ldb) */
  int64_t bs;
  float *c;       /* the tile's fp32 result: in C, in the C block buffer or
                   * in the tile buffer; NULL when the output is not fp32 */
  int64_t ldc;
  int32_t *acc;   /* KN_GEMM_ACC_S32: the tile's partial sums */
  /* the fused store (families whose store fuses the epilogue): alpha,
   * accumulate, and on the last pass bias, residual, clamp */
  const kn_sgemm_ustore *st;
} kn_gemm_tile;

/* The micro-kernel ABI of a store with per-column scales (hgemm-ukernel.h's
 * kn_hgemm_ukernel_fn): kn_sgemm_ukernel_fn's without a B stride, with cs
 * (the tile's column scales on the last pass, or NULL). */
typedef void (*kn_gemm_cs_ukernel_fn)(int64_t kc, const void *a, int64_t as, const void *b,
                                      float *c, int64_t ldc, int64_t nr,
                                      const kn_sgemm_ustore *s, const float *cs);

typedef struct kn_gemm_desc {
  const void *uk;  /* the ISA's micro-kernel table (the family's type) */
  int32_t mr, nr;  /* register tile */
  int32_t kunit;   /* depth steps per unit (int8: the group G; else 1):
                    * passes, packed strides and kernel depths count units */
  /* depth passes (before they are made equal): kc_scale times the
   * blocking's kc; with one row panel (m <= MR) kc_one_panel times it, or
   * the whole depth when kc_one_panel is 0; every pass but the last a
   * multiple of kc_align units */
  int32_t kc_scale, kc_one_panel, kc_align;
  bool k_outer;        /* loop order (above) */
  bool row_pairs;      /* a short row remainder (at most MR / 2 rows after a
                        * full panel) shares the last full panel's rows as two
                        * tiles of about equal height (A packed here only; the
                        * packed A layout must be linear in rows: a tile at
                        * row r of a block at r * a_panel_bytes / MR) */
  bool wide_one_pass;  /* with one pass, every column in one block (no C
                        * block buffer needed between passes) */
  kn_gemm_acc acc;
  bool fused_store;    /* the store applies bias, residual, Relu/Clip */
  /* thread grid costs, in multiply-adds per element: packing A (per
   * column block), packing B, producing B by the op's callback */
  double cost_a, cost_b, cost_b_fn;
  /* shares of the grid estimated as whole panels of the largest task (and
   * one row panel never split): int8's model */
  bool coarse_shares;

  /* Bytes of a packed A panel (MR rows) of kc units. */
  size_t (*a_panel_bytes)(const kn_gemm_op *op, int64_t kc);
  /* Pack rows [i0, i0 + h) of A, depth units [k0, k0 + kc), as one tile of
   * `as` rows (zero past h) at dst. */
  void (*pack_a)(const kn_gemm_op *op, int64_t i0, int64_t h, int64_t as, int64_t k0,
                 int64_t kc, void *dst);
  /* Pack depth units [k0, k0 + kc) of columns [j0, j0 + w) of B as one
   * panel (NR columns, zero past w); NULL when B is always prepacked. */
  void (*pack_b)(const kn_gemm_op *op, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                 void *dst);
  /* The micro-kernels, fn[h - 1] for h rows, called by the driver itself
   * where the family has the fp32 store's ABI (f32_fn: gemm-ukernel.h's)
   * or that with column scales (cs_fn: op->col_scale), so that a tile
   * costs no call more than the kernel's; else kernel, a hook that calls
   * the family's kernel on one tile for one pass. */
  const kn_sgemm_ukernel_fn *f32_fn;
  const kn_gemm_cs_ukernel_fn *cs_fn;
  /* or the s32 store's ABI (acc KN_GEMM_ACC_S32; op->s32 the store's
   * fields that hold for the whole product), s32_si_fn[h - 1], where not
   * NULL, for the last pass when op->s32.si takes the exact sums */
  const kn_qgemm_ukernel_fn *s32_fn, *s32_si_fn;
  void (*kernel)(const kn_gemm_op *op, const kn_gemm_tile *t);
  /* After the last pass and the epilogue: store the fp32 tile t->c to the
   * output (half C, u8 C); NULL when C is fp32. */
  void (*finish)(const kn_gemm_op *op, const kn_gemm_tile *t);
  /* One row against a raw B: C[0][j0, j1) = alpha * A B (op->row_stream). */
  void (*gemv)(const kn_gemm_op *op, int64_t j0, int64_t j1);
} kn_gemm_desc;

/* ---- one product ------------------------------------------------------------ */

/* Where the fp32 result of a tile goes before the output. */
typedef enum kn_gemm_stage {
  KN_GEMM_STAGE_C,     /* C itself (fp32) */
  KN_GEMM_STAGE_BLOCK, /* the C block buffer (mc x nc fp32, row stride nc): a
                        * half C accumulated there over the passes, then finished */
  KN_GEMM_STAGE_TILE,  /* the tile buffer (MR x NR fp32, row stride NR), then finished */
  KN_GEMM_STAGE_NONE,  /* the micro-kernel writes the output (s32); no epilogue */
} kn_gemm_stage;

/* Row epilogue: rows [r0, r0 + rows) of C are final; c points at row r0
 * (row stride ldc elements). */
typedef void (*kn_gemm_rows_fn)(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows,
                                int64_t n);

struct kn_gemm_op {
  const kn_gemm_desc *desc;
  const void *ctx;  /* the family's: its arguments, for its hooks */
  kn_isa isa;       /* of kn_f32_epilogue */
  int64_t m, n;
  int64_t k;        /* depth steps of the product (0: none; the store still
                     * writes alpha * 0 and the epilogue) */
  kn_sgemm_blocking blocking;
  /* A: prepacked panels (a_packed: panel p at p * a_ld bytes, depth unit u
   * at u * a_kb in it); else raw rows read in place when m <= a_direct_rows
   * (row i, unit u at a + i * a_rs + u * a_ks bytes; the kernel's stride
   * a_as); else packed per block by desc->pack_a */
  const void *a_packed;
  size_t a_ld, a_kb;
  const void *a;
  size_t a_rs, a_ks;
  int64_t a_as, a_direct_rows;
  /* B: prepacked panels (b_packed: panel q at q * b_ld bytes, unit u at
   * u * b_kb; b_kb is also the bytes per unit of a panel packed here);
   * else raw and readable in place (b_direct: unit u, column j at b + u *
   * b_rs + j * b_cs bytes, the kernel's stride b_bs), used so when m <= 2
   * MR (packing would cost a pass over B for one or two uses); else packed
   * per pass by desc->pack_b (b_fn: from a callback, cost_b_fn) */
  const void *b_packed;
  size_t b_ld, b_kb;
  const void *b;
  size_t b_rs, b_cs;
  int64_t b_bs;
  bool b_direct, b_fn;
  /* C: row stride ldc elements of c_esize bytes */
  void *c;
  int64_t ldc;
  size_t c_esize;
  kn_gemm_stage stage;
  float alpha;
  bool alpha_in_store; /* st.scale: the store multiplies by alpha */
  const float *col_scale; /* cs_fn: scales per column of C (the last pass's cs) */
  /* s32_fn: colsum and w_scale from column 0, a_scale, a_zero; si (row
   * stride ldc) or NULL; the driver sets the rest per tile */
  kn_qgemm_ustore s32;
  const kn_epilogue *ep;
  kn_gemm_rows_fn rows_done;
  void *rows_arg;
  bool row_stream; /* one row against a raw B by desc->gemv */
};

/* Scratch bytes of op on `threads` threads: threads times the share of one
 * (share: its buffers plus 64 bytes of alignment slack), so a caller may
 * split it into per-thread shares for products run with pool NULL. */
size_t kn_gemm_driver_scratch_size(const kn_gemm_op *op, int32_t threads);
/* Run op on the pool (NULL: this thread); scratch: kn_gemm_driver_scratch_size
 * bytes, 64-byte aligned. */
void kn_gemm_driver_run(const kn_gemm_op *op, kn_pool *pool, void *scratch);

#endif
