/* Where the module cache lives and whether its folder can be trusted
 * (disk_cache.h says why). */
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

/* Reads errno: call it before anything else can change errno. */
flowgen_status fg_cache_io_error(flowgen_error *err, const char *what,
                                 const char *path) {
  return fg_fail(err, FLOWGEN_IO, "%s %s: %s", what, path, strerror(errno));
}

flowgen_status fg_cache_join_path(char *buf, size_t size, const char *dir,
                                  const char *name, flowgen_error *err) {
  int n = snprintf(buf, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size)
    return fg_fail(err, FLOWGEN_INVALID, "path too long: %s/%s", dir, name);
  return FLOWGEN_OK;
}

flowgen_status fg_cache_copy_path(char *buf, size_t size, const char *path,
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
  if (dir) return fg_cache_copy_path(buf, size, dir, err);
  /* The XDG base directory spec says to ignore a relative path. */
  const char *xdg = env_nonempty("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return fg_cache_join_path(buf, size, xdg, "flowgen", err);
  const char *home = env_nonempty("HOME");
  if (home) return fg_cache_join_path(buf, size, home, ".cache/flowgen", err);
  return fg_fail(err, FLOWGEN_IO, "no cache folder: set FLOWGEN_CACHE_DIR, "
                 "XDG_CACHE_HOME or HOME");
}

flowgen_status fg_cache_resolve_dir(const char *dir, char *buf, size_t size,
                                    flowgen_error *err) {
  if (!dir) return flowrt_cache_dir(buf, size, err);
  if (!*dir) return fg_fail(err, FLOWGEN_INVALID, "empty cache folder path");
  return fg_cache_copy_path(buf, size, dir, err);
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

flowgen_status fg_cache_entry_path(const char *dir, const char *key, char *buf,
                                   size_t size, flowgen_error *err) {
  char name[FG_CACHE_FILE_NAME_SIZE];
  fg_cache_file_name(key, name);
  return fg_cache_join_path(buf, size, dir, name, err);
}

/* mkdir -p with mode 0700 for every folder it creates. */
flowgen_status fg_cache_make_dirs(const char *dir, flowgen_error *err) {
  char path[PATH_MAX];
  flowgen_status status = fg_cache_copy_path(path, sizeof path, dir, err);
  if (status != FLOWGEN_OK) return status;
  for (char *p = path + 1;; ++p) {
    if (*p != '/' && *p != '\0') continue;
    char separator = *p;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      return fg_cache_io_error(err, "cannot create cache folder", path);
    *p = separator;
    if (separator == '\0') return FLOWGEN_OK;
  }
}

/* Creates an empty temporary file in dir (and dir itself if missing). */
flowgen_status fg_cache_create_temp(const char *dir, char *temp, size_t size,
                                    int *fd, flowgen_error *err) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    flowgen_status status =
        fg_cache_join_path(temp, size, dir, FG_CACHE_TEMP_PREFIX "XXXXXX", err);
    if (status != FLOWGEN_OK) return status;
    *fd = mkstemp(temp);
    if (*fd >= 0) return FLOWGEN_OK;
    if (errno != ENOENT || attempt > 0) break;
    status = fg_cache_make_dirs(dir, err);
    if (status != FLOWGEN_OK) return status;
  }
  return fg_cache_io_error(err, "cannot create a file in cache folder", dir);
}

flowgen_status fg_cache_check_dir(const char *dir, flowgen_error *err) {
  if (!dir || !*dir)
    return fg_fail(err, FLOWGEN_INVALID, "no cache folder given");
  return FLOWGEN_OK;
}

flowgen_status fg_cache_check_key(const char *key, flowgen_error *err) {
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
  flowgen_status status = fg_cache_copy_path(prefix, sizeof prefix, path, err);
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
flowgen_status fg_cache_check_trusted(const char *dir, flowgen_error *err) {
  flowgen_status status = check_walk(dir, dir, true, err);
  char existing[PATH_MAX];
  if (status == FLOWGEN_OK)
    status = fg_cache_copy_path(existing, sizeof existing, dir, err);
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
  flowgen_status status = fg_cache_check_dir(dir, err);
  /* Checked before anything is made in a folder we do not trust, and again
   * after: a folder someone else made in between is theirs. */
  if (status == FLOWGEN_OK && !trust_any) status = fg_cache_check_trusted(dir, err);
  if (status == FLOWGEN_OK) status = fg_cache_make_dirs(dir, err);
  if (status == FLOWGEN_OK && !trust_any) status = fg_cache_check_trusted(dir, err);
  if (status != FLOWGEN_OK) return status;
  struct stat info;
  if (stat(dir, &info) != 0)
    return fg_cache_io_error(err, "cannot use cache folder", dir);
  if (!S_ISDIR(info.st_mode))
    return fg_fail(err, FLOWGEN_IO, "cache folder %s is not a directory", dir);
  /* Create a file, as put will: access() answers for the real user, not
   * the effective one. */
  char temp[PATH_MAX];
  int fd;
  status = fg_cache_create_temp(dir, temp, sizeof temp, &fd, err);
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
