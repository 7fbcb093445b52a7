/*
 * flowgen runtime: JIT-compile a generated kernel at program start (NVRTC),
 * cache the compiled module (memory and disk), upload weights and sample.
 *
 * The CUDA driver (libcuda.so.1) and NVRTC are opened on first use, so a
 * program linked with flowgen runs where neither exists; there the calls that
 * need them return FLOWGEN_NO_DRIVER / FLOWGEN_NO_NVRTC / FLOWGEN_NO_DEVICE.
 * Errors are a flowgen_status plus the detail in a flowgen_error (the CUDA
 * call and its result, the NVRTC log, the weights file and tensor).
 */
#ifndef FLOWRT_H
#define FLOWRT_H

#include "flowgen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weights (host, fp32, PyTorch layout) ------------------------------- */

/* The Linear layers of a model of the family (flowgen.h's flowgen_spec),
 * row-major as in PyTorch's state_dict: w[0] is H x (D + T + C), its
 * columns in the input order (x: D, tau(t): T, c: C); w[i] is H x H for
 * 0 < i < L - 1; w[L - 1] is D x H; b[i] has w[i]'s rows.  What the
 * shapes cannot tell (act, time, input) comes from the file's metadata,
 * else the caller's expected spec, else the seed's (silu, raw, x,t,c). */
typedef struct flowrt_weights {
  int dim;                  /* D */
  int hidden;               /* H */
  int cond;                 /* C, 0 = unconditional */
  int layers;               /* L, 2 to 8 */
  int time_width;           /* T: 1 (raw) or K (sin:K) */
  flowgen_activation act;
  flowgen_time time;
  char input[4];            /* "xtc", "cxt", ...: never "" */
  float *w[FLOWGEN_LAYERS_MAX];  /* NULL from layers on */
  float *b[FLOWGEN_LAYERS_MAX];
} flowrt_weights;

/* Reads a safetensors file holding PREFIX0.weight, PREFIX0.bias,
 * PREFIX2.weight, ... (the Linear layers of an nn.Sequential, at even
 * indices; prefix NULL = "velocity."); F32, F16 and BF16 are converted to
 * fp32.  L is how many are present, D the last layer's rows, H the first
 * layer's, C the first layer's columns minus D and T.  The file's
 * __metadata__ may say flowgen.act, flowgen.time, flowgen.input (as the
 * flags take them) and flowgen.cond.
 * expect (NULL = infer everything): the fields of its model that are not
 * zero (dim, hidden, cond, layers; act other than silu, time other than
 * raw, input other than "") must agree with the file, else FLOWGEN_WEIGHTS
 * naming both; its time also gives T when the file's metadata does not. */
flowgen_status flowrt_weights_load(const char *path, const char *prefix,
                                   const flowgen_spec *expect,
                                   flowrt_weights **out, flowgen_error *err);
/* Same, from a safetensors image in memory; name is used in messages. */
flowgen_status flowrt_weights_parse(const void *data, size_t size,
                                    const char *name, const char *prefix,
                                    const flowgen_spec *expect,
                                    flowrt_weights **out, flowgen_error *err);
/* A model built into flowgen: "digits" (flow matching on scikit-learn's
 * 8x8 digits scaled to [-1, 1]; D=64, H=256, the seed model; see
 * examples/digits/). */
flowgen_status flowrt_weights_builtin(const char *name, flowrt_weights **out,
                                      flowgen_error *err);
/* Allocates zeroed weights for model's D, H, C, L and time, with its act
 * and input (its other fields do not matter). */
flowgen_status flowrt_weights_alloc(const flowgen_spec *model,
                                    flowrt_weights **out, flowgen_error *err);
void flowrt_weights_free(flowrt_weights *weights);
/* Sets spec's model (dim, hidden, cond, layers, act, time, input) to the
 * weights'; its other fields are left as they are. */
void flowrt_weights_model(const flowrt_weights *weights, flowgen_spec *spec);
/* Whether the weights are of spec's model: FLOWGEN_INVALID naming the first
 * field that differs, with both values. */
flowgen_status flowrt_weights_check(const flowrt_weights *weights,
                                    const flowgen_spec *spec,
                                    flowgen_error *err);

/* ---- CPU reference ------------------------------------------------------ */

/* Integrates the model in fp64 on the CPU (the test oracle and the `cpu`
 * device), as PyTorch computes the family: gelu with erf, gelu_tanh as
 * approximate='tanh', tau(t) in fp64.  x0, x: batch x D, row-major; x may
 * equal x0.  An unconditional model only (else flowrt_reference_cond). */
