/* Tactics of the resampling family (src/ops/resize.c): float32 nearest
 * and linear Resize / Upsample over the last two axes on the 2-D kernels
 * (kernels/resize); other cases run the reference. */
#include "tactics.h"

#include "kernels/resize/resize-kernels.h"
#include "ops/resize.h"

/* fp32 nearest and linear (not antialiased) Resize/Upsample; whether the
 * resized axes are only the last two is known at run time. */
static int32_t resize_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  const kn_type *t = &g->values[n->inputs[0]].type;
  if (t->dtype != KN_DTYPE_F32 || (t->rank >= 0 && t->rank < 2)) return 0;
  const kn_attr *m = kn_node_attr(n, "mode");
  const char *mode = m && m->s ? m->s : "nearest";
  const kn_attr *aa = kn_node_attr(n, "antialias");
  if (strcmp(mode, "nearest") == 0) return KN_TACTIC_resize;
  if ((strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0) && !(aa && aa->i))
    return KN_TACTIC_resize;
  return 0;
}

/* The 2-D kernels of src/kernels/resize when only the last two axes are
 * resized; *done stays false (and nothing is written) otherwise.  The
 * tables come from the reference's own functions (kn_resize_nearest_src,
 * kn_resize_build_taps), so indices and weights are the reference's. */
static kn_status resize_fast(kn_op_ctx *ctx, const kn_resize_params *p, const kn_tensor *x,
                             kn_tensor *y, bool *done) {
  *done = false;
  int32_t r = p->rank;
  if (x->dtype != KN_DTYPE_F32 || r < 2 || p->mode == KN_RESIZE_CUBIC ||
      (p->mode == KN_RESIZE_LINEAR && p->antialias))
    return KN_OK;
  int64_t ih = p->in[r - 2], iw = p->in[r - 1], oh = p->out[r - 2], ow = p->out[r - 1];
  if (ih > INT32_MAX || iw > INT32_MAX) return KN_OK;
  int64_t planes = 1;
  for (int32_t d = 0; d < r - 2; d++) {
    if (p->in[d] != p->out[d]) return KN_OK;
    planes *= p->in[d];
  }
  kn_rt *rt = ctx->rt;
  kn_resize_taps h = {ih, oh, NULL, NULL, NULL, NULL, false};
  kn_resize_taps w = {iw, ow, NULL, NULL, NULL, NULL, false};
  if (p->mode == KN_RESIZE_NEAREST) {
    for (int32_t d = 0; d < r - 2; d++)
      for (int64_t o = 0; o < p->out[d]; o++)
        if (kn_resize_nearest_src(p, d, o) != o) return KN_OK;
    int32_t *tab = kn_rt_scratch(rt, (size_t)(oh + ow) * sizeof *tab);
    if (!tab) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    for (int64_t o = 0; o < oh; o++) tab[o] = (int32_t)kn_resize_nearest_src(p, r - 2, o);
    for (int64_t o = 0; o < ow; o++) tab[oh + o] = (int32_t)kn_resize_nearest_src(p, r - 1, o);
    h.i0 = tab;
    w.i0 = tab + oh;
    kn_f32_resize_nearest2d(rt->isa, rt->pool, x->data, y->data, planes, &h, &w,
                            (float)p->extrap);
    *done = true;
    return KN_OK;
  }
  kn_status st = KN_OK;
  kn_resize_axis_taps taps[KN_MAX_RANK];
  memset(taps, 0, sizeof taps);
  bool ok = true;
  for (int32_t d = 0; d < r && ok && !st; d++) {
    st = kn_resize_build_taps(ctx, p, d, &taps[d]);
    if (!st && (taps[d].ntaps != 2 || (d < r - 2 && !taps[d].identity))) ok = false;
  }
  if (st || !ok) goto done;
  /* tables: i0, i1 (int32) then w0, w1 (double) for H and for W, then the
   * kernel's row buffers */
  size_t n_tab = (size_t)(oh + ow);
  size_t tab_bytes = (n_tab * 2 * sizeof(int32_t) + 63) & ~(size_t)63;
  size_t bytes = tab_bytes + n_tab * 2 * sizeof(double) +
                 kn_f32_resize_linear2d_scratch(iw, kn_rt_threads(rt));
  char *mem = kn_rt_scratch(rt, bytes);
  if (!mem) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  int32_t *ix = (int32_t *)mem;
  double *wt = (double *)(mem + tab_bytes);
  kn_resize_taps *tt[2] = {&h, &w};
  for (int32_t a = 0; a < 2; a++) {
    const kn_resize_axis_taps *src = &taps[r - 2 + a];
    kn_resize_taps *t = tt[a];
    int64_t n = t->n_out;
    int32_t *i0 = ix, *i1 = ix + n;
    double *w0 = wt, *w1 = wt + n;
    for (int64_t o = 0; o < n; o++) {
      i0[o] = (int32_t)src->idx[2 * o];
      i1[o] = (int32_t)src->idx[2 * o + 1];
      w0[o] = src->w[2 * o];
      w1[o] = src->w[2 * o + 1];
    }
    t->i0 = i0;
    t->i1 = i1;
    t->w0 = w0;
    t->w1 = w1;
    t->identity = src->identity;
    ix += 2 * n;
    wt += 2 * n;
  }
  kn_f32_resize_linear2d(rt->isa, rt->pool, x->data, y->data, planes, &h, &w, p->extrap,
                         mem + tab_bytes + n_tab * 2 * sizeof(double));
  *done = true;
done:
  for (int32_t d = 0; d < r; d++) {
    free(taps[d].idx);
    free(taps[d].w);
  }
  return st;
}

static kn_status resize_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  kn_resize_params p;
  bool empty, done;
  if (ctx->node->tactic != KN_TACTIC_resize) return ctx->node->op->run(ctx);
  kn_status st = kn_resize_plan(ctx, x, y, &p, &empty);
  if (st || empty) return st;
  if ((st = resize_fast(ctx, &p, x, y, &done)) || done) return st;
  return ctx->node->op->run(ctx);
}

const kn_op_tactics kn_tactics_resize[] = {
    {NULL, "Resize", .select = resize_select, .run = resize_fast_run},
    {NULL, "Upsample", .select = resize_select, .run = resize_fast_run},
    KN_TACTICS_END,
};
