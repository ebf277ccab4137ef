/* Engine files: round trips (graphs, constants, subgraphs, plan, outputs
 * equal), byte-identical rewrites, and every kind of damage refused with
 * its message and without a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "onnx/onnx.h"

#include <sys/stat.h>
#include <unistd.h>

#define NODE_DIR "/usr/share/libonnx-testdata/data/node/"

typedef struct fixture {
  char dir[64];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/kn_engine_test_XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) return -1;
  free(f);
  return 0;
}

static kn_ir_model *load_onnx(const char *path) {
  void *buf;
  size_t size;
  kn_error err;
  kn_ir_model *m = NULL;
  if (kn_read_whole_file(path, &buf, &size, &err)) fail_msg("%s", err.msg);
  if (kn_onnx_import(buf, size, NULL, path, &m, &err)) fail_msg("%s", err.msg);
  free(buf);
  if (kn_ops_prepare(m, &err)) fail_msg("%s", err.msg);
  return m;
}

static void *read_bytes(const char *path, size_t *size) {
  void *buf;
  kn_error err;
  if (kn_read_whole_file(path, &buf, size, &err)) fail_msg("%s", err.msg);
  return buf;
}

/* ---- structural comparison ---------------------------------------------- */

static void compare_tensor(const kn_tensor *a, const kn_tensor *b) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->rank, b->rank);
  for (int32_t d = 0; d < a->rank; d++) assert_int_equal(a->dims[d], b->dims[d]);
  int64_t n = kn_tensor_numel(a);
  if (a->dtype == KN_DTYPE_STRING) {
    char *const *x = a->data, *const *y = b->data;
    for (int64_t i = 0; i < n; i++) assert_string_equal(x[i] ? x[i] : "", y[i]);
  } else {
    size_t bytes = (size_t)n * kn_dtype_size(a->dtype);
    if (bytes) assert_memory_equal(a->data, b->data, bytes);
  }
}

static void compare_graph(const kn_graph *a, const kn_graph *b);

static void compare_attr(const kn_attr *a, const kn_attr *b) {
  assert_string_equal(a->name, b->name);
  assert_int_equal(a->type, b->type);
  assert_int_equal(a->i, b->i);
  assert_memory_equal(&a->f, &b->f, sizeof a->f);
  switch (a->type) {
  case KN_ATTR_STRING:
    assert_int_equal(a->s_len, b->s_len);
    assert_memory_equal(a->s, b->s, a->s_len);
    break;
  case KN_ATTR_TENSOR:
  case KN_ATTR_SPARSE_TENSOR: compare_tensor(&a->t, &b->t); break;
  case KN_ATTR_GRAPH: compare_graph(a->g, b->g); break;
  case KN_ATTR_FLOATS:
    assert_int_equal(a->n, b->n);
    if (a->n) assert_memory_equal(a->floats, b->floats, (size_t)a->n * sizeof(float));
    break;
  case KN_ATTR_INTS:
    assert_int_equal(a->n, b->n);
    if (a->n) assert_memory_equal(a->ints, b->ints, (size_t)a->n * sizeof(int64_t));
    break;
  case KN_ATTR_STRINGS:
    assert_int_equal(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) assert_string_equal(a->strings[i], b->strings[i]);
    break;
  case KN_ATTR_TENSORS:
    assert_int_equal(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) compare_tensor(&a->tensors[i], &b->tensors[i]);
    break;
  case KN_ATTR_GRAPHS:
    assert_int_equal(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) compare_graph(a->graphs[i], b->graphs[i]);
    break;
  default: break;
  }
}

