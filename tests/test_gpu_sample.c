/* GPU: generated kernels against the fp64 reference, launched through the
 * runtime.  Skips itself without a GPU (fails with FLOWGEN_REQUIRE_GPU=1). */
#include "support.h"

#include "cuda_api.h"
#include "flowrt.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpu_fixture {
  flowrt_runtime *rt;
  char *cache_dir;
} gpu_fixture;

/* FLOWGEN_TEST_TUNE=K=V,...: the planner overrides of every runtime the
 * tests open but where a test tunes its own (the device round runs the
 * tests under tuned configurations so); NULL when unset. */
static const char *suite_tune(void) {
  const char *tune = getenv("FLOWGEN_TEST_TUNE");
  return tune && *tune ? tune : NULL;
}

static int setup(void **state) {
  gpu_fixture *f = calloc(1, sizeof *f);
  *state = f;
  if (!fg_test_have_gpu()) return 0;
  f->cache_dir = fg_test_mkdtemp();
  flowrt_options opts = {.disk_cache = 1, .cache_dir = f->cache_dir, .tune = suite_tune()};
  flowgen_error err;
  if (flowrt_open(&opts, &f->rt, &err)) {
    fprintf(stderr, "flowrt_open: %s\n", err.message);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  gpu_fixture *f = *state;
  flowrt_close(f->rt);
  if (f->cache_dir) fg_test_rmtree(f->cache_dir);
  free(f->cache_dir);
  free(f);
  return 0;
}

static flowgen_spec make_spec(int dim, int hidden, int steps) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.dim = dim;
  spec.hidden = hidden;
  spec.steps = steps;
  return spec;
}

/* ||x - ref|| / ||ref|| over rows [0, rows) of a batch x dim array; fails on
 * any NaN (the poison). */
static double relerr(const float *x, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (isnan(x[i])) return INFINITY;
    double d = x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* x (batch rows sampled on the GPU from x0, under cond and guidance)
 * against the fp64 reference on `checked` rows spread over the batch; x
 * must be wholly written (it was poisoned with NaN). */
static double compare_with_reference(const flowgen_spec *spec, const flowrt_weights *w,
                                     const float *x0, const float *x, const float *cond,
                                     const float *null_cond, float guidance, int64_t batch,
                                     int64_t checked) {
  const int D = spec->dim, C = spec->cond;
  for (size_t i = 0; i < (size_t)batch * D; ++i)
    if (isnan(x[i])) fail_msg("x[%zu] not written (batch %lld)", i, (long long)batch);
  if (checked > batch) checked = batch;
  int64_t stride = batch / checked;
  float *sub_x0 = malloc((size_t)checked * D * sizeof(float));
  float *sub_x = malloc((size_t)checked * D * sizeof(float));
  float *sub_c = cond ? malloc((size_t)checked * C * sizeof(float)) : NULL;
  double *ref = malloc((size_t)checked * D * sizeof(double));
  for (int64_t r = 0; r < checked; ++r) {
    memcpy(sub_x0 + r * D, x0 + r * stride * D, D * sizeof(float));
    memcpy(sub_x + r * D, x + r * stride * D, D * sizeof(float));
    if (cond) memcpy(sub_c + r * C, cond + r * stride * C, C * sizeof(float));
  }
  flowgen_error err;
  if (flowrt_reference_cond_f64(spec, w, sub_x0, ref, sub_c, null_cond, guidance, checked, &err))
    fail_msg("%s", err.message);
  double e = relerr(sub_x, ref, (size_t)checked * D);
  free(sub_x0);
  free(sub_x);
  free(sub_c);
  free(ref);
  return e;
}

/* Samples batch rows on the GPU and compares up to `checked` rows (spread
 * over the batch) with the fp64 reference. */
static double check_sampler(flowrt_sampler *s, const flowgen_spec *spec,
                            const flowrt_weights *w, int64_t batch,
                            int64_t checked, uint64_t seed) {
  size_t n = (size_t)batch * spec->dim;
  float *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
  fg_test_fill_uniform(x0, n, seed, 2.0f);
  for (size_t i = 0; i < n; ++i) x[i] = NAN; /* poison */
  flowgen_error err;
  if (flowrt_sample_host(s, x0, x, batch, &err)) fail_msg("%s", err.message);
  double e = compare_with_reference(spec, w, x0, x, NULL, NULL, 1.0f, batch, checked);
  free(x0);
  free(x);
  return e;
}

static void test_matches_reference(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  static const int shapes[][3] = {
      {64, 256, 32}, {3, 12, 5}, {2, 100, 7}, {17, 68, 9}, {128, 512, 16}, {1, 1, 3},
  };
  static const int64_t batches[] = {1, 7, 8, 33, 64, 1000, 65536};
  uint64_t seed = fg_test_seed();
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; ++i) {
    flowgen_spec spec = make_spec(shapes[i][0], shapes[i][1], shapes[i][2]);
    flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, seed + i * 100);
    flowrt_sampler *s = NULL;
    flowgen_error err;
    if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
    for (size_t b = 0; b < sizeof batches / sizeof *batches; ++b) {
      double e = check_sampler(s, &spec, w, batches[b], 1000, seed + b);
      printf("# D=%d H=%d S=%d B=%lld relerr=%.3e\n", spec.dim, spec.hidden,
             spec.steps, (long long)batches[b], e);
      assert_true(e <= 1e-6);
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
  }
}

/* Midpoint, Heun and RK4, every strategy (small and large batches). */
static void test_solvers_match_reference(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  static const flowgen_solver solvers[] = {FLOWGEN_SOLVER_MIDPOINT, FLOWGEN_SOLVER_HEUN,
                                           FLOWGEN_SOLVER_RK4};
  static const int64_t batches[] = {1, 33, 1000, 5000};
  uint64_t seed = fg_test_seed();
  for (size_t i = 0; i < sizeof solvers / sizeof *solvers; ++i) {
    flowgen_spec spec = make_spec(64, 256, 8);
    spec.solver = solvers[i];
    flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, seed + 31 * i);
    flowrt_sampler *s = NULL;
    flowgen_error err;
    if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
    for (size_t b = 0; b < sizeof batches / sizeof *batches; ++b) {
      double e = check_sampler(s, &spec, w, batches[b], 500, seed + b);
      printf("# %s B=%lld relerr=%.3e\n", flowgen_solver_name(spec.solver),
             (long long)batches[b], e);
      assert_true(e <= 1e-6);
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
  }
}

/* Every precision and strategy against the fp64 reference at the
 * precision's tolerance, with batches at and past each variant's edges. */
static void test_precisions_match_reference(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  static const struct {
    flowgen_precision precision;
    double tolerance;
  } precisions[] = {{FLOWGEN_PRECISION_FP32, 1e-6}, {FLOWGEN_PRECISION_TF32, 1e-4},
                    {FLOWGEN_PRECISION_BF16, 1e-2}, {FLOWGEN_PRECISION_FP16, 1e-2}};
  static const int shapes[][3] = {{64, 256, 8}, {3, 100, 5}, {33, 130, 3}};
  uint64_t seed = fg_test_seed();
  for (size_t p = 0; p < sizeof precisions / sizeof *precisions; ++p)
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; ++i) {
      flowgen_spec spec = make_spec(shapes[i][0], shapes[i][1], shapes[i][2]);
      spec.precision = precisions[p].precision;
      if (i == 2) spec.solver = FLOWGEN_SOLVER_HEUN;
      flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, seed + 10 * i + p);
      flowrt_sampler *s = NULL;
      flowgen_error err;
      if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
      const flowgen_kernel *k = flowrt_sampler_kernel(s);
      for (int vi = 0; vi < flowgen_kernel_variant_count(k); ++vi) {
        const flowgen_variant *v = flowgen_kernel_variant(k, vi);
        if (v->max_batch == 0) continue; /* a fallback alone: no batch of its own */
        int64_t lo = v->min_batch > 0 ? v->min_batch : 1;
        int64_t batches[] = {lo, v->max_batch >= 0 ? v->max_batch : lo + 3 * v->rows_per_block + 5};
        for (int b = 0; b < 2; ++b) {
          double e = check_sampler(s, &spec, w, batches[b], 64, seed + b);
          printf("# %s D=%d H=%d S=%d %s %s B=%lld relerr=%.3e\n",
                 flowgen_precision_name(spec.precision), spec.dim, spec.hidden, spec.steps,
                 flowgen_solver_name(spec.solver), v->strategy, (long long)batches[b], e);
          assert_true(e <= precisions[p].tolerance);
        }
      }
      flowrt_sampler_destroy(s);
      flowrt_weights_free(w);
    }
}

/* Shapes, solvers and batches drawn afresh on each run (the seed is
 * printed; FLOWGEN_TEST_SEED replays it): D up to 1024, H up to 4096,
 * S up to 40 (the steps only repeat the same code). */
static void test_random_shapes(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  uint64_t seed = fg_test_seed(), rng = seed * 0x9E3779B97F4A7C15ull + 5;
  for (int i = 0; i < 6; ++i) {
    flowgen_spec spec = fg_test_random_spec(&rng, 1024, 4096, 40, 90); /* arch: the device's own */
    flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, seed + 1000 + i);
    flowrt_sampler *s = NULL;
    flowgen_error err;
    if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
    const int64_t batches[] = {fg_test_log_uniform(&rng, 1, 64),
                               fg_test_log_uniform(&rng, 65, 20000)};
    /* The fp64 reference on the CPU: no more than about 1e10 flop a batch. */
    double D = spec.dim, H = spec.hidden, stages[] = {1, 2, 2, 4};
    double flops = 2 * spec.steps * stages[spec.solver] * ((D + 1) * H + H * H + H * D);
    int64_t checked = (int64_t)(1e10 / flops);
    checked = checked < 4 ? 4 : checked > 24 ? 24 : checked;
    for (int b = 0; b < 2; ++b) {
      double e = check_sampler(s, &spec, w, batches[b], checked, seed + b);
      printf("# random D=%d H=%d S=%d %s B=%lld %s relerr=%.3e\n", spec.dim, spec.hidden,
             spec.steps, flowgen_solver_name(spec.solver), (long long)batches[b],
             flowgen_kernel_pick(flowrt_sampler_kernel(s), batches[b])->strategy, e);
      assert_true(e <= 1e-6);
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
  }
}

static void test_zero_batch_and_aliasing(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  flowgen_spec spec = make_spec(8, 32, 4);
  flowrt_weights *w = fg_test_random_weights(8, 32, fg_test_seed());
  flowrt_sampler *s = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_sampler_create(f->rt, &spec, w, &s, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sample(s, 0, 0, 0, NULL, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sample(s, 0, 0, -1, NULL, &err), FLOWGEN_INVALID);
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
}

/* Captured into a CUDA graph and replayed, a sample gives the same bytes
 * as a direct launch (x0 and x apart), and those match the reference.  At
 * D=128, H=512 B=8 runs the grid strategy (a cooperative launch). */
/* The driver's stream-capture and graph entry points (the runtime's
 * cuda_api.h holds only what the runtime calls). */
typedef struct graph_api {
  CUresult (*stream_create)(CUstream *, unsigned);
  CUresult (*begin)(CUstream, CUstreamCaptureMode);
  CUresult (*end)(CUstream, CUgraph *);
  CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*launch)(CUgraphExec, CUstream);
  CUresult (*memset32)(CUdeviceptr, unsigned, size_t);
} graph_api;

