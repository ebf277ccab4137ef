/* kiln compare MODEL [ENGINE]: the reference path against the optimized
 * engine on the same inputs (what polygraphy does for TensorRT). */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 256

void kn_cmd_compare_usage(FILE *f) {
  fprintf(f,
          "usage: kiln compare MODEL [ENGINE] [--input NAME=FILE]... [--shape NAME=DIMS]...\n"
          "                    [--atol A] [--rtol R] [--seed N] [--disable-pass NAME]...\n"
          "                    [--per-layer] [--threads N] [--precision P] [--calibration CALIB]\n"
          "                    [--layer-precision PATTERN=PRECISION]... [--weights fp16|int8]\n\n"
          "Runs MODEL (.onnx) with the reference path (no optimization) and with the\n"
          "optimized engine (ENGINE, or MODEL built in memory with the default options)\n"
          "on the same inputs, and prints per output the max absolute error, max\n"
          "relative error (|a-b| / max(|b|, atol)) and cosine similarity.  Exits 1 when\n"
          "any element differs by more than atol + rtol * |reference| (defaults: atol\n"
          "1e-4, rtol 1e-3).  Inputs not given are random (seeded): floats in [-1, 1),\n"
          "integers in {0, 1} (valid for ids, masks and token types alike), bools;\n"
          "dynamic dimensions take their --shape sizes, else 1.\n"
          "--per-layer also compares every intermediate tensor that survives\n"
          "optimization (same name in both graphs, or its channels-last copy\n"
          "'NAME_nhwc'), step by step in order, with each\n"
          "step's precision, and names the first step whose result diverges and the\n"
          "step where the error enters: the one that multiplies 1 - cosine over the\n"
          "worst of its inputs the most (error that entered earlier grows along a\n"
          "deep network, so the largest absolute rise is often far downstream).  --precision, --calibration, --layer-precision and --weights\n"
          "build MODEL in memory as kiln build does (no ENGINE then), so that a reduced\n"
          "precision is compared with the fp32 reference.  --threads N runs both on N threads\n"
          "(default: KILN_NUM_THREADS, else the CPUs this process may use).  Options\n"
          "also take the --name=VALUE form.\n");
}

/* Intermediate tensors of the reference run, by name, in step order. */
typedef struct recording {
  char **names;
  kn_tensor *tensors;
  int32_t n, cap;
  bool oom;
} recording;

static void record(const char *name, const kn_tensor *t, void *arg) {
  recording *r = arg;
  if (r->oom || t->dtype == KN_DTYPE_STRING) return;
  if (r->n == r->cap) {
    int32_t cap = r->cap ? r->cap * 2 : 64;
    char **nn = realloc(r->names, (size_t)cap * sizeof *nn);
    if (nn) r->names = nn;
    kn_tensor *nt = nn ? realloc(r->tensors, (size_t)cap * sizeof *nt) : NULL;
    if (!nn || !nt) {
      r->oom = true;
      return;
    }
    r->tensors = nt;
    r->cap = cap;
  }
  kn_error err;
  kn_tensor *c = &r->tensors[r->n];
  if (kn_tensor_alloc(c, t->dtype, t->rank, t->dims, &err)) {
    r->oom = true;
    return;
  }
  if (t->nbytes) memcpy(c->data, t->data, c->nbytes < t->nbytes ? c->nbytes : t->nbytes);
  r->names[r->n++] = strdup(name);
}

static void recording_free(recording *r) {
  for (int32_t i = 0; i < r->n; i++) {
    free(r->names[i]);
    kn_tensor_release(&r->tensors[i]);
  }
  free(r->names);
  free(r->tensors);
}

