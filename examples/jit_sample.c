/*
 * jit_sample: the runtime at program start.  Loads a model's weights from a
 * safetensors file, JIT-compiles the kernel for its shape (NVRTC, or a
 * cached module), samples a batch from N(0, 1) noise and prints the result.
 *
 *   jit_sample WEIGHTS.safetensors [--steps S] [--batch N] [--seed N] [--check]
 *              [--cond V1,V2,...] [--guidance W]
 *
 * A conditional model (C > 0, flowgen.* metadata in the file) needs --cond:
 * its C values, the same for every sample; --guidance W samples with
 * classifier-free guidance (null conditioning zeros).
 *
 * Every failure prints one line "jit_sample: message" and exits with
 * flowgen_exit_code() of the status: 2 usage, 5 no CUDA driver or device,
 * 6 bad weights file, ... (the codes of the flowgen CLI).
 */
#include <flowrt.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "jit_sample"
#define USAGE                                                                 \
  "usage: jit_sample WEIGHTS.safetensors [--steps S] [--batch N] [--seed N] " \
  "[--check] [--cond V1,V2,...] [--guidance W]"
#define BATCH_MAX (1 << 24)
#define ROWS_SHOWN 4
#define COLUMNS_SHOWN 8
#define CHECK_TOLERANCE 1e-6 /* relative L2, fp32 kernel vs fp64 reference */

typedef struct args {
  const char *weights;  /* safetensors file */
  const char *steps;    /* NULL = the library's default (32) */
  int64_t batch;
  uint64_t seed;
  bool check;           /* compare with the fp64 CPU reference */
  const char *cond;     /* "V1,V2,...": the conditioning, NULL = none */
  const char *guidance; /* NULL = no guidance */
} args;

static int fail(const flowgen_error *err) {
  bool no_gpu = err->status == FLOWGEN_NO_DRIVER || err->status == FLOWGEN_NO_DEVICE;
  fprintf(stderr, PROGRAM ": %s%s\n", no_gpu ? "sampling needs a CUDA GPU: " : "",
          err->message);
  return flowgen_exit_code(err->status);
}

static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, PROGRAM ": %s '%s' (" USAGE ")\n", what, arg);
  return flowgen_exit_code(FLOWGEN_INVALID);
}

static void warn(void *ctx, const char *message) {
  (void)ctx;
  fprintf(stderr, PROGRAM ": warning: %s\n", message);
}

/* Strict decimal: digits only, no sign, no spaces, in [min, max]. */
static bool parse_u64(const char *text, uint64_t min, uint64_t max,
                      uint64_t *out) {
  uint64_t v = 0;
  if (!*text) return false;
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    unsigned digit = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = 10 * v + digit;
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, args *a) {
  *a = (args){.batch = 8, .seed = 1};
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      puts(USAGE);
      return 0;
    }
    if (strcmp(arg, "--check") == 0) {
      a->check = true;
      continue;
    }
    bool is_steps = strcmp(arg, "--steps") == 0;
    bool is_batch = strcmp(arg, "--batch") == 0;
    bool is_seed = strcmp(arg, "--seed") == 0;
    bool is_cond = strcmp(arg, "--cond") == 0;
    bool is_guidance = strcmp(arg, "--guidance") == 0;
    if (is_steps || is_batch || is_seed || is_cond || is_guidance) {
      if (i + 1 >= argc) return usage_error("missing value after", arg);
      const char *value = argv[++i];
      uint64_t v = 0;
      if (is_cond) {
        a->cond = value; /* parsed once C is known */
      } else if (is_guidance) {
        a->guidance = value;
      } else if (is_steps) {
        a->steps = value; /* checked by flowgen_spec_set */
      } else if (is_batch) {
        if (!parse_u64(value, 1, BATCH_MAX, &v))
          return usage_error("--batch: expected 1 to 16777216, got", value);
        a->batch = (int64_t)v;
      } else {
        if (!parse_u64(value, 0, UINT64_MAX, &v))
          return usage_error("--seed: expected a decimal integer, got", value);
        a->seed = v;
      }
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return usage_error("unknown option", arg);
    } else if (a->weights) {
      return usage_error("unexpected argument", arg);
    } else {
      a->weights = arg;
    }
  }
  if (!a->weights) {
    fprintf(stderr, PROGRAM ": no weights file given (" USAGE ")\n");
    return flowgen_exit_code(FLOWGEN_INVALID);
  }
  return -1;
}

