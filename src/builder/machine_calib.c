/*
 * kiln probe's calibration runs: the IO model's per-family factors
 * (kn_machine.factors, docs/MACHINE.md) fitted on this machine.
 *
 * Three small graphs are made in code, built for the machine just probed
 * (its factors still unset, so every prediction is the bare roofline plus
 * the step overhead) and run here with per-step timing:
 *  - a convolutional stack in the shapes of ResNet's four stages: a
 *    bottleneck block (1x1, 3x3, 1x1 with the residual) at 56x56 to 7x7
 *    with 256 to 2048 channels, stride-2 projections between them, a
 *    stride-2 3x3, a depthwise 3x3, max and global average pooling, the
 *    channels-last transpose of the input, and a classifier GEMM;
 *  - MobileNet's stem and inverted residual blocks: a 3x3 convolution of
 *    the 3-channel image, 1x1 expansions and projections on 112x112 to 7x7
 *    maps, depthwise 3x3 at stride 1 and 2;
 *  - a transformer block in BERT-base's shapes (128 tokens, 768 features,
 *    12 heads): four projections and a feed-forward pair on the packed GEMM, streamed attention, a layer norm, a softmax, a transpose
 *    and an elementwise chain.
 * Each step's time is the lower quartile of RUNS runs after WARMUP (a run
 * another process cut into says nothing of the kernel), on one thread and
 * on all; the steps of each family and thread count give its factor
 * (src/cost/iofit.c: the least-squares fit of log times).  The shapes are
 * those of the common CNN stages and transformer layers, because a
 * kernel's efficiency depends on them (a 1x1 convolution on a 7x7 map
 * with 2048 channels runs nearer its peak than one on a 14x14 map with 64);
 * the weights, about 85 MB in all, come from memory as a real model's do.
 * About a second on the 2-core machines here.
 */
#define _GNU_SOURCE
#include "builder.h"

#include "core/cpu.h"
#include "core/machine.h"
#include "cost/iofit.h"
#include "cost/iomodel.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "ops/op.h"

#include <math.h>
#include <time.h>

#define WARMUP 3
#define RUNS 11
#define MAX_SAMPLES 256

/* ---- graphs made in code ---------------------------------------------------- */

typedef struct gb {
  kn_ir_model *m;
  kn_graph *g;
  uint64_t rng;
  int32_t names;
  bool failed;
} gb;

static kn_status gb_new(gb *b, const char *label, kn_error *err) {
  memset(b, 0, sizeof *b);
  b->rng = kn_rng_seed(11);
  b->m = kn_calloc(1, sizeof *b->m);
  if (b->m) {
    b->m->graph = kn_graph_new(NULL);
    b->m->opsets = kn_calloc(1, sizeof *b->m->opsets);
    b->m->label = kn_strdup(label);
  }
  if (!b->m || !b->m->graph || !b->m->opsets || !b->m->label) {
    if (b->m) kn_ir_model_free(b->m);
    b->m = NULL;
    return kn_fail(err, KN_ERR_OOM, "probe: out of memory");
  }
  b->m->n_opsets = 1;
  b->m->opsets[0].domain = kn_strdup("");
  b->m->opsets[0].version = 17;
  b->failed = !b->m->opsets[0].domain;
  b->g = b->m->graph;
  return KN_OK;
}

static bool grow(int32_t **arr, int32_t *n, int32_t v) {
  int32_t *a = realloc(*arr, ((size_t)*n + 1) * sizeof *a);
  if (!a) return false;
  a[(*n)++] = v;
  *arr = a;
  return true;
}

static int32_t gb_input(gb *b, const char *name, int32_t rank, const int64_t *dims) {
  int32_t v = kn_graph_add_value(b->g, name);
  if (v < 0 || !grow(&b->g->inputs, &b->g->n_inputs, v)) {
    b->failed = true;
    return -1;
  }
  kn_value *val = &b->g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = rank;
  memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  return v;
}

static void gb_output(gb *b, int32_t v) {
  if (v < 0 || !grow(&b->g->outputs, &b->g->n_outputs, v)) {
    b->failed = true;
    return;
  }
  b->g->values[v].is_output = true;
}

