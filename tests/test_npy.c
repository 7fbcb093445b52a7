/* .npy reading and writing (cli/npy.c): round trips, files written by
 * numpy (tests/data/make_npy.py), hostile headers, atomic writes. */
#include "support.h"

#include "npy.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

/* magic, version, little-endian header length (2 bytes in 1.x, else 4),
 * dict, then the data. */
static unsigned char *npy_image(int major, int minor, const char *dict,
                                const void *data, size_t data_size,
                                size_t *size) {
  size_t length_bytes = major == 1 ? 2 : 4, dict_size = strlen(dict);
  size_t start = 8 + length_bytes;
  *size = start + dict_size + data_size;
  unsigned char *image = malloc(*size + 1);
  assert_non_null(image);
  memcpy(image, "\x93NUMPY", 6);
  image[6] = (unsigned char)major;
  image[7] = (unsigned char)minor;
  for (size_t i = 0; i < length_bytes; ++i)
    image[8 + i] = (unsigned char)(dict_size >> (8 * i));
  memcpy(image + start, dict, dict_size);
  if (data_size) memcpy(image + start + dict_size, data, data_size);
  return image;
}

static void assert_message_has(const flowgen_error *err, const char *needle) {
  if (!strstr(err->message, needle))
    fail_msg("message '%s' lacks '%s'", err->message, needle);
}

static void expect_refused(const unsigned char *image, size_t size,
                           const char *needle) {
  flowgen_error err = {0};
  float *data = (float *)1;
  int64_t rows = -7, cols = -7;
  flowgen_status s = fg_npy_parse(image, size, "x.npy", &data, &rows, &cols, &err);
  if (s != FLOWGEN_INPUT)
    fail_msg("status %s for a file that should fail with '%s'",
             flowgen_status_name(s), needle);
  assert_null(data);
  assert_int_equal(err.status, FLOWGEN_INPUT);
  assert_message_has(&err, "x.npy: ");
  assert_message_has(&err, needle);
}

static void expect_dict_refused(const char *dict, size_t data_size,
                                const char *needle) {
  static const unsigned char zeros[64];
  size_t size;
  unsigned char *image = npy_image(1, 0, dict, zeros, data_size, &size);
  expect_refused(image, size, needle);
  free(image);
}

static float *parse_ok(const unsigned char *image, size_t size, int64_t *rows,
                       int64_t *cols) {
  flowgen_error err = {0};
  float *data = NULL;
  if (fg_npy_parse(image, size, "x.npy", &data, rows, cols, &err) != FLOWGEN_OK)
    fail_msg("%s", err.message);
  assert_non_null(data);
  return data;
}

static uint32_t bits_of(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

/* make_npy.py's formula: element i = ((13 i) mod 101 - 50) / 7. */
static double fixture_value(size_t i) {
  return (double)((int)((13u * i) % 101u) - 50) / 7.0;
}

static float *read_fixture(const char *file, int64_t *rows, int64_t *cols) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/%s", fg_test_source_dir(), file);
  flowgen_error err = {0};
  float *data = NULL;
  if (fg_npy_read(path, &data, rows, cols, &err) != FLOWGEN_OK)
    fail_msg("%s", err.message);
  return data;
}

/* ---- reading ------------------------------------------------------------ */

static void test_parse_f4(void **state) {
  (void)state;
  const float values[6] = {1.5f, -2.0f, 0.1f, INFINITY, -0.0f, 0x1p-149f};
  unsigned char bytes[24];
  for (int i = 0; i < 6; ++i)
    for (int k = 0; k < 4; ++k) bytes[4 * i + k] = (unsigned char)(bits_of(values[i]) >> (8 * k));
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n";
  for (int major = 1; major <= 3; ++major) {
    size_t size;
    unsigned char *image = npy_image(major, 0, dict, bytes, sizeof bytes, &size);
    int64_t rows = 0, cols = 0;
    float *data = parse_ok(image, size, &rows, &cols);
    assert_int_equal(rows, 2);
    assert_int_equal(cols, 3);
    for (int i = 0; i < 6; ++i) assert_int_equal(bits_of(data[i]), bits_of(values[i]));
    free(data);
    free(image);
  }
}

