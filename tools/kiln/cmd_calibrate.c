/* kiln calibrate MODEL --data DIR -o CALIB: int8 activation ranges of an
 * ONNX model's tensors over a set of samples, written as a calibration
 * cache (docs/CALIBRATION.md; the library's kn_calibrator does the work). */
#include "cli.h"
#include "quant/calibration.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN 5 /* widest ranges printed */

void kn_cmd_calibrate_usage(FILE *f) {
  fprintf(f,
          "usage: kiln calibrate MODEL --data DIR -o CALIB [options]\n\n"
          "Runs the ONNX model as imported (not optimized, so that tensors keep the\n"
          "names the ONNX file gives them) on every sample in DIR and records the\n"
          "range of each float tensor (graph inputs and node outputs), then writes\n"
          "the int8 calibration cache CALIB: one line NAME AMAX MIN MAX per tensor,\n"
          "int8 scale AMAX / 127 (docs/CALIBRATION.md).\n\n"
          "  --data DIR           samples: DIR/input_<i>.pb or .npy for graph input i,\n"
          "                       or one sub-folder of DIR per sample holding them\n"
          "  -o, --output CALIB   the cache to write (through CALIB.tmp and a rename)\n"
          "  --method M           how AMAX is chosen from each tensor's |x| histogram:\n"
          "                       minmax      max |x|\n"
          "                       percentile  the --percentile P of |x|\n"
          "                       entropy     least KL divergence, TensorRT's (default)\n"
          "                       mse         least expected int8 squared error\n"
          "  --percentile P       0 < P <= 100 (default %.2f; implies --method percentile)\n"
          "  --shape NAME=DIMS    dims of a dynamic input, e.g. input=1x3x224x224\n"
          "                       (repeatable; samples must then have those dims)\n"
          "  --threads N          threads for the runs (default: KILN_NUM_THREADS, else\n"
          "                       the CPUs this process may use)\n"
          "  --max-samples N      use the first N samples (natural order)\n"
          "  --bins N             histogram bins per tensor, 128 to 1048576 (default %d)\n\n"
          "Prints the samples, tensors and method, and the widest ranges.\n"
          "Exit status: 0 written, 1 bad model, sample or file, 2 usage error.\n",
          KN_CALIB_DEFAULT_PERCENTILE, KN_CALIB_DEFAULT_BINS);
}

enum { O_DATA = 1, O_OUT, O_METHOD, O_PCT, O_SHAPE, O_THREADS, O_MAX, O_BINS };

typedef struct shown {
  kn_calib_range r;
  double full; /* max |x| */
} shown;

static int cmp_amax_desc(const void *a, const void *b) {
  const shown *x = a, *y = b;
  return x->r.amax < y->r.amax ? 1 : x->r.amax > y->r.amax ? -1 : 0;
}

static void release_all(kn_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) kn_tensor_release(&t[i]);
}

