/* The template sandbox: what templates cannot reach, the instruction and
 * memory caps, error locations (template file:line), the planner's refusal,
 * sorted iteration.  Each test works in a temporary copy of the built-in
 * templates and overwrites one file with a hostile or broken version. */
#include "support.h"

#include "flowgen.h"
#include "sandbox.h"

#include <lauxlib.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PATH_SIZE FG_TEST_PATH_SIZE
#define TEST_INSTRUCTIONS 5000000u /* a few ms of Lua: keeps the caps fast */

/* ---- helpers ------------------------------------------------------------ */

/* Each test: a fresh folder holding a copy of the built-in templates. */
static int setup(void **state) {
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  *state = dir;
  return 0;
}

static int teardown(void **state) {
  fg_test_rmtree(*state);
  free(*state);
  return 0;
}

typedef struct run_result {
  flowgen_status status;
  flowgen_error err;
  char *source;   /* malloc()ed on success */
  double seconds;
} run_result;

static run_result run_with(const flowgen_options *opts) {
  run_result r = {FLOWGEN_OK, {FLOWGEN_OK, ""}, NULL, 0};
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = NULL;
  double t0 = fg_test_now_seconds();
  r.status = flowgen_generate(&spec, opts, &k, &r.err);
  r.seconds = fg_test_now_seconds() - t0;
  if (r.status == FLOWGEN_OK) {
    assert_non_null(k);
    r.source = strdup(flowgen_kernel_source(k));
    flowgen_kernel_free(k);
  } else {
    assert_null(k);
    assert_int_equal(r.err.status, r.status);
  }
  return r;
}

static run_result run(const char *dir, uint64_t instructions, size_t memory) {
  flowgen_options opts = {.template_dir = dir,
                          .instruction_limit = instructions,
                          .memory_limit = memory};
  return run_with(&opts);
}

/* Runs generation from dir and checks the status and that the message holds
 * each of the NULL-terminated substrings. */
static void expect_failure(const char *dir, uint64_t instructions,
                           size_t memory, flowgen_status status, ...) {
  run_result r = run(dir, instructions, memory);
  if (r.status != status)
    fail_msg("status %s, expected %s; message: %s",
             flowgen_status_name(r.status), flowgen_status_name(status),
             r.status ? r.err.message : "(none)");
  va_list ap;
  va_start(ap, status);
  for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
    if (!strstr(r.err.message, s)) {
      va_end(ap);
      fail_msg("expected \"%s\" in the message: %s", s, r.err.message);
    }
  va_end(ap);
}

static char *expect_success(const char *dir) {
  run_result r = run(dir, 0, 0);
  if (r.status != FLOWGEN_OK)
    fail_msg("generation failed: %s: %s", flowgen_status_name(r.status),
             r.err.message);
  return r.source;
}

/* Generation in a child process with a deadline, for templates that might
 * never return.  Fails the test if the child is still running after
 * `seconds` (it is killed); otherwise gives its status, message and time. */
typedef struct deadline_result {
  flowgen_status status;
  double seconds;
  char message[FLOWGEN_ERROR_MESSAGE_MAX];
} deadline_result;

static void run_with_deadline(const flowgen_options *opts, double seconds,
                              deadline_result *out) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  double t0 = fg_test_now_seconds();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowgen_kernel *k = NULL;
    flowgen_error err = {FLOWGEN_OK, ""};
    flowgen_status st = flowgen_generate(&spec, opts, &k, &err);
    flowgen_kernel_free(k);
    int code = (int)st;
    ssize_t n = write(fds[1], &code, sizeof code);
    n += write(fds[1], err.message, strlen(err.message) + 1);
    close(fds[1]);
    _exit(n > 0 ? 0 : 1);
  }
  close(fds[1]);
  if (!fg_test_timing_checks()) seconds *= 10;
  int wstatus = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &wstatus, WNOHANG)) == 0 &&
         fg_test_now_seconds() - t0 < seconds) {
    struct timespec nap = {0, 5 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  out->seconds = fg_test_now_seconds() - t0;
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
    close(fds[0]);
    fail_msg("generation still running after %.1f s: the sandbox's limits "
             "did not stop the template",
             seconds);
  }
  assert_int_equal(done, pid);
  assert_true(WIFEXITED(wstatus));
  int code = -1;
  assert_int_equal(read(fds[0], &code, sizeof code), (ssize_t)sizeof code);
  ssize_t n = read(fds[0], out->message, sizeof out->message - 1);
  out->message[n > 0 ? n : 0] = '\0';
  close(fds[0]);
  out->status = (flowgen_status)code;
}

/* ---- what templates cannot reach --------------------------------------------- */

typedef struct hostile {
  const char *line;     /* becomes line 3 of file.cut */
  const char *message;  /* also expected (NULL: only the location) */
} hostile;

static const hostile hostile_lines[] = {
    {"| local f = io.open('PWNED', 'w')", "undefined variable 'io'"},
    {"| os.execute('touch PWNED')", "undefined variable 'os'"},
    {"| local m = require('io')", "undefined variable 'require'"},
    {"| dofile('PWNED')", "undefined variable 'dofile'"},
    {"| local f = loadfile('PWNED')", "undefined variable 'loadfile'"},
    {"| local f = load('return 1')", "undefined variable 'load'"},
    {"| local f = loadstring('return 1')", "undefined variable 'loadstring'"},
    {"| local i = debug.getinfo(1)", "undefined variable 'debug'"},
    {"| local p = package.loaded", "undefined variable 'package'"},
    {"| collectgarbage('stop')", "undefined variable 'collectgarbage'"},
    {"| local ok = pcall(error, 'x')", "undefined variable 'pcall'"},
    {"| local ok = xpcall(error, print)", "undefined variable 'xpcall'"},
    {"| print('x')", "undefined variable 'print'"},
    {"| local g = _G.io", "undefined variable '_G'"},
    {"| local b = string.dump(function() end)", "dump"},
    {"| local f = load(('').dump(function() return 1 end))", NULL},
    {"| local r = math.random(6)", "random"},
    {"| local s = getmetatable('').__index", "boolean"},
    {"| local f = rawget(_ENV, 'io').open", "nil"},
    {"$(io.open('PWNED', 'w'))", "undefined variable 'io'"},
    {"x = $(os.getenv('HOME'))", "undefined variable 'os'"},
};