flowgen_status flowrt_reference(const flowgen_spec *spec,
                                const flowrt_weights *weights, const float *x0,
                                float *x, int64_t batch, flowgen_error *err);
/* Same, with fp64 output. */
flowgen_status flowrt_reference_f64(const flowgen_spec *spec,
                                    const flowrt_weights *weights,
                                    const float *x0, double *x, int64_t batch,
                                    flowgen_error *err);
/* Any model.  cond: batch x C (NULL when C = 0), finite.  With
 * spec->guidance: v = v_u + guidance (v_c - v_u), v_u on null_cond (1 x C,
 * NULL = zeros); without, guidance must be 1 (the conditional field) and
 * null_cond NULL. */
flowgen_status flowrt_reference_cond(const flowgen_spec *spec,
                                     const flowrt_weights *weights,
                                     const float *x0, float *x,
                                     const float *cond, const float *null_cond,
                                     float guidance, int64_t batch,
                                     flowgen_error *err);
flowgen_status flowrt_reference_cond_f64(const flowgen_spec *spec,
                                         const flowrt_weights *weights,
                                         const float *x0, double *x,
                                         const float *cond,
                                         const float *null_cond,
                                         float guidance, int64_t batch,
                                         flowgen_error *err);

/* ---- compilation (no GPU needed) ---------------------------------------- */

typedef enum flowrt_target {
  FLOWRT_TARGET_PTX,
  FLOWRT_TARGET_CUBIN,
} flowrt_target;

/* Compiles CUDA source with NVRTC for sm_<arch>.  On success *out is a
 * malloc()ed image of *size bytes; *log (if not NULL) gets the malloc()ed
 * compiler log (ptxas -v output included when verbose).  On failure the
 * error message holds the log. */
flowgen_status flowrt_compile(const char *source, size_t source_size,
                              const char *source_name, int arch,
                              flowrt_target target, bool verbose, void **out,
                              size_t *size, char **log, flowgen_error *err);
/* The NVRTC version in use, e.g. 13000 for 13.0; 0 if NVRTC is missing. */
int flowrt_nvrtc_version(void);
/* The highest sm_XY this NVRTC can emit a cubin for (0 if missing). */
int flowrt_nvrtc_max_arch(void);

/* ---- runtime and samplers ----------------------------------------------- */

typedef struct flowrt_runtime flowrt_runtime;
typedef struct flowrt_sampler flowrt_sampler;

typedef void (*flowrt_warn_fn)(void *ctx, const char *message);

typedef struct flowrt_options {
  int device;                 /* CUDA device ordinal */
  const char *cache_dir;      /* NULL = $FLOWGEN_CACHE_DIR, XDG, ~/.cache */
  int disk_cache;             /* -1 = from $FLOWGEN_CACHE, 0 = off, 1 = on */
  bool cache_trust_any;       /* use a cache folder that others own or can
                                 write (else refused, with a warning, unless
                                 $FLOWGEN_CACHE_TRUST=any): see README */
  const char *template_dir;   /* NULL = built-in templates */
  const char *tune;           /* planner overrides, as flowgen_options.tune
                                 (docs/tuning.md); NULL = none.  Nothing in
                                 the environment tunes a runtime */
  flowgen_device device_figures; /* the device as the planner sees it: a
                                 field set here replaces the device query's
                                 (e.g. fewer SMs than the GPU has, as under
                                 MPS; persistent grids launch on as many);
                                 zeroed = the query's */
  flowrt_warn_fn warn;        /* non-fatal problems (unusable cache dir) */
  void *warn_ctx;
} flowrt_options;

/* opts may be NULL: device 0, default cache. */
flowgen_status flowrt_open(const flowrt_options *opts, flowrt_runtime **out,
                           flowgen_error *err);
void flowrt_close(flowrt_runtime *rt);

/* What creating a sampler cost: the pack part's module (and, with a batch
 * hint, the hinted variant's, built meanwhile), then the weights. */
typedef struct flowrt_stats {
  bool memory_hit;        /* module found in this runtime's memory cache */
  bool disk_hit;          /* cubin read from the disk cache */
  double generate_ms;     /* planning, and rendering the source where it
                             was compiled */
  double compile_ms;      /* NVRTC (0 on a hit) */
  double load_ms;         /* cuModuleLoadData and function lookup */
  double upload_ms;       /* weights to the device and packed */
  double module_ms;       /* finding or building the loaded module: all of
                             the above but the upload */
} flowrt_stats;

