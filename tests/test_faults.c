/* Fault injection for every CUDA driver and NVRTC call of the runtime,
 * without a GPU.
 *
 * dlopen, dlsym and dlclose are wrapped (tests/test_faults.wrap).
 * "libcuda.so.1" opens a fake driver whose functions keep books (device
 * allocations, loaded modules, primary-context retains, the context stack)
 * and can be told to fail with a chosen CUresult on their Nth call.  NVRTC is
 * the real one (a real cubin reaches the fake cuModuleLoadData), unless a
 * test asks for the fake NVRTC below, or under valgrind, where the fake
 * stands in for it (a real compile takes half a minute there).
 *
 * The loops make each driver call of each public runtime function fail once
 * and check: the status, a message naming the call and the CUDA error, that
 * the next call without a fault works, and that by the time the runtime is
 * closed every allocation, module and context retain has been released.
 *
 * (f) does the same for host allocations (tests/alloc_faults.h: malloc,
 * calloc, realloc, strdup and free are wrapped too); the fake driver's own
 * books use __real_malloc and __real_calloc, which never fail.
 */
#include "alloc_faults.h"

#include "cuda_api.h"
#include "flowrt.h"

#include <dlfcn.h>
#include <elf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- problems: collected over a loop, reported once ---------------------- */

static char problems[1 << 15];
static size_t problems_used;
static char where[512]; /* the fault the current run injects */

static void problem(const char *fmt, ...) FG_PRINTF(1, 2);
static void problem(const char *fmt, ...) {
  if (problems_used + 2 >= sizeof problems) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  int n = snprintf(problems + problems_used, sizeof problems - problems_used,
                   "%s%s%s\n", where, where[0] ? ": " : "", line);
  if (n > 0) problems_used += (size_t)n;
  if (problems_used >= sizeof problems) problems_used = sizeof problems - 1;
}

static void expect_no_problems(void) {
  if (problems_used) fail_msg("\n%s", problems);
}

static void expect_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("expected '%s' in: %s", part, text);
}

/* ---- CUDA error names, as the driver spells them ------------------------- */

#define CU_ERRORS(X)                                                          \
  X(CUDA_SUCCESS, "no error")                                                 \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                             \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                       \
  X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")               \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                      \
  X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")               \
  X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                     \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available")             \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                     \
  X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                           \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")   \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested")       \
  X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                   \
  X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size")                  \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "unsupported driver combination")      \
  X(CUDA_ERROR_UNKNOWN, "unknown error")

static const struct {
  CUresult code;
  const char *name, *text;
} cu_errors[] = {
#define CU_ERROR_ROW(code, text) {code, #code, text},
    CU_ERRORS(CU_ERROR_ROW)
#undef CU_ERROR_ROW
};

static const char *cu_error_name(CUresult r) {
  for (size_t i = 0; i < sizeof cu_errors / sizeof *cu_errors; ++i)
    if (cu_errors[i].code == r) return cu_errors[i].name;
  return NULL;
}

/* ---- the fake driver's books ----------------------------------------------- */

#define FN_ENUM(f) FN_##f,
enum { FG_CUDA_FUNCTIONS(FN_ENUM) FN_COUNT };
#undef FN_ENUM

/* Each mock has the prototype of the driver function it stands for. */
#define MOCK_DECL(f) static __typeof__(f) mock_##f;
FG_CUDA_FUNCTIONS(MOCK_DECL)
#undef MOCK_DECL

typedef struct mock_fn {
  const char *name;   /* "cuMemAlloc": what the runtime's messages say */
  const char *symbol; /* "cuMemAlloc_v2": what dlsym is asked for */
  void *impl;
} mock_fn;

static const mock_fn cuda_fns[FN_COUNT] = {
#define MOCK_ROW(f) {#f, STR(f), (void *)mock_##f},
    FG_CUDA_FUNCTIONS(MOCK_ROW)
#undef MOCK_ROW
};

