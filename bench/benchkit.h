/*
 * What the kernel benchmarks share: clocks, the seeded fill, and the
 * interleaved timing of two candidates on one shape.
 */
#ifndef KN_BENCHKIT_H
#define KN_BENCHKIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double bk_clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bk_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* n floats in [-1, 1) from an LCG seeded with seed, 64-byte aligned. */
static inline float *bk_rand_floats(int64_t n, uint32_t seed) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64 + 64));
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

/* Seconds per call of run(a[0]) and run(a[1]), samples of about 5 ms
 * interleaved so that a busy neighbour disturbs both alike: cpu, the
 * median in this thread's CPU time (one thread); else the minimum in wall
 * time (a pool's threads). */
static inline void bk_time_pair(void (*run)(const void *), const void *const a[2], int reps,
                                bool cpu, double out[2]) {
  clockid_t id = cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  int inner[2];
  for (int t = 0; t < 2; t++) {
    run(a[t]);
    double t0 = bk_clock_s(id);
    int iters = 0;
    while (bk_clock_s(id) - t0 < 0.01) {
      run(a[t]);
      iters++;
    }
    inner[t] = (int)(0.005 / ((bk_clock_s(id) - t0) / iters)) + 1;
  }
  double *s = malloc((size_t)reps * 2 * sizeof *s);
  for (int r = 0; r < reps; r++)
    for (int t = 0; t < 2; t++) {
      double t0 = bk_clock_s(id);
      for (int i = 0; i < inner[t]; i++) run(a[t]);
      s[t * reps + r] = (bk_clock_s(id) - t0) / inner[t];
    }
  for (int t = 0; t < 2; t++) {
    qsort(s + t * reps, (size_t)reps, sizeof *s, bk_cmp_double);
    out[t] = cpu ? s[t * reps + reps / 2] : s[t * reps];
  }
  free(s);
}

#endif
