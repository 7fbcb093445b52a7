/* flowgen sample: integrate a trained model from PyTorch weights, on the GPU
 * (the generated kernel) or the CPU (the fp64 reference). */
#include "cli.h"
#include "npy.h"
#include "png_grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char sample_usage[] =
    "usage: flowgen sample [--weights FILE.safetensors] (-o OUT.npy | --png OUT.png) [options]\n"
    "\n"
    "  --weights FILE     PyTorch state_dict saved with safetensors (default:\n"
    "                     the built-in digits model, D=64, H=256)\n"
    "  --prefix P         tensor name prefix (default \"velocity.\")\n"
    "  --dim D, --hidden H  the model's shape (default: read from the weights)\n"
    "  --steps S          solver steps, 1 to 10000 (default 32)\n"
    "  --batch N          samples to draw (default 16, or the rows of --x0)\n"
    "  --seed N           seed of the N(0, I) starting points (default 0)\n"
    "  --x0 FILE.npy      starting points instead: float32 (or float64) N x D,\n"
    "                     finite (not with --batch or --seed)\n"
    "  --device gpu|cpu|auto  gpu: the generated kernel; cpu: the fp64\n"
    "                     reference; auto (default): gpu where there is one\n"
    "  -o, --output FILE  where the N x D float32 .npy goes\n"
    "  --png FILE         draw the samples as a grid of images (values -1 to 1\n"
    "                     from white to black); with -o, both or neither\n"
    "  --png-shape HxW    the image of one sample (default: square, sqrt(D))\n"
    "  --png-columns N    images per row of the grid (default: square grid)\n"
    "  --png-scale N      pixels per value (default 4); the picture may have\n"
    "                     65535 pixels a side and 2^28 in all (else exit 2)\n"
    "  -v, --verbose      print the cache hit or miss and each phase's time\n"
    "  also: --solver, --precision, --name, --template-dir, --tune as for kernels;\n"
    "  --sms, --shared-per-block replace what the GPU reports\n";

