/* The on-disk module cache: entry format, validation, folder, list, clear. */
#include "support.h"

#include "disk_cache.h"
#include "flowrt.h"
#include "module_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PATH_SIZE FG_TEST_PATH_SIZE

static const char *const cache_env[] = {"FLOWGEN_CACHE_DIR", "XDG_CACHE_HOME",
                                        "HOME", "FLOWGEN_CACHE",
                                        "FLOWGEN_CACHE_TRUST"};
#define CACHE_ENV_COUNT (sizeof cache_env / sizeof cache_env[0])
static char *saved_env[CACHE_ENV_COUNT];

/* Each test gets a fresh folder and may change the cache variables. */
static int setup(void **state) {
  for (size_t i = 0; i < CACHE_ENV_COUNT; ++i) {
    const char *value = getenv(cache_env[i]);
    saved_env[i] = value ? strdup(value) : NULL;
  }
  unsetenv("FLOWGEN_CACHE_TRUST"); /* each test opts in where it means to */
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
  assert_int_equal(fg_cache_open(cache, false, &err), FLOWGEN_OK);
  assert_mode_0700(a);
  assert_mode_0700(ab);
  assert_mode_0700(cache);
  assert_int_equal(count_files(cache, NULL, NULL), 0); /* no probe left */
  assert_int_equal(fg_cache_open(cache, false, &err), FLOWGEN_OK);
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
  assert_int_equal(fg_cache_open(cache, false, &err), FLOWGEN_IO);
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
  fg_test_file_size_limit limit;
  fg_test_begin_file_size_limit(&limit, 4096);
  unsigned char big[64 * 1024];
  fill_pattern(big, sizeof big, 2);
  flowgen_error err;
  flowgen_status status = fg_cache_put(dir, sample_key, big, sizeof big, &err);
  fg_test_end_file_size_limit(&limit);

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
  char problem[64];
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
  assert_true(e->valid == (e->problem == NULL));
  snprintf(out->problem, sizeof out->problem, "%s", e->problem ? e->problem : "");
}

static const listed_entry *find_listed_file(const listing *list, const char *file) {
  for (int i = 0; i < list->count; ++i)
    if (strcmp(list->entries[i].file, file) == 0) return &list->entries[i];
  fail_msg("%s not listed", file);
  return NULL;
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
  assert_int_equal(truncate(path, 20), 0); /* the magic stays: ours */
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
  assert_int_equal(list.count, 1); /* folder.fgc, as invalid */
  assert_string_equal(list.entries[0].file, "folder.fgc");
  assert_false(list.entries[0].valid);
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

/* ---- files that are not entries ----------------------------------------- */

/* A call that waits on a FIFO would hang the test: end it with a message. */
static void on_alarm(int signal_number) {
  (void)signal_number;
  static const char message[] = "timed out: a cache call waited (on a FIFO?)\n";
  if (write(STDERR_FILENO, message, sizeof message - 1) < 0) _exit(1);
  _exit(1);
}

static void begin_hang_guard(void) {
  signal(SIGALRM, on_alarm);
  alarm(10);
}

static void end_hang_guard(void) {
  alarm(0);
  signal(SIGALRM, SIG_DFL);
}

static mode_t file_type(const char *path) {
  struct stat info;
  assert_int_equal(lstat(path, &info), 0);
  return info.st_mode & S_IFMT;
}

/* A FIFO, a socket or a device node at path; false (with a note) where this
 * user cannot make one. */
static bool make_node(const char *path, mode_t type) {
  if (type == S_IFIFO) return mkfifo(path, 0600) == 0;
  if (type == S_IFCHR) {
    if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) == 0) return true; /* as /dev/null */
    print_message("# no device node: %s (needs root)\n", strerror(errno));
    return false;
  }
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  assert_true(strlen(path) < sizeof address.sun_path);
  strcpy(address.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  bool made = bind(fd, (struct sockaddr *)&address, sizeof address) == 0;
  close(fd);
  return made;
}

/* A FIFO (today's hang), a socket or a device at an entry's path: get calls
 * it invalid without opening it, put leaves it and says so, list shows it
 * as invalid and clear leaves it. */
static void test_node_at_entry_path_is_no_entry(void **state) {
  const char *dir = *state;
  const struct {
    mode_t type;
    const char *why;
  } nodes[] = {{S_IFIFO, "(a FIFO)"}, {S_IFSOCK, "(a socket)"}, {S_IFCHR, "(a device)"}};
  char path[PATH_SIZE];
  entry_file(path, dir, sample_key);
  begin_hang_guard();
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; ++i) {
    if (!make_node(path, nodes[i].type)) continue;
    assert_invalid(dir, sample_key, nodes[i].why);
    assert_invalid(dir, sample_key, "not a regular file");

    flowgen_error err;
    assert_int_equal(fg_cache_put(dir, sample_key, "x", 1, &err), FLOWGEN_IO);
    if (!strstr(err.message, path) || !strstr(err.message, nodes[i].why) ||
        !strstr(err.message, "left as it is"))
      fail_msg("unexpected message: %s", err.message);
    assert_int_equal(file_type(path), nodes[i].type);
    assert_int_equal(count_files(dir, FG_CACHE_TEMP_PREFIX, NULL), 0);

    listing list = {0};
    assert_int_equal(flowrt_cache_list(dir, collect, &list, &err), FLOWGEN_OK);
    assert_int_equal(list.count, 1);
    const listed_entry *listed = find_listed(&list, sample_key);
    assert_false(listed->valid);
    assert_non_null(strstr(listed->problem, nodes[i].why));
    size_t removed = 9;
    assert_int_equal(flowrt_cache_clear(dir, &removed, &err), FLOWGEN_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(file_type(path), nodes[i].type);
    assert_int_equal(unlink(path), 0);
  }
  end_hang_guard();
  /* Gone: the key works again. */
  put_pattern(dir, sample_key, 30, 1);
  assert_hit_pattern(dir, sample_key, 30, 1);
}

/* A link at an entry's path is not followed, even to a sound entry of the
 * same key; a put replaces the link, not what it points to. */
