/* kiln validate ENGINE --against MODEL.onnx: an engine's accuracy against
 * the reference path of its model, its p99 latency and its peak RSS, each
 * checked against a limit (gates.c), for CI. */
#include "cli.h"

#include <string.h>

#define MAX_OPTS 256

void kn_cmd_validate_usage(FILE *f) {
  fprintf(f,
          "usage: kiln validate ENGINE --against MODEL [--max-p99-ms X] [--max-rss BYTES]\n"
          "                     [--max-abs-error E] [--min-cosine C] [--data DIR]\n"
          "                     [--runs N] [--warmup N] [--threads N] [--seed N]\n"
          "                     [--shape NAME=DIMS]... [--json]\n\n"
          "Runs ENGINE (written by kiln build) and the reference path of MODEL (the\n"
          "ONNX model it was built from, unoptimized, as kiln compare runs it) on the\n"
          "same inputs, measures accuracy, latency and peak memory, and checks each\n"
          "limit given: one line per limit, PASS or FAIL, the measured value, the\n"
          "limit and the margin (room left: limit - measured for a maximum, measured -\n"
          "limit for --min-cosine; negative when it fails).  Exits 1 when a limit\n"
          "fails (and says which on stderr), 0 when all pass.  With no limit it reports\n"
          "the measurements and passes.\n\n"
          "  --against MODEL      the ONNX model to compare with (required)\n"
          "  --max-p99-ms X       p99 latency of ENGINE over the timed runs, in ms\n"
          "  --max-rss BYTES      peak RSS (K, M, G suffixes): the process, with ENGINE\n"
          "                       loaded and run, before MODEL is loaded\n"
          "  --max-abs-error E    largest |engine - reference| of any output element\n"
          "  --min-cosine C       smallest cosine similarity of an output (-1 to 1)\n"
          "                       (accuracy: the worst over outputs and samples)\n"
          "  --data DIR           inputs: DIR/input_<i>.pb (TensorProto, or .npy), or\n"
          "                       one sub-folder per sample holding them (ONNX's\n"
          "                       test_data_set_0/, ...); default: one generated sample,\n"
          "                       floats uniform in [-1, 1), integers and bools 0 or 1\n"
          "  --seed N             seed of the generated inputs (default 1)\n"
          "  --shape NAME=DIMS    dims of a dynamic input for generated inputs\n"
          "                       (default 1 for each dynamic dim, within a --profile)\n"
          "  --runs N             timed runs on the first sample (default %d)\n"
          "  --warmup N           untimed runs before them (default %d)\n"
          "  --threads N          threads of both runs (default: KILN_NUM_THREADS, else\n"
          "                       the CPUs this process may use)\n"
          "  --json               print one JSON object instead (format \"kiln-validate\",\n"
          "                       version 1; docs/CLI.md)\n\n"
          "kiln build takes the same limits and writes no engine that fails one.\n"
          "Options also take the --name=VALUE form.\n",
          KN_CLI_GATE_RUNS, KN_CLI_GATE_WARMUP);
}

int kn_cmd_validate(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("validate");
  const char *shapes[MAX_OPTS];
  int n_shapes = 0;
  kn_cli_gates g;
  kn_cli_gates_init(&g);
  enum { O_AGAINST = 1, O_THREADS, O_SHAPE, O_JSON };
  static const kn_cli_opt opts[] = {{"against", 0, true, O_AGAINST},
                                    {"threads", 0, true, O_THREADS},
                                    {"shape", 0, true, O_SHAPE},
                                    {"json", 0, false, O_JSON},
                                    KN_CLI_GATE_OPTS,
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_AGAINST: g.model = args.arg; break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &g.threads)) return KN_EXIT_USAGE;
      break;
    case O_SHAPE:
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      if (!kn_cli_shape_spec_ok(args.arg))
        return kn_cli_usage(cmd, "--shape takes NAME=DIMS such as input=1x3x224x224, got '%s'",
                            args.arg);
      shapes[n_shapes++] = args.arg;
      break;
    case O_JSON: g.json = true; break;
    case KN_CLI_POSITIONAL:
      if (g.engine) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      g.engine = args.arg;
      break;
    default: {
      int rc = kn_cli_gate_option(&args, id, &g);
      if (rc) return rc < 0 ? KN_EXIT_USAGE : rc;
    }
    }
  }
  if (!g.engine) return kn_cli_usage(cmd, "ENGINE is required");
  if (!g.model) return kn_cli_usage(cmd, "--against MODEL is required");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;
  g.shapes = shapes;
  g.n_shapes = n_shapes;
  char failed[1024];
  int rc = kn_cli_gates_check(&g, failed, sizeof failed);
  if (rc && failed[0]) kn_cli_fail("%s fails %s", g.engine, failed);
  return rc;
}
