#include "exec.h"

#include "kernels/kernels.h"
#include "tactics/tactics.h"

typedef struct frame {
  const kn_ir_model *m;
  const kn_graph *g;
  kn_slot *env; /* one slot per value of g */
  kn_mem_budget *mem;
  kn_error *err;
  struct kn_runner *runner; /* running g: keeps its subgraphs' runners */
} frame;

static kn_status sub_runner(struct kn_runner *r, const kn_graph *g, struct kn_runner **out,
                            kn_error *err);

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

static kn_status run_subgraph(kn_op_ctx *ctx, const kn_graph *g, int32_t n_in,
                              const kn_slot *const *in, int32_t n_out, kn_slot *out) {
  frame *f = ctx->exec;
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
  /* a Loop or Scan body runs once per iteration: its runner (bookkeeping
     allocated once) lives as long as the enclosing graph's */
  struct kn_runner *r;
  kn_status st = sub_runner(f->runner, g, &r, ctx->err);
  if (st) return st;
  return kn_runner_run(r, f->env, in, out, f->mem, ctx->err);
}

static void mark_last_use(int32_t v, int32_t node, void *arg) {
  int32_t *last = arg;
  last[v] = node;
}

/* Borrow a value: a view of src with the tensor not owned. */
static void borrow(kn_slot *dst, const kn_slot *src) {
  memset(dst, 0, sizeof *dst);
  dst->kind = src->kind;
  if (src->kind == KN_KIND_TENSOR) dst->t = kn_tensor_view(&src->t);
  if (src->kind == KN_KIND_SEQUENCE) {
    /* sequences are small: share items read-only by copying the header
       and marking every item as borrowed in a private array */
    dst->seq.elem_dtype = src->seq.elem_dtype;
    dst->seq.count = src->seq.count;
    dst->seq.cap = src->seq.count;
    dst->seq.items = src->seq.count ? kn_malloc((size_t)src->seq.count * sizeof(kn_tensor)) : NULL;
    if (!dst->seq.items) {
      dst->seq.count = dst->seq.cap = 0;
      return;
    }
    for (int32_t i = 0; i < src->seq.count; i++) dst->seq.items[i] = kn_tensor_view(&src->seq.items[i]);
  }
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


struct kn_runner {
  const kn_ir_model *m;
  const kn_graph *g;
  int32_t nv;
  kn_slot *env;        /* one slot per value of g */
  int32_t *last;       /* per value: the last node reading it (n_nodes: a graph output) */
  int32_t *out_index;  /* per value: its index in g->outputs, or -1 */
  kn_slot *scratch;    /* outputs nobody reads */
  kn_slot **pin, **pout;
  /* the memory plan `planned` was made for: plan tensor per value or -1 */
  const kn_mem_plan *plan_for;
  int32_t *planned;
  /* The prepared hot path.  Per node: whether its shapes may be reused
   * (static rule), whether they are recorded for the current input
   * shapes, and what the recorded run did. */
  bool *reusable;
  bool *recorded;
  uint8_t *rflags;     /* REC_* */
  int32_t *out_off;    /* per node: its first entry in rec */
  kn_tensor *rec;      /* per node output: tensor header (data in the arena) */
  bool have_sig;
  kn_slot *sig;        /* per graph input: kind, dtype and shape of the last run */
  bool *sig_given;
  /* A subgraph's own memory plan and arena (a Loop or Scan body runs once
   * per iteration: planned, its steps are recorded like the top level's),
   * and the shapes of the outer values it read on the last run. */
  kn_mem_plan own_plan;
  char *own_arena;
  kn_slot *osig;
  /* runners of the subgraphs this graph's nodes run */
  int32_t n_sub, cap_sub;
  struct sub_entry {
    const kn_graph *g;
    struct kn_runner *r;
  } *sub;
};

static kn_status sub_runner(kn_runner *r, const kn_graph *g, kn_runner **out, kn_error *err) {
  for (int32_t i = 0; i < r->n_sub; i++)
    if (r->sub[i].g == g) {
      *out = r->sub[i].r;
      return KN_OK;
    }
  if (!KN_GROW(r->sub, r->cap_sub, (int64_t)r->n_sub + 1))
    return kn_fail(err, KN_ERR_OOM, "out of memory preparing a subgraph");
  kn_status st = kn_runner_create(r->m, g, out, err);
  if (st) return st;
  r->sub[r->n_sub++] = (struct sub_entry){.g = g, .r = *out};
  return KN_OK;
}

#define REC_SKIP_RUN 1u /* an in-place alias: run would copy bytes onto themselves */
#define REC_ZERO 2u     /* outputs are zeroed before run (reference kernels) */

/* Can node n's output shapes be reused between runs with equal input
 * shapes?  Not when values decide them: subgraphs, data-shaped ops, and
 * integer or bool inputs computed at run time (shape tensors, indices: a
 * Reshape fed by Shape arithmetic). */
static bool node_reusable(const kn_graph *g, const kn_node *n) {
  if (n->op->data_shape == KN_DATA_SHAPE_ALL) return false;
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS) return false;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || g->values[v].constant) continue;
    if (n->op->data_shape == KN_DATA_SHAPE_ARGS && k > 0) return false;
    const kn_type *t = &g->values[v].type;
    if (t->kind != KN_KIND_TENSOR || !kn_dtype_is_float(t->dtype)) return false;
  }
  return true;
}

