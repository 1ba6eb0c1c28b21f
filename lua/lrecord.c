/*
 * lrecord.c — records and their key order: a dict goes back out with its keys in the order they
 * arrived (or were given with suiro.dict), a Lua-made record with its keys sorted.
 *
 * KEYORDER: weak table, record -> its key order: a table with the keys at 1..m and, for each
 * key k, ord[k] = true when k is sent even while t[k] is nil (it arrived with a nil value, or
 * suiro.dict listed it without one), false otherwise. Recorded for decoded dicts whose keys are
 * not sorted, that hold nil values, or that would read as a list ({} and { n = 3 }); and by
 * suiro.dict. A record without one sends its keys sorted.
 */
#include <stdlib.h>
#include <string.h>

#include "lsuiro.h"
#include "lvalues.h"

#define KEYORDER "suiro.keyorder"

int lrecord_cmp(const void *a, const void *b) {
  const wire_str *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->ptr, y->ptr, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Pushes the recorded key order of the table at t (see KEYORDER), or nil; 1 when there is one. */
int lrecord_push_order(lua_State *L, int t) {
  t = lua_absindex(L, t);
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEYORDER) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return 0;
  }
  lua_pushvalue(L, t);
  int ty = lua_rawget(L, -2);
  lua_remove(L, -2);
  return ty == LUA_TTABLE;
}

int lrecord_has_order(lua_State *L, int t) {
  int has = lrecord_push_order(L, t);
  lua_pop(L, 1);
  return has;
}

/* The string keys of the record at t in the order they are sent: the recorded order (keys
 * present, or marked to be sent as nil), then any other keys sorted; without a recorded order,
 * all sorted. Pushes the order table (or nil) and an array of *count keys, which it returns; the
 * key strings live as long as t and the order table do. */
wire_str *lrecord_keys(lua_State *L, int t, lua_Integer *count) {
  t = lua_absindex(L, t);
  int has = lrecord_push_order(L, t);
  int ord = lua_gettop(L);
  lua_Integer m = has ? (lua_Integer)lua_rawlen(L, ord) : 0, nt = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    nt++;
    lua_pop(L, 1);
  }
  wire_str *keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(m + nt + 1), 0);
  lua_Integer k = 0;
  for (lua_Integer i = 1; i <= m; i++) {
    if (lua_rawgeti(L, ord, i) == LUA_TSTRING) {
      lua_pushvalue(L, -1);
      int send = lua_rawget(L, t) != LUA_TNIL;
      lua_pop(L, 1);
      if (!send) {
        lua_pushvalue(L, -1);
        send = lua_rawget(L, ord) == LUA_TBOOLEAN && lua_toboolean(L, -1);
        lua_pop(L, 1);
      }
      if (send) {
        keys[k].ptr = lua_tolstring(L, -1, &keys[k].len);
        k++;
      }
    }
    lua_pop(L, 1);
  }
  lua_Integer first = k;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    if (has) {
      lua_pushvalue(L, -1);
      int listed = lua_rawget(L, ord) != LUA_TNIL;
      lua_pop(L, 1);
      if (listed) continue;
    }
    keys[k].ptr = lua_tolstring(L, -1, &keys[k].len);
    k++;
  }
  qsort(keys + first, (size_t)(k - first), sizeof *keys, lrecord_cmp);
  *count = k;
  return keys;
}


void lrecord_set_order(lua_State *L, int t, int order) {
  lsuiro_push_weak_table(L, KEYORDER);
  lua_pushvalue(L, t);
  lua_pushvalue(L, order);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}


/* suiro.keys(t): the keys of t in the order they are sent. */
void lrecord_push_keys(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_Integer n;
  wire_str *keys = lrecord_keys(L, idx, &n);
  lua_createtable(L, n < (1 << 26) ? (int)n : 0, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_pushlstring(L, keys[i].ptr, keys[i].len);
    lua_rawseti(L, -2, i + 1);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* suiro.dict(t, keys): records the sequence of distinct strings at keys as t's key order; keys
 * that t lacks are sent with nil values. */
void lrecord_set_keys(lua_State *L, int t, int keys) {
  t = lua_absindex(L, t);
  keys = lua_absindex(L, keys);
  lua_Integer m = (lua_Integer)lua_rawlen(L, keys);
  lua_createtable(L, (int)m, (int)m);
  int ord = lua_gettop(L);
  for (lua_Integer i = 1; i <= m; i++) {
    if (lua_rawgeti(L, keys, i) != LUA_TSTRING)
      luaL_error(L, "suiro.dict: key %I must be a string, got %s", i, luaL_typename(L, -1));
    lua_pushvalue(L, -1);
    if (lua_rawget(L, ord) != LUA_TNIL) luaL_error(L, "suiro.dict: key \"%s\" appears twice", lua_tostring(L, -2));
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    int absent = lua_rawget(L, t) == LUA_TNIL;
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, absent);
    lua_rawset(L, ord);
    lua_rawseti(L, ord, i);
  }
  lrecord_set_order(L, t, ord);
  lua_pop(L, 1);
}

