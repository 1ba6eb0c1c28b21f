/*
 * lcodec.c — Lua values <-> the wire format (docs/wire-format.md).
 *
 *   Lua                         wire
 *   nil, boolean                NIL, BOOL
 *   integer / float             I64 (I48 when small) / F64
 *   string                      STR
 *   sequence {1, 2, 3}          LIST        (a table with n = N is a list of N with holes)
 *   {a = 1, b = 2}              DICT        (keys in the order they arrived in, else sorted)
 *   suiro.array                 ARRAY / NDARRAY / DATE / TIMESTAMP / FACTOR (or REF: zero-copy)
 *   suiro.call {...}            CALL
 *   error object                ERROR
 *   Lua function                FUNC (prototype key + captured values; bytecode in the pool's
 *                               blob store), C function of a loaded module: FUNC by name
 *   the same table twice        BACKREF (cycles and shared parts survive)
 *
 * Everything else (userdata, coroutines, tables with other keys) raises at send time with the
 * path to the offending part: "submit: argument 2.conn: userdata (FILE*) cannot be sent".
 *
 * Function identity: a Lua function is sent as the 64-bit hash of its bytecode plus its
 * upvalues. The bytecode goes once per pool into the pool's blob store; workers load it on first
 * sight and cache it by key (lworker.c). Globals (_ENV) are not sent: the worker rebinds them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larray.h"
#include "lsuiro.h"

#define KEYORDER "suiro.keyorder"   /* weak table: decoded dict -> its key order (if not sorted) */
#define FNINFO "suiro.fninfo"       /* weak table: function -> { key, nups, blob published } */
#define CNAMES "suiro.cnames"       /* C function -> "module.name" */

/* ---- encoding -------------------------------------------------------------------------------- */

typedef struct seg { int kind; lua_Integer i; const char *s; } seg; /* path segment */
enum { SEG_ARG, SEG_INDEX, SEG_KEY, SEG_UPVAL, SEG_NAMED, SEG_RESULT };

#define SEEN_INLINE 8 /* the first containers are tracked in C; a Lua table takes the rest */

typedef struct enc {
  lcodec_ctx *c;
  wire_writer *w;
  int seen;              /* stack index of the visited table (0 until needed) */
  int nseen;             /* entries in seen_ptr */
  const void *seen_ptr[SEEN_INLINE];
  uint64_t seen_ord[SEEN_INLINE];
  uint64_t ncontainers;  /* LIST/DICT/FUNC opened so far: the BACKREF ordinal space */
  int nseg;
  seg path[WIRE_MAX_DEPTH + 8];
} enc;

static void push_path(lua_State *L, enc *e) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int k = 0; k < e->nseg; k++) {
    const seg *s = &e->path[k];
    switch (s->kind) {
    case SEG_ARG: lua_pushfstring(L, "argument %I", s->i); break;
    case SEG_RESULT: lua_pushfstring(L, "result %I", s->i); break;
    case SEG_INDEX: lua_pushfstring(L, "[%I]", s->i); break;
    case SEG_KEY: lua_pushfstring(L, ".%s", s->s); break;
    case SEG_UPVAL: lua_pushfstring(L, "%supvalue '%s'", k ? " " : "", s->s); break;
    case SEG_NAMED: lua_pushfstring(L, "%s%s", k ? "." : "", s->s); break;
    }
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
}

static int enc_fail(lua_State *L, enc *e, const char *what) {
  wire_writer_free(e->w);
  push_path(L, e);
  return luaL_error(L, "%s: %s: %s", e->c->verb, lua_tostring(L, -1), what);
}

static void enc_value(enc *e, int idx);

static void with_seg(enc *e, int kind, lua_Integer i, const char *s) {
  if (e->nseg < (int)(sizeof e->path / sizeof e->path[0])) e->path[e->nseg] = (seg){ kind, i, s };
  e->nseg++;
}

/* Registers a table/function as the next shareable container; if it was seen already, writes a
 * BACKREF and returns 1. The common case (a handful of containers) stays in C. */
