/*
 * kiln probe: measure this machine (kn_machine in kiln.h).
 *
 * Method.  Every rate is the best of three timed runs of about 20 ms,
 * after a calibration run sizes the work.  A measurement on T threads
 * starts T threads pinned one per CPU of this process's affinity mask;
 * they meet at a barrier before each timed run, and the rate reported is
 * the sum of their rates in that run (each calibrated on its own, at the
 * same time as the others, so the runs overlap).
 *  - Peaks: register-only loops (src/kernels/probe) with 12 accumulators.
 *  - Bandwidth of a level: each thread streams its own buffer of half the
 *    level's capacity per thread (L1, L2 per core; L3 shared by the
 *    threads), or 4x the L3 for DRAM, after one warming pass.  Reads are
 *    full-width loads; writes ordinary stores, as the kernels do (a write
 *    that misses also reads the line, which is the cost kernels pay).
 *  - The L3's capacity: VMs report the host's socket (508 MiB seen for a
 *    32 MiB L3), so it is measured too: read bandwidth on one thread over
 *    buffers growing by 1.5x from 4x the L2 drops to DRAM's past the L3;
 *    the capacity is the largest size still above the geometric mean of
 *    the two rates.  The OS's figure stands when the two agree within 2x.
 */
#define _GNU_SOURCE
#include "core/cpu.h"
#include "core/machine.h"
#include "kernels/probe/probe.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>

#define TARGET_S 0.020
#define TRIES 3

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum job_kind { JOB_FMA, JOB_BF16, JOB_I8, JOB_MEM, JOB_COPY } job_kind;

typedef struct team team;
typedef struct worker {
  team *t;
  int32_t index;
  int32_t cpu;             /* CPU to pin to, or -1 */
  double rate[2][TRIES];   /* [0] compute or read, [1] write; per try */
  bool failed;             /* out of memory */
} worker;

struct team {
  kn_probe_ukernels uk;
  job_kind kind;
  size_t bytes; /* per thread (memory jobs) */
  int32_t n;
  pthread_barrier_t barrier;
  /* the gate: threads start work only once all n exist (go 1), or leave
   * (go -1) when one could not be started */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;
  worker *w;
};

static double run_compute(const team *t, int64_t iters, float *fs, int32_t *is) {
  switch (t->kind) {
  case JOB_FMA: return t->uk.fma_f32(iters, fs);
  case JOB_BF16: return t->uk.dot_bf16(iters, fs);
  default: return t->uk.dot_i8(iters, is);
  }
}

static void pin(int32_t cpu) {
#ifdef CPU_SET
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#else
  (void)cpu;
#endif
}

