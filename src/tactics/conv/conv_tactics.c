/* Tactics of the convolutions (src/ops/conv.c, and the fused and
 * channels-last convolutions of fused.c and layout.c): select, candidates,
 * pack, tiling, loops and precisions, the float32 runs on the fast kernels
 * (src/kernels/conv), and the family's table (conv_fast.h). */
#include "conv_fast.h"

#include "kernels/qgemm/qgemm.h"

/* Weights packed for one tactic and ISA (kn_conv_pack), with the weight
 * shape they were made from, checked at run time. */
typedef struct conv_packed {
  kn_packed hdr; /* a relocatable block (kn_packed): tactic and ISA */
  int64_t wdims[4], group;
  uint64_t data_off; /* packed weights, from the block's start (64-byte aligned) */
} conv_packed;

static bool is_transpose_node(const kn_node *n) { return !strcmp(n->op_type, "ConvTranspose"); }
static bool is_nhwc_node(const kn_node *n) { return !strcmp(n->op_type, "NhwcFusedConv"); }

/* Geometry from static types (unknown parts as kn_conv_geometry leaves
 * them); false when the node is not a float32 1-D, 2-D or 3-D convolution
 * (channels-last: 2-D) with known weight dims. */
static bool static_geometry(const kn_graph *gr, const kn_node *n, bool transpose,
                            kn_conv_geom *geo, const kn_tensor **wconst) {
  if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
  const kn_value *xv = &gr->values[n->inputs[0]], *wv = &gr->values[n->inputs[1]];
  int32_t rank = wv->type.rank;
  if (xv->type.dtype != KN_DTYPE_F32 || wv->type.dtype != KN_DTYPE_F32 ||
      xv->type.rank != rank || rank < 3 || rank > 5 || (is_nhwc_node(n) && rank != 4))
    return false;
  kn_slot xs, ws;
  memset(&xs, 0, sizeof xs);
  memset(&ws, 0, sizeof ws);
  xs.kind = ws.kind = KN_KIND_TENSOR;
  xs.t.dtype = ws.t.dtype = KN_DTYPE_F32;
  xs.t.rank = ws.t.rank = rank;
  memcpy(xs.t.dims, xv->type.dims, sizeof xs.t.dims);
  if (is_nhwc_node(n)) kn_dims_to_nchw(xv->type.dims, xs.t.dims);
  memcpy(ws.t.dims, wv->type.dims, sizeof ws.t.dims);
  for (int32_t i = 0; i < rank; i++)
    if (ws.t.dims[i] < 1) return false;
  kn_slot *in[2] = {&xs, &ws};
  kn_error err;
  kn_op_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.node = n;
  ctx.opset = n->opset;
  ctx.n_in = 2;
  ctx.in = in;
  ctx.static_infer = true;
  ctx.err = &err;
  ctx.label = "";
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if (kn_conv_geometry(&ctx, &xs.t, &ws.t, transpose, geo, &r, d, &complete) ||
      geo->nd != rank - 2)
    return false;
  /* channels from W (X's may be unknown) */
  geo->c = transpose ? ws.t.dims[0] : ws.t.dims[1] * geo->group;
  geo->m = transpose ? ws.t.dims[1] * geo->group : ws.t.dims[0];
  if (wconst) {
    const kn_tensor *c = wv->constant;
    *wconst = c && c->dtype == KN_DTYPE_F32 && c->rank == rank && c->data ? c : NULL;
  }
  return true;
}

static kn_conv2d conv2d_of(const kn_conv_geom *geo);

