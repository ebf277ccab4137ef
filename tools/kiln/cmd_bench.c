/* kiln bench MODEL|ENGINE: time runs the way trtexec does for TensorRT:
 * latency percentiles, throughput, startup and peak memory, on given or
 * generated inputs. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Defaults when neither --runs nor --duration is given: at least this many
 * runs and at least this long, so that p90 means something on fast models
 * without taking minutes on slow ones. */
#define DEFAULT_MIN_RUNS 10
#define DEFAULT_MIN_SECONDS 1.0
/* A progress line once a benchmark has run this long. */
#define PROGRESS_AFTER_S 2.0

void kn_cmd_bench_usage(FILE *f) {
  fprintf(f,
          "usage: kiln bench MODEL|ENGINE [--threads N] [--runs N | --duration SECONDS]\n"
          "                  [--warmup N] [--shape NAME=DIMS]... [--input NAME=FILE]...\n"
          "                  [--seed N] [--json] [--profile NAME=MIN:OPT:MAX]...\n"
          "                  [--disable-pass NAME]... [--workspace BYTES] [--no-optimize]\n"
          "                  [--reference-kernels] [--input-dir D] [--save-inputs D]\n"
          "                  [--per-step]\n\n"
          "Times runs of MODEL (.onnx, built in memory first, with the build options\n"
          "below) or ENGINE (loaded) and prints min, mean, median, p90, p99 and max\n"
          "latency, throughput, startup (load, build and context creation) and peak RSS.\n\n"
          "  --threads N           threads per run (default: KILN_NUM_THREADS, else the\n"
          "                        CPUs this process may use)\n"
          "  --runs N              timed runs (default: at least %d runs and %g s)\n"
          "  --duration SECONDS    run for this long instead of a number of runs\n"
          "  --warmup N            untimed runs first (default 3)\n"
          "  --shape NAME=DIMS     an input's dims, e.g. input_ids=1x128 (repeatable)\n"
          "  --input NAME=FILE     an input's data, .pb (TensorProto) or .npy (repeatable)\n"
          "  --input-dir D         inputs from D/input_<i>.pb or .npy, as kiln run reads\n"
          "  --save-inputs D       write the inputs used to D/input_<i>.pb (created when\n"
          "                        missing), to feed the same data to another runtime\n"
          "  --seed N              seed of the generated inputs (default 1)\n"
          "  --json                print one JSON object (p50_ms, p90_ms, p99_ms, mean_ms,\n"
          "                        min_ms, max_ms, throughput_qps, threads, runs,\n"
          "                        peak_rss_bytes, load_ms, ...)\n"
          "  --profile, --disable-pass, --workspace, --no-optimize: as for kiln build\n"
          "  --reference-kernels   every step on its reference kernel (the oracle)\n"
          "  --per-step            then time every step (median over up to 50 more runs)\n"
          "                        and print them beside the IO model's predictions; for\n"
          "                        an engine they are kept in ENGINE.steps.json, where\n"
          "                        `kiln inspect` shows them\n\n"
          "Inputs not given are generated: floats uniform in [-1, 1); integer token ids\n"
          "(inputs that index a constant [V, D] table through Gather) uniform in\n"
          "[0, V); masks (integer or bool inputs named *mask*, or feeding a Cast then\n"
          "Sub/Mul) all ones; other integers 0 or 1.  Dynamic dimensions without\n"
          "--shape are 1 for batch-like and 128 for sequence-like ones (within an\n"
          "engine's profile), said on stderr.  A progress line goes to stderr once a\n"
          "benchmark runs longer than %g s.  Options also take the --name=VALUE form.\n",
          DEFAULT_MIN_RUNS, DEFAULT_MIN_SECONDS, PROGRESS_AFTER_S);
}

/* ---- the command ----------------------------------------------------------- */

