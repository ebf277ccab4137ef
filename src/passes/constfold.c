/* Constant folding: a node whose inputs are all constants is run once, at
 * build time, with its op's own infer and run (exactly as the executor
 * would run it), and its results become constants.  Shape and Size of a
 * value whose static shape is fully known fold too, so shape arithmetic
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) collapses once the
 * input shapes are fixed.
 *
 * Left alone: nodes with subgraphs, random ops, DequantizeLinear, results that are not plain
 * tensors, results larger than ctx->fold_max_bytes (folding must not blow
 * up the engine file; a Constant node's value is already in it, so it is
 * exempt), nodes that fail (the run reports the error as before) and nodes
 * whose result is a graph output (a constant cannot take an output's
 * name). */
#include "pass.h"

/* Random ops differ from run to run; DequantizeLinear of constant weights
 * is left for the kernels (folding it would store the weights 4x larger
 * and hide the quantization pattern from later passes). */
static bool never_folded(const kn_node *n) {
  static const char *const ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                    "RandomUniformLike", "Multinomial", "Bernoulli",
                                    "DequantizeLinear"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(n->op_type, ops[i])) return true;
  return false;
}

static bool has_subgraph(const kn_node *n) {
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS) return true;
  return false;
}

static bool default_domain(const kn_node *n) {
  return !*n->domain || !strcmp(n->domain, "ai.onnx");
}

/* Shape/Size only read their input's dims: a fully known static shape is
 * enough. */
static bool reads_only_shape(const kn_node *n) {
  return default_domain(n) && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
}

static bool static_shape_known(const kn_type *t) {
  if (t->kind != KN_KIND_TENSOR || t->optional || !kn_dtype_is_valid(t->dtype) || t->rank < 0)
    return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] < 0) return false;
  return true;
}

static bool foldable(const kn_graph *g, const kn_node *n, const int32_t *uses) {
  if (n->dead || !n->op || never_folded(n) || has_subgraph(n)) return false;
  bool read = false;
  for (int32_t o = 0; o < n->n_outputs; o++) {
    int32_t v = n->outputs[o];
    if (v < 0) continue;
    if (g->values[v].is_output) return false;
    read |= uses[v] > 0;
  }
  if (!read) return false; /* dce's job */
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || g->values[v].constant) continue;
    if (k == 0 && reads_only_shape(n) && static_shape_known(&g->values[v].type)) continue;
    return false;
  }
  return true;
}

static bool within_cap(const kn_tensor *t, int64_t cap) {
  int64_t cnt = kn_shape_numel(t->rank, t->dims);
  if (cnt < 0 || !kn_dtype_is_valid(t->dtype)) return false;
  return (uint64_t)cnt <= (uint64_t)cap / kn_dtype_size(t->dtype);
}

static bool result_ok(const kn_slot *s) {
  const kn_tensor *t = &s->t;
  return s->kind == KN_KIND_TENSOR && kn_dtype_is_valid(t->dtype) && t->rank >= 0 &&
         kn_shape_known(t) && (t->data || kn_tensor_numel(t) == 0);
}

/* Evaluate node `idx` into out[] (n_outputs slots, released by the caller).
 * *ok is false when the node cannot or should not be folded. */
