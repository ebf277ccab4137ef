/* Prepare (exec.h): once per input signature, decide for every step what
 * does not depend on input values -- fixed or dynamic, output shapes,
 * placements (arena, in place, graph output, heap), zeroing, skipped
 * kernels, its context's runtime and packed weights.  kn_exec_decide is
 * also what a dynamic step calls on every run, with its real shapes. */
#include "exec_impl.h"

#include "kernels/kernels.h"

kn_status kn_exec_bind_plan(kn_runner *r, const kn_mem_plan *plan, kn_error *err) {
  const kn_graph *g = r->g;
  int32_t nv = r->nv;
  for (int32_t v = 0; v < nv; v++) r->planned[v] = -1;
  r->plan_for = plan;
  r->plan_bound = true;
  r->prepared = false;
  if (!plan) return KN_OK;
  for (int32_t t = 0; t < plan->n_tensors; t++) {
    const kn_plan_tensor *pt = &plan->tensors[t];
    if (pt->offset < 0) continue;
    if (pt->value < 0 || pt->value >= nv || g->values[pt->value].is_output) {
      r->plan_bound = false;
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

/* The weights the steps read packed: the model's for the top-level graph,
 * a subgraph's own (kn_exec_pack_subgraph) for a body. */
static const void *const *packed_for(const kn_runner *r, const kn_mem_budget *mem) {
  return r->g->parent ? (const void *const *)r->own_packed : mem->packed;
}

bool kn_exec_same_signature(const kn_runner *r, const kn_slot *const *inputs,
                            const kn_slot *parent_env, const kn_mem_budget *mem, char *arena) {
  if (!r->prepared || r->prep_arena != arena || r->prep_rt != mem->rt ||
      r->prep_packed != packed_for(r, mem))
    return false;
  const kn_graph *g = r->g;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_slot *s = inputs ? inputs[i] : NULL;
    if (s ? !r->sig_given[i] || !same_shape(s, &r->sig[i]) : r->sig_given[i]) return false;
  }
  for (int32_t k = 0; r->osig && k < r->n_setup; k++) {
    int32_t o = g->values[r->setup[k]].outer;
    if (o >= 0 && (!parent_env || !same_shape(&parent_env[o], &r->osig[r->setup[k]])))
      return false;
  }
  return true;
}

/* Remember this run's signature; give every step context the runtime,
 * packed weights and error of this preparation. */
static void keep_signature(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                           kn_mem_budget *mem, kn_error *err) {
  const kn_graph *g = r->g;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_slot *s = inputs ? inputs[i] : NULL;
    memset(&r->sig[i], 0, sizeof r->sig[i]);
    r->sig_given[i] = s != NULL;
    if (s) keep_shape(&r->sig[i], s);
  }
  for (int32_t k = 0; r->osig && parent_env && k < r->n_setup; k++) {
    int32_t v = r->setup[k];
    if (g->values[v].outer >= 0) keep_shape(&r->osig[v], &parent_env[g->values[v].outer]);
  }
  r->prep_arena = r->fr.arena;
  r->prep_rt = mem->rt;
  r->prep_packed = packed_for(r, mem);
  r->err_for = err;
  for (int32_t i = 0; i < r->nn; i++) {
    kn_op_ctx *c = &r->ctx[i];
    c->rt = mem->rt && c->node->tactic != 0 ? mem->rt : NULL;
    c->packed = r->prep_packed ? r->prep_packed[i] : NULL;
    c->err = err;
  }
}

void kn_exec_decide(const kn_runner *r, const kn_exec_frame *f, int32_t i, int32_t o,
                    const kn_tensor *shape, kn_dtype in_dtype, const void *in_data,
                    kn_exec_place *p) {
  const kn_node *n = &r->g->nodes[i];
  const kn_mem_plan *plan = f->plan;
  int32_t v = n->outputs[o];
  bool fast = r->ctx[i].rt != NULL;
  uint64_t need = kn_exec_need(shape);
  int32_t pt = plan && v >= 0 ? r->planned[v] : -1;
  *p = (kn_exec_place){.bind = KN_BIND_HEAP};
  /* a smaller run (a --profile shape below MAX) fits the planned slot */
  if (pt >= 0 && need > 0 && need <= plan->tensors[pt].bytes &&
      shape->dtype != KN_DTYPE_STRING) {
    /* a view into the arena; over its input's bytes when planned in place
       and that input is there (it may have been allocated) */
    const kn_plan_tensor *t = &plan->tensors[pt];
    char *at = f->arena + t->offset;
    int32_t ii = n->op->inplace_input;
    bool over = t->inplace_of >= 0 && o == 0 && n->n_inputs > ii &&
                n->inputs[ii] == t->inplace_of && in_data == at;
    p->bind = over ? KN_BIND_INPLACE : KN_BIND_ARENA;
    p->data = at;
    p->zero = !over && !fast; /* the output contract (ops/op.h) */
    /* an aliasing op's run would copy the bytes onto themselves */
    p->skip_run = over && n->op->inplace == KN_INPLACE_ALIAS && in_dtype == shape->dtype;
  } else if (v >= 0 && r->out_index[v] >= 0 && need > 0) {
    p->bind = KN_BIND_OUTPUT;
    p->zero = !fast; /* when recycled: a new buffer is zeroed anyway */
  }
}

/* Where value v's bytes will be in this run, when prepare knows it: the
 * arena view of a fixed step's output, or a constant's data (NULL for the
 * rest: values given to the run, outputs allocated per run). */
static const void *bound_data(const kn_runner *r, int32_t v) {
  int32_t p = r->g->values[v].producer;
  if (p < 0) return r->env[v].kind == KN_KIND_TENSOR ? r->env[v].t.data : NULL;
  if (!r->step[p].fixed) return NULL;
  const kn_node *n = &r->g->nodes[p];
  for (int32_t o = 0; o < n->n_outputs; o++)
    if (n->outputs[o] == v) return r->rec[r->out_off[p] + o].data;
  return NULL;
}

/* Whether node n declares that input k's values decide its output shapes
 * (kn_op_def.data_shape).  Other inputs may decide them too (a Reshape's
 * shape): infer, given no values for them, then fails or leaves a dim
 * unknown, as at load (ops/op.h), and the step is dynamic. */
static bool value_declared(const kn_node *n, int32_t k) {
  return n->op->data_shape == KN_DATA_SHAPE_ALL || (n->op->data_shape == KN_DATA_SHAPE_ARGS && k > 0);
}

/* Whether step i may be fixed: every input it reads is a tensor whose
 * shape is known now, and whose values are known too where the op
 * declares they decide the shapes.  *valued: every input's values are
 * known. */
static bool inputs_known(const kn_runner *r, int32_t i, bool *valued) {
  const kn_node *n = &r->g->nodes[i];
  *valued = true;
  if ((r->rule[i] & KN_RULE_SUBGRAPH) || n->n_outputs > 32) return false;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0) continue;
    if (!r->known[v] || r->env[v].kind != KN_KIND_TENSOR) return false;
    if (r->valued[v]) continue;
    *valued = false;
    if (!(r->rule[i] & KN_RULE_SHAPE_OF) && value_declared(n, k)) return false;
  }
  return true;
}

