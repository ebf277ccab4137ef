/*
 * bench_hgemm: GFLOP/s of the bf16 / fp16 GEMM family (kn_hgemm) next to
 * kn_sgemm (fp32) on the same shapes, same ISA and thread count, B
 * prepacked in both (a weight), each on its own blocking from the
 * machine's caches.  Variants:
 *
 *   bf16      A fp32 rounded to bf16 while packing, B bf16, C fp32
 *   bf16dot   the same on vdpbf16ps (only where the CPU has AVX512_BF16)
 *   f16w      weight-only fp16: A fp32, B fp16, C fp32
 *   f16io     fp16 activations too: A fp16, B fp16, C fp16
 *   s8w       weight-only int8: A fp32, B int8 + fp32 column scales, C fp32
 *             ("vs f16" there: its time ratio to f16w)
 *
 *   bench_hgemm [--reps N] [--isa portable|avx2|avx512] [--threads T]
 *               [--shape MxNxK] [--cpu] [--only VARIANT] [--blocking KC,MC,NC]
 *
 * --cpu times process CPU time (1 thread: leaves out the time others had
 * the core); --only runs one variant (and fp32 as the reference, "-" for
 * the rest); --blocking replaces the blocking from the caches.
 *
 * The GEMV and small-M shapes at the end have weights larger than the L3
 * (128 MiB in fp32), so every call streams B from DRAM: there the fp16
 * weights halve the bytes.  Each figure is the best of `reps` runs of
 * enough repetitions for about 50 ms (bench_gemm's method); "vs f32" is
 * the time ratio in the same run; "relerr" the largest |C - C_f32| over
 * the largest |C_f32|, so a fast wrong kernel shows (half types; "s8w
 * err" the same for int8, whose quantization error is larger).
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
#include "kernels/hgemm/hgemm.h"

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
    {128, 768, 768, "BERT-base QKV/out proj, seq 128"},
    {128, 3072, 768, "BERT-base FFN up"},
    {128, 768, 3072, "BERT-base FFN down"},
    {3136, 64, 576, "ResNet-50 conv2 3x3 (NHWC im2col)"},
    {3136, 256, 64, "ResNet-50 conv2 1x1 64->256"},
    {784, 512, 128, "ResNet-50 conv3 1x1 expand"},
    {49, 2048, 512, "ResNet-50 conv5 1x1 expand"},
    {1, 1000, 2048, "ResNet-50 FC, batch 1 (GEMV, B in L3)"},
    {1, 8192, 4096, "GEMV, 128 MiB fp32 weights (DRAM)"},
    {4, 8192, 4096, "M = 4, 128 MiB fp32 weights (DRAM)"},
    {16, 8192, 4096, "M = 16, 128 MiB fp32 weights (DRAM)"},
    {1, 768, 3072, "BERT-base FFN down, one token (GEMV)"},
    {1, 4096, 4096, "GEMV 4096^2, 64 MiB fp32 weights"},
    {8, 768, 768, "small M: BERT-base proj, 8 tokens"},
};

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

typedef struct run_ctx {
  kn_isa isa;
  kn_pool *pool;
  bool half;
  kn_sgemm_args sg;
  kn_hgemm_args hg;
  void *scratch;
} run_ctx;

static void run(void *arg) {
  run_ctx *r = arg;
  if (r->half) kn_hgemm(r->isa, r->pool, &r->hg, r->scratch);
  else kn_sgemm(r->isa, r->pool, &r->sg, r->scratch);
}

static float *rand_floats(int64_t n, uint32_t seed) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

enum { V_BF16, V_BF16DOT, V_F16W, V_F16IO, V_S8W, V_COUNT };
static const char *vname[V_COUNT] = {"bf16", "bf16dot", "f16w", "f16io", "s8w"};

int main(int argc, char **argv) {
  int reps = 5, only_threads = 1, only_isa = -1, only_v = -1;
  long long bkc = 0, bmc = 0, bnc = 0;
  shape one = {0, 0, 0, "command line"};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpu")) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    else if (!strcmp(argv[i], "--blocking") && i + 1 < argc) {
      if (sscanf(argv[++i], "%lld,%lld,%lld", &bkc, &bmc, &bnc) != 3) return 2;
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int v = 0; v < V_COUNT; v++)
        if (!strcmp(n, vname[v])) only_v = v;
    }
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_ISA_COUNT; j++)
        if (!strcmp(n, kn_isa_name((kn_isa)j))) only_isa = j;
    } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      long long m, n, k;
      if (sscanf(argv[++i], "%lldx%lldx%lld", &m, &n, &k) != 3) return 2;
      one.m = m, one.n = n, one.k = k;
    } else {
      fprintf(stderr, "usage: bench_hgemm [--reps N] [--isa I] [--threads T] [--shape MxNxK] "
                      "[--cpu] [--only VARIANT] [--blocking KC,MC,NC]\n");
      return 2;
    }
  }
  uint64_t feat = kn_cpu_features();
  kn_isa isa = kn_isa_detect(feat);
  if (only_isa >= 0) isa = (kn_isa)only_isa;
  if (!kn_isa_available(isa, feat)) {
    fprintf(stderr, "bench_hgemm: %s not available here\n", kn_isa_name(isa));
    return 2;
  }
  size_t l1, l2, l3;
  kn_machine os;
  kn_machine_from_os(&os);
  kn_machine_caches(&os, 1, &l1, &l2, &l3);
  bool dot = kn_hgemm_bf16_dot(isa, feat);
  printf("isa %s, %d thread(s); caches L1d %zu KiB, L2 %zu KiB, L3 %zu KiB; vdpbf16ps %s\n",
         kn_isa_name(isa), only_threads, l1 >> 10, l2 >> 10, l3 >> 10,
         dot ? "yes" : "no (not measured)");
  kn_pool *pool = NULL;
  kn_error err;
  if (only_threads > 1 && kn_pool_create(only_threads, &pool, &err)) return 1;
  const shape *list = shapes;
  size_t count = sizeof shapes / sizeof shapes[0];
  if (one.m) {
    list = &one;
    count = 1;
  }
  printf("%-15s %8s", "MxNxK", "f32");
  for (int v = 0; v < V_COUNT; v++) printf(" %8s %6s", vname[v], "vs f32");
  printf(" %6s", "vs f16");
  printf(" %8s %8s  %s\n", "relerr", "s8w err", "what  (GFLOP/s; time ratio)");
  for (size_t si = 0; si < count; si++) {
    const shape *s = &list[si];
    float *a = rand_floats(s->m * s->k, 1), *b = rand_floats(s->k * s->n, 2);
    float *c = rand_floats(s->m * s->n, 3), *cref = rand_floats(s->m * s->n, 4);
    uint16_t *ah = aligned_alloc(64, (size_t)(s->m * s->k * 2 + 64));
    uint16_t *ch = aligned_alloc(64, (size_t)(s->m * s->n * 2 + 64));
    for (int64_t i = 0; i < s->m * s->k; i++) ah[i] = kn_f32_to_f16(a[i]);
    double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    char dims[32];
    snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
             (long long)s->k);
    printf("%-15s", dims);
    fflush(stdout);

    /* fp32 */
    kn_sgemm_blocking sbl = kn_sgemm_blocking_for(isa, l1, l2, l3);
    float *bp = aligned_alloc(64, kn_sgemm_pack_b_size(isa, s->k, s->n) * 4 + 64);
    kn_sgemm_pack_b(isa, s->k, s->n, b, s->n, false, bp);
    run_ctx r;
    memset(&r, 0, sizeof r);
    r.isa = isa;
    r.pool = pool;
    r.sg = (kn_sgemm_args){.m = s->m, .n = s->n, .k = s->k, .alpha = 1.0f, .a = a,
                           .lda = s->k, .ldb = s->n, .b_packed = bp, .c = cref,
                           .ldc = s->n, .blocking = &sbl};
    size_t sz = kn_sgemm_scratch_size(isa, &r.sg, only_threads);
    r.scratch = aligned_alloc(64, (sz + 63) / 64 * 64 + 64);
    double tf = time_it(run, &r, reps);
    free(r.scratch);
    free(bp);
    printf(" %8.1f", flops / tf * 1e-9);
    fflush(stdout);
    double cmax = 0;
    for (int64_t i = 0; i < s->m * s->n; i++) cmax = fmax(cmax, fabs(cref[i]));

    double worst = 0, worst_s8 = 0, t_f16w = 0, t_s8w = 0;
    kn_sgemm_blocking hbl = kn_hgemm_blocking_for(isa, l1, l2, l3);
    if (bkc) hbl = (kn_sgemm_blocking){bkc, bmc, bnc};
    for (int v = 0; v < V_COUNT; v++) {
      if ((v == V_BF16DOT && !dot) || (only_v >= 0 && v != only_v)) {
        printf(" %8s %6s", "-", "-");
        continue;
      }
      kn_hgemm_type t = v <= V_BF16DOT ? KN_HGEMM_BF16
                        : v == V_S8W   ? KN_HGEMM_S8W
                                       : KN_HGEMM_F16;
      uint16_t *hp = aligned_alloc(64, kn_hgemm_pack_b_size(isa, t, s->k, s->n) * 2 + 64);
      kn_hgemm_pack_b(isa, t, s->k, s->n, b, s->n, false, hp);
      r.half = true;
      bool io = v == V_F16IO;
      r.hg = (kn_hgemm_args){.type = t, .bf16_dot = v == V_BF16DOT, .m = s->m, .n = s->n,
                             .k = s->k, .alpha = 1.0f, .a = io ? (const void *)ah : a,
                             .lda = s->k, .a_half = io, .b_packed = hp,
                             .c = io ? (void *)ch : c, .ldc = s->n, .c_half = io,
                             .blocking = &hbl};
      sz = kn_hgemm_scratch_size(isa, &r.hg, only_threads);
      r.scratch = aligned_alloc(64, (sz + 63) / 64 * 64 + 64);
      double th = time_it(run, &r, reps);
      free(r.scratch);
      free(hp);
      if (v == V_F16W) t_f16w = th;
      if (v == V_S8W) t_s8w = th;
      for (int64_t i = 0; i < s->m * s->n; i++) {
        float got = io ? kn_f16_to_f32(ch[i]) : c[i];
        double e = fabs(got - cref[i]) / (cmax > 0 ? cmax : 1);
        if (v == V_S8W) worst_s8 = fmax(worst_s8, e);
        else worst = fmax(worst, e);
      }
      printf(" %8.1f %5.2fx", flops / th * 1e-9, tf / th);
      fflush(stdout);
    }
    if (t_f16w > 0 && t_s8w > 0) printf(" %5.2fx", t_f16w / t_s8w);
    else printf(" %6s", "-");
    printf(" %8.1e %8.1e  %s\n", worst, worst_s8, s->what);
    free(a);
    free(b);
    free(c);
    free(cref);
    free(ah);
    free(ch);
  }
  kn_pool_free(pool);
  return 0;
}
