/* Shared helpers for the unit tests (see testkit.h). */
#include "testkit.h"

#include "core/cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building graphs ---------------------------------------------------- */

kn_ir_model *tk_model_new(int64_t opset) {
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  assert_non_null(m);
  m->graph = kn_graph_new(NULL);
  m->opsets = kn_calloc(1, sizeof *m->opsets);
  assert_non_null(m->graph);
  assert_non_null(m->opsets);
  m->n_opsets = 1;
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = opset;
  m->label = kn_strdup("test");
  return m;
}

void tk_append(int32_t **arr, int32_t *n, int32_t v) {
  *arr = kn_realloc(*arr, ((size_t)*n + 1) * sizeof **arr);
  assert_non_null(*arr);
  (*arr)[(*n)++] = v;
}

int32_t tk_input(kn_graph *g, const char *name, int32_t rank, const int64_t *dims) {
  int32_t v = kn_graph_add_value(g, name);
  assert_true(v >= 0);
  kn_value *val = &g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = rank;
  if (rank > 0) memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  tk_append(&g->inputs, &g->n_inputs, v);
  return v;
}

void tk_output(kn_graph *g, int32_t v) {
  g->values[v].is_output = true;
  tk_append(&g->outputs, &g->n_outputs, v);
}

float tk_pseudo(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

float *tk_rand_buf(int64_t n, uint32_t seed) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) p[i] = tk_pseudo(&seed);
  return p;
}

double tk_act_ref(const kn_act_params *a, double x) {
  switch (a->act) {
  case KN_ACT_NONE: return x;
  case KN_ACT_RELU: return x > 0 ? x : 0;
  case KN_ACT_CLIP: return x < a->lo ? a->lo : x > a->hi ? a->hi : x;
  case KN_ACT_LEAKYRELU: return x < 0 ? a->alpha * x : x;
  case KN_ACT_HARDSIGMOID: return fmax(0.0, fmin(1.0, a->alpha * x + a->beta));
  case KN_ACT_HARDSWISH: return x * fmax(0.0, fmin(1.0, x / 6 + 0.5));
  case KN_ACT_SIGMOID: return 1 / (1 + exp(-x));
  case KN_ACT_SILU: return x / (1 + exp(-x));
  case KN_ACT_TANH: return tanh(x);
  case KN_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  default: fail_msg("activation %d not in the test", (int)a->act);
  }
  return 0;
}

int32_t tk_const_rand(kn_graph *g, int32_t rank, const int64_t *dims, uint32_t seed,
                      float offset) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL), KN_OK);
  float *d = t.data;
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++) d[i] = tk_pseudo(&seed) + offset;
  int32_t v = kn_graph_add_constant(g, "c", &t);
  assert_true(v >= 0);
  return v;
}

int32_t tk_const_scalar(kn_graph *g, float x) {
  int64_t one = 1;
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 0, &one, NULL), KN_OK);
  ((float *)t.data)[0] = x;
  int32_t v = kn_graph_add_constant(g, "s", &t);
  assert_true(v >= 0);
  return v;
}

int32_t tk_const_u8(kn_graph *g, uint8_t v) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_U8, 0, NULL, NULL), KN_OK);
  *(uint8_t *)t.data = v;
  int32_t id = kn_graph_add_constant(g, "zp", &t);
  assert_true(id >= 0);
  return id;
}

int32_t tk_const_typed(kn_graph *g, kn_dtype dtype, int32_t rank, const int64_t *dims,
                       const void *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, dtype, rank, dims, NULL), KN_OK);
  memcpy(t.data, vals, (size_t)kn_tensor_numel(&t) * kn_dtype_size(dtype));
  int32_t v = kn_graph_add_constant(g, "c", &t);
  assert_true(v >= 0);
  return v;
}

int32_t tk_const_f32(kn_graph *g, int32_t rank, const int64_t *dims, const float *vals) {
  return tk_const_typed(g, KN_DTYPE_F32, rank, dims, vals);
}

