/*
 * ElementwiseChain (domain "kiln"): a chain of float32 elementwise and
 * broadcast ops computed in one pass over the output, with no intermediate
 * tensors (made by src/passes/fuse_ewchain.c).
 *
 * Inputs: the chain's external tensors, any number (at least one), all
 * float32, numpy-broadcastable; the output has their broadcast shape.
 * Attributes describe a program of n instructions (opcodes in ewchain.h):
 *   ops    ints, n: the opcode of each instruction
 *   args   ints, 2n: operands a, b of each instruction; operand j < n_in is
 *          input j, operand n_in + k the result of instruction k (< this
 *          one); b is -1 for one-operand ops
 *   consts floats, 2n: immediates c0, c1 of each instruction (Clip bounds,
 *          LeakyRelu / HardSigmoid alpha and beta, a constant exponent)
 * The output is the last instruction's result.
 *
 * Kernel: dims are coalesced where every input is contiguous or broadcast
 * across them alike, then each row along the innermost dim is evaluated in
 * blocks of EW_BLOCK elements: inputs are read in place (stride 1) or as one
 * value (stride 0), instruction results live in a few EW_BLOCK-float
 * scratch slots (reused once a result is dead, so the working set stays in
 * L1) and the last instruction writes straight into the output.  Each
 * element expression is the standalone op's float32 expression (unary.c,
 * binary.c, activation.c), so the results equal the unfused ops'.  The
 * vectorised interpreter of built models is src/tactics/ewchain_tactics.c.
 */
#include "ewchain.h"

#include <float.h>
#include <math.h>

#define EW_BLOCK 256

typedef kn_ewchain_prog ew_prog;

kn_status kn_ewchain_read_prog(kn_op_ctx *ctx, ew_prog *p) {
  p->n_in = ctx->n_in;
  p->n = kn_attr_ints(ctx, "ops", &p->ops);
  int32_t na = kn_attr_ints(ctx, "args", &p->args);
  int32_t nc = kn_attr_floats(ctx, "consts", &p->consts);
  if (p->n < 1)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute ops is empty, expected an opcode list");
  if (na != 2 * p->n || nc != 2 * p->n)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "attributes args and consts have %d and %d entries, expected 2 per "
                      "instruction (%d)",
                      (int)na, (int)nc, (int)(2 * p->n));
  for (int32_t k = 0; k < p->n; k++) {
    int64_t op = p->ops[k], a = p->args[2 * k], b = p->args[2 * k + 1];
    int64_t lim = (int64_t)p->n_in + k;
    if (op < 0 || op >= KN_EW_COUNT)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "instruction %d has unknown opcode %lld",
                        (int)k, (long long)op);
    if (op == KN_EW_QDQ_U8 || op == KN_EW_QDQ_S8) {
      /* a scale and an integral zero point of the code type (the executor
       * converts the zero point to an integer) */
      float sc = p->consts[2 * k], z = p->consts[2 * k + 1];
      float lo = op == KN_EW_QDQ_U8 ? 0.0f : -128.0f, hi = op == KN_EW_QDQ_U8 ? 255.0f : 127.0f;
      if (!(sc > 0.0f) || !isfinite(sc) || !(z >= lo && z <= hi) || z != nearbyintf(z))
        return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                          "instruction %d (opcode %lld) has scale %g and zero point %g; "
                          "expected a positive finite scale and an integer zero point in "
                          "[%g, %g]",
                          (int)k, (long long)op, (double)sc, (double)z, (double)lo, (double)hi);
    }
    bool bad = a < 0 || a >= lim || (kn_ew_binary(op) ? (b < 0 || b >= lim) : b != -1);
    if (bad)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "instruction %d (opcode %lld) has operands %lld, %lld; expected "
                        "inputs or earlier results (< %lld)%s",
                        (int)k, (long long)op, (long long)a, (long long)b, (long long)lim,
                        kn_ew_binary(op) ? "" : " and -1 as the second");
  }
  return KN_OK;
}

static const kn_dtype f32_only[] = {KN_DTYPE_F32, 0};

