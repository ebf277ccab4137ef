/*
 * bench_attention: GFLOP/s of the streamed attention kernel
 * (src/kernels/attention) on BERT's shapes, next to the Attention op's
 * reference kernel (src/ops/attention.c, run by the executor), for each ISA
 * on 1 and 2 threads, and on AVX-512 as a bf16 step too (its max abs diff
 * is bf16's rounding, not an error).
 *
 *   bench_attention [--reps N]
 *
 * FLOPs counted: the two products, 2 * B * H * Sq * Sk * (Dk + Dv).  Each
 * figure is the best of `reps` runs of about 50 ms (the machine is shared:
 * the best run is the least disturbed one).  The max abs difference from
 * the reference is printed too, so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "engine/exec.h"
#include "kernels/attention/attention-kernels.h"
#include "tactics/tactics.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
  int64_t B, H, S, D;
  const char *what;
} shape;

static const shape shapes[] = {
    {1, 12, 128, 64, "BERT-base, batch 1, seq 128"},
    {1, 2, 128, 64, "BERT-tiny, batch 1, seq 128"},
    {1, 12, 512, 64, "BERT-base, batch 1, seq 512"},
};

typedef struct bench {
  kn_ir_model *m;
  kn_slot in[4];
  const kn_slot *pin[4];
  kn_slot out;
  kn_rt *rt;
} bench;

static int32_t add_input(kn_graph *g, const char *name, int32_t rank, const int64_t *dims) {
  int32_t v = kn_graph_add_value(g, name);
  kn_value *val = &g->values[v];
  val->is_input = true;
  val->type.kind = KN_KIND_TENSOR;
  val->type.dtype = KN_DTYPE_F32;
  val->type.rank = rank;
  memcpy(val->type.dims, dims, (size_t)rank * sizeof *dims);
  g->inputs = realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof *g->inputs);
  g->inputs[g->n_inputs++] = v;
  return v;
}

/* Attention(q, k, v, mask) in the [B, S, H*D] layout BERT's pass writes. */
static void make(bench *b, const shape *s) {
  kn_error err;
  kn_ir_model *m = calloc(1, sizeof *m);
  m->graph = kn_graph_new(NULL);
  m->opsets = calloc(1, sizeof *m->opsets);
  m->n_opsets = 1;
  m->opsets[0].domain = strdup("");
  m->opsets[0].version = 13;
  m->label = strdup("bench");
  kn_graph *g = m->graph;
  int64_t hid = s->H * s->D;
  int64_t d3[3] = {s->B, s->S, hid}, dm[4] = {s->B, 1, 1, s->S};
  int32_t in[4] = {add_input(g, "q", 3, d3), add_input(g, "k", 3, d3), add_input(g, "v", 3, d3),
                   add_input(g, "mask", 4, dm)};
  int32_t y = kn_graph_add_value(g, "y");
  int32_t n = kn_graph_new_node(g, "Attention", KN_DOMAIN, "att", 4, in, 1, &y);
  if (!kn_node_set_int(&g->nodes[n], "num_heads", s->H)) abort();
  g->values[y].is_output = true;
  g->outputs = malloc(sizeof *g->outputs);
  g->outputs[g->n_outputs++] = y;
  if (kn_graph_finish(g, "bench", &err) || kn_ops_prepare(m, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  kn_tactics_bind(m); /* run_once gives the node its tactic directly */
  b->m = m;
  uint32_t seed = 1;
  for (int32_t i = 0; i < 4; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    b->in[i].kind = KN_KIND_TENSOR;
    if (kn_tensor_alloc(&b->in[i].t, KN_DTYPE_F32, v->type.rank, v->type.dims, NULL)) abort();
    float *d = b->in[i].t.data;
    for (int64_t e = 0; e < kn_tensor_numel(&b->in[i].t); e++) {
      seed = seed * 1664525u + 1013904223u;
      float x = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
      d[e] = i == 3 ? (x < -0.8f ? -10000.0f : 0.0f) : 2 * x;
    }
    b->pin[i] = &b->in[i];
  }
}

static void run_once(void *arg) {
  bench *b = arg;
  kn_error err;
  kn_mem_budget mem = {.limit = UINT64_MAX, .rt = b->rt};
  b->m->graph->nodes[0].tactic = b->rt ? KN_TACTIC_attention_streamed : 0;
  kn_slot_release(&b->out);
  if (kn_exec_graph(b->m, b->m->graph, NULL, b->pin, &b->out, &mem, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
}

static double time_it(bench *b, int reps) {
  run_once(b);
  double t0 = now_s();
  int n = 0;
  while (now_s() - t0 < 0.05) {
    run_once(b);
    n++;
  }
  int per = n > 0 ? n : 1;
  double best = INFINITY;
  for (int r = 0; r < reps; r++) {
    t0 = now_s();
    for (int i = 0; i < per; i++) run_once(b);
    double t = (now_s() - t0) / per;
    if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
  uint64_t f = kn_cpu_features();
  printf("| shape | kernel | threads | ms | GFLOP/s | vs reference | max abs diff |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape *s = &shapes[si];
    double flops = 2.0 * (double)(s->B * s->H * s->S * s->S) * (double)(2 * s->D);
    bench b;
    memset(&b, 0, sizeof b);
    make(&b, s);
    double tref = time_it(&b, reps);
    kn_slot ref = b.out;
    memset(&b.out, 0, sizeof b.out);
    printf("| %s | reference | 1 | %.3f | %.1f | 1.00 | 0 |\n", s->what, tref * 1e3,
           flops / tref * 1e-9);
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, f)) continue;
      /* AVX-512 also as a bf16 step (vdpbf16ps where the CPU has it) */
      for (int32_t step = 0; step < 4; step++) {
        int32_t threads = 1 + step % 2;
        bool bf16 = step >= 2;
        if (bf16 && isa != KN_ISA_AVX512) break;
        b.m->graph->nodes[0].precision = bf16 ? KN_PRECISION_BF16 : KN_PRECISION_FP32;
        kn_rt rt = {.isa = (kn_isa)isa, .features = f};
        kn_error err;
        if (threads > 1 && kn_pool_create(threads, &rt.pool, &err)) abort();
        b.rt = &rt;
        double t = time_it(&b, reps);
        double diff = 0;
        const float *x = ref.t.data, *y = b.out.t.data;
        for (int64_t e = 0; e < kn_tensor_numel(&ref.t); e++)
          if (!(fabs((double)x[e] - y[e]) <= diff)) diff = fabs((double)x[e] - y[e]);
        printf("| %s | %s%s | %d | %.3f | %.1f | %.2f | %.2g |\n", s->what,
               kn_isa_name((kn_isa)isa),
               bf16 ? ((f & KN_CPU_BIT(AVX512BF16)) ? " bf16 (vdpbf16ps)" : " bf16 (rounded)")
                    : "",
               threads, t * 1e3, flops / t * 1e-9, tref / t, diff);
        b.rt = NULL;
        b.m->graph->nodes[0].precision = KN_PRECISION_FP32;
        free(rt.scratch);
        kn_pool_free(rt.pool);
      }
    }
    kn_slot_release(&ref);
    kn_slot_release(&b.out);
    for (int32_t i = 0; i < 4; i++) kn_slot_release(&b.in[i]);
    kn_ir_model_free(b.m);
  }
  return 0;
}
