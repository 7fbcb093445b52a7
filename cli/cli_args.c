/* flowgen's command line: the argument parsing shared by the subcommands,
 * and the parses of the kernel options and of `flowgen sample`'s.  Errors
 * go to stderr; nothing here writes to stdout or exits, so a program (the
 * CLI fuzzer) can call it. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fg_cli_fail(const flowgen_error *err) {
  fprintf(stderr, "flowgen: %s\n", err->message);
  return flowgen_exit_code(err->status);
}

/* Each subcommand has its own --help: an error points to the one that
 * lists the flag.  Set by each parse as it starts (the CLI parses one
 * command a run; the CLI fuzzer parses them in turn). */
static const char *usage_command = "flowgen";

void fg_cli_usage_command(const char *command) { usage_command = command; }

int fg_cli_usage_error(const char *fmt, const char *arg) {
  fputs("flowgen: ", stderr);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see %s --help)\n", usage_command);
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
  static const char *const fields[] = {"dim",  "hidden", "steps", "solver", "precision",
                                       "arch", "name",   "cond",  "layers", "act",
                                       "time", "input"};
  /* The kernel evaluates guidance (its weight is a launch argument). */
  if (strcmp(argv[*i], "--guidance") == 0) {
    spec->guidance = true;
    return 1;
  }
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

static int parse_long(const char *flag, const char *value, long long min,
                      long long max, long long *out) {
  switch (fg_parse_int(value, min, max, out)) {
  case FG_PARSE_OK: return 0;
  case FG_PARSE_NOT_A_NUMBER:
    fprintf(stderr, "flowgen: %s: '%s' is not a non-negative decimal integer\n", flag, value);
    return 2;
  default:
    fprintf(stderr, "flowgen: %s: %s is out of range (accepted: %lld to %lld)\n",
            flag, value, min, max);
    return 2;
  }
}

int fg_cli_generate_option(int argc, char **argv, int *i, flowgen_options *opts) {
  const char *arg = argv[*i], *value = NULL;
  int taken;
  if ((taken = fg_cli_take(argc, argv, i, "--template-dir", &value))) {
    if (taken < 0) {
      fg_cli_usage_error("%s needs a folder", arg);
      return -1;
    }
    opts->template_dir = value;
    return 1;
  }
  if ((taken = fg_cli_take(argc, argv, i, "--tune", &value))) {
    if (taken < 0) {
      fg_cli_usage_error("%s needs a value", arg);
      return -1;
    }
    opts->tune = value;
    return 1;
  }
  /* The device to plan for (default: an H200's figures). */
  const char *flag = NULL;
  int *field = NULL;
  long long max = 0;
  if ((taken = fg_cli_take(argc, argv, i, "--sms", &value))) {
    flag = "--sms";
    field = &opts->device.sms;
    max = FLOWGEN_DEVICE_SMS_MAX;
  } else if ((taken = fg_cli_take(argc, argv, i, "--shared-per-block", &value))) {
    flag = "--shared-per-block";
    field = &opts->device.shared_per_block;
    max = FLOWGEN_DEVICE_SHARED_MAX;
  } else {
    return 0;
  }
  long long n = 0;
  if (taken < 0) {
    fg_cli_usage_error("%s needs a value", flag);
    return -1;
  }
  if (parse_long(flag, value, 1, max, &n)) return -1;
  *field = (int)n;
  return 1;
}

int fg_cli_batch_option(int argc, char **argv, int *i, flowgen_options *opts) {
  const char *value = NULL;
  int taken = fg_cli_take(argc, argv, i, "--batch", &value);
  if (taken <= 0) {
    if (taken < 0) fg_cli_usage_error("%s needs a batch size", "--batch");
    return taken;
  }
  long long n = 0;
  if (parse_long("--batch", value, 0, FG_CLI_BATCH_MAX, &n)) return -1;
  opts->part = FLOWGEN_PART_BATCH;
  opts->batch = n;
  return 1;
}

/* ---- flowgen [kernel options] ---------------------------------------------- */

static int parse_emit(const char *value, fg_cli_emit *emit) {
  if (strcmp(value, "cu") == 0) *emit = FG_CLI_EMIT_CU;
  else if (strcmp(value, "ptx") == 0) *emit = FG_CLI_EMIT_PTX;
  else if (strcmp(value, "cubin") == 0) *emit = FG_CLI_EMIT_CUBIN;
  else return fg_cli_usage_error("--emit: unknown value '%s' (accepted: cu, ptx, cubin)", value);
  return 0;
}

/* --describe prints JSON and the host launcher is C++ for nvcc: neither
 * goes with PTX or a cubin, whose request would be silently dropped. */
