/* safetensors parsing (runtime/safetensors.c) and weights loading
 * (runtime/weights.c): files built byte by byte here, files written by the
 * Python safetensors package (tests/data/make_weights.py), hostile input. */
#include "support.h"

#include "flowrt.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- building images ---------------------------------------------------- */

/* 8-byte length, header, then data_size bytes of a counting pattern. */
static unsigned char *image_from_header(const char *header, size_t data_size,
                                        size_t *size) {
  size_t header_size = strlen(header);
  *size = 8 + header_size + data_size;
  unsigned char *image = malloc(*size);
  assert_non_null(image);
  for (int i = 0; i < 8; ++i) image[i] = (unsigned char)((uint64_t)header_size >> (8 * i));
  memcpy(image + 8, header, header_size);
  for (size_t i = 0; i < data_size; ++i) image[8 + header_size + i] = (unsigned char)i;
  return image;
}

typedef struct tensor_spec {
  const char *name;
  const char *dtype;
  size_t ndim;
  uint64_t shape[3];
  const unsigned char *bytes;
  size_t size;
} tensor_spec;

/* A safetensors image of the tensors in order, written from the spec; pad
 * adds spaces to the header, so the data can start at any alignment. */
static unsigned char *build_image(const tensor_spec *t, size_t count,
                                  const char *metadata, size_t pad,
                                  size_t *size) {
  size_t cap = 4096 + pad, len = 0, offset = 0, data_size = 0;
  char *header = malloc(cap);
  assert_non_null(header);
  len += (size_t)snprintf(header + len, cap - len, "{");
  if (metadata)
    len += (size_t)snprintf(header + len, cap - len, "\"__metadata__\":%s%s",
                            metadata, count ? "," : "");
  for (size_t i = 0; i < count; ++i) {
    len += (size_t)snprintf(header + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                            i ? "," : "", t[i].name, t[i].dtype);
    for (size_t d = 0; d < t[i].ndim; ++d)
      len += (size_t)snprintf(header + len, cap - len, "%s%llu", d ? "," : "",
                              (unsigned long long)t[i].shape[d]);
    len += (size_t)snprintf(header + len, cap - len, "],\"data_offsets\":[%zu,%zu]}",
                            offset, offset + t[i].size);
    offset += t[i].size;
  }
  len += (size_t)snprintf(header + len, cap - len, "}%*s", (int)pad, "");
  assert_true(len < cap);
  data_size = offset;
  unsigned char *image = image_from_header(header, data_size, size);
  unsigned char *data = image + 8 + len;
  for (size_t i = 0; i < count; ++i) {
    memcpy(data, t[i].bytes, t[i].size);
    data += t[i].size;
  }
  free(header);
  return image;
}

/* The first occurrence of text in the image (the header is plain text). */
static char *find_text(unsigned char *image, size_t size, const char *text) {
  size_t n = strlen(text);
  for (size_t i = 0; i + n <= size; ++i)
    if (memcmp(image + i, text, n) == 0) return (char *)image + i;
  return NULL;
}

static uint8_t next_byte(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (uint8_t)(*state >> 24);
}

/* ---- reference conversions (independent of the library's) --------------- */

static float float_of_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint32_t bits_of_float(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

/* binary16 by its definition: (-1)^s 2^(e-15) 1.m, 2^-14 0.m, inf, nan. */
static float reference_half(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double magnitude;
  if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
  else if (exponent == 0) magnitude = ldexp(mantissa, -24);
  else magnitude = ldexp(1024 + mantissa, exponent - 25);
  return (float)(sign ? -magnitude : magnitude);
}

/* Bits must match, except that a nan only needs to be a nan of that sign. */
static void assert_same_float(float got, float want, const char *what, size_t i) {
  if (isnan(want)) {
    if (!isnan(got) || signbit(got) != signbit(want))
      fail_msg("%s[%zu]: got %g, want a nan of sign %d", what, i, got, !!signbit(want));
    return;
  }
  if (bits_of_float(got) != bits_of_float(want))
    fail_msg("%s[%zu]: got %.9g (0x%08x), want %.9g (0x%08x)", what, i, got,
             bits_of_float(got), want, bits_of_float(want));
}

/* The expected spec of a load that gives D and H (0: infer), nothing else:
 * NULL when both are 0.  One at a time (static). */
static const flowgen_spec *shape(int dim, int hidden) {
  static flowgen_spec expect;
  if (!dim && !hidden) return NULL;
  memset(&expect, 0, sizeof expect);
  expect.dim = dim;
  expect.hidden = hidden;
  return &expect;
}

/* ---- the error helpers -------------------------------------------------- */

static void assert_message_has(const flowgen_error *err, const char *needle) {
  if (!strstr(err->message, needle))
    fail_msg("message '%s' lacks '%s'", err->message, needle);
}

static void assert_st_refused(const unsigned char *image, size_t size,
                              const char *needle) {
  flowgen_error err;
  fg_st_file *file = (fg_st_file *)1;
  flowgen_status s = fg_st_parse(image, size, "w.safetensors", &file, &err);
  if (s != FLOWGEN_WEIGHTS)
    fail_msg("status %s for a file that should fail with '%s'",
             flowgen_status_name(s), needle);
  assert_null(file);
  assert_int_equal(err.status, FLOWGEN_WEIGHTS);
  assert_message_has(&err, "w.safetensors: ");
  assert_message_has(&err, needle);
}

static fg_st_file *parse_ok(const unsigned char *image, size_t size) {
  flowgen_error err = {0};
  fg_st_file *file = NULL;
  flowgen_status s = fg_st_parse(image, size, "w.safetensors", &file, &err);
  if (s != FLOWGEN_OK) fail_msg("parse failed: %s", err.message);
  assert_non_null(file);
  return file;
}

/* ---- fg_st_parse: good files -------------------------------------------- */

static void test_st_empty_header(void **state) {
  (void)state;
  size_t size;
  unsigned char *image = image_from_header("{}", 0, &size);
  fg_st_file *file = parse_ok(image, size);
  assert_int_equal(file->tensor_count, 0);
  assert_int_equal(file->header_size, 2);
  assert_int_equal(file->data_size, 0);
  assert_null(fg_st_find(file, "x"));
  fg_st_free(file);
  free(image);
}

static void test_st_every_dtype(void **state) {
  (void)state;
  static const char *const names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                      "I16",  "U16", "F16", "BF16",    "I32",
                                      "U32",  "F32", "F64", "I64",     "U64"};
  static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
  static const unsigned char zeros[16];
  tensor_spec t[15];
  char tensor_names[15][16];
  for (int i = 0; i < 15; ++i) {
    snprintf(tensor_names[i], sizeof tensor_names[i], "t%d", i);
    t[i] = (tensor_spec){tensor_names[i], names[i], 1, {2}, zeros, 2 * sizes[i]};
  }
  size_t size;
  unsigned char *image = build_image(t, 15, NULL, 0, &size);
  fg_st_file *file = parse_ok(image, size);
  assert_int_equal(file->tensor_count, 15);
  for (int i = 0; i < 15; ++i) {
    const fg_st_tensor *found = fg_st_find(file, tensor_names[i]);
    assert_non_null(found);
    assert_string_equal(fg_st_dtype_name(found->dtype), names[i]);
    assert_int_equal(fg_st_dtype_size(found->dtype), sizes[i]);
    assert_int_equal(found->count, 2);
    assert_int_equal(found->size, 2 * sizes[i]);
  }
  fg_st_free(file);
  free(image);
}

/* Any key order in the header; the tensors come back sorted by offset with
 * pointers into the image. */
static void test_st_offsets_out_of_order(void **state) {
  (void)state;
  const char *header =
      "{\"b\":{\"shape\":[2],\"data_offsets\":[4,12],\"dtype\":\"F32\"},"
      " \"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},"
      " \"z\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[12,12]},"
      " \"y\":{\"dtype\":\"I8\",\"shape\":[3, 0],\"data_offsets\":[12,12]},"
      " \"c\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[1,4]}}   ";
  size_t size;
  unsigned char *image = image_from_header(header, 12, &size);
  fg_st_file *file = parse_ok(image, size);
  assert_int_equal(file->tensor_count, 5);
  const char *order[] = {"a", "c", "b", "y", "z"};
  for (int i = 0; i < 5; ++i) assert_string_equal(file->tensors[i].name, order[i]);
  const fg_st_tensor *b = fg_st_find(file, "b");
  assert_int_equal(b->offset, 4);
  assert_int_equal(b->size, 8);
  assert_ptr_equal(b->data, image + 8 + strlen(header) + 4);
  assert_int_equal(b->ndim, 1);
  assert_int_equal(b->shape[0], 2);
  const fg_st_tensor *a = fg_st_find(file, "a");
  assert_int_equal(a->ndim, 0);
  assert_int_equal(a->count, 1);
  assert_int_equal(fg_st_find(file, "y")->count, 0);
  fg_st_free(file);
  free(image);
}

static void test_st_metadata(void **state) {
  (void)state;
  static const unsigned char four[4] = {1, 2, 3, 4};
  tensor_spec t = {"x", "U8", 1, {4}, four, 4};
  size_t size;
  unsigned char *image =
      build_image(&t, 1, "{\"format\":\"pt\",\"note\":\"\\u00e9t\\u00e9\"}", 3, &size);
  fg_st_file *file = parse_ok(image, size);
  assert_int_equal(file->metadata_count, 2);
  assert_string_equal(fg_st_metadata_get(file, "format"), "pt");
  assert_string_equal(fg_st_metadata_get(file, "note"), "\xc3\xa9t\xc3\xa9");
  assert_null(fg_st_metadata_get(file, "missing"));
  assert_memory_equal(fg_st_find(file, "x")->data, four, 4);
  fg_st_free(file);
  free(image);
}

