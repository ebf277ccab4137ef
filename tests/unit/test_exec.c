/* The executor's prepared hot path and threads: repeated runs reuse each
 * step's shapes and arena pointers only while that is sound (same input
 * shapes, shapes not decided by values), and results do not depend on
 * how often a context ran, on the thread count or on the ISA. */
#include "testkit.h"

#include "core/cpu.h"
#include "core/threadpool.h"

#include <math.h>
#include <unistd.h>

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

/* Relu then NonZero: the second step's output shape follows the values
 * (a dynamic step, inferred on every run). */
static void test_data_shaped_step_reinferred(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t d4[] = {6};
  int32_t x = tk_input(g, "x", 1, d4);
  int32_t r = tk_node(g, "Relu", 1, &x);
  int32_t nz = tk_node(g, "NonZero", 1, &r);
  int32_t s = tk_node(g, "Relu", 1, &r);
  tk_output(g, nz);
  tk_output(g, s);
  tk_prepare(m);
  kn_mem_plan plan;
  kn_error err;
  assert_int_equal(kn_plan_memory(g, 0, &plan, &err), KN_OK);
  void *arena = aligned_alloc(64, plan.arena_bytes ? (plan.arena_bytes + 63) & ~63ull : 64);
  kn_runner *run;
  assert_int_equal(kn_runner_create(m, g, &run, &err), KN_OK);
  static const float vals[3][6] = {{1, 0, 2, 0, 0, 0}, {1, 1, 1, 0, -1, 3}, {0, 0, 0, 0, 0, 5}};
  static const int64_t count[3] = {2, 4, 1};
  for (int k = 0; k < 3; k++) {
    kn_slot in, outs[2];
    memset(&in, 0, sizeof in);
    memset(outs, 0, sizeof outs);
    in.kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&in.t, KN_DTYPE_F32, 1, d4, NULL), KN_OK);
    memcpy(in.t.data, vals[k], sizeof vals[k]);
    const kn_slot *pin[1] = {&in};
    kn_mem_budget mem = {.limit = UINT64_MAX, .plan = &plan, .arena = arena};
    assert_int_equal(kn_runner_run(run, NULL, pin, outs, &mem, &err), KN_OK);
    /* prepared once; the Relus fixed, NonZero dynamic */
    assert_int_equal(kn_runner_prepare_count(run), 1);
    assert_int_equal(kn_runner_fixed_count(run), 2);
    assert_int_equal(outs[0].t.rank, 2);
    assert_int_equal(outs[0].t.dims[1], count[k]);
    const float *y = outs[1].t.data;
    for (int i = 0; i < 6; i++) assert_true(y[i] == (vals[k][i] > 0 ? vals[k][i] : 0));
    kn_slot_release(&outs[0]);
    kn_slot_release(&outs[1]);
    kn_slot_release(&in);
  }
  kn_runner_free(run);
  free(arena);
  kn_mem_plan_free(&plan);
  kn_ir_model_free(m);
}

static void fill(float *x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = 2.0f * tk_pseudo(&seed);
}

/* Runs `run` on x ([b, 8] floats) with plan and arena; returns output 0
 * (owned by the caller: kn_slot_release). */
static kn_slot run_rows(kn_runner *run, const kn_mem_plan *plan, void *arena, int64_t b,
                        const float *x) {
  kn_slot in, out;
  memset(&in, 0, sizeof in);
  memset(&out, 0, sizeof out);
  in.kind = KN_KIND_TENSOR;
  int64_t d[2] = {b, 8};
  assert_int_equal(kn_tensor_alloc(&in.t, KN_DTYPE_F32, 2, d, NULL), KN_OK);
  memcpy(in.t.data, x, (size_t)b * 8 * sizeof(float));
  const kn_slot *pin[1] = {&in};
  kn_mem_budget mem = {.limit = UINT64_MAX, .plan = plan, .arena = arena};
  kn_error err;
  if (kn_runner_run(run, NULL, pin, &out, &mem, &err)) fail_msg("%s", err.msg);
  kn_slot_release(&in);
  return out;
}

