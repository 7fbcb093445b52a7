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

/* The lines every key starts with: what compiles an image. */
static int key_head(char *buf, size_t size, int arch, flowrt_target target,
                    int nvrtc_version) {
  return snprintf(buf, size,
                  "flowgen module v1\n"
                  "generator=%s\n"
                  "nvrtc=%d\n"
                  "target=%s_%d\n"
                  "options=%s\n",
                  FLOWGEN_VERSION, nvrtc_version,
                  target == FLOWRT_TARGET_PTX ? "compute" : "sm", arch, FG_COMPILE_OPTIONS);
}

char *fg_module_key(const char *source, size_t size, const char *name, int arch,
                    flowrt_target target, int nvrtc_version) {
  XXH128_hash_t h = XXH3_128bits(source, size);
  size_t bytes = 512 + strlen(name);
  char *key = malloc(bytes);
  if (!key) return NULL;
  int n = key_head(key, bytes, arch, target, nvrtc_version);
  snprintf(key + n, bytes - (size_t)n,
           "part=%s\n"
           "source-bytes=%zu\n"
           "source-xxh3-128=%016llx%016llx\n",
           name, size, (unsigned long long)h.high64, (unsigned long long)h.low64);
  return key;
}

void fg_part_name(const flowgen_spec *spec, const char *strategy, char *name, size_t size) {
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(spec, symbol, sizeof symbol);
  snprintf(name, size, "%s_%s.cu", symbol, strategy ? strategy : "pack");
}

flowgen_status fg_part_cache_key(const flowgen_spec *spec, const flowgen_options *opts,
                                 const char *name, int arch, flowrt_target target,
                                 int nvrtc_version, char **out, flowgen_error *err) {
  char *source_key = NULL;
  flowgen_status st = flowgen_source_key(spec, opts, &source_key, err);
  if (st) return st;
  char head[512];
  int n = key_head(head, sizeof head, arch, target, nvrtc_version);
  size_t size = (size_t)n + strlen(name) + strlen(source_key) + 16;
  if ((*out = malloc(size))) snprintf(*out, size, "%spart=%s\n%s", head, name, source_key);
  free(source_key);
  return *out ? FLOWGEN_OK : fg_fail(err, FLOWGEN_NOMEM, "out of memory");
}

static void warn_of(flowrt_warn_fn warn, void *ctx, const char *what,
                    const flowgen_error *e) {
  if (!warn) return;
  char line[FLOWGEN_ERROR_MESSAGE_MAX + 64];
  snprintf(line, sizeof line, "%s: %s", what, e->message);
  warn(ctx, line);
}

/* The image under key in dir, if there is a sound one: out->disk_hit. */
static void lookup(const char *dir, const char *key, flowrt_warn_fn warn, void *warn_ctx,
                   fg_module_image *out) {
  flowgen_error disk_err;
  fg_cache_result found = FG_CACHE_MISS;
  if (fg_cache_get(dir, key, &found, &out->data, &out->size, &disk_err))
    warn_of(warn, warn_ctx, "module cache", &disk_err);
  else if (found == FG_CACHE_INVALID)
    warn_of(warn, warn_ctx, "module cache: replacing an invalid entry", &disk_err);
  out->disk_hit = found == FG_CACHE_HIT;
}

/* Compiles source into out and stores it under key in dir (if any). */
static flowgen_status compile_and_store(const char *dir, unsigned flags, const char *key,
                                        const char *source, size_t size, const char *name,
                                        int arch, flowrt_target target, flowrt_warn_fn warn,
                                        void *warn_ctx, fg_module_image *out,
                                        flowgen_error *err) {
  double t0 = fg_now_ms();
  flowgen_status st = flowrt_compile(source, size, name, arch, target, false,
                                     &out->data, &out->size, NULL, err);
  out->compile_ms = fg_now_ms() - t0;
  flowgen_error disk_err;
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
  return st;
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
  char *key = fg_module_key(source, size, name, arch, target, nvrtc->version);
  if (!key) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  out->source_bytes = size;
  if (dir && !(flags & FG_MODULE_SKIP_LOOKUP)) lookup(dir, key, warn, warn_ctx, out);
  flowgen_status st = FLOWGEN_OK;
  if (!out->disk_hit)
    st = compile_and_store(dir, flags, key, source, size, name, arch, target, warn,
                           warn_ctx, out, err);
  free(key);
  return st;
}

flowgen_status fg_part_obtain(const char *dir, unsigned flags, const flowgen_spec *spec,
                              const flowgen_options *opts, const char *name, int arch,
                              flowrt_target target, flowrt_warn_fn warn, void *warn_ctx,
                              fg_module_image *out, flowgen_error *err) {
  memset(out, 0, sizeof *out);
  flowgen_kernel *k = NULL;
  flowgen_status st;
  double t0 = fg_now_ms();
  if (opts->template_dir) {
    /* A folder's templates may change between runs: render, key the
     * source. */
    st = flowgen_generate(spec, opts, &k, err);
    double generate_ms = fg_now_ms() - t0;
    if (!st)
      st = fg_module_obtain(dir, flags, flowgen_kernel_source(k),
                            flowgen_kernel_source_size(k), name, arch, target, warn,
                            warn_ctx, out, err);
    out->generate_ms = generate_ms;
    flowgen_kernel_free(k);
    return st;
  }
  const fg_nvrtc_api *nvrtc = fg_nvrtc(err);
  if (!nvrtc) return err ? err->status : FLOWGEN_NO_NVRTC;
  char *key = NULL;
  if ((st = fg_part_cache_key(spec, opts, name, arch, target, nvrtc->version, &key, err)))
    return st;
  if (dir && !(flags & FG_MODULE_SKIP_LOOKUP)) lookup(dir, key, warn, warn_ctx, out);
  if (!out->disk_hit) {
    /* Rendered only now: a hit needs no source. */
    t0 = fg_now_ms();
    st = flowgen_generate(spec, opts, &k, err);
    out->generate_ms = fg_now_ms() - t0;
    if (!st) {
      out->source_bytes = flowgen_kernel_source_size(k);
      st = compile_and_store(dir, flags, key, flowgen_kernel_source(k), out->source_bytes,
                             name, arch, target, warn, warn_ctx, out, err);
    }
    flowgen_kernel_free(k);
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
  const flowgen_kernel *plan;
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
  char name[FG_PART_NAME_MAX];
  fg_part_name(j->spec, index < 0 ? NULL : flowgen_kernel_variant(j->plan, index)->strategy,
               name, sizeof name);
  /* The samplers' path: an unreadable entry is a miss, rebuilt and
   * replaced; but the store is what was asked for. */
  fg_module_image image;
  flowgen_status st = fg_part_obtain(j->dir, FG_MODULE_MUST_STORE, j->spec, &gen, name,
                                     j->spec->arch, FLOWRT_TARGET_CUBIN, NULL, NULL, &image,
                                     err);
  if (!st) *cached = image.disk_hit;
  free(image.data);
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
  plan_opts.part = FLOWGEN_PART_PLAN;
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
  job.plan = plan;
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
  flowgen_kernel_free(plan);
  if (job.status) {
    if (err) *err = job.err;
    return job.status;
  }
  if (was_cached) *was_cached = job.all_cached;
  return FLOWGEN_OK;
}
