/* Fuzzes the picture writer (fg_png_grid_size, fg_png_encode_grid) from
 * memory: random grid parameters, from tiny to past 2^63 in their
 * products, and random sample values (NaN and infinities included).
 * Invariants: the size agrees with an independent 128-bit computation and
 * is refused exactly when the parameters are invalid or the picture is over
 * the cap; an accepted picture (up to 2^20 pixels here, for speed) encodes
 * into a PNG that libpng reads back, pixel for pixel what the grid says.
 * The samples sit in a buffer of exactly count x dim floats, so any read
 * past it is a sanitizer report.
 *
 * Input: count, image height, image width, columns, scale (each a mode byte
 * then its value: mode < 200 a small value from the next 2 bytes, < 240 a
 * 32-bit value from the next 4, else one of a few extremes chosen by the
 * next byte); a byte whose low bit makes dim != height x width; a byte
 * whose low bit takes low and high from the next 8 bytes (else -1 and 1);
 * then the sample values, 4 bytes each, repeated as needed. */
#include "fuzz.h"

#include "png_grid.h"

#include <limits.h>
#include <png.h>
#include <string.h>

static int64_t pick(fuzz_input *in, int small_max) {
  static const int64_t extremes[] = {0,     -1,    1,       2,          INT_MAX, INT_MIN,
                                     65535, 65536, 16384,   32767,      4096,    1024,
                                     64,    65,    1 << 28, INT64_MAX,  (int64_t)1 << 40};
  uint8_t mode = fuzz_byte(in);
  if (mode < 200) return fuzz_int(in, 1, small_max);
  if (mode < 240) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | fuzz_byte(in);
    return (int32_t)v;
  }
  return extremes[fuzz_byte(in) % (sizeof extremes / sizeof *extremes)];
}

static int to_int(int64_t v) {
  return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
}

static float take_float(fuzz_input *in) {
  uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) bits = bits << 8 | fuzz_byte(in);
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* The picture's size as the grid's definition gives it, in 128 bits. */
static bool expected_size(const fg_png_grid *g, __int128 *width, __int128 *height) {
  if (g->image_width < 1 || g->image_height < 1 ||
      (__int128)g->image_width * g->image_height != g->dim || g->count < 1 ||
      g->columns < 1 || g->scale < 1 || !(g->high > g->low))
    return false;
  __int128 s = g->scale, rows = ((__int128)g->count + g->columns - 1) / g->columns;
  *width = g->columns * (g->image_width * s + s) + s;
  *height = rows * (g->image_height * s + s) + s;
  return true;
}

/* Pixel (x, y) as the grid defines it: white borders, a tile per sample in
 * row-major order, each value a scale x scale square, -1 white to 1 black. */
static uint8_t expected_pixel(const fg_png_grid *g, int64_t x, int64_t y) {
  const int64_t s = g->scale;
  const int64_t cell_w = g->image_width * s + s, cell_h = g->image_height * s + s;
  if (x < s || y < s) return 255;
  const int64_t col = (x - s) / cell_w, px = (x - s) % cell_w;
  const int64_t row = (y - s) / cell_h, py = (y - s) % cell_h;
  if (px >= g->image_width * s || py >= g->image_height * s) return 255;
  const int64_t n = row * g->columns + col;
  if (col >= g->columns || n >= g->count) return 255;
  float v = g->data[n * g->dim + (py / s) * g->image_width + px / s];
  float u = (v - g->low) / (g->high - g->low);
  if (!(u > 0.0f)) u = 0.0f;
  if (u > 1.0f) u = 1.0f;
  return (uint8_t)(255 - (uint8_t)(u * 255.0f + 0.5f));
}

static void check_picture(const fg_png_grid *g, int64_t width, int64_t height) {
  unsigned char *png = NULL;
  size_t size = 0;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status s = fg_png_encode_grid(g, &png, &size, &err);
  FUZZ_CHECK(s == FLOWGEN_OK && png != NULL && size > 8);
  png_image image;
  memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  FUZZ_CHECK(png_image_begin_read_from_memory(&image, png, size));
  FUZZ_CHECK(image.width == (png_uint_32)width && image.height == (png_uint_32)height);
  image.format = PNG_FORMAT_GRAY;
  uint8_t *pixels = malloc((size_t)(width * height));
  FUZZ_CHECK(pixels != NULL);
  FUZZ_CHECK(png_image_finish_read(&image, NULL, pixels, 0, NULL));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      FUZZ_CHECK(pixels[y * width + x] == expected_pixel(g, x, y));
  free(pixels);
  free(png);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in = {data, data + size};
  fg_png_grid g = {.low = -1.0f, .high = 1.0f};
  g.count = pick(&in, 300);
  g.image_height = to_int(pick(&in, 16));
  g.image_width = to_int(pick(&in, 16));
  g.columns = to_int(pick(&in, 40));
  g.scale = to_int(pick(&in, 8));
  g.dim = to_int((int64_t)g.image_height * g.image_width + (fuzz_byte(&in) & 1));
  if (fuzz_byte(&in) & 1) {
    g.low = take_float(&in);
    g.high = take_float(&in);
  }

  int64_t width = -1, height = -1;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status s = fg_png_grid_size(&g, &width, &height, &err);
  FUZZ_CHECK(s == err.status);
  __int128 want_w = 0, want_h = 0;
  bool valid = expected_size(&g, &want_w, &want_h);
  bool fits = valid && want_w <= FG_PNG_MAX_SIDE && want_h <= FG_PNG_MAX_SIDE &&
              want_w * want_h <= FG_PNG_MAX_PIXELS;
  FUZZ_CHECK((s == FLOWGEN_OK) == fits);
  if (s != FLOWGEN_OK) {
    FUZZ_CHECK(s == FLOWGEN_INVALID && err.message[0] != '\0');
    /* Sizes never wrap: past int64 they read INT64_MAX. */
    if (valid) {
      FUZZ_CHECK(want_w > INT64_MAX ? width == INT64_MAX : width == (int64_t)want_w);
      FUZZ_CHECK(want_h > INT64_MAX ? height == INT64_MAX : height == (int64_t)want_h);
    }
    unsigned char *png = NULL;
    size_t png_size = 0;
    FUZZ_CHECK(fg_png_encode_grid(&g, &png, &png_size, NULL) == FLOWGEN_INVALID);
    FUZZ_CHECK(png == NULL);
    return 0;
  }
  FUZZ_CHECK(width == (int64_t)want_w && height == (int64_t)want_h);
  /* Large pictures are checked for their size only: encoding 2^28 pixels
   * takes seconds. */
  if (width * height > ((int64_t)1 << 20) || g.count * g.dim > ((int64_t)1 << 20)) return 0;

  size_t n = (size_t)(g.count * g.dim);
  float *values = malloc(n * sizeof *values);
  FUZZ_CHECK(values != NULL);
  const uint8_t *start = in.p;
  for (size_t i = 0; i < n; ++i) {
    if (fuzz_left(&in) < 4) in.p = start;
    values[i] = fuzz_left(&in) >= 4 ? take_float(&in) : (float)i / (float)n * 2.0f - 1.0f;
  }
  g.data = values;
  check_picture(&g, width, height);
  free(values);
  return 0;
}