/* A constant of uniform values in [-scale, scale) (float32). */
static int32_t gb_const(gb *b, int32_t rank, const int64_t *dims, float scale) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  if (kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL)) {
    b->failed = true;
    return -1;
  }
  float *d = t.data;
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++)
    d[i] = scale * ((float)(kn_rng_next(&b->rng) >> 40) / (float)(1 << 23) - 1.0f);
  int32_t v = kn_graph_add_constant(b->g, "w", &t);
  kn_tensor_release(&t);
  if (v < 0) b->failed = true;
  return v;
}

static int32_t gb_const_i64(gb *b, int32_t n, const int64_t *vals) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  int64_t d = n;
  if (kn_tensor_alloc(&t, KN_DTYPE_I64, 1, &d, NULL)) {
    b->failed = true;
    return -1;
  }
  memcpy(t.data, vals, (size_t)n * sizeof *vals);
  int32_t v = kn_graph_add_constant(b->g, "k", &t);
  kn_tensor_release(&t);
  if (v < 0) b->failed = true;
  return v;
}

/* A node of one output; *node gets it (NULL on failure). */
static int32_t gb_node(gb *b, const char *op, const char *domain, int32_t n_in, const int32_t *in,
                       kn_node **node) {
  *node = NULL;
  for (int32_t i = 0; i < n_in; i++)
    if (in[i] < 0) b->failed = true;
  if (b->failed) return -1;
  char name[32];
  snprintf(name, sizeof name, "calib%d", b->names++);
  int32_t o = kn_graph_add_fresh_value(b->g, name);
  int32_t id = o < 0 ? -1 : kn_graph_new_node(b->g, op, domain, name, n_in, in, 1, &o);
  if (id < 0) {
    b->failed = true;
    return -1;
  }
  *node = &b->g->nodes[id];
  return o;
}

static int32_t gb_op(gb *b, const char *op, int32_t n_in, const int32_t *in) {
  kn_node *n;
  return gb_node(b, op, "", n_in, in, &n);
}

static void gb_ints(gb *b, kn_node *n, const char *name, int64_t a, int32_t count) {
  int64_t v[4] = {a, a, a, a};
  if (n && !kn_node_set_ints(n, name, v, count)) b->failed = true;
}

/* Conv (k x k, pad k/2) with bias, then Relu when asked. */
static int32_t gb_conv(gb *b, int32_t x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                       int64_t group, bool relu) {
  int32_t w = gb_const(b, 4, (int64_t[]){cout, cin / group, k, k}, 0.1f);
  int32_t bias = gb_const(b, 1, (int64_t[]){cout}, 0.1f);
  kn_node *n;
  int32_t y = gb_node(b, "Conv", "", 3, (int32_t[]){x, w, bias}, &n);
  gb_ints(b, n, "pads", k / 2, 4);
  gb_ints(b, n, "strides", stride, 2);
  gb_ints(b, n, "kernel_shape", k, 2);
  if (n && group > 1 && !kn_node_set_int(n, "group", group)) b->failed = true;
  return relu ? gb_op(b, "Relu", 1, &y) : y;
}

/* A bottleneck block: 1x1 down to `mid` channels, 3x3, 1x1 back up, the
 * residual added (into the last conv's epilogue), Relu. */
static int32_t gb_bottleneck(gb *b, int32_t x, int64_t c, int64_t mid) {
  int32_t y = gb_conv(b, x, c, mid, 1, 1, 1, true);
  y = gb_conv(b, y, mid, mid, 3, 1, 1, true);
  y = gb_conv(b, y, mid, c, 1, 1, 1, false);
  y = gb_op(b, "Add", 2, (int32_t[]){x, y});
  return gb_op(b, "Relu", 1, &y);
}

/* The convolutional stack (the file's comment): a stem, max pooling, a
 * bottleneck block at each of ResNet's four scales joined by stride-2 1x1
 * projections and a stride-2 3x3, a depthwise 3x3, global average pooling
 * and the classifier. */
