/* Output files: the set writer (fg_write_files) and the CLI's outputs.
 * Targets that are not regular files are written in place, never replaced;
 * links keep pointing where they did; a read-only file is refused; a set is
 * written whole or not at all; a killed run leaves nothing that stays.
 * Also the picture's size cap, the --png-shape messages, and binary output
 * refused on a terminal.
 *
 * The error paths use -Wl,--wrap mocks (tests/test_output.wrap): rename,
 * linkat and fsync fail or kill the process on request.  Device nodes are
 * made in a temporary folder (mknod, root only: skipped otherwise). */
#define _GNU_SOURCE /* posix_openpt, AT_EMPTY_PATH */
#include "support.h"

#include "fileio.h"
#include "npy.h"
#include "png_grid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATH_SIZE FG_TEST_PATH_SIZE
#define CMD_SIZE (4 * PATH_SIZE)

/* ---- mocks ------------------------------------------------------------------ */

int __real_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to);
int __real_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                  int flags);
int __wrap_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                  int flags);
int __real_fsync(int fd);
int __wrap_fsync(int fd);

static struct {
  int rename_calls;
  int rename_fails_at;  /* 1-based call that fails with EIO; 0 = none */
  int rename_kills_at;  /* 1-based call that gets SIGKILL instead */
  bool fsync_kills;     /* the process dies with its data written */
  int linkat_fails;     /* 1: AT_EMPTY_PATH refused (EPERM); 2: every linkat (ENOENT) */
  int linkat_calls;
} mock;

int __wrap_rename(const char *from, const char *to) {
  ++mock.rename_calls;
  if (mock.rename_calls == mock.rename_kills_at) raise(SIGKILL);
  if (mock.rename_calls == mock.rename_fails_at) {
    errno = EIO;
    return -1;
  }
  return __real_rename(from, to);
}

int __wrap_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                  int flags) {
  ++mock.linkat_calls;
  if (mock.linkat_fails == 2 || (mock.linkat_fails == 1 && (flags & AT_EMPTY_PATH))) {
    errno = mock.linkat_fails == 2 ? ENOENT : EPERM;
    return -1;
  }
  return __real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
}

int __wrap_fsync(int fd) {
  if (mock.fsync_kills) raise(SIGKILL);
  return __real_fsync(fd);
}

/* ---- helpers ---------------------------------------------------------------- */

static int setup(void **state) {
  memset(&mock, 0, sizeof mock);
  fg_output_test_knobs = (fg_output_knobs){FG_OUTPUT_STALE_SECONDS, false};
  *state = fg_test_mkdtemp();
  return 0;
}

static int teardown(void **state) {
  fg_test_rmtree(*state);
  free(*state);
  memset(&mock, 0, sizeof mock);
  fg_output_test_knobs = (fg_output_knobs){FG_OUTPUT_STALE_SECONDS, false};
  return 0;
}

static void path_in(char out[PATH_SIZE], const char *dir, const char *name) {
  fg_test_path_join(out, dir, name);
}

static void expect_content(const char *path, const char *text) {
  size_t size = 0;
  char *now = fg_test_read_file(path, &size);
  if (!now) fail_msg("%s: cannot be read", path);
  if (size != strlen(text) || memcmp(now, text, size) != 0)
    fail_msg("%s holds \"%.80s\", expected \"%.80s\"", path, now, text);
  free(now);
}

static mode_t kind_of(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

/* Names in dir other than `keep` (a NULL-terminated list); the first
 * stray name in *stray. */
static int strays(const char *dir, const char *const *keep, char stray[256]) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    bool kept = false;
    for (const char *const *k = keep; *k && !kept; ++k) kept = strcmp(*k, e->d_name) == 0;
    if (kept) continue;
    if (n++ == 0 && stray) snprintf(stray, 256, "%s", e->d_name);
  }
  closedir(d);
  return n;
}

#define EXPECT_ONLY(dir, ...)                                                    \
  do {                                                                           \
    const char *const keep_[] = {__VA_ARGS__, NULL};                             \
    char stray_[256] = "";                                                       \
    int n_ = strays(dir, keep_, stray_);                                         \
    if (n_) fail_msg("%d unexpected file(s) in the folder, e.g. %s", n_, stray_); \
  } while (0)

static void expect_error(flowgen_status got, const flowgen_error *err, flowgen_status want,
                         const char *part1, const char *part2) {
  if (got != want)
    fail_msg("status %s, expected %s: %s", flowgen_status_name(got), flowgen_status_name(want),
             err->message);
  if (part1 && !strstr(err->message, part1))
    fail_msg("expected '%s' in: %s", part1, err->message);
  if (part2 && !strstr(err->message, part2))
    fail_msg("expected '%s' in: %s", part2, err->message);
}

/* A character device made here (1,3 is null, 1,7 full); false (after a
 * message) where this process may not make one. */
static bool make_device(const char *path, unsigned minor) {
  if (mknod(path, S_IFCHR | 0666, makedev(1, minor)) != 0) {
    print_message("# mknod %s: %s (device nodes need root): skipped\n", path, strerror(errno));
    return false;
  }
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    print_message("# %s: %s (a nodev folder?): skipped\n", path, strerror(errno));
    unlink(path);
    return false;
  }
  close(fd);
  return true;
}

typedef struct cli_result {
  int code;
  char *out, *err;
} cli_result;

