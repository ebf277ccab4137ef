/* kiln debug precision MODEL: which steps must stay in fp32 for a reduced
 * precision to keep an accuracy budget, found by bisection over the step
 * order and then refined, as polygraphy's `debug precision` does for
 * TensorRT.  The search is the library's (kn_model_build_budgeted with
 * KN_SEARCH_BISECT, src/builder/search.c), as kiln build's fallback uses
 * its sensitivity search; here the options and its report as text. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 256

void kn_cmd_debug_usage(FILE *f) {
  fprintf(f,
          "usage: kiln debug precision MODEL --precision bf16|fp16|int8|best\n"
          "                  [--calibration CALIB] [--layer-precision PATTERN=PRECISION]...\n"
          "                  (--min-cosine C | --max-abs-error E | --max-accuracy-drop P)...\n"
          "                  [--data DIR] [--labels FILE] [--shape NAME=DIMS]...\n"
          "                  [--direction forward|reverse] [--threads N] [--seed N]\n\n"
          "Finds the steps of MODEL (.onnx) that must run in fp32 for the reduced\n"
          "precision to keep the budget against the fp32 reference path (the graph as\n"
          "imported), on the samples of --data DIR (as kiln validate reads them; default\n"
          "one generated sample, --seed N).  The candidates are the steps the requested\n"
          "build runs in bf16, fp16 or int8, in step order.\n\n"
          "  1. bisection: the smallest k such that the first k candidates (--direction\n"
          "     reverse: the last k) in fp32 keep the budget;\n"
          "  2. refinement: each of those k in turn is tried in reduced precision again\n"
          "     and stays so when the budget still holds.\n"
          "Each iteration prints the steps in fp32, the measured error and PASS/FAIL;\n"
          "the end prints the set found as --layer-precision NAME=fp32 flags for kiln\n"
          "build.  Each trial is a build of MODEL in this process (heuristic tactics, so\n"
          "that trials differ only in precision): 2 + log2(N) + k of them.\n\n"
          "  --min-cosine C         smallest cosine of an output with the reference (worst\n"
          "                         over outputs and samples)\n"
          "  --max-abs-error E      largest |error| of any output element\n"
          "  --max-accuracy-drop P  top-1 accuracy of output 0 at most P points below the\n"
          "                         reference's; labels from --labels FILE (one integer per\n"
          "                         prediction, in sample order), default DIR/labels.txt\n"
          "Exit status: 0 when a set was found (or none is needed), 1 when the budget\n"
          "breaks even with every step in fp32 or on bad input, 2 on a usage error.\n");
}

/* "3 in fp32 (A, B, C)"; past six names, the complement ("all but D") or
 * the candidates' numbers in order ("#1-6, #9"). */
static void print_set(const kn_budget_report *r, const uint8_t *fp32) {
  int32_t k = 0, n = r->n_steps;
  for (int32_t i = 0; i < n; i++) k += fp32[i];
  printf("%d in fp32", k);
  if (k == n && k > 1) {
    printf(" (all)");
    return;
  }
  if (!k) return;
  bool names = k <= 6, but = !names && n - k <= 6;
  printf(" (%s", but ? "all but " : "");
  for (int32_t i = 0, j = 0; i < n; i++) {
    if (names || but) {
      if ((bool)fp32[i] != but) printf("%s%s", j++ ? ", " : "", r->steps[i]);
    } else if (fp32[i] && (i == 0 || !fp32[i - 1])) {
      int32_t e = i;
      while (e + 1 < n && fp32[e + 1]) e++;
      if (e > i) printf("%s#%d-%d", j++ ? ", " : "", i + 1, e + 1);
      else printf("%s#%d", j++ ? ", " : "", i + 1);
    }
  }
  printf(")");
}