void kn_runner_free(kn_runner *r) {
  if (!r) return;
  for (int32_t i = 0; i < r->n_sub; i++) kn_runner_free(r->sub[i].r);
  free(r->sub);
  if (r->env)
    for (int32_t v = 0; v < r->nv; v++) kn_slot_release(&r->env[v]);
  free(r->env);
  free(r->last);
  free(r->out_index);
  free(r->scratch);
  free(r->pin);
  free(r->pout);
  free(r->planned);
  free(r->reusable);
  free(r->recorded);
  free(r->rflags);
  free(r->out_off);
  free(r->rec);
  free(r->sig);
  free(r->sig_given);
  free(r->osig);
  free(r->own_arena);
  kn_mem_plan_free(&r->own_plan);
  free(r);
}

kn_status kn_runner_create(const kn_ir_model *m, const kn_graph *g, kn_runner **out,
                           kn_error *err) {
  *out = NULL;
  kn_runner *r = kn_calloc(1, sizeof *r);
  if (!r) return kn_fail(err, KN_ERR_OOM, "out of memory preparing a run");
  r->m = m;
  r->g = g;
  r->nv = g->n_values;
  int32_t nv = g->n_values, nn = g->n_nodes, max_in = 1, max_out = 1, n_outs = 0;
  for (int32_t i = 0; i < nn; i++) {
    if (g->nodes[i].n_inputs > max_in) max_in = g->nodes[i].n_inputs;
    if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
    n_outs += g->nodes[i].n_outputs;
  }
  r->env = kn_calloc((size_t)nv + 1, sizeof *r->env);
  r->last = kn_malloc(((size_t)nv + 1) * sizeof *r->last);
  r->out_index = kn_malloc(((size_t)nv + 1) * sizeof *r->out_index);
  r->planned = kn_malloc(((size_t)nv + 1) * sizeof *r->planned);
  r->scratch = kn_calloc((size_t)max_out, sizeof *r->scratch);
  r->pin = kn_calloc((size_t)max_in, sizeof *r->pin);
  r->pout = kn_calloc((size_t)max_out, sizeof *r->pout);
  r->reusable = kn_calloc((size_t)nn + 1, sizeof *r->reusable);
  r->recorded = kn_calloc((size_t)nn + 1, sizeof *r->recorded);
  r->rflags = kn_calloc((size_t)nn + 1, sizeof *r->rflags);
  r->out_off = kn_calloc((size_t)nn + 1, sizeof *r->out_off);
  r->rec = kn_calloc((size_t)n_outs + 1, sizeof *r->rec);
  r->sig = kn_calloc((size_t)g->n_inputs + 1, sizeof *r->sig);
  r->sig_given = kn_calloc((size_t)g->n_inputs + 1, sizeof *r->sig_given);
  if (!r->env || !r->last || !r->out_index || !r->planned || !r->scratch || !r->pin ||
      !r->pout || !r->reusable || !r->recorded || !r->rflags || !r->out_off || !r->rec ||
      !r->sig || !r->sig_given) {
    kn_runner_free(r);
    return kn_fail(err, KN_ERR_OOM, "out of memory preparing a run");
  }
  for (int32_t v = 0; v < nv; v++) {
    r->last[v] = -1;
    r->out_index[v] = -1;
  }
  for (int32_t i = 0; i < nn; i++)
    kn_node_foreach_read(g, &g->nodes[i], mark_last_use, i, r->last);
  for (int32_t i = g->n_outputs - 1; i >= 0; i--) {
    r->last[g->outputs[i]] = nn;
    r->out_index[g->outputs[i]] = i;
  }
  for (int32_t i = 0, off = 0; i < nn; i++) {
    r->out_off[i] = off;
    off += g->nodes[i].n_outputs;
    r->reusable[i] = node_reusable(g, &g->nodes[i]);
  }
  if (g->parent) {
    /* A body whose intermediates have static shapes gets an arena of its
     * own; otherwise it runs as before (inferred and allocated per run). */
    kn_error perr;
    r->osig = kn_calloc((size_t)nv + 1, sizeof *r->osig);
    if (!r->osig) {
      kn_runner_free(r);
      return kn_fail(err, KN_ERR_OOM, "out of memory preparing a run");
    }
    if (kn_plan_memory(g, 0, &r->own_plan, &perr) == KN_OK && r->own_plan.arena_bytes > 0) {
      size_t bytes = (size_t)(r->own_plan.arena_bytes + 63) & ~(size_t)63;
      r->own_arena = aligned_alloc(64, bytes);
    }
    if (!r->own_arena) kn_mem_plan_free(&r->own_plan);
  }
  *out = r;
  return KN_OK;
}

