/*
 * flowgen — specialized CUDA kernels for probability-flow ODE sampling.
 *
 * The generator's public API: describe the velocity field's shape in a
 * flowgen_spec, and flowgen_generate() renders the CUDA source of a kernel
 * that integrates the whole ODE for a batch in one launch.
 *
 * Every function that can fail returns a flowgen_status and, when given a
 * flowgen_error, fills it with a message that names what went wrong (the bad
 * field, the template file and line, the NVRTC log, ...).  The library never
 * prints and never exits.
 */
#ifndef FLOWGEN_H
#define FLOWGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLOWGEN_VERSION_MAJOR 0
#define FLOWGEN_VERSION_MINOR 2
#define FLOWGEN_VERSION_PATCH 0
#define FLOWGEN_VERSION "0.2.0"

/* ---- status codes ------------------------------------------------------- */

/* X(name, CLI exit code, description).  One place to add an error. */
#define FLOWGEN_STATUS_MAP(X)                                                \
  X(OK,          0, "success")                                               \
  X(INVALID,     2, "invalid argument")                                      \
  X(UNSUPPORTED, 2, "unsupported shape or option")                           \
  X(TEMPLATE,    3, "template error")                                        \
  X(LIMIT,       3, "template exceeded a limit of its sandbox")              \
  X(IO,          1, "input/output error")                                    \
  X(NOMEM,       1, "out of memory")                                         \
  X(NO_NVRTC,    4, "NVRTC not found")                                       \
  X(COMPILE,     4, "CUDA compilation failed")                               \
  X(NO_DRIVER,   5, "no CUDA driver found")                                  \
  X(NO_DEVICE,   5, "no CUDA device")                                        \
  X(CUDA,        5, "CUDA call failed")                                      \
  X(WEIGHTS,     6, "invalid weights file")                                  \
  X(INPUT,       6, "invalid input array")                                   \
  X(INTERNAL,    1, "internal error")

typedef enum flowgen_status {
#define FLOWGEN_X_ENUM(name, code, text) FLOWGEN_##name,
  FLOWGEN_STATUS_MAP(FLOWGEN_X_ENUM)
#undef FLOWGEN_X_ENUM
  FLOWGEN_STATUS_COUNT
} flowgen_status;

/* "success", "template error", ... */
const char *flowgen_strerror(flowgen_status status);
/* "OK", "TEMPLATE", ... */
const char *flowgen_status_name(flowgen_status status);
/* The exit code the CLI returns for this status (0, 1 .. 6). */
int flowgen_exit_code(flowgen_status status);

#define FLOWGEN_ERROR_MESSAGE_MAX 4096

/* The detail of the last failure; functions accept NULL. */
typedef struct flowgen_error {
  flowgen_status status;                    /* same as the returned value */
  char message[FLOWGEN_ERROR_MESSAGE_MAX];  /* one or more lines, no trailing \n */
} flowgen_error;

/* ---- the model's shape -------------------------------------------------- */

/* Explicit Runge-Kutta schemes; step k covers [k/S, (k+1)/S], dt = 1/S. */
typedef enum flowgen_solver {
  FLOWGEN_SOLVER_EULER = 0,  /* one velocity at t = (k + 0.5)/S: the PyTorch contract */
  FLOWGEN_SOLVER_MIDPOINT,   /* x + dt v(x + dt/2 v(x, t), t + dt/2), t = k/S */
  FLOWGEN_SOLVER_HEUN,       /* x + dt/2 (v(x, t) + v(x + dt v(x, t), t + dt)) */
  FLOWGEN_SOLVER_RK4,        /* classic 4 stages at t, t + dt/2, t + dt/2, t + dt */
} flowgen_solver;

typedef enum flowgen_precision {
  FLOWGEN_PRECISION_FP32 = 0,  /* fp32 products (FMA, or tf32x3 on the matrix units) */
  FLOWGEN_PRECISION_TF32,      /* matrix units, tf32 operands, fp32 accumulation */
  FLOWGEN_PRECISION_BF16,      /* matrix units, bf16 operands, fp32 accumulation */
  FLOWGEN_PRECISION_FP16,      /* matrix units, fp16 operands, fp32 accumulation */
} flowgen_precision;

/* Accepted ranges (inclusive). */
#define FLOWGEN_DIM_MIN 1
#define FLOWGEN_DIM_MAX 1024
#define FLOWGEN_HIDDEN_MIN 1
#define FLOWGEN_HIDDEN_MAX 4096
#define FLOWGEN_STEPS_MIN 1
#define FLOWGEN_STEPS_MAX 10000
#define FLOWGEN_ARCH_MIN 75
#define FLOWGEN_NAME_MAX 64
#define FLOWGEN_COND_MAX 4096
#define FLOWGEN_LAYERS_MIN 2
#define FLOWGEN_LAYERS_MAX 8
#define FLOWGEN_LAYERS_DEFAULT 3
#define FLOWGEN_TIME_FEATURES_MAX 1024
#define FLOWGEN_TIME_SCALE_DEFAULT 1000.0

