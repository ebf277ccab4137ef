/* The ewchain pass and the ElementwiseChain op on small hand-built
 * graphs: chains with broadcast inputs (row vectors, scalars, [C,1,1]),
 * diamonds, every opcode, the near misses where it must not fire, and
 * results equal to the unfused graph's through the executor.  When the
 * real models are cached (~/.cache/kiln/models), the number of chains
 * after the whole optimizer is printed. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "ops/ewchain.h"
#include "passes/pass.h"
#include "testkit.h"

/* ---- helpers ----------------------------------------------------------- */

/* Runs the passes (then dce) and checks the results; returns whether the
 * first changed the graph. */
static bool passes_keep_results(kn_ir_model *m, kn_pass_fn first, kn_pass_fn second) {
  return tk_passes_keep_close(m, first, second, true);
}

static int32_t kiln_node(kn_graph *g, const char *op, int32_t in) {
  int32_t o = kn_graph_add_fresh_value(g, op);
  assert_true(o >= 0);
  assert_true(kn_graph_new_node(g, op, "kiln", op, 1, &in, 1, &o) >= 0);
  return o;
}

static const kn_node *chain(const kn_graph *g) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, "ElementwiseChain")) return &g->nodes[i];
  return NULL;
}

static int32_t n_covered(const kn_node *n) {
  int32_t c = 1;
  for (const char *s = n->covers; s && *s; s++) c += *s == ',';
  return c;
}

static const int64_t X4[] = {2, 3, 4, 5};

/* ---- where it fires ------------------------------------------------------ */

/* Sub a row vector, Mul by [C,1,1], Add a scalar, Relu: one step. */
static void test_broadcast_chain(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, X4);
  int32_t y = tk_node(g, "Sub", 2, (int32_t[]){x, tk_const_rand(g, 1, (int64_t[]){5}, 1, 0)});
  y = tk_node(g, "Mul", 2, (int32_t[]){tk_const_rand(g, 3, (int64_t[]){3, 1, 1}, 2, 0), y});
  y = tk_node(g, "Add", 2, (int32_t[]){y, tk_const_scalar(g, 0.25f)});
  y = tk_node(g, "Relu", 1, &y);
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(g, NULL), 1);
  const kn_node *c = chain(g);
  assert_non_null(c);
  assert_string_equal(c->domain, "kiln");
  assert_int_equal(c->n_inputs, 4);
  assert_int_equal(n_covered(c), 4);
  assert_string_equal(c->name, "Relu");
  assert_int_equal(g->values[c->outputs[0]].type.rank, 4);
  kn_ir_model_free(m);
}

/* x * sigmoid(x) * scale (SiLU times a per-channel scale, as in EfficientNet's
 * squeeze-excite), and an inner diamond t * sigmoid(t) with t = x + b. */
static void test_diamonds(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, X4);
  int32_t s = tk_node(g, "Sigmoid", 1, &x);
  int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, s});
  y = tk_node(g, "Mul", 2, (int32_t[]){y, tk_input(g, "scale", 4, (int64_t[]){2, 3, 1, 1})});
  tk_output(g, y);
  int32_t t = tk_node(g, "Add", 2, (int32_t[]){x, tk_const_rand(g, 2, (int64_t[]){4, 5}, 3, 0)});
  int32_t u = tk_node(g, "Mul", 2, (int32_t[]){t, tk_node(g, "Sigmoid", 1, &t)});
  u = tk_node(g, "Mul", 2, (int32_t[]){u, u}); /* one value read twice by one node */
  tk_output(g, u);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(g, NULL), 2);
  assert_int_equal(tk_count_op(g, "ElementwiseChain"), 2);
  assert_int_equal(n_covered(&g->nodes[0]) + n_covered(&g->nodes[1]), 7);
  kn_ir_model_free(m);
}

/* x -> QuantizeLinear -> DequantizeLinear, per tensor: a u8 zero point
 * (z >= 0) or an s8 one (z < 0 stands for -z - 1 as int8: -1 is 0). */
