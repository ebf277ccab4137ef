/*
 * Kernel taps that read only padding, cut from the convolution:
 *
 *   y = Conv(x, W, B?) | FusedConv(x, W, ...)   (1-D to 3-D, constant W,
 *                                                 x's spatial dims known)
 *
 * Along each spatial dim, tap k of the kernel reads input position
 * o*s - pb + k*d for output o in [0, out).  When no output's position is
 * inside [0, in) the tap multiplies zeros only: a dilated conv on a small
 * map (a segmentation head's ASPP, dilation 12 to 36 on a 20x20 map) has
 * most of its taps there.  The taps that do read the input lie between a
 * first k0 and a last k1; the kernel becomes [k0, k1] (W sliced along
 * that dim), with pads pb' = pb - k0*d and pe' so that the output keeps
 * its size, the same sums in the same order minus the zero products.
 * A dilation 24 or 36 3x3 conv on a 20x20 map becomes a 1x1 conv.
 *
 * Left alone: ConvTranspose, auto_pad other than NOTSET, a dim whose new
 * pads would be negative, and a dim where no tap reads the input (the
 * output is then the bias alone; rare enough not to special-case).  Taps
 * that read padding for some outputs only (dilation 12 on that map) stay:
 * the kernels multiply their zeros.
 */
#include "pattern.h"

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* Whether tap k of a dim reads inside [0, in) for some output in [0, out). */
static bool tap_live(int64_t k, int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb) {
  int64_t lo = ceil_div(pb - k * d, s), hi = floor_div(in - 1 + pb - k * d, s);
  if (lo < 0) lo = 0;
  if (hi > out - 1) hi = out - 1;
  return lo <= hi;
}

/* An attribute's ints when it has n of them (else the default dflt). */
static void ints_or(const kn_node *n, const char *name, int32_t cnt, int64_t dflt, int64_t *v) {
  const kn_attr *a = kn_node_attr(n, name);
  for (int32_t i = 0; i < cnt; i++) v[i] = a && a->n == cnt ? a->ints[i] : dflt;
}

/* Copies the taps [k0[i], k0[i] + kn[i]) of every spatial dim of w (dims
 * wd, rank r) into dst. */
static void slice_taps(const float *w, const int64_t *wd, int32_t r, const int64_t *k0,
                       const int64_t *kn, float *dst) {
  int64_t outer = wd[0] * wd[1], src_sz = 1, dst_sz = 1;
  for (int32_t i = 2; i < r; i++) src_sz *= wd[i], dst_sz *= kn[i - 2];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t t = 0; t < dst_sz; t++) {
      /* t's coordinates in the new kernel, then its offset in the old */
      int64_t rem = t, off = 0, stride = 1;
      for (int32_t i = r - 1; i >= 2; i--) {
        int64_t c = rem % kn[i - 2];
        rem /= kn[i - 2];
        off += (c + k0[i - 2]) * stride;
        stride *= wd[i];
      }
      dst[o * dst_sz + t] = w[o * src_sz + off];
    }
}

/* Cuts node ni's dead taps; *done says whether it did. */
static kn_status cut_one(kn_pass_ctx *ctx, kn_graph *g, int32_t ni, bool *done) {
  *done = false;
  kn_node *n = &g->nodes[ni];
  bool fused = !strcmp(n->domain, KN_DOMAIN) && !strcmp(n->op_type, "FusedConv");
  if (n->dead || (!kn_pat_is(n, "Conv") && !fused) || n->n_inputs < 2 || n->inputs[0] < 0 ||
      n->inputs[1] < 0)
    return KN_OK;
  const kn_attr *ap = kn_node_attr(n, "auto_pad");
  if (ap && strcmp(ap->s, "NOTSET") && ap->s[0]) return KN_OK;
  const kn_type *xt = &g->values[n->inputs[0]].type;
  kn_tensor w;
  if (!kn_pat_const(g, n->inputs[1], &w) || w.dtype != KN_DTYPE_F32 || w.rank < 3 ||
      w.rank > 5 || xt->rank != w.rank)
    return KN_OK;
  int32_t r = w.rank, nd = r - 2;
  for (int32_t i = 0; i < nd; i++)
    if (xt->dims[2 + i] < 1 || w.dims[2 + i] < 1) return KN_OK;
  int64_t s[3], d[3], pads[6], k0[3], kn[3];
  ints_or(n, "strides", nd, 1, s);
  ints_or(n, "dilations", nd, 1, d);
  ints_or(n, "pads", 2 * nd, 0, pads);
  bool any = false;
  for (int32_t i = 0; i < nd; i++) {
    int64_t in = xt->dims[2 + i], k = w.dims[2 + i], pb = pads[i], pe = pads[nd + i];
    k0[i] = 0, kn[i] = k;
    if (s[i] < 1 || d[i] < 1 || pb < 0 || pe < 0) return KN_OK;
    int64_t ek = (k - 1) * d[i] + 1;
    if (in + pb + pe < ek) return KN_OK; /* the op reports it */
    int64_t out = (in + pb + pe - ek) / s[i] + 1;
    int64_t a = 0, b = k - 1;
    while (a < k && !tap_live(a, in, out, s[i], d[i], pb)) a++;
    if (a == k) continue; /* no tap reads the input: left alone */
    while (!tap_live(b, in, out, s[i], d[i], pb)) b--;
    if (a == 0 && b == k - 1) continue;
    int64_t npb = pb - a * d[i], nk = b - a + 1;
    int64_t npe = (out - 1) * s[i] + (nk - 1) * d[i] + 1 - in - npb;
    if (npb < 0 || npe < 0 || (in + npb + npe - ((nk - 1) * d[i] + 1)) / s[i] + 1 != out)
      continue;
    k0[i] = a, kn[i] = nk;
    pads[i] = npb, pads[nd + i] = npe;
    any = true;
  }
  if (!any) return KN_OK;
  int64_t nwd[5] = {w.dims[0], w.dims[1]};
  for (int32_t i = 0; i < nd; i++) nwd[2 + i] = kn[i];
  kn_tensor t;
  memset(&t, 0, sizeof t);
  if (kn_tensor_alloc(&t, KN_DTYPE_F32, r, nwd, NULL))
    return kn_fail(ctx->err, KN_ERR_OOM, "out of memory cutting dead taps");
  slice_taps(w.data, w.dims, r, k0, kn, t.data);
  int32_t v = kn_graph_add_constant(g, "taps_cut", &t);
  kn_tensor_release(&t);
  n = &g->nodes[ni]; /* (values may have moved; nodes did not, but be safe) */
  if (v < 0 || !kn_node_set_ints(n, "pads", pads, 2 * nd) ||
      !kn_node_set_ints(n, "kernel_shape", kn, nd))
    return kn_fail(ctx->err, KN_ERR_OOM, "out of memory cutting dead taps");
  n->inputs[1] = v;
  *done = true;
  return KN_OK;
}

kn_status kn_pass_conv_taps(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    bool done;
    kn_status st = cut_one(ctx, g, i, &done);
    if (st) return st;
    *changed |= done;
  }
  return KN_OK;
}
