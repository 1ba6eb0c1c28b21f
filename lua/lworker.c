/*
 * lworker.c — the Lua worker: runs tasks sent by Lua hosts (and call specs from anyone).
 *
 * A worker is a long-lived Lua state with the standard libraries. Each task payload is a list
 * [function, arguments...] where the function is
 *   FUNC (key, captured values)  a Lua function: its bytecode is loaded once per worker from the
 *                                pool's blob store and cached by key; per task the captured
 *                                values are bound, and _ENV is a fresh table over the globals,
 *                                so globals a task sets do not leak into the next one;
 *   STR "mod.fn"                 a reference, resolved with require and cached;
 *   CALL                         a call spec: a named function or source text, with positional
 *                                and named arguments.
 * The cached closure of a prototype is shared: binding its upvalues saves the previous values
 * and restores them afterwards, which is correct because tasks nest strictly (a worker helping a
 * nested wait runs the inner task to completion before the outer one continues).
 * Results go back as a list of the returned values; an error as an ERROR value with the
 * message, the worker's traceback and class "remote".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "larray.h"
#include "lsuiro.h"

#define PROTOS "suiro.protos"  /* key -> { fn =, nups =, names = {...}, bc = bytecode } */
#define REFS "suiro.refs"      /* "mod.fn" -> function */
#define SOURCES "suiro.sources" /* source text -> compiled chunk */
#define ENVMT "suiro.envmt"    /* metatable of task environments: __index = _G */

static lua_State *WL;          /* the worker's Lua state */

/* Per-task decoding context. */
typedef struct task_ctx {
  int env;      /* stack index of this task's environment (0: not made yet) */
} task_ctx;

static void push_env(lua_State *L, task_ctx *c) {
  if (!c->env) {
    /* made lazily, below the decoding state; callers keep stack discipline around it */
    lua_newtable(L);
    luaL_getmetatable(L, ENVMT);
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.task_env");
    c->env = 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.task_env");
}

/* Pushes the cache entry for prototype `key`, loading the blob on a miss. */
static void proto_entry(lua_State *L, uint64_t key) {
  lua_getfield(L, LUA_REGISTRYINDEX, PROTOS);
  lua_pushinteger(L, (lua_Integer)key);
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  suiro_pool *p = suiro_current_pool();
  void *blob = NULL;
  size_t len = 0;
  if (!p || suiro_blob_get(p, key, &blob, &len) != SUIRO_OK)
    luaL_error(L, "cannot load the task's function (prototype %016llx): %s", (unsigned long long)key,
               suiro_last_error());
  const char *b = blob;
  uint32_t nups;
  if (len < 4) goto bad;
  memcpy(&nups, b, 4);
  size_t off = 4;
  lua_createtable(L, 0, 4);
  lua_createtable(L, (int)nups, 0);
  for (uint32_t i = 1; i <= nups; i++) {
    uint16_t l;
    if (off + 2 > len) goto bad;
    memcpy(&l, b + off, 2);
    off += 2;
    if (off + l > len) goto bad;
    lua_pushlstring(L, b + off, l);
    lua_rawseti(L, -2, i);
    off += l;
  }
  lua_setfield(L, -2, "names");
  lua_pushinteger(L, nups);
  lua_setfield(L, -2, "nups");
  lua_pushlstring(L, b + off, len - off);
  lua_setfield(L, -2, "bc");
  if (luaL_loadbufferx(L, b + off, len - off, "=task", "b") != LUA_OK) {
    free(blob);
    lua_error(L);
  }
  free(blob);
  lua_setfield(L, -2, "fn");
  lua_pushinteger(L, (lua_Integer)key);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  lua_remove(L, -2);
  return;
bad:
  free(blob);
  luaL_error(L, "the task's function (prototype %016llx) is damaged", (unsigned long long)key);
}

/* Resolves "a.b.fn" with require on the longest module prefix that loads; cached. */
static void resolve_ref(lua_State *L, const char *name, size_t len) {
  lua_getfield(L, LUA_REGISTRYINDEX, REFS);
  lua_pushlstring(L, name, len);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.resolve");
  lua_pushlstring(L, name, len);
  lua_call(L, 1, 1); /* raises with a clear message */
  lua_pushlstring(L, name, len);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  lua_remove(L, -2);
}

static const char resolve_src[] =
  "local name = ...\n"
  "local parts = {}\n"
  "for p in name:gmatch('[^.]+') do parts[#parts + 1] = p end\n"
  "if #parts == 0 then error('empty function name', 0) end\n"
  "local errs = {}\n"
  "for k = #parts - 1, 0, -1 do\n"
  "  local v\n"
  "  if k == 0 then v = _G else\n"
  "    local mod = table.concat(parts, '.', 1, k)\n"
  "    local ok, m = pcall(require, mod)\n"
  "    if ok then v = m else errs[#errs + 1] = tostring(m) end\n"
  "  end\n"
  "  for i = k + 1, #parts do\n"
  "    if type(v) ~= 'table' then v = nil break end\n"
  "    v = v[parts[i]]\n"
  "  end\n"
  "  if v ~= nil then\n"
  "    if type(v) ~= 'function' and not (getmetatable(v) or {}).__call then\n"
  "      error(('\"%s\" is a %s, not a function'):format(name, type(v)), 0)\n"
  "    end\n"
  "    return v\n"
  "  end\n"
  "end\n"
  "error(('cannot find function \"%s\"%s'):format(name, #errs > 0 and (': ' .. errs[1]) or ''), 0)\n";

/* Value-mode FUNC: a function inside arguments or upvalues gets its own closure. */
static void decode_func_value(lua_State *L, lcodec_dec *d, wire_item *it, void *ud) {
  task_ctx *c = ud;
  if (it->i == 0) { /* by name: a C function of a loaded module */
    wire_item name;
    if (lcodec_dec_item(d, &name) != WIRE_OK || name.tag != WIRE_STR)
      luaL_error(L, "cannot decode value: a named function without a name");
    resolve_ref(L, name.data, (size_t)name.n);
    lcodec_dec_remember(d);
    for (uint64_t k = 1; k < it->n; k++) { lcodec_dec_child(d); lua_pop(L, 1); }
    return;
  }
  proto_entry(L, (uint64_t)it->i);
  int entry = lua_gettop(L);
  lua_getfield(L, entry, "nups");
  int nups = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  if ((uint64_t)nups + 1 != it->n) luaL_error(L, "cannot decode value: function captures %d values, got %d", nups, (int)it->n - 1);
  lua_getfield(L, entry, "bc");
  size_t bl;
  const char *bc = lua_tolstring(L, -1, &bl);
  if (luaL_loadbufferx(L, bc, bl, "=task", "b") != LUA_OK) lua_error(L);
  lua_remove(L, -2); /* bc */
  lua_remove(L, entry);
  int fn = lua_gettop(L);
  lcodec_dec_remember(d);
  lcodec_dec_child(d); /* name: nil */
  lua_pop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, PROTOS); /* names again */
  for (int i = 1; i <= nups; i++) {
    lcodec_dec_child(d);
    const char *uname = lua_getupvalue(L, fn, i);
    lua_pop(L, 1);
    if (uname && strcmp(uname, "_ENV") == 0 && lua_isnil(L, -1)) {
      lua_pop(L, 1);
      push_env(L, c);
    }
    lua_setupvalue(L, fn, i);
  }
  lua_pop(L, 1);
}

