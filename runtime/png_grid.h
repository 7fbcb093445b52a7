/* Samples drawn as a grid of grey images in a PNG file.  Internal. */
#ifndef FLOWGEN_PNG_GRID_H
#define FLOWGEN_PNG_GRID_H

#include "internal.h"

typedef struct fg_png_grid {
  const float *data;      /* count x dim, row-major */
  int64_t count;          /* samples to draw */
  int dim;                /* values per sample = image_height * image_width */
  int image_height, image_width;
  int columns;            /* tiles per row of the grid */
  int scale;              /* pixels per value, each way */
  float low, high;        /* values mapped to white and black */
} fg_png_grid;

/* Writes the grid to path (whole or not at all). */
FG_HIDDEN flowgen_status fg_png_write_grid(const char *path, const fg_png_grid *grid,
                                           flowgen_error *err);

#endif
