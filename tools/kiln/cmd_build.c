/* kiln build MODEL -o ENGINE: optimize, plan memory, write an engine file. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_OPTS 256

void kn_cmd_build_usage(FILE *f) {
  fprintf(f,
          "usage: kiln build MODEL -o ENGINE [--shape NAME=DIMS]... [--profile NAME=MIN:OPT:MAX]...\n"
          "                  [--fix NAME=VALUE[,VALUE...]]... [--disable-pass NAME]... [--workspace BYTES] [--no-optimize]\n"
          "                  [--machine FILE|fallback] [--threads N] [--tactics timed|heuristic]\n"
          "                  [--tactic-candidates N] [--timing-cache FILE]\n"
          "                  [--precision fp32|bf16|fp16|int8|best] [--calibration CALIB]\n"
          "                  [--layer-precision PATTERN=PRECISION]... [--weights fp16|int8]\n"
          "                  [--max-p99-ms X] [--max-rss BYTES] [--max-abs-error E]\n"
          "                  [--min-cosine C] [--max-accuracy-drop P] [--labels FILE]\n"
          "                  [--data DIR] [--runs N] [--warmup N] [--seed N]\n\n"
          "Optimizes MODEL (.onnx), plans its memory and writes ENGINE, a single\n"
          "versioned, checksummed file (docs/ENGINE_FORMAT.md) that `kiln run`,\n"
          "`kiln inspect` and `kiln compare` accept wherever they take a model.\n\n"
          "  --shape NAME=1x3x224x224   fix a dynamic input's dims (repeatable)\n"
          "  --profile NAME=MIN:OPT:MAX keep an input dynamic within a range, each a\n"
          "                             shape (1x3x32x32:1x3x224x224:8x3x224x224); memory\n"
          "                             is planned for MAX; runs outside are refused\n"
          "  --fix NAME=VALUE           pin an input's value (a scalar; or every element,\n"
          "                             comma-separated): it is folded into the engine (an\n"
          "                             If it decides is inlined: control flow on a\n"
          "                             sample rate or a mode flag disappears) and the\n"
          "                             engine refuses any other value for it (repeatable)\n"
          "  --disable-pass NAME        skip an optimization pass (repeatable; see below)\n"
          "  --workspace BYTES          cap the activation arena (K, M, G suffixes);\n"
          "                             a plan that needs more fails, saying by how much\n"
          "  --no-optimize              keep the graph as imported\n"
          "  --machine FILE             build for the machine FILE describes (`kiln probe\n"
          "                             --output FILE`; docs/MACHINE.md): its caches set\n"
          "                             the kernels' blocking.  'fallback': the shipped\n"
          "                             description.  Default: $KILN_MACHINE, else this\n"
          "                             machine's probe, cached in ~/.cache/kiln/machine.json\n"
          "                             (made on first use, a few seconds; KILN_PROBE=0\n"
          "                             uses the fallback instead)\n"
          "  --threads N                the threads the engine is timed for (default: as a\n"
          "                             run would use: KILN_NUM_THREADS, else every CPU)\n"
          "  --tactics timed|heuristic  timed (default): where a step has several kernels\n"
          "                             (3x3 convolutions: Winograd or GEMM), time the\n"
          "                             best few on its shapes and keep the fastest;\n"
          "                             heuristic: the first choice, no timing\n"
          "  --tactic-candidates N      how many to time per step (default 3)\n"
          "  --timing-cache FILE        reuse and extend the timings kept in FILE; safe to\n"
          "                             share between builds running at the same time\n"
          "  --precision P              what GEMMs and convolutions with constant weights\n"
          "                             run in (docs/PRECISION.md): fp32 (default); bf16\n"
          "                             (bf16 weights and inputs, fp32 sums); fp16 (the\n"
          "                             same in half precision); int8 (u8 inputs per tensor\n"
          "                             from --calibration, s8 weights per channel); best:\n"
          "                             per step the fastest the IO model predicts among\n"
          "                             those this machine has instructions for\n"
          "  --calibration CALIB        int8 activation ranges (`kiln calibrate`)\n"
          "  --data DIR (alone, with a reduced precision): check the engine against the\n"
          "                             reference path on DIR's samples (the calibration\n"
          "                             data, say); below cosine 0.99 a warning names the\n"
          "                             steps to blame and the --layer-precision flags that\n"
          "                             restore it; the engine written is the one asked for\n"
          "  --layer-precision PATTERN=PRECISION\n"
          "                             run the steps whose name or covered ONNX nodes\n"
          "                             match PATTERN (a name or a glob) in PRECISION;\n"
          "                             the last match wins (repeatable)\n"
          "  --weights fp16|int8        weight-only compression of the steps left in fp32\n"
          "                             (fp32 arithmetic; for memory-bound models)\n"
          "  --max-p99-ms X, --max-rss BYTES, --max-abs-error E, --min-cosine C\n"
          "                             limits as for kiln validate, checked against\n"
          "                             MODEL's reference path (on --threads threads;\n"
          "                             --data, --runs, --warmup, --seed as there): an\n"
          "                             engine that fails one is not written (exit 1)\n"
          "  --max-accuracy-drop P      top-1 accuracy of output 0 (argmax of its last axis)\n"
          "                             at most P points below the reference path's, on\n"
          "                             labelled --data: --labels FILE (one integer per\n"
          "                             prediction, in sample order), default DIR/labels.txt\n"
          "With a reduced --precision (or --layer-precision) and an accuracy budget\n"
          "(--min-cosine, --max-abs-error, --max-accuracy-drop), an engine that breaks\n"
          "the budget is not refused at once: each reduced step's sensitivity is measured\n"
          "(the error with only that step reduced, every other step in fp32), and the most\n"
          "sensitive are kept in fp32, as few as a bisection over that order finds, until\n"
          "the budget holds; the build names them, times the engines at 1 thread and\n"
          "writes the engine only when the budget holds (docs/PRECISION.md).\n"
          "Options also take the --name=VALUE form (-o ENGINE, -oENGINE, --output=ENGINE).\n\n"
          "Passes, in the order they run:\n");
  kn_cli_print_passes(f);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The build's summary lines. */
