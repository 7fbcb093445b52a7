/* `flowgen sample` and `flowgen cache` (and the kernel options' refused
 * combinations), driven as a user would: through the binary, checking exit
 * codes, the one-line "flowgen: ..." messages, and the files written (or, on
 * failure, not written). */
#include "support.h"

#include "cli.h"
#include "flowrt.h"
#include "npy.h"
#include "safetensors.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_SIZE FG_TEST_PATH_SIZE
#define CMD_SIZE 16384

/* Exit codes (flowgen --help). */
enum { EXIT_IO = 1, EXIT_USAGE = 2, EXIT_DRIVER = 5, EXIT_INPUT = 6 };

/* snprintf that fails the test rather than truncate. */
static void print_into(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void print_into(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size) fail_msg("text too long for its buffer: %.80s...", buf);
}

static char data_dir[PATH_SIZE];     /* tests/data */
static char weights_path[PATH_SIZE]; /* tiny_f32.safetensors: D=3, H=5 */

typedef struct cli_fixture {
  char *dir;             /* this test's scratch folder */
  char cache[PATH_SIZE]; /* $FLOWGEN_CACHE_DIR for its commands */
  char out[PATH_SIZE];   /* the usual -o */
} cli_fixture;

static int group_setup(void **state) {
  (void)state;
  print_into(data_dir, sizeof data_dir, "%s/tests/data", fg_test_source_dir());
  print_into(weights_path, sizeof weights_path, "%s/tiny_f32.safetensors", data_dir);
  if (!fg_test_file_exists(weights_path) || !fg_test_file_exists(fg_test_flowgen_bin())) {
    fprintf(stderr, "missing %s or %s (FLOWGEN_SOURCE_DIR, FLOWGEN_BIN)\n", weights_path,
            fg_test_flowgen_bin());
    return -1;
  }
  return 0;
}

static int setup(void **state) {
  cli_fixture *f = calloc(1, sizeof *f);
  f->dir = fg_test_mkdtemp();
  print_into(f->cache, sizeof f->cache, "%s/cache", f->dir);
  print_into(f->out, sizeof f->out, "%s/out.npy", f->dir);
  /* Every command gets this cache folder: none touches ~/.cache. */
  setenv("FLOWGEN_CACHE_DIR", f->cache, 1);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  cli_fixture *f = *state;
  fg_test_rmtree(f->dir);
  free(f->dir);
  free(f);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static bool contains_bytes(const char *data, size_t size, const char *part) {
  size_t n = strlen(part);
  for (size_t i = 0; i + n <= size; ++i)
    if (memcmp(data + i, part, n) == 0) return true;
  return false;
}

/* Runs `flowgen ARGS` (ARGS is shell text); returns the exit code. */
static int flowgen(char **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int flowgen(char **out, char **err, const char *fmt, ...) {
  char args[CMD_SIZE - PATH_SIZE - 8], cmd[CMD_SIZE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  assert_true(n > 0 && (size_t)n < sizeof args);
  print_into(cmd, sizeof cmd, "'%s' %s", fg_test_flowgen_bin(), args);
  return fg_test_run(cmd, out, err);
}

/* stderr must be exactly one line "flowgen: ...\n" holding each of parts. */
static void expect_one_error_line(const char *err, const char *part1, const char *part2) {
  if (strncmp(err, "flowgen: ", 9) != 0 || !strchr(err, '\n') ||
      strchr(err, '\n')[1] != '\0')
    fail_msg("expected one line \"flowgen: ...\" on stderr, got: [%s]", err);
  if (part1 && !strstr(err, part1)) fail_msg("expected '%s' in: %s", part1, err);
  if (part2 && !strstr(err, part2)) fail_msg("expected '%s' in: %s", part2, err);
}

static const char sentinel[] = "an output file from before: must survive\n";

/* Runs a sample command meant to fail, twice: with no output file (none may
 * appear) and with one already there (it must be left as it was).  The
 * command's -o is f->out.  Expects the exit code and an error line naming
 * part1 (and part2). */
static void expect_sample_fails(cli_fixture *f, int code, const char *part1,
                                const char *part2, const char *args) {
  for (int existing = 0; existing < 2; ++existing) {
    remove(f->out);
    if (existing) fg_test_write_file(f->out, sentinel, sizeof sentinel - 1);
    size_t entries = fg_test_count_entries(f->dir);
    char *out = NULL, *err = NULL;
    int rc = flowgen(&out, &err, "sample %s", args);
    if (rc != code) fail_msg("sample %s: exit %d, expected %d; stderr: %s", args, rc, code, err);
    expect_one_error_line(err, part1, part2);
    assert_string_equal(out, "");
    if (!existing) {
      if (fg_test_file_exists(f->out)) fail_msg("sample %s: wrote %s", args, f->out);
    } else {
      size_t size = 0;
      char *now = fg_test_read_file(f->out, &size);
      assert_non_null(now);
      if (size != sizeof sentinel - 1 || memcmp(now, sentinel, size) != 0)
        fail_msg("sample %s: changed the existing %s", args, f->out);
      free(now);
    }
    /* No temporary file left next to the output either. */
    if (fg_test_count_entries(f->dir) != entries)
      fail_msg("sample %s: left a file behind", args);
    free(out);
    free(err);
  }
}

static float *read_npy(const char *path, int64_t *rows, int64_t *cols) {
  float *data = NULL;
  flowgen_error err;
  if (fg_npy_read(path, &data, rows, cols, &err)) fail_msg("%s", err.message);
  return data;
}

static void write_npy(const char *path, const float *data, int64_t rows, int64_t cols) {
  flowgen_error err;
  if (fg_npy_write(path, data, rows, cols, &err)) fail_msg("%s", err.message);
}

/* The fp64 reference rounded to fp32, in this process. */
static float *reference(const float *x0, int64_t rows, int steps) {
  flowrt_weights *w = NULL;
  flowgen_error err;
  if (flowrt_weights_load(weights_path, NULL, NULL, &w, &err)) fail_msg("%s", err.message);
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 5);
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.dim = 3;
  spec.hidden = 5;
  spec.steps = steps;
  float *x = malloc((size_t)rows * 3 * sizeof(float) + 1);
  if (flowrt_reference(&spec, w, x0, x, rows, &err)) fail_msg("%s", err.message);
  flowrt_weights_free(w);
  return x;
}

/* ---- sample: results --------------------------------------------------------- */

static void expect_sample_ok(const char *args) {
  char *out = NULL, *err = NULL;
  int rc = flowgen(&out, &err, "sample %s", args);
  if (rc != 0) fail_msg("sample %s: exit %d: %s", args, rc, err);
  assert_string_equal(out, "");
  assert_string_equal(err, "");
  free(out);
  free(err);
}

static void test_sample_cpu_matches_reference(void **state) {
  cli_fixture *f = *state;
  enum { ROWS = 7 };
  float x0[ROWS * 3];
  fg_test_fill_uniform(x0, ROWS * 3, fg_test_seed(), 2.5f);
  char x0_path[PATH_SIZE];
  fg_test_path_join(x0_path, f->dir, "x0.npy");
  write_npy(x0_path, x0, ROWS, 3);

  const int steps[2] = {32, 5}; /* the default, and --steps */
  for (int k = 0; k < 2; ++k) {
    char args[CMD_SIZE / 2];
    print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'%s",
             weights_path, x0_path, f->out, k ? " --steps 5" : "");
    expect_sample_ok(args);
    int64_t rows = 0, cols = 0;
    float *x = read_npy(f->out, &rows, &cols);
    assert_int_equal(rows, ROWS);
    assert_int_equal(cols, 3);
    float *want = reference(x0, ROWS, steps[k]);
    assert_memory_equal(x, want, sizeof x0);
    assert_memory_not_equal(x, x0, sizeof x0); /* the flow moved the points */
    free(x);
    free(want);
  }

  /* float64 starting points are read and rounded to float32. */
  char x0_f8[PATH_SIZE];
  fg_test_path_join(x0_f8, data_dir, "tiny_f8.npy");
  char args[CMD_SIZE / 2];
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
           x0_f8, f->out);
  expect_sample_ok(args);
  int64_t rows = 0, cols = 0, rows0 = 0, cols0 = 0;
  float *x = read_npy(f->out, &rows, &cols);
  float *start = read_npy(x0_f8, &rows0, &cols0);
  assert_int_equal(rows, 4);
  assert_int_equal(rows0, 4);
  float *want = reference(start, rows0, 32);
  assert_memory_equal(x, want, 4 * 3 * sizeof(float));
  free(x);
  free(start);
  free(want);
}

