/* Fuzzes template rendering: a spec and options derived from the input
 * (D 1..1024, H 1..4096, S 1..10000 but mostly up to 64, a solver, a
 * precision, arch from the supported GPUs (sm_90 or sm_90a), sometimes a custom name, --tune
 * overrides (templates/tune.lua) and the host launcher) go to flowgen_generate.  Invariants: the shape renders or the
 * planner refuses it (no template error, no limit hit); the source is
 * non-empty text holding every symbol; a second generation gives the same
 * bytes; the variants cover every batch size once with a launch
 * configuration the target GPU can run; the describe JSON parses and agrees
 * with the kernel. */
#include "fuzz.h"

#include "flowgen.h"

#include <jansson.h>
#include <string.h>

#define TUNE_MAX 96

static const int nice_sizes[] = {1,  2,   3,   4,   8,   16,  24,   32,  48,
                                 64, 96,  128, 192, 256, 384, 512, 768, 1024};
static const int archs[] = {75, 80, 86, 89, 90};
/* By name, so that a solver the library does not know yet stays euler. */
static const char *const solvers[] = {"euler", "midpoint", "heun", "rk4"};
/* The --tune vocabulary (templates/tune.lua): only, skip, NAME=FROM:TO
 * (strategies and modules), MODULE.DIAL, and some mistakes. */
static const char *const tune_keys[] = {
    "only",         "skip",        "cluster",       "rmma",        "rmma_c2",
    "rmma3",        "rmma3_r16",   "grid",          "grid_b64",    "tiled8",
    "tiled",        "tiled8c4",    "gemm",          "mma16",       "mma",
    "wgmma64",      "wgmma",       "wgstream",      "wgstream3",   "cluster4_r8",
    "cluster.blocks", "tiled.blocks", "tiled.chunk", "tiled.stages", "mma.rows",
    "mma.chunk",    "mma.stages",  "mma.per_sm",    "gemm.per_sm", "gemm.rows",
    "gemm.chunk",   "wgmma.n",     "wgstream.n",    "wgstream.blocks", "bogus",
    "mma.bogus",    "tiled.",      ".rows",         "Only"};