static int print_summary(const kn_model *m, const char *model_path, const char *label,
                         double load_ms, double build_ms) {
  kn_error err = {0};
  kn_model_stats st;
  if (kn_model_stats_get(m, &st, &err)) return kn_cli_error(&err);
  printf("%s -> %s: %lld ONNX nodes -> %lld steps, weights %.1f MiB, arena %.2f MiB "
         "(lower bound %.2f MiB, unplanned %.2f MiB); load %.0f ms, build %.0f ms\n",
         model_path, label, (long long)st.onnx_nodes, (long long)st.nodes,
         (double)st.param_bytes / 1048576.0, (double)st.arena_bytes / 1048576.0,
         (double)st.lower_bound_bytes / 1048576.0,
         (double)st.naive_activation_bytes / 1048576.0, load_ms, build_ms);
  if (st.tactic_choices)
    printf("tactics: %d steps with a choice, %d shapes timed (%.1f s), %d steps from the "
           "timing cache, %d not the first choice\n",
           st.tactic_choices, st.tactic_timed, st.tactic_seconds, st.tactic_cached,
           st.tactic_changed);
  /* what the memory planner traded for the workspace (--workspace), and
   * the steps a reduced precision left in fp32 because it timed slower */
  for (int32_t i = 0; i < kn_model_decision_count(m); i++)
    if (!strncmp(kn_model_decision(m, i), "memory: ", 8) ||
        !strncmp(kn_model_decision(m, i), "precision: ", 11))
      printf("%s\n", kn_model_decision(m, i));
  return KN_EXIT_OK;
}

/* Loads, builds and saves to save_path; messages name the engine `label`. */
static int build_engine(const char *model_path, const char *save_path, const char *label,
                        const kn_build_options *bo) {
  kn_error err = {0};
  kn_model *m = NULL;
  double t0 = now_ms();
  if (kn_model_load(model_path, &m, &err)) return kn_cli_error(&err);
  double t1 = now_ms();
  int rc = KN_EXIT_OK;
  kn_cli_note_probe(m, bo);
  if (kn_model_build(m, bo, &err) || kn_model_save(m, save_path, &err))
    rc = kn_cli_error(&err);
  else
    rc = print_summary(m, model_path, label, t1 - t0, now_ms() - t1);
  kn_model_free(m);
  return rc;
}