/* Map values to the plan's tensors (once per plan). */
static kn_status bind_plan(kn_runner *r, const kn_mem_plan *plan, kn_error *err) {
  const kn_graph *g = r->g;
  int32_t nv = r->nv;
  for (int32_t v = 0; v < nv; v++) r->planned[v] = -1;
  r->plan_for = plan;
  memset(r->recorded, 0, (size_t)g->n_nodes * sizeof *r->recorded);
  if (!plan) return KN_OK;
  for (int32_t t = 0; t < plan->n_tensors; t++) {
    const kn_plan_tensor *pt = &plan->tensors[t];
    if (pt->offset < 0) continue;
    if (pt->value < 0 || pt->value >= nv || g->values[pt->value].is_output) {
      r->plan_for = NULL;
      return kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s: the memory plan was not made for this graph (tensor %d "
                     "names value %d of %d)",
                     r->m->label, t, pt->value, nv);
    }
    r->planned[pt->value] = t;
  }
  return KN_OK;
}

static bool same_shape(const kn_slot *a, const kn_slot *b) {
  if (a->kind != b->kind) return false;
  if (a->kind != KN_KIND_TENSOR) return a->kind == KN_KIND_NONE;
  if (a->t.dtype != b->t.dtype || a->t.rank != b->t.rank) return false;
  for (int32_t d = 0; d < a->t.rank; d++)
    if (a->t.dims[d] != b->t.dims[d]) return false;
  return true;
}

