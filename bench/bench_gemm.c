/*
 * bench_gemm: GFLOP/s of kn_sgemm on shapes from real models, next to the
 * reference GEMM (src/kernels/gemm/ref-gemm.c), for each ISA, on 1 and 2 threads.
 *
 *   bench_gemm [--reps N] [--isa portable|avx2|avx512] [--threads T]
 *              [--kc KC --mc MC --nc NC] [--shape MxNxK] [--raw] [--cold] [--cpu]
 *
 * B is prepacked (a weight) unless --raw.  --cold cycles through copies of
 * the packed B filling 256 MiB (in huge pages, as a model's weights), so
 * that every call streams B from DRAM as a step of a large model does.  Each figure is the best of
 * `reps` runs of enough repetitions for about 50 ms: the machine is
 * shared, so the best run is the least disturbed one.  Reports the max
 * abs difference from the reference too, so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/cpu.h"
#include "core/machine.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ref-gemm.h"

/* --cpu: process CPU time instead of wall time.  On a loaded machine it
 * leaves out the time other processes had the core (1 thread only: with 2,
 * spinning workers count too). */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec t;
  clock_gettime(clock_id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
  int64_t m, n, k;
  const char *what;
} shape;

static const shape shapes[] = {
    {512, 512, 512, "square"},
    {128, 768, 768, "BERT-base QKV/out proj, seq 128"},
    {128, 3072, 768, "BERT-base FFN up"},
    {128, 768, 3072, "BERT-base FFN down"},
    {1, 1000, 2048, "ResNet-50 FC, batch 1 (GEMV)"},
    {4, 1024, 256, "LSTM gates, batch 4"},
    {64, 3136, 576, "ResNet-50 conv2 3x3 as GEMM"},
    {2048, 49, 512, "ResNet-50 conv5 1x1 expand"},
    {256, 3136, 64, "ResNet-50 conv2 1x1, K << N"},
};

typedef struct run_ctx {
  kn_isa isa;
  kn_pool *pool;
  kn_sgemm_args g;
  void *scratch;
  float **copies; /* --cold: packed B copies used in turn */
  int n_copies, next;
} run_ctx;

static double time_it(void (*fn)(void *), void *arg, int reps) {
  fn(arg);
  double t0 = now_s();
  int iters = 0;
  while (now_s() - t0 < 0.02) {
    fn(arg);
    iters++;
  }
  double per = (now_s() - t0) / iters;
  int inner = (int)(0.05 / per) + 1;
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double s = now_s();
    for (int i = 0; i < inner; i++) fn(arg);
    double t = (now_s() - s) / inner;
    if (t < best) best = t;
  }
  return best;
}


static void run_fast(void *arg) {
  run_ctx *r = arg;
  if (r->n_copies) {
    r->g.b_packed = r->copies[r->next];
    r->next = (r->next + 1) % r->n_copies;
  }
  kn_sgemm(r->isa, r->pool, &r->g, r->scratch);
}

typedef struct ref_ctx {
  const shape *s;
  const float *a, *b;
  float *c;
} ref_ctx;

static void run_ref(void *arg) {
  ref_ctx *r = arg;
  memset(r->c, 0, (size_t)(r->s->m * r->s->n) * sizeof(float));
  if (!kn_f32_gemm(r->s->m, r->s->n, r->s->k, 1.0f, r->a, r->s->k, false, r->b, r->s->n,
                   false, r->c, r->s->n))
    abort();
}

static float *rand_floats(int64_t n, uint32_t seed) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

