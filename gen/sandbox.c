/* The Lua state behind generation.  Limits: an allocator that refuses past
 * a byte budget and any string longer than FG_STRING_MAX; a count hook that
 * stops the VM past an instruction budget or the time limit; the library
 * functions that can run long in C count their work (fg_sandbox_charge,
 * sandbox_lib.c) and so read the clock as they go.  Libraries: base, string,
 * table, math, utf8 only; the engine (gen/engine.lua) builds each template's
 * environment from them. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Instructions between two calls of the hook, which reads the clock.  One
 * instruction on strings of FG_STRING_MAX bytes can take milliseconds (a
 * '<' of two strings of zero bytes runs strcoll a byte at a time): the
 * period keeps the time past the limit to a fraction of a second.  Any
 * count hook slows every instruction a little; this period, against one of
 * 10000, costs nothing measurable more in rendering the largest shape. */
#define HOOK_PERIOD 100
/* Charged units (sandbox_lib.c) and allocated bytes between two readings
 * of the clock: well under a millisecond of work. */
#define WORK_PERIOD (1u << 20)
/* The engine's own frames are skipped when a limit names the template line
 * that was running. */
#define ENGINE_CHUNK "@gen/engine.lua"

/* Why an allocation was refused. */
typedef enum refusal {
  REFUSED_NONE,
  REFUSED_BUDGET,  /* the memory limit */
  REFUSED_SYSTEM,  /* the C allocator */
} refusal;

struct fg_sandbox {
  lua_State *L;
  size_t used, memory_limit;
  uint64_t instructions, instruction_limit;
  uint32_t time_limit_ms;
  struct timespec deadline;   /* CLOCK_MONOTONIC */
  size_t work;                /* charged since the clock was last read */
  size_t string_header;       /* bytes of a string object besides its text */
  bool probing_strings;       /* the next string allocation measures that */
  bool stopped;               /* a limit was hit: every instruction fails */
  /* Lua answers a refused request with an emergency collection (which
   * only frees and shrinks) and one retry of it, the next request that
   * grows; where that is refused too, or none comes, Lua raises "not
   * enough memory".  The first refusal Lua gave up on says whose limit
   * that was; one whose retry worked says nothing (nor does a later
   * refusal that a collection made good, while the error unwinds). */
  struct {
    void *ptr;
    size_t osize, nsize;
    refusal why;
    bool open;                /* awaiting its retry */
    char where[256];          /* the template line it was for */
  } refused;
  refusal gave_up;            /* the first refusal Lua gave up on */
  char gave_up_where[256];
  char limit_message[512];    /* which limit stopped the templates, where */
  char *template_dir;
  int engine_ref;
};

static fg_sandbox *sandbox_of(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* "file:line: " of the innermost template function running (else of the
 * innermost Lua function); "" when there is none.  Reads debug information
 * only, without allocating: usable in the allocator and in the hook. */
static void template_where(lua_State *L, char *buf, size_t size) {
  lua_Debug ar;
  buf[0] = '\0';
  for (int level = 0; lua_getstack(L, level, &ar); ++level) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    bool engine = strcmp(ar.source, ENGINE_CHUNK) == 0;
    if (!engine || !buf[0])
      snprintf(buf, size, "%s:%d: ", ar.short_src, ar.currentline);
    if (!engine) return;
  }
}

static bool past_deadline(const fg_sandbox *sb) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > sb->deadline.tv_sec ||
         (now.tv_sec == sb->deadline.tv_sec &&
          now.tv_nsec >= sb->deadline.tv_nsec);
}

static void count_hook(lua_State *L, lua_Debug *ar);

/* Records the limit that stops the templates (the first one hit) and makes
 * every later instruction fail with it: no handler can go on. */
static void stop(fg_sandbox *sb, const char *where, const char *fmt, ...)
    FG_PRINTF(3, 4);
static void stop(fg_sandbox *sb, const char *where, const char *fmt, ...) {
  if (sb->stopped) return;
  sb->stopped = true;
  int n = snprintf(sb->limit_message, sizeof sb->limit_message, "%s", where);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sb->limit_message + n, sizeof sb->limit_message - (size_t)n, fmt,
            ap);
  va_end(ap);
  lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, 1);
}

static void stop_for_time(fg_sandbox *sb, const char *where) {
  stop(sb, where, "template exceeded the time limit (%u ms); does it loop "
       "forever?", sb->time_limit_ms);
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  fg_sandbox *sb = sandbox_of(L);
  if (!sb->stopped) {
    sb->instructions += HOOK_PERIOD;
    char where[256];
    if (sb->instructions > sb->instruction_limit) {
      template_where(L, where, sizeof where);
      stop(sb, where, "template exceeded the instruction limit (%llu); does "
           "it loop forever?", (unsigned long long)sb->instruction_limit);
    } else if (past_deadline(sb)) {
      template_where(L, where, sizeof where);
      stop_for_time(sb, where);
    } else {
      return;
    }
  }
  lua_pushstring(L, sb->limit_message);
  lua_error(L);
}

