/* flowgen sample: placeholder until the runtime lands. */
#include "cli.h"

int fg_cli_sample(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "flowgen: sample: not available in this build yet\n");
  return 1;
}
