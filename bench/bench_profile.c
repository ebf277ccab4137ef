/* What profiling costs (kn_context_set_profiling, kiln profile): rounds of
 * runs alternate with profiling off and on, in one context, so both see the
 * same machine state; prints each mode's median and the difference.
 *   bench_profile MODEL|ENGINE [--threads N] [--rounds R] [--runs N]
 *                 [--shape NAME=DIMS]...
 * Dynamic dims not given by --shape are 1; inputs are zeros (the time of
 * the models here does not depend on the values). */
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  const char *path = NULL, *shapes[16];
  int n_shapes = 0, threads = 0, rounds = 10, runs = 10;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && n_shapes < 16) shapes[n_shapes++] = argv[++i];
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: bench_profile MODEL [--threads N] [--rounds R] [--runs N] "
                      "[--shape NAME=DIMS]...\n");
      return 2;
    }
  }
  if (!path || rounds < 1 || runs < 1) return fprintf(stderr, "bench_profile: MODEL is required\n"), 2;
  kn_error err;
  kn_model *m;
  if (kn_model_load(path, &m, &err)) return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
  if (kn_model_format_version(m) == 0) {
    kn_build_options o;
    kn_build_options_init(&o);
    o.shapes = shapes;
    o.n_shapes = n_shapes;
    if (kn_model_build(m, &o, &err)) return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
  }
  kn_context *c;
  if (kn_context_create(m, &c, &err) || (threads > 0 && kn_context_set_threads(c, threads, &err)))
    return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
  int32_t nin = kn_model_input_count(m);
  kn_tensor *in = calloc((size_t)nin + 1, sizeof *in);
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) return 1;
    int64_t dims[KN_MAX_RANK];
    int32_t rank = vi.rank < 0 ? 0 : vi.rank;
    for (int32_t d = 0; d < rank; d++) dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
    for (int k = 0; k < n_shapes; k++) {
      size_t nl = strlen(vi.name);
      if (strncmp(shapes[k], vi.name, nl) || shapes[k][nl] != '=') continue;
      rank = 0;
      for (char *p = (char *)shapes[k] + nl + 1; *p && rank < KN_MAX_RANK;) {
        dims[rank++] = strtoll(p, &p, 10);
        if (*p == 'x') p++;
      }
    }
    if (kn_tensor_alloc(&in[i], vi.dtype ? vi.dtype : KN_DTYPE_F32, rank, dims, &err) ||
        kn_context_set_input(c, i, &in[i], &err))
      return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
    memset(in[i].data, 0, in[i].nbytes);
  }
  for (int w = 0; w < 3; w++)
    if (kn_context_run(c, &err)) return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
  int n = rounds * runs;
  double *t[2] = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double))};
  int64_t spans = 0;
  for (int r = 0; r < rounds; r++)
    for (int on = 0; on < 2; on++) {
      if (kn_context_set_profiling(c, on, &err)) return 1;
      for (int k = 0; k < runs; k++) {
        double a = now_ms();
        if (kn_context_run(c, &err)) return fprintf(stderr, "bench_profile: %s\n", err.msg), 1;
        t[on][r * runs + k] = now_ms() - a;
        const kn_step_span *sp;
        spans += kn_context_spans(c, &sp);
      }
    }
  double off = median(t[0], n), onm = median(t[1], n);
  printf("%s: %d threads, %d rounds of %d runs each way, %d steps, %.1f spans a profiled run\n",
         path, kn_context_threads(c), rounds, runs, kn_model_step_count(m), (double)spans / n);
  printf("median latency: profiling off %.4f ms, on %.4f ms: %+.2f%%\n", off, onm,
         100.0 * (onm / off - 1.0));
  free(t[0]);
  free(t[1]);
  for (int32_t i = 0; i < nin; i++) kn_tensor_release(&in[i]);
  free(in);
  kn_context_free(c);
  kn_model_free(m);
  return 0;
}