typedef struct bench_opts {
  kn_cli_model_opts m;
  const char *save_dir;
  int64_t runs, warmup;
  double duration;
  bool json, per_step;
} bench_opts;

static int parse_opts(int argc, char **argv, bench_opts *o) {
  const kn_cli_cmd *cmd = kn_cli_find("bench");
  enum { O_RUNS = 1, O_DURATION, O_WARMUP, O_JSON, O_SAVE_INPUTS, O_PER_STEP };
  static const kn_cli_opt opts[] = {KN_CLI_MODEL_OPTS,
                                    {"runs", 0, true, O_RUNS},
                                    {"duration", 0, true, O_DURATION},
                                    {"warmup", 0, true, O_WARMUP},
                                    {"json", 0, false, O_JSON},
                                    {"save-inputs", 0, true, O_SAVE_INPUTS},
                                    {"per-step", 0, false, O_PER_STEP},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  kn_cli_model_opts_init(&o->m, "bench");
  o->warmup = 3;
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    int rc = kn_cli_model_option(&args, id, &o->m);
    if (rc > 0) return rc;
    if (rc == 0) continue;
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_RUNS:
      if (!kn_cli_int(&args, 1, 100000000, &o->runs)) return KN_EXIT_USAGE;
      break;
    case O_DURATION:
      if (!kn_cli_double(&args, 0.001, 1e6, &o->duration)) return KN_EXIT_USAGE;
      break;
    case O_WARMUP:
      if (!kn_cli_int(&args, 0, 100000000, &o->warmup)) return KN_EXIT_USAGE;
      break;
    case O_JSON: o->json = true; break;
    case O_PER_STEP: o->per_step = true; break;
    case O_SAVE_INPUTS: o->save_dir = args.arg; break;
    case KN_CLI_POSITIONAL:
      if (o->m.path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      o->m.path = args.arg;
      break;
    }
  }
  if (!o->m.path) return kn_cli_usage(cmd, "MODEL is required");
  if (o->runs && o->duration > 0) return kn_cli_usage(cmd, "--runs and --duration exclude each other");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  return KN_EXIT_OK;
}

typedef struct samples {
  double *v; /* ms */
  int64_t n, cap;
} samples;

static int save_inputs(const kn_cli_session *s, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return kn_cli_fail("cannot create directory '%s': %s", dir, strerror(errno));
  for (int32_t i = 0; i < s->nin; i++) {
    kn_value_info vi;
    kn_error err = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%d.pb", dir, i);
    if (kn_model_input_info(s->model, i, &vi) ||
        kn_tensor_write_pb(path, &s->inputs[i], vi.name, &err))
      return kn_cli_error(&err);
  }
  return KN_EXIT_OK;
}

static bool add_sample(samples *s, double ms) {
  if (s->n == s->cap) {
    int64_t cap = s->cap ? s->cap * 2 : 256;
    double *n = realloc(s->v, (size_t)cap * sizeof *n);
    if (!n) return false;
    s->v = n;
    s->cap = cap;
  }
  s->v[s->n++] = ms;
  return true;
}

