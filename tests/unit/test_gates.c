/* The builder's public API (include/kiln.h; src/builder): kn_validate and
 * kn_model_build_budgeted on the bundled tinycnn, through kiln.h only.
 *  - validate: an fp32 build passes tight accuracy limits and its report
 *    holds what the CLI prints (outputs, sorted latencies, peak RSS); an
 *    impossible p99 fails with a negative margin; a bf16 build fails a
 *    max-abs-error tighter than bf16's rounding, naming the output; samples
 *    from memory and from a reader give the same accuracy as the model's own
 *    test data; labels give the top-1 of both sides; bad arguments, a
 *    reader's failure, a missing model and an engine given as the model each
 *    fail with one line.
 *  - budgeted builds: with a bound between the bf16 build's cosine and
 *    fp32's, the requested bf16 build fails, the sensitivity search keeps
 *    some steps (not all) in fp32, and kn_validate of the model it returns
 *    meets the bound on its own; the bisection search finds a set that meets
 *    it too; a bound met as requested keeps nothing; a bound not even fp32
 *    meets is KN_ERR_LIMIT with the all-fp32 trial in the report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif
#define TINY KILN_SOURCE_DIR "/models/tinycnn/model.onnx"
#define TINY_INPUT KILN_SOURCE_DIR "/models/tinycnn/test_data_set_0/input_0.pb"

/* tinycnn built in memory at batch 1 with `precision` (heuristic tactics). */
static kn_model *build_tiny(int32_t precision) {
  kn_model *m = NULL;
  kn_error err = {0};
  static const char *const shapes[] = {"input=1x3x32x32"};
  assert_int_equal(kn_model_load(TINY, &m, &err), KN_OK);
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = shapes;
  bo.n_shapes = 1;
  bo.tactics = KN_TACTICS_HEURISTIC;
  bo.precision = precision;
  if (kn_model_build(m, &bo, &err)) fail_msg("build: %s", err.msg);
  return m;
}

static void validate_ok(const kn_model *m, const kn_samples *s, const kn_validate_options *o,
                        kn_validate_report *r) {
  kn_error err = {0};
  if (kn_validate(m, TINY, s, o, r, &err)) fail_msg("kn_validate: %s", err.msg);
}

static void test_validate_fp32_passes(void **state) {
  (void)state;
  kn_model *m = build_tiny(KN_PRECISION_FP32);
  kn_validate_options o;
  kn_validate_options_init(&o);
  assert_int_equal(o.runs, 20);
  assert_int_equal(o.warmup, 3);
  o.runs = 5;
  o.warmup = 1;
  o.threads = 1;
  o.has_max_p99_ms = 1;
  o.max_p99_ms = 10000;
  o.has_max_rss = 1;
  o.max_rss = (uint64_t)1 << 40;
  o.accuracy.has_max_abs_error = 1;
  o.accuracy.max_abs_error = 1e-3;
  o.accuracy.has_min_cosine = 1;
  o.accuracy.min_cosine = 0.9999;
  kn_validate_report r;
  validate_ok(m, NULL, &o, &r);
  assert_true(r.pass);
  assert_int_equal(r.samples, 1);
  assert_int_equal(r.threads, 1);
  assert_int_equal(r.runs, 5);
  assert_string_equal(r.inputs, "input=1x3x32x32");
  assert_int_equal(r.n_outputs, 1);
  assert_string_equal(r.outputs[0].name, "logits");
  assert_true(r.outputs[0].compared);
  assert_int_equal(r.outputs[0].rank, 2);
  assert_int_equal(r.outputs[0].dims[1], 10);
  assert_true(r.max_abs_error < 1e-3 && r.min_cosine > 0.9999);
  for (int i = 1; i < 5; i++) assert_true(r.latency_ms[i - 1] <= r.latency_ms[i]);
  assert_true(r.latency_min_ms == r.latency_ms[0] && r.latency_max_ms == r.latency_ms[4]);
  assert_true(r.latency_p50_ms == r.latency_ms[2]);
  assert_true(r.peak_rss > 0);
  assert_true(r.top1 < 0 && r.top1_rows == 0);
  for (int i = 0; i < KN_GATE_MAX_ACCURACY_DROP; i++) {
    assert_true(r.gates[i].given && r.gates[i].pass);
    assert_true(r.gates[i].margin >= 0);
  }
  assert_false(r.gates[KN_GATE_MAX_ACCURACY_DROP].given);
  assert_string_equal(r.gates[KN_GATE_MIN_COSINE].name, "min-cosine");
  assert_int_equal(r.gates[KN_GATE_MAX_ABS_ERROR].output, 0);
  assert_int_equal(r.gates[KN_GATE_MAX_ABS_ERROR].sample, 0);
  kn_validate_report_release(&r);
  assert_null(r.outputs);

  /* an impossible latency: measured, and failed with a negative margin */
  o.max_p99_ms = 1e-9;
  validate_ok(m, NULL, &o, &r);
  assert_false(r.pass);
  assert_false(r.gates[KN_GATE_MAX_P99_MS].pass);
  assert_true(r.gates[KN_GATE_MAX_P99_MS].margin < 0);
  assert_true(r.gates[KN_GATE_MAX_ABS_ERROR].pass);
  kn_validate_report_release(&r);
  kn_model_free(m);
}

