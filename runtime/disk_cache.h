/*
 * The on-disk module cache: one file per key, written atomically.
 *
 * Entry file "<hex of XXH3-128(key)>.fgc", little-endian:
 *
 *   offset  size  field
 *        0     8  magic "FGCACHE\0"
 *        8     4  format version (FG_CACHE_FORMAT_VERSION)
 *       12     4  key length
 *       16     8  payload length
 *       24     8  checksum: XXH3-64 of the key bytes then the payload bytes
 *       32     -  key bytes (no NUL), then payload bytes, then end of file
 *
 * An entry is used only if every field checks out and the stored key is the
 * requested one; anything else is reported as invalid and is replaced by the
 * next put.  Entries are opened without following a link or waiting on a
 * FIFO, and only when they are regular files.  Not installed.
 *
 * The folder is trusted as ssh trusts ~/.ssh: it must belong to the
 * effective user and be writable by no one else, and every folder above it
 * (as given and as resolved) must belong to that user or root and be
 * writable by no one else, unless it has the sticky bit (as /tmp), where no
 * one else can rename what lies in it.  A link on the way must belong to the
 * user or root.  Otherwise anyone who can write there could plant a cubin
 * that the runtime would load (the checksum is no signature).  The opt-in:
 * $FLOWGEN_CACHE_TRUST=any, or flowrt_options.cache_trust_any.
 */
#ifndef FLOWGEN_DISK_CACHE_H
#define FLOWGEN_DISK_CACHE_H

#include "flowrt.h"
#include "internal.h"

#include <sys/types.h>

#define FG_CACHE_MAGIC "FGCACHE"      /* 7 characters + the NUL = 8 bytes */
#define FG_CACHE_FORMAT_VERSION 1u
#define FG_CACHE_HEADER_SIZE 32
enum {
  FG_CACHE_OFFSET_MAGIC = 0,
  FG_CACHE_OFFSET_VERSION = 8,
  FG_CACHE_OFFSET_KEY_SIZE = 12,
  FG_CACHE_OFFSET_PAYLOAD_SIZE = 16,
  FG_CACHE_OFFSET_CHECKSUM = 24,
};

/* Limits a reader trusts: a hostile header cannot make us allocate more. */
#define FG_CACHE_KEY_MAX ((size_t)1 << 20)
#define FG_CACHE_PAYLOAD_MAX ((size_t)256 << 20)

#define FG_CACHE_SUFFIX ".fgc"
#define FG_CACHE_TEMP_PREFIX ".tmp-"
/* clear removes a temporary file only when it is this old: a younger one may
 * belong to a put in progress. */
#define FG_CACHE_TEMP_STALE_SECONDS 60
/* 32 hex digits + ".fgc" + NUL */
#define FG_CACHE_FILE_NAME_SIZE 37

typedef enum fg_cache_result {
  FG_CACHE_HIT,      /* a valid entry for the key; the payload is returned */
  FG_CACHE_MISS,     /* no entry for the key */
  FG_CACHE_INVALID,  /* a file is there but unusable (truncated, corrupt,
                        foreign key, other format): recompile and put */
} fg_cache_result;

/* False when $FLOWGEN_CACHE is "0"; true otherwise (unset included). */
FG_HIDDEN bool fg_cache_enabled_from_env(void);
/* True when $FLOWGEN_CACHE_TRUST is "any": use a folder others can write. */
FG_HIDDEN bool fg_cache_trust_any_from_env(void);

/* dir if not NULL, else the folder in effect (see flowrt_cache_dir). */
FG_HIDDEN flowgen_status fg_cache_resolve_dir(const char *dir, char *buf,
                                              size_t size, flowgen_error *err);

/* The entry's file name for key: 32 hex digits + ".fgc". */
FG_HIDDEN void fg_cache_file_name(const char *key,
                                  char name[FG_CACHE_FILE_NAME_SIZE]);

/* Creates dir (and its parents) with mode 0700 if missing, then checks that
 * it is a directory we can create files in and, unless trust_any, that it is
 * trusted (above).  Call once: on failure the caller warns and keeps its
 * modules in memory only.  get and put do not check again. */
FG_HIDDEN flowgen_status fg_cache_open(const char *dir, bool trust_any,
                                       flowgen_error *err);

/* The runtime's disk cache: resolves dir (NULL = the folder in effect) into
 * buf and opens it.  enabled: -1 = from $FLOWGEN_CACHE, 0 = off, 1 = on;
 * trust_any (or $FLOWGEN_CACHE_TRUST=any): skip the trust check.  Returns
 * whether the disk cache is on; when it cannot be, warn (if not NULL) gets
 * one line naming the folder and why. */
