/* The on-disk module cache's entries: their format, reading and writing;
 * disk_cache.h describes the format. */
#include "disk_cache.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the entry format --------------------------------------------------- */

static void store_le(unsigned char *out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = (unsigned char)(value >> (8 * i));
}

static uint64_t load_le(const unsigned char *in, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

typedef struct entry_header {
  uint32_t version;
  uint32_t key_size;
  uint64_t payload_size;
  uint64_t checksum;
} entry_header;

static void encode_header(const entry_header *header,
                          unsigned char raw[FG_CACHE_HEADER_SIZE]) {
  memcpy(raw + FG_CACHE_OFFSET_MAGIC, FG_CACHE_MAGIC, 8);
  store_le(raw + FG_CACHE_OFFSET_VERSION, header->version, 4);
  store_le(raw + FG_CACHE_OFFSET_KEY_SIZE, header->key_size, 4);
  store_le(raw + FG_CACHE_OFFSET_PAYLOAD_SIZE, header->payload_size, 8);
  store_le(raw + FG_CACHE_OFFSET_CHECKSUM, header->checksum, 8);
}

/* Decodes raw and checks it against the file's size: NULL if it is sound,
 * else what is wrong. */
static const char *decode_header(const unsigned char raw[FG_CACHE_HEADER_SIZE],
                                 uint64_t file_size, entry_header *header) {
  if (memcmp(raw + FG_CACHE_OFFSET_MAGIC, FG_CACHE_MAGIC, 8) != 0)
    return "not a flowgen cache entry (bad magic)";
  header->version = (uint32_t)load_le(raw + FG_CACHE_OFFSET_VERSION, 4);
  header->key_size = (uint32_t)load_le(raw + FG_CACHE_OFFSET_KEY_SIZE, 4);
  header->payload_size = load_le(raw + FG_CACHE_OFFSET_PAYLOAD_SIZE, 8);
  header->checksum = load_le(raw + FG_CACHE_OFFSET_CHECKSUM, 8);
  if (header->version != FG_CACHE_FORMAT_VERSION)
    return "unsupported format version";
  if (header->key_size == 0 || header->key_size > FG_CACHE_KEY_MAX)
    return "key length out of range";
  if (header->payload_size > FG_CACHE_PAYLOAD_MAX)
    return "payload length out of range";
  uint64_t expected =
      FG_CACHE_HEADER_SIZE + (uint64_t)header->key_size + header->payload_size;
  if (file_size < expected) return "truncated";
  if (file_size > expected) return "trailing bytes after the payload";
  return NULL;
}

static uint64_t entry_checksum(const char *key, size_t key_size,
                               const void *payload, size_t size) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, key, key_size);
  XXH3_64bits_update(&state, payload, size);
  return XXH3_64bits_digest(&state);
}

/* ---- reading ------------------------------------------------------------ */