static void test_st_format_shape(void **state) {
  (void)state;
  char buf[16];
  uint64_t shape[] = {4, 5, 123456789};
  fg_st_format_shape(shape, 2, buf, sizeof buf);
  assert_string_equal(buf, "[4, 5]");
  fg_st_format_shape(shape, 0, buf, sizeof buf);
  assert_string_equal(buf, "[]");
  fg_st_format_shape(shape, 3, buf, sizeof buf);
  assert_string_equal(buf, "[4, 5, 1234...]");  /* 15 characters and the NUL */
}

/* ---- fg_st_parse: hostile input ----------------------------------------- */

typedef struct hostile_case {
  const char *header;
  size_t data_size;
  const char *needle;
} hostile_case;

#define F32_ENTRY(name, shape, begin, end)                                    \
  "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape                          \
  ",\"data_offsets\":[" #begin "," #end "]}"

static const hostile_case hostile_headers[] = {
    /* the JSON itself */
    {"{", 0, "header is not valid JSON"},
    {"[]", 0, "header is not a JSON object"},
    {"42", 0, "header is not valid JSON"},
    {"{} x", 0, "header is not valid JSON"},
    {"{\"\xff\":{}}", 0, "header is not valid JSON"},          /* bad UTF-8 */
    {"{\"\xc0\xaf\":{}}", 0, "header is not valid JSON"},      /* overlong */
    {"{\"a\\u0000b\":{}}", 0, "header is not valid JSON"},     /* NUL in key */
    {"{" F32_ENTRY("a", "[1]", 0, 4) "," F32_ENTRY("a", "[1]", 4, 8) "}", 8,
     "duplicate"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
     4, "duplicate"},
    /* entries */
    {"{\"a\":5}", 0, "tensor 'a': entry is not an object"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing field 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing field 'shape'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': missing field 'data_offsets'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4,
     "tensor 'a': unknown field 'extra'"},
    /* dtype */
    {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': dtype is not a string"},
    {"{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': dtype 'F128' is not a safetensors dtype"},
    {"{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "dtype 'f32' is not a safetensors dtype"},
    /* shape */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape is not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape[1] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
     "shape[0] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
     "shape[0] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4,
     "shape[0] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}",
     4, "header is not valid JSON"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
     4, "tensor 'a': shape [4294967296, 4294967296] overflows the element count"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}",
     0, "overflows the element count"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}",
     4, "tensor 'a': shape [4611686018427387904] of F32 overflows the byte count"},
    /* data_offsets */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
     "tensor 'a': data_offsets is not an array of 2 integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
     "data_offsets is not an array of 2 integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"0\":4}}}", 4,
     "data_offsets is not an array of 2 integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
     "tensor 'a': data_offsets[0] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4,
     "tensor 'a': data_offsets[1] is not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
     "tensor 'a': data_offsets [8, 4] end before they begin"},
    {"{" F32_ENTRY("velocity.0.weight", "[4, 5]", 0, 12) "}", 12,
     "w.safetensors: tensor 'velocity.0.weight': data_offsets [0, 12] hold 12 "
     "bytes but shape [4, 5] of F32 needs 80"},
    {"{" F32_ENTRY("a", "[20]", 0, 80) "}", 40,
     "tensor 'a': data_offsets [0, 80] end past the data area of 40 bytes"},
    {"{" F32_ENTRY("a", "[2]", 18446744073709551600, 18446744073709551608) "}", 8,
     "header is not valid JSON"},  /* beyond jansson's integers: refused too */
    {"{" F32_ENTRY("a", "[2]", 9223372036854775800, 9223372036854775807) "}", 8,
     "hold 7 bytes but shape [2] of F32 needs 8"},
    /* layout of the data area */
    {"{" F32_ENTRY("a", "[1]", 4, 8) "}", 8,
     "tensor 'a': data_offsets [4, 8] leave bytes [0, 4) of the data area unused"},
    {"{" F32_ENTRY("a", "[1]", 0, 4) "," F32_ENTRY("b", "[1]", 8, 12) "}", 12,
     "tensor 'b': data_offsets [8, 12] leave bytes [4, 8)"},
    {"{" F32_ENTRY("a", "[2]", 0, 8) "," F32_ENTRY("b", "[2]", 4, 12) "}", 12,
     "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
    {"{" F32_ENTRY("b", "[2]", 0, 8) "," F32_ENTRY("a", "[2]", 0, 8) "}", 8,
     "tensor 'b': data_offsets [0, 8] overlap tensor 'a' [0, 8]"},
    {"{" F32_ENTRY("a", "[2]", 0, 8) "}", 12,
     "4 trailing bytes after the last tensor"},
    {"{}", 3, "3 trailing bytes after the last tensor"},
    /* __metadata__ */
    {"{\"__metadata__\":[]}", 0, "__metadata__ is not an object"},
    {"{\"__metadata__\":null}", 0, "__metadata__ is not an object"},
    {"{\"__metadata__\":\"pt\"}", 0, "__metadata__ is not an object"},
    {"{\"__metadata__\":{\"format\":\"pt\",\"epoch\":3}}", 0,
     "__metadata__: value of 'epoch' is not a string"},
    {"{\"__metadata__\":{\"a\":{}}}", 0, "value of 'a' is not a string"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate"},
};

static void test_st_hostile_headers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof hostile_headers / sizeof *hostile_headers; ++i) {
    const hostile_case *c = &hostile_headers[i];
    size_t size;
    unsigned char *image = image_from_header(c->header, c->data_size, &size);
    flowgen_error err;
    fg_st_file *file = NULL;
    flowgen_status s = fg_st_parse(image, size, "w.safetensors", &file, &err);
    if (s != FLOWGEN_WEIGHTS || file || !strstr(err.message, c->needle))
      fail_msg("case %zu (%s): status %s, message '%s', expected '%s'", i,
               c->header, flowgen_status_name(s), s ? err.message : "",
               c->needle);
    assert_true(strncmp(err.message, "w.safetensors: ", 15) == 0);
    free(image);
  }
}

static void test_st_length_prefix(void **state) {
  (void)state;
  unsigned char image[16] = {0};
  assert_st_refused(image, 0, "0 bytes is too short");
  assert_st_refused(image, 7, "7 bytes is too short");

  image[0] = 100;  /* header of 100 bytes in a 16-byte file */
  assert_st_refused(image, 16, "header length 100 runs past the end of the 16-byte file");
  uint64_t too_big = FG_ST_MAX_HEADER_SIZE + 1ull;
  for (int i = 0; i < 8; ++i) image[i] = (unsigned char)(too_big >> (8 * i));
  assert_st_refused(image, 16, "header length 100000001 exceeds the limit of 100000000 bytes");
  memset(image, 0xff, 8);
  assert_st_refused(image, 16, "header length 18446744073709551615 exceeds the limit");
  memset(image, 0, 8);  /* an empty header is not JSON */
  assert_st_refused(image, 8, "header is not valid JSON");
  image[0] = 2;
  memcpy(image + 8, "{\0", 2);  /* a NUL byte inside the header */
  assert_st_refused(image, 10, "header is not valid JSON");
}

/* Every prefix of a good file is refused; every single-byte change is either
 * refused or parses to something self-consistent. */
static void test_st_truncations_and_mutations(void **state) {
  (void)state;
  static const unsigned char data[24] = {1, 2, 3};
  tensor_spec t[] = {{"a", "F32", 2, {2, 2}, data, 16}, {"b", "BF16", 1, {4}, data, 8}};
  size_t size;
  unsigned char *image = build_image(t, 2, "{\"k\":\"v\"}", 5, &size);
  for (size_t len = 0; len < size; ++len) {
    unsigned char *copy = malloc(len ? len : 1);  /* exact size for valgrind */
    memcpy(copy, image, len);
    assert_st_refused(copy, len, "");
    free(copy);
  }
  uint64_t seed = fg_test_seed();
  for (size_t pos = 0; pos < size; ++pos) {
    unsigned char saved = image[pos];
    image[pos] = (unsigned char)(saved ^ (1u << ((seed + pos) % 8)));
    flowgen_error err;
    fg_st_file *file = NULL;
    flowgen_status s = fg_st_parse(image, size, "m", &file, &err);
    assert_true(s == FLOWGEN_OK || s == FLOWGEN_WEIGHTS);
    if (s == FLOWGEN_OK) {
      size_t covered = 0;
      for (size_t i = 0; i < file->tensor_count; ++i) covered += file->tensors[i].size;
      assert_int_equal(covered, file->data_size);
    }
    fg_st_free(file);
    image[pos] = saved;
  }
  free(image);
}

/* ---- weights: built in C ------------------------------------------------ */

enum { NUM_TENSORS = 6 };
static const char *const suffixes[NUM_TENSORS] = {"0.weight", "0.bias",  "2.weight",
                                                  "2.bias",   "4.weight", "4.bias"};

