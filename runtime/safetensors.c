/* safetensors: 8-byte little-endian header length, a JSON header, the data.
 * The checks mirror huggingface safetensors' read_metadata / validate. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LENGTH_BYTES 8
#define SHAPE_TEXT_MAX 128
#define METADATA_KEY "__metadata__"

static const struct {
  const char *name;
  size_t size;
} dtype_table[FG_ST_DTYPE_COUNT] = {
    [FG_ST_BOOL] = {"BOOL", 1},       [FG_ST_U8] = {"U8", 1},
    [FG_ST_I8] = {"I8", 1},           [FG_ST_F8_E5M2] = {"F8_E5M2", 1},
    [FG_ST_F8_E4M3] = {"F8_E4M3", 1}, [FG_ST_I16] = {"I16", 2},
    [FG_ST_U16] = {"U16", 2},         [FG_ST_F16] = {"F16", 2},
    [FG_ST_BF16] = {"BF16", 2},       [FG_ST_I32] = {"I32", 4},
    [FG_ST_U32] = {"U32", 4},         [FG_ST_F32] = {"F32", 4},
    [FG_ST_F64] = {"F64", 8},         [FG_ST_I64] = {"I64", 8},
    [FG_ST_U64] = {"U64", 8},
};

const char *fg_st_dtype_name(fg_st_dtype dtype) {
  return (unsigned)dtype < FG_ST_DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

size_t fg_st_dtype_size(fg_st_dtype dtype) {
  return (unsigned)dtype < FG_ST_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

static bool dtype_from_name(const char *name, fg_st_dtype *out) {
  for (int i = 0; i < FG_ST_DTYPE_COUNT; ++i) {
    if (strcmp(name, dtype_table[i].name) == 0) {
      *out = (fg_st_dtype)i;
      return true;
    }
  }
  return false;
}

void fg_st_format_shape(const uint64_t *shape, size_t ndim, char *buf,
                        size_t size) {
  if (size == 0) return;
  size_t len = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < ndim && len < size; ++i)
    len += (size_t)snprintf(buf + len, size - len, "%s%llu", i ? ", " : "",
                            (unsigned long long)shape[i]);
  if (len < size) len += (size_t)snprintf(buf + len, size - len, "]");
  if (len >= size && size >= 5) memcpy(buf + size - 5, "...]", 5);
}

static bool checked_mul(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

/* ---- the parse ---------------------------------------------------------- */

typedef struct parser {
  const char *name;               /* the file, for messages */
  flowgen_error *err;
  const unsigned char *data;      /* the data area; NULL: still on disk */
  size_t data_size;
  fg_st_file *file;
} parser;

static flowgen_status tensor_fail(const parser *p, const char *tensor,
                                  const char *fmt, ...) FG_PRINTF(3, 4);