static void keep_shape(kn_slot *dst, const kn_slot *s) {
  memset(dst, 0, sizeof *dst);
  dst->kind = s->kind; /* a sequence never compares equal */
  if (s->kind == KN_KIND_TENSOR) {
    dst->t.dtype = s->t.dtype;
    dst->t.rank = s->t.rank;
    memcpy(dst->t.dims, s->t.dims, sizeof s->t.dims);
  }
}

/* Compare this run's input shapes (and a subgraph's outer values') with
 * the last run's; forget every recorded step when they differ. */
static void check_signature(kn_runner *r, const kn_slot *const *inputs,
                            const kn_slot *parent_env) {
  const kn_graph *g = r->g;
  bool same = r->have_sig;
  for (int32_t i = 0; i < g->n_inputs && same; i++) {
    const kn_slot *s = inputs ? inputs[i] : NULL;
    same = s ? r->sig_given[i] && same_shape(s, &r->sig[i]) : !r->sig_given[i];
  }
  for (int32_t v = 0; r->osig && parent_env && v < r->nv; v++) {
    int32_t o = g->values[v].outer;
    if (o < 0) continue;
    if (same) same = same_shape(&parent_env[o], &r->osig[v]);
    if (!same) keep_shape(&r->osig[v], &parent_env[o]);
  }
  if (same) return;
  memset(r->recorded, 0, (size_t)g->n_nodes * sizeof *r->recorded);
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_slot *s = inputs ? inputs[i] : NULL;
    memset(&r->sig[i], 0, sizeof r->sig[i]);
    r->sig_given[i] = s != NULL;
    if (s) keep_shape(&r->sig[i], s);
  }
  r->have_sig = true;
}

/* Give output slot s (a graph output, index j) the buffer the previous run
 * left in outs[j] when it has the same size: no allocation per run. */