/* The prepare phase runs once per input signature: runs with the shapes
 * of the last run reuse it, a new batch prepares again (and a batch above
 * the plan's, which does not fit the arena, runs allocated), and coming
 * back prepares once more.  Every step of Relu -> MatMul -> Add is fixed.
 * The arena starts as NaN bytes and MatMul's reference kernel accumulates
 * into its output: every run gives the same, right answer because the
 * executor zeroes reference-tactic outputs (ops/op.h's output contract),
 * prepared or not. */
static void test_prepare_once_per_signature(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t dx[2] = {4, 8}, dw[2] = {8, 4}, db[1] = {4};
  int32_t x = tk_input(g, "x", 2, dx);
  int32_t r = tk_node(g, "Relu", 1, &x);
  int32_t mm_in[2] = {r, tk_const_rand(g, 2, dw, 3, 0)};
  int32_t mm = tk_node(g, "MatMul", 2, mm_in);
  int32_t add_in[2] = {mm, tk_const_rand(g, 1, db, 4, 0)};
  int32_t y = tk_node(g, "Add", 2, add_in);
  tk_output(g, y);
  tk_prepare(m);
  const float *w = g->values[mm_in[1]].constant->data, *bias = g->values[add_in[1]].constant->data;
  kn_mem_plan plan;
  kn_error err;
  assert_int_equal(kn_plan_memory(g, 0, &plan, &err), KN_OK);
  assert_true(plan.arena_bytes > 0);
  void *arena = aligned_alloc(64, (plan.arena_bytes + 63) & ~63ull);
  memset(arena, 0xff, plan.arena_bytes);
  kn_runner *run;
  assert_int_equal(kn_runner_create(m, g, &run, &err), KN_OK);
  static const int64_t batch[] = {4, 4, 4, 2, 2, 6, 4};
  static const int64_t prepares[] = {1, 1, 1, 2, 2, 3, 4};
  float xs[6 * 8];
  fill(xs, 6 * 8, 11);
  for (size_t k = 0; k < sizeof batch / sizeof batch[0]; k++) {
    kn_slot out = run_rows(run, &plan, arena, batch[k], xs);
    assert_int_equal(kn_runner_prepare_count(run), prepares[k]);
    assert_int_equal(kn_runner_fixed_count(run), 3);
    assert_int_equal(out.t.dims[0], batch[k]);
    const float *yv = out.t.data;
    for (int64_t i = 0; i < batch[k]; i++)
      for (int64_t j = 0; j < 4; j++) {
        double ref = bias[j];
        for (int64_t c = 0; c < 8; c++)
          ref += (double)(xs[i * 8 + c] > 0 ? xs[i * 8 + c] : 0) * (double)w[c * 4 + j];
        if (fabs(yv[i * 4 + j] - ref) > 1e-5)
          fail_msg("run %zu (batch %lld): y[%lld][%lld] = %g, expected %g", k,
                   (long long)batch[k], (long long)i, (long long)j, yv[i * 4 + j], ref);
      }
    kn_slot_release(&out);
  }
  kn_runner_free(run);
  free(arena);
  kn_mem_plan_free(&plan);
  kn_ir_model_free(m);
}

/* A Reshape planned in place over a Constant node's output is prepared as
 * an alias (its kernel skipped), but Constant's run makes a buffer of its
 * own: the run sees that the bytes are not where prepare put them and
 * runs the Reshape as a dynamic step, so the Add reads the constant. */
