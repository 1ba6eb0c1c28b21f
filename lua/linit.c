/*
 * linit.c — suiro.core, the Lua face's C module: each part registers itself into one table, which
 * lua/suiro/init.lua turns into the public API (as Lua's linit.c opens its libraries).
 */
#include "larray.h"
#include "lsuiro.h"

int luaopen_suiro_core(lua_State *L) {
  lua_newtable(L);
  lua_pushstring(L, suiro_version());
  lua_setfield(L, -2, "version");
  lpool_open(L);                   /* pools: lpool.c, tasks: ltask.c */
  lsuiro_newmt(L, LSUIRO_CALL, &lsuiro_key_call);
  lua_setfield(L, -2, "call_mt");  /* call specs: made in init.lua */
  lerror_open(L);
  lua_setfield(L, -2, "error_mt"); /* error objects: lerror.c */
  lmap_open(L);                    /* maps: lmap.c */
  lrange_open(L);                  /* suiro.range: lrange.c */
  lchan_open(L);                   /* suiro.channel: lchan.c */
  luaopen_suiro_array(L);
  lua_setfield(L, -2, "array");    /* typed arrays: larray.c */
  lworker_open(L);      /* suiro.random and the worker's registry entries: lworker.c */
  lvalues_open(L);           /* NA, bytes, strings, dict, keys, frame, wire: lvalues.c */
  return 1;
}