static const char *const precisions[] = {"fp32", "tf32", "bf16", "fp16"};
static const char *const tune_values[] = {
    "cluster",  "rmma",      "rmma3",      "tiled8:tiled", "grid:tiled8:tiled", "cluster:gemm",
    "mma16:mma", "wgmma64",  "wgstream",   "0",        "1",        "2",
    "4",        "8",         "16",         "32",       "64",       "128",
    "1:2000",   ":500",      "4:",         "0:0",      "2:1",      ":",
    "1000:8448", "31:",      ":30",        "9223372036854775807", "4294967297:", "abc",
    "1.5",      "1e3",       "0x4",        "nope",     "cluster4_r1", "::",
    "2113:",    "8449:"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The largest dynamic shared memory a block can opt in to (bytes). */
static size_t shared_limit(int arch) {
  switch (arch) {
  case 75: return 64 * 1024;
  case 80: return 163 * 1024;
  case 86: case 89: return 99 * 1024;
  case 90: return 227 * 1024;
  default: return 0;
  }
}

static void derive_shape(fuzz_input *in, flowgen_spec *spec) {
  int kind = fuzz_byte(in) % 4;
  if (kind == 0) {                  /* anything */
    spec->dim = fuzz_int(in, 1, FLOWGEN_DIM_MAX);
    spec->hidden = fuzz_int(in, 1, FLOWGEN_HIDDEN_MAX);
  } else if (kind == 1) {           /* a common size, H = 4 D */
    spec->dim = nice_sizes[fuzz_byte(in) % COUNT(nice_sizes)];
    spec->hidden = 0;
  } else if (kind == 2) {           /* where the cluster strategy applies */
    spec->dim = 4 * fuzz_int(in, 1, 64);
    spec->hidden = 32 * fuzz_int(in, 1, 32);
  } else {                          /* common sizes for both */
    spec->dim = nice_sizes[fuzz_byte(in) % COUNT(nice_sizes)];
    spec->hidden = 4 * nice_sizes[fuzz_byte(in) % COUNT(nice_sizes)];
  }
  /* Mostly short runs: the time grid is one literal per step. */
  spec->steps = fuzz_byte(in) % 16 ? fuzz_int(in, 1, 64)
                                  : fuzz_int(in, 1, FLOWGEN_STEPS_MAX);
  uint8_t solver = fuzz_byte(in);
  if (solver >= 128)
    flowgen_spec_set(spec, "solver", solvers[solver % COUNT(solvers)], NULL);
  uint8_t arch = fuzz_byte(in);
  spec->arch = arch < 250 ? archs[arch % COUNT(archs)]
                          : fuzz_int(in, FLOWGEN_ARCH_MIN, 1000);
  /* sm_90a for half of the sm_90 inputs (a bit arch % 5 does not use) */
  spec->arch_specific = spec->arch == 90 && arch < 250 && arch / 5 % 2;
  uint8_t precision = fuzz_byte(in);
  if (precision >= 128)
    flowgen_spec_set(spec, "precision", precisions[precision % COUNT(precisions)], NULL);
}

/* "key=value,..." from the word lists, or raw bytes. */
static void derive_tune(fuzz_input *in, char *tune, size_t size) {
  uint8_t kind = fuzz_byte(in) % 4;
  tune[0] = '\0';
  if (kind == 1 || kind == 2) {
    int pairs = 1 + fuzz_byte(in) % 4;
    for (int i = 0; i < pairs; ++i) {
      /* Read in order (argument evaluation order is unspecified). */
      const char *key = tune_keys[fuzz_byte(in) % COUNT(tune_keys)];
      const char *value = tune_values[fuzz_byte(in) % COUNT(tune_values)];
      size_t len = strlen(tune);
      snprintf(tune + len, size - len, "%s%s=%s", i ? "," : "", key, value);
    }
  } else if (kind == 3) {
    size_t len = fuzz_byte(in) % (size - 1), i = 0;
    for (; i < len && fuzz_left(in) > 0; ++i) {
      uint8_t c = fuzz_byte(in);
      if (c == 0) break;
      tune[i] = (char)c;
    }
    tune[i] = '\0';
  }
}

static void maybe_name(fuzz_input *in, flowgen_spec *spec) {
  if (fuzz_byte(in) % 8 != 0) return;
  char name[FLOWGEN_NAME_MAX + 8];
  size_t len = fuzz_byte(in) % sizeof name, i = 0;
  for (; i < len && fuzz_left(in) > 0; ++i) {
    uint8_t c = fuzz_byte(in);
    if (c == 0) break;
    name[i] = (char)c;
  }
  name[i] = '\0';
  flowgen_spec before = *spec;
  if (flowgen_spec_set(spec, "name", name, NULL) != FLOWGEN_OK)
    FUZZ_CHECK(memcmp(&before, spec, sizeof before) == 0);
}

/* ---- invariants --------------------------------------------------------- */

static bool same_variant(const flowgen_variant *a, const flowgen_variant *b) {
  return !strcmp(a->strategy, b->strategy) && !strcmp(a->symbol, b->symbol) &&
         !strcmp(a->pack_symbol, b->pack_symbol) &&
         a->min_batch == b->min_batch && a->max_batch == b->max_batch &&
         a->block_threads == b->block_threads &&
         a->rows_per_block == b->rows_per_block &&
         a->cluster_blocks == b->cluster_blocks &&
         a->shared_bytes == b->shared_bytes &&
         a->params_bytes == b->params_bytes &&
         a->pack_threads == b->pack_threads;
}

static bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* The number after the first `label` in line (strtoll: saturates, no UB);
 * false if label is not there. */
static bool number_after(const char *line, const char *label, long long *out) {
  const char *p = strstr(line, label);
  if (!p) return false;
  *out = strtoll(p + strlen(label), NULL, 10);
  return true;
}

/* The source states each variant's launch configuration in its opening
 * comment (file.cut):
 *   //   <symbol>(x0, x, batch, params)
 *   //     batch A to B: [clusters of N blocks, ]grid ceil(batch / R)..., block T, S bytes ...
 * and the library's values must be those the kernel was rendered for.  A
 * source whose comment reads otherwise (a reworded template) is not checked. */
static void check_comment(const char *source, const flowgen_variant *v) {
  char head[FLOWGEN_NAME_MAX + 256], line[512];
  snprintf(head, sizeof head, "//   %s(x0, x, batch, params)\n//     batch ",
           v->symbol);
  const char *p = strstr(source, head);
  if (!p) return;
  p += strlen(head) - strlen("batch ");
  size_t len = strcspn(p, "\n");
  if (len >= sizeof line) return;
  memcpy(line, p, len);
  line[len] = '\0';
  long long min, max = -1, rows, blocks = 1, per_sm = 0;
  const char *block = strstr(line, ", block ");
  /* A persistent grid: no cluster; a finite batch range (its scratch rows)
   * except the gemm variant's, which takes the batch in chunks. */
  if (number_after(line, "a cooperative launch of ", &per_sm)) {
    FUZZ_CHECK(per_sm >= 1 && per_sm == v->grid_blocks_per_sm);
    FUZZ_CHECK(v->cluster_blocks == 1);
    FUZZ_CHECK(v->max_batch >= 0 || strcmp(v->strategy, "gemm") == 0);
    rows = v->rows_per_block;
  } else {
    FUZZ_CHECK(v->grid_blocks_per_sm == 0);
    if (!number_after(line, "grid ceil(batch / ", &rows)) return;
  }
  if (!number_after(line, "batch ", &min) ||
      (!strstr(line, " and up:") && !number_after(line, " to ", &max)) || !block)
    return;
  char *end;
  long long threads = strtoll(block + strlen(", block "), &end, 10);
  if (strncmp(end, ", ", 2) != 0) return;
  long long shared = strtoll(end + 2, NULL, 10);
  number_after(line, "clusters of ", &blocks);
  FUZZ_CHECK(min == v->min_batch && max == v->max_batch);
  FUZZ_CHECK(rows == v->rows_per_block && blocks == v->cluster_blocks);
  FUZZ_CHECK(threads == v->block_threads);
  FUZZ_CHECK(shared == (long long)v->shared_bytes);
}

static void check_variants(const flowgen_kernel *k, const flowgen_spec *spec) {
  const char *source = flowgen_kernel_source(k);
  int n = flowgen_kernel_variant_count(k);
  FUZZ_CHECK(n >= 1);
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(spec, symbol, sizeof symbol);
  uint64_t D = (uint64_t)spec->dim, H = (uint64_t)flowgen_spec_hidden(spec);
  uint64_t params_min = 4 * (D * H + 3 * H + H * H + H * D + D);
  int64_t next = 0;  /* the smallest batch not yet served */
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    FUZZ_CHECK(v != NULL && v->strategy[0] && v->symbol[0] && v->pack_symbol[0]);
    FUZZ_CHECK(strncmp(v->symbol, symbol, strlen(symbol)) == 0);
    FUZZ_CHECK(strstr(source, v->symbol) != NULL);
    FUZZ_CHECK(strstr(source, v->pack_symbol) != NULL);
    check_comment(source, v);
    FUZZ_CHECK(v->min_batch == next);
    FUZZ_CHECK((v->max_batch == -1) == (i == n - 1));
    if (i < n - 1) {
      FUZZ_CHECK(v->max_batch >= v->min_batch);
      next = v->max_batch + 1;
    }
    FUZZ_CHECK(v->block_threads >= 1 && v->block_threads <= 1024);
    FUZZ_CHECK(v->pack_threads >= 1 && v->pack_threads <= 1024);
    FUZZ_CHECK(v->rows_per_block >= 1 && v->rows_per_block <= 1024);
    FUZZ_CHECK(is_pow2(v->cluster_blocks) && v->cluster_blocks <= 16);
    FUZZ_CHECK(v->cluster_blocks == 1 || spec->arch >= 90);
    if (shared_limit(spec->arch))
      FUZZ_CHECK(v->shared_bytes <= shared_limit(spec->arch));
    FUZZ_CHECK(v->params_bytes >= params_min && v->params_bytes % 16 == 0);
    FUZZ_CHECK(v->params_bytes == flowgen_kernel_variant(k, 0)->params_bytes);
  }
  static const int64_t batches[] = {0, 1, 2, 3, 8, 24, 25, 72, 73, 1000,
                                    1056, 1057, 4096, (int64_t)1 << 40};
  for (size_t i = 0; i < COUNT(batches); ++i) {
    const flowgen_variant *v = flowgen_kernel_pick(k, batches[i]);
    FUZZ_CHECK(v != NULL && batches[i] >= v->min_batch &&
               (v->max_batch < 0 || batches[i] <= v->max_batch));
  }
}

