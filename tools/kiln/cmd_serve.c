/* kiln serve --repository DIR: an inference server speaking the Open
 * Inference Protocol v2 (KServe v2) over HTTP, with dynamic batching,
 * model versions with validated hot reload, and Prometheus metrics.  Here
 * are its usage text and the command, which runs the kiln-serve executable
 * beside kiln (serve/main.c over the kiln_serve library, docs/SERVE.md;
 * built when libmicrohttpd is found: KN_HAVE_SERVE) or, in a kiln built
 * without libmicrohttpd, says so in one line and exits 1. */
#include "cli.h"

void kn_cmd_serve_usage(FILE *f) {
  fprintf(f,
          "usage: kiln serve --repository DIR [--host H] [--port P] [--threads N]\n"
          "                  [--http-threads N] [--model-control-mode poll|explicit|none]\n"
          "                  [--repository-poll-secs S] [--max-request-bytes BYTES]\n"
          "                  [--log FILE|-]\n\n"
          "Serves the models of DIR (Triton's layout: DIR/MODEL/VERSION/model.kiln or\n"
          "model.onnx, optional DIR/MODEL/config.json) over HTTP with the KServe v2 /\n"
          "Open Inference Protocol (JSON and binary tensors), dynamic batching, metrics\n"
          "at /metrics and a dashboard at /dashboard.  docs/SERVE.md has the details.\n\n"
          "  --repository DIR      the model repository (required)\n"
          "  --host H              address to listen on (default: every address)\n"
          "  --port P              TCP port (default 8000; 0: any free port, printed)\n"
          "  --threads N           compute threads per model, spread over its instances\n"
          "                        unless config.json's instance_group sets \"threads\"\n"
          "                        (default: the CPUs this process may use)\n"
          "  --http-threads N      HTTP threads (default 2); waiting requests hold none\n"
          "  --model-control-mode  poll (default): new and removed versions are found\n"
          "                        every --repository-poll-secs; explicit: only through\n"
          "                        POST /v2/repository/models/M/load and /unload; none:\n"
          "                        load at start only (the API still works)\n"
          "  --repository-poll-secs S  seconds between repository scans (default 5)\n"
          "  --max-request-bytes B  largest request body (default 64M; suffixes K M G)\n"
          "  --log FILE|-          JSON-lines event log (requests, loads) to FILE or stderr\n\n"
          "Prints 'kiln serve: listening on http://HOST:PORT' once ready; SIGINT or\n"
          "SIGTERM stops it after answering what is queued.\n");
#ifndef KN_HAVE_SERVE
  kn_cli_not_built_note(f, "serve", "libmicrohttpd", "libmicrohttpd-dev");
#endif
}

int kn_cmd_serve(int argc, char **argv) {
#ifdef KN_HAVE_SERVE
  return kn_cli_exec_component("serve", argc, argv);
#else
  return kn_cli_not_built("serve", "libmicrohttpd", "libmicrohttpd-dev");
#endif
}
