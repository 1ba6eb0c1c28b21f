/*
 * lframe.c — suiro.frame: data frames for Lua (wire FRAME).
 *
 *   local f = suiro.frame {
 *     { "price", suiro.f64 { 1.5, 2.5, 4 } },
 *     { "name", suiro.strings { "a", "b", suiro.NA } },
 *     { "qty", { 1, 2, 3 } },                 -- a plain table becomes a typed column (i64 here)
 *   }
 *   suiro.frame({ "price", "name" }, { price = ..., name = ... })   -- names, then columns by name
 *   suiro.frame { nrow = 3 }                  -- no columns, three rows
 *
 *   f.price, f["price"], f:column(1), f:column("price")   columns (the same objects, not copies)
 *   f:names(), f:nrow(), f:ncol(), #f (= rows), pairs(f) (name, column in order), tostring(f)
 *   f.total = suiro.f64 { ... }                add or replace a column; f.total = nil removes it
 *
 * A column is a 1-d suiro.array (numbers, bool, date, timestamp, factor) or a string vector
 * (suiro.strings); all have the frame's row count. Methods win over columns of the same name
 * (a column called "names" is f:column("names")).
 */
#include <string.h>

#include <lauxlib.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"

#define UV_NAMES 1
#define UV_COLS 2
#define UV_INDEX 3 /* name -> position of its first column */

lframe *lframe_push(lua_State *L, int64_t nrow) {
  lframe *f = lua_newuserdatauv(L, sizeof *f, 3);
  f->nrow = nrow;
  f->ncol = 0;
  for (int k = 1; k <= 3; k++) {
    lua_newtable(L);
    lua_setiuservalue(L, -2, k);
  }
  lvalues_push_mt(L, &lvalues_key_frame);
  lua_setmetatable(L, -2);
  return f;
}

lframe *lframe_test(lua_State *L, int idx) { return lsuiro_testud(L, idx, &lvalues_key_frame); }

static lframe *checkframe(lua_State *L, int idx) { return lsuiro_checkud(L, idx, &lvalues_key_frame, "suiro.frame"); }

void lframe_push_parts(lua_State *L, int fidx) {
  fidx = lua_absindex(L, fidx);
  lua_getiuservalue(L, fidx, UV_NAMES);
  lua_getiuservalue(L, fidx, UV_COLS);
}

void lframe_append(lua_State *L, int fidx) {
  fidx = lua_absindex(L, fidx);
  lframe *f = lua_touserdata(L, fidx);
  lua_Integer pos = (lua_Integer)++f->ncol;
  lua_getiuservalue(L, fidx, UV_COLS);
  lua_insert(L, -2);
  lua_rawseti(L, -2, pos);
  lua_pop(L, 1);
  lua_getiuservalue(L, fidx, UV_INDEX);
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) == LUA_TNIL) {
    lua_pushvalue(L, -3);
    lua_pushinteger(L, pos);
    lua_rawset(L, -4);
  }
  lua_pop(L, 2);
  lua_getiuservalue(L, fidx, UV_NAMES);
  lua_insert(L, -2);
  lua_rawseti(L, -2, pos);
  lua_pop(L, 1);
}

/* Position of the column named by the string at idx (0 when none). */
static lua_Integer find(lua_State *L, int fidx, int idx) {
  idx = lua_absindex(L, idx);
  lua_getiuservalue(L, fidx, UV_INDEX);
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  lua_Integer pos = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 2);
  return pos;
}

/* ---- columns ---------------------------------------------------------------------------------- */

static double na_f64(void) {
  uint64_t bits = WIRE_NA_F64_BITS;
  double d;
  memcpy(&d, &bits, 8);
  return d;
}

/* A typed column from a plain table of strings, booleans or numbers (suiro.NA or nil for
 * missing values); replaces the table at idx. */
