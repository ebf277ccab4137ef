/*
 * bench_steps: per-step wall time of a built engine, from the public API
 * alone, until `kiln profile` (issue 8) replaces it.
 *
 *   bench_steps ENGINE [--threads T] [--runs N] [--top K] [--order]
 *
 * Inputs are synthetic: floats in [-0.5, 0.5), integers 1 (valid token
 * ids and masks for the exported BERTs).  Dynamic dimensions count as 1.
 * A step's time is the gap between the observer's call for its first
 * output and the previous step's (kn_context_set_observer), so it includes
 * the executor's hand-over and the observer's own cost (well under a
 * microsecond).  After 3 warm-up runs, N timed runs: per step the minimum
 * and the median, sorted by median (or in step order with --order), with
 * GFLOP/s from the step's FLOP count at the minimum.  Timings are printed,
 * never asserted.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

typedef struct timer {
  int32_t steps;
  const char **first_output; /* per step: the name its observer call carries */
  double *cur;               /* this run's gap per step, us */
  double last;               /* when the previous step ended */
  int32_t next;              /* steps run in order: where the search starts */
} timer;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void observe(const char *name, const kn_tensor *t, void *arg) {
  (void)t;
  timer *tm = arg;
  double x = now_us();
  /* a step's other outputs and skipped steps fall through to the next match */
  for (int32_t i = tm->next; i < tm->steps; i++)
    if (tm->first_output[i] && !strcmp(tm->first_output[i], name)) {
      tm->cur[i] = x - tm->last;
      tm->last = x;
      tm->next = i + 1;
      return;
    }
}

static int fail(const char *what, const kn_error *err) {
  fprintf(stderr, "bench_steps: %s: %s\n", what, err->msg);
  return 1;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int32_t threads = 1, runs = 100, top = 30;
  int order = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--order")) order = 1;
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else bad = 1;
  }
  if (bad || !path || threads < 1 || runs < 1) {
    fprintf(stderr, "usage: bench_steps ENGINE [--threads T] [--runs N] [--top K] [--order]\n");
    return 2;
  }
  kn_error err;
  kn_model *m;
  kn_context *ctx;
  if (kn_model_load(path, &m, &err)) return fail(path, &err);
  if (kn_context_create(m, &ctx, &err)) return fail("context", &err);
  if (kn_context_set_threads(ctx, threads, &err)) return fail("threads", &err);

  int32_t ni = kn_model_input_count(m);
  kn_tensor *in = calloc((size_t)ni, sizeof *in);
  if (!in) return 1;
  for (int32_t i = 0; i < ni; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) return 1;
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < vi.rank; d++) dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
    if (kn_tensor_alloc(&in[i], vi.dtype, vi.rank, dims, &err)) return fail(vi.name, &err);
    int64_t n = kn_tensor_numel(&in[i]);
    for (int64_t k = 0; k < n; k++) {
      if (vi.dtype == KN_DTYPE_F32) ((float *)in[i].data)[k] = (float)((k * 7919) % 1000) / 1000.0f - 0.5f;
      else if (vi.dtype == KN_DTYPE_I64) ((int64_t *)in[i].data)[k] = 1;
      else if (vi.dtype == KN_DTYPE_I32) ((int32_t *)in[i].data)[k] = 1;
    }
    if (kn_context_set_input(ctx, i, &in[i], &err)) return fail(vi.name, &err);
  }

  timer tm = {.steps = kn_model_step_count(m)};
  kn_step_info *info = calloc((size_t)tm.steps, sizeof *info);
  tm.first_output = calloc((size_t)tm.steps, sizeof *tm.first_output);
  tm.cur = calloc((size_t)tm.steps, sizeof *tm.cur);
  double *all = malloc((size_t)tm.steps * (size_t)runs * sizeof *all);
  double *total = malloc((size_t)runs * sizeof *total);
  if (!info || !tm.first_output || !tm.cur || !all || !total) return 1;
  for (int32_t i = 0; i < tm.steps; i++) {
    if (kn_model_step_info(m, i, &info[i])) return 1;
    tm.first_output[i] = info[i].n_outputs > 0 ? info[i].outputs[0].name : NULL;
  }
  kn_context_set_observer(ctx, observe, &tm);
  for (int32_t r = -3; r < runs; r++) {
    memset(tm.cur, 0, (size_t)tm.steps * sizeof *tm.cur);
    double t0 = now_us();
    tm.last = t0;
    tm.next = 0;
    if (kn_context_run(ctx, &err)) return fail("run", &err);
    if (r < 0) continue;
    total[r] = now_us() - t0;
    for (int32_t i = 0; i < tm.steps; i++) all[(size_t)i * (size_t)runs + (size_t)r] = tm.cur[i];
  }

  double *med = malloc((size_t)tm.steps * sizeof *med), *mn = malloc((size_t)tm.steps * sizeof *mn);
  int32_t *idx = malloc((size_t)tm.steps * sizeof *idx);
  if (!med || !mn || !idx) return 1;
  double sum_med = 0, sum_min = 0;
  for (int32_t i = 0; i < tm.steps; i++) {
    double *s = all + (size_t)i * (size_t)runs;
    qsort(s, (size_t)runs, sizeof *s, cmp_double);
    mn[i] = s[0];
    med[i] = s[runs / 2];
    sum_min += mn[i];
    sum_med += med[i];
    idx[i] = i;
  }
  qsort(total, (size_t)runs, sizeof *total, cmp_double);
  if (!order) /* by median, largest first (insertion sort: a few hundred steps) */
    for (int32_t i = 1; i < tm.steps; i++)
      for (int32_t j = i; j > 0 && med[idx[j]] > med[idx[j - 1]]; j--) {
        int32_t t = idx[j];
        idx[j] = idx[j - 1];
        idx[j - 1] = t;
      }
  printf("%s: %d threads, %d runs: run min %.1f us, median %.1f us; steps: sum of minima %.1f us, "
         "sum of medians %.1f us (%d steps)\n",
         path, threads, runs, total[0], total[runs / 2], sum_min, sum_med, tm.steps);
  printf("%5s %10s %10s %8s  %-20s %-24s %-18s %s\n", "step", "min us", "median us", "GFLOP/s",
         "op", "tactic", "output", "name");
  for (int32_t k = 0; k < tm.steps && k < top; k++) {
    int32_t i = idx[k];
    const kn_value_info *o = &info[i].outputs[0];
    char shape[96] = "";
    size_t used = 0;
    for (int32_t d = 0; info[i].n_outputs > 0 && d < o->rank && used < sizeof shape; d++)
      used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld", d ? "x" : "",
                               (long long)o->dims[d]);
    printf("%5d %10.1f %10.1f %8.1f  %-20s %-24s %-18s %s\n", i, mn[i], med[i],
           mn[i] > 0 ? info[i].flops / mn[i] * 1e-3 : 0.0, info[i].op, info[i].tactic, shape,
           info[i].name);
  }
  for (int32_t i = 0; i < ni; i++) kn_tensor_release(&in[i]);
  free(in), free(info), free(tm.first_output), free(tm.cur), free(all), free(total);
  free(med), free(mn), free(idx);
  kn_context_free(ctx);
  kn_model_free(m);
  return 0;
}