static int debug_precision(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("debug");
  const char *model = NULL, *calib_path = NULL, *shapes[MAX_OPTS], *layer_prec[MAX_OPTS];
  int n_shapes = 0, n_layer_prec = 0;
  bool reverse = false, precision_given = false;
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.tactics = KN_TACTICS_HEURISTIC;
  kn_cli_gates g; /* the budget options, parsed as kiln build parses them */
  kn_cli_gates_init(&g);
  enum { O_PRECISION = 1, O_CALIBRATION, O_LAYER_PRECISION, O_SHAPE, O_DIRECTION, O_THREADS };
  static const kn_cli_opt opts[] = {{"precision", 0, true, O_PRECISION},
                                    {"calibration", 0, true, O_CALIBRATION},
                                    {"layer-precision", 0, true, O_LAYER_PRECISION},
                                    {"shape", 0, true, O_SHAPE},
                                    {"direction", 0, true, O_DIRECTION},
                                    {"threads", 0, true, O_THREADS},
                                    {"min-cosine", 0, true, KN_CLI_O_MIN_COS},
                                    {"max-abs-error", 0, true, KN_CLI_O_MAX_ABS},
                                    {"data", 0, true, KN_CLI_O_DATA},
                                    {"seed", 0, true, KN_CLI_O_GATE_SEED},
                                    KN_CLI_ACCURACY_OPTS,
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  /* argv[0] is "precision": parse as "debug" from there */
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_PRECISION:
      if (!kn_cli_precision(&args, false, &bo.precision)) return KN_EXIT_USAGE;
      precision_given = true;
      break;
    case O_CALIBRATION: calib_path = args.arg; break;
    case O_LAYER_PRECISION:
      if (n_layer_prec == MAX_OPTS) return kn_cli_usage(cmd, "too many --layer-precision options");
      layer_prec[n_layer_prec++] = args.arg;
      break;
    case O_SHAPE:
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      if (!kn_cli_shape_spec_ok(args.arg))
        return kn_cli_usage(cmd, "--shape takes NAME=DIMS such as input=1x3x224x224, got '%s'",
                            args.arg);
      shapes[n_shapes++] = args.arg;
      break;
    case O_DIRECTION:
      if (!strcmp(args.arg, "forward")) reverse = false;
      else if (!strcmp(args.arg, "reverse")) reverse = true;
      else return kn_cli_usage(cmd, "--direction takes forward or reverse, got '%s'", args.arg);
      break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &g.threads)) return KN_EXIT_USAGE;
      break;
    case KN_CLI_POSITIONAL:
      if (model) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      model = args.arg;
      break;
    default: {
      int rc = kn_cli_gate_option(&args, id, &g);
      if (rc) return rc < 0 ? KN_EXIT_USAGE : rc;
    }
    }
  }
  if (!model) return kn_cli_usage(cmd, "MODEL is required");
  if (!precision_given && !n_layer_prec)
    return kn_cli_usage(cmd, "--precision (bf16, fp16, int8 or best) is required");
  if (!g.has_cos && !g.has_abs && !g.has_drop)
    return kn_cli_usage(cmd, "give the budget: --min-cosine, --max-abs-error or "
                             "--max-accuracy-drop");
  if (g.labels && !g.has_drop) return kn_cli_usage(cmd, "--labels is for --max-accuracy-drop");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  bo.layer_precisions = layer_prec;
  bo.n_layer_precisions = n_layer_prec;
  bo.threads = (int32_t)g.threads;

  kn_error err = {0};
  kn_calibration *cal = NULL;
  if (calib_path) {
    if (kn_calibration_load(calib_path, &cal, &err)) return kn_cli_error(&err);
    bo.calibration = cal;
  }
  kn_budget_search_options so;
  kn_budget_search_options_init(&so);
  so.budget = (kn_accuracy_budget){g.has_cos, g.has_abs, g.has_drop, g.min_cosine,
                                   g.max_abs_error, g.max_drop};
  so.search = KN_SEARCH_BISECT;
  so.reverse = reverse;
  so.threads = (int32_t)g.threads;
  so.label = "kiln debug precision";
  char btext[256], rt[256], dt[4200];
  kn_cli_budget_text(&so.budget, btext, sizeof btext);
  kn_budget_report r;
  memset(&r, 0, sizeof r);
  kn_cli_data d;
  int rc = kn_cli_budget_data(model, "kiln debug precision", &g, &d);
  if (rc) goto done;
  if (d.s.count)
    snprintf(dt, sizeof dt, "%d sample%s from %s", d.s.count, d.s.count == 1 ? "" : "s", g.data);
  else snprintf(dt, sizeof dt, "1 generated sample (seed %llu)", (unsigned long long)g.seed);
  kn_status st = kn_model_build_budgeted(model, &bo, &d.s, &so, NULL, &r, &err);
  bool labels = d.s.n_labels > 0;
  int32_t n = r.n_steps;
  if (r.n_trials) {
    const kn_budget_trial *req = &r.trials[0];
    kn_cli_trial_text(req, labels, rt, sizeof rt);
    printf("%s, precision %s: %d step%s in reduced precision; on %s; budget %s\n", model,
           bo.precision == KN_PRECISION_FP32 ? "fp32 with --layer-precision"
                                             : kn_precision_name(bo.precision),
           n, n == 1 ? "" : "s", dt, btext);
    printf("candidates, in step order (#1-%d):", n);
    for (int32_t i = 0; i < n; i++) printf(" %s", r.steps[i]);
    printf("\nrequested: 0 in fp32: %s: %s\n", rt, req->pass ? "PASS" : "FAIL");
    if (req->pass) {
      printf("the requested precision keeps the budget: no step needs fp32\n");
      goto done;
    }
    if (n == 0 && st == KN_ERR_LIMIT) {
      rc = kn_cli_fail("%s: no step runs in reduced precision, and the build breaks %s (%s)",
                       model, btext, rt);
      goto done;
    }
  }
  for (int32_t k = 1, it = 0; k < r.n_trials; k++) {
    const kn_budget_trial *x = &r.trials[k];
    if (x->phase == KN_TRIAL_REFINE && r.trials[k - 1].phase != KN_TRIAL_REFINE) it = 0;
    kn_cli_trial_text(x, labels, rt, sizeof rt);
    printf("%s %d: ", x->phase == KN_TRIAL_REFINE ? "refine" : "bisect", ++it);
    print_set(&r, x->fp32);
    printf(": %s: %s\n", rt, x->pass ? "PASS" : "FAIL");
    if (x->phase == KN_TRIAL_ALL_FP32 && !x->pass && st == KN_ERR_LIMIT) {
      rc = kn_cli_fail("%s: %s breaks even with every step in fp32: the budget is tighter than "
                       "fp32's rounding differences with the reference path", model, btext);
      goto done;
    }
  }
  fflush(stdout);
  if (st) {
    rc = kn_cli_error(&err);
    goto done;
  }
  printf("found: %d of %d step%s must stay in fp32 (%d trial builds):\n", r.n_fp32, n,
         n == 1 ? "" : "s", r.builds);
  for (int32_t i = 0; i < n; i++)
    if (r.fp32[i]) {
      char spec[1200], q[2600];
      snprintf(spec, sizeof spec, "%s=fp32", r.patterns[i]);
      kn_cli_shell_quote(spec, q, sizeof q);
      printf(" --layer-precision %s", q);
    }
  printf("\n");
done:
  kn_budget_report_release(&r);
  kn_cli_data_close(&d);
  kn_calibration_free(cal);
  return rc;
}

int kn_cmd_debug(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("debug");
  if (argc < 2) return kn_cli_usage(cmd, "which debugger? 'precision' is the one there is");
  if (!strcmp(argv[1], "precision")) return debug_precision(argc - 1, argv + 1);
  return kn_cli_usage(cmd, "unknown debugger '%s': 'precision' is the one there is", argv[1]);
}