static void test_validate_bf16_fails_tight_limit(void **state) {
  (void)state;
  kn_model *m = build_tiny(KN_PRECISION_BF16);
  kn_validate_options o;
  kn_validate_options_init(&o);
  o.runs = 2;
  o.warmup = 0;
  o.accuracy.has_max_abs_error = 1;
  o.accuracy.max_abs_error = 1e-6; /* bf16 rounds at 2^-8 relative */
  o.accuracy.has_min_cosine = 1;
  o.accuracy.min_cosine = 0.99;
  kn_validate_report r;
  validate_ok(m, NULL, &o, &r);
  assert_false(r.pass);
  const kn_gate *g = &r.gates[KN_GATE_MAX_ABS_ERROR];
  assert_false(g->pass);
  assert_true(g->measured > 1e-6 && g->margin < 0);
  assert_int_equal(g->output, 0);
  assert_true(r.gates[KN_GATE_MIN_COSINE].pass);
  kn_validate_report_release(&r);
  kn_model_free(m);
}

/* A reader over copies of the test data's input (index 1 fails when asked). */
typedef struct reader {
  int32_t calls;
  int32_t fail_at;
} reader;

static kn_status read_tiny(void *arg, int32_t index, kn_tensor *inputs, int32_t n_inputs,
                           kn_error *err) {
  reader *rd = arg;
  rd->calls++;
  assert_int_equal(n_inputs, 1);
  if (index == rd->fail_at) {
    snprintf(err->msg, sizeof err->msg, "sample %d: unreadable on purpose", index);
    err->status = KN_ERR_IO;
    return KN_ERR_IO;
  }
  return kn_tensor_read_file(TINY_INPUT, &inputs[0], NULL, err);
}