/* The activation between the Linear layers. */
typedef enum flowgen_activation {
  FLOWGEN_ACT_SILU = 0,   /* x * sigmoid(x) */
  FLOWGEN_ACT_GELU,       /* x * Phi(x), exact (erf): nn.GELU() */
  FLOWGEN_ACT_GELU_TANH,  /* nn.GELU(approximate='tanh') */
  FLOWGEN_ACT_RELU,
  FLOWGEN_ACT_TANH,
} flowgen_activation;

/* How t enters the first layer: T columns of its input.  raw (features 0):
 * the one column t, T = 1.  sin:K (features K, even): half = K/2,
 * f_i = 10000^(-i/half), [sin(scale t f_0) .. sin(scale t f_{half-1}),
 * cos(scale t f_0) .. cos(scale t f_{half-1})], T = K. */
typedef struct flowgen_time {
  int features;   /* 0 = raw; K, even, 2 to FLOWGEN_TIME_FEATURES_MAX: sin */
  double scale;   /* sin: positive and finite, 0 = 1000; raw: ignored */
} flowgen_time;

typedef struct flowgen_spec {
  int dim;                       /* D, state dimension */
  int hidden;                    /* H, hidden width; 0 = 4 * dim */
  int steps;                     /* S, number of solver steps */
  flowgen_solver solver;         /* integration scheme */
  flowgen_precision precision;   /* arithmetic of the products */
  int arch;                      /* target compute capability, 90 = sm_90 */
  bool arch_specific;            /* its arch-specific target (sm_90a, only
                                    sm_90): wgmma; the runtime resolves arch
                                    and this from the device */
  char name[FLOWGEN_NAME_MAX];   /* symbol prefix; "" = derived from the shape */
  /* The model family (zeroed: the seed, an unconditional MLP of three
   * Linear layers with SiLU on [x, t]):
   *   Sequential(Linear(D + T + C, H), act, Linear(H, H), act, ..., Linear(H, D))
   * applied to the concatenation of x, tau(t) and c in the order input. */
  int cond;                      /* C, conditioning width, 0 to
                                    FLOWGEN_COND_MAX; 0 = unconditional */
  int layers;                    /* L, Linear layers, 2 to 8; 0 = 3 */
  flowgen_activation act;        /* between the Linear layers */
  flowgen_time time;             /* tau(t) */
  char input[4];                 /* the concatenation's order, the three
                                    letters of "xtc" in any order; "" = "xtc" */
  bool guidance;                 /* classifier-free guidance in the kernel:
                                    v = v_u + w (v_c - v_u), w given at launch,
                                    v_u with the null conditioning; needs cond */
} flowgen_spec;

/* D=64, H=256, S=32, euler, fp32, sm_90; the seed model (C=0, L=3, silu,
 * raw time, x,t,c, no guidance). */
void flowgen_spec_default(flowgen_spec *spec);

/* Sets one field from text, as the CLI flag of the same name would:
 * "dim", "hidden", "steps", "solver", "precision", "arch", "name", "cond",
 * "layers", "act" (silu, gelu, gelu_tanh, relu, tanh), "time" (raw, sin:K,
 * sin:K:SCALE), "input" (x,t,c in any order), "guidance" (0 or 1).
 * Strict: no sign, no spaces, no trailing characters, in range. */
flowgen_status flowgen_spec_set(flowgen_spec *spec, const char *field,
                                const char *value, flowgen_error *err);

/* Checks every field; the message names the first bad one. */
flowgen_status flowgen_spec_validate(const flowgen_spec *spec,
                                     flowgen_error *err);

/* The hidden width in effect (resolves 0 to 4 * dim). */
int flowgen_spec_hidden(const flowgen_spec *spec);

/* The target's name as --arch takes it: "sm_90", "sm_90a". */
void flowgen_spec_arch_name(const flowgen_spec *spec, char *buf, size_t size);

/* The Linear layers in effect (resolves 0 to 3). */
int flowgen_spec_layers(const flowgen_spec *spec);

/* T, the time columns of the first layer's input: 1 (raw) or K (sin:K). */
int flowgen_spec_time_width(const flowgen_spec *spec);

/* The first layer's input width D + T + C. */
int flowgen_spec_in_width(const flowgen_spec *spec);

/* The concatenation's order in effect: "xtc" for "", else spec->input. */
const char *flowgen_spec_input(const flowgen_spec *spec);