static void compare_graph(const kn_graph *a, const kn_graph *b) {
  assert_string_equal(a->name, b->name);
  assert_int_equal(a->n_values, b->n_values);
  for (int32_t i = 0; i < a->n_values; i++) {
    const kn_value *x = &a->values[i], *y = &b->values[i];
    assert_string_equal(x->name, y->name);
    assert_int_equal(x->type.kind, y->type.kind);
    assert_int_equal(x->type.optional, y->type.optional);
    assert_int_equal(x->type.dtype, y->type.dtype);
    assert_int_equal(x->type.rank, y->type.rank);
    for (int32_t d = 0; d < x->type.rank; d++) {
      assert_int_equal(x->type.dims[d], y->type.dims[d]);
      if (x->dim_params[d]) assert_string_equal(x->dim_params[d], y->dim_params[d]);
      else assert_null(y->dim_params[d]);
    }
    assert_int_equal(x->outer, y->outer);
    assert_int_equal(x->producer, y->producer);
    assert_int_equal(x->is_input, y->is_input);
    assert_int_equal(x->is_output, y->is_output);
    assert_int_equal(!x->constant, !y->constant);
    if (x->constant) {
      compare_tensor(x->constant, y->constant);
      if (y->constant->dtype != KN_DTYPE_STRING) assert_int_equal(y->constant->owned, 0);
    }
  }
  assert_int_equal(a->n_inputs, b->n_inputs);
  for (int32_t i = 0; i < a->n_inputs; i++) assert_int_equal(a->inputs[i], b->inputs[i]);
  assert_int_equal(a->n_outputs, b->n_outputs);
  for (int32_t i = 0; i < a->n_outputs; i++) assert_int_equal(a->outputs[i], b->outputs[i]);
  assert_int_equal(a->n_nodes, b->n_nodes);
  for (int32_t i = 0; i < a->n_nodes; i++) {
    const kn_node *x = &a->nodes[i], *y = &b->nodes[i];
    assert_string_equal(x->name, y->name);
    if (x->covers) assert_string_equal(x->covers, y->covers);
    else assert_null(y->covers);
    assert_string_equal(x->op_type, y->op_type);
    assert_string_equal(x->domain, y->domain);
    assert_int_equal(x->n_inputs, y->n_inputs);
    for (int32_t k = 0; k < x->n_inputs; k++) assert_int_equal(x->inputs[k], y->inputs[k]);
    assert_int_equal(x->n_outputs, y->n_outputs);
    for (int32_t k = 0; k < x->n_outputs; k++) assert_int_equal(x->outputs[k], y->outputs[k]);
    assert_int_equal(x->n_attrs, y->n_attrs);
    for (int32_t k = 0; k < x->n_attrs; k++) compare_attr(&x->attrs[k], &y->attrs[k]);
  }
}

static void compare_models(const kn_ir_model *a, const kn_ir_model *b) {
  assert_int_equal(a->ir_version, b->ir_version);
  assert_int_equal(a->n_opsets, b->n_opsets);
  for (int32_t i = 0; i < a->n_opsets; i++) {
    assert_string_equal(a->opsets[i].domain, b->opsets[i].domain);
    assert_int_equal(a->opsets[i].version, b->opsets[i].version);
  }
  compare_graph(a->graph, b->graph);
}

/* ---- running ---------------------------------------------------------------- */

/* Run ir on the case's test_data_set_0 inputs; outputs appended to outs. */
static void run_model(kn_ir_model *ir, const char *case_dir, kn_tensor *outs, int32_t *n_out) {
  kn_error err;
  kn_model m = {.ir = ir};
  const kn_graph *g = ir->graph;
  m.inputs = calloc((size_t)g->n_inputs + 1, sizeof *m.inputs);
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (!g->values[g->inputs[i]].constant) m.inputs[m.n_inputs++] = i;
  kn_context *c = NULL;
  if (kn_context_create(&m, &c, &err)) fail_msg("%s", err.msg);
  kn_tensor ins[16];
  memset(ins, 0, sizeof ins);
  assert_true(m.n_inputs <= 16);
  for (int32_t i = 0; i < m.n_inputs; i++) {
    char p[512];
    snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", case_dir, i);
    if (kn_tensor_read_file(p, &ins[i], NULL, &err)) fail_msg("%s", err.msg);
    if (kn_context_set_input(c, i, &ins[i], &err)) fail_msg("%s", err.msg);
  }
  if (kn_context_run(c, &err)) fail_msg("%s: %s", case_dir, err.msg);
  *n_out = g->n_outputs;
  for (int32_t o = 0; o < g->n_outputs; o++) {
    const kn_tensor *t = kn_context_output(c, o);
    assert_non_null(t);
    if (kn_tensor_copy(&outs[o], t, &err)) fail_msg("%s", err.msg);
  }
  kn_context_free(c);
  for (int32_t i = 0; i < m.n_inputs; i++) kn_tensor_release(&ins[i]);
  free(m.inputs);
}