static size_t tensor_elements(int t, int dim, int hidden, uint64_t shape[2],
                              size_t *ndim) {
  const uint64_t d = (uint64_t)dim, h = (uint64_t)hidden;
  const uint64_t rows[] = {h, h, h, h, d, d}, cols[] = {d + 1, 0, h, 0, h, 0};
  shape[0] = rows[t];
  shape[1] = cols[t];
  *ndim = cols[t] ? 2 : 1;
  return (size_t)(cols[t] ? rows[t] * cols[t] : rows[t]);
}

static float *weights_array(const flowrt_weights *w, int t) {
  float *const arrays[] = {w->w[0], w->b[0], w->w[1], w->b[1], w->w[2], w->b[2]};
  return arrays[t];
}

/* A model whose six tensors hold random bit patterns of the given dtypes;
 * want[t] gets the fp32 each element must load as. */
typedef struct built_model {
  unsigned char *image;
  size_t size;
  float *want[NUM_TENSORS];
  size_t count[NUM_TENSORS];
} built_model;

static float decode_reference(const char *dtype, const unsigned char *p) {
  if (strcmp(dtype, "F16") == 0) return reference_half((uint16_t)(p[0] | p[1] << 8));
  if (strcmp(dtype, "BF16") == 0) return float_of_bits((uint32_t)(p[0] | p[1] << 8) << 16);
  return float_of_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                       (uint32_t)p[3] << 24);
}

static void build_model(built_model *m, const char *prefix, int dim, int hidden,
                        const char *const dtypes[NUM_TENSORS], size_t pad,
                        uint64_t seed) {
  tensor_spec t[NUM_TENSORS];
  char names[NUM_TENSORS][64];
  unsigned char *bytes[NUM_TENSORS];
  for (int i = 0; i < NUM_TENSORS; ++i) {
    snprintf(names[i], sizeof names[i], "%s%s", prefix, suffixes[i]);
    uint64_t shape[2];
    size_t ndim;
    size_t n = tensor_elements(i, dim, hidden, shape, &ndim);
    size_t width = strcmp(dtypes[i], "F32") == 0 ? 4 : 2;
    bytes[i] = malloc(n * width + 4);
    uint64_t random_state = seed * 6364136223846793005ull + (uint64_t)i + 1;
    for (size_t b = 0; b < n * width; ++b) bytes[i][b] = next_byte(&random_state);
    /* The loader refuses NaN and infinities: an all-ones exponent loses
     * its top bit (bit 14 of a 16-bit pattern, bit 30 of F32). */
    for (size_t e = 0; e < n; ++e)
      if (!isfinite(decode_reference(dtypes[i], bytes[i] + e * width)))
        bytes[i][e * width + width - 1] &= 0xbf;
    m->count[i] = n;
    m->want[i] = malloc((n + 1) * sizeof(float));
    for (size_t e = 0; e < n; ++e) m->want[i][e] = decode_reference(dtypes[i], bytes[i] + e * width);
    t[i] = (tensor_spec){names[i], dtypes[i], ndim, {shape[0], shape[1]}, bytes[i], n * width};
  }
  m->image = build_image(t, NUM_TENSORS, NULL, pad, &m->size);
  for (int i = 0; i < NUM_TENSORS; ++i) free(bytes[i]);
}

static void free_model(built_model *m) {
  free(m->image);
  for (int i = 0; i < NUM_TENSORS; ++i) free(m->want[i]);
}

static void assert_weights_match(const flowrt_weights *w, const built_model *m) {
  for (int t = 0; t < NUM_TENSORS; ++t)
    for (size_t e = 0; e < m->count[t]; ++e)
      assert_same_float(weights_array(w, t)[e], m->want[t][e], suffixes[t], e);
}

static void check_built_model(const char *const dtypes[NUM_TENSORS], size_t pad) {
  built_model m;
  build_model(&m, "velocity.", 3, 5, dtypes, pad, fg_test_seed());
  flowrt_weights *w = NULL;
  flowgen_error err = {0};
  flowgen_status s = flowrt_weights_parse(m.image, m.size, "built", NULL, NULL, &w, &err);
  if (s) fail_msg("%s", err.message);
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 5);
  assert_weights_match(w, &m);
  flowrt_weights_free(w);
  free_model(&m);
}

static void test_weights_built_f32(void **state) {
  (void)state;
  const char *const dtypes[] = {"F32", "F32", "F32", "F32", "F32", "F32"};
  for (size_t pad = 0; pad < 4; ++pad) check_built_model(dtypes, pad);  /* unaligned */
}

static void test_weights_built_f16(void **state) {
  (void)state;
  const char *const dtypes[] = {"F16", "F16", "F16", "F16", "F16", "F16"};
  check_built_model(dtypes, 1);
}

static void test_weights_built_bf16(void **state) {
  (void)state;
  const char *const dtypes[] = {"BF16", "BF16", "BF16", "BF16", "BF16", "BF16"};
  check_built_model(dtypes, 3);
}

static void test_weights_built_mixed(void **state) {
  (void)state;
  const char *const dtypes[] = {"F16", "BF16", "F32", "F16", "F32", "BF16"};
  check_built_model(dtypes, 2);
}

static bool half_is_finite(uint32_t h) { return ((h >> 10) & 31) != 31; }

/* All 65536 binary16 patterns, as w2 of an H=256 model: each finite one
 * loads as its value; an infinity or a NaN is refused, named by its place. */
static void test_weights_f16_exhaustive(void **state) {
  (void)state;
  const int dim = 1, hidden = 256;
  tensor_spec t[NUM_TENSORS];
  char names[NUM_TENSORS][32];
  unsigned char *bytes[NUM_TENSORS];
  for (int i = 0; i < NUM_TENSORS; ++i) {
    uint64_t shape[2];
    size_t ndim, n = tensor_elements(i, dim, hidden, shape, &ndim);
    bytes[i] = calloc(n, 2);
    if (i == 2)
      for (size_t e = 0; e < n; ++e) {
        if (!half_is_finite((uint32_t)e)) continue; /* left 0 */
        bytes[i][2 * e] = (unsigned char)e;
        bytes[i][2 * e + 1] = (unsigned char)(e >> 8);
      }
    snprintf(names[i], sizeof names[i], "velocity.%s", suffixes[i]);
    t[i] = (tensor_spec){names[i], "F16", ndim, {shape[0], shape[1]}, bytes[i], 2 * n};
  }
  size_t size;
  unsigned char *image = build_image(t, NUM_TENSORS, NULL, 0, &size);
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_parse(image, size, "f16", NULL, shape(dim, hidden), &w, NULL),
                   FLOWGEN_OK);
  for (uint32_t h = 0; h < 65536; ++h)
    assert_same_float(w->w[1][h], half_is_finite(h) ? reference_half((uint16_t)h) : 0.0f,
                      "half", h);
  /* Spot checks that do not rely on reference_half. */
  assert_true(w->w[1][0x0001] == 0x1p-24f);
  assert_true(w->w[1][0x03ff] == 0x3ffp-24f);
  assert_true(w->w[1][0x0400] == 0x1p-14f);
  assert_true(w->w[1][0x3c00] == 1.0f);
  assert_true(w->w[1][0xc000] == -2.0f);
  assert_true(w->w[1][0x7bff] == 65504.0f);
  assert_true(w->w[1][0xfbff] == -65504.0f);
  assert_true(w->w[1][0x8000] == 0.0f && signbit(w->w[1][0x8000]));
  assert_true(w->w[1][0x8001] == -0x1p-24f);
  flowrt_weights_free(w);

  /* Each kind of non-finite pattern, at its own place in w2 (256 x 256). */
  static const struct {
    uint16_t bits;
    const char *text;
  } bad[] = {{0x7c00, "holds inf at [124, 0]"}, {0xfc00, "holds -inf at [252, 0]"},
             {0x7e00, "holds nan at [126, 0]"}, {0x7c01, "holds nan at [124, 1]"},
             {0xffff, "holds nan at [255, 255]"}};
  fg_st_file *file = parse_ok(image, size);
  unsigned char *w2 = (unsigned char *)fg_st_find(file, "velocity.2.weight")->data;
  fg_st_free(file);
  for (size_t k = 0; k < sizeof bad / sizeof *bad; ++k) {
    unsigned char *at = w2 + 2 * (size_t)bad[k].bits;
    unsigned char saved[2] = {at[0], at[1]};
    at[0] = (unsigned char)bad[k].bits;
    at[1] = (unsigned char)(bad[k].bits >> 8);
    flowgen_error err = {0};
    w = (flowrt_weights *)1;
    assert_int_equal(flowrt_weights_parse(image, size, "f16", NULL, shape(dim, hidden), &w, &err),
                     FLOWGEN_WEIGHTS);
    assert_null(w);
    assert_message_has(&err, "f16: tensor 'velocity.2.weight' ");
    assert_message_has(&err, bad[k].text);
    at[0] = saved[0];
    at[1] = saved[1];
  }
  free(image);
  for (int i = 0; i < NUM_TENSORS; ++i) free(bytes[i]);
}

/* ---- weights: files written by the Python safetensors package ----------- */

static unsigned char *read_fixture(const char *file, size_t *size, char *path,
                                   size_t path_size) {
  snprintf(path, path_size, "%s/tests/data/%s", fg_test_source_dir(), file);
  unsigned char *data = (unsigned char *)fg_test_read_file(path, size);
  if (!data) fail_msg("cannot read %s (run from the repository root or set FLOWGEN_SOURCE_DIR)", path);
  return data;
}

