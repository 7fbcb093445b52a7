/* The flowgen command line: shared pieces of the subcommands. */
#ifndef FLOWGEN_CLI_H
#define FLOWGEN_CLI_H

#include "flowrt.h"
#include "internal.h"

#include <stdio.h>

void fg_cli_usage(FILE *out);
/* Prints "flowgen: message" and returns the status's exit code. */
int fg_cli_fail(const flowgen_error *err);
/* Prints "flowgen: <fmt with arg> (see flowgen --help)"; returns 2. */
int fg_cli_usage_error(const char *fmt, const char *arg);
/* "--flag value" / "--flag=value": 1 taken, 0 not this flag, -1 no value. */
int fg_cli_take(int argc, char **argv, int *i, const char *flag,
                const char **value);
/* The shape flags (--dim ... --name): 1 taken, 0 not one, -1 error (printed;
 * err->status says the exit code). */
int fg_cli_spec_option(int argc, char **argv, int *i, flowgen_spec *spec,
                       flowgen_error *err);

int fg_cli_sample(int argc, char **argv);
int fg_cli_cache(int argc, char **argv);

#endif