static flowgen_status tensor_fail(const parser *p, const char *tensor,
                                  const char *fmt, ...) {
  char detail[FLOWGEN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return fg_fail(p->err, FLOWGEN_WEIGHTS, "%s: tensor '%s': %s", p->name,
                 tensor, detail);
}

static bool json_to_u64(const json_t *value, uint64_t *out) {
  if (!json_is_integer(value) || json_integer_value(value) < 0) return false;
  *out = (uint64_t)json_integer_value(value);
  return true;
}

static flowgen_status parse_dtype(const parser *p, fg_st_tensor *t,
                                  const json_t *value) {
  if (!json_is_string(value))
    return tensor_fail(p, t->name, "dtype is not a string");
  if (!dtype_from_name(json_string_value(value), &t->dtype))
    return tensor_fail(p, t->name, "dtype '%s' is not a safetensors dtype",
                       json_string_value(value));
  return FLOWGEN_OK;
}

static flowgen_status parse_shape(const parser *p, fg_st_tensor *t,
                                  const json_t *value) {
  if (!json_is_array(value))
    return tensor_fail(p, t->name, "shape is not an array");
  t->ndim = json_array_size(value);
  if (t->ndim == 0) return FLOWGEN_OK;
  t->shape = malloc(t->ndim * sizeof *t->shape);
  if (!t->shape) return fg_fail(p->err, FLOWGEN_NOMEM, "%s: out of memory", p->name);
  for (size_t i = 0; i < t->ndim; ++i) {
    if (!json_to_u64(json_array_get(value, i), &t->shape[i]))
      return tensor_fail(p, t->name,
                         "shape[%zu] is not a non-negative integer", i);
  }
  return FLOWGEN_OK;
}

static flowgen_status parse_offsets(const parser *p, fg_st_tensor *t,
                                    const json_t *value, uint64_t range[2]) {
  if (!json_is_array(value) || json_array_size(value) != 2)
    return tensor_fail(p, t->name, "data_offsets is not an array of 2 integers");
  for (size_t i = 0; i < 2; ++i) {
    if (!json_to_u64(json_array_get(value, i), &range[i]))
      return tensor_fail(p, t->name,
                         "data_offsets[%zu] is not a non-negative integer", i);
  }
  if (range[1] < range[0])
    return tensor_fail(p, t->name, "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)range[0], (unsigned long long)range[1]);
  return FLOWGEN_OK;
}

/* Exactly the three fields, each present once (duplicates are already
 * refused by the JSON parser). */
static flowgen_status check_fields(const parser *p, const fg_st_tensor *t,
                                   const json_t *entry) {
  static const char *const fields[] = {"dtype", "shape", "data_offsets"};
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)entry, key, value) {
    (void)value;
    if (strcmp(key, fields[0]) && strcmp(key, fields[1]) && strcmp(key, fields[2]))
      return tensor_fail(p, t->name, "unknown field '%s'", key);
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!json_object_get(entry, fields[i]))
      return tensor_fail(p, t->name, "missing field '%s'", fields[i]);
  }
  return FLOWGEN_OK;
}

/* shape x dtype size must be the byte range, inside the data area. */
static flowgen_status check_extent(const parser *p, fg_st_tensor *t,
                                   const uint64_t range[2]) {
  char shape[SHAPE_TEXT_MAX];
  fg_st_format_shape(t->shape, t->ndim, shape, sizeof shape);
  t->count = 1;
  for (size_t i = 0; i < t->ndim; ++i) {
    if (!checked_mul(t->count, t->shape[i], &t->count))
      return tensor_fail(p, t->name, "shape %s overflows the element count", shape);
  }
  uint64_t bytes;
  if (!checked_mul(t->count, fg_st_dtype_size(t->dtype), &bytes))
    return tensor_fail(p, t->name, "shape %s of %s overflows the byte count",
                       shape, fg_st_dtype_name(t->dtype));
  uint64_t held = range[1] - range[0];
  if (held != bytes)
    return tensor_fail(p, t->name,
                       "data_offsets [%llu, %llu] hold %llu bytes but shape %s "
                       "of %s needs %llu",
                       (unsigned long long)range[0], (unsigned long long)range[1],
                       (unsigned long long)held, shape,
                       fg_st_dtype_name(t->dtype), (unsigned long long)bytes);
  if (range[1] > p->data_size)
    return tensor_fail(p, t->name,
                       "data_offsets [%llu, %llu] end past the data area of %zu bytes",
                       (unsigned long long)range[0], (unsigned long long)range[1],
                       p->data_size);
  t->offset = (size_t)range[0];
  t->size = (size_t)held;
  t->data = p->data ? p->data + t->offset : NULL;
  return FLOWGEN_OK;
}

