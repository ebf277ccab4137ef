/* ONNX model -> Q/DQ ONNX model ("QDQ format", as ONNX Runtime's
 * quantize_static writes it): the rewriting behind `kiln quantize`.
 *
 * The model is unpacked with protobuf-c, its top-level node and initializer
 * lists are replaced by new ones for the pack, and everything else (other
 * nodes, initializers, value_info, opsets, metadata, functions, and fields
 * this subset of the schema does not know, which protobuf-c keeps as
 * unknown fields and packs again) is written back as it was read.
 *
 * Ownership: the unpacked message keeps what protobuf-c allocated.  What is
 * added (nodes, tensors, names, the new lists, shallow copies of the nodes
 * whose inputs change) is recorded in qdq.owned and freed here; the
 * graph's original lists are put back before free_unpacked. */
#include "onnx_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <unistd.h>

#define KN_QDQ_MIN_OPSET 10     /* QuantizeLinear / DequantizeLinear */
#define KN_QDQ_AXIS_OPSET 13    /* DequantizeLinear's axis (per channel) */

/* ---- names ------------------------------------------------------------------
 * One open-addressing table holds every name of the model (values and node
 * names, subgraphs included) so that added names collide with none, and,
 * for the top-level graph, what the rewrite needs to know of each value. */
typedef struct name_entry {
  const char *key;     /* NULL: free slot; borrowed from the model or qdq.owned */
  int32_t init;        /* index in the top-level initializer list, -1 */
  int32_t producer;    /* top-level node making it, -1 */
  int32_t uses;        /* node inputs naming it (any graph) + graph outputs */
  int32_t redirected;  /* of those, now reading its DequantizeLinear */
  bool sparse;         /* a sparse initializer */
  const char *act_dq;  /* its activation Q/DQ pair's output, once made */
  const char *w_dq;    /* its weight DequantizeLinear's output, once made */
  int32_t w_axis;      /* that DequantizeLinear's axis (-1: per tensor) */
} name_entry;

typedef struct qdq {
  const char *label;
  const kn_calibration *cal;
  kn_note_fn note;
  void *note_arg;
  kn_quantize_report *rep;
  kn_error *err;
  bool per_channel;
  name_entry *tab;
  size_t cap, used;
  void **owned;
  int32_t n_owned, cap_owned;
  KnOnnx__NodeProto **nodes; /* the new top-level node list */
  int32_t n_nodes, cap_nodes;
  KnOnnx__TensorProto **inits; /* initializers added */
  int32_t n_inits, cap_inits;
} qdq;

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static name_entry *tab_find(const qdq *q, const char *key) {
  if (!q->cap) return NULL;
  for (size_t i = name_hash(key) & (q->cap - 1);; i = (i + 1) & (q->cap - 1)) {
    if (!q->tab[i].key) return NULL;
    if (strcmp(q->tab[i].key, key) == 0) return &q->tab[i];
  }
}

static bool tab_grow(qdq *q) {
  size_t cap = q->cap ? q->cap * 2 : 16; /* small: tests grow it too */
  name_entry *t = kn_calloc(cap, sizeof *t);
  if (!t) return false;
  for (size_t i = 0; i < q->cap; i++) {
    if (!q->tab[i].key) continue;
    size_t j = name_hash(q->tab[i].key) & (cap - 1);
    while (t[j].key) j = (j + 1) & (cap - 1);
    t[j] = q->tab[i];
  }
  free(q->tab);
  q->tab = t;
  q->cap = cap;
  return true;
}

/* The entry for key, added when missing; NULL when out of memory. */
static name_entry *tab_get(qdq *q, const char *key) {
  name_entry *e = tab_find(q, key);
  if (e) return e;
  if ((q->used + 1) * 2 > q->cap && !tab_grow(q)) return NULL;
  size_t i = name_hash(key) & (q->cap - 1);
  while (q->tab[i].key) i = (i + 1) & (q->cap - 1);
  e = &q->tab[i];
  *e = (name_entry){.key = key, .init = -1, .producer = -1, .w_axis = -1};
  q->used++;
  return e;
}

