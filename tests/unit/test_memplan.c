/* Memory planner: lifetimes, placement, in-place reuse, the checker, the
 * workspace cap, and the executor running with an arena (results equal to
 * the unplanned run) on hand-built graphs and on the real models in
 * ~/.cache/kiln/models when present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "onnx/onnx.h"
#include "passes/pass.h"
#include "plan/plan.h"
#include "testkit.h"

#include <math.h>
#include <sys/stat.h>

/* ---- building small graphs --------------------------------------------- */

static kn_ir_model *model_new(void) {
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  assert_non_null(m);
  m->graph = kn_graph_new(NULL);
  m->ir_version = 8;
  m->n_opsets = 1;
  m->opsets = kn_calloc(1, sizeof *m->opsets);
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = 17;
  m->label = kn_strdup("memplan-test");
  return m;
}

/* A float graph input of shape n x c. */
static int32_t input(kn_graph *g, const char *name, int64_t n, int64_t c) {
  int32_t v = kn_graph_add_value(g, name);
  assert_true(v >= 0);
  kn_value *val = &g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = 2;
  val->type.dims[0] = n;
  val->type.dims[1] = c;
  assert_true(KN_GROW(g->inputs, g->n_inputs, g->n_inputs + 1));
  g->inputs[g->n_inputs - 1] = v;
  return v;
}

/* An int64 constant [a, b] (a Reshape target). */
static int32_t shape2(kn_graph *g, int64_t a, int64_t b) {
  kn_error err;
  kn_tensor t;
  int64_t dims[1] = {2};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_I64, 1, dims, &err), KN_OK);
  ((int64_t *)t.data)[0] = a;
  ((int64_t *)t.data)[1] = b;
  int32_t v = kn_graph_add_constant(g, "shape", &t);
  assert_true(v >= 0);
  return v;
}

/* Node `op` reading in0 (and in1 when >= 0), making a new value `out`. */
static int32_t node(kn_graph *g, const char *op, int32_t in0, int32_t in1, const char *out) {
  int32_t o = kn_graph_add_value(g, out);
  assert_true(o >= 0);
  int32_t ins[2] = {in0, in1};
  assert_true(kn_graph_new_node(g, op, "", out, in1 >= 0 ? 2 : 1, ins, 1, &o) >= 0);
  return o;
}

static int32_t concat(kn_graph *g, int32_t a, int32_t b, const char *out) {
  int32_t o = node(g, "Concat", a, b, out);
  assert_true(kn_node_set_int(&g->nodes[g->n_nodes - 1], "axis", 1));
  return o;
}

static void prepare(kn_ir_model *m) {
  kn_error err = {0};
  if (kn_graph_finish(m->graph, "t", &err) || kn_ops_prepare(m, &err)) fail_msg("%s", err.msg);
}

static const kn_plan_tensor *tensor_of(const kn_mem_plan *p, int32_t v) {
  for (int32_t i = 0; i < p->n_tensors; i++)
    if (p->tensors[i].value == v) return &p->tensors[i];
  fail_msg("value %d is not in the plan", v);
  return NULL;
}

/* Plan g, check the plan's invariants and return it. */
static void plan_ok(const kn_graph *g, kn_mem_plan *p) {
  kn_error err = {0};
  char why[512];
  if (kn_plan_memory(g, 0, p, &err)) fail_msg("%s", err.msg);
  if (!kn_plan_check(p, why, sizeof why)) {
    kn_plan_print(p, g, stderr);
    fail_msg("%s", why);
  }
  uint64_t aligned = 0; /* the naive sum with each tensor padded to 64 bytes */
  for (int32_t i = 0; i < p->n_tensors; i++)
    if (p->tensors[i].offset >= 0) aligned += (p->tensors[i].bytes + 63) / 64 * 64;
  assert_true(p->arena_bytes <= aligned);
  assert_true(p->arena_bytes >= p->lower_bound_bytes);
  assert_int_equal(p->alignment, 64);
}

/* ---- running with and without a plan ------------------------------------ */

/* Runs the top-level graph on `ins` (one slot per graph input), with the
 * plan when given (the arena is filled with garbage first), writing owned
 * outputs into outs; *touched: arena bytes the run changed. */
