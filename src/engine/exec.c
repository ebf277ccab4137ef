/* The runner's lifetime: the tables that follow from the graph alone (op
 * contexts, liveness), made once at create; subgraph runners; and
 * kn_runner_run, which prepares when it must and executes (exec.h). */
#include "exec_impl.h"

kn_status kn_exec_sub_runner(kn_runner *r, const kn_graph *g, kn_runner **out, kn_error *err) {
  for (int32_t i = 0; i < r->n_sub; i++)
    if (r->sub[i].g == g) {
      *out = r->sub[i].r;
      return KN_OK;
    }
  if (!KN_GROW(r->sub, r->cap_sub, (int64_t)r->n_sub + 1))
    return kn_fail(err, KN_ERR_OOM, "out of memory preparing a subgraph");
  kn_status st = kn_runner_create(r->m, g, out, err);
  if (st) return st;
  r->sub[r->n_sub++] = (struct kn_sub_entry){.g = g, .r = *out};
  return KN_OK;
}

/* What prepare may do with node n (KN_RULE_*). */
static uint8_t node_rule(const kn_node *n) {
  uint8_t rule = 0;
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS)
      rule |= KN_RULE_SUBGRAPH;
  if (!n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")))
    rule |= KN_RULE_SHAPE_OF;
  if (!strncmp(n->op_type, "Random", 6) || !strcmp(n->op_type, "Bernoulli") ||
      !strcmp(n->op_type, "Multinomial"))
    rule |= KN_RULE_RANDOM;
  return rule;
}

static void unpack_subgraph(kn_runner *r) {
  for (int32_t i = 0; r->own_packed && i < r->nn; i++) kn_packed_free(r->own_packed[i]);
  free(r->own_packed);
  r->own_packed = NULL;
}

void kn_exec_pack_subgraph(kn_runner *r, int32_t isa) {
  if (r->own_packed && r->own_packed_isa == isa) return;
  unpack_subgraph(r);
  const kn_graph *g = r->g;
  bool any = false;
  for (int32_t i = 0; i < r->nn && !any; i++) {
    const kn_op_tactics *tt = kn_tactics_of(&g->nodes[i]);
    any = g->nodes[i].tactic && tt && tt->pack;
  }
  if (!any || !(r->own_packed = kn_calloc((size_t)r->nn + 1, sizeof *r->own_packed))) return;
  r->own_packed_isa = isa;
  for (int32_t i = 0; i < r->nn; i++) {
    const kn_node *n = &g->nodes[i];
    const kn_op_tactics *tt = kn_tactics_of(n);
    kn_error e;
    void *p = NULL;
    if (n->tactic && tt && tt->pack && tt->pack(g, n, &(kn_target){isa, NULL}, &p, &e) == KN_OK)
      r->own_packed[i] = p;
  }
}

void kn_runner_free(kn_runner *r) {
  if (!r) return;
  unpack_subgraph(r);
  for (int32_t i = 0; i < r->n_sub; i++) kn_runner_free(r->sub[i].r);
  free(r->sub);
  if (r->env)
    for (int32_t v = 0; v < r->nv; v++) kn_slot_release(&r->env[v]);
  void *tables[] = {r->env,  r->scratch, r->ctx,  r->slots, r->out_index, r->out_off,
                    r->rule, r->rel,     r->rel_off, r->setup, r->planned, r->sig,
                    r->sig_given, r->osig, r->step, r->rec, r->place, r->known,
                    r->valued, r->own_arena};
  for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++) free(tables[k]);
  kn_mem_plan_free(&r->own_plan);
  free(r);
}

static void mark_last_use(int32_t v, int32_t node, void *arg) {
  int32_t *last = arg;
  last[v] = node;
}

/* Liveness: each value is released after the step that reads it last
 * (directly or from a subgraph); a step's outputs nobody reads right after
 * it; graph outputs never (they go to the caller). */
