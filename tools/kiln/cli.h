/* Shared declarations of the kiln CLI: one file per subcommand, cmd_<name>.c. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "kiln.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 user/input error, 2 usage. */
enum { KN_EXIT_OK = 0, KN_EXIT_ERROR = 1, KN_EXIT_USAGE = 2 };

typedef struct kn_cli_cmd {
  const char *name;
  const char *summary;
  int (*main)(int argc, char **argv); /* argv[0] is the subcommand */
  void (*usage)(FILE *f);
} kn_cli_cmd;

/* ---- shared helpers (cli_util.c) ----------------------------------------
 * main.c hands its command table over before it runs a command; the
 * commands find their own entry (name, usage) with kn_cli_find. */
void kn_cli_set_commands(const kn_cli_cmd *cmds, size_t n);
const kn_cli_cmd *kn_cli_find(const char *name);
int kn_cli_error(const kn_error *err);         /* prints "kiln: msg", returns 1 */
int kn_cli_fail(const char *fmt, ...)          /* same from a format */
    __attribute__((format(printf, 1, 2)));
/* A usage error: prints "kiln CMD: <message> (see 'kiln CMD --help')" on
 * one line, or the whole usage text when fmt is NULL; returns 2. */
int kn_cli_usage(const kn_cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s with control characters written as \xNN: a name from a model or file
 * keeps a message on one line and cannot drive the terminal. */
void kn_cli_put_sanitized(const char *s, FILE *f);
/* A subcommand of a component this kiln was built without (kiln serve
 * without libmicrohttpd, kiln loadgen without libcurl): one line naming the
 * library and the package to install ("kiln: kiln serve is not available:
 * this kiln was built without libmicrohttpd (install libmicrohttpd-dev,
 * then configure and build kiln again)"); returns 1.  The _note form ends
 * the command's usage text with the same news. */
int kn_cli_not_built(const char *cmd, const char *library, const char *package);
void kn_cli_not_built_note(FILE *f, const char *cmd, const char *library, const char *package);
/* Runs CMD: its usage on stdout when --help or -h comes before any "--",
 * else cmd->main(argc, argv); argv[0] is the command's name. */
int kn_cli_run(const kn_cli_cmd *cmd, int argc, char **argv);
/* kiln serve and kiln loadgen run as their own executables, kiln-serve and
 * kiln-loadgen, so that kiln itself loads neither libmicrohttpd nor libcurl
 * (with libcurl's TLS, Kerberos and LDAP libraries, 12 ms of a 15 ms
 * start-up).  Replaces this process with kiln-CMD from this executable's
 * folder, ARGV[1..] as its arguments; returns (1, one line naming the
 * path) only when that cannot run. */
int kn_cli_exec_component(const char *cmd, int argc, char **argv);

/* ---- option parsing (args.c), shared by every command ------------------
 * Accepts what getopt_long users expect: "--name value" and "--name=value"
 * for options that take a value, "-x value" and "-xvalue" for those with a
 * short name, flags as "--name" (a flag given "=value" is refused), and
 * "--" to end the options (everything after it is positional).  Options
 * and positional arguments may come in any order. */
typedef struct kn_cli_opt {
  const char *name; /* long name without the dashes: "threads" */
  char short_name;  /* 'o' for -o, or 0 */
  bool has_arg;
  int id;           /* returned by kn_cli_next; > 0 */
} kn_cli_opt;

typedef struct kn_cli_args {
  const kn_cli_cmd *cmd;
  const kn_cli_opt *opts; /* ends with an entry whose name is NULL */
  int argc, i;
  char **argv;
  bool no_more_opts; /* after "--" */
  const char *arg;   /* the option's value or the positional argument */
  const char *flag;  /* the option as written, for messages ("--threads") */
} kn_cli_args;

enum { KN_CLI_END = 0, KN_CLI_POSITIONAL = -1, KN_CLI_BAD = -2 };

/* argv[0] is the subcommand. */
void kn_cli_args_init(kn_cli_args *a, const kn_cli_cmd *cmd, const kn_cli_opt *opts, int argc,
                      char **argv);
/* The next option's id (a->arg holds its value), KN_CLI_POSITIONAL (a->arg
 * holds it), KN_CLI_END, or KN_CLI_BAD after a one-line usage message
 * (unknown option, missing or unexpected value): exit with status 2. */
int kn_cli_next(kn_cli_args *a);
/* Value parsers for the current option: false after a one-line usage
 * message naming the option, the range and the value given. */
bool kn_cli_int(const kn_cli_args *a, int64_t min, int64_t max, int64_t *out);
bool kn_cli_double(const kn_cli_args *a, double min, double max, double *out);
/* --precision: fp32 (when allow_fp32), bf16, fp16, int8 or best. */
bool kn_cli_precision(const kn_cli_args *a, bool allow_fp32, int32_t *out);
/* --weights: fp32, fp16 or int8 (KN_WEIGHTS_*). */
bool kn_cli_weights(const kn_cli_args *a, int32_t *out);
/* "512M" -> bytes (suffixes K, M, G); false when malformed (no message). */
bool kn_cli_parse_bytes(const char *s, uint64_t *out);

/* ---- threads --------------------------------------------------------------
 * Commands that run a model take --threads N (0: not given).  The library's
 * default is KILN_NUM_THREADS, else the CPUs this process may use; a
 * KILN_NUM_THREADS that is set but not an integer in [1, 1024] is a usage
 * error here rather than silently ignored. */
#define KN_CLI_MAX_THREADS 1024
bool kn_cli_check_thread_env(const kn_cli_cmd *cmd);
/* Applies --threads to a context (nothing when threads is 0). */
kn_status kn_cli_set_threads(kn_context *ctx, int64_t threads, kn_error *err)
    __attribute__((warn_unused_result));

int kn_cmd_run(int argc, char **argv);
void kn_cmd_run_usage(FILE *f);
int kn_cmd_inspect(int argc, char **argv);
void kn_cmd_inspect_usage(FILE *f);
int kn_cmd_build(int argc, char **argv);
void kn_cmd_build_usage(FILE *f);
/* One line per optimization pass (name and summary), in run order. */
void kn_cli_print_passes(FILE *f);
int kn_cmd_compare(int argc, char **argv);
void kn_cmd_compare_usage(FILE *f);
int kn_cmd_bench(int argc, char **argv);
void kn_cmd_bench_usage(FILE *f);
int kn_cmd_probe(int argc, char **argv);
void kn_cmd_probe_usage(FILE *f);
/* Before a build of an ONNX model that will probe this machine (no
 * --machine, no $KILN_MACHINE, no cached probe): one line on stderr
 * saying so, since it takes a few seconds.  m NULL: a model not loaded
 * yet (kn_validate's reference). */
void kn_cli_note_probe(const kn_model *m, const kn_build_options *bo);

/* ---- measured step times (steptimes.c) ----------------------------------
 * kn_cli_step_times: `runs` runs of ctx (inputs set), each step's median
 * wall time in median_us[step] (kn_model_step_count entries).  _save
 * keeps them beside an engine as ENGINE.steps.json, _load reads them back
 * when every step is there by name (false otherwise). */
kn_status kn_cli_step_times(kn_context *ctx, const kn_model *m, int32_t runs, double *median_us,
                            kn_error *err) __attribute__((warn_unused_result));
bool kn_cli_step_times_save(const char *engine, const kn_model *m, int32_t threads,
                            const double *median_us);
bool kn_cli_step_times_load(const char *engine, const kn_model *m, int32_t *threads,
                            double *median_us);

/* The census of reference kernels: the share of step_us's total (a time
 * per step) spent in steps on the portable reference kernel (tactic
 * "reference"), with their count in *n_ref and the slowest of them in
 * *worst (-1: none).  Control-flow steps (If, Loop, Scan, SequenceMap) are
 * containers, their bodies' steps on their own kernels: not counted.
 * _line writes the one-line summary kiln bench and kiln profile print. */
double kn_cli_reference_share(const kn_model *m, const double *step_us, int32_t *n_ref,
                              int32_t *worst);
void kn_cli_reference_line(const kn_model *m, const double *step_us, char *buf, size_t len);

int kn_cmd_ops(int argc, char **argv);
void kn_cmd_ops_usage(FILE *f);
int kn_cmd_trace(int argc, char **argv); /* cmd_trace.c: kiln trace merge */
void kn_cmd_trace_usage(FILE *f);

/* The CLI's generated inputs (bench, compare): xorshift64*, seeded by the
 * caller, so the same seed gives the same inputs in both commands. */
typedef struct kn_cli_rng {
  uint64_t s;
} kn_cli_rng;

static inline uint64_t kn_cli_rng_next(kn_cli_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}

/* ---- accuracy (cli_accuracy.c), shared by compare and validate --------------
 * kn_cli_random_input: an input for `vi` as compare generates it: dims
 * from vi (dynamic ones from a NAME=DIMS among shapes, else 1), floats
 * uniform in [-1, 1), integers and bools 0 or 1. */
kn_status kn_cli_random_input(const kn_value_info *vi, const char *const *shapes, int n_shapes,
                              kn_cli_rng *r, kn_tensor *t, kn_error *err)
    __attribute__((warn_unused_result));
double kn_cli_elem_f64(const kn_tensor *t, int64_t i); /* NAN for other dtypes */
typedef struct kn_cli_diff {
  int64_t n;      /* elements */
  int64_t bad;    /* differing by more than atol + rtol * |reference| */
  int64_t worst;  /* the worst of those, -1 when none */
  double max_abs; /* INFINITY when one side is NaN */
  double max_rel; /* |a - b| / max(|b|, atol) */
  double cosine;  /* 1 when both are all zeros */
} kn_cli_diff;
/* opt against its reference ref (elements NaN in both are equal); false
 * when their dtypes or shapes differ. */
bool kn_cli_diff_tensors(const kn_tensor *ref, const kn_tensor *opt, double atol, double rtol,
                         kn_cli_diff *out);

/* ---- validation gates (gates.c): kiln validate and kiln build's limits ---
 * An engine is run on the inputs (--data DIR, else seeded random ones as
 * compare makes), timed (--warmup, then --runs, on the first sample) and
 * its peak RSS read, before the reference path of the ONNX model it was
 * built from is loaded and run on the same inputs; then every limit given
 * is checked.  Put KN_CLI_GATE_OPTS in a command's option table and hand
 * every id to kn_cli_gate_option. */
enum {
  KN_CLI_O_MAX_P99 = 2000, KN_CLI_O_MAX_RSS, KN_CLI_O_MAX_ABS, KN_CLI_O_MIN_COS, KN_CLI_O_DATA,
  KN_CLI_O_RUNS, KN_CLI_O_WARMUP, KN_CLI_O_GATE_SEED, KN_CLI_O_MAX_DROP, KN_CLI_O_LABELS
};
/* The top-1 budget (kiln build, kiln debug precision; not in validate's
 * table): --max-accuracy-drop P in percentage points against the reference
 * path, on labelled --data (--labels FILE, default DIR/labels.txt). */
#define KN_CLI_ACCURACY_OPTS                                                                  \
  {"max-accuracy-drop", 0, true, KN_CLI_O_MAX_DROP}, {"labels", 0, true, KN_CLI_O_LABELS}
#define KN_CLI_GATE_OPTS                                                                      \
  {"max-p99-ms", 0, true, KN_CLI_O_MAX_P99}, {"max-rss", 0, true, KN_CLI_O_MAX_RSS},         \
      {"max-abs-error", 0, true, KN_CLI_O_MAX_ABS}, {"min-cosine", 0, true, KN_CLI_O_MIN_COS}, \
      {"data", 0, true, KN_CLI_O_DATA}, {"runs", 0, true, KN_CLI_O_RUNS},                    \
      {"warmup", 0, true, KN_CLI_O_WARMUP}, {"seed", 0, true, KN_CLI_O_GATE_SEED}
#define KN_CLI_GATE_RUNS 20  /* default --runs */
#define KN_CLI_GATE_WARMUP 3 /* default --warmup */
typedef struct kn_cli_gates {
  const char *engine; /* the engine file run */
  const char *label;  /* its name in messages and reports (NULL: engine) */
  const char *model;  /* the ONNX model whose reference path it must match */
  const char *data;   /* --data DIR, or NULL: generated inputs */
  const char *const *shapes; /* --shape NAME=DIMS of dynamic inputs */
  int n_shapes;
  int64_t runs, warmup, threads; /* threads 0: the default */
  uint64_t seed;
  bool json;           /* print the JSON report instead of the text */
  bool run_opts_given; /* --data, --runs, --warmup or --seed */
  /* the limits, each checked only when its has_ flag is set */
  bool has_p99, has_rss, has_abs, has_cos, has_drop;
  double max_p99_ms, max_abs_error, min_cosine, max_drop;
  uint64_t max_rss;
  const char *labels; /* --labels FILE; NULL: DIR/labels.txt */
} kn_cli_gates;
void kn_cli_gates_init(kn_cli_gates *g);
/* Applies option `id` of a->cmd: KN_EXIT_OK, KN_EXIT_USAGE after a one-line
 * usage message, or -1 when id is not a gate option. */
int kn_cli_gate_option(const kn_cli_args *a, int id, kn_cli_gates *g);
static inline bool kn_cli_gates_any(const kn_cli_gates *g) {
  return g->has_p99 || g->has_rss || g->has_abs || g->has_cos || g->has_drop;
}
/* Measures and checks, printing the report on stdout.  KN_EXIT_OK when
 * every limit given passes; KN_EXIT_ERROR when one fails (`failed` then
 * names the failures on one line: "--max-abs-error (measured 0.031, limit
 * 0.001)") or on an error (one line on stderr already, failed[0] == 0). */
int kn_cli_gates_check(const kn_cli_gates *g, char *failed, size_t failed_size);
/* "NAME=1x3x224x224" ("NAME=" is a scalar); false when malformed. */
bool kn_cli_shape_spec_ok(const char *spec);
int kn_cmd_validate(int argc, char **argv);
void kn_cmd_validate_usage(FILE *f);

/* ---- inspect JSON and dashboards (cmd_inspect.c, dashboard.c) ---------------
 * The text `kiln inspect --json` prints, malloc'd (NULL when out of memory
 * or the model is not built): steps predicted for `threads` threads,
 * measured_us from measured[] when not NULL, the ONNX op histogram from
 * ops/op_counts (n_ops may be 0). */
char *kn_cli_inspect_json(const kn_model *m, const char *path, int64_t threads,
                          const double *measured, const char *const *ops,
                          const int64_t *op_counts, int n_ops);
/* Writes one self-contained HTML dashboard to path (through path.tmp and a
 * rename): inspect_json as `kiln inspect --json` prints it, profile_json as
 * `kiln profile --json` prints it or NULL (predictions only). */
kn_status kn_cli_dashboard_write(const char *path, const char *title, const char *inspect_json,
                                 const char *profile_json, kn_error *err)
    __attribute__((warn_unused_result));

/* ---- model sessions (session.c): what bench and profile share ----------
 * The options that choose a model's inputs and build: put
 * KN_CLI_MODEL_OPTS in a command's option table and hand every id
 * kn_cli_model_option does not return -1 for to it. */
#define KN_CLI_MAX_LIST 256
enum {
  KN_CLI_O_THREADS = 1000, KN_CLI_O_SHAPE, KN_CLI_O_INPUT, KN_CLI_O_INPUT_DIR, KN_CLI_O_SEED,
  KN_CLI_O_PROFILE, KN_CLI_O_DISABLE_PASS, KN_CLI_O_WORKSPACE, KN_CLI_O_NO_OPTIMIZE,
  KN_CLI_O_REFERENCE
};
#define KN_CLI_MODEL_OPTS                                                                     \
  {"threads", 0, true, KN_CLI_O_THREADS}, {"shape", 0, true, KN_CLI_O_SHAPE},                \
      {"input", 0, true, KN_CLI_O_INPUT}, {"input-dir", 0, true, KN_CLI_O_INPUT_DIR},        \
      {"seed", 0, true, KN_CLI_O_SEED}, {"profile", 0, true, KN_CLI_O_PROFILE},              \
      {"disable-pass", 0, true, KN_CLI_O_DISABLE_PASS},                                      \
      {"workspace", 0, true, KN_CLI_O_WORKSPACE},                                            \
      {"no-optimize", 0, false, KN_CLI_O_NO_OPTIMIZE},                                       \
      {"reference-kernels", 0, false, KN_CLI_O_REFERENCE}

typedef struct kn_cli_model_opts {
  const char *cmd;  /* "bench", for messages */
  const char *path; /* MODEL or ENGINE */
  const char *input_dir;
  const char *shapes[KN_CLI_MAX_LIST], *named[KN_CLI_MAX_LIST], *profiles[KN_CLI_MAX_LIST],
      *disabled[KN_CLI_MAX_LIST];
  int n_shapes, n_named, n_profiles, n_disabled;
  /* "NAME=SIZE": dynamic dims named NAME (a dim_param such as "batch")
   * take SIZE in every input without a --shape or a file (kiln profile
   * --sweep) */
  const char *dim_values[8];
  int n_dim_values;
  int64_t threads, seed;
  bool build_opts; /* one of the build options was given */
  bool quiet;      /* no notes on stderr (defaulted dims, probing) */
  kn_build_options bo;
} kn_cli_model_opts;
void kn_cli_model_opts_init(kn_cli_model_opts *o, const char *cmd);
/* Applies option `id` of a->cmd: KN_EXIT_OK, KN_EXIT_USAGE after a one-line
 * usage message, or -1 when id is not a model option. */
int kn_cli_model_option(const kn_cli_args *a, int id, kn_cli_model_opts *o);

/* A model loaded (an ONNX model built for the dims it will run on), its
 * inputs read or generated, and a context with them bound. */
typedef struct kn_cli_session {
  kn_model *model;
  kn_context *ctx;
  kn_tensor *inputs;
  bool *given; /* read from a file rather than generated */
  int32_t nin;
  char **shape_specs; /* the shapes given to kn_model_build */
  int32_t n_specs;
  bool engine;
  char shapes_text[512]; /* "input_ids=1x128 attention_mask=1x128" */
  double model_load_ms, build_ms, load_ms; /* load_ms: load + build + context */
} kn_cli_session;
/* KN_EXIT_OK, or KN_EXIT_ERROR after a one-line message; close it either way. */
int kn_cli_session_open(const kn_cli_model_opts *o, kn_cli_session *s);
void kn_cli_session_close(kn_cli_session *s);

/* "1x3x224x224" -> dims; false when malformed. */
bool kn_cli_parse_dims(const char *s, int64_t *dims, int32_t *rank);
void kn_cli_dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n);
/* The value of NAME=... for `name` among specs (the last given), or NULL. */
const char *kn_cli_spec_for(const char *const *specs, int n, const char *name);
double kn_cli_now_s(void); /* CLOCK_MONOTONIC seconds */
int kn_cli_cmp_double(const void *a, const void *b);
/* Linear interpolation between order statistics of sorted[0 .. n-1] (as
 * numpy's default and bench/ort_bench.js), so kiln's and ONNX Runtime's
 * percentiles compare. */
