/* libkiln-trace: records function entries and exits (-finstrument-functions
 * hooks) and KN_TRACE_SCOPE spans per thread, and writes them as Chrome
 * Trace Event JSON.  include/kiln_trace.h states the contract, docs/TRACE.md
 * the file format.
 *
 * Recording (the hot path) takes no lock and makes no system call other than
 * clock_gettime (vDSO).  Each thread owns a kt_thread, allocated at its first
 * recorded event and pushed once onto a lock-free list (compare-and-swap on
 * its head); the thread-local pointer to it is initial-exec TLS, one load.
 * A thread keeps its open calls on a small stack and appends each finished
 * call to its own log: a chain of fixed-size chunks, single producer (the
 * thread), single consumer (the writer, under the flush lock).  The producer
 * publishes an event with a release store of the chunk's count and links a
 * new chunk with a release store of `next` once the old one is full and will
 * not be written again; the consumer frees a chunk only when it has read all
 * of it and seen `next` set.  Unlike a fixed ring, nothing is overwritten or
 * lost between flushes; memory is bounded by KN_TRACE_MAX_EVENTS instead,
 * which threads take from a shared budget 64 events at a time (one atomic
 * operation per 64 events).
 *
 * Process-wide state: this agent exists once per process by nature (the
 * hooks have fixed names and no argument to carry a handle), so all of its
 * state lives in the one struct `g` below, plus the thread-local pointer
 * `kt_self`; nothing else is mutable.
 *
 * Signals (KN_TRACE_SIGNAL): the handler only calls sem_post, which is
 * async-signal-safe; a flusher thread started at init waits on the
 * semaphore and writes the trace from ordinary thread context, taking the
 * flush lock.  The handler itself never touches the buffers, the heap or
 * stdio.  A hook running on a thread that is interrupted by a signal whose
 * handler is instrumented sees the thread's `busy` flag and records nothing
 * for the handler's calls. */
#define _GNU_SOURCE
#include "kiln_trace.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum {
  KT_CHUNK = 4096,   /* events per chunk (96 KiB) */
  KT_STACK = 256,    /* open calls kept per thread; deeper ones are counted, not timed */
  KT_RESERVE = 64,   /* events taken from the shared budget at a time */
  KT_NAME = 64,      /* thread name bytes kept */
  KT_FLAG_SCOPE = 1, /* a kn_trace_begin span, id is its name */
};
#define KT_NOT_KEPT UINT64_MAX         /* frame open but not recorded (sampled out, tracing off) */
#define KT_DUR_SCOPE (UINT64_C(1) << 63) /* in kt_event.dur: the id is a span name */
#define KT_DEFAULT_MAX_EVENTS 1000000

typedef struct kt_event {
  const void *id; /* function address, or span name with KT_DUR_SCOPE */
  uint64_t ts;    /* ns since the trace's start */
  uint64_t dur;   /* ns, | KT_DUR_SCOPE */
} kt_event;

typedef struct kt_chunk {
  _Atomic(struct kt_chunk *) next;
  _Atomic uint32_t count;
  kt_event ev[KT_CHUNK];
} kt_chunk;

typedef struct kt_frame {
  const void *id;
  uint64_t t0; /* ns since start, or KT_NOT_KEPT */
  uint32_t flags;
} kt_frame;

typedef struct kt_thread {
  struct kt_thread *next; /* list link, set before the thread is published */
  int32_t tid;
  /* owner only */
  volatile int busy; /* inside a hook: a signal handler's calls are skipped */
  kt_chunk *cur;
  uint32_t cur_n;
  uint32_t allow;      /* budget reserved and not used yet */
  uint32_t sample_left;
  uint32_t depth, overflow;
  kt_frame stack[KT_STACK];
  /* owner writes (relaxed, single writer), writer reads */
  _Atomic uint64_t dropped, short_calls, sampled_out;
  /* writer only (under g.lock) */
  kt_chunk *read;
  uint32_t read_n;
  /* under g.lock */
  char name[KT_NAME];
  int name_explicit, exited;
} kt_thread;