/* Work counted in C: past the deadline, the templates stop. */
static bool charge_work(fg_sandbox *sb, size_t units) {
  sb->work = units < WORK_PERIOD ? sb->work + units : WORK_PERIOD;
  if (sb->work < WORK_PERIOD) return false;
  sb->work = 0;
  return sb->L && past_deadline(sb);
}

void fg_sandbox_charge(lua_State *L, size_t units) {
  fg_sandbox *sb = sandbox_of(L);
  if (!sb->stopped) {
    if (!charge_work(sb, units)) return;
    char where[256];
    template_where(L, where, sizeof where);
    stop_for_time(sb, where);
  }
  lua_pushstring(L, sb->limit_message);
  lua_error(L);
}

int fg_sandbox_string_error(lua_State *L, const char *what, size_t bytes) {
  fg_sandbox *sb = sandbox_of(L);
  char where[256];
  template_where(L, where, sizeof where);
  if (bytes > sb->memory_limit)
    stop(sb, where, "template exceeded the memory limit (%zu MiB): %s would "
         "make a string of %zu bytes or more", sb->memory_limit >> 20, what,
         bytes);
  else
    stop(sb, where, "template exceeded the memory limit of one string "
         "(%u MiB): %s would make one of %zu bytes or more",
         FG_STRING_MAX >> 20, what, bytes);
  lua_pushstring(L, sb->limit_message);
  return lua_error(L);
}

/* ---- the allocator ---------------------------------------------------- */

/* Lua gave up on the open refusal (or its retry). */
static void give_up(fg_sandbox *sb) {
  sb->refused.open = false;
  if (sb->gave_up) return;
  sb->gave_up = sb->refused.why;
  memcpy(sb->gave_up_where, sb->refused.where, sizeof sb->gave_up_where);
}

/* Refuses a request; retry: it is Lua's retry of the open refusal. */
static void *refuse(fg_sandbox *sb, refusal why, bool retry, void *ptr, size_t osize,
                    size_t nsize) {
  sb->refused.ptr = ptr;
  sb->refused.osize = osize;
  sb->refused.nsize = nsize;
  sb->refused.why = why;
  sb->refused.open = true;
  if (sb->L) template_where(sb->L, sb->refused.where, sizeof sb->refused.where);
  else sb->refused.where[0] = '\0';
  if (retry) give_up(sb);
  return NULL;
}

/* What a "not enough memory" error of Lua's was: the refusal it gave up
 * on, or the open one (no request came after it); *where its line. */
static refusal memory_error_cause(const fg_sandbox *sb, const char **where) {
  if (sb->gave_up) {
    *where = sb->gave_up_where;
    return sb->gave_up;
  }
  *where = sb->refused.where;
  return sb->refused.open ? sb->refused.why : REFUSED_NONE;
}

/* When ptr is NULL, osize is the type of the object Lua makes. */
static bool is_new_string(const void *ptr, size_t osize) {
  return !ptr && osize == LUA_TSTRING;
}

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  fg_sandbox *sb = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    sb->used -= old;
    return NULL;
  }
  bool retry = false;
  if (nsize > old) {
    /* The first request that grows after a refusal is its retry, or Lua
     * gave up on it (a new object's request names only its type and size,
     * which a later one may share: only this one counts). */
    if (sb->refused.open) {
      retry = sb->refused.ptr == ptr && sb->refused.osize == osize &&
              sb->refused.nsize == nsize;
      if (retry) sb->refused.open = false;
      else give_up(sb);
    }
    if (nsize - old > sb->memory_limit - sb->used)
      return refuse(sb, REFUSED_BUDGET, retry, ptr, osize, nsize);
    if (is_new_string(ptr, osize)) {
      if (sb->probing_strings) {
        sb->string_header = nsize;  /* minus the probe's length, by the caller */
        sb->probing_strings = false;
      } else if (nsize - sb->string_header > FG_STRING_MAX + 1 && sb->L) {
        /* It can never fit: the templates stop here (Lua raises its
         * out-of-memory error, then the hook the limit's). */
        char where[256];
        template_where(sb->L, where, sizeof where);
        stop(sb, where, "template exceeded the memory limit of one string "
             "(%u MiB)", FG_STRING_MAX >> 20);
        return NULL;
      }
    }
    if (charge_work(sb, nsize - old) && !sb->stopped) {
      char where[256];
      template_where(sb->L, where, sizeof where);
      stop_for_time(sb, where);
    }
  }
  void *p = realloc(ptr, nsize);
  if (p) {
    sb->used = sb->used - old + nsize;
    return p;
  }
  /* Lua assumes that a block never fails to shrink: keep the larger one. */
  if (nsize <= old) return ptr;
  return refuse(sb, REFUSED_SYSTEM, retry, ptr, osize, nsize);
}