/* Winograd F(4,3) (conv_winograd) where it was measured faster than
 * conv_gemm: 3x3, stride 1, undilated, ungrouped, static output size, and
 *  - at least 16 input and 16 output channels: the transforms cost about
 *    as much per channel as 16 channels of products.  Measured (AVX-512,
 *    1 thread, Zen 5 shared at load ~8, GFLOP/s counted as direct FLOPs,
 *    conv_gemm -> conv_winograd): c16 m16 @56 21 -> 46, c3 m64 @56
 *    50 -> 34 (a loss), c64 m64 @56 43 -> 141, c128 m128 @28 56 -> 205,
 *    c256 m256 @14 68 -> 219, c64 m64 @10 34 -> 70, c32 m32 @8 22 -> 33;
 *  - 36 products per tile, tiles counted in whole vectors of 16, at most
 *    the direct method's 9 per output: 56x56 (ratio 0.27), 28x28 (0.33),
 *    14x14 (0.33), 10x10 (0.64), 8x8 (1.0) all win 1.5x to 3.7x.  On a
 *    quieter machine (load ~2.5, bench_conv, after the GEMM tuning of
 *    39a442e) ResNet-50's layers went 123 -> 398 (56x56), 163 -> 428
 *    (28x28), 157 -> 430 (14x14) GFLOP/s; its 7x7 (4 tiles in a 16-lane
 *    vector: 1.31) 139 -> 130, and its Winograd weights, 4x the direct
 *    ones (38 MB for 512 -> 512), stream from DRAM and add to the RSS:
 *    left to conv_gemm. */
static bool winograd_wins(const kn_conv_geom *geo) {
  kn_conv2d c = conv2d_of(geo);
  if (c.oh < 1 || c.ow < 1 || c.h < 1 || c.w < 1 || !kn_f32_conv_winograd_fits(&c)) return false;
  if (c.c < 16 || c.m < 16) return false;
  double tiles = (double)(((c.oh + 3) / 4 * ((c.ow + 3) / 4) + 15) / 16 * 16);
  return 36.0 * tiles <= 9.0 * (double)(c.oh * c.ow);
}

int32_t kn_conv_select(const kn_graph *gr, const kn_node *n, int32_t isa) {
  bool tr = is_transpose_node(n);
  kn_conv_geom geo;
  if (strcmp(n->op_type, "Conv") && strcmp(n->op_type, "FusedConv") && !tr &&
      !is_nhwc_node(n))
    return 0;
  if (!static_geometry(gr, n, tr, &geo, NULL)) return 0;
  if (is_nhwc_node(n)) {
    if (geo.group > 1 && geo.group == geo.c && geo.m == geo.c)
      return KN_TACTIC_conv_depthwise_nhwc;
    /* reduced precision runs on the implicit GEMM first, except a bf16
     * 3x3 stride-1 layer of 16 channels and more on Winograd F(2,3): 2.25x
     * fewer products for about twice the direct conv's rounding error
     * (winograd-nhwc-bf16.c; the transforms cost about as much per channel
     * as 16 channels of products, as for fp32's F(4,3) below).  Measured
     * (timed builds, Zen 4, 1 thread): every 3x3 stride-1 layer of
     * ResNet-50 (64 to 512 channels, 56x56 down to 7x7) times faster on
     * F(2,3) than on the bf16 implicit GEMM or the fp32 F(4,3). */
    kn_conv2d c = conv2d_of(&geo);
    if (n->precision == KN_PRECISION_BF16 && kn_f32_conv_winograd_nhwc_fits(&c) && c.c >= 16 &&
        c.m >= 16)
      return KN_TACTIC_conv_winograd_f23_nhwc;
    if (n->precision != KN_PRECISION_FP32) return KN_TACTIC_conv_igemm_nhwc;
    /* narrow groups (2, 4 or 8 channels in and out: ResNeXt's): the
     * depthwise kernel with each group's inputs broadcast over its lanes
     * uses every lane, where the igemm's tiles would use q of 16 (AVX-512
     * ResNeXt-50 layer1's 3x3, 32 groups of 4: 13 GFLOP/s on the igemm) */
    bool scaled = n->n_inputs > 4 && n->inputs[4] >= 0;
    if (geo.group > 1 && kn_f32_dwconv_nhwc_fits(&c, scaled)) return KN_TACTIC_conv_depthwise_nhwc;
    if (winograd_wins(&geo) && kn_f32_conv_winograd_nhwc_fits(&c))
      return KN_TACTIC_conv_winograd_nhwc;
    return KN_TACTIC_conv_igemm_nhwc;
  }
  if (tr) return KN_TACTIC_conv_transpose_gemm;
  kn_conv2d c = conv2d_of(&geo);
  /* few output positions, many channels (1-D convs on short frames): the
   * GEMM with positions as rows fills its tiles, conv_gemm's would not */
  if (c.n >= 1 && kn_f32_conv_gemm_positions_fits((kn_isa)isa, &c))
    return KN_TACTIC_conv_gemm_positions;
  if (geo.nd == 3) return KN_TACTIC_conv_gemm; /* the one other 3-D tactic */
  if (geo.group > 1 && geo.group == geo.c && geo.m == geo.c) return KN_TACTIC_conv_depthwise;
  if (winograd_wins(&geo)) return KN_TACTIC_conv_winograd;
  return KN_TACTIC_conv_gemm;
}

