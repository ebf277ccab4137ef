/* Helpers shared by the pattern-recognition passes (see pattern.h). */
#include "pattern.h"

#include <math.h>

static kn_status count(kn_pat *p, kn_error *err) {
  kn_graph *g = p->g;
  if (g->n_values > p->n) {
    int32_t *u = kn_realloc(p->uses, ((size_t)g->n_values + 1) * sizeof *u);
    if (u) p->uses = u;
    int32_t *f = kn_realloc(p->first, ((size_t)g->n_values + 1) * sizeof *f);
    if (f) p->first = f;
    if (!u || !f) return kn_fail(err, KN_ERR_OOM, "out of memory counting value readers");
  }
  p->n = g->n_values;
  kn_graph_use_counts(g, p->uses);
  for (int32_t v = 0; v < g->n_values; v++) p->first[v] = -1;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int32_t k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) p->first[n->inputs[k]] = i;
  }
  return KN_OK;
}

kn_status kn_pat_init(kn_pat *p, kn_graph *g, kn_error *err) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->uses = kn_calloc((size_t)g->n_values + 1, sizeof *p->uses);
  p->first = kn_calloc((size_t)g->n_values + 1, sizeof *p->first);
  if (!p->uses || !p->first) {
    kn_pat_free(p);
    return kn_fail(err, KN_ERR_OOM, "out of memory counting value readers");
  }
  p->n = g->n_values;
  return count(p, err);
}

kn_status kn_pat_refresh(kn_pat *p, kn_error *err) { return count(p, err); }

void kn_pat_free(kn_pat *p) {
  free(p->uses);
  free(p->first);
  p->uses = p->first = NULL;
}

bool kn_pat_is(const kn_node *n, const char *op) {
  return !n->dead && (!*n->domain || !strcmp(n->domain, "ai.onnx")) && !strcmp(n->op_type, op);
}

int32_t kn_pat_producer(const kn_graph *g, int32_t v, const char *op) {
  if (v < 0 || v >= g->n_values) return -1;
  int32_t i = g->values[v].producer;
  if (i < 0 || i >= g->n_nodes || !kn_pat_is(&g->nodes[i], op)) return -1;
  const kn_node *n = &g->nodes[i];
  return n->n_outputs >= 1 && n->outputs[0] == v ? i : -1;
}

int32_t kn_pat_sole_reader(const kn_pat *p, int32_t v) {
  if (v < 0 || v >= p->n || p->uses[v] != 1) return -1;
  return p->first[v];
}

int32_t kn_pat_sole_reader_op(const kn_pat *p, int32_t v, const char *op) {
  int32_t r = kn_pat_sole_reader(p, v);
  return r >= 0 && kn_pat_is(&p->g->nodes[r], op) ? r : -1;
}

int32_t kn_pat_readers(const kn_pat *p, int32_t v, int32_t *out, int32_t max) {
  int32_t c = 0;
  if (v < 0 || v >= p->n || p->first[v] < 0) return 0;
  for (int32_t i = p->first[v]; i < p->g->n_nodes; i++) {
    const kn_node *n = &p->g->nodes[i];
    if (n->dead || !kn_pat_reads(n, v)) continue;
    if (c == max) return -1;
    out[c++] = i;
  }
  return c;
}

int32_t kn_pat_reads(const kn_node *n, int32_t v) {
  int32_t c = 0;
  for (int32_t k = 0; k < n->n_inputs; k++) c += n->inputs[k] == v;
  return c;
}

int32_t kn_pat_other(const kn_node *n, int32_t v) {
  if (n->n_inputs != 2 || kn_pat_reads(n, v) != 1) return -1;
  return n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
}

bool kn_pat_const(const kn_graph *g, int32_t v, kn_tensor *view) {
  if (v < 0 || v >= g->n_values) return false;
  const kn_value *val = &g->values[v];
  if (val->constant) {
    *view = kn_tensor_view(val->constant);
    return true;
  }
  int32_t i = kn_pat_producer(g, v, "Constant");
  if (i < 0) return false;
  const kn_node *n = &g->nodes[i];
  memset(view, 0, sizeof *view);
  const kn_attr *a;
  if ((a = kn_node_attr(n, "value")) && a->type == KN_ATTR_TENSOR) {
    *view = kn_tensor_view(&a->t);
    return true;
  }
  if ((a = kn_node_attr(n, "value_float")) && a->type == KN_ATTR_FLOAT) {
    view->dtype = KN_DTYPE_F32;
    view->data = (void *)&a->f;
    view->nbytes = sizeof a->f;
    return true;
  }
  if ((a = kn_node_attr(n, "value_int")) && a->type == KN_ATTR_INT) {
    view->dtype = KN_DTYPE_I64;
    view->data = (void *)&a->i;
    view->nbytes = sizeof a->i;
    return true;
  }
  if ((a = kn_node_attr(n, "value_ints")) && a->type == KN_ATTR_INTS) {
    view->dtype = KN_DTYPE_I64;
    view->rank = 1;
    view->dims[0] = a->n;
    view->data = a->ints;
    view->nbytes = (size_t)a->n * sizeof *a->ints;
    return true;
  }
  if ((a = kn_node_attr(n, "value_floats")) && a->type == KN_ATTR_FLOATS) {
    view->dtype = KN_DTYPE_F32;
    view->rank = 1;
    view->dims[0] = a->n;
    view->data = a->floats;
    view->nbytes = (size_t)a->n * sizeof *a->floats;
    return true;
  }
  return false;
}

