/* flowgen cache: placeholder until the runtime lands. */
#include "cli.h"

int fg_cli_cache(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "flowgen: cache: not available in this build yet\n");
  return 1;
}