static graph_api graph_functions(void) {
  graph_api g;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  *(void **)&g.stream_create = dlsym(h, "cuStreamCreate");
  *(void **)&g.begin = dlsym(h, "cuStreamBeginCapture_v2");
  *(void **)&g.end = dlsym(h, "cuStreamEndCapture");
  *(void **)&g.instantiate = dlsym(h, "cuGraphInstantiateWithFlags");
  *(void **)&g.launch = dlsym(h, "cuGraphLaunch");
  *(void **)&g.memset32 = dlsym(h, "cuMemsetD32_v2");
  assert_true(g.stream_create && g.begin && g.end && g.instantiate && g.launch && g.memset32);
  return g;
}

static void graph_capture(gpu_fixture *f, int dim, int hidden, const char *strategy) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  flowgen_spec spec = make_spec(dim, hidden, 32);
  flowrt_weights *w = fg_test_random_weights(dim, hidden, fg_test_seed() + 7);
  flowrt_sampler *s = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_sampler_create(f->rt, &spec, w, &s, &err), FLOWGEN_OK);
  const int64_t batch = 8;
  assert_string_equal(flowgen_kernel_pick(flowrt_sampler_kernel(s), batch)->strategy, strategy);
  const size_t n = (size_t)batch * dim, bytes = n * sizeof(float);
  float *x0 = malloc(bytes), *direct = malloc(bytes), *replay = malloc(bytes);
  double *ref = malloc(n * sizeof *ref);
  fg_test_fill_uniform(x0, n, fg_test_seed(), 1.5f);
  CUcontext ctx;
  CUdevice dev;
  assert_int_equal(cu->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxPushCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr in, out;
  CUstream stream;
  assert_int_equal(cu->cuMemAlloc(&in, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&out, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(in, x0, bytes), CUDA_SUCCESS);
  graph_api g = graph_functions();
  assert_int_equal(g.stream_create(&stream, 0), CUDA_SUCCESS);

  assert_int_equal(g.memset32(out, 0x7fc00000u, n), CUDA_SUCCESS); /* NaN */
  assert_int_equal(flowrt_sample(s, in, out, batch, stream, &err), FLOWGEN_OK);
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(direct, out, bytes), CUDA_SUCCESS);

  CUgraph graph;
  CUgraphExec exec;
  assert_int_equal(g.memset32(out, 0x7fc00000u, n), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(g.begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(flowrt_sample(s, in, out, batch, stream, &err), FLOWGEN_OK);
  assert_int_equal(g.end(stream, &graph), CUDA_SUCCESS);
  assert_int_equal(g.instantiate(&exec, graph, 0), CUDA_SUCCESS);
  for (int replays = 0; replays < 3; ++replays)
    assert_int_equal(g.launch(exec, stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(replay, out, bytes), CUDA_SUCCESS);
  assert_memory_equal(direct, replay, bytes);
  assert_int_equal(flowrt_reference_f64(&spec, w, x0, ref, batch, &err), FLOWGEN_OK);
  double e = relerr(direct, ref, n);
  printf("# graph D=%d H=%d B=%lld %s relerr=%.3e\n", dim, hidden, (long long)batch,
         strategy, e);
  assert_true(e <= 1e-6);

  cu->cuMemFree(in);
  cu->cuMemFree(out);
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
  cu->cuDevicePrimaryCtxRelease(dev);
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
  free(x0);
  free(direct);
  free(replay);
  free(ref);
}

static void test_graph_capture(void **state) {
  FG_SKIP_WITHOUT_GPU();
  graph_capture(*state, 64, 256, "cluster4_r1");
  graph_capture(*state, 128, 512, "grid_b8");
}

/* One sampler of `solver` on a D x H shape against the reference at each
 * of n batches (64 rows checked), each batch's variant checked by
 * `expected` first. */
static void check_batches(gpu_fixture *f, flowgen_solver solver, const int shape[2],
                          const int64_t *batches, size_t n, uint64_t weight_seed, uint64_t seed,
                          bool (*expected)(const flowgen_spec *spec, int64_t batch,
                                           const char *strategy)) {
  flowgen_spec spec = make_spec(shape[0], shape[1], 3);
  spec.solver = solver;
  flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, weight_seed);
  flowrt_sampler *s = NULL;
  flowgen_error err;
  if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
  const flowgen_kernel *k = flowrt_sampler_kernel(s);
  for (size_t b = 0; b < n; ++b) {
    const char *strategy = flowgen_kernel_pick(k, batches[b])->strategy;
    assert_true(expected(&spec, batches[b], strategy));
    double e = check_sampler(s, &spec, w, batches[b], 64, seed + b);
    printf("# %s D=%d H=%d B=%lld %s relerr=%.3e\n", flowgen_solver_name(spec.solver),
           spec.dim, spec.hidden, (long long)batches[b], strategy, e);
    assert_true(e <= 1e-6);
  }
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
}

static const flowgen_solver every_solver[] = {FLOWGEN_SOLVER_EULER, FLOWGEN_SOLVER_MIDPOINT,
                                              FLOWGEN_SOLVER_HEUN, FLOWGEN_SOLVER_RK4};

/* Up to 64 samples: a grid variant. */
static bool grid_up_to_64(const flowgen_spec *spec, int64_t batch, const char *strategy) {
  (void)spec;
  return strncmp(strategy, "grid_b", 6) == 0 || batch > 64;
}

/* The grid strategy (D=128, H=512 and up, B <= 64) with every solver, at
 * the edges of its two variants, launch after launch on one scratch area. */
static void test_grid_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  static const int shapes[][2] = {{512, 512}, {33, 1000}};
  static const int64_t batches[] = {1, 2, 8, 9, 63, 64, 65};
  uint64_t seed = fg_test_seed();
  for (size_t i = 0; i < sizeof every_solver / sizeof *every_solver; ++i)
    check_batches(*state, every_solver[i], shapes[i % 2], batches, sizeof batches / sizeof *batches,
                  seed + 17 * i, seed, grid_up_to_64);
}

/* GPU 0's compute capability as 10 major + minor (90 for sm_90). */
static int device_arch(void) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  CUdevice dev;
  int major = 0, minor = 0;
  assert_int_equal(cu->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                   CUDA_SUCCESS);
  assert_int_equal(cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                   CUDA_SUCCESS);
  return 10 * major + minor;
}

/* On an sm_90 GPU (the runtime's target sm_90a: wgmma) gemm_b1024 from
 * 65 (its tiles split where they are fewer than the SMs), then gemm.
 * Elsewhere (mma.sync) gemm from 113 on at H >= 1024 (the batch after the
 * tiled kernel's split), from 1057 below, but the matrix-unit kernel's
 * from 4225 at D=512, H=512 (Euler). */
static bool gemm_where_planned(const flowgen_spec *spec, int64_t batch, const char *strategy) {
  if (device_arch() == 90) return strcmp(strategy, batch <= 1024 ? "gemm_b1024" : "gemm") == 0;
  if (batch > 4224 && spec->hidden == 512 && spec->solver == FLOWGEN_SOLVER_EULER)
    return strcmp(strategy, "mma") == 0;
  const bool gemm = strcmp(strategy, "gemm") == 0;
  return batch < (spec->hidden >= 1024 ? 113 : 1057) ? !gemm : gemm;
}

/* The gemm strategy (fp32 on the matrix units as tf32x3, layer by layer
 * over chunks of the batch) with every solver: its first batch, both sides
 * of gemm_b1024's last (wgmma) and of the tiled kernel's (mma.sync),
 * several chunks and a last chunk of one sample (H=4095: chunks of 4096
 * on wgmma); D=33 and H=4095 have rows of no multiple of 4. */
static void test_gemm_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  static const int shapes[][2] = {{512, 512}, {33, 1000}, {3, 4095}, {64, 768}};
  static const int64_t batches[] = {113, 1024, 1025, 1056, 1057, 4097, 9000};
  uint64_t seed = fg_test_seed();
  for (size_t i = 0; i < sizeof every_solver / sizeof *every_solver; ++i)
    check_batches(*state, every_solver[i], shapes[i], batches, sizeof batches / sizeof *batches,
                  seed + 29 * i, seed, gemm_where_planned);
}

/* The wgmma variant's building blocks on their own (the generated source
 * of D=64, H=256 bf16, plus a probe kernel): weights packed by pack_wg into
 * shared memory, a 64 x 32 A operand made by to_operand from accumulator-
 * layout registers, product<32, 64> (two k-steps, eight 8-output groups),
 * the accumulators written back through their layout: D = A W^T as on the
 * CPU from the same bf16-rounded inputs.  Where the whole kernel fails,
 * this tells a layout mistake from the rest. */
static const char wgmma_probe[] =
    "extern \"C\" __global__ void __launch_bounds__(128) wgmma_probe(\n"
    "    const float* a, const float* w, float* d)\n"
    "{\n"
    "  using namespace flowgen::probe::wgmma;\n"
    "  __shared__ __align__(16) unsigned ws[64 * 32 / 2];\n"
    "  for (int e = threadIdx.x; e < 64 * 32 / 2; e += 128)\n"
    "    ws[e] = __float_as_uint(pack_wg<64, 32, 64, 32>(e, [&](int out, int in) { return w[out * 32 + in]; }));\n"
    "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
    "  __syncthreads();\n"
    "  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;\n"
    "  float v[16];\n"
    "  for (int i = 0; i < 4; ++i)\n"
    "    for (int q = 0; q < 4; ++q)\n"
    "      v[4 * i + q] = a[(16 * warp + g + 8 * (q / 2)) * 32 + 8 * i + 2 * t + q % 2];\n"
    "  unsigned op[2][4];\n"
    "  to_operand<32, 32>(op, v, 0);\n"
    "  float acc[32];\n"
    "  product<32, 64>(acc, op, static_cast<unsigned>(__cvta_generic_to_shared(ws)), 0);\n"
    "  for (int i = 0; i < 8; ++i)\n"
    "    for (int q = 0; q < 4; ++q)\n"
    "      d[(16 * warp + g + 8 * (q / 2)) * 64 + 8 * i + 2 * t + q % 2] = acc[4 * i + q];\n"
    "}\n";

/* Skips the test unless GPU 0 is an sm_90 (the wgmma variant's target). */
static void skip_unless_sm90(void) {
  if (device_arch() != 90) {
    print_message("# not an sm_90 GPU: skipped\n");
    skip();
  }
}

/* Skips the test on a GPU older than sm_<arch>. */
static void skip_below(int arch) {
  if (device_arch() < arch) {
    print_message("# a GPU older than sm_%d: skipped\n", arch);
    skip();
  }
}

/* x rounded to bf16 (to nearest even), back as a float. */
static float round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

/* x rounded to tf32 (to nearest, ties away from zero: cvt.rna), back as a
 * float. */
