/*
 * fuse_norm: a LayerNormalization over the last axis of a FusedGemm's
 * result becomes the GEMM's row epilogue (FusedGemm norm =
 * "LayerNormalization", src/ops/fused.c): each block of rows is
 * normalised as soon as its last column is final, while it is still in the
 * L2, instead of the whole result going out to where it lives and coming
 * back for a second step.  This is the transformer's "x = LayerNorm(x +
 * Linear(h))" (the residual Add is the GEMM's already, by fuse_act).
 *
 * The IO model decides (docs/ARCHITECTURE.md, "The IO model"): the fusion is taken
 * when the fused step's predicted time is below the two steps' apart and
 * its live tiles still fit: the fused loop nest keeps the rows whole from
 * the L2 out, so a block of whole rows, with the GEMM's panels, must fit
 * the L2.  Rows too long for that (a product with very many columns on a
 * small L2) stay two steps.  Each decision, taken or not, is recorded with
 * the predicted times for the engine's build decisions.
 *
 * Preconditions: float32 throughout; the GEMM's result is read by the
 * LayerNormalization alone and is not a graph output; the norm is over the
 * last axis only (axis -1, or rank - 1) with float stash_type; its Mean and
 * InvStdDev outputs are absent or unread; scale and bias are both present
 * with one value per column; the FusedGemm has no norm yet.
 */
#include "pass.h"

#include <math.h>
#include <stdio.h>

#include "pattern.h"
#include "cost/iomodel.h"
#include "tactics/tactics.h"

static bool is_kiln(const kn_node *n, const char *op) {
  return !n->dead && !strcmp(n->domain, KN_DOMAIN) && !strcmp(n->op_type, op);
}

/* Static float32 shape with `n` elements (when n >= 0) or any. */
static bool f32_numel(const kn_graph *g, int32_t v, int64_t n) {
  if (v < 0) return false;
  const kn_type *t = &g->values[v].type;
  if (t->kind != KN_KIND_TENSOR || t->dtype != KN_DTYPE_F32 || t->rank < 0) return false;
  int64_t c = kn_shape_numel(t->rank, t->dims);
  return c >= 0 && (n < 0 || c == n);
}

/* The columns N of the LayerNormalization at ln when it normalises the
 * last axis of a float32 tensor of static shape with scale and bias of N
 * values, and nothing reads its Mean or InvStdDev; else -1. */
static int64_t last_axis_norm(const kn_pat *p, const kn_node *ln) {
  const kn_graph *g = p->g;
  if (ln->n_inputs != 3 || ln->inputs[2] < 0 || !f32_numel(g, ln->inputs[0], -1)) return -1;
  const kn_type *x = &g->values[ln->inputs[0]].type;
  if (x->rank < 1) return -1;
  const kn_attr *ax = kn_node_attr(ln, "axis"), *stash = kn_node_attr(ln, "stash_type");
  int64_t axis = ax ? ax->i : -1;
  if (axis != -1 && axis != x->rank - 1) return -1;
  if (stash && stash->i != 1) return -1;
  for (int32_t o = 1; o < ln->n_outputs; o++)
    if (ln->outputs[o] >= 0 && (p->uses[ln->outputs[o]] > 0 || g->values[ln->outputs[o]].is_output))
      return -1;
  int64_t n = x->dims[x->rank - 1];
  if (n < 1 || !f32_numel(g, ln->inputs[1], n) || !f32_numel(g, ln->inputs[2], n)) return -1;
  return n;
}

/* The fused step's loop nest: the GEMM's with the norm's whole rows, scale
 * and bias, and flops (kn_gemm_loops, src/tactics/gemm/gemm_tactic.c, does
 * the same for a FusedGemm that has its norm: one description of the fused
 * step). */
static bool fused_nest(const kn_graph *g, const kn_node *gemm, kn_loopnest *l) {
  memset(l, 0, sizeof *l);
  const kn_op_tactics *tt = kn_tactics_of(gemm);
  if (!tt || !tt->loops || !tt->loops(g, gemm, l)) return false;
  kn_loops_add_row_norm(l);
  return true;
}

