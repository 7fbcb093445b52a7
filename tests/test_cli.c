/* The flowgen command line, driven as a user would: outputs, help and
 * version, usage errors (exit 2, one "flowgen: " line naming the flag),
 * output files written whole or not at all, template failures. */
#include "support.h"

#include "flowrt.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define PATH_SIZE 4096
#define COMMAND_SIZE (3 * PATH_SIZE)

/* ---- helpers ------------------------------------------------------------ */

static void path_join(char out[PATH_SIZE], const char *dir, const char *name) {
  int n = snprintf(out, PATH_SIZE, "%s/%s", dir, name);
  assert_true(n > 0 && n < PATH_SIZE);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct cli_result {
  int code;
  char *out, *err;
} cli_result;

/* Runs `flowgen ARGS` (ARGS as a shell fragment) under timeout(1), so that
 * a hang fails the test (exit 124) instead of stopping the run. */
static cli_result flowgen(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static cli_result flowgen(const char *fmt, ...) {
  char args[COMMAND_SIZE], command[COMMAND_SIZE + PATH_SIZE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof args);
  snprintf(command, sizeof command, "timeout 60 '%s' %s", fg_test_flowgen_bin(),
           args);
  cli_result r = {0, NULL, NULL};
  r.code = fg_test_run(command, &r.out, &r.err);
  assert_non_null(r.out);
  assert_non_null(r.err);
  return r;
}

static void cli_free(cli_result *r) {
  free(r->out);
  free(r->err);
}

static int line_count(const char *text) {
  int n = 0;
  for (; *text; ++text) n += *text == '\n';
  return n;
}

/* A usage-style failure: the exit code, nothing on stdout, one line on
 * stderr that starts "flowgen: " and holds `needle`.  Returns false and
 * describes the problem in `problem` otherwise. */
static bool is_one_error_line(const cli_result *r, int code,
                              const char *needle, const char *what,
                              char *problem, size_t size) {
  if (r->code != code)
    snprintf(problem, size, "%s: exit %d, expected %d (stderr: %s)", what,
             r->code, code, r->err);
  else if (r->out[0])
    snprintf(problem, size, "%s: stdout not empty: %.200s", what, r->out);
  else if (strncmp(r->err, "flowgen: ", 9) != 0 || line_count(r->err) != 1 ||
           r->err[strlen(r->err) - 1] != '\n')
    snprintf(problem, size, "%s: stderr is not one \"flowgen: \" line: \"%s\"",
             what, r->err);
  else if (needle && !strstr(r->err, needle))
    snprintf(problem, size, "%s: stderr does not name \"%s\": %s", what,
             needle, r->err);
  else
    return true;
  return false;
}

static void assert_one_error_line(const cli_result *r, int code,
                                  const char *needle, const char *what) {
  char problem[1024];
  if (!is_one_error_line(r, code, needle, what, problem, sizeof problem))
    fail_msg("%s", problem);
}

static char *default_source(void) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = NULL;
  assert_int_equal(flowgen_generate(&spec, NULL, &k, NULL), FLOWGEN_OK);
  char *src = strdup(flowgen_kernel_source(k));
  flowgen_kernel_free(k);
  return src;
}

static void copy_templates(const char *dir) {
  char src_dir[PATH_SIZE], src[PATH_SIZE], dst[PATH_SIZE];
  path_join(src_dir, fg_test_source_dir(), "templates");
  DIR *d = opendir(src_dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    path_join(src, src_dir, e->d_name);
    path_join(dst, dir, e->d_name);
    size_t size = 0;
    char *data = fg_test_read_file(src, &size);
    assert_non_null(data);
    fg_test_write_file(dst, data, size);
    free(data);
  }
  closedir(d);
}

static void write_text(const char *dir, const char *name, const char *text) {
  char path[PATH_SIZE];
  path_join(path, dir, name);
  fg_test_write_file(path, text, strlen(text));
}

/* Files in dir whose name holds ".tmp." (the atomic writer's temporaries). */
static int count_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

static void skip_without_nvrtc(void) {
  if (flowrt_nvrtc_version() == 0) {
    print_message("# NVRTC is not loadable: skipped\n");
    skip();
  }
}

static int setup(void **state) {
  *state = fg_test_mkdtemp();
  return 0;
}

static int teardown(void **state) {
  fg_test_rmtree(*state);
  free(*state);
  return 0;
}

/* ---- outputs ---------------------------------------------------------------- */

static void test_default_writes_source_to_stdout(void **state) {
  (void)state;
  char *expected = default_source();
  cli_result r = flowgen("%s", "");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.err, "");
  /* The CLI is a thin shell: the same bytes as the library. */
  assert_string_equal(r.out, expected);
  assert_true(strncmp(r.out, "// Generated by flowgen", 23) == 0);
  cli_result again = flowgen("-o -");
  assert_int_equal(again.code, 0);
  assert_string_equal(again.out, r.out);
  cli_free(&again);
  cli_free(&r);
  free(expected);
}

