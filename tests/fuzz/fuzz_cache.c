/* Fuzzes the disk cache's entry reader.  The first byte says what the rest
 * of the input is:
 *   even: the bytes of an entry file, stored under a fixed key's file name.
 *         fg_cache_get must find a hit (and return exactly the payload the
 *         file holds after its header and key), an invalid entry (with a
 *         reason), or fail with an I/O or memory status; flowrt_cache_list
 *         must visit the file once, as valid when it was a hit.
 *   odd:  a payload.  fg_cache_put then fg_cache_get must give it back
 *         unchanged, and the folder holds one entry and no temporary file.
 * The folder is made once under $TMPDIR and emptied after every input
 * (flowrt_cache_clear must remove the file exactly when it begins with the
 * entry magic). */
#include "fuzz.h"

#include "disk_cache.h"
#include "flowrt.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static const char key[] = "fuzz: source 0123456789abcdef, -arch=sm_90, nvrtc 13000";

static char dir[PATH_MAX];
static char path[PATH_MAX];

/* The folder goes when the process ends (the replay test runs this too). */
static void remove_folder(void) {
  flowrt_cache_clear(dir, NULL, NULL);
  rmdir(dir);
}

static void setup(void) {
  if (dir[0]) return;
  const char *tmp = getenv("TMPDIR");
  int n = snprintf(dir, sizeof dir, "%s/flowgen-fuzz-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  FUZZ_CHECK(n > 0 && (size_t)n < sizeof dir);
  FUZZ_CHECK(mkdtemp(dir) != NULL);
  atexit(remove_folder);
  flowgen_error err;
  FUZZ_CHECK(fg_cache_open(dir, false, &err) == FLOWGEN_OK);
  char name[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(key, name);
  n = snprintf(path, sizeof path, "%s/%s", dir, name);
  FUZZ_CHECK(n > 0 && (size_t)n < sizeof path);
}

typedef struct visits {
  int files;
  int valid;
} visits;

static void visit(void *ctx, const flowrt_cache_entry *e) {
  visits *v = ctx;
  FUZZ_CHECK(e->file != NULL && e->file[0] != '\0');
  v->files++;
  v->valid += e->valid;
}

static void write_entry_file(const uint8_t *data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0);
    done += (size_t)n;
  }
  FUZZ_CHECK(close(fd) == 0);
}

static void read_back(const uint8_t *data, size_t size) {
  write_entry_file(data, size);
  fg_cache_result result;
  void *payload = NULL;
  size_t n = 0;
  flowgen_error err = {FLOWGEN_OK, ""};
  flowgen_status s = fg_cache_get(dir, key, &result, &payload, &n, &err);
  FUZZ_CHECK(s == FLOWGEN_OK || s == FLOWGEN_NOMEM || s == FLOWGEN_IO);
  if (s == FLOWGEN_OK && result == FG_CACHE_HIT) {
    const size_t before = FG_CACHE_HEADER_SIZE + strlen(key);
    FUZZ_CHECK(size == before + n);
    FUZZ_CHECK(payload != NULL);
    FUZZ_CHECK(n == 0 || memcmp(payload, data + before, n) == 0);
  } else {
    FUZZ_CHECK(payload == NULL && n == 0);
  }
  if (s == FLOWGEN_OK && result == FG_CACHE_INVALID) FUZZ_CHECK(err.message[0] != '\0');
  visits v = {0, 0};
  FUZZ_CHECK(flowrt_cache_list(dir, visit, &v, &err) == FLOWGEN_OK);
  FUZZ_CHECK(v.files == 1);
  if (s == FLOWGEN_OK && result == FG_CACHE_HIT) FUZZ_CHECK(v.valid == 1);
  free(payload);
}

static void round_trip(const uint8_t *data, size_t size) {
  flowgen_error err = {FLOWGEN_OK, ""};
  FUZZ_CHECK(fg_cache_put(dir, key, data, size, &err) == FLOWGEN_OK);
  fg_cache_result result;
  void *payload = NULL;
  size_t n = 0;
  FUZZ_CHECK(fg_cache_get(dir, key, &result, &payload, &n, &err) == FLOWGEN_OK);
  FUZZ_CHECK(result == FG_CACHE_HIT && n == size);
  FUZZ_CHECK(size == 0 || memcmp(payload, data, size) == 0);
  free(payload);
  visits v = {0, 0};
  FUZZ_CHECK(flowrt_cache_list(dir, visit, &v, &err) == FLOWGEN_OK);
  FUZZ_CHECK(v.files == 1 && v.valid == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  setup();
  if (data[0] % 2 == 0) read_back(data + 1, size - 1);
  else round_trip(data + 1, size - 1);
  /* clear removes only what begins with an entry's magic: the rest goes
   * by hand. */
  bool ours = data[0] % 2 == 1 ||
              (size > 8 && memcmp(data + 1, FG_CACHE_MAGIC, 8) == 0);
  size_t removed = 0;
  flowgen_error err;
  FUZZ_CHECK(flowrt_cache_clear(dir, &removed, &err) == FLOWGEN_OK);
  FUZZ_CHECK(removed == (ours ? 1u : 0u));
  if (!ours) FUZZ_CHECK(unlink(path) == 0);
  return 0;
}