static void test_sample_seed_is_deterministic(void **state) {
  cli_fixture *f = *state;
  char a[PATH_SIZE], b[PATH_SIZE], c[PATH_SIZE], d[PATH_SIZE];
  fg_test_path_join(a, f->dir, "a.npy");
  fg_test_path_join(b, f->dir, "b.npy");
  fg_test_path_join(c, f->dir, "c.npy");
  fg_test_path_join(d, f->dir, "d.npy");
  char args[CMD_SIZE / 2];
  const char *outs[4] = {a, b, c, d};
  const char *seeds[4] = {"--batch 5 --seed 7", "--batch=5 --seed=7", "--batch 5 --seed 8",
                          ""};
  for (int i = 0; i < 4; ++i) {
    print_into(args, sizeof args, "--weights '%s' --device cpu %s -o '%s'", weights_path,
             seeds[i], outs[i]);
    expect_sample_ok(args);
  }
  size_t sa, sb, sc;
  char *fa = fg_test_read_file(a, &sa), *fb = fg_test_read_file(b, &sb),
       *fc = fg_test_read_file(c, &sc);
  assert_non_null(fa);
  assert_non_null(fb);
  assert_non_null(fc);
  assert_int_equal(sa, sb);
  assert_memory_equal(fa, fb, sa); /* same seed, same bytes */
  assert_int_equal(sa, sc);
  assert_memory_not_equal(fa, fc, sa); /* another seed, other points */
  int64_t rows = 0, cols = 0;
  float *x = read_npy(a, &rows, &cols);
  assert_int_equal(rows, 5);
  assert_int_equal(cols, 3);
  for (int i = 0; i < 15; ++i) assert_true(x[i] == x[i]); /* no NaN */
  free(x);
  free(fa);
  free(fb);
  free(fc);
  /* No --batch and no --x0: 16 samples. */
  x = read_npy(d, &rows, &cols);
  assert_int_equal(rows, 16);
  assert_int_equal(cols, 3);
  free(x);
}

static void test_sample_batch_zero(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2];
  print_into(args, sizeof args, "--weights '%s' --device cpu --batch 0 -o '%s'", weights_path,
           f->out);
  expect_sample_ok(args);
  int64_t rows = -1, cols = -1;
  float *x = read_npy(f->out, &rows, &cols);
  assert_int_equal(rows, 0);
  assert_int_equal(cols, 3);
  free(x);
  size_t size = 0;
  char *raw = fg_test_read_file(f->out, &size);
  assert_non_null(raw);
  assert_true(contains_bytes(raw, size, "'shape': (0, 3)")); /* the header has NULs */
  free(raw);
}

static void test_sample_verbose_prints_the_phases(void **state) {
  cli_fixture *f = *state;
  char *out = NULL, *err = NULL;
  int rc = flowgen(&out, &err, "sample -v --weights '%s' --device cpu --batch 3 -o '%s'",
                   weights_path, f->out);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  assert_string_equal(out, "");
  assert_non_null(strstr(err, "flowgen: weights "));
  assert_non_null(strstr(err, "tiny_f32.safetensors"));
  assert_non_null(strstr(err, "D=3 H=5"));
  assert_non_null(strstr(err, "flowgen: cpu reference (fp64): "));
  assert_non_null(strstr(err, " ms"));
  for (const char *line = err; *line; line = strchr(line, '\n') + 1) {
    if (strncmp(line, "flowgen: ", 9) != 0) fail_msg("a line without \"flowgen: \": %s", line);
    if (!strchr(line, '\n')) fail_msg("unterminated line: %s", line);
  }
  free(out);
  free(err);
  assert_true(fg_test_file_exists(f->out));

  /* --device auto says which device it took. */
  rc = flowgen(&out, &err, "sample --verbose --weights '%s' --batch 3 -o '%s'", weights_path,
               f->out);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  if (fg_test_have_gpu()) {
    assert_non_null(strstr(err, "flowgen: device: gpu"));
    assert_non_null(strstr(err, "flowgen: module: "));
  } else {
    assert_non_null(strstr(err, "flowgen: device: cpu (no usable GPU)"));
  }
  free(out);
  free(err);
}

/* ---- sample: refusals ------------------------------------------------------ */

static void test_sample_bad_weights(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2], path[PATH_SIZE];

  fg_test_path_join(path, f->dir, "missing.safetensors");
  print_into(args, sizeof args, "--weights '%s' --device cpu -o '%s'", path, f->out);
  expect_sample_fails(f, EXIT_IO, path, "No such file", args);

  /* The first 100 bytes of a good file. */
  size_t size = 0;
  char *good = fg_test_read_file(weights_path, &size);
  assert_non_null(good);
  assert_true(size > 200);
  fg_test_path_join(path, f->dir, "truncated.safetensors");
  fg_test_write_file(path, good, 100);
  print_into(args, sizeof args, "--weights '%s' --device cpu -o '%s'", path, f->out);
  expect_sample_fails(f, EXIT_INPUT, path, NULL, args);
  /* ... and all of it but the last tensor's last byte. */
  fg_test_write_file(path, good, size - 1);
  expect_sample_fails(f, EXIT_INPUT, path, NULL, args);
  free(good);

  print_into(args, sizeof args, "--weights '%s' --prefix model. --device cpu -o '%s'",
           weights_path, f->out);
  expect_sample_fails(f, EXIT_INPUT, weights_path, "'model.0.weight'", args);

  /* Not safetensors at all. */
  fg_test_path_join(path, data_dir, "tiny_f4.npy");
  print_into(args, sizeof args, "--weights '%s' --device cpu -o '%s'", path, f->out);
  expect_sample_fails(f, EXIT_INPUT, path, NULL, args);

  /* A shape that is not the file's. */
  print_into(args, sizeof args, "--weights '%s' --dim 4 --device cpu -o '%s'", weights_path,
           f->out);
  expect_sample_fails(f, EXIT_INPUT, weights_path, "D=4", args);
}

static void test_sample_bad_x0(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2], path[PATH_SIZE];
  float x0[4 * 4];
  fg_test_fill_uniform(x0, 16, 3, 1.0f);

  fg_test_path_join(path, f->dir, "four_columns.npy");
  write_npy(path, x0, 4, 4);
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
           path, f->out);
  expect_sample_fails(f, EXIT_INPUT, path, "4 columns", args);

  fg_test_path_join(path, data_dir, "tiny_i4.npy");
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
           path, f->out);
  expect_sample_fails(f, EXIT_INPUT, path, "<i4", args);

  /* A good 4 x 3 array without its last value. */
  fg_test_path_join(path, f->dir, "truncated.npy");
  write_npy(path, x0, 4, 3);
  size_t size = 0;
  char *whole = fg_test_read_file(path, &size);
  assert_non_null(whole);
  fg_test_write_file(path, whole, size - 4);
  free(whole);
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
           path, f->out);
  expect_sample_fails(f, EXIT_INPUT, path, NULL, args);

  fg_test_path_join(path, f->dir, "missing.npy");
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
           path, f->out);
  expect_sample_fails(f, EXIT_IO, path, NULL, args);
}

