/* kiln profile MODEL|ENGINE: where a run's time and memory go, step by
 * step, as trtexec --dumpProfile does for TensorRT: a table sorted by time,
 * the same as JSON, a Chrome trace of every step on every thread, the
 * activation-memory timeline, a sweep over input sizes before and after
 * optimization, and the HTML dashboard with all of it. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RUNS 20
#define DEFAULT_WARMUP 3
#define MAX_SWEEP 32

void kn_cmd_profile_usage(FILE *f) {
  fprintf(f,
          "usage: kiln profile MODEL|ENGINE [--runs N] [--warmup N] [--threads N]\n"
          "                    [--trace FILE.json] [--report FILE.html] [--json]\n"
          "                    [--sweep NAME=V1,V2,...] [--shape NAME=DIMS]...\n"
          "                    [--input NAME=FILE]... [--input-dir D] [--seed N]\n"
          "                    [--profile NAME=MIN:OPT:MAX]... [--disable-pass NAME]...\n"
          "                    [--workspace BYTES] [--no-optimize] [--reference-kernels]\n\n"
          "Runs MODEL (.onnx, built in memory first) or ENGINE N times (default %d, after\n"
          "%d warm-up runs) recording when every step ran on every thread, and prints\n"
          "one line per step sorted by time: mean and median, share of the steps'\n"
          "total, the ONNX nodes it covers, its kernel, FLOPs, bytes read and written,\n"
          "achieved GFLOP/s and GB/s, the IO model's predicted time and bound, and the\n"
          "arena bytes live while it runs.\n\n"
          "  --runs N              profiled runs (default %d)\n"
          "  --warmup N            unprofiled runs first (default %d)\n"
          "  --threads N           threads per run (default: KILN_NUM_THREADS, else the\n"
          "                        CPUs this process may use)\n"
          "  --json                print the profile as one JSON object (format\n"
          "                        \"kiln-profile\", docs/CLI.md) instead of the table\n"
          "  --trace FILE          write a Chrome trace (Perfetto, chrome://tracing): one\n"
          "                        complete event per step per run on each thread that\n"
          "                        ran it, arena bytes as a counter, the runs as events\n"
          "  --report FILE         write the HTML dashboard with the measured times\n"
          "  --sweep NAME=V1,...   also build and run the model at each size, optimized\n"
          "                        and not, in a process of its own each, and report\n"
          "                        arena, weights, peak RSS and median latency per size.\n"
          "                        NAME is a dynamic dimension (batch=1,2,4,8;\n"
          "                        sequence=32,64,128) or an input (input=1x3x224x224,\n"
          "                        2x3x224x224); needs an ONNX model\n"
          "  --shape, --input, --input-dir, --seed: inputs, as for kiln bench\n"
          "  --profile, --disable-pass, --workspace, --no-optimize, --reference-kernels:\n"
          "                        as for kiln build\n\n"
          "Profiling reads the clock twice per step and per thread taking part in it\n"
          "(docs/CLI.md gives its cost).  Options also take the --name=VALUE form.\n",
          DEFAULT_RUNS, DEFAULT_WARMUP, DEFAULT_RUNS, DEFAULT_WARMUP);
}

typedef struct profile_opts {
  kn_cli_model_opts m;
  int64_t runs, warmup;
  bool json;
  const char *trace, *report, *sweep;
} profile_opts;

static int parse_opts(int argc, char **argv, profile_opts *o) {
  const kn_cli_cmd *cmd = kn_cli_find("profile");
  enum { O_RUNS = 1, O_WARMUP, O_JSON, O_TRACE, O_REPORT, O_SWEEP };
  static const kn_cli_opt opts[] = {KN_CLI_MODEL_OPTS,
                                    {"runs", 0, true, O_RUNS},
                                    {"warmup", 0, true, O_WARMUP},
                                    {"json", 0, false, O_JSON},
                                    {"trace", 0, true, O_TRACE},
                                    {"report", 0, true, O_REPORT},
                                    {"sweep", 0, true, O_SWEEP},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  kn_cli_model_opts_init(&o->m, "profile");
  o->runs = DEFAULT_RUNS;
  o->warmup = DEFAULT_WARMUP;
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    int rc = kn_cli_model_option(&args, id, &o->m);
    if (rc > 0) return rc;
    if (rc == 0) continue;
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_RUNS:
      if (!kn_cli_int(&args, 1, 1000000, &o->runs)) return KN_EXIT_USAGE;
      break;
    case O_WARMUP:
      if (!kn_cli_int(&args, 0, 1000000, &o->warmup)) return KN_EXIT_USAGE;
      break;
    case O_JSON: o->json = true; break;
    case O_TRACE: o->trace = args.arg; break;
    case O_REPORT: o->report = args.arg; break;
    case O_SWEEP:
      if (!strchr(args.arg, '=') || strchr(args.arg, '=')[1] == 0)
        return kn_cli_usage(cmd, "--sweep takes NAME=V1,V2,... such as batch=1,2,4,8, got '%s'",
                            args.arg);
      o->sweep = args.arg;
      break;
    case KN_CLI_POSITIONAL:
      if (o->m.path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      o->m.path = args.arg;
      break;
    }
  }
  if (!o->m.path) return kn_cli_usage(cmd, "MODEL is required");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  return KN_EXIT_OK;
}

/* ---- the sweep ----------------------------------------------------------- */

