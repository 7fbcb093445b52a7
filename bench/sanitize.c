/* Every strategy once, for compute-sanitizer: for a few shapes and solvers,
 * each variant the planner emits is launched at the smallest batch it
 * serves, at an odd batch inside its range and at the largest (where the
 * range ends), and its output is compared
 * with the fp64 reference.  Small on purpose: under racecheck a launch runs
 * orders of magnitude slower.
 *
 * usage: compute-sanitizer --tool memcheck|racecheck|synccheck|initcheck \
 *          --error-exitcode 1 build/sanitize [--light] [--only PREFIX] [--shape D,H]
 *          [--tune K=V,...]
 * --light: two steps per case and only the smallest batch of each variant
 * (racecheck runs a launch hundreds of times slower than it would run).
 * --only: the variants whose strategy starts with PREFIX (e.g. grid).
 * --shape: the cases of that state dimension and hidden width only (each
 * case compiles its whole module first, which takes most of a light run).
 * --tune: planner overrides for every case (docs/tuning.md), as
 * flowrt_options.tune.
 * The model family too: conditioning (the cond kernel's three tilings,
 * the cluster kernel, folded or not, wgstream), guidance (the cluster
 * kernel's too), L = 2 and 5, sin time, other activations.
 * exit status: 0 when every output matches, 1 otherwise, 2 on a bad flag
 * (or a --shape no case has).
 */
#include "flowrt.h"
#include "random.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(flowrt_sampler *s, const flowgen_spec *spec, const flowrt_weights *w,
                 const char *strategy, int64_t batch, double tolerance, float guidance) {
  size_t n = (size_t)batch * spec->dim, C = (size_t)spec->cond;
  float *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
  int64_t rows = batch < 16 ? batch : 16, stride = batch / rows;
  float *sub = malloc((size_t)rows * spec->dim * sizeof *sub);
  double *ref = malloc((size_t)rows * spec->dim * sizeof *ref);
  float *cond = C ? malloc((size_t)batch * C * sizeof *cond) : NULL;
  float *subc = C ? malloc((size_t)rows * C * sizeof *subc) : NULL;
  flowgen_error err;
  int bad = 1;
  if (!x0 || !x || !sub || !ref || (C && (!cond || !subc))) {
    fprintf(stderr, "sanitize: out of memory\n");
    goto done;
  }
  bench_fill(x0, n, 2.0f);
  if (C) bench_fill(cond, (size_t)batch * C, 1.0f);
  for (size_t i = 0; i < n; ++i) x[i] = NAN;
  if (flowrt_sample_host_cond(s, x0, x, cond, NULL, guidance, batch, &err)) {
    fprintf(stderr, "sanitize: %s\n", err.message);
    goto done;
  }
  for (int64_t r = 0; r < rows; ++r) {
    memcpy(sub + r * spec->dim, x0 + r * stride * spec->dim, spec->dim * sizeof *sub);
    if (C) memcpy(subc + r * C, cond + r * stride * C, C * sizeof *subc);
  }
  if (flowrt_reference_cond_f64(spec, w, sub, ref, subc, NULL, guidance, rows, &err)) {
    fprintf(stderr, "sanitize: %s\n", err.message);
    goto done;
  }
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int d = 0; d < spec->dim; ++d) {
      double diff = x[(size_t)r * stride * spec->dim + d] - ref[r * spec->dim + d];
      num += diff * diff;
      den += ref[r * spec->dim + d] * ref[r * spec->dim + d];
    }
  for (size_t i = 0; i < n; ++i)
    if (isnan(x[i])) num = INFINITY;
  double e = sqrt(num / (den > 0 ? den : 1));
  bad = !(e <= tolerance);
  printf("%s %-8s D=%-4d H=%-4d S=%-3d %-16s B=%-6lld relerr %.2e%s\n",
         flowgen_precision_name(spec->precision), flowgen_solver_name(spec->solver), spec->dim,
         spec->hidden, spec->steps, strategy,
         (long long)batch, e, bad ? "  FAILED" : "");
done:
  free(cond);
  free(subc);
  free(x0);
  free(x);
  free(sub);
  free(ref);
  return bad;
}