static void test_link_at_entry_path_is_not_followed(void **state) {
  char cache[PATH_SIZE], outside[PATH_SIZE], target[PATH_SIZE], path[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  fg_test_path_join(outside, *state, "outside");
  put_pattern(outside, sample_key, 100, 1);
  entry_file(target, outside, sample_key);
  entry_file(path, cache, sample_key);
  assert_int_equal(mkdir(cache, 0700), 0);
  assert_int_equal(symlink(target, path), 0);

  assert_invalid(cache, sample_key, "symbolic link");
  listing list = {0};
  flowgen_error err;
  assert_int_equal(flowrt_cache_list(cache, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 1);
  assert_non_null(strstr(find_listed(&list, sample_key)->problem, "symbolic link"));
  size_t removed = 9;
  assert_int_equal(flowrt_cache_clear(cache, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 0);
  assert_int_equal(file_type(path), S_IFLNK);

  put_pattern(cache, sample_key, 50, 2);
  assert_int_equal(file_type(path), S_IFREG);
  assert_hit_pattern(cache, sample_key, 50, 2);
  assert_hit_pattern(outside, sample_key, 100, 1);
}

/* clear removes what carries an entry's header (however damaged after it)
 * and its own stale temporary files, and nothing else named like them. */
static void test_clear_removes_only_what_carries_the_header(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE], alpha[PATH_SIZE], outside[PATH_SIZE];
  put_pattern(dir, "alpha", 10, 1);
  entry_file(alpha, dir, "alpha");
  size_t size;
  char *bytes = fg_test_read_file(alpha, &size);
  assert_non_null(bytes);
  fg_test_path_join(path, dir, "backup.fgc"); /* a copy: carries the header */
  fg_test_write_file(path, bytes, size);
  fg_test_path_join(outside, dir, "outside-entry"); /* not named like one */
  fg_test_write_file(outside, bytes, size);
  free(bytes);
  fg_test_path_join(path, dir, "link.fgc"); /* to a file with the header */
  assert_int_equal(symlink(outside, path), 0);
  fg_test_path_join(path, dir, "notes.fgc");
  fg_test_write_file(path, "my notes, not an entry", 22);
  fg_test_path_join(path, dir, "short.fgc");
  fg_test_write_file(path, "FGCACHE", 7); /* not the whole magic */
  fg_test_path_join(path, dir, "empty.fgc");
  fg_test_write_file(path, "", 0);
  fg_test_path_join(path, dir, "x.fgc");
  assert_int_equal(mkfifo(path, 0600), 0);
  make_temp_file(dir, ".tmp-not-mkstemp", 3600);
  fg_test_path_join(path, dir, ".tmp-fifo01");
  assert_int_equal(mkfifo(path, 0600), 0);
  struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, old, AT_SYMLINK_NOFOLLOW), 0);

  begin_hang_guard();
  listing list = {0};
  flowgen_error err;
  assert_int_equal(flowrt_cache_list(dir, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 7);
  assert_true(find_listed(&list, "alpha")->valid);
  assert_non_null(strstr(find_listed_file(&list, "notes.fgc")->problem, "bad magic"));
  assert_non_null(strstr(find_listed_file(&list, "x.fgc")->problem, "(a FIFO)"));
  assert_non_null(strstr(find_listed_file(&list, "link.fgc")->problem, "symbolic link"));
  assert_non_null(strstr(find_listed_file(&list, "backup.fgc")->problem, "file name"));
  size_t removed = 99;
  assert_int_equal(flowrt_cache_clear(dir, &removed, &err), FLOWGEN_OK);
  end_hang_guard();
  assert_int_equal(removed, 2);
  assert_false(fg_test_file_exists(alpha));
  const char *kept[] = {"link.fgc", "notes.fgc", "short.fgc", "empty.fgc", "x.fgc",
                        ".tmp-not-mkstemp", ".tmp-fifo01"};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; ++i) {
    fg_test_path_join(path, dir, kept[i]);
    if (lstat(path, &(struct stat){0}) != 0) fail_msg("clear removed %s", kept[i]);
  }
  assert_int_equal(count_files(dir, NULL, NULL), 8); /* and outside-entry */
  fg_test_path_join(path, dir, "notes.fgc");
  bytes = fg_test_read_file(path, &size);
  assert_non_null(bytes);
  assert_string_equal(bytes, "my notes, not an entry");
  free(bytes);
  assert_true(fg_test_file_exists(outside));
}

/* ---- whom the folder belongs to ----------------------------------------- */

/* cache is refused by open (which makes nothing there), list and clear,
 * with a message naming it, the culprit and why, and the opt-in; both
 * opt-ins then accept it. */
