/* The on-disk module cache; disk_cache.h describes the entry format. */
#include "disk_cache.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* Reads errno: call it before anything else can change errno. */
static flowgen_status io_error(flowgen_error *err, const char *what,
                               const char *path) {
  return fg_fail(err, FLOWGEN_IO, "%s %s: %s", what, path, strerror(errno));
}

static flowgen_status join_path(char *buf, size_t size, const char *dir,
                                const char *name, flowgen_error *err) {
  int n = snprintf(buf, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size)
    return fg_fail(err, FLOWGEN_INVALID, "path too long: %s/%s", dir, name);
  return FLOWGEN_OK;
}

static flowgen_status copy_path(char *buf, size_t size, const char *path,
                                flowgen_error *err) {
  int n = snprintf(buf, size, "%s", path);
  if (n < 0 || (size_t)n >= size)
    return fg_fail(err, FLOWGEN_INVALID, "path too long: %s", path);
  return FLOWGEN_OK;
}

/* ---- where the cache lives ---------------------------------------------- */

static const char *env_nonempty(const char *name) {
  const char *value = getenv(name);
  return value && *value ? value : NULL;
}

bool fg_cache_enabled_from_env(void) {
  const char *value = getenv("FLOWGEN_CACHE");
  return !(value && strcmp(value, "0") == 0);
}

bool fg_cache_trust_any_from_env(void) {
  const char *value = getenv("FLOWGEN_CACHE_TRUST");
  return value && strcmp(value, "any") == 0;
}

flowgen_status flowrt_cache_dir(char *buf, size_t size, flowgen_error *err) {
  if (!buf || size == 0)
    return fg_fail(err, FLOWGEN_INVALID, "flowrt_cache_dir: no buffer");
  const char *dir = env_nonempty("FLOWGEN_CACHE_DIR");
  if (dir) return copy_path(buf, size, dir, err);
  /* The XDG base directory spec says to ignore a relative path. */
  const char *xdg = env_nonempty("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return join_path(buf, size, xdg, "flowgen", err);
  const char *home = env_nonempty("HOME");
  if (home) return join_path(buf, size, home, ".cache/flowgen", err);
  return fg_fail(err, FLOWGEN_IO, "no cache folder: set FLOWGEN_CACHE_DIR, "
                 "XDG_CACHE_HOME or HOME");
}

flowgen_status fg_cache_resolve_dir(const char *dir, char *buf, size_t size,
                                    flowgen_error *err) {
  if (!dir) return flowrt_cache_dir(buf, size, err);
  if (!*dir) return fg_fail(err, FLOWGEN_INVALID, "empty cache folder path");
  return copy_path(buf, size, dir, err);
}

void fg_cache_file_name(const char *key, char name[FG_CACHE_FILE_NAME_SIZE]) {
  static const char hex[] = "0123456789abcdef";
  XXH128_canonical_t digest;
  XXH128_canonicalFromHash(&digest, XXH3_128bits(key, strlen(key)));
  for (size_t i = 0; i < sizeof digest.digest; ++i) {
    name[2 * i] = hex[digest.digest[i] >> 4];
    name[2 * i + 1] = hex[digest.digest[i] & 15];
  }
  memcpy(name + 2 * sizeof digest.digest, FG_CACHE_SUFFIX,
         sizeof FG_CACHE_SUFFIX);
}

static flowgen_status entry_path(const char *dir, const char *key, char *buf,
                                 size_t size, flowgen_error *err) {
  char name[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(key, name);
  return join_path(buf, size, dir, name, err);
}

/* mkdir -p with mode 0700 for every folder it creates. */
static flowgen_status make_dirs(const char *dir, flowgen_error *err) {
  char path[PATH_MAX];
  flowgen_status status = copy_path(path, sizeof path, dir, err);
  if (status != FLOWGEN_OK) return status;
  for (char *p = path + 1;; ++p) {
    if (*p != '/' && *p != '\0') continue;
    char separator = *p;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      return io_error(err, "cannot create cache folder", path);
    *p = separator;
    if (separator == '\0') return FLOWGEN_OK;
  }
}

/* Creates an empty temporary file in dir (and dir itself if missing). */
static flowgen_status create_temp(const char *dir, char *temp, size_t size,
                                  int *fd, flowgen_error *err) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    flowgen_status status =
        join_path(temp, size, dir, FG_CACHE_TEMP_PREFIX "XXXXXX", err);
    if (status != FLOWGEN_OK) return status;
    *fd = mkstemp(temp);
    if (*fd >= 0) return FLOWGEN_OK;
    if (errno != ENOENT || attempt > 0) break;
    status = make_dirs(dir, err);
    if (status != FLOWGEN_OK) return status;
  }
  return io_error(err, "cannot create a file in cache folder", dir);
}