static int enc_shared(enc *e, int idx) {
  lua_State *L = e->c->L;
  const void *ptr = lua_topointer(L, idx);
  for (int i = 0; i < e->nseen; i++) {
    if (e->seen_ptr[i] == ptr) {
      wire_put_backref(e->w, e->seen_ord[i]);
      return 1;
    }
  }
  if (e->seen) { /* beyond the inline entries: a table in the registry (not on the stack, where
                  * it would shift the indices our callers hold) */
    lua_getfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TNUMBER) {
      uint64_t ord = (uint64_t)lua_tointeger(L, -1);
      lua_pop(L, 2);
      wire_put_backref(e->w, ord);
      return 1;
    }
    lua_pop(L, 2);
  }
  uint64_t ord = e->ncontainers++;
  if (e->nseen < SEEN_INLINE) {
    e->seen_ptr[e->nseen] = ptr;
    e->seen_ord[e->nseen++] = ord;
    return 0;
  }
  if (!e->seen) {
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
    e->seen = 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
  lua_pushvalue(L, idx);
  lua_pushinteger(L, (lua_Integer)ord);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return 0;
}

static int cmp_keys(const void *a, const void *b) {
  const wire_str *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->ptr, y->ptr, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void enc_table(enc *e, int idx) {
  lua_State *L = e->c->L;
  luaL_checkstack(L, 8, "nested too deeply");
  /* Classify: a list (1..n, optionally with an integer field n), or a dict of string keys. */
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  lua_Integer count = 0, nkeys_str = 0, max_int = 0;
  int bad = 0, has_n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    int kt = lua_type(L, -2);
    if (kt == LUA_TSTRING) {
      nkeys_str++;
      size_t kl;
      const char *k = lua_tolstring(L, -2, &kl);
      if (kl == 1 && k[0] == 'n' && lua_isinteger(L, -1)) has_n = 1;
    } else if (lua_isinteger(L, -2)) {
      lua_Integer k = lua_tointeger(L, -2);
      if (k < 1) bad = 1;
      if (k > max_int) max_int = k;
    } else {
      bad = 1;
    }
    lua_pop(L, 1);
  }
  if (bad) {
    /* name the first key that is neither a positive integer nor a string */
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING && !(lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1)) {
        const char *k = luaL_tolstring(L, -1, NULL);
        enc_fail(L, e, lua_pushfstring(L, "table with a key of type %s (%s) cannot be sent",
                                       luaL_typename(L, -2), k));
      }
    }
  }
  lua_Integer list_n = -1;
  if (nkeys_str == 0) list_n = count == n ? n : -1;
  else if (nkeys_str == 1 && has_n) {
    lua_getfield(L, idx, "n");
    lua_Integer nn = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (nn >= max_int && nn >= 0) list_n = nn; /* table.pack style: a list with holes */
  }
  if (list_n < 0 && nkeys_str != count) {
    /* mixed: name an integer key and a string key */
    lua_pushnil(L);
    const char *skey = NULL;
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING && !skey) skey = lua_tostring(L, -1);
    }
    if (nkeys_str == count - 0 && n > 0) skey = skey; /* unreachable: kept simple */
    enc_fail(L, e, lua_pushfstring(L, "table mixes list items (1..%I) and string keys (\"%s\"): make it all one "
                                      "or the other", count - nkeys_str, skey ? skey : "?"));
  }
  if (list_n >= 0) {
    if (list_n == 0 && count == 0) {
      wire_put_list(e->w, 0);
      return;
    }
    wire_put_list(e->w, (uint64_t)list_n);
    for (lua_Integer i = 1; i <= list_n; i++) {
      lua_rawgeti(L, idx, i);
      with_seg(e, SEG_INDEX, i, NULL);
      enc_value(e, lua_gettop(L));
      e->nseg--;
      lua_pop(L, 1);
    }
    return;
  }
  /* dict: keys in recorded order (a decoded dict keeps the order it came in) or sorted */
  wire_put_dict(e->w, (uint64_t)count);
  wire_str *keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(count ? count : 1), 0);
  int keys_idx = lua_gettop(L);
  int ordered = 0;
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEYORDER) == LUA_TTABLE) {
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TTABLE && (lua_Integer)lua_rawlen(L, -1) == count) {
      ordered = 1;
      for (lua_Integer i = 1; i <= count && ordered; i++) {
        lua_rawgeti(L, -1, i);
        keys[i - 1].ptr = lua_tolstring(L, -1, &keys[i - 1].len);
        lua_pushvalue(L, -1);
        if (lua_rawget(L, idx) == LUA_TNIL) ordered = 0; /* keys changed since: sort instead */
        lua_pop(L, 2); /* key strings stay alive: they are in the order table */
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!ordered) {
    lua_Integer k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      keys[k].ptr = lua_tolstring(L, -1, &keys[k].len); /* alive: keys of idx */
      k++;
    }
    qsort(keys, (size_t)count, sizeof *keys, cmp_keys);
  }
  for (lua_Integer i = 0; i < count; i++) {
    wire_put_str(e->w, keys[i].ptr, keys[i].len);
    lua_pushlstring(L, keys[i].ptr, keys[i].len);
    lua_rawget(L, idx);
    with_seg(e, SEG_KEY, 0, keys[i].ptr);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_remove(L, keys_idx);
}

