/* The model family against PyTorch: each file of tests/data/family/ is a
 * small member written by torch (tests/data/family/make_fixtures.py, through
 * examples/pytorch/flowgen_export.py) with its x0, conditioning and torch's
 * samples.  The fp64 reference must agree with torch's float64 to 1e-10;
 * the generated kernels (GPU, skipped without one) in every precision to
 * that precision's tolerance. */
#include "support.h"

#include "flowrt.h"
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every fixture; a missing one fails (the list is not globbed). */
static const char *const fixtures[] = {
    "seed",         "l2_relu_tx",        "l5_tanh_sin8",       "l8_gelu_tanh",
    "c1_gelu",      "c2_silu_sin2_xct",  "c3_gelu_sin4_cxt",   "c5_relu_sin6_ctx",
    "c6_gelu_tanh_tcx", "c4_tanh_txc",   "cfg_zeros",          "cfg_null_sin",
    "cfg_w1_l2",    "cfg_l5_relu",
};
enum { FIXTURE_COUNT = sizeof fixtures / sizeof *fixtures };

/* torch float64 and flowgen's fp64 reference differ only in the order of
 * their sums (a few ulps a step). */
#define REFERENCE_TOLERANCE 1e-10

/* ---- reading a fixture -------------------------------------------------- */

typedef struct fixture {
  char path[FG_TEST_PATH_SIZE];
  char act[16], time[32], input[8]; /* the metadata's text (seed: defaults) */
  flowgen_spec spec;     /* from the file: shape, family, steps, solver */
  flowrt_weights *w;
  int64_t batch;
  float *x0;             /* batch x D */
  float *cond;           /* batch x C, NULL when C = 0 */
  float *null_cond;      /* 1 x C, NULL = zeros */
  bool guided;
  float guidance;        /* w (guided only) */
  double *expected_f64;  /* batch x D, torch in float64 */
  float *expected_f32;   /* batch x D, torch in float32 */
} fixture;

/* The tensor `name` of file as a malloc()ed array of `dtype`; its shape must
 * be rows x cols (rows -1: any, stored in *rows_out). */
static void *read_tensor(const fg_st_file *file, const char *path, const char *name,
                         fg_st_dtype dtype, int64_t rows, int64_t cols, int64_t *rows_out) {
  const fg_st_tensor *t = fg_st_find(file, name);
  if (!t) fail_msg("%s: no tensor %s", path, name);
  if (t->dtype != dtype || t->ndim != 2 || (rows >= 0 && t->shape[0] != (uint64_t)rows) ||
      t->shape[1] != (uint64_t)cols)
    fail_msg("%s: %s is %s [%llu, %llu], expected %s [%lld, %lld]", path, name,
             fg_st_dtype_name(t->dtype), (unsigned long long)t->shape[0],
             (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0), fg_st_dtype_name(dtype),
             (long long)rows, (long long)cols);
  void *data = malloc(t->size ? t->size : 1);
  assert_non_null(data);
  flowgen_error err;
  if (fg_st_read_data(file, t, 0, data, t->size, &err)) fail_msg("%s", err.message);
  if (rows_out) *rows_out = (int64_t)t->shape[0];
  return data;
}

/* flowgen_spec_set that fails the test with the library's message. */
static void set(flowgen_spec *spec, const char *field, const char *value) {
  flowgen_error err;
  if (flowgen_spec_set(spec, field, value, &err))
    fail_msg("spec %s=%s: %s", field, value, err.message);
}

/* Loads fixture `name`: the weights through flowrt_weights_load (shape and
 * family from the file alone), the case through the safetensors parser. */