/* Double quotes, no trailing comma, other key order, no padding. */
static void test_parse_header_variants(void **state) {
  (void)state;
  const float one[2] = {1.0f, 2.0f};
  const char *dicts[] = {
      "{\"shape\": (1, 2), \"descr\": \"<f4\", \"fortran_order\": False}",
      "{'fortran_order':False,'shape':(1,2,),'descr':'<f4'}",
      "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 1 , 2 ) , }\n",
  };
  for (size_t i = 0; i < 3; ++i) {
    size_t size;
    unsigned char *image = npy_image(1, 0, dicts[i], one, sizeof one, &size);
    int64_t rows, cols;
    float *data = parse_ok(image, size, &rows, &cols);
    assert_int_equal(rows, 1);
    assert_int_equal(cols, 2);
    assert_true(data[0] == 1.0f && data[1] == 2.0f);
    free(data);
    free(image);
  }
}

static void test_parse_vector_and_empty(void **state) {
  (void)state;
  const float v[3] = {3.0f, 4.0f, 5.0f};
  size_t size;
  unsigned char *image = npy_image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                   v, sizeof v, &size);
  int64_t rows, cols;
  float *data = parse_ok(image, size, &rows, &cols);
  assert_int_equal(rows, 1);
  assert_int_equal(cols, 3);
  assert_true(data[2] == 5.0f);
  free(data);
  free(image);

  image = npy_image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }",
                    NULL, 0, &size);
  data = parse_ok(image, size, &rows, &cols);
  assert_int_equal(rows, 0);
  assert_int_equal(cols, 4);
  free(data);
  free(image);
}

/* '<f8' is converted to float32 with rounding to nearest. */
static void test_parse_f8(void **state) {
  (void)state;
  const double values[6] = {0.1, 1.0 + 0x1p-24, 1e300, -1e-50, (double)FLT_MAX, NAN};
  unsigned char bytes[48];
  for (int i = 0; i < 6; ++i) {
    uint64_t b;
    memcpy(&b, &values[i], sizeof b);
    for (int k = 0; k < 8; ++k) bytes[8 * i + k] = (unsigned char)(b >> (8 * k));
  }
  size_t size;
  unsigned char *image = npy_image(2, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }",
                                   bytes, sizeof bytes, &size);
  int64_t rows, cols;
  float *data = parse_ok(image, size, &rows, &cols);
  assert_int_equal(rows, 3);
  assert_int_equal(cols, 2);
  assert_int_equal(bits_of(data[0]), bits_of(0.1f));
  assert_true(data[1] == 1.0f);  /* a tie rounds to even */
  assert_true(isinf(data[2]) && data[2] > 0);
  assert_true(data[3] == 0.0f && signbit(data[3]));
  assert_true(data[4] == FLT_MAX);
  assert_true(isnan(data[5]));
  free(data);
  free(image);
}

static void test_numpy_fixtures(void **state) {
  (void)state;
  static const struct {
    const char *file;
    int64_t rows, cols;
  } cases[] = {{"tiny_f4.npy", 4, 3}, {"tiny_f8.npy", 4, 3}, {"tiny_v2.npy", 2, 5},
               {"tiny_v3.npy", 2, 5}, {"vector_f4.npy", 1, 7}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c) {
    int64_t rows = 0, cols = 0;
    float *data = read_fixture(cases[c].file, &rows, &cols);
    assert_int_equal(rows, cases[c].rows);
    assert_int_equal(cols, cases[c].cols);
    for (size_t i = 0; i < (size_t)(rows * cols); ++i)
      if (bits_of(data[i]) != bits_of((float)fixture_value(i)))
        fail_msg("%s[%zu] = %.9g, want %.9g", cases[c].file, i, data[i],
                 (float)fixture_value(i));
    free(data);
  }
}

static void test_numpy_fixtures_refused(void **state) {
  (void)state;
  char path[4096];
  flowgen_error err;
  float *data = NULL;
  int64_t rows, cols;
  snprintf(path, sizeof path, "%s/tests/data/fortran_f4.npy", fg_test_source_dir());
  assert_int_equal(fg_npy_read(path, &data, &rows, &cols, &err), FLOWGEN_INPUT);
  assert_message_has(&err, "fortran_order True is not supported");
  assert_message_has(&err, "fortran_f4.npy: ");
  snprintf(path, sizeof path, "%s/tests/data/tiny_i4.npy", fg_test_source_dir());
  assert_int_equal(fg_npy_read(path, &data, &rows, &cols, &err), FLOWGEN_INPUT);
  assert_message_has(&err, "dtype '<i4' is not supported (accepted: '<f4' float32, '<f8' float64)");
  assert_null(data);
}

/* ---- hostile input ------------------------------------------------------ */

