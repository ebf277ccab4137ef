/*
 * bench_qgemm: GOP/s of the int8 GEMM (kn_qgemm) on shapes from ResNet-50
 * (convolutions as GEMMs: M = output pixels, N = output channels, K = input
 * channels x kernel) and BERT-base (M = 128 tokens), next to the fp32
 * kn_sgemm on the same shapes in the same run, on 1 and 2 threads.
 *
 *   bench_qgemm [--reps N] [--impl portable|avx2|avx512vnni] [--threads T]
 *               [--shape MxNxK] [--cpu] [--no-fp32] [--blocking KC,MC,NC]
 *
 * --no-fp32 leaves kn_sgemm out (for profiling the int8 path alone);
 * --blocking replaces kn_qgemm_blocking_of's choice (results do not
 * depend on it).
 *
 * Weights are prepacked for both (B: s8 with per-channel scales for int8,
 * fp32 for kn_sgemm).  Two int8 rows per shape: A already u8 (the output
 * of a requantized int8 step), and A fp32 quantized while it is packed
 * (the first int8 step after an fp32 one).  Output fp32 in both.  An
 * operation is a multiply or an add (2 M N K per product, as FLOPs).
 * Each figure is the best of `reps` runs of about 50 ms.  "err" is the
 * largest |int8 - fp32| over the largest |fp32| output: the quantization
 * error, a check that the fast result is the right one.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "core/machine.h"
#include "kernels/gemm/gemm.h"
#include "kernels/qgemm/qgemm.h"

/* --cpu: process CPU time instead of wall time, leaving out the time
 * other processes had the core (1 thread only: with 2, spinning workers
 * count too). */
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
    {3136, 256, 64, "ResNet-50 conv2 1x1 64->256, 56x56"},
    {3136, 64, 576, "ResNet-50 conv2 3x3 64, 56x56"},
    {784, 128, 1152, "ResNet-50 conv3 3x3 128, 28x28"},
    {196, 256, 2304, "ResNet-50 conv4 3x3 256, 14x14"},
    {49, 512, 4608, "ResNet-50 conv5 3x3 512, 7x7"},
    {49, 2048, 512, "ResNet-50 conv5 1x1 512->2048, 7x7"},
    {1, 1000, 2048, "ResNet-50 FC, batch 1 (GEMV)"},
};

typedef struct qrun {
  kn_qgemm_impl impl;
  kn_pool *pool;
  kn_qgemm_args g;
  void *scratch;
} qrun;

typedef struct frun {
  kn_isa isa;
  kn_pool *pool;
  kn_sgemm_args g;
  void *scratch;
} frun;

static void run_q(void *arg) {
  qrun *r = arg;
  kn_qgemm(r->impl, r->pool, &r->g, r->scratch);
}

static void run_f(void *arg) {
  frun *r = arg;
  kn_sgemm(r->isa, r->pool, &r->g, r->scratch);
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

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!p) abort();
  return p;
}

