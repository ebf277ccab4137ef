/*
 * bench_conv: GFLOP/s of the convolution tactics (src/kernels/conv) on
 * layer shapes of ResNet-50, MobileNetV2 and EfficientNet-B0, next to the
 * reference driver (src/ops/conv.c), on 1 and 2 threads.
 *
 *   bench_conv [--reps N] [--isa portable|avx2|avx512] [--threads T]
 *              [--filter SUBSTR] [--no-ref]
 *
 * Weights are prepacked (as an engine holds them).  Each figure is the
 * best of `reps` runs of enough repetitions for about 50 ms (the machine is
 * shared: the best run is the least disturbed).  The max abs difference
 * from the reference is printed too, so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "kernels/conv/conv.h"
#include "ops/conv_ref.h"
#include "ops/tactic.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct layer {
  const char *what;
  int64_t c, h, m, group, k, s, pad;
} layer;

static const layer layers[] = {
    {"r50 conv1 7x7 s2", 3, 224, 64, 1, 7, 2, 3},
    {"r50 l1 1x1 64->64", 64, 56, 64, 1, 1, 1, 0},
    {"r50 l1 3x3 64->64", 64, 56, 64, 1, 3, 1, 1},
    {"r50 l1 1x1 64->256", 64, 56, 256, 1, 1, 1, 0},
    {"r50 l1 1x1 256->64", 256, 56, 64, 1, 1, 1, 0},
    {"r50 l2 3x3 128->128", 128, 28, 128, 1, 3, 1, 1},
    {"r50 l2 1x1 s2 256->512", 256, 56, 512, 1, 1, 2, 0},
    {"r50 l3 3x3 256->256", 256, 14, 256, 1, 3, 1, 1},
    {"r50 l3 1x1 1024->256", 1024, 14, 256, 1, 1, 1, 0},
    {"r50 l4 3x3 512->512", 512, 7, 512, 1, 3, 1, 1},
    {"r50 l4 1x1 512->2048", 512, 7, 2048, 1, 1, 1, 0},
    {"mv2 dw 3x3 32 @112", 32, 112, 32, 32, 3, 1, 1},
    {"mv2 dw 3x3 s2 96 @112", 96, 112, 96, 96, 3, 2, 1},
    {"mv2 dw 3x3 144 @56", 144, 56, 144, 144, 3, 1, 1},
    {"mv2 dw 3x3 s2 144 @56", 144, 56, 144, 144, 3, 2, 1},
    {"mv2 dw 3x3 384 @14", 384, 14, 384, 384, 3, 1, 1},
    {"mv2 dw 3x3 960 @7", 960, 7, 960, 960, 3, 1, 1},
    {"effb0 dw 5x5 s2 144 @56", 144, 56, 144, 144, 5, 2, 2},
    {"effb0 dw 5x5 240 @28", 240, 28, 240, 240, 5, 1, 2},
    {"effb0 dw 5x5 672 @14", 672, 14, 672, 672, 5, 1, 2},
    {"mv2 1x1 96->24 @56", 96, 56, 24, 1, 1, 1, 0},
    {"mv2 1x1 32->192 @28", 32, 28, 192, 1, 1, 1, 0},
};

static kn_conv2d conv_of(const layer *l) {
  int64_t oh = (l->h + 2 * l->pad - l->k) / l->s + 1;
  kn_conv2d c = {.n = 1, .c = l->c, .h = l->h, .w = l->h, .m = l->m, .oh = oh, .ow = oh,
                 .group = l->group, .kh = l->k, .kw = l->k, .sh = l->s, .sw = l->s,
                 .dh = 1, .dw = 1, .pt = l->pad, .pl = l->pad};
  return c;
}

static kn_conv_geom geom_of(const kn_conv2d *c) {
  kn_conv_geom g;
  memset(&g, 0, sizeof g);
  g.nd = 2;
  g.n = c->n, g.c = c->c, g.m = c->m, g.group = c->group;
  g.x_sp[0] = c->h, g.x_sp[1] = c->w, g.y_sp[0] = c->oh, g.y_sp[1] = c->ow;
  g.k[0] = c->kh, g.k[1] = c->kw, g.s[0] = c->sh, g.s[1] = c->sw, g.d[0] = g.d[1] = 1;
  g.pb[0] = c->pt, g.pb[1] = c->pl;
  g.pe[0] = (c->oh - 1) * c->sh + c->kh - c->h - c->pt;
  g.pe[1] = (c->ow - 1) * c->sw + c->kw - c->w - c->pl;
  g.ksz = c->kh * c->kw, g.x_size = c->h * c->w, g.y_size = c->oh * c->ow;
  return g;
}

typedef struct job {
  int32_t tactic;
  kn_isa isa;
  kn_pool *pool;
  kn_conv2d c;
  kn_conv_geom g;
  const float *x, *w, *wp, *bias;
  float *y;
  void *scratch;
} job;

static void run_fast(void *arg) {
  job *j = arg;
  kn_epilogue ep = {.bias = j->bias, .bias_per_row = true, .act = {.act = KN_ACT_RELU}};
  if (j->tactic == KN_TACTIC_conv_depthwise)
    kn_f32_dwconv(j->isa, j->pool, &j->c, j->x, j->w, &ep, j->y, j->scratch, NULL);
  else if (j->tactic == KN_TACTIC_conv_winograd)
    kn_f32_conv_winograd(j->isa, j->pool, &j->c, j->x, j->wp, &ep, j->y, j->scratch);
  else
    kn_f32_conv_gemm(j->isa, j->pool, &j->c, j->x, j->wp, &ep, j->y, j->scratch, NULL);
}

static void run_ref(void *arg) {
  job *j = arg;
  memset(j->y, 0, (size_t)(j->c.m * j->c.oh * j->c.ow) * sizeof(float));
  if (!kn_conv_forward_f32(&j->g, j->x, j->w, j->y, NULL, NULL)) abort();
  for (int64_t m = 0; m < j->c.m; m++)
    for (int64_t i = 0; i < j->c.oh * j->c.ow; i++) {
      float *v = &j->y[m * j->c.oh * j->c.ow + i];
      *v += j->bias[m];
      *v = *v > 0 ? *v : 0;
    }
}

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

static float *rand_floats(int64_t n, uint32_t seed) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

int main(int argc, char **argv) {
  int reps = 5, only_threads = 0, only_isa = -1;
  const char *filter = NULL;
  bool no_ref = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--no-ref")) no_ref = true;
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_ISA_COUNT; j++)
        if (!strcmp(n, kn_isa_name((kn_isa)j))) only_isa = j;
    } else {
      fprintf(stderr, "usage: bench_conv [--reps N] [--isa I] [--threads T] [--filter S] "
                      "[--no-ref]\n");
      return 2;
    }
  }
  uint64_t feat = kn_cpu_features();
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  printf("%-26s %-9s %-3s %-6s %8s %8s %7s %9s\n", "layer", "tactic", "thr", "isa",
         "GFLOP/s", "ref", "speedup", "maxdiff");
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    if (filter && !strstr(l->what, filter)) continue;
    kn_conv2d c = conv_of(l);
    int64_t kd = c.c / c.group * c.kh * c.kw, ny = c.m * c.oh * c.ow;
    double flops = 2.0 * (double)ny * (double)kd;
    float *x = rand_floats(c.c * c.h * c.w, 1), *w = rand_floats(c.m * kd, 2);
    float *bias = rand_floats(c.m, 3), *y = rand_floats(ny, 4), *yref = rand_floats(ny, 5);
    job rj = {.c = c, .g = geom_of(&c), .x = x, .w = w, .bias = bias, .y = yref};
    double tref = no_ref ? 0 : time_it(run_ref, &rj, no_ref ? 1 : 2);
    if (no_ref) run_ref(&rj);
    int32_t tactics[2] = {c.group == c.c && c.m == c.c && c.group > 1 ? KN_TACTIC_conv_depthwise
                                                                      : KN_TACTIC_conv_gemm,
                          0};
    if (kn_f32_conv_winograd_fits(&c)) tactics[1] = KN_TACTIC_conv_winograd;
    for (int ti = 0; ti < 2; ti++) {
      int32_t t = tactics[ti];
      if (!t) continue;
      for (int threads = 1; threads <= 2; threads++) {
        if (only_threads && threads != only_threads) continue;
        for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
          if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa))
            continue;
          job j = {.tactic = t, .isa = (kn_isa)isa, .pool = threads == 2 ? pool2 : NULL,
                   .c = c, .x = x, .w = w, .bias = bias, .y = y};
          float *wp = NULL;
          size_t sbytes;
          if (t == KN_TACTIC_conv_gemm) {
            wp = aligned_alloc(64, kn_f32_conv_gemm_pack_size(j.isa, &c) * 4 + 64);
            kn_f32_conv_gemm_pack(j.isa, &c, w, wp);
            sbytes = kn_f32_conv_gemm_scratch(j.isa, &c, threads, NULL);
          } else if (t == KN_TACTIC_conv_winograd) {
            wp = aligned_alloc(64, kn_f32_conv_winograd_pack_size(j.isa, &c) * 4 + 64);
            kn_f32_conv_winograd_pack(j.isa, &c, (size_t)1 << 20, w, wp);
            sbytes = kn_f32_conv_winograd_scratch(j.isa, &c, threads);
          } else {
            sbytes = kn_f32_dwconv_scratch(j.isa, &c, threads, NULL);
          }
          j.wp = wp;
          j.scratch = aligned_alloc(64, (sbytes + 63) / 64 * 64 + 64);
          double t1 = time_it(run_fast, &j, reps);
          double md = 0;
          for (int64_t i = 0; i < ny; i++) {
            double d = fabs((double)y[i] - (double)yref[i]);
            md = d > md ? d : md;
          }
          printf("%-26s %-9s %-3d %-6s %8.1f %8.1f %6.1fx %9.2e\n", l->what,
                 kn_tactic_name(t) + 5, threads, kn_isa_name((kn_isa)isa), flops / t1 * 1e-9,
                 no_ref ? 0.0 : flops / tref * 1e-9, no_ref ? 0.0 : tref / t1, md);
          fflush(stdout);
          free(wp);
          free(j.scratch);
        }
      }
    }
    free(x);
    free(w);
    free(bias);
    free(y);
    free(yref);
  }
  kn_pool_free(pool2);
  return 0;
}
