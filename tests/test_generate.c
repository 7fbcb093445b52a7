/* flowgen_generate: the rendered source (header, symbols, literal shape
 * constants, determinism), the variants, describe and pick. */
#include "support.h"

#include "flowgen.h"

#include <ctype.h>
#include <jansson.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PATH_SIZE 4096

/* ---- helpers ------------------------------------------------------------ */

static void assert_contains(const char *text, const char *needle) {
  if (!strstr(text, needle))
    fail_msg("expected \"%s\" in the generated text", needle);
}

static void assert_lacks(const char *text, const char *needle) {
  if (strstr(text, needle))
    fail_msg("unexpected \"%s\" in the generated text", needle);
}

static flowgen_kernel *generate(const flowgen_spec *spec,
                                const flowgen_options *opts) {
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status st = flowgen_generate(spec, opts, &k, &err);
  if (st != FLOWGEN_OK)
    fail_msg("generate failed: %s: %s", flowgen_status_name(st), err.message);
  assert_non_null(k);
  assert_int_equal(strlen(flowgen_kernel_source(k)),
                   flowgen_kernel_source_size(k));
  return k;
}

/* The text between `start` (excluded) and the next `end`; malloc()ed. */
static char *between(const char *text, const char *start, const char *end) {
  const char *a = strstr(text, start);
  if (!a) fail_msg("no \"%s\" in the source", start);
  a += strlen(start);
  const char *b = strstr(a, end);
  if (!b) fail_msg("no \"%s\" after \"%s\"", end, start);
  char *out = malloc((size_t)(b - a) + 1);
  memcpy(out, a, (size_t)(b - a));
  out[b - a] = '\0';
  return out;
}

/* True if src declares `symbol` as an extern "C" __global__ function. */
static bool has_kernel(const char *src, const char *symbol) {
  size_t n = strlen(symbol);
  for (const char *p = strstr(src, symbol); p; p = strstr(p + 1, symbol)) {
    if (p[n] != '(' || (p > src && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
      continue;
    /* Back to the start of the declaration: no ';', '{' or '}' between. */
    const char *start = p;
    while (start > src && !strchr(";{}", start[-1])) --start;
    char *decl = strndup(start, (size_t)(p - start));
    bool ok = strstr(decl, "extern \"C\" __global__ void") != NULL;
    free(decl);
    if (ok) return true;
  }
  return false;
}

static const flowgen_variant *find_strategy(const flowgen_kernel *k,
                                            const char *strategy) {
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i)
    if (strcmp(flowgen_kernel_variant(k, i)->strategy, strategy) == 0)
      return flowgen_kernel_variant(k, i);
  return NULL;
}

/* Whether the planner gives spec, under `tune` (NULL: none), a variant of
 * that strategy. */
static bool has_strategy(const flowgen_spec *spec, const char *tune, const char *strategy) {
  flowgen_options o = {.tune = tune};
  flowgen_kernel *k = generate(spec, tune ? &o : NULL);
  bool found = find_strategy(k, strategy) != NULL;
  flowgen_kernel_free(k);
  return found;
}

/* A shape, precision and solver on an arch (sm_90 as sm_90a where
 * arch_specific). */
typedef struct {
  int dim, hidden, arch;
  flowgen_precision precision;
  flowgen_solver solver;
} plan_case;

/* No case's plan has a variant named `strategy`. */
static void expect_no_strategy(const plan_case *cases, size_t n, bool arch_specific,
                               const char *strategy) {
  for (size_t i = 0; i < n; ++i) {
    flowgen_spec spec = fg_test_spec(cases[i].dim, cases[i].hidden, 4, cases[i].arch);
    spec.precision = cases[i].precision;
    spec.solver = cases[i].solver;
    spec.arch_specific = arch_specific && cases[i].arch == 90;
    if (has_strategy(&spec, NULL, strategy))
      fail_msg("D=%d H=%d sm_%d %s %s: %s planned", cases[i].dim, cases[i].hidden, cases[i].arch,
               flowgen_precision_name(cases[i].precision), flowgen_solver_name(cases[i].solver),
               strategy);
  }
}

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static size_t round4(size_t n) { return (n + 3) / 4 * 4; }

/* Packed weight floats: seven segments, each rounded up to 4 floats. */
static size_t params_floats(size_t d, size_t h) {
  return round4(d * h) + round4(h) + round4(h) + round4(h * h) + round4(h) +
         round4(h * d) + round4(d);
}

static size_t shared_limit(int arch) {
  if (arch >= 90) return 227 * 1024;
  if (arch == 80 || arch == 87) return 163 * 1024;
  if (arch >= 80) return 99 * 1024;
  return 64 * 1024;
}

/* ---- the header ----------------------------------------------------------- */

static void test_header_comment(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);

  /* The leading block of // lines. */
  const char *end = src;
  while (strncmp(end, "//", 2) == 0) {
    const char *nl = strchr(end, '\n');
    assert_non_null(nl);
    end = nl + 1;
  }
  assert_true(end > src);
  char *header = strndup(src, (size_t)(end - src));
  char *first = strndup(src, strcspn(src, "\n"));
  assert_contains(first, "flowgen");
  assert_contains(first, FLOWGEN_VERSION);
  assert_contains(first, "DO NOT EDIT");
  assert_string_equal(first,
                      "// Generated by flowgen " FLOWGEN_VERSION
                      ". DO NOT EDIT: regenerate instead.");
  assert_contains(header,
                  "flowgen --dim 64 --hidden 256 --steps 32 --solver euler "
                  "--precision fp32 --arch sm_90\n");
  assert_lacks(header, "--name");
  assert_lacks(header, "--host-launcher");
  free(first);
  free(header);
  flowgen_kernel_free(k);

  /* Every parameter of another shape, and the optional flags. */
  spec = fg_test_spec(3, 0, 5, 80);
  strcpy(spec.name, "policy");
  flowgen_options opts = {.host_launcher = true};
  k = generate(&spec, &opts);
  assert_contains(flowgen_kernel_source(k),
                  "//   flowgen --dim 3 --hidden 12 --steps 5 --solver euler "
                  "--precision fp32 --arch sm_80 --name policy "
                  "--host-launcher\n");
  flowgen_kernel_free(k);
}

/* No timestamps, no paths: nothing that depends on when or where. */
static void test_no_time_or_path_in_source(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {.host_launcher = true};
  flowgen_kernel *k = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(k);
  static const char *const paths[] = {"/tmp", "/home", "/root", "/usr",
                                      "/work", "/var", "C:\\", "~/"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; ++i)
    assert_lacks(src, paths[i]);
  if (fg_test_source_dir()[0] == '/') assert_lacks(src, fg_test_source_dir());

  /* dddd-dd-dd dates and dd:dd clock times. */
  for (const char *p = src; *p; ++p) {
    bool date = true, clock = true;
    static const char date_shape[] = "dddd-dd-dd", clock_shape[] = "dd:dd";
    for (int i = 0; date && date_shape[i]; ++i)
      date = p[i] && (date_shape[i] == 'd' ? isdigit((unsigned char)p[i])
                                            : p[i] == date_shape[i]);
    for (int i = 0; clock && clock_shape[i]; ++i)
      clock = p[i] && (clock_shape[i] == 'd' ? isdigit((unsigned char)p[i])
                                              : p[i] == clock_shape[i]);
    if (date || clock) fail_msg("time-like text in the source: %.16s", p);
  }
  flowgen_kernel_free(k);
}

/* ---- determinism ------------------------------------------------------------ */

static void test_deterministic(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *a = generate(&spec, NULL);
  flowgen_kernel *b = generate(&spec, NULL);
  flowgen_options zero = {0};
  flowgen_kernel *c = generate(&spec, &zero);
  assert_int_equal(flowgen_kernel_source_size(a),
                   flowgen_kernel_source_size(b));
  assert_memory_equal(flowgen_kernel_source(a), flowgen_kernel_source(b),
                      flowgen_kernel_source_size(a));
  assert_string_equal(flowgen_kernel_source(a), flowgen_kernel_source(c));

  char *ja = flowgen_kernel_describe(a), *jb = flowgen_kernel_describe(b);
  assert_non_null(ja);
  assert_non_null(jb);
  assert_string_equal(ja, jb);
  free(ja);
  free(jb);

  /* A copy of the built-in templates read from a folder: the same bytes
   * (so no template path or file name leaks into the output). */
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  flowgen_options from_dir = {.template_dir = dir};
  flowgen_kernel *d = generate(&spec, &from_dir);
  assert_int_equal(flowgen_kernel_source_size(a),
                   flowgen_kernel_source_size(d));
  assert_string_equal(flowgen_kernel_source(a), flowgen_kernel_source(d));
  assert_lacks(flowgen_kernel_source(d), dir);

  /* Also with the launcher, and for another shape. */
  flowgen_spec other = fg_test_spec(5, 7, 3, 75);
  flowgen_options launcher = {.host_launcher = true};
  flowgen_options launcher_dir = {.template_dir = dir, .host_launcher = true};
  flowgen_kernel *e = generate(&other, &launcher);
  flowgen_kernel *f = generate(&other, &launcher_dir);
  assert_string_equal(flowgen_kernel_source(e), flowgen_kernel_source(f));
  ja = flowgen_kernel_describe(e);
  jb = flowgen_kernel_describe(f);
  assert_string_equal(ja, jb);
  free(ja);
  free(jb);

  flowgen_kernel_free(a);
  flowgen_kernel_free(b);
  flowgen_kernel_free(c);
  flowgen_kernel_free(d);
  flowgen_kernel_free(e);
  flowgen_kernel_free(f);
  fg_test_rmtree(dir);
  free(dir);
}

/* ---- symbols and literal constants ------------------------------------------ */

static void test_kernel_symbols(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  int n = flowgen_kernel_variant_count(k);
  assert_true(n >= 1);
  /* Every variant: an extern "C" kernel whose name starts with the spec's
   * symbol, distinct from the others; the packing kernel too. */
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    assert_non_null(v);
    if (!starts_with(v->symbol, "flow_d64_h256_s32_fp32_"))
      fail_msg("variant %d symbol %s lacks the shape prefix", i, v->symbol);
    assert_string_equal(v->pack_symbol, "flow_d64_h256_s32_fp32_pack");
    if (!has_kernel(src, v->symbol))
      fail_msg("no extern \"C\" __global__ %s in the source", v->symbol);
    if (!has_kernel(src, v->pack_symbol))
      fail_msg("no extern \"C\" __global__ %s in the source", v->pack_symbol);
    for (int j = 0; j < i; ++j)
      assert_string_not_equal(v->symbol, flowgen_kernel_variant(k, j)->symbol);
  }
  /* The general strategy; the largest batches on the matrix units. */
  const flowgen_variant *tiled = find_strategy(k, "tiled");
  assert_non_null(tiled);
  assert_string_equal(tiled->symbol, "flow_d64_h256_s32_fp32_tiled");
  const flowgen_variant *mma = find_strategy(k, "mma");
  assert_non_null(mma);
  assert_string_equal(mma->symbol, "flow_d64_h256_s32_fp32_mma");
  assert_int_equal(mma->min_batch, tiled->max_batch + 1);
  assert_int_equal(mma->max_batch, -1);
  assert_false(has_kernel(src, "flow_d64_h256_s32_fp32"));
  assert_null(flowgen_kernel_variant(k, n));
  assert_null(flowgen_kernel_variant(k, -1));
  assert_string_equal(flowgen_kernel_spec(k)->name, "");
  assert_int_equal(flowgen_kernel_spec(k)->dim, 64);
  flowgen_kernel_free(k);
  flowgen_kernel_free(NULL);
}