static kn_status ew_infer(kn_op_ctx *ctx) {
  ew_prog p;
  kn_status st = kn_ewchain_read_prog(ctx, &p);
  if (st) return st;
  int32_t r = 0;
  int64_t d[KN_MAX_RANK];
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t;
    if ((st = kn_in_req(ctx, i, &t))) return st;
    if (t->dtype && (st = kn_check_dtype(ctx, i, t, f32_only))) return st;
    if (r < 0) continue;
    if (t->rank < 0) {
      r = -1;
      continue;
    }
    int32_t ro;
    int64_t tmp[KN_MAX_RANK];
    if ((st = kn_broadcast(ctx, r, d, t->rank, t->dims, &ro, tmp))) return st;
    r = ro;
    memcpy(d, tmp, sizeof(int64_t) * (size_t)ro);
  }
  kn_out_set(ctx, 0, KN_DTYPE_F32, r, r >= 0 ? d : NULL);
  return KN_OK;
}

/* ---- element kernels ------------------------------------------------------ */

static inline float ew_sigmoid(float x) {
  return x >= 0 ? 1 / (1 + expf(-x)) : expf(x) / (1 + expf(x));
}

/* As clip_f32 (unary.c): NaN passes through, min above max gives max. */
static inline float ew_clip(float x, float lo, float hi) {
  float t = x < lo ? lo : x;
  return t > hi ? hi : t;
}

/* QuantizeLinear's code then DequantizeLinear's value, as quant.c computes
 * them: round half to even in float, the zero point added, NaN to 0,
 * saturated to [lo, hi]; then (code - zero) * scale in float. */
static inline float ew_qdq(float x, float scale, float zero, float lo, float hi) {
  double v = (double)nearbyintf(x / scale) + (double)zero;
  if (isnan(v)) v = 0;
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return ((float)(int32_t)v - zero) * scale;
}

typedef kn_ewchain_arg ew_arg;

#define EW_UNARY(EXPR)                                 \
  do {                                                 \
    if (A.step) {                                      \
      for (int32_t i = 0; i < cnt; i++) {              \
        float x = A.p[i];                              \
        d[i] = (EXPR);                                 \
      }                                                \
    } else {                                           \
      float x = A.p[0];                                \
      float v = (EXPR);                                \
      for (int32_t i = 0; i < cnt; i++) d[i] = v;      \
    }                                                  \
  } while (0)

#define EW_BINARY(EXPR)                                \
  do {                                                 \
    if (A.step && B.step) {                            \
      for (int32_t i = 0; i < cnt; i++) {              \
        float x = A.p[i], y = B.p[i];                  \
        d[i] = (EXPR);                                 \
      }                                                \
    } else if (A.step) {                               \
      float y = B.p[0];                                \
      for (int32_t i = 0; i < cnt; i++) {              \
        float x = A.p[i];                              \
        d[i] = (EXPR);                                 \
      }                                                \
    } else if (B.step) {                               \
      float x = A.p[0];                                \
      for (int32_t i = 0; i < cnt; i++) {              \
        float y = B.p[i];                              \
        d[i] = (EXPR);                                 \
      }                                                \
    } else {                                           \
      float x = A.p[0], y = B.p[0];                    \
      float v = (EXPR);                                \
      for (int32_t i = 0; i < cnt; i++) d[i] = v;      \
    }                                                  \
  } while (0)

/* sqrt(2/pi) and the cubic coefficient of Gelu's tanh form (activation.c) */
#define EW_GELU_BETA 0.7978845608028654
#define EW_GELU_KAPPA 0.044715

