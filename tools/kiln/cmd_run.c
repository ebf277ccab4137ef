/* kiln run MODEL [--input-dir D] [--input NAME=FILE]... [--output-dir O]
 *               [--output-format pb|npy] [--no-optimize] [--threads N] */
#include "cli.h"
#include "core/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMED 256

void kn_cmd_run_usage(FILE *f) {
  fprintf(f,
          "usage: kiln run MODEL [--input-dir D] [--input NAME=FILE]... [--output-dir O]\n"
          "                [--output-format pb|npy] [--no-optimize] [--threads N]\n\n"
          "Runs MODEL (.onnx) once.  Inputs come from D/input_<i>.pb (TensorProto, the\n"
          "i-th graph input that is not an initializer: the ONNX test-data layout; .npy\n"
          "is read too) and/or --input NAME=FILE (.pb or .npy).  Outputs are written to\n"
          "O/output_<i>.pb (or .npy with --output-format npy); without --output-dir a\n"
          "summary of each output is printed.  Dynamic dimensions take their sizes\n"
          "from the inputs given.  The model is optimized in memory with the default\n"
          "build options first; --no-optimize runs the graph as imported (the\n"
          "reference path).  --threads N runs on N threads (default: KILN_NUM_THREADS,\n"
          "else the CPUs this process may use).  Options also take the --name=VALUE\n"
          "form.\n");
}

static bool exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

static void print_summary(const char *name, const kn_tensor *t) {
  char shape[160] = "";
  size_t o = 0;
  for (int32_t d = 0; d < t->rank && o < sizeof shape; d++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", d ? "x" : "",
                          (long long)t->dims[d]);
  printf("%s: %s [%s]", name, kn_dtype_name(t->dtype), t->rank ? shape : "scalar");
  int64_t n = kn_tensor_numel(t);
  printf(" =");
  for (int64_t i = 0; i < n && i < 8; i++) {
    if (t->dtype == KN_DTYPE_STRING)
      printf(" \"%s\"", ((char *const *)t->data)[i]);
    else if (t->dtype == KN_DTYPE_U64)
      printf(" %llu", (unsigned long long)((const uint64_t *)t->data)[i]);
    else if (kn_dtype_is_float(t->dtype))
      printf(" %.6g", kn_load_f64(t->data, t->dtype, i));
    else if (kn_dtype_is_int(t->dtype) || t->dtype == KN_DTYPE_BOOL)
      printf(" %lld", (long long)kn_load_i64(t->data, t->dtype, i));
    else
      printf(" ?");
  }
  printf("%s\n", n > 8 ? " ..." : "");
}

