/* The cache key of a compiled module and the disk-or-compile path shared by
 * samplers and `flowgen cache warm`. */
#include "module_cache.h"

#include "cuda_api.h"
#include "disk_cache.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double fg_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

char *fg_module_key(const char *source, size_t size, int arch,
                    flowrt_target target, int nvrtc_version) {
  XXH128_hash_t h = XXH3_128bits(source, size);
  char *key = malloc(512);
  if (!key) return NULL;
  snprintf(key, 512,
           "flowgen module v1\n"
           "generator=%s\n"
           "nvrtc=%d\n"
           "target=%s_%d\n"
           "options=%s\n"
           "source-bytes=%zu\n"
           "source-xxh3-128=%016llx%016llx\n",
           FLOWGEN_VERSION, nvrtc_version,
           target == FLOWRT_TARGET_PTX ? "compute" : "sm", arch,
           FG_COMPILE_OPTIONS, size, (unsigned long long)h.high64,
           (unsigned long long)h.low64);
  return key;
}

static void warn_of(flowrt_warn_fn warn, void *ctx, const char *what,
                    const flowgen_error *e) {
  if (!warn) return;
  char line[FLOWGEN_ERROR_MESSAGE_MAX + 64];
  snprintf(line, sizeof line, "%s: %s", what, e->message);
  warn(ctx, line);
}

flowgen_status fg_module_obtain(const char *dir, unsigned flags,
                                const char *source,
                                size_t size, const char *name, int arch,
                                flowrt_target target, flowrt_warn_fn warn,
                                void *warn_ctx, fg_module_image *out,
                                flowgen_error *err) {
  memset(out, 0, sizeof *out);
  const fg_nvrtc_api *nvrtc = fg_nvrtc(err);
  if (!nvrtc) return err ? err->status : FLOWGEN_NO_NVRTC;
  char *key = fg_module_key(source, size, arch, target, nvrtc->version);
  if (!key) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  flowgen_error disk_err;
  if (dir && !(flags & FG_MODULE_SKIP_LOOKUP)) {
    fg_cache_result found = FG_CACHE_MISS;
    if (fg_cache_get(dir, key, &found, &out->data, &out->size, &disk_err))
      warn_of(warn, warn_ctx, "module cache", &disk_err);
    else if (found == FG_CACHE_INVALID)
      warn_of(warn, warn_ctx, "module cache: replacing an invalid entry", &disk_err);
    if (found == FG_CACHE_HIT) {
      out->disk_hit = true;
      free(key);
      return FLOWGEN_OK;
    }
  }
  double t0 = fg_now_ms();
  flowgen_status st = flowrt_compile(source, size, name, arch, target, false,
                                     &out->data, &out->size, NULL, err);
  out->compile_ms = fg_now_ms() - t0;
  if (!st && dir && fg_cache_put(dir, key, out->data, out->size, &disk_err)) {
    if (flags & FG_MODULE_MUST_STORE) {
      if (err) *err = disk_err;
      st = disk_err.status;
      free(out->data);
      out->data = NULL;
      out->size = 0;
    } else {
      warn_of(warn, warn_ctx, "module cache", &disk_err);
    }
  }
  free(key);
  return st;
}

/* ---- flowgen cache warm -------------------------------------------------- */

flowgen_status flowrt_cache_warm(const char *dir, const flowgen_spec *spec,
                                 const flowgen_options *opts, bool *was_cached,
                                 flowgen_error *err) {
  char path[FG_PATH_MAX];
  flowgen_status st = fg_cache_resolve_dir(dir, path, sizeof path, err);
  if (!st) st = fg_cache_open(path, fg_cache_trust_any_from_env(), err);
  if (st) return st;
  if (!fg_nvrtc(err)) return err ? err->status : FLOWGEN_NO_NVRTC;
  flowgen_spec resolved = *spec;  /* as a sampler of this arch resolves it */
  resolved.arch_specific = fg_arch_specific(resolved.arch);
  flowgen_options gen_opts = {0};
  if (opts) gen_opts = *opts;
  gen_opts.host_launcher = false;
  flowgen_kernel *k = NULL;
  if ((st = flowgen_generate(&resolved, &gen_opts, &k, err))) return st;
  char name[FLOWGEN_NAME_MAX + 80];
  flowgen_spec_symbol(&resolved, name, sizeof name - 4);
  strcat(name, ".cu");
  /* The samplers' path: an unreadable entry is a miss, rebuilt and
   * replaced; but the store is what was asked for. */
  fg_module_image image;
  st = fg_module_obtain(path, FG_MODULE_MUST_STORE, flowgen_kernel_source(k),
                        flowgen_kernel_source_size(k), name, resolved.arch,
                        FLOWRT_TARGET_CUBIN, NULL, NULL, &image, err);
  if (!st && was_cached) *was_cached = image.disk_hit;
  free(image.data);
  flowgen_kernel_free(k);
  return st;
}