static void column_from_table(lua_State *L, int idx, const char *name) {
  lua_Integer n = lvalues_count(L, idx, "suiro.frame", LVALUES_SLOT_BYTES); /* checked before the loops */
  int nstr = 0, nbool = 0, nnum = 0, nfloat = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    LSUIRO_POLL(L, i);
    int t = lua_rawgeti(L, idx, i);
    if (t == LUA_TSTRING) nstr = 1;
    else if (t == LUA_TBOOLEAN) nbool = 1;
    else if (t == LUA_TNUMBER) {
      nnum = 1;
      if (!lua_isinteger(L, -1)) nfloat = 1;
    } else if (t != LUA_TNIL && !lvalues_is_na(L, -1)) {
      luaL_error(L, "suiro.frame: column \"%s\": element %I is a %s (columns hold numbers, strings or booleans)", name, i,
                 luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    if (nstr + nbool + nnum > 1)
      luaL_error(L, "suiro.frame: column \"%s\" mixes %s and %s (element %I): give it as a typed array", name,
                 nstr ? "strings" : "booleans", nnum ? "numbers" : "booleans", i);
  }
  if (nstr + nbool + nnum == 0)
    luaL_error(L, "suiro.frame: cannot tell the type of column \"%s\" (%s): give it as a typed array such as "
                  "suiro.f64 {} or suiro.strings {}", name, n ? "all NA" : "empty");
  if (nstr) {
    lua_createtable(L, n < (1 << 26) ? (int)n : 0, 1);
    for (lua_Integer i = 1; i <= n; i++) {
      LSUIRO_POLL(L, i);
      if (lua_rawgeti(L, idx, i) == LUA_TNIL) {
        lua_pop(L, 1);
        lvalues_push_na(L);
      }
      lua_rawseti(L, -2, i);
    }
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "n");
    lvalues_setmt_strings(L);
  } else {
    int type = nbool ? WIRE_T_BOOL : nfloat ? WIRE_T_F64 : WIRE_T_I64;
    larray *a = larray_new(L, type, n);
    for (lua_Integer i = 1; i <= n; i++) {
      LSUIRO_POLL(L, i);
      int t = lua_rawgeti(L, idx, i);
      int na = t == LUA_TNIL || lvalues_is_na(L, -1);
      if (type == WIRE_T_BOOL) ((uint8_t *)a->data)[i - 1] = na ? WIRE_NA_BOOL : (uint8_t)lua_toboolean(L, -1);
      else if (type == WIRE_T_F64) ((double *)a->data)[i - 1] = na ? na_f64() : lua_tonumber(L, -1);
      else ((int64_t *)a->data)[i - 1] = na ? WIRE_NA_I64 : lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_replace(L, idx);
}

/* Checks the value at idx as a column named name (converting a plain table in place) and
 * returns its length. */
static int64_t check_column(lua_State *L, int idx, const char *name) {
  idx = lua_absindex(L, idx);
  larray *a = larray_test(L, idx);
  if (a) {
    if (!a->data && a->n) luaL_error(L, "suiro.frame: column \"%s\" is a released array", name);
    if (larray_is_nd(a)) luaL_error(L, "suiro.frame: column \"%s\" is an n-d array; columns are 1-d", name);
    return a->n;
  }
  if (lvalues_is_strings(L, idx)) {
    lua_pushliteral(L, "n");
    lua_Integer n = lua_rawget(L, idx) == LUA_TNUMBER ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, idx);
    lua_pop(L, 1);
    return n;
  }
  if (lua_type(L, idx) == LUA_TTABLE && !lua_getmetatable(L, idx)) {
    column_from_table(L, idx, name);
    return check_column(L, idx, name);
  }
  if (lsuiro_is(L, idx, &lvalues_key_refdesc)) { /* a described column in shared memory */
    lua_getfield(L, idx, "type");
    const char *t = lua_tostring(L, -1);
    int type = 0;
    for (int k = WIRE_T_F64; k <= WIRE_T_MAX && t; k++)
      if (!strcmp(t, wire_type_name(k))) type = k;
    lua_getfield(L, idx, "shape");
    lua_getfield(L, idx, "length");
    lua_Integer nd = lua_istable(L, -2) ? (lua_Integer)lua_rawlen(L, -2) : 0;
    if (!type || nd > 1)
      luaL_error(L, "suiro.frame: column \"%s\" is a reference that is not a typed 1-d array", name);
    lua_Integer rows = (lua_Integer)((uint64_t)lua_tointeger(L, -1) / wire_type_size(type));
    if (nd == 1) {
      lua_rawgeti(L, -2, 1);
      rows = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 3);
    if (lua_type(L, idx) == LUA_TTABLE) lua_pop(L, 1); /* its metatable, from lua_getmetatable above */
    return rows;
  }
  if (lua_type(L, idx) == LUA_TTABLE) lua_pop(L, 1); /* its metatable */
  const char *tn = luaL_getmetafield(L, idx, "__name") == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx);
  return luaL_error(L, "suiro.frame: column \"%s\" must be a suiro.array, suiro.strings or a table of values, got %s",
                    name, tn);
}