/* "V1,V2,...": exactly count finite decimals into out. */
static bool parse_values(const char *text, float *out, int count) {
  const char *p = text;
  for (int i = 0; i < count; ++i) {
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p || !isfinite(v) || !isfinite((float)v)) return false;
    out[i] = (float)v;
    if (*end != (i + 1 < count ? ',' : '\0')) return false;
    p = end + 1;
  }
  return true;
}

/* ---- x0 ~ N(0, 1): Box-Muller over splitmix64 ----------------------------- */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so log() below is finite. */
static double uniform01(uint64_t *state) {
  return ((double)(splitmix64(state) >> 11) + 1.0) / 9007199254740992.0;
}

static void fill_normal(float *out, size_t n, uint64_t seed) {
  const double two_pi = 6.283185307179586476925;
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 2) {
    double r = sqrt(-2.0 * log(uniform01(&state)));
    double theta = two_pi * uniform01(&state);
    out[i] = (float)(r * cos(theta));
    if (i + 1 < n) out[i + 1] = (float)(r * sin(theta));
  }
}

/* ---- output ----------------------------------------------------------------- */

static void print_stats(const flowrt_sampler *sampler) {
  const flowrt_stats *s = flowrt_sampler_stats(sampler);
  const char *source = s->memory_hit ? "memory cache hit"
                       : s->disk_hit ? "disk cache hit"
                                     : "compiled with NVRTC";
  printf("module:  %s (generate %.2f ms, compile %.2f ms, load %.2f ms, "
         "upload %.2f ms)\n",
         source, s->generate_ms, s->compile_ms, s->load_ms, s->upload_ms);
}

static void print_samples(const float *x, int64_t batch, int dim) {
  int64_t rows = batch < ROWS_SHOWN ? batch : ROWS_SHOWN;
  int cols = dim < COLUMNS_SHOWN ? dim : COLUMNS_SHOWN;
  printf("samples: %lld x %d%s\n", (long long)batch, dim,
         rows < batch || cols < dim ? " (first rows and columns)" : "");
  for (int64_t r = 0; r < rows; ++r) {
    printf("  x[%lld] =", (long long)r);
    for (int c = 0; c < cols; ++c) printf(" %.6f", x[r * dim + c]);
    printf("%s\n", cols < dim ? " ..." : "");
  }
}