static void test_validate_samples(void **state) {
  (void)state;
  kn_model *m = build_tiny(KN_PRECISION_FP32);
  kn_error err = {0};
  kn_tensor x[2];
  memset(x, 0, sizeof x);
  assert_int_equal(kn_tensor_read_file(TINY_INPUT, &x[0], NULL, &err), KN_OK);
  assert_int_equal(kn_tensor_read_file(TINY_INPUT, &x[1], NULL, &err), KN_OK);
  /* the second sample differs: the worst is there */
  float *p = x[1].data;
  for (int64_t i = 0; i < kn_tensor_numel(&x[1]); i++) p[i] *= -3.0f;
  kn_validate_options o;
  kn_validate_options_init(&o);
  o.runs = 1;
  o.warmup = 0;
  kn_samples s;
  kn_samples_init(&s);
  assert_int_equal(s.count, 0);
  assert_int_equal(s.seed, 1);
  s.count = 2;
  s.n_inputs = 1;
  s.tensors = x;
  /* labels: tinycnn's own predictions count as right on both sides */
  int64_t labels[2] = {0, 0};
  s.labels = labels;
  s.n_labels = 2;
  kn_validate_report r;
  validate_ok(m, &s, &o, &r);
  assert_int_equal(r.samples, 2);
  assert_int_equal(r.top1_rows, 2);
  assert_true(r.top1 >= 0 && r.top1 == r.reference_top1);
  assert_true(r.outputs[0].max_abs_error < 1e-3);
  kn_validate_report_release(&r);

  /* the same inputs from a reader: read once per phase */
  reader rd = {0, -1};
  kn_samples sr;
  kn_samples_init(&sr);
  sr.count = 2;
  sr.read = read_tiny;
  sr.read_arg = &rd;
  validate_ok(m, &sr, &o, &r);
  assert_int_equal(rd.calls, 4);
  assert_int_equal(r.samples, 2);
  kn_validate_report_release(&r);

  /* a reader that fails: its message and status */
  static const char *const names[] = {"first", "second"};
  rd = (reader){0, 1};
  sr.names = names;
  assert_int_equal(kn_validate(m, TINY, &sr, &o, &r, &err), KN_ERR_IO);
  assert_non_null(strstr(err.msg, "unreadable on purpose"));
  kn_validate_report_release(&r);

  /* more labels than predictions */
  int64_t three[3] = {0, 0, 0};
  s.labels = three;
  s.n_labels = 3;
  assert_int_equal(kn_validate(m, TINY, &s, &o, &r, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "3 labels for 2 predictions"));
  kn_validate_report_release(&r);

  /* samples whose input count is not the model's */
  s.n_labels = 0;
  s.labels = NULL;
  s.n_inputs = 2;
  s.count = 1;
  assert_int_equal(kn_validate(m, TINY, &s, &o, &r, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "2 inputs each, the model takes 1"));
  kn_validate_report_release(&r);

  /* a wrong shape in memory: kiln's own check, named by the sample */
  int64_t dims[4] = {1, 3, 16, 16};
  kn_tensor bad;
  assert_int_equal(kn_tensor_alloc(&bad, KN_DTYPE_F32, 4, dims, &err), KN_OK);
  kn_samples sb;
  kn_samples_init(&sb);
  sb.count = 1;
  sb.n_inputs = 1;
  sb.tensors = &bad;
  sb.names = names;
  assert_int_not_equal(kn_validate(m, TINY, &sb, &o, &r, &err), KN_OK);
  assert_true(strncmp(err.msg, "first: ", 7) == 0);
  kn_validate_report_release(&r);
  kn_tensor_release(&bad);
  kn_tensor_release(&x[0]);
  kn_tensor_release(&x[1]);
  kn_model_free(m);
}

static void test_validate_errors(void **state) {
  (void)state;
  kn_model *m = build_tiny(KN_PRECISION_FP32);
  kn_error err = {0};
  kn_validate_report r;
  kn_validate_options o;
  kn_validate_options_init(&o);
  o.runs = 1;
  o.warmup = 0;
  o.label = "tiny.kiln";
  assert_int_equal(kn_validate(m, "/nonexistent/model.onnx", NULL, &o, &r, &err), KN_ERR_IO);
  assert_non_null(strstr(err.msg, "/nonexistent/model.onnx: cannot open"));
  kn_validate_report_release(&r);
  /* an engine as the model */
  char path[] = "/tmp/kiln_test_gates_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(kn_model_save(m, path, &err), KN_OK);
  assert_int_equal(kn_validate(m, path, NULL, &o, &r, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "is an engine"));
  kn_validate_report_release(&r);
  /* ... which validates fine as the engine */
  kn_model *e = NULL;
  assert_int_equal(kn_model_load(path, &e, &err), KN_OK);
  validate_ok(e, NULL, &o, &r);
  assert_true(r.pass);
  kn_validate_report_release(&r);
  kn_model_free(e);
  unlink(path);
  /* options out of range */
  o.runs = 0;
  assert_int_equal(kn_validate(m, TINY, NULL, &o, &r, &err), KN_ERR_INVALID_ARG);
  o.runs = 1;
  o.accuracy.has_min_cosine = 1;
  o.accuracy.min_cosine = 2;
  assert_int_equal(kn_validate(m, TINY, NULL, &o, &r, &err), KN_ERR_INVALID_ARG);
  o.accuracy.has_min_cosine = 0;
  /* a drop limit needs labels */
  o.accuracy.has_max_accuracy_drop = 1;
  assert_int_equal(kn_validate(m, TINY, NULL, &o, &r, &err), KN_ERR_MISSING);
  kn_validate_report_release(&r);
  kn_model_free(m);
}

