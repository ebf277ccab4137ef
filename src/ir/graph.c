#include "ir.h"

#include <sys/mman.h>

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

kn_graph *kn_graph_new(kn_graph *parent) {
  kn_graph *g = kn_calloc(1, sizeof *g);
  if (g) g->parent = parent;
  return g;
}

void kn_attr_clear(kn_attr *a) {
  free(a->name);
  free(a->s);
  kn_tensor_release(&a->t);
  kn_graph_free(a->g);
  free(a->floats);
  free(a->ints);
  if (a->strings)
    for (int32_t i = 0; i < a->n; i++) free(a->strings[i]);
  free(a->strings);
  if (a->tensors)
    for (int32_t i = 0; i < a->n; i++) kn_tensor_release(&a->tensors[i]);
  free(a->tensors);
  if (a->graphs)
    for (int32_t i = 0; i < a->n; i++) kn_graph_free(a->graphs[i]);
  free(a->graphs);
  memset(a, 0, sizeof *a);
}

void kn_graph_free(kn_graph *g) {
  if (!g) return;
  for (int32_t i = 0; i < g->n_values; i++) {
    kn_value *v = &g->values[i];
    free(v->name);
    for (int d = 0; d < KN_MAX_RANK; d++) free(v->dim_params[d]);
    if (v->constant) {
      kn_tensor_release(v->constant);
      free(v->constant);
    }
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    free(n->name);
    free(n->covers);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    for (int32_t a = 0; a < n->n_attrs; a++) kn_attr_clear(&n->attrs[a]);
    free(n->attrs);
    free(n->quant.weight_scales);
  }
  free(g->values);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  free(g->map);
  free(g->name);
  free(g);
}

void kn_ir_model_free(kn_ir_model *m) {
  if (!m) return;
  kn_graph_free(m->graph);
  for (int32_t i = 0; i < m->n_opsets; i++) free(m->opsets[i].domain);
  free(m->opsets);
  free(m->label);
  if (m->mapping) munmap(m->mapping, m->mapping_size);
  free(m);
}

int32_t kn_graph_find(const kn_graph *g, const char *name) {
  if (!g->map_cap || !name) return -1;
  uint32_t mask = (uint32_t)g->map_cap - 1;
  for (uint32_t h = (uint32_t)hash_str(name) & mask;; h = (h + 1) & mask) {
    int32_t idx = g->map[h];
    if (idx < 0) return -1;
    if (strcmp(g->values[idx].name, name) == 0) return idx;
  }
}

static bool map_insert(kn_graph *g, int32_t idx) {
  if ((int64_t)(g->n_values + 1) * 2 > g->map_cap) {
    int32_t ncap = g->map_cap ? g->map_cap * 2 : 64;
    while ((int64_t)(g->n_values + 1) * 2 > ncap) ncap *= 2;
    int32_t *nm = kn_malloc((size_t)ncap * sizeof *nm);
    if (!nm) return false;
    for (int32_t i = 0; i < ncap; i++) nm[i] = -1;
    free(g->map);
    g->map = nm;
    g->map_cap = ncap;
    for (int32_t i = 0; i < g->n_values; i++)
      if (i != idx && !map_insert(g, i)) return false;
  }
  uint32_t mask = (uint32_t)g->map_cap - 1;
  uint32_t h = (uint32_t)hash_str(g->values[idx].name) & mask;
  while (g->map[h] >= 0) h = (h + 1) & mask;
  g->map[h] = idx;
  return true;
}

void kn_graph_reindex(kn_graph *g) {
  for (int32_t i = 0; i < g->map_cap; i++) g->map[i] = -1;
  uint32_t mask = (uint32_t)g->map_cap - 1;
  for (int32_t v = 0; v < g->n_values; v++) {
    uint32_t h = (uint32_t)hash_str(g->values[v].name) & mask;
    while (g->map[h] >= 0) h = (h + 1) & mask;
    g->map[h] = v;
  }
}

int32_t kn_graph_add_value(kn_graph *g, const char *name) {
  KN_ASSERT(kn_graph_find(g, name) < 0);
  if (!KN_GROW(g->values, g->cap_values, (int64_t)g->n_values + 1)) return -1;
  int32_t idx = g->n_values;
  kn_value *v = &g->values[idx];
  memset(v, 0, sizeof *v);
  v->name = kn_strdup(name);
  if (!v->name) return -1;
  v->producer = -1;
  v->outer = -1;
  v->type.rank = -1;
  g->n_values++;
  if (!map_insert(g, idx)) {
    g->n_values--;
    free(v->name);
    return -1;
  }
  return idx;
}