double kn_cli_percentile(const double *sorted, int64_t n, double p);
uint64_t kn_cli_peak_rss(void); /* this process's peak RSS in bytes */
void kn_cli_json_str(FILE *f, const char *s); /* a JSON string literal */

int kn_cmd_profile(int argc, char **argv);
void kn_cmd_profile_usage(FILE *f);

/* ---- sample folders (samples.c): kiln validate --data, kiln calibrate ----
 * kn_cli_samples_find: DIR itself when it holds input_0.pb (or .npy), else
 * each sub-folder of it that does, in natural order (test_data_set_2
 * before test_data_set_10); a model with no inputs (nin 0) needs no files:
 * DIR is its one sample.  kn_cli_sample_read: DIR's input_<i>.pb (else
 * .npy) for each of the nin inputs (names for messages) into ins, refusing
 * a file for an input more.  Both print one line and return KN_EXIT_ERROR
 * on failure. */
typedef struct kn_cli_samples {
  char **dirs;
  int32_t n;
} kn_cli_samples;
int kn_cli_samples_find(const char *dir, int32_t nin, kn_cli_samples *s);
void kn_cli_samples_free(kn_cli_samples *s);
int kn_cli_sample_read(const char *dir, const char *label, const char *const *names,
                       int32_t nin, kn_tensor *ins);