static void assert_untrusted(const char *cache, const char *culprit, const char *why) {
  flowgen_error err;
  bool existed = fg_test_file_exists(cache);
  size_t entries = existed ? fg_test_count_entries(cache) : 0;
  assert_int_equal(fg_cache_open(cache, false, &err), FLOWGEN_IO);
  if (!strstr(err.message, cache) || !strstr(err.message, culprit) ||
      !strstr(err.message, why) || !strstr(err.message, "FLOWGEN_CACHE_TRUST=any"))
    fail_msg("expected '%s', '%s', '%s' and the opt-in in: %s", cache, culprit, why,
             err.message);
  assert_int_equal(fg_test_file_exists(cache), existed);
  listing list = {0};
  assert_int_equal(flowrt_cache_list(cache, collect, &list, &err), FLOWGEN_IO);
  assert_non_null(strstr(err.message, why));
  assert_int_equal(list.count, 0);
  size_t removed = 9;
  assert_int_equal(flowrt_cache_clear(cache, &removed, &err), FLOWGEN_IO);
  assert_non_null(strstr(err.message, why));
  assert_int_equal(removed, 0);
  if (existed) assert_int_equal(fg_test_count_entries(cache), entries);

  assert_int_equal(fg_cache_open(cache, true, &err), FLOWGEN_OK);
  setenv("FLOWGEN_CACHE_TRUST", "only mine", 1); /* only "any" opts in */
  assert_int_equal(flowrt_cache_list(cache, collect, &list, &err), FLOWGEN_IO);
  setenv("FLOWGEN_CACHE_TRUST", "any", 1);
  assert_int_equal(flowrt_cache_list(cache, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(flowrt_cache_clear(cache, &removed, &err), FLOWGEN_OK);
  unsetenv("FLOWGEN_CACHE_TRUST");
}

static void assert_trusted(const char *cache) {
  flowgen_error err;
  if (fg_cache_open(cache, false, &err) != FLOWGEN_OK)
    fail_msg("%s refused: %s", cache, err.message);
  listing list = {0};
  assert_int_equal(flowrt_cache_list(cache, collect, &list, &err), FLOWGEN_OK);
}

/* A folder others can write is refused, the entry in it left alone; one
 * they can only read is fine. */
static void test_shared_folder_is_refused(void **state) {
  char cache[PATH_SIZE], mode[16];
  fg_test_path_join(cache, *state, "cache");
  assert_int_equal(mkdir(cache, 0700), 0);
  const mode_t modes[] = {0777, 0770, 0730, 0702, 01777, 01770};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; ++i) {
    put_pattern(cache, sample_key, 10, 1);
    assert_int_equal(chmod(cache, modes[i]), 0);
    snprintf(mode, sizeof mode, "mode %04o", (unsigned)modes[i]);
    assert_untrusted(cache, mode, "writable by group or others");
    assert_int_equal(chmod(cache, 0700), 0);
  }
  assert_int_equal(chmod(cache, 0755), 0);
  assert_trusted(cache);
}

/* A folder above the cache that others can write lets them swap the cache
 * folder: refused unless it has the sticky bit (as /tmp).  Nothing is made
 * in it before the refusal. */
static void test_shared_parent_is_refused(void **state) {
  char parent[PATH_SIZE], cache[PATH_SIZE], deeper[PATH_SIZE];
  fg_test_path_join(parent, *state, "shared");
  fg_test_path_join(cache, parent, "cache");
  fg_test_path_join(deeper, cache, "deeper");
  assert_int_equal(mkdir(parent, 0700), 0);
  assert_int_equal(chmod(parent, 0777), 0);
  flowgen_error err;
  assert_int_equal(fg_cache_open(deeper, false, &err), FLOWGEN_IO);
  assert_int_equal(fg_test_count_entries(parent), 0);
  assert_untrusted(deeper, parent, "without the sticky bit");
  assert_untrusted(cache, parent, "without the sticky bit"); /* made by the opt-in */
  assert_int_equal(chmod(parent, 0775), 0);
  assert_untrusted(cache, parent, "without the sticky bit");
  assert_int_equal(chmod(parent, 01777), 0);
  assert_trusted(cache);
  assert_int_equal(chmod(parent, 0755), 0);
  assert_trusted(cache);
}

/* Links are followed to a folder that is checked in turn; a link kept in a
 * shared folder is refused, as is the folder behind it when it is shared. */
static void test_links_to_the_folder(void **state) {
  char real[PATH_SIZE], link[PATH_SIZE], shared[PATH_SIZE], shared_link[PATH_SIZE],
      inner[PATH_SIZE], to_inner[PATH_SIZE];
  fg_test_path_join(real, *state, "real");
  fg_test_path_join(link, *state, "link");
  assert_int_equal(mkdir(real, 0700), 0);
  assert_int_equal(symlink(real, link), 0);
  assert_trusted(link);
  put_pattern(link, sample_key, 20, 1);
  assert_hit_pattern(real, sample_key, 20, 1);
  assert_int_equal(chmod(real, 0777), 0);
  assert_untrusted(link, "mode 0777", "writable by group or others");
  assert_int_equal(chmod(real, 0700), 0);

  fg_test_path_join(shared, *state, "shared");
  fg_test_path_join(shared_link, shared, "link");
  fg_test_path_join(inner, shared, "inner");
  fg_test_path_join(to_inner, *state, "to-inner");
  assert_int_equal(mkdir(shared, 0700), 0);
  assert_int_equal(mkdir(inner, 0700), 0);
  assert_int_equal(symlink(real, shared_link), 0);
  assert_int_equal(symlink(inner, to_inner), 0);
  assert_int_equal(chmod(shared, 0777), 0);
  assert_untrusted(shared_link, shared, "without the sticky bit");
  /* A private folder inside a shared one, by a link from outside it. */
  assert_untrusted(to_inner, shared, "without the sticky bit");
  assert_int_equal(chmod(shared, 0700), 0);
  assert_trusted(to_inner);
}

/* Another user's folder, a folder in another user's folder and a link of
 * another user: refused.  Needs root to make them. */
static void test_another_users_folder_is_refused(void **state) {
  if (geteuid() != 0) {
    print_message("# giving a folder to another user needs root\n");
    skip();
  }
  char cache[PATH_SIZE], theirs[PATH_SIZE], inside[PATH_SIZE], mine[PATH_SIZE],
      link[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  assert_int_equal(mkdir(cache, 0700), 0);
  if (chown(cache, 65534, 65534) != 0) {
    print_message("# cannot chown to nobody: %s\n", strerror(errno));
    skip();
  }
  put_pattern(cache, sample_key, 10, 1);
  assert_untrusted(cache, cache, "owned by user 65534, not by you (user 0)");

  fg_test_path_join(theirs, *state, "theirs");
  fg_test_path_join(inside, theirs, "cache");
  assert_int_equal(mkdir(theirs, 0755), 0);
  assert_int_equal(mkdir(inside, 0700), 0);
  assert_int_equal(chown(theirs, 65534, 65534), 0);
  assert_untrusted(inside, theirs, "owned by user 65534");

  fg_test_path_join(mine, *state, "mine");
  fg_test_path_join(link, *state, "link");
  assert_int_equal(mkdir(mine, 0700), 0);
  assert_int_equal(symlink(mine, link), 0);
  assert_trusted(link);
  assert_int_equal(lchown(link, 65534, 65534), 0);
  assert_untrusted(link, link, "symbolic link owned by user 65534");
}

/* ---- failing file operations ---------------------------------------- */

/* The write fails in the header, in the key and in the payload: each time
 * FLOWGEN_IO naming the temporary file and EFBIG, the old entry untouched,
 * no temporary file, and the next put works. */
static void test_disk_full_at_every_stage(void **state) {
  const char *dir = *state;
  put_pattern(dir, sample_key, 100, 1);
  const unsigned long long limits[] = {0, 8, FG_CACHE_HEADER_SIZE + 5,
                           FG_CACHE_HEADER_SIZE + 100, 60000};
  unsigned char big[64 * 1024];
  fill_pattern(big, sizeof big, 2);
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; ++i) {
    fg_test_file_size_limit limit;
    fg_test_begin_file_size_limit(&limit, limits[i]);
    flowgen_error err;
    flowgen_status status = fg_cache_put(dir, sample_key, big, sizeof big, &err);
    fg_test_end_file_size_limit(&limit);
    assert_int_equal(status, FLOWGEN_IO);
    if (!strstr(err.message, FG_CACHE_TEMP_PREFIX) || !strstr(err.message, strerror(EFBIG)))
      fail_msg("limit %zu: unexpected message: %s", (size_t)limits[i], err.message);
    assert_hit_pattern(dir, sample_key, 100, 1);
    assert_int_equal(count_files(dir, NULL, NULL), 1);
  }
  put_ok(dir, sample_key, big, sizeof big);
  assert_hit(dir, sample_key, big, sizeof big);
}

/* A folder where the entry should be: the rename fails, and nothing else
 * changes; the folder is not an entry (get: invalid; list and clear skip
 * it). */
static void test_failed_rename(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE], inside[PATH_SIZE];
  entry_file(path, dir, sample_key);
  fg_test_path_join(inside, path, "keep");
  assert_int_equal(mkdir(path, 0700), 0);
  fg_test_write_file(inside, "x", 1);
  unsigned char payload[500];
  fill_pattern(payload, sizeof payload, 3);
  flowgen_error err;
  assert_int_equal(fg_cache_put(dir, sample_key, payload, sizeof payload, &err), FLOWGEN_IO);
  if (!strstr(err.message, "cannot rename") || !strstr(err.message, path) ||
      !strstr(err.message, strerror(EISDIR)))
    fail_msg("unexpected message: %s", err.message);
  assert_int_equal(count_files(dir, FG_CACHE_TEMP_PREFIX, NULL), 0);
  assert_int_equal(count_files(dir, NULL, NULL), 1);
  assert_true(fg_test_file_exists(inside));
  assert_invalid(dir, sample_key, "not a regular file (a folder)");
  listing list = {0};
  assert_int_equal(flowrt_cache_list(dir, collect, &list, &err), FLOWGEN_OK);
  assert_int_equal(list.count, 1);
  assert_false(find_listed(&list, sample_key)->valid);
  size_t removed = 9;
  assert_int_equal(flowrt_cache_clear(dir, &removed, &err), FLOWGEN_OK);
  assert_int_equal(removed, 0);
  assert_true(fg_test_file_exists(inside));
  /* Other keys are not affected; once the folder is gone the key works. */
  put_pattern(dir, "another key", 10, 4);
  assert_int_equal(unlink(inside), 0);
  assert_int_equal(rmdir(path), 0);
  put_ok(dir, sample_key, payload, sizeof payload);
  assert_hit(dir, sample_key, payload, sizeof payload);
}

