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
 * The engine reads the task (suiro_exec, engine/src/exec.c): the list, the function item, the
 * protocol's refusals and the cache of names and code keys; this file keeps the callbacks that
 * need Lua (resolve, load bytecode, bind and call, encode, the pending error), all of them run
 * inside one lua_pcall per task (l_protect).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"
#include "suiro_face.h"

#define REFS "suiro.refs"      /* "mod.fn" -> function */
#define SOURCES "suiro.sources" /* source text -> compiled chunk */
#define ENVMT "suiro.envmt"    /* metatable of task environments: __index = _G */

static lua_State *WL;          /* the worker's Lua state */

/* ---- compiled code: what by_code gives the engine's cache (exec.c keeps it by key) ----------- */

typedef struct proto {
  int ref;          /* registry reference of the cached closure */
  int nups;
  int env_up;       /* index of its _ENV upvalue, 0 if none */
  int bc_ref;       /* registry reference of the bytecode (for fresh closures) */
} proto;

static suiro_exec_cache code_cache; /* this worker's (names and code keys) */
static const suiro_exec_ops lua_ops;

/* ---- per-task state ---------------------------------------------------------------------------- */

typedef struct task_ctx {
  lua_State *L;
  int env;          /* stack index of this task's environment (nil until made) */
  wire_writer *w;   /* the results are encoded here, inside the protected call */
} task_ctx;

/* Pushes this task's environment: a fresh table over the globals, made on first need. Its stack
 * slot was reserved (nil) by run_task so indices above stay put. */
static void push_env(lua_State *L, task_ctx *c) {
  if (lua_isnil(L, c->env)) {
    lua_createtable(L, 0, 4);
    luaL_getmetatable(L, ENVMT);
    lua_setmetatable(L, -2);
    lua_replace(L, c->env);
  }
  lua_pushvalue(L, c->env);
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
  lua_call(L, 1, 1); /* nil when there is no such function; raises when a module failed */
  if (lua_isnil(L, -1)) {
    lua_pushlstring(L, name, len);
    luaL_error(L, "cannot find function \"%s\"", lua_tostring(L, -1));
  }
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
  "for k = #parts, 0, -1 do\n"
  "  local v\n"
  "  if k == 0 then v = _G else\n"
  "    local mod = table.concat(parts, '.', 1, k)\n"
  "    local ok, m = pcall(require, mod)\n"
  "    if ok then v = m elseif k < #parts and tostring(m):find(\"module '\" .. mod .. \"' not found\", 1, true) ~= 1 then\n"
  "      errs[#errs + 1] = tostring(m)\n"
  "    end\n"
  "  end\n"
  "  for i = k + 1, #parts do\n"
  "    if type(v) ~= 'table' then v = nil break end\n"
  "    v = v[parts[i]]\n"
  "  end\n"
  "  if v ~= nil then\n"
  "    if type(v) ~= 'function' and type(v) ~= 'table' then\n"
  "      error(('\"%s\" is a %s, not a function'):format(name, type(v)), 0)\n"
  "    end\n"
  "    return v\n"
  "  end\n"
  "end\n"
  "if #errs > 0 then error(('cannot find function \"%s\": %s'):format(name, errs[1]), 0) end\n"
  "return nil\n";

/* Value-mode FUNC: a function inside arguments or upvalues gets a closure of its own. */
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
  void *got;
  char err[400];
  if (suiro_exec_code(&lua_ops, c, (uint64_t)it->i, &got, err, sizeof err) != 1) luaL_error(L, "%s", err);
  proto pr = *(proto *)got; /* a copy: decoding the captured values may load further code */
  if ((uint64_t)pr.nups + 1 != it->n)
    luaL_error(L, "cannot decode value: function captures %d values, got %d", pr.nups, (int)it->n - 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, pr.bc_ref);
  size_t bl;
  const char *bc = lua_tolstring(L, -1, &bl);
  if (luaL_loadbufferx(L, bc, bl, "=task", "b") != LUA_OK) lua_error(L);
  lua_remove(L, -2);
  int fn = lua_gettop(L);
  lcodec_dec_remember(d);
  lcodec_dec_child(d); /* name: nil */
  lua_pop(L, 1);
  for (int i = 1; i <= pr.nups; i++) {
    lcodec_dec_child(d);
    if (i == pr.env_up && lua_isnil(L, -1)) {
      lua_pop(L, 1);
      push_env(L, c);
    }
    lua_setupvalue(L, fn, i);
  }
}