int32_t tk_const_i64(kn_graph *g, int32_t n, const int64_t *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  int64_t d = n < 0 ? 1 : n;
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_I64, n < 0 ? 0 : 1, &d, NULL), KN_OK);
  memcpy(t.data, vals, (size_t)d * sizeof(int64_t));
  int32_t v = kn_graph_add_constant(g, "k", &t);
  assert_true(v >= 0);
  return v;
}

int32_t tk_constant_node(kn_graph *g, float x) {
  int32_t o = kn_graph_add_fresh_value(g, "const");
  assert_true(o >= 0);
  assert_true(kn_graph_new_node(g, "Constant", "", "Constant", 0, NULL, 1, &o) >= 0);
  kn_node *n = &g->nodes[g->n_nodes - 1];
  n->attrs = kn_calloc(1, sizeof *n->attrs);
  assert_non_null(n->attrs);
  n->n_attrs = 1;
  n->attrs[0].name = kn_strdup("value");
  n->attrs[0].type = KN_ATTR_TENSOR;
  int64_t one = 1;
  assert_int_equal(kn_tensor_alloc(&n->attrs[0].t, KN_DTYPE_F32, 0, &one, NULL), KN_OK);
  ((float *)n->attrs[0].t.data)[0] = x;
  return o;
}

int32_t tk_node_n(kn_graph *g, const char *op, int32_t n_in, const int32_t *in, int32_t n_out,
                  int32_t *outs) {
  int32_t o[4];
  assert_true(n_out >= 1 && n_out <= 4);
  for (int32_t i = 0; i < n_out; i++) {
    o[i] = kn_graph_add_fresh_value(g, op);
    assert_true(o[i] >= 0);
    if (outs) outs[i] = o[i];
  }
  assert_true(kn_graph_new_node(g, op, "", op, n_in, in, n_out, o) >= 0);
  return o[0];
}

int32_t tk_node(kn_graph *g, const char *op, int32_t n_in, const int32_t *in) {
  return tk_node_n(g, op, n_in, in, 1, NULL);
}

kn_node *tk_last(kn_graph *g) { return &g->nodes[g->n_nodes - 1]; }

void tk_prepare(kn_ir_model *m) {
  kn_error err;
  kn_status st = kn_graph_finish(m->graph, m->label, &err);
  if (!st) st = kn_ops_prepare(m, &err);
  if (st) fail_msg("%s", err.msg);
  kn_tactics_bind(m); /* tests may give nodes their tactic directly */
}

/* ---- running passes and graphs ------------------------------------------ */

bool tk_run_pass_cap(kn_ir_model *m, kn_pass_fn fn, int64_t cap) {
  kn_error err;
  kn_pass_ctx ctx = {.m = m, .err = &err, .fold_max_bytes = cap};
  bool changed = false;
  kn_status st = fn(&ctx, m->graph, &changed);
  if (!st && changed) {
    st = kn_graph_compact(m->graph, m->label, &err);
    if (!st) st = kn_ops_prepare(m, &err);
  }
  if (st) fail_msg("%s", err.msg);
  return changed;
}

bool tk_run_pass(kn_ir_model *m, kn_pass_fn fn) { return tk_run_pass_cap(m, fn, TK_FOLD_CAP); }

int32_t tk_count_op(const kn_graph *g, const char *op) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && (!op || !strcmp(g->nodes[i].op_type, op))) c++;
  return c;
}

const kn_node *tk_find_op(const kn_graph *g, const char *op) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, op)) return &g->nodes[i];
  return NULL;
}

static tk_results run_with(kn_ir_model *m, tk_fill fill, kn_rt *rt, const void *const *packed);

tk_results tk_run(kn_ir_model *m, tk_fill fill) { return run_with(m, fill, NULL, NULL); }

tk_results tk_run_fast(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads) {
  return tk_run_fast_features(m, fill, isa, threads, kn_cpu_features());
}