static void test_bad_preamble(void **state) {
  (void)state;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }";
  size_t size;
  unsigned char *image = npy_image(1, 0, dict, NULL, 0, &size);
  expect_refused(image, 0, "not a .npy file (bad magic)");
  expect_refused(image, 7, "not a .npy file (bad magic)");
  expect_refused(image, 9, "truncated .npy header");
  image[1] = 'n';
  expect_refused(image, size, "not a .npy file (bad magic)");
  image[1] = 'N';
  image[6] = 4;
  expect_refused(image, size, "unsupported .npy format version 4.0 (accepted: 1.0, 2.0, 3.0)");
  image[6] = 0;
  expect_refused(image, size, "unsupported .npy format version 0.0");
  image[6] = 1;
  image[7] = 1;
  expect_refused(image, size, "unsupported .npy format version 1.1");
  image[7] = 0;
  image[8] = 0xff;  /* header length past the end */
  expect_refused(image, size, ".npy header length");
  expect_refused(image, size, "runs past the end of the");
  free(image);

  image = npy_image(2, 0, dict, NULL, 0, &size);
  image[11] = 0x80;  /* 2 GiB header in a tiny file */
  expect_refused(image, size, "runs past the end");
  free(image);
}

static void test_bad_dicts(void **state) {
  (void)state;
  expect_dict_refused("['descr', '<f4']", 0, ".npy header: not a dict");
  expect_dict_refused("", 0, "not a dict");
  expect_dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, "not a dict");
  expect_dict_refused("{'descr' '<f4'}", 0, "missing ':'");
  expect_dict_refused("{'descr': '<f4' 'shape': (1,)}", 4, "missing ','");
  expect_dict_refused("{descr: '<f4'}", 0, "not a dict of string keys");
  expect_dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4,
                      "characters after the dict");
  expect_dict_refused("{'descr': '<f4', 'shape': (1,)}", 4,
                      "needs the keys 'descr', 'fortran_order' and 'shape'");
  expect_dict_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
                      "unexpected or repeated key 'x'");
  expect_dict_refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
                      4, "unexpected or repeated key 'descr'");
  expect_dict_refused("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, "header");
  expect_dict_refused("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", 4,
                      "'descr' is not a plain dtype string");
}

static void test_bad_dtypes(void **state) {
  (void)state;
  static const char *const refused[] = {"'>f4'", "'<i4'", "'|u1'", "'<f2'", "'f4'",
                                        "'<c8'", "'=f4'", "'<U3'"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; ++i) {
    char dict[160], needle[64];
    snprintf(dict, sizeof dict, "{'descr': %s, 'fortran_order': False, 'shape': (1,), }",
             refused[i]);
    snprintf(needle, sizeof needle, "dtype %s is not supported", refused[i]);
    expect_dict_refused(dict, 4, needle);
  }
  expect_dict_refused("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4,
                      "'descr' is not a plain dtype string (structured dtypes are not supported)");
  expect_dict_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", 16,
                      "fortran_order True is not supported");
  expect_dict_refused("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4,
                      "'fortran_order' is not True or False");
}

static void test_bad_shapes(void **state) {
  (void)state;
  static const struct {
    const char *shape;
    const char *needle;
  } cases[] = {
      {"()", "shape () has 0 dimensions (accepted: 1 or 2)"},
      {"(1, 2, 3)", "shape (1, 2, 3) has 3 dimensions"},
      {"(4)", "'shape' is not a tuple"},
      {"[4]", "'shape' is not a tuple"},
      {"4", "'shape' is not a tuple"},
      {"(-1, 2)", "'shape' is not a tuple of non-negative integers"},
      {"(1.0, 2)", "'shape' is not a tuple of integers"},
      {"(1 2)", "'shape' is not a tuple of integers"},
      {"(,)", "'shape' is not a tuple of non-negative integers"},
      {"(9223372036854775808,)", "below 2^63"},
      {"(99999999999999999999999, 1)", "below 2^63"},
      {"(4294967296, 4294967296)", "shape (4294967296, 4294967296) overflows"},
      {"(4611686018427387904,)", "shape (4611686018427387904,) overflows"},
      {"(3037000499, 3037000499)", "overflows"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    char dict[200];
    snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
             cases[i].shape);
    expect_dict_refused(dict, 4, cases[i].needle);
  }
}

