// probe.cu: the on-chip latencies a small-batch kernel is made of, the
// rate of mma.sync (bf16 m16n8k16, tf32 m16n8k8) on one SM, the rate of
// tf32 wgmma by shape (m64nNk8, N = 8 to 256) and operand source, the
// SM clock while one small kernel runs after another (as build/bench
// launches them), rounds of the cluster kernel's exchange alone
// (st.async and an mbarrier between the blocks of a cluster), and the
// time its blocks take to load their weights.  In-kernel
// clock64() and %globaltimer; one line a figure.  Built for sm_90a
// (wgmma): H100/H200.
//
//   make probe && build/probe            (everything)
//   build/probe exchange                 (the exchange's rounds only)
//   build/probe ingress                  (the weights' loads only)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
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

// d += a b: mma.sync m16n8k16 bf16 or (TF32) m16n8k8 tf32, fp32 d.
template <bool TF32>
__device__ __forceinline__ void mma(float (&d)[4], unsigned a, unsigned b)
{
  if (TF32)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
}

// Dependent mma.sync (fp32 accumulators): cycles each.
template <bool TF32>
__global__ void mma_chain(long long* out, unsigned seed)
{
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const unsigned a = seed * 0x3c003c00u, b = seed * 0x3c003c00u;
  const long long c0 = clock64();
#pragma unroll 16
  for (int i = 0; i < kReps; ++i) mma<TF32>(d, a, b);
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = (c1 - c0) / kReps;
  if (d[0] == 1234.5f) out[1] = 1;  // keep the chain
}

// Independent mma.sync, 8 chains a warp, blockDim.x / 32 warps: the SM's
// cycles (clock64 of the block's span) per mma.
template <bool TF32>
__global__ void mma_rate(long long* out, unsigned seed)
{
  float d[8][4] = {};
  const unsigned a = seed * 0x3c003c00u, b = seed * 0x3c003c00u;
  __syncthreads();
  const long long c0 = clock64();
#pragma unroll 4
  for (int i = 0; i < kReps; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) mma<TF32>(d[c], a, b);
  __syncthreads();
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = c1 - c0;
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < 8; ++c) sum += d[c][0];
  if (sum == 1234.5f) out[1] = 1;  // keep the chains
}

// tf32 wgmma m64nNk8 back to back into one accumulator set, A from
// registers (RS) or shared memory (SS), B from shared memory: the rate
// the streamed kernels' products can reach on one SM.  The operands'
// values do not matter (zeros).
// d += a b, m64n8k8 tf32, A in registers, B from shared memory.
__device__ __forceinline__ void wgmma_rs(float (&d)[4], const unsigned (&a)[4], unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d += a b, m64n8k8 tf32, A and B from shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[4], unsigned long long a, unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(a), "l"(b));
}

// d += a b, m64n16k8 tf32, A in registers, B from shared memory.
__device__ __forceinline__ void wgmma_rs(float (&d)[8], const unsigned (&a)[4], unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d += a b, m64n16k8 tf32, A and B from shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[8], unsigned long long a, unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b));
}

// d += a b, m64n64k8 tf32, A in registers, B from shared memory.
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d += a b, m64n64k8 tf32, A and B from shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[32], unsigned long long a, unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b));
}

// d += a b, m64n128k8 tf32, A in registers, B from shared memory.
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const unsigned (&a)[4], unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d += a b, m64n128k8 tf32, A and B from shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[64], unsigned long long a, unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(a), "l"(b));
}

// d += a b, m64n256k8 tf32, A in registers, B from shared memory.
__device__ __forceinline__ void wgmma_rs(float (&d)[128], const unsigned (&a)[4], unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d += a b, m64n256k8 tf32, A and B from shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[128], unsigned long long a, unsigned long long b)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(a), "l"(b));
}

// A no-swizzle descriptor (the kernels' layout: 128-byte leading offset,
// 512-byte stride) at shared address `base`.
__device__ __forceinline__ unsigned long long wg_desc(unsigned base)
{
  return static_cast<unsigned long long>(512 >> 4) << 32 | ((base & 0x3ffff) >> 4 | (128 >> 4) << 16);
}