/* A hand-made plan over the top-level graph's intermediates. */
static kn_mem_plan make_plan(const kn_graph *g) {
  kn_mem_plan p = {.alignment = 64};
  p.tensors = calloc((size_t)g->n_values + 1, sizeof *p.tensors);
  uint64_t off = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (g->values[v].producer < 0) continue;
    kn_plan_tensor *t = &p.tensors[p.n_tensors++];
    t->value = v;
    t->bytes = 256;
    t->first = g->values[v].producer;
    t->last = g->n_nodes - 1;
    t->offset = g->values[v].is_output ? -1 : (int64_t)off;
    t->inplace_of = -1;
    t->view_of = -1;
    if (!g->values[v].is_output) off += 256;
  }
  p.arena_bytes = off;
  p.lower_bound_bytes = off;
  p.naive_bytes = off;
  return p;
}

static void round_trip_case(fixture *f, const char *name) {
  char model[640], engine[512], engine2[512], dir[512];
  snprintf(dir, sizeof dir, NODE_DIR "%s", name);
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  snprintf(engine, sizeof engine, "%s/%s.kiln", f->dir, name);
  snprintf(engine2, sizeof engine2, "%s/%s.again.kiln", f->dir, name);
  kn_error err;
  kn_ir_model *a = load_onnx(model);
  kn_mem_plan plan = make_plan(a->graph);
  const char *shapes[] = {"x=1x2"};
  kn_engine_config cfg = {.precision = "fp32", .n_shapes = 1, .shapes = shapes,
                          .workspace_bytes = 1 << 20};
  if (kn_engine_write(a, &plan, &cfg, engine, &err)) fail_msg("%s", err.msg);

  kn_ir_model *b = NULL;
  kn_mem_plan rp;
  kn_engine_info info;
  if (kn_engine_read(engine, &b, &rp, &info, &err)) fail_msg("%s", err.msg);
  compare_models(a, b);
  assert_int_equal(info.format_version, KN_ENGINE_FORMAT_VERSION);
  assert_string_equal(info.kiln_version, KN_VERSION_STRING);
  assert_true(info.has_plan);
  assert_int_equal(info.n_config, 3);
  assert_string_equal(info.config_keys[1], "shape");
  assert_string_equal(info.config_values[1], "x=1x2");
  assert_string_equal(info.config_values[2], "1048576");
  assert_int_equal(rp.n_tensors, plan.n_tensors);
  assert_int_equal(rp.arena_bytes, plan.arena_bytes);
  if (plan.n_tensors)
    assert_memory_equal(rp.tensors, plan.tensors, (size_t)plan.n_tensors * sizeof *plan.tensors);
  kn_engine_info_free(&info);
  free(rp.tensors);

  /* the buffer variant decodes the same model */
  size_t size;
  void *bytes = read_bytes(engine, &size);
  kn_ir_model *c = NULL;
  if (kn_engine_read_buffer(bytes, size, "buf", &c, NULL, NULL, &err)) fail_msg("%s", err.msg);
  free(bytes);

  if (kn_ops_prepare(b, &err)) fail_msg("%s", err.msg);
  if (kn_ops_prepare(c, &err)) fail_msg("%s", err.msg);
  kn_tensor oa[8], ob[8], oc[8];
  memset(oa, 0, sizeof oa);
  memset(ob, 0, sizeof ob);
  memset(oc, 0, sizeof oc);
  int32_t na = 0, nb = 0, nc = 0;
  run_model(a, dir, oa, &na);
  run_model(b, dir, ob, &nb);
  run_model(c, dir, oc, &nc);
  assert_int_equal(na, nb);
  assert_int_equal(na, nc);
  for (int32_t o = 0; o < na; o++) {
    compare_tensor(&oa[o], &ob[o]);
    compare_tensor(&oa[o], &oc[o]);
    kn_tensor_release(&oa[o]);
    kn_tensor_release(&ob[o]);
    kn_tensor_release(&oc[o]);
  }

  /* the model read back writes the same bytes */
  if (kn_engine_write(b, &plan, &cfg, engine2, &err)) fail_msg("%s", err.msg);
  size_t s1, s2;
  void *b1 = read_bytes(engine, &s1), *b2 = read_bytes(engine2, &s2);
  assert_int_equal(s1, s2);
  assert_memory_equal(b1, b2, s1);
  free(b1);
  free(b2);
  free(plan.tensors);
  kn_ir_model_free(a);
  kn_ir_model_free(b);
  kn_ir_model_free(c);
}