static void make_cnn(gb *b) {
  int32_t x = gb_input(b, "image", 4, (int64_t[]){1, 32, 112, 112});
  x = gb_conv(b, x, 32, 64, 1, 1, 1, true);
  kn_node *n;
  x = gb_node(b, "MaxPool", "", 1, &x, &n);
  gb_ints(b, n, "kernel_shape", 3, 2);
  gb_ints(b, n, "strides", 2, 2);
  gb_ints(b, n, "pads", 1, 4);
  x = gb_conv(b, x, 64, 256, 1, 1, 1, true);
  x = gb_bottleneck(b, x, 256, 64);
  x = gb_conv(b, x, 256, 512, 1, 2, 1, true);
  x = gb_bottleneck(b, x, 512, 128);
  x = gb_conv(b, x, 512, 1024, 1, 2, 1, true);
  x = gb_bottleneck(b, x, 1024, 256);
  x = gb_conv(b, x, 1024, 512, 3, 2, 1, true);
  x = gb_conv(b, x, 512, 512, 3, 1, 512, true);
  x = gb_conv(b, x, 512, 2048, 1, 1, 1, true);
  x = gb_bottleneck(b, x, 2048, 512);
  x = gb_op(b, "GlobalAveragePool", 1, &x);
  x = gb_op(b, "Flatten", 1, &x);
  int32_t w = gb_const(b, 2, (int64_t[]){1000, 2048}, 0.05f);
  int32_t bias = gb_const(b, 1, (int64_t[]){1000}, 0.1f);
  x = gb_node(b, "Gemm", "", 3, (int32_t[]){x, w, bias}, &n);
  if (n && !kn_node_set_int(n, "transB", 1)) b->failed = true;
  gb_output(b, x);
}

/* Inverted residual blocks in MobileNet's shapes: 1x1 expansions and
 * projections on small maps, depthwise 3x3 at stride 1 and 2, residual
 * adds, a wide 1x1 and the classifier. */
static int32_t gb_block(gb *b, int32_t x, int64_t cin, int64_t cexp, int64_t cout,
                        int64_t stride) {
  int32_t y = gb_conv(b, x, cin, cexp, 1, 1, 1, true);
  y = gb_conv(b, y, cexp, cexp, 3, stride, cexp, true);
  y = gb_conv(b, y, cexp, cout, 1, 1, 1, false);
  return stride == 1 && cin == cout ? gb_op(b, "Add", 2, (int32_t[]){x, y}) : y;
}

static void make_mobile(gb *b) {
  int32_t x = gb_input(b, "image", 4, (int64_t[]){1, 3, 224, 224});
  x = gb_conv(b, x, 3, 32, 3, 2, 1, true); /* the stem: 3 channels in */
  x = gb_conv(b, x, 32, 32, 3, 1, 32, true);
  x = gb_conv(b, x, 32, 16, 1, 1, 1, false);
  x = gb_block(b, x, 16, 96, 24, 2);
  x = gb_block(b, x, 24, 144, 32, 2);
  x = gb_block(b, x, 32, 192, 32, 1);
  x = gb_block(b, x, 32, 192, 64, 2);
  x = gb_block(b, x, 64, 384, 64, 1);
  x = gb_block(b, x, 64, 384, 160, 2);
  x = gb_block(b, x, 160, 960, 160, 1);
  x = gb_conv(b, x, 160, 1280, 1, 1, 1, true);
  x = gb_op(b, "GlobalAveragePool", 1, &x);
  x = gb_op(b, "Flatten", 1, &x);
  int32_t w = gb_const(b, 2, (int64_t[]){1000, 1280}, 0.05f);
  int32_t bias = gb_const(b, 1, (int64_t[]){1000}, 0.1f);
  kn_node *n;
  x = gb_node(b, "Gemm", "", 3, (int32_t[]){x, w, bias}, &n);
  if (n && !kn_node_set_int(n, "transB", 1)) b->failed = true;
  gb_output(b, x);
}

/* x [1, s, d] times a [d, e] weight plus a bias. */
static int32_t gb_linear(gb *b, int32_t x, int64_t d, int64_t e) {
  int32_t w = gb_const(b, 2, (int64_t[]){d, e}, 0.05f);
  int32_t y = gb_op(b, "MatMul", 2, (int32_t[]){x, w});
  int32_t bias = gb_const(b, 1, (int64_t[]){e}, 0.1f);
  return gb_op(b, "Add", 2, (int32_t[]){y, bias});
}

