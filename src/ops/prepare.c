/* Op resolution and static shape/type inference over a model. */
#include "op.h"


static kn_status resolve_graph(const kn_ir_model *m, kn_graph *g, kn_error *err);

static kn_status resolve_node(const kn_ir_model *m, kn_node *n, kn_error *err) {
  const char *label = m->label ? m->label : "model";
  bool deflt = !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
  /* kiln's own fused ops (made by the optimizer) need no opset import */
  int64_t version = strcmp(n->domain, KN_DOMAIN) == 0 ? 1 : kn_ir_model_opset(m, n->domain);
  if (version <= 0)
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: node '%s' (%s) uses domain '%s', which the model does not "
                   "import (opset_import)",
                   label, n->name, n->op_type, n->domain);
  if (deflt && version > KN_MAX_OPSET)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: the model uses default-domain opset %lld; kiln supports "
                   "opsets 1 to %d",
                   label, (long long)version, KN_MAX_OPSET);
  const kn_op_def *op = kn_op_find(n->domain, n->op_type);
  if (!op)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: node '%s': op '%s'%s%s%s is not supported by kiln", label,
                   n->name, n->op_type, deflt ? "" : " (domain '",
                   deflt ? "" : n->domain, deflt ? "" : "')");
  if (version < op->since)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: node '%s': op '%s' at opset %lld is not supported (kiln "
                   "implements it from opset %d)",
                   label, n->name, n->op_type, (long long)version, op->since);
  int32_t nin = n->n_inputs;
  while (nin > 0 && n->inputs[nin - 1] < 0) nin--;
  int32_t nout = n->n_outputs;
  if (nin < op->min_inputs || (op->max_inputs >= 0 && nin > op->max_inputs))
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: node '%s' (%s): has %d inputs, expected %d to %d", label,
                   n->name, n->op_type, nin, op->min_inputs,
                   op->max_inputs < 0 ? 32767 : op->max_inputs);
  if (nout < op->min_outputs || (op->max_outputs >= 0 && nout > op->max_outputs))
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: node '%s' (%s): has %d outputs, expected %d to %d", label,
                   n->name, n->op_type, nout, op->min_outputs,
                   op->max_outputs < 0 ? 32767 : op->max_outputs);
  for (int32_t k = 0; k < op->min_inputs && k < n->n_inputs; k++)
    if (n->inputs[k] < 0 && op->max_inputs >= 0)
      return kn_fail(err, KN_ERR_MISSING,
                     "%s: node '%s' (%s): required input %d is empty", label, n->name,
                     n->op_type, k);
  n->op = op;
  n->opset = (int32_t)version;
  for (int32_t a = 0; a < n->n_attrs; a++) {
    kn_attr *at = &n->attrs[a];
    if (at->type == KN_ATTR_GRAPH && at->g) {
      kn_status st = resolve_graph(m, at->g, err);
      if (st) return st;
    }
    if (at->type == KN_ATTR_GRAPHS)
      for (int32_t i = 0; i < at->n; i++) {
        kn_status st = resolve_graph(m, at->graphs[i], err);
        if (st) return st;
      }
  }
  return KN_OK;
}

static kn_status resolve_graph(const kn_ir_model *m, kn_graph *g, kn_error *err) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_status st = resolve_node(m, &g->nodes[i], err);
    if (st) return st;
  }
  return KN_OK;
}

static void slot_from_value(const kn_value *v, kn_slot *s) {
  memset(s, 0, sizeof *s);
  s->kind = v->type.kind;
  if (v->constant) {
    s->kind = KN_KIND_TENSOR;
    s->t = kn_tensor_view(v->constant);
    return;
  }
  if (s->kind == KN_KIND_SEQUENCE) {
    s->seq.elem_dtype = v->type.dtype;
    return;
  }
  s->t.dtype = v->type.dtype;
  s->t.rank = v->type.rank;
  memcpy(s->t.dims, v->type.dims, sizeof s->t.dims);
}

