/* Control flow: If, Loop, Scan, SequenceMap.  Bodies run through the
 * executor's run_subgraph callback; outer-scope values resolve there. */
#include "op.h"

static const kn_graph *graph_attr(kn_op_ctx *ctx, const char *name) {
  const kn_attr *a = kn_attr_get(ctx, name);
  return a && a->type == KN_ATTR_GRAPH ? a->g : NULL;
}

static kn_status need_graph(kn_op_ctx *ctx, const char *name, const kn_graph **g) {
  *g = graph_attr(ctx, name);
  if (!*g) return kn_op_fail(ctx, KN_ERR_PARSE, "attribute '%s' (a graph) is required", name);
  return KN_OK;
}

/* Output `o` of the node takes the static type of value `v` of a body. */
static void out_from_value(kn_op_ctx *ctx, int32_t o, const kn_value *v,
                           bool prepend_dim) {
  if (o >= ctx->n_out) return;
  kn_slot *s = ctx->out[o];
  if (v->type.kind == KN_KIND_SEQUENCE) {
    s->kind = KN_KIND_SEQUENCE;
    s->seq.elem_dtype = v->type.dtype;
    return;
  }
  if (v->type.kind != KN_KIND_TENSOR || v->type.optional) return;
  s->kind = KN_KIND_TENSOR;
  s->t.dtype = v->type.dtype;
  s->t.rank = -1;
  if (!ctx->static_infer) return; /* runtime: run sizes the outputs */
  if (v->type.rank >= 0 && v->type.rank + (prepend_dim ? 1 : 0) <= KN_MAX_RANK) {
    int32_t r = 0;
    if (prepend_dim) s->t.dims[r++] = -1;
    for (int32_t d = 0; d < v->type.rank; d++) s->t.dims[r++] = v->type.dims[d];
    s->t.rank = r;
  }
}

/* Move a body result into a node output. */
static void move_slot(kn_slot *dst, kn_slot *src) {
  kn_slot_release(dst);
  *dst = *src;
  memset(src, 0, sizeof *src);
}

static kn_status cond_value(kn_op_ctx *ctx, const kn_tensor *t, bool *out) {
  if (kn_tensor_numel(t) != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "condition must have one element, got %lld",
                      (long long)kn_tensor_numel(t));
  *out = kn_load_f64(t->data, t->dtype, 0) != 0;
  return KN_OK;
}

/* ---- If ----------------------------------------------------------------- */

static kn_status if_infer(kn_op_ctx *ctx) {
  const kn_graph *tg, *eg;
  kn_status st = need_graph(ctx, "then_branch", &tg);
  if (!st) st = need_graph(ctx, "else_branch", &eg);
  if (st) return st;
  if (tg->n_outputs != ctx->n_out || eg->n_outputs != ctx->n_out)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "branches have %d and %d outputs, the node has %d", tg->n_outputs,
                      eg->n_outputs, ctx->n_out);
  const kn_tensor *c = kn_in(ctx, 0);
  if (c && c->dtype && c->dtype != KN_DTYPE_BOOL)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "cond has dtype %s, expected bool",
                      kn_dtype_name(c->dtype));
  for (int32_t o = 0; o < ctx->n_out; o++) {
    const kn_value *a = &tg->values[tg->outputs[o]];
    const kn_value *b = &eg->values[eg->outputs[o]];
    if (a->type.kind && b->type.kind && a->type.kind != b->type.kind)
      return kn_op_fail(ctx, KN_ERR_DTYPE,
                        "output %d is a %s in then_branch but a %s in else_branch", o,
                        a->type.kind == KN_KIND_SEQUENCE ? "sequence" : "tensor",
                        b->type.kind == KN_KIND_SEQUENCE ? "sequence" : "tensor");
    if (a->type.dtype && b->type.dtype && a->type.dtype != b->type.dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE,
                        "output %d is %s in then_branch but %s in else_branch", o,
                        kn_dtype_name(a->type.dtype), kn_dtype_name(b->type.dtype));
    out_from_value(ctx, o, a, false);
    if (ctx->static_infer && ctx->out[o]->kind == KN_KIND_TENSOR) {
      kn_tensor *t = &ctx->out[o]->t;
      if (b->type.rank != t->rank) t->rank = -1;
      for (int32_t d = 0; d < t->rank; d++)
        if (b->type.dims[d] != t->dims[d]) t->dims[d] = -1;
    }
  }
  return KN_OK;
}

