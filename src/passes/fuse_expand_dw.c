/*
 * Expansion + depthwise fusion for inverted-residual blocks (MobileNetV2
 * and V3, EfficientNet, MnasNet, and the mobile backbones of SSDLite and
 * other detectors):
 *
 *   T = NhwcFusedConv(X, WE, BE)     1x1, stride 1, no pads, group 1
 *   Y = NhwcFusedConv(T, WD, BD)     depthwise (group = channels of T)
 *
 * becomes Y = NhwcExpandDwConv(X, WE, WD, BE, BD) (src/ops/expand_dw.c),
 * which computes each band of Y's rows from the rows of T it needs, kept
 * in a per-thread window in L2: the expanded tensor, t times the block's
 * input (MobileNetV2's 16 -> 96 channels at 112x112 is 4.8 MB), is never
 * written to memory and read back.  The expansion's activation moves to
 * the attributes expand_activation, expand_activation_alpha, ... .
 *
 * Checked: float32 channels-last steps with static shapes; T is read by
 * the depthwise step only; neither step has a residual, an input scale
 * (fuse_se) or a channel slice (concat_inplace); constant weights; the
 * expansion is a plain 1x1 (kernel 1x1, strides, dilations 1, no pads,
 * group 1); the depthwise step's weights are [E, 1, kh, kw] with group E.
 * Only when T is at least MIN_BYTES per image: a smaller T stays in L2 or
 * L3 between the two steps anyway, and the band split would recompute
 * the window's overlap rows on maps of a few rows.  Runs after
 * channels_last.
 */
#include "pattern.h"

#define MIN_BYTES ((int64_t)1 << 20)

static bool all_ints(const kn_node *n, const char *name, int64_t v, int32_t count) {
  const kn_attr *a = kn_node_attr(n, name);
  if (!a) return true;
  if (a->type != KN_ATTR_INTS || a->n != count) return false;
  for (int32_t i = 0; i < a->n; i++)
    if (a->ints[i] != v) return false;
  return true;
}

/* A channels-last conv step with no residual, scale or slice, whose
 * weights are a constant [.., .., kh, kw] float32 tensor. */
static bool plain_conv(const kn_graph *g, const kn_node *n) {
  if (n->dead || strcmp(n->domain, KN_DOMAIN) || strcmp(n->op_type, "NhwcFusedConv") ||
      n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 2 || n->n_inputs > 5 ||
      n->inputs[0] < 0 || n->inputs[1] < 0 || kn_node_attr(n, "concat_channels"))
    return false;
  for (int32_t k = 3; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0) return false;
  const kn_attr *ap = kn_node_attr(n, "auto_pad");
  if (ap && ap->s && strcmp(ap->s, "NOTSET")) return false;
  int32_t w = n->inputs[1];
  return kn_pat_dtype(g, n->inputs[0]) == KN_DTYPE_F32 && kn_pat_rank(g, n->inputs[0]) == 4 &&
         kn_pat_dtype(g, n->outputs[0]) == KN_DTYPE_F32 && kn_pat_rank(g, n->outputs[0]) == 4 &&
         kn_pat_dtype(g, w) == KN_DTYPE_F32 && kn_pat_rank(g, w) == 4 &&
         g->values[w].constant != NULL;
}

static bool known(const kn_graph *g, int32_t v) {
  for (int32_t i = 0; i < 4; i++)
    if (g->values[v].type.dims[i] < 1) return false;
  return true;
}

static const char *const act_attrs[] = {"activation", "activation_alpha", "activation_beta",
                                        "activation_min", "activation_max"};

/* Copies e's activation attributes to n with the expand_ prefix. */
static bool copy_act(kn_node *n, const kn_node *e) {
  for (size_t i = 0; i < sizeof act_attrs / sizeof act_attrs[0]; i++) {
    const kn_attr *a = kn_node_attr(e, act_attrs[i]);
    if (!a) continue;
    char name[64];
    snprintf(name, sizeof name, "expand_%s", act_attrs[i]);
    bool ok = a->type == KN_ATTR_STRING ? kn_node_set_string(n, name, a->s ? a->s : "")
              : a->type == KN_ATTR_FLOAT ? kn_node_set_float(n, name, a->f)
              : a->type == KN_ATTR_INT   ? kn_node_set_int(n, name, a->i)
                                         : false;
    if (!ok) return false;
  }
  return true;
}

kn_status kn_pass_fuse_expand_dw(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  int32_t n0 = g->n_nodes;
  for (int32_t di = 0; di < n0 && !st; di++) {
    const kn_node *d = &g->nodes[di];
    if (!plain_conv(g, d)) continue;
    int32_t t = d->inputs[0], wd = d->inputs[1];
    if (!known(g, t) || !known(g, wd) || kn_pat_sole_reader(&p, t) != di) continue;
    const int64_t *td = g->values[t].type.dims, *wdd = g->values[wd].type.dims;
    const kn_attr *ga = kn_node_attr(d, "group");
    int64_t e = td[3];
    if (!ga || ga->i != e || wdd[0] != e || wdd[1] != 1) continue;
    int32_t ei = g->values[t].producer;
    if (ei < 0 || ei >= g->n_nodes) continue;
    const kn_node *en = &g->nodes[ei];
    if (!plain_conv(g, en) || en->outputs[0] != t || !known(g, en->inputs[0])) continue;
    const int64_t *wed = g->values[en->inputs[1]].type.dims;
    const kn_attr *eg = kn_node_attr(en, "group");
    if ((eg && eg->i != 1) || wed[0] != e || wed[2] != 1 || wed[3] != 1 ||
        wed[1] != g->values[en->inputs[0]].type.dims[3] || !all_ints(en, "kernel_shape", 1, 2) ||
        !all_ints(en, "strides", 1, 2) || !all_ints(en, "dilations", 1, 2) ||
        !all_ints(en, "pads", 0, 4))
      continue;
    if (td[1] * td[2] * e * (int64_t)sizeof(float) < MIN_BYTES) continue;
    int32_t in[5] = {en->inputs[0], en->inputs[1], wd, en->n_inputs > 2 ? en->inputs[2] : -1,
                     d->n_inputs > 2 ? d->inputs[2] : -1};
    int32_t y = d->outputs[0];
    char *name = kn_strdup(d->name);
    int32_t ni = name ? kn_graph_new_node(g, "NhwcExpandDwConv", KN_DOMAIN, name, 5, in, 1, &y)
                      : -1;
    free(name);
    /* pointers into g->nodes are stale after kn_graph_new_node */
    kn_node *nn = ni >= 0 ? &g->nodes[ni] : NULL;
    bool ok = nn && kn_node_copy_attrs(nn, &g->nodes[di]) && copy_act(nn, &g->nodes[ei]) &&
              (!g->nodes[di].covers || (nn->covers = kn_strdup(g->nodes[di].covers))) &&
              kn_node_add_covers(nn, &g->nodes[ei]);
    if (!ok) {
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory fusing an expansion and a depthwise conv");
      break;
    }
    g->nodes[di].dead = true;
    g->nodes[ei].dead = true;
    *changed = true;
    st = kn_pat_refresh(&p, ctx->err);
  }
  kn_pat_free(&p);
  return st;
}
