/* Helpers shared by the cmocka tests. */
#include "support.h"

#include "flowrt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *fg_test_mkdtemp(void) {
  const char *base = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/flowgen-test-XXXXXX", base && *base ? base : "/tmp");
  char *dir = mkdtemp(path);
  assert_non_null(dir);
  return strdup(dir);
}

void fg_test_rmtree(const char *path) {
  if (!path || !*path || strcmp(path, "/") == 0) return;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0) { /* best effort */
  }
}

const char *fg_test_source_dir(void) {
  const char *d = getenv("FLOWGEN_SOURCE_DIR");
  return d && *d ? d : ".";
}

const char *fg_test_flowgen_bin(void) {
  const char *b = getenv("FLOWGEN_BIN");
  return b && *b ? b : "build/flowgen";
}

char *fg_test_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      char *grown = realloc(buf, 2 * cap + 1);
      if (!grown) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return NULL;
  buf[len] = '\0';
  if (size) *size = len;
  return buf;
}

void fg_test_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

bool fg_test_file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

size_t fg_test_count_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) ++n;
  closedir(d);
  return n;
}

void fg_test_path_join(char out[FG_TEST_PATH_SIZE], const char *dir,
                       const char *name) {
  int n = snprintf(out, FG_TEST_PATH_SIZE, "%s/%s", dir, name);
  assert_true(n > 0 && n < FG_TEST_PATH_SIZE);
}

void fg_test_copy_templates(const char *dir) {
  char src_dir[FG_TEST_PATH_SIZE], src[FG_TEST_PATH_SIZE],
      dst[FG_TEST_PATH_SIZE];
  fg_test_path_join(src_dir, fg_test_source_dir(), "templates");
  DIR *d = opendir(src_dir);
  assert_non_null(d);
  int copied = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    fg_test_path_join(src, src_dir, e->d_name);
    fg_test_path_join(dst, dir, e->d_name);
    size_t size = 0;
    char *data = fg_test_read_file(src, &size);
    assert_non_null(data);
    fg_test_write_file(dst, data, size);
    free(data);
    ++copied;
  }
  closedir(d);
  assert_true(copied >= 2); /* plan.lua and at least one template */
}

void fg_test_write_template(const char *dir, const char *name,
                            const char *text) {
  char path[FG_TEST_PATH_SIZE];
  fg_test_path_join(path, dir, name);
  fg_test_write_file(path, text, strlen(text));
}

char *fg_test_echo_templates(const char *file_cut) {
  char *dir = fg_test_mkdtemp();
  fg_test_write_template(
      dir, "plan.lua",
      "return function(spec)\n"
      "  return {template = 'file.cut', variants = {{strategy = 'echo', symbol = 'echo_k',\n"
      "    pack_symbol = 'echo_pack', min_batch = 0, max_batch = -1, block_threads = 32,\n"
      "    rows_per_block = 1, cluster_blocks = 1, shared_bytes = 0, params_bytes = 4,\n"
      "    pack_threads = 32}}}\n"
      "end\n");
  fg_test_write_template(dir, "file.cut", file_cut);
  return dir;
}

double fg_test_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool fg_test_under_valgrind(void) {
  const char *preload = getenv("LD_PRELOAD");
  return preload && strstr(preload, "vgpreload");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FG_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define FG_TEST_SANITIZED 1
#endif
#endif

bool fg_test_timing_checks(void) {
#ifdef FG_TEST_SANITIZED
  return false;
#else
  return !fg_test_under_valgrind();
#endif
}

flowgen_spec fg_test_spec(int dim, int hidden, int steps, int arch) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.dim = dim;
  spec.hidden = hidden;
  spec.steps = steps;
  spec.arch = arch;
  return spec;
}

void fg_test_fill_uniform(float *out, size_t n, uint64_t seed, float scale) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
    out[i] = (float)((2.0 * u - 1.0) * scale);
  }
}