static int32_t qdq_pair(kn_graph *g, int32_t x, float scale, int32_t z, float dq_scale) {
  int8_t zs = (int8_t)(-z - 1);
  int32_t zp = z >= 0 ? tk_const_u8(g, (uint8_t)z)
                      : tk_const_typed(g, KN_DTYPE_I8, 0, NULL, &zs);
  int32_t q = tk_node(g, "QuantizeLinear", 3, (int32_t[]){x, tk_const_scalar(g, scale), zp});
  return tk_node(g, "DequantizeLinear", 3, (int32_t[]){q, tk_const_scalar(g, dq_scale), zp});
}

/* Every opcode in one chain (inputs kept where every op is defined). */
static void test_every_op(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(14);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, (int64_t[]){3, 5, 300}); /* rows longer than a block */
  int32_t y = tk_node(g, "Abs", 1, &x);
  y = tk_node(g, "Add", 2, (int32_t[]){y, tk_const_scalar(g, 1.0f)});
  y = tk_node(g, "Log", 1, &y);
  y = tk_node(g, "Sqrt", 1, &y);
  y = tk_node(g, "Exp", 1, &y);
  y = tk_node(g, "Neg", 1, &y);
  y = tk_node(g, "Tanh", 1, &y);
  y = tk_node(g, "Erf", 1, &y);
  y = tk_node(g, "Mul", 2, (int32_t[]){y, x});
  y = tk_node(g, "Sigmoid", 1, &y);
  y = tk_node(g, "LeakyRelu", 1, &y);
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.3f));
  y = tk_node(g, "HardSigmoid", 1, &y);
  assert_true(kn_node_set_float(tk_last(g), "alpha", 0.25f));
  y = tk_node(g, "Sub", 2, (int32_t[]){x, y});
  y = tk_node(g, "HardSwish", 1, &y);
  y = tk_node(g, "Clip", 3, (int32_t[]){y, tk_constant_node(g, -0.5f), tk_constant_node(g, 1.5f)});
  y = tk_node(g, "Softplus", 1, &y);
  y = tk_node(g, "Reciprocal", 1, &y);
  y = tk_node(g, "Pow", 2, (int32_t[]){y, tk_const_scalar(g, 2.0f)});
  y = tk_node(g, "Max", 2, (int32_t[]){y, tk_const_rand(g, 1, (int64_t[]){300}, 4, 0)});
  y = tk_node(g, "Min", 2, (int32_t[]){y, x});
  y = tk_node(g, "Div", 2, (int32_t[]){y, tk_const_rand(g, 2, (int64_t[]){5, 1}, 5, 3.0f)});
  y = tk_node(g, "Relu", 1, &y);
  y = tk_node(g, "Pow", 2, (int32_t[]){y, tk_input(g, "e", 1, (int64_t[]){300})});
  y = kiln_node(g, "Gelu", y);
  y = kiln_node(g, "Gelu", y);
  assert_true(kn_node_set_string(tk_last(g), "approximate", "tanh"));
  y = kiln_node(g, "HardSwish", y);
  y = qdq_pair(g, y, 0.01f, 128, 0.01f);
  y = qdq_pair(g, y, 0.02f, -1, 0.02f);
  tk_output(g, y);
  tk_prepare(m);
  int32_t before = tk_count_op(g, NULL) - 2; /* less the two Constant nodes */
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(g, NULL), 1);
  const kn_node *c = chain(g);
  assert_non_null(c);
  assert_int_equal(n_covered(c), before);
  const kn_attr *ops = kn_node_attr(c, "ops");
  assert_non_null(ops);
  bool seen[KN_EW_COUNT] = {false};
  for (int32_t k = 0; k < ops->n; k++) seen[ops->ints[k]] = true;
  for (int32_t k = 0; k < KN_EW_COUNT; k++)
    if (!seen[k]) fail_msg("opcode %d not exercised", (int)k);
  kn_ir_model_free(m);
}

/* Clip-6 reads its bounds from attributes. */
static void test_clip_attrs(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(6);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, X4);
  int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, tk_const_scalar(g, 4.0f)});
  y = tk_node(g, "Clip", 1, &y);
  assert_true(kn_node_set_float(tk_last(g), "min", -1.0f));
  assert_true(kn_node_set_float(tk_last(g), "max", 2.0f));
  tk_output(g, y);
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(g, "ElementwiseChain"), 1);
  assert_int_equal(tk_count_op(g, NULL), 1);
  kn_ir_model_free(m);
}

