/* In-place graph editing for the optimization passes. */
#include "ir.h"

#include <math.h>

static bool name_taken(const kn_graph *g, const char *name) {
  for (const kn_graph *s = g; s; s = s->parent)
    if (kn_graph_find(s, name) >= 0) return true;
  return false;
}

char *kn_graph_unique_name(const kn_graph *g, const char *hint) {
  size_t len = strlen(hint) + 24;
  char *buf = kn_malloc(len);
  if (!buf) return NULL;
  snprintf(buf, len, "%s", hint);
  for (int64_t k = 1; name_taken(g, buf); k++) snprintf(buf, len, "%s_%lld", hint, (long long)k);
  return buf;
}

int32_t kn_graph_add_fresh_value(kn_graph *g, const char *hint) {
  char *name = kn_graph_unique_name(g, hint);
  if (!name) return -1;
  int32_t idx = kn_graph_add_value(g, name);
  free(name);
  return idx;
}

int32_t kn_graph_add_constant(kn_graph *g, const char *hint, kn_tensor *t) {
  kn_tensor *c = kn_calloc(1, sizeof *c);
  if (!c) return -1;
  int32_t idx = kn_graph_add_fresh_value(g, hint);
  if (idx < 0) {
    free(c);
    return -1;
  }
  *c = *t;
  memset(t, 0, sizeof *t);
  kn_value *v = &g->values[idx];
  v->constant = c;
  v->type.kind = KN_KIND_TENSOR;
  v->type.dtype = c->dtype;
  v->type.rank = c->rank;
  memcpy(v->type.dims, c->dims, sizeof c->dims);
  return idx;
}

int32_t kn_graph_new_node(kn_graph *g, const char *op_type, const char *domain,
                          const char *name, int32_t n_in, const int32_t *inputs,
                          int32_t n_out, const int32_t *outputs) {
  kn_node *n = kn_graph_add_node(g);
  if (!n) return -1;
  int32_t idx = g->n_nodes - 1;
  n->op_type = kn_strdup(op_type);
  n->domain = kn_strdup(domain ? domain : "");
  n->name = kn_strdup(name);
  n->inputs = kn_calloc((size_t)n_in + 1, sizeof *n->inputs);
  n->outputs = kn_calloc((size_t)n_out + 1, sizeof *n->outputs);
  if (!n->op_type || !n->domain || !n->name || !n->inputs || !n->outputs) {
    n->dead = true;
    return -1;
  }
  for (int32_t i = 0; i < n_in; i++) n->inputs[i] = inputs[i];
  for (int32_t i = 0; i < n_out; i++) n->outputs[i] = outputs[i];
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  return idx;
}

static kn_attr *attr_slot(kn_node *n, const char *name) {
  for (int32_t i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) {
      kn_attr_clear(&n->attrs[i]);
      n->attrs[i].name = kn_strdup(name);
      return n->attrs[i].name ? &n->attrs[i] : NULL;
    }
  kn_attr *a = kn_realloc(n->attrs, ((size_t)n->n_attrs + 1) * sizeof *a);
  if (!a) return NULL;
  n->attrs = a;
  kn_attr *s = &n->attrs[n->n_attrs];
  memset(s, 0, sizeof *s);
  s->name = kn_strdup(name);
  if (!s->name) return NULL;
  n->n_attrs++;
  return s;
}

bool kn_node_set_int(kn_node *n, const char *name, int64_t v) {
  kn_attr *a = attr_slot(n, name);
  if (!a) return false;
  a->type = KN_ATTR_INT;
  a->i = v;
  return true;
}

bool kn_node_set_float(kn_node *n, const char *name, float v) {
  kn_attr *a = attr_slot(n, name);
  if (!a) return false;
  a->type = KN_ATTR_FLOAT;
  a->f = v;
  return true;
}

bool kn_node_set_string(kn_node *n, const char *name, const char *v) {
  kn_attr *a = attr_slot(n, name);
  if (!a) return false;
  a->type = KN_ATTR_STRING;
  a->s = kn_strdup(v);
  a->s_len = strlen(v);
  return a->s != NULL;
}

bool kn_node_set_ints(kn_node *n, const char *name, const int64_t *v, int32_t count) {
  kn_attr *a = attr_slot(n, name);
  if (!a) return false;
  a->type = KN_ATTR_INTS;
  a->n = count;
  a->ints = kn_malloc((size_t)count * sizeof *a->ints + 1);
  if (!a->ints) return false;
  if (count) memcpy(a->ints, v, (size_t)count * sizeof *v);
  return true;
}

bool kn_node_add_covers(kn_node *dst, const kn_node *src) {
  const char *a = dst->covers ? dst->covers : dst->name;
  const char *b = src->covers ? src->covers : src->name;
  size_t la = strlen(a), lb = strlen(b);
  char *c = kn_malloc(la + lb + 2);
  if (!c) return false;
  memcpy(c, a, la);
  c[la] = ',';
  memcpy(c + la + 1, b, lb + 1);
  free(dst->covers);
  dst->covers = c;
  return true;
}

bool kn_node_set_floats(kn_node *n, const char *name, const float *v, int32_t count) {
  kn_attr *a = attr_slot(n, name);
  if (!a) return false;
  a->type = KN_ATTR_FLOATS;
  a->n = count;
  a->floats = kn_malloc((size_t)count * sizeof *a->floats + 1);
  if (!a->floats) return false;
  if (count) memcpy(a->floats, v, (size_t)count * sizeof *v);
  return true;
}

bool kn_node_set_input_quant(kn_node *n, float scale, int32_t zero) {
  if (!(scale > 0.0f) || !isfinite(scale) || zero < 0 || zero > 255) return false;
  n->quant.has_input = true;
  n->quant.input_scale = scale;
  n->quant.input_zero = zero;
  return true;
}