static kn_status run_graph(const kn_ir_model *m, const kn_mem_plan *plan, kn_slot *ins,
                           kn_slot *outs, uint64_t *touched, kn_error *err) {
  const kn_graph *g = m->graph;
  const kn_slot **pin = kn_calloc((size_t)g->n_inputs + 1, sizeof *pin);
  assert_non_null(pin);
  for (int32_t i = 0; i < g->n_inputs; i++)
    pin[i] = g->values[g->inputs[i]].constant ? NULL : &ins[i];
  void *arena = NULL;
  if (plan) {
    arena = aligned_alloc(64, plan->arena_bytes ? plan->arena_bytes : 64);
    assert_non_null(arena);
    memset(arena, 0xff, plan->arena_bytes); /* NaNs: nothing may rely on old bytes */
  }
  kn_mem_budget mem = {.limit = UINT64_MAX, .live = 0, .plan = plan, .arena = arena};
  kn_status st = kn_exec_graph(m, g, NULL, pin, outs, &mem, err);
  *touched = 0;
  for (uint64_t i = 0; plan && i < plan->arena_bytes; i++)
    *touched += ((uint8_t *)arena)[i] != 0xff;
  free(arena);
  free(pin);
  return st;
}

/* Runs m planned and unplanned on `ins` and asserts identical outputs,
 * and that the planned run used the arena when `uses_arena`. */
static void same_results(const kn_ir_model *m, const kn_mem_plan *plan, kn_slot *ins,
                         bool uses_arena) {
  const kn_graph *g = m->graph;
  kn_error err = {0};
  kn_slot *a = kn_calloc((size_t)g->n_outputs + 1, sizeof *a);
  kn_slot *b = kn_calloc((size_t)g->n_outputs + 1, sizeof *b);
  assert_non_null(a);
  assert_non_null(b);
  uint64_t touched;
  if (run_graph(m, NULL, ins, a, &touched, &err)) fail_msg("unplanned: %s", err.msg);
  if (run_graph(m, plan, ins, b, &touched, &err)) fail_msg("planned: %s", err.msg);
  if (uses_arena) assert_true(touched > 0);
  else assert_int_equal(touched, 0);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    assert_int_equal(a[o].kind, b[o].kind);
    if (a[o].kind == KN_KIND_TENSOR) {
      double d = tk_max_abs_diff(&a[o].t, &b[o].t);
      if (d != 0) fail_msg("output %d differs by %g", o, d);
    }
    kn_slot_release(&a[o]);
    kn_slot_release(&b[o]);
  }
  free(a);
  free(b);
}

/* Random-ish inputs for every non-initializer graph input (2-D float). */
static kn_slot *make_inputs(const kn_graph *g) {
  kn_slot *ins = kn_calloc((size_t)g->n_inputs + 1, sizeof *ins);
  assert_non_null(ins);
  kn_error err;
  uint32_t s = 12345;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->constant) continue;
    ins[i].kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&ins[i].t, v->type.dtype, v->type.rank, v->type.dims, &err),
                     KN_OK);
    float *f = ins[i].t.data;
    for (int64_t k = 0; k < kn_tensor_numel(&ins[i].t); k++) {
      s = s * 1664525u + 1013904223u;
      f[k] = (float)((s >> 8) % 2000) / 1000.0f - 1.0f;
    }
  }
  return ins;
}

static void free_inputs(const kn_graph *g, kn_slot *ins) {
  for (int32_t i = 0; i < g->n_inputs; i++) kn_slot_release(&ins[i]);
  free(ins);
}

static void plan_and_compare(kn_ir_model *m, kn_mem_plan *p) {
  plan_ok(m->graph, p);
  kn_slot *ins = make_inputs(m->graph);
  same_results(m, p, ins, true);
  free_inputs(m->graph, ins);
}

/* ---- hand-built graphs --------------------------------------------------- */