/* Prints one line for an output pair; returns false when out of tolerance. */
static bool compare_one(const char *name, const kn_tensor *ref, const kn_tensor *opt,
                        double atol, double rtol) {
  kn_cli_diff d;
  if (!kn_cli_diff_tensors(ref, opt, atol, rtol, &d)) {
    printf("FAIL %s: dtype/shape differ (%s rank %d vs %s rank %d)\n", name,
           kn_dtype_name(ref->dtype), ref->rank, kn_dtype_name(opt->dtype), opt->rank);
    return false;
  }
  printf("%s %-24s %s [%lld elems] max_abs %.3g max_rel %.3g cosine %.9f", d.bad ? "FAIL" : "ok  ",
         name, kn_dtype_name(ref->dtype), (long long)d.n, d.max_abs, d.max_rel, d.cosine);
  if (d.bad)
    printf("  (%lld out of tolerance; worst at %lld: %.9g vs reference %.9g)", (long long)d.bad,
           (long long)d.worst, kn_cli_elem_f64(opt, d.worst), kn_cli_elem_f64(ref, d.worst));
  printf("\n");
  return d.bad == 0;
}

static int32_t find_name(const recording *r, const char *name) {
  for (int32_t i = 0; i < r->n; i++)
    if (!strcmp(r->names[i], name)) return i;
  return -1;
}

/* The reference tensor for the optimized value `name`: the same name, or,
 * for a channels-last copy ("<name>_nhwc", as the channels_last pass,
 * src/passes/channels_last.c, names it), the NCHW reference transposed to
 * NHWC into *scratch, so
 * that fused convolutions, which leave only channels-last values, are
 * compared too.  NULL when the reference has no such tensor; *oom when the
 * transpose could not be allocated. */
static const kn_tensor *reference_for(const recording *rref, const char *name,
                                      const kn_tensor *opt, kn_tensor *scratch, bool *oom) {
  int32_t j = find_name(rref, name);
  if (j >= 0) return &rref->tensors[j];
  size_t len = strlen(name), sl = strlen("_nhwc");
  if (len <= sl || strcmp(name + len - sl, "_nhwc") || opt->rank != 4) return NULL;
  char *base = strndup(name, len - sl);
  if (!base) {
    *oom = true;
    return NULL;
  }
  j = find_name(rref, base);
  free(base);
  if (j < 0) return NULL;
  const kn_tensor *r = &rref->tensors[j];
  const int64_t *d = r->dims; /* N C H W */
  if (r->rank != 4 || r->dtype != opt->dtype || opt->dims[0] != d[0] || opt->dims[1] != d[2] ||
      opt->dims[2] != d[3] || opt->dims[3] != d[1])
    return NULL;
  kn_error err;
  if (kn_tensor_alloc(scratch, r->dtype, 4, opt->dims, &err)) {
    *oom = true;
    return NULL;
  }
  size_t es = kn_dtype_size(r->dtype);
  int64_t hw = d[2] * d[3];
  const char *src = r->data;
  char *dst = scratch->data;
  for (int64_t n = 0; n < d[0]; n++)
    for (int64_t c = 0; c < d[1]; c++)
      for (int64_t p = 0; p < hw; p++)
        memcpy(dst + (size_t)((n * hw + p) * d[1] + c) * es,
               src + (size_t)((n * d[1] + c) * hw + p) * es, es);
  return scratch;
}

/* 1 - cosine, the error measure that adds up along the graph; NaN worst. */
#define ERR_FLOOR 1e-9
static double cos_err(double c) { return isnan(c) ? INFINITY : fmax(0.0, 1.0 - c); }

/* Per step of opt in order: each output that the reference run also has
 * (same name), its error and the step's precision.  A tensor without a
 * reference (a layout reorder's) carries the worst error of its inputs,
 * so that error is followed through it.  *first_bad: the first output out
 * of tolerance.  False when out of memory. */
