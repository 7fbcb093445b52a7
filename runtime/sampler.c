/* The runtime: a CUDA context, its in-memory module cache, and samplers
 * (a loaded kernel plus packed weights on the device). */
#include "cuda_api.h"
#include "disk_cache.h"
#include "flowrt.h"
#include "module_cache.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A part's state.  NONE -> BUILDING (one thread generates, compiles and
 * loads it, without the runtime's lock) -> READY, or back to NONE where
 * that failed (the next use tries again).  Others that need it meanwhile
 * wait on the runtime's `built` condition. */
enum { PART_NONE, PART_BUILDING, PART_READY };

/* One variant's module: its kernel alone (FLOWGEN_PART_VARIANT), compiled,
 * cached and loaded on the first launch it serves. */
typedef struct fg_part {
  atomic_int state;           /* PART_*; READY is stored last (release) */
  CUmodule module;
  CUfunction function;
  flowrt_part_stats stats;
} fg_part;

/* The modules of one spec, shared by its samplers: the pack kernel's (with
 * the conditioning kernel), loaded when the first sampler is created, and
 * one a variant, loaded on first use.  Looked up by the spec (a hit skips
 * generation: microseconds), else by the pack part's key. */
typedef struct fg_module {
  struct fg_module *next;
  int state;                  /* PART_*, of the pack part (under the lock) */
  flowgen_spec spec;          /* with the arch resolved */
  bool by_spec;               /* built-in templates: spec -> source is fixed */
  char *key;                  /* not by_spec: the pack part's source key, or
                                 a template folder's rendered source's key */
  flowgen_kernel *kernel;     /* the plan (a template folder's: with the pack
                                 part's source) */
  CUmodule module;            /* the pack part's */
  CUfunction pack;
  CUfunction cond;            /* <symbol>_cond: conditional models only */
  flowrt_part_stats pack_stats;
  fg_part *parts;             /* one per variant */
  pthread_t *ahead;           /* compile_ahead's threads, joined at close */
  flowrt_runtime *ahead_rt;
  int ahead_count;
  int ahead_next;             /* the next variant they take (under the lock) */
} fg_module;

struct flowrt_runtime {
  const fg_cuda_api *cu;
  CUdevice device;
  CUcontext ctx;
  int device_arch;            /* sm_XY of the device */
  flowgen_device figures;     /* what the planner is told of it; .sms also
                                 sizes the persistent grids */
  int compile_arch;           /* clamped to what NVRTC supports */
  flowrt_target target;       /* cubin, or PTX past NVRTC's newest arch */
  char *template_dir;
  char *tune;                 /* planner overrides (flowrt_options.tune) */
  char cache_dir[FG_PATH_MAX];
  bool disk_cache;
  flowrt_warn_fn warn;
  void *warn_ctx;
  pthread_mutex_t lock;       /* the module list and the parts' states;
                                 never held during NVRTC */
  pthread_cond_t built;       /* a part left PART_BUILDING */
  fg_module *modules;
};

struct flowrt_sampler {
  flowrt_runtime *rt;
  fg_module *mod;
  CUdeviceptr params;
  int dim, hidden, cond;
  bool guidance;
  bool pdl;                   /* sampling kernels launched as the cond kernel's
                                 programmatic dependents */
  CUdeviceptr workspace;      /* the conditioning's first-layer bias */
  int64_t workspace_rows;     /* rows it holds */
  flowrt_stats stats;
};

/* ---- context ---------------------------------------------------------------- */

static flowgen_status push_ctx(flowrt_runtime *rt, flowgen_error *err) {
  return FG_CU(err, rt->cu->cuCtxPushCurrent(rt->ctx));
}

static void pop_ctx(flowrt_runtime *rt) {
  CUcontext popped;
  rt->cu->cuCtxPopCurrent(&popped);
}

/* The device's arch and the figures the planner takes from it: SMs, the
 * shared memory a block may opt in to, cluster launches.  A figure the
 * caller gave (flowrt_options.device_figures, checked) replaces the
 * query's. */
static flowgen_status query_device(flowrt_runtime *rt, const flowgen_device *given,
                                   flowgen_error *err) {
  int major = 0, minor = 0, sms = 0, shared = 0, clusters = 0;
  flowgen_status st;
  if ((st = FG_CU(err, rt->cu->cuDeviceGetAttribute(
                           &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                           rt->device))) ||
      (st = FG_CU(err, rt->cu->cuDeviceGetAttribute(
                           &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                           rt->device))) ||
      (st = FG_CU(err, rt->cu->cuDeviceGetAttribute(
                           &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                           rt->device))) ||
      (st = FG_CU(err, rt->cu->cuDeviceGetAttribute(
                           &shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                           rt->device))) ||
      (st = FG_CU(err, rt->cu->cuDeviceGetAttribute(
                           &clusters, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH,
                           rt->device))))
    return st;
  rt->device_arch = major * 10 + minor;
  flowgen_device *f = &rt->figures;
  f->sms = sms < 1 ? 1 : sms > FLOWGEN_DEVICE_SMS_MAX ? FLOWGEN_DEVICE_SMS_MAX : sms;
  f->shared_per_block = shared >= 1 && shared <= FLOWGEN_DEVICE_SHARED_MAX ? shared : 0;
  f->clusters = clusters ? 1 : -1;
  /* Clusters at once: the planner scales an H200's by the SMs. */
  if (given) {
    if (given->sms) f->sms = given->sms;
    if (given->shared_per_block) f->shared_per_block = given->shared_per_block;
    if (given->clusters) f->clusters = given->clusters;
    for (int i = 0; i < 4; ++i)
      if (given->clusters_at_once[i]) f->clusters_at_once[i] = given->clusters_at_once[i];
  }
  return FLOWGEN_OK;
}

/* The device's own arch if NVRTC can build a cubin for it; else PTX for the
 * newest arch NVRTC knows, which the driver compiles for the device. */