/* Runs `flowgen ARGS` (shell text) under timeout(1). */
static cli_result flowgen(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cli_result flowgen(const char *fmt, ...) {
  char args[CMD_SIZE], command[CMD_SIZE + PATH_SIZE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof args);
  snprintf(command, sizeof command, "timeout 120 '%s' %s", fg_test_flowgen_bin(), args);
  cli_result r = {0, NULL, NULL};
  r.code = fg_test_run(command, &r.out, &r.err);
  assert_non_null(r.out);
  assert_non_null(r.err);
  return r;
}

/* Runs a shell script in which $FLOWGEN is the binary. */
static cli_result shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cli_result shell(const char *fmt, ...) {
  char script[CMD_SIZE], command[CMD_SIZE + PATH_SIZE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(script, sizeof script, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof script);
  snprintf(command, sizeof command, "FLOWGEN='%s'; %s", fg_test_flowgen_bin(), script);
  cli_result r = {0, NULL, NULL};
  r.code = fg_test_run(command, &r.out, &r.err);
  assert_non_null(r.out);
  assert_non_null(r.err);
  return r;
}

static void cli_free(cli_result *r) {
  free(r->out);
  free(r->err);
}

/* Exit code `code`, nothing on stdout, one "flowgen: " line holding the
 * parts. */
static void expect_one_error_line(const cli_result *r, int code, const char *part1,
                                  const char *part2) {
  if (r->code != code)
    fail_msg("exit %d, expected %d; stderr: %s", r->code, code, r->err);
  const char *nl = strchr(r->err, '\n');
  if (strncmp(r->err, "flowgen: ", 9) != 0 || !nl || nl[1] != '\0')
    fail_msg("expected one line \"flowgen: ...\" on stderr, got: [%s]", r->err);
  if (part1 && !strstr(r->err, part1)) fail_msg("expected '%s' in: %s", part1, r->err);
  if (part2 && !strstr(r->err, part2)) fail_msg("expected '%s' in: %s", part2, r->err);
  if (r->out[0]) fail_msg("stdout not empty: %.100s", r->out);
}

static char *default_source(void) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = NULL;
  assert_int_equal(flowgen_generate(&spec, NULL, &k, NULL), FLOWGEN_OK);
  char *src = strdup(flowgen_kernel_source(k));
  flowgen_kernel_free(k);
  return src;
}

/* ---- the set writer: regular files --------------------------------------------- */

static void test_new_and_replaced_files(void **state) {
  const char *dir = *state;
  char a[PATH_SIZE], b[PATH_SIZE];
  path_in(a, dir, "a.txt");
  path_in(b, dir, "b.txt");
  flowgen_error err;
  mode_t mask = umask(022);
  umask(mask);
  assert_int_equal(fg_write_file_atomic(a, "one", 3, &err), FLOWGEN_OK);
  expect_content(a, "one");
  struct stat st;
  assert_int_equal(stat(a, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
  /* A replaced file keeps its mode. */
  assert_int_equal(chmod(a, 0640), 0);
  assert_int_equal(fg_write_file_atomic(a, "two!", 4, &err), FLOWGEN_OK);
  expect_content(a, "two!");
  assert_int_equal(stat(a, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  /* A set of two; an empty file. */
  fg_output_file files[2] = {{a, "A", 1}, {b, "", 0}};
  assert_int_equal(fg_write_files(files, 2, &err), FLOWGEN_OK);
  expect_content(a, "A");
  expect_content(b, "");
  EXPECT_ONLY(dir, "a.txt", "b.txt");
  /* One file named twice is refused before anything is written. */
  fg_output_file twice[2] = {{a, "x", 1}, {a, "y", 1}};
  expect_error(fg_write_files(twice, 2, &err), &err, FLOWGEN_INVALID, "same file", a);
  expect_content(a, "A");
  /* A folder is no output. */
  expect_error(fg_write_file_atomic(dir, "x", 1, &err), &err, FLOWGEN_IO, dir,
               strerror(EISDIR));
  EXPECT_ONLY(dir, "a.txt", "b.txt");
}

/* Through a link, the file it points to is written; the link stays.  A
 * dangling link has its target created; chains and relative links too. */
static void test_symlinks_are_followed(void **state) {
  const char *dir = *state;
  char sub[PATH_SIZE], file[PATH_SIZE], link1[PATH_SIZE], link2[PATH_SIZE],
      dangling[PATH_SIZE], created[PATH_SIZE];
  path_in(sub, dir, "sub");
  assert_int_equal(mkdir(sub, 0700), 0);
  path_in(file, sub, "file.txt");
  path_in(link1, dir, "link1");
  path_in(link2, dir, "link2");
  path_in(dangling, dir, "dangling");
  path_in(created, sub, "new.txt");
  fg_test_write_file(file, "old", 3);
  assert_int_equal(symlink("sub/file.txt", link1), 0);
  assert_int_equal(symlink("link1", link2), 0);
  assert_int_equal(symlink("sub/new.txt", dangling), 0);
  flowgen_error err;
  assert_int_equal(fg_write_file_atomic(link2, "new", 3, &err), FLOWGEN_OK);
  assert_int_equal(kind_of(link2), S_IFLNK);
  assert_int_equal(kind_of(link1), S_IFLNK);
  assert_int_equal(kind_of(file), S_IFREG);
  expect_content(file, "new");
  assert_int_equal(fg_write_file_atomic(dangling, "made", 4, &err), FLOWGEN_OK);
  assert_int_equal(kind_of(dangling), S_IFLNK);
  expect_content(created, "made");
  EXPECT_ONLY(sub, "file.txt", "new.txt");
  EXPECT_ONLY(dir, "sub", "link1", "link2", "dangling");
  /* A loop of links is an error, not a hang. */
  char loop[PATH_SIZE];
  path_in(loop, dir, "loop");
  assert_int_equal(symlink("loop", loop), 0);
  expect_error(fg_write_file_atomic(loop, "x", 1, &err), &err, FLOWGEN_IO, loop, NULL);
  assert_int_equal(kind_of(loop), S_IFLNK);
}

/* rename() needs only the folder's permission: a read-only file must be
 * refused by the writer itself (root included). */
static void test_read_only_file_is_refused(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE], other[PATH_SIZE];
  path_in(path, dir, "ro.txt");
  path_in(other, dir, "other.txt");
  fg_test_write_file(path, "keep", 4);
  assert_int_equal(chmod(path, 0444), 0);
  flowgen_error err;
  expect_error(fg_write_file_atomic(path, "lost", 4, &err), &err, FLOWGEN_IO, path,
               "Permission denied");
  expect_content(path, "keep");
  /* In a set, the other file is not written either. */
  fg_output_file files[2] = {{other, "x", 1}, {path, "y", 1}};
  expect_error(fg_write_files(files, 2, &err), &err, FLOWGEN_IO, path, "Permission denied");
  assert_false(fg_test_file_exists(other));
  expect_content(path, "keep");
  EXPECT_ONLY(dir, "ro.txt");
}

static void test_longest_file_name(void **state) {
  const char *dir = *state;
  for (size_t len = 250; len <= 255; len += 5) {
    char name[256], path[PATH_SIZE];
    memset(name, 'n', len);
    name[len] = '\0';
    path_in(path, dir, name);
    flowgen_error err;
    if (fg_write_file_atomic(path, "long", 4, &err) != FLOWGEN_OK)
      fail_msg("a %zu-character name: %s", len, err.message);
    expect_content(path, "long");
    assert_int_equal(fg_write_file_atomic(path, "again", 5, &err), FLOWGEN_OK);
    expect_content(path, "again");
    assert_int_equal(unlink(path), 0);
  }
  EXPECT_ONLY(dir, "");
}

/* The ways of naming an O_TMPFILE temporary: AT_EMPTY_PATH, /proc/self/fd,
 * and writing the data again into a named temporary; and named
 * temporaries from the start (no O_TMPFILE). */
static void test_every_way_to_a_temporary(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  path_in(path, dir, "out.txt");
  for (int way = 0; way < 4; ++way) {
    mock.linkat_fails = way == 1 ? 1 : way == 2 ? 2 : 0;
    fg_output_test_knobs.no_tmpfile = way == 3;
    mock.linkat_calls = 0;
    char text[32];
    snprintf(text, sizeof text, "way %d", way);
    flowgen_error err;
    if (fg_write_file_atomic(path, text, strlen(text), &err) != FLOWGEN_OK)
      fail_msg("way %d: %s", way, err.message);
    expect_content(path, text);
    EXPECT_ONLY(dir, "out.txt");
    if (way == 3) assert_int_equal(mock.linkat_calls, 0);
    else assert_true(mock.linkat_calls >= 1);
  }
}

/* ---- the set writer: whole or not at all ---------------------------------------- */

/* The second rename fails: the first file is put back as it was (or
 * removed where it was new), the second is untouched, nothing is left. */
static void test_failed_commit_rolls_back(void **state) {
  const char *dir = *state;
  char a[PATH_SIZE], b[PATH_SIZE];
  path_in(a, dir, "a.png");
  path_in(b, dir, "b.npy");
  for (int fresh = 0; fresh < 2; ++fresh) {
    for (int named = 0; named < 2; ++named) {
      if (!fresh) fg_test_write_file(a, "old a", 5);
      else unlink(a);
      fg_test_write_file(b, "old b", 5);
      fg_output_knobs knobs = {FG_OUTPUT_STALE_SECONDS, named};
      fg_output_test_knobs = knobs;
      mock.rename_calls = 0;
      mock.rename_fails_at = 2;
      fg_output_file files[2] = {{a, "new a", 5}, {b, "new b", 5}};
      flowgen_error err;
      expect_error(fg_write_files(files, 2, &err), &err, FLOWGEN_IO, b, strerror(EIO));
      mock.rename_fails_at = 0;
      if (fresh) assert_false(fg_test_file_exists(a));
      else expect_content(a, "old a");
      expect_content(b, "old b");
      if (fresh) EXPECT_ONLY(dir, "b.npy");
      else EXPECT_ONLY(dir, "a.png", "b.npy");
    }
  }
  /* Without a failure both are replaced and no backup stays. */
  fg_output_file files[2] = {{a, "new a", 5}, {b, "new b", 5}};
  assert_int_equal(fg_write_files(files, 2, NULL), FLOWGEN_OK);
  expect_content(a, "new a");
  expect_content(b, "new b");
  EXPECT_ONLY(dir, "a.png", "b.npy");
}

/* A write that fails in a set (a full device) leaves the regular files of
 * the set as they were. */
static void test_failed_device_write_keeps_the_set(void **state) {
  const char *dir = *state;
  char a[PATH_SIZE], full[PATH_SIZE];
  path_in(a, dir, "a.txt");
  path_in(full, dir, "full");
  fg_test_write_file(a, "old", 3);
  assert_int_equal(symlink("/dev/full", full), 0);
  fg_output_file files[2] = {{a, "new", 3}, {full, "data", 4}};
  flowgen_error err;
  expect_error(fg_write_files(files, 2, &err), &err, FLOWGEN_IO, full, strerror(ENOSPC));
  expect_content(a, "old");
  assert_int_equal(kind_of(full), S_IFLNK);
  EXPECT_ONLY(dir, "a.txt", "full");
}

/* ---- the set writer: killed runs ------------------------------------------------ */

/* Runs fg_write_file_atomic(path, 64 KiB) in a child that the mocks kill
 * (in fsync, or at the rename); returns once it is dead. */
static void killed_writer(const char *path, bool in_fsync, bool named) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    static char data[1 << 16];
    memset(data, 'k', sizeof data);
    fg_output_test_knobs.no_tmpfile = named;
    mock.fsync_kills = in_fsync;
    mock.rename_calls = 0;
    mock.rename_kills_at = in_fsync ? 0 : 1;
    fg_write_file_atomic(path, data, sizeof data, NULL);
    _exit(3); /* not killed: the test fails below */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
    fail_msg("the writer was not killed (status %d)", status);
}

/* Killed before its rename: with O_TMPFILE nothing is left at all; a named
 * temporary (no O_TMPFILE, or killed between naming and renaming) is left
 * locked by nobody, and the next write into the folder removes it once it
 * is old enough (here: at once).  The old file survives throughout. */
static void test_killed_writer_leaves_no_orphan(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE], other[PATH_SIZE];
  path_in(path, dir, "out.npy");
  path_in(other, dir, "other.npy");
  fg_test_write_file(path, "old", 3);

  killed_writer(path, true, false);
  expect_content(path, "old");
  EXPECT_ONLY(dir, "out.npy");

  for (int way = 0; way < 2; ++way) {
    killed_writer(path, way == 0, way == 0); /* named in fsync; O_TMPFILE at the rename */
    expect_content(path, "old");
    char stray[256] = "";
    const char *const keep[] = {"out.npy", "other.npy", NULL};
    int n = strays(dir, keep, stray);
    if (n != 1) fail_msg("way %d: expected one orphan, found %d (%s)", way, n, stray);
    assert_true(strncmp(stray, ".flowgen-", 9) == 0);
    /* Too young to be judged an orphan: kept. */
    assert_int_equal(fg_write_file_atomic(other, "o", 1, NULL), FLOWGEN_OK);
    assert_int_equal(strays(dir, keep, NULL), 1);
    fg_output_test_knobs.stale_seconds = 0;
    assert_int_equal(fg_write_file_atomic(other, "o", 1, NULL), FLOWGEN_OK);
    fg_output_test_knobs.stale_seconds = FG_OUTPUT_STALE_SECONDS;
    EXPECT_ONLY(dir, "out.npy", "other.npy");
  }
}

/* A temporary that its writer still holds, and files that only look like
 * temporaries, are never removed. */
static void test_live_temporaries_are_kept(void **state) {
  const char *dir = *state;
  char live[PATH_SIZE], user1[PATH_SIZE], user2[PATH_SIZE], out[PATH_SIZE];
  path_in(live, dir, ".flowgen-abcdefgh2345.tmp");
  path_in(user1, dir, ".flowgen-notes.tmp");
  path_in(user2, dir, ".flowgen-ABCDEFGH2345.tmp");
  path_in(out, dir, "out.txt");
  fg_test_write_file(live, "live", 4);
  fg_test_write_file(user1, "mine", 4);
  fg_test_write_file(user2, "mine", 4);
  int fd = open(live, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  fg_output_test_knobs.stale_seconds = 0;
  assert_int_equal(fg_write_file_atomic(out, "x", 1, NULL), FLOWGEN_OK);
  EXPECT_ONLY(dir, ".flowgen-abcdefgh2345.tmp", ".flowgen-notes.tmp",
              ".flowgen-ABCDEFGH2345.tmp", "out.txt");
  close(fd);
  /* Released: now it is an orphan. */
  assert_int_equal(fg_write_file_atomic(out, "x", 1, NULL), FLOWGEN_OK);
  EXPECT_ONLY(dir, ".flowgen-notes.tmp", ".flowgen-ABCDEFGH2345.tmp", "out.txt");
}

/* ---- the set writer: targets that are not regular files ------------------------------ */

static void test_devices_are_written_in_place(void **state) {
  const char *dir = *state;
  char null_dev[PATH_SIZE], full_dev[PATH_SIZE], null_link[PATH_SIZE], full_link[PATH_SIZE];
  path_in(null_link, dir, "null-link");
  path_in(full_link, dir, "full-link");
  assert_int_equal(symlink("/dev/null", null_link), 0);
  assert_int_equal(symlink("/dev/full", full_link), 0);
  flowgen_error err;
  assert_int_equal(fg_write_file_atomic(null_link, "gone", 4, &err), FLOWGEN_OK);
  assert_int_equal(kind_of(null_link), S_IFLNK);
  expect_error(fg_write_file_atomic(full_link, "gone", 4, &err), &err, FLOWGEN_IO, full_link,
               strerror(ENOSPC));
  assert_int_equal(kind_of(full_link), S_IFLNK);
  assert_int_equal(kind_of("/dev/null"), S_IFCHR);
  assert_int_equal(kind_of("/dev/full"), S_IFCHR);
  EXPECT_ONLY(dir, "null-link", "full-link");

  path_in(null_dev, dir, "null");
  path_in(full_dev, dir, "full");
  if (!make_device(null_dev, 3) || !make_device(full_dev, 7)) skip();
  assert_int_equal(fg_write_file_atomic(null_dev, "gone", 4, &err), FLOWGEN_OK);
  assert_int_equal(kind_of(null_dev), S_IFCHR);
  expect_error(fg_write_file_atomic(full_dev, "gone", 4, &err), &err, FLOWGEN_IO, full_dev,
               strerror(ENOSPC));
  assert_int_equal(kind_of(full_dev), S_IFCHR);
  EXPECT_ONLY(dir, "null-link", "full-link", "null", "full");
}

/* A FIFO without a reader is an error after a short wait; with one, the
 * reader gets the data; the FIFO stays. */
static void test_fifos(void **state) {
  const char *dir = *state;
  char fifo[PATH_SIZE];
  path_in(fifo, dir, "fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  flowgen_error err;
  double t0 = fg_test_now_seconds();
  expect_error(fg_write_file_atomic(fifo, "lost", 4, &err), &err, FLOWGEN_IO, fifo,
               "no reader");
  double waited = fg_test_now_seconds() - t0;
  if (waited > FG_OUTPUT_FIFO_WAIT_MS / 1000.0 + 2.0) fail_msg("waited %.1f s", waited);
  assert_int_equal(kind_of(fifo), S_IFIFO);

  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* the reader: the FIFO's bytes into the pipe */
    close(pipefd[0]);
    int fd = open(fifo, O_RDONLY);
    char buf[256];
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
      if (write(pipefd[1], buf, (size_t)n) != n) _exit(1);
    _exit(fd >= 0 ? 0 : 1);
  }
  close(pipefd[1]);
  assert_int_equal(fg_write_file_atomic(fifo, "through the fifo", 16, &err), FLOWGEN_OK);
  char got[64] = "";
  size_t len = 0;
  ssize_t n;
  while ((n = read(pipefd[0], got + len, sizeof got - 1 - len)) > 0) len += (size_t)n;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  assert_string_equal(got, "through the fifo");
  assert_int_equal(kind_of(fifo), S_IFIFO);
  EXPECT_ONLY(dir, "fifo");
}

/* ---- the CLI: outputs that are not regular files --------------------------------------- */

/* A link to our standard output (as /dev/stdout is): the source arrives
 * there, after what the shell put there before (`>>`); the link stays. */
static void test_cli_output_to_a_link_to_stdout(void **state) {
  const char *dir = *state;
  char *source = default_source();
  char link[PATH_SIZE], log[PATH_SIZE];
  path_in(link, dir, "stdout-link");
  path_in(log, dir, "log");
  assert_int_equal(symlink("/proc/self/fd/1", link), 0);
  cli_result r = flowgen("-o '%s'", link);
  assert_int_equal(r.code, 0);
  assert_int_equal(kind_of(link), S_IFLNK);
  assert_string_equal(r.out, source);
  cli_free(&r);
  r = shell("echo first > '%s' && $FLOWGEN -o '%s' >> '%s'", log, link, log);
  assert_int_equal(r.code, 0);
  char *text = fg_test_read_file(log, NULL);
  assert_non_null(text);
  assert_true(strncmp(text, "first\n", 6) == 0);
  assert_string_equal(text + 6, source);
  free(text);
  cli_free(&r);
  assert_int_equal(kind_of(link), S_IFLNK);
  EXPECT_ONLY(dir, "stdout-link", "log");
  free(source);
}

/* A FIFO: written to its reader; with none, exit 1 after a short wait
 * instead of hanging.  It stays a FIFO. */
static void test_cli_output_to_a_fifo(void **state) {
  const char *dir = *state;
  char fifo[PATH_SIZE], got[PATH_SIZE];
  path_in(fifo, dir, "fifo");
  path_in(got, dir, "got");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  cli_result r = shell("timeout 20 cat '%s' > '%s' & $FLOWGEN --dim 3 -o '%s'; rc=$?; wait; exit $rc",
                       fifo, got, fifo);
  assert_int_equal(r.code, 0);
  assert_int_equal(kind_of(fifo), S_IFIFO);
  char *through = fg_test_read_file(got, NULL);
  assert_non_null(through);
  assert_non_null(strstr(through, "constexpr int kDim = 3;"));
  free(through);
  cli_free(&r);
  r = flowgen("-o '%s'", fifo);
  expect_one_error_line(&r, 1, fifo, "no reader");
  assert_int_equal(kind_of(fifo), S_IFIFO);
  cli_free(&r);
  EXPECT_ONLY(dir, "fifo", "got");
}

/* Character devices (made here: root only): a null device takes the
 * output, a full one is an error naming it; both stay devices. */
static void test_cli_output_to_devices(void **state) {
  const char *dir = *state;
  char null_dev[PATH_SIZE], full_dev[PATH_SIZE];
  path_in(null_dev, dir, "null");
  path_in(full_dev, dir, "full");
  if (!make_device(null_dev, 3) || !make_device(full_dev, 7)) skip();
  cli_result r = flowgen("-o '%s'", null_dev);
  assert_int_equal(r.code, 0);
  assert_string_equal(r.err, "");
  assert_int_equal(kind_of(null_dev), S_IFCHR);
  cli_free(&r);
  r = flowgen("-o '%s'", full_dev);
  expect_one_error_line(&r, 1, full_dev, strerror(ENOSPC));
  assert_int_equal(kind_of(full_dev), S_IFCHR);
  cli_free(&r);
  EXPECT_ONLY(dir, "null", "full");
}

/* /dev/null, /dev/stdout and /dev/full themselves.  A binary that would
 * rename over a node must not get here: the same targets through links in
 * this test's folder come first, and fail on such a binary. */
static void test_cli_output_to_the_system_nodes(void **state) {
  const char *dir = *state;
  char null_link[PATH_SIZE], stdout_link[PATH_SIZE];
  path_in(null_link, dir, "null-link");
  path_in(stdout_link, dir, "stdout-link");
  assert_int_equal(symlink("/dev/null", null_link), 0);
  assert_int_equal(symlink("/dev/stdout", stdout_link), 0);
  cli_result r = flowgen("-o '%s'", null_link);
  assert_int_equal(r.code, 0);
  assert_int_equal(kind_of(null_link), S_IFLNK);
  cli_free(&r);
  r = flowgen("-o '%s'", stdout_link);
  assert_int_equal(r.code, 0);
  assert_int_equal(kind_of(stdout_link), S_IFLNK);
  assert_true(strncmp(r.out, "// Generated by flowgen", 23) == 0);
  cli_free(&r);

  r = flowgen("-o /dev/null");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "");
  assert_int_equal(kind_of("/dev/null"), S_IFCHR);
  cli_free(&r);
  r = flowgen("--dim 3 -o /dev/stdout");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "constexpr int kDim = 3;"));
  cli_free(&r);
  if (kind_of("/dev/full") == S_IFCHR) {
    r = flowgen("-o /dev/full");
    expect_one_error_line(&r, 1, "/dev/full", strerror(ENOSPC));
    assert_int_equal(kind_of("/dev/full"), S_IFCHR);
    cli_free(&r);
  }
}

