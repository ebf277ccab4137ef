/*
 * bench_dwconv: the depthwise convolution tactic (kn_f32_dwconv) on every
 * depthwise layer shape of MobileNetV2 and EfficientNet-B0 (224x224), with
 * the epilogue each model fuses into it (Clip 0..6, Silu), on 1 and 2
 * threads, in GFLOP/s and GB/s.
 *
 *   bench_dwconv [--isa portable|avx2|avx512] [--threads T] [--filter S]
 *                [--reps N]
 *
 * The machines here are shared (load averages of 10+ on 2 cores), so wall
 * time over a long loop mostly measures the neighbours.  One thread is
 * timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID), the median of `reps`
 * samples of about 2 ms each; two threads in wall time, the minimum of as
 * many short samples (the least disturbed).  GB/s counts the fewest bytes
 * the layer must move: input plus output (weights are negligible).  The
 * per-model totals weight every shape by how often it occurs.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "kernels/conv/conv.h"

typedef struct layer {
  const char *model;
  int64_t c, h, k, s, count;
  kn_act act;
} layer;

/* MobileNetV2 (torchvision): every block's depthwise 3x3, Clip(0, 6).
 * EfficientNet-B0: depthwise 3x3 / 5x5, Silu. */
static const layer layers[] = {
    {"mv2", 32, 112, 3, 1, 1, KN_ACT_CLIP},   {"mv2", 96, 112, 3, 2, 1, KN_ACT_CLIP},
    {"mv2", 144, 56, 3, 1, 1, KN_ACT_CLIP},   {"mv2", 144, 56, 3, 2, 1, KN_ACT_CLIP},
    {"mv2", 192, 28, 3, 1, 2, KN_ACT_CLIP},   {"mv2", 192, 28, 3, 2, 1, KN_ACT_CLIP},
    {"mv2", 384, 14, 3, 1, 4, KN_ACT_CLIP},   {"mv2", 576, 14, 3, 1, 2, KN_ACT_CLIP},
    {"mv2", 576, 14, 3, 2, 1, KN_ACT_CLIP},   {"mv2", 960, 7, 3, 1, 3, KN_ACT_CLIP},
    {"effb0", 32, 112, 3, 1, 1, KN_ACT_SILU}, {"effb0", 96, 112, 3, 2, 1, KN_ACT_SILU},
    {"effb0", 144, 56, 3, 1, 1, KN_ACT_SILU}, {"effb0", 144, 56, 5, 2, 1, KN_ACT_SILU},
    {"effb0", 240, 28, 5, 1, 1, KN_ACT_SILU}, {"effb0", 240, 28, 3, 2, 1, KN_ACT_SILU},
    {"effb0", 480, 14, 3, 1, 2, KN_ACT_SILU}, {"effb0", 480, 14, 5, 1, 1, KN_ACT_SILU},
    {"effb0", 672, 14, 5, 1, 2, KN_ACT_SILU}, {"effb0", 672, 14, 5, 2, 1, KN_ACT_SILU},
    {"effb0", 1152, 7, 5, 1, 3, KN_ACT_SILU}, {"effb0", 1152, 7, 3, 1, 1, KN_ACT_SILU},
};

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct job {
  kn_isa isa;
  kn_pool *pool;
  kn_conv2d c;
  const float *x, *w;
  float *y;
  kn_epilogue ep;
  void *scratch;
} job;

static void run(const job *j) {
  kn_f32_dwconv(j->isa, j->pool, &j->c, j->x, j->w, &j->ep, j->y, j->scratch, NULL);
}