int32_t kn_conv_candidates(const kn_graph *gr, const kn_node *n, int32_t isa, int32_t *out,
                           int32_t max) {
  int32_t first = kn_conv_select(gr, n, isa), cnt = 0;
  if (max < 1 || !first) return 0;
  out[cnt++] = first;
  kn_conv_geom geo;
  /* bf16 Winograd (winograd-nhwc-bf16.c) rounds the transformed operands
   * to bf16.  F(2,3)'s transforms (entries 0, +-1, +-1/2) keep that error
   * near a bf16 direct conv's, for 2.25x fewer products: always a
   * candidate.  F(4,3) is faster still but has about 7x the error of a
   * bf16 direct conv (2% RMS of the output against 0.3%; ResNet-50's
   * logits' cosine 0.990 against 0.996), so it is a candidate only when
   * asked for, with KILN_BF16_WINOGRAD=1 */
  bool lowp = n->precision != KN_PRECISION_FP32;
  const char *bw = getenv("KILN_BF16_WINOGRAD");
  bool bf16 = n->precision == KN_PRECISION_BF16;
  bool bf16_f43 = bf16 && bw && !strcmp(bw, "1");
  if ((lowp && !bf16) || !static_geometry(gr, n, false, &geo, NULL)) return cnt;
  kn_conv2d c = conv2d_of(&geo);
  if (bf16) {
    if (first != KN_TACTIC_conv_igemm_nhwc && first != KN_TACTIC_conv_winograd_f23_nhwc)
      return cnt;
    if (!kn_f32_conv_winograd_nhwc_fits(&c)) return cnt;
    static const int32_t order[3] = {KN_TACTIC_conv_igemm_nhwc,
                                     KN_TACTIC_conv_winograd_f23_nhwc,
                                     KN_TACTIC_conv_winograd_nhwc};
    for (int i = 0; i < 3 && cnt < max; i++)
      if (order[i] != first && (order[i] != KN_TACTIC_conv_winograd_nhwc || bf16_f43))
        out[cnt++] = order[i];
    return cnt;
  }
  int32_t other = 0;
  if (first == KN_TACTIC_conv_igemm_nhwc && kn_f32_conv_winograd_nhwc_fits(&c))
    other = KN_TACTIC_conv_winograd_nhwc;
  else if (first == KN_TACTIC_conv_winograd_nhwc) other = KN_TACTIC_conv_igemm_nhwc;
  else if (first == KN_TACTIC_conv_depthwise_nhwc && c.group < c.c)
    other = KN_TACTIC_conv_igemm_nhwc; /* narrow groups: either kernel */
  else if (lowp) other = 0;
  else if (first == KN_TACTIC_conv_gemm && kn_f32_conv_winograd_fits(&c))
    other = KN_TACTIC_conv_winograd;
  else if (first == KN_TACTIC_conv_winograd) other = KN_TACTIC_conv_gemm;
  else if (first == KN_TACTIC_conv_gemm_positions) other = KN_TACTIC_conv_gemm;
  if (other && cnt < max) out[cnt++] = other;
  return cnt;
}

uint32_t kn_conv_precisions(const kn_graph *gr, const kn_node *n, int32_t isa) {
  (void)isa;
  kn_conv_geom geo;
  const kn_tensor *w;
  if (!is_nhwc_node(n) || !static_geometry(gr, n, false, &geo, &w) || !w) return 0;
  if (geo.c < 1 || (geo.group > 1 && geo.group == geo.c && geo.m == geo.c))
    return 0; /* depthwise */
  uint32_t m = (1u << KN_PRECISION_BF16) | (1u << KN_PRECISION_FP16) |
               (1u << KN_PRECISION_FP16_WEIGHTS);
  if (geo.c / geo.group * geo.k[0] * geo.k[1] <= KN_QGEMM_K_MAX) m |= 1u << KN_PRECISION_INT8;
  return m;
}