/* Through a link to a file: the file is written, the link stays. */
static void test_cli_output_through_a_link(void **state) {
  const char *dir = *state;
  char file[PATH_SIZE], link[PATH_SIZE];
  path_in(file, dir, "kernel.cu");
  path_in(link, dir, "kernel-link.cu");
  fg_test_write_file(file, "old", 3);
  assert_int_equal(symlink("kernel.cu", link), 0);
  cli_result r = flowgen("--dim 3 -o '%s'", link);
  assert_int_equal(r.code, 0);
  assert_int_equal(kind_of(link), S_IFLNK);
  char *now = fg_test_read_file(file, NULL);
  assert_non_null(strstr(now, "constexpr int kDim = 3;"));
  free(now);
  cli_free(&r);
  EXPECT_ONLY(dir, "kernel.cu", "kernel-link.cu");
}

static void test_cli_read_only_output_is_refused(void **state) {
  const char *dir = *state;
  char ro[PATH_SIZE];
  path_in(ro, dir, "read-only.cu");
  fg_test_write_file(ro, "keep", 4);
  assert_int_equal(chmod(ro, 0444), 0);
  cli_result r = flowgen("-o '%s'", ro);
  expect_one_error_line(&r, 1, ro, "Permission denied");
  expect_content(ro, "keep");
  cli_free(&r);
  EXPECT_ONLY(dir, "read-only.cu");
}

