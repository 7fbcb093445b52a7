/* Samples drawn as a grid of grey images in a PNG file.  Internal. */
#ifndef FLOWGEN_PNG_GRID_H
#define FLOWGEN_PNG_GRID_H

#include "internal.h"

#include <stdint.h>

typedef struct fg_png_grid {
  const float *data;      /* count x dim, row-major */
  int64_t count;          /* samples to draw */
  int dim;                /* values per sample = image_height * image_width */
  int image_height, image_width;
  int columns;            /* tiles per row of the grid */
  int scale;              /* pixels per value, each way */
  float low, high;        /* values mapped to white and black */
} fg_png_grid;

/* The largest picture drawn: at most FG_PNG_MAX_SIDE pixels a side (what
 * common viewers open) and FG_PNG_MAX_PIXELS in all (256 MiB of grey). */
#define FG_PNG_MAX_SIDE 65535
#define FG_PNG_MAX_PIXELS ((int64_t)1 << 28)

/* Checks g's fields and computes the picture's size in 64 bits (INT64_MAX
 * where it would not fit); g->data is not read.  FLOWGEN_INVALID when g
 * cannot be drawn or the picture is over the limit (*width and *height are
 * set then too, 0 where g's fields are out of range). */
FG_HIDDEN flowgen_status fg_png_grid_size(const fg_png_grid *g, int64_t *width,
                                          int64_t *height, flowgen_error *err);
/* The PNG file's bytes, malloc()ed in *png (*size bytes). */
FG_HIDDEN flowgen_status fg_png_encode_grid(const fg_png_grid *g, unsigned char **png,
                                            size_t *size, flowgen_error *err);
/* Writes the grid to path (whole or not at all: fg_write_file_atomic). */
FG_HIDDEN flowgen_status fg_png_write_grid(const char *path, const fg_png_grid *grid,
                                           flowgen_error *err);

#endif
