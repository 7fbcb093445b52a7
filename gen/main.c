/* flowgen: the command line, a thin shell over libflowgen.
 * Parses arguments, calls the library, prints "flowgen: message" on failure
 * and returns the status's documented exit code. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: flowgen [options]                 write a specialized CUDA kernel\n"
    "       flowgen sample [options]          sample from a trained model\n"
    "       flowgen cache dir|list|clear|warm manage the compiled-module cache\n"
    "\n"
    "Kernel options:\n"
    "  --dim D            state dimension, 1 to 1024 (default 64)\n"
    "  --hidden H         hidden width, 1 to 4096 (default 4 * D)\n"
    "  --steps S          solver steps, 1 to 10000 (default 32)\n"
    "  --solver NAME      euler (default; t_k = (k + 0.5) / S, dt = 1 / S)\n"
    "  --precision NAME   fp32 (default)\n"
    "  --arch sm_XY       target GPU, sm_75 or newer (default sm_90)\n"
    "  --name NAME        kernel symbol prefix (default flow_d<D>_h<H>_s<S>_<precision>)\n"
    "  --template-dir DIR read templates from DIR instead of the built-in ones\n"
    "  --tune K=V,...     planner overrides for experiments (see README);\n"
    "                     the runtime reads them from $FLOWGEN_TUNE\n"
    "\n"
    "Output:\n"
    "  -o, --output FILE  write to FILE ('-' = stdout, the default)\n"
    "  --emit cu|ptx|cubin  CUDA source (default), or PTX / cubin through NVRTC\n"
    "  --host-launcher    add extern \"C\" host functions that pack weights and\n"
    "                     launch the kernel, for building the .cu with nvcc\n"
    "  --describe         print JSON: strategy, launch configuration, shared\n"
    "                     memory, kernel symbols (instead of the source)\n"
    "  -h, --help         this help\n"
    "  -V, --version      print the version\n"
    "\n"
    "Exit codes: 0 success; 1 I/O or internal error; 2 usage error (bad flag,\n"
    "value or shape); 3 template error; 4 NVRTC missing or compilation failed;\n"
    "5 CUDA driver or device error; 6 invalid weights or input file.\n";

void fg_cli_usage(FILE *out) { fputs(usage_text, out); }

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

typedef enum { EMIT_CU, EMIT_PTX, EMIT_CUBIN } emit_kind;

typedef struct generate_args {
  flowgen_spec spec;
  flowgen_options opts;
  const char *output;
  emit_kind emit;
  bool describe;
} generate_args;

static int parse_emit(const char *value, emit_kind *emit) {
  if (strcmp(value, "cu") == 0) *emit = EMIT_CU;
  else if (strcmp(value, "ptx") == 0) *emit = EMIT_PTX;
  else if (strcmp(value, "cubin") == 0) *emit = EMIT_CUBIN;
  else return fg_cli_usage_error("--emit: unknown value '%s' (accepted: cu, ptx, cubin)", value);
  return 0;
}

/* Returns -1 to go on, else the exit code. */
static int parse_generate(int argc, char **argv, generate_args *a) {
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_spec_default(&a->spec);
  a->output = "-";
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i], *value = NULL;
    int taken;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      fg_cli_usage(stdout);
      return 0;
    }
    if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
      printf("flowgen %s\n", FLOWGEN_VERSION);
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

static int write_output(const char *path, const void *data, size_t size) {
  flowgen_error err = {FLOWGEN_OK, ""};
  if (strcmp(path, "-") == 0) {
    if (fwrite(data, 1, size, stdout) != size || fflush(stdout) != 0) {
      fprintf(stderr, "flowgen: cannot write to standard output\n");
      return 1;
    }
    return 0;
  }
  if (fg_write_file_atomic(path, data, size, &err)) return fg_cli_fail(&err);
  return 0;
}

static int emit_compiled(const generate_args *a, const flowgen_kernel *k) {
  flowgen_error err = {FLOWGEN_OK, ""};
  void *image = NULL;
  size_t size = 0;
  char name[FLOWGEN_NAME_MAX + 8];
  flowgen_spec_symbol(&a->spec, name, sizeof name - 4);
  strcat(name, ".cu");
  flowgen_status st = flowrt_compile(
      flowgen_kernel_source(k), flowgen_kernel_source_size(k), name,
      a->spec.arch, a->emit == EMIT_PTX ? FLOWRT_TARGET_PTX : FLOWRT_TARGET_CUBIN,
      false, &image, &size, NULL, &err);
  if (st) return fg_cli_fail(&err);
  /* PTX comes NUL-terminated from NVRTC; the file does not need the NUL. */
  if (a->emit == EMIT_PTX && size && ((char *)image)[size - 1] == '\0') --size;
  int code = write_output(a->output, image, size);
  free(image);
  return code;
}

static int cmd_generate(int argc, char **argv) {
  generate_args a = {0};
  int code = parse_generate(argc, argv, &a);
  if (code >= 0) return code;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_kernel *k = NULL;
  if (flowgen_generate(&a.spec, &a.opts, &k, &err)) return fg_cli_fail(&err);
  if (a.describe) {
    char *json = flowgen_kernel_describe(k);
    code = json ? write_output(a.output, json, strlen(json)) : 1;
    if (!json) fprintf(stderr, "flowgen: out of memory\n");
    free(json);
  } else if (a.emit == EMIT_CU) {
    code = write_output(a.output, flowgen_kernel_source(k),
                        flowgen_kernel_source_size(k));
  } else {
    code = emit_compiled(&a, k);
  }
  flowgen_kernel_free(k);
  return code;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sample") == 0)
    return fg_cli_sample(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "cache") == 0)
    return fg_cli_cache(argc - 1, argv + 1);
  return cmd_generate(argc, argv);
}