/* The same, filling err (the line kn_cli_sample_read prints) instead. */
kn_status kn_cli_sample_load(const char *dir, const char *label, const char *const *names,
                             int32_t nin, kn_tensor *ins, kn_error *err)
    __attribute__((warn_unused_result));
/* The library's samples (kn_samples, for kn_validate and
 * kn_model_build_budgeted) of --data DIR: the sample folders of m's inputs,
 * read on demand (messages name `label`); without DIR, one generated from
 * seed.  With need_labels, the labels of --labels FILE, else DIR/labels.txt
 * (no DIR: a usage line naming `who`).  KN_EXIT_OK, or KN_EXIT_ERROR after
 * one line; close it either way.  d->s points into d: do not move d. */
typedef struct kn_cli_data {
  kn_samples s;
  kn_cli_samples dirs;
  char **names; /* m's input names */
  int32_t nin;
  const char *label;
  int64_t *labels;
  char labels_path[4096];
} kn_cli_data;
int kn_cli_data_open(kn_cli_data *d, const kn_model *m, const char *label, const char *data,
                     const char *labels, bool need_labels, uint64_t seed, const char *who);
void kn_cli_data_close(kn_cli_data *d);

/* ---- labels (cli_accuracy.c) ------------------------------------------------
 * A labels file: one integer class per line (blank lines and '#' comments
 * skipped), the k-th for the k-th prediction; a sample whose output 0 is
 * [B, C] makes B predictions (the argmax over the last axis of each row),
 * so batch-1 samples take one line each (train_models.py's heldout/).
 * KN_EXIT_ERROR after one line "FILE:LINE: ..." when malformed. */
