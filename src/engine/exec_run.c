/* Execute (exec.h): every run, the prepared steps in order.  A fixed step
 * takes its prepared output headers and calls its kernel; a dynamic step
 * infers with its values and places its outputs first (kn_exec_decide).
 * Around each: cancellation, profiling, observers, memory accounting and
 * the liveness prepare's tables give. */
#include "exec_impl.h"

/* Bytes a slot owns. */
static uint64_t slot_bytes(const kn_slot *s) {
  uint64_t n = 0;
  if (s->kind == KN_KIND_TENSOR && s->t.owned) n += s->t.nbytes;
  if (s->kind == KN_KIND_SEQUENCE)
    for (int32_t i = 0; i < s->seq.count; i++)
      if (s->seq.items[i].owned) n += s->seq.items[i].nbytes;
  return n;
}

/* Release an env slot, returning its bytes to the budget. */
static void env_release(kn_mem_budget *mem, kn_slot *s) {
  uint64_t b = slot_bytes(s);
  mem->live = mem->live > b ? mem->live - b : 0;
  kn_slot_release(s);
}

/* KN_ERR_CANCELLED when the run's cancel hook says so or its deadline has
 * passed; `where` names what was about to run. */
static kn_status check_cancel(const kn_mem_budget *mem, const char *label, const char *where,
                              kn_error *err) {
  if (mem->cancel && mem->cancel(mem->cancel_arg))
    return kn_fail(err, KN_ERR_CANCELLED, "%s: run cancelled before %s (by the cancel hook)",
                   label, where);
  if (mem->deadline_ns > 0) {
    int64_t now = kn_now_ns();
    if (now >= mem->deadline_ns)
      return kn_fail(err, KN_ERR_CANCELLED,
                     "%s: run cancelled before %s: deadline passed %.3f ms ago", label, where,
                     (double)(now - mem->deadline_ns) / 1e6);
  }
  return KN_OK;
}

static inline bool cancel_armed(const kn_mem_budget *mem) {
  return mem->cancel || mem->deadline_ns > 0;
}

kn_status kn_exec_run_subgraph(kn_op_ctx *ctx, const kn_graph *g, int32_t n_in,
                               const kn_slot *const *in, int32_t n_out, kn_slot *out) {
  kn_exec_frame *f = ctx->exec;
  if (cancel_armed(f->mem)) {
    char where[160];
    snprintf(where, sizeof where, "a run of subgraph '%s' of node '%s'", g->name ? g->name : "",
             ctx->node && ctx->node->name ? ctx->node->name : "");
    kn_status cst = check_cancel(f->mem, f->m->label, where, ctx->err);
    if (cst) return cst;
  }
  if (n_in != g->n_inputs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "subgraph '%s' takes %d inputs, given %d",
                      g->name ? g->name : "", g->n_inputs, n_in);
  if (n_out != g->n_outputs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "subgraph '%s' has %d outputs, expected %d",
                      g->name ? g->name : "", g->n_outputs, n_out);
  for (int32_t i = 0; i < n_out; i++) kn_slot_release(&out[i]);
  /* a Loop or Scan body runs once per iteration: its runner (tables made
     once, steps prepared per signature) lives as long as the enclosing
     graph's */
  kn_runner *r;
  kn_status st = kn_exec_sub_runner(f->runner, g, &r, ctx->err);
  if (st) return st;
  return kn_runner_run(r, f->env, in, out, f->mem, ctx->err);
}

static bool slot_is_borrowed(const kn_slot *s) {
  if (s->kind == KN_KIND_TENSOR) return !s->t.owned && s->t.data;
  if (s->kind == KN_KIND_SEQUENCE)
    for (int32_t i = 0; i < s->seq.count; i++)
      if (!s->seq.items[i].owned && s->seq.items[i].data) return true;
  return false;
}

static kn_status check_output(kn_op_ctx *ctx, int32_t o, kn_slot *s) {
  if (s->kind == KN_KIND_TENSOR) {
    kn_tensor *t = &s->t;
    if (!kn_dtype_is_valid(t->dtype) || t->rank < 0 || !kn_shape_known(t))
      return kn_op_fail(ctx, KN_ERR_INTERNAL, "output %d was not produced", o);
    if (!t->data && kn_tensor_numel(t) != 0)
      return kn_op_fail(ctx, KN_ERR_INTERNAL, "output %d has no data", o);
  }
  return KN_OK;
}

