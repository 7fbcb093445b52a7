/* Allocation faults in the library's CPU paths: each allocation of a public
 * call fails in turn (tests/alloc_faults.h; the wraps are in
 * tests/test_alloc_faults.wrap).  Every run must give FLOWGEN_NOMEM (or, for
 * the template engine, LIMIT; a file format's own error where the parser
 * reports it), free everything the call allocated, leave no half-written
 * file, and the same call without a fault must then work.  Each N is run
 * twice: that allocation alone failing (a passing shortage), and it and
 * every later one (memory gone). */
/* dladdr */
#define _GNU_SOURCE
#include "alloc_faults.h"

#include "cuda_api.h"
#include "disk_cache.h"
#include "flowrt.h"
#include "module_cache.h"
#include "npy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

static char *work_dir; /* per test */

static int setup(void **state) {
  (void)state;
  work_dir = fg_test_mkdtemp();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  af_end();
  fg_test_rmtree(work_dir);
  free(work_dir);
  work_dir = NULL;
  return 0;
}

static unsigned char *read_data_file(const char *name, size_t *size) {
  char path[FG_TEST_PATH_SIZE];
  snprintf(path, sizeof path, "%s/tests/data/%s", fg_test_source_dir(), name);
  unsigned char *data = (unsigned char *)fg_test_read_file(path, size);
  if (!data) fail_msg("cannot read %s", path);
  return data;
}

/* How many names in dir start with prefix (NULL: all but . and ..). */
static int count_named(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0) ++n;
  }
  closedir(d);
  return n;
}

/* ---- .npy --------------------------------------------------------------- */

typedef struct npy_ctx {
  unsigned char *image;
  size_t size;
  char path[FG_TEST_PATH_SIZE];
  float values[12];
} npy_ctx;

static flowgen_status npy_parse_call(void *ctx, flowgen_error *err) {
  npy_ctx *c = ctx;
  float *data = NULL;
  int64_t rows = 0, cols = 0;
  flowgen_status st = fg_npy_parse(c->image, c->size, "tiny_f8.npy", &data, &rows, &cols, err);
  if (!st && (rows != 4 || cols != 3)) st = FLOWGEN_INTERNAL;
  free(data);
  return st;
}

static flowgen_status npy_read_call(void *ctx, flowgen_error *err) {
  npy_ctx *c = ctx;
  float *data = NULL;
  int64_t rows = 0, cols = 0;
  flowgen_status st = fg_npy_read(c->path, &data, &rows, &cols, err);
  free(data);
  return st;
}

static flowgen_status npy_write_call(void *ctx, flowgen_error *err) {
  npy_ctx *c = ctx;
  return fg_npy_write(c->path, c->values, 4, 3, err);
}

static void npy_write_prepare(void *ctx) { unlink(((npy_ctx *)ctx)->path); }

/* A failed write leaves neither the file nor a temporary one. */
static const char *npy_write_check(void *ctx, flowgen_status st) {
  (void)st;
  npy_ctx *c = ctx;
  if (fg_test_file_exists(c->path)) return "the output file exists";
  if (count_named(work_dir, NULL) != 0) return "a temporary file is left";
  return NULL;
}

static void test_npy(void **state) {
  (void)state;
  npy_ctx c = {0};
  c.image = read_data_file("tiny_f8.npy", &c.size);
  af_sweep(&(af_sweep_spec){.what = "fg_npy_parse", .call = npy_parse_call, .ctx = &c});
  fg_test_path_join(c.path, work_dir, "out.npy");
  fg_test_fill_uniform(c.values, 12, 3, 1.0f);
  af_sweep(&(af_sweep_spec){.what = "fg_npy_write", .call = npy_write_call,
                            .prepare = npy_write_prepare, .check_failed = npy_write_check,
                            .ctx = &c});
  af_sweep(&(af_sweep_spec){.what = "fg_npy_read", .call = npy_read_call, .ctx = &c});
  free(c.image);
}

/* ---- weights -------------------------------------------------------------- */

typedef struct weights_ctx {
  unsigned char *image;
  size_t size;
  const char *name, *prefix;
  char path[FG_TEST_PATH_SIZE];
} weights_ctx;

