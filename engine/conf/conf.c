/*
 * conf.c — the config readers of every face (suiro_conf.h): a private Lua state runs
 * suiro/config.lua and parse.lua, and the results cross to C as wire buffers or as the engine's
 * template description. Also the one reader of parsed templates (Lua table -> suiro_template)
 * that the Lua face's maps use too (suiro_conf_template_read). Public engine headers only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_conf.h"
#include "suiro_wire.h"

int luaopen_lpeg(lua_State *L);

/* Names that passed the function-reference grammar, remembered so that a name sent again (a
 * call spec built in a loop, a submit by name) is not parsed again through Lua: direct-mapped by
 * a hash of the bytes, a slot holds one accepted name, refusals are never remembered. */
#define FNREF_SLOTS 64
#define FNREF_MAX 96

struct suiro_conf {
  lua_State *L;
  char fnref_ok[FNREF_SLOTS][FNREF_MAX];
};

static void set_err(char *err, size_t cap, const char *msg) {
  if (err && cap) snprintf(err, cap, "%s", msg ? msg : "unknown error");
}

/* ---- templates: parse.template's table -> suiro_template -------------------------------------- */

static int type_code(const char *name) {
  for (int k = WIRE_T_F64; k <= WIRE_T_BOOL; k++)
    if (!strcmp(name, suiro_wire_type_name(k))) return k;
  return 0;
}

/* The parsed template at idx (suiro.parse.template's result). 0, or -1 with a message. */
int suiro_conf_template_read(lua_State *L, int idx, suiro_template *t, char *err, size_t cap) {
  idx = lua_absindex(L, idx);
  memset(t, 0, sizeof *t);
  int top = lua_gettop(L);
  int rc = -1;
  lua_getfield(L, idx, "kind");
  const char *kind = lua_tostring(L, -1);
  if (!kind) {
    set_err(err, cap, "template: not a parsed template");
    goto out;
  }
  if (!strcmp(kind, "scalar") || !strcmp(kind, "array")) {
    lua_getfield(L, idx, "type");
    const char *tn = lua_tostring(L, -1);
    t->type = tn ? type_code(tn) : 0;
    if (!t->type) {
      snprintf(err, cap, "template type \"%s\" is not a numeric or bool type (f64, f32, i64, i32, u8, bool)", tn ? tn : "?");
      goto out;
    }
    t->kind = SUIRO_OUT_SCALAR;
    if (!strcmp(kind, "array")) {
      t->kind = SUIRO_OUT_ARRAY;
      lua_getfield(L, idx, "shape");
      lua_Integer nd = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
      if (nd < 1 || nd > SUIRO_TEMPLATE_MAX_NDIM) {
        snprintf(err, cap, "template: an array cell has 1..%d dimensions", SUIRO_TEMPLATE_MAX_NDIM);
        goto out;
      }
      t->ndim = (int)nd;
      for (lua_Integer k = 1; k <= nd; k++) {
        lua_rawgeti(L, -1, k);
        lua_Integer v = lua_tointeger(L, -1);
        lua_pop(L, 1);
        if (v < 1) {
          set_err(err, cap, "template: array extents must be positive");
          goto out;
        }
        t->shape[k - 1] = (uint64_t)v;
      }
    }
  } else if (!strcmp(kind, "record")) {
    t->kind = SUIRO_OUT_RECORD;
    lua_getfield(L, idx, "fields");
    lua_Integer nf = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
    if (nf < 1 || nf > SUIRO_TEMPLATE_MAX_FIELDS) {
      snprintf(err, cap, "a record template has 1..%d fields", SUIRO_TEMPLATE_MAX_FIELDS);
      goto out;
    }
    t->nfields = (int)nf;
    for (lua_Integer k = 1; k <= nf; k++) {
      lua_rawgeti(L, -1, k);
      lua_getfield(L, -1, "name");
      size_t nl;
      const char *nm = lua_tolstring(L, -1, &nl);
      if (!nm || nl == 0 || nl > SUIRO_TEMPLATE_NAME_MAX) {
        snprintf(err, cap, "record field %d needs a name of 1..%d bytes", (int)k, SUIRO_TEMPLATE_NAME_MAX);
        goto out;
      }
      memcpy(t->fields[k - 1].name, nm, nl + 1);
      lua_getfield(L, -2, "type");
      lua_getfield(L, -1, "kind");
      const char *fk = lua_tostring(L, -1);
      lua_getfield(L, -2, "type");
      const char *ft = lua_tostring(L, -1);
      if (!fk || strcmp(fk, "scalar") != 0 || !ft || !(t->fields[k - 1].type = type_code(ft))) {
        snprintf(err, cap, "record field \"%s\" must be f64, f32, i64, i32, u8 or bool%s", nm,
                 ft && !strcmp(ft, "str") ? " (strings cannot be a map cell: return a table and use no template)" : "");
        goto out;
      }
      lua_pop(L, 5);
    }
  } else {
    snprintf(err, cap, "template kind \"%s\" cannot be a map result (use a scalar, an array or a record)", kind);
    goto out;
  }
  rc = suiro_template_check(t, NULL, err, cap);
out:
  lua_settop(L, top);
  return rc;
}