static flowgen_status choose_target(flowrt_runtime *rt, flowgen_error *err) {
  const fg_nvrtc_api *nvrtc = fg_nvrtc(err);
  if (!nvrtc) return err ? err->status : FLOWGEN_NO_NVRTC;
  if (rt->device_arch < FLOWGEN_ARCH_MIN)
    return fg_fail(err, FLOWGEN_UNSUPPORTED,
                   "the device is sm_%d; flowgen needs sm_%d or newer",
                   rt->device_arch, FLOWGEN_ARCH_MIN);
  rt->compile_arch = rt->device_arch;
  rt->target = FLOWRT_TARGET_CUBIN;
  if (rt->device_arch > nvrtc->max_arch) {
    rt->compile_arch = nvrtc->max_arch;
    rt->target = FLOWRT_TARGET_PTX;
  }
  return FLOWGEN_OK;
}

static void setup_disk_cache(flowrt_runtime *rt, const flowrt_options *o) {
  rt->disk_cache = fg_cache_setup(o ? o->cache_dir : NULL, o ? o->disk_cache : -1,
                                  o && o->cache_trust_any, rt->cache_dir,
                                  sizeof rt->cache_dir, rt->warn, rt->warn_ctx);
}

flowgen_status flowrt_open(const flowrt_options *opts, flowrt_runtime **out,
                           flowgen_error *err) {
  *out = NULL;
  flowrt_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  pthread_mutex_init(&rt->lock, NULL);
  pthread_cond_init(&rt->built, NULL);
  if (opts) {
    rt->warn = opts->warn;
    rt->warn_ctx = opts->warn_ctx;
  }
  flowgen_status st =
      opts ? fg_device_check(&opts->device_figures, "device_figures", err) : FLOWGEN_OK;
  int count = 0, ordinal = opts ? opts->device : 0;
  if (!st && ((opts && opts->template_dir && !(rt->template_dir = strdup(opts->template_dir))) ||
              (opts && opts->tune && *opts->tune && !(rt->tune = strdup(opts->tune)))))
    st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  if (!st && !(rt->cu = fg_cuda(err))) st = err ? err->status : FLOWGEN_NO_DRIVER;
  if (!st) st = FG_CU(err, rt->cu->cuDeviceGetCount(&count));
  if (!st && (count == 0 || ordinal < 0 || ordinal >= count))
    st = fg_fail(err, FLOWGEN_NO_DEVICE,
                 count ? "no CUDA device %d (there are %d)" : "no CUDA device",
                 ordinal, count);
  if (!st) st = FG_CU(err, rt->cu->cuDeviceGet(&rt->device, ordinal));
  if (!st) st = query_device(rt, opts ? &opts->device_figures : NULL, err);
  if (!st) st = choose_target(rt, err);
  if (!st) st = FG_CU(err, rt->cu->cuDevicePrimaryCtxRetain(&rt->ctx, rt->device));
  if (st) {
    flowrt_close(rt);
    return st;
  }
  setup_disk_cache(rt, opts);
  *out = rt;
  return FLOWGEN_OK;
}

static void module_free(flowrt_runtime *rt, fg_module *m) {
  for (int i = 0; i < m->ahead_count; ++i) pthread_join(m->ahead[i], NULL);
  free(m->ahead);
  int n = m->kernel ? flowgen_kernel_variant_count(m->kernel) : 0;
  for (int i = 0; i < n && m->parts; ++i)
    if (m->parts[i].module) rt->cu->cuModuleUnload(m->parts[i].module);
  if (m->module) rt->cu->cuModuleUnload(m->module);
  flowgen_kernel_free(m->kernel);
  free(m->parts);
  free(m->key);
  free(m);
}

void flowrt_close(flowrt_runtime *rt) {
  if (!rt) return;
  if (rt->ctx) {
    /* Free even if the context cannot be made current: the driver finds a
     * pointer's or module's context itself, and the host side must go. */
    bool pushed = push_ctx(rt, NULL) == FLOWGEN_OK;
    for (fg_module *m = rt->modules, *next; m; m = next) {
      next = m->next;
      module_free(rt, m);
    }
    if (pushed) pop_ctx(rt);
    rt->cu->cuDevicePrimaryCtxRelease(rt->device);
  }
  pthread_cond_destroy(&rt->built);
  pthread_mutex_destroy(&rt->lock);
  free(rt->template_dir);
  free(rt->tune);
  free(rt);
}

/* ---- modules ---------------------------------------------------------------- */

/* As flowrt_compile builds it (sm_90 as sm_90a: the wgmma variant). */
static void resolve_arch_specific(flowgen_spec *spec) {
  spec->arch_specific = fg_arch_specific(spec->arch);
}

static bool same_spec(const flowgen_spec *a, const flowgen_spec *b) {
  return a->dim == b->dim && flowgen_spec_hidden(a) == flowgen_spec_hidden(b) &&
         a->steps == b->steps && a->solver == b->solver &&
         a->precision == b->precision && a->arch == b->arch &&
         a->arch_specific == b->arch_specific &&
         strcmp(a->name, b->name) == 0 && a->cond == b->cond &&
         flowgen_spec_layers(a) == flowgen_spec_layers(b) && a->act == b->act &&
         a->time.features == b->time.features &&
         flowgen_spec_time_scale(a) == flowgen_spec_time_scale(b) &&
         strcmp(flowgen_spec_input(a), flowgen_spec_input(b)) == 0 &&
         a->guidance == b->guidance;
}

/* The seed model (C=0, L=3, silu, raw time, x,t,c, no guidance): its pack
 * kernel takes the six tensors one by one, as it always has; every other
 * member's takes a Tensors struct. */
static bool is_seed(const flowgen_spec *s) {
  return s->cond == 0 && flowgen_spec_layers(s) == 3 && s->act == FLOWGEN_ACT_SILU &&
         s->time.features == 0 && strcmp(flowgen_spec_input(s), "xtc") == 0 &&
         !s->guidance;
}

/* Compiles (or reads from disk) and loads one part of spec's kernels
 * (opts: its part): from rendered where the caller has its source (a
 * template folder's pack part), else as fg_part_obtain finds or makes it.
 * A disk-cached image that the driver rejects is compiled afresh.  The
 * context is current; the runtime's lock is not held (NVRTC runs here). */
