/* ModelProto -> kiln IR.  Everything protobuf ends here. */
#include "onnx_internal.h"

typedef struct import_ctx {
  const char *label;
  const char *base_dir;
  kn_error *err;
  int64_t node_counter;
} import_ctx;

static kn_status convert_graph(import_ctx *ic, const KnOnnx__GraphProto *gp,
                               kn_graph *parent, kn_graph **out);

static kn_status type_from_proto(import_ctx *ic, const KnOnnx__TypeProto *tp,
                                 const char *vname, kn_value *v) {
  kn_type *t = &v->type;
  memset(t, 0, sizeof *t);
  t->rank = -1;
  if (!tp) return KN_OK;
  if (tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
    t->optional = true;
    tp = tp->optional_type ? tp->optional_type->elem_type : NULL;
    if (!tp) return KN_OK;
  }
  const KnOnnx__TensorShapeProto *shape = NULL;
  int32_t elem = 0;
  if (tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type) {
    t->kind = KN_KIND_TENSOR;
    elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
    shape = tp->tensor_type->shape;
  } else if (tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
    t->kind = KN_KIND_SEQUENCE;
    const KnOnnx__TypeProto *et =
        tp->sequence_type ? tp->sequence_type->elem_type : NULL;
    if (et && et->value_case == KN_ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
        et->tensor_type) {
      elem = et->tensor_type->has_elem_type ? et->tensor_type->elem_type : 0;
      shape = et->tensor_type->shape;
    } else if (et && et->value_case != KN_ONNX__TYPE_PROTO__VALUE__NOT_SET) {
      return kn_fail(ic->err, KN_ERR_UNSUPPORTED,
                     "%s: value '%s': sequences of non-tensors are not supported",
                     ic->label, vname);
    }
  } else if (tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_MAP_TYPE ||
             tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE) {
    return kn_fail(ic->err, KN_ERR_UNSUPPORTED,
                   "%s: value '%s': %s values are not supported", ic->label, vname,
                   tp->value_case == KN_ONNX__TYPE_PROTO__VALUE_MAP_TYPE
                       ? "map"
                       : "sparse tensor");
  }
  if (elem && !kn_dtype_is_valid(elem))
    return kn_fail(ic->err, KN_ERR_UNSUPPORTED,
                   "%s: value '%s' has element type %d, which kiln does not support",
                   ic->label, vname, (int)elem);
  t->dtype = (kn_dtype)elem;
  if (shape) {
    if (shape->n_dim > KN_MAX_RANK)
      return kn_fail(ic->err, KN_ERR_LIMIT,
                     "%s: value '%s' has rank %zu, kiln allows at most %d", ic->label,
                     vname, shape->n_dim, KN_MAX_RANK);
    t->rank = (int32_t)shape->n_dim;
    for (size_t i = 0; i < shape->n_dim; i++) {
      const KnOnnx__TensorShapeProto__Dimension *d = shape->dim[i];
      t->dims[i] = -1;
      if (d && d->value_case == KN_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
          d->dim_value >= 0)
        t->dims[i] = d->dim_value;
      else if (d && d->value_case ==
                        KN_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               d->dim_param) {
        free(v->dim_params[i]);
        v->dim_params[i] = kn_strdup(d->dim_param);
      }
    }
  }
  return KN_OK;
}