static flowgen_status check_dir(const char *dir, flowgen_error *err) {
  if (!dir || !*dir)
    return fg_fail(err, FLOWGEN_INVALID, "no cache folder given");
  return FLOWGEN_OK;
}

static flowgen_status check_key(const char *key, flowgen_error *err) {
  if (!key || !*key || strlen(key) > FG_CACHE_KEY_MAX)
    return fg_fail(err, FLOWGEN_INVALID, "cache key empty or over %zu bytes",
                   FG_CACHE_KEY_MAX);
  return FLOWGEN_OK;
}

/* ---- whom the folder belongs to (disk_cache.h says why) ------------------ */

/* Why info, of a folder or link on the way to the cache, lets someone else
 * plant or swap files in the cache (in why), or NULL.  is_cache: it is the
 * cache folder itself, which no one else may write, sticky bit or not. */
static const char *distrust(const struct stat *info, bool is_cache, char *why,
                            size_t size) {
  uid_t me = geteuid(), owner = info->st_uid;
  unsigned mode = (unsigned)info->st_mode & 07777;
  if (S_ISLNK(info->st_mode)) {
    if (owner == me || owner == 0) return NULL;
    snprintf(why, size, "is a symbolic link owned by user %u", (unsigned)owner);
  } else if (!S_ISDIR(info->st_mode)) {
    return NULL; /* reported as "not a directory" when used */
  } else if (owner != me && (is_cache || owner != 0)) {
    snprintf(why, size, "is owned by user %u, not by you (user %u)",
             (unsigned)owner, (unsigned)me);
  } else if ((mode & 022) && (is_cache || !(mode & S_ISVTX))) {
    snprintf(why, size, "is writable by group or others%s (mode %04o)",
             is_cache ? "" : " without the sticky bit", mode);
  } else {
    return NULL;
  }
  return why;
}

/* Checks the folders on path from the top down ("/" aside), and each link
 * on the way with what it points to.  Stops at the first that is missing
 * (the rest will be made, mode 0700) or is not a folder (reported when
 * used).  ends_at_cache: path's last folder is the cache folder itself. */
static flowgen_status check_walk(const char *dir, const char *path,
                                 bool ends_at_cache, flowgen_error *err) {
  char prefix[PATH_MAX], why[128];
  flowgen_status status = copy_path(prefix, sizeof prefix, path, err);
  if (status != FLOWGEN_OK) return status;
  size_t length = strlen(prefix);
  while (length > 1 && prefix[length - 1] == '/') prefix[--length] = '\0';
  for (size_t end = 1; end <= length; ++end) {
    if (end < length && prefix[end] != '/') continue;
    char separator = prefix[end];
    prefix[end] = '\0';
    bool is_cache = ends_at_cache && end == length;
    const char *problem = NULL;
    struct stat info;
    bool found = lstat(prefix, &info) == 0;
    if (found) problem = distrust(&info, is_cache, why, sizeof why);
    if (found && !problem && S_ISLNK(info.st_mode)) {
      found = stat(prefix, &info) == 0;
      if (found) problem = distrust(&info, is_cache, why, sizeof why);
    }
    if (problem)
      return fg_fail(err, FLOWGEN_IO,
                     "untrusted cache folder %s: %s %s; set "
                     "FLOWGEN_CACHE_TRUST=any to use it anyway",
                     dir, strcmp(prefix, dir) == 0 ? "it" : prefix, problem);
    if (!found || !S_ISDIR(info.st_mode)) return FLOWGEN_OK;
    prefix[end] = separator;
  }
  return FLOWGEN_OK;
}

