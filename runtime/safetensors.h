/* A strict safetensors parser, over an image in memory or a file on disk.
 * Internal.
 *
 * It accepts what the reference implementation (huggingface safetensors)
 * accepts and nothing more: the header's tensors, sorted by offset, tile the
 * data area exactly.  Every refusal is FLOWGEN_WEIGHTS with a message naming
 * the file, the tensor and the field.  A file on disk is judged by its
 * header and size before any of its data is read, and then only the
 * tensors asked for are read. */
#ifndef FLOWGEN_SAFETENSORS_H
#define FLOWGEN_SAFETENSORS_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* The reference's cap on the JSON header. */
#define FG_ST_MAX_HEADER_SIZE 100000000u

typedef enum fg_st_dtype {
  FG_ST_BOOL,
  FG_ST_U8,
  FG_ST_I8,
  FG_ST_F8_E5M2,
  FG_ST_F8_E4M3,
  FG_ST_I16,
  FG_ST_U16,
  FG_ST_F16,
  FG_ST_BF16,
  FG_ST_I32,
  FG_ST_U32,
  FG_ST_F32,
  FG_ST_F64,
  FG_ST_I64,
  FG_ST_U64,
  FG_ST_DTYPE_COUNT
} fg_st_dtype;

typedef struct fg_st_tensor {
  char *name;
  fg_st_dtype dtype;
  size_t ndim;
  uint64_t *shape;            /* ndim entries (NULL for a scalar) */
  uint64_t count;             /* product of shape */
  const unsigned char *data;  /* inside the parsed image, may be unaligned;
                                 NULL for a file (fg_st_read_data) */
  size_t size;                /* bytes */
  size_t offset;              /* from the start of the data area */
} fg_st_tensor;

typedef struct fg_st_metadata {
  char *key;
  char *value;
} fg_st_metadata;

typedef struct fg_st_file {
  fg_st_tensor *tensors;  /* sorted by offset */
  size_t tensor_count;
  fg_st_metadata *metadata;  /* the __metadata__ entries, in file order */
  size_t metadata_count;
  size_t header_size;     /* bytes of JSON */
  size_t data_size;       /* bytes of the data area */
  int fd;                 /* the open file (fg_st_open), else -1 */
  const char *path;       /* that file, for messages */
} fg_st_file;

/* Parses image (size bytes; it must outlive *out, whose tensors point into
 * it).  name is the file name used in messages. */
FG_HIDDEN flowgen_status fg_st_parse(const void *image, size_t size,
                                     const char *name, fg_st_file **out,
                                     flowgen_error *err);
/* Opens the file at path and parses its header: the length, the JSON and
 * the data area it describes against the file's size, reading nothing
 * else.  The tensors' data is NULL; fg_st_read_data reads their bytes.
 * The file stays open until fg_st_free; path must outlive *out.  What is
 * not a regular file is refused (FLOWGEN_IO) without waiting on it. */
FG_HIDDEN flowgen_status fg_st_open(const char *path, fg_st_file **out,
                                    flowgen_error *err);
/* Copies size bytes of t's data, from byte offset on, into buf: from the
 * image, or read from the file (FLOWGEN_IO if that fails or comes short). */
FG_HIDDEN flowgen_status fg_st_read_data(const fg_st_file *file,
                                         const fg_st_tensor *t, size_t offset,
                                         void *buf, size_t size,
                                         flowgen_error *err);
/* Closes the file, if any.  NULL is fine. */
FG_HIDDEN void fg_st_free(fg_st_file *file);

/* The tensor called name, or NULL. */
FG_HIDDEN const fg_st_tensor *fg_st_find(const fg_st_file *file,
                                         const char *name);
/* The __metadata__ value of key, or NULL. */
FG_HIDDEN const char *fg_st_metadata_get(const fg_st_file *file,
                                         const char *key);

/* "F32", "BF16", ...; "?" for a value out of range. */
FG_HIDDEN const char *fg_st_dtype_name(fg_st_dtype dtype);
/* Bytes per element (0 for a value out of range). */
FG_HIDDEN size_t fg_st_dtype_size(fg_st_dtype dtype);

/* Writes "[4, 5]" (truncated with "...]" when it does not fit). */
FG_HIDDEN void fg_st_format_shape(const uint64_t *shape, size_t ndim,
                                  char *buf, size_t size);

#endif