/* Reads size bytes, fewer only at the end of the file; -1 on error. */
ssize_t fg_cache_read_fully(int fd, void *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, (char *)buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

/* Why a file of this type cannot be an entry. */
const char *fg_cache_not_regular(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link (not followed)";
  if (S_ISDIR(mode)) return "not a regular file (a folder)";
  if (S_ISFIFO(mode)) return "not a regular file (a FIFO)";
  if (S_ISSOCK(mode)) return "not a regular file (a socket)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "not a regular file (a device)";
  return "not a regular file";
}

/* Opens the entry at path for reading.  Only a regular file is opened: a
 * device's open can act (a tape rewinds), a FIFO's can wait for a writer,
 * and a link may lead anywhere; the flags hold should it be swapped in
 * between (fg_cache_read_entry checks the opened file again).  *fd is -1 when the
 * entry is missing, or when *problem says why it is no entry. */
flowgen_status fg_cache_open_entry(const char *path, int *fd,
                                   const char **problem, flowgen_error *err) {
  *fd = -1;
  *problem = NULL;
  struct stat info;
  if (lstat(path, &info) != 0)
    return errno == ENOENT ? FLOWGEN_OK : fg_cache_io_error(err, "cannot open", path);
  if (!S_ISREG(info.st_mode)) {
    *problem = fg_cache_not_regular(info.st_mode);
    return FLOWGEN_OK;
  }
  *fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (*fd >= 0 || errno == ENOENT) return FLOWGEN_OK;
  if (errno == ELOOP) {
    *problem = fg_cache_not_regular(S_IFLNK);
    return FLOWGEN_OK;
  }
  return fg_cache_io_error(err, "cannot open", path);
}

void fg_cache_entry_free(fg_cache_entry *e) {
  free(e->key);
  free(e->payload);
}

static flowgen_status read_key(int fd, const char *path, size_t key_size,
                               fg_cache_entry *e, const char **problem,
                               flowgen_error *err) {
  e->key = malloc(key_size + 1);
  if (!e->key) return fg_fail(err, FLOWGEN_NOMEM, "reading %s", path);
  ssize_t got = fg_cache_read_fully(fd, e->key, key_size);
  if (got < 0) return fg_cache_io_error(err, "cannot read", path);
  e->key[got] = '\0';
  if ((size_t)got < key_size) *problem = "truncated";
  else if (memchr(e->key, '\0', key_size)) *problem = "key holds a NUL byte";
  return FLOWGEN_OK;
}

/* Reads size bytes into buf (or through a scratch chunk if buf is NULL)
 * and feeds them to state. */
static flowgen_status read_hashed(int fd, const char *path, unsigned char *buf,
                                  uint64_t size, XXH3_state_t *state,
                                  const char **problem, flowgen_error *err) {
  unsigned char chunk[16384];
  for (uint64_t done = 0; done < size;) {
    uint64_t left = size - done;
    size_t want = buf || left < sizeof chunk ? (size_t)left : sizeof chunk;
    unsigned char *dst = buf ? buf + done : chunk;
    ssize_t got = fg_cache_read_fully(fd, dst, want);
    if (got < 0) return fg_cache_io_error(err, "cannot read", path);
    if ((size_t)got < want) {
      *problem = "truncated";
      return FLOWGEN_OK;
    }
    XXH3_64bits_update(state, dst, want);
    done += want;
  }
  return FLOWGEN_OK;
}

/* Reads the payload (into a new *out if out is given) and checks the
 * checksum over key and payload. */
static flowgen_status read_payload(int fd, const char *path,
                                   const entry_header *header, const char *key,
                                   void **out, const char **problem,
                                   flowgen_error *err) {
  unsigned char *payload = NULL;
  /* + 1: malloc(0) may return NULL. */
  if (out && !(payload = malloc(header->payload_size + 1)))
    return fg_fail(err, FLOWGEN_NOMEM, "reading %s", path);
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, key, header->key_size);
  flowgen_status status = read_hashed(fd, path, payload, header->payload_size,
                                      &state, problem, err);
  if (status == FLOWGEN_OK && !*problem &&
      XXH3_64bits_digest(&state) != header->checksum)
    *problem = "checksum mismatch";
  if (status == FLOWGEN_OK && !*problem && out) *out = payload;
  else free(payload);
  return status;
}

/* Reads the entry open on fd.  *problem is NULL for a sound entry (whose key
 * is expected_key, unless that is NULL), else what is wrong with it; an
 * error means the file could not be read at all.  e->key is kept even when
 * the entry is unsound, e->payload only when it is sound and asked for. */
flowgen_status fg_cache_read_entry(int fd, const char *path,
                                   const char *expected_key, bool want_payload,
                                   fg_cache_entry *e, const char **problem,
                                   flowgen_error *err) {
  *e = (fg_cache_entry){0};
  *problem = NULL;
  struct stat info;
  if (fstat(fd, &info) != 0) return fg_cache_io_error(err, "cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    *problem = fg_cache_not_regular(info.st_mode);
    return FLOWGEN_OK;
  }
  unsigned char raw[FG_CACHE_HEADER_SIZE];
  ssize_t got = fg_cache_read_fully(fd, raw, sizeof raw);
  if (got < 0) return fg_cache_io_error(err, "cannot read", path);
  entry_header header;
  /* A short file is a truncated entry only if it begins as one. */
  size_t magic_seen = (size_t)got < 8 ? (size_t)got : 8;
  if (memcmp(raw, FG_CACHE_MAGIC, magic_seen) != 0)
    *problem = "not a flowgen cache entry (bad magic)";
  else if ((size_t)got < sizeof raw)
    *problem = "truncated";
  else
    *problem = decode_header(raw, (uint64_t)info.st_size, &header);
  if (*problem) return FLOWGEN_OK;
  e->payload_size = header.payload_size;
  flowgen_status status = read_key(fd, path, header.key_size, e, problem, err);
  if (status != FLOWGEN_OK || *problem) return status;
  if (expected_key && strcmp(e->key, expected_key) != 0) {
    *problem = "foreign entry (the stored key differs)";
    return FLOWGEN_OK;
  }
  return read_payload(fd, path, &header, e->key,
                      want_payload ? &e->payload : NULL, problem, err);
}

