/* The generated source through NVRTC (flowrt_compile; no GPU needed): a
 * sweep of shapes compiles for sm_80 and sm_90 without warnings, spills or
 * stack frames; compile time; the host launcher; compile errors. */
#include "support.h"

#include "flowrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- helpers ------------------------------------------------------------ */

/* Under valgrind one compile takes half a minute or more (NVRTC runs
 * instrumented too): a test that only varies what NVRTC is given keeps one
 * small case, since the code around NVRTC is the same for all. */
static bool quick(void) { return fg_test_under_valgrind(); }
#define QUICK_SPEC() fg_test_spec(3, 12, 5, 90)

static void skip_without_nvrtc(void) {
  if (flowrt_nvrtc_version() == 0) {
    print_message("# NVRTC is not loadable: skipped\n");
    skip();
  }
}

static bool arch_supported(int arch) {
  return flowrt_nvrtc_max_arch() >= arch;
}

static bool has_line_with(const char *log, const char *a, const char *b) {
  for (const char *line = log; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    char *copy = strndup(line, len);
    bool hit = strstr(copy, a) && (!b || strstr(copy, b));
    free(copy);
    if (hit) return true;
    line = nl ? nl + 1 : NULL;
  }
  return false;
}

static bool is_sampling_kernel(const flowgen_kernel *k, const char *name) {
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i)
    if (strcmp(flowgen_kernel_variant(k, i)->symbol, name) == 0) return true;
  return false;
}

/* Checks a verbose ptxas log: no warnings; every function reports
 * "0 bytes spill stores, 0 bytes spill loads"; sampling kernels have no
 * stack frame and fit their block in the register file; every variant's
 * kernels were compiled. */
static void check_log(const flowgen_kernel *k, const char *log, int arch,
                      const char *what) {
  /* "warning" in any case, anywhere. */
  for (const char *p = log; *p; ++p)
    if (strncasecmp(p, "warning", 7) == 0)
      fail_msg("%s: warning in the NVRTC log:\n%s", what, log);

  char function[256] = "";
  int spill_lines = 0, functions = 0;
  for (const char *line = log; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    char *text = strndup(line, len);
    const char *props = strstr(text, "Function properties for ");
    if (props) {
      snprintf(function, sizeof function, "%s",
               props + strlen("Function properties for "));
      ++functions;
    }
    if (strstr(text, "spill")) {
      int stack = -1, stores = -1, loads = -1;
      const char *at = strstr(text, "bytes stack frame");
      const char *num = at;
      while (num && num > text && (num[-1] == ' ' || (num[-1] >= '0' && num[-1] <= '9')))
        --num;
      if (!at || sscanf(num, "%d bytes stack frame, %d bytes spill stores, "
                             "%d bytes spill loads",
                        &stack, &stores, &loads) != 3)
        fail_msg("%s: cannot read the spill line \"%s\"", what, text);
      if (stores != 0 || loads != 0)
        fail_msg("%s: %s spills (%d bytes stores, %d bytes loads):\n%s", what,
                 function, stores, loads, log);
      if (is_sampling_kernel(k, function) && stack != 0)
        fail_msg("%s: sampling kernel %s has a %d-byte stack frame:\n%s",
                 what, function, stack, log);
      ++spill_lines;
    }
    free(text);
    line = nl ? nl + 1 : NULL;
  }
  assert_true(functions > 0);
  assert_int_equal(spill_lines, functions);

  char arch_name[32];  /* sm_90 builds for the arch-specific sm_90a */
  snprintf(arch_name, sizeof arch_name, "for 'sm_%d%s'", arch, arch == 90 ? "a" : "");
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    char entry[256];
    snprintf(entry, sizeof entry, "Compiling entry function '%s'", v->symbol);
    if (!has_line_with(log, entry, arch_name))
      fail_msg("%s: %s was not compiled for sm_%d:\n%s", what, v->symbol,
               arch, log);
    snprintf(entry, sizeof entry, "Compiling entry function '%s'",
             v->pack_symbol);
    if (!has_line_with(log, entry, arch_name))
      fail_msg("%s: %s was not compiled:\n%s", what, v->pack_symbol, log);
    /* Registers: the block must fit in 64K registers. */
    const char *at = strstr(log, v->symbol);
    const char *used = at ? strstr(at, "Used ") : NULL;
    int registers = 0;
    if (!used || sscanf(used, "Used %d registers", &registers) != 1)
      fail_msg("%s: no register count for %s", what, v->symbol);
    if (registers * v->block_threads > 65536)
      fail_msg("%s: %s uses %d registers x %d threads", what, v->symbol,
               registers, v->block_threads);
  }
}

