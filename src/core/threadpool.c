#define _GNU_SOURCE
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* Spin iterations (each a pause, tens of cycles) before a thread sleeps:
 * some tens of microseconds, longer than the gap between two steps, far
 * shorter than a scheduler quantum. */
#define KN_POOL_SPIN 4000

typedef struct worker {
  kn_pool *pool;
  pthread_t tid;
  int32_t index;
} worker;

/* Each loop's tasks [0, n) are cut into one contiguous range per thread,
 * thread t's range being [t n / T, (t + 1) n / T).  A thread runs its own
 * range first, then takes what is left of the others' (from their front),
 * so a thread the OS has not scheduled yet never holds up the others: the
 * caller only waits for tasks in progress.
 *
 * Why ranges rather than one shared counter: on these machines the two
 * cores may sit on different core complexes, and a cache line written by
 * one core is read by the other at a third of the local rate (measured
 * 27-35 GB/s against 75-110 GB/s).  Kernels order their tasks by output
 * position, so with ranges a thread computes the same part of each
 * activation as it did of the one before: the part it reads was written
 * by itself and is in its own caches.  A single counter hands tasks out
 * at random and makes half of every read remote.
 *
 * Each range's cursor carries the loop's generation in its high 32 bits,
 * so a thread still looking at an earlier loop can never claim from the
 * current one.  Which thread runs a task does not change its result
 * (threads differ only in their scratch), so results do not depend on who
 * claimed what. */
typedef struct range {
  _Alignas(64) atomic_uint_fast64_t next; /* gen << 32 | next task */
} range;

struct kn_pool {
  int32_t threads;
  worker *workers; /* threads - 1 */
  range *ranges;   /* threads */
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_cond_t done_cv;
  /* what a worker reads to start a loop, on lines of their own ... */
  char pad0[64];
  atomic_uint gen; /* the current loop */
  atomic_bool stop;
  _Atomic(kn_pool_fn) fn;
  _Atomic(void *) arg;
  atomic_int_fast64_t n;
  char pad1[64];
  /* ... apart from what they write at its end: each thread adds the count
   * of tasks it ran once, when it finds nothing left (one transfer of this
   * line per thread and loop, not one per task) */
  atomic_int_fast64_t done; /* tasks finished in the current loop */
  atomic_int sleepers;
  atomic_bool caller_sleeps;
  char pad2[64];
  uint32_t caller_gen; /* the caller's copy */
  _Atomic(kn_pool_span *) spans; /* profiling: kn_pool_set_spans */
  double min_ns;       /* kn_pool_worth's threshold */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  sched_yield();
#endif
}

#define LOW32 UINT64_C(0xffffffff)

static int64_t range_end(int64_t n, int32_t threads, int32_t r) {
  return n * (r + 1) / threads;
}

/* Claim and run the tasks of loop `gen` left in range r, counting them in
 * *ran.  Returns false when the loop is no longer `gen` (which cannot
 * happen while *ran > 0: the loop ends only when every task is counted). */
static bool drain(kn_pool *p, uint32_t gen, int32_t r, int32_t t, int64_t *ran) {
  atomic_uint_fast64_t *cur = &p->ranges[r].next;
  for (;;) {
    uint64_t c = atomic_load_explicit(cur, memory_order_acquire);
    if ((uint32_t)(c >> 32) != gen) return false;
    int64_t n = atomic_load_explicit(&p->n, memory_order_acquire);
    int64_t i = (int64_t)(c & LOW32);
    if (i >= range_end(n, p->threads, r)) return true;
    kn_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
    void *arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
    if (!atomic_compare_exchange_weak_explicit(cur, &c, c + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    /* a successful claim means loop `gen` is not finished, so fn, arg and
       n read above are its own */
    fn(arg, i, t);
    ++*ran;
  }
}

int64_t kn_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Widen span to [t0, now] (profiling). */
static void widen(kn_pool_span *span, int64_t t0) {
  int64_t t1 = kn_now_ns();
  if (t0 < span->start_ns) span->start_ns = t0;
  if (t1 > span->end_ns) span->end_ns = t1;
}

/* Thread t's share of loop `gen`: its own range, then the others'. */
static void run_loop(kn_pool *p, uint32_t gen, int32_t t) {
  int64_t ran = 0;
  kn_pool_span *spans = atomic_load_explicit(&p->spans, memory_order_relaxed);
  int64_t t0 = spans ? kn_now_ns() : 0;
  for (int32_t k = 0; k < p->threads; k++) {
    int32_t r = t + k < p->threads ? t + k : t + k - p->threads;
    if (!drain(p, gen, r, t, &ran)) return; /* ran is 0 then (see drain) */
  }
  if (ran == 0) return;
  if (spans) widen(&spans[t], t0); /* before the tasks are reported done */
  int64_t n = atomic_load_explicit(&p->n, memory_order_acquire); /* still this loop's */
  if (atomic_fetch_add(&p->done, ran) + ran == n && atomic_load(&p->caller_sleeps)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->mu);
  }
}

static void *worker_main(void *a) {
  worker *w = a;
  kn_pool *p = w->pool;
  uint32_t seen = 0;
  for (;;) {
    uint32_t g;
    int spins = 0;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->stop, memory_order_acquire)) {
      if (++spins < KN_POOL_SPIN) {
        cpu_relax();
        continue;
      }
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      spins = 0;
    }
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
    seen = g;
    run_loop(p, g, w->index);
  }
}

