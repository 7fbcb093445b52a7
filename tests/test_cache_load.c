/* The disk cache under load: 32 processes x 100 iterations on one folder,
 * mixing compiles (flowrt_cache_warm of three small shapes for sm_90),
 * loads (fg_cache_get of synthetic and compiled entries), stores of
 * synthetic payloads, listings and clears.  No process may crash or see a
 * wrong payload: a hit returns exactly the bytes of one complete put of its
 * key (a compiled one: a whole cubin of its shape), a listing only valid
 * entries.  At the end the folder holds only valid entries and no
 * temporary file.
 *
 * Most iterations are synthetic (cheap); each process warms one shape once,
 * which compiles only when a clear removed it since (at most 32 compiles).
 * Under valgrind: 8 processes x 50 iterations, synthetic only. */
/* memmem */
#define _GNU_SOURCE
#include "support.h"

#include "disk_cache.h"
#include "flowrt.h"
#include "module_cache.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SYNTHETIC_KEYS = 12, SHAPES = 3, PAYLOAD_MAX = 20000 };

static const int shapes[SHAPES][3] = {{2, 4, 1}, {3, 5, 2}, {4, 8, 1}};

/* What the processes inherit from the parent. */
static struct {
  const char *dir;
  int processes, iterations;
  bool compile;                /* NVRTC is there (and not under valgrind) */
  char *shape_key[SHAPES];     /* the cache key of each shape's cubin */
} load;

/* ---- synthetic payloads ------------------------------------------------- */

/* 12 bytes of tag, size and key index, then a pattern seeded by the tag: a
 * mix of two puts, a part of one or another key's payload cannot pass. */
static void synthetic_key(int index, char key[64]) {
  snprintf(key, 64, "load test synthetic key %d", index);
}

static uint32_t load_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static void fill_synthetic(unsigned char *buf, size_t size, uint32_t tag, int key) {
  uint64_t s = tag * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 12; i < size; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    buf[i] = (unsigned char)s;
  }
  store_u32(buf, tag);
  store_u32(buf + 4, (uint32_t)size);
  store_u32(buf + 8, (uint32_t)key);
}

static bool synthetic_is_whole(const unsigned char *buf, size_t size, int key) {
  if (size < 12 || size > PAYLOAD_MAX || load_u32(buf + 4) != size ||
      load_u32(buf + 8) != (uint32_t)key)
    return false;
  unsigned char *expected = malloc(size);
  if (!expected) return false;
  fill_synthetic(expected, size, load_u32(buf), key);
  bool same = memcmp(expected, buf, size) == 0;
  free(expected);
  return same;
}

/* ---- one process -------------------------------------------------------- */

typedef struct tally {
  int puts, hits, cubin_hits, misses, clears, lists, warms, compiles;
} tally;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Runs in a child: no cmocka asserts; a message and a non-zero return. */
#define CHILD_FAIL(...)                                                        \
  do {                                                                         \
    fprintf(stderr, "process %d, iteration %d: ", proc, iter);                 \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    return 1;                                                                  \
  } while (0)

static void count_listed(void *ctx, const flowrt_cache_entry *e) {
  int *invalid = ctx;
  if (!e->valid) ++*invalid;
}

/* ---- compiled payloads -------------------------------------------------- */

/* NVRTC's cubins are not byte for byte reproducible (the same source gives
 * a few bytes of difference between runs), so a compiled entry is checked
 * as a whole ELF image: 64-bit, its last header table or section ending
 * exactly at the end of the payload, holding the shape's packing kernel. */
static uint64_t load_u64(const unsigned char *p) {
  return (uint64_t)load_u32(p) | (uint64_t)load_u32(p + 4) << 32;
}

static bool elf_is_whole(const unsigned char *p, size_t size, const char *symbol,
                         size_t symbol_length);