/* Give output slot s (a graph output) the buffer the previous run left in
 * prev when it has the same size: no allocation per run. */
static bool recycle_output(kn_slot *s, kn_slot *prev, const kn_tensor *shape, size_t need) {
  if (prev->kind != KN_KIND_TENSOR || !prev->t.owned || !prev->t.data ||
      prev->t.dtype != shape->dtype || prev->t.nbytes != need || shape->dtype == KN_DTYPE_STRING)
    return false;
  void *data = prev->t.data;
  memset(prev, 0, sizeof *prev);
  s->kind = KN_KIND_TENSOR;
  s->t = *shape;
  s->t.data = data;
  s->t.nbytes = need;
  s->t.owned = 1;
  return true;
}

/* Profiling: a step starts (its workers' spans reset) ... */
static int64_t prof_begin(kn_prof *p) {
  for (int32_t t = 0; t < p->threads; t++) p->pool_spans[t] = (kn_pool_span){INT64_MAX, 0};
  return kn_now_ns();
}

/* ... and ends: its span on the caller, then each worker's that took part */
static void prof_end(kn_prof *p, int32_t step, int64_t t0, uint64_t heap) {
  int64_t t1 = kn_now_ns();
  if (p->n < p->cap)
    p->spans[p->n++] = (kn_step_span){.step = step, .thread = 0, .start_ns = t0,
                                      .end_ns = t1, .heap_bytes = heap};
  for (int32_t t = 1; t < p->threads && p->n < p->cap; t++)
    if (p->pool_spans[t].end_ns > 0)
      p->spans[p->n++] = (kn_step_span){.step = step, .thread = t,
                                        .start_ns = p->pool_spans[t].start_ns,
                                        .end_ns = p->pool_spans[t].end_ns};
}

/* Checking builds: contents a kernel may not rely on become NaN bytes. */
static inline void poison(const kn_op_ctx *c, void *data, size_t bytes) {
  if (KN_EXEC_CHECK && c->rt && data && bytes) memset(data, 0xff, bytes);
}

/* An output allocated in this run, against the memory limit. */
static kn_status alloc_output(kn_runner *r, int32_t i, int32_t o, const kn_tensor *shape,
                              kn_slot *s) {
  kn_mem_budget *mem = r->fr.mem;
  kn_op_ctx *c = &r->ctx[i];
  uint64_t need = kn_exec_need(shape);
  if (need > mem->limit || mem->live > mem->limit - need) {
    char sb[128];
    return kn_op_fail(c, KN_ERR_LIMIT,
                      "output %d (%s %s, %.1f MiB) would bring live tensors to "
                      "%.1f MiB, above the run's memory limit of %.1f MiB",
                      o, kn_dtype_name(shape->dtype),
                      kn_shape_str(shape->rank, shape->dims, sb, sizeof sb),
                      (double)need / 1048576.0, ((double)mem->live + (double)need) / 1048576.0,
                      (double)mem->limit / 1048576.0);
  }
  s->kind = KN_KIND_TENSOR;
  kn_status st = kn_tensor_alloc(&s->t, shape->dtype, shape->rank, shape->dims, r->fr.err);
  if (st)
    kn_error_prefix(r->fr.err, "%s: node '%s' (%s): output %d", r->m->label, c->node->name,
                    c->node->op_type, o);
  else poison(c, s->t.data, s->t.nbytes);
  return st;
}

/* Give output o of step i its buffer as placed (`shape`: its dtype and
 * shape; for ARENA and INPLACE also its data). */
static kn_status place_output(kn_runner *r, int32_t i, int32_t o, const kn_tensor *shape,
                              uint8_t bind, bool zero, kn_slot *s) {
  const kn_op_ctx *c = &r->ctx[i];
  uint64_t need = kn_exec_need(shape);
  if (bind == KN_BIND_ARENA || bind == KN_BIND_INPLACE) {
    s->kind = KN_KIND_TENSOR;
    s->t = *shape;
    s->t.nbytes = need;
    s->t.owned = 0;
    if (zero) memset(s->t.data, 0, need);
    else if (bind == KN_BIND_ARENA) poison(c, s->t.data, need);
    return KN_OK;
  }
  int32_t v = c->node->outputs[o];
  kn_slot *outs = r->fr.outs;
  if (bind == KN_BIND_OUTPUT && outs &&
      recycle_output(s, &outs[r->out_index[v]], shape, (size_t)need)) {
    if (zero) memset(s->t.data, 0, need);
    else poison(c, s->t.data, need);
    return KN_OK;
  }
  return alloc_output(r, i, o, shape, s);
}

