/* Reading a whole file, and writing output files so that they appear whole
 * or not at all: alone, or as a set (all of them or none). */
#define _GNU_SOURCE /* O_TMPFILE, AT_EMPTY_PATH */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

fg_output_knobs fg_output_test_knobs = {FG_OUTPUT_STALE_SECONDS, false};

flowgen_status fg_read_file(const char *path, unsigned char **data, size_t *size,
                            flowgen_error *err) {
  /* O_NONBLOCK: opening a FIFO would wait for a writer; the file is
   * refused below unless regular, then read blocking. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(errno));
  struct stat st;
  int stat_errno = fstat(fd, &st) != 0 ? errno : 0;
  if (!stat_errno && S_ISREG(st.st_mode) &&
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    stat_errno = errno;
  if (stat_errno || !S_ISREG(st.st_mode)) {
    close(fd);
    return fg_fail(err, FLOWGEN_IO, "%s: %s", path,
                   stat_errno ? strerror(stat_errno)
                   : S_ISDIR(st.st_mode) ? strerror(EISDIR)
                                         : "not a regular file");
  }
  size_t want = (size_t)st.st_size, got = 0;
  unsigned char *buf = malloc(want ? want : 1);
  if (!buf) {
    close(fd);
    return fg_fail(err, FLOWGEN_NOMEM, "%s: out of memory for %zu bytes", path, want);
  }
  while (got < want) {
    ssize_t n = read(fd, buf + got, want - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;  /* EIO: the file shrank while read */
      free(buf);
      close(fd);
      return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(e));
    }
    got += (size_t)n;
  }
  close(fd);
  *data = buf;
  *size = want;
  return FLOWGEN_OK;
}

/* ---- writing: the targets ----------------------------------------------- */

typedef enum {
  TARGET_NEW,      /* nothing there yet: a regular file is created */
  TARGET_REPLACE,  /* a regular file, replaced by a rename */
  TARGET_DIRECT,   /* a device, a FIFO, /dev/stdout: written in place */
} target_kind;

typedef struct target {
  const fg_output_file *file;
  target_kind kind;
  char *path;     /* links followed (regular), or as given (direct) */
  char *dir;      /* path's folder, where the temporaries go (regular) */
  struct stat st; /* what path named when planned (replace, direct) */
  int fd;         /* the temporary (regular) or the target (direct); -1 */
  bool unnamed;   /* the temporary is an O_TMPFILE file, not yet linked */
  char *temp;     /* the temporary's name, once it has one */
  char *backup;   /* a link to the replaced file until all are in place */
  bool existed;   /* something was at path when the rename came */
  bool renamed;
} target;

static bool write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    size -= (size_t)n;
  }
  return true;
}

/* malloc()ed "dir/name"; dir "" means the current folder. */
static char *join(const char *dir, size_t dir_len, const char *name) {
  size_t name_len = strlen(name);
  char *out = malloc(dir_len + name_len + 2);
  if (!out) return NULL;
  memcpy(out, dir, dir_len);
  size_t at = dir_len;
  if (dir_len && dir[dir_len - 1] != '/') out[at++] = '/';
  memcpy(out + at, name, name_len + 1);
  return out;
}

/* The length of path's folder part, with its final '/' ("" for a bare
 * name, "/" for a file at the root). */
static size_t folder_length(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? (size_t)(slash - path) + 1 : 0;
}

/* Follows the symbolic links that path's last component goes through, so
 * that a link to a file has the file replaced, not the link (a dangling
 * link has its target created).  *out is malloc()ed. */
static flowgen_status follow_links(const char *path, char **out, flowgen_error *err) {
  char *p = strdup(path);
  if (!p) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  for (int hops = 0;; ++hops) {
    struct stat st;
    if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) break;
    char link[PATH_MAX];
    ssize_t n = hops < 40 ? readlink(p, link, sizeof link - 1) : -1;
    if (n < 0) {
      free(p);
      return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(hops < 40 ? errno : ELOOP));
    }
    link[n] = '\0';
    char *next = link[0] == '/' ? strdup(link) : join(p, folder_length(p), link);
    free(p);
    if (!next) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    p = next;
  }
  *out = p;
  return FLOWGEN_OK;
}