/* ---- Lua values <-> wire (plain data only) ---------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int put_value(lua_State *L, int idx, suiro_wire_writer *w, int depth, char *err, size_t cap) {
  idx = lua_absindex(L, idx);
  if (depth > 32) return set_err(err, cap, "config value nested too deeply"), -1;
  switch (lua_type(L, idx)) {
  case LUA_TNIL: return suiro_wire_put_nil(w);
  case LUA_TBOOLEAN: return suiro_wire_put_bool(w, lua_toboolean(L, idx));
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) return suiro_wire_put_i64(w, (int64_t)lua_tointeger(L, idx));
    return suiro_wire_put_f64(w, lua_tonumber(L, idx));
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    return suiro_wire_put_str(w, s, n);
  }
  case LUA_TTABLE: {
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx), count = 0, nstr = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      count++;
      if (lua_type(L, -2) == LUA_TSTRING) nstr++;
      lua_pop(L, 1);
    }
    if (count > 0 && count == n && nstr == 0) {
      suiro_wire_put_list(w, (uint64_t)n);
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        if (put_value(L, -1, w, depth + 1, err, cap) != 0) return -1;
        lua_pop(L, 1);
      }
      return w->status;
    }
    if (nstr != count) return set_err(err, cap, "config tables mix list and record keys"), -1;
    const char **keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(count ? count : 1), 0);
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      keys[k++] = lua_tostring(L, -1); /* the key string stays alive in the table */
    }
    qsort(keys, (size_t)count, sizeof *keys, cmp_str);
    suiro_wire_put_dict(w, (uint64_t)count);
    for (int i = 0; i < count; i++) {
      suiro_wire_put_str(w, keys[i], strlen(keys[i]));
      lua_getfield(L, idx, keys[i]);
      if (put_value(L, -1, w, depth + 1, err, cap) != 0) return -1;
      lua_pop(L, 1);
    }
    lua_pop(L, 1); /* keys */
    return w->status;
  }
  default:
    snprintf(err, cap, "a %s cannot be a config value", luaL_typename(L, idx));
    return -1;
  }
}