static void test_hostile_calls_fail_with_location(void **state) {
  const char *dir = *state;
  char pwned[PATH_SIZE];
  fg_test_path_join(pwned, dir, "PWNED");
  for (size_t i = 0; i < sizeof hostile_lines / sizeof hostile_lines[0];
       ++i) {
    const hostile *h = &hostile_lines[i];
    /* Point the hostile line's file names into the test folder. */
    char line[PATH_SIZE * 2] = "";
    const char *at = strstr(h->line, "PWNED");
    if (at)
      snprintf(line, sizeof line, "%.*s%s%s", (int)(at - h->line), h->line,
               pwned, at + 5);
    else
      snprintf(line, sizeof line, "%s", h->line);
    char text[PATH_SIZE * 3];
    snprintf(text, sizeof text, "// line 1\n| local x = 1\n%s\nafter\n", line);
    fg_test_write_template(dir, "file.cut", text);
    run_result r = run(dir, 0, 0);
    if (r.status != FLOWGEN_TEMPLATE)
      fail_msg("'%s': status %s, expected TEMPLATE (%s)", h->line,
               flowgen_status_name(r.status),
               r.status ? r.err.message : r.source);
    if (!strstr(r.err.message, "file.cut:3:"))
      fail_msg("'%s': the message does not name file.cut:3: %s", h->line,
               r.err.message);
    if (h->message && !strstr(r.err.message, h->message))
      fail_msg("'%s': expected \"%s\" in: %s", h->line, h->message,
               r.err.message);
    assert_false(fg_test_file_exists(pwned));
  }
}

static void test_hostile_planner_fails_with_location(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "plan.lua",
                         "-- a planner that reads files\n"
                         "local f = io.open('/etc/passwd')\n"
                         "return function(spec) return nil end\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "plan.lua:2:",
                 "undefined variable 'io'", NULL);
  fg_test_write_template(dir, "plan.lua",
                         "return function(spec)\n"
                         "  local info = debug.getinfo(1)\n"
                         "end\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "plan.lua:2:",
                 "undefined variable 'debug'", NULL);
}

/* The string metatable is hidden; strings' methods must not reach more
 * than the template's `string` table (string.dump makes bytecode). */
static void test_string_metatable(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "file.cut",
                         "$(tostring(getmetatable('')))\n"
                         "$(('ab'):rep(2)) $(('x'):upper())\n");
  char *src = expect_success(dir);
  assert_string_equal(src, "false\nabab X\n");
  free(src);

  fg_test_write_template(
      dir, "plan.lua",
      "assert(getmetatable('') == false, 'metatable visible')\n"
      "return function(spec)\n"
      "  assert(getmetatable('') == false)\n"
      "  return {template = 'file.cut', variants = {{strategy = 'x',"
      " symbol = 'k', pack_symbol = 'p', min_batch = 0,"
      " max_batch = -1, block_threads = 32, rows_per_block = 1,"
      " cluster_blocks = 1, shared_bytes = 0, params_bytes = 4,"
      " pack_threads = 32}}}\n"
      "end\n");
  fg_test_write_template(dir, "file.cut", "$(type(('').dump))\n");
  src = expect_success(dir);
  /* string.dump is left out of the template's string table on purpose;
   * the method route ("").dump must not bring it back. */
  bool hidden = strcmp(src, "nil\n") == 0;
  free(src);
  if (!hidden) fail_msg("(\"\").dump is reachable from templates");
}

static void test_bytecode_planner_is_refused(void **state) {
  const char *dir = *state;
  /* Lua 5.4's chunk header (LUA_SIGNATURE, version 0x54, format 0,
   * LUAC_DATA, sizes), then junk: load() must refuse it before reading
   * further. */
  static const char bytecode[] =
      "\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08\x78\x56\x00\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x00\x00\x28\x77\x40\x01\x00\x00";
  char path[PATH_SIZE];
  fg_test_path_join(path, dir, "plan.lua");
  fg_test_write_file(path, bytecode, sizeof bytecode - 1);
  run_result r = run(dir, 0, 0);
  assert_int_equal(r.status, FLOWGEN_TEMPLATE);
  if (!strstr(r.err.message, "binary") && !strstr(r.err.message, "text"))
    fail_msg("message does not say binary/text: %s", r.err.message);
}

/* Every template error names its file (DESIGN: errors carry their
 * context); the bytecode refusal comes from load() without a position. */
static void test_bytecode_refusal_names_the_file(void **state) {
  const char *dir = *state;
  static const char bytecode[] = "\x1bLua\x54\x00\x19\x93\r\n\x1a\n";
  char path[PATH_SIZE];
  fg_test_path_join(path, dir, "plan.lua");
  fg_test_write_file(path, bytecode, sizeof bytecode - 1);
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "binary", "plan.lua", NULL);
}

/* ---- the caps ------------------------------------------------------------------ */

static void test_endless_loop_hits_instruction_limit(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "// 1\n// 2\n| local n = 0\n| while true do n = n + 1 end\n"
      "never\n");
  run_result r = run(dir, TEST_INSTRUCTIONS, 0);
  assert_int_equal(r.status, FLOWGEN_LIMIT);
  assert_non_null(strstr(r.err.message, "instruction limit"));
  if (fg_test_timing_checks()) assert_true(r.seconds < 2.0);
  /* Where it looped: the template's own file and line. */
  if (!strstr(r.err.message, "file.cut:4:"))
    fail_msg("the message does not name file.cut:4: %s", r.err.message);
}

static void test_endless_loop_in_planner(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "plan.lua",
                         "return function(spec)\n"
                         "  local x = 0\n"
                         "  while true do x = x + 1 end\n"
                         "end\n");
  expect_failure(dir, TEST_INSTRUCTIONS, 0, FLOWGEN_LIMIT, "instruction limit",
                 "plan.lua:3:", NULL);
}

/* A bare `while true do end` (one jump instruction) stops too, and a
 * recursion without end is an error naming the template. */
static void test_runaway_without_escape(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "file.cut", "| while true do end\n");
  expect_failure(dir, TEST_INSTRUCTIONS, 0, FLOWGEN_LIMIT, "instruction limit",
                 NULL);

  fg_test_write_template(dir, "file.cut",
                         "// 1\n| local function f(n) return 1 + f(n + 1) end\n"
                         "| f(1)\n");
  run_result r = run(dir, 0, 16u << 20);
  if (r.status != FLOWGEN_TEMPLATE && r.status != FLOWGEN_LIMIT)
    fail_msg("endless recursion: status %s (%s)",
             flowgen_status_name(r.status), r.err.message);
  if (r.status == FLOWGEN_TEMPLATE)
    assert_non_null(strstr(r.err.message, "file.cut:2:"));
}