static kn_status if_run(kn_op_ctx *ctx) {
  const kn_tensor *c;
  kn_status st = kn_in_req(ctx, 0, &c);
  bool cond = false;
  if (!st) st = cond_value(ctx, c, &cond);
  if (st) return st;
  const kn_graph *g = graph_attr(ctx, cond ? "then_branch" : "else_branch");
  kn_slot *res = kn_calloc((size_t)ctx->n_out + 1, sizeof *res);
  if (!res) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  st = ctx->run_subgraph(ctx, g, 0, NULL, ctx->n_out, res);
  for (int32_t o = 0; o < ctx->n_out; o++) {
    if (!st) move_slot(ctx->out[o], &res[o]);
    kn_slot_release(&res[o]);
  }
  free(res);
  return st;
}

/* ---- stacking helpers --------------------------------------------------- */

typedef struct stack {
  kn_tensor *items;
  int32_t n, cap;
} stack;

static void stack_free(stack *s) {
  for (int32_t i = 0; i < s->n; i++) kn_tensor_release(&s->items[i]);
  free(s->items);
  memset(s, 0, sizeof *s);
}

static kn_status stack_push(kn_op_ctx *ctx, stack *s, kn_slot *v) {
  if (v->kind != KN_KIND_TENSOR)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "scan outputs must be tensors");
  if (s->n > 0) {
    const kn_tensor *f = &s->items[0];
    bool same = f->dtype == v->t.dtype && f->rank == v->t.rank;
    for (int32_t d = 0; same && d < f->rank; d++) same = f->dims[d] == v->t.dims[d];
    if (!same)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "scan output changes shape or dtype between iterations");
  }
  if (v->t.rank + 1 > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "scan output rank exceeds %d", KN_MAX_RANK);
  if (!KN_GROW(s->items, s->cap, (int64_t)s->n + 1))
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  s->items[s->n++] = v->t;
  memset(v, 0, sizeof *v);
  return KN_OK;
}

/* Concatenate the stacked items along a new axis `axis` (reversed order when
 * `reverse`).  `proto` gives dtype/shape when there are no items. */
static kn_status stack_emit(kn_op_ctx *ctx, int32_t o, stack *s, int32_t axis,
                            bool reverse, const kn_value *proto) {
  if (o >= ctx->n_out) return KN_OK;
  int64_t dims[KN_MAX_RANK];
  int32_t rank;
  kn_dtype dt;
  if (s->n == 0) {
    dt = proto->type.dtype ? proto->type.dtype : KN_DTYPE_F32;
    rank = proto->type.rank >= 0 ? proto->type.rank + 1 : 1;
    for (int32_t d = 0; d < rank; d++)
      dims[d] = d == axis ? 0 : (proto->type.rank >= 0 ? proto->type.dims[d - (d > axis)] : 0);
    for (int32_t d = 0; d < rank; d++)
      if (dims[d] < 0) dims[d] = 0;
    return kn_out_alloc(ctx, o, dt, rank, dims);
  }
  const kn_tensor *f = &s->items[0];
  dt = f->dtype;
  rank = f->rank + 1;
  if (axis < 0 || axis >= rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "scan output axis %d out of range", axis);
  for (int32_t d = 0, k = 0; d < rank; d++) dims[d] = d == axis ? s->n : f->dims[k++];
  kn_status st = kn_out_alloc(ctx, o, dt, rank, dims);
  if (st) return st;
  kn_tensor *out = &ctx->out[o]->t;
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= f->dims[d];
  for (int32_t d = axis; d < f->rank; d++) inner *= f->dims[d];
  for (int32_t i = 0; i < s->n; i++) {
    const kn_tensor *it = &s->items[reverse ? s->n - 1 - i : i];
    for (int64_t a = 0; a < outer && !st; a++)
      st = kn_copy_elems(ctx, out->data, (a * s->n + i) * inner, it->data, a * inner,
                         inner, dt);
  }
  return st;
}

