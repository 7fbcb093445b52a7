/* flowgen benchmark: device time of the generated kernels against the fp64
 * reference and a naive baseline (one block per sample, weights read from
 * global memory), plus start-up costs (cold compile, disk hit, memory hit)
 * and the host cost of one launch.
 *
 * Method: CUDA events around each launch (queued behind a hold kernel, so
 * no host time is in them), warm-up first, median of many runs; inputs
 * drawn at random (several sets, rotated), the output poisoned with NaN
 * before every run and checked for unwritten elements; error as relative
 * L2 norm against the fp64 reference.
 *
 * usage: bench [--quick] [--json FILE] [--warmup-ms MS] [--hold-us US] [--shapes D,H,S;...]
 *              [--batches B,...] [--precisions fp32,tf32,bf16,fp16]
 *              [--no-startup] [--no-baseline] [--tune K=V,...] [--cache-dir DIR]
 *              [--cond C] [--layers L] [--act A] [--time T] [--guidance W] [--family]
 * --tune: planner overrides for every sampler (docs/tuning.md), as
 * flowrt_options.tune; recorded in the JSON.
 * --cache-dir: the kernels read from (and written to) this disk cache: a
 * sweep run again compiles nothing (default: memory only, each compiled
 * here).
 * --cond ... --guidance W: a member of the model family (random weights of
 * its shape, a random conditioning per sample; W the guidance weight).
 * --family: the family's cost table at D=64, H=256, S=32: each member
 * beside the seed, fp32 and bf16, at B = 1, 8, 1024, 65536 (the ratio to
 * the seed's time in the same run).
 */
#include "cuda_api.h"
#include "flowrt.h"
#include "module_cache.h"
#include "random.h"

#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                         \
  do {                                                                      \
    CUresult r_ = (call);                                                   \
    if (r_ != CUDA_SUCCESS) {                                               \
      const char *n_ = "?";                                                 \
      fg_cuda(NULL)->cuGetErrorName(r_, &n_);                               \
      fprintf(stderr, "bench: %s:%d: %s failed: %s\n", __FILE__, __LINE__,  \
              #call, n_);                                                   \
      exit(5);                                                              \
    }                                                                       \
  } while (0)

#define FLOWGEN_CHECK(call)                                                 \
  do {                                                                      \
    flowgen_error e_;                                                       \
    if ((call) != FLOWGEN_OK) {                                             \
      fprintf(stderr, "bench: %s:%d: %s\n", __FILE__, __LINE__, e_.message); \
      exit(flowgen_exit_code(e_.status));                                   \
    }                                                                       \
  } while (0)
#define ERR (&e_)

/* Driver calls the runtime itself does not need. */
static struct {
  CUresult (*event_create)(CUevent *, unsigned);
  CUresult (*event_destroy)(CUevent);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_sync)(CUevent);
  CUresult (*event_elapsed)(float *, CUevent, CUevent);
  CUresult (*memset32)(CUdeviceptr, unsigned, size_t);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, CUstream, void **, void **);
} drv;

static void load_extra_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) {
    fprintf(stderr, "bench: libcuda.so.1 is not loaded\n");
    exit(5);
  }
  *(void **)&drv.event_create = dlsym(h, "cuEventCreate");
  *(void **)&drv.event_destroy = dlsym(h, "cuEventDestroy_v2");
  *(void **)&drv.event_record = dlsym(h, "cuEventRecord");
  *(void **)&drv.event_sync = dlsym(h, "cuEventSynchronize");
  *(void **)&drv.event_elapsed = dlsym(h, "cuEventElapsedTime_v2");
  if (!drv.event_elapsed) *(void **)&drv.event_elapsed = dlsym(h, "cuEventElapsedTime");
  *(void **)&drv.memset32 = dlsym(h, "cuMemsetD32_v2");
  *(void **)&drv.launch = dlsym(h, "cuLaunchKernel");
  if (!drv.event_create || !drv.event_destroy || !drv.event_record || !drv.event_sync ||
      !drv.event_elapsed || !drv.memset32 || !drv.launch) {
    fprintf(stderr, "bench: the driver lacks event or memset functions\n");
    exit(5);
  }
}

/* ---- inputs ---------------------------------------------------------------- */

static flowrt_weights *random_weights(const flowgen_spec *model) {
  flowrt_weights *w = NULL;
  FLOWGEN_CHECK(flowrt_weights_alloc(model, &w, ERR));
  bench_fill_weights(w);
  return w;
}

