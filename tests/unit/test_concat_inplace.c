/* Concat elision (src/passes/concat_inplace.c): channels-last convs whose
 * outputs a Concat joins on the channel axis become a chain writing their
 * slices of its output in place (NhwcFusedConv concat_channels /
 * concat_offset, input 5 the output being filled; src/ops/layout.c).
 *
 * Every case is built three times: as written (the oracle), through the
 * whole optimizer, and through the optimizer without concat_inplace.  It
 * checks the graph (which Concats went, the attributes and the chain, the
 * offsets in the Concat's input order, output shapes widened), then the
 * results: the optimized graph close to the oracle, and bit-identical to
 * the graph that kept its Concats, through the reference kernels, through
 * the fast kernels of every ISA on 1 and 2 threads (the kernels write a
 * slice with the same bits as a whole output, and a Concat only copies),
 * and through engine files with their memory plan (the chain planned in
 * place, kn_plan_tensor.inplace_of), fast and reference, run three times
 * on alternating inputs.  Near misses keep their Concat and their
 * results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "plan/plan.h"
#include "ops/tactic.h"
#include "testkit.h"

/* ---- building ------------------------------------------------------------ */

/* Conv (bias when `bias`, pads k/2) of x [., cin, ., .] to m channels. */
static int32_t conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t k, int64_t group,
                    uint32_t seed, bool bias) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin / group, k, k}, seed, 0);
  int32_t in[3] = {x, w, bias ? tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0) : -1};
  int32_t y = tk_node(g, "Conv", bias ? 3 : 2, in);
  int64_t pad = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (group != 1) assert_true(kn_node_set_int(tk_last(g), "group", group));
  return y;
}

static int32_t relu(kn_graph *g, int32_t x) { return tk_node(g, "Relu", 1, (int32_t[]){x}); }

static int32_t concat(kn_graph *g, int32_t n, const int32_t *in, int64_t axis) {
  int32_t y = tk_node(g, "Concat", n, in);
  assert_true(kn_node_set_int(tk_last(g), "axis", axis));
  return y;
}

static int32_t maxpool3(kn_graph *g, int32_t x, int64_t stride) {
  int32_t y = tk_node(g, "MaxPool", 1, (int32_t[]){x});
  assert_true(kn_node_set_ints(tk_last(g), "kernel_shape", (int64_t[]){3, 3}, 2));
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){1, 1, 1, 1}, 4));
  if (stride != 1)
    assert_true(kn_node_set_ints(tk_last(g), "strides", (int64_t[]){stride, stride}, 2));
  return y;
}

/* A channels-last conv built directly (x is [N, H, W, cin]): pads k/2, an
 * optional activation. */
static int32_t nhwc_conv(kn_graph *g, int32_t x, int64_t cin, int64_t m, int64_t k,
                         uint32_t seed, const char *act) {
  int32_t w = tk_const_rand(g, 4, (int64_t[]){m, cin, k, k}, seed, 0);
  int32_t b = tk_const_rand(g, 1, (int64_t[]){m}, seed + 1, 0);
  int32_t y = kn_graph_add_fresh_value(g, "nhwc_conv");
  assert_true(y >= 0);
  assert_true(kn_graph_new_node(g, "NhwcFusedConv", KN_DOMAIN, "nhwc_conv", 3,
                                (int32_t[]){x, w, b}, 1, &y) >= 0);
  int64_t pad = k / 2;
  assert_true(kn_node_set_ints(tk_last(g), "pads", (int64_t[]){pad, pad, pad, pad}, 4));
  if (act) assert_true(kn_node_set_string(tk_last(g), "activation", act));
  return y;
}

typedef void (*build_fn)(kn_ir_model *m);

/* What a case expects of the optimized graph: Concats elided, and the
 * slice of each slice-writing conv (told apart by their output channels). */
typedef struct slice_want {
  int64_t m, total, offset;
} slice_want;

typedef struct case_want {
  int32_t elided;
  int32_t n_slices;
  slice_want slices[8];
  bool winograd;    /* some slice conv gets conv_winograd_nhwc */
  int32_t in_place; /* links the plan puts over their input 5 */
  int64_t scaled_m; /* > 0: the slice conv of that many channels has an S */
} case_want;

