/* flowgen_source_key: names a part's source by what it is made from, so
 * that a runtime finds a cached part without rendering it. */
#include "sandbox.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A field of a table, for sorting: its name, or its index where the key is
 * an integer (device.clusters_at_once). */
typedef struct key_field {
  char name[48];
  bool is_index;
  lua_Integer index;
} key_field;

static int by_name(const void *a, const void *b) {
  return strcmp(((const key_field *)a)->name, ((const key_field *)b)->name);
}

/* The value on top as key text, pushed: integers and booleans as Lua
 * writes them, floats as their bits (no locale, no rounding), strings
 * quoted with each byte outside printable ASCII (and the quote and
 * backslash) as \xHH, so that a line is one line whatever a tune holds. */
static void push_value_text(lua_State *L) {
  char text[48];
  switch (lua_type(L, -1)) {
    case LUA_TBOOLEAN:
      lua_pushstring(L, lua_toboolean(L, -1) ? "true" : "false");
      return;
    case LUA_TNUMBER:
      if (lua_isinteger(L, -1)) {
        snprintf(text, sizeof text, "%lld", (long long)lua_tointeger(L, -1));
      } else {
        lua_Number x = lua_tonumber(L, -1);
        unsigned char bytes[sizeof x];
        memcpy(bytes, &x, sizeof x);
        int at = snprintf(text, sizeof text, "float:");
        for (size_t i = 0; i < sizeof x && at < (int)sizeof text - 2; ++i)
          at += snprintf(text + at, sizeof text - (size_t)at, "%02x", bytes[i]);
      }
      lua_pushstring(L, text);
      return;
    case LUA_TSTRING: {
      size_t n = 0;
      const char *s = lua_tolstring(L, -1, &n);
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      luaL_addchar(&b, '"');
      for (size_t i = 0; i < n; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
          luaL_addchar(&b, (char)c);
        } else {
          snprintf(text, sizeof text, "\\x%02x", c);
          luaL_addstring(&b, text);
        }
      }
      luaL_addchar(&b, '"');
      luaL_pushresult(&b);
      return;
    }
    default:
      luaL_error(L, "source key: a value of type %s", luaL_typename(L, -1));
  }
}

/* Appends to the list at index lines one "prefix.field=value" string per
 * field of the table at index t, in name order, a nested table's fields
 * under its name. */
static void add_table(lua_State *L, int lines, int t, const char *prefix) {
  t = lua_absindex(L, t);
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    ++n;
    lua_pop(L, 1);
  }
  key_field *fields = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *fields, 0);
  int at = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    key_field *f = &fields[at++];
    f->is_index = lua_type(L, -1) == LUA_TNUMBER && lua_isinteger(L, -1);
    if (f->is_index) {
      f->index = lua_tointeger(L, -1);
      snprintf(f->name, sizeof f->name, "%020lld", (long long)f->index);
    } else if (lua_type(L, -1) == LUA_TSTRING && lua_rawlen(L, -1) < sizeof f->name) {
      snprintf(f->name, sizeof f->name, "%s", lua_tostring(L, -1));
    } else {
      luaL_error(L, "source key: a key of type %s", luaL_typename(L, -1));
    }
  }
  qsort(fields, (size_t)n, sizeof *fields, by_name);
  for (int i = 0; i < n; ++i) {
    const key_field *f = &fields[i];
    char path[256];
    if (f->is_index) {
      snprintf(path, sizeof path, "%s[%lld]", prefix, (long long)f->index);
      lua_rawgeti(L, t, f->index);
    } else {
      snprintf(path, sizeof path, "%s.%s", prefix, f->name);
      lua_getfield(L, t, f->name);
    }
    if (lua_type(L, -1) == LUA_TTABLE) {
      add_table(L, lines, -1, path);
    } else {
      push_value_text(L);
      lua_pushfstring(L, "%s=%s\n", path, lua_tostring(L, -1));
      lua_rawseti(L, lines, (lua_Integer)lua_rawlen(L, lines) + 1);
      lua_pop(L, 1); /* the value's text */
    }
    lua_pop(L, 1); /* the value */
  }
  lua_pop(L, 1); /* fields */
}

typedef struct key_call {
  const flowgen_spec *spec;
  const flowgen_options *opts;
} key_call;

/* Pushes the key's text.  Protected: the table's making allocates. */
static int make_key(lua_State *L) {
  const key_call *c = lua_touserdata(L, 1);
  lua_newtable(L);
  int lines = lua_gettop(L);
  lua_pushfstring(L, "flowgen source v1\ngenerator=%s\nbuild=%s\n", FLOWGEN_VERSION,
                  fg_builtin_digest);
  lua_rawseti(L, lines, 1);
  fg_push_spec(L, c->spec, c->opts);
  add_table(L, lines, -1, "spec");
  lua_pop(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1, n = (lua_Integer)lua_rawlen(L, lines); i <= n; ++i) {
    lua_rawgeti(L, lines, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  return 1;
}

flowgen_status flowgen_source_key(const flowgen_spec *spec, const flowgen_options *opts,
                                  char **out, flowgen_error *err) {
  if (!out) return fg_fail(err, FLOWGEN_INVALID, "out is NULL");
  *out = NULL;
  flowgen_status st = flowgen_spec_validate(spec, err);
  if (!st && opts) st = fg_options_check(opts, err);
  if (st) return st;
  if (opts && opts->template_dir)
    return fg_fail(err, FLOWGEN_UNSUPPORTED,
                   "source key: templates from a folder (%s) are keyed by their source",
                   opts->template_dir);
  lua_State *L = luaL_newstate();
  if (!L) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  key_call call = {spec, opts};
  lua_pushcfunction(L, make_key);
  lua_pushlightuserdata(L, &call);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    st = lua_type(L, -1) == LUA_TSTRING && !strstr(lua_tostring(L, -1), "memory")
             ? fg_fail(err, FLOWGEN_INTERNAL, "%s", lua_tostring(L, -1))
             : fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  } else {
    size_t n = 0;
    const char *text = lua_tolstring(L, -1, &n);
    if (!(*out = malloc(n + 1))) st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    else memcpy(*out, text, n + 1);
  }
  lua_close(L);
  return st;
}