/* Seconds per call: median CPU time (1 thread) or minimum wall time. */
static double time_it(const job *j, int reps, bool cpu) {
  clockid_t id = cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  run(j);
  double t0 = clock_s(id);
  int iters = 0;
  while (clock_s(id) - t0 < 0.005) {
    run(j);
    iters++;
  }
  int inner = (int)(0.002 / ((clock_s(id) - t0) / iters)) + 1;
  double *s = malloc((size_t)reps * sizeof *s);
  for (int r = 0; r < reps; r++) {
    double a = clock_s(id);
    for (int i = 0; i < inner; i++) run(j);
    s[r] = (clock_s(id) - a) / inner;
  }
  qsort(s, (size_t)reps, sizeof *s, cmp_double);
  double t = cpu ? s[reps / 2] : s[0];
  free(s);
  return t;
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
  int reps = 15, only_threads = 0, only_isa = -1;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int k = 0; k < KN_ISA_COUNT; k++)
        if (!strcmp(n, kn_isa_name((kn_isa)k))) only_isa = k;
    } else {
      fprintf(stderr, "usage: bench_dwconv [--isa I] [--threads T] [--filter S] [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  uint64_t feat = kn_cpu_features();
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  double total[2][2][KN_ISA_COUNT] = {{{0}}}; /* [model][threads-1][isa] seconds */
  printf("%-6s %-16s %-3s %-8s %9s %8s %8s\n", "model", "layer", "thr", "isa", "us", "GFLOP/s",
         "GB/s");
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    char name[64];
    snprintf(name, sizeof name, "%dx%d%s %d@%d", (int)l->k, (int)l->k, l->s == 2 ? " s2" : "",
             (int)l->c, (int)l->h);
    char full[96];
    snprintf(full, sizeof full, "%s %s", l->model, name);
    if (filter && !strstr(full, filter)) continue;
    int64_t pad = l->k / 2, oh = (l->h + 2 * pad - l->k) / l->s + 1;
    kn_conv2d c = {.n = 1, .c = l->c, .h = l->h, .w = l->h, .m = l->c, .oh = oh, .ow = oh,
                   .group = l->c, .kh = l->k, .kw = l->k, .sh = l->s, .sw = l->s, .dh = 1,
                   .dw = 1, .pt = pad, .pl = pad};
    double flops = 2.0 * (double)(c.c * oh * oh * l->k * l->k);
    double bytes = 4.0 * (double)(c.c * (l->h * l->h + oh * oh));
    float *x = rand_floats(c.c * c.h * c.w, 1), *w = rand_floats(c.c * l->k * l->k, 2);
    float *bias = rand_floats(c.c, 3), *y = rand_floats(c.c * oh * oh, 4);
    kn_epilogue ep = {.bias = bias, .bias_per_row = true,
                      .act = {.act = l->act, .lo = 0.0f, .hi = 6.0f}};
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
        if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa)) continue;
        job j = {.isa = (kn_isa)isa, .pool = threads == 2 ? pool2 : NULL, .c = c, .x = x,
                 .w = w, .y = y, .ep = ep};
        size_t sb = kn_f32_dwconv_scratch(j.isa, &c, threads, NULL);
        j.scratch = aligned_alloc(64, (sb + 63) / 64 * 64 + 64);
        double t = time_it(&j, reps, threads == 1);
        free(j.scratch);
        total[strcmp(l->model, "mv2") != 0][threads - 1][isa] += t * (double)l->count;
        printf("%-6s %-16s %-3d %-8s %9.2f %8.1f %8.1f\n", l->model, name, threads,
               kn_isa_name((kn_isa)isa), t * 1e6, flops / t * 1e-9, bytes / t * 1e-9);
        fflush(stdout);
      }
    }
    free(x);
    free(w);
    free(bias);
    free(y);
  }
  for (int m = 0; m < 2; m++)
    for (int t = 0; t < 2; t++)
      for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--)
        if (total[m][t][isa] > 0)
          printf("total %-6s depthwise, %d thread%s, %-8s %9.1f us\n", m ? "effb0" : "mv2",
                 t + 1, t ? "s" : " ", kn_isa_name((kn_isa)isa), total[m][t][isa] * 1e6);
  kn_pool_free(pool2);
  return 0;
}