/* ---- where it must not fire ---------------------------------------------- */

static void expect_nothing(kn_ir_model *m, int32_t nodes) {
  tk_prepare(m);
  assert_false(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(m->graph, "ElementwiseChain"), 0);
  assert_int_equal(tk_count_op(m->graph, NULL), nodes);
  kn_ir_model_free(m);
}

static void test_must_not(void **state) {
  (void)state;
  {/* the intermediate is also read outside the chain */
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    int32_t t = tk_node(g, "Add", 2, (int32_t[]){x, tk_const_scalar(g, 1.0f)});
    tk_output(g, tk_node(g, "Relu", 1, &t));
    int32_t r = tk_node(g, "ReduceSum", 1, &t);
    tk_output(g, r);
    expect_nothing(m, 3);
  }
  {/* a graph output in the middle */
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    int32_t t = tk_node(g, "Add", 2, (int32_t[]){x, tk_const_scalar(g, 1.0f)});
    tk_output(g, t);
    tk_output(g, tk_node(g, "Relu", 1, &t));
    expect_nothing(m, 2);
  }
  {/* int32 */
    kn_ir_model *m = tk_model_new(14);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    g->values[x].type.dtype = KN_DTYPE_I32;
    int32_t t = tk_node(g, "Add", 2, (int32_t[]){x, x});
    tk_output(g, tk_node(g, "Mul", 2, (int32_t[]){t, x}));
    tk_prepare(m);
    assert_false(tk_run_pass(m, kn_pass_ewchain));
    assert_int_equal(tk_count_op(g, NULL), 2);
    kn_ir_model_free(m);
  }
  {/* a lone op, and a Pow whose exponent is an int32 input */
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    int32_t e = tk_input(g, "e", 1, (int64_t[]){5});
    g->values[e].type.dtype = KN_DTYPE_I32;
    int32_t t = tk_node(g, "Pow", 2, (int32_t[]){x, e});
    tk_output(g, tk_node(g, "Sigmoid", 1, &t));
    tk_prepare(m);
    assert_false(tk_run_pass(m, kn_pass_ewchain));
    assert_int_equal(tk_count_op(g, NULL), 2);
    kn_ir_model_free(m);
  }
}

/* The Q/DQ pairs ONNX Runtime's quantizer leaves around an Add and after
 * its Relu, and one on a Log's NaNs (code 0) and infinities: u8 and s8 zero
 * points, each pair one instruction, all of it one step, the unfused
 * graph's bits on the reference and on every ISA's fast kernels. */
static void test_qdq_pairs(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t d[4] = {2, 3, 20, 61}; /* rows of 1220: two blocks and a tail */
  int32_t x = tk_input(g, "x", 4, d), w = tk_input(g, "w", 4, d);
  int32_t y = tk_node(g, "Add", 2, (int32_t[]){qdq_pair(g, x, 0.01f, 128, 0.01f),
                                               qdq_pair(g, w, 0.004f, -4, 0.004f)});
  y = qdq_pair(g, tk_node(g, "Relu", 1, &y), 0.008f, 0, 0.008f);
  tk_output(g, y);
  int32_t l = tk_node(g, "Log", 1, &x);
  tk_output(g, qdq_pair(g, l, 0.05f, -1, 0.05f)); /* s8 zero point 0 */
  tk_prepare(m);
  tk_results want = tk_run(m, TK_FILL_SEEDED);
  assert_true(tk_run_pass(m, kn_pass_ewchain));
  assert_int_equal(tk_count_op(g, "QuantizeLinear"), 0);
  assert_int_equal(tk_count_op(g, "DequantizeLinear"), 0);
  assert_int_equal(tk_count_op(g, NULL), 2);
  int32_t covered = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) covered += n_covered(&g->nodes[i]);
  assert_int_equal(covered, 8 + 3);
  tk_results got = tk_run(m, TK_FILL_SEEDED);
  tk_assert_bits(&got, &want, "Q/DQ chain, reference");
  tk_results_free(&got);
  uint64_t feats = kn_cpu_features();
  for (int32_t isa = KN_ISA_PORTABLE; isa <= KN_ISA_AVX512; isa++) {
    if (!kn_isa_available((kn_isa)isa, feats)) continue;
    for (int32_t threads = 1; threads <= 2; threads++) {
      tk_results fast = tk_run_fast(m, TK_FILL_SEEDED, isa, threads);
      tk_assert_bits(&fast, &want, "Q/DQ chain, fast");
      tk_results_free(&fast);
    }
  }
  tk_results_free(&want);
  kn_ir_model_free(m);
}