static void test_output_file(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  path_join(path, dir, "kernel.cu");
  cli_result r = flowgen("-o '%s'", path);
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "");
  char *expected = default_source();
  char *written = fg_test_read_file(path, NULL);
  assert_non_null(written);
  assert_string_equal(written, expected);
  /* Ordinary permissions (0666 & ~umask), not the temporary's 0600. */
  mode_t mask = umask(022);
  umask(mask);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
  assert_int_equal(count_temporaries(dir), 0);
  free(written);
  cli_free(&r);

  /* --output=FILE and replacing an existing file. */
  fg_test_write_file(path, "old", 3);
  r = flowgen("--output='%s' --dim 3", path);
  assert_int_equal(r.code, 0);
  written = fg_test_read_file(path, NULL);
  assert_non_null(strstr(written, "constexpr int kDim = 3;"));
  free(written);
  free(expected);
  cli_free(&r);
}

static void test_deterministic_across_runs(void **state) {
  (void)state;
  cli_result a = flowgen("--dim 5 --hidden 7 --steps 3 --host-launcher");
  cli_result b = flowgen("--dim 5 --hidden 7 --steps 3 --host-launcher");
  assert_int_equal(a.code, 0);
  assert_int_equal(b.code, 0);
  assert_string_equal(a.out, b.out);
  assert_non_null(strstr(a.out, "_launch("));
  cli_free(&a);
  cli_free(&b);
}

static void test_equals_form(void **state) {
  (void)state;
  cli_result a = flowgen("--dim=64");
  char *expected = default_source();
  assert_int_equal(a.code, 0);
  assert_string_equal(a.out, expected);
  cli_result b = flowgen("--dim=3 --hidden=12 --steps=5 --arch=sm_80 --name=policy");
  assert_int_equal(b.code, 0);
  assert_non_null(strstr(b.out, "flowgen --dim 3 --hidden 12 --steps 5 "
                                "--solver euler --precision fp32 --arch sm_80 "
                                "--name policy"));
  assert_non_null(strstr(b.out, "void policy_pack("));
  free(expected);
  cli_free(&a);
  cli_free(&b);
}

static void test_describe(void **state) {
  (void)state;
  cli_result r = flowgen("--describe --dim 3 --steps 5");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.err, "");
  json_error_t jerr;
  json_t *root = json_loads(r.out, 0, &jerr);
  if (!root) fail_msg("--describe is not JSON: %s: %s", jerr.text, r.out);
  assert_string_equal(json_string_value(json_object_get(root, "name")),
                      "flow_d3_h12_s5_fp32");
  assert_int_equal(json_integer_value(json_object_get(root, "dim")), 3);
  assert_int_equal(json_integer_value(json_object_get(root, "hidden")), 12);
  json_t *v0 = json_array_get(json_object_get(root, "variants"), 0);
  assert_true(strncmp(json_string_value(json_object_get(v0, "symbol")),
                      "flow_d3_h12_s5_fp32_", 20) == 0);
  assert_string_equal(json_string_value(json_object_get(v0, "pack_symbol")),
                      "flow_d3_h12_s5_fp32_pack");
  assert_true(json_integer_value(json_object_get(v0, "params_bytes")) > 0);
  json_decref(root);
  cli_free(&r);
}