/* Checks the kStepTime table: S entries, entry k is (k + 0.5) / S in fp32
 * exactly, and kDt is 1 / S in fp32. */
static void check_time_table(const char *src, int steps) {
  char *table = between(src, "__constant__ float kStepTime[kSteps] = {", "};");
  int count = 0;
  for (char *p = table; *p;) {
    while (*p && (isspace((unsigned char)*p) || *p == ',')) ++p;
    if (!*p) break;
    char *end = NULL;
    float value = strtof(p, &end);
    if (end == p || *end != 'f')
      fail_msg("kStepTime entry %d is not an fp32 literal: %.20s", count, p);
    float expected = (float)((count + 0.5) / steps);
    if (value != expected)
      fail_msg("kStepTime[%d] = %.9g, expected %.9g (S = %d)", count,
               (double)value, (double)expected, steps);
    p = end + 1;
    ++count;
  }
  free(table);
  assert_int_equal(count, steps);

  char *dt = between(src, "constexpr float kDt = ", ";");
  char *end = NULL;
  float value = strtof(dt, &end);
  assert_true(end && *end == 'f' && end[1] == '\0');
  assert_true(value == (float)(1.0 / steps));
  free(dt);
}

static void test_shape_constants_are_literals(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "constexpr int kDim = 64;");
  assert_contains(src, "constexpr int kHidden = 256;");
  assert_contains(src, "constexpr int kSteps = 32;");
  assert_contains(src, "constexpr float kDt = 0.03125f;");
  assert_contains(src, "    0.015625f, 0.046875f, 0.078125f,");
  assert_contains(src, "0.984375f,\n};");
  assert_contains(src, "constexpr int kParamsFloats = 443200;");
  /* the cluster kernel's weights by thread after b3: its 144 floats a
   * thread as float4s, each array of them loaded from its first float */
  assert_contains(src, "constexpr int k_wc = 99136;");
  assert_contains(src, "load_thread<0, 64>(w1, wc);");
  assert_contains(src, "load_thread<64, 64>(w2, wc);");
  assert_contains(src, "load_thread<128, 16>(w3, wc);");
  assert_contains(src, "const int j = f / 1024 % 36 * 4 + f % 4;");
  check_time_table(src, 32);
  flowgen_kernel_free(k);

  spec = fg_test_spec(3, 0, 5, 90);
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  assert_contains(src, "constexpr int kDim = 3;");
  assert_contains(src, "constexpr int kHidden = 12;");
  assert_contains(src, "constexpr int kSteps = 5;");
  assert_contains(src, "constexpr float kDt = 0.2f;");
  assert_contains(src, "0.1f, 0.3f, 0.5f, 0.7f, 0.9f,");
  assert_contains(src, "constexpr int kParamsFloats = 256;");
  check_time_table(src, 5);
  flowgen_kernel_free(k);

  /* Grids whose times have no short decimal form, and the largest S. */
  static const int steps[] = {1, 7, 30, 1000, 10000};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i) {
    spec = fg_test_spec(2, 3, steps[i], 90);
    k = generate(&spec, NULL);
    check_time_table(flowgen_kernel_source(k), steps[i]);
    flowgen_kernel_free(k);
  }
}

/* The launch configuration of each variant is consistent with the source
 * and with what the hardware allows, over a sweep of shapes and archs. */
static void test_variants_are_consistent(void **state) {
  (void)state;
  static const int shapes[][3] = {
      {64, 256, 32}, {1, 1, 1},     {3, 12, 5},     {2, 100, 7},
      {17, 4095, 3}, {128, 512, 16}, {1024, 4096, 1}, {512, 2048, 2},
      {5, 7, 3},     {33, 130, 4},  {1024, 1, 1},   {1, 4096, 1},
  };
  static const int archs[] = {75, 80, 86, 90, 120};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; ++a) {
      const int d = shapes[s][0], h = shapes[s][1];
      flowgen_spec spec = fg_test_spec(d, h, shapes[s][2], archs[a]);
      flowgen_kernel *k = generate(&spec, NULL);
      const char *src = flowgen_kernel_source(k);
      int n = flowgen_kernel_variant_count(k);
      assert_true(n >= 1);
      /* Batch ranges: from 0, back to back, the last one open-ended, so
       * every batch has exactly one variant. */
      assert_int_equal(flowgen_kernel_variant(k, 0)->min_batch, 0);
      assert_int_equal(flowgen_kernel_variant(k, n - 1)->max_batch, -1);
      for (int i = 0; i + 1 < n; ++i) {
        const flowgen_variant *v = flowgen_kernel_variant(k, i);
        if (v->max_batch < v->min_batch ||
            flowgen_kernel_variant(k, i + 1)->min_batch != v->max_batch + 1)
          fail_msg("D=%d H=%d sm_%d: variant %d covers %lld..%lld, the next "
                   "starts at %lld", d, h, archs[a], i, (long long)v->min_batch,
                   (long long)v->max_batch,
                   (long long)flowgen_kernel_variant(k, i + 1)->min_batch);
      }
      for (int i = 0; i < n; ++i) {
        const flowgen_variant *v = flowgen_kernel_variant(k, i);
        assert_true(v->block_threads >= 32 && v->block_threads <= 1024);
        assert_int_equal(v->block_threads % 32, 0);
        assert_true(v->rows_per_block >= 1);
        assert_true(v->cluster_blocks >= 1);
        assert_true(v->pack_threads >= 1 && v->pack_threads <= 1024);
        /* One packed buffer for all: the fp32 layout, and where a variant
         * runs on the matrix units, perhaps copies for it after that. */
        assert_int_equal(v->params_bytes, flowgen_kernel_variant(k, 0)->params_bytes);
        if (!find_strategy(k, "mma") && !find_strategy(k, "mma16") && !find_strategy(k, "grid_b8") &&
            !find_strategy(k, "rmma3_r8"))
          assert_int_equal(v->params_bytes, 4 * params_floats((size_t)d, (size_t)h));
        else
          assert_true(v->params_bytes >= 4 * params_floats((size_t)d, (size_t)h));
        /* The tiled kernel keeps x, h1 and h2 for each row in shared
         * memory (rows padded to 4 floats). */
        if (strcmp(v->strategy, "tiled") == 0) {
          size_t needed = (size_t)v->rows_per_block * 4 *
                          (round4((size_t)d) + 2 * round4((size_t)h));
          if (v->shared_bytes < needed)
            fail_msg("D=%d H=%d sm_%d: %zu bytes of shared memory, the "
                     "kernel uses %zu", d, h, archs[a], v->shared_bytes,
                     needed);
        }
        if (v->shared_bytes > shared_limit(archs[a]))
          fail_msg("D=%d H=%d sm_%d: %zu bytes of shared memory, over the "
                   "%zu the arch allows", d, h, archs[a], v->shared_bytes,
                   shared_limit(archs[a]));
        char line[256];
        snprintf(line, sizeof line, "constexpr int kRows = %d;",
                 v->rows_per_block);
        assert_contains(src, line);
        snprintf(line, sizeof line, "__launch_bounds__(%d", v->block_threads);
        assert_contains(src, line);
        if (!has_kernel(src, v->symbol) || !has_kernel(src, v->pack_symbol))
          fail_msg("D=%d H=%d sm_%d: kernels %s / %s not in the source", d, h,
                   archs[a], v->symbol, v->pack_symbol);
        snprintf(line, sizeof line, "constexpr int kParamsFloats = %zu;",
                 v->params_bytes / 4);
        assert_contains(src, line);
      }
      flowgen_kernel_free(k);
    }
}

/* ---- the kernels' forms ------------------------------------------------------
 * What the plan table (tests/test_plan.c, tests/data/plan.golden) cannot
 * show: the form of the kernel a strategy renders for a shape, and the
 * edges of where each strategy applies. */

/* The cluster kernel: layer 2 by warp where own units come in 32s (their
 * partials in shared memory), by lanes where they do not (D=16, H=64: 16
 * own units); layer 1 by pairs of lanes (two units over half of x).  The
 * grid kernel's barrier; the tiled kernel's cluster split stores into
 * every block of its cluster. */
static void test_cluster_and_grid_forms(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(64, 256, 4, 90);
  flowgen_kernel *k = generate(&spec, NULL);
  assert_contains(flowgen_kernel_source(k), "float p2[kWarps * kRows * kOwn];");
  assert_null(strstr(flowgen_kernel_source(k), "kLanes2"));
  assert_contains(flowgen_kernel_source(k), "float w1[2][kDim / 2];");
  assert_contains(flowgen_kernel_source(k), "__shfl_xor_sync(0xffffffffu, half ? s0 : s1, 1);");
  flowgen_kernel_free(k);
  spec = fg_test_spec(16, 64, 4, 90);
  k = generate(&spec, NULL);
  assert_string_equal(flowgen_kernel_variant(k, 0)->strategy, "cluster4_r1");
  assert_contains(flowgen_kernel_source(k), "constexpr int kLanes2 = 4;");
  flowgen_kernel_free(k);
  /* 1.5 MB of weights: the grid variants (h1, h2 for 64 rows and the
   * barrier after the weights), then the split tiled kernel */
  spec = fg_test_spec(128, 512, 4, 90);
  k = generate(&spec, NULL);
  const flowgen_variant *v = find_strategy(k, "grid_b64");
  assert_true(v->params_bytes >= 4 * (params_floats(128, 512) + 2 * 64 * 512 + 1));
  assert_contains(flowgen_kernel_source(k), "atom.add.release.gpu.u32");
  assert_non_null(find_strategy(k, "tiled8c8"));
  assert_contains(flowgen_kernel_source(k), "st.shared::cluster.f32");
  flowgen_kernel_free(k);
  /* sm_80 has no clusters */
  spec.arch = 80;
  k = generate(&spec, NULL);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i)
    assert_int_equal(flowgen_kernel_variant(k, i)->cluster_blocks, 1);
  flowgen_kernel_free(k);
}

/* Occurrences of needle in text. */
static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) ++n;
  return n;
}

/* tf32x3's wgmma (wgstream3) go three to an asm statement, the three
 * products of a k8 step: NVVM's time for the kernel goes with its asm
 * statements, and the file for a large batch at the default shape then
 * compiles in about three quarters of the time (the same SASS).  No
 * wgmma of it stands alone. */
static void test_wgstream3_products_fused(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(64, 256, 32, 90);
  spec.arch_specific = true;  /* sm_90a, as the runtime builds sm_90 */
  flowgen_options opts = {.part = FLOWGEN_PART_BATCH, .batch = 65536};
  flowgen_kernel *k = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "_wgstream3(const float* x0, float* x, long long batch,");
  /* layer 1 (N = H / 2, A's low part in registers), layers 2 and 3 (N =
   * 32 and D, from shared memory): three functions of three wgmma */
  assert_int_equal(count_of(src, "void product3("), 3);
  assert_int_equal(count_of(src, "\"wgmma.mma_async.sync.aligned.m64n"), 9);
  assert_lacks(src, "void product(");
  assert_lacks(src, "void product_ss(");
  flowgen_kernel_free(k);
}

