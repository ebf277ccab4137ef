/*
 * An explicit zero Pad into the op that reads it (TensorFlow and Keras
 * exports pad before their convolutions for "SAME" padding; torchvision's
 * Inception pads before an AveragePool that counts the padding):
 *
 *   p = Pad(x, pads, 0)                    constant mode, value 0,
 *                                          spatial pads only, >= 0
 *   y = Conv(p, W, B?) | FusedConv(p, ...)  ->  y = Conv(x, ...) with the
 *                                              pads added to its own
 *   y = AveragePool(p)                      ->  y = AveragePool(x) with
 *                                              the pads, count_include_pad = 1
 *
 * so the padded copy is never a step or a tensor of its own, and the op's
 * kernel (channels-last included) reads the borders as zeros.
 *
 * Checked: x is float32 of rank 4 ([N, C, H, W]); the Pad is read only by
 * that op, as its input 0; the pads of N and C are 0; the op has no
 * auto_pad; an AveragePool is of opset >= 7 (count_include_pad exists),
 * has ceil_mode 0, and either no pads of its own or count_include_pad = 1
 * already (a window that counts the explicit zeros must count its own
 * padding too).  A MaxPool reads -inf in its padding, not zeros: it keeps
 * its Pad.
 */
#include "pattern.h"

/* The Pad's 8 pads, when it pads with zeros in constant mode: the shared
 * reader (kn_pat_pad_pads), opset 1's `paddings`, and the value attribute
 * (before 11) or constant input 2 (after). */
static bool zero_pad(const kn_graph *g, const kn_node *n, int64_t pads[8]) {
  const kn_attr *mode = kn_node_attr(n, "mode");
  if (mode && strcmp(mode->s, "constant")) return false;
  if (!kn_pat_pad_pads(g, n, pads)) {
    const kn_attr *a = n->opset < 11 ? kn_node_attr(n, "paddings") : NULL;
    if (!a || a->n != 8) return false;
    memcpy(pads, a->ints, 8 * sizeof *pads);
  }
  if (n->opset < 11) {
    const kn_attr *v = kn_node_attr(n, "value");
    return !v || v->f == 0.0f;
  }
  double v;
  return n->n_inputs <= 2 || n->inputs[2] < 0 ||
         (kn_pat_scalar(g, n->inputs[2], 1, &v) && v == 0.0);
}

/* The reader's own 4 spatial pads [top, left, bottom, right] (zeros when
 * absent); false when it has auto_pad or pads of another length. */
static bool own_pads(const kn_node *r, int64_t p[4]) {
  const kn_attr *ap = kn_node_attr(r, "auto_pad");
  if (ap && strcmp(ap->s, "NOTSET")) return false;
  const kn_attr *a = kn_node_attr(r, "pads");
  memset(p, 0, 4 * sizeof *p);
  if (!a) return true;
  if (a->n != 4) return false;
  memcpy(p, a->ints, 4 * sizeof *p);
  return true;
}

kn_status kn_pass_fuse_pad(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *pad = &g->nodes[i];
    if (!kn_pat_is(pad, "Pad") || pad->n_inputs < 1 || pad->n_outputs != 1) continue;
    int32_t x = pad->inputs[0], y = pad->outputs[0];
    int64_t pp[8];
    if (x < 0 || y < 0 || kn_pat_rank(g, x) != 4 || kn_pat_dtype(g, x) != KN_DTYPE_F32 ||
        !zero_pad(g, pad, pp) || pp[0] || pp[1] || pp[4] || pp[5])
      continue;
    bool neg = false;
    for (int k = 0; k < 8; k++) neg |= pp[k] < 0;
    if (neg) continue;
    int32_t ri = kn_pat_sole_reader(&p, y);
    if (ri < 0) continue;
    kn_node *r = &g->nodes[ri];
    bool conv = kn_pat_is(r, "Conv") ||
                (!r->dead && !strcmp(r->domain, KN_DOMAIN) && !strcmp(r->op_type, "FusedConv"));
    bool avg = kn_pat_is(r, "AveragePool");
    if ((!conv && !avg) || r->n_inputs < 1 || r->inputs[0] != y || kn_pat_reads(r, y) != 1)
      continue;
    int64_t own[4];
    if (!own_pads(r, own)) continue;
    if (avg) {
      const kn_attr *cm = kn_node_attr(r, "ceil_mode");
      const kn_attr *ci = kn_node_attr(r, "count_include_pad");
      bool has_own = own[0] || own[1] || own[2] || own[3];
      if (r->opset < 7 || (cm && cm->i) || (has_own && !(ci && ci->i == 1))) continue;
      if (!kn_node_set_int(r, "count_include_pad", 1)) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing a Pad");
        break;
      }
    }
    int64_t sum[4] = {own[0] + pp[2], own[1] + pp[3], own[2] + pp[6], own[3] + pp[7]};
    if (!kn_node_set_ints(r, "pads", sum, 4) || !kn_node_add_covers(r, &g->nodes[i])) {
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing a Pad");
      break;
    }
    r->inputs[0] = x;
    g->nodes[i].dead = true;
    *changed = true;
    if ((st = kn_pat_refresh(&p, ctx->err))) break;
  }
  kn_pat_free(&p);
  return st;
}