static void load_fixture(const char *name, fixture *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s/tests/data/family/%s.safetensors", fg_test_source_dir(),
           name);
  flowgen_error err;
  if (flowrt_weights_load(f->path, NULL, NULL, &f->w, &err)) fail_msg("%s", err.message);
  fg_st_file *file = NULL;
  if (fg_st_open(f->path, &file, &err)) fail_msg("%s", err.message);

  /* The model as the loader read it, and as the metadata's text says it
   * through flowgen's flags (a file without flowgen.* keys is the seed:
   * silu, raw, x,t,c): the two must agree. */
  flowgen_spec_default(&f->spec);
  flowrt_weights_model(f->w, &f->spec);
  flowgen_spec text;
  flowgen_spec_default(&text);
  text.dim = f->w->dim;
  text.hidden = f->w->hidden;
  struct {
    const char *key, *field, *seed;
    char *text;
    size_t size;
  } family[] = {{"flowgen.act", "act", "silu", f->act, sizeof f->act},
                {"flowgen.time", "time", "raw", f->time, sizeof f->time},
                {"flowgen.input", "input", "x,t,c", f->input, sizeof f->input},
                {"flowgen.cond", "cond", NULL, NULL, 0}};
  for (size_t i = 0; i < sizeof family / sizeof *family; ++i) {
    const char *value = fg_st_metadata_get(file, family[i].key);
    if (value) set(&text, family[i].field, value);
    if (family[i].text) snprintf(family[i].text, family[i].size, "%s", value ? value : family[i].seed);
  }
  char number[16];
  snprintf(number, sizeof number, "%d", f->w->layers);
  set(&text, "layers", number);
  if (flowrt_weights_check(f->w, &text, &err))
    fail_msg("%s: the weights are not the model of the metadata: %s", f->path, err.message);
  const char *steps = fg_st_metadata_get(file, "test.steps");
  const char *solver = fg_st_metadata_get(file, "test.solver");
  if (!steps || !solver) fail_msg("%s: no test.steps or test.solver metadata", f->path);
  set(&f->spec, "steps", steps);
  set(&f->spec, "solver", solver);
  const char *guidance = fg_st_metadata_get(file, "test.guidance");
  f->guidance = 1.0f; /* the conditional field, where there is no guidance */
  if (guidance) {
    set(&f->spec, "guidance", "1");
    f->guided = true;
    f->guidance = strtof(guidance, NULL);
  }

  const int D = f->w->dim, C = f->w->cond;
  f->x0 = read_tensor(file, f->path, "test.x0", FG_ST_F32, -1, D, &f->batch);
  if (C > 0) f->cond = read_tensor(file, f->path, "test.cond", FG_ST_F32, f->batch, C, NULL);
  if (fg_st_find(file, "test.null"))
    f->null_cond = read_tensor(file, f->path, "test.null", FG_ST_F32, 1, C, NULL);
  f->expected_f64 = read_tensor(file, f->path, "test.expected_f64", FG_ST_F64, f->batch, D, NULL);
  f->expected_f32 = read_tensor(file, f->path, "test.expected_f32", FG_ST_F32, f->batch, D, NULL);
  fg_st_free(file);
  if (flowgen_spec_validate(&f->spec, &err)) fail_msg("%s: %s", f->path, err.message);
}

static void free_fixture(fixture *f) {
  flowrt_weights_free(f->w);
  free(f->x0);
  free(f->cond);
  free(f->null_cond);
  free(f->expected_f64);
  free(f->expected_f32);
}

/* max |x - ref| / max |ref|: every element within the tolerance of the
 * sample's scale (a relative error per element would blow up where torch's
 * answer crosses zero).  INFINITY on a NaN. */
static double max_relative(const double *x, const double *ref, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    if (isnan(x[i])) return INFINITY;
    diff = fmax(diff, fabs(x[i] - ref[i]));
    scale = fmax(scale, fabs(ref[i]));
  }
  return diff / (scale > 0 ? scale : 1);
}

static double max_relative_f32(const float *x, const double *ref, size_t n) {
  double *wide = malloc(n * sizeof *wide);
  assert_non_null(wide);
  for (size_t i = 0; i < n; ++i) wide[i] = x[i];
  double e = max_relative(wide, ref, n);
  free(wide);
  return e;
}

/* The fixture's rows repeated `copies` times: x0, cond, and torch's answer
 * (the same for every copy, rows being independent). */
typedef struct repeated {
  int64_t batch;
  float *x0, *cond;
  double *expected;
} repeated;

static void *repeat_rows(const void *rows, size_t row_bytes, int64_t count, int64_t copies) {
  if (!rows) return NULL;
  unsigned char *out = malloc((size_t)(count * copies) * row_bytes);
  assert_non_null(out);
  for (int64_t c = 0; c < copies; ++c)
    memcpy(out + (size_t)(c * count) * row_bytes, rows, (size_t)count * row_bytes);
  return out;
}

static repeated repeat_fixture(const fixture *f, int64_t copies) {
  const size_t D = (size_t)f->w->dim, C = (size_t)f->w->cond;
  return (repeated){f->batch * copies, repeat_rows(f->x0, D * sizeof(float), f->batch, copies),
                    repeat_rows(f->cond, C * sizeof(float), f->batch, copies),
                    repeat_rows(f->expected_f64, D * sizeof(double), f->batch, copies)};
}

/* ---- the fixtures themselves -------------------------------------------- */

/* The files cover every axis of the family, and the shapes flowgen infers
 * from the tensors are the ones torch wrote (D from x0, C from cond, T from
 * the time spec, L from the Linear layers present). */
