/* The plan as data: the variants the planner gives a grid of shapes x
 * precisions x archs x solvers, one line each, against the golden table
 * tests/data/plan.golden.  A change to the planner shows here as a diff of
 * that table: FLOWGEN_UPDATE_GOLDEN=1 rewrites it, and the diff is reviewed
 * with the change. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ----------------------------------------------------------- */

/* Text that grows (a line at a time). */
typedef struct text {
  char *data;
  size_t len, cap;
} text;

static void append(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  assert_true(n >= 0);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = 2 * (t->len + (size_t)n + 1);
    t->data = realloc(t->data, t->cap);
    assert_non_null(t->data);
  }
  va_start(ap, fmt);
  vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* The shapes of tests/plan/snapshot.sh: every strategy and the edges
 * between them (padding, the largest weights, the smallest). */
static const int shapes[][2] = {
    {1, 4},      {2, 8},      {3, 12},     {8, 32},    {16, 64},     {17, 200},
    {32, 128},   {32, 256},   {48, 192},   {64, 64},   {64, 128},    {64, 256},
    {80, 160},   {100, 100},  {128, 128},  {128, 512}, {256, 512},   {256, 1024},
    {32, 2048},  {64, 4096},  {1024, 1024}, {1024, 4096},
};
static const flowgen_precision precisions[] = {FLOWGEN_PRECISION_FP32, FLOWGEN_PRECISION_TF32,
                                               FLOWGEN_PRECISION_BF16, FLOWGEN_PRECISION_FP16};
/* sm_90 twice: generic, then arch-specific (sm_90a). */
static const int archs[] = {75, 80, 86, 89, 90, 90, 100, 120};
/* The planner tells Euler (one stage) from the multi-stage solvers, which
 * it plans alike: RK4 stands for them. */
static const flowgen_solver solvers[] = {FLOWGEN_SOLVER_EULER, FLOWGEN_SOLVER_RK4};

#define COUNT(a) (sizeof (a) / sizeof *(a))

/* One line per variant of spec's plan: the spec, then the variant's
 * strategy, batch range, launch configuration and packed size.  The
 * templates in template_dir render nothing (see build_table). */
static void plan_lines(text *t, const flowgen_spec *spec, const char *template_dir) {
  char arch[16];
  flowgen_spec_arch_name(spec, arch, sizeof arch);
  char head[128];
  snprintf(head, sizeof head, "d%d h%d %s %s %s:", spec->dim, flowgen_spec_hidden(spec),
           flowgen_solver_name(spec->solver), flowgen_precision_name(spec->precision), arch);
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_options opts = {.template_dir = template_dir};
  flowgen_status st = flowgen_generate(spec, &opts, &k, &err);
  if (st != FLOWGEN_OK) {
    append(t, "%-30s refused (%s): %s\n", head, flowgen_status_name(st), err.message);
    return;
  }
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    char range[64];
    if (v->max_batch < 0) snprintf(range, sizeof range, "%lld-", (long long)v->min_batch);
    else snprintf(range, sizeof range, "%lld-%lld", (long long)v->min_batch, (long long)v->max_batch);
    append(t, "%-30s %-12s %-12s block %4d rows %3d cluster %2d shared %6zu params %9zu grid/SM %d\n",
           head, v->strategy, range, v->block_threads, v->rows_per_block, v->cluster_blocks,
           v->shared_bytes, v->params_bytes, v->grid_blocks_per_sm);
  }
  flowgen_kernel_free(k);
}

/* The planner alone: the built-in templates, but for file.cut (the whole
 * generated file), which renders nothing here.  The plan is what this test
 * checks; rendering every spec's source (tests/plan/snapshot.sh) would take
 * five times as long. */
static void build_table(text *t) {
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  fg_test_write_template(dir, "file.cut", "| -- the plan only (tests/test_plan.c)\n");
  append(t, "# The plan of each spec (S=32): tests/test_plan.c; FLOWGEN_UPDATE_GOLDEN=1 rewrites it.\n"
            "# spec: strategy, batches, block threads, samples a block (a cluster), cluster blocks,\n"
            "# dynamic shared bytes, packed weight bytes, blocks a SM of a persistent grid (0: none)\n");
  for (size_t s = 0; s < COUNT(shapes); ++s)
    for (size_t p = 0; p < COUNT(precisions); ++p)
      for (size_t a = 0; a < COUNT(archs); ++a)
        for (size_t v = 0; v < COUNT(solvers); ++v) {
          flowgen_spec spec = fg_test_spec(shapes[s][0], shapes[s][1], 32, archs[a]);
          spec.arch_specific = a == 5;
          spec.precision = precisions[p];
          spec.solver = solvers[v];
          plan_lines(t, &spec, dir);
        }
  fg_test_rmtree(dir);
  free(dir);
}

/* ---- the test ------------------------------------------------------------ */

static void golden_path(char out[FG_TEST_PATH_SIZE]) {
  fg_test_path_join(out, fg_test_source_dir(), "tests/data/plan.golden");
}

/* Prints the first lines that differ (up to 20), numbered as in the file. */
static void report_differences(const char *expected, const char *actual) {
  int line = 1, shown = 0;
  while ((*expected || *actual) && shown < 20) {
    size_t a = strcspn(expected, "\n"), b = strcspn(actual, "\n");
    if (a != b || strncmp(expected, actual, a) != 0) {
      print_message("# line %d\n#   golden: %.*s\n#   now:    %.*s\n", line, (int)a, expected, (int)b,
                    actual);
      ++shown;
    }
    expected += a + (expected[a] == '\n');
    actual += b + (actual[b] == '\n');
    ++line;
  }
}

static void test_plan_matches_golden(void **state) {
  (void)state;
  text t = {0};
  build_table(&t);
  char path[FG_TEST_PATH_SIZE];
  golden_path(path);
  const char *update = getenv("FLOWGEN_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    fg_test_write_file(path, t.data, t.len);
    print_message("# wrote %s: review its diff\n", path);
    free(t.data);
    return;
  }
  size_t size = 0;
  char *golden = fg_test_read_file(path, &size);
  if (!golden) fail_msg("cannot read %s (FLOWGEN_UPDATE_GOLDEN=1 writes it)", path);
  if (size != t.len || memcmp(golden, t.data, size) != 0) {
    report_differences(golden, t.data);
    free(golden);
    free(t.data);
    fail_msg("the plan differs from %s: FLOWGEN_UPDATE_GOLDEN=1 build/tests/test_plan "
             "rewrites it (review the diff)", path);
  }
  free(golden);
  free(t.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_matches_golden),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