static void test_memory_limit(void **state) {
  const char *dir = *state;
  const size_t limit = 16u << 20;
  fg_test_write_template(dir, "file.cut",
                         "// 1\n| local s = string.rep('x', 64 * 1024 * 1024)\n"
                         "$(#s)\n");
  expect_failure(dir, 0, limit, FLOWGEN_LIMIT, "memory limit", "16 MiB", NULL);

  fg_test_write_template(dir, "file.cut",
                         "| local s = ('x'):rep(4 * 1024 * 1024)\n"
                         "| while true do s = s .. s end\n");
  expect_failure(dir, 0, limit, FLOWGEN_LIMIT, "memory limit", NULL);

  fg_test_write_template(
      dir, "file.cut",
      "| local t = {}\n| for i = 1, 1e9 do t[i] = {i} end\n");
  expect_failure(dir, 0, limit, FLOWGEN_LIMIT, "memory limit", NULL);

  /* Under the limit, the same template works. */
  fg_test_write_template(dir, "file.cut",
                         "| local s = string.rep('x', 1024 * 1024)\n$(#s)\n");
  run_result r = run(dir, 0, limit);
  assert_int_equal(r.status, FLOWGEN_OK);
  assert_string_equal(r.source, "1048576\n");
  free(r.source);
}

/* Fills a table with small ones until the memory limit stops it (Lua
 * raises its error from an allocation: the loop never ends otherwise). */
static int fill_memory(lua_State *L) {
  lua_newtable(L);
  for (lua_Integer i = 1; i < LUA_MAXINTEGER; ++i) {
    lua_createtable(L, 1, 0);
    lua_rawseti(L, -2, i);
  }
  return 0;
}

/* Asks for a block a little larger than what is left of the limit. */
static int ask_past_the_limit(lua_State *L) {
  size_t limit = *(const size_t *)lua_touserdata(L, 1);
  size_t used = (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
  lua_newuserdatauv(L, limit - used + 4096, 0);
  return 0;
}

/* Lua's "not enough memory" is the memory limit's, whatever follows while
 * the error unwinds: here a request past the limit that the emergency
 * collection makes good, the filled table being garbage by then (the
 * engine's own requests can do so after a template's error, depending on
 * the heap's figures). */
static void test_memory_error_keeps_its_cause(void **state) {
  (void)state;
  const size_t limit = 16u << 20;
  fg_sandbox_limits limits = {0, limit, 0};
  fg_sandbox *sb = NULL;
  flowgen_error err;
  assert_int_equal(fg_sandbox_open(NULL, &limits, &sb, &err), FLOWGEN_OK);
  lua_State *L = fg_sandbox_state(sb);
  lua_pushcfunction(L, fill_memory);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_ERRMEM);
  const char *message = lua_tostring(L, -1);
  assert_non_null(strstr(message, "not enough memory"));
  lua_pushcfunction(L, ask_past_the_limit);
  lua_pushlightuserdata(L, (void *)&limit);
  assert_int_equal(lua_pcall(L, 1, 0, 0), LUA_OK);
  assert_int_equal(fg_sandbox_failure(sb, message, &err), FLOWGEN_LIMIT);
  assert_non_null(strstr(err.message, "memory limit (16 MiB)"));
  lua_pop(L, 1);
  fg_sandbox_close(sb);
}

/* A cap hit in one generation does not carry over to the next. */
static void test_caps_are_per_generation(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "file.cut", "| while true do end\n");
  expect_failure(dir, TEST_INSTRUCTIONS, 0, FLOWGEN_LIMIT, NULL);
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = NULL;
  flowgen_error err;
  assert_int_equal(flowgen_generate(&spec, NULL, &k, &err), FLOWGEN_OK);
  flowgen_kernel_free(k);
}

/* The count hook does not run inside C functions: Lua patterns with
 * heavy backtracking would run for hours.  The cap must still hold. */
static void test_pattern_backtracking_is_capped(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "file.cut",
                         "| local s = string.rep('a', 3000)\n"
                         "| local found = string.find(s, '.-.-.-.-b')\n"
                         "$(tostring(found))\n");
  flowgen_options opts = {.template_dir = dir,
                          .instruction_limit = TEST_INSTRUCTIONS};
  deadline_result r;
  run_with_deadline(&opts, 3.0, &r);
  /* find() is plain text search in templates: nothing to backtrack. */
  assert_int_equal(r.status, FLOWGEN_OK);
  /* and the pattern functions are not there at all */
  fg_test_write_template(dir, "file.cut",
                         "| local m = string.match('ab', '.-b')\n");
  run_with_deadline(&opts, 3.0, &r);
  assert_int_equal(r.status, FLOWGEN_TEMPLATE);
  assert_non_null(strstr(r.message, "file.cut:1:"));
}

/* Finalizers run with hooks off (Lua's GCTM): neither the instruction nor
 * the time limit could stop an endless __gc, so none may be installed.  Lua
 * marks an object for finalization only when setmetatable() sees __gc in
 * its metatable, and setmetatable() refuses such a metatable; a __gc added
 * afterwards (or to a metatable the engine set) is never called: the
 * endless one below would otherwise hang generation or lua_close. */
static void test_finalizers_cannot_be_installed(void **state) {
  const char *dir = *state;
  flowgen_options opts = {.template_dir = dir,
                          .instruction_limit = TEST_INSTRUCTIONS};
  deadline_result r;
  static const char *const refused[] = {
      "// 1\n| setmetatable({}, {__gc = function() while true do end end})\n",
      "// 1\n| setmetatable({}, {__gc = false})\n",
      /* a metatable that got its __gc before the call */
      ("// 1\n| local mt = {}\n| rawset(mt, '__gc', function() while true do end end)\n"
       "| setmetatable({}, mt)\n"),
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
    fg_test_write_template(dir, "file.cut", refused[i]);
    run_with_deadline(&opts, 3.0, &r);
    if (r.status != FLOWGEN_TEMPLATE || !strstr(r.message, "__gc") ||
        !strstr(r.message, "file.cut:"))
      fail_msg("case %zu: %s: %s", i, flowgen_status_name(r.status), r.message);
  }
  static const char *const never_called[] = {
      "| local mt = {}\n| local t = setmetatable({}, mt)\n"
      "| rawset(mt, '__gc', function() while true do end end)\n| t = nil\ndone\n",
      "| local mt = {}\n| local t = setmetatable({}, mt)\n"
      "| mt.__gc = function() while true do end end\n| t = nil\ndone\n",
      /* the metatable the engine gave the template's environment */
      "| getmetatable(_ENV).__gc = function() while true do end end\ndone\n",
  };
  for (size_t i = 0; i < sizeof never_called / sizeof never_called[0]; ++i) {
    fg_test_write_template(dir, "file.cut", never_called[i]);
    run_with_deadline(&opts, 3.0, &r);
    if (r.status != FLOWGEN_OK)
      fail_msg("case %zu: %s: %s", i, flowgen_status_name(r.status), r.message);
  }
}