static void test_cli_long_output_name(void **state) {
  const char *dir = *state;
  char name[251], longest[PATH_SIZE];
  memset(name, 'k', 250);
  name[250] = '\0';
  path_in(longest, dir, name);
  cli_result r = flowgen("--dim 4 -o '%s'", longest);
  if (r.code != 0) fail_msg("a 250-character name: exit %d: %s", r.code, r.err);
  char *now = fg_test_read_file(longest, NULL);
  assert_non_null(strstr(now, "constexpr int kDim = 4;"));
  free(now);
  cli_free(&r);
  EXPECT_ONLY(dir, name);
}

/* Killed mid-write: a file size limit of 1 KiB stops the process with
 * SIGXFSZ in the middle of writing its 27 KB.  No temporary stays, and
 * an existing output is as it was. */
static void test_cli_killed_mid_write_leaves_nothing(void **state) {
  const char *dir = *state;
  char killed[PATH_SIZE], kept[PATH_SIZE];
  path_in(killed, dir, "killed.cu");
  path_in(kept, dir, "kept.cu");
  fg_test_write_file(kept, "old", 3);
  cli_result r = shell("ulimit -f 1 && exec $FLOWGEN -o '%s'", killed);
  assert_int_not_equal(r.code, 0);
  cli_free(&r);
  r = shell("ulimit -f 1 && exec $FLOWGEN -o '%s'", kept);
  assert_int_not_equal(r.code, 0);
  cli_free(&r);
  expect_content(kept, "old");
  /* Without O_TMPFILE here the killed runs leave their named temporaries:
   * orphans, which the next write into the folder removes once old enough
   * (here: at once). */
  char stray[256] = "";
  const char *const keep[] = {"kept.cu", NULL};
  if (strays(dir, keep, stray) > 0) {
    print_message("# no O_TMPFILE in %s: the orphans are removed by the next write\n", dir);
    assert_true(strncmp(stray, ".flowgen-", 9) == 0);
    fg_output_test_knobs.stale_seconds = 0;
    assert_int_equal(fg_write_file_atomic(kept, "new", 3, NULL), FLOWGEN_OK);
    expect_content(kept, "new");
  }
  EXPECT_ONLY(dir, "kept.cu");
}