/* Whether st is our standard output's file: `-o /dev/stdout > log` (or
 * `>> log`) writes through our descriptor, never replaces log. */
static bool is_stdout(const struct stat *st) {
  struct stat out;
  return fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st->st_dev &&
         out.st_ino == st->st_ino;
}

/* What path is and how it will be written.  Nothing is created yet. */
static flowgen_status plan(target *t, flowgen_error *err) {
  const char *path = t->file->path;
  if (stat(path, &t->st) != 0) {
    if (errno != ENOENT) return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(errno));
    t->kind = TARGET_NEW;
  } else if (S_ISDIR(t->st.st_mode)) {
    return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(EISDIR));
  } else if (!S_ISREG(t->st.st_mode) || is_stdout(&t->st)) {
    t->kind = TARGET_DIRECT;
  } else {
    t->kind = TARGET_REPLACE;
  }
  if (t->kind != TARGET_DIRECT) {
    flowgen_status s = follow_links(path, &t->path, err);
    if (s) return s;
    struct stat at;
    /* A regular file that the links do not lead to by name (/dev/stdout
     * redirected to a file, a deleted file under /proc/self/fd) is
     * written in place too. */
    if (t->kind == TARGET_REPLACE &&
        (lstat(t->path, &at) != 0 || at.st_dev != t->st.st_dev || at.st_ino != t->st.st_ino)) {
      free(t->path);
      t->path = NULL;
      t->kind = TARGET_DIRECT;
    }
  }
  if (t->kind == TARGET_DIRECT) {
    t->path = strdup(path);
    return t->path ? FLOWGEN_OK : fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  }
  /* rename() needs only the folder's permission: a file the user may not
   * write is refused here, and a file without any write permission bit is
   * refused even to root, who may write anything. */
  if (t->kind == TARGET_REPLACE) {
    if ((t->st.st_mode & 0222) == 0)
      return fg_fail(err, FLOWGEN_IO, "%s: %s (a read-only file is not replaced)", path,
                     strerror(EACCES));
    if (access(t->path, W_OK) != 0)
      return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(errno));
  }
  size_t len = folder_length(t->path);
  t->dir = len ? strndup(t->path, len) : strdup(".");
  return t->dir ? FLOWGEN_OK : fg_fail(err, FLOWGEN_NOMEM, "out of memory");
}

/* ---- writing: temporaries ------------------------------------------------ */

/* ".flowgen-" + 12 letters or digits + ".tmp": short, so that a temporary
 * fits next to a file whose name is as long as a name can be. */
#define TEMP_PREFIX ".flowgen-"
#define TEMP_RANDOM 12
#define TEMP_SUFFIX ".tmp"

static bool is_temp_name(const char *name) {
  size_t prefix = sizeof TEMP_PREFIX - 1;
  if (strlen(name) != prefix + TEMP_RANDOM + sizeof TEMP_SUFFIX - 1 ||
      strncmp(name, TEMP_PREFIX, prefix) != 0 ||
      strcmp(name + prefix + TEMP_RANDOM, TEMP_SUFFIX) != 0)
    return false;
  for (size_t i = prefix; i < prefix + TEMP_RANDOM; ++i)
    if (!strchr("abcdefghijklmnopqrstuvwxyz234567", name[i])) return false;
  return true;
}

/* A fresh temporary name in dir (malloc()ed).  The names need only differ:
 * creating or linking never goes through a name that exists. */