static void value_from_slot(kn_value *v, const kn_slot *s) {
  if (s->kind == KN_KIND_NONE) return; /* nothing learnt */
  kn_type *t = &v->type;
  t->kind = s->kind;
  if (s->kind == KN_KIND_SEQUENCE) {
    if (s->seq.elem_dtype) t->dtype = s->seq.elem_dtype;
    return;
  }
  if (s->t.dtype) t->dtype = s->t.dtype;
  if (s->t.rank >= 0) {
    int64_t old[KN_MAX_RANK];
    bool had = t->rank == s->t.rank;
    memcpy(old, t->dims, sizeof old);
    t->rank = s->t.rank;
    for (int32_t d = 0; d < t->rank; d++)
      t->dims[d] = s->t.dims[d] >= 0 ? s->t.dims[d] : (had ? old[d] : -1);
  }
}

/* One node's static inference: input slots built from value types
 * (`vals`, indexed like the graph's values), output slots filled by the
 * op's infer.  Shared by shape inference, the FLOP estimate and the step
 * costs. */
typedef struct static_node {
  kn_slot *in, *out;
  kn_slot **pin, **pout;
  kn_op_ctx ctx;
} static_node;

static void static_node_close(static_node *sn) {
  for (int32_t o = 0; sn->out && o < sn->ctx.n_out; o++) kn_slot_release(&sn->out[o]);
  free(sn->in);
  free(sn->pin);
  free(sn->out);
  free(sn->pout);
  memset(sn, 0, sizeof *sn);
}

static kn_status static_node_infer(const kn_ir_model *m, const kn_node *n, const kn_value *vals,
                                   kn_error *err, static_node *sn) {
  memset(sn, 0, sizeof *sn);
  sn->in = kn_calloc((size_t)n->n_inputs + 1, sizeof *sn->in);
  sn->pin = kn_calloc((size_t)n->n_inputs + 1, sizeof *sn->pin);
  sn->out = kn_calloc((size_t)n->n_outputs + 1, sizeof *sn->out);
  sn->pout = kn_calloc((size_t)n->n_outputs + 1, sizeof *sn->pout);
  sn->ctx = (kn_op_ctx){.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = sn->pin,
                        .n_out = n->n_outputs, .out = sn->pout, .static_infer = true,
                        .err = err, .label = m->label};
  if (!sn->in || !sn->pin || !sn->out || !sn->pout)
    return kn_fail(err, KN_ERR_OOM, "out of memory during shape inference");
  for (int32_t k = 0; k < n->n_inputs; k++) {
    if (n->inputs[k] < 0) continue;
    slot_from_value(&vals[n->inputs[k]], &sn->in[k]);
    sn->pin[k] = &sn->in[k];
  }
  for (int32_t o = 0; o < n->n_outputs; o++) {
    sn->out[o].t.rank = -1;
    sn->pout[o] = &sn->out[o];
  }
  if (!n->op) return kn_fail(err, KN_ERR_INTERNAL, "node '%s' is not resolved", n->name);
  return n->op->infer(&sn->ctx);
}

/* FLOPs of an inferred node: the op's count, else one per output element. */
static double static_node_flops(const static_node *sn) {
  const kn_node *n = sn->ctx.node;
  if (n->op->flops) return n->op->flops(&sn->ctx);
  double f = 0;
  for (int32_t o = 0; o < n->n_outputs; o++)
    if (sn->out[o].kind == KN_KIND_TENSOR && kn_shape_known(&sn->out[o].t))
      f += (double)kn_tensor_numel(&sn->out[o].t);
  return f;
}

kn_status kn_ops_infer_graph(const kn_ir_model *m, kn_graph *g, kn_error *err) {
  kn_status st = KN_OK;
  /* subgraph outer values take their parent's (now inferred) types */
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].outer >= 0 && g->parent)
      g->values[v].type = g->parent->values[g->values[v].outer].type;
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    kn_node *n = &g->nodes[i];
    for (int32_t a = 0; a < n->n_attrs && !st; a++) {
      kn_attr *at = &n->attrs[a];
      if (at->type == KN_ATTR_GRAPH && at->g) st = kn_ops_infer_graph(m, at->g, err);
      for (int32_t k = 0; at->type == KN_ATTR_GRAPHS && k < at->n && !st; k++)
        st = kn_ops_infer_graph(m, at->graphs[k], err);
    }
    if (st) break;
    static_node sn;
    st = static_node_infer(m, n, g->values, err, &sn);
    for (int32_t o = 0; o < n->n_outputs && !st; o++) {
      /* a shape known at load that no run could allocate is refused now */
      const kn_tensor *t = &sn.out[o].t;
      if (sn.out[o].kind == KN_KIND_TENSOR && kn_shape_known(t) && kn_dtype_is_valid(t->dtype)) {
        int64_t cnt = kn_tensor_numel(t);
        if (cnt < 0 || (uint64_t)cnt > KN_MAX_TENSOR_BYTES / kn_dtype_size(t->dtype)) {
          char sb[128];
          st = kn_op_fail(&sn.ctx, KN_ERR_LIMIT,
                          "output %d would be a %s tensor of shape %s, above kiln's %zu "
                          "GiB per-tensor limit",
                          o, kn_dtype_name(t->dtype),
                          kn_shape_str(t->rank, t->dims, sb, sizeof sb),
                          KN_MAX_TENSOR_BYTES >> 30);
          break;
        }
      }
      if (n->outputs[o] >= 0) value_from_slot(&g->values[n->outputs[o]], &sn.out[o]);
    }
    static_node_close(&sn);
  }
  return st;
}