/* Binary output is not written to a terminal (stdout on a pseudo-terminal
 * here); nothing reaches it. */
static void test_cli_cubin_refused_on_a_terminal(void **state) {
  const char *dir = *state;
  char err_path[PATH_SIZE];
  path_in(err_path, dir, "stderr");
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    print_message("# no pseudo-terminal: %s: skipped\n", strerror(errno));
    if (master >= 0) close(master);
    skip();
  }
  char *slave_name = ptsname(master);
  assert_non_null(slave_name);
  char slave_path[256];
  snprintf(slave_path, sizeof slave_path, "%s", slave_name);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setsid();
    int slave = open(slave_path, O_RDWR);
    int err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    if (slave < 0 || err_fd < 0 || in < 0) _exit(126);
    dup2(in, 0);
    dup2(slave, 1);
    dup2(err_fd, 2);
    execl(fg_test_flowgen_bin(), "flowgen", "--emit", "cubin", "--dim", "3", "--steps", "5",
          (char *)NULL);
    _exit(127);
  }
  /* Drain the terminal while the child runs. */
  size_t received = 0;
  int status = 0;
  double t0 = fg_test_now_seconds();
  for (;;) {
    struct pollfd p = {master, POLLIN, 0};
    if (poll(&p, 1, 50) > 0 && (p.revents & POLLIN)) {
      char buf[4096];
      ssize_t n = read(master, buf, sizeof buf);
      if (n > 0) received += (size_t)n;
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (fg_test_now_seconds() - t0 > 120) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fail_msg("flowgen --emit cubin on a terminal did not finish");
    }
  }
  close(master);
  char *err = fg_test_read_file(err_path, NULL);
  assert_non_null(err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
    fail_msg("exit status %d, expected 2; stderr: %s", status, err);
  assert_int_equal(received, 0);
  assert_true(strncmp(err, "flowgen: --emit cubin", 21) == 0);
  assert_non_null(strstr(err, "terminal"));
  assert_non_null(strstr(err, "-o"));
  free(err);
}