flowrt_weights *fg_test_random_model(const flowgen_spec *model, uint64_t seed, float gain) {
  flowrt_weights *w = NULL;
  flowgen_error err;
  if (flowrt_weights_alloc(model, &w, &err)) fail_msg("flowrt_weights_alloc: %s", err.message);
  for (int l = 0; l < w->layers; ++l) {
    size_t rows = l == w->layers - 1 ? (size_t)w->dim : (size_t)w->hidden;
    size_t cols = l == 0 ? (size_t)(w->dim + w->time_width + w->cond) : (size_t)w->hidden;
    float scale = gain / sqrtf((float)cols);
    fg_test_fill_uniform(w->w[l], rows * cols, seed + 2 * (uint64_t)l + 1, scale);
    fg_test_fill_uniform(w->b[l], rows, seed + 2 * (uint64_t)l + 2, scale);
  }
  return w;
}

flowrt_weights *fg_test_random_weights(int dim, int hidden, uint64_t seed) {
  flowgen_spec model = fg_test_spec(dim, hidden, 1, 90);
  return fg_test_random_model(&model, seed, 1.0f);
}

int fg_test_log_uniform(uint64_t *rng, int lo, int hi) {
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  double u = (double)(*rng >> 11) / 9007199254740992.0;
  int v = (int)floor(exp(log((double)lo) + u * (log(hi + 1.0) - log((double)lo))));
  return v < lo ? lo : v > hi ? hi : v;
}

flowgen_spec fg_test_random_spec(uint64_t *rng, int max_dim, int max_hidden,
                                 int max_steps, int arch) {
  static const flowgen_solver solvers[] = {FLOWGEN_SOLVER_EULER, FLOWGEN_SOLVER_MIDPOINT,
                                           FLOWGEN_SOLVER_HEUN, FLOWGEN_SOLVER_RK4};
  flowgen_spec spec = fg_test_spec(fg_test_log_uniform(rng, 1, max_dim),
                                   fg_test_log_uniform(rng, 1, max_hidden),
                                   fg_test_log_uniform(rng, 1, max_steps), arch);
  spec.solver = solvers[fg_test_log_uniform(rng, 1, 4) - 1];
  return spec;
}

uint64_t fg_test_seed(void) {
  static uint64_t seed;
  if (!seed) {
    const char *env = getenv("FLOWGEN_TEST_SEED");
    if (env && *env) {
      seed = strtoull(env, NULL, 10);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
      seed %= 1000000000ull;
    }
    if (!seed) seed = 1;
    fprintf(stderr, "# FLOWGEN_TEST_SEED=%llu\n", (unsigned long long)seed);
  }
  return seed;
}

static char *slurp_fd(int fd) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  ssize_t n;
  while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)n;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = '\0';
  return buf;
}

int fg_test_run(const char *command, char **out, char **err) {
  char *dir = fg_test_mkdtemp();
  char out_path[4200], err_path[4200], *full;
  snprintf(out_path, sizeof out_path, "%s/stdout", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  size_t len = strlen(command) + 2 * sizeof out_path + 32;
  full = malloc(len);
  snprintf(full, len, "(%s) >'%s' 2>'%s' </dev/null", command, out_path, err_path);
  int status = system(full);
  free(full);
  int fd;
  if (out) {
    fd = open(out_path, O_RDONLY);
    *out = fd >= 0 ? slurp_fd(fd) : strdup("");
    if (fd >= 0) close(fd);
  }
  if (err) {
    fd = open(err_path, O_RDONLY);
    *err = fd >= 0 ? slurp_fd(fd) : strdup("");
    if (fd >= 0) close(fd);
  }
  fg_test_rmtree(dir);
  free(dir);
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool fg_test_gpu_required(void) {
  const char *r = getenv("FLOWGEN_REQUIRE_GPU");
  return r && strcmp(r, "1") == 0;
}

bool fg_test_have_gpu(void) {
  static int have = -1;
  if (have < 0) {
    flowrt_runtime *rt = NULL;
    flowrt_options opts = {.disk_cache = 0};
    have = flowrt_open(&opts, &rt, NULL) == FLOWGEN_OK;
    flowrt_close(rt);
  }
  return have == 1;
}

void fg_test_begin_file_size_limit(fg_test_file_size_limit *limit, unsigned long long bytes) {
  struct rlimit r;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &r), 0);
  limit->saved_cur = r.rlim_cur;
  limit->saved_handler = signal(SIGXFSZ, SIG_IGN);
  r.rlim_cur = bytes;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
}

void fg_test_end_file_size_limit(const fg_test_file_size_limit *limit) {
  struct rlimit r;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &r), 0);
  r.rlim_cur = limit->saved_cur;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
  signal(SIGXFSZ, limit->saved_handler);
}