// blockDim.x / 128 warpgroups, each kReps x 8 wgmma m64nNk8 (RS or SS),
// a commit group every 8; out[0]: the block's cycles.
template <int N, bool RS>
__global__ void __launch_bounds__(256, 1) wgmma_rate(long long* out)
{
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int i = threadIdx.x; i < 32768 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(smem)[i] = 0u;
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned long long b = wg_desc(base), a_desc = wg_desc(base + 16384);
  __syncthreads();
  const unsigned* words = reinterpret_cast<const unsigned*>(smem) + threadIdx.x;
  const unsigned a[4] = {words[0], words[1], words[2], words[3]};  // zeros, unknown to the compiler
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = __uint_as_float(words[4 + i % 8]);
  const long long c0 = clock64();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < kReps; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (RS) wgmma_rs(d, a, b); else wgmma_ss(d, a_desc, b);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  __syncthreads();
  const long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = c1 - c0;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  if (sum == 1234.5f) out[1] = 1;  // keep the products
}

// Runs wgmma_rate<N, RS> with 1 and 2 warpgroups and prints its rate.
template <int N, bool RS>
static int print_wgmma_rate(long long* out)
{
  CHECK(cudaFuncSetAttribute(wgmma_rate<N, RS>, cudaFuncAttributeMaxDynamicSharedMemorySize, 32768));
  for (int groups : {1, 2}) {
    for (int run = 0; run < 2; ++run) {  // the first warms up
      wgmma_rate<N, RS><<<1, 128 * groups, 32768>>>(out);
      CHECK(cudaDeviceSynchronize());
    }
    const double n = static_cast<double>(kReps) * 8 * groups;
    const double per = static_cast<double>(out[0]) / n;
    std::printf("wgmma m64n%dk8 tf32 %s, %d warpgroup%s: %.1f SM cycles a wgmma (%.0f MAC a cycle)\n", N,
                RS ? "A in registers" : "A in shared memory", groups, groups > 1 ? "s" : "", per,
                64.0 * N * 8 / per);
  }
  return 0;
}

// mma_chain and mma_rate (1, 4, 8, 16 warps), each run twice (the first
// warms up), printed.
template <bool TF32>
static int print_mma_rate(long long* out)
{
  const char* what = TF32 ? "m16n8k8 tf32" : "m16n8k16 bf16";
  for (int run = 0; run < 2; ++run) {
    mma_chain<TF32><<<1, 32>>>(out, 1);
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("mma.sync %s, dependent: %lld cycles\n", what, out[0]);
  for (int warps : {1, 4, 8, 16}) {
    for (int run = 0; run < 2; ++run) {
      mma_rate<TF32><<<1, 32 * warps>>>(out, 1);
      CHECK(cudaDeviceSynchronize());
    }
    const double per_sm = static_cast<double>(out[0]) / (kReps * 8.0 * warps);
    std::printf("mma.sync %s, 8 chains a warp, %d warps: %.2f SM cycles an mma (%.0f FLOP a cycle)\n",
                what, warps, per_sm, (TF32 ? 2048.0 : 4096.0) / per_sm);
  }
  return 0;
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

// ---- the exchange between the blocks of a cluster, alone --------------
// The small-batch kernel's step ends with an exchange through distributed
// shared memory: st.async into the other blocks, completing on their
// mbarrier, a wait, a read of what came and a block barrier.  Rounds of
// that alone, 256 threads a block, cycles a round on rank 0:
//   kind 0  one float from thread 0 of rank 0 to rank 1 and back (the
//           round trip of one st.async, no block barrier);
//   kind 1  every thread sends one float, to rank tid % C: a block
//           receives 256 floats a round, 256 / C from each block (the
//           unfolded kernel's 64-wide partials at C = 4);
//   kind 2  every thread sends one float to every other block: C - 1
//           floats a thread, 256 (C - 1) a block received (the fold's
//           H-wide partials at H = 256, its own kept).
// Each with the wait as mbarrier.try_wait in a loop (the kernels' form,
// which may suspend the thread until the phase completes), as
// mbarrier.test_wait in a spin loop, and without an mbarrier: each float
// sent with the round's index in one 64-bit st.relaxed.cluster (the value
// low, the index high), the reader polling its slots with
// ld.relaxed.cluster until each holds its round's index (the form the
// cluster kernel's exchange was measured in and not kept: bench/RESULTS.md),
// and pulled: each float stored with the round's index into the sender's
// own shared memory (a local 64-bit st.relaxed.cluster), each reader
// polling the sender's slot through distributed shared memory
// (ld.relaxed.cluster.shared::cluster) until it holds the round's index.
constexpr int kExchangeThreads = 256;
constexpr int kRounds = 256;

__device__ __forceinline__ unsigned smem_address(const void* p)
{
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned map_rank(unsigned address, unsigned rank)
{
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}

__device__ __forceinline__ void st_async(unsigned remote, float v, unsigned remote_barrier)
{
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
               :: "r"(remote), "f"(v), "r"(remote_barrier) : "memory");
}

__device__ __forceinline__ void expect_bytes(unsigned barrier, unsigned bytes)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(barrier), "r"(bytes) : "memory");
}