bool kn_conv_prefers_nchw(const kn_graph *gr, const kn_node *n) {
  kn_conv_geom geo;
  if (!static_geometry(gr, n, false, &geo, NULL)) return false;
  kn_conv2d c = conv2d_of(&geo);
  return winograd_wins(&geo) && !kn_f32_conv_winograd_nhwc_fits(&c);
}

kn_conv2d kn_conv2d_of(const kn_conv_geom *geo) { return conv2d_of(geo); }

/* The kernels' geometry of geo (complete): a 2-D convolution as it is, a
 * 1-D one as 2-D with height 1, a 3-D one with kn_conv2d's depth fields. */
static kn_conv2d conv2d_of(const kn_conv_geom *geo) {
  int32_t o = geo->nd == 3 ? 1 : 0; /* the first of the (h, w) dims */
  kn_conv2d c = {.n = geo->n, .c = geo->c, .m = geo->m, .group = geo->group};
  if (geo->nd == 1) {
    c.h = c.oh = c.kh = c.sh = c.dh = 1;
    c.w = geo->x_sp[0], c.ow = geo->y_sp[0], c.kw = geo->k[0], c.sw = geo->s[0];
    c.dw = geo->d[0], c.pl = geo->pb[0];
    return c;
  }
  c.h = geo->x_sp[o], c.w = geo->x_sp[o + 1], c.oh = geo->y_sp[o], c.ow = geo->y_sp[o + 1];
  c.kh = geo->k[o], c.kw = geo->k[o + 1], c.sh = geo->s[o], c.sw = geo->s[o + 1];
  c.dh = geo->d[o], c.dw = geo->d[o + 1], c.pt = geo->pb[o], c.pl = geo->pb[o + 1];
  if (o) {
    c.d = geo->x_sp[0], c.od = geo->y_sp[0], c.kd = geo->k[0], c.sd = geo->s[0];
    c.dd = geo->d[0], c.pf = geo->pb[0];
  }
  return c;
}

/* Whether node n runs a Winograd tactic with bf16 products: F(2,3), or
 * F(4,3) given bf16 (conv_lowp.c packs and runs both). */
static bool bf16_winograd(const kn_node *n, const kn_conv2d *c) {
  return n->precision == KN_PRECISION_BF16 && kn_f32_conv_winograd_nhwc_fits(c) &&
         (n->tactic == KN_TACTIC_conv_winograd_nhwc ||
          n->tactic == KN_TACTIC_conv_winograd_f23_nhwc);
}

/* Packed floats of tactic t (0: the tactic packs nothing). */
static size_t pack_floats(int32_t t, kn_isa isa, const kn_conv2d *c) {
  if (t == KN_TACTIC_conv_gemm) return kn_f32_conv_gemm_pack_size(isa, c);
  if (t == KN_TACTIC_conv_gemm_positions) return kn_f32_conv_gemm_positions_pack_size(isa, c);
  if (t == KN_TACTIC_conv_winograd) return kn_f32_conv_winograd_pack_size(isa, c);
  if (t == KN_TACTIC_conv_transpose_gemm) return kn_f32_deconv_pack_size(isa, c);
  if (t == KN_TACTIC_conv_igemm_nhwc) return kn_f32_conv_nhwc_pack_size(isa, c);
  if (t == KN_TACTIC_conv_depthwise_nhwc) return kn_f32_dwconv_nhwc_pack_size(isa, c);
  if (t == KN_TACTIC_conv_winograd_nhwc) return kn_f32_conv_winograd_nhwc_pack_size(isa, c);
  return 0;
}

/* l2: the capacity conv_winograd's blocks are sized by (the target
 * machine's at build, the context's at run). */