static struct kt_state {
  /* read on every event */
  _Atomic int enabled;
  uint32_t sample;
  int tsc;            /* ticks are TSC cycles, else CLOCK_MONOTONIC ns */
  uint64_t min_ticks; /* KN_TRACE_MIN_US in ticks */
  uint64_t t0_ticks;  /* ts 0 */
  /* written by threads registering or reserving budget */
  _Alignas(64) _Atomic(kt_thread *) threads;
  _Atomic int64_t budget;
  _Atomic int ever_enabled, finished;
  /* set once at init */
  int ready; /* the key exists: threads may register */
  uint64_t mono0_ns; /* CLOCK_MONOTONIC at ts 0 */
  uint64_t min_ns;
  int64_t wall_us; /* CLOCK_REALTIME at ts 0, Unix epoch microseconds */
  uint64_t max_events;
  int pid, signo;
  char path[4096], host[256], process[256];
  pthread_key_t key;
  sem_t sem;
  /* the writer, under lock */
  pthread_mutex_t lock;
  int fd, failed, oom, seekable;
  off_t tail_off;   /* where the metadata and closing text start */
  uint64_t written; /* X events in the file */
  kt_symcache syms;
  double ns_per_tick; /* TSC: from start to the latest flush */
  char *buf;
  size_t buf_n, buf_cap;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .sample = 1};

static __thread kt_thread *kt_self __attribute__((tls_model("initial-exec")));

KT_FN static inline uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The recording clock.  When the kernel itself keeps time with the TSC
 * (clocksource "tsc": invariant and synchronised across CPUs, which the
 * kernel checked), rdtsc costs a few ns where clock_gettime costs 20-40;
 * the ticks are converted to CLOCK_MONOTONIC ns when written, from the
 * two clocks read together at start and at each flush. */
KT_FN static inline uint64_t rdtsc(void) {
#if defined(__x86_64__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
#else
  return 0;
#endif
}

KT_FN static inline uint64_t now_ticks(void) {
  return (g.tsc ? rdtsc() : now_ns()) - g.t0_ticks;
}

/* The TSC and CLOCK_MONOTONIC read together (the TSC between two
 * clock_gettime, whose mean is taken). */
KT_FN static void clock_pair(uint64_t *tsc, uint64_t *mono) {
  uint64_t a = now_ns();
  *tsc = rdtsc();
  *mono = a + (now_ns() - a) / 2;
}

KT_FN static int kernel_uses_tsc(void) {
#if defined(__x86_64__)
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char b[16] = "";
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  return n >= 3 && !strncmp(b, "tsc", 3) && (n == 3 || b[3] == '\n');
#else
  return 0;
#endif
}

/* ticks (a ts or dur) to ns */
KT_FN static inline uint64_t to_ns(uint64_t ticks) {
  return g.tsc ? (uint64_t)((double)ticks * g.ns_per_tick + 0.5) : ticks;
}

KT_FN static void thread_exited(void *arg) {
  kt_thread *t = arg;
  pthread_mutex_lock(&g.lock);
  if (!t->name_explicit) prctl(PR_GET_NAME, t->name, 0, 0, 0);
  t->exited = 1;
  pthread_mutex_unlock(&g.lock);
}

/* Chunks are mapped with MAP_POPULATE: their pages are faulted in by one
 * system call, not by 24 page faults on the recording path (each one a
 * chance for the scheduler to preempt a busy thread). */