static kn_ir_model *build(build_fn fn, bool optimize, bool with_pass) {
  kn_ir_model *m = tk_model_new(13);
  fn(m);
  tk_prepare(m);
  if (optimize) {
    static const char *const off[] = {"concat_inplace"};
    kn_optimize_options o = {.disabled = off, .n_disabled = with_pass ? 0 : 1};
    kn_error err;
    if (kn_optimize(m, &o, &err)) fail_msg("optimize: %s", err.msg);
  }
  return m;
}

/* ---- checking the graph -------------------------------------------------- */

static int64_t out_channels(const kn_graph *g, const kn_node *n) {
  const kn_value *w = &g->values[n->inputs[1]];
  assert_int_equal(w->type.rank, 4);
  return w->type.dims[0];
}

static bool is_slice_conv(const kn_node *n) {
  return !n->dead && !strcmp(n->op_type, "NhwcFusedConv") && kn_node_attr(n, "concat_channels");
}

static int64_t attr_i(const kn_node *n, const char *name) {
  const kn_attr *a = kn_node_attr(n, name);
  assert_non_null(a);
  return a->i;
}

static void print_steps(const kn_graph *g, const char *what) {
  if (!getenv("TK_VERBOSE")) return;
  print_message("    %s:\n", what);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    const kn_attr *cc = kn_node_attr(n, "concat_channels");
    const kn_attr *co = kn_node_attr(n, "concat_offset");
    print_message("      %-16s %-20s in %d%s", n->op_type, n->name, (int)n->n_inputs,
                  n->n_inputs > 5 && n->inputs[5] >= 0 ? " (into)" : "");
    if (cc) print_message("  slice [%lld +%lld of %lld]", (long long)(co ? co->i : 0),
                          (long long)out_channels(g, n), (long long)cc->i);
    print_message("\n");
  }
}

/* The optimized graph against `want`, and each chain's structure. */
static void check_graph(const kn_ir_model *opt, const kn_ir_model *kept, const case_want *want) {
  const kn_graph *g = opt->graph;
  assert_int_equal(tk_count_op(g, "Concat"), tk_count_op(kept->graph, "Concat") - want->elided);
  int32_t slices = 0;
  bool winograd = false;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!is_slice_conv(n)) {
      /* nothing else may read or write a slice */
      if (!n->dead && !strcmp(n->op_type, "NhwcFusedConv"))
        assert_true(n->n_inputs <= 5 || n->inputs[5] < 0);
      continue;
    }
    slices++;
    int64_t m = out_channels(g, n), total = attr_i(n, "concat_channels");
    int64_t off = attr_i(n, "concat_offset");
    const slice_want *sw = NULL;
    for (int32_t k = 0; k < want->n_slices; k++)
      if (want->slices[k].m == m) sw = &want->slices[k];
    if (!sw) fail_msg("step '%s' (%lld channels) writes a slice it should not", n->name,
                      (long long)m);
    if (sw->total != total || sw->offset != off)
      fail_msg("step '%s': slice [%lld, +%lld) of %lld, expected [%lld, +%lld) of %lld", n->name,
               (long long)off, (long long)m, (long long)total, (long long)sw->offset,
               (long long)m, (long long)sw->total);
    /* no residual; the output is the whole Concat's shape */
    assert_true(n->n_inputs <= 3 || n->inputs[3] < 0);
    if (m == want->scaled_m) assert_true(n->n_inputs > 4 && n->inputs[4] >= 0);
    const kn_value *y = &g->values[n->outputs[0]];
    assert_int_equal(y->type.rank, 4);
    assert_int_equal(y->type.dims[3], total);
    /* input 5, when there, is the previous link: an earlier slice conv of
     * the same Concat, read by nothing else */
    if (n->n_inputs > 5 && n->inputs[5] >= 0) {
      int32_t v = n->inputs[5], p = g->values[v].producer;
      assert_true(p >= 0 && p < i);
      assert_true(is_slice_conv(&g->nodes[p]));
      assert_int_equal(attr_i(&g->nodes[p], "concat_channels"), total);
      assert_false(g->values[v].is_output);
      for (int32_t j = 0; j < g->n_nodes; j++)
        for (int32_t k = 0; k < g->nodes[j].n_inputs && !g->nodes[j].dead; k++)
          if (g->nodes[j].inputs[k] == v) assert_true(j == i && k == 5);
    }
    for (int32_t isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, kn_cpu_features())) continue;
      int32_t t = kn_tactics_of(n)->select(g, n, isa);
      assert_true(t == KN_TACTIC_conv_igemm_nhwc || t == KN_TACTIC_conv_winograd_nhwc);
      winograd |= t == KN_TACTIC_conv_winograd_nhwc;
    }
  }
  assert_int_equal(slices, want->n_slices);
  if (want->winograd) assert_true(winograd);
  /* each chain's slices tile [0, total): walk back from its last link */
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!is_slice_conv(n)) continue;
    bool last = true;
    for (int32_t j = i + 1; j < g->n_nodes; j++)
      if (is_slice_conv(&g->nodes[j]) && g->nodes[j].n_inputs > 5 &&
          g->nodes[j].inputs[5] == n->outputs[0])
        last = false;
    if (!last) continue;
    int64_t total = attr_i(n, "concat_channels");
    bool *seen = calloc((size_t)total, 1);
    assert_non_null(seen);
    int32_t links = 0;
    for (const kn_node *c = n;;) {
      int64_t off = attr_i(c, "concat_offset"), m = out_channels(g, c);
      for (int64_t ch = off; ch < off + m; ch++) {
        assert_true(ch >= 0 && ch < total);
        assert_false(seen[ch]);
        seen[ch] = true;
      }
      links++;
      if (c->n_inputs <= 5 || c->inputs[5] < 0) break;
      c = &g->nodes[g->values[c->inputs[5]].producer];
    }
    for (int64_t ch = 0; ch < total; ch++) assert_true(seen[ch]);
    assert_true(links >= 2);
    free(seen);
  }
}