static void test_round_trip_models(void **state) {
  static const char *cases[] = {
      "test_if", "test_loop11", "test_scan9_sum", "test_constant",
      "test_conv_with_strides_padding", "test_gemm_default_vector_bias",
      "test_cast_FLOAT_to_STRING", "test_constantofshape_int_zeros",
      "test_strnormalizer_export_monday_casesensintive_lower", "test_lstm_defaults",
      "test_range_float_type_positive_delta_expanded", "test_layer_normalization_4d_axis1"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) round_trip_case(*state, cases[i]);
}

/* A small hand-built model: initializers (numeric and string), a symbolic
 * batch dim, a fused node's covers list. */
static kn_ir_model *hand_model(void) {
  kn_error err;
  kn_ir_model *m = calloc(1, sizeof *m);
  m->label = kn_strdup("hand");
  m->ir_version = 8;
  m->n_opsets = 1;
  m->opsets = calloc(1, sizeof *m->opsets);
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = 17;
  kn_graph *g = m->graph = kn_graph_new(NULL);
  g->name = kn_strdup("main");
  int32_t x = kn_graph_add_value(g, "x");
  g->values[x].is_input = true;
  g->values[x].type = (kn_type){.kind = KN_KIND_TENSOR, .dtype = KN_DTYPE_F32, .rank = 2,
                                .dims = {-1, 3}};
  g->values[x].dim_params[0] = kn_strdup("batch");
  kn_tensor w;
  int64_t wd[2] = {3, 5};
  assert_int_equal(kn_tensor_alloc(&w, KN_DTYPE_F32, 2, wd, &err), KN_OK);
  for (int i = 0; i < 15; i++) ((float *)w.data)[i] = (float)i * 0.25f - 1.0f;
  int32_t wv = kn_graph_add_constant(g, "W", &w);
  kn_tensor s;
  int64_t sd[1] = {3};
  assert_int_equal(kn_tensor_alloc(&s, KN_DTYPE_STRING, 1, sd, &err), KN_OK);
  ((char **)s.data)[0] = kn_strdup("a");
  ((char **)s.data)[1] = kn_strdup("");
  ((char **)s.data)[2] = kn_strdup("longer string");
  int32_t sv = kn_graph_add_constant(g, "labels", &s);
  int32_t y = kn_graph_add_fresh_value(g, "y");
  int32_t z = kn_graph_add_fresh_value(g, "z");
  int32_t in1[2] = {x, wv};
  int32_t n1 = kn_graph_new_node(g, "MatMul", "", "mm", 2, in1, 1, &y);
  int32_t n2 = kn_graph_new_node(g, "Relu", "", "relu", 1, &y, 1, &z);
  assert_true(n1 >= 0 && n2 >= 0);
  assert_true(kn_node_add_covers(&g->nodes[n2], &g->nodes[n1]));
  int32_t lab = kn_graph_add_fresh_value(g, "labels_out");
  assert_true(kn_graph_new_node(g, "Identity", "", "id", 1, &sv, 1, &lab) >= 0);
  g->outputs = calloc(2, sizeof *g->outputs);
  g->outputs[g->n_outputs++] = z;
  g->outputs[g->n_outputs++] = lab;
  g->values[z].is_output = g->values[lab].is_output = true;
  g->inputs = calloc(1, sizeof *g->inputs);
  g->inputs[g->n_inputs++] = x;
  if (kn_graph_finish(g, "hand", &err)) fail_msg("%s", err.msg);
  if (kn_ops_prepare(m, &err)) fail_msg("%s", err.msg);
  return m;
}