static void test_sample_usage_errors(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2], x0[PATH_SIZE];
  fg_test_path_join(x0, data_dir, "tiny_f4.npy");

  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --batch 4 --device cpu -o '%s'",
           weights_path, x0, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--batch", "--x0", args);

  print_into(args, sizeof args, "--weights '%s' --device cpu", weights_path);
  expect_sample_fails(f, EXIT_USAGE, "-o", NULL, args);

  /* no --weights means the built-in model; --weights without a file does not */
  print_into(args, sizeof args, "--device cpu -o '%s' --weights", f->out);
  expect_sample_fails(f, EXIT_USAGE, "--weights", NULL, args);

  print_into(args, sizeof args, "--weights '%s' --batch -1 -o '%s'", weights_path, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--batch", NULL, args);

  print_into(args, sizeof args, "--weights '%s' --device tpu -o '%s'", weights_path, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--device", "tpu", args);

  print_into(args, sizeof args, "--weights '%s' --steps 0 -o '%s'", weights_path, f->out);
  expect_sample_fails(f, EXIT_USAGE, "steps", NULL, args);

  print_into(args, sizeof args, "--weights '%s' --frobnicate -o '%s'", weights_path, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--frobnicate", NULL, args);

  print_into(args, sizeof args, "--weights '%s' -o", weights_path);
  expect_sample_fails(f, EXIT_USAGE, "-o", NULL, args);
}

/* Starting points must be finite: a NaN or an infinity in --x0 is refused
 * with the file, the row and the column (a float64 beyond float32's range
 * reads as an infinity). */
static void test_sample_x0_not_finite(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2], path[PATH_SIZE];
  float x0[4 * 3];
  fg_test_fill_uniform(x0, 12, 5, 1.0f);
  fg_test_path_join(path, f->dir, "nan.npy");
  float saved = x0[1 * 3 + 2];
  x0[1 * 3 + 2] = NAN;
  write_npy(path, x0, 4, 3);
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
             path, f->out);
  expect_sample_fails(f, EXIT_INPUT, "nan.npy: row 1, column 2 is nan", "finite", args);

  x0[1 * 3 + 2] = saved;
  x0[3 * 3 + 0] = -INFINITY;
  fg_test_path_join(path, f->dir, "inf.npy");
  write_npy(path, x0, 4, 3);
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
             path, f->out);
  expect_sample_fails(f, EXIT_INPUT, "inf.npy: row 3, column 0 is -inf", NULL, args);

  /* One row, as a vector: row 0. */
  x0[3 * 3 + 0] = 0.5f;
  x0[2] = INFINITY;
  fg_test_path_join(path, f->dir, "vector.npy");
  write_npy(path, x0, 1, 3);
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --device cpu -o '%s'", weights_path,
             path, f->out);
  expect_sample_fails(f, EXIT_INPUT, "vector.npy: row 0, column 2 is inf", NULL, args);
}

/* The weights must be finite too; the message names the tensor and the
 * element ([row, column] of a matrix). */
static void test_sample_weights_not_finite(void **state) {
  cli_fixture *f = *state;
  size_t size = 0;
  char *image = fg_test_read_file(weights_path, &size);
  assert_non_null(image);
  fg_st_file *file = NULL;
  flowgen_error err;
  if (fg_st_parse(image, size, "tiny", &file, &err)) fail_msg("%s", err.message);
  const fg_st_tensor *w2 = fg_st_find(file, "velocity.2.weight");
  assert_non_null(w2);
  assert_int_equal(w2->dtype, FG_ST_F32);
  const float nan = NAN;
  memcpy((unsigned char *)w2->data + 4 * (1 * 5 + 3), &nan, 4); /* [1, 3] of 5 x 5 */
  fg_st_free(file);
  char path[PATH_SIZE], args[CMD_SIZE / 2];
  fg_test_path_join(path, f->dir, "nan.safetensors");
  fg_test_write_file(path, image, size);
  free(image);
  print_into(args, sizeof args, "--weights '%s' --device cpu --batch 2 -o '%s'", path, f->out);
  expect_sample_fails(f, EXIT_INPUT, "nan.safetensors: tensor 'velocity.2.weight'",
                      "nan at [1, 3]", args);
}

static void test_sample_x0_with_seed(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2], x0[PATH_SIZE];
  fg_test_path_join(x0, data_dir, "tiny_f4.npy");
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --seed 3 --device cpu -o '%s'",
             weights_path, x0, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--seed", "--x0", args);
  print_into(args, sizeof args, "--weights '%s' --seed=3 --x0 '%s' --device cpu -o '%s'",
             weights_path, x0, f->out);
  expect_sample_fails(f, EXIT_USAGE, "--seed", "--x0", args);
}

/* Without --weights the model is the built-in one (D=64, H=256): a --dim or
 * --hidden that says otherwise is refused, not ignored. */
static void test_sample_builtin_shape_flags(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2];
  print_into(args, sizeof args, "--dim 32 --device cpu --batch 1 -o '%s'", f->out);
  expect_sample_fails(f, EXIT_USAGE, "--dim 32", "D = 64", args);
  print_into(args, sizeof args, "--hidden=128 --device cpu --batch 1 -o '%s'", f->out);
  expect_sample_fails(f, EXIT_USAGE, "--hidden 128", "H = 256", args);
  /* The model's own shape is fine. */
  print_into(args, sizeof args, "--dim 64 --hidden 256 --device cpu --batch 1 --steps 1 -o '%s'",
             f->out);
  expect_sample_ok(args);
  int64_t rows = 0, cols = 0;
  float *x = read_npy(f->out, &rows, &cols);
  assert_int_equal(rows, 1);
  assert_int_equal(cols, 64);
  free(x);
}

/* ---- sample: the model family ------------------------------------------------- */

/* A model of the family as PyTorch would save it: F32 tensors of
 * velocity.0, velocity.2, ... and __metadata__ (metadata: the JSON object
 * of it, or NULL), random values.  The first layer is D + T + C wide. */
static void write_family(const char *path, int dim, int hidden, int in_width, int layers,
                         const char *metadata, uint64_t seed) {
  char header[4096];
  size_t len = 0, offset = 0;
  float *data[2 * FLOWGEN_LAYERS_MAX];
  size_t count[2 * FLOWGEN_LAYERS_MAX];
  len += (size_t)snprintf(header + len, sizeof header - len, "{");
  if (metadata) len += (size_t)snprintf(header + len, sizeof header - len, "\"__metadata__\":%s,", metadata);
  for (int i = 0; i < layers; ++i) {
    int rows = i == layers - 1 ? dim : hidden, cols = i == 0 ? in_width : hidden;
    for (int k = 0; k < 2; ++k) {
      int n = 2 * i + k;
      count[n] = (size_t)(k ? rows : rows * cols);
      data[n] = malloc(count[n] * sizeof(float));
      fg_test_fill_uniform(data[n], count[n], seed + (uint64_t)n, 1.2f / sqrtf((float)cols));
      char shape[64];
      if (k) snprintf(shape, sizeof shape, "[%d]", rows);
      else snprintf(shape, sizeof shape, "[%d,%d]", rows, cols);
      len += (size_t)snprintf(header + len, sizeof header - len,
                              "%s\"velocity.%d.%s\":{\"dtype\":\"F32\",\"shape\":%s,"
                              "\"data_offsets\":[%zu,%zu]}",
                              n ? "," : "", 2 * i, k ? "bias" : "weight", shape, offset,
                              offset + count[n] * sizeof(float));
      offset += count[n] * sizeof(float);
    }
  }
  len += (size_t)snprintf(header + len, sizeof header - len, "}");
  assert_true(len < sizeof header);
  unsigned char *file = malloc(8 + len + offset);
  for (int b = 0; b < 8; ++b) file[b] = (unsigned char)((uint64_t)len >> (8 * b));
  memcpy(file + 8, header, len);
  size_t at = 8 + len;
  for (int n = 0; n < 2 * layers; ++n) {
    memcpy(file + at, data[n], count[n] * sizeof(float)); /* x86: little-endian */
    at += count[n] * sizeof(float);
    free(data[n]);
  }
  fg_test_write_file(path, file, at);
  free(file);
}