static void test_data_size(void **state) {
  (void)state;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_dict_refused(dict, 20, "data truncated: 20 bytes, but shape (2, 3) of '<f4' needs 24");
  expect_dict_refused(dict, 0, "data truncated: 0 bytes");
  expect_dict_refused(dict, 25, "1 trailing bytes after the data of shape (2, 3)");
  expect_dict_refused("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 16,
                      "data truncated: 16 bytes, but shape (3,) of '<f8' needs 24");
}

/* Every prefix of a good file is refused without reading past it. */
static void test_every_truncation(void **state) {
  (void)state;
  const float v[4] = {1, 2, 3, 4};
  size_t size;
  unsigned char *image = npy_image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                   v, sizeof v, &size);
  for (size_t len = 0; len < size; ++len) {
    unsigned char *copy = malloc(len ? len : 1);
    memcpy(copy, image, len);
    expect_refused(copy, len, "");
    free(copy);
  }
  free(image);
}

static void test_read_io_errors(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  snprintf(path, sizeof path, "%s/absent.npy", dir);
  flowgen_error err;
  float *data = (float *)1;
  int64_t rows, cols;
  assert_int_equal(fg_npy_read(path, &data, &rows, &cols, &err), FLOWGEN_IO);
  assert_null(data);
  assert_message_has(&err, path);
  assert_message_has(&err, strerror(ENOENT));
  assert_int_equal(fg_npy_read(dir, &data, &rows, &cols, &err), FLOWGEN_IO);
  assert_message_has(&err, strerror(EISDIR));
  /* A FIFO with no writer is refused at once, not waited on (alarm: a
   * hang fails the test rather than stopping the run). */
  snprintf(path, sizeof path, "%s/fifo.npy", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(10);
  assert_int_equal(fg_npy_read(path, &data, &rows, &cols, &err), FLOWGEN_IO);
  alarm(0);
  assert_message_has(&err, "not a regular file");
  fg_test_rmtree(dir);
  free(dir);
}

/* ---- writing ------------------------------------------------------------ */

static void round_trip(const char *dir, int64_t rows, int64_t cols, uint64_t seed) {
  char path[4200];
  snprintf(path, sizeof path, "%s/out.npy", dir);
  size_t n = (size_t)(rows * cols);
  float *values = malloc((n ? n : 1) * sizeof *values);
  fg_test_fill_uniform(values, n, seed, 1000.0f);
  flowgen_error err = {0};
  if (fg_npy_write(path, values, rows, cols, &err) != FLOWGEN_OK) fail_msg("%s", err.message);
  assert_int_equal(fg_test_count_entries(dir), 1);  /* no temporary file left */

  size_t size;
  char *bytes = fg_test_read_file(path, &size);
  assert_non_null(bytes);
  assert_memory_equal(bytes, "\x93NUMPY\x01\x00", 8);
  size_t header_len = (unsigned char)bytes[8] | (size_t)(unsigned char)bytes[9] << 8;
  assert_int_equal((10 + header_len) % 64, 0);
  assert_int_equal(bytes[10 + header_len - 1], '\n');
  char dict[128];
  snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
           (long long)rows, (long long)cols);
  assert_memory_equal(bytes + 10, dict, strlen(dict));
  assert_int_equal(size, 10 + header_len + 4 * n);
  free(bytes);

  float *back = NULL;
  int64_t r = -1, c = -1;
  if (fg_npy_read(path, &back, &r, &c, &err) != FLOWGEN_OK) fail_msg("%s", err.message);
  assert_int_equal(r, rows);
  assert_int_equal(c, cols);
  for (size_t i = 0; i < n; ++i) assert_int_equal(bits_of(back[i]), bits_of(values[i]));
  free(back);
  free(values);
}

static void test_round_trip(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  uint64_t seed = fg_test_seed();
  round_trip(dir, 3, 4, seed);
  round_trip(dir, 1, 1, seed + 1);    /* replaces the file */
  round_trip(dir, 0, 5, seed + 2);
  round_trip(dir, 257, 65, seed + 3);
  fg_test_rmtree(dir);
  free(dir);
}

static void test_write_special_values(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  snprintf(path, sizeof path, "%s/special.npy", dir);
  const float v[4] = {-0.0f, INFINITY, NAN, 0x1p-149f};
  assert_int_equal(fg_npy_write(path, v, 2, 2, NULL), FLOWGEN_OK);
  float *back = NULL;
  int64_t r, c;
  assert_int_equal(fg_npy_read(path, &back, &r, &c, NULL), FLOWGEN_OK);
  for (int i = 0; i < 4; ++i) assert_int_equal(bits_of(back[i]), bits_of(v[i]));
  free(back);
  fg_test_rmtree(dir);
  free(dir);
}