/* ---- comparing results --------------------------------------------------- */


/* got within rounding of ref: 1e-4 relative, and 1e-5 of the output's
 * largest magnitude (the Winograd transforms' error). */
static void close_to(const tk_results *ref, const tk_results *got, const char *what) {
  assert_int_equal(ref->n, got->n);
  for (int32_t i = 0; i < ref->n; i++) {
    const kn_tensor *x = &ref->outs[i].t, *y = &got->outs[i].t;
    assert_int_equal(x->rank, y->rank);
    for (int32_t d = 0; d < x->rank; d++) assert_int_equal(x->dims[d], y->dims[d]);
    const float *p = x->data, *q = y->data;
    double big = 1;
    for (int64_t k = 0; k < kn_tensor_numel(x); k++) big = fmax(big, fabs((double)p[k]));
    for (int64_t k = 0; k < kn_tensor_numel(x); k++)
      if (!(fabs((double)p[k] - q[k]) <= 1e-4 * (1 + fabs((double)p[k])) + 1e-5 * big))
        fail_msg("%s: output %d element %lld is %.9g, reference %.9g", what, (int)i,
                 (long long)k, (double)q[k], (double)p[k]);
  }
}

/* ---- engine files ---------------------------------------------------------- */

/* Plans m and checks the plan: every slice conv's output over its input 5
 * when both are planned (the Concat filled in one buffer); returns how
 * many are. */
static int32_t plan_checked(const kn_ir_model *m, kn_mem_plan *p) {
  int32_t in_place = 0;
  const kn_graph *g = m->graph;
  kn_error err;
  char why[256];
  if (kn_plan_memory(g, 0, p, &err)) fail_msg("%s", err.msg);
  if (!kn_plan_check(p, why, sizeof why)) fail_msg("plan: %s", why);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!is_slice_conv(n) || n->n_inputs <= 5 || n->inputs[5] < 0) continue;
    const kn_plan_tensor *in = NULL, *out = NULL;
    for (int32_t t = 0; t < p->n_tensors; t++) {
      if (p->tensors[t].value == n->inputs[5]) in = &p->tensors[t];
      if (p->tensors[t].value == n->outputs[0]) out = &p->tensors[t];
    }
    bool dynamic = false;
    for (int32_t d = 0; d < 4; d++) dynamic |= g->values[n->outputs[0]].type.dims[d] < 0;
    if (dynamic || !in || in->offset < 0) continue;
    if (!out || out->offset < 0) { /* a graph output: filled from input 5 */
      assert_true(g->values[n->outputs[0]].is_output);
      continue;
    }
    if (out->inplace_of != n->inputs[5] || out->offset != in->offset)
      fail_msg("step '%s': output planned at %lld (in place of %d), input 5 (value %d) at %lld",
               n->name, (long long)out->offset, (int)out->inplace_of, (int)n->inputs[5],
               (long long)in->offset);
    in_place++;
  }
  return in_place;
}


