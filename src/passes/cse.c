/* Common-subexpression elimination.  Two live nodes with the same op type
 * and domain, the same inputs (value indices, in order) and equal
 * attributes (floats compared bit for bit, tensors byte for byte) compute
 * the same results: the later one's readers read the earlier one's results
 * and it dies.  Nodes are visited in topological order, so merging one
 * pair makes its readers candidates in the same sweep.
 *
 * Small equal constants (same dtype, shape and bytes, up to
 * KN_CSE_CONST_BYTES) are merged first so that nodes reading two copies of
 * one constant also match.  Never merged: nodes with subgraphs, random ops,
 * graph inputs (initializers that are graph inputs are part of the
 * interface), and pairs where the earlier node lacks an optional result
 * the later one has, or where both results are graph outputs. */
#include "pass.h"

#define KN_CSE_CONST_BYTES 4096

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#define FNV_SEED 14695981039346656037ull

static bool is_random(const kn_node *n) {
  static const char *const ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                    "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(n->op_type, ops[i])) return true;
  return false;
}

static bool has_subgraph(const kn_node *n) {
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS) return true;
  return false;
}

/* Numeric tensors only (string tensors are never merged). */
static bool tensor_equal(const kn_tensor *a, const kn_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  int64_t cnt = kn_shape_numel(a->rank, a->dims);
  if (cnt < 0) return false;
  if (a->dtype == KN_DTYPE_STRING) {
    for (int64_t i = 0; i < cnt; i++) {
      const char *sa = ((char *const *)a->data)[i], *sb = ((char *const *)b->data)[i];
      if (strcmp(sa ? sa : "", sb ? sb : "")) return false;
    }
    return true;
  }
  size_t bytes = (size_t)cnt * kn_dtype_size(a->dtype);
  return bytes == 0 || (a->data && b->data && !memcmp(a->data, b->data, bytes));
}

static bool attr_equal(const kn_attr *a, const kn_attr *b) {
  if (a->type != b->type || strcmp(a->name, b->name)) return false;
  switch (a->type) {
  case KN_ATTR_UNDEFINED: return true;
  case KN_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
  case KN_ATTR_INT:
  case KN_ATTR_TYPE_PROTO: return a->i == b->i;
  case KN_ATTR_STRING:
    return a->s_len == b->s_len && (!a->s_len || !memcmp(a->s, b->s, a->s_len));
  case KN_ATTR_TENSOR:
  case KN_ATTR_SPARSE_TENSOR: return tensor_equal(&a->t, &b->t);
  case KN_ATTR_FLOATS:
    return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, (size_t)a->n * sizeof(float)));
  case KN_ATTR_INTS:
    return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, (size_t)a->n * sizeof(int64_t)));
  case KN_ATTR_STRINGS:
    if (a->n != b->n) return false;
    for (int32_t i = 0; i < a->n; i++)
      if (strcmp(a->strings[i] ? a->strings[i] : "", b->strings[i] ? b->strings[i] : ""))
        return false;
    return true;
  case KN_ATTR_TENSORS:
    if (a->n != b->n) return false;
    for (int32_t i = 0; i < a->n; i++)
      if (!tensor_equal(&a->tensors[i], &b->tensors[i])) return false;
    return true;
  default: return false; /* graphs */
  }
}

static bool attrs_equal(const kn_node *a, const kn_node *b) {
  if (a->n_attrs != b->n_attrs) return false;
  for (int32_t i = 0; i < a->n_attrs; i++) {
    const kn_attr *other = kn_node_attr(b, a->attrs[i].name);
    if (!other || !attr_equal(&a->attrs[i], other)) return false;
  }
  return true;
}

static bool same_computation(const kn_node *a, const kn_node *b) {
  if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain)) return false;
  if (a->n_inputs != b->n_inputs) return false;
  for (int32_t k = 0; k < a->n_inputs; k++)
    if (a->inputs[k] != b->inputs[k]) return false;
  return attrs_equal(a, b);
}

static uint64_t node_hash(const kn_node *n) {
  uint64_t h = fnv(FNV_SEED, n->op_type, strlen(n->op_type));
  h = fnv(h, n->domain, strlen(n->domain) + 1);
  h = fnv(h, &n->n_inputs, sizeof n->n_inputs);
  return fnv(h, n->inputs, (size_t)n->n_inputs * sizeof *n->inputs);
}

/* Open-addressing table of indices (nodes or values) keyed by hash. */
typedef struct table {
  uint64_t *hash;
  int32_t *idx; /* -1: empty */
  size_t cap;
} table;

static bool table_init(table *t, size_t want) {
  t->cap = 16;
  while (t->cap < want * 2) t->cap *= 2;
  t->hash = kn_malloc(t->cap * sizeof *t->hash);
  t->idx = kn_malloc(t->cap * sizeof *t->idx);
  if (!t->hash || !t->idx) return false;
  for (size_t i = 0; i < t->cap; i++) t->idx[i] = -1;
  return true;
}