/* ---- the naive baseline ------------------------------------------------------ */

/* One block per sample, hidden activations in shared memory, every weight
 * read from global memory (PyTorch layout) at every step. */
static const char baseline_source[] =
    "extern \"C\" __global__ void baseline(const float* x0, float* x, long long batch,\n"
    "    const float* w1, const float* b1, const float* w2, const float* b2,\n"
    "    const float* w3, const float* b3, int D, int H, int S)\n"
    "{\n"
    "  extern __shared__ float s[];\n"
    "  float* xs = s; float* h1 = s + D; float* h2 = h1 + H;\n"
    "  const long long r = blockIdx.x;\n"
    "  for (int i = threadIdx.x; i < D; i += blockDim.x) xs[i] = x0[r * D + i];\n"
    "  __syncthreads();\n"
    "  for (int k = 0; k < S; ++k) {\n"
    "    const float t = (k + 0.5f) / S;\n"
    "    for (int j = threadIdx.x; j < H; j += blockDim.x) {\n"
    "      float a = b1[j] + w1[j * (D + 1) + D] * t;\n"
    "      for (int i = 0; i < D; ++i) a += w1[j * (D + 1) + i] * xs[i];\n"
    "      h1[j] = a / (1.0f + expf(-a));\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int j = threadIdx.x; j < H; j += blockDim.x) {\n"
    "      float a = b2[j];\n"
    "      for (int i = 0; i < H; ++i) a += w2[j * H + i] * h1[i];\n"
    "      h2[j] = a / (1.0f + expf(-a));\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int j = threadIdx.x; j < D; j += blockDim.x) {\n"
    "      float a = b3[j];\n"
    "      for (int i = 0; i < H; ++i) a += w3[j * H + i] * h2[i];\n"
    "      xs[j] += a / S;\n"
    "    }\n"
    "    __syncthreads();\n"
    "  }\n"
    "  for (int i = threadIdx.x; i < D; i += blockDim.x) x[r * D + i] = xs[i];\n"
    "}\n"
    "\n"
    "// Keeps the stream busy for ns nanoseconds (see time_runs).\n"
    "extern \"C\" __global__ void hold(unsigned long long ns)\n"
    "{\n"
    "  unsigned long long t0, t;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "  do asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); while (t - t0 < ns);\n"
    "}\n";

typedef struct baseline {
  CUmodule module;
  CUfunction fn, hold;
  CUdeviceptr w[6];
} baseline;

static void baseline_init(baseline *b, const flowrt_weights *w, int arch) {
  void *image = NULL;
  size_t size = 0;
  FLOWGEN_CHECK(flowrt_compile(baseline_source, strlen(baseline_source), "baseline.cu",
                               arch, FLOWRT_TARGET_CUBIN, false, &image, &size, NULL, ERR));
  const fg_cuda_api *cu = fg_cuda(NULL);
  CHECK(cu->cuModuleLoadData(&b->module, image));
  free(image);
  CHECK(cu->cuModuleGetFunction(&b->fn, b->module, "baseline"));
  CHECK(cu->cuModuleGetFunction(&b->hold, b->module, "hold"));
  /* The baseline serves the seed model only; for another member the
   * module is kept for its hold kernel. */
  if (w->layers != 3 || w->cond != 0 || w->time_width != 1) return;
  const size_t D = w->dim, H = w->hidden;
  const size_t n[6] = {H * (D + 1), H, H * H, H, D * H, D};
  const float *src[6] = {w->w[0], w->b[0], w->w[1], w->b[1], w->w[2], w->b[2]};
  for (int i = 0; i < 6; ++i) {
    CHECK(cu->cuMemAlloc(&b->w[i], n[i] * 4));
    CHECK(cu->cuMemcpyHtoD(b->w[i], src[i], n[i] * 4));
  }
}

static void baseline_free(baseline *b) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  for (int i = 0; i < 6; ++i)
    if (b->w[i]) cu->cuMemFree(b->w[i]);
  cu->cuModuleUnload(b->module);
}

/* ---- timing ------------------------------------------------------------------ */

typedef struct timing {
  double median_us, min_us, max_us;
} timing;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct run_ctx {
  flowrt_sampler *sampler; /* or NULL for the baseline */
  baseline *base;          /* the baseline, and the hold kernel of time_runs */
  const flowgen_spec *spec;
  CUdeviceptr *x0;         /* input sets, rotated */
  int sets;
  CUdeviceptr x;
  int64_t batch;
  CUstream stream;
  CUdeviceptr cond;        /* the member's conditioning (0: none) */
  const float *host_cond;  /* the same on the host */
  float guidance;
  bool quick;              /* --quick: fewer reference rows */
} run_ctx;

