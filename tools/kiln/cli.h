/* Shared declarations of the kiln CLI: one file per subcommand. */
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

int kn_cli_error(const kn_error *err);         /* prints "kiln: msg", returns 1 */
int kn_cli_fail(const char *fmt, ...)          /* same from a format */
    __attribute__((format(printf, 1, 2)));
/* A usage error: prints "kiln CMD: <message> (see 'kiln CMD --help')" on
 * one line, or the whole usage text when fmt is NULL; returns 2. */
int kn_cli_usage(const kn_cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const kn_cli_cmd *kn_cli_find(const char *name);

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
 * saying so, since it takes a few seconds. */
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

int kn_cmd_ops(int argc, char **argv);
void kn_cmd_ops_usage(FILE *f);

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

/* ---- inspect JSON and dashboards (inspect.c, dashboard.c) ---------------
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

#endif