void kn_ewchain_exec(int64_t op, float c0, float c1, ew_arg A, ew_arg B, float *d,
                     int32_t cnt) {
  switch ((kn_ew_opcode)op) {
  case KN_EW_ADD: EW_BINARY(x + y); break;
  case KN_EW_SUB: EW_BINARY(x - y); break;
  case KN_EW_MUL: EW_BINARY(x * y); break;
  case KN_EW_DIV: EW_BINARY(x / y); break;
  case KN_EW_MAX: EW_BINARY((x > y || x != x) ? x : y); break;
  case KN_EW_MIN: EW_BINARY((x < y || x != x) ? x : y); break;
  case KN_EW_POW: EW_BINARY(powf(x, y)); break;
  case KN_EW_POWC: EW_UNARY(powf(x, c0)); break;
  case KN_EW_NEG: EW_UNARY(-x); break;
  case KN_EW_ABS: EW_UNARY(fabsf(x)); break;
  case KN_EW_EXP: EW_UNARY(expf(x)); break;
  case KN_EW_LOG: EW_UNARY(logf(x)); break;
  case KN_EW_SQRT: EW_UNARY(sqrtf(x)); break;
  case KN_EW_RECIPROCAL: EW_UNARY(1 / x); break;
  case KN_EW_RELU: EW_UNARY(x < 0 ? 0 : x); break;
  case KN_EW_LEAKYRELU: EW_UNARY(x < 0 ? c0 * x : x); break;
  case KN_EW_SIGMOID: EW_UNARY(ew_sigmoid(x)); break;
  case KN_EW_TANH: EW_UNARY(tanhf(x)); break;
  case KN_EW_ERF: EW_UNARY(erff(x)); break;
  case KN_EW_HARDSIGMOID: EW_UNARY(fmaxf(0.0f, fminf(1.0f, c0 * x + c1))); break;
  case KN_EW_HARDSWISH: EW_UNARY(x * fmaxf(0.0f, fminf(1.0f, x / 6 + 0.5f))); break;
  case KN_EW_CLIP: EW_UNARY(ew_clip(x, c0, c1)); break;
  case KN_EW_SOFTPLUS: EW_UNARY(x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x))); break;
  case KN_EW_GELU: EW_UNARY(0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2))); break;
  case KN_EW_GELU_TANH:
    EW_UNARY(0.5f * x *
             (1.0f + tanhf((float)EW_GELU_BETA * (x + (float)EW_GELU_KAPPA * x * x * x))));
    break;
  case KN_EW_QDQ_U8: EW_UNARY(ew_qdq(x, c0, c1, 0.0f, 255.0f)); break;
  case KN_EW_QDQ_S8: EW_UNARY(ew_qdq(x, c0, c1, -128.0f, 127.0f)); break;
  case KN_EW_COUNT: break;
  }
}

/* ---- driver ---------------------------------------------------------------- */

int32_t kn_ewchain_slots(const ew_prog *p, int32_t *slot, int32_t *last_use,
                         int32_t *free_list) {
  int32_t n = p->n, n_in = p->n_in;
  for (int32_t k = 0; k < n; k++) last_use[k] = -1;
  for (int32_t k = 0; k < n; k++)
    for (int32_t j = 0; j < 2; j++) {
      int64_t a = p->args[2 * k + j];
      if (a >= n_in) last_use[a - n_in] = k;
    }
  int32_t n_free = 0, n_slots = 0;
  for (int32_t k = 0; k < n; k++) {
    for (int32_t j = 0; j < 2; j++) {
      int64_t a = p->args[2 * k + j];
      if (a < n_in || last_use[a - n_in] != k) continue;
      if (j == 1 && p->args[2 * k] == a) continue; /* x op x: freed once */
      free_list[n_free++] = slot[a - n_in];
    }
    slot[k] = n_free ? free_list[--n_free] : n_slots++;
  }
  return n_slots;
}