/* ---- time ---------------------------------------------------------------------- */

/* A time limit of ms, past the planner's own time where Lua runs slowly
 * (valgrind, sanitizers): there the default shape's plan takes a second or
 * two. */
static uint32_t time_limit(uint32_t ms) {
  return fg_test_timing_checks() ? ms : ms + 4000;
}

/* Instructions that each cost a lot of C work (a long search, a big copy,
 * an endless element loop): the instruction count stays small, the clock
 * does not.  Each must stop at the time limit, at the template's line. */
static const struct {
  const char *what, *text;
} costly[] = {
    {"plain find, 512 KiB needle",
     "| local h, n = string.rep('a', 2^20), string.rep('a', 2^19) .. 'b'\n"
     "| while true do local f = string.find(h, n) end\n"},
    {"1 MiB string.rep",
     "// 1\n| while true do local s = string.rep('x', 2^20) end\n"},
    {"1 MiB concatenation",
     "| local s = string.rep('x', 2^19)\n| while true do local t = s .. s end\n"},
    {"table.concat",
     "| local t = {} for i = 1, 2^16 do t[i] = 'abcdefgh' end\n"
     "| while true do local s = table.concat(t) end\n"},
    {"table.insert under a huge __len",
     "| local t = setmetatable({}, {__len = function() return math.maxinteger - 1 end})\n"
     "| table.insert(t, 1, 'x')\n"},
    {"table.remove under a huge __len",
     "| local t = setmetatable({}, {__len = function() return math.maxinteger - 1 end})\n"
     "| table.remove(t, 1)\n"},
    {"table.move of an endless range",
     "// 1\n| table.move({}, 1, math.maxinteger - 1, 2)\n"},
    {"table.concat under a huge __len",
     "// 1\n| local s = table.concat(setmetatable({}, {__index = function() "
     "return '' end, __len = function() return math.maxinteger end}))\n"},
    {"table.unpack of 900000 values",
     "| local t = {} for i = 1, 900000 do t[i] = i end\n"
     "| while true do local n = select('#', table.unpack(t)) end\n"},
    {"table.sort with a C comparator",
     "| local t = {} for i = 1, 2^19 do t[i] = (i * 7919) % 1000003 end\n"
     "| while true do table.sort(t, math.ult) end\n"},
    /* No function of the sandbox's in these: the length limit of strings
     * and the hook's period bound them. */
    {"'<' of 1 MiB strings of zero bytes (strcoll a byte at a time)",
     "| local a, b = string.rep('\\0', 2^20), string.rep('\\0', 2^20)\n"
     "| while true do local c = a < b end\n"},
    {"tonumber of a 1 MiB numeral",
     "| local a = string.rep('1', 2^20)\n"
     "| while true do local n = tonumber(a) end\n"},
};

static void test_costly_instructions_hit_the_time_limit(void **state) {
  const char *dir = *state;
  /* 300 ms: a case's first line (900000 table inserts) took over 100 ms on
   * a loaded 2-core machine, and the limit then named line 1.  No
   * instruction limit in reach: under the sanitizers' longer time limit,
   * table.concat's metamethod calls could reach it first. */
  flowgen_options opts = {.template_dir = dir, .time_limit_ms = time_limit(300),
                          .instruction_limit = UINT64_MAX};
  char expected[64];
  snprintf(expected, sizeof expected, "time limit (%u ms)", opts.time_limit_ms);
  for (size_t i = 0; i < sizeof costly / sizeof costly[0]; ++i) {
    fg_test_write_template(dir, "file.cut", costly[i].text);
    deadline_result r;
    run_with_deadline(&opts, 5.0, &r);
    if (r.status != FLOWGEN_LIMIT || !strstr(r.message, expected))
      fail_msg("%s: %s: %s", costly[i].what, flowgen_status_name(r.status),
               r.message);
    /* (Under valgrind the limit can come within the line before.) */
    if (!strstr(r.message, fg_test_timing_checks() ? "file.cut:2:" : "file.cut:"))
      fail_msg("%s: the message does not name file.cut:2: %s", costly[i].what,
               r.message);
    if (fg_test_timing_checks() && r.seconds > 1.5)
      fail_msg("%s: stopped after %.2f s (limit %u ms)", costly[i].what,
               r.seconds, opts.time_limit_ms);
  }
}

/* The two attacks of the report: one string.find of a 1 MB pattern in an
 * 8 MB string (minutes of C), and a loop of 100 MB string.rep (0.6 s each).
 * Both end within the limit now, as a LIMIT naming the template's line. */
static void test_reported_attacks_are_stopped(void **state) {
  const char *dir = *state;
  static const char *const attacks[] = {
      "// 1\n| local s = string.rep('a', 8 * 1024 * 1024)\n"
      "| local p = string.rep('a', 1024 * 1024 - 1) .. 'b'\n"
      "| local found = string.find(s, p)\n$(tostring(found))\n",
      "// 1\n| for i = 1, 1000 do local s = string.rep('x', 100 * 1024 * 1024) end\n",
  };
  flowgen_options opts = {.template_dir = dir, .time_limit_ms = time_limit(200)};
  for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; ++i) {
    fg_test_write_template(dir, "file.cut", attacks[i]);
    deadline_result r;
    run_with_deadline(&opts, 5.0, &r);
    if (r.status != FLOWGEN_LIMIT || !strstr(r.message, "file.cut:2:"))
      fail_msg("attack %zu: %s: %s", i, flowgen_status_name(r.status),
               r.message);
    if (fg_test_timing_checks() && r.seconds > 2.0)
      fail_msg("attack %zu: stopped after %.2f s", i, r.seconds);
  }
}

/* time_limit_ms is the limit, with the instruction limit out of the way;
 * 0 is the default, generous for the largest shape. */
