/* Tactics of NhwcExpandDwConv (src/ops/expand_dw.c): conv_expand_dw_nhwc,
 * the 1x1 expansion and the depthwise conv in bands of output rows
 * (kernels/conv/expand-dw-nhwc.c), the expanded tensor never whole. */
#include "conv_fast.h"

#include "ops/fused.h"

typedef struct edw_packed {
  kn_packed hdr;          /* a relocatable block (kn_packed): tactic and ISA */
  int64_t wedims[4], wddims[4];
  uint64_t we_off, wd_off; /* packed weights, from the block's start (64-byte aligned) */
} edw_packed;

/* Geometries of both steps for x [N, H, W, C] (channels-last dims), the
 * weights' dims and the depthwise step's attributes (the node's own: the
 * expand_* ones are not geometry). */
static bool geometries(kn_op_ctx *dctx, const int64_t *xd, const int64_t *wed,
                       const int64_t *wdd, kn_conv2d *ge, kn_conv2d *gd) {
  for (int32_t i = 0; i < 4; i++)
    if (xd[i] < 0 || wed[i] < 1 || wdd[i] < 1) return false;
  int64_t e = wed[0];
  if (wed[1] != xd[3] || wed[2] != 1 || wed[3] != 1 || wdd[0] != e || wdd[1] != 1) return false;
  *ge = (kn_conv2d){.n = xd[0], .c = xd[3], .h = xd[1], .w = xd[2], .m = e, .oh = xd[1],
                    .ow = xd[2], .group = 1, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1,
                    .dw = 1};
  kn_tensor tv, wv;
  memset(&tv, 0, sizeof tv);
  memset(&wv, 0, sizeof wv);
  tv.dtype = wv.dtype = KN_DTYPE_F32;
  tv.rank = wv.rank = 4;
  int64_t tn[4] = {xd[0], e, xd[1], xd[2]}; /* T as NCHW */
  memcpy(tv.dims, tn, sizeof tn);
  memcpy(wv.dims, wdd, sizeof tn);
  kn_conv_geom geo;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_error err, *saved = dctx->err;
  dctx->err = &err; /* a failure here only means: not this tactic */
  kn_status st = kn_conv_geometry(dctx, &tv, &wv, false, &geo, &r, d, &complete);
  dctx->err = saved;
  if (st || !complete || geo.nd != 2) return false;
  *gd = kn_conv2d_of(&geo);
  return kn_f32_expand_dw_nhwc_fits(ge, gd);
}

/* Static geometries of node n of graph gr; false: not the tactic's case. */
static bool static_geometries(const kn_graph *gr, const kn_node *n, kn_conv2d *ge,
                              kn_conv2d *gd, const kn_tensor **we, const kn_tensor **wd) {
  if (n->n_inputs < 3 || n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[2] < 0)
    return false;
  const kn_value *x = &gr->values[n->inputs[0]], *wev = &gr->values[n->inputs[1]],
                 *wdv = &gr->values[n->inputs[2]];
  if (x->type.dtype != KN_DTYPE_F32 || wev->type.dtype != KN_DTYPE_F32 ||
      wdv->type.dtype != KN_DTYPE_F32 || x->type.rank != 4 || wev->type.rank != 4 ||
      wdv->type.rank != 4)
    return false;
  kn_error err;
  kn_op_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.node = n;
  ctx.err = &err;
  ctx.label = "";
  ctx.static_infer = true;
  if (!geometries(&ctx, x->type.dims, wev->type.dims, wdv->type.dims, ge, gd)) return false;
  if (we) *we = wev->constant && wev->constant->data ? wev->constant : NULL;
  if (wd) *wd = wdv->constant && wdv->constant->data ? wdv->constant : NULL;
  return true;
}

int32_t kn_edw_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  kn_conv2d ge, gd;
  return static_geometries(g, n, &ge, &gd, NULL, NULL) ? KN_TACTIC_conv_expand_dw_nhwc : 0;
}

kn_status kn_edw_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                          void **packed, kn_error *err) {
  int32_t isa = target->isa;
  *packed = NULL;
  kn_conv2d ge, gd;
  const kn_tensor *we, *wd;
  if (n->tactic != KN_TACTIC_conv_expand_dw_nhwc ||
      !static_geometries(g, n, &ge, &gd, &we, &wd) || !we || !wd)
    return KN_OK;
  size_t head = (sizeof(edw_packed) + 63) & ~(size_t)63;
  size_t ne = kn_f32_conv_nhwc_pack_size((kn_isa)isa, &ge) * sizeof(float);
  size_t nd = kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, &gd) * sizeof(float);
  size_t ne64 = (ne + 63) & ~(size_t)63;
  edw_packed *p = kn_packed_alloc(head + ne64 + nd, isa, n->tactic);
  if (!p)
    return kn_fail(err, KN_ERR_OOM, "node '%s' (%s): out of memory packing %zu weight bytes",
                   n->name, n->op_type, ne + nd);
  memcpy(p->wedims, we->dims, sizeof p->wedims);
  memcpy(p->wddims, wd->dims, sizeof p->wddims);
  p->we_off = head;
  p->wd_off = head + ne64;
  kn_f32_conv_nhwc_pack((kn_isa)isa, &ge, we->data, (float *)((char *)p + p->we_off));
  kn_f32_dwconv_nhwc_pack((kn_isa)isa, &gd, wd->data, (float *)((char *)p + p->wd_off));
  *packed = p;
  return KN_OK;
}

