// launcher_bench.cu: times a kernel file written by `flowgen
// --host-launcher` (or a hand-edited copy of one: a variant of a kernel
// timed without changing the templates), launch by launch, as build/bench
// times the library: random weights and inputs (three input sets in
// turn), the output poisoned before each run, each run behind a 30 us
// hold kernel on its own stream so that the host's enqueue stays out of
// it, CUDA events around the launch; the median, min and max of the runs
// after a warm-up.  It prints a checksum of the last output and how many
// of its elements are not finite (an unwritten element stays a NaN), so
// that two copies can be checked to compute the same.  Built with
// -DFLOWGEN_STAMPS on a file that bench/stamps.py instrumented, it also
// prints the cluster kernel's clock64 stamps (cycles a step by stage).
//
// The kernels run as nvcc built them, or with --nvrtc as the runtime
// builds them: the same file, embedded at build time, compiled by
// flowrt_compile (NVRTC, the runtime's options) and loaded as a library;
// the file's host launcher then launches those kernels in place of nvcc's
// (its cudaLaunchKernelEx and cudaFuncSetAttribute calls are routed
// below).  The two compilers' code can differ: at D=64, H=256, B=8 the
// cluster kernel measured 24.8 us from nvcc, 24.4 to 24.6 from NVRTC (as
// build/bench, which runs NVRTC's).
//
//   build/flowgen --dim 64 --hidden 256 --steps 32 --host-launcher -o k.cu
//   make launcher-bench LAUNCHER=k.cu      (build/launcher-bench)
//   build/launcher-bench [--nvrtc] [--graph] [batch...]   (default: 8)
//
// --graph times each launch as the replay of a CUDA graph that holds it
// alone (captured once per input set from the launcher, as a program that
// captures flowrt_sample would): the events then time the graph's launch
// of the kernel, not the stream's.
//
// Exit status: 0; 1 when a CUDA call or the NVRTC compile fails (named on
// stderr); 2 for a batch that is not an integer from 1 to 1048576 or an
// unknown option.
#include <cuda_runtime.h>

#include <utility>

namespace {

// The library NVRTC's build of the file was loaded as (--nvrtc); null:
// nvcc's kernels run.
cudaLibrary_t g_library = nullptr;

// The kernel of g_library named as nvcc's kernel `symbol` is (both are
// extern "C"), or null.
const void* nvrtc_kernel(const void* symbol)
{
  const char* name;
  cudaKernel_t kernel;
  if (cudaFuncGetName(&name, symbol) != cudaSuccess ||
      cudaLibraryGetKernel(&kernel, g_library, name) != cudaSuccess)
    return nullptr;
  return reinterpret_cast<const void*>(kernel);
}

template <typename... Expected, typename... Actual>
cudaError_t route_launch(const cudaLaunchConfig_t* config, void (*kernel)(Expected...), Actual&&... args)
{
  if (g_library) {
    kernel = reinterpret_cast<void (*)(Expected...)>(const_cast<void*>(nvrtc_kernel(reinterpret_cast<const void*>(kernel))));
    if (!kernel) return cudaErrorSymbolNotFound;
  }
  return cudaLaunchKernelEx(config, kernel, std::forward<Actual>(args)...);
}

template <class T>
cudaError_t route_set_attribute(T* kernel, cudaFuncAttribute attribute, int value)
{
  const void* k = g_library ? nvrtc_kernel(reinterpret_cast<const void*>(kernel)) : reinterpret_cast<const void*>(kernel);
  if (!k) return cudaErrorSymbolNotFound;
  return cudaFuncSetAttribute(k, attribute, value);
}

}  // namespace

#define cudaLaunchKernelEx route_launch
#define cudaFuncSetAttribute route_set_attribute
#include FLOWGEN_FILE
#undef cudaLaunchKernelEx
#undef cudaFuncSetAttribute