tk_results tk_run_fast_features(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads,
                                uint64_t features) {
  return tk_run_fast_tactic(m, fill, isa, threads, features, 0);
}

tk_results tk_run_fast_tactic(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads,
                              uint64_t features, int32_t tactic) {
  kn_graph *g = m->graph;
  kn_tactics_select(m, isa, false);
  for (int32_t i = 0; tactic && i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    const kn_op_tactics *tt = kn_tactics_of(n);
    int32_t cand[8], nc = tt && tt->candidates ? tt->candidates(g, n, isa, cand, 8) : 0;
    for (int32_t k = 0; k < nc; k++)
      if (cand[k] == tactic) n->tactic = tactic;
  }
  void **packed = kn_calloc((size_t)g->n_nodes + 1, sizeof *packed);
  assert_non_null(packed);
  kn_error err;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    const kn_op_tactics *tt = kn_tactics_of(n);
    if (n->tactic && tt && tt->pack && tt->pack(g, n, &(kn_target){isa, NULL}, &packed[i], &err))
      fail_msg("%s", err.msg);
  }
  kn_rt rt = {.isa = (kn_isa)isa, .features = features};
  if (threads > 1 && kn_pool_create(threads, &rt.pool, &err)) fail_msg("%s", err.msg);
  tk_results r = run_with(m, fill, &rt, (const void *const *)packed);
  for (int32_t i = 0; i < g->n_nodes; i++)
    kn_packed_free(packed[i]);
  free(packed);
  kn_pool_free(rt.pool);
  free(rt.scratch);
  kn_tactics_select(m, isa, true);
  return r;
}

int32_t tk_fast_tactic(const kn_ir_model *m, const char *op, int32_t isa) {
  const kn_graph *g = m->graph;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead || strcmp(n->op_type, op)) continue;
    const kn_op_tactics *tt = kn_tactics_of(n);
    return tt && tt->select ? tt->select(g, n, isa) : 0;
  }
  return -1;
}

static tk_results run_with(kn_ir_model *m, tk_fill fill, kn_rt *rt, const void *const *packed) {
  kn_graph *g = m->graph;
  kn_slot *in = kn_calloc((size_t)g->n_inputs + 1, sizeof *in);
  const kn_slot **pin = kn_calloc((size_t)g->n_inputs + 1, sizeof *pin);
  tk_results r = {g->n_outputs, kn_calloc((size_t)g->n_outputs + 1, sizeof(kn_slot))};
  assert_non_null(in);
  assert_non_null(pin);
  assert_non_null(r.outs);
  uint32_t seed = 7;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->constant) continue;
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < v->type.rank; d++) dims[d] = v->type.dims[d] < 0 ? 2 : v->type.dims[d];
    in[i].kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&in[i].t, v->type.dtype, v->type.rank, dims, NULL), KN_OK);
    float *d = in[i].t.data;
    for (int64_t k = 0; k < kn_tensor_numel(&in[i].t); k++)
      d[k] = fill == TK_FILL_SEEDED ? 2.0f * tk_pseudo(&seed)
                                    : (float)((k * 37 + i * 11) % 23) * 0.25f - 2.5f;
    pin[i] = &in[i];
  }
  kn_mem_budget mem = {.limit = UINT64_MAX, .rt = rt, .packed = packed};
  kn_error err;
  if (kn_exec_graph(m, g, NULL, pin, r.outs, &mem, &err)) fail_msg("%s", err.msg);
  for (int32_t i = 0; i < g->n_inputs; i++) kn_slot_release(&in[i]);
  free(in);
  free(pin);
  return r;
}

void tk_results_free(tk_results *r) {
  for (int32_t i = 0; i < r->n; i++) kn_slot_release(&r->outs[i]);
  free(r->outs);
}

