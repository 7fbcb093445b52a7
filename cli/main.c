/* flowgen: the command line, a thin shell over libflowgen.
 * Parses arguments, calls the library, prints "flowgen: message" on failure
 * and returns the status's documented exit code. */
#include "cli.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: flowgen [options]                 write a specialized CUDA kernel\n"
    "       flowgen sample [options]          sample from a trained model\n"
    "       flowgen cache dir|list|clear|warm manage the compiled-module cache\n"
    "\n"
    "Kernel options:\n"
    "  --dim D            state dimension, 1 to 1024 (default 64)\n"
    "  --hidden H         hidden width, 1 to 4096 (default 4 * D)\n"
    "  --steps S          solver steps, 1 to 10000 (default 32)\n"
    "  --solver NAME      euler (default: one velocity per step at t = (k + 0.5)/S,\n"
    "                     the PyTorch contract), midpoint, heun or rk4 (stages\n"
    "                     at t = k/S + c dt of each scheme); dt = 1/S\n"
    "  --precision NAME   fp32 (default), tf32, bf16, fp16: the products' arithmetic\n"
    "                     (tf32/bf16/fp16 on the matrix units, fp32 accumulation)\n"
    "  --arch sm_XY       target GPU, sm_75 or newer (default sm_90); sm_90a adds\n"
    "                     the wgmma kernels (build with nvcc -arch=sm_90a)\n"
    "  --name NAME        kernel symbol prefix (default flow_d<D>_h<H>_s<S>_<precision>,\n"
    "                     then the model's fields that are not the defaults)\n"
    "\n"
    "The model: Sequential(Linear(D + T + C, H), act, Linear(H, H), act, ...,\n"
    "Linear(H, D)) applied to the concatenation of x, tau(t) and c:\n"
    "  --cond C           conditioning width, 0 to 4096 (default 0: unconditional);\n"
    "                     c is given at sample time, B x C\n"
    "  --layers L         Linear layers, 2 to 8 (default 3)\n"
    "  --act NAME         silu (default), gelu (exact, erf), gelu_tanh, relu, tanh\n"
    "  --time raw|sin:K[:SCALE]  tau(t): raw (default) is the column t; sin:K is\n"
    "                     K features (K even, 2 to 1024) sin(SCALE t f_i), then\n"
    "                     cos(SCALE t f_i), f_i = 10000^(-i/(K/2)), SCALE 1000\n"
    "  --input x,t,c      the order of the concatenation (default x,t,c)\n"
    "  --guidance         the kernel evaluates classifier-free guidance\n"
    "                     v_u + w (v_c - v_u), w given at launch (needs --cond)\n"
    "\n"
    "Generation:\n"
    "  --template-dir DIR read templates from DIR instead of the built-in ones\n"
    "  --tune K=V,...     planner overrides: choose or leave out a strategy, move\n"
    "                     a batch boundary (docs/tuning.md); also for sample and\n"
    "                     cache warm\n"
    "  --sms N            plan for a GPU of N SMs, 1 to 65536 (default: an H200's 132)\n"
    "  --shared-per-block BYTES  the shared memory a block may opt in to\n"
    "                     (default: what the arch allows, 227 KB on sm_90)\n"
    "\n"
    "Output:\n"
    "  -o, --output FILE  write to FILE ('-' = stdout, the default)\n"
    "  --emit cu|ptx|cubin  CUDA source (default), or PTX / cubin through NVRTC\n"
    "  --host-launcher    add extern \"C\" host functions that pack weights and\n"
    "                     launch the kernel, for building the .cu with nvcc\n"
    "  --describe         print JSON: strategy, launch configuration, shared\n"
    "                     memory, kernel symbols (instead of the source)\n"
    "  --batch N          only the variant that serves batch N, with the pack\n"
    "                     kernel (and the host launcher): a small file that\n"
    "                     compiles fast; also for --emit and --describe\n"
    "  -h, --help         this help\n"
    "  -V, --version      print the version\n"
    "\n"
    "Exit codes: 0 success; 1 I/O or internal error; 2 usage error (bad flag,\n"
    "value or shape); 3 template error; 4 NVRTC missing or compilation failed;\n"
    "5 CUDA driver or device error; 6 invalid weights or input file.\n";

void fg_cli_usage(FILE *out) { fputs(usage_text, out); }

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

/* Whether output ("-" or a path) is a terminal. */
static bool is_terminal(const char *output) {
  if (strcmp(output, "-") == 0) return isatty(STDOUT_FILENO);
  struct stat st;
  if (stat(output, &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  int fd = open(output, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  bool tty = fd >= 0 && isatty(fd);
  if (fd >= 0) close(fd);
  return tty;
}

static int emit_compiled(const fg_cli_generate_args *a, const flowgen_kernel *k) {
  flowgen_error err = {FLOWGEN_OK, ""};
  void *image = NULL;
  size_t size = 0;
  char name[FLOWGEN_NAME_MAX + 8];
  flowgen_spec_symbol(&a->spec, name, sizeof name - 4);
  strcat(name, ".cu");
  flowgen_status st = flowrt_compile(
      flowgen_kernel_source(k), flowgen_kernel_source_size(k), name,
      a->spec.arch, a->emit == FG_CLI_EMIT_PTX ? FLOWRT_TARGET_PTX : FLOWRT_TARGET_CUBIN,
      false, &image, &size, NULL, &err);
  if (st) return fg_cli_fail(&err);
  /* PTX comes NUL-terminated from NVRTC; the file does not need the NUL. */
  if (a->emit == FG_CLI_EMIT_PTX && size && ((char *)image)[size - 1] == '\0') --size;
  int code = write_output(a->output, image, size);
  free(image);
  return code;
}

static int cmd_generate(int argc, char **argv) {
  fg_cli_generate_args a = {0};
  int code = fg_cli_parse_generate(argc, argv, &a);
  if (a.help) fg_cli_usage(stdout);
  if (a.version) printf("flowgen %s\n", FLOWGEN_VERSION);
  if (code >= 0) return code;
  /* A cubin on a terminal garbles it and helps no one (gzip refuses too). */
  if (a.emit == FG_CLI_EMIT_CUBIN && !a.describe && is_terminal(a.output)) {
    fprintf(stderr, "flowgen: --emit cubin: binary output is not written to a terminal; "
                    "give -o FILE or redirect it\n");
    return 2;
  }
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_kernel *k = NULL;
  if (flowgen_generate(&a.spec, &a.opts, &k, &err)) return fg_cli_fail(&err);
  if (a.describe) {
    char *json = flowgen_kernel_describe(k);
    code = json ? write_output(a.output, json, strlen(json)) : 1;
    if (!json) fprintf(stderr, "flowgen: out of memory\n");
    free(json);
  } else if (a.emit == FG_CLI_EMIT_CU) {
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
