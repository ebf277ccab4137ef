/* Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Input (N, C, d1..dk), target (N, d1..dk) of class indices, optional
 * per-class weight (C).  Element loss = -input[n, t, d...] * w[t], where
 * w = 1 without weights and 0 where t == ignore_index.  Reductions:
 * none (target's shape), sum, mean = sum of losses / sum of w (NaN when every
 * element is ignored, as in the ONNX reference).  SoftmaxCrossEntropyLoss
 * applies the same to log_softmax(scores) over axis 1, which it can also
 * return.  Everything accumulates in double; a class index outside [0, C)
 * that is not ignore_index is an error, never a read. */
#include "op.h"

#include <math.h>

typedef enum loss_red { RED_NONE, RED_SUM, RED_MEAN } loss_red;

static const kn_dtype loss_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                      KN_DTYPE_BF16, 0};
static const kn_dtype index_types[] = {KN_DTYPE_I32, KN_DTYPE_I64, 0};

static kn_status loss_reduction(kn_op_ctx *ctx, loss_red *r) {
  const char *s = kn_attr_str(ctx, "reduction", "mean");
  if (strcmp(s, "none") == 0) *r = RED_NONE;
  else if (strcmp(s, "sum") == 0) *r = RED_SUM;
  else if (strcmp(s, "mean") == 0) *r = RED_MEAN;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "reduction '%s' is not one of none, sum, mean", s);
  return KN_OK;
}

static kn_status loss_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *t, *w = kn_in(ctx, 2);
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = kn_in_req(ctx, 1, &t);
  if (st) return st;
  st = kn_check_dtype(ctx, 0, x, loss_types);
  if (!st) st = kn_check_dtype(ctx, 1, t, index_types);
  if (!st) st = kn_check_dtype(ctx, 2, w, loss_types);
  if (st) return st;
  loss_red red;
  st = loss_reduction(ctx, &red);
  if (st) return st;
  if (x->rank >= 0 && x->rank < 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input has rank %d, expected N x C x d1 ... dk",
                      (int)x->rank);
  if (x->rank >= 0 && t->rank >= 0) {
    bool ok = t->rank == x->rank - 1;
    for (int32_t i = 0; ok && i < t->rank; i++) {
      int64_t a = t->dims[i], b = x->dims[i == 0 ? 0 : i + 1];
      if (a >= 0 && b >= 0 && a != b) ok = false;
    }
    if (!ok) {
      char sa[128], sb[128];
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "target shape %s does not match input shape %s without its class dim",
                        kn_shape_str(t->rank, t->dims, sa, sizeof sa),
                        kn_shape_str(x->rank, x->dims, sb, sizeof sb));
    }
  }
  if (w && w->rank >= 0) {
    int64_t C = x->rank >= 2 ? x->dims[1] : -1;
    if (w->rank != 1 || (C >= 0 && w->dims[0] >= 0 && w->dims[0] != C))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "weight must have shape (C) = (%lld)",
                        (long long)C);
  }
  if (red == RED_NONE) {
    if (t->rank >= 0) kn_out_set(ctx, 0, x->dtype, t->rank, t->dims);
    else if (x->rank >= 0) {
      int64_t d[KN_MAX_RANK];
      for (int32_t i = 0; i + 1 < x->rank; i++) d[i] = x->dims[i == 0 ? 0 : i + 1];
      kn_out_set(ctx, 0, x->dtype, x->rank - 1, d);
    } else {
      kn_out_set(ctx, 0, x->dtype, -1, NULL);
    }
  } else {
    kn_out_set(ctx, 0, x->dtype, 0, NULL);
  }
  if (ctx->n_out > 1) kn_out_like(ctx, 1, 0, 0);
  return KN_OK;
}