static void test_hand_model_and_determinism(void **state) {
  fixture *f = *state;
  kn_error err;
  char p1[128], p2[128];
  snprintf(p1, sizeof p1, "%s/h1.kiln", f->dir);
  snprintf(p2, sizeof p2, "%s/h2.kiln", f->dir);
  kn_ir_model *a = hand_model();
  assert_int_equal(kn_engine_write(a, NULL, NULL, p1, &err), KN_OK);
  kn_ir_model *a2 = hand_model();
  assert_int_equal(kn_engine_write(a2, NULL, NULL, p2, &err), KN_OK);
  size_t s1, s2;
  uint8_t *b1 = read_bytes(p1, &s1), *b2 = read_bytes(p2, &s2);
  assert_int_equal(s1, s2);
  assert_memory_equal(b1, b2, s1);
  assert_true(kn_engine_is_file(p1));
  assert_false(kn_engine_is_file(NODE_DIR "test_if/model.onnx"));
  assert_false(kn_engine_is_file("/nonexistent/engine.kiln"));

  kn_ir_model *b = NULL;
  kn_mem_plan plan;
  kn_engine_info info;
  assert_int_equal(kn_engine_read(p1, &b, &plan, &info, &err), KN_OK);
  compare_models(a, b);
  assert_false(info.has_plan);
  assert_int_equal(plan.n_tensors, 0);
  assert_int_equal(info.n_tensors, 2);
  /* zero copy: the weights point into the 64-byte aligned mapping */
  const kn_tensor *w = b->graph->values[kn_graph_find(b->graph, "W")].constant;
  assert_int_equal(w->owned, 0);
  assert_true((uint8_t *)w->data >= (uint8_t *)b->mapping &&
              (uint8_t *)w->data < (uint8_t *)b->mapping + b->mapping_size);
  assert_int_equal((uintptr_t)w->data % 64, 0);
  assert_int_equal(kn_ops_prepare(b, &err), KN_OK);
  kn_engine_info_free(&info);
  free(b1);
  free(b2);
  kn_ir_model_free(a);
  kn_ir_model_free(a2);
  kn_ir_model_free(b);
}

/* ---- damage ------------------------------------------------------------------ */

static void expect_refused(const void *buf, size_t size, kn_status status, const char *msg) {
  kn_error err;
  memset(&err, 0, sizeof err);
  kn_ir_model *m = NULL;
  kn_mem_plan plan;
  kn_engine_info info;
  kn_status st = kn_engine_read_buffer(buf, size, "e.kiln", &m, &plan, &info, &err);
  if (st == KN_OK) fail_msg("accepted a damaged engine (expected '%s')", msg);
  assert_null(m);
  assert_int_equal(st, status);
  if (!strstr(err.msg, msg)) fail_msg("message '%s' lacks '%s'", err.msg, msg);
  assert_null(strchr(err.msg, '\n'));
}

static uint8_t *engine_image(fixture *f, const kn_engine_config *cfg, size_t *size) {
  kn_error err;
  char p[128];
  snprintf(p, sizeof p, "%s/damage.kiln", f->dir);
  kn_ir_model *m = load_onnx(NODE_DIR "test_if/model.onnx");
  kn_mem_plan plan = make_plan(m->graph);
  if (kn_engine_write(m, &plan, cfg, p, &err)) fail_msg("%s", err.msg);
  free(plan.tensors);
  kn_ir_model_free(m);
  return read_bytes(p, size);
}

static void section_bounds(const uint8_t *b, uint32_t type, uint64_t *off, uint64_t *size) {
  uint64_t table = 0, n = 0;
  memcpy(&table, b + 72, 8);
  memcpy(&n, b + 68, 4);
  for (uint64_t i = 0; i < n; i++) {
    uint32_t t;
    memcpy(&t, b + table + 32 * i, 4);
    if (t == type) {
      memcpy(off, b + table + 32 * i + 8, 8);
      memcpy(size, b + table + 32 * i + 16, 8);
      return;
    }
  }
  fail_msg("no section %u", type);
}