static void enc_call(enc *e, int idx) {
  lua_State *L = e->c->L;
  lua_getfield(L, idx, "target");
  lua_getfield(L, idx, "source");
  size_t len;
  if (!lua_isnil(L, -2)) {
    const char *t = lua_tolstring(L, -2, &len);
    wire_put_call(e->w, WIRE_CALL_NAME, (wire_str){ t, len });
  } else {
    const char *s = lua_tolstring(L, -1, &len);
    wire_put_call(e->w, WIRE_CALL_SOURCE, (wire_str){ s ? s : "", s ? len : 0 });
  }
  lua_pop(L, 2);
  lua_getfield(L, idx, "args");
  int args = lua_gettop(L);
  lua_getfield(L, args, "n");
  lua_Integer n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, args);
  lua_pop(L, 1);
  wire_put_list(e->w, (uint64_t)n);
  e->ncontainers++;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, args, i);
    with_seg(e, SEG_INDEX, i, NULL);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "named");
  int named = lua_gettop(L);
  lua_Integer count = 0;
  lua_pushnil(L);
  while (lua_next(L, named)) { count++; lua_pop(L, 1); }
  wire_put_dict(e->w, (uint64_t)count);
  e->ncontainers++;
  wire_str *keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(count ? count : 1), 0);
  lua_Integer k = 0;
  lua_pushnil(L);
  while (lua_next(L, named)) {
    lua_pop(L, 1);
    keys[k].ptr = lua_tolstring(L, -1, &keys[k].len);
    k++;
  }
  qsort(keys, (size_t)count, sizeof *keys, cmp_keys);
  for (lua_Integer i = 0; i < count; i++) {
    wire_put_str(e->w, keys[i].ptr, keys[i].len);
    lua_pushlstring(L, keys[i].ptr, keys[i].len);
    lua_rawget(L, named);
    with_seg(e, SEG_NAMED, 0, keys[i].ptr);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

static void enc_error_obj(enc *e, int idx) {
  lua_State *L = e->c->L;
  wire_str f[3];
  static const char *names[] = { "class", "message", "traceback" };
  for (int i = 0; i < 3; i++) {
    lua_getfield(L, idx, names[i]);
    f[i].ptr = lua_isstring(L, -1) ? lua_tolstring(L, -1, &f[i].len) : "";
    if (!lua_isstring(L, -1)) f[i].len = 0;
  }
  lua_getfield(L, idx, "index");
  int64_t index = lua_isinteger(L, -1) ? (int64_t)lua_tointeger(L, -1) - 1 : -1;
  wire_put_error(e->w, f[0], f[1], f[2], index);
  lua_pop(L, 4);
}

static void enc_array(enc *e, larray *a) {
  size_t bytes = larray_bytes(a);
  void *dst;
  if (a->kind == LARRAY_DATE) {
    dst = wire_put_date(e->w, a->type, (uint64_t)a->n);
  } else if (a->kind == LARRAY_TIMESTAMP) {
    lua_State *L = e->c->L;
    lua_pushlightuserdata(L, a); /* find the array's attributes via the stack: caller has it */
    lua_pop(L, 1);
    dst = wire_put_timestamp(e->w, a->type, a->unit, (wire_str){ "", 0 }, (uint64_t)a->n);
  } else if (a->ndim > 1) {
    uint64_t dims[LARRAY_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) dims[d] = (uint64_t)a->shape[d];
    dst = wire_put_ndarray(e->w, a->type, a->order, a->ndim, dims);
  } else {
    dst = wire_put_array(e->w, a->type, (uint64_t)a->n);
  }
  if (dst && bytes) memcpy(dst, a->data, bytes);
}

/* "string.format" for a C function of a loaded module, via a reverse map built once. */
static const char *cfunction_name(lua_State *L, int idx) {
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

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  luaL_addlstring((luaL_Buffer *)ud, p, sz);
  return 0;
}

/* Pushes the function info { key =, nups =, names = {...}, blob = string } for the function at
 * idx, computing and caching it on first sight. */
static void function_info(lua_State *L, int idx) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, FNINFO) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, FNINFO);
  }
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  /* blob: u32 nups, then per upvalue u16 name length + name, then the bytecode */
  luaL_Buffer b;
  lua_pushvalue(L, idx);
  luaL_buffinit(L, &b);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1) != NULL) { lua_pop(L, 1); nups++; }
  uint32_t n32 = (uint32_t)nups;
  luaL_addlstring(&b, (const char *)&n32, 4);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
    lua_pop(L, 1);
    uint16_t l = (uint16_t)strlen(name);
    luaL_addlstring(&b, (const char *)&l, 2);
    luaL_addlstring(&b, name, l);
  }
  lua_pushvalue(L, idx);
  lua_dump(L, dump_writer, &b, 0);
  lua_pop(L, 1);
  luaL_pushresult(&b);
  lua_remove(L, -2); /* the function copy under the buffer */
  size_t blen;
  const char *blob = lua_tolstring(L, -1, &blen);
  uint64_t key = suiro_hash64(blob, blen);
  if (key == 0) key = 1;
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
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, lp);
}

