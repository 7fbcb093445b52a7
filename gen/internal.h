/* Internal helpers shared by the generator, the runtime on it and the CLI.
 * Not installed. */
#ifndef FLOWGEN_INTERNAL_H
#define FLOWGEN_INTERNAL_H

#include "flowgen.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define FG_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define FG_HIDDEN __attribute__((visibility("hidden")))
#else
#define FG_PRINTF(fmt, args)
#define FG_HIDDEN
#endif

/* Records status and a formatted message in err (if any); returns status. */
FG_HIDDEN flowgen_status fg_fail(flowgen_error *err, flowgen_status status,
                                 const char *fmt, ...) FG_PRINTF(3, 4);
FG_HIDDEN flowgen_status fg_vfail(flowgen_error *err, flowgen_status status,
                                  const char *fmt, va_list ap);
/* FLOWGEN_INPUT naming the first NaN or infinity of a rows x cols
 * conditioning array (what: "cond", "null_cond"), which would come out as
 * NaN samples (runtime/reference.c; the sampler's host path too). */
FG_HIDDEN flowgen_status fg_check_cond_finite(const char *what, const float *v, int64_t rows,
                                              int cols, flowgen_error *err);
/* Puts "context: " in front of err's message (keeps its status). */
FG_HIDDEN void fg_error_prefix(flowgen_error *err, const char *fmt, ...)
    FG_PRINTF(2, 3);
/* Clears err to FLOWGEN_OK with an empty message. */
FG_HIDDEN void fg_error_clear(flowgen_error *err);

/* Strict decimal parsing: digits only (no sign, no spaces), in [min, max]. */
typedef enum fg_parse_result {
  FG_PARSE_OK,
  FG_PARSE_NOT_A_NUMBER,
  FG_PARSE_OUT_OF_RANGE,  /* overflow included */
} fg_parse_result;
FG_HIDDEN fg_parse_result fg_parse_int(const char *text, long long min,
                                       long long max, long long *out);

/* Checks each field of a device description: 0 (unknown) or in its
 * range; the message names the first bad one as name.field
 * (FLOWGEN_INVALID). */
FG_HIDDEN flowgen_status fg_device_check(const flowgen_device *device,
                                         const char *name, flowgen_error *err);

/* A template or other file built into the library at build time. */
typedef struct fg_embedded_file {
  const char *name;           /* "plan.lua", "tiled.cut", ... */
  const unsigned char *data;  /* not NUL-terminated */
  size_t size;
} fg_embedded_file;

extern const fg_embedded_file fg_builtin_templates[];  /* ends with {NULL} */
extern const fg_embedded_file fg_builtin_engine[];     /* ends with {NULL} */
extern const fg_embedded_file fg_builtin_models[];     /* ends with {NULL} */
/* The digest of the templates, the engine and the generator's C sources
 * (tools/embed.c --digest): two builds that share it generate alike. */
extern const char fg_builtin_digest[];

#endif
