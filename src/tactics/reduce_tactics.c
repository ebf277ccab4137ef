/* Tactics of the reductions (src/ops/reduce.c): float32 ReduceSum,
 * ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1 and ReduceL2
 * on the reduce tactic: the input read once in memory order over the
 * reference's merged view (ops/reduce.h), accumulating in float32 (ONNX
 * Runtime's choice; the reference sums in double).  A contiguous run into
 * one output is summed in 8 interleaved partial sums, which the compiler
 * vectorises; a row of outputs is updated element by element, also
 * vectorised.  Other reductions and dtypes run the reference. */
#include "tactics.h"

#include <math.h>

#include "ops/reduce.h"

typedef enum fop { F_SUM, F_MEAN, F_MAX, F_MIN, F_SUMSQ, F_L1, F_L2, F_NONE } fop;

static fop fop_of(const char *op) {
  static const char *const names[] = {"ReduceSum",       "ReduceMean", "ReduceMax", "ReduceMin",
                                      "ReduceSumSquare", "ReduceL1",   "ReduceL2"};
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if (!strcmp(op, names[i])) return (fop)i;
  return F_NONE;
}

/* The value an element contributes. */
static inline float term(fop o, float v) {
  return o == F_SUMSQ || o == F_L2 ? v * v : o == F_L1 ? fabsf(v) : v;
}

/* acc combined with v: a sum, or max/min with NaN winning (the reference's rule). */
static inline float combine(fop o, float acc, float v) {
  if (o == F_MAX) return v > acc || v != v ? v : acc;
  if (o == F_MIN) return v < acc || v != v ? v : acc;
  return acc + v;
}

static float init_of(fop o) {
  return o == F_MAX ? -INFINITY : o == F_MIN ? INFINITY : 0.0f;
}

/* One contiguous run of n elements folded into one value, in 8 lanes. */
static float run_of(fop o, const float *x, int64_t n) {
  float p[8];
  for (int l = 0; l < 8; l++) p[l] = init_of(o);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) p[l] = combine(o, p[l], term(o, x[j + l]));
  for (int l = 0; j < n; j++, l++) p[l] = combine(o, p[l], term(o, x[j]));
  float r = p[0];
  for (int l = 1; l < 8; l++) r = combine(o, r, p[l]);
  return r;
}

static kn_status reduce_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  fop o = fop_of(ctx->node->op_type);
  if (ctx->node->tactic != KN_TACTIC_reduce || o == F_NONE || x->dtype != KN_DTYPE_F32 ||
      kn_tensor_numel(x) == 0)
    return ctx->node->op->run(ctx);
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  kn_reduce_plan p;
  bool noop;
  kn_status st = kn_reduce_view(ctx, x, &p, &noop);
  if (st) return st;
  int64_t nout = kn_tensor_numel(y);
  if (noop) {
    memcpy(y->data, x->data, (size_t)nout * sizeof(float));
    return KN_OK;
  }
  if (nout == 0) return KN_OK;
  float *acc = y->data;
  const float *xd = x->data;
  for (int64_t i = 0; i < nout; i++) acc[i] = init_of(o);
  int64_t idx[KN_MAX_RANK] = {0}, xo = 0, oo = 0, len = p.d[p.r - 1];
  bool run = p.os[p.r - 1] == 0;
  for (;;) {
    if (run) {
      acc[oo] = combine(o, acc[oo], run_of(o, xd + xo, len));
    } else {
      float *a = acc + oo;
      const float *xr = xd + xo;
      for (int64_t j = 0; j < len; j++) a[j] = combine(o, a[j], term(o, xr[j]));
    }
    xo += len;
    int32_t k = p.r - 2;
    for (; k >= 0; k--) {
      oo += p.os[k];
      if (++idx[k] < p.d[k]) break;
      oo -= p.os[k] * p.d[k];
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  if (o == F_MEAN) {
    float cnt = (float)(kn_tensor_numel(x) / nout);
    for (int64_t i = 0; i < nout; i++) acc[i] /= cnt;
  } else if (o == F_L2) {
    for (int64_t i = 0; i < nout; i++) acc[i] = sqrtf(acc[i]);
  }
  return KN_OK;
}

/* Tactic reduce for the float32 reductions above. */
static int32_t reduce_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0 || fop_of(n->op_type) == F_NONE) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_reduce : 0;
}

const kn_op_tactics kn_tactics_reduce[] = {
    {NULL, "ReduceSum", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceMean", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceMax", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceMin", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceSumSquare", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceL1", .select = reduce_select, .run = reduce_fast},
    {NULL, "ReduceL2", .select = reduce_select, .run = reduce_fast},
    KN_TACTICS_END,
};