static void pack_into(int32_t t, kn_isa isa, size_t l2, const kn_conv2d *c, const float *w,
                      float *dst) {
  if (t == KN_TACTIC_conv_gemm) kn_f32_conv_gemm_pack(isa, c, w, dst);
  else if (t == KN_TACTIC_conv_gemm_positions) kn_f32_conv_gemm_positions_pack(isa, c, w, dst);
  else if (t == KN_TACTIC_conv_winograd) kn_f32_conv_winograd_pack(isa, c, l2, w, dst);
  else if (t == KN_TACTIC_conv_transpose_gemm) kn_f32_deconv_pack(isa, c, w, dst);
  else if (t == KN_TACTIC_conv_igemm_nhwc) kn_f32_conv_nhwc_pack(isa, c, w, dst);
  else if (t == KN_TACTIC_conv_depthwise_nhwc) kn_f32_dwconv_nhwc_pack(isa, c, w, dst);
  else if (t == KN_TACTIC_conv_winograd_nhwc) kn_f32_conv_winograd_nhwc_pack(isa, c, w, dst);
}

kn_status kn_conv_pack(const kn_graph *gr, const kn_node *n, const kn_target *target,
                       void **packed, kn_error *err) {
  int32_t isa = target->isa;
  *packed = NULL;
  bool tr = is_transpose_node(n);
  kn_conv_geom geo;
  const kn_tensor *w;
  if (!static_geometry(gr, n, tr, &geo, &w) || !w) return KN_OK;
  kn_conv2d c = conv2d_of(&geo);
  if (n->precision != KN_PRECISION_FP32 && is_nhwc_node(n) &&
      (n->tactic == KN_TACTIC_conv_igemm_nhwc || bf16_winograd(n, &c)))
    return kn_conv_lowp_pack(n, &c, w, target, packed, err);
  size_t nf = pack_floats(n->tactic, (kn_isa)isa, &c);
  if (nf == 0) return KN_OK;
  size_t head = (sizeof(conv_packed) + 63) & ~(size_t)63;
  conv_packed *p = kn_packed_alloc(head + nf * sizeof(float), isa, n->tactic);
  if (!p)
    return kn_fail(err, KN_ERR_OOM, "node '%s' (%s): out of memory packing %zu weight bytes",
                   n->name, n->op_type, nf * sizeof(float));
  p->data_off = head;
  size_t l1, l2, l3;
  kn_target_caches(target, &l1, &l2, &l3);
  pack_into(n->tactic, (kn_isa)isa, l2, &c, w->data, (float *)((char *)p + head));
  memcpy(p->wdims, w->dims, sizeof p->wdims);
  p->group = geo.group;
  *packed = p;
  return KN_OK;
}

bool kn_conv_loops(const kn_graph *gr, const kn_node *n, kn_loopnest *l) {
  if (is_transpose_node(n)) return false;
  kn_conv_geom geo;
  const kn_tensor *w;
  if (!static_geometry(gr, n, false, &geo, &w)) return false;
  kn_conv2d c = conv2d_of(&geo);
  kn_conv_depth z = kn_conv2d_depth(&c);
  if (c.group < 1 || c.n < 1 || c.oh < 1 || c.ow < 1 || z.od < 1) return false;
  int64_t cg = c.c / c.group, mg = c.m / c.group, p = c.n * z.od * c.oh * c.ow;
  int64_t taps = z.kd * c.kh * c.kw;
  int32_t dg = kn_loop_dim(l, "g", c.group), dp = kn_loop_dim(l, "p", p),
          dm = kn_loop_dim(l, "m", mg), dk = kn_loop_dim(l, "k", cg * taps);
  uint32_t G = 1u << dg, P = 1u << dp, M = 1u << dm, K = 1u << dk;
  int32_t x = kn_loop_tensor_add(l, "input", G | P | K, 4, false, false);
  l->t[x].real_bytes = 4.0 * (double)(c.n * c.c * z.d * c.h * c.w);
  kn_loop_tensor_add(l, "weights", G | M | K, 4, false, w != NULL);
  kn_loop_tensor_add(l, "output", G | P | M, 4, true, false);
  /* a residual: an input past the weights and bias as large as the output */
  const kn_value *yv = n->n_outputs > 0 && n->outputs[0] >= 0 ? &gr->values[n->outputs[0]] : NULL;
  int64_t ysize = yv ? kn_shape_numel(yv->type.rank, yv->type.dims) : -1;
  for (int32_t i = 3; i < n->n_inputs && ysize > 0; i++) {
    if (n->inputs[i] < 0) continue;
    const kn_type *t = &gr->values[n->inputs[i]].type;
    if (t->kind == KN_KIND_TENSOR && t->rank >= 0 && kn_shape_numel(t->rank, t->dims) == ysize)
      kn_loop_tensor_add(l, "residual", G | P | M, 4, false, false);
  }
  l->flops = 2.0 * (double)p * (double)c.m * (double)(cg * taps);
  return true;
}

