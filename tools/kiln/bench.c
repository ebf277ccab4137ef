/* kiln bench MODEL|ENGINE: time runs the way trtexec does for TensorRT:
 * latency percentiles, throughput, startup and peak memory, on given or
 * generated inputs. */
#include "cli.h"
#include "core/core.h"
#include "engine/engine.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_OPTS 256
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what an input feeds --------------------------------------------------- */

typedef struct input_role {
  int64_t vocab; /* > 0: token ids below this */
  bool mask;     /* all ones */
} input_role;

static bool name_has(const char *name, const char *word) {
  size_t n = strlen(word);
  for (const char *p = name; *p; p++) {
    size_t k = 0;
    while (k < n && p[k] && tolower((unsigned char)p[k]) == word[k]) k++;
    if (k == n) return true;
  }
  return false;
}

/* Ops that carry an index tensor along unchanged in value (first input). */
static bool passes_values(const char *op) {
  static const char *const ops[] = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                    "Identity", "Expand", "Transpose"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i])) return true;
  return false;
}

/* Follows value v to the ops that read it: a Gather from a constant [V, D]
 * table makes it token ids below V (the smallest V when it indexes several
 * tables), a Cast followed by Sub or Mul makes it a mask. */
static void find_role(const kn_graph *g, int32_t v, bool cast_seen, int depth, input_role *r) {
  if (depth > 8) return;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int32_t k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] != v) continue;
      if (!strcmp(n->op_type, "Gather") && k == 1 && n->inputs[0] >= 0) {
        const kn_tensor *table = g->values[n->inputs[0]].constant;
        if (table && table->rank == 2 && table->dims[0] > 0 &&
            (r->vocab == 0 || table->dims[0] < r->vocab))
          r->vocab = table->dims[0];
      } else if (cast_seen && (!strcmp(n->op_type, "Sub") || !strcmp(n->op_type, "Mul"))) {
        r->mask = true;
      } else if (k == 0 && passes_values(n->op_type) && n->n_outputs > 0 && n->outputs[0] >= 0) {
        find_role(g, n->outputs[0], cast_seen || !strcmp(n->op_type, "Cast"), depth + 1, r);
      }
    }
  }
}

static input_role role_of(const kn_model *m, int32_t index) {
  input_role r = {0, false};
  const kn_graph *g = kn_model_ir(m)->graph;
  int32_t v = g->inputs[m->inputs[index]];
  if (name_has(g->values[v].name, "mask")) r.mask = true;
  else find_role(g, v, false, 0, &r);
  return r;
}

/* ---- shapes ---------------------------------------------------------------- */

/* "1x3x224x224" -> dims; false when malformed. */
static bool parse_dims(const char *s, int64_t *dims, int32_t *rank) {
  *rank = 0;
  if (!*s) return true; /* a scalar */
  for (const char *p = s;;) {
    char *end;
    if (*p < '0' || *p > '9' || *rank == KN_MAX_RANK) return false;
    long long d = strtoll(p, &end, 10);
    if (d > (1ll << 40)) return false;
    dims[(*rank)++] = d;
    if (!*end) return true;
    if (*end != 'x' && *end != 'X') return false;
    p = end + 1;
  }
}

/* The value of NAME=... for input `name` among specs, or NULL. */
static const char *spec_for(const char *const *specs, int n, const char *name) {
  const char *found = NULL;
  for (int k = 0; k < n; k++) {
    const char *eq = strrchr(specs[k], '=');
    if (eq && strlen(name) == (size_t)(eq - specs[k]) &&
        !strncmp(name, specs[k], (size_t)(eq - specs[k])))
      found = eq + 1;
  }
  return found;
}

static bool seq_like(const char *param) {
  static const char *const words[] = {"seq", "len", "token", "time", "step", "word"};
  for (size_t i = 0; param && i < sizeof words / sizeof *words; i++)
    if (name_has(param, words[i])) return true;
  return false;
}

/* Size of dynamic dim d of an input when nothing says it: the first dim is
 * a batch (1); a later one named like a sequence, or any later dim of an
 * integer input (token ids [batch, sequence]), is a sequence (128); one
 * named height or width is an image side (224); anything else 1.  Kept
 * within the range of a profile. */