static kn_status make_liveness(kn_runner *r) {
  const kn_graph *g = r->g;
  int32_t nv = r->nv, nn = r->nn;
  int32_t *last = kn_malloc(((size_t)nv + 1) * sizeof *last);
  r->rel_off = kn_calloc((size_t)nn + 2, sizeof *r->rel_off);
  r->rel = kn_malloc(((size_t)nv + 1) * sizeof *r->rel);
  if (!last || !r->rel_off || !r->rel) {
    free(last);
    return KN_ERR_OOM;
  }
  for (int32_t v = 0; v < nv; v++) last[v] = -1;
  for (int32_t i = 0; i < nn; i++) kn_node_foreach_read(g, &g->nodes[i], mark_last_use, i, last);
  for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = nn;
  for (int32_t i = 0; i < nn; i++) /* never read: released by its producer */
    for (int32_t o = 0; o < g->nodes[i].n_outputs; o++) {
      int32_t v = g->nodes[i].outputs[o];
      if (v >= 0 && last[v] < 0) last[v] = i;
    }
  for (int32_t v = 0; v < nv; v++)
    if (last[v] >= 0 && last[v] < nn) r->rel_off[last[v] + 1]++;
  for (int32_t i = 0; i < nn; i++) r->rel_off[i + 1] += r->rel_off[i];
  int32_t *at = kn_malloc(((size_t)nn + 1) * sizeof *at);
  if (!at) {
    free(last);
    return KN_ERR_OOM;
  }
  memcpy(at, r->rel_off, ((size_t)nn + 1) * sizeof *at);
  for (int32_t v = 0; v < nv; v++)
    if (last[v] >= 0 && last[v] < nn) r->rel[at[last[v]]++] = v;
  free(at);
  free(last);
  return KN_OK;
}

/* Each step's op context, with its inputs and outputs pointing at env
 * slots (scratch for outputs nobody reads); prepare adds the runtime,
 * the packed weights and the error. */
static kn_status make_contexts(kn_runner *r) {
  const kn_graph *g = r->g;
  int64_t n_slots = 0;
  for (int32_t i = 0; i < r->nn; i++) n_slots += g->nodes[i].n_inputs + g->nodes[i].n_outputs;
  r->ctx = kn_calloc((size_t)r->nn + 1, sizeof *r->ctx);
  r->slots = kn_calloc((size_t)n_slots + 1, sizeof *r->slots);
  if (!r->ctx || !r->slots) return KN_ERR_OOM;
  kn_slot **s = r->slots;
  for (int32_t i = 0; i < r->nn; i++) {
    const kn_node *n = &g->nodes[i];
    kn_op_ctx *c = &r->ctx[i];
    *c = (kn_op_ctx){.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = s,
                     .n_out = n->n_outputs, .static_infer = false, .label = r->m->label,
                     .run_subgraph = kn_exec_run_subgraph, .exec = &r->fr};
    for (int32_t k = 0; k < n->n_inputs; k++)
      *s++ = n->inputs[k] >= 0 ? &r->env[n->inputs[k]] : NULL;
    c->out = s;
    for (int32_t o = 0; o < n->n_outputs; o++)
      *s++ = n->outputs[o] >= 0 ? &r->env[n->outputs[o]] : &r->scratch[o];
  }
  return KN_OK;
}

