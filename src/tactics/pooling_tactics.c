/* Tactics of the pooling family (src/ops/pooling.c): float32 1-D to 3-D
 * MaxPool (without Indices) and AveragePool, GlobalMaxPool and GlobalAveragePool
 * on the vectorised pool kernels (kernels/pool, tactic pool), and the
 * channels-last pools of src/ops/layout.c (tactic pool_nhwc) read and
 * written channels-last. */
#include "tactics.h"

#include "kernels/pool/pool-kernels.h"
#include "ops/pooling.h"

/* Depth taps [*k0, *k1) of output depth od that fall inside [0, d), and
 * the average's divisor along depth (the 2-D kernel's rule per dim: the
 * window clipped to the padded input with count_include_pad, else to the
 * input). */
static int64_t depth_taps(const kn_pool_geo *g, bool include_pad, int64_t od, int64_t *k0,
                          int64_t *k1) {
  int64_t st = od * g->s[0] - g->pb[0], d = g->d[0], in = g->in[0], k = g->k[0];
  int64_t l = st >= 0 ? 0 : (-st + d - 1) / d, h = st >= in ? 0 : (in - 1 - st) / d + 1;
  if (h > k) h = k;
  *k0 = l;
  *k1 = h > l ? h : l;
  if (!include_pad) return *k1 - *k0;
  int64_t hp = (in + g->pe[0] - 1 - st) / d + 1;
  return hp > k ? k : hp > 0 ? hp : 0;
}

/* The fast kernel (tactic pool): float32 MaxPool without Indices and
 * AveragePool in 1-D (as 2-D with height 1), 2-D, and 3-D: the 2-D pool
 * of every input depth plane, then the depth windows over those planes
 * (max, or sum over the depth divisor: the window and its padding rule are
 * separable by dims).  *done = false when this run is not such a case
 * (then the reference runs; it writes every output element, so nothing
 * needs zeroing). */
static kn_status pool_fast(kn_op_ctx *ctx, const kn_pool_geo *g, const kn_pool_opts *o,
                           const kn_tensor *x, kn_tensor *y, bool *done) {
  *done = false;
  if (g->ns < 1 || g->ns > 3 || x->dtype != KN_DTYPE_F32 || o->mode == KN_POOL_LP) return KN_OK;
  int64_t planes = x->dims[0] * x->dims[1];
  int32_t f = g->ns == 3 ? 1 : 0; /* the first of the (h, w) dims */
  bool is_max = o->mode == KN_POOL_MAX;
  kn_pool2d p = {.planes = planes, .is_max = is_max, .count_include_pad = o->count_include_pad};
  if (g->ns == 1) {
    p.h = p.oh = p.kh = p.sh = p.dh = 1;
    p.w = g->in[0], p.ow = g->out[0], p.kw = g->k[0], p.sw = g->s[0], p.dw = g->d[0];
    p.pl = g->pb[0], p.pr = g->pe[0];
  } else {
    p.h = g->in[f], p.w = g->in[f + 1], p.oh = g->out[f], p.ow = g->out[f + 1];
    p.kh = g->k[f], p.kw = g->k[f + 1], p.sh = g->s[f], p.sw = g->s[f + 1];
    p.dh = g->d[f], p.dw = g->d[f + 1], p.pt = g->pb[f], p.pl = g->pb[f + 1];
    p.pb = g->pe[f], p.pr = g->pe[f + 1];
  }
  int64_t od = g->ns == 3 ? g->out[0] : 1, hw = p.oh * p.ow;
  if (g->ns == 3) {
    /* every depth window must reach the input (else the reference's rule
     * for an empty window applies) */
    for (int64_t z = 0; z < od; z++) {
      int64_t k0, k1;
      int64_t cnt = depth_taps(g, o->count_include_pad, z, &k0, &k1);
      if (k1 <= k0 || cnt <= 0) return KN_OK;
    }
    p.planes = planes * g->in[0];
  }
  kn_rt *rt = ctx->rt;
  size_t tmp_bytes = g->ns == 3 ? ((size_t)(p.planes * hw) * sizeof(float) + 63) & ~(size_t)63 : 0;
  char *scratch = kn_rt_scratch(
      rt, tmp_bytes + kn_f32_pool2d_scratch(rt->isa, &p, kn_rt_threads(rt), &rt->caches));
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for pooling scratch");
  float *tmp = g->ns == 3 ? (float *)scratch : y->data;
  kn_f32_pool2d(rt->isa, rt->pool, &p, x->data, tmp, scratch + tmp_bytes, &rt->caches);
  if (g->ns == 3) {
    int64_t d = g->in[0];
    float *yd = y->data;
    for (int64_t nc = 0; nc < planes; nc++)
      for (int64_t z = 0; z < od; z++) {
        int64_t k0, k1;
        float div = (float)depth_taps(g, o->count_include_pad, z, &k0, &k1);
        float *yr = yd + (nc * od + z) * hw;
        const float *t0 = tmp + (nc * d + z * g->s[0] - g->pb[0] + k0 * g->d[0]) * hw;
        memcpy(yr, t0, (size_t)hw * sizeof(float));
        for (int64_t k = k0 + 1; k < k1; k++) {
          const float *tk = tmp + (nc * d + z * g->s[0] - g->pb[0] + k * g->d[0]) * hw;
          if (is_max)
            for (int64_t i = 0; i < hw; i++) yr[i] = tk[i] > yr[i] ? tk[i] : yr[i];
          else
            for (int64_t i = 0; i < hw; i++) yr[i] += tk[i];
        }
        if (!is_max && div != 1.0f)
          for (int64_t i = 0; i < hw; i++) yr[i] /= div;
      }
  }
  *done = true;
  return KN_OK;
}