void kn_conv_tiling(const kn_graph *g, const kn_node *n, const void *packed,
                    const kn_target *target, char *buf, size_t len) {
  const conv_packed *p = packed;
  if (p && p->hdr.tactic == KN_TACTIC_conv_winograd) {
    snprintf(buf, len, "%lld tile lanes a block",
             (long long)kn_f32_conv_winograd_block_lanes(
                 (const float *)((const char *)p + p->data_off)));
    return;
  }
  /* the channels-last kernels plan their tiles at run time from the
   * context's capacities, which are the target machine's */
  kn_conv_geom geo;
  const kn_tensor *w;
  if (!static_geometry(g, n, is_transpose_node(n), &geo, &w)) return;
  kn_conv2d c = conv2d_of(&geo);
  if (c.n < 1) c.n = 1; /* a dynamic batch: the tiles of one image */
  kn_caches ca;
  kn_target_caches(target, &ca.l1d, &ca.l2, &ca.l3);
  kn_isa isa = (kn_isa)target->isa;
  if (n->precision != KN_PRECISION_FP32 &&
      (n->tactic == KN_TACTIC_conv_igemm_nhwc || bf16_winograd(n, &c)))
    kn_conv_lowp_tiling(n, &c, target, buf, len);
  else if (n->tactic == KN_TACTIC_conv_igemm_nhwc) kn_f32_conv_nhwc_tiling(isa, &c, &ca, buf, len);
  else if (n->tactic == KN_TACTIC_conv_winograd_nhwc && kn_f32_conv_winograd_nhwc_fits(&c))
    kn_f32_conv_winograd_nhwc_tiling(isa, &c, &ca, buf, len);
  else if (n->tactic == KN_TACTIC_conv_depthwise_nhwc)
    snprintf(buf, len, "post-pass %lld rows", (long long)kn_f32_dwconv_nhwc_post_rows(&c, &ca));
}

/* W in tactic t's layout and the kernel's kbytes of scratch (*ks): the
 * step's prepacked weights when they are t's for this ISA and shape, else
 * W packed at the front of the scratch; *wp NULL when t reads W as it is. */
static kn_status weights_and_scratch(kn_op_ctx *ctx, int32_t t, const kn_conv2d *c,
                                     const kn_tensor *w, size_t kbytes, const float **wp,
                                     void **ks) {
  kn_rt *rt = ctx->rt;
  kn_isa isa = rt->isa;
  const conv_packed *pk = ctx->packed;
  size_t nf = pack_floats(t, isa, c), pbytes = 0;
  *wp = NULL;
  if (nf) {
    if (pk && pk->hdr.tactic == t && pk->hdr.isa == (int32_t)isa && pk->group == c->group &&
        !memcmp(pk->wdims, w->dims, sizeof pk->wdims))
      *wp = (const float *)((const char *)pk + pk->data_off);
    else
      pbytes = (nf * sizeof(float) + 63) & ~(size_t)63;
  }
  char *scratch = kn_rt_scratch(rt, pbytes + kbytes);
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  if (pbytes) {
    pack_into(t, isa, kn_rt_caches(rt).l2, c, w->data, (float *)scratch);
    *wp = (const float *)scratch;
  }
  *ks = scratch + pbytes;
  return KN_OK;
}

