/* No-op removal: nodes whose first output always equals their first input
 * (Identity, inference Dropout, and data-movement ops that move nothing:
 * Reshape/Expand/Squeeze/Unsqueeze/Flatten/Tile to the same shape,
 * Transpose by the identity permutation, Cast to the same dtype, Pad by
 * zero, Slice of everything, Concat of one input, Split into one part).
 * Readers of the output then read the input and the node is dead.
 *
 * Shapes come from the values' static types; a check that needs a shape
 * or an input value that is not known at build time does not fire.  A node
 * whose output is a graph output that the input cannot stand in for (a
 * graph input, a constant, another output) is kept. */
#include "pass.h"

static const kn_type *vtype(const kn_graph *g, int32_t v) {
  return v >= 0 ? &g->values[v].type : NULL;
}

static bool shape_known(const kn_type *t) {
  if (!t || t->kind != KN_KIND_TENSOR || t->rank < 0) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] < 0) return false;
  return true;
}

/* Both fully known, same dtype and same dims. */
static bool same_shape(const kn_graph *g, int32_t a, int32_t b) {
  const kn_type *ta = vtype(g, a), *tb = vtype(g, b);
  if (!shape_known(ta) || !shape_known(tb)) return false;
  if (!ta->dtype || ta->dtype != tb->dtype || ta->rank != tb->rank) return false;
  for (int32_t d = 0; d < ta->rank; d++)
    if (ta->dims[d] != tb->dims[d]) return false;
  return true;
}

/* Input k as a constant tensor, NULL when omitted or not constant. */
static const kn_tensor *const_in(const kn_graph *g, const kn_node *n, int32_t k) {
  if (k >= n->n_inputs || n->inputs[k] < 0) return NULL;
  return g->values[n->inputs[k]].constant;
}

static bool has_input(const kn_node *n, int32_t k) {
  return k < n->n_inputs && n->inputs[k] >= 0;
}

static bool is_int_tensor(const kn_tensor *t) {
  return t && kn_dtype_is_int(t->dtype) && t->rank >= 0 &&
         (t->data || kn_tensor_numel(t) == 0);
}

static bool dropout_is_identity(const kn_graph *g, const kn_node *n,
                                const int32_t *uses) {
  /* the mask is all ones in inference; it is only dropped when unread */
  if (n->n_outputs > 1 && n->outputs[1] >= 0 && uses[n->outputs[1]] > 0) return false;
  if (n->opset < 12 || !has_input(n, 2)) return true; /* kiln only infers here */
  const kn_tensor *t = const_in(g, n, 2);
  if (t && t->dtype == KN_DTYPE_BOOL && kn_tensor_numel(t) == 1 && t->data)
    if (((const uint8_t *)t->data)[0] == 0) return true;
  /* training mode with a ratio of exactly 0 still keeps everything */
  const kn_tensor *r = const_in(g, n, 1);
  return r && kn_tensor_numel(r) == 1 && r->data && kn_dtype_is_float(r->dtype) &&
         kn_scalar_f64(r) == 0.0;
}

static bool transpose_is_identity(const kn_graph *g, const kn_node *n) {
  const kn_attr *a = kn_node_attr(n, "perm");
  if (!a) {
    const kn_type *t = vtype(g, n->inputs[0]);
    return t && t->kind == KN_KIND_TENSOR && t->rank >= 0 && t->rank <= 1;
  }
  if (a->type != KN_ATTR_INTS) return false;
  for (int32_t i = 0; i < a->n; i++)
    if (a->ints[i] != i) return false;
  return true;
}

static bool cast_is_identity(const kn_graph *g, const kn_node *n) {
  const kn_type *t = vtype(g, n->inputs[0]);
  if (!t || t->kind != KN_KIND_TENSOR || !t->dtype) return false;
  if (!strcmp(n->op_type, "CastLike")) {
    const kn_type *l = vtype(g, has_input(n, 1) ? n->inputs[1] : -1);
    return l && l->kind == KN_KIND_TENSOR && l->dtype == t->dtype;
  }
  const kn_attr *a = kn_node_attr(n, "to");
  return a && a->type == KN_ATTR_INT && a->i == (int64_t)t->dtype;
}

static bool pad_is_identity(const kn_graph *g, const kn_node *n) {
  if (n->opset < 11) {
    const kn_attr *a = kn_node_attr(n, n->opset < 2 ? "paddings" : "pads");
    if (!a || a->type != KN_ATTR_INTS) return false;
    for (int32_t i = 0; i < a->n; i++)
      if (a->ints[i] != 0) return false;
    return true;
  }
  const kn_tensor *p = const_in(g, n, 1);
  if (!is_int_tensor(p)) return false;
  for (int64_t i = 0, c = kn_tensor_numel(p); i < c; i++)
    if (kn_load_i64(p->data, p->dtype, i) != 0) return false;
  return true;
}