KT_FN static kt_chunk *chunk_new(void) {
  void *p = mmap(NULL, sizeof(kt_chunk), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? NULL : p; /* zeroed */
}

KT_FN static void chunk_free(kt_chunk *c) {
  if (c) munmap(c, sizeof *c);
}

/* The calling thread's first event: its kt_thread, published on g.threads. */
KT_FN static kt_thread *thread_register(void) {
  if (!g.ready || atomic_load_explicit(&g.finished, memory_order_acquire)) return NULL;
  kt_thread *t = calloc(1, sizeof *t);
  kt_chunk *c = chunk_new();
  if (!t || !c) {
    free(t);
    chunk_free(c);
    return NULL;
  }
  t->tid = (int32_t)syscall(SYS_gettid);
  t->cur = t->read = c;
  t->sample_left = 1;
  char name[17] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  memcpy(t->name, name, sizeof name);
  kt_thread *head = atomic_load_explicit(&g.threads, memory_order_relaxed);
  do t->next = head;
  while (!atomic_compare_exchange_weak_explicit(&g.threads, &head, t, memory_order_release,
                                                memory_order_relaxed));
  pthread_setspecific(g.key, t); /* thread_exited keeps its name */
  kt_self = t;
  return t;
}

KT_FN static inline void count(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

KT_FN static inline void push(const void *id, uint32_t flags) {
  kt_thread *t = kt_self;
  int on = atomic_load_explicit(&g.enabled, memory_order_relaxed);
  if (!on && (!t || !t->depth)) return;
  if (!t && !(t = thread_register())) return;
  if (t->busy) return;
  t->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (t->depth == KT_STACK) {
    t->overflow++;
  } else {
    kt_frame *f = &t->stack[t->depth++];
    f->id = id;
    f->flags = flags;
    f->t0 = KT_NOT_KEPT;
    if (on) {
      if (--t->sample_left == 0) {
        t->sample_left = g.sample;
        f->t0 = now_ticks();
      } else {
        count(&t->sampled_out);
      }
    }
  }
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
}

/* Takes up to KT_RESERVE events from the shared budget; 0 when spent. */
KT_FN static uint32_t reserve(void) {
  int64_t have = atomic_load_explicit(&g.budget, memory_order_relaxed);
  for (;;) {
    if (have <= 0) return 0;
    int64_t take = have < KT_RESERVE ? have : KT_RESERVE;
    if (atomic_compare_exchange_weak_explicit(&g.budget, &have, have - take,
                                              memory_order_relaxed, memory_order_relaxed))
      return (uint32_t)take;
  }
}

KT_FN static void append(kt_thread *t, const void *id, uint64_t ts, uint64_t dur) {
  if (!t->allow && !(t->allow = reserve())) {
    count(&t->dropped);
    return;
  }
  kt_chunk *c = t->cur;
  if (t->cur_n == KT_CHUNK) {
    kt_chunk *n = chunk_new();
    if (!n) {
      count(&t->dropped);
      return;
    }
    atomic_store_explicit(&c->next, n, memory_order_release);
    t->cur = c = n;
    t->cur_n = 0;
  }
  t->allow--;
  c->ev[t->cur_n] = (kt_event){id, ts, dur};
  atomic_store_explicit(&c->count, ++t->cur_n, memory_order_release);
}

/* The frame a function exit (flags 0) or kn_trace_end (KT_FLAG_SCOPE)
 * closes: the top one normally; after a longjmp or a missing end, the
 * innermost matching one, dropping those above it; -1 when none matches
 * (the call was entered before this thread recorded anything). */
KT_FN static inline int32_t match(const kt_thread *t, const void *id, uint32_t flags) {
  for (int32_t i = (int32_t)t->depth - 1; i >= 0; i--) {
    const kt_frame *f = &t->stack[i];
    if (flags & KT_FLAG_SCOPE ? (f->flags & KT_FLAG_SCOPE) != 0
                              : !(f->flags & KT_FLAG_SCOPE) && f->id == id)
      return i;
  }
  return -1;
}

KT_FN static inline void pop(const void *id, uint32_t flags) {
  kt_thread *t = kt_self;
  if (!t || t->busy) return;
  t->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (t->overflow) {
    t->overflow--;
  } else if (t->depth) {
    const kt_frame *top = &t->stack[t->depth - 1];
    int32_t i = (int32_t)t->depth - 1;
    if ((top->flags & KT_FLAG_SCOPE) != (flags & KT_FLAG_SCOPE) ||
        (!(flags & KT_FLAG_SCOPE) && top->id != id))
      i = match(t, id, flags);
    if (i >= 0) {
      t->depth = (uint32_t)i;
      const kt_frame *f = &t->stack[i];
      if (f->t0 != KT_NOT_KEPT && atomic_load_explicit(&g.enabled, memory_order_relaxed)) {
        uint64_t dur = now_ticks() - f->t0;
        if (dur < g.min_ticks)
          count(&t->short_calls);
        else
          append(t, f->id, f->t0, dur | (f->flags & KT_FLAG_SCOPE ? KT_DUR_SCOPE : 0));
      }
    }
  }
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
}

KT_FN void __cyg_profile_func_enter(void *fn, void *site);
KT_FN void __cyg_profile_func_exit(void *fn, void *site);

void __cyg_profile_func_enter(void *fn, void *site) { push(fn, 0); }
void __cyg_profile_func_exit(void *fn, void *site) { pop(fn, 0); }

int kn_trace_begin(const char *name) {
  push(name ? name : "(null)", KT_FLAG_SCOPE);
  return 0;
}

void kn_trace_end(void) { pop(NULL, KT_FLAG_SCOPE); }

void kn_trace_scope_end_(int *token) { kn_trace_end(); }

int kn_trace_enable(int on) {
  if (on && atomic_load(&g.finished)) return 0;
  if (on) atomic_store(&g.ever_enabled, 1);
  return atomic_exchange(&g.enabled, on ? 1 : 0);
}

int kn_trace_enabled(void) { return atomic_load(&g.enabled); }

void kn_trace_thread_name(const char *name) {
  kt_thread *t = kt_self;
  if (!t && !(t = thread_register())) return;
  pthread_mutex_lock(&g.lock);
  snprintf(t->name, sizeof t->name, "%s", name ? name : "");
  t->name_explicit = 1;
  pthread_mutex_unlock(&g.lock);
}

/* ---- writing ------------------------------------------------------------
 * The file is valid JSON after every flush: events are written from
 * g.tail_off on, then the tail (metadata events, the closing bracket,
 * displayTimeUnit and otherData); the next flush writes its events over
 * the old tail and writes a new one. */

KT_FN static int buf_reserve(size_t more) {
  if (g.buf_n + more <= g.buf_cap) return 0;
  size_t cap = g.buf_cap ? g.buf_cap : 1 << 20;
  while (cap < g.buf_n + more) cap *= 2;
  char *b = realloc(g.buf, cap);
  if (!b) return -1;
  g.buf = b;
  g.buf_cap = cap;
  return 0;
}

KT_FN static void put(const char *s, size_t n) {
  if (buf_reserve(n)) {
    g.oom = 1; /* drain reports it */
    return;
  }
  memcpy(g.buf + g.buf_n, s, n);
  g.buf_n += n;
}

KT_FN static void puts_(const char *s) { put(s, strlen(s)); }

KT_FN static void put_u64(uint64_t v) {
  char d[24];
  int n = 0;
  do d[sizeof d - 1 - n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < 24);
  put(d + sizeof d - n, (size_t)n);
}

/* ns as microseconds with three decimals, exactly */
KT_FN static void put_us(uint64_t ns) {
  put_u64(ns / 1000);
  char f[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10),
               (char)('0' + ns % 10)};
  put(f, 4);
}

KT_FN static void put_str(const char *s) {
  put("\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      put(e, 2);
    } else if (*p < 0x20 || *p == 0x7f) {
      char e[7];
      snprintf(e, sizeof e, "\\u%04x", *p);
      put(e, 6);
    } else {
      put((const char *)p, 1);
    }
  }
  put("\"", 1);
}