/* ---- reduced precision under an accuracy budget ------------------------------
 * kn_model_build_budgeted's sensitivity search (docs/PRECISION.md): each
 * reduced step's error alone, then the fewest of the most sensitive kept
 * in fp32, by bisection; here its report as text. */

static const char *precision_text(const kn_build_options *bo) {
  return bo->precision == KN_PRECISION_FP32 ? "fp32 with --layer-precision"
                                            : kn_precision_name(bo->precision);
}

/* "542 samples from DIR", "1 generated sample (seed 1)" */
static void data_text(const kn_samples *s, char *buf, size_t n) {
  if (s->count)
    snprintf(buf, n, "%d sample%s from %s", s->count, s->count == 1 ? "" : "s", s->source);
  else snprintf(buf, n, "1 generated sample (seed %llu)", (unsigned long long)s->seed);
}

/* The model (an ONNX model, not an engine) and the samples and labels of
 * the budget options, for kn_model_build_budgeted; `who` names the command. */
int kn_cli_budget_data(const char *model_path, const char *who, const kn_cli_gates *g,
                       kn_cli_data *d) {
  kn_error err = {0};
  kn_model *m = NULL;
  memset(d, 0, sizeof *d);
  if (kn_model_load(model_path, &m, &err)) return kn_cli_error(&err);
  int rc;
  if (kn_model_format_version(m) != 0)
    rc = kn_cli_fail("%s is an engine: %s takes the ONNX model (the fp32 reference and the "
                     "trial builds come from it)", model_path, who);
  else rc = kn_cli_data_open(d, m, model_path, g->data, g->labels, g->has_drop, g->seed, who);
  kn_model_free(m);
  return rc;
}

/* The search in this (child) process; saves the engine that keeps the
 * budget to save_path, or fails naming the budget. */