int main(int argc, char **argv) {
  bool light = false;
  const char *only = "";
  int shape_dim = 0, shape_hidden = 0;  /* 0: every case */
  const char *tune = NULL;
  for (int i = 1; i < argc; ++i) {
    char tail;
    if (strcmp(argv[i], "--light") == 0) {
      light = true;
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
      tune = *argv[++i] ? argv[i] : NULL; /* "": the plan as it is */
    } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc &&
               sscanf(argv[i + 1], "%d,%d%c", &shape_dim, &shape_hidden, &tail) == 2 && shape_dim > 0 &&
               shape_hidden > 0) {
      ++i;
    } else {
      fprintf(stderr, "usage: sanitize [--light] [--only STRATEGY-PREFIX] [--shape D,H] "
                      "[--tune K=V,...]\n");
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);  /* progress shows even if the run is cut short */
  static const struct {
    int dim, hidden, steps;
    flowgen_solver solver;
    flowgen_precision precision;
    double tolerance;
    /* a member of the family (zeros: the seed) */
    int cond, layers;
    const char *act, *time;
    float guidance;  /* 0: none */
  } cases[] = {
      {64, 256, 4, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-6},
      {64, 256, 2, FLOWGEN_SOLVER_RK4, FLOWGEN_PRECISION_FP32, 1e-6},
      {3, 12, 5, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-6},
      {17, 68, 3, FLOWGEN_SOLVER_HEUN, FLOWGEN_PRECISION_FP32, 1e-6},
      {32, 128, 3, FLOWGEN_SOLVER_MIDPOINT, FLOWGEN_PRECISION_FP32, 1e-6},
      {64, 128, 3, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-6},  /* the cluster kernel's fold */
      {52, 150, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-6},  /* rmma3 by 8 and 16, padded; 8 state elements a thread by 16 */
      {128, 512, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-6},
      {128, 128, 2, FLOWGEN_SOLVER_RK4, FLOWGEN_PRECISION_FP32, 1e-6},
      {64, 512, 2, FLOWGEN_SOLVER_RK4, FLOWGEN_PRECISION_FP32, 1e-6},
      {64, 256, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_BF16, 1e-2},
      {3, 100, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_TF32, 1e-4},
      {40, 96, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_TF32, 1e-4},  /* rmma_c2: three warps a block */
      {64, 256, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_TF32, 1e-4},  /* wgstream: staggered, W1 by 32 */
      {33, 130, 2, FLOWGEN_SOLVER_HEUN, FLOWGEN_PRECISION_FP16, 1e-2},
      {17, 200, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP16, 1e-2},  /* wgmma: 208 = 3 x 64 + 16 */
      /* the family: the cluster kernel, tiled and wgstream3 with a conditioning */
      {64, 256, 3, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-5, 40, 0, NULL, NULL, 0},
      {64, 128, 3, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-5, 300, 0, "gelu", NULL, 0},  /* folded */
      {64, 256, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_TF32, 1e-4, 40, 0, NULL, "sin:16", 0},
      {64, 256, 2, FLOWGEN_SOLVER_MIDPOINT, FLOWGEN_PRECISION_BF16, 1e-2, 40, 0, "tanh", NULL, 0},
      {64, 256, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-5, 40, 0, NULL, NULL, 2.0f},
      {32, 128, 2, FLOWGEN_SOLVER_RK4, FLOWGEN_PRECISION_FP32, 1e-5, 0, 2, "relu", NULL, 0},
      {32, 128, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-5, 8, 5, "gelu_tanh", "sin:16", 2.0f},
      /* the cluster kernel with guidance: folded; layer 2 by lanes, four stages */
      {64, 128, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP32, 1e-5, 300, 0, "gelu", NULL, 2.0f},
      {16, 64, 2, FLOWGEN_SOLVER_RK4, FLOWGEN_PRECISION_FP32, 1e-5, 8, 0, "relu", NULL, 2.0f},
      /* gemm on each precision's own operands, where its mma kernel does
       * not fit (--tune only=tiled:gemm --only gemm --shape 33,2048 or
       * 64,2048; fp32 as tf32x3, with guidance) */
      {33, 2048, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_BF16, 2e-2},
      {33, 2048, 2, FLOWGEN_SOLVER_HEUN, FLOWGEN_PRECISION_TF32, 2e-4},
      {64, 2048, 2, FLOWGEN_SOLVER_EULER, FLOWGEN_PRECISION_FP16, 2e-2, 40, 0, NULL, NULL, 2.0f},
      {33, 2048, 2, FLOWGEN_SOLVER_HEUN, FLOWGEN_PRECISION_FP32, 1e-6, 40, 0, NULL, NULL, 2.0f},
  };
  bool any = !shape_dim;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c)
    any = any || (cases[c].dim == shape_dim && cases[c].hidden == shape_hidden);
  if (!any) {
    fprintf(stderr, "sanitize: no case has D=%d, H=%d\n", shape_dim, shape_hidden);
    return 2;
  }
  flowgen_error err;
  flowrt_runtime *rt = NULL;
  flowrt_options opts = {.disk_cache = 0, .tune = tune};
  if (flowrt_open(&opts, &rt, &err)) {
    fprintf(stderr, "sanitize: %s\n", err.message);
    return 1;
  }
  int failures = 0;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c) {
    if (shape_dim && (cases[c].dim != shape_dim || cases[c].hidden != shape_hidden)) continue;
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    spec.dim = cases[c].dim;
    spec.hidden = cases[c].hidden;
    spec.steps = light && cases[c].steps > 2 ? 2 : cases[c].steps;
    spec.solver = cases[c].solver;
    spec.precision = cases[c].precision;
    spec.cond = cases[c].cond;
    spec.layers = cases[c].layers;
    spec.guidance = cases[c].guidance != 0;
    if ((cases[c].act && flowgen_spec_set(&spec, "act", cases[c].act, &err)) ||
        (cases[c].time && flowgen_spec_set(&spec, "time", cases[c].time, &err))) {
      fprintf(stderr, "sanitize: %s\n", err.message);
      return 1;
    }
    float guidance = cases[c].guidance != 0 ? cases[c].guidance : 1.0f;
    flowrt_weights *w = NULL;
    if (flowrt_weights_alloc(&spec, &w, &err)) {
      fprintf(stderr, "sanitize: %s\n", err.message);
      return 1;
    }
    bench_fill_weights(w);
    flowrt_sampler *s = NULL;
    if (flowrt_sampler_create(rt, &spec, w, &s, &err)) {
      fprintf(stderr, "sanitize: %s\n", err.message);
      return 1;
    }
    const flowgen_kernel *k = flowrt_sampler_kernel(s);
    for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
      const flowgen_variant *v = flowgen_kernel_variant(k, i);
      /* (a fallback alone, no batch of its own: sanitized where it has) */
      if (strncmp(v->strategy, only, strlen(only)) != 0 || v->max_batch == 0) continue;
      int64_t lo = v->min_batch > 0 ? v->min_batch : 1;
      int64_t hi = v->max_batch >= 0 ? v->max_batch : lo + 2 * v->rows_per_block + 3;
      failures += check(s, &spec, w, v->strategy, lo, cases[c].tolerance, guidance);
      int64_t odd = (lo + hi) / 2 | 1;
      if (odd > hi) odd = hi;
      if (odd != lo && !light) failures += check(s, &spec, w, v->strategy, odd, cases[c].tolerance, guidance);
      /* the largest batch too (the gemm kernel's tallest tiles at D=128,
       * H=512: B=4224) */
      if (v->max_batch >= 0 && hi != odd && hi != lo && !light)
        failures += check(s, &spec, w, v->strategy, hi, cases[c].tolerance, guidance);
    }
    /* the conditioning kernel's matrix-unit tiles: from 128 tiles of 128
     * samples x 64 units (sm_80 on) */
    const int64_t col_tiles = (spec.hidden + 63) / 64, big = 128 * ((128 + col_tiles - 1) / col_tiles);
    if (spec.cond && !light && strncmp("cond", only, strlen(only)) == 0)
      failures += check(s, &spec, w, "cond-tf32x3", big, cases[c].tolerance, guidance);
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
  }
  flowrt_close(rt);
  printf("sanitize: %d failed\n", failures);
  return failures ? 1 : 0;
}