KT_FN static int write_all(const char *p, size_t n) {
  while (n) {
    ssize_t w = write(g.fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes out the buffer when it holds more than `keep` bytes. */
KT_FN static int drain(size_t keep) {
  if (g.oom) {
    errno = 0;
    return -1;
  }
  if (g.buf_n <= keep) return 0;
  int r = write_all(g.buf, g.buf_n);
  g.buf_n = 0;
  return r;
}

KT_FN static void put_event(const kt_thread *t, const kt_event *e) {
  const char *name, *cat = "function";
  if (e->dur & KT_DUR_SCOPE) {
    name = e->id;
    cat = "scope";
  } else {
    name = kt_symcache_name(&g.syms, e->id);
    if (!name) name = "?";
  }
  puts_(g.written ? ",\n{\"name\":" : "\n{\"name\":");
  put_str(name);
  puts_(",\"cat\":\"");
  puts_(cat);
  puts_("\",\"ph\":\"X\",\"ts\":");
  put_us(to_ns(e->ts));
  puts_(",\"dur\":");
  put_us(to_ns(e->dur & ~KT_DUR_SCOPE));
  puts_(",\"pid\":");
  put_u64((uint64_t)g.pid);
  puts_(",\"tid\":");
  put_u64((uint64_t)t->tid);
  puts_("}");
  g.written++;
}

/* Writes every event t has published since the last flush and frees the
 * chunks it is done with. */
KT_FN static int consume(kt_thread *t) {
  for (;;) {
    kt_chunk *c = t->read;
    uint32_t n = atomic_load_explicit(&c->count, memory_order_acquire);
    for (uint32_t i = t->read_n; i < n; i++) {
      put_event(t, &c->ev[i]);
      if (drain(1 << 20)) return -1;
    }
    t->read_n = n;
    if (n < KT_CHUNK) return 0;
    kt_chunk *next = atomic_load_explicit(&c->next, memory_order_acquire);
    if (!next) return 0;
    chunk_free(c);
    t->read = next;
    t->read_n = 0;
  }
}

/* A live thread's current name, unless set through kn_trace_thread_name. */
KT_FN static void refresh_name(kt_thread *t) {
  if (t->name_explicit || t->exited) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)t->tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char name[KT_NAME];
  ssize_t n = read(fd, name, sizeof name - 1);
  close(fd);
  if (n <= 0) return;
  while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0')) n--;
  name[n] = '\0';
  memcpy(t->name, name, (size_t)n + 1);
}

KT_FN static void put_meta(int first, const char *what, int tid, const char *value) {
  puts_(first ? "\n{\"name\":\"" : ",\n{\"name\":\"");
  puts_(what);
  puts_("\",\"ph\":\"M\",\"pid\":");
  put_u64((uint64_t)g.pid);
  puts_(",\"tid\":");
  put_u64((uint64_t)tid);
  puts_(",\"args\":{\"name\":");
  put_str(value);
  puts_("}}");
}

KT_FN static void put_field(const char *key, uint64_t v) {
  puts_(",\"");
  puts_(key);
  puts_("\":");
  put_u64(v);
}

KT_FN static int write_tail(void) {
  uint64_t dropped = 0, short_calls = 0, sampled_out = 0;
  put_meta(!g.written, "process_name", g.pid, g.process);
  for (kt_thread *t = atomic_load_explicit(&g.threads, memory_order_acquire); t; t = t->next) {
    refresh_name(t);
    put_meta(0, "thread_name", t->tid, t->name);
    dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
    short_calls += atomic_load_explicit(&t->short_calls, memory_order_relaxed);
    sampled_out += atomic_load_explicit(&t->sampled_out, memory_order_relaxed);
  }
  puts_("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"kiln-trace\"");
  put_field("version", 1);
  puts_(",\"wall_clock_start_us\":");
  put_u64((uint64_t)g.wall_us);
  puts_(",\"host\":");
  put_str(g.host);
  puts_(",\"process\":");
  put_str(g.process);
  put_field("pid", (uint64_t)g.pid);
  puts_(g.tsc ? ",\"clock\":\"tsc, as CLOCK_MONOTONIC\"" : ",\"clock\":\"CLOCK_MONOTONIC\"");
  put_field("events", g.written);
  put_field("dropped_events", dropped);
  put_field("short_events", short_calls);
  put_field("sampled_out_events", sampled_out);
  put_field("max_events", g.max_events);
  put_field("sample", g.sample);
  puts_(",\"min_us\":");
  put_us(g.min_ns);
  puts_("}}\n");
  return drain(0);
}

/* Under g.lock.  A regular file is rewritten from its tail at every
 * flush; any other output (a pipe, /dev/null) cannot seek, so it gets one
 * flush, the final one. */
KT_FN static int flush_locked(int final) {
  /* no file from a process that never recorded anything */
  if (!atomic_load(&g.ever_enabled) || !atomic_load(&g.threads) || g.failed)
    return g.failed ? -1 : 0;
  if (g.fd < 0) {
    struct stat st;
    if (!final && stat(g.path, &st) == 0 && !S_ISREG(st.st_mode)) return 0;
    g.fd = open(g.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.fd < 0) {
      fprintf(stderr, "kiln-trace: cannot write '%s': %s\n", g.path, strerror(errno));
      g.failed = 1;
      return -1;
    }
    g.seekable = fstat(g.fd, &st) == 0 && S_ISREG(st.st_mode);
    static const char head[] = "{\"traceEvents\":[";
    if (write_all(head, sizeof head - 1)) goto io_error;
    g.tail_off = (off_t)(sizeof head - 1);
  }
  if (g.seekable && lseek(g.fd, g.tail_off, SEEK_SET) < 0) goto io_error;
  if (g.tsc) {
    uint64_t tsc, mono;
    clock_pair(&tsc, &mono);
    if (tsc > g.t0_ticks && mono > g.mono0_ns)
      g.ns_per_tick = (double)(mono - g.mono0_ns) / (double)(tsc - g.t0_ticks);
  }
  g.buf_n = 0;
  for (kt_thread *t = atomic_load_explicit(&g.threads, memory_order_acquire); t; t = t->next)
    if (consume(t)) goto io_error;
  if (drain(0)) goto io_error;
  if (g.seekable) {
    off_t end = lseek(g.fd, 0, SEEK_CUR);
    if (end < 0) goto io_error;
    g.tail_off = end;
  }
  if (write_tail()) goto io_error;
  if (g.seekable) {
    off_t end = lseek(g.fd, 0, SEEK_CUR);
    if (end < 0 || ftruncate(g.fd, end)) goto io_error;
  }
  return 0;
io_error:
  fprintf(stderr, "kiln-trace: writing '%s' failed: %s\n", g.path,
          errno ? strerror(errno) : "out of memory");
  g.failed = 1;
  return -1;
}

int kn_trace_flush(void) {
  pthread_mutex_lock(&g.lock);
  int r = flush_locked(0);
  pthread_mutex_unlock(&g.lock);
  return r;
}

KT_FN static void at_exit(void) {
  atomic_store(&g.enabled, 0);
  pthread_mutex_lock(&g.lock);
  atomic_store(&g.finished, 1);
  flush_locked(1);
  if (g.fd >= 0) close(g.fd);
  g.fd = -1;
  g.failed = 1; /* nothing more after the final flush */
  pthread_mutex_unlock(&g.lock);
}

/* A forked child has its parent's buffers and file offset: it records
 * nothing (a program it execs starts a trace of its own). */
KT_FN static void after_fork_child(void) {
  atomic_store(&g.enabled, 0);
  atomic_store(&g.finished, 1);
  atomic_store(&g.ever_enabled, 0);
  g.fd = -1;
  pthread_mutex_init(&g.lock, NULL);
}

KT_FN static void on_signal(int signo) {
  int e = errno;
  sem_post(&g.sem);
  errno = e;
}

KT_FN static void *flusher(void *arg) {
  for (;;) {
    while (sem_wait(&g.sem) && errno == EINTR) {}
    if (atomic_load(&g.finished)) return NULL;
    kn_trace_flush();
  }
}

KT_FN static int parse_signal(const char *s) {
  static const struct {
    const char *name;
    int no;
  } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},   {"INT", SIGINT},
               {"QUIT", SIGQUIT}, {"TERM", SIGTERM}, {"ALRM", SIGALRM}, {"PROF", SIGPROF},
               {"WINCH", SIGWINCH}};
  if (!strncmp(s, "SIG", 3)) s += 3;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(s, names[i].name)) return names[i].no;
  char *end;
  long v = strtol(s, &end, 10);
  if (end != s && !*end && v > 0 && v < NSIG && v != SIGKILL && v != SIGSTOP) return (int)v;
  return 0;
}

