/*
 * bench_conv_nhwc: the channels-last convolution (kn_f32_conv_nhwc,
 * conv_igemm_nhwc) next to the NCHW conv_gemm tactic (kn_f32_conv_gemm) on
 * the same layer, in GFLOP/s, on ResNet-50 and MobileNetV2 /
 * EfficientNet-B0 pointwise shapes (224x224 inputs), with a bias and Relu
 * fused.
 *
 *   bench_conv_nhwc [--isa portable|avx2|avx512] [--threads T] [--filter S]
 *                   [--reps N]
 *
 * The machine is shared, so one thread is timed in thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), the median of `reps` samples of about 5 ms;
 * two threads in wall time, the minimum of as many samples.  The two
 * tactics alternate sample by sample so that a busy neighbour disturbs
 * both alike.  maxdiff: the largest difference between the two outputs
 * (the NHWC one transposed), so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchkit.h"
#include "core/cpu.h"
#include "kernels/conv/conv.h"

typedef struct layer {
  const char *what;
  int64_t c, h, m, k, s, pad;
} layer;

static const layer layers[] = {
    {"r50 stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3},
    {"r50 1x1 64->256 @56", 64, 56, 256, 1, 1, 0},
    {"r50 1x1 256->64 @56", 256, 56, 64, 1, 1, 0},
    {"r50 3x3 64->64 @56", 64, 56, 64, 3, 1, 1},
    {"r50 3x3 128 @28", 128, 28, 128, 3, 1, 1},
    {"r50 1x1/2 256->512 @56", 256, 56, 512, 1, 2, 0},
    {"r50 3x3 256 @14", 256, 14, 256, 3, 1, 1},
    {"r50 1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0},
    {"r50 3x3 512 @7", 512, 7, 512, 3, 1, 1},
    {"r50 1x1 512->2048 @7", 512, 7, 2048, 1, 1, 0},
    {"mv2 1x1 16->96 @112", 16, 112, 96, 1, 1, 0},
    {"mv2 1x1 24->144 @56", 24, 56, 144, 1, 1, 0},
    {"mv2 1x1 32->192 @28", 32, 28, 192, 1, 1, 0},
    {"mv2 1x1 96->576 @14", 96, 14, 576, 1, 1, 0},
    {"mv2 1x1 576->96 @14", 576, 14, 96, 1, 1, 0},
    {"mv2 1x1 160->960 @7", 160, 7, 960, 1, 1, 0},
    {"mv2 1x1 320->1280 @7", 320, 7, 1280, 1, 1, 0},
    {"sq stem 3x3/2 3->64 @224", 3, 224, 64, 3, 2, 0},
    {"mv2 stem 3x3/2 3->32 @224", 3, 224, 32, 3, 2, 1},
    {"sq classifier 1x1 512->1000 @13", 512, 13, 1000, 1, 1, 0},
    {"sq squeeze 1x1 128->16 @55", 128, 55, 16, 1, 1, 0},
    {"mv2 1x1 32->16 @112", 32, 112, 16, 1, 1, 0},
    {"tiny 3x3 3->16 @32", 3, 32, 16, 3, 1, 1},
    /* MnasNet 1.0: a 48-wide expansion at 112x112, 1152 <-> 192 at 7x7 */
    {"mnas 1x1 16->48 @112", 16, 112, 48, 1, 1, 0},
    {"mnas 1x1 192->1152 @7", 192, 7, 1152, 1, 1, 0},
    {"mnas 1x1 1152->192 @7", 1152, 7, 192, 1, 1, 0},
};

typedef struct job {
  bool nhwc;
  kn_isa isa;
  kn_pool *pool;
  kn_conv2d c;
  const float *x, *wp;
  kn_epilogue ep;
  float *y;
  void *scratch;
} job;

static void run(const void *arg) {
  const job *j = arg;
  if (j->nhwc)
    kn_f32_conv_nhwc(j->isa, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y, j->scratch,
                     NULL);
  else
    kn_f32_conv_gemm(j->isa, j->pool, &j->c, j->x, j->wp, &j->ep, j->y, j->scratch, NULL);
}