FG_HIDDEN bool fg_cache_setup(const char *dir, int enabled, bool trust_any,
                              char *buf, size_t size, flowrt_warn_fn warn,
                              void *warn_ctx);

/* Looks key up in dir.  On FLOWGEN_OK, *result says what was found; on a hit
 * *payload is a malloc()ed copy of the *size payload bytes, otherwise NULL
 * and 0.  On FG_CACHE_INVALID err (if any) keeps status FLOWGEN_OK and its
 * message says why ("<path>: checksum mismatch"); on a hit or miss it is
 * cleared.  An error (FLOWGEN_IO, FLOWGEN_NOMEM) means an existing file
 * could not be read; treat it as a miss. */
FG_HIDDEN flowgen_status fg_cache_get(const char *dir, const char *key,
                                      fg_cache_result *result, void **payload,
                                      size_t *size, flowgen_error *err);

/* Stores payload under key in dir (created if missing), replacing any entry
 * atomically: readers see the old entry or the new one, never a part.  A
 * link at the entry's path is replaced (not followed); a FIFO, device,
 * socket or folder there is left as it is and the put fails.  On failure
 * nothing is left behind and the error names the path. */
FG_HIDDEN flowgen_status fg_cache_put(const char *dir, const char *key,
                                      const void *payload, size_t size,
                                      flowgen_error *err);

/* ---- between the cache's files (cache_folder.c, disk_cache.c,
 * cache_list.c) ------------------------------------------------------------ */

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* FLOWGEN_IO "<what> <path>: <strerror(errno)>"; reads errno first. */
FG_HIDDEN flowgen_status fg_cache_io_error(flowgen_error *err, const char *what,
                                           const char *path);
/* buf = "dir/name" / path, or FLOWGEN_INVALID when it does not fit. */
FG_HIDDEN flowgen_status fg_cache_join_path(char *buf, size_t size, const char *dir,
                                            const char *name, flowgen_error *err);
FG_HIDDEN flowgen_status fg_cache_copy_path(char *buf, size_t size, const char *path,
                                            flowgen_error *err);
/* The entry's path for key in dir. */
FG_HIDDEN flowgen_status fg_cache_entry_path(const char *dir, const char *key, char *buf,
                                             size_t size, flowgen_error *err);
/* mkdir -p with mode 0700 for every folder it creates. */
FG_HIDDEN flowgen_status fg_cache_make_dirs(const char *dir, flowgen_error *err);
/* Creates an empty temporary file in dir (and dir itself if missing). */
FG_HIDDEN flowgen_status fg_cache_create_temp(const char *dir, char *temp, size_t size,
                                              int *fd, flowgen_error *err);
/* FLOWGEN_INVALID for no folder, or a key empty or too long. */
FG_HIDDEN flowgen_status fg_cache_check_dir(const char *dir, flowgen_error *err);
FG_HIDDEN flowgen_status fg_cache_check_key(const char *key, flowgen_error *err);
/* FLOWGEN_IO naming what makes dir untrusted (see above), else OK. */
FG_HIDDEN flowgen_status fg_cache_check_trusted(const char *dir, flowgen_error *err);

/* An entry as read. */
typedef struct fg_cache_entry {
  char *key;             /* NUL-terminated; NULL if not read */
  void *payload;         /* NULL unless asked for and valid */
  uint64_t payload_size; /* from the header; 0 if not read */
} fg_cache_entry;
FG_HIDDEN void fg_cache_entry_free(fg_cache_entry *e);
/* Why a file of this type cannot be an entry. */
FG_HIDDEN const char *fg_cache_not_regular(mode_t mode);
/* Reads size bytes, fewer only at the end of the file; -1 on error. */
FG_HIDDEN ssize_t fg_cache_read_fully(int fd, void *buf, size_t size);
/* Opens the regular file at path for reading, never a link, FIFO or
 * device: *fd is -1 when it is missing or when *problem says why it is no
 * entry. */
FG_HIDDEN flowgen_status fg_cache_open_entry(const char *path, int *fd,
                                             const char **problem, flowgen_error *err);
/* Reads the entry open on fd: *problem NULL for a sound entry (whose key is
 * expected_key unless that is NULL), else what is wrong with it. */
FG_HIDDEN flowgen_status fg_cache_read_entry(int fd, const char *path,
                                             const char *expected_key, bool want_payload,
                                             fg_cache_entry *e, const char **problem,
                                             flowgen_error *err);

#endif