static void launch(const run_ctx *c, int set) {
  if (c->sampler && c->cond) {
    FLOWGEN_CHECK(flowrt_sample_cond(c->sampler, c->x0[set], c->x, c->cond, 0, c->guidance,
                                     c->batch, c->stream, ERR));
    return;
  }
  if (c->sampler) {
    FLOWGEN_CHECK(flowrt_sample(c->sampler, c->x0[set], c->x, c->batch, c->stream, ERR));
    return;
  }
  int D = c->spec->dim, H = flowgen_spec_hidden(c->spec), S = c->spec->steps;
  long long batch = c->batch;
  void *args[] = {&c->x0[set], (void *)&c->x, &batch, &c->base->w[0], &c->base->w[1],
                  &c->base->w[2], &c->base->w[3], &c->base->w[4], &c->base->w[5],
                  &D, &H, &S};
  CHECK(drv.launch(c->base->fn, (unsigned)c->batch, 1, 1, 256, 1, 1,
                   (unsigned)((D + 2 * H) * 4), c->stream, args, NULL));
}

static double warmup_ms = 200;

/* Launches until warmup_ms of wall time have passed (at least `warmup`
 * launches, but no more than one when a launch alone takes longer), so that
 * the GPU has left its idle clocks before timing.  Returns the wall time of
 * one launch in ms. */
static double warm_up(const run_ctx *c, int warmup) {
  double t0 = fg_now_ms();
  launch(c, 0);
  CHECK(fg_cuda(NULL)->cuCtxSynchronize());
  double one = fg_now_ms() - t0;
  if (one < warmup_ms) {
    for (int i = 1; i < warmup || fg_now_ms() - t0 < warmup_ms; ++i) {
      launch(c, i % c->sets);
      if (i % 64 == 63) CHECK(fg_cuda(NULL)->cuCtxSynchronize());
    }
    CHECK(fg_cuda(NULL)->cuCtxSynchronize());
  }
  return one;
}

/* Times up to `runs` launches, fewer (at least 5) where they would take more
 * than budget_ms in all.  Each launch waits in the stream behind a kernel
 * that holds the GPU for hold_us (longer than the host takes to enqueue
 * the start event, the launch and the stop event), so the events time the
 * GPU's work alone, as a CUDA graph's replay or a stream of launches sees
 * it; --hold-us 0 records the start event on an idle stream instead (then
 * the host's cost of the call is in the time too). */
static double budget_ms = 3000;
static double hold_us = 50;

static timing time_runs(const run_ctx *c, int warmup, int runs) {
  CUevent start, stop;
  CHECK(drv.event_create(&start, 0));
  CHECK(drv.event_create(&stop, 0));
  size_t n = (size_t)c->batch * c->spec->dim;
  double one = warm_up(c, warmup);
  if (one * runs > budget_ms) runs = one > 0 ? (int)(budget_ms / one) : runs;
  if (runs < 5) runs = 5;
  double *t = malloc(sizeof(double) * runs);
  for (int i = 0; i < runs; ++i) {
    CHECK(drv.memset32(c->x, 0x7fc00000u, n)); /* poison: NaN */
    if (hold_us > 0) {
      unsigned long long ns = (unsigned long long)(hold_us * 1e3);
      void *args[] = {&ns};
      CHECK(drv.launch(c->base->hold, 1, 1, 1, 1, 1, 1, 0, c->stream, args, NULL));
    }
    CHECK(drv.event_record(start, c->stream));
    launch(c, i % c->sets);
    CHECK(drv.event_record(stop, c->stream));
    CHECK(drv.event_sync(stop));
    float ms = 0;
    CHECK(drv.event_elapsed(&ms, start, stop));
    t[i] = ms * 1e3;
  }
  qsort(t, runs, sizeof *t, cmp_double);
  timing r = {t[runs / 2], t[0], t[runs - 1]};
  free(t);
  drv.event_destroy(start);
  drv.event_destroy(stop);
  return r;
}

/* The velocity's products a sample (the conditioning's once, the hidden
 * layers twice with guidance). */
static double flops_per_sample(const flowgen_spec *s) {
  double D = s->dim, H = flowgen_spec_hidden(s), L = flowgen_spec_layers(s);
  double hidden = (L - 2) * H * H * (s->guidance ? 2 : 1);
  return 2.0 * s->steps * ((D + 1) * H + hidden + H * D) + 2.0 * s->cond * H;
}