/* Checks dir as given (its links and the folders that hold them), then as
 * resolved: the folders that links and ".." lead through. */
static flowgen_status check_trusted(const char *dir, flowgen_error *err) {
  flowgen_status status = check_walk(dir, dir, true, err);
  char existing[PATH_MAX];
  if (status == FLOWGEN_OK)
    status = copy_path(existing, sizeof existing, dir, err);
  for (bool whole = true; status == FLOWGEN_OK; whole = false) {
    char *real = realpath(existing, NULL);
    if (real) {
      status = check_walk(dir, real, whole, err);
      free(real);
      break;
    }
    /* Missing: check the deepest folder that exists. */
    if ((errno != ENOENT && errno != ENOTDIR) || strcmp(existing, ".") == 0)
      break;
    char *slash = strrchr(existing, '/');
    if (!slash) strcpy(existing, ".");
    else if (slash == existing) existing[1] = '\0';
    else *slash = '\0';
  }
  return status;
}

flowgen_status fg_cache_open(const char *dir, bool trust_any,
                             flowgen_error *err) {
  flowgen_status status = check_dir(dir, err);
  /* Checked before anything is made in a folder we do not trust, and again
   * after: a folder someone else made in between is theirs. */
  if (status == FLOWGEN_OK && !trust_any) status = check_trusted(dir, err);
  if (status == FLOWGEN_OK) status = make_dirs(dir, err);
  if (status == FLOWGEN_OK && !trust_any) status = check_trusted(dir, err);
  if (status != FLOWGEN_OK) return status;
  struct stat info;
  if (stat(dir, &info) != 0)
    return io_error(err, "cannot use cache folder", dir);
  if (!S_ISDIR(info.st_mode))
    return fg_fail(err, FLOWGEN_IO, "cache folder %s is not a directory", dir);
  /* Create a file, as put will: access() answers for the real user, not
   * the effective one. */
  char temp[PATH_MAX];
  int fd;
  status = create_temp(dir, temp, sizeof temp, &fd, err);
  if (status != FLOWGEN_OK) return status;
  close(fd);
  unlink(temp);
  return FLOWGEN_OK;
}