/* ---- the picture --------------------------------------------------------------- */

static fg_png_grid grid(int64_t count, int h, int w, int columns, int scale) {
  return (fg_png_grid){.count = count, .dim = h * w, .image_height = h, .image_width = w,
                       .columns = columns, .scale = scale, .low = -1.0f, .high = 1.0f};
}

/* Every product in 64 bits: the picture (D = 1024 as 1024x1,
 * scale 64, one column, 65473 samples) is 192 x 4295028864 pixels, not the
 * 192 x 61568 that int arithmetic made of it; the cap holds to the pixel. */
static void test_png_size_is_checked(void **state) {
  (void)state;
  int64_t w = 0, h = 0;
  flowgen_error err;
  fg_png_grid g = grid(65473, 1024, 1, 1, 64);
  expect_error(fg_png_grid_size(&g, &w, &h, &err), &err, FLOWGEN_INVALID, "over the limit",
               "4295028864");
  assert_int_equal(w, 192);
  assert_int_equal(h, 4295028864LL);
  unsigned char *png = NULL;
  size_t size = 0;
  assert_int_equal(fg_png_encode_grid(&g, &png, &size, &err), FLOWGEN_INVALID);
  assert_null(png);

  /* One side: 65535 pixels pass, 65536 do not.  An h x w image at scale 1
   * in c columns is c (w + 1) + 1 wide. */
  g = grid(1, 1, 1, 32767, 1);
  assert_int_equal(fg_png_grid_size(&g, &w, &h, &err), FLOWGEN_OK);
  assert_int_equal(w, 65535);
  assert_int_equal(h, 3);
  g = grid(1, 1, 2, 21845, 1);
  expect_error(fg_png_grid_size(&g, &w, &h, &err), &err, FLOWGEN_INVALID, "65536 x 3",
               NULL);
  assert_int_equal(w, 65536);

  /* In all: 16384 x 16384 = 2^28 passes, 16384 x 16387 does not. */
  g = grid(5461LL * 5461, 2, 2, 5461, 1);
  assert_int_equal(fg_png_grid_size(&g, &w, &h, &err), FLOWGEN_OK);
  assert_int_equal(w, 16384);
  assert_int_equal(h, 16384);
  g = grid(5461LL * 5462, 2, 2, 5461, 1);
  expect_error(fg_png_grid_size(&g, &w, &h, &err), &err, FLOWGEN_INVALID, "16384 x 16387",
               NULL);
  /* 65535 x 8193: each side within the cap, not the whole. */
  g = grid(32767LL * 4096, 1, 1, 32767, 1);
  expect_error(fg_png_grid_size(&g, &w, &h, &err), &err, FLOWGEN_INVALID, "65535 x 8193",
               NULL);

  /* Products past 2^63 saturate instead of wrapping. */
  g = grid(INT64_MAX, 1, 1, 1, 64);
  g.image_height = 2147483647;
  g.dim = 2147483647;
  assert_int_equal(fg_png_grid_size(&g, &w, &h, &err), FLOWGEN_INVALID);
  assert_int_equal(h, INT64_MAX);

  /* Fields out of range. */
  g = grid(2, 8, 8, 2, 1);
  g.dim = 63;
  expect_error(fg_png_grid_size(&g, &w, &h, &err), &err, FLOWGEN_INVALID, "8 x 8", NULL);
  g = grid(0, 8, 8, 2, 1);
  assert_int_equal(fg_png_grid_size(&g, &w, &h, &err), FLOWGEN_INVALID);
  g = grid(2, 8, 8, 2, 0);
  assert_int_equal(fg_png_grid_size(&g, &w, &h, &err), FLOWGEN_INVALID);
}