/* lp: (N, C, D) log-probabilities; writes the loss output. */
static kn_status loss_compute(kn_op_ctx *ctx, const double *lp, int64_t N, int64_t C,
                              int64_t D) {
  const kn_tensor *t = kn_in(ctx, 1), *w = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  loss_red red;
  kn_status st = loss_reduction(ctx, &red);
  if (st) return st;
  bool has_ii = kn_attr_get(ctx, "ignore_index") != NULL;
  int64_t ii = kn_attr_int(ctx, "ignore_index", 0);
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t d = 0; d < D; d++) {
      int64_t k = n * D + d;
      int64_t c = kn_load_i64(t->data, t->dtype, k);
      double l = 0, wt = 0;
      if (!(has_ii && c == ii)) {
        if (c < 0 || c >= C)
          return kn_op_fail(ctx, KN_ERR_SHAPE,
                            "target %lld at position %lld is outside [0, %lld) and is not "
                            "ignore_index",
                            (long long)c, (long long)k, (long long)C);
        wt = w ? kn_load_f64(w->data, w->dtype, c) : 1.0;
        l = -lp[(n * C + c) * D + d] * wt;
      }
      if (red == RED_NONE) kn_store_f64(y->data, y->dtype, k, l);
      sum += l;
      wsum += wt;
    }
  if (red == RED_SUM) kn_store_f64(y->data, y->dtype, 0, sum);
  else if (red == RED_MEAN) kn_store_f64(y->data, y->dtype, 0, sum / wsum);
  return KN_OK;
}

/* N, C and the flattened trailing size D of input 0. */
static void loss_dims(const kn_tensor *x, int64_t *N, int64_t *C, int64_t *D) {
  *N = x->dims[0];
  *C = x->dims[1];
  *D = 1;
  for (int32_t i = 2; i < x->rank; i++) *D *= x->dims[i];
}

static double *load_f64(kn_op_ctx *ctx, const kn_tensor *x, int64_t n) {
  double *b = kn_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!b) {
    kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %lld elements", (long long)n);
    return NULL;
  }
  if (x->dtype == KN_DTYPE_F32) {
    const float *f = x->data;
    for (int64_t i = 0; i < n; i++) b[i] = f[i];
  } else {
    for (int64_t i = 0; i < n; i++) b[i] = kn_load_f64(x->data, x->dtype, i);
  }
  return b;
}

static kn_status nll_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int64_t N, C, D;
  loss_dims(x, &N, &C, &D);
  double *lp = load_f64(ctx, x, kn_tensor_numel(x));
  if (!lp) return KN_ERR_OOM;
  kn_status st = loss_compute(ctx, lp, N, C, D);
  free(lp);
  return st;
}

static kn_status sce_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  int64_t N, C, D, n = kn_tensor_numel(x);
  loss_dims(x, &N, &C, &D);
  double *lp = load_f64(ctx, x, n);
  if (!lp) return KN_ERR_OOM;
  /* log_softmax over the class axis, lane by lane (stride D). */
  for (int64_t b = 0; b < N; b++)
    for (int64_t d = 0; d < D; d++) {
      double *v = lp + b * C * D + d;
      if (C == 0) continue;
      double m = v[0], s = 0;
      for (int64_t c = 1; c < C; c++)
        if (v[c * D] > m) m = v[c * D];
      for (int64_t c = 0; c < C; c++) s += exp(v[c * D] - m);
      double sh = m + log(s);
      for (int64_t c = 0; c < C; c++) v[c * D] -= sh;
    }
  kn_status st = loss_compute(ctx, lp, N, C, D);
  if (!st && kn_out_wanted(ctx, 1)) {
    kn_tensor *o = kn_out(ctx, 1);
    for (int64_t i = 0; i < n; i++) kn_store_f64(o->data, o->dtype, i, lp[i]);
  }
  free(lp);
  return st;
}

const kn_op_def kn_ops_loss[] = {
    {"NegativeLogLikelihoodLoss", NULL, 2, 3, 1, 1, 12, 22, loss_infer, nll_run, NULL},
    {"SoftmaxCrossEntropyLoss", NULL, 2, 3, 1, 2, 12, 22, loss_infer, sce_run, NULL},
    KN_OP_END,
};