static char *temp_name(const char *dir) {
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t z = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)ts.tv_sec << 30) ^ (++counter * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  char name[sizeof TEMP_PREFIX + TEMP_RANDOM + sizeof TEMP_SUFFIX];
  memcpy(name, TEMP_PREFIX, sizeof TEMP_PREFIX - 1);
  for (int i = 0; i < TEMP_RANDOM; ++i, z >>= 5)
    name[sizeof TEMP_PREFIX - 1 + i] = "abcdefghijklmnopqrstuvwxyz234567"[z & 31];
  memcpy(name + sizeof TEMP_PREFIX - 1 + TEMP_RANDOM, TEMP_SUFFIX, sizeof TEMP_SUFFIX);
  return join(dir, strlen(dir), name);
}

/* Removes the temporaries in dir that a killed run left: a writer holds a
 * lock on its temporary for as long as it lives, and a name that nobody
 * holds and that has not changed for stale_seconds is an orphan.  (A
 * writer locks its temporary a moment after creating it, and a backup link
 * is not locked: both are younger than that.) */
static void remove_orphans(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  /* ctime may be finer-grained than time(): a file stamped this second can
   * look a moment younger than zero, so a limit of 0 means any age. */
  int stale = fg_output_test_knobs.stale_seconds;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_temp_name(e->d_name)) continue;
    int fd = openat(dirfd(d), e->d_name,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st, again;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (stale <= 0 || now - st.st_ctime >= stale) &&
        flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        fstatat(dirfd(d), e->d_name, &again, AT_SYMLINK_NOFOLLOW) == 0 &&
        again.st_dev == st.st_dev && again.st_ino == st.st_ino)
      unlinkat(dirfd(d), e->d_name, 0);
    close(fd);
  }
  closedir(d);
}

/* A named temporary in t->dir, created (never opened if it exists) and
 * locked. */
static int create_named(target *t, mode_t mode) {
  for (int tries = 0; tries < 100; ++tries) {
    char *name = temp_name(t->dir);
    if (!name) {
      errno = ENOMEM;
      return -1;
    }
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
      flock(fd, LOCK_EX | LOCK_NB);
      t->temp = name;
      return fd;
    }
    int e = errno;
    free(name);
    if (e != EEXIST) {
      errno = e;
      return -1;
    }
  }
  errno = EEXIST;
  return -1;
}

/* Writes t's data into a new temporary next to its target, fsync()ed.
 * Unnamed (O_TMPFILE) where the filesystem allows, so that a run killed
 * now leaves nothing; named and locked otherwise. */