static void test_fixtures_cover_the_family(void **state) {
  (void)state;
  static const char *const acts[] = {"silu", "gelu", "gelu_tanh", "relu", "tanh"};
  static const char *const orders[] = {"x,t,c", "x,c,t", "t,x,c", "t,c,x", "c,x,t", "c,t,x"};
  bool act_seen[5] = {0}, order_seen[6] = {0}, solver_seen[4] = {0}, layers_seen[9] = {0};
  bool raw = false, sin_default = false, sin_scale = false, cond_zero_reordered = false;
  bool cond_plain = false, guided_zeros = false, guided_vector = false, guided_one = false;
  for (size_t i = 0; i < FIXTURE_COUNT; ++i) {
    fixture f;
    load_fixture(fixtures[i], &f);
    const int D = f.w->dim, C = f.w->cond, L = f.w->layers;
    assert_true(D >= 1 && D <= 8 && f.w->hidden <= 16 && C <= 6 && L >= 2 && L <= 8);
    assert_true(f.batch >= 1 && f.batch <= 8);
    int features = strncmp(f.time, "sin:", 4) == 0 ? atoi(f.time + 4) : 0;
    assert_int_equal(f.w->time_width, features ? features : 1);
    for (int l = 0; l < L; ++l) {
      assert_non_null(f.w->w[l]);
      assert_non_null(f.w->b[l]);
    }
    assert_int_equal(C > 0, f.cond != NULL);
    for (size_t a = 0; a < 5; ++a) act_seen[a] |= strcmp(f.act, acts[a]) == 0;
    for (size_t o = 0; o < 6; ++o) order_seen[o] |= C > 0 && strcmp(f.input, orders[o]) == 0;
    solver_seen[f.spec.solver] = true;
    layers_seen[L] = true;
    raw |= features == 0;
    sin_default |= features > 0 && !strchr(f.time + 4, ':');
    sin_scale |= features > 0 && strchr(f.time + 4, ':');
    cond_zero_reordered |= C == 0 && strcmp(f.input, "x,t,c") != 0;
    cond_plain |= C > 0 && !f.guided;
    guided_zeros |= f.guided && !f.null_cond;
    guided_vector |= f.guided && f.null_cond;
    guided_one |= f.guided && f.guidance == 1.0f;
    free_fixture(&f);
  }
  for (size_t a = 0; a < 5; ++a)
    if (!act_seen[a]) fail_msg("no fixture with act %s", acts[a]);
  for (size_t o = 0; o < 6; ++o)
    if (!order_seen[o]) fail_msg("no conditional fixture with input order %s", orders[o]);
  for (int s = 0; s < 4; ++s)
    if (!solver_seen[s]) fail_msg("no fixture with solver %s", flowgen_solver_name((flowgen_solver)s));
  assert_true(layers_seen[2] && layers_seen[3] && layers_seen[5] && layers_seen[8]);
  assert_true(raw && sin_default && sin_scale && cond_zero_reordered && cond_plain);
  assert_true(guided_zeros && guided_vector && guided_one);
}

/* ---- the fp64 reference ------------------------------------------------- */

/* Every member on the CPU reference, fp64 out and fp32 out. */
static void test_reference_matches_torch(void **state) {
  (void)state;
  for (size_t i = 0; i < FIXTURE_COUNT; ++i) {
    fixture f;
    load_fixture(fixtures[i], &f);
    const size_t n = (size_t)f.batch * f.w->dim;
    double *x = malloc(n * sizeof *x);
    float *x32 = malloc(n * sizeof *x32);
    assert_non_null(x);
    assert_non_null(x32);
    flowgen_error err;
    if (flowrt_reference_cond_f64(&f.spec, f.w, f.x0, x, f.cond, f.null_cond, f.guidance,
                                  f.batch, &err))
      fail_msg("%s: %s", fixtures[i], err.message);
    double e64 = max_relative(x, f.expected_f64, n);
    if (flowrt_reference_cond(&f.spec, f.w, f.x0, x32, f.cond, f.null_cond, f.guidance, f.batch,
                              &err))
      fail_msg("%s: %s", fixtures[i], err.message);
    double e32 = max_relative_f32(x32, f.expected_f64, n);
    double torch32 = max_relative_f32(f.expected_f32, f.expected_f64, n);
    printf("# %-18s fp64 reference vs torch fp64 %.1e, its fp32 output %.1e "
           "(torch fp32 %.1e)\n",
           fixtures[i], e64, e32, torch32);
    if (!(e64 <= REFERENCE_TOLERANCE))
      fail_msg("%s: the fp64 reference differs from torch's float64 by %.3e > %.0e", fixtures[i],
               e64, REFERENCE_TOLERANCE);
    /* rounding the fp64 answer to fp32 loses half an ulp at most */
    assert_true(e32 <= 1e-7);

    /* Hundreds of rows: the reference splits them over threads, each
     * reading its own rows of x0 and cond. */
    repeated b = repeat_fixture(&f, 100);
    double *xb = malloc((size_t)b.batch * f.w->dim * sizeof *xb);
    assert_non_null(xb);
    if (flowrt_reference_cond_f64(&f.spec, f.w, b.x0, xb, b.cond, f.null_cond, f.guidance,
                                  b.batch, &err))
      fail_msg("%s B=%lld: %s", fixtures[i], (long long)b.batch, err.message);
    double eb = max_relative(xb, b.expected, (size_t)b.batch * f.w->dim);
    if (!(eb <= REFERENCE_TOLERANCE))
      fail_msg("%s B=%lld: the fp64 reference differs from torch's float64 by %.3e", fixtures[i],
               (long long)b.batch, eb);
    free(xb);
    free(b.x0);
    free(b.cond);
    free(b.expected);
    free(x);
    free(x32);
    free_fixture(&f);
  }
}