static float urand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(int argc, char **argv) {
  int reps = 5, only_threads = 0, only_impl = -1;
  bool no_fp32 = false;
  long long bkc = 0, bmc = 0, bnc = 0;
  shape one = {0, 0, 0, "command line"};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpu")) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    else if (!strcmp(argv[i], "--no-fp32")) no_fp32 = true;
    else if (!strcmp(argv[i], "--blocking") && i + 1 < argc) {
      if (sscanf(argv[++i], "%lld,%lld,%lld", &bkc, &bmc, &bnc) != 3) return 2;
    }
    else if (!strcmp(argv[i], "--impl") && i + 1 < argc) {
      const char *n = argv[++i];
      for (int j = 0; j < KN_QGEMM_IMPL_COUNT; j++)
        if (!strcmp(n, kn_qgemm_impl_name((kn_qgemm_impl)j))) only_impl = j;
    } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      long long m, n, k;
      if (sscanf(argv[++i], "%lldx%lldx%lld", &m, &n, &k) != 3) return 2;
      one.m = m, one.n = n, one.k = k;
    } else {
      fprintf(stderr, "usage: bench_qgemm [--reps N] [--impl I] [--threads T] "
                      "[--shape MxNxK] [--cpu] [--no-fp32] [--blocking KC,MC,NC]\n");
      return 2;
    }
  }
  uint64_t feat = kn_cpu_features();
  kn_machine os;
  kn_machine_from_os(&os);
  kn_caches caches;
  kn_machine_caches(&os, 1, &caches.l1d, &caches.l2, &caches.l3);
  printf("caches: L1d %zu KiB, L2 %zu KiB, L3 %zu KiB\n", caches.l1d >> 10, caches.l2 >> 10,
         caches.l3 >> 10);
  kn_pool *pools[3] = {NULL, NULL, NULL};
  kn_error err;
  if (kn_pool_create(2, &pools[2], &err)) return 1;
  const shape *list = shapes;
  size_t count = sizeof shapes / sizeof shapes[0];
  if (one.m) list = &one, count = 1;
  printf("%-16s %-3s %-10s %9s %9s %9s %7s %7s %8s  %s\n", "MxNxK", "thr", "impl", "u8 GOP/s",
         "f32A GOP/s", "fp32", "u8/fp32", "f32A/fp", "err", "what");
  for (size_t si = 0; si < count; si++) {
    const shape *s = &list[si];
    const int64_t m = s->m, n = s->n, k = s->k;
    uint32_t seed = 1;
    float *a = xalloc((size_t)(m * k) * sizeof(float));
    float *b = xalloc((size_t)(k * n) * sizeof(float));
    float *c = xalloc((size_t)(m * n) * sizeof(float));
    float *cq = xalloc((size_t)(m * n) * sizeof(float));
    uint8_t *au = xalloc((size_t)(m * k));
    int8_t *bq = xalloc((size_t)(k * n));
    float *ws = xalloc((size_t)n * sizeof(float));
    /* activations after a Relu-like step in [0, 2), weights in [-1, 1) */
    for (int64_t i = 0; i < m * k; i++) a[i] = 1.0f + urand(&seed);
    for (int64_t i = 0; i < k * n; i++) b[i] = urand(&seed) / sqrtf((float)k);
    const float sa = 2.0f / 255.0f;
    const int32_t za = 0;
    for (int64_t j = 0; j < n; j++) {
      float mx = 0;
      for (int64_t p = 0; p < k; p++) mx = fmaxf(mx, fabsf(b[p * n + j]));
      ws[j] = mx > 0 ? mx / 127.0f : 1.0f;
      for (int64_t p = 0; p < k; p++) bq[p * n + j] = (int8_t)lrintf(b[p * n + j] / ws[j]);
    }
    double ops = 2.0 * (double)m * (double)n * (double)k;
    for (int threads = 1; threads <= 2; threads++) {
      if (only_threads && threads != only_threads) continue;
      for (int ii = KN_QGEMM_IMPL_COUNT - 1; ii >= 0; ii--) {
        kn_qgemm_impl impl = (kn_qgemm_impl)ii;
        if (!kn_qgemm_impl_available(impl, feat) || (only_impl >= 0 && ii != only_impl))
          continue;
        kn_isa isa = kn_qgemm_impl_isa(impl);
        kn_qgemm_blocking qb = kn_qgemm_blocking_of(impl, &caches);
        if (bkc) qb = (kn_qgemm_blocking){bkc, bmc, bnc};
        void *bp = xalloc(kn_qgemm_pack_b_size(impl, k, n));
        kn_qgemm_pack_b(impl, k, n, bq, n, false, ws, bp);
        kn_qgemm_quantize(impl, m, k, a, k, sa, za, au, k);
        qrun q = {impl, pools[threads],
                  {.m = m, .n = n, .k = k, .a = au, .lda = k, .a_scale = sa, .a_zero = za,
                   .b_packed = bp, .c = cq, .ldc = n, .blocking = &qb},
                  NULL};
        q.scratch = xalloc(kn_qgemm_scratch_size(impl, &q.g, threads));
        double tq = time_it(run_q, &q, reps);
        qrun qf = q;
        qf.g.a = NULL;
        qf.g.a_f32 = a;
        double tqf = time_it(run_q, &qf, reps);

        kn_sgemm_blocking fb = kn_sgemm_blocking_of(isa, &caches);
        float *fbp = xalloc(kn_sgemm_pack_b_size(isa, k, n) * sizeof(float));
        kn_sgemm_pack_b(isa, k, n, b, n, false, fbp);
        frun f = {isa, pools[threads],
                  {.m = m, .n = n, .k = k, .alpha = 1.0f, .a = a, .lda = k, .b_packed = fbp,
                   .c = c, .ldc = n, .blocking = &fb},
                  NULL};
        f.scratch = xalloc(kn_sgemm_scratch_size(isa, &f.g, threads));
        double tf = no_fp32 ? tq : time_it(run_f, &f, reps);
        if (no_fp32) kn_sgemm(isa, NULL, &f.g, f.scratch); /* for err */
        double md = 0, mx = 0;
        for (int64_t i = 0; i < m * n; i++) {
          md = fmax(md, fabs((double)cq[i] - (double)c[i]));
          mx = fmax(mx, fabs((double)c[i]));
        }
        char dims[32];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-16s %-3d %-10s %9.1f %9.1f %9.1f %6.2fx %6.2fx %8.1e  %s\n", dims, threads,
               kn_qgemm_impl_name(impl), ops / tq * 1e-9, ops / tqf * 1e-9, ops / tf * 1e-9,
               tf / tq, tf / tqf, md / (mx > 0 ? mx : 1), s->what);
        fflush(stdout);
        free(q.scratch);
        free(f.scratch);
        free(bp);
        free(fbp);
      }
    }
    free(a);
    free(b);
    free(c);
    free(cq);
    free(au);
    free(bq);
    free(ws);
  }
  kn_pool_free(pools[2]);
  return 0;
}