static kn_status convert_attr(import_ctx *ic, kn_graph *g, const char *node_name,
                              const KnOnnx__AttributeProto *ap, kn_attr *a) {
  char what[512];
  snprintf(what, sizeof what, "%s: node '%s': attribute '%s'", ic->label, node_name,
           ap->name ? ap->name : "");
  if (!ap->name || !*ap->name)
    return kn_fail(ic->err, KN_ERR_PARSE, "%s: node '%s' has an unnamed attribute",
                   ic->label, node_name);
  if (ap->ref_attr_name)
    return kn_fail(ic->err, KN_ERR_UNSUPPORTED,
                   "%s: attribute references (ref_attr_name) are only valid inside "
                   "functions",
                   what);
  a->name = kn_strdup(ap->name);
  if (!a->name) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
  int type = ap->has_type ? (int)ap->type : 0;
  if (!type) { /* IR < 2: infer the type from the fields present */
    if (ap->has_f) type = KN_ATTR_FLOAT;
    else if (ap->has_i) type = KN_ATTR_INT;
    else if (ap->has_s) type = KN_ATTR_STRING;
    else if (ap->t) type = KN_ATTR_TENSOR;
    else if (ap->g) type = KN_ATTR_GRAPH;
    else if (ap->n_floats) type = KN_ATTR_FLOATS;
    else if (ap->n_ints) type = KN_ATTR_INTS;
    else if (ap->n_strings) type = KN_ATTR_STRINGS;
    else if (ap->n_tensors) type = KN_ATTR_TENSORS;
    else if (ap->n_graphs) type = KN_ATTR_GRAPHS;
  }
  a->type = (kn_attr_type)type;
  kn_status st = KN_OK;
  switch (type) {
  case KN_ATTR_FLOAT: a->f = ap->f; break;
  case KN_ATTR_INT: a->i = ap->i; break;
  case KN_ATTR_STRING:
    a->s = kn_strndup(ap->has_s ? (const char *)ap->s.data : "", ap->has_s ? ap->s.len : 0);
    a->s_len = ap->has_s ? ap->s.len : 0;
    if (!a->s) st = kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    break;
  case KN_ATTR_TENSOR:
    if (!ap->t) return kn_fail(ic->err, KN_ERR_PARSE, "%s: TENSOR attribute without a tensor", what);
    st = kn_onnx_tensor_from_proto(ap->t, ic->base_dir, what, &a->t, ic->err);
    break;
  case KN_ATTR_SPARSE_TENSOR:
    if (!ap->sparse_tensor)
      return kn_fail(ic->err, KN_ERR_PARSE, "%s: SPARSE_TENSOR attribute without a tensor", what);
    st = kn_onnx_sparse_to_dense(ap->sparse_tensor, ic->base_dir, what, &a->t, ic->err);
    break;
  case KN_ATTR_GRAPH:
    if (!ap->g) return kn_fail(ic->err, KN_ERR_PARSE, "%s: GRAPH attribute without a graph", what);
    st = convert_graph(ic, ap->g, g, &a->g);
    break;
  case KN_ATTR_FLOATS:
    a->n = (int32_t)ap->n_floats;
    a->floats = kn_malloc(ap->n_floats * sizeof(float));
    if (!a->floats) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
    break;
  case KN_ATTR_INTS:
    a->n = (int32_t)ap->n_ints;
    a->ints = kn_malloc(ap->n_ints * sizeof(int64_t));
    if (!a->ints) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
    break;
  case KN_ATTR_STRINGS:
    a->strings = kn_calloc(ap->n_strings, sizeof(char *));
    if (!a->strings) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    a->n = (int32_t)ap->n_strings;
    for (size_t i = 0; i < ap->n_strings; i++) {
      a->strings[i] = kn_strndup((const char *)ap->strings[i].data, ap->strings[i].len);
      if (!a->strings[i]) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    }
    break;
  case KN_ATTR_TENSORS:
    a->tensors = kn_calloc(ap->n_tensors, sizeof(kn_tensor));
    if (!a->tensors) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    a->n = (int32_t)ap->n_tensors;
    for (size_t i = 0; i < ap->n_tensors && !st; i++)
      st = kn_onnx_tensor_from_proto(ap->tensors[i], ic->base_dir, what, &a->tensors[i], ic->err);
    break;
  case KN_ATTR_GRAPHS:
    a->graphs = kn_calloc(ap->n_graphs, sizeof(kn_graph *));
    if (!a->graphs) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", what);
    a->n = (int32_t)ap->n_graphs;
    for (size_t i = 0; i < ap->n_graphs && !st; i++)
      st = convert_graph(ic, ap->graphs[i], g, &a->graphs[i]);
    break;
  case KN_ATTR_TYPE_PROTO: {
    kn_value tmp;
    memset(&tmp, 0, sizeof tmp);
    st = type_from_proto(ic, ap->tp, ap->name, &tmp);
    for (int d = 0; d < KN_MAX_RANK; d++) free(tmp.dim_params[d]);
    a->i = tmp.type.dtype;
    a->f = (float)tmp.type.kind;
    break;
  }
  default:
    return kn_fail(ic->err, KN_ERR_UNSUPPORTED, "%s: attribute type %d is not supported",
                   what, type);
  }
  return st;
}