static int msgh(lua_State *L) {
  size_t ml = 0;
  const char *msg = lua_tolstring(L, 1, &ml);
  if (!msg) {
    if (luaL_getmetafield(L, 1, "__tostring") != LUA_TNIL) {
      lua_pushvalue(L, 1);
      lua_call(L, 1, 1);
      msg = lua_tolstring(L, -1, &ml);
    } else {
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
      ml = strlen(msg);
    }
    if (!msg) msg = "(error object's __tostring returned no string)", ml = strlen(msg);
  }
  /* {message, traceback, raised}: the traceback stops where the worker's own machinery begins;
   * an error value that is not a string goes back too (LIST [ERROR, raised], suiro_bind.h) */
  lua_createtable(L, 3, 0);
  lua_pushlstring(L, msg, ml);
  lua_rawseti(L, -2, 1);
  if (!lua_isstring(L, 1) && !lua_isnil(L, 1)) {
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 3);
  }
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

static lpool *self_pool; /* this worker's pool handle (for functions in results) */

/* Calls a call spec (decoded table at `spec`); leaves its results from `at` upwards. */
static void call_spec(lua_State *L, int spec) {
  lua_getfield(L, spec, "named");
  int named = lua_gettop(L);
  int extra_named = 0;
  lua_getfield(L, spec, "source");
  if (!lua_isnil(L, -1)) {
    size_t sl;
    const char *src = lua_tolstring(L, -1, &sl);
    lua_getfield(L, LUA_REGISTRYINDEX, SOURCES);
    lua_pushvalue(L, -2);
    if (lua_rawget(L, -2) != LUA_TFUNCTION) {
      lua_pop(L, 1);
      if (luaL_loadbufferx(L, src, sl, "=source", "t") != LUA_OK) lua_error(L);
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
  lua_getfield(L, spec, "args");
  int args = lua_gettop(L);
  lua_getfield(L, args, "n");
  lua_Integer n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, args);
  lua_pop(L, 1);
  if (n < 0 || n > 1000000) luaL_error(L, "call: args.n = %I is not a count of arguments", n);
  luaL_checkstack(L, (int)n + 4, "too many arguments");
  lua_pushvalue(L, args - 1); /* the function */
  for (lua_Integer i = 1; i <= n; i++) lua_geti(L, args, i);
  if (extra_named) lua_pushvalue(L, named);
  lua_call(L, (int)n + extra_named, LUA_MULTRET);
}

/* ---- the callbacks of suiro_exec (suiro_face.h section 2): the engine reads the task ----------- */

/* Finishes the results encoded into c->w and writes them out (no raise). */
static int put_results(task_ctx *c, suiro_out *out) {
  const void *buf;
  size_t blen;
  if (wire_writer_finish(c->w, &buf, &blen) != WIRE_OK)
    suiro_out_error(out, "cannot encode the result: %s", wire_writer_error(c->w));
  else if (suiro_out_write(out, buf, blen) != 0)
    suiro_out_error(out, "out of memory for the result");
  return 0;
}

typedef struct body_call {
  int (*body)(void *ctx);
  void *ctx;
  task_ctx *c;
} body_call;

/* The protected frame every callback of one task runs in: slot 1 is the task's environment. */
static int protected_body(lua_State *L) {
  body_call *bc = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lua_pushnil(L);
  bc->c->env = 1;
  lua_pushinteger(L, bc->body(bc->ctx));
  return 1;
}

static int l_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  task_ctx *c = ud;
  lua_State *L = c->L;
  body_call bc = { body, ctx, c };
  lua_pushcfunction(L, msgh);
  int h = lua_gettop(L);
  lua_pushcfunction(L, protected_body);
  lua_pushlightuserdata(L, &bc);
  if (lua_pcall(L, 1, 1, h) != LUA_OK) return -1; /* the error object stays on top for l_fail */
  int rc = (int)lua_tointeger(L, -1);
  lua_pop(L, 2);
  return rc;
}

