/* Listing and clearing the module cache's folder. */
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
  if (!d) return fg_cache_io_error(err, "cannot list", dir);
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
    status = fg_cache_io_error(err, "cannot list", dir);
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
  if (fg_cache_join_path(path, sizeof path, dir, name, NULL) != FLOWGEN_OK) return FLOWGEN_OK;
  int fd;
  const char *problem;
  flowgen_error read_err;
  fg_cache_entry e = {0};
  flowgen_status status = fg_cache_open_entry(path, &fd, &problem, &read_err);
  if (status == FLOWGEN_OK && fd < 0 && !problem)
    return FLOWGEN_OK; /* removed since it was listed */
  if (fd >= 0) {
    status = fg_cache_read_entry(fd, path, NULL, false, &e, &problem, &read_err);
    close(fd);
  }
  if (status == FLOWGEN_NOMEM) {
    fg_cache_entry_free(&e);
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
  fg_cache_entry_free(&e);
  return FLOWGEN_OK;
}

/* The folder list and clear work on: dir or the one in effect, refused
 * when untrusted (see fg_cache_open). */
static flowgen_status resolve_trusted(const char *dir, char *buf, size_t size,
                                      flowgen_error *err) {
  flowgen_status status = fg_cache_resolve_dir(dir, buf, size, err);
  if (status == FLOWGEN_OK && !fg_cache_trust_any_from_env())
    status = fg_cache_check_trusted(buf, err);
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
  if (fg_cache_open_entry(path, &fd, &problem, NULL) != FLOWGEN_OK || fd < 0)
    return false;
  unsigned char magic[8];
  bool ours = fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
              fg_cache_read_fully(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
                                  memcmp(magic, FG_CACHE_MAGIC, sizeof magic) == 0;
  close(fd);
  return ours;
}

static flowgen_status remove_cache_file(const char *dir, const char *name,
                                        time_t now, size_t *removed,
                                        flowgen_error *err) {
  char path[PATH_MAX];
  flowgen_status status = fg_cache_join_path(path, sizeof path, dir, name, err);
  if (status != FLOWGEN_OK || !is_removable(path, name, now)) return status;
  if (unlink(path) != 0)
    return errno == ENOENT ? FLOWGEN_OK : fg_cache_io_error(err, "cannot remove", path);
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