static kn_status evaluate(kn_pass_ctx *ctx, const kn_graph *g, const kn_node *n,
                          kn_slot *in, kn_slot **pin, kn_slot *out, kn_slot **pout,
                          bool *ok) {
  *ok = false;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    pin[k] = NULL;
    memset(&in[k], 0, sizeof in[k]);
    if (v < 0) continue;
    const kn_value *val = &g->values[v];
    in[k].kind = KN_KIND_TENSOR;
    if (val->constant) {
      in[k].t = kn_tensor_view(val->constant);
    } else { /* dims only (Shape, Size): no data */
      in[k].t.dtype = val->type.dtype;
      in[k].t.rank = val->type.rank;
      memcpy(in[k].t.dims, val->type.dims, sizeof in[k].t.dims);
    }
    pin[k] = &in[k];
  }
  for (int32_t o = 0; o < n->n_outputs; o++) {
    memset(&out[o], 0, sizeof out[o]);
    out[o].t.rank = -1;
    pout[o] = &out[o];
  }
  kn_error scratch; /* a node that fails is left for the run to report */
  kn_op_ctx oc = {.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = pin,
                  .n_out = n->n_outputs, .out = pout, .static_infer = false,
                  .err = &scratch, .label = ctx->m ? ctx->m->label : NULL};
  bool capped = strcmp(n->op_type, "Constant") != 0 || !default_domain(n);
  if (n->op->infer(&oc)) return KN_OK;
  for (int32_t o = 0; o < n->n_outputs; o++) {
    kn_slot *s = &out[o];
    if (s->kind == KN_KIND_TENSOR && kn_shape_known(&s->t) && !s->t.data) {
      if (capped && !within_cap(&s->t, ctx->fold_max_bytes)) return KN_OK;
      kn_tensor shape = s->t;
      if (kn_tensor_alloc(&s->t, shape.dtype, shape.rank, shape.dims, &scratch)) return KN_OK;
    }
  }
  if (n->op->run(&oc)) return KN_OK;
  for (int32_t o = 0; o < n->n_outputs; o++) {
    if (n->outputs[o] < 0) continue;
    if (!result_ok(&out[o])) return KN_OK;
    if (capped && !within_cap(&out[o].t, ctx->fold_max_bytes)) return KN_OK;
    if (!out[o].t.owned) { /* a view of an input: make the constant own it */
      kn_tensor copy;
      memset(&copy, 0, sizeof copy);
      if (kn_tensor_copy(&copy, &out[o].t, ctx->err))
        return kn_fail(ctx->err, KN_ERR_OOM, "out of memory folding node '%s'", n->name);
      out[o].t = copy;
    }
  }
  *ok = true;
  return KN_OK;
}

static kn_status fold_all(kn_pass_ctx *ctx, kn_graph *g, const int32_t *uses, bool *changed) {
  kn_status st = KN_OK;
  int32_t max_in = 1, max_out = 1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].n_inputs > max_in) max_in = g->nodes[i].n_inputs;
    if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
  }
  kn_slot *in = kn_calloc((size_t)max_in, sizeof *in), *out = kn_calloc((size_t)max_out, sizeof *out);
  kn_slot **pin = kn_calloc((size_t)max_in, sizeof *pin),
          **pout = kn_calloc((size_t)max_out, sizeof *pout);
  if (!in || !out || !pin || !pout) {
    st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    if (!foldable(g, &g->nodes[i], uses)) continue;
    bool ok = false;
    st = evaluate(ctx, g, &g->nodes[i], in, pin, out, pout, &ok);
    for (int32_t o = 0; ok && !st && o < g->nodes[i].n_outputs; o++) {
      int32_t v = g->nodes[i].outputs[o];
      if (v < 0) continue;
      char *hint = kn_strdup(g->values[v].name);
      int32_t c = hint ? kn_graph_add_constant(g, hint, &out[o].t) : -1;
      free(hint);
      if (c < 0) {
        st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory folding node '%s'",
                     g->nodes[i].name);
        break;
      }
      kn_graph_replace_value(g, v, c);
    }
    if (ok && !st) {
      g->nodes[i].dead = true;
      *changed = true;
    }
    for (int32_t o = 0; o < g->nodes[i].n_outputs; o++) kn_slot_release(&out[o]);
  }
done:
  free(in);
  free(out);
  free(pin);
  free(pout);
  return st;
}

kn_status kn_pass_constfold(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  /* A fold can make a later node's static shape known only after
   * re-inference (a Reshape whose target just became constant), and that
   * shape may let a Shape further down fold: sweep, re-infer, sweep again
   * until nothing folds (each sweep that continues kills a node). */
  kn_status st = KN_OK;
  for (bool again = true; again && !st;) {
    again = false;
    int32_t *uses = kn_calloc((size_t)g->n_values + 1, sizeof *uses);
    if (!uses) return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
    /* counts of the values present now; folding only adds constants */
    kn_graph_use_counts(g, uses);
    st = fold_all(ctx, g, uses, &again);
    free(uses);
    if (st || !again) break;
    *changed = true;
    st = kn_graph_compact(g, ctx->m->label, ctx->err);
    if (!st) st = kn_ops_infer_graph(ctx->m, g, ctx->err);
  }
  return st;
}