/* ---- the generated kernels (GPU) ---------------------------------------- */

/* Every member in every precision, through the runtime, against torch's
 * float64.  fp32 is held to the order of PyTorch's own fp32 error on these
 * models (checked here too); the matrix-unit precisions to a few times what
 * rounding the operands of every Linear layer to tf32, bf16 or fp16 (fp32
 * sums) gives in PyTorch on the same fixtures. */
/* Batches of a few rows and of a few thousand, so that the planner's small-
 * and large-batch strategies both serve each member. */
static const int64_t copies_per_run[] = {1, 1000};

static void test_kernels_match_torch(void **state) {
  (void)state;
  FG_SKIP_WITHOUT_GPU();
  static const struct {
    flowgen_precision precision;
    double tolerance;
  } precisions[] = {{FLOWGEN_PRECISION_FP32, 1e-6}, {FLOWGEN_PRECISION_TF32, 3e-3},
                    {FLOWGEN_PRECISION_BF16, 2e-2}, {FLOWGEN_PRECISION_FP16, 5e-3}};
  char *cache_dir = fg_test_mkdtemp();
  flowrt_options opts = {.disk_cache = 1, .cache_dir = cache_dir};
  flowrt_runtime *rt = NULL;
  flowgen_error err;
  if (flowrt_open(&opts, &rt, &err)) fail_msg("flowrt_open: %s", err.message);
  for (size_t i = 0; i < FIXTURE_COUNT; ++i) {
    fixture f;
    load_fixture(fixtures[i], &f);
    double torch32 = max_relative_f32(f.expected_f32, f.expected_f64, (size_t)f.batch * f.w->dim);
    assert_true(torch32 <= 1e-6);
    for (size_t p = 0; p < sizeof precisions / sizeof *precisions; ++p) {
      flowgen_spec spec = f.spec;
      spec.precision = precisions[p].precision;
      const char *precision = flowgen_precision_name(spec.precision);
      flowrt_sampler *s = NULL;
      if (flowrt_sampler_create(rt, &spec, f.w, &s, &err))
        fail_msg("%s %s: %s", fixtures[i], precision, err.message);
      for (size_t r = 0; r < sizeof copies_per_run / sizeof *copies_per_run; ++r) {
        repeated b = repeat_fixture(&f, copies_per_run[r]);
        const size_t n = (size_t)b.batch * f.w->dim;
        float *x = malloc(n * sizeof *x);
        assert_non_null(x);
        for (size_t k = 0; k < n; ++k) x[k] = NAN; /* poison */
        flowgen_status st = f.cond ? flowrt_sample_host_cond(s, b.x0, x, b.cond, f.null_cond,
                                                             f.guidance, b.batch, &err)
                                   : flowrt_sample_host(s, b.x0, x, b.batch, &err);
        if (st) fail_msg("%s %s B=%lld: %s", fixtures[i], precision, (long long)b.batch, err.message);
        double e = max_relative_f32(x, b.expected, n);
        printf("# %-18s %s B=%lld: kernel vs torch fp64 %.1e (torch fp32 %.1e)\n", fixtures[i],
               precision, (long long)b.batch, e, torch32);
        if (!(e <= precisions[p].tolerance))
          fail_msg("%s %s B=%lld: the kernel differs from torch's float64 by %.3e > %.0e",
                   fixtures[i], precision, (long long)b.batch, e, precisions[p].tolerance);
        free(x);
        free(b.x0);
        free(b.cond);
        free(b.expected);
      }
      flowrt_sampler_destroy(s);
    }
    free_fixture(&f);
  }
  flowrt_close(rt);
  fg_test_rmtree(cache_dir);
  free(cache_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixtures_cover_the_family),
      cmocka_unit_test(test_reference_matches_torch),
      cmocka_unit_test(test_kernels_match_torch),
  };
  return cmocka_run_group_tests_name("family", tests, NULL, NULL);
}