/* The fast run; *done = false when it is not the tactic's case.  It reads
 * the node's attributes directly: the depthwise step's geometry and
 * activation are the node's own, the expansion's activation the expand_*
 * ones (no sub-nodes on the hot path). */
static kn_status edw_fast(kn_op_ctx *ctx, bool *done) {
  *done = false;
  const kn_tensor *x = kn_in(ctx, 0), *we = kn_in(ctx, 1), *wd = kn_in(ctx, 2),
                  *be = ctx->n_in > 3 ? kn_in(ctx, 3) : NULL,
                  *bd = ctx->n_in > 4 ? kn_in(ctx, 4) : NULL;
  kn_tensor *y = kn_out(ctx, 0);
  if (!x || !we || !wd || x->dtype != KN_DTYPE_F32 || we->dtype != KN_DTYPE_F32 ||
      wd->dtype != KN_DTYPE_F32 || y->dtype != KN_DTYPE_F32 || x->rank != 4 ||
      we->rank != 4 || wd->rank != 4 || y->rank != 4 || (be && be->dtype != KN_DTYPE_F32) ||
      (bd && bd->dtype != KN_DTYPE_F32))
    return KN_OK;
  kn_conv2d ge, gd;
  if (!geometries(ctx, x->dims, we->dims, wd->dims, &ge, &gd) || gd.oh != y->dims[1] ||
      gd.ow != y->dims[2] || gd.m != y->dims[3])
    return KN_OK;
  if ((be && kn_tensor_numel(be) > 0 && kn_tensor_numel(be) != ge.m) ||
      (bd && kn_tensor_numel(bd) > 0 && kn_tensor_numel(bd) != gd.m))
    return KN_OK;
  kn_epilogue ee = {.bias = be && kn_tensor_numel(be) > 0 ? be->data : NULL};
  kn_epilogue ed = {.bias = bd && kn_tensor_numel(bd) > 0 ? bd->data : NULL};
  bool rf;
  kn_status st = kn_fused_conv_act(ctx, "expand_", &ee.act, &rf);
  if (!st) st = kn_fused_conv_act(ctx, "", &ed.act, &rf);
  if (st) return st;
  kn_rt *rt = ctx->rt;
  kn_isa isa = rt->isa;
  int32_t threads = kn_rt_threads(rt);
  const edw_packed *pk = ctx->packed;
  const float *wep = NULL, *wdp = NULL;
  size_t ne = 0, nd = 0;
  if (pk && pk->hdr.tactic == KN_TACTIC_conv_expand_dw_nhwc && pk->hdr.isa == (int32_t)isa &&
      !memcmp(pk->wedims, we->dims, sizeof pk->wedims) &&
      !memcmp(pk->wddims, wd->dims, sizeof pk->wddims)) {
    wep = (const float *)((const char *)pk + pk->we_off);
    wdp = (const float *)((const char *)pk + pk->wd_off);
  } else {
    ne = (kn_f32_conv_nhwc_pack_size(isa, &ge) * sizeof(float) + 63) & ~(size_t)63;
    nd = (kn_f32_dwconv_nhwc_pack_size(isa, &gd) * sizeof(float) + 63) & ~(size_t)63;
  }
  size_t kbytes = kn_f32_expand_dw_nhwc_scratch(isa, &ge, &gd, threads, &rt->caches);
  char *scratch = kn_rt_scratch(rt, ne + nd + kbytes);
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  if (ne) {
    kn_f32_conv_nhwc_pack(isa, &ge, we->data, (float *)scratch);
    kn_f32_dwconv_nhwc_pack(isa, &gd, wd->data, (float *)(scratch + ne));
    wep = (const float *)scratch;
    wdp = (const float *)(scratch + ne);
  }
  kn_f32_expand_dw_nhwc(isa, rt->pool, &ge, wep, &ee, &gd, wdp, &ed, x->data, y->data,
                        scratch + ne + nd, &rt->caches);
  *done = true;
  return KN_OK;
}

kn_status kn_edw_fast(kn_op_ctx *ctx) {
  if (ctx->node->tactic == KN_TACTIC_conv_expand_dw_nhwc) {
    bool done = false;
    kn_status st = edw_fast(ctx, &done);
    if (st || done) return st;
  }
  return ctx->node->op->run(ctx);
}
