/* The Lua state that runs the template engine: capped memory and
 * instructions, only safe libraries, templates read from the built-in table
 * or a folder. */
#ifndef FLOWGEN_SANDBOX_H
#define FLOWGEN_SANDBOX_H

#include "internal.h"

#include <lua.h>

#define FG_DEFAULT_INSTRUCTION_LIMIT 200000000ull /* about a second */
#define FG_DEFAULT_MEMORY_LIMIT (256u << 20)
#define FG_TEMPLATE_FILE_MAX (8u << 20)

typedef struct fg_sandbox fg_sandbox;

/* Creates the state and loads the engine; on success *engine_ref is the
 * registry reference of the engine table.  template_dir may be NULL. */
FG_HIDDEN flowgen_status fg_sandbox_open(const char *template_dir,
                                         uint64_t instruction_limit,
                                         size_t memory_limit, fg_sandbox **out,
                                         flowgen_error *err);
FG_HIDDEN void fg_sandbox_close(fg_sandbox *sb);
FG_HIDDEN lua_State *fg_sandbox_state(fg_sandbox *sb);
/* Pushes the engine table. */
FG_HIDDEN void fg_sandbox_push_engine(fg_sandbox *sb);
/* Reports a failed run: LIMIT (with where the cap was hit) when a cap was
 * hit, NOMEM when message is Lua's out-of-memory error after the allocator
 * failed, else TEMPLATE with message. */
FG_HIDDEN flowgen_status fg_sandbox_failure(fg_sandbox *sb,
                                            const char *message,
                                            flowgen_error *err);

#endif