static void table_free(table *t) {
  free(t->hash);
  free(t->idx);
}

/* Finds an entry equal to `key` (eq(entry, key)) or inserts key; returns
 * the equal entry or -1 when key was inserted. */
static int32_t table_find_or_add(table *t, uint64_t h, int32_t key,
                                 bool (*eq)(const kn_graph *, int32_t, int32_t),
                                 const kn_graph *g) {
  size_t i = (size_t)h & (t->cap - 1);
  for (; t->idx[i] >= 0; i = (i + 1) & (t->cap - 1))
    if (t->hash[i] == h && eq(g, t->idx[i], key)) return t->idx[i];
  t->hash[i] = h;
  t->idx[i] = key;
  return -1;
}

static bool node_eq(const kn_graph *g, int32_t a, int32_t b) {
  return same_computation(&g->nodes[a], &g->nodes[b]);
}

static bool const_eq(const kn_graph *g, int32_t a, int32_t b) {
  return tensor_equal(g->values[a].constant, g->values[b].constant);
}

static bool mergeable_constant(const kn_graph *g, int32_t v, const int32_t *uses) {
  const kn_value *val = &g->values[v];
  const kn_tensor *t = val->constant;
  if (!t || val->is_input || val->is_output || val->outer >= 0 || uses[v] == 0) return false;
  if (t->dtype == KN_DTYPE_STRING || !kn_dtype_is_valid(t->dtype)) return false;
  int64_t cnt = kn_shape_numel(t->rank, t->dims);
  return cnt >= 0 && (uint64_t)cnt * kn_dtype_size(t->dtype) <= KN_CSE_CONST_BYTES &&
         (cnt == 0 || t->data);
}

static bool merge_constants(kn_graph *g, const int32_t *uses) {
  table t;
  bool changed = false;
  if (!table_init(&t, (size_t)g->n_values)) {
    table_free(&t);
    return false; /* merging is an optimisation: skip it when memory is short */
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!mergeable_constant(g, v, uses)) continue;
    const kn_tensor *c = g->values[v].constant;
    uint64_t h = fnv(FNV_SEED, &c->dtype, sizeof c->dtype);
    h = fnv(h, c->dims, (size_t)c->rank * sizeof c->dims[0]);
    int64_t cnt = kn_shape_numel(c->rank, c->dims);
    if (cnt > 0) h = fnv(h, c->data, (size_t)cnt * kn_dtype_size(c->dtype));
    int32_t first = table_find_or_add(&t, h, v, const_eq, g);
    if (first < 0) continue;
    kn_graph_replace_value(g, v, first);
    changed = true;
  }
  table_free(&t);
  return changed;
}

static bool cse_candidate(const kn_node *n) {
  if (n->dead || is_random(n) || has_subgraph(n)) return false;
  for (int32_t o = 0; o < n->n_outputs; o++)
    if (n->outputs[o] >= 0) return true;
  return false;
}

/* Whether b's results can all be replaced by a's. */
static bool can_take_over(const kn_graph *g, const kn_node *a, const kn_node *b) {
  for (int32_t o = 0; o < b->n_outputs; o++) {
    if (b->outputs[o] < 0) continue;
    if (o >= a->n_outputs || a->outputs[o] < 0) return false;
    if (!kn_graph_can_replace(g, b->outputs[o], a->outputs[o])) return false;
  }
  return true;
}

kn_status kn_pass_cse(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  int32_t *uses = kn_calloc((size_t)g->n_values + 1, sizeof *uses);
  table t = {0};
  kn_status st = KN_OK;
  if (!uses || !table_init(&t, (size_t)g->n_nodes)) {
    st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  kn_graph_use_counts(g, uses);
  if (merge_constants(g, uses)) *changed = true;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (!cse_candidate(&g->nodes[i])) continue;
    int32_t first = table_find_or_add(&t, node_hash(&g->nodes[i]), i, node_eq, g);
    if (first < 0) continue;
    kn_node *a = &g->nodes[first], *b = &g->nodes[i];
    if (!can_take_over(g, a, b)) continue;
    if (!kn_node_add_covers(a, b)) { /* inspect names what the kept node covers */
      st = kn_fail(ctx->err, KN_ERR_OOM, "out of memory merging node '%s'", b->name);
      break;
    }
    for (int32_t o = 0; o < b->n_outputs; o++)
      if (b->outputs[o] >= 0) kn_graph_replace_value(g, b->outputs[o], a->outputs[o]);
    b->dead = true;
    *changed = true;
  }
done:
  table_free(&t);
  free(uses);
  return st;
}
