/*
 * Squeeze-and-excite into the next convolution (EfficientNet, MobileNetV3):
 *
 *   s = Sigmoid(FC(GlobalAveragePool(x)))    [N, C, 1, 1]
 *   y = Mul(x, s)                            [N, C, H, W]
 *   z = Conv(y, W, B) | FusedConv(y, W, B?, Z?)
 *
 * becomes z = FusedConv(x, W, B?, Z?, S) with S = Flatten(s, 1) of shape
 * [N, C]: the conv scales its input channels as it reads them
 * (src/ops/fused.c), so the scaled map y is never a step or a tensor of its
 * own.  Flatten is an alias step (no copy).
 *
 * Checked: x is float32 of rank >= 3 with a known channel count C; s has
 * x's rank, C channels and ones after them, and the same batch as x (equal
 * known dims, or s computed from a GlobalAveragePool / ReduceMean of x, so
 * that its batch is x's); y is read only by the conv, as its input X; the
 * conv has no channel scale yet.  Runs after fuse_act, so the conv is
 * usually already a FusedConv with its bias, activation and residual.
 */
#include "pattern.h"

/* s is computed from a global pooling of x (within a few steps). */
static bool pooled_from(const kn_graph *g, int32_t s, int32_t x, int depth) {
  if (depth > 8 || s < 0) return false;
  int32_t pi = g->values[s].producer;
  if (pi < 0 || pi >= g->n_nodes || g->nodes[pi].dead) return false;
  const kn_node *n = &g->nodes[pi];
  if ((kn_pat_is(n, "GlobalAveragePool") || kn_pat_is(n, "ReduceMean")) && n->inputs[0] == x)
    return true;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v >= 0 && !g->values[v].constant && pooled_from(g, v, x, depth + 1)) return true;
  }
  return false;
}

/* s can scale x's channels as an [N, C] tensor. */
static bool channel_scale(const kn_graph *g, int32_t x, int32_t s) {
  int32_t r = kn_pat_rank(g, x);
  if (r < 3 || kn_pat_rank(g, s) != r || kn_pat_dtype(g, x) != KN_DTYPE_F32 ||
      kn_pat_dtype(g, s) != KN_DTYPE_F32)
    return false;
  const int64_t *xd = g->values[x].type.dims, *sd = g->values[s].type.dims;
  if (xd[1] < 0 || sd[1] != xd[1]) return false;
  for (int32_t i = 2; i < r; i++)
    if (sd[i] != 1) return false;
  return (xd[0] >= 0 && sd[0] == xd[0]) || pooled_from(g, s, x, 0);
}

/* The conv reading y (only reader, as X) that can take a channel scale. */
static int32_t conv_reader(const kn_pat *p, int32_t y) {
  int32_t ci = kn_pat_sole_reader(p, y);
  if (ci < 0) return -1;
  const kn_node *c = &p->g->nodes[ci];
  bool fused = !c->dead && !strcmp(c->domain, KN_DOMAIN) && !strcmp(c->op_type, "FusedConv");
  if (!fused && !kn_pat_is(c, "Conv")) return -1;
  if (c->inputs[0] != y || kn_pat_reads(c, y) != 1) return -1;
  if (fused && c->n_inputs > 4 && c->inputs[4] >= 0) return -1;
  return ci;
}

kn_status kn_pass_fuse_se(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t i = 0; i < n0 && !st; i++) {
    const kn_node *mul = &g->nodes[i];
    if (!kn_pat_is(mul, "Mul") || mul->n_inputs != 2 || mul->inputs[0] == mul->inputs[1])
      continue;
    int32_t y = mul->outputs[0], ci = conv_reader(&p, y);
    if (ci < 0) continue;
    int32_t k = channel_scale(g, mul->inputs[0], mul->inputs[1]) ? 0
                : channel_scale(g, mul->inputs[1], mul->inputs[0]) ? 1
                                                                    : -1;
    if (k < 0) continue;
    int32_t x = mul->inputs[k], s = mul->inputs[1 - k];
    /* S = Flatten(s, axis 1): [N, C] */
    char *name = kn_graph_unique_name(g, "se_scale");
    int32_t sf = name ? kn_graph_add_fresh_value(g, name) : -1;
    int32_t fi = sf >= 0 ? kn_graph_new_node(g, "Flatten", "", name, 1, &s, 1, &sf) : -1;
    free(name);
    if (fi < 0 || !kn_node_set_int(&g->nodes[fi], "axis", 1)) {
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing a channel scale");
      break;
    }
    kn_node *c = &g->nodes[ci];
    if (strcmp(c->domain, KN_DOMAIN)) {
      /* a plain Conv becomes FusedConv(X, W, B?, -, S) with its attributes */
      int32_t in[5] = {x, c->inputs[1], c->n_inputs > 2 ? c->inputs[2] : -1, -1, sf};
      int32_t out = c->outputs[0];
      int32_t ni = kn_graph_new_node(g, "FusedConv", KN_DOMAIN, c->name, 5, in, 1, &out);
      if (ni < 0 || !kn_node_copy_attrs(&g->nodes[ni], &g->nodes[ci]) ||
          !kn_node_add_covers(&g->nodes[ni], &g->nodes[ci]) ||
          !kn_node_add_covers(&g->nodes[ni], &g->nodes[i])) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing a channel scale");
        break;
      }
      g->nodes[ci].dead = true;
    } else {
      int32_t *in = kn_realloc(c->inputs, 5 * sizeof *in);
      if (!in || !kn_node_add_covers(c, &g->nodes[i])) {
        if (in) c->inputs = in;
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing a channel scale");
        break;
      }
      for (int32_t j = c->n_inputs; j < 5; j++) in[j] = -1;
      in[0] = x;
      in[4] = sf;
      c->inputs = in;
      c->n_inputs = 5;
    }
    g->nodes[i].dead = true;
    *changed = true;
    if ((st = kn_pat_refresh(&p, ctx->err))) break;
  }
  kn_pat_free(&p);
  return st;
}