static void test_time_limit_option(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "file.cut", "// 1\n// 2\n| while true do end\n");
  flowgen_options opts = {.template_dir = dir,
                          .instruction_limit = UINT64_MAX,
                          .time_limit_ms = time_limit(300)};
  deadline_result r;
  run_with_deadline(&opts, 5.0, &r);
  assert_int_equal(r.status, FLOWGEN_LIMIT);
  char expected[96];
  snprintf(expected, sizeof expected,
           "file.cut:3: template exceeded the time limit (%u ms)",
           opts.time_limit_ms);
  if (!strstr(r.message, expected)) fail_msg("message: %s", r.message);
  assert_true(r.seconds >= opts.time_limit_ms / 1000.0);
  if (fg_test_timing_checks()) assert_true(r.seconds < 1.0);

  /* (Valgrind makes Lua some 30 times slower: the default is no
   * promise there.) */
  if (!fg_test_timing_checks()) return;
  flowgen_spec spec = fg_test_spec(1024, 4096, 10000, 90);
  spec.arch_specific = true;
  static const flowgen_solver solvers[] = {FLOWGEN_SOLVER_EULER,
                                           FLOWGEN_SOLVER_RK4};
  for (size_t i = 0; i < 2; ++i) {
    spec.solver = solvers[i];
    flowgen_kernel *k = NULL;
    flowgen_error err;
    double t0 = fg_test_now_seconds();
    if (flowgen_generate(&spec, NULL, &k, &err))
      fail_msg("the largest shape: %s", err.message);
    double seconds = fg_test_now_seconds() - t0;
    flowgen_kernel_free(k);
    if (fg_test_timing_checks() && seconds > 2.0)
      fail_msg("the largest shape took %.2f s", seconds);
  }
}

/* ---- string sizes ---------------------------------------------------------------- */

/* No string a template builds exceeds FG_STRING_MAX: each operation on one
 * stays short.  Exactly the cap works. */
static void test_string_size_is_capped(void **state) {
  const char *dir = *state;
  static const char *const over[] = {
      "// 1\n| local s = string.rep('x', 1024 * 1024 + 1)\n",
      "// 1\n| local s = string.rep('ab', 300000, ', ')\n",
      "// 1\n| local s = ('x'):rep(2^20) .. 'y'\n",
      ("| local t = {} for i = 1, 3 do t[i] = string.rep('x', 400000) end\n"
       "| local s = table.concat(t)\n"),
      "| local a = string.rep('x', 600000)\n| local s = string.format('%s%s', a, a)\n",
  };
  for (size_t i = 0; i < sizeof over / sizeof over[0]; ++i) {
    fg_test_write_template(dir, "file.cut", over[i]);
    run_result r = run(dir, 0, 0);
    if (r.status != FLOWGEN_LIMIT || !strstr(r.err.message, "file.cut:2:") ||
        !strstr(r.err.message, "1 MiB"))
      fail_msg("case %zu: %s: %s", i, flowgen_status_name(r.status),
               r.status ? r.err.message : r.source);
  }
  fg_test_write_template(dir, "file.cut",
                         "| local s = string.rep('x', 1024 * 1024)\n"
                         "| local t = string.rep('ab', 2^19, '')\n"
                         "$(#s) $(#t) $(#(s:sub(2) .. 'y'))\n");
  char *src = expect_success(dir);
  assert_string_equal(src, "1048576 1048576 1048576\n");
  free(src);
}

/* string.find and string.rep are the sandbox's own: they must give what
 * Lua's give (find as plain text search). */
static void test_find_and_rep_keep_their_meaning(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "| local function show(...)\n"
      "|   local t = table.pack(...)\n"
      "|   for i = 1, t.n do t[i] = tostring(t[i]) end\n"
      "|   return table.concat(t, ',')\n"
      "| end\n"
      "| local far = string.rep('ab', 40000) .. 'a.c'\n"
      "$(show(string.find('hello', 'l'))) $(show(('hello'):find('lo')))\n"
      "$(show(string.find('hello', 'l', 4))) $(show(string.find('hello', 'l', -2)))\n"
      "$(show(string.find('hello', 'x'))) $(show(string.find('hello', '', 3)))\n"
      "$(show(string.find('hello', '', 10))) $(show(string.find('a.c', '.')))\n"
      "$(show(string.find('hello', 'h', -100))) $(show(string.find(12345, 34)))\n"
      "$(show(string.find(far, 'a.c'))) $(show(string.find(far, 'ba', 65535)))\n"
      "$(show(string.find('', ''))) $(show(string.find('ab', 'abc')))\n"
      "$(string.rep('ab', 3)) $(string.rep('ab', 3, '-')) [$(string.rep('x', 0))]\n"
      "[$(string.rep('x', -2))] [$(string.rep('', 5, ''))] $(('x'):rep(2))\n");
  char *src = expect_success(dir);
  assert_string_equal(src,
                      "3,3 4,5\n"
                      "4,4 4,4\n"
                      "nil 3,2\n"
                      "nil 2,2\n"
                      "1,1 3,4\n"
                      "80001,80003 65536,65537\n"
                      "1,0 nil\n"
                      "ababab ab-ab-ab []\n"
                      "[] [] xx\n");
  free(src);
}

/* The table functions are the sandbox's own too (they check the clock as
 * they go): same results as Lua's. */
static void test_table_functions_keep_their_meaning(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "| local t = {1, 2, 3}\n"
      "| table.insert(t, 4) table.insert(t, 1, 0) table.insert(t, 3, 'x')\n"
      "$(table.concat(t, ' '))\n"
      "| local r = table.remove(t) local r1 = table.remove(t, 1)\n"
      "$(r) $(r1) $(table.concat(t, ' ')) $(tostring(table.remove({})))\n"
      "| local m = table.move({1, 2, 3, 4, 5}, 2, 4, 1)\n"
      "$(table.concat(m, ','))\n"
      "| local m2 = table.move({1, 2, 3, 4, 5}, 1, 3, 3)\n"
      "$(table.concat(m2, ','))\n"
      "| local m3 = table.move({1, 2, 3}, 1, 3, 2, {9})\n"
      "$(table.concat(m3, ','))\n"
      "$(table.concat({1, 2, 3}, '-', 2, 3)) [$(table.concat({}, 'x'))]\n"
      "$(select('#', table.unpack({1, 2, 3}))) $(select(2, table.unpack({1, 2, 3}, 2)))\n"
      "| local s = {5, 3, 9, 1} table.sort(s)\n"
      "| local d = {5, 3, 9, 1} table.sort(d, function(a, b) return a > b end)\n"
      "$(table.concat(s, ',')) $(table.concat(d, ','))\n"
      "$(table.pack(1, nil, 3).n)\n");
  char *src = expect_success(dir);
  assert_string_equal(src,
                      "0 1 x 2 3 4\n"
                      "4 0 1 x 2 3 nil\n"
                      "2,3,4,4,5\n"
                      "1,2,1,2,3\n"
                      "9,1,2,3\n"
                      "2-3 []\n"
                      "3 3\n"
                      "1,3,5,9 9,5,3,1\n"
                      "3\n");
  free(src);
  /* Their errors name the template line. */
  static const struct {
    const char *text, *message;
  } errors[] = {
      {"// 1\n| table.insert({}, 5, 'x')\n", "position out of bounds"},
      {"// 1\n| table.insert({}, 1, 2, 3)\n", "wrong number of arguments"},
      {"// 1\n| table.concat({1, {}, 3})\n", "invalid value (table) at index 2"},
      {"// 1\n| table.move({}, -1, math.maxinteger, 1)\n", "too many elements"},
      {"// 1\n| table.unpack({}, 1, 1e7)\n", "too many results"},
      {"// 1\n| table.sort({3, 2, 1}, 7)\n", "function expected"},
  };
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; ++i) {
    fg_test_write_template(dir, "file.cut", errors[i].text);
    expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "file.cut:2:", errors[i].message,
                   NULL);
  }
}