static float round_tf32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

/* A probe kernel on GPU 0: `probe` (its source, kernel `name`) appended to
 * the generated source of spec (named "probe", sm_90a) under tune,
 * compiled to a cubin, loaded in the primary context (pushed: probe_end
 * pops it); with the shared memory of the plan's variant of `strategy`
 * (shared: its bytes), where one is named. */
typedef struct {
  CUdevice dev;
  CUmodule mod;
  CUfunction fn;
  int shared;
} probe_kernel;

static probe_kernel probe_start(flowgen_spec spec, const char *tune, const char *probe, const char *name,
                                const char *strategy) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  probe_kernel p = {.shared = 0};
  assert_int_equal(cu->cuDeviceGet(&p.dev, 0), CUDA_SUCCESS);
  flowgen_error err;
  assert_int_equal(flowgen_spec_set(&spec, "name", "probe", &err), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&spec, "arch", "sm_90a", &err), FLOWGEN_OK);
  flowgen_options opts = {.tune = tune};
  flowgen_kernel *k = NULL;
  if (flowgen_generate(&spec, &opts, &k, &err)) fail_msg("%s", err.message);
  for (int i = 0; strategy && i < flowgen_kernel_variant_count(k); ++i)
    if (strcmp(flowgen_kernel_variant(k, i)->strategy, strategy) == 0)
      p.shared = flowgen_kernel_variant(k, i)->shared_bytes;
  if (strategy && !p.shared) fail_msg("no %s variant under %s", strategy, tune);
  size_t n = flowgen_kernel_source_size(k), m = strlen(probe);
  char *source = malloc(n + m + 1);
  memcpy(source, flowgen_kernel_source(k), n);
  memcpy(source + n, probe, m + 1);
  flowgen_kernel_free(k);
  void *image = NULL;
  size_t size = 0;
  if (flowrt_compile(source, strlen(source), "probe.cu", 90, FLOWRT_TARGET_CUBIN, false, &image, &size,
                     NULL, &err))
    fail_msg("%s", err.message);
  free(source);
  CUcontext ctx;
  assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, p.dev), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxPushCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(cu->cuModuleLoadData(&p.mod, image), CUDA_SUCCESS);
  free(image);
  assert_int_equal(cu->cuModuleGetFunction(&p.fn, p.mod, name), CUDA_SUCCESS);
  if (p.shared > 48 * 1024)
    assert_int_equal(cu->cuFuncSetAttribute(p.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, p.shared),
                     CUDA_SUCCESS);
  return p;
}

static void probe_end(probe_kernel *p) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  cu->cuModuleUnload(p->mod);
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
  cu->cuDevicePrimaryCtxRelease(p->dev);
}

/* A device copy of `bytes` at host (uninitialized where host is NULL). */
static CUdeviceptr probe_upload(const void *host, size_t bytes) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  CUdeviceptr d;
  assert_int_equal(cu->cuMemAlloc(&d, bytes), CUDA_SUCCESS);
  if (host) assert_int_equal(cu->cuMemcpyHtoD(d, host, bytes), CUDA_SUCCESS);
  return d;
}

/* Runs the probe on one block of `threads` with args, then synchronizes. */
static void probe_run(const probe_kernel *p, int threads, void **args) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = (unsigned)threads,
                        .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = (unsigned)p->shared};
  assert_int_equal(cu->cuLaunchKernelEx(&cfg, p->fn, args, NULL), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
}

/* The largest error of d (rows x cols) against sum_i a[r][i] W[i][j] on
 * inputs rounded by `round` (round_bf16, round_tf32), relative to the sum
 * of |products|; fails past 1e-5.  w holds W by outputs (w[j][i]) or by
 * inputs (w[i][j]). */
static double probe_check(const float *d, const float *a, int rows, int cols, int inputs,
                          const float *w, bool w_by_output, float (*round)(float)) {
  double worst = 0;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) {
      double ref = 0, mag = 0;
      for (int i = 0; i < inputs; ++i) {
        const double x = round(a[r * inputs + i]);
        const double y = round(w_by_output ? w[j * inputs + i] : w[i * cols + j]);
        ref += x * y;
        mag += fabs(x * y);
      }
      double e = fabs(d[r * cols + j] - ref) / (mag > 0 ? mag : 1);
      if (!(e <= worst)) worst = e;
      if (!(e <= 1e-5)) fail_msg("D[%d][%d] = %g, expected %g (A W of the rounded inputs)", r, j, d[r * cols + j], ref);
    }
  return worst;
}

static void test_wgmma_layout_probe(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  flowgen_spec spec = make_spec(64, 256, 2);
  spec.precision = FLOWGEN_PRECISION_BF16;
  probe_kernel p = probe_start(spec, NULL, wgmma_probe, "wgmma_probe", NULL);
  float a[64 * 32], w[64 * 32], d[64 * 64];
  fg_test_fill_uniform(a, 64 * 32, fg_test_seed() + 1, 1.0f);
  fg_test_fill_uniform(w, 64 * 32, fg_test_seed() + 2, 1.0f);
  CUdeviceptr da = probe_upload(a, sizeof a), dw = probe_upload(w, sizeof w), dd = probe_upload(NULL, sizeof d);
  void *args[] = {&da, &dw, &dd};
  probe_run(&p, 128, args);
  const fg_cuda_api *cu = fg_cuda(NULL);
  assert_int_equal(cu->cuMemcpyDtoH(d, dd, sizeof d), CUDA_SUCCESS);
  cu->cuMemFree(da);
  cu->cuMemFree(dw);
  cu->cuMemFree(dd);
  probe_end(&p);
  double worst = probe_check(d, a, 64, 64, 32, w, true, round_bf16);
  printf("# wgmma probe: largest error %.2e of the sum of |products|\n", worst);
}

/* gemm on wgmma's layer on its own (the generated source of D=64, H=2048
 * bf16 on sm_90a, plus probe kernels calling layer<64, 256, 2, N> on one
 * block: a tile of N = 256 outputs, or two of 128): A (rows x 64, bf16 in a
 * block of 128 x 64 as the scratch area holds it) staged K-major, the
 * weights (64 inputs x 256 outputs, bf16 in two blocks of 128 outputs as
 * packed) staged N-major, each block by a bulk copy completing on the
 * stage's mbarrier, one chunk of products on each warpgroup's N / 2 outputs,
 * the accumulators through the epilogue (the mbarriers set up first, as
 * a launch of the variant does): D = A W as on the CPU from the
 * same bf16 inputs, rows past `rows` never written.  Where the gemm
 * variant fails, this tells its layouts (the descriptors' byte offsets
 * first) from the rest. */
/* The probe kernels gemm_wgmma_probe (tiles of 256 outputs) and
 * gemm_wgmma_probe_n128 (of 128), on activations of type A_TYPE (a
 * string). */
#define GEMM_WGMMA_PROBE_N(A_TYPE, SUFFIX, N)                                                                \
  "extern \"C\" __global__ void __launch_bounds__(256) gemm_wgmma_probe" SUFFIX "(\n"                       \
  "    const " A_TYPE "* a, const float* w, float* d, int rows)\n"                                            \
  "{\n"                                                                                                     \
  "  using namespace flowgen::probe::gemm;\n"                                                               \
  "  extern __shared__ __align__(16) float smem[];\n"                                                       \
  "  pipeline_start(smem);\n"                                                                              \
  "  layer<64, 256, 2, " N ">(a, 64, w, rows, smem, nullptr, [=](int r, int j, float acc) { d[r * 256 + j] = acc; }, 1);\n" \
  "}\n"
#define GEMM_WGMMA_PROBE(A_TYPE) GEMM_WGMMA_PROBE_N(A_TYPE, "", "256") GEMM_WGMMA_PROBE_N(A_TYPE, "_n128", "128")
static const char gemm_wgmma_probe[] = GEMM_WGMMA_PROBE("unsigned short");
/* the probe kernels' names: tiles of 256 outputs, of 128 */
static const char *const gemm_probe_names[] = {"gemm_wgmma_probe", "gemm_wgmma_probe_n128"};

/* bf16 bits of v (exact for the small integers the mapping run uses). */
static uint16_t bf16_bits(float v) {
  v = round_bf16(v);
  uint32_t u;
  memcpy(&u, &v, 4);
  return (uint16_t)(u >> 16);
}

/* The probe's operands as the gemm strategy lays them out in global
 * memory (its stages' images): A (rows <= 128 x in <= 64, row-major) as one
 * block of 128 rows x 64 inputs (grid.cut's tile_act), W (in <= 64 x out <=
 * 256, row-major) as two blocks of 64 inputs x 128 outputs (mma.cut's
 * pack_tiles); zeros elsewhere. */
enum { A_BLOCK = 128 * 64, W_BLOCK = 64 * 256 };
static void tile_a(const uint16_t *a, int rows, int in, uint16_t t[A_BLOCK]) {
  memset(t, 0, A_BLOCK * sizeof *t);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < in; ++k) t[(r >> 3) * 512 + (k >> 3) * 64 + (r & 7) * 8 + (k & 7)] = a[(size_t)r * in + k];
}
static void tile_w(const uint16_t *w, int in, int out, uint16_t t[W_BLOCK]) {
  memset(t, 0, W_BLOCK * sizeof *t);
  for (int k = 0; k < in; ++k)
    for (int n = 0; n < out; ++n)
      t[(n >> 7) * 8192 + (k >> 3) * 1024 + ((n & 127) >> 3) * 64 + (k & 7) * 8 + (n & 7)] = w[(size_t)k * out + n];
}

/* Fails where output (r, j) of the mapping runs (rows x out: D = I W with
 * W[i][j] = i, then j) did not read W[r][j], naming the first few and the
 * weight each read instead. */
static void check_mapping(const float *di, const float *dj, int rows, int out) {
  int wrong = 0;
  char first[512] = "";
  size_t used = 0;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      const float gi = di[(size_t)r * out + j], gj = dj[(size_t)r * out + j];
      if (gi == (float)r && gj == (float)j) continue;
      if (wrong++ < 6 && used < sizeof first - 64)
        used += (size_t)snprintf(first + used, sizeof first - used, " D[%d][%d] read W[%g][%g];", r, j, gi, gj);
    }
  if (wrong) fail_msg("%d of %d outputs read the wrong weight (A = I, D[r][j] should read W[r][j]):%s", wrong,
                      rows * out, first);
}

/* The probe's layer run on A = the identity (ROWS = IN = 64) and weights
 * that hold their own input index, then their own output index: D[r][j]
 * must be r, then j.  Where it is not, the message names the weight each
 * output read (W[i'][j'] for W[r][j]): a wrong byte offset in the
 * descriptor shows as inputs or outputs read from the wrong core matrix. */
