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
  (void)argv;
  if (argc > 1) return kn_cli_usage(kn_cli_find("ops"), "takes no arguments");
  int n = 0;
  kn_op_foreach(print_op, &n);
  printf("%d operators\n", n);
  return KN_EXIT_OK;
}