static flowgen_status load_part(flowrt_runtime *rt, const flowgen_spec *spec,
                                const flowgen_kernel *rendered,
                                const flowgen_options *opts, const char *name,
                                CUmodule *module, flowrt_part_stats *stats,
                                flowgen_error *err) {
  const char *dir = rt->disk_cache ? rt->cache_dir : NULL;
  unsigned flags = 0;
  for (int attempt = 0;; ++attempt) {
    fg_module_image image;
    flowgen_status st =
        rendered ? fg_module_obtain(dir, flags, flowgen_kernel_source(rendered),
                                    flowgen_kernel_source_size(rendered), name,
                                    rt->compile_arch, rt->target, rt->warn, rt->warn_ctx,
                                    &image, err)
                 : fg_part_obtain(dir, flags, spec, opts, name, rt->compile_arch, rt->target,
                                  rt->warn, rt->warn_ctx, &image, err);
    if (st) return st;
    stats->disk_hit = image.disk_hit;
    stats->generate_ms += image.generate_ms;
    stats->compile_ms += image.compile_ms;
    if (image.source_bytes) stats->source_bytes = image.source_bytes;
    double t0 = fg_now_ms();
    st = FG_CU(err, rt->cu->cuModuleLoadData(module, image.data));
    stats->load_ms += fg_now_ms() - t0;
    free(image.data);
    if (!st || !image.disk_hit || attempt > 0) return st;
    flags = FG_MODULE_SKIP_LOOKUP; /* the cached image was unusable: compile, replace it */
  }
}

static flowgen_options part_options(const flowrt_runtime *rt, flowgen_part part,
                                    int variant) {
  return (flowgen_options){.template_dir = rt->template_dir, .tune = rt->tune,
                           .device = rt->figures, .part = part, .variant = variant};
}

/* Builds the pack part of m (m->kernel: the plan, or a template folder's
 * rendered pack part): module, pack and cond functions, the variants'
 * slots. */
static flowgen_status build_pack(flowrt_runtime *rt, fg_module *m, flowgen_error *err) {
  int n = flowgen_kernel_variant_count(m->kernel);
  if (!(m->parts = calloc((size_t)n, sizeof *m->parts)))
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  char name[FG_PART_NAME_MAX];
  fg_part_name(&m->spec, NULL, name, sizeof name);
  flowgen_options opts = part_options(rt, FLOWGEN_PART_PACK, 0);
  flowgen_status st =
      load_part(rt, &m->spec, flowgen_kernel_has_pack(m->kernel) ? m->kernel : NULL, &opts,
                name, &m->module, &m->pack_stats, err);
  const flowgen_variant *v0 = flowgen_kernel_variant(m->kernel, 0);
  if (!st) st = FG_CU(err, rt->cu->cuModuleGetFunction(&m->pack, m->module, v0->pack_symbol));
  if (!st && m->spec.cond) {
    char symbol[FLOWGEN_NAME_MAX + 80];
    flowgen_spec_symbol(&m->spec, symbol, sizeof symbol - 8);
    strcat(symbol, "_cond");
    st = FG_CU(err, rt->cu->cuModuleGetFunction(&m->cond, m->module, symbol));
  }
  return st;
}

/* The module of spec, from the list: by the spec (built-in templates), or
 * by the pack part's key.  Under the lock. */
static fg_module *find_module(flowrt_runtime *rt, const flowgen_spec *spec, bool by_spec,
                              const char *key) {
  for (fg_module *m = rt->modules; m; m = m->next) {
    if (by_spec && m->by_spec && same_spec(&m->spec, spec)) return m;
    if (key && m->key && strcmp(m->key, key) == 0) return m;
  }
  return NULL;
}

/* Finds or makes the module for spec: its pack part loaded.  Modules stay
 * loaded while the runtime lives, so a later sampler of the same spec is a
 * memory hit.  Two threads that create the first samplers of one spec at
 * once build it once: the second waits for the first.  The context is
 * current; the lock is taken here, and not held while compiling. */
static flowgen_status get_module(flowrt_runtime *rt, const flowgen_spec *spec,
                                 flowrt_stats *stats, fg_module **out,
                                 flowgen_error *err) {
  /* The plan depends on the spec, the templates, the tune and the device;
   * within one runtime only the spec varies (the device figures are set
   * once, in flowrt_open), so the spec alone finds a module where the
   * templates are the built-in ones and there is no tune.  Otherwise the
   * pack part's key finds it: its source key, or a template folder's
   * rendered source (that folder may have changed). */
  bool by_spec = rt->template_dir == NULL && rt->tune == NULL;
  flowgen_options pack_opts = part_options(rt, FLOWGEN_PART_PACK, 0);
  flowgen_kernel *kernel = NULL;
  char *key = NULL;
  flowgen_status st = FLOWGEN_OK;
  double t0 = fg_now_ms();
  if (rt->template_dir) {
    char name[FG_PART_NAME_MAX];
    fg_part_name(spec, NULL, name, sizeof name);
    st = flowgen_generate(spec, &pack_opts, &kernel, err);
    if (!st && !(key = fg_module_key(flowgen_kernel_source(kernel),
                                     flowgen_kernel_source_size(kernel), name,
                                     rt->compile_arch, rt->target,
                                     flowrt_nvrtc_version())))
      st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  } else if (!by_spec) {
    st = flowgen_source_key(spec, &pack_opts, &key, err);
  }
  stats->generate_ms = fg_now_ms() - t0;
  if (st) {
    flowgen_kernel_free(kernel);
    return st;
  }
  pthread_mutex_lock(&rt->lock);
  fg_module *m;
  while ((m = find_module(rt, spec, by_spec, key)) && m->state != PART_READY)
    pthread_cond_wait(&rt->built, &rt->lock);
  if (m) {
    pthread_mutex_unlock(&rt->lock);
    stats->memory_hit = true;
    flowgen_kernel_free(kernel);
    free(key);
    *out = m;
    return FLOWGEN_OK;
  }
  if (!(m = calloc(1, sizeof *m))) {
    pthread_mutex_unlock(&rt->lock);
    flowgen_kernel_free(kernel);
    free(key);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  }
  m->state = PART_BUILDING;
  m->spec = *spec;
  m->by_spec = by_spec;
  m->kernel = kernel;
  m->key = key;
  m->next = rt->modules;
  rt->modules = m;
  pthread_mutex_unlock(&rt->lock);

  /* The plan alone, where no source was rendered: the pack part's source
   * is rendered only if the disk cache misses it. */
  if (!m->kernel) {
    flowgen_options plan_opts = part_options(rt, FLOWGEN_PART_PLAN, 0);
    t0 = fg_now_ms();
    st = flowgen_generate(spec, &plan_opts, &m->kernel, err);
    stats->generate_ms += fg_now_ms() - t0;
  }
  m->pack_stats.generate_ms = stats->generate_ms;
  if (!st) st = build_pack(rt, m, err);
  stats->disk_hit = m->pack_stats.disk_hit;
  stats->generate_ms = m->pack_stats.generate_ms;
  stats->compile_ms = m->pack_stats.compile_ms;
  stats->load_ms = m->pack_stats.load_ms;

  pthread_mutex_lock(&rt->lock);
  if (st) {
    fg_module **link = &rt->modules;
    while (*link != m) link = &(*link)->next;
    *link = m->next;
  } else {
    m->state = PART_READY;
  }
  pthread_cond_broadcast(&rt->built);
  pthread_mutex_unlock(&rt->lock);
  if (st) {
    module_free(rt, m);
    return st;
  }
  *out = m;
  return FLOWGEN_OK;
}

