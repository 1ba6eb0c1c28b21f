/*
 * lkind.c — arrays of a kind: suiro.date, suiro.timestamp and suiro.factor (wire DATE, TIMESTAMP,
 * FACTOR), their attributes (a timestamp's tz and a factor's levels, in the array's user value 1)
 * and their methods (a:kind(), a:unit(), a:tz(), a:levels(), a:ordered(), a:codes()). The storage
 * and element access are larray.c's; a kind only says what the elements mean. No shared state.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"

const char *const lkind_names[] = { "plain", "date", "timestamp", "factor" };
const char *const lkind_unit_names[] = { "s", "ms", "us", "ns" };

void lkind_set_attr(lua_State *L, int idx, const char *field) {
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 1);
  lua_insert(L, -2);
  lua_setfield(L, -2, field);
  lua_setiuservalue(L, idx, 1);
}

const char *lkind_tz(lua_State *L, int idx, size_t *len) {
  const char *tz = NULL;
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE) {
    if (lua_getfield(L, -1, "tz") == LUA_TSTRING) tz = lua_tolstring(L, -1, len); /* anchored by the array */
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!tz) {
    tz = "";
    *len = 0;
  }
  return tz;
}

lua_Integer lkind_push_levels(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE) {
    if (lua_getfield(L, -1, "levels") == LUA_TTABLE) {
      lua_remove(L, -2);
      return (lua_Integer)lua_rawlen(L, -1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_newtable(L);
  return 0;
}

/* ---- methods --------------------------------------------------------------------------------- */

static int l_kind(lua_State *L) {
  lua_pushstring(L, lkind_names[larray_check(L, 1)->kind]);
  return 1;
}

static int l_unit(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (a->kind != LARRAY_TIMESTAMP) return 0;
  lua_pushstring(L, lkind_unit_names[a->unit & 3]);
  return 1;
}

static int l_tz(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (a->kind != LARRAY_TIMESTAMP) return 0;
  size_t len;
  const char *tz = lkind_tz(L, 1, &len);
  lua_pushlstring(L, tz, len);
  return 1;
}

static int l_levels(lua_State *L) { /* a copy: the levels of an array do not change */
  larray *a = larray_check(L, 1);
  if (a->kind != LARRAY_FACTOR) return 0;
  lua_Integer n = lkind_push_levels(L, 1);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, -2, k);
    lua_rawseti(L, -2, k);
  }
  return 1;
}

static int l_ordered(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (a->kind != LARRAY_FACTOR) return 0;
  lua_pushboolean(L, a->ordered);
  return 1;
}

static int l_codes(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (a->kind != LARRAY_FACTOR) return luaL_error(L, "suiro.array: codes() is for factors, this is a %s array",
                                                   lkind_names[a->kind]);
  larray *b = larray_new(L, WIRE_T_I32, a->n);
  memcpy(b->data, a->data, larray_bytes(a));
  return 1;
}

/* ---- constructors ---------------------------------------------------------------------------- */

/* Checks that the options table at idx (nil allowed) has only the given keys. */
static void check_opts(lua_State *L, int idx, const char *fname, const char *const *keys) {
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: argument %d (options) must be a table, got %s", fname, idx, luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int known = 0;
    for (int k = 0; keys[k] && !known; k++)
      known = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), keys[k]) == 0;
    if (!known) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int k = 0; keys[k]; k++) {
        if (k) luaL_addstring(&b, ", ");
        luaL_addstring(&b, keys[k]);
      }
      luaL_pushresult(&b);
      const char *choices = lua_tostring(L, -1);
      const char *got = luaL_tolstring(L, -2, NULL);
      luaL_error(L, "%s: unknown option %s (options: %s)", fname, got, choices);
    }
  }
}

/* Option `field` of the options at idx as an index into names (dflt when absent). */
static int opt_name(lua_State *L, int idx, const char *field, const char *fname, const char *const *names, int lo,
                    int hi, int dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  int t = lua_getfield(L, idx, field);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return dflt;
  }
  const char *s = lua_tostring(L, -1);
  for (int k = lo; s && t == LUA_TSTRING && k <= hi; k++)
    if (names[k] && strcmp(s, names[k]) == 0) {
      lua_pop(L, 1);
      return k;
    }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int k = lo, first = 1; k <= hi; k++) {
    if (!names[k]) continue;
    lua_pushfstring(L, "%s\"%s\"", first ? "" : ", ", names[k]);
    luaL_addvalue(&b);
    first = 0;
  }
  luaL_pushresult(&b);
  const char *choices = lua_tostring(L, -1);
  const char *got = luaL_tolstring(L, -2, NULL);
  return luaL_error(L, "%s: %s must be one of %s, got %s", fname, field, choices, got);
}

/* The elements for a kind constructor (argument 1): a table of values, or a plain 1-d
 * suiro.array of an allowed type (copied). Pushes the new array. type: the type asked for, or 0
 * for the given array's (a table then gets dflt). */