/* The prototype key of the Lua function at idx, its blob stored in the pool on first use. The
 * hot path is two table lookups keyed by pointers (none when the same function comes again). */
static uint64_t function_key_slow(enc *e, int idx) {
  lua_State *L = e->c->L;
  push_published(L, e->c->pool);
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
  if (suiro_blob_put(e->c->pool->p, key, blob, blen) != SUIRO_OK) enc_fail(L, e, suiro_last_error());
  lua_pop(L, 3);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, (lua_Integer)key);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return key;
}

static uint64_t function_key(enc *e, int idx) {
  const void *fp = lua_topointer(e->c->L, idx);
  if (fp == e->c->fn_ptr) return e->c->fn_key;
  uint64_t key = function_key_slow(e, idx);
  e->c->fn_ptr = fp;
  e->c->fn_key = key;
  return key;
}

static void enc_function(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (lua_iscfunction(L, idx)) {
    const char *name = cfunction_name(L, idx);
    if (!name) enc_fail(L, e, "a C function that is not part of a loaded module cannot be sent");
    if (enc_shared(e, idx)) { lua_pop(L, 1); return; }
    wire_put_func(e->w, WIRE_LANG_LUA, 0, 1);
    wire_put_str(e->w, name, strlen(name));
    lua_pop(L, 1);
    return;
  }
  if (!e->c->pool || !e->c->pool->p) enc_fail(L, e, "a function cannot be sent here");
  if (enc_shared(e, idx)) return;
  uint64_t key = function_key(e, idx);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1) != NULL) { lua_pop(L, 1); nups++; }
  wire_put_func(e->w, WIRE_LANG_LUA, key, (uint64_t)nups + 1);
  wire_put_nil(e->w); /* no name: a prototype */
  if (!nups) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  int globals = lua_gettop(L);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
    /* _ENV (or the globals table under a stripped name) is rebound by the worker */
    if ((name[0] == '_' && strcmp(name, "_ENV") == 0) || lua_rawequal(L, -1, globals)) {
      wire_put_nil(e->w);
    } else {
      with_seg(e, SEG_UPVAL, 0, name);
      enc_value(e, lua_gettop(L));
      e->nseg--;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static void enc_value(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (e->nseg > WIRE_MAX_DEPTH) enc_fail(L, e, "nested more than 64 levels deep");
  switch (lua_type(L, idx)) {
  case LUA_TNIL: wire_put_nil(e->w); return;
  case LUA_TBOOLEAN: wire_put_bool(e->w, lua_toboolean(L, idx)); return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) wire_put_i64(e->w, (int64_t)lua_tointeger(L, idx));
    else wire_put_f64(e->w, (double)lua_tonumber(L, idx));
    return;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    wire_put_str(e->w, s, len);
    return;
  }
  case LUA_TTABLE:
    if (lua_getmetatable(L, idx)) {
      lua_rawgetp(L, LUA_REGISTRYINDEX, &lsuiro_key_call);
      int is_call = lua_rawequal(L, -1, -2);
      lua_pop(L, 1);
      lua_rawgetp(L, LUA_REGISTRYINDEX, &lsuiro_key_error);
      int is_err = lua_rawequal(L, -1, -2);
      lua_pop(L, 2);
      if (is_call) { enc_call(e, idx); return; }
      if (is_err) { enc_error_obj(e, idx); return; }
    }
    if (enc_shared(e, idx)) return;
    enc_table(e, idx);
    return;
  case LUA_TFUNCTION: enc_function(e, idx); return;
  case LUA_TUSERDATA: {
    larray *a = larray_test(L, idx);
    if (a) {
      if (!a->data && a->n) enc_fail(L, e, "a released suiro.array cannot be sent");
      enc_array(e, a);
      return;
    }
    const char *tn = "userdata";
    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) tn = lua_tostring(L, -1);
    enc_fail(L, e, lua_pushfstring(L, "userdata (%s) cannot be sent", tn));
    return;
  }
  case LUA_TLIGHTUSERDATA: enc_fail(L, e, "light userdata cannot be sent"); return;
  case LUA_TTHREAD: enc_fail(L, e, "a coroutine cannot be sent"); return;
  default: enc_fail(L, e, lua_pushfstring(L, "a %s cannot be sent", luaL_typename(L, idx))); return;
  }
}