int kn_cmd_calibrate(int argc, char **argv) {
  static const kn_cli_opt opts[] = {
      {"data", 0, true, O_DATA},         {"output", 'o', true, O_OUT},
      {"method", 0, true, O_METHOD},     {"percentile", 0, true, O_PCT},
      {"shape", 0, true, O_SHAPE},       {"threads", 0, true, O_THREADS},
      {"max-samples", 0, true, O_MAX},   {"bins", 0, true, O_BINS},
      {NULL, 0, false, 0}};
  const kn_cli_cmd *cmd = kn_cli_find("calibrate");
  const char *model_path = NULL, *data = NULL, *out = NULL, *method_name = NULL;
  const char *shapes[KN_CLI_MAX_LIST];
  int n_shapes = 0;
  int64_t threads = 0, max_samples = 0, bins = KN_CALIB_DEFAULT_BINS;
  double pct = KN_CALIB_DEFAULT_PERCENTILE;
  bool pct_given = false;
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_DATA: data = args.arg; break;
    case O_OUT: out = args.arg; break;
    case O_METHOD:
      if (kn_calib_method_from_name(args.arg) < 0)
        return kn_cli_usage(cmd, "--method takes minmax, percentile, entropy or mse, got '%s'",
                            args.arg);
      method_name = args.arg;
      break;
    case O_PCT:
      if (!kn_cli_double(&args, 0, 100, &pct)) return KN_EXIT_USAGE;
      if (!(pct > 0)) return kn_cli_usage(cmd, "--percentile takes 0 < P <= 100, got '%s'", args.arg);
      pct_given = true;
      break;
    case O_SHAPE:
      if (!kn_cli_shape_spec_ok(args.arg))
        return kn_cli_usage(cmd, "--shape takes NAME=DIMS such as input=1x3x224x224, got '%s'",
                            args.arg);
      if (n_shapes == KN_CLI_MAX_LIST)
        return kn_cli_usage(cmd, "at most %d --shape options", KN_CLI_MAX_LIST);
      shapes[n_shapes++] = args.arg;
      break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &threads)) return KN_EXIT_USAGE;
      break;
    case O_MAX:
      if (!kn_cli_int(&args, 1, INT32_MAX, &max_samples)) return KN_EXIT_USAGE;
      break;
    case O_BINS:
      if (!kn_cli_int(&args, 128, 1 << 20, &bins)) return KN_EXIT_USAGE;
      break;
    case KN_CLI_POSITIONAL:
      if (model_path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      model_path = args.arg;
      break;
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");
  if (!data) return kn_cli_usage(cmd, "--data DIR is required (the samples to calibrate on)");
  if (!out) return kn_cli_usage(cmd, "-o CALIB is required (the calibration cache to write)");
  kn_calib_method method = KN_CALIB_ENTROPY;
  if (method_name) method = (kn_calib_method)kn_calib_method_from_name(method_name);
  else if (pct_given) method = KN_CALIB_PERCENTILE;
  if (pct_given && method != KN_CALIB_PERCENTILE)
    return kn_cli_usage(cmd, "--percentile applies to --method percentile, not --method %s",
                        method_name);
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;

  kn_error err = {0};
  kn_model *m = NULL;
  kn_calibrator *cal = NULL;
  kn_calibration *table = NULL;
  kn_cli_samples samples = {0};
  kn_tensor *ins = NULL;
  const char **names = NULL;
  shown *top = NULL;
  int32_t nin = 0;
  int rc = KN_EXIT_ERROR;
  double t0 = kn_cli_now_s();
  if (kn_model_load(model_path, &m, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  if (kn_model_format_version(m) != 0) {
    rc = kn_cli_fail("%s is an engine: calibration runs the ONNX model as imported, whose "
                     "tensors keep their ONNX names; give the .onnx it was built from",
                     model_path);
    goto done;
  }
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  bo.no_optimize = 1;
  bo.tactics = KN_TACTICS_HEURISTIC; /* no timing: the kernels' choice does not matter here */
  kn_cli_note_probe(m, &bo);
  if (kn_model_build(m, &bo, &err)) { /* fixes shapes only */
    rc = kn_cli_error(&err);
    goto done;
  }
  nin = kn_model_input_count(m);
  ins = calloc((size_t)nin + 1, sizeof *ins);
  names = calloc((size_t)nin + 1, sizeof *names);
  if (!ins || !names) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) {
      rc = kn_cli_fail("%s: cannot read input %d", model_path, i);
      goto done;
    }
    names[i] = vi.name;
  }
  if ((rc = kn_cli_samples_find(data, nin, &samples))) goto done;
  rc = KN_EXIT_ERROR;
  int32_t n_use = samples.n;
  if (max_samples && max_samples < n_use) n_use = (int32_t)max_samples;
  kn_calib_options co;
  kn_calib_options_init(&co);
  co.bins = (int32_t)bins;
  co.threads = (int32_t)threads;
  if (kn_calibrator_create(m, &co, &cal, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  char inputs_text[512] = "no inputs";
  for (int32_t k = 0; k < n_use; k++) {
    const char *dir = samples.dirs[k];
    if ((rc = kn_cli_sample_read(dir, model_path, names, nin, ins))) goto done;
    rc = KN_EXIT_ERROR;
    if (kn_calibrator_add_sample(cal, ins, nin, &err)) {
      rc = kn_cli_fail("%s: %s", dir, err.msg);
      goto done;
    }
    if (k == 0 && nin) {
      size_t used = 0;
      inputs_text[0] = 0;
      for (int32_t i = 0; i < nin && used < sizeof inputs_text; i++) {
        char d[128];
        kn_cli_dims_text(ins[i].dims, ins[i].rank, d, sizeof d);
        used += (size_t)snprintf(inputs_text + used, sizeof inputs_text - used, "%s%s=%s",
                                 i ? " " : "", names[i], ins[i].rank ? d : "scalar");
      }
    }
    release_all(ins, nin);
  }
  if (kn_calibrator_finish(cal, method, method == KN_CALIB_PERCENTILE ? pct : 0, &table,
                           &err) ||
      kn_calibration_save(table, out, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  int32_t n = kn_calibration_count(table);
  top = calloc((size_t)n + 1, sizeof *top);
  if (!top) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  for (int32_t i = 0; i < n; i++) {
    if (kn_calibration_entry(table, i, &top[i].r)) continue;
    top[i].full = fmax(fabs(top[i].r.min), fabs(top[i].r.max));
  }
  qsort(top, (size_t)n, sizeof *top, cmp_amax_desc);
  char mtext[64];
  if (method == KN_CALIB_PERCENTILE) snprintf(mtext, sizeof mtext, "percentile %g", pct);
  else snprintf(mtext, sizeof mtext, "%s", kn_calib_method_name(method));
  printf("calibrated %s on %d sample%s from %s (%s): %d float tensor%s, method %s, "
         "%.2f s\n", model_path, n_use, n_use == 1 ? "" : "s", data, inputs_text, n,
         n == 1 ? "" : "s", mtext, kn_cli_now_s() - t0);
  if (n) printf("widest ranges (AMAX, then the values seen):\n");
  char nm[SHOWN][96];
  int width = 0;
  for (int32_t i = 0; i < n && i < SHOWN; i++) {
    /* quoted as in the file when needed; a long name cut short */
    size_t len = kn_calib_name_write(top[i].r.name, nm[i], sizeof nm[i]);
    if (len >= sizeof nm[i]) memcpy(nm[i] + sizeof nm[i] - 4, "...", 4);
    int w = (int)strlen(nm[i]);
    width = w > width ? w : width;
  }
  for (int32_t i = 0; i < n && i < SHOWN; i++) {
    const shown *s = &top[i];
    printf("  %-*s  amax %-11.6g min %-11.6g max %-11.6g", width, nm[i], s->r.amax, s->r.min,
           s->r.max);
    if (s->full > 0) printf(" (%.1f%% of max |x|)", 100.0 * s->r.amax / s->full);
    printf("\n");
  }
  uint64_t bad = kn_calibrator_nonfinite_count(cal);
  if (bad)
    fprintf(stderr, "kiln calibrate: note: %llu NaN or infinite values were left out of the "
                    "ranges\n", (unsigned long long)bad);
  printf("wrote %s\n", out);
  rc = KN_EXIT_OK;
done:
  release_all(ins, nin);
  free(ins);
  free(names);
  free(top);
  kn_cli_samples_free(&samples);
  kn_calibration_free(table);
  kn_calibrator_free(cal);
  kn_model_free(m);
  return rc;
}