/* A required input with no value (an empty optional where none is
 * allowed): the message a dynamic step gives before inferring. */
static kn_status check_inputs(kn_runner *r, int32_t i) {
  kn_op_ctx *c = &r->ctx[i];
  const kn_node *n = c->node;
  for (int32_t k = 0; k < n->op->min_inputs && k < n->n_inputs; k++)
    if (c->in[k] && c->in[k]->kind == KN_KIND_NONE && n->op->max_inputs >= 0 &&
        !r->g->values[n->inputs[k]].type.optional)
      return kn_op_fail(c, KN_ERR_MISSING, "input %d '%s' has no value", k,
                        r->g->values[n->inputs[k]].name);
  return KN_OK;
}

/* A dynamic step: infer with the values, place each sized output as
 * prepare would, run, check. */
static kn_status run_dynamic(kn_runner *r, int32_t i) {
  kn_op_ctx *c = &r->ctx[i];
  const kn_node *n = c->node;
  for (int32_t o = 0; o < n->n_outputs; o++) {
    kn_slot_release(c->out[o]);
    c->out[o]->t.rank = -1;
  }
  kn_status st = check_inputs(r, i);
  if (!st) st = n->op->infer(c);
  int32_t ii = n->op->inplace_input;
  const kn_slot *in = n->n_inputs > ii ? c->in[ii] : NULL;
  bool in_t = in && in->kind == KN_KIND_TENSOR, skip_run = false;
  for (int32_t o = 0; o < n->n_outputs && !st; o++) {
    kn_slot *s = c->out[o];
    if (!(s->kind == KN_KIND_TENSOR && kn_shape_known(&s->t) && !s->t.data)) continue;
    kn_exec_place p;
    kn_exec_decide(r, &r->fr, i, o, &s->t, in_t ? in->t.dtype : KN_DTYPE_UNDEFINED,
                   in_t ? in->t.data : NULL, &p);
    kn_tensor shape = s->t;
    shape.data = p.data;
    skip_run |= p.skip_run;
    st = place_output(r, i, o, &shape, p.bind, p.zero, s);
  }
  if (!st && !skip_run) st = kn_tactics_run(c);
  for (int32_t o = 0; o < n->n_outputs && !st; o++) st = check_output(c, o, c->out[o]);
  return st;
}

#if KN_EXEC_CHECK
/* Checking builds: the fixed step's infer on the real values gives what
 * prepare recorded (a failure is the run's error, as it was before). */
static kn_status check_prepared(kn_runner *r, int32_t i) {
  kn_op_ctx *c = &r->ctx[i];
  const kn_tensor *rec = &r->rec[r->out_off[i]];
  for (int32_t o = 0; o < c->n_out; o++) {
    kn_slot_release(c->out[o]);
    c->out[o]->t.rank = -1;
  }
  kn_status st = c->node->op->infer(c);
  for (int32_t o = 0; o < c->n_out && !st; o++) {
    const kn_tensor *t = &c->out[o]->t;
    bool same = c->out[o]->kind == KN_KIND_TENSOR && t->dtype == rec[o].dtype &&
                t->rank == rec[o].rank;
    for (int32_t d = 0; same && d < t->rank; d++) same = t->dims[d] == rec[o].dims[d];
    if (!same)
      st = kn_op_fail(c, KN_ERR_INTERNAL, "output %d: prepared shape differs from infer", o);
  }
  for (int32_t o = 0; o < c->n_out; o++) kn_slot_release(c->out[o]);
  return st;
}
#endif

