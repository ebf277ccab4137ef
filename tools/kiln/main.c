/* kiln: the command-line tool.  Subcommands are listed once, here; what
 * they share is cli_util.c. */
#include "cli.h"

#include <string.h>

static const kn_cli_cmd commands[] = {
    {"run", "run a model on inputs and write its outputs", kn_cmd_run, kn_cmd_run_usage},
    {"inspect", "describe a model: inputs, outputs, ops, parameters, FLOPs",
     kn_cmd_inspect, kn_cmd_inspect_usage},
    {"build", "optimize a model, plan its memory, write an engine file", kn_cmd_build,
     kn_cmd_build_usage},
    {"compare", "compare the optimized engine with the reference path", kn_cmd_compare,
     kn_cmd_compare_usage},
    {"bench", "time a model or engine: latency percentiles, throughput, peak memory",
     kn_cmd_bench, kn_cmd_bench_usage},
    {"profile", "time every step: table, JSON, Chrome trace, memory sweep, HTML report",
     kn_cmd_profile, kn_cmd_profile_usage},
    {"probe", "measure this machine (peaks, caches, bandwidths, kernel factors) for the IO model",
     kn_cmd_probe, kn_cmd_probe_usage},
    {"ops", "list the operators kiln implements", kn_cmd_ops, kn_cmd_ops_usage},
    {"trace", "merge Chrome traces of several processes or hosts, with a summary",
     kn_cmd_trace, kn_cmd_trace_usage},
    {"validate", "check an engine against its model: accuracy, p99, peak RSS limits", kn_cmd_validate, kn_cmd_validate_usage},
    {"calibrate", "int8 calibration: tensor ranges over sample inputs, the calibration cache", kn_cmd_calibrate, kn_cmd_calibrate_usage},
    {"quantize", "write a Q/DQ ONNX model (int8) from a model and its calibration cache",
     kn_cmd_quantize, kn_cmd_quantize_usage},
    {"debug", "debug precision: bisect which layers must stay fp32 for an accuracy budget",
     kn_cmd_debug, kn_cmd_debug_usage},
    {"serve", "serve a model repository over HTTP (KServe v2): batching, reload, metrics",
     kn_cmd_serve, kn_cmd_serve_usage},
    {"loadgen", "load a KServe v2 server: closed/open loop, throughput, latency percentiles",
     kn_cmd_loadgen, kn_cmd_loadgen_usage},
};

static void usage(FILE *f) {
  fprintf(f, "kiln %s: ONNX models in, fast inference out\n\n"
             "usage: kiln <command> [options]\n\ncommands:\n", KN_VERSION_STRING);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'kiln <command> --help' describes a command's options.\n"
             "Exit status: 0 success, 1 bad input or failure, 2 usage error.\n");
}

int main(int argc, char **argv) {
  kn_cli_set_commands(commands, sizeof commands / sizeof commands[0]);
  if (argc < 2) {
    usage(stderr);
    return KN_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return KN_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("kiln %s\n", KN_VERSION_STRING);
    return KN_EXIT_OK;
  }
  const kn_cli_cmd *cmd = kn_cli_find(argv[1]);
  if (!cmd) {
    fputs("kiln: unknown command '", stderr);
    kn_cli_put_sanitized(argv[1], stderr);
    fputs("'\n", stderr);
    usage(stderr);
    return KN_EXIT_USAGE;
  }
  return kn_cli_run(cmd, argc - 1, argv + 1);
}