kn_status kn_pool_create(int32_t threads, kn_pool **out, kn_error *err) {
  *out = NULL;
  if (threads < 1 || threads > 1024)
    return kn_fail(err, KN_ERR_INVALID_ARG, "thread count %d: expected 1 to 1024", threads);
  kn_pool *p = kn_calloc(1, sizeof *p);
  if (!p) return kn_fail(err, KN_ERR_OOM, "out of memory creating a thread pool");
  p->threads = threads;
  p->min_ns = KN_POOL_MIN_NS;
  const char *mw = getenv("KILN_POOL_MIN_US"); /* the tests split every loop */
  if (mw && *mw) {
    char *end;
    double v = strtod(mw, &end);
    if (*end == '\0' && v >= 0 && v <= 1e6) p->min_ns = v * 1000.0;
  }
  p->ranges = aligned_alloc(64, (size_t)threads * sizeof *p->ranges); /* 64-byte multiple */
  if (!p->ranges) {
    free(p);
    return kn_fail(err, KN_ERR_OOM, "out of memory creating a thread pool");
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  for (int32_t i = 0; i < threads; i++) atomic_init(&p->ranges[i].next, 0);
  atomic_init(&p->gen, 0);
  atomic_init(&p->done, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->caller_sleeps, false);
  atomic_init(&p->stop, false);
  atomic_init(&p->fn, NULL);
  atomic_init(&p->arg, NULL);
  atomic_init(&p->n, 0);
  atomic_init(&p->spans, NULL);
  if (threads > 1) {
    p->workers = kn_calloc((size_t)threads - 1, sizeof *p->workers);
    if (!p->workers) {
      kn_pool_free(p);
      return kn_fail(err, KN_ERR_OOM, "out of memory creating a thread pool");
    }
    for (int32_t i = 0; i < threads - 1; i++) {
      p->workers[i].pool = p;
      p->workers[i].index = i + 1;
      if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i])) {
        p->threads = i + 1; /* the ones started, plus the caller */
        kn_pool_free(p);
        return kn_fail(err, KN_ERR_LIMIT, "cannot start worker thread %d of %d", i + 1,
                       threads);
      }
    }
  }
  *out = p;
  return KN_OK;
}

void kn_pool_free(kn_pool *p) {
  if (!p) return;
  if (p->workers) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i].tid, NULL);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done_cv);
  free(p->workers);
  free(p->ranges);
  free(p);
}

int32_t kn_pool_threads(const kn_pool *p) { return p ? p->threads : 1; }

void kn_pool_set_spans(kn_pool *p, kn_pool_span *spans) {
  if (p) atomic_store(&p->spans, spans);
}

void kn_pool_for(kn_pool *p, int64_t n, kn_pool_fn fn, void *arg) {
  if (n <= 0) return;
  if (!p || p->threads == 1 || n == 1) {
    for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
    return;
  }
  KN_ASSERT(n < (int64_t)INT32_MAX);
  uint32_t gen = ++p->caller_gen;
  if (gen == 0) gen = ++p->caller_gen; /* workers start having seen 0 */
  /* The cursors first: a thread still in the previous loop may hold a
   * cursor value it read there and, were n already the new one, find its
   * exhausted range open again; once every cursor carries the new
   * generation its claim fails.  n is stored with release (and loaded with
   * acquire) so that whoever sees the new n sees the new cursors. */
  for (int32_t r = 0; r < p->threads; r++)
    atomic_store_explicit(&p->ranges[r].next,
                          (uint64_t)gen << 32 | (uint64_t)(n * r / p->threads),
                          memory_order_release);
  atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  atomic_store_explicit(&p->n, n, memory_order_release);
  /* seq_cst: pairs with a worker's sleepers++ then gen check */
  atomic_store(&p->gen, gen);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  run_loop(p, gen, 0);
  int spins = 0;
  while (atomic_load_explicit(&p->done, memory_order_acquire) < n) {
    if (++spins < KN_POOL_SPIN) {
      cpu_relax();
      continue;
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_sleeps, true);
    while (atomic_load(&p->done) < n) pthread_cond_wait(&p->done_cv, &p->mu);
    atomic_store(&p->caller_sleeps, false);
    pthread_mutex_unlock(&p->mu);
  }
}

kn_pool *kn_pool_worth(kn_pool *p, double flops, double bytes) {
  if (!p) return NULL;
  double ns = flops / 100.0 + bytes / 20.0;
  return ns >= p->min_ns ? p : NULL;
}

int32_t kn_default_threads(void) {
  const char *e = getenv("KILN_NUM_THREADS");
  if (e && *e) {
    char *end;
    long v = strtol(e, &end, 10);
    if (*end == '\0' && v > 0 && v <= 1024) return (int32_t)v;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int32_t)n : 1;
}
