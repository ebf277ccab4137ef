/* Pattern-recognition passes (layernorm, gelu, hardswish, attention) on the
 * small models of tests/data/patterns (make.py there): each model is run
 * unoptimized and optimized on the same inputs; the fused op must appear
 * (and the op it replaces disappear) in the models named <pass>_<case>, and
 * nothing may fuse in the near misses <pass>_miss_<case>.  Outputs must agree
 * up to float rounding either way. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "passes/pass.h"

typedef struct pat_case {
  const char *file;
  const char *fused;  /* op the pass writes */
  const char *domain; /* its domain */
  const char *gone;   /* op that must disappear when it fires */
  bool fires;
  int64_t batch, seq; /* sizes for dims named batch / seq */
} pat_case;

static const pat_case cases[] = {
    {"layernorm_basic", "LayerNormalization", "kiln", "ReduceMean", true, 0, 0},
    {"layernorm_noaffine", "LayerNormalization", "kiln", "ReduceMean", true, 0, 0},
    {"layernorm_opset18", "LayerNormalization", "", "ReduceMean", true, 0, 0},
    {"layernorm_two_axes", "LayerNormalization", "kiln", "ReduceMean", true, 0, 0},
    {"layernorm_mul_square", "LayerNormalization", "kiln", "ReduceMean", true, 0, 0},
    {"layernorm_miss_eps_after_sqrt", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"layernorm_miss_axis1", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"layernorm_miss_axes_differ", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"layernorm_miss_d_output", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"layernorm_miss_pow4", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"layernorm_miss_sub_other_x", "LayerNormalization", NULL, "ReduceMean", false, 0, 0},
    {"gelu_erf_a", "Gelu", "kiln", "Erf", true, 0, 0},
    {"gelu_erf_b", "Gelu", "kiln", "Erf", true, 0, 0},
    {"gelu_erf_c", "Gelu", "kiln", "Erf", true, 0, 0},
    {"gelu_tanh_pow", "Gelu", "kiln", "Tanh", true, 0, 0},
    {"gelu_tanh_mul", "Gelu", "kiln", "Tanh", true, 0, 0},
    {"gelu_miss_half06", "Gelu", NULL, "Erf", false, 0, 0},
    {"gelu_miss_root15", "Gelu", NULL, "Erf", false, 0, 0},
    {"gelu_miss_erf_output", "Gelu", NULL, "Erf", false, 0, 0},
    {"hardswish_hardsigmoid", "HardSwish", "kiln", "HardSigmoid", true, 0, 0},
    {"hardswish_hardsigmoid_opset14", "HardSwish", "", "HardSigmoid", true, 0, 0},
    {"hardswish_clip_div", "HardSwish", "kiln", "Clip", true, 0, 0},
    {"hardswish_clip_mul16_first", "HardSwish", "", "Clip", true, 0, 0},
    {"hardswish_clip_attrs", "HardSwish", "kiln", "Clip", true, 0, 0},
    {"hardswish_miss_alpha02", "HardSwish", NULL, "HardSigmoid", false, 0, 0},
    {"hardswish_miss_clip5", "HardSwish", NULL, "Clip", false, 0, 0},
    {"hardswish_miss_add4", "HardSwish", NULL, "Clip", false, 0, 0},
    {"attention_const", "Attention", "kiln", "Softmax", true, 0, 0},
    {"attention_dynamic", "Attention", "kiln", "Softmax", true, 2, 5},
    {"attention_kt_two_step", "Attention", "kiln", "Softmax", true, 0, 0},
    {"attention_long", "Attention", "kiln", "Softmax", true, 1, 150},
    {"attention_miss_softmax_axis2", "Attention", NULL, "Softmax", false, 0, 0},
    {"attention_miss_scores_output", "Attention", NULL, "Softmax", false, 0, 0},
    /* heads moved to the front by odd permutations: no near miss since the
       pass also takes per-head layouts (q_perm/k_perm/v_perm/out_perm) */
    {"attention_miss_odd_perm", "Attention", "kiln", "Softmax", true, 0, 0},
    {"attention_miss_per_head_scale", "Attention", NULL, "Softmax", false, 0, 0},
};

static void model_path(const char *name, char *buf, size_t len) {
  const char *src = __FILE__;
  const char *slash = strrchr(src, '/');
  int dir = slash ? (int)(slash - src) : 0;
  snprintf(buf, len, "%.*s%s../data/patterns/%s.onnx", dir, src, slash ? "/" : "", name);
}

static int32_t count_op(const kn_graph *g, const char *op, const char *domain) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op_type, op) && (!domain || !strcmp(g->nodes[i].domain, domain)))
      c++;
  return c;
}

static float next_uniform(uint64_t *s, float lo, float hi) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)((*s >> 40) & 0xffffff) / (float)0x1000000;
}

/* Inputs for the model's graph inputs: uniform in [-4, 4] (a mask gets 0 or
 * -10000), dims named batch / seq set from the case. */