/* A name: resolved with require; the engine caches the registry reference. */
static int l_by_name(void *ud, suiro_wire_str name, void **fn) {
  lua_State *L = ((task_ctx *)ud)->L;
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.resolve");
  lua_pushlstring(L, name.ptr, name.len);
  lua_call(L, 1, 1); /* raises when a module failed to load */
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  *fn = (void *)(intptr_t)luaL_ref(L, LUA_REGISTRYINDEX);
  return 1;
}

/* Code: the upvalue names (u32 count, then u16 length + bytes each) and the bytecode. */
static int l_by_code(void *ud, uint64_t key, const void *code, size_t len, void **fn) {
  (void)key;
  lua_State *L = ((task_ctx *)ud)->L;
  const char *b = code;
  uint32_t nups = 0;
  size_t off = 4;
  int env_up = 0;
  if (len < 4) return 0;
  memcpy(&nups, b, 4);
  if (nups > 255) return 0; /* a Lua function has at most 255 upvalues */
  for (uint32_t i = 1; i <= nups; i++) {
    uint16_t l;
    if (off + 2 > len) return 0;
    memcpy(&l, b + off, 2);
    off += 2;
    if (off + l > len) return 0;
    if (l == 4 && memcmp(b + off, "_ENV", 4) == 0) env_up = (int)i;
    off += l;
  }
  lua_pushlstring(L, b + off, len - off);
  int st = luaL_loadbufferx(L, b + off, len - off, "=task", "b");
  if (st == LUA_ERRMEM) lua_error(L);
  if (st != LUA_OK) {
    lua_pop(L, 2); /* the message and the bytecode */
    return 0;
  }
  proto *pr = lua_newuserdatauv(L, sizeof *pr, 0); /* kept alive by a registry reference */
  int self = luaL_ref(L, LUA_REGISTRYINDEX);
  (void)self;
  pr->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  pr->bc_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  pr->nups = (int)nups;
  pr->env_up = env_up;
  *fn = pr;
  return 1;
}

static int l_run(void *ud, void *fnp, const suiro_wire_item *fi, suiro_wire_reader *r, uint64_t nargs, suiro_out *out) {
  task_ctx *c = ud;
  lua_State *L = c->L;
  lcodec_dec d;
  lcodec_dec_init_at(&d, L, r, 1, decode_func_value, c); /* the task list was container 0 */
  wire_item f = *fi;
  proto pr = { 0 }; /* nups 0 unless the task is a cached closure */
  int fn = 0;
  if (f.tag == WIRE_FUNC && f.i != 0) {
    /* task mode: the cached closure, with this task's captured values bound */
    pr = *(proto *)fnp;
    if ((uint64_t)pr.nups + 1 != f.n)
      return luaL_error(L, "malformed task: function captures %d values, got %d", pr.nups, (int)f.n - 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, pr.ref);
    fn = lua_gettop(L);
    lcodec_dec_remember(&d);
    lcodec_dec_child(&d); /* name: nil */
    lua_pop(L, 1);
    if (pr.nups) {
      luaL_checkstack(L, 2 * pr.nups + 8, "too many upvalues");
      for (int i = 1; i <= pr.nups; i++) lua_getupvalue(L, fn, i); /* saved, restored after */
      for (int i = 1; i <= pr.nups; i++) {
        lcodec_dec_child(&d);
        if (i == pr.env_up && lua_isnil(L, -1)) {
          lua_pop(L, 1);
          push_env(L, c);
        }
        lua_setupvalue(L, fn, i);
      }
    }
    lua_pushvalue(L, fn);
  } else if (f.tag == WIRE_FUNC) { /* by name inside a FUNC item: a C function of a module */
    lcodec_dec_value(&d, &f);
  } else { /* STR: the engine resolved it */
    lua_rawgeti(L, LUA_REGISTRYINDEX, (lua_Integer)(intptr_t)fnp);
  }
  int fn_at = lua_gettop(L);
  luaL_checkstack(L, (int)nargs + 8, "too many arguments"); /* nargs <= SUIRO_EXEC_MAX_ARGS */
  for (uint64_t i = 0; i < nargs; i++) lcodec_dec_child(&d);
  lua_call(L, (int)nargs, LUA_MULTRET);
  int nr = lua_gettop(L) - fn_at + 1;
  if (pr.nups) /* restore the closure's previous upvalues (saved just above it) */
    for (int i = pr.nups; i >= 1; i--) {
      lua_pushvalue(L, fn + i);
      lua_setupvalue(L, fn, i);
    }
  lcodec_ctx cx = { .L = L, .pool = self_pool, .verb = "task result", .returning = 1 };
  lcodec_encode_values(&cx, fn_at, nr, c->w);
  return put_results(c, out);
}