static flowrt_weights *load_fixture(const char *file, const char *prefix, int dim,
                                    int hidden) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/%s", fg_test_source_dir(), file);
  flowrt_weights *w = NULL;
  flowgen_error err = {0};
  if (flowrt_weights_load(path, prefix, shape(dim, hidden), &w, &err) != FLOWGEN_OK)
    fail_msg("%s", err.message);
  return w;
}

/* make_weights.py's formula: k = (37 t + 13 i) mod 101 - 50, value k / divisor. */
static float fixture_value(int t, size_t i, double divisor) {
  int k = (int)((37u * (unsigned)t + 13u * i) % 101u) - 50;
  return (float)(k / divisor);
}

static void assert_fixture_values(const flowrt_weights *w, double divisor,
                                  int skip_tensor) {
  for (int t = 0; t < NUM_TENSORS; ++t) {
    if (t == skip_tensor) continue;
    uint64_t shape[2];
    size_t ndim, n = tensor_elements(t, w->dim, w->hidden, shape, &ndim);
    for (size_t i = 0; i < n; ++i)
      assert_same_float(weights_array(w, t)[i], fixture_value(t, i, divisor), suffixes[t], i);
  }
}

static void test_fixture_f32(void **state) {
  (void)state;
  flowrt_weights *w = load_fixture("tiny_f32.safetensors", NULL, 0, 0);
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 5);
  assert_fixture_values(w, 7.0, -1);
  assert_true(w->w[0][0] == (float)(-50 / 7.0));  /* t = 0, i = 0 */
  flowrt_weights_free(w);
  w = load_fixture("tiny_f32.safetensors", "velocity.", 3, 5);  /* given shape */
  assert_fixture_values(w, 7.0, -1);
  flowrt_weights_free(w);
}

/* The fixtures' last tensor (4.bias) ends in special values: the file is
 * refused for its first non-finite one (needle); with the elements from
 * `first_bad` on zeroed, the rest loads. */
static flowrt_weights *load_fixture_special(const char *file, size_t first_bad,
                                            const char *needle) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/%s", fg_test_source_dir(), file);
  flowrt_weights *w = (flowrt_weights *)1;
  flowgen_error err = {0};
  assert_int_equal(flowrt_weights_load(path, NULL, NULL, &w, &err), FLOWGEN_WEIGHTS);
  assert_null(w);
  assert_message_has(&err, "tensor 'velocity.4.bias' ");
  assert_message_has(&err, needle);
  size_t size;
  unsigned char *data = read_fixture(file, &size, path, sizeof path);
  fg_st_file *parsed = parse_ok(data, size);
  const fg_st_tensor *b3 = fg_st_find(parsed, "velocity.4.bias");
  assert_non_null(b3);
  size_t width = fg_st_dtype_size(b3->dtype);
  memset((unsigned char *)b3->data + first_bad * width, 0, b3->size - first_bad * width);
  fg_st_free(parsed);
  if (flowrt_weights_parse(data, size, file, NULL, NULL, &w, &err) != FLOWGEN_OK)
    fail_msg("%s", err.message);
  free(data);
  return w;
}

static void test_fixture_f16(void **state) {
  (void)state;
  flowrt_weights *w = load_fixture_special("tiny_f16.safetensors", 2, "holds inf at [2]");
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 5);
  assert_fixture_values(w, 16.0, 5);
  assert_true(w->b[2][0] == 0x1p-24f);
  assert_true(w->b[2][1] == -65504.0f);
  flowrt_weights_free(w);
}

static void test_fixture_bf16(void **state) {
  (void)state;
  flowrt_weights *w = load_fixture_special("tiny_bf16.safetensors", 1, "holds -inf at [1]");
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 5);
  assert_fixture_values(w, 16.0, 5);
  assert_true(w->b[2][0] == 0x1p-133f);
  flowrt_weights_free(w);
}

static void test_fixture_custom_prefix(void **state) {
  (void)state;
  flowrt_weights *w = load_fixture("custom_prefix.safetensors", "model.net.", 0, 0);
  assert_int_equal(w->dim, 2);
  assert_int_equal(w->hidden, 4);
  assert_fixture_values(w, 7.0, -1);
  flowrt_weights_free(w);
  w = load_fixture("custom_prefix.safetensors", "ema.net.", 2, 4);
  assert_fixture_values(w, 16.0, -1);
  flowrt_weights_free(w);
}

static void test_fixture_metadata(void **state) {
  (void)state;
  char path[4096];
  size_t size;
  unsigned char *data = read_fixture("with_metadata.safetensors", &size, path, sizeof path);
  fg_st_file *file = parse_ok(data, size);
  assert_string_equal(fg_st_metadata_get(file, "format"), "pt");
  assert_string_equal(fg_st_metadata_get(file, "flowgen.steps"), "32");
  assert_int_equal(file->tensor_count, 6);
  assert_int_equal((8 + file->header_size) % 8, 0);  /* the writer pads to 8 */
  fg_st_free(file);
  free(data);
  flowrt_weights *w = load_fixture("with_metadata.safetensors", NULL, 0, 0);
  assert_int_equal(w->dim, 1);
  assert_int_equal(w->hidden, 2);
  assert_fixture_values(w, 7.0, -1);
  flowrt_weights_free(w);
}

/* A real file cut short or grown by a byte is refused. */
static void test_fixture_truncated(void **state) {
  (void)state;
  char path[4096];
  size_t size;
  unsigned char *data = read_fixture("tiny_f32.safetensors", &size, path, sizeof path);
  flowgen_error err;
  flowrt_weights *w = (flowrt_weights *)1;
  assert_int_equal(flowrt_weights_parse(data, size - 1, "cut", NULL, NULL, &w, &err),
                   FLOWGEN_WEIGHTS);
  assert_null(w);
  assert_message_has(&err, "cut: tensor 'velocity.4.weight': data_offsets");
  assert_message_has(&err, "end past the data area");
  unsigned char *grown = malloc(size + 1);
  memcpy(grown, data, size);
  grown[size] = 0;
  assert_int_equal(flowrt_weights_parse(grown, size + 1, "grown", NULL, NULL, &w, &err),
                   FLOWGEN_WEIGHTS);
  assert_message_has(&err, "grown: 1 trailing bytes after the last tensor");
  free(grown);
  free(data);
}

/* ---- weights: refusals -------------------------------------------------- */

static void expect_weights_error(const unsigned char *image, size_t size,
                                 const char *prefix, int dim, int hidden,
                                 flowgen_status status, const char *needle) {
  flowgen_error err = {0};
  flowrt_weights *w = (flowrt_weights *)1;
  flowgen_status s = flowrt_weights_parse(image, size, "m.safetensors", prefix, shape(dim, hidden), &w, &err);
  if (s != status)
    fail_msg("status %s (%s), want %s", flowgen_status_name(s), err.message,
             flowgen_status_name(status));
  assert_null(w);
  assert_message_has(&err, needle);
}

static void test_weights_missing_tensor(void **state) {
  (void)state;
  char path[4096];
  size_t size;
  unsigned char *data = read_fixture("custom_prefix.safetensors", &size, path, sizeof path);
  expect_weights_error(data, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "m.safetensors: no tensor 'velocity.0.weight'");
  expect_weights_error(data, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "under the prefixes 'ema.net.', 'model.net.'");
  expect_weights_error(data, size, "model.", 0, 0, FLOWGEN_WEIGHTS,
                       "no tensor 'model.0.weight'");
  free(data);

  static const unsigned char zeros[64];
  tensor_spec only = {"other", "F32", 1, {4}, zeros, 16};
  unsigned char *image = build_image(&only, 1, NULL, 0, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "holds 1 tensors, none named *0.weight");
  free(image);
}

/* A NaN or an infinity anywhere in the six tensors is refused, naming the
 * tensor and the element: [row, column] of a matrix, [index] of a vector. */
