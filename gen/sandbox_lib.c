/* The library functions templates get in place of Lua's where Lua's can
 * run long in C, out of reach of the count hook: string.find (plain text
 * search only; Lua's takes time the product of the lengths), string.rep
 * (the size checked first), and the table functions (an element loop as
 * long as a __len says).  Each keeps the behaviour of Lua 5.4's and counts
 * its work with fg_sandbox_charge, which stops the templates past the time
 * limit. */
#define _GNU_SOURCE /* memmem */
#include "sandbox.h"

#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <string.h>

/* Start positions string.find searches with one memmem call. */
#define FIND_WINDOW (64u << 10)
/* Units charged for one element a table function reads and writes (a
 * lookup and a store, about as long as copying 64 bytes), and how many
 * elements go between two charges. */
#define ELEMENT_UNITS 64u
#define ELEMENT_BATCH 1024u

static void charge_elements(lua_State *L, lua_Integer i) {
  if (((lua_Unsigned)i & (ELEMENT_BATCH - 1)) == 0)
    fg_sandbox_charge(L, ELEMENT_BATCH * ELEMENT_UNITS);
}

/* ---- string ------------------------------------------------------------ */

/* Lua's posrelatI: a start position, 1-based, from the end when negative. */
static size_t start_position(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0) return 1;
  if (pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

/* find(s, text [, init]) -> first, last | nil: plain text search.  memmem
 * runs a window of start positions at a time, each charged for the worst
 * it can cost, so that the clock is read between windows. */
static int lib_find(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_position(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  const char *found = NULL;
  if (lp == 0) {
    found = s + init;
  } else {
    size_t window = lp > FIND_WINDOW ? lp : FIND_WINDOW;
    size_t compare = lp < 64 ? lp : 64;
    for (size_t at = init; !found && at < ls && ls - at >= lp; at += window) {
      size_t span = ls - at < window + lp - 1 ? ls - at : window + lp - 1;
      fg_sandbox_charge(L, span * compare);
      found = memmem(s + at, span, p, lp);
    }
  }
  if (!found) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)(found - s) + 1);
  lua_pushinteger(L, (lua_Integer)(found - s + lp));
  return 2;
}

/* rep(s, n [, sep]): the size checked before anything is allocated, then
 * filled by doubling (Lua's copies s once per repetition).  The work area
 * is a userdata, not a luaL_Buffer: short of memory, Lua collects garbage
 * and tries again for a userdata, not for a buffer. */
static int lib_rep(lua_State *L) {
  size_t l, lsep;
  const char *s = luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char *sep = luaL_optlstring(L, 3, "", &lsep);
  size_t unit = l + lsep;
  if (n <= 0 || unit == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if ((lua_Unsigned)n > ((lua_Unsigned)FG_STRING_MAX + lsep) / unit) {
    double bytes = (double)n * (double)unit - (double)lsep;
    return fg_sandbox_string_error(
        L, "string.rep", bytes >= (double)SIZE_MAX ? SIZE_MAX : (size_t)bytes);
  }
  size_t total = (size_t)n * unit - lsep;
  fg_sandbox_charge(L, total);
  char *out = lua_newuserdatauv(L, total, 0);
  if (total <= l) {
    memcpy(out, s, total);  /* n == 1 */
  } else {
    memcpy(out, s, l);
    memcpy(out + l, sep, lsep);
    /* out[0, filled) holds whole units: copying it on keeps the pattern. */
    for (size_t filled = unit; filled < total;) {
      size_t k = filled < total - filled ? filled : total - filled;
      memcpy(out + filled, out, k);
      filled += k;
    }
  }
  lua_pushlstring(L, out, total);
  return 1;
}

/* ---- table ------------------------------------------------------------- */

/* insert(t, [pos,] value), as Lua's: elements move up one at a time. */
static int lib_insert(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer e = (lua_Integer)((lua_Unsigned)luaL_len(L, 1) + 1u);
  lua_Integer pos;
  switch (lua_gettop(L)) {
    case 2:
      pos = e;
      break;
    case 3:
      pos = luaL_checkinteger(L, 2);
      /* pos in [1, e] */
      luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2,
                    "position out of bounds");
      for (lua_Integer i = e; i > pos; i--) {
        charge_elements(L, i);
        lua_geti(L, 1, i - 1);
        lua_seti(L, 1, i);
      }
      break;
    default:
      return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

/* remove(t [, pos]) -> t[pos], as Lua's. */
static int lib_remove(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer size = luaL_len(L, 1);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size) /* pos in [1, size + 1] */
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2,
                  "position out of bounds");
  lua_geti(L, 1, pos);
  for (; pos < size; pos++) {
    charge_elements(L, pos);
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}

/* move(a1, f, e, t [, a2]) -> a2, as Lua's (forward where it can). */
static int lib_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int tt = !lua_isnoneornil(L, 5) ? 5 : 1;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, tt, LUA_TTABLE);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3,
                  "too many elements to move");
    lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < n; i++) {
        charge_elements(L, i);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    } else {
      for (lua_Integer i = n - 1; i >= 0; i--) {
        charge_elements(L, i);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    }
  }
  lua_pushvalue(L, tt);
  return 1;
}