/* The graph-static tables; false when out of memory. */
static bool make_tables(kn_runner *r) {
  const kn_graph *g = r->g;
  int32_t nv = r->nv, nn = r->nn, n_outs = 0;
  for (int32_t i = 0; i < nn; i++) {
    if (g->nodes[i].n_outputs > r->max_out) r->max_out = g->nodes[i].n_outputs;
    n_outs += g->nodes[i].n_outputs;
  }
  r->env = kn_calloc((size_t)nv + 1, sizeof *r->env);
  r->scratch = kn_calloc((size_t)r->max_out + 1, sizeof *r->scratch);
  r->out_index = kn_malloc(((size_t)nv + 1) * sizeof *r->out_index);
  r->planned = kn_malloc(((size_t)nv + 1) * sizeof *r->planned);
  r->setup = kn_malloc(((size_t)nv + 1) * sizeof *r->setup);
  r->known = kn_calloc((size_t)nv + 1, sizeof *r->known);
  r->valued = kn_calloc((size_t)nv + 1, sizeof *r->valued);
  r->out_off = kn_calloc((size_t)nn + 1, sizeof *r->out_off);
  r->rule = kn_calloc((size_t)nn + 1, sizeof *r->rule);
  r->step = kn_calloc((size_t)nn + 1, sizeof *r->step);
  r->rec = kn_calloc((size_t)n_outs + 1, sizeof *r->rec);
  r->place = kn_calloc((size_t)n_outs + 1, sizeof *r->place);
  r->sig = kn_calloc((size_t)g->n_inputs + 1, sizeof *r->sig);
  r->sig_given = kn_calloc((size_t)g->n_inputs + 1, sizeof *r->sig_given);
  if (g->parent) r->osig = kn_calloc((size_t)nv + 1, sizeof *r->osig);
  if (!r->env || !r->scratch || !r->out_index || !r->planned || !r->setup || !r->known ||
      !r->valued || !r->out_off || !r->rule || !r->step || !r->rec || !r->place || !r->sig ||
      !r->sig_given || (g->parent && !r->osig))
    return false;
  for (int32_t v = 0; v < nv; v++) {
    r->out_index[v] = r->planned[v] = -1;
    if (g->values[v].constant || g->values[v].outer >= 0) r->setup[r->n_setup++] = v;
  }
  for (int32_t i = g->n_outputs - 1; i >= 0; i--) r->out_index[g->outputs[i]] = i;
  for (int32_t i = 0, off = 0; i < nn; i++) {
    r->out_off[i] = off;
    off += g->nodes[i].n_outputs;
    r->rule[i] = node_rule(&g->nodes[i]);
  }
  return make_contexts(r) == KN_OK && make_liveness(r) == KN_OK;
}

kn_status kn_runner_create(const kn_ir_model *m, const kn_graph *g, kn_runner **out,
                           kn_error *err) {
  *out = NULL;
  kn_runner *r = kn_calloc(1, sizeof *r);
  if (!r) return kn_fail(err, KN_ERR_OOM, "out of memory preparing a run");
  r->m = m;
  r->g = g;
  r->nv = g->n_values;
  r->nn = g->n_nodes;
  r->fr = (kn_exec_frame){.m = m, .g = g, .runner = r};
  if (!make_tables(r)) {
    kn_runner_free(r);
    return kn_fail(err, KN_ERR_OOM, "out of memory preparing a run");
  }
  r->fr.env = r->env;
  if (g->parent) {
    /* A body whose intermediates have static shapes gets an arena of its
     * own; otherwise its outputs are allocated per run. */
    kn_error perr;
    if (kn_plan_memory(g, 0, &r->own_plan, &perr) == KN_OK && r->own_plan.arena_bytes > 0) {
      size_t bytes = (size_t)(r->own_plan.arena_bytes + 63) & ~(size_t)63;
      r->own_arena = aligned_alloc(64, bytes);
    }
    if (!r->own_arena) kn_mem_plan_free(&r->own_plan);
  }
  *out = r;
  return KN_OK;
}

int64_t kn_runner_prepare_count(const kn_runner *r) { return r ? r->n_prepares : 0; }

int32_t kn_runner_fixed_count(const kn_runner *r) {
  int32_t n = 0;
  for (int32_t i = 0; r && r->prepared && i < r->nn; i++) n += r->step[i].fixed;
  return n;
}

kn_status kn_runner_run(kn_runner *r, const kn_slot *parent_env, const kn_slot *const *inputs,
                        kn_slot *outs, kn_mem_budget *mem, kn_error *err) {
  /* the memory plan: the top-level graph's, or a subgraph's own */
  const kn_mem_plan *plan = r->g->parent == NULL && mem->arena ? mem->plan : NULL;
  char *arena = plan ? mem->arena : NULL;
  if (r->own_arena) {
    plan = &r->own_plan;
    arena = r->own_arena;
  }
  kn_status st = KN_OK;
  if (!r->plan_bound || plan != r->plan_for) st = kn_exec_bind_plan(r, plan, err);
  r->fr.plan = plan;
  r->fr.arena = arena;
  if (!st && !kn_exec_same_signature(r, inputs, parent_env, mem, arena))
    st = kn_exec_prepare(r, parent_env, inputs, mem, err);
  if (!st) st = kn_exec_execute(r, parent_env, inputs, outs, mem, err);
  if (st) r->prepared = false;
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