void lcodec_encode_task(lcodec_ctx *c, int fidx, int first, int n, wire_writer *w) {
  lua_State *L = c->L;
  enc e;
  e.c = c;
  e.w = w;
  e.seen = 0;
  e.nseen = 0;
  e.ncontainers = 0;
  e.nseg = 0;
  int t = lua_type(L, fidx);
  int is_call = 0;
  if (t == LUA_TTABLE) is_call = lsuiro_is(L, fidx, &lsuiro_key_call);
  if (t != LUA_TFUNCTION && t != LUA_TSTRING && !is_call)
    luaL_error(L, "pool:%s: argument 1 must be a function or call spec, got %s", c->verb, luaL_typename(L, fidx));
  if (is_call && n > 0)
    luaL_error(L, "pool:%s: a call spec carries its own arguments; put them in suiro.call { ... }", c->verb);
  luaL_checkstack(L, 16, "too many arguments");
  wire_put_list(w, (uint64_t)n + 1);
  e.ncontainers = 1;
  with_seg(&e, SEG_ARG, 1, NULL);
  if (t == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, fidx, &len);
    wire_put_str(w, s, len);
  } else {
    enc_value(&e, fidx);
  }
  e.nseg = 0;
  for (int i = 0; i < n; i++) {
    with_seg(&e, SEG_ARG, i + 2, NULL);
    enc_value(&e, first + i);
    e.nseg = 0;
  }
  if (e.seen) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
  }
}

void lcodec_encode_values(lcodec_ctx *c, int first, int n, wire_writer *w) {
  lua_State *L = c->L;
  enc e;
  e.c = c;
  e.w = w;
  e.seen = 0;
  e.nseen = 0;
  e.ncontainers = 0;
  e.nseg = 0;
  luaL_checkstack(L, 16, "too many values");
  wire_put_list(w, (uint64_t)n);
  e.ncontainers = 1;
  for (int i = 0; i < n; i++) {
    with_seg(&e, SEG_RESULT, i + 1, NULL);
    enc_value(&e, first + i);
    e.nseg = 0;
  }
  if (e.seen) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
  }
}

/* ---- decoding -------------------------------------------------------------------------------- */

typedef lcodec_dec dec;

static int dec_fail(dec *d) {
  return luaL_error(d->L, "cannot decode value: %s", wire_reader_error(&d->r));
}

static void dec_next(dec *d, wire_item *it) {
  int st = wire_next(&d->r, it);
  if (st != WIRE_OK) {
    if (st == WIRE_END) luaL_error(d->L, "cannot decode value: truncated");
    dec_fail(d);
  }
}

static void dec_value(dec *d, wire_item *it);

static void remember(dec *d) { /* the container on top of the stack gets the next ordinal */
  if (!d->refs) { d->nref++; return; }
  lua_pushvalue(d->L, -1);
  lua_rawseti(d->L, d->refs, d->nref++);
}

static void set_keyorder(lua_State *L, int t, int order) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEYORDER) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, KEYORDER);
  }
  lua_pushvalue(L, t);
  lua_pushvalue(L, order);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