static int64_t default_dim(const kn_value_info *vi, int32_t d, const kn_value_info *pmin,
                           const kn_value_info *pmax) {
  const char *p = vi->dim_params[d];
  int64_t v = 1;
  if (d > 0 && (seq_like(p) || kn_dtype_is_int(vi->dtype))) v = 128;
  else if (d > 0 && p && (name_has(p, "height") || name_has(p, "width"))) v = 224;
  if (pmin && pmin->rank == vi->rank && pmax && pmax->rank == vi->rank) {
    if (v < pmin->dims[d]) v = pmin->dims[d];
    if (v > pmax->dims[d]) v = pmax->dims[d];
  }
  return v;
}

static void dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  for (int32_t d = 0; d < rank && o < n; d++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
}

/* ---- generated data ------------------------------------------------------- */

static kn_status make_input(const kn_value_info *vi, const int64_t *dims, int32_t rank,
                            input_role role, kn_cli_rng *r, kn_tensor *t, kn_error *err) {
  kn_dtype dt = vi->dtype ? vi->dtype : KN_DTYPE_F32;
  if (dt == KN_DTYPE_STRING) {
    snprintf(err->msg, sizeof err->msg,
             "input '%s' is a string tensor: give it with --input NAME=FILE", vi->name);
    return err->status = KN_ERR_UNSUPPORTED;
  }
  kn_status st = kn_tensor_alloc(t, dt, rank, dims, err);
  if (st) return st;
  int64_t n = kn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = kn_cli_rng_next(r);
    if (kn_dtype_is_float(dt)) {
      kn_store_f64(t->data, dt, i, (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    } else {
      int64_t v = role.mask ? 1 : role.vocab > 0 ? (int64_t)(x % (uint64_t)role.vocab)
                                                 : (int64_t)(x >> 63);
      kn_store_i64(t->data, dt, i, v);
    }
  }
  return KN_OK;
}

/* ---- statistics ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (as numpy's default and
 * bench/ort_bench.js do), so kiln's and ONNX Runtime's p50 compare. */
static double percentile(const double *sorted, int64_t n, double p) {
  double idx = (double)(n - 1) * p;
  int64_t lo = (int64_t)floor(idx), hi = (int64_t)ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - (double)lo);
}