static void probe_mapping(const probe_kernel *p, int rows_in, int in, int out) {
  const fg_cuda_api *cu = fg_cuda(NULL);
  size_t na = (size_t)rows_in * in, nw = (size_t)in * out, nd = (size_t)rows_in * out;
  float *d[2] = {malloc(nd * sizeof(float)), malloc(nd * sizeof(float))};
  uint16_t *a = calloc(na, sizeof *a), *w = malloc(nw * sizeof *w);
  assert_non_null(a);
  assert_non_null(d[0]);
  assert_non_null(d[1]);
  assert_non_null(w);
  for (int r = 0; r < rows_in && r < in; ++r) a[(size_t)r * in + r] = bf16_bits(1.0f);
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < in; ++i)
      for (int j = 0; j < out; ++j) w[(size_t)i * out + j] = bf16_bits((float)(pass == 0 ? i : j));
    static uint16_t ta[A_BLOCK], tw[W_BLOCK];
    tile_a(a, rows_in, in, ta);
    tile_w(w, in, out, tw);
    CUdeviceptr da = probe_upload(ta, sizeof ta), dw = probe_upload(tw, sizeof tw);
    CUdeviceptr dd = probe_upload(NULL, nd * sizeof(float));
    int rows = rows_in;
    void *args[] = {&da, &dw, &dd, &rows};
    probe_run(p, 256, args);
    assert_int_equal(cu->cuMemcpyDtoH(d[pass], dd, nd * sizeof(float)), CUDA_SUCCESS);
    cu->cuMemFree(da);
    cu->cuMemFree(dw);
    cu->cuMemFree(dd);
  }
  const int rows = rows_in < in ? rows_in : in;
  float *di = d[0], *dj = d[1];
  free(a);
  free(w);
  check_mapping(di, dj, rows, out);
  free(di);
  free(dj);
}

/* The bf16 probe kernel `name` on its mapping, then on random operands. */
static void gemm_wgmma_probe_bf16(flowgen_spec spec, const char *name) {
  probe_kernel p = probe_start(spec, "only=tiled:gemm", gemm_wgmma_probe, name, "gemm");
  enum { ROWS = 64, IN = 64, OUT = 256 };
  static float a[ROWS * IN], w[IN * OUT], d[ROWS * OUT];
  static uint16_t a16[ROWS * IN], packed[IN * OUT], ta[A_BLOCK], tw[W_BLOCK];
  fg_test_fill_uniform(a, ROWS * IN, fg_test_seed() + 3, 1.0f);
  fg_test_fill_uniform(w, IN * OUT, fg_test_seed() + 4, 1.0f);
  for (int e = 0; e < ROWS * IN; ++e) a16[e] = bf16_bits(a[e]);
  for (int e = 0; e < IN * OUT; ++e) packed[e] = bf16_bits(w[e]);
  tile_a(a16, ROWS, IN, ta);
  tile_w(packed, IN, OUT, tw);
  probe_mapping(&p, ROWS, IN, OUT);
  const fg_cuda_api *cu = fg_cuda(NULL);
  for (int rows = ROWS; rows >= 50; rows -= 14) {
    for (int e = 0; e < ROWS * OUT; ++e) d[e] = NAN;
    CUdeviceptr da = probe_upload(ta, sizeof ta), dw = probe_upload(tw, sizeof tw);
    CUdeviceptr dd = probe_upload(d, sizeof d);
    void *args[] = {&da, &dw, &dd, &rows};
    probe_run(&p, 256, args);
    assert_int_equal(cu->cuMemcpyDtoH(d, dd, sizeof d), CUDA_SUCCESS);
    cu->cuMemFree(da);
    cu->cuMemFree(dw);
    cu->cuMemFree(dd);
    double worst = probe_check(d, a, rows, OUT, IN, w, false, round_bf16);
    for (int e = rows * OUT; e < ROWS * OUT; ++e)
      if (!isnan(d[e])) fail_msg("row %d written past the %d rows", e / OUT, rows);
    printf("# %s, %d rows: largest error %.2e of the sum of |products|\n", name, rows, worst);
  }
  probe_end(&p);
}

static void test_gemm_wgmma_probe(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  flowgen_spec spec = make_spec(64, 2048, 2);
  spec.precision = FLOWGEN_PRECISION_BF16;
  for (int n = 0; n < 2; ++n) gemm_wgmma_probe_bf16(spec, gemm_probe_names[n]);
}

/* gemm on wgmma's layer in tf32 on its own (the generated source of D=64,
 * H=2048 tf32 on sm_90a, plus the probe kernels calling layer<64, 256, 2, N>):
 * two chunks of 32 inputs, A (rows x 64, fp32 rounded to tf32) as blocks
 * [chunk] of 128 rows x 32 inputs (grid.cut's tile_act: core matrices of
 * 8 rows x 4 inputs, the 8-row groups 1 KB apart), the weights as blocks
 * [outputs / 128][chunk] of 32 inputs x 128 outputs, K-major (mma.cut's pack_tiles: core
 * matrices of 8 outputs x 4 inputs, an output's inputs contiguous).  A =
 * the identity first (D[r][j] must read W[r][j]: a wrong descriptor offset
 * shows as the weight it read instead), then random rows: D = A W as on
 * the CPU from the same tf32 inputs, rows past `rows` never written. */
static const char gemm_wgmma_probe_tf32[] = GEMM_WGMMA_PROBE("float");

enum { A32_BLOCK = 128 * 32, W32_BLOCK = 32 * 128 };
static void tile_a32(const float *a, int rows, int in, float t[2 * A32_BLOCK]) {
  memset(t, 0, 2 * A32_BLOCK * sizeof *t);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < in; ++k)
      t[(k >> 5) * A32_BLOCK + (r >> 3) * 256 + ((k & 31) >> 2) * 32 + (r & 7) * 4 + (k & 3)] =
          round_tf32(a[(size_t)r * in + k]);
}
static void tile_w32(const float *w, int in, int out, float t[4 * W32_BLOCK]) {
  memset(t, 0, 4 * W32_BLOCK * sizeof *t);
  for (int k = 0; k < in; ++k)
    for (int n = 0; n < out; ++n)
      t[((n >> 7) * 2 + (k >> 5)) * W32_BLOCK + ((n & 127) >> 3) * 256 + ((k & 31) >> 2) * 32 + (n & 7) * 4 + (k & 3)] =
          round_tf32(w[(size_t)k * out + n]);
}

/* One launch of the tf32 probe on A (rows x 64) and W (64 x 256) into d
 * (rows x 256, poisoned with NaN first). */
static void probe_tf32_run(const probe_kernel *p, const float *a, const float *w, int rows, float *d) {
  static float ta[2 * A32_BLOCK], tw[4 * W32_BLOCK];
  tile_a32(a, rows, 64, ta);
  tile_w32(w, 64, 256, tw);
  for (int e = 0; e < 64 * 256; ++e) d[e] = NAN;
  const fg_cuda_api *cu = fg_cuda(NULL);
  CUdeviceptr da = probe_upload(ta, sizeof ta), dw = probe_upload(tw, sizeof tw);
  CUdeviceptr dd = probe_upload(d, 64 * 256 * sizeof(float));
  void *args[] = {&da, &dw, &dd, &rows};
  probe_run(p, 256, args);
  assert_int_equal(cu->cuMemcpyDtoH(d, dd, 64 * 256 * sizeof(float)), CUDA_SUCCESS);
  cu->cuMemFree(da);
  cu->cuMemFree(dw);
  cu->cuMemFree(dd);
}

/* The tf32 probe kernel `name` on its mapping, then on random operands. */
static void gemm_wgmma_probe_tf32_one(flowgen_spec spec, const char *name) {
  probe_kernel p = probe_start(spec, "only=tiled:gemm", gemm_wgmma_probe_tf32, name, "gemm");
  enum { ROWS = 64, IN = 64, OUT = 256 };
  static float a[ROWS * IN], w[IN * OUT], d[ROWS * OUT], di[ROWS * OUT], dj[ROWS * OUT];
  /* the mapping: A = I, W[i][j] = i, then j (exact in tf32) */
  memset(a, 0, sizeof a);
  for (int r = 0; r < ROWS; ++r) a[r * IN + r] = 1.0f;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < IN; ++i)
      for (int j = 0; j < OUT; ++j) w[i * OUT + j] = (float)(pass == 0 ? i : j);
    probe_tf32_run(&p, a, w, ROWS, pass == 0 ? di : dj);
  }
  check_mapping(di, dj, ROWS, OUT);
  fg_test_fill_uniform(a, ROWS * IN, fg_test_seed() + 5, 1.0f);
  fg_test_fill_uniform(w, IN * OUT, fg_test_seed() + 6, 1.0f);
  for (int rows = ROWS; rows >= 50; rows -= 14) {
    probe_tf32_run(&p, a, w, rows, d);
    double worst = probe_check(d, a, rows, OUT, IN, w, false, round_tf32);
    for (int e = rows * OUT; e < ROWS * OUT; ++e)
      if (!isnan(d[e])) fail_msg("row %d written past the %d rows", e / OUT, rows);
    printf("# %s tf32, %d rows: largest error %.2e of the sum of |products|\n", name, rows, worst);
  }
  probe_end(&p);
}

static void test_gemm_wgmma_probe_tf32(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  flowgen_spec spec = make_spec(64, 2048, 2);
  spec.precision = FLOWGEN_PRECISION_TF32;
  for (int n = 0; n < 2; ++n) gemm_wgmma_probe_tf32_one(spec, gemm_probe_names[n]);
}

typedef struct {
  int dim, hidden, steps;
  flowgen_precision precision;
  flowgen_solver solver; /* Euler where left out */
} variant_shape;

/* Each shape's variant of each of the n_strategies strategies (one
 * runtime under tune, so a shape compiles once) against the
 * reference within `tolerance`, at batches within its range: from batch 0,
 * 1, 7, 9 and 65 (a last block of one, seven and one sample); else its
 * first, first + 64, + 65 and + 1000; then its last (or 2 first + 3). */
