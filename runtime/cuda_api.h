/* The CUDA driver and NVRTC, opened at run time (dlopen) so that programs
 * link and run where neither is installed.  Calls go through the tables:
 * fg_cuda()->cuInit(0).  The field names are cuda.h's macro names, so the
 * versioned symbols (cuMemAlloc_v2, ...) are the ones looked up. */
#ifndef FLOWGEN_CUDA_API_H
#define FLOWGEN_CUDA_API_H

#include "internal.h"

#include <cuda.h>
#include <nvrtc.h>

#define FG_CUDA_FUNCTIONS(X)                                                  \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)          \
  X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain)      \
  X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent)         \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                \
  X(cuFuncSetAttribute) X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree)        \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamSynchronize) X(cuCtxSynchronize)  \
  X(cuStreamIsCapturing) X(cuGetErrorName) X(cuGetErrorString)

#define FG_NVRTC_FUNCTIONS(X)                                                 \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcGetNumSupportedArchs)         \
  X(nvrtcGetSupportedArchs) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)      \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)      \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)

#define FG_API_FIELD(f) __typeof__(f) *f;
typedef struct fg_cuda_api {
  FG_CUDA_FUNCTIONS(FG_API_FIELD)
} fg_cuda_api;
typedef struct fg_nvrtc_api {
  FG_NVRTC_FUNCTIONS(FG_API_FIELD)
  int version;     /* major * 1000 + minor * 10, e.g. 13000 */
  int max_arch;    /* highest sm_XY with cubin support */
  int min_arch;
} fg_nvrtc_api;
#undef FG_API_FIELD

/* The loaded driver, with cuInit(0) done; NULL (and NO_DRIVER in err) when
 * libcuda.so.1 cannot be opened or initialised. */
FG_HIDDEN const fg_cuda_api *fg_cuda(flowgen_error *err);
/* The loaded NVRTC; NULL (and NO_NVRTC in err) when it cannot be found.
 * $FLOWGEN_NVRTC names the library explicitly. */
FG_HIDDEN const fg_nvrtc_api *fg_nvrtc(flowgen_error *err);
/* Closes both (tests use this to start over). */
FG_HIDDEN void fg_loader_reset(void);

/* CUDA_SUCCESS -> OK; else CUDA with "what failed: CUDA_ERROR_X (text)".
 * FG_CU(err, cuMemAlloc, (&p, n)) calls fg_cuda()->cuMemAlloc(&p, n) of the
 * loaded driver `cu` in scope and names "cuMemAlloc" in the message. */
FG_HIDDEN flowgen_status fg_cuda_check(CUresult result, const char *what,
                                       flowgen_error *err);
#define FG_CU(err, call) fg_cuda_check((call), fg_call_name(#call), (err))
/* "rt->cu->cuMemAlloc(&raw, n)" -> "cuMemAlloc" (a static buffer per thread). */
FG_HIDDEN const char *fg_call_name(const char *expression);

#endif