/* Generates spec and compiles it to a cubin with verbose ptxas output;
 * checks the image and the log.  Returns the wall-clock seconds of the
 * compile. */
static double compile_clean_with(const flowgen_spec *spec, bool launcher, const char *tune) {
  flowgen_options opts = {.host_launcher = launcher, .tune = tune};
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  if (flowgen_generate(spec, &opts, &k, &err) != FLOWGEN_OK)
    fail_msg("generate: %s", err.message);
  char what[160], name[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(spec, name, sizeof name - 4);
  snprintf(what, sizeof what, "D=%d H=%d S=%d sm_%d%s", spec->dim,
           flowgen_spec_hidden(spec), spec->steps, spec->arch,
           launcher ? " (host launcher)" : "");
  strcat(name, ".cu");
  void *image = NULL;
  size_t size = 0;
  char *log = NULL;
  /* Some NVRTC builds reuse the result of an identical program compiled
   * earlier in the process, without a ptxas report: a nonce makes each
   * program new. */
  static int nonce;
  size_t n = flowgen_kernel_source_size(k);
  char *source = malloc(n + 64);
  assert_non_null(source);
  memcpy(source, flowgen_kernel_source(k), n);
  n += (size_t)snprintf(source + n, 64, "\n__device__ int fg_test_nonce_%d;\n", ++nonce);
  double t0 = fg_test_now_seconds();
  flowgen_status st = flowrt_compile(source, n, name, spec->arch,
                                     FLOWRT_TARGET_CUBIN, true, &image, &size,
                                     &log, &err);
  double seconds = fg_test_now_seconds() - t0;
  free(source);
  if (st != FLOWGEN_OK)
    fail_msg("%s: %s: %s", what, flowgen_status_name(st), err.message);
  assert_non_null(image);
  assert_true(size > 64);
  assert_memory_equal(image, "\x7f" "ELF", 4);
  assert_non_null(log);
  check_log(k, log, spec->arch, what);
  free(image);
  free(log);
  flowgen_kernel_free(k);
  return seconds;
}

static double compile_clean(const flowgen_spec *spec, bool launcher) {
  return compile_clean_with(spec, launcher, NULL);
}

static void compile_clean_tuned(const flowgen_spec *spec, const char *tune) {
  compile_clean_with(spec, false, tune);
}

/* ---- the sweep ------------------------------------------------------------- */

/* {2, 704, 2}: the gemm variant's 64-row tiles (with 64 inputs a stage the
 * kernel spilled around its layer calls). */
static const int sweep[][3] = {
    {64, 256, 32}, {1, 1, 1},     {3, 12, 5},     {2, 100, 7},
    {17, 4095, 3}, {128, 512, 16}, {1024, 4096, 1}, {512, 2048, 2},
    {2, 704, 2},
};
#define SWEEP_COUNT (sizeof sweep / sizeof sweep[0])

static void test_sweep_sm90(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (!arch_supported(90)) skip();
  for (size_t i = 0; i < SWEEP_COUNT; ++i) {
    flowgen_spec spec = fg_test_spec(sweep[i][0], sweep[i][1], sweep[i][2], 90);
    if (quick() && i != 2) continue; /* {3, 12, 5} */
    compile_clean(&spec, false);
  }
}

/* sm_80: a smaller shared-memory budget; every other shape of the sweep. */
static void test_sweep_sm80(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (!arch_supported(80) || quick()) skip();
  for (size_t i = 0; i < SWEEP_COUNT; i += 2) {
    flowgen_spec spec = fg_test_spec(sweep[i][0], sweep[i][1], sweep[i][2], 80);
    compile_clean(&spec, false);
  }
  /* H not a multiple of 4 or 32 */
  flowgen_spec odd = fg_test_spec(33, 130, 4, 80);
  compile_clean(&odd, false);
}

/* The launcher sits behind #if !defined(__CUDACC_RTC__): NVRTC skips it,
 * but the file must still compile as a whole. */
static void test_host_launcher_compiles(void **state) {
  (void)state;
  skip_without_nvrtc();
  flowgen_spec spec = quick() ? QUICK_SPEC() : fg_test_spec(64, 0, 32, 90);
  compile_clean(&spec, true);
  if (arch_supported(80) && !quick()) {
    spec = fg_test_spec(3, 12, 5, 80);
    compile_clean(&spec, true);
  }
}

/* Cold start-up: the default shape's nine kernels (six cluster variants,
 * 1 to 8 samples a cluster; rmma3 by 16 samples a cluster; the 32-row
 * tiled kernel; the tf32x3 matrix-unit kernel): `flowgen --emit cubin`
 * took 3.4 to 4.5 s (this test 2.9 to 3.5) on a 2-core machine with NVRTC 13.0
 * splitting the compile over both cores (5.0 to 5.5 s on one); the limit
 * catches a blow-up, not noise. */
static void test_default_compile_time(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (!fg_test_timing_checks()) skip();
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  double seconds = compile_clean(&spec, false);
  printf("# default shape (D=64, H=256, S=32): %.2f s\n", seconds);
  if (seconds > 6.5)
    fail_msg("the default shape took %.2f s to compile for sm_90 (limit 6.5 s)",
             seconds);
}

/* Issue: the largest shape compiles in 10 s or less on a 2-core machine
 * (D=1024, H=4096, S=10000, RK4: four stages, the most code; 7.5 to 8.7 s
 * split over both cores, 9.5 to 11.0 s on one; ptxas spends 2.4 of its
 * 3.7 s on the gemm kernel). */
static void test_largest_compile_time(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (!fg_test_timing_checks()) skip();
  flowgen_spec spec = fg_test_spec(1024, 4096, 10000, 90);
  spec.solver = FLOWGEN_SOLVER_RK4;
  double seconds = compile_clean(&spec, false);
  printf("# largest shape (RK4, D=1024, H=4096, S=10000): %.2f s\n", seconds);
  if (seconds > 10.0)
    fail_msg("the largest shape took %.2f s to compile for sm_90 (limit 10 s)", seconds);
}

/* Every solver's kernels (all variants) compile clean. */
static void test_solvers_compile(void **state) {
  (void)state;
  skip_without_nvrtc();
  static const flowgen_solver solvers[] = {FLOWGEN_SOLVER_MIDPOINT, FLOWGEN_SOLVER_HEUN,
                                           FLOWGEN_SOLVER_RK4};
  for (size_t i = 0; i < (quick() ? 1 : sizeof solvers / sizeof *solvers); ++i) {
    flowgen_spec spec = quick() ? QUICK_SPEC() : fg_test_spec(16, 64, 4, 90);
    spec.solver = solvers[i];
    compile_clean(&spec, false);
  }
}

/* Every precision: the matrix-unit variants (and the fp32 ones beside
 * them) compile clean, for shapes with and without padded copies. */
static void test_precisions_compile(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const int shapes[][3] = {{64, 256, 4}, {3, 100, 5}, {33, 130, 2}};
  static const flowgen_precision precisions[] = {FLOWGEN_PRECISION_TF32, FLOWGEN_PRECISION_BF16,
                                                 FLOWGEN_PRECISION_FP16};
  for (size_t p = 0; p < sizeof precisions / sizeof *precisions; ++p)
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; ++i) {
      flowgen_spec spec = fg_test_spec(shapes[i][0], shapes[i][1], shapes[i][2], 90);
      spec.precision = precisions[p];
      if (i == 2) spec.solver = FLOWGEN_SOLVER_RK4;
      compile_clean(&spec, false);
    }
  /* fp32 with copies for tf32x3 (D not a multiple of 4), and sm_80. */
  flowgen_spec spec = fg_test_spec(3, 100, 5, 90);
  compile_clean(&spec, false);
  if (arch_supported(80)) {
    spec = fg_test_spec(64, 256, 4, 80);
    spec.precision = FLOWGEN_PRECISION_BF16;
    compile_clean(&spec, false);
  }
}