/* ---- what the generated source may include --------------------------------------- */

/* NVRTC reads any file an #include names and shows it in its log; the
 * generated source may include only a few CUDA headers, however the
 * directive is spelled. */
static void test_generated_includes_are_checked(void **state) {
  const char *dir = *state;
  static const struct {
    const char *text, *header;
  } refused[] = {
      {"#include \"/etc/passwd\"\n", "/etc/passwd"},
      {"#include </etc/passwd>\n", "/etc/passwd"},
      {"  #  include \"/etc/passwd\"\n", "/etc/passwd"},
      {"#\\\ninclude \"/etc/passwd\"\n", "/etc/passwd"},
      {"#inc\\\nlude \"/etc/passwd\"\n", "/etc/passwd"},
      {"/* a */ # /* b */ include \"/etc/passwd\"\n", "/etc/passwd"},
      {"%:include \"/etc/passwd\"\n", "/etc/passwd"},
      {"?\?=include \"/etc/passwd\"\n", "/etc/passwd"},
      {"#include_next <passwd>\n", "passwd"},
      {"#define P \"/etc/passwd\"\n#include P\n", "P"},
      {"#include <../../../../etc/passwd>\n", "../../../../etc/passwd"},
      {"#include <cuda_runtime.h/../../../etc/passwd>\n", "etc/passwd"},
      {"#embed \"/etc/passwd\"\n", "/etc/passwd"},
      {"#if __has_include(\"/etc/passwd\")\n#endif\n", "__has_include"},
      {"int x;\n#include \"cuda_runtime.h\"\n", "\"cuda_runtime.h\""},
      {"#include <stdio.h>\n", "stdio.h"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
    fg_test_write_template(dir, "file.cut", refused[i].text);
    run_result r = run(dir, 0, 0);
    if (r.status != FLOWGEN_TEMPLATE || !strstr(r.err.message, refused[i].header) ||
        !strstr(r.err.message, "<cuda_runtime.h>"))
      fail_msg("case %zu: %s: %s", i, flowgen_status_name(r.status),
               r.status ? r.err.message : r.source);
    /* nothing of the file itself */
    assert_null(strstr(r.err.message, "root:"));
  }
  /* Through the CLI, on the way to NVRTC: exit code 3, one line, and
   * nothing written. */
  fg_test_write_template(dir, "file.cut", "#include \"/etc/passwd\"\n");
  char command[3 * PATH_SIZE], output[PATH_SIZE];
  fg_test_path_join(output, dir, "out.ptx");
  snprintf(command, sizeof command, "'%s' --template-dir '%s' --emit ptx -o '%s'",
           fg_test_flowgen_bin(), dir, output);
  char *out = NULL, *err = NULL;
  int code = fg_test_run(command, &out, &err);
  if (code != 3 || strncmp(err, "flowgen: ", 9) != 0 ||
      !strstr(err, "\"/etc/passwd\"") || strchr(err, '\n') != strrchr(err, '\n'))
    fail_msg("exit code %d, stderr: %s", code, err);
  assert_string_equal(out, "");
  assert_null(strstr(err, "root:"));
  assert_false(fg_test_file_exists(output));
  free(out);
  free(err);

  fg_test_write_template(dir, "file.cut",
                         "#include <cuda_runtime.h>\n"
                         "  #  include <cuda_fp16.h>\n"
                         "#include <cuda_bf16.h> // and a comment\n"
                         "#pragma unroll\n#define X(a) #a\n");
  free(expect_success(dir));
}

/* ---- template files ------------------------------------------------------------- */

/* A --template-dir is read only through regular files: a symbolic link
 * (pointing outside, or anywhere) is refused, never followed. */
static void test_template_symlinks_are_refused(void **state) {
  const char *dir = *state;
  char *outside = fg_test_mkdtemp();
  fg_test_write_template(outside, "file.cut", "from outside\n");
  char target[PATH_SIZE], link_path[PATH_SIZE];
  fg_test_path_join(target, outside, "file.cut");
  fg_test_path_join(link_path, dir, "file.cut");
  assert_int_equal(unlink(link_path), 0);
  assert_int_equal(symlink(target, link_path), 0);
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "file.cut", "symbolic link",
                 NULL);
  /* plan.lua too, and a link to a system file shows nothing of it. */
  fg_test_path_join(link_path, dir, "plan.lua");
  assert_int_equal(unlink(link_path), 0);
  assert_int_equal(symlink("/etc/passwd", link_path), 0);
  run_result r = run(dir, 0, 0);
  assert_int_equal(r.status, FLOWGEN_TEMPLATE);
  assert_non_null(strstr(r.err.message, "plan.lua"));
  assert_non_null(strstr(r.err.message, "symbolic link"));
  assert_null(strstr(r.err.message, "root"));
  fg_test_rmtree(outside);
  free(outside);
}

/* A FIFO (or any other file that is not a regular file) in the folder is
 * refused at once: opening one for reading would wait for a writer. */
static void test_template_fifo_is_refused(void **state) {
  const char *dir = *state;
  char path[PATH_SIZE];
  fg_test_path_join(path, dir, "file.cut");
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkfifo(path, 0600), 0);
  flowgen_options opts = {.template_dir = dir};
  deadline_result r;
  run_with_deadline(&opts, 3.0, &r);
  if (r.status != FLOWGEN_TEMPLATE || !strstr(r.message, "file.cut") ||
      !strstr(r.message, "not a regular file"))
    fail_msg("%s: %s", flowgen_status_name(r.status), r.message);
  /* a folder where plan.lua should be */
  fg_test_path_join(path, dir, "plan.lua");
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "plan.lua", "not a regular file",
                 NULL);
}

/* ---- each error as what it is ------------------------------------------------- */

/* An allocation the memory limit refuses, after which Lua's emergency
 * collection makes room and the template goes on: the template's own later
 * error is reported as itself, not as the memory limit. */