/* A fixed step: its outputs as prepared, then its kernel. */
static kn_status run_fixed(kn_runner *r, int32_t i) {
  const kn_step *s = &r->step[i];
  kn_op_ctx *c = &r->ctx[i];
  int32_t off = r->out_off[i];
  const kn_tensor *rec = &r->rec[off];
  kn_status st = KN_OK;
  if (s->inplace) {
    /* prepared over its input's bytes: the producer left them there
       unless its op made a buffer of its own (Constant) */
    const kn_slot *in = c->in[c->node->op->inplace_input];
    if (in->kind != KN_KIND_TENSOR || in->t.data != rec[0].data) return run_dynamic(r, i);
  }
#if KN_EXEC_CHECK
  if ((st = check_prepared(r, i))) return st;
#endif
  if (s->views && !KN_EXEC_CHECK) {
    for (int32_t o = 0; o < c->n_out; o++) {
      c->out[o]->kind = KN_KIND_TENSOR;
      c->out[o]->t = rec[o];
      if (s->zero >> o & 1u) memset(rec[o].data, 0, rec[o].nbytes);
    }
  } else {
    for (int32_t o = 0; o < c->n_out && !st; o++)
      st = place_output(r, i, o, &rec[o], r->place[off + o], s->zero >> o & 1u, c->out[o]);
  }
  if (!st && !s->skip_run) st = kn_tactics_run(c);
#if KN_EXEC_CHECK
  for (int32_t o = 0; o < c->n_out && !st; o++) st = check_output(c, o, c->out[o]);
#endif
  return st;
}

/* One step with its per-run services. */
static kn_status run_step(kn_runner *r, int32_t i) {
  kn_mem_budget *mem = r->fr.mem;
  kn_op_ctx *c = &r->ctx[i];
  const kn_node *n = c->node;
  kn_status st;
  if (cancel_armed(mem)) {
    char where[160];
    snprintf(where, sizeof where, "%s %d ('%s')", r->g->parent ? "node" : "step", i,
             n->name ? n->name : "");
    if ((st = check_cancel(mem, r->m->label, where, r->fr.err))) return st;
  }
  kn_prof *prof = r->g->parent ? NULL : mem->prof;
  int64_t t0 = prof ? prof_begin(prof) : 0;
  st = r->step[i].fixed ? run_fixed(r, i) : run_dynamic(r, i);
  for (int32_t o = 0; o < n->n_outputs; o++) {
    if (n->outputs[o] < 0) kn_slot_release(c->out[o]);
    else mem->live += slot_bytes(c->out[o]);
  }
  if (prof) prof_end(prof, i, t0, mem->live);
  if (!st && mem->observe && !r->g->parent)
    for (int32_t o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] >= 0 && c->out[o]->kind == KN_KIND_TENSOR)
        mem->observe(r->g->values[n->outputs[o]].name, &c->out[o]->t, mem->observe_arg);
  for (int32_t k = r->rel_off[i]; k < r->rel_off[i + 1]; k++) env_release(mem, &r->env[r->rel[k]]);
  return st;
}

/* The graph outputs to the caller: moved when owned, copied when borrowed
 * (an input, a constant, an arena view). */
static kn_status hand_over(kn_runner *r, kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  const kn_graph *g = r->g;
  kn_status st = KN_OK;
  for (int32_t i = 0; i < g->n_outputs && !st; i++) {
    kn_slot *s = &r->env[g->outputs[i]];
    kn_slot_release(&outs[i]);
    if (slot_is_borrowed(s) || (s->kind == KN_KIND_TENSOR && !s->t.owned)) {
      st = kn_slot_copy(&outs[i], s, err);
    } else {
      uint64_t b = slot_bytes(s); /* leaves this graph's accounting */
      mem->live = mem->live > b ? mem->live - b : 0;
      outs[i] = *s;
      memset(s, 0, sizeof *s);
    }
  }
  return st;
}

kn_status kn_exec_execute(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                          kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  KN_ASSERT(r->prepared);
  r->fr.mem = mem;
  r->fr.err = err;
  r->fr.outs = outs;
  if (err != r->err_for) {
    for (int32_t i = 0; i < r->nn; i++) r->ctx[i].err = err;
    r->err_for = err;
  }
  kn_exec_set_inputs(r, parent_env, inputs);
  kn_status st = KN_OK;
  for (int32_t i = 0; i < r->nn && !st; i++) st = run_step(r, i);
  if (!st) st = hand_over(r, outs, mem, err);
  for (int32_t v = 0; v < r->nv; v++) env_release(mem, &r->env[v]);
  return st;
}
