/*
 * bench_copy: the copy, resize and rnn_gemm tactics next to the ops'
 * reference kernels, on shapes from real models, each ISA, 1 and 2
 * threads.
 *
 *   bench_copy [--reps N]
 *
 * Copies report GB/s counting the bytes read plus written (2 x the
 * output: the fewest a copy must move); the LSTM reports milliseconds and
 * GFLOP/s (2 flops per multiply-add of X W^T and H R^T).  Each figure is
 * the best of `reps` timings of enough repetitions for about 50 ms (the
 * machine is shared: the best run is the least disturbed one).  Every
 * fast output is compared with the reference's first (max abs diff).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "ir/ir.h"
#include "kernels/kernels.h"
#include "ops/op.h"
#include "tactics/tactics.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const kn_error *err) {
  fprintf(stderr, "bench_copy: %s: %s\n", what, err ? err->msg : "failed");
  exit(1);
}

/* A one-node model: inputs are float graph inputs of the given shapes or
 * constants; the node is the last one. */
typedef struct bcase {
  kn_ir_model *m;
  kn_node *n;
  kn_slot in[8], *pin[8], out[4], *pout[4];
  const void *packed;
} bcase;

static uint32_t seed = 1;
static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static kn_tensor rand_tensor(int32_t rank, const int64_t *dims) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  if (kn_tensor_alloc(&t, KN_DTYPE_F32, rank, dims, NULL)) die("alloc", NULL);
  float *d = t.data;
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++) d[i] = rnd();
  return t;
}

static kn_ir_model *model_new(int64_t opset) {
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  m->graph = kn_graph_new(NULL);
  m->opsets = kn_calloc(1, sizeof *m->opsets);
  m->n_opsets = 1;
  m->opsets[0].domain = kn_strdup("");
  m->opsets[0].version = opset;
  m->label = kn_strdup("bench");
  return m;
}

/* Adds the node (inputs: values already in the graph) and prepares. */
static void finish(bcase *c, const char *op, int32_t n_in, const int32_t *in, int32_t n_out) {
  kn_graph *g = c->m->graph;
  int32_t o[4];
  for (int32_t i = 0; i < n_out; i++) {
    o[i] = kn_graph_add_fresh_value(g, op);
    g->values[o[i]].is_output = true;
  }
  if (kn_graph_new_node(g, op, "", op, n_in, in, n_out, o) < 0) die("node", NULL);
  g->outputs = kn_calloc((size_t)n_out, sizeof *g->outputs);
  memcpy(g->outputs, o, (size_t)n_out * sizeof *o);
  g->n_outputs = n_out;
  c->n = &g->nodes[g->n_nodes - 1];
}

static void prepare(bcase *c) {
  kn_error err;
  if (kn_graph_finish(c->m->graph, c->m->label, &err) || kn_ops_prepare(c->m, &err))
    die("prepare", &err);
  c->n = &c->m->graph->nodes[c->m->graph->n_nodes - 1];
}

static int32_t graph_input(kn_graph *g, int32_t rank, const int64_t *dims) {
  int32_t v = kn_graph_add_fresh_value(g, "x");
  kn_value *val = &g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = rank;
  memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  g->inputs = kn_realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof *g->inputs);
  g->inputs[g->n_inputs++] = v;
  return v;
}

/* Weights scaled by 1 / sqrt(fan-in) as PyTorch initialises them: with
 * unscaled random weights an LSTM is chaotic and rounding differences
 * grow over the sequence. */
static int32_t graph_const(kn_graph *g, int32_t rank, const int64_t *dims) {
  kn_tensor t = rand_tensor(rank, dims);
  float *d = t.data, sc = 1.0f / sqrtf((float)dims[rank - 1]);
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++) d[i] *= sc;
  return kn_graph_add_constant(g, "w", &t);
}

/* Binds values to the node's inputs (random data for graph inputs). */
static void bind(bcase *c) {
  const kn_graph *g = c->m->graph;
  const kn_node *n = c->n;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    c->pin[k] = NULL;
    if (v < 0) continue;
    c->in[k].kind = KN_KIND_TENSOR;
    if (g->values[v].constant) c->in[k].t = kn_tensor_view(g->values[v].constant);
    else c->in[k].t = rand_tensor(g->values[v].type.rank, g->values[v].type.dims);
    c->pin[k] = &c->in[k];
  }
}