/* The time scale in effect: for sin, scale or 1000; 0 for raw. */
double flowgen_spec_time_scale(const flowgen_spec *spec);

/* The time spec as "time" takes it: "raw", "sin:16", "sin:16:2.5" (the
 * scale only when not 1000; %.17g, so that it reads back the same). */
void flowgen_time_name(const flowgen_time *time, char *buf, size_t size);

/* The input order as "input" takes it: "x,t,c". */
void flowgen_spec_input_name(const flowgen_spec *spec, char *buf,
                             size_t size);

/* The kernel symbol prefix in effect, e.g. "flow_d64_h256_s32_fp32"; a
 * model other than the seed appends its fields that are not the default:
 * _c<C>, _l<L>, _<act>, _sin<K>, _<input>, _cfg
 * (e.g. "flow_d64_h256_s32_fp32_c10_gelu_sin32_cfg"). */
void flowgen_spec_symbol(const flowgen_spec *spec, char *buf, size_t size);

const char *flowgen_solver_name(flowgen_solver solver);
const char *flowgen_precision_name(flowgen_precision precision);
/* "silu", "gelu", "gelu_tanh", "relu", "tanh"; "unknown" otherwise. */
const char *flowgen_activation_name(flowgen_activation act);

/* ---- generation --------------------------------------------------------- */

/* The GPU a plan is for.  A field left 0 is unknown: the planner takes an
 * H200's figure (132 SMs; its clusters at once), or for shared memory and
 * clusters what the target arch allows.  So the plan for an H200 is the
 * plan for no device at all.  The runtime fills it from its device query;
 * the CLI's --sms and --shared-per-block set it. */
#define FLOWGEN_DEVICE_SMS_MAX 65536
#define FLOWGEN_DEVICE_SHARED_MAX (1 << 30)
#define FLOWGEN_DEVICE_CLUSTERS_MAX 65536

typedef struct flowgen_device {
  int sms;                   /* streaming multiprocessors, 1 to
                                FLOWGEN_DEVICE_SMS_MAX */
  int shared_per_block;      /* bytes of shared memory a block may opt in
                                to, 1 to FLOWGEN_DEVICE_SHARED_MAX */
  int clusters;              /* thread-block clusters: 1 yes, -1 no, 0 as
                                the arch allows (sm_90 and newer) */
  int clusters_at_once[4];   /* clusters of 2, 4, 8 and 16 blocks of the
                                cluster kernel resident at once, 1 to
                                FLOWGEN_DEVICE_CLUSTERS_MAX each */
} flowgen_device;

/* Which part of the plan flowgen_generate renders.  The plan (variants,
 * launch descriptions, the packed weights' layout) is the whole plan's
 * whichever part is rendered: one pack kernel and one params buffer serve
 * every variant, so parts rendered separately work together. */
typedef enum flowgen_part {
  FLOWGEN_PART_ALL = 0,   /* every variant, the pack kernel (and the
                             conditioning kernel), the host launcher if
                             asked: the whole file */
  FLOWGEN_PART_PACK,      /* the pack kernel (and the conditioning kernel)
                             alone: what a runtime loads first */
  FLOWGEN_PART_VARIANT,   /* variant `variant`'s kernel alone: what a
                             runtime loads on the first launch it serves */
  FLOWGEN_PART_BATCH,     /* the variant that serves `batch` (and, for a
                             persistent grid, the variant it falls back
                             to), the pack kernel and the host launcher if
                             asked: a file for a fixed batch, whose
                             launcher serves any batch with that variant */
  FLOWGEN_PART_PLAN,      /* nothing rendered: the plan alone (variants,
                             launch descriptions), at a fraction of a
                             part's cost, for a runtime whose parts are
                             cached (flowgen_source_key) */
} flowgen_part;

typedef struct flowgen_options {
  const char *template_dir;   /* NULL = the templates built into the library */
  bool host_launcher;         /* add extern "C" host functions (nvcc builds) */
  uint64_t instruction_limit; /* Lua VM instructions; 0 = default (2e8) */
  size_t memory_limit;        /* bytes of Lua memory; 0 = default (256 MiB) */
  const char *tune;           /* planner overrides: choose or leave out a
                                 strategy, move a batch boundary
                                 (docs/tuning.md); NULL = none */
  uint32_t time_limit_ms;     /* wall-clock time the templates may run, in
                                 ms; 0 = default (30 s, well above what the
                                 largest shape takes) */
  flowgen_device device;      /* the GPU to plan for; zeroed = an H200 */
  flowgen_part part;          /* what to render; zeroed = all of it */
  int variant;                /* FLOWGEN_PART_VARIANT: the variant's index
                                 (0 to the variant count - 1) */
  int64_t batch;              /* FLOWGEN_PART_BATCH: the batch size, >= 0 */
} flowgen_options;