/* Every thread runs this; all reach the same barriers whatever fails. */
static void *work(void *arg) {
  worker *w = arg;
  team *t = w->t;
  pthread_mutex_lock(&t->mu);
  while (!t->go) pthread_cond_wait(&t->cv, &t->mu);
  int go = t->go;
  pthread_mutex_unlock(&t->mu);
  if (go < 0) return NULL;
  pin(w->cpu);
  volatile uint64_t keep = 0;
  float fs = 0;
  int32_t is = 0;
  if (t->kind == JOB_FMA || t->kind == JOB_BF16 || t->kind == JOB_I8) {
    pthread_barrier_wait(&t->barrier);
    int64_t iters = 1 << 14;
    for (;;) { /* calibrate: at least 2 ms */
      double t0 = now_s();
      run_compute(t, iters, &fs, &is);
      double dt = now_s() - t0;
      if (dt > 0.002 || iters > ((int64_t)1 << 40)) {
        iters = (int64_t)((double)iters * TARGET_S / (dt > 1e-9 ? dt : 1e-9)) + 1;
        break;
      }
      iters *= 4;
    }
    for (int k = 0; k < TRIES; k++) {
      pthread_barrier_wait(&t->barrier);
      double t0 = now_s();
      double ops = run_compute(t, iters, &fs, &is);
      w->rate[0][k] = ops / (now_s() - t0);
    }
    keep += (fs != 0) + (uint64_t)(uint32_t)is;
    return NULL;
  }
  char *buf = aligned_alloc(64, t->bytes);
  w->failed = buf == NULL;
  if (buf) memset(buf, 1, t->bytes); /* first touch: this thread's node */
  pthread_barrier_wait(&t->barrier);
  if (!buf) {
    for (int k = 0; k < (t->kind == JOB_COPY ? TRIES : 2 * TRIES); k++)
      pthread_barrier_wait(&t->barrier);
    return NULL;
  }
  if (t->kind == JOB_COPY) {
    size_t half = t->bytes / 2;
    memcpy(buf + half, buf, half);
    int64_t reps = 1;
    double t0 = now_s();
    memcpy(buf + half, buf, half);
    double dt = now_s() - t0;
    reps = (int64_t)(TARGET_S / (dt > 1e-9 ? dt : 1e-9)) + 1;
    for (int k = 0; k < TRIES; k++) {
      pthread_barrier_wait(&t->barrier);
      t0 = now_s();
      for (int64_t r = 0; r < reps; r++) {
        memcpy(buf + (r & 1 ? 0 : half), buf + (r & 1 ? half : 0), half);
        __asm__ volatile("" ::: "memory");
      }
      w->rate[0][k] = 2.0 * (double)half * (double)reps / (now_s() - t0);
    }
    free(buf);
    return NULL;
  }
  /* read, then write: calibrated once on reads (writes run at most a few
   * times slower, and the target is a floor, not a budget) */
  keep += t->uk.read(buf, t->bytes, 1);
  int64_t reps = 1;
  for (;;) {
    double t0 = now_s();
    keep += t->uk.read(buf, t->bytes, reps);
    double dt = now_s() - t0;
    if (dt > 0.002 || reps > ((int64_t)1 << 40)) {
      reps = (int64_t)((double)reps * TARGET_S / (dt > 1e-9 ? dt : 1e-9)) + 1;
      break;
    }
    reps *= 4;
  }
  for (int k = 0; k < TRIES; k++) {
    pthread_barrier_wait(&t->barrier);
    double t0 = now_s();
    keep += t->uk.read(buf, t->bytes, reps);
    w->rate[0][k] = (double)t->bytes * (double)reps / (now_s() - t0);
  }
  for (int k = 0; k < TRIES; k++) {
    pthread_barrier_wait(&t->barrier);
    double t0 = now_s();
    t->uk.write(buf, t->bytes, reps);
    w->rate[1][k] = (double)t->bytes * (double)reps / (now_s() - t0);
  }
  free(buf);
  (void)keep;
  return NULL;
}

typedef struct probe {
  kn_probe_ukernels uk;
  int32_t cpus[1024]; /* the CPUs of the affinity mask, in order */
  int32_t n_cpus;
  kn_error *err;
} probe;

/* Run a job on n threads; out[0] (and out[1] for memory jobs) get the best
 * try's total rate, in operations or bytes per second. */
