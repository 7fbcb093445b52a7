/* Samples as a PNG picture: each row of a batch x D array shown as an
 * image_height x image_width grey tile, tiles in a grid (libpng). */
#include "png_grid.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_buffer {
  unsigned char *data;
  size_t size, capacity;
  bool failed;
} png_buffer;

static void append(png_structp png, png_bytep bytes, png_size_t n) {
  png_buffer *b = png_get_io_ptr(png);
  if (b->failed) return;
  if (b->size + n > b->capacity) {
    size_t cap = b->capacity ? 2 * b->capacity : 1 << 16;
    while (cap < b->size + n) cap *= 2;
    unsigned char *grown = realloc(b->data, cap);
    if (!grown) {
      b->failed = true;
      png_error(png, "out of memory");
    }
    b->data = grown;
    b->capacity = cap;
  }
  memcpy(b->data + b->size, bytes, n);
  b->size += n;
}

static void flush(png_structp png) { (void)png; }

/* Grey level of v in [lo, hi], clipped. */
static png_byte grey(float v, float lo, float hi) {
  float u = (v - lo) / (hi - lo);
  if (!(u > 0.0f)) u = 0.0f; /* NaN too */
  if (u > 1.0f) u = 1.0f;
  return (png_byte)(u * 255.0f + 0.5f);
}

/* The picture, one byte per pixel, with a 1-tile-pixel white border
 * between tiles. */
static png_byte *render(const fg_png_grid *g, int *width, int *height) {
  const int border = g->scale;
  const int tile_w = g->image_width * g->scale, tile_h = g->image_height * g->scale;
  const int columns = g->columns;
  const int64_t grid_rows = (g->count + columns - 1) / columns;
  *width = columns * tile_w + (columns + 1) * border;
  *height = (int)(grid_rows * tile_h + (grid_rows + 1) * border);
  png_byte *pixels = malloc((size_t)*width * (size_t)*height);
  if (!pixels) return NULL;
  memset(pixels, 255, (size_t)*width * (size_t)*height);
  for (int64_t n = 0; n < g->count; ++n) {
    const float *sample = g->data + n * g->dim;
    const int x0 = (int)(n % columns) * (tile_w + border) + border;
    const int y0 = (int)(n / columns) * (tile_h + border) + border;
    for (int y = 0; y < tile_h; ++y)
      for (int x = 0; x < tile_w; ++x) {
        float v = sample[(y / g->scale) * g->image_width + x / g->scale];
        /* dark strokes on white, as digits are drawn */
        pixels[(size_t)(y0 + y) * *width + x0 + x] = (png_byte)(255 - grey(v, g->low, g->high));
      }
  }
  return pixels;
}

static flowgen_status encode(const png_byte *pixels, int width, int height,
                             png_buffer *out, flowgen_error *err) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory for the PNG encoder");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return fg_fail(err, out->failed ? FLOWGEN_NOMEM : FLOWGEN_INTERNAL,
                   "the PNG encoder failed");
  }
  png_set_write_fn(png, out, append, flush);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) png_write_row(png, pixels + (size_t)y * width);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return FLOWGEN_OK;
}

flowgen_status fg_png_write_grid(const char *path, const fg_png_grid *g,
                                 flowgen_error *err) {
  if (g->image_width < 1 || g->image_height < 1 ||
      (int64_t)g->image_width * g->image_height != g->dim)
    return fg_fail(err, FLOWGEN_INVALID,
                   "%s: samples of %d values cannot be shown as %d x %d images", path,
                   g->dim, g->image_height, g->image_width);
  if (g->count < 1 || g->count > 100000 || g->columns < 1 || g->scale < 1 ||
      g->scale > 64 || !(g->high > g->low))
    return fg_fail(err, FLOWGEN_INVALID, "%s: nothing to draw (%lld samples)", path,
                   (long long)g->count);
  int width = 0, height = 0;
  png_byte *pixels = render(g, &width, &height);
  if (!pixels) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for the picture");
  png_buffer out = {0};
  flowgen_status st = encode(pixels, width, height, &out, err);
  free(pixels);
  if (!st) st = fg_write_file_atomic(path, out.data, out.size, err);
  free(out.data);
  return st;
}