/* ---- permissions (as an unprivileged user) ------------------------------ */

/* Root writes through permission bits: as root, the checks run in a child
 * that has become "nobody" (65534).  Returns NULL or what went wrong. */
typedef const char *(*unprivileged_fn)(const char *dir);

static void run_unprivileged(const char *base, unprivileged_fn fn) {
  char dir[PATH_SIZE];
  fg_test_path_join(dir, base, "cache");
  /* The child makes its folder here; sticky, as /tmp, or the cache would
   * not trust a folder in it. */
  assert_int_equal(chmod(base, 01777), 0);
  fflush(NULL);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (geteuid() == 0 &&
        (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(77);
    if (mkdir(dir, 0700) != 0) _exit(78); /* $TMPDIR out of nobody's reach */
    const char *problem = fn(dir);
    if (problem) fprintf(stderr, "%s\n", problem);
    _exit(problem ? 1 : 0);
  }
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_int_equal(chmod(base, 0700), 0);
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 78)) {
    print_message("# %s: permission checks skipped\n",
                  WEXITSTATUS(status) == 77 ? "cannot drop root privileges"
                                            : "the unprivileged user cannot create a folder in $TMPDIR");
    skip();
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("see the message above");
}

static char child_problem[FLOWGEN_ERROR_MESSAGE_MAX + 1024];

#define CHILD_EXPECT(cond, ...)                                                \
  do {                                                                         \
    if (!(cond)) {                                                             \
      snprintf(child_problem, sizeof child_problem, __VA_ARGS__);              \
      return child_problem;                                                    \
    }                                                                          \
  } while (0)

static int count_temp_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strncmp(e->d_name, FG_CACHE_TEMP_PREFIX, strlen(FG_CACHE_TEMP_PREFIX)) == 0;
  closedir(d);
  return n;
}

static bool hits(const char *dir, const char *key, size_t size) {
  fg_cache_result result;
  void *payload = NULL;
  size_t got = 0;
  bool hit = fg_cache_get(dir, key, &result, &payload, &got, NULL) == FLOWGEN_OK &&
             result == FG_CACHE_HIT && got == size;
  free(payload);
  return hit;
}

static void count_listed(void *ctx, const flowrt_cache_entry *e) {
  int *n = ctx;
  n[e->valid ? 0 : 1]++;
}

/* A read-only folder: entries are still read and listed; a put or a clear
 * fails with EACCES and changes nothing; the cache cannot be opened. */
static const char *read_only_folder(const char *dir) {
  flowgen_error err;
  unsigned char payload[300] = {1, 2, 3};
  CHILD_EXPECT(fg_cache_put(dir, "old", payload, 100, &err) == FLOWGEN_OK, "put: %s",
               err.message);
  CHILD_EXPECT(chmod(dir, 0555) == 0, "chmod: %s", strerror(errno));
  const char *keys[] = {"old", "new"};
  for (int i = 0; i < 2; ++i) {
    flowgen_status st = fg_cache_put(dir, keys[i], payload, sizeof payload, &err);
    CHILD_EXPECT(st == FLOWGEN_IO && strstr(err.message, dir) &&
                     strstr(err.message, strerror(EACCES)),
                 "put '%s' into a read-only folder: %s: %s", keys[i],
                 flowgen_status_name(st), err.message);
  }
  CHILD_EXPECT(hits(dir, "old", 100), "the old entry is gone");
  CHILD_EXPECT(!hits(dir, "new", sizeof payload), "a new entry appeared");
  CHILD_EXPECT(fg_cache_open(dir, false, &err) == FLOWGEN_IO && strstr(err.message, dir),
               "fg_cache_open of a read-only folder: %s", err.message);
  size_t removed = 9;
  flowgen_status st = flowrt_cache_clear(dir, &removed, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && removed == 0 && strstr(err.message, "cannot remove") &&
                   strstr(err.message, strerror(EACCES)),
               "clear of a read-only folder: %s (%zu removed): %s",
               flowgen_status_name(st), removed, err.message);
  int listed[2] = {0, 0};
  CHILD_EXPECT(flowrt_cache_list(dir, count_listed, listed, &err) == FLOWGEN_OK &&
                   listed[0] == 1 && listed[1] == 0,
               "list of a read-only folder: %d valid, %d invalid: %s", listed[0],
               listed[1], err.message);
  CHILD_EXPECT(count_temp_files(dir) == 0, "a temporary file is left");
  /* Writable again: everything works. */
  CHILD_EXPECT(chmod(dir, 0700) == 0, "chmod: %s", strerror(errno));
  CHILD_EXPECT(fg_cache_put(dir, "new", payload, sizeof payload, &err) == FLOWGEN_OK,
               "put after the folder is writable again: %s", err.message);
  CHILD_EXPECT(hits(dir, "new", sizeof payload), "the new entry is not there");
  CHILD_EXPECT(flowrt_cache_clear(dir, &removed, &err) == FLOWGEN_OK && removed == 2,
               "clear: %s (%zu removed)", err.message, removed);
  return NULL;
}

/* Permission denied: an unreadable entry is an error to get (a miss to the
 * runtime) and listed as invalid, and a put replaces it; a folder that
 * cannot be searched fails every call with EACCES until it can. */
