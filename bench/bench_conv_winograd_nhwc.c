/*
 * bench_conv_winograd_nhwc: the channels-last Winograd F(4x4, 3x3)
 * (kn_f32_conv_winograd_nhwc) next to the NCHW Winograd
 * (kn_f32_conv_winograd) and the channels-last indirect GEMM
 * (kn_f32_conv_nhwc, conv_igemm_nhwc) on the same 3x3 stride-1 layer, in
 * effective GFLOP/s (the direct method's 2*m*c*9 FLOPs per output pixel
 * over the time), bias and Relu fused.  Layers: ResNet-50's 3x3 layers and
 * other 3x3 CNN shapes (VGG/UNet-like 32@112, 64@112).
 *
 *   bench_conv_winograd_nhwc [--isa portable|avx2|avx512] [--threads T]
 *                            [--filter S] [--reps N] [--batch N]
 *
 * The machine is shared, so one thread is timed in thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), the median of `reps` samples of about 5 ms;
 * two threads in wall time, the minimum of as many samples.  The three
 * tactics alternate sample by sample so that a busy neighbour disturbs
 * them alike.  maxdiff: the largest difference of the NHWC Winograd from
 * the NCHW one (transposed), so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "kernels/conv/conv.h"

typedef struct layer {
  const char *what;
  int64_t c, h, m;
} layer;

static const layer layers[] = {
    {"r50 3x3 64 @56", 64, 56, 64},     {"r50 3x3 128 @28", 128, 28, 128},
    {"r50 3x3 256 @14", 256, 14, 256},  {"r50 3x3 512 @7", 512, 7, 512},
    {"3x3 32 @112", 32, 112, 32},       {"3x3 64 @112", 64, 112, 64},
    {"3x3 32->64 @56", 32, 56, 64},     {"3x3 128->64 @56", 128, 56, 64},
    /* SqueezeNet 1.1's fire modules: few channels, small maps */
    {"fire 16->64 @55", 16, 55, 64},    {"fire 32->128 @27", 32, 27, 128},
    {"fire 48->192 @13", 48, 13, 192},  {"fire 64->256 @13", 64, 13, 256},
};

enum { WG_NHWC, WG_NCHW, IGEMM_NHWC, NKIND };
static const char *const kind_names[NKIND] = {"wg-nhwc", "wg-nchw", "igemm"};

typedef struct job {
  int kind;
  kn_isa isa;
  kn_pool *pool;
  kn_conv2d c;
  const float *x, *wp;
  kn_epilogue ep;
  float *y;
  void *scratch;
} job;

static void run(const job *j) {
  if (j->kind == WG_NHWC)
    kn_f32_conv_winograd_nhwc(j->isa, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y,
                              j->scratch, NULL);
  else if (j->kind == WG_NCHW)
    kn_f32_conv_winograd(j->isa, j->pool, &j->c, j->x, j->wp, &j->ep, j->y, j->scratch);
  else
    kn_f32_conv_nhwc(j->isa, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y, j->scratch,
                     NULL);
}

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Seconds per call of each job, samples interleaved. */
static void time_all(const job *a, int reps, bool cpu, double out[NKIND]) {
  clockid_t id = cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  int inner[NKIND];
  for (int t = 0; t < NKIND; t++) {
    run(&a[t]);
    double t0 = clock_s(id);
    int iters = 0;
    while (clock_s(id) - t0 < 0.01) {
      run(&a[t]);
      iters++;
    }
    inner[t] = (int)(0.005 / ((clock_s(id) - t0) / iters)) + 1;
  }
  double *s = malloc((size_t)reps * NKIND * sizeof *s);
  for (int r = 0; r < reps; r++)
    for (int t = 0; t < NKIND; t++) {
      double t0 = clock_s(id);
      for (int i = 0; i < inner[t]; i++) run(&a[t]);
      s[t * reps + r] = (clock_s(id) - t0) / inner[t];
    }
  for (int t = 0; t < NKIND; t++) {
    qsort(s + t * reps, (size_t)reps, sizeof *s, cmp_double);
    out[t] = cpu ? s[t * reps + reps / 2] : s[t * reps];
  }
  free(s);
}

static float *rand_floats(int64_t n, uint32_t seed) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64 + 64));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

