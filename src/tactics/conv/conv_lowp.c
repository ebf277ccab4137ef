/*
 * Channels-last convolutions (NhwcFusedConv on conv_igemm_nhwc) in
 * reduced precision: what the step runs when the builder gave it int8,
 * bf16, fp16 or fp16-weights (src/builder/step_precision.c), as gemm_lowp.c does
 * for the GEMM ops.  The kernel is kernels/conv/conv-nhwc-lowp.c; this
 * file packs its weights and runs it from an op context:
 *
 *   int8          weights per output channel symmetric s8
 *                 (kn_quantize_weights_s8, or a Q/DQ model's kiln.w_scale),
 *                 the input quantized to u8 with the step's kiln.a_scale /
 *                 kiln.a_zero, exact s32 sums on the qgemm kernels;
 *   bf16 / fp16   weights and input rounded to bf16 / fp16, fp32 sums on
 *                 the hgemm kernels;
 *   fp16-weights  weights fp16, input fp32;
 *   bf16 on conv_winograd_f23_nhwc (3x3 stride 1, where the builder timed
 *                 it faster than the bf16 implicit GEMM) or, when asked
 *                 for, conv_winograd_nhwc: Winograd F(2,3) or F(4,3) with
 *                 the products on the bf16 kernels (winograd-nhwc-bf16.c).
 *
 * The fused epilogue (bias, activation, residual) and FusedConv's input
 * scale S are those of fp32.  Depthwise convolutions have no reduced
 * precision: they move one weight per multiply-add of a pixel's channel
 * and are bound by the activations' bytes, which stay fp32 in memory.
 *
 * Block (one relocatable allocation): conv_lowp_packed, then at data_off
 * the kernel's packed weights.  A block this CPU cannot run (made for
 * another ISA, or int8 packed for VNNI loaded where there is none) is not
 * used: the weights are packed here, per run, into scratch.
 */
#include "conv_fast.h"

#include "core/cpu.h"
#include "kernels/conv/conv-lowp.h"
#include "kernels/hgemm/hgemm.h"
#include "tactics/gemm/gemm_tactic.h"

typedef struct conv_lowp_packed {
  kn_packed hdr; /* tactic conv_igemm_nhwc, the ISA */
  int64_t wdims[4], group;
  int32_t precision, qimpl; /* qimpl: int8's kn_qgemm_impl, else 0 */
  uint64_t data_off;
} conv_lowp_packed;

#define LOWP_HEAD ((sizeof(conv_lowp_packed) + 63) & ~(size_t)63)

bool kn_conv_lowp_type_of(int32_t precision, int32_t *type) {
  switch (precision) {
  case KN_PRECISION_INT8: *type = KN_CONV_LOWP_INT8; return true;
  case KN_PRECISION_BF16: *type = KN_CONV_LOWP_BF16; return true;
  case KN_PRECISION_FP16: *type = KN_CONV_LOWP_F16; return true;
  case KN_PRECISION_FP16_WEIGHTS: *type = KN_CONV_LOWP_F16W; return true;
  default: return false;
  }
}

/* The kernel variant node n runs on (isa, features). */
static kn_conv_lowp variant_of(const kn_node *n, kn_isa isa, uint64_t features) {
  int32_t type = KN_CONV_LOWP_BF16;
  (void)kn_conv_lowp_type_of(n->precision, &type);
  kn_conv_lowp v = {.type = (kn_conv_lowp_type)type, .isa = isa,
                    .qimpl = kn_qgemm_impl_for(isa, features),
                    .bf16_dot = kn_hgemm_bf16_dot(isa, features), .a_scale = 1.0f};
  if (type == KN_CONV_LOWP_INT8 && !kn_node_input_quant(n, &v.a_scale, &v.a_zero)) {
    v.a_scale = 1.0f;
    v.a_zero = 0;
  }
  return v;
}

static bool winograd(int32_t tactic) {
  return tactic == KN_TACTIC_conv_winograd_nhwc || tactic == KN_TACTIC_conv_winograd_f23_nhwc;
}

/* The Winograd output tile edge of a Winograd tactic: F(2,3) or F(4,3). */
static int wtile(int32_t tactic) { return tactic == KN_TACTIC_conv_winograd_f23_nhwc ? 2 : 4; }

/* Bytes of the packed weights of `tactic` for v. */
static size_t pack_bytes(int32_t tactic, const kn_conv_lowp *v, const kn_conv2d *c) {
  return winograd(tactic) ? kn_bf16_conv_winograd_nhwc_pack_size(v->isa, wtile(tactic), c)
                          : kn_conv_nhwc_lowp_pack_size(v, c);
}

/* Bytes of the temporaries the packing needs: the tap-major fp32
 * weights, and for int8 their s8 values and scales (Winograd: one
 * transformed position, c x m floats). */
static size_t temp_bytes(int32_t tactic, const kn_conv2d *c) {
  if (winograd(tactic)) return (size_t)(c->c * c->m) * sizeof(float);
  size_t nw = (size_t)(c->m * (c->c / c->group) * c->kh * c->kw);
  return ((nw * sizeof(float) + 63) & ~(size_t)63) + ((nw + 63) & ~(size_t)63) +
         (((size_t)c->m * sizeof(float) + 63) & ~(size_t)63);
}

/* Packs w [m, c/group, kh, kw] for tactic and v into dst (temp:
 * temp_bytes). */