static void test_inplace_input_moved(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t dx[1] = {1}, one[1] = {1};
  int32_t x = tk_input(g, "x", 1, dx);
  int32_t c = tk_constant_node(g, 2.5f);
  int32_t rs_in[2] = {c, tk_const_i64(g, 1, one)};
  int32_t rs = tk_node(g, "Reshape", 2, rs_in);
  int32_t add_in[2] = {x, rs};
  tk_output(g, tk_node(g, "Add", 2, add_in));
  tk_prepare(m);
  kn_mem_plan plan;
  kn_error err;
  assert_int_equal(kn_plan_memory(g, 0, &plan, &err), KN_OK);
  bool inplace = false;
  for (int32_t t = 0; t < plan.n_tensors; t++)
    inplace |= plan.tensors[t].value == rs && plan.tensors[t].inplace_of == c;
  assert_true(inplace);
  void *arena = aligned_alloc(64, (plan.arena_bytes + 63) & ~63ull);
  memset(arena, 0xff, plan.arena_bytes);
  kn_runner *run;
  assert_int_equal(kn_runner_create(m, g, &run, &err), KN_OK);
  for (int k = 0; k < 3; k++) {
    kn_slot in, out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&in.t, KN_DTYPE_F32, 1, dx, NULL), KN_OK);
    ((float *)in.t.data)[0] = (float)k;
    const kn_slot *pin[1] = {&in};
    kn_mem_budget mem = {.limit = UINT64_MAX, .plan = &plan, .arena = arena};
    if (kn_runner_run(run, NULL, pin, &out, &mem, &err)) fail_msg("%s", err.msg);
    assert_true(((const float *)out.t.data)[0] == (float)k + 2.5f);
    assert_int_equal(kn_runner_prepare_count(run), 1);
    kn_slot_release(&out);
    kn_slot_release(&in);
  }
  kn_runner_free(run);
  free(arena);
  kn_mem_plan_free(&plan);
  kn_ir_model_free(m);
}

/* Runs ctx on a batch of b images (seeded) and returns the logits. */
static float *run_batch(kn_context *ctx, int64_t b, uint32_t seed) {
  int64_t dims[4] = {b, 3, 32, 32};
  kn_tensor t;
  kn_error err;
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 4, dims, NULL), KN_OK);
  fill(t.data, kn_tensor_numel(&t), seed);
  assert_int_equal(kn_context_set_input(ctx, 0, &t, &err), KN_OK);
  if (kn_context_run(ctx, &err)) fail_msg("%s", err.msg);
  const kn_tensor *y = kn_context_output(ctx, 0);
  assert_non_null(y);
  assert_int_equal(y->dims[0], b);
  float *out = malloc(y->nbytes);
  memcpy(out, y->data, y->nbytes);
  kn_tensor_release(&t);
  return out;
}