static bool per_layer_report(const kn_model *opt, const recording *rref, const recording *ropt,
                             double atol, double rtol, const char **first_bad) {
  double *err = malloc(((size_t)ropt->n + 1) * sizeof *err); /* by ropt index */
  if (!err) return false;
  for (int32_t i = 0; i < ropt->n; i++) err[i] = -1; /* not reached */
  int32_t n_steps = kn_model_step_count(opt), shared = 0, jump_step = -1;
  double jump = 0, jump_in = 0, jump_out = 0;
  const char *jump_tensor = NULL;
  printf("per layer (%d steps; %d reference tensors, %d optimized), error against the fp32 "
         "reference:\n", n_steps, rref->n, ropt->n);
  printf("       %-4s %-30s %-5s %-30s %-10s %-13s %s\n", "step", "name", "prec", "tensor",
         "max_abs", "cosine", "1-cos (rise)");
  for (int32_t s = 0; s < n_steps; s++) {
    kn_step_info si;
    if (kn_model_step_info(opt, s, &si)) continue;
    double in_err = 0;
    for (int32_t k = 0; k < si.n_inputs && k < 8; k++) {
      int32_t j = si.inputs[k] ? find_name(ropt, si.inputs[k]) : -1;
      if (j >= 0 && err[j] > in_err) in_err = err[j];
    }
    for (int32_t o = 0; o < si.n_outputs && o < 4; o++) {
      const char *name = si.outputs[o].name;
      int32_t i = name ? find_name(ropt, name) : -1;
      if (i < 0) continue;
      kn_tensor nhwc = {0};
      bool oom = false;
      const kn_tensor *ref = reference_for(rref, name, &ropt->tensors[i], &nhwc, &oom);
      if (oom) {
        free(err);
        return false;
      }
      if (!ref) {
        err[i] = in_err;
        continue;
      }
      shared++;
      kn_cli_diff d;
      const char *prec = kn_precision_name(si.precision);
      bool same = kn_cli_diff_tensors(ref, &ropt->tensors[i], atol, rtol, &d);
      kn_tensor_release(&nhwc);
      if (!same) {
        printf("  FAIL #%-3d %-30s %-5s %-30s dtype/shape differ\n", s, si.name,
               prec ? prec : "?", name);
        if (!*first_bad) *first_bad = name;
        err[i] = in_err;
        continue;
      }
      err[i] = cos_err(d.cosine);
      double rise = err[i] - in_err;
      printf("  %s #%-3d %-30s %-5s %-30s %-10.3g %.9f %.3g (%+.3g)\n", d.bad ? "FAIL" : "ok  ",
             s, si.name, prec ? prec : "?", name, d.max_abs, d.cosine, err[i], rise);
      if (d.bad && !*first_bad) *first_bad = name;
      /* Error that came in is multiplied along the graph (a deep network
       * amplifies it: one bf16 stem in an fp32 ResNet-50 ends at 1-cos
       * 1e-3), so the step where it enters is the one that multiplies its
       * inputs' error the most, not the one with the largest absolute
       * rise; below ERR_FLOOR it is fp32's own reordering noise. */
      double factor = err[i] / fmax(in_err, ERR_FLOOR);
      if (err[i] > ERR_FLOOR && factor > jump) {
        jump = factor, jump_step = s, jump_in = in_err, jump_out = err[i];
        jump_tensor = name;
      }
    }
  }
  if (*first_bad) printf("first divergence: the step producing '%s'\n", *first_bad);
  else printf("%d shared intermediate tensors agree\n", shared);
  if (jump_step >= 0) {
    kn_step_info si;
    if (kn_model_step_info(opt, jump_step, &si) == KN_OK)
      printf("error enters at step #%d '%s' (%s): 1 - cosine %.3g over its inputs -> %.3g at "
             "'%s', the largest factor\n", jump_step, si.name, kn_precision_name(si.precision),
             jump_in, jump_out, jump_tensor);
  }
  free(err);
  return true;
}