static kn_status pool_fast_run(kn_op_ctx *ctx) {
  if (ctx->node->tactic != KN_TACTIC_pool) return ctx->node->op->run(ctx);
  const kn_tensor *x = kn_in(ctx, 0);
  kn_pool_opts o;
  kn_pool_geo g;
  int64_t *ind;
  kn_status st = kn_pool_plan(ctx, x, &o, &g, &ind);
  if (st) return st;
  if (!ind && kn_tensor_numel(x) > 0) {
    bool done;
    if ((st = pool_fast(ctx, &g, &o, x, kn_out(ctx, 0), &done)) || done) return st;
  }
  return ctx->node->op->run(ctx);
}

/* Tactic pool for float32 MaxPool (without Indices) and AveragePool of
 * rank 3 to 5 (1-D to 3-D). */
static int32_t pool_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  const kn_type *t = &g->values[n->inputs[0]].type;
  if (t->dtype != KN_DTYPE_F32 || t->rank < 3 || t->rank > 5) return 0;
  if (strcmp(n->op_type, "MaxPool") && strcmp(n->op_type, "AveragePool")) return 0;
  if (n->n_outputs > 1 && n->outputs[1] >= 0) return 0;
  return KN_TACTIC_pool;
}

/* Tactic pool for float32 GlobalMaxPool / GlobalAveragePool. */
static int32_t gpool_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  if (strcmp(n->op_type, "GlobalMaxPool") && strcmp(n->op_type, "GlobalAveragePool")) return 0;
  return g->values[n->inputs[0]].type.dtype == KN_DTYPE_F32 ? KN_TACTIC_pool : 0;
}

static kn_status gpool_fast_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (ctx->node->tactic != KN_TACTIC_pool || x->dtype != KN_DTYPE_F32)
    return ctx->node->op->run(ctx);
  kn_tensor *y = kn_out(ctx, 0);
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t n = kn_tensor_numel(x);
  if (planes <= 0) return KN_OK;
  kn_f32_global_pool(ctx->rt->isa, ctx->rt->pool, !strcmp(ctx->node->op_type, "GlobalMaxPool"),
                     planes, n / planes, x->data, y->data);
  return KN_OK;
}

/* ---- channels-last pools (src/ops/layout.c's NhwcMaxPool, ...) ---------- */