static uint64_t peak_rss_bytes(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- the command ----------------------------------------------------------- */

typedef struct bench_opts {
  const char *path, *input_dir, *save_dir;
  const char *shapes[MAX_OPTS], *named[MAX_OPTS], *profiles[MAX_OPTS], *disabled[MAX_OPTS];
  int n_shapes, n_named, n_profiles, n_disabled;
  int64_t threads, runs, warmup, seed;
  double duration;
  bool json, build_opts, per_step;
  kn_build_options bo;
} bench_opts;

static int parse_opts(int argc, char **argv, bench_opts *o) {
  const kn_cli_cmd *cmd = kn_cli_find("bench");
  enum {
    O_THREADS = 1, O_RUNS, O_DURATION, O_WARMUP, O_SHAPE, O_INPUT, O_SEED, O_JSON,
    O_PROFILE, O_DISABLE_PASS, O_WORKSPACE, O_NO_OPTIMIZE, O_REFERENCE, O_INPUT_DIR,
    O_SAVE_INPUTS, O_PER_STEP
  };
  static const kn_cli_opt opts[] = {{"threads", 0, true, O_THREADS},
                                    {"runs", 0, true, O_RUNS},
                                    {"duration", 0, true, O_DURATION},
                                    {"warmup", 0, true, O_WARMUP},
                                    {"shape", 0, true, O_SHAPE},
                                    {"input", 0, true, O_INPUT},
                                    {"seed", 0, true, O_SEED},
                                    {"json", 0, false, O_JSON},
                                    {"profile", 0, true, O_PROFILE},
                                    {"disable-pass", 0, true, O_DISABLE_PASS},
                                    {"workspace", 0, true, O_WORKSPACE},
                                    {"no-optimize", 0, false, O_NO_OPTIMIZE},
                                    {"reference-kernels", 0, false, O_REFERENCE},
                                    {"input-dir", 0, true, O_INPUT_DIR},
                                    {"save-inputs", 0, true, O_SAVE_INPUTS},
                                    {"per-step", 0, false, O_PER_STEP},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  kn_build_options_init(&o->bo);
  o->warmup = 3;
  o->seed = 1;
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    const char **list = NULL;
    int *count = NULL;
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &o->threads)) return KN_EXIT_USAGE;
      break;
    case O_RUNS:
      if (!kn_cli_int(&args, 1, 100000000, &o->runs)) return KN_EXIT_USAGE;
      break;
    case O_DURATION:
      if (!kn_cli_double(&args, 0.001, 1e6, &o->duration)) return KN_EXIT_USAGE;
      break;
    case O_WARMUP:
      if (!kn_cli_int(&args, 0, 100000000, &o->warmup)) return KN_EXIT_USAGE;
      break;
    case O_SEED:
      if (!kn_cli_int(&args, 0, INT64_MAX, &o->seed)) return KN_EXIT_USAGE;
      break;
    case O_JSON: o->json = true; break;
    case O_PER_STEP: o->per_step = true; break;
    case O_INPUT_DIR: o->input_dir = args.arg; break;
    case O_SAVE_INPUTS: o->save_dir = args.arg; break;
    case O_NO_OPTIMIZE: o->bo.no_optimize = 1, o->build_opts = true; break;
    case O_REFERENCE: o->bo.reference_kernels = 1, o->build_opts = true; break;
    case O_WORKSPACE:
      if (!kn_cli_parse_bytes(args.arg, &o->bo.workspace))
        return kn_cli_usage(cmd, "--workspace takes a byte count such as 268435456 or 256M, "
                                 "got '%s'", args.arg);
      o->build_opts = true;
      break;
    case O_SHAPE: list = o->shapes, count = &o->n_shapes; break;
    case O_INPUT: list = o->named, count = &o->n_named; break;
    case O_PROFILE: list = o->profiles, count = &o->n_profiles, o->build_opts = true; break;
    case O_DISABLE_PASS: list = o->disabled, count = &o->n_disabled, o->build_opts = true; break;
    case KN_CLI_POSITIONAL:
      if (o->path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      o->path = args.arg;
      break;
    }
    if (list) {
      if (*count == MAX_OPTS) return kn_cli_usage(cmd, "too many %s options", args.flag);
      if ((id == O_SHAPE || id == O_INPUT) && !strchr(args.arg, '='))
        return kn_cli_usage(cmd, "--%s takes NAME=%s, got '%s'", id == O_SHAPE ? "shape" : "input",
                            id == O_SHAPE ? "DIMS" : "FILE", args.arg);
      if (id == O_SHAPE) {
        int64_t dims[KN_MAX_RANK];
        int32_t rank;
        if (!parse_dims(strrchr(args.arg, '=') + 1, dims, &rank))
          return kn_cli_usage(cmd, "--shape takes NAME=DIMS such as input=1x3x224x224, got '%s'",
                              args.arg);
      }
      list[(*count)++] = args.arg;
    }
  }
  if (!o->path) return kn_cli_usage(cmd, "MODEL is required");
  if (o->runs && o->duration > 0) return kn_cli_usage(cmd, "--runs and --duration exclude each other");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  return KN_EXIT_OK;
}

typedef struct bench_state {
  kn_model *model;
  kn_context *ctx;
  kn_tensor *inputs;
  bool *given; /* read from a file rather than generated */
  int32_t nin;
  char **shape_specs; /* shapes given to kn_model_build */
  int32_t n_specs;
  double *samples; /* ms */
  int64_t n_samples, cap;
  char shapes_text[512];
} bench_state;

static void state_free(bench_state *s) {
  if (s->inputs)
    for (int32_t i = 0; i < s->nin; i++) kn_tensor_release(&s->inputs[i]);
  free(s->inputs);
  free(s->given);
  for (int32_t i = 0; i < s->n_specs; i++) free(s->shape_specs[i]);
  free(s->shape_specs);
  free(s->samples);
  kn_context_free(s->ctx);
  kn_model_free(s->model);
}

/* Reads --input files and decides every input's dims: from its file, its
 * --shape, else defaults for dynamic dims (noted on stderr).  For an ONNX
 * model the chosen dims also go to kn_model_build, so that the model is
 * built for the shapes it is timed on. */