static void test_truncated(void **state) {
  size_t size;
  uint8_t *b = engine_image(*state, NULL, &size);
  for (size_t cut = 0; cut < size; cut += (cut < 256 ? 1 : 7)) {
    uint8_t *c = malloc(cut + 1);
    memcpy(c, b, cut);
    expect_refused(c, cut, KN_ERR_PARSE, cut < 8 ? "bad magic" : "truncated");
    free(c);
  }
  /* a cut inside a section names it */
  uint64_t off, len;
  section_bounds(b, KN_ENGINE_SECTION_WEIGHTS, &off, &len);
  char msg[160];
  snprintf(msg, sizeof msg, "truncated: section WEIGHTS needs bytes %llu..%llu but the file has %llu",
           (unsigned long long)off, (unsigned long long)(off + len),
           (unsigned long long)(size - 1));
  expect_refused(b, size - 1, KN_ERR_PARSE, msg);

  /* the same through a file, and files that are not there */
  fixture *f = *state;
  char p[128];
  snprintf(p, sizeof p, "%s/cut.kiln", f->dir);
  FILE *fp = fopen(p, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(b, 1, size - 1, fp), size - 1);
  fclose(fp);
  kn_error err;
  kn_ir_model *m = NULL;
  assert_int_equal(kn_engine_read(p, &m, NULL, NULL, &err), KN_ERR_PARSE);
  assert_non_null(strstr(err.msg, msg));
  assert_non_null(strstr(err.msg, p));
  assert_null(m);
  assert_int_equal(kn_engine_read("/nonexistent/x.kiln", &m, NULL, NULL, &err), KN_ERR_IO);
  assert_int_equal(kn_engine_read(f->dir, &m, NULL, NULL, &err), KN_ERR_IO);
  fp = fopen(p, "wb");
  fclose(fp);
  assert_int_equal(kn_engine_read(p, &m, NULL, NULL, &err), KN_ERR_PARSE);
  assert_non_null(strstr(err.msg, "bad magic"));
  free(b);
}

static void test_write_errors(void **state) {
  (void)state;
  kn_error err;
  kn_ir_model *m = hand_model();
  assert_int_equal(kn_engine_write(m, NULL, NULL, "/nonexistent/dir/e.kiln", &err), KN_ERR_IO);
  assert_non_null(strstr(err.msg, "/nonexistent/dir/e.kiln"));
  m->graph->nodes[0].dead = true;
  assert_int_equal(kn_engine_write(m, NULL, NULL, "/tmp/never.kiln", &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "compact the graph"));
  kn_ir_model_free(m);
}

static void test_flipped_bytes(void **state) {
  size_t size;
  uint8_t *b = engine_image(*state, NULL, &size);
  static const char *names[] = {NULL, "GRAPH", "TENSORS", "PLAN", "WEIGHTS"};
  for (uint32_t type = 1; type <= 4; type++) {
    uint64_t off, len;
    section_bounds(b, type, &off, &len);
    assert_true(len > 0);
    uint64_t at[3] = {off, off + len / 2, off + len - 1};
    for (int k = 0; k < 3; k++) {
      b[at[k]] ^= 0x10;
      char msg[96];
      snprintf(msg, sizeof msg, "section %s checksum mismatch: the file is corrupted",
               names[type]);
      expect_refused(b, size, KN_ERR_PARSE, msg);
      b[at[k]] ^= 0x10;
    }
  }
  b[20] ^= 1; /* kiln version */
  expect_refused(b, size, KN_ERR_PARSE, "header checksum mismatch");
  b[20] ^= 1;
  b[100] ^= 1; /* build configuration */
  expect_refused(b, size, KN_ERR_PARSE, "header checksum mismatch");
  b[100] ^= 1;
  b[0] = 'X';
  expect_refused(b, size, KN_ERR_PARSE, "not a kiln engine (bad magic)");
  b[0] = 'K';
  uint8_t v0 = b[8];
  b[8] = (uint8_t)(KN_ENGINE_FORMAT_VERSION + 1);
  char vmsg[128];
  snprintf(vmsg, sizeof vmsg,
           "engine format version %u is newer than this kiln supports (%u); rebuild it",
           KN_ENGINE_FORMAT_VERSION + 1, KN_ENGINE_FORMAT_VERSION);
  expect_refused(b, size, KN_ERR_UNSUPPORTED, vmsg);
  b[8] = v0;
  /* trailing garbage */
  uint8_t *longer = calloc(size + 64, 1);
  memcpy(longer, b, size);
  expect_refused(longer, size + 64, KN_ERR_PARSE, "trailing bytes");
  free(longer);
  /* intact, it still loads */
  kn_error err;
  kn_ir_model *m = NULL;
  assert_int_equal(kn_engine_read_buffer(b, size, "e", &m, NULL, NULL, &err), KN_OK);
  kn_ir_model_free(m);
  free(b);
}