static bool is_seed(const flowgen_spec *s) {
  return s->cond == 0 && flowgen_spec_layers(s) == 3 && s->act == FLOWGEN_ACT_SILU &&
         s->time.features == 0 && !s->guidance && (!s->input[0] || strcmp(s->input, "xtc") == 0);
}

/* Relative L2 error of the last run's output (input set `set`) on up to
 * 256 rows spread over the batch; NaN if any element was left unwritten. */
static double check_output(const run_ctx *c, const flowrt_weights *w,
                           const float *host_x0, int set) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  size_t D = c->spec->dim, n = (size_t)c->batch * D;
  CHECK(drv.memset32(c->x, 0x7fc00000u, n));
  launch(c, set);
  CHECK(cu->cuCtxSynchronize());
  float *x = malloc(n * 4);
  CHECK(cu->cuMemcpyDtoH(x, c->x, n * 4));
  for (size_t i = 0; i < n; ++i)
    if (isnan(x[i])) {
      free(x);
      return NAN;
    }
  /* At most 256 rows, and no more than about 2e10 flop of reference (2e9
   * under --quick: a sweep's hundreds of points). */
  int64_t rows = (int64_t)((c->quick ? 2e9 : 2e10) / flops_per_sample(c->spec));
  if (rows > 256) rows = 256;
  if (rows < 8) rows = 8;
  if (rows > c->batch) rows = c->batch;
  int64_t stride = c->batch / rows;
  float *sub0 = malloc(rows * D * 4);
  double *ref = malloc(rows * D * 8);
  size_t C = (size_t)c->spec->cond;
  float *subc = C ? malloc(rows * C * 4) : NULL;
  for (int64_t r = 0; r < rows; ++r) {
    memcpy(sub0 + r * D, host_x0 + (size_t)set * n + r * stride * D, D * 4);
    if (subc) memcpy(subc + r * C, c->host_cond + r * stride * C, C * 4);
  }
  if (c->sampler && c->cond)
    FLOWGEN_CHECK(flowrt_reference_cond_f64(c->spec, w, sub0, ref, subc, NULL, c->guidance, rows,
                                            ERR));
  else
    FLOWGEN_CHECK(flowrt_reference_f64(c->spec, w, sub0, ref, rows, ERR));
  free(subc);
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (size_t d = 0; d < D; ++d) {
      double diff = x[r * stride * D + d] - ref[r * D + d];
      num += diff * diff;
      den += ref[r * D + d] * ref[r * D + d];
    }
  free(x);
  free(sub0);
  free(ref);
  return sqrt(num / den);
}

/* ---- one shape --------------------------------------------------------------- */

typedef struct options {
  bool quick;
  const char *json_path;
  int shapes[32][3];
  int shape_count;
  int64_t batches[32];
  int batch_count;
  flowgen_precision precisions[8];
  int precision_count;
  bool no_startup;
  bool no_baseline;
  const char *tune;  /* NULL: the plan as it is */
  const char *cache_dir; /* --cache-dir; NULL: no disk cache */
  flowgen_spec model;  /* the member's fields (cond, layers, act, time, input, guidance) */
  float guidance;      /* its guidance weight */
  bool family;         /* --family */
} options;

/* One member at one shape and precision; each batch's median into
 * results (tagged `member`). */