static flowgen_status parse_tensor(const parser *p, fg_st_tensor *t,
                                   const json_t *entry) {
  if (!json_is_object(entry))
    return tensor_fail(p, t->name, "entry is not an object");
  uint64_t range[2];
  flowgen_status s = check_fields(p, t, entry);
  if (!s) s = parse_dtype(p, t, json_object_get(entry, "dtype"));
  if (!s) s = parse_shape(p, t, json_object_get(entry, "shape"));
  if (!s) s = parse_offsets(p, t, json_object_get(entry, "data_offsets"), range);
  if (!s) s = check_extent(p, t, range);
  return s;
}

static flowgen_status parse_metadata(const parser *p, const json_t *object) {
  if (!json_is_object(object))
    return fg_fail(p->err, FLOWGEN_WEIGHTS, "%s: %s is not an object", p->name,
                   METADATA_KEY);
  fg_st_file *f = p->file;
  f->metadata = calloc(json_object_size(object) + 1, sizeof *f->metadata);
  if (!f->metadata) return fg_fail(p->err, FLOWGEN_NOMEM, "%s: out of memory", p->name);
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)object, key, value) {
    if (!json_is_string(value))
      return fg_fail(p->err, FLOWGEN_WEIGHTS,
                     "%s: %s: value of '%s' is not a string", p->name,
                     METADATA_KEY, key);
    fg_st_metadata *m = &f->metadata[f->metadata_count++];
    m->key = strdup(key);
    m->value = strdup(json_string_value(value));
    if (!m->key || !m->value)
      return fg_fail(p->err, FLOWGEN_NOMEM, "%s: out of memory", p->name);
  }
  return FLOWGEN_OK;
}

static flowgen_status parse_entries(parser *p, const json_t *root) {
  fg_st_file *f = p->file;
  f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
  if (!f->tensors) return fg_fail(p->err, FLOWGEN_NOMEM, "%s: out of memory", p->name);
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)root, key, value) {
    flowgen_status s;
    if (strcmp(key, METADATA_KEY) == 0) {
      s = parse_metadata(p, value);
    } else {
      fg_st_tensor *t = &f->tensors[f->tensor_count++];
      t->name = strdup(key);
      s = t->name ? parse_tensor(p, t, value)
                  : fg_fail(p->err, FLOWGEN_NOMEM, "%s: out of memory", p->name);
    }
    if (s) return s;
  }
  return FLOWGEN_OK;
}

/* ---- layout of the data area -------------------------------------------- */

