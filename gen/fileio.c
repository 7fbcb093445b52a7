/* Reading a whole file, and writing an output file so that it either appears
 * whole or not at all. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

flowgen_status fg_read_file(const char *path, unsigned char **data, size_t *size,
                            flowgen_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fg_fail(err, FLOWGEN_IO, "%s: %s", path, strerror(errno));
  struct stat st;
  int stat_errno = fstat(fd, &st) != 0 ? errno : 0;
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

static bool write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= (size_t)n;
  }
  return true;
}

flowgen_status fg_write_file_atomic(const char *path, const void *data,
                                    size_t size, flowgen_error *err) {
  size_t len = strlen(path);
  char *tmp = malloc(len + 16);
  if (!tmp) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  snprintf(tmp, len + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    flowgen_status st = fg_fail(err, FLOWGEN_IO, "%s: cannot create: %s", path,
                                strerror(errno));
    free(tmp);
    return st;
  }
  /* mkstemp makes 0600; an output file gets the usual 0666 & ~umask. */
  mode_t mask = umask(0);
  umask(mask);
  bool ok = fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, data, size) &&
            fsync(fd) == 0;
  int saved = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    unlink(tmp);
    free(tmp);
    return fg_fail(err, FLOWGEN_IO, "%s: cannot write: %s", path,
                   strerror(saved));
  }
  free(tmp);
  return FLOWGEN_OK;
}
