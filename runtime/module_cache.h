/* Compiled modules: the cache key, and "find on disk or compile and store"
 * (samplers, and flowrt_cache_warm). */
#ifndef FLOWGEN_MODULE_CACHE_H
#define FLOWGEN_MODULE_CACHE_H

#include "compile.h"

/* The longest cache folder path kept. */
#define FG_PATH_MAX 4096

/* The full cache key of (source, options, arch, target, NVRTC version), a
 * malloc()ed text of a few lines. */
FG_HIDDEN char *fg_module_key(const char *source, size_t size, int arch,
                              flowrt_target target, int nvrtc_version);

typedef struct fg_module_image {
  void *data;        /* cubin or NUL-terminated PTX, malloc()ed */
  size_t size;
  bool disk_hit;     /* read from the disk cache */
  double compile_ms; /* NVRTC time (0 on a hit) */
} fg_module_image;

/* How fg_module_obtain treats the disk cache. */
enum {
  FG_MODULE_SKIP_LOOKUP = 1, /* compile, and replace the entry (the one read
                                was unusable) */
  FG_MODULE_MUST_STORE = 2,  /* a failed store fails the call (cache warm,
                                whose job the disk is) */
};

/* The compiled image of source: from the disk cache in dir (NULL = no disk
 * cache) or compiled by NVRTC and then stored there.  flags: FG_MODULE_*.
 * A disk problem does not fail the call (but a store under
 * FG_MODULE_MUST_STORE): it goes to warn (which may be NULL). */
FG_HIDDEN flowgen_status fg_module_obtain(const char *dir, unsigned flags,
                                          const char *source,
                                          size_t size, const char *name,
                                          int arch, flowrt_target target,
                                          flowrt_warn_fn warn, void *warn_ctx,
                                          fg_module_image *out,
                                          flowgen_error *err);

/* Seconds on a monotonic clock. */
FG_HIDDEN double fg_now_ms(void);

#endif