static int msgh(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_getmetafield(L, 1, "__tostring") != LUA_TNIL) {
      lua_pushvalue(L, 1);
      lua_call(L, 1, 1);
      msg = lua_tostring(L, -1);
    } else {
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
  }
  /* {message, traceback}: the traceback stops where the worker's own machinery begins */
  lua_createtable(L, 2, 0);
  lua_pushstring(L, msg);
  lua_rawseti(L, -2, 1);
  luaL_traceback(L, L, NULL, 1);
  const char *tb = lua_tostring(L, -1);
  const char *cut = strstr(tb, "\n\t[C]: in ?");
  if (cut) {
    lua_pushlstring(L, tb, (size_t)(cut - tb));
    lua_remove(L, -2);
  }
  lua_rawseti(L, -2, 2);
  return 1;
}

typedef struct run_args {
  const void *arg;
  size_t len;
  int nresults;
} run_args;

/* Decodes the payload, binds and calls the function; leaves the results on the stack. */
static int run_task(lua_State *L) {
  run_args *ra = lua_touserdata(L, 1);
  lua_settop(L, 0);
  task_ctx c = { 0 };
  lcodec_dec *d = lcodec_dec_open(L, ra->arg, ra->len, decode_func_value, &c);
  int base = lua_gettop(L); /* decoder state below this */
  wire_item it;
  if (lcodec_dec_item(d, &it) != WIRE_OK || it.tag != WIRE_LIST || it.n < 1)
    return luaL_error(L, "malformed task: expected a list [function, arguments...]");
  lcodec_dec_remember(d);
  uint64_t nargs = it.n - 1;
  wire_item f;
  lcodec_dec_item(d, &f);
  int restore_fn = 0, nups = 0;
  int extra_named = 0;
  if (f.tag == WIRE_STR) {
    resolve_ref(L, f.data, (size_t)f.n);
  } else if (f.tag == WIRE_FUNC && f.i != 0) {
    /* task mode: the cached closure, with this task's captured values bound */
    proto_entry(L, (uint64_t)f.i);
    lua_getfield(L, -1, "nups");
    nups = (int)lua_tointeger(L, -1);
    lua_getfield(L, -2, "fn");
    lua_replace(L, -3);
    lua_pop(L, 1);
    int fn = lua_gettop(L);
    if ((uint64_t)nups + 1 != f.n) return luaL_error(L, "malformed task: function captures %d values, got %d", nups, (int)f.n - 1);
    lcodec_dec_remember(d);
    lcodec_dec_child(d); /* name: nil */
    lua_pop(L, 1);
    luaL_checkstack(L, 2 * nups + 8, "too many upvalues");
    for (int i = 1; i <= nups; i++) { /* old values, to restore after the call */
      lua_getupvalue(L, fn, i);
    }
    for (int i = 1; i <= nups; i++) {
      lcodec_dec_child(d);
      const char *uname = lua_getupvalue(L, fn, i);
      lua_pop(L, 1);
      if (uname && strcmp(uname, "_ENV") == 0 && lua_isnil(L, -1)) {
        lua_pop(L, 1);
        push_env(L, &c);
      }
      lua_setupvalue(L, fn, i);
    }
    restore_fn = fn;
    lua_pushvalue(L, fn); /* the function to call, above the saved upvalues */
  } else if (f.tag == WIRE_FUNC) {
    lcodec_dec_value(d, &f);
  } else if (f.tag == WIRE_CALL) {
    lcodec_dec_value(d, &f); /* a call spec table: target/source, args, named */
    int spec = lua_gettop(L);
    lua_getfield(L, spec, "named");
    int named = lua_gettop(L);
    lua_getfield(L, spec, "source");
    if (!lua_isnil(L, -1)) {
      size_t sl;
      const char *src = lua_tolstring(L, -1, &sl);
      lua_getfield(L, LUA_REGISTRYINDEX, SOURCES);
      lua_pushvalue(L, -2);
      if (lua_rawget(L, -2) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        if (luaL_loadbufferx(L, src, sl, "=source", "t") != LUA_OK) return lua_error(L);
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
      }
      lua_remove(L, -2); /* sources table */
      lua_remove(L, -2); /* source text */
      /* environment: the named arguments over the globals */
      lua_pushvalue(L, named);
      luaL_getmetatable(L, ENVMT);
      lua_setmetatable(L, -2);
      lua_setupvalue(L, -2, 1);
    } else {
      lua_pop(L, 1);
      lua_getfield(L, spec, "target");
      size_t tl;
      const char *t = lua_tolstring(L, -1, &tl);
      resolve_ref(L, t, tl);
      lua_remove(L, -2);
      lua_getfield(L, spec, "nnamed");
      extra_named = lua_tointeger(L, -1) > 0;
      lua_pop(L, 1);
    }
    int fn = lua_gettop(L);
    lua_getfield(L, spec, "args");
    int args = lua_gettop(L);
    lua_pushvalue(L, fn);
    lua_Integer n = luaL_len(L, args);
    lua_getfield(L, args, "n");
    if (lua_isinteger(L, -1)) n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, (int)n + 4, "too many arguments");
    for (lua_Integer i = 1; i <= n; i++) lua_geti(L, args, i);
    if (extra_named) lua_pushvalue(L, named);
    int top_fn = lua_gettop(L) - (int)n - extra_named;
    lua_call(L, (int)n + extra_named, LUA_MULTRET);
    ra->nresults = lua_gettop(L) - top_fn + 1;
    /* move results down to `base` */
    int nr = ra->nresults;
    for (int i = 0; i < nr; i++) {
      lua_pushvalue(L, top_fn + i);
      lua_replace(L, base + 1 + i);
    }
    lua_settop(L, base + nr);
    return nr;
  } else {
    return luaL_error(L, "malformed task: expected a function, got %s", wire_tag_name(f.tag));
  }
  int fn_at = lua_gettop(L);
  luaL_checkstack(L, (int)(nargs < 1000000 ? nargs : 1000000) + 8, "too many arguments");
  for (uint64_t i = 0; i < nargs; i++) {
    wire_item a;
    lcodec_dec_item(d, &a);
    lcodec_dec_value(d, &a);
  }
  lua_call(L, (int)nargs, LUA_MULTRET);
  int nr = lua_gettop(L) - fn_at + 1;
  if (restore_fn) {
    /* restore the closure's previous upvalues (saved just above it) */
    for (int i = nups; i >= 1; i--) {
      lua_pushvalue(L, restore_fn + i);
      lua_setupvalue(L, restore_fn, i);
    }
  }
  for (int i = 0; i < nr; i++) {
    lua_pushvalue(L, fn_at + i);
    lua_replace(L, base + 1 + i);
  }
  lua_settop(L, base + nr);
  ra->nresults = nr;
  return nr;
}

