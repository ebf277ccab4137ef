/* kiln run MODEL [--input-dir D] [--input NAME=FILE]... [--output-dir O]
 *               [--output-format pb|npy] */
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
          "                [--output-format pb|npy] [--no-optimize]\n\n"
          "Runs MODEL (.onnx) once.  Inputs come from D/input_<i>.pb (TensorProto, the\n"
          "i-th graph input that is not an initializer: the ONNX test-data layout; .npy\n"
          "is read too) and/or --input NAME=FILE (.pb or .npy).  Outputs are written to\n"
          "O/output_<i>.pb (or .npy with --output-format npy); without --output-dir a\n"
          "summary of each output is printed.  Dynamic dimensions take their sizes\n"
          "from the inputs given.  The model is optimized in memory with the default\n"
          "build options first; --no-optimize runs the graph as imported (the\n"
          "reference path).\n");
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
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (!strcmp(a, "--input-dir") && has_val) input_dir = argv[++i];
    else if (!strcmp(a, "--output-dir") && has_val) output_dir = argv[++i];
    else if (!strcmp(a, "--input") && has_val) {
      if (n_named == MAX_NAMED) return kn_cli_usage(cmd, "too many --input options");
      named[n_named++] = argv[++i];
      if (!strchr(named[n_named - 1], '='))
        return kn_cli_usage(cmd, "--input takes NAME=FILE, got '%s'", named[n_named - 1]);
    } else if (!strcmp(a, "--output-format") && has_val) {
      const char *f = argv[++i];
      if (!strcmp(f, "npy")) npy = true;
      else if (strcmp(f, "pb")) return kn_cli_usage(cmd, "--output-format is pb or npy, got '%s'", f);
    } else if (!strcmp(a, "--no-optimize")) {
      no_optimize = 1;
    } else if (a[0] == '-') {
      return kn_cli_usage(cmd, "unknown or incomplete option '%s'", a);
    } else if (!model_path) {
      model_path = a;
    } else {
      return kn_cli_usage(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");

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
  if (kn_model_build(model, &bo, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  nin = kn_model_input_count(model);
  inputs = calloc((size_t)nin + 1, sizeof *inputs);
  if (!inputs || kn_context_create(model, &ctx, &err)) {
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