/* Writes m (tactics for this machine, or the reference) with its plan to
 * an engine file, loads it and runs it on 1 and 2 threads, twice each on
 * different inputs: the same bits as the unplanned runs of m. */
static void check_engine(kn_ir_model *m, bool reference, int32_t in_place) {
  int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
  kn_mem_plan plan;
  assert_int_equal(plan_checked(m, &plan), in_place);
  tk_results want[2][2]; /* [fill][threads - 1] */
  for (int32_t f = 0; f < 2; f++)
    for (int32_t t = 1; t <= 2; t++)
      want[f][t - 1] = reference ? tk_run(m, (tk_fill)f) : tk_run_fast(m, (tk_fill)f, isa, t);
  kn_tactics_select(m, isa, reference);
  char path[] = "/tmp/kiln_test_concat_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  kn_error err;
  if (kn_engine_write(m, &plan, NULL, path, &err)) fail_msg("%s", err.msg);
  kn_tactics_select(m, isa, true);
  kn_model *km;
  if (kn_model_load(path, &km, &err)) fail_msg("%s", err.msg);
  unlink(path);
  /* the plan as written, in place as checked */
  assert_int_equal(km->plan.n_tensors, plan.n_tensors);
  if (plan.n_tensors)
    assert_memory_equal(km->plan.tensors, plan.tensors,
                        (size_t)plan.n_tensors * sizeof *plan.tensors);
  for (int32_t t = 1; t <= 2; t++) {
    kn_context *c;
    if (kn_context_create(km, &c, &err) || kn_context_set_threads(c, t, &err))
      fail_msg("%s", err.msg);
    static const tk_fill order[3] = {TK_FILL_PATTERN, TK_FILL_SEEDED, TK_FILL_PATTERN};
    for (int32_t r = 0; r < 3; r++) {
      tk_results got = tk_run_context(c, km, order[r]);
      char what[96];
      snprintf(what, sizeof what, "engine (%s kernels, %d threads, run %d)",
               reference ? "reference" : "fast", (int)t, (int)r + 1);
      tk_assert_bits(&want[order[r]][t - 1], &got, what);
      tk_results_free(&got);
    }
    kn_context_free(c);
  }
  for (int32_t f = 0; f < 2; f++)
    for (int32_t t = 0; t < 2; t++) tk_results_free(&want[f][t]);
  kn_model_free(km);
  kn_mem_plan_free(&plan);
}

/* ---- the whole check ------------------------------------------------------- */

static void check(build_fn fn, const case_want *want) {
  kn_ir_model *ref = build(fn, false, false);
  kn_ir_model *opt = build(fn, true, true), *kept = build(fn, true, false);
  print_steps(opt->graph, "optimized");
  check_graph(opt, kept, want);
  /* the pass leaves no Concat input a slice conv when disabled */
  for (int32_t i = 0; i < kept->graph->n_nodes; i++)
    assert_false(is_slice_conv(&kept->graph->nodes[i]));

  tk_results oracle = tk_run(ref, TK_FILL_SEEDED);
  tk_results a = tk_run(opt, TK_FILL_SEEDED), b = tk_run(kept, TK_FILL_SEEDED);
  close_to(&oracle, &a, "optimized, reference kernels");
  tk_assert_bits(&b, &a, "optimized, reference kernels, against the graph that kept its Concats");
  tk_results_free(&a);
  tk_results_free(&b);
  for (int32_t isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, kn_cpu_features())) continue;
    tk_results one = {0};
    for (int32_t t = 1; t <= 2; t++) {
      char what[128];
      tk_results f = tk_run_fast(opt, TK_FILL_SEEDED, isa, t);
      tk_results k = tk_run_fast(kept, TK_FILL_SEEDED, isa, t);
      snprintf(what, sizeof what, "fast kernels [%s, %d threads]", kn_isa_name((kn_isa)isa),
               (int)t);
      close_to(&oracle, &f, what);
      snprintf(what, sizeof what,
               "fast kernels [%s, %d threads] against the graph that kept its Concats",
               kn_isa_name((kn_isa)isa), (int)t);
      tk_assert_bits(&k, &f, what);
      tk_results_free(&k);
      if (t == 1) {
        one = f;
      } else {
        tk_assert_bits(&one, &f, "fast kernels, 1 against 2 threads");
        tk_results_free(&one);
        tk_results_free(&f);
      }
    }
  }
  tk_results_free(&oracle);
  check_engine(opt, false, want->in_place);
  check_engine(opt, true, want->in_place);
  kn_ir_model_free(ref);
  kn_ir_model_free(opt);
  kn_ir_model_free(kept);
}