/* Add or find a value for a graph input/initializer name. */
static kn_status declare_value(import_ctx *ic, kn_graph *g, const char *name,
                               const char *what, int32_t *idx) {
  if (!name || !*name)
    return kn_fail(ic->err, KN_ERR_PARSE, "%s: %s has an empty name", ic->label, what);
  *idx = kn_graph_find(g, name);
  if (*idx >= 0) return KN_OK;
  *idx = kn_graph_add_value(g, name);
  if (*idx < 0) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
  return KN_OK;
}

static kn_status convert_graph(import_ctx *ic, const KnOnnx__GraphProto *gp,
                               kn_graph *parent, kn_graph **out) {
  kn_status st = KN_OK;
  kn_graph *g = kn_graph_new(parent);
  if (!g) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
  *out = g;
  g->name = kn_strdup(gp->name ? gp->name : "");
  const char *gname = gp->name ? gp->name : "";

  /* initializers (dense and sparse) */
  for (size_t i = 0; i < gp->n_initializer + gp->n_sparse_initializer; i++) {
    bool sparse = i >= gp->n_initializer;
    const KnOnnx__TensorProto *tp = sparse ? NULL : gp->initializer[i];
    const KnOnnx__SparseTensorProto *sp = sparse ? gp->sparse_initializer[i - gp->n_initializer] : NULL;
    const char *name = sparse ? (sp->values ? sp->values->name : NULL) : tp->name;
    if (!name || !*name)
      return kn_fail(ic->err, KN_ERR_PARSE, "%s: graph '%s': initializer %zu has no name",
                     ic->label, gname, i);
    if (kn_graph_find(g, name) >= 0)
      return kn_fail(ic->err, KN_ERR_PARSE, "%s: graph '%s': initializer '%s' appears twice",
                     ic->label, gname, name);
    int32_t idx = kn_graph_add_value(g, name);
    if (idx < 0) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
    kn_tensor *t = kn_calloc(1, sizeof *t);
    if (!t) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
    g->values[idx].constant = t;
    char what[512];
    snprintf(what, sizeof what, "%s: initializer '%s'", ic->label, name);
    st = sparse ? kn_onnx_sparse_to_dense(sp, ic->base_dir, what, t, ic->err)
                : kn_onnx_tensor_from_proto(tp, ic->base_dir, what, t, ic->err);
    if (st) return st;
    if (!sparse && tp->has_raw_data && tp->raw_data.data) {
      /* the tensor has its copy: the proto's bytes go now, not with the
       * whole model, so that an import holds one copy of the weights, not
       * two (protobuf-c allocates each bytes field on its own) */
      KnOnnx__TensorProto *own = gp->initializer[i];
      free(own->raw_data.data);
      own->raw_data.data = NULL;
      own->raw_data.len = 0;
      own->has_raw_data = 0;
    }
    kn_type *ty = &g->values[idx].type;
    ty->kind = KN_KIND_TENSOR;
    ty->dtype = t->dtype;
    ty->rank = t->rank;
    memcpy(ty->dims, t->dims, sizeof t->dims);
  }

  /* inputs */
  g->inputs = kn_calloc(gp->n_input, sizeof *g->inputs);
  if (!g->inputs) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
  for (size_t i = 0; i < gp->n_input; i++) {
    const KnOnnx__ValueInfoProto *vi = gp->input[i];
    int32_t idx = -1;
    st = declare_value(ic, g, vi->name, "a graph input", &idx);
    if (st) return st;
    kn_value *v = &g->values[idx];
    if (v->is_input)
      return kn_fail(ic->err, KN_ERR_PARSE, "%s: graph '%s': input '%s' is listed twice",
                     ic->label, gname, vi->name);
    v->is_input = true;
    g->inputs[g->n_inputs++] = idx;
    if (!v->constant) {
      st = type_from_proto(ic, vi->type, vi->name, v);
      if (st) return st;
    }
  }

  /* pass 1: node outputs become values */
  for (size_t i = 0; i < gp->n_node; i++) {
    const KnOnnx__NodeProto *np = gp->node[i];
    for (size_t o = 0; o < np->n_output; o++) {
      const char *name = np->output[o];
      if (!name || !*name) continue;
      if (kn_graph_find(g, name) >= 0)
        return kn_fail(ic->err, KN_ERR_PARSE,
                       "%s: graph '%s': value '%s' is defined twice (node '%s' output %zu)",
                       ic->label, gname, name, np->name ? np->name : "", o);
      if (kn_graph_add_value(g, name) < 0)
        return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
    }
  }

  /* pass 2: nodes */
  for (size_t i = 0; i < gp->n_node; i++) {
    const KnOnnx__NodeProto *np = gp->node[i];
    kn_node *n = kn_graph_add_node(g);
    if (!n) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
    if (!np->op_type || !*np->op_type)
      return kn_fail(ic->err, KN_ERR_PARSE, "%s: graph '%s': node %zu has no op_type",
                     ic->label, gname, i);
    n->op_type = kn_strdup(np->op_type);
    n->domain = kn_strdup(np->domain ? np->domain : "");
    if (np->name && *np->name) {
      n->name = kn_strdup(np->name);
    } else {
      char buf[160];
      snprintf(buf, sizeof buf, "%.100s_%lld", np->op_type, (long long)ic->node_counter);
      n->name = kn_strdup(buf);
    }
    ic->node_counter++;
    n->inputs = kn_calloc(np->n_input, sizeof *n->inputs);
    n->outputs = kn_calloc(np->n_output, sizeof *n->outputs);
    n->attrs = kn_calloc(np->n_attribute, sizeof *n->attrs);
    if (!n->op_type || !n->domain || !n->name || !n->inputs || !n->outputs || !n->attrs)
      return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
    for (size_t k = 0; k < np->n_input; k++) {
      const char *name = np->input[k];
      int32_t idx = -1;
      if (name && *name) {
        idx = kn_graph_resolve(g, name);
        if (idx < 0)
          return kn_fail(ic->err, KN_ERR_PARSE,
                         "%s: %s%s%snode '%s' (%s): input %zu '%s' is not produced by "
                         "any node, initializer or graph input",
                         ic->label, parent ? "subgraph '" : "", parent ? gname : "",
                         parent ? "': " : "", n->name, n->op_type, k, name);
      }
      n->inputs[n->n_inputs++] = idx;
    }
    for (size_t o = 0; o < np->n_output; o++) {
      const char *name = np->output[o];
      n->outputs[n->n_outputs++] = (name && *name) ? kn_graph_find(g, name) : -1;
    }
    for (size_t a = 0; a < np->n_attribute; a++) {
      st = convert_attr(ic, g, n->name, np->attribute[a], &n->attrs[n->n_attrs]);
      n->n_attrs++;
      if (st) return st;
      for (int32_t b = 0; b + 1 < n->n_attrs; b++)
        if (strcmp(n->attrs[b].name, n->attrs[n->n_attrs - 1].name) == 0)
          return kn_fail(ic->err, KN_ERR_PARSE,
                         "%s: node '%s' (%s): attribute '%s' appears twice", ic->label,
                         n->name, n->op_type, n->attrs[b].name);
    }
  }

  /* outputs */
  g->outputs = kn_calloc(gp->n_output, sizeof *g->outputs);
  if (!g->outputs) return kn_fail(ic->err, KN_ERR_OOM, "%s: out of memory", ic->label);
  for (size_t i = 0; i < gp->n_output; i++) {
    const KnOnnx__ValueInfoProto *vi = gp->output[i];
    int32_t idx = vi->name && *vi->name ? kn_graph_resolve(g, vi->name) : -1;
    if (idx < 0)
      return kn_fail(ic->err, KN_ERR_PARSE,
                     "%s: graph '%s': output '%s' is not produced by any node, "
                     "initializer or input",
                     ic->label, gname, vi->name ? vi->name : "");
    kn_value *v = &g->values[idx];
    v->is_output = true;
    g->outputs[g->n_outputs++] = idx;
    if (vi->type && !v->constant) {
      kn_value tmp;
      memset(&tmp, 0, sizeof tmp);
      st = type_from_proto(ic, vi->type, vi->name, &tmp);
      if (!st && tmp.type.kind != KN_KIND_NONE && v->type.kind == KN_KIND_NONE) {
        v->type = tmp.type;
        for (int d = 0; d < KN_MAX_RANK; d++) {
          v->dim_params[d] = tmp.dim_params[d];
          tmp.dim_params[d] = NULL;
        }
      } else if (!st && tmp.type.optional) {
        v->type.optional = true;
      }
      for (int d = 0; d < KN_MAX_RANK; d++) free(tmp.dim_params[d]);
      if (st) return st;
    }
  }
  return kn_graph_finish(g, ic->label, ic->err);
}