/* ---- Loop --------------------------------------------------------------- */

static kn_status loop_infer(kn_op_ctx *ctx) {
  const kn_graph *body;
  kn_status st = need_graph(ctx, "body", &body);
  if (st) return st;
  int32_t nvars = ctx->n_in - 2;
  if (nvars < 0) nvars = 0;
  if (body->n_inputs != nvars + 2 || body->n_outputs < nvars + 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "body has %d inputs and %d outputs; with %d loop-carried values "
                      "it needs %d inputs and at least %d outputs",
                      body->n_inputs, body->n_outputs, nvars, nvars + 2, nvars + 1);
  if (ctx->n_out > body->n_outputs - 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "node has %d outputs, body gives %d",
                      ctx->n_out, body->n_outputs - 1);
  for (int32_t o = 0; o < ctx->n_out; o++) {
    const kn_value *v = &body->values[body->outputs[o + 1]];
    if (o < nvars) {
      const kn_slot *in = ctx->in[o + 2];
      if (in && in->kind == KN_KIND_TENSOR && ctx->static_infer) {
        out_from_value(ctx, o, v, false);
        kn_tensor *t = kn_out(ctx, o);
        if (!t->dtype) t->dtype = in->t.dtype;
        t->rank = -1;
      } else {
        out_from_value(ctx, o, v, false);
      }
    } else {
      out_from_value(ctx, o, v, true);
    }
  }
  return KN_OK;
}

static kn_status loop_run(kn_op_ctx *ctx) {
  const kn_graph *body = graph_attr(ctx, "body");
  int32_t nvars = ctx->n_in - 2 > 0 ? ctx->n_in - 2 : 0;
  int32_t nscan = body->n_outputs - 1 - nvars;
  const kn_tensor *mt = kn_in(ctx, 0), *ct = kn_in(ctx, 1);
  int64_t trip = INT64_MAX;
  bool cond = true;
  kn_status st = KN_OK;
  if (mt) {
    if (kn_tensor_numel(mt) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "trip count M must have one element");
    trip = kn_scalar_i64(mt);
  }
  if (ct) {
    st = cond_value(ctx, ct, &cond);
    if (st) return st;
  }
  int32_t nb_in = nvars + 2, nb_out = body->n_outputs;
  kn_slot *vars = kn_calloc((size_t)nvars + 1, sizeof *vars);
  kn_slot *res = kn_calloc((size_t)nb_out + 1, sizeof *res);
  const kn_slot **bin = kn_calloc((size_t)nb_in + 1, sizeof *bin);
  stack *scans = kn_calloc((size_t)nscan + 1, sizeof *scans);
  kn_slot iter = {0}, cslot = {0};
  int64_t one = 1;
  if (!vars || !res || !bin || !scans) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t v = 0; v < nvars && !st; v++)
    if (ctx->in[v + 2]) st = kn_slot_copy(&vars[v], ctx->in[v + 2], ctx->err);
  if (!st) st = kn_tensor_alloc(&iter.t, KN_DTYPE_I64, 0, &one, ctx->err);
  if (!st) st = kn_tensor_alloc(&cslot.t, KN_DTYPE_BOOL, 0, &one, ctx->err);
  iter.kind = cslot.kind = KN_KIND_TENSOR;
  for (int64_t i = 0; !st && i < trip && cond; i++) {
    ((int64_t *)iter.t.data)[0] = i;
    ((uint8_t *)cslot.t.data)[0] = cond;
    bin[0] = &iter;
    bin[1] = &cslot;
    for (int32_t v = 0; v < nvars; v++) bin[v + 2] = &vars[v];
    st = ctx->run_subgraph(ctx, body, nb_in, bin, nb_out, res);
    if (st) break;
    if (res[0].kind != KN_KIND_TENSOR) {
      st = kn_op_fail(ctx, KN_ERR_DTYPE, "body's condition output is not a tensor");
      break;
    }
    st = cond_value(ctx, &res[0].t, &cond);
    for (int32_t v = 0; v < nvars && !st; v++) move_slot(&vars[v], &res[v + 1]);
    for (int32_t k = 0; k < nscan && !st; k++)
      st = stack_push(ctx, &scans[k], &res[1 + nvars + k]);
    for (int32_t o = 0; o < nb_out; o++) kn_slot_release(&res[o]);
  }
  for (int32_t o = 0; o < ctx->n_out && !st; o++) {
    if (o < nvars) move_slot(ctx->out[o], &vars[o]);
    else st = stack_emit(ctx, o, &scans[o - nvars], 0, false,
                         &body->values[body->outputs[o + 1]]);
  }