/* An environment number in [lo, hi], else def with a one-line warning. */
KT_FN static double env_number(const char *name, double lo, double hi, double def,
                               int integer) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end != s && !*end && !errno && v >= lo && v <= hi && (!integer || v == (double)(int64_t)v))
    return v;
  fprintf(stderr, "kiln-trace: %s must be %s from %g to %g, got '%s'; using %g\n", name,
          integer ? "an integer" : "a number", lo, hi, s, def);
  return def;
}

KT_FN static void set_path(const char *pattern) {
  size_t n = 0;
  for (const char *p = pattern; *p && n + 1 < sizeof g.path; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      n += (size_t)snprintf(g.path + n, sizeof g.path - n, "%d", g.pid);
      if (n >= sizeof g.path) n = sizeof g.path - 1;
      p++;
    } else {
      g.path[n++] = *p;
    }
  }
  g.path[n] = '\0';
}

/* Priority 101, the first allowed: before the program's own constructors
 * in a static link, so that their calls are recorded too. */
__attribute__((constructor(101))) KT_FN static void kt_init(void) {
  const char *clk = getenv("KN_TRACE_CLOCK");
  g.tsc = !(clk && !strcmp(clk, "monotonic")) && kernel_uses_tsc();
  struct timespec wall;
  if (g.tsc) {
    clock_pair(&g.t0_ticks, &g.mono0_ns);
  } else {
    g.t0_ticks = g.mono0_ns = now_ns();
  }
  clock_gettime(CLOCK_REALTIME, &wall);
  g.wall_us = (int64_t)wall.tv_sec * 1000000 + wall.tv_nsec / 1000;
  g.pid = (int)getpid();
  if (gethostname(g.host, sizeof g.host - 1)) snprintf(g.host, sizeof g.host, "unknown");
  snprintf(g.process, sizeof g.process, "%s", program_invocation_short_name);

  int on = (int)env_number("KN_TRACE", 0, 1, 1, 1);
  g.sample = (uint32_t)env_number("KN_TRACE_SAMPLE", 1, 1e9, 1, 1);
  g.min_ns = (uint64_t)(env_number("KN_TRACE_MIN_US", 0, 1e12, 0, 0) * 1000 + 0.5);
  g.min_ticks = g.min_ns;
  if (g.tsc && g.min_ns) {
    /* the filter works in ticks: 200 us of both clocks gives their ratio
     * to 1e-3 or better */
    uint64_t t0, m0, t1, m1;
    clock_pair(&t0, &m0);
    do clock_pair(&t1, &m1);
    while (m1 - m0 < 200000);
    g.min_ticks = (uint64_t)((double)g.min_ns * (double)(t1 - t0) / (double)(m1 - m0));
  }
  g.max_events =
      (uint64_t)env_number("KN_TRACE_MAX_EVENTS", 0, 1e15, KT_DEFAULT_MAX_EVENTS, 1);
  atomic_store(&g.budget, (int64_t)g.max_events);
  const char *file = getenv("KN_TRACE_FILE");
  set_path(file && *file ? file : "kiln-trace.%p.json");

  if (pthread_key_create(&g.key, thread_exited)) on = 0;
  else g.ready = 1;
  atexit(at_exit);
  pthread_atfork(NULL, NULL, after_fork_child);

  const char *sig = getenv("KN_TRACE_SIGNAL");
  if (sig && *sig) {
    g.signo = parse_signal(sig);
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    if (!g.signo) {
      fprintf(stderr, "kiln-trace: KN_TRACE_SIGNAL '%s' is not a signal (USR1, SIGUSR2, 12...);"
                      " ignored\n", sig);
    } else if (sem_init(&g.sem, 0, 0) == 0) {
      /* the flusher blocks every signal, so that the handler runs elsewhere */
      pthread_sigmask(SIG_SETMASK, &all, &old);
      int bad = pthread_create(&th, NULL, flusher, NULL);
      pthread_sigmask(SIG_SETMASK, &old, NULL);
      if (!bad) {
        pthread_detach(th);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(g.signo, &sa, NULL);
      }
    }
  }
  atomic_store(&g.ever_enabled, on);
  atomic_store(&g.enabled, on);
}