/* Builds variant i's part (state BUILDING, owned by this thread): finds
 * its image on disk or renders and compiles it, loads it.  No lock held. */
static flowgen_status build_variant(flowrt_runtime *rt, fg_module *m, int i,
                                    CUmodule *module, CUfunction *function,
                                    flowrt_part_stats *stats, flowgen_error *err) {
  flowgen_options opts = part_options(rt, FLOWGEN_PART_VARIANT, i);
  const flowgen_variant *v = flowgen_kernel_variant(m->kernel, i);
  char name[FG_PART_NAME_MAX];
  fg_part_name(&m->spec, v->strategy, name, sizeof name);
  flowgen_status st = push_ctx(rt, err);
  if (st) return st;
  st = load_part(rt, &m->spec, NULL, &opts, name, module, stats, err);
  if (!st) st = FG_CU(err, rt->cu->cuModuleGetFunction(function, *module, v->symbol));
  if (!st && v->nonportable_cluster)
    st = FG_CU(err, rt->cu->cuFuncSetAttribute(
                        *function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  if (!st && v->shared_bytes > 48 * 1024)
    st = FG_CU(err, rt->cu->cuFuncSetAttribute(
                        *function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        (int)v->shared_bytes));
  if (st && *module) {
    rt->cu->cuModuleUnload(*module);
    *module = NULL;
  }
  pop_ctx(rt);
  return st;
}

/* Makes variant i of m loaded: at once where it is, else builds it here, or
 * waits for the thread that builds it.  *built says whether this call
 * built it. */
static flowgen_status ensure_variant(flowrt_runtime *rt, fg_module *m, int i, bool *built,
                                     flowgen_error *err) {
  fg_part *p = &m->parts[i];
  if (built) *built = false;
  if (atomic_load_explicit(&p->state, memory_order_acquire) == PART_READY) return FLOWGEN_OK;
  pthread_mutex_lock(&rt->lock);
  while (atomic_load_explicit(&p->state, memory_order_relaxed) == PART_BUILDING)
    pthread_cond_wait(&rt->built, &rt->lock);
  if (atomic_load_explicit(&p->state, memory_order_relaxed) == PART_READY) {
    pthread_mutex_unlock(&rt->lock);
    return FLOWGEN_OK;
  }
  atomic_store_explicit(&p->state, PART_BUILDING, memory_order_relaxed);
  pthread_mutex_unlock(&rt->lock);

  CUmodule module = NULL;
  CUfunction function = NULL;
  flowrt_part_stats stats = {0};
  flowgen_status st = build_variant(rt, m, i, &module, &function, &stats, err);

  pthread_mutex_lock(&rt->lock);
  if (!st) {
    stats.loaded = true;
    p->module = module;
    p->function = function;
    p->stats = stats;
  }
  atomic_store_explicit(&p->state, st ? PART_NONE : PART_READY, memory_order_release);
  pthread_cond_broadcast(&rt->built);
  pthread_mutex_unlock(&rt->lock);
  if (built) *built = !st;
  return st;
}

/* compile_ahead: each thread takes the next variant not yet taken. */
static void *compile_ahead(void *arg) {
  fg_module *m = arg;
  flowrt_runtime *rt = m->ahead_rt;
  int n = flowgen_kernel_variant_count(m->kernel);
  for (;;) {
    pthread_mutex_lock(&rt->lock);
    int i = m->ahead_next < n ? m->ahead_next++ : -1;
    pthread_mutex_unlock(&rt->lock);
    if (i < 0) return NULL;
    /* A failure is the launch's to report: it tries again. */
    ensure_variant(rt, m, i, NULL, NULL);
  }
}

/* Starts compile_ahead's threads for m, once: min(cores, variants). */
static void start_ahead(flowrt_runtime *rt, fg_module *m) {
  int n = flowgen_kernel_variant_count(m->kernel);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores < 1 ? 1 : cores < n ? (int)cores : n;
  pthread_mutex_lock(&rt->lock);
  bool start = !m->ahead && (m->ahead = calloc((size_t)threads, sizeof *m->ahead));
  if (start) m->ahead_rt = rt;
  pthread_mutex_unlock(&rt->lock);
  /* Only this thread starts them (m->ahead was set under the lock). */
  for (int t = 0; start && t < threads; ++t) {
    if (pthread_create(&m->ahead[t], NULL, compile_ahead, m) != 0) break;
    pthread_mutex_lock(&rt->lock);
    m->ahead_count = t + 1;
    pthread_mutex_unlock(&rt->lock);
  }
}

/* ---- samplers --------------------------------------------------------------- */

/* The pack kernel over the layers on the device: the seed's takes the six
 * tensors (w1, b1, w2, b2, w3, b3) and params; the others take
 *   struct Tensors { const float* w[kLayers]; const float* b[kLayers]; }
 * by value, then params: 2 L pointers in a row, w's first. */
static flowgen_status upload_weights(flowrt_sampler *s,
                                     const flowrt_weights *w,
                                     flowgen_error *err) {
  flowrt_runtime *rt = s->rt;
  const int L = w->layers;
  size_t counts[2 * FLOWGEN_LAYERS_MAX], total = 0;
  const float *host[2 * FLOWGEN_LAYERS_MAX];
  for (int i = 0; i < L; ++i) {
    size_t rows = i == L - 1 ? (size_t)w->dim : (size_t)w->hidden;
    size_t cols = i == 0 ? (size_t)(w->dim + w->time_width + w->cond) : (size_t)w->hidden;
    counts[i] = rows * cols;
    counts[L + i] = rows;
    host[i] = w->w[i];
    host[L + i] = w->b[i];
  }
  for (int i = 0; i < 2 * L; ++i) total += counts[i];
  const flowgen_variant *v = flowgen_kernel_variant(s->mod->kernel, 0);
  CUdeviceptr raw = 0;
  flowgen_status st = FG_CU(err, rt->cu->cuMemAlloc(&raw, total * sizeof(float)));
  if (!st) st = FG_CU(err, rt->cu->cuMemAlloc(&s->params, v->params_bytes));
  CUdeviceptr tensors[2 * FLOWGEN_LAYERS_MAX];
  size_t offset = 0;
  for (int i = 0; i < 2 * L && !st; ++i) {
    tensors[i] = raw + offset * sizeof(float);
    st = FG_CU(err, rt->cu->cuMemcpyHtoD(tensors[i], host[i], counts[i] * sizeof(float)));
    offset += counts[i];
  }
  if (!st) {
    CUdeviceptr *t = tensors;
    void *seed_args[] = {&t[0], &t[3], &t[1], &t[4], &t[2], &t[5], &s->params};
    void *family_args[] = {tensors, &s->params};
    size_t floats = v->params_bytes / sizeof(float);
    unsigned blocks = (unsigned)((floats + (size_t)v->pack_threads - 1) / (size_t)v->pack_threads);
    CUlaunchConfig cfg = {.gridDimX = blocks > 65535 ? 65535 : blocks ? blocks : 1,
                          .gridDimY = 1, .gridDimZ = 1,
                          .blockDimX = (unsigned)v->pack_threads,
                          .blockDimY = 1, .blockDimZ = 1};
    st = FG_CU(err, rt->cu->cuLaunchKernelEx(&cfg, s->mod->pack,
                                             is_seed(&s->mod->spec) ? seed_args : family_args,
                                             NULL));
  }
  if (!st) st = FG_CU(err, rt->cu->cuCtxSynchronize());
  if (raw) rt->cu->cuMemFree(raw);
  return st;
}

/* The hinted variant's build, in a thread of its own while the weights
 * go up and the pack kernel runs. */
typedef struct hint_job {
  flowrt_runtime *rt;
  fg_module *m;
  int index;
  bool built;
  flowgen_status status;
  flowgen_error err;
} hint_job;

static void *build_hinted(void *arg) {
  hint_job *j = arg;
  j->status = ensure_variant(j->rt, j->m, j->index, &j->built, &j->err);
  /* a persistent grid's fallback too: its launch may be refused */
  const flowgen_variant *v = flowgen_kernel_variant(j->m->kernel, j->index);
  if (!j->status && v->cooperative)
    j->status = ensure_variant(j->rt, j->m, v->fallback, NULL, &j->err);
  return NULL;
}

/* The index of the variant that serves batch rows in m's plan. */
static int variant_for(const fg_module *m, int64_t rows) {
  const flowgen_variant *v = flowgen_kernel_pick(m->kernel, rows);
  return v ? (int)(v - flowgen_kernel_variant(m->kernel, 0)) : -1;
}

flowgen_status flowrt_sampler_create_ex(flowrt_runtime *rt, const flowgen_spec *spec,
                                        const flowrt_weights *weights,
                                        const flowrt_sampler_options *opts,
                                        flowrt_sampler **out, flowgen_error *err) {
  if (!out) return fg_fail(err, FLOWGEN_INVALID, "out is NULL");
  *out = NULL;
  if (!rt || !spec || !weights)
    return fg_fail(err, FLOWGEN_INVALID, "runtime, spec and weights are required");
  if (opts && opts->batch_hint < 0)
    return fg_fail(err, FLOWGEN_INVALID, "options.batch_hint: %lld is negative",
                   (long long)opts->batch_hint);
  flowgen_status st = flowgen_spec_validate(spec, err);
  if (!st) st = flowrt_weights_check(weights, spec, err);
  if (st) return st;
  flowrt_sampler *s = calloc(1, sizeof *s);
  if (!s) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  s->rt = rt;
  s->dim = spec->dim;
  s->hidden = flowgen_spec_hidden(spec);
  s->cond = spec->cond;
  s->guidance = spec->guidance;
  flowgen_spec resolved = *spec;
  resolved.arch = rt->compile_arch;
  resolve_arch_specific(&resolved);
  /* From sm_90 on, a conditional model's sampling kernels wait for the
   * cond kernel's output (griddepcontrol.wait, templates/lib.lua) and may
   * start before it ends: their weights' loads overlap it. */
  s->pdl = spec->cond > 0 && resolved.arch >= 90;

  st = push_ctx(rt, err);
  if (st) {
    free(s);
    return st;
  }
  double t0 = fg_now_ms();
  st = get_module(rt, &resolved, &s->stats, &s->mod, err);
  s->stats.module_ms = fg_now_ms() - t0;
  /* The hinted variant compiles while the weights go up and are packed. */
  hint_job job = {.rt = rt, .m = s->mod, .index = -1};
  pthread_t thread;
  bool threaded = false;
  if (!st && opts && opts->batch_hint > 0) {
    job.index = variant_for(s->mod, opts->batch_hint);
    threaded = job.index >= 0 && pthread_create(&thread, NULL, build_hinted, &job) == 0;
  }
  if (!st && opts && opts->compile_ahead) start_ahead(rt, s->mod);
  if (!st) {
    t0 = fg_now_ms();
    st = upload_weights(s, weights, err);
    s->stats.upload_ms = fg_now_ms() - t0;
  }
  if (threaded) pthread_join(thread, NULL);
  else if (job.index >= 0 && !st) build_hinted(&job);
  if (!st && job.index >= 0 && job.status) {
    st = job.status;
    if (err) *err = job.err;
  }
  if (!st && job.index >= 0) {
    const flowrt_part_stats *p = &s->mod->parts[job.index].stats;
    if (job.built) {
      s->stats.generate_ms += p->generate_ms;
      s->stats.compile_ms += p->compile_ms;
      s->stats.load_ms += p->load_ms;
    }
    /* its wait after the upload: what it added to the module's figure */
    s->stats.module_ms = fg_now_ms() - t0 - s->stats.upload_ms + s->stats.module_ms;
  }
  if (st && s->params) rt->cu->cuMemFree(s->params);
  pop_ctx(rt);
  if (st) {
    free(s);
    return st;
  }
  *out = s;
  return FLOWGEN_OK;
}

flowgen_status flowrt_sampler_create(flowrt_runtime *rt, const flowgen_spec *spec,
                                     const flowrt_weights *weights,
                                     flowrt_sampler **out, flowgen_error *err) {
  return flowrt_sampler_create_ex(rt, spec, weights, NULL, out, err);
}

flowgen_status flowrt_sampler_prepare(flowrt_sampler *s, int64_t batch,
                                      flowgen_error *err) {
  if (!s) return fg_fail(err, FLOWGEN_INVALID, "sampler is NULL");
  if (batch < -1)
    return fg_fail(err, FLOWGEN_INVALID, "batch %lld is negative (-1: every variant)",
                   (long long)batch);
  fg_module *m = s->mod;
  int n = flowgen_kernel_variant_count(m->kernel);
  for (int i = 0; i < n; ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(m->kernel, i);
    bool serves = batch < 0 || (batch >= v->min_batch && (v->max_batch < 0 || batch <= v->max_batch));
    if (batch == 0 || !serves) continue;
    flowgen_status st = ensure_variant(s->rt, m, i, NULL, err);
    /* a persistent grid's fallback too: its launch may be refused */
    if (!st && v->cooperative) st = ensure_variant(s->rt, m, v->fallback, NULL, err);
    if (st) return st;
  }
  return FLOWGEN_OK;
}

bool flowrt_sampler_part_stats(const flowrt_sampler *s, int index, flowrt_part_stats *out) {
  if (!s || !out) return false;
  const fg_module *m = s->mod;
  if (index == -1) {
    *out = m->pack_stats;
    out->loaded = true;
    return true;
  }
  if (index < 0 || index >= flowgen_kernel_variant_count(m->kernel)) return false;
  pthread_mutex_lock(&s->rt->lock);
  *out = m->parts[index].stats;
  pthread_mutex_unlock(&s->rt->lock);
  return out->loaded;
}

void flowrt_sampler_destroy(flowrt_sampler *s) {
  if (!s) return;
  flowrt_runtime *rt = s->rt;
  pthread_mutex_lock(&rt->lock);
  bool pushed = push_ctx(rt, NULL) == FLOWGEN_OK;
  if (s->params) rt->cu->cuMemFree(s->params);
  if (s->workspace) rt->cu->cuMemFree(s->workspace);
  if (pushed) pop_ctx(rt);
  pthread_mutex_unlock(&rt->lock);
  free(s);
}

const flowrt_stats *flowrt_sampler_stats(const flowrt_sampler *s) {
  return &s->stats;
}

const flowgen_kernel *flowrt_sampler_kernel(const flowrt_sampler *s) {
  return s->mod->kernel;
}

/* ---- launches --------------------------------------------------------------- */

/* The arguments of one launch. */
typedef struct launch_args {
  CUdeviceptr x0, x, cond, null_cond;
  long long rows;
  float guidance;
} launch_args;

/* Launches variant v of s's module on batch rows (the context is current).
 * The sampling kernels take (x0, x, batch, params), and for a conditional
 * model also (cond_bias, guidance): the workspace the cond kernel filled. */
static CUresult launch(flowrt_sampler *s, const flowgen_variant *v, launch_args *a,
                       void *stream) {
  /* (loaded: sample() made sure, with an acquire of its state) */
  flowrt_runtime *rt = s->rt;
  int64_t blocks = (a->rows + v->rows_per_block - 1) / v->rows_per_block * v->cluster_blocks;
  if (v->grid_blocks_per_sm > 0) blocks = (int64_t)rt->figures.sms * v->grid_blocks_per_sm;
  /* A cooperative launch (every block resident at once), else a cluster
   * launch where the blocks make clusters, as the variant's launch
   * description says and the generated host launcher does. */
  CUlaunchAttribute attrs[2];
  unsigned n = 0;
  if (v->cooperative) {
    attrs[n] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE};
    attrs[n++].value.cooperative = 1;
  } else if (v->cluster_blocks > 1) {
    attrs[n] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
    attrs[n].value.clusterDim.x = (unsigned)v->cluster_blocks;
    attrs[n].value.clusterDim.y = attrs[n].value.clusterDim.z = 1;
    ++n;
  }
  /* After the cond kernel, programmatically: the kernel's prologue overlaps
   * it (a cooperative grid waits for it whole, as before). */
  if (s->pdl && !v->cooperative) {
    attrs[n] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  CUlaunchConfig cfg = {.gridDimX = (unsigned)blocks, .gridDimY = 1, .gridDimZ = 1,
                        .blockDimX = (unsigned)v->block_threads,
                        .blockDimY = 1, .blockDimZ = 1,
                        .sharedMemBytes = (unsigned)v->shared_bytes,
                        .hStream = (CUstream)stream,
                        .attrs = n ? attrs : NULL,
                        .numAttrs = n};
  void *args[] = {&a->x0, &a->x, &a->rows, &s->params, &s->workspace, &a->guidance};
  const flowgen_kernel *k = s->mod->kernel;
  int index = (int)(v - flowgen_kernel_variant(k, 0));
  return rt->cu->cuLaunchKernelEx(&cfg, s->mod->parts[index].function, args, NULL);
}

/* The conditioning's bias of the first layer, once per launch:
 *   <name>_cond(cond, null_cond, batch, params, cond_bias)
 * writes batch x H floats (guided: 2H a row, the conditional then the
 * null bias).  Launched as the plan describes it: a grid of
 * cond_blocks_per_sm a SM, whose blocks take the kernel's tiles in turn
 * (whatever the batch: 8 tiles at B = 1, thousands at B = 65536). */
static CUresult launch_cond(flowrt_sampler *s, launch_args *a, void *stream) {
  const flowgen_variant *v0 = flowgen_kernel_variant(s->mod->kernel, 0);
  int64_t blocks = (int64_t)v0->cond_blocks_per_sm * s->rt->figures.sms;
  CUlaunchConfig cfg = {.gridDimX = (unsigned)(blocks > 0 ? blocks : 1),
                        .gridDimY = 1, .gridDimZ = 1,
                        .blockDimX = (unsigned)v0->cond_threads,
                        .blockDimY = 1, .blockDimZ = 1,
                        .hStream = (CUstream)stream};
  void *args[] = {&a->cond, &a->null_cond, &a->rows, &s->params, &s->workspace};
  return s->rt->cu->cuLaunchKernelEx(&cfg, s->mod->cond, args, NULL);
}

size_t flowrt_sampler_workspace_bytes(const flowrt_sampler *s, int64_t batch) {
  if (!s || !s->cond || batch <= 0) return 0;
  return (size_t)batch * (size_t)s->hidden * (s->guidance ? 2 : 1) * sizeof(float);
}

/* Grows the workspace to rows (the context is current).  Never during
 * graph capture: the allocation would not be part of the graph, and the
 * old buffer may be in use by work already captured. */
static flowgen_status grow_workspace(flowrt_sampler *s, int64_t rows, void *stream,
                                     bool check_capture, flowgen_error *err) {
  if (rows <= s->workspace_rows) return FLOWGEN_OK;
  flowrt_runtime *rt = s->rt;
  flowgen_status st;
  if (check_capture) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    st = FG_CU(err, rt->cu->cuStreamIsCapturing((CUstream)stream, &capture));
    if (st) return st;
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
      return fg_fail(err, FLOWGEN_INVALID,
                     "batch %lld needs a workspace of %zu bytes (the sampler holds "
                     "%lld rows) and it cannot grow during CUDA graph capture: call "
                     "flowrt_sampler_reserve(sampler, %lld) before the capture",
                     (long long)rows, flowrt_sampler_workspace_bytes(s, rows),
                     (long long)s->workspace_rows, (long long)rows);
  }
  CUdeviceptr grown = 0;
  st = FG_CU(err, rt->cu->cuMemAlloc(&grown, flowrt_sampler_workspace_bytes(s, rows)));
  if (st) return st;
  /* The old buffer may still be read by this sampler's last launch. */
  if (s->workspace) {
    st = FG_CU(err, rt->cu->cuCtxSynchronize());
    if (st) {
      rt->cu->cuMemFree(grown);
      return st;
    }
    rt->cu->cuMemFree(s->workspace);
  }
  s->workspace = grown;
  s->workspace_rows = rows;
  return FLOWGEN_OK;
}

flowgen_status flowrt_sampler_reserve(flowrt_sampler *s, int64_t max_batch,
                                      flowgen_error *err) {
  if (!s) return fg_fail(err, FLOWGEN_INVALID, "sampler is NULL");
  if (max_batch < 0)
    return fg_fail(err, FLOWGEN_INVALID, "max_batch %lld is negative", (long long)max_batch);
  /* max_batch's variant too: a capture at that batch then needs nothing */
  flowgen_status st = max_batch > 0 ? flowrt_sampler_prepare(s, max_batch, err) : FLOWGEN_OK;
  if (st || !s->cond || max_batch <= s->workspace_rows) return st;
  st = push_ctx(s->rt, err);
  if (st) return st;
  st = grow_workspace(s, max_batch, NULL, false, err);
  pop_ctx(s->rt);
  return st;
}

/* The checks every launch makes, before any driver call. */
static flowgen_status check_launch(const flowrt_sampler *s, int64_t batch, uint64_t x0,
                                   uint64_t x, uint64_t cond, uint64_t null_cond,
                                   float guidance, flowgen_error *err) {
  if (!s) return fg_fail(err, FLOWGEN_INVALID, "sampler is NULL");
  if (batch < 0)
    return fg_fail(err, FLOWGEN_INVALID, "batch %lld is negative", (long long)batch);
  if (s->cond && !cond)
    return fg_fail(err, FLOWGEN_INVALID,
                   "the model is conditional (C=%d): give cond, a device pointer to "
                   "batch x %d floats (flowrt_sample_cond)",
                   s->cond, s->cond);
  if (!s->cond && (cond || null_cond))
    return fg_fail(err, FLOWGEN_INVALID,
                   "%s given, but the model has no conditioning (C=0)",
                   cond ? "cond" : "null_cond");
  if (!isfinite(guidance))
    return fg_fail(err, FLOWGEN_INVALID, "guidance %g is not finite", guidance);
  if (!s->guidance && guidance != 1.0f)
    return fg_fail(err, FLOWGEN_INVALID,
                   "guidance %g, but the sampler's spec has no guidance (its field "
                   "is the conditional one, w = 1): set spec.guidance",
                   guidance);
  if (!s->guidance && null_cond)
    return fg_fail(err, FLOWGEN_INVALID,
                   "null_cond given, but the sampler's spec has no guidance");
  if (batch > 0 && (!x0 || !x))
    return fg_fail(err, FLOWGEN_INVALID, "x0 and x must be device pointers");
  return FLOWGEN_OK;
}

/* Variant index loaded before its first launch: built here (or waited
 * for) unless the stream is capturing a graph, where a module load does not
 * belong (it is no stream work, and may synchronize): a clear error then. */
static flowgen_status load_for_launch(flowrt_sampler *s, int index, int64_t rows,
                                      void *stream, flowgen_error *err) {
  fg_part *p = &s->mod->parts[index];
  if (atomic_load_explicit(&p->state, memory_order_acquire) == PART_READY) return FLOWGEN_OK;
  flowrt_runtime *rt = s->rt;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  flowgen_status st = push_ctx(rt, err);
  if (st) return st;
  st = FG_CU(err, rt->cu->cuStreamIsCapturing((CUstream)stream, &capture));
  pop_ctx(rt);
  if (st) return st;
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return fg_fail(err, FLOWGEN_INVALID,
                   "batch %lld is served by variant %d (%s), which is not loaded yet, and "
                   "a module cannot be loaded during CUDA graph capture: call "
                   "flowrt_sampler_reserve(sampler, %lld) (or flowrt_sampler_prepare) "
                   "before the capture, or create the sampler with "
                   "flowrt_sampler_options.batch_hint = %lld",
                   (long long)rows, index, flowgen_kernel_variant(s->mod->kernel, index)->strategy,
                   (long long)rows, (long long)rows);
  return ensure_variant(rt, s->mod, index, NULL, err);
}

static flowgen_status sample(flowrt_sampler *s, launch_args *a, void *stream,
                             flowgen_error *err) {
  const flowgen_kernel *k = s->mod->kernel;
  const flowgen_variant *v = flowgen_kernel_pick(k, a->rows);
  if (!v)
    return fg_fail(err, FLOWGEN_INTERNAL, "no kernel variant for batch %lld", a->rows);
  if ((a->rows + v->rows_per_block - 1) / v->rows_per_block * v->cluster_blocks > 0x7fffffff)
    return fg_fail(err, FLOWGEN_INVALID, "batch %lld needs more than 2^31-1 blocks", a->rows);
  flowrt_runtime *rt = s->rt;
  int index = (int)(v - flowgen_kernel_variant(k, 0));
  const flowgen_variant *fallback = v->cooperative ? flowgen_kernel_variant(k, v->fallback) : NULL;
  flowgen_status st = load_for_launch(s, index, a->rows, stream, err);
  if (!st && fallback) st = load_for_launch(s, v->fallback, a->rows, stream, err);
  if (!st) st = push_ctx(rt, err);
  if (st) return st;
  if (s->cond) st = grow_workspace(s, a->rows, stream, true, err);
  if (!st && s->cond) st = fg_cuda_check(launch_cond(s, a, stream), "cuLaunchKernelEx", err);
  if (st) {
    pop_ctx(rt);
    return st;
  }
  CUresult result = launch(s, v, a, stream);
  /* Where fewer SMs are ours than the device has (MPS, green contexts), a
   * cooperative grid cannot be resident at once: its fallback serves the
   * batch instead (every variant serves any batch; the ranges are for
   * speed), as in the generated host launcher. */
  if (result == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE && fallback)
    result = launch(s, fallback, a, stream);
  st = fg_cuda_check(result, "cuLaunchKernelEx", err);
  pop_ctx(rt);
  return st;
}

flowgen_status flowrt_sample(flowrt_sampler *s, uint64_t x0, uint64_t x,
                             int64_t batch, void *stream, flowgen_error *err) {
  return flowrt_sample_cond(s, x0, x, 0, 0, 1.0f, batch, stream, err);
}

flowgen_status flowrt_sample_cond(flowrt_sampler *s, uint64_t x0, uint64_t x,
                                  uint64_t cond, uint64_t null_cond, float guidance,
                                  int64_t batch, void *stream, flowgen_error *err) {
  flowgen_status st = check_launch(s, batch, x0, x, cond, null_cond, guidance, err);
  if (st || batch == 0) return st;
  launch_args a = {(CUdeviceptr)x0, (CUdeviceptr)x, (CUdeviceptr)cond,
                   (CUdeviceptr)null_cond, batch, guidance};
  return sample(s, &a, stream, err);
}

flowgen_status flowrt_sample_host(flowrt_sampler *s, const float *x0, float *x,
                                  int64_t batch, flowgen_error *err) {
  return flowrt_sample_host_cond(s, x0, x, NULL, NULL, 1.0f, batch, err);
}

flowgen_status flowrt_sample_host_cond(flowrt_sampler *s, const float *x0, float *x,
                                       const float *cond, const float *null_cond,
                                       float guidance, int64_t batch,
                                       flowgen_error *err) {
  if (batch > 0 && (!x0 || !x))
    return fg_fail(err, FLOWGEN_INVALID, "x0 and x are required");
  /* The device pointers' checks, on the host arrays. */
  flowgen_status st = check_launch(s, batch, (uintptr_t)x0, (uintptr_t)x, (uintptr_t)cond,
                                   (uintptr_t)null_cond, guidance, err);
  if (!st && cond && batch > 0) st = fg_check_cond_finite("cond", cond, batch, s->cond, err);
  if (!st && null_cond) st = fg_check_cond_finite("null_cond", null_cond, 1, s->cond, err);
  if (st || batch == 0) return st;
  flowrt_runtime *rt = s->rt;
  size_t x_bytes = (size_t)batch * (size_t)s->dim * sizeof(float);
  size_t c_bytes = cond ? (size_t)batch * (size_t)s->cond * sizeof(float) : 0;
  size_t n_bytes = null_cond ? (size_t)s->cond * sizeof(float) : 0;
  CUdeviceptr buf = 0;
  st = push_ctx(rt, err);
  if (st) return st;
  /* One buffer: x, then the conditioning, then the null conditioning. */
  st = FG_CU(err, rt->cu->cuMemAlloc(&buf, x_bytes + c_bytes + n_bytes));
  if (!st) st = FG_CU(err, rt->cu->cuMemcpyHtoD(buf, x0, x_bytes));
  if (!st && c_bytes) st = FG_CU(err, rt->cu->cuMemcpyHtoD(buf + x_bytes, cond, c_bytes));
  if (!st && n_bytes)
    st = FG_CU(err, rt->cu->cuMemcpyHtoD(buf + x_bytes + c_bytes, null_cond, n_bytes));
  if (!st)
    st = flowrt_sample_cond(s, buf, buf, c_bytes ? buf + x_bytes : 0,
                            n_bytes ? buf + x_bytes + c_bytes : 0, guidance, batch, NULL,
                            err);
  if (!st) st = FG_CU(err, rt->cu->cuMemcpyDtoH(x, buf, x_bytes));
  if (buf) rt->cu->cuMemFree(buf);
  pop_ctx(rt);
  return st;
}
