/*
 * lvalues.c — Lua values for the wire types plain Lua values cannot carry, and suiro.wire.
 *
 *   suiro.NA                      the missing value: BOOL NA, and the NA element of string
 *                                 vectors, bool arrays and factors
 *   suiro.bytes(s)                binary data (BYTES); b:string(), #b, b1 == b2, tostring(b)
 *   suiro.strings { "a", suiro.NA, "c" }   a string vector with NA (STRS): strings or suiro.NA
 *                                 at 1..n, the length in field n
 *   suiro.dict { { "b", 1 }, { "a", 2 } }  a record whose keys go in this order (DICT);
 *   suiro.dict(t, keys)           the same for an existing table; suiro.keys(t) lists the keys
 *                                 of a record in the order they are sent
 *   suiro.wire.encode(v) -> s     one value to a wire buffer (a string)
 *   suiro.wire.decode(s [, { describe = true }]) -> v
 *   suiro.wire.ref {...}, suiro.wire.func {...}   descriptors of REF and FUNC items
 *
 * Frames are in lframe.c, arrays of a kind (date, timestamp, factor) in lkind.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"

const char lvalues_key_na, lvalues_key_bytes, lvalues_key_strings, lvalues_key_frame, lvalues_key_refdesc,
  lvalues_key_funcdesc;

static void init_na_mt(lua_State *L);
static void init_bytes_mt(lua_State *L);
static void init_strings_mt(lua_State *L);
static void init_refdesc_mt(lua_State *L);
static void init_funcdesc_mt(lua_State *L);

void lvalues_push_mt(lua_State *L, const void *key) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  if (key == &lvalues_key_bytes) init_bytes_mt(L);
  else if (key == &lvalues_key_strings) init_strings_mt(L);
  else if (key == &lvalues_key_frame) lframe_init_mt(L);
  else if (key == &lvalues_key_refdesc) init_refdesc_mt(L);
  else if (key == &lvalues_key_funcdesc) init_funcdesc_mt(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

/* ---- suiro.NA --------------------------------------------------------------------------------- */

static int na_tostring(lua_State *L) {
  lua_pushliteral(L, "NA");
  return 1;
}

static void init_na_mt(lua_State *L) {
  lua_pushcfunction(L, na_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.NA");
  lua_setfield(L, -2, "__name");
  lua_pushliteral(L, "suiro.NA");
  lua_setfield(L, -2, "__metatable"); /* fixed: getmetatable(suiro.NA) gives this name */
}

void lvalues_push_na(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &lvalues_key_na) == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  lua_newuserdatauv(L, 0, 0);
  lua_newtable(L);
  init_na_mt(L);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lvalues_key_na);
}

int lvalues_is_na(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA) return 0;
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lvalues_key_na);
  int same = lua_rawequal(L, -1, idx);
  lua_pop(L, 1);
  return same;
}

/* ---- suiro.bytes ------------------------------------------------------------------------------ */

void lvalues_push_bytes(lua_State *L, const void *p, size_t len) {
  lua_newuserdatauv(L, 0, 1);
  lua_pushlstring(L, p, len);
  lua_setiuservalue(L, -2, 1);
  lvalues_push_mt(L, &lvalues_key_bytes);
  lua_setmetatable(L, -2);
}

const char *lvalues_tobytes(lua_State *L, int idx, size_t *len) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lsuiro_is(L, idx, &lvalues_key_bytes)) return NULL;
  lua_getiuservalue(L, idx, 1);
  const char *s = lua_tolstring(L, -1, len); /* anchored by the userdata */
  lua_pop(L, 1);
  return s;
}

static const char *checkbytes(lua_State *L, int idx, size_t *len) {
  const char *s = lvalues_tobytes(L, idx, len);
  if (!s) luaL_typeerror(L, idx, "suiro.bytes");
  return s;
}