static int check_generate_combinations(const fg_cli_generate_args *a) {
  if (a->emit == FG_CLI_EMIT_CU) return -1;
  const char *emit = a->emit == FG_CLI_EMIT_PTX ? "ptx" : "cubin";
  if (a->describe)
    return fg_cli_usage_error("--describe prints the kernel's JSON description, not "
                              "--emit %s output: give one or the other", emit);
  if (a->opts.host_launcher)
    return fg_cli_usage_error("--host-launcher adds C++ host code for nvcc builds of the "
                              ".cu; it does not go with --emit %s", emit);
  return -1;
}

int fg_cli_parse_generate(int argc, char **argv, fg_cli_generate_args *a) {
  flowgen_error err = {FLOWGEN_OK, ""};
  fg_cli_usage_command("flowgen");
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
    if ((taken = fg_cli_generate_option(argc, argv, &i, &a->opts)) != 0 ||
        (taken = fg_cli_batch_option(argc, argv, &i, &a->opts)) != 0) {
      if (taken < 0) return 2;
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
  /* Fields that only go together (guidance needs a conditioning), set in
   * any order: checked once all are read. */
  if (flowgen_spec_validate(&a->spec, &err) != FLOWGEN_OK) return fg_cli_fail(&err);
  return check_generate_combinations(a);
}

/* ---- flowgen sample ------------------------------------------------------ */

/* --png-shape HxW: the height and width of one sample's image, each 1 to
 * 4096.  A value not of that form says what is missing or extra. */
static int parse_png_shape(const char *value, int *height, int *width) {
  const char *x = strchr(value, 'x');
  const char *problem = !x                    ? "no 'x' between the height and the width"
                        : x == value          ? "no height before the 'x'"
                        : x[1] == '\0'        ? "no width after the 'x'"
                        : strchr(x + 1, 'x') ? "more than one 'x'"
                                              : NULL;
  if (problem) {
    char message[256];
    snprintf(message, sizeof message,
             "--png-shape: '%.64s' is not of the form HxW, e.g. 8x8 (%s)", value, problem);
    return fg_cli_usage_error("%s", message);
  }
  const char *parts[2] = {value, x + 1};
  const size_t lengths[2] = {(size_t)(x - value), strlen(x + 1)};
  static const char *const names[2] = {"height", "width"};
  long long n[2];
  for (int k = 0; k < 2; ++k) {
    char digits[32];
    /* a longer part is no number in range either */
    snprintf(digits, sizeof digits, "%.*s", (int)(lengths[k] < 31 ? lengths[k] : 31), parts[k]);
    fg_parse_result r = lengths[k] > 31 && strspn(parts[k], "0123456789") >= lengths[k]
                            ? FG_PARSE_OUT_OF_RANGE
                            : fg_parse_int(lengths[k] > 31 ? "-" : digits, 1, 4096, &n[k]);
    if (r != FG_PARSE_OK) {
      char message[256];
      snprintf(message, sizeof message, "--png-shape: the %s in '%.64s' is %s", names[k],
               value, r == FG_PARSE_NOT_A_NUMBER ? "not a whole number"
                                                 : "out of range (accepted: 1 to 4096)");
      return fg_cli_usage_error("%s", message);
    }
  }
  *height = (int)n[0];
  *width = (int)n[1];
  return 0;
}

/* --guidance w: a finite decimal (sign, fraction, exponent allowed). */
static int parse_guidance(const char *value, float *out) {
  char *end = NULL;
  double w = value[0] && !strchr(" \t\n", value[0]) ? strtod(value, &end) : 0.0;
  bool hex = strchr(value, 'x') || strchr(value, 'X');
  if (!end || *end || hex || !isfinite(w) || !isfinite((float)w))
    return fg_cli_usage_error("--guidance: '%s' is not a finite number (e.g. 3.5)", value);
  *out = (float)w;
  return 0;
}

/* --class N (0 to 4095; the model's C is checked once it is loaded) or all. */
static int parse_class(const char *value, int *out) {
  long long n = 0;
  if (strcmp(value, "all") == 0) {
    *out = FG_CLI_CLASS_ALL;
    return 0;
  }
  if (fg_parse_int(value, 0, FLOWGEN_COND_MAX - 1, &n) != FG_PARSE_OK)
    return fg_cli_usage_error("--class: '%s' is neither a class number nor 'all'", value);
  *out = (int)n;
  return 0;
}

/* The conditioning's flags that go together, checked once all are read. */
static int check_conditioning(const fg_cli_sample_args *a) {
  bool any_x0 = a->x0_path && a->x0_path[0];
  if (a->cond_path && a->class_index != FG_CLI_CLASS_NONE)
    return fg_cli_usage_error("sample: %s: give --cond or --class, not both", "--class");
  if (a->guidance_given && !a->cond_path && a->class_index == FG_CLI_CLASS_NONE)
    return fg_cli_usage_error("sample: %s needs a conditioning: give --cond or --class",
                              "--guidance");
  if (a->null_cond_path && !a->guidance_given)
    return fg_cli_usage_error("sample: %s is the conditioning of guidance's unconditional "
                              "field: give --guidance too", "--null-cond");
  if (a->class_index == FG_CLI_CLASS_ALL && any_x0)
    return fg_cli_usage_error("sample: %s: --class all draws its own starting points",
                              "--x0");
  return -1;
}

int fg_cli_parse_sample(int argc, char **argv, fg_cli_sample_args *a) {
  flowgen_error err = {FLOWGEN_OK, ""};
  fg_cli_usage_command("flowgen sample");
  flowgen_spec_default(&a->spec);
  a->batch = -1;
  a->class_index = FG_CLI_CLASS_NONE;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i], *value = NULL;
    int taken;
    long long n;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      a->help = true;
      return 0;
    }
    if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
      a->verbose = true;
      continue;
    }