static void add_field(lua_State *L, luaL_Buffer *b, lua_Integer i) {
  lua_geti(L, 1, i);
  if (!lua_isstring(L, -1))
    luaL_error(L, "invalid value (%s) at index %I in table for 'concat'",
               luaL_typename(L, -1), (LUAI_UACINT)i);
  luaL_addvalue(b);
  if (luaL_bufflen(b) > FG_STRING_MAX)
    fg_sandbox_string_error(L, "table.concat", luaL_bufflen(b));
}

/* concat(t [, sep [, i [, j]]]), as Lua's, up to FG_STRING_MAX bytes; the
 * length (and its __len) only when j is not given. */
static int lib_concat(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  size_t lsep;
  const char *sep = luaL_optlstring(L, 2, "", &lsep);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  lua_Integer last =
      lua_isnoneornil(L, 4) ? luaL_len(L, 1) : luaL_checkinteger(L, 4);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (; i < last; i++) {
    charge_elements(L, i);
    add_field(L, &b, i);
    luaL_addlstring(&b, sep, lsep);
  }
  if (i == last) add_field(L, &b, i);
  luaL_pushresult(&b);
  return 1;
}

/* unpack(t [, i [, j]]), as Lua's (at most as many values as the stack
 * holds), charged for the values. */
static int lib_unpack(lua_State *L) {
  lua_Integer i = luaL_optinteger(L, 2, 1);
  lua_Integer e = luaL_opt(L, luaL_checkinteger, 3, luaL_len(L, 1));
  if (i > e) return 0;
  lua_Unsigned n = (lua_Unsigned)e - (lua_Unsigned)i;
  if (n >= (unsigned int)INT_MAX || !lua_checkstack(L, (int)(++n)))
    return luaL_error(L, "too many results to unpack");
  fg_sandbox_charge(L, (size_t)n * ELEMENT_UNITS);
  for (; i < e; i++) lua_geti(L, 1, i);
  lua_geti(L, 1, e);
  return (int)n;
}

/* The comparison Lua's sort makes through it: the template's function (the
 * upvalue) or '<', each charged. */
static int charged_less(lua_State *L) {
  fg_sandbox_charge(L, ELEMENT_UNITS);
  if (lua_isnil(L, lua_upvalueindex(1))) {
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
    return 1;
  }
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

/* sort(t [, comp]): Lua's (upvalue 1), comparing through charged_less. */
static int lib_sort(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  lua_pushcclosure(L, charged_less, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 0);
  return 0;
}

void fg_sandbox_push_library(lua_State *L) {
  static const luaL_Reg functions[] = {
      {"find", lib_find},     {"rep", lib_rep},       {"insert", lib_insert},
      {"remove", lib_remove}, {"move", lib_move},     {"concat", lib_concat},
      {"unpack", lib_unpack}, {NULL, NULL},
  };
  luaL_newlib(L, functions);
  lua_getglobal(L, LUA_TABLIBNAME);
  lua_getfield(L, -1, "sort");
  lua_pushcclosure(L, lib_sort, 1);
  lua_setfield(L, -3, "sort");
  lua_pop(L, 1);
}
