/*
 * embed: flowgen's generated kernel inside an ordinary nvcc build.
 *
 * `flowgen --host-launcher` writes build/flow.cu with extern "C" host
 * functions; nvcc compiles it to flow.o; this plain C program links with it
 * and the CUDA runtime.  It puts random weights in PyTorch layout on the
 * device, packs them, samples a batch and checks the result against an fp64
 * CPU reference of the model written out below.
 *
 *   embed [BATCH]          (default 1000: not a multiple of the kernel's tile)
 *
 * Exit codes follow the flowgen CLI: 0 the samples match (relative L2 error
 * <= 1e-6), 1 they do not, 2 usage, 5 no GPU or a CUDA call failed.
 */
#include "embed_flow.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* The shape flowgen was run with; the Makefile passes the same numbers to
 * both, so they cannot drift apart. */
#if !defined(FLOW_DIM) || !defined(FLOW_HIDDEN) || !defined(FLOW_STEPS)
#error "compile with -DFLOW_DIM=D -DFLOW_HIDDEN=H -DFLOW_STEPS=S (flowgen's flags)"
#endif
enum { D = FLOW_DIM, H = FLOW_HIDDEN, S = FLOW_STEPS };

#define TOLERANCE 1e-6   /* relative L2 error, fp32 kernel vs fp64 */
#define BATCH_MAX 10000000

/* ---- errors ------------------------------------------------------------------ */

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

static void cuda_check(cudaError_t e, const char *call, const char *file,
                       int line) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "embed: %s:%d: %s: %s (%s)\n", file, line, call,
          cudaGetErrorName(e), cudaGetErrorString(e));
  exit(5);
}

/* One clear line where there is no GPU, rather than a failed cudaMalloc. */
static void require_gpu(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    fprintf(stderr, "embed: needs a CUDA GPU: cudaGetDeviceCount: %s (%s)\n",
            cudaGetErrorName(e), cudaGetErrorString(e));
    exit(5);
  }
  if (count == 0) {
    fprintf(stderr, "embed: needs a CUDA GPU: no CUDA device\n");
    exit(5);
  }
}

/* ---- host data ------------------------------------------------------------- */

/* Uniform in [-scale, scale) from splitmix64. */
static void fill_uniform(float *out, size_t n, uint64_t *state, double scale) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
    out[i] = (float)((2.0 * u - 1.0) * scale);
  }
}

/* The six tensors, row-major as in PyTorch's state_dict. */
typedef struct weights {
  float w1[H * (D + 1)], b1[H];
  float w2[H * H], b2[H];
  float w3[D * H], b3[D];
} weights;

/* As nn.Linear initialises them: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
static void init_weights(weights *w, uint64_t seed) {
  uint64_t s = seed;
  double s1 = 1.0 / sqrt(D + 1.0), s2 = 1.0 / sqrt((double)H);
  fill_uniform(w->w1, sizeof w->w1 / sizeof(float), &s, s1);
  fill_uniform(w->b1, H, &s, s1);
  fill_uniform(w->w2, sizeof w->w2 / sizeof(float), &s, s2);
  fill_uniform(w->b2, H, &s, s2);
  fill_uniform(w->w3, sizeof w->w3 / sizeof(float), &s, s2);
  fill_uniform(w->b3, D, &s, s2);
}

/* ---- fp64 CPU reference ------------------------------------------------------ */

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* velocity = Linear(D+1, H) - SiLU - Linear(H, H) - SiLU - Linear(H, D) on
 * [x, t]; S Euler steps of dt = 1/S at t_k = (k + 0.5) / S. */
static void reference(const weights *w, const float *x0, double *x,
                      long long batch) {
  const double dt = 1.0 / S;
  for (long long r = 0; r < batch; ++r) {
    double *xr = x + r * D, h1[H], h2[H];
    for (int i = 0; i < D; ++i) xr[i] = x0[r * D + i];
    for (int k = 0; k < S; ++k) {
      const double t = (k + 0.5) / S;
      for (int j = 0; j < H; ++j) {
        const float *row = w->w1 + j * (D + 1);
        double acc = w->b1[j] + row[D] * t;
        for (int i = 0; i < D; ++i) acc += row[i] * xr[i];
        h1[j] = silu(acc);
      }
      for (int j = 0; j < H; ++j) {
        double acc = w->b2[j];
        for (int i = 0; i < H; ++i) acc += w->w2[j * H + i] * h1[i];
        h2[j] = silu(acc);
      }
      for (int j = 0; j < D; ++j) {
        double acc = w->b3[j];
        for (int i = 0; i < H; ++i) acc += w->w3[j * H + i] * h2[i];
        xr[j] += dt * acc; /* all of v is computed before x changes */
      }
    }
  }
}