static kn_status run_team(probe *p, job_kind kind, size_t bytes, int32_t n, double out[2]) {
  team t = {.uk = p->uk, .kind = kind, .bytes = bytes, .n = n};
  t.w = kn_calloc((size_t)n, sizeof *t.w);
  pthread_t *th = kn_calloc((size_t)n, sizeof *th);
  kn_status st = KN_OK;
  if (!t.w || !th) {
    free(t.w);
    free(th);
    return kn_fail(p->err, KN_ERR_OOM, "probe: out of memory");
  }
  pthread_barrier_init(&t.barrier, NULL, (unsigned)n);
  pthread_mutex_init(&t.mu, NULL);
  pthread_cond_init(&t.cv, NULL);
  int32_t started = 0;
  for (int32_t i = 0; i < n; i++) {
    t.w[i] = (worker){.t = &t, .index = i, .cpu = i < p->n_cpus ? p->cpus[i] : -1};
    if (pthread_create(&th[i], NULL, work, &t.w[i]) != 0) break;
    started++;
  }
  pthread_mutex_lock(&t.mu);
  t.go = started == n ? 1 : -1;
  pthread_cond_broadcast(&t.cv);
  pthread_mutex_unlock(&t.mu);
  for (int32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  if (started < n) st = kn_fail(p->err, KN_ERR_INTERNAL, "probe: cannot start %d threads", n);
  pthread_barrier_destroy(&t.barrier);
  pthread_mutex_destroy(&t.mu);
  pthread_cond_destroy(&t.cv);
  for (int32_t i = 0; i < n && !st; i++)
    if (t.w[i].failed)
      st = kn_fail(p->err, KN_ERR_OOM, "probe: out of memory for a %zu-byte buffer", bytes);
  for (int r = 0; r < 2; r++) {
    double best = 0;
    for (int k = 0; k < TRIES; k++) {
      double sum = 0;
      for (int32_t i = 0; i < n; i++) sum += t.w[i].rate[r][k];
      if (sum > best) best = sum;
    }
    out[r] = best;
  }
  free(t.w);
  free(th);
  return st;
}

/* Per-thread buffer for streaming level `i` with `threads` threads. */
static size_t level_buffer(const kn_machine *m, int32_t i, int32_t threads) {
  const kn_mem_level *l = &m->levels[i];
  uint64_t b;
  if (!strcmp(l->name, "DRAM")) {
    uint64_t l3 = m->levels[i - 1].bytes * 4;
    b = l3 > ((uint64_t)256 << 20) ? l3 : (uint64_t)256 << 20;
    if (b > ((uint64_t)1 << 30)) b = (uint64_t)1 << 30;
    if (b > l->bytes / 8) b = l->bytes / 8;
    b /= (uint64_t)threads;
  } else {
    int32_t sharing = threads < l->shared_by ? threads : l->shared_by;
    b = l->bytes / 2 / (uint64_t)(sharing > 0 ? sharing : 1);
    uint64_t floor = i > 0 ? m->levels[i - 1].bytes * 2 : 0; /* past the level inside */
    if (b < floor && floor < l->bytes / (uint64_t)(sharing > 0 ? sharing : 1)) b = floor;
  }
  b = b / KN_PROBE_CHUNK * KN_PROBE_CHUNK;
  return b < KN_PROBE_CHUNK ? KN_PROBE_CHUNK : (size_t)b;
}

/* The L3's capacity from one thread's read bandwidth over growing buffers.
 * A pass over S bytes that hits the L3 for a fraction h of them runs at
 * 1 / (h / B3 + (1 - h) / Bdram): each size's rate gives its h, and h * S
 * is how many bytes the L3 kept.  With LRU the knee is sharp (h = 1 up to
 * the capacity, then 0); the adaptive policies of recent CPUs keep part of
 * a larger stream (h about C / S), and the rate bends over several sizes.
 * Either way h * S rises to the capacity and stays there until h is too
 * small to measure.  This machine, on 4 runs: 100 GB/s to 13.5 MiB, 70 at
 * 20 MiB, 62 at 30, 50 at 68, 35 from 230 MiB; h * S levels at 29-33 MiB.
 * Bdram is measured first, far past any L3, because every h hangs on it;
 * the capacity is the median of the three largest h * S (one noisy rate
 * at a large size would otherwise double it). */
static kn_status measure_l3(probe *p, kn_machine *m, uint64_t os_l3) {
  uint64_t l2 = m->levels[1].bytes;
  uint64_t top = os_l3 > ((uint64_t)64 << 20) ? os_l3 : (uint64_t)64 << 20;
  if (top > ((uint64_t)256 << 20)) top = (uint64_t)256 << 20;
  if (top * 2 > m->levels[3].bytes / 8) top = m->levels[3].bytes / 16;
  double r[2], bw[32];
  uint64_t size[32];
  kn_status st = run_team(p, JOB_MEM, (size_t)(top * 2), 1, r);
  if (st) return st;
  double outer = r[0], inner = 0;
  int n = 0;
  for (double s = (double)l2 * 4; s <= (double)top && n < 32; s *= 1.5) {
    size[n] = (uint64_t)s / KN_PROBE_CHUNK * KN_PROBE_CHUNK;
    if ((st = run_team(p, JOB_MEM, (size_t)size[n], 1, r))) return st;
    bw[n] = r[0];
    inner = fmax(inner, bw[n]);
    n++;
    if (n >= 3 && bw[n - 1] < 1.1 * outer) break; /* DRAM's rate: past the L3 */
  }
  if (n < 3 || !(inner > outer * 1.3)) return KN_OK; /* no knee: keep what the OS says */
  double kept[32];
  int nk = 0;
  for (int i = 0; i < n; i++) {
    double h = (1 / bw[i] - 1 / outer) / (1 / inner - 1 / outer);
    if (h >= 0.15) kept[nk++] = fmin(h, 1) * (double)size[i];
  }
  for (int i = 1; i < nk; i++) /* insertion sort: a handful of values */
    for (int j = i; j > 0 && kept[j - 1] > kept[j]; j--) {
      double x = kept[j];
      kept[j] = kept[j - 1];
      kept[j - 1] = x;
    }
  double est = nk >= 3 ? kept[nk - 2] : nk ? kept[nk - 1] : 0;
  uint64_t cap = (uint64_t)est / 65536 * 65536;
  if (cap <= l2) return KN_OK;
  if (os_l3 && os_l3 <= cap * 2 && cap <= os_l3 * 2) cap = os_l3; /* the exact figure */
  m->levels[2].bytes = cap;
  return KN_OK;
}

kn_status kn_machine_probe(int32_t threads, kn_machine *out, kn_error *err) {
  double t0 = now_s();
  kn_machine m;
  kn_machine_from_os(&m);
  probe p = {.err = err};
  p.uk = kn_probe_ukernels_for(kn_isa_detect(m.features), m.features);
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && p.n_cpus < 1024; c++)
      if (CPU_ISSET(c, &set)) p.cpus[p.n_cpus++] = c;
#endif
  int32_t all = threads > 0 ? threads : kn_machine_cpus();
  if (all > 1024) all = 1024;
  int32_t counts[2] = {1, all};
  kn_status st = KN_OK;
  double r[2];
  for (int c = 0; c < 2 && !st; c++) {
    int32_t n = counts[c];
    if (!(st = run_team(&p, JOB_FMA, 0, n, r))) m.fp32_gflops[c] = r[0] * 1e-9;
    if (!st && p.uk.dot_bf16 && !(st = run_team(&p, JOB_BF16, 0, n, r)))
      m.bf16_gflops[c] = r[0] * 1e-9;
    if (!st && p.uk.dot_i8 && !(st = run_team(&p, JOB_I8, 0, n, r))) m.int8_gops[c] = r[0] * 1e-9;
  }
  if (!st) st = measure_l3(&p, &m, kn_machine_os_l3());
  for (int32_t i = 0; i < m.n_levels && !st; i++)
    for (int c = 0; c < 2 && !st; c++) {
      if (!(st = run_team(&p, JOB_MEM, level_buffer(&m, i, counts[c]), counts[c], r))) {
        m.levels[i].read_gbs[c] = r[0] * 1e-9;
        m.levels[i].write_gbs[c] = r[1] * 1e-9;
      }
      if (!st && i == m.n_levels - 1 &&
          !(st = run_team(&p, JOB_COPY, level_buffer(&m, i, counts[c]), counts[c], r)))
        m.dram_copy_gbs[c] = r[0] * 1e-9;
    }
  if (st) return st;
  if (all == 1) /* one thread is all there is: one set of numbers */
    for (int32_t i = 0; i < m.n_levels; i++) {
      m.levels[i].read_gbs[1] = m.levels[i].read_gbs[0];
      m.levels[i].write_gbs[1] = m.levels[i].write_gbs[0];
    }
  snprintf(m.source, sizeof m.source, "probe");
  m.probe_seconds = now_s() - t0;
  *out = m;
  return KN_OK;
}