static void push_error_obj(lua_State *L, const char *cls, size_t cl, const char *msg, size_t ml, const char *tb,
                           size_t tl, int64_t index) {
  lua_createtable(L, 0, 6);
  lua_pushlstring(L, cls, cl);
  lua_setfield(L, -2, "class");
  lua_pushlstring(L, msg, ml);
  lua_setfield(L, -2, "message");
  lua_pushlstring(L, tb, tl);
  lua_setfield(L, -2, "traceback");
  if (index >= 0) {
    lua_pushinteger(L, (lua_Integer)index + 1);
    lua_setfield(L, -2, "index");
  }
  lsuiro_setmt(L, &lsuiro_key_error);
}

static void dec_array_like(dec *d, wire_item *it) {
  lua_State *L = d->L;
  larray *a = larray_new(L, it->type, (int64_t)it->n);
  size_t bytes = larray_bytes(a);
  if (bytes) memcpy(a->data, it->data, bytes);
  if (it->tag == WIRE_NDARRAY) {
    a->ndim = it->ndim;
    a->order = it->flag;
    if (it->ndim > LARRAY_MAX_NDIM) luaL_error(L, "cannot decode value: %d dimensions (at most %d)", it->ndim, LARRAY_MAX_NDIM);
    for (int k = 0; k < it->ndim; k++) a->shape[k] = (int64_t)it->dims[k];
  } else if (it->tag == WIRE_DATE) {
    a->kind = LARRAY_DATE;
  } else if (it->tag == WIRE_TIMESTAMP) {
    a->kind = LARRAY_TIMESTAMP;
    a->unit = it->flag;
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, it->text[0].ptr, it->text[0].len);
    lua_setfield(L, -2, "tz");
    lua_setiuservalue(L, -2, 1);
  }
}

