/* Helpers shared by the cmocka tests. */
#include "support.h"

#include "flowrt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
