/* The examples build and behave as documented: examples/jit_sample (the
 * runtime through libflowgen) and examples/embed (the generated .cu in an
 * nvcc build); so does bench/launcher_bench.cu, another nvcc build of a
 * generated file.  The examples are built once, into the build folder of
 * the flowgen under test (examples/, examples/embed/ there; launcher-bench
 * in a temporary folder); the GPU runs skip themselves where there is no
 * GPU. */
#include "support.h"

#include "flowgen.h"

#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BYTES 4096
#define COMMAND_BYTES 16384
#define RELERR_MAX 1e-6

/* The sanitizers of an `make asan` build must reach the example's link too. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZE_FLAGS "-fsanitize=address,undefined"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZE_FLAGS "-fsanitize=address,undefined"
#endif
#endif

typedef struct fixture {
  char *tmp;                    /* weights files, module cache */
  char build[PATH_BYTES];       /* the build folder of the flowgen under test */
  char flowgen[PATH_BYTES];     /* absolute path of the flowgen binary */
  char jit_sample[PATH_BYTES];  /* built binaries */
  char embed[PATH_BYTES];
  bool jit_built, embed_built;
} fixture;

static fixture fx;

/* ---- helpers ---------------------------------------------------------------- */

/* snprintf that fails the test on truncation. */
__attribute__((format(printf, 3, 4)))
static void format(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size) fail_msg("path or command too long: %s", buf);
}

static int group_setup(void **state) {
  (void)state;
  char resolved[PATH_MAX];
  if (!realpath(fg_test_flowgen_bin(), resolved)) {
    fprintf(stderr, "test_examples: no flowgen binary at %s\n", fg_test_flowgen_bin());
    return -1;
  }
  format(fx.flowgen, sizeof fx.flowgen, "%s", resolved);
  format(fx.build, sizeof fx.build, "%s", dirname(resolved));
  format(fx.jit_sample, sizeof fx.jit_sample, "%s/examples/jit_sample", fx.build);
  format(fx.embed, sizeof fx.embed, "%s/examples/embed/embed", fx.build);
  fx.tmp = fg_test_mkdtemp();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  fg_test_rmtree(fx.tmp);
  free(fx.tmp);
  return 0;
}

static bool is_executable(const char *path) { return access(path, X_OK) == 0; }

static bool have_nvcc(void) {
  return fg_test_run("command -v \"${NVCC:-nvcc}\"", NULL, NULL) == 0;
}

static void assert_contains(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not found in:\n%s", needle, text);
}

static void assert_lacks(const char *text, const char *needle) {
  if (strstr(text, needle)) fail_msg("'%s' found in:\n%s", needle, text);
}

/* Exactly one line, "PROGRAM: ...\n". */
static void assert_one_line(const char *text, const char *program) {
  size_t n = strlen(program);
  const char *newline = strchr(text, '\n');
  if (strncmp(text, program, n) != 0 || text[n] != ':' || text[n + 1] != ' ' ||
      !newline || newline[1] != '\0')
    fail_msg("expected one line '%s: ...', got:\n%s", program, text);
}

/* A usage error of `program args`: exit 2, one line "PROGRAM: ..." naming
 * needle on standard error, nothing on standard output.  Frees out, err. */
static void assert_usage_error(const char *program, const char *args, int rc, char *out,
                               char *err, const char *needle) {
  if (rc != 2) fail_msg("%s %s: exit %d, expected 2\n%s", program, args, rc, err);
  assert_one_line(err, program);
  assert_contains(err, needle);
  assert_string_equal(out, "");
  free(out);
  free(err);
}