static bool recycle_output(kn_slot *s, kn_slot *prev, const kn_tensor *shape, size_t need) {
  if (prev->kind != KN_KIND_TENSOR || !prev->t.owned || !prev->t.data ||
      prev->t.dtype != shape->dtype || prev->t.nbytes != need || shape->dtype == KN_DTYPE_STRING)
    return false;
  void *data = prev->t.data;
  memset(prev, 0, sizeof *prev);
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

kn_status kn_runner_run(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  const kn_ir_model *m = r->m;
  const kn_graph *g = r->g;
  kn_status st = KN_OK;
  int32_t nv = r->nv;
  kn_slot *env = r->env;
  /* the memory plan (top-level graph only) */
  const kn_mem_plan *plan = g->parent == NULL && mem->arena ? mem->plan : NULL;
  char *arena = mem->arena;
  if (r->own_arena) { /* a subgraph's own */
    plan = &r->own_plan;
    arena = r->own_arena;
  }
  if (plan != r->plan_for || (!plan && !r->have_sig)) {
    st = bind_plan(r, plan, err);
    if (st) return st;
  }
  check_signature(r, inputs, parent_env);
  for (int32_t v = 0; v < nv; v++) {
    kn_slot_release(&env[v]);
    const kn_value *val = &g->values[v];
    if (val->constant) {
      env[v].kind = KN_KIND_TENSOR;
      env[v].t = kn_tensor_view(val->constant);
    } else if (val->outer >= 0) {
      KN_ASSERT(parent_env);
      borrow(&env[v], &parent_env[val->outer]);
    }
  }
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (inputs && inputs[i]) borrow(&env[g->inputs[i]], inputs[i]);
  kn_slot *scratch = r->scratch, **pin = r->pin, **pout = r->pout;
  const int32_t *last = r->last, *planned = r->planned;
  frame fr = {.m = m, .g = g, .env = env, .mem = mem, .err = err, .runner = r};
  kn_prof *prof = g->parent ? NULL : mem->prof;
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    const kn_node *n = &g->nodes[i];
    if (cancel_armed(mem)) {
      char where[160];
      snprintf(where, sizeof where, "%s %d ('%s')", g->parent ? "node" : "step", i,
               n->name ? n->name : "");
      st = check_cancel(mem, m->label, where, err);
      if (st) break;
    }
    int64_t t0 = prof ? prof_begin(prof) : 0;
    for (int32_t k = 0; k < n->n_inputs; k++) pin[k] = n->inputs[k] >= 0 ? &env[n->inputs[k]] : NULL;
    for (int32_t o = 0; o < n->n_outputs; o++) {
      pout[o] = n->outputs[o] >= 0 ? &env[n->outputs[o]] : &scratch[o];
      kn_slot_release(pout[o]);
      pout[o]->t.rank = -1;
    }
    bool fast = mem->rt && n->tactic != 0;
    kn_op_ctx ctx = {.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = pin,
                     .n_out = n->n_outputs, .out = pout, .static_infer = false,
                     .err = err, .label = m->label, .run_subgraph = run_subgraph,
                     .exec = &fr, .rt = fast ? mem->rt : NULL,
                     .packed = mem->packed && !g->parent ? mem->packed[i] : NULL};
    if (r->recorded[i]) {
      /* the hot path: shapes and pointers as recorded, no inference */
      const kn_tensor *rec = &r->rec[r->out_off[i]];
      for (int32_t o = 0; o < n->n_outputs; o++) {
        pout[o]->kind = KN_KIND_TENSOR;
        pout[o]->t = rec[o];
        if (r->rflags[i] & REC_ZERO) memset(rec[o].data, 0, rec[o].nbytes);
      }
      if (!(r->rflags[i] & REC_SKIP_RUN)) st = kn_tactics_run(&ctx);
    } else {
      for (int32_t k = 0; k < n->op->min_inputs && k < n->n_inputs; k++)
        if (pin[k] && pin[k]->kind == KN_KIND_NONE && n->op->max_inputs >= 0 &&
            !g->values[n->inputs[k]].type.optional) {
          st = kn_op_fail(&ctx, KN_ERR_MISSING, "input %d '%s' has no value", k,
                          g->values[n->inputs[k]].name);
          break;
        }
      if (st) break;
      st = n->op->infer(&ctx);
      bool skip_run = false, in_arena = n->n_outputs > 0, zeroed = false;
      for (int32_t o = 0; o < n->n_outputs && !st; o++) {
        kn_slot *s = pout[o];
        if (!(s->kind == KN_KIND_TENSOR && kn_shape_known(&s->t) && !s->t.data)) {
          in_arena = false;
          continue;
        }
        kn_tensor shape = s->t;
        int64_t cnt = kn_tensor_numel(&shape);
        uint64_t need = cnt > 0 && kn_dtype_is_valid(shape.dtype)
                            ? (uint64_t)cnt * kn_dtype_size(shape.dtype)
                            : 0;
        int32_t pt = plan && n->outputs[o] >= 0 ? planned[n->outputs[o]] : -1;
        /* a smaller run (a --profile shape below MAX) fits the planned slot */
        if (pt >= 0 && need > 0 && need <= plan->tensors[pt].bytes &&
            shape.dtype != KN_DTYPE_STRING) {
          /* a view into the arena; over its input's bytes when planned in
             place and that input is there (it may have been allocated) */
          const kn_plan_tensor *p = &plan->tensors[pt];
          char *at = arena + p->offset;
          int32_t ii = n->op->inplace_input;
          bool over = p->inplace_of >= 0 && o == 0 && n->n_inputs > ii &&
                      n->inputs[ii] == p->inplace_of && pin[ii] &&
                      pin[ii]->kind == KN_KIND_TENSOR && pin[ii]->t.data == at;
          /* fast kernels write every output element */
          if (!over && !fast) {
            memset(at, 0, need);
            zeroed = true;
          }
          s->t = shape;
          s->t.data = at;
          s->t.nbytes = need;
          s->t.owned = 0;
          /* an aliasing op's run would copy the bytes onto themselves */
          if (over && n->op->inplace == KN_INPLACE_ALIAS && pin[ii]->t.dtype == shape.dtype)
            skip_run = true;
          continue;
        }
        in_arena = false;
        int32_t j = n->outputs[o] >= 0 ? r->out_index[n->outputs[o]] : -1;
        if (j >= 0 && outs && need > 0 && recycle_output(s, &outs[j], &shape, need)) {
          if (!fast) memset(s->t.data, 0, need);
          continue;
        }
        if (need > mem->limit || mem->live > mem->limit - need) {
          char sb[128];
          st = kn_op_fail(&ctx, KN_ERR_LIMIT,
                          "output %d (%s %s, %.1f MiB) would bring live tensors to "
                          "%.1f MiB, above the run's memory limit of %.1f MiB",
                          o, kn_dtype_name(shape.dtype),
                          kn_shape_str(shape.rank, shape.dims, sb, sizeof sb),
                          (double)need / 1048576.0,
                          ((double)mem->live + (double)need) / 1048576.0,
                          (double)mem->limit / 1048576.0);
          break;
        }
        st = kn_tensor_alloc(&s->t, shape.dtype, shape.rank, shape.dims, err);
        if (st) kn_error_prefix(err, "%s: node '%s' (%s): output %d", m->label, n->name,
                                n->op_type, o);
      }
      if (!st && !skip_run) st = kn_tactics_run(&ctx);
      for (int32_t o = 0; o < n->n_outputs && !st; o++) st = check_output(&ctx, o, pout[o]);
      /* an op may have replaced its arena view by a tensor of its own
         (Constant): such a step is not recorded */
      for (int32_t o = 0; o < n->n_outputs && in_arena && !st; o++) {
        const kn_tensor *t = &pout[o]->t;
        in_arena = pout[o]->kind == KN_KIND_TENSOR && !t->owned && plan &&
                   (const char *)t->data >= arena &&
                   (const char *)t->data < arena + plan->arena_bytes;
      }
      if (!st && in_arena && r->reusable[i]) {
        /* record the step for the next run with these input shapes */
        kn_tensor *rec = &r->rec[r->out_off[i]];
        for (int32_t o = 0; o < n->n_outputs; o++) rec[o] = pout[o]->t;
        r->rflags[i] = (uint8_t)((skip_run ? REC_SKIP_RUN : 0) | (zeroed ? REC_ZERO : 0));
        r->recorded[i] = true;
      }
    }
    for (int32_t o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o] < 0) kn_slot_release(&scratch[o]);
      else mem->live += slot_bytes(pout[o]);
    }
    if (prof) prof_end(prof, i, t0, mem->live);
    if (!st && mem->observe && !g->parent)
      for (int32_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0 && pout[o]->kind == KN_KIND_TENSOR)
          mem->observe(g->values[n->outputs[o]].name, &pout[o]->t, mem->observe_arg);
    /* free what this node was the last to read */
    for (int32_t k = 0; k < n->n_inputs; k++) {
      int32_t v = n->inputs[k];
      if (v >= 0 && last[v] == i) env_release(mem, &env[v]);
    }
    for (int32_t o = 0; o < n->n_outputs; o++) {
      int32_t v = n->outputs[o];
      if (v >= 0 && last[v] < 0) env_release(mem, &env[v]); /* never read */
    }
  }
  for (int32_t i = 0; i < g->n_outputs && !st; i++) {
    kn_slot *s = &env[g->outputs[i]];
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
  if (st) memset(r->recorded, 0, (size_t)g->n_nodes * sizeof *r->recorded);
  for (int32_t v = 0; v < nv; v++) env_release(mem, &env[v]);
  return st;
}

kn_status kn_exec_graph(const kn_ir_model *m, const kn_graph *g,
                        const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  kn_runner *r;
  kn_status st = kn_runner_create(m, g, &r, err);
  if (st) return st;
  st = kn_runner_run(r, parent_env, inputs, outs, mem, err);
  kn_runner_free(r);
  return st;
}
