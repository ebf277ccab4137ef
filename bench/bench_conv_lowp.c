/*
 * bench_conv_lowp: the reduced-precision channels-last convolution
 * (kn_conv_nhwc_lowp, conv_igemm_nhwc in bf16 or int8) next to the fp32 one
 * (kn_f32_conv_nhwc) on ResNet-50's layer shapes at 224x224, in GFLOP/s
 * (GOP/s for int8), with the epilogue the engine fuses there: bias and Relu,
 * plus the residual for the expanding 1x1 layers and the downsample.
 *
 *   bench_conv_lowp [--type bf16|int8] [--winograd] [--threads T] [--filter S]
 *                   [--reps N]
 *
 * --winograd: on the 3x3 stride-1 layers only, bf16 Winograd F(2,3)
 * (conv_winograd_f23_nhwc) against fp32 Winograd F(4,3) (conv_winograd_nhwc),
 * the two tactics a bf16 build chooses between there, in GFLOP/s counted as
 * direct FLOPs.
 *
 * One thread is timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID, the
 * median of `reps` samples of about 5 ms), two in wall time (the minimum);
 * the two kernels alternate sample by sample so that a busy neighbour
 * disturbs both alike.  maxdiff: the largest difference between the two
 * outputs relative to the largest fp32 output, so a fast wrong kernel shows.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchkit.h"
#include "core/cpu.h"
#include "kernels/conv/conv-lowp.h"
#include "kernels/conv/conv.h"
#include "kernels/hgemm/hgemm.h"
#include "kernels/kernels.h"

typedef struct layer {
  const char *what;
  int64_t c, h, m, k, s, pad;
  bool res;
} layer;

static const layer layers[] = {
    {"stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3, false},
    {"1x1 64->64 @56", 64, 56, 64, 1, 1, 0, false},
    {"1x1 64->256 @56 +res", 64, 56, 256, 1, 1, 0, true},
    {"1x1 256->64 @56", 256, 56, 64, 1, 1, 0, false},
    {"3x3 64 @56", 64, 56, 64, 3, 1, 1, false},
    {"1x1 256->128 @56", 256, 56, 128, 1, 1, 0, false},
    {"3x3 128 @28", 128, 28, 128, 3, 1, 1, false},
    {"3x3/2 128 @56", 128, 56, 128, 3, 2, 1, false},
    {"1x1/2 256->512 @56 +res", 256, 56, 512, 1, 2, 0, true},
    {"1x1 128->512 @28 +res", 128, 28, 512, 1, 1, 0, true},
    {"1x1 512->128 @28", 512, 28, 128, 1, 1, 0, false},
    {"3x3 256 @14", 256, 14, 256, 3, 1, 1, false},
    {"1x1 256->1024 @14 +res", 256, 14, 1024, 1, 1, 0, true},
    {"1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0, false},
    {"1x1/2 1024->2048 @14 +res", 1024, 14, 2048, 1, 2, 0, true},
    {"3x3/2 512 @14", 512, 14, 512, 3, 2, 1, false},
    {"3x3 512 @7", 512, 7, 512, 3, 1, 1, false},
    {"1x1 512->2048 @7 +res", 512, 7, 2048, 1, 1, 0, true},
    {"1x1 2048->512 @7", 2048, 7, 512, 1, 1, 0, false},
};

enum { K_F32, K_LOWP, K_F23, K_F32_F43 };

typedef struct job {
  int kind;
  kn_conv_lowp v;
  kn_isa isa;
  kn_pool *pool;
  kn_conv2d c;
  const float *x;
  const void *wp;
  kn_epilogue ep;
  float *y;
  void *scratch;
} job;

static void run(const void *arg) {
  const job *j = arg;
  switch (j->kind) {
  case K_LOWP:
    kn_conv_nhwc_lowp(&j->v, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y, j->scratch, NULL);
    break;
  case K_F23:
    kn_bf16_conv_winograd_nhwc(j->isa, j->v.bf16_dot, 2, j->pool, &j->c, j->x, NULL, j->wp,
                               &j->ep, j->y, j->scratch, NULL);
    break;
  case K_F32_F43:
    kn_f32_conv_winograd_nhwc(j->isa, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y,
                              j->scratch, NULL);
    break;
  default:
    kn_f32_conv_nhwc(j->isa, j->pool, &j->c, j->x, NULL, j->wp, &j->ep, j->y, j->scratch, NULL);
  }
}


static void *alloc64(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64 + 64); }

int main(int argc, char **argv) {
  int reps = 9, only_threads = 0;
  bool wino = false;
  const char *filter = NULL, *type = "bf16";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--type") && i + 1 < argc) type = argv[++i];
    else if (!strcmp(argv[i], "--winograd")) wino = true;
    else {
      fprintf(stderr, "usage: bench_conv_lowp [--type bf16|int8] [--winograd] [--threads T] "
                      "[--filter S] [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  bool int8 = !strcmp(type, "int8");
  if (!int8 && strcmp(type, "bf16")) {
    fprintf(stderr, "bench_conv_lowp: --type is bf16 or int8, not '%s'\n", type);
    return 2;
  }
  uint64_t feat = kn_cpu_features();
  kn_isa isa = kn_isa_detect(feat);
  kn_pool *pool2;
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  kn_conv_lowp v = {.type = int8 ? KN_CONV_LOWP_INT8 : KN_CONV_LOWP_BF16, .isa = isa,
                    .qimpl = kn_qgemm_impl_for(isa, feat),
                    .bf16_dot = kn_hgemm_bf16_dot(isa, feat),
                    .a_scale = 1.0f / 127.0f, .a_zero = 128};
  printf("%s on %s%s\n", type, kn_isa_name(isa),
         int8 ? "" : v.bf16_dot ? " (vdpbf16ps)" : " (bf16 rounded, fp32 products)");
  if (wino && int8) {
    fprintf(stderr, "bench_conv_lowp: --winograd times bf16 Winograd, not int8\n");
    return 2;
  }
  printf("%-28s %-3s %8s %8s %7s %9s %8s\n", "layer", "thr", wino ? "bf16F23" : type,
         wino ? "fp32F43" : "fp32", "ratio", "maxdiff", "us");
  double lsum = 0;
  int count = 0;
  for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
    const layer *l = &layers[li];
    if (filter && !strstr(l->what, filter)) continue;
    if (wino && !(l->k == 3 && l->s == 1)) continue;
    int64_t oh = (l->h + 2 * l->pad - l->k) / l->s + 1;
    kn_conv2d c = {.n = 1, .c = l->c, .h = l->h, .w = l->h, .m = l->m, .oh = oh, .ow = oh,
                   .group = 1, .kh = l->k, .kw = l->k, .sh = l->s, .sw = l->s, .dh = 1,
                   .dw = 1, .pt = l->pad, .pl = l->pad};
    int64_t hw = l->h * l->h, ohw = oh * oh, ny = l->m * ohw, kk = l->c * l->k * l->k;
    double flops = 2.0 * (double)ny * (double)kk;
    /* x in [0, 1) as after a Relu; w [m, c, kh, kw] and its tap-major copy */
    float *x = bk_rand_floats(l->c * hw, 1), *w = bk_rand_floats(l->m * kk, 2);
    for (int64_t i = 0; i < l->c * hw; i++) x[i] = 0.5f * (x[i] + 1.0f);
    float *wtm = alloc64((size_t)(l->m * kk) * 4), *wscale = alloc64((size_t)l->m * 4);
    int8_t *q = alloc64((size_t)(l->m * kk));
    for (int64_t o = 0; o < l->m; o++) {
      float amax = 0;
      for (int64_t ci = 0; ci < l->c; ci++)
        for (int64_t t = 0; t < l->k * l->k; t++) {
          float a = w[(o * l->c + ci) * l->k * l->k + t];
          wtm[o * kk + t * l->c + ci] = a;
          amax = fmaxf(amax, fabsf(a));
        }
      wscale[o] = amax / 127.0f;
      for (int64_t i = 0; i < kk; i++)
        q[o * kk + i] = (int8_t)lrintf(wtm[o * kk + i] / wscale[o]);
    }
    float *bias = bk_rand_floats(l->m, 3), *res = bk_rand_floats(ny, 7);
    float *y = bk_rand_floats(ny, 5), *yl = bk_rand_floats(ny, 6);
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      kn_epilogue ep = {.act = {.act = KN_ACT_RELU}, .bias = bias, .bias_per_row = false,
                        .res = l->res ? res : NULL, .ldr = l->m, .res_first = true};
      job jf = {.kind = wino ? K_F32_F43 : K_F32, .isa = isa,
                .pool = threads == 2 ? pool2 : NULL, .c = c, .x = x,
                .ep = ep, .y = y};
      job jl = jf;
      jl.kind = wino ? K_F23 : K_LOWP;
      jl.v = v;
      jl.y = yl;
      void *wf, *wl;
      if (wino) {
        float *temp = alloc64((size_t)(l->c * l->m) * 4);
        wf = alloc64(kn_f32_conv_winograd_nhwc_pack_size(isa, &c) * 4);
        wl = alloc64(kn_bf16_conv_winograd_nhwc_pack_size(isa, 2, &c));
        kn_f32_conv_winograd_nhwc_pack(isa, &c, w, wf);
        kn_bf16_conv_winograd_nhwc_pack(isa, 2, &c, w, temp, wl);
        free(temp);
        jf.scratch = alloc64(kn_f32_conv_winograd_nhwc_scratch(isa, &c, threads, NULL));
        jl.scratch = alloc64(kn_bf16_conv_winograd_nhwc_scratch(isa, v.bf16_dot, 2, &c, threads,
                                                                NULL));
      } else {
        wf = alloc64(kn_f32_conv_nhwc_pack_size(isa, &c) * 4);
        wl = alloc64(kn_conv_nhwc_lowp_pack_size(&v, &c));
        kn_f32_conv_nhwc_pack(isa, &c, w, wf);
        kn_conv_nhwc_lowp_pack(&v, &c, wtm, q, wscale, wl);
        jf.scratch = alloc64(kn_f32_conv_nhwc_scratch(isa, &c, threads, false, NULL));
        jl.scratch = alloc64(kn_conv_nhwc_lowp_scratch(&v, &c, threads, false, NULL));
      }
      jf.wp = wf;
      jl.wp = wl;
      const void *const pair[2] = {&jl, &jf};
      double t[2];
      bk_time_pair(run, pair, reps, threads == 1, t);
      double md = 0, ymax = 0;
      for (int64_t i = 0; i < ny; i++) {
        md = fmax(md, fabs((double)yl[i] - (double)y[i]));
        ymax = fmax(ymax, fabs((double)y[i]));
      }
      printf("%-28s %-3d %8.1f %8.1f %6.2fx %9.2e %8.1f\n", l->what, threads,
             flops / t[0] * 1e-9, flops / t[1] * 1e-9, t[1] / t[0], md / fmax(ymax, 1e-30),
             t[0] * 1e6);
      fflush(stdout);
      if (threads == 1) {
        lsum += log(t[1] / t[0]);
        count++;
      }
      free(wf);
      free(wl);
      free(jf.scratch);
      free(jl.scratch);
    }
    free(x);
    free(w);
    free(wtm);
    free(wscale);
    free(q);
    free(bias);
    free(res);
    free(y);
    free(yl);
  }
  if (count) printf("geomean speedup over fp32 (1 thread): %.2fx\n", exp(lsum / count));
  kn_pool_free(pool2);
  return 0;
}
