/* The cache key of a compiled module and the disk-or-compile path shared by
 * samplers and `flowgen cache warm`. */
#include "module_cache.h"

#include <pthread.h>
#include <unistd.h>

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

/* The parts cache warm compiles: index -1 the pack part, else a variant's. */
typedef struct warm_job {
  const char *dir;
  const flowgen_spec *spec;
  flowgen_options opts;
  const int *parts;
  int count;
  int next;               /* the next part a worker takes (under lock) */
  pthread_mutex_t lock;
  bool all_cached;
  flowgen_status status;  /* the first failure */
  flowgen_error err;
} warm_job;

/* Generates part index and finds it in the cache or compiles and stores it,
 * as a sampler of the same runtime options would. */
static flowgen_status warm_part(warm_job *j, int index, bool *cached, flowgen_error *err) {
  flowgen_options gen = j->opts;
  gen.part = index < 0 ? FLOWGEN_PART_PACK : FLOWGEN_PART_VARIANT;
  gen.variant = index < 0 ? 0 : index;
  flowgen_kernel *k = NULL;
  flowgen_status st = flowgen_generate(j->spec, &gen, &k, err);
  if (st) return st;
  char symbol[FLOWGEN_NAME_MAX + 64], name[FLOWGEN_NAME_MAX + 160];
  flowgen_spec_symbol(j->spec, symbol, sizeof symbol);
  const flowgen_variant *v = index < 0 ? NULL : flowgen_kernel_variant(k, index);
  snprintf(name, sizeof name, "%s_%s.cu", symbol, v ? v->strategy : "pack");
  /* The samplers' path: an unreadable entry is a miss, rebuilt and
   * replaced; but the store is what was asked for. */
  fg_module_image image;
  st = fg_module_obtain(j->dir, FG_MODULE_MUST_STORE, flowgen_kernel_source(k),
                        flowgen_kernel_source_size(k), name, j->spec->arch,
                        FLOWRT_TARGET_CUBIN, NULL, NULL, &image, err);
  if (!st) *cached = image.disk_hit;
  free(image.data);
  flowgen_kernel_free(k);
  return st;
}

static void *warm_worker(void *arg) {
  warm_job *j = arg;
  for (;;) {
    pthread_mutex_lock(&j->lock);
    int i = j->status || j->next >= j->count ? -2 : j->parts[j->next++];
    pthread_mutex_unlock(&j->lock);
    if (i == -2) return NULL;
    flowgen_error err = {FLOWGEN_OK, ""};
    bool cached = false;
    flowgen_status st = warm_part(j, i, &cached, &err);
    pthread_mutex_lock(&j->lock);
    j->all_cached = j->all_cached && cached;
    if (st && !j->status) {
      j->status = st;
      j->err = err;
    }
    pthread_mutex_unlock(&j->lock);
  }
}

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
  warm_job job = {.dir = path, .spec = &resolved, .all_cached = true};
  if (opts) job.opts = *opts;
  job.opts.host_launcher = false;
  bool one_batch = job.opts.part == FLOWGEN_PART_BATCH;
  if (!one_batch && job.opts.part != FLOWGEN_PART_ALL)
    return fg_fail(err, FLOWGEN_INVALID,
                   "cache warm: options.part must be FLOWGEN_PART_ALL (every variant) "
                   "or FLOWGEN_PART_BATCH (the variant of one batch)");
  /* The plan: which variants there are (and which serve the batch). */
  flowgen_options plan_opts = job.opts;
  plan_opts.part = FLOWGEN_PART_PACK;
  flowgen_kernel *plan = NULL;
  if ((st = flowgen_generate(&resolved, &plan_opts, &plan, err))) return st;
  int n = flowgen_kernel_variant_count(plan);
  int *parts = malloc((size_t)(n + 1) * sizeof *parts);
  if (!parts) {
    flowgen_kernel_free(plan);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  }
  parts[job.count++] = -1;
  const flowgen_variant *picked = one_batch ? flowgen_kernel_pick(plan, job.opts.batch) : NULL;
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(plan, i);
    bool wanted = !one_batch || v == picked ||
                  (picked && picked->cooperative && i == picked->fallback);
    if (wanted) parts[job.count++] = i;
  }
  flowgen_kernel_free(plan);
  job.parts = parts;
  /* NVRTC is thread-safe: a worker a core, up to the parts. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores < 1 ? 1 : cores < job.count ? (int)cores : job.count;
  pthread_t *pool = calloc((size_t)threads, sizeof *pool);
  pthread_mutex_init(&job.lock, NULL);
  int started = 0;
  while (pool && started < threads && pthread_create(&pool[started], NULL, warm_worker, &job) == 0)
    ++started;
  if (started == 0) warm_worker(&job);  /* no thread: this one does it all */
  for (int t = 0; t < started; ++t) pthread_join(pool[t], NULL);
  pthread_mutex_destroy(&job.lock);
  free(pool);
  free(parts);
  if (job.status) {
    if (err) *err = job.err;
    return job.status;
  }
  if (was_cached) *was_cached = job.all_cached;
  return FLOWGEN_OK;
}
