/* Tactics of the fused convolutions: FusedConv (src/ops/fused.c) and the
 * channels-last NhwcFusedConv (src/ops/layout.c) on the fast kernels, the
 * fused epilogue (bias, activation, residual) applied by the kernels. */
#include "conv_fast.h"

#include "ops/fused.h"

/* FusedConv on the node's tactic: X' (the input, channel-scaled when the
 * step has S), and the epilogue when its residual has Y's shape; a
 * broadcast residual, or a run the tactics do not take, runs the
 * reference (Y zeroed first, as the executor leaves it for fast steps). */
kn_status kn_fused_conv_fast(kn_op_ctx *ctx) {
  const kn_tensor *x, *w = kn_in(ctx, 1);
  kn_tensor scaled;
  kn_status st = kn_fused_conv_input(ctx, &x, &scaled);
  if (st) return st;
  kn_fused_conv_plan p;
  bool empty, done = false;
  st = kn_fused_conv_begin(ctx, x, &p, &empty);
  if (!st && !empty) {
    if (!p.z || p.z_same) { /* the fast epilogue takes a residual of Y's shape */
      kn_epilogue ke = {.bias = p.bias, .bias_per_row = true, .res = p.z,
                        .res_first = p.res_first, .act = p.act};
      st = kn_conv_fast(ctx, &p.g, false, x, w, &ke, p.y, &done);
    } else {
      memset(p.y->data, 0, (size_t)kn_tensor_numel(p.y) * sizeof(float));
    }
  }
  free(scaled.data);
  if (st || empty || done) return st;
  return ctx->node->op->run(ctx);
}

/* NhwcFusedConv's fast run (src/ops/layout.c): the channels-last kernels
 * take the input-channel scale S and a residual of Y's shape themselves;
 * a broadcast residual is left to the reference (*done = false). */
static kn_status nhwc_fast(kn_op_ctx *ctx, bool *done) {
  *done = false;
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *b = kn_in(ctx, 2),
                  *z = kn_in(ctx, 3), *cs = kn_in(ctx, 4);
  kn_tensor *y = kn_out(ctx, 0);
  if (!x || !w || x->rank != 4 || w->rank != 4 || y->rank != 4) return KN_OK;
  if (z && kn_tensor_numel(z) > 0 &&
      (z->rank != 4 || memcmp(z->dims, y->dims, sizeof(int64_t) * 4)))
    return KN_OK;
  if (cs && kn_tensor_numel(cs) > 0 &&
      (cs->rank != 2 || cs->dims[0] != x->dims[0] || cs->dims[1] != x->dims[3]))
    return KN_OK;
  kn_act_params act;
  bool res_first;
  kn_status st = kn_fused_conv_act(ctx, "", &act, &res_first);
  if (st) return st;
  kn_tensor xv = *x; /* the NCHW view the geometry reads */
  kn_dims_to_nchw(x->dims, xv.dims);
  kn_conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if ((st = kn_conv_geometry(ctx, &xv, w, false, &g, &r, d, &complete))) return st;
  if (kn_tensor_numel(y) == 0) {
    *done = true;
    return KN_OK;
  }
  kn_epilogue ke = {.bias = b && kn_tensor_numel(b) > 0 ? b->data : NULL,
                    .bias_per_row = false,
                    .res = z && kn_tensor_numel(z) > 0 ? z->data : NULL,
                    .res_first = res_first,
                    .act = act};
  /* a channel slice of a wider output (layout.c): the rest comes from
   * input 5, usually this very buffer (planned in place) */
  int64_t off = 0;
  if (y->dims[3] != w->dims[0]) {
    const kn_tensor *into = ctx->n_in > 5 ? kn_in(ctx, 5) : NULL;
    if (!kn_node_attr(ctx->node, "concat_channels") || ke.res ||
        (into && (into->nbytes != y->nbytes || into->dtype != y->dtype)))
      return KN_OK;
    off = kn_attr_int(ctx, "concat_offset", 0);
    if (into && into->data != y->data) memcpy(y->data, into->data, y->nbytes);
  }
  return kn_conv_nhwc_fast(ctx, &g, x, cs && kn_tensor_numel(cs) > 0 ? cs->data : NULL, w,
                           &ke, y, off, done);
}

kn_status kn_nhwc_conv_fast(kn_op_ctx *ctx) {
  int32_t t = ctx->node->tactic;
  if (t == KN_TACTIC_conv_igemm_nhwc || t == KN_TACTIC_conv_depthwise_nhwc ||
      t == KN_TACTIC_conv_winograd_nhwc || t == KN_TACTIC_conv_winograd_f23_nhwc) {
    bool done = false;
    kn_status st = nhwc_fast(ctx, &done);
    if (st || done) return st;
  }
  return ctx->node->op->run(ctx);
}