static larray *kind_values(lua_State *L, const char *fname, int type, int dflt, const int *allowed) {
  larray *src = larray_test(L, 1);
  if (src) {
    larray_check(L, 1);
    if (src->kind != LARRAY_PLAIN || larray_is_nd(src))
      luaL_error(L, "%s: argument 1 must be a plain 1-d array or a table, got a %s array", fname,
                 larray_is_nd(src) ? "n-d" : lkind_names[src->kind]);
    if (type && type != src->type)
      luaL_error(L, "%s: argument 1 is an %s array but type is \"%s\"", fname, wire_type_name(src->type), wire_type_name(type));
    int ok = 0;
    for (int k = 0; allowed[k]; k++) ok |= allowed[k] == src->type;
    if (!ok) luaL_error(L, "%s: %s elements are not allowed here", fname, wire_type_name(src->type));
    larray *a = larray_new(L, src->type, src->n);
    memcpy(a->data, src->data, larray_bytes(src));
    return a;
  }
  if (!lua_istable(L, 1))
    luaL_error(L, "%s: argument 1 must be a table of values or a suiro.array, got %s", fname, luaL_typename(L, 1));
  lua_Integer n = luaL_len(L, 1);
  larray *a = larray_new(L, type ? type : dflt, n);
  larray_fill(L, a, 1, n);
  return a;
}

/* suiro.date(days [, { type = "i32" | "i64" | "f64" }]): days since 1970-01-01. */
static int l_date(lua_State *L) {
  static const char *const keys[] = { "type", NULL };
  static const int allowed[] = { WIRE_T_I32, WIRE_T_I64, WIRE_T_F64, 0 };
  static const char *const tnames[] = { NULL, "f64", NULL, "i64", "i32" };
  check_opts(L, 2, "suiro.date", keys);
  int type = opt_name(L, 2, "type", "suiro.date", tnames, 1, 4, 0);
  larray *a = kind_values(L, "suiro.date", type, WIRE_T_I32, allowed);
  a->kind = LARRAY_DATE;
  return 1;
}

