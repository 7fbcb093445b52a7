/* Compiled modules: the cache key, and "find on disk or compile and store"
 * (samplers, and flowrt_cache_warm). */
#ifndef FLOWGEN_MODULE_CACHE_H
#define FLOWGEN_MODULE_CACHE_H

#include "compile.h"

/* The longest cache folder path kept. */
#define FG_PATH_MAX 4096

/* The full cache key of (source, its file name, options, arch, target,
 * NVRTC version), a malloc()ed text of a few lines. */
FG_HIDDEN char *fg_module_key(const char *source, size_t size, const char *name, int arch,
                              flowrt_target target, int nvrtc_version);

/* The full cache key of one part of spec's kernels (opts: built-in
 * templates, part PACK or VARIANT; name: fg_part_name's) made from its
 * source key (flowgen_source_key), as fg_part_obtain looks it up: no
 * source needed.  *out malloc()ed. */
FG_HIDDEN flowgen_status fg_part_cache_key(const flowgen_spec *spec,
                                           const flowgen_options *opts, const char *name,
                                           int arch, flowrt_target target, int nvrtc_version,
                                           char **out, flowgen_error *err);

/* The file name NVRTC gives a part (and its log shows): the symbol, and a
 * variant's strategy or "pack". */
#define FG_PART_NAME_MAX (FLOWGEN_NAME_MAX + 160)
FG_HIDDEN void fg_part_name(const flowgen_spec *spec, const char *strategy, char *name,
                            size_t size);

typedef struct fg_module_image {
  void *data;          /* cubin or NUL-terminated PTX, malloc()ed */
  size_t size;
  bool disk_hit;       /* read from the disk cache */
  double generate_ms;  /* rendering the source (fg_part_obtain; 0 on a hit
                          of a built-in templates' part) */
  double compile_ms;   /* NVRTC time (0 on a hit) */
  size_t source_bytes; /* the source's size (0 where not rendered) */
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

/* The compiled image of one part of spec's kernels (opts: part PACK or
 * VARIANT), as fg_module_obtain.  With the built-in templates the part is
 * keyed by its source key and rendered only on a miss; templates from a
 * folder are rendered first and keyed by their source. */
FG_HIDDEN flowgen_status fg_part_obtain(const char *dir, unsigned flags,
                                        const flowgen_spec *spec, const flowgen_options *opts,
                                        const char *name, int arch, flowrt_target target,
                                        flowrt_warn_fn warn, void *warn_ctx,
                                        fg_module_image *out, flowgen_error *err);

/* Milliseconds on a monotonic clock. */
FG_HIDDEN double fg_now_ms(void);

#endif