static void test_error_after_a_refused_allocation(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "| local live, mb = {}, string.rep('x', 1000000)\n"
      "| for i = 1, 8 do live[i] = mb .. i end\n"
      "| for i = 1, 20 do local garbage = mb .. i end\n"
      "| error('custom failure')\n");
  run_result r = run(dir, 0, 16u << 20);
  if (r.status != FLOWGEN_TEMPLATE ||
      !strstr(r.err.message, "file.cut:4: custom failure"))
    fail_msg("%s: %s", flowgen_status_name(r.status),
             r.status ? r.err.message : r.source);
  /* and a real shortage still reads as one */
  fg_test_write_template(
      dir, "file.cut",
      "| local live = {}\n"
      "| for i = 1, 40 do live[i] = string.rep('x', 1000000) .. i end\n");
  expect_failure(dir, 0, 16u << 20, FLOWGEN_LIMIT, "memory limit (16 MiB)",
                 "file.cut:2:", NULL);
}

/* ---- error locations ---------------------------------------------------------- */

static void test_syntax_error_in_lua_line(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "// 1\n// 2\n| local a = 1\n// 4\n| local b = = 2\n// 6\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "file.cut:5:", NULL);

  fg_test_write_template(dir, "file.cut", "| for i = 1, 3 do\nx\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "file.cut:", "'end' expected",
                 NULL);
}

