/*
 * Vectorised elementwise kernels: unary activations and math, binary ops
 * with broadcasting, softmax / log-softmax and row normalisation (layer,
 * instance, group).
 *
 * Two levels:
 *  - ukernels (kn_ew_ukernels, one table per ISA in eltwise-<isa>.c, all
 *    generated from eltwise-impl.h): single-threaded loops over contiguous
 *    rows; short rows (16-32 floats, the GEMM epilogue's tiles) take masked
 *    tails, never a scalar loop.
 *  - drivers (kn_ew_*, eltwise.c): what the ops call.  They take the
 *    context's kn_rt, split large tensors over its thread pool (each output
 *    element is computed by one task with lane-wise arithmetic, so results
 *    do not depend on the thread count) and run small ones inline.
 *
 * exp, erf, tanh and sigmoid are polynomial approximations (eltwise-impl.h
 * gives each one's measured maximum error; tests/unit/test_vmath.c
 * re-measures them over the float range).  Every other op is exactly the
 * reference op's float expression.  NaN propagates as in the reference ops.
 */
#ifndef KN_ELTWISE_H
#define KN_ELTWISE_H

#include "kernels/kernels.h"

/* Unary ops: the activations (kn_act values) followed by the other math
 * ops the elementwise ops need. */
typedef enum kn_vop {
  KN_VOP_EXP = KN_ACT_COUNT,
  KN_VOP_ERF,
  KN_VOP_NEG,
  KN_VOP_ABS,
  KN_VOP_SQRT,
  KN_VOP_RECIPROCAL,
  KN_VOP_COUNT
} kn_vop;

/* Binary ops (a op b). */
typedef enum kn_vbin {
  KN_VBIN_ADD,
  KN_VBIN_SUB,
  KN_VBIN_MUL,
  KN_VBIN_DIV,
  KN_VBIN_MAX,   /* NaN in either operand gives NaN (binary.c's Max) */
  KN_VBIN_MIN,
  KN_VBIN_PRELU, /* a < 0 ? a * b : a */
  KN_VBIN_COUNT
} kn_vbin;

/* Per-ISA single-threaded kernels. */
typedef struct kn_ew_ukernels {
  /* y[i] = op(x[i]) (kn_act or kn_vop; p holds alpha, beta, lo, hi);
   * x == y allowed. */
  void (*unary)(int op, const kn_act_params *p, const float *x, float *y, int64_t n);
  /* y[i] = a[i * sa] op b[i * sb], sa and sb 0 or 1; y may be a or b. */
  void (*binary)(int op, const float *a, int sa, const float *b, int sb, float *y,
                 int64_t n);
  void (*epilogue)(const kn_epilogue *ep, float *c, int64_t ldc, int64_t r0, int64_t m,
                   int64_t c0, int64_t n);
  /* Softmax (or log-softmax) of `rows` contiguous rows of len elements. */
  void (*softmax_rows)(const float *x, float *y, int64_t rows, int64_t len, bool log);
  /* Softmax along columns: cols (<= KN_EW_SOFTMAX_COLS) lanes, each of len
   * elements at stride `stride` (element l of lane i at x[l * stride + i]). */
  void (*softmax_cols)(const float *x, float *y, int64_t len, int64_t stride, int64_t cols,
                       bool log);
  /* Normalise rows (as norm.c's rownorm, in float): row r, element j uses
   * parameter (r % pmod) * pmul + j / seg of sc and bi; mean_out / inv_out
   * (per row, may be NULL) receive the mean and 1 / sqrt(var + eps). */
  void (*norm_rows)(const float *x, float *y, int64_t rows, int64_t len, double eps,
                    int64_t seg, int64_t pmod, int64_t pmul, const float *sc,
                    const float *bi, double *mean_out, double *inv_out);
} kn_ew_ukernels;

#define KN_EW_SOFTMAX_COLS 256

/* The table for `isa` (the portable one when this build lacks the ISA). */
const kn_ew_ukernels *kn_ew_get(kn_isa isa);

extern const kn_ew_ukernels kn_ew_portable;
#ifdef KN_HAVE_X86_KERNELS
extern const kn_ew_ukernels kn_ew_avx2;
extern const kn_ew_ukernels kn_ew_avx512;
#endif

/* ---- drivers (threaded over rt->pool when large) -------------------------- */

/* Tensors of at least this many elements are split over the pool. */
#define KN_EW_PARALLEL_MIN ((int64_t)1 << 16)

void kn_ew_unary(kn_rt *rt, int op, const kn_act_params *p, const float *x, float *y,
                 int64_t n);

/* Broadcast geometry of up to KN_EW_MAX_IN inputs against an output: size-1
 * dims dropped, neighbouring dims merged where every input walks them alike.
 * Row r of the output (len = dims[rank - 1] elements) reads input k from
 * offset kn_ew_bcast_offset(b, k, r) with stride step[k] (0 or 1). */
#define KN_EW_MAX_IN 64
typedef struct kn_ew_bcast {
  int32_t n_in, rank;
  int64_t dims[KN_MAX_RANK];
  int64_t strides[KN_EW_MAX_IN][KN_MAX_RANK];
  int64_t len, rows;
  int32_t step[KN_EW_MAX_IN];
} kn_ew_bcast;

/* false when there are more than KN_EW_MAX_IN inputs (the caller then keeps
 * its reference path). */
bool kn_ew_bcast_init(kn_ew_bcast *b, int32_t n_in, const int32_t *ranks,
                      const int64_t *const *dims, int32_t rank, const int64_t *dout);
int64_t kn_ew_bcast_offset(const kn_ew_bcast *b, int32_t k, int64_t row);

/* y (shape dout) = a op b with numpy broadcasting (a, b of ranks ra, rb);
 * y may be a or b when that one has y's shape. */
void kn_ew_broadcast(kn_rt *rt, int op, const float *a, int32_t ra, const int64_t *da,
                  const float *b, int32_t rb, const int64_t *db, float *y, int32_t ro,
                  const int64_t *dout);

/* Softmax / log-softmax of x viewed as (outer, len, inner), along len. */
void kn_ew_softmax(kn_rt *rt, const float *x, float *y, int64_t outer, int64_t len,
                   int64_t inner, bool log);

/* norm_rows over the pool (see kn_ew_ukernels.norm_rows). */
void kn_ew_norm(kn_rt *rt, const float *x, float *y, int64_t rows, int64_t len, double eps,
                int64_t seg, int64_t pmod, int64_t pmul, const float *sc, const float *bi,
                double *mean_out, double *inv_out);

#endif
