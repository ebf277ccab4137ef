/* The thread pool (src/core/threadpool.c): every task of a loop runs exactly
 * once, on a thread index in [0, threads), whatever the task count against
 * the thread count (fewer tasks than threads, uneven ranges, many tasks);
 * a thread that is held up has its range finished by the others; many
 * short loops back to back (each thread's range cursor is reset per loop,
 * so a stale thread must never claim from the next one); a pool of one
 * thread runs inline. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "core/threadpool.h"

typedef struct loop {
  int32_t threads;
  atomic_int *hits;      /* per task */
  atomic_int *by_thread; /* tasks run per thread */
  atomic_int bad_thread;
  int64_t slow_task; /* this task sleeps (-1: none) */
} loop;

static void task_fn(void *arg, int64_t task, int32_t thread) {
  loop *l = arg;
  if (thread < 0 || thread >= l->threads) atomic_fetch_add(&l->bad_thread, 1);
  else atomic_fetch_add(&l->by_thread[thread], 1);
  if (task == l->slow_task) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&l->hits[task], 1);
}

/* Runs one loop of n tasks and checks that each ran once. */
static void run_once(kn_pool *p, int32_t threads, int64_t n, int64_t slow, int32_t *busy) {
  loop l = {.threads = threads, .slow_task = slow};
  l.hits = calloc((size_t)(n > 0 ? n : 1), sizeof *l.hits);
  l.by_thread = calloc((size_t)threads, sizeof *l.by_thread);
  assert_non_null(l.hits);
  assert_non_null(l.by_thread);
  atomic_init(&l.bad_thread, 0);
  kn_pool_for(p, n, task_fn, &l);
  for (int64_t i = 0; i < n; i++)
    if (atomic_load(&l.hits[i]) != 1)
      fail_msg("%d threads, %lld tasks: task %lld ran %d times", threads, (long long)n,
               (long long)i, atomic_load(&l.hits[i]));
  assert_int_equal(atomic_load(&l.bad_thread), 0);
  if (busy) {
    *busy = 0;
    for (int32_t t = 0; t < threads; t++) *busy += atomic_load(&l.by_thread[t]) > 0;
  }
  free(l.hits);
  free(l.by_thread);
}

static void test_every_task_once(void **state) {
  (void)state;
  static const int32_t thread_counts[] = {1, 2, 3, 4, 7};
  static const int64_t task_counts[] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 64, 1000, 4099};
  for (size_t a = 0; a < sizeof thread_counts / sizeof thread_counts[0]; a++) {
    kn_pool *p = NULL;
    kn_error err;
    assert_int_equal(kn_pool_create(thread_counts[a], &p, &err), KN_OK);
    assert_int_equal(kn_pool_threads(p), thread_counts[a]);
    for (size_t b = 0; b < sizeof task_counts / sizeof task_counts[0]; b++)
      run_once(p, thread_counts[a], task_counts[b], -1, NULL);
    kn_pool_free(p);
  }
  run_once(NULL, 1, 17, -1, NULL); /* NULL means one thread, inline */
}

/* A task that sleeps (first or last of the loop) holds up only the thread
 * running it: the other finishes the rest of that thread's range, and
 * every task still runs once. */
static void test_held_up_thread(void **state) {
  (void)state;
  kn_pool *p = NULL;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &p, &err), KN_OK);
  for (int rep = 0; rep < 3; rep++) {
    int32_t busy = 0;
    run_once(p, 2, 40, 0, &busy);
    assert_true(busy >= 1);
    run_once(p, 2, 40, 39, &busy);
    assert_true(busy >= 1);
  }
  kn_pool_free(p);
}

/* Many tiny loops back to back, with the task count changing every time:
 * a worker still finishing loop g must never claim a task of loop g+1. */
static void test_many_short_loops(void **state) {
  (void)state;
  for (int32_t threads = 2; threads <= 4; threads++) {
    kn_pool *p = NULL;
    kn_error err;
    assert_int_equal(kn_pool_create(threads, &p, &err), KN_OK);
    for (int i = 0; i < 20000; i++) run_once(p, threads, 1 + i % 11, -1, NULL);
    kn_pool_free(p);
  }
}

/* Profiling spans: task 0 holds the caller until a worker has run task 1
 * (so both threads take part whatever the scheduler does); each thread's
 * span covers its own task and nothing is recorded once spans are unset. */
typedef struct span_job {
  atomic_int worker_ran;
  int64_t t0[2], t1[2];
  int32_t thread[2];
} span_job;

static void span_task(void *arg, int64_t i, int32_t thread) {
  span_job *j = arg;
  j->thread[i] = thread;
  j->t0[i] = kn_now_ns();
  if (i == 0)
    for (int64_t until = kn_now_ns() + 10000000000; !atomic_load(&j->worker_ran) && kn_now_ns() < until;) {
    }
  else if (thread != 0)
    atomic_store(&j->worker_ran, 1);
  j->t1[i] = kn_now_ns();
}

static void test_spans(void **state) {
  (void)state;
  kn_pool *p;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &p, &err), KN_OK);
  kn_pool_span spans[2] = {{INT64_MAX, 0}, {INT64_MAX, 0}};
  kn_pool_set_spans(p, spans);
  span_job j;
  memset(&j, 0, sizeof j);
  kn_pool_for(p, 2, span_task, &j);
  assert_int_equal(j.thread[0], 0);
  assert_int_equal(j.thread[1], 1);
  for (int t = 0; t < 2; t++) {
    assert_true(spans[t].start_ns <= j.t0[t]);
    assert_true(spans[t].end_ns >= j.t1[t]);
  }
  assert_true(spans[1].start_ns >= j.t0[0]); /* the worker started after the loop did */
  kn_pool_set_spans(p, NULL);
  kn_pool_span before = spans[1];
  memset(&j, 0, sizeof j);
  kn_pool_for(p, 2, span_task, &j);
  assert_memory_equal(&before, &spans[1], sizeof before);
  kn_pool_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_task_once),
      cmocka_unit_test(test_held_up_thread),
      cmocka_unit_test(test_many_short_loops),
      cmocka_unit_test(test_spans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