static void *alloc_scratch(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

int main(int argc, char **argv) {
  int reps = 9, only_threads = 0, only_isa = -1;
  int64_t batch = 1;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_ISA_COUNT; j++)
        if (!strcmp(n, kn_isa_name((kn_isa)j))) only_isa = j;
    } else {
      fprintf(stderr, "usage: bench_conv_winograd_nhwc [--isa I] [--threads T] [--filter S] "
                      "[--reps N] [--batch N]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (batch < 1) batch = 1;
  uint64_t feat = kn_cpu_features();
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  printf("%-20s %-3s %-8s %8s %8s %8s %7s %9s\n", "layer", "thr", "isa", kind_names[0],
         kind_names[1], kind_names[2], "vs-nchw", "maxdiff");
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    if (filter && !strstr(l->what, filter)) continue;
    kn_conv2d c = {.n = batch, .c = l->c, .h = l->h, .w = l->h, .m = l->m, .oh = l->h,
                   .ow = l->h, .group = 1, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
                   .dw = 1, .pt = 1, .pl = 1};
    int64_t hw = l->h * l->h, nx = batch * l->c * hw, ny = batch * l->m * hw;
    double flops = 2.0 * (double)ny * (double)(l->c * 9);
    float *x = rand_floats(nx, 1), *w = rand_floats(l->m * l->c * 9, 2);
    float *bias = rand_floats(l->m, 3), *xh = rand_floats(nx, 4);
    float *y = rand_floats(ny, 5), *yh = rand_floats(ny, 6), *yi = rand_floats(ny, 7);
    for (int64_t b = 0; b < batch; b++)
      for (int64_t ch = 0; ch < l->c; ch++)
        for (int64_t i = 0; i < hw; i++)
          xh[(b * hw + i) * l->c + ch] = x[(b * l->c + ch) * hw + i];
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
        if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa))
          continue;
        kn_isa is = (kn_isa)isa;
        kn_pool *pool = threads == 2 ? pool2 : NULL;
        kn_epilogue ep = {.act = {.act = KN_ACT_RELU}, .bias = bias, .bias_per_row = true};
        job j[NKIND];
        for (int k = 0; k < NKIND; k++)
          j[k] = (job){.kind = k, .isa = is, .pool = pool, .c = c, .ep = ep};
        j[WG_NHWC].x = xh;
        j[WG_NHWC].y = yh;
        j[WG_NCHW].x = x;
        j[WG_NCHW].y = y;
        j[IGEMM_NHWC].x = xh;
        j[IGEMM_NHWC].y = yi;
        float *w0 = aligned_alloc(64, kn_f32_conv_winograd_nhwc_pack_size(is, &c) * 4 + 64);
        float *w1 = aligned_alloc(64, kn_f32_conv_winograd_pack_size(is, &c) * 4 + 64);
        float *w2 = aligned_alloc(64, kn_f32_conv_nhwc_pack_size(is, &c) * 4 + 64);
        kn_f32_conv_winograd_nhwc_pack(is, &c, w, w0);
        kn_f32_conv_winograd_pack(is, &c, (size_t)1 << 20, w, w1);
        kn_f32_conv_nhwc_pack(is, &c, w, w2);
        j[WG_NHWC].wp = w0;
        j[WG_NCHW].wp = w1;
        j[IGEMM_NHWC].wp = w2;
        j[WG_NHWC].scratch =
            alloc_scratch(kn_f32_conv_winograd_nhwc_scratch(is, &c, threads, NULL));
        j[WG_NCHW].scratch = alloc_scratch(kn_f32_conv_winograd_scratch(is, &c, threads));
        j[IGEMM_NHWC].scratch =
            alloc_scratch(kn_f32_conv_nhwc_scratch(is, &c, threads, false, NULL));
        double t[NKIND];
        time_all(j, reps, threads == 1, t);
        double md = 0;
        for (int64_t b = 0; b < batch; b++)
          for (int64_t o = 0; o < l->m; o++)
            for (int64_t i = 0; i < hw; i++) {
              double d = fabs((double)yh[(b * hw + i) * l->m + o] -
                              (double)y[(b * l->m + o) * hw + i]);
              md = d > md ? d : md;
            }
        printf("%-20s %-3d %-8s %8.1f %8.1f %8.1f %6.2fx %9.2e\n", l->what, threads,
               kn_isa_name(is), flops / t[0] * 1e-9, flops / t[1] * 1e-9, flops / t[2] * 1e-9,
               t[1] / t[0], md);
        fflush(stdout);
        free(w0);
        free(w1);
        free(w2);
        for (int k = 0; k < NKIND; k++) free(j[k].scratch);
      }
    }
    free(x);
    free(w);
    free(bias);
    free(xh);
    free(y);
    free(yh);
    free(yi);
  }
  kn_pool_free(pool2);
  return 0;
}