static void check_variants_within(const char *tune, const char *const *strategies, size_t n_strategies,
                                  const variant_shape *shapes, size_t n_shapes, double tolerance) {
  flowrt_runtime *rt = NULL;
  flowgen_error err;
  flowrt_options opts = {.disk_cache = 0, .tune = tune ? tune : suite_tune()};
  flowgen_status st = flowrt_open(&opts, &rt, &err);
  if (st) fail_msg("flowrt_open: %s", err.message);
  uint64_t seed = fg_test_seed();
  for (size_t i = 0; i < n_shapes; ++i) {
    flowgen_spec spec = make_spec(shapes[i].dim, shapes[i].hidden, shapes[i].steps);
    spec.precision = shapes[i].precision;
    spec.solver = shapes[i].solver;
    flowrt_weights *w = fg_test_random_weights(spec.dim, spec.hidden, seed + 31 * i);
    flowrt_sampler *s = NULL;
    if (flowrt_sampler_create(rt, &spec, w, &s, &err)) fail_msg("%s", err.message);
    const flowgen_kernel *k = flowrt_sampler_kernel(s);
    for (size_t j = 0; j < n_strategies; ++j) {
      const char *strategy = strategies[j];
      const flowgen_variant *v = NULL;
      for (int m = 0; m < flowgen_kernel_variant_count(k); ++m)
        if (strcmp(flowgen_kernel_variant(k, m)->strategy, strategy) == 0) v = flowgen_kernel_variant(k, m);
      if (!v) fail_msg("D=%d H=%d: no %s variant", spec.dim, spec.hidden, strategy);
      const int64_t first = v->min_batch,
                    last = v->max_batch >= 0 ? v->max_batch : 2 * first + 3;
      const int64_t batches[] = {first > 0 ? first : 1, first > 0 ? first + 64 : 7,
                                 first > 0 ? first + 65 : 9, first > 0 ? first + 1000 : 65, last};
      for (size_t b = 0; b < sizeof batches / sizeof *batches; ++b) {
        if (v->max_batch >= 0 && batches[b] > v->max_batch) continue; /* a short range */
        assert_string_equal(flowgen_kernel_pick(k, batches[b])->strategy, strategy);
        double e = check_sampler(s, &spec, w, batches[b], 64, seed + b);
        printf("# %s %s D=%d H=%d B=%lld %s relerr=%.3e\n", flowgen_precision_name(spec.precision),
               flowgen_solver_name(spec.solver), spec.dim, spec.hidden, (long long)batches[b],
               strategy, e);
        assert_true(e <= tolerance);
      }
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
  }
  flowrt_close(rt);
}

/* check_variants_within for one strategy. */
static void check_variant_within(const char *tune, const char *strategy,
                                 const variant_shape *shapes, size_t n_shapes, double tolerance) {
  check_variants_within(tune, &strategy, 1, shapes, n_shapes, tolerance);
}

static void check_variant(const char *tune, const char *strategy, const variant_shape *shapes,
                          size_t n_shapes) {
  check_variant_within(tune, strategy, shapes, n_shapes, 1e-2);
}

/* The 16-bit shapes of the gemm tests: where the mma kernel does not fit
 * (H=2048; H=4095 with rows of no multiple of 8), small ones (odd chunk
 * counts at D=17 and D=3), every solver. */
static const variant_shape gemm_half[] = {{256, 2048, 4, FLOWGEN_PRECISION_BF16},
                                          {33, 4095, 3, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_RK4},
                                          {64, 2048, 2, FLOWGEN_PRECISION_FP16},
                                          {17, 200, 3, FLOWGEN_PRECISION_FP16},
                                          {3, 100, 5, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_RK4}};

/* The gemm strategy on each precision's own operands (only=tiled:gemm),
 * from batch 1057 at the precision's tolerance, where the mma kernel does
 * not fit (H=2048, H=4095 with rows of no multiple of 8) and on small
 * shapes, every solver; three tests, the suite's longest, that a device
 * round's shards run side by side.  tf32: m16n8k8, one and two blocks a
 * SM. */
static void test_gemm_tf32(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const gemm[] = {"gemm"};
  static const variant_shape tf32[] = {{256, 2048, 4, FLOWGEN_PRECISION_TF32},
                                       {33, 4095, 3, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_HEUN},
                                       {64, 256, 4, FLOWGEN_PRECISION_TF32},
                                       {3, 100, 5, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_MIDPOINT}};
  check_variants_within("only=tiled:gemm", gemm, 1, tf32, sizeof tf32 / sizeof *tf32, 2e-4);
  check_variants_within("only=tiled:gemm,gemm.per_sm=2", gemm, 1, tf32 + 2, 2, 2e-4);
}

/* bf16 and fp16 on wgmma where the runtime builds for sm_90a (m64n256k16,
 * both operands staged by bulk copies, the activations in 16 bits in the
 * scratch area; else m16n8k16 on mma.sync): from batch 2 in tiles of 64
 * rows, and from 1057, where tiles of 128 rows come in, in chunks of 1024
 * samples (gemm.batch_rows: the batches there are two and three chunks,
 * the last one short). */
static void test_gemm_16bit(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const gemm[] = {"gemm"};
  check_variants_within("only=tiled:gemm", gemm, 1, gemm_half, sizeof gemm_half / sizeof *gemm_half, 2e-2);
  check_variants_within("only=tiled:gemm,gemm=1057:,gemm.batch_rows=1024", gemm, 1, gemm_half, 2, 2e-2);
}

/* bf16 and fp16 on mma.sync (two blocks a SM: not wgmma): ldmatrix B
 * fragments from the 16-bit copies; a chunk's tiles of every height, 64
 * inputs a stage under 32-row tiles. */
static void test_gemm_16bit_mma_sync(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const gemm[] = {"gemm"};
  check_variants_within("only=tiled:gemm,gemm.per_sm=2,gemm.rows=32,gemm.chunk=64", gemm, 1, gemm_half + 3, 2, 2e-2);
  check_variants_within("only=tiled:gemm,gemm.per_sm=2", gemm, 1, gemm_half, 2, 2e-2);
}

/* The grid variants' resident weights (each block's
 * first tile of a layer read from its copy in shared memory): every layer
 * resident (D=256, H=2048 at B <= 8), some (H=4095 and 4096: W2's tiles do
 * not fit), rows of no multiple of 4 (D=17, D=33), every solver; at the
 * variants' edges, launch after launch on one scratch area (each launch
 * fills the copies again). */
static void test_grid_resident(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const grids[] = {"grid_b1", "grid_b8", "grid_b64"};
  static const variant_shape shapes[] = {{256, 2048, 2, FLOWGEN_PRECISION_FP32},
                                         {33, 1000, 3, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_RK4},
                                         {17, 4095, 2, FLOWGEN_PRECISION_FP32, FLOWGEN_SOLVER_HEUN}};
  check_variants_within("only=grid:tiled8:tiled", grids, 3, shapes,
                        sizeof shapes / sizeof *shapes, 1e-5);
  /* bf16: the copies filled from the 16-bit weights */
  static const variant_shape half[] = {{64, 4096, 2, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_MIDPOINT}};
  check_variants_within("only=grid:tiled8:tiled", grids, 3, half, 1, 2e-2);
}

/* The grid variants in bf16 and fp16: the weights read from the mma
 * kernel's 16-bit copies (4, 2 and 1 a load: H=512, D=33, H=1000 and
 * H=4095), the products in fp32; at the variants' edges, every solver
 * among them, at the precision's tolerance. */
static void test_grid_16bit(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const grids[] = {"grid_b1", "grid_b8", "grid_b64"};
  static const variant_shape shapes[] = {{128, 512, 3, FLOWGEN_PRECISION_BF16},
                                         {33, 1000, 3, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_RK4},
                                         {17, 4095, 2, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_HEUN},
                                         {256, 2048, 2, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_MIDPOINT}};
  check_variants_within("only=grid:tiled8:tiled", grids, 3, shapes, sizeof shapes / sizeof *shapes, 2e-2);
}

/* gemm on wgmma (bf16 and fp16 where the runtime builds for sm_90a; its
 * tiles of 128 rows over 64 in test_gemm_16bit): tiles of 64 rows
 * alone (gemm.rows=64: a warpgroup's m64n128k16 half of 256 outputs). */
static void test_gemm_wgmma(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const char *const gemm[] = {"gemm"};
  check_variants_within("only=tiled:gemm,gemm.rows=64", gemm, 1, gemm_half, 2, 2e-2);
}

/* The default plan's gemm in place of the mma kernel (tf32, bf16 and fp16
 * on sm_90a, H >= 512), from the first batch the grids leave (65 at D=1024
 * and D=256, H=1024, and at D=1024, H=512), at its edges against the
 * reference, Euler and Heun. */
static void test_gemm_over_mma(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  static const char *const gemm[] = {"gemm"};
  static const variant_shape shapes[] = {{1024, 1024, 2, FLOWGEN_PRECISION_BF16},
                                         {256, 1024, 2, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_HEUN},
                                         {1024, 512, 2, FLOWGEN_PRECISION_BF16}};
  check_variants_within(NULL, gemm, 1, shapes, 3, 2e-2);
  static const variant_shape tf32[] = {{32, 1024, 2, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_HEUN}};
  check_variants_within(NULL, gemm, 1, tf32, 1, 2e-4);
}

/* The wgmma variant (bf16 and fp16, Euler, sm_90, where the runtime builds
 * for sm_90a) against the reference at its tolerance: its first batch, a last
 * block with one warpgroup idle (first + 64), a warpgroup with one sample
 * (first + 65), larger batches of no multiple of 64, shapes whose D and H
 * are no multiple of 16.  Every batch is within the variant's range, so
 * the kernel picked is the wgmma one.  The same for the one-warpgroup
 * variant (wgmma64, from the register-resident kernel's last batch + 1 to
 * 8448) and one that starts at 1000 (tune skip=rmma,wgmma64=1000:). */
static void check_wgmma_variant(const char *tune, const char *strategy) {
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_BF16},
                                         {3, 100, 5, FLOWGEN_PRECISION_FP16},
                                         {17, 200, 4, FLOWGEN_PRECISION_BF16},
                                         {64, 64, 3, FLOWGEN_PRECISION_FP16}};
  check_variant(tune, strategy, shapes, sizeof shapes / sizeof *shapes);
}

static void test_wgmma_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  check_wgmma_variant(NULL, "wgmma");
  check_wgmma_variant(NULL, "wgmma64");
  check_wgmma_variant("skip=rmma,wgmma64=1000:", "wgmma64");
}

/* The streamed warpgroup variant (tf32, Euler, sm_90) at the tf32
 * tolerance (1e-4): its first batch (2113) and four more of no multiple of
 * 128, whose last cluster of 2 holds 65, 129, 130, 41 and 133 samples (a
 * second block without samples, warpgroups with one sample or none); D and
 * H of no multiple of 16 and 32; blocks alone (wgstream.blocks=1), 32
 * outputs a chunk (wgstream.n=32); warpgroup 1 starting each layer 1 once
 * warpgroup 0's is done (the plan at the first two shapes, whose rings are
 * shorter than a step's pieces), W1 by 32 inputs a piece (the plan at
 * D=64; by 16 at D=17 and D=3). */
static void test_wgstream_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_TF32},
                                         {17, 200, 4, FLOWGEN_PRECISION_TF32},
                                         {3, 100, 5, FLOWGEN_PRECISION_TF32},
                                         {64, 64, 3, FLOWGEN_PRECISION_TF32}};
  const size_t n = sizeof shapes / sizeof *shapes;
  check_variant_within(NULL, "wgstream", shapes, n, 1e-4);
  check_variant_within("wgstream.blocks=1", "wgstream", shapes, n, 1e-4);
  check_variant_within("wgstream.n=32", "wgstream", shapes, 1, 1e-4);
  check_variant_within("wgstream.blocks=1,wgstream.n=32", "wgstream", shapes, 1, 1e-4);
}

/* fp32 as tf32x3 on the streamed warpgroup kernel at fp32's tolerance
 * (1e-6): its first batch (1057 on an H200) and four more (a last block of one
 * sample; over clusters of 2, wgstream.blocks=2, a last cluster with a block without
 * samples), D and H of no multiple of 16 and 32. */
static void test_wgstream3_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_FP32},
                                         {17, 200, 4, FLOWGEN_PRECISION_FP32},
                                         {3, 100, 5, FLOWGEN_PRECISION_FP32},
                                         {64, 64, 3, FLOWGEN_PRECISION_FP32}};
  const size_t n = sizeof shapes / sizeof *shapes;
  check_variant_within(NULL, "wgstream3", shapes, n, 1e-6);
  check_variant_within("wgstream.blocks=2", "wgstream3", shapes, n, 1e-6);
}