static flowgen_status stage(target *t, bool named, flowgen_error *err) {
  /* New files get 0666 & ~umask (the kernel applies it); a replaced one
   * keeps its permissions. */
  mode_t mode = t->kind == TARGET_REPLACE ? t->st.st_mode & 0777 : 0666;
  int fd = -1;
#ifdef O_TMPFILE
  if (!named && !fg_output_test_knobs.no_tmpfile) {
    fd = open(t->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    /* EISDIR, EOPNOTSUPP: the kernel or the filesystem has no O_TMPFILE */
    if (fd < 0 && errno != EISDIR && errno != EOPNOTSUPP && errno != EINVAL)
      return fg_fail(err, FLOWGEN_IO, "%s: cannot create: %s", t->file->path,
                     strerror(errno));
    if (fd >= 0) {
      flock(fd, LOCK_EX | LOCK_NB);
      t->unnamed = true;
    }
  }
#endif
  if (fd < 0 && (fd = create_named(t, mode)) < 0)
    return fg_fail(err, errno == ENOMEM ? FLOWGEN_NOMEM : FLOWGEN_IO,
                   "%s: cannot create: %s", t->file->path, strerror(errno));
  t->fd = fd;
  bool ok = (t->kind != TARGET_REPLACE || fchmod(fd, mode) == 0) &&
            write_all(fd, t->file->data, t->file->size) && fsync(fd) == 0;
  if (!ok)
    return fg_fail(err, FLOWGEN_IO, "%s: cannot write: %s", t->file->path, strerror(errno));
  return FLOWGEN_OK;
}

/* Gives an unnamed temporary a name in its folder.  Where neither way of
 * linking it works (no /proc, no privilege), the data is written again
 * into a named temporary. */
static flowgen_status link_temp(target *t, flowgen_error *err) {
#ifdef O_TMPFILE
  for (int tries = 0; t->unnamed && tries < 100; ++tries) {
    char *name = temp_name(t->dir);
    if (!name) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", t->fd);
    if (linkat(t->fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0 ||
        (errno != EEXIST &&
         linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)) {
      t->temp = name;
      t->unnamed = false;
      return FLOWGEN_OK;
    }
    int e = errno;
    free(name);
    if (e == EEXIST) continue;
    close(t->fd);
    t->fd = -1;
    t->unnamed = false;
    return stage(t, true, err);
  }
#endif
  return t->unnamed ? fg_fail(err, FLOWGEN_IO, "%s: cannot create: %s", t->file->path,
                              strerror(EEXIST))
                    : FLOWGEN_OK;
}

/* ---- writing: targets written in place ------------------------------------ */

/* Opens a target that is not replaced.  Never created, never truncated
 * unless it is a regular file.  Our own standard output is written through
 * our descriptor (its offset and O_APPEND kept).  A FIFO gets a short wait
 * for a reader, then an error, rather than a hang. */
static flowgen_status open_direct(target *t, flowgen_error *err) {
  if (is_stdout(&t->st)) {
    fflush(stdout);
    t->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    if (t->fd < 0)
      return fg_fail(err, FLOWGEN_IO, "%s: cannot open: %s", t->path, strerror(errno));
    return FLOWGEN_OK;
  }
  int flags = O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC |
              (S_ISREG(t->st.st_mode) ? O_TRUNC : 0);
  for (int waited_ms = 0;; waited_ms += 10) {
    t->fd = open(t->path, flags);
    if (t->fd >= 0 || errno != ENXIO || !S_ISFIFO(t->st.st_mode)) break;
    if (waited_ms >= FG_OUTPUT_FIFO_WAIT_MS)
      return fg_fail(err, FLOWGEN_IO, "%s: a FIFO with no reader (waited %d s)", t->path,
                     FG_OUTPUT_FIFO_WAIT_MS / 1000);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  if (t->fd < 0)
    return fg_fail(err, FLOWGEN_IO, "%s: cannot open: %s", t->path, strerror(errno));
  int fl = fcntl(t->fd, F_GETFL);
  if (fl < 0 || fcntl(t->fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
    return fg_fail(err, FLOWGEN_IO, "%s: %s", t->path, strerror(errno));
  return FLOWGEN_OK;
}

/* ---- writing: the commit ------------------------------------------------ */

/* Moves t's temporary onto its target.  Where more follow (keep_old), a
 * link to the file replaced is kept so that it can be put back. */
static flowgen_status put_in_place(target *t, bool keep_old, flowgen_error *err) {
  flowgen_status s = link_temp(t, err);
  if (s) return s;
  struct stat now;
  t->existed = lstat(t->path, &now) == 0;
  if (t->existed && !S_ISREG(now.st_mode))
    return fg_fail(err, FLOWGEN_IO, "%s: no longer a regular file", t->file->path);
  for (int tries = 0; keep_old && t->existed && tries < 100; ++tries) {
    char *name = temp_name(t->dir);
    if (!name) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    if (link(t->path, name) == 0) {
      t->backup = name;
      break;
    }
    int e = errno;
    free(name);
    /* No hard links here: the old file cannot be put back if a later
     * rename fails (each target was checked writable before). */
    if (e != EEXIST) break;
  }
  if (rename(t->temp, t->path) != 0)
    return fg_fail(err, FLOWGEN_IO, "%s: cannot write: %s", t->file->path, strerror(errno));
  free(t->temp);
  t->temp = NULL;
  t->renamed = true;
  return FLOWGEN_OK;
}

/* Puts back what the renames done so far replaced. */
static void roll_back(target *targets, size_t count) {
  for (size_t i = count; i-- > 0;) {
    target *t = &targets[i];
    if (!t->renamed) continue;
    if (t->backup) {
      if (rename(t->backup, t->path) == 0) {
        free(t->backup);
        t->backup = NULL;
      }
    } else if (!t->existed) {
      unlink(t->path);
    }
  }
}

static void release(target *t) {
  if (t->fd >= 0) close(t->fd);
  if (t->temp) unlink(t->temp);
  if (t->backup) unlink(t->backup);
  free(t->temp);
  free(t->backup);
  free(t->path);
  free(t->dir);
}

/* Two regular targets that are one file would overwrite each other. */
static flowgen_status check_distinct(const target *targets, size_t count, flowgen_error *err) {
  for (size_t i = 0; i < count; ++i)
    for (size_t j = 0; j < i; ++j) {
      const target *a = &targets[i], *b = &targets[j];
      if (a->kind == TARGET_DIRECT || b->kind == TARGET_DIRECT) continue;
      bool same = strcmp(a->path, b->path) == 0 ||
                  (a->kind == TARGET_REPLACE && b->kind == TARGET_REPLACE &&
                   a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino);
      if (same)
        return fg_fail(err, FLOWGEN_INVALID, "%s and %s are the same file", b->file->path,
                       a->file->path);
    }
  return FLOWGEN_OK;
}

flowgen_status fg_write_files(const fg_output_file *files, size_t count,
                              flowgen_error *err) {
  target *targets = calloc(count ? count : 1, sizeof *targets);
  if (!targets) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  for (size_t i = 0; i < count; ++i) {
    targets[i].file = &files[i];
    targets[i].fd = -1;
  }
  flowgen_status s = FLOWGEN_OK;
  /* Everything that can be checked is checked before anything is written. */
  for (size_t i = 0; i < count && !s; ++i) s = plan(&targets[i], err);
  if (!s) s = check_distinct(targets, count, err);
  for (size_t i = 0; i < count && !s; ++i)
    if (targets[i].kind != TARGET_DIRECT) remove_orphans(targets[i].dir);
  /* The regular files are staged whole; then what cannot be taken back (a
   * device, a FIFO) is written; the renames come last. */
  for (size_t i = 0; i < count && !s; ++i)
    if (targets[i].kind != TARGET_DIRECT) s = stage(&targets[i], false, err);
  for (size_t i = 0; i < count && !s; ++i)
    if (targets[i].kind == TARGET_DIRECT) s = open_direct(&targets[i], err);
  for (size_t i = 0; i < count && !s; ++i) {
    target *t = &targets[i];
    if (t->kind != TARGET_DIRECT) continue;
    bool ok = write_all(t->fd, t->file->data, t->file->size);
    int e = errno;
    if (close(t->fd) != 0 && ok) {
      ok = false;
      e = errno;
    }
    t->fd = -1;
    if (!ok) s = fg_fail(err, FLOWGEN_IO, "%s: cannot write: %s", t->path, strerror(e));
  }
  size_t last = count;
  for (size_t i = 0; i < count; ++i)
    if (targets[i].kind != TARGET_DIRECT) last = i;
  for (size_t i = 0; i < count && !s; ++i)
    if (targets[i].kind != TARGET_DIRECT) s = put_in_place(&targets[i], i != last, err);
  if (s) roll_back(targets, count);
  for (size_t i = 0; i < count; ++i) release(&targets[i]);
  free(targets);
  return s;
}

flowgen_status fg_write_file_atomic(const char *path, const void *data,
                                    size_t size, flowgen_error *err) {
  fg_output_file file = {path, data, size};
  return fg_write_files(&file, 1, err);
}