int main(int argc, char **argv) {
  int reps = 9, only_threads = 0, only_isa = -1;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_ISA_COUNT; j++)
        if (!strcmp(n, kn_isa_name((kn_isa)j))) only_isa = j;
    } else {
      fprintf(stderr, "usage: bench_conv_nhwc [--isa I] [--threads T] [--filter S] "
                      "[--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  uint64_t feat = kn_cpu_features();
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  printf("%-28s %-3s %-8s %8s %8s %7s %9s\n", "layer", "thr", "isa", "nhwc", "nchw", "ratio",
         "maxdiff");
  double lsum = 0;
  int count = 0;
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    if (filter && !strstr(l->what, filter)) continue;
    int64_t oh = (l->h + 2 * l->pad - l->k) / l->s + 1;
    kn_conv2d c = {.n = 1, .c = l->c, .h = l->h, .w = l->h, .m = l->m, .oh = oh, .ow = oh,
                   .group = 1, .kh = l->k, .kw = l->k, .sh = l->s, .sw = l->s, .dh = 1,
                   .dw = 1, .pt = l->pad, .pl = l->pad};
    int64_t hw = l->h * l->h, ohw = oh * oh, ny = l->m * ohw;
    double flops = 2.0 * (double)ny * (double)(l->c * l->k * l->k);
    float *x = bk_rand_floats(l->c * hw, 1);
    float *w = bk_rand_floats(l->m * l->c * l->k * l->k, 2);
    float *bias = bk_rand_floats(l->m, 3), *xh = bk_rand_floats(l->c * hw, 4);
    float *y = bk_rand_floats(ny, 5), *yh = bk_rand_floats(ny, 6);
    for (int64_t ch = 0; ch < l->c; ch++)
      for (int64_t i = 0; i < hw; i++) xh[i * l->c + ch] = x[ch * hw + i];
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--) {
        if (!kn_isa_available((kn_isa)isa, feat) || (only_isa >= 0 && isa != only_isa))
          continue;
        kn_epilogue ep = {.act = {.act = KN_ACT_RELU}, .bias = bias, .bias_per_row = true};
        job jn = {.nhwc = true, .isa = (kn_isa)isa, .pool = threads == 2 ? pool2 : NULL,
                  .c = c, .x = xh, .ep = ep, .y = yh};
        job jc = jn;
        jc.nhwc = false;
        jc.x = x;
        jc.y = y;
        float *wn = aligned_alloc(64, kn_f32_conv_nhwc_pack_size(jn.isa, &c) * 4 + 64);
        float *wc = aligned_alloc(64, kn_f32_conv_gemm_pack_size(jn.isa, &c) * 4 + 64);
        kn_f32_conv_nhwc_pack(jn.isa, &c, w, wn);
        kn_f32_conv_gemm_pack(jn.isa, &c, w, wc);
        jn.wp = wn;
        jc.wp = wc;
        size_t sn = kn_f32_conv_nhwc_scratch(jn.isa, &c, threads, false, NULL);
        size_t sc = kn_f32_conv_gemm_scratch(jn.isa, &c, threads, NULL);
        jn.scratch = aligned_alloc(64, (sn + 63) / 64 * 64 + 64);
        jc.scratch = aligned_alloc(64, (sc + 63) / 64 * 64 + 64);
        const void *const pair[2] = {&jn, &jc};
        double t[2];
        bk_time_pair(run, pair, reps, threads == 1, t);
        double md = 0;
        for (int64_t o = 0; o < l->m; o++)
          for (int64_t i = 0; i < ohw; i++) {
            double d = fabs((double)yh[i * l->m + o] - (double)y[o * ohw + i]);
            md = d > md ? d : md;
          }
        printf("%-28s %-3d %-8s %8.1f %8.1f %6.2fx %9.2e\n", l->what, threads,
               kn_isa_name((kn_isa)isa), flops / t[0] * 1e-9, flops / t[1] * 1e-9,
               t[1] / t[0], md);
        fflush(stdout);
        if (threads == 1 && isa == KN_ISA_COUNT - 1) {
          lsum += log(t[1] / t[0]);
          count++;
        }
        free(wn);
        free(wc);
        free(jn.scratch);
        free(jc.scratch);
      }
    }
    free(x);
    free(xh);
    free(w);
    free(bias);
    free(y);
    free(yh);
  }
  if (count) printf("geomean ratio (1 thread, best ISA): %.2fx\n", exp(lsum / count));
  kn_pool_free(pool2);
  return 0;
}