/* The register-resident kernel (bf16 and fp16, sm_80 and newer;
 * tune rmma=1:2000: from the first batch up to 2000, two waves of
 * blocks on an H200, so that a block of one sample is checked): shapes
 * whose D and H are no multiple of 16, the largest D it takes, two tiles a
 * warp (D=64, H=256) and one (D=160 and 128, H=128), W1 in registers
 * (D=17, H=200) and in shared memory, every solver (the stages' inputs and
 * sums). */
static void test_rmma_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(80);
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_BF16},
                                         {17, 200, 4, FLOWGEN_PRECISION_FP16},
                                         {3, 100, 5, FLOWGEN_PRECISION_BF16},
                                         {160, 128, 3, FLOWGEN_PRECISION_FP16},
                                         {1, 1, 3, FLOWGEN_PRECISION_FP16},
                                         {64, 256, 3, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_RK4},
                                         {17, 200, 4, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_HEUN},
                                         {3, 100, 5, FLOWGEN_PRECISION_BF16, FLOWGEN_SOLVER_MIDPOINT},
                                         {128, 128, 2, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_RK4}};
  check_variant("rmma=1:2000", "rmma", shapes, sizeof shapes / sizeof *shapes);
}

/* bf16 and fp16 as planned where the cluster kernel takes the first wave
 * (sm_90, D >= 64): its one-sample variant (fp32 arithmetic) at the fp32
 * tolerance, layer 3 folded at H=128, then rmma from batch 31 at the
 * precision's; Euler and RK4. */
static void test_low_precision_small_batches(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(90);
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_BF16},
                                         {64, 128, 5, FLOWGEN_PRECISION_FP16},
                                         {64, 64, 4, FLOWGEN_PRECISION_BF16},
                                         {64, 256, 3, FLOWGEN_PRECISION_FP16, FLOWGEN_SOLVER_RK4}};
  const size_t n = sizeof shapes / sizeof *shapes;
  check_variant_within(NULL, "cluster4_r1", shapes, n, 1e-6);
  check_variant(NULL, "rmma", shapes, n);
}

/* tf32 on the register-resident kernel over clusters (sm_90, Euler) at the
 * tf32 tolerance (1e-4): as planned, clusters of 2 from batch 91 after the
 * cluster kernel (D=64, H=256), from the first batch where that does not
 * fit; D of no multiple of 16 beyond 64 (D=100: 8 state elements a
 * thread), three warps a block (D=40, H=96), two warps (D=24, H=64),
 * last clusters of one and of seven samples, five waves of clusters. */
static void test_rmma_tf32(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(90);
  static const variant_shape two[] = {{64, 256, 8, FLOWGEN_PRECISION_TF32},
                                      {40, 96, 4, FLOWGEN_PRECISION_TF32},
                                      {24, 64, 5, FLOWGEN_PRECISION_TF32},
                                      {100, 128, 3, FLOWGEN_PRECISION_TF32}};
  check_variant_within(NULL, "rmma_c2", two, sizeof two / sizeof *two, 1e-4);
}

/* fp32 as tf32x3 on the register-resident kernel over clusters of 4
 * (sm_90, Euler) at the fp32 tolerance (1e-6): as planned, by 16 samples a
 * cluster (two n-tiles) from batch 241 after the cluster kernel (D=64,
 * H=256; D=48, H=192: 6 warps, an odd count of layer 3's m-tiles), by 8
 * for two waves, then 16, where the blocks by 16 have fewer than 6 warps
 * (D=16, H=64: two warps, one m-tile of layer 3), by 8 then 16 where that
 * kernel does not fit (D=17, H=200: H rounded up to 64), by 8 alone where
 * 16 do not fit (D=128, H=128, to 720) or would leave a thread 8 state
 * elements (D=64, H=128, to 1056 before wgstream3; D=80, H=160, to 1920);
 * last clusters of one, two, seven and nine samples, up to batch 1920; by
 * 8 after the cluster kernel (skip=rmma3_r16, to 1056 before wgstream3)
 * and by 16 up to batch 300 (rmma3_r16=:300). */
static void test_rmma3_strategy(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(90);
  static const variant_shape after[] = {{64, 256, 8, FLOWGEN_PRECISION_FP32},
                                        {48, 192, 3, FLOWGEN_PRECISION_FP32}};
  static const variant_shape two_waves[] = {{16, 64, 3, FLOWGEN_PRECISION_FP32}};
  static const variant_shape first[] = {{17, 200, 4, FLOWGEN_PRECISION_FP32},
                                        {24, 64, 5, FLOWGEN_PRECISION_FP32}};
  static const variant_shape eight[] = {{128, 128, 3, FLOWGEN_PRECISION_FP32},
                                        {64, 128, 3, FLOWGEN_PRECISION_FP32},
                                        {80, 160, 3, FLOWGEN_PRECISION_FP32}};
  static const char *const both[] = {"rmma3_r8", "rmma3_r16"};
  check_variant_within(NULL, "rmma3_r16", after, 2, 1e-6);
  check_variants_within(NULL, both, 2, two_waves, 1, 1e-6);
  check_variants_within(NULL, both, 2, first, 1, 1e-6);
  check_variant_within(NULL, "rmma3_r8", eight, 3, 1e-6);
  check_variant_within("skip=rmma3_r16", "rmma3_r8", after, 2, 1e-6);
  check_variant_within("rmma3_r16=:300", "rmma3_r16", after, 1, 1e-6);
}

/* The cluster kernel (fp32 in every precision, sm_90) at the fp32
 * tolerance, its layer 2 by warp (where own units come in 32s) and by
 * lanes (D=16, H=64), of 4 and 8 blocks, 1 to 8 samples a cluster over one
 * to three waves of clusters, Euler and RK4. */
static void test_cluster_layer2(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(90);
  static const variant_shape shapes[] = {{64, 256, 8, FLOWGEN_PRECISION_FP32},
                                         {64, 256, 3, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_RK4},
                                         {32, 128, 5, FLOWGEN_PRECISION_FP32}};
  const size_t n = sizeof shapes / sizeof *shapes;
  /* 1 to 8 samples a cluster; 8 over three waves (fp32, D=64, H=256, skip=rmma3:
   * without rmma3, which takes over after one as planned), two (tf32) and
   * one (H=128) */
  static const char *const planned[] = {"cluster4_r1", "cluster4_r3", "cluster4_r4", "cluster4_r6",
                                        "cluster4_r8"};
  const size_t n_planned = sizeof planned / sizeof *planned;
  check_variants_within(NULL, planned, n_planned, shapes, n, 1e-6);
  check_variants_within("skip=rmma3", planned, n_planned, shapes, 1, 1e-6);
  check_variant_within("cluster.blocks=8", "cluster8_r1", shapes, 2, 1e-6);  /* H=128: none */
  /* 4 over two waves */
  check_variant_within("skip=rmma3,cluster4_r4=:240", "cluster4_r4", shapes, 1, 1e-6);
  /* layer 3's lanes of an output: 2, 16 apart, two sends each (D=64,
   * H=128); 4, 8 apart, layer 2 by lanes (D=16, H=64); 8, 4 apart, half of
   * them sending (D=32, H=256) */
  static const variant_shape lanes3[] = {{64, 128, 4, FLOWGEN_PRECISION_FP32},
                                         {16, 64, 4, FLOWGEN_PRECISION_FP32},
                                         {32, 256, 4, FLOWGEN_PRECISION_FP32}};
  static const char *const few[] = {"cluster4_r1", "cluster4_r3"};
  check_variants_within(NULL, few, 2, lanes3, sizeof lanes3 / sizeof *lanes3, 1e-6);
}

/* The cluster kernel with layer 3 folded into layer 1 (Euler, sm_90) at
 * the fp32 tolerance: as planned at D=64, H=128 (every count of samples a
 * cluster in fp32, 8 a cluster for one wave before rmma3 and over three
 * under skip=rmma3, 1 to 3 in tf32), also over one and two steps, and
 * D=32, H=128 (one sample). */
static void test_cluster_fold(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_below(90);
  static const variant_shape planned_shapes[] = {{64, 128, 5, FLOWGEN_PRECISION_FP32},
                                                 {64, 128, 3, FLOWGEN_PRECISION_TF32}};
  static const char *const all_rows[] = {"cluster4_r1", "cluster4_r2", "cluster4_r3",
                                         "cluster4_r4", "cluster4_r6", "cluster4_r8"};
  check_variants_within(NULL, all_rows, sizeof all_rows / sizeof *all_rows, planned_shapes, 1, 1e-6);
  check_variant_within("skip=rmma3", "cluster4_r8", planned_shapes, 1, 1e-6);
  check_variants_within(NULL, all_rows, 3, planned_shapes + 1, 1, 1e-6);  /* tf32: rmma_c2 from 91 */
  static const variant_shape one_row[] = {{32, 128, 6, FLOWGEN_PRECISION_FP32}};
  check_variant_within(NULL, "cluster4_r1", one_row, 1, 1e-6);
  /* One and two steps: the end's exchange (number S) on the first phase of
   * mbarrier 1, then on the second of mbarrier 0. */
  static const variant_shape short_runs[] = {{64, 128, 1, FLOWGEN_PRECISION_FP32},
                                             {64, 128, 2, FLOWGEN_PRECISION_FP32}};
  check_variants_within(NULL, all_rows, 2, short_runs, 2, 1e-6);
}

/* Two samplers of different shapes live side by side; a second sampler of
 * the same spec is an in-memory hit; a fresh runtime finds the disk entry. */
/* ---- the model family ----------------------------------------------------- */

/* Samples batch rows of a conditional (or any) model on the GPU with
 * random conditioning and compares `checked` rows with the fp64 reference;
 * guidance w (a guided spec) with a random null conditioning when
 * with_null. */
static double check_family(flowrt_sampler *s, const flowgen_spec *spec, const flowrt_weights *w,
                           int64_t batch, int64_t checked, float guidance, bool with_null,
                           uint64_t seed) {
  const int D = spec->dim, C = spec->cond;
  size_t n = (size_t)batch * D, nc = (size_t)batch * C;
  float *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
  float *cond = C ? malloc(nc * sizeof *cond) : NULL, *null_cond = NULL;
  fg_test_fill_uniform(x0, n, seed, 2.0f);
  if (C) fg_test_fill_uniform(cond, nc, seed + 1, 1.0f);
  if (with_null) {
    null_cond = malloc((size_t)C * sizeof *null_cond);
    fg_test_fill_uniform(null_cond, (size_t)C, seed + 2, 1.0f);
  }
  for (size_t i = 0; i < n; ++i) x[i] = NAN; /* poison */
  flowgen_error err;
  if (flowrt_sample_host_cond(s, x0, x, cond, null_cond, guidance, batch, &err))
    fail_msg("%s", err.message);
  double e = compare_with_reference(spec, w, x0, x, cond, null_cond, guidance, batch, checked);
  free(x0);
  free(x);
  free(cond);
  free(null_cond);
  return e;
}

