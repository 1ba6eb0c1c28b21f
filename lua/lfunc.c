/*
 * lfunc.c — function identity for the Lua face: a Lua function is sent as the content key of its
 * bytecode plus its upvalues; the code goes once per pool into the pool's blob store
 * (suiro_fn_publish), and workers fetch it by key (lworker.c, suiro_fn_fetch). Globals (_ENV) are
 * not sent: the worker rebinds them. C functions of loaded modules go by name, and function
 * references ("module.fn") are checked here before they are sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lsuiro.h"

#define FNINFO "suiro.fninfo"       /* weak table: function -> { key, nups, blob } */
#define CNAMES "suiro.cnames"       /* C function -> "module.name" */

/* "string.format" for a C function of a loaded module, via a reverse map built once. */
const char *lfunc_cname(lua_State *L, int idx) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, CNAMES) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CNAMES);
  }
  int map = lua_gettop(L);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, map) == LUA_TSTRING) {
    lua_remove(L, map);
    return lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  /* (re)build from package.loaded: module.name for every C function found one level deep */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  int loaded = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, loaded)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_istable(L, -1)) {
      const char *mod = lua_tostring(L, -2);
      int modt = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, modt)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
          lua_pushvalue(L, -1);
          lua_rawget(L, map);
          int known = !lua_isnil(L, -1);
          lua_pop(L, 1);
          if (!known) {
            lua_pushvalue(L, -1);
            if (strcmp(mod, "_G") == 0) lua_pushstring(L, lua_tostring(L, -3));
            else lua_pushfstring(L, "%s.%s", mod, lua_tostring(L, -3));
            lua_rawset(L, map);
          }
        }
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushvalue(L, idx);
  lua_rawget(L, map);
  lua_remove(L, map);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  return lua_tostring(L, -1);
}



/* The name under which the table at idx is in package.loaded (pushed, and returned), or NULL
 * (nothing pushed). Answers are cached per table, weakly. */
const char *lfunc_module_name(lua_State *L, int idx) {
  lsuiro_push_weak_table(L, "suiro.modnames");
  int cache = lua_gettop(L);
  lua_pushvalue(L, idx);
  int t = lua_rawget(L, cache);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushboolean(L, 0); /* not a module, unless found below */
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, idx)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_replace(L, -4); /* the answer: the module's name */
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1); /* package.loaded */
    lua_pushvalue(L, idx);
    lua_pushvalue(L, -2);
    lua_rawset(L, cache);
  }
  lua_remove(L, cache);
  if (lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
  lua_pop(L, 1);
  return NULL;
}

/* lua_dump's writer. The buffer starts at the first write, above the function being dumped (as
 * string.dump does): a luaL_Buffer's box must stay on top of the stack while it grows. */
typedef struct dump_state {
  int init;
  luaL_Buffer b;
} dump_state;

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  dump_state *s = ud;
  if (!s->init) {
    s->init = 1;
    luaL_buffinit(L, &s->b);
  }
  luaL_addlstring(&s->b, p, sz);
  return 0;
}

/* Pushes the function info { key =, nups =, names = {...}, blob = string } for the function at
 * idx, computing and caching it on first sight. */
static void function_info(lua_State *L, int idx) {
  lsuiro_push_weak_table(L, FNINFO);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  /* the bytecode first, on its own */
  lua_pushvalue(L, idx);
  dump_state ds;
  ds.init = 0;
  lua_dump(L, dump_writer, &ds, 0);
  if (ds.init) luaL_pushresult(&ds.b);
  else lua_pushliteral(L, "");
  lua_remove(L, -2); /* the function copy */
  int code = lua_gettop(L);
  /* blob: u32 nups, then per upvalue u16 name length + name, then the bytecode */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1) != NULL) { lua_pop(L, 1); nups++; }
  uint32_t n32 = (uint32_t)nups;
  luaL_addlstring(&b, (const char *)&n32, 4);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
    size_t l = strlen(name);
    lua_pop(L, 1);
    if (l > 65535) l = 65535;
    uint16_t l16 = (uint16_t)l;
    luaL_addlstring(&b, (const char *)&l16, 2);
    luaL_addlstring(&b, name, l);
  }
  lua_pushvalue(L, code);
  luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_remove(L, code);
  size_t blen;
  const char *blob = lua_tolstring(L, -1, &blen);
  uint64_t key = suiro_fn_key(blob, blen);
  lua_createtable(L, 0, 4);
  lua_insert(L, -2);
  lua_setfield(L, -2, "blob");
  lua_pushinteger(L, (lua_Integer)key);
  lua_setfield(L, -2, "key");
  lua_pushinteger(L, nups);
  lua_setfield(L, -2, "nups");
  lua_pushvalue(L, idx);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4); /* fninfo[f] = info */
  lua_remove(L, -2);
}

/* Pushes the pool's table of published functions (function -> prototype key, weak keys). */
static void push_published(lua_State *L, lpool *lp) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, lp) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lsuiro_new_weak_table(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, lp);
}

/* The prototype key of the Lua function at idx, its code published to the pool on first use
 * (suiro_fn_publish remembers what each pool has, so a new closure of a known prototype, a
 * function made in a loop, costs one lookup there). */
static uint64_t key_slow(lcodec_ctx *c, int idx) {
  lua_State *L = c->L;
  push_published(L, c->pool);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TNUMBER) {
    uint64_t key = (uint64_t)lua_tointeger(L, -1);
    lua_pop(L, 2);
    return key;
  }
  lua_pop(L, 1);
  function_info(L, idx);
  lua_getfield(L, -1, "key");
  uint64_t key = (uint64_t)lua_tointeger(L, -1);
  lua_getfield(L, -2, "blob");
  size_t blen;
  const char *blob = lua_tolstring(L, -1, &blen);
  if (suiro_fn_publish(c->pool->p, key, blob, blen) != SUIRO_OK)
    luaL_error(L, "%s: cannot send a function: %s", c->verb, suiro_last_error());
  lua_pop(L, 3);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, (lua_Integer)key);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return key;
}

uint64_t lfunc_key(lcodec_ctx *c, int idx) {
  lua_State *L = c->L;
  const void *fp = lua_topointer(L, idx);
  if (fp == c->fn_ptr) return c->fn_key;
  lpool *lp = c->pool;
  uint64_t key;
  if (fp == lp->fn_ptr) {
    key = lp->fn_key;
  } else {
    key = key_slow(c, idx);
    /* The pool remembers the last function too (the usual loop sends one function again and
     * again), pinned: the published table is weak, and the address of a collected function
     * could come back as another one's. */
    lua_pushvalue(L, idx);
    lua_rawsetp(L, LUA_REGISTRYINDEX, (const char *)lp + 1);
    lp->fn_ptr = fp;
    lp->fn_key = key;
  }
  c->fn_ptr = fp;
  c->fn_key = key;
  return key;
}

/* A function reference given as a string ("mymod.fn", "pkg::fn"): refused at once when it cannot
 * name anything (the LPeg grammar of suiro.parse reads it; names already seen are remembered). */
void lfunc_check_ref(lua_State *L, int idx, const char *verb) {
  idx = lua_absindex(L, idx);
  lsuiro_push_weak_table(L, "suiro.fnrefs_ok");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1);
  lsuiro_push_parser(L, "try_fnref");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 2);
  if (lua_isnil(L, -2))
    luaL_error(L, "%s%s: argument 1: %s", strncmp(verb, "pool:", 5) ? "pool:" : "", verb, lua_tostring(L, -1));
  lua_pop(L, 2);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}