done:
  if (vars)
    for (int32_t v = 0; v < nvars; v++) kn_slot_release(&vars[v]);
  if (res)
    for (int32_t o = 0; o < nb_out; o++) kn_slot_release(&res[o]);
  if (scans)
    for (int32_t k = 0; k < nscan; k++) stack_free(&scans[k]);
  kn_slot_release(&iter);
  kn_slot_release(&cslot);
  free(vars);
  free(res);
  free(bin);
  free(scans);
  return st;
}

/* ---- Scan --------------------------------------------------------------- */

/* Slice t at index `i` along `axis` into a new tensor (rank - 1). */
static kn_status take_slice(kn_op_ctx *ctx, const kn_tensor *t, int32_t axis, int64_t i,
                            kn_tensor *out) {
  int64_t dims[KN_MAX_RANK];
  for (int32_t d = 0, k = 0; d < t->rank; d++)
    if (d != axis) dims[k++] = t->dims[d];
  kn_status st = kn_tensor_alloc(out, t->dtype, t->rank - 1, dims, ctx->err);
  if (st) return st;
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= t->dims[d];
  for (int32_t d = axis + 1; d < t->rank; d++) inner *= t->dims[d];
  for (int64_t a = 0; a < outer && !st; a++)
    st = kn_copy_elems(ctx, out->data, a * inner, t->data, (a * t->dims[axis] + i) * inner,
                       inner, t->dtype);
  return st;
}

static kn_status scan_infer(kn_op_ctx *ctx) {
  const kn_graph *body;
  kn_status st = need_graph(ctx, "body", &body);
  if (st) return st;
  int64_t m = kn_attr_int(ctx, "num_scan_inputs", -1);
  int32_t first = ctx->opset < 9 ? 1 : 0; /* Scan-8: sequence_lens first */
  int32_t n_in = ctx->n_in - first;
  if (m < 1 || m > n_in)
    return kn_op_fail(ctx, KN_ERR_PARSE, "num_scan_inputs %lld is out of range 1..%d",
                      (long long)m, n_in);
  int32_t nstate = n_in - (int32_t)m;
  if (body->n_inputs != n_in || body->n_outputs != ctx->n_out || ctx->n_out < nstate)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "body has %d inputs/%d outputs, the node %d/%d", body->n_inputs,
                      body->n_outputs, n_in, ctx->n_out);
  for (int32_t o = 0; o < ctx->n_out; o++) {
    kn_slot *s = ctx->out[o];
    s->kind = KN_KIND_TENSOR;
    s->t.dtype = body->values[body->outputs[o]].type.dtype;
    s->t.rank = -1;
  }
  return KN_OK;
}