static void test_tinycnn_repeated_runs_and_threads(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/models/tinycnn/model.onnx";
  kn_error err;
  kn_model *ref, *fast;
  assert_int_equal(kn_model_load(path, &ref, &err), KN_OK);
  assert_int_equal(kn_model_load(path, &fast, &err), KN_OK);
  kn_build_options o;
  kn_build_options_init(&o);
  const char *prof[] = {"input=1x3x32x32:2x3x32x32:4x3x32x32"};
  o.profiles = prof;
  o.n_profiles = 1;
  assert_int_equal(kn_model_build(fast, &o, &err), KN_OK);
  kn_context *cr, *c1, *c2;
  assert_int_equal(kn_context_create(ref, &cr, &err), KN_OK);
  assert_int_equal(kn_context_create(fast, &c1, &err), KN_OK);
  assert_int_equal(kn_context_create(fast, &c2, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(c1, 1, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(c2, 2, &err), KN_OK);
  assert_int_equal(kn_context_threads(c2), 2);
  assert_int_not_equal(kn_context_set_threads(c2, 0, &err), KN_OK);
  /* batches in an order that changes shape, repeats it, and comes back */
  static const int64_t batch[] = {2, 2, 2, 4, 1, 2, 4, 4};
  for (size_t k = 0; k < sizeof batch / sizeof batch[0]; k++) {
    uint32_t seed = 100 + (uint32_t)k;
    float *yr = run_batch(cr, batch[k], seed);
    float *y1 = run_batch(c1, batch[k], seed);
    float *y2 = run_batch(c2, batch[k], seed);
    int64_t n = batch[k] * 10;
    for (int64_t i = 0; i < n; i++) {
      if (fabsf(y1[i] - yr[i]) > 1e-4f + 1e-3f * fabsf(yr[i]))
        fail_msg("run %zu batch %lld: logit %lld is %g, reference %g", k,
                 (long long)batch[k], (long long)i, y1[i], yr[i]);
      assert_memory_equal(&y1[i], &y2[i], sizeof(float)); /* 1 vs 2 threads: same bits */
    }
    free(yr);
    free(y1);
    free(y2);
  }
  kn_context_free(cr);
  kn_context_free(c1);
  kn_context_free(c2);
  kn_model_free(ref);
  kn_model_free(fast);
}

/* Weights packed at build are stored in the engine (PACKED) and taken at
 * load, not repacked: copied from the mapping into the model's one
 * huge-page buffer; the loaded engine gives the built model's bits. */
static void test_engine_keeps_packed_weights(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/models/tinycnn/model.onnx";
  kn_error err;
  kn_model *built, *loaded;
  assert_int_equal(kn_model_load(path, &built, &err), KN_OK);
  kn_build_options o;
  kn_build_options_init(&o);
  const char *shape[] = {"input=2x3x32x32"};
  o.shapes = shape;
  o.n_shapes = 1;
  assert_int_equal(kn_model_build(built, &o, &err), KN_OK);
  int32_t n_built = 0;
  for (int32_t i = 0; i < built->n_packed; i++) n_built += built->packed[i] != NULL;
  assert_true(n_built > 0);
  char tmp[] = "/tmp/kiln_test_exec_XXXXXX";
  int fd = mkstemp(tmp);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(kn_model_save(built, tmp, &err), KN_OK);
  assert_int_equal(kn_model_load(tmp, &loaded, &err), KN_OK);
  assert_int_equal(loaded->info.n_packed, n_built);
  const char *lo = loaded->packed_copy, *hi = lo + loaded->packed_copy_bytes;
  assert_non_null(lo);
  for (int32_t i = 0; i < loaded->n_packed; i++) {
    if (!loaded->packed[i]) continue;
    assert_false(loaded->packed_owned[i]); /* adopted, not repacked */
    assert_true((const char *)loaded->packed[i] >= lo && (const char *)loaded->packed[i] < hi);
    const kn_packed *a = built->packed[i], *b = loaded->packed[i];
    assert_int_equal(a->bytes, b->bytes);
    assert_memory_equal(a, b, a->bytes);
  }
  kn_context *cb, *cl;
  assert_int_equal(kn_context_create(built, &cb, &err), KN_OK);
  assert_int_equal(kn_context_create(loaded, &cl, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(cb, 1, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(cl, 1, &err), KN_OK);
  float *yb = run_batch(cb, 2, 5), *yl = run_batch(cl, 2, 5);
  assert_memory_equal(yb, yl, 20 * sizeof(float));
  free(yb);
  free(yl);
  kn_context_free(cb);
  kn_context_free(cl);
  kn_model_free(built);
  kn_model_free(loaded);
  unlink(tmp);
}

/* The model at path, built with default options when `built`. */
static kn_model *load_model(const char *path, int built) {
  kn_error err;
  kn_model *m;
  if (kn_model_load(path, &m, &err)) fail_msg("%s", err.msg);
  if (built) {
    kn_build_options o;
    kn_build_options_init(&o);
    if (kn_model_build(m, &o, &err)) fail_msg("%s", err.msg);
  }
  return m;
}

/* A Loop body (tests/data/control/loop_rnn.onnx: h = 0.5 tanh(h W + x U + B)
 * for 6 steps, with a Constant node in the body) gets its own memory plan
 * and its steps are recorded from the second iteration on: every run of a
 * context, on 1 and 2 threads, built or not, matches the recurrence
 * computed here, and repeated runs with new values give new results. */
static void loop_rnn_ref(const float *x, float *hs) {
  double h[8] = {0}, n[8];
  for (int t = 0; t < 6; t++) {
    for (int j = 0; j < 8; j++) {
      double d = ((j * 3) % 5 - 2) * 0.05;
      for (int i = 0; i < 8; i++) {
        d += h[i] * (double)(float)(((i * 7 + j * 3) % 11 - 5) * 0.08);
        d += (double)x[i] * (double)(float)(((i * 5 + j * 2) % 9 - 4) * 0.1);
      }
      n[j] = 0.5 * tanh(d);
    }
    for (int j = 0; j < 8; j++) hs[t * 8 + j] = (float)(h[j] = n[j]);
  }
}

static void test_loop_body_recorded(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/tests/data/control/loop_rnn.onnx";
  kn_error err;
  for (int built = 0; built < 2; built++) {
    kn_model *m = load_model(path, built);
    for (int threads = 1; threads <= 2; threads++) {
      kn_context *ctx;
      assert_int_equal(kn_context_create(m, &ctx, &err), KN_OK);
      assert_int_equal(kn_context_set_threads(ctx, threads, &err), KN_OK);
      for (int run = 0; run < 4; run++) {
        int64_t d[2] = {1, 8};
        kn_tensor x, h0;
        assert_int_equal(kn_tensor_alloc(&x, KN_DTYPE_F32, 2, d, NULL), KN_OK);
        assert_int_equal(kn_tensor_alloc(&h0, KN_DTYPE_F32, 2, d, NULL), KN_OK);
        fill(x.data, 8, 40u + (uint32_t)run % 3); /* runs 0 and 3 repeat */
        memset(h0.data, 0, h0.nbytes);
        assert_int_equal(kn_context_set_input(ctx, 0, &x, &err), KN_OK);
        assert_int_equal(kn_context_set_input(ctx, 1, &h0, &err), KN_OK);
        if (kn_context_run(ctx, &err)) fail_msg("%s", err.msg);
        float ref[48];
        loop_rnn_ref(x.data, ref);
        const kn_tensor *hf = kn_context_output(ctx, 0), *hs = kn_context_output(ctx, 1);
        assert_non_null(hf);
        assert_non_null(hs);
        assert_int_equal(kn_tensor_numel(hs), 48);
        const float *ys = hs->data, *yf = hf->data;
        for (int i = 0; i < 48; i++)
          if (fabsf(ys[i] - ref[i]) > 1e-5f)
            fail_msg("built %d, %d threads, run %d: hs[%d] = %g, expected %g", built, threads,
                     run, i, ys[i], ref[i]);
        for (int i = 0; i < 8; i++) assert_true(fabsf(yf[i] - ref[40 + i]) <= 1e-5f);
        kn_tensor_release(&x);
        kn_tensor_release(&h0);
      }
      kn_context_free(ctx);
    }
    kn_model_free(m);
  }
}

/* Runs model m on x (16 floats from seed) and sr; returns the status and
 * copies y's 56 floats into y. */
static kn_status run_if_rate(kn_model *m, int64_t rate, uint32_t seed, float *y, kn_error *err) {
  kn_context *ctx;
  assert_int_equal(kn_context_create(m, &ctx, err), KN_OK);
  int64_t d[2] = {1, 16};
  kn_tensor x, sr;
  assert_int_equal(kn_tensor_alloc(&x, KN_DTYPE_F32, 2, d, NULL), KN_OK);
  assert_int_equal(kn_tensor_alloc(&sr, KN_DTYPE_I64, 0, d, NULL), KN_OK);
  fill(x.data, 16, seed);
  *(int64_t *)sr.data = rate;
  kn_status st = kn_context_set_input(ctx, 0, &x, err);
  if (!st) st = kn_context_set_input(ctx, 1, &sr, err);
  if (!st) st = kn_context_run(ctx, err);
  if (!st) {
    const kn_tensor *yt = kn_context_output(ctx, 0);
    assert_int_equal(kn_tensor_numel(yt), 56);
    memcpy(y, yt->data, 56 * sizeof(float));
  }
  kn_tensor_release(&x);
  kn_tensor_release(&sr);
  kn_context_free(ctx);
  return st;
}

/* kiln build --fix: an If on a pinned sample rate (tests/data/control/
 * if_rate.onnx) is folded away (no If step left, its branch's conv on a
 * fast kernel), the engine gives the unpinned model's results for that
 * rate, keeps the pin through an engine file, and refuses another rate
 * with an error naming the input and both values; a bad --fix is refused. */
static void test_fix_folds_if(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/tests/data/control/if_rate.onnx";
  kn_error err;
  kn_model *plain = load_model(path, 1), *m;
  assert_int_equal(kn_model_load(path, &m, &err), KN_OK);
  kn_build_options o;
  kn_build_options_init(&o);
  const char *bad[] = {"sr=16000,8000"}, *nope[] = {"rate=16000"}, *fix[] = {"sr=16000"};
  o.fixed = bad;
  o.n_fixed = 1;
  assert_int_equal(kn_model_build(m, &o, &err), KN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "give 1 comma-separated values"));
  o.fixed = nope;
  assert_int_equal(kn_model_build(m, &o, &err), KN_ERR_INVALID_ARG);
  o.fixed = fix;
  if (kn_model_build(m, &o, &err)) fail_msg("%s", err.msg);
  for (int32_t i = 0; i < kn_model_step_count(m); i++) {
    kn_step_info si;
    assert_int_equal(kn_model_step_info(m, i, &si), KN_OK);
    assert_string_not_equal(si.op, "If");
  }
  char tmp[] = "/tmp/kiln_fix_XXXXXX";
  int fd = mkstemp(tmp);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(kn_model_save(m, tmp, &err), KN_OK);
  kn_model *e;
  assert_int_equal(kn_model_load(tmp, &e, &err), KN_OK);
  unlink(tmp);
  assert_string_equal(kn_model_input_fixed(e, 1), "16000");
  assert_null(kn_model_input_fixed(e, 0));
  assert_null(kn_model_input_fixed(plain, 1));
  kn_model *ms[2] = {m, e};
  for (int k = 0; k < 2; k++) {
    float want[56], got[56];
    for (uint32_t seed = 3; seed < 6; seed++) {
      assert_int_equal(run_if_rate(plain, 16000, seed, want, &err), KN_OK);
      assert_int_equal(run_if_rate(ms[k], 16000, seed, got, &err), KN_OK);
      for (int i = 0; i < 56; i++) assert_true(fabsf(got[i] - want[i]) <= 1e-6f);
    }
    assert_int_equal(run_if_rate(ms[k], 8000, 3, got, &err), KN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "input 'sr' is pinned to 16000"));
    assert_non_null(strstr(err.msg, "got 8000"));
    /* the unpinned model takes the other branch */
    assert_int_equal(run_if_rate(plain, 8000, 3, got, &err), KN_OK);
    for (int i = 0; i < 56; i++) assert_true(got[i] > 0.0f && got[i] < 1.0f); /* sigmoid */
  }
  kn_model_free(e);
  kn_model_free(m);
  kn_model_free(plain);
}

/* Profiling: each step's span on the calling thread, in order, disjoint and
 * inside the run; at 2 threads the workers' spans inside their step's; the
 * same results as without; nothing recorded once it is off. */
static void test_profiling_spans(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/models/tinycnn/model.onnx";
  kn_error err;
  kn_model *m;
  assert_int_equal(kn_model_load(path, &m, &err), KN_OK);
  kn_build_options o;
  kn_build_options_init(&o);
  const char *shape[] = {"input=4x3x32x32"};
  o.shapes = shape;
  o.n_shapes = 1;
  assert_int_equal(kn_model_build(m, &o, &err), KN_OK);
  kn_model_stats info;
  assert_int_equal(kn_model_stats_get(m, &info, &err), KN_OK);
  int32_t steps = kn_model_step_count(m);
  assert_true(steps > 3);
  uint64_t most = 0;
  for (int32_t i = 0; i < steps; i++) {
    kn_step_info si;
    assert_int_equal(kn_model_step_info(m, i, &si), KN_OK);
    assert_true(si.arena_live_bytes <= info.arena_bytes);
    if (si.arena_live_bytes > most) most = si.arena_live_bytes;
  }
  assert_true(most > 0);
  for (int32_t threads = 1; threads <= 2; threads++) {
    kn_context *c;
    assert_int_equal(kn_context_create(m, &c, &err), KN_OK);
    assert_int_equal(kn_context_set_threads(c, threads, &err), KN_OK);
    float *plain = run_batch(c, 4, 7);
    const kn_step_span *sp;
    assert_int_equal(kn_context_spans(c, &sp), 0);
    assert_int_equal(kn_context_set_profiling(c, 1, &err), KN_OK);
    int64_t t0 = kn_now_ns();
    float *profiled = run_batch(c, 4, 7);
    int64_t t1 = kn_now_ns();
    assert_memory_equal(plain, profiled, 4 * 10 * sizeof(float));
    int32_t n = kn_context_spans(c, &sp);
    assert_true(n >= steps);
    int32_t next = 0, workers = 0;
    int64_t prev_end = t0;
    const kn_step_span *main = NULL;
    for (int32_t k = 0; k < n; k++) {
      assert_true(sp[k].start_ns <= sp[k].end_ns);
      if (sp[k].thread == 0) {
        assert_int_equal(sp[k].step, next++);
        assert_true(sp[k].start_ns >= prev_end);
        prev_end = sp[k].end_ns;
        main = &sp[k];
      } else {
        assert_non_null(main);
        assert_int_equal(sp[k].step, main->step);
        assert_true(sp[k].thread < threads);
        assert_true(sp[k].start_ns >= main->start_ns && sp[k].end_ns <= main->end_ns);
        workers++;
      }
    }
    assert_int_equal(next, steps);
    assert_true(prev_end <= t1);
    /* whether a worker wins a task depends on the scheduler (test_pool
       checks that they record theirs) */
    if (threads == 1) assert_int_equal(workers, 0);
    assert_int_equal(kn_context_set_profiling(c, 0, &err), KN_OK);
    free(run_batch(c, 4, 7));
    assert_int_equal(kn_context_spans(c, &sp), 0);
    free(plain);
    free(profiled);
    kn_context_free(c);
  }
  kn_model_free(m);
}

/* Cancellation: a Loop that never ends (tests/data/control/loop_endless.onnx)
 * stops at its deadline and at its cancel hook, built or not, on 1 and 2
 * threads, with KN_ERR_CANCELLED and a message naming where; a context
 * cancelled inside loop_rnn's Loop then runs to the right answer once the
 * hook is off, and a deadline in the future changes nothing. */
typedef struct cancel_count {
  int32_t calls, stop_at;
} cancel_count;

static int32_t cancel_after(void *arg) {
  cancel_count *c = arg;
  return ++c->calls >= c->stop_at;
}

static void test_cancel_endless_loop(void **state) {
  (void)state;
  const char *path = KILN_SOURCE_DIR "/tests/data/control/loop_endless.onnx";
  kn_error err;
  for (int built = 0; built < 2; built++) {
    kn_model *m = load_model(path, built);
    for (int threads = 1; threads <= 2; threads++) {
      kn_context *ctx;
      assert_int_equal(kn_context_create(m, &ctx, &err), KN_OK);
      assert_int_equal(kn_context_set_threads(ctx, threads, &err), KN_OK);
      int64_t d[1] = {4};
      kn_tensor x;
      assert_int_equal(kn_tensor_alloc(&x, KN_DTYPE_F32, 1, d, NULL), KN_OK);
      assert_int_equal(kn_context_set_input(ctx, 0, &x, &err), KN_OK);
      /* a deadline 30 ms ahead: the run ends soon after it */
      int64_t t0 = kn_now_ns();
      kn_context_set_deadline(ctx, t0 + 30 * 1000000LL);
      assert_int_equal(kn_context_run(ctx, &err), KN_ERR_CANCELLED);
      int64_t took = kn_now_ns() - t0;
      assert_true(took >= 30 * 1000000LL);
      assert_true(took < 2000 * 1000000LL);
      assert_non_null(strstr(err.msg, "cancelled"));
      assert_non_null(strstr(err.msg, "deadline"));
      assert_null(kn_context_output(ctx, 0));
      /* the hook: stops after many iterations, and is called per iteration */
      kn_context_set_deadline(ctx, 0);
      cancel_count c = {0, 5000};
      kn_context_set_cancel(ctx, cancel_after, &c);
      assert_int_equal(kn_context_run(ctx, &err), KN_ERR_CANCELLED);
      assert_int_equal(c.calls, 5000);
      assert_non_null(strstr(err.msg, "cancel hook"));
      kn_context_set_cancel(ctx, NULL, NULL);
      kn_tensor_release(&x);
      kn_context_free(ctx);
    }
    kn_model_free(m);
  }

  /* loop_rnn: cancelled inside the Loop, then a whole run is right */
  kn_model *m;
  if (kn_model_load(KILN_SOURCE_DIR "/tests/data/control/loop_rnn.onnx", &m, &err))
    fail_msg("%s", err.msg);
  kn_context *ctx;
  assert_int_equal(kn_context_create(m, &ctx, &err), KN_OK);
  int64_t d[2] = {1, 8};
  kn_tensor x, h0;
  assert_int_equal(kn_tensor_alloc(&x, KN_DTYPE_F32, 2, d, NULL), KN_OK);
  assert_int_equal(kn_tensor_alloc(&h0, KN_DTYPE_F32, 2, d, NULL), KN_OK);
  fill(x.data, 8, 41u);
  assert_int_equal(kn_context_set_input(ctx, 0, &x, &err), KN_OK);
  assert_int_equal(kn_context_set_input(ctx, 1, &h0, &err), KN_OK);
  for (int stop = 1; stop <= 12; stop += 3) {
    cancel_count c = {0, stop};
    kn_context_set_cancel(ctx, cancel_after, &c);
    assert_int_equal(kn_context_run(ctx, &err), KN_ERR_CANCELLED);
    assert_int_equal(c.calls, stop);
  }
  kn_context_set_cancel(ctx, NULL, NULL);
  kn_context_set_deadline(ctx, kn_now_ns() + 60 * 1000000000LL);
  if (kn_context_run(ctx, &err)) fail_msg("%s", err.msg);
  float ref[48];
  loop_rnn_ref(x.data, ref);
  const kn_tensor *hs = kn_context_output(ctx, 1);
  assert_non_null(hs);
  for (int i = 0; i < 48; i++) assert_true(fabsf(((const float *)hs->data)[i] - ref[i]) <= 1e-5f);
  kn_tensor_release(&x);
  kn_tensor_release(&h0);
  kn_context_free(ctx);
  kn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_data_shaped_step_reinferred),
      cmocka_unit_test(test_prepare_once_per_signature),
      cmocka_unit_test(test_inplace_input_moved),
      cmocka_unit_test(test_tinycnn_repeated_runs_and_threads),
      cmocka_unit_test(test_loop_body_recorded),
      cmocka_unit_test(test_engine_keeps_packed_weights),
      cmocka_unit_test(test_profiling_spans),
      cmocka_unit_test(test_cancel_endless_loop),
      cmocka_unit_test(test_fix_folds_if),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