flowgen_status fg_cache_get(const char *dir, const char *key,
                            fg_cache_result *result, void **payload,
                            size_t *size, flowgen_error *err) {
  *result = FG_CACHE_MISS;
  *payload = NULL;
  *size = 0;
  char path[PATH_MAX];
  flowgen_status status = fg_cache_check_dir(dir, err);
  if (status == FLOWGEN_OK) status = fg_cache_check_key(key, err);
  if (status == FLOWGEN_OK)
    status = fg_cache_entry_path(dir, key, path, sizeof path, err);
  if (status != FLOWGEN_OK) return status;
  int fd;
  const char *problem;
  status = fg_cache_open_entry(path, &fd, &problem, err);
  if (status == FLOWGEN_OK && fd < 0 && !problem) {
    fg_error_clear(err);
    return FLOWGEN_OK;
  }
  if (status != FLOWGEN_OK) return status;
  fg_cache_entry e = {0};
  if (fd >= 0) {
    status = fg_cache_read_entry(fd, path, key, true, &e, &problem, err);
    close(fd);
  }
  if (status == FLOWGEN_OK && problem) {
    *result = FG_CACHE_INVALID;
    fg_fail(err, FLOWGEN_OK, "%s: %s", path, problem);
  } else if (status == FLOWGEN_OK) {
    *result = FG_CACHE_HIT;
    *payload = e.payload;
    *size = (size_t)e.payload_size;
    e.payload = NULL;
    fg_error_clear(err);
  }
  fg_cache_entry_free(&e);
  return status;
}

/* ---- writing ------------------------------------------------------------ */

static int write_fully(int fd, const void *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, (const char *)buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

/* Writes the whole entry to fd and closes it. */
static flowgen_status write_entry(int fd, const char *temp, const char *key,
                                  const void *payload, size_t size,
                                  flowgen_error *err) {
  size_t key_size = strlen(key);
  entry_header header = {
      .version = FG_CACHE_FORMAT_VERSION,
      .key_size = (uint32_t)key_size,
      .payload_size = size,
      .checksum = entry_checksum(key, key_size, payload, size),
  };
  unsigned char raw[FG_CACHE_HEADER_SIZE];
  encode_header(&header, raw);
  /* fsync before the rename: after a crash the final name must not point
   * at a file whose data never reached the disk. */
  bool written = write_fully(fd, raw, sizeof raw) == 0 &&
                 write_fully(fd, key, key_size) == 0 &&
                 write_fully(fd, payload, size) == 0 && fsync(fd) == 0;
  flowgen_status status =
      written ? FLOWGEN_OK : fg_cache_io_error(err, "cannot write", temp);
  if (close(fd) != 0 && status == FLOWGEN_OK)
    status = fg_cache_io_error(err, "cannot write", temp);
  return status;
}

static flowgen_status check_put(const char *dir, const char *key,
                                const void *payload, size_t size,
                                flowgen_error *err) {
  flowgen_status status = fg_cache_check_dir(dir, err);
  if (status == FLOWGEN_OK) status = fg_cache_check_key(key, err);
  if (status != FLOWGEN_OK) return status;
  if (size > FG_CACHE_PAYLOAD_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "cache payload of %zu bytes is over the limit of %zu", size,
                   FG_CACHE_PAYLOAD_MAX);
  if (!payload && size > 0)
    return fg_fail(err, FLOWGEN_INVALID, "cache payload is NULL");
  return FLOWGEN_OK;
}

/* The directory is not fsynced after the rename: losing the rename in a
 * crash costs one recompile. */
flowgen_status fg_cache_put(const char *dir, const char *key,
                            const void *payload, size_t size,
                            flowgen_error *err) {
  char path[PATH_MAX], temp[PATH_MAX];
  int fd;
  flowgen_status status = check_put(dir, key, payload, size, err);
  if (status == FLOWGEN_OK)
    status = fg_cache_entry_path(dir, key, path, sizeof path, err);
  /* A rename would unlink a FIFO, device or socket that someone put at
   * the entry's path: leave it (rename itself fails on a folder, and
   * replaces a link, not what it points to). */
  struct stat info;
  if (status == FLOWGEN_OK && lstat(path, &info) == 0 &&
      !S_ISREG(info.st_mode) && !S_ISLNK(info.st_mode) &&
      !S_ISDIR(info.st_mode))
    status = fg_fail(err, FLOWGEN_IO, "cannot store %s: %s, left as it is",
                     path, fg_cache_not_regular(info.st_mode));
  if (status == FLOWGEN_OK)
    status = fg_cache_create_temp(dir, temp, sizeof temp, &fd, err);
  if (status != FLOWGEN_OK) return status;
  status = write_entry(fd, temp, key, payload, size, err);
  if (status == FLOWGEN_OK && rename(temp, path) != 0)
    status = fg_fail(err, FLOWGEN_IO, "cannot rename %s to %s: %s", temp, path,
                     strerror(errno));
  if (status != FLOWGEN_OK) unlink(temp);
  return status;
}
