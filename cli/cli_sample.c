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
    "                     the built-in digits model, D=64, H=256; with --class or\n"
    "                     --cond, the built-in digits_cond model)\n"
    "  --prefix P         tensor name prefix (default \"velocity.\")\n"
    "  --dim D, --hidden H, --layers L  the model's shape (default: read from\n"
    "                     the weights; given, checked against them)\n"
    "  --act A, --time T, --input x,t,c  what the shapes cannot tell (default:\n"
    "                     the file's metadata flowgen.act/time/input, else silu,\n"
    "                     raw, x,t,c); a contradiction with the file is an error\n"
    "  --steps S          solver steps, 1 to 10000 (default 32)\n"
    "  --batch N          samples to draw (default 16, or the rows of --x0 or\n"
    "                     --cond; with --class all, per class, default 8)\n"
    "  --seed N           seed of the N(0, I) starting points (default 0)\n"
    "  --x0 FILE.npy      starting points instead: float32 (or float64) N x D,\n"
    "                     finite (not with --batch or --seed)\n"
    "  --cond FILE.npy    the conditioning of a model with C > 0: N x C (or\n"
    "                     1 x C for every sample), float32 or float64, finite\n"
    "  --class N|all      the conditioning one-hot(N) of width C (a model trained\n"
    "                     on classes); all: --batch samples of each class, a row\n"
    "                     of the picture each\n"
    "  --guidance W       classifier-free guidance v_u + W (v_c - v_u), W finite\n"
    "                     (needs --cond or --class)\n"
    "  --null-cond FILE.npy  the unconditional field's conditioning, 1 x C\n"
    "                     (default zeros; needs --guidance)\n"
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

/* The conditioning of every sample (batch x C, or NULL for C = 0) and the
 * null conditioning (1 x C or NULL). */
typedef struct conditioning {
  float *cond, *null_cond;
  int64_t cond_rows;  /* of --cond: 1 (for every sample) or the batch */
} conditioning;

