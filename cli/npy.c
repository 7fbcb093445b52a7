/* .npy: "\x93NUMPY", major, minor, header length (2 bytes in 1.0, 4 in 2.0 and
 * 3.0), a Python dict literal {'descr', 'fortran_order', 'shape'}, the data. */
#include "npy.h"

#include "fileio.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define MAX_RANK 64      /* NumPy's own limit */
#define DESCR_MAX 32
#define SHAPE_TEXT_MAX 128
#define HEADER_ALIGN 64  /* NumPy pads magic + header to a multiple of this */

/* ---- the header dict ---------------------------------------------------- */

typedef struct npy_header {
  char descr[DESCR_MAX];
  bool fortran_order;
  uint64_t shape[MAX_RANK];
  size_t ndim;
  bool has_descr, has_fortran_order, has_shape;
} npy_header;

typedef struct cursor {
  const char *p, *end;
  const char *name;  /* the file, for messages */
  flowgen_error *err;
} cursor;

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' ||
                           *c->p == '\r'))
    ++c->p;
}

static bool accept(cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    ++c->p;
    return true;
  }
  return false;
}

static bool accept_word(cursor *c, const char *word) {
  skip_space(c);
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return false;
  c->p += n;
  return true;
}

static flowgen_status header_fail(const cursor *c, const char *what) {
  return fg_fail(c->err, FLOWGEN_INPUT, "%s: .npy header: %s", c->name, what);
}