static int32_t pool_nhwc_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  const kn_type *t = &g->values[n->inputs[0]].type;
  return t->dtype == KN_DTYPE_F32 && t->rank == 4 ? KN_TACTIC_pool_nhwc : 0;
}

static kn_status pool_nhwc_fast(kn_op_ctx *ctx, bool *done) {
  *done = false;
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  if (!x || x->dtype != KN_DTYPE_F32 || x->rank != 4 || y->rank != 4 ||
      ctx->node->tactic != KN_TACTIC_pool_nhwc)
    return KN_OK;
  const char *op = ctx->node->op_type;
  kn_rt *rt = ctx->rt;
  int64_t n = x->dims[0], c = x->dims[3];
  if (!strcmp(op, "NhwcGlobalAveragePool") || !strcmp(op, "NhwcGlobalMaxPool")) {
    int64_t size = x->dims[1] * x->dims[2];
    void *scratch = kn_rt_scratch(rt, kn_f32_global_pool_nhwc_scratch(n, size, c));
    if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for global pooling scratch");
    if (n * c > 0)
      kn_f32_global_pool_nhwc(rt->isa, rt->pool, !strcmp(op, "NhwcGlobalMaxPool"), n, size, c,
                              x->data, y->data, scratch);
    *done = true;
    return KN_OK;
  }
  kn_pool_mode m = !strcmp(op, "NhwcMaxPool") ? KN_POOL_MAX : KN_POOL_AVG;
  kn_tensor xv = *x; /* the NCHW view the geometry reads */
  kn_dims_to_nchw(x->dims, xv.dims);
  kn_pool_opts o;
  kn_pool_geo g;
  kn_status st = kn_pool_opts_of(ctx, m, &o);
  if (!st) st = kn_pool_geometry(ctx, &xv, &g, true);
  if (st) return st;
  if (g.ns != 2) return KN_OK;
  *done = true;
  if (kn_tensor_numel(x) == 0 || kn_tensor_numel(y) == 0) return KN_OK;
  kn_pool2d p = {.planes = n, .h = g.in[0], .w = g.in[1], .oh = g.out[0], .ow = g.out[1],
                 .kh = g.k[0], .kw = g.k[1], .sh = g.s[0], .sw = g.s[1], .dh = g.d[0],
                 .dw = g.d[1], .pt = g.pb[0], .pl = g.pb[1], .pb = g.pe[0], .pr = g.pe[1],
                 .is_max = m == KN_POOL_MAX, .count_include_pad = o.count_include_pad};
  void *scratch =
      kn_rt_scratch(rt, kn_f32_pool2d_nhwc_scratch(rt->isa, &p, c, kn_rt_threads(rt)));
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for pooling scratch");
  kn_f32_pool2d_nhwc(rt->isa, rt->pool, &p, c, x->data, y->data, scratch);
  return KN_OK;
}

static kn_status pool_nhwc_run(kn_op_ctx *ctx) {
  bool done = false;
  kn_status st = pool_nhwc_fast(ctx, &done);
  return st || done ? st : ctx->node->op->run(ctx);
}

const kn_op_tactics kn_tactics_pooling[] = {
    {NULL, "MaxPool", .select = pool_select, .run = pool_fast_run},
    {NULL, "AveragePool", .select = pool_select, .run = pool_fast_run},
    {NULL, "GlobalAveragePool", .select = gpool_select, .run = gpool_fast_run},
    {NULL, "GlobalMaxPool", .select = gpool_select, .run = gpool_fast_run},
    {KN_DOMAIN, "NhwcMaxPool", .select = pool_nhwc_select, .run = pool_nhwc_run},
    {KN_DOMAIN, "NhwcAveragePool", .select = pool_nhwc_select, .run = pool_nhwc_run},
    {KN_DOMAIN, "NhwcGlobalAveragePool", .select = pool_nhwc_select, .run = pool_nhwc_run},
    {KN_DOMAIN, "NhwcGlobalMaxPool", .select = pool_nhwc_select, .run = pool_nhwc_run},
    KN_TACTICS_END,
};
