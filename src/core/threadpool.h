/*
 * The thread pool: persistent workers that run parallel loops for one
 * context at a time.
 *
 * A pool of n threads has n - 1 workers; the calling thread is thread 0 and
 * takes its share of every loop, so a pool of 1 starts no thread at all.
 * Workers spin for a short while after a loop (a step follows the previous
 * one within microseconds) and then sleep on a condition variable, so an
 * idle pool costs no CPU.
 *
 * kn_pool_for(pool, n, fn, arg) calls fn(arg, i, thread) once for every
 * task i in [0, n).  Thread t owns the t-th of `threads` contiguous
 * ranges of tasks and runs it first, then helps with what is left of the
 * others' ranges, so a thread the OS has not scheduled yet never holds up
 * the others: the caller only waits for tasks in progress.  Kernels number
 * their tasks by output position, so a thread tends to compute the same
 * part of every activation and reads what it wrote itself (pool.c says
 * why that matters).  Which thread runs a task can still vary from run to
 * run, so a task must not depend on it except for scratch: a kernel that
 * writes disjoint outputs per task, in a fixed order within the task, and
 * keeps per-thread scratch (indexed by `thread`, valid for that one task)
 * gives bit-identical results for a given thread count.  The call returns
 * when every task is done.  Loops do not nest: fn must not call
 * kn_pool_for on the same pool (it may on NULL, which runs inline).
 *
 * A NULL pool is valid everywhere and means one thread.
 */
#ifndef KN_POOL_H
#define KN_POOL_H

#include "core.h"

#include <stdint.h>

typedef struct kn_pool kn_pool;

typedef void (*kn_pool_fn)(void *arg, int64_t task, int32_t thread);

/* A pool of `threads` threads (>= 1; the caller counts as one). */
kn_status kn_pool_create(int32_t threads, kn_pool **out, kn_error *err) KN_WUR;
void kn_pool_free(kn_pool *p);
/* Thread count (1 for NULL). */
int32_t kn_pool_threads(const kn_pool *p);
/* Run fn over tasks [0, n) on every thread (inline when n <= 1 or the pool
 * has one thread). */
void kn_pool_for(kn_pool *p, int64_t n, kn_pool_fn fn, void *arg);

/* Profiling (kn_context_set_profiling): while `spans` is set (one per
 * thread, owned by the caller), each thread that runs a task of a loop
 * widens spans[thread] to cover its tasks: start_ns lowered to when it
 * began its first, end_ns raised to when it finished its last
 * (CLOCK_MONOTONIC).  The caller resets them between steps and reads them
 * after kn_pool_for returns (a worker writes its span before it reports its
 * tasks done).  NULL (the default) records nothing and costs one load per
 * loop and thread. */
typedef struct kn_pool_span {
  int64_t start_ns, end_ns;
} kn_pool_span;
void kn_pool_set_spans(kn_pool *p, kn_pool_span *spans);
int64_t kn_now_ns(void); /* CLOCK_MONOTONIC in nanoseconds */

/* p, or NULL (run on the caller alone) when a loop's work, about `flops`
 * floating-point operations and `bytes` bytes moved, is too small to pay
 * for handing it over: a loop on 2 threads costs 1-2 us of hand-over here
 * (cache lines crossing between the cores), more when a worker has gone to
 * sleep, so loops estimated under 8 us (at 100 GFLOP/s and 20 GB/s) stay
 * on one thread.  The tasks are the same either way, so are the results.
 * KILN_POOL_MIN_US, read when a pool is created, sets the 8 (the unit
 * tests set 0 so that every loop of their small shapes runs threaded). */
kn_pool *kn_pool_worth(kn_pool *p, double flops, double bytes);
/* kn_pool_worth's rule without a pool, at the default threshold: whether a
 * loop of this work is split over the threads (for the IO model). */
#define KN_POOL_MIN_NS 8000.0
static inline bool kn_pool_would_split(double flops, double bytes) {
  return flops / 100.0 + bytes / 20.0 >= KN_POOL_MIN_NS;
}

/* Threads to use when nothing says otherwise: KILN_NUM_THREADS when it is a
 * positive integer, else the number of CPUs this process may run on. */
int32_t kn_default_threads(void);

#endif