/* The cluster kernel with layer 3 folded into the next step's layer 1
 * (Euler, sm_90, layer 2 by warp): where H <= 128, at one sample a cluster,
 * or at every count of samples where H <= 2 D (bf16 and fp16: the one
 * variant before rmma, tf32: the three before rmma_c2; none where rmma
 * comes first: D < 64); never with a multi-stage solver.  Only then does
 * params hold M and c. */
static void test_cluster_fold(void **state) {
  (void)state;
  static const char kFolded[] = "// x itself is x0 + dt (S b3 + W3 sum_k h2_k)";
  static const struct {
    int dim, hidden;
    flowgen_precision precision;
    flowgen_solver solver;
    const char *tune;
    int folded;  /* cluster variants with the fold */
  } cases[] = {{64, 128, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER, NULL, 6},
               {64, 128, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER, "skip=rmma3", 6},
               {64, 128, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER, NULL, 3},
               {64, 128, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER, "skip=rmma_c2", 6},
               {32, 128, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER, NULL, 1},
               {64, 256, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER, NULL, 0},
               {64, 128, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_RK4, NULL, 0},
               {64, 128, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER, NULL, 1},
               {64, 128, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER, "rmma=1:", 0},
               {32, 128, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER, NULL, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c) {
    flowgen_spec spec = fg_test_spec(cases[c].dim, cases[c].hidden, 4, 90);
    spec.precision = cases[c].precision;
    spec.solver = cases[c].solver;
    flowgen_options opts = {.tune = cases[c].tune};
    flowgen_kernel *k = generate(&spec, &opts);
    const char *src = flowgen_kernel_source(k);
    if (count_of(src, kFolded) != cases[c].folded)
      fail_msg("D=%d H=%d case %zu: %d folded variants, not %d", cases[c].dim, cases[c].hidden, c,
               count_of(src, kFolded), cases[c].folded);
    if (cases[c].folded) {
      assert_contains(src, "constexpr int k_wcf = ");  /* M among a thread's weights */
      assert_contains(src, "constexpr int k_w1b3 = ");
      assert_string_equal(flowgen_kernel_variant(k, 0)->strategy, "cluster4_r1");
    } else {
      assert_lacks(src, "k_wcf");
    }
    flowgen_kernel_free(k);
  }
  flowgen_spec spec = fg_test_spec(64, 128, 4, 80);  /* no clusters before sm_90 */
  flowgen_kernel *k = generate(&spec, NULL);
  assert_lacks(flowgen_kernel_source(k), "k_wc");
  flowgen_kernel_free(k);
}

/* The cluster kernel's first cluster barrier (every block's mbarriers
 * exist before anyone sends) is split: its arrival (relaxed, after
 * fence.mbarrier_init) right after their initialization, before any load,
 * its wait after the loads of the weights and x0; the closing one arrives
 * (relaxed) once a block has received every partial addressed to it and
 * waits at the very end.  Folded: rank 0 arrives after the last exchange,
 * the others (release) once they have sent their last partials, not
 * before (compute-sanitizer then never finished the folded kernel), and
 * the own-slot zeros are on the own slots only.  No whole cluster
 * barrier is left in the kernel. */
static void test_cluster_barriers_split(void **state) {
  (void)state;
  static const char kRelaxedStart[] = "cluster_arrive_relaxed();  // the mbarriers' initialization fenced above";
  static const int hidden[] = {256, 128};  /* unfolded, folded (own partial kept) */
  for (size_t c = 0; c < sizeof hidden / sizeof *hidden; ++c) {
    const bool folded = hidden[c] == 128;
    flowgen_spec spec = fg_test_spec(64, hidden[c], 4, 90);
    flowgen_kernel *k = generate(&spec, NULL);
    char *kernel = between(flowgen_kernel_source(k), "strategy \"cluster4_r1\"", "// ---- strategy");
    const char *body = strstr(kernel, "extern \"C\" __global__");
    assert_non_null(body);
    assert_int_equal(strstr(body, "Layer 3 folded") != NULL, folded);
    const char *init = strstr(body, "barrier_init(");
    const char *arrive = strstr(body, kRelaxedStart);
    const char *load = strstr(body, "load_thread<");
    const char *x0 = strstr(body, "x0[");
    const char *wait = strstr(body, "cluster_wait();");
    const char *loop = strstr(body, "for (int k = 0; k < kSteps; ++k)");
    assert_true(init && arrive && load && x0 && wait && loop);
    assert_true(init < arrive && arrive < load && load < x0 && x0 < wait && wait < loop);
    assert_int_equal(count_of(body, kRelaxedStart), 1);
    assert_int_equal(count_of(body, "cluster_wait();"), 2);
    assert_int_equal(count_of(body, "cluster_arrive_relaxed();"), 2);
    assert_int_equal(count_of(body, "cluster_arrive();"), folded ? 1 : 0);
    assert_int_equal(count_of(body, "partials[i / kPartial][rank * kPartial + i % kPartial] = 0.0f;"), folded ? 1 : 0);
    assert_lacks(body, "cluster_sync();");
    const char *last_wait = strstr(wait + 1, "cluster_wait();");
    const char *end_arrive = strstr(loop, "cluster_arrive_relaxed();");
    assert_true(end_arrive && end_arrive < last_wait);
    if (folded) {
      /* the senders' arrival after their last sends, rank 0's after its wait */
      const char *sender_arrive = strstr(loop, "if (rank != 0) cluster_arrive();");
      const char *last_send = strstr(loop, "send(cluster_address(shared_address(partials[buffer]) + offset, 0)");
      const char *last_exchange = strstr(loop, "barrier_wait(barrier, (exchange >> 1) & 1);\n      cluster_arrive_relaxed();");
      assert_true(last_send && sender_arrive && last_exchange);
      assert_true(last_send < sender_arrive && sender_arrive < last_exchange && last_exchange < last_wait);
      assert_lacks(loop, "if (rank != 0) cluster_arrive_relaxed();");
    }
    assert_lacks(last_wait + strlen("cluster_wait();"), ";");  /* the kernel's last statement */
    free(kernel);
    flowgen_kernel_free(k);
  }
}

/* A block's own partial of an exchange is not sent to itself through
 * distributed shared memory where the one thread that reads it back holds
 * it (the folded cluster kernel: the unit's own thread; rmma3: the thread
 * that stored its word), so each block expects the others' bytes only;
 * the unfolded cluster kernel still sends it (its Euler step reads the
 * partials of outputs other threads summed). */
static void test_own_partial(void **state) {
  (void)state;
  static const char kFoldOthers[] = "constexpr unsigned kBytes = (kClusterBlocks - 1) * kPartial * 4;";
  static const char kFoldAll[] = "constexpr unsigned kBytes = kClusterBlocks * kPartial * 4;";
  static const char kRmma3Others[] = "constexpr unsigned kBytes = (kClusterBlocks - 1) * kWords * 16;";
  flowgen_spec spec = fg_test_spec(64, 128, 4, 90);  /* folded: six cluster variants */
  flowgen_kernel *k = generate(&spec, NULL);
  assert_int_equal(count_of(flowgen_kernel_source(k), kFoldOthers), 6);
  assert_int_equal(count_of(flowgen_kernel_source(k), kFoldAll), 0);
  assert_int_equal(count_of(flowgen_kernel_source(k), "for (int i = 1; i < kClusterBlocks; ++i) {"), 6);
  flowgen_kernel_free(k);
  spec = fg_test_spec(64, 256, 4, 90);  /* not folded; rmma3 after it */
  k = generate(&spec, NULL);
  assert_int_equal(count_of(flowgen_kernel_source(k), kFoldAll), 6);
  assert_int_equal(count_of(flowgen_kernel_source(k), kFoldOthers), 0);
  assert_int_equal(count_of(flowgen_kernel_source(k), kRmma3Others), 1);
  flowgen_kernel_free(k);
}

/* The gemm variant: a layer's tiles of 128 rows, or lower where a layer
 * has few outputs (layer 3 of D=128) or taller tiles would leave blocks
 * idle (H=768: 64 rows); 32 inputs a stage, 64 where no tile is taller
 * than 32 rows (D=2, H=640); the chunk's state and activations in the
 * scratch area (4096 rows at H=512); lower tiles for a small batch or a
 * last chunk. */
static void test_gemm_forms(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(128, 512, 4, 90);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  const flowgen_variant *v = find_strategy(k, "gemm");
  assert_contains(src, "constexpr int kBK = 32;");
  assert_contains(src, "product<512, 128, 1>(");
  assert_contains(src, "product<512, 512, 4>(");
  assert_contains(src, "if (block_rows<OUT>(rows, MT / 2) < block_rows<OUT>(rows, MT)) {");
  assert_true(v->params_bytes >= 4 * (params_floats(128, 512) + 4096 * (2 * 512 + 128) + 4));
  assert_contains(src, "constexpr int kScratchRows = 4096;");
  assert_contains(src, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
  assert_contains(src, "sum[mt][nt][q] += acc[mt][nt][q];");
  flowgen_kernel_free(k);
  static const struct {
    int dim, hidden, rows, bk;
  } cases[] = {{1024, 1024, 128, 32}, {64, 768, 64, 32}, {2, 640, 32, 64}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    spec = fg_test_spec(cases[i].dim, cases[i].hidden, 4, 90);
    k = generate(&spec, NULL);
    assert_int_equal(find_strategy(k, "gemm")->rows_per_block, cases[i].rows);
    char line[64];
    snprintf(line, sizeof line, "constexpr int kBK = %d;", cases[i].bk);
    assert_contains(flowgen_kernel_source(k), line);
    flowgen_kernel_free(k);
  }
}

/* gemm on each precision's own operands and copies (only=tiled:gemm): tf32
 * one m16n8k8 a product, the operands rounded (no tf32x3 split); bf16 and
 * fp16 m16n8k16 from 16-bit weight tiles (ldmatrix); after the tiled
 * kernels, where the mma kernel does not fit (H=2048) as where it does. */
static void test_gemm_each_precision(void **state) {
  (void)state;
  static const struct {
    flowgen_precision precision;
    const char *mma, *weights;
  } cases[] = {{FLOWGEN_PRECISION_TF32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "float"},
               {FLOWGEN_PRECISION_BF16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "unsigned short"},
               {FLOWGEN_PRECISION_FP16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "unsigned short"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    for (int hidden = 256; hidden <= 2048; hidden *= 8) {
      flowgen_spec spec = fg_test_spec(64, hidden, 4, 90);
      spec.precision = cases[i].precision;
      flowgen_options o = {.tune = "only=tiled:gemm"};
      flowgen_kernel *k = generate(&spec, &o);
      const flowgen_variant *v = find_strategy(k, "gemm");
      assert_non_null(v);
      /* after the tiled kernel's first batches (0 and 1) at H >= 1024, after
       * the 8-row kernel's last below */
      assert_int_equal(v->min_batch, hidden >= 1024 ? 2 : 1057);
      assert_int_equal(v->max_batch, -1);
      char *gemm = between(flowgen_kernel_source(k), "strategy \"gemm\"", "extern \"C\"");
      assert_contains(gemm, cases[i].mma);
      char line[64];
      snprintf(line, sizeof line, "using WeightT = %s;", cases[i].weights);
      assert_contains(gemm, line);
      assert_lacks(gemm, "split(ar[0]"); /* no tf32x3 */
      if (cases[i].precision != FLOWGEN_PRECISION_TF32)
        assert_contains(gemm, "ldmatrix.sync.aligned.m8n8.x2.trans");
      free(gemm);
      flowgen_kernel_free(k);
    }
  }
}

/* The matrix-unit kernel: bf16 on m16n8k16; tf32 with h1 and h2 stored
 * rounded (as_input), so that layers 2 and 3 take their fragments as they
 * are, and layer 1's input, the state, rounded at load. */
static void test_mma_forms(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(64, 256, 4, 90);
  spec.precision = FLOWGEN_PRECISION_BF16;
  flowgen_options opts = {.tune = "skip=rmma"};
  flowgen_kernel *k = generate(&spec, &opts);
  assert_non_null(find_strategy(k, "mma16"));
  assert_contains(flowgen_kernel_source(k), "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
  flowgen_kernel_free(k);
  spec.precision = FLOWGEN_PRECISION_TF32;
  k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "return __uint_as_float(to_tf32(v));");
  assert_contains(src, "STORED_AS_INPUT ? __float_as_uint(x[q]) : to_tf32(x[q])");
  assert_contains(src, "dense<64, 256, 68, 4, false, ");
  assert_contains(src, "dense<256, 256, 260, 4, true, ");
  assert_contains(src, "put(&h1[r * kHStride + j], as_input(silu(");
  flowgen_kernel_free(k);
}

/* D x H, S=4, in `precision` for sm_90a (sm_90 with its arch-specific
 * features: the wgmma variants). */
static flowgen_spec sm90a_spec(int dim, int hidden, flowgen_precision precision) {
  flowgen_spec spec = fg_test_spec(dim, hidden, 4, 90);
  spec.precision = precision;
  spec.arch_specific = true;
  return spec;
}

/* The wgmma variant: its own copies of the weights in shared memory (made
 * visible to the async proxy), 128 outputs a wgmma and a last one of the
 * rest; at D=17, H=200 (rounded up to 32 and 208), three of 64 and one of
 * 16 (128 does not split 208 evenly); no named barriers. */
static void test_wgmma_forms(void **state) {
  (void)state;
  flowgen_spec spec = sm90a_spec(64, 256, FLOWGEN_PRECISION_BF16);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 ");
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 ");
  assert_contains(src, "constexpr int k_w1g = ");
  assert_contains(src, "fence.proxy.async.shared::cta;");
  assert_null(strstr(src, "bar.sync"));
  flowgen_kernel_free(k);
  spec = sm90a_spec(17, 200, FLOWGEN_PRECISION_FP16);
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  assert_contains(src, "constexpr int kDp = 32;");
  assert_contains(src, "constexpr int kHp = 208;");
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 ");
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 ");
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 ");
  assert_contains(src, "for (int n0 = 0; n0 < 192; n0 += 64) {");
  assert_contains(src, "for (int n0 = 192; n0 < 208; n0 += 16) {");
  flowgen_kernel_free(k);
}

/* The streamed warpgroup kernels at D=17, H=200: padded to 32 and 224
 * (chunks of 32 outputs), layer 2's inputs in pieces of 128 and 96 (the
 * second's call: piece96). */
static void expect_ws_padded(flowgen_precision precision, const char *piece96) {
  flowgen_spec spec = sm90a_spec(17, 200, precision);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "constexpr int kDp = 32;");
  assert_contains(src, "constexpr int kHp = 224;");
  assert_contains(src, "constexpr int kNC = 32;");
  assert_contains(src, piece96);
  flowgen_kernel_free(k);
}

/* The streamed warpgroup kernel, tf32: its pieces in params' segment ws, in
 * the order the producer copies them: layer 1 by 32 inputs, then for each
 * chunk of 64 outputs of layer 2 its inputs by 128 and layer 3 on them,
 * multicast over a cluster of 2; warpgroup 1 starts each layer 1 once
 * warpgroup 0's is done, where the ring is shorter than a step's pieces
 * (not at D=16, H=32: 3 pieces, 16 stages); the operands unmasked (the
 * matrix units ignore the bits below tf32's).  Blocks alone and 32 outputs
 * a chunk (wgstream.blocks=1, wgstream.n=32): 28 pieces, no multicast. */
static void test_wgstream_forms(void **state) {
  (void)state;
  flowgen_spec spec = sm90a_spec(64, 256, FLOWGEN_PRECISION_TF32);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 ");
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 ");
  assert_contains(src, "multicast::cluster");
  assert_contains(src, "in 14 pieces as streamed");
  assert_contains(src, "put(r, w + 0, 32768);  // W1, outputs 0-255, inputs 0-31\n"
                       "    put(r, w + 32768, 32768);  // W1, outputs 0-255, inputs 32-63");
  assert_contains(src, "constexpr int kK1 = 32;");
  assert_contains(src, "turn_wait(group, group == 1);");
  assert_contains(src, "turn_pass(group, group == 0);  // warpgroup 0's layer 1 done");
  assert_contains(src, "put(r, w + 65536, 32768);  // W2, outputs 0-63, inputs 0-127\n"
                       "    put(r, w + 98304, 32768);  // W2, outputs 0-63, inputs 128-255\n"
                       "    put(r, w + 131072, 16384);  // W3, outputs 0-63, inputs 0-63");
  assert_contains(src, "constexpr int kStages = 5;");
  assert_contains(src, "chunk_end<true>(c, d2, d3, b2p, t, pc);");
  assert_contains(src, "tf32_operand(float x) { return __float_as_uint(x) + 0x1000u; }");
  char *ws = between(src, "// ---- strategy \"wgstream\"", "extern \"C\" __global__");
  assert_contains(ws, "  return tf32_operand(fmaf(h, th, h));\n");
  free(ws);
  assert_contains(src, "a1[i][2 * (q % 2) + q / 2] = tf32_operand(x1);");
  assert_contains(src, "a1[i][2 * (q % 2) + q / 2] = tf32(xs[");
  flowgen_kernel_free(k);

  flowgen_options opts = {.tune = "wgstream.blocks=1,wgstream.n=32"};
  k = generate(&spec, &opts);
  const flowgen_variant *v = find_strategy(k, "wgstream");
  assert_int_equal(v->cluster_blocks, 1);
  assert_int_equal(v->rows_per_block, 128);
  src = flowgen_kernel_source(k);
  assert_false(strstr(src, "multicast::cluster"));
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 ");
  assert_contains(src, "in 28 pieces as streamed");
  assert_contains(src, "put(r, w + 81920, 16384);  // W2, outputs 0-31, inputs 128-255\n"
                       "    put(r, w + 98304, 8192);  // W3, outputs 0-63, inputs 0-31");
  assert_contains(src, "constexpr int kStages = 11;");
  assert_contains(src, "chunk_end<false>(c, d2, d3, b2p, t, pc);");
  flowgen_kernel_free(k);

  expect_ws_padded(FLOWGEN_PRECISION_TF32, "layer2_piece<128, 96>(d2, h1, pc);  // inputs 128-223");

  spec = sm90a_spec(16, 32, FLOWGEN_PRECISION_TF32);
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  assert_non_null(find_strategy(k, "wgstream"));
  assert_contains(src, "in 3 pieces as streamed");
  assert_contains(src, "constexpr int kStages = 16;");
  assert_contains(src, "constexpr int kK1 = 16;");
  assert_false(strstr(src, "turn_wait"));
  flowgen_kernel_free(k);
}

/* fp32 as tf32x3 on the streamed warpgroup kernel: one consumer warpgroup,
 * 32 outputs a chunk; the weights' high parts in segment ws and their low
 * parts in wsl, each piece copied as both into one stage, a chunk's W2
 * pieces before the last chunk's W3 piece (the next chunk's layer 2 in
 * flight during a chunk's SiLU); h1's low part the A operand from shared
 * memory; no tf32x3 copies for the mma kernel it replaces (D=17: that
 * kernel could not read the fp32 matrices themselves), but with
 * skip=wgstream3. */
static void test_wgstream3_forms(void **state) {
  (void)state;
  flowgen_spec spec = sm90a_spec(64, 256, FLOWGEN_PRECISION_FP32);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 ");
  assert_contains(src, "void product3(float (&d)[16], const unsigned (&ah)[4], unsigned long long al,");
  assert_contains(src, "void product3(float (&d)[32], const unsigned (&ah)[4], unsigned long long al,");
  assert_contains(src, "in 28 pieces as streamed (D, H padded to 64, 256): their high parts");
  assert_contains(src, "constexpr int k_wsl = ");
  assert_contains(src, "put(r, hi + 0, 16384, lo + 0);  // W1, outputs 0-255, inputs 0-15");
  assert_contains(src, "put(r, hi + 122880, 16384, lo + 122880);  // W2, outputs 32-63, inputs 128-255\n"
                       "    put(r, hi + 98304, 8192, lo + 98304);  // W3, outputs 0-63, inputs 0-31");
  assert_contains(src, "put(r, hi + 385024, 8192, lo + 385024);  // W3, outputs 0-63, inputs 224-255\n  }");
  assert_contains(src, "constexpr int kStages = 4;");
  assert_contains(src, "constexpr int kStageBytes = 32768;");
  assert_false(strstr(src, "multicast::cluster"));
  flowgen_kernel_free(k);
  flowgen_options opts = {.tune = "wgstream.blocks=2"};
  k = generate(&spec, &opts);
  assert_int_equal(find_strategy(k, "wgstream3")->cluster_blocks, 2);
  assert_int_equal(find_strategy(k, "wgstream3")->rows_per_block, 128);
  assert_contains(flowgen_kernel_source(k), "multicast::cluster");
  flowgen_kernel_free(k);
  expect_ws_padded(FLOWGEN_PRECISION_FP32, "layer2_piece<128, 96, 12288>(d, h1, base, pc);  // inputs 128-223");
  spec = sm90a_spec(17, 200, FLOWGEN_PRECISION_FP32);
  k = generate(&spec, NULL);
  assert_null(strstr(flowgen_kernel_source(k), "constexpr int k_w1m"));
  flowgen_kernel_free(k);
  opts.tune = "skip=wgstream3";
  k = generate(&spec, &opts);
  assert_contains(flowgen_kernel_source(k), "constexpr int k_w1m");
  flowgen_kernel_free(k);
}

/* The register-resident kernel: bf16 on m16n8k16, its fragment-order
 * copies, two 16-unit tiles a warp where that leaves 8 warps, SiLU on
 * packed pairs from sm_90 (fp32 tanh on sm_80); fp16 at D=17, H=200: W1 in
 * registers; RK4: the stages' inputs and sums; tf32 over clusters of 2
 * (m16n8k8, 32-bit copies, W2's 256 x 256 floats between its offset and
 * W3's). */
static void test_rmma_forms(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(64, 256, 4, 90);
  spec.precision = FLOWGEN_PRECISION_BF16;
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ");
  assert_contains(src, "movmatrix.sync.aligned.m8n8.trans.b16");
  assert_contains(src, "tanh.approx.bf16x2");
  assert_contains(src, "constexpr int kMw = 2;");
  assert_contains(src, "constexpr int k_w1r = ");
  assert_contains(src, "v = pack_frag<256, 256, kHidden, kHidden>(i - k_w2r");
  flowgen_kernel_free(k);
  spec.arch = 80;
  k = generate(&spec, NULL);
  assert_null(strstr(flowgen_kernel_source(k), "tanh.approx.bf16x2"));
  assert_contains(flowgen_kernel_source(k), "tanh.approx.f32");
  flowgen_kernel_free(k);
  spec = fg_test_spec(17, 200, 4, 90);
  spec.precision = FLOWGEN_PRECISION_FP16;
  k = generate(&spec, NULL);
  assert_contains(flowgen_kernel_source(k), "tanh.approx.f16x2");
  assert_contains(flowgen_kernel_source(k), "uint4 w1[kMw1][kKt1];");
  flowgen_kernel_free(k);
  spec = fg_test_spec(64, 256, 4, 90);
  spec.precision = FLOWGEN_PRECISION_BF16;
  spec.solver = FLOWGEN_SOLVER_RK4;
  k = generate(&spec, NULL);
  assert_non_null(find_strategy(k, "rmma"));
  assert_contains(flowgen_kernel_source(k), "float sums[kPerThread];");
  assert_contains(flowgen_kernel_source(k), "// stage 4 of 4 (rk4)");
  flowgen_kernel_free(k);
  spec = fg_test_spec(64, 256, 4, 90);
  spec.precision = FLOWGEN_PRECISION_TF32;
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  assert_contains(src, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ");
  assert_contains(src, "constexpr int kK = 8;");
  assert_contains(src, "v = pack_frag<256, 256, kHidden, kHidden, false>(i - k_w2r");
  assert_contains(src, "asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(bits)");
  assert_null(strstr(src, "tanh.approx.bf16x2"));
  long w2r = 0, w3r = 0;
  assert_int_equal(sscanf(strstr(src, "constexpr int k_w2r = "), "constexpr int k_w2r = %ld;", &w2r), 1);
  assert_int_equal(sscanf(strstr(src, "constexpr int k_w3r = "), "constexpr int k_w3r = %ld;", &w3r), 1);
  assert_int_equal(w3r - w2r, 256 * 256);
  flowgen_kernel_free(k);
}

/* fp32 as tf32x3 over clusters of 4 (rmma3): by 16 samples a cluster, the
 * weights' high and low tf32 copies in params, packed from fp32 (the low
 * parts less the high ones), three products each; H padded to a multiple
 * of 64 (D=17, H=200). */
static void test_rmma3_forms(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(64, 256, 4, 90);
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "constexpr int kRows = 16;  // samples a cluster");
  assert_contains(src, "constexpr int k_w1rl = ");
  assert_contains(src, "v = pack_frag<256, 64, kHidden, kDim, false>(i - k_w1r,");
  assert_contains(src, "v = pack_frag<256, 256, kHidden, kHidden, true>(i - k_w2rl,");
  assert_contains(src, "if (Low) asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(bits) : \"f\"(v - __uint_as_float(bits)));");
  assert_contains(src, "__device__ __forceinline__ void mma3(");
  flowgen_kernel_free(k);
  spec = fg_test_spec(17, 200, 4, 90);
  k = generate(&spec, NULL);
  assert_contains(flowgen_kernel_source(k), "constexpr int kHp = 256;  // H rounded up to 64");
  flowgen_kernel_free(k);
}

/* Where strategies stop applying (edges between the golden table's
 * shapes): none of these cases' plans has a variant of the strategy. */
static void test_applicability_edges(void **state) {
  (void)state;
  /* wgmma: fp32, tf32, another solver, sm_80, H above 256, D above 160,
   * weights beyond shared memory (D=128, H=256: 256 KB); plain sm_90 */
  static const plan_case wgmma[] = {{64, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {64, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER},
                                    {64, 256, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_HEUN},
                                    {64, 256, 80, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                    {16, 272, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                    {161, 64, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                    {128, 256, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(wgmma, sizeof wgmma / sizeof *wgmma, true, "wgmma");
  expect_no_strategy(wgmma, 1, false, "wgmma");
  /* wgstream: bf16, another solver, D above 64, H above 256 */
  static const plan_case wgstream[] = {{64, 256, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                       {64, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_RK4},
                                       {65, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER},
                                       {64, 257, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(wgstream, sizeof wgstream / sizeof *wgstream, true, "wgstream");
  /* rmma3: other solvers, before sm_90, H < 64, weights beyond a thread's
   * registers (D=144, H=128; D=80, H=256; D=112, H=128: 8 state elements a
   * thread and an odd count of layer 3's m-tiles), tf32 */
  static const plan_case rmma3[] = {{64, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_RK4},
                                    {64, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_HEUN},
                                    {64, 256, 80, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {64, 32, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {144, 128, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {80, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {112, 128, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                    {64, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(rmma3, sizeof rmma3 / sizeof *rmma3, false, "rmma3_r8");
  expect_no_strategy(rmma3, sizeof rmma3 / sizeof *rmma3, false, "rmma3_r16");
  /* rmma: fp32, tf32 (over clusters only), sm_75, D=112 with H=256 and
   * D=80 with H=240 (too many registers), H=512, D=256 with H=64 (16 state
   * elements a thread) */
  static const plan_case rmma[] = {{64, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                   {64, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER},
                                   {64, 256, 75, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER},
                                   {112, 256, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                   {64, 512, 90, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_EULER},
                                   {80, 240, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER},
                                   {256, 64, 90, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(rmma, sizeof rmma / sizeof *rmma, false, "rmma");
  /* tf32 over clusters: before sm_90, another solver, D=17, H=200 (13
   * tiles of 16 units split over no cluster) */
  static const plan_case rmma_tf32[] = {{64, 256, 80, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER},
                                        {64, 256, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_RK4},
                                        {17, 200, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(rmma_tf32, sizeof rmma_tf32 / sizeof *rmma_tf32, false, "rmma_c2");
  expect_no_strategy(rmma_tf32, sizeof rmma_tf32 / sizeof *rmma_tf32, false, "rmma_c4");
  /* gemm: tf32, before sm_80, 394 KB of weights */
  static const plan_case gemm[] = {{128, 512, 90, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_EULER},
                                   {128, 512, 75, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER},
                                   {64, 256, 90, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_EULER}};
  expect_no_strategy(gemm, sizeof gemm / sizeof *gemm, false, "gemm");
}

static void test_name_is_respected(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  assert_int_equal(flowgen_spec_set(&spec, "name", "policy", NULL),
                   FLOWGEN_OK);
  flowgen_options opts = {.host_launcher = true};
  flowgen_kernel *k = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(k);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    if (!starts_with(v->symbol, "policy_") || !has_kernel(src, v->symbol))
      fail_msg("variant symbol %s does not use the name", v->symbol);
    assert_string_equal(v->pack_symbol, "policy_pack");
  }
  assert_non_null(find_strategy(k, "tiled"));
  assert_string_equal(find_strategy(k, "tiled")->symbol, "policy_tiled");
  assert_true(has_kernel(src, "policy_pack"));
  assert_contains(src, "extern \"C\" cudaError_t policy_launch(");
  assert_contains(src, "--name policy");
  assert_lacks(src, "flow_d64");
  char *json = flowgen_kernel_describe(k);
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "name")),
                      "policy");
  json_decref(root);
  free(json);
  flowgen_kernel_free(k);
}

static void test_host_launcher(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *plain = generate(&spec, NULL);
  flowgen_options opts = {.host_launcher = true};
  flowgen_kernel *with = generate(&spec, &opts);
  const char *p = flowgen_kernel_source(plain), *w = flowgen_kernel_source(with);

  assert_lacks(p, "_launch(");
  assert_lacks(p, "__CUDACC_RTC__");
  assert_lacks(p, "cuda_runtime.h");

  assert_contains(w, "#if !defined(__CUDACC_RTC__)\n#include <cuda_runtime.h>");
  assert_contains(w, "extern \"C\" cudaError_t flow_d64_h256_s32_fp32_launch(");
  assert_contains(w, "extern \"C\" cudaError_t flow_d64_h256_s32_fp32_pack_params(");
  assert_contains(w, "extern \"C\" size_t flow_d64_h256_s32_fp32_params_bytes"
                     "(void) { return 1772800; }");
  /* The tiled variant: past 48 KiB of shared memory the launcher opts in. */
  const flowgen_variant *tiled = find_strategy(with, "tiled");
  assert_non_null(tiled);
  assert_true(tiled->shared_bytes > 48 * 1024);
  char line[256];
  snprintf(line, sizeof line,
           "%s, cudaFuncAttributeMaxDynamicSharedMemorySize, %zu)",
           tiled->symbol, tiled->shared_bytes);
  assert_contains(w, line);
  snprintf(line, sizeof line,
           "%s<<<static_cast<unsigned>(blocks), %d, %zu, stream>>>",
           tiled->symbol, tiled->block_threads, tiled->shared_bytes);
  assert_contains(w, line);
  /* Each variant's batch range is tested before its launch. */
  for (int i = 0; i < flowgen_kernel_variant_count(with); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(with, i);
    if (v->max_batch >= 0)
      snprintf(line, sizeof line, "if (batch >= %lld && batch <= %lld) {",
               (long long)v->min_batch, (long long)v->max_batch);
    else
      snprintf(line, sizeof line, "if (batch >= %lld) {",
               (long long)v->min_batch);
    assert_contains(w, line);
  }
  /* The #if is closed, after the launcher. */
  const char *open = strstr(w, "#if !defined(__CUDACC_RTC__)");
  const char *close = strstr(w, "#endif  // !__CUDACC_RTC__");
  assert_non_null(close);
  assert_true(close > strstr(open, "_launch("));
  /* The device code is the same with and without the launcher. */
  const char *pd = strstr(p, "namespace "), *wd = strstr(w, "namespace ");
  assert_non_null(pd);
  assert_non_null(wd);
  assert_true(strlen(wd) > strlen(pd));
  assert_memory_equal(pd, wd, strlen(pd));
  /* Variants do not depend on the launcher. */
  assert_int_equal(flowgen_kernel_variant(plain, 0)->shared_bytes,
                   flowgen_kernel_variant(with, 0)->shared_bytes);
  flowgen_kernel_free(plain);
  flowgen_kernel_free(with);

  /* Under 48 KiB, no opt-in. */
  spec = fg_test_spec(3, 12, 5, 90);
  with = generate(&spec, &opts);
  for (int i = 0; i < flowgen_kernel_variant_count(with); ++i)
    assert_true(flowgen_kernel_variant(with, i)->shared_bytes <= 48 * 1024);
  assert_lacks(flowgen_kernel_source(with),
               "cudaFuncAttributeMaxDynamicSharedMemorySize");
  assert_contains(flowgen_kernel_source(with), "_launch(");
  flowgen_kernel_free(with);
}

/* ---- describe and pick ------------------------------------------------------ */

static void test_describe_json(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = generate(&spec, NULL);
  const flowgen_variant *v = flowgen_kernel_variant(k, 0);
  char *text = flowgen_kernel_describe(k);
  assert_non_null(text);
  size_t n = strlen(text);
  assert_true(n > 2);
  assert_int_equal(text[n - 1], '\n');
  assert_true(text[n - 2] != '\n');

  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  if (!root) fail_msg("describe is not JSON: %s (line %d)", jerr.text, jerr.line);
  assert_true(json_is_object(root));
  assert_string_equal(json_string_value(json_object_get(root, "generator")),
                      "flowgen " FLOWGEN_VERSION);
  assert_string_equal(json_string_value(json_object_get(root, "name")),
                      "flow_d64_h256_s32_fp32");
  assert_string_equal(json_string_value(json_object_get(root, "strategy")),
                      v->strategy);
  assert_string_equal(json_string_value(json_object_get(root, "arch")), "sm_90");
  assert_string_equal(json_string_value(json_object_get(root, "solver")), "euler");
  assert_string_equal(json_string_value(json_object_get(root, "precision")), "fp32");
  assert_int_equal(json_integer_value(json_object_get(root, "dim")), 64);
  assert_int_equal(json_integer_value(json_object_get(root, "hidden")), 256);
  assert_int_equal(json_integer_value(json_object_get(root, "steps")), 32);
  assert_int_equal(json_integer_value(json_object_get(root, "source_bytes")),
                   flowgen_kernel_source_size(k));

  json_t *variants = json_object_get(root, "variants");
  assert_true(json_is_array(variants));
  assert_int_equal(json_array_size(variants), flowgen_kernel_variant_count(k));
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *vi = flowgen_kernel_variant(k, i);
    json_t *ji = json_array_get(variants, (size_t)i);
    assert_string_equal(json_string_value(json_object_get(ji, "symbol")),
                        vi->symbol);
    assert_string_equal(json_string_value(json_object_get(ji, "pack_symbol")),
                        vi->pack_symbol);
    assert_string_equal(json_string_value(json_object_get(ji, "strategy")),
                        vi->strategy);
    json_t *block = json_object_get(ji, "block");
    assert_int_equal(json_integer_value(json_object_get(block, "x")),
                     vi->block_threads);
    assert_int_equal(json_integer_value(json_object_get(block, "y")), 1);
    assert_int_equal(json_integer_value(json_object_get(block, "z")), 1);
    assert_int_equal(json_integer_value(json_object_get(ji, "shared_bytes")),
                     vi->shared_bytes);
    assert_int_equal(json_integer_value(json_object_get(ji, "params_bytes")),
                     1772800);
    assert_int_equal(json_integer_value(json_object_get(ji, "rows_per_block")),
                     vi->rows_per_block);
    assert_int_equal(json_integer_value(json_object_get(ji, "cluster_blocks")),
                     vi->cluster_blocks);
    assert_int_equal(json_integer_value(json_object_get(ji, "min_batch")),
                     vi->min_batch);
    assert_int_equal(json_integer_value(json_object_get(ji, "max_batch")),
                     vi->max_batch);
  }
  json_t *v0 = json_array_get(variants, 0);
  assert_string_equal(json_string_value(json_object_get(v0, "symbol")), v->symbol);
  assert_true(starts_with(v->symbol, "flow_d64_h256_s32_fp32_"));
  assert_int_equal(json_integer_value(json_object_get(
                       json_object_get(v0, "block"), "x")), 256);
  assert_true(json_integer_value(json_object_get(v0, "params_bytes")) > 0);
  /* The tiled variant keeps its tile in dynamic shared memory. */
  const flowgen_variant *tiled = find_strategy(k, "tiled");
  assert_non_null(tiled);
  assert_true(tiled->shared_bytes > 0);
  json_decref(root);

  /* Sorted keys: "arch" comes before "dim", "dim" before "variants". */
  const char *arch = strstr(text, "\"arch\""), *dim = strstr(text, "\"dim\"");
  const char *vars = strstr(text, "\"variants\"");
  assert_true(arch && dim && vars && arch < dim && dim < vars);
  free(text);
  flowgen_kernel_free(k);
}

static void test_pick(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = generate(&spec, NULL);
  static const int64_t batches[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 64,
                                    65, 1000, 1000000, INT64_MAX};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    const flowgen_variant *v = flowgen_kernel_pick(k, batches[i]);
    if (!v) fail_msg("no variant for batch %lld", (long long)batches[i]);
    assert_true(batches[i] >= v->min_batch);
    assert_true(v->max_batch < 0 || batches[i] <= v->max_batch);
    /* The first variant whose range holds the batch. */
    const flowgen_variant *first = NULL;
    for (int j = 0; !first && j < flowgen_kernel_variant_count(k); ++j) {
      const flowgen_variant *c = flowgen_kernel_variant(k, j);
      if (batches[i] >= c->min_batch &&
          (c->max_batch < 0 || batches[i] <= c->max_batch))
        first = c;
    }
    assert_ptr_equal(v, first);
  }
  /* Batch 0 and a huge batch: the first and the open-ended variant. */
  assert_ptr_equal(flowgen_kernel_pick(k, 0), flowgen_kernel_variant(k, 0));
  assert_ptr_equal(flowgen_kernel_pick(k, INT64_MAX),
                   flowgen_kernel_variant(k, flowgen_kernel_variant_count(k) - 1));
  assert_null(flowgen_kernel_pick(k, -1));
  assert_null(flowgen_kernel_pick(k, INT64_MIN));
  flowgen_kernel_free(k);
}

/* ---- failures ----------------------------------------------------------------- */

static void test_invalid_spec_is_refused(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(0, 0, 32, 90);
  flowgen_kernel *k = (flowgen_kernel *)&spec; /* must be reset to NULL */
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_generate(&spec, NULL, &k, &err), FLOWGEN_INVALID);
  assert_null(k);
  assert_int_equal(err.status, FLOWGEN_INVALID);
  assert_non_null(strstr(err.message, "dim"));

  flowgen_spec_default(&spec);
  assert_int_equal(flowgen_generate(&spec, NULL, NULL, &err), FLOWGEN_INVALID);
  assert_int_equal(flowgen_generate(NULL, NULL, &k, &err), FLOWGEN_INVALID);
  assert_null(k);
}

/* ---- the model family -------------------------------------------------------- */

/* The declaration of `symbol` (from its name to the body's brace). */
static char *declaration(const char *src, const char *symbol) {
  char start[256];
  snprintf(start, sizeof start, "%s(", symbol);
  /* past the mentions in comments */
  for (const char *at = strstr(src, start); at; at = strstr(at + 1, start)) {
    const char *line = at;
    while (line > src && line[-1] != '\n') --line;
    if (strncmp(line, "//", 2) != 0) return between(at, start, "\n{");
  }
  fail_msg("no declaration of %s", symbol);
  return NULL;
}

/* A member other than the seed: the symbol says its fields; the pack
 * kernel takes the layers' tensors by value (Tensors), the conditioning
 * kernel forms layer 1's bias from c, every sampling kernel takes it and
 * the guidance weight; W1's columns are split at packing (x's, the time
 * features' stage table, the conditioning's), in the input order; the
 * header names the model and the strategies that do not serve it. */
static void test_family_member(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.cond = 10;
  spec.layers = 4;
  spec.act = FLOWGEN_ACT_GELU;
  spec.time.features = 16;
  spec.time.scale = 2.5;
  snprintf(spec.input, sizeof spec.input, "tcx");
  spec.guidance = true;
  spec.solver = FLOWGEN_SOLVER_RK4;
  flowgen_kernel *k = generate(&spec, NULL);
  const char *src = flowgen_kernel_source(k);
  const char *name = "flow_d64_h256_s32_fp32_rk4_c10_l4_gelu_sin16_tcx_cfg";
  char symbol[128];
  snprintf(symbol, sizeof symbol, "%s_pack", name);
  assert_true(has_kernel(src, symbol));
  char *decl = declaration(src, symbol);
  assert_string_equal(decl, "const flowgen::flow_d64_h256_s32_fp32_rk4_c10_l4_gelu_sin16_tcx_cfg::Tensors tensors, "
                            "float* __restrict__ params)");
  free(decl);
  snprintf(symbol, sizeof symbol, "%s_cond", name);
  assert_true(has_kernel(src, symbol));
  /* its launch as described: the kernel's 256 threads, 2 blocks an SM */
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    assert_int_equal(flowgen_kernel_variant(k, i)->cond_threads, 256);
    assert_int_equal(flowgen_kernel_variant(k, i)->cond_blocks_per_sm, 2);
  }
  assert_non_null(strstr(src, "__launch_bounds__(256) " "flow_d64_h256_s32_fp32_rk4_c10_l4_gelu_sin16_tcx_cfg_cond("));
  decl = declaration(src, symbol);
  assert_string_equal(decl, "\n    const float* __restrict__ cond, const float* __restrict__ null_cond, long long batch,"
                            "\n    const float* __restrict__ params, float* __restrict__ cond_bias)");
  free(decl);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    assert_true(starts_with(v->symbol, name));
    assert_true(has_kernel(src, v->symbol));
    decl = declaration(src, v->symbol);
    assert_string_equal(decl, "const float* x0, float* x, long long batch,\n"
                              "    const float* __restrict__ params, const float* cond_bias, "
                              "float guidance)");
    free(decl);
  }
  assert_contains(src, "struct Tensors {\n  const float* w[kLayers];\n  const float* b[kLayers];\n};");
  assert_contains(src, "constexpr int kLayers = 4;");
  assert_contains(src, "constexpr int kIn = 90;");
  assert_contains(src, "constexpr int kCond = 10;");
  assert_contains(src, "constexpr int kXColumn = 26, kTimeColumn = 0, kCondColumn = 16;");
  assert_contains(src, "constexpr int kCondStride = 2 * kHidden;");
  assert_contains(src, "constexpr double kTimeScale = 2.5;");
  assert_contains(src, "__constant__ double kTimeStageC[kTimeStages] = {0.0, 0.5, 0.5, 1.0};");
  /* the segments: layer 4's, W1's conditioning columns, the stage table
   * (b1 + the time columns' share; no t column) */
  assert_contains(src, "constexpr int k_w4t = ");
  assert_contains(src, "constexpr int k_b4 = ");
  assert_contains(src, "constexpr int k_w1c = ");
  assert_contains(src, "constexpr int k_b1_stage = ");
  assert_lacks(src, "k_w1_time");
  assert_contains(src, "v = tensors.w[0][out * kIn + kCondColumn + c];");
  assert_contains(src, "v = stage_bias(tensors, (i - k_b1_stage) / kHidden, (i - k_b1_stage) % kHidden);");
  assert_contains(src, "__device__ __forceinline__ float act(float v)");
  assert_contains(src, "erff(");
  assert_contains(src, "//   flowgen --dim 64 --hidden 256 --steps 32 --solver rk4 --precision fp32 --arch sm_90 "
                       "--cond 10 --layers 4 --act gelu --time sin:16:2.5 --input t,c,x --guidance\n");
  assert_contains(src, "//   Linear(90, 256) - GELU - Linear(256, 256) - GELU - Linear(256, 256) - GELU - Linear(256, 64)\n");
  assert_contains(src, "// applied to [tau(t), c, x] (concatenated in this order)");
  assert_contains(src, "// Strategies that do not serve this model (left out of the plan):\n"
                       "//   cluster: L = 3 only\n");
  /* guidance: both rows through the hidden layers, the last layer once */
  assert_contains(src, "*h = as_input(fmaf(guidance, *h - u, u));");
  flowgen_kernel_free(k);

  /* Without conditioning the sampling kernels keep the seed's signature;
   * no conditioning kernel. */
  flowgen_spec_default(&spec);
  spec.layers = 2;
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    decl = declaration(src, flowgen_kernel_variant(k, i)->symbol);
    assert_string_equal(decl, "const float* x0, float* x, long long batch,\n    const float* __restrict__ params)");
    free(decl);
  }
  assert_contains(src, "flow_d64_h256_s32_fp32_l2_pack(const flowgen::flow_d64_h256_s32_fp32_l2::Tensors tensors,");
  assert_lacks(src, "_cond(");
  assert_lacks(src, "cond_bias");
  flowgen_kernel_free(k);

  /* The seed has none of it. */
  flowgen_spec_default(&spec);
  k = generate(&spec, NULL);
  src = flowgen_kernel_source(k);
  assert_lacks(src, "Tensors");
  assert_lacks(src, "_cond(");
  assert_lacks(src, "kLayers");
  assert_lacks(src, "Strategies that do not serve");
  flowgen_kernel_free(k);
}

/* The host launcher of a conditional member: pack_params over the layers'
 * arrays, the workspace's bytes, and the launch with the conditioning, the
 * null conditioning and the guidance weight (the conditioning kernel, then
 * the sampler). */
static void test_family_host_launcher(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.cond = 10;
  spec.guidance = true;
  flowgen_options opts = {.host_launcher = true};
  flowgen_kernel *k = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(k);
  assert_contains(src, "extern \"C\" cudaError_t flow_d64_h256_s32_fp32_c10_cfg_pack_params(\n"
                       "    const float* const* w, const float* const* b, void* params, cudaStream_t stream)\n");
  assert_contains(src, "extern \"C\" size_t flow_d64_h256_s32_fp32_c10_cfg_workspace_bytes(long long batch)\n{\n"
                       "  return batch > 0 ? static_cast<size_t>(batch) * 2048 : 0;\n}");
  assert_contains(src, "extern \"C\" cudaError_t flow_d64_h256_s32_fp32_c10_cfg_launch(\n"
                       "    const float* x0, float* x, long long batch, const void* params,\n"
                       "    const float* cond, const float* null_cond, float guidance, void* workspace,\n"
                       "    cudaStream_t stream)\n");
  assert_contains(src, "flow_d64_h256_s32_fp32_c10_cfg_cond<<<");
  const char *cond = strstr(src, "flow_d64_h256_s32_fp32_c10_cfg_cond<<<");
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const char *at = strstr(src, flowgen_kernel_variant(k, i)->symbol);
    while (at && at < cond) at = strstr(at + 1, flowgen_kernel_variant(k, i)->symbol);
    assert_non_null(at);  /* each variant launched after the conditioning kernel */
  }
  assert_contains(src, "static_cast<const float*>(params), static_cast<const float*>(workspace), guidance)");
  flowgen_kernel_free(k);
}

/* Refusals: a member whose hidden rows (guidance) exceed a block's shared
 * memory on sm_75; only= strategies that do not serve the member. */
static void test_family_refused(void **state) {
  (void)state;
  flowgen_spec spec = fg_test_spec(1024, 4096, 32, 75);
  spec.cond = 4;
  spec.guidance = true;
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_generate(&spec, NULL, &k, &err), FLOWGEN_UNSUPPORTED);
  assert_null(k);
  assert_contains(err.message, "D=1024, H=4096 needs 77872 bytes of shared memory per block, over the 65536");
  spec.guidance = false;  /* one row a sample fits */
  k = generate(&spec, NULL);
  flowgen_kernel_free(k);

  flowgen_spec_default(&spec);
  spec.layers = 4;
  flowgen_options opts = {.tune = "only=cluster:rmma3"};
  assert_int_equal(flowgen_generate(&spec, &opts, &k, &err), FLOWGEN_UNSUPPORTED);
  assert_null(k);
  assert_contains(err.message, "tune: no strategy left to serve this spec (left out for the model: ");
  assert_contains(err.message, "cluster: L = 3 only");
  assert_contains(err.message, "rmma3: L = 3 only");
}

/* ---- speed -------------------------------------------------------------------- */

/* The process's CPU time, in seconds. */
static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Generating the default shape, timed by the process's CPU time, not the
 * wall clock: under `make -j2 test` another test program (NVRTC on every
 * core) shares the two cores, and the best of 5 by the wall clock read 42
 * ms there against 26 to 28 alone; the best of 10 for the VM's noise. */
static void test_generation_is_fast(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  double best = 1e9;
  for (int i = 0; i < 10; ++i) {
    double t0 = cpu_seconds();
    flowgen_kernel *k = generate(&spec, NULL);
    double t = cpu_seconds() - t0;
    flowgen_kernel_free(k);
    if (t < best) best = t;
  }
  if (!fg_test_timing_checks()) {
    print_message("# generation %.1f ms under valgrind or a sanitizer: not timed\n",
                  best * 1e3);
    return;
  }
  print_message("# generating the default shape: %.1f ms of CPU time (best of 10)\n", best * 1e3);
  if (best >= 0.050)
    fail_msg("generating the default shape took %.1f ms of CPU time (limit 50 ms)",
             best * 1e3);
}

/* ---- locale ------------------------------------------------------------------- */

/* Sets LC_NUMERIC to a locale whose decimal point is ','; builds one with
 * localedef in dir when none is installed.  Returns false if it cannot. */
static bool set_comma_locale(const char *dir) {
  static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE",
                                      "fr_FR.UTF-8", "fr_FR.utf8", "fr_FR"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (setlocale(LC_NUMERIC, names[i]) &&
        strcmp(localeconv()->decimal_point, ",") == 0)
      return true;
  char command[PATH_SIZE + 128];
  snprintf(command, sizeof command,
           "localedef -i de_DE -f ISO-8859-1 '%s/de_DE' 2>&1", dir);
  char *out = NULL;
  int rc = fg_test_run(command, &out, NULL);
  free(out);
  if (rc != 0) return false;
  setenv("LOCPATH", dir, 1);
  bool ok = setlocale(LC_NUMERIC, "de_DE") &&
            strcmp(localeconv()->decimal_point, ",") == 0;
  unsetenv("LOCPATH");
  return ok;
}

/* A program that calls setlocale() (for its own output) must still get
 * CUDA with '.' decimal points: the same bytes as in the C locale. */
static void test_output_ignores_locale(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *c = generate(&spec, NULL);
  char *dir = fg_test_mkdtemp();
  bool comma = set_comma_locale(dir);
  if (!comma) {
    setlocale(LC_NUMERIC, "C");
    fg_test_rmtree(dir);
    free(dir);
    flowgen_kernel_free(c);
    print_message("# no locale with a decimal comma (and no localedef)\n");
    skip();
  }
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status st = flowgen_generate(&spec, NULL, &k, &err);
  char *json = st == FLOWGEN_OK ? flowgen_kernel_describe(k) : NULL;
  setlocale(LC_NUMERIC, "C");
  fg_test_rmtree(dir);
  free(dir);
  if (st != FLOWGEN_OK) {
    flowgen_kernel_free(c);
    fail_msg("generate under a decimal-comma locale: %s", err.message);
  }
  /* Check, free, then report (a failure must not leak under valgrind). */
  const char *src = flowgen_kernel_source(k);
  char *json_c = flowgen_kernel_describe(c);
  char problem[512] = "";
  const char *dt = strstr(src, "constexpr float kDt = ");
  if (!strstr(src, "constexpr float kDt = 0.03125f;"))
    snprintf(problem, sizeof problem, "kDt under a decimal-comma locale: %.40s",
             dt ? dt : "(missing)");
  else if (!strstr(src, "0.015625f, 0.046875f"))
    snprintf(problem, sizeof problem, "kStepTime differs under the locale");
  else if (strcmp(src, flowgen_kernel_source(c)) != 0)
    snprintf(problem, sizeof problem, "the source differs under the locale");
  else if (!json || !json_c || strcmp(json, json_c) != 0)
    snprintf(problem, sizeof problem, "describe differs under the locale");
  free(json);
  free(json_c);
  flowgen_kernel_free(k);
  flowgen_kernel_free(c);
  if (problem[0]) fail_msg("%s", problem);
}

/* ---- parts of the plan -------------------------------------------------- */

/* The runtime's parts and a file for one batch: the same plan (variants,
 * params layout) whatever is rendered; the pack part has the pack kernel
 * and no sampling kernel, a variant's part its own kernel alone, a batch's
 * part its variant with the pack kernel and the host launcher; a
 * conditional model's conditioning kernel goes with the pack kernel. */
static void test_parts(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *all = generate(&spec, NULL);
  flowgen_options opts = {.part = FLOWGEN_PART_ALL};
  flowgen_kernel *all2 = generate(&spec, &opts);
  assert_string_equal(flowgen_kernel_source(all), flowgen_kernel_source(all2));
  flowgen_kernel_free(all2);
  int n = flowgen_kernel_variant_count(all);
  assert_true(n >= 2);
  const flowgen_variant *v0 = flowgen_kernel_variant(all, 0);
  assert_int_equal(flowgen_kernel_part(all), FLOWGEN_PART_ALL);
  assert_true(flowgen_kernel_has_pack(all));
  for (int i = 0; i < n; ++i) assert_true(flowgen_kernel_has_variant(all, i));

  opts.part = FLOWGEN_PART_PACK;
  flowgen_kernel *pack = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(pack);
  assert_true(has_kernel(src, v0->pack_symbol));
  assert_int_equal(flowgen_kernel_variant_count(pack), n);
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(all, i);
    assert_false(has_kernel(src, v->symbol));
    assert_false(flowgen_kernel_has_variant(pack, i));
    /* the same plan */
    assert_string_equal(flowgen_kernel_variant(pack, i)->symbol, v->symbol);
    assert_int_equal(flowgen_kernel_variant(pack, i)->params_bytes, v->params_bytes);
    assert_int_equal(flowgen_kernel_variant(pack, i)->min_batch, v->min_batch);
  }
  assert_contains(src, "This part holds the pack kernel only");
  assert_lacks(src, "host launcher");
  char *json = flowgen_kernel_describe(pack);
  assert_contains(json, "\"part\": \"pack\"");
  assert_contains(json, "\"variants\": []");
  free(json);
  flowgen_kernel_free(pack);

  /* the plan alone: nothing rendered, the same plan */
  opts = (flowgen_options){.part = FLOWGEN_PART_PLAN};
  flowgen_kernel *plan = generate(&spec, &opts);
  assert_int_equal(flowgen_kernel_source_size(plan), 0);
  assert_string_equal(flowgen_kernel_source(plan), "");
  assert_false(flowgen_kernel_has_pack(plan));
  assert_int_equal(flowgen_kernel_variant_count(plan), n);
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(all, i), *p = flowgen_kernel_variant(plan, i);
    assert_false(flowgen_kernel_has_variant(plan, i));
    assert_string_equal(p->symbol, v->symbol);
    assert_int_equal(p->shared_bytes, v->shared_bytes);
    assert_int_equal(p->max_batch, v->max_batch);
  }
  json = flowgen_kernel_describe(plan);
  assert_contains(json, "\"part\": \"plan\"");
  free(json);
  flowgen_kernel_free(plan);

  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    opts = (flowgen_options){.part = FLOWGEN_PART_VARIANT, .variant = i};
    flowgen_kernel *one = generate(&spec, &opts);
    src = flowgen_kernel_source(one);
    assert_false(flowgen_kernel_has_pack(one));
    assert_false(has_kernel(src, v0->pack_symbol));
    for (int j = 0; j < n; ++j) {
      assert_true(has_kernel(src, flowgen_kernel_variant(all, j)->symbol) == (i == j));
      assert_true(flowgen_kernel_has_variant(one, j) == (i == j));
    }
    total += flowgen_kernel_source_size(one);
    flowgen_kernel_free(one);
  }
  assert_true(total > 0);
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_kernel *bad = NULL;
  opts = (flowgen_options){.part = FLOWGEN_PART_VARIANT, .variant = n};
  assert_int_equal(flowgen_generate(&spec, &opts, &bad, &err), FLOWGEN_UNSUPPORTED);
  assert_contains(err.message, "the plan has variants 0 to");
  opts.variant = -1;
  assert_int_equal(flowgen_generate(&spec, &opts, &bad, &err), FLOWGEN_INVALID);
  opts = (flowgen_options){.part = FLOWGEN_PART_BATCH, .batch = -1};
  assert_int_equal(flowgen_generate(&spec, &opts, &bad, &err), FLOWGEN_INVALID);
  opts = (flowgen_options){.part = (flowgen_part)7};
  assert_int_equal(flowgen_generate(&spec, &opts, &bad, &err), FLOWGEN_INVALID);
  assert_null(bad);

  /* a file for batch 8: its variant, the pack kernel, the launcher */
  opts = (flowgen_options){.part = FLOWGEN_PART_BATCH, .batch = 8, .host_launcher = true};
  flowgen_kernel *b8 = generate(&spec, &opts);
  src = flowgen_kernel_source(b8);
  const flowgen_variant *picked = flowgen_kernel_pick(all, 8);
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(all, i);
    assert_true(has_kernel(src, v->symbol) == (v == picked));
  }
  assert_true(has_kernel(src, v0->pack_symbol));
  assert_contains(src, "--batch 8");
  assert_contains(src, "extern \"C\" cudaError_t flow_d64_h256_s32_fp32_launch(");
  /* its launcher serves any batch with its variant */
  char *launcher = between(src, "_launch(", "#endif");
  assert_contains(launcher, "if (batch >= 0) {");
  free(launcher);
  assert_true(flowgen_kernel_source_size(b8) * 3 < flowgen_kernel_source_size(all));
  json = flowgen_kernel_describe(b8);
  assert_contains(json, "\"batch\": 8");
  assert_contains(json, "\"part\": \"batch\"");
  json_t *root = json_loads(json, 0, NULL);
  assert_non_null(root);
  assert_int_equal(json_array_size(json_object_get(root, "variants")), 1);
  assert_string_equal(json_string_value(json_object_get(root, "strategy")), picked->strategy);
  json_decref(root);
  free(json);
  /* the whole file's describe has no "part" */
  json = flowgen_kernel_describe(all);
  assert_lacks(json, "\"part\"");
  free(json);
  flowgen_kernel_free(b8);
  flowgen_kernel_free(all);

  /* a conditional model: the conditioning kernel with the pack kernel */
  assert_int_equal(flowgen_spec_set(&spec, "cond", "4", NULL), FLOWGEN_OK);
  opts = (flowgen_options){.part = FLOWGEN_PART_PACK};
  pack = generate(&spec, &opts);
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol - 8);
  strcat(symbol, "_cond");
  assert_true(has_kernel(flowgen_kernel_source(pack), symbol));
  flowgen_kernel_free(pack);
  opts = (flowgen_options){.part = FLOWGEN_PART_VARIANT, .variant = 0};
  flowgen_kernel *one = generate(&spec, &opts);
  assert_false(has_kernel(flowgen_kernel_source(one), symbol));
  flowgen_kernel_free(one);
}

/* The source key names every input of a render and nothing else: each
 * spec field, the part, the tune, the device figures and the launcher
 * change it; the limits do not; it carries the build's digest; a template
 * folder's sources are not keyed so. */
static void test_source_key(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {.part = FLOWGEN_PART_PACK};
  char *base = NULL, *again = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_source_key(&spec, &opts, &base, &err), FLOWGEN_OK);
  assert_contains(base, "flowgen source v1\ngenerator=" FLOWGEN_VERSION "\nbuild=");
  assert_contains(base, "spec.dim=64\n");
  assert_contains(base, "spec.part=\"pack\"\n");
  opts.instruction_limit = 12345;
  opts.memory_limit = 1u << 24;
  opts.time_limit_ms = 999;
  assert_int_equal(flowgen_source_key(&spec, &opts, &again, NULL), FLOWGEN_OK);
  assert_string_equal(base, again);
  free(again);
  opts.tune = ""; /* no tune, as NULL is */
  assert_int_equal(flowgen_source_key(&spec, &opts, &again, NULL), FLOWGEN_OK);
  assert_string_equal(base, again);
  free(again);
  opts.tune = NULL;

  /* each field: a key of its own */
  static const char *const changes[][2] = {
      {"dim", "32"},      {"hidden", "128"},  {"steps", "16"},     {"solver", "heun"},
      {"precision", "bf16"}, {"arch", "sm_80"}, {"name", "mine"},  {"cond", "4"},
      {"layers", "4"},    {"act", "gelu"},    {"time", "sin:8"},   {"input", "t,x,c"},
  };
  enum { CHANGES = sizeof changes / sizeof changes[0] };
  char *keys[CHANGES + 8] = {0};
  int count = 0;
  for (int i = 0; i < CHANGES; ++i) {
    flowgen_spec changed = spec;
    if (flowgen_spec_set(&changed, changes[i][0], changes[i][1], &err))
      fail_msg("%s=%s: %s", changes[i][0], changes[i][1], err.message);
    assert_int_equal(flowgen_source_key(&changed, &opts, &keys[count++], NULL), FLOWGEN_OK);
  }
  flowgen_spec guided = spec;
  guided.cond = 4;
  guided.guidance = true;
  assert_int_equal(flowgen_source_key(&guided, &opts, &keys[count++], NULL), FLOWGEN_OK);
  flowgen_options other[] = {
      {.part = FLOWGEN_PART_VARIANT, .variant = 0},
      {.part = FLOWGEN_PART_VARIANT, .variant = 1},
      {.part = FLOWGEN_PART_PACK, .tune = "only=tiled"},
      {.part = FLOWGEN_PART_PACK, .device = {.sms = 66}},
      {.part = FLOWGEN_PART_PACK, .host_launcher = true},
      {.part = FLOWGEN_PART_BATCH, .batch = 8},
  };
  for (size_t i = 0; i < sizeof other / sizeof other[0]; ++i)
    assert_int_equal(flowgen_source_key(&spec, &other[i], &keys[count++], NULL), FLOWGEN_OK);
  for (int i = 0; i < count; ++i) {
    if (strcmp(keys[i], base) == 0) fail_msg("change %d keeps the key", i);
    for (int j = 0; j < i; ++j)
      if (strcmp(keys[i], keys[j]) == 0) fail_msg("changes %d and %d share a key", j, i);
  }
  for (int i = 0; i < count; ++i) free(keys[i]);

  /* a tune is one quoted line, whatever it holds */
  opts.tune = "only=tiled\n\"spec.dim=1";
  assert_int_equal(flowgen_source_key(&spec, &opts, &again, NULL), FLOWGEN_OK);
  assert_contains(again, "spec.tune=\"only=tiled\\x0a\\x22spec.dim=1\"\n");
  free(again);
  opts.tune = NULL;

  opts.template_dir = "templates";
  again = base;
  assert_int_equal(flowgen_source_key(&spec, &opts, &again, &err), FLOWGEN_UNSUPPORTED);
  assert_null(again);
  assert_contains(err.message, "templates");
  opts.template_dir = NULL;
  flowgen_spec bad = spec;
  bad.dim = 0;
  assert_int_equal(flowgen_source_key(&bad, &opts, &again, &err), FLOWGEN_INVALID);
  opts.part = (flowgen_part)7;
  assert_int_equal(flowgen_source_key(&spec, &opts, &again, &err), FLOWGEN_INVALID);
  assert_int_equal(flowgen_source_key(&spec, NULL, NULL, &err), FLOWGEN_INVALID);
  free(base);
}

/* A file for a batch a persistent grid serves holds the variant it falls
 * back to, and its launcher tries the grid first. */
static void test_batch_part_with_fallback(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {.tune = "only=grid:tiled8:tiled"};
  flowgen_kernel *all = generate(&spec, &opts);
  const flowgen_variant *grid = flowgen_kernel_pick(all, 4);
  assert_true(grid->cooperative);
  const flowgen_variant *fallback = flowgen_kernel_variant(all, grid->fallback);
  opts.part = FLOWGEN_PART_BATCH;
  opts.batch = 4;
  opts.host_launcher = true;
  flowgen_kernel *b = generate(&spec, &opts);
  const char *src = flowgen_kernel_source(b);
  assert_true(has_kernel(src, grid->symbol));
  assert_true(has_kernel(src, fallback->symbol));
  int held = 0;
  for (int i = 0; i < flowgen_kernel_variant_count(b); ++i) held += flowgen_kernel_has_variant(b, i);
  assert_int_equal(held, 2);
  assert_contains(src, "cooperative_failed || (batch >= 0)");
  char *json = flowgen_kernel_describe(b);
  json_t *root = json_loads(json, 0, NULL);
  json_t *variants = json_object_get(root, "variants");
  assert_int_equal(json_array_size(variants), 2);
  /* the fallback, as an index among the variants listed */
  json_t *g = json_array_get(variants, grid->fallback < (int)(grid - flowgen_kernel_variant(all, 0)) ? 1 : 0);
  json_t *f = json_array_get(variants, g == json_array_get(variants, 0) ? 1 : 0);
  assert_int_equal(json_integer_value(json_object_get(g, "fallback")),
                   g == json_array_get(variants, 0) ? 1 : 0);
  assert_int_equal(json_integer_value(json_object_get(f, "fallback")), -1);
  json_decref(root);
  free(json);
  flowgen_kernel_free(b);
  flowgen_kernel_free(all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_comment),
      cmocka_unit_test(test_no_time_or_path_in_source),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_kernel_symbols),
      cmocka_unit_test(test_shape_constants_are_literals),
      cmocka_unit_test(test_variants_are_consistent),
      cmocka_unit_test(test_cluster_and_grid_forms),
      cmocka_unit_test(test_cluster_fold),
      cmocka_unit_test(test_wgstream3_products_fused),
      cmocka_unit_test(test_cluster_barriers_split),
      cmocka_unit_test(test_own_partial),
      cmocka_unit_test(test_gemm_forms),
      cmocka_unit_test(test_gemm_each_precision),
      cmocka_unit_test(test_mma_forms),
      cmocka_unit_test(test_wgmma_forms),
      cmocka_unit_test(test_wgstream_forms),
      cmocka_unit_test(test_wgstream3_forms),
      cmocka_unit_test(test_rmma_forms),
      cmocka_unit_test(test_rmma3_forms),
      cmocka_unit_test(test_applicability_edges),
      cmocka_unit_test(test_name_is_respected),
      cmocka_unit_test(test_host_launcher),
      cmocka_unit_test(test_parts),
      cmocka_unit_test(test_batch_part_with_fallback),
      cmocka_unit_test(test_source_key),
      cmocka_unit_test(test_describe_json),
      cmocka_unit_test(test_pick),
      cmocka_unit_test(test_invalid_spec_is_refused),
      cmocka_unit_test(test_family_member),
      cmocka_unit_test(test_family_host_launcher),
      cmocka_unit_test(test_family_refused),
      cmocka_unit_test(test_generation_is_fast),
      cmocka_unit_test(test_output_ignores_locale),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