static int plan_inputs(const bench_opts *o, bench_state *s, int64_t (*dims)[KN_MAX_RANK],
                       int32_t *ranks, bool engine) {
  kn_error err = {0};
  const kn_model *m = s->model;
  for (int k = 0; k < o->n_named; k++) {
    const char *eq = strchr(o->named[k], '=');
    bool found = false;
    for (int32_t i = 0; i < s->nin && !found; i++) {
      kn_value_info vi;
      found = kn_model_input_info(m, i, &vi) == KN_OK && strlen(vi.name) == (size_t)(eq - o->named[k]) &&
              !strncmp(vi.name, o->named[k], (size_t)(eq - o->named[k]));
    }
    if (!found)
      return kn_cli_fail("%s: --input %.*s: the model has no input of that name", o->path,
                         (int)(eq - o->named[k]), o->named[k]);
  }
  for (int k = 0; k < o->n_shapes; k++) {
    const char *eq = strrchr(o->shapes[k], '=');
    bool found = false;
    for (int32_t i = 0; i < s->nin && !found; i++) {
      kn_value_info vi;
      found = kn_model_input_info(m, i, &vi) == KN_OK && strlen(vi.name) == (size_t)(eq - o->shapes[k]) &&
              !strncmp(vi.name, o->shapes[k], (size_t)(eq - o->shapes[k]));
    }
    if (!found)
      return kn_cli_fail("%s: --shape %.*s: the model has no input of that name", o->path,
                         (int)(eq - o->shapes[k]), o->shapes[k]);
  }
  s->shape_specs = calloc((size_t)s->nin + 1, sizeof *s->shape_specs);
  if (!s->shape_specs) return kn_cli_fail("out of memory");
  size_t used = 0;
  for (int32_t i = 0; i < s->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) return kn_cli_fail("%s: input %d has no info", o->path, i);
    const char *file = spec_for(o->named, o->n_named, vi.name);
    char path[4096];
    if (!file && o->input_dir) {
      snprintf(path, sizeof path, "%s/input_%d.pb", o->input_dir, i);
      if (access(path, F_OK) != 0) snprintf(path, sizeof path, "%s/input_%d.npy", o->input_dir, i);
      if (access(path, F_OK) == 0) file = path;
    }
    const char *shape = spec_for(o->shapes, o->n_shapes, vi.name);
    bool profiled = spec_for(o->profiles, o->n_profiles, vi.name) != NULL;
    bool dynamic = vi.rank < 0;
    for (int32_t d = 0; d < vi.rank; d++) dynamic |= vi.dims[d] < 0;
    if (file) {
      if (kn_tensor_read_file(file, &s->inputs[i], NULL, &err)) return kn_cli_error(&err);
      s->given[i] = true;
      ranks[i] = s->inputs[i].rank;
      memcpy(dims[i], s->inputs[i].dims, sizeof dims[i]);
    } else if (shape) {
      if (!parse_dims(shape, dims[i], &ranks[i])) /* checked while parsing options */
        return kn_cli_fail("%s: --shape %s: bad dims", o->path, vi.name);
    } else {
      ranks[i] = vi.rank < 0 ? 0 : vi.rank;
      const kn_value_info *pmin = m->prof_min ? &m->prof_min[i] : NULL;
      const kn_value_info *pmax = m->prof_max ? &m->prof_max[i] : NULL;
      for (int32_t d = 0; d < ranks[i]; d++)
        dims[i][d] = vi.dims[d] >= 0 ? vi.dims[d] : default_dim(&vi, d, pmin, pmax);
      if (dynamic) {
        char t[128];
        dims_text(dims[i], ranks[i], t, sizeof t);
        fprintf(stderr, "kiln bench: input '%s' has dynamic dims: using %s (--shape %s=DIMS "
                        "to choose)\n", vi.name, t, vi.name);
      }
    }
    /* a model is built for what it will run on; a profile keeps the input dynamic */
    if (!engine && !profiled && (dynamic || shape)) {
      char t[128];
      dims_text(dims[i], ranks[i], t, sizeof t);
      size_t n = strlen(vi.name) + strlen(t) + 2;
      if (!(s->shape_specs[s->n_specs] = malloc(n))) return kn_cli_fail("out of memory");
      snprintf(s->shape_specs[s->n_specs++], n, "%s=%s", vi.name, t);
    }
    char t[128];
    dims_text(dims[i], ranks[i], t, sizeof t);
    if (used < sizeof s->shapes_text)
      used += (size_t)snprintf(s->shapes_text + used, sizeof s->shapes_text - used, "%s%s=%s",
                               i ? " " : "", vi.name, ranks[i] ? t : "scalar");
  }
  if (!s->nin) snprintf(s->shapes_text, sizeof s->shapes_text, "no inputs");
  return KN_EXIT_OK;
}

