/* kiln loadgen's place in the CLI: its usage text and the command, which
 * runs the kiln-loadgen executable beside kiln (tools/loadgen/, built when
 * libcurl is found: KN_HAVE_LOADGEN; docs/SERVE.md) or, in a kiln built
 * without libcurl, says so in one line and exits 1. */
#include "cli.h"

void kn_cmd_loadgen_usage(FILE *f) {
  fprintf(f,
          "usage: kiln loadgen URL --model M [--version V]\n"
          "                    [--concurrency N | --rate R [--concurrency N]]\n"
          "                    [--duration S | --requests N] [--warmup S]\n"
          "                    [--shape NAME=DIMS]... [--input NAME=FILE]... [--seed N]\n"
          "                    [--json-data] [--timeout-us US] [--priority P]\n"
          "                    [--request-timeout S] [--json]\n\n"
          "Sends inference requests to a KServe v2 / Open Inference Protocol server\n"
          "(kiln serve, Triton, KServe) at URL (http://HOST:PORT) and prints, as\n"
          "perf_analyzer does, the request count, throughput and client latency\n"
          "percentiles, and the requests that failed by HTTP status.\n\n"
          "  --model M            the model (its metadata, GET /v2/models/M, gives the\n"
          "                       inputs' names, datatypes and shapes)\n"
          "  --version V          a version of it (default: the server's choice)\n"
          "  --concurrency N      closed loop: N clients, each sending its next request\n"
          "                       as soon as its last one is answered (default 1); with\n"
          "                       --rate, the most requests in flight (default 64)\n"
          "  --rate R             open loop: R requests per second on average, Poisson\n"
          "                       arrivals; latency counts from the scheduled arrival,\n"
          "                       so a request that waits for a free connection shows it\n"
          "  --duration S         measure for S seconds (default 10)\n"
          "  --requests N         measure N requests instead\n"
          "  --warmup S           send for S seconds first, not measured (default 1)\n"
          "  --shape NAME=DIMS    an input's dims where the metadata has dynamic ones\n"
          "                       (-1), e.g. input=8x3x32x32; others are taken as 1\n"
          "  --input NAME=FILE    an input's data from a .pb (TensorProto) or .npy file\n"
          "  --seed N             seed of the generated inputs (default 1): floats\n"
          "                       uniform in [-1, 1), integers and booleans 0 or 1\n"
          "  --json-data          tensors as JSON \"data\" arrays, not binary\n"
          "  --timeout-us US      the request's \"timeout\" parameter (its deadline at\n"
          "                       the server, microseconds)\n"
          "  --priority P         the request's \"priority\" parameter\n"
          "  --request-timeout S  the client gives up on a request after S seconds\n"
          "                       (default 60), counted as an error\n"
          "  --json               print one JSON object instead of the text\n\n"
          "SIGINT or SIGTERM ends the load early: the requests in flight are waited\n"
          "for and counted, and the report covers the time until the last answer.\n"
          "Every request carries the same inputs and an \"id\".  Success is an HTTP 200\n"
          "whose outputs are those of the model's metadata, well formed.  With a\n"
          "duration, the requests answered inside the measured period are counted,\n"
          "whenever they were sent (as perf_analyzer's window); with --requests N, the\n"
          "N sent after the warm-up.  Requests answered after the measured period are\n"
          "waited for but not counted.  Exit\n"
          "status 1 when the metadata cannot be read or no measured request succeeded.\n");
#ifndef KN_HAVE_LOADGEN
  kn_cli_not_built_note(f, "loadgen", "libcurl", "libcurl4-openssl-dev");
#endif
}

int kn_cmd_loadgen(int argc, char **argv) {
#ifdef KN_HAVE_LOADGEN
  return kn_cli_exec_component("loadgen", argc, argv);
#else
  return kn_cli_not_built("loadgen", "libcurl", "libcurl4-openssl-dev");
#endif
}