typedef struct sweep_point {
  int32_t ok;
  double p50_ms, mean_ms;
  uint64_t arena_bytes, weights_bytes, peak_rss_bytes;
  char shapes[512];
} sweep_point;

typedef struct sweep_plan {
  char name[128];
  bool is_input; /* NAME is an input: values are its dims */
  const char *values[MAX_SWEEP];
  char text[1024]; /* the values, split in place */
  int n;
} sweep_plan;

/* Splits --sweep and checks NAME is an input or a dynamic dim of one. */
static int sweep_parse(const profile_opts *o, sweep_plan *sp) {
  const kn_cli_cmd *cmd = kn_cli_find("profile");
  const char *eq = strchr(o->sweep, '=');
  size_t nl = (size_t)(eq - o->sweep);
  if (nl == 0 || nl >= sizeof sp->name || strlen(eq + 1) >= sizeof sp->text)
    return kn_cli_usage(cmd, "--sweep %s: name or values too long", o->sweep);
  memset(sp, 0, sizeof *sp);
  memcpy(sp->name, o->sweep, nl);
  sp->name[nl] = 0;
  strcpy(sp->text, eq + 1);
  sp->n = 0;
  for (char *p = sp->text, *save = NULL, *tok; (tok = strtok_r(p, ",", &save)); p = NULL) {
    if (sp->n == MAX_SWEEP)
      return kn_cli_usage(cmd, "--sweep: at most %d sizes", MAX_SWEEP);
    sp->values[sp->n++] = tok;
  }
  if (!sp->n) return kn_cli_usage(cmd, "--sweep %s: no sizes", o->sweep);
  kn_model *m;
  kn_error err = {0};
  if (kn_model_load(o->m.path, &m, &err)) return kn_cli_error(&err);
  int rc = KN_EXIT_OK;
  bool found = false, engine = kn_model_format_version(m) != 0;
  char params[256] = "";
  size_t used = 0;
  for (int32_t i = 0; i < kn_model_input_count(m) && !found; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) continue;
    if (!strcmp(vi.name, sp->name)) found = sp->is_input = true;
    for (int32_t d = 0; d < vi.rank && !found; d++) {
      const char *p = vi.dim_params[d];
      if (!p || !*p) continue;
      if (!strcmp(p, sp->name)) found = true;
      else if (used < sizeof params && !strstr(params, p))
        used += (size_t)snprintf(params + used, sizeof params - used, "%s%s", used ? ", " : "", p);
    }
  }
  kn_model_free(m);
  if (engine)
    return kn_cli_fail("%s: --sweep builds the model at each size, optimized and not: give the "
                       "ONNX model",
                       o->m.path);
  if (!found)
    return kn_cli_fail("%s: --sweep %s: no input and no dynamic dimension of that name "
                       "(dynamic dimensions: %s)",
                       o->m.path, sp->name, used ? params : "none");
  for (int k = 0; k < sp->n && !rc; k++) {
    int64_t dims[KN_MAX_RANK];
    int32_t rank;
    char *end;
    if (sp->is_input ? !kn_cli_parse_dims(sp->values[k], dims, &rank)
                     : (strtoll(sp->values[k], &end, 10) < 1 || *end))
      rc = kn_cli_usage(cmd, "--sweep %s: '%s' is not %s", sp->name, sp->values[k],
                        sp->is_input ? "dims such as 1x3x224x224" : "a size of at least 1");
  }
  return rc;
}

/* In a child process (its own peak RSS): build at one size and time it. */
static void sweep_child(const profile_opts *o, const sweep_plan *sp, int k, bool optimize,
                        int fd) {
  sweep_point pt;
  memset(&pt, 0, sizeof pt);
  kn_cli_model_opts m = o->m;
  char spec[1200];
  snprintf(spec, sizeof spec, "%s=%s", sp->name, sp->values[k]);
  m.quiet = true;
  if (!optimize) m.bo.no_optimize = 1;
  if (sp->is_input) {
    if (m.n_shapes < KN_CLI_MAX_LIST) m.shapes[m.n_shapes++] = spec;
  } else if (m.n_dim_values < 8) {
    m.dim_values[m.n_dim_values++] = spec;
  }
  kn_cli_session s;
  kn_error err = {0};
  int64_t runs = o->runs < 3 ? 3 : o->runs > 10 ? 10 : o->runs;
  double *ms = calloc((size_t)runs, sizeof *ms);
  int rc = ms ? kn_cli_session_open(&m, &s) : kn_cli_fail("out of memory");
  for (int64_t r = -1; !rc && r < runs; r++) { /* one warm-up */
    double a = kn_cli_now_s();
    if (kn_context_run(s.ctx, &err)) rc = kn_cli_error(&err);
    else if (r >= 0) ms[r] = (kn_cli_now_s() - a) * 1e3;
  }
  if (!rc) {
    kn_model_stats st;
    if (kn_model_stats_get(s.model, &st, &err) == KN_OK) {
      pt.arena_bytes = st.arena_bytes;
      pt.weights_bytes = (uint64_t)st.param_bytes;
    }
    double sum = 0;
    for (int64_t r = 0; r < runs; r++) sum += ms[r];
    qsort(ms, (size_t)runs, sizeof *ms, kn_cli_cmp_double);
    pt.p50_ms = kn_cli_percentile(ms, runs, 0.5);
    pt.mean_ms = sum / (double)runs;
    memcpy(pt.shapes, s.shapes_text, sizeof pt.shapes);
    pt.ok = 1;
  }
  free(ms);
  kn_cli_session_close(&s);
  ssize_t w = write(fd, &pt, sizeof pt);
  _exit(w == (ssize_t)sizeof pt && pt.ok ? 0 : 1);
}