static double relative_l2(const float *x, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  double e = sqrt(num / (den > 0 ? den : 1));
  return isnan(e) ? INFINITY : e;
}

/* ---- main -------------------------------------------------------------------- */

static long long parse_batch(int argc, char **argv) {
  if (argc < 2) return 1000;
  char *end = NULL;
  long long b = strtoll(argv[1], &end, 10);
  if (argc > 2 || *argv[1] < '0' || *argv[1] > '9' || *end || b < 1 ||
      b > BATCH_MAX) {
    fprintf(stderr, "embed: usage: embed [BATCH], BATCH 1 to %d\n", BATCH_MAX);
    exit(2);
  }
  return b;
}

int main(int argc, char **argv) {
  const long long batch = parse_batch(argc, argv);
  const size_t n = (size_t)batch * D;
  require_gpu();

  weights *w = malloc(sizeof *w);
  float *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
  double *ref = malloc(n * sizeof *ref);
  if (!w || !x0 || !x || !ref) {
    fprintf(stderr, "embed: out of memory\n");
    return 1;
  }
  init_weights(w, 42);
  uint64_t s = 7;
  fill_uniform(x0, n, &s, 1.0);

  /* The tensors go to the device as PyTorch would hold them; packing into
   * the kernel's layout happens on the device, once per set of weights. */
  float *d_w = NULL, *d_x0 = NULL, *d_x = NULL;
  void *d_params = NULL;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  CUDA_CHECK(cudaMalloc((void **)&d_w, sizeof *w));
  CUDA_CHECK(cudaMalloc(&d_params, embed_flow_params_bytes()));
  CUDA_CHECK(cudaMalloc((void **)&d_x0, n * sizeof *x0));
  CUDA_CHECK(cudaMalloc((void **)&d_x, n * sizeof *x));
  CUDA_CHECK(cudaMemcpy(d_w, w, sizeof *w, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_x0, x0, n * sizeof *x0, cudaMemcpyHostToDevice));

  const float *d_w1 = d_w + offsetof(weights, w1) / sizeof(float);
  const float *d_b1 = d_w + offsetof(weights, b1) / sizeof(float);
  const float *d_w2 = d_w + offsetof(weights, w2) / sizeof(float);
  const float *d_b2 = d_w + offsetof(weights, b2) / sizeof(float);
  const float *d_w3 = d_w + offsetof(weights, w3) / sizeof(float);
  const float *d_b3 = d_w + offsetof(weights, b3) / sizeof(float);
  CUDA_CHECK(embed_flow_pack_params(d_w1, d_b1, d_w2, d_b2, d_w3, d_b3,
                                    d_params, stream));
  CUDA_CHECK(embed_flow_launch(d_x0, d_x, batch, d_params, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemcpy(x, d_x, n * sizeof *x, cudaMemcpyDeviceToHost));

  reference(w, x0, ref, batch);
  double err = relative_l2(x, ref, n);
  printf("embed: D=%d H=%d S=%d batch %lld, params %zu bytes\n", D, H, S,
         batch, embed_flow_params_bytes());
  printf("x[0] =");
  for (int i = 0; i < D && i < 4; ++i) printf(" %.6f", x[i]);
  printf("%s  (fp64:", D > 4 ? " ..." : "");
  for (int i = 0; i < D && i < 4; ++i) printf(" %.6f", ref[i]);
  printf("%s)\n", D > 4 ? " ..." : "");
  printf("relerr = %.3e vs fp64 reference (tolerance %.0e): %s\n", err,
         TOLERANCE, err <= TOLERANCE ? "ok" : "FAILED");

  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_x0));
  CUDA_CHECK(cudaFree(d_params));
  CUDA_CHECK(cudaFree(d_w));
  CUDA_CHECK(cudaStreamDestroy(stream));
  free(ref);
  free(x);
  free(x0);
  free(w);
  return err <= TOLERANCE ? 0 : 1;
}