static int push_value(lua_State *L, suiro_wire_reader *r, int depth, char *err, size_t cap) {
  suiro_wire_item it;
  if (suiro_wire_next(r, &it) != WIRE_OK || depth > 32) return set_err(err, cap, suiro_wire_reader_error(r)), -1;
  luaL_checkstack(L, 4, "config value nested too deeply");
  switch (it.tag) {
  case WIRE_NIL: lua_pushnil(L); return 0;
  case WIRE_BOOL: lua_pushboolean(L, it.flag == 1); return 0;
  case WIRE_I64: lua_pushinteger(L, (lua_Integer)it.i); return 0;
  case WIRE_F64: lua_pushnumber(L, it.f); return 0;
  case WIRE_STR: lua_pushlstring(L, it.data, (size_t)it.n); return 0;
  case WIRE_LIST:
    lua_createtable(L, it.n < 1024 ? (int)it.n : 0, 0);
    for (uint64_t i = 1; i <= it.n; i++) {
      if (push_value(L, r, depth + 1, err, cap) != 0) return -1;
      lua_rawseti(L, -2, (lua_Integer)i);
    }
    return 0;
  case WIRE_DICT:
    lua_createtable(L, 0, it.n < 1024 ? (int)it.n : 0);
    for (uint64_t i = 0; i < it.n; i++) {
      if (push_value(L, r, depth + 1, err, cap) != 0 || push_value(L, r, depth + 1, err, cap) != 0) return -1;
      lua_rawset(L, -3);
    }
    return 0;
  default:
    snprintf(err, cap, "a %s cannot be a pool option", suiro_wire_tag_name(it.tag));
    return -1;
  }
}

static int finish(suiro_wire_writer *w, void **buf, size_t *len, char *err, size_t cap) {
  const void *p;
  size_t n;
  if (suiro_wire_writer_finish(w, &p, &n) != WIRE_OK) {
    set_err(err, cap, suiro_wire_writer_error(w));
    suiro_wire_writer_free(w);
    return -1;
  }
  *buf = malloc(n);
  if (!*buf) {
    suiro_wire_writer_free(w);
    return set_err(err, cap, "out of memory"), -1;
  }
  memcpy(*buf, p, n);
  *len = n;
  suiro_wire_writer_free(w);
  return 0;
}

/* ---- the state ------------------------------------------------------------------------------ */

suiro_conf *suiro_conf_open(const char *lua_dir, char *err, size_t cap) {
  lua_State *L = luaL_newstate();
  if (!L) return set_err(err, cap, "cannot create a Lua state (out of memory)"), NULL;
  luaL_openlibs(L);
  luaL_requiref(L, "lpeg", luaopen_lpeg, 0);
  lua_pop(L, 1);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", lua_dir ? lua_dir : ".", lua_dir ? lua_dir : ".");
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "suiro.config");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    set_err(err, cap, lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.embed.config");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "suiro.parse");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    set_err(err, cap, lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.embed.parse");
  suiro_conf *e = calloc(1, sizeof *e);
  if (!e) {
    lua_close(L);
    return set_err(err, cap, "out of memory"), NULL;
  }
  e->L = L;
  return e;
}

void suiro_conf_close(suiro_conf *e) {
  if (!e) return;
  lua_close(e->L);
  free(e);
}