/* ---- the cases ------------------------------------------------------------- */

/* Two SqueezeNet fire modules: a squeeze 1x1, then expand 1x1 and 3x3
 * convs with Relu joined on the channels; the first module's 3x3 (16 to
 * 16 channels on 8x8) takes the Winograd tactic.  The second module
 * reads the first's Concat, and its own feeds a classifier conv. */
static void build_fire(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 8, 8, 8});
  int32_t s = relu(g, conv(g, x, 8, 16, 1, 1, 1, true));
  int32_t a = relu(g, conv(g, s, 16, 8, 1, 1, 10, true));
  int32_t b = relu(g, conv(g, s, 16, 16, 3, 1, 20, true));
  int32_t y = concat(g, 2, (int32_t[]){a, b}, 1);
  s = relu(g, conv(g, y, 24, 6, 1, 1, 30, true));
  a = relu(g, conv(g, s, 6, 7, 1, 1, 40, true));
  b = relu(g, conv(g, s, 6, 9, 3, 1, 50, true));
  y = concat(g, 2, (int32_t[]){a, b}, -3);
  tk_output(g, relu(g, conv(g, y, 16, 5, 1, 1, 60, true)));
}

static void test_fire(void **state) {
  (void)state;
  case_want w = {.elided = 2, .n_slices = 4,
                 .slices = {{8, 24, 0}, {16, 24, 8}, {7, 16, 0}, {9, 16, 7}},
                 .winograd = true, .in_place = 2};
  check(build_fire, &w);
}

/* s = x * Sigmoid(Conv1x1(Relu(Conv1x1(GAP(x))))): a squeeze-and-excite
 * scale the next conv takes as its input-channel scale (fuse_se). */
static int32_t excited(kn_graph *g, int32_t x, int64_t c) {
  int32_t p = tk_node(g, "GlobalAveragePool", 1, (int32_t[]){x});
  p = relu(g, conv(g, p, c, 2, 1, 1, 70, true));
  p = tk_node(g, "Sigmoid", 1, (int32_t[]){conv(g, p, 2, c, 1, 1, 80, true)});
  return tk_node(g, "Mul", 2, (int32_t[]){x, p});
}

/* Five branches of unlike kinds, joined in another order than they run:
 * a 1x1 with Relu, a 3x3 without bias whose Sigmoid runs after the
 * kernel, a grouped 3x3 (groups 2), a channel-multiplier depthwise
 * (groups = input channels, twice as many outputs: not the depthwise
 * kernel), and a 1x1 reading a squeeze-and-excite scale; odd channel
 * counts, a batch of 2.  The offsets follow the Concat's order. */
static void build_branches(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){2, 6, 7, 9});
  int32_t p = relu(g, conv(g, x, 6, 5, 1, 1, 1, true));
  int32_t q = tk_node(g, "Sigmoid", 1, (int32_t[]){conv(g, x, 6, 7, 3, 1, 10, false)});
  int32_t r = conv(g, x, 6, 4, 3, 2, 20, true);
  int32_t d = conv(g, x, 6, 12, 3, 6, 30, true);
  int32_t t = conv(g, excited(g, x, 6), 6, 3, 1, 1, 40, true);
  int32_t y = concat(g, 5, (int32_t[]){r, d, p, t, q}, 1);
  tk_output(g, conv(g, relu(g, y), 31, 4, 1, 1, 50, true));
}

