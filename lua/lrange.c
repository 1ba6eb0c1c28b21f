/*
 * lrange.c — suiro.range(a, b, [step]): an arithmetic sequence of integers as a value, never
 * materialised: #r, r[i], r.start/stop/step, ==, tostring. It crosses as the wire's RANGE
 * (lenc.c, ldec.c) and pool:map reads it as a RANGE input (lmap.c). Immutable: no shared state.
 */
#include <string.h>

#include "lsuiro.h"

const char lrange_key;

typedef struct lrange { int64_t start, step; uint64_t n; } lrange;

void lrange_push(lua_State *L, int64_t start, int64_t step, uint64_t n) {
  lrange *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->start = start;
  r->step = step;
  r->n = n;
  lsuiro_setmt(L, &lrange_key);
}

static int l_range(lua_State *L) {
  lua_Integer a = luaL_checkinteger(L, 1), b = luaL_checkinteger(L, 2), step = luaL_optinteger(L, 3, 1);
  if (step == 0) return luaL_error(L, "suiro.range: step must not be 0");
  uint64_t n = 0;
  if (!((step > 0 && b < a) || (step < 0 && b > a))) {
    /* |b - a| / |step| + 1 in unsigned arithmetic: no signed overflow, whatever the ends */
    uint64_t span = step > 0 ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
    uint64_t st = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
    uint64_t q = span / st;
    if (q >= WIRE_MAX_COUNT)
      return luaL_error(L, "suiro.range: %I to %I by %I has more than 2^48 - 1 elements", a, b, step);
    n = q + 1;
  }
  lrange_push(L, a, step, n);
  return 1;
}

int lrange_to(lua_State *L, int idx, int64_t *start, int64_t *step, uint64_t *n) {
  lrange *r = lsuiro_testud(L, idx, &lrange_key);
  if (!r) return 0;
  *start = r->start;
  *step = r->step;
  *n = r->n;
  return 1;
}

static lrange *checkrange(lua_State *L, int i) { return lsuiro_checkud(L, i, &lrange_key, "suiro.range"); }

static int l_range_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkrange(L, 1)->n);
  return 1;
}

static int l_range_index(lua_State *L) {
  lrange *r = checkrange(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || (uint64_t)i > r->n) return 0;
    lua_pushinteger(L, (lua_Integer)((uint64_t)r->start + (uint64_t)(i - 1) * (uint64_t)r->step));
    return 1;
  }
  const char *k = luaL_checkstring(L, 2);
  if (!strcmp(k, "start")) lua_pushinteger(L, r->start);
  else if (!strcmp(k, "step")) lua_pushinteger(L, r->step);
  else if (!strcmp(k, "stop"))
    lua_pushinteger(L, r->n ? (lua_Integer)((uint64_t)r->start + (r->n - 1) * (uint64_t)r->step) : r->start - r->step);
  else lua_pushnil(L);
  return 1;
}

static int l_range_eq(lua_State *L) {
  lrange *a = lsuiro_testud(L, 1, &lrange_key), *b = lsuiro_testud(L, 2, &lrange_key);
  lua_pushboolean(L, a && b && a->n == b->n && (a->n == 0 || (a->start == b->start && (a->n == 1 || a->step == b->step))));
  return 1;
}

static int l_range_tostring(lua_State *L) {
  lrange *r = checkrange(L, 1);
  lua_Integer stop = r->n ? (lua_Integer)((uint64_t)r->start + (r->n - 1) * (uint64_t)r->step) : r->start - r->step;
  lua_pushfstring(L, "suiro.range(%I, %I, %I)", (lua_Integer)r->start, stop, (lua_Integer)r->step);
  return 1;
}

/* Registers suiro.range; adds core.range to the table on top. */
void lrange_open(lua_State *L) {
  static const luaL_Reg range_meta[] = {
    { "__len", l_range_len }, { "__index", l_range_index }, { "__tostring", l_range_tostring },
    { "__eq", l_range_eq }, { NULL, NULL },
  };
  lsuiro_newmt(L, "suiro.range", &lrange_key);
  luaL_setfuncs(L, range_meta, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_range);
  lua_setfield(L, -2, "range");
}