int kn_cmd_run(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("run");
  const char *model_path = NULL, *input_dir = NULL, *output_dir = NULL;
  const char *named[MAX_NAMED];
  int n_named = 0;
  bool npy = false;
  int no_optimize = 0;
  int64_t threads = 0;
  enum { O_INPUT_DIR = 1, O_OUTPUT_DIR, O_INPUT, O_OUTPUT_FORMAT, O_NO_OPTIMIZE, O_THREADS };
  static const kn_cli_opt opts[] = {{"input-dir", 0, true, O_INPUT_DIR},
                                    {"output-dir", 0, true, O_OUTPUT_DIR},
                                    {"input", 0, true, O_INPUT},
                                    {"output-format", 0, true, O_OUTPUT_FORMAT},
                                    {"no-optimize", 0, false, O_NO_OPTIMIZE},
                                    {"threads", 0, true, O_THREADS},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_INPUT_DIR: input_dir = args.arg; break;
    case O_OUTPUT_DIR: output_dir = args.arg; break;
    case O_INPUT:
      if (n_named == MAX_NAMED) return kn_cli_usage(cmd, "too many --input options");
      if (!strchr(args.arg, '=')) return kn_cli_usage(cmd, "--input takes NAME=FILE, got '%s'", args.arg);
      named[n_named++] = args.arg;
      break;
    case O_OUTPUT_FORMAT:
      if (!strcmp(args.arg, "npy")) npy = true;
      else if (!strcmp(args.arg, "pb")) npy = false;
      else return kn_cli_usage(cmd, "--output-format is pb or npy, got '%s'", args.arg);
      break;
    case O_NO_OPTIMIZE: no_optimize = 1; break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &threads)) return KN_EXIT_USAGE;
      break;
    case KN_CLI_POSITIONAL:
      if (model_path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      model_path = args.arg;
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;

  kn_error err = {0};
  kn_model *model = NULL;
  kn_context *ctx = NULL;
  int rc = KN_EXIT_ERROR;
  int32_t nin = 0;
  kn_tensor *inputs = NULL;
  if (kn_model_load(model_path, &model, &err)) return kn_cli_error(&err);
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.no_optimize = no_optimize;
  kn_cli_note_probe(model, &bo);
  if (kn_model_build(model, &bo, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  nin = kn_model_input_count(model);
  inputs = calloc((size_t)nin + 1, sizeof *inputs);
  if (!inputs || kn_context_create(model, &ctx, &err) ||
      kn_cli_set_threads(ctx, threads, &err)) {
    if (!inputs) snprintf(err.msg, sizeof err.msg, "out of memory");
    rc = kn_cli_error(&err);
    goto done;
  }
  /* named inputs must name real inputs */
  for (int k = 0; k < n_named; k++) {
    const char *eq = strchr(named[k], '=');
    size_t nl = (size_t)(eq - named[k]);
    bool found = false;
    for (int32_t i = 0; i < nin && !found; i++) {
      kn_value_info vi;
      if (kn_model_input_info(model, i, &vi) == KN_OK && strlen(vi.name) == nl &&
          !strncmp(vi.name, named[k], nl))
        found = true;
    }
    if (!found) {
      rc = kn_cli_fail("%s: --input %.*s: the model has no input of that name",
                       model_path, (int)nl, named[k]);
      goto done;
    }
  }
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(model, i, &vi)) goto done;
    char path[4096];
    const char *file = NULL;
    for (int k = 0; k < n_named; k++) {
      const char *eq = strchr(named[k], '=');
      if (strlen(vi.name) == (size_t)(eq - named[k]) && !strncmp(vi.name, named[k], strlen(vi.name)))
        file = eq + 1;
    }
    if (!file && input_dir) {
      snprintf(path, sizeof path, "%s/input_%d.pb", input_dir, i);
      if (!exists(path)) snprintf(path, sizeof path, "%s/input_%d.npy", input_dir, i);
      if (exists(path)) file = path;
    }
    if (!file) {
      rc = kn_cli_fail("%s: input %d '%s' was not given (expected %s/input_%d.pb or "
                       "--input %s=FILE)",
                       model_path, i, vi.name, input_dir ? input_dir : "<input-dir>", i,
                       vi.name);
      goto done;
    }
    if (kn_tensor_read_file(file, &inputs[i], NULL, &err) ||
        kn_context_set_input(ctx, i, &inputs[i], &err)) {
      rc = kn_cli_error(&err);
      goto done;
    }
  }
  if (kn_context_run(ctx, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  if (output_dir && mkdir(output_dir, 0777) != 0 && errno != EEXIST) {
    rc = kn_cli_fail("cannot create output directory '%s': %s", output_dir,
                     strerror(errno));
    goto done;
  }
  for (int32_t o = 0; o < kn_model_output_count(model); o++) {
    kn_value_info vi;
    if (kn_model_output_info(model, o, &vi)) goto done;
    const kn_tensor *t = kn_context_output(ctx, o);
    if (!t) {
      rc = kn_cli_fail("%s: output %d '%s' is not a tensor (sequences and optionals "
                       "cannot be written by 'kiln run')",
                       model_path, o, vi.name);
      goto done;
    }
    if (!output_dir) {
      print_summary(vi.name, t);
      continue;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%d.%s", output_dir, o, npy ? "npy" : "pb");
    kn_status st = npy ? kn_tensor_write_npy(path, t, &err)
                       : kn_tensor_write_pb(path, t, vi.name, &err);
    if (st) {
      rc = kn_cli_error(&err);
      goto done;
    }
  }
  rc = KN_EXIT_OK;
done:
  if (inputs)
    for (int32_t i = 0; i < nin; i++) kn_tensor_release(&inputs[i]);
  free(inputs);
  kn_context_free(ctx);
  kn_model_free(model);
  return rc;
}