/* ---- constructor ------------------------------------------------------------------------------ */

/* Adds the column at -1 named by the string at -2 to the frame at fidx (popping both), checking
 * it and its length against the frame's (the first column sets the row count unless nrow_fixed). */
static void add_checked(lua_State *L, int fidx, int *first, int nrow_fixed, const char **first_name) {
  const char *name = lua_tostring(L, -2);
  lframe *f = lua_touserdata(L, fidx);
  if (find(L, fidx, -2)) luaL_error(L, "suiro.frame: column name \"%s\" appears twice", name);
  int64_t n = check_column(L, -1, name);
  if (*first && !nrow_fixed) {
    f->nrow = n;
    *first_name = name;
  } else if (n != f->nrow) {
    if (*first_name)
      luaL_error(L, "suiro.frame: column \"%s\" has %I row(s), column \"%s\" has %I", name, (lua_Integer)n, *first_name,
                 (lua_Integer)f->nrow);
    luaL_error(L, "suiro.frame: column \"%s\" has %I row(s), nrow is %I", name, (lua_Integer)n, (lua_Integer)f->nrow);
  }
  *first = 0;
  lframe_append(L, fidx);
}

/* suiro.frame { { name, column }, ..., nrow = N } or suiro.frame(names, columns) */
static int l_frame(lua_State *L) {
  if (!lua_istable(L, 1))
    return luaL_error(L, "suiro.frame: argument 1 must be a table of { name, column } pairs, got %s",
                      luaL_typename(L, 1));
  int first = 1, fixed = 0;
  const char *first_name = NULL;
  if (!lua_isnoneornil(L, 2)) { /* names, columns */
    if (!lua_istable(L, 2))
      return luaL_error(L, "suiro.frame: argument 2 must be a table of columns by name, got %s", luaL_typename(L, 2));
    lua_settop(L, 2);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    lframe_push(L, 0);
    int fidx = lua_gettop(L);
    for (lua_Integer i = 1; i <= n; i++) {
      if (lua_rawgeti(L, 1, i) != LUA_TSTRING)
        return luaL_error(L, "suiro.frame: name %I must be a string, got %s", i, luaL_typename(L, -1));
      lua_pushvalue(L, -1);
      if (lua_rawget(L, 2) == LUA_TNIL)
        return luaL_error(L, "suiro.frame: no column \"%s\" in argument 2", lua_tostring(L, -2));
      add_checked(L, fidx, &first, 0, &first_name);
    }
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING || !find(L, fidx, -1))
        return luaL_error(L, "suiro.frame: column %s of argument 2 is not in the names", luaL_tolstring(L, -1, NULL));
    }
    return 1;
  }
  lua_settop(L, 1);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  int64_t nrow = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "nrow") == 0) {
      lua_getfield(L, 1, "nrow");
      if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 || (uint64_t)lua_tointeger(L, -1) > WIRE_MAX_COUNT)
        return luaL_error(L, "suiro.frame: nrow must be an integer in 0..2^48 - 1, got %s", luaL_tolstring(L, -1, NULL));
      nrow = lua_tointeger(L, -1);
      fixed = 1;
      lua_pop(L, 1);
    } else if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
      return luaL_error(L, "suiro.frame: unexpected key %s (give columns as { name, column } pairs, and nrow = N)",
                        luaL_tolstring(L, -1, NULL));
    }
  }
  lframe_push(L, nrow);
  int fidx = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, 1, i) != LUA_TTABLE)
      return luaL_error(L, "suiro.frame: column %I must be a { name, column } pair, got %s", i, luaL_typename(L, -1));
    int pair = lua_gettop(L);
    if (lua_rawgeti(L, pair, 1) != LUA_TSTRING)
      return luaL_error(L, "suiro.frame: column %I: the name must be a string, got %s", i, luaL_typename(L, -1));
    if (lua_rawgeti(L, pair, 2) == LUA_TNIL)
      return luaL_error(L, "suiro.frame: column %I (\"%s\") has no values", i, lua_tostring(L, -2));
    add_checked(L, fidx, &first, fixed, &first_name);
    lua_pop(L, 1); /* the pair */
  }
  return 1;
}

