/*
 * The IO model (docs/ARCHITECTURE.md, "The IO model"): a step's cost as data moved
 * across the memory hierarchy, in the manner of Abbott and Zardini,
 * "FlashAttention on a Napkin" (2024).
 *
 * A step is described by its loop nest (kn_loopnest): the iteration
 * dimensions with their extents, in loop order from outermost to
 * innermost, and the tensors it touches, each indexed by a subset of the
 * dimensions.  Executed with tiles T_d at some memory level of capacity M
 * (the tiles of all tensors fit M together), tensor X is brought in as
 * tiles of prod_{d in X} T_d elements, once per iteration of every tile
 * loop down to the innermost loop that changes X's tile (one over X's
 * dimensions with more than one tile): loops inside that one leave X's
 * tile unchanged, so it stays (is reused); loops outside it that do not
 * index X bring it in again.  An output is written
 * once per tile, and read back too when a reduction loop lies outside its
 * innermost loop (partial sums go out and come back).
 *
 * For a matmul C[a,c] = A[a,b] B[b,c] with square tiles t of A and B's
 * columns and rows (loop order a, c, b) this gives abc/t + abc/t + ac
 * transfers, the known 2abc/sqrt(M) + ac with t = sqrt(M); for attention
 * streamed over keys with query tiles of Tq rows, 2qxd/Tq + 2qd, which is
 * 4qxd^2/M + 2qd when the query and output tiles fill M (Tq = M / 2d).
 * tests/unit/test_iomodel.c checks both, and checks the counts against a
 * tiled loop instrumented to count what it copies.
 */
#ifndef KN_IOMODEL_H
#define KN_IOMODEL_H

#include "core/core.h"
#include "ir/ir.h"
#include "tactics/loops.h"

/* Bytes the tiles of one innermost iteration hold together. */
double kn_io_footprint(const kn_loopnest *l, const int64_t *tiles);

/* Bytes moved for each tensor (per_tensor may be NULL) and in total with
 * tiles `tiles` (1 <= tiles[d] <= extent[d]; a partial last tile counts
 * as a whole one, as a real loop's copies would). */
double kn_io_transfers(const kn_loopnest *l, const int64_t *tiles, double *per_tensor);

/* The tiles that fit `capacity` bytes and move the fewest bytes (ties: the
 * larger tiles), searched over powers of two and the extents, with the
 * dimensions in `whole` (bit d) kept whole; *bytes gets their transfers.
 * False when nothing fits (then every other tile is 1). */
bool kn_io_best_tiles(const kn_loopnest *l, double capacity, uint32_t whole, int64_t *tiles,
                      double *bytes);

/* ---- per step ------------------------------------------------------------ */

/* The boundaries the model counts: registers<->L1, L1<->L2, L2<->L3,
 * L3<->DRAM (index = the farther level's position among the machine's
 * levels, minus one; registers are level -1). */
#define KN_IO_BOUNDARIES 4

typedef struct kn_io_step {
  double flops;
  double bytes[KN_IO_BOUNDARIES]; /* moved across each boundary */
  double time_s[KN_IO_BOUNDARIES + 2]; /* compute, each boundary, overhead */
  double roofline_s;   /* max(compute, boundaries) */
  double factor;       /* the machine's factor for the step's family (1: none) */
  double predicted_s;  /* factor x roofline + overhead */
  int32_t bound;       /* 0 compute, 1 + boundary index (1 = L1 ... 4 = DRAM),
                          5 overhead */
  int32_t threads;     /* the threads predicted for: 1 for a step too small to split */
  bool modelled;       /* from the op's loop nest; false: streamed bytes */
  uint32_t unfit;      /* bit b: the live tiles do not fit the nearer level of
                          boundary b (a row epilogue's whole rows too long) */
} kn_io_step;

/* The first boundary whose tiles keep a loop nest's `whole` dimensions
 * whole: L2<->L3 (the row epilogue works on blocks of rows in the L2). */
#define KN_IO_WHOLE_FROM 2

/* Names for kn_io_step.bound: "compute", "L1", "L2", "L3", "DRAM",
 * "overhead". */
const char *kn_io_bound_name(int32_t bound);

/* The kernel family of a tactic (KN_FAM_*, core/machine.h), whose factor
 * (kn_machine.factors) scales its steps' roofline time; -1 for the
 * reference kernels (tactic 0) and tactics of no family: factor 1. */
int32_t kn_io_family(int32_t tactic);

/* Predict node i of m's top-level graph on machine `mach` with `threads`
 * threads (1: one core's peak and bandwidths; more: the all-threads
 * figures).  Weights (constants) start in DRAM, or in L3 when all the
 * model's weights fit it; an activation starts at the nearest level that
 * holds it. */
void kn_io_predict(const kn_ir_model *m, int32_t i, const kn_machine *mach, int32_t threads,
                   kn_io_step *out);

/* The same for a step described by its loop nest alone (a fusion the
 * passes are weighing, not yet in the graph), with m's weights; no
 * tactic yet, so no family's factor (as for the passes' other steps). */
void kn_io_predict_nest(const kn_ir_model *m, const kn_loopnest *l, const kn_machine *mach,
                        int32_t threads, kn_io_step *out);

/* What a diagram of node i needs (docs/MACHINE.md), as compact JSON
 * (malloc'd; NULL when the op has no loop nest or out of memory): the ONNX
 * ops it covers, its axes with their sizes, its tensors with their axes,
 * bytes, role and the level each lives at, and every level change of the
 * fused step (tensor, from, to, bytes, repetitions, tile) and of the same
 * ops unfused, with the bytes fusion saves at each boundary. */
/* What fusing node i's ONNX ops into one step saves, by the model: run
 * apart, each op after the first would read the step's output and write it
 * back across every boundary out to the level where it lives.  *bytes per
 * boundary crossed, *seconds at those levels' bandwidths plus a step's
 * overhead each, *n_ops the ops covered, *farthest the farthest boundary
 * crossed.  False when the step covers one op. */
bool kn_io_fusion_saving(const kn_ir_model *m, int32_t i, const kn_machine *mach, int32_t threads,
                         double *bytes, double *seconds, int32_t *n_ops, int32_t *farthest);

char *kn_io_diagram_json(const kn_ir_model *m, int32_t i, const kn_machine *mach,
                         int32_t threads);

#endif