static flowgen_status weights_parse_call(void *ctx, flowgen_error *err) {
  weights_ctx *c = ctx;
  flowrt_weights *w = NULL;
  flowgen_status st = flowrt_weights_parse(c->image, c->size, c->name, c->prefix, NULL, &w, err);
  if (!st && !w) st = FLOWGEN_INTERNAL;
  flowrt_weights_free(w);
  return st;
}

static flowgen_status weights_load_call(void *ctx, flowgen_error *err) {
  weights_ctx *c = ctx;
  flowrt_weights *w = NULL;
  flowgen_status st = flowrt_weights_load(c->path, NULL, NULL, &w, err);
  flowrt_weights_free(w);
  return st;
}

static flowgen_status weights_builtin_call(void *ctx, flowgen_error *err) {
  (void)ctx;
  flowrt_weights *w = NULL;
  flowgen_status st = flowrt_weights_builtin("digits", &w, err);
  flowrt_weights_free(w);
  return st;
}

static void test_weights(void **state) {
  (void)state;
  weights_ctx c = {.name = "with_metadata.safetensors"};
  c.image = read_data_file(c.name, &c.size);
  af_sweep(&(af_sweep_spec){.what = "flowrt_weights_parse (metadata)",
                            .call = weights_parse_call, .ctx = &c});
  free(c.image);
  c.name = "custom_prefix.safetensors";
  c.prefix = "ema.net.";
  c.image = read_data_file(c.name, &c.size);
  af_sweep(&(af_sweep_spec){.what = "flowrt_weights_parse (prefix)",
                            .call = weights_parse_call, .ctx = &c});
  free(c.image);
  snprintf(c.path, sizeof c.path, "%s/tests/data/tiny_f32.safetensors", fg_test_source_dir());
  af_sweep(&(af_sweep_spec){.what = "flowrt_weights_load", .call = weights_load_call, .ctx = &c});
  af_sweep(&(af_sweep_spec){.what = "flowrt_weights_builtin",
                            .call = weights_builtin_call, .ctx = &c});
}

/* ---- generation ------------------------------------------------------------ */

typedef struct generate_ctx {
  flowgen_spec spec;
  flowgen_options opts;
} generate_ctx;

/* Generates and describes the kernel (describe gives NULL when it cannot
 * allocate). */
static flowgen_status generate_call(void *ctx, flowgen_error *err) {
  generate_ctx *c = ctx;
  flowgen_kernel *k = NULL;
  flowgen_status st = flowgen_generate(&c->spec, &c->opts, &k, err);
  if (!st && !k) st = FLOWGEN_INTERNAL;
  if (!st) {
    char *text = flowgen_kernel_describe(k);
    if (!text) {
      st = err->status = FLOWGEN_NOMEM;
      snprintf(err->message, sizeof err->message, "flowgen_kernel_describe: NULL");
    }
    free(text);
  }
  flowgen_kernel_free(k);
  return st;
}

/* Lua's allocations go through the sandbox's allocator: a failed one is an
 * out-of-memory error inside Lua (which may collect garbage and try again),
 * never a crash, and the call ends as NOMEM (or LIMIT). */
static void test_generate(void **state) {
  (void)state;
  generate_ctx c = {.spec = fg_test_spec(2, 4, 1, 90)};
  af_sweep(&(af_sweep_spec){.what = "flowgen_generate",
                            .call = generate_call,
                            .ctx = &c,
                            .allowed = {FLOWGEN_LIMIT},
                            .may_absorb = true,
                            .max_runs = 240});
  /* Templates from a folder: the files are read through Lua's buffers. */
  fg_test_copy_templates(work_dir);
  c.opts.template_dir = work_dir;
  c.opts.tune = "only=tiled8:tiled";
  af_sweep(&(af_sweep_spec){.what = "flowgen_generate (template folder, tune)",
                            .call = generate_call,
                            .ctx = &c,
                            .allowed = {FLOWGEN_LIMIT},
                            .may_absorb = true,
                            .max_runs = 60});
}

/* ---- the CPU reference ------------------------------------------------------ */

typedef struct reference_ctx {
  flowgen_spec spec;
  flowrt_weights *w;
  float x0[256 * 3], x[256 * 3];
} reference_ctx;

static flowgen_status reference_call(void *ctx, flowgen_error *err) {
  reference_ctx *c = ctx;
  return flowrt_reference(&c->spec, c->w, c->x0, c->x, 256, err);
}