static void dec_value(dec *d, wire_item *it) {
  lua_State *L = d->L;
  luaL_checkstack(L, 8, "value nested too deeply");
  switch (it->tag) {
  case WIRE_NIL: lua_pushnil(L); return;
  case WIRE_BOOL:
    if (it->flag == WIRE_NA_BOOL) lua_pushnil(L);
    else lua_pushboolean(L, it->flag);
    return;
  case WIRE_I64: lua_pushinteger(L, (lua_Integer)it->i); return;
  case WIRE_F64: lua_pushnumber(L, it->f); return;
  case WIRE_STR: lua_pushlstring(L, it->data, (size_t)it->n); return;
  case WIRE_BYTES: lua_pushlstring(L, it->data, (size_t)it->n); return;
  case WIRE_ARRAY:
  case WIRE_NDARRAY:
  case WIRE_DATE:
  case WIRE_TIMESTAMP: dec_array_like(d, it); return;
  case WIRE_STRS: {
    lua_createtable(L, (int)it->n, 1);
    wire_strs_iter si = wire_strs_begin(&it->strs);
    const char *s;
    size_t len;
    lua_Integer i = 1;
    while (wire_strs_next(&si, &s, &len)) {
      if (s) {
        lua_pushlstring(L, s, len);
        lua_rawseti(L, -2, i);
      }
      i++;
    }
    lua_pushinteger(L, (lua_Integer)it->n);
    lua_setfield(L, -2, "n");
    return;
  }
  case WIRE_FACTOR: {
    larray *a = larray_new(L, WIRE_T_I32, (int64_t)it->n);
    if (it->n) memcpy(a->data, it->data, (size_t)it->n * 4);
    a->kind = LARRAY_FACTOR;
    a->ordered = it->flag;
    lua_createtable(L, 0, 1);
    lua_createtable(L, (int)it->strs.n, 0);
    wire_strs_iter si = wire_strs_begin(&it->strs);
    const char *s;
    size_t len;
    lua_Integer i = 1;
    while (wire_strs_next(&si, &s, &len)) {
      lua_pushlstring(L, s ? s : "", len);
      lua_rawseti(L, -2, i++);
    }
    lua_setfield(L, -2, "levels");
    lua_setiuservalue(L, -2, 1);
    return;
  }
  case WIRE_LIST: {
    uint64_t n = it->n;
    lua_createtable(L, n < (1u << 26) ? (int)n : 0, 0);
    remember(d);
    int holes = 0;
    for (uint64_t i = 1; i <= n; i++) {
      wire_item c;
      dec_next(d, &c);
      dec_value(d, &c);
      if (lua_isnil(L, -1)) holes = 1;
      lua_rawseti(L, -2, (lua_Integer)i);
    }
    if (holes) { /* keep the length: table.pack style */
      lua_pushinteger(L, (lua_Integer)n);
      lua_setfield(L, -2, "n");
    }
    return;
  }
  case WIRE_DICT: {
    uint64_t n = it->n;
    lua_createtable(L, 0, n < (1u << 26) ? (int)n : 0);
    remember(d);
    int t = lua_gettop(L);
    int order = 0, sorted = 1;
    const char *prev = NULL;
    size_t prevlen = 0;
    for (uint64_t i = 1; i <= n; i++) {
      wire_item k, v;
      dec_next(d, &k);
      if (k.tag != WIRE_STR) luaL_error(L, "cannot decode value: dict key is not a string at byte %d", (int)k.pos);
      const char *ks = k.data;
      size_t kl = (size_t)k.n;
      if (prev) {
        wire_str a = { prev, prevlen }, b = { ks, kl };
        if (cmp_keys(&a, &b) >= 0) sorted = 0;
      }
      prev = ks;
      prevlen = kl;
      lua_pushlstring(L, ks, kl);
      if (!order) {
        /* record the order only if it turns out unsorted; keep the keys so far meanwhile */
        lua_createtable(L, (int)n, 0);
        order = lua_gettop(L);
        lua_insert(L, -2);
        order = lua_gettop(L) - 1;
      }
      lua_pushvalue(L, -1);
      lua_rawseti(L, order, (lua_Integer)i);
      dec_next(d, &v);
      dec_value(d, &v);
      lua_rawset(L, t);
    }
    if (order) {
      if (!sorted) set_keyorder(L, t, order);
      lua_remove(L, order);
    }
    return;
  }
  case WIRE_FRAME: {
    /* a frame as a table of columns with its names in order (suiro.frame lives in Lua) */
    lua_createtable(L, 0, (int)it->n + 2);
    int t = lua_gettop(L);
    lua_createtable(L, (int)it->n, 0);
    int names = lua_gettop(L);
    for (uint64_t i = 1; i <= it->n; i++) {
      wire_item k, v;
      dec_next(d, &k);
      lua_pushlstring(L, k.data, (size_t)k.n);
      lua_pushvalue(L, -1);
      lua_rawseti(L, names, (lua_Integer)i);
      dec_next(d, &v);
      dec_value(d, &v);
      lua_rawset(L, t);
    }
    lua_setfield(L, t, "__names");
    lua_pushinteger(L, (lua_Integer)it->nrow);
    lua_setfield(L, t, "__nrow");
    if (luaL_getmetatable(L, "suiro.frame") == LUA_TTABLE) lua_setmetatable(L, t);
    else lua_pop(L, 1);
    return;
  }
  case WIRE_ERROR:
    push_error_obj(L, it->text[0].ptr, it->text[0].len, it->text[1].ptr, it->text[1].len, it->text[2].ptr,
                   it->text[2].len, it->i);
    return;
  case WIRE_CALL: {
    lua_createtable(L, 0, 5);
    int t = lua_gettop(L);
    lua_pushlstring(L, it->text[0].ptr, it->text[0].len);
    lua_setfield(L, t, it->flag == WIRE_CALL_SOURCE ? "source" : "target");
    wire_item c;
    dec_next(d, &c);
    dec_value(d, &c);
    if (!lua_istable(L, -1)) luaL_error(L, "cannot decode value: call arguments are not a list");
    lua_pushinteger(L, (lua_Integer)c.n);
    lua_setfield(L, -2, "n");
    lua_setfield(L, t, "args");
    dec_next(d, &c);
    dec_value(d, &c);
    lua_Integer nn = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) { nn++; lua_pop(L, 1); }
    lua_setfield(L, t, "named");
    lua_pushinteger(L, nn);
    lua_setfield(L, t, "nnamed");
    lsuiro_setmt(L, &lsuiro_key_call);
    return;
  }
  case WIRE_FUNC:
    if (!d->func) luaL_error(L, "cannot decode value: a function arrived where none can run (at byte %d)", (int)it->pos);
    d->func(L, d, it, d->func_ud);
    return;
  case WIRE_BACKREF:
    if (!d->refs) luaL_error(L, "cannot decode value: unexpected back-reference at byte %d", (int)it->pos);
    lua_rawgeti(L, d->refs, (lua_Integer)it->i);
    return;
  case WIRE_REF:
    luaL_error(L, "cannot decode value: shared-memory references are not supported here yet (byte %d)", (int)it->pos);
    return;
  default:
    luaL_error(L, "cannot decode value: unexpected %s at byte %d", wire_tag_name(it->tag), (int)it->pos);
  }
}