#define VALUE(flag) ((taken = fg_cli_take(argc, argv, &i, flag, &value)) != 0)
    /* Sampling's own --cond (a file) and --guidance (a weight) come before
     * the kernel's flags of the same names. */
    if (VALUE("--cond")) {
      if (taken < 0 || !*value) return fg_cli_usage_error("%s needs a file", "--cond");
      a->cond_path = value;
      continue;
    }
    if (VALUE("--null-cond")) {
      if (taken < 0 || !*value) return fg_cli_usage_error("%s needs a file", "--null-cond");
      a->null_cond_path = value;
      continue;
    }
    if (VALUE("--guidance")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a weight", "--guidance");
      if (parse_guidance(value, &a->guidance)) return 2;
      a->guidance_given = true;
      continue;
    }
    if (VALUE("--class")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", "--class");
      if (parse_class(value, &a->class_index)) return 2;
      continue;
    }
    if (strncmp(arg, "--dim", 5) == 0) a->dim_given = true;
    if (strncmp(arg, "--hidden", 8) == 0) a->hidden_given = true;
    if (strncmp(arg, "--act", 5) == 0) a->act_given = true;
    if (strncmp(arg, "--time", 6) == 0) a->time_given = true;
    if (strncmp(arg, "--input", 7) == 0) a->input_given = true;
    if ((taken = fg_cli_spec_option(argc, argv, &i, &a->spec, &err)) != 0) {
      if (taken < 0) return err.status ? flowgen_exit_code(err.status) : 2;
      continue;
    }
    if ((taken = fg_cli_generate_option(argc, argv, &i, &a->opts)) != 0) {
      if (taken < 0) return 2;
      continue;
    }
    if (VALUE("--weights")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a file", arg);
      a->weights = value;
    } else if (VALUE("--prefix")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      a->prefix = value;
    } else if (VALUE("--x0")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a file", arg);
      a->x0_path = value;
    } else if (VALUE("-o") || VALUE("--output")) {
      if (taken < 0 || !*value) return fg_cli_usage_error("%s needs a file name", arg);
      a->output = value;
    } else if (VALUE("--png")) {
      if (taken < 0 || !*value) return fg_cli_usage_error("%s needs a file name", arg);
      a->png = value;
    } else if (VALUE("--png-shape")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_png_shape(value, &a->png_height, &a->png_width)) return 2;
    } else if (VALUE("--png-columns")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_long("--png-columns", value, 1, 1000, &n)) return 2;
      a->png_columns = (int)n;
    } else if (VALUE("--png-scale")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_long("--png-scale", value, 1, 64, &n)) return 2;
      a->png_scale = (int)n;
    } else if (VALUE("--batch")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_long("--batch", value, 0, 1LL << 40, &n)) return 2;
      a->batch = n;
    } else if (VALUE("--seed")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (parse_long("--seed", value, 0, 0x7fffffffffffffffLL, &n)) return 2;
      a->seed = (unsigned long long)n;
      a->seed_given = true;
    } else if (VALUE("--device")) {
      if (taken < 0) return fg_cli_usage_error("%s needs a value", arg);
      if (strcmp(value, "gpu") == 0) a->device = FG_CLI_DEVICE_GPU;
      else if (strcmp(value, "cpu") == 0) a->device = FG_CLI_DEVICE_CPU;
      else if (strcmp(value, "auto") == 0) a->device = FG_CLI_DEVICE_AUTO;
      else return fg_cli_usage_error("--device: unknown value '%s' (accepted: gpu, cpu, auto)", value);
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return fg_cli_usage_error("sample: unknown option '%s'", arg);
    } else {
      return fg_cli_usage_error("sample: unexpected argument '%s'", arg);
    }
#undef VALUE
  }
  if (!a->output && !a->png)
    return fg_cli_usage_error("sample: %s is required", "-o or --png");
  if (a->x0_path && a->batch >= 0 && a->x0_path[0])
    return fg_cli_usage_error("sample: %s: give --batch or --x0, not both", "--batch");
  /* The seed draws the starting points that --x0 replaces. */
  if (a->x0_path && a->seed_given && a->x0_path[0])
    return fg_cli_usage_error("sample: %s: give --seed or --x0, not both", "--seed");
  return check_conditioning(a);
}
