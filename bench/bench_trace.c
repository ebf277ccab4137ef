/*
 * bench_trace: the cost of libkiln-trace per instrumented call.
 *
 *   bench_trace [--calls N] [--reps N]
 *
 * This file is compiled with -finstrument-functions and linked to the
 * agent (bench/CMakeLists.txt).  One call is `leaf`, a noinline function
 * doing a few additions; the baseline is `leaf_plain`, the same code with
 * no_instrument_function.  Each mode runs in a child process (the agent
 * reads its environment once, at start):
 *
 *   baseline        leaf_plain, no hooks
 *   on              every call recorded (KN_TRACE_FILE=/dev/null, written once at exit)
 *   on, 2 threads   the same on two threads at once (per-thread logs: no shared line)
 *   KN_TRACE=0      hooks called, tracing off from the start
 *   enable(0)       kn_trace_enable(0) inside a traced frame (open frames kept matched)
 *   SAMPLE=100      one call in 100 timed and recorded
 *   MIN_US=1        every call timed, none kept (all shorter than 1 us)
 *   monotonic       on, timed with clock_gettime instead of the TSC
 *
 * Each figure is the best of `reps` timings of `calls` calls (default 30 of
 * 100000: short enough that some run on a shared machine is not preempted),
 * in ns per call, and the overhead over the baseline.  Timings are printed,
 * never asserted.
 */
#define _GNU_SOURCE
#include "kiln_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PLAIN __attribute__((no_instrument_function))

static volatile int sink;

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) PLAIN int leaf_plain(int x) { return x * 3 + 1; }

static long calls = 100000;
static int reps = 30;

PLAIN static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

PLAIN static double time_calls(int instrumented) {
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    int s = 0;
    double t0 = now_ns();
    if (instrumented)
      for (long i = 0; i < calls; i++) s += leaf((int)i);
    else
      for (long i = 0; i < calls; i++) s += leaf_plain((int)i);
    double t = (now_ns() - t0) / (double)calls;
    sink = s;
    if (t < best) best = t;
  }
  return best;
}

/* A traced frame around the loop, for enable(0): the hooks then keep
 * markers so that exits still match their entries. */
__attribute__((noinline)) static double traced_frame(void) {
  kn_trace_enable(0);
  return time_calls(1);
}

PLAIN static void *thread_main(void *arg) {
  *(double *)arg = time_calls(1);
  return NULL;
}

/* Runs one mode in this process; prints "<ns per call>". */
PLAIN static int child(const char *mode) {
  double ns;
  if (!strcmp(mode, "baseline")) {
    ns = time_calls(0);
  } else if (!strcmp(mode, "enable0")) {
    ns = traced_frame();
  } else if (!strcmp(mode, "threads2")) {
    pthread_t th;
    double a = 0, b = 0;
    if (pthread_create(&th, NULL, thread_main, &a)) return 1;
    thread_main(&b);
    pthread_join(th, NULL);
    ns = a > b ? a : b;
  } else {
    ns = time_calls(1);
  }
  printf("%.3f\n", ns);
  return 0;
}

/* Runs this program as a child with `env` (NAME=VALUE ...) added. */
PLAIN static double run_mode(const char *self, const char *mode, const char *const *env) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    for (; *env; env++) putenv((char *)*env);
    char c[32], r[32];
    snprintf(c, sizeof c, "%ld", calls);
    snprintf(r, sizeof r, "%d", reps);
    execl(self, self, "--child", mode, "--calls", c, "--reps", r, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[64] = "";
  ssize_t n = pid > 0 ? read(fd[0], buf, sizeof buf - 1) : -1;
  close(fd[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return -1;
  buf[n] = '\0';
  return atof(buf);
}

PLAIN int main(int argc, char **argv) {
  /* the parent records nothing (clang instruments libc's inline atoi and
   * atof too), and so writes no trace file */
  int was = kn_trace_enable(0);
  const char *mode = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--child") && i + 1 < argc) mode = argv[++i];
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_trace [--calls N] [--reps N]\n");
      return 2;
    }
  }
  if (calls < 1 || reps < 1) {
    fprintf(stderr, "bench_trace: --calls and --reps take integers >= 1\n");
    return 2;
  }
  if (mode) {
    kn_trace_enable(was);
    return child(mode);
  }

  /* room for every recorded call: a full log, never the dropping path */
  static char max_events[64];
  snprintf(max_events, sizeof max_events, "KN_TRACE_MAX_EVENTS=%ld",
           2 * calls * (long)reps + 1000);
  static const char *off[] = {"KN_TRACE=0", NULL};
  const char *on[] = {"KN_TRACE=1", "KN_TRACE_FILE=/dev/null", max_events, NULL};
  const char *sampled[] = {"KN_TRACE=1", "KN_TRACE_FILE=/dev/null", "KN_TRACE_SAMPLE=100",
                           max_events, NULL};
  const char *min_us[] = {"KN_TRACE=1", "KN_TRACE_FILE=/dev/null", "KN_TRACE_MIN_US=1",
                          max_events, NULL};
  const char *mono[] = {"KN_TRACE=1", "KN_TRACE_FILE=/dev/null", "KN_TRACE_CLOCK=monotonic",
                        max_events, NULL};
  const struct {
    const char *label, *mode;
    const char *const *env;
  } modes[] = {
      {"baseline (no hooks)", "baseline", off},
      {"on", "on", on},
      {"on, 2 threads", "threads2", on},
      {"KN_TRACE=0", "on", off},
      {"kn_trace_enable(0)", "enable0", on},
      {"KN_TRACE_SAMPLE=100", "on", sampled},
      {"KN_TRACE_MIN_US=1", "on", min_us},
      {"KN_TRACE_CLOCK=monotonic", "on", mono},
  };
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "bench_trace: cannot find its own executable\n");
    return 1;
  }
  self[n] = '\0';
  printf("bench_trace: %ld calls, best of %d\n", calls, reps);
  printf("%-26s %10s %12s\n", "mode", "ns/call", "overhead ns");
  double base = 0;
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    double ns = run_mode(self, modes[i].mode, modes[i].env);
    if (ns < 0) {
      fprintf(stderr, "bench_trace: mode '%s' failed\n", modes[i].label);
      return 1;
    }
    if (i == 0) base = ns;
    printf("%-26s %10.2f %12.2f\n", modes[i].label, ns, ns - base);
    fflush(stdout);
  }
  return 0;
}
