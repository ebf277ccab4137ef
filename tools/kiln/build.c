/* kiln build MODEL -o ENGINE: optimize, plan memory, write an engine file. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OPTS 256

void kn_cmd_build_usage(FILE *f) {
  fprintf(f,
          "usage: kiln build MODEL -o ENGINE [--shape NAME=DIMS]... [--profile NAME=MIN:OPT:MAX]...\n"
          "                  [--disable-pass NAME]... [--workspace BYTES] [--no-optimize]\n\n"
          "Optimizes MODEL (.onnx), plans its memory and writes ENGINE, a single\n"
          "versioned, checksummed file (docs/ENGINE_FORMAT.md) that `kiln run`,\n"
          "`kiln inspect` and `kiln compare` accept wherever they take a model.\n\n"
          "  --shape NAME=1x3x224x224   fix a dynamic input's dims (repeatable)\n"
          "  --profile NAME=MIN:OPT:MAX keep an input dynamic within a range, each a\n"
          "                             shape (1x3x32x32:1x3x224x224:8x3x224x224); memory\n"
          "                             is planned for MAX; runs outside are refused\n"
          "  --disable-pass NAME        skip an optimization pass (repeatable; see below)\n"
          "  --workspace BYTES          cap the activation arena (K, M, G suffixes);\n"
          "                             a plan that needs more fails, saying by how much\n"
          "  --no-optimize              keep the graph as imported\n\n"
          "Passes, in the order they run:\n");
  kn_cli_print_passes(f);
}

/* "512M" -> bytes; false when malformed. */
static bool parse_bytes(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return false;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end || v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int kn_cmd_build(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("build");
  const char *model_path = NULL, *out_path = NULL;
  const char *shapes[MAX_OPTS], *disabled[MAX_OPTS], *profiles[MAX_OPTS];
  int n_shapes = 0, n_disabled = 0, n_profiles = 0;
  kn_build_options bo;
  kn_build_options_init(&bo);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool v = i + 1 < argc;
    if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) out_path = argv[++i];
    else if (!strcmp(a, "--shape") && v) {
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      shapes[n_shapes++] = argv[++i];
    } else if (!strcmp(a, "--profile") && v) {
      if (n_profiles == MAX_OPTS) return kn_cli_usage(cmd, "too many --profile options");
      profiles[n_profiles++] = argv[++i];
    } else if (!strcmp(a, "--disable-pass") && v) {
      if (n_disabled == MAX_OPTS) return kn_cli_usage(cmd, "too many --disable-pass options");
      disabled[n_disabled++] = argv[++i];
    } else if (!strcmp(a, "--workspace") && v) {
      if (!parse_bytes(argv[++i], &bo.workspace))
        return kn_cli_usage(cmd, "--workspace takes a byte count such as 268435456 or 256M");
    } else if (!strcmp(a, "--no-optimize")) {
      bo.no_optimize = 1;
    } else if (a[0] == '-') {
      return kn_cli_usage(cmd, "unknown or incomplete option '%s'", a);
    } else if (!model_path) {
      model_path = a;
    } else {
      return kn_cli_usage(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");
  if (!out_path) return kn_cli_usage(cmd, "-o ENGINE is required");
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  bo.profiles = profiles;
  bo.n_profiles = n_profiles;
  bo.disabled_passes = disabled;
  bo.n_disabled_passes = n_disabled;

  kn_error err = {0};
  kn_model *m = NULL;
  double t0 = now_ms();
  if (kn_model_load(model_path, &m, &err)) return kn_cli_error(&err);
  double t1 = now_ms();
  int rc = KN_EXIT_OK;
  if (kn_model_build(m, &bo, &err) || kn_model_save(m, out_path, &err)) {
    rc = kn_cli_error(&err);
  } else {
    kn_model_stats st;
    if (kn_model_stats_get(m, &st, &err)) {
      rc = kn_cli_error(&err);
    } else {
      printf("%s -> %s: %lld ONNX nodes -> %lld steps, weights %.1f MiB, arena %.2f MiB "
             "(lower bound %.2f MiB, unplanned %.2f MiB); load %.0f ms, build %.0f ms\n",
             model_path, out_path, (long long)st.onnx_nodes, (long long)st.nodes,
             (double)st.param_bytes / 1048576.0, (double)st.arena_bytes / 1048576.0,
             (double)st.lower_bound_bytes / 1048576.0,
             (double)st.naive_activation_bytes / 1048576.0, t1 - t0, now_ms() - t1);
    }
  }
  kn_model_free(m);
  return rc;
}
