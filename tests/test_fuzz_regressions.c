/* Replays saved inputs through the fuzz targets' own entry points (the
 * tests/fuzz/fuzz_<name>.c files, compiled here without libFuzzer): every
 * input that once made a target fail (tests/fuzz/regressions/<name>/) and
 * the seed corpus (tests/fuzz/corpus/<name>/).  A target checks its
 * invariants itself and aborts on a violation; under `make asan` the
 * sanitizers watch the replays too.  Each input runs in a child process
 * whose standard error is kept: the CLI targets print the usage errors
 * their inputs are meant to cause, which are shown only if the input
 * fails (with the invariant or sanitizer report that says why). */
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*fuzz_entry)(const uint8_t *data, size_t size);

int fuzz_safetensors_one_input(const uint8_t *data, size_t size);
int fuzz_npy_one_input(const uint8_t *data, size_t size);
int fuzz_cli_one_input(const uint8_t *data, size_t size);
int fuzz_generate_one_input(const uint8_t *data, size_t size);
int fuzz_cache_one_input(const uint8_t *data, size_t size);
int fuzz_sample_one_input(const uint8_t *data, size_t size);
int fuzz_png_one_input(const uint8_t *data, size_t size);

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* entry(data, size) in a child whose standard error goes to errors_path;
 * fails the test, showing that output, unless the child returns 0 and
 * exits 0 (exit(), not _exit(): LeakSanitizer runs then). */
static void run_input(fuzz_entry entry, const uint8_t *data, size_t size,
                      const char *input, const char *errors_path) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(errors_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(125);
    exit(entry(data, size) == 0 ? 0 : 124);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  char *errors = fg_test_read_file(errors_path, NULL);
  print_error("%s", errors ? errors : "");
  free(errors);
  if (WIFSIGNALED(status)) fail_msg("%s: killed by signal %d", input, WTERMSIG(status));
  fail_msg("%s: exit %d", input, WEXITSTATUS(status));
}

/* Replays every file of tests/fuzz/<kind>/<target>/ in name order; returns
 * how many (a missing folder is none). */
static size_t replay_folder(const char *kind, const char *target,
                            fuzz_entry entry) {
  char dir[FG_TEST_PATH_SIZE];
  int n = snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s",
                   fg_test_source_dir(), kind, target);
  assert_true(n > 0 && (size_t)n < sizeof dir);
  DIR *d = opendir(dir);
  if (!d) return 0;
  char **names = NULL;
  size_t count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    names = realloc(names, (count + 1) * sizeof *names);
    assert_non_null(names);
    names[count] = strdup(e->d_name);
    assert_non_null(names[count++]);
  }
  closedir(d);
  qsort(names, count, sizeof *names, compare_names);
  char *scratch = fg_test_mkdtemp(), errors_path[FG_TEST_PATH_SIZE];
  fg_test_path_join(errors_path, scratch, "stderr");
  for (size_t i = 0; i < count; ++i) {
    char path[FG_TEST_PATH_SIZE];
    fg_test_path_join(path, dir, names[i]);
    size_t size = 0;
    char *text = fg_test_read_file(path, &size);
    if (!text) fail_msg("cannot read %s", path);
    /* An exact-size copy, so that a read past the end is a sanitizer
     * report, as under libFuzzer. */
    uint8_t *data = malloc(size ? size : 1);
    assert_non_null(data);
    memcpy(data, text, size);
    free(text);
    print_message("  %s/%s/%s (%zu bytes)\n", kind, target, names[i], size);
    run_input(entry, data, size, path, errors_path);
    free(data);
    free(names[i]);
  }
  free(names);
  fg_test_rmtree(scratch);
  free(scratch);
  return count;
}

static void replay(const char *target, fuzz_entry entry) {
  size_t seeds = replay_folder("corpus", target, entry);
  replay_folder("regressions", target, entry);
  /* The seeds are part of the tree: an empty corpus means a wrong path. */
  assert_true(seeds > 0);
}

static void test_safetensors(void **state) {
  (void)state;
  replay("safetensors", fuzz_safetensors_one_input);
}

static void test_npy(void **state) {
  (void)state;
  replay("npy", fuzz_npy_one_input);
}

static void test_cli(void **state) {
  (void)state;
  replay("cli", fuzz_cli_one_input);
}

static void test_generate(void **state) {
  (void)state;
  replay("generate", fuzz_generate_one_input);
}

static void test_cache(void **state) {
  (void)state;
  replay("cache", fuzz_cache_one_input);
}

static void test_sample(void **state) {
  (void)state;
  replay("sample", fuzz_sample_one_input);
}

static void test_png(void **state) {
  (void)state;
  replay("png", fuzz_png_one_input);
}

/* Found while fuzzing generation: --tune rows=36028797018963969 made the
 * planner return rows_per_block = 2^55 + 1, which the library narrowed to
 * int (1) after its range checks.  plan.lua bounds --tune now; here a plan
 * returns out-of-range launch values directly, and each must be refused,
 * not narrowed. */
static void test_launch_values_out_of_range(void **state) {
  (void)state;
  static const char *const overrides[] = {
      "rows_per_block = (1 << 32) + 32", "block_threads = (1 << 32) + 256",
      "shared_bytes = -1", "shared_bytes = 1 << 40", "max_batch = -2",
      "cluster_blocks = 1 << 33"};
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  char path[FG_TEST_PATH_SIZE];
  fg_test_path_join(path, dir, "plan.lua");
  char *plan = fg_test_read_file(path, NULL);
  assert_non_null(plan);
  /* plan.lua ends "return function(spec) ... end": wrap that planner. */
  char *entry = strstr(plan, "\nreturn function(spec)");
  assert_non_null(entry);
  for (size_t i = 0; i < sizeof overrides / sizeof *overrides; ++i) {
    size_t size = strlen(plan) + 512;
    char *text = malloc(size);
    assert_non_null(text);
    snprintf(text, size,
             "%.*s\nlocal planner = function(spec)%s\n"
             "return function(spec)\n"
             "  local plan = planner(spec)\n"
             "  plan.variants[#plan.variants].%s\n"
             "  return plan\n"
             "end\n",
             (int)(entry - plan), plan,
             entry + strlen("\nreturn function(spec)"), overrides[i]);
    fg_test_write_template(dir, "plan.lua", text);
    free(text);
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowgen_options opts = {0};
    opts.template_dir = dir;
    flowgen_kernel *k = NULL;
    flowgen_error err = {FLOWGEN_OK, ""};
    flowgen_status s = flowgen_generate(&spec, &opts, &k, &err);
    if (s != FLOWGEN_TEMPLATE || !strstr(err.message, "impossible launch"))
      fail_msg("%s: status %s, '%s'", overrides[i], flowgen_status_name(s),
               err.message);
    assert_null(k);
  }
  free(plan);
  fg_test_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_safetensors),
      cmocka_unit_test(test_npy),
      cmocka_unit_test(test_cli),
      cmocka_unit_test(test_generate),
      cmocka_unit_test(test_cache),
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_png),
      cmocka_unit_test(test_launch_values_out_of_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