static bool cubin_is_whole(const unsigned char *p, size_t size, int shape) {
  char symbol[64];
  snprintf(symbol, sizeof symbol, "flow_d%d_h%d_s%d_fp32_pack", shapes[shape][0],
           shapes[shape][1], shapes[shape][2]);
  return elf_is_whole(p, size, symbol, strlen(symbol) + 1);
}

/* A variant's part (warm stores one beside the pack kernel's): a whole
 * cubin holding a kernel of one of the shapes. */
static bool part_is_whole(const unsigned char *p, size_t size) {
  for (int shape = 0; shape < SHAPES; ++shape) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "flow_d%d_h%d_s%d_fp32_", shapes[shape][0],
             shapes[shape][1], shapes[shape][2]);
    if (elf_is_whole(p, size, prefix, strlen(prefix))) return true;
  }
  return false;
}

static bool elf_is_whole(const unsigned char *p, size_t size, const char *symbol,
                         size_t symbol_length) {
  if (size < 64 || memcmp(p, "\x7f" "ELF\x02", 5) != 0) return false;
  uint64_t ph_off = load_u64(p + 32), sh_off = load_u64(p + 40);
  unsigned ph_size = p[54] | p[55] << 8, ph_count = p[56] | p[57] << 8;
  unsigned sh_size = p[58] | p[59] << 8, sh_count = p[60] | p[61] << 8;
  uint64_t end = 0, ph_end = ph_off + (uint64_t)ph_size * ph_count,
           sh_end = sh_off + (uint64_t)sh_size * sh_count;
  if (ph_end > size || sh_end > size || sh_size < 64) return false;
  end = ph_end > sh_end ? ph_end : sh_end;
  for (unsigned i = 0; i < sh_count; ++i) {
    const unsigned char *sh = p + sh_off + (uint64_t)i * sh_size;
    uint64_t section_end = load_u64(sh + 24) + load_u64(sh + 32);
    if (load_u32(sh + 4) != 8 /* SHT_NOBITS */ && section_end > end) end = section_end;
  }
  return end == size && memmem(p, size, symbol, symbol_length) != NULL;
}

/* Whether a hit's payload is right for its key: the whole synthetic payload
 * of key index `index`, or (index < 0) a cubin of shape -index - 1. */
static bool payload_is_right(int index, const void *payload, size_t size) {
  if (index >= 0) return synthetic_is_whole(payload, size, index);
  return cubin_is_whole(payload, size, -index - 1);
}

/* Gets key (key index `index`, as above) and checks a hit. */
static int check_get(int proc, int iter, const char *key, int index, tally *t) {
  fg_cache_result result;
  void *payload = NULL;
  size_t size = 0;
  flowgen_error err;
  if (fg_cache_get(load.dir, key, &result, &payload, &size, &err))
    CHILD_FAIL("get: %s", err.message);
  if (result == FG_CACHE_INVALID) CHILD_FAIL("get found an invalid entry: %s", err.message);
  if (result == FG_CACHE_MISS) {
    t->misses++;
    return 0;
  }
  t->hits++;
  t->cubin_hits += index < 0;
  bool right = payload_is_right(index, payload, size);
  free(payload);
  if (!right) CHILD_FAIL("get of '%.40s' returned %zu bytes that no put stored", key, size);
  return 0;
}