static kn_tensor *make_inputs(const kn_model *m, const pat_case *c, int32_t *n) {
  const kn_graph *g = kn_model_ir(m)->graph;
  *n = m->n_inputs;
  kn_tensor *ts = kn_calloc((size_t)*n + 1, sizeof *ts);
  assert_non_null(ts);
  uint64_t seed = 12345;
  for (int32_t i = 0; i < *n; i++) {
    const kn_value *v = &g->values[g->inputs[m->inputs[i]]];
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < v->type.rank; d++) {
      dims[d] = v->type.dims[d];
      if (dims[d] < 0) {
        const char *p = v->dim_params[d] ? v->dim_params[d] : "";
        dims[d] = !strcmp(p, "batch") ? c->batch : !strcmp(p, "seq") ? c->seq : 1;
      }
    }
    assert_int_equal(kn_tensor_alloc(&ts[i], KN_DTYPE_F32, v->type.rank, dims, NULL), KN_OK);
    float *x = ts[i].data;
    bool mask = !strcmp(v->name, "mask");
    for (int64_t j = 0; j < kn_tensor_numel(&ts[i]); j++)
      x[j] = mask ? (next_uniform(&seed, 0, 1) < 0.3f ? -10000.0f : 0.0f)
                  : next_uniform(&seed, -4, 4);
  }
  return ts;
}

static void run(kn_model *m, const kn_tensor *in, int32_t n, kn_context **ctx) {
  kn_error err = {0};
  assert_int_equal(kn_context_create(m, ctx, &err), KN_OK);
  for (int32_t i = 0; i < n; i++)
    assert_int_equal(kn_context_set_input(*ctx, i, &in[i], &err), KN_OK);
  if (kn_context_run(*ctx, &err)) fail_msg("run: %s", err.msg);
}

static void check_case(const pat_case *c) {
  char path[1024];
  model_path(c->file, path, sizeof path);
  kn_error err = {0};
  kn_model *ref = NULL, *opt = NULL;
  if (kn_model_load(path, &ref, &err)) fail_msg("%s: %s", c->file, err.msg);
  assert_int_equal(kn_model_load(path, &opt, &err), KN_OK);
  kn_ir_model *ir = (kn_ir_model *)kn_model_ir(opt);
  if (kn_optimize(ir, NULL, &err)) fail_msg("%s: optimize: %s", c->file, err.msg);
  const kn_graph *g = ir->graph;
  if (c->fires) {
    if (count_op(g, c->fused, c->domain) != 1 || count_op(g, c->gone, NULL) != 0)
      fail_msg("%s: expected one %s (domain '%s') and no %s", c->file, c->fused, c->domain,
               c->gone);
    for (int32_t i = 0; i < g->n_nodes; i++) /* inspect lists what the step replaced */
      if (!strcmp(g->nodes[i].op_type, c->fused) && !g->nodes[i].covers)
        fail_msg("%s: the %s node does not record the nodes it covers", c->file, c->fused);
  } else if (count_op(g, c->fused, NULL) != 0) {
    /* (the near miss's own ops may still be fused by other passes, e.g. into
       an elementwise chain: only the pattern's op must not appear) */
    fail_msg("%s: a near miss was fused into %s", c->file, c->fused);
  }
  int32_t n;
  kn_tensor *in = make_inputs(ref, c, &n);
  kn_context *cr = NULL, *co = NULL;
  run(ref, in, n, &cr);
  run(opt, in, n, &co);
  for (int32_t o = 0; o < kn_model_output_count(ref); o++) {
    const kn_tensor *a = kn_context_output(cr, o), *b = kn_context_output(co, o);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->rank, b->rank);
    assert_int_equal(kn_tensor_numel(a), kn_tensor_numel(b));
    const float *x = a->data, *y = b->data;
    for (int64_t j = 0; j < kn_tensor_numel(a); j++)
      if (!(fabsf(x[j] - y[j]) <= 1e-5f + 1e-4f * fabsf(x[j])) && !(isnan(x[j]) && isnan(y[j])))
        fail_msg("%s: output %d element %lld: %g unoptimized, %g optimized", c->file, o,
                 (long long)j, (double)x[j], (double)y[j]);
  }
  kn_context_free(cr);
  kn_context_free(co);
  for (int32_t i = 0; i < n; i++) kn_tensor_release(&in[i]);
  free(in);
  kn_model_free(ref);
  kn_model_free(opt);
}

static void test_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

/* --disable-pass leaves the block as it was. */
static void test_disabled(void **state) {
  (void)state;
  static const char *const names[] = {"layernorm", "attention"};
  static const char *const files[] = {"layernorm_basic", "attention_dynamic"};
  static const char *const kept[] = {"ReduceMean", "Softmax"};
  for (int i = 0; i < 2; i++) {
    char path[1024];
    model_path(files[i], path, sizeof path);
    kn_error err = {0};
    kn_model *m = NULL;
    assert_int_equal(kn_model_load(path, &m, &err), KN_OK);
    kn_optimize_options o = {.disabled = &names[i], .n_disabled = 1};
    assert_int_equal(kn_optimize((kn_ir_model *)kn_model_ir(m), &o, &err), KN_OK);
    assert_true(count_op(kn_model_ir(m)->graph, kept[i], NULL) > 0);
    kn_model_free(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_disabled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