static const char *permission_denied(const char *dir) {
  flowgen_error err;
  unsigned char payload[200] = {9};
  CHILD_EXPECT(fg_cache_put(dir, "key", payload, sizeof payload, &err) == FLOWGEN_OK,
               "put: %s", err.message);
  char path[PATH_SIZE];
  entry_file(path, dir, "key");
  CHILD_EXPECT(chmod(path, 0) == 0, "chmod: %s", strerror(errno));
  fg_cache_result result;
  void *data = NULL;
  size_t size = 0;
  flowgen_status st = fg_cache_get(dir, "key", &result, &data, &size, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && strstr(err.message, path) &&
                   strstr(err.message, strerror(EACCES)) && !data && size == 0,
               "get of an unreadable entry: %s: %s", flowgen_status_name(st), err.message);
  int listed[2] = {0, 0};
  CHILD_EXPECT(flowrt_cache_list(dir, count_listed, listed, &err) == FLOWGEN_OK &&
                   listed[0] == 0 && listed[1] == 1,
               "list: %d valid, %d invalid", listed[0], listed[1]);
  CHILD_EXPECT(fg_cache_put(dir, "key", payload, 150, &err) == FLOWGEN_OK,
               "put over an unreadable entry: %s", err.message);
  CHILD_EXPECT(hits(dir, "key", 150), "the replaced entry does not hit");

  CHILD_EXPECT(chmod(dir, 0200) == 0, "chmod: %s", strerror(errno));
  st = fg_cache_get(dir, "key", &result, &data, &size, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && strstr(err.message, strerror(EACCES)),
               "get in a folder without search permission: %s: %s",
               flowgen_status_name(st), err.message);
  st = fg_cache_put(dir, "key", payload, sizeof payload, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && strstr(err.message, strerror(EACCES)),
               "put in a folder without search permission: %s: %s",
               flowgen_status_name(st), err.message);
  CHILD_EXPECT(chmod(dir, 0300) == 0, "chmod: %s", strerror(errno));
  st = flowrt_cache_list(dir, count_listed, listed, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && strstr(err.message, "cannot list") &&
                   strstr(err.message, strerror(EACCES)),
               "list of an unreadable folder: %s: %s", flowgen_status_name(st),
               err.message);
  size_t removed = 9;
  st = flowrt_cache_clear(dir, &removed, &err);
  CHILD_EXPECT(st == FLOWGEN_IO && removed == 0, "clear of an unreadable folder: %s: %s",
               flowgen_status_name(st), err.message);
  CHILD_EXPECT(chmod(dir, 0700) == 0, "chmod: %s", strerror(errno));
  CHILD_EXPECT(count_temp_files(dir) == 0, "a temporary file is left");
  CHILD_EXPECT(hits(dir, "key", 150), "the entry does not hit once the folder is usable");
  CHILD_EXPECT(fg_cache_put(dir, "key", payload, sizeof payload, &err) == FLOWGEN_OK,
               "put once the folder is usable: %s", err.message);
  CHILD_EXPECT(hits(dir, "key", sizeof payload), "the new entry does not hit");
  return NULL;
}

/* ---- what the runtime makes of it -------------------------------------- */

/* fg_module_obtain is the runtime's path (sampler creation): a disk problem
 * is a warning naming it, the compiled image still comes back, nothing is
 * left in the folder, and once the problem is gone the entry is stored and
 * then read. */
static const char tiny_source[] = "extern \"C\" __global__ void k(float *x) { x[0] = 1; }\n";

typedef struct warnings {
  int count;
  char text[4][FLOWGEN_ERROR_MESSAGE_MAX + 64];
} warnings;

static void collect_warning(void *ctx, const char *message) {
  warnings *w = ctx;
  if (w->count < 4) snprintf(w->text[w->count], sizeof w->text[0], "%s", message);
  w->count++;
}

/* Obtains the tiny module; returns whether it came from the disk. */
static bool obtain(const char *dir, warnings *w) {
  memset(w, 0, sizeof *w);
  fg_module_image image;
  flowgen_error err;
  flowgen_status st = fg_module_obtain(dir, 0, tiny_source, sizeof tiny_source - 1,
                                       "tiny.cu", 90, FLOWRT_TARGET_CUBIN, collect_warning,
                                       w, &image, &err);
  if (st) fail_msg("fg_module_obtain: %s", err.message);
  assert_non_null(image.data);
  assert_memory_equal(image.data, "\x7f" "ELF", 4);
  free(image.data);
  return image.disk_hit;
}

static void expect_warning(const warnings *w, int index, const char *a, const char *b) {
  if (w->count <= index || !strstr(w->text[index], "module cache") ||
      !strstr(w->text[index], a) || (b && !strstr(w->text[index], b)))
    fail_msg("expected a warning %d with '%s' and '%s'; %d warnings, first: %s", index, a,
             b ? b : "", w->count, w->count ? w->text[0] : "");
}

/* Back to normal: the next obtain compiles and stores, the one after hits. */
static void expect_recovery(const char *dir) {
  warnings w;
  assert_false(obtain(dir, &w));
  assert_int_equal(w.count, 0);
  assert_true(obtain(dir, &w));
  assert_int_equal(w.count, 0);
  assert_int_equal(count_files(dir, FG_CACHE_TEMP_PREFIX, NULL), 0);
}

static void test_runtime_warns_and_goes_on(void **state) {
  const char *base = *state;
  if (flowrt_nvrtc_version() == 0) skip();
  char dir[PATH_SIZE];
  fg_test_path_join(dir, base, "cache");
  warnings w;

  /* Disk full while storing. */
  fg_test_file_size_limit limit;
  fg_test_begin_file_size_limit(&limit, 64);
  bool hit = obtain(dir, &w);
  fg_test_end_file_size_limit(&limit);
  assert_false(hit);
  assert_int_equal(w.count, 1);
  expect_warning(&w, 0, strerror(EFBIG), FG_CACHE_TEMP_PREFIX);
  assert_int_equal(count_files(dir, NULL, NULL), 0);
  expect_recovery(dir);
  assert_int_equal(flowrt_cache_clear(dir, NULL, NULL), FLOWGEN_OK);
  /* Under valgrind each compile takes half a minute: one case there. */
  if (fg_test_under_valgrind()) return;

  /* The entry's name taken by a folder: invalid, then the rename fails. */
  fg_module_image probe;
  assert_int_equal(fg_module_obtain(NULL, 0, tiny_source, sizeof tiny_source - 1,
                                    "tiny.cu", 90, FLOWRT_TARGET_CUBIN, NULL, NULL, &probe,
                                    NULL),
                   FLOWGEN_OK);
  free(probe.data);
  char *key = fg_module_key(tiny_source, sizeof tiny_source - 1, "tiny.cu", 90,
                            FLOWRT_TARGET_CUBIN, flowrt_nvrtc_version());
  char path[PATH_SIZE];
  entry_file(path, dir, key);
  free(key);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_false(obtain(dir, &w));
  assert_int_equal(w.count, 2);
  expect_warning(&w, 0, "invalid entry", "not a regular file");
  expect_warning(&w, 1, "cannot rename", strerror(EISDIR));
  assert_int_equal(count_files(dir, NULL, NULL), 1);
  assert_int_equal(rmdir(path), 0);
  expect_recovery(dir);

  /* A file where the folder should be. */
  char file[PATH_SIZE], under[PATH_SIZE];
  fg_test_path_join(file, base, "file");
  fg_test_path_join(under, file, "cache");
  fg_test_write_file(file, "x", 1);
  assert_false(obtain(under, &w));
  assert_int_equal(w.count, 2);
  expect_warning(&w, 0, under, strerror(ENOTDIR));
  expect_warning(&w, 1, under, strerror(ENOTDIR));
  assert_int_equal(file_size(file), 1);
}