/* The result an injected fault returns: a plausible one for each call. */
static CUresult fault_result_of(int fn) {
  switch (fn) {
  case FN_cuInit: return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
  case FN_cuDeviceGetCount: return CUDA_ERROR_NOT_INITIALIZED;
  case FN_cuDeviceGet: return CUDA_ERROR_INVALID_DEVICE;
  case FN_cuDevicePrimaryCtxRetain: return CUDA_ERROR_OUT_OF_MEMORY;
  case FN_cuDevicePrimaryCtxRelease: return CUDA_ERROR_INVALID_CONTEXT;
  case FN_cuCtxPushCurrent: return CUDA_ERROR_INVALID_CONTEXT;
  case FN_cuCtxPopCurrent: return CUDA_ERROR_INVALID_CONTEXT;
  case FN_cuModuleLoadData: return CUDA_ERROR_NO_BINARY_FOR_GPU;
  case FN_cuModuleUnload: return CUDA_ERROR_INVALID_HANDLE;
  case FN_cuModuleGetFunction: return CUDA_ERROR_NOT_FOUND;
  case FN_cuLaunchKernelEx: return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  case FN_cuMemAlloc: return CUDA_ERROR_OUT_OF_MEMORY;
  case FN_cuMemFree: return CUDA_ERROR_ILLEGAL_ADDRESS;
  case FN_cuMemcpyHtoD: return CUDA_ERROR_ILLEGAL_ADDRESS;
  case FN_cuMemcpyDtoH: return CUDA_ERROR_LAUNCH_FAILED; /* a kernel's error */
  case FN_cuStreamSynchronize: return CUDA_ERROR_LAUNCH_FAILED;
  case FN_cuCtxSynchronize: return CUDA_ERROR_ILLEGAL_ADDRESS;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
}

/* Releases: the runtime cannot do anything about their failure, so it must
 * carry on (and a failed release still counts as released). */
static bool is_release(int fn) {
  return fn == FN_cuMemFree || fn == FN_cuModuleUnload ||
         fn == FN_cuCtxPopCurrent || fn == FN_cuDevicePrimaryCtxRelease;
}

#define MAX_ALLOCS 256
#define MAX_MODULES 32
#define MAX_FUNCTIONS 64
#define MAX_LAUNCHES 32
#define FAKE_DEVICE_MEMORY ((size_t)1 << 30)

typedef struct fake_alloc {
  CUdeviceptr ptr;
  size_t size;
  unsigned char *shadow; /* host copy of the contents */
  bool freed;            /* cuMemFree was called on it */
  bool user;             /* the test's own buffer, not the runtime's */
} fake_alloc;

typedef struct fake_module {
  unsigned char *image; /* a copy: the caller may free its buffer */
  size_t size;
  bool ptx;
  bool unloaded;
} fake_module;

typedef struct fake_function {
  int module;
  char name[160];
  int max_dynamic_shared;
  bool non_portable_cluster;
} fake_function;

typedef struct fake_launch {
  char name[160];
  unsigned grid, block, shared, cluster;
  bool cooperative;
  CUstream stream;
  CUdeviceptr in, out, params; /* sampling kernel arguments */
  long long rows;
  CUdeviceptr cond_bias;       /* a conditional model's sampling kernel, */
  float guidance;              /* and its guidance */
  CUdeviceptr cond, null_cond; /* the cond kernel's (cond_bias above), */
  float cond_head[16], null_head[4]; /* and what they held at the launch */
} fake_launch;

static struct {
  /* behaviour */
  bool driver_absent;
  const char *hidden_symbol;   /* dlsym on the fake library returns NULL */
  CUresult init_result;
  int device_count, cc_major, cc_minor;
  int sms;                  /* multiprocessors reported (0 = 132) */
  unsigned cooperative_max; /* co-resident blocks (0 = 132, one per SM) */
  int fault_fn, fault_at, fault_count; /* calls fault_at .. +count-1 fail */
  CUresult fault_result;
  const flowrt_weights *expect_weights; /* checked at the packing launch */
  CUstreamCaptureStatus capturing;      /* what cuStreamIsCapturing says */
  /* books */
  int calls[FN_COUNT];
  int fired, fired_fn;
  int cuda_opened, cuda_closed;
  int retained, ctx_depth;
  fake_alloc allocs[MAX_ALLOCS];
  int nallocs;
  size_t device_bytes_in_use;
  CUdeviceptr next_address;
  fake_module modules[MAX_MODULES];
  int nmodules;
  fake_function functions[MAX_FUNCTIONS];
  int nfunctions;
  fake_launch launches[MAX_LAUNCHES];
  int nlaunches;
  size_t htod_bytes, dtoh_bytes;
} g;

static char fake_cuda_library, fake_nvrtc_library; /* their addresses are the handles */
static char fake_context_token;
#define FAKE_CONTEXT ((CUcontext)(void *)&fake_context_token)

static void mock_free_books(void) {
  for (int i = 0; i < g.nallocs; ++i) free(g.allocs[i].shadow);
  for (int i = 0; i < g.nmodules; ++i) free(g.modules[i].image);
}

static void mock_reset(void) {
  mock_free_books();
  memset(&g, 0, sizeof g);
  g.init_result = CUDA_SUCCESS;
  g.device_count = 1;
  g.cc_major = 9;
  g.cc_minor = 0;
  g.fault_fn = -1;
  g.next_address = 0x7f0000000000ull;
}

static void arm_fault(int fn, int at, int count, CUresult result) {
  g.fault_fn = fn;
  g.fault_at = at;
  g.fault_count = count;
  g.fault_result = result;
}

/* Counts the call; returns the injected failure or CUDA_SUCCESS. */
static CUresult called(int fn) {
  int n = ++g.calls[fn];
  if (fn == g.fault_fn && n >= g.fault_at && n < g.fault_at + g.fault_count) {
    g.fired++;
    return g.fault_result;
  }
  return CUDA_SUCCESS;
}

/* The runtime calls the driver from more than one thread (a variant built
 * while the weights upload): each mock holds this lock while it keeps its
 * books, released on every return (a cleanup variable). */
static pthread_mutex_t fake_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *fake_lock(void) {
  pthread_mutex_lock(&fake_mutex);
  return &fake_mutex;
}
static void fake_unlock(pthread_mutex_t **held) { pthread_mutex_unlock(*held); }
#define FAKE_LOCK() \
  pthread_mutex_t *fake_held_ __attribute__((cleanup(fake_unlock))) = fake_lock()

#define ENTER(f)                                                              \
  FAKE_LOCK();                                                                \
  do {                                                                        \
    CUresult fault_ = called(FN_##f);                                         \
    if (fault_ != CUDA_SUCCESS) return fault_;                                \
  } while (0)

static void misuse(const char *fmt, ...) FG_PRINTF(1, 2);
static void misuse(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  problem("driver misuse: %s", line);
}

static void need_context(const char *call) {
  if (g.ctx_depth == 0) misuse("%s with no current context", call);
}

static fake_alloc *find_alloc(CUdeviceptr p, size_t bytes) {
  for (int i = 0; i < g.nallocs; ++i) {
    fake_alloc *a = &g.allocs[i];
    if (!a->freed && p >= a->ptr && p - a->ptr <= a->size && bytes <= a->size - (p - a->ptr))
      return a;
  }
  return NULL;
}

static CUdeviceptr new_alloc(size_t bytes, bool user) {
  if (g.nallocs == MAX_ALLOCS) {
    misuse("more than %d allocations", MAX_ALLOCS);
    return 0;
  }
  fake_alloc *a = &g.allocs[g.nallocs++];
  a->ptr = g.next_address;
  a->size = bytes;
  a->shadow = __real_calloc(bytes ? bytes : 1, 1); /* never failed: see (f) */
  a->user = user;
  g.next_address += (bytes + 4095) / 4096 * 4096 + 4096; /* a gap between */
  g.device_bytes_in_use += bytes;
  return a->ptr;
}

/* The test's own device buffers (not counted as the runtime's calls). */
static CUdeviceptr user_alloc(size_t bytes) { return new_alloc(bytes, true); }

static void user_free_all(void) {
  for (int i = 0; i < g.nallocs; ++i)
    if (g.allocs[i].user) g.allocs[i].freed = true;
}

/* ---- the fake driver --------------------------------------------------------- */

static CUresult mock_cuInit(unsigned int flags) {
  ENTER(cuInit);
  if (flags != 0) misuse("cuInit(%u)", flags);
  return g.init_result;
}

static CUresult mock_cuDriverGetVersion(int *version) {
  ENTER(cuDriverGetVersion);
  *version = 13000;
  return CUDA_SUCCESS;
}

static CUresult mock_cuDeviceGetCount(int *count) {
  ENTER(cuDeviceGetCount);
  *count = g.device_count;
  return CUDA_SUCCESS;
}

static CUresult mock_cuDeviceGet(CUdevice *device, int ordinal) {
  ENTER(cuDeviceGet);
  if (ordinal < 0 || ordinal >= g.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

static CUresult mock_cuDeviceGetAttribute(int *value, CUdevice_attribute attr,
                                          CUdevice device) {
  ENTER(cuDeviceGetAttribute);
  if (device < 0 || device >= g.device_count) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = g.cc_major; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = g.cc_minor; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = g.sms ? g.sms : 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *value = g.cc_major >= 9; break;
  default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

static CUresult mock_cuDeviceGetName(char *name, int len, CUdevice device) {
  ENTER(cuDeviceGetName);
  if (device < 0 || device >= g.device_count || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "Fake H200");
  return CUDA_SUCCESS;
}

static CUresult mock_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
  ENTER(cuDevicePrimaryCtxRetain);
  if (device < 0 || device >= g.device_count) return CUDA_ERROR_INVALID_DEVICE;
  g.retained++;
  *ctx = FAKE_CONTEXT;
  return CUDA_SUCCESS;
}

static CUresult mock_cuDevicePrimaryCtxRelease(CUdevice device) {
  FAKE_LOCK();
  CUresult r = called(FN_cuDevicePrimaryCtxRelease);
  if (device < 0 || device >= g.device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (g.retained == 0) misuse("cuDevicePrimaryCtxRelease without a retain");
  else g.retained--;
  return r;
}

static CUresult mock_cuCtxPushCurrent(CUcontext ctx) {
  ENTER(cuCtxPushCurrent);
  if (ctx != FAKE_CONTEXT) misuse("cuCtxPushCurrent of an unknown context");
  if (g.retained == 0) misuse("cuCtxPushCurrent of a released primary context");
  g.ctx_depth++;
  return CUDA_SUCCESS;
}

static CUresult mock_cuCtxPopCurrent(CUcontext *ctx) {
  FAKE_LOCK();
  CUresult r = called(FN_cuCtxPopCurrent);
  if (g.ctx_depth == 0) {
    misuse("cuCtxPopCurrent with an empty context stack");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  g.ctx_depth--;
  if (ctx) *ctx = FAKE_CONTEXT;
  return r;
}

/* The extent of an ELF image: the end of its last header table or section. */
static size_t elf_size(const unsigned char *p) {
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return 0;
  size_t end = sizeof eh;
  size_t sh_end = (size_t)eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
  size_t ph_end = (size_t)eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
  if (sh_end > end) end = sh_end;
  if (ph_end > end) end = ph_end;
  if (end > ((size_t)64 << 20)) return 0;
  for (unsigned i = 0; i < eh.e_shnum && eh.e_shentsize >= sizeof(Elf64_Shdr); ++i) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
      end = (size_t)(sh.sh_offset + sh.sh_size);
  }
  return end;
}

static CUresult mock_cuModuleLoadData(CUmodule *module, const void *image) {
  ENTER(cuModuleLoadData);
  need_context("cuModuleLoadData");
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *p = image;
  fake_module m = {0};
  if (memcmp(p, ELFMAG, SELFMAG) == 0) {
    m.size = elf_size(p);
  } else if (strstr(image, ".version") && strstr(image, ".target")) {
    m.size = strlen(image) + 1;
    m.ptx = true;
  }
  if (m.size == 0) return CUDA_ERROR_INVALID_IMAGE;
  if (g.nmodules == MAX_MODULES) {
    misuse("more than %d modules", MAX_MODULES);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m.image = __real_malloc(m.size);
  memcpy(m.image, p, m.size);
  g.modules[g.nmodules] = m;
  *module = (CUmodule)(uintptr_t)(0x1000 + g.nmodules++);
  return CUDA_SUCCESS;
}

static fake_module *module_of(CUmodule handle, int *index) {
  uintptr_t i = (uintptr_t)handle - 0x1000;
  if ((uintptr_t)handle < 0x1000 || i >= (uintptr_t)g.nmodules) return NULL;
  if (index) *index = (int)i;
  return &g.modules[i];
}

static CUresult mock_cuModuleUnload(CUmodule handle) {
  FAKE_LOCK();
  CUresult r = called(FN_cuModuleUnload);
  fake_module *m = module_of(handle, NULL);
  if (!m || m->unloaded) {
    misuse("cuModuleUnload of %s module", m ? "an unloaded" : "an unknown");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  m->unloaded = true;
  return r;
}

static bool image_has_symbol(const fake_module *m, const char *name) {
  size_t n = strlen(name);
  for (const unsigned char *p = m->image; p + n < m->image + m->size; ++p) {
    p = memchr(p, name[0], (size_t)(m->image + m->size - p));
    if (!p || p + n >= m->image + m->size) return false;
    if (memcmp(p, name, n) == 0 && p[n] == (m->ptx ? '(' : '\0')) return true;
  }
  return false;
}

static CUresult mock_cuModuleGetFunction(CUfunction *function, CUmodule handle,
                                         const char *name) {
  ENTER(cuModuleGetFunction);
  int index = 0;
  fake_module *m = module_of(handle, &index);
  if (!m || m->unloaded) {
    misuse("cuModuleGetFunction on %s module", m ? "an unloaded" : "an unknown");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!name || !image_has_symbol(m, name)) return CUDA_ERROR_NOT_FOUND;
  if (g.nfunctions == MAX_FUNCTIONS) {
    misuse("more than %d functions", MAX_FUNCTIONS);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  fake_function *f = &g.functions[g.nfunctions];
  f->module = index;
  snprintf(f->name, sizeof f->name, "%s", name);
  *function = (CUfunction)(uintptr_t)(0x2000 + g.nfunctions++);
  return CUDA_SUCCESS;
}

static fake_function *function_of(CUfunction handle) {
  uintptr_t i = (uintptr_t)handle - 0x2000;
  if ((uintptr_t)handle < 0x2000 || i >= (uintptr_t)g.nfunctions) return NULL;
  fake_function *f = &g.functions[i];
  return g.modules[f->module].unloaded ? NULL : f;
}

static CUresult mock_cuFuncSetAttribute(CUfunction handle,
                                        CUfunction_attribute attr, int value) {
  ENTER(cuFuncSetAttribute);
  fake_function *f = function_of(handle);
  if (!f) {
    misuse("cuFuncSetAttribute on an unknown function");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > 232448 - 1024) return CUDA_ERROR_INVALID_VALUE;
    f->max_dynamic_shared = value;
  } else if (attr == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
    f->non_portable_cluster = value != 0;
  }
  return CUDA_SUCCESS;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

static CUdeviceptr arg_ptr(void **params, int i) { return *(CUdeviceptr *)params[i]; }

/* The seed model (the six tensors one by one), as the runtime tells it. */
static bool is_seed_weights(const flowrt_weights *w) {
  return w->cond == 0 && w->layers == 3 && w->act == FLOWGEN_ACT_SILU &&
         w->time.features == 0 && strcmp(w->input, "xtc") == 0;
}

/* One tensor of the pack kernel's: on the device with the host's values. */
static void check_tensor(CUdeviceptr p, const float *host, size_t count, const char *what,
                         int i) {
  fake_alloc *a = find_alloc(p, count * sizeof(float));
  if (!a) misuse("pack kernel %s %d: %zu floats are not on the device", what, i, count);
  else if (memcmp(a->shadow + (p - a->ptr), host, count * sizeof(float)) != 0)
    misuse("pack kernel %s %d: the device copy differs from the weights", what, i);
}

/* The packing kernel reads the layers' fp32 tensors: they must be on the
 * device with the contents of the host weights.  The seed's takes the six
 * tensors one by one, then params; the others a Tensors struct by value
 * (w[L], then b[L]), then params. */
static void check_pack_arguments(void **params) {
  const flowrt_weights *w = g.expect_weights;
  if (!w || is_seed_weights(w)) {
    for (int i = 0; i < 7; ++i)
      if (!find_alloc(arg_ptr(params, i), 4))
        misuse("pack kernel argument %d is not device memory", i);
    if (!w) return;
    const size_t D = (size_t)w->dim, H = (size_t)w->hidden;
    const size_t counts[6] = {H * (D + 1), H, H * H, H, D * H, D};
    const float *host[6] = {w->w[0], w->b[0], w->w[1], w->b[1], w->w[2], w->b[2]};
    for (int i = 0; i < 6; ++i) check_tensor(arg_ptr(params, i), host[i], counts[i], "tensor", i);
    return;
  }
  const CUdeviceptr *tensors = params[0];
  if (!find_alloc(arg_ptr(params, 1), 4)) misuse("pack kernel: params is not device memory");
  const int L = w->layers;
  for (int i = 0; i < L; ++i) {
    size_t rows = i == L - 1 ? (size_t)w->dim : (size_t)w->hidden;
    size_t cols = i == 0 ? (size_t)(w->dim + w->time_width + w->cond) : (size_t)w->hidden;
    check_tensor(tensors[i], w->w[i], rows * cols, "Tensors.w", i);
    check_tensor(tensors[L + i], w->b[i], rows, "Tensors.b", i);
  }
}

static CUresult mock_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction handle,
                                      void **params, void **extra) {
  ENTER(cuLaunchKernelEx);
  need_context("cuLaunchKernelEx");
  fake_function *f = function_of(handle);
  if (!f) {
    misuse("cuLaunchKernelEx of an unknown or unloaded function");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!cfg || !params || extra) {
    misuse("cuLaunchKernelEx without a config or parameters");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cfg->gridDimX == 0 || cfg->gridDimY == 0 || cfg->gridDimZ == 0 ||
      cfg->blockDimX == 0 || cfg->blockDimY == 0 || cfg->blockDimZ == 0 ||
      cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ > 1024 ||
      (cfg->numAttrs && !cfg->attrs))
    return CUDA_ERROR_INVALID_VALUE;
  if (cfg->sharedMemBytes > 48 * 1024 && (int)cfg->sharedMemBytes > f->max_dynamic_shared)
    return CUDA_ERROR_INVALID_VALUE; /* the driver insists on the opt-in */
  unsigned cluster = 1;
  bool cooperative = false;
  for (unsigned i = 0; i < cfg->numAttrs; ++i) {
    const CUlaunchAttribute *a = &cfg->attrs[i];
    if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = a->value.cooperative != 0;
      if (cooperative && cfg->gridDimX > (g.cooperative_max ? g.cooperative_max : 132))
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
      continue;
    }
    if (a->id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
    cluster = a->value.clusterDim.x * a->value.clusterDim.y * a->value.clusterDim.z;
    if (cluster == 0 || cfg->gridDimX % a->value.clusterDim.x != 0 || cluster > 16 ||
        (cluster > 8 && !f->non_portable_cluster))
      return CUDA_ERROR_INVALID_CLUSTER_SIZE; /* as the driver: 9-16 need the opt-in */
  }
  fake_launch *l = g.nlaunches < MAX_LAUNCHES ? &g.launches[g.nlaunches++] : NULL;
  if (!l) {
    misuse("more than %d launches", MAX_LAUNCHES);
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  memset(l, 0, sizeof *l);
  memcpy(l->name, f->name, sizeof l->name); /* both NUL-terminated, same size */
  l->grid = cfg->gridDimX;
  l->block = cfg->blockDimX;
  l->shared = cfg->sharedMemBytes;
  l->stream = cfg->hStream;
  l->cluster = cluster;
  l->cooperative = cooperative;
  if (ends_with(f->name, "_pack")) {
    check_pack_arguments(params);
  } else if (ends_with(f->name, "_cond")) {
    /* (cond, null_cond, batch, params, cond_bias) */
    l->cond = arg_ptr(params, 0);
    l->null_cond = arg_ptr(params, 1);
    l->rows = *(long long *)params[2];
    l->params = arg_ptr(params, 3);
    l->cond_bias = arg_ptr(params, 4);
    const flowrt_weights *w = g.expect_weights;
    if (w && l->rows > 0) {
      size_t rows = (size_t)l->rows;
      size_t bytes = rows * (size_t)w->cond * sizeof(float);
      fake_alloc *a = find_alloc(l->cond, bytes);
      if (!a) misuse("cond kernel: cond is not %zu rows of device memory", rows);
      else memcpy(l->cond_head, a->shadow + (l->cond - a->ptr),
                  bytes < sizeof l->cond_head ? bytes : sizeof l->cond_head);
      bytes = (size_t)w->cond * sizeof(float);
      a = l->null_cond ? find_alloc(l->null_cond, bytes) : NULL;
      if (l->null_cond && !a) misuse("cond kernel: null_cond is not 1 x C of device memory");
      else if (a) memcpy(l->null_head, a->shadow + (l->null_cond - a->ptr),
                         bytes < sizeof l->null_head ? bytes : sizeof l->null_head);
      if (!find_alloc(l->cond_bias, rows * (size_t)w->hidden * sizeof(float)))
        misuse("cond kernel: the workspace is not batch x H floats of device memory");
    }
  } else {
    l->in = arg_ptr(params, 0);
    l->out = arg_ptr(params, 1);
    l->rows = *(long long *)params[2];
    l->params = arg_ptr(params, 3);
    size_t bytes = l->rows > 0 && g.expect_weights
                       ? (size_t)l->rows * (size_t)g.expect_weights->dim * sizeof(float)
                       : 4;
    if (l->rows <= 0) misuse("sampling kernel launched for %lld rows", l->rows);
    if (!find_alloc(l->in, bytes) || !find_alloc(l->out, bytes))
      misuse("sampling kernel: x0 or x is not %zu bytes of device memory", bytes);
    if (!find_alloc(l->params, 4))
      misuse("sampling kernel: the packed weights are not on the device");
    if (g.expect_weights && g.expect_weights->cond) {
      l->cond_bias = arg_ptr(params, 4);
      l->guidance = *(float *)params[5];
      if (!find_alloc(l->cond_bias, (size_t)l->rows * (size_t)g.expect_weights->hidden * 4))
        misuse("sampling kernel: cond_bias is not batch x H floats of device memory");
    }
  }
  return CUDA_SUCCESS;
}

static CUresult mock_cuMemAlloc(CUdeviceptr *ptr, size_t bytes) {
  ENTER(cuMemAlloc);
  need_context("cuMemAlloc");
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > FAKE_DEVICE_MEMORY - g.device_bytes_in_use) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr p = new_alloc(bytes, false);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = p;
  return CUDA_SUCCESS;
}

static CUresult mock_cuMemFree(CUdeviceptr ptr) {
  FAKE_LOCK();
  CUresult r = called(FN_cuMemFree);
  for (int i = 0; i < g.nallocs; ++i) {
    fake_alloc *a = &g.allocs[i];
    if (a->ptr == ptr && !a->freed) {
      if (a->user) misuse("cuMemFree of the caller's buffer");
      a->freed = true;
      g.device_bytes_in_use -= a->size;
      return r;
    }
  }
  misuse("cuMemFree of 0x%llx, which is not allocated", (unsigned long long)ptr);
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult mock_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  ENTER(cuMemcpyHtoD);
  need_context("cuMemcpyHtoD");
  fake_alloc *a = find_alloc(dst, bytes);
  if (!a || !src) {
    misuse("cuMemcpyHtoD of %zu bytes to 0x%llx: not device memory", bytes,
           (unsigned long long)dst);
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(a->shadow + (dst - a->ptr), src, bytes);
  g.htod_bytes += bytes;
  return CUDA_SUCCESS;
}

static CUresult mock_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  ENTER(cuMemcpyDtoH);
  need_context("cuMemcpyDtoH");
  fake_alloc *a = find_alloc(src, bytes);
  if (!a || !dst) {
    misuse("cuMemcpyDtoH of %zu bytes from 0x%llx: not device memory", bytes,
           (unsigned long long)src);
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(dst, a->shadow + (src - a->ptr), bytes);
  g.dtoh_bytes += bytes;
  return CUDA_SUCCESS;
}

static CUresult mock_cuStreamSynchronize(CUstream stream) {
  (void)stream;
  ENTER(cuStreamSynchronize);
  need_context("cuStreamSynchronize");
  return CUDA_SUCCESS;
}

static CUresult mock_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
  (void)stream;
  ENTER(cuStreamIsCapturing);
  need_context("cuStreamIsCapturing");
  *status = g.capturing;
  return CUDA_SUCCESS;
}

static CUresult mock_cuCtxSynchronize(void) {
  ENTER(cuCtxSynchronize);
  need_context("cuCtxSynchronize");
  return CUDA_SUCCESS;
}

static CUresult mock_cuGetErrorName(CUresult error, const char **name) {
  ENTER(cuGetErrorName);
  *name = cu_error_name(error);
  return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult mock_cuGetErrorString(CUresult error, const char **text) {
  ENTER(cuGetErrorString);
  for (size_t i = 0; i < sizeof cu_errors / sizeof *cu_errors; ++i) {
    if (cu_errors[i].code == error) {
      *text = cu_errors[i].text;
      return CUDA_SUCCESS;
    }
  }
  *text = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- the fake NVRTC ---------------------------------------------------------- */

#define NV_ENUM(f) NV_##f,
enum { FG_NVRTC_FUNCTIONS(NV_ENUM) NV_COUNT };
#undef NV_ENUM

#define NVMOCK_DECL(f) static __typeof__(f) nvmock_##f;
FG_NVRTC_FUNCTIONS(NVMOCK_DECL)
#undef NVMOCK_DECL

static const mock_fn nvrtc_fns[NV_COUNT] = {
#define NVMOCK_ROW(f) {#f, #f, (void *)nvmock_##f},
    FG_NVRTC_FUNCTIONS(NVMOCK_ROW)
#undef NVMOCK_ROW
};

#define NV_ERRORS(X)                                                          \
  X(NVRTC_SUCCESS) X(NVRTC_ERROR_OUT_OF_MEMORY)                               \
  X(NVRTC_ERROR_PROGRAM_CREATION_FAILURE) X(NVRTC_ERROR_INVALID_INPUT)        \
  X(NVRTC_ERROR_INVALID_PROGRAM) X(NVRTC_ERROR_INVALID_OPTION)                \
  X(NVRTC_ERROR_COMPILATION) X(NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)         \
  X(NVRTC_ERROR_INTERNAL_ERROR)

static const char *nv_error_name(nvrtcResult r) {
  switch (r) {
#define NV_ERROR_CASE(e) case e: return #e;
    NV_ERRORS(NV_ERROR_CASE)
#undef NV_ERROR_CASE
  default: return "NVRTC_ERROR unknown";
  }
}

static const char fake_log[] =
    "flow.cu(17): error: identifier \"bogus_symbol\" is undefined\n"
    "1 error detected in the compilation of \"flow.cu\".\n";

#define MAX_PROGRAMS 16

static struct {
  bool fake;     /* "libnvrtc*" opens the fake */
  bool stand_in; /* under valgrind, where a real compile takes half a minute:
                    the fake stands in for the NVRTC found by name (not by a
                    path), its images holding the kernels' names */
  int calls[NV_COUNT];
  int fault_fn, fault_at, fault_count, fired;
  nvrtcResult fault_result;
  int opened, closed, created, destroyed;
  int major, minor; /* the version reported (13.0 unless a test says) */
  int compile_delay_ms; /* nvrtcCompileProgram takes this long */
  struct {
    bool live, compiled, failed;
    bool split; /* compiled with --split-compile=0 */
    char arch_option[64];
    char *source; /* the stand-in's copy */
  } programs[MAX_PROGRAMS];
  int nprograms;
} nv;

static void nv_reset(void) {
  for (int i = 0; i < nv.nprograms; ++i) free(nv.programs[i].source);
  memset(&nv, 0, sizeof nv);
  nv.fault_fn = -1;
  nv.major = 13;
  nv.stand_in = fg_test_under_valgrind();
}

static void nv_arm_fault(int fn, int at, int count, nvrtcResult result) {
  nv.fault_fn = fn;
  nv.fault_at = at;
  nv.fault_count = count;
  nv.fault_result = result;
}

static nvrtcResult nv_called(int fn) {
  int n = ++nv.calls[fn];
  if (fn == nv.fault_fn && n >= nv.fault_at && n < nv.fault_at + nv.fault_count) {
    nv.fired++;
    return nv.fault_result;
  }
  return NVRTC_SUCCESS;
}

#define NV_ENTER(f)                                                           \
  FAKE_LOCK();                                                                \
  do {                                                                        \
    nvrtcResult fault_ = nv_called(NV_##f);                                   \
    if (fault_ != NVRTC_SUCCESS) return fault_;                               \
  } while (0)

static int program_of(nvrtcProgram prog) {
  uintptr_t i = (uintptr_t)prog - 0x3000;
  if ((uintptr_t)prog < 0x3000 || i >= (uintptr_t)nv.nprograms || !nv.programs[i].live) {
    problem("NVRTC misuse: unknown or destroyed program");
    return -1;
  }
  return (int)i;
}

static nvrtcResult nvmock_nvrtcVersion(int *major, int *minor) {
  NV_ENTER(nvrtcVersion);
  *major = nv.major;
  *minor = nv.minor;
  return NVRTC_SUCCESS;
}

static const int fake_archs[] = {75, 80, 86, 89, 90, 100, 120};
#define FAKE_ARCH_COUNT ((int)(sizeof fake_archs / sizeof *fake_archs))

static nvrtcResult nvmock_nvrtcGetNumSupportedArchs(int *count) {
  NV_ENTER(nvrtcGetNumSupportedArchs);
  *count = FAKE_ARCH_COUNT;
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetSupportedArchs(int *archs) {
  NV_ENTER(nvrtcGetSupportedArchs);
  memcpy(archs, fake_archs, sizeof fake_archs);
  return NVRTC_SUCCESS;
}

static const char *nvmock_nvrtcGetErrorString(nvrtcResult r) { return nv_error_name(r); }

static nvrtcResult nvmock_nvrtcCreateProgram(nvrtcProgram *prog, const char *src,
                                             const char *name, int num_headers,
                                             const char *const *headers,
                                             const char *const *include_names) {
  (void)headers;
  (void)include_names;
  NV_ENTER(nvrtcCreateProgram);
  if (!prog || !src || !name || num_headers < 0) return NVRTC_ERROR_INVALID_INPUT;
  int i = 0;
  while (i < nv.nprograms && nv.programs[i].live) ++i; /* reuse a destroyed one */
  if (i == MAX_PROGRAMS) return NVRTC_ERROR_OUT_OF_MEMORY;
  if (i == nv.nprograms) nv.nprograms++;
  free(nv.programs[i].source);
  memset(&nv.programs[i], 0, sizeof nv.programs[i]);
  nv.programs[i].live = true;
  if (nv.stand_in && !nv.fake) nv.programs[i].source = __real_strdup(src);
  *prog = (nvrtcProgram)(uintptr_t)(0x3000 + i);
  nv.created++;
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcDestroyProgram(nvrtcProgram *prog) {
  FAKE_LOCK();
  nvrtcResult r = nv_called(NV_nvrtcDestroyProgram);
  int i = prog ? program_of(*prog) : -1;
  if (i < 0) return NVRTC_ERROR_INVALID_PROGRAM;
  nv.programs[i].live = false;
  free(nv.programs[i].source);
  nv.programs[i].source = NULL;
  nv.destroyed++;
  *prog = NULL;
  return r;
}

static nvrtcResult nvmock_nvrtcCompileProgram(nvrtcProgram prog, int count,
                                              const char *const *options) {
  FAKE_LOCK();
  int i = program_of(prog);
  if (i < 0) return NVRTC_ERROR_INVALID_PROGRAM;
  for (int k = 0; k < count; ++k)
    if (strncmp(options[k], "--gpu-architecture=", 19) == 0)
      snprintf(nv.programs[i].arch_option, sizeof nv.programs[i].arch_option, "%s",
               options[k] + 19);
    else if (strcmp(options[k], "--split-compile=0") == 0)
      nv.programs[i].split = true;
  nvrtcResult r = nv_called(NV_nvrtcCompileProgram);
  if (nv.compile_delay_ms) {
    struct timespec delay = {0, nv.compile_delay_ms * 1000000L};
    nanosleep(&delay, NULL);
  }
  nv.programs[i].compiled = r == NVRTC_SUCCESS;
  nv.programs[i].failed = r == NVRTC_ERROR_COMPILATION;
  return r;
}

static const char *log_of(int i) { return nv.programs[i].failed ? fake_log : ""; }

static nvrtcResult nvmock_nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  NV_ENTER(nvrtcGetProgramLogSize);
  int i = program_of(prog);
  if (i < 0) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = strlen(log_of(i)) + 1;
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  NV_ENTER(nvrtcGetProgramLog);
  int i = program_of(prog);
  if (i < 0) return NVRTC_ERROR_INVALID_PROGRAM;
  strcpy(log, log_of(i));
  return NVRTC_SUCCESS;
}

/* A fake "cubin": an ELF64 header and nothing else (the fake driver takes
 * it), or the stand-in's: the header, then the source with every character
 * that cannot be part of a name made a NUL (so each name in it, a kernel's
 * among them, ends in one), the section table "at" the end. */
static void fake_cubin(unsigned char *out, const char *source) {
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_machine = 190; /* EM_CUDA */
  if (source) {
    size_t n = strlen(source) + 1;
    eh.e_shoff = sizeof eh + n;
    for (size_t k = 0; k < n; ++k) {
      char c = source[k];
      bool name = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_';
      out[sizeof eh + k] = name ? (unsigned char)c : 0;
    }
  }
  memcpy(out, &eh, sizeof eh);
}

/* The fake PTX; the stand-in's is followed by the source ("name(", as the
 * driver's check for PTX wants). */
static const char fake_ptx[] = "//\n.version 9.0\n.target sm_90\n";

/* The program's output is ready; *source is the stand-in's source or NULL. */
static nvrtcResult output_ready(nvrtcProgram prog, const char **source) {
  int i = program_of(prog);
  if (i < 0 || !nv.programs[i].compiled) return NVRTC_ERROR_INVALID_PROGRAM;
  *source = nv.programs[i].source;
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) {
  NV_ENTER(nvrtcGetCUBINSize);
  const char *source;
  if (output_ready(prog, &source)) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = sizeof(Elf64_Ehdr) + (source ? strlen(source) + 1 : 0);
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
  NV_ENTER(nvrtcGetCUBIN);
  const char *source;
  if (output_ready(prog, &source)) return NVRTC_ERROR_INVALID_PROGRAM;
  fake_cubin((unsigned char *)cubin, source);
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) {
  NV_ENTER(nvrtcGetPTXSize);
  const char *source;
  if (output_ready(prog, &source)) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = sizeof fake_ptx + (source ? strlen(source) : 0);
  return NVRTC_SUCCESS;
}

static nvrtcResult nvmock_nvrtcGetPTX(nvrtcProgram prog, char *ptx) {
  NV_ENTER(nvrtcGetPTX);
  const char *source;
  if (output_ready(prog, &source)) return NVRTC_ERROR_INVALID_PROGRAM;
  memcpy(ptx, fake_ptx, sizeof fake_ptx);
  if (source) strcpy(ptx + sizeof fake_ptx - 1, source);
  return NVRTC_SUCCESS;
}

/* ---- dlopen / dlsym / dlclose ---------------------------------------------- */

void *__real_dlopen(const char *file, int mode);
void *__real_dlsym(void *handle, const char *name);
int __real_dlclose(void *handle);
void *__wrap_dlopen(const char *file, int mode);
void *__wrap_dlsym(void *handle, const char *name);
int __wrap_dlclose(void *handle);

void *__wrap_dlopen(const char *file, int mode) {
  if (file && strcmp(file, "libcuda.so.1") == 0) {
    /* A name that exists nowhere, so that dlerror() tells the real story. */
    if (g.driver_absent) return __real_dlopen("libcuda.so.1-absent-in-this-test", mode);
    g.cuda_opened++;
    return &fake_cuda_library;
  }
  if (file && strstr(file, "libnvrtc") && (nv.fake || (nv.stand_in && !strchr(file, '/')))) {
    nv.opened++;
    return &fake_nvrtc_library;
  }
  void *handle = __real_dlopen(file, mode);
  /* The real NVRTC stays mapped for the whole run (one extra reference,
   * never dropped): fg_loader_reset() then only resets the loader, and
   * reopening costs nothing.  Unloading it for real would leak 70 KB that
   * NVRTC allocates at load time, and take seconds under valgrind. */
  static void *nvrtc_pin;
  if (handle && !nvrtc_pin && file && strstr(file, "libnvrtc"))
    nvrtc_pin = __real_dlopen(file, RTLD_NOW | RTLD_LOCAL);
  return handle;
}

static void *lookup(const mock_fn *fns, int count, const char *name) {
  if (g.hidden_symbol && strcmp(name, g.hidden_symbol) == 0) return NULL;
  for (int i = 0; i < count; ++i)
    if (strcmp(fns[i].symbol, name) == 0) return fns[i].impl;
  return NULL;
}

void *__wrap_dlsym(void *handle, const char *name) {
  if (handle == &fake_cuda_library) return lookup(cuda_fns, FN_COUNT, name);
  if (handle == &fake_nvrtc_library) return lookup(nvrtc_fns, NV_COUNT, name);
  return __real_dlsym(handle, name);
}

int __wrap_dlclose(void *handle) {
  if (handle == &fake_cuda_library) {
    g.cuda_closed++;
    return 0;
  }
  if (handle == &fake_nvrtc_library) {
    nv.closed++;
    return 0;
  }
  return __real_dlclose(handle);
}

/* ---- books closed: nothing may be left held --------------------------------- */

/* Call after everything is closed and fg_loader_reset(). */
static void check_everything_released(void) {
  for (int i = 0; i < g.nallocs; ++i)
    if (!g.allocs[i].user && !g.allocs[i].freed)
      problem("leak: a %zu-byte cuMemAlloc was never freed", g.allocs[i].size);
  for (int i = 0; i < g.nmodules; ++i)
    if (!g.modules[i].unloaded) problem("leak: module %d was never unloaded", i);
  if (g.retained) problem("leak: %d primary context retain(s) never released", g.retained);
  if (g.ctx_depth) problem("the context stack was left %d deep", g.ctx_depth);
  if (g.cuda_opened != g.cuda_closed)
    problem("libcuda.so.1 opened %d times, closed %d times", g.cuda_opened, g.cuda_closed);
  if (nv.created != nv.destroyed)
    problem("leak: %d NVRTC programs created, %d destroyed", nv.created, nv.destroyed);
  if (nv.opened != nv.closed)
    problem("fake NVRTC opened %d times, closed %d times", nv.opened, nv.closed);
}

/* ---- the scenario: every public runtime call, in order ------------------- */

/* D=64, H=256 has three kernel variants: clusters of 8 blocks with 1 and 4
 * rows per cluster for small batches, and the tiled kernel (72 KB of shared
 * memory: cuFuncSetAttribute) for the rest.  flowrt_sample runs the tiled one,
 * flowrt_sample_host a cluster one.  The small model (D=3, H=5) is for the
 * tests that make NVRTC compile: it takes a quarter of the time. */
#define DIM_MAX 64
#define SAMPLE_BATCH 800 /* tiled8 (past the cluster kernel's 720): 100 blocks of 8 rows */
#define HOST_BATCH 4     /* cluster4_r1: 4 clusters of 4 blocks */

typedef enum phase {
  PH_OPEN,
  PH_CREATE,
  PH_SAMPLE,
  PH_SAMPLE_HOST,
  PH_DESTROY,
  PH_CLOSE,
  PH_COUNT
} phase;

static const char *const phase_names[PH_COUNT] = {
    "flowrt_open",        "flowrt_sampler_create",  "flowrt_sample",
    "flowrt_sample_host", "flowrt_sampler_destroy", "flowrt_close"};

static char *cache_dir;               /* shared by the tests, warmed once */
static flowrt_weights *weights;       /* D=64, H=256 */
static flowrt_weights *small_weights; /* D=3, H=5 */

typedef struct scenario {
  flowrt_options opts;
  const flowrt_weights *w;
  flowgen_spec spec;
  flowrt_runtime *rt;
  flowrt_sampler *s;
  CUdeviceptr dev_x0, dev_x;
  float x0[SAMPLE_BATCH * DIM_MAX], x[SAMPLE_BATCH * DIM_MAX];
  flowrt_stats stats; /* of the last sampler made */
} scenario;

static void collect_warning(void *ctx, const char *message) {
  (void)ctx;
  problem("unexpected warning: %s", message);
}

static flowgen_spec spec_of(const flowrt_weights *w) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.dim = w->dim;
  spec.hidden = w->hidden;
  spec.steps = 1;
  return spec;
}

static void scenario_init(scenario *sc, const flowrt_weights *w) {
  memset(sc, 0, sizeof *sc);
  sc->opts.cache_dir = cache_dir;
  sc->opts.disk_cache = 1;
  sc->opts.warn = collect_warning;
  sc->w = w;
  sc->spec = spec_of(w);
  fg_test_fill_uniform(sc->x0, SAMPLE_BATCH * DIM_MAX, 11, 3.0f);
  sc->dev_x0 = user_alloc(SAMPLE_BATCH * (size_t)w->dim * sizeof(float));
  sc->dev_x = user_alloc(SAMPLE_BATCH * (size_t)w->dim * sizeof(float));
  g.expect_weights = w;
}

static flowgen_status run_phase(scenario *sc, phase p, flowgen_error *err) {
  flowgen_status st = FLOWGEN_OK;
  switch (p) {
  case PH_OPEN: return flowrt_open(&sc->opts, &sc->rt, err);
  case PH_CREATE:
    st = flowrt_sampler_create(sc->rt, &sc->spec, sc->w, &sc->s, err);
    if (!st) sc->stats = *flowrt_sampler_stats(sc->s);
    return st;
  case PH_SAMPLE: return flowrt_sample(sc->s, sc->dev_x0, sc->dev_x, SAMPLE_BATCH, NULL, err);
  case PH_SAMPLE_HOST: return flowrt_sample_host(sc->s, sc->x0, sc->x, HOST_BATCH, err);
  case PH_DESTROY:
    flowrt_sampler_destroy(sc->s);
    sc->s = NULL;
    return FLOWGEN_OK;
  case PH_CLOSE:
    flowrt_close(sc->rt);
    sc->rt = NULL;
    return FLOWGEN_OK;
  case PH_COUNT: break;
  }
  return FLOWGEN_INTERNAL;
}

/* Closes whatever is still open, then the loader, and checks the books. */
static void scenario_finish(scenario *sc) {
  flowrt_sampler_destroy(sc->s);
  flowrt_close(sc->rt);
  sc->s = NULL;
  sc->rt = NULL;
  user_free_all();
  fg_loader_reset();
  check_everything_released();
}

/* Call numbers of each driver function within each phase of a clean run. */
typedef struct call_ranges {
  int first[PH_COUNT][FN_COUNT], last[PH_COUNT][FN_COUNT];
} call_ranges;

static void record_clean_run(call_ranges *r) {
  /* A first run fills the disk cache (a tune makes other sources);
   * the recorded one must then find its module there, like the loops. */
  scenario sc;
  mock_reset();
  fg_loader_reset();
  scenario_init(&sc, weights);
  for (int p = 0; p < PH_COUNT; ++p) run_phase(&sc, (phase)p, NULL);
  scenario_finish(&sc);
  problems_used = 0;
  problems[0] = '\0';
  mock_reset();
  fg_loader_reset();
  scenario_init(&sc, weights);
  snprintf(where, sizeof where, "clean run");
  for (int p = 0; p < PH_COUNT; ++p) {
    int before[FN_COUNT];
    memcpy(before, g.calls, sizeof before);
    flowgen_error err = {0};
    flowgen_status st = run_phase(&sc, (phase)p, &err);
    if (st) fail_msg("clean run: %s: %s", phase_names[p], err.message);
    for (int f = 0; f < FN_COUNT; ++f) {
      r->first[p][f] = before[f] + 1;
      r->last[p][f] = g.calls[f];
    }
    if (p == PH_CREATE && !sc.stats.disk_hit)
      fail_msg("clean run: the module should come from the warm disk cache %s", cache_dir);
  }
  scenario_finish(&sc);
  where[0] = '\0';
  expect_no_problems();
}

/* What a failure of fn inside phase p must give (OK: the runtime absorbs it). */
static flowgen_status expected_status(int fn, phase p) {
  if (is_release(fn) || p == PH_DESTROY || p == PH_CLOSE) return FLOWGEN_OK;
  if (fn == FN_cuInit) return FLOWGEN_NO_DRIVER;
  /* The image came from the disk cache: one the driver rejects is compiled
   * afresh (sampler.c, load_part), the pack part's at creation, a
   * variant's at its first launch. */
  if (fn == FN_cuModuleLoadData && (p == PH_CREATE || p == PH_SAMPLE || p == PH_SAMPLE_HOST))
    return FLOWGEN_OK;
  return FLOWGEN_CUDA;
}

/* One run of the scenario with call number `at` of fn failing. */
static void run_with_fault(int fn, int at) {
  mock_reset();
  fg_loader_reset();
  CUresult result = fault_result_of(fn);
  arm_fault(fn, at, 1, result);
  snprintf(where, sizeof where, "%s call #%d failing with %s", cuda_fns[fn].name, at,
           cu_error_name(result));
  scenario sc;
  scenario_init(&sc, weights);
  for (int p = 0; p < PH_COUNT; ++p) {
    int fired_before = g.fired, calls_before = g.calls[fn];
    flowgen_error err = {0};
    flowgen_status st = run_phase(&sc, (phase)p, &err);
    if (g.fired == fired_before) {
      if (st) problem("%s failed with no fault: %s", phase_names[p], err.message);
    } else {
      flowgen_status want = expected_status(fn, (phase)p);
      if (st != want) {
        problem("%s gave %s, expected %s (message: %s)", phase_names[p],
                flowgen_status_name(st), flowgen_status_name(want), err.message);
      } else if (st) {
        if (err.status != st) problem("err.status is %s", flowgen_status_name(err.status));
        if (!strstr(err.message, cuda_fns[fn].name) || !strstr(err.message, cu_error_name(result)))
          problem("%s: the message does not name %s and %s: %s", phase_names[p],
                  cuda_fns[fn].name, cu_error_name(result), err.message);
        if ((p == PH_OPEN && sc.rt) || (p == PH_CREATE && sc.s))
          problem("%s failed but returned an object", phase_names[p]);
        /* The fault was once: the same call now works. */
        memset(&err, 0, sizeof err);
        st = run_phase(&sc, (phase)p, &err);
        if (st) problem("%s after the fault: %s", phase_names[p], err.message);
      }
      if (fn == FN_cuModuleLoadData && expected_status(fn, (phase)p) == FLOWGEN_OK && !st &&
          (g.calls[fn] - calls_before != 2 ||
           (p == PH_CREATE && (sc.stats.disk_hit || sc.stats.compile_ms <= 0))))
        problem("a rejected cached image should be compiled afresh and loaded again "
                "(%d loads, disk_hit %d)", g.calls[fn] - calls_before, sc.stats.disk_hit);
    }
    if (st) break;
  }
  if (g.fired != 1) problem("the fault fired %d times", g.fired);
  scenario_finish(&sc);
  where[0] = '\0';
}

static void fault_every_call_in(phase target) {
  call_ranges r;
  record_clean_run(&r);
  int runs = 0, functions = 0;
  for (int fn = 0; fn < FN_COUNT; ++fn) {
    functions += r.first[target][fn] <= r.last[target][fn];
    for (int at = r.first[target][fn]; at <= r.last[target][fn]; ++at, ++runs)
      run_with_fault(fn, at);
  }
  if (runs == 0) fail_msg("%s makes no driver call", phase_names[target]);
  fprintf(stderr, "# %s: %d driver calls of %d functions, each failed once\n",
          phase_names[target], runs, functions);
  expect_no_problems();
}

/* ---- fixtures -------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  unsetenv("FLOWGEN_NVRTC");
  cache_dir = fg_test_mkdtemp();
  weights = fg_test_random_weights(64, 256, 1);
  small_weights = fg_test_random_weights(3, 5, 2);
  /* Warm the disk cache once: the loops then never wait for NVRTC. */
  mock_reset();
  nv_reset();
  fg_loader_reset();
  flowrt_options opts = {.cache_dir = cache_dir, .disk_cache = 1};
  flowrt_runtime *rt = NULL;
  flowrt_sampler *s = NULL, *small = NULL;
  flowgen_error err;
  flowgen_spec spec = spec_of(weights), small_spec = spec_of(small_weights);
  flowgen_status st = flowrt_open(&opts, &rt, &err);
  if (!st) st = flowrt_sampler_create(rt, &spec, weights, &s, &err);
  if (!st) st = flowrt_sampler_create(rt, &small_spec, small_weights, &small, &err);
  if (st) fprintf(stderr, "warming the cache: %s\n", err.message);
  flowrt_sampler_destroy(s);
  flowrt_sampler_destroy(small);
  flowrt_close(rt);
  fg_loader_reset();
  return st ? -1 : 0;
}

static int group_teardown(void **state) {
  (void)state;
  fg_loader_reset();
  mock_free_books();
  memset(&g, 0, sizeof g);
  flowrt_weights_free(weights);
  flowrt_weights_free(small_weights);
  fg_test_rmtree(cache_dir);
  free(cache_dir);
  return 0;
}

/* No driver or NVRTC loaded, clean books, no FLOWGEN_NVRTC. */
static void reset_fakes(void) {
  unsetenv("FLOWGEN_NVRTC");
  fg_loader_reset();
  mock_reset();
  nv_reset();
}

/* Each test starts from scratch: no driver or NVRTC loaded, clean books. */
static int setup(void **state) {
  (void)state;
  reset_fakes();
  problems_used = 0;
  problems[0] = '\0';
  where[0] = '\0';
  return 0;
}

static int teardown(void **state) {
  (void)state;
  reset_fakes();
  return 0;
}

/* Opens with a fresh fake driver; expects a failure with status and text. */
static void expect_open_fails(const flowrt_options *opts, flowgen_status want,
                              const char *text) {
  flowrt_runtime *rt = (flowrt_runtime *)&rt; /* must be reset to NULL */
  flowgen_error err = {0};
  flowgen_status st = flowrt_open(opts, &rt, &err);
  if (st != want)
    fail_msg("flowrt_open gave %s, expected %s: %s", flowgen_status_name(st),
             flowgen_status_name(want), err.message);
  assert_int_equal(err.status, want);
  assert_null(rt);
  expect_contains(err.message, text);
  fg_loader_reset();
  check_everything_released();
  expect_no_problems();
}

/* ---- (a)-(c) the driver is missing, too old, or sees no device ------------- */

static void test_no_driver(void **state) {
  (void)state;
  g.driver_absent = true;
  expect_open_fails(NULL, FLOWGEN_NO_DRIVER, "no CUDA driver found");
  /* dlerror's text, not "(null)". */
  g.driver_absent = true;
  flowrt_runtime *rt = NULL;
  flowgen_error err;
  assert_int_equal(flowrt_open(NULL, &rt, &err), FLOWGEN_NO_DRIVER);
  expect_contains(err.message, "libcuda.so.1");
  assert_null(strstr(err.message, "(null)"));
  assert_int_equal(flowgen_exit_code(err.status), 5);
}

static void test_driver_missing_a_symbol_is_too_old(void **state) {
  (void)state;
  for (int fn = 0; fn < FN_COUNT; ++fn) {
    mock_reset();
    g.hidden_symbol = cuda_fns[fn].symbol;
    char want[128];
    snprintf(want, sizeof want, "libcuda.so.1 has no %s", cuda_fns[fn].symbol);
    expect_open_fails(NULL, FLOWGEN_NO_DRIVER, "too old");
    mock_reset();
    g.hidden_symbol = cuda_fns[fn].symbol;
    flowrt_runtime *rt = NULL;
    flowgen_error err;
    assert_int_equal(flowrt_open(NULL, &rt, &err), FLOWGEN_NO_DRIVER);
    expect_contains(err.message, want);
    assert_int_equal(g.calls[FN_cuInit], 0);
    fg_loader_reset();
    check_everything_released();
    expect_no_problems();
  }
}

static void test_no_device(void **state) {
  (void)state;
  flowrt_options opts = {.disk_cache = 0};
  g.init_result = CUDA_ERROR_NO_DEVICE;
  expect_open_fails(&opts, FLOWGEN_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");

  mock_reset();
  g.device_count = 0;
  expect_open_fails(&opts, FLOWGEN_NO_DEVICE, "no CUDA device");

  mock_reset();
  opts.device = 1; /* there is only device 0 */
  expect_open_fails(&opts, FLOWGEN_NO_DEVICE, "no CUDA device 1");

  mock_reset();
  opts.device = -1;
  expect_open_fails(&opts, FLOWGEN_NO_DEVICE, "no CUDA device -1");
}

static void test_too_old_device(void **state) {
  (void)state;
  flowrt_options opts = {.disk_cache = 0};
  g.cc_major = 7;
  g.cc_minor = 0;
  expect_open_fails(&opts, FLOWGEN_UNSUPPORTED, "sm_70");
}

/* ---- (d) every driver call of every runtime function fails once ----------- */

/* The launch the runtime should make for batch rows of variant v. */
static void expect_launch(const fake_launch *l, const flowgen_variant *v, int64_t batch,
                          CUdeviceptr in, CUdeviceptr out) {
  assert_string_equal(l->name, v->symbol);
  /* "x = ceil(batch / rows_per_block) * cluster_blocks" (--describe) */
  assert_int_equal(l->grid, (batch + v->rows_per_block - 1) / v->rows_per_block *
                                v->cluster_blocks);
  assert_int_equal(l->block, v->block_threads);
  assert_int_equal(l->shared, v->shared_bytes);
  assert_int_equal(l->cluster, v->cluster_blocks);
  assert_int_equal(l->rows, batch);
  assert_null(l->stream);
  assert_true(l->in == in && l->out == out);
}

static void test_clean_run_uses_the_driver_correctly(void **state) {
  (void)state;
  scenario sc;
  scenario_init(&sc, weights);
  flowgen_error err = {0};
  for (int p = PH_OPEN; p <= PH_SAMPLE_HOST; ++p)
    if (run_phase(&sc, (phase)p, &err)) fail_msg("%s: %s", phase_names[p], err.message);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *tiled = flowgen_kernel_pick(k, SAMPLE_BATCH);
  const flowgen_variant *small = flowgen_kernel_pick(k, HOST_BATCH);
  int variants = flowgen_kernel_variant_count(k);
  assert_true(variants >= 2);
  assert_non_null(tiled);
  assert_non_null(small);
  assert_true(tiled->shared_bytes > 48 * 1024); /* the opt-in is exercised */
  assert_true(small->cluster_blocks > 1);       /* so is a cluster launch */
  assert_int_equal(g.retained, 1);
  assert_int_equal(g.calls[FN_cuInit], 1);
  /* The pack part, then the two variants launched, each on first use. */
  assert_int_equal(g.nmodules, 3);
  assert_false(g.modules[0].ptx); /* sm_90 is NVRTC's: a cubin */
  assert_true(sc.stats.disk_hit);
  assert_int_equal(g.calls[FN_cuModuleGetFunction], 1 + 2);
  /* Weights: six tensors copied once, then packed on the device. */
  const size_t D = (size_t)weights->dim, H = (size_t)weights->hidden;
  size_t floats = H * (D + 1) + H + H * H + H + D * H + D;
  size_t host_bytes = HOST_BATCH * D * sizeof(float);
  assert_int_equal(g.calls[FN_cuMemcpyHtoD], 6 + 1);
  assert_int_equal(g.htod_bytes, floats * sizeof(float) + host_bytes);
  assert_int_equal(g.nlaunches, 3); /* pack, sample, sample_host */
  assert_string_equal(g.launches[0].name, flowgen_kernel_variant(k, 0)->pack_symbol);
  expect_launch(&g.launches[1], tiled, SAMPLE_BATCH, sc.dev_x0, sc.dev_x);
  expect_launch(&g.launches[2], small, HOST_BATCH, g.launches[2].in, g.launches[2].in);
  /* No kernel ran, so the round trip gives x0 back: the copies line up. */
  assert_memory_equal(sc.x, sc.x0, host_bytes);
  assert_int_equal(g.dtoh_bytes, host_bytes);

  /* A second sampler of the same spec is a memory hit: no new module. */
  flowrt_sampler *again = NULL;
  assert_int_equal(flowrt_sampler_create(sc.rt, &sc.spec, weights, &again, &err), FLOWGEN_OK);
  assert_true(flowrt_sampler_stats(again)->memory_hit);
  assert_int_equal(g.nmodules, 3);
  assert_int_equal(g.calls[FN_cuModuleLoadData], 3);
  flowrt_sampler_destroy(again);

  /* batch 0 does nothing; a negative batch is refused without a call. */
  int launches = g.nlaunches;
  assert_int_equal(flowrt_sample(sc.s, sc.dev_x0, sc.dev_x, 0, NULL, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sample_host(sc.s, sc.x0, sc.x, 0, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sample(sc.s, sc.dev_x0, sc.dev_x, -1, NULL, &err), FLOWGEN_INVALID);
  assert_int_equal(g.nlaunches, launches);
  assert_int_equal(g.ctx_depth, 0);

  scenario_finish(&sc);
  expect_no_problems();
}

static void test_fault_in_open(void **state) {
  (void)state;
  fault_every_call_in(PH_OPEN);
}

static void test_fault_in_sampler_create(void **state) {
  (void)state;
  fault_every_call_in(PH_CREATE);
}

static void test_fault_in_sample(void **state) {
  (void)state;
  fault_every_call_in(PH_SAMPLE);
}

static void test_fault_in_sample_host(void **state) {
  (void)state;
  fault_every_call_in(PH_SAMPLE_HOST);
}

static void test_fault_in_sampler_destroy(void **state) {
  (void)state;
  fault_every_call_in(PH_DESTROY);
}

static void test_fault_in_close(void **state) {
  (void)state;
  fault_every_call_in(PH_CLOSE);
}

/* Opens and creates the scenario's sampler; returns the create status. */
static flowgen_status open_and_create(scenario *sc, flowgen_error *err) {
  flowgen_status st = run_phase(sc, PH_OPEN, err);
  if (st) fail_msg("flowrt_open: %s", err->message);
  return run_phase(sc, PH_CREATE, err);
}

/* A sampler of the default weights under tune, open and made. */
static void start_tuned(scenario *sc, const char *tune) {
  scenario_init(sc, weights);
  sc->opts.tune = tune;
  flowgen_error err = {0};
  if (open_and_create(sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
}

/* A cached image the driver rejects twice (cached, then freshly compiled). */
static void test_module_rejected_twice(void **state) {
  (void)state;
  scenario sc;
  scenario_init(&sc, small_weights);
  arm_fault(FN_cuModuleLoadData, 1, 2, CUDA_ERROR_INVALID_IMAGE);
  flowgen_error err = {0};
  assert_int_equal(open_and_create(&sc, &err), FLOWGEN_CUDA);
  expect_contains(err.message, "cuModuleLoadData");
  expect_contains(err.message, "CUDA_ERROR_INVALID_IMAGE");
  assert_int_equal(g.calls[FN_cuModuleLoadData], 2);
  assert_null(sc.s);
  scenario_finish(&sc);
  expect_no_problems();
}

/* Without a disk cache there is nothing to retry: the load error is final. */
static void test_module_rejected_without_disk_cache(void **state) {
  (void)state;
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  arm_fault(FN_cuModuleLoadData, 1, 1, CUDA_ERROR_NO_BINARY_FOR_GPU);
  flowgen_error err = {0};
  assert_int_equal(open_and_create(&sc, &err), FLOWGEN_CUDA);
  expect_contains(err.message, "cuModuleLoadData");
  expect_contains(err.message, "CUDA_ERROR_NO_BINARY_FOR_GPU");
  assert_int_equal(g.calls[FN_cuModuleLoadData], 1);
  assert_int_equal(run_phase(&sc, PH_CREATE, &err), FLOWGEN_OK);
  assert_false(sc.stats.disk_hit);
  scenario_finish(&sc);
  expect_no_problems();
}

/* An error code the driver cannot name still gives a readable message. */
static void test_unnamed_error_code(void **state) {
  (void)state;
  scenario sc;
  scenario_init(&sc, weights);
  flowgen_error err = {0};
  assert_int_equal(open_and_create(&sc, &err), FLOWGEN_OK);
  arm_fault(FN_cuMemAlloc, g.calls[FN_cuMemAlloc] + 1, 1, (CUresult)12345);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_CUDA);
  expect_contains(err.message, "cuMemAlloc");
  expect_contains(err.message, "CUDA_ERROR_UNKNOWN");
  expect_contains(err.message, "12345");
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  scenario_finish(&sc);
  expect_no_problems();
}

/* A device newer than NVRTC's newest target gets PTX, which the driver
 * compiles; the fake driver checks it is PTX and has the kernels. */
static void test_newer_device_gets_ptx(void **state) {
  (void)state;
  g.cc_major = 99;
  g.cc_minor = 0;
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  flowgen_error err = {0};
  if (open_and_create(&sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
  assert_int_equal(g.nmodules, 1);
  assert_true(g.modules[0].ptx);
  /* the packing kernel; a variant's kernel with its first launch */
  assert_int_equal(g.calls[FN_cuModuleGetFunction], 1);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(g.nmodules, 2);
  assert_true(g.modules[1].ptx);
  assert_int_equal(g.calls[FN_cuModuleGetFunction], 2);
  scenario_finish(&sc);
  expect_no_problems();
}

/* Clusters of 16 blocks need the non-portable opt-in (cuFuncSetAttribute);
 * each of those calls fails once in turn, as in the loops above. */
static void test_cluster_of_16_blocks(void **state) {
  (void)state;
  scenario sc;
  start_tuned(&sc, "cluster.blocks=16");
  flowgen_error err = {0};
  const flowgen_variant *v = flowgen_kernel_pick(flowrt_sampler_kernel(sc.s), HOST_BATCH);
  assert_int_equal(v->cluster_blocks, 16);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(g.launches[g.nlaunches - 1].cluster, 16);
  scenario_finish(&sc);
  expect_no_problems();
  /* the variant's module is loaded with its first launch */
  fault_every_call_in(PH_SAMPLE_HOST);
}

/* A grid variant is one cooperative launch of a block per SM (the fake
 * device has 132), whatever the batch. */
static void test_grid_is_a_cooperative_launch(void **state) {
  (void)state;
  scenario sc;
  start_tuned(&sc, "only=grid:tiled8:tiled");
  flowgen_error err = {0};
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *v = flowgen_kernel_pick(k, HOST_BATCH);
  assert_int_equal(strncmp(v->strategy, "grid_b", 6), 0);
  assert_int_equal(v->grid_blocks_per_sm, 1);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  const fake_launch *l = &g.launches[g.nlaunches - 1];
  assert_string_equal(l->name, v->symbol);
  assert_true(l->cooperative);
  assert_int_equal(l->grid, 132);
  assert_int_equal(l->cluster, 1);
  assert_int_equal(l->block, v->block_threads);
  assert_int_equal(l->shared, v->shared_bytes);
  assert_int_equal(l->rows, HOST_BATCH);
  /* The other launches are not cooperative. */
  for (int i = 0; i + 1 < g.nlaunches; ++i) assert_false(g.launches[i].cooperative);
  scenario_finish(&sc);
  expect_no_problems();
  fault_every_call_in(PH_SAMPLE_HOST);
}

/* Samples HOST_BATCH rows on the host: the grid launch is refused (room for
 * g.cooperative_max blocks), then `fallback` serves, not cooperatively. */
static void expect_fallback(scenario *sc, const flowgen_variant *fallback) {
  flowgen_error err = {0};
  int calls = g.calls[FN_cuLaunchKernelEx];
  assert_int_equal(run_phase(sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(g.calls[FN_cuLaunchKernelEx], calls + 2); /* refused, then the fallback */
  const fake_launch *l = &g.launches[g.nlaunches - 1];
  expect_launch(l, fallback, HOST_BATCH, l->in, l->in);
  assert_false(l->cooperative);
}

/* The gemm variant (last but for the batches it leaves to others) is a
 * cooperative grid too: refused, the first variant that is not a grid
 * serves, here one before it. */
static void test_gemm_falls_back_when_not_resident(void **state) {
  (void)state;
  g.cooperative_max = 100;
  scenario sc;
  start_tuned(&sc, "only=cluster:gemm,gemm=4:");
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *gemm = flowgen_kernel_pick(k, HOST_BATCH);
  assert_string_equal(gemm->strategy, "gemm");
  assert_int_equal(gemm->grid_blocks_per_sm, 1);
  const flowgen_variant *fallback = flowgen_kernel_variant(k, 0);
  assert_int_equal(fallback->grid_blocks_per_sm, 0);
  assert_true(fallback < gemm);
  expect_fallback(&sc, fallback);
  scenario_finish(&sc);
  expect_no_problems();
}

/* Where gemm on wgmma follows the tiled kernel's split (bf16 on sm_90a,
 * H=1024), the split serves no batch of its own: it is the plan's first
 * variant, at batch 0, which launches nothing, and the grids' fallback,
 * which serves their batch when their launch is refused. */
static void test_fallback_alone_serves_a_refused_grid(void **state) {
  (void)state;
  nv.stand_in = true; /* the plan, not a real compile, is what matters */
  g.cooperative_max = 100;
  flowrt_weights *wide = fg_test_random_weights(64, 1024, 3);
  scenario sc;
  scenario_init(&sc, wide);
  sc.spec.precision = FLOWGEN_PRECISION_BF16;
  flowgen_error err = {0};
  if (open_and_create(&sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *fallback = flowgen_kernel_variant(k, 0);
  assert_string_equal(fallback->strategy, "tiled8c8");
  assert_int_equal(fallback->min_batch, 0);
  assert_int_equal(fallback->max_batch, 0);
  assert_ptr_equal(flowgen_kernel_pick(k, 0), fallback);
  const flowgen_variant *grid = flowgen_kernel_pick(k, HOST_BATCH);
  assert_true(grid->cooperative);
  assert_ptr_equal(flowgen_kernel_variant(k, grid->fallback), fallback);
  /* gemm_b1024 and gemm, persistent grids too, fall back on it as well */
  const flowgen_variant *small = flowgen_kernel_pick(k, 65), *gemm = flowgen_kernel_pick(k, 1025);
  assert_string_equal(small->strategy, "gemm_b1024");
  assert_string_equal(gemm->strategy, "gemm");
  assert_true(small->cooperative && gemm->cooperative);
  assert_ptr_equal(flowgen_kernel_variant(k, small->fallback), fallback);
  assert_ptr_equal(flowgen_kernel_variant(k, gemm->fallback), fallback);
  /* batch 0: nothing launched */
  int calls = g.calls[FN_cuLaunchKernelEx];
  assert_int_equal(flowrt_sample_host(sc.s, sc.x0, sc.x, 0, &err), FLOWGEN_OK);
  assert_int_equal(g.calls[FN_cuLaunchKernelEx], calls);
  expect_fallback(&sc, fallback);
  scenario_finish(&sc);
  flowrt_weights_free(wide);
  expect_no_problems();
}

/* Where the grid cannot be resident at once (here: room for 100 of the 132
 * blocks, as under MPS), the first variant that is not a grid serves. */
static void test_grid_falls_back_when_not_resident(void **state) {
  (void)state;
  g.cooperative_max = 100;
  scenario sc;
  start_tuned(&sc, "only=grid:tiled8:tiled");
  flowgen_error err = {0};
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *grid = flowgen_kernel_pick(k, HOST_BATCH), *fallback = NULL;
  assert_int_equal(grid->grid_blocks_per_sm, 1);
  for (int i = 0; i < flowgen_kernel_variant_count(k) && !fallback; ++i)
    if (flowgen_kernel_variant(k, i)->grid_blocks_per_sm == 0) fallback = flowgen_kernel_variant(k, i);
  assert_non_null(fallback);
  expect_fallback(&sc, fallback);
  /* Any other launch error is the caller's, with no second try. */
  arm_fault(FN_cuLaunchKernelEx, g.calls[FN_cuLaunchKernelEx] + 1, 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  int calls = g.calls[FN_cuLaunchKernelEx];
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_CUDA);
  expect_contains(err.message, "cuLaunchKernelEx");
  expect_contains(err.message, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  assert_int_equal(g.calls[FN_cuLaunchKernelEx], calls + 1);
  scenario_finish(&sc);
  expect_no_problems();
}

/* ---- (e) NVRTC: missing, too old, failing ------------------------------- */

static const char tiny_source[] = "extern \"C\" __global__ void k(float *x) { x[0] = 1; }\n";

static flowgen_status compile(flowrt_target target, void **image, size_t *size,
                              flowgen_error *err) {
  return flowrt_compile(tiny_source, sizeof tiny_source - 1, "flow.cu", 90, target,
                        false, image, size, NULL, err);
}

static void test_nvrtc_missing(void **state) {
  (void)state;
  setenv("FLOWGEN_NVRTC", "/nonexistent/libnvrtc.so", 1);
  void *image = (void *)tiny_source;
  size_t size = 1;
  flowgen_error err = {0};
  assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_NO_NVRTC);
  expect_contains(err.message, "/nonexistent/libnvrtc.so");
  expect_contains(err.message, "FLOWGEN_NVRTC");
  assert_null(image);
  assert_int_equal(size, 0);
  assert_int_equal(flowrt_nvrtc_version(), 0);
  assert_int_equal(flowrt_nvrtc_max_arch(), 0);
  assert_int_equal(flowgen_exit_code(err.status), 4);

  /* The runtime needs NVRTC to choose its target: open fails, and releases
   * what it took from the driver. */
  flowrt_options opts = {.disk_cache = 0};
  expect_open_fails(&opts, FLOWGEN_NO_NVRTC, "/nonexistent/libnvrtc.so");
}

static void test_nvrtc_missing_a_symbol_is_too_old(void **state) {
  (void)state;
  nv.fake = true;
  g.hidden_symbol = "nvrtcGetCUBIN";
  void *image = NULL;
  size_t size = 0;
  flowgen_error err = {0};
  assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_NO_NVRTC);
  expect_contains(err.message, "too old");
  expect_contains(err.message, "nvrtcGetCUBIN");
  assert_null(image);
  fg_loader_reset();
  check_everything_released();
  expect_no_problems();
}

static void test_nvrtc_compile_error_gives_the_log(void **state) {
  (void)state;
  nv.fake = true;
  nv_arm_fault(NV_nvrtcCompileProgram, 1, 2, NVRTC_ERROR_COMPILATION);
  void *image = NULL;
  size_t size = 0;
  char *log = (char *)tiny_source;
  flowgen_error err = {0};
  flowgen_status st = flowrt_compile(tiny_source, sizeof tiny_source - 1, "flow.cu", 90,
                                     FLOWRT_TARGET_CUBIN, true, &image, &size, &log, &err);
  assert_int_equal(st, FLOWGEN_COMPILE);
  assert_int_equal(err.status, FLOWGEN_COMPILE);
  expect_contains(err.message, "flow.cu");
  expect_contains(err.message, "sm_90");
  expect_contains(err.message, "identifier \"bogus_symbol\" is undefined");
  expect_contains(err.message, "1 error detected");
  assert_null(image);
  assert_null(log);
  assert_int_equal(flowgen_exit_code(st), 4);

  /* Through a sampler: the same error, no module loaded, nothing held. */
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  assert_int_equal(open_and_create(&sc, &err), FLOWGEN_COMPILE);
  expect_contains(err.message, "bogus_symbol");
  assert_int_equal(g.calls[FN_cuModuleLoadData], 0);
  assert_null(sc.s);
  scenario_finish(&sc);
  expect_no_problems();
}

static void test_nvrtc_get_cubin_fails(void **state) {
  (void)state;
  nv.fake = true;
  nv_arm_fault(NV_nvrtcGetCUBIN, 1, 1, NVRTC_ERROR_INTERNAL_ERROR);
  void *image = NULL;
  size_t size = 0;
  flowgen_error err = {0};
  assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_COMPILE);
  expect_contains(err.message, "nvrtcGetCUBIN");
  expect_contains(err.message, "NVRTC_ERROR_INTERNAL_ERROR");
  assert_null(image);
  /* Out of memory is NOMEM. */
  nv_arm_fault(NV_nvrtcCreateProgram, nv.calls[NV_nvrtcCreateProgram] + 1, 1,
               NVRTC_ERROR_OUT_OF_MEMORY);
  assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_NOMEM);
  expect_contains(err.message, "nvrtcCreateProgram");
  /* Then it works, and the options asked for sm_90a / compute_90a (sm_90's
   * arch-specific target: wgmma). */
  assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_OK);
  assert_int_equal(size, sizeof(Elf64_Ehdr));
  assert_string_equal(nv.programs[nv.nprograms - 1].arch_option, "sm_90a");
  free(image);
  assert_int_equal(compile(FLOWRT_TARGET_PTX, &image, &size, &err), FLOWGEN_OK);
  assert_string_equal(image, fake_ptx);
  assert_string_equal(nv.programs[nv.nprograms - 1].arch_option, "compute_90a");
  free(image);
  fg_loader_reset();
  check_everything_released();
  expect_no_problems();
}

/* A tune the planner refuses (an unknown key): sampler creation fails
 * naming it, before any compile or module load, holding nothing. */
static void test_unknown_tune_key_refused(void **state) {
  (void)state;
  nv.fake = true;
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  sc.opts.tune = "cluster.blocks=4,bogus=1";
  flowgen_error err = {0};
  assert_int_equal(open_and_create(&sc, &err), FLOWGEN_UNSUPPORTED);
  expect_contains(err.message, "unknown key bogus");
  assert_null(sc.s);
  assert_int_equal(nv.calls[NV_nvrtcCompileProgram], 0);
  assert_int_equal(g.calls[FN_cuModuleLoadData], 0);
  scenario_finish(&sc);
  expect_no_problems();
}

/* Tuning is the caller's explicit choice: a FLOWGEN_TUNE in the
 * environment (once read by the runtime) changes nothing, not even when
 * the planner would refuse it. */
static void test_environment_does_not_tune(void **state) {
  (void)state;
  setenv("FLOWGEN_TUNE", "cluster.blocks=4,bogus=1", 1);
  scenario sc;
  scenario_init(&sc, small_weights); /* its module is in the warm disk cache */
  flowgen_error err = {0};
  flowgen_status st = open_and_create(&sc, &err);
  unsetenv("FLOWGEN_TUNE");
  if (st) fail_msg("flowrt_sampler_create: %s", err.message);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  flowgen_kernel *plain = NULL; /* the same spec, as the runtime resolved it */
  flowgen_options plan = {.part = FLOWGEN_PART_PLAN};
  assert_int_equal(flowgen_generate(flowgen_kernel_spec(k), &plan, &plain, NULL), FLOWGEN_OK);
  char *used = flowgen_kernel_describe(k), *untuned = flowgen_kernel_describe(plain);
  assert_string_equal(used, untuned);
  free(used);
  free(untuned);
  flowgen_kernel_free(plain);
  scenario_finish(&sc);
  expect_no_problems();
}

/* ---- the device the planner is told of ---------------------------------- */

/* A template folder whose plan is one kernel and whose source shows
 * spec.device as the planner got it.  malloc()ed; fg_test_rmtree it. */
static char *device_echo_templates(void) {
  return fg_test_echo_templates(
      "| local d = spec.device\n"
      "// sms=$(tostring(d.sms)) shared=$(tostring(d.shared_per_block)) "
      "clusters=$(tostring(d.clusters)) at_once=$(tostring(d.clusters_at_once))\n"
      "extern \"C\" __global__ void echo_k(const float *x0, float *x, long long rows,\n"
      "                                    const float *params) {}\n"
      "extern \"C\" __global__ void echo_pack(const float *w1, const float *b1,\n"
      "    const float *w2, const float *b2, const float *w3, const float *b3,\n"
      "    float *params) {}\n");
}

/* Opens a runtime over the echo templates with `figures`, makes a sampler
 * and expects its source to show `echo`. */
static void expect_device_echo(const char *dir, const flowgen_device *figures, const char *echo) {
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  sc.opts.template_dir = dir;
  if (figures) sc.opts.device_figures = *figures;
  flowgen_error err = {0};
  if (open_and_create(&sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
  const char *source = flowgen_kernel_source(flowrt_sampler_kernel(sc.s));
  if (strncmp(source, echo, strlen(echo)) != 0) fail_msg("expected '%s', got: %.120s", echo, source);
  scenario_finish(&sc);
  expect_no_problems();
}

/* The runtime tells the planner what the device query says (SMs, the
 * shared memory a block may opt in to, cluster launches), with what the
 * caller's device_figures replace; figures out of range are refused before
 * any driver call. */
static void test_device_query_reaches_the_planner(void **state) {
  (void)state;
  char *dir = device_echo_templates();
  nv.stand_in = true; /* the source, not a real compile, is what matters */
  g.sms = 66;
  expect_device_echo(dir, NULL, "// sms=66 shared=232448 clusters=true at_once=nil\n");
  flowgen_device figures = {.sms = 100, .clusters = -1};
  expect_device_echo(dir, &figures, "// sms=100 shared=232448 clusters=false at_once=nil\n");
  figures = (flowgen_device){.shared_per_block = 101376};
  g.cc_major = 8; /* no clusters there */
  expect_device_echo(dir, &figures, "// sms=66 shared=101376 clusters=false at_once=nil\n");

  static const struct {
    flowgen_device figures;
    const char *field;
  } bad[] = {
      {{.sms = -1}, "device_figures.sms"},
      {{.sms = FLOWGEN_DEVICE_SMS_MAX + 1}, "device_figures.sms"},
      {{.shared_per_block = -4}, "device_figures.shared_per_block"},
      {{.clusters = 2}, "device_figures.clusters"},
      {{.clusters_at_once = {0, -30}}, "device_figures.clusters_at_once[1]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    flowrt_options opts = {.disk_cache = 0, .device_figures = bad[i].figures};
    flowrt_runtime *rt = NULL;
    flowgen_error err = {0};
    int calls = g.calls[FN_cuInit];
    assert_int_equal(flowrt_open(&opts, &rt, &err), FLOWGEN_INVALID);
    assert_null(rt);
    expect_contains(err.message, bad[i].field);
    assert_int_equal(g.calls[FN_cuInit], calls);
  }
  fg_test_rmtree(dir);
  free(dir);
  expect_no_problems();
}

/* ---- the launch description ----------------------------------------------- */

/* The runtime launches as each variant's description says rather than
 * deriving it from the launch shape: here a persistent grid whose fallback
 * is the last variant (not the first that is not a grid), and that one a
 * cluster of 16 blocks, with the non-portable opt-in it asks for. */
static void test_launch_follows_the_description(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  fg_test_write_template(
      dir, "plan.lua",
      "local function variant(symbol, fields)\n"
      "  local v = {strategy = symbol, symbol = symbol, pack_symbol = 'echo_pack',\n"
      "    min_batch = 0, max_batch = -1, block_threads = 32, rows_per_block = 1,\n"
      "    cluster_blocks = 1, shared_bytes = 0, params_bytes = 4, pack_threads = 32}\n"
      "  for k, x in pairs(fields) do v[k] = x end\n"
      "  return v\n"
      "end\n"
      "return function(spec)\n"
      "  return {template = 'file.cut', variants = {\n"
      "    variant('echo_grid', {grid_blocks_per_sm = 1, cooperative = true, fallback = 3}),\n"
      "    variant('echo_a', {}),\n"
      "    variant('echo_b', {rows_per_block = 2, cluster_blocks = 16,\n"
      "                       nonportable_cluster = true})}}\n"
      "end\n");
  fg_test_write_template(
      dir, "file.cut",
      "| for _, name in ipairs({'echo_grid', 'echo_a', 'echo_b'}) do\n"
      "extern \"C\" __global__ void $(name)(const float *x0, float *x, long long rows,\n"
      "                                   const float *params) {}\n"
      "| end\n"
      "extern \"C\" __global__ void echo_pack(const float *w1, const float *b1,\n"
      "    const float *w2, const float *b2, const float *w3, const float *b3,\n"
      "    float *params) {}\n");
  nv.stand_in = true;
  g.cooperative_max = 100; /* 132 SMs, room for 100 blocks: the grid is refused */
  scenario sc;
  scenario_init(&sc, small_weights);
  sc.opts.disk_cache = 0;
  sc.opts.template_dir = dir;
  flowgen_error err = {0};
  if (open_and_create(&sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  const flowgen_variant *grid = flowgen_kernel_variant(k, 0), *last = flowgen_kernel_variant(k, 2);
  assert_true(grid->cooperative);
  assert_int_equal(grid->fallback, 2);
  assert_false(flowgen_kernel_variant(k, 1)->nonportable_cluster);
  assert_true(last->nonportable_cluster);
  assert_int_equal(flowgen_kernel_pick(k, HOST_BATCH), grid);
  int calls = g.calls[FN_cuLaunchKernelEx];
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(g.calls[FN_cuLaunchKernelEx], calls + 2); /* refused, then the fallback */
  const fake_launch *l = &g.launches[g.nlaunches - 1];
  expect_launch(l, last, HOST_BATCH, l->in, l->in);
  assert_false(l->cooperative);
  scenario_finish(&sc);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

/* ---- the model family: pack, conditioning, workspace --------------------- */

/* A template folder whose plan is one kernel of the family's interface
 * (the rendering is the templates' business; the runtime's is the symbols
 * and the arguments): <name>_k, <name>_pack with a Tensors struct, and
 * <name>_cond for a conditional model.  malloc()ed; fg_test_rmtree it. */
static char *family_echo_templates(void) {
  char *dir = fg_test_mkdtemp();
  fg_test_write_template(
      dir, "plan.lua",
      "return function(spec)\n"
      "  return {template = 'file.cut', variants = {{strategy = 'echo',\n"
      "    symbol = spec.symbol .. '_k', pack_symbol = spec.symbol .. '_pack',\n"
      "    min_batch = 0, max_batch = -1, block_threads = 32, rows_per_block = 2,\n"
      "    cluster_blocks = 1, shared_bytes = 0, params_bytes = 256, pack_threads = 64,\n"
      "    cond_threads = spec.cond > 0 and 128 or 0, cond_blocks_per_sm = 3}}}\n"
      "end\n");
  fg_test_write_template(
      dir, "file.cut",
      "| local L = spec.layers\n"
      "struct Tensors { const float* w[$(L)]; const float* b[$(L)]; };\n"
      "extern \"C\" __global__ void $(spec.symbol)_pack(const Tensors tensors, float* params) {}\n"
      "| if spec.cond > 0 then\n"
      "extern \"C\" __global__ void $(spec.symbol)_cond(const float* cond, const float* null_cond,\n"
      "    long long batch, const float* params, float* cond_bias) {}\n"
      "extern \"C\" __global__ void $(spec.symbol)_k(const float* x0, float* x, long long batch,\n"
      "    const float* params, const float* cond_bias, float guidance) {}\n"
      "| else\n"
      "extern \"C\" __global__ void $(spec.symbol)_k(const float* x0, float* x, long long batch,\n"
      "    const float* params) {}\n"
      "| end\n");
  return dir;
}

/* A scenario over the family's echo templates for the model `fields`
 * (flag, value pairs ending with NULL). */
static flowrt_weights *family_scenario(scenario *sc, const char *dir, const char *const *fields) {
  flowgen_spec model = fg_test_spec(3, 5, 2, 90);
  for (; *fields; fields += 2)
    assert_int_equal(flowgen_spec_set(&model, fields[0], fields[1], NULL), FLOWGEN_OK);
  flowrt_weights *w = fg_test_random_model(&model, 9, 1.0f);
  assert_non_null(w);
  scenario_init(sc, w);
  flowrt_weights_model(w, &sc->spec);
  sc->spec.guidance = model.guidance;
  sc->opts.disk_cache = 0;
  sc->opts.template_dir = dir;
  nv.stand_in = true;
  flowgen_error err = {0};
  if (open_and_create(sc, &err)) fail_msg("flowrt_sampler_create: %s", err.message);
  return w;
}

static fake_alloc *alloc_at(CUdeviceptr p) {
  fake_alloc *a = find_alloc(p, 1);
  if (!a) fail_msg("0x%llx is not device memory", (unsigned long long)p);
  return a;
}

static int total_calls(void) {
  int n = 0;
  for (int f = 0; f < FN_COUNT; ++f) n += g.calls[f];
  return n;
}

/* The pack kernel gets the layers as a Tensors struct (the mock compares
 * each with the host weights); each sample launches <name>_cond on the
 * conditioning, into the sampler's workspace, then the sampling kernel
 * with that workspace and the guidance weight. */
static void test_family_launches(void **state) {
  (void)state;
  char *dir = family_echo_templates();
  static const char *const fields[] = {"cond", "2", "layers", "4", "act", "gelu",
                                       "time", "sin:4", "input", "c,x,t", "guidance", "1",
                                       NULL};
  scenario sc;
  flowrt_weights *w = family_scenario(&sc, dir, fields);
  const flowgen_variant *v = flowgen_kernel_variant(flowrt_sampler_kernel(sc.s), 0);
  assert_string_equal(v->pack_symbol, "flow_d3_h5_s1_fp32_c2_l4_gelu_sin4_cxt_cfg_pack");
  assert_int_equal(g.nlaunches, 1); /* the pack */
  assert_int_equal(flowrt_sampler_workspace_bytes(sc.s, 4), 4 * 2 * 5 * sizeof(float));

  float cond[HOST_BATCH * 2], null_cond[2] = {0.25f, -0.5f};
  fg_test_fill_uniform(cond, HOST_BATCH * 2, 3, 1.0f);
  flowgen_error err = {0};
  if (flowrt_sample_host_cond(sc.s, sc.x0, sc.x, cond, null_cond, 2.5f, HOST_BATCH, &err))
    fail_msg("%s", err.message);
  assert_int_equal(g.nlaunches, 3);
  const fake_launch *c = &g.launches[1], *k = &g.launches[2];
  assert_string_equal(c->name, "flow_d3_h5_s1_fp32_c2_l4_gelu_sin4_cxt_cfg_cond");
  assert_int_equal(c->rows, HOST_BATCH);
  assert_int_equal(c->block, 128); /* as the plan describes it */
  assert_int_equal(c->grid, 3 * 132); /* 3 blocks an SM (the fake's 132), whatever the batch */
  assert_memory_equal(c->cond_head, cond, sizeof cond);
  assert_memory_equal(c->null_head, null_cond, sizeof null_cond);
  fake_alloc *workspace = alloc_at(c->cond_bias);
  assert_int_equal(workspace->size, HOST_BATCH * 2 * 5 * sizeof(float));
  assert_string_equal(k->name, v->symbol);
  assert_int_equal(k->rows, HOST_BATCH);
  assert_true(k->cond_bias == c->cond_bias);
  assert_true(k->guidance == 2.5f);
  assert_true(k->params == c->params);

  /* Device pointers: no null conditioning (0: zeros). */
  CUdeviceptr dev_cond = user_alloc(SAMPLE_BATCH * 2 * sizeof(float));
  if (flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, HOST_BATCH, NULL, &err))
    fail_msg("%s", err.message);
  c = &g.launches[g.nlaunches - 2];
  assert_true(c->cond == dev_cond && c->null_cond == 0);
  assert_true(g.launches[g.nlaunches - 1].guidance == 1.0f);
  scenario_finish(&sc);
  flowrt_weights_free(w);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

/* The workspace grows with the batch (the old one freed once the device is
 * idle), never inside graph capture: there a launch that would need more is
 * refused before any launch, naming flowrt_sampler_reserve; after the
 * reserve, capture launches allocate nothing. */
static void test_family_workspace(void **state) {
  (void)state;
  char *dir = family_echo_templates();
  static const char *const fields[] = {"cond", "3", NULL};
  scenario sc;
  flowrt_weights *w = family_scenario(&sc, dir, fields);
  CUdeviceptr dev_cond = user_alloc(SAMPLE_BATCH * 3 * sizeof(float));
  flowgen_error err = {0};
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 4, NULL, &err),
                   FLOWGEN_OK);
  CUdeviceptr first = g.launches[g.nlaunches - 1].cond_bias;
  assert_int_equal(alloc_at(first)->size, 4 * 5 * sizeof(float)); /* H a row, unguided */
  /* Smaller: the same buffer, no driver call but the two launches. */
  int calls = total_calls(), syncs = g.calls[FN_cuCtxSynchronize];
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 3, NULL, &err),
                   FLOWGEN_OK);
  assert_int_equal(total_calls() - calls, 2 + 2); /* push, 2 launches, pop */
  assert_true(g.launches[g.nlaunches - 1].cond_bias == first);
  /* Larger: grown, the old one freed after a synchronize. */
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 9, NULL, &err),
                   FLOWGEN_OK);
  CUdeviceptr grown = g.launches[g.nlaunches - 1].cond_bias;
  assert_true(grown != first);
  assert_true(alloc_at(grown)->size == 9 * 5 * sizeof(float));
  assert_true(find_alloc(first, 1) == NULL); /* freed */
  assert_int_equal(g.calls[FN_cuCtxSynchronize], syncs + 1);
  /* Reserve, then capture. */
  assert_int_equal(flowrt_sampler_reserve(sc.s, 20, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_reserve(sc.s, 10, &err), FLOWGEN_OK); /* holds 20 */
  g.capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  int allocs = g.calls[FN_cuMemAlloc], launches = g.nlaunches;
  CUstream stream = (CUstream)(uintptr_t)0x5000;
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 20, stream, &err),
                   FLOWGEN_OK);
  assert_int_equal(g.calls[FN_cuMemAlloc], allocs);
  assert_int_equal(g.nlaunches, launches + 2);
  assert_true(g.launches[g.nlaunches - 2].stream == stream);
  assert_true(g.launches[g.nlaunches - 1].stream == stream);
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 21, stream, &err),
                   FLOWGEN_INVALID);
  expect_contains(err.message, "batch 21 needs a workspace of 420 bytes");
  expect_contains(err.message, "during CUDA graph capture");
  expect_contains(err.message, "flowrt_sampler_reserve(sampler, 21)");
  assert_int_equal(g.calls[FN_cuMemAlloc], allocs);
  assert_int_equal(g.nlaunches, launches + 2);
  assert_int_equal(g.ctx_depth, 0);
  g.capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  assert_int_equal(flowrt_sample_cond(sc.s, sc.dev_x0, sc.dev_x, dev_cond, 0, 1.0f, 21, stream, &err),
                   FLOWGEN_OK);
  /* Unconditional samplers have no workspace. */
  assert_int_equal(flowrt_sampler_reserve(sc.s, -1, &err), FLOWGEN_INVALID);
  assert_int_equal(flowrt_sampler_workspace_bytes(sc.s, 0), 0);
  scenario_finish(&sc); /* the workspace is freed with the sampler */
  flowrt_weights_free(w);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

/* Arguments that do not fit the sampler are refused before any driver
 * call; a model of the family without conditioning packs a Tensors struct
 * and launches its sampling kernel alone. */
static void test_family_argument_checks(void **state) {
  (void)state;
  char *dir = family_echo_templates();
  static const char *const cond_fields[] = {"cond", "2", NULL};
  static const char *const guided_fields[] = {"cond", "2", "guidance", "1", NULL};
  static const char *const plain_fields[] = {"layers", "2", "act", "relu", NULL};
  scenario cs, gs, ps;
  flowrt_weights *cw = family_scenario(&cs, dir, cond_fields);
  flowrt_weights *gw = family_scenario(&gs, dir, guided_fields);
  flowrt_weights *pw = family_scenario(&ps, dir, plain_fields);
  CUdeviceptr cond = user_alloc(64 * sizeof(float)), null_cond = user_alloc(8);
  float host_cond[2 * 4] = {0, 1, 2, 3, 4, NAN, 6, 7}, host_null[2] = {INFINITY, 0};
  static const struct {
    int which;
    flowgen_status status;
    const char *needle;
  } cases[] = {
      {0, FLOWGEN_INVALID, "the model is conditional (C=2): give cond, a device pointer to batch x 2 floats"},
      {1, FLOWGEN_INVALID, "the model is conditional (C=2)"},
      {2, FLOWGEN_INVALID, "cond given, but the model has no conditioning (C=0)"},
      {3, FLOWGEN_INVALID, "guidance 3, but the sampler's spec has no guidance"},
      {4, FLOWGEN_INVALID, "guidance nan is not finite"},
      {5, FLOWGEN_INVALID, "null_cond given, but the sampler's spec has no guidance"},
      {6, FLOWGEN_INPUT, "cond: row 2, column 1 is nan (the conditioning must be finite)"},
      {7, FLOWGEN_INPUT, "null_cond: row 0, column 0 is inf"},
      {8, FLOWGEN_INVALID, "null_cond given, but the model has no conditioning (C=0)"},
      {9, FLOWGEN_INVALID, "batch -1 is negative"},
      {10, FLOWGEN_INVALID, "guidance -inf is not finite"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_error err = {0};
    int calls = total_calls();
    flowgen_status st = FLOWGEN_OK;
    switch (cases[i].which) {
    case 0: st = flowrt_sample_cond(cs.s, cs.dev_x0, cs.dev_x, 0, 0, 1.0f, 4, NULL, &err); break;
    case 1: st = flowrt_sample(cs.s, cs.dev_x0, cs.dev_x, 4, NULL, &err); break;
    case 2: st = flowrt_sample_cond(ps.s, ps.dev_x0, ps.dev_x, cond, 0, 1.0f, 4, NULL, &err); break;
    case 3: st = flowrt_sample_cond(cs.s, cs.dev_x0, cs.dev_x, cond, 0, 3.0f, 4, NULL, &err); break;
    case 4: st = flowrt_sample_cond(gs.s, gs.dev_x0, gs.dev_x, cond, 0, NAN, 4, NULL, &err); break;
    case 5: st = flowrt_sample_cond(cs.s, cs.dev_x0, cs.dev_x, cond, null_cond, 1.0f, 4, NULL, &err); break;
    case 6: st = flowrt_sample_host_cond(cs.s, cs.x0, cs.x, host_cond, NULL, 1.0f, 4, &err); break;
    case 7: st = flowrt_sample_host_cond(gs.s, gs.x0, gs.x, host_cond, host_null, 2.0f, 2, &err); break;
    case 8: st = flowrt_sample_cond(ps.s, ps.dev_x0, ps.dev_x, 0, null_cond, 1.0f, 4, NULL, &err); break;
    case 9: st = flowrt_sample_cond(cs.s, cs.dev_x0, cs.dev_x, cond, 0, 1.0f, -1, NULL, &err); break;
    case 10: st = flowrt_sample_host_cond(gs.s, gs.x0, gs.x, host_cond, NULL, -INFINITY, 1, &err); break;
    }
    if (st != cases[i].status || !strstr(err.message, cases[i].needle))
      fail_msg("case %zu: %s '%s', want %s '%s'", i, flowgen_status_name(st), err.message,
               flowgen_status_name(cases[i].status), cases[i].needle);
    assert_int_equal(total_calls(), calls);
  }
  /* Batch 0 does nothing, whatever the conditioning. */
  int calls = total_calls();
  assert_int_equal(flowrt_sample_cond(cs.s, 0, 0, cond, 0, 1.0f, 0, NULL, NULL), FLOWGEN_OK);
  assert_int_equal(total_calls(), calls);
  /* The unconditional member: no cond kernel, four arguments. */
  int launches = g.nlaunches;
  flowgen_error err = {0};
  if (flowrt_sample_host(ps.s, ps.x0, ps.x, HOST_BATCH, &err)) fail_msg("%s", err.message);
  assert_int_equal(g.nlaunches, launches + 1);
  assert_true(ends_with(g.launches[g.nlaunches - 1].name, "_relu_k"));
  g.expect_weights = NULL;
  /* All three on one fake driver: closed before it is unloaded. */
  scenario *all[] = {&gs, &ps};
  for (int i = 0; i < 2; ++i) {
    flowrt_sampler_destroy(all[i]->s);
    flowrt_close(all[i]->rt);
  }
  scenario_finish(&cs);
  flowrt_weights_free(cw);
  flowrt_weights_free(gw);
  flowrt_weights_free(pw);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

/* Each driver call of a conditional flowrt_sample_host_cond (its buffer,
 * copies, capture check, workspace, the cond and sampling launches) fails
 * once: a CUDA status naming the call, the same call then works, nothing
 * is left allocated. */
static void test_family_fault_every_call(void **state) {
  (void)state;
  char *dir = family_echo_templates();
  static const char *const fields[] = {"cond", "2", "guidance", "1", "layers", "2", NULL};
  float cond[HOST_BATCH * 2] = {0}, null_cond[2] = {0};
  int first[FN_COUNT], last[FN_COUNT], runs = 0;
  for (int run = -1; run < FN_COUNT; ++run) {
    int at_end = run < 0 ? 0 : last[run];
    for (int at = run < 0 ? 0 : first[run]; at <= at_end; ++at) {
      if (run >= 0 && first[run] > last[run]) break;
      reset_fakes();
      scenario sc;
      flowrt_weights *w = family_scenario(&sc, dir, fields);
      int before[FN_COUNT];
      memcpy(before, g.calls, sizeof before);
      if (run >= 0) arm_fault(run, at, 1, fault_result_of(run));
      flowgen_error err = {0};
      flowgen_status st =
          flowrt_sample_host_cond(sc.s, sc.x0, sc.x, cond, null_cond, 2.0f, HOST_BATCH, &err);
      if (run < 0) {
        if (st) fail_msg("clean run: %s", err.message);
        for (int f = 0; f < FN_COUNT; ++f) {
          first[f] = before[f] + 1;
          last[f] = g.calls[f];
        }
      } else {
        snprintf(where, sizeof where, "%s call #%d", cuda_fns[run].name, at);
        flowgen_status want = is_release(run) ? FLOWGEN_OK : FLOWGEN_CUDA;
        if (st != want)
          problem("gave %s, expected %s (%s)", flowgen_status_name(st), flowgen_status_name(want),
                  err.message);
        if (st && !strstr(err.message, cuda_fns[run].name))
          problem("the message does not name the call: %s", err.message);
        if (st && flowrt_sample_host_cond(sc.s, sc.x0, sc.x, cond, null_cond, 2.0f, HOST_BATCH,
                                          &err))
          problem("after the fault: %s", err.message);
        if (g.fired != 1) problem("the fault fired %d times", g.fired);
        where[0] = '\0';
        ++runs;
      }
      scenario_finish(&sc);
      flowrt_weights_free(w);
    }
  }
  fprintf(stderr, "# flowrt_sample_host_cond: %d driver calls, each failed once\n", runs);
  assert_true(runs >= 10);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

/* NVRTC 12.4 and newer compile with --split-compile=0 (every core), older
 * ones without the option they lack. */
static void test_nvrtc_split_compile_by_version(void **state) {
  (void)state;
  nv.fake = true;
  static const struct { int major, minor; bool split; } cases[] = {
      {13, 0, true}, {12, 4, true}, {12, 3, false}, {11, 8, false}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    nv.major = cases[i].major;
    nv.minor = cases[i].minor;
    void *image = NULL;
    size_t size = 0;
    flowgen_error err = {0};
    assert_int_equal(compile(FLOWRT_TARGET_CUBIN, &image, &size, &err), FLOWGEN_OK);
    free(image);
    if (nv.programs[nv.nprograms - 1].split != cases[i].split)
      fail_msg("NVRTC %d.%d: --split-compile=0 %s", cases[i].major, cases[i].minor,
               cases[i].split ? "missing" : "passed");
    fg_loader_reset(); /* the next case loads NVRTC afresh, its version read again */
  }
  check_everything_released();
  expect_no_problems();
}

/* Every NVRTC call of a cubin and a PTX compile (NVRTC loaded afresh) fails
 * once: the status, a message naming the call, no program left behind, and
 * the next compile works. */
static nvrtcResult nv_fault_result_of(int fn) {
  switch (fn) {
  case NV_nvrtcCreateProgram: return NVRTC_ERROR_PROGRAM_CREATION_FAILURE;
  case NV_nvrtcCompileProgram: return NVRTC_ERROR_INVALID_OPTION;
  case NV_nvrtcGetCUBIN: case NV_nvrtcGetPTX: return NVRTC_ERROR_INTERNAL_ERROR;
  default: return NVRTC_ERROR_INVALID_PROGRAM;
  }
}

static flowgen_status nv_expected_status(int fn) {
  switch (fn) {
  case NV_nvrtcVersion: case NV_nvrtcGetNumSupportedArchs: case NV_nvrtcGetSupportedArchs:
    return FLOWGEN_NO_NVRTC;
  case NV_nvrtcGetProgramLogSize: case NV_nvrtcGetProgramLog: case NV_nvrtcDestroyProgram:
    return FLOWGEN_OK; /* only the log is lost; a failed destroy is still a destroy */
  default: return FLOWGEN_COMPILE;
  }
}

static void test_nvrtc_fault_every_call(void **state) {
  (void)state;
  const flowrt_target targets[2] = {FLOWRT_TARGET_CUBIN, FLOWRT_TARGET_PTX};
  int clean_calls[NV_COUNT];
  nv.fake = true;
  for (int t = 0; t < 2; ++t) {
    void *image = NULL;
    size_t size = 0;
    flowgen_error err = {0};
    assert_int_equal(compile(targets[t], &image, &size, &err), FLOWGEN_OK);
    free(image);
  }
  memcpy(clean_calls, nv.calls, sizeof clean_calls);
  fg_loader_reset();
  for (int fn = 0; fn < NV_COUNT; ++fn) {
    for (int at = 1; at <= clean_calls[fn]; ++at) {
      nv_reset();
      nv.fake = true;
      nvrtcResult result = nv_fault_result_of(fn);
      nv_arm_fault(fn, at, 1, result);
      snprintf(where, sizeof where, "%s call #%d failing with %s", nvrtc_fns[fn].name, at,
               nv_error_name(result));
      for (int t = 0; t < 2; ++t) {
        int fired_before = nv.fired;
        void *image = (void *)tiny_source;
        size_t size = 1;
        flowgen_error err = {0};
        flowgen_status st = compile(targets[t], &image, &size, &err);
        flowgen_status want = nv.fired > fired_before ? nv_expected_status(fn) : FLOWGEN_OK;
        if (st != want) {
          problem("compile gave %s, expected %s: %s", flowgen_status_name(st),
                  flowgen_status_name(want), err.message);
        } else if (st) {
          if (want == FLOWGEN_COMPILE && (!strstr(err.message, nvrtc_fns[fn].name) ||
                                          !strstr(err.message, nv_error_name(result))))
            problem("the message does not name the call and its error: %s", err.message);
          if (want == FLOWGEN_NO_NVRTC && !strstr(err.message, "NVRTC"))
            problem("the message does not say NVRTC: %s", err.message);
          if (image || size)
            problem("a failed compile left *out = %p, *size = %zu (expected NULL, 0)",
                    image, size);
          st = compile(targets[t], &image, &size, &err);
          if (st) problem("the compile after the fault failed: %s", err.message);
        }
        if (!st) free(image);
      }
      if (nv.fired != 1) problem("the fault fired %d times", nv.fired);
      fg_loader_reset();
      check_everything_released();
      where[0] = '\0';
    }
  }
  expect_no_problems();
}

/* ---- (f) host allocations of open and sampler creation ------------------- */

typedef struct alloc_scenario {
  flowrt_options opts;
  flowgen_spec spec;
  flowrt_runtime *rt;
  int warnings;
} alloc_scenario;

static void count_warning(void *ctx, const char *message) {
  (void)message;
  ++((alloc_scenario *)ctx)->warnings;
}

/* Fresh books, driver and NVRTC loaded afresh by the call. */
static void fresh_fakes(void *ctx) {
  (void)ctx;
  fg_loader_reset();
  mock_reset();
}

static flowgen_status open_close_call(void *ctx, flowgen_error *err) {
  alloc_scenario *a = ctx;
  flowrt_runtime *rt = NULL;
  flowgen_status st = flowrt_open(&a->opts, &rt, err);
  if (!st && !rt) st = FLOWGEN_INTERNAL;
  flowrt_close(rt);
  return st;
}

/* The runtime is opened outside the window; the call creates a sampler
 * (its module from the warm disk cache), destroys it and closes. */
static void open_runtime(void *ctx) {
  alloc_scenario *a = ctx;
  fresh_fakes(ctx);
  g.expect_weights = small_weights;
  if (flowrt_open(&a->opts, &a->rt, NULL)) a->rt = NULL;
}

static flowgen_status create_call(void *ctx, flowgen_error *err) {
  alloc_scenario *a = ctx;
  flowrt_sampler *s = NULL;
  flowgen_status st = a->rt ? flowrt_sampler_create(a->rt, &a->spec, small_weights, &s, err)
                            : FLOWGEN_INTERNAL;
  if (!st && !s) st = FLOWGEN_INTERNAL;
  flowrt_sampler_destroy(s);
  flowrt_close(a->rt);
  a->rt = NULL;
  return st;
}

/* Nothing of the driver's is held after a failed call. */
static const char *driver_books_closed(void *ctx, flowgen_status st) {
  (void)ctx;
  (void)st;
  size_t before = problems_used;
  fg_loader_reset();
  check_everything_released();
  return problems_used != before ? "driver resources left held (see below)" : NULL;
}

static void test_alloc_fault_in_open(void **state) {
  (void)state;
  alloc_scenario a = {.opts = {.cache_dir = cache_dir, .disk_cache = 1}};
  a.opts.warn = count_warning;
  a.opts.warn_ctx = &a;
  a.opts.tune = "cluster.blocks=4"; /* strdup'ed by flowrt_open */
  af_sweep(&(af_sweep_spec){.what = "flowrt_open",
                            .call = open_close_call,
                            .prepare = fresh_fakes,
                            .check_failed = driver_books_closed,
                            .ctx = &a});
  expect_no_problems();
}

/* Sampler creation: generation (sampled, as in test_alloc_faults), the
 * module key, the disk cache read (a failure there is a warning and a
 * compile), the function table. */
static void test_alloc_fault_in_sampler_create(void **state) {
  (void)state;
  alloc_scenario a = {.opts = {.cache_dir = cache_dir, .disk_cache = 1},
                      .spec = spec_of(small_weights)};
  a.opts.warn = count_warning;
  a.opts.warn_ctx = &a;
  af_sweep(&(af_sweep_spec){.what = "flowrt_sampler_create",
                            .call = create_call,
                            .prepare = open_runtime,
                            .check_failed = driver_books_closed,
                            .ctx = &a,
                            .allowed = {FLOWGEN_LIMIT},
                            .may_absorb = true,
                            .max_runs = 60,
                            .edge = 20});
  expect_no_problems();
}

/* An unusable cache folder (a file where it should be: refused to root
 * too) is one warning at open; samplers are then compiled and kept in
 * memory, and nothing is written. */
static void test_unusable_cache_folder_warns_once(void **state) {
  (void)state;
  char *base = fg_test_mkdtemp();
  char file[FG_TEST_PATH_SIZE], folder[FG_TEST_PATH_SIZE];
  fg_test_path_join(file, base, "file");
  fg_test_path_join(folder, file, "cache");
  fg_test_write_file(file, "x", 1);
  alloc_scenario a = {.opts = {.cache_dir = folder, .disk_cache = 1},
                      .spec = spec_of(small_weights)};
  a.opts.warn = count_warning;
  a.opts.warn_ctx = &a;
  flowgen_error err;
  flowrt_runtime *rt = NULL;
  flowrt_sampler *s = NULL;
  g.expect_weights = small_weights;
  if (flowrt_open(&a.opts, &rt, &err)) fail_msg("flowrt_open: %s", err.message);
  assert_int_equal(a.warnings, 1);
  if (flowrt_sampler_create(rt, &a.spec, small_weights, &s, &err))
    fail_msg("flowrt_sampler_create: %s", err.message);
  assert_false(flowrt_sampler_stats(s)->disk_hit);
  assert_true(flowrt_sampler_stats(s)->compile_ms > 0);
  flowrt_sampler_destroy(s);
  assert_int_equal(flowrt_sampler_create(rt, &a.spec, small_weights, &s, &err), FLOWGEN_OK);
  assert_true(flowrt_sampler_stats(s)->memory_hit);
  flowrt_sampler_destroy(s);
  flowrt_close(rt);
  assert_int_equal(a.warnings, 1);
  assert_int_equal(fg_test_count_entries(base), 1);
  fg_test_rmtree(base);
  free(base);
  fg_loader_reset();
  check_everything_released();
  expect_no_problems();
}

/* ---- main ---------------------------------------------------------------- */

/* ---- variants loaded on first use ------------------------------------------ */

/* The default weights' sampler on the fake NVRTC (its images hold the
 * kernels' names), with no disk cache: every part compiles, counted. */
static void start_in_memory(scenario *sc, flowgen_error *err) {
  nv.stand_in = true;
  scenario_init(sc, weights);
  sc->opts.disk_cache = 0;
  if (open_and_create(sc, err)) fail_msg("flowrt_sampler_create: %s", err->message);
}

static int compiles(void) { return nv.calls[NV_nvrtcCompileProgram]; }

static int variant_index(const flowrt_sampler *s, int64_t batch) {
  const flowgen_kernel *k = flowrt_sampler_kernel(s);
  return (int)(flowgen_kernel_pick(k, batch) - flowgen_kernel_variant(k, 0));
}

/* compile_ahead: every variant compiled once, in background threads,
 * whatever their number; a launch waits only for its own; a sampler and
 * its runtime closed while the threads still compile wait for them. */
static void test_compile_ahead(void **state) {
  (void)state;
  scenario sc;
  flowgen_error err = {0};
  start_in_memory(&sc, &err);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  int n = flowgen_kernel_variant_count(k);
  assert_int_equal(compiles(), 1);
  flowrt_sampler *ahead = NULL;
  flowrt_sampler_options opts = {.compile_ahead = true};
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &ahead, &err),
                   FLOWGEN_OK);
  assert_int_equal(flowrt_sample_host(ahead, sc.x0, sc.x, HOST_BATCH, &err), FLOWGEN_OK);
  assert_string_equal(g.launches[g.nlaunches - 1].name,
                      flowgen_kernel_variant(k, variant_index(ahead, HOST_BATCH))->symbol);
  assert_int_equal(flowrt_sampler_prepare(ahead, -1, &err), FLOWGEN_OK);  /* the rest */
  assert_int_equal(compiles(), 1 + n);
  flowrt_part_stats part;
  for (int i = 0; i < n; ++i) assert_true(flowrt_sampler_part_stats(ahead, i, &part) && part.loaded);
  assert_int_equal(flowrt_sample_host(ahead, sc.x0, sc.x, SAMPLE_BATCH, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 1 + n);
  flowrt_sampler_destroy(ahead);
  scenario_finish(&sc);
  expect_no_problems();

  /* closed at once: the threads are joined, nothing leaks */
  scenario_init(&sc, weights);
  sc.opts.disk_cache = 0;
  assert_int_equal(flowrt_open(&sc.opts, &sc.rt, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &ahead, &err),
                   FLOWGEN_OK);
  flowrt_sampler_destroy(ahead);
  flowrt_close(sc.rt);
  sc.rt = NULL;
  scenario_finish(&sc);
  expect_no_problems();
}

/* Creating a sampler compiles the pack part alone; each variant compiles
 * with the first launch it serves, once for the runtime (a second sampler
 * of the spec too); prepare(-1) loads the rest. */
static void test_each_variant_compiles_once(void **state) {
  (void)state;
  scenario sc;
  flowgen_error err = {0};
  start_in_memory(&sc, &err);
  const flowgen_kernel *k = flowrt_sampler_kernel(sc.s);
  int n = flowgen_kernel_variant_count(k);
  int small = variant_index(sc.s, HOST_BATCH), large = variant_index(sc.s, SAMPLE_BATCH);
  assert_true(n > 2 && small != large);
  assert_int_equal(compiles(), 1);
  assert_int_equal(g.nmodules, 1);
  assert_int_equal(g.calls[FN_cuModuleGetFunction], 1); /* the pack kernel */
  assert_int_equal(flowgen_kernel_part(k), FLOWGEN_PART_PLAN);
  flowrt_part_stats part;
  assert_true(flowrt_sampler_part_stats(sc.s, -1, &part));
  assert_true(part.loaded && !part.disk_hit);
  assert_false(flowrt_sampler_part_stats(sc.s, small, &part));
  assert_false(flowrt_sampler_part_stats(sc.s, n, &part));

  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  assert_int_equal(g.nmodules, 2);
  assert_true(flowrt_sampler_part_stats(sc.s, small, &part));
  assert_true(part.loaded && part.source_bytes > 0);
  assert_false(flowrt_sampler_part_stats(sc.s, large, &part));
  const fake_launch *l = &g.launches[g.nlaunches - 1];
  assert_string_equal(l->name, flowgen_kernel_variant(k, small)->symbol);
  /* again, and another batch of the same variant: nothing compiled */
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(variant_index(sc.s, 1), small);
  assert_int_equal(flowrt_sample_host(sc.s, sc.x0, sc.x, 1, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  /* another variant */
  assert_int_equal(run_phase(&sc, PH_SAMPLE, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 3);
  assert_int_equal(g.nmodules, 3);
  assert_string_equal(g.launches[g.nlaunches - 1].name, flowgen_kernel_variant(k, large)->symbol);
  /* a second sampler of the spec: nothing compiled for it */
  flowrt_sampler *again = NULL;
  assert_int_equal(flowrt_sampler_create(sc.rt, &sc.spec, weights, &again, &err), FLOWGEN_OK);
  assert_true(flowrt_sampler_stats(again)->memory_hit);
  assert_int_equal(flowrt_sample_host(again, sc.x0, sc.x, HOST_BATCH, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 3);
  flowrt_sampler_destroy(again);
  /* the rest at once */
  assert_int_equal(flowrt_sampler_prepare(sc.s, -1, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 1 + n);
  assert_int_equal(g.nmodules, 1 + n);
  assert_int_equal(flowrt_sampler_prepare(sc.s, -1, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 1 + n);
  assert_int_equal(flowrt_sampler_prepare(sc.s, -2, &err), FLOWGEN_INVALID);
  assert_int_equal(g.ctx_depth, 0);
  scenario_finish(&sc);
  expect_no_problems();
}

typedef struct prepare_call {
  flowrt_sampler *s;
  int64_t batch;
  flowgen_status status;
} prepare_call;

static void *prepare_thread(void *arg) {
  prepare_call *c = arg;
  c->status = flowrt_sampler_prepare(c->s, c->batch, NULL);
  return NULL;
}

/* Two threads' first use of a variant at once compiles it once: the
 * second waits for the first's build (each compile takes 300 ms here, so
 * that they overlap). */
static void test_concurrent_first_use_compiles_once(void **state) {
  (void)state;
  scenario sc;
  flowgen_error err = {0};
  start_in_memory(&sc, &err);
  nv.compile_delay_ms = 300;
  prepare_call calls[2] = {{sc.s, HOST_BATCH, FLOWGEN_INTERNAL},
                           {sc.s, HOST_BATCH, FLOWGEN_INTERNAL}};
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t)
    assert_int_equal(pthread_create(&threads[t], NULL, prepare_thread, &calls[t]), 0);
  for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
  nv.compile_delay_ms = 0;
  assert_int_equal(calls[0].status, FLOWGEN_OK);
  assert_int_equal(calls[1].status, FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  assert_int_equal(g.nmodules, 2);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  scenario_finish(&sc);
  expect_no_problems();
}

/* A launch in graph capture whose variant is not loaded is refused, naming
 * the ways out; the batch hint and prepare load it before. */
static void test_capture_needs_the_variant_loaded(void **state) {
  (void)state;
  scenario sc;
  flowgen_error err = {0};
  start_in_memory(&sc, &err);
  CUstream stream = (CUstream)(uintptr_t)0x5000;
  int launches = g.nlaunches;
  g.capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  assert_int_equal(flowrt_sample(sc.s, sc.dev_x0, sc.dev_x, HOST_BATCH, stream, &err),
                   FLOWGEN_INVALID);
  expect_contains(err.message, "not loaded");
  expect_contains(err.message, "during CUDA graph capture");
  expect_contains(err.message, "batch_hint = 4");
  expect_contains(err.message, "flowrt_sampler_reserve(sampler, 4) (or flowrt_sampler_prepare)");
  assert_int_equal(g.nlaunches, launches);
  assert_int_equal(compiles(), 1);
  g.capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  /* reserve loads the variant (as prepare does): a capture's preparation */
  assert_int_equal(flowrt_sampler_reserve(sc.s, HOST_BATCH, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  g.capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  assert_int_equal(flowrt_sample(sc.s, sc.dev_x0, sc.dev_x, HOST_BATCH, stream, &err), FLOWGEN_OK);
  g.capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  /* With the hint, the sampler is ready for its batch when created. */
  flowrt_sampler *hinted = NULL;
  flowrt_sampler_options opts = {.batch_hint = SAMPLE_BATCH};
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &hinted, &err),
                   FLOWGEN_OK);
  assert_int_equal(compiles(), 3);
  flowrt_part_stats part;
  assert_true(flowrt_sampler_part_stats(hinted, variant_index(hinted, SAMPLE_BATCH), &part));
  g.capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  assert_int_equal(flowrt_sample(hinted, sc.dev_x0, sc.dev_x, SAMPLE_BATCH, stream, &err),
                   FLOWGEN_OK);
  g.capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  flowrt_sampler_destroy(hinted);
  opts.batch_hint = -1;
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &hinted, &err),
                   FLOWGEN_INVALID);
  assert_null(hinted);
  expect_contains(err.message, "batch_hint");
  assert_int_equal(g.ctx_depth, 0);
  scenario_finish(&sc);
  expect_no_problems();
}

static void count_entry(void *ctx, const flowrt_cache_entry *e) {
  if (e->valid) ++*(int *)ctx;
}

static int cache_entries(const char *dir) {
  int n = 0;
  assert_int_equal(flowrt_cache_list(dir, count_entry, &n, NULL), FLOWGEN_OK);
  return n;
}

/* The disk cache holds a part per variant and the pack part: a program of
 * one batch leaves two entries, and its warm start compiles nothing and
 * renders nothing (the parts are found by their source keys). */
static void test_cache_holds_a_part_per_variant(void **state) {
  (void)state;
  nv.stand_in = true;
  char *dir = fg_test_mkdtemp();
  scenario sc;
  scenario_init(&sc, weights);
  sc.opts.cache_dir = dir;
  flowgen_error err = {0};
  flowrt_sampler_options opts = {.batch_hint = HOST_BATCH};
  assert_int_equal(run_phase(&sc, PH_OPEN, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &sc.s, &err),
                   FLOWGEN_OK);
  assert_int_equal(run_phase(&sc, PH_SAMPLE_HOST, &err), FLOWGEN_OK);
  assert_int_equal(compiles(), 2);
  assert_int_equal(cache_entries(dir), 2);
  flowrt_part_stats part;
  for (int i = 0; i < 2; ++i) {
    assert_true(flowrt_sampler_part_stats(sc.s, i ? variant_index(sc.s, HOST_BATCH) : -1, &part));
    assert_true(!part.disk_hit && part.source_bytes > 0);
  }
  assert_int_equal(run_phase(&sc, PH_SAMPLE, &err), FLOWGEN_OK);
  assert_int_equal(cache_entries(dir), 3);
  flowrt_sampler_destroy(sc.s);
  sc.s = NULL;
  flowrt_close(sc.rt);
  sc.rt = NULL;
  /* a warm start: both parts from the disk */
  assert_int_equal(run_phase(&sc, PH_OPEN, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_sampler_create_ex(sc.rt, &sc.spec, weights, &opts, &sc.s, &err),
                   FLOWGEN_OK);
  assert_int_equal(compiles(), 3);
  assert_true(flowrt_sampler_stats(sc.s)->disk_hit);
  for (int i = 0; i < 2; ++i) {
    assert_true(flowrt_sampler_part_stats(sc.s, i ? variant_index(sc.s, HOST_BATCH) : -1, &part));
    assert_true(part.disk_hit);
    assert_true(part.compile_ms == 0.0);
    assert_int_equal(part.source_bytes, 0);
  }
  scenario_finish(&sc);
  expect_no_problems();
  fg_test_rmtree(dir);
  free(dir);
}

#define FAULT_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      FAULT_TEST(test_no_driver),
      FAULT_TEST(test_driver_missing_a_symbol_is_too_old),
      FAULT_TEST(test_no_device),
      FAULT_TEST(test_too_old_device),
      FAULT_TEST(test_clean_run_uses_the_driver_correctly),
      FAULT_TEST(test_fault_in_open),
      FAULT_TEST(test_fault_in_sampler_create),
      FAULT_TEST(test_fault_in_sample),
      FAULT_TEST(test_fault_in_sample_host),
      FAULT_TEST(test_fault_in_sampler_destroy),
      FAULT_TEST(test_fault_in_close),
      FAULT_TEST(test_module_rejected_twice),
      FAULT_TEST(test_module_rejected_without_disk_cache),
      FAULT_TEST(test_unnamed_error_code),
      FAULT_TEST(test_newer_device_gets_ptx),
      FAULT_TEST(test_cluster_of_16_blocks),
      FAULT_TEST(test_grid_is_a_cooperative_launch),
      FAULT_TEST(test_gemm_falls_back_when_not_resident),
      FAULT_TEST(test_grid_falls_back_when_not_resident),
      FAULT_TEST(test_fallback_alone_serves_a_refused_grid),
      FAULT_TEST(test_nvrtc_missing),
      FAULT_TEST(test_nvrtc_missing_a_symbol_is_too_old),
      FAULT_TEST(test_nvrtc_compile_error_gives_the_log),
      FAULT_TEST(test_nvrtc_get_cubin_fails),
      FAULT_TEST(test_nvrtc_split_compile_by_version),
      FAULT_TEST(test_unknown_tune_key_refused),
      FAULT_TEST(test_environment_does_not_tune),
      FAULT_TEST(test_device_query_reaches_the_planner),
      FAULT_TEST(test_launch_follows_the_description),
      FAULT_TEST(test_family_launches),
      FAULT_TEST(test_family_workspace),
      FAULT_TEST(test_family_argument_checks),
      FAULT_TEST(test_family_fault_every_call),
      FAULT_TEST(test_nvrtc_fault_every_call),
      FAULT_TEST(test_alloc_fault_in_open),
      FAULT_TEST(test_alloc_fault_in_sampler_create),
      FAULT_TEST(test_unusable_cache_folder_warns_once),
      FAULT_TEST(test_each_variant_compiles_once),
      FAULT_TEST(test_compile_ahead),
      FAULT_TEST(test_concurrent_first_use_compiles_once),
      FAULT_TEST(test_capture_needs_the_variant_loaded),
      FAULT_TEST(test_cache_holds_a_part_per_variant),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