/* Runs make in a folder of the examples; fails with its output. */
static void run_make(const char *subdir, const char *variables) {
  char cmd[COMMAND_BYTES];
  /* A fresh make: not a child of the `make -j test` that runs us (whose
   * jobserver it cannot reach, and says so in a warning). */
  format(cmd, sizeof cmd, "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C '%s/%s' %s",
         fg_test_source_dir(), subdir,
           variables);
  char *out = NULL, *err = NULL;
  int rc = fg_test_run(cmd, &out, &err);
  if (rc != 0) fail_msg("%s: exit %d\n%s%s", cmd, rc, out, err);
  /* -Wall -Wextra clean: no compiler warnings when anything was rebuilt. */
  if (strstr(out, "warning:") || strstr(err, "warning:"))
    fail_msg("%s printed warnings:\n%s%s", cmd, out, err);
  free(out);
  free(err);
}

/* Builds that link Lua and jansson need their development packages (the
 * GPU machine runs carried builds and has none of them): skip without. */
static void require_development_packages(void) {
  char *out = NULL, *err = NULL;
  int rc = fg_test_run("pkg-config --exists lua5.4 jansson", &out, &err);
  free(out);
  free(err);
  if (rc != 0) {
    fprintf(stderr, "# skipped: no pkg-config with lua5.4 and jansson here\n");
    skip();
  }
}

static const char *const tensor_names[6] = {
    "velocity.0.weight", "velocity.0.bias", "velocity.2.weight",
    "velocity.2.bias",   "velocity.4.weight", "velocity.4.bias"};

/* A safetensors file of the velocity MLP, F32, values U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) as PyTorch initialises them. */
static void write_weights(const char *path, int dim, int hidden, uint64_t seed) {
  const size_t d = (size_t)dim, h = (size_t)hidden;
  const size_t rows[6] = {h, h, h, h, d, d}, cols[6] = {d + 1, 0, h, 0, h, 0};
  const float scale[6] = {1 / sqrtf((float)(d + 1)), 1 / sqrtf((float)(d + 1)),
                          1 / sqrtf((float)h), 1 / sqrtf((float)h),
                          1 / sqrtf((float)h), 1 / sqrtf((float)h)};
  char header[2048];
  size_t len = 0, offset = 0, total = 0;
  len += (size_t)snprintf(header + len, sizeof header - len, "{");
  for (int i = 0; i < 6; ++i) {
    size_t count = rows[i] * (cols[i] ? cols[i] : 1);
    char shape[64];
    if (cols[i]) snprintf(shape, sizeof shape, "[%zu,%zu]", rows[i], cols[i]);
    else snprintf(shape, sizeof shape, "[%zu]", rows[i]);
    len += (size_t)snprintf(header + len, sizeof header - len,
                            "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,"
                            "\"data_offsets\":[%zu,%zu]}",
                            i ? "," : "", tensor_names[i], shape, offset,
                            offset + 4 * count);
    offset += 4 * count;
    total += count;
  }
  len += (size_t)snprintf(header + len, sizeof header - len, "}");
  while (len % 8) header[len++] = ' '; /* the data starts 8-byte aligned */
  assert_true(len < sizeof header);

  size_t size = 8 + len + 4 * total;
  unsigned char *image = malloc(size);
  assert_non_null(image);
  for (int i = 0; i < 8; ++i) image[i] = (unsigned char)((uint64_t)len >> (8 * i));
  memcpy(image + 8, header, len);
  float *data = malloc(4 * total);
  assert_non_null(data);
  float *p = data;
  for (int i = 0; i < 6; ++i) {
    size_t count = rows[i] * (cols[i] ? cols[i] : 1);
    fg_test_fill_uniform(p, count, seed + (uint64_t)i, scale[i]);
    p += count;
  }
  memcpy(image + 8 + len, data, 4 * total); /* x86: little-endian already */
  fg_test_write_file(path, image, size);
  free(data);
  free(image);
}

/* Runs jit_sample with ARGS, a private module cache; returns the exit code. */
static int run_jit_sample(const char *args, char **out, char **err) {
  char cmd[COMMAND_BYTES];
  format(cmd, sizeof cmd, "FLOWGEN_CACHE_DIR='%s/cache' '%s' %s", fx.tmp,
           fx.jit_sample, args);
  return fg_test_run(cmd, out, err);
}

