/*
 * ElementwiseChain (domain "kiln"): a chain of float32 elementwise ops run
 * as one step (src/ops/ewchain.c; its vectorised interpreter is
 * src/tactics/ewchain_tactics.c), built by the ewchain pass
 * (src/passes/fuse_ewchain.c).  The opcodes are stored in model and engine
 * files: never renumber them, only append.
 */
#ifndef KN_EWCHAIN_H
#define KN_EWCHAIN_H

#include <stdint.h>

#include "op.h"

/* Operands a (and b for binary ops) and the instruction's two immediates
 * c0, c1 (consts[2k], consts[2k + 1]). */
typedef enum kn_ew_opcode {
  KN_EW_ADD = 0,         /* a + b */
  KN_EW_SUB = 1,         /* a - b */
  KN_EW_MUL = 2,         /* a * b */
  KN_EW_DIV = 3,         /* a / b */
  KN_EW_MAX = 4,         /* Max(a, b), NaN propagating as Max does */
  KN_EW_MIN = 5,         /* Min(a, b) */
  KN_EW_POW = 6,         /* powf(a, b) */
  KN_EW_POWC = 7,        /* powf(a, c0) */
  KN_EW_NEG = 8,
  KN_EW_ABS = 9,
  KN_EW_EXP = 10,
  KN_EW_LOG = 11,
  KN_EW_SQRT = 12,
  KN_EW_RECIPROCAL = 13,
  KN_EW_RELU = 14,
  KN_EW_LEAKYRELU = 15,  /* alpha c0 */
  KN_EW_SIGMOID = 16,
  KN_EW_TANH = 17,
  KN_EW_ERF = 18,
  KN_EW_HARDSIGMOID = 19, /* alpha c0, beta c1 */
  KN_EW_HARDSWISH = 20,
  KN_EW_CLIP = 21,       /* min c0, max c1 */
  KN_EW_SOFTPLUS = 22,
  KN_EW_GELU = 23,       /* kiln Gelu, approximate "none" */
  KN_EW_GELU_TANH = 24,  /* kiln Gelu, approximate "tanh" */
  /* QuantizeLinear then DequantizeLinear per tensor (scale c0, zero point
   * c1) to u8 / s8 codes: (saturate(round_half_even(a / c0) + c1) - c1) * c0,
   * a NaN giving code 0, in the ops' own float arithmetic (the Q/DQ pairs
   * ONNX Runtime's quantizer leaves on fp32 edges) */
  KN_EW_QDQ_U8 = 25,
  KN_EW_QDQ_S8 = 26,
  KN_EW_COUNT
} kn_ew_opcode;

/* Opcodes reading two operands (the others read one; their b is -1). */
static inline int kn_ew_binary(int64_t op) {
  return op >= KN_EW_ADD && op <= KN_EW_POW;
}

/* What one instruction costs per element, in vector float operations of
 * the interpreter's approximations (src/kernels/eltwise): 1 for the
 * arithmetic and clamps, more for division and square roots (slow
 * pipes), and for exp, log, tanh, erf and what is built on them (the
 * polynomial and range reduction).  The chain's FLOP count, and so the IO
 * model's compute time for it and the ewchain pass's recomputation
 * decisions, are in these units. */
static inline double kn_ew_cost(int64_t op) {
  switch (op) {
  case KN_EW_DIV: case KN_EW_SQRT: case KN_EW_RECIPROCAL: return 4;
  case KN_EW_HARDSWISH: case KN_EW_HARDSIGMOID: return 3;
  case KN_EW_QDQ_U8: case KN_EW_QDQ_S8: return 8; /* a division, rounding, clamps */
  case KN_EW_EXP: case KN_EW_LOG: case KN_EW_TANH: case KN_EW_ERF: return 15;
  case KN_EW_SIGMOID: return 18;
  case KN_EW_GELU: case KN_EW_GELU_TANH: return 22;
  case KN_EW_POW: case KN_EW_POWC: case KN_EW_SOFTPLUS: return 32;
  default: return 1;
  }
}

/* ---- what the tactics share with the reference (src/ops/ewchain.c) ---- */

/* A chain's program: n instructions over n_in inputs (the attributes). */
typedef struct kn_ewchain_prog {
  int32_t n, n_in;
  const int64_t *ops, *args;
  const float *consts;
} kn_ewchain_prog;

/* The program of ctx's step, checked (opcodes, operands, Q/DQ constants). */
kn_status kn_ewchain_read_prog(kn_op_ctx *ctx, kn_ewchain_prog *p) KN_WUR;

/* Result slots: a result's slot is free again after its last reader.
 * slot, last_use and free_list hold p->n entries each; returns the number
 * of slots. */
int32_t kn_ewchain_slots(const kn_ewchain_prog *p, int32_t *slot, int32_t *last_use,
                         int32_t *free_list);

/* An operand of one block: p[i * step], step 1 or 0 (one broadcast value). */
typedef struct kn_ewchain_arg {
  const float *p;
  int32_t step;
} kn_ewchain_arg;

/* d[0..cnt) = op(A, B) with immediates c0, c1, the reference's element
 * code.  d may be A or B (a result slot reused in place): every element
 * is read before it is written. */
void kn_ewchain_exec(int64_t op, float c0, float c1, kn_ewchain_arg A, kn_ewchain_arg B,
                     float *d, int32_t cnt);

#endif