/* The tuned variants of the tiled kernels: several weight tiles in flight,
 * deeper tiles, the cluster split (tiled.stages=4,tiled.chunk=64); of the
 * cluster kernel: 8 blocks a cluster. */
static void test_tuned_variants_compile(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const struct {
    int dim, hidden, steps;
    flowgen_solver solver;
    const char *tune;
  } cases[] = {
      {128, 512, 2, FLOWGEN_SOLVER_EULER, "tiled.stages=4,tiled.chunk=64"},
      {33, 130, 2, FLOWGEN_SOLVER_HEUN, "tiled.stages=3,skip=mma16:mma"},
      {64, 256, 2, FLOWGEN_SOLVER_RK4, "cluster.blocks=8"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_spec spec = fg_test_spec(cases[i].dim, cases[i].hidden, cases[i].steps, 90);
    spec.solver = cases[i].solver;
    compile_clean_tuned(&spec, cases[i].tune);
  }
}

/* D x H (S=4) in `precision` for sm_90a under `tune` (NULL: none), whose
 * plan's last variant is `strategy`. */
typedef struct {
  int dim, hidden;
  flowgen_precision precision;
  const char *tune, *strategy;
} last_case;

/* For each case: the plan's last variant is its strategy, and the file
 * compiles clean. */
static void lasts_compile_clean(const last_case *cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    flowgen_spec spec = fg_test_spec(cases[i].dim, cases[i].hidden, 4, 90);
    spec.precision = cases[i].precision;
    spec.arch_specific = true;
    flowgen_options opts = {.tune = cases[i].tune};
    flowgen_kernel *k = NULL;
    assert_int_equal(flowgen_generate(&spec, &opts, &k, NULL), FLOWGEN_OK);
    assert_string_equal(flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1)->strategy,
                        cases[i].strategy);
    flowgen_kernel_free(k);
    compile_clean_tuned(&spec, cases[i].tune);
  }
}