/* suiro.bytes(s): binary data; a suiro.bytes is returned as it is. */
static int bytes_new(lua_State *L) {
  size_t len;
  if (lvalues_tobytes(L, 1, &len)) {
    lua_settop(L, 1);
    return 1;
  }
  if (lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "suiro.bytes: argument 1 must be a string, got %s", luaL_typename(L, 1));
  lua_newuserdatauv(L, 0, 1);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lvalues_push_mt(L, &lvalues_key_bytes);
  lua_setmetatable(L, -2);
  return 1;
}

static int bytes_string(lua_State *L) {
  size_t len;
  checkbytes(L, 1, &len);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int bytes_len(lua_State *L) {
  size_t len;
  checkbytes(L, 1, &len);
  lua_pushinteger(L, (lua_Integer)len);
  return 1;
}

static int bytes_eq(lua_State *L) {
  size_t la, lb;
  const char *a = lvalues_tobytes(L, 1, &la), *b = lvalues_tobytes(L, 2, &lb);
  lua_pushboolean(L, a && b && la == lb && memcmp(a, b, la) == 0);
  return 1;
}

static int bytes_tostring(lua_State *L) { /* suiro.bytes(9) 0001feff807f414243 */
  size_t len;
  const unsigned char *s = (const unsigned char *)checkbytes(L, 1, &len);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "suiro.bytes(%I)%s", (lua_Integer)len, len ? " " : "");
  luaL_addvalue(&b);
  size_t shown = len <= 32 ? len : 32;
  for (size_t i = 0; i < shown; i++) {
    luaL_addchar(&b, "0123456789abcdef"[s[i] >> 4]);
    luaL_addchar(&b, "0123456789abcdef"[s[i] & 15]);
  }
  if (shown < len) luaL_addstring(&b, "...");
  luaL_pushresult(&b);
  return 1;
}