// How a round waits for what it receives.
enum Wait { kTryWait, kTestWait, kTagged, kPulled };
static const char* const kWaitName[] = {"try_wait", "test_wait", "tagged", "pulled"};

__device__ __forceinline__ void st_tagged(unsigned remote, float v, unsigned tag)
{
  const unsigned long long word = static_cast<unsigned long long>(tag) << 32 | __float_as_uint(v);
  asm volatile("st.relaxed.cluster.shared::cluster.b64 [%0], %1;" :: "r"(remote), "l"(word) : "memory");
}

// The value in the tagged slot at `address` once it holds round `tag`'s:
// a slot of this block's shared memory (a shared::cta address), or, with
// kRemote, of any block's of the cluster (a shared::cluster address).
template <bool kRemote>
__device__ __forceinline__ float poll_tagged(unsigned address, unsigned tag)
{
  unsigned long long word;
  do {
    if (kRemote)
      asm volatile("ld.relaxed.cluster.shared::cluster.b64 %0, [%1];" : "=l"(word) : "r"(address) : "memory");
    else
      asm volatile("ld.relaxed.cluster.shared::cta.b64 %0, [%1];" : "=l"(word) : "r"(address) : "memory");
  } while (static_cast<unsigned>(word >> 32) != tag);
  return __uint_as_float(static_cast<unsigned>(word));
}

// spin: mbarrier.test_wait (no suspension) in the loop, else try_wait.
__device__ __forceinline__ void wait_parity(unsigned barrier, unsigned parity, bool spin)
{
  unsigned done;
  do {
    if (spin)
      asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(barrier), "r"(parity) : "memory");
    else
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(barrier), "r"(parity) : "memory");
  } while (!done);
}