static int encode_error(lua_State *L, suiro_out *out, int errobj) {
  const char *msg = "", *tb = "";
  size_t ml = 0, tl = 0;
  if (lua_istable(L, errobj)) {
    lua_rawgeti(L, errobj, 1);
    lua_rawgeti(L, errobj, 2);
    msg = lua_tolstring(L, -2, &ml);
    tb = lua_tolstring(L, -1, &tl);
    if (!msg) { msg = ""; ml = 0; }
    if (!tb) { tb = ""; tl = 0; }
  } else if (lua_isstring(L, errobj)) {
    msg = lua_tolstring(L, errobj, &ml); /* an error outside the handler (e.g. memory) */
  }
  unsigned char stack[1024];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  wire_put_error(&w, WIRE_CSTR("remote"), (wire_str){ msg, ml }, (wire_str){ tb, tl }, -1);
  const void *buf;
  size_t len;
  int rc;
  if (wire_writer_finish(&w, &buf, &len) == WIRE_OK) rc = suiro_out_error_bytes(out, buf, len);
  else rc = suiro_out_error(out, "%.*s", (int)ml, msg);
  wire_writer_free(&w);
  return rc;
}

static int encode_trampoline(lua_State *L) {
  lcodec_ctx *c = lua_touserdata(L, 1);
  wire_writer *w = lua_touserdata(L, 2);
  c->L = L;
  lcodec_encode_values(c, 3, lua_gettop(L) - 2, w);
  return 0;
}