int32_t kn_graph_resolve(kn_graph *g, const char *name) {
  int32_t idx = kn_graph_find(g, name);
  if (idx >= 0 || !g->parent) return idx;
  int32_t pidx = kn_graph_resolve(g->parent, name);
  if (pidx < 0) return -1;
  idx = kn_graph_add_value(g, name);
  if (idx < 0) return -1;
  g->values[idx].outer = pidx;
  g->values[idx].type = g->parent->values[pidx].type;
  return idx;
}

kn_node *kn_graph_add_node(kn_graph *g) {
  if (!KN_GROW(g->nodes, g->cap_nodes, (int64_t)g->n_nodes + 1)) return NULL;
  kn_node *n = &g->nodes[g->n_nodes++];
  memset(n, 0, sizeof *n);
  return n;
}

const kn_attr *kn_node_attr(const kn_node *n, const char *name) {
  for (int32_t i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0)
      return &n->attrs[i];
  return NULL;
}

int64_t kn_ir_model_opset(const kn_ir_model *m, const char *domain) {
  bool deflt = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
  for (int32_t i = 0; i < m->n_opsets; i++) {
    const char *d = m->opsets[i].domain;
    bool ddef = !d || !*d || strcmp(d, "ai.onnx") == 0;
    if (deflt ? ddef : (d && strcmp(d, domain) == 0)) return m->opsets[i].version;
  }
  return 0;
}


/* Calls fn for every value of g a node reads: its inputs and, through its
 * subgraph attributes, the values its subgraphs take from g's scope. */
static void node_reads(const kn_graph *g, const kn_node *n,
                       void (*fn)(int32_t v, int32_t node, void *arg),
                       int32_t node, void *arg) {
  for (int32_t k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0) fn(n->inputs[k], node, arg);
  for (int32_t a = 0; a < n->n_attrs; a++) {
    const kn_attr *at = &n->attrs[a];
    int32_t cnt = at->type == KN_ATTR_GRAPH ? 1 : at->type == KN_ATTR_GRAPHS ? at->n : 0;
    for (int32_t i = 0; i < cnt; i++) {
      const kn_graph *sg = at->type == KN_ATTR_GRAPH ? at->g : at->graphs[i];
      if (!sg) continue;
      for (int32_t v = 0; v < sg->n_values; v++)
        if (sg->values[v].outer >= 0) fn(sg->values[v].outer, node, arg);
    }
  }
  (void)g;
}

void kn_node_foreach_read(const kn_graph *g, const kn_node *n,
                          void (*fn)(int32_t v, int32_t node, void *arg),
                          int32_t node, void *arg) {
  node_reads(g, n, fn, node, arg);
}

typedef struct sort_state {
  kn_graph *g;
  int32_t *pending, *ccount, *cstart, *clist;
  int64_t total;
  int pass; /* 0 count, 1 fill */
  int32_t bad_value, bad_node;
} sort_state;

static void sort_visit(int32_t v, int32_t node, void *arg) {
  sort_state *s = arg;
  kn_value *val = &s->g->values[v];
  if (val->producer < 0 && !val->constant && !val->is_input && val->outer < 0) {
    if (s->bad_value < 0) {
      s->bad_value = v;
      s->bad_node = node;
    }
    return;
  }
  if (val->producer < 0) return;
  if (s->pass == 0) {
    s->pending[node]++;
    s->ccount[v]++;
    s->total++;
  } else {
    s->clist[s->cstart[v] + s->ccount[v]++] = node;
  }
}

