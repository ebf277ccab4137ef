/* kiln serve --repository DIR: an inference server speaking the Open
 * Inference Protocol v2 (KServe v2) over HTTP, with dynamic batching,
 * model versions with validated hot reload, and Prometheus metrics.  The
 * server itself is the kiln_serve library of serve/ (docs/SERVE.md), built
 * when libmicrohttpd is found (KN_HAVE_SERVE); without it the command
 * says so in one line and exits 1. */
#include "cli.h"

#ifdef KN_HAVE_SERVE
#include "serve.h"

#include <signal.h>
#include <string.h>
#endif

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

#ifndef KN_HAVE_SERVE
int kn_cmd_serve(int argc, char **argv) {
  return kn_cli_not_built("serve", "libmicrohttpd", "libmicrohttpd-dev");
}
#else
int kn_cmd_serve(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("serve");
  enum { O_REPO = 1, O_HOST, O_PORT, O_THREADS, O_HTTP, O_MODE, O_POLL, O_MAXREQ, O_LOG };
  static const kn_cli_opt opts[] = {{"repository", 0, true, O_REPO},
                                    {"host", 0, true, O_HOST},
                                    {"port", 0, true, O_PORT},
                                    {"threads", 0, true, O_THREADS},
                                    {"http-threads", 0, true, O_HTTP},
                                    {"model-control-mode", 0, true, O_MODE},
                                    {"repository-poll-secs", 0, true, O_POLL},
                                    {"max-request-bytes", 0, true, O_MAXREQ},
                                    {"log", 0, true, O_LOG},
                                    {NULL, 0, false, 0}};
  sv_options o;
  sv_options_defaults(&o);
  kn_cli_args a;
  kn_cli_args_init(&a, cmd, opts, argc, argv);
  int64_t v;
  for (int id; (id = kn_cli_next(&a)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case KN_CLI_POSITIONAL: return kn_cli_usage(cmd, "unexpected argument '%s'", a.arg);
    case O_REPO: o.repository = a.arg; break;
    case O_HOST: o.host = a.arg; break;
    case O_PORT:
      if (!kn_cli_int(&a, 0, 65535, &v)) return KN_EXIT_USAGE;
      o.port = (int32_t)v;
      break;
    case O_THREADS:
      if (!kn_cli_int(&a, 1, KN_CLI_MAX_THREADS, &v)) return KN_EXIT_USAGE;
      o.threads = (int32_t)v;
      break;
    case O_HTTP:
      if (!kn_cli_int(&a, 1, 256, &v)) return KN_EXIT_USAGE;
      o.http_threads = (int32_t)v;
      break;
    case O_MODE:
      if (!strcmp(a.arg, "poll")) o.control = SV_CONTROL_POLL;
      else if (!strcmp(a.arg, "explicit")) o.control = SV_CONTROL_EXPLICIT;
      else if (!strcmp(a.arg, "none")) o.control = SV_CONTROL_NONE;
      else return kn_cli_usage(cmd, "--model-control-mode: expected poll, explicit or none, got '%s'",
                               a.arg);
      break;
    case O_POLL:
      if (!kn_cli_int(&a, 1, 86400, &v)) return KN_EXIT_USAGE;
      o.poll_secs = (int32_t)v;
      break;
    case O_MAXREQ:
      if (!kn_cli_parse_bytes(a.arg, &o.max_request_bytes) || o.max_request_bytes < 1024)
        return kn_cli_usage(cmd, "--max-request-bytes: expected a size of at least 1K, got '%s'",
                            a.arg);
      break;
    case O_LOG: o.log_path = a.arg; break;
    }
  }
  if (!o.repository) return kn_cli_usage(cmd, "--repository DIR is required");
  if (!kn_cli_check_thread_env(cmd)) return KN_EXIT_USAGE;

  /* SIGINT and SIGTERM are taken by sigwait below: blocked before any
   * thread starts, so that every thread inherits the mask */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  sv_server s;
  char err[1200];
  if (!sv_server_start(&s, &o, err, sizeof err)) {
    sv_server_stop(&s);
    return kn_cli_fail("serve: %s", err);
  }
  printf("kiln serve: listening on http://%s:%d\n", o.host ? o.host : "0.0.0.0", s.bound_port);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  sv_server_stop(&s);
  return KN_EXIT_OK;
}
#endif
