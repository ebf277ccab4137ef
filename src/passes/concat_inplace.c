/*
 * Concat elision for channels-last convolutions (SqueezeNet's fire
 * modules, Inception blocks, the CSP/C2f blocks of YOLO detectors):
 *
 *   y_k = NhwcFusedConv(x_k, W_k, B_k, -, S_k?)        k = 0..n-1
 *   y   = Concat(y_0, ..., y_{n-1}, axis = 3)
 *
 * becomes a chain in which each conv writes its channels straight into
 * its slice of y (layout.c: attributes concat_channels = C, the sum of the
 * inputs' channels, and concat_offset; input 5 the output being filled):
 *
 *   t_0 = NhwcFusedConv(x_0, W_0, B_0, -, S_0?)        channels [0, m_0)
 *   t_1 = NhwcFusedConv(x_1, W_1, B_1, -, S_1?, t_0)   channels [m_0, m_0 + m_1)
 *   ...
 *   y   = NhwcFusedConv(x_last, ..., t_{n-2})
 *
 * in the convs' own step order (the chain follows the node list, so it
 * adds no cycle; the channel offsets follow the Concat's input order).  The
 * memory planner gives every t_k and y one buffer (in place over input 5),
 * so the Concat's copy, its second buffer and, with two threads, its reads
 * of what the other core wrote, all disappear.
 *
 * Checked: the Concat is float32 of rank 4 on axis 3 (channels of the
 * channels-last steps); every input is the only output of a distinct
 * NhwcFusedConv that nothing else reads, with a known channel count, no
 * residual (a residual shares the output's stride in the kernels), not
 * depthwise (the depthwise kernel writes whole rows) and not already a
 * slice.  Runs after channels_last.  A Concat with other kinds of inputs
 * (a pooling branch, the block's own input as in DenseNet) stays a copy.
 */
#include "pattern.h"

#define MAX_PARTS 64

/* y is the output of an NhwcFusedConv that may write a channel slice; its
 * node index, or -1.  *m: its channel count. */
static int32_t slice_conv(const kn_pat *p, int32_t y, int32_t concat, int64_t *m) {
  const kn_graph *g = p->g;
  if (y < 0 || kn_pat_sole_reader(p, y) != concat) return -1;
  int32_t ci = g->values[y].producer;
  if (ci < 0 || ci >= g->n_nodes) return -1;
  const kn_node *c = &g->nodes[ci];
  if (c->dead || strcmp(c->domain, KN_DOMAIN) || strcmp(c->op_type, "NhwcFusedConv") ||
      c->n_outputs != 1 || c->outputs[0] != y || c->n_inputs > 5 ||
      (c->n_inputs > 3 && c->inputs[3] >= 0) || kn_node_attr(c, "concat_channels"))
    return -1;
  if (kn_pat_rank(g, y) != 4 || kn_pat_dtype(g, y) != KN_DTYPE_F32 ||
      kn_pat_rank(g, c->inputs[0]) != 4)
    return -1;
  int64_t ch = g->values[y].type.dims[3], cin = g->values[c->inputs[0]].type.dims[3];
  const kn_attr *ga = kn_node_attr(c, "group");
  int64_t group = ga ? ga->i : 1;
  if (ch <= 0 || cin <= 0 || (group > 1 && group == cin && ch == cin)) return -1;
  *m = ch;
  return ci;
}

kn_status kn_pass_concat_inplace(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *cat = &g->nodes[i];
    if (!kn_pat_is(cat, "Concat") || cat->n_inputs < 2 || cat->n_inputs > MAX_PARTS ||
        cat->n_outputs != 1 || cat->outputs[0] < 0)
      continue;
    int32_t y = cat->outputs[0];
    const kn_attr *ax = kn_node_attr(cat, "axis");
    if (!ax || (ax->i != 3 && ax->i != -1) || kn_pat_rank(g, y) != 4 ||
        kn_pat_dtype(g, y) != KN_DTYPE_F32)
      continue;
    int32_t conv[MAX_PARTS];
    int64_t off[MAX_PARTS], total = 0;
    bool ok = true;
    for (int32_t k = 0; k < cat->n_inputs && ok; k++) {
      int64_t m = 0;
      conv[k] = slice_conv(&p, cat->inputs[k], i, &m);
      ok = conv[k] >= 0;
      for (int32_t j = 0; j < k && ok; j++) ok = conv[j] != conv[k];
      off[k] = total;
      total += m;
    }
    if (!ok || total != g->values[y].type.dims[3]) continue;
    /* the chain, in step order */
    int32_t n = cat->n_inputs, order[MAX_PARTS];
    for (int32_t k = 0; k < n; k++) order[k] = k;
    for (int32_t a = 1; a < n; a++)
      for (int32_t b = a; b > 0 && conv[order[b]] < conv[order[b - 1]]; b--) {
        int32_t t = order[b];
        order[b] = order[b - 1];
        order[b - 1] = t;
      }
    int32_t prev = -1;
    for (int32_t q = 0; q < n && !st; q++) {
      kn_node *c = &g->nodes[conv[order[q]]];
      if (!kn_node_set_int(c, "concat_channels", total) ||
          !kn_node_set_int(c, "concat_offset", off[order[q]])) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory eliding a Concat");
        break;
      }
      if (prev >= 0) {
        int32_t *in = kn_realloc(c->inputs, 6 * sizeof *in);
        if (!in) {
          st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory eliding a Concat");
          break;
        }
        for (int32_t j = c->n_inputs; j < 6; j++) in[j] = -1;
        in[5] = prev;
        c->inputs = in;
        c->n_inputs = 6;
      }
      if (q == n - 1) {
        c->outputs[0] = y;
        if (!kn_node_add_covers(c, &g->nodes[i])) {
          st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory eliding a Concat");
          break;
        }
      }
      prev = c->outputs[0];
    }
    if (st) break;
    g->nodes[i].dead = true;
    *changed = true;
    if ((st = kn_pat_refresh(&p, ctx->err))) break;
  }
  kn_pat_free(&p);
  return st;
}