/* N(0, 1) by Box-Muller over splitmix64: the same seed gives the same x0
 * on every machine. */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void normal_fill(float *out, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 2) {
    double u1 = ((splitmix64(&s) >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double u2 = (splitmix64(&s) >> 11) / 9007199254740992.0;
    double r = sqrt(-2.0 * log(u1));
    out[i] = (float)(r * cos(2.0 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = (float)(r * sin(2.0 * M_PI * u2));
  }
}

static void print_warning(void *ctx, const char *message) {
  (void)ctx;
  fprintf(stderr, "flowgen: warning: %s\n", message);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static flowgen_status sample_gpu(const fg_cli_sample_args *a, const flowrt_weights *w,
                                 const float *x0, float *x, int64_t batch,
                                 flowgen_error *err) {
  flowrt_runtime *rt = NULL;
  flowrt_sampler *s = NULL;
  flowrt_options opts = {.disk_cache = -1, .template_dir = a->opts.template_dir,
                         .tune = a->opts.tune, .device_figures = a->opts.device,
                         .warn = print_warning};
  double t0 = now_ms();
  flowgen_status st = flowrt_open(&opts, &rt, err);
  double t_open = now_ms();
  if (!st) st = flowrt_sampler_create(rt, &a->spec, w, &s, err);
  double t_create = now_ms();
  if (!st) st = flowrt_sample_host(s, x0, x, batch, err);
  double t_sample = now_ms();
  if (!st && a->verbose) {
    const flowrt_stats *stats = flowrt_sampler_stats(s);
    fprintf(stderr,
            "flowgen: module: %s\n"
            "flowgen: open %.1f ms, generate %.2f ms, compile %.1f ms, load %.2f ms, "
            "weights %.2f ms, sampler total %.1f ms, sample %.2f ms (with copies)\n",
            stats->memory_hit ? "memory cache hit"
            : stats->disk_hit ? "disk cache hit"
                              : "cache miss, compiled",
            t_open - t0, stats->generate_ms, stats->compile_ms, stats->load_ms,
            stats->upload_ms, t_create - t_open, t_sample - t_create);
  }
  flowrt_sampler_destroy(s);
  flowrt_close(rt);
  return st;
}

/* A NaN or an infinity would come out as a NaN sample: refused, with its
 * row and column (a float64 beyond float32's range reads as an infinity). */
static flowgen_status check_finite(const char *path, const float *x, int64_t rows,
                                   int64_t cols, flowgen_error *err) {
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (isfinite(x[i])) continue;
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: row %lld, column %lld is %s; the starting points must be finite",
                   path, (long long)(i / cols), (long long)(i % cols),
                   isnan(x[i]) ? "nan" : x[i] > 0 ? "inf" : "-inf");
  }
  return FLOWGEN_OK;
}

static flowgen_status starting_points(const fg_cli_sample_args *a, int dim,
                                      float **x0, int64_t *batch,
                                      flowgen_error *err) {
  if (a->x0_path) {
    int64_t rows = 0, cols = 0;
    flowgen_status st = fg_npy_read(a->x0_path, x0, &rows, &cols, err);
    if (st) return st;
    if (cols != dim)
      st = fg_fail(err, FLOWGEN_INPUT, "%s: has %lld columns but the model's state has D = %d",
                   a->x0_path, (long long)cols, dim);
    if (!st) st = check_finite(a->x0_path, *x0, rows, cols, err);
    if (st) {
      free(*x0);
      *x0 = NULL;
      return st;
    }
    *batch = rows;
    return FLOWGEN_OK;
  }
  *batch = a->batch >= 0 ? a->batch : 16;
  size_t n = (size_t)*batch * (size_t)dim;
  if (!(*x0 = malloc(n ? n * sizeof(float) : 1)))
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory for %lld samples", (long long)*batch);
  normal_fill(*x0, n, a->seed);
  return FLOWGEN_OK;
}

static int integer_sqrt(int n) {
  int r = 0;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

/* The picture's layout, checked before any sampling: a shape that does not
 * fit D or a picture over the cap is a usage error naming the flags. */
static flowgen_status plan_png(const fg_cli_sample_args *a, int64_t batch, int dim,
                               fg_png_grid *g, flowgen_error *err) {
  *g = (fg_png_grid){.count = batch, .dim = dim,
                     .image_height = a->png_height, .image_width = a->png_width,
                     .columns = a->png_columns, .scale = a->png_scale ? a->png_scale : 4,
                     .low = -1.0f, .high = 1.0f};
  if (!g->image_height) {
    int side = integer_sqrt(dim);
    if (side * side != dim)
      return fg_fail(err, FLOWGEN_INVALID,
                     "--png: D = %d is not a square; give --png-shape HxW", dim);
    g->image_height = g->image_width = side;
  } else if ((int64_t)g->image_height * g->image_width != dim) {
    return fg_fail(err, FLOWGEN_INVALID,
                   "--png-shape %dx%d: a %d x %d image shows %lld values, but the "
                   "samples have D = %d (H times W must be D)",
                   g->image_height, g->image_width, g->image_height, g->image_width,
                   (long long)g->image_height * g->image_width, dim);
  }
  if (batch < 1)
    return fg_fail(err, FLOWGEN_INVALID, "--png: no samples to draw (--batch 0)");
  if (!g->columns) {
    g->columns = integer_sqrt((int)(batch < 1000000 ? batch : 1000000));
    if ((int64_t)g->columns * g->columns < batch) ++g->columns;
  }
  int64_t width = 0, height = 0;
  if (fg_png_grid_size(g, &width, &height, err) == FLOWGEN_OK) return FLOWGEN_OK;
  return fg_fail(err, FLOWGEN_INVALID,
                 "--png: %lld samples make a picture of %lld x %lld pixels, over the "
                 "limit of %d pixels a side and %lld in all: lower --png-scale or "
                 "--batch, or change --png-columns",
                 (long long)batch, (long long)width, (long long)height, FG_PNG_MAX_SIDE,
                 (long long)FG_PNG_MAX_PIXELS);
}

/* The picture and the array are encoded first, then written as a pair:
 * both appear or neither does, and existing files survive a failure. */
static flowgen_status write_outputs(const fg_cli_sample_args *a, fg_png_grid *g,
                                    const float *x, int64_t batch, int dim,
                                    flowgen_error *err) {
  fg_output_file files[2];
  size_t count = 0;
  unsigned char *png = NULL, *npy = NULL;
  size_t png_size = 0, npy_size = 0;
  flowgen_status st = FLOWGEN_OK;
  if (a->png) {
    g->data = x;
    st = fg_png_encode_grid(g, &png, &png_size, err);
    if (st) fg_error_prefix(err, "%s", a->png);
    files[count++] = (fg_output_file){a->png, png, png_size};
  }
  if (!st && a->output) {
    st = fg_npy_format(x, batch, dim, &npy, &npy_size, err);
    if (st) fg_error_prefix(err, "%s", a->output);
    files[count++] = (fg_output_file){a->output, npy, npy_size};
  }
  if (!st) st = fg_write_files(files, count, err);
  free(png);
  free(npy);
  return st;
}

int fg_cli_sample(int argc, char **argv) {
  fg_cli_sample_args a;
  memset(&a, 0, sizeof a);
  int code = fg_cli_parse_sample(argc, argv, &a);
  if (a.help) fputs(sample_usage, stdout);
  if (code >= 0) return code;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowrt_weights *w = NULL;
  double t0 = now_ms();
  flowgen_status st =
      a.weights ? flowrt_weights_load(a.weights, a.prefix, a.dim_given ? a.spec.dim : 0,
                                      a.hidden_given ? a.spec.hidden : 0, &w, &err)
                : flowrt_weights_builtin("digits", &w, &err);
  if (st) return fg_cli_fail(&err);
  /* With --weights, a shape flag is checked against the file as it loads;
   * the built-in model's shape is fixed. */
  if (!a.weights && ((a.dim_given && a.spec.dim != w->dim) ||
                     (a.hidden_given && a.spec.hidden != w->hidden))) {
    char what[160];
    bool dim = a.dim_given && a.spec.dim != w->dim;
    snprintf(what, sizeof what, "%s %d: the built-in digits model has %s = %d",
             dim ? "--dim" : "--hidden", dim ? a.spec.dim : a.spec.hidden,
             dim ? "D" : "H", dim ? w->dim : w->hidden);
    flowrt_weights_free(w);
    return fg_cli_usage_error("sample: %s (give --weights for another model)", what);
  }
  if (a.verbose)
    fprintf(stderr, "flowgen: weights %s: D=%d H=%d (%.1f ms)\n",
            a.weights ? a.weights : "(built-in digits model)", w->dim, w->hidden,
            now_ms() - t0);
  a.spec.dim = w->dim;
  a.spec.hidden = w->hidden;
  float *x0 = NULL, *x = NULL;
  int64_t batch = 0;
  st = starting_points(&a, w->dim, &x0, &batch, &err);
  fg_png_grid grid = {0};
  if (!st && a.png) st = plan_png(&a, batch, w->dim, &grid, &err);
  size_t n = (size_t)batch * (size_t)w->dim;
  if (!st && !(x = malloc(n ? n * sizeof(float) : 1)))
    st = fg_fail(&err, FLOWGEN_NOMEM, "out of memory");
  if (!st) {
    fg_cli_device device = a.device;
    if (device == FG_CLI_DEVICE_AUTO) {
      flowrt_runtime *probe = NULL;
      flowrt_options quiet = {.disk_cache = 0};
      device = flowrt_open(&quiet, &probe, NULL) == FLOWGEN_OK ? FG_CLI_DEVICE_GPU : FG_CLI_DEVICE_CPU;
      flowrt_close(probe);
      if (a.verbose)
        fprintf(stderr, "flowgen: device: %s\n", device == FG_CLI_DEVICE_GPU ? "gpu" : "cpu (no usable GPU)");
    }
    double t1 = now_ms();
    st = device == FG_CLI_DEVICE_GPU ? sample_gpu(&a, w, x0, x, batch, &err)
                              : flowrt_reference(&a.spec, w, x0, x, batch, &err);
    if (!st && a.verbose && device == FG_CLI_DEVICE_CPU)
      fprintf(stderr, "flowgen: cpu reference (fp64): %.1f ms\n", now_ms() - t1);
  }
  if (!st) st = write_outputs(&a, &grid, x, batch, w->dim, &err);
  free(x0);
  free(x);
  flowrt_weights_free(w);
  return st ? fg_cli_fail(&err) : 0;
}