__device__ __forceinline__ void sync_cluster()
{
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__global__ void __launch_bounds__(kExchangeThreads, 1) exchange(long long* out, int kind, int wait)
{
  __shared__ float slots[2][8 * kExchangeThreads];
  __shared__ unsigned long long tagged[2][8 * kExchangeThreads];
  const bool spin = wait == kTestWait;
  __shared__ __align__(8) unsigned long long barriers[2];
  unsigned rank, blocks;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  const int tid = threadIdx.x;
  const unsigned bytes = kind == 0 ? 4u : kind == 1 ? 4u * kExchangeThreads : 4u * (blocks - 1) * kExchangeThreads;
  if (tid == 0) {
    for (int b = 0; b < 2; ++b)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_address(&barriers[b])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (wait < kTagged && (kind != 0 || rank < 2)) expect_bytes(smem_address(&barriers[0]), bytes);
  }
  for (int i = tid; i < 2 * 8 * kExchangeThreads; i += kExchangeThreads) (&tagged[0][0])[i] = ~0ull;
  sync_cluster();
  float v = static_cast<float>(tid);
  long long c0 = clock64();
  for (int k = 0; k < kRounds; ++k) {
    const int b = k & 1;
    const unsigned barrier = smem_address(&barriers[b]);
    const unsigned slot = smem_address(&slots[b][0]);
    if (wait == kPulled) {
      // Each block's own slots: kind 0 slot 0; kind 1 slot tid (read by
      // block tid % C); kind 2 slot tid (read by every other block).
      const unsigned tags = smem_address(&tagged[b][0]);
      if (kind == 0) {
        if (tid == 0 && rank < 2) {
          if (rank == 0) st_tagged(tags, v, k);
          v = poll_tagged<true>(map_rank(tags, rank ^ 1), k) + 1.0f;
          if (rank == 1) st_tagged(tags, v, k);
        }
        continue;
      }
      st_tagged(tags + 8u * tid, v, k);
      if (kind == 1) {
        // The float thread rank + C (tid / C) of block tid % C stored for this block.
        const unsigned q = tid % blocks;
        v = poll_tagged<true>(map_rank(tags + 8u * (rank + blocks * (tid / blocks)), q), k) + 1.0f;
      } else {
        float sum = 1.0f;
        for (unsigned i = 1; i < blocks; ++i) sum += poll_tagged<true>(map_rank(tags + 8u * tid, (rank + i) % blocks), k);
        v = sum;
      }
      __syncthreads();
      continue;
    }
    if (wait == kTagged) {
      const unsigned tags = smem_address(&tagged[b][0]);
      if (kind == 0) {
        if (tid == 0 && rank < 2) {
          if (rank == 0) st_tagged(map_rank(tags, 1), v, k);
          v = poll_tagged<false>(tags, k) + 1.0f;
          if (rank == 1) st_tagged(map_rank(tags, 0), v, k);
        }
        continue;
      }
      if (kind == 1) {
        const unsigned q = tid % blocks;
        st_tagged(map_rank(tags + 8u * (rank * (kExchangeThreads / blocks) + tid / blocks), q), v, k);
        v = poll_tagged<false>(tags + 8u * tid, k) + 1.0f;
      } else {
        for (unsigned i = 1; i < blocks; ++i) {
          const unsigned q = (rank + i) % blocks;
          st_tagged(map_rank(tags + 8u * (i * kExchangeThreads + tid), q), v, k);
        }
        float sum = 1.0f;
        for (unsigned i = 1; i < blocks; ++i) sum += poll_tagged<false>(tags + 8u * (i * kExchangeThreads + tid), k);
        v = sum;
      }
      __syncthreads();
      continue;
    }
    if (kind == 0) {
      if (tid == 0 && rank < 2) {
        if (rank == 0) st_async(map_rank(slot, 1), v, map_rank(barrier, 1));
        wait_parity(barrier, (k >> 1) & 1, spin);
        expect_bytes(smem_address(&barriers[b ^ 1]), bytes);
        v = slots[b][0] + 1.0f;
        if (rank == 1) st_async(map_rank(slot, 0), v, map_rank(barrier, 0));
      }
      continue;
    }
    if (kind == 1) {
      const unsigned q = tid % blocks;
      st_async(map_rank(slot + 4u * (rank * (kExchangeThreads / blocks) + tid / blocks), q), v, map_rank(barrier, q));
    } else {
      for (unsigned i = 1; i < blocks; ++i) {
        const unsigned q = (rank + i) % blocks;
        st_async(map_rank(slot + 4u * (i * kExchangeThreads + tid), q), v, map_rank(barrier, q));
      }
    }
    wait_parity(barrier, (k >> 1) & 1, spin);
    if (tid == kExchangeThreads - 1) expect_bytes(smem_address(&barriers[b ^ 1]), bytes);
    v = slots[b][(kind == 2 ? kExchangeThreads : 0) + tid] + 1.0f;
    __syncthreads();
  }
  long long c1 = clock64();
  if (rank == 0 && tid == 0) out[0] = (c1 - c0) / kRounds;
  if (v == 1234.5f) out[1] = 1;
  sync_cluster();
}

// Cycles a round of `exchange` over clusters of `blocks`, `clusters` of them.
static int print_exchange(long long* out, int kind, int blocks, int clusters, int wait)
{
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks * clusters);
  config.blockDim = dim3(kExchangeThreads);
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = blocks;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  std::vector<long long> cycles;
  for (int i = 0; i < 21; ++i) {
    CHECK(cudaLaunchKernelEx(&config, exchange, out, kind, wait));
    CHECK(cudaDeviceSynchronize());
    cycles.push_back(out[0]);
  }
  std::sort(cycles.begin(), cycles.end());
  static const char* const what[] = {"one float's round trip between two blocks",
                                     "every thread one float to one block (256 floats a block)",
                                     "every thread one float to every other block"};
  std::printf("exchange, clusters of %d (%d clusters), %s, %s: %lld cycles a round (median of 21; min %lld)\n",
              blocks, clusters, what[kind], kWaitName[wait], cycles[10], cycles[0]);
  return 0;
}