static int sweep_one(const profile_opts *o, const sweep_plan *sp, int k, bool optimize,
                     sweep_point *pt) {
  int fds[2];
  memset(pt, 0, sizeof *pt);
  if (pipe(fds) != 0) return kn_cli_fail("--sweep: pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return kn_cli_fail("--sweep: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    sweep_child(o, sp, k, optimize, fds[1]);
  }
  close(fds[1]);
  ssize_t got = 0;
  while (got < (ssize_t)sizeof *pt) {
    ssize_t r = read(fds[0], (char *)pt + got, sizeof *pt - (size_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  close(fds[0]);
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (got != (ssize_t)sizeof *pt || !pt->ok || !WIFEXITED(status) || WEXITSTATUS(status))
    return kn_cli_fail("%s: --sweep %s=%s (%s) failed%s", o->m.path, sp->name, sp->values[k],
                       optimize ? "optimized" : "unoptimized",
                       WIFSIGNALED(status) ? " (the process was killed)" : "");
  pt->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024;
  return KN_EXIT_OK;
}

static cJSON *point_json(const sweep_point *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "inputs", p->shapes);
  cJSON_AddNumberToObject(o, "arena_bytes", (double)p->arena_bytes);
  cJSON_AddNumberToObject(o, "weights_bytes", (double)p->weights_bytes);
  cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)p->peak_rss_bytes);
  cJSON_AddNumberToObject(o, "p50_ms", p->p50_ms);
  cJSON_AddNumberToObject(o, "mean_ms", p->mean_ms);
  return o;
}

/* ---- statistics of the profiled runs ------------------------------------ */

typedef struct step_stats {
  int32_t index;
  double mean_us, median_us, min_us, max_us;
  uint64_t heap_bytes; /* outside the arena, after the step (last run) */
} step_stats;

typedef struct profile {
  int32_t steps, threads;
  int64_t runs;
  kn_step_span *spans; /* every run's, in order */
  int64_t n_spans, cap_spans;
  int64_t *run_start; /* index of each run's first span */
  double *run_ms;     /* each run's wall time */
  double *run_steps_ms; /* each run's steps added up (thread 0) */
  step_stats *st;
  int64_t base_ns;  /* CLOCK_MONOTONIC of the trace's ts 0 */
  double wall_us;   /* Unix time at base_ns, microseconds */
} profile;

static void profile_free(profile *p) {
  free(p->spans);
  free(p->run_start);
  free(p->run_ms);
  free(p->run_steps_ms);
  free(p->st);
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int run_profiled(const profile_opts *o, kn_cli_session *s, profile *p) {
  kn_error err = {0};
  p->steps = kn_model_step_count(s->model);
  p->threads = kn_context_threads(s->ctx);
  p->runs = o->runs;
  p->run_start = calloc((size_t)p->runs + 1, sizeof *p->run_start);
  p->run_ms = calloc((size_t)p->runs + 1, sizeof *p->run_ms);
  p->run_steps_ms = calloc((size_t)p->runs + 1, sizeof *p->run_steps_ms);
  p->st = calloc((size_t)p->steps + 1, sizeof *p->st);
  if (!p->run_start || !p->run_ms || !p->run_steps_ms || !p->st) return kn_cli_fail("out of memory");
  for (int64_t w = 0; w < o->warmup; w++)
    if (kn_context_run(s->ctx, &err)) return kn_cli_error(&err);
  if (kn_context_set_profiling(s->ctx, 1, &err)) return kn_cli_error(&err);
  struct timespec rt;
  p->base_ns = mono_ns();
  clock_gettime(CLOCK_REALTIME, &rt);
  p->wall_us = (double)rt.tv_sec * 1e6 + (double)rt.tv_nsec * 1e-3;
  for (int64_t r = 0; r < p->runs; r++) {
    int64_t a = mono_ns();
    if (kn_context_run(s->ctx, &err)) return kn_cli_error(&err);
    p->run_ms[r] = (double)(mono_ns() - a) * 1e-6;
    const kn_step_span *sp;
    int32_t n = kn_context_spans(s->ctx, &sp);
    if (p->n_spans + n > p->cap_spans) {
      int64_t cap = (p->n_spans + n) * 2;
      kn_step_span *g = realloc(p->spans, (size_t)cap * sizeof *g);
      if (!g) return kn_cli_fail("out of memory for the profile");
      p->spans = g;
      p->cap_spans = cap;
    }
    memcpy(p->spans + p->n_spans, sp, (size_t)n * sizeof *sp);
    p->run_start[r] = p->n_spans;
    p->n_spans += n;
    for (int32_t k = 0; k < n; k++)
      if (sp[k].thread == 0) p->run_steps_ms[r] += (double)(sp[k].end_ns - sp[k].start_ns) * 1e-6;
  }
  if (kn_context_set_profiling(s->ctx, 0, &err)) return kn_cli_error(&err);
  /* per step over the runs: thread 0's span is the step's time */
  double *v = calloc((size_t)p->runs + 1, sizeof *v);
  if (!v) return kn_cli_fail("out of memory");
  for (int32_t i = 0; i < p->steps; i++) {
    int64_t n = 0;
    double sum = 0;
    for (int64_t r = 0; r < p->runs; r++) {
      int64_t end = r + 1 < p->runs ? p->run_start[r + 1] : p->n_spans;
      for (int64_t k = p->run_start[r]; k < end; k++) {
        const kn_step_span *x = &p->spans[k];
        if (x->step != i || x->thread != 0) continue;
        v[n] = (double)(x->end_ns - x->start_ns) * 1e-3;
        sum += v[n++];
        if (r == p->runs - 1) p->st[i].heap_bytes = x->heap_bytes;
      }
    }
    step_stats *t = &p->st[i];
    t->index = i;
    if (!n) continue;
    qsort(v, (size_t)n, sizeof *v, kn_cli_cmp_double);
    t->mean_us = sum / (double)n;
    t->median_us = kn_cli_percentile(v, n, 0.5);
    t->min_us = v[0];
    t->max_us = v[n - 1];
  }
  free(v);
  return KN_EXIT_OK;
}

/* ---- the profile JSON ------------------------------------------------------ */

static const cJSON *inspect_step(const cJSON *insp, int32_t i) {
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(insp, "step_list"), i);
}