/* A small safetensors model of the seed contract, D x H, small values. */
static void write_model(const char *path, int dim, int hidden) {
  const long long shapes[6][2] = {{hidden, dim + 1}, {hidden, 1}, {hidden, hidden},
                                  {hidden, 1},       {dim, hidden}, {dim, 1}};
  static const char *const names[6] = {"0.weight", "0.bias", "2.weight",
                                       "2.bias",   "4.weight", "4.bias"};
  char header[2048];
  size_t len = 0;
  long long offset = 0;
  len += (size_t)snprintf(header + len, sizeof header - len, "{");
  for (int t = 0; t < 6; ++t) {
    long long n = shapes[t][0] * shapes[t][1];
    if (t % 2 == 0)
      len += (size_t)snprintf(header + len, sizeof header - len,
                              "%s\"velocity.%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                              "\"data_offsets\":[%lld,%lld]}",
                              t ? "," : "", names[t], shapes[t][0], shapes[t][1], offset,
                              offset + 4 * n);
    else
      len += (size_t)snprintf(header + len, sizeof header - len,
                              ",\"velocity.%s\":{\"dtype\":\"F32\",\"shape\":[%lld],"
                              "\"data_offsets\":[%lld,%lld]}",
                              names[t], shapes[t][0], offset, offset + 4 * n);
    offset += 4 * n;
  }
  len += (size_t)snprintf(header + len, sizeof header - len, "}");
  assert_true(len < sizeof header);
  size_t total = 8 + len + (size_t)offset;
  unsigned char *file = malloc(total);
  assert_non_null(file);
  for (int i = 0; i < 8; ++i) file[i] = (unsigned char)((uint64_t)len >> (8 * i));
  memcpy(file + 8, header, len);
  float *values = malloc((size_t)offset);
  assert_non_null(values);
  fg_test_fill_uniform(values, (size_t)offset / 4, 7, 0.1f);
  memcpy(file + 8 + len, values, (size_t)offset);
  free(values);
  fg_test_write_file(path, file, total);
  free(file);
}

/* The heap overflow: refused with exit 2 before any sampling, the
 * flags named, no file. */
