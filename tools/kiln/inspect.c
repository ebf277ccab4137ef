/* kiln inspect MODEL: inputs, outputs, op histogram, parameters, FLOPs. */
#include "cli.h"

#include <stdbool.h>
#include <string.h>

void kn_cmd_inspect_usage(FILE *f) {
  fprintf(f, "usage: kiln inspect MODEL\n\n"
             "Prints the model's inputs and outputs (shapes, dtypes, symbolic dims), the\n"
             "op histogram, parameter count and bytes, and an estimate of the FLOPs of\n"
             "one run (a multiply-add counts 2; dynamic dimensions count as 1).\n");
}

static void print_value(const kn_value_info *vi) {
  printf("  %-24s %-8s [", vi->name, vi->dtype ? kn_dtype_name(vi->dtype) : "?");
  if (vi->rank < 0) printf("unknown rank");
  for (int32_t d = 0; d < vi->rank; d++) {
    if (d) printf(", ");
    if (vi->dims[d] >= 0) printf("%lld", (long long)vi->dims[d]);
    else printf("%s", vi->dim_params[d] ? vi->dim_params[d] : "?");
  }
  printf("]\n");
}

static void print_op(const char *op, int64_t count, void *arg) {
  (void)arg;
  printf("  %-24s %lld\n", op, (long long)count);
}

static const char *human(double v, char *buf, size_t n, const char *unit) {
  const char *pre[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    i++;
  }
  snprintf(buf, n, "%.3g %s%s", v, pre[i], unit);
  return buf;
}

int kn_cmd_inspect(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("inspect");
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') return kn_cli_usage(cmd, "unknown option '%s'", argv[i]);
    if (path) return kn_cli_usage(cmd, "unexpected argument '%s'", argv[i]);
    path = argv[i];
  }
  if (!path) return kn_cli_usage(cmd, "MODEL is required");
  kn_error err = {0};
  kn_model *m = NULL;
  if (kn_model_load(path, &m, &err)) return kn_cli_error(&err);
  kn_model_stats st;
  if (kn_model_stats_get(m, &st, &err)) {
    kn_model_free(m);
    return kn_cli_error(&err);
  }
  char b1[32], b2[32], b3[32];
  printf("model: %s (IR version %lld, opset %lld)\n", path, (long long)st.ir_version,
         (long long)st.opset);
  printf("inputs:\n");
  for (int32_t i = 0; i < kn_model_input_count(m); i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) == KN_OK) print_value(&vi);
  }
  printf("outputs:\n");
  for (int32_t i = 0; i < kn_model_output_count(m); i++) {
    kn_value_info vi;
    if (kn_model_output_info(m, i, &vi) == KN_OK) print_value(&vi);
  }
  printf("ops (%lld nodes):\n", (long long)st.nodes);
  kn_model_op_histogram(m, print_op, NULL);
  printf("parameters: %s (%lld), %s\n", human((double)st.params, b1, sizeof b1, ""),
         (long long)st.params, human((double)st.param_bytes, b2, sizeof b2, "B"));
  bool dynamic = false;
  for (int32_t i = 0; i < kn_model_input_count(m); i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) != KN_OK) continue;
    for (int32_t d = 0; d < vi.rank; d++) dynamic |= vi.dims[d] < 0;
  }
  printf("FLOPs per run: %s%s\n", human(st.flops, b3, sizeof b3, "FLOP"),
         dynamic ? " (dynamic dimensions taken as 1)" : "");
  kn_model_free(m);
  return KN_EXIT_OK;
}
