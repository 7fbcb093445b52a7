/* NumPy .npy arrays of float32: read (format 1.0, 2.0, 3.0; '<f4', or '<f8'
 * converted to float32) and write (format 1.0, '<f4').  Internal.
 *
 * Only C-order arrays of rank 1 (read as one row) or 2.  A refused file is
 * FLOWGEN_INPUT with a message naming it and what is wrong. */
#ifndef FLOWGEN_NPY_H
#define FLOWGEN_NPY_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* Reads path into a malloc()ed rows x cols array (never NULL on success,
 * even when empty).  I/O failures are FLOWGEN_IO. */
FG_HIDDEN flowgen_status fg_npy_read(const char *path, float **data,
                                     int64_t *rows, int64_t *cols,
                                     flowgen_error *err);
/* Same, from an image of len bytes in memory; name is used in messages. */
FG_HIDDEN flowgen_status fg_npy_parse(const void *buf, size_t len,
                                      const char *name, float **data,
                                      int64_t *rows, int64_t *cols,
                                      flowgen_error *err);
/* The .npy file of rows x cols floats (row-major), malloc()ed in *image
 * (*size bytes). */
FG_HIDDEN flowgen_status fg_npy_format(const float *data, int64_t rows, int64_t cols,
                                       unsigned char **image, size_t *size,
                                       flowgen_error *err);
/* Writes rows x cols floats (row-major) to path atomically
 * (fg_write_file_atomic).  On failure nothing is left behind and an
 * existing file at path is untouched (FLOWGEN_IO naming path). */
FG_HIDDEN flowgen_status fg_npy_write(const char *path, const float *data,
                                      int64_t rows, int64_t cols,
                                      flowgen_error *err);

#endif