/* How one part of a sampler's kernels was obtained: the pack part (the
 * pack and conditioning kernels) or a variant's (flowgen_part). */
typedef struct flowrt_part_stats {
  bool loaded;            /* the part is loaded (else the rest is zero) */
  bool disk_hit;          /* its image came from the disk cache */
  double generate_ms;     /* rendering its source (the pack part's: and
                             planning); with the built-in templates a disk
                             hit renders nothing */
  double compile_ms;      /* NVRTC (0 on a hit) */
  double load_ms;         /* cuModuleLoadData */
  size_t source_bytes;    /* its source's size (0: not rendered) */
} flowrt_part_stats;

/* Options of a sampler; zeroed = the defaults. */
typedef struct flowrt_sampler_options {
  int64_t batch_hint;     /* > 0: the variant that serves this batch is
                             compiled and loaded at creation, while the
                             weights go up (its launches, also in graph
                             capture, need nothing more); 0 = none */
  bool compile_ahead;     /* every variant compiled and loaded in
                             background threads (one a core, up to the
                             variant count) from creation on; a launch
                             waits only for its own variant.  A graph
                             capture in global mode while they load may be
                             invalidated: flowrt_sampler_prepare(s, -1)
                             first */
} flowrt_sampler_options;

/* Generates and compiles (or finds in the cache) the pack kernel's part,
 * loads it, uploads and packs the weights.  The variants' kernels are
 * parts of their own, each compiled, cached and loaded on the first launch
 * it serves (or by flowrt_sampler_prepare), once per runtime whatever the
 * threads.  The weights must be of spec's model (flowrt_weights_check). */
flowgen_status flowrt_sampler_create(flowrt_runtime *rt,
                                     const flowgen_spec *spec,
                                     const flowrt_weights *weights,
                                     flowrt_sampler **out, flowgen_error *err);
/* Same, with options (NULL = none, as flowrt_sampler_create). */
flowgen_status flowrt_sampler_create_ex(flowrt_runtime *rt,
                                        const flowgen_spec *spec,
                                        const flowrt_weights *weights,
                                        const flowrt_sampler_options *opts,
                                        flowrt_sampler **out, flowgen_error *err);
/* Loads the variant that serves batch now (outside graph capture: a launch
 * in capture whose variant is not loaded fails with FLOWGEN_INVALID), or
 * with batch -1 every variant; waits for those being built elsewhere. */
flowgen_status flowrt_sampler_prepare(flowrt_sampler *sampler, int64_t batch,
                                      flowgen_error *err);
/* How part index was obtained: -1 the pack part, 0 to the variant count - 1
 * a variant's.  False (and *out as is) for a part not loaded yet or an
 * index out of range. */
bool flowrt_sampler_part_stats(const flowrt_sampler *sampler, int index,
                               flowrt_part_stats *out);
void flowrt_sampler_destroy(flowrt_sampler *sampler);
const flowrt_stats *flowrt_sampler_stats(const flowrt_sampler *sampler);
/* The sampler's plan: its variants and how each is launched.  (Its source
 * is empty with the built-in templates, whose parts are found in the cache
 * by their source keys; flowgen_generate renders any part.) */
const flowgen_kernel *flowrt_sampler_kernel(const flowrt_sampler *sampler);

/* Samples batch rows: x = ODE solution from x0.  x0 and x are device
 * pointers (CUdeviceptr) to batch x D fp32, row-major; they may be equal.
 * Asynchronous on stream (a CUstream, NULL = legacy default stream) and
 * legal inside CUDA graph capture.  batch = 0 does nothing.  The grid
 * strategy (small batches of large shapes) keeps its activations in the
 * sampler's device buffer: launches of one sampler must not overlap (use
 * one stream per sampler, or order them); different samplers may. */
flowgen_status flowrt_sample(flowrt_sampler *sampler, uint64_t x0, uint64_t x,
                             int64_t batch, void *stream, flowgen_error *err);
/* Convenience: host arrays, synchronous. */
flowgen_status flowrt_sample_host(flowrt_sampler *sampler, const float *x0,
                                  float *x, int64_t batch, flowgen_error *err);