/* Used by lworker.c to decode FUNC children. */
void lcodec_dec_child(lcodec_dec *d) {
  wire_item c;
  dec_next(d, &c);
  dec_value(d, &c);
}
void lcodec_dec_remember(lcodec_dec *d) { remember(d); }

static void dec_init(dec *d, lua_State *L, const void *buf, size_t len) {
  d->L = L;
  d->refs = 0;
  d->nref = 0;
  d->func = NULL;
  d->func_ud = NULL;
  if (wire_reader_init(&d->r, buf, len) != WIRE_OK) dec_fail(d);
  if (d->r.shared) {
    lua_newtable(L);
    d->refs = lua_gettop(L);
  }
}

int lcodec_decode_values(lua_State *L, const void *buf, size_t len) {
  dec d;
  int base = lua_gettop(L);
  dec_init(&d, L, buf, len);
  wire_item it;
  dec_next(&d, &it);
  if (it.tag != WIRE_LIST) luaL_error(L, "cannot decode values: expected a list, got %s", wire_tag_name(it.tag));
  uint64_t n = it.n;
  luaL_checkstack(L, (int)(n < 100000 ? n : 100000) + 8, "too many values");
  if (n > 100000) luaL_error(L, "cannot decode values: %d values are too many to return", (int)n);
  d.nref = 1; /* the outer list */
  for (uint64_t i = 0; i < n; i++) {
    wire_item c;
    dec_next(&d, &c);
    dec_value(&d, &c);
  }
  if (d.refs) lua_remove(L, d.refs);
  return lua_gettop(L) - base;
}

/* Decoder for the worker's task payloads: lworker.c drives it (d lives on the C stack). When
 * the buffer holds back-references, a table of containers is pushed on the Lua stack. */
void lcodec_dec_init(lcodec_dec *d, lua_State *L, const void *buf, size_t len, lcodec_func_fn func, void *ud) {
  dec_init(d, L, buf, len);
  d->func = func;
  d->func_ud = ud;
}

int lcodec_dec_item(lcodec_dec *d, wire_item *it) {
  int st = wire_next(&d->r, it);
  if (st == WIRE_ERR) dec_fail(d);
  return st;
}

void lcodec_dec_value(lcodec_dec *d, wire_item *it) { dec_value(d, it); }

/* ---- error objects --------------------------------------------------------------------------- */

void lcodec_push_error(lua_State *L, const suiro_result *r, int index) {
  if (r->kind == SUIRO_RESULT_ERROR) {
    /* an ERROR value encoded by the worker's binding; anything else is taken as a message */
    wire_reader rd;
    wire_item it;
    if (r->len >= 8 && ((uintptr_t)r->data & 7) == 0 && wire_reader_init(&rd, r->data, r->len) == WIRE_OK &&
        wire_next(&rd, &it) == WIRE_OK && it.tag == WIRE_ERROR) {
      push_error_obj(L, it.text[0].ptr, it.text[0].len, it.text[1].ptr, it.text[1].len, it.text[2].ptr, it.text[2].len,
                     index > 0 ? index - 1 : it.i);
    } else {
      push_error_obj(L, "remote", 6, r->data, r->len, "", 0, index > 0 ? index - 1 : -1);
    }
  } else if (r->kind == SUIRO_RESULT_DIED) {
    push_error_obj(L, "worker_died", 11, r->data, r->len, "", 0, index > 0 ? index - 1 : -1);
  } else {
    push_error_obj(L, "cancelled", 9, "the task was cancelled before it started", 40, "", 0, index > 0 ? index - 1 : -1);
  }
  if (r->worker_slot >= 0) {
    lua_pushinteger(L, r->worker_slot);
    lua_setfield(L, -2, "slot");
  }
  if (r->worker_pid > 0) {
    lua_pushinteger(L, r->worker_pid);
    lua_setfield(L, -2, "pid");
  }
}

int lsuiro_raise(lua_State *L) { return lua_error(L); }

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

void lcodec_open(lua_State *L) {
  lsuiro_newmt(L, LSUIRO_ERROR, &lsuiro_key_error);
  lua_pushcfunction(L, l_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.error");
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
}