static void test_cpu_features(void **state) {
  size_t size;
  kn_engine_config cfg = {.cpu_features = UINT64_C(1) << 40};
  uint8_t *b = engine_image(*state, &cfg, &size);
  expect_refused(b, size, KN_ERR_UNSUPPORTED, "needs bit 40 which this CPU lacks");
  free(b);
  uint64_t lacking = ~kn_cpu_features() & KN_CPU_KNOWN_MASK;
  if (lacking) {
    cfg.cpu_features = lacking;
    b = engine_image(*state, &cfg, &size);
    char names[256], msg[300];
    snprintf(msg, sizeof msg, "needs %s which this CPU lacks",
             kn_cpu_features_str(lacking, names, sizeof names));
    expect_refused(b, size, KN_ERR_UNSUPPORTED, msg);
    free(b);
  }
  /* what this machine has is accepted */
  cfg.cpu_features = kn_cpu_features();
  b = engine_image(*state, &cfg, &size);
  kn_error err;
  kn_ir_model *m = NULL;
  assert_int_equal(kn_engine_read_buffer(b, size, "e", &m, NULL, NULL, &err), KN_OK);
  kn_ir_model_free(m);
  free(b);
  char buf[256];
  assert_string_equal(kn_cpu_features_str(KN_CPU_BIT(AVX512F) | KN_CPU_BIT(AVX512BW), buf,
                                          sizeof buf),
                      "avx512f, avx512bw");
  assert_string_equal(kn_cpu_features_str(0, buf, sizeof buf), "none");
}

/* Bytes changed inside the sections and the checksums recomputed: the
 * decoder's own checks must catch whatever is inconsistent, and nothing
 * that loads may crash inference. */
static void test_resealed_damage(void **state) {
  size_t size;
  uint8_t *b = engine_image(*state, NULL, &size);
  uint8_t *c = malloc(size);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  uint64_t first, len;
  section_bounds(b, KN_ENGINE_SECTION_GRAPH, &first, &len);
  int loaded = 0;
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(c, b, size);
    int flips = 1 + iter % 3;
    for (int k = 0; k < flips; k++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      size_t at = first + (size_t)(rng % (size - first));
      c[at] = (uint8_t)(rng >> 32);
    }
    assert_true(kn_engine_reseal(c, size));
    kn_error err;
    kn_ir_model *m = NULL;
    kn_mem_plan plan;
    kn_status st = kn_engine_read_buffer(c, size, "e", &m, &plan, NULL, &err);
    if (st == KN_OK) {
      loaded++;
      if (kn_ops_prepare(m, &err) != KN_OK) assert_null(strchr(err.msg, '\n'));
      free(plan.tensors);
      kn_ir_model_free(m);
    } else {
      assert_null(strchr(err.msg, '\n'));
    }
  }
  assert_true(loaded > 0); /* weights bytes change values, not structure */
  free(c);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_models),
      cmocka_unit_test(test_hand_model_and_determinism),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_write_errors),
      cmocka_unit_test(test_flipped_bytes),
      cmocka_unit_test(test_cpu_features),
      cmocka_unit_test(test_resealed_damage),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