static kn_status oom(qdq *q) {
  return kn_fail(q->err, KN_ERR_OOM, "%s: out of memory", q->label);
}

/* Records p as q's (freed at the end); p, or NULL after freeing it. */
static void *own(qdq *q, void *p) {
  if (!p) return NULL;
  if (!KN_GROW(q->owned, q->cap_owned, (int64_t)q->n_owned + 1)) {
    free(p);
    return NULL;
  }
  q->owned[q->n_owned++] = p;
  return p;
}

static void *own_calloc(qdq *q, size_t n, size_t size) {
  return own(q, kn_calloc(n ? n : 1, size));
}

/* base + suffix, or base + suffix + "_K" for the first K >= 1 that no name
 * of the model has; registered in the table.  NULL when out of memory. */
static const char *unique_name(qdq *q, const char *base, const char *suffix) {
  size_t len = strlen(base) + strlen(suffix) + 24;
  char *s = own(q, kn_malloc(len));
  if (!s) return NULL;
  snprintf(s, len, "%s%s", base, suffix);
  for (long k = 1; tab_find(q, s); k++) snprintf(s, len, "%s%s_%ld", base, suffix, k);
  return tab_get(q, s) ? s : NULL;
}

static void note(qdq *q, const char *fmt, ...) KN_PRINTF(2, 3);
static void note(qdq *q, const char *fmt, ...) {
  if (!q->note) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  q->note(line, q->note_arg);
}

/* ---- the model as read ------------------------------------------------------ */

