/* The plan as data: the variants the planner gives a grid of shapes x
 * precisions x archs x solvers, one line each, against the golden table
 * tests/data/plan.golden.  A change to the planner shows here as a diff of
 * that table: FLOWGEN_UPDATE_GOLDEN=1 rewrites it, and the diff is reviewed
 * with the change. */
#include "support.h"

#include <dirent.h>
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
static void plan_lines(text *t, const flowgen_spec *spec, const char *tag, const char *template_dir) {
  char arch[16];
  flowgen_spec_arch_name(spec, arch, sizeof arch);
  char head[128];
  snprintf(head, sizeof head, "d%d h%d %s %s %s%s%s:", spec->dim, flowgen_spec_hidden(spec),
           flowgen_solver_name(spec->solver), flowgen_precision_name(spec->precision), arch,
           tag ? " " : "", tag ? tag : "");
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
    char launch[96] = "";
    if (v->cooperative)
      snprintf(launch, sizeof launch, " cooperative, fallback %s",
               flowgen_kernel_variant(k, v->fallback)->strategy);
    if (v->nonportable_cluster) snprintf(launch, sizeof launch, " non-portable cluster");
    append(t, "%-30s %-12s %-12s block %4d rows %3d cluster %2d shared %6zu params %9zu grid/SM %d%s\n",
           head, v->strategy, range, v->block_threads, v->rows_per_block, v->cluster_blocks,
           v->shared_bytes, v->params_bytes, v->grid_blocks_per_sm, launch);
  }
  flowgen_kernel_free(k);
}

/* Members of the model family (beside the seed, whose lines come first):
 * each kind that moves the plan (conditioning, depth and weight size,
 * guidance's rows, the strategies that serve the seed's depth and time
 * only) or should not (the activation, the input order). */
typedef struct {
  const char *tag;
  int cond, layers;
  flowgen_activation act;
  int time_features;
  const char *input;
  bool guidance;
} member;

static const member members[] = {
    {"c512", 512, 0, FLOWGEN_ACT_SILU, 0, "", false},
    {"l2", 0, 2, FLOWGEN_ACT_SILU, 0, "", false},
    {"l8 gelu", 0, 8, FLOWGEN_ACT_GELU, 0, "", false},
    {"gelu_tanh tcx", 0, 0, FLOWGEN_ACT_GELU_TANH, 0, "tcx", false},
    {"sin64", 0, 0, FLOWGEN_ACT_SILU, 64, "", false},
    {"c16 cfg", 16, 0, FLOWGEN_ACT_SILU, 0, "", true},
    {"c4 l5 relu sin8 ctx cfg", 4, 5, FLOWGEN_ACT_RELU, 8, "ctx", true},
};
static const int member_shapes[][2] = {{8, 32}, {17, 200}, {64, 256}, {128, 512}, {1024, 4096}};
/* sm_90 as sm_90a only (the generic strategies plan alike) */
static const int member_archs[] = {75, 80, 90};

static flowgen_spec member_spec(const member *m, int dim, int hidden, int arch) {
  flowgen_spec spec = fg_test_spec(dim, hidden, 32, arch);
  spec.cond = m->cond;
  spec.layers = m->layers;
  spec.act = m->act;
  spec.time.features = m->time_features;
  snprintf(spec.input, sizeof spec.input, "%s", m->input);
  spec.guidance = m->guidance;
  return spec;
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
            "# dynamic shared bytes, packed weight bytes, blocks a SM of a persistent grid (0: none),\n"
            "# how it is launched where not plainly (cooperative and its fallback, non-portable cluster)\n");
  for (size_t s = 0; s < COUNT(shapes); ++s)
    for (size_t p = 0; p < COUNT(precisions); ++p)
      for (size_t a = 0; a < COUNT(archs); ++a)
        for (size_t v = 0; v < COUNT(solvers); ++v) {
          flowgen_spec spec = fg_test_spec(shapes[s][0], shapes[s][1], 32, archs[a]);
          spec.arch_specific = a == 5;
          spec.precision = precisions[p];
          spec.solver = solvers[v];
          plan_lines(t, &spec, NULL, dir);
        }
  append(t, "# Members of the model family (D, H, solver, precision, arch, then the member)\n");
  for (size_t m = 0; m < COUNT(members); ++m)
    for (size_t s = 0; s < COUNT(member_shapes); ++s)
      for (size_t p = 0; p < COUNT(precisions); ++p)
        for (size_t a = 0; a < COUNT(member_archs); ++a)
          for (size_t v = 0; v < COUNT(solvers); ++v) {
            flowgen_spec spec = member_spec(&members[m], member_shapes[s][0], member_shapes[s][1],
                                            member_archs[a]);
            spec.arch_specific = member_archs[a] == 90;
            spec.precision = precisions[p];
            spec.solver = solvers[v];
            plan_lines(t, &spec, members[m].tag, dir);
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

/* ---- overrides (templates/tune.lua, docs/tuning.md) ------------------------ */

/* spec's plan under `tune` (the built-in templates). */
static flowgen_kernel *plan_of(const flowgen_spec *spec, const char *tune) {
  flowgen_options opts = {.tune = tune};
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  if (flowgen_generate(spec, &opts, &k, &err) != FLOWGEN_OK)
    fail_msg("tune=%s: %s: %s", tune ? tune : "(none)", flowgen_status_name(err.status), err.message);
  return k;
}

static flowgen_spec spec_of(int dim, int hidden, flowgen_precision precision, int arch, bool arch_specific) {
  flowgen_spec spec = fg_test_spec(dim, hidden, 4, arch);
  spec.precision = precision;
  spec.arch_specific = arch_specific;
  return spec;
}

/* The plan as "strategy min-max ..." (max -1 as nothing after the dash). */
static char *chain_of(const flowgen_kernel *k) {
  text t = {0};
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    append(&t, "%s%s %lld-", i ? " " : "", v->strategy, (long long)v->min_batch);
    if (v->max_batch >= 0) append(&t, "%lld", (long long)v->max_batch);
  }
  return t.data;
}

/* spec's plan under tune is exactly `chain`. */
static void expect_chain(const flowgen_spec *spec, const char *tune, const char *chain) {
  flowgen_kernel *k = plan_of(spec, tune);
  char *got = chain_of(k);
  if (strcmp(got, chain) != 0) fail_msg("tune=%s:\n  got  %s\n  want %s", tune ? tune : "(none)", got, chain);
  free(got);
  flowgen_kernel_free(k);
}

/* spec under tune is refused (UNSUPPORTED), its message holding `message`. */
static void expect_refused(const flowgen_spec *spec, const char *tune, const char *message) {
  flowgen_options opts = {.tune = tune};
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status st = flowgen_generate(spec, &opts, &k, &err);
  if (st != FLOWGEN_UNSUPPORTED || !strstr(err.message, message))
    fail_msg("tune=%s: %s \"%s\", not UNSUPPORTED \"%s\"", tune, flowgen_status_name(st), err.message, message);
  assert_null(k);
}

/* only= and skip=: strategies chosen or left out, the rest planned as if
 * they could not serve; only= plans a strategy whatever the weights (the
 * grid at 394 KB). */
