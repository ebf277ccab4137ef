/* libkiln-trace: an instrumentation agent for any C program.
 *
 * Compile the code to trace with -finstrument-functions and link
 * libkiln_trace (-lkiln_trace, or `pkg-config --libs kiln-trace`): every
 * function entry and exit on every thread is recorded, and at exit the
 * trace is written as Chrome Trace Event JSON (chrome://tracing, Perfetto,
 * `kiln trace merge`).  Code that is not instrumented marks spans with
 * KN_TRACE_SCOPE("name") or kn_trace_begin/kn_trace_end.  Nothing needs to
 * be called: the agent starts itself before main (a constructor) and writes
 * the file at exit (atexit).  docs/TRACE.md has the details.
 *
 * Environment, read once at start:
 *   KN_TRACE=0|1          tracing off or on (default 1); kn_trace_enable
 *                         switches it at run time
 *   KN_TRACE_FILE=PATH    output file (default kiln-trace.<pid>.json; "%p"
 *                         in PATH is replaced by the pid)
 *   KN_TRACE_SAMPLE=N     keep one call in N on each thread (default 1)
 *   KN_TRACE_MIN_US=X     drop calls shorter than X microseconds (default 0)
 *   KN_TRACE_MAX_EVENTS=N keep at most N events (default 1000000, 24
 *                         bytes each in memory); the rest are counted in
 *                         otherData.dropped_events
 *   KN_TRACE_SIGNAL=SIG   on signal SIG (USR1, SIGUSR2, 10, ...) write
 *                         what is buffered so far (see kn_trace_flush)
 *   KN_TRACE_CLOCK=monotonic  time calls with clock_gettime even where the
 *                         kernel's clocksource is the TSC (then rdtsc is
 *                         used and converted to CLOCK_MONOTONIC time)
 *
 * Thread safety: every function may be called from any thread.  Recording
 * takes no lock; flushes are serialised by one lock. */
#ifndef KILN_TRACE_H
#define KILN_TRACE_H

#ifdef __cplusplus
extern "C" {
#endif

#define KN_TRACE_NOINSTR __attribute__((no_instrument_function))

/* Opens a span named `name` on the calling thread; it closes at the matching
 * kn_trace_end.  `name` is kept as a pointer and read when the trace is
 * written: it must stay valid until the process exits (a string literal).
 * Returns a value for KN_TRACE_SCOPE's cleanup (ignore it otherwise). */
KN_TRACE_NOINSTR int kn_trace_begin(const char *name);
/* Closes the innermost span opened by kn_trace_begin on this thread (and
 * any function frames still open above it). */
KN_TRACE_NOINSTR void kn_trace_end(void);

/* Tracing on (1) or off (0) from now on, for every thread; returns the
 * previous state.  Calls already open when tracing goes off are dropped. */
KN_TRACE_NOINSTR int kn_trace_enable(int on);
KN_TRACE_NOINSTR int kn_trace_enabled(void);

/* The calling thread's name in the trace (thread_name metadata), instead
 * of the one the kernel knows it by (pthread_setname_np, /proc comm).
 * Copied; at most 63 bytes are kept. */
KN_TRACE_NOINSTR void kn_trace_thread_name(const char *name);

/* Writes the events recorded so far and rewrites the file's tail, so that
 * it is valid JSON after every flush (an output that cannot seek, such as
 * a pipe or /dev/null, is written once, at exit).  Returns 0, or -1 when
 * the file cannot be written (one line on stderr).  Not async-signal-safe: a signal
 * handler must not call it (KN_TRACE_SIGNAL wakes a flusher thread). */
KN_TRACE_NOINSTR int kn_trace_flush(void);

KN_TRACE_NOINSTR void kn_trace_scope_end_(int *token);

#define KN_TRACE_CAT2_(a, b) a##b
#define KN_TRACE_CAT_(a, b) KN_TRACE_CAT2_(a, b)
/* A span from here to the end of the enclosing block (GCC/clang cleanup
 * attribute), e.g. { KN_TRACE_SCOPE("decode"); ... }. */
#define KN_TRACE_SCOPE(name)                                                                     \
  __attribute__((cleanup(kn_trace_scope_end_), unused)) int KN_TRACE_CAT_(kn_trace_scope_,       \
                                                                          __LINE__) =            \
      kn_trace_begin(name)

#ifdef __cplusplus
}
#endif
#endif
