/* kiln-loadgen: the load generator's executable, which `kiln loadgen` runs
 * (tools/kiln/cmd_loadgen.c), so that kiln itself does not load libcurl.
 * Its arguments are those of `kiln loadgen`; argv[0] stands for the
 * command's name. */
#include "cli.h"

int main(int argc, char **argv) {
  static const kn_cli_cmd cmd = {"loadgen", "load a KServe v2 server", kn_loadgen_main,
                                 kn_cmd_loadgen_usage};
  kn_cli_set_commands(&cmd, 1);
  return kn_cli_run(&cmd, argc, argv);
}