/* ||x - ref|| / ||ref|| against the fp64 CPU reference. */
static flowgen_status check(const flowgen_spec *spec, const flowrt_weights *w,
                            const float *x0, const float *x, const float *cond,
                            float guidance, int64_t batch, double *relerr,
                            flowgen_error *err) {
  size_t n = (size_t)batch * (size_t)spec->dim;
  double *ref = malloc(n * sizeof *ref);
  if (!ref) {
    snprintf(err->message, sizeof err->message, "out of memory");
    return err->status = FLOWGEN_NOMEM;
  }
  flowgen_status st =
      flowrt_reference_cond_f64(spec, w, x0, ref, cond, NULL, guidance, batch, err);
  double num = 0, den = 0;
  for (size_t i = 0; i < n && !st; ++i) {
    double d = (double)x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  *relerr = sqrt(num / (den > 0 ? den : 1));
  if (isnan(*relerr)) *relerr = INFINITY;
  free(ref);
  return st;
}

int main(int argc, char **argv) {
  args a;
  int code = parse_args(argc, argv, &a);
  if (code >= 0) return code;

  flowgen_error err;
  flowrt_weights *weights = NULL;
  flowrt_runtime *rt = NULL;
  flowrt_sampler *sampler = NULL;
  float *x0 = NULL, *x = NULL, *cond = NULL, guidance = 1.0f;

  /* The model comes from the file (its shapes and metadata: expect NULL);
   * the number of steps is the caller's choice. */
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  if (a.steps && flowgen_spec_set(&spec, "steps", a.steps, &err))
    return fail(&err);
  if (flowrt_weights_load(a.weights, NULL, NULL, &weights, &err))
    return fail(&err);
  flowrt_weights_model(weights, &spec);
  /* The conditioning: one row of C values, repeated for every sample. */
  if (!spec.cond != !a.cond || (a.guidance && !a.cond)) {
    char what[128];
    if (spec.cond)
      snprintf(what, sizeof what, "the model is conditional (C = %d): give --cond V1,...,V%d for",
               spec.cond, spec.cond);
    else
      snprintf(what, sizeof what, "--cond and --guidance need a conditional model, not");
    flowrt_weights_free(weights);
    return usage_error(what, a.weights);
  }
  if (a.guidance) {
    float w = 0;
    if (!parse_values(a.guidance, &w, 1)) {
      flowrt_weights_free(weights);
      return usage_error("--guidance: expected a finite number, got", a.guidance);
    }
    guidance = w;
    spec.guidance = true;
  }
  if (a.cond) {
    size_t n = (size_t)a.batch * (size_t)spec.cond;
    float *row = malloc((size_t)spec.cond * sizeof *row);
    cond = malloc(n * sizeof *cond);
    bool parsed = row && cond && parse_values(a.cond, row, spec.cond);
    for (size_t i = 0; parsed && i < n; ++i) cond[i] = row[i % (size_t)spec.cond];
    free(row);
    if (!parsed) {
      free(cond);
      flowrt_weights_free(weights);
      return usage_error("--cond: expected the model's C comma-separated values, got", a.cond);
    }
  }

  char family[64] = ""; /* what differs from the seed model's shape */
  if (spec.cond) snprintf(family, sizeof family, ", C=%d", spec.cond);
  if (weights->layers != 3)
    snprintf(family + strlen(family), sizeof family - strlen(family), ", L=%d", weights->layers);
  printf("weights: %s (D=%d, H=%d%s), %d Euler steps, batch %lld, seed %llu\n", a.weights,
         spec.dim, spec.hidden, family, spec.steps, (long long)a.batch,
         (unsigned long long)a.seed);

  /* Compiling at start-up costs NVRTC time once; later runs find the module
   * in the disk cache ($FLOWGEN_CACHE_DIR, else ~/.cache/flowgen). */
  flowrt_options opts = {.device = 0, .disk_cache = -1, .warn = warn};
  flowgen_status st = flowrt_open(&opts, &rt, &err);
  if (!st) st = flowrt_sampler_create(rt, &spec, weights, &sampler, &err);
  if (!st) {
    const flowgen_kernel *kernel = flowrt_sampler_kernel(sampler);
    const flowgen_variant *v = flowgen_kernel_pick(kernel, a.batch);
    printf("kernel:  %s (strategy %s, sm_%d)\n", v->symbol, v->strategy,
           flowgen_kernel_spec(kernel)->arch);
    print_stats(sampler);
  }

  size_t n = (size_t)a.batch * (size_t)spec.dim;
  if (!st && (!(x0 = malloc(n * sizeof *x0)) || !(x = malloc(n * sizeof *x)))) {
    snprintf(err.message, sizeof err.message, "out of memory for %zu floats", n);
    st = err.status = FLOWGEN_NOMEM;
  }
  if (!st) {
    fill_normal(x0, n, a.seed);
    st = flowrt_sample_host_cond(sampler, x0, x, cond, NULL, guidance, a.batch, &err);
  }
  if (!st) print_samples(x, a.batch, spec.dim);

  double relerr = 0;
  if (!st && a.check &&
      !(st = check(&spec, weights, x0, x, cond, guidance, a.batch, &relerr, &err))) {
    printf("check:   relative L2 error vs fp64 reference %.3e (tolerance %.0e)\n",
           relerr, CHECK_TOLERANCE);
    if (!(relerr <= CHECK_TOLERANCE)) {
      snprintf(err.message, sizeof err.message,
               "the samples differ from the fp64 reference by %.3e (> %.0e)",
               relerr, CHECK_TOLERANCE);
      st = err.status = FLOWGEN_INTERNAL;
    }
  }

  code = st ? fail(&err) : 0;
  free(x);
  free(x0);
  free(cond);
  flowrt_sampler_destroy(sampler);
  flowrt_close(rt);
  flowrt_weights_free(weights);
  return code;
}
