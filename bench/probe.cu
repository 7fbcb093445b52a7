// probe.cu: the on-chip latencies a small-batch kernel is made of, the
// rate of mma.sync on one SM, and the SM clock while one small kernel runs
// after another (as build/bench launches them).  In-kernel clock64() and %globaltimer; one line a figure.
//
//   make probe && build/probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "probe: %s: %s\n", #call, cudaGetErrorString(e_));    \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

__device__ __forceinline__ unsigned long long globaltimer()
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block spins for `cycles` SM cycles; out: cycles, nanoseconds.
__global__ void spin(long long cycles, long long* out)
{
  const long long c0 = clock64();
  const unsigned long long t0 = globaltimer();
  while (clock64() - c0 < cycles) {
  }
  const long long c1 = clock64();
  const unsigned long long t1 = globaltimer();
  if (threadIdx.x == 0) {
    out[0] = c1 - c0;
    out[1] = static_cast<long long>(t1 - t0);
  }
}

constexpr int kReps = 256;

// Dependent mma.sync m16n8k16 bf16 (fp32 accumulators): cycles each.
__global__ void mma_chain(long long* out, unsigned seed)
{
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const unsigned a = seed * 0x3c003c00u, b = seed * 0x3c003c00u;
  const long long c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = (c1 - c0) / kReps;
  if (d[0] == 1234.5f) out[1] = 1;  // keep the chain
}

// Independent mma.sync m16n8k16 bf16, 8 chains a warp, blockDim.x / 32
// warps: the SM's cycles (clock64 of the block's span) per mma.
__global__ void mma_rate(long long* out, unsigned seed)
{
  float d[8][4] = {};
  const unsigned a = seed * 0x3c003c00u, b = seed * 0x3c003c00u;
  __syncthreads();
  const long long c0 = clock64();
#pragma unroll 4
  for (int i = 0; i < kReps; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                   "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                   : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                   : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
  __syncthreads();
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = c1 - c0;
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < 8; ++c) sum += d[c][0];
  if (sum == 1234.5f) out[1] = 1;  // keep the chains
}

// __syncthreads() back to back in a block of blockDim.x threads.
__global__ void barriers(long long* out)
{
  __syncthreads();
  const long long c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) __syncthreads();
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = (c1 - c0) / kReps;
}

// A value through movmatrix, tanh.approx.bf16x2, shared-memory loads
// (a chain of dependent loads) and shuffles: cycles each.
__global__ void chains(long long* out, unsigned seed)
{
  __shared__ unsigned next[64];
  next[threadIdx.x % 64] = (threadIdx.x + 1) % 64;
  __syncthreads();
  unsigned v = seed + threadIdx.x;
  long long c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %0;" : "+r"(v));
  long long c1 = clock64();
  out[0] = (c1 - c0) / kReps;
  c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) asm volatile("tanh.approx.bf16x2 %0, %0;" : "+r"(v));
  c1 = clock64();
  out[1] = (c1 - c0) / kReps;
  unsigned p = v % 64;
  c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) p = next[p];
  c1 = clock64();
  out[2] = (c1 - c0) / kReps;
  c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) v = __shfl_xor_sync(0xffffffffu, v, 1);
  c1 = clock64();
  out[3] = (c1 - c0) / kReps;
  if (v + p == 12345u) out[4] = 1;
}

int main()
{
  long long* out = nullptr;
  CHECK(cudaMallocManaged(&out, 16 * sizeof(long long)));
  // The clock: a 40-us spin, one launch and a synchronize after another
  // (build/bench's pattern), first from idle, then the median of 200.
  std::vector<double> mhz;
  for (int i = 0; i < 201; ++i) {
    spin<<<1, 32>>>(80000, out);
    CHECK(cudaDeviceSynchronize());
    mhz.push_back(1e3 * static_cast<double>(out[0]) / static_cast<double>(out[1]));
  }
  const double first = mhz[0];
  std::sort(mhz.begin() + 1, mhz.end());
  std::printf("clock during a 40 us one-block kernel: first %.0f MHz, median of 200 %.0f MHz "
              "[%.0f, %.0f]\n", first, mhz[100], mhz[1], mhz[200]);
  mma_chain<<<1, 32>>>(out, 1);
  CHECK(cudaDeviceSynchronize());
  mma_chain<<<1, 32>>>(out, 1);
  CHECK(cudaDeviceSynchronize());
  std::printf("mma.sync m16n8k16 bf16, dependent: %lld cycles\n", out[0]);
  for (int warps : {1, 4, 8, 16}) {
    mma_rate<<<1, 32 * warps>>>(out, 1);
    CHECK(cudaDeviceSynchronize());
    mma_rate<<<1, 32 * warps>>>(out, 1);
    CHECK(cudaDeviceSynchronize());
    const double per_sm = static_cast<double>(out[0]) / (kReps * 8.0 * warps);
    std::printf("mma.sync m16n8k16 bf16, 8 chains a warp, %d warps: %.2f SM cycles an mma "
                "(%.0f FLOP a cycle)\n", warps, per_sm, 4096.0 / per_sm);
  }
  for (int threads : {128, 256, 512, 1024}) {
    barriers<<<1, threads>>>(out);
    CHECK(cudaDeviceSynchronize());
    std::printf("__syncthreads, %d threads: %lld cycles\n", threads, out[0]);
  }
  chains<<<1, 32>>>(out, 1);
  CHECK(cudaDeviceSynchronize());
  chains<<<1, 32>>>(out, 1);
  CHECK(cudaDeviceSynchronize());
  std::printf("movmatrix %lld, tanh.approx.bf16x2 %lld, shared load %lld, shuffle %lld cycles "
              "(dependent)\n", out[0], out[1], out[2], out[3]);
  CHECK(cudaFree(out));
  return 0;
}
