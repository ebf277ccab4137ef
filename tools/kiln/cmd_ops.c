/* kiln ops: the operators this build implements, from the op registry. */
#include "cli.h"
#include "ops/op.h"

void kn_cmd_ops_usage(FILE *f) {
  fprintf(f, "usage: kiln ops\n\nLists every operator kiln implements with its "
             "domain and the opset versions covered.\n");
}

static void print_op(const kn_op_def *op, void *arg) {
  int *n = arg;
  printf("%-28s %-10s opsets %d-%d\n", op->name,
         op->domain && *op->domain ? op->domain : "ai.onnx", op->since, op->until);
  (*n)++;
}

int kn_cmd_ops(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("ops");
  static const kn_cli_opt opts[] = {{NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    if (id == KN_CLI_BAD) return KN_EXIT_USAGE;
    return kn_cli_usage(cmd, "takes no arguments, got '%s'", args.arg);
  }
  int n = 0;
  kn_op_foreach(print_op, &n);
  printf("%d operators\n", n);
  return KN_EXIT_OK;
}
