/* Compiling generated source with NVRTC (no GPU needed). */
#include "compile.h"

#include "cuda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int flowrt_nvrtc_version(void) {
  const fg_nvrtc_api *api = fg_nvrtc(NULL);
  return api ? api->version : 0;
}

int flowrt_nvrtc_max_arch(void) {
  const fg_nvrtc_api *api = fg_nvrtc(NULL);
  return api ? api->max_arch : 0;
}

static char *program_log(const fg_nvrtc_api *api, nvrtcProgram prog) {
  size_t size = 0;
  if (api->nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS) size = 0;
  char *log = malloc(size + 1);
  if (!log) return NULL;
  if (size == 0 || api->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
    size = 0;
  log[size] = '\0';
  /* NVRTC's log ends with "\n" and a NUL counted in size. */
  for (size_t n = strlen(log); n > 0 && (log[n - 1] == '\n' || log[n - 1] == '\r'); --n)
    log[n - 1] = '\0';
  return log;
}

static flowgen_status nvrtc_check(const fg_nvrtc_api *api, nvrtcResult r,
                                  const char *what, flowgen_error *err) {
  if (r == NVRTC_SUCCESS) return FLOWGEN_OK;
  return fg_fail(err, r == NVRTC_ERROR_OUT_OF_MEMORY ? FLOWGEN_NOMEM : FLOWGEN_COMPILE,
                 "%s failed: %s", what, api->nvrtcGetErrorString(r));
}

static flowgen_status fetch_image(const fg_nvrtc_api *api, nvrtcProgram prog,
                                  flowrt_target target, void **out,
                                  size_t *size, flowgen_error *err) {
  bool ptx = target == FLOWRT_TARGET_PTX;
  flowgen_status st = nvrtc_check(
      api, ptx ? api->nvrtcGetPTXSize(prog, size) : api->nvrtcGetCUBINSize(prog, size),
      ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize", err);
  if (st) return st;
  char *image = malloc(*size ? *size : 1);
  if (!image) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  st = nvrtc_check(api, ptx ? api->nvrtcGetPTX(prog, image) : api->nvrtcGetCUBIN(prog, image),
                   ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", err);
  if (st) {
    free(image);
    *size = 0;
    return st;
  }
  *out = image;
  return FLOWGEN_OK;
}

flowgen_status flowrt_compile(const char *source, size_t source_size,
                              const char *source_name, int arch,
                              flowrt_target target, bool verbose, void **out,
                              size_t *size, char **log, flowgen_error *err) {
  *out = NULL;
  *size = 0;
  if (log) *log = NULL;
  if (!source || strnlen(source, source_size + 1) != source_size)
    return fg_fail(err, FLOWGEN_INVALID, "source must be NUL-terminated text");
  const fg_nvrtc_api *api = fg_nvrtc(err);
  if (!api) return err ? err->status : FLOWGEN_NO_NVRTC;
  if (target == FLOWRT_TARGET_CUBIN && (arch < api->min_arch || arch > api->max_arch))
    return fg_fail(err, FLOWGEN_UNSUPPORTED,
                   "NVRTC %d.%d cannot build a cubin for sm_%d (it supports "
                   "sm_%d to sm_%d)",
                   api->version / 1000, api->version % 1000 / 10, arch,
                   api->min_arch, api->max_arch);
  char arch_opt[64];  /* sm_90 as sm_90a (the wgmma variant needs it) */
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d%s",
           target == FLOWRT_TARGET_PTX ? "compute" : "sm", arch,
           fg_arch_specific(arch) ? "a" : "");
  /* NVRTC optimizes and assembles the kernels on all cores (one kernel
   * each): the same instructions (the cluster kernels' static shared
   * arrays in another order: six address offsets of cluster4_r1 differ),
   * and a cold compile of the default shape in 3.4 to 4.5 s on 2 cores in
   * place of 5.0 to 5.5 (NVRTC 13.0).  Older NVRTCs lack the option. */
  const char *opts[4] = {arch_opt, FG_COMPILE_OPTIONS};
  int nopts = 2;
  if (api->version >= FG_SPLIT_COMPILE_NVRTC) opts[nopts++] = "--split-compile=0";
  if (verbose) opts[nopts++] = "--ptxas-options=-v";

  nvrtcProgram prog = NULL;
  flowgen_status st = nvrtc_check(
      api, api->nvrtcCreateProgram(&prog, source, source_name, 0, NULL, NULL),
      "nvrtcCreateProgram", err);
  if (st) return st;
  nvrtcResult r = api->nvrtcCompileProgram(prog, nopts, opts);
  char *text = program_log(api, prog);
  if (r == NVRTC_ERROR_COMPILATION) {
    st = fg_fail(err, FLOWGEN_COMPILE, "%s: compilation for sm_%d failed:\n%s",
                 source_name, arch, text ? text : "(no log)");
  } else {
    st = nvrtc_check(api, r, "nvrtcCompileProgram", err);
  }
  if (!st) st = fetch_image(api, prog, target, out, size, err);
  api->nvrtcDestroyProgram(&prog);
  if (!st && log) {
    *log = text;
    text = NULL;
  }
  free(text);
  return st;
}