/* ---- methods ---------------------------------------------------------------------------------- */

static int m_nrow(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkframe(L, 1)->nrow);
  return 1;
}

static int m_ncol(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkframe(L, 1)->ncol);
  return 1;
}

static int m_names(lua_State *L) { /* a copy */
  lframe *f = checkframe(L, 1);
  lua_getiuservalue(L, 1, UV_NAMES);
  lua_createtable(L, (int)f->ncol, 0);
  for (lua_Integer i = 1; i <= f->ncol; i++) {
    lua_rawgeti(L, -2, i);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

/* f:column(i) or f:column(name): the column (nil when there is none) */
static int m_column(lua_State *L) {
  lframe *f = checkframe(L, 1);
  lua_Integer pos;
  if (lua_type(L, 2) == LUA_TSTRING) pos = find(L, 1, 2);
  else if (lua_isinteger(L, 2)) pos = lua_tointeger(L, 2);
  else return luaL_error(L, "frame:column: argument 1 must be a column number or name, got %s", luaL_typename(L, 2));
  if (pos < 1 || pos > f->ncol) return 0;
  lua_getiuservalue(L, 1, UV_COLS);
  lua_rawgeti(L, -1, pos);
  return 1;
}

static int pairs_next(lua_State *L) {
  lframe *f = lua_touserdata(L, 1);
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(1)) + 1;
  if (i > f->ncol) return 0;
  lua_pushinteger(L, i);
  lua_replace(L, lua_upvalueindex(1));
  lua_getiuservalue(L, 1, UV_NAMES);
  lua_rawgeti(L, -1, i);
  lua_getiuservalue(L, 1, UV_COLS);
  lua_rawgeti(L, -1, i);
  lua_remove(L, -2);
  return 2;
}

static int mm_pairs(lua_State *L) { /* for name, column in pairs(f): in column order */
  checkframe(L, 1);
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, pairs_next, 1);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

static int mm_index(lua_State *L) {
  checkframe(L, 1);
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "__methods");
  lua_pushvalue(L, 2);
  if (lua_rawget(L, -2) != LUA_TNIL) return 1;
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  lua_Integer pos = find(L, 1, 2);
  if (!pos) return 0;
  lua_getiuservalue(L, 1, UV_COLS);
  lua_rawgeti(L, -1, pos);
  return 1;
}