/* Samples a conditional model (C > 0; for C = 0 it is flowrt_sample, cond
 * and null_cond 0).  cond: device pointer to batch x C fp32, constant over
 * the integration.  With spec.guidance: v = v_u + guidance (v_c - v_u),
 * v_u on null_cond (device 1 x C, 0 = zeros), guidance finite; without,
 * guidance must be 1 and null_cond 0.  The conditioning's bias of the
 * first layer is computed once per launch, before the first step, into
 * the sampler's workspace (batch x H floats, 2H guided): a launch that
 * needs more than the workspace holds grows it, which is not allowed
 * inside CUDA graph capture (FLOWGEN_INVALID): call
 * flowrt_sampler_reserve first.  Launches of one sampler must not overlap. */
flowgen_status flowrt_sample_cond(flowrt_sampler *sampler, uint64_t x0,
                                  uint64_t x, uint64_t cond, uint64_t null_cond,
                                  float guidance, int64_t batch, void *stream,
                                  flowgen_error *err);
/* Convenience: host arrays (cond batch x C, null_cond 1 x C or NULL; both
 * checked finite: FLOWGEN_INPUT), synchronous. */
flowgen_status flowrt_sample_host_cond(flowrt_sampler *sampler,
                                       const float *x0, float *x,
                                       const float *cond,
                                       const float *null_cond, float guidance,
                                       int64_t batch, flowgen_error *err);
/* Prepares a CUDA graph capture of launches of up to max_batch rows
 * (outside any capture): loads the variant that serves max_batch (as
 * flowrt_sampler_prepare; a smaller batch another variant serves needs its
 * own prepare or an earlier launch), and makes a conditional model's
 * workspace hold max_batch rows, so that such launches never allocate. */
flowgen_status flowrt_sampler_reserve(flowrt_sampler *sampler,
                                      int64_t max_batch, flowgen_error *err);
/* The workspace bytes a launch of batch rows needs: batch x H floats (2H
 * with guidance), 0 for an unconditional model. */
size_t flowrt_sampler_workspace_bytes(const flowrt_sampler *sampler,
                                      int64_t batch);

/* ---- disk cache --------------------------------------------------------- */

/* The cache folder in effect: $FLOWGEN_CACHE_DIR, else
 * $XDG_CACHE_HOME/flowgen, else $HOME/.cache/flowgen. */
flowgen_status flowrt_cache_dir(char *buf, size_t size, flowgen_error *err);

typedef struct flowrt_cache_entry {
  const char *file;      /* file name inside the cache folder */
  const char *key;       /* the full key (source hash, options, arch, NVRTC) */
  uint64_t payload_size; /* bytes of cubin / PTX */
  bool valid;            /* header, key and checksum check out */
  const char *problem;   /* why it is not valid ("not a regular file (a
                            FIFO)", "checksum mismatch"); NULL if valid */
} flowrt_cache_entry;

/* list, clear and warm refuse (FLOWGEN_IO) a folder that another user owns
 * or can write, or that lies in one, unless $FLOWGEN_CACHE_TRUST is "any":
 * anyone who can write there could plant a cubin that a runtime loads. */

typedef void (*flowrt_cache_visit_fn)(void *ctx, const flowrt_cache_entry *e);
/* Visits every file of dir (NULL = the folder in effect) named like an
 * entry ("*.fgc"), sorted by name; one that is not a sound entry (a FIFO, a
 * link, a file that cannot be read) is visited as invalid. */
flowgen_status flowrt_cache_list(const char *dir, flowrt_cache_visit_fn visit,
                                 void *ctx, flowgen_error *err);
/* Removes from dir the files that begin with a cache entry's header and the
 * temporary files of puts abandoned for a minute; nothing else. */
flowgen_status flowrt_cache_clear(const char *dir, size_t *removed,
                                  flowgen_error *err);
/* Compiles spec for sm_<arch> into the disk cache without a GPU, as a
 * sampler of a runtime with the same template folder, tune and device
 * figures (opts, NULL = none: an H200's) would look it up: the pack part
 * and every variant's part, in parallel (a thread a core), or with
 * opts->part FLOWGEN_PART_BATCH the pack part and the variant that serves
 * opts->batch (and its fallback).  Its host_launcher is ignored (runtimes
 * launch the kernels themselves).  *was_cached: every part was. */
flowgen_status flowrt_cache_warm(const char *dir, const flowgen_spec *spec,
                                 const flowgen_options *opts, bool *was_cached,
                                 flowgen_error *err);

#ifdef __cplusplus
}
#endif
#endif /* FLOWRT_H */