/* The wgmma variant (sm_90a: the runtime's target on sm_90) compiles
 * without warnings (ptxas reports wgmma it must serialize) or spills: 128
 * and 64 outputs a wgmma and a last one of the rest, D and H of no multiple
 * of 16, the largest D, one warpgroup a block (from batch 481 where rmma is
 * left out). */
static void test_wgmma_compiles(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const last_case cases[] = {
      {64, 256, FLOWGEN_PRECISION_BF16, NULL, "wgmma"},
      {64, 256, FLOWGEN_PRECISION_FP16, "wgmma.n=64", "wgmma"},
      {64, 256, FLOWGEN_PRECISION_BF16, "skip=rmma", "wgmma"},
      {17, 200, FLOWGEN_PRECISION_FP16, NULL, "wgmma"},
      {3, 100, FLOWGEN_PRECISION_BF16, NULL, "wgmma"},
      {80, 240, FLOWGEN_PRECISION_BF16, NULL, "wgmma"},
      {160, 200, FLOWGEN_PRECISION_FP16, NULL, "wgmma"},
  };
  lasts_compile_clean(cases, sizeof cases / sizeof *cases);
}

/* The streamed warpgroup variants (sm_90a; tf32: wgstream, fp32:
 * wgstream3) compile without warnings (no serialized wgmma) or spills: the
 * default shape, blocks alone (wgstream.blocks=1) and clusters of 2 (fp32:
 * wgstream.blocks=2), 32 outputs a chunk (wgstream.n=32), D and H of no
 * multiple of 16 and 32 (H=200: layer 2's inputs in a piece of 128 and
 * one of 96), the smallest shapes. */