static bool is_default_domain(const char *d) {
  return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

static kn_status check_tensor_local(qdq *q, const KnOnnx__TensorProto *t, const char *where) {
  if (!t) return KN_OK;
  bool external = (t->has_data_location &&
                   t->data_location == KN_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
                  t->n_external_data;
  if (!external) return KN_OK;
  return kn_fail(q->err, KN_ERR_UNSUPPORTED,
                 "%s: %s '%s' keeps its data in an external file; kiln quantize reads "
                 "only self-contained models (save it with onnx.save(model, path, "
                 "save_as_external_data=False) first)",
                 q->label, where, t->name ? t->name : "");
}

static kn_status scan_graph(qdq *q, const KnOnnx__GraphProto *g, int depth);

/* Names, uses and external data of a node list (a graph's or a function's). */
static kn_status scan_nodes(qdq *q, KnOnnx__NodeProto *const *nodes, size_t n, int depth) {
  for (size_t i = 0; i < n; i++) {
    const KnOnnx__NodeProto *np = nodes[i];
    if (np->name && *np->name && !tab_get(q, np->name)) return oom(q);
    for (size_t k = 0; k < np->n_input; k++) {
      if (!np->input[k] || !*np->input[k]) continue;
      name_entry *e = tab_get(q, np->input[k]);
      if (!e) return oom(q);
      e->uses++;
    }
    for (size_t k = 0; k < np->n_output; k++) {
      if (!np->output[k] || !*np->output[k]) continue;
      name_entry *e = tab_get(q, np->output[k]);
      if (!e) return oom(q);
      if (depth == 0 && e->producer < 0) e->producer = (int32_t)i;
    }
    for (size_t a = 0; a < np->n_attribute; a++) {
      const KnOnnx__AttributeProto *ap = np->attribute[a];
      kn_status st = check_tensor_local(q, ap->t, "a tensor attribute");
      for (size_t k = 0; !st && k < ap->n_tensors; k++)
        st = check_tensor_local(q, ap->tensors[k], "a tensor attribute");
      if (!st && ap->sparse_tensor) {
        st = check_tensor_local(q, ap->sparse_tensor->values, "a sparse tensor attribute");
        if (!st) st = check_tensor_local(q, ap->sparse_tensor->indices, "a sparse tensor attribute");
      }
      for (size_t k = 0; !st && k < ap->n_sparse_tensors; k++) {
        st = check_tensor_local(q, ap->sparse_tensors[k]->values, "a sparse tensor attribute");
        if (!st)
          st = check_tensor_local(q, ap->sparse_tensors[k]->indices, "a sparse tensor attribute");
      }
      if (!st && ap->g) st = scan_graph(q, ap->g, depth + 1);
      for (size_t k = 0; !st && k < ap->n_graphs; k++) st = scan_graph(q, ap->graphs[k], depth + 1);
      if (st) return st;
    }
  }
  return KN_OK;
}

static kn_status scan_values(qdq *q, KnOnnx__ValueInfoProto *const *v, size_t n, bool output) {
  for (size_t i = 0; i < n; i++) {
    if (!v[i]->name || !*v[i]->name) continue;
    name_entry *e = tab_get(q, v[i]->name);
    if (!e) return oom(q);
    if (output) e->uses++;
  }
  return KN_OK;
}

static kn_status scan_graph(qdq *q, const KnOnnx__GraphProto *g, int depth) {
  if (g->name && *g->name && !tab_get(q, g->name)) return oom(q);
  for (size_t i = 0; i < g->n_initializer; i++) {
    const KnOnnx__TensorProto *t = g->initializer[i];
    kn_status st = check_tensor_local(q, t, "initializer");
    if (st) return st;
    if (!t->name || !*t->name) continue;
    name_entry *e = tab_get(q, t->name);
    if (!e) return oom(q);
    if (depth == 0 && e->init < 0) e->init = (int32_t)i;
  }
  for (size_t i = 0; i < g->n_sparse_initializer; i++) {
    const KnOnnx__SparseTensorProto *sp = g->sparse_initializer[i];
    kn_status st = check_tensor_local(q, sp->values, "sparse initializer");
    if (!st) st = check_tensor_local(q, sp->indices, "sparse initializer");
    if (st) return st;
    if (!sp->values || !sp->values->name || !*sp->values->name) continue;
    name_entry *e = tab_get(q, sp->values->name);
    if (!e) return oom(q);
    if (depth == 0) e->sparse = true;
  }
  kn_status st = scan_values(q, g->input, g->n_input, false);
  if (!st) st = scan_values(q, g->output, g->n_output, true);
  if (!st) st = scan_values(q, g->value_info, g->n_value_info, false);
  if (!st) st = scan_nodes(q, g->node, g->n_node, depth);
  return st;
}

/* ---- what is added ---------------------------------------------------------- */

static bool add_node_to_list(qdq *q, KnOnnx__NodeProto *n) {
  if (!KN_GROW(q->nodes, q->cap_nodes, (int64_t)q->n_nodes + 1)) return false;
  q->nodes[q->n_nodes++] = n;
  return true;
}

/* A tensor initializer of `dtype` holding nbytes of data (copied), added to
 * the graph.  NULL when out of memory. */
static KnOnnx__TensorProto *add_init(qdq *q, const char *name, int32_t dtype, int32_t rank,
                                     const int64_t *dims, const void *data, size_t nbytes) {
  KnOnnx__TensorProto *t = own_calloc(q, 1, sizeof *t);
  if (!t) return NULL;
  *t = (KnOnnx__TensorProto)KN_ONNX__TENSOR_PROTO__INIT;
  t->name = (char *)name;
  t->has_data_type = 1;
  t->data_type = dtype;
  t->n_dims = (size_t)rank;
  if (rank) {
    t->dims = own_calloc(q, (size_t)rank, sizeof *t->dims);
    if (!t->dims) return NULL;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  }
  t->has_raw_data = 1;
  t->raw_data.len = nbytes;
  t->raw_data.data = own_calloc(q, nbytes, 1);
  if (!t->raw_data.data) return NULL;
  if (nbytes) memcpy(t->raw_data.data, data, nbytes);
  if (!KN_GROW(q->inits, q->cap_inits, (int64_t)q->n_inits + 1)) return NULL;
  q->inits[q->n_inits++] = t;
  return t;
}

/* A default-domain node op(inputs) -> output named `name`, with an INT
 * attribute `axis` when axis >= 0, appended to the new node list. */
static bool add_node(qdq *q, const char *op, const char *name, const char *const *inputs,
                     size_t n_in, const char *output, int64_t axis) {
  KnOnnx__NodeProto *n = own_calloc(q, 1, sizeof *n);
  char **in = own_calloc(q, n_in, sizeof *in);
  char **out = own_calloc(q, 1, sizeof *out);
  if (!n || !in || !out) return false;
  *n = (KnOnnx__NodeProto)KN_ONNX__NODE_PROTO__INIT;
  for (size_t i = 0; i < n_in; i++) in[i] = (char *)inputs[i];
  out[0] = (char *)output;
  n->n_input = n_in;
  n->input = in;
  n->n_output = 1;
  n->output = out;
  n->name = (char *)name;
  n->op_type = (char *)op;
  n->domain = (char *)"";
  if (axis >= 0) {
    KnOnnx__AttributeProto *a = own_calloc(q, 1, sizeof *a);
    KnOnnx__AttributeProto **attrs = own_calloc(q, 1, sizeof *attrs);
    if (!a || !attrs) return false;
    *a = (KnOnnx__AttributeProto)KN_ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)"axis";
    a->has_type = 1;
    a->type = KN_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = axis;
    attrs[0] = a;
    n->n_attribute = 1;
    n->attribute = attrs;
  }
  return add_node_to_list(q, n);
}

/* QuantizeLinear -> DequantizeLinear on activation `key` (u8, per tensor,
 * from its calibration range); the DequantizeLinear's output name.
 * unique_name may grow the table, so entries are looked up by key, never
 * held across it. */
static const char *activation_pair(qdq *q, const char *key, const kn_calib_range *r) {
  const name_entry *x = tab_find(q, key);
  if (x->act_dq) return x->act_dq;
  float scale;
  int32_t zero;
  kn_calib_u8_params(r, &scale, &zero);
  uint8_t z = (uint8_t)zero;
  const char *s = unique_name(q, key, "_scale");
  const char *zp = unique_name(q, key, "_zero_point");
  const char *qv = unique_name(q, key, "_quantized");
  const char *dq = unique_name(q, key, "_DequantizeLinear_Output");
  const char *qn = unique_name(q, key, "_QuantizeLinear");
  const char *dqn = unique_name(q, key, "_DequantizeLinear");
  if (!s || !zp || !qv || !dq || !qn || !dqn) return NULL;
  if (!add_init(q, s, KN_DTYPE_F32, 0, NULL, &scale, sizeof scale) ||
      !add_init(q, zp, KN_DTYPE_U8, 0, NULL, &z, 1))
    return NULL;
  const char *qin[3] = {key, s, zp}, *dqin[3] = {qv, s, zp};
  if (!add_node(q, "QuantizeLinear", qn, qin, 3, qv, -1) ||
      !add_node(q, "DequantizeLinear", dqn, dqin, 3, dq, -1))
    return NULL;
  q->rep->activation_pairs++;
  tab_find(q, key)->act_dq = dq;
  return dq;
}

/* The int8 weight of initializer `key` (float [dims], channels along
 * `axis`, -1 per tensor) and its DequantizeLinear; the output name in
 * *out.  Weights that cannot be quantized leave *out NULL with a note
 * (KN_OK).  Entries are looked up by key, as in activation_pair. */
static kn_status weight_dq(qdq *q, const KnOnnx__GraphProto *g, const char *key, int32_t axis,
                           const char *node_what, const char **out) {
  *out = NULL;
  const name_entry *w = tab_find(q, key);
  if (w->w_dq && w->w_axis == axis) {
    *out = w->w_dq;
    return KN_OK;
  }
  const KnOnnx__TensorProto *tp = g->initializer[w->init];
  char what[640];
  snprintf(what, sizeof what, "%s: initializer '%s'", q->label, key);
  kn_tensor t = {0};
  kn_status st = kn_onnx_tensor_from_proto(tp, NULL, what, &t, q->err);
  if (st) return st;
  int64_t n = kn_tensor_numel(&t);
  if (axis >= t.rank) axis = -1;
  int64_t ch = 1, inner = 1;
  if (axis >= 0) {
    ch = t.dims[axis];
    for (int32_t d = axis + 1; d < t.rank; d++) inner *= t.dims[d];
  }
  const float *x = t.data;
  float *scale = own_calloc(q, (size_t)ch, sizeof *scale);
  int8_t *zeros = own_calloc(q, (size_t)ch, 1);
  int8_t *qw = own_calloc(q, (size_t)n, 1);
  if (!scale || !zeros || !qw) {
    kn_tensor_release(&t);
    return oom(q);
  }
  bool finite = true;
  for (int64_t i = 0; i < n; i++) {
    int64_t c = axis >= 0 ? i / inner % ch : 0;
    float a = fabsf(x[i]);
    if (!isfinite(a)) finite = false;
    else if (a > scale[c]) scale[c] = a; /* max |w| for now */
  }
  if (!finite || n == 0) {
    kn_tensor_release(&t);
    note(q, "%s: left in fp32: its weight '%s' %s", node_what, key,
         n == 0 ? "is empty" : "holds NaN or infinite values");
    return KN_OK;
  }
  for (int64_t c = 0; c < ch; c++) scale[c] = scale[c] > 0 ? scale[c] / 127.0f : 1.0f;
  for (int64_t i = 0; i < n; i++) {
    float v = nearbyintf(x[i] / scale[axis >= 0 ? i / inner % ch : 0]); /* half to even */
    qw[i] = (int8_t)(v < -127.0f ? -127 : v > 127.0f ? 127 : (int)v);
  }
  const char *qn = unique_name(q, key, "_quantized");
  const char *sn = unique_name(q, key, "_scale");
  const char *zn = unique_name(q, key, "_zero_point");
  const char *dq = unique_name(q, key, "_DequantizeLinear_Output");
  const char *dqn = unique_name(q, key, "_DequantizeLinear");
  int32_t vec = axis >= 0 ? 1 : 0;
  if (!qn || !sn || !zn || !dq || !dqn ||
      !add_init(q, qn, KN_DTYPE_I8, t.rank, t.dims, qw, (size_t)n) ||
      !add_init(q, sn, KN_DTYPE_F32, vec, &ch, scale, (size_t)ch * sizeof *scale) ||
      !add_init(q, zn, KN_DTYPE_I8, vec, &ch, zeros, (size_t)ch)) {
    kn_tensor_release(&t);
    return oom(q);
  }
  kn_tensor_release(&t);
  const char *in[3] = {qn, sn, zn};
  if (!add_node(q, "DequantizeLinear", dqn, in, 3, dq, axis >= 0 ? axis : -1)) return oom(q);
  q->rep->weights_quantized++;
  name_entry *e = tab_find(q, key);
  e->w_dq = dq;
  e->w_axis = axis;
  *out = dq;
  return KN_OK;
}

static int64_t int_attr(const KnOnnx__NodeProto *np, const char *name, int64_t dflt) {
  for (size_t a = 0; a < np->n_attribute; a++) {
    const KnOnnx__AttributeProto *ap = np->attribute[a];
    if (ap->name && strcmp(ap->name, name) == 0 && ap->has_i) return ap->i;
  }
  return dflt;
}

/* Node i: appends it (and, when it is quantized, the Q/DQ nodes before it)
 * to the new node list. */
static kn_status rewrite_node(qdq *q, const KnOnnx__GraphProto *g, size_t i) {
  KnOnnx__NodeProto *np = g->node[i];
  const char *op = np->op_type ? np->op_type : "";
  bool conv = strcmp(op, "Conv") == 0, convt = strcmp(op, "ConvTranspose") == 0;
  bool gemm = strcmp(op, "Gemm") == 0, matmul = strcmp(op, "MatMul") == 0;
  name_entry *w = NULL;
  if ((conv || convt || gemm || matmul) && is_default_domain(np->domain) && np->n_input >= 2 &&
      np->input[1] && *np->input[1]) {
    w = tab_find(q, np->input[1]);
    if (w && w->init < 0 && !w->sparse) w = NULL; /* not an initializer: not a candidate */
  }
  if (!w) return add_node_to_list(q, np) ? KN_OK : oom(q);

  q->rep->candidates++;
  char what[640];
  snprintf(what, sizeof what, "node '%s' (%s)", np->name ? np->name : "", op);
  const KnOnnx__TensorProto *wt = w->init >= 0 ? g->initializer[w->init] : NULL;
  const char *xname = np->input[0] && *np->input[0] ? np->input[0] : NULL;
  name_entry *x = xname ? tab_find(q, xname) : NULL;
  kn_calib_range r;
  const char *why = NULL;
  char buf[640];
  int32_t rank = wt ? (int32_t)wt->n_dims : 0;
  if (w->sparse) why = "its weight is a sparse initializer";
  else if (!wt->has_data_type || wt->data_type != KN_DTYPE_F32) why = "its weight is not float32";
  else if ((conv || convt) && rank < 3) why = "its weight has fewer than 3 dims";
  else if (gemm && rank != 2) why = "its weight does not have 2 dims";
  else if (!x) why = "it has no data input";
  else if (x->init >= 0) why = "its data input is an initializer";
  else if (x->producer >= 0 && g->node[x->producer]->op_type &&
           strcmp(g->node[x->producer]->op_type, "DequantizeLinear") == 0)
    why = "its data input comes from a DequantizeLinear (already quantized)";
  else if (!kn_calibration_get(q->cal, xname, &r)) {
    snprintf(buf, sizeof buf, "its input '%s' has no calibration entry", xname);
    why = buf;
  }
  if (why) {
    note(q, "%s: left in fp32: %s", what, why);
    return add_node_to_list(q, np) ? KN_OK : oom(q);
  }

  /* the output channel axis */
  int32_t axis = 0;
  if (convt) axis = 1;
  else if (gemm) axis = int_attr(np, "transB", 0) ? 0 : 1;
  else if (matmul) axis = rank >= 2 ? rank - 1 : -1;
  if (!q->per_channel) axis = -1;

  const char *wdq = NULL;
  const char *wname = w->key;
  kn_status st = weight_dq(q, g, wname, axis, what, &wdq); /* w and x are stale after it */
  if (st) return st;
  if (!wdq) return add_node_to_list(q, np) ? KN_OK : oom(q);
  const char *xdq = activation_pair(q, xname, &r);
  if (!xdq) return oom(q);
  /* a shallow copy with the two inputs replaced: the original stays the
   * unpacked message's */
  KnOnnx__NodeProto *c = own_calloc(q, 1, sizeof *c);
  char **in = own_calloc(q, np->n_input, sizeof *in);
  if (!c || !in) return oom(q);
  *c = *np;
  memcpy(in, np->input, np->n_input * sizeof *in);
  in[0] = (char *)xdq;
  in[1] = (char *)wdq;
  c->input = in;
  tab_find(q, wname)->redirected++;
  q->rep->ops_quantized++;
  return add_node_to_list(q, c) ? KN_OK : oom(q);
}

kn_status kn_onnx_write_qdq(const void *buf, size_t size, const char *label,
                            const kn_calibration *cal, kn_note_fn note_fn, void *note_arg,
                            kn_quantize_report *report, void **out, size_t *out_size,
                            kn_error *err) {
  *out = NULL;
  *out_size = 0;
  memset(report, 0, sizeof *report);
  kn_status st = kn_onnx_check_nesting(buf, size, &kn_onnx__model_proto__descriptor, label, err);
  if (st) return st;
  KnOnnx__ModelProto *mp = kn_onnx__model_proto__unpack(NULL, size, buf);
  if (!mp)
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: not a valid ONNX model (the protobuf is truncated or corrupt)", label);
  qdq q = {.label = label, .cal = cal, .note = note_fn, .note_arg = note_arg, .rep = report,
           .err = err};
  KnOnnx__GraphProto *g = mp->graph;
  KnOnnx__NodeProto **old_nodes = g ? g->node : NULL;
  KnOnnx__TensorProto **old_inits = g ? g->initializer : NULL;
  size_t old_n_nodes = g ? g->n_node : 0, old_n_inits = g ? g->n_initializer : 0;
  KnOnnx__ValueInfoProto **old_inputs = g ? g->input : NULL;
  size_t old_n_inputs = g ? g->n_input : 0;
  KnOnnx__TensorProto **inits = NULL;
  KnOnnx__ValueInfoProto **inputs = NULL;
  if (!g) {
    st = kn_fail(err, KN_ERR_PARSE, "%s: the model has no graph", label);
    goto done;
  }
  int64_t opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++)
    if (is_default_domain(mp->opset_import[i]->domain) && mp->opset_import[i]->has_version)
      opset = mp->opset_import[i]->version;
  if (mp->n_opset_import == 0) opset = 1; /* IR version 1 */
  report->opset = opset;
  if (opset < KN_QDQ_MIN_OPSET) {
    st = kn_fail(err, KN_ERR_UNSUPPORTED,
                 "%s: the model imports default-domain opset %lld, which has no "
                 "QuantizeLinear; expected opset %d or later (convert it with "
                 "onnx.version_converter first)",
                 label, (long long)opset, KN_QDQ_MIN_OPSET);
    goto done;
  }
  q.per_channel = opset >= KN_QDQ_AXIS_OPSET;
  report->per_channel = q.per_channel;

  st = scan_graph(&q, g, 0);
  for (size_t f = 0; !st && f < mp->n_functions; f++) {
    const KnOnnx__FunctionProto *fp = mp->functions[f];
    for (size_t k = 0; k < fp->n_input && !st; k++)
      if (fp->input[k] && *fp->input[k] && !tab_get(&q, fp->input[k])) st = oom(&q);
    for (size_t k = 0; k < fp->n_output && !st; k++)
      if (fp->output[k] && *fp->output[k] && !tab_get(&q, fp->output[k])) st = oom(&q);
    if (!st) st = scan_nodes(&q, fp->node, fp->n_node, 1);
  }
  if (st) goto done;
  if (!q.per_channel)
    note(&q, "the model's opset is %lld: DequantizeLinear has no axis before opset %d, so "
             "weights get one scale per tensor (the opset is left as it is)",
         (long long)opset, KN_QDQ_AXIS_OPSET);

  for (size_t i = 0; i < g->n_node && !st; i++) st = rewrite_node(&q, g, i);
  if (st) goto done;
  if (report->candidates == 0) {
    st = kn_fail(err, KN_ERR_INVALID_ARG,
                 "%s: no Conv, ConvTranspose, Gemm or MatMul node takes its weight from an "
                 "initializer; expected at least one to quantize",
                 label);
    goto done;
  }
  if (report->ops_quantized == 0) {
    st = kn_fail(err, KN_ERR_MISSING,
                 "%s: none of its %d Conv, ConvTranspose, Gemm or MatMul nodes could be "
                 "quantized (the calibration has %d tensors; expected entries for their "
                 "inputs: is it this model's?)",
                 label, (int)report->candidates, (int)kn_calibration_count(cal));
    goto done;
  }

  /* the initializers: those still used, then the added ones */
  inits = kn_calloc(old_n_inits + (size_t)q.n_inits + 1, sizeof *inits);
  if (!inits) {
    st = oom(&q);
    goto done;
  }
  size_t n_inits = 0;
  for (size_t i = 0; i < old_n_inits; i++) {
    const char *nm = old_inits[i]->name;
    name_entry *e = nm && *nm ? tab_find(&q, nm) : NULL;
    if (e && e->init == (int32_t)i && e->redirected && e->redirected == e->uses) continue;
    inits[n_inits++] = old_inits[i];
  }
  for (int32_t i = 0; i < q.n_inits; i++) inits[n_inits++] = q.inits[i];
  /* a weight also listed as a graph input (a default that may be fed, as
   * older exporters wrote every initializer) leaves the inputs with it */
  inputs = kn_calloc(old_n_inputs + 1, sizeof *inputs);
  if (!inputs) {
    st = oom(&q);
    goto done;
  }
  size_t n_inputs = 0;
  int32_t n_dropped_inputs = 0;
  for (size_t i = 0; i < old_n_inputs; i++) {
    const char *nm = old_inputs[i]->name;
    name_entry *e = nm && *nm ? tab_find(&q, nm) : NULL;
    if (e && e->init >= 0 && e->redirected && e->redirected == e->uses) {
      n_dropped_inputs++;
      continue;
    }
    inputs[n_inputs++] = old_inputs[i];
  }
  if (n_dropped_inputs)
    note(&q, "%d quantized weight%s also listed as graph input%s (defaults that could be "
             "fed at run time); the Q/DQ model reads %s int8 copies and no longer lists "
             "%s as inputs",
         (int)n_dropped_inputs, n_dropped_inputs == 1 ? " was" : "s were",
         n_dropped_inputs == 1 ? "" : "s", n_dropped_inputs == 1 ? "its" : "their",
         n_dropped_inputs == 1 ? "it" : "them");
  g->node = q.nodes;
  g->n_node = (size_t)q.n_nodes;
  g->initializer = inits;
  g->n_initializer = n_inits;
  g->input = inputs;
  g->n_input = n_inputs;
  size_t n = kn_onnx__model_proto__get_packed_size(mp);
  if (n > (size_t)INT32_MAX) {
    st = kn_fail(err, KN_ERR_LIMIT,
                 "%s: the Q/DQ model would be %zu bytes; protobuf allows at most 2 GiB",
                 label, n);
  } else if (!(*out = kn_malloc(n))) {
    st = oom(&q);
  } else {
    *out_size = kn_onnx__model_proto__pack(mp, *out);
    KN_ASSERT(*out_size == n);
    report->bytes = n;
  }
done:
  if (g) {
    g->node = old_nodes;
    g->n_node = old_n_nodes;
    g->initializer = old_inits;
    g->n_initializer = old_n_inits;
    g->input = old_inputs;
    g->n_input = old_n_inputs;
  }
  kn_onnx__model_proto__free_unpacked(mp, NULL);
  free(inits);
  free(inputs);
  for (int32_t i = 0; i < q.n_owned; i++) free(q.owned[i]);
  free(q.owned);
  free(q.nodes);
  free(q.inits);
  free(q.tab);
  return st;
}