int kn_cli_labels_read(const char *path, int64_t **labels, int64_t *n);
/* Predictions of output t: numel / last dim rows; argmax of each into
 * pred (rows entries).  Returns rows (0 for a non-numeric or empty one). */
int64_t kn_cli_argmax_rows(const kn_tensor *t, int64_t *pred, int64_t cap);

/* ---- accuracy budgets (cli_accuracy.c): kiln build's fallback to fp32 and
 * kiln debug precision, which kn_model_build_budgeted runs ----------------
 * kn_cli_budget_text: the budget as given ("--min-cosine 0.9999
 * --max-accuracy-drop 1"); kn_cli_trial_text: a trial's measurement
 * ("cosine 0.999953210 max_abs 0.0121 top-1 97.23% (-0.37)", the top-1
 * part with labels). */
void kn_cli_budget_text(const kn_accuracy_budget *b, char *buf, size_t n);
void kn_cli_trial_text(const kn_budget_trial *r, bool labels, char *buf, size_t n);
/* A step name as a shell word: '...' with ' written '\'' */
void kn_cli_shell_quote(const char *s, char *buf, size_t n);
/* cmd_build.c: the samples and labels of g's --data, --labels and --seed for a
 * budgeted build of MODEL (loaded to check that it is an ONNX model, not an
 * engine, and to name its inputs); `who` names the command in messages.
 * KN_EXIT_OK, or KN_EXIT_ERROR after one line; close d either way. */