static void test_wgstream_compiles(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const last_case cases[] = {{64, 256, FLOWGEN_PRECISION_TF32, NULL, "wgstream"},
               {64, 256, FLOWGEN_PRECISION_TF32, "wgstream.blocks=1", "wgstream"},
               {64, 256, FLOWGEN_PRECISION_TF32, "wgstream.n=32", "wgstream"},
               {17, 200, FLOWGEN_PRECISION_TF32, NULL, "wgstream"},
               {3, 100, FLOWGEN_PRECISION_TF32, "wgstream.blocks=1", "wgstream"},
               {1, 1, FLOWGEN_PRECISION_TF32, NULL, "wgstream"},
               {64, 256, FLOWGEN_PRECISION_FP32, NULL, "wgstream3"},
               {64, 256, FLOWGEN_PRECISION_FP32, "wgstream.blocks=2", "wgstream3"},
               {17, 200, FLOWGEN_PRECISION_FP32, NULL, "wgstream3"},
               {3, 100, FLOWGEN_PRECISION_FP32, NULL, "wgstream3"}};
  lasts_compile_clean(cases, sizeof cases / sizeof *cases);
}

/* The register-resident kernel compiles without warnings or spills where
 * the planner takes a shape (tune rmma=1:1000: from the first batch up to 1000):
 * the default shape, D and H of no multiple of 16, the largest D for
 * H=256, many registers a thread (D=160, H=128), one warp (H <= 16), every
 * solver; sm_90 (packed tanh), sm_80 and sm_86 (fp32 tanh for bf16), sm_90a
 * beside the wgmma variants; fp32 as tf32x3 (rmma3). */