/* One Scan-9 style run over `ins` (states then scan inputs). */
static kn_status scan_once(kn_op_ctx *ctx, const kn_graph *body, int32_t nstate,
                           int32_t m, const kn_tensor *const *ins, int32_t axis_shift,
                           kn_slot *final_states, stack *scans) {
  const int64_t *in_axes, *in_dirs;
  int32_t n_axes = kn_attr_ints(ctx, "scan_input_axes", &in_axes);
  int32_t n_dirs = kn_attr_ints(ctx, "scan_input_directions", &in_dirs);
  if (ctx->opset < 9) n_dirs = kn_attr_ints(ctx, "directions", &in_dirs);
  int32_t axes[64];
  if (m > 64) return kn_op_fail(ctx, KN_ERR_LIMIT, "more than 64 scan inputs");
  int64_t len = -1;
  kn_status st = KN_OK;
  for (int32_t k = 0; k < m; k++) {
    const kn_tensor *t = ins[nstate + k];
    int64_t ax = k < n_axes ? in_axes[k] : 0;
    st = kn_axis(ctx, ax, t->rank, &axes[k]);
    if (st) return st;
    (void)axis_shift;
    if (len >= 0 && t->dims[axes[k]] != len)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "scan inputs have different lengths");
    len = t->dims[axes[k]];
  }
  int32_t nout = body->n_outputs;
  kn_slot *states = kn_calloc((size_t)nstate + 1, sizeof *states);
  kn_slot *bslots = kn_calloc((size_t)m + 1, sizeof *bslots);
  const kn_slot **bin = kn_calloc((size_t)body->n_inputs + 1, sizeof *bin);
  kn_slot *res = kn_calloc((size_t)nout + 1, sizeof *res);
  if (!states || !bslots || !bin || !res) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int32_t s = 0; s < nstate && !st; s++) {
    states[s].kind = KN_KIND_TENSOR;
    st = kn_tensor_copy(&states[s].t, ins[s], ctx->err);
  }
  for (int64_t i = 0; i < len && !st; i++) {
    for (int32_t k = 0; k < m && !st; k++) {
      kn_slot_release(&bslots[k]);
      bslots[k].kind = KN_KIND_TENSOR;
      bool rev = k < n_dirs && in_dirs[k] == 1;
      st = take_slice(ctx, ins[nstate + k], axes[k], rev ? len - 1 - i : i, &bslots[k].t);
    }
    if (st) break;
    for (int32_t s = 0; s < nstate; s++) bin[s] = &states[s];
    for (int32_t k = 0; k < m; k++) bin[nstate + k] = &bslots[k];
    st = ctx->run_subgraph(ctx, body, body->n_inputs, bin, nout, res);
    for (int32_t s = 0; s < nstate && !st; s++) move_slot(&states[s], &res[s]);
    for (int32_t k = nstate; k < nout && !st; k++) st = stack_push(ctx, &scans[k - nstate], &res[k]);
    for (int32_t o = 0; o < nout; o++) kn_slot_release(&res[o]);
  }
  for (int32_t s = 0; s < nstate && !st; s++) move_slot(&final_states[s], &states[s]);
  if (states)
    for (int32_t s = 0; s < nstate; s++) kn_slot_release(&states[s]);
  if (bslots)
    for (int32_t k = 0; k < m; k++) kn_slot_release(&bslots[k]);
  free(states);
  free(bslots);
  free(bin);
  free(res);
  return st;
}