/* The fp64 reference of `path`'s model (what it says of itself) with
 * `steps`, rounded to fp32. */
static float *family_reference(const char *path, const float *x0, const float *cond,
                               const float *null_cond, float guidance, int64_t rows, int steps) {
  flowrt_weights *w = NULL;
  flowgen_error err;
  if (flowrt_weights_load(path, NULL, NULL, &w, &err)) fail_msg("%s", err.message);
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowrt_weights_model(w, &spec);
  spec.steps = steps;
  spec.guidance = guidance != 1.0f || null_cond;
  float *x = malloc((size_t)rows * (size_t)w->dim * sizeof(float) + 1);
  if (flowrt_reference_cond(&spec, w, x0, x, cond, null_cond, guidance, rows, &err))
    fail_msg("%s", err.message);
  flowrt_weights_free(w);
  return x;
}

static void expect_npy(const char *path, const float *want, int64_t rows, int64_t cols) {
  int64_t r = 0, c = 0;
  float *x = read_npy(path, &r, &c);
  assert_int_equal(r, rows);
  assert_int_equal(c, cols);
  assert_memory_equal(x, want, (size_t)(rows * cols) * sizeof(float));
  free(x);
}

#define FAMILY_METADATA                                                       \
  "{\"flowgen.act\":\"gelu\",\"flowgen.time\":\"sin:4:50\",\"flowgen.input\":\"c,x,t\"}"

/* `--device cpu` samples a conditional model as the fp64 reference does:
 * B x C conditioning, one row for all, guidance with and without a null
 * conditioning. */
static void test_sample_conditional_cpu(void **state) {
  cli_fixture *f = *state;
  enum { D = 3, H = 6, C = 3, T = 4, B = 5 };
  char weights[PATH_SIZE], x0_path[PATH_SIZE], cond_path[PATH_SIZE], row_path[PATH_SIZE],
      null_path[PATH_SIZE], args[CMD_SIZE / 2];
  fg_test_path_join(weights, f->dir, "cond.safetensors");
  write_family(weights, D, H, D + T + C, 4, FAMILY_METADATA, 11);
  float x0[B * D], cond[B * C], row[C], rows[B * C], null_cond[C];
  fg_test_fill_uniform(x0, B * D, 1, 1.5f);
  fg_test_fill_uniform(cond, B * C, 2, 1.0f);
  fg_test_fill_uniform(row, C, 3, 1.0f);
  fg_test_fill_uniform(null_cond, C, 4, 1.0f);
  for (int r = 0; r < B; ++r) memcpy(rows + r * C, row, sizeof row);
  fg_test_path_join(x0_path, f->dir, "x0.npy");
  fg_test_path_join(cond_path, f->dir, "c.npy");
  fg_test_path_join(row_path, f->dir, "row.npy");
  fg_test_path_join(null_path, f->dir, "null.npy");
  write_npy(x0_path, x0, B, D);
  write_npy(cond_path, cond, B, C);
  write_npy(row_path, row, 1, C);
  write_npy(null_path, null_cond, 1, C);

  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --cond '%s' --steps 4 --device cpu -o '%s'",
             weights, x0_path, cond_path, f->out);
  expect_sample_ok(args);
  float *want = family_reference(weights, x0, cond, NULL, 1.0f, B, 4);
  expect_npy(f->out, want, B, D);
  free(want);

  /* One row for every sample. */
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --cond '%s' --steps 4 --device cpu -o '%s'",
             weights, x0_path, row_path, f->out);
  expect_sample_ok(args);
  want = family_reference(weights, x0, rows, NULL, 1.0f, B, 4);
  expect_npy(f->out, want, B, D);
  free(want);

  /* Guidance: zeros as the null conditioning, then a given one. */
  print_into(args, sizeof args,
             "--weights '%s' --x0 '%s' --cond '%s' --guidance 2.5 --steps 3 --solver heun "
             "--device cpu -o '%s'", weights, x0_path, cond_path, f->out);
  char *out = NULL, *err = NULL;
  int rc = flowgen(&out, &err, "sample %s", args);
  if (rc) fail_msg("exit %d: %s", rc, err);
  free(out);
  free(err);
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_load(weights, NULL, NULL, &w, NULL), FLOWGEN_OK);
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowrt_weights_model(w, &spec);
  spec.steps = 3;
  spec.solver = FLOWGEN_SOLVER_HEUN;
  spec.guidance = true;
  float got[B * D];
  assert_int_equal(flowrt_reference_cond(&spec, w, x0, got, cond, NULL, 2.5f, B, NULL), FLOWGEN_OK);
  expect_npy(f->out, got, B, D);
  print_into(args, sizeof args,
             "--weights '%s' --x0 '%s' --cond '%s' --guidance=-0.5 --null-cond '%s' --steps 3 "
             "--solver heun --device cpu -o '%s'", weights, x0_path, cond_path, null_path, f->out);
  expect_sample_ok(args);
  assert_int_equal(flowrt_reference_cond(&spec, w, x0, got, cond, null_cond, -0.5f, B, NULL),
                   FLOWGEN_OK);
  expect_npy(f->out, got, B, D);
  flowrt_weights_free(w);

  /* The flags that agree with the file are fine; --verbose names the model. */
  rc = flowgen(&out, &err, "sample -v --weights '%s' --x0 '%s' --cond '%s' --act gelu "
               "--time sin:4:50 --input c,x,t --layers 4 --device cpu -o '%s'",
               weights, x0_path, cond_path, f->out);
  if (rc) fail_msg("exit %d: %s", rc, err);
  assert_non_null(strstr(err, "D=3 H=6 C=3 L=4 act gelu time sin:4:50 input c,x,t"));
  free(out);
  free(err);
}

/* A file without metadata: the flags say what it cannot (and change the
 * samples); --class N is the one-hot conditioning; --class all a row of
 * the picture per class. */