static void require_jit_sample(void) {
  if (!fx.jit_built) fail_msg("jit_sample was not built (see test_jit_sample_builds)");
}

/* The number after `label` in text. */
static double number_after(const char *text, const char *label) {
  const char *at = strstr(text, label);
  if (!at) fail_msg("'%s' not found in:\n%s", label, text);
  char *end = NULL;
  double v = strtod(at + strlen(label), &end);
  if (end == at + strlen(label)) fail_msg("no number after '%s' in:\n%s", label, text);
  return v;
}

/* ---- building ------------------------------------------------------------- */

static void test_jit_sample_builds(void **state) {
  (void)state;
  char vars[COMMAND_BYTES];
  format(vars, sizeof vars, "O='%s/examples' FLOWGEN_BUILD='%s'%s", fx.build,
           fx.build,
#ifdef SANITIZE_FLAGS
           " CFLAGS='-O1 -g " SANITIZE_FLAGS "' LDFLAGS='" SANITIZE_FLAGS "'"
#else
           ""
#endif
  );
  run_make("examples", vars);
  assert_true(is_executable(fx.jit_sample));
  fx.jit_built = true;
}

static void test_embed_builds(void **state) {
  (void)state;
  if (!have_nvcc()) skip();
  char vars[COMMAND_BYTES];
  format(vars, sizeof vars, "O='%s/examples/embed' FLOWGEN='%s'", fx.build,
           fx.flowgen);
  run_make("examples/embed", vars);
  assert_true(is_executable(fx.embed));

  /* The generated file carries the extern "C" launcher main.c calls. */
  char path[PATH_BYTES];
  format(path, sizeof path, "%s/examples/embed/flow.cu", fx.build);
  char *source = fg_test_read_file(path, NULL);
  assert_non_null(source);
  assert_contains(source, "--name embed_flow --host-launcher");
  assert_contains(source, "extern \"C\" size_t embed_flow_params_bytes(void)");
  assert_contains(source, "extern \"C\" cudaError_t embed_flow_pack_params(");
  assert_contains(source, "extern \"C\" cudaError_t embed_flow_launch(");
  free(source);
  fx.embed_built = true;
}

/* The host launcher of every kind of variant builds with nvcc, without a
 * warning: clusters with more than 48 KB of dynamic shared memory (the
 * split tiled kernel), the matrix units (bf16, with 16-bit weight copies),
 * several tiles in flight with a multi-stage solver, and the wgmma and
 * streamed warpgroup variants (tf32: wgstream, fp32: wgstream3) of sm_90a
 * files with nvcc -arch=sm_90a, and a guided conditional member's (the
 * conditioning kernel, wgstream3 holding the bias). */