/* The transformer block (the file's comment). */
static void make_transformer(gb *b, int64_t s, int64_t d, int64_t heads) {
  int32_t x = gb_input(b, "tokens", 3, (int64_t[]){1, s, d});
  int32_t other = gb_input(b, "other", 3, (int64_t[]){1, 4 * d, s});
  int32_t q = gb_linear(b, x, d, d), k = gb_linear(b, x, d, d), v = gb_linear(b, x, d, d);
  kn_node *n;
  int32_t a = gb_node(b, "Attention", KN_DOMAIN, 3, (int32_t[]){q, k, v}, &n);
  if (n && !kn_node_set_int(n, "num_heads", heads)) b->failed = true;
  a = gb_linear(b, a, d, d);
  a = gb_op(b, "Add", 2, (int32_t[]){a, x});
  int32_t gamma = gb_const(b, 1, (int64_t[]){d}, 1.0f), beta = gb_const(b, 1, (int64_t[]){d}, 0.1f);
  a = gb_node(b, "LayerNormalization", "", 3, (int32_t[]){a, gamma, beta}, &n);
  int32_t h = gb_linear(b, a, d, 4 * d);
  h = gb_op(b, "Relu", 1, &h);
  h = gb_node(b, "Softmax", "", 1, &h, &n);
  if (n && !kn_node_set_int(n, "axis", -1)) b->failed = true;
  h = gb_node(b, "Transpose", "", 1, &h, &n);
  if (n && !kn_node_set_ints(n, "perm", (int64_t[]){0, 2, 1}, 3)) b->failed = true;
  h = gb_op(b, "Sigmoid", 1, &h);
  h = gb_op(b, "Mul", 2, (int32_t[]){h, other});
  int32_t shape = gb_const_i64(b, 3, (int64_t[]){1, s, 4 * d});
  h = gb_op(b, "Reshape", 2, (int32_t[]){h, shape});
  h = gb_linear(b, h, 4 * d, d);
  gb_output(b, h);
  gb_output(b, a);
}

/* ---- timing ------------------------------------------------------------------- */

typedef struct timer {
  const char **first_output; /* per step */
  int32_t steps, next;
  double last, *cur;
} timer;

static void observe(const char *name, const kn_tensor *t, void *arg) {
  (void)t;
  timer *tm = arg;
  double x = kn_now_s();
  for (int32_t i = tm->next; i < tm->steps; i++)
    if (tm->first_output[i] && !strcmp(tm->first_output[i], name)) {
      tm->cur[i] = x - tm->last;
      tm->last = x;
      tm->next = i + 1;
      return;
    }
}

/* Build the graph b made for machine `plain` and time its steps on 1 and
 * `all` threads, appending a sample per step of a family to s. */