/* A quoted string without escapes ('...' or "..."). */
static bool parse_string(cursor *c, char *out, size_t size) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char quote = *c->p++;
  size_t len = 0;
  while (c->p < c->end && *c->p != quote) {
    if (*c->p == '\\' || *c->p == '\n' || len + 1 >= size) return false;
    out[len++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  ++c->p;
  out[len] = '\0';
  return true;
}

static bool parse_uint(cursor *c, uint64_t *out) {
  skip_space(c);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
  uint64_t v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    unsigned digit = (unsigned)(*c->p++ - '0');
    if (v > ((uint64_t)INT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

/* A tuple of non-negative integers: (), (3,), (2, 3), (2, 3,). */
static flowgen_status parse_shape(cursor *c, npy_header *h) {
  if (!accept(c, '(')) return header_fail(c, "'shape' is not a tuple");
  h->ndim = 0;
  bool comma = true;
  while (!accept(c, ')')) {
    if (!comma) return header_fail(c, "'shape' is not a tuple of integers");
    if (h->ndim == MAX_RANK) return header_fail(c, "'shape' has too many dimensions");
    if (!parse_uint(c, &h->shape[h->ndim++]))
      return header_fail(c, "'shape' is not a tuple of non-negative integers "
                            "below 2^63");
    comma = accept(c, ',');
  }
  /* (3) is an int in Python, not a tuple. */
  if (h->ndim == 1 && !comma) return header_fail(c, "'shape' is not a tuple");
  return FLOWGEN_OK;
}

static flowgen_status parse_value(cursor *c, const char *key, npy_header *h) {
  if (strcmp(key, "descr") == 0 && !h->has_descr) {
    h->has_descr = true;
    if (!parse_string(c, h->descr, sizeof h->descr))
      return header_fail(c, "'descr' is not a plain dtype string (structured "
                            "dtypes are not supported)");
    return FLOWGEN_OK;
  }
  if (strcmp(key, "fortran_order") == 0 && !h->has_fortran_order) {
    h->has_fortran_order = true;
    if (accept_word(c, "True")) h->fortran_order = true;
    else if (!accept_word(c, "False"))
      return header_fail(c, "'fortran_order' is not True or False");
    return FLOWGEN_OK;
  }
  if (strcmp(key, "shape") == 0 && !h->has_shape) {
    h->has_shape = true;
    return parse_shape(c, h);
  }
  char what[160];
  snprintf(what, sizeof what, "unexpected or repeated key '%s'", key);
  return header_fail(c, what);
}

static flowgen_status parse_dict(cursor *c, npy_header *h) {
  if (!accept(c, '{')) return header_fail(c, "not a dict");
  bool comma = true;
  while (!accept(c, '}')) {
    char key[64];
    if (!comma) return header_fail(c, "not a dict (missing ',')");
    if (!parse_string(c, key, sizeof key)) return header_fail(c, "not a dict of string keys");
    if (!accept(c, ':')) return header_fail(c, "not a dict (missing ':')");
    flowgen_status s = parse_value(c, key, h);
    if (s) return s;
    comma = accept(c, ',');
  }
  skip_space(c);
  if (c->p != c->end) return header_fail(c, "characters after the dict");
  if (!h->has_descr || !h->has_fortran_order || !h->has_shape)
    return header_fail(c, "needs the keys 'descr', 'fortran_order' and 'shape'");
  return FLOWGEN_OK;
}

/* ---- the file ----------------------------------------------------------- */

static void format_shape(const npy_header *h, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "(");
  for (size_t i = 0; i < h->ndim && len < size; ++i)
    len += (size_t)snprintf(buf + len, size - len, "%s%llu", i ? ", " : "",
                            (unsigned long long)h->shape[i]);
  if (len < size) snprintf(buf + len, size - len, h->ndim == 1 ? ",)" : ")");
}

static uint32_t load_le(const unsigned char *p, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

/* Finds the header text after the magic, version and length. */
static flowgen_status locate_header(const unsigned char *b, size_t len,
                                    const char *name, size_t *start,
                                    size_t *header_len, flowgen_error *err) {
  if (len < MAGIC_LEN + 2 || memcmp(b, MAGIC, MAGIC_LEN) != 0)
    return fg_fail(err, FLOWGEN_INPUT, "%s: not a .npy file (bad magic)", name);
  unsigned major = b[MAGIC_LEN], minor = b[MAGIC_LEN + 1];
  if (minor != 0 || major < 1 || major > 3)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: unsupported .npy format version %u.%u (accepted: 1.0, "
                   "2.0, 3.0)",
                   name, major, minor);
  size_t length_bytes = major == 1 ? 2 : 4;
  *start = MAGIC_LEN + 2 + length_bytes;
  if (len < *start)
    return fg_fail(err, FLOWGEN_INPUT, "%s: truncated .npy header", name);
  *header_len = load_le(b + MAGIC_LEN + 2, length_bytes);
  if (*header_len > len - *start)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: .npy header length %zu runs past the end of the "
                   "%zu-byte file",
                   name, *header_len, len);
  return FLOWGEN_OK;
}

static flowgen_status check_dtype(const npy_header *h, const char *name,
                                  size_t *item_size, flowgen_error *err) {
  if (strcmp(h->descr, "<f4") == 0) *item_size = 4;
  else if (strcmp(h->descr, "<f8") == 0) *item_size = 8;
  else
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: dtype '%s' is not supported (accepted: '<f4' float32, "
                   "'<f8' float64)",
                   name, h->descr);
  if (h->fortran_order)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: fortran_order True is not supported (save a C-order "
                   "array, e.g. numpy.ascontiguousarray)",
                   name);
  return FLOWGEN_OK;
}

/* Rank 1 or 2, and a byte count that fits. */
static flowgen_status check_shape(const npy_header *h, const char *name,
                                  size_t item_size, size_t *count,
                                  flowgen_error *err) {
  char shape[SHAPE_TEXT_MAX];
  format_shape(h, shape, sizeof shape);
  if (h->ndim != 1 && h->ndim != 2)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: shape %s has %zu dimensions (accepted: 1 or 2)", name,
                   shape, h->ndim);
  uint64_t n = h->shape[0];
  if (h->ndim == 2 && n != 0 && h->shape[1] > UINT64_MAX / n)
    return fg_fail(err, FLOWGEN_INPUT, "%s: shape %s overflows", name, shape);
  if (h->ndim == 2) n *= h->shape[1];
  if (n > SIZE_MAX / item_size || n > (uint64_t)INT64_MAX / item_size)
    return fg_fail(err, FLOWGEN_INPUT, "%s: shape %s overflows", name, shape);
  *count = (size_t)n;
  return FLOWGEN_OK;
}

static flowgen_status check_data_size(const npy_header *h, const char *name,
                                      size_t have, size_t need,
                                      flowgen_error *err) {
  char shape[SHAPE_TEXT_MAX];
  format_shape(h, shape, sizeof shape);
  if (have < need)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: data truncated: %zu bytes, but shape %s of '%s' needs %zu",
                   name, have, shape, h->descr, need);
  if (have > need)
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: %zu trailing bytes after the data of shape %s", name,
                   have - need, shape);
  return FLOWGEN_OK;
}

static float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static float load_f8_as_float(const unsigned char *p) {
  uint64_t bits = (uint64_t)load_le(p + 4, 4) << 32 | load_le(p, 4);
  double d;
  memcpy(&d, &bits, sizeof d);
  return (float)d;
}

static void decode(const unsigned char *p, size_t count, size_t item_size,
                   float *out) {
  for (size_t i = 0; i < count; ++i)
    out[i] = item_size == 4 ? float_from_bits(load_le(p + 4 * i, 4))
                            : load_f8_as_float(p + 8 * i);
}

