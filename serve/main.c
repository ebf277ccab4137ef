/* kiln-serve: the inference server's executable, which `kiln serve` runs
 * (tools/kiln/cmd_serve.c, which holds the usage text), so that kiln itself
 * does not load libmicrohttpd.  Its arguments are those of `kiln serve`;
 * argv[0] stands for the command's name.  The options are parsed with the
 * CLI's helpers (tools/kiln/cli.h); the server is the kiln_serve library
 * (serve.h). */
#include "cli.h"
#include "serve.h"

#include <signal.h>
#include <string.h>

static int serve_main(int argc, char **argv) {
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

int main(int argc, char **argv) {
  static const kn_cli_cmd cmd = {"serve", "serve a model repository over HTTP", serve_main,
                                 kn_cmd_serve_usage};
  kn_cli_set_commands(&cmd, 1);
  return kn_cli_run(&cmd, argc, argv);
}