/* ---- template files -------------------------------------------------- */

static bool valid_template_name(const char *name) {
  if (!*name || name[0] == '.') return false;
  for (const char *p = name; *p; ++p) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return true;
}

typedef struct open_template {
  int fd;
  size_t size;
  int error;  /* errno of a failed read */
} open_template;

/* Reads the open file into a string, in protected mode: whatever happens,
 * the caller closes the file. */
static int read_open_template(lua_State *L) {
  open_template *f = lua_touserdata(L, 1);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, f->size);
  size_t got = 0;
  while (got < f->size) {
    ssize_t n = read(f->fd, p + got, f->size - got);
    if (n > 0) {
      got += (size_t)n;
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      f->error = errno;
      return 0;
    }
  }
  luaL_pushresultsize(&b, got);
  return 1;
}

/* A template from the folder, through a regular file only: a symbolic link
 * could lead anywhere on the host, and opening a FIFO for reading would
 * wait for a writer (O_NONBLOCK returns at once, then fstat refuses it). */
static int read_from_dir(lua_State *L, const char *dir, const char *name) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s/%s: path too long", dir, name);
    return 2;
  }
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    struct stat st;
    lua_pushnil(L);
    if (e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
      lua_pushfstring(L, "%s: is a symbolic link (templates must be regular "
                      "files in the template folder)", path);
    else
      lua_pushfstring(L, "%s: cannot open template: %s", path, strerror(e));
    return 2;
  }
  struct stat st;
  const char *problem = NULL;
  if (fstat(fd, &st) != 0)
    problem = strerror(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "not a regular file (templates must be regular files in the "
              "template folder)";
  else if (st.st_size > (off_t)FG_TEMPLATE_FILE_MAX)
    problem = "template is larger than 1 MiB";
  if (problem) {
    close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, problem);
    return 2;
  }
  open_template f = {fd, (size_t)st.st_size, 0};
  lua_pushcfunction(L, read_open_template);
  lua_pushlightuserdata(L, &f);
  int status = lua_pcall(L, 1, 1, 0);
  close(fd);
  if (status != LUA_OK) return lua_error(L);
  if (f.error) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: cannot read template: %s", path, strerror(f.error));
    return 2;
  }
  lua_pushstring(L, path);
  return 2;
}

/* read_template(name) -> text, chunkname | nil, message */
static int read_template(lua_State *L) {
  fg_sandbox *sb = sandbox_of(L);
  const char *name = luaL_checkstring(L, 1);
  if (!valid_template_name(name)) {
    lua_pushnil(L);
    lua_pushfstring(L, "invalid template name '%s'", name);
    return 2;
  }
  if (sb->template_dir) return read_from_dir(L, sb->template_dir, name);
  for (const fg_embedded_file *f = fg_builtin_templates; f->name; ++f) {
    if (strcmp(f->name, name) == 0) {
      lua_pushlstring(L, (const char *)f->data, f->size);
      lua_pushfstring(L, "templates/%s", name);
      return 2;
    }
  }
  lua_pushnil(L);
  lua_pushfstring(L, "templates/%s: no such built-in template", name);
  return 2;
}

/* ---- the state ----------------------------------------------------------- */