/* f.name = column (add or replace) or nil (remove) */
static int mm_newindex(lua_State *L) {
  lframe *f = checkframe(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING)
    return luaL_error(L, "suiro.frame: column names are strings, got %s", luaL_typename(L, 2));
  const char *name = lua_tostring(L, 2);
  lua_Integer pos = find(L, 1, 2);
  if (lua_isnil(L, 3)) {
    if (!pos) return 0;
    /* remove: rebuild the three tables without it */
    lua_getiuservalue(L, 1, UV_NAMES);
    lua_getiuservalue(L, 1, UV_COLS);
    int names = lua_gettop(L) - 1, cols = names + 1;
    lframe_push(L, f->nrow);
    int g = lua_gettop(L);
    for (lua_Integer i = 1; i <= f->ncol; i++) {
      if (i == pos) continue;
      lua_rawgeti(L, names, i);
      lua_rawgeti(L, cols, i);
      lframe_append(L, g);
    }
    for (int k = 1; k <= 3; k++) {
      lua_getiuservalue(L, g, k);
      lua_setiuservalue(L, 1, k);
    }
    f->ncol = ((lframe *)lua_touserdata(L, g))->ncol;
    return 0;
  }
  lua_settop(L, 3);
  int64_t n = check_column(L, 3, name);
  if (f->ncol == 0 || (pos && f->ncol == 1)) f->nrow = n; /* the only column sets the row count */
  else if (n != f->nrow)
    return luaL_error(L, "suiro.frame: column \"%s\" has %I row(s), the frame has %I", name, (lua_Integer)n,
                      (lua_Integer)f->nrow);
  if (pos) {
    lua_getiuservalue(L, 1, UV_COLS);
    lua_pushvalue(L, 3);
    lua_rawseti(L, -2, pos);
    return 0;
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lframe_append(L, 1);
  return 0;
}

static int mm_len(lua_State *L) { return m_nrow(L); }

/* What a column holds, for tostring: f64, date i32, timestamp i64 ms UTC, factor, strings. */
static void push_coltype(lua_State *L, int idx) {
  larray *a = larray_test(L, idx);
  if (!a) {
    lua_pushliteral(L, "strings");
    return;
  }
  const char *type = wire_type_name(a->type);
  static const char *const units[] = { "s", "ms", "us", "ns" };
  size_t len;
  const char *tz;
  switch (a->kind) {
  case LARRAY_FACTOR: lua_pushstring(L, a->ordered ? "factor ordered" : "factor"); break;
  case LARRAY_DATE: lua_pushfstring(L, "date %s", type); break;
  case LARRAY_TIMESTAMP:
    tz = lkind_tz(L, idx, &len);
    lua_pushfstring(L, "timestamp %s %s%s%s", type, units[a->unit & 3], len ? " " : "", tz);
    break;
  default: lua_pushstring(L, type); break;
  }
}

static int mm_tostring(lua_State *L) { /* suiro.frame(3 rows) {price f64, name strings} */
  lframe *f = checkframe(L, 1);
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, UV_NAMES);
  lua_getiuservalue(L, 1, UV_COLS);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "suiro.frame(%I row%s) {", (lua_Integer)f->nrow, f->nrow == 1 ? "" : "s");
  luaL_addvalue(&b);
  lua_Integer shown = f->ncol <= 12 ? f->ncol : 10;
  for (lua_Integer i = 1; i <= shown; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    lua_rawgeti(L, 3, i);
    push_coltype(L, lua_gettop(L));
    lua_rawgeti(L, 2, i);
    lua_pushfstring(L, "%s %s", lua_tostring(L, -1), lua_tostring(L, -2));
    lua_replace(L, -4);
    lua_pop(L, 2);
    luaL_addvalue(&b);
  }
  if (shown < f->ncol) {
    lua_pushfstring(L, ", ... (%I columns)", (lua_Integer)f->ncol);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

void lframe_init_mt(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "nrow", m_nrow }, { "ncol", m_ncol }, { "names", m_names }, { "column", m_column }, { NULL, NULL },
  };
  static const luaL_Reg meta[] = {
    { "__index", mm_index }, { "__newindex", mm_newindex }, { "__len", mm_len },
    { "__pairs", mm_pairs }, { "__tostring", mm_tostring }, { NULL, NULL },
  };
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__methods");
  lua_pushliteral(L, "suiro.frame");
  lua_setfield(L, -2, "__name");
}

void lframe_open(lua_State *L) {
  lua_pushcfunction(L, l_frame);
  lua_setfield(L, -2, "frame");
}