static kn_status ew_run(kn_op_ctx *ctx) {
  ew_prog p;
  kn_status st = kn_ewchain_read_prog(ctx, &p);
  if (st) return st;
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  int64_t total = kn_tensor_numel(y);
  if (total == 0) return KN_OK;
  int32_t n_in = p.n_in, n = p.n;
  /* one block: strides (n_in x rank), offsets and counters, slot of each
   * result, last reader of each result, scratch slots */
  size_t words = (size_t)n_in * KN_MAX_RANK + (size_t)n_in + KN_MAX_RANK;
  size_t ints = 3 * (size_t)n;
  char *mem = kn_malloc(words * sizeof(int64_t) + ints * sizeof(int32_t) +
                        (size_t)n * EW_BLOCK * sizeof(float) + 64);
  if (!mem) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %d instruction slots", (int)n);
  int64_t *strides = (int64_t *)mem;          /* [n_in][KN_MAX_RANK] */
  int64_t *off = strides + (size_t)n_in * KN_MAX_RANK;
  int64_t *ctr = off + n_in;
  int32_t *slot = (int32_t *)(ctr + KN_MAX_RANK);
  int32_t *last_use = slot + n;
  int32_t *free_list = last_use + n;
  float *scratch = (float *)(((uintptr_t)(free_list + n) + 63) & ~(uintptr_t)63);

  /* shape: drop size-1 dims, then merge neighbours that every input walks
   * alike (contiguous across both, or broadcast across both) */
  int32_t r = 0;
  int64_t dims[KN_MAX_RANK];
  for (int32_t i = 0; i < n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    int64_t s[KN_MAX_RANK];
    kn_broadcast_strides(t->rank, t->dims, y->rank, y->dims, s);
    int32_t k = 0;
    for (int32_t dd = 0; dd < y->rank; dd++)
      if (y->dims[dd] != 1) strides[(size_t)i * KN_MAX_RANK + k++] = s[dd];
  }
  for (int32_t dd = 0; dd < y->rank; dd++)
    if (y->dims[dd] != 1) dims[r++] = y->dims[dd];
  if (r == 0) {
    dims[r++] = 1;
    for (int32_t i = 0; i < n_in; i++) strides[(size_t)i * KN_MAX_RANK] = 0;
  }
  for (int32_t dd = r - 2; dd >= 0; dd--) {
    bool ok = true;
    for (int32_t i = 0; i < n_in && ok; i++) {
      const int64_t *s = strides + (size_t)i * KN_MAX_RANK;
      ok = s[dd] == s[dd + 1] * dims[dd + 1];
    }
    if (!ok) continue;
    dims[dd] *= dims[dd + 1];
    for (int32_t i = 0; i < n_in; i++) {
      int64_t *s = strides + (size_t)i * KN_MAX_RANK;
      s[dd] = s[dd + 1];
      memmove(s + dd + 1, s + dd + 2, sizeof(int64_t) * (size_t)(r - dd - 2));
    }
    memmove(dims + dd + 1, dims + dd + 2, sizeof(int64_t) * (size_t)(r - dd - 2));
    r--;
  }

  kn_ewchain_slots(&p, slot, last_use, free_list);

  const float **in = kn_malloc((size_t)n_in * sizeof *in);
  if (!in) {
    free(mem);
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %d inputs", (int)n_in);
  }
  for (int32_t i = 0; i < n_in; i++) in[i] = kn_in(ctx, i)->data;
  float *yd = y->data;
  int64_t len = dims[r - 1], rows = total / len;
  memset(off, 0, sizeof(int64_t) * (size_t)n_in);
  memset(ctr, 0, sizeof(int64_t) * KN_MAX_RANK);
  for (int64_t row = 0; row < rows; row++) {
    for (int64_t b0 = 0; b0 < len; b0 += EW_BLOCK) {
      int32_t cnt = (int32_t)(len - b0 < EW_BLOCK ? len - b0 : EW_BLOCK);
      for (int32_t k = 0; k < n; k++) {
        ew_arg ab[2] = {{NULL, 0}, {NULL, 0}};
        for (int32_t j = 0; j < 2; j++) {
          int64_t a = p.args[2 * k + j];
          if (a < 0) continue;
          if (a < n_in) {
            int64_t s = strides[(size_t)a * KN_MAX_RANK + r - 1];
            ab[j].p = in[a] + off[a] + b0 * s;
            ab[j].step = s != 0;
          } else {
            ab[j].p = scratch + (size_t)slot[a - n_in] * EW_BLOCK;
            ab[j].step = 1;
          }
        }
        float *d = k == n - 1 ? yd + row * len + b0 : scratch + (size_t)slot[k] * EW_BLOCK;
        kn_ewchain_exec(p.ops[k], p.consts[2 * k], p.consts[2 * k + 1], ab[0], ab[1], d, cnt);
      }
    }
    /* next row: odometer over the outer dims */
    for (int32_t dd = r - 2; dd >= 0; dd--) {
      for (int32_t i = 0; i < n_in; i++) off[i] += strides[(size_t)i * KN_MAX_RANK + dd];
      if (++ctr[dd] < dims[dd]) break;
      for (int32_t i = 0; i < n_in; i++)
        off[i] -= strides[(size_t)i * KN_MAX_RANK + dd] * dims[dd];
      ctr[dd] = 0;
    }
  }
  free(in);
  free(mem);
  return KN_OK;
}

static double ew_flops(const kn_op_ctx *ctx) {
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!y || y->rank < 0) return 0;
  double cnt = 1;
  for (int32_t i = 0; i < y->rank; i++) cnt *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
  const int64_t *ops;
  int32_t n = kn_attr_ints(ctx, "ops", &ops);
  double per = 0;
  for (int32_t k = 0; k < n; k++) per += kn_ew_cost(ops[k]);
  return cnt * (n > 0 ? per : 1);
}

const kn_op_def kn_ops_ewchain[] = {
    {"ElementwiseChain", KN_DOMAIN, 1, -1, 1, 1, 1, 1, ew_infer, ew_run, ew_flops},
    KN_OP_END,
};