static void test_emit_ptx_and_cubin(void **state) {
  const char *dir = *state;
  skip_without_nvrtc();
  cli_result r = flowgen("--emit ptx --dim 3 --steps 5");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.err, "");
  assert_non_null(strstr(r.out, "\n.version "));
  assert_non_null(strstr(r.out, "\n.target sm_90"));
  assert_non_null(strstr(r.out, ".entry flow_d3_h12_s5_fp32_pack("));
  assert_non_null(strstr(r.out, ".entry flow_d3_h12_s5_fp32_tiled("));
  cli_free(&r);

  char path[PATH_SIZE];
  path_join(path, dir, "k.cubin");
  r = flowgen("--emit cubin --dim 3 --steps 5 --arch sm_80 -o '%s'", path);
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "");
  size_t size = 0;
  char *cubin = fg_test_read_file(path, &size);
  assert_non_null(cubin);
  assert_true(size > 64);
  assert_memory_equal(cubin, "\x7f" "ELF", 4);
  free(cubin);
  cli_free(&r);
}

static void test_help_and_version(void **state) {
  (void)state;
  static const char *const help_flags[] = {"--help", "-h"};
  for (size_t i = 0; i < 2; ++i) {
    cli_result r = flowgen("%s", help_flags[i]);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "usage: flowgen"));
    assert_non_null(strstr(r.out, "1 to 1024"));
    assert_non_null(strstr(r.out, "1 to 4096"));
    assert_non_null(strstr(r.out, "1 to 10000"));
    assert_non_null(strstr(r.out, "Exit codes"));
    assert_non_null(strstr(r.out, "2 usage error"));
    assert_non_null(strstr(r.out, "3 template error"));
    cli_free(&r);
  }
  static const char *const version_flags[] = {"--version", "-V"};
  for (size_t i = 0; i < 2; ++i) {
    cli_result r = flowgen("%s", version_flags[i]);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "flowgen " FLOWGEN_VERSION "\n");
    assert_string_equal(r.out, "flowgen 0.1.0\n");
    assert_string_equal(r.err, "");
    cli_free(&r);
  }
}

/* ---- usage errors ------------------------------------------------------------- */

static const struct {
  const char *args, *names;
} bad_args[] = {
    {"--dim 0", "--dim"},
    {"--dim -1", "--dim"},
    {"--dim abc", "--dim"},
    {"--dim 64x", "--dim"},
    {"--dim 99999999999999999999", "--dim"},
    {"--dim=", "--dim"},
    {"--hidden 5000", "--hidden"},
    {"--steps 0", "--steps"},
    {"--steps 10001", "--steps"},
    {"--frobnicate", "--frobnicate"},
    {"--dim", "--dim"},
    {"--dim 8 --steps", "--steps"},
    {"-o", "-o"},
    {"foo", "foo"},
    {"--emit exe", "--emit"},
    {"--arch sm_60", "--arch"},
    {"--arch 90", "--arch"},
    {"--precision fp8", "--precision"},
    {"--solver rk9", "--solver"},
    {"--name 9lives", "--name"},
    {"--name", "--name"},
    {"--template-dir", "--template-dir"},
    {"--emit", "--emit"},
};

static void test_usage_errors(void **state) {
  (void)state;
  char problems[8192] = "";
  for (size_t i = 0; i < sizeof bad_args / sizeof bad_args[0]; ++i) {
    cli_result r = flowgen("%s", bad_args[i].args);
    char problem[1024];
    if (!is_one_error_line(&r, 2, bad_args[i].names, bad_args[i].args,
                           problem, sizeof problem)) {
      size_t used = strlen(problems);
      snprintf(problems + used, sizeof problems - used, "\n  %s", problem);
    }
    cli_free(&r);
  }
  if (problems[0]) fail_msg("usage errors:%s", problems);
}