static void test_only_and_skip(void **state) {
  (void)state;
  flowgen_spec fp32 = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  expect_chain(&fp32, NULL, "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
                            "cluster4_r6 121-180 cluster4_r8 181-240 rmma3_r16 241-1920 tiled 1921-8448 mma 8449-");
  expect_chain(&fp32, "only=tiled8:tiled", "tiled8 0-1056 tiled 1057-");
  expect_chain(&fp32, "only=grid:tiled8:tiled", "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8 65-1056 tiled 1057-");
  expect_chain(&fp32, "skip=cluster", "rmma3_r8 0-240 rmma3_r16 241-1920 tiled 1921-8448 mma 8449-");
  /* without rmma3: the cluster kernel's last variant over three waves */
  expect_chain(&fp32, "skip=rmma3", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
                                   "cluster4_r6 121-180 cluster4_r8 181-720 tiled8 721-1056 tiled 1057-8448 mma 8449-");
  flowgen_spec bf16 = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, true);
  expect_chain(&bf16, "skip=rmma", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
                                   "cluster4_r6 121-180 cluster4_r8 181-480 wgmma64 481-8448 wgmma 8449-");
  expect_chain(&bf16, "skip=wgmma64:wgmma", "cluster4_r1 0-30 rmma 31-2112 mma 2113-");
  flowgen_spec large = spec_of(128, 512, FLOWGEN_PRECISION_FP32, 90, false);
  expect_chain(&large, NULL, "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8c8 65-112 tiled8 113-1056 "
                             "gemm 1057-4224 mma 4225-");
  expect_chain(&large, "skip=mma16:mma,tiled.blocks=4", "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8c4 65-224 "
                                                         "tiled8 225-1056 gemm 1057-");
  /* at H >= 1024 gemm from the split's last batch + 1 */
  flowgen_spec wide = spec_of(256, 1024, FLOWGEN_PRECISION_FP32, 90, false);
  expect_chain(&wide, NULL, "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8c8 65-112 gemm 113-");
  expect_chain(&wide, "tiled.blocks=1", "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8 65-65 gemm 66-");
}

/* NAME=FROM:TO: the variants of NAME (a strategy, or a module such as
 * cluster) take those batches, the others what is left to them; the
 * edges are refused where they would leave batches to no variant. */
static void test_ranges(void **state) {
  (void)state;
  flowgen_spec bf16 = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, false);
  expect_chain(&bf16, NULL, "cluster4_r1 0-30 rmma 31-2112 mma 2113-");
  expect_chain(&bf16, "rmma=1:2000", "rmma 0-2000 mma 2001-");
  expect_chain(&bf16, "rmma=:100", "cluster4_r1 0-30 rmma 31-100 mma 101-");
  expect_chain(&bf16, "cluster=:500", "cluster4_r1 0-500 rmma 501-2112 mma 2113-");
  bf16.arch_specific = true;
  expect_chain(&bf16, "wgmma64=1000:", "cluster4_r1 0-30 rmma 31-999 wgmma64 1000-8448 wgmma 8449-");
  flowgen_spec fp32 = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  expect_chain(&fp32, "skip=rmma3,cluster4_r4=:240", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 "
                                                    "cluster4_r4 91-240 cluster4_r8 241-720 tiled8 721-1056 "
                                                    "tiled 1057-8448 mma 8449-");
  expect_chain(&fp32, "only=cluster:gemm,gemm=4:", "cluster4_r1 0-3 gemm 4-");
  expect_chain(&fp32, "rmma3_r16=:300,mma=5000:", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 "
                                                  "cluster4_r4 91-120 cluster4_r6 121-180 cluster4_r8 181-240 "
                                                  "rmma3_r16 241-300 tiled 301-4999 mma 5000-");
  /* the persistent grids' fallback at batch 0 stays where the others
   * move (named, it moves as any other) */
  flowgen_spec wide = spec_of(256, 2048, FLOWGEN_PRECISION_BF16, 90, true);
  expect_chain(&wide, NULL, "tiled8c8 0-0 grid_b1 1-1 grid_b8 2-8 gemm_b1024 9-1024 gemm 1025-");
  expect_chain(&wide, "gemm_b1024=:4096", "tiled8c8 0-0 grid_b1 1-1 grid_b8 2-8 gemm_b1024 9-4096 gemm 4097-");
  expect_chain(&wide, "grid_b8=2:16", "tiled8c8 0-0 grid_b1 1-1 grid_b8 2-16 gemm_b1024 17-1024 gemm 1025-");
  expect_chain(&wide, "grid_b1=:4,gemm_b1024=:600", "tiled8c8 0-0 grid_b1 1-4 grid_b8 5-8 gemm_b1024 9-600 gemm 601-");
  expect_chain(&wide, "tiled8c8=1:100", "tiled8c8 0-100 gemm_b1024 101-1024 gemm 1025-");
}

/* The dials a strategy module declares. */
static void test_dials(void **state) {
  (void)state;
  flowgen_spec fp32 = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  flowgen_kernel *k = plan_of(&fp32, "cluster.blocks=8");
  const flowgen_variant *v = flowgen_kernel_variant(k, 0);
  assert_string_equal(v->strategy, "cluster8_r1");
  assert_int_equal(v->cluster_blocks, 8);
  assert_int_equal(v->max_batch, 8);  /* 8 clusters of 8 at once */
  flowgen_kernel_free(k);
  flowgen_spec tf32 = spec_of(64, 256, FLOWGEN_PRECISION_TF32, 90, false);
  expect_chain(&tf32, "skip=rmma_c2", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
                                      "cluster4_r6 121-180 cluster4_r8 181-480 mma16 481-2112 mma 2113-");
  /* 32 samples a block for both matrix-unit variants: no mma16 */
  k = plan_of(&tf32, "skip=rmma_c2,mma.rows=32,mma.stages=2");
  assert_null(strstr(flowgen_kernel_source(k), "_mma16("));
  v = flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1);
  assert_int_equal(v->rows_per_block, 32);
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kStages = 2;  // tile buffers"));
  flowgen_kernel_free(k);
  flowgen_spec large = spec_of(128, 512, FLOWGEN_PRECISION_FP32, 90, false);
  flowgen_kernel *two = plan_of(&large, NULL), *four = plan_of(&large, "tiled.stages=4");
  const flowgen_variant *a = flowgen_kernel_variant(two, 3), *b = flowgen_kernel_variant(four, 3);
  assert_string_equal(b->strategy, "tiled8c8");
  assert_true(b->shared_bytes > a->shared_bytes);
  flowgen_kernel_free(two);
  flowgen_kernel_free(four);
  k = plan_of(&large, "gemm.per_sm=2,gemm.rows=32");
  v = flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 2);
  assert_string_equal(v->strategy, "gemm");
  assert_int_equal(v->grid_blocks_per_sm, 2);
  assert_int_equal(v->rows_per_block, 32);
  flowgen_kernel_free(k);
  expect_chain(&large, "tiled.blocks=1", "grid_b1 0-1 grid_b8 2-8 grid_b64 9-64 tiled8 65-1056 gemm 1057-4224 mma 4225-");
  flowgen_spec ws = spec_of(64, 256, FLOWGEN_PRECISION_TF32, 90, true);
  k = plan_of(&ws, "wgstream.blocks=1,wgstream.n=32");
  v = flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1);
  assert_string_equal(v->strategy, "wgstream");
  assert_int_equal(v->cluster_blocks, 1);
  assert_int_equal(v->rows_per_block, 128);
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kNC = 32;"));
  flowgen_kernel_free(k);
  flowgen_spec wg = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, true);
  k = plan_of(&wg, "wgmma.n=64");
  assert_null(strstr(flowgen_kernel_source(k), "m64n128k16"));
  assert_non_null(strstr(flowgen_kernel_source(k), "m64n64k16"));
  flowgen_kernel_free(k);
}

/* spec's plan against its plan under gemm.split=1: the chains hold
 * `chain` and `unsplit`, the second has no split tiles' code, and the
 * first's params take `room` bytes more (the split tiles' partial sums),
 * its source naming them where it does. */
static void expect_split_room(const flowgen_spec *spec, const char *chain, const char *unsplit, size_t room) {
  flowgen_kernel *k = plan_of(spec, NULL), *u = plan_of(spec, "gemm.split=1");
  char *got = chain_of(k), *got_u = chain_of(u);
  assert_non_null(strstr(got, chain));
  assert_non_null(strstr(got_u, unsplit));
  free(got);
  free(got_u);
  assert_null(strstr(flowgen_kernel_source(u), "finish_split"));
  assert_int_equal(strstr(flowgen_kernel_source(k), "kSplitSums") != NULL, room > 0);
  assert_int_equal(flowgen_kernel_variant(k, 0)->params_bytes - flowgen_kernel_variant(u, 0)->params_bytes, room);
  flowgen_kernel_free(k);
  flowgen_kernel_free(u);
}

