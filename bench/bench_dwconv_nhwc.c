/*
 * bench_dwconv_nhwc: the channels-last depthwise convolution
 * (kn_f32_dwconv_nhwc) against the NCHW one (kn_f32_dwconv) on every
 * depthwise layer shape of MobileNetV2 and EfficientNet-B0 (224x224, with
 * the epilogue each model fuses: Clip 0..6, Silu), and the channels-last
 * pooling (kn_f32_pool2d_nhwc, kn_f32_global_pool_nhwc) against the NCHW
 * one on ResNet's stem max pool and the models' global average pools.
 * One thread, thread CPU time (the median of `reps` samples of about 2 ms
 * each: the machines here are shared, wall time measures the
 * neighbours).  GB/s counts input plus output bytes; the ratio column is
 * NCHW time / NHWC time (above 1: NHWC faster).
 *
 *   bench_dwconv_nhwc [--isa portable|avx2|avx512] [--filter S] [--reps N]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "kernels/conv/conv.h"
#include "kernels/pool/pool-kernels.h"

typedef struct layer {
  const char *model;
  int64_t c, h, k, s, count;
  kn_act act;
} layer;

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

static double clock_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct job {
  int kind; /* 0 dwconv NCHW, 1 dwconv NHWC, 2 pool NCHW, 3 pool NHWC, 4/5 global */
  kn_isa isa;
  kn_conv2d c;
  kn_pool2d p;
  int64_t ch, size;
  const float *x, *w;
  float *y;
  kn_epilogue ep;
  void *scratch;
} job;

static void run(const job *j) {
  switch (j->kind) {
  case 0: kn_f32_dwconv(j->isa, NULL, &j->c, j->x, j->w, &j->ep, j->y, j->scratch, NULL); break;
  case 1:
    kn_f32_dwconv_nhwc(j->isa, NULL, &j->c, j->x, NULL, j->w, &j->ep, j->y, j->scratch,
                       NULL);
    break;
  case 2: kn_f32_pool2d(j->isa, NULL, &j->p, j->x, j->y, j->scratch, NULL); break;
  case 3: kn_f32_pool2d_nhwc(j->isa, NULL, &j->p, j->ch, j->x, j->y, j->scratch); break;
  case 4: kn_f32_global_pool(j->isa, NULL, false, j->ch, j->size, j->x, j->y); break;
  default:
    kn_f32_global_pool_nhwc(j->isa, NULL, false, 1, j->size, j->ch, j->x, j->y, j->scratch);
    break;
  }
}