#include "flowrt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(suffix) CAT(FLOWGEN_NAME, suffix)

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "launcher-bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

namespace {

constexpr int kDim = flowgen::FLOWGEN_NAME::kDim, kHidden = flowgen::FLOWGEN_NAME::kHidden;

// The file's text, for NVRTC (a raw string literal the Makefile wrote).
constexpr char kSource[] =
#include FLOWGEN_SOURCE
    ;
constexpr int kWarmup = 20, kRuns = 1000, kSets = 3;

// One warp spins for `cycles` SM cycles (the launch under test queues
// behind it).
__global__ void hold(long long cycles)
{
  const long long c0 = clock64();
  while (clock64() - c0 < cycles) {
  }
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<long long> batches;
  bool nvrtc = false, graph = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nvrtc") == 0) {
      nvrtc = true;
      continue;
    }
    if (std::strcmp(argv[i], "--graph") == 0) {
      graph = true;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1] == '-') {
      std::fprintf(stderr, "launcher-bench: unknown option '%s' (usage: launcher-bench [--nvrtc] [--graph] [batch...])\n", argv[i]);
      return 2;
    }
    char* end;
    const long long b = std::strtoll(argv[i], &end, 10);
    if (*end != '\0' || b < 1 || b > (1 << 20)) {
      std::fprintf(stderr, "launcher-bench: batch '%s' is not an integer from 1 to 1048576\n", argv[i]);
      return 2;
    }
    batches.push_back(b);
  }
  if (batches.empty()) batches.push_back(8);
  const long long most = *std::max_element(batches.begin(), batches.end());

  if (nvrtc) {
    int device, major, minor;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    void* image = nullptr;
    size_t size = 0;
    flowgen_error err;
    if (flowrt_compile(kSource, sizeof kSource - 1, FLOWGEN_FILE, 10 * major + minor, FLOWRT_TARGET_CUBIN, false,
                       &image, &size, nullptr, &err) != FLOWGEN_OK) {
      std::fprintf(stderr, "launcher-bench: NVRTC: %s\n", err.message);
      return 1;
    }
    const cudaError_t loaded = cudaLibraryLoadData(&g_library, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
    std::free(image);
    CHECK(loaded);
  }

  // PyTorch's layout: W1 [H][D + 1], W2 [H][H], W3 [D][H], normal(0, 1 /
  // sqrt(fan-in)); biases normal(0, 0.1); inputs normal(0, 1).
  std::mt19937 generator(20261203);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, float scale) {
    for (float& e : v) e = scale * normal(generator);
  };
  std::vector<float> host[6] = {std::vector<float>(kHidden * (kDim + 1)), std::vector<float>(kHidden),
                                std::vector<float>(kHidden * kHidden),    std::vector<float>(kHidden),
                                std::vector<float>(kDim * kHidden),       std::vector<float>(kDim)};
  fill(host[0], 1.0f / std::sqrt(kDim + 1.0f));
  fill(host[1], 0.1f);
  fill(host[2], 1.0f / std::sqrt(static_cast<float>(kHidden)));
  fill(host[3], 0.1f);
  fill(host[4], 1.0f / std::sqrt(static_cast<float>(kHidden)));
  fill(host[5], 0.1f);
  float* tensors[6];
  for (int i = 0; i < 6; ++i) {
    CHECK(cudaMalloc(&tensors[i], host[i].size() * sizeof(float)));
    CHECK(cudaMemcpy(tensors[i], host[i].data(), host[i].size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  void* params;
  CHECK(cudaMalloc(&params, FN(_params_bytes)()));
  CHECK(FN(_pack_params)(tensors[0], tensors[1], tensors[2], tensors[3], tensors[4], tensors[5], params, 0));
  std::vector<float> x0_host(static_cast<size_t>(kSets * most * kDim));
  fill(x0_host, 1.0f);
  float *x0, *x;
  CHECK(cudaMalloc(&x0, x0_host.size() * sizeof(float)));
  CHECK(cudaMalloc(&x, static_cast<size_t>(most * kDim) * sizeof(float)));
  CHECK(cudaMemcpy(x0, x0_host.data(), x0_host.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  for (const long long batch : batches) {
    const size_t bytes = static_cast<size_t>(batch * kDim) * sizeof(float);
    // --graph: one graph a set, each the launch alone (the launcher run
    // once first, so that its attributes are set outside the capture).
    cudaGraphExec_t execs[kSets] = {};
    if (graph) {
      CHECK(FN(_launch)(x0, x, batch, params, stream));
      CHECK(cudaStreamSynchronize(stream));
      for (int k = 0; k < kSets; ++k) {
        cudaGraph_t g;
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        const cudaError_t launched = FN(_launch)(x0 + k * batch * kDim, x, batch, params, stream);
        CHECK(cudaStreamEndCapture(stream, &g));
        CHECK(launched);
        CHECK(cudaGraphInstantiate(&execs[k], g, 0));
        CHECK(cudaGraphUpload(execs[k], stream));
        CHECK(cudaGraphDestroy(g));
      }
    }
    std::vector<float> us;
    for (int i = 0; i < kWarmup + kRuns; ++i) {
      CHECK(cudaMemsetAsync(x, 0xff, bytes, stream));  // NaN
      hold<<<1, 32, 0, stream>>>(30000);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(start, stream));
      if (graph)
        CHECK(cudaGraphLaunch(execs[i % kSets], stream));
      else
        CHECK(FN(_launch)(x0 + (i % kSets) * batch * kDim, x, batch, params, stream));
      CHECK(cudaEventRecord(stop, stream));
      CHECK(cudaEventSynchronize(stop));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (i >= kWarmup) us.push_back(1000.0f * ms);
    }
    for (cudaGraphExec_t e : execs)
      if (e) CHECK(cudaGraphExecDestroy(e));
    std::sort(us.begin(), us.end());
    std::vector<float> out(static_cast<size_t>(batch * kDim));
    CHECK(cudaMemcpy(out.data(), x, bytes, cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    long long bad = 0;
    for (const float v : out) {
      if (std::isfinite(v)) checksum += v;
      else ++bad;
    }
    std::printf("%s (%s%s) B=%lld: median %.2f us [%.2f, %.2f] over %d runs; checksum %.6f, %lld not finite\n",
                FLOWGEN_FILE, nvrtc ? "NVRTC" : "nvcc", graph ? ", graph" : "", batch, us[us.size() / 2], us.front(), us.back(), kRuns, checksum, bad);
#ifdef FLOWGEN_STAMPS
    // Rank r, warp w, stage s of the first cluster's last run: cycles a
    // step from the stamp before, summed over steps 1 to S - 1.
    long long stamps[kStampRanks][kStampWarps][kStampStages];
    if (g_library) {
      void* at;
      size_t bytes;
      CHECK(cudaLibraryGetGlobal(&at, &bytes, g_library, "g_stamps"));
      CHECK(cudaMemcpy(stamps, at, sizeof stamps, cudaMemcpyDeviceToHost));
    } else {
      CHECK(cudaMemcpyFromSymbol(stamps, g_stamps, sizeof stamps));
    }
    for (int r = 0; r < kStampRanks; ++r) {
      std::printf("  rank %d, cycles a step by stage (warp 0, ..., warp %d):\n", r, kStampWarps - 1);
      for (int s = 0; s < kStampStages; ++s) {
        std::printf("    %-28s", kStampNames[s]);
        for (int w = 0; w < kStampWarps; ++w)
          std::printf(" %5lld", stamps[r][w][s] / (flowgen::FLOWGEN_NAME::kSteps - 1));
        std::printf("\n");
      }
    }
#endif
  }
  if (g_library) CHECK(cudaLibraryUnload(g_library));
  return 0;
}