/* Infer step i from its inputs' shapes and the values prepare knows (the
 * others have data NULL): true when every output is a tensor of complete
 * shape, left in its slot (data NULL). */
static bool infer_shapes(kn_runner *r, int32_t i) {
  kn_op_ctx *c = &r->ctx[i];
  for (int32_t o = 0; o < c->n_out; o++) {
    kn_slot_release(c->out[o]);
    c->out[o]->t.rank = -1;
  }
  /* an op that cannot infer without values fails again when it runs,
     with its values, in order: the run reports it */
  kn_error quiet;
  c->err = &quiet;
  kn_status st = c->node->op->infer(c);
  c->err = r->err_for;
  for (int32_t o = 0; o < c->n_out && !st; o++) {
    const kn_slot *s = c->out[o];
    if (s->kind != KN_KIND_TENSOR || !kn_shape_known(&s->t) || s->t.data ||
        !kn_dtype_is_valid(s->t.dtype))
      st = KN_ERR_SHAPE;
  }
  if (st)
    for (int32_t o = 0; o < c->n_out; o++) kn_slot_release(c->out[o]);
  return st == KN_OK;
}

/* Run fixed step i now, into buffers of its own, when its outputs'
 * values follow from the signature (its inputs' values do, or it is Shape)
 * and are small: later steps' shapes may depend on them.  The outputs
 * stay in their env slots until prepare ends; on any failure they are
 * shapes again, and not valued. */
static void compute_values(kn_runner *r, int32_t i) {
  kn_op_ctx *c = &r->ctx[i];
  kn_tensor shape[32];
  for (int32_t o = 0; o < c->n_out; o++) {
    shape[o] = c->out[o]->t;
    if (kn_tensor_numel(&shape[o]) > KN_PREPARE_VALUES_MAX) return;
  }
  kn_status st = KN_OK;
  for (int32_t o = 0; o < c->n_out && !st; o++)
    st = kn_tensor_alloc(&c->out[o]->t, shape[o].dtype, shape[o].rank, shape[o].dims, NULL);
  kn_error quiet;
  c->err = &quiet;
  if (!st) st = kn_tactics_run(c);
  c->err = r->err_for;
  for (int32_t o = 0; o < c->n_out && !st; o++)
    if (c->out[o]->kind != KN_KIND_TENSOR || !c->out[o]->t.data) st = KN_ERR_INTERNAL;
  for (int32_t o = 0; o < c->n_out; o++) {
    int32_t v = c->node->outputs[o];
    if (!st && v >= 0) r->valued[v] = true;
    if (!st) continue;
    kn_slot_release(c->out[o]);
    c->out[o]->kind = KN_KIND_TENSOR;
    c->out[o]->t = shape[o];
  }
}