static int l_run_call(void *ud, const suiro_wire_item *spec_item, suiro_wire_reader *r, suiro_out *out) {
  task_ctx *c = ud;
  lua_State *L = c->L;
  lcodec_dec d;
  lcodec_dec_init_at(&d, L, r, 1, decode_func_value, c);
  wire_item f = *spec_item;
  lcodec_dec_value(&d, &f);
  int spec = lua_gettop(L);
  call_spec(L, spec);
  int nr = lua_gettop(L) - spec - 3; /* named, function and args sit between spec and results */
  lcodec_ctx cx = { .L = L, .pool = self_pool, .verb = "task result", .returning = 1 };
  lcodec_encode_values(&cx, lua_gettop(L) - nr + 1, nr, c->w);
  return put_results(c, out);
}

static int encode_error(lua_State *L, suiro_out *out, int errobj);

static int l_fail(void *ud, suiro_out *out, int64_t index) {
  (void)index;
  lua_State *L = ((task_ctx *)ud)->L;
  return encode_error(L, out, lua_gettop(L));
}

static const suiro_exec_ops lua_ops = {
  .lang = WIRE_LANG_LUA,
  .lang_name = "lua",
  .cache = &code_cache,
  .protect = l_protect,
  .by_name = l_by_name,
  .by_code = l_by_code,
  .run = l_run,
  .run_call = l_run_call,
  .fail = l_fail,
};

/* Encodes LIST [ERROR, raised] into the writer at index 1 (protected: the raised value may not
 * cross, and then the plain ERROR goes instead). */
static int encode_raised(lua_State *L) {
  wire_writer *w = lua_touserdata(L, 1);
  size_t ml, tl;
  const char *msg = lua_tolstring(L, 2, &ml), *tb = lua_tolstring(L, 3, &tl);
  wire_put_list(w, 2);
  wire_put_error(w, WIRE_CSTR(SUIRO_CLASS_REMOTE), (wire_str){ msg, ml }, (wire_str){ tb, tl }, -1);
  lcodec_ctx cx = { .L = L, .pool = self_pool, .verb = "error value", .returning = 1 };
  lcodec_encode_value(&cx, 4, w);
  return 0;
}