// ---- the weights' way into a block (the cluster kernel's prologue) ----
// Before its first step each block of the cluster kernel loads its
// threads' weights from their thread-major copy: at D=64, H=256, 36
// float4s a thread, 147,456 bytes a block of 256 threads.  Cycles from a
// block's start until every thread holds its own (summed, so that no load
// is dead), 8 clusters of 4 blocks, each rank its own copy (as the
// kernel; then, float4 loads only, 1 cluster, and 8 clusters each with
// its own copy: whether SMs reading the same lines slow each other), by:
//   kind 0  float4 loads (ld.global.nc), all issued before the first use,
//           each thread its own (the kernel's form);
//   kind 1  bulk copies (cp.async.bulk, global to shared, 9 of 16 KB by
//           thread 0, completing on an mbarrier), then each thread's
//           float4s out of shared memory.
// Warm: the copy already in L2 (launched again); cold: after 256 MB of
// other writes.
constexpr int kIngressThreads = 256, kIngressFloat4s = 36, kIngressChunks = 9;
constexpr unsigned kIngressBytes = 16u * kIngressFloat4s * kIngressThreads;

__global__ void __launch_bounds__(kIngressThreads, 1) ingress(const float4* __restrict__ w, long long* out, int kind,
                                                              bool copies)
{
  extern __shared__ float4 stage[];  // kind 1
  __shared__ __align__(8) unsigned long long bar;
  unsigned rank, cluster;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cluster));
  const int tid = threadIdx.x;
  const unsigned copy = copies ? 4 * cluster + rank : rank;
  const float4* block_w = w + static_cast<size_t>(copy) * kIngressFloat4s * kIngressThreads;
  const long long c0 = clock64();
  float4 v[kIngressFloat4s];
  if (kind == 0) {
#pragma unroll
    for (int n = 0; n < kIngressFloat4s; ++n) v[n] = block_w[n * kIngressThreads + tid];
  } else {
    const unsigned b = smem_address(&bar);
    if (tid == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      expect_bytes(b, kIngressBytes);
      for (int c = 0; c < kIngressChunks; ++c) {
        const unsigned offset = c * (kIngressBytes / kIngressChunks);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(smem_address(stage) + offset), "l"(reinterpret_cast<const char*>(block_w) + offset),
                        "r"(kIngressBytes / kIngressChunks), "r"(b) : "memory");
      }
    }
    __syncthreads();  // the mbarrier initialized
    wait_parity(b, 0, false);
#pragma unroll
    for (int n = 0; n < kIngressFloat4s; ++n) v[n] = stage[n * kIngressThreads + tid];
  }
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < kIngressFloat4s; ++n) sum += (v[n].x + v[n].y) + (v[n].z + v[n].w);
  __syncthreads();
  const long long c1 = clock64();
  if (tid == 0) out[blockIdx.x] = c1 - c0;
  if (sum == 1234.5f) out[64] = 1;
}