static void test_host_launcher_variants_build(void **state) {
  (void)state;
  if (!have_nvcc() || fg_test_under_valgrind()) skip();
  static const struct {
    const char *args, *arch;
  } cases[] = {
      {"--dim 128 --hidden 512 --steps 2", "sm_90"},
      {"--dim 64 --steps 2 --precision bf16", "sm_90"},
      {"--dim 33 --hidden 130 --steps 2 --solver rk4 --tune tiled.stages=3", "sm_90"},
      {"--dim 17 --hidden 200 --steps 2 --precision fp16 --arch sm_90a", "sm_90a"},
      {"--steps 2 --precision tf32 --arch sm_90a", "sm_90a"},
      {"--steps 2 --arch sm_90a", "sm_90a"},
      {"--steps 2 --cond 8 --guidance --arch sm_90a", "sm_90a"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    char cu[PATH_BYTES], obj[PATH_BYTES], command[COMMAND_BYTES];
    format(cu, sizeof cu, "%s/launcher%zu.cu", fx.tmp, i);
    format(obj, sizeof obj, "%s/launcher%zu.o", fx.tmp, i);
    format(command, sizeof command, "'%s' %s --host-launcher -o '%s' && \"${NVCC:-nvcc}\" "
           "-arch=%s -c '%s' -o '%s'", fx.flowgen, cases[i].args, cu, cases[i].arch, cu, obj);
    char *err = NULL;
    if (fg_test_run(command, NULL, &err) != 0) fail_msg("%s:\n%s", cases[i].args, err ? err : "");
    if (err && strstr(err, "warning")) fail_msg("%s: nvcc warned:\n%s", cases[i].args, err);
    free(err);
    assert_true(fg_test_file_exists(obj));
    /* the matrix-unit kernels of sm_90a are in its files only */
    char *src = fg_test_read_file(cu, NULL);
    assert_non_null(src);
    assert_int_equal(strstr(src, "_wgmma(") != NULL || strstr(src, "_wgstream") != NULL,
                     strcmp(cases[i].arch, "sm_90a") == 0);
    free(src);
  }
}

/* bench/launcher_bench.cu (`make launcher-bench`, the harness that times a
 * hand-edited kernel file) builds without a warning from a --host-launcher
 * file, and refuses a bad argument before touching the GPU (exit 2).  Not
 * under a sanitizer build (its library is instrumented, nvcc's link is
 * not) or valgrind. */
static void test_launcher_bench_builds(void **state) {
  (void)state;
#ifdef SANITIZE_FLAGS
  skip();
#endif
  require_development_packages();
  if (!have_nvcc() || fg_test_under_valgrind()) skip();
  char cu[PATH_BYTES], out_path[PATH_BYTES], vars[COMMAND_BYTES], command[COMMAND_BYTES];
  format(cu, sizeof cu, "%s/lb_kernel.cu", fx.tmp);
  format(out_path, sizeof out_path, "%s/lb/launcher-bench", fx.tmp);
  format(command, sizeof command, "'%s' --dim 8 --hidden 16 --steps 2 --host-launcher -o '%s'",
         fx.flowgen, cu);
  if (fg_test_run(command, NULL, NULL) != 0) fail_msg("%s failed", command);
  format(vars, sizeof vars, "launcher-bench BUILD='%s' LAUNCHER='%s' LAUNCHER_OUT='%s'", fx.build,
         cu, out_path);
  run_make(".", vars);
  assert_true(is_executable(out_path));

  static const struct {
    const char *args, *needle;
  } cases[] = {
      {"--frobnicate", "unknown option '--frobnicate'"},
      {"0", "batch '0' is not an integer from 1 to 1048576"},
      {"8 x", "batch 'x'"},
      {"--nvrtc --graph 0", "batch '0' is not an integer from 1 to 1048576"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *out = NULL, *err = NULL;
    format(command, sizeof command, "'%s' %s", out_path, cases[i].args);
    int rc = fg_test_run(command, &out, &err);
    assert_usage_error("launcher-bench", cases[i].args, rc, out, err, cases[i].needle);
  }

  /* No file named: make says so, exit 2. */
  char *out = NULL, *err = NULL;
  format(command, sizeof command,
         "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C '%s' launcher-bench BUILD='%s'",
         fg_test_source_dir(), fx.build);
  assert_int_equal(fg_test_run(command, &out, &err), 2);
  assert_contains(err, "make launcher-bench: name the file: LAUNCHER=k.cu");
  free(out);
  free(err);
}

/* ---- an installed flowgen -------------------------------------------------- */

static const char installed_program[] =
    "#include <flowgen.h>\n"
    "#include <stdio.h>\n"
    "int main(void) {\n"
    "  flowgen_spec spec;\n"
    "  flowgen_spec_default(&spec);\n"
    "  flowgen_kernel *k = NULL;\n"
    "  flowgen_error err;\n"
    "  if (flowgen_generate(&spec, NULL, &k, &err)) {\n"
    "    fprintf(stderr, \"prog: %s\\n\", err.message);\n"
    "    return 1;\n"
    "  }\n"
    "  printf(\"source: %zu bytes\\n\", flowgen_kernel_source_size(k));\n"
    "  flowgen_kernel_free(k);\n"
    "  return 0;\n"
    "}\n";

/* Runs command; fails with its output unless it exits 0.  Returns stdout. */
static char *run_ok(const char *command) {
  char *out = NULL, *err = NULL;
  int rc = fg_test_run(command, &out, &err);
  if (rc != 0) fail_msg("%s: exit %d\n%s%s", command, rc, out, err);
  free(err);
  return out;
}

/* `make install` into a temporary prefix; then a program builds with
 * exactly `cc prog.c $(pkg-config --cflags --libs flowgen)` (the shared
 * library, nothing else named) and runs; with `--static` it links the
 * static library.  The shared library exports the API and nothing else. */
static void test_installed_pkg_config_links(void **state) {
  (void)state;
  require_development_packages();
  char prefix[PATH_BYTES], vars[COMMAND_BYTES], prog[PATH_BYTES], command[COMMAND_BYTES];
  format(prefix, sizeof prefix, "%s/prefix", fx.tmp);
  format(vars, sizeof vars, "install PREFIX='%s' BUILD='%s'%s", prefix, fx.build,
#ifdef SANITIZE_FLAGS
         " SANITIZE='" SANITIZE_FLAGS "'"
#else
         ""
#endif
  );
  run_make(".", vars);
  format(prog, sizeof prog, "%s/prog.c", fx.tmp);
  fg_test_write_file(prog, installed_program, sizeof installed_program - 1);

  /* The kernel the installed library renders is the CLI's, byte for byte. */
  format(command, sizeof command, "'%s' | wc -c", fx.flowgen);
  char *count = run_ok(command);
  char want[64];
  format(want, sizeof want, "source: %ld bytes\n", strtol(count, NULL, 10));
  free(count);

  format(command, sizeof command,
         "cd '%s' && export PKG_CONFIG_PATH='%s/lib/pkgconfig' && "
         "cc prog.c $(pkg-config --cflags --libs flowgen)%s -o prog && "
         "LD_LIBRARY_PATH='%s/lib' ./prog",
         fx.tmp, prefix,
#ifdef SANITIZE_FLAGS
         " " SANITIZE_FLAGS,
#else
         "",
#endif
         prefix);
  char *out = run_ok(command);
  assert_string_equal(out, want);
  free(out);
  format(command, sizeof command, "readelf -d '%s/prog'", fx.tmp);
  out = run_ok(command);
  assert_contains(out, "Shared library: [libflowgen.so.0]");
  free(out);

  /* The versioned file, its soname, and only flowgen_* and flowrt_*
   * defined for others (Lua's, jansson's and the internals hidden). */
  format(command, sizeof command, "readelf -d '%s/lib/libflowgen.so.%s'", prefix, FLOWGEN_VERSION);
  out = run_ok(command);
  assert_contains(out, "Library soname: [libflowgen.so.0]");
  assert_contains(out, "Shared library: [libjansson.so.4]");
  /* The pictures and .npy files are the CLI's: the library has neither
   * their code nor libpng, in either form. */
  assert_lacks(out, "libpng");
  assert_lacks(out, "libz");
  free(out);
  format(command, sizeof command,
         "nm --defined-only '%s/lib/libflowgen.a' | grep -E ' (fg_cli_|fg_npy_|fg_png_|fg_write_file)' ; "
         "nm --undefined-only '%s/lib/libflowgen.a' | grep -E ' (png_|deflate)' ; "
         "PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --libs --static flowgen",
         prefix, prefix, prefix);
  out = run_ok(command);
  assert_lacks(out, "fg_");
  assert_lacks(out, "png");
  assert_lacks(out, "-lz");
  assert_contains(out, "-lflowgen");
  assert_contains(out, "-ljansson");
  free(out);
  format(command, sizeof command,
         "nm -D --defined-only '%s/lib/libflowgen.so' | awk '{print $3}'", prefix);
  out = run_ok(command);
  int exported = 0;
  for (char *line = out, *next; *line; line = next) {
    next = strchr(line, '\n');
    if (!next) fail_msg("unterminated nm output: %s", line);
    *next++ = '\0';
    if (strcmp(line, "FLOWGEN_0") == 0) continue; /* the version node */
    if (strncmp(line, "flowgen_", 8) != 0 && strncmp(line, "flowrt_", 7) != 0)
      fail_msg("libflowgen.so exports %s", line);
    ++exported;
  }
  assert_true(exported >= 30);
  free(out);

#ifndef SANITIZE_FLAGS
  /* The static library, with what Libs.private names. */
  format(command, sizeof command,
         "cd '%s' && export PKG_CONFIG_PATH='%s/lib/pkgconfig' && "
         "cc -static prog.c $(pkg-config --cflags --libs --static flowgen) -o prog-static && "
         "./prog-static",
         fx.tmp, prefix);
  out = run_ok(command);
  assert_string_equal(out, want);
  free(out);
#endif
}

/* ---- jit_sample without a GPU -------------------------------------------- */

static void test_jit_sample_usage_errors(void **state) {
  (void)state;
  require_jit_sample();
  char weights[PATH_BYTES], args[COMMAND_BYTES];
  format(weights, sizeof weights, "%s/usage.safetensors", fx.tmp);
  write_weights(weights, 2, 3, 1);
  static const struct {
    const char *args, *needle;
  } cases[] = {
      {"", "no weights file given"},
      {"--steps 0", "--steps: 0 is out of range"},
      {"--steps x", "--steps: 'x' is not"},
      {"--batch 0", "--batch"},
      {"--batch -3", "--batch"},
      {"--seed 1x", "--seed"},
      {"--steps", "missing value after '--steps'"},
      {"--frobnicate", "unknown option '--frobnicate'"},
      {"extra.safetensors", "unexpected argument 'extra.safetensors'"},
      {"--cond 1,2", "--cond and --guidance need a conditional model"},
      {"--guidance 2", "--cond and --guidance need a conditional model"},
      {"--cond", "missing value after '--cond'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *out = NULL, *err = NULL;
    /* The weights go first: usage errors must win over everything else. */
    format(args, sizeof args, "%s%s%s", *cases[i].args ? "'" : "",
             *cases[i].args ? weights : "", *cases[i].args ? "' " : "");
    strncat(args, cases[i].args, sizeof args - strlen(args) - 1);
    int rc = run_jit_sample(args, &out, &err);
    assert_usage_error("jit_sample", args, rc, out, err, cases[i].needle);
  }
}

static void test_jit_sample_bad_weights(void **state) {
  (void)state;
  require_jit_sample();
  char path[PATH_BYTES], args[COMMAND_BYTES];
  char *out = NULL, *err = NULL;

  format(path, sizeof path, "%s/missing.safetensors", fx.tmp);
  format(args, sizeof args, "'%s'", path);
  assert_int_equal(run_jit_sample(args, &out, &err), flowgen_exit_code(FLOWGEN_IO));
  assert_one_line(err, "jit_sample");
  assert_contains(err, "missing.safetensors");
  free(out);
  free(err);

  format(path, sizeof path, "%s/garbage.safetensors", fx.tmp);
  fg_test_write_file(path, "not a safetensors file", 22);
  format(args, sizeof args, "'%s'", path);
  assert_int_equal(run_jit_sample(args, &out, &err),
                   flowgen_exit_code(FLOWGEN_WEIGHTS));
  assert_one_line(err, "jit_sample");
  assert_contains(err, "garbage.safetensors");
  free(out);
  free(err);
}

static void test_jit_sample_without_gpu(void **state) {
  (void)state;
  require_jit_sample();
  if (fg_test_have_gpu()) skip();
  char weights[PATH_BYTES], args[COMMAND_BYTES];
  format(weights, sizeof weights, "%s/nogpu.safetensors", fx.tmp);
  write_weights(weights, 2, 3, 2);
  format(args, sizeof args, "'%s' --steps 4 --batch 3", weights);
  char *out = NULL, *err = NULL;
  int rc = run_jit_sample(args, &out, &err);
  assert_int_equal(rc, 5);
  assert_int_equal(rc, flowgen_exit_code(FLOWGEN_NO_DRIVER));
  assert_one_line(err, "jit_sample");
  assert_contains(err, "needs a CUDA GPU");
  /* The weights were read (their shape is reported) before the GPU was
   * looked for. */
  assert_contains(out, "(D=2, H=3), 4 Euler steps, batch 3");
  free(out);
  free(err);
}

static void test_embed_without_gpu(void **state) {
  (void)state;
  if (!fx.embed_built) skip();
  if (fg_test_have_gpu()) skip();
  char cmd[COMMAND_BYTES];
  format(cmd, sizeof cmd, "'%s'", fx.embed);
  char *out = NULL, *err = NULL;
  assert_int_equal(fg_test_run(cmd, &out, &err), 5);
  assert_one_line(err, "embed");
  assert_contains(err, "needs a CUDA GPU");
  free(out);
  free(err);
}

/* The README's jit_sample command, as written there (from the repository
 * root): its weights file exists and loads; it samples and passes its
 * check where there is a GPU, and stops at the GPU (exit 5) where not. */
static void test_readme_jit_sample_command(void **state) {
  (void)state;
  require_jit_sample();
  char path[PATH_BYTES];
  format(path, sizeof path, "%s/README.md", fg_test_source_dir());
  char *readme = fg_test_read_file(path, NULL);
  assert_non_null(readme);
  static const char program[] = "examples/build/jit_sample ";
  const char *at = strstr(readme, program);
  if (!at) fail_msg("README.md names no '%s...' command", program);
  at += sizeof program - 1;
  size_t n = strcspn(at, "`");
  char args[COMMAND_BYTES];
  format(args, sizeof args, "%.*s", (int)n, at);
  for (char *c = args; *c; ++c)
    if (*c == '\n') *c = ' ';
  free(readme);
  assert_contains(args, "--check");

  char command[COMMAND_BYTES];
  format(command, sizeof command, "cd '%s' && FLOWGEN_CACHE_DIR='%s/cache' '%s' %s",
         fg_test_source_dir(), fx.tmp, fx.jit_sample, args);
  char *out = NULL, *err = NULL;
  int rc = fg_test_run(command, &out, &err);
  char weights[PATH_BYTES];
  format(weights, sizeof weights, "weights: %.*s (D=", (int)strcspn(args, " "), args);
  if (!strstr(out, weights)) fail_msg("%s: exit %d, no '%s' in:\n%s%s", command, rc, weights, out, err);
  if (fg_test_have_gpu()) {
    if (rc != 0) fail_msg("%s: exit %d\n%s%s", command, rc, out, err);
    assert_contains(out, "check:   relative L2 error vs fp64 reference");
  } else {
    assert_int_equal(rc, flowgen_exit_code(FLOWGEN_NO_DRIVER));
    assert_one_line(err, "jit_sample");
  }
  free(out);
  free(err);
}

/* ---- on a GPU --------------------------------------------------------------- */

/* The line of out that starts with prefix (malloc()ed), for comparing runs. */
static char *line_starting(const char *out, const char *prefix) {
  const char *at = strstr(out, prefix);
  if (!at) fail_msg("no line '%s' in:\n%s", prefix, out);
  size_t n = strcspn(at, "\n");
  char *line = malloc(n + 1);
  assert_non_null(line);
  memcpy(line, at, n);
  line[n] = '\0';
  return line;
}

static void test_jit_sample_on_gpu(void **state) {
  (void)state;
  FG_SKIP_WITHOUT_GPU();
  require_jit_sample();
  char weights[PATH_BYTES], args[COMMAND_BYTES];
  format(weights, sizeof weights, "%s/gpu.safetensors", fx.tmp);
  write_weights(weights, 5, 24, fg_test_seed());
  /* 100 rows: not a multiple of any tile, so the last block is partial. */
  format(args, sizeof args, "'%s' --steps 12 --batch 100 --seed 3 --check", weights);

  char *out = NULL, *err = NULL;
  int rc = run_jit_sample(args, &out, &err);
  if (rc != 0) fail_msg("jit_sample %s: exit %d\n%s%s", args, rc, out, err);
  assert_string_equal(err, "");
  assert_contains(out, "(D=5, H=24), 12 Euler steps, batch 100");
  assert_contains(out, "module:  compiled with NVRTC");
  assert_contains(out, "samples: 100 x 5 (first rows and columns)");
  double relerr = number_after(out, "relative L2 error vs fp64 reference ");
  if (!(relerr <= RELERR_MAX)) fail_msg("relerr %g > %g\n%s", relerr, RELERR_MAX, out);
  char *first = line_starting(out, "  x[0] =");

  /* A second process finds the module in the disk cache, and the same seed
   * gives the same samples. */
  char *out2 = NULL, *err2 = NULL;
  rc = run_jit_sample(args, &out2, &err2);
  if (rc != 0) fail_msg("second run: exit %d\n%s%s", rc, out2, err2);
  assert_contains(out2, "module:  disk cache hit");
  assert_contains(out2, "compile 0.00 ms");
  char *second = line_starting(out2, "  x[0] =");
  assert_string_equal(first, second);

  free(first);
  free(second);
  free(out);
  free(err);
  free(out2);
  free(err2);
}

static void test_embed_on_gpu(void **state) {
  (void)state;
  FG_SKIP_WITHOUT_GPU();
  if (!fx.embed_built) skip();
  static const char *const batches[] = {"", "1", "33", "4096"};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    char cmd[COMMAND_BYTES];
    format(cmd, sizeof cmd, "'%s' %s", fx.embed, batches[i]);
    char *out = NULL, *err = NULL;
    int rc = fg_test_run(cmd, &out, &err);
    if (rc != 0) fail_msg("%s: exit %d\n%s%s", cmd, rc, out, err);
    assert_contains(out, "D=8 H=32 S=16");
    double relerr = number_after(out, "relerr = ");
    if (!(relerr <= RELERR_MAX)) fail_msg("%s: relerr %g > %g\n%s", cmd, relerr, RELERR_MAX, out);
    assert_contains(out, "(tolerance 1e-06): ok");
    free(out);
    free(err);
  }
}

int main(void) {
  /* FLOWGEN_TEST_FILTER=PATTERN runs only the tests it matches (a run of
   * an example needs its build's test in the pattern too). */
  const char *filter = getenv("FLOWGEN_TEST_FILTER");
  if (filter && *filter) cmocka_set_test_filter(filter);
  /* In order: the builds first, the runs use what they built. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jit_sample_builds),
      cmocka_unit_test(test_embed_builds),
      cmocka_unit_test(test_host_launcher_variants_build),
      cmocka_unit_test(test_launcher_bench_builds),
      cmocka_unit_test(test_installed_pkg_config_links),
      cmocka_unit_test(test_jit_sample_usage_errors),
      cmocka_unit_test(test_jit_sample_bad_weights),
      cmocka_unit_test(test_jit_sample_without_gpu),
      cmocka_unit_test(test_embed_without_gpu),
      cmocka_unit_test(test_readme_jit_sample_command),
      cmocka_unit_test(test_jit_sample_on_gpu),
      cmocka_unit_test(test_embed_on_gpu),
  };
  return cmocka_run_group_tests_name("examples", tests, group_setup, group_teardown);
}