/* 256 rows: several threads, each with its own scratch allocation. */
static void test_reference(void **state) {
  (void)state;
  reference_ctx *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->spec = fg_test_spec(3, 5, 4, 90);
  assert_int_equal(flowrt_weights_alloc(&c->spec, &c->w, NULL), FLOWGEN_OK);
  fg_test_fill_uniform(c->w->w[0], 5 * 4, 1, 0.5f);
  fg_test_fill_uniform(c->x0, 256 * 3, 2, 1.0f);
  af_sweep(&(af_sweep_spec){.what = "flowrt_reference", .call = reference_call, .ctx = c});
  flowrt_weights_free(c->w);
  free(c);
}

/* ---- the disk cache ----------------------------------------------------------- */

static const char *const keys[] = {"key one", "key two", "key three"};
#define KEY_COUNT 3

typedef struct cache_ctx {
  char dir[FG_TEST_PATH_SIZE];
  unsigned char payload[3000];
  flowgen_spec spec;
  bool fresh_nvrtc;
} cache_ctx;

static void fill_cache(cache_ctx *c) {
  for (int i = 0; i < KEY_COUNT; ++i) {
    flowgen_error err;
    if (fg_cache_put(c->dir, keys[i], c->payload, sizeof c->payload - (size_t)i, &err))
      fail_msg("put: %s", err.message);
  }
}

static flowgen_status cache_get_call(void *ctx, flowgen_error *err) {
  cache_ctx *c = ctx;
  fg_cache_result result;
  void *payload = NULL;
  size_t size = 0;
  flowgen_status st = fg_cache_get(c->dir, keys[1], &result, &payload, &size, err);
  if (!st && (result != FG_CACHE_HIT || size != sizeof c->payload - 1 ||
              memcmp(payload, c->payload, size) != 0))
    st = FLOWGEN_INTERNAL;
  free(payload);
  return st;
}

static void count_entry(void *ctx, const flowrt_cache_entry *e) {
  int *n = ctx;
  *n += e->valid ? 1 : 1000;
}

static flowgen_status cache_list_call(void *ctx, flowgen_error *err) {
  cache_ctx *c = ctx;
  int n = 0;
  flowgen_status st = flowrt_cache_list(c->dir, count_entry, &n, err);
  if (!st && n != KEY_COUNT) st = FLOWGEN_INTERNAL;
  return st;
}

static flowgen_status cache_clear_call(void *ctx, flowgen_error *err) {
  cache_ctx *c = ctx;
  size_t removed = 0;
  flowgen_status st = flowrt_cache_clear(c->dir, &removed, err);
  if (!st && removed != KEY_COUNT) st = FLOWGEN_INTERNAL;
  return st;
}

static void cache_clear_prepare(void *ctx) {
  cache_ctx *c = ctx;
  if (count_named(c->dir, NULL) != KEY_COUNT) fill_cache(c);
}

/* Whatever a failed put or clear did, the folder holds valid entries and
 * no temporary file. */
static const char *cache_check(void *ctx, flowgen_status st) {
  (void)st;
  cache_ctx *c = ctx;
  int n = 0;
  if (flowrt_cache_list(c->dir, count_entry, &n, NULL)) return "cannot list";
  if (n >= 1000) return "an invalid entry is left";
  if (count_named(c->dir, FG_CACHE_TEMP_PREFIX)) return "a temporary file is left";
  return NULL;
}

static void test_cache_entries(void **state) {
  (void)state;
  cache_ctx *c = calloc(1, sizeof *c);
  assert_non_null(c);
  fg_test_path_join(c->dir, work_dir, "cache");
  for (size_t i = 0; i < sizeof c->payload; ++i) c->payload[i] = (unsigned char)(i * 7);
  fill_cache(c);
  af_sweep(&(af_sweep_spec){.what = "fg_cache_get", .call = cache_get_call, .ctx = c});
  af_sweep(&(af_sweep_spec){.what = "flowrt_cache_list", .call = cache_list_call, .ctx = c});
  af_sweep(&(af_sweep_spec){.what = "flowrt_cache_clear", .call = cache_clear_call,
                            .prepare = cache_clear_prepare, .check_failed = cache_check,
                            .ctx = c});
  free(c);
}

static flowgen_status cache_warm_call(void *ctx, flowgen_error *err) {
  cache_ctx *c = ctx;
  bool was_cached = false;
  return flowrt_cache_warm(c->dir, &c->spec, NULL, &was_cached, err);
}