static kn_status calibrate_graph(gb *b, const kn_machine *plain, int32_t all, kn_io_sample *s,
                                 int32_t *ns, kn_error *err) {
  kn_model *model = NULL;
  kn_context *ctx = NULL;
  kn_tensor ins[4];
  int32_t nin = 0;
  double *all_t = NULL;
  timer tm = {0};
  memset(ins, 0, sizeof ins);
  kn_status st = b->failed ? kn_fail(err, KN_ERR_OOM, "probe: out of memory") : KN_OK;
  if (!st) st = kn_graph_finish(b->g, b->m->label, err);
  if (st) {
    kn_ir_model_free(b->m);
    return st;
  }
  if ((st = kn_model_from_ir(b->m, &model, err))) return st;
  kn_build_options o = {.machine = plain, .tactics = KN_TACTICS_TIMED, .threads = 1};
  if ((st = kn_model_build(model, &o, err))) goto out;
  if ((st = kn_context_create(model, &ctx, err))) goto out;
  uint64_t rng = kn_rng_seed(3);
  nin = kn_model_input_count(model);
  for (int32_t i = 0; i < nin && i < 4 && !st; i++) {
    kn_value_info vi;
    if (!(st = kn_model_input_info(model, i, &vi)) &&
        !(st = kn_random_input(&vi, NULL, 0, &rng, &ins[i], err)))
      st = kn_context_set_input(ctx, i, &ins[i], err);
  }
  if (st) goto out;
  const kn_graph *g = model->ir->graph;
  tm.steps = g->n_nodes;
  tm.first_output = kn_calloc((size_t)tm.steps + 1, sizeof *tm.first_output);
  tm.cur = kn_calloc((size_t)tm.steps + 1, sizeof *tm.cur);
  all_t = kn_calloc((size_t)tm.steps * RUNS + 1, sizeof *all_t);
  if (!tm.first_output || !tm.cur || !all_t) {
    st = kn_fail(err, KN_ERR_OOM, "probe: out of memory");
    goto out;
  }
  for (int32_t i = 0; i < tm.steps; i++) {
    const kn_node *n = &g->nodes[i];
    tm.first_output[i] = n->n_outputs > 0 && n->outputs[0] >= 0 ? g->values[n->outputs[0]].name
                                                                : NULL;
  }
  for (int32_t pass = 0; pass < (all > 1 ? 2 : 1) && !st; pass++) {
    int32_t threads = pass ? all : 1;
    if ((st = kn_context_set_threads(ctx, threads, err))) break;
    for (int32_t r = 0; r < WARMUP && !st; r++) st = kn_context_run(ctx, err);
    kn_context_set_observer(ctx, observe, &tm);
    for (int32_t r = 0; r < RUNS && !st; r++) {
      memset(tm.cur, 0, (size_t)tm.steps * sizeof *tm.cur);
      tm.next = 0;
      tm.last = kn_now_s();
      st = kn_context_run(ctx, err);
      for (int32_t i = 0; i < tm.steps; i++) all_t[(size_t)i * RUNS + (size_t)r] = tm.cur[i];
    }
    kn_context_set_observer(ctx, NULL, NULL);
    for (int32_t i = 0; i < tm.steps && !st; i++) {
      int32_t fam = kn_io_family(g->nodes[i].tactic);
      if (fam < 0 || *ns >= MAX_SAMPLES) continue;
      double *v = all_t + (size_t)i * RUNS;
      qsort(v, RUNS, sizeof *v, kn_cmp_double);
      kn_io_step io;
      kn_io_predict(model->ir, i, plain, threads, &io);
      /* the lower quartile of the runs: a run another process cut into
       * says nothing of the kernel (as every probe rate is the best of
       * its tries) */
      double t = v[RUNS / 4];
      if (!(t > 0) || !(io.roofline_s > 0)) continue;
      s[(*ns)++] = (kn_io_sample){.family = fam,
                                  .all_threads = io.threads > 1,
                                  .roofline_s = io.roofline_s,
                                  .overhead_s = io.time_s[KN_IO_BOUNDARIES + 1],
                                  .measured_s = t};
    }
  }
out:
  for (int32_t i = 0; i < nin && i < 4; i++) kn_tensor_release(&ins[i]);
  free(tm.first_output);
  free(tm.cur);
  free(all_t);
  kn_context_free(ctx);
  kn_model_free(model);
  return st;
}

kn_status kn_machine_calibrate(kn_machine *m, int32_t threads, kn_error *err) {
  double t0 = kn_now_s();
  kn_machine plain = *m;
  memset(plain.factors, 0, sizeof plain.factors);
  kn_io_sample *s = kn_calloc(MAX_SAMPLES, sizeof *s);
  if (!s) return kn_fail(err, KN_ERR_OOM, "probe: out of memory");
  int32_t ns = 0;
  gb b;
  kn_status st = gb_new(&b, "calibration CNN", err);
  if (!st) {
    make_cnn(&b);
    st = calibrate_graph(&b, &plain, threads, s, &ns, err);
  }
  if (!st) st = gb_new(&b, "calibration mobile", err);
  if (!st) {
    make_mobile(&b);
    st = calibrate_graph(&b, &plain, threads, s, &ns, err);
  }
  if (!st) st = gb_new(&b, "calibration transformer", err);
  if (!st) {
    make_transformer(&b, 128, 768, 12);
    st = calibrate_graph(&b, &plain, threads, s, &ns, err);
  }
  if (st) {
    free(s);
    kn_error_prefix(err, "probe: calibration");
    return st;
  }
  kn_io_fit_factors(s, ns, m->factors);
  free(s);
  /* one thread is all there is: the all-threads factors are its own */
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    if (threads <= 1 || !(m->factors[f][1] > 0)) m->factors[f][1] = m->factors[f][0];
  snprintf(m->factors_cpu, sizeof m->factors_cpu, "%s", m->cpu);
  m->factors_family = m->family;
  m->factors_model = m->model;
  snprintf(m->factors_isa, sizeof m->factors_isa, "%s", kn_isa_name(kn_isa_detect(m->features)));
  time_t now = time(NULL);
  struct tm utc;
  if (gmtime_r(&now, &utc)) strftime(m->factors_when, sizeof m->factors_when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  m->factors_seconds = kn_now_s() - t0;
  return KN_OK;
}
