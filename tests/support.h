/* Helpers shared by the cmocka tests. */
#ifndef FLOWGEN_TEST_SUPPORT_H
#define FLOWGEN_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "flowgen.h"

/* A fresh private folder under $TMPDIR; removed by fg_test_rmtree. */
char *fg_test_mkdtemp(void);
/* rm -rf path (best effort). */
void fg_test_rmtree(const char *path);
/* The repository root ($FLOWGEN_SOURCE_DIR, else "."). */
const char *fg_test_source_dir(void);
/* The flowgen binary ($FLOWGEN_BIN, else "build/flowgen"). */
const char *fg_test_flowgen_bin(void);

/* Whole file into a malloc()ed, NUL-terminated buffer; NULL if unreadable. */
char *fg_test_read_file(const char *path, size_t *size);
/* Writes size bytes; asserts on failure. */
void fg_test_write_file(const char *path, const void *data, size_t size);
bool fg_test_file_exists(const char *path);
/* How many entries dir holds, "." and ".." aside; asserts that it opens. */
size_t fg_test_count_entries(const char *dir);

/* The size of the path buffers that fg_test_path_join fills. */
#define FG_TEST_PATH_SIZE 4096
/* out = "dir/name"; asserts that it fits. */
void fg_test_path_join(char out[FG_TEST_PATH_SIZE], const char *dir,
                       const char *name);
/* Copies the files of the built-in templates folder into dir; asserts that
 * there are at least two (plan.lua and at least one template). */
void fg_test_copy_templates(const char *dir);
/* Writes text as dir/name (a template over a copied one, say). */
void fg_test_write_template(const char *dir, const char *name,
                            const char *text);

/* A new template folder (fg_test_mkdtemp) whose plan.lua plans one
 * variant, "echo" (kernel echo_k, pack kernel echo_pack, any batch), and
 * whose file.cut is file_cut.  fg_test_rmtree and free() it. */
char *fg_test_echo_templates(const char *file_cut);

/* CLOCK_MONOTONIC in seconds. */
double fg_test_now_seconds(void);
/* True when running under valgrind (its preload is in LD_PRELOAD): the
 * NVRTC-heavy sweeps shrink then (a compile takes half a minute). */
bool fg_test_under_valgrind(void);
/* False under valgrind or in a sanitizer build (make asan): time limits
 * are not checked then. */
bool fg_test_timing_checks(void);

/* The default spec with this shape and target architecture. */
flowgen_spec fg_test_spec(int dim, int hidden, int steps, int arch);

/* Deterministic uniform values in [-scale, scale) (xorshift, seeded). */
void fg_test_fill_uniform(float *out, size_t n, uint64_t seed, float scale);
/* Weights of model's layers drawn as PyTorch initialises a Linear, from
 * U(-gain / sqrt(fan_in), gain / sqrt(fan_in)) (gain 1: PyTorch's), seeded;
 * asserts that they are allocated.  flowrt_weights_free() them. */
struct flowrt_weights *fg_test_random_model(const flowgen_spec *model, uint64_t seed, float gain);
/* The same for the seed model of dim x hidden. */
struct flowrt_weights *fg_test_random_weights(int dim, int hidden, uint64_t seed);
/* A seed that differs between runs unless FLOWGEN_TEST_SEED is set; printed
 * so that a failure can be replayed. */
uint64_t fg_test_seed(void);
/* A whole number in [lo, hi], log-uniform (small and large sizes equally
 * likely), from the xorshift state *rng (never 0). */
int fg_test_log_uniform(uint64_t *rng, int lo, int hi);
/* A random shape within the generator's range: D in [1, max_dim], H in
 * [1, max_hidden], S in [1, max_steps], log-uniform, and a random solver. */
flowgen_spec fg_test_random_spec(uint64_t *rng, int max_dim, int max_hidden,
                                 int max_steps, int arch);

/* Runs a shell command, capturing stdout and stderr (malloc()ed) and
 * returning the exit status (or -1). */
int fg_test_run(const char *command, char **out, char **err);

/* Makes writes past `bytes` fail with EFBIG (a full disk stands in), with
 * SIGXFSZ ignored; fg_test_end_file_size_limit puts both back. */
typedef struct fg_test_file_size_limit {
  unsigned long long saved_cur;
  void (*saved_handler)(int);
} fg_test_file_size_limit;
void fg_test_begin_file_size_limit(fg_test_file_size_limit *limit, unsigned long long bytes);
void fg_test_end_file_size_limit(const fg_test_file_size_limit *limit);

/* True when a CUDA device can be used.  When there is none, a GPU test calls
 * FG_SKIP_WITHOUT_GPU(); with FLOWGEN_REQUIRE_GPU=1 that fails instead. */
bool fg_test_have_gpu(void);
#define FG_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                        \
    if (!fg_test_have_gpu()) {                                                \
      if (fg_test_gpu_required()) fail_msg("FLOWGEN_REQUIRE_GPU=1 but no usable GPU"); \
      skip();                                                                 \
    }                                                                         \
  } while (0)
bool fg_test_gpu_required(void);

#endif
