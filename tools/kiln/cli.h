/* Shared declarations of the kiln CLI: one file per subcommand. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "kiln.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 user/input error, 2 usage. */
enum { KN_EXIT_OK = 0, KN_EXIT_ERROR = 1, KN_EXIT_USAGE = 2 };

typedef struct kn_cli_cmd {
  const char *name;
  const char *summary;
  int (*main)(int argc, char **argv); /* argv[0] is the subcommand */
  void (*usage)(FILE *f);
} kn_cli_cmd;

int kn_cli_error(const kn_error *err);         /* prints "kiln: msg", returns 1 */
int kn_cli_fail(const char *fmt, ...)          /* same from a format */
    __attribute__((format(printf, 1, 2)));
int kn_cli_usage(const kn_cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));     /* prints usage, returns 2 */
const kn_cli_cmd *kn_cli_find(const char *name);

int kn_cmd_run(int argc, char **argv);
void kn_cmd_run_usage(FILE *f);
int kn_cmd_inspect(int argc, char **argv);
void kn_cmd_inspect_usage(FILE *f);
int kn_cmd_build(int argc, char **argv);
void kn_cmd_build_usage(FILE *f);
/* One line per optimization pass (name and summary), in run order. */
void kn_cli_print_passes(FILE *f);
int kn_cmd_compare(int argc, char **argv);
void kn_cmd_compare_usage(FILE *f);
int kn_cmd_ops(int argc, char **argv);
void kn_cmd_ops_usage(FILE *f);

#endif