int kn_cmd_compare(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("compare");
  const char *paths[2] = {NULL, NULL};
  const char *named[MAX_OPTS], *shapes[MAX_OPTS], *disabled[MAX_OPTS];
  int n_named = 0, n_shapes = 0, n_disabled = 0, n_paths = 0;
  double atol = 1e-4, rtol = 1e-3;
  uint64_t seed = 1;
  bool per_layer = false;
  recording rref = {0}, ropt = {0};
  int64_t threads = 0;
  enum { O_INPUT = 1, O_SHAPE, O_DISABLE_PASS, O_ATOL, O_RTOL, O_PER_LAYER, O_SEED, O_THREADS,
         O_PRECISION, O_CALIBRATION, O_LAYER_PRECISION, O_WEIGHTS };
  const char *layer_prec[MAX_OPTS], *calib_path = NULL;
  int n_layer_prec = 0;
  int32_t precision = KN_PRECISION_FP32, weights = KN_WEIGHTS_FP32;
  bool build_opts = false;
  kn_calibration *cal = NULL;
  static const kn_cli_opt opts[] = {{"input", 0, true, O_INPUT},
                                    {"shape", 0, true, O_SHAPE},
                                    {"disable-pass", 0, true, O_DISABLE_PASS},
                                    {"atol", 0, true, O_ATOL},
                                    {"rtol", 0, true, O_RTOL},
                                    {"per-layer", 0, false, O_PER_LAYER},
                                    {"seed", 0, true, O_SEED},
                                    {"threads", 0, true, O_THREADS},
                                    {"precision", 0, true, O_PRECISION},
                                    {"calibration", 0, true, O_CALIBRATION},
                                    {"layer-precision", 0, true, O_LAYER_PRECISION},
                                    {"weights", 0, true, O_WEIGHTS},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    int64_t iv;
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_INPUT:
      if (n_named == MAX_OPTS) return kn_cli_usage(cmd, "too many --input options");
      named[n_named++] = args.arg;
      break;
    case O_SHAPE:
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      shapes[n_shapes++] = args.arg;
      break;
    case O_DISABLE_PASS:
      if (n_disabled == MAX_OPTS) return kn_cli_usage(cmd, "too many --disable-pass options");
      disabled[n_disabled++] = args.arg;
      break;
    case O_ATOL:
    case O_RTOL:
      if (!kn_cli_double(&args, 0, 1e300, id == O_ATOL ? &atol : &rtol)) return KN_EXIT_USAGE;
      break;
    case O_PER_LAYER: per_layer = true; break;
    case O_SEED:
      if (!kn_cli_int(&args, 0, INT64_MAX, &iv)) return KN_EXIT_USAGE;
      seed = (uint64_t)iv;
      break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &threads)) return KN_EXIT_USAGE;
      break;
    case O_PRECISION:
      if (!kn_cli_precision(&args, true, &precision)) return KN_EXIT_USAGE;
      build_opts = true;
      break;
    case O_CALIBRATION: calib_path = args.arg, build_opts = true; break;
    case O_LAYER_PRECISION:
      if (n_layer_prec == MAX_OPTS) return kn_cli_usage(cmd, "too many --layer-precision options");
      layer_prec[n_layer_prec++] = args.arg;
      build_opts = true;
      break;
    case O_WEIGHTS:
      if (!kn_cli_weights(&args, &weights)) return KN_EXIT_USAGE;
      build_opts = true;
      break;
    case KN_CLI_POSITIONAL:
      if (n_paths == 2) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      paths[n_paths++] = args.arg;
    }
  }
  if (!paths[0]) return kn_cli_usage(cmd, "MODEL is required");
  for (int k = 0; k < n_named; k++)
    if (!strchr(named[k], '='))
      return kn_cli_usage(cmd, "--input takes NAME=FILE, got '%s'", named[k]);
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  if (build_opts && paths[1])
    return kn_cli_usage(cmd, "--precision, --calibration, --layer-precision and --weights build "
                             "MODEL in memory: give no ENGINE with them (ENGINE keeps the "
                             "precisions it was built with)");

  kn_error err = {0};
  kn_model *ref = NULL, *opt = NULL;
  kn_context *cref = NULL, *copt = NULL;
  kn_tensor *ins = NULL;
  int32_t nin = 0;
  int rc = KN_EXIT_ERROR;
  if (calib_path && kn_calibration_load(calib_path, &cal, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  if (kn_model_load(paths[0], &ref, &err) ||
      kn_model_load(paths[1] ? paths[1] : paths[0], &opt, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  bo.disabled_passes = disabled;
  bo.n_disabled_passes = n_disabled;
  bo.no_optimize = 1;
  kn_cli_note_probe(ref, &bo);
  if (kn_model_build(ref, &bo, &err)) { /* fixes shapes only */
    rc = kn_cli_error(&err);
    goto done;
  }
  bo.no_optimize = 0;
  bo.precision = precision;
  bo.calibration = cal;
  bo.layer_precisions = layer_prec;
  bo.n_layer_precisions = n_layer_prec;
  bo.weights = weights;
  if (!paths[1] && kn_model_build(opt, &bo, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  nin = kn_model_input_count(ref);
  if (kn_model_input_count(opt) != nin || kn_model_output_count(opt) != kn_model_output_count(ref)) {
    rc = kn_cli_fail("%s and %s have different inputs or outputs", paths[0], paths[1]);
    goto done;
  }
  ins = calloc((size_t)nin + 1, sizeof *ins);
  if (!ins || kn_context_create(ref, &cref, &err) || kn_context_create(opt, &copt, &err) ||
      kn_cli_set_threads(cref, threads, &err) || kn_cli_set_threads(copt, threads, &err)) {
    rc = ins ? kn_cli_error(&err) : kn_cli_fail("out of memory");
    goto done;
  }
  kn_cli_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(ref, i, &vi)) goto done;
    const char *file = NULL;
    for (int k = 0; k < n_named; k++) {
      const char *eq = strchr(named[k], '=');
      if (strlen(vi.name) == (size_t)(eq - named[k]) && !strncmp(vi.name, named[k], strlen(vi.name)))
        file = eq + 1;
    }
    kn_status st = file ? kn_tensor_read_file(file, &ins[i], NULL, &err)
                        : kn_cli_random_input(&vi, shapes, n_shapes, &r, &ins[i], &err);
    if (!st) st = kn_context_set_input(cref, i, &ins[i], &err);
    if (!st) st = kn_context_set_input(copt, i, &ins[i], &err);
    if (st) {
      rc = kn_cli_error(&err);
      goto done;
    }
  }
  if (per_layer) {
    kn_context_set_observer(cref, record, &rref);
    kn_context_set_observer(copt, record, &ropt);
  }
  if (kn_context_run(cref, &err) || kn_context_run(copt, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  bool all_ok = true;
  if (per_layer) {
    if (rref.oom || ropt.oom) {
      rc = kn_cli_fail("out of memory recording intermediate tensors");
      goto done;
    }
    const char *first_bad = NULL;
    if (!per_layer_report(opt, &rref, &ropt, atol, rtol, &first_bad)) {
      rc = kn_cli_fail("out of memory comparing intermediate tensors");
      goto done;
    }
    all_ok &= first_bad == NULL;
  }
  printf("outputs:\n");
  for (int32_t o = 0; o < kn_model_output_count(ref); o++) {
    kn_value_info vi;
    if (kn_model_output_info(ref, o, &vi)) goto done;
    const kn_tensor *a = kn_context_output(cref, o), *b = kn_context_output(copt, o);
    if (!a || !b) {
      printf("skip %s: not a tensor\n", vi.name);
      continue;
    }
    all_ok &= compare_one(vi.name, a, b, atol, rtol);
  }
  printf("%s (atol %g, rtol %g)\n", all_ok ? "PASS" : "FAIL", atol, rtol);
  rc = all_ok ? KN_EXIT_OK : KN_EXIT_ERROR;
done:
  if (ins)
    for (int32_t i = 0; i < nin; i++) kn_tensor_release(&ins[i]);
  free(ins);
  recording_free(&rref);
  recording_free(&ropt);
  kn_context_free(cref);
  kn_context_free(copt);
  kn_model_free(ref);
  kn_model_free(opt);
  kn_calibration_free(cal);
  return rc;
}