static void copy_item(cJSON *to, const cJSON *from, const char *key, const char *as) {
  const cJSON *x = from ? cJSON_GetObjectItemCaseSensitive(from, key) : NULL;
  if (x) cJSON_AddItemToObject(to, as ? as : key, cJSON_Duplicate(x, 1));
}

static void host_and_process(const char *path, char *host, size_t nh, char *proc, size_t np) {
  if (gethostname(host, nh) != 0) snprintf(host, nh, "localhost");
  host[nh - 1] = 0;
  const char *base = strrchr(path, '/');
  snprintf(proc, np, "kiln profile %s (pid %d)", base ? base + 1 : path, (int)getpid());
}

static cJSON *profile_json(const profile_opts *o, const kn_cli_session *s, const profile *p,
                           const cJSON *insp, const sweep_plan *sp, const sweep_point *pts) {
  cJSON *j = cJSON_CreateObject();
  kn_error err = {0};
  kn_model_stats st;
  memset(&st, 0, sizeof st);
  if (kn_model_stats_get(s->model, &st, &err)) memset(&st, 0, sizeof st);
  char host[256], proc[512];
  host_and_process(o->m.path, host, sizeof host, proc, sizeof proc);
  cJSON_AddStringToObject(j, "format", "kiln-profile");
  cJSON_AddNumberToObject(j, "version", 1);
  cJSON_AddStringToObject(j, "model", o->m.path);
  cJSON_AddBoolToObject(j, "engine", s->engine);
  cJSON_AddStringToObject(j, "inputs", s->shapes_text);
  cJSON_AddStringToObject(j, "host", host);
  cJSON_AddStringToObject(j, "process", proc);
  cJSON_AddNumberToObject(j, "pid", (double)getpid());
  cJSON_AddNumberToObject(j, "wall_clock_start_us", floor(p->wall_us));
  cJSON_AddNumberToObject(j, "threads", p->threads);
  cJSON_AddNumberToObject(j, "runs", (double)p->runs);
  cJSON_AddNumberToObject(j, "warmup", (double)o->warmup);
  double *ms = malloc((size_t)p->runs * sizeof *ms);
  double sum = 0, cover = 0;
  for (int64_t r = 0; r < p->runs; r++) {
    sum += p->run_ms[r];
    cover += p->run_ms[r] > 0 ? p->run_steps_ms[r] / p->run_ms[r] : 0;
  }
  cJSON *lat = cJSON_AddObjectToObject(j, "latency_ms");
  if (ms) {
    memcpy(ms, p->run_ms, (size_t)p->runs * sizeof *ms);
    qsort(ms, (size_t)p->runs, sizeof *ms, kn_cli_cmp_double);
    cJSON_AddNumberToObject(lat, "mean", sum / (double)p->runs);
    cJSON_AddNumberToObject(lat, "median", kn_cli_percentile(ms, p->runs, 0.5));
    cJSON_AddNumberToObject(lat, "p90", kn_cli_percentile(ms, p->runs, 0.9));
    cJSON_AddNumberToObject(lat, "p99", kn_cli_percentile(ms, p->runs, 0.99));
    cJSON_AddNumberToObject(lat, "min", ms[0]);
    cJSON_AddNumberToObject(lat, "max", ms[p->runs - 1]);
    free(ms);
  }
  double total_mean = 0, total_median = 0;
  for (int32_t i = 0; i < p->steps; i++) {
    total_mean += p->st[i].mean_us;
    total_median += p->st[i].median_us;
  }
  cJSON_AddNumberToObject(j, "steps_total_us", total_mean);
  cJSON_AddNumberToObject(j, "steps_total_median_us", total_median);
  /* the steps' spans on the calling thread over each run's wall time */
  cJSON_AddNumberToObject(j, "steps_cover", p->runs ? cover / (double)p->runs : 0);
  {
    double *us = calloc((size_t)p->steps + 1, sizeof *us);
    for (int32_t i = 0; us && i < p->steps; i++) us[p->st[i].index] = p->st[i].mean_us;
    int32_t n_ref = 0, worst = -1;
    double share = us ? kn_cli_reference_share(s->model, us, &n_ref, &worst) : 0;
    cJSON_AddNumberToObject(j, "reference_share", share);
    cJSON_AddNumberToObject(j, "reference_steps", n_ref);
    free(us);
  }
  cJSON *steps = cJSON_AddArrayToObject(j, "steps");
  cJSON *timeline = cJSON_CreateArray();
  for (int32_t i = 0; i < p->steps; i++) {
    kn_step_info si;
    kn_step_io io;
    if (kn_model_step_info(s->model, i, &si) || kn_model_step_io(s->model, i, p->threads, &io))
      continue;
    const step_stats *t = &p->st[i];
    const cJSON *is = inspect_step(insp, i);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "index", i);
    cJSON_AddStringToObject(x, "name", si.name);
    cJSON_AddStringToObject(x, "op", si.op);
    copy_item(x, is, "onnx_nodes", NULL);
    cJSON_AddStringToObject(x, "tactic", si.tactic ? si.tactic : "reference");
    cJSON_AddStringToObject(x, "tiling", si.tiling);
    copy_item(x, is, "inputs", NULL);
    copy_item(x, is, "outputs", NULL);
    cJSON_AddNumberToObject(x, "flops", si.flops);
    cJSON_AddNumberToObject(x, "bytes_read", (double)si.bytes_read);
    cJSON_AddNumberToObject(x, "bytes_written", (double)si.bytes_written);
    cJSON_AddNumberToObject(x, "mean_us", t->mean_us);
    cJSON_AddNumberToObject(x, "median_us", t->median_us);
    cJSON_AddNumberToObject(x, "min_us", t->min_us);
    cJSON_AddNumberToObject(x, "max_us", t->max_us);
    cJSON_AddNumberToObject(x, "share", total_mean > 0 ? t->mean_us / total_mean : 0);
    double us = t->median_us > 0 ? t->median_us : 0;
    cJSON_AddNumberToObject(x, "gflops", us > 0 ? si.flops / (us * 1e3) : 0);
    cJSON_AddNumberToObject(x, "gbs",
                            us > 0 ? (double)(si.bytes_read + si.bytes_written) / (us * 1e3) : 0);
    cJSON_AddNumberToObject(x, "predicted_us", io.predicted_us);
    cJSON_AddStringToObject(x, "bound", io.bound);
    cJSON_AddNumberToObject(x, "intensity", io.intensity);
    const cJSON *iio = is ? cJSON_GetObjectItemCaseSensitive(is, "io") : NULL;
    copy_item(x, iio, "bytes", "io_bytes");
    cJSON_AddNumberToObject(x, "arena_live_bytes", (double)si.arena_live_bytes);
    cJSON_AddNumberToObject(x, "heap_bytes", (double)t->heap_bytes);
    cJSON_AddItemToArray(steps, x);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", i);
    cJSON_AddStringToObject(e, "name", si.name);
    cJSON_AddNumberToObject(e, "arena_live_bytes", (double)si.arena_live_bytes);
    cJSON_AddNumberToObject(e, "heap_bytes", (double)t->heap_bytes);
    cJSON_AddItemToArray(timeline, e);
  }
  cJSON *mem = cJSON_AddObjectToObject(j, "memory");
  cJSON_AddNumberToObject(mem, "arena_bytes", (double)st.arena_bytes);
  cJSON_AddNumberToObject(mem, "weights_bytes", (double)st.param_bytes);
  cJSON_AddNumberToObject(mem, "peak_rss_bytes", (double)kn_cli_peak_rss());
  cJSON_AddItemToObject(mem, "timeline", timeline);
  copy_item(j, insp, "machine", NULL);
  if (sp) {
    cJSON *sw = cJSON_AddObjectToObject(j, "sweep");
    cJSON_AddStringToObject(sw, "name", sp->name);
    cJSON *sizes = cJSON_AddArrayToObject(sw, "sizes");
    for (int k = 0; k < sp->n; k++) {
      cJSON *z = cJSON_CreateObject();
      char *end;
      long long v = strtoll(sp->values[k], &end, 10);
      if (!sp->is_input && !*end) cJSON_AddNumberToObject(z, "value", (double)v);
      else cJSON_AddStringToObject(z, "value", sp->values[k]);
      cJSON_AddItemToObject(z, "optimized", point_json(&pts[2 * k]));
      cJSON_AddItemToObject(z, "unoptimized", point_json(&pts[2 * k + 1]));
      cJSON_AddItemToArray(sizes, z);
    }
  }
  return j;
}