/* Calls module[fn] with nargs arguments already pushed above it; leaves one result. */
static int call(suiro_conf *e, const char *module, const char *fn, int nargs, char *err, size_t cap) {
  lua_State *L = e->L;
  lua_getfield(L, LUA_REGISTRYINDEX, module);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_insert(L, -1 - nargs);
  if (lua_pcall(L, nargs, 1, 0) != LUA_OK) {
    set_err(err, cap, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

/* The value on top of L as one wire buffer (malloc'd), then L back to `top`. */
static int top_as_wire(lua_State *L, int top, void **buf, size_t *len, char *err, size_t cap) {
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  int rc = put_value(L, -1, &w, 0, err, cap) == 0 ? finish(&w, buf, len, err, cap) : (suiro_wire_writer_free(&w), -1);
  lua_settop(L, top);
  return rc;
}

int suiro_conf_config(suiro_conf *e, const char *path, void **buf, size_t *len, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, path);
  if (call(e, "suiro.embed.config", "load", 1, err, cap) != 0) return lua_settop(L, top), -1;
  return top_as_wire(L, top, buf, len, err, cap);
}

int suiro_conf_pool_options(suiro_conf *e, const void *opts, size_t opts_len, const char *where, void **buf,
                             size_t *len, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  suiro_wire_reader r;
  if (suiro_wire_reader_init(&r, opts, opts_len) != WIRE_OK) return set_err(err, cap, suiro_wire_reader_error(&r)), -1;
  if (push_value(L, &r, 0, err, cap) != 0) return lua_settop(L, top), -1;
  lua_pushstring(L, where ? where : "pool");
  if (call(e, "suiro.embed.config", "pool_options", 2, err, cap) != 0) return lua_settop(L, top), -1;
  return top_as_wire(L, top, buf, len, err, cap);
}

int suiro_conf_worker_env(suiro_conf *e, const char *kind, void **buf, size_t *len, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, kind ? kind : "?");
  if (call(e, "suiro.embed.config", "worker_env", 1, err, cap) != 0) return lua_settop(L, top), -1;
  return top_as_wire(L, top, buf, len, err, cap);
}

/* Pushes a wire DICT (or an empty table for NULL). 0, or -1 with the message. */
static int push_dict(lua_State *L, const void *buf, size_t n, char *err, size_t cap) {
  if (!buf || !n) return lua_newtable(L), 0;
  suiro_wire_reader r;
  if (suiro_wire_reader_init(&r, buf, n) != WIRE_OK) return set_err(err, cap, suiro_wire_reader_error(&r)), -1;
  if (push_value(L, &r, 0, err, cap) != 0) return -1;
  if (!lua_istable(L, -1)) return set_err(err, cap, "launch: options and host must be a DICT"), -1;
  return 0;
}

int suiro_conf_launch(suiro_conf *e, const char *kind, const void *opts, size_t opts_len, const void *host,
                      size_t host_len, void **buf, size_t *len, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, kind ? kind : "?");
  if (push_dict(L, opts, opts_len, err, cap) != 0 || push_dict(L, host, host_len, err, cap) != 0)
    return lua_settop(L, top), -1;
  if (call(e, "suiro.embed.config", "launch", 3, err, cap) != 0) return lua_settop(L, top), -1;
  return top_as_wire(L, top, buf, len, err, cap);
}

int suiro_conf_template(suiro_conf *e, const char *spec, suiro_template *t, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, spec);
  if (call(e, "suiro.embed.parse", "template", 1, err, cap) != 0) return lua_settop(L, top), -1;
  int rc = suiro_conf_template_read(L, -1, t, err, cap);
  lua_settop(L, top);
  return rc;
}

int suiro_conf_duration(suiro_conf *e, const char *s, double *seconds, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, s);
  if (call(e, "suiro.embed.parse", "duration", 1, err, cap) != 0) return lua_settop(L, top), -1;
  *seconds = lua_tonumber(L, -1);
  lua_settop(L, top);
  return 0;
}

int suiro_conf_size(suiro_conf *e, const char *s, int64_t *bytes, char *err, size_t cap) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, s);
  if (call(e, "suiro.embed.parse", "size", 1, err, cap) != 0) return lua_settop(L, top), -1;
  *bytes = (int64_t)lua_tointeger(L, -1);
  lua_settop(L, top);
  return 0;
}

int suiro_conf_fnref(suiro_conf *e, const char *s, char *err, size_t cap) {
  size_t n = strlen(s);
  char *slot = NULL;
  if (n > 0 && n < FNREF_MAX) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    slot = e->fnref_ok[h % FNREF_SLOTS];
    if (memcmp(slot, s, n + 1) == 0) return 0;
  }
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_pushstring(L, s);
  int rc = call(e, "suiro.embed.parse", "fnref", 1, err, cap);
  lua_settop(L, top);
  if (rc == 0 && slot) memcpy(slot, s, n + 1);
  return rc;
}