kn_status kn_conv_fast(kn_op_ctx *ctx, const kn_conv_geom *geo, bool transpose,
                       const kn_tensor *x, const kn_tensor *w, const kn_epilogue *ep,
                       kn_tensor *y, bool *done) {
  *done = false;
  if (geo->nd < 1 || geo->nd > 3 || x->dtype != KN_DTYPE_F32 || w->dtype != KN_DTYPE_F32 ||
      y->dtype != KN_DTYPE_F32) {
    memset(y->data, 0, (size_t)kn_tensor_numel(y) * sizeof(float));
    return KN_OK;
  }
  kn_rt *rt = ctx->rt;
  kn_isa isa = rt->isa;
  int32_t threads = kn_rt_threads(rt);
  kn_conv2d c = conv2d_of(geo);
  int32_t t = KN_TACTIC_conv_gemm;
  if (transpose) t = KN_TACTIC_conv_transpose_gemm;
  else if (ctx->node->tactic == KN_TACTIC_conv_gemm_positions &&
           kn_f32_conv_gemm_positions_fits(isa, &c))
    t = KN_TACTIC_conv_gemm_positions;
  else if (geo->nd == 3) t = KN_TACTIC_conv_gemm;
  else if (ctx->node->tactic == KN_TACTIC_conv_depthwise && c.group == c.c && c.m == c.c)
    t = KN_TACTIC_conv_depthwise;
  else if (ctx->node->tactic == KN_TACTIC_conv_winograd && kn_f32_conv_winograd_fits(&c))
    t = KN_TACTIC_conv_winograd;
  const kn_caches *ca = &rt->caches;
  size_t kbytes = t == KN_TACTIC_conv_gemm_positions
                      ? kn_f32_conv_gemm_positions_scratch(isa, &c, threads, ca)
                  : t == KN_TACTIC_conv_depthwise ? kn_f32_dwconv_scratch(isa, &c, threads, ca)
                  : t == KN_TACTIC_conv_gemm     ? kn_f32_conv_gemm_scratch(isa, &c, threads, ca)
                  : t == KN_TACTIC_conv_winograd ? kn_f32_conv_winograd_scratch(isa, &c, threads)
                                                 : kn_f32_deconv_scratch(isa, &c, threads, ca);
  const float *wp;
  void *ks;
  kn_status st = weights_and_scratch(ctx, t, &c, w, kbytes, &wp, &ks);
  if (st) return st;
  if (t == KN_TACTIC_conv_depthwise)
    kn_f32_dwconv(isa, rt->pool, &c, x->data, w->data, ep, y->data, ks, ca);
  else if (t == KN_TACTIC_conv_gemm)
    kn_f32_conv_gemm(isa, rt->pool, &c, x->data, wp, ep, y->data, ks, ca);
  else if (t == KN_TACTIC_conv_gemm_positions)
    kn_f32_conv_gemm_positions(isa, rt->pool, &c, x->data, wp, ep, y->data, ks, ca);
  else if (t == KN_TACTIC_conv_winograd)
    kn_f32_conv_winograd(isa, rt->pool, &c, x->data, wp, ep, y->data, ks);
  else
    kn_f32_deconv(isa, rt->pool, &c, x->data, wp, ep, y->data, ks, ca);
  *done = true;
  return KN_OK;
}

