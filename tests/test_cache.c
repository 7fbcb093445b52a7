/* The on-disk module cache: entry format, validation, folder, list, clear. */
#include "support.h"

#include "disk_cache.h"
#include "flowrt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PATH_SIZE FG_TEST_PATH_SIZE

static const char *const cache_env[] = {"FLOWGEN_CACHE_DIR", "XDG_CACHE_HOME",
                                        "HOME", "FLOWGEN_CACHE"};
#define CACHE_ENV_COUNT (sizeof cache_env / sizeof cache_env[0])
static char *saved_env[CACHE_ENV_COUNT];

/* Each test gets a fresh folder and may change the cache variables. */
static int setup(void **state) {
  for (size_t i = 0; i < CACHE_ENV_COUNT; ++i) {
    const char *value = getenv(cache_env[i]);
    saved_env[i] = value ? strdup(value) : NULL;
  }
  *state = fg_test_mkdtemp();
  return 0;
}

static int teardown(void **state) {
  for (size_t i = 0; i < CACHE_ENV_COUNT; ++i) {
    if (saved_env[i]) setenv(cache_env[i], saved_env[i], 1);
    else unsetenv(cache_env[i]);
    free(saved_env[i]);
    saved_env[i] = NULL;
  }
  fg_test_rmtree(*state);
  free(*state);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static void entry_file(char out[PATH_SIZE], const char *dir, const char *key) {
  char name[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(key, name);
  fg_test_path_join(out, dir, name);
}

static void fill_pattern(unsigned char *buf, size_t size, unsigned seed) {
  for (size_t i = 0; i < size; ++i)
    buf[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static void put_ok(const char *dir, const char *key, const void *payload,
                   size_t size) {
  flowgen_error err;
  flowgen_status status = fg_cache_put(dir, key, payload, size, &err);
  if (status != FLOWGEN_OK) fail_msg("put %s: %s", key, err.message);
}

static void put_pattern(const char *dir, const char *key, size_t size,
                        unsigned seed) {
  unsigned char *payload = malloc(size ? size : 1);
  fill_pattern(payload, size, seed);
  put_ok(dir, key, payload, size);
  free(payload);
}

static void assert_hit(const char *dir, const char *key, const void *expected,
                       size_t size) {
  fg_cache_result result;
  void *payload;
  size_t got;
  flowgen_error err;
  assert_int_equal(fg_cache_get(dir, key, &result, &payload, &got, &err),
                   FLOWGEN_OK);
  assert_int_equal(result, FG_CACHE_HIT);
  assert_int_equal(got, size);
  assert_non_null(payload);
  if (size) assert_memory_equal(payload, expected, size);
  free(payload);
}

static void assert_hit_pattern(const char *dir, const char *key, size_t size,
                               unsigned seed) {
  unsigned char *expected = malloc(size ? size : 1);
  fill_pattern(expected, size, seed);
  assert_hit(dir, key, expected, size);
  free(expected);
}

static void assert_miss(const char *dir, const char *key) {
  fg_cache_result result = FG_CACHE_HIT;
  void *payload = (void *)1;
  size_t size = 1;
  assert_int_equal(fg_cache_get(dir, key, &result, &payload, &size, NULL),
                   FLOWGEN_OK);
  assert_int_equal(result, FG_CACHE_MISS);
  assert_null(payload);
  assert_int_equal(size, 0);
}

/* The entry is reported invalid, with its path and why, and not loaded. */
static void assert_invalid(const char *dir, const char *key, const char *why) {
  fg_cache_result result = FG_CACHE_HIT;
  void *payload = (void *)1;
  size_t size = 1;
  flowgen_error err;
  assert_int_equal(fg_cache_get(dir, key, &result, &payload, &size, &err),
                   FLOWGEN_OK);
  assert_int_equal(result, FG_CACHE_INVALID);
  assert_null(payload);
  assert_int_equal(size, 0);
  assert_int_equal(err.status, FLOWGEN_OK);
  char path[PATH_SIZE];
  entry_file(path, dir, key);
  if (!strstr(err.message, path) || (why && !strstr(err.message, why)))
    fail_msg("expected '%s' and '%s' in: %s", path, why ? why : "",
             err.message);
}

static void rewrite_bytes(const char *path, size_t offset, const void *bytes,
                          size_t count) {
  size_t size;
  char *data = fg_test_read_file(path, &size);
  assert_non_null(data);
  assert_true(offset + count <= size);
  memcpy(data + offset, bytes, count);
  fg_test_write_file(path, data, size);
  free(data);
}

static void flip_byte(const char *path, size_t offset) {
  size_t size;
  char *data = fg_test_read_file(path, &size);
  assert_non_null(data);
  assert_true(offset < size);
  data[offset] ^= 0x5a;
  fg_test_write_file(path, data, size);
  free(data);
}

static void write_le(const char *path, size_t offset, uint64_t value,
                     int bytes) {
  unsigned char raw[8];
  for (int i = 0; i < bytes; ++i) raw[i] = (unsigned char)(value >> (8 * i));
  rewrite_bytes(path, offset, raw, (size_t)bytes);
}

static size_t file_size(const char *path) {
  struct stat info;
  assert_int_equal(stat(path, &info), 0);
  return (size_t)info.st_size;
}

/* Counts the names in dir that start with prefix / end with suffix. */
static int count_files(const char *dir, const char *prefix,
                       const char *suffix) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int count = 0;
  struct dirent *item;
  while ((item = readdir(d)) != NULL) {
    const char *name = item->d_name;
    size_t length = strlen(name);
    if (prefix && strncmp(name, prefix, strlen(prefix)) != 0) continue;
    if (suffix && (length < strlen(suffix) ||
                   strcmp(name + length - strlen(suffix), suffix) != 0))
      continue;
    if (strcmp(name, ".") && strcmp(name, "..")) ++count;
  }
  closedir(d);
  return count;
}

static const char *const sample_key =
    "source=7f3a9c;options=-default-device -std=c++17;arch=sm_90;nvrtc=13000";

/* ---- get and put -------------------------------------------------------- */

static void test_put_then_get_hits(void **state) {
  const char *dir = *state;
  put_pattern(dir, sample_key, 1000, 1);
  assert_hit_pattern(dir, sample_key, 1000, 1);

  /* The documented layout, little-endian. */
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  size_t size, key_size = strlen(sample_key);
  unsigned char *raw = (unsigned char *)fg_test_read_file(path, &size);
  assert_non_null(raw);
  assert_int_equal(size, FG_CACHE_HEADER_SIZE + key_size + 1000);
  assert_memory_equal(raw, "FGCACHE\0", 8);
  assert_memory_equal(raw + 8, "\x01\x00\x00\x00", 4);
  assert_int_equal(raw[12] | raw[13] << 8, key_size);
  assert_memory_equal(raw + 16, "\xe8\x03\x00\x00\x00\x00\x00\x00", 8);
  assert_memory_equal(raw + FG_CACHE_HEADER_SIZE, sample_key, key_size);
  free(raw);

  char name[FG_CACHE_FILE_NAME_SIZE], other[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(sample_key, name);
  assert_int_equal(strlen(name), 36);
  assert_int_equal(strspn(name, "0123456789abcdef"), 32);
  assert_string_equal(name + 32, ".fgc");
  fg_cache_file_name("another key", other);
  assert_string_not_equal(name, other);
}

static void test_put_replaces_and_keeps_keys_apart(void **state) {
  const char *dir = *state;
  put_pattern(dir, "key one", 300, 1);
  put_pattern(dir, "key two", 5000, 2);
  put_pattern(dir, "key one", 20, 3);
  put_ok(dir, "empty payload", NULL, 0);
  assert_hit_pattern(dir, "key one", 20, 3);
  assert_hit_pattern(dir, "key two", 5000, 2);
  assert_hit(dir, "empty payload", "", 0);
  assert_int_equal(count_files(dir, NULL, ".fgc"), 3);
  assert_int_equal(count_files(dir, ".tmp-", NULL), 0);
}

static void test_missing_entry_is_a_miss(void **state) {
  const char *dir = *state;
  assert_miss(dir, sample_key);
  put_pattern(dir, "other", 10, 1);
  assert_miss(dir, sample_key);
  char missing[PATH_SIZE];
  fg_test_path_join(missing, dir, "not/there");
  assert_miss(missing, sample_key);
}

static void test_put_and_get_reject_bad_arguments(void **state) {
  const char *dir = *state;
  flowgen_error err;
  assert_int_equal(fg_cache_put(dir, "", "x", 1, &err), FLOWGEN_INVALID);
  assert_int_equal(fg_cache_put(dir, "k", NULL, 1, &err), FLOWGEN_INVALID);
  assert_int_equal(fg_cache_put("", "k", "x", 1, &err), FLOWGEN_INVALID);
  assert_int_equal(fg_cache_put(dir, "k", "x", FG_CACHE_PAYLOAD_MAX + 1, &err),
                   FLOWGEN_INVALID);
  assert_non_null(strstr(err.message, "limit"));
  fg_cache_result result;
  void *payload;
  size_t size;
  assert_int_equal(fg_cache_get(NULL, "k", &result, &payload, &size, &err),
                   FLOWGEN_INVALID);
  assert_int_equal(count_files(dir, NULL, NULL), 0);
}

/* ---- invalid entries ---------------------------------------------------- */

static void test_corrupt_payload_byte_is_invalid(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  size_t payload_start = FG_CACHE_HEADER_SIZE + strlen(sample_key);
  const size_t offsets[] = {0, 1, 2047, 4095};
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; ++i) {
    put_pattern(dir, sample_key, 4096, 7);
    flip_byte(path, payload_start + offsets[i]);
    assert_invalid(dir, sample_key, "checksum mismatch");
  }
}

static void test_corrupt_header_is_invalid(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  const struct {
    size_t offset;
    const char *why;
  } cases[] = {
      {FG_CACHE_OFFSET_MAGIC, "magic"},
      {FG_CACHE_OFFSET_MAGIC + 7, "magic"},
      {FG_CACHE_OFFSET_VERSION + 3, "version"},
      {FG_CACHE_OFFSET_KEY_SIZE, NULL},
      {FG_CACHE_OFFSET_PAYLOAD_SIZE, "truncated"},
      {FG_CACHE_OFFSET_PAYLOAD_SIZE + 7, "payload length"},
      {FG_CACHE_OFFSET_CHECKSUM + 5, "checksum mismatch"},
      {FG_CACHE_HEADER_SIZE + 3, "foreign"}, /* a byte of the key */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    put_pattern(dir, sample_key, 512, 3);
    flip_byte(path, cases[i].offset);
    assert_invalid(dir, sample_key, cases[i].why);
  }
}

/* Lengths that would ask for absurd memory are refused before any read. */
static void test_hostile_lengths_are_invalid(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  put_pattern(dir, sample_key, 64, 1);
  write_le(path, FG_CACHE_OFFSET_PAYLOAD_SIZE, UINT64_C(1) << 62, 8);
  assert_invalid(dir, sample_key, "payload length out of range");
  put_pattern(dir, sample_key, 64, 1);
  write_le(path, FG_CACHE_OFFSET_PAYLOAD_SIZE, FG_CACHE_PAYLOAD_MAX, 8);
  assert_invalid(dir, sample_key, "truncated");
  put_pattern(dir, sample_key, 64, 1);
  write_le(path, FG_CACHE_OFFSET_KEY_SIZE, UINT32_MAX, 4);
  assert_invalid(dir, sample_key, "key length out of range");
  put_pattern(dir, sample_key, 64, 1);
  write_le(path, FG_CACHE_OFFSET_KEY_SIZE, 0, 4);
  assert_invalid(dir, sample_key, "key length out of range");
}

static void test_truncated_entry_is_invalid(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  size_t key_size = strlen(sample_key), payload_size = 3000;
  size_t full = FG_CACHE_HEADER_SIZE + key_size + payload_size;
  const size_t lengths[] = {0, 1, 8, FG_CACHE_HEADER_SIZE - 1,
                            FG_CACHE_HEADER_SIZE, FG_CACHE_HEADER_SIZE + 1,
                            FG_CACHE_HEADER_SIZE + key_size,
                            FG_CACHE_HEADER_SIZE + key_size + 1, full / 2,
                            full - 1};
  for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; ++i) {
    put_pattern(dir, sample_key, payload_size, 5);
    assert_int_equal(file_size(path), full);
    assert_int_equal(truncate(path, (off_t)lengths[i]), 0);
    assert_invalid(dir, sample_key, "truncated");
  }
  put_pattern(dir, sample_key, payload_size, 5);
  assert_int_equal(truncate(path, (off_t)full + 1), 0);
  assert_invalid(dir, sample_key, "trailing bytes");
}

static void test_foreign_entry_is_invalid(void **state) {
  const char *dir = *state;
  char path_a[PATH_SIZE], path_b[PATH_SIZE];
  entry_file(path_a, dir, "key-A");
  entry_file(path_b, dir, "key-B");
  put_pattern(dir, "key-A", 100, 1);
  put_pattern(dir, "key-B", 100, 2);
  assert_int_equal(rename(path_b, path_a), 0);
  assert_invalid(dir, "key-A", "foreign");
  assert_miss(dir, "key-B");
}

static void test_other_format_version_is_invalid(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  const uint32_t versions[] = {0, FG_CACHE_FORMAT_VERSION + 1, UINT32_MAX};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; ++i) {
    put_pattern(dir, sample_key, 200, 9);
    write_le(path, FG_CACHE_OFFSET_VERSION, versions[i], 4);
    assert_invalid(dir, sample_key, "unsupported format version");
  }
}

static void test_put_replaces_an_invalid_entry(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  put_pattern(dir, sample_key, 777, 1);
  flip_byte(path, file_size(path) - 1);
  assert_invalid(dir, sample_key, "checksum");
  put_pattern(dir, sample_key, 999, 2);
  assert_hit_pattern(dir, sample_key, 999, 2);
  assert_int_equal(count_files(dir, NULL, NULL), 1);
}

/* ---- the folder --------------------------------------------------------- */

static void expect_cache_dir(const char *expected) {
  char buf[PATH_SIZE];
  flowgen_error err;
  flowgen_status status = flowrt_cache_dir(buf, sizeof buf, &err);
  if (status != FLOWGEN_OK) fail_msg("flowrt_cache_dir: %s", err.message);
  assert_string_equal(buf, expected);
}

static void test_cache_dir_resolution_order(void **state) {
  (void)state;
  setenv("FLOWGEN_CACHE_DIR", "/explicit/cache", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/someone", 1);
  expect_cache_dir("/explicit/cache");
  setenv("FLOWGEN_CACHE_DIR", "", 1);
  expect_cache_dir("/xdg/flowgen");
  unsetenv("FLOWGEN_CACHE_DIR");
  expect_cache_dir("/xdg/flowgen");
  setenv("XDG_CACHE_HOME", "", 1);
  expect_cache_dir("/home/someone/.cache/flowgen");
  setenv("XDG_CACHE_HOME", "relative/xdg", 1); /* ignored, as XDG says */
  expect_cache_dir("/home/someone/.cache/flowgen");
  unsetenv("XDG_CACHE_HOME");
  expect_cache_dir("/home/someone/.cache/flowgen");

  setenv("HOME", "", 1);
  char buf[PATH_SIZE];
  flowgen_error err;
  assert_int_equal(flowrt_cache_dir(buf, sizeof buf, &err), FLOWGEN_IO);
  assert_non_null(strstr(err.message, "FLOWGEN_CACHE_DIR"));
  unsetenv("HOME");
  assert_int_equal(flowrt_cache_dir(buf, sizeof buf, &err), FLOWGEN_IO);

  setenv("FLOWGEN_CACHE_DIR", "/a/rather/long/path", 1);
  assert_int_equal(flowrt_cache_dir(buf, 8, &err), FLOWGEN_INVALID);
  assert_non_null(strstr(err.message, "/a/rather/long/path"));
}

static void test_cache_dir_is_not_created(void **state) {
  char cache[PATH_SIZE];
  fg_test_path_join(cache, *state, "not-yet");
  setenv("FLOWGEN_CACHE_DIR", cache, 1);
  expect_cache_dir(cache);
  assert_false(fg_test_file_exists(cache));
}

static void assert_mode_0700(const char *path) {
  struct stat info;
  assert_int_equal(stat(path, &info), 0);
  assert_true(S_ISDIR(info.st_mode));
  assert_int_equal(info.st_mode & 07777, 0700);
}

static void test_open_creates_folder_0700(void **state) {
  const char *dir = *state;
  char a[PATH_SIZE], ab[PATH_SIZE], cache[PATH_SIZE];
  fg_test_path_join(a, dir, "a");
  fg_test_path_join(ab, a, "b");
  fg_test_path_join(cache, ab, "cache");
  flowgen_error err;
  assert_int_equal(fg_cache_open(cache, &err), FLOWGEN_OK);
  assert_mode_0700(a);
  assert_mode_0700(ab);
  assert_mode_0700(cache);
  assert_int_equal(count_files(cache, NULL, NULL), 0); /* no probe left */
  assert_int_equal(fg_cache_open(cache, &err), FLOWGEN_OK);
}

static void test_put_creates_folder_0700(void **state) {
  char cache[PATH_SIZE], nested[PATH_SIZE];
  fg_test_path_join(cache, *state, "first");
  fg_test_path_join(nested, cache, "write");
  put_pattern(nested, sample_key, 50, 4);
  assert_mode_0700(cache);
  assert_mode_0700(nested);
  assert_hit_pattern(nested, sample_key, 50, 4);
}

/* Root writes through permission bits; "a folder under a file" fails for
 * everyone. */
static bool can_create_file_in(const char *dir) {
  char probe[PATH_SIZE];
  fg_test_path_join(probe, dir, "probe");
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  close(fd);
  unlink(probe);
  return true;
}

static void assert_unusable(const char *cache, const char *why) {
  flowgen_error err;
  assert_int_equal(fg_cache_open(cache, &err), FLOWGEN_IO);
  assert_int_equal(err.status, FLOWGEN_IO);
  if (!strstr(err.message, cache) || !strstr(err.message, why))
    fail_msg("expected '%s' and '%s' in: %s", cache, why, err.message);
  assert_int_equal(fg_cache_put(cache, sample_key, "x", 1, &err), FLOWGEN_IO);
  assert_non_null(strstr(err.message, cache));
}

static void test_unusable_folder_is_an_error(void **state) {
  const char *dir = *state;
  char file[PATH_SIZE], under_file[PATH_SIZE];
  fg_test_path_join(file, dir, "file");
  fg_test_path_join(under_file, file, "sub");
  fg_test_write_file(file, "not a folder", 12);
  assert_unusable(under_file, strerror(ENOTDIR));
  assert_unusable(file, "not a directory");
  assert_int_equal(file_size(file), 12);

  char locked[PATH_SIZE];
  fg_test_path_join(locked, dir, "locked");
  assert_int_equal(mkdir(locked, 0700), 0);
  assert_int_equal(chmod(locked, 0500), 0);
  if (!can_create_file_in(locked)) { /* not root */
    assert_unusable(locked, strerror(EACCES));
    assert_int_equal(count_files(locked, NULL, NULL), 0);
  }
  assert_int_equal(chmod(locked, 0700), 0);
}

/* A write that fails half-way (here: over RLIMIT_FSIZE) leaves the old entry
 * and no temporary file. */
static void test_failed_put_leaves_old_entry(void **state) {
  const char *dir = *state;
  put_pattern(dir, sample_key, 100, 1);
  struct rlimit saved, small;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
  small = saved;
  small.rlim_cur = 4096;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
  unsigned char big[64 * 1024];
  fill_pattern(big, sizeof big, 2);
  flowgen_error err;
  flowgen_status status = fg_cache_put(dir, sample_key, big, sizeof big, &err);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
  signal(SIGXFSZ, old_handler);

  assert_int_equal(status, FLOWGEN_IO);
  if (!strstr(err.message, dir) || !strstr(err.message, FG_CACHE_TEMP_PREFIX) ||
      !strstr(err.message, strerror(EFBIG)))
    fail_msg("unexpected message: %s", err.message);
  assert_hit_pattern(dir, sample_key, 100, 1);
  assert_int_equal(count_files(dir, NULL, NULL), 1);
}

static void test_disabled_by_environment(void **state) {
  (void)state;
  unsetenv("FLOWGEN_CACHE");
  assert_true(fg_cache_enabled_from_env());
  setenv("FLOWGEN_CACHE", "", 1);
  assert_true(fg_cache_enabled_from_env());
  setenv("FLOWGEN_CACHE", "1", 1);
  assert_true(fg_cache_enabled_from_env());
  setenv("FLOWGEN_CACHE", "0", 1);
  assert_false(fg_cache_enabled_from_env());
}

/* ---- list and clear ----------------------------------------------------- */

typedef struct listed_entry {
  char file[64];
  char key[128];
  uint64_t payload_size;
  bool valid;
} listed_entry;

typedef struct listing {
  listed_entry entries[16];
  int count;
} listing;

static void collect(void *ctx, const flowrt_cache_entry *e) {
  listing *list = ctx;
  assert_true(list->count < 16);
  listed_entry *out = &list->entries[list->count++];
  snprintf(out->file, sizeof out->file, "%s", e->file);
  snprintf(out->key, sizeof out->key, "%s", e->key);
  out->payload_size = e->payload_size;
  out->valid = e->valid;
}

static const listed_entry *find_listed(const listing *list, const char *key) {
  char name[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(key, name);
  for (int i = 0; i < list->count; ++i)
    if (strcmp(list->entries[i].file, name) == 0) return &list->entries[i];
  fail_msg("%s (%s) not listed", key, name);
  return NULL;
}

static void make_temp_file(const char *dir, const char *name, time_t age) {
  char path[PATH_SIZE];
  fg_test_path_join(path, dir, name);
  fg_test_write_file(path, "partial", 7);
  struct timespec times[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
}

static void test_list_reports_every_entry_sorted(void **state) {
  const char *dir = *state;
  put_pattern(dir, "alpha", 10, 1);
  put_pattern(dir, "beta", 2000, 2);
  put_pattern(dir, "gamma", 0, 3);
  put_pattern(dir, "corrupt", 300, 4);
  char path[PATH_SIZE];
  entry_file(path, dir, "corrupt");
  flip_byte(path, file_size(path) - 1);
  put_pattern(dir, "foreign", 40, 5);
  char foreign_path[PATH_SIZE], borrowed_path[PATH_SIZE];
  entry_file(foreign_path, dir, "foreign");
  entry_file(borrowed_path, dir, "borrowed name");
  assert_int_equal(rename(foreign_path, borrowed_path), 0);
  make_temp_file(dir, ".tmp-abc123", 0);
  fg_test_path_join(path, dir, "README");
  fg_test_write_file(path, "keep me", 7);

  listing list = {0};
  flowgen_error err;
  assert_int_equal(flowrt_cache_list(dir, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 5);
  for (int i = 1; i < list.count; ++i)
    assert_true(strcmp(list.entries[i - 1].file, list.entries[i].file) < 0);
  const listed_entry *alpha = find_listed(&list, "alpha");
  assert_string_equal(alpha->key, "alpha");
  assert_int_equal(alpha->payload_size, 10);
  assert_true(alpha->valid);
  assert_int_equal(find_listed(&list, "beta")->payload_size, 2000);
  assert_true(find_listed(&list, "beta")->valid);
  assert_true(find_listed(&list, "gamma")->valid);
  assert_false(find_listed(&list, "corrupt")->valid);
  const listed_entry *foreign = find_listed(&list, "borrowed name");
  assert_string_equal(foreign->key, "foreign");
  assert_false(foreign->valid);
}

static void test_clear_removes_only_cache_files(void **state) {
  const char *dir = *state;
  put_pattern(dir, "alpha", 10, 1);
  put_pattern(dir, "beta", 20, 2);
  char path[PATH_SIZE];
  entry_file(path, dir, "beta");
  assert_int_equal(truncate(path, 5), 0);
  make_temp_file(dir, ".tmp-stale1", 3600);
  make_temp_file(dir, ".tmp-fresh1", 0);
  fg_test_path_join(path, dir, "README");
  fg_test_write_file(path, "keep me", 7);
  fg_test_path_join(path, dir, "notes.fgc.txt");
  fg_test_write_file(path, "keep me", 7);
  fg_test_path_join(path, dir, "folder.fgc");
  assert_int_equal(mkdir(path, 0700), 0);

  size_t removed = 99;
  flowgen_error err;
  assert_int_equal(flowrt_cache_clear(dir, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 3);
  assert_int_equal(count_files(dir, NULL, NULL), 4);
  fg_test_path_join(path, dir, ".tmp-fresh1"); /* may be a put in progress */
  assert_true(fg_test_file_exists(path));
  fg_test_path_join(path, dir, "README");
  assert_true(fg_test_file_exists(path));
  fg_test_path_join(path, dir, "notes.fgc.txt");
  assert_true(fg_test_file_exists(path));
  listing list = {0};
  assert_int_equal(flowrt_cache_list(dir, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 0);
  assert_int_equal(flowrt_cache_clear(dir, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 0);
}

static void test_list_and_clear_default_and_missing_folder(void **state) {
  char cache[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  setenv("FLOWGEN_CACHE_DIR", cache, 1);
  listing list = {0};
  size_t removed = 99;
  flowgen_error err;
  assert_int_equal(flowrt_cache_list(NULL, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 0);
  assert_int_equal(flowrt_cache_clear(NULL, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 0);
  assert_false(fg_test_file_exists(cache));

  put_pattern(cache, "alpha", 10, 1);
  assert_int_equal(flowrt_cache_list(NULL, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 1);
  assert_string_equal(list.entries[0].key, "alpha");
  assert_int_equal(flowrt_cache_clear(NULL, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 1);
  assert_miss(cache, "alpha");
}

/* ---- concurrency -------------------------------------------------------- */

enum { WRITERS = 8, ROUNDS = 50, SLOTS_PER_WRITER = 10 };

/* Payloads say who wrote them: tag and size in the first 8 bytes, then a
 * pattern seeded by the tag, so a mix of two writes cannot pass. */
static size_t tagged_size(int writer, int round) {
  return 8 + (size_t)((writer * 7919 + round * 104729) % 30000);
}

static void fill_tagged(unsigned char *buf, size_t size, uint32_t tag) {
  fill_pattern(buf, size, tag);
  for (int i = 0; i < 4; ++i) {
    buf[i] = (unsigned char)(tag >> (8 * i));
    buf[4 + i] = (unsigned char)(size >> (8 * i));
  }
}

static bool tagged_is_whole(const unsigned char *buf, size_t size) {
  if (size < 8) return false;
  uint32_t tag = 0, stated = 0;
  for (int i = 3; i >= 0; --i) {
    tag = tag << 8 | buf[i];
    stated = stated << 8 | buf[4 + i];
  }
  if (stated != size) return false;
  unsigned char *expected = malloc(size);
  fill_tagged(expected, size, tag);
  bool same = memcmp(expected, buf, size) == 0;
  free(expected);
  return same;
}

static int writer_put(const char *dir, const char *key, int writer,
                      int round) {
  size_t size = tagged_size(writer, round);
  unsigned char *payload = malloc(size);
  fill_tagged(payload, size, (uint32_t)(writer * 1000 + round));
  flowgen_status status = fg_cache_put(dir, key, payload, size, NULL);
  free(payload);
  return status == FLOWGEN_OK ? 0 : 1;
}

/* Runs in a child: no cmocka asserts, an exit code says what failed. */
static int writer_main(const char *dir, int writer) {
  char key[64];
  for (int round = 0; round < ROUNDS; ++round) {
    if (writer_put(dir, "shared key", writer, round)) return 2;
    snprintf(key, sizeof key, "writer-%d-slot-%d", writer,
             round % SLOTS_PER_WRITER);
    if (writer_put(dir, key, writer, round)) return 3;
    fg_cache_result result;
    void *payload;
    size_t size;
    if (fg_cache_get(dir, "shared key", &result, &payload, &size, NULL))
      return 4;
    bool whole = result == FG_CACHE_HIT && tagged_is_whole(payload, size);
    free(payload);
    if (!whole) return 5;
  }
  return 0;
}

static void count_valid(void *ctx, const flowrt_cache_entry *e) {
  int *counts = ctx;
  ++counts[e->valid ? 0 : 1];
}

static void test_concurrent_writers_leave_valid_entries(void **state) {
  const char *dir = *state;
  pid_t children[WRITERS];
  for (int writer = 0; writer < WRITERS; ++writer) {
    children[writer] = fork();
    assert_true(children[writer] >= 0);
    if (children[writer] == 0) _exit(writer_main(dir, writer));
  }
  for (int writer = 0; writer < WRITERS; ++writer) {
    int status;
    assert_int_equal(waitpid(children[writer], &status, 0), children[writer]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }

  int counts[2] = {0, 0};
  assert_int_equal(flowrt_cache_list(dir, count_valid, counts, NULL),
                   FLOWGEN_OK);
  assert_int_equal(counts[0], 1 + WRITERS * SLOTS_PER_WRITER);
  assert_int_equal(counts[1], 0);
  assert_int_equal(count_files(dir, FG_CACHE_TEMP_PREFIX, NULL), 0);
  assert_int_equal(count_files(dir, NULL, NULL),
                   1 + WRITERS * SLOTS_PER_WRITER);

  /* Each writer's slots hold its own last write. */
  char key[64];
  for (int writer = 0; writer < WRITERS; ++writer)
    for (int slot = 0; slot < SLOTS_PER_WRITER; ++slot) {
      int round = ROUNDS - SLOTS_PER_WRITER + slot;
      size_t size = tagged_size(writer, round);
      unsigned char *expected = malloc(size);
      fill_tagged(expected, size, (uint32_t)(writer * 1000 + round));
      snprintf(key, sizeof key, "writer-%d-slot-%d", writer, slot);
      assert_hit(dir, key, expected, size);
      free(expected);
    }
}

#define CACHE_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      CACHE_TEST(test_put_then_get_hits),
      CACHE_TEST(test_put_replaces_and_keeps_keys_apart),
      CACHE_TEST(test_missing_entry_is_a_miss),
      CACHE_TEST(test_put_and_get_reject_bad_arguments),
      CACHE_TEST(test_corrupt_payload_byte_is_invalid),
      CACHE_TEST(test_corrupt_header_is_invalid),
      CACHE_TEST(test_hostile_lengths_are_invalid),
      CACHE_TEST(test_truncated_entry_is_invalid),
      CACHE_TEST(test_foreign_entry_is_invalid),
      CACHE_TEST(test_other_format_version_is_invalid),
      CACHE_TEST(test_put_replaces_an_invalid_entry),
      CACHE_TEST(test_cache_dir_resolution_order),
      CACHE_TEST(test_cache_dir_is_not_created),
      CACHE_TEST(test_open_creates_folder_0700),
      CACHE_TEST(test_put_creates_folder_0700),
      CACHE_TEST(test_unusable_folder_is_an_error),
      CACHE_TEST(test_failed_put_leaves_old_entry),
      CACHE_TEST(test_disabled_by_environment),
      CACHE_TEST(test_list_reports_every_entry_sorted),
      CACHE_TEST(test_clear_removes_only_cache_files),
      CACHE_TEST(test_list_and_clear_default_and_missing_folder),
      CACHE_TEST(test_concurrent_writers_leave_valid_entries),
  };
  return cmocka_run_group_tests_name("cache", tests, NULL, NULL);
}