/* bf16 and fp16 gemm on sm_90a take wgmma: m64n256k16 a warpgroup in
 * tiles of 128 rows x 256 outputs (m64n128k16 in 64-row ones, 64 at most
 * under gemm.rows=64), A and B from shared memory, A K-major and B N-major
 * (trans-a 0, trans-b 1), 64 inputs a stage, 4 stages, the activations in
 * 16 bits in the scratch area, which is as large as they need; nothing
 * else in the plan moves.  Two blocks a SM (gemm.per_sm=2), tf32, sm_90
 * without its arch-specific target and sm_80 keep mma.sync and its 128
 * outputs; 32-row tiles on wgmma are refused, and so are the dials that
 * chose it once. */
static void test_gemm_on_wgmma(void **state) {
  (void)state;
  static const char *const wg = "only=tiled:gemm", *const sync = "only=tiled:gemm,gemm.per_sm=2";
  for (int p = 0; p < 2; ++p) {
    flowgen_spec spec = spec_of(256, 2048, p ? FLOWGEN_PRECISION_FP16 : FLOWGEN_PRECISION_BF16, 90, true);
    flowgen_kernel *a = plan_of(&spec, sync), *k = plan_of(&spec, wg);
    /* on mma.sync and on wgmma from the first batch after a variant that
     * is not a grid */
    char *chain_a = chain_of(a), *chain_k = chain_of(k);
    assert_string_equal(chain_a, "tiled 0-1 gemm 2-");
    assert_string_equal(chain_k, "tiled 0-1 gemm 2-");
    free(chain_a);
    free(chain_k);
    const flowgen_variant *v = flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1);
    assert_string_equal(v->strategy, "gemm");
    assert_int_equal(v->rows_per_block, 128);
    const char *src = flowgen_kernel_source(k);
    /* a wgmma a block of 128 outputs (two a k-step for a warpgroup's 256),
     * n64 for a warpgroup's half of a 64 x 128 tile; none of 256 */
    assert_non_null(strstr(src, p ? "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                                  : "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "));
    assert_non_null(strstr(src, p ? "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                                  : "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "));
    assert_null(strstr(src, "m64n256k16"));
    /* the weights in blocks of 64 inputs x 128 outputs; tiles of 128 or 256
     * outputs, chosen a layer by the work they leave each block */
    assert_non_null(strstr(src, "in gemm's stage tiles: [16][32] blocks of 64 x 128"));
    assert_non_null(strstr(src, "block_work<OUT>(rows, MT, kNarrow, kChunks)"));
    /* (gemm alone: no tile split) */
    assert_null(strstr(src, "finish_split"));
    assert_non_null(strstr(src, "p, 1, 1, 0, 1;"));
    assert_non_null(strstr(src, "constexpr int kBN = 256;  // outputs per tile"));
    assert_non_null(strstr(src, "constexpr int kPipe = 4;  // pipeline stages: kPipe - 2 loads in flight"));
    assert_non_null(strstr(src, "constexpr int kBK = 64;"));
    /* a layer of tiles 128 outputs wide or fewer: six stages of 32 KB in
     * the four of 48 KB, with their own mbarriers and count */
    assert_non_null(strstr(src, "constexpr int kNarrowPipe = 6;"));
    assert_non_null(strstr(src, "constexpr int kRing = kSmall ? kNarrowPipe : kPipe;"));
    /* the last layer's grouped epilogue also where the tile passes OUT */
    assert_non_null(strstr(src, "(c0 + kN <= OUT || is_ahead<Epilogue>::value)"));
    /* the hidden layers' epilogues a value each, stored 16 bytes at a time */
    assert_non_null(strstr(src, "hidden(at_act(params, kH1), kHChunks, [=](int r, int j, float acc) {"));
    assert_non_null(strstr(src, "put_act16(epilogue.out + tile_act("));
    /* both operands staged by bulk copies from their tiled copies */
    assert_non_null(strstr(src, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"));
    assert_non_null(strstr(src, "constexpr int k_w2g = "));
    assert_non_null(strstr(src, "v = pack_tiles<kHidden, kHidden, 128>(i - k_w2g,"));
    assert_null(strstr(src, "load_b<kBStride>"));
    /* chunks of 16384 samples on wgmma (their activations within 256 MB),
     * 2048 on mma.sync; at 2048 on both, wgmma's h1, h2 (2048 x 2048 x 2
     * bytes each), the state (2048 x 256 x 4), its 16-bit copy (2048 x
     * 256 x 2): 20 MB of scratch in place of 37 */
    assert_non_null(strstr(src, "constexpr int kScratchRows = 16384;"));
    assert_non_null(strstr(flowgen_kernel_source(a), "constexpr int kScratchRows = 2048;"));
    flowgen_kernel *k2048 = plan_of(&spec, "only=tiled:gemm,gemm.batch_rows=2048");
    assert_true(flowgen_kernel_variant(k2048, 0)->params_bytes < flowgen_kernel_variant(a, 0)->params_bytes);
    flowgen_kernel_free(k2048);
    assert_null(strstr(flowgen_kernel_source(a), "wgmma.mma_async"));
    assert_non_null(strstr(flowgen_kernel_source(a), "constexpr int kBN = 128;  // outputs per tile"));
    flowgen_kernel_free(a);
    flowgen_kernel_free(k);
  }
  flowgen_spec bf16 = spec_of(256, 2048, FLOWGEN_PRECISION_BF16, 90, true);
  flowgen_kernel *k = plan_of(&bf16, "only=tiled:gemm,gemm.rows=64");
  assert_int_equal(flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1)->rows_per_block, 64);
  assert_non_null(strstr(flowgen_kernel_source(k), "product<2048, 2048, 2>("));
  flowgen_kernel_free(k);
  /* wgmma's 64-row tiles count 27/16 of their rows: at D=157, H=2150
   * (a chunk of 15360 samples) the hidden layer keeps 128-row tiles, 36
   * rows a block against 34 by the bare count (then 64-row tiles ran at
   * 266 TFLOP/s where H=2048's ran at 450) */
  flowgen_spec odd = spec_of(157, 2150, FLOWGEN_PRECISION_BF16, 90, true);
  k = plan_of(&odd, NULL);
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kScratchRows = 15360;"));
  assert_non_null(strstr(flowgen_kernel_source(k), "product<2150, 2150, 4>("));
  flowgen_kernel_free(k);
  /* so do fp32's (tf32x3, tiles at most 128 outputs wide): at D=469,
   * H=3111 (a chunk of 5120) the last layer keeps 128-row tiles, 8 rows
   * a block against 6 by the bare count (at B=4096 the kernel's 64-row
   * tiles of the hidden layer ran 1.6x slower) */
  flowgen_spec odd32 = spec_of(469, 3111, FLOWGEN_PRECISION_FP32, 90, true);
  k = plan_of(&odd32, NULL);
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kScratchRows = 5120;"));
  assert_non_null(strstr(flowgen_kernel_source(k), "product<3111, 469, 4>("));
  flowgen_kernel_free(k);
  /* gemm_b1024 before gemm (small batches, the smallest tiles' inputs split
   * where they leave SMs idle, up to 32 parts, their partial sums after the
   * activations in the scratch area: 132 SMs' slots of 64 x 128 and a count
   * each, and 32 floats to align them); gemm's products split nothing;
   * gemm.split=1: no gemm_b1024, no partial sums */
  expect_split_room(&bf16, "gemm_b1024 9-1024 gemm 1025-", "grid_b8 2-8 gemm 9-", 4 * (32 + 132 * (64 * 128 + 1)));
  flowgen_kernel *split = plan_of(&bf16, NULL);
  const char *split_src = flowgen_kernel_source(split);
  assert_non_null(strstr(split_src, "constexpr int kSplitMax = 32;"));
  assert_non_null(strstr(split_src, "finish_split<OUT, kN>(parts, tile, part, split,"));
  assert_non_null(strstr(split_src, "product<2048, 2048, 4>(at_act(params, kH1), kHStride, w2, rows, smem, at(params, kSplitSums),"));
  assert_non_null(strstr(split_src, "product<2048, 2048, 4>(at_act(params, kH1), kHStride, w2, rows, smem, nullptr,"));
  assert_non_null(strstr(split_src, "layer<IN, OUT, MT, kN>(in, in_stride, w, rows, smem, parts, epilogue, split);"));
  assert_non_null(strstr(split_src, "layer<IN, OUT, MT, kN>(in, in_stride, w, rows, smem, parts, epilogue, 1);"));
  flowgen_kernel_free(split);
  /* at H=512 in bf16 gemm_b1024 to 1024, then mma16 to 2112 (where
   * gemm.split=1 leaves no gemm_b1024, the tiled split and mma16 before
   * gemm); in tf32 gemm_b1024 to 4096 and no mma16 */
  flowgen_spec narrow = spec_of(256, 512, FLOWGEN_PRECISION_BF16, 90, true);
  expect_split_room(&narrow, "gemm_b1024 65-1024 mma16 1025-2112 gemm 2113-", "tiled8c8 65-112 mma16 113-2112 gemm 2113-",
                    4 * (32 + 132 * (64 * 128 + 1)));
  flowgen_spec narrow32 = spec_of(256, 512, FLOWGEN_PRECISION_TF32, 90, true);
  expect_split_room(&narrow32, "gemm_b1024 65-4096 gemm 4097-", "grid_b64 9-64 gemm 65-", 4 * (32 + 132 * (64 * 128 + 1)));
  /* gemm.batch_rows: the samples a chunk (the scratch area holds their
   * state and activations: at D=32, H=512 in bf16 h1 and h2 of 512 and
   * layer 1's input of 64 in bf16, the state of 32 in fp32, 576 floats a
   * sample) */
  flowgen_spec rows = spec_of(32, 512, FLOWGEN_PRECISION_BF16, 90, true);
  flowgen_kernel *r1 = plan_of(&rows, "gemm.batch_rows=1024"), *r2 = plan_of(&rows, "gemm.batch_rows=2048");
  assert_non_null(strstr(flowgen_kernel_source(r2), "constexpr int kScratchRows = 2048;"));
  assert_null(strstr(flowgen_kernel_source(r1), "constexpr int kScratchRows = 2048;"));
  assert_int_equal(flowgen_kernel_variant(r2, 0)->params_bytes - flowgen_kernel_variant(r1, 0)->params_bytes,
                   4 * 1024 * 576);
  flowgen_kernel_free(r1);
  flowgen_kernel_free(r2);
  /* the default chunk: on wgmma doubled while its state and activations
   * take 256 MB at most (D=1024, H=4096: 22528 bytes a sample in bf16,
   * 40960 in tf32 and fp32), up to 16384; mma.sync 2^22 / H */
  static const struct {
    flowgen_precision precision;
    const char *rows;
  } chunks[] = {{FLOWGEN_PRECISION_BF16, "constexpr int kScratchRows = 8192;"},
                {FLOWGEN_PRECISION_TF32, "constexpr int kScratchRows = 4096;"},
                {FLOWGEN_PRECISION_FP32, "constexpr int kScratchRows = 4096;"}};
  for (size_t i = 0; i < COUNT(chunks); ++i) {
    flowgen_spec wide = spec_of(1024, 4096, chunks[i].precision, 90, true);
    flowgen_kernel *c = plan_of(&wide, NULL);
    assert_non_null(strstr(flowgen_kernel_source(c), chunks[i].rows));
    flowgen_kernel_free(c);
  }
  expect_refused(&rows, "gemm.batch_rows=3000",
                 "tune: gemm.batch_rows=3000 is not one of 1024, 2048, 4096, 8192, 16384, 32768");
  /* tf32: k8 on 32 inputs a chunk, the weights K-major (no transpose),
   * from batch 9 as bf16 (16 MB of weights and more) */
  flowgen_spec tf32 = spec_of(256, 2048, FLOWGEN_PRECISION_TF32, 90, true);
  k = plan_of(&tf32, NULL);
  char *chain = chain_of(k);
  assert_non_null(strstr(chain, "grid_b8 2-8 gemm_b1024 9-1024 gemm 1025-"));
  free(chain);
  const char *src = flowgen_kernel_source(k);
  assert_non_null(strstr(src, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "));
  assert_non_null(strstr(src, "p, 1, 1;"));
  assert_non_null(strstr(src, "constexpr int kBK = 32;"));
  assert_non_null(strstr(src, "using ActT = float;"));
  assert_non_null(strstr(src, "asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(in < IN && out < OUT ? get(in, out) : 0.0f));"));
  flowgen_kernel_free(k);
  expect_refused(&tf32, "only=tiled:gemm,gemm.chunk=64",
                 "tune: gemm.chunk=64 on wgmma (tf32 on sm_90a): its stages are the arrays' blocks of 32 inputs");
  /* fp32 as tf32x3: the weights' high and low parts a block, tiles of 128
   * outputs at most, three products a k-step, each chunk's into its own
   * sums */
  flowgen_spec fp32 = spec_of(256, 2048, FLOWGEN_PRECISION_FP32, 90, true);
  k = plan_of(&fp32, NULL);
  chain = chain_of(k);
  assert_non_null(strstr(chain, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-"));
  free(chain);
  src = flowgen_kernel_source(k);
  assert_non_null(strstr(src, "constexpr int kBN = 128;  // outputs per tile"));
  assert_non_null(strstr(src, "constexpr int kParts = 2;"));
  assert_non_null(strstr(src, "using ActT = float;"));
  assert_non_null(strstr(src, "product3(*reinterpret_cast<float(*)[kOpN / 2]>(&acc[o * kOpN / 2])"));
  assert_non_null(strstr(src, "for (int i = 0; i < kWN / 2; ++i) sum[i] += acc[i];"));
  assert_non_null(strstr(src, "v = pack_tiles<kHidden, kHidden, 128>(i - k_w2g,"));
  assert_non_null(strstr(src, "return low ? v - __uint_as_float(r) : __uint_as_float(r);"));
  /* (tf32x3's stages hold two parts of 128 outputs: no narrow ring) */
  assert_null(strstr(src, "kNarrowPipe"));
  flowgen_kernel_free(k);
  /* gemm.narrow_stages: tf32's stages of 32 inputs hold six of 128
   * outputs too; 4 (the others' count) is the others' ring, the same
   * source as without the ring's code; more than fit is refused */
  k = plan_of(&tf32, NULL);
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kNarrowPipe = 6;"));
  flowgen_kernel_free(k);
  k = plan_of(&tf32, "gemm.narrow_stages=5");
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kNarrowPipe = 5;"));
  flowgen_kernel_free(k);
  k = plan_of(&tf32, "gemm.narrow_stages=4");
  assert_null(strstr(flowgen_kernel_source(k), "kNarrowPipe"));
  assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kRing = kPipe;"));
  flowgen_kernel_free(k);
  expect_refused(&tf32, "gemm.narrow_stages=7", "tune: gemm.narrow_stages=7: 6 fit");
  expect_refused(&tf32, "gemm.narrow_stages=3", "tune: gemm.narrow_stages=3 is not one of 4, 5, 6, 7, 8");
  /* mma.sync where wgmma does not serve */
  const flowgen_spec others[] = {spec_of(256, 2048, FLOWGEN_PRECISION_FP32, 90, false),
                                 spec_of(256, 2048, FLOWGEN_PRECISION_BF16, 90, false),
                                 spec_of(256, 2048, FLOWGEN_PRECISION_BF16, 80, false)};
  for (size_t i = 0; i < COUNT(others); ++i) {
    k = plan_of(&others[i], wg);
    assert_null(strstr(flowgen_kernel_source(k), "wgmma.mma_async"));
    assert_non_null(strstr(flowgen_kernel_source(k), "constexpr int kBN = 128;  // outputs per tile"));
    flowgen_kernel_free(k);
  }
  static const struct {
    const char *tune, *message;
  } refused[] = {
      {"only=tiled:gemm,gemm.rows=32", "tune: gemm.rows=32 on wgmma (sm_90a): 64 rows at least"},
      {"only=tiled:gemm,gemm.chunk=32",
       "tune: gemm.chunk=32 on wgmma (bf16 on sm_90a): its stages are the arrays' blocks of 64 inputs"},
      {"gemm.wgmma=1",
       "tune: unknown dial gemm.wgmma (known: gemm.batch_rows, gemm.chunk, gemm.narrow_stages, gemm.per_sm, gemm.rows, gemm.split, gemm.split_cost)"},
      {"gemm.n=256",
       "tune: unknown dial gemm.n (known: gemm.batch_rows, gemm.chunk, gemm.narrow_stages, gemm.per_sm, gemm.rows, gemm.split, gemm.split_cost)"},
  };
  for (size_t i = 0; i < COUNT(refused); ++i) expect_refused(&bf16, refused[i].tune, refused[i].message);
}

/* bf16 and fp16 on sm_90a: gemm on wgmma in place of the mma kernel at
 * H >= 1024, and where mma does not fit (tf32 too), from the batch after
 * the grids' (from 9 with 16 MB of weights or more, fp32 bytes); the
 * tiled kernel's split before it serves none of its own, only the
 * persistent grids' where their cooperative launch is refused (first, at
 * batch 0).  mma stays without `a` and on mma.sync (gemm.per_sm=2);
 * where it fits, at H = 512 in bf16 and fp16 mma16 keeps B=1025 to 2112
 * (none in tf32, whose gemm_b1024 goes to 4096), unless only= names it;
 * gemm=FROM leaves the split its batches. */
static void test_gemm_over_mma(void **state) {
  (void)state;
  static const char *const head = "grid_b1 0-1 grid_b8 2-8 ", *const fallback = "tiled8c8 0-0 grid_b1 1-1 grid_b8 2-8 ";
  static const struct {
    int dim, hidden;
    flowgen_precision precision;
    bool arch_specific;
    const char *tune, *chain;
    bool fallback; /* the split the grids' fallback alone */
  } cases[] = {
      {1024, 1024, FLOWGEN_PRECISION_BF16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {1024, 1024, FLOWGEN_PRECISION_FP16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {256, 1024, FLOWGEN_PRECISION_BF16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {32, 1024, FLOWGEN_PRECISION_FP16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {256, 2048, FLOWGEN_PRECISION_BF16, true, NULL, "gemm_b1024 9-1024 gemm 1025-", true},
      {1024, 4096, FLOWGEN_PRECISION_FP16, true, NULL, "gemm_b1024 9-1024 gemm 1025-", true},
      {256, 2048, FLOWGEN_PRECISION_TF32, true, NULL, "gemm_b1024 9-1024 gemm 1025-", true},
      {256, 2048, FLOWGEN_PRECISION_BF16, true, "gemm.per_sm=2",
       "grid_b64 9-64 tiled8c8 65-112 gemm 113-", false},
      {1024, 512, FLOWGEN_PRECISION_BF16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {256, 512, FLOWGEN_PRECISION_BF16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 mma16 1025-2112 gemm 2113-", true},
      {32, 512, FLOWGEN_PRECISION_FP16, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 mma16 1025-2112 gemm 2113-", true},
      {66, 636, FLOWGEN_PRECISION_TF32, true, NULL, "grid_b64 9-64 gemm_b1024 65-4096 gemm 4097-", true},
      {66, 636, FLOWGEN_PRECISION_TF32, true, "only=grid:tiled8c8:mma16:gemm",
       "grid_b64 9-64 tiled8c8 65-112 mma16 113-2112 gemm 2113-", false},
      {1024, 1024, FLOWGEN_PRECISION_BF16, false, NULL, "grid_b64 9-64 tiled8c8 65-112 mma 113-", false},
      {1024, 1024, FLOWGEN_PRECISION_BF16, true, "gemm.per_sm=2", "grid_b64 9-64 tiled8c8 65-112 mma 113-", false},
      {1024, 1024, FLOWGEN_PRECISION_TF32, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {32, 1024, FLOWGEN_PRECISION_TF32, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {1024, 1024, FLOWGEN_PRECISION_TF32, false, NULL, "grid_b64 9-64 tiled8c8 65-112 mma 113-", false},
      {1024, 512, FLOWGEN_PRECISION_TF32, true, NULL, "grid_b64 9-64 gemm_b1024 65-1024 gemm 1025-", true},
      {256, 1024, FLOWGEN_PRECISION_BF16, true, "gemm=1000:", "grid_b64 9-64 tiled8c8 65-999 gemm 1000-", false},
      {256, 2048, FLOWGEN_PRECISION_BF16, true, "gemm=100:", "tiled8c8 9-99 gemm 100-", false},
  };
  for (size_t i = 0; i < COUNT(cases); ++i) {
    flowgen_spec spec = spec_of(cases[i].dim, cases[i].hidden, cases[i].precision, 90, cases[i].arch_specific);
    char want[256];
    snprintf(want, sizeof want, "%s%s", cases[i].fallback ? fallback : head, cases[i].chain);
    expect_chain(&spec, cases[i].tune, want);
  }
  /* only= places it in the mma chain too: after one batch of mma (the
   * fallback) at H >= 1024, after mma's first wave below */
  flowgen_spec spec = spec_of(1024, 1024, FLOWGEN_PRECISION_BF16, 90, true);
  expect_chain(&spec, "only=mma:gemm", "mma 0-1 gemm 2-");
  spec = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, true);
  expect_chain(&spec, "only=mma:gemm", "mma 0-8448 gemm 8449-");
  spec = spec_of(1024, 1024, FLOWGEN_PRECISION_BF16, 90, true);
  flowgen_kernel *k = plan_of(&spec, NULL);
  const int n = flowgen_kernel_variant_count(k);
  const flowgen_variant *g = flowgen_kernel_variant(k, n - 1);
  assert_string_equal(g->strategy, "gemm");
  assert_true(g->cooperative);
  assert_string_equal(flowgen_kernel_variant(k, g->fallback)->strategy, "tiled8c8");
  assert_non_null(strstr(flowgen_kernel_source(k), "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "));
  flowgen_kernel_free(k);
}

/* Resident weights: each grid variant keeps its blocks' first tiles of the
 * layers that fit in shared memory (D=256, H=2048: all three at B <= 8,
 * layer 1 alone at 64 samples, whose tiles are wider), within what a block
 * may take; the retired dial grid.resident is refused. */
static void test_grid_resident(void **state) {
  (void)state;
  flowgen_spec spec = spec_of(256, 2048, FLOWGEN_PRECISION_FP32, 90, false);
  flowgen_kernel *k = plan_of(&spec, "only=grid:tiled8:tiled");
  static const struct {
    const char *strategy, *kept;
    size_t min_shared; /* more than the staging alone: the copies */
  } kept[] = {{"grid_b1", "layers 1, 2, 3 in", 150000}, {"grid_b8", "layers 1, 2, 3 in", 150000},
              {"grid_b64", "layer 1 in", 80000}};
  for (size_t i = 0; i < COUNT(kept); ++i) {
    const flowgen_variant *v = NULL;
    for (int j = 0; j < flowgen_kernel_variant_count(k); ++j)
      if (strcmp(flowgen_kernel_variant(k, j)->strategy, kept[i].strategy) == 0) v = flowgen_kernel_variant(k, j);
    assert_non_null(v);
    if (v->shared_bytes < kept[i].min_shared) fail_msg("%s: %zu bytes of shared memory", kept[i].strategy, v->shared_bytes);
    assert_true(v->shared_bytes <= 227 * 1024);
  }
  const char *src = flowgen_kernel_source(k);
  for (size_t i = 0; i < COUNT(kept); ++i) {
    char line[96];
    snprintf(line, sizeof line, "strategy \"%s\"", kept[i].strategy);
    const char *at = strstr(src, line);
    assert_non_null(at);
    const char *weights = strstr(at, "// weights of ");
    assert_non_null(weights);
    if (strncmp(weights + strlen("// weights of "), kept[i].kept, strlen(kept[i].kept)) != 0)
      fail_msg("%s keeps \"%.40s\", not %s", kept[i].strategy, weights, kept[i].kept);
  }
  assert_non_null(strstr(src, "fill_cache<2048, 2048, 16>("));
  flowgen_kernel_free(k);
  expect_refused(&spec, "grid.resident=1", "grid.resident");
}

/* Occurrences of needle in the source of variant `strategy` (from its
 * header to the next variant's). */
static int count_in_variant(const flowgen_kernel *k, const char *strategy, const char *needle) {
  char head[96];
  snprintf(head, sizeof head, "// ---- strategy \"%s\"", strategy);
  const char *at = strstr(flowgen_kernel_source(k), head);
  assert_non_null(at);
  const char *end = strstr(at + 1, "// ---- strategy \"");
  int n = 0;
  for (at = strstr(at, needle); at && (!end || at < end); at = strstr(at + 1, needle)) ++n;
  return n;
}

/* The grid variants hand the activations on in words, one grid barrier a
 * launch (its end) and none between the layers; guidance keeps a barrier
 * after each layer and no words (its blend reads other blocks' rows). */
static void test_grid_words_not_barriers(void **state) {
  (void)state;
  flowgen_spec spec = spec_of(256, 2048, FLOWGEN_PRECISION_FP32, 90, false);
  flowgen_kernel *k = plan_of(&spec, "only=grid:tiled8:tiled");
  assert_int_equal(count_in_variant(k, "grid_b8", "grid_sync(arrived);"), 1);
  assert_true(count_in_variant(k, "grid_b8", "put_ll(") >= 4);
  flowgen_kernel_free(k);
  flowgen_spec guided = spec_of(64, 2048, FLOWGEN_PRECISION_FP32, 90, false);
  assert_int_equal(flowgen_spec_set(&guided, "cond", "10", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&guided, "guidance", "1", NULL), FLOWGEN_OK);
  k = plan_of(&guided, "only=grid:tiled8:tiled");
  /* three layers and the blend, Euler; the barrier after x's copy */
  assert_int_equal(count_in_variant(k, "grid_b8", "grid_sync(arrived);"), 5);
  assert_int_equal(count_in_variant(k, "grid_b8", "put_ll("), 0);
  flowgen_kernel_free(k);
}

/* The grid variants' words and gemm's arrays never share the scratch
 * area (a word waiting for an epoch would take a pair of gemm's 16-bit
 * activations that matches it): gemm's start after the words, on a
 * 128-byte line (D=256, H=2048, Euler: 64 rows of h1 and h2, H words
 * each, and of the state, D words); the grids clear their words where
 * the epochs would wrap. */
static void test_grid_words_apart_from_gemm(void **state) {
  (void)state;
  flowgen_spec spec = spec_of(256, 2048, FLOWGEN_PRECISION_BF16, 90, true);
  flowgen_kernel *k = plan_of(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  const char *grid = strstr(src, "strategy \"grid_b1\""), *gemm = strstr(src, "strategy \"gemm\"");
  assert_non_null(grid);
  assert_non_null(gemm);
  const char *at = strstr(grid, "constexpr int kScratchData = ");
  assert_true(at && at < gemm);
  assert_int_equal(atol(at + strlen("constexpr int kScratchData = ")), 4);
  at = strstr(gemm, "constexpr int kScratchData = ");
  assert_non_null(at);
  const long words = 64L * (2 * 2 * 2048 + 2 * 256); /* floats */
  assert_int_equal(atol(at + strlen("constexpr int kScratchData = ")), 4 + (words + 31) / 32 * 32);
  assert_non_null(strstr(grid, "if (ep >= 0x80000000u) {"));
  flowgen_kernel_free(k);
}

/* Every mistake is refused, naming what is wrong: an unknown (or retired)
 * key, dial or
 * strategy, a value out of its set, a malformed entry, a range that leaves
 * batches to no variant, a plan of persistent grids alone. */
static void test_overrides_refused(void **state) {
  (void)state;
  static const struct {
    int dim, hidden, arch;
    const char *tune, *message;
  } cases[] = {
      {64, 256, 90, "bogus=1", "tune: unknown key bogus"},
      /* retired: modes measured slower, and drop= (stages left out to
       * time the rest; its kernels kept layer 3 alive with a test on the
       * data) */
      {64, 256, 90, "drop=exchange", "tune: unknown key drop"},
      {64, 256, 90, "l2w=0", "tune: unknown key l2w"},
      {64, 256, 90, "wsc=4", "tune: unknown key wsc"},
      {64, 256, 90, "rcl=2", "tune: unknown key rcl"},
      {64, 256, 90, "mma.bogus=1", "unknown dial mma.bogus (known: mma.chunk, mma.per_sm, mma.rows, mma.stages)"},
      {64, 256, 90, "grid.rows=1", "unknown dial grid.rows (grid has none)"},
      {64, 256, 90, "nope.rows=1", "unknown dial nope.rows (no strategy nope)"},
      {64, 256, 90, "mma.rows=33", "mma.rows=33 is not one of 16, 32, 64, 128"},
      {64, 256, 90, "mma.rows=x", "mma.rows=x is not a whole number"},
      {64, 256, 90, "wgstream.blocks=4", "wgstream.blocks=4 is not one of 1, 2"},
      {64, 256, 90, "only=nope", "only=nope: 'nope' is no strategy"},
      {64, 256, 90, "skip=rmma3:", "skip=rmma3:: '' is no strategy"},
      {64, 256, 90, "rmma", "'rmma' is not key=value"},
      {64, 256, 90, "skip=rmma3,skip=cluster", "skip given twice"},
      {64, 256, 90, "skip=a b", "is not key=value"},
      {64, 256, 90, "rmma3_r16=5", "rmma3_r16=5 is not FROM:TO"},
      {64, 256, 90, "rmma3_r16=300:200", "300 is past 200"},
      {64, 256, 90, "cluster4_r4=500:600", "falls inside rmma3_r16's batches (241 to 1920)"},
      {64, 256, 90, "cluster4_r1=5:", "leaves batches 1 to 4 to no variant"},
      {64, 256, 90, "mma=:100000", "leaves the batches past 100000 to no variant"},
      {64, 256, 90, "only=grid", "grid_b64 serves 64 samples at most"},
      {64, 256, 90, "only=wgmma", "no strategy left"},
      {128, 512, 90, "only=gemm", "gemm is a persistent grid, and no variant"},
      {128, 512, 90, "gemm.per_sm=2,gemm.rows=128", "gemm.rows=128 with gemm.per_sm=2"},
      {64, 256, 75, "tiled.stages=3", "tiled.stages=3: more than 2 from sm_80"},
  };
  for (size_t i = 0; i < COUNT(cases); ++i) {
    flowgen_spec spec = spec_of(cases[i].dim, cases[i].hidden, FLOWGEN_PRECISION_FP32, cases[i].arch, false);
    expect_refused(&spec, cases[i].tune, cases[i].message);
  }
  /* empty entries are skipped; a strategy the plan does not have moves
   * nothing (one override serves many shapes, as skip=) */
  flowgen_spec spec = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  expect_chain(&spec, ",,only=tiled8:tiled,", "tiled8 0-1056 tiled 1057-");
  expect_chain(&spec, "only=tiled8:tiled,rmma=1:100", "tiled8 0-1056 tiled 1057-");
}

/* The sampling kernels read cond_bias, the conditioning kernel's output,
 * by plain loads only: they start beside that kernel (programmatic
 * dependents) and wait with griddepcontrol.wait, and ptxas moves
 * non-coherent loads (__ldg, a const __restrict__ pointer's) above the
 * wait (lib.cond_load).  Every strategy that serves a conditional model,
 * guided or not. */
static void test_cond_bias_plain_loads(void **state) {
  (void)state;
  static const struct {
    int dim, hidden;
    flowgen_precision precision;
    const char *tune;
    bool unguided; /* serves no guided model */
  } cases[] = {
      {16, 64, FLOWGEN_PRECISION_FP32, "only=cluster4_r4", false},
      {64, 256, FLOWGEN_PRECISION_FP32, "only=tiled8", false},
      {64, 256, FLOWGEN_PRECISION_FP32, "only=wgstream3", false},
      {64, 256, FLOWGEN_PRECISION_TF32, "only=wgstream", true},
      {64, 256, FLOWGEN_PRECISION_BF16, "only=grid:tiled8:tiled", false},
      {64, 2048, FLOWGEN_PRECISION_BF16, "only=tiled:gemm", false},
      {64, 2048, FLOWGEN_PRECISION_TF32, "only=tiled:gemm", false},
      {64, 256, FLOWGEN_PRECISION_BF16, NULL, false},
  };
  for (size_t c = 0; c < COUNT(cases); ++c)
    for (int guided = 0; guided <= !cases[c].unguided; ++guided) {
      flowgen_spec spec = spec_of(cases[c].dim, cases[c].hidden, cases[c].precision, 90, true);
      spec.cond = 24;
      spec.guidance = guided;
      flowgen_kernel *k = plan_of(&spec, cases[c].tune);
      const char *src = flowgen_kernel_source(k);
      char what[96];
      snprintf(what, sizeof what, "%s %s%s", flowgen_precision_name(spec.precision),
               cases[c].tune ? cases[c].tune : "(plan)", guided ? " guided" : "");
      if (!strstr(src, "const float* cond_bias, float guidance)")) fail_msg("%s: no plain cond_bias parameter", what);
      if (strstr(src, "const float* __restrict__ cond_bias")) fail_msg("%s: cond_bias __restrict__", what);
      /* every __ldg's argument (to its closing parenthesis) */
      for (const char *at = strstr(src, "__ldg("); at; at = strstr(at + 1, "__ldg(")) {
        const char *e = at + strlen("__ldg(");
        for (int depth = 1; *e && depth; ++e) depth += (*e == '(') - (*e == ')');
        char arg[256];
        snprintf(arg, sizeof arg, "%.*s", (int)(e - at), at);
        if (strstr(arg, "cond_bias") || strstr(arg, "cb[") || strstr(arg, "lo + at") || strstr(arg, "hi + at") ||
            strstr(arg, "? lo : hi"))
          fail_msg("%s: cond_bias read by __ldg: %s", what, arg);
      }
      flowgen_kernel_free(k);
    }
}

/* No template keeps a hook for timing its kernels' parts: what a stage
 * left out (v.drop) or a test on the data that keeps dead code alive
 * (acc[0] == 12345.0f) is for a benchmark's copy, not the shipping one. */
static void test_no_timing_hooks(void **state) {
  (void)state;
  static const char *const hooks[] = {"12345", "v.drop", "keep."};
  char dir[FG_TEST_PATH_SIZE], path[FG_TEST_PATH_SIZE];
  fg_test_path_join(dir, fg_test_source_dir(), "templates");
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    fg_test_path_join(path, dir, e->d_name);
    char *data = fg_test_read_file(path, NULL);
    assert_non_null(data);
    for (size_t i = 0; i < COUNT(hooks); ++i)
      for (const char *at = strstr(data, hooks[i]); at; at = strstr(at + 1, hooks[i]))
        /* "keep." ends a sentence in comments: a hook is keep.NAME */
        if (strcmp(hooks[i], "keep.") != 0 || (at[5] >= 'a' && at[5] <= 'z'))
          fail_msg("templates/%s: %s", e->d_name, hooks[i]);
    free(data);
    ++files;
  }
  closedir(d);
  assert_true(files > 10);
}

/* ---- the device (templates/device.lua) -------------------------------------- */

/* A template folder whose planner sees spec.device = `device` (a Lua table
 * constructor): the C side does not pass one yet. */
static char *templates_with_device(const char *device) {
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  fg_test_write_template(dir, "file.cut", "| -- the plan only (tests/test_plan.c)\n");
  char path[FG_TEST_PATH_SIZE];
  fg_test_path_join(path, dir, "plan.lua");
  char *plan = fg_test_read_file(path, NULL);
  assert_non_null(plan);
  char *entry = strstr(plan, "\nreturn function(spec)");
  assert_non_null(entry);  /* the planner's entry, last in the file */
  text t = {0};
  append(&t, "%.*s\nlocal planner = function(spec)%s\nreturn function(spec)\n  spec.device = %s\n"
             "  return planner(spec)\nend\n", (int)(entry - plan), plan, entry + strlen("\nreturn function(spec)"),
         device);
  fg_test_write_file(path, t.data, t.len);
  free(t.data);
  free(plan);
  return dir;
}

/* spec's plan on `device`: exactly `chain`, or refused with `message`. */
static void expect_device(const flowgen_spec *spec, const char *device, const char *chain, const char *message) {
  char *dir = templates_with_device(device);
  flowgen_options opts = {.template_dir = dir};
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status st = flowgen_generate(spec, &opts, &k, &err);
  if (message) {
    if (st != FLOWGEN_UNSUPPORTED || !strstr(err.message, message))
      fail_msg("device %s: %s \"%s\", not UNSUPPORTED \"%s\"", device, flowgen_status_name(st), err.message, message);
  } else {
    if (st != FLOWGEN_OK) fail_msg("device %s: %s", device, err.message);
    char *got = chain_of(k);
    if (strcmp(got, chain) != 0) fail_msg("device %s:\n  got  %s\n  want %s", device, got, chain);
    free(got);
  }
  flowgen_kernel_free(k);
  fg_test_rmtree(dir);
  free(dir);
}

/* The planner reads the GPU's figures from spec.device: an H200's where it
 * says nothing (the golden table), fewer SMs or clusters at once move the
 * batch ranges, no clusters leave out the strategies that need them, less
 * shared memory shrinks the tiles; bad figures are refused. */
static void test_device(void **state) {
  (void)state;
  flowgen_spec fp32 = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  expect_device(&fp32, "{}", "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
                             "cluster4_r6 121-180 cluster4_r8 181-240 rmma3_r16 241-1920 tiled 1921-8448 mma 8449-",
                NULL);
  expect_device(&fp32, "{sms = 66, clusters_at_once = {[4] = 15}}",
                "cluster4_r1 0-15 cluster4_r2 16-30 cluster4_r3 31-45 cluster4_r4 46-60 cluster4_r6 61-90 "
                "cluster4_r8 91-120 rmma3_r16 121-960 tiled 961-4224 mma 4225-", NULL);
  expect_device(&fp32, "{clusters = false}", "tiled8 0-1056 tiled 1057-8448 mma 8449-", NULL);
  flowgen_spec bf16 = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, false);
  expect_device(&bf16, "{sms = 66}", "cluster4_r1 0-15 rmma 16-1056 mma 1057-", NULL);
  flowgen_spec large = spec_of(1024, 4096, FLOWGEN_PRECISION_FP32, 90, false);
  char *dir = templates_with_device("{shared_per_block = 64 * 1024}");
  flowgen_options opts = {.template_dir = dir};
  flowgen_kernel *k = NULL;
  assert_int_equal(flowgen_generate(&large, &opts, &k, NULL), FLOWGEN_OK);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i)
    assert_true(flowgen_kernel_variant(k, i)->shared_bytes <= 64 * 1024);
  flowgen_kernel_free(k);
  fg_test_rmtree(dir);
  free(dir);
  expect_device(&fp32, "{sms = 0}", NULL, "device: sms must be a whole number from 1 to 65536, not 0");
  expect_device(&fp32, "{sms = 1.5}", NULL, "device: sms must be a whole number");
  expect_device(&fp32, "{clusters = 1}", NULL, "device: clusters must be true or false");
  expect_device(&fp32, "{clusters_at_once = {[3] = 10}}", NULL, "clusters of 2, 4, 8 and 16 blocks, not 3");
  expect_device(&fp32, "7", NULL, "device: expected a table");
}

/* ---- the model family (lib.family, each module's serves) ------------------- */

static bool specialized(const char *strategy) {
  static const char *const names[] = {"cluster", "rmma", "wgmma", "wgstream"};
  for (size_t i = 0; i < COUNT(names); ++i)
    if (strncmp(strategy, names[i], strlen(names[i])) == 0) return true;
  return false;
}

/* The plan serves every batch: from 0, each variant where the one before
 * ends, the last with no end. */
static void expect_every_batch(const flowgen_kernel *k, const char *what) {
  int n = flowgen_kernel_variant_count(k);
  assert_true(n > 0);
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    long long from = i == 0 ? 0 : (long long)flowgen_kernel_variant(k, i - 1)->max_batch + 1;
    if ((long long)v->min_batch != from || (i + 1 < n) != (v->max_batch >= 0))
      fail_msg("%s: %s serves %lld-%lld", what, v->strategy, (long long)v->min_batch, (long long)v->max_batch);
  }
}

/* The specialized strategies (cluster, rmma, rmma3, wgmma, wgstream) serve
 * the seed's depth, at any activation, time and input order: such a
 * member's plan is the seed's where the time is raw.  The cluster kernel
 * and wgstream serve conditioning too, the cluster kernel and (fp32)
 * wgstream3 guidance too; another depth leaves them all out, and the
 * generic strategies (tiled, mma, grid, gemm) serve every batch. */
static void test_family_chains(void **state) {
  (void)state;
  /* the plans only, as build_table */
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  fg_test_write_template(dir, "file.cut", "| -- the plan only (tests/test_plan.c)\n");
  flowgen_options opts = {.template_dir = dir};
  static const member same[] = {
      {"gelu_tanh tcx", 0, 0, FLOWGEN_ACT_GELU_TANH, 0, "tcx", false},
      {"relu ctx", 0, 3, FLOWGEN_ACT_RELU, 0, "ctx", false},
  };
  static const member generic[] = {
      {"c8", 8, 0, FLOWGEN_ACT_SILU, 0, "", false},   {"l2", 0, 2, FLOWGEN_ACT_SILU, 0, "", false},
      {"l6", 0, 6, FLOWGEN_ACT_TANH, 0, "", false},   {"sin16", 0, 0, FLOWGEN_ACT_SILU, 16, "", false},
      {"c8 cfg", 8, 0, FLOWGEN_ACT_SILU, 0, "", true}, {"c8 l2 cfg", 8, 2, FLOWGEN_ACT_GELU, 0, "xct", true},
  };
  /* the specialized strategies that may serve each of generic[] */
  static const char *const may[][4] = {
      {"cluster", "wgstream"}, {0}, {0}, {"cluster", "rmma", "wgmma", "wgstream"}, {"cluster", "wgstream3"}, {0},
  };
  /* the shapes of every kind of chain: small weights, the cluster split's, large */
  static const int shapes3[][2] = {{17, 200}, {64, 256}, {128, 512}};
  for (size_t s = 0; s < COUNT(shapes3); ++s)
    for (size_t p = 0; p < COUNT(precisions); ++p)
      for (size_t a = 1; a < COUNT(member_archs); ++a)
        for (size_t v = 0; v < COUNT(solvers); ++v) {
          flowgen_spec seed = fg_test_spec(shapes3[s][0], shapes3[s][1], 32, member_archs[a]);
          seed.arch_specific = member_archs[a] == 90;
          seed.precision = precisions[p];
          seed.solver = solvers[v];
          flowgen_kernel *k = NULL;
          assert_int_equal(flowgen_generate(&seed, &opts, &k, NULL), FLOWGEN_OK);
          char *chain = chain_of(k);
          flowgen_kernel_free(k);
          for (size_t m = 0; m < COUNT(same) + COUNT(generic); ++m) {
            const member *mb = m < COUNT(same) ? &same[m] : &generic[m - COUNT(same)];
            flowgen_spec spec = member_spec(mb, seed.dim, seed.hidden, seed.arch);
            spec.arch_specific = seed.arch_specific;
            spec.precision = seed.precision;
            spec.solver = seed.solver;
            char what[160];
            snprintf(what, sizeof what, "d%d h%d %s %s sm_%d%s %s", spec.dim, spec.hidden,
                     flowgen_solver_name(spec.solver), flowgen_precision_name(spec.precision), spec.arch,
                     spec.arch_specific ? "a" : "", mb->tag);
            flowgen_error err = {FLOWGEN_OK, ""};
            if (flowgen_generate(&spec, &opts, &k, &err) != FLOWGEN_OK) fail_msg("%s: %s", what, err.message);
            expect_every_batch(k, what);
            if (m < COUNT(same)) {
              char *got = chain_of(k);
              if (strcmp(got, chain) != 0) fail_msg("%s:\n  got  %s\n  seed %s", what, got, chain);
              free(got);
            } else {
              for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
                const char *name = flowgen_kernel_variant(k, i)->strategy;
                bool ok = !specialized(name);
                for (const char *const *m2 = may[m - COUNT(same)]; !ok && *m2; ++m2)
                  ok = strncmp(name, *m2, strlen(*m2)) == 0;
                if (!ok) fail_msg("%s: %s serves it", what, name);
              }
            }
            flowgen_kernel_free(k);
          }
          free(chain);
        }
  fg_test_rmtree(dir);
  free(dir);
}

/* A member's plan by hand: with conditioning, the cluster kernel over
 * three waves (rmma3 serves no conditioning), then the seed's large
 * batches (wgstream3 on sm_90a); guidance: the cluster kernel up to 4
 * samples a cluster (two rows each through the hidden layers), its last
 * over three waves, then the generic kernels; only= a strategy that does
 * not serve the member is refused, naming why. */
static void test_family_plan(void **state) {
  (void)state;
  flowgen_spec fp32 = spec_of(64, 256, FLOWGEN_PRECISION_FP32, 90, false);
  fp32.cond = 10;
  expect_chain(&fp32, NULL,
               "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
               "cluster4_r6 121-180 cluster4_r8 181-720 tiled8 721-1056 tiled 1057-8448 mma 8449-");
  fp32.arch_specific = true;
  expect_chain(&fp32, NULL,
               "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-120 "
               "cluster4_r6 121-180 cluster4_r8 181-720 tiled8 721-1056 wgstream3 1057-");
  fp32.arch_specific = false;
  fp32.guidance = true;
  expect_chain(&fp32, NULL,
               "cluster4_r1 0-30 cluster4_r2 31-60 cluster4_r3 61-90 cluster4_r4 91-360 "
               "tiled8 361-1056 tiled 1057-4224 mma 4225-");
  /* blocks of half the samples on the matrix units */
  flowgen_kernel *k = plan_of(&fp32, NULL);
  const flowgen_variant *last = flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1);
  assert_string_equal(last->strategy, "mma");
  assert_int_equal(last->rows_per_block, 32);
  flowgen_kernel_free(k);
  flowgen_spec bf16 = spec_of(64, 256, FLOWGEN_PRECISION_BF16, 90, true);
  bf16.layers = 4;
  flowgen_options opts = {.tune = "only=cluster:rmma:wgmma"};
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_generate(&bf16, &opts, &k, &err), FLOWGEN_UNSUPPORTED);
  assert_null(k);
  assert_non_null(strstr(err.message, "no strategy left"));
  assert_non_null(strstr(err.message, "cluster: L = 3 only"));
  assert_non_null(strstr(err.message, "wgmma: L = 3 only"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_matches_golden),
      cmocka_unit_test(test_only_and_skip),
      cmocka_unit_test(test_ranges),
      cmocka_unit_test(test_dials),
      cmocka_unit_test(test_gemm_on_wgmma),
      cmocka_unit_test(test_gemm_over_mma),
      cmocka_unit_test(test_grid_resident),
      cmocka_unit_test(test_grid_words_apart_from_gemm),
      cmocka_unit_test(test_grid_words_not_barriers),
      cmocka_unit_test(test_overrides_refused),
      cmocka_unit_test(test_cond_bias_plain_loads),
      cmocka_unit_test(test_no_timing_hooks),
      cmocka_unit_test(test_device),
      cmocka_unit_test(test_family_chains),
      cmocka_unit_test(test_family_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