/* Every member of the family (each field off its default somewhere: C,
 * L, act, time, input, guidance), in every precision and on every variant
 * of its plan (the batches at each variant's edges), against the fp64
 * reference at the precision's tolerance.  The fp32 tolerance is the
 * seed's tenfold: gelu's erff and the sin features' table (rounded from
 * fp64) add their own rounding.  Conditional members also at B = 8 and
 * B = 20000 (the conditioning kernel's matrix-unit tiles). */
static void test_family_matches_reference(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  static const struct {
    flowgen_precision precision;
    double tolerance;
  } precisions[] = {{FLOWGEN_PRECISION_FP32, 1e-5}, {FLOWGEN_PRECISION_TF32, 2e-4},
                    {FLOWGEN_PRECISION_BF16, 2e-2}, {FLOWGEN_PRECISION_FP16, 2e-2}};
  static const struct {
    int dim, hidden, steps;
    const char *fields[7][2];
  } members[] = {
      {64, 256, 8, {{"cond", "10"}}},
      {64, 256, 8, {{"layers", "2"}, {"act", "gelu"}}},
      {64, 256, 8, {{"layers", "5"}, {"act", "gelu_tanh"}, {"time", "sin:32"}}},
      {16, 64, 6, {{"act", "relu"}, {"cond", "512"}, {"input", "c,t,x"}}},
      {16, 64, 6, {{"act", "tanh"}, {"time", "sin:16:10"}, {"layers", "4"}}},
      {64, 256, 8, {{"cond", "10"}, {"guidance", "1"}}},
      {32, 128, 4, {{"cond", "7"}, {"guidance", "1"}, {"layers", "8"}, {"act", "gelu"},
                    {"time", "sin:8"}, {"input", "t,x,c"}}},
      {128, 512, 4, {{"cond", "33"}, {"layers", "3"}, {"act", "silu"}, {"input", "x,c,t"}}},
  };
  uint64_t seed = fg_test_seed();
  for (size_t m = 0; m < sizeof members / sizeof *members; ++m)
    for (size_t p = 0; p < sizeof precisions / sizeof *precisions; ++p) {
      flowgen_spec spec = make_spec(members[m].dim, members[m].hidden, members[m].steps);
      spec.precision = precisions[p].precision;
      char what[256];
      int at = snprintf(what, sizeof what, "D=%d H=%d S=%d %s", spec.dim, spec.hidden,
                        spec.steps, flowgen_precision_name(spec.precision));
      for (int k = 0; k < 7 && members[m].fields[k][0]; ++k) {
        assert_int_equal(flowgen_spec_set(&spec, members[m].fields[k][0], members[m].fields[k][1],
                                          NULL),
                         FLOWGEN_OK);
        at += snprintf(what + at, sizeof what - (size_t)at, " --%s %s", members[m].fields[k][0],
                       members[m].fields[k][1]);
      }
      flowrt_weights *w = fg_test_random_model(&spec, seed + 17 * m + p, 1.0f);
      flowrt_sampler *s = NULL;
      flowgen_error err;
      if (flowrt_sampler_create(f->rt, &spec, w, &s, &err)) fail_msg("%s: %s", what, err.message);
      const flowgen_kernel *k = flowrt_sampler_kernel(s);
      for (int vi = 0; vi < flowgen_kernel_variant_count(k); ++vi) {
        const flowgen_variant *v = flowgen_kernel_variant(k, vi);
        if (v->max_batch == 0) continue; /* a fallback alone: no batch of its own */
        int64_t lo = v->min_batch > 0 ? v->min_batch : 1;
        int64_t hi = v->max_batch >= 0 ? v->max_batch : lo + 3 * v->rows_per_block + 5;
        if (hi > 70000) hi = 70000;
        const int64_t batches[] = {lo, hi};
        for (int b = 0; b < 2; ++b) {
          /* Guided members at w = 3, with a null conditioning every other time. */
          float g = spec.guidance ? 3.0f : 1.0f;
          double e = check_family(s, &spec, w, batches[b], 32, g, spec.guidance && b, seed + b);
          printf("# family %s %s B=%lld relerr=%.3e\n", what, v->strategy, (long long)batches[b], e);
          if (!(e <= precisions[p].tolerance))
            fail_msg("%s %s B=%lld: relerr %.3e > %.0e", what, v->strategy,
                     (long long)batches[b], e, precisions[p].tolerance);
        }
      }
      /* A conditional member at B = 8 (the cluster kernel's batches) and at
       * a batch whose conditioning kernel takes the matrix units' tiles
       * (from 128 tiles of 128 samples x 64 units). */
      const int64_t cond_batches[] = {8, 20000};
      for (int b = 0; spec.cond && b < 2; ++b) {
        float g = spec.guidance ? 3.0f : 1.0f;
        double e = check_family(s, &spec, w, cond_batches[b], 32, g, spec.guidance && b, seed + 7 + b);
        printf("# family %s B=%lld relerr=%.3e\n", what, (long long)cond_batches[b], e);
        if (!(e <= precisions[p].tolerance))
          fail_msg("%s B=%lld: relerr %.3e > %.0e", what, (long long)cond_batches[b], e,
                   precisions[p].tolerance);
      }
      flowrt_sampler_destroy(s);
      flowrt_weights_free(w);
    }
}

/* A family member (D, H, S=3, precision, up to `n` fields: name and
 * value, a null name ending them early) with random weights, sampled by a
 * runtime of its own under `tune`: the spec, *rt, *w and the sampler. */
static flowrt_sampler *member_sampler(int dim, int hidden, flowgen_precision precision, const char *const (*fields)[2],
                                      int n, const char *tune, uint64_t seed, flowgen_spec *spec,
                                      flowrt_runtime **rt, flowrt_weights **w) {
  flowgen_error err;
  flowrt_options opts = {.disk_cache = 0, .tune = tune};
  if (flowrt_open(&opts, rt, &err)) fail_msg("flowrt_open: %s", err.message);
  *spec = make_spec(dim, hidden, 3);
  spec->precision = precision;
  for (int k = 0; k < n && fields[k][0]; ++k)
    assert_int_equal(flowgen_spec_set(spec, fields[k][0], fields[k][1], NULL), FLOWGEN_OK);
  *w = fg_test_random_model(spec, seed, 1.0f);
  flowrt_sampler *s = NULL;
  if (flowrt_sampler_create(*rt, spec, *w, &s, &err)) fail_msg("%s", err.message);
  return s;
}

/* gemm on each precision's own operands (only=tiled:gemm) for members of
 * the family where the mma kernel does not fit: a guided conditional
 * member of 4 layers with GELU (bf16: on wgmma on sm_90a, and again on
 * mma.sync, gemm.per_sm=2) and one
 * with sin time (tf32), at its first batch and a later one, guided at w = 3
 * with a null conditioning the second time. */