// The slowest block's cycles for `ingress` of `kind`, warm and cold,
// median of 11 launches each, over `clusters` clusters of 4 (at most 8);
// `copies`: each cluster reads its own copy of the weights (w holds 8),
// so that no two SMs read the same line.
static int print_ingress(long long* out, const float4* w, char* flush, size_t flush_bytes, int kind, int clusters,
                         bool copies)
{
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(4 * clusters);
  config.blockDim = dim3(kIngressThreads);
  config.dynamicSmemBytes = kind == 1 ? kIngressBytes : 0;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = 4;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  CHECK(cudaFuncSetAttribute(ingress, cudaFuncAttributeMaxDynamicSharedMemorySize, kIngressBytes));
  for (bool cold : {false, true}) {
    std::vector<long long> slowest;
    for (int i = 0; i < 11; ++i) {
      if (cold) CHECK(cudaMemset(flush, i, flush_bytes));
      else CHECK(cudaLaunchKernelEx(&config, ingress, w, out, kind, copies));  // warms L2
      CHECK(cudaLaunchKernelEx(&config, ingress, w, out, kind, copies));
      CHECK(cudaDeviceSynchronize());
      slowest.push_back(*std::max_element(out, out + 4 * clusters));
    }
    std::sort(slowest.begin(), slowest.end());
    std::printf("weights into a block (%u bytes, 256 threads, %d cluster%s of 4%s), %s, %s: %lld cycles "
                "(the slowest block; median of 11), %.1f bytes a cycle\n",
                kIngressBytes, clusters, clusters == 1 ? "" : "s", copies ? ", a copy a cluster" : "",
                kind == 0 ? "float4 loads" : "bulk copies to shared, then shared loads",
                cold ? "cold" : "warm", slowest[5], static_cast<double>(kIngressBytes) / slowest[5]);
  }
  return 0;
}

int main(int argc, char** argv)
{
  long long* out = nullptr;
  CHECK(cudaMallocManaged(&out, 128 * sizeof(long long)));  // ingress: one a block (32) and 64
  // `build/probe exchange`: the exchange's rounds only.
  const bool exchange_only = argc > 1 && std::string(argv[1]) == "exchange";
  // `build/probe ingress`: the weights' loads only.
  const bool ingress_only = argc > 1 && std::string(argv[1]) == "ingress";
  if (!ingress_only)
    for (int wait : {kTryWait, kTestWait, kTagged, kPulled})
      for (int kind = 0; kind < 3; ++kind)
        for (int blocks : {2, 4, 8})
          if ((kind != 0 || blocks == 2) && print_exchange(out, kind, blocks, 8, wait)) return 1;
  if (exchange_only) return 0;
  {
    float4* w = nullptr;
    char* flush = nullptr;
    const size_t flush_bytes = size_t(256) << 20;
    CHECK(cudaMalloc(&w, 32 * size_t(kIngressBytes)));  // 8 copies of a cluster's
    CHECK(cudaMemset(w, 0x3f, 32 * size_t(kIngressBytes)));  // floats of 0.747
    CHECK(cudaMalloc(&flush, flush_bytes));
    if (print_ingress(out, w, flush, flush_bytes, 0, 8, false) || print_ingress(out, w, flush, flush_bytes, 1, 8, false) ||
        print_ingress(out, w, flush, flush_bytes, 0, 1, false) || print_ingress(out, w, flush, flush_bytes, 0, 8, true))
      return 1;
    CHECK(cudaFree(flush));
    CHECK(cudaFree(w));
  }
  if (ingress_only) return 0;
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
  if (print_mma_rate<false>(out) || print_mma_rate<true>(out)) return 1;
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
  if (print_wgmma_rate<8, true>(out) || print_wgmma_rate<8, false>(out) ||
      print_wgmma_rate<16, true>(out) || print_wgmma_rate<16, false>(out) ||
      print_wgmma_rate<64, true>(out) || print_wgmma_rate<64, false>(out) ||
      print_wgmma_rate<128, true>(out) || print_wgmma_rate<128, false>(out) ||
      print_wgmma_rate<256, true>(out) || print_wgmma_rate<256, false>(out))
    return 1;
  CHECK(cudaFree(out));
  return 0;
}
