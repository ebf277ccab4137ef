/* The instrumentation agent's test program: compiled with
 * -finstrument-functions and linked to libkiln-trace (tests/CMakeLists.txt).
 * Threads named worker-<i> each run a recursion (fib), a leaf function and
 * a KN_TRACE_SCOPE span; the main thread names itself "main-thread" for the
 * trace, sleeps in slow_call, runs hidden_call with tracing switched
 * off, recurses 300 deep and leaves a call by longjmp: 8819 calls recorded.
 *
 * usage: trace_sample [MODE]
 *   (none)  the run above
 *   signal  also raises KN_TRACE_SIGNAL's SIGUSR1 half way, waits for the
 *           flusher to write $KN_TRACE_FILE and copies it to
 *           $KN_TRACE_FILE.mid, then does the second half */
#define _GNU_SOURCE
#include "kiln_trace.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { N_WORKERS = 3, FIB_N = 14 };

static volatile int sink;

/* static: only the executable's .symtab names it */
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int leaf_work(int x) {
  int s = 0;
  for (int i = 0; i < 100; i++) s += (x ^ i) * 3;
  return s;
}

static void scoped_block(void) {
  KN_TRACE_SCOPE("sample_scope");
  sink = leaf_work(7);
}

static void slow_call(void) {
  struct timespec ts = {0, 3 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void hidden_call(void) { sink = leaf_work(11); }

/* 300 deep: past the agent's 256 frames, whose calls are counted and not
 * timed (255 deep calls recorded under main) */
static int deep(int n) { return n ? deep(n - 1) + 1 : 0; }

/* thrower never returns: jump_test's exit closes it (not recorded) */
static jmp_buf jump;
static void thrower(void) { longjmp(jump, 1); }
static void jump_test(void) {
  if (!setjmp(jump)) thrower();
}

static void *worker(void *arg) {
  int id = (int)(long)arg;
  char name[16];
  snprintf(name, sizeof name, "worker-%d", id);
  pthread_setname_np(pthread_self(), name);
  for (int r = 0; r < 2; r++) {
    sink = fib(FIB_N);
    sink = leaf_work(r);
    scoped_block();
  }
  return NULL;
}

static void run_workers(void) {
  pthread_t th[N_WORKERS];
  for (long i = 0; i < N_WORKERS; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)i)) {
      fprintf(stderr, "trace_sample: pthread_create failed\n");
      exit(1);
    }
  for (int i = 0; i < N_WORKERS; i++) pthread_join(th[i], NULL);
}

/* Waits (up to 10 s) until the flusher has written a complete file, then
 * copies it: the tail, written last, ends with "}}\n" and nothing else
 * in the file does. */
static int copy_after_flush(const char *path) {
  char *buf = NULL;
  size_t n = 0;
  for (int tries = 0; tries < 1000; tries++) {
    FILE *f = fopen(path, "rb");
    if (f) {
      free(buf);
      buf = NULL;
      n = 0;
      size_t cap = 0;
      for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 1 >= cap) buf = realloc(buf, cap = cap ? cap * 2 : 4096);
        if (!buf) return -1;
        buf[n++] = (char)c;
      }
      fclose(f);
      if (n >= 3 && !memcmp(buf + n - 3, "}}\n", 3)) break;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (!buf || n < 3 || memcmp(buf + n - 3, "}}\n", 3)) {
    fprintf(stderr, "trace_sample: no complete trace in '%s' after the signal\n", path);
    return -1;
  }
  char mid[4200];
  snprintf(mid, sizeof mid, "%s.mid", path);
  FILE *o = fopen(mid, "wb");
  int bad = !o || fwrite(buf, 1, n, o) != n;
  if (o && fclose(o)) bad = 1;
  free(buf);
  return bad ? -1 : 0;
}

int main(int argc, char **argv) {
  int signal_mode = argc > 1 && !strcmp(argv[1], "signal");
  kn_trace_thread_name("main-thread");
  run_workers();
  slow_call();
  int was = kn_trace_enable(0);
  hidden_call();
  kn_trace_enable(was);
  if (signal_mode) {
    const char *path = getenv("KN_TRACE_FILE");
    if (!path || raise(SIGUSR1) || copy_after_flush(path)) return 1;
    run_workers();
  }
  sink = deep(300);
  jump_test();
  sink = fib(FIB_N);
  return 0;
}