bool kn_pat_scalar(const kn_graph *g, int32_t v, int32_t max_rank, double *out) {
  kn_tensor t;
  if (!kn_pat_const(g, v, &t) || t.rank > max_rank || kn_tensor_numel(&t) != 1 || !t.data)
    return false;
  if (!kn_dtype_is_float(t.dtype) && !kn_dtype_is_int(t.dtype)) return false;
  *out = kn_load_f64(t.data, t.dtype, 0);
  return true;
}

bool kn_pat_near(double a, double b) {
  return fabs(a - b) <= 1e-6 * fabs(b);
}

int32_t kn_pat_rank(const kn_graph *g, int32_t v) {
  const kn_type *t = &g->values[v].type;
  return t->kind == KN_KIND_TENSOR ? t->rank : -1;
}

kn_dtype kn_pat_dtype(const kn_graph *g, int32_t v) {
  const kn_type *t = &g->values[v].type;
  return t->kind == KN_KIND_TENSOR ? t->dtype : 0;
}

bool kn_pat_bn_inference(const kn_node *n, double *eps) {
  if (n->n_inputs != 5) return false;
  for (int32_t o = 1; o < n->n_outputs; o++)
    if (n->outputs[o] >= 0) return false;
  const kn_attr *a = kn_node_attr(n, "training_mode");
  if (a && a->i != 0) return false;
  a = kn_node_attr(n, "spatial");
  if (n->opset < 9 && a && a->i == 0) return false;
  a = kn_node_attr(n, "epsilon");
  *eps = a ? (double)a->f : (double)1e-5f;
  return true;
}

double kn_pat_bn_scale(const float *const p[4], int64_t i, double eps, double *shift) {
  double k = (double)p[0][i] / sqrt((double)p[3][i] + eps);
  *shift = (double)p[1][i] - (double)p[2][i] * k;
  return k;
}

int32_t kn_pat_replace(kn_pat *p, const int32_t *nodes, int32_t n, int32_t name_from,
                       const char *op, const char *domain, int32_t n_in, const int32_t *in,
                       int32_t out, kn_error *err) {
  char *name = kn_strdup(p->g->nodes[name_from].name);
  int32_t idx = name ? kn_graph_new_node(p->g, op, domain, name, n_in, in, 1, &out) : -1;
  free(name);
  if (idx < 0) {
    kn_fail(err, KN_ERR_OOM, "out of memory adding a %s node", op);
    return -1;
  }
  /* the new node is named after name_from; it covers the others too */
  for (int32_t i = 0; i < n; i++)
    if (nodes[i] != name_from && !kn_node_add_covers(&p->g->nodes[idx], &p->g->nodes[nodes[i]])) {
      kn_fail(err, KN_ERR_OOM, "out of memory adding a %s node", op);
      return -1;
    }
  for (int32_t i = 0; i < n; i++) p->g->nodes[nodes[i]].dead = true;
  if (kn_pat_refresh(p, err)) return -1;
  return idx;
}

bool kn_pat_pad_pads(const kn_graph *g, const kn_node *n, int64_t pads[8]) {
  if (n->opset < 11) {
    const kn_attr *a = kn_node_attr(n, "pads");
    if (!a || a->n != 8) return false;
    memcpy(pads, a->ints, 8 * sizeof *pads);
    return true;
  }
  kn_tensor t;
  if (n->n_inputs < 2 || (n->n_inputs > 3 && n->inputs[3] >= 0) ||
      !kn_pat_const(g, n->inputs[1], &t) || t.dtype != KN_DTYPE_I64 ||
      kn_tensor_numel(&t) != 8)
    return false;
  memcpy(pads, t.data, 8 * sizeof *pads);
  return true;
}
