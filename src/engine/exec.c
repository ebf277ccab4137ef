#include "exec.h"

typedef struct frame {
  const kn_ir_model *m;
  const kn_graph *g;
  kn_slot *env; /* one slot per value of g */
  kn_mem_budget *mem;
  kn_error *err;
} frame;

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

static kn_status run_subgraph(kn_op_ctx *ctx, const kn_graph *g, int32_t n_in,
                              const kn_slot *const *in, int32_t n_out, kn_slot *out) {
  frame *f = ctx->exec;
  if (n_in != g->n_inputs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "subgraph '%s' takes %d inputs, given %d",
                      g->name ? g->name : "", g->n_inputs, n_in);
  if (n_out != g->n_outputs)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "subgraph '%s' has %d outputs, expected %d",
                      g->name ? g->name : "", g->n_outputs, n_out);
  for (int32_t i = 0; i < n_out; i++) kn_slot_release(&out[i]);
  return kn_exec_graph(f->m, g, f->env, in, out, f->mem, ctx->err);
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

kn_status kn_exec_graph(const kn_ir_model *m, const kn_graph *g,
                        const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  kn_status st = KN_OK;
  int32_t nv = g->n_values;
  kn_slot *env = kn_calloc((size_t)nv + 1, sizeof *env);
  int32_t *last = kn_malloc(((size_t)nv + 1) * sizeof *last);
  kn_slot *scratch = NULL, **pin = NULL, **pout = NULL;
  int32_t max_in = 1, max_out = 1;
  /* the memory plan (top-level graph only): plan tensor of each value */
  const kn_mem_plan *plan = g->parent == NULL && mem->arena ? mem->plan : NULL;
  int32_t *planned = plan ? kn_malloc(((size_t)nv + 1) * sizeof *planned) : NULL;
  if (!env || !last || (plan && !planned)) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory starting a run");
    goto done;
  }
  if (plan) {
    for (int32_t v = 0; v < nv; v++) planned[v] = -1;
    for (int32_t t = 0; t < plan->n_tensors; t++) {
      const kn_plan_tensor *pt = &plan->tensors[t];
      if (pt->offset < 0) continue;
      if (pt->value < 0 || pt->value >= nv || g->values[pt->value].is_output) {
        st = kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s: the memory plan was not made for this graph (tensor %d "
                     "names value %d of %d)",
                     m->label, t, pt->value, nv);
        goto done;
      }
      planned[pt->value] = t;
    }
  }
  for (int32_t v = 0; v < nv; v++) {
    last[v] = -1;
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
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node_foreach_read(g, &g->nodes[i], mark_last_use, i, last);
    if (g->nodes[i].n_inputs > max_in) max_in = g->nodes[i].n_inputs;
    if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = g->n_nodes;
  scratch = kn_calloc((size_t)max_out, sizeof *scratch);
  pin = kn_calloc((size_t)max_in, sizeof *pin);
  pout = kn_calloc((size_t)max_out, sizeof *pout);
  if (!scratch || !pin || !pout) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory starting a run");
    goto done;
  }
  frame fr = {.m = m, .g = g, .env = env, .mem = mem, .err = err};
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    const kn_node *n = &g->nodes[i];
    for (int32_t k = 0; k < n->n_inputs; k++) pin[k] = n->inputs[k] >= 0 ? &env[n->inputs[k]] : NULL;
    for (int32_t o = 0; o < n->n_outputs; o++) {
      pout[o] = n->outputs[o] >= 0 ? &env[n->outputs[o]] : &scratch[o];
      kn_slot_release(pout[o]);
      pout[o]->t.rank = -1;
    }
    kn_op_ctx ctx = {.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = pin,
                     .n_out = n->n_outputs, .out = pout, .static_infer = false,
                     .err = err, .label = m->label, .run_subgraph = run_subgraph,
                     .exec = &fr};
    for (int32_t k = 0; k < n->op->min_inputs && k < n->n_inputs; k++)
      if (pin[k] && pin[k]->kind == KN_KIND_NONE && n->op->max_inputs >= 0 &&
          !g->values[n->inputs[k]].type.optional) {
        st = kn_op_fail(&ctx, KN_ERR_MISSING, "input %d '%s' has no value", k,
                        g->values[n->inputs[k]].name);
        break;
      }
    if (st) break;
    st = n->op->infer(&ctx);
    bool skip_run = false;
    for (int32_t o = 0; o < n->n_outputs && !st; o++) {
      kn_slot *s = pout[o];
      if (s->kind == KN_KIND_TENSOR && kn_shape_known(&s->t) && !s->t.data) {
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
          char *at = (char *)mem->arena + p->offset;
          bool over = p->inplace_of >= 0 && o == 0 && n->n_inputs > 0 &&
                      n->inputs[0] == p->inplace_of && pin[0] &&
                      pin[0]->kind == KN_KIND_TENSOR && pin[0]->t.data == at;
          if (!over) memset(at, 0, need);
          s->t = shape;
          s->t.data = at;
          s->t.nbytes = need;
          s->t.owned = 0;
          /* an aliasing op's run would copy the bytes onto themselves */
          if (over && n->op->inplace == KN_INPLACE_ALIAS && pin[0]->t.dtype == shape.dtype)
            skip_run = true;
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
    }
    if (!st && !skip_run) st = n->op->run(&ctx);
    for (int32_t o = 0; o < n->n_outputs && !st; o++) st = check_output(&ctx, o, pout[o]);
    if (!st && mem->observe && !g->parent)
      for (int32_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0 && pout[o]->kind == KN_KIND_TENSOR)
          mem->observe(g->values[n->outputs[o]].name, &pout[o]->t, mem->observe_arg);
    for (int32_t o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o] < 0) kn_slot_release(&scratch[o]);
      else mem->live += slot_bytes(pout[o]);
    }
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
done:
  if (env)
    for (int32_t v = 0; v < nv; v++) env_release(mem, &env[v]);
  free(env);
  free(last);
  free(planned);
  free(scratch);
  free(pin);
  free(pout);
  return st;
}