static void test_sample_class_and_flags(void **state) {
  cli_fixture *f = *state;
  enum { D = 4, H = 5, C = 4, B = 3 };
  char weights[PATH_SIZE], x0_path[PATH_SIZE], cond_path[PATH_SIZE], png_a[PATH_SIZE],
      png_b[PATH_SIZE], out_b[PATH_SIZE], args[CMD_SIZE / 2];
  fg_test_path_join(weights, f->dir, "plain.safetensors");
  write_family(weights, D, H, D + 1 + C, 3, NULL, 21);
  float x0[B * D], onehot[8 * C] = {0};
  fg_test_fill_uniform(x0, B * D, 5, 1.0f);
  fg_test_path_join(x0_path, f->dir, "x0.npy");
  write_npy(x0_path, x0, B, D);
  for (int r = 0; r < B; ++r) onehot[r * C + 2] = 1.0f;
  fg_test_path_join(cond_path, f->dir, "onehot.npy");
  write_npy(cond_path, onehot, B, C);

  /* --class 2 is one-hot(2). */
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --class 2 --steps 2 --device cpu -o '%s'",
             weights, x0_path, f->out);
  expect_sample_ok(args);
  float *want = family_reference(weights, x0, onehot, NULL, 1.0f, B, 2);
  expect_npy(f->out, want, B, D);
  free(want);

  /* --act tanh --input t,c,x: the file has no metadata, the flags decide. */
  print_into(args, sizeof args, "--weights '%s' --x0 '%s' --cond '%s' --act tanh --input t,c,x "
             "--steps 2 --device cpu -o '%s'", weights, x0_path, cond_path, f->out);
  expect_sample_ok(args);
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  expect.act = FLOWGEN_ACT_TANH;
  strcpy(expect.input, "tcx");
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_load(weights, NULL, &expect, &w, NULL), FLOWGEN_OK);
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowrt_weights_model(w, &spec);
  spec.steps = 2;
  float got[B * D];
  assert_int_equal(flowrt_reference_cond(&spec, w, x0, got, onehot, NULL, 1.0f, B, NULL), FLOWGEN_OK);
  expect_npy(f->out, got, B, D);
  flowrt_weights_free(w);

  /* --class all --batch 2: classes 0, 0, 1, 1, ... from the seed's points,
   * as the same rows given with --cond; the picture a row per class. */
  float rows[8 * C] = {0};
  for (int r = 0; r < 8; ++r) rows[r * C + r / 2] = 1.0f;
  fg_test_path_join(cond_path, f->dir, "classes.npy");
  write_npy(cond_path, rows, 8, C);
  fg_test_path_join(png_a, f->dir, "a.png");
  fg_test_path_join(png_b, f->dir, "b.png");
  fg_test_path_join(out_b, f->dir, "b.npy");
  print_into(args, sizeof args, "--weights '%s' --class all --batch 2 --seed 9 --steps 2 "
             "--device cpu -o '%s' --png '%s' --png-scale 1", weights, f->out, png_a);
  expect_sample_ok(args);
  print_into(args, sizeof args, "--weights '%s' --cond '%s' --seed 9 --steps 2 --device cpu "
             "-o '%s' --png '%s' --png-scale 1 --png-columns 2", weights, cond_path, out_b, png_b);
  expect_sample_ok(args);
  size_t sa = 0, sb = 0;
  char *a = fg_test_read_file(f->out, &sa), *b = fg_test_read_file(out_b, &sb);
  assert_int_equal(sa, sb);
  assert_memory_equal(a, b, sa);
  free(a);
  free(b);
  a = fg_test_read_file(png_a, &sa);
  b = fg_test_read_file(png_b, &sb);
  assert_int_equal(sa, sb);
  assert_memory_equal(a, b, sa);
  free(a);
  free(b);
  int64_t r = 0, c = 0;
  float *x = read_npy(f->out, &r, &c);
  assert_int_equal(r, 8);
  free(x);
}

/* The conditioning's refusals: exit 2 for flags, 6 for arrays and
 * weights, one line naming the problem, nothing written. */