static int run_process(int proc) {
  tally t = {0};
  unsigned char *payload = malloc(PAYLOAD_MAX);
  char key[64];
  int iter = 0;
  if (!payload) CHILD_FAIL("out of memory");
  int warm_at = (proc * 7) % load.iterations;
  for (iter = 0; iter < load.iterations; ++iter) {
    uint64_t r = mix((uint64_t)proc << 32 | (uint64_t)iter);
    int what = (int)(r % 100), index = (int)((r >> 8) % SYNTHETIC_KEYS);
    flowgen_error err;
    if (load.compile && iter == warm_at) {
      int shape = proc % SHAPES;
      flowgen_spec spec = fg_test_spec(shapes[shape][0], shapes[shape][1], shapes[shape][2], 90);
      bool was_cached = false;
      if (flowrt_cache_warm(load.dir, &spec, NULL, &was_cached, &err))
        CHILD_FAIL("warm: %s", err.message);
      t.warms++;
      t.compiles += !was_cached;
      if (check_get(proc, iter, load.shape_key[shape], -shape - 1, &t)) return 1;
    } else if (what < 45) {
      size_t size = 12 + (size_t)((r >> 16) % (PAYLOAD_MAX - 12));
      fill_synthetic(payload, size, (uint32_t)(proc * 1000 + iter), index);
      synthetic_key(index, key);
      if (fg_cache_put(load.dir, key, payload, size, &err)) CHILD_FAIL("put: %s", err.message);
      t.puts++;
    } else if (what < 75) {
      synthetic_key(index, key);
      if (check_get(proc, iter, key, index, &t)) return 1;
    } else if (what < 85) {
      int shape = index % SHAPES;
      if (load.compile && check_get(proc, iter, load.shape_key[shape], -shape - 1, &t))
        return 1;
    } else if (what < 88) {
      size_t removed;
      if (flowrt_cache_clear(load.dir, &removed, &err)) CHILD_FAIL("clear: %s", err.message);
      t.clears++;
    } else {
      int invalid = 0;
      if (flowrt_cache_list(load.dir, count_listed, &invalid, &err))
        CHILD_FAIL("list: %s", err.message);
      if (invalid) CHILD_FAIL("list: %d invalid entries", invalid);
      t.lists++;
    }
  }
  free(payload);
  printf("%d %d %d %d %d %d %d %d\n", t.puts, t.hits, t.cubin_hits, t.misses, t.clears,
         t.lists, t.warms, t.compiles);
  fflush(stdout);
  return 0;
}

/* ---- the parent --------------------------------------------------------- */

/* The cache key of each shape's pack kernel's cubin (warm stores an entry
 * a part: the pack kernel's and each variant's). */
static void compute_shape_keys(void) {
  for (int i = 0; i < SHAPES; ++i) {
    flowgen_spec spec = fg_test_spec(shapes[i][0], shapes[i][1], shapes[i][2], 90);
    spec.arch_specific = fg_arch_specific(spec.arch);  /* as warm resolves it */
    flowgen_options pack = {.part = FLOWGEN_PART_PACK};
    char name[FG_PART_NAME_MAX];
    fg_part_name(&spec, NULL, name, sizeof name);
    assert_int_equal(fg_part_cache_key(&spec, &pack, name, 90, FLOWRT_TARGET_CUBIN,
                                       flowrt_nvrtc_version(), &load.shape_key[i], NULL),
                     FLOWGEN_OK);
  }
}

typedef struct final_check {
  int entries, invalid, wrong;
} final_check;

/* The key index of a key the processes use (see payload_is_right). */
static bool key_index(const char *key, int *index) {
  for (int i = 0; i < SYNTHETIC_KEYS; ++i) {
    char name[64];
    synthetic_key(i, name);
    if (strcmp(name, key) == 0) return *index = i, true;
  }
  for (int i = 0; i < SHAPES && load.compile; ++i)
    if (strcmp(load.shape_key[i], key) == 0) return *index = -i - 1, true;
  return false;
}

static void check_final_entry(void *ctx, const flowrt_cache_entry *e) {
  final_check *c = ctx;
  c->entries++;
  int index;
  if (!e->valid) {
    c->invalid++;
    return;
  }
  if (!key_index(e->key, &index)) {
    /* not a key of the processes' own: a variant's part that warm stored */
    fg_cache_result result;
    void *payload = NULL;
    size_t size = 0;
    if (!load.compile || fg_cache_get(load.dir, e->key, &result, &payload, &size, NULL) ||
        result != FG_CACHE_HIT || !part_is_whole(payload, size))
      c->wrong++;
    free(payload);
    return;
  }
  fg_cache_result result;
  void *payload = NULL;
  size_t size = 0;
  if (fg_cache_get(load.dir, e->key, &result, &payload, &size, NULL) != FLOWGEN_OK ||
      result != FG_CACHE_HIT || !payload_is_right(index, payload, size))
    c->wrong++;
  free(payload);
}

