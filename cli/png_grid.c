/* Samples as a PNG picture: each row of a batch x D array shown as an
 * image_height x image_width grey tile, tiles in a grid (libpng).  Every
 * size is computed in 64 bits and checked against the cap before anything
 * is allocated; the picture is rendered a row at a time. */
#include "png_grid.h"

#include "fileio.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* ---- the picture's size -------------------------------------------------- */

/* a * b and a + b for a, b >= 0, INT64_MAX where they would not fit. */
static int64_t mul_sat(int64_t a, int64_t b) {
  return a != 0 && b > INT64_MAX / a ? INT64_MAX : a * b;
}

static int64_t add_sat(int64_t a, int64_t b) {
  return b > INT64_MAX - a ? INT64_MAX : a + b;
}

flowgen_status fg_png_grid_size(const fg_png_grid *g, int64_t *width, int64_t *height,
                                flowgen_error *err) {
  *width = *height = 0;
  if (g->image_width < 1 || g->image_height < 1 ||
      (int64_t)g->image_width * g->image_height != g->dim)
    return fg_fail(err, FLOWGEN_INVALID,
                   "samples of %d values cannot be shown as %d x %d images", g->dim,
                   g->image_height, g->image_width);
  if (g->count < 1 || g->columns < 1 || g->scale < 1 || !(g->high > g->low))
    return fg_fail(err, FLOWGEN_INVALID,
                   "nothing to draw (%lld samples, %d columns, scale %d)",
                   (long long)g->count, g->columns, g->scale);
  /* Tiles of image x scale pixels, a border of scale pixels around each. */
  const int64_t border = g->scale;
  const int64_t tile_w = (int64_t)g->image_width * g->scale;
  const int64_t tile_h = (int64_t)g->image_height * g->scale;
  const int64_t rows = (g->count - 1) / g->columns + 1;
  *width = add_sat(mul_sat(g->columns, tile_w + border), border);
  *height = add_sat(mul_sat(rows, tile_h + border), border);
  if (*width > FG_PNG_MAX_SIDE || *height > FG_PNG_MAX_SIDE ||
      mul_sat(*width, *height) > FG_PNG_MAX_PIXELS)
    return fg_fail(err, FLOWGEN_INVALID,
                   "a picture of %lld x %lld pixels is over the limit (%d pixels a side, "
                   "%lld in all)",
                   (long long)*width, (long long)*height, FG_PNG_MAX_SIDE,
                   (long long)FG_PNG_MAX_PIXELS);
  return FLOWGEN_OK;
}

/* ---- rendering ------------------------------------------------------------- */

/* Grey level of v in [lo, hi], clipped. */
static png_byte grey(float v, float lo, float hi) {
  float u = (v - lo) / (hi - lo);
  if (!(u > 0.0f)) u = 0.0f; /* NaN too */
  if (u > 1.0f) u = 1.0f;
  return (png_byte)(u * 255.0f + 0.5f);
}

/* Row y of the picture, width bytes: white, and the tiles that cross it. */
static void render_row(const fg_png_grid *g, int64_t y, int64_t width, png_byte *row) {
  memset(row, 255, (size_t)width);
  const int64_t border = g->scale;
  const int64_t tile_w = (int64_t)g->image_width * g->scale;
  const int64_t tile_h = (int64_t)g->image_height * g->scale;
  if (y < border) return;
  const int64_t grid_row = (y - border) / (tile_h + border);
  const int64_t in_tile = (y - border) % (tile_h + border);
  if (in_tile >= tile_h) return;
  const int64_t value_row = in_tile / g->scale;
  for (int64_t c = 0; c < g->columns; ++c) {
    const int64_t n = grid_row * g->columns + c;
    if (n >= g->count) break;
    const float *values = g->data + n * g->dim + value_row * g->image_width;
    png_byte *out = row + border + c * (tile_w + border);
    for (int64_t v = 0; v < g->image_width; ++v)
      /* dark strokes on white, as digits are drawn */
      memset(out + v * g->scale, 255 - grey(values[v], g->low, g->high), (size_t)g->scale);
  }
}

/* ---- encoding --------------------------------------------------------------- */

typedef struct png_buffer {
  unsigned char *data;
  size_t size, capacity;
  bool out_of_memory;
  char message[128]; /* libpng's error, which it would print */
} png_buffer;

static void append(png_structp png, png_bytep bytes, png_size_t n) {
  png_buffer *b = png_get_io_ptr(png);
  if (n > b->capacity - b->size) {
    size_t cap = b->capacity ? b->capacity : 1 << 16;
    while (cap - b->size < n && cap <= SIZE_MAX / 2) cap *= 2;
    unsigned char *grown = cap - b->size >= n ? realloc(b->data, cap) : NULL;
    if (!grown) {
      b->out_of_memory = true;
      png_error(png, "out of memory");
    }
    b->data = grown;
    b->capacity = cap;
  }
  memcpy(b->data + b->size, bytes, n);
  b->size += n;
}

static void flush(png_structp png) { (void)png; }

/* libpng prints its errors and warnings unless given these: a message is
 * kept for the one "flowgen: " line instead. */
static void on_error(png_structp png, png_const_charp message) {
  png_buffer *b = png_get_error_ptr(png);
  snprintf(b->message, sizeof b->message, "%s", message);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp message) {
  (void)png;
  (void)message;
}

static flowgen_status encode(const fg_png_grid *g, int64_t width, int64_t height,
                             png_byte *row, png_buffer *out, flowgen_error *err) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, out, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory for the PNG encoder");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return out->out_of_memory
               ? fg_fail(err, FLOWGEN_NOMEM, "out of memory for the picture")
               : fg_fail(err, FLOWGEN_INTERNAL, "the PNG encoder failed: %s", out->message);
  }
  png_set_write_fn(png, out, append, flush);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) {
    render_row(g, y, width, row);
    png_write_row(png, row);
  }
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return FLOWGEN_OK;
}

flowgen_status fg_png_encode_grid(const fg_png_grid *g, unsigned char **png, size_t *size,
                                  flowgen_error *err) {
  int64_t width = 0, height = 0;
  flowgen_status st = fg_png_grid_size(g, &width, &height, err);
  if (st) return st;
  png_byte *row = malloc((size_t)width);
  if (!row) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for the picture");
  png_buffer out = {0};
  st = encode(g, width, height, row, &out, err);
  free(row);
  if (st) {
    free(out.data);
    return st;
  }
  *png = out.data;
  *size = out.size;
  return FLOWGEN_OK;
}

flowgen_status fg_png_write_grid(const char *path, const fg_png_grid *g,
                                 flowgen_error *err) {
  unsigned char *png = NULL;
  size_t size = 0;
  flowgen_status st = fg_png_encode_grid(g, &png, &size, err);
  if (st) {
    fg_error_prefix(err, "%s", path);
    return st;
  }
  st = fg_write_file_atomic(path, png, size, err);
  free(png);
  return st;
}