/* One kernel entry point of the generated source and how it is launched:
 * the one launch description that the generated host launcher and the
 * runtime both follow. */
typedef struct flowgen_variant {
  const char *strategy;       /* "tiled", ... */
  const char *symbol;         /* extern "C" __global__ sampling kernel */
  const char *pack_symbol;    /* extern "C" __global__ weight-packing kernel */
  int64_t min_batch;          /* use this variant for batch sizes in */
  int64_t max_batch;          /*   [min_batch, max_batch]; -1 = no limit;
                                 [0, 0] (batch 0 launches nothing): a
                                 persistent grid's fallback alone */
  int block_threads;          /* blockDim.x (blockDim.y = .z = 1) */
  int rows_per_block;         /* samples per block, or per cluster when
                                 cluster_blocks > 1 (its blocks share them) */
  int cluster_blocks;         /* thread-block cluster size (1 = none);
                                 grid.x = ceil(B / rows_per_block) * cluster_blocks */
  int grid_blocks_per_sm;     /* > 0: a persistent grid instead, grid.x = this
                                 times the device's SMs (cooperative) */
  size_t shared_bytes;        /* dynamic shared memory per block */
  size_t params_bytes;        /* size of the packed weight buffer */
  int pack_threads;           /* blockDim.x of the packing kernel */
  int cond_threads;           /* blockDim.x of the conditioning kernel
                                 (<name>_cond, C > 0; 0 without) */
  int cond_blocks_per_sm;     /* its grid.x: this times the device's SMs
                                 (its blocks take its tiles in turn) */
  bool cooperative;           /* a cooperative launch: every block resident
                                 at once (the persistent grids, whose blocks
                                 meet at grid barriers); such launches use
                                 the scratch area in params and must not
                                 overlap each other */
  int fallback;               /* cooperative: the index of the variant that
                                 serves the batch where the launch is refused
                                 (fewer SMs free than the device has: MPS,
                                 green contexts); -1 for the others */
  bool nonportable_cluster;   /* clusters of more than 8 blocks: the
                                 non-portable cluster size opt-in */
} flowgen_variant;

typedef struct flowgen_kernel flowgen_kernel;

/* Renders the CUDA source for spec.  opts may be NULL. */
flowgen_status flowgen_generate(const flowgen_spec *spec,
                                const flowgen_options *opts,
                                flowgen_kernel **out, flowgen_error *err);
void flowgen_kernel_free(flowgen_kernel *kernel);

const char *flowgen_kernel_source(const flowgen_kernel *kernel);
size_t flowgen_kernel_source_size(const flowgen_kernel *kernel);
const flowgen_spec *flowgen_kernel_spec(const flowgen_kernel *kernel);
int flowgen_kernel_variant_count(const flowgen_kernel *kernel);
const flowgen_variant *flowgen_kernel_variant(const flowgen_kernel *kernel,
                                              int index);
/* The variant that serves batch (the first whose range holds it). */
const flowgen_variant *flowgen_kernel_pick(const flowgen_kernel *kernel,
                                           int64_t batch);

/* What the source holds: the part it was rendered as, and whether it holds
 * variant index's kernel (every variant for FLOWGEN_PART_ALL, none for
 * FLOWGEN_PART_PACK). */
flowgen_part flowgen_kernel_part(const flowgen_kernel *kernel);
bool flowgen_kernel_has_variant(const flowgen_kernel *kernel, int index);
/* Whether the source holds the pack kernel (ALL, PACK, BATCH). */
bool flowgen_kernel_has_pack(const flowgen_kernel *kernel);

/* A text naming the source flowgen_generate renders for spec and opts,
 * made from what the source is made from: the build's digest of the
 * built-in templates and the generator, and every input the templates see
 * (the limits aside: they decide only whether a render finishes).  Equal
 * keys, equal sources; microseconds, where a render takes milliseconds: a
 * cache keyed by it finds a part without rendering it.  Templates from a
 * folder (opts->template_dir) may change under it: FLOWGEN_UNSUPPORTED
 * (key their rendered source instead).  *out is free()d by the caller. */
flowgen_status flowgen_source_key(const flowgen_spec *spec, const flowgen_options *opts,
                                  char **out, flowgen_error *err);

/* JSON describing the kernel (strategy, launch configuration, shared memory,
 * symbols).  Sorted keys, newline-terminated; free() the result.  For a
 * part other than ALL, "variants" lists the variants the source holds
 * (fallback an index into that list, -1 if it is not there), and "part"
 * (and for BATCH, "batch") say which part it is. */
char *flowgen_kernel_describe(const flowgen_kernel *kernel);

#ifdef __cplusplus
}
#endif
#endif /* FLOWGEN_H */