static void test_bad_inline_expression(void **state) {
  const char *dir = *state;
  static const struct {
    const char *text, *message;
  } cases[] = {
      {"// 1\n// 2\n// 3\n// 4\n// 5\nx = $(1 +);\n", "file.cut:6:"},
      {"// 1\ncost $ 5\n", "file.cut:2: '$' must be followed"},
      {"// 1\n// 2\n$(spec.dim\n", "file.cut:3:"},
      {"// 1\n| local t = {}\n$(t.missing.field)\n", "file.cut:3:"},
      {"// 1\n$(no_such_variable)\n", "file.cut:2: undefined variable 'no_such_variable'"},
      {"// 1\n// 2\n| error('custom failure')\n", "file.cut:3: custom failure"},
      {"// 1\n| local x = nil + 1\n", "file.cut:2:"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    fg_test_write_template(dir, "file.cut", cases[i].text);
    run_result r = run(dir, 0, 0);
    if (r.status != FLOWGEN_TEMPLATE || !strstr(r.err.message, cases[i].message))
      fail_msg("case %zu: %s \"%s\", expected TEMPLATE and \"%s\"", i,
               flowgen_status_name(r.status), r.status ? r.err.message : "",
               cases[i].message);
  }
}

/* Values $(...) cannot print are reported at the template line that tried,
 * not inside the engine. */
static void test_unprintable_value_names_template_line(void **state) {
  const char *dir = *state;
  static const char *const texts[] = {
      "// 1\n// 2\nkDt = $(1 / 3);\n",  /* a float */
      "// 1\n// 2\n$(spec)\n",          /* a table */
      "// 1\n// 2\n$(nil)\n",           /* nil */
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i) {
    fg_test_write_template(dir, "file.cut", texts[i]);
    run_result r = run(dir, 0, 0);
    assert_int_equal(r.status, FLOWGEN_TEMPLATE);
    if (!strstr(r.err.message, "file.cut:3:"))
      fail_msg("case %zu: the message does not name file.cut:3: %s", i,
               r.err.message);
  }
}

/* An error in an included template names that template. */
static void test_error_in_included_template(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "tiled.cut",
                         "// 1\n// 2\n| local x = spec.dim .. {}\n");
  run_result r = run(dir, 0, 0);
  assert_int_equal(r.status, FLOWGEN_TEMPLATE);
  if (!strstr(r.err.message, "tiled.cut:3:"))
    fail_msg("the message does not name tiled.cut:3: %s", r.err.message);

  fg_test_write_template(dir, "file.cut", "| include('nope.cut')\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "nope.cut", NULL);
  fg_test_write_template(dir, "file.cut", "| include('../plan.lua')\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "invalid template name", NULL);
  fg_test_write_template(dir, "file.cut", "| include('/etc/passwd')\n");
  expect_failure(dir, 0, 0, FLOWGEN_TEMPLATE, "invalid template name", NULL);
}

static void test_missing_templates(void **state) {
  (void)state;
  char *empty = fg_test_mkdtemp();
  expect_failure(empty, 0, 0, FLOWGEN_TEMPLATE, "plan.lua", NULL);
  char missing[PATH_SIZE];
  fg_test_path_join(missing, empty, "no-such-folder");
  expect_failure(missing, 0, 0, FLOWGEN_TEMPLATE, "plan.lua", "no-such-folder",
                 NULL);
  /* plan.lua alone: the template it names is missing. */
  fg_test_write_template(
      empty, "plan.lua",
      "return function(spec) return {template = 'gone.cut', "
      "variants = {{strategy = 'x', symbol = 'k', pack_symbol = 'p',"
      " min_batch = 0, max_batch = -1, block_threads = 32,"
      " rows_per_block = 1, cluster_blocks = 1, shared_bytes = 0,"
      " params_bytes = 4, pack_threads = 32}}} end\n");
  expect_failure(empty, 0, 0, FLOWGEN_TEMPLATE, "gone.cut", NULL);
  fg_test_rmtree(empty);
  free(empty);
}

/* ---- the planner ---------------------------------------------------------------- */

static void test_refuse_is_unsupported(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "plan.lua",
      "return function(spec)\n"
      "  refuse('D=' .. spec.dim .. ' is too wide for this planner')\n"
      "end\n");
  run_result r = run(dir, 0, 0);
  assert_int_equal(r.status, FLOWGEN_UNSUPPORTED);
  assert_string_equal(r.err.message, "D=64 is too wide for this planner");

  /* refuse() from a kernel template is a refusal too. */
  fg_test_copy_templates(dir);
  fg_test_write_template(dir, "file.cut",
                         "| refuse('no kernel for this shape')\n");
  r = run(dir, 0, 0);
  assert_int_equal(r.status, FLOWGEN_UNSUPPORTED);
  assert_string_equal(r.err.message, "no kernel for this shape");
}

#define PLAN_HEAD "return function(spec)\n  return {template = 'file.cut', variants = {\n"
#define PLAN_TAIL "  }}\nend\n"
#define VARIANT(strategy, min, max, threads, rows, cluster, shared)           \
  "    {strategy = '" strategy "', symbol = 'k_" strategy "', "                 \
  "pack_symbol = 'k_pack', min_batch = " #min ", max_batch = " #max ", "        \
  "block_threads = " #threads ", rows_per_block = " #rows ", "                  \
  "cluster_blocks = " #cluster ", shared_bytes = " #shared ", "                 \
  "params_bytes = 16, pack_threads = 32},\n"

/* A planner of our own: its variants come back through the C API as given,
 * and the template renders with `$$` and `$(...)`. */
static void test_custom_planner_variants(void **state) {
  const char *dir = *state;
  fg_test_write_template(dir, "plan.lua",
                         PLAN_HEAD VARIANT("small", 0, 15, 64, 2, 1, 0)
                             VARIANT("big", 16, -1, 128, 8, 2, 1024) PLAN_TAIL);
  fg_test_write_template(
      dir, "file.cut",
      "// costs $$5: D=$(spec.dim) S=$(spec.steps) n=$(#plan.variants)\n"
      "| for _, v in ipairs(plan.variants) do\n"
      "$(v.symbol) $(v.block_threads)\n"
      "| end\n");
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {.template_dir = dir};
  flowgen_kernel *k = NULL;
  flowgen_error err;
  if (flowgen_generate(&spec, &opts, &k, &err))
    fail_msg("generate: %s", err.message);
  assert_string_equal(flowgen_kernel_source(k),
                      "// costs $5: D=64 S=32 n=2\nk_small 64\nk_big 128\n");
  assert_int_equal(flowgen_kernel_variant_count(k), 2);
  const flowgen_variant *small = flowgen_kernel_variant(k, 0);
  const flowgen_variant *big = flowgen_kernel_variant(k, 1);
  assert_string_equal(small->strategy, "small");
  assert_string_equal(big->symbol, "k_big");
  assert_string_equal(big->pack_symbol, "k_pack");
  assert_int_equal(small->max_batch, 15);
  assert_int_equal(big->min_batch, 16);
  assert_int_equal(big->max_batch, -1);
  assert_int_equal(big->rows_per_block, 8);
  assert_int_equal(big->cluster_blocks, 2);
  assert_int_equal(big->shared_bytes, 1024);
  assert_int_equal(big->params_bytes, 16);
  assert_int_equal(big->pack_threads, 32);
  assert_ptr_equal(flowgen_kernel_pick(k, 0), small);
  assert_ptr_equal(flowgen_kernel_pick(k, 15), small);
  assert_ptr_equal(flowgen_kernel_pick(k, 16), big);
  assert_ptr_equal(flowgen_kernel_pick(k, INT64_MAX), big);
  flowgen_kernel_free(k);
}

static void test_bad_plans_are_template_errors(void **state) {
  const char *dir = *state;
  static const struct {
    const char *plan, *message;
  } cases[] = {
      {"return 42\n", "must return a function(spec)"},
      {"return function(spec) return {template = 'file.cut'} end\n",
       "non-empty 'variants'"},
      {"return function(spec) return {template = 'file.cut', variants = {}} end\n",
       "non-empty 'variants'"},
      {"return function(spec) return {variants = {1}} end\n", "'template'"},
      {"return function(spec) return {template = 'file.cut', variants = {7}} end\n",
       "variants[1] is not a table"},
      {PLAN_HEAD VARIANT("x", 0, -1, 1.5, 1, 1, 0) PLAN_TAIL,
       "variants[1].block_threads must be an integer"},
      {PLAN_HEAD VARIANT("x", 0, -1, 0, 1, 1, 0) PLAN_TAIL,
       "impossible launch configuration"},
      {PLAN_HEAD VARIANT("x", 0, -1, 2048, 1, 1, 0) PLAN_TAIL,
       "impossible launch configuration"},
      {PLAN_HEAD VARIANT("x", 0, -1, 32, 0, 1, 0) PLAN_TAIL,
       "impossible launch configuration"},
      {PLAN_HEAD VARIANT("x", -1, -1, 32, 1, 1, 0) PLAN_TAIL,
       "impossible launch configuration"},
  };
  fg_test_write_template(dir, "file.cut", "ok\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    fg_test_write_template(dir, "plan.lua", cases[i].plan);
    run_result r = run(dir, 0, 0);
    if (r.status != FLOWGEN_TEMPLATE || !strstr(r.err.message, cases[i].message))
      fail_msg("case %zu: %s \"%s\", expected TEMPLATE and \"%s\"", i,
               flowgen_status_name(r.status), r.status ? r.err.message : "",
               cases[i].message);
    if (!strstr(r.err.message, "plan.lua"))
      fail_msg("case %zu: the message does not name plan.lua: %s", i,
               r.err.message);
  }
}

/* ---- determinism ------------------------------------------------------------------ */

static void test_pairs_iterates_sorted(void **state) {
  const char *dir = *state;
  fg_test_write_template(
      dir, "file.cut",
      "| local t = {zulu = 1, alpha = 2, mike = 3, [3] = 4, [1] = 5,"
      " [2] = 6, bravo = 7, yankee = 8, echo = 9, [10] = 10,"
      " kilo = 11, charlie = 12, xray = 13, golf = 14, [-1] = 15}\n"
      "| local keys = {}\n"
      "| for k, v in pairs(t) do keys[#keys + 1] = tostring(k) .. '=' .. v end\n"
      "$(table.concat(keys, ' '))\n");
  char *src = expect_success(dir);
  assert_string_equal(src,
                      "-1=15 1=5 2=6 3=4 10=10 alpha=2 bravo=7 charlie=12 "
                      "echo=9 golf=14 kilo=11 mike=3 xray=13 yankee=8 "
                      "zulu=1\n");
  free(src);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_hostile_calls_fail_with_location),
      T(test_hostile_planner_fails_with_location),
      T(test_string_metatable),
      T(test_bytecode_planner_is_refused),
      T(test_bytecode_refusal_names_the_file),
      T(test_endless_loop_hits_instruction_limit),
      T(test_endless_loop_in_planner),
      T(test_runaway_without_escape),
      T(test_memory_limit),
      cmocka_unit_test(test_memory_error_keeps_its_cause),
      T(test_caps_are_per_generation),
      T(test_pattern_backtracking_is_capped),
      T(test_finalizers_cannot_be_installed),
      T(test_costly_instructions_hit_the_time_limit),
      T(test_reported_attacks_are_stopped),
      T(test_time_limit_option),
      T(test_string_size_is_capped),
      T(test_find_and_rep_keep_their_meaning),
      T(test_table_functions_keep_their_meaning),
      T(test_generated_includes_are_checked),
      T(test_template_symlinks_are_refused),
      T(test_template_fifo_is_refused),
      T(test_error_after_a_refused_allocation),
      T(test_syntax_error_in_lua_line),
      T(test_bad_inline_expression),
      T(test_unprintable_value_names_template_line),
      T(test_error_in_included_template),
      T(test_missing_templates),
      T(test_refuse_is_unsupported),
      T(test_custom_planner_variants),
      T(test_bad_plans_are_template_errors),
      T(test_pairs_iterates_sorted),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