static void bench_shape(flowrt_runtime *rt, const options *o, const int shape[3],
                        flowgen_precision precision, const flowgen_spec *model, float guidance,
                        const char *member, json_t *results) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  flowgen_spec spec = *model;
  spec.dim = shape[0];
  spec.hidden = shape[1];
  spec.steps = shape[2];
  spec.precision = precision;
  flowrt_weights *w = random_weights(&spec);
  flowrt_sampler *s = NULL;
  FLOWGEN_CHECK(flowrt_sampler_create(rt, &spec, w, &s, ERR));
  baseline base = {0};
  baseline_init(&base, w, flowgen_kernel_spec(flowrt_sampler_kernel(s))->arch);

  int64_t max_batch = 0;
  for (int i = 0; i < o->batch_count; ++i)
    if (o->batches[i] > max_batch) max_batch = o->batches[i];
  const int sets = 3;
  size_t max_n = (size_t)max_batch * spec.dim;
  float *host = malloc(max_n * sets * 4);
  CUdeviceptr x0[3], x;
  for (int i = 0; i < sets; ++i) CHECK(cu->cuMemAlloc(&x0[i], max_n * 4));
  CHECK(cu->cuMemAlloc(&x, max_n * 4));
  /* the conditioning: random, a row a sample */
  float *host_cond = NULL;
  CUdeviceptr cond = 0;
  if (spec.cond) {
    size_t cn = (size_t)max_batch * spec.cond;
    host_cond = malloc(cn * 4);
    bench_fill(host_cond, cn, 1.0f);
    CHECK(cu->cuMemAlloc(&cond, cn * 4));
    CHECK(cu->cuMemcpyHtoD(cond, host_cond, cn * 4));
  }

  for (int bi = 0; bi < o->batch_count; ++bi) {
    int64_t batch = o->batches[bi];
    size_t n = (size_t)batch * spec.dim;
    bench_fill(host, n * sets, 2.0f);
    for (int i = 0; i < sets; ++i) CHECK(cu->cuMemcpyHtoD(x0[i], host + i * n, n * 4));
    run_ctx c = {s, &base, &spec, x0, sets, x, batch, NULL, cond, host_cond, guidance, o->quick};
    int runs = o->quick ? 20 : (batch >= 65536 ? 30 : 100);
    timing t = time_runs(&c, 5, runs);
    double err = check_output(&c, w, host, 1);
    const flowgen_variant *v = flowgen_kernel_pick(flowrt_sampler_kernel(s), batch);
    double tflops = flops_per_sample(&spec) * batch / (t.median_us * 1e-6) / 1e12;

    run_ctx b = {NULL, &base, &spec, x0, sets, x, batch, NULL, 0, NULL, 1.0f, o->quick};
    timing tb = {NAN, NAN, NAN};
    double berr = NAN;
    /* The baseline runs at a few TFLOP/s: skip it beyond about 2e12 flop
     * (and for a member of the family: it computes the seed's model). */
    if (!o->no_baseline && precision == FLOWGEN_PRECISION_FP32 && is_seed(&spec) &&
        flops_per_sample(&spec) * batch <= 2e12) {
      tb = time_runs(&b, 2, o->quick ? 5 : (batch >= 4096 ? 10 : 30));
      berr = check_output(&b, w, host, 2);
    }
    printf("%s%sD=%-4d H=%-4d S=%-4d %s B=%-8lld %-11s %10.2f us [%9.2f, %9.2f] %8.3f TFLOP/s  "
           "relerr %.2e | baseline %10.2f us relerr %.2e\n",
           member ? member : "", member ? ": " : "", spec.dim, spec.hidden, spec.steps,
           flowgen_precision_name(precision),
           (long long)batch, v->strategy, t.median_us,
           t.min_us, t.max_us, tflops, err, tb.median_us, berr);
    fflush(stdout);
    json_array_append_new(
        results, json_pack("{s:i, s:i, s:i, s:I, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                           "dim", spec.dim, "hidden", spec.hidden, "steps", spec.steps,
                           "batch", (json_int_t)batch, "precision",
                           flowgen_precision_name(precision), "strategy",
                           v->strategy, "median_us", t.median_us, "min_us", t.min_us,
                           "max_us", t.max_us, "tflops", tflops, "relerr",
                           isnan(err) ? -1.0 : err, "baseline_median_us",
                           isnan(tb.median_us) ? -1.0 : tb.median_us, "baseline_relerr",
                           isnan(berr) ? -1.0 : berr));
    if (member) json_object_set_new(json_array_get(results, json_array_size(results) - 1),
                                    "member", json_string(member));
  }
  if (cond) cu->cuMemFree(cond);
  free(host_cond);
  for (int i = 0; i < sets; ++i) cu->cuMemFree(x0[i]);
  cu->cuMemFree(x);
  free(host);
  baseline_free(&base);
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
}

/* ---- start-up and host costs ------------------------------------------------ */