int kn_cmd_bench(int argc, char **argv) {
  bench_opts o;
  memset(&o, 0, sizeof o);
  int rc = parse_opts(argc, argv, &o);
  if (rc) return rc;

  kn_cli_session s;
  samples sm = {0};
  kn_error err = {0};
  rc = kn_cli_session_open(&o.m, &s);
  if (!rc && o.save_dir) rc = save_inputs(&s, o.save_dir);
  if (rc) goto done;
  rc = KN_EXIT_ERROR;
  bool engine = s.engine;

  /* warm-up: the first run also pays for first-touch page faults */
  double first_ms = 0;
  for (int64_t w = 0; w < o.warmup; w++) {
    double a = kn_cli_now_s();
    if (kn_context_run(s.ctx, &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
    if (w == 0) first_ms = (kn_cli_now_s() - a) * 1e3;
  }

  bool tty = isatty(STDERR_FILENO);
  bool progressed = false;
  double start = kn_cli_now_s(), last_progress = 0;
  for (int64_t k = 0;; k++) {
    double elapsed = kn_cli_now_s() - start;
    if (o.runs ? k >= o.runs
               : o.duration > 0 ? k > 0 && elapsed >= o.duration
                                : k >= DEFAULT_MIN_RUNS && elapsed >= DEFAULT_MIN_SECONDS)
      break;
    double a = kn_cli_now_s();
    if (kn_context_run(s.ctx, &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
    double b = kn_cli_now_s();
    if (!add_sample(&sm, (b - a) * 1e3)) {
      rc = kn_cli_fail("out of memory");
      goto done;
    }
    /* on a terminal the line is rewritten in place every second; in a log,
     * one line every few seconds */
    if (b - start > PROGRESS_AFTER_S && (!progressed || b - last_progress >= (tty ? 1.0 : 5.0))) {
      last_progress = b;
      progressed = true;
      char what[96];
      if (o.runs)
        snprintf(what, sizeof what, "%lld of %lld runs, %.1f s", (long long)sm.n,
                 (long long)o.runs, b - start);
      else if (o.duration > 0)
        snprintf(what, sizeof what, "%lld runs, %.1f of %g s", (long long)sm.n, b - start,
                 o.duration);
      else
        snprintf(what, sizeof what, "%lld runs, %.1f s", (long long)sm.n, b - start);
      fprintf(stderr, "%skiln bench: %s, last run %.3f ms%s", tty ? "\r" : "", what,
              (b - a) * 1e3, tty ? "\033[K" : "\n");
      fflush(stderr);
    }
  }
  double wall = kn_cli_now_s() - start;
  if (progressed && tty) fprintf(stderr, "\r\033[K");

  int64_t n = sm.n;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += sm.v[i];
  qsort(sm.v, (size_t)n, sizeof *sm.v, kn_cli_cmp_double);
  double mean = sum / (double)n, p50 = kn_cli_percentile(sm.v, n, 0.5),
         p90 = kn_cli_percentile(sm.v, n, 0.9), p99 = kn_cli_percentile(sm.v, n, 0.99);
  double qps = sum > 0 ? (double)n / (sum / 1e3) : 0;
  uint64_t rss = kn_cli_peak_rss();
  int32_t threads = kn_context_threads(s.ctx);
  int32_t nsteps = kn_model_step_count(s.model);
  double *step_us = NULL;
  /* step times: for --per-step, and for the census of reference kernels
   * (a few runs more) */
  {
    int32_t ps_runs = o.per_step ? (n < 5 ? 5 : n > 50 ? 50 : (int32_t)n)
                                 : (n < 3 ? 3 : n > 10 ? 10 : (int32_t)n);
    step_us = calloc((size_t)nsteps + 1, sizeof *step_us);
    if (!step_us) {
      rc = kn_cli_fail("out of memory");
      goto done;
    }
    if (kn_cli_step_times(s.ctx, s.model, ps_runs, step_us, &err)) {
      free(step_us);
      rc = kn_cli_error(&err);
      goto done;
    }
    if (o.per_step && engine && !kn_cli_step_times_save(o.m.path, s.model, threads, step_us))
      fprintf(stderr, "kiln bench: could not write %s.steps.json\n", o.m.path);
  }
  if (o.json) {
    printf("{\"model\": ");
    kn_cli_json_str(stdout, o.m.path);
    printf(", \"engine\": %s, \"threads\": %d, \"runs\": %lld, \"warmup\": %lld, \"inputs\": ",
           engine ? "true" : "false", threads, (long long)n, (long long)o.warmup);
    kn_cli_json_str(stdout, s.shapes_text);
    printf(", \"min_ms\": %.4f, \"mean_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
           "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"throughput_qps\": %.3f, \"wall_s\": %.3f, "
           "\"peak_rss_bytes\": %llu, \"load_ms\": %.3f, \"model_load_ms\": %.3f, "
           "\"build_ms\": %.3f, \"first_run_ms\": %.4f",
           sm.v[0], mean, p50, p90, p99, sm.v[n - 1], qps, wall,
           (unsigned long long)rss, s.load_ms, s.model_load_ms, s.build_ms, first_ms);
    int32_t n_ref, worst;
    double rshare = kn_cli_reference_share(s.model, step_us, &n_ref, &worst);
    printf(", \"reference_share\": %.4f, \"reference_steps\": %d", rshare, n_ref);
    if (o.per_step) {
      printf(", \"step_list\": [");
      for (int32_t i = 0; i < nsteps; i++) {
        kn_step_info si;
        kn_step_io io;
        if (kn_model_step_info(s.model, i, &si) || kn_model_step_io(s.model, i, threads, &io))
          continue;
        printf("%s\n  {\"name\": ", i ? "," : "");
        kn_cli_json_str(stdout, si.name);
        printf(", \"op\": ");
        kn_cli_json_str(stdout, si.op);
        printf(", \"tactic\": ");
        kn_cli_json_str(stdout, si.tactic);
        printf(", \"median_us\": %.3f, \"predicted_us\": %.3f, \"bound\": \"%s\", "
               "\"factor\": %.3f, \"times_us\": [%.3f, %.3f, %.3f, %.3f, %.3f, %.3f]}",
               step_us[i], io.predicted_us, io.bound, io.factor, io.time_us[0], io.time_us[1],
               io.time_us[2], io.time_us[3], io.time_us[4], io.time_us[5]);
      }
      printf("\n]");
    }
    printf("}\n");
  } else {
    printf("%s: %s, %d thread%s, %lld runs after %lld warm-up%s\n", o.m.path, s.shapes_text,
           threads, threads == 1 ? "" : "s", (long long)n, (long long)o.warmup,
           o.warmup == 1 ? "" : "s");
    printf("latency (ms): min %.3f  mean %.3f  median %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
           sm.v[0], mean, p50, p90, p99, sm.v[n - 1]);
    printf("throughput: %.2f runs/s\n", qps);
    if (engine)
      printf("startup: %.1f ms (engine load %.1f ms)", s.load_ms, s.model_load_ms);
    else
      printf("startup: %.1f ms (model load %.1f ms, build %.1f ms)", s.load_ms,
             s.model_load_ms, s.build_ms);
    printf(", first run %.3f ms\n", first_ms);
    printf("peak RSS: %.1f MiB\n", (double)rss / 1048576.0);
    char census[512];
    kn_cli_reference_line(s.model, step_us, census, sizeof census);
    printf("%s\n", census);
    if (o.per_step) {
      double total = 0;
      for (int32_t i = 0; i < nsteps; i++) total += step_us[i];
      printf("steps (median over their own runs; predicted by the IO model for %d thread%s):\n"
             "  %-4s %-36s %-20s %-18s %10s %6s %10s %-8s\n",
             threads, threads == 1 ? "" : "s", "#", "name", "op", "kernel", "median us", "share",
             "pred us", "bound");
      for (int32_t i = 0; i < nsteps; i++) {
        kn_step_info si;
        kn_step_io io;
        if (kn_model_step_info(s.model, i, &si) || kn_model_step_io(s.model, i, threads, &io))
          continue;
        printf("  %-4d %-36.36s %-20.20s %-18.18s %10.1f %5.1f%% %10.1f %-8s\n", i, si.name,
               si.op, si.tactic ? si.tactic : "reference", step_us[i],
               total > 0 ? 100 * step_us[i] / total : 0, io.predicted_us, io.bound);
      }
    }
  }
  free(step_us);
  rc = KN_EXIT_OK;
done:
  free(sm.v);
  kn_cli_session_close(&s);
  return rc;
}
