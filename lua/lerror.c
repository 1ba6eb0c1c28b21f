/*
 * lerror.c — error objects: what a failed task, map element or dead worker raises in Lua, read
 * with the seam's protocol (suiro_result_error, suiro_bind.h section 2): { class, message,
 * traceback, index, slot, pid, value }, with a __tostring that reads like Lua's own errors.
 */
#include <stdint.h>
#include <string.h>

#include "lsuiro.h"

void lerror_push(lua_State *L, const char *cls, size_t cl, const char *msg, size_t ml, const char *tb,
                           size_t tl, int64_t index) {
  lua_createtable(L, 0, 6);
  lua_pushlstring(L, cls, cl);
  lua_setfield(L, -2, "class");
  lua_pushlstring(L, msg, ml);
  lua_setfield(L, -2, "message");
  lua_pushlstring(L, tb, tl);
  lua_setfield(L, -2, "traceback");
  if (index >= 0) {
    lua_pushinteger(L, (lua_Integer)((uint64_t)index + 1)); /* wraps only for an absurd index */
    lua_setfield(L, -2, "index");
  }
  lsuiro_setmt(L, &lsuiro_key_error);
}



/* Pushes the error object for a failure read with the seam's protocol (suiro_bind.h, section 2). */
void lerror_push_info(lua_State *L, const suiro_error_info *e) {
  lerror_push(L, e->cls.ptr, e->cls.len, e->message.ptr, e->message.len, e->traceback.ptr, e->traceback.len,
                 e->index);
  if (e->slot >= 0) {
    lua_pushinteger(L, e->slot);
    lua_setfield(L, -2, "slot");
  }
  if (e->pid > 0) {
    lua_pushinteger(L, e->pid);
    lua_setfield(L, -2, "pid");
  }
}

void lerror_push_result(lua_State *L, const suiro_result *r, int index) {
  suiro_error_info e;
  if (suiro_result_error(r, &e) != 0) luaL_error(L, "internal error: a successful result read as a failure");
  if (index > 0) e.index = index - 1;
  lerror_push_info(L, &e);
  if (e.has_value && ((uintptr_t)r->data & 7) == 0) { /* the raised object: err.value */
    lcodec_decode_value(L, r->data, r->len, 0);
    lua_rawgeti(L, -1, 2);
    lua_setfield(L, -3, "value");
    lua_pop(L, 1);
  }
}


int lerror_raise(lua_State *L) { return lua_error(L); }

static int l_error_tostring(lua_State *L) {
  lua_getfield(L, 1, "class");
  lua_getfield(L, 1, "message");
  lua_getfield(L, 1, "index");
  lua_getfield(L, 1, "traceback");
  const char *cls = luaL_optstring(L, 2, "error");
  const char *msg = luaL_optstring(L, 3, "");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (strcmp(cls, "remote") == 0) luaL_addstring(&b, "remote error");
  else if (strcmp(cls, "worker_died") == 0) luaL_addstring(&b, "worker died");
  else luaL_addstring(&b, cls);
  if (lua_isinteger(L, 4)) {
    lua_pushfstring(L, " at element %I", lua_tointeger(L, 4));
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, ": ");
  luaL_addstring(&b, msg);
  const char *tb = lua_tostring(L, 5);
  if (tb && *tb) {
    luaL_addstring(&b, "\nremote ");
    luaL_addstring(&b, tb);
  }
  luaL_pushresult(&b);
  return 1;
}

void lerror_open(lua_State *L) {
  lsuiro_newmt(L, LSUIRO_ERROR, &lsuiro_key_error);
  lua_pushcfunction(L, l_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.error");
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
}