static void bench_startup(json_t *root, const char *tune) {
  char dir[] = "/tmp/flowgen-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_spec model;
  flowgen_spec_default(&model);
  model.dim = 64;
  model.hidden = 256;
  flowrt_weights *w = random_weights(&model);
  flowrt_options opts = {.disk_cache = 1, .cache_dir = dir, .tune = tune};
  double cold = 0, warm = 0, memory = 0, warm_first_launch = 0, open_ms = 0, cold_first = 0;
  double warm_generate = 0; /* planning (a disk hit renders nothing) */
  /* B=8's variant compiled at creation, beside the weights' upload */
  flowrt_sampler_options hint = {.batch_hint = 8};
  for (int round = 0; round < 2; ++round) {
    flowrt_runtime *rt = NULL;
    double t0 = fg_now_ms();
    FLOWGEN_CHECK(flowrt_open(&opts, &rt, ERR));
    double t1 = fg_now_ms();
    flowrt_sampler *s = NULL, *s2 = NULL;
    FLOWGEN_CHECK(flowrt_sampler_create_ex(rt, &spec, w, &hint, &s, ERR));
    const fg_cuda_api *cu = fg_cuda(NULL);
    CUdeviceptr x;
    CUcontext ctx;
    CUdevice dev;
    CHECK(cu->cuDeviceGet(&dev, 0));
    CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu->cuCtxPushCurrent(ctx));
    CHECK(cu->cuMemAlloc(&x, 8 * 64 * 4));
    float host[8 * 64];
    bench_fill(host, 8 * 64, 1.0f);
    CHECK(cu->cuMemcpyHtoD(x, host, sizeof host));
    FLOWGEN_CHECK(flowrt_sample(s, x, x, 8, NULL, ERR));
    CHECK(cu->cuCtxSynchronize());
    double t2 = fg_now_ms();
    const flowrt_stats *st = flowrt_sampler_stats(s);
    if (round == 0) {
      cold = st->module_ms;
      cold_first = t2 - t1;
      open_ms = t1 - t0;
    } else {
      warm = st->module_ms;
      warm_generate = st->generate_ms;
      warm_first_launch = t2 - t1;
      if (!st->disk_hit) fprintf(stderr, "bench: expected a disk hit\n");
    }
    FLOWGEN_CHECK(flowrt_sampler_create_ex(rt, &spec, w, &hint, &s2, ERR));
    memory = flowrt_sampler_stats(s2)->module_ms;
    if (round == 1) {
      /* Host cost of one launch: enqueue only. */
      double *t = malloc(sizeof(double) * 2000);
      for (int i = 0; i < 2000; ++i) {
        double a = fg_now_ms();
        FLOWGEN_CHECK(flowrt_sample(s, x, x, 8, NULL, ERR));
        t[i] = (fg_now_ms() - a) * 1e3;
        if (i % 100 == 99) CHECK(cu->cuCtxSynchronize());
      }
      CHECK(cu->cuCtxSynchronize());
      qsort(t, 2000, sizeof *t, cmp_double);
      printf("host cost of one flowrt_sample call (enqueue, B=8): median %.2f us, min %.2f us\n",
             t[1000], t[0]);
      json_object_set_new(root, "launch_host_us", json_real(t[1000]));
      free(t);
    }
    cu->cuMemFree(x);
    CUcontext popped;
    cu->cuCtxPopCurrent(&popped);
    cu->cuDevicePrimaryCtxRelease(dev);
    flowrt_sampler_destroy(s);
    flowrt_sampler_destroy(s2);
    flowrt_close(rt);
  }
  printf("start-up, D=64 H=256 S=32, B=8 (the pack kernel and B=8's variant): runtime open "
         "%.1f ms; modules: cold (generate + NVRTC + load) %.1f ms, warm (disk hit) %.2f ms "
         "(planning %.2f ms), memory hit %.2f us; sampler_create to first result: cold %.1f ms, "
         "warm %.2f ms\n",
         open_ms, cold, warm, warm_generate, memory * 1e3, cold_first, warm_first_launch);
  json_object_set_new(root, "startup",
                      json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "open_ms", open_ms,
                                "cold_ms", cold, "warm_disk_ms", warm, "warm_generate_ms",
                                warm_generate, "memory_hit_us", memory * 1e3,
                                "cold_to_first_result_ms", cold_first,
                                "warm_to_first_result_ms", warm_first_launch));
  flowrt_cache_clear(dir, NULL, NULL);
  rmdir(dir);
  flowrt_weights_free(w);
}

/* ---- main -------------------------------------------------------------------- */