/* The miss path: NVRTC loaded afresh (its loader allocates) and an empty
 * folder, so that every run compiles and stores. */
static void cache_warm_miss_prepare(void *ctx) {
  cache_ctx *c = ctx;
  flowrt_cache_clear(c->dir, NULL, NULL);
  fg_loader_reset();
}

/* Keeps the NVRTC in use mapped for the rest of the run: fg_loader_reset
 * then only resets the loader (unloading NVRTC for real leaks what it
 * allocates at load time, and is slow under valgrind). */
static void pin_nvrtc(void) {
  const fg_nvrtc_api *api = fg_nvrtc(NULL);
  Dl_info info;
  if (api && dladdr((void *)api->nvrtcVersion, &info) && info.dli_fname)
    assert_non_null(dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD));
}

static void test_cache_warm(void **state) {
  (void)state;
  if (flowrt_nvrtc_version() == 0) skip();
  pin_nvrtc();
  cache_ctx *c = calloc(1, sizeof *c);
  assert_non_null(c);
  fg_test_path_join(c->dir, work_dir, "cache");
  c->spec = fg_test_spec(2, 4, 1, 90);
  /* A hit: the plan, each part's key and a read.  Warm only reads the
   * entries, so they need not be real cubins (no compile here). */
  flowgen_spec resolved = c->spec;
  resolved.arch_specific = fg_arch_specific(resolved.arch);  /* as warm resolves it */
  flowgen_options opts = {.part = FLOWGEN_PART_PLAN};
  flowgen_kernel *plan = NULL;
  assert_int_equal(flowgen_generate(&resolved, &opts, &plan, NULL), FLOWGEN_OK);
  for (int i = -1; i < flowgen_kernel_variant_count(plan); ++i) {
    opts = i < 0 ? (flowgen_options){.part = FLOWGEN_PART_PACK}
                 : (flowgen_options){.part = FLOWGEN_PART_VARIANT, .variant = i};
    char name[FG_PART_NAME_MAX], *key = NULL;
    fg_part_name(&resolved, i < 0 ? NULL : flowgen_kernel_variant(plan, i)->strategy, name,
                 sizeof name);
    assert_int_equal(fg_part_cache_key(&resolved, &opts, name, 90, FLOWRT_TARGET_CUBIN,
                                       flowrt_nvrtc_version(), &key, NULL),
                     FLOWGEN_OK);
    assert_int_equal(fg_cache_put(c->dir, key, "not a cubin", 11, NULL), FLOWGEN_OK);
    free(key);
  }
  flowgen_kernel_free(plan);
  bool was_cached = false;
  assert_int_equal(flowrt_cache_warm(c->dir, &c->spec, NULL, &was_cached, NULL), FLOWGEN_OK);
  assert_true(was_cached);  /* what the sweep below runs is the hit */
  af_sweep(&(af_sweep_spec){.what = "flowrt_cache_warm (cached)",
                            .call = cache_warm_call,
                            .check_failed = cache_check,
                            .ctx = c,
                            .allowed = {FLOWGEN_LIMIT},
                            .may_absorb = true,
                            .max_runs = 60});
  /* A miss compiles (a third of a second, each run and its retry; half a
   * minute under valgrind, where it is left out): the sample keeps the
   * first allocations (the NVRTC loader's) and the last (key, compile,
   * store); test_generate covers those between. */
  if (fg_test_under_valgrind()) {
    print_message("# under valgrind: the compiling warm is not swept\n");
    free(c);
    return;
  }
  af_sweep(&(af_sweep_spec){.what = "flowrt_cache_warm (compiled)",
                            .call = cache_warm_call,
                            .prepare = cache_warm_miss_prepare,
                            .check_failed = cache_check,
                            .ctx = c,
                            .allowed = {FLOWGEN_LIMIT},
                            .may_absorb = true,
                            .max_runs = 5,
                            .edge = 2});
  free(c);
}

#define AF_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      AF_TEST(test_npy),          AF_TEST(test_weights),
      AF_TEST(test_generate),     AF_TEST(test_reference),
      AF_TEST(test_cache_entries), AF_TEST(test_cache_warm),
  };
  return cmocka_run_group_tests_name("alloc_faults", tests, NULL, NULL);
}