static void test_rmma_compiles(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const struct {
    int dim, hidden, arch;
    flowgen_precision precision;
    flowgen_solver solver;
  } cases[] = {
      {64, 256, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
      {64, 256, 80, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
      {17, 200, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER},
      {112, 192, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER},
      {24, 16, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
      {1, 1, 86, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
      {160, 128, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER},
      {64, 256, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_RK4},
      {160, 128, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_RK4},
      {17, 200, 80, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_HEUN},
      {48, 100, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_MIDPOINT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_spec spec = fg_test_spec(cases[i].dim, cases[i].hidden, 4, cases[i].arch);
    spec.precision = cases[i].precision;
    spec.solver = cases[i].solver;
    spec.arch_specific = i == 0;
    flowgen_options opts = {.tune = "rmma=1:1000"};
    flowgen_kernel *k = NULL;
    assert_int_equal(flowgen_generate(&spec, &opts, &k, NULL), FLOWGEN_OK);
    assert_string_equal(flowgen_kernel_variant(k, 0)->strategy, "rmma");
    flowgen_kernel_free(k);
    compile_clean_tuned(&spec, opts.tune);
  }
  /* fp32 as tf32x3 over clusters of 4 (rmma3): by 8 and 16 samples a
   * cluster near the register limit (D=64, H=256 as planned: by 16 after
   * the cluster kernel; skip=rmma3_r16: by 8), H padded (D=17, H=200), D
   * and H padded (D=36, H=240), an odd count of layer 3's m-tiles (D=48,
   * H=192), 8 state elements a thread by 8 (D=128, H=128) */
  static const struct {
    int dim, hidden;
    const char *tune, *strategy;
  } x3[] = {{64, 256, "skip=rmma3_r16", "rmma3_r8"}, {17, 200, NULL, "rmma3_r16"},
            {36, 240, NULL, "rmma3_r16"}, {48, 192, NULL, "rmma3_r16"}, {128, 128, NULL, "rmma3_r8"}};
  for (size_t i = 0; i < sizeof x3 / sizeof *x3; ++i) {
    flowgen_spec spec = fg_test_spec(x3[i].dim, x3[i].hidden, 4, 90);
    flowgen_options opts = {.tune = x3[i].tune};
    flowgen_kernel *k = NULL;
    assert_int_equal(flowgen_generate(&spec, &opts, &k, NULL), FLOWGEN_OK);
    bool found = false;
    for (int v = 0; v < flowgen_kernel_variant_count(k); ++v)
      found = found || strcmp(flowgen_kernel_variant(k, v)->strategy, x3[i].strategy) == 0;
    if (!found) fail_msg("D=%d H=%d: no %s variant", x3[i].dim, x3[i].hidden, x3[i].strategy);
    flowgen_kernel_free(k);
    compile_clean_tuned(&spec, opts.tune);
  }
}

/* Issue: every shape in range compiles.  Two shapes drawn afresh on each
 * run (log-uniform over the whole range, a random solver); the seed is
 * printed so that a failure can be replayed with FLOWGEN_TEST_SEED. */
static void test_random_shapes_compile(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  uint64_t rng = fg_test_seed() * 2654435761u + 17;
  for (int i = 0; i < 2; ++i) {
    flowgen_spec spec = fg_test_random_spec(&rng, 1024, 4096, 10000, 90);
    print_message("# random shape D=%d H=%d S=%d %s\n", spec.dim, spec.hidden, spec.steps,
                  flowgen_solver_name(spec.solver));
    compile_clean(&spec, false);
  }
}

static void test_ptx_target(void **state) {
  (void)state;
  skip_without_nvrtc();
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  if (quick()) spec = QUICK_SPEC();
  char symbol[FLOWGEN_NAME_MAX + 64], tiled[FLOWGEN_NAME_MAX + 96], pack[FLOWGEN_NAME_MAX + 96];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol);
  snprintf(tiled, sizeof tiled, ".entry %s_tiled(", symbol);
  snprintf(pack, sizeof pack, ".entry %s_pack(", symbol);
  flowgen_kernel *k = NULL;
  assert_int_equal(flowgen_generate(&spec, NULL, &k, NULL), FLOWGEN_OK);
  void *image = NULL;
  size_t size = 0;
  flowgen_error err;
  if (flowrt_compile(flowgen_kernel_source(k), flowgen_kernel_source_size(k),
                     "k.cu", 90, FLOWRT_TARGET_PTX, false, &image, &size,
                     NULL, &err) != FLOWGEN_OK)
    fail_msg("PTX: %s", err.message);
  const char *ptx = image;
  assert_true(size > 0);
  assert_non_null(memchr(ptx, '\0', size));
  assert_non_null(strstr(ptx, "\n.version "));
  assert_non_null(strstr(ptx, "\n.target sm_90"));
  assert_non_null(strstr(ptx, tiled));
  assert_non_null(strstr(ptx, pack));
  free(image);
  flowgen_kernel_free(k);
}

/* Any name flowgen_spec_set accepts must give source that compiles: the
 * name becomes a namespace and symbol prefixes next to CUDA's own names and
 * the template's.  (Refusing a name at flowgen_spec_set is fine too.) */
static void test_accepted_names_compile(void **state) {
  (void)state;
  skip_without_nvrtc();
  if (quick()) skip();
  static const char *const names[] = {"policy", "class", "min", "silu",
                                      "tiled"};
  char failures[FLOWGEN_ERROR_MESSAGE_MAX] = "";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    flowgen_spec spec = fg_test_spec(3, 12, 5, 90);
    if (flowgen_spec_set(&spec, "name", names[i], NULL) != FLOWGEN_OK)
      continue;
    flowgen_kernel *k = NULL;
    flowgen_error err = {FLOWGEN_OK, ""};
    assert_int_equal(flowgen_generate(&spec, NULL, &k, &err), FLOWGEN_OK);
    void *image = NULL;
    size_t size = 0;
    flowgen_status st = flowrt_compile(
        flowgen_kernel_source(k), flowgen_kernel_source_size(k), "named.cu",
        90, FLOWRT_TARGET_CUBIN, false, &image, &size, NULL, &err);
    if (st != FLOWGEN_OK) {
      const char *first = strstr(err.message, "error");
      size_t used = strlen(failures);
      snprintf(failures + used, sizeof failures - used, "\n  --name %s: %.*s",
               names[i], first ? (int)strcspn(first, "\n") : 40,
               first ? first : err.message);
    }
    free(image);
    flowgen_kernel_free(k);
  }
  if (failures[0])
    fail_msg("names accepted by flowgen_spec_set that do not compile:%s",
             failures);
}

/* ---- errors ------------------------------------------------------------------- */

static void test_compile_error_carries_log(void **state) {
  (void)state;
  skip_without_nvrtc();
  static const char source[] =
      "extern \"C\" __global__ void broken(float* x)\n"
      "{\n"
      "  x[0] = undeclared_thing;\n"
      "}\n";
  void *image = (void *)source;
  size_t size = 7;
  char *log = (char *)source;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status st =
      flowrt_compile(source, sizeof source - 1, "broken.cu", 90,
                     FLOWRT_TARGET_CUBIN, true, &image, &size, &log, &err);
  assert_int_equal(st, FLOWGEN_COMPILE);
  assert_int_equal(err.status, FLOWGEN_COMPILE);
  assert_null(image);
  assert_int_equal(size, 0);
  assert_null(log);
  /* The message carries NVRTC's log: file(line), the error, the name. */
  if (!strstr(err.message, "broken.cu(3)") ||
      !strstr(err.message, "error") ||
      !strstr(err.message, "undeclared_thing"))
    fail_msg("the message lacks the NVRTC log: %s", err.message);
  assert_non_null(strstr(err.message, "sm_90"));

  /* The PTX target reports the same way. */
  st = flowrt_compile(source, sizeof source - 1, "broken.cu", 90,
                      FLOWRT_TARGET_PTX, false, &image, &size, NULL, &err);
  assert_int_equal(st, FLOWGEN_COMPILE);
  assert_non_null(strstr(err.message, "undeclared_thing"));
}

static void test_compile_bad_arguments(void **state) {
  (void)state;
  static const char source[] = "extern \"C\" __global__ void k() {}\n";
  void *image = NULL;
  size_t size = 0;
  flowgen_error err = {FLOWGEN_OK, ""};
  /* The size must match the text. */
  assert_int_equal(flowrt_compile(source, 5, "k.cu", 90, FLOWRT_TARGET_CUBIN,
                                  false, &image, &size, NULL, &err),
                   FLOWGEN_INVALID);
  assert_null(image);
  skip_without_nvrtc();
  /* A cubin for an arch this NVRTC does not know. */
  assert_int_equal(flowrt_compile(source, sizeof source - 1, "k.cu", 999,
                                  FLOWRT_TARGET_CUBIN, false, &image, &size,
                                  NULL, &err),
                   FLOWGEN_UNSUPPORTED);
  assert_non_null(strstr(err.message, "sm_999"));
  assert_null(image);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep_sm90),
      cmocka_unit_test(test_sweep_sm80),
      cmocka_unit_test(test_host_launcher_compiles),
      cmocka_unit_test(test_default_compile_time),
      cmocka_unit_test(test_largest_compile_time),
      cmocka_unit_test(test_solvers_compile),
      cmocka_unit_test(test_random_shapes_compile),
      cmocka_unit_test(test_precisions_compile),
      cmocka_unit_test(test_tuned_variants_compile),
      cmocka_unit_test(test_wgmma_compiles),
      cmocka_unit_test(test_wgstream_compiles),
      cmocka_unit_test(test_rmma_compiles),
      cmocka_unit_test(test_ptx_target),
      cmocka_unit_test(test_accepted_names_compile),
      cmocka_unit_test(test_compile_error_carries_log),
      cmocka_unit_test(test_compile_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