/* Moves the LayerNormalization at li into the FusedGemm at gi. */
static kn_status fuse(kn_pat *p, int32_t gi, int32_t li, kn_error *err) {
  kn_graph *g = p->g;
  kn_node *gm = &g->nodes[gi], *ln = &g->nodes[li];
  const kn_attr *eps = kn_node_attr(ln, "epsilon");
  int32_t *in = kn_realloc(gm->inputs, 6 * sizeof *in);
  if (!in) goto oom;
  gm->inputs = in;
  for (int32_t j = gm->n_inputs; j < 4; j++) in[j] = -1;
  in[4] = ln->inputs[1];
  in[5] = ln->inputs[2];
  gm->n_inputs = 6;
  if (!kn_node_set_string(gm, "norm", "LayerNormalization") ||
      !kn_node_set_float(gm, "norm_epsilon", eps && eps->type == KN_ATTR_FLOAT ? eps->f : 1e-5f) ||
      !kn_node_add_covers(gm, ln))
    goto oom;
  gm->outputs[0] = ln->outputs[0];
  ln->dead = true;
  return kn_pat_refresh(p, err);
oom:
  return kn_fail(err, KN_ERR_OOM, "out of memory fusing '%s' into '%s'", ln->name, gm->name);
}

kn_status kn_pass_fuse_norm(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  if (g != ctx->m->graph) return KN_OK; /* the IO model predicts top-level steps */
  kn_machine fb;
  const kn_machine *mach = ctx->machine;
  if (!mach) {
    kn_machine_fallback(&fb);
    mach = &fb;
  }
  /* one core's view: whether a block of rows stays in its L2 (and the
   * tactics, which decide the thread split, are not chosen yet) */
  const int32_t threads = 1;
  kn_pat p;
  kn_status st = kn_pat_init(&p, g, ctx->err);
  if (st) return st;
  for (int32_t li = 0; li < g->n_nodes && !st; li++) {
    const kn_node *ln = &g->nodes[li];
    /* ONNX's (opset 17) or kiln's (what the layernorm pass makes below 17) */
    if (!(kn_pat_is(ln, "LayerNormalization") || is_kiln(ln, "LayerNormalization")) || !ln->op)
      continue;
    int64_t n = last_axis_norm(&p, ln);
    int32_t x = ln->inputs[0];
    int32_t gi = n > 0 ? g->values[x].producer : -1;
    if (gi < 0 || gi >= g->n_nodes) continue;
    const kn_node *gm = &g->nodes[gi];
    if (!is_kiln(gm, "FusedGemm") || !gm->op || gm->outputs[0] != x || p.uses[x] != 1 ||
        kn_pat_reads(ln, x) != 1 || g->values[x].is_output || kn_node_attr(gm, "norm"))
      continue;
    /* the model: apart (two steps) against fused (one, rows kept whole) */
    kn_io_step sg, sl, sf;
    kn_loopnest l;
    if (!fused_nest(g, gm, &l)) continue;
    kn_io_predict(ctx->m, gi, mach, threads, &sg);
    kn_io_predict(ctx->m, li, mach, threads, &sl);
    kn_io_predict_nest(ctx->m, &l, mach, threads, &sf);
    double apart = sg.predicted_s + sl.predicted_s;
    bool fits = !(sf.unfit >> KN_IO_WHOLE_FROM & 1);
    bool take = fits && sf.predicted_s < apart;
    char line[512];
    snprintf(line, sizeof line,
             "%s: LayerNormalization '%s' %s the GEMM's row epilogue: %.1f us fused, %.1f us "
             "apart (rows of %lld floats%s)",
             gm->name, ln->name, take ? "fused into" : "kept out of", sf.predicted_s * 1e6,
             apart * 1e6, (long long)n,
             fits ? " stay in the L2" : ": a block of whole rows does not fit the L2");
    if (ctx->decisions && !kn_lines_add_once(ctx->decisions, line)) {
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
      break;
    }
    if (!take) continue;
    st = fuse(&p, gi, li, ctx->err);
    *changed = true;
  }
  kn_pat_free(&p);
  return st;
}