void tk_assert_same(tk_results *a, tk_results *b) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(a->outs[i].kind, KN_KIND_TENSOR);
    assert_int_equal(b->outs[i].kind, KN_KIND_TENSOR);
    assert_int_equal(x->dtype, y->dtype);
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    size_t bytes = (size_t)kn_tensor_numel(x) * kn_dtype_size(x->dtype);
    assert_memory_equal(x->data, y->data, bytes);
  }
  tk_results_free(a);
  tk_results_free(b);
}

void tk_assert_near_ref(const tk_results *fast, const tk_results *ref, const char *what) {
  assert_int_equal(fast->n, ref->n);
  const kn_tensor *x = &fast->outs[0].t, *y = &ref->outs[0].t;
  assert_int_equal(kn_tensor_numel(x), kn_tensor_numel(y));
  const float *p = x->data, *r = y->data;
  double amax = 0;
  for (int64_t i = 0; i < kn_tensor_numel(y); i++) amax = fmax(amax, fabs(r[i]));
  double tol = 2e-5 * amax + 1e-6;
  for (int64_t i = 0; i < kn_tensor_numel(y); i++)
    if (!(fabs((double)p[i] - r[i]) <= tol))
      fail_msg("%s: element %lld is %.9g, reference %.9g (tolerance %.3g)", what, (long long)i,
               (double)p[i], (double)r[i], tol);
}

void tk_assert_bits(const tk_results *a, const tk_results *b, const char *what) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    const float *p = x->data, *q = y->data;
    for (int64_t k = 0; k < kn_tensor_numel(x); k++)
      if (memcmp(&p[k], &q[k], sizeof(float)))
        fail_msg("%s: output %d element %lld is %.9g, expected the same bits as %.9g", what,
                 (int)i, (long long)k, (double)q[k], (double)p[k]);
  }
}

tk_results tk_run_context(kn_context *c, const kn_model *km, tk_fill fill) {
  const kn_graph *g = km->ir->graph;
  assert_int_equal(km->n_inputs, 1);
  const kn_value *v = &g->values[g->inputs[km->inputs[0]]];
  int64_t dims[KN_MAX_RANK];
  for (int32_t d = 0; d < v->type.rank; d++) dims[d] = v->type.dims[d] < 0 ? 2 : v->type.dims[d];
  kn_tensor t;
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, v->type.rank, dims, NULL), KN_OK);
  uint32_t seed = 7;
  float *d = t.data;
  for (int64_t k = 0; k < kn_tensor_numel(&t); k++)
    d[k] = fill == TK_FILL_SEEDED ? 2.0f * tk_pseudo(&seed)
                                  : (float)((k * 37 + km->inputs[0] * 11) % 23) * 0.25f - 2.5f;
  kn_error err;
  if (kn_context_set_input(c, 0, &t, &err) || kn_context_run(c, &err)) fail_msg("%s", err.msg);
  tk_results r = {g->n_outputs, kn_calloc((size_t)g->n_outputs + 1, sizeof(kn_slot))};
  assert_non_null(r.outs);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    r.outs[o].kind = KN_KIND_TENSOR;
    if (kn_tensor_copy(&r.outs[o].t, kn_context_output(c, o), &err)) fail_msg("%s", err.msg);
  }
  kn_tensor_release(&t);
  return r;
}

void tk_assert_close(tk_results *a, tk_results *b, bool equal_ok) {
  assert_int_equal(a->n, b->n);
  for (int32_t i = 0; i < a->n; i++) {
    const kn_tensor *x = &a->outs[i].t, *y = &b->outs[i].t;
    assert_int_equal(x->dtype, KN_DTYPE_F32);
    assert_int_equal(y->dtype, KN_DTYPE_F32);
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    const float *p = x->data, *q = y->data;
    for (int64_t k = 0; k < kn_tensor_numel(x); k++) {
      if (equal_ok && (p[k] == q[k] || (isnan(p[k]) && isnan(q[k])))) continue;
      if (!(fabsf(p[k] - q[k]) <= 1e-5f + 1e-4f * fabsf(q[k])))
        fail_msg("output %d element %lld: %.9g before, %.9g after", (int)i, (long long)k,
                 (double)p[k], (double)q[k]);
    }
  }
  tk_results_free(a);
  tk_results_free(b);
}