kn_status kn_conv_nhwc_fast(kn_op_ctx *ctx, const kn_conv_geom *geo, const kn_tensor *x,
                            const float *s, const kn_tensor *w, const kn_epilogue *ep,
                            kn_tensor *y, int64_t y_off, bool *done) {
  *done = false;
  int32_t t = ctx->node->tactic;
  if (geo->nd != 2 || x->dtype != KN_DTYPE_F32 || w->dtype != KN_DTYPE_F32 ||
      y->dtype != KN_DTYPE_F32 ||
      (t != KN_TACTIC_conv_igemm_nhwc && t != KN_TACTIC_conv_depthwise_nhwc &&
       t != KN_TACTIC_conv_winograd_nhwc && t != KN_TACTIC_conv_winograd_f23_nhwc))
    return KN_OK;
  kn_rt *rt = ctx->rt;
  kn_isa isa = rt->isa;
  int32_t threads = kn_rt_threads(rt);
  kn_conv2d c = conv2d_of(geo);
  bool dw = t == KN_TACTIC_conv_depthwise_nhwc, wino = t == KN_TACTIC_conv_winograd_nhwc;
  if (dw && !kn_f32_dwconv_nhwc_fits(&c, s != NULL)) return KN_OK;
  c.ldy = y->dims[3];
  if (y_off < 0 || y_off + c.m > c.ldy) return KN_OK;
  /* a slice of a wider output: not the depthwise kernel, and no residual */
  if (c.ldy != c.m && (dw || (ep && ep->res))) return KN_OK;
  int32_t prec = ctx->node->precision;
  /* F(2,3) exists with bf16 products only: anything else runs the
   * implicit GEMM (a step given fp32 after its tactic was chosen) */
  if (t == KN_TACTIC_conv_winograd_f23_nhwc &&
      (prec != KN_PRECISION_BF16 || !kn_f32_conv_winograd_nhwc_fits(&c)))
    t = KN_TACTIC_conv_igemm_nhwc;
  if (wino && !kn_f32_conv_winograd_nhwc_fits(&c)) t = KN_TACTIC_conv_igemm_nhwc, wino = false;
  if (prec != KN_PRECISION_FP32 && !dw && (!wino || prec == KN_PRECISION_BF16)) {
    kn_status st = kn_conv_lowp_run(ctx, t, &c, x->data, s, w, ep, (float *)y->data + y_off);
    *done = st == KN_OK;
    return st;
  }
  const kn_caches *ca = &rt->caches;
  size_t kbytes = dw     ? kn_f32_dwconv_nhwc_scratch(isa, &c, threads, ca)
                  : wino ? kn_f32_conv_winograd_nhwc_scratch(isa, &c, threads, ca)
                         : kn_f32_conv_nhwc_scratch(isa, &c, threads, s != NULL, ca);
  const float *wp;
  void *ks;
  kn_status st = weights_and_scratch(ctx, t, &c, w, kbytes, &wp, &ks);
  if (st) return st;
  float *yd = (float *)y->data + y_off;
  if (dw)
    kn_f32_dwconv_nhwc(isa, rt->pool, &c, x->data, s, wp, ep, yd, ks, ca);
  else if (wino)
    kn_f32_conv_winograd_nhwc(isa, rt->pool, &c, x->data, s, wp, ep, yd, ks, ca);
  else
    kn_f32_conv_nhwc(isa, rt->pool, &c, x->data, s, wp, ep, yd, ks, ca);
  *done = true;
  return KN_OK;
}

/* Conv and ConvTranspose in float32 on the node's tactic; other dtypes,
 * and runs the tactics do not take (kn_conv_fast zeroes Y for them), run
 * the reference. */
static kn_status fconv_fast_run(kn_op_ctx *ctx, bool transpose) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *bias = kn_in(ctx, 2);
  kn_conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_status st = kn_conv_geometry(ctx, x, w, transpose, &g, &r, d, &complete);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  if (y->dtype == KN_DTYPE_F32) {
    kn_epilogue ep = {.bias_per_row = true};
    if (bias && kn_tensor_numel(bias) > 0) ep.bias = bias->data;
    bool done;
    if ((st = kn_conv_fast(ctx, &g, transpose, x, w, &ep, y, &done)) || done) return st;
  }
  return ctx->node->op->run(ctx);
}

static kn_status conv_run(kn_op_ctx *ctx) { return fconv_fast_run(ctx, false); }
static kn_status convt_run(kn_op_ctx *ctx) { return fconv_fast_run(ctx, true); }

#define CONV_HOOKS                                                                 \
  .select = kn_conv_select, .pack = kn_conv_pack, .tiling = kn_conv_tiling,         \
  .loops = kn_conv_loops, .candidates = kn_conv_candidates

const kn_op_tactics kn_tactics_conv[] = {
    {NULL, "Conv", CONV_HOOKS, .run = conv_run},
    {NULL, "ConvTranspose", CONV_HOOKS, .run = convt_run},
    {KN_DOMAIN, "FusedConv", CONV_HOOKS, .run = kn_fused_conv_fast},
    {KN_DOMAIN, "NhwcFusedConv", CONV_HOOKS, .precisions = kn_conv_precisions,
     .run = kn_nhwc_conv_fast},
    {KN_DOMAIN, "NhwcExpandDwConv", .select = kn_edw_select, .pack = kn_edw_pack,
     .run = kn_edw_fast},
    KN_TACTICS_END,
};