/* Decide step i: fixed (shapes and placements recorded) or dynamic. */
static void prepare_step(kn_runner *r, int32_t i) {
  kn_step *s = &r->step[i];
  *s = (kn_step){0};
  bool valued;
  if (!inputs_known(r, i, &valued) || !infer_shapes(r, i)) return;
  const kn_node *n = &r->g->nodes[i];
  kn_op_ctx *c = &r->ctx[i];
  int32_t ii = n->op->inplace_input, vin = n->n_inputs > ii ? n->inputs[ii] : -1;
  kn_dtype in_dtype = vin >= 0 ? r->env[vin].t.dtype : KN_DTYPE_UNDEFINED;
  const void *in_data = vin >= 0 ? bound_data(r, vin) : NULL;
  s->views = 1;
  for (int32_t o = 0; o < n->n_outputs; o++) {
    kn_tensor *rec = &r->rec[r->out_off[i] + o];
    kn_exec_place p;
    kn_exec_decide(r, &r->fr, i, o, &c->out[o]->t, in_dtype, in_data, &p);
    *rec = c->out[o]->t;
    rec->data = p.data;
    rec->nbytes = kn_exec_need(rec);
    rec->owned = 0;
    r->place[r->out_off[i] + o] = p.bind;
    s->zero |= (uint32_t)p.zero << o;
    s->skip_run |= p.skip_run;
    s->inplace |= o == 0 && p.bind == KN_BIND_INPLACE;
    if (p.bind != KN_BIND_ARENA && p.bind != KN_BIND_INPLACE) s->views = 0;
    if (n->outputs[o] >= 0) r->known[n->outputs[o]] = true;
  }
  s->fixed = 1;
  if ((valued || (r->rule[i] & KN_RULE_SHAPE_OF)) && !(r->rule[i] & KN_RULE_RANDOM))
    compute_values(r, i);
  /* unused outputs' scratch slots are not read by later steps */
  for (int32_t o = 0; o < n->n_outputs; o++)
    if (n->outputs[o] < 0) kn_slot_release(c->out[o]);
}

void kn_exec_borrow(kn_slot *dst, const kn_slot *src) {
  memset(dst, 0, sizeof *dst);
  dst->kind = src->kind;
  if (src->kind == KN_KIND_TENSOR) dst->t = kn_tensor_view(&src->t);
  if (src->kind == KN_KIND_SEQUENCE) {
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

void kn_exec_set_inputs(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs) {
  const kn_graph *g = r->g;
  for (int32_t k = 0; k < r->n_setup; k++) {
    int32_t v = r->setup[k];
    const kn_value *val = &g->values[v];
    if (val->constant) {
      r->env[v].kind = KN_KIND_TENSOR;
      r->env[v].t = kn_tensor_view(val->constant);
    } else {
      KN_ASSERT(parent_env);
      kn_exec_borrow(&r->env[v], &parent_env[val->outer]);
    }
  }
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (inputs && inputs[i]) kn_exec_borrow(&r->env[g->inputs[i]], inputs[i]);
}

kn_status kn_exec_prepare(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                          kn_mem_budget *mem, kn_error *err) {
  /* nothing here fails: what cannot be prepared runs dynamic */
  const kn_graph *g = r->g;
  r->prepared = false;
  r->n_prepares++;
  if (g->parent && mem->rt) kn_exec_pack_subgraph(r, mem->rt->isa);
  keep_signature(r, parent_env, inputs, mem, err);
  memset(r->known, 0, (size_t)r->nv * sizeof *r->known);
  memset(r->valued, 0, (size_t)r->nv * sizeof *r->valued);
  kn_exec_set_inputs(r, parent_env, inputs);
  for (int32_t k = 0; k < r->n_setup; k++) {
    r->known[r->setup[k]] = true;
    r->valued[r->setup[k]] = g->values[r->setup[k]].constant != NULL;
  }
  /* values given to the run change from run to run: prepare sees their
     shapes only */
  for (int32_t k = 0; k < r->n_setup; k++)
    if (g->values[r->setup[k]].outer >= 0) r->env[r->setup[k]].t.data = NULL;
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (inputs && inputs[i]) {
      r->known[g->inputs[i]] = true;
      r->valued[g->inputs[i]] = false;
      r->env[g->inputs[i]].t.data = NULL;
    }
  for (int32_t i = 0; i < r->nn; i++) prepare_step(r, i);
  for (int32_t v = 0; v < r->nv; v++) kn_slot_release(&r->env[v]);
  r->prepared = true;
  return KN_OK;
}