static void test_cli_picture_over_the_cap(void **state) {
  const char *dir = *state;
  char model[PATH_SIZE], png[PATH_SIZE];
  path_in(model, dir, "d1024.safetensors");
  path_in(png, dir, "big.png");
  write_model(model, 1024, 1);
  cli_result r = flowgen("sample --weights '%s' --device cpu --steps 1 --png '%s' "
                         "--png-shape 1024x1 --png-scale 64 --png-columns 1 --batch 65473",
                         model, png);
  expect_one_error_line(&r, 2, "--png-scale", "--batch");
  assert_non_null(strstr(r.err, "192 x 4295028864"));
  cli_free(&r);
  EXPECT_ONLY(dir, "d1024.safetensors");
  /* The cap is in the help. */
  r = flowgen("sample --help");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "65535 pixels a side and 2^28 in all"));
  cli_free(&r);
}

static void test_cli_png_shape_messages(void **state) {
  const char *dir = *state;
  char png[PATH_SIZE];
  path_in(png, dir, "p.png");
  static const struct {
    const char *shape, *part1, *part2;
  } cases[] = {
      {"7x7", "D = 64", "7 x 7"},
      {"8x", "HxW", "no width"},
      {"x8", "HxW", "no height"},
      {"8x8x8", "HxW", "more than one 'x'"},
      {"64", "HxW", "e.g. 8x8"},
      {"ax8", "height", "not a whole number"},
      {"8x0", "width", "out of range"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    cli_result r = flowgen("sample --device cpu --batch 2 --png '%s' --png-shape %s", png,
                           cases[i].shape);
    expect_one_error_line(&r, 2, cases[i].part1, cases[i].part2);
    /* The flag is blamed, not the output file. */
    if (strncmp(r.err, "flowgen: --png-shape", 20) != 0 || strstr(r.err, png))
      fail_msg("--png-shape %s: %s", cases[i].shape, r.err);
    cli_free(&r);
  }
  EXPECT_ONLY(dir, "");
}

/* ---- the CLI: --png and -o as a pair -------------------------------------------- */

static void png_size(const char *path, int *width, int *height) {
  png_image image;
  memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path)) fail_msg("%s: %s", path, image.message);
  *width = (int)image.width;
  *height = (int)image.height;
  png_image_free(&image);
}

static void test_cli_png_and_npy_as_a_pair(void **state) {
  const char *dir = *state;
  char png[PATH_SIZE], npy[PATH_SIZE], missing[PATH_SIZE];
  path_in(png, dir, "digits.png");
  path_in(npy, dir, "digits.npy");
  path_in(missing, dir, "no/such/folder/x.npy");
  static const char old_png[] = "an older picture";
  static const char old_npy[] = "an older array";

  /* -o into a missing folder: the existing picture survives, and a new
   * one is not written. */
  for (int existing = 0; existing < 2; ++existing) {
    unlink(png);
    if (existing) fg_test_write_file(png, old_png, sizeof old_png - 1);
    cli_result r = flowgen("sample --device cpu --batch 3 --png '%s' -o '%s'", png, missing);
    expect_one_error_line(&r, 1, missing, "No such file");
    if (existing) expect_content(png, old_png);
    else assert_false(fg_test_file_exists(png));
    cli_free(&r);
  }
  /* A read-only -o: refused, and neither file changes. */
  fg_test_write_file(npy, old_npy, sizeof old_npy - 1);
  assert_int_equal(chmod(npy, 0444), 0);
  cli_result r = flowgen("sample --device cpu --batch 3 --png '%s' -o '%s'", png, npy);
  expect_one_error_line(&r, 1, npy, "Permission denied");
  expect_content(png, old_png);
  expect_content(npy, old_npy);
  cli_free(&r);
  /* Both written on success. */
  assert_int_equal(chmod(npy, 0644), 0);
  r = flowgen("sample --device cpu --batch 3 --seed 1 --png '%s' -o '%s'", png, npy);
  assert_int_equal(r.code, 0);
  assert_string_equal(r.err, "");
  cli_free(&r);
  int w = 0, h = 0;
  png_size(png, &w, &h);
  assert_int_equal(w, 2 * 32 + 3 * 4); /* 3 samples: 2 columns of 8x8 at scale 4 */
  assert_int_equal(h, 2 * 32 + 3 * 4);
  float *x = NULL;
  int64_t rows = 0, cols = 0;
  assert_int_equal(fg_npy_read(npy, &x, &rows, &cols, NULL), FLOWGEN_OK);
  assert_int_equal(rows, 3);
  assert_int_equal(cols, 64);
  free(x);
  EXPECT_ONLY(dir, "digits.png", "digits.npy");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_new_and_replaced_files),
      T(test_symlinks_are_followed),
      T(test_read_only_file_is_refused),
      T(test_longest_file_name),
      T(test_every_way_to_a_temporary),
      T(test_failed_commit_rolls_back),
      T(test_failed_device_write_keeps_the_set),
      T(test_killed_writer_leaves_no_orphan),
      T(test_live_temporaries_are_kept),
      T(test_devices_are_written_in_place),
      T(test_fifos),
      T(test_cli_output_to_a_link_to_stdout),
      T(test_cli_output_to_a_fifo),
      T(test_cli_output_to_devices),
      T(test_cli_output_to_the_system_nodes),
      T(test_cli_output_through_a_link),
      T(test_cli_read_only_output_is_refused),
      T(test_cli_long_output_name),
      T(test_cli_killed_mid_write_leaves_nothing),
      T(test_cli_cubin_refused_on_a_terminal),
      T(test_png_size_is_checked),
      T(test_cli_picture_over_the_cap),
      T(test_cli_png_shape_messages),
      T(test_cli_png_and_npy_as_a_pair),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