/* mkdir -p of path's directory. */
static void make_parent(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return;
  *slash = 0;
  for (char *s = dir + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(dir, 0755);
      *s = '/';
    }
  mkdir(dir, 0755);
}

kn_status kn_machine_default(kn_machine *out, kn_error *err) {
  const char *env = getenv("KILN_MACHINE");
  if (env && *env) {
    if (!strcmp(env, "fallback")) {
      kn_machine_fallback(out);
      return KN_OK;
    }
    kn_status st = kn_machine_load(env, out, err);
    if (st) kn_error_prefix(err, "KILN_MACHINE");
    return st;
  }
  char path[4096];
  kn_machine_cache_path(path, sizeof path);
  if (path[0]) {
    kn_machine m;
    kn_error ignored;
    /* a cache for another CPU, one a crash cut short, or one holding
     * anything but a probe (a fallback written there) is probed again */
    if (kn_machine_load(path, &m, &ignored) == KN_OK && kn_machine_is_this_cpu(&m) &&
        !strcmp(m.source, "probe")) {
      *out = m;
      return KN_OK;
    }
  }
  const char *probe_env = getenv("KILN_PROBE");
  if (probe_env && !strcmp(probe_env, "0")) {
    kn_machine_fallback(out);
    return KN_OK;
  }
  kn_status st = kn_machine_probe(0, out, err);
  if (st) return st;
  if (path[0]) {
    kn_error ignored;
    make_parent(path);
    /* a read-only home only costs a probe next time */
    if (kn_machine_save(out, path, &ignored) != KN_OK) ignored.msg[0] = 0;
  }
  return KN_OK;
}