/* A failing run leaves an existing output file as it was. */
static void test_failure_keeps_existing_output(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  path_join(path, dir, "kernel.cu");
  static const char old[] = "// hand-kept file\n\x01\x02 bytes\n";
  char templates[PATH_SIZE];
  path_join(templates, dir, "broken-templates");
  assert_int_equal(mkdir(templates, 0700), 0);
  copy_templates(templates);
  write_text(templates, "file.cut", "// 1\n| local x = = 1\n");

  static const struct {
    const char *args;
    int code;
  } runs[] = {
      {"--dim 0", 2},
      {"--frobnicate", 2},
      {"--template-dir '%s'", 3},
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; ++i) {
    fg_test_write_file(path, old, sizeof old - 1);
    char args[COMMAND_SIZE];
    snprintf(args, sizeof args, runs[i].args, templates);
    cli_result r = flowgen("%s -o '%s'", args, path);
    assert_one_error_line(&r, runs[i].code, NULL, args);
    size_t size = 0;
    char *now = fg_test_read_file(path, &size);
    assert_non_null(now);
    assert_int_equal(size, sizeof old - 1);
    assert_memory_equal(now, old, size);
    free(now);
    assert_int_equal(count_temporaries(dir), 0);
    cli_free(&r);
  }
  /* The template error names the template's file and line. */
  cli_result r = flowgen("--template-dir '%s' -o '%s'", templates, path);
  assert_non_null(strstr(r.err, "file.cut:2:"));
  cli_free(&r);
}

static void test_unwritable_output(void **state) {
  (void)state;
  cli_result r = flowgen("-o /nonexistent-dir/x.cu");
  assert_one_error_line(&r, 1, "/nonexistent-dir/x.cu", "-o /nonexistent-dir");
  cli_free(&r);
  assert_false(fg_test_file_exists("/nonexistent-dir"));

  /* A full device on stdout is an error, not a silent success. */
  if (fg_test_file_exists("/dev/full")) {
    r = flowgen("> /dev/full");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "flowgen: "));
    cli_free(&r);
  }
}

/* ---- template failures ------------------------------------------------------------ */

static void test_empty_template_dir(void **state) {
  const char *dir = *state;
  char empty[PATH_SIZE], out[PATH_SIZE];
  path_join(empty, dir, "empty");
  path_join(out, dir, "kernel.cu");
  assert_int_equal(mkdir(empty, 0700), 0);
  cli_result r = flowgen("--template-dir '%s' -o '%s'", empty, out);
  assert_one_error_line(&r, 3, "plan.lua", "--template-dir (empty)");
  assert_false(fg_test_file_exists(out));
  cli_free(&r);
}

static void test_endless_template(void **state) {
  const char *dir = *state;
  char templates[PATH_SIZE], out[PATH_SIZE];
  path_join(templates, dir, "endless");
  path_join(out, dir, "kernel.cu");
  assert_int_equal(mkdir(templates, 0700), 0);
  copy_templates(templates);
  write_text(templates, "file.cut", "// spins\n| while true do end\n");
  double t0 = now_seconds();
  cli_result r = flowgen("--template-dir '%s' -o '%s'", templates, out);
  double seconds = now_seconds() - t0;
  assert_one_error_line(&r, 3, "instruction limit", "endless template");
  assert_false(fg_test_file_exists(out));
  assert_int_equal(count_temporaries(dir), 0);
  if (seconds > 10.0)
    fail_msg("the endless template took %.1f s to stop", seconds);
  cli_free(&r);
}

static void test_refusal_is_exit_2(void **state) {
  const char *dir = *state;
  char templates[PATH_SIZE];
  path_join(templates, dir, "refusing");
  assert_int_equal(mkdir(templates, 0700), 0);
  copy_templates(templates);
  write_text(templates, "plan.lua",
             "return function(spec) refuse('no plan for D=' .. spec.dim) end\n");
  cli_result r = flowgen("--template-dir '%s' --dim 7", templates);
  assert_one_error_line(&r, 2, NULL, "refusing planner");
  assert_string_equal(r.err, "flowgen: no plan for D=7\n");
  cli_free(&r);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_default_writes_source_to_stdout),
      T(test_output_file),
      T(test_deterministic_across_runs),
      T(test_equals_form),
      T(test_describe),
      T(test_emit_ptx_and_cubin),
      T(test_help_and_version),
      T(test_usage_errors),
      T(test_failure_keeps_existing_output),
      T(test_unwritable_output),
      T(test_empty_template_dir),
      T(test_endless_template),
      T(test_refusal_is_exit_2),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