static void pack_weights(const kn_node *n, int32_t tactic, const kn_conv_lowp *v,
                         const kn_conv2d *c, const float *w, void *dst, void *temp) {
  if (winograd(tactic)) {
    kn_bf16_conv_winograd_nhwc_pack(v->isa, wtile(tactic), c, w, temp, dst);
    return;
  }
  int64_t cg = c->c / c->group, ksz = c->kh * c->kw, k = ksz * cg;
  size_t nw = (size_t)(c->m * k);
  float *wt = temp;
  int8_t *q = (int8_t *)((char *)temp + ((nw * sizeof(float) + 63) & ~(size_t)63));
  float *sc = (float *)((char *)q + ((nw + 63) & ~(size_t)63));
  for (int64_t o = 0; o < c->m; o++)
    for (int64_t ci = 0; ci < cg; ci++)
      for (int64_t t = 0; t < ksz; t++) wt[o * k + t * cg + ci] = w[(o * cg + ci) * ksz + t];
  if (v->type == KN_CONV_LOWP_INT8)
    kn_quantize_weights_s8(wt, c->m, k, true, kn_node_weight_scales(n, c->m), q, sc);
  kn_conv_nhwc_lowp_pack(v, c, wt, q, sc, dst);
}

kn_status kn_conv_lowp_pack(const kn_node *n, const kn_conv2d *c, const kn_tensor *w,
                            const kn_target *target, void **packed, kn_error *err) {
  *packed = NULL;
  uint64_t features = kn_cpu_features();
  if (target->machine) features &= target->machine->features;
  kn_conv_lowp v = variant_of(n, (kn_isa)target->isa, features);
  size_t bytes = pack_bytes(n->tactic, &v, c);
  size_t tb = (temp_bytes(n->tactic, c) + 63) & ~(size_t)63; /* aligned_alloc: a multiple */
  conv_lowp_packed *p = kn_packed_alloc(LOWP_HEAD + bytes, target->isa, n->tactic);
  void *temp = aligned_alloc(64, tb);
  if (!p || !temp) {
    kn_packed_free(p);
    free(temp);
    return kn_fail(err, KN_ERR_OOM, "node '%s' (%s): out of memory packing %zu bytes of %s "
                   "weights", n->name, n->op_type, bytes, kn_precision_name(n->precision));
  }
  pack_weights(n, n->tactic, &v, c, w->data, (char *)p + LOWP_HEAD, temp);
  free(temp);
  memcpy(p->wdims, w->dims, sizeof p->wdims);
  p->group = c->group;
  p->precision = n->precision;
  p->qimpl = v.type == KN_CONV_LOWP_INT8 ? (int32_t)v.qimpl : 0;
  p->data_off = LOWP_HEAD;
  *packed = p;
  return KN_OK;
}

void kn_conv_lowp_tiling(const kn_node *n, const kn_conv2d *c, const kn_target *target,
                         char *buf, size_t len) {
  uint64_t features = kn_cpu_features();
  if (target->machine) features &= target->machine->features;
  kn_conv_lowp v = variant_of(n, (kn_isa)target->isa, features);
  kn_caches ca;
  kn_target_caches(target, &ca.l1d, &ca.l2, &ca.l3);
  if (winograd(n->tactic))
    kn_bf16_conv_winograd_nhwc_tiling(v.isa, wtile(n->tactic), c, &ca, buf, len);
  else kn_conv_nhwc_lowp_tiling(&v, c, &ca, buf, len);
}

kn_status kn_conv_lowp_run(kn_op_ctx *ctx, int32_t tactic, const kn_conv2d *c, const float *x,
                           const float *s, const kn_tensor *w, const kn_epilogue *ep, float *y) {
  kn_rt *rt = ctx->rt;
  int32_t threads = kn_rt_threads(rt);
  kn_conv_lowp v = variant_of(ctx->node, rt->isa, rt->features);
  const conv_lowp_packed *pk = ctx->packed;
  bool ok = pk && pk->hdr.tactic == tactic &&
            pk->hdr.isa == (int32_t)rt->isa && pk->precision == ctx->node->precision &&
            pk->data_off == LOWP_HEAD && pk->group == c->group &&
            (v.type != KN_CONV_LOWP_INT8 || pk->qimpl == (int32_t)v.qimpl) &&
            !memcmp(pk->wdims, w->dims, sizeof pk->wdims);
  size_t pbytes = ok ? 0 : (pack_bytes(tactic, &v, c) + 63) & ~(size_t)63;
  size_t tbytes = ok ? 0 : (temp_bytes(tactic, c) + 63) & ~(size_t)63;
  size_t kbytes = winograd(tactic)
                      ? kn_bf16_conv_winograd_nhwc_scratch(v.isa, v.bf16_dot, wtile(tactic), c,
                                                           threads, &rt->caches)
                      : kn_conv_nhwc_lowp_scratch(&v, c, threads, s != NULL, &rt->caches);
  char *scratch = kn_rt_scratch(rt, pbytes + tbytes + kbytes);
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  const void *wp = ok ? (const char *)pk + pk->data_off : scratch;
  if (!ok) pack_weights(ctx->node, tactic, &v, c, w->data, scratch, scratch + pbytes);
  char *ks = scratch + pbytes + tbytes;
  if (winograd(tactic))
    kn_bf16_conv_winograd_nhwc(v.isa, v.bf16_dot, wtile(tactic), rt->pool, c, x, s, wp, ep, y,
                               ks, &rt->caches);
  else
    kn_conv_nhwc_lowp(&v, rt->pool, c, x, s, wp, ep, y, ks, &rt->caches);
  return KN_OK;
}