/* ---- the table ------------------------------------------------------------- */

static int by_time(const void *a, const void *b) {
  const step_stats *x = a, *y = b;
  if (x->mean_us != y->mean_us) return x->mean_us < y->mean_us ? 1 : -1;
  return (x->index > y->index) - (x->index < y->index);
}

static int count_covers(const char *c) {
  if (!c || !*c) return 0;
  int n = 1;
  for (; *c; c++) n += *c == ',';
  return n;
}

static void print_table(const profile_opts *o, const kn_cli_session *s, const profile *p,
                        const cJSON *j) {
  const cJSON *lat = cJSON_GetObjectItemCaseSensitive(j, "latency_ms");
#define LAT(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(lat, k))
  printf("%s: %s, %d thread%s, %lld profiled runs after %lld warm-up%s\n", o->m.path,
         s->shapes_text, p->threads, p->threads == 1 ? "" : "s", (long long)p->runs,
         (long long)o->warmup, o->warmup == 1 ? "" : "s");
  printf("latency (ms): mean %.3f  median %.3f  p90 %.3f  p99 %.3f  min %.3f  max %.3f\n",
         LAT("mean"), LAT("median"), LAT("p90"), LAT("p99"), LAT("min"), LAT("max"));
  double total = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "steps_total_us"));
  double cover = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "steps_cover"));
  printf("steps: %d, %.3f ms a run added up (mean), %.1f%% of each run's wall time\n", p->steps,
         total * 1e-3, 100 * cover);
  {
    double *us = calloc((size_t)p->steps + 1, sizeof *us);
    char census[512];
    for (int32_t i = 0; us && i < p->steps; i++) us[p->st[i].index] = p->st[i].mean_us;
    if (us) {
      kn_cli_reference_line(s->model, us, census, sizeof census);
      printf("%s\n", census);
    }
    free(us);
  }