/* One run; outputs allocated on the first. */
static void run_once(bcase *c, kn_rt *rt) {
  const kn_node *n = c->n;
  kn_error err;
  kn_op_ctx ctx = {.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = c->pin,
                   .n_out = n->n_outputs, .out = c->pout, .err = &err, .label = "bench",
                   .rt = rt, .packed = rt ? c->packed : NULL};
  for (int32_t o = 0; o < n->n_outputs; o++) c->pout[o] = &c->out[o];
  if (!c->out[0].t.data) {
    if (n->op->infer(&ctx)) die("infer", &err);
    for (int32_t o = 0; o < n->n_outputs; o++) {
      kn_tensor s = c->out[o].t;
      if (kn_tensor_alloc(&c->out[o].t, s.dtype, s.rank, s.dims, &err)) die("alloc", &err);
    }
  }
  if (kn_tactics_run(&ctx)) die("run", &err);
}

typedef struct timing {
  double best_s;
  float *out; /* copy of output 0 */
} timing;

static timing time_case(bcase *c, kn_rt *rt, int reps) {
  run_once(c, rt);
  int inner = 1;
  for (;;) {
    double t0 = now_s();
    for (int i = 0; i < inner; i++) run_once(c, rt);
    if (now_s() - t0 > 0.05 || inner > 1 << 20) break;
    inner *= 2;
  }
  timing t = {1e30, NULL};
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    for (int i = 0; i < inner; i++) run_once(c, rt);
    double dt = (now_s() - t0) / inner;
    if (dt < t.best_s) t.best_s = dt;
  }
  t.out = malloc(c->out[0].t.nbytes);
  memcpy(t.out, c->out[0].t.data, c->out[0].t.nbytes);
  return t;
}

static void report(const char *what, bcase *c, int reps, kn_pool *pool2, bool gbs,
                   double flops) {
  uint64_t f = kn_cpu_features();
  c->n->tactic = 0;
  timing ref = time_case(c, NULL, reps);
  double bytes = 2.0 * (double)c->out[0].t.nbytes; /* allocated by the first run */
  printf("%-46s reference        %9.3f ms", what, ref.best_s * 1e3);
  if (gbs) printf("  %7.2f GB/s\n", bytes / ref.best_s * 1e-9);
  else printf("  %7.2f GFLOP/s\n", flops / ref.best_s * 1e-9);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    const kn_op_tactics *tt = c->n->impl = kn_tactics_of(c->n);
    c->n->tactic = tt->select(c->m->graph, c->n, isa);
    void *packed = NULL;
    kn_error err;
    if (tt->pack && tt->pack(c->m->graph, c->n, &(kn_target){isa, NULL}, &packed, &err))
      die("pack", &err);
    c->packed = packed;
    for (int th = 1; th <= 2; th++) {
      kn_rt rt = {.isa = (kn_isa)isa, .pool = th == 2 ? pool2 : NULL};
      timing t = time_case(c, &rt, reps);
      double md = 0;
      for (int64_t i = 0; i < kn_tensor_numel(&c->out[0].t); i++) {
        double d = fabs((double)t.out[i] - (double)ref.out[i]);
        if (!(d <= md)) md = d;
      }
      printf("%-46s %-8s %d thr  %9.3f ms", what, kn_isa_name((kn_isa)isa), th,
             t.best_s * 1e3);
      if (gbs) printf("  %7.2f GB/s", bytes / t.best_s * 1e-9);
      else printf("  %7.2f GFLOP/s", flops / t.best_s * 1e-9);
      printf("  x%.1f  max|diff| %.2g\n", ref.best_s / t.best_s, md);
      free(t.out);
      free(rt.scratch);
    }
    kn_packed_free(packed);
    c->packed = NULL;
  }
  free(ref.out);
}

static void free_case(bcase *c) {
  for (int32_t k = 0; k < c->n->n_inputs; k++) kn_slot_release(&c->in[k]);
  for (int32_t o = 0; o < c->n->n_outputs; o++) kn_slot_release(&c->out[o]);
  kn_ir_model_free(c->m);
}

static void bench_transpose(int reps, kn_pool *pool2, int32_t r, const int64_t *dims,
                            const int64_t *perm, const char *what) {
  bcase c;
  memset(&c, 0, sizeof c);
  c.m = model_new(13);
  int32_t x = graph_input(c.m->graph, r, dims);
  finish(&c, "Transpose", 1, &x, 1);
  if (!kn_node_set_ints(c.n, "perm", perm, r)) die("attr", NULL);
  prepare(&c);
  bind(&c);
  report(what, &c, reps, pool2, true, 0);
  free_case(&c);
}