static flowgen_status sample_gpu(const fg_cli_sample_args *a, const flowrt_weights *w,
                                 const float *x0, float *x, const conditioning *c,
                                 int64_t batch, flowgen_error *err) {
  flowrt_runtime *rt = NULL;
  flowrt_sampler *s = NULL;
  flowrt_options opts = {.disk_cache = -1, .template_dir = a->opts.template_dir,
                         .tune = a->opts.tune, .device_figures = a->opts.device,
                         .warn = print_warning};
  double t0 = now_ms();
  flowgen_status st = flowrt_open(&opts, &rt, err);
  double t_open = now_ms();
  /* The batch is known: its variant compiles while the weights go up. */
  flowrt_sampler_options sopts = {.batch_hint = batch};
  if (!st) st = flowrt_sampler_create_ex(rt, &a->spec, w, &sopts, &s, err);
  double t_create = now_ms();
  if (!st)
    st = flowrt_sample_host_cond(s, x0, x, c->cond, c->null_cond,
                                 a->guidance_given ? a->guidance : 1.0f, batch, err);
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
    /* Each part loaded: the pack kernel's, the variants' used. */
    const flowgen_kernel *k = flowrt_sampler_kernel(s);
    for (int i = -1; i < flowgen_kernel_variant_count(k); ++i) {
      flowrt_part_stats p;
      if (!flowrt_sampler_part_stats(s, i, &p)) continue;
      fprintf(stderr,
              "flowgen: part %s: %s, source %zu bytes, generate %.2f ms, compile %.1f ms, "
              "load %.2f ms\n",
              i < 0 ? "pack" : flowgen_kernel_variant(k, i)->strategy,
              p.disk_hit ? "disk cache hit" : p.compile_ms > 0 ? "compiled" : "memory",
              p.source_bytes, p.generate_ms, p.compile_ms, p.load_ms);
    }
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

/* The conditioning arrays of --cond / --null-cond: cols C, finite; --cond
 * has 1 or batch rows (*rows says which; batch is not known yet). */
static flowgen_status read_cond(const char *path, const char *flag, int width,
                                float **out, int64_t *rows, flowgen_error *err) {
  int64_t cols = 0;
  flowgen_status st = fg_npy_read(path, out, rows, &cols, err);
  if (st) return st;
  if (cols != width)
    st = fg_fail(err, FLOWGEN_INPUT,
                 "%s: has %lld columns but the model's conditioning has C = %d (%s)",
                 path, (long long)cols, width, flag);
  if (!st && *rows == 0)
    st = fg_fail(err, FLOWGEN_INPUT, "%s: has no rows (%s)", path, flag);
  for (int64_t i = 0; !st && i < *rows * cols; ++i)
    if (!isfinite((*out)[i]))
      st = fg_fail(err, FLOWGEN_INPUT,
                   "%s: row %lld, column %lld is %s; the conditioning must be finite",
                   path, (long long)(i / cols), (long long)(i % cols),
                   isnan((*out)[i]) ? "nan" : (*out)[i] > 0 ? "inf" : "-inf");
  if (st) {
    free(*out);
    *out = NULL;
  }
  return st;
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
    if (*batch >= 0 && rows != *batch) {
      st = fg_fail(err, FLOWGEN_INPUT,
                   "%s: has %lld rows but the conditioning (--cond) has %lld",
                   a->x0_path, (long long)rows, (long long)*batch);
      free(*x0);
      *x0 = NULL;
      return st;
    }
    *batch = rows;
    return FLOWGEN_OK;
  }
  if (*batch < 0) *batch = a->batch >= 0 ? a->batch : 16;
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
                               int classes, fg_png_grid *g, flowgen_error *err) {
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
  /* --class all: a row of the picture per class. */
  if (!g->columns && classes > 0 && batch / classes <= 1000) g->columns = (int)(batch / classes);
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

/* Without --weights: the digits model, or for a conditioning (--class,
 * --cond) the digits model trained with the class as a one-hot c. */
static const char *builtin_model(const fg_cli_sample_args *a) {
  return a->cond_path || a->class_index != FG_CLI_CLASS_NONE ? "digits_cond" : "digits";
}

/* A flag that says what the weights are not (the built-in model has a
 * fixed one; a file's act, time and input come from its metadata, and
 * flowrt_weights_load checks only flags other than the defaults). */
static flowgen_status check_model_flags(const fg_cli_sample_args *a, const flowrt_weights *w,
                                        flowgen_error *err) {
  char builtin[64];
  snprintf(builtin, sizeof builtin, "the built-in %s model", builtin_model(a));
  const char *source = a->weights ? a->weights : builtin;
  const flowgen_spec *f = &a->spec;
  char have[64], want[64];
  if (!a->weights && a->dim_given && f->dim != w->dim)
    return fg_fail(err, FLOWGEN_INVALID, "sample: --dim %d: %s has D = %d (give --weights "
                   "for another model)", f->dim, source, w->dim);
  if (!a->weights && a->hidden_given && f->hidden != w->hidden)
    return fg_fail(err, FLOWGEN_INVALID, "sample: --hidden %d: %s has H = %d (give "
                   "--weights for another model)", f->hidden, source, w->hidden);
  if (f->layers && f->layers != w->layers)
    return fg_fail(err, FLOWGEN_INVALID, "sample: --layers %d: %s has L = %d Linear layers",
                   f->layers, source, w->layers);
  if (a->act_given && f->act != w->act)
    return fg_fail(err, FLOWGEN_INVALID, "sample: --act %s: %s has act %s",
                   flowgen_activation_name(f->act), source, flowgen_activation_name(w->act));
  flowgen_spec model = *f;
  flowrt_weights_model(w, &model);
  if (a->time_given) {
    flowgen_time_name(&f->time, want, sizeof want);
    flowgen_time_name(&w->time, have, sizeof have);
    if (strcmp(have, want) != 0)
      return fg_fail(err, FLOWGEN_INVALID, "sample: --time %s: %s has time %s", want, source,
                     have);
  }
  if (a->input_given) {
    flowgen_spec_input_name(f, want, sizeof want);
    flowgen_spec_input_name(&model, have, sizeof have);
    if (strcmp(have, want) != 0)
      return fg_fail(err, FLOWGEN_INVALID, "sample: --input %s: %s has input %s", want,
                     source, have);
  }
  return FLOWGEN_OK;
}

/* The conditioning: --cond (batch x C or 1 x C, broadcast), --class
 * (one-hot), --null-cond; the batch it implies (-1: none). */
static flowgen_status conditioning_of(const fg_cli_sample_args *a, int C, conditioning *c,
                                      int64_t *batch, flowgen_error *err) {
  *batch = -1;
  if (!C && (a->cond_path || a->class_index != FG_CLI_CLASS_NONE))
    return fg_fail(err, FLOWGEN_INVALID, "sample: %s: the model has no conditioning (C = 0)",
                   a->cond_path ? "--cond" : "--class");
  if (C && !a->cond_path && a->class_index == FG_CLI_CLASS_NONE)
    return fg_fail(err, FLOWGEN_INVALID,
                   "sample: the model is conditional (C = %d): give --cond FILE.npy or "
                   "--class N", C);
  if (a->class_index >= C)
    return fg_fail(err, FLOWGEN_INVALID,
                   "sample: --class %d: the model's conditioning has C = %d classes (0 to %d)",
                   a->class_index, C, C - 1);
  flowgen_status st = FLOWGEN_OK;
  int64_t rows = 0, null_rows = 0;
  if (a->null_cond_path) {
    st = read_cond(a->null_cond_path, "--null-cond", C, &c->null_cond, &null_rows, err);
    if (!st && null_rows != 1)
      st = fg_fail(err, FLOWGEN_INPUT, "%s: has %lld rows; the null conditioning is one "
                   "row, 1 x %d (--null-cond)", a->null_cond_path, (long long)null_rows, C);
    if (st) return st;
  }
  if (a->cond_path) {
    st = read_cond(a->cond_path, "--cond", C, &c->cond, &rows, err);
    if (st) return st;
    c->cond_rows = rows;
    if (rows == 1) return FLOWGEN_OK; /* broadcast once the batch is known */
    if (a->batch >= 0 && a->batch != rows)
      return fg_fail(err, FLOWGEN_INPUT, "%s: has %lld rows but --batch is %lld", a->cond_path,
                     (long long)rows, a->batch);
    *batch = rows;
    return FLOWGEN_OK;
  }
  if (a->class_index == FG_CLI_CLASS_ALL) *batch = (int64_t)C * (a->batch >= 0 ? a->batch : 8);
  return FLOWGEN_OK;
}

/* The batch x C conditioning of every sample, once the batch is known: a
 * row of --cond repeated, or one-hot rows of --class. */
static flowgen_status spread_conditioning(const fg_cli_sample_args *a, int C, int64_t batch,
                                          conditioning *c, flowgen_error *err) {
  if (!C || batch == 0) return FLOWGEN_OK;
  bool one_row = a->cond_path && c->cond_rows == 1;
  if (a->cond_path && !one_row) return FLOWGEN_OK;
  float *rows = calloc((size_t)batch * (size_t)C, sizeof *rows);
  if (!rows) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for the conditioning");
  int64_t per_class = a->class_index == FG_CLI_CLASS_ALL ? batch / C : batch;
  for (int64_t r = 0; r < batch; ++r) {
    float *row = rows + r * C;
    if (one_row) memcpy(row, c->cond, (size_t)C * sizeof *row);
    else row[a->class_index == FG_CLI_CLASS_ALL ? r / per_class : a->class_index] = 1.0f;
  }
  free(c->cond);
  c->cond = rows;
  return FLOWGEN_OK;
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
  /* What the flags say of the model, checked against the file as it loads;
   * the rest is read from it. */
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  expect.dim = a.dim_given ? a.spec.dim : 0;
  expect.hidden = a.hidden_given ? a.spec.hidden : 0;
  expect.layers = a.spec.layers;
  expect.act = a.spec.act;
  expect.time = a.spec.time;
  memcpy(expect.input, a.spec.input, sizeof expect.input);
  flowgen_status st = a.weights ? flowrt_weights_load(a.weights, a.prefix, &expect, &w, &err)
                                : flowrt_weights_builtin(builtin_model(&a), &w, &err);
  if (st) return fg_cli_fail(&err);
  if ((st = check_model_flags(&a, w, &err))) {
    flowrt_weights_free(w);
    return fg_cli_usage_error("%s", err.message);
  }
  if (a.verbose) {
    char time[64], source[80];
    snprintf(source, sizeof source, "(built-in %s model)", builtin_model(&a));
    flowgen_time_name(&w->time, time, sizeof time);
    fprintf(stderr, "flowgen: weights %s: D=%d H=%d C=%d L=%d act %s time %s input %c,%c,%c "
            "(%.1f ms)\n", a.weights ? a.weights : source, w->dim,
            w->hidden, w->cond, w->layers, flowgen_activation_name(w->act), time,
            w->input[0], w->input[1], w->input[2], now_ms() - t0);
  }
  flowrt_weights_model(w, &a.spec);
  a.spec.guidance = a.guidance_given;
  conditioning c = {NULL, NULL, 0};
  float *x0 = NULL, *x = NULL;
  int64_t batch = 0;
  st = conditioning_of(&a, w->cond, &c, &batch, &err);
  if (st == FLOWGEN_INVALID) {
    free(c.cond);
    free(c.null_cond);
    flowrt_weights_free(w);
    return fg_cli_usage_error("%s", err.message);
  }
  if (!st) st = starting_points(&a, w->dim, &x0, &batch, &err);
  if (!st) st = spread_conditioning(&a, w->cond, batch, &c, &err);
  fg_png_grid grid = {0};
  if (!st && a.png)
    st = plan_png(&a, batch, w->dim, a.class_index == FG_CLI_CLASS_ALL ? w->cond : 0, &grid,
                  &err);
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
    float guidance = a.guidance_given ? a.guidance : 1.0f;
    st = device == FG_CLI_DEVICE_GPU
             ? sample_gpu(&a, w, x0, x, &c, batch, &err)
             : flowrt_reference_cond(&a.spec, w, x0, x, c.cond, c.null_cond, guidance, batch,
                                     &err);
    if (!st && a.verbose && device == FG_CLI_DEVICE_CPU)
      fprintf(stderr, "flowgen: cpu reference (fp64): %.1f ms\n", now_ms() - t1);
  }
  if (!st) st = write_outputs(&a, &grid, x, batch, w->dim, &err);
  free(x0);
  free(x);
  free(c.cond);
  free(c.null_cond);
  flowrt_weights_free(w);
  return st ? fg_cli_fail(&err) : 0;
}