static int build_mixed(const char *model_path, const char *save_path, const char *label,
                       const kn_build_options *bo, const kn_cli_gates *g) {
  kn_budget_search_options so;
  kn_budget_search_options_init(&so);
  so.budget = (kn_accuracy_budget){g->has_cos, g->has_abs, g->has_drop, g->min_cosine,
                                   g->max_abs_error, g->max_drop};
  so.search = KN_SEARCH_SENSITIVITY;
  so.threads = (int32_t)g->threads;
  so.time_runs = g->runs;
  so.time_warmup = g->warmup;
  so.label = "kiln build";
  char btext[256], rt[256], dt[4200];
  kn_cli_budget_text(&so.budget, btext, sizeof btext);
  kn_budget_report r;
  memset(&r, 0, sizeof r);
  kn_cli_data d;
  kn_model *fin = NULL;
  kn_error err = {0};
  double t0 = now_ms();
  int rc = kn_cli_budget_data(model_path, "kiln build", g, &d);
  if (rc) goto done;
  data_text(&d.s, dt, sizeof dt);
  kn_status st = kn_model_build_budgeted(model_path, bo, &d.s, &so, &fin, &r, &err);
  bool labels = d.s.n_labels > 0;
  int32_t n = r.n_steps;
  const kn_budget_trial *req = r.n_trials ? &r.trials[0] : NULL;
  if (req) {
    kn_cli_trial_text(req, labels, rt, sizeof rt);
    printf("precision %s: %d step%s in reduced precision; on %s: %s: %s (%s)\n",
           precision_text(bo), n, n == 1 ? "" : "s", dt, rt, req->pass ? "PASS" : "FAIL", btext);
    if (req->pass) printf("the budget holds: no step kept in fp32\n");
  }
  const kn_budget_trial *last = r.n_trials ? &r.trials[r.n_trials - 1] : NULL;
  if (st == KN_ERR_LIMIT && last && !last->pass) {
    kn_cli_trial_text(last, labels, rt, sizeof rt);
    if (last->phase == KN_TRIAL_REQUESTED && n == 0) {
      rc = kn_cli_fail("%s not written: no step runs in reduced precision, and the fp32 build "
                       "breaks %s (%s): the budget is tighter than fusion's rounding", label,
                       btext, rt);
      goto done;
    }
    if (last->phase == KN_TRIAL_ALL_FP32) {
      rc = kn_cli_fail("%s not written: %s breaks even with every step in fp32 (%s): the "
                       "budget is tighter than fp32's rounding differences with the reference "
                       "path", label, btext, rt);
      goto done;
    }
  }
  bool fp32_passed = false;
  for (int32_t i = 0; i < r.n_trials; i++)
    fp32_passed |= r.trials[i].phase == KN_TRIAL_ALL_FP32 && r.trials[i].pass;
  if (n > 1 && fp32_passed)
    printf("sensitivity (each step alone in reduced precision, the others in fp32):\n");
  for (int32_t i = 0; n > 1 && r.order && i < n; i++) {
    const kn_budget_trial *x = NULL;
    for (int32_t k = 0; k < r.n_trials && !x; k++)
      if (r.trials[k].phase == KN_TRIAL_SENSITIVITY && r.trials[k].step == r.order[i])
        x = &r.trials[k];
    if (!x) continue;
    kn_cli_trial_text(x, labels, rt, sizeof rt);
    printf("  %-32s %-5s %s (%.0f%% of the budget)\n", r.steps[r.order[i]],
           kn_precision_name(r.precisions[r.order[i]]), rt, 100 * x->used);
  }
  for (int32_t k = 0; k < r.n_trials; k++) {
    const kn_budget_trial *x = &r.trials[k];
    if (x->phase != KN_TRIAL_BISECT) continue;
    kn_cli_trial_text(x, labels, rt, sizeof rt);
    printf("  %d most sensitive in fp32: %s: %s\n", x->n_fp32, rt, x->pass ? "PASS" : "FAIL");
  }
  if (r.fp32 && req && !req->pass && r.order) {
    printf("kept in fp32 (%d of %d steps): ", r.n_fp32, n);
    for (int32_t j = 0, k = 0; j < n; j++)
      if (r.fp32[r.order[j]]) printf("%s'%s'", k++ ? ", " : "", r.steps[r.order[j]]);
    printf("\nas flags:");
    for (int32_t j = 0; j < n; j++) {
      if (!r.fp32[r.order[j]]) continue;
      char spec[1200], q[2600];
      snprintf(spec, sizeof spec, "%s=fp32", r.patterns[r.order[j]]);
      kn_cli_shell_quote(spec, q, sizeof q);
      printf(" --layer-precision %s", q);
    }
    printf("\n");
    if (!st)
      printf("speed at 1 thread (median of %lld runs on the first sample): %s %.4f ms; with %d "
             "step%s in fp32 %.4f ms (%+.1f%%); all fp32 %.4f ms\n",
             (long long)g->runs, precision_text(bo), r.ms_requested, r.n_fp32,
             r.n_fp32 == 1 ? "" : "s", r.ms_found, 100 * (r.ms_found / r.ms_requested - 1),
             r.ms_fp32);
  }
  if (st) {
    rc = kn_cli_error(&err);
    goto done;
  }
  printf("search: %d trial build%s in %.1f s\n", r.builds, r.builds == 1 ? "" : "s", r.seconds);
  if (kn_model_save(fin, save_path, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  rc = print_summary(fin, model_path, label, 0, now_ms() - t0);
done:
  kn_model_free(fin);
  kn_budget_report_release(&r);
  kn_cli_data_close(&d);
  return rc;
}

/* A reduced-precision build given --data and no limits: the engine built
 * as asked, checked against the reference path on the samples; below
 * cosine 0.99 a warning names the steps to blame (the sensitivity search's
 * ranking, each step alone in reduced precision) and the overrides that
 * would restore it.  The engine written is the one asked for. */
#define ADVISORY_COSINE 0.99
static int build_advisory(const char *model_path, const char *save_path,
                          const kn_build_options *bo, const kn_cli_gates *g) {
  kn_budget_search_options so;
  kn_budget_search_options_init(&so);
  so.budget = (kn_accuracy_budget){.has_min_cosine = true, .min_cosine = ADVISORY_COSINE};
  so.search = KN_SEARCH_SENSITIVITY;
  so.threads = (int32_t)g->threads;
  so.time_runs = 0;
  so.label = "kiln build";
  kn_budget_report r;
  memset(&r, 0, sizeof r);
  kn_cli_data d;
  kn_model *fin = NULL;
  kn_error err = {0};
  char rt[256], dt[4200];
  int rc = kn_cli_budget_data(model_path, "kiln build", g, &d);
  if (rc) return rc;
  data_text(&d.s, dt, sizeof dt);
  kn_status st = kn_model_build_budgeted(model_path, bo, &d.s, &so, &fin, &r, &err);
  const kn_budget_trial *req = r.n_trials ? &r.trials[0] : NULL;
  if (req) {
    kn_cli_trial_text(req, false, rt, sizeof rt);
    printf("precision %s: %d step%s in reduced precision; against the reference path on %s: %s\n",
           precision_text(bo), r.n_steps, r.n_steps == 1 ? "" : "s", dt, rt);
  }
  if (req && !req->pass) {
    fprintf(stderr, "kiln build: warning: the %s engine's cosine to fp32 on %s is %.6f, below "
            "%.2f\n", precision_text(bo), dt, req->cosine, ADVISORY_COSINE);
    int shown = 0;
    for (int32_t i = 0; r.order && i < r.n_steps && shown < 5; i++) {
      const kn_budget_trial *x = NULL;
      for (int32_t k = 0; k < r.n_trials && !x; k++)
        if (r.trials[k].phase == KN_TRIAL_SENSITIVITY && r.trials[k].step == r.order[i])
          x = &r.trials[k];
      if (!x) continue;
      if (!shown++)
        fprintf(stderr, "  the steps to blame (each alone in %s, the others in fp32):\n",
                precision_text(bo));
      kn_cli_trial_text(x, false, rt, sizeof rt);
      fprintf(stderr, "    %-32s %s\n", r.steps[r.order[i]], rt);
    }
    if (!st && r.fp32) {
      fprintf(stderr, "  %d of %d in fp32 reach %.2f:", r.n_fp32, r.n_steps, ADVISORY_COSINE);
      for (int32_t j = 0; j < r.n_steps; j++) {
        if (!r.fp32[r.order[j]]) continue;
        char spec[1200], q[2600];
        snprintf(spec, sizeof spec, "%s=fp32", r.patterns[r.order[j]]);
        kn_cli_shell_quote(spec, q, sizeof q);
        fprintf(stderr, " --layer-precision %s", q);
      }
      fprintf(stderr, "\n  (or build with --min-cosine %.2f --data DIR, which applies them)\n",
              ADVISORY_COSINE);
    } else if (st == KN_ERR_LIMIT) {
      fprintf(stderr, "  %s\n", err.msg);
    }
  }
  kn_model_free(fin);
  kn_budget_report_release(&r);
  kn_cli_data_close(&d);
  if (st && st != KN_ERR_LIMIT) return kn_cli_error(&err);
  /* the engine asked for */
  return build_engine(model_path, save_path, save_path, bo);
}

/* With limits: the engine is built in a child process and saved beside
 * ENGINE, checked here, and renamed to ENGINE only when every limit passes.
 * The child keeps the build's memory (the ONNX model, packing, tactic
 * timing) out of this process's peak RSS, which --max-rss checks. */
static int build_gated(const char *model_path, const char *out_path, const kn_build_options *bo,
                       kn_cli_gates *gates, bool mixed) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.validate%ld", out_path, (long)getpid()) >= sizeof tmp)
    return kn_cli_fail("%s: path too long", out_path);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return kn_cli_fail("cannot start the build of %s: fork: %s", model_path,
                                  strerror(errno));
  if (pid == 0) {
    int rc = mixed ? build_mixed(model_path, tmp, out_path, bo, gates)
                   : build_engine(model_path, tmp, out_path, bo);
    fflush(stdout);
    exit(rc);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      unlink(tmp);
      return kn_cli_fail("waiting for the build of %s: %s", model_path, strerror(errno));
    }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    unlink(tmp);
    if (WIFEXITED(status)) return WEXITSTATUS(status); /* the child said why */
    return kn_cli_fail("the build of %s died of signal %d", model_path,
                       WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  gates->engine = tmp;
  char failed[1024];
  int rc = kn_cli_gates_check(gates, failed, sizeof failed);
  if (rc) {
    unlink(tmp);
    if (failed[0]) kn_cli_fail("%s not written: the engine fails %s", out_path, failed);
    return rc;
  }
  if (rename(tmp, out_path) != 0) {
    int e = errno;
    unlink(tmp);
    return kn_cli_fail("cannot write %s: %s", out_path, strerror(e));
  }
  return KN_EXIT_OK;
}

static int build_with(const char *model_path, const char *out_path, const char *machine_path,
                      kn_build_options *bo, kn_cli_gates *gates, const char **shapes,
                      int n_shapes);

int kn_cmd_build(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("build");
  const char *model_path = NULL, *out_path = NULL, *machine_path = NULL;
  const char *shapes[MAX_OPTS], *disabled[MAX_OPTS], *profiles[MAX_OPTS], *fixed[MAX_OPTS];
  const char *layer_prec[MAX_OPTS], *calib_path = NULL;
  int n_shapes = 0, n_disabled = 0, n_profiles = 0, n_layer_prec = 0, n_fixed = 0;
  kn_build_options bo;
  kn_build_options_init(&bo);
  enum { O_OUTPUT = 1, O_SHAPE, O_PROFILE, O_DISABLE_PASS, O_WORKSPACE, O_NO_OPTIMIZE,
         O_MACHINE, O_THREADS, O_TACTICS, O_CANDIDATES, O_TIMING_CACHE, O_PRECISION,
         O_LAYER_PRECISION, O_WEIGHTS, O_CALIBRATION, O_FIX };
  kn_cli_gates gates;
  kn_cli_gates_init(&gates);
  static const kn_cli_opt opts[] = {{"output", 'o', true, O_OUTPUT},
                                    {"shape", 0, true, O_SHAPE},
                                    {"profile", 0, true, O_PROFILE},
                                    {"fix", 0, true, O_FIX},
                                    {"disable-pass", 0, true, O_DISABLE_PASS},
                                    {"workspace", 0, true, O_WORKSPACE},
                                    {"no-optimize", 0, false, O_NO_OPTIMIZE},
                                    {"machine", 0, true, O_MACHINE},
                                    {"threads", 0, true, O_THREADS},
                                    {"tactics", 0, true, O_TACTICS},
                                    {"tactic-candidates", 0, true, O_CANDIDATES},
                                    {"timing-cache", 0, true, O_TIMING_CACHE},
                                    {"precision", 0, true, O_PRECISION},
                                    {"layer-precision", 0, true, O_LAYER_PRECISION},
                                    {"weights", 0, true, O_WEIGHTS},
                                    {"calibration", 0, true, O_CALIBRATION},
                                    KN_CLI_GATE_OPTS,
                                    KN_CLI_ACCURACY_OPTS,
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_OUTPUT: out_path = args.arg; break;
    case O_SHAPE:
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      shapes[n_shapes++] = args.arg;
      break;
    case O_FIX:
      if (n_fixed == MAX_OPTS) return kn_cli_usage(cmd, "too many --fix options");
      fixed[n_fixed++] = args.arg;
      break;
    case O_PROFILE:
      if (n_profiles == MAX_OPTS) return kn_cli_usage(cmd, "too many --profile options");
      profiles[n_profiles++] = args.arg;
      break;
    case O_DISABLE_PASS:
      if (n_disabled == MAX_OPTS) return kn_cli_usage(cmd, "too many --disable-pass options");
      disabled[n_disabled++] = args.arg;
      break;
    case O_WORKSPACE:
      if (!kn_cli_parse_bytes(args.arg, &bo.workspace))
        return kn_cli_usage(cmd, "--workspace takes a byte count such as 268435456 or 256M, "
                                 "got '%s'", args.arg);
      break;
    case O_NO_OPTIMIZE: bo.no_optimize = 1; break;
    case O_MACHINE: machine_path = args.arg; break;
    case O_THREADS: {
      int64_t v;
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &v)) return KN_EXIT_USAGE;
      bo.threads = (int32_t)v;
      break;
    }
    case O_TACTICS:
      if (!strcmp(args.arg, "heuristic")) bo.tactics = KN_TACTICS_HEURISTIC;
      else if (!strcmp(args.arg, "timed")) bo.tactics = KN_TACTICS_TIMED;
      else
        return kn_cli_usage(cmd, "--tactics takes timed or heuristic, got '%s'", args.arg);
      break;
    case O_CANDIDATES: {
      int64_t v;
      if (!kn_cli_int(&args, 1, 16, &v)) return KN_EXIT_USAGE;
      bo.tactic_candidates = (int32_t)v;
      break;
    }
    case O_TIMING_CACHE: bo.timing_cache = args.arg; break;
    case O_PRECISION:
      if (!kn_cli_precision(&args, true, &bo.precision)) return KN_EXIT_USAGE;
      break;
    case O_LAYER_PRECISION:
      if (n_layer_prec == MAX_OPTS) return kn_cli_usage(cmd, "too many --layer-precision options");
      layer_prec[n_layer_prec++] = args.arg;
      break;
    case O_WEIGHTS:
      if (!kn_cli_weights(&args, &bo.weights)) return KN_EXIT_USAGE;
      break;
    case O_CALIBRATION: calib_path = args.arg; break;
    case KN_CLI_POSITIONAL:
      if (model_path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      model_path = args.arg;
      break;
    default: {
      int rc = kn_cli_gate_option(&args, id, &gates);
      if (rc) return rc < 0 ? KN_EXIT_USAGE : rc;
    }
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");
  if (!out_path) return kn_cli_usage(cmd, "-o ENGINE is required");
  bool reduced_build = bo.precision != KN_PRECISION_FP32 || n_layer_prec > 0;
  bool advisory = gates.data && reduced_build && !kn_cli_gates_any(&gates) && !gates.labels;
  if (gates.run_opts_given && !kn_cli_gates_any(&gates) && !advisory)
    return kn_cli_usage(cmd, "--data, --labels, --runs, --warmup and --seed are for the limits "
                             "(or, with a reduced precision, --data alone for its accuracy "
                             "check): give --max-p99-ms, --max-rss, --max-abs-error, "
                             "--min-cosine or --max-accuracy-drop");
  if (gates.labels && !gates.has_drop)
    return kn_cli_usage(cmd, "--labels is for --max-accuracy-drop");
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  bo.profiles = profiles;
  bo.n_profiles = n_profiles;
  bo.fixed = fixed;
  bo.n_fixed = n_fixed;
  bo.disabled_passes = disabled;
  bo.n_disabled_passes = n_disabled;
  bo.layer_precisions = layer_prec;
  bo.n_layer_precisions = n_layer_prec;

  kn_error err = {0};
  kn_calibration *cal = NULL;
  if (calib_path) {
    if (kn_calibration_load(calib_path, &cal, &err)) return kn_cli_error(&err);
    bo.calibration = cal;
  }
  int rc = build_with(model_path, out_path, machine_path, &bo, &gates, shapes, n_shapes);
  kn_calibration_free(cal);
  return rc;
}

static int build_with(const char *model_path, const char *out_path, const char *machine_path,
                      kn_build_options *bo_in, kn_cli_gates *gates_in, const char **shapes,
                      int n_shapes) {
  kn_build_options bo = *bo_in;
  kn_cli_gates gates = *gates_in;
  kn_error err = {0};
  kn_machine machine;
  if (machine_path) {
    if (!strcmp(machine_path, "fallback")) kn_machine_fallback(&machine);
    else if (kn_machine_load(machine_path, &machine, &err)) return kn_cli_error(&err);
    bo.machine = &machine;
  }
  bool reduced = bo.precision != KN_PRECISION_FP32 || bo.n_layer_precisions > 0;
  if (!kn_cli_gates_any(&gates) && gates.data && reduced)
    return build_advisory(model_path, out_path, &bo, &gates);
  if (!kn_cli_gates_any(&gates)) return build_engine(model_path, out_path, out_path, &bo);
  gates.engine = NULL; /* set below */
  gates.label = out_path;
  gates.model = model_path;
  gates.shapes = shapes;
  gates.n_shapes = n_shapes;
  gates.threads = bo.threads;
  /* a reduced precision under an accuracy budget falls back to fp32 where it must */
  bool budget = gates.has_abs || gates.has_cos || gates.has_drop;
  return build_gated(model_path, out_path, &bo, &gates, reduced && budget);
}