static int encode_error(lua_State *L, suiro_out *out, int errobj) {
  const char *msg = "", *tb = "";
  size_t ml = 0, tl = 0;
  int raised = 0;
  if (lua_istable(L, errobj)) {
    lua_rawgeti(L, errobj, 1);
    lua_rawgeti(L, errobj, 2);
    msg = lua_tolstring(L, -2, &ml);
    tb = lua_tolstring(L, -1, &tl);
    if (!msg) { msg = ""; ml = 0; }
    if (!tb) { tb = ""; tl = 0; }
    raised = lua_rawgeti(L, errobj, 3) != LUA_TNIL;
    lua_pop(L, 1);
  } else if (lua_isstring(L, errobj)) {
    msg = lua_tolstring(L, errobj, &ml); /* an error outside the handler (e.g. memory) */
  }
  if (raised) {
    _Alignas(8) unsigned char stack[1024];
    wire_writer w;
    wire_writer_init(&w, stack, sizeof stack);
    lua_pushcfunction(L, encode_raised);
    lua_pushlightuserdata(L, &w);
    lua_pushlstring(L, msg, ml);
    lua_pushlstring(L, tb, tl);
    lua_rawgeti(L, errobj, 3);
    const void *buf;
    size_t len;
    int rc = -2;
    if (lua_pcall(L, 4, 0, 0) == LUA_OK && wire_writer_finish(&w, &buf, &len) == WIRE_OK)
      rc = suiro_out_error_bytes(out, buf, len);
    else if (!lua_isnil(L, -1))
      lua_pop(L, 1);
    wire_writer_free(&w);
    if (rc != -2) return rc;
  }
  return suiro_out_fail(out, WIRE_CSTR(SUIRO_CLASS_REMOTE), (wire_str){ msg, ml }, (wire_str){ tb, tl }, -1);
}


/* ---- for the map runner (lmap.c) ------------------------------------------------------------ */

/* Decodes the single value of a stand-alone buffer (functions allowed) and pushes it. Functions
 * among the values get the environment at env_idx (0: a fresh one, made if needed). */
void lworker_decode_one(lua_State *L, const void *buf, size_t len, int env_idx) {
  task_ctx c = { L, 0, NULL };
  if (env_idx) lua_pushvalue(L, env_idx);
  else lua_pushnil(L); /* an environment slot for functions among the values */
  c.env = lua_gettop(L);
  int base = lua_gettop(L);
  lcodec_dec d;
  lcodec_dec_init(&d, L, buf, len, decode_func_value, &c);
  wire_item it;
  if (lcodec_dec_item(&d, &it) != WIRE_OK || it.tag != WIRE_LIST || it.n != 1)
    luaL_error(L, "map: malformed element");
  lcodec_dec_remember(&d);
  lcodec_dec_child(&d);
  lua_replace(L, base);
  lua_settop(L, base);
}

void lworker_resolve(lua_State *L, const char *name, size_t len) { resolve_ref(L, name, len); }
int lworker_msgh(lua_State *L) { return msgh(L); }
lpool *lworker_self_pool(void) { return self_pool; }
int lworker_fail(lua_State *L, suiro_out *out, int errobj) { return encode_error(L, out, errobj); }

static int exec(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  lua_State *L = ud;
  if (fn == SUIRO_FN_MAP) return lmap_exec_runner(L, arg, len, out);
  int top = lua_gettop(L);
  _Alignas(8) unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  task_ctx c = { L, 0, &w };
  int rc = suiro_exec(arg, len, out, &lua_ops, &c);
  wire_writer_free(&w);
  lua_settop(L, top);
  return rc;
}

void lworker_open(lua_State *L) {
  /* registry tables used by the worker (harmless in hosts) */
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

/* Called when the worker has attached: keep a handle on its own pool for results. */
static int attach_self(lua_State *L) {
  lpool_push_current(L);
  self_pool = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return 0;
}

static int first_exec(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  lua_State *L = ud;
  if (!self_pool) {
    lua_pushcfunction(L, attach_self);
    lua_pcall(L, 0, 0, 0);
  }
  suiro_set_executor(exec, L);
  return exec(fn, arg, len, out, ud);
}

int lworker_run(lua_State *L, const char *token) {
  WL = L;
  luaL_requiref(L, "suiro.core", luaopen_suiro_core, 0);
  lua_pop(L, 1);
  suiro_set_executor(first_exec, L);
  int rc = suiro_worker_run(token);
  lpool_forget_current(L); /* the engine freed its handle; lua_close runs finalizers next */
  return rc;
}