static int compare_offsets(const void *a, const void *b) {
  const fg_st_tensor *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Sorted by offset, the tensors must tile the data area: no gap, no
 * overlap, nothing after the last one. */
static flowgen_status check_layout(const parser *p) {
  fg_st_file *f = p->file;
  qsort(f->tensors, f->tensor_count, sizeof *f->tensors, compare_offsets);
  size_t covered = 0;
  for (size_t i = 0; i < f->tensor_count; ++i) {
    const fg_st_tensor *t = &f->tensors[i];
    if (t->offset > covered)
      return tensor_fail(p, t->name,
                         "data_offsets [%zu, %zu] leave bytes [%zu, %zu) of the "
                         "data area unused",
                         t->offset, t->offset + t->size, covered, t->offset);
    if (t->offset < covered)
      return tensor_fail(p, t->name,
                         "data_offsets [%zu, %zu] overlap tensor '%s' [%zu, %zu]",
                         t->offset, t->offset + t->size, f->tensors[i - 1].name,
                         f->tensors[i - 1].offset,
                         f->tensors[i - 1].offset + f->tensors[i - 1].size);
    covered = t->offset + t->size;
  }
  if (covered != p->data_size)
    return fg_fail(p->err, FLOWGEN_WEIGHTS,
                   "%s: %zu trailing bytes after the last tensor (the tensors "
                   "cover %zu of the %zu-byte data area)",
                   p->name, p->data_size - covered, covered, p->data_size);
  return FLOWGEN_OK;
}

/* ---- header ------------------------------------------------------------- */

static uint64_t read_u64_le(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = LENGTH_BYTES - 1; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

static flowgen_status locate_header(const unsigned char *image, size_t size,
                                    const char *name, size_t *header_size,
                                    flowgen_error *err) {
  if (size < LENGTH_BYTES)
    return fg_fail(err, FLOWGEN_WEIGHTS,
                   "%s: %zu bytes is too short for a safetensors file (the "
                   "header length alone takes 8)",
                   name, size);
  uint64_t n = read_u64_le(image);
  if (n > FG_ST_MAX_HEADER_SIZE)
    return fg_fail(err, FLOWGEN_WEIGHTS,
                   "%s: header length %llu exceeds the limit of %u bytes", name,
                   (unsigned long long)n, FG_ST_MAX_HEADER_SIZE);
  if (n > size - LENGTH_BYTES)
    return fg_fail(err, FLOWGEN_WEIGHTS,
                   "%s: header length %llu runs past the end of the %zu-byte file",
                   name, (unsigned long long)n, size);
  *header_size = (size_t)n;
  return FLOWGEN_OK;
}

/* ---- reading a file ----------------------------------------------------- */

/* size bytes at offset; a file that ends sooner is an I/O error (it was
 * cut while read: its size was checked against the header before). */
static flowgen_status read_at(int fd, uint64_t offset, void *buf, size_t size,
                              const char *path, flowgen_error *err) {
  unsigned char *p = buf;
  while (size > 0) {
    ssize_t n = pread(fd, p, size, (off_t)offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fg_fail(err, FLOWGEN_IO, "%s: %s", path,
                     n < 0 ? strerror(errno) : "the file got shorter while it was read");
    p += n;
    offset += (uint64_t)n;
    size -= (size_t)n;
  }
  return FLOWGEN_OK;
}

/* ---- JSON under memory pressure ----------------------------------------- */

/* jansson (2.14 and older) does not check one allocation: the growth of its
 * lexer's token buffer (akheron/jansson#362).  When that fails the token is
 * cut short and the lexer reads and writes past its buffer, or fails an
 * assert; other failed allocations come back as syntax errors, or as no
 * error at all.  So during a parse jansson's allocations go through a hook
 * (installed once, around whatever allocator jansson had): a failed one is
 * served from a reserve taken before the parse (large enough for the
 * token buffer: twice the header) and marks the parse, the input is fed one
 * byte at a time and ends at once after the mark (no token is saved after
 * it), and a marked parse is refused as out of memory, whatever it gave. */
typedef struct json_guard {
  const unsigned char *text;  /* the header in memory, or NULL: */
  int fd;                     /* read from the file after the length, */
  const char *path;           /* a chunk at a time */
  flowgen_error *io_err;      /* set where that read fails */
  unsigned char chunk[4096];
  size_t chunk_start, chunk_size;
  size_t size, fed;
  unsigned char *reserve;
  size_t reserve_size, reserve_used;
  bool out_of_memory, io_failed;
} json_guard;

static json_malloc_t json_next_malloc;
static json_free_t json_next_free;
static _Thread_local json_guard *json_parsing;
static pthread_once_t json_hook_once = PTHREAD_ONCE_INIT;

static void *json_malloc_hook(size_t size) {
  void *p = json_next_malloc(size);
  json_guard *g = json_parsing;
  if (p || !g) return p;
  g->out_of_memory = true;
  size_t rounded = (size + 15) & ~(size_t)15;
  if (rounded < size || rounded > g->reserve_size - g->reserve_used) return NULL;
  p = g->reserve + g->reserve_used;
  g->reserve_used += rounded;
  return p;
}

static void json_free_hook(void *p) {
  json_guard *g = json_parsing;
  if (g && (unsigned char *)p >= g->reserve &&
      (unsigned char *)p < g->reserve + g->reserve_size)
    return; /* the reserve goes as a whole */
  json_next_free(p);
}

static void install_json_hook(void) {
  json_get_alloc_funcs(&json_next_malloc, &json_next_free);
  json_set_alloc_funcs(json_malloc_hook, json_free_hook);
}

/* A header read from a file comes a chunk at a time, so that one which is
 * not JSON is refused at its first bytes, however long it claims to be. */
static size_t json_feed(void *buffer, size_t size, void *data) {
  json_guard *g = data;
  if (g->out_of_memory || g->io_failed || g->fed == g->size || size == 0) return 0;
  if (g->text) {
    *(unsigned char *)buffer = g->text[g->fed++];
    return 1;
  }
  if (g->fed == g->chunk_start + g->chunk_size) {
    size_t n = g->size - g->fed < sizeof g->chunk ? g->size - g->fed : sizeof g->chunk;
    if (read_at(g->fd, LENGTH_BYTES + (uint64_t)g->fed, g->chunk, n, g->path, g->io_err)) {
      g->io_failed = true;
      return 0;
    }
    g->chunk_start = g->fed;
    g->chunk_size = n;
  }
  *(unsigned char *)buffer = g->chunk[g->fed++ - g->chunk_start];
  return 1;
}

/* The header: text in memory, or (text NULL) in the file fd. */
static flowgen_status load_json(const unsigned char *text, int fd, size_t size,
                                const char *name, json_t **root,
                                flowgen_error *err) {
  *root = NULL;
  json_guard guard = {.text = text, .fd = fd, .path = name, .io_err = err, .size = size,
                      .reserve_size = 2 * size + 4096};
  if (!(guard.reserve = malloc(guard.reserve_size)))
    return fg_fail(err, FLOWGEN_NOMEM, "%s: out of memory reading the header", name);
  pthread_once(&json_hook_once, install_json_hook);
  json_error_t jerr;
  json_parsing = &guard;
  *root = json_load_callback(json_feed, &guard, JSON_REJECT_DUPLICATES, &jerr);
  if (guard.out_of_memory) {
    json_decref(*root);
    *root = NULL;
  }
  json_parsing = NULL;
  free(guard.reserve);
  if (guard.io_failed) {
    json_decref(*root);
    *root = NULL;
    return FLOWGEN_IO; /* err says what */
  }
  if (guard.out_of_memory || (!*root && json_error_code(&jerr) == json_error_out_of_memory))
    return fg_fail(err, FLOWGEN_NOMEM, "%s: out of memory reading the header", name);
  if (!*root)
    return fg_fail(err, FLOWGEN_WEIGHTS,
                   "%s: header is not valid JSON: %s (line %d, column %d)", name,
                   jerr.text, jerr.line, jerr.column);
  if (!json_is_object(*root)) {
    json_decref(*root);
    *root = NULL;
    return fg_fail(err, FLOWGEN_WEIGHTS, "%s: header is not a JSON object", name);
  }
  return FLOWGEN_OK;
}

/* The JSON header of header_size bytes (at json, or in the file fd), over
 * a data area of data_size bytes at data (NULL: not read). */
static flowgen_status parse_header(const unsigned char *json, int fd, size_t header_size,
                                   const unsigned char *data, size_t data_size,
                                   const char *name, fg_st_file **out,
                                   flowgen_error *err) {
  *out = NULL;
  json_t *root = NULL;
  flowgen_status s = load_json(json, fd, header_size, name, &root, err);
  if (s) return s;
  fg_st_file *file = calloc(1, sizeof *file);
  if (!file) {
    json_decref(root);
    return fg_fail(err, FLOWGEN_NOMEM, "%s: out of memory", name);
  }
  file->fd = -1;
  file->header_size = header_size;
  file->data_size = data_size;
  parser p = {name, err, data, data_size, file};
  s = parse_entries(&p, root);
  if (!s) s = check_layout(&p);
  json_decref(root);
  if (s) {
    fg_st_free(file);
    return s;
  }
  *out = file;
  return FLOWGEN_OK;
}

flowgen_status fg_st_parse(const void *image, size_t size, const char *name,
                           fg_st_file **out, flowgen_error *err) {
  *out = NULL;
  if (!name) name = "<memory>";
  const unsigned char *bytes = image;
  size_t header_size = 0;
  flowgen_status s = locate_header(bytes, size, name, &header_size, err);
  if (s) return s;
  return parse_header(bytes + LENGTH_BYTES, -1, header_size,
                      bytes + LENGTH_BYTES + header_size, size - LENGTH_BYTES - header_size,
                      name, out, err);
}

/* ---- a file on disk ----------------------------------------------------- */

/* O_NONBLOCK: opening a FIFO does not wait for a writer; it is refused
 * with anything else that is not a regular file (a regular file is then
 * read blocking, as usual). */
static flowgen_status open_regular(const char *path, int *fd, uint64_t *size,
                                   flowgen_error *err) {
  *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (*fd < 0) return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(errno));
  struct stat st;
  int stat_errno = fstat(*fd, &st) != 0 ? errno : 0;
  if (!stat_errno && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= SIZE_MAX) {
    int flags = fcntl(*fd, F_GETFL);
    if (flags != -1) fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return FLOWGEN_OK;
  }
  close(*fd);
  *fd = -1;
  return fg_fail(err, FLOWGEN_IO, "%s: %s", path,
                 stat_errno ? strerror(stat_errno)
                 : S_ISDIR(st.st_mode) ? strerror(EISDIR)
                 : S_ISREG(st.st_mode) ? "too large for this machine's address space"
                                       : "not a regular file");
}

flowgen_status fg_st_open(const char *path, fg_st_file **out, flowgen_error *err) {
  *out = NULL;
  int fd = -1;
  uint64_t size = 0;
  flowgen_status s = open_regular(path, &fd, &size, err);
  if (s) return s;
  unsigned char length[LENGTH_BYTES];
  size_t header_size = 0;
  if (size >= LENGTH_BYTES) s = read_at(fd, 0, length, LENGTH_BYTES, path, err);
  /* locate_header looks at the length's 8 bytes and the file's size only. */
  if (!s) s = locate_header(length, (size_t)size, path, &header_size, err);
  if (!s)
    s = parse_header(NULL, fd, header_size, NULL, (size_t)size - LENGTH_BYTES - header_size,
                     path, out, err);
  if (s) {
    close(fd);
    return s;
  }
  (*out)->fd = fd;
  (*out)->path = path;
  return FLOWGEN_OK;
}

flowgen_status fg_st_read_data(const fg_st_file *file, const fg_st_tensor *t,
                               size_t offset, void *buf, size_t size,
                               flowgen_error *err) {
  if (t->data) {
    memcpy(buf, t->data + offset, size);
    return FLOWGEN_OK;
  }
  return read_at(file->fd, LENGTH_BYTES + file->header_size + t->offset + offset, buf,
                 size, file->path, err);
}

void fg_st_free(fg_st_file *file) {
  if (!file) return;
  if (file->fd >= 0) close(file->fd);
  for (size_t i = 0; i < file->tensor_count; ++i) {
    free(file->tensors[i].name);
    free(file->tensors[i].shape);
  }
  for (size_t i = 0; i < file->metadata_count; ++i) {
    free(file->metadata[i].key);
    free(file->metadata[i].value);
  }
  free(file->tensors);
  free(file->metadata);
  free(file);
}

const fg_st_tensor *fg_st_find(const fg_st_file *file, const char *name) {
  for (size_t i = 0; i < file->tensor_count; ++i)
    if (strcmp(file->tensors[i].name, name) == 0) return &file->tensors[i];
  return NULL;
}

const char *fg_st_metadata_get(const fg_st_file *file, const char *key) {
  for (size_t i = 0; i < file->metadata_count; ++i)
    if (strcmp(file->metadata[i].key, key) == 0) return file->metadata[i].value;
  return NULL;
}