static int exec(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)fn;
  lua_State *L = ud;
  int top = lua_gettop(L);
  run_args ra = { arg, len, 0 };
  lua_pushcfunction(L, msgh);
  lua_pushcfunction(L, run_task);
  lua_pushlightuserdata(L, &ra);
  int st = lua_pcall(L, 1, LUA_MULTRET, top + 1);
  int rc = 0;
  if (st != LUA_OK) {
    rc = encode_error(L, out, lua_gettop(L));
  } else {
    /* Encoding can raise (an unsendable result): run it protected too. */
    int first = top + 2, n = lua_gettop(L) - top - 1;
    unsigned char stack[512];
    wire_writer w;
    wire_writer_init(&w, stack, sizeof stack);
    lcodec_ctx c = { L, NULL, "task result" };
    lsuiro_push_current_pool(L); /* functions in results are published to this pool */
    c.pool = lua_touserdata(L, -1);
    lua_pop(L, 1);
    lua_pushcfunction(L, msgh);
    int h = lua_gettop(L);
    lua_pushcfunction(L, encode_trampoline);
    lua_pushlightuserdata(L, &c);
    lua_pushlightuserdata(L, &w);
    luaL_checkstack(L, n + 4, "too many results");
    for (int i = 0; i < n; i++) lua_pushvalue(L, first + i);
    if (lua_pcall(L, n + 2, 0, h) != LUA_OK) {
      rc = encode_error(L, out, lua_gettop(L));
    } else {
      const void *buf;
      size_t blen;
      if (wire_writer_finish(&w, &buf, &blen) == WIRE_OK) {
        if (suiro_out_write(out, buf, blen) != 0) rc = suiro_out_error(out, "out of memory for the result");
      } else {
        rc = suiro_out_error(out, "cannot encode the result: %s", wire_writer_error(&w));
      }
    }
    wire_writer_free(&w);
  }
  lua_settop(L, top);
  /* The task environment is per task. */
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.task_env");
  return rc;
}

void lsuiro_open_worker_exec(lua_State *L) {
  /* registry tables used by the worker (harmless in hosts) */
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, PROTOS);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, REFS);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, SOURCES);
  luaL_newmetatable(L, ENVMT);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  if (luaL_loadbufferx(L, resolve_src, sizeof resolve_src - 1, "=suiro.resolve", "t") == LUA_OK)
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.resolve");
  else
    lua_pop(L, 1);
}

int lsuiro_worker_run(lua_State *L, const char *token) {
  WL = L;
  luaL_requiref(L, "suiro.core", luaopen_suiro_core, 0);
  lua_pop(L, 1);
  suiro_set_executor(exec, L);
  return suiro_worker_run(token);
}
