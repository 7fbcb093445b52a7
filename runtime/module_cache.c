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

flowgen_status fg_module_obtain(const char *dir, bool skip_lookup,
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
  if (dir && !skip_lookup) {
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
  if (!st && dir && fg_cache_put(dir, key, out->data, out->size, &disk_err))
    warn_of(warn, warn_ctx, "module cache", &disk_err);
  free(key);
  return st;
}