/* A pair whose QuantizeLinear result is also read elsewhere, and one whose
 * two scales differ, stay as they are. */
static void test_qdq_pairs_not(void **state) {
  (void)state;
  {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    int32_t s = tk_const_scalar(g, 0.01f), z = tk_const_u8(g, 7);
    int32_t q = tk_node(g, "QuantizeLinear", 3, (int32_t[]){x, s, z});
    tk_output(g, q);
    tk_output(g, tk_node(g, "DequantizeLinear", 3, (int32_t[]){q, s, z}));
    tk_prepare(m);
    assert_false(tk_run_pass(m, kn_pass_ewchain));
    assert_int_equal(tk_count_op(g, NULL), 2);
    kn_ir_model_free(m);
  }
  {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    tk_output(g, qdq_pair(g, x, 0.01f, 7, 0.02f));
    expect_nothing(m, 2);
  }
}

/* A hostile chain's Q/DQ constants (an engine file's) are refused with a
 * message, never converted: scale 0, NaN, a zero point out of range or
 * not an integer. */
static void test_qdq_bad_consts(void **state) {
  (void)state;
  static const float bad[][2] = {{0.0f, 3.0f}, {NAN, 3.0f}, {0.1f, 256.0f}, {0.1f, 2.5f},
                                 {0.1f, -1.0f}, {INFINITY, 0.0f}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 4, X4);
    int32_t o = kn_graph_add_fresh_value(g, "y");
    assert_true(o >= 0);
    int32_t ni = kn_graph_new_node(g, "ElementwiseChain", "kiln", "chain", 1, &x, 1, &o);
    assert_true(ni >= 0);
    int64_t ops[1] = {KN_EW_QDQ_U8}, args[2] = {0, -1};
    assert_true(kn_node_set_ints(&g->nodes[ni], "ops", ops, 1));
    assert_true(kn_node_set_ints(&g->nodes[ni], "args", args, 2));
    assert_true(kn_node_set_floats(&g->nodes[ni], "consts", bad[i], 2));
    tk_output(g, o);
    kn_error err;
    kn_status st = kn_graph_finish(g, m->label, &err);
    if (!st) st = kn_ops_prepare(m, &err);
    assert_int_equal(st, KN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "zero point"));
    kn_ir_model_free(m);
  }
}

/* ewchain with the decisions kept (the fallback machine). */
static bool ewchain_deciding(kn_ir_model *m, kn_lines *lines) {
  kn_error err;
  kn_pass_ctx ctx = {.m = m, .err = &err, .fold_max_bytes = TK_FOLD_CAP, .decisions = lines};
  bool changed = false;
  kn_status st = kn_pass_ewchain(&ctx, m->graph, &changed);
  if (!st && changed) {
    st = kn_graph_compact(m->graph, m->label, &err);
    if (!st) st = kn_ops_prepare(m, &err);
  }
  if (st) fail_msg("%s", err.msg);
  return changed;
}

/* An intermediate smaller than the chain's output (a broadcast) joins it,
 * recomputed at every position, when the IO model says that costs less
 * than storing it as a step of its own: Sigmoid of a [1,3,1,1] scale over
 * 48 elements is recomputed; Exp of a [16,1] column over 16 x 4096
 * elements (1 M operations) is stored.  Each decision is recorded. */