static void test_sample_conditional_refusals(void **state) {
  cli_fixture *f = *state;
  enum { D = 3, H = 4, C = 2 };
  char weights[PATH_SIZE], plain[PATH_SIZE], meta[PATH_SIZE], x0_path[PATH_SIZE],
      cond_path[PATH_SIZE], wide[PATH_SIZE], three[PATH_SIZE], nan_path[PATH_SIZE],
      two_rows[PATH_SIZE], args[CMD_SIZE / 2];
  fg_test_path_join(weights, f->dir, "cond.safetensors");
  write_family(weights, D, H, D + 1 + C, 3, NULL, 31);
  fg_test_path_join(meta, f->dir, "meta.safetensors");
  write_family(meta, D, H, D + 4 + C, 4,
               "{\"flowgen.act\":\"gelu\",\"flowgen.time\":\"sin:4\"}", 32);
  float x0[4 * D] = {0}, cond[4 * 3] = {0};
  fg_test_path_join(x0_path, f->dir, "x0.npy");
  write_npy(x0_path, x0, 4, D);
  fg_test_path_join(cond_path, f->dir, "c.npy");
  write_npy(cond_path, cond, 4, C);
  fg_test_path_join(wide, f->dir, "wide.npy");
  write_npy(wide, cond, 4, 3);
  fg_test_path_join(three, f->dir, "three.npy");
  write_npy(three, cond, 3, C);
  fg_test_path_join(two_rows, f->dir, "two.npy");
  write_npy(two_rows, cond, 2, C);
  cond[3] = NAN;
  fg_test_path_join(nan_path, f->dir, "nan.npy");
  write_npy(nan_path, cond, 4, C);
  snprintf(plain, sizeof plain, "%s", weights_path); /* C = 0 */
  static const struct {
    int code;
    const char *flags, *part1, *part2;
  } cases[] = {
      {EXIT_USAGE, "--weights W", "the model is conditional (C = 2)", "--cond FILE.npy or --class N"},
      {EXIT_INPUT, "--weights W --cond WIDE", "wide.npy: has 3 columns", "C = 2 (--cond)"},
      {EXIT_INPUT, "--weights W --cond THREE --x0 X0", "x0.npy: has 4 rows",
       "the conditioning (--cond) has 3"},
      {EXIT_INPUT, "--weights W --cond THREE --batch 4", "three.npy: has 3 rows but --batch is 4", NULL},
      {EXIT_INPUT, "--weights W --cond NAN", "nan.npy: row 1, column 1 is nan", "must be finite"},
      {EXIT_USAGE, "--weights W --guidance 2", "--guidance needs a conditioning", "--cond or --class"},
      {EXIT_USAGE, "--weights W --cond C --guidance nan", "--guidance: 'nan' is not a finite number", NULL},
      {EXIT_USAGE, "--weights W --cond C --guidance 2x", "--guidance: '2x'", NULL},
      {EXIT_USAGE, "--weights W --cond C --guidance 1e99", "--guidance: '1e99'", NULL},
      {EXIT_USAGE, "--weights W --cond C --null-cond C", "--null-cond", "give --guidance too"},
      {EXIT_INPUT, "--weights W --cond C --guidance 2 --null-cond TWO", "two.npy: has 2 rows",
       "1 x 2 (--null-cond)"},
      {EXIT_USAGE, "--weights W --class 2", "--class 2: the model's conditioning has C = 2 classes", "0 to 1"},
      {EXIT_USAGE, "--weights W --class two", "--class: 'two' is neither a class number nor 'all'", NULL},
      {EXIT_USAGE, "--weights W --class all --x0 X0", "--x0", "--class all draws its own"},
      {EXIT_USAGE, "--weights W --class 1 --cond C", "give --cond or --class, not both", NULL},
      {EXIT_USAGE, "--weights PLAIN --class 0", "--class: the model has no conditioning (C = 0)", NULL},
      {EXIT_USAGE, "--weights PLAIN --cond C", "--cond: the model has no conditioning (C = 0)", NULL},
      {EXIT_INPUT, "--weights META --cond C --act relu",
       "the file's __metadata__ says flowgen.act = gelu but relu was asked for", "(--act relu)"},
      {EXIT_USAGE, "--weights META --cond C --act silu", "--act silu", "has act gelu"},
      {EXIT_INPUT, "--weights META --cond C --time sin:8", "flowgen.time = sin:4 but sin:8", NULL},
      {EXIT_USAGE, "--weights META --cond C --time raw", "--time raw", "has time sin:4"},
      {EXIT_INPUT, "--weights META --cond C --layers 3", "the file has 4 Linear layers", "(--layers 3)"},
      {EXIT_USAGE, "--weights W --cond C --act swish", "--act: unknown value 'swish'", NULL},
      {EXIT_USAGE, "--weights W --cond C --input x,t", "--input: 'x,t'", NULL},
      {EXIT_USAGE, "--weights W --cond C --time sin:3", "--time: 'sin:3': K = 3 is odd", NULL},
      {EXIT_USAGE, "--weights W --cond=", "--cond needs a file", NULL},
      {EXIT_USAGE, "--act gelu", "--act gelu: the built-in digits model has act silu", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    /* The flags with W, PLAIN, META, X0, C, WIDE, THREE, TWO, NAN put in. */
    char flags[CMD_SIZE / 4] = "";
    const char *p = cases[i].flags;
    while (*p) {
      static const struct { const char *word; int which; } words[] = {
          {"WIDE", 0}, {"THREE", 1}, {"TWO", 2}, {"NAN", 3}, {"PLAIN", 4}, {"META", 5},
          {"X0", 6}, {"W", 7}, {"C", 8}};
      const char *paths[] = {wide, three, two_rows, nan_path, plain, meta, x0_path, weights, cond_path};
      bool replaced = false;
      for (size_t k = 0; k < sizeof words / sizeof *words && !replaced; ++k) {
        size_t n = strlen(words[k].word);
        if (strncmp(p, words[k].word, n) == 0 && (p[n] == ' ' || p[n] == '\0') &&
            (p == cases[i].flags || p[-1] == ' ')) {
          snprintf(flags + strlen(flags), sizeof flags - strlen(flags), "'%s'",
                   paths[words[k].which]);
          p += n;
          replaced = true;
        }
      }
      if (!replaced) {
        size_t at = strlen(flags);
        flags[at] = *p++;
        flags[at + 1] = '\0';
      }
    }
    print_into(args, sizeof args, "%s --device cpu -o '%s'", flags, f->out);
    expect_sample_fails(f, cases[i].code, cases[i].part1, cases[i].part2, args);
  }
}

/* Without --weights, a conditioning flag asks for the built-in conditional
 * model: sampled where the build has one, else refused naming it. */
static void test_sample_builtin_conditional(void **state) {
  cli_fixture *f = *state;
  char args[CMD_SIZE / 2];
  flowrt_weights *w = NULL;
  bool have = flowrt_weights_builtin("digits_cond", &w, NULL) == FLOWGEN_OK;
  print_into(args, sizeof args, "--class 3 --batch 2 --steps 1 --device cpu -o '%s'", f->out);
  if (have) {
    expect_sample_ok(args);
    int64_t rows = 0, cols = 0;
    float *x = read_npy(f->out, &rows, &cols);
    assert_int_equal(rows, 2);
    assert_int_equal(cols, w->dim);
    free(x);
  } else {
    expect_sample_fails(f, EXIT_USAGE, "no built-in model 'digits_cond'", "there is: digits", args);
  }
  flowrt_weights_free(w);
}

/* Kernel options that cannot go together: --describe prints JSON, not PTX
 * or a cubin; the host launcher is for nvcc builds of the .cu. */
static void test_generate_refused_combinations(void **state) {
  cli_fixture *f = *state;
  static const struct {
    const char *args, *part1, *part2;
  } cases[] = {
      {"--describe --emit ptx", "--describe", "--emit ptx"},
      {"--emit=cubin --describe", "--describe", "--emit cubin"},
      {"--emit ptx --host-launcher", "--host-launcher", "--emit ptx"},
      {"--host-launcher --emit cubin", "--host-launcher", "--emit cubin"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    char args[CMD_SIZE / 2];
    print_into(args, sizeof args, "--dim 4 --steps 2 %s -o '%s'", cases[i].args, f->out);
    char *out = NULL, *err = NULL;
    int rc = flowgen(&out, &err, "%s", args);
    if (rc != EXIT_USAGE) fail_msg("%s: exit %d, expected %d: %s", args, rc, EXIT_USAGE, err);
    expect_one_error_line(err, cases[i].part1, cases[i].part2);
    assert_non_null(strstr(err, "(see flowgen --help)"));
    assert_string_equal(out, "");
    assert_false(fg_test_file_exists(f->out));
    free(out);
    free(err);
  }
  /* Each alone, and --emit cu with either, still works. */
  const char *fine[] = {"--describe", "--describe --emit cu", "--host-launcher --emit cu"};
  for (size_t i = 0; i < sizeof fine / sizeof *fine; ++i) {
    char *out = NULL, *err = NULL;
    int rc = flowgen(&out, &err, "--dim 4 --steps 2 %s -o '%s'", fine[i], f->out);
    if (rc != 0) fail_msg("%s: exit %d: %s", fine[i], rc, err);
    assert_true(fg_test_file_exists(f->out));
    remove(f->out);
    free(out);
    free(err);
  }
}

/* A shape flag at the end of the line, without its value, is a usage error. */
static void test_sample_flag_without_value(void **state) {
  cli_fixture *f = *state;
  const char *flags[] = {"--dim", "--hidden", "--steps", "--arch"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; ++i) {
    char args[CMD_SIZE / 2];
    print_into(args, sizeof args, "--weights '%s' --device cpu -o '%s' %s", weights_path,
             f->out, flags[i]);
    expect_sample_fails(f, EXIT_USAGE, flags[i], "needs a value", args);
  }
}

static int count_occurrences(const char *text, const char *part) {
  int n = 0;
  for (const char *at = text; (at = strstr(at, part)); at += strlen(part)) ++n;
  return n;
}

static void test_sample_gpu_without_gpu(void **state) {
  cli_fixture *f = *state;
  if (fg_test_have_gpu()) skip();
  char args[CMD_SIZE / 2];
  print_into(args, sizeof args, "--weights '%s' --device gpu --batch 4 -o '%s'", weights_path,
           f->out);
  expect_sample_fails(f, EXIT_DRIVER, "CUDA", NULL, args);
  /* Where the driver library is missing, the message names it once (the
   * loader's own text already names the file). */
  char *out = NULL, *err = NULL;
  assert_int_equal(flowgen(&out, &err, "sample %s", args), EXIT_DRIVER);
  if (strstr(err, "no CUDA driver found"))
    assert_int_equal(count_occurrences(err, "libcuda.so.1"), 1);
  else
    assert_true(count_occurrences(err, "libcuda.so.1") <= 1);
  free(out);
  free(err);
}

/* A usage error points to the --help that lists the flag: the kernel
 * options', `flowgen sample --help` or `flowgen cache --help`. */
static void test_usage_errors_name_their_help(void **state) {
  (void)state;
  static const struct {
    const char *args, *help;
  } cases[] = {
      {"--frobnicate", "(see flowgen --help)"},
      {"--dim", "(see flowgen --help)"},
      {"sample --frobnicate -o x.npy", "(see flowgen sample --help)"},
      {"sample -o x.npy --dim", "(see flowgen sample --help)"},
      {"sample -o x.npy --device tpu", "(see flowgen sample --help)"},
      {"sample --batch 2 --x0 x0.npy -o x.npy", "(see flowgen sample --help)"},
      {"sample --weights", "(see flowgen sample --help)"},
      {"sample --device cpu", "(see flowgen sample --help)"},
      {"cache list extra", "(see flowgen cache --help)"},
      {"cache warm --bogus", "(see flowgen cache --help)"},
      {"cache warm --arch", "(see flowgen cache --help)"},
      {"cache frobnicate", "(see flowgen cache --help)"},
      {"cache dir --dir", "(see flowgen cache --help)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    char *out = NULL, *err = NULL;
    int rc = flowgen(&out, &err, "%s", cases[i].args);
    if (rc != EXIT_USAGE) fail_msg("%s: exit %d, expected 2: %s", cases[i].args, rc, err);
    expect_one_error_line(err, cases[i].help, NULL);
    free(out);
    free(err);
  }
  /* Each help named exists. */
  const char *helps[] = {"--help", "sample --help", "cache --help"};
  for (size_t i = 0; i < sizeof helps / sizeof *helps; ++i) {
    char *out = NULL, *err = NULL;
    assert_int_equal(flowgen(&out, &err, "%s", helps[i]), 0);
    assert_non_null(strstr(out, "usage: flowgen"));
    free(out);
    free(err);
  }
}

static void test_sample_unwritable_output(void **state) {
  cli_fixture *f = *state;
  char *out = NULL, *err = NULL;
  char path[PATH_SIZE];
  fg_test_path_join(path, f->dir, "no/such/folder/out.npy");
  int rc = flowgen(&out, &err, "sample --weights '%s' --device cpu -o '%s'", weights_path, path);
  assert_int_equal(rc, EXIT_IO);
  expect_one_error_line(err, path, NULL);
  free(out);
  free(err);
}

/* ---- cache ---------------------------------------------------------------- */

static void test_cache_dir_follows_the_environment(void **state) {
  cli_fixture *f = *state;
  char *out = NULL, *err = NULL, want[PATH_SIZE + 32];
  assert_int_equal(flowgen(&out, &err, "cache dir"), 0);
  print_into(want, sizeof want, "%s\n", f->cache);
  assert_string_equal(out, want);
  assert_string_equal(err, "");
  free(out);
  free(err);
  assert_false(fg_test_file_exists(f->cache)); /* asking does not create it */

  /* FLOWGEN_CACHE_DIR wins over XDG_CACHE_HOME. */
  char cmd[CMD_SIZE];
  print_into(cmd, sizeof cmd, "XDG_CACHE_HOME='%s/xdg' '%s' cache dir", f->dir,
           fg_test_flowgen_bin());
  assert_int_equal(fg_test_run(cmd, &out, &err), 0);
  assert_string_equal(out, want);
  free(out);
  free(err);

  print_into(cmd, sizeof cmd, "env -u FLOWGEN_CACHE_DIR XDG_CACHE_HOME='%s/xdg' '%s' cache dir",
           f->dir, fg_test_flowgen_bin());
  assert_int_equal(fg_test_run(cmd, &out, &err), 0);
  print_into(want, sizeof want, "%s/xdg/flowgen\n", f->dir);
  assert_string_equal(out, want);
  free(out);
  free(err);

  print_into(cmd, sizeof cmd,
             "env -u FLOWGEN_CACHE_DIR -u XDG_CACHE_HOME HOME='%s/home' '%s' cache dir", f->dir,
             fg_test_flowgen_bin());
  assert_int_equal(fg_test_run(cmd, &out, &err), 0);
  print_into(want, sizeof want, "%s/home/.cache/flowgen\n", f->dir);
  assert_string_equal(out, want);
  free(out);
  free(err);

  /* --dir overrides all of them for one command. */
  assert_int_equal(flowgen(&out, &err, "cache dir --dir '%s/other'", f->dir), 0);
  print_into(want, sizeof want, "%s/other\n", f->dir);
  assert_string_equal(out, want);
  free(out);
  free(err);
}

static int count_lines(const char *text) {
  int n = 0;
  for (; *text; ++text) n += *text == '\n';
  return n;
}

/* The one entry file in the cache folder. */
/* One entry of the cache (the first by name); asserts there are `count`. */
static void one_entry(const cli_fixture *f, int count, char path[PATH_SIZE]) {
  DIR *d = opendir(f->cache);
  assert_non_null(d);
  int found = 0;
  char first[256] = "";
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    assert_non_null(strstr(e->d_name, ".fgc"));
    if (!first[0] || strcmp(e->d_name, first) < 0) snprintf(first, sizeof first, "%s", e->d_name);
    ++found;
  }
  closedir(d);
  assert_int_equal(found, count);
  fg_test_path_join(path, f->cache, first);
}

/* Its plan has two variants: warm caches three parts (the pack kernel's and
 * one a variant). */
#define WARM "cache warm --arch sm_90 --dim 4 --steps 2"
#define WARM_PARTS 3

static void test_cache_warm_list_clear(void **state) {
  cli_fixture *f = *state;
  char *out = NULL, *err = NULL;

  int rc = flowgen(&out, &err, WARM);
  if (rc != 0) fail_msg("%s: exit %d: %s", WARM, rc, err);
  assert_non_null(strstr(out, "flow_d4_h16_s2_fp32 for sm_90: compiled and cached"));
  free(out);
  free(err);

  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  assert_int_equal(count_lines(out), 1 + WARM_PARTS); /* the header and the entries */
  assert_non_null(strstr(out, ".fgc"));
  assert_non_null(strstr(out, "sm_90"));
  assert_non_null(strstr(out, "valid"));
  assert_non_null(strstr(out, " flow_d4_h16_s2_fp32_pack\n")); /* each entry's kernel */
  assert_null(strstr(out, "INVALID"));
  assert_string_equal(err, "");
  free(out);
  free(err);

  assert_int_equal(flowgen(&out, &err, WARM), 0);
  assert_non_null(strstr(out, "already cached"));
  free(out);
  free(err);

  /* One payload byte flipped: the checksum catches it. */
  char entry[PATH_SIZE];
  one_entry(f, WARM_PARTS, entry);
  size_t size = 0;
  char *bytes = fg_test_read_file(entry, &size);
  assert_non_null(bytes);
  bytes[size - 1] ^= 0x5a;
  fg_test_write_file(entry, bytes, size);
  free(bytes);
  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  assert_int_equal(count_lines(out), 1 + WARM_PARTS); /* the header and the entries */
  assert_non_null(strstr(out, "INVALID"));
  assert_non_null(strstr(out, "sm_90"));
  free(out);
  free(err);

  /* warm does not trust it: it compiles again and replaces it. */
  assert_int_equal(flowgen(&out, &err, WARM), 0);
  assert_non_null(strstr(out, "compiled and cached"));
  free(out);
  free(err);
  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  assert_int_equal(count_lines(out), 1 + WARM_PARTS); /* the header and the entries */
  assert_null(strstr(out, "INVALID"));
  assert_non_null(strstr(out, "valid"));
  free(out);
  free(err);

  assert_int_equal(flowgen(&out, &err, "cache clear"), 0);
  assert_non_null(strstr(out, "removed 3 files"));
  free(out);
  free(err);
  /* A template folder's parts are keyed by their source, and named too. */
  assert_int_equal(flowgen(&out, &err, "%s --template-dir '%s/templates'", WARM,
                           fg_test_source_dir()),
                   0);
  free(out);
  free(err);
  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  assert_int_equal(count_lines(out), 1 + WARM_PARTS);
  assert_non_null(strstr(out, " flow_d4_h16_s2_fp32_pack\n"));
  assert_null(strstr(out, "source:"));
  free(out);
  free(err);
  assert_int_equal(flowgen(&out, &err, "cache clear"), 0);
  free(out);
  free(err);
  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  assert_string_equal(out, "");
  expect_one_error_line(err, "empty", NULL);
  free(out);
  free(err);
  assert_int_equal(flowgen(&out, &err, "cache clear"), 0);
  assert_non_null(strstr(out, "removed 0 files"));
  free(out);
  free(err);
}

static void expect_usage_error(const char *args, const char *part1, const char *part2);

/* cache warm --batch N: the pack part and the variant of batch N only (a
 * program of that batch then finds both); bad values refused. */
static void test_cache_warm_batch(void **state) {
  cli_fixture *f = *state;
  char *out = NULL, *err = NULL;
  int rc = flowgen(&out, &err, WARM " --batch 1");
  if (rc != 0) fail_msg("%s --batch 1: exit %d: %s", WARM, rc, err);
  assert_non_null(strstr(out, "flow_d4_h16_s2_fp32 for sm_90, batch 1: compiled and cached"));
  free(out);
  free(err);
  assert_int_equal(fg_test_count_entries(f->cache), 2);
  assert_int_equal(flowgen(&out, &err, WARM " --batch 1"), 0);
  assert_non_null(strstr(out, "already cached"));
  free(out);
  free(err);
  /* the rest: the pack part is there already */
  assert_int_equal(flowgen(&out, &err, WARM), 0);
  assert_non_null(strstr(out, "compiled and cached"));
  free(out);
  free(err);
  assert_int_equal(fg_test_count_entries(f->cache), WARM_PARTS);
  expect_usage_error(WARM " --batch -1", "--batch", NULL);
  expect_usage_error(WARM " --batch x", "--batch", NULL);
  expect_usage_error(WARM " --batch", "--batch", "needs a batch size");
  expect_usage_error(WARM " --batch 1099511627777", "--batch", "out of range");
  assert_int_equal(fg_test_count_entries(f->cache), WARM_PARTS);
  /* the arch-specific target is named as given; the runtime builds sm_90
   * as sm_90a, so its entries are those above */
  assert_int_equal(flowgen(&out, &err, "cache warm --arch sm_90a --dim 4 --steps 2 --batch 1"), 0);
  assert_non_null(strstr(out, "flow_d4_h16_s2_fp32 for sm_90a, batch 1: already cached"));
  free(out);
  free(err);
}

/* cache warm takes the planner's overrides as a sampler does: a tuned
 * kernel is an entry of its own, found again under the same tune; a tune
 * the planner refuses is a usage error naming the key. */
#define WARM_TUNE "--tune tiled.stages=3"

static void test_cache_warm_tune(void **state) {
  cli_fixture *f = *state;
  static const struct {
    const char *args, *says;
  } runs[] = {
      {WARM " " WARM_TUNE, "compiled and cached"},
      {WARM, "compiled and cached"},
      {WARM " " WARM_TUNE, "already cached"},
      {WARM " --tune=", "already cached"}, /* no override: the plain kernel */
  };
  for (size_t i = 0; i < sizeof runs / sizeof *runs; ++i) {
    char *out = NULL, *err = NULL;
    int rc = flowgen(&out, &err, "%s", runs[i].args);
    if (rc != 0) fail_msg("%s: exit %d: %s", runs[i].args, rc, err);
    if (!strstr(out, runs[i].says)) fail_msg("%s: expected '%s' in: %s", runs[i].args, runs[i].says, out);
    free(out);
    free(err);
  }
  char *out = NULL, *err = NULL;
  assert_int_equal(flowgen(&out, &err, "cache list"), 0);
  /* the header and the parts of two kernels (the tune is in every part's
   * header comment) */
  assert_int_equal(count_lines(out), 1 + 2 * WARM_PARTS);
  free(out);
  free(err);
  assert_int_equal(fg_test_count_entries(f->cache), 2 * WARM_PARTS);
  assert_int_equal(flowgen(&out, &err, WARM " --tune bogus=1"), EXIT_USAGE);
  expect_one_error_line(err, "tune", "bogus");
  free(out);
  free(err);
  assert_int_equal(fg_test_count_entries(f->cache), 2 * WARM_PARTS);
}

/* The kernel options that are not the spec's, as `flowgen sample` parses
 * them into the runtime's options. */
static void test_sample_parses_generation_options(void **state) {
  (void)state;
  char *argv[] = {"sample", "-o", "x.npy", "--tune", "tiled.stages=3", "--template-dir=t",
                  "--sms", "66", "--shared-per-block=101376", NULL};
  fg_cli_sample_args a;
  memset(&a, 0, sizeof a);
  assert_int_equal(fg_cli_parse_sample(9, argv, &a), -1);
  assert_int_equal(a.opts.device.sms, 66);
  assert_int_equal(a.opts.device.shared_per_block, 101376);
  assert_int_equal(a.opts.device.clusters, 0);
  assert_non_null(a.opts.tune);
  assert_string_equal(a.opts.tune, "tiled.stages=3");
  assert_non_null(a.opts.template_dir);
  assert_string_equal(a.opts.template_dir, "t");
}

/* `flowgen ARGS` is a usage error: exit 2 and one error line naming part1
 * (and part2). */
static void expect_usage_error(const char *args, const char *part1,
                               const char *part2) {
  char *out = NULL, *err = NULL;
  int rc = flowgen(&out, &err, "%s", args);
  if (rc != EXIT_USAGE)
    fail_msg("%s: exit %d, expected %d: %s", args, rc, EXIT_USAGE, err);
  expect_one_error_line(err, part1, part2);
  free(out);
  free(err);
}

static void test_cache_usage_errors(void **state) {
  cli_fixture *f = *state;
  expect_usage_error("cache warm --arch sm_60", "sm_60", NULL);
  expect_usage_error("cache warm --dim 0", "dim", NULL);
  expect_usage_error("cache warm --arch", "--arch", "needs a value");
  expect_usage_error("cache warm --bogus", "--bogus", NULL);
  expect_usage_error("cache warm --tune", "--tune", "needs a value");
  expect_usage_error("sample -o x.npy --tune", "--tune", "needs a value");
  expect_usage_error("cache warm --sms 0", "--sms", "out of range");
  expect_usage_error("sample -o x.npy --shared-per-block 0", "--shared-per-block", "out of range");
  expect_usage_error("cache frobnicate", "frobnicate", NULL);
  expect_usage_error("cache list extra", "extra", NULL);

  char *out = NULL, *err = NULL;
  assert_int_equal(flowgen(&out, &err, "cache"), EXIT_USAGE);
  assert_non_null(strstr(err, "usage: flowgen cache"));
  free(out);
  free(err);

  /* None of them made an entry (or the folder). */
  assert_false(fg_test_file_exists(f->cache));
}

/* ---- main ---------------------------------------------------------------- */

#define CLI_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      CLI_TEST(test_sample_cpu_matches_reference),
      CLI_TEST(test_sample_seed_is_deterministic),
      CLI_TEST(test_sample_batch_zero),
      CLI_TEST(test_sample_verbose_prints_the_phases),
      CLI_TEST(test_sample_bad_weights),
      CLI_TEST(test_sample_bad_x0),
      CLI_TEST(test_sample_usage_errors),
      CLI_TEST(test_sample_x0_not_finite),
      CLI_TEST(test_sample_weights_not_finite),
      CLI_TEST(test_sample_x0_with_seed),
      CLI_TEST(test_sample_builtin_shape_flags),
      CLI_TEST(test_sample_conditional_cpu),
      CLI_TEST(test_sample_class_and_flags),
      CLI_TEST(test_sample_conditional_refusals),
      CLI_TEST(test_sample_builtin_conditional),
      CLI_TEST(test_generate_refused_combinations),
      CLI_TEST(test_sample_flag_without_value),
      CLI_TEST(test_sample_gpu_without_gpu),
      CLI_TEST(test_usage_errors_name_their_help),
      CLI_TEST(test_sample_unwritable_output),
      CLI_TEST(test_cache_dir_follows_the_environment),
      CLI_TEST(test_cache_warm_list_clear),
      CLI_TEST(test_cache_warm_tune),
      CLI_TEST(test_cache_warm_batch),
      CLI_TEST(test_sample_parses_generation_options),
      CLI_TEST(test_cache_usage_errors),
  };
  return cmocka_run_group_tests(tests, group_setup, NULL);
}