/* A chain of Adds: only two buffers are ever live, so the arena ping-pongs. */
static void test_chain(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, 16); /* 256 bytes */
  int32_t v = node(g, "Add", x, x, "t0");
  char name[16];
  for (int i = 1; i < 8; i++) {
    snprintf(name, sizeof name, "t%d", i);
    v = node(g, "Add", v, x, name);
  }
  int32_t y = node(g, "Add", v, x, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  plan_and_compare(m, &p);
  assert_int_equal(p.naive_bytes, 8 * 256);
  assert_int_equal(p.lower_bound_bytes, 2 * 256);
  assert_int_equal(p.arena_bytes, 2 * 256);
  assert_int_equal(tensor_of(&p, v)->first, 7);
  assert_int_equal(tensor_of(&p, v)->last, 8);
  for (int32_t i = 0; i < p.n_tensors; i++) assert_int_equal(p.tensors[i].inplace_of, -1);
  for (int32_t i = 0; i < p.n_tensors; i++) assert_int_not_equal(p.tensors[i].value, y);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

/* A diamond with branches of different sizes, and a tensor that lives from
 * the first step to the last. */
static void test_diamond_long_lived(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 8, 32);           /* 1 KiB */
  int32_t keep = node(g, "Add", x, x, "keep"); /* read again at the end */
  int32_t a = node(g, "Mul", x, x, "a");
  int32_t wide = concat(g, a, a, "wide");     /* 2 KiB */
  int32_t b = node(g, "Sub", x, a, "b");
  int32_t wide2 = concat(g, wide, wide, "wide2"); /* 4 KiB */
  int32_t c = node(g, "Add", a, b, "c");
  int32_t d = node(g, "ReduceSum", wide2, -1, "d"); /* 1x1 */
  int32_t e = node(g, "Add", c, d, "e");
  int32_t f = node(g, "Add", e, keep, "f");
  tk_output(g, f);
  prepare(m);
  kn_mem_plan p;
  plan_and_compare(m, &p);
  assert_int_equal(tensor_of(&p, keep)->first, 0);
  assert_int_equal(tensor_of(&p, keep)->last, 8);
  assert_int_equal(tensor_of(&p, a)->last, 5);
  assert_true(p.arena_bytes < p.naive_bytes);
  assert_true(p.arena_bytes <= p.lower_bound_bytes + p.lower_bound_bytes / 10);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

/* Unary and aliasing ops reuse their input's buffer along a chain; the
 * whole chain is one buffer. */
static void test_inplace_chain(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, 16);
  int32_t t0 = node(g, "Add", x, x, "t0");
  int32_t t1 = node(g, "Relu", t0, -1, "t1");
  int32_t t2 = node(g, "Exp", t1, -1, "t2");
  int32_t t3 = node(g, "Reshape", t2, shape2(g, 8, 8), "t3");
  int32_t t4 = node(g, "Sigmoid", t3, -1, "t4");
  int32_t t5 = node(g, "Flatten", t4, -1, "t5");
  int32_t y = node(g, "Neg", t5, -1, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  plan_and_compare(m, &p);
  assert_int_equal(tensor_of(&p, t0)->inplace_of, -1);
  assert_int_equal(tensor_of(&p, t1)->inplace_of, t0);
  assert_int_equal(tensor_of(&p, t2)->inplace_of, t1);
  assert_int_equal(tensor_of(&p, t3)->inplace_of, t2);
  assert_int_equal(tensor_of(&p, t4)->inplace_of, t3);
  assert_int_equal(tensor_of(&p, t5)->inplace_of, t4);
  assert_int_equal(p.arena_bytes, 256);
  assert_int_equal(p.lower_bound_bytes, 256);
  assert_int_equal(p.naive_bytes, 6 * 256);
  int64_t off = tensor_of(&p, t0)->offset;
  for (int32_t i = 0; i < p.n_tensors; i++) assert_int_equal(p.tensors[i].offset, off);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

/* Where in-place must not happen: the input is read again later, is a graph
 * input, is a graph output, or has another size. */
static void test_inplace_refused(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, 16);
  int32_t r0 = node(g, "Relu", x, -1, "r0");     /* input is a graph input */
  int32_t r1 = node(g, "Exp", r0, -1, "r1");     /* r0 is read again below */
  int32_t s = node(g, "Add", r0, r1, "s");
  int32_t out1 = node(g, "Sigmoid", s, -1, "out1"); /* a graph output */
  tk_output(g, out1);
  int32_t n0 = node(g, "Tanh", out1, -1, "n0");  /* input is a graph output */
  int32_t b = node(g, "IsNaN", n0, -1, "b");     /* bool: another size */
  int32_t nb = node(g, "Not", b, -1, "nb");      /* bool over bool: in place */
  int32_t c = node(g, "Cast", nb, -1, "c");
  assert_true(kn_node_set_int(&g->nodes[g->n_nodes - 1], "to", KN_DTYPE_F32));
  int32_t y = node(g, "Add", c, n0, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  plan_and_compare(m, &p);
  assert_int_equal(tensor_of(&p, r0)->inplace_of, -1);
  assert_int_equal(tensor_of(&p, r1)->inplace_of, -1);
  assert_int_equal(tensor_of(&p, n0)->inplace_of, -1);
  assert_int_equal(tensor_of(&p, b)->inplace_of, -1);
  assert_int_equal(tensor_of(&p, nb)->inplace_of, b);
  assert_int_equal(tensor_of(&p, s)->inplace_of, -1);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

/* Tensors whose size is not known statically stay out of the arena, and the
 * executor allocates them; a plan made for other shapes falls back too. */
static void test_unknown_sizes(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", -1, 16); /* dynamic batch */
  int32_t z = input(g, "z", 4, 16);
  int32_t a = node(g, "Relu", x, -1, "a");
  int32_t c = node(g, "Exp", a, -1, "c");
  int32_t b = node(g, "Exp", z, -1, "b");
  int32_t y = node(g, "Add", c, b, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  plan_ok(g, &p);
  assert_int_equal(tensor_of(&p, a)->offset, -1);
  assert_int_equal(tensor_of(&p, c)->offset, -1);
  assert_int_equal(tensor_of(&p, c)->inplace_of, -1);
  assert_true(tensor_of(&p, b)->offset >= 0);
  assert_int_equal(p.naive_bytes, 256);
  /* run with batch 4: a is allocated, b goes in the arena */
  g->values[x].type.dims[0] = 4;
  kn_slot *ins = make_inputs(g);
  same_results(m, &p, ins, true);
  free_inputs(g, ins);
  kn_mem_plan_free(&p);

  /* a plan for batch 4 (a --profile MAX), run at batch 2: every tensor is
   * smaller than its slot and still runs in the arena, with equal results */
  kn_error err = {0};
  if (kn_ops_prepare(m, &err)) fail_msg("%s", err.msg);
  plan_ok(g, &p);
  assert_true(tensor_of(&p, c)->offset >= 0);
  g->values[x].type.dims[0] = 2;
  g->values[z].type.dims[0] = 1;
  ins = make_inputs(g);
  same_results(m, &p, ins, true);
  free_inputs(g, ins);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

static void test_workspace_cap(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 4, 16);
  int32_t a = node(g, "Add", x, x, "a");
  int32_t b = node(g, "Mul", a, x, "b");
  int32_t y = node(g, "Add", a, b, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  kn_error err = {0};
  assert_int_equal(kn_plan_memory(g, 512, &p, &err), KN_OK);
  assert_int_equal(p.arena_bytes, 512);
  kn_mem_plan_free(&p);
  assert_int_equal(kn_plan_memory(g, 500, &p, &err), KN_ERR_LIMIT);
  assert_string_equal(err.msg, "workspace of 500 bytes is too small: the plan needs 512 bytes "
                               "(12 over)");
  assert_int_equal(p.n_tensors, 0);
  assert_null(p.tensors);
  kn_ir_model_free(m);
}

/* A Concat along an axis with only size-1 dims before it holds its inputs
 * as parts of its output: they are made in place (nested Concats too) and
 * nothing is copied; the run with the plan (a garbage arena) equals the run
 * without.  A Concat reading one value twice keeps its inputs copies. */
static void test_concat_parts(void **state) {
  (void)state;
  kn_ir_model *m = model_new();
  kn_graph *g = m->graph;
  int32_t x = input(g, "x", 1, 64); /* 256 bytes */
  int32_t a = node(g, "Add", x, x, "a");
  int32_t b = node(g, "Mul", x, x, "b");
  int32_t c = concat(g, a, b, "c");
  int32_t d = node(g, "Sub", x, x, "d");
  int32_t e = concat(g, c, d, "e");
  int32_t y = node(g, "Add", e, e, "y");
  tk_output(g, y);
  prepare(m);
  kn_mem_plan p;
  plan_and_compare(m, &p);
  const kn_plan_tensor *te = tensor_of(&p, e);
  assert_int_equal(tensor_of(&p, a)->view_of, c);
  assert_int_equal(tensor_of(&p, b)->view_of, c);
  assert_int_equal(tensor_of(&p, c)->view_of, e);
  assert_int_equal(tensor_of(&p, d)->view_of, e);
  assert_int_equal(tensor_of(&p, b)->view_offset, 256);
  assert_int_equal(tensor_of(&p, d)->view_offset, 512);
  assert_int_equal(tensor_of(&p, a)->offset, te->offset);
  assert_int_equal(tensor_of(&p, b)->offset, te->offset + 256);
  assert_int_equal(tensor_of(&p, d)->offset, te->offset + 512);
  assert_int_equal(p.arena_bytes, 768); /* e alone: the parts are inside it */
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);

  m = model_new();
  g = m->graph;
  x = input(g, "x", 1, 64);
  a = node(g, "Add", x, x, "a");
  b = node(g, "Mul", x, x, "b");
  c = concat(g, a, b, "c");
  int32_t c2 = concat(g, c, c, "c2"); /* one value twice: a copy */
  tk_output(g, node(g, "Add", c2, c2, "y"));
  prepare(m);
  plan_and_compare(m, &p);
  assert_int_equal(tensor_of(&p, a)->view_of, c);
  assert_int_equal(tensor_of(&p, b)->view_of, c);
  assert_int_equal(tensor_of(&p, b)->offset, tensor_of(&p, c)->offset + 256);
  assert_int_equal(tensor_of(&p, c)->view_of, -1);
  assert_int_equal(p.arena_bytes, 512 + 1024);
  kn_mem_plan_free(&p);
  kn_ir_model_free(m);
}

/* The checker catches overlaps, misalignment and overflow. */
static void test_check_catches(void **state) {
  (void)state;
  kn_plan_tensor t[3] = {
      {.value = 1, .bytes = 100, .first = 0, .last = 2, .offset = 0, .inplace_of = -1},
      {.value = 2, .bytes = 100, .first = 1, .last = 3, .offset = 128, .inplace_of = -1},
      {.value = 3, .bytes = 100, .first = 3, .last = 4, .offset = 0, .inplace_of = -1},
  };
  kn_mem_plan p = {.n_tensors = 3, .tensors = t, .arena_bytes = 256, .alignment = 64};
  char why[256];
  assert_true(kn_plan_check(&p, why, sizeof why));
  t[1].offset = 64; /* overlaps value 1 while both live */
  assert_false(kn_plan_check(&p, why, sizeof why));
  assert_non_null(strstr(why, "values 1 and 2"));
  t[1].offset = 96; /* misaligned */
  assert_false(kn_plan_check(&p, why, sizeof why));
  assert_non_null(strstr(why, "not a multiple of 64"));
  t[1].offset = 192; /* past the arena */
  assert_false(kn_plan_check(&p, why, sizeof why));
  assert_non_null(strstr(why, "outside the arena"));
  t[1].offset = 128;
  t[2].first = 2; /* value 3 now overlaps value 1 at step 2 */
  assert_false(kn_plan_check(&p, why, sizeof why));
  t[2].inplace_of = 1; /* ... which is fine when declared in place */
  t[2].bytes = 100;
  assert_true(kn_plan_check(&p, why, sizeof why));
  /* printing names every tensor */
  char buf[4096] = {0};
  FILE *f = tmpfile();
  assert_non_null(f);
  kn_plan_print(&p, NULL, f);
  rewind(f);
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  buf[got] = 0;
  fclose(f);
  assert_non_null(strstr(buf, "arena 256 bytes"));
}

/* ---- the real models ------------------------------------------------------ */

static bool exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* The reference runs of the large models (ResNet-50, BERT-base,
 * EfficientNet-B0: 20 MB of weights and more), planned and unplanned, took
 * over three minutes of the ASan suite and 35 s of the gcc one.  Unless
 * KILN_LONG_TESTS=1, the gcc build checks their plans (bounds, the
 * recorded arena) without running them, and the sanitized build leaves
 * them out (loading BERT-base alone takes seconds there). */
static bool large_model(const char *path) {
  struct stat sb;
  return tk_short_sweep() && stat(path, &sb) == 0 && sb.st_size > (20 << 20);
}

/* Largest arena growth allowed over the recorded one (tests/data/memplan). */
#define KN_ARENA_GROWTH 1.03

/* Recorded arena of `model`, or 0. */
static uint64_t recorded_arena(const char *model) {
  /* tests/data/memplan/arena_bytes.txt, found from this file's path */
  char path[4096];
  snprintf(path, sizeof path, "%s", __FILE__);
  char *cut = strstr(path, "unit/test_memplan.c");
  if (!cut) return 0;
  snprintf(cut, sizeof path - (size_t)(cut - path), "data/memplan/arena_bytes.txt");
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char name[128];
  unsigned long long bytes;
  uint64_t found = 0;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (line[0] != '#' && sscanf(line, "%127s %llu", name, &bytes) == 2 &&
        strcmp(name, model) == 0)
      found = bytes;
  fclose(f);
  return found;
}

/* Plans model `name` (optimized, or as imported) with the input shapes of
 * its test_data_set_0 and, when `run`, runs it planned and unplanned on
 * those inputs. */
static void real_model(const char *dir, const char *name, bool optimize, bool run) {
  char path[4096];
  kn_error err = {0};
  kn_model *km = NULL;
  snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
  if (kn_model_load(path, &km, &err)) fail_msg("%s: %s", name, err.msg);
  kn_ir_model *m = (kn_ir_model *)kn_model_ir(km);
  kn_graph *g = m->graph;
  /* fix every graph input to the shape of test_data_set_0 */
  kn_slot *ins = kn_calloc((size_t)g->n_inputs + 1, sizeof *ins);
  assert_non_null(ins);
  for (int32_t i = 0; i < km->n_inputs; i++) {
    int32_t gi = km->inputs[i];
    kn_value *v = &g->values[g->inputs[gi]];
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, i);
    if (kn_onnx_read_slot_file(path, KN_KIND_TENSOR, false, &ins[gi], &err))
      fail_msg("%s: %s", name, err.msg);
    v->type.rank = ins[gi].t.rank;
    memcpy(v->type.dims, ins[gi].t.dims, sizeof v->type.dims);
  }
  if (kn_ops_prepare(m, &err) || (optimize && kn_optimize(m, NULL, &err)))
    fail_msg("%s: %s", name, err.msg);
  char key[160];
  snprintf(key, sizeof key, "%s%s", name, optimize ? "" : ":reference");
  kn_mem_plan p;
  plan_ok(g, &p);
  if (getenv("KN_PRINT_PLANS")) kn_plan_print(&p, g, stdout);
  int32_t unplanned = 0, inplace = 0;
  for (int32_t i = 0; i < p.n_tensors; i++) {
    unplanned += p.tensors[i].offset < 0;
    inplace += p.tensors[i].inplace_of >= 0;
  }
  printf("  %-26s arena %11llu  lower bound %11llu (x%.3f)  naive %12llu  "
         "(%d tensors, %d in place, %d unplanned)\n",
         key, (unsigned long long)p.arena_bytes, (unsigned long long)p.lower_bound_bytes,
         p.lower_bound_bytes ? (double)p.arena_bytes / (double)p.lower_bound_bytes : 0.0,
         (unsigned long long)p.naive_bytes, p.n_tensors, inplace, unplanned);
  fflush(stdout);
  assert_true((double)p.arena_bytes <= 1.10 * (double)p.lower_bound_bytes);
  uint64_t rec = recorded_arena(key);
  if (rec && (double)p.arena_bytes > KN_ARENA_GROWTH * (double)rec)
    fail_msg("%s: the arena grew from %llu to %llu bytes (more than 3%%)", key,
             (unsigned long long)rec, (unsigned long long)p.arena_bytes);
  if (run) same_results(m, &p, ins, true);
  for (int32_t i = 0; i < g->n_inputs; i++) kn_slot_release(&ins[i]);
  free(ins);
  kn_mem_plan_free(&p);
  kn_model_free(km);
}

static void test_real_models(void **state) {
  (void)state;
  const char *home = getenv("HOME"), *cache = getenv("KILN_CACHE");
  char dir[2048];
  if (cache && *cache)
    snprintf(dir, sizeof dir, "%s", cache);
  else
    snprintf(dir, sizeof dir, "%s/.cache/kiln/models", home ? home : "");
  static const char *const models[] = {"tinycnn",  "squeezenet1_1",   "mobilenet_v2",
                                       "resnet50", "efficientnet_b0", "bert_tiny",
                                       "bert_base"};
  int ran = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, models[i]);
    if (!exists(path)) continue;
    bool run = !large_model(path);
    if (!run && tk_sanitized()) {
      printf("  %-26s left out under the sanitizers (KILN_LONG_TESTS=1 runs it)\n", models[i]);
      continue;
    }
    if (!run) printf("  %-26s planned, not run (KILN_LONG_TESTS=1 runs it)\n", models[i]);
    real_model(dir, models[i], false, run);
    real_model(dir, models[i], true, run);
    ran++;
  }
  if (!ran) skip();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain),          cmocka_unit_test(test_diamond_long_lived),
      cmocka_unit_test(test_inplace_chain),  cmocka_unit_test(test_inplace_refused),
      cmocka_unit_test(test_unknown_sizes),  cmocka_unit_test(test_workspace_cap),
      cmocka_unit_test(test_check_catches),  cmocka_unit_test(test_real_models),
      cmocka_unit_test(test_concat_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