kn_status kn_quantize_onnx_file(const char *model_path, const kn_calibration *cal,
                                const char *out_path, kn_note_fn note_fn, void *note_arg,
                                kn_quantize_report *report, kn_error *err) {
  kn_quantize_report scratch;
  if (!report) report = &scratch;
  memset(report, 0, sizeof *report);
  if (!model_path || !cal || !out_path)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "kn_quantize_onnx_file: model_path, cal and out_path are required");
  void *buf = NULL, *qbuf = NULL;
  size_t size = 0, qsize = 0;
  kn_status st = kn_read_whole_file(model_path, &buf, &size, err);
  if (st) return st;
  if (size >= 8 && memcmp(buf, "KILNENG", 8) == 0) {
    free(buf);
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s is a kiln engine; expected the ONNX model (kiln quantize rewrites "
                   "ONNX models)",
                   model_path);
  }
  st = kn_onnx_write_qdq(buf, size, model_path, cal, note_fn, note_arg, report, &qbuf, &qsize,
                         err);
  free(buf);
  if (st) return st;
  size_t len = strlen(out_path) + 5;
  char *tmp = kn_malloc(len);
  if (!tmp) {
    free(qbuf);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", out_path);
  }
  snprintf(tmp, len, "%s.tmp", out_path);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
  } else {
    bool ok = fwrite(qbuf, 1, qsize, f) == qsize;
    ok &= fflush(f) == 0;
    int e = errno;
    ok &= fclose(f) == 0;
    if (!ok) {
      st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", tmp, strerror(e ? e : errno));
      unlink(tmp);
    } else if (rename(tmp, out_path) != 0) {
      st = kn_fail(err, KN_ERR_IO, "%s: cannot rename %s to it: %s", out_path, tmp,
                   strerror(errno));
      unlink(tmp);
    }
  }
  free(tmp);
  free(qbuf);
  return st;
}