/* The runtime's setup (flowrt_open) on a folder it does not trust: one
 * warning naming the folder, why and the opt-in, then no disk cache; the
 * program's option or the environment opts in. */
static void test_runtime_setup_refuses_untrusted_folder(void **state) {
  char cache[PATH_SIZE], buf[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  assert_int_equal(mkdir(cache, 0700), 0);
  assert_int_equal(chmod(cache, 0777), 0);
  warnings w = {0};
  assert_false(fg_cache_setup(cache, 1, false, buf, sizeof buf, collect_warning, &w));
  assert_int_equal(w.count, 1);
  const char *parts[] = {"module cache disabled", cache, "writable by group or others",
                         "FLOWGEN_CACHE_TRUST=any"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i)
    if (!strstr(w.text[0], parts[i])) fail_msg("no '%s' in: %s", parts[i], w.text[0]);
  assert_int_equal(count_files(cache, NULL, NULL), 0);
  assert_false(fg_cache_setup(cache, 1, false, buf, sizeof buf, NULL, NULL));

  /* As flowrt_open with default options. */
  setenv("FLOWGEN_CACHE_DIR", cache, 1);
  memset(&w, 0, sizeof w);
  assert_false(fg_cache_setup(NULL, -1, false, buf, sizeof buf, collect_warning, &w));
  assert_int_equal(w.count, 1);
  setenv("FLOWGEN_CACHE_TRUST", "yes", 1);
  assert_false(fg_cache_setup(NULL, -1, false, buf, sizeof buf, NULL, NULL));

  memset(&w, 0, sizeof w);
  assert_true(fg_cache_setup(cache, 1, true, buf, sizeof buf, collect_warning, &w));
  assert_string_equal(buf, cache);
  setenv("FLOWGEN_CACHE_TRUST", "any", 1);
  assert_true(fg_cache_setup(NULL, -1, false, buf, sizeof buf, collect_warning, &w));
  assert_string_equal(buf, cache);
  assert_int_equal(w.count, 0);
  setenv("FLOWGEN_CACHE", "0", 1); /* off is off */
  assert_false(fg_cache_setup(NULL, -1, true, buf, sizeof buf, collect_warning, &w));
  assert_int_equal(w.count, 0);
}

/* The key flowrt_cache_warm stores spec under. */
/* The keys of the entries flowrt_cache_warm writes for spec: its parts,
 * the pack kernel's ([0]) and each variant's; *count of them. */
static char **warm_keys(const flowgen_spec *spec, int *count) {
  flowgen_spec resolved = *spec;
  resolved.arch_specific = fg_arch_specific(resolved.arch);
  flowgen_options opts = {.part = FLOWGEN_PART_PLAN};
  flowgen_kernel *k = NULL;
  assert_int_equal(flowgen_generate(&resolved, &opts, &k, NULL), FLOWGEN_OK);
  int n = flowgen_kernel_variant_count(k) + 1;
  char **keys = calloc((size_t)n, sizeof *keys);
  assert_non_null(keys);
  for (int i = 0; i < n; ++i) {
    opts = i == 0 ? (flowgen_options){.part = FLOWGEN_PART_PACK}
                  : (flowgen_options){.part = FLOWGEN_PART_VARIANT, .variant = i - 1};
    char name[FG_PART_NAME_MAX];
    fg_part_name(&resolved, i == 0 ? NULL : flowgen_kernel_variant(k, i - 1)->strategy, name,
                 sizeof name);
    assert_int_equal(fg_part_cache_key(&resolved, &opts, name, resolved.arch,
                                       FLOWRT_TARGET_CUBIN, flowrt_nvrtc_version(), &keys[i],
                                       NULL),
                     FLOWGEN_OK);
  }
  flowgen_kernel_free(k);
  *count = n;
  return keys;
}

static void free_keys(char **keys, int count) {
  for (int i = 0; i < count; ++i) free(keys[i]);
  free(keys);
}

/* Someone who can write the folder plants a "cubin" under the very keys
 * the runtime and warm look up, with a checksum that checks out: neither
 * reads it.  With the opt-in both would: the plant is a good one. */
static void test_planted_entry_in_untrusted_folder_is_not_loaded(void **state) {
  if (flowrt_nvrtc_version() == 0 || fg_test_under_valgrind()) skip();
  char cache[PATH_SIZE], buf[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  char *module_key = fg_module_key(tiny_source, sizeof tiny_source - 1, "tiny.cu", 90,
                                   FLOWRT_TARGET_CUBIN, flowrt_nvrtc_version());
  flowgen_spec spec = fg_test_spec(2, 4, 1, 90);
  int parts = 0;
  char **part_keys = warm_keys(&spec, &parts);
  put_ok(cache, module_key, "planted", 7);
  for (int i = 0; i < parts; ++i) put_ok(cache, part_keys[i], "planted", 7);
  assert_int_equal(chmod(cache, 0777), 0);

  /* The runtime: no disk cache, so build_module passes no folder. */
  warnings w = {0};
  bool on = fg_cache_setup(cache, 1, false, buf, sizeof buf, collect_warning, &w);
  assert_false(on);
  assert_int_equal(w.count, 1);
  fg_module_image image;
  assert_int_equal(fg_module_obtain(on ? buf : NULL, 0, tiny_source,
                                    sizeof tiny_source - 1, "tiny.cu", 90,
                                    FLOWRT_TARGET_CUBIN, NULL, NULL, &image, NULL),
                   FLOWGEN_OK);
  assert_false(image.disk_hit);
  assert_memory_equal(image.data, "\x7f" "ELF", 4);
  free(image.data);

  flowgen_error err;
  bool was_cached = true;
  assert_int_equal(flowrt_cache_warm(cache, &spec, NULL, &was_cached, &err), FLOWGEN_IO);
  if (!strstr(err.message, cache) || !strstr(err.message, "FLOWGEN_CACHE_TRUST=any"))
    fail_msg("unexpected message: %s", err.message);
  for (int i = 0; i < parts; ++i) /* neither read nor replaced */
    assert_hit(cache, part_keys[i], "planted", 7);

  /* Opted in, the plant is taken. */
  assert_true(fg_cache_setup(cache, 1, true, buf, sizeof buf, NULL, NULL));
  assert_int_equal(fg_module_obtain(buf, 0, tiny_source, sizeof tiny_source - 1,
                                    "tiny.cu", 90, FLOWRT_TARGET_CUBIN, NULL, NULL, &image,
                                    NULL),
                   FLOWGEN_OK);
  assert_true(image.disk_hit);
  assert_int_equal(image.size, 7);
  assert_memory_equal(image.data, "planted", 7);
  free(image.data);
  setenv("FLOWGEN_CACHE_TRUST", "any", 1);
  assert_int_equal(flowrt_cache_warm(cache, &spec, NULL, &was_cached, &err), FLOWGEN_OK);
  assert_true(was_cached);
  free(module_key);
  free_keys(part_keys, parts);
}

/* flowrt_cache_warm's job is the disk: there a full disk is an error, and
 * the next warm works. */
static void test_warm_on_a_full_disk(void **state) {
  const char *base = *state;
  if (flowrt_nvrtc_version() == 0 || fg_test_under_valgrind()) skip();
  char dir[PATH_SIZE];
  fg_test_path_join(dir, base, "cache");
  flowgen_spec spec = fg_test_spec(2, 4, 1, 90);
  fg_test_file_size_limit limit;
  fg_test_begin_file_size_limit(&limit, 1000);
  flowgen_error err;
  bool was_cached = true;
  flowgen_status st = flowrt_cache_warm(dir, &spec, NULL, &was_cached, &err);
  fg_test_end_file_size_limit(&limit);
  assert_int_equal(st, FLOWGEN_IO);
  if (!strstr(err.message, dir) || !strstr(err.message, strerror(EFBIG)))
    fail_msg("unexpected message: %s", err.message);
  assert_int_equal(count_files(dir, NULL, NULL), 0);
  assert_int_equal(flowrt_cache_warm(dir, &spec, NULL, &was_cached, &err), FLOWGEN_OK);
  assert_false(was_cached);
  assert_int_equal(flowrt_cache_warm(dir, &spec, NULL, &was_cached, &err), FLOWGEN_OK);
  assert_true(was_cached);
  int parts = 0;  /* an entry a part: the pack kernel's and each variant's */
  char **keys = warm_keys(&spec, &parts);  /* parts set before it is read */
  free_keys(keys, parts);
  assert_true(parts > 1);
  assert_int_equal(count_files(dir, NULL, ".fgc"), parts);
  assert_int_equal(count_files(dir, NULL, NULL), parts);
}

static void test_read_only_folder(void **state) {
  run_unprivileged(*state, read_only_folder);
}

static void test_permission_denied(void **state) {
  run_unprivileged(*state, permission_denied);
}

/* ---- flowgen cache, as a user runs it ------------------------------------ */

static void skip_without_cli(void) {
  if (!fg_test_file_exists(fg_test_flowgen_bin())) {
    print_message("# no %s (set FLOWGEN_BIN)\n", fg_test_flowgen_bin());
    skip();
  }
}

/* Runs `flowgen ARGS` under timeout: a command that waits forever exits 124. */
static int flowgen_cli(char **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int flowgen_cli(char **out, char **err, const char *fmt, ...) {
  char args[2 * PATH_SIZE], command[3 * PATH_SIZE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  assert_true(n > 0 && (size_t)n < sizeof args);
  n = snprintf(command, sizeof command, "timeout 30 '%s' %s", fg_test_flowgen_bin(), args);
  assert_true(n > 0 && (size_t)n < sizeof command);
  return fg_test_run(command, out, err);
}

/* err is the one line "flowgen: ..." and holds a and b. */
static void expect_one_error_line(const char *err, const char *a, const char *b) {
  const char *newline = strchr(err, '\n');
  if (strncmp(err, "flowgen: ", 9) != 0 || !newline || newline[1] != '\0' ||
      !strstr(err, a) || (b && !strstr(err, b)))
    fail_msg("expected one line 'flowgen: ...' with '%s' and '%s', got: %s", a, b ? b : "",
             err);
}

static void free2(char *a, char *b) {
  free(a);
  free(b);
}

/* `cache list` prints a header whose columns line up with the rows. */
static void test_cli_list_has_aligned_headers(void **state) {
  skip_without_cli();
  const char *dir = *state;
  static const char source[] = "source:0123456789abcdef0123456789abcdef";
  const char *keys[] = {"flowgen module v1\ntarget=sm_90\nsource-xxh3-128=0123456789abcdef"
                        "0123456789abcdef\n",
                        "flowgen module v1\ntarget=compute_120\npart=flow_d2_h4_s1_fp32_pack.cu\n"
                        "flowgen source v1\nspec.dim=2\n"};
  put_pattern(dir, keys[0], 123456, 1);
  put_pattern(dir, keys[1], 7, 2);
  char path[PATH_SIZE], corrupt[FG_CACHE_FILE_NAME_SIZE];
  put_pattern(dir, "corrupt", 300, 3);
  entry_file(path, dir, "corrupt");
  flip_byte(path, file_size(path) - 1);
  fg_cache_file_name("corrupt", corrupt);
  fg_test_path_join(path, dir, "notes.fgc");
  fg_test_write_file(path, "my notes", 8);

  char *out = NULL, *err = NULL;
  assert_int_equal(flowgen_cli(&out, &err, "cache list --dir '%s'", dir), 0);
  assert_string_equal(err, "");
  char *lines[8] = {0};
  int count = 0;
  for (char *line = strtok(out, "\n"); line && count < 8; line = strtok(NULL, "\n"))
    lines[count++] = line;
  assert_int_equal(count, 5);
  const char *header = lines[0];
  if (strncmp(header, "FILE ", 5) != 0) fail_msg("no header: %s", header);
  const char *columns[] = {"BYTES", "TARGET", "STATE", "KERNEL"};
  size_t at[4];
  for (int c = 0; c < 4; ++c) {
    const char *found = strstr(header, columns[c]);
    if (!found) fail_msg("no %s in the header: %s", columns[c], header);
    at[c] = (size_t)(found - header);
    assert_true(c == 0 || at[c] > at[c - 1]);
  }
  size_t bytes_end = at[0] + strlen("BYTES"); /* numbers are right-aligned */
  int valid = 0, invalid = 0;
  for (int i = 1; i < count; ++i) {
    const char *row = lines[i];
    if (strlen(row) <= at[3]) fail_msg("short row: %s", row);
    if (!isdigit((unsigned char)row[bytes_end - 1]) || row[bytes_end] != ' ' ||
        row[at[1] - 1] != ' ' || row[at[1]] == ' ' || row[at[3] - 1] != ' ' ||
        row[at[3]] == ' ')
      fail_msg("row not under the header:\n%s\n%s", header, row);
    if (strncmp(row + at[2], "valid ", 6) == 0) {
      ++valid;
      /* a source-keyed entry shows its hash, a part its name */
      if (strncmp(row + at[1], "sm_90 ", 6) == 0) {
        assert_string_equal(row + at[3], source);
      } else {
        assert_true(strncmp(row + at[1], "compute_120 ", 12) == 0);
        assert_string_equal(row + at[3], "flow_d2_h4_s1_fp32_pack");
      }
    } else if (strncmp(row + at[2], "INVALID ", 8) == 0) {
      ++invalid;
      if (strncmp(row, "notes.fgc ", 10) == 0) assert_non_null(strstr(row, "(not a flowgen"));
      else if (strncmp(row, corrupt, 32) == 0) assert_non_null(strstr(row, "(checksum mismatch)"));
      else fail_msg("unexpected invalid row: %s", row);
    } else {
      fail_msg("no state under STATE:\n%s\n%s", header, row);
    }
  }
  assert_int_equal(valid, 2);
  assert_int_equal(invalid, 2);
  free2(out, err);
}

/* A FIFO at the entry's path of `cache warm` made it wait forever; now warm
 * fails naming it, list shows it, clear leaves it. */
static void test_cli_fifo_at_entry_path(void **state) {
  skip_without_cli();
  if (flowrt_nvrtc_version() == 0) skip();
  char cache[PATH_SIZE], path[PATH_SIZE];
  fg_test_path_join(cache, *state, "cache");
  assert_int_equal(mkdir(cache, 0700), 0);
  flowgen_spec spec = fg_test_spec(2, 4, 1, 90);
  int parts = 0;
  char **keys = warm_keys(&spec, &parts);
  entry_file(path, cache, keys[0]);  /* the pack kernel's */
  free_keys(keys, parts);
  assert_int_equal(mkfifo(path, 0600), 0);
  const char *warm = "cache warm --arch sm_90 --dim 2 --hidden 4 --steps 1";

  char *out = NULL, *err = NULL;
  int rc = flowgen_cli(&out, &err, "%s --dir '%s'", warm, cache);
  if (rc != 1) fail_msg("warm: exit %d (124: it waited on the FIFO): %s", rc, err);
  expect_one_error_line(err, path, "(a FIFO), left as it is");
  assert_string_equal(out, "");
  free2(out, err);
  assert_int_equal(flowgen_cli(&out, &err, "cache list --dir '%s'", cache), 0);
  assert_non_null(strstr(out, "INVALID"));
  assert_non_null(strstr(out, "(not a regular file (a FIFO))"));
  free2(out, err);
  /* the variants compiled beside the pack kernel's part, if any, are
   * entries like any other: clear removes them, never the FIFO */
  int entries = count_files(cache, NULL, ".fgc") - 1;
  assert_int_equal(flowgen_cli(&out, &err, "cache clear --dir '%s'", cache), 0);
  char removed[64];
  snprintf(removed, sizeof removed, "removed %d file%s\n", entries, entries == 1 ? "" : "s");
  assert_string_equal(out, removed);
  free2(out, err);
  assert_int_equal(file_type(path), S_IFIFO);
}

/* warm, list and clear on a folder they must not use: exit 1 and one line
 * saying why; FLOWGEN_CACHE_TRUST=any opts in. */
static void test_cli_refuses_untrusted_or_unusable_folder(void **state) {
  skip_without_cli();
  char shared[PATH_SIZE], file[PATH_SIZE], under[PATH_SIZE];
  fg_test_path_join(shared, *state, "shared");
  assert_int_equal(mkdir(shared, 0700), 0);
  assert_int_equal(chmod(shared, 0777), 0);
  const char *commands[] = {"cache warm --arch sm_90 --dim 2 --hidden 4 --steps 1",
                            "cache list", "cache clear"};
  char *out = NULL, *err = NULL;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i) {
    int rc = flowgen_cli(&out, &err, "%s --dir '%s'", commands[i], shared);
    if (rc != 1) fail_msg("%s: exit %d: %s%s", commands[i], rc, out, err);
    expect_one_error_line(err, shared, "writable by group or others");
    assert_non_null(strstr(err, "FLOWGEN_CACHE_TRUST=any"));
    assert_string_equal(out, "");
    free2(out, err);
  }
  setenv("FLOWGEN_CACHE_DIR", shared, 1);
  assert_int_equal(flowgen_cli(&out, &err, "cache list"), 1);
  free2(out, err);
  assert_int_equal(count_files(shared, NULL, NULL), 0);
  setenv("FLOWGEN_CACHE_TRUST", "any", 1);
  assert_int_equal(flowgen_cli(&out, &err, "cache list"), 0);
  free2(out, err);
  if (flowrt_nvrtc_version() != 0) {
    assert_int_equal(flowgen_cli(&out, &err, "%s", commands[0]), 0);
    assert_non_null(strstr(out, "compiled and cached"));
    free2(out, err);
    flowgen_spec spec = fg_test_spec(2, 4, 1, 90);  /* commands[0]'s */
    int parts = 0;
    char **keys = warm_keys(&spec, &parts);  /* parts set before it is read */
    free_keys(keys, parts);
    assert_int_equal(count_files(shared, NULL, ".fgc"), parts);
  }
  unsetenv("FLOWGEN_CACHE_TRUST");
  unsetenv("FLOWGEN_CACHE_DIR");

  fg_test_path_join(file, *state, "file");
  fg_test_path_join(under, file, "sub");
  fg_test_write_file(file, "x", 1);
  assert_int_equal(flowgen_cli(&out, &err, "%s --dir '%s'", commands[0], file), 1);
  expect_one_error_line(err, file, "not a directory");
  free2(out, err);
  assert_int_equal(flowgen_cli(&out, &err, "%s --dir '%s'", commands[0], under), 1);
  expect_one_error_line(err, under, strerror(ENOTDIR));
  free2(out, err);
  assert_int_equal(file_size(file), 1);
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
      CACHE_TEST(test_disk_full_at_every_stage),
      CACHE_TEST(test_failed_rename),
      CACHE_TEST(test_read_only_folder),
      CACHE_TEST(test_permission_denied),
      CACHE_TEST(test_runtime_warns_and_goes_on),
      CACHE_TEST(test_warm_on_a_full_disk),
      CACHE_TEST(test_disabled_by_environment),
      CACHE_TEST(test_list_reports_every_entry_sorted),
      CACHE_TEST(test_clear_removes_only_cache_files),
      CACHE_TEST(test_list_and_clear_default_and_missing_folder),
      CACHE_TEST(test_node_at_entry_path_is_no_entry),
      CACHE_TEST(test_link_at_entry_path_is_not_followed),
      CACHE_TEST(test_clear_removes_only_what_carries_the_header),
      CACHE_TEST(test_shared_folder_is_refused),
      CACHE_TEST(test_shared_parent_is_refused),
      CACHE_TEST(test_links_to_the_folder),
      CACHE_TEST(test_another_users_folder_is_refused),
      CACHE_TEST(test_runtime_setup_refuses_untrusted_folder),
      CACHE_TEST(test_planted_entry_in_untrusted_folder_is_not_loaded),
      CACHE_TEST(test_cli_list_has_aligned_headers),
      CACHE_TEST(test_cli_fifo_at_entry_path),
      CACHE_TEST(test_cli_refuses_untrusted_or_unusable_folder),
      CACHE_TEST(test_concurrent_writers_leave_valid_entries),
  };
  return cmocka_run_group_tests_name("cache", tests, NULL, NULL);
}
