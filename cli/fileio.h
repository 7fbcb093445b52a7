/* Files of the command line: a whole file read, and output files written
 * so that they appear whole or not at all.  Internal to the CLI. */
#ifndef FLOWGEN_FILEIO_H
#define FLOWGEN_FILEIO_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads the regular file at path into a malloc()ed buffer (*data, never NULL
 * on success, even for an empty file) of *size bytes.  Failures are
 * FLOWGEN_IO "<path>: <reason>" (a folder is EISDIR, any other non-regular
 * file "not a regular file", a file that shrinks while read EIO) or
 * FLOWGEN_NOMEM; *data and *size are left untouched then. */
FG_HIDDEN flowgen_status fg_read_file(const char *path, unsigned char **data,
                                      size_t *size, flowgen_error *err);

/* One file of a set that fg_write_files writes. */
typedef struct fg_output_file {
  const char *path;
  const void *data;
  size_t size;
} fg_output_file;

/* Writes a set of files so that either every one appears whole or none
 * changes (an existing file is then left as it was).  Each is written to a
 * temporary in its target's folder; once all are written the temporaries
 * are renamed into place, and a failed rename puts back what the earlier
 * ones replaced.  Failures are FLOWGEN_IO "<path>: <reason>" (FLOWGEN_INVALID
 * for two paths that are one file).
 *  - A symbolic link: its target is written (created if missing), the link
 *    stays.
 *  - Something not a regular file (a device such as /dev/null, a FIFO,
 *    /dev/stdout) is written in place, never replaced, after the regular
 *    files are staged and before they are renamed; what it received cannot
 *    be taken back.  A FIFO gets FG_OUTPUT_FIFO_WAIT_MS for a reader.
 *  - An existing file the user may not write, or one with no write
 *    permission bit at all (even for root), is refused: "Permission denied".
 *  - New files get 0666 & ~umask; a replaced file keeps its mode.
 *  - Temporaries are unnamed (O_TMPFILE) where the filesystem allows; else,
 *    and for the moment between naming and renaming, ".flowgen-*.tmp",
 *    locked by the writer.  One that no process holds and that has not
 *    changed for FG_OUTPUT_STALE_SECONDS is left by a killed run: the next
 *    write into that folder removes it. */
FG_HIDDEN flowgen_status fg_write_files(const fg_output_file *files,
                                        size_t count, flowgen_error *err);
/* fg_write_files of one file. */
FG_HIDDEN flowgen_status fg_write_file_atomic(const char *path,
                                              const void *data, size_t size,
                                              flowgen_error *err);

#define FG_OUTPUT_FIFO_WAIT_MS 2000
#define FG_OUTPUT_STALE_SECONDS 60
/* For the tests: the age of an orphaned temporary, and named temporaries
 * only (as on a filesystem without O_TMPFILE). */
typedef struct fg_output_knobs {
  int stale_seconds;
  bool no_tmpfile;
} fg_output_knobs;
FG_HIDDEN extern fg_output_knobs fg_output_test_knobs;

#endif