static void parse(int argc, char **argv, options *o) {
  static const int default_shapes[][3] = {{64, 256, 32}, {2, 8, 32}, {128, 512, 32}};
  static const int64_t default_batches[] = {1, 8, 64, 1000, 4096, 65536};
  memcpy(o->shapes, default_shapes, sizeof default_shapes);
  o->shape_count = 3;
  memcpy(o->batches, default_batches, sizeof default_batches);
  o->batch_count = 6;
  o->precisions[0] = FLOWGEN_PRECISION_FP32;
  o->precision_count = 1;
  flowgen_spec_default(&o->model);
  o->guidance = 1.0f;
  for (int i = 1; i < argc; ++i) {
    static const char *const fields[] = {"--cond", "--layers", "--act", "--time"};
    bool field = false;
    for (size_t f = 0; f < sizeof fields / sizeof *fields; ++f)
      if (strcmp(argv[i], fields[f]) == 0 && i + 1 < argc) {
        flowgen_error e;
        if (flowgen_spec_set(&o->model, fields[f] + 2, argv[++i], &e) != FLOWGEN_OK) {
          fprintf(stderr, "bench: %s\n", e.message);
          exit(2);
        }
        field = true;
      }
    if (field) continue;
    if (strcmp(argv[i], "--guidance") == 0 && i + 1 < argc) {
      o->model.guidance = true;
      o->guidance = (float)atof(argv[++i]);
    } else if (strcmp(argv[i], "--family") == 0) {
      o->family = true;
    } else if (strcmp(argv[i], "--quick") == 0) {
      o->quick = true;
    } else if (strcmp(argv[i], "--warmup-ms") == 0 && i + 1 < argc) {
      warmup_ms = atof(argv[++i]);
    } else if (strcmp(argv[i], "--hold-us") == 0 && i + 1 < argc) {
      hold_us = atof(argv[++i]);
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      o->json_path = argv[++i];
    } else if (strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) {
      o->shape_count = 0;
      for (char *p = strtok(argv[++i], ";"); p && o->shape_count < 32; p = strtok(NULL, ";"))
        if (sscanf(p, "%d,%d,%d", &o->shapes[o->shape_count][0],
                   &o->shapes[o->shape_count][1], &o->shapes[o->shape_count][2]) == 3)
          o->shape_count++;
    } else if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc) {
      o->cache_dir = argv[++i];
    } else if (strcmp(argv[i], "--no-startup") == 0) {
      o->no_startup = true;
    } else if (strcmp(argv[i], "--no-baseline") == 0) {
      o->no_baseline = true;
    } else if (strcmp(argv[i], "--precisions") == 0 && i + 1 < argc) {
      o->precision_count = 0;
      for (char *p = strtok(argv[++i], ","); p && o->precision_count < 8; p = strtok(NULL, ",")) {
        flowgen_spec tmp;
        flowgen_spec_default(&tmp);
        flowgen_error e;
        if (flowgen_spec_set(&tmp, "precision", p, &e) != FLOWGEN_OK) {
          fprintf(stderr, "bench: %s\n", e.message);
          exit(2);
        }
        o->precisions[o->precision_count++] = tmp.precision;
      }
    } else if (strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
      o->tune = *argv[++i] ? argv[i] : NULL; /* "": the plan as it is */
    } else if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
      o->batch_count = 0;
      for (char *p = strtok(argv[++i], ","); p && o->batch_count < 32; p = strtok(NULL, ","))
        o->batches[o->batch_count++] = atoll(p);
    } else {
      fprintf(stderr, "usage: bench [--quick] [--json FILE] [--warmup-ms MS] [--hold-us US] "
                      "[--shapes D,H,S;...] [--batches B,...] "
                      "[--precisions fp32,tf32,bf16,fp16] [--no-startup] "
                      "[--no-baseline] [--tune K=V,...] [--cache-dir DIR] [--cond C] [--layers L] [--act A] "
                      "[--time T] [--guidance W] [--family]\n");
      exit(2);
    }
  }
}

/* The family's cost table: each member (the fields as the flags give
 * them) beside the seed, at the default shape, fp32 and bf16, B = 1, 8,
 * 1024, 65536; then the table of times and ratios to the seed. */