#undef LAT
  step_stats *order = malloc((size_t)p->steps * sizeof *order + 1);
  if (!order) return;
  memcpy(order, p->st, (size_t)p->steps * sizeof *order);
  qsort(order, (size_t)p->steps, sizeof *order, by_time);
  printf("\n  %-4s %-34s %-18s %-22s %9s %9s %6s %5s %9s %9s %8s %7s %9s %-8s %9s\n", "#", "name",
         "op", "kernel", "mean us", "median us", "share", "nodes", "MFLOP", "KiB r+w", "GFLOP/s",
         "GB/s", "pred us", "bound", "arena KiB");
  for (int32_t k = 0; k < p->steps; k++) {
    const step_stats *t = &order[k];
    kn_step_info si;
    kn_step_io io;
    if (kn_model_step_info(s->model, t->index, &si) ||
        kn_model_step_io(s->model, t->index, p->threads, &io))
      continue;
    double us = t->median_us;
    printf("  %-4d %-34.34s %-18.18s %-22.22s %9.1f %9.1f %5.1f%% %5d %9.3f %9.1f %8.1f %7.1f "
           "%9.1f %-8s %9.1f\n",
           t->index, si.name, si.op, si.tactic ? si.tactic : "reference", t->mean_us, us,
           total > 0 ? 100 * t->mean_us / total : 0, count_covers(si.covers), si.flops * 1e-6,
           (double)(si.bytes_read + si.bytes_written) / 1024.0,
           us > 0 ? si.flops / (us * 1e3) : 0,
           us > 0 ? (double)(si.bytes_read + si.bytes_written) / (us * 1e3) : 0, io.predicted_us,
           io.bound, (double)si.arena_live_bytes / 1024.0);
  }
  free(order);
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "memory");
#define MEM(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(mem, k)) / 1048576.0
  printf("\nmemory: arena %.2f MiB, weights %.2f MiB, peak RSS %.1f MiB\n", MEM("arena_bytes"),
         MEM("weights_bytes"), MEM("peak_rss_bytes"));
#undef MEM
  const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "sweep");
  if (sw) {
    printf("\nsweep %s (each size built and run in a process of its own):\n",
           cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sw, "name")));
    printf("  %-16s | %-41s | %-41s\n", "", "optimized", "unoptimized");
    printf("  %-16s | %9s %9s %10s %9s | %9s %9s %10s %9s\n", "size", "arena MiB", "wts MiB",
           "RSS MiB", "p50 ms", "arena MiB", "wts MiB", "RSS MiB", "p50 ms");
    const cJSON *z;
    cJSON_ArrayForEach(z, cJSON_GetObjectItemCaseSensitive(sw, "sizes")) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(z, "value");
      char vt[64];
      if (cJSON_IsNumber(v)) snprintf(vt, sizeof vt, "%.0f", cJSON_GetNumberValue(v));
      else snprintf(vt, sizeof vt, "%s", cJSON_GetStringValue(v));
      printf("  %-16.16s", vt);
      for (int u = 0; u < 2; u++) {
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(z, u ? "unoptimized" : "optimized");
#define Q(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(q, k))
        printf(" | %9.2f %9.2f %10.1f %9.3f", Q("arena_bytes") / 1048576.0,
               Q("weights_bytes") / 1048576.0, Q("peak_rss_bytes") / 1048576.0, Q("p50_ms"));
#undef Q
      }
      printf("\n");
    }
  }
}