static void test_weights_not_finite(void **state) {
  (void)state;
  const char *const dtypes[] = {"F32", "F32", "F32", "F32", "F32", "F32"};
  static const struct {
    int tensor;
    size_t index;
    float value;
    const char *needle;
  } cases[] = {
      {0, 3 * 4 + 1, NAN, "tensor 'velocity.0.weight' holds nan at [3, 1]"},
      {2, 6 * 6 - 1, INFINITY, "tensor 'velocity.2.weight' holds inf at [5, 5]"},
      {3, 0, -INFINITY, "tensor 'velocity.2.bias' holds -inf at [0]"},
      {5, 2, NAN, "tensor 'velocity.4.bias' holds nan at [2]"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
    built_model m;
    build_model(&m, "velocity.", 3, 6, dtypes, 0, 11);
    fg_st_file *file = parse_ok(m.image, m.size);
    char name[64];
    snprintf(name, sizeof name, "velocity.%s", suffixes[cases[k].tensor]);
    const fg_st_tensor *t = fg_st_find(file, name);
    assert_non_null(t);
    memcpy((unsigned char *)t->data + 4 * cases[k].index, &cases[k].value, 4);
    fg_st_free(file);
    expect_weights_error(m.image, m.size, NULL, 0, 0, FLOWGEN_WEIGHTS, cases[k].needle);
    expect_weights_error(m.image, m.size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                         "m.safetensors: tensor ");
    free_model(&m);
  }
}

static void test_weights_missing_bias(void **state) {
  (void)state;
  const char *const dtypes[] = {"F32", "F32", "F32", "F32", "F32", "F32"};
  built_model m;
  build_model(&m, "velocity.", 2, 3, dtypes, 0, 7);
  /* Rename 2.bias to 2.bjas in place: same length, same layout. */
  char *hit = find_text(m.image, m.size, "velocity.2.bias");
  assert_non_null(hit);
  hit[12] = 'j';
  expect_weights_error(m.image, m.size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "no tensor 'velocity.2.bias' (prefix 'velocity.'; the file "
                       "has *0.weight under the prefixes 'velocity.')");
  free_model(&m);
}

static void test_weights_wrong_dtype(void **state) {
  (void)state;
  const char *const dtypes[] = {"F32", "F32", "F32", "F32", "F32", "F32"};
  built_model m;
  build_model(&m, "velocity.", 2, 3, dtypes, 0, 7);
  const char *dtype_field = "\"velocity.0.bias\":{\"dtype\":\"";
  char *hit = find_text(m.image, m.size, dtype_field);
  assert_non_null(hit);
  hit += strlen(dtype_field);
  assert_memory_equal(hit, "F32", 3);
  memcpy(hit, "I32", 3);
  expect_weights_error(m.image, m.size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "m.safetensors: tensor 'velocity.0.bias' has dtype I32 "
                       "(accepted: F32, F16, BF16)");
  memcpy(hit, "U32", 3);
  expect_weights_error(m.image, m.size, NULL, 0, 0, FLOWGEN_WEIGHTS, "has dtype U32");
  free_model(&m);
}

/* One tensor of shape `bad` instead of its own; the rest of a D=3, H=5 model. */
static unsigned char *model_with_shape(int tensor, size_t ndim, const uint64_t *bad,
                                       size_t *size) {
  static const unsigned char zeros[4 * 8192];
  tensor_spec t[NUM_TENSORS];
  char names[NUM_TENSORS][32];
  for (int i = 0; i < NUM_TENSORS; ++i) {
    uint64_t shape[3] = {0};
    size_t n_dims, n = tensor_elements(i, 3, 5, shape, &n_dims);
    if (i == tensor) {
      n_dims = ndim;
      n = 1;
      for (size_t d = 0; d < ndim; ++d) n *= (size_t)(shape[d] = bad[d]);
    }
    snprintf(names[i], sizeof names[i], "velocity.%s", suffixes[i]);
    t[i] = (tensor_spec){names[i], "F32", n_dims, {shape[0], shape[1], shape[2]}, zeros, 4 * n};
  }
  return build_image(t, NUM_TENSORS, NULL, 0, size);
}

static void test_weights_wrong_shapes(void **state) {
  (void)state;
  size_t size;
  const uint64_t w1_narrow[] = {5, 3};
  unsigned char *image = model_with_shape(0, 2, w1_narrow, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "m.safetensors: tensor 'velocity.0.weight' has 3 columns but "
                       "D + T = 3 + 1 (x and the raw time) need at least 4");
  free(image);
  /* A wider one holds a conditioning (here C = 1); a C given that the
   * columns contradict is refused. */
  const uint64_t w1_wide[] = {5, 5};
  image = model_with_shape(0, 2, w1_wide, &size);
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_parse(image, size, "m", NULL, NULL, &w, NULL), FLOWGEN_OK);
  assert_int_equal(w->cond, 1);
  flowrt_weights_free(w);
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  expect.cond = 2;
  flowgen_error err = {0};
  assert_int_equal(flowrt_weights_parse(image, size, "m", NULL, &expect, &w, &err),
                   FLOWGEN_WEIGHTS);
  assert_message_has(&err, "tensor 'velocity.0.weight' has shape [5, 5] but D=3, H=5, C=2 "
                           "need [5, 6]");
  free(image);

  const uint64_t b1_long[] = {6};
  image = model_with_shape(1, 1, b1_long, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.0.bias' has shape [6] but D=3, H=5 need [5]");
  free(image);

  const uint64_t b2_matrix[] = {5, 1};
  image = model_with_shape(3, 2, b2_matrix, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.2.bias' has shape [5, 1] but D=3, H=5 need [5]");
  free(image);

  const uint64_t w2_transposed[] = {5, 4};
  image = model_with_shape(2, 2, w2_transposed, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.2.weight' has shape [5, 4] but D=3, H=5 need [5, 5]");
  free(image);

  const uint64_t w1_cube[] = {5, 4, 1};
  image = model_with_shape(0, 3, w1_cube, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.0.weight' has shape [5, 4, 1], expected a matrix [H, D+T+C]");
  free(image);

  const uint64_t w3_vector[] = {15};
  image = model_with_shape(4, 1, w3_vector, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.4.weight' has shape [15], expected a matrix [D, H]");
  free(image);
}

static void test_weights_given_shape_mismatch(void **state) {
  (void)state;
  char path[4096];
  size_t size;
  unsigned char *data = read_fixture("tiny_f32.safetensors", &size, path, sizeof path);
  expect_weights_error(data, size, NULL, 4, 0, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.4.weight' has shape [3, 5] but D=4, H=5 need [4, 5]");
  expect_weights_error(data, size, NULL, 0, 6, FLOWGEN_WEIGHTS,
                       "tensor 'velocity.0.weight' has shape [5, 4] but D=3, H=6 need [6, 4]");
  expect_weights_error(data, size, NULL, -1, 0, FLOWGEN_INVALID,
                       "expected spec: dim: -1 is out of range");
  expect_weights_error(data, size, NULL, 0, FLOWGEN_HIDDEN_MAX + 1, FLOWGEN_INVALID,
                       "expected spec: hidden: 4097 is out of range (accepted: 1 to 4096)");
  expect_weights_error(data, size, NULL, FLOWGEN_DIM_MAX + 1, 5, FLOWGEN_INVALID,
                       "dim: 1025 is out of range");
  free(data);
}

static void test_weights_inferred_out_of_range(void **state) {
  (void)state;
  size_t size;
  const uint64_t no_rows[] = {0, 4};
  unsigned char *image = model_with_shape(0, 2, no_rows, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "H = 0 (rows of tensor 'velocity.0.weight') is out of range "
                       "(accepted: 1 to 4096)");
  free(image);
  const uint64_t too_tall[] = {1025, 5};
  image = model_with_shape(4, 2, too_tall, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "D = 1025 (rows of tensor 'velocity.4.weight') is out of range "
                       "(accepted: 1 to 1024)");
  free(image);
}

static void test_weights_bad_container(void **state) {
  (void)state;
  size_t size;
  unsigned char *image = image_from_header("{\"velocity.0.weight\":5}", 0, &size);
  expect_weights_error(image, size, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "m.safetensors: tensor 'velocity.0.weight': entry is not an object");
  free(image);
  expect_weights_error((const unsigned char *)"", 0, NULL, 0, 0, FLOWGEN_WEIGHTS,
                       "too short");
}

static void test_weights_load_io_errors(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  snprintf(path, sizeof path, "%s/absent.safetensors", dir);
  flowgen_error err;
  flowrt_weights *w = (flowrt_weights *)1;
  assert_int_equal(flowrt_weights_load(path, NULL, NULL, &w, &err), FLOWGEN_IO);
  assert_null(w);
  assert_message_has(&err, path);
  assert_message_has(&err, strerror(ENOENT));
  assert_int_equal(flowrt_weights_load(dir, NULL, NULL, &w, &err), FLOWGEN_IO);
  assert_message_has(&err, strerror(EISDIR));
  snprintf(path, sizeof path, "%s/empty.safetensors", dir);
  fg_test_write_file(path, "", 0);
  assert_int_equal(flowrt_weights_load(path, NULL, NULL, &w, &err), FLOWGEN_WEIGHTS);
  assert_message_has(&err, "empty.safetensors: 0 bytes is too short");
  fg_test_rmtree(dir);
  free(dir);
}

/* ---- weights: a file is judged before it is read ------------------------ */

#define GIB (1ull << 30)
#define LOAD_RSS_MAX_KB (64 * 1024) /* the largest rise of peak memory allowed */
#define LOAD_SECONDS_MAX 1.0

static long peak_rss_kb(void) {
  struct rusage ru;
  assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
  return ru.ru_maxrss;
}

/* A file of `head` followed by zeros up to `size` bytes; the zeros are a
 * hole (ftruncate): no disk, no time. */
static void write_sparse(const char *path, const void *head, size_t head_size,
                         unsigned long long size) {
  fg_test_write_file(path, head, head_size);
  assert_int_equal(truncate(path, (off_t)size), 0);
}

/* flowrt_weights_load of path: its status, and that it neither raised the
 * process's peak memory by more than LOAD_RSS_MAX_KB nor took a second. */
static flowgen_status load_cheaply(const char *path, flowrt_weights **w, flowgen_error *err) {
  long before = peak_rss_kb();
  double start = fg_test_now_seconds();
  flowgen_status s = flowrt_weights_load(path, NULL, NULL, w, err);
  double seconds = fg_test_now_seconds() - start;
  long rise = peak_rss_kb() - before;
  if (rise > LOAD_RSS_MAX_KB)
    fail_msg("%s: loading raised peak memory by %ld KB (%s)", path, rise, err->message);
  if (fg_test_timing_checks() && seconds > LOAD_SECONDS_MAX)
    fail_msg("%s: loading took %.2f s", path, seconds);
  return s;
}

static void test_weights_load_checks_before_reading(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  flowgen_error err = {0};
  flowrt_weights *w = (flowrt_weights *)1;

  /* 1 GiB of zeros: a header length of 0, refused from its first 8 bytes. */
  snprintf(path, sizeof path, "%s/zeros.safetensors", dir);
  write_sparse(path, "", 0, GIB);
  assert_int_equal(load_cheaply(path, &w, &err), FLOWGEN_WEIGHTS);
  assert_null(w);
  assert_message_has(&err, "zeros.safetensors: header is not valid JSON");

  /* ... and with a length of almost 100 MB, the limit: refused at the
   * header's first byte, not once it has been read. */
  unsigned char length[8] = {0};
  for (int i = 0; i < 8; ++i) length[i] = (unsigned char)((uint64_t)99999999 >> (8 * i));
  snprintf(path, sizeof path, "%s/long_header.safetensors", dir);
  write_sparse(path, length, sizeof length, GIB);
  assert_int_equal(load_cheaply(path, &w, &err), FLOWGEN_WEIGHTS);
  assert_message_has(&err, "long_header.safetensors: header is not valid JSON");

  /* A good small model followed by 1 GiB: its size disagrees with its
   * header, refused before the data is read. */
  const char *const dtypes[] = {"F32", "F32", "F32", "F32", "F32", "F32"};
  built_model m;
  build_model(&m, "velocity.", 2, 3, dtypes, 0, 5);
  snprintf(path, sizeof path, "%s/trailing.safetensors", dir);
  write_sparse(path, m.image, m.size, m.size + GIB);
  assert_int_equal(load_cheaply(path, &w, &err), FLOWGEN_WEIGHTS);
  assert_message_has(&err, "trailing.safetensors: 1073741824 trailing bytes after the last tensor");
  free_model(&m);

  /* The six tensors and a 1 GiB tensor the model does not use: loaded,
   * reading only the six. */
  char header[1024];
  size_t len = 0, offset = 0;
  float values[128 / 4];
  const char *shapes[6] = {"[3,3]", "[3]", "[3,3]", "[3]", "[2,3]", "[2]"};
  const size_t bytes[6] = {36, 12, 36, 12, 24, 8};
  len += (size_t)snprintf(header + len, sizeof header - len, "{");
  for (int t = 0; t < 6; ++t) {
    len += (size_t)snprintf(header + len, sizeof header - len,
                            "\"velocity.%s\":{\"dtype\":\"F32\",\"shape\":%s,"
                            "\"data_offsets\":[%zu,%zu]},",
                            suffixes[t], shapes[t], offset, offset + bytes[t]);
    offset += bytes[t];
  }
  len += (size_t)snprintf(header + len, sizeof header - len,
                          "\"optimizer.moments\":{\"dtype\":\"U8\",\"shape\":[%llu],"
                          "\"data_offsets\":[%zu,%llu]}}",
                          GIB, offset, offset + GIB);
  assert_true(len < sizeof header - 8 - sizeof values);
  assert_int_equal(offset, sizeof values);
  unsigned char head[1024 + 8 + 128];
  for (int i = 0; i < 8; ++i) head[i] = (unsigned char)((uint64_t)len >> (8 * i));
  memcpy(head + 8, header, len);
  for (size_t i = 0; i < 32; ++i) values[i] = (float)i - 15.5f;
  memcpy(head + 8 + len, values, sizeof values); /* x86: little-endian */
  snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
  write_sparse(path, head, 8 + len + sizeof values, 8 + len + sizeof values + GIB);
  if (load_cheaply(path, &w, &err) != FLOWGEN_OK) fail_msg("%s", err.message);
  assert_int_equal(w->dim, 2);
  assert_int_equal(w->hidden, 3);
  const float *arrays[6] = {w->w[0], w->b[0], w->w[1], w->b[1], w->w[2], w->b[2]};
  for (int t = 0, k = 0; t < 6; ++t)
    for (size_t i = 0; i < bytes[t] / 4; ++i, ++k) assert_true(arrays[t][i] == values[k]);
  flowrt_weights_free(w);

  /* Cut short inside the six tensors: refused from the header and the
   * size, as in memory. */
  assert_int_equal(truncate(path, (off_t)(8 + len + 64)), 0);
  assert_int_equal(load_cheaply(path, &w, &err), FLOWGEN_WEIGHTS);
  assert_message_has(&err, "end past the data area");

  fg_test_rmtree(dir);
  free(dir);
}

/* What is not a regular file is refused at once: a FIFO without a writer
 * does not block the load, a device is not read. */
static void test_weights_load_not_a_file(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[4200];
  flowgen_error err = {0};
  flowrt_weights *w = (flowrt_weights *)1;
  snprintf(path, sizeof path, "%s/fifo.safetensors", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(60); /* a load that waits for a writer ends the test (SIGALRM) */
  assert_int_equal(flowrt_weights_load(path, NULL, NULL, &w, &err), FLOWGEN_IO);
  alarm(0);
  assert_null(w);
  assert_message_has(&err, "fifo.safetensors: not a regular file");
  assert_int_equal(flowrt_weights_load("/dev/zero", NULL, NULL, &w, &err), FLOWGEN_IO);
  assert_message_has(&err, "/dev/zero: not a regular file");
  fg_test_rmtree(dir);
  free(dir);
}

static void test_weights_alloc_and_free(void **state) {
  (void)state;
  flowrt_weights *w = NULL;
  flowgen_spec model = fg_test_spec(3, 7, 1, 90);
  assert_int_equal(flowrt_weights_alloc(&model, &w, NULL), FLOWGEN_OK);
  assert_int_equal(w->dim, 3);
  assert_int_equal(w->hidden, 7);
  assert_int_equal(w->cond, 0);
  assert_int_equal(w->layers, 3);
  assert_int_equal(w->time_width, 1);
  assert_string_equal(w->input, "xtc");
  for (size_t i = 0; i < 7 * 4; ++i) assert_true(w->w[0][i] == 0.0f);
  for (size_t i = 0; i < 7 * 7; ++i) assert_true(w->w[1][i] == 0.0f);
  for (size_t i = 0; i < 3 * 7; ++i) assert_true(w->w[2][i] == 0.0f);
  for (size_t i = 0; i < 7; ++i) assert_true(w->b[0][i] == 0.0f && w->b[1][i] == 0.0f);
  for (size_t i = 0; i < 3; ++i) assert_true(w->b[2][i] == 0.0f);
  assert_null(w->w[3]);
  assert_null(w->b[3]);
  w->w[0][7 * 4 - 1] = w->w[2][3 * 7 - 1] = 1.0f;  /* in bounds (valgrind) */
  flowrt_weights_free(w);
  flowrt_weights_free(NULL);

  /* A member of the family: L layers, the first D + T + C wide. */
  model.cond = 5;
  model.layers = 5;
  model.act = FLOWGEN_ACT_TANH;
  model.time.features = 8;
  model.time.scale = 2.0;
  strcpy(model.input, "ctx");
  assert_int_equal(flowrt_weights_alloc(&model, &w, NULL), FLOWGEN_OK);
  assert_int_equal(w->cond, 5);
  assert_int_equal(w->layers, 5);
  assert_int_equal(w->time_width, 8);
  assert_int_equal(w->act, FLOWGEN_ACT_TANH);
  assert_int_equal(w->time.features, 8);
  assert_true(w->time.scale == 2.0);
  assert_string_equal(w->input, "ctx");
  w->w[0][7 * (3 + 8 + 5) - 1] = 1.0f;
  for (int i = 1; i < 4; ++i) w->w[i][7 * 7 - 1] = 1.0f;
  w->w[4][3 * 7 - 1] = w->b[4][2] = 1.0f;
  assert_null(w->w[5]);
  flowgen_spec back;
  flowgen_spec_default(&back);
  back.steps = 9;
  flowrt_weights_model(w, &back);
  assert_int_equal(back.steps, 9);
  assert_int_equal(back.cond, 5);
  assert_int_equal(back.layers, 5);
  assert_string_equal(back.input, "ctx");
  assert_int_equal(flowrt_weights_check(w, &back, NULL), FLOWGEN_OK);
  flowrt_weights_free(w);

  flowgen_error err;
  w = (flowrt_weights *)1;
  model = fg_test_spec(0, 7, 1, 90);
  assert_int_equal(flowrt_weights_alloc(&model, &w, &err), FLOWGEN_INVALID);
  assert_null(w);
  assert_message_has(&err, "weights: dim: 0 is out of range (accepted: 1 to 1024)");
  model = fg_test_spec(3, 4097, 1, 90);
  assert_int_equal(flowrt_weights_alloc(&model, &w, &err), FLOWGEN_INVALID);
  assert_message_has(&err, "hidden: 4097 is out of range");
  model = fg_test_spec(3, 7, 1, 90);
  model.layers = 9;
  assert_int_equal(flowrt_weights_alloc(&model, &w, &err), FLOWGEN_INVALID);
  assert_message_has(&err, "layers: 9 is out of range");
  assert_int_equal(flowrt_weights_alloc(NULL, &w, &err), FLOWGEN_INVALID);
}

/* ---- weights: the model family ------------------------------------------- */

/* A model of the family in F32, each tensor's values from its own seed:
 * layer i at Sequential index 2 i, the first layer D + T + C wide. */
typedef struct family_model {
  unsigned char *image;
  size_t size;
  int layers;
  float *values[2 * FLOWGEN_LAYERS_MAX]; /* w[i] at 2 i, b[i] at 2 i + 1 */
  size_t count[2 * FLOWGEN_LAYERS_MAX];
} family_model;

static void build_family(family_model *m, int dim, int hidden, int in_width, int layers,
                         const char *metadata) {
  tensor_spec t[2 * FLOWGEN_LAYERS_MAX];
  char names[2 * FLOWGEN_LAYERS_MAX][64];
  m->layers = layers;
  for (int i = 0; i < layers; ++i) {
    uint64_t rows = (uint64_t)(i == layers - 1 ? dim : hidden);
    uint64_t cols = (uint64_t)(i == 0 ? in_width : hidden);
    for (int k = 0; k < 2; ++k) {
      int n = 2 * i + k;
      m->count[n] = (size_t)(k ? rows : rows * cols);
      m->values[n] = malloc(m->count[n] * sizeof(float) + 4);
      fg_test_fill_uniform(m->values[n], m->count[n], 100 + (uint64_t)n, 1.0f);
      snprintf(names[n], sizeof names[n], "velocity.%d.%s", 2 * i, k ? "bias" : "weight");
      t[n] = (tensor_spec){names[n], "F32", k ? 1 : 2, {rows, k ? 0 : cols},
                           (const unsigned char *)m->values[n], m->count[n] * sizeof(float)};
    }
  }
  m->image = build_image(t, (size_t)(2 * layers), metadata, 0, &m->size);
}

static void free_family(family_model *m) {
  free(m->image);
  for (int n = 0; n < 2 * m->layers; ++n) free(m->values[n]);
}

static void assert_family_values(const flowrt_weights *w, const family_model *m) {
  assert_int_equal(w->layers, m->layers);
  for (int i = 0; i < m->layers; ++i) {
    assert_memory_equal(w->w[i], m->values[2 * i], m->count[2 * i] * sizeof(float));
    assert_memory_equal(w->b[i], m->values[2 * i + 1], m->count[2 * i + 1] * sizeof(float));
  }
  for (int i = m->layers; i < FLOWGEN_LAYERS_MAX; ++i) {
    assert_null(w->w[i]);
    assert_null(w->b[i]);
  }
}

static flowrt_weights *parse_family(const family_model *m, const flowgen_spec *expect) {
  flowrt_weights *w = NULL;
  flowgen_error err = {0};
  if (flowrt_weights_parse(m->image, m->size, "family.safetensors", NULL, expect, &w, &err))
    fail_msg("%s", err.message);
  return w;
}

/* L from the layers present, D from the last one's rows, H from the
 * first's, C from its columns minus D and T; every layer's values. */
static void test_weights_family_shapes(void **state) {
  (void)state;
  static const struct {
    int dim, hidden, cond, layers, time_width;
    const char *metadata;
  } cases[] = {
      {3, 5, 0, 2, 1, NULL},
      {3, 5, 0, 3, 1, NULL},
      {4, 6, 2, 4, 1, NULL},
      {2, 3, 7, 8, 1, NULL},
      {1, 1, 1, 2, 1, NULL},
      {3, 5, 4, 3, 16, "{\"flowgen.time\":\"sin:16\"}"},
      {3, 5, 0, 5, 2, "{\"flowgen.time\":\"sin:2:7.5\",\"flowgen.act\":\"relu\"}"},
      {2, 4, 10, 3, 8,
       "{\"flowgen.time\":\"sin:8\",\"flowgen.input\":\"c,x,t\",\"flowgen.cond\":\"10\","
       "\"flowgen.act\":\"gelu_tanh\",\"format\":\"pt\"}"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
    family_model m;
    int in = cases[k].dim + cases[k].time_width + cases[k].cond;
    build_family(&m, cases[k].dim, cases[k].hidden, in, cases[k].layers, cases[k].metadata);
    flowrt_weights *w = parse_family(&m, NULL);
    assert_int_equal(w->dim, cases[k].dim);
    assert_int_equal(w->hidden, cases[k].hidden);
    assert_int_equal(w->cond, cases[k].cond);
    assert_int_equal(w->layers, cases[k].layers);
    assert_int_equal(w->time_width, cases[k].time_width);
    assert_family_values(w, &m);
    /* What was read, given back as the expected spec, reads the same. */
    flowgen_spec expect;
    memset(&expect, 0, sizeof expect);
    flowrt_weights_model(w, &expect);
    flowrt_weights *again = parse_family(&m, &expect);
    assert_int_equal(again->cond, w->cond);
    assert_family_values(again, &m);
    flowrt_weights_free(again);
    flowrt_weights_free(w);
    free_family(&m);
  }
}

/* What the shapes cannot tell: the metadata, else the expected spec, else
 * the seed's; the expected spec's time also decides C. */
static void test_weights_family_metadata(void **state) {
  (void)state;
  family_model m;
  build_family(&m, 3, 5, 3 + 8 + 2, 3,
               "{\"flowgen.act\":\"gelu\",\"flowgen.time\":\"sin:8:3\","
               "\"flowgen.input\":\"t,c,x\"}");
  flowrt_weights *w = parse_family(&m, NULL);
  assert_int_equal(w->act, FLOWGEN_ACT_GELU);
  assert_int_equal(w->time.features, 8);
  assert_true(w->time.scale == 3.0);
  assert_string_equal(w->input, "tcx");
  assert_int_equal(w->cond, 2);
  flowrt_weights_free(w);
  /* Expected fields that agree with the file (sin:8:3 spelled 3.0). */
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  assert_int_equal(flowgen_spec_set(&expect, "act", "gelu", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&expect, "time", "sin:8:3.0", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&expect, "input", "t,c,x", NULL), FLOWGEN_OK);
  expect.cond = 2;
  expect.layers = 3;
  w = parse_family(&m, &expect);
  assert_family_values(w, &m);
  flowrt_weights_free(w);
  free_family(&m);

  /* No metadata: the seed's, or what the caller says, which moves C. */
  build_family(&m, 3, 5, 3 + 8 + 2, 3, NULL);
  w = parse_family(&m, NULL);
  assert_int_equal(w->act, FLOWGEN_ACT_SILU);
  assert_int_equal(w->time.features, 0);
  assert_string_equal(w->input, "xtc");
  assert_int_equal(w->time_width, 1);
  assert_int_equal(w->cond, 9);
  flowrt_weights_free(w);
  memset(&expect, 0, sizeof expect);
  assert_int_equal(flowgen_spec_set(&expect, "time", "sin:8", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&expect, "act", "tanh", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&expect, "input", "c,x,t", NULL), FLOWGEN_OK);
  w = parse_family(&m, &expect);
  assert_int_equal(w->cond, 2);
  assert_int_equal(w->time_width, 8);
  assert_int_equal(w->act, FLOWGEN_ACT_TANH);
  assert_string_equal(w->input, "cxt");
  assert_family_values(w, &m);
  flowrt_weights_free(w);
  free_family(&m);
}

static void expect_family_error(const char *metadata, int in_width, int layers,
                                const flowgen_spec *expect, flowgen_status status,
                                const char *needle) {
  family_model m;
  build_family(&m, 3, 5, in_width, layers, metadata);
  flowrt_weights *w = (flowrt_weights *)1;
  flowgen_error err = {0};
  flowgen_status st = flowrt_weights_parse(m.image, m.size, "f.safetensors", NULL, expect, &w,
                                           &err);
  if (st != status)
    fail_msg("status %s (%s), want %s", flowgen_status_name(st), err.message,
             flowgen_status_name(status));
  assert_null(w);
  assert_message_has(&err, needle);
  free_family(&m);
}

/* Bad metadata, and a file that contradicts the caller: the message names
 * the key, the file's value and the flag's. */
static void test_weights_family_contradictions(void **state) {
  (void)state;
  expect_family_error("{\"flowgen.act\":\"swish\"}", 4, 3, NULL, FLOWGEN_WEIGHTS,
                      "f.safetensors: __metadata__ 'flowgen.act': unknown value 'swish' "
                      "(accepted: silu, gelu, gelu_tanh, relu, tanh)");
  expect_family_error("{\"flowgen.time\":\"sin:3\"}", 6, 3, NULL, FLOWGEN_WEIGHTS,
                      "__metadata__ 'flowgen.time': 'sin:3': K = 3 is odd");
  expect_family_error("{\"flowgen.input\":\"x,t\"}", 4, 3, NULL, FLOWGEN_WEIGHTS,
                      "__metadata__ 'flowgen.input': 'x,t' is not an order of x, t and c");
  expect_family_error("{\"flowgen.cond\":\"many\"}", 4, 3, NULL, FLOWGEN_WEIGHTS,
                      "__metadata__ 'flowgen.cond': 'many' is not a width 0 to 4096");
  expect_family_error("{\"flowgen.cond\":\"3\"}", 6, 3, NULL, FLOWGEN_WEIGHTS,
                      "the file's __metadata__ says flowgen.cond = 3 but its tensor "
                      "'velocity.0.weight' has C = 2 conditioning columns");
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  expect.act = FLOWGEN_ACT_RELU;
  expect_family_error("{\"flowgen.act\":\"gelu\"}", 4, 3, &expect, FLOWGEN_WEIGHTS,
                      "f.safetensors: the file's __metadata__ says flowgen.act = gelu but "
                      "relu was asked for (--act relu)");
  memset(&expect, 0, sizeof expect);
  expect.time.features = 4;
  expect_family_error("{\"flowgen.time\":\"sin:4:2\"}", 8, 3, &expect, FLOWGEN_WEIGHTS,
                      "flowgen.time = sin:4:2 but sin:4 was asked for (--time sin:4)");
  memset(&expect, 0, sizeof expect);
  strcpy(expect.input, "xtc");
  expect_family_error("{\"flowgen.input\":\"x,c,t\"}", 4, 3, &expect, FLOWGEN_WEIGHTS,
                      "flowgen.input = x,c,t but x,t,c was asked for (--input x,t,c)");
  memset(&expect, 0, sizeof expect);
  expect.layers = 3;
  expect_family_error(NULL, 4, 4, &expect, FLOWGEN_WEIGHTS,
                      "f.safetensors: the file has 4 Linear layers ('velocity.0' to "
                      "'velocity.6') but 3 were asked for (--layers 3)");
  memset(&expect, 0, sizeof expect);
  expect.cond = 1;
  expect_family_error(NULL, 6, 3, &expect, FLOWGEN_WEIGHTS,
                      "tensor 'velocity.0.weight' has shape [5, 6] but D=3, H=5, C=1 need "
                      "[5, 5]");
  memset(&expect, 0, sizeof expect);
  expect.time.features = 6;
  expect_family_error(NULL, 8, 3, &expect, FLOWGEN_WEIGHTS,
                      "tensor 'velocity.0.weight' has 8 columns but D + T = 3 + 6 (x and the "
                      "sin:6 time) need at least 9");
  expect_family_error(NULL, 3 + 1 + FLOWGEN_COND_MAX + 1, 2, NULL, FLOWGEN_WEIGHTS,
                      "has 4101 columns: C = 4101 - D - T = 4097 is out of range (accepted: "
                      "0 to 4096)");
  /* An expected spec out of its ranges is the caller's error. */
  memset(&expect, 0, sizeof expect);
  expect.layers = 1;
  expect_family_error(NULL, 4, 3, &expect, FLOWGEN_INVALID,
                      "expected spec: layers: 1 is out of range");
  memset(&expect, 0, sizeof expect);
  expect.time.features = 3;
  expect_family_error(NULL, 4, 3, &expect, FLOWGEN_INVALID, "expected spec: time.features: 3");
}

/* The Linear layers are at 0, 2, 4, ... with parameterless modules between
 * them, no gap, 2 to 8 of them. */
static void test_weights_family_layer_structure(void **state) {
  (void)state;
  static const float values[64];
  static const struct {
    const char *names[6];
    const char *needle;
  } cases[] = {
      {{"velocity.0.weight", "velocity.0.bias", NULL},
       "f.safetensors: one Linear layer ('velocity.0.weight'); the model needs 2 to 8"},
      {{"velocity.0.weight", "velocity.0.bias", "velocity.2.weight", "velocity.2.bias",
        "velocity.6.weight", "velocity.6.bias"},
       "there is 'velocity.6.weight' but no 'velocity.4.weight': the Linear layers must be "
       "at indices 0, 2, 4, ... of the Sequential, with no gap"},
      {{"velocity.0.weight", "velocity.0.bias", "velocity.1.weight", "velocity.2.weight",
        "velocity.2.bias", NULL},
       "tensor 'velocity.1.weight': module 1 of the Sequential has parameters, but between "
       "two Linear layers there must be an activation"},
      {{"velocity.0.weight", "velocity.0.bias", "velocity.2.weight", NULL},
       "no tensor 'velocity.2.bias'"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
    tensor_spec t[6];
    size_t n = 0;
    for (; n < 6 && cases[k].names[n]; ++n) {
      /* H = D = 2: the first layer is 2 x 3 ([x, t]), the others 2 x 2. */
      bool bias = strstr(cases[k].names[n], "bias") != NULL;
      uint64_t cols = strncmp(cases[k].names[n], "velocity.0.", 11) == 0 ? 3 : 2;
      t[n] = (tensor_spec){cases[k].names[n], "F32", bias ? 1 : 2, {2, bias ? 0 : cols},
                           (const unsigned char *)values, bias ? 8 : 8 * cols};
    }
    size_t size;
    unsigned char *image = build_image(t, n, NULL, 0, &size);
    flowrt_weights *w = (flowrt_weights *)1;
    flowgen_error err = {0};
    assert_int_equal(flowrt_weights_parse(image, size, "f.safetensors", NULL, NULL, &w, &err),
                     FLOWGEN_WEIGHTS);
    assert_null(w);
    assert_message_has(&err, cases[k].needle);
    free(image);
  }
  /* Nine layers. */
  tensor_spec t[18];
  char names[18][32];
  for (int i = 0; i < 9; ++i)
    for (int k = 0; k < 2; ++k) {
      snprintf(names[2 * i + k], sizeof names[0], "velocity.%d.%s", 2 * i, k ? "bias" : "weight");
      t[2 * i + k] = (tensor_spec){names[2 * i + k], "F32", k ? 1 : 2, {2, k ? 0 : 2},
                                   (const unsigned char *)values, k ? 8 : 16};
    }
  size_t size;
  unsigned char *image = build_image(t, 18, NULL, 0, &size);
  flowrt_weights *w = NULL;
  flowgen_error err = {0};
  assert_int_equal(flowrt_weights_parse(image, size, "f.safetensors", NULL, NULL, &w, &err),
                   FLOWGEN_WEIGHTS);
  assert_message_has(&err, "more than 8 Linear layers ('velocity.16.weight' is there; "
                           "accepted: 2 to 8)");
  free(image);
}

/* flowrt_weights_check names the first field of the model that differs,
 * with both values. */
static void test_weights_check(void **state) {
  (void)state;
  flowgen_spec model = fg_test_spec(3, 7, 1, 90);
  model.cond = 2;
  model.layers = 4;
  model.act = FLOWGEN_ACT_GELU;
  model.time.features = 4;
  strcpy(model.input, "txc");
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_alloc(&model, &w, NULL), FLOWGEN_OK);
  static const struct {
    const char *field, *value, *needle;
  } cases[] = {
      {"dim", "4", "the weights are D=3, H=7 but the spec asks for D=4, H=7"},
      {"hidden", "8", "D=3, H=8"},
      {"cond", "3", "conditioning C=2 but the spec asks for C=3 (cond)"},
      {"layers", "3", "Linear layers L=4 but the spec asks for L=3 (layers)"},
      {"act", "gelu_tanh", "activation gelu but the spec asks for gelu_tanh (act)"},
      {"time", "sin:6", "time sin:4 but the spec asks for sin:6 (time)"},
      {"time", "sin:4:999", "time sin:4 but the spec asks for sin:4:999 (time)"},
      {"time", "raw", "time sin:4 but the spec asks for raw (time)"},
      {"input", "x,t,c", "input order t,x,c but the spec asks for x,t,c (input)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_spec spec = model;
    assert_int_equal(flowgen_spec_set(&spec, cases[i].field, cases[i].value, NULL), FLOWGEN_OK);
    flowgen_error err = {0};
    assert_int_equal(flowrt_weights_check(w, &spec, &err), FLOWGEN_INVALID);
    assert_message_has(&err, cases[i].needle);
  }
  /* The same time in another spelling, the default input spelled out. */
  flowgen_spec same = model;
  assert_int_equal(flowgen_spec_set(&same, "time", "sin:4:1000", NULL), FLOWGEN_OK);
  assert_int_equal(flowrt_weights_check(w, &same, NULL), FLOWGEN_OK);
  flowrt_weights_free(w);
  assert_int_equal(flowrt_weights_check(NULL, &model, NULL), FLOWGEN_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_st_empty_header),
      cmocka_unit_test(test_st_every_dtype),
      cmocka_unit_test(test_st_offsets_out_of_order),
      cmocka_unit_test(test_st_metadata),
      cmocka_unit_test(test_st_format_shape),
      cmocka_unit_test(test_st_hostile_headers),
      cmocka_unit_test(test_st_length_prefix),
      cmocka_unit_test(test_st_truncations_and_mutations),
      cmocka_unit_test(test_weights_built_f32),
      cmocka_unit_test(test_weights_built_f16),
      cmocka_unit_test(test_weights_built_bf16),
      cmocka_unit_test(test_weights_built_mixed),
      cmocka_unit_test(test_weights_f16_exhaustive),
      cmocka_unit_test(test_fixture_f32),
      cmocka_unit_test(test_fixture_f16),
      cmocka_unit_test(test_fixture_bf16),
      cmocka_unit_test(test_fixture_custom_prefix),
      cmocka_unit_test(test_fixture_metadata),
      cmocka_unit_test(test_fixture_truncated),
      cmocka_unit_test(test_weights_missing_tensor),
      cmocka_unit_test(test_weights_not_finite),
      cmocka_unit_test(test_weights_missing_bias),
      cmocka_unit_test(test_weights_wrong_dtype),
      cmocka_unit_test(test_weights_wrong_shapes),
      cmocka_unit_test(test_weights_given_shape_mismatch),
      cmocka_unit_test(test_weights_inferred_out_of_range),
      cmocka_unit_test(test_weights_bad_container),
      cmocka_unit_test(test_weights_load_io_errors),
      cmocka_unit_test(test_weights_load_checks_before_reading),
      cmocka_unit_test(test_weights_load_not_a_file),
      cmocka_unit_test(test_weights_alloc_and_free),
      cmocka_unit_test(test_weights_check),
      cmocka_unit_test(test_weights_family_shapes),
      cmocka_unit_test(test_weights_family_metadata),
      cmocka_unit_test(test_weights_family_contradictions),
      cmocka_unit_test(test_weights_family_layer_structure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