static void init_bytes_mt(lua_State *L) {
  static const luaL_Reg methods[] = { { "string", bytes_string }, { NULL, NULL } };
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, bytes_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, bytes_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushcfunction(L, bytes_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.bytes");
  lua_setfield(L, -2, "__name");
}

/* ---- counts read from callers ----------------------------------------------------------------- */

void lvalues_check_budget(lua_State *L, const char *who, int64_t n, size_t elem_bytes) {
  if (n < 0) luaL_error(L, "%s: n must be >= 0, got %I", who, (lua_Integer)n);
  char what[96];
  snprintf(what, sizeof what, "%s: n", who);
  if (suiro_budget_check(what, (uint64_t)n, elem_bytes) != SUIRO_OK) luaL_error(L, "%s", suiro_last_error());
}

int64_t lvalues_count(lua_State *L, int idx, const char *who, size_t elem_bytes) {
  idx = lua_absindex(L, idx);
  lua_Integer n;
  if (lua_getfield(L, idx, "n") != LUA_TNIL) {
    int ok;
    n = lua_tointegerx(L, -1, &ok);
    if (!ok || lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "%s: n must be an integer, got %s", who, lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                                                                                        : luaL_typename(L, -1));
  } else {
    n = (lua_Integer)lua_rawlen(L, idx);
  }
  lua_pop(L, 1);
  lvalues_check_budget(L, who, n, elem_bytes);
  return n;
}

/* ---- string vectors --------------------------------------------------------------------------- */

void lvalues_setmt_strings(lua_State *L) {
  lvalues_push_mt(L, &lvalues_key_strings);
  lua_setmetatable(L, -2);
}

int lvalues_is_strings(lua_State *L, int idx) { return lua_istable(L, idx) && lsuiro_is(L, idx, &lvalues_key_strings); }

/* suiro.strings(t): a new string vector of t's elements 1..n (n = t.n, else #t); nil and
 * suiro.NA become suiro.NA. */
static int strings_new(lua_State *L) {
  if (!lua_istable(L, 1))
    return luaL_error(L, "suiro.strings: argument 1 must be a table of strings, got %s", luaL_typename(L, 1));
  lua_Integer n;
  if (lua_getfield(L, 1, "n") == LUA_TNIL) {
    lua_pop(L, 1);
    n = luaL_len(L, 1);
    lvalues_check_budget(L, "suiro.strings", n, LVALUES_SLOT_BYTES);
  } else {
    lua_pop(L, 1);
    n = lvalues_count(L, 1, "suiro.strings", LVALUES_SLOT_BYTES); /* checked before the loop */
  }
  lua_createtable(L, n < (1 << 26) ? (int)n : 0, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    LSUIRO_POLL(L, i);
    int t = lua_geti(L, 1, i);
    if (t == LUA_TNIL) {
      lua_pop(L, 1);
      lvalues_push_na(L);
    } else if (t != LUA_TSTRING && !lvalues_is_na(L, -1)) {
      return luaL_error(L, "suiro.strings: element %I must be a string or suiro.NA, got %s", i, luaL_typename(L, -1));
    }
    lua_rawseti(L, -2, i);
  }
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  lvalues_setmt_strings(L);
  return 1;
}

static int strings_tostring(lua_State *L) { /* suiro.strings(3) {"a", NA, "c"} */
  lua_pushliteral(L, "n");
  lua_Integer n = lua_rawget(L, 1) == LUA_TNUMBER ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, 1);
  lua_pop(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "suiro.strings(%I) {", n);
  luaL_addvalue(&b);
  lua_Integer shown = n < 10 ? n : 8;
  for (lua_Integer i = 1; i <= shown; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    if (lua_rawgeti(L, 1, i) == LUA_TSTRING) lua_pushfstring(L, "\"%s\"", lua_tostring(L, -1));
    else luaL_tolstring(L, -1, NULL); /* NA */
    lua_remove(L, -2);
    luaL_addvalue(&b);
  }
  if (shown < n) luaL_addstring(&b, ", ...");
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

static void init_strings_mt(lua_State *L) {
  lua_pushcfunction(L, strings_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.strings");
  lua_setfield(L, -2, "__name");
}

/* ---- ordered records -------------------------------------------------------------------------- */

/* suiro.dict { { key, value }, ... } or suiro.dict(t, keys): a record sent with its keys in this
 * order; a listed key without a value is sent with nil. */
static int dict_new(lua_State *L) {
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 1) || !lua_istable(L, 2))
      return luaL_error(L, "suiro.dict: arguments must be a table and a table of its keys in order, got %s and %s",
                        luaL_typename(L, 1), luaL_typename(L, 2));
    lrecord_set_keys(L, 1, 2);
    lua_settop(L, 1);
    return 1;
  }
  if (!lua_istable(L, 1))
    return luaL_error(L, "suiro.dict: argument 1 must be a table of { key, value } pairs, got %s", luaL_typename(L, 1));
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
      return luaL_error(L, "suiro.dict: unexpected key %s (give the entries as { key, value } pairs)",
                        luaL_tolstring(L, -1, NULL));
  }
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  int keys = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, 1, i) != LUA_TTABLE)
      return luaL_error(L, "suiro.dict: entry %I must be a { key, value } pair, got %s", i, luaL_typename(L, -1));
    if (lua_rawgeti(L, -1, 1) != LUA_TSTRING)
      return luaL_error(L, "suiro.dict: the key of entry %I must be a string, got %s", i, luaL_typename(L, -1));
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, i);
    lua_rawgeti(L, -2, 2);
    lua_rawset(L, t);
    lua_pop(L, 1);
  }
  lrecord_set_keys(L, t, keys); /* raises on a repeated key */
  lua_settop(L, t);
  return 1;
}

static int keys_get(lua_State *L) {
  if (!lua_istable(L, 1)) return luaL_error(L, "suiro.keys: argument 1 must be a table, got %s", luaL_typename(L, 1));
  lrecord_push_keys(L, 1);
  return 1;
}

/* ---- suiro.wire ------------------------------------------------------------------------------- */

static int writer_gc(lua_State *L) {
  wire_writer_free(lua_touserdata(L, 1));
  return 0;
}