/* ---- the Chrome trace ------------------------------------------------------ */

typedef struct shape_of {
  const char *name;
  char text[96];
} shape_of;

static void value_text(const kn_value_info *vi, char *buf, size_t n) {
  int64_t d[KN_MAX_RANK];
  int32_t rank = vi->rank < 0 ? 0 : vi->rank;
  for (int32_t k = 0; k < rank; k++) d[k] = vi->dims[k];
  if (vi->rank < 0) snprintf(buf, n, "?");
  else if (!rank) snprintf(buf, n, "scalar");
  else kn_cli_dims_text(d, rank, buf, n);
}

static int write_trace(const char *path, const profile_opts *o, const kn_cli_session *s,
                       const profile *p) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return kn_cli_fail("%s: cannot write: %s", path, strerror(errno));
  char host[256], proc[512];
  host_and_process(o->m.path, host, sizeof host, proc, sizeof proc);
  int pid = (int)getpid();
  /* per step: its args, once */
  char **args = calloc((size_t)p->steps + 1, sizeof *args);
  uint64_t *live = calloc((size_t)p->steps + 1, sizeof *live);
  shape_of *shapes = calloc((size_t)p->steps * 4 + (size_t)s->nin + 1, sizeof *shapes);
  int32_t n_shapes = 0;
  for (int32_t i = 0; shapes && i < s->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(s->model, i, &vi)) continue;
    shapes[n_shapes].name = vi.name;
    kn_cli_dims_text(s->inputs[i].dims, s->inputs[i].rank, shapes[n_shapes].text,
                     sizeof shapes[n_shapes].text);
    n_shapes++;
  }
  for (int32_t i = 0; shapes && i < p->steps; i++) {
    kn_step_info si;
    if (kn_model_step_info(s->model, i, &si)) continue;
    for (int32_t k = 0; k < si.n_outputs && k < 4; k++) {
      shapes[n_shapes].name = si.outputs[k].name;
      value_text(&si.outputs[k], shapes[n_shapes].text, sizeof shapes[n_shapes].text);
      n_shapes++;
    }
  }
  for (int32_t i = 0; args && live && shapes && i < p->steps; i++) {
    kn_step_info si;
    if (kn_model_step_info(s->model, i, &si)) continue;
    live[i] = si.arena_live_bytes;
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "step", i);
    cJSON_AddStringToObject(a, "op", si.op);
    cJSON_AddStringToObject(a, "tactic", si.tactic ? si.tactic : "reference");
    if (si.tiling[0]) cJSON_AddStringToObject(a, "tiling", si.tiling);
    cJSON *in = cJSON_AddArrayToObject(a, "inputs");
    for (int32_t k = 0; k < si.n_inputs; k++) {
      const char *t = "";
      for (int32_t q = 0; q < n_shapes; q++)
        if (!strcmp(shapes[q].name, si.inputs[k])) t = shapes[q].text;
      char buf[256];
      snprintf(buf, sizeof buf, "%s %s", si.inputs[k], t);
      cJSON_AddItemToArray(in, cJSON_CreateString(buf));
    }
    cJSON *out = cJSON_AddArrayToObject(a, "outputs");
    for (int32_t k = 0; k < si.n_outputs && k < 4; k++) {
      char t[96], buf[256];
      value_text(&si.outputs[k], t, sizeof t);
      snprintf(buf, sizeof buf, "%s %s", si.outputs[k].name, t);
      cJSON_AddItemToArray(out, cJSON_CreateString(buf));
    }
    cJSON_AddStringToObject(a, "covers", si.covers ? si.covers : "");
    cJSON_AddNumberToObject(a, "flops", si.flops);
    args[i] = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
  }
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"format\": \"kiln-trace\", "
             "\"version\": 1, \"wall_clock_start_us\": %.0f, \"host\": ",
          floor(p->wall_us));
  kn_cli_json_str(f, host);
  fprintf(f, ", \"process\": ");
  kn_cli_json_str(f, proc);
  fprintf(f, ", \"pid\": %d, \"model\": ", pid);
  kn_cli_json_str(f, o->m.path);
  fprintf(f, ", \"inputs\": ");
  kn_cli_json_str(f, s->shapes_text);
  fprintf(f, ", \"threads\": %d, \"runs\": %lld},\n\"traceEvents\": [\n", p->threads,
          (long long)p->runs);
  fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, \"args\": "
             "{\"name\": ",
          pid);
  kn_cli_json_str(f, proc);
  fprintf(f, "}}");
  for (int32_t t = 0; t < p->threads; t++) {
    char tn[64];
    if (t) snprintf(tn, sizeof tn, "kiln worker %d", t);
    else snprintf(tn, sizeof tn, "kiln caller (thread 0)");
    fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": "
               "{\"name\": \"%s\"}}",
            pid, t, tn);
    fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": %d, \"tid\": %d, "
               "\"args\": {\"sort_index\": %d}}",
            pid, t, t);
  }
  for (int64_t r = 0; r < p->runs; r++) {
    int64_t a = p->run_start[r], b = r + 1 < p->runs ? p->run_start[r + 1] : p->n_spans;
    if (a < b) {
      int64_t t0 = p->spans[a].start_ns, t1 = t0;
      for (int64_t k = a; k < b; k++)
        if (p->spans[k].end_ns > t1) t1 = p->spans[k].end_ns;
      fprintf(f, ",\n{\"ph\": \"X\", \"cat\": \"run\", \"name\": \"run\", \"pid\": %d, "
                 "\"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"run\": %lld, "
                 "\"latency_ms\": %.4f}}",
              pid, (double)(t0 - p->base_ns) * 1e-3, (double)(t1 - t0) * 1e-3, (long long)r,
              p->run_ms[r]);
    }
    for (int64_t k = a; k < b; k++) {
      const kn_step_span *x = &p->spans[k];
      kn_step_info si;
      if (kn_model_step_info(s->model, x->step, &si)) continue;
      double ts = (double)(x->start_ns - p->base_ns) * 1e-3;
      fprintf(f, ",\n{\"ph\": \"X\", \"cat\": ");
      kn_cli_json_str(f, si.op);
      fprintf(f, ", \"name\": ");
      kn_cli_json_str(f, si.name);
      fprintf(f, ", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": %s}", pid,
              x->thread, ts, (double)(x->end_ns - x->start_ns) * 1e-3,
              args && args[x->step] ? args[x->step] : "{}");
      if (x->thread == 0)
        fprintf(f, ",\n{\"ph\": \"C\", \"name\": \"memory\", \"pid\": %d, \"tid\": 0, \"ts\": "
                   "%.3f, \"args\": {\"arena bytes\": %llu, \"heap bytes\": %llu}}",
                pid, ts, (unsigned long long)(live ? live[x->step] : 0),
                (unsigned long long)x->heap_bytes);
    }
  }
  fprintf(f, "\n]}\n");
  for (int32_t i = 0; args && i < p->steps; i++) free(args[i]);
  free(args);
  free(live);
  free(shapes);
  bool ok = !ferror(f);
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return kn_cli_fail("%s: cannot write: %s", path, strerror(errno));
  }
  return KN_EXIT_OK;
}

