/* The built-in digits model and the PNG grid of samples. */
#include "support.h"

#include "flowrt.h"
#include "png_grid.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_builtin_digits_model(void **state) {
  (void)state;
  flowrt_weights *w = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_weights_builtin("digits", &w, &err), FLOWGEN_OK);
  assert_int_equal(w->dim, 64);
  assert_int_equal(w->hidden, 256);
  /* trained weights: not all zero, all finite */
  double sum = 0;
  for (int i = 0; i < 256 * 65; ++i) {
    assert_true(w->w[0][i] == w->w[0][i]);
    sum += w->w[0][i] * w->w[0][i];
  }
  assert_true(sum > 1.0);
  flowrt_weights_free(w);
  assert_int_equal(flowrt_weights_builtin("faces", &w, &err), FLOWGEN_INVALID);
  assert_null(w);
  assert_non_null(strstr(err.message, "no built-in model 'faces' (there is: digits"));
  /* A name is the whole of the file's, not a part. */
  assert_int_equal(flowrt_weights_builtin("digit", &w, &err), FLOWGEN_INVALID);
  assert_int_equal(flowrt_weights_builtin("", &w, &err), FLOWGEN_INVALID);
  assert_int_equal(flowrt_weights_builtin(NULL, &w, &err), FLOWGEN_INVALID);
  /* The seed model: no metadata, so silu, raw time, x,t,c. */
  assert_int_equal(flowrt_weights_builtin("digits", &w, &err), FLOWGEN_OK);
  assert_int_equal(w->cond, 0);
  assert_int_equal(w->layers, 3);
  assert_int_equal(w->act, FLOWGEN_ACT_SILU);
  assert_int_equal(w->time_width, 1);
  assert_string_equal(w->input, "xtc");
  flowrt_weights_free(w);
}

/* Reads a grey 8-bit PNG back with libpng. */
static unsigned char *read_png(const char *path, int *width, int *height) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  assert_non_null(info);
  if (setjmp(png_jmpbuf(png))) fail_msg("%s: not a PNG libpng can read", path);
  png_init_io(png, f);
  png_read_info(png, info);
  *width = (int)png_get_image_width(png, info);
  *height = (int)png_get_image_height(png, info);
  assert_int_equal(png_get_color_type(png, info), PNG_COLOR_TYPE_GRAY);
  assert_int_equal(png_get_bit_depth(png, info), 8);
  unsigned char *pixels = malloc((size_t)*width * *height);
  for (int y = 0; y < *height; ++y) png_read_row(png, pixels + (size_t)y * *width, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  fclose(f);
  return pixels;
}

/* Two 2x2 samples, scale 1, two columns: a 1-pixel white border around
 * each tile; -1 is white, 1 black, 0 mid-grey, out of range clipped. */
static void test_png_grid_pixels(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char path[FG_TEST_PATH_SIZE];
  fg_test_path_join(path, dir, "grid.png");
  const float data[8] = {-1.0f, 1.0f, 0.0f, 5.0f, /* sample 0 */
                         1.0f, -1.0f, -7.0f, 0.5f};
  fg_png_grid g = {.data = data, .count = 2, .dim = 4, .image_height = 2,
                   .image_width = 2, .columns = 2, .scale = 1, .low = -1.0f, .high = 1.0f};
  flowgen_error err;
  assert_int_equal(fg_png_write_grid(path, &g, &err), FLOWGEN_OK);
  int w = 0, h = 0;
  unsigned char *p = read_png(path, &w, &h);
  assert_int_equal(w, 2 * 2 + 3);
  assert_int_equal(h, 2 + 2);
  const unsigned char expected[4][7] = {
      {255, 255, 255, 255, 255, 255, 255},
      {255, 255, 0, 255, 0, 255, 255},
      {255, 127, 0, 255, 255, 64, 255},
      {255, 255, 255, 255, 255, 255, 255},
  };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (p[y * w + x] != expected[y][x])
        fail_msg("pixel (%d, %d) is %d, expected %d", x, y, p[y * w + x], expected[y][x]);
  free(p);
  /* a shape that does not hold the samples: refused, nothing written */
  fg_test_path_join(path, dir, "bad.png");
  g.image_height = 3;
  assert_int_equal(fg_png_write_grid(path, &g, &err), FLOWGEN_INVALID);
  assert_false(fg_test_file_exists(path));
  fg_test_rmtree(dir);
  free(dir);
}

/* `flowgen sample --png` with no weights draws the built-in model. */
static void test_sample_png_from_the_cli(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  char png[FG_TEST_PATH_SIZE], cmd[3 * FG_TEST_PATH_SIZE];
  fg_test_path_join(png, dir, "digits.png");
  snprintf(cmd, sizeof cmd, "'%s' sample --device cpu --batch 6 --seed 2 --png '%s'",
           fg_test_flowgen_bin(), png);
  char *out = NULL, *err = NULL;
  assert_int_equal(fg_test_run(cmd, &out, &err), 0);
  int w = 0, h = 0;
  unsigned char *p = read_png(png, &w, &h);
  /* 6 samples: 3 columns x 2 rows of 8x8 tiles at scale 4, 4-pixel borders */
  assert_int_equal(w, 3 * 32 + 4 * 4);
  assert_int_equal(h, 2 * 32 + 3 * 4);
  free(p);
  free(out);
  free(err);
  /* D = 64 is no 3x3 image: usage error, no file */
  fg_test_path_join(png, dir, "bad.png");
  snprintf(cmd, sizeof cmd, "'%s' sample --device cpu --batch 2 --png '%s' --png-shape 3x3",
           fg_test_flowgen_bin(), png);
  assert_int_equal(fg_test_run(cmd, &out, &err), 2);
  assert_non_null(strstr(err, "3 x 3"));
  assert_false(fg_test_file_exists(png));
  free(out);
  free(err);
  /* neither -o nor --png */
  snprintf(cmd, sizeof cmd, "'%s' sample --device cpu", fg_test_flowgen_bin());
  assert_int_equal(fg_test_run(cmd, &out, &err), 2);
  assert_non_null(strstr(err, "-o or --png"));
  free(out);
  free(err);
  fg_test_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_digits_model),
      cmocka_unit_test(test_png_grid_pixels),
      cmocka_unit_test(test_sample_png_from_the_cli),
  };
  return cmocka_run_group_tests_name("digits", tests, NULL, NULL);
}