int main(int argc, char **argv) {
  int reps = 5, only_threads = 0;
  int only_isa = -1;
  bool raw = false, cold = false;
  kn_sgemm_blocking custom = {0, 0, 0};
  shape one = {0, 0, 0, "command line"};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_ISA_COUNT; j++)
        if (!strcmp(n, kn_isa_name((kn_isa)j))) only_isa = j;
    } else if (!strcmp(argv[i], "--kc") && i + 1 < argc) custom.kc = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--mc") && i + 1 < argc) custom.mc = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--nc") && i + 1 < argc) custom.nc = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--raw")) raw = true;
    else if (!strcmp(argv[i], "--cold")) cold = true;
    else if (!strcmp(argv[i], "--cpu")) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      long long m, n, k;
      if (sscanf(argv[++i], "%lldx%lldx%lld", &m, &n, &k) != 3) return 2;
      one.m = m, one.n = n, one.k = k;
    } else {
      fprintf(stderr, "usage: bench_gemm [--reps N] [--isa I] [--threads T] [--kc KC "
                      "--mc MC --nc NC] [--shape MxNxK] [--raw] [--cold] [--cpu]\n");
      return 2;
    }
  }
  uint64_t feat = kn_cpu_features();
  size_t l1, l2, l3;
  kn_machine os;
  kn_machine_from_os(&os);
  kn_machine_caches(&os, 1, &l1, &l2, &l3);
  printf("caches: L1d %zu KiB, L2 %zu KiB, L3 %zu KiB; B %s\n", l1 >> 10, l2 >> 10,
         l3 >> 10, raw ? "raw (packed per run)" : "prepacked");
  kn_pool *pools[3] = {NULL, NULL, NULL};
  kn_error err;
  if (kn_pool_create(2, &pools[2], &err)) return 1;
  const shape *list = shapes;
  size_t count = sizeof shapes / sizeof shapes[0];
  if (one.m) {
    list = &one;
    count = 1;
  }
  printf("%-16s %-5s %-7s %9s %9s %9s %8s  %s\n", "MxNxK", "thr", "isa", "GFLOP/s",
         "ref", "speedup", "maxdiff", "what");
  for (size_t si = 0; si < count; si++) {
    const shape *s = &list[si];
    float *a = rand_floats(s->m * s->k, 1), *b = rand_floats(s->k * s->n, 2);
    float *c = rand_floats(s->m * s->n, 3), *cref = rand_floats(s->m * s->n, 4);
    double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    ref_ctx rc = {s, a, b, cref};
    double tref = time_it(run_ref, &rc, reps);
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
        if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa))
          continue;
        kn_sgemm_blocking bl = kn_sgemm_blocking_for((kn_isa)isa, l1, l2, l3);
        if (custom.kc) bl.kc = custom.kc;
        if (custom.mc) bl.mc = custom.mc;
        if (custom.nc) bl.nc = custom.nc;
        float *bp = NULL;
        if (!raw) {
          bp = aligned_alloc(64, kn_sgemm_pack_b_size((kn_isa)isa, s->k, s->n) * 4 + 64);
          kn_sgemm_pack_b((kn_isa)isa, s->k, s->n, b, s->n, false, bp);
        }
        run_ctx r;
        memset(&r, 0, sizeof r);
        r.isa = (kn_isa)isa;
        r.pool = pools[threads];
        r.g = (kn_sgemm_args){.m = s->m, .n = s->n, .k = s->k, .alpha = 1.0f, .a = a,
                              .lda = s->k, .b = raw ? b : NULL, .ldb = s->n,
                              .b_packed = bp, .c = c, .ldc = s->n, .blocking = &bl};
        size_t bbytes = kn_sgemm_pack_b_size((kn_isa)isa, s->k, s->n) * 4 + 64;
        if (cold && bp) {
          r.n_copies = (int)((256u << 20) / bbytes) + 2;
          r.copies = calloc((size_t)r.n_copies, sizeof *r.copies);
          for (int q = 0; q < r.n_copies; q++) {
            r.copies[q] = kn_big_alloc(bbytes);
            memcpy(r.copies[q], bp, bbytes);
          }
        }
        size_t sz = kn_sgemm_scratch_size(r.isa, &r.g, threads);
        r.scratch = aligned_alloc(64, (sz + 63) / 64 * 64);
        double t = time_it(run_fast, &r, reps);
        double md = 0;
        for (int64_t i = 0; i < s->m * s->n; i++) md = fmax(md, fabs(c[i] - cref[i]));
        char dims[32];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
                 (long long)s->k);
        printf("%-16s %-5d %-7s %9.1f %9.1f %8.1fx %8.1e  %s\n", dims, threads,
               kn_isa_name(r.isa), flops / t * 1e-9, flops / tref * 1e-9, tref / t, md,
               s->what);
        fflush(stdout);
        free(r.scratch);
        free(bp);
        for (int q = 0; q < r.n_copies; q++) kn_big_free(r.copies[q], bbytes);
        free(r.copies);
      }
    }
    free(a);
    free(b);
    free(c);
    free(cref);
  }
  kn_pool_free(pools[2]);
  return 0;
}