/* ---- the command ----------------------------------------------------------- */

int kn_cmd_profile(int argc, char **argv) {
  profile_opts o;
  memset(&o, 0, sizeof o);
  int rc = parse_opts(argc, argv, &o);
  if (rc) return rc;
  sweep_plan sp;
  sweep_point *pts = NULL;
  /* the sweep first, while this process is small: each child's RSS is its own */
  if (o.sweep) {
    if ((rc = sweep_parse(&o, &sp))) return rc;
    pts = calloc((size_t)sp.n * 2, sizeof *pts);
    if (!pts) return kn_cli_fail("out of memory");
    for (int k = 0; k < sp.n && !rc; k++) {
      if (!o.json) fprintf(stderr, "kiln profile: sweep %s=%s\n", sp.name, sp.values[k]);
      rc = sweep_one(&o, &sp, k, true, &pts[2 * k]);
      if (!rc) rc = sweep_one(&o, &sp, k, false, &pts[2 * k + 1]);
    }
    if (rc) {
      free(pts);
      return rc;
    }
  }
  kn_cli_session s;
  profile p;
  memset(&p, 0, sizeof p);
  cJSON *insp = NULL, *j = NULL;
  char *insp_text = NULL, *text = NULL;
  rc = kn_cli_session_open(&o.m, &s);
  if (!rc) rc = run_profiled(&o, &s, &p);
  if (rc) goto done;
  rc = KN_EXIT_ERROR;
  double *measured = calloc((size_t)p.steps + 1, sizeof *measured);
  if (!measured) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  for (int32_t i = 0; i < p.steps; i++) measured[i] = p.st[i].median_us;
  insp_text = kn_cli_inspect_json(s.model, o.m.path, p.threads, measured, NULL, NULL, 0);
  free(measured);
  insp = insp_text ? cJSON_Parse(insp_text) : NULL;
  if (!insp) {
    rc = kn_cli_fail("%s: could not describe the model's steps", o.m.path);
    goto done;
  }
  j = profile_json(&o, &s, &p, insp, o.sweep ? &sp : NULL, pts);
  text = j ? cJSON_Print(j) : NULL;
  if (!text) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  if (o.json) printf("%s\n", text);
  else print_table(&o, &s, &p, j);
  if (o.trace && (rc = write_trace(o.trace, &o, &s, &p))) goto done;
  if (o.report) {
    kn_error err = {0};
    char title[512];
    const char *base = strrchr(o.m.path, '/');
    snprintf(title, sizeof title, "kiln profile: %s", base ? base + 1 : o.m.path);
    if (kn_cli_dashboard_write(o.report, title, insp_text, text, &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
  }
  if (!o.json && (o.trace || o.report))
    printf("\n%s%s%s%s%s\n", o.trace ? "trace: " : "", o.trace ? o.trace : "",
           o.trace && o.report ? "; " : "", o.report ? "report: " : "", o.report ? o.report : "");
  rc = KN_EXIT_OK;
done:
  cJSON_Delete(j);
  cJSON_Delete(insp);
  free(text);
  free(insp_text);
  free(pts);
  profile_free(&p);
  kn_cli_session_close(&s);
  return rc;
}
