/* The flowgen command line: shared pieces of the subcommands. */
#ifndef FLOWGEN_CLI_H
#define FLOWGEN_CLI_H

#include "fileio.h"
#include "flowrt.h"

#include <stdio.h>

void fg_cli_usage(FILE *out);
/* Prints "flowgen: message" and returns the status's exit code. */
int fg_cli_fail(const flowgen_error *err);
/* Prints "flowgen: <fmt with arg> (see flowgen --help)"; returns 2.  The
 * help named is that of the command being parsed (fg_cli_usage_command). */
int fg_cli_usage_error(const char *fmt, const char *arg);
/* The command whose help usage errors point to: "flowgen" (the kernel
 * options, the default), "flowgen sample", "flowgen cache". */
void fg_cli_usage_command(const char *command);
/* "--flag value" / "--flag=value": 1 taken, 0 not this flag, -1 no value. */
int fg_cli_take(int argc, char **argv, int *i, const char *flag,
                const char **value);
/* The shape flags (--dim ... --name, --cond ... --input, and the bare
 * --guidance): 1 taken, 0 not one, -1 error (printed; err->status says the
 * exit code). */
int fg_cli_spec_option(int argc, char **argv, int *i, flowgen_spec *spec,
                       flowgen_error *err);

/* The options of generation that every command taking kernel options
 * shares (--template-dir, --tune, --sms, --shared-per-block): 1 taken, 0
 * not one, -1 error (printed; exit code 2). */
int fg_cli_generate_option(int argc, char **argv, int *i, flowgen_options *opts);

/* --batch N (0 to FG_CLI_BATCH_MAX): render the part that serves batch N
 * (FLOWGEN_PART_BATCH).  1 taken, 0 not it, -1 error (printed; exit 2). */
#define FG_CLI_BATCH_MAX (1LL << 40)
int fg_cli_batch_option(int argc, char **argv, int *i, flowgen_options *opts);

/* flowgen [kernel options] */
typedef enum { FG_CLI_EMIT_CU, FG_CLI_EMIT_PTX, FG_CLI_EMIT_CUBIN } fg_cli_emit;

typedef struct fg_cli_generate_args {
  flowgen_spec spec;
  flowgen_options opts;
  const char *output;    /* "-" = stdout */
  fg_cli_emit emit;
  bool describe;
  bool help, version;    /* -h / -V came first: print it and exit 0 */
} fg_cli_generate_args;

/* Parses the kernel options (argv[1] on) into a, which must start zeroed.
 * Returns -1 to go on, else the exit code: 0 for help or version, or that
 * of an error already printed to stderr.  Writes nothing to stdout. */
int fg_cli_parse_generate(int argc, char **argv, fg_cli_generate_args *a);

/* flowgen sample [options] */
typedef enum { FG_CLI_DEVICE_AUTO, FG_CLI_DEVICE_GPU, FG_CLI_DEVICE_CPU } fg_cli_device;

#define FG_CLI_CLASS_NONE (-1)
#define FG_CLI_CLASS_ALL (-2)

typedef struct fg_cli_sample_args {
  flowgen_spec spec;
  bool dim_given, hidden_given;
  bool act_given, time_given, input_given; /* --act silu etc. are checked too */
  const char *cond_path, *null_cond_path;  /* --cond, --null-cond */
  float guidance;
  bool guidance_given;
  int class_index;  /* --class N, or FG_CLI_CLASS_ALL / _NONE */
  flowgen_options opts; /* --template-dir, --tune, --sms, --shared-per-block */
  const char *weights, *prefix, *x0_path, *output, *png;
  int png_height, png_width, png_columns, png_scale; /* 0: not given */
  long long batch; /* -1: not given */
  unsigned long long seed;
  bool seed_given;
  fg_cli_device device;
  bool verbose;
  bool help; /* -h came: print the usage and exit 0 */
} fg_cli_sample_args;

/* Parses the sample options (argv[1] on) into a, which must start zeroed.
 * Returns -1 to go on, else the exit code: 0 for help, or that of an error
 * already printed to stderr.  Writes nothing to stdout. */
int fg_cli_parse_sample(int argc, char **argv, fg_cli_sample_args *a);

int fg_cli_sample(int argc, char **argv);
int fg_cli_cache(int argc, char **argv);

#endif
