/* flowgen's command line: the argument parsing shared by the subcommands,
 * and the parse of the kernel options.  Errors go to stderr; nothing here
 * writes to stdout or exits, so a program (the CLI fuzzer) can call it. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int fg_cli_fail(const flowgen_error *err) {
  fprintf(stderr, "flowgen: %s\n", err->message);
  return flowgen_exit_code(err->status);
}

int fg_cli_usage_error(const char *fmt, const char *arg) {
  fputs("flowgen: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs(" (see flowgen --help)\n", stderr);
  return 2;
}

/* Accepts "--flag value" and "--flag=value".  Returns 1 if argv[*i] is
 * `flag` (its value in *value, *i advanced), 0 if not, -1 if the value is
 * missing. */
int fg_cli_take(int argc, char **argv, int *i, const char *flag,
                const char **value) {
  const char *arg = argv[*i];
  size_t n = strlen(flag);
  if (strncmp(arg, flag, n) != 0) return 0;
  if (arg[n] == '=' && flag[1] == '-') {
    *value = arg + n + 1;
    return 1;
  }
  if (arg[n] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *value = argv[++*i];
  return 1;
}

int fg_cli_spec_option(int argc, char **argv, int *i, flowgen_spec *spec,
                       flowgen_error *err) {
  static const char *const fields[] = {"dim",       "hidden", "steps", "solver",
                                       "precision", "arch",   "name"};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f) {
    char flag[32];
    snprintf(flag, sizeof flag, "--%s", fields[f]);
    const char *value = NULL;
    int taken = fg_cli_take(argc, argv, i, flag, &value);
    if (taken < 0) {
      fg_cli_usage_error("%s needs a value", flag);
      return -1;
    }
    if (taken) {
      if (flowgen_spec_set(spec, fields[f], value, err) != FLOWGEN_OK) {
        fg_cli_fail(err);
        return -1;
      }
      return 1;
    }
  }
  return 0;
}

/* ---- flowgen [kernel options] ---------------------------------------------- */

static int parse_emit(const char *value, fg_cli_emit *emit) {
  if (strcmp(value, "cu") == 0) *emit = FG_CLI_EMIT_CU;
  else if (strcmp(value, "ptx") == 0) *emit = FG_CLI_EMIT_PTX;
  else if (strcmp(value, "cubin") == 0) *emit = FG_CLI_EMIT_CUBIN;
  else return fg_cli_usage_error("--emit: unknown value '%s' (accepted: cu, ptx, cubin)", value);
  return 0;
}

int fg_cli_parse_generate(int argc, char **argv, fg_cli_generate_args *a) {
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_spec_default(&a->spec);
  a->output = "-";
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i], *value = NULL;
    int taken;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      a->help = true;
      return 0;
    }
    if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
      a->version = true;
      return 0;
    }
    if ((taken = fg_cli_spec_option(argc, argv, &i, &a->spec, &err)) != 0) {
      if (taken < 0) return err.status ? flowgen_exit_code(err.status) : 2;
      continue;
    }
    if ((taken = fg_cli_take(argc, argv, &i, "-o", &value)) ||
        (taken = fg_cli_take(argc, argv, &i, "--output", &value))) {
      if (taken < 0) return fg_cli_usage_error("%s needs a file name", arg);
      if (!*value) return fg_cli_usage_error("%s: empty file name", arg);
      a->output = value;
    } else if ((taken = fg_cli_take(argc, argv, &i, "--emit", &value))) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_emit(value, &a->emit)) return 2;
    } else if ((taken = fg_cli_take(argc, argv, &i, "--template-dir", &value))) {
      if (taken < 0) return fg_cli_usage_error("%s needs a folder", arg);
      a->opts.template_dir = value;
    } else if ((taken = fg_cli_take(argc, argv, &i, "--tune", &value))) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      a->opts.tune = value;
    } else if (strcmp(arg, "--host-launcher") == 0) {
      a->opts.host_launcher = true;
    } else if (strcmp(arg, "--describe") == 0) {
      a->describe = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return fg_cli_usage_error("unknown option '%s'", arg);
    } else {
      return fg_cli_usage_error("unexpected argument '%s'", arg);
    }
  }
  return -1;
}
