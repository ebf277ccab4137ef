/* What every kiln subcommand shares (cli.h): finding a command, one-line
 * errors and usage errors with their exit codes, names made safe to print,
 * the list of optimization passes.  main.c holds the command table and
 * hands it here before running a command; nothing here calls main.c. */
#include "cli.h"
#include "passes/pass.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const kn_cli_cmd *cli_commands;
static size_t cli_n_commands;

void kn_cli_set_commands(const kn_cli_cmd *cmds, size_t n) {
  cli_commands = cmds;
  cli_n_commands = n;
}

const kn_cli_cmd *kn_cli_find(const char *name) {
  for (size_t i = 0; i < cli_n_commands; i++)
    if (strcmp(cli_commands[i].name, name) == 0) return &cli_commands[i];
  return NULL;
}

int kn_cli_run(const kn_cli_cmd *cmd, int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      cmd->usage(stdout);
      return KN_EXIT_OK;
    }
  return cmd->main(argc, argv);
}

/* The component's executable sits beside this one: build/kiln-serve next
 * to build/kiln, $prefix/bin/kiln-serve next to $prefix/bin/kiln, as git
 * finds git-<command>.  Found from /proc/self/exe, not PATH, so that a
 * kiln runs its own build's server and never another installation's. */
int kn_cli_exec_component(const char *cmd, int argc, char **argv) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return kn_cli_fail("kiln %s: cannot find this executable's path (/proc/self/exe): %s", cmd,
                       strerror(errno));
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  int dir_len = slash ? (int)(slash - self) : 0;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%.*s/kiln-%s", dir_len, self, cmd);
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return kn_cli_fail("kiln %s: out of memory", cmd);
  args[0] = path;
  for (int i = 1; i < argc; i++) args[i] = argv[i];
  fflush(NULL);
  execv(path, args);
  int e = errno;
  free(args);
  return kn_cli_fail("kiln %s is not available: its executable %s cannot be run (%s); it is "
                     "built and installed beside kiln", cmd, path, strerror(e));
}

/* Names inside a model or file may hold any bytes: control characters are
 * written as \xNN so that an error stays one line and cannot drive the
 * terminal. */
void kn_cli_put_sanitized(const char *s, FILE *f) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
    else fputc(*p, f);
  }
}

void kn_cli_print_passes(FILE *f) {
  for (int32_t i = 0; i < kn_n_passes; i++)
    fprintf(f, "  %-14s %s\n", kn_passes[i].name, kn_passes[i].summary);
}

int kn_cli_error(const kn_error *err) {
  fputs("kiln: ", stderr);
  kn_cli_put_sanitized(err->msg[0] ? err->msg : "unknown error", stderr);
  fputc('\n', stderr);
  return KN_EXIT_ERROR;
}

int kn_cli_fail(const char *fmt, ...) {
  kn_error err = {.status = KN_ERR_INVALID_ARG};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err.msg, sizeof err.msg, fmt, ap);
  va_end(ap);
  return kn_cli_error(&err);
}

/* One line, so that a script's log shows what was wrong; the usage text
 * is one --help away. */
int kn_cli_usage(const kn_cli_cmd *cmd, const char *fmt, ...) {
  if (!fmt) {
    cmd->usage(stderr);
    return KN_EXIT_USAGE;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "kiln %s: ", cmd->name);
  kn_cli_put_sanitized(msg, stderr);
  fprintf(stderr, " (see 'kiln %s --help')\n", cmd->name);
  return KN_EXIT_USAGE;
}

int kn_cli_not_built(const char *cmd, const char *library, const char *package) {
  return kn_cli_fail("kiln %s is not available: this kiln was built without %s (install %s, "
                     "then configure and build kiln again)", cmd, library, package);
}

void kn_cli_not_built_note(FILE *f, const char *cmd, const char *library, const char *package) {
  fprintf(f, "\nThis kiln was built without %s: kiln %s is not available.\n"
             "Install %s, then configure and build kiln again.\n", library, cmd, package);
}