bool kn_node_input_quant(const kn_node *n, float *scale, int32_t *zero) {
  if (!n->quant.has_input) return false;
  *scale = n->quant.input_scale;
  *zero = n->quant.input_zero;
  return true;
}

bool kn_node_set_weight_scales(kn_node *n, const float *scales, int32_t count) {
  float *c = kn_malloc((size_t)count * sizeof *c + 1);
  if (!c) return false;
  if (count) memcpy(c, scales, (size_t)count * sizeof *c);
  free(n->quant.weight_scales);
  n->quant.weight_scales = c;
  n->quant.n_weight_scales = count;
  return true;
}

const float *kn_node_weight_scales(const kn_node *n, int64_t channels) {
  return n->quant.weight_scales && n->quant.n_weight_scales == channels ? n->quant.weight_scales
                                                                         : NULL;
}

void kn_node_quant_clear(kn_node *n) {
  free(n->quant.weight_scales);
  memset(&n->quant, 0, sizeof n->quant);
}

bool kn_node_copy_quant(kn_node *dst, const kn_node *src) {
  if (dst == src) return true;
  kn_node_quant q = src->quant;
  q.weight_scales = NULL;
  q.n_weight_scales = 0;
  kn_node_quant_clear(dst);
  dst->quant = q;
  return !src->quant.weight_scales ||
         kn_node_set_weight_scales(dst, src->quant.weight_scales, src->quant.n_weight_scales);
}

bool kn_node_copy_attrs(kn_node *dst, const kn_node *src) {
  for (int32_t i = 0; i < src->n_attrs; i++) {
    const kn_attr *a = &src->attrs[i];
    bool ok = true;
    switch (a->type) {
    case KN_ATTR_INT: ok = kn_node_set_int(dst, a->name, a->i); break;
    case KN_ATTR_FLOAT: ok = kn_node_set_float(dst, a->name, a->f); break;
    case KN_ATTR_STRING: ok = kn_node_set_string(dst, a->name, a->s ? a->s : ""); break;
    case KN_ATTR_INTS: ok = kn_node_set_ints(dst, a->name, a->ints, a->n); break;
    case KN_ATTR_FLOATS: ok = kn_node_set_floats(dst, a->name, a->floats, a->n); break;
    case KN_ATTR_TENSOR: {
      kn_attr *d = attr_slot(dst, a->name);
      ok = d && kn_tensor_copy(&d->t, &a->t, NULL) == KN_OK;
      if (d) d->type = KN_ATTR_TENSOR;
      break;
    }
    default: ok = false; break; /* graphs and lists of them are not copied */
    }
    if (!ok) return false;
  }
  return kn_node_copy_quant(dst, src);
}

static void replace_in_subgraphs(kn_node *n, int32_t from, int32_t to) {
  for (int32_t a = 0; a < n->n_attrs; a++) {
    kn_attr *at = &n->attrs[a];
    int32_t cnt = at->type == KN_ATTR_GRAPH ? 1 : at->type == KN_ATTR_GRAPHS ? at->n : 0;
    for (int32_t i = 0; i < cnt; i++) {
      kn_graph *sg = at->type == KN_ATTR_GRAPH ? at->g : at->graphs[i];
      for (int32_t v = 0; sg && v < sg->n_values; v++)
        if (sg->values[v].outer == from) sg->values[v].outer = to;
    }
  }
}

void kn_graph_replace_value(kn_graph *g, int32_t from, int32_t to) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int32_t k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == from) n->inputs[k] = to;
    replace_in_subgraphs(n, from, to);
  }
  kn_value *vf = &g->values[from], *vt = &g->values[to];
  if (!vf->is_output) return;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == from) g->outputs[i] = to;
  /* `to` becomes the graph output and, when it is an ordinary node result,
   * takes the output's name so the graph's interface does not change. */
  vf->is_output = false;
  bool was_output = vt->is_output;
  vt->is_output = true;
  if (!vt->is_input && !was_output && vt->outer < 0 && !vt->constant) {
    char *tmp = vf->name;
    vf->name = vt->name;
    vt->name = tmp;
    kn_graph_reindex(g);
  }
}

bool kn_graph_can_replace(const kn_graph *g, int32_t from, int32_t to) {
  const kn_value *vf = &g->values[from], *vt = &g->values[to];
  if (!vf->is_output) return true;
  return !vt->is_input && !vt->is_output && vt->outer < 0 && !vt->constant;
}

static void count_use(int32_t v, int32_t node, void *arg) {
  (void)node;
  ((int32_t *)arg)[v]++;
}

void kn_graph_use_counts(const kn_graph *g, int32_t *counts) {
  memset(counts, 0, (size_t)g->n_values * sizeof *counts);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) kn_node_foreach_read(g, &g->nodes[i], count_use, i, counts);
  for (int32_t i = 0; i < g->n_outputs; i++) counts[g->outputs[i]]++;
}

static void drop_dead(kn_graph *g) {
  int32_t w = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead) {
      free(n->name);
      free(n->covers);
      free(n->op_type);
      free(n->domain);
      free(n->inputs);
      free(n->outputs);
      for (int32_t a = 0; a < n->n_attrs; a++) kn_attr_clear(&n->attrs[a]);
      kn_node_quant_clear(n);
      free(n->attrs);
      continue;
    }
    g->nodes[w++] = *n;
  }
  g->n_nodes = w;
}

kn_status kn_graph_compact(kn_graph *g, const char *label, kn_error *err) {
  drop_dead(g);
  return kn_graph_finish(g, label, err);
}

kn_status kn_graph_compact_ordered(kn_graph *g, const char *label, kn_error *err) {
  drop_dead(g);
  return kn_graph_finish_ordered(g, label, err);
}