static void test_branch_order(void **state) {
  (void)state;
  case_want w = {.elided = 1, .n_slices = 5,
                 .slices = {{4, 31, 0}, {12, 31, 4}, {5, 31, 16}, {3, 31, 21}, {7, 31, 24}},
                 .in_place = 4, .scaled_m = 3};
  check(build_branches, &w);
}

/* A Concat read by a conv and also a graph output (through the
 * Transpose back to NCHW); with a dynamic batch, nothing is planned and
 * runs take a batch of 2. */
static void graph_output(kn_ir_model *m, int64_t batch) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){batch, 5, 6, 7});
  int32_t a = relu(g, conv(g, x, 5, 3, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 5, 6, 3, 1, 10, true));
  int32_t y = concat(g, 2, (int32_t[]){a, b}, 1);
  tk_output(g, y);
  tk_output(g, conv(g, y, 9, 4, 3, 1, 20, true));
}

static void build_graph_output(kn_ir_model *m) { graph_output(m, 2); }

static void build_graph_output_dynamic(kn_ir_model *m) { graph_output(m, -1); }

static void test_graph_output(void **state) {
  (void)state;
  case_want w = {.elided = 1, .n_slices = 2, .slices = {{3, 9, 0}, {6, 9, 3}}, .in_place = 1};
  check(build_graph_output, &w);
  w.in_place = 0;
  check(build_graph_output_dynamic, &w);
}

/* Channels-last steps built directly, their Concat on axis -1 (the
 * channels of [N, H, W, C]) being the graph output itself: the last link
 * writes the output (outside the arena) from its input 5. */
static void build_nhwc_output(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 5, 4});
  int32_t a = nhwc_conv(g, x, 4, 5, 1, 1, "Relu");
  int32_t b = nhwc_conv(g, x, 4, 3, 3, 10, NULL);
  int32_t c = nhwc_conv(g, x, 4, 17, 3, 20, "Silu");
  tk_output(g, concat(g, 3, (int32_t[]){b, c, a}, -1));
}

static void test_nhwc_concat_is_output(void **state) {
  (void)state;
  case_want w = {.elided = 1, .n_slices = 3, .slices = {{3, 25, 0}, {17, 25, 3}, {5, 25, 20}},
                 .in_place = 1};
  check(build_nhwc_output, &w);
}

/* Near misses, each keeping its Concat (and its results). */

/* An expand conv's output is also read by a pool. */
static void build_miss_shared(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 5, 3, 1, 10, true));
  int32_t y = concat(g, 2, (int32_t[]){a, b}, 1);
  tk_output(g, conv(g, y, 9, 3, 1, 1, 20, true));
  tk_output(g, maxpool3(g, a, 1));
}

/* An expand conv's output is also a graph output. */
static void build_miss_output(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 5, 3, 1, 10, true));
  tk_output(g, b);
  tk_output(g, conv(g, concat(g, 2, (int32_t[]){a, b}, 1), 9, 3, 1, 1, 20, true));
}

/* A conv with a residual Add fused (FusedConv's Z). */
static void build_miss_residual(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, tk_node(g, "Add", 2, (int32_t[]){conv(g, x, 6, 6, 3, 1, 1, true), x}));
  int32_t b = relu(g, conv(g, x, 6, 5, 1, 1, 10, true));
  tk_output(g, conv(g, concat(g, 2, (int32_t[]){a, b}, 1), 11, 3, 1, 1, 20, true));
}

/* A depthwise conv (the depthwise kernel writes whole pixels). */
static void build_miss_depthwise(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, conv(g, x, 6, 6, 3, 6, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 5, 1, 1, 10, true));
  tk_output(g, conv(g, concat(g, 2, (int32_t[]){a, b}, 1), 11, 3, 1, 1, 20, true));
}

/* A channels-last pooling branch beside the conv (Inception's). */
static void build_miss_pool(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t s = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t a = relu(g, conv(g, s, 4, 5, 3, 1, 10, true));
  int32_t p = maxpool3(g, s, 1);
  tk_output(g, conv(g, concat(g, 2, (int32_t[]){a, p}, 1), 9, 3, 1, 1, 20, true));
}

/* One conv's output twice in the Concat. */
static void build_miss_twice(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 5, 3, 1, 10, true));
  tk_output(g, conv(g, concat(g, 3, (int32_t[]){a, b, a}, 1), 13, 3, 1, 1, 20, true));
}