static int count_temp_files(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strncmp(e->d_name, FG_CACHE_TEMP_PREFIX, strlen(FG_CACHE_TEMP_PREFIX)) == 0;
  closedir(d);
  return n;
}

static void test_cache_under_load(void **state) {
  (void)state;
  char *base = fg_test_mkdtemp();
  char dir[FG_TEST_PATH_SIZE];
  fg_test_path_join(dir, base, "cache");
  bool valgrind = fg_test_under_valgrind();
  load.dir = dir;
  load.processes = valgrind ? 8 : 32;
  load.iterations = valgrind ? 50 : 100;
  load.compile = !valgrind && flowrt_nvrtc_version() != 0;
  if (load.compile) compute_shape_keys();
  else print_message("# synthetic entries only (%s)\n", valgrind ? "valgrind" : "no NVRTC");

  double t0 = fg_test_now_seconds();
  int out[2];
  assert_int_equal(pipe(out), 0);
  fflush(stdout);
  pid_t children[32];
  for (int p = 0; p < load.processes; ++p) {
    children[p] = fork();
    assert_true(children[p] >= 0);
    if (children[p] == 0) {
      close(out[0]);
      if (dup2(out[1], STDOUT_FILENO) < 0) _exit(2);
      _exit(run_process(p));
    }
  }
  close(out[1]);
  tally sum = {0};
  FILE *results = fdopen(out[0], "r");
  assert_non_null(results);
  tally t;
  int reports = 0;
  while (fscanf(results, "%d %d %d %d %d %d %d %d", &t.puts, &t.hits, &t.cubin_hits,
                &t.misses, &t.clears, &t.lists, &t.warms, &t.compiles) == 8) {
    sum.puts += t.puts, sum.hits += t.hits, sum.misses += t.misses;
    sum.cubin_hits += t.cubin_hits;
    sum.clears += t.clears, sum.lists += t.lists, sum.warms += t.warms;
    sum.compiles += t.compiles;
    ++reports;
  }
  fclose(results);
  int failed = 0;
  for (int p = 0; p < load.processes; ++p) {
    int status;
    assert_int_equal(waitpid(children[p], &status, 0), children[p]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "process %d: %s %d\n", p, WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      ++failed;
    }
  }
  print_message("# %d processes x %d iterations in %.1f s: %d puts, %d hits (%d of "
                "cubins), %d misses, %d clears, %d listings, %d warms (%d compiled)\n",
                load.processes, load.iterations, fg_test_now_seconds() - t0, sum.puts,
                sum.hits, sum.cubin_hits, sum.misses, sum.clears, sum.lists, sum.warms,
                sum.compiles);
  assert_int_equal(failed, 0);
  assert_int_equal(reports, load.processes);
  assert_true(sum.hits > 0 && sum.clears > 0 && sum.puts > 0);
  assert_true(!load.compile || sum.cubin_hits > 0);

  final_check c = {0};
  assert_int_equal(flowrt_cache_list(dir, check_final_entry, &c, NULL), FLOWGEN_OK);
  assert_int_equal(c.invalid, 0);
  assert_int_equal(c.wrong, 0);
  assert_int_equal(count_temp_files(dir), 0);

  for (int i = 0; i < SHAPES; ++i) free(load.shape_key[i]);
  memset(&load, 0, sizeof load);
  fg_test_rmtree(base);
  free(base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_under_load),
  };
  return cmocka_run_group_tests_name("cache_load", tests, NULL, NULL);
}