static int save_inputs(const bench_state *s, const char *dir) {
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

static bool add_sample(bench_state *s, double ms) {
  if (s->n_samples == s->cap) {
    int64_t cap = s->cap ? s->cap * 2 : 256;
    double *n = realloc(s->samples, (size_t)cap * sizeof *n);
    if (!n) return false;
    s->samples = n;
    s->cap = cap;
  }
  s->samples[s->n_samples++] = ms;
  return true;
}

int kn_cmd_bench(int argc, char **argv) {
  bench_opts o;
  memset(&o, 0, sizeof o);
  int rc = parse_opts(argc, argv, &o);
  if (rc) return rc;

  bench_state s;
  memset(&s, 0, sizeof s);
  kn_error err = {0};
  rc = KN_EXIT_ERROR;
  double t0 = now_s();
  if (kn_model_load(o.path, &s.model, &err)) return kn_cli_error(&err);
  double t_loaded = now_s();
  bool engine = kn_model_format_version(s.model) != 0;
  if (engine && o.build_opts) {
    rc = kn_cli_fail("%s: an engine is built already: --profile, --disable-pass, --workspace, "
                     "--no-optimize and --reference-kernels apply to ONNX models",
                     o.path);
    goto done;
  }
  s.nin = kn_model_input_count(s.model);
  s.inputs = calloc((size_t)s.nin + 1, sizeof *s.inputs);
  s.given = calloc((size_t)s.nin + 1, sizeof *s.given);
  int64_t(*dims)[KN_MAX_RANK] = calloc((size_t)s.nin + 1, sizeof *dims);
  int32_t *ranks = calloc((size_t)s.nin + 1, sizeof *ranks);
  input_role *roles = calloc((size_t)s.nin + 1, sizeof *roles);
  if (!s.inputs || !s.given || !dims || !ranks || !roles) {
    free(dims), free(ranks), free(roles);
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  /* roles come from the graph as imported, before passes fuse what reads the inputs */
  for (int32_t i = 0; i < s.nin; i++) roles[i] = role_of(s.model, i);
  rc = plan_inputs(&o, &s, dims, ranks, engine);
  double t_build = now_s();
  if (!rc && !engine) {
    kn_build_options bo = o.bo;
    bo.shapes = (const char *const *)s.shape_specs;
    bo.n_shapes = s.n_specs;
    bo.profiles = o.profiles;
    bo.n_profiles = o.n_profiles;
    bo.disabled_passes = o.disabled;
    bo.n_disabled_passes = o.n_disabled;
    kn_cli_note_probe(s.model, &bo);
    if (kn_model_build(s.model, &bo, &err)) rc = kn_cli_error(&err);
  }
  double t_built = now_s();
  kn_cli_rng r = {(uint64_t)o.seed * 0x9E3779B97F4A7C15ull + 1};
  for (int32_t i = 0; !rc && i < s.nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(s.model, i, &vi) == KN_OK && !s.given[i] &&
        make_input(&vi, dims[i], ranks[i], roles[i], &r, &s.inputs[i], &err))
      rc = kn_cli_error(&err);
  }
  if (!rc && o.save_dir) rc = save_inputs(&s, o.save_dir);
  free(dims);
  free(ranks);
  free(roles);
  if (rc) goto done;
  rc = KN_EXIT_ERROR;
  double t_ctx = now_s();
  if (kn_context_create(s.model, &s.ctx, &err) || kn_cli_set_threads(s.ctx, o.threads, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  /* startup: what a program pays before its first run (reading inputs and
   * generating data are not part of it) */
  double load_ms = (t_loaded - t0 + t_built - t_build + now_s() - t_ctx) * 1e3;
  for (int32_t i = 0; i < s.nin; i++)
    if (kn_context_set_input(s.ctx, i, &s.inputs[i], &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }

  /* warm-up: the first run also pays for first-touch page faults */
  double first_ms = 0;
  for (int64_t w = 0; w < o.warmup; w++) {
    double a = now_s();
    if (kn_context_run(s.ctx, &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
    if (w == 0) first_ms = (now_s() - a) * 1e3;
  }

  bool tty = isatty(STDERR_FILENO);
  bool progressed = false;
  double start = now_s(), last_progress = 0;
  for (int64_t k = 0;; k++) {
    double elapsed = now_s() - start;
    if (o.runs ? k >= o.runs
               : o.duration > 0 ? k > 0 && elapsed >= o.duration
                                : k >= DEFAULT_MIN_RUNS && elapsed >= DEFAULT_MIN_SECONDS)
      break;
    double a = now_s();
    if (kn_context_run(s.ctx, &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
    double b = now_s();
    if (!add_sample(&s, (b - a) * 1e3)) {
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
        snprintf(what, sizeof what, "%lld of %lld runs, %.1f s", (long long)s.n_samples,
                 (long long)o.runs, b - start);
      else if (o.duration > 0)
        snprintf(what, sizeof what, "%lld runs, %.1f of %g s", (long long)s.n_samples, b - start,
                 o.duration);
      else
        snprintf(what, sizeof what, "%lld runs, %.1f s", (long long)s.n_samples, b - start);
      fprintf(stderr, "%skiln bench: %s, last run %.3f ms%s", tty ? "\r" : "", what,
              (b - a) * 1e3, tty ? "\033[K" : "\n");
      fflush(stderr);
    }
  }
  double wall = now_s() - start;
  if (progressed && tty) fprintf(stderr, "\r\033[K");

  int64_t n = s.n_samples;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += s.samples[i];
  qsort(s.samples, (size_t)n, sizeof *s.samples, cmp_double);
  double mean = sum / (double)n, p50 = percentile(s.samples, n, 0.5),
         p90 = percentile(s.samples, n, 0.9), p99 = percentile(s.samples, n, 0.99);
  double qps = sum > 0 ? (double)n / (sum / 1e3) : 0;
  uint64_t rss = peak_rss_bytes();
  int32_t threads = kn_context_threads(s.ctx);
  int32_t nsteps = kn_model_step_count(s.model);
  double *step_us = NULL;
  if (o.per_step) {
    int32_t ps_runs = n < 5 ? 5 : n > 50 ? 50 : (int32_t)n;
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
    if (engine && !kn_cli_step_times_save(o.path, s.model, threads, step_us))
      fprintf(stderr, "kiln bench: could not write %s.steps.json\n", o.path);
  }
  if (o.json) {
    printf("{\"model\": ");
    json_str(stdout, o.path);
    printf(", \"engine\": %s, \"threads\": %d, \"runs\": %lld, \"warmup\": %lld, \"inputs\": ",
           engine ? "true" : "false", threads, (long long)n, (long long)o.warmup);
    json_str(stdout, s.shapes_text);
    printf(", \"min_ms\": %.4f, \"mean_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
           "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"throughput_qps\": %.3f, \"wall_s\": %.3f, "
           "\"peak_rss_bytes\": %llu, \"load_ms\": %.3f, \"model_load_ms\": %.3f, "
           "\"build_ms\": %.3f, \"first_run_ms\": %.4f",
           s.samples[0], mean, p50, p90, p99, s.samples[n - 1], qps, wall,
           (unsigned long long)rss, load_ms, (t_loaded - t0) * 1e3,
           engine ? 0.0 : (t_built - t_build) * 1e3, first_ms);
    if (step_us) {
      printf(", \"step_list\": [");
      for (int32_t i = 0; i < nsteps; i++) {
        kn_step_info si;
        kn_step_io io;
        if (kn_model_step_info(s.model, i, &si) || kn_model_step_io(s.model, i, threads, &io))
          continue;
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_str(stdout, si.name);
        printf(", \"op\": ");
        json_str(stdout, si.op);
        printf(", \"tactic\": ");
        json_str(stdout, si.tactic);
        printf(", \"median_us\": %.3f, \"predicted_us\": %.3f, \"bound\": \"%s\"}", step_us[i],
               io.predicted_us, io.bound);
      }
      printf("\n]");
    }
    printf("}\n");
  } else {
    printf("%s: %s, %d thread%s, %lld runs after %lld warm-up%s\n", o.path, s.shapes_text,
           threads, threads == 1 ? "" : "s", (long long)n, (long long)o.warmup,
           o.warmup == 1 ? "" : "s");
    printf("latency (ms): min %.3f  mean %.3f  median %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
           s.samples[0], mean, p50, p90, p99, s.samples[n - 1]);
    printf("throughput: %.2f runs/s\n", qps);
    if (engine)
      printf("startup: %.1f ms (engine load %.1f ms)", load_ms, (t_loaded - t0) * 1e3);
    else
      printf("startup: %.1f ms (model load %.1f ms, build %.1f ms)", load_ms,
             (t_loaded - t0) * 1e3, (t_built - t_build) * 1e3);
    printf(", first run %.3f ms\n", first_ms);
    printf("peak RSS: %.1f MiB\n", (double)rss / 1048576.0);
    if (step_us) {
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
  state_free(&s);
  return rc;
}