bool fg_cache_setup(const char *dir, int enabled, bool trust_any, char *buf,
                    size_t size, flowrt_warn_fn warn, void *warn_ctx) {
  if (enabled < 0) enabled = fg_cache_enabled_from_env();
  if (!enabled) return false;
  flowgen_error e;
  trust_any = trust_any || fg_cache_trust_any_from_env();
  if (fg_cache_resolve_dir(dir, buf, size, &e) == FLOWGEN_OK &&
      fg_cache_open(buf, trust_any, &e) == FLOWGEN_OK)
    return true;
  if (warn) {
    char line[FLOWGEN_ERROR_MESSAGE_MAX + 64];
    snprintf(line, sizeof line,
             "module cache disabled, compiled modules stay in memory: %s",
             e.message);
    warn(warn_ctx, line);
  }
  return false;
}

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
static ssize_t read_fully(int fd, void *buf, size_t size) {
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
static const char *not_regular(mode_t mode) {
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
 * between (read_entry checks the opened file again).  *fd is -1 when the
 * entry is missing, or when *problem says why it is no entry. */
static flowgen_status open_entry(const char *path, int *fd,
                                 const char **problem, flowgen_error *err) {
  *fd = -1;
  *problem = NULL;
  struct stat info;
  if (lstat(path, &info) != 0)
    return errno == ENOENT ? FLOWGEN_OK : io_error(err, "cannot open", path);
  if (!S_ISREG(info.st_mode)) {
    *problem = not_regular(info.st_mode);
    return FLOWGEN_OK;
  }
  *fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (*fd >= 0 || errno == ENOENT) return FLOWGEN_OK;
  if (errno == ELOOP) {
    *problem = not_regular(S_IFLNK);
    return FLOWGEN_OK;
  }
  return io_error(err, "cannot open", path);
}

typedef struct entry {
  char *key;             /* NUL-terminated; NULL if not read */
  void *payload;         /* NULL unless asked for and valid */
  uint64_t payload_size; /* from the header; 0 if not read */
} entry;

static void entry_free(entry *e) {
  free(e->key);
  free(e->payload);
}

static flowgen_status read_key(int fd, const char *path, size_t key_size,
                               entry *e, const char **problem,
                               flowgen_error *err) {
  e->key = malloc(key_size + 1);
  if (!e->key) return fg_fail(err, FLOWGEN_NOMEM, "reading %s", path);
  ssize_t got = read_fully(fd, e->key, key_size);
  if (got < 0) return io_error(err, "cannot read", path);
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
    ssize_t got = read_fully(fd, dst, want);
    if (got < 0) return io_error(err, "cannot read", path);
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
static flowgen_status read_entry(int fd, const char *path,
                                 const char *expected_key, bool want_payload,
                                 entry *e, const char **problem,
                                 flowgen_error *err) {
  *e = (entry){0};
  *problem = NULL;
  struct stat info;
  if (fstat(fd, &info) != 0) return io_error(err, "cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    *problem = not_regular(info.st_mode);
    return FLOWGEN_OK;
  }
  unsigned char raw[FG_CACHE_HEADER_SIZE];
  ssize_t got = read_fully(fd, raw, sizeof raw);
  if (got < 0) return io_error(err, "cannot read", path);
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
  flowgen_status status = check_dir(dir, err);
  if (status == FLOWGEN_OK) status = check_key(key, err);
  if (status == FLOWGEN_OK)
    status = entry_path(dir, key, path, sizeof path, err);
  if (status != FLOWGEN_OK) return status;
  int fd;
  const char *problem;
  status = open_entry(path, &fd, &problem, err);
  if (status == FLOWGEN_OK && fd < 0 && !problem) {
    fg_error_clear(err);
    return FLOWGEN_OK;
  }
  if (status != FLOWGEN_OK) return status;
  entry e = {0};
  if (fd >= 0) {
    status = read_entry(fd, path, key, true, &e, &problem, err);
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
  entry_free(&e);
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
      written ? FLOWGEN_OK : io_error(err, "cannot write", temp);
  if (close(fd) != 0 && status == FLOWGEN_OK)
    status = io_error(err, "cannot write", temp);
  return status;
}

static flowgen_status check_put(const char *dir, const char *key,
                                const void *payload, size_t size,
                                flowgen_error *err) {
  flowgen_status status = check_dir(dir, err);
  if (status == FLOWGEN_OK) status = check_key(key, err);
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
    status = entry_path(dir, key, path, sizeof path, err);
  /* A rename would unlink a FIFO, device or socket that someone put at
   * the entry's path: leave it (rename itself fails on a folder, and
   * replaces a link, not what it points to). */
  struct stat info;
  if (status == FLOWGEN_OK && lstat(path, &info) == 0 &&
      !S_ISREG(info.st_mode) && !S_ISLNK(info.st_mode) &&
      !S_ISDIR(info.st_mode))
    status = fg_fail(err, FLOWGEN_IO, "cannot store %s: %s, left as it is",
                     path, not_regular(info.st_mode));
  if (status == FLOWGEN_OK)
    status = create_temp(dir, temp, sizeof temp, &fd, err);
  if (status != FLOWGEN_OK) return status;
  status = write_entry(fd, temp, key, payload, size, err);
  if (status == FLOWGEN_OK && rename(temp, path) != 0)
    status = fg_fail(err, FLOWGEN_IO, "cannot rename %s to %s: %s", temp, path,
                     strerror(errno));
  if (status != FLOWGEN_OK) unlink(temp);
  return status;
}

/* ---- listing and clearing ----------------------------------------------- */

typedef struct name_list {
  char **names;
  size_t count, capacity;
} name_list;

static void name_list_free(name_list *list) {
  for (size_t i = 0; i < list->count; ++i) free(list->names[i]);
  free(list->names);
}

static bool name_list_push(name_list *list, const char *name) {
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? 2 * list->capacity : 16;
    char **grown = realloc(list->names, capacity * sizeof *grown);
    if (!grown) return false;
    list->names = grown;
    list->capacity = capacity;
  }
  char *copy = strdup(name);
  if (!copy) return false;
  list->names[list->count++] = copy;
  return true;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_entry_name(const char *name) {
  size_t length = strlen(name), suffix = strlen(FG_CACHE_SUFFIX);
  return length > suffix &&
         strcmp(name + length - suffix, FG_CACHE_SUFFIX) == 0;
}

/* As mkstemp names them: the prefix and six characters. */
static bool is_temp_name(const char *name) {
  size_t prefix = strlen(FG_CACHE_TEMP_PREFIX);
  return strncmp(name, FG_CACHE_TEMP_PREFIX, prefix) == 0 &&
         strlen(name) == prefix + 6;
}

static bool is_cache_file_name(const char *name) {
  return is_entry_name(name) || is_temp_name(name);
}

/* The sorted names in dir that keep accepts, files of any type; a missing
 * folder has none. */
static flowgen_status list_files(const char *dir, bool (*keep)(const char *),
                                 name_list *out, flowgen_error *err) {
  *out = (name_list){0};
  DIR *d = opendir(dir);
  if (!d && errno == ENOENT) return FLOWGEN_OK;
  if (!d) return io_error(err, "cannot list", dir);
  flowgen_status status = FLOWGEN_OK;
  struct dirent *item;
  while (errno = 0, (item = readdir(d)) != NULL) {
    if (!keep(item->d_name)) continue;
    if (!name_list_push(out, item->d_name)) {
      status = fg_fail(err, FLOWGEN_NOMEM, "listing %s", dir);
      break;
    }
  }
  if (status == FLOWGEN_OK && errno != 0)
    status = io_error(err, "cannot list", dir);
  closedir(d);
  if (status != FLOWGEN_OK) name_list_free(out);
  else if (out->count > 1)
    qsort(out->names, out->count, sizeof *out->names, compare_names);
  return status;
}

/* An entry that cannot be opened or read is listed as invalid; running out
 * of memory reading it ends the listing. */
static flowgen_status visit_entry(const char *dir, const char *name,
                                  flowrt_cache_visit_fn visit, void *ctx,
                                  flowgen_error *err) {
  char path[PATH_MAX];
  if (join_path(path, sizeof path, dir, name, NULL) != FLOWGEN_OK) return FLOWGEN_OK;
  int fd;
  const char *problem;
  flowgen_error read_err;
  entry e = {0};
  flowgen_status status = open_entry(path, &fd, &problem, &read_err);
  if (status == FLOWGEN_OK && fd < 0 && !problem)
    return FLOWGEN_OK; /* removed since it was listed */
  if (fd >= 0) {
    status = read_entry(fd, path, NULL, false, &e, &problem, &read_err);
    close(fd);
  }
  if (status == FLOWGEN_NOMEM) {
    entry_free(&e);
    return fg_fail(err, FLOWGEN_NOMEM, "%s", read_err.message);
  }
  if (status != FLOWGEN_OK) problem = "cannot be read";
  char expected_name[FG_CACHE_FILE_NAME_SIZE] = "";
  if (!problem) fg_cache_file_name(e.key, expected_name);
  if (!problem && strcmp(name, expected_name) != 0)
    problem = "the file name does not match its key";
  flowrt_cache_entry listed = {
      .file = name,
      .key = e.key ? e.key : "",
      .payload_size = e.payload_size,
      .valid = !problem,
      .problem = problem,
  };
  visit(ctx, &listed);
  entry_free(&e);
  return FLOWGEN_OK;
}

/* The folder list and clear work on: dir or the one in effect, refused
 * when untrusted (see fg_cache_open). */
static flowgen_status resolve_trusted(const char *dir, char *buf, size_t size,
                                      flowgen_error *err) {
  flowgen_status status = fg_cache_resolve_dir(dir, buf, size, err);
  if (status == FLOWGEN_OK && !fg_cache_trust_any_from_env())
    status = check_trusted(buf, err);
  return status;
}

flowgen_status flowrt_cache_list(const char *dir, flowrt_cache_visit_fn visit,
                                 void *ctx, flowgen_error *err) {
  if (!visit)
    return fg_fail(err, FLOWGEN_INVALID, "flowrt_cache_list: no visitor");
  char folder[PATH_MAX];
  name_list names;
  flowgen_status status = resolve_trusted(dir, folder, sizeof folder, err);
  if (status == FLOWGEN_OK)
    status = list_files(folder, is_entry_name, &names, err);
  if (status != FLOWGEN_OK) return status;
  for (size_t i = 0; i < names.count && status == FLOWGEN_OK; ++i)
    status = visit_entry(folder, names.names[i], visit, ctx, err);
  name_list_free(&names);
  return status;
}

/* Whether the file at path is ours to remove: a regular file that begins
 * with the entry magic (read as an entry is), or a temporary file of a put
 * that is old enough to have been abandoned. */
static bool is_removable(const char *path, const char *name, time_t now) {
  struct stat info;
  if (is_temp_name(name))
    return lstat(path, &info) == 0 && S_ISREG(info.st_mode) &&
           now - info.st_mtime >= FG_CACHE_TEMP_STALE_SECONDS;
  int fd;
  const char *problem;
  if (open_entry(path, &fd, &problem, NULL) != FLOWGEN_OK || fd < 0)
    return false;
  unsigned char magic[8];
  bool ours = fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
              read_fully(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
              memcmp(magic, FG_CACHE_MAGIC, sizeof magic) == 0;
  close(fd);
  return ours;
}

static flowgen_status remove_cache_file(const char *dir, const char *name,
                                        time_t now, size_t *removed,
                                        flowgen_error *err) {
  char path[PATH_MAX];
  flowgen_status status = join_path(path, sizeof path, dir, name, err);
  if (status != FLOWGEN_OK || !is_removable(path, name, now)) return status;
  if (unlink(path) != 0)
    return errno == ENOENT ? FLOWGEN_OK : io_error(err, "cannot remove", path);
  ++*removed;
  return FLOWGEN_OK;
}

flowgen_status flowrt_cache_clear(const char *dir, size_t *removed,
                                  flowgen_error *err) {
  size_t count = 0;
  char folder[PATH_MAX];
  name_list names;
  flowgen_status status = resolve_trusted(dir, folder, sizeof folder, err);
  if (status == FLOWGEN_OK)
    status = list_files(folder, is_cache_file_name, &names, err);
  if (status == FLOWGEN_OK) {
    time_t now = time(NULL);
    for (size_t i = 0; i < names.count && status == FLOWGEN_OK; ++i)
      status = remove_cache_file(folder, names.names[i], now, &count, err);
    name_list_free(&names);
  }
  if (removed) *removed = count;
  return status;
}
