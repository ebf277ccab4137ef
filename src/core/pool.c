#define _GNU_SOURCE
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

/* Spin iterations (each a pause) before a worker sleeps: about 50-100 us,
 * longer than the gap between two steps, far shorter than a scheduler
 * quantum. */
#define KN_POOL_SPIN 20000

typedef struct worker {
  kn_pool *pool;
  pthread_t tid;
  int32_t index;
} worker;

struct kn_pool {
  int32_t threads;
  worker *workers; /* threads - 1 */
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_cond_t done_cv;
  /* the current loop; `gen` increments to publish one */
  atomic_uint_fast64_t gen;
  atomic_int pending; /* workers still in the current loop */
  atomic_int sleepers;
  atomic_bool stop;
  kn_pool_fn fn;
  void *arg;
  int64_t n;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  sched_yield();
#endif
}

static void run_share(kn_pool *p, int32_t t) {
  int64_t n = p->n, T = p->threads;
  int64_t lo = n * t / T, hi = n * (t + 1) / T;
  for (int64_t i = lo; i < hi; i++) p->fn(p->arg, i, t);
}

static void *worker_main(void *a) {
  worker *w = a;
  kn_pool *p = w->pool;
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
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
    run_share(p, w->index);
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

kn_status kn_pool_create(int32_t threads, kn_pool **out, kn_error *err) {
  *out = NULL;
  if (threads < 1 || threads > 1024)
    return kn_fail(err, KN_ERR_INVALID_ARG, "thread count %d: expected 1 to 1024", threads);
  kn_pool *p = kn_calloc(1, sizeof *p);
  if (!p) return kn_fail(err, KN_ERR_OOM, "out of memory creating a thread pool");
  p->threads = threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->pending, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->stop, false);
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
  free(p);
}

int32_t kn_pool_threads(const kn_pool *p) { return p ? p->threads : 1; }

void kn_pool_for(kn_pool *p, int64_t n, kn_pool_fn fn, void *arg) {
  if (n <= 0) return;
  if (!p || p->threads == 1 || n == 1) {
    for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
  atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with a worker's sleepers++ then gen check */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  run_share(p, 0);
  int spins = 0;
  while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
    if (++spins < KN_POOL_SPIN) {
      cpu_relax();
      continue;
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
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