/* Every sliced axis from 0 to its end with step 1 (the ONNX clamping rules
 * applied to the known dims); starts, ends, axes and steps constant. */
static bool slice_is_identity(const kn_graph *g, const kn_node *n) {
  const kn_type *t = vtype(g, n->inputs[0]);
  if (!shape_known(t)) return false;
  int64_t starts[KN_MAX_RANK], ends[KN_MAX_RANK], axes[KN_MAX_RANK], steps[KN_MAX_RANK];
  int64_t cnt = 0;
  if (n->opset < 10) {
    const kn_attr *s = kn_node_attr(n, "starts"), *e = kn_node_attr(n, "ends"),
                  *a = kn_node_attr(n, "axes");
    if (!s || !e || s->type != KN_ATTR_INTS || e->type != KN_ATTR_INTS || s->n != e->n ||
        s->n > KN_MAX_RANK)
      return false;
    if (a && (a->type != KN_ATTR_INTS || a->n != s->n)) return false;
    cnt = s->n;
    for (int64_t i = 0; i < cnt; i++) {
      starts[i] = s->ints[i];
      ends[i] = e->ints[i];
      axes[i] = a ? a->ints[i] : i;
      steps[i] = 1;
    }
  } else {
    const kn_tensor *s = const_in(g, n, 1), *e = const_in(g, n, 2);
    if (!is_int_tensor(s) || !is_int_tensor(e)) return false;
    cnt = kn_tensor_numel(s);
    if (cnt != kn_tensor_numel(e) || cnt > KN_MAX_RANK) return false;
    const kn_tensor *a = NULL, *st = NULL;
    if (has_input(n, 3) && (!is_int_tensor(a = const_in(g, n, 3)) || kn_tensor_numel(a) != cnt))
      return false;
    if (has_input(n, 4) && (!is_int_tensor(st = const_in(g, n, 4)) || kn_tensor_numel(st) != cnt))
      return false;
    for (int64_t i = 0; i < cnt; i++) {
      starts[i] = kn_load_i64(s->data, s->dtype, i);
      ends[i] = kn_load_i64(e->data, e->dtype, i);
      axes[i] = a ? kn_load_i64(a->data, a->dtype, i) : i;
      steps[i] = st ? kn_load_i64(st->data, st->dtype, i) : 1;
    }
  }
  for (int64_t i = 0; i < cnt; i++) {
    int64_t ax = axes[i] < 0 ? axes[i] + t->rank : axes[i];
    if (ax < 0 || ax >= t->rank || steps[i] != 1) return false;
    int64_t dim = t->dims[ax];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < 0 ? 0 : e > dim ? dim : e;
    if (dim > 0 && (s != 0 || e != dim)) return false;
  }
  return true;
}

static bool split_is_identity(const kn_graph *g, const kn_node *n) {
  if (n->n_outputs != 1 || n->outputs[0] < 0) return false;
  bool sizes_given = has_input(n, 1) || kn_node_attr(n, "split");
  return !sizes_given || same_shape(g, n->inputs[0], n->outputs[0]);
}

static bool is_noop(const kn_graph *g, const kn_node *n, const int32_t *uses) {
  if (*n->domain && strcmp(n->domain, "ai.onnx") != 0) return false;
  if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0)
    return false;
  const char *op = n->op_type;
  if (!strcmp(op, "Identity")) return true;
  if (!strcmp(op, "Dropout")) return dropout_is_identity(g, n, uses);
  if (!strcmp(op, "Transpose")) return transpose_is_identity(g, n);
  if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) return cast_is_identity(g, n);
  if (!strcmp(op, "Pad")) return pad_is_identity(g, n);
  if (!strcmp(op, "Slice")) return slice_is_identity(g, n);
  if (!strcmp(op, "Split")) return split_is_identity(g, n);
  if (!strcmp(op, "Concat")) {
    const kn_type *t = vtype(g, n->inputs[0]);
    return n->n_inputs == 1 && t && t->kind == KN_KIND_TENSOR && t->rank >= 1;
  }
  /* row-major data is unchanged when the shape is */
  if (!strcmp(op, "Reshape") || !strcmp(op, "Expand") || !strcmp(op, "Squeeze") ||
      !strcmp(op, "Unsqueeze") || !strcmp(op, "Flatten") || !strcmp(op, "Tile"))
    return n->n_outputs == 1 && same_shape(g, n->inputs[0], n->outputs[0]);
  return false;
}

kn_status kn_pass_noop(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  int32_t *uses = kn_calloc((size_t)g->n_values + 1, sizeof *uses);
  if (!uses) return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
  kn_graph_use_counts(g, uses);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || !is_noop(g, n, uses)) continue;
    int32_t in = n->inputs[0], out = n->outputs[0];
    if (!kn_graph_can_replace(g, out, in)) continue;
    kn_graph_replace_value(g, out, in);
    uses[in] += uses[out];
    uses[out] = 0;
    n->dead = true;
    *changed = true;
  }
  free(uses);
  return KN_OK;
}