kn_status kn_ops_prepare(kn_ir_model *m, kn_error *err) {
  kn_status st = resolve_graph(m, m->graph, err);
  if (st) return st;
  return kn_ops_infer_graph(m, m->graph, err);
}

kn_status kn_ops_infer_values(const kn_ir_model *m, kn_value *vals, kn_error *err) {
  const kn_graph *g = m->graph;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    kn_error scratch;
    static_node sn;
    kn_status ist = static_node_infer(m, n, vals, &scratch, &sn);
    if (!ist)
      for (int32_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0) value_from_slot(&vals[n->outputs[o]], &sn.out[o]);
    static_node_close(&sn);
    if (ist == KN_ERR_OOM) return kn_fail(err, KN_ERR_OOM, "out of memory inferring shapes");
  }
  return KN_OK;
}

/* FLOPs estimate: a private inference pass over local types so that the
 * model is not changed. */
kn_status kn_ops_estimate_flops(const kn_ir_model *m, int64_t dyn_dim, double *flops,
                                kn_error *err) {
  const kn_graph *g = m->graph;
  *flops = 0;
  kn_value *vals = kn_calloc((size_t)g->n_values + 1, sizeof *vals);
  if (!vals) return kn_fail(err, KN_ERR_OOM, "out of memory");
  for (int32_t v = 0; v < g->n_values; v++) {
    vals[v].type = g->values[v].type;
    vals[v].constant = g->values[v].constant;
    if (g->values[v].is_input && !g->values[v].constant)
      for (int32_t d = 0; d < vals[v].type.rank; d++)
        if (vals[v].type.dims[d] < 0) vals[v].type.dims[d] = dyn_dim;
  }
  kn_status st = KN_OK;
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    const kn_node *n = &g->nodes[i];
    kn_error scratch; /* a node that cannot be inferred counts nothing */
    static_node sn;
    kn_status ist = static_node_infer(m, n, vals, &scratch, &sn);
    if (ist == KN_ERR_OOM) st = kn_fail(err, KN_ERR_OOM, "out of memory");
    if (!ist) {
      for (int32_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0) value_from_slot(&vals[n->outputs[o]], &sn.out[o]);
      *flops += static_node_flops(&sn);
    }
    static_node_close(&sn);
  }
  free(vals);
  return st;
}

static uint64_t type_bytes(const kn_type *t) {
  if (t->kind != KN_KIND_TENSOR || t->rank < 0 || !kn_dtype_is_valid(t->dtype)) return 0;
  int64_t n = kn_shape_numel(t->rank, t->dims);
  return n < 0 ? 0 : (uint64_t)n * kn_dtype_size(t->dtype);
}

void kn_ops_node_cost(const kn_ir_model *m, int32_t i, double *flops, uint64_t *bytes_read,
                      uint64_t *bytes_written) {
  const kn_graph *g = m->graph;
  const kn_node *n = &g->nodes[i];
  *flops = 0;
  *bytes_read = *bytes_written = 0;
  for (int32_t k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0) *bytes_read += type_bytes(&g->values[n->inputs[k]].type);
  for (int32_t o = 0; o < n->n_outputs; o++)
    if (n->outputs[o] >= 0) *bytes_written += type_bytes(&g->values[n->outputs[o]].type);
  kn_error scratch;
  static_node sn;
  if (static_node_infer(m, n, g->values, &scratch, &sn) == KN_OK) *flops = static_node_flops(&sn);
  static_node_close(&sn);
}