/* ---- budgeted builds ------------------------------------------------------------ */

static void budget_init(kn_budget_search_options *o, int32_t search, double min_cosine) {
  kn_budget_search_options_init(o);
  o->search = search;
  o->budget.has_min_cosine = 1;
  o->budget.min_cosine = min_cosine;
}

static kn_build_options bf16_options(void) {
  static const char *const shapes[] = {"input=1x3x32x32"};
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = shapes;
  bo.n_shapes = 1;
  bo.tactics = KN_TACTICS_HEURISTIC;
  bo.precision = KN_PRECISION_BF16;
  return bo;
}

/* kn_validate's cosine of m against tinycnn on the generated sample. */
static double cosine_of(const kn_model *m) {
  kn_validate_options o;
  kn_validate_options_init(&o);
  o.runs = 1;
  o.warmup = 0;
  kn_validate_report r;
  validate_ok(m, NULL, &o, &r);
  double c = r.min_cosine;
  kn_validate_report_release(&r);
  return c;
}

static void test_budget_search(void **state) {
  (void)state;
  kn_error err = {0};
  kn_build_options bo = bf16_options();
  kn_budget_search_options so;
  kn_budget_report r;
  kn_model *m = NULL;
  /* a loose bound holds as requested: one build, nothing in fp32 */
  budget_init(&so, KN_SEARCH_SENSITIVITY, 0.99);
  if (kn_model_build_budgeted(TINY, &bo, NULL, &so, &m, &r, &err))
    fail_msg("budgeted: %s", err.msg);
  assert_true(r.pass);
  assert_int_equal(r.n_trials, 1);
  assert_int_equal(r.builds, 1);
  assert_int_equal(r.trials[0].phase, KN_TRIAL_REQUESTED);
  assert_true(r.trials[0].pass);
  assert_int_equal(r.n_fp32, 0);
  int32_t n = r.n_steps;
  assert_true(n >= 2); /* tinycnn's convolutions and Gemm in bf16 */
  for (int32_t i = 0; i < n; i++) assert_int_equal(r.precisions[i], KN_PRECISION_BF16);
  double c_req = r.trials[0].cosine, c_val = cosine_of(m);
  assert_true(fabs(c_req - c_val) < 1e-12); /* the search measures as kn_validate does */
  assert_true(c_req < 1 - 1e-9);
  kn_budget_report_release(&r);
  kn_model_free(m);
  m = NULL;

  /* halfway (in 1 - cosine) between bf16's and exactness: the requested
   * build breaks it, all-fp32 keeps it, and the set found keeps it too */
  double bound = 1 - (1 - c_req) / 2;
  budget_init(&so, KN_SEARCH_SENSITIVITY, bound);
  so.time_runs = 2;
  if (kn_model_build_budgeted(TINY, &bo, NULL, &so, &m, &r, &err))
    fail_msg("budgeted: %s", err.msg);
  assert_non_null(m);
  assert_true(r.pass);
  assert_int_equal(r.n_steps, n);
  assert_false(r.trials[0].pass);
  assert_int_equal(r.trials[1].phase, KN_TRIAL_ALL_FP32);
  assert_true(r.trials[1].pass);
  assert_int_equal(r.trials[1].n_fp32, n);
  {
    /* the all-fp32 point is the fp32 engine: every step the requested
     * build left in fp32 (a reduced precision timed slower, say) stays in
     * fp32 in every trial, whatever that trial's own timings say */
    kn_model *m32 = NULL;
    kn_build_options b32;
    kn_build_options_init(&b32);
    b32.tactics = KN_TACTICS_HEURISTIC;
    assert_int_equal(kn_model_load(TINY, &m32, &err), KN_OK);
    assert_int_equal(kn_model_build(m32, &b32, &err), KN_OK);
    assert_true(fabs(r.trials[1].cosine - cosine_of(m32)) < 1e-9);
    kn_model_free(m32);
  }
  int32_t sens = 0, bis = 0;
  for (int32_t k = 0; k < r.n_trials; k++) {
    sens += r.trials[k].phase == KN_TRIAL_SENSITIVITY;
    bis += r.trials[k].phase == KN_TRIAL_BISECT;
    if (r.trials[k].phase == KN_TRIAL_SENSITIVITY) assert_int_equal(r.trials[k].n_fp32, n - 1);
  }
  assert_int_equal(sens, n);
  assert_true(bis >= 1); /* n >= 2: lo 0, hi n */
  assert_int_equal(r.n_trials, 2 + n + bis);
  assert_int_equal(r.builds, r.n_trials);
  assert_non_null(r.order);
  assert_true(r.n_fp32 >= 1 && r.n_fp32 <= n);
  /* the set is the most sensitive n_fp32 */
  for (int32_t j = 0; j < n; j++) assert_int_equal(r.fp32[r.order[j]], j < r.n_fp32);
  assert_true(r.ms_requested > 0 && r.ms_found > 0 && r.ms_fp32 > 0);
  /* the model returned: the kept steps in fp32, the others bf16, and the
   * bound met when measured on its own */
  for (int32_t s = 0; s < kn_model_step_count(m); s++) {
    kn_step_info si;
    assert_int_equal(kn_model_step_info(m, s, &si), KN_OK);
    for (int32_t i = 0; i < n; i++)
      if (!strcmp(si.name, r.steps[i]))
        assert_int_equal(si.precision, r.fp32[i] ? KN_PRECISION_FP32 : KN_PRECISION_BF16);
  }
  assert_true(cosine_of(m) >= bound);
  kn_budget_report_release(&r);
  kn_model_free(m);
  m = NULL;

  /* the bisection: a set that keeps the bound, found in step order */
  budget_init(&so, KN_SEARCH_BISECT, bound);
  if (kn_model_build_budgeted(TINY, &bo, NULL, &so, &m, &r, &err))
    fail_msg("bisect: %s", err.msg);
  assert_true(r.pass);
  assert_null(r.order);
  assert_true(r.n_fp32 >= 1);
  assert_true(cosine_of(m) >= bound);
  assert_true(r.ms_requested < 0); /* not timed */
  kn_budget_report_release(&r);
  kn_model_free(m);
}