static void test_write_bad_shape(void **state) {
  (void)state;
  flowgen_error err;
  const float v[1] = {0};
  assert_int_equal(fg_npy_write("/nonexistent/x.npy", v, -1, 1, &err), FLOWGEN_INVALID);
  assert_message_has(&err, "negative shape (-1, 1)");
  assert_int_equal(fg_npy_write("/nonexistent/x.npy", v, INT64_MAX / 2, 4, &err), FLOWGEN_INVALID);
  assert_message_has(&err, "overflows");
}

/* An unwritable place: a missing folder, a file as folder. Nothing appears. */
static void test_write_unwritable(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200], blocker[4200];
  const float v[2] = {1, 2};
  flowgen_error err;
  snprintf(path, sizeof path, "%s/missing/out.npy", dir);
  assert_int_equal(fg_npy_write(path, v, 1, 2, &err), FLOWGEN_IO);
  assert_message_has(&err, path);
  assert_message_has(&err, strerror(ENOENT));
  assert_false(fg_test_file_exists(path));

  snprintf(blocker, sizeof blocker, "%s/file", dir);
  fg_test_write_file(blocker, "x", 1);
  snprintf(path, sizeof path, "%s/file/out.npy", dir);
  assert_int_equal(fg_npy_write(path, v, 1, 2, &err), FLOWGEN_IO);
  assert_message_has(&err, strerror(ENOTDIR));
  assert_int_equal(fg_test_count_entries(dir), 1);
  fg_test_rmtree(dir);
  free(dir);
}

/* The temporary file is written, then rename fails (the target is a folder):
 * the temporary file must be gone. */
static void test_write_rename_fails(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  snprintf(path, sizeof path, "%s/target", dir);
  char sub[4300];
  snprintf(sub, sizeof sub, "%s/keep", path);
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", sub);
  assert_int_equal(system(cmd), 0);
  const float v[2] = {1, 2};
  flowgen_error err;
  assert_int_equal(fg_npy_write(path, v, 1, 2, &err), FLOWGEN_IO);
  assert_message_has(&err, path);
  assert_int_equal(fg_test_count_entries(dir), 1);  /* only target/ */
  assert_int_equal(fg_test_count_entries(path), 1); /* target/ untouched */
  fg_test_rmtree(dir);
  free(dir);
}

/* A write error mid-file (file size limit): no temporary file remains and
 * the existing file is untouched. */
static void test_write_error_keeps_old_file(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  snprintf(path, sizeof path, "%s/out.npy", dir);
  const float old[2] = {7, 8};
  assert_int_equal(fg_npy_write(path, old, 1, 2, NULL), FLOWGEN_OK);

  enum { N = 4096 };
  float *big = calloc(N, sizeof *big);
  fg_test_file_size_limit limit;
  fg_test_begin_file_size_limit(&limit, 1000);
  flowgen_error err;
  flowgen_status s = fg_npy_write(path, big, 1, N, &err);
  fg_test_end_file_size_limit(&limit);
  free(big);

  assert_int_equal(s, FLOWGEN_IO);
  assert_message_has(&err, path);
  assert_message_has(&err, strerror(EFBIG));
  assert_int_equal(fg_test_count_entries(dir), 1);
  float *back = NULL;
  int64_t r, c;
  assert_int_equal(fg_npy_read(path, &back, &r, &c, NULL), FLOWGEN_OK);
  assert_int_equal(c, 2);
  assert_true(back[0] == 7.0f && back[1] == 8.0f);
  free(back);
  fg_test_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_f4),
      cmocka_unit_test(test_parse_header_variants),
      cmocka_unit_test(test_parse_vector_and_empty),
      cmocka_unit_test(test_parse_f8),
      cmocka_unit_test(test_numpy_fixtures),
      cmocka_unit_test(test_numpy_fixtures_refused),
      cmocka_unit_test(test_bad_preamble),
      cmocka_unit_test(test_bad_dicts),
      cmocka_unit_test(test_bad_dtypes),
      cmocka_unit_test(test_bad_shapes),
      cmocka_unit_test(test_data_size),
      cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_read_io_errors),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_write_special_values),
      cmocka_unit_test(test_write_bad_shape),
      cmocka_unit_test(test_write_unwritable),
      cmocka_unit_test(test_write_rename_fails),
      cmocka_unit_test(test_write_error_keeps_old_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