flowgen_status fg_npy_parse(const void *buf, size_t len, const char *name,
                            float **data, int64_t *rows, int64_t *cols,
                            flowgen_error *err) {
  *data = NULL;
  if (!name) name = "<memory>";
  const unsigned char *b = buf;
  size_t start = 0, header_len = 0, item_size = 0, count = 0;
  flowgen_status s = locate_header(b, len, name, &start, &header_len, err);
  if (s) return s;
  npy_header h = {0};
  cursor c = {(const char *)b + start, (const char *)b + start + header_len, name, err};
  s = parse_dict(&c, &h);
  if (!s) s = check_dtype(&h, name, &item_size, err);
  if (!s) s = check_shape(&h, name, item_size, &count, err);
  size_t data_start = start + header_len;
  if (!s) s = check_data_size(&h, name, len - data_start, count * item_size, err);
  if (s) return s;
  *data = malloc(count ? count * sizeof(float) : 1);
  if (!*data) return fg_fail(err, FLOWGEN_NOMEM, "%s: out of memory", name);
  decode(b + data_start, count, item_size, *data);
  *rows = h.ndim == 1 ? 1 : (int64_t)h.shape[0];
  *cols = (int64_t)h.shape[h.ndim - 1];
  return FLOWGEN_OK;
}

/* ---- reading a file ----------------------------------------------------- */

flowgen_status fg_npy_read(const char *path, float **data, int64_t *rows,
                           int64_t *cols, flowgen_error *err) {
  *data = NULL;
  unsigned char *image = NULL;
  size_t size = 0;
  flowgen_status s = fg_read_file(path, &image, &size, err);
  if (s) return s;
  s = fg_npy_parse(image, size, path, data, rows, cols, err);
  free(image);
  return s;
}

/* ---- writing ------------------------------------------------------------ */

/* Magic, version 1.0, length, and the dict padded with spaces and ended by
 * '\n' so that the data starts on a HEADER_ALIGN boundary, as NumPy writes. */
static size_t format_header(unsigned char *out, size_t size, int64_t rows,
                            int64_t cols) {
  char dict[160];
  int len = snprintf(dict, sizeof dict,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     (long long)rows, (long long)cols);
  size_t prefix = MAGIC_LEN + 4;
  size_t total = (prefix + (size_t)len + 1 + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
  if (total > size) return 0;
  size_t header_len = total - prefix;
  memcpy(out, MAGIC, MAGIC_LEN);
  out[6] = 1;
  out[7] = 0;
  out[8] = (unsigned char)(header_len & 0xff);
  out[9] = (unsigned char)(header_len >> 8);
  memset(out + prefix, ' ', header_len);
  memcpy(out + prefix, dict, (size_t)len);
  out[total - 1] = '\n';
  return total;
}

static void encode(const float *data, size_t count, unsigned char *out) {
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    memcpy(&bits, &data[i], sizeof bits);
    for (int k = 0; k < 4; ++k) out[4 * i + k] = (unsigned char)(bits >> (8 * k));
  }
}

static flowgen_status check_write_shape(int64_t rows, int64_t cols,
                                        flowgen_error *err) {
  if (rows < 0 || cols < 0)
    return fg_fail(err, FLOWGEN_INVALID, "negative shape (%lld, %lld)",
                   (long long)rows, (long long)cols);
  uint64_t limit = (SIZE_MAX < INT64_MAX ? SIZE_MAX : INT64_MAX) / 2;
  if (cols != 0 && (uint64_t)rows > limit / sizeof(float) / (uint64_t)cols)
    return fg_fail(err, FLOWGEN_INVALID, "shape (%lld, %lld) overflows",
                   (long long)rows, (long long)cols);
  return FLOWGEN_OK;
}

flowgen_status fg_npy_format(const float *data, int64_t rows, int64_t cols,
                             unsigned char **image, size_t *size, flowgen_error *err) {
  flowgen_status s = check_write_shape(rows, cols, err);
  if (s) return s;
  unsigned char header[256];
  size_t header_size = format_header(header, sizeof header, rows, cols);
  size_t count = (size_t)rows * (size_t)cols;
  unsigned char *out = malloc(header_size + 4 * count);
  if (!out) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for %lld x %lld values",
                           (long long)rows, (long long)cols);
  memcpy(out, header, header_size);
  encode(data, count, out + header_size);
  *image = out;
  *size = header_size + 4 * count;
  return FLOWGEN_OK;
}

flowgen_status fg_npy_write(const char *path, const float *data, int64_t rows,
                            int64_t cols, flowgen_error *err) {
  unsigned char *image = NULL;
  size_t size = 0;
  flowgen_status s = fg_npy_format(data, rows, cols, &image, &size, err);
  if (s == FLOWGEN_NOMEM) fg_error_prefix(err, "%s", path);
  if (s) return s;
  s = fg_write_file_atomic(path, image, size, err);
  free(image);
  return s;
}