int kn_cli_budget_data(const char *model_path, const char *who, const kn_cli_gates *g,
                       kn_cli_data *d);

int kn_cmd_debug(int argc, char **argv); /* cmd_debug.c: kiln debug precision */
void kn_cmd_debug_usage(FILE *f);
/* kiln loadgen, load for a KServe v2 server: cmd_loadgen.c has the usage
 * text and the command, which runs the kiln-loadgen executable
 * (KN_HAVE_LOADGEN) or says in one line that it is not built.  kiln-loadgen
 * is tools/loadgen/: main.c, and loadgen.c's kn_loadgen_main (libcurl). */
int kn_cmd_loadgen(int argc, char **argv);
void kn_cmd_loadgen_usage(FILE *f);
int kn_loadgen_main(int argc, char **argv);

int kn_cmd_calibrate(int argc, char **argv);
void kn_cmd_calibrate_usage(FILE *f);
int kn_cmd_quantize(int argc, char **argv); /* cmd_quantize.c: a Q/DQ ONNX model */
void kn_cmd_quantize_usage(FILE *f);
/* kiln serve, the inference server: cmd_serve.c has the usage text and the
 * command, which runs the kiln-serve executable (KN_HAVE_SERVE) or says in
 * one line that it is not built.  kiln-serve is serve/main.c over the
 * kiln_serve library of serve/ (libmicrohttpd). */
int kn_cmd_serve(int argc, char **argv);
void kn_cmd_serve_usage(FILE *f);

#endif