static void test_budget_unreachable(void **state) {
  (void)state;
  kn_error err = {0};
  kn_build_options bo = bf16_options();
  kn_budget_search_options so;
  kn_budget_report r;
  kn_model *m = (kn_model *)&so; /* set to NULL on failure */
  /* no error at all: fp32's fusions round differently from the reference */
  kn_budget_search_options_init(&so);
  so.budget.has_max_abs_error = 1;
  so.budget.max_abs_error = 0;
  assert_int_equal(kn_model_build_budgeted(TINY, &bo, NULL, &so, &m, &r, &err), KN_ERR_LIMIT);
  assert_null(m);
  assert_false(r.pass);
  assert_int_equal(r.n_trials, 2);
  assert_int_equal(r.trials[1].phase, KN_TRIAL_ALL_FP32);
  assert_false(r.trials[1].pass);
  assert_true(r.trials[1].max_abs_error > 0);
  assert_non_null(strstr(err.msg, "breaks even with every step in fp32"));
  kn_budget_report_release(&r);
  /* fp32 requested: no candidate to put back */
  bo.precision = KN_PRECISION_FP32;
  assert_int_equal(kn_model_build_budgeted(TINY, &bo, NULL, &so, NULL, &r, &err), KN_ERR_LIMIT);
  assert_int_equal(r.n_steps, 0);
  assert_int_equal(r.n_trials, 1);
  assert_non_null(strstr(err.msg, "no step runs in reduced precision"));
  kn_budget_report_release(&r);
  /* no bound */
  kn_budget_search_options_init(&so);
  assert_int_equal(kn_model_build_budgeted(TINY, &bo, NULL, &so, NULL, &r, &err),
                   KN_ERR_INVALID_ARG);
  kn_budget_report_release(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validate_fp32_passes),
      cmocka_unit_test(test_validate_bf16_fails_tight_limit),
      cmocka_unit_test(test_validate_samples),
      cmocka_unit_test(test_validate_errors),
      cmocka_unit_test(test_budget_search),
      cmocka_unit_test(test_budget_unreachable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