kn_status kn_graph_finish(kn_graph *g, const char *label, kn_error *err) {
  kn_status st = KN_OK;
  int32_t nn = g->n_nodes;
  int32_t *pending = kn_calloc((size_t)nn + 1, sizeof *pending);
  int32_t *order = kn_calloc((size_t)nn + 1, sizeof *order);
  /* consumers as a CSR list: value -> nodes */
  int32_t *ccount = kn_calloc((size_t)g->n_values + 1, sizeof *ccount);
  int32_t *cstart = kn_calloc((size_t)g->n_values + 2, sizeof *cstart);
  int32_t *clist = NULL;
  kn_node *sorted = NULL;
  if (!pending || !order || !ccount || !cstart) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory sorting the graph", label);
    goto done;
  }
  for (int32_t v = 0; v < g->n_values; v++) g->values[v].producer = -1;
  for (int32_t i = 0; i < nn; i++) {
    kn_node *n = &g->nodes[i];
    for (int32_t o = 0; o < n->n_outputs; o++) {
      int32_t v = n->outputs[o];
      if (v < 0) continue;
      kn_value *val = &g->values[v];
      if (val->producer >= 0 || val->constant || val->outer >= 0 ||
          (val->is_input)) {
        st = kn_fail(err, KN_ERR_PARSE,
                     "%s: graph '%s': value '%s' is produced by node '%s' and "
                     "also defined elsewhere (each value must have one producer)",
                     label, g->name ? g->name : "", val->name, n->name);
        goto done;
      }
      val->producer = i;
    }
  }
  sort_state ss = {.g = g, .pending = pending, .ccount = ccount, .cstart = cstart,
                   .bad_value = -1, .bad_node = -1};
  for (int32_t i = 0; i < nn; i++) node_reads(g, &g->nodes[i], sort_visit, i, &ss);
  if (ss.bad_value >= 0) {
    kn_node *n = &g->nodes[ss.bad_node];
    st = kn_fail(err, KN_ERR_PARSE,
                 "%s: node '%s' (%s): input '%s' is not produced by any node, "
                 "initializer or graph input",
                 label, n->name, n->op_type, g->values[ss.bad_value].name);
    goto done;
  }
  for (int32_t v = 0; v < g->n_values; v++) cstart[v + 1] = cstart[v] + ccount[v];
  clist = kn_calloc((size_t)ss.total + 1, sizeof *clist);
  if (!clist) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory sorting the graph", label);
    goto done;
  }
  memset(ccount, 0, (size_t)g->n_values * sizeof *ccount);
  ss.clist = clist;
  ss.pass = 1;
  for (int32_t i = 0; i < nn; i++) node_reads(g, &g->nodes[i], sort_visit, i, &ss);
  /* Kahn's algorithm, stable with respect to the file's node order. */
  int32_t head = 0, tail = 0;
  for (int32_t i = 0; i < nn; i++)
    if (pending[i] == 0) order[tail++] = i;
  while (head < tail) {
    int32_t i = order[head++];
    kn_node *n = &g->nodes[i];
    for (int32_t o = 0; o < n->n_outputs; o++) {
      int32_t v = n->outputs[o];
      if (v < 0) continue;
      for (int32_t c = cstart[v]; c < cstart[v + 1]; c++)
        if (--pending[clist[c]] == 0) order[tail++] = clist[c];
    }
  }
  if (tail != nn) {
    for (int32_t i = 0; i < nn; i++)
      if (pending[i] > 0) {
        st = kn_fail(err, KN_ERR_PARSE,
                     "%s: the graph has a cycle through node '%s' (%s)", label,
                     g->nodes[i].name, g->nodes[i].op_type);
        goto done;
      }
  }
  sorted = kn_malloc((size_t)nn * sizeof *sorted + 1);
  if (!sorted) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory sorting the graph", label);
    goto done;
  }
  for (int32_t i = 0; i < nn; i++) sorted[i] = g->nodes[order[i]];
  if (nn > 0) memcpy(g->nodes, sorted, (size_t)nn * sizeof *sorted);
  for (int32_t i = 0; i < nn; i++)
    for (int32_t o = 0; o < g->nodes[i].n_outputs; o++)
      if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
done:
  free(sorted);
  free(pending);
  free(order);
  free(ccount);
  free(cstart);
  free(clist);
  return st;
}

typedef struct order_check {
  const kn_graph *g;
  const bool *made;
  bool ok;
} order_check;

static void check_read(int32_t v, int32_t node, void *arg) {
  (void)node;
  order_check *c = arg;
  const kn_value *val = &c->g->values[v];
  if (!c->made[v] && !val->constant && !val->is_input && val->outer < 0) c->ok = false;
}

kn_status kn_graph_finish_ordered(kn_graph *g, const char *label, kn_error *err) {
  bool *made = kn_calloc((size_t)g->n_values + 1, sizeof *made);
  if (!made) return kn_fail(err, KN_ERR_OOM, "%s: out of memory sorting the graph", label);
  order_check c = {.g = g, .made = made, .ok = true};
  for (int32_t i = 0; i < g->n_nodes && c.ok; i++) {
    const kn_node *n = &g->nodes[i];
    kn_node_foreach_read(g, n, check_read, i, &c);
    for (int32_t o = 0; o < n->n_outputs && c.ok; o++) {
      int32_t v = n->outputs[o];
      if (v < 0) continue;
      const kn_value *val = &g->values[v];
      if (made[v] || val->constant || val->is_input || val->outer >= 0) c.ok = false;
      made[v] = true;
    }
  }
  free(made);
  if (!c.ok) return kn_graph_finish(g, label, err);
  for (int32_t v = 0; v < g->n_values; v++) g->values[v].producer = -1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t o = 0; o < g->nodes[i].n_outputs; o++)
      if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
  return KN_OK;
}