/* Concats on the height (axis 2) and the width (axis -1) of NCHW. */
static void build_miss_axes(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 5});
  int32_t a = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 4, 3, 1, 10, true));
  int32_t c = relu(g, conv(g, x, 6, 4, 3, 1, 20, true));
  int32_t d = relu(g, conv(g, x, 6, 4, 1, 1, 30, true));
  int32_t h = concat(g, 2, (int32_t[]){a, b}, 2), w = concat(g, 2, (int32_t[]){c, d}, -1);
  tk_output(g, conv(g, h, 4, 3, 3, 1, 40, true));
  tk_output(g, conv(g, w, 4, 3, 3, 1, 50, true));
}

/* Channels-last Concats built directly on the height (1), the width (2,
 * -2) of [N, H, W, C]; the shapes make each one's dims add up. */
static void build_miss_nhwc_axes(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 6, 4});
  static const int64_t axes[] = {1, 2, -2};
  for (int32_t i = 0; i < 3; i++) {
    int32_t a = nhwc_conv(g, x, 4, 4, 1, 1 + 10 * (uint32_t)i, "Relu");
    int32_t b = nhwc_conv(g, x, 4, 4, 3, 5 + 10 * (uint32_t)i, NULL);
    tk_output(g, concat(g, 2, (int32_t[]){a, b}, axes[i]));
  }
}

/* Nested Concats: the inner one goes, the outer one then reads a step
 * that already writes a slice, and stays. */
static void build_miss_nested(kn_ir_model *m) {
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){1, 6, 7, 7});
  int32_t a = relu(g, conv(g, x, 6, 4, 1, 1, 1, true));
  int32_t b = relu(g, conv(g, x, 6, 5, 3, 1, 10, true));
  int32_t c = relu(g, conv(g, x, 6, 3, 3, 1, 20, true));
  int32_t in = concat(g, 2, (int32_t[]){a, b}, 1);
  tk_output(g, conv(g, concat(g, 2, (int32_t[]){in, c}, 1), 12, 3, 1, 1, 30, true));
}

static void test_near_misses(void **state) {
  (void)state;
  static const build_fn misses[] = {build_miss_shared,    build_miss_output,
                                    build_miss_residual,  build_miss_depthwise,
                                    build_miss_pool,      build_miss_twice,
                                    build_miss_axes,      build_miss_nhwc_axes};
  case_want none = {0};
  for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
    print_message("    near miss %d\n", (int)i);
    check(misses[i], &none);
  }
  case_want nested = {.elided = 1, .n_slices = 2, .slices = {{4, 9, 0}, {5, 9, 4}},
                      .in_place = 1};
  check(build_miss_nested, &nested);
}

/* Disabled by name (kiln build --disable-pass concat_inplace), the pass
 * leaves the Concats; the pass run alone after channels_last is what
 * kn_optimize does, and a second run finds nothing more. */
static void test_disabled(void **state) {
  (void)state;
  kn_ir_model *m = build(build_fire, true, false);
  assert_int_equal(tk_count_op(m->graph, "Concat"), 2);
  for (int32_t i = 0; i < m->graph->n_nodes; i++)
    assert_false(is_slice_conv(&m->graph->nodes[i]));
  assert_true(tk_run_pass(m, kn_pass_concat_inplace));
  tk_run_pass(m, kn_pass_dce);
  assert_int_equal(tk_count_op(m->graph, "Concat"), 0);
  assert_false(tk_run_pass(m, kn_pass_concat_inplace));
  kn_ir_model *o = build(build_fire, true, true);
  tk_results a = tk_run(m, TK_FILL_SEEDED), b = tk_run(o, TK_FILL_SEEDED);
  tk_assert_bits(&b, &a, "the pass run alone against kn_optimize");
  tk_results_free(&a);
  tk_results_free(&b);
  kn_ir_model_free(m);
  kn_ir_model_free(o);
  assert_non_null(kn_pass_find("concat_inplace"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fire),
      cmocka_unit_test(test_branch_order),
      cmocka_unit_test(test_graph_output),
      cmocka_unit_test(test_nhwc_concat_is_output),
      cmocka_unit_test(test_near_misses),
      cmocka_unit_test(test_disabled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
