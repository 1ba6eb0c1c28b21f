/*
 * lbuf.c — growable byte buffers for the Lua face's C code, owned by a userdata on the Lua stack so
 * that an error unwinding through the code that fills one (an encode that meets a bad value)
 * frees it with everything else.
 */
#include <stdlib.h>
#include <string.h>

#include "lsuiro.h"

static int lbuf_gc(lua_State *L) {
  lbuf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  return 0;
}

static const char lbuf_key = 0;

lbuf *lbuf_push(lua_State *L) {
  lbuf *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &lbuf_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, lbuf_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, "suiro.buffer");
    lua_setfield(L, -2, "__name");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &lbuf_key);
  }
  lua_setmetatable(L, -2);
  return b;
}

void lbuf_put(lua_State *L, lbuf *b, const void *data, size_t n) {
  if (n == 0) return; /* b->p may still be NULL: memcpy must not see it */
  if (n > b->cap - b->len) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) luaL_error(L, "out of memory for a %I-byte buffer", (lua_Integer)(b->len + n));
      cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (!p) luaL_error(L, "out of memory for a %I-byte buffer", (lua_Integer)cap);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
}