static void test_gemm_family(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const struct {
    flowgen_precision precision;
    double tolerance;
    const char *fields[4][2];
    const char *tune;
  } members[] = {
      {FLOWGEN_PRECISION_BF16, 2e-2, {{"cond", "40"}, {"guidance", "1"}, {"layers", "4"}, {"act", "gelu"}},
       "only=tiled:gemm"},
      {FLOWGEN_PRECISION_TF32, 2e-4, {{"cond", "10"}, {"time", "sin:16"}}, "only=tiled:gemm"},
      /* the first on mma.sync (two blocks a SM) */
      {FLOWGEN_PRECISION_BF16, 2e-2, {{"cond", "40"}, {"guidance", "1"}, {"layers", "4"}, {"act", "gelu"}},
       "only=tiled:gemm,gemm.per_sm=2"},
  };
  uint64_t seed = fg_test_seed();
  for (size_t m = 0; m < sizeof members / sizeof *members; ++m) {
    flowrt_runtime *rt = NULL;
    flowrt_weights *w = NULL;
    flowgen_spec spec;
    flowrt_sampler *s = member_sampler(64, 2048, members[m].precision, members[m].fields, 4, members[m].tune,
                                       seed + 41 * m, &spec, &rt, &w);
    const int64_t batches[] = {1057, 2100};
    for (int b = 0; b < 2; ++b) {
      assert_string_equal(flowgen_kernel_pick(flowrt_sampler_kernel(s), batches[b])->strategy, "gemm");
      const float g = spec.guidance ? 3.0f : 1.0f;
      double e = check_family(s, &spec, w, batches[b], 32, g, spec.guidance && b, seed + b);
      printf("# gemm family %s B=%lld relerr=%.3e\n", flowgen_precision_name(spec.precision),
             (long long)batches[b], e);
      assert_true(e <= members[m].tolerance);
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
    flowrt_close(rt);
  }
}

/* gemm_b1024's split tiles (gemm's small batches on wgmma: bf16, fp16, tf32
 * on sm_90a): the inputs of each tile of 64 rows cut into up to 32 parts
 * where the tiles are fewer than the SMs, their partial sums added up by
 * the parts together.  Split wherever they can be (gemm.split_cost=0) from
 * its first batch (2, 7, 66 and 67: one and two rows of tiles; 1002 and
 * 1024, where the last layer's few tiles split), every solver among the
 * shapes (the last layer's stage sums), then a guided member (its two rows
 * a sample) at B = 2 and 33, several launches on one scratch area (the
 * parts' counts go on from layer to layer). */
static void test_gemm_split(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  skip_unless_sm90();
  static const char *const gemm[] = {"gemm_b1024"};
  static const char *const tune = "only=tiled:gemm_b1024:gemm,gemm.split_cost=0";
  check_variants_within(tune, gemm, 1, gemm_half, 2, 2e-2);
  static const variant_shape tf32[] = {{64, 2048, 3, FLOWGEN_PRECISION_TF32, FLOWGEN_SOLVER_HEUN}};
  check_variants_within(tune, gemm, 1, tf32, 1, 2e-4);
  static const char *const fields[4][2] = {{"cond", "40"}, {"guidance", "1"}, {"layers", "4"}, {"act", "gelu"}};
  uint64_t seed = fg_test_seed();
  flowrt_runtime *rt = NULL;
  flowrt_weights *w = NULL;
  flowgen_spec spec;
  flowrt_sampler *s = member_sampler(64, 2048, FLOWGEN_PRECISION_BF16, fields, 4, tune, seed, &spec, &rt, &w);
  const int64_t batches[] = {2, 33, 2};
  for (int b = 0; b < 3; ++b) {
    assert_string_equal(flowgen_kernel_pick(flowrt_sampler_kernel(s), batches[b])->strategy, "gemm_b1024");
    double e = check_family(s, &spec, w, batches[b], 32, 3.0f, b == 1, seed + b);
    printf("# gemm split family bf16 B=%lld relerr=%.3e\n", (long long)batches[b], e);
    assert_true(e <= 2e-2);
  }
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
  flowrt_close(rt);
}

/* The grid variants over the model family: the activations handed on in
 * words of a value and an epoch (conditioning, sin time, 2 and 5 layers,
 * multi-stage solvers), and with guidance through grid barriers (its
 * blend reads other blocks' rows); each sampler launched at B = 1, 8 and
 * 64, several launches on one scratch area (the epochs go on from launch
 * to launch). */
static void test_grid_family(void **state) {
  FG_SKIP_WITHOUT_GPU();
  (void)state;
  static const struct {
    flowgen_precision precision;
    int dim, hidden;
    double tolerance;
    const char *fields[5][2];
  } members[] = {
      {FLOWGEN_PRECISION_FP32, 64, 2048, 1e-5, {{"cond", "10"}, {"time", "sin:16"}}},
      {FLOWGEN_PRECISION_FP32, 33, 1000, 1e-5, {{"layers", "2"}, {"solver", "heun"}}},
      {FLOWGEN_PRECISION_BF16, 17, 1024, 2e-2, {{"layers", "5"}, {"act", "gelu"}, {"solver", "rk4"}}},
      {FLOWGEN_PRECISION_FP32, 64, 2048, 1e-5, {{"cond", "40"}, {"guidance", "1"}, {"layers", "4"}}},
  };
  static const char *const grids[] = {"grid_b1", "grid_b8", "grid_b64"};
  static const int64_t batches[] = {1, 8, 64};
  uint64_t seed = fg_test_seed();
  for (size_t m = 0; m < sizeof members / sizeof *members; ++m) {
    flowrt_runtime *rt = NULL;
    flowrt_weights *w = NULL;
    flowgen_spec spec;
    flowrt_sampler *s = member_sampler(members[m].dim, members[m].hidden, members[m].precision, members[m].fields, 5,
                                       "only=grid:tiled8:tiled", seed + 43 * m, &spec, &rt, &w);
    for (int round = 0; round < 2; ++round) {
      for (int b = 0; b < 3; ++b) {
        assert_string_equal(flowgen_kernel_pick(flowrt_sampler_kernel(s), batches[b])->strategy, grids[b]);
        const float g = spec.guidance ? 3.0f : 1.0f;
        double e = check_family(s, &spec, w, batches[b], batches[b], g, spec.guidance && b, seed + 7 * round + b);
        printf("# grid family %zu %s B=%lld relerr=%.3e\n", m, flowgen_precision_name(spec.precision),
               (long long)batches[b], e);
        assert_true(e <= members[m].tolerance);
      }
    }
    flowrt_sampler_destroy(s);
    flowrt_weights_free(w);
    flowrt_close(rt);
  }
}

/* A conditional sampler in a CUDA graph: the workspace reserved first,
 * then captured (cond kernel and sampler) and replayed, the same bytes as
 * a direct launch; without the reserve, the capture is refused naming it
 * and nothing is launched. */
static void test_family_graph_capture(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  const fg_cuda_api *cu = fg_cuda(NULL);
  flowgen_spec spec = make_spec(64, 256, 16);
  spec.cond = 10;
  spec.guidance = true;
  flowrt_weights *w = fg_test_random_model(&spec, fg_test_seed() + 3, 1.0f);
  flowrt_sampler *s = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_sampler_create(f->rt, &spec, w, &s, &err), FLOWGEN_OK);
  const int64_t batch = 8;
  const size_t n = (size_t)batch * 64, bytes = n * sizeof(float), cbytes = (size_t)batch * 10 * 4;
  float *x0 = malloc(bytes), *cond = malloc(cbytes), *direct = malloc(bytes), *replay = malloc(bytes);
  double *ref = malloc(n * sizeof *ref);
  fg_test_fill_uniform(x0, n, fg_test_seed(), 1.5f);
  fg_test_fill_uniform(cond, (size_t)batch * 10, fg_test_seed() + 1, 1.0f);
  CUcontext ctx;
  CUdevice dev;
  assert_int_equal(cu->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxPushCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr in, out, c;
  CUstream stream;
  assert_int_equal(cu->cuMemAlloc(&in, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&out, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&c, cbytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(in, x0, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(c, cond, cbytes), CUDA_SUCCESS);
  graph_api g = graph_functions();
  assert_int_equal(g.stream_create(&stream, 0), CUDA_SUCCESS);

  /* No workspace yet: the capture is refused, and ends empty. */
  CUgraph graph;
  assert_int_equal(g.begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(flowrt_sample_cond(s, in, out, c, 0, 2.0f, batch, stream, &err), FLOWGEN_INVALID);
  assert_non_null(strstr(err.message, "flowrt_sampler_reserve"));
  assert_int_equal(g.end(stream, &graph), CUDA_SUCCESS);

  assert_int_equal(flowrt_sampler_reserve(s, batch, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sample_cond(s, in, out, c, 0, 2.0f, batch, stream, &err), FLOWGEN_OK);
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(direct, out, bytes), CUDA_SUCCESS);
  CUgraphExec exec;
  assert_int_equal(g.begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(flowrt_sample_cond(s, in, out, c, 0, 2.0f, batch, stream, &err), FLOWGEN_OK);
  assert_int_equal(g.end(stream, &graph), CUDA_SUCCESS);
  assert_int_equal(g.instantiate(&exec, graph, 0), CUDA_SUCCESS);
  for (int replays = 0; replays < 3; ++replays) assert_int_equal(g.launch(exec, stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(replay, out, bytes), CUDA_SUCCESS);
  assert_memory_equal(direct, replay, bytes);
  assert_int_equal(flowrt_reference_cond_f64(&spec, w, x0, ref, cond, NULL, 2.0f, batch, &err),
                   FLOWGEN_OK);
  double e = relerr(direct, ref, n);
  printf("# family graph relerr=%.3e\n", e);
  assert_true(e <= 1e-5);
  cu->cuMemFree(in);
  cu->cuMemFree(out);
  cu->cuMemFree(c);
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
  cu->cuDevicePrimaryCtxRelease(dev);
  flowrt_sampler_destroy(s);
  flowrt_weights_free(w);
  free(x0);
  free(cond);
  free(direct);
  free(replay);
  free(ref);
}

static void test_two_samplers_and_cache(void **state) {
  FG_SKIP_WITHOUT_GPU();
  gpu_fixture *f = *state;
  uint64_t seed = fg_test_seed();
  flowgen_spec a = make_spec(5, 40, 6), b = make_spec(12, 24, 3);
  flowrt_weights *wa = fg_test_random_weights(5, 40, seed), *wb = fg_test_random_weights(12, 24, seed + 1);
  flowrt_sampler *sa = NULL, *sb = NULL, *sa2 = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_sampler_create(f->rt, &a, wa, &sa, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_create(f->rt, &b, wb, &sb, &err), FLOWGEN_OK);
  assert_false(flowrt_sampler_stats(sa)->memory_hit);
  assert_int_equal(flowrt_sampler_create(f->rt, &a, wa, &sa2, &err), FLOWGEN_OK);
  assert_true(flowrt_sampler_stats(sa2)->memory_hit);
  printf("# in-memory hit: %.1f us\n", flowrt_sampler_stats(sa2)->module_ms * 1e3);
  assert_true(check_sampler(sa, &a, wa, 33, 33, seed) <= 1e-6);
  assert_true(check_sampler(sb, &b, wb, 33, 33, seed) <= 1e-6);
  assert_true(check_sampler(sa2, &a, wa, 33, 33, seed) <= 1e-6);
  flowrt_sampler_destroy(sa);
  flowrt_sampler_destroy(sb);
  flowrt_sampler_destroy(sa2);

  flowrt_runtime *fresh = NULL;
  flowrt_options opts = {.disk_cache = 1, .cache_dir = f->cache_dir, .tune = suite_tune()};
  assert_int_equal(flowrt_open(&opts, &fresh, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_create(fresh, &a, wa, &sa, &err), FLOWGEN_OK);
  assert_true(flowrt_sampler_stats(sa)->disk_hit);
  assert_true(flowrt_sampler_stats(sa)->compile_ms == 0.0);
  assert_true(check_sampler(sa, &a, wa, 9, 9, seed) <= 1e-6);
  flowrt_sampler_destroy(sa);
  flowrt_close(fresh);
  flowrt_weights_free(wa);
  flowrt_weights_free(wb);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows even if a run is cut short */
  /* FLOWGEN_TEST_FILTER=test_grid_* runs only the tests it matches. */
  const char *filter = getenv("FLOWGEN_TEST_FILTER");
  if (filter && *filter) cmocka_set_test_filter(filter);
  /* the longest first (each a shard's of four: FLOWGEN_TEST_SHARD) */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_16bit),
      cmocka_unit_test(test_gemm_tf32),
      cmocka_unit_test(test_gemm_16bit_mma_sync),
      cmocka_unit_test(test_family_matches_reference),
      cmocka_unit_test(test_random_shapes),
      cmocka_unit_test(test_gemm_family),
      cmocka_unit_test(test_grid_family),
      cmocka_unit_test(test_gemm_wgmma),
      cmocka_unit_test(test_gemm_over_mma),
      cmocka_unit_test(test_gemm_split),
      cmocka_unit_test(test_matches_reference),
      cmocka_unit_test(test_solvers_match_reference),
      cmocka_unit_test(test_precisions_match_reference),
      cmocka_unit_test(test_zero_batch_and_aliasing),
      cmocka_unit_test(test_graph_capture),
      cmocka_unit_test(test_grid_strategy),
      cmocka_unit_test(test_grid_resident),
      cmocka_unit_test(test_grid_16bit),
      cmocka_unit_test(test_gemm_strategy),
      cmocka_unit_test(test_wgmma_layout_probe),
      cmocka_unit_test(test_gemm_wgmma_probe),
      cmocka_unit_test(test_gemm_wgmma_probe_tf32),
      cmocka_unit_test(test_wgmma_strategy),
      cmocka_unit_test(test_wgstream_strategy),
      cmocka_unit_test(test_wgstream3_strategy),
      cmocka_unit_test(test_rmma_strategy),
      cmocka_unit_test(test_rmma_tf32),
      cmocka_unit_test(test_rmma3_strategy),
      cmocka_unit_test(test_low_precision_small_batches),
      cmocka_unit_test(test_cluster_layer2),
      cmocka_unit_test(test_cluster_fold),
      cmocka_unit_test(test_two_samplers_and_cache),
      cmocka_unit_test(test_family_graph_capture),
  };
  /* FLOWGEN_TEST_SHARD=I/N runs tests I, I + N, I + 2N, ... only: N
   * processes share the GPU and take the suite's time apart (a device
   * round runs them side by side). */
  struct CMUnitTest shard[sizeof tests / sizeof *tests];
  size_t count = 0;
  const char *spec = getenv("FLOWGEN_TEST_SHARD");
  unsigned index = 0, shards = 1;
  char end;
  if (spec && *spec && (sscanf(spec, "%u/%u%c", &index, &shards, &end) != 2 || shards == 0 ||
                        index >= shards)) {
    fprintf(stderr, "FLOWGEN_TEST_SHARD=%s: expected I/N with I < N\n", spec);
    return 2;
  }
  for (size_t i = index; i < sizeof tests / sizeof *tests; i += shards) shard[count++] = tests[i];
  return _cmocka_run_group_tests("gpu_sample", shard, count, setup, teardown);
}
