/*
 * A mean or max over every spatial axis as the global pool it is
 * (PyTorch's `x.mean([2, 3])` in MnasNet and timm models, Keras and
 * TensorFlow exports of GlobalAveragePooling2D, detectors' context heads):
 *
 *   y = ReduceMean(x, axes = [2, ..., r-1], keepdims = 1)  ->  y = GlobalAveragePool(x)
 *   y = ReduceMean(x, axes, keepdims = 0)                  ->  y = Flatten(GlobalAveragePool(x))
 *
 * and ReduceMax likewise to GlobalMaxPool.  The reduction then joins a
 * channels-last region as one vectorised pool step (channels_last) instead
 * of a Transpose back to NCHW and a reference reduction over strided
 * planes: MnasNet's head, 1x1280x7x7, took 9 us of Transpose and 26 us of
 * ReduceMean, about 1/130 of the model.
 *
 * Checked: x is float32 with a known rank r >= 4 (a feature map; over the
 * last axis of a rank-3 tensor the same rewrite would be right too, but
 * there that is a LayerNorm's or a sequence mean, for other passes and no
 * channels-last region to join); the axes are exactly
 * 2 .. r-1 (negative ones counted from the end), from the `axes` attribute
 * (opsets 1 to 17) or a constant input 1 (ReduceMean and ReduceMax 18+);
 * reductions of all axes (no axes) are left alone.  keepdims = 0 output
 * [N, C] is Flatten(axis 1) of the pool's [N, C, 1, ..., 1].
 */
#include "pattern.h"

/* Whether node n reduces exactly the axes 2 .. rank-1 of its rank-`rank`
 * input: axes as the attribute (before 18) or as constant input 1. */
static bool spatial_axes(const kn_graph *g, const kn_node *n, int32_t rank) {
  int64_t axes[KN_MAX_RANK];
  int64_t na = 0;
  if (n->opset < 18) {
    const kn_attr *a = kn_node_attr(n, "axes");
    if (!a || a->n < 1 || a->n > KN_MAX_RANK) return false;
    na = a->n;
    memcpy(axes, a->ints, (size_t)na * sizeof *axes);
  } else {
    kn_tensor t;
    if (n->n_inputs < 2 || n->inputs[1] < 0 || !kn_pat_const(g, n->inputs[1], &t) ||
        t.dtype != KN_DTYPE_I64 || t.rank != 1 || t.dims[0] < 1 || t.dims[0] > KN_MAX_RANK)
      return false;
    na = t.dims[0];
    memcpy(axes, t.data, (size_t)na * sizeof *axes);
  }
  if (na != rank - 2) return false;
  bool seen[KN_MAX_RANK] = {false};
  for (int64_t k = 0; k < na; k++) {
    int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (ax < 2 || ax >= rank || seen[ax]) return false;
    seen[ax] = true;
  }
  return true;
}

kn_status kn_pass_global_pool(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *n = &g->nodes[i];
    bool mean = kn_pat_is(n, "ReduceMean");
    if ((!mean && !kn_pat_is(n, "ReduceMax")) || n->n_inputs < 1 || n->n_outputs != 1) continue;
    int32_t x = n->inputs[0], y = n->outputs[0];
    int32_t rank = x >= 0 ? kn_pat_rank(g, x) : -1;
    if (y < 0 || rank < 4 || kn_pat_dtype(g, x) != KN_DTYPE_F32 || !spatial_axes(g, n, rank))
      continue;
    const kn_attr *kd = kn_node_attr(n, "keepdims");
    bool keep = !kd || kd->i != 0;
    const char *pool = mean ? "GlobalAveragePool" : "GlobalMaxPool";
    int32_t pooled = y;
    if (!keep) {
      char hint[256];
      snprintf(hint, sizeof hint, "%s_pooled", g->values[y].name);
      if ((pooled = kn_graph_add_fresh_value(g, hint)) < 0) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory rewriting a reduction");
        break;
      }
    }
    int32_t at = kn_pat_replace(&p, &i, 1, i, pool, "", 1, &x, pooled, ctx->err);
    if (at < 0) {
      st = KN_ERR_OOM;
      break;
    }
    if (!keep) { /* an alias step: the pool covers the ReduceMean */
      char hint[256];
      snprintf(hint, sizeof hint, "%s_flatten", g->nodes[at].name);
      char *name = kn_graph_unique_name(g, hint);
      int32_t fl = name ? kn_graph_new_node(g, "Flatten", "", name, 1, &pooled, 1, &y) : -1;
      free(name);
      if (fl < 0 || !kn_node_set_int(&g->nodes[fl], "axis", 1)) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory rewriting a reduction");
        break;
      }
      if ((st = kn_pat_refresh(&p, ctx->err))) break;
    }
    *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
