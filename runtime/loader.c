/* Opening the CUDA driver and NVRTC at run time. */
#include "cuda_api.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FG_STR_(x) #x
#define FG_STR(x) FG_STR_(x)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *cuda_handle, *nvrtc_handle;
static fg_cuda_api cuda_api;
static fg_nvrtc_api nvrtc_api;

/* Looks each symbol up; the names are the macro expansions (cuMemAlloc_v2). */
static bool resolve(void *handle, void **slots, const char *const *names,
                    size_t count, const char **missing) {
  for (size_t i = 0; i < count; ++i) {
    slots[i] = dlsym(handle, names[i]);
    if (!slots[i]) {
      *missing = names[i];
      return false;
    }
  }
  return true;
}

#define FG_NAME(f) FG_STR(f),
static const char *const cuda_names[] = {FG_CUDA_FUNCTIONS(FG_NAME)};
static const char *const nvrtc_names[] = {FG_NVRTC_FUNCTIONS(FG_NAME)};
#undef FG_NAME

static const fg_cuda_api *load_cuda(flowgen_error *err) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    /* dlerror() names the file it could not open. */
    const char *why = dlerror();
    fg_fail(err, FLOWGEN_NO_DRIVER, "no CUDA driver found (%s)",
            why ? why : "libcuda.so.1: cannot be opened");
    return NULL;
  }
  fg_cuda_api api;
  const char *missing = NULL;
  if (!resolve(h, (void **)&api, cuda_names,
               sizeof cuda_names / sizeof *cuda_names, &missing)) {
    fg_fail(err, FLOWGEN_NO_DRIVER,
            "the CUDA driver is too old: libcuda.so.1 has no %s", missing);
    dlclose(h);
    return NULL;
  }
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    if (api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown error";
    fg_fail(err, r == CUDA_ERROR_NO_DEVICE ? FLOWGEN_NO_DEVICE : FLOWGEN_NO_DRIVER,
            r == CUDA_ERROR_NO_DEVICE ? "no CUDA device (cuInit: %s)"
                                      : "the CUDA driver cannot start (cuInit: %s)",
            name);
    dlclose(h);
    return NULL;
  }
  cuda_api = api;
  cuda_handle = h;
  return &cuda_api;
}

const fg_cuda_api *fg_cuda(flowgen_error *err) {
  pthread_mutex_lock(&lock);
  const fg_cuda_api *api = cuda_handle ? &cuda_api : load_cuda(err);
  pthread_mutex_unlock(&lock);
  return api;
}

static void *open_nvrtc(char *tried, size_t size) {
  const char *env = getenv("FLOWGEN_NVRTC");
  const char *home = getenv("CUDA_HOME");
  char in_home[4096] = "";
  if (home && *home)
    snprintf(in_home, sizeof in_home, "%s/lib64/libnvrtc.so", home);
  const char *candidates[] = {
      env && *env ? env : NULL, "libnvrtc.so.13", "libnvrtc.so.12",
      "libnvrtc.so", in_home[0] ? in_home : NULL,
      "/usr/local/cuda/lib64/libnvrtc.so",
  };
  tried[0] = '\0';
  for (size_t i = 0; i < sizeof candidates / sizeof *candidates; ++i) {
    if (!candidates[i]) continue;
    void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    size_t used = strlen(tried);
    snprintf(tried + used, size - used, "%s%s", used ? ", " : "", candidates[i]);
    if (env && *env) break; /* an explicit choice is not second-guessed */
  }
  return NULL;
}

static const fg_nvrtc_api *load_nvrtc(flowgen_error *err) {
  char tried[2048];
  void *h = open_nvrtc(tried, sizeof tried);
  if (!h) {
    fg_fail(err, FLOWGEN_NO_NVRTC,
            "NVRTC not found (tried %s); install the CUDA toolkit or set "
            "FLOWGEN_NVRTC to libnvrtc.so's path",
            tried);
    return NULL;
  }
  fg_nvrtc_api api;
  memset(&api, 0, sizeof api);
  const char *missing = NULL;
  int major = 0, minor = 0, count = 0;
  if (!resolve(h, (void **)&api, nvrtc_names,
               sizeof nvrtc_names / sizeof *nvrtc_names, &missing)) {
    fg_fail(err, FLOWGEN_NO_NVRTC, "NVRTC is too old: it has no %s", missing);
    dlclose(h);
    return NULL;
  }
  int *archs = NULL;
  bool reported = api.nvrtcVersion(&major, &minor) == NVRTC_SUCCESS &&
                  api.nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0;
  if (reported && !(archs = calloc((size_t)count, sizeof *archs))) {
    fg_fail(err, FLOWGEN_NOMEM, "out of memory loading NVRTC");
    dlclose(h);
    return NULL;
  }
  if (!reported || api.nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) {
    free(archs);
    fg_fail(err, FLOWGEN_NO_NVRTC, "NVRTC does not report its version or targets");
    dlclose(h);
    return NULL;
  }
  api.version = major * 1000 + minor * 10;
  api.min_arch = archs[0];
  api.max_arch = archs[count - 1];
  free(archs);
  nvrtc_api = api;
  nvrtc_handle = h;
  return &nvrtc_api;
}

const fg_nvrtc_api *fg_nvrtc(flowgen_error *err) {
  pthread_mutex_lock(&lock);
  const fg_nvrtc_api *api = nvrtc_handle ? &nvrtc_api : load_nvrtc(err);
  pthread_mutex_unlock(&lock);
  return api;
}

void fg_loader_reset(void) {
  pthread_mutex_lock(&lock);
  if (cuda_handle) dlclose(cuda_handle);
  if (nvrtc_handle) dlclose(nvrtc_handle);
  cuda_handle = nvrtc_handle = NULL;
  memset(&cuda_api, 0, sizeof cuda_api);
  memset(&nvrtc_api, 0, sizeof nvrtc_api);
  pthread_mutex_unlock(&lock);
}

flowgen_status fg_cuda_check(CUresult result, const char *what,
                             flowgen_error *err) {
  if (result == CUDA_SUCCESS) return FLOWGEN_OK;
  const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
  if (cuda_handle) {
    if (cuda_api.cuGetErrorName(result, &name) != CUDA_SUCCESS)
      name = "CUDA_ERROR_UNKNOWN";
    if (cuda_api.cuGetErrorString(result, &text) != CUDA_SUCCESS)
      text = "unknown error";
  }
  return fg_fail(err, FLOWGEN_CUDA, "%s failed: %s (%s, code %d)", what, name,
                 text, (int)result);
}

const char *fg_call_name(const char *expression) {
  static _Thread_local char name[64];
  /* The identifier just before the first '(': the function called. */
  const char *paren = strchr(expression, '(');
  const char *end = paren ? paren : expression + strlen(expression);
  const char *start = end;
  while (start > expression && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
    --start;
  size_t n = (size_t)(end - start);
  if (n >= sizeof name) n = sizeof name - 1;
  memcpy(name, start, n);
  name[n] = '\0';
  return name;
}