static void check_describe(const flowgen_kernel *k, const flowgen_spec *spec) {
  char *text = flowgen_kernel_describe(k);
  FUZZ_CHECK(text != NULL && text[0] && text[strlen(text) - 1] == '\n');
  json_error_t jerr;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  FUZZ_CHECK(root != NULL && json_is_object(root));
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(spec, symbol, sizeof symbol);
  FUZZ_CHECK(json_integer_value(json_object_get(root, "dim")) == spec->dim);
  FUZZ_CHECK(json_integer_value(json_object_get(root, "hidden")) ==
             flowgen_spec_hidden(spec));
  FUZZ_CHECK(json_integer_value(json_object_get(root, "steps")) == spec->steps);
  FUZZ_CHECK(json_integer_value(json_object_get(root, "source_bytes")) ==
             (json_int_t)flowgen_kernel_source_size(k));
  const char *name = json_string_value(json_object_get(root, "name"));
  FUZZ_CHECK(name != NULL && strcmp(name, symbol) == 0);
  json_t *variants = json_object_get(root, "variants");
  FUZZ_CHECK(json_is_array(variants) &&
             json_array_size(variants) == (size_t)flowgen_kernel_variant_count(k));
  for (size_t i = 0; i < json_array_size(variants); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, (int)i);
    json_t *j = json_array_get(variants, i);
    const char *s = json_string_value(json_object_get(j, "symbol"));
    FUZZ_CHECK(s != NULL && strcmp(s, v->symbol) == 0);
    FUZZ_CHECK(json_integer_value(json_object_get(j, "min_batch")) == v->min_batch);
    FUZZ_CHECK(json_integer_value(json_object_get(j, "max_batch")) == v->max_batch);
    FUZZ_CHECK(json_integer_value(json_object_get(j, "shared_bytes")) ==
               (json_int_t)v->shared_bytes);
  }
  json_decref(root);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, data + size};
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  derive_shape(&in, &spec);
  flowgen_options opts = {0};
  opts.host_launcher = fuzz_byte(&in) & 1;
  char tune[TUNE_MAX];
  derive_tune(&in, tune, sizeof tune);
  if (tune[0]) opts.tune = tune;
  maybe_name(&in, &spec);

  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_kernel *k = NULL;
  flowgen_status s = flowgen_generate(&spec, &opts, &k, &err);
  FUZZ_CHECK(s == err.status);
  /* FUZZ_VERBOSE=1 says what an input means (when replaying one). */
  if (getenv("FUZZ_VERBOSE") || (s && s != FLOWGEN_UNSUPPORTED))
    fprintf(stderr, "D=%d H=%d S=%d %s sm_%d%s name='%s' host_launcher=%d "
            "tune='%s': %s %s\n", spec.dim, spec.hidden, spec.steps,
            flowgen_solver_name(spec.solver), spec.arch, spec.arch_specific ? "a" : "", spec.name,
            (int)opts.host_launcher, tune, flowgen_status_name(s),
            err.message);
  if (s != FLOWGEN_OK) {
    FUZZ_CHECK(s == FLOWGEN_UNSUPPORTED && k == NULL && err.message[0]);
    /* A refusal is as deterministic as a success. */
    flowgen_error again = {FLOWGEN_OK, ""};
    FUZZ_CHECK(flowgen_generate(&spec, &opts, &k, &again) == s);
    FUZZ_CHECK(strcmp(again.message, err.message) == 0);
    return 0;
  }
  const char *source = flowgen_kernel_source(k);
  size_t source_size = flowgen_kernel_source_size(k);
  FUZZ_CHECK(source != NULL && source_size > 0 && strlen(source) == source_size);
  FUZZ_CHECK(strstr(source, "DO NOT EDIT") != NULL);
  FUZZ_CHECK(memcmp(flowgen_kernel_spec(k), &spec, sizeof spec) == 0);
  check_variants(k, &spec);
  check_describe(k, &spec);

  flowgen_kernel *k2 = NULL;
  FUZZ_CHECK(flowgen_generate(&spec, &opts, &k2, &err) == FLOWGEN_OK);
  FUZZ_CHECK(flowgen_kernel_source_size(k2) == source_size &&
             memcmp(flowgen_kernel_source(k2), source, source_size) == 0);
  FUZZ_CHECK(flowgen_kernel_variant_count(k2) == flowgen_kernel_variant_count(k));
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i)
    FUZZ_CHECK(same_variant(flowgen_kernel_variant(k, i),
                            flowgen_kernel_variant(k2, i)));
  flowgen_kernel_free(k2);
  flowgen_kernel_free(k);
  return 0;
}