static void bench_concat(int reps, kn_pool *pool2, int64_t axis, const char *what) {
  bcase c;
  memset(&c, 0, sizeof c);
  c.m = model_new(13);
  int64_t d[4] = {1, 256, 56, 56};
  int32_t in[2] = {graph_input(c.m->graph, 4, d), graph_input(c.m->graph, 4, d)};
  finish(&c, "Concat", 2, in, 1);
  if (!kn_node_set_int(c.n, "axis", axis)) die("attr", NULL);
  prepare(&c);
  bind(&c);
  report(what, &c, reps, pool2, true, 0);
  free_case(&c);
}

static void bench_resize(int reps, kn_pool *pool2, const char *mode, const char *what) {
  bcase c;
  memset(&c, 0, sizeof c);
  c.m = model_new(13);
  kn_graph *g = c.m->graph;
  int64_t d[4] = {1, 64, 80, 80}, four = 4;
  kn_tensor s;
  memset(&s, 0, sizeof s);
  if (kn_tensor_alloc(&s, KN_DTYPE_F32, 1, &four, NULL)) die("alloc", NULL);
  float *sv = s.data;
  sv[0] = sv[1] = 1;
  sv[2] = sv[3] = 2;
  int32_t in[3] = {graph_input(g, 4, d), -1, kn_graph_add_constant(g, "scales", &s)};
  finish(&c, "Resize", 3, in, 1);
  if (!kn_node_set_string(c.n, "mode", mode)) die("attr", NULL);
  prepare(&c);
  bind(&c);
  report(what, &c, reps, pool2, true, 0);
  free_case(&c);
}

static void bench_lstm(int reps, kn_pool *pool2) {
  bcase c;
  memset(&c, 0, sizeof c);
  c.m = model_new(14);
  kn_graph *g = c.m->graph;
  const int64_t S = 50, B = 1, I = 128, H = 256;
  int32_t in[4] = {graph_input(g, 3, (int64_t[]){S, B, I}),
                   graph_const(g, 3, (int64_t[]){1, 4 * H, I}),
                   graph_const(g, 3, (int64_t[]){1, 4 * H, H}),
                   graph_const(g, 2, (int64_t[]){1, 8 * H})};
  finish(&c, "LSTM", 4, in, 3);
  if (!kn_node_set_int(c.n, "hidden_size", H)) die("attr", NULL);
  prepare(&c);
  bind(&c);
  double flops = 2.0 * (double)(S * B) * (double)(4 * H) * (double)(I + H);
  report("LSTM seq 50 batch 1 input 128 hidden 256", &c, reps, pool2, false, flops);
  free_case(&c);
}

int main(int argc, char **argv) {
  int reps = 5;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) die("pool", &err);
  bench_transpose(reps, pool2, 4, (int64_t[]){1, 3, 224, 224}, (int64_t[]){0, 2, 3, 1},
                  "Transpose NCHW->NHWC 1x3x224x224");
  bench_transpose(reps, pool2, 4, (int64_t[]){1, 64, 112, 112}, (int64_t[]){0, 2, 3, 1},
                  "Transpose NCHW->NHWC 1x64x112x112");
  bench_transpose(reps, pool2, 4, (int64_t[]){1, 128, 12, 64}, (int64_t[]){0, 2, 1, 3},
                  "Transpose BERT heads 1x128x12x64 (0213)");
  bench_transpose(reps, pool2, 4, (int64_t[]){1, 12, 128, 64}, (int64_t[]){0, 1, 3, 2},
                  "Transpose K^T 1x12x128x64 (0132)");
  bench_transpose(reps, pool2, 2, (int64_t[]){4096, 4096}, (int64_t[]){1, 0},
                  "Transpose 4096x4096 (64 MiB, DRAM)");
  bench_concat(reps, pool2, 1, "Concat 2x 1x256x56x56 axis 1");
  bench_concat(reps, pool2, 3, "Concat 2x 1x256x56x56 axis 3");
  bench_resize(reps, pool2, "nearest", "Resize nearest x2 1x64x80x80");
  bench_resize(reps, pool2, "linear", "Resize linear x2 1x64x80x80");
  bench_lstm(reps, pool2);
  kn_pool_free(pool2);
  return 0;
}
