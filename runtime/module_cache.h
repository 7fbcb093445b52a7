/* Compiled modules: the cache key, and "find on disk or compile and store". */
#ifndef FLOWGEN_MODULE_CACHE_H
#define FLOWGEN_MODULE_CACHE_H

#include "compile.h"

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

/* The compiled image of source: from the disk cache in dir (NULL = no disk
 * cache; skip_lookup = compile and replace the entry) or compiled by NVRTC
 * and then stored there.  A disk problem never fails the call: it goes to
 * warn (which may be NULL). */
FG_HIDDEN flowgen_status fg_module_obtain(const char *dir, bool skip_lookup,
                                          const char *source,
                                          size_t size, const char *name,
                                          int arch, flowrt_target target,
                                          flowrt_warn_fn warn, void *warn_ctx,
                                          fg_module_image *out,
                                          flowgen_error *err);

/* Seconds on a monotonic clock. */
FG_HIDDEN double fg_now_ms(void);

#endif