static void open_safe_libs(lua_State *L) {
  static const luaL_Reg libs[] = {
      {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
      {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL},
  };
  for (const luaL_Reg *lib = libs; lib->func; ++lib) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  /* The engine needs load(); nothing needs to read files. */
  lua_pushnil(L);
  lua_setglobal(L, "dofile");
  lua_pushnil(L);
  lua_setglobal(L, "loadfile");
}

static const fg_embedded_file *engine_file(void) {
  for (const fg_embedded_file *f = fg_builtin_engine; f->name; ++f)
    if (strcmp(f->name, "engine.lua") == 0) return f;
  return NULL;
}

/* A string object's size besides its text, measured on one: the allocator
 * then knows a string's length from the size asked for it. */
static void probe_string_header(lua_State *L, fg_sandbox *sb) {
  static const char probe[] = "a string longer than Lua's short ones, which "
                              "it would share";
  sb->probing_strings = true;
  lua_pushlstring(L, probe, sizeof probe - 1);
  lua_pop(L, 1);
  if (sb->probing_strings) {  /* not seen: count the whole size */
    sb->probing_strings = false;
    sb->string_header = 0;
  } else {
    sb->string_header -= sizeof probe - 1 + 1;
  }
}

/* Opens the libraries, then runs engine.lua with read_template and the
 * sandbox's library functions as arguments and keeps its table.  In
 * protected mode: an allocation failure is an error, not a panic. */
static int load_engine(lua_State *L) {
  fg_sandbox *sb = lua_touserdata(L, 1);
  probe_string_header(L, sb);
  open_safe_libs(L);
  const fg_embedded_file *f = engine_file();
  if (!f) return luaL_error(L, "engine.lua is not built in");
  if (luaL_loadbufferx(L, (const char *)f->data, f->size, ENGINE_CHUNK, "t") !=
      LUA_OK)
    return lua_error(L);
  lua_pushcfunction(L, read_template);
  fg_sandbox_push_library(L);
  lua_call(L, 2, 1);
  sb->engine_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

flowgen_status fg_sandbox_open(const char *template_dir,
                               const fg_sandbox_limits *limits,
                               fg_sandbox **out, flowgen_error *err) {
  *out = NULL;
  fg_sandbox *sb = calloc(1, sizeof *sb);
  if (!sb) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  sb->instruction_limit = limits && limits->instructions
                              ? limits->instructions
                              : FG_DEFAULT_INSTRUCTION_LIMIT;
  sb->memory_limit =
      limits && limits->memory ? limits->memory : FG_DEFAULT_MEMORY_LIMIT;
  sb->time_limit_ms =
      limits && limits->time_ms ? limits->time_ms : FG_DEFAULT_TIME_LIMIT_MS;
  clock_gettime(CLOCK_MONOTONIC, &sb->deadline);
  sb->deadline.tv_sec += sb->time_limit_ms / 1000;
  sb->deadline.tv_nsec += (long)(sb->time_limit_ms % 1000) * 1000000L;
  if (sb->deadline.tv_nsec >= 1000000000L) {
    sb->deadline.tv_sec += 1;
    sb->deadline.tv_nsec -= 1000000000L;
  }
  if (template_dir && !(sb->template_dir = strdup(template_dir))) {
    free(sb);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  }
  sb->L = lua_newstate(limited_alloc, sb);
  if (!sb->L) {
    fg_sandbox_close(sb);
    return fg_fail(err, FLOWGEN_NOMEM, "cannot create the Lua state");
  }
  lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, HOOK_PERIOD);
  lua_State *L = sb->L;
  lua_pushcfunction(L, load_engine);
  lua_pushlightuserdata(L, sb);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char *message = lua_tostring(L, -1), *where;
    flowgen_status st =
        memory_error_cause(sb, &where) == REFUSED_SYSTEM
            ? fg_fail(err, FLOWGEN_NOMEM, "out of memory starting the template engine")
            : fg_fail(err, FLOWGEN_INTERNAL, "template engine: %s",
                      message ? message : "error object is not a string");
    fg_sandbox_close(sb);
    return st;
  }
  *out = sb;
  return FLOWGEN_OK;
}

void fg_sandbox_close(fg_sandbox *sb) {
  if (!sb) return;
  if (sb->L) lua_close(sb->L);
  free(sb->template_dir);
  free(sb);
}

lua_State *fg_sandbox_state(fg_sandbox *sb) { return sb->L; }

void fg_sandbox_push_engine(fg_sandbox *sb) {
  lua_rawgeti(sb->L, LUA_REGISTRYINDEX, sb->engine_ref);
}

flowgen_status fg_sandbox_failure(fg_sandbox *sb, const char *message,
                                  flowgen_error *err) {
  if (sb->stopped) return fg_fail(err, FLOWGEN_LIMIT, "%s", sb->limit_message);
  if (!message) message = "error object is not a string";
  /* Lua's message for an allocation that failed even after a collection:
   * the latest refusal says whose.  A refusal that the collection made good
   * was cleared, and has no part in a later error. */
  if (strstr(message, "not enough memory")) {
    const char *where;
    refusal cause = memory_error_cause(sb, &where);
    if (cause == REFUSED_BUDGET)
      return fg_fail(err, FLOWGEN_LIMIT,
                     "%stemplate exceeded the memory limit (%zu MiB)",
                     where, sb->memory_limit >> 20);
    if (cause == REFUSED_SYSTEM)
      return fg_fail(err, FLOWGEN_NOMEM,
                     "out of memory rendering the templates: %s", message);
  }
  return fg_fail(err, FLOWGEN_TEMPLATE, "%s", message);
}