static kn_status scan_run(kn_op_ctx *ctx) {
  const kn_graph *body = graph_attr(ctx, "body");
  int32_t first = ctx->opset < 9 ? 1 : 0;
  int32_t n_in = ctx->n_in - first;
  int32_t m = (int32_t)kn_attr_int(ctx, "num_scan_inputs", 1);
  int32_t nstate = n_in - m, nscan = ctx->n_out - nstate;
  const int64_t *out_axes, *out_dirs;
  int32_t n_oaxes = kn_attr_ints(ctx, "scan_output_axes", &out_axes);
  int32_t n_odirs = kn_attr_ints(ctx, "scan_output_directions", &out_dirs);
  const kn_tensor **ins = kn_calloc((size_t)n_in + 1, sizeof *ins);
  kn_slot *finals = kn_calloc((size_t)nstate + 1, sizeof *finals);
  stack *scans = kn_calloc((size_t)nscan + 1, sizeof *scans);
  kn_status st = KN_OK;
  if (!ins || !finals || !scans) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int32_t i = 0; i < n_in && !st; i++) st = kn_in_req(ctx, first + i, &ins[i]);
  if (!st && ctx->opset < 9) {
    /* Scan-8: a batch axis 0 on every input; run each batch separately
       and stack the results along axis 0 (states and scan outputs). */
    int64_t batch = ins[0]->rank > 0 ? ins[0]->dims[0] : 0;
    stack *bstates = kn_calloc((size_t)nstate + 1, sizeof *bstates);
    stack *bscans = kn_calloc((size_t)nscan + 1, sizeof *bscans);
    const kn_tensor **bins = kn_calloc((size_t)n_in + 1, sizeof *bins);
    kn_tensor *slices = kn_calloc((size_t)n_in + 1, sizeof *slices);
    if (!bstates || !bscans || !bins || !slices) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    if (kn_in(ctx, 0))
      st = st ? st : kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "Scan-8 sequence_lens is not supported");
    for (int32_t i = 0; i < n_in && !st; i++)
      if (ins[i]->rank < 1 || ins[i]->dims[0] != batch)
        st = kn_op_fail(ctx, KN_ERR_SHAPE, "input %d lacks the batch dimension %lld",
                        first + i, (long long)batch);
    for (int64_t b = 0; b < batch && !st; b++) {
      for (int32_t i = 0; i < n_in && !st; i++) {
        kn_tensor_release(&slices[i]);
        st = take_slice(ctx, ins[i], 0, b, &slices[i]);
        bins[i] = &slices[i];
      }
      stack *inner = kn_calloc((size_t)nscan + 1, sizeof *inner);
      if (!inner) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
      if (!st) st = scan_once(ctx, body, nstate, m, bins, 0, finals, inner);
      for (int32_t s = 0; s < nstate && !st; s++) st = stack_push(ctx, &bstates[s], &finals[s]);
      for (int32_t k = 0; k < nscan && !st; k++) {
        /* stack this batch's iterations into one tensor, then push it */
        kn_slot tmp = {0};
        kn_slot *save = ctx->out[nstate + k];
        ctx->out[nstate + k] = &tmp;
        bool rev = k < n_odirs && out_dirs[k] == 1;
        st = stack_emit(ctx, nstate + k, &inner[k], 0, rev,
                        &body->values[body->outputs[nstate + k]]);
        ctx->out[nstate + k] = save;
        if (!st) st = stack_push(ctx, &bscans[k], &tmp);
        kn_slot_release(&tmp);
      }
      if (inner)
        for (int32_t k = 0; k < nscan; k++) stack_free(&inner[k]);
      free(inner);
    }
    for (int32_t s = 0; s < nstate && !st; s++)
      st = stack_emit(ctx, s, &bstates[s], 0, false, &body->values[body->outputs[s]]);
    for (int32_t k = 0; k < nscan && !st; k++)
      st = stack_emit(ctx, nstate + k, &bscans[k], 0, false,
                      &body->values[body->outputs[nstate + k]]);
    if (bstates)
      for (int32_t s = 0; s < nstate; s++) stack_free(&bstates[s]);
    if (bscans)
      for (int32_t k = 0; k < nscan; k++) stack_free(&bscans[k]);
    if (slices)
      for (int32_t i = 0; i < n_in; i++) kn_tensor_release(&slices[i]);
    free(bstates);
    free(bscans);
    free(bins);
    free(slices);
  } else if (!st) {
    st = scan_once(ctx, body, nstate, m, ins, 0, finals, scans);
    for (int32_t s = 0; s < nstate && !st; s++) move_slot(ctx->out[s], &finals[s]);
    for (int32_t k = 0; k < nscan && !st; k++) {
      const kn_value *proto = &body->values[body->outputs[nstate + k]];
      int32_t rank = (scans[k].n ? scans[k].items[0].rank : proto->type.rank) + 1;
      int32_t axis;
      st = kn_axis(ctx, k < n_oaxes ? out_axes[k] : 0, rank, &axis);
      bool rev = k < n_odirs && out_dirs[k] == 1;
      if (!st) st = stack_emit(ctx, nstate + k, &scans[k], axis, rev, proto);
    }
  }
  if (finals)
    for (int32_t s = 0; s < nstate; s++) kn_slot_release(&finals[s]);
  if (scans)
    for (int32_t k = 0; k < nscan; k++) stack_free(&scans[k]);
  free(ins);
  free(finals);
  free(scans);
  return st;
}