static void test_recompute_by_model(void **state) {
  (void)state;
  for (int big = 0; big < 2; big++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t x = tk_input(g, "x", 2, big ? (int64_t[]){16, 4096} : (int64_t[]){3, 16});
    int32_t s = tk_input(g, "s", 2, big ? (int64_t[]){16, 1} : (int64_t[]){3, 1});
    int32_t t = tk_node(g, big ? "Exp" : "Sigmoid", 1, &s);
    int32_t y = tk_node(g, "Mul", 2, (int32_t[]){x, t});
    tk_output(g, tk_node(g, "Relu", 1, &y));
    tk_prepare(m);
    tk_results before = tk_run(m, TK_FILL_SEEDED);
    kn_lines lines = {0};
    assert_true(ewchain_deciding(m, &lines));
    const kn_node *c = chain(g);
    assert_non_null(c);
    assert_int_equal(n_covered(c), big ? 2 : 3);
    assert_int_equal(tk_count_op(g, NULL), big ? 2 : 1);
    assert_int_equal(lines.n, 1);
    if (!strstr(lines.s[0], big ? " stored: " : " recomputed in the chain: "))
      fail_msg("%s: %s", big ? "Exp" : "Sigmoid", lines.s[0]);
    tk_results after = tk_run(m, TK_FILL_SEEDED);
    tk_assert_close(&after, &before, false);
    kn_lines_free(&lines);
    kn_ir_model_free(m);
  }
}

/* Part of a chain fuses; the value read outside stays a tensor. */
static void test_partial(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, X4);
  int32_t t = tk_node(g, "Add", 2, (int32_t[]){x, tk_const_scalar(g, 1.0f)});
  int32_t u = tk_node(g, "Mul", 2, (int32_t[]){t, tk_const_scalar(g, -3.0f)});
  tk_output(g, tk_node(g, "Relu", 1, &u));
  tk_output(g, tk_node(g, "Exp", 1, &t));
  tk_prepare(m);
  assert_true(passes_keep_results(m, kn_pass_ewchain, NULL));
  assert_int_equal(tk_count_op(g, "ElementwiseChain"), 1);
  assert_int_equal(tk_count_op(g, "Add"), 1);
  assert_int_equal(tk_count_op(g, "Exp"), 1);
  assert_int_equal(tk_count_op(g, NULL), 3);
  kn_ir_model_free(m);
}

/* ---- real models (skipped when not cached) ------------------------------- */

static void test_real_models(void **state) {
  (void)state;
  static const char *const names[] = {"efficientnet_b0", "mobilenet_v2", "bert_base",
                                      "bert_tiny", "resnet50", "squeezenet1_1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    kn_model *model = tk_load_cached_optimized(names[i]);
    if (!model) continue;
    kn_ir_model *m = (kn_ir_model *)kn_model_ir(model);
    int32_t steps = tk_count_op(m->graph, "ElementwiseChain"), covered = 0;
    for (int32_t k = 0; k < m->graph->n_nodes; k++)
      if (!strcmp(m->graph->nodes[k].op_type, "ElementwiseChain"))
        covered += n_covered(&m->graph->nodes[k]);
    printf("%s: %d ElementwiseChain steps covering %d nodes (%d steps in all):", names[i],
           (int)steps, (int)covered, (int)m->graph->n_nodes);
    for (int32_t k = 0; k < m->graph->n_nodes; k++) {
      const kn_node *n = &m->graph->nodes[k];
      if (getenv("KILN_EWCHAIN_LIST")) printf(" %s", n->op_type);
      else if (!strcmp(n->op_type, "ElementwiseChain")) printf(" [%s]", n->covers);
    }
    printf("\n");
    kn_model_free(model);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast_chain),
      cmocka_unit_test(test_recompute_by_model),
      cmocka_unit_test(test_diamonds),
      cmocka_unit_test(test_every_op),
      cmocka_unit_test(test_clip_attrs),
      cmocka_unit_test(test_must_not),
      cmocka_unit_test(test_qdq_pairs),
      cmocka_unit_test(test_qdq_pairs_not),
      cmocka_unit_test(test_qdq_bad_consts),
      cmocka_unit_test(test_partial),
      cmocka_unit_test(test_real_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