/* suiro.wire.encode(v) -> the wire buffer holding v, as a string */
static int wire_encode(lua_State *L) {
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  /* the writer lives in a userdata whose __gc frees its buffer, also when encoding raises */
  wire_writer *w = lua_newuserdatauv(L, sizeof *w, 0);
  wire_writer_init(w, NULL, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, writer_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lcodec_ctx c = { .L = L, .pool = NULL, .verb = "wire.encode" };
  lcodec_encode_value(&c, 1, w);
  const void *p;
  size_t len;
  if (wire_writer_finish(w, &p, &len) != WIRE_OK) return luaL_error(L, "wire.encode: %s", wire_writer_error(w));
  lua_pushlstring(L, p, len);
  wire_writer_free(w);
  return 1;
}

/* suiro.wire.decode(s [, { describe = true }]) -> the value in the buffer s (a string or
 * suiro.bytes). Malformed input raises "cannot decode value: wire: <what> at byte <n>". */
static int wire_decode(lua_State *L) {
  size_t len;
  const char *s = lvalues_tobytes(L, 1, &len);
  if (!s) {
    if (lua_type(L, 1) != LUA_TSTRING)
      return luaL_error(L, "suiro.wire.decode: argument 1 must be a string, got %s", luaL_typename(L, 1));
    s = lua_tolstring(L, 1, &len);
  }
  int describe = 0;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 2))
      return luaL_error(L, "suiro.wire.decode: argument 2 (options) must be a table, got %s", luaL_typename(L, 2));
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "describe") != 0)
        return luaL_error(L, "suiro.wire.decode: unknown option %s (options: describe)", luaL_tolstring(L, -1, NULL));
    }
    lua_getfield(L, 2, "describe");
    describe = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  if ((uintptr_t)s & 7) { /* the reader needs an 8-aligned buffer */
    void *copy = lua_newuserdatauv(L, len ? len : 1, 0);
    memcpy(copy, s, len);
    s = copy;
  }
  return lcodec_decode_value(L, s, len, describe);
}

/* Copies the fields of the table at 1 into a new table with the metatable of key, refusing any
 * field not in allowed. */
static int new_desc(lua_State *L, const char *fname, const char *const *allowed, const void *key) {
  if (!lua_istable(L, 1)) return luaL_error(L, "%s: argument 1 must be a table, got %s", fname, luaL_typename(L, 1));
  lua_settop(L, 1);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    int ok = 0;
    for (int k = 0; allowed[k] && !ok; k++)
      ok = lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), allowed[k]) == 0;
    if (!ok) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int k = 0; allowed[k]; k++) {
        if (k) luaL_addstring(&b, ", ");
        luaL_addstring(&b, allowed[k]);
      }
      luaL_pushresult(&b);
      const char *fields = lua_tostring(L, -1);
      const char *got = luaL_tolstring(L, -3, NULL);
      return luaL_error(L, "%s: unknown field %s (fields: %s)", fname, got, fields);
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, 2);
  }
  lvalues_push_mt(L, key);
  lua_setmetatable(L, 2);
  return 1;
}

/* suiro.wire.ref { name =, type =, order = "C", flags = 0, offset =, length =, shape = {} } */
static int wire_ref_new(lua_State *L) {
  static const char *const fields[] = { "name", "type", "order", "flags", "offset", "length", "shape", NULL };
  new_desc(L, "suiro.wire.ref", fields, &lvalues_key_refdesc);
  if (lua_getfield(L, 2, "shape") == LUA_TNIL) {
    lua_newtable(L);
    lua_setfield(L, 2, "shape");
  }
  lua_settop(L, 2);
  return 1;
}

/* suiro.wire.func { lang = "lua", key =, name = nil, captured = { n =, ... } } */
static int wire_func_new(lua_State *L) {
  static const char *const fields[] = { "lang", "key", "name", "captured", NULL };
  new_desc(L, "suiro.wire.func", fields, &lvalues_key_funcdesc);
  if (lua_getfield(L, 2, "captured") == LUA_TNIL) {
    lua_createtable(L, 0, 1);
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "n");
    lua_setfield(L, 2, "captured");
  }
  lua_settop(L, 2);
  return 1;
}