/* ---- SequenceMap -------------------------------------------------------- */

static kn_status seqmap_infer(kn_op_ctx *ctx) {
  const kn_graph *body;
  kn_status st = need_graph(ctx, "body", &body);
  if (st) return st;
  if (body->n_inputs != ctx->n_in || body->n_outputs != ctx->n_out)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "body has %d inputs/%d outputs, the node %d/%d",
                      body->n_inputs, body->n_outputs, ctx->n_in, ctx->n_out);
  for (int32_t o = 0; o < ctx->n_out; o++) {
    ctx->out[o]->kind = KN_KIND_SEQUENCE;
    ctx->out[o]->seq.elem_dtype = body->values[body->outputs[o]].type.dtype;
  }
  return KN_OK;
}

static kn_status seqmap_run(kn_op_ctx *ctx) {
  const kn_graph *body = graph_attr(ctx, "body");
  const kn_slot *s0 = ctx->in[0];
  if (!s0 || s0->kind != KN_KIND_SEQUENCE)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 must be a sequence");
  int32_t n = s0->seq.count;
  for (int32_t k = 1; k < ctx->n_in; k++)
    if (ctx->in[k] && ctx->in[k]->kind == KN_KIND_SEQUENCE && ctx->in[k]->seq.count != n)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d has %d items, input 0 has %d", k,
                        ctx->in[k]->seq.count, n);
  kn_status st = KN_OK;
  kn_slot *items = kn_calloc((size_t)ctx->n_in + 1, sizeof *items);
  const kn_slot **bin = kn_calloc((size_t)ctx->n_in + 1, sizeof *bin);
  kn_slot *res = kn_calloc((size_t)ctx->n_out + 1, sizeof *res);
  if (!items || !bin || !res) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int32_t o = 0; o < ctx->n_out && !st; o++) {
    kn_slot_release(ctx->out[o]);
    ctx->out[o]->kind = KN_KIND_SEQUENCE;
    ctx->out[o]->seq.elem_dtype = body->values[body->outputs[o]].type.dtype;
  }
  for (int32_t i = 0; i < n && !st; i++) {
    for (int32_t k = 0; k < ctx->n_in; k++) {
      const kn_slot *s = ctx->in[k];
      if (s && s->kind == KN_KIND_SEQUENCE) {
        items[k].kind = KN_KIND_TENSOR;
        items[k].t = kn_tensor_view(&s->seq.items[i]);
        bin[k] = &items[k];
      } else {
        bin[k] = s;
      }
    }
    st = ctx->run_subgraph(ctx, body, ctx->n_in, bin, ctx->n_out, res);
    for (int32_t o = 0; o < ctx->n_out && !st; o++) {
      if (res[o].kind != KN_KIND_TENSOR)
        st = kn_op_fail(ctx, KN_ERR_DTYPE, "body output %d is not a tensor", o);
      else
        st = kn_seq_insert(&ctx->out[o]->seq, -1, &res[o].t, ctx->err);
    }
    for (int32_t o = 0; o < ctx->n_out; o++) kn_slot_release(&res[o]);
  }
  free(items);
  free(bin);
  free(res);
  return st;
}

const kn_op_def kn_ops_control[] = {
    {"If", NULL, 1, 1, 1, -1, 1, 21, if_infer, if_run, NULL},
    {"Loop", NULL, 2, -1, 1, -1, 1, 21, loop_infer, loop_run, NULL},
    {"Scan", NULL, 1, -1, 1, -1, 8, 21, scan_infer, scan_run, NULL},
    {"SequenceMap", NULL, 1, -1, 1, -1, 17, 21, seqmap_infer, seqmap_run, NULL},
    KN_OP_END,
};