/* owned: buf itself, to free once parsed (NULL: the caller's). */
static kn_status import(const void *buf, size_t size, void *owned, const char *base_dir,
                        const char *label, kn_ir_model **out, kn_error *err) {
  *out = NULL;
  kn_status st = kn_onnx_check_nesting(buf, size, &kn_onnx__model_proto__descriptor,
                                       label, err);
  if (st) {
    free(owned);
    return st;
  }
  KnOnnx__ModelProto *mp = kn_onnx__model_proto__unpack(NULL, size, buf);
  free(owned);
  if (!mp)
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: not a valid ONNX model (the protobuf is truncated or corrupt)",
                   label);
  import_ctx ic = {.label = label, .base_dir = base_dir, .err = err};
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  if (!m) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory", label);
    goto done;
  }
  m->label = kn_strdup(label);
  m->ir_version = mp->ir_version;
  if (!mp->graph) {
    st = kn_fail(err, KN_ERR_PARSE, "%s: the model has no graph", label);
    goto done;
  }
  if (mp->n_functions) {
    st = kn_fail(err, KN_ERR_UNSUPPORTED,
                 "%s: model-local functions (%zu, first '%s') are not supported",
                 label, mp->n_functions,
                 mp->functions[0]->name ? mp->functions[0]->name : "");
    goto done;
  }
  m->opsets = kn_calloc(mp->n_opset_import + 1, sizeof *m->opsets);
  if (!m->opsets) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory", label);
    goto done;
  }
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    m->opsets[i].domain = kn_strdup(mp->opset_import[i]->domain ? mp->opset_import[i]->domain : "");
    m->opsets[i].version = mp->opset_import[i]->version;
    m->n_opsets++;
  }
  if (mp->n_opset_import == 0) { /* IR version 1 models: opset 1 */
    m->opsets[0].domain = kn_strdup("");
    m->opsets[0].version = 1;
    m->n_opsets = 1;
  }
  st = convert_graph(&ic, mp->graph, NULL, &m->graph);
done:
  kn_onnx__model_proto__free_unpacked(mp, NULL);
  if (st) {
    kn_ir_model_free(m);
    return st;
  }
  *out = m;
  return KN_OK;
}

kn_status kn_onnx_import(const void *buf, size_t size, const char *base_dir,
                         const char *label, kn_ir_model **out, kn_error *err) {
  return import(buf, size, NULL, base_dir, label, out, err);
}

kn_status kn_onnx_import_take(void *buf, size_t size, const char *base_dir,
                              const char *label, kn_ir_model **out, kn_error *err) {
  return import(buf, size, buf, base_dir, label, out, err);
}