static int refdesc_tostring(lua_State *L) { /* suiro.wire.ref(f64 [1000x10] F, 80000 bytes at 4096 in /x) */
  lua_settop(L, 1);
  int base = lua_gettop(L);
  lua_getfield(L, 1, "type");
  lua_pushfstring(L, "suiro.wire.ref(%s", luaL_tolstring(L, -1, NULL));
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
  if (lua_getfield(L, 1, "shape") == LUA_TTABLE && lua_rawlen(L, -1) > 0) {
    int sh = lua_gettop(L);
    lua_Integer nd = (lua_Integer)lua_rawlen(L, sh);
    lua_pushliteral(L, " [");
    for (lua_Integer d = 1; d <= nd; d++) {
      lua_rawgeti(L, sh, d);
      lua_pushfstring(L, "%s%s", d > 1 ? "x" : "", luaL_tolstring(L, -1, NULL));
      lua_replace(L, -3);
      lua_pop(L, 1);
    }
    lua_getfield(L, 1, "order");
    lua_pushstring(L, lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "F") == 0 ? "] F" : "]");
    lua_remove(L, -2);
    lua_concat(L, lua_gettop(L) - sh);
    lua_remove(L, sh);
  } else {
    lua_pop(L, 1);
  }
  lua_getfield(L, 1, "length");
  lua_getfield(L, 1, "offset");
  lua_getfield(L, 1, "name");
  int f = lua_gettop(L) - 2;
  lua_pushfstring(L, ", %s bytes at %s in %s)", luaL_tolstring(L, f, NULL), luaL_tolstring(L, f + 1, NULL),
                  luaL_tolstring(L, f + 2, NULL));
  lua_replace(L, f);
  lua_settop(L, f);
  lua_concat(L, lua_gettop(L) - base);
  return 1;
}

static int funcdesc_tostring(lua_State *L) { /* suiro.wire.func(lua fedcba9876543210, 2 captured) */
  lua_settop(L, 1);
  lua_getfield(L, 1, "lang");
  lua_getfield(L, 1, "name");
  lua_getfield(L, 1, "key");
  lua_getfield(L, 1, "captured");
  lua_Integer ncap = 0;
  if (lua_istable(L, 5)) {
    lua_getfield(L, 5, "n");
    ncap = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, 5);
    lua_pop(L, 1);
  }
  const char *lang = luaL_tolstring(L, 2, NULL);
  if (lua_type(L, 3) == LUA_TSTRING) {
    lua_pushfstring(L, "suiro.wire.func(%s %s, %I captured)", lang, lua_tostring(L, 3), ncap);
  } else {
    char key[24];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)(lua_Unsigned)lua_tointeger(L, 4));
    lua_pushfstring(L, "suiro.wire.func(%s %s, %I captured)", lang, key, ncap);
  }
  return 1;
}

static void init_refdesc_mt(lua_State *L) {
  lua_pushcfunction(L, refdesc_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.wire.ref");
  lua_setfield(L, -2, "__name");
}

static void init_funcdesc_mt(lua_State *L) {
  lua_pushcfunction(L, funcdesc_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.wire.func");
  lua_setfield(L, -2, "__name");
}

/* ---- registration ----------------------------------------------------------------------------- */

void lvalues_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "bytes", bytes_new },         { "strings", strings_new },  { "dict", dict_new },
    { "keys", keys_get },           { "wire_encode", wire_encode }, { "wire_decode", wire_decode },
    { "wire_ref", wire_ref_new },   { "wire_func", wire_func_new }, { NULL, NULL },
  };
  luaL_setfuncs(L, funcs, 0);
  lvalues_push_na(L);
  lua_setfield(L, -2, "NA");
  lframe_open(L);
}