/* suiro.timestamp(values [, { type = "i64" | "f64", unit = "s" | "ms" | "us" | "ns", tz = "" }]) */
static int l_timestamp(lua_State *L) {
  static const char *const keys[] = { "type", "unit", "tz", NULL };
  static const int allowed[] = { WIRE_T_I64, WIRE_T_F64, 0 };
  static const char *const tnames[] = { NULL, "f64", NULL, "i64" };
  check_opts(L, 2, "suiro.timestamp", keys);
  int type = opt_name(L, 2, "type", "suiro.timestamp", tnames, 1, 3, 0);
  int unit = opt_name(L, 2, "unit", "suiro.timestamp", lkind_unit_names, 0, 3, WIRE_UNIT_S);
  if (!lua_isnoneornil(L, 2)) {
    int t = lua_getfield(L, 2, "tz");
    if (t != LUA_TNIL && t != LUA_TSTRING)
      return luaL_error(L, "suiro.timestamp: tz must be a string (an IANA name or \"\"), got %s", luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  larray *a = kind_values(L, "suiro.timestamp", type, WIRE_T_I64, allowed);
  a->kind = LARRAY_TIMESTAMP;
  a->unit = unit;
  if (lua_isnoneornil(L, 2)) lua_pushnil(L);
  else lua_getfield(L, 2, "tz");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushliteral(L, "");
  }
  lkind_set_attr(L, -2, "tz");
  return 1;
}

static int cmp_lstr(const void *x, const void *y) {
  const wire_str *a = x, *b = y;
  int c = memcmp(a->ptr, b->ptr, a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* suiro.factor(values [, { levels = {...}, ordered = false }]): values are level names (or
 * suiro.NA / nil), or a suiro.i32 array of 0-based codes (-1 = NA) when levels are given.
 * Without levels they are the distinct values, sorted. */
static int l_factor(lua_State *L) {
  static const char *const keys[] = { "levels", "ordered", NULL };
  check_opts(L, 2, "suiro.factor", keys);
  int ordered = 0;
  lua_settop(L, 2);
  if (!lua_isnil(L, 2)) {
    lua_getfield(L, 2, "ordered");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      return luaL_error(L, "suiro.factor: ordered must be a boolean, got %s", luaL_typename(L, -1));
    ordered = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 2, "levels");
  } else {
    lua_pushnil(L);
  }
  int levels = 3;
  larray *codes = larray_test(L, 1);
  lua_Integer n;
  if (codes) {
    larray_check(L, 1);
    if (codes->type != WIRE_T_I32 || codes->kind != LARRAY_PLAIN || larray_is_nd(codes))
      return luaL_error(L, "suiro.factor: argument 1 must be a table of level names or a plain i32 array of codes");
    if (lua_isnil(L, levels)) return luaL_error(L, "suiro.factor: codes need levels = { ... }");
    n = codes->n;
  } else {
    if (!lua_istable(L, 1))
      return luaL_error(L, "suiro.factor: argument 1 must be a table of level names or an i32 array of codes, got %s",
                        luaL_typename(L, 1));
    n = lvalues_count(L, 1, "suiro.factor", sizeof(int32_t)); /* checked before the loops */
    for (lua_Integer i = 1; i <= n; i++) {
      LSUIRO_POLL(L, i);
      int t = lua_rawgeti(L, 1, i);
      if (t != LUA_TSTRING && t != LUA_TNIL && !lvalues_is_na(L, -1))
        return luaL_error(L, "suiro.factor: element %I must be a string or suiro.NA, got %s", i, luaL_typename(L, -1));
      lua_pop(L, 1);
    }
  }
  /* the levels: a copy of the given ones (checked), or the sorted distinct values */
  lua_newtable(L);
  int lv = lua_gettop(L);
  lua_newtable(L);
  int seen = lua_gettop(L);
  lua_Integer nl = 0;
  if (!lua_isnil(L, levels)) {
    if (!lua_istable(L, levels)) return luaL_error(L, "suiro.factor: levels must be a table of strings, got %s",
                                                   luaL_typename(L, levels));
    lua_Integer m = (lua_Integer)lua_rawlen(L, levels);
    for (lua_Integer k = 1; k <= m; k++) {
      if (lua_rawgeti(L, levels, k) != LUA_TSTRING)
        return luaL_error(L, "suiro.factor: level %I must be a string, got %s", k, luaL_typename(L, -1));
      lua_pushvalue(L, -1);
      if (lua_rawget(L, seen) != LUA_TNIL) return luaL_error(L, "suiro.factor: level \"%s\" appears twice", lua_tostring(L, -2));
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_pushinteger(L, k - 1);
      lua_rawset(L, seen);
      lua_rawseti(L, lv, ++nl);
    }
  } else {
    for (lua_Integer i = 1; i <= n; i++) {
      LSUIRO_POLL(L, i);
      if (lua_rawgeti(L, 1, i) == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        if (lua_rawget(L, seen) == LUA_TNIL) {
          lua_pop(L, 1);
          lua_pushvalue(L, -1);
          lua_pushboolean(L, 1);
          lua_rawset(L, seen);
          lua_rawseti(L, lv, ++nl);
          continue;
        }
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    /* sorted by bytes */
    wire_str *v = lua_newuserdatauv(L, sizeof *v * (size_t)(nl ? nl : 1), 0);
    for (lua_Integer k = 0; k < nl; k++) {
      lua_rawgeti(L, lv, k + 1);
      v[k].ptr = lua_tolstring(L, -1, &v[k].len); /* anchored by lv */
      lua_pop(L, 1);
    }
    qsort(v, (size_t)nl, sizeof *v, cmp_lstr);
    lua_newtable(L);
    for (lua_Integer k = 0; k < nl; k++) {
      lua_pushlstring(L, v[k].ptr, v[k].len);
      lua_pushvalue(L, -1);
      lua_pushinteger(L, k);
      lua_rawset(L, seen);
      lua_rawseti(L, -2, k + 1);
    }
    lua_replace(L, lv);
    lua_pop(L, 1);
  }
  larray *a = larray_new(L, WIRE_T_I32, n);
  int32_t *c = a->data;
  if (codes) {
    for (int64_t i = 0; i < n; i++) {
      int32_t x = ((const int32_t *)codes->data)[i];
      if (x < WIRE_NA_CODE || x >= nl)
        return luaL_error(L, "suiro.factor: code %d (element %I) is not in -1..%I", (int)x, (lua_Integer)i + 1,
                          nl - 1);
      c[i] = x;
    }
  } else {
    for (lua_Integer i = 1; i <= n; i++) {
      LSUIRO_POLL(L, i);
      if (lua_rawgeti(L, 1, i) == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        if (lua_rawget(L, seen) != LUA_TNUMBER)
          return luaL_error(L, "suiro.factor: element %I (\"%s\") is not one of the levels", i, lua_tostring(L, -2));
        c[i - 1] = (int32_t)lua_tointeger(L, -1);
        lua_pop(L, 2);
      } else {
        c[i - 1] = WIRE_NA_CODE;
        lua_pop(L, 1);
      }
    }
  }
  a->kind = LARRAY_FACTOR;
  a->ordered = ordered;
  lua_pushvalue(L, lv);
  lkind_set_attr(L, -2, "levels");
  return 1;
}

const luaL_Reg lkind_methods[] = {
  { "kind", l_kind }, { "unit", l_unit }, { "tz", l_tz }, { "levels", l_levels },
  { "ordered", l_ordered }, { "codes", l_codes }, { NULL, NULL },
};

/* Sets the constructors date, timestamp and factor into the table on top. */
void lkind_open(lua_State *L) {
  lua_pushcfunction(L, l_date);
  lua_setfield(L, -2, "date");
  lua_pushcfunction(L, l_timestamp);
  lua_setfield(L, -2, "timestamp");
  lua_pushcfunction(L, l_factor);
  lua_setfield(L, -2, "factor");
}