static void bench_family(flowrt_runtime *rt, options *o, json_t *results) {
  static const struct {
    const char *name, *field, *value;
    float guidance;
  } rows[] = {
      {"seed", NULL, NULL, 1}, {"C=10", "cond", "10", 1}, {"C=512", "cond", "512", 1},
      {"L=2", "layers", "2", 1}, {"L=5", "layers", "5", 1}, {"gelu", "act", "gelu", 1},
      {"gelu_tanh", "act", "gelu_tanh", 1}, {"relu", "act", "relu", 1}, {"tanh", "act", "tanh", 1},
      {"sin:64", "time", "sin:64", 1}, {"C=512+guidance", "cond", "512", 2},
  };
  static const int shape[3] = {64, 256, 32};
  static const int64_t batches[] = {1, 8, 1024, 65536};
  static const flowgen_precision precisions[] = {FLOWGEN_PRECISION_FP32, FLOWGEN_PRECISION_BF16};
  memcpy(o->batches, batches, sizeof batches);
  o->batch_count = 4;
  o->no_baseline = true;
  size_t first = json_array_size(results);
  for (size_t p = 0; p < 2; ++p)
    for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r) {
      flowgen_spec m;
      flowgen_spec_default(&m);
      if (rows[r].field) FLOWGEN_CHECK(flowgen_spec_set(&m, rows[r].field, rows[r].value, ERR));
      m.guidance = rows[r].guidance != 1;
      bench_shape(rt, o, shape, precisions[p], &m, rows[r].guidance, rows[r].name, results);
    }
  /* the ratios to the seed's time (same precision and batch) */
  printf("\nthe family at D=64 H=256 S=32: device time, us (ratio to the seed)\n%-16s %-5s", "member",
         "prec");
  for (size_t b = 0; b < 4; ++b) printf("  B=%-7lld         ", (long long)batches[b]);
  printf("\n");
  size_t n = json_array_size(results);
  for (size_t i = first; i < n; i += 4) {
    json_t *row = json_array_get(results, i);
    const char *prec = json_string_value(json_object_get(row, "precision"));
    printf("%-16s %-5s", json_string_value(json_object_get(row, "member")), prec);
    for (size_t b = 0; b < 4 && i + b < n; ++b) {
      json_t *cell = json_array_get(results, i + b);
      double us = json_real_value(json_object_get(cell, "median_us")), seed_us = NAN;
      for (size_t j = first; j < n; ++j) {
        json_t *sj = json_array_get(results, j);
        if (strcmp(json_string_value(json_object_get(sj, "member")), "seed") == 0 &&
            strcmp(json_string_value(json_object_get(sj, "precision")), prec) == 0 &&
            json_integer_value(json_object_get(sj, "batch")) ==
                json_integer_value(json_object_get(cell, "batch")))
          seed_us = json_real_value(json_object_get(sj, "median_us"));
      }
      json_object_set_new(cell, "ratio_to_seed", json_real(us / seed_us));
      printf("  %10.2f (%5.2fx)", us, us / seed_us);
    }
    printf("\n");
  }
}

int main(int argc, char **argv) {
  options o = {0};
  parse(argc, argv, &o);
  flowrt_runtime *rt = NULL;
  flowrt_options opts = {.disk_cache = o.cache_dir != NULL, .cache_dir = o.cache_dir, .tune = o.tune};
  FLOWGEN_CHECK(flowrt_open(&opts, &rt, ERR));
  load_extra_driver();
  const fg_cuda_api *cu = fg_cuda(NULL);
  CUdevice dev;
  CUcontext ctx;
  char name[256] = "?";
  CHECK(cu->cuDeviceGet(&dev, 0));
  CHECK(cu->cuDeviceGetName(name, sizeof name, dev));
  CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cu->cuCtxPushCurrent(ctx));
  printf("flowgen %s bench on %s (NVRTC %d)%s%s\n", FLOWGEN_VERSION, name, flowrt_nvrtc_version(),
         o.tune ? ", tune " : "", o.tune ? o.tune : "");
  printf("device time: CUDA events around each launch, %s\n",
         hold_us > 0 ? "queued behind a hold kernel (no host time in it)"
                     : "the start event on an idle stream (the host's enqueue in it)");
  json_t *root = json_pack("{s:s, s:s, s:f}", "gpu", name, "flowgen", FLOWGEN_VERSION,
                           "hold_us", hold_us);
  if (o.tune) json_object_set_new(root, "tune", json_string(o.tune));
  json_t *results = json_array();
  if (o.family) {
    bench_family(rt, &o, results);
  } else {
    for (int i = 0; i < o.shape_count; ++i)
      for (int p = 0; p < o.precision_count; ++p)
        bench_shape(rt, &o, o.shapes[i], o.precisions[p], &o.model, o.guidance, NULL, results);
  }
  json_object_set_new(root, "results", results);
  if (!o.no_startup && !o.family) bench_startup(root, o.tune);
  if (o.json_path && json_dump_file(root, o.json_path, JSON_INDENT(1) | JSON_SORT_KEYS)) {
    fprintf(stderr, "bench: cannot write %s\n", o.json_path);
    return 1;
  }
  json_decref(root);
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
  cu->cuDevicePrimaryCtxRelease(dev);
  flowrt_close(rt);
  return 0;
}