/* Seconds per call: median thread CPU time. */
static double time_it(const job *j, int reps) {
  run(j);
  double t0 = clock_s();
  int iters = 0;
  while (clock_s() - t0 < 0.005) {
    run(j);
    iters++;
  }
  int inner = (int)(0.002 / ((clock_s() - t0) / iters)) + 1;
  double *s = malloc((size_t)reps * sizeof *s);
  for (int r = 0; r < reps; r++) {
    double a = clock_s();
    for (int i = 0; i < inner; i++) run(j);
    s[r] = (clock_s() - a) / inner;
  }
  qsort(s, (size_t)reps, sizeof *s, cmp_double);
  double t = s[reps / 2];
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

static void *scratch_of(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

static void row(const char *name, kn_isa isa, double t_nchw, double t_nhwc, double flops,
                double bytes) {
  printf("%-24s %-8s %9.2f %9.2f %7.1f %7.1f %7.1f %7.1f %6.2f\n", name, kn_isa_name(isa),
         t_nchw * 1e6, t_nhwc * 1e6, flops / t_nchw * 1e-9, flops / t_nhwc * 1e-9,
         bytes / t_nchw * 1e-9, bytes / t_nhwc * 1e-9, t_nchw / t_nhwc);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int reps = 15, only_isa = -1;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int k = 0; k < KN_ISA_COUNT; k++)
        if (!strcmp(n, kn_isa_name((kn_isa)k))) only_isa = k;
    } else {
      fprintf(stderr, "usage: bench_dwconv_nhwc [--isa I] [--filter S] [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  uint64_t feat = kn_cpu_features();
  double total[2][2][KN_ISA_COUNT] = {{{0}}}; /* [model][nchw, nhwc][isa] seconds */
  printf("%-24s %-8s %9s %9s %7s %7s %7s %7s %6s\n", "layer (1 thread)", "isa", "nchw us",
         "nhwc us", "GF nchw", "GF nhwc", "GB nchw", "GB nhwc", "ratio");
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    char name[64];
    snprintf(name, sizeof name, "%s %dx%d%s %d@%d", l->model, (int)l->k, (int)l->k,
             l->s == 2 ? " s2" : "", (int)l->c, (int)l->h);
    if (filter && !strstr(name, filter)) continue;
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
    for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
      if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa)) continue;
      float *wp = aligned_alloc(64, kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, &c) * 4 + 64);
      kn_f32_dwconv_nhwc_pack((kn_isa)isa, &c, w, wp);
      job j = {.kind = 0, .isa = (kn_isa)isa, .c = c, .x = x, .w = w, .y = y, .ep = ep};
      j.scratch = scratch_of(kn_f32_dwconv_scratch(j.isa, &c, 1, NULL));
      double t0 = time_it(&j, reps);
      free(j.scratch);
      j.kind = 1, j.w = wp;
      j.scratch = scratch_of(kn_f32_dwconv_nhwc_scratch(j.isa, &c, 1, NULL));
      double t1 = time_it(&j, reps);
      free(j.scratch);
      free(wp);
      int m = strcmp(l->model, "mv2") != 0;
      total[m][0][isa] += t0 * (double)l->count;
      total[m][1][isa] += t1 * (double)l->count;
      row(name, (kn_isa)isa, t0, t1, flops, bytes);
    }
    free(x), free(w), free(bias), free(y);
  }
  for (int m = 0; m < 2; m++)
    for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--)
      if (total[m][0][isa] > 0)
        printf("total %-6s depthwise %-8s nchw %9.1f us  nhwc %9.1f us  ratio %.2f\n",
               m ? "effb0" : "mv2", kn_isa_name((kn_isa)isa), total[m][0][isa] * 1e6,
               total[m][1][isa] * 1e6, total[m][0][isa] / total[m][1][isa]);
  /* pooling: ResNet-50 stem max pool 3x3/2 on 64@112, an average 3x3/1
   * (Inception-style) on 192@28, global averages 1280@7 and 2048@7 */
  static const struct {
    const char *name;
    int64_t c, h, k, s, pad;
    bool is_max;
  } pools[] = {
      {"maxpool 3x3 s2 64@112", 64, 112, 3, 2, 1, true},
      {"avgpool 3x3 s1 192@28", 192, 28, 3, 1, 1, false},
      {"global avg 1280@7", 1280, 7, 0, 0, 0, false},
      {"global avg 2048@7", 2048, 7, 0, 0, 0, false},
      {"global avg 32@112", 32, 112, 0, 0, 0, false},
  };
  for (size_t pi = 0; pi < sizeof pools / sizeof pools[0]; pi++) {
    if (filter && !strstr(pools[pi].name, filter)) continue;
    int64_t ch = pools[pi].c, h = pools[pi].h, k = pools[pi].k, s = pools[pi].s;
    int64_t oh = k ? (h + 2 * pools[pi].pad - k) / s + 1 : 1;
    float *x = rand_floats(ch * h * h, 5), *y = rand_floats(ch * oh * oh, 6);
    double bytes = 4.0 * (double)(ch * (h * h + oh * oh));
    double flops = k ? (double)(ch * oh * oh * k * k) : (double)(ch * h * h);
    for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
      if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa)) continue;
      job j = {.isa = (kn_isa)isa, .x = x, .y = y, .ch = ch, .size = h * h};
      j.p = (kn_pool2d){.planes = ch, .h = h, .w = h, .oh = oh, .ow = oh, .kh = k, .kw = k,
                        .sh = s, .sw = s, .dh = 1, .dw = 1, .pt = pools[pi].pad,
                        .pl = pools[pi].pad, .pb = pools[pi].pad, .pr = pools[pi].pad,
                        .is_max = pools[pi].is_max};
      double t0, t1;
      if (k) {
        j.kind = 2;
        j.scratch = scratch_of(kn_f32_pool2d_scratch(j.isa, &j.p, 1, NULL));
        t0 = time_it(&j, reps);
        free(j.scratch);
        j.kind = 3, j.p.planes = 1;
        j.scratch = scratch_of(kn_f32_pool2d_nhwc_scratch(j.isa, &j.p, ch, 1));
        t1 = time_it(&j, reps);
        free(j.scratch);
      } else {
        j.kind = 4;
        t0 = time_it(&j, reps);
        j.kind = 5;
        j.scratch = scratch_of(kn_f32_global_pool_nhwc_scratch(1, j.size, ch));
        t1 = time_it(&j, reps);
        free(j.scratch);
      }
      row(pools[pi].name, (kn_isa)isa, t0, t1, flops, bytes);
    }
    free(x), free(y);
  }
  return 0;
}