bool tk_passes_keep_close(kn_ir_model *m, kn_pass_fn first, kn_pass_fn second, bool equal_ok) {
  tk_results before = tk_run(m, TK_FILL_SEEDED);
  bool changed = tk_run_pass(m, first);
  if (second) tk_run_pass(m, second);
  tk_run_pass(m, kn_pass_dce);
  tk_results after = tk_run(m, TK_FILL_SEEDED);
  tk_assert_close(&before, &after, equal_ok);
  return changed;
}

void tk_assert_fast_close(kn_ir_model *m) {
  int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
  for (int32_t threads = 1; threads <= 2; threads++) {
    tk_results fast = tk_run_fast(m, TK_FILL_SEEDED, isa, threads);
    tk_results again = tk_run(m, TK_FILL_SEEDED);
    tk_assert_close(&again, &fast, false); /* frees both */
  }
}

double tk_max_abs_diff(const kn_tensor *a, const kn_tensor *b) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->rank, b->rank);
  int64_t n = kn_tensor_numel(a);
  assert_int_equal(n, kn_tensor_numel(b));
  if (a->dtype == KN_DTYPE_STRING) return 0;
  double worst = 0;
  if (a->dtype == KN_DTYPE_F32 || a->dtype == KN_DTYPE_F64 || a->dtype == KN_DTYPE_F16 ||
      a->dtype == KN_DTYPE_BF16) {
    for (int64_t i = 0; i < n; i++) {
      double x = kn_load_f64(a->data, a->dtype, i), y = kn_load_f64(b->data, b->dtype, i);
      if (isnan(x) && isnan(y)) continue;
      double d = fabs(x - y);
      if (!(d <= worst)) worst = d; /* NaN against a number counts as infinite */
    }
  } else {
    assert_memory_equal(a->data, b->data, a->nbytes);
  }
  return worst;
}

/* ---- real models ---------------------------------------------------------- */

kn_model *tk_load_cached_optimized(const char *name) {
  const char *home = getenv("HOME");
  char path[1024];
  snprintf(path, sizeof path, "%s/.cache/kiln/models/%s.onnx", home ? home : "", name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("%s: not cached, skipped\n", name);
    return NULL;
  }
  fclose(f);
  kn_model *model = NULL;
  kn_error err;
  if (kn_model_load(path, &model, &err)) fail_msg("%s", err.msg);
  kn_ir_model *m = (kn_ir_model *)kn_model_ir(model);
  if (kn_optimize(m, NULL, &err)) fail_msg("%s", err.msg);
  return model;
}

float *tk_slice_buffer(int64_t np, int64_t ldy, float sentinel) {
  int64_t total = np * ldy + 64; /* a tail past the last pixel */
  float *buf = malloc((size_t)total * sizeof(float));
  assert_non_null(buf);
  for (int64_t i = 0; i < total; i++) buf[i] = sentinel;
  return buf;
}

void tk_check_slice(const float *buf, int64_t np, int64_t m, int64_t ldy, int64_t off,
                    const float *plain, float sentinel, const char *what, const char *isa,
                    int32_t threads) {
  int64_t total = np * ldy + 64;
  for (int64_t i = 0; i < total; i++) {
    int64_t p = i / ldy, ch = i % ldy - off;
    bool in = p < np && ch >= 0 && ch < m;
    const float *want = in ? &plain[p * m + ch] : &sentinel;
    if (memcmp(&buf[i], want, sizeof(float)))
      fail_msg("%s [%s, %d threads] ldy %lld offset %lld: float %lld (pixel %lld, channel "
               "%lld %s the slice) is %.9g, expected %.9g",
               what, isa, (int)threads, (long long)ldy, (long long)off, (long long)i,
               (long long)p, (long long)(i % ldy), in ? "in" : "outside", (double)buf[i],
               (double)*want);
  }
}
