/* The Lua state that runs the template engine: capped memory, instructions,
 * time and string size, only safe libraries, templates read from the
 * built-in table or a folder. */
#ifndef FLOWGEN_SANDBOX_H
#define FLOWGEN_SANDBOX_H

#include "internal.h"

#include <lua.h>

#define FG_DEFAULT_INSTRUCTION_LIMIT 200000000ull /* about a second */
#define FG_DEFAULT_MEMORY_LIMIT (256u << 20)
/* Well above what the largest shape takes, under valgrind on busy cores
 * (make valgrind) too. */
#define FG_DEFAULT_TIME_LIMIT_MS 30000u
/* The longest string a template can make.  An instruction on a string (a
 * comparison, a conversion to a number) runs in C without a look at the
 * clock: the cap keeps it to milliseconds.  The built-in templates' longest
 * string at any shape, plan.lua's own text, is far shorter; the source they
 * render is joined in C. */
#define FG_STRING_MAX (1u << 20)
/* A template file is read as one string. */
#define FG_TEMPLATE_FILE_MAX FG_STRING_MAX

/* Pushes the table the engine is given for spec and opts (generate.c):
 * every input the templates see.  Allocates: call it protected. */
FG_HIDDEN void fg_push_spec(lua_State *L, const flowgen_spec *spec,
                            const flowgen_options *opts);
/* opts's device figures and part fields, checked (FLOWGEN_INVALID). */
FG_HIDDEN flowgen_status fg_options_check(const flowgen_options *opts, flowgen_error *err);

typedef struct fg_sandbox fg_sandbox;

typedef struct fg_sandbox_limits {
  uint64_t instructions;  /* 0 = FG_DEFAULT_INSTRUCTION_LIMIT */
  size_t memory;          /* bytes; 0 = FG_DEFAULT_MEMORY_LIMIT */
  uint32_t time_ms;       /* from fg_sandbox_open on; 0 = the default */
} fg_sandbox_limits;

/* Creates the state and loads the engine.  template_dir may be NULL. */
FG_HIDDEN flowgen_status fg_sandbox_open(const char *template_dir,
                                         const fg_sandbox_limits *limits,
                                         fg_sandbox **out, flowgen_error *err);
FG_HIDDEN void fg_sandbox_close(fg_sandbox *sb);
FG_HIDDEN lua_State *fg_sandbox_state(fg_sandbox *sb);
/* Pushes the engine table. */
FG_HIDDEN void fg_sandbox_push_engine(fg_sandbox *sb);
/* Reports a failed run: LIMIT (with where the limit was hit) when a limit
 * stopped the templates or message is Lua's out-of-memory error after the
 * memory limit refused an allocation, NOMEM when it is that error after the
 * C allocator failed, else TEMPLATE with message. */
FG_HIDDEN flowgen_status fg_sandbox_failure(fg_sandbox *sb,
                                            const char *message,
                                            flowgen_error *err);

/* ---- for the library functions the templates get (sandbox_lib.c) ---- */

/* Counts units of C work (about a byte copied or compared each) done for
 * the templates; now and then reads the clock and, past the time limit,
 * raises the limit's error. */
FG_HIDDEN void fg_sandbox_charge(lua_State *L, size_t units);
/* Raises the error of a string over FG_STRING_MAX: what would make one of
 * `bytes` bytes or more. */
FG_HIDDEN int fg_sandbox_string_error(lua_State *L, const char *what,
                                      size_t bytes);
/* Pushes a table of the library functions (string.find, string.rep, the
 * table functions) that engine.lua gives the templates in place of Lua's. */
FG_HIDDEN void fg_sandbox_push_library(lua_State *L);

#endif
