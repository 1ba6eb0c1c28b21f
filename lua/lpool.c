/*
 * lpool.c — suiro.core: pools and tasks for Lua.
 *
 * A pool userdata owns an engine pool (or, inside a worker, borrows the worker's own pool for
 * nested submissions). A task userdata keeps its pool alive through its user value, so a pool is
 * never collected while one of its tasks can still be collected; a task dropped uncollected is
 * released (its result slot recycled) by __gc.
 *
 * Outcomes follow the Lua convention: a timeout is `nil, "timeout"` (also "closed",
 * "peer_gone"); a failed task raises an error object (lcodec_push_error); misuse raises a message
 * that names the argument.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "larray.h"
#include "lsuiro.h"

const char lsuiro_key_pool, lsuiro_key_task, lsuiro_key_error, lsuiro_key_call, lsuiro_key_array;

/* ---- helpers ---------------------------------------------------------------------------------- */

lpool *lpool_check(lua_State *L, int idx) {
  lpool *lp = lsuiro_checkud(L, idx, &lsuiro_key_pool, LSUIRO_POOL);
  if (lp->closed || !lp->p) luaL_error(L, "the pool is stopped");
  return lp;
}

/* Tasks of a batch have their own metatable, without __gc (see submit_batch): both are tasks. */
static const char key_batch_task, key_batch_guard;

/* The pool and task methods carry the three metatables as upvalues (lpool_open), so the hot paths
 * (submit, collect) compare metatables without a registry lookup: a hash lookup on a pointer is
 * ~140 instructions, three per round trip were a tenth of the host's work. A fourth upvalue marks
 * functions registered so; any other caller takes the registry path. */
enum { UP_POOL_MT = 1, UP_TASK_MT, UP_BATCH_TASK_MT, UP_MARK, N_UPVALUES = UP_MARK };
static const char key_upvalues;
static int has_mt_upvalues(lua_State *L) {
  return lua_touserdata(L, lua_upvalueindex(UP_MARK)) == &key_upvalues;
}
/* Whether the value at idx (a userdata) has the metatable in upvalue `up`. */
static int has_up_mt(lua_State *L, int idx, int up) {
  if (!lua_getmetatable(L, idx)) return 0;
  int same = lua_rawequal(L, -1, lua_upvalueindex(up));
  lua_pop(L, 1);
  return same;
}
/* Sets the metatable of the value on top: upvalue `up` when there, else registry[key]. */
static void set_mt(lua_State *L, int up, const void *key) {
  if (has_mt_upvalues(L)) {
    lua_pushvalue(L, lua_upvalueindex(up));
    lua_setmetatable(L, -2);
  } else {
    lsuiro_setmt(L, key);
  }
}

static lpool *pool_arg(lua_State *L, int idx) {
  lpool *lp = lua_touserdata(L, idx);
  if (lp && has_mt_upvalues(L) && has_up_mt(L, idx, UP_POOL_MT)) {
    if (lp->closed || !lp->p) luaL_error(L, "the pool is stopped");
    return lp;
  }
  return lpool_check(L, idx); /* the registry, and its error message */
}

static ltask *testtask(lua_State *L, int idx) {
  ltask *k = lua_touserdata(L, idx);
  if (!k) return NULL;
  if (has_mt_upvalues(L) && (has_up_mt(L, idx, UP_BATCH_TASK_MT) || has_up_mt(L, idx, UP_TASK_MT))) return k;
  if (!lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_batch_task); /* the common kind first */
  int is = lua_rawequal(L, -1, -2);
  if (!is) {
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &lsuiro_key_task);
    is = lua_rawequal(L, -1, -2);
  }
  lua_pop(L, 2);
  return is ? k : NULL;
}
static ltask *checktask(lua_State *L, int idx) {
  ltask *k = testtask(L, idx);
  if (!k) luaL_typeerror(L, idx, LSUIRO_TASK);
  return k;
}

/* Seconds from a duration at idx: a number of seconds or a duration string ("250ms", "inf"), read
 * by suiro.parse; NaN and negative numbers are refused. math.huge (or "inf") means no limit: -1. */
double lpool_seconds(lua_State *L, int idx, const char *verb, const char *what) {
  double t;
  if (lua_type(L, idx) == LUA_TSTRING) {
    idx = lua_absindex(L, idx);
    lsuiro_push_parser(L, "try_duration");
    lua_pushvalue(L, idx);
    lua_call(L, 1, 2);
    if (lua_isnil(L, -2)) luaL_error(L, "%s: %s: %s", verb, what, lua_tostring(L, -1));
    t = lua_tonumber(L, -2);
    lua_pop(L, 2);
  } else if (lua_type(L, idx) == LUA_TNUMBER) {
    t = lua_tonumber(L, idx);
    if (t != t || t < 0)
      luaL_error(L, "%s: %s must be zero or more seconds (math.huge or \"inf\" for no limit), got %s", verb, what,
                 lua_tostring(L, idx));
  } else {
    luaL_error(L, "%s: %s must be a number of seconds or a duration string (\"250ms\"), got %s", verb, what,
               luaL_typename(L, idx));
    return 0;
  }
  return t >= 1e12 ? -1 : t;
}

/* An integer argument in lo..hi (floats with an integral value count), or raises naming verb and
 * what. */
static lua_Integer int_arg(lua_State *L, int idx, const char *verb, const char *what, lua_Integer lo, lua_Integer hi) {
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be an integer in %I..%I, got %s", verb, what, lo, hi,
               lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  if (v < lo || v > hi) luaL_error(L, "%s: %s must be in %I..%I, got %I", verb, what, lo, hi, v);
  return v;
}

/* A table argument, or raises naming verb and what. */
static void table_arg(lua_State *L, int idx, const char *verb, const char *what) {
  if (!lua_istable(L, idx)) luaL_error(L, "%s: %s must be a table, got %s", verb, what, luaL_typename(L, idx));
}

/* Timeout argument: nil -> the pool's default, else a duration (lpool_seconds). */
static double opt_timeout(lua_State *L, int idx, const lpool *lp, const char *verb) {
  if (lua_isnoneornil(L, idx)) return lp->default_timeout;
  return lpool_seconds(L, idx, verb, "timeout");
}

/* Pushes `nil, why` for an outcome; raises for SUIRO_ERR. Returns the number of results. */
static int push_outcome(lua_State *L, suiro_status st, const char *verb) {
  switch (st) {
  case SUIRO_TIMEOUT: lua_pushnil(L); lua_pushliteral(L, "timeout"); return 2;
  case SUIRO_CLOSED: lua_pushnil(L); lua_pushliteral(L, "closed"); return 2;
  case SUIRO_PEER_GONE: lua_pushnil(L); lua_pushliteral(L, "peer_gone"); return 2;
  case SUIRO_FULL: lua_pushnil(L); lua_pushliteral(L, "full"); return 2;
  default:
    if (!strcmp(suiro_last_error(), "interrupted"))
      return luaL_error(L, "%s", lpool_signal == SIGTERM ? "terminated" : "interrupted!");
    return luaL_error(L, "%s: %s", verb, suiro_last_error());
  }
}

/* Pushes a task's values, or raises its error object. */
static int push_result(lua_State *L, const suiro_result *r, int index) {
  if (r->kind == SUIRO_RESULT_VALUE) return lcodec_decode_values(L, r->data, r->len);
  lerror_push_result(L, r, index);
  return lerror_raise(L);
}

/* ---- pool ------------------------------------------------------------------------------------- */

/* A Lua function is code only Lua workers run: for others, refuse it at send time (their workers
 * would fail every task with it). Functions inside values still cross (as descriptors). */
void lpool_check_runs_lua(lua_State *L, const lpool *lp, const char *verb) {
  if (lp->lang[0] && strcmp(lp->lang, "lua") != 0)
    luaL_error(L, "%s: argument 1: a Lua function cannot run on %s workers; name one of their functions "
                  "(\"%s\") or send a suiro.call", verb, lp->lang, strcmp(lp->lang, "r") ? "module.fn" : "pkg::fn");
}

static const char *const *string_list(lua_State *L, int idx, const char *what, int map_style) {
  /* A sequence of strings, or (map_style) a map KEY -> VALUE turned into "KEY=VALUE". */
  if (lua_isnoneornil(L, idx)) return NULL;
  luaL_checktype(L, idx, LUA_TTABLE);
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) { n++; lua_pop(L, 1); }
  lua_createtable(L, (int)n, 0); /* keeps the formatted strings alive: both stay on the stack */
  int anchors = lua_gettop(L);
  const char **v = lua_newuserdatauv(L, (n + 1) * sizeof *v, 0);
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TNUMBER) {
      if (!lua_isstring(L, -1)) luaL_error(L, "pool: %s[%d] must be a string", what, (int)lua_tointeger(L, -2));
      v[k++] = lua_tostring(L, -1);
    } else if (map_style && lua_type(L, -2) == LUA_TSTRING) {
      if (!lua_isstring(L, -1)) luaL_error(L, "pool: %s.%s must be a string", what, lua_tostring(L, -2));
      lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      v[k++] = lua_tostring(L, -1);
      lua_rawseti(L, anchors, (lua_Integer)k);
    } else {
      luaL_error(L, "pool: %s has a key of type %s", what, luaL_typename(L, -2));
    }
    lua_pop(L, 1);
  }
  v[k] = NULL;
  return v;
}

static int getfield_int(lua_State *L, int idx, const char *k, int def) {
  lua_getfield(L, idx, k);
  int v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1)) luaL_error(L, "pool: %s must be an integer, got %s", k, luaL_typename(L, -1));
    v = (int)lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static double getfield_num(lua_State *L, int idx, const char *k, double def) {
  lua_getfield(L, idx, k);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "pool: %s must be a number, got %s", k, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* core.pool{ workers=, max_workers=, ring_cap=, slot_size=, result_slots=, result_size=,
 *            respawn=, start_timeout=, timeout=, exe=, argv={...}, env={...} } */
static int l_pool_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = getfield_int(L, 1, "workers", 1);
  o.max_workers = getfield_int(L, 1, "max_workers", 0);
  o.ring_cap = (uint32_t)getfield_int(L, 1, "ring_cap", (int)o.ring_cap);
  o.slot_size = (uint32_t)getfield_int(L, 1, "slot_size", (int)o.slot_size);
  o.result_slots = (uint32_t)getfield_int(L, 1, "result_slots", (int)o.result_slots);
  o.result_size = (uint32_t)getfield_int(L, 1, "result_size", (int)o.result_size);
  o.start_timeout = getfield_num(L, 1, "start_timeout", o.start_timeout);
  lua_getfield(L, 1, "respawn");
  o.respawn = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
  lua_pop(L, 1);
  double timeout = getfield_num(L, 1, "timeout", -1);
  lua_getfield(L, 1, "exe");
  o.exe = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  int top = lua_gettop(L);
  lua_getfield(L, 1, "argv");
  o.argv = string_list(L, lua_gettop(L), "argv", 0);
  lua_getfield(L, 1, "env");
  o.env = string_list(L, lua_gettop(L), "env", 1);
  if (o.workers < 0) return luaL_error(L, "pool: workers must be >= 0, got %d", o.workers);

  lpool *lp = lua_newuserdatauv(L, sizeof *lp, 2);
  memset(lp, 0, sizeof *lp);
  lsuiro_setmt(L, &lsuiro_key_pool);
  lua_newtable(L); /* user value: per-pool caches (published function prototypes) */
  lua_setiuservalue(L, -2, 1);
  suiro_status st = suiro_pool_create(&o, &lp->p);
  if (st != SUIRO_OK) return luaL_error(L, "pool: %s", suiro_last_error());
  lp->owner = 1;
  lp->default_timeout = timeout >= 1e12 ? -1 : timeout;
  lua_getfield(L, 1, "name");
  if (lua_type(L, -1) == LUA_TSTRING) snprintf(lp->name, sizeof lp->name, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_getfield(L, 1, "lang");
  snprintf(lp->lang, sizeof lp->lang, "%s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "lua");
  lua_pop(L, 1);
  lua_replace(L, top); /* keep the pool; drop the temporaries above it */
  lua_settop(L, top);
  return 1;
}

/* Forgets what was published to a pool (its blob store dies with it; a later pool may reuse the
 * handle's address). */
static void forget_published(lua_State *L, lpool *lp) {
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, lp);
  lua_pushnil(L); /* and the last function sent (lcodec.c) */
  lua_rawsetp(L, LUA_REGISTRYINDEX, (const char *)lp + 1);
  lp->fn_ptr = NULL;
}

/* Stops an owned pool once (stop, <close> and __gc all come here); a worker's own pool is not
 * ours to stop. */
static void stop_pool(lua_State *L, lpool *lp, double timeout) {
  forget_published(L, lp);
  if (lp->owner && lp->p && !lp->closed) suiro_pool_stop(lp->p, timeout);
  lp->closed = 1;
  lp->p = NULL;
}

static int l_pool_stop(lua_State *L) {
  lpool *lp = lsuiro_checkud(L, 1, &lsuiro_key_pool, LSUIRO_POOL);
  if (!lp->owner)
    return luaL_error(L, "pool:stop: a worker cannot stop its own pool (suiro.current_pool() stays usable)");
  double timeout = lua_isnoneornil(L, 2) ? 5.0 : lpool_seconds(L, 2, "pool:stop", "timeout");
  stop_pool(L, lp, timeout);
  return 0;
}

static int l_pool_gc(lua_State *L) {
  lpool *lp = lsuiro_checkud(L, 1, &lsuiro_key_pool, LSUIRO_POOL);
  if (lp->owner) stop_pool(L, lp, 5.0);
  return 0;
}

/* Task states live in guards, one finalizer per guard instead of one per task: a finalizer
 * costs a Lua call and a second collection per object, about as much as all the rest of a
 * task's host-side work. A guard (a batch's, or a slab of up to SLAB single submissions) holds
 * the handles and states; each of its tasks references it, so it is finalized once none of them
 * is reachable, and then releases those never collected. A task kept alive thus keeps its
 * guard's uncollected siblings' result slots too: when a pool's free slots run low, single
 * tasks go back to a finalizer of their own (after one full collection to free dead guards). */
typedef struct batch_guard {
  size_t n; /* entries in use (a slab fills up to SLAB) */
  struct { suiro_task t; int state; } e[];
} batch_guard;
#define SLAB 64

static int slab_pressure(lpool *lp) {
  uint32_t total, free = suiro_free_slots(lp->p, &total);
  return free < total / 2;
}

/* The pool lets go of its current slab: its tasks that are garbage can then be finalized (the
 * pool's reference kept a half-dropped slab, and every slot in it, alive). */
static void drop_slab(lua_State *L, int pool_idx) {
  lpool *lp = lua_touserdata(L, pool_idx);
  if (!lp->slab) return;
  lp->slab = NULL;
  lua_pushnil(L);
  lua_setiuservalue(L, pool_idx, 2);
}

static ltask *push_task(lua_State *L, int pool_idx, suiro_task t) {
  lpool *lp = lua_touserdata(L, pool_idx);
  batch_guard *sl = lp->slab;
  if (!sl || sl->n == SLAB) {
    if (lp->p && slab_pressure(lp)) {
      if (sl) { /* entering pressure: drop the slab and collect the dead ones once */
        lp->slab = NULL;
        lua_pushnil(L);
        lua_setiuservalue(L, pool_idx, 2);
        lua_gc(L, LUA_GCCOLLECT);
      }
      ltask *k = lua_newuserdatauv(L, sizeof *k, 1);
      k->t = t;
      k->own = 0;
      k->state = &k->own;
      k->lp = lp;
      set_mt(L, UP_TASK_MT, &lsuiro_key_task);
      lua_pushvalue(L, pool_idx);
      lua_setiuservalue(L, -2, 1);
      return k;
    }
    sl = lua_newuserdatauv(L, sizeof *sl + SLAB * sizeof sl->e[0], 1);
    sl->n = 0;
    lsuiro_setmt(L, &key_batch_guard);
    lua_pushvalue(L, pool_idx);
    lua_setiuservalue(L, -2, 1);
    lua_setiuservalue(L, pool_idx, 2);
    lp->slab = sl;
  }
  size_t i = sl->n++;
  sl->e[i].t = t;
  sl->e[i].state = 0;
  ltask *k = lua_newuserdatauv(L, sizeof *k, 1);
  k->t = t;
  k->state = &sl->e[i].state;
  k->lp = lp;
  set_mt(L, UP_BATCH_TASK_MT, &key_batch_task);
  lua_getiuservalue(L, pool_idx, 2);
  lua_setiuservalue(L, -2, 1);
  return k;
}

/* pool:submit(f, ...) -> task */
static int l_submit(lua_State *L) {
  lpool *lp = pool_arg(L, 1);
  int n = lua_gettop(L) - 2;
  if (n < 0) return luaL_error(L, "pool:submit: argument 1 must be a function or call spec, got no value");
  unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  lcodec_ctx c = { .L = L, .pool = lp, .verb = "submit" };
  lcodec_encode_task(&c, 2, 3, n, &w);
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != 0) {
    wire_writer_free(&w);
    return luaL_error(L, "pool:submit: %s", wire_writer_error(&w));
  }
  suiro_task t;
  suiro_status st = suiro_submit(lp->p, SUIRO_FN_BINDING, buf, len, &t, lp->default_timeout);
  if (st == SUIRO_FULL && suiro_free_slots(lp->p, NULL) == 0) {
    /* Every result slot is held: tasks dropped uncollected hold theirs until their finalizers
     * run. Run them now, then try again (the engine waits for released tasks to finish). */
    drop_slab(L, 1);
    lua_gc(L, LUA_GCCOLLECT);
    st = suiro_submit(lp->p, SUIRO_FN_BINDING, buf, len, &t, lp->default_timeout);
  }
  wire_writer_free(&w);
  if (st != SUIRO_OK) return push_outcome(L, st, "pool:submit");
  push_task(L, 1, t);
  return 1;
}

/* pool:submit_batch(f, { {args...}, {args...}, ... }) -> { task, ... }
 * Every task is encoded first, then all go to the engine in one batch (one publication and one
 * wake decision per run of free ring entries). If the ring stays full past the pool's timeout,
 * returns the tasks that went in and "timeout" (or "full"). */
static int l_submit_batch(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  luaL_checkany(L, 2);
  table_arg(L, 3, "pool:submit_batch", "argument 2 (a list of argument lists)");
  lua_Integer n = luaL_len(L, 3);
  lua_settop(L, 3);
  /* scratch freed even when encoding raises: the encoded bytes in an lbuf, the rest userdata */
  size_t nn = (size_t)(n > 0 ? n : 0);
  if (nn > ((size_t)1 << 40) / sizeof(suiro_task_spec))
    return luaL_error(L, "pool:submit_batch: %I argument lists are too many", n);
  lbuf *bytes = lbuf_push(L);
  size_t *offs = lua_newuserdatauv(L, (nn + 1) * sizeof *offs, 0);
  suiro_task_spec *specs = lua_newuserdatauv(L, (nn ? nn : 1) * sizeof *specs, 0);
  suiro_task *tasks = lua_newuserdatauv(L, (nn ? nn : 1) * sizeof *tasks, 0);
  lcodec_ctx c = { .L = L, .pool = lp, .verb = "submit_batch" };
  int base = lua_gettop(L);
  size_t accepted = 0, from = 0;
  suiro_status st = SUIRO_OK;
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, 3, i) != LUA_TTABLE)
      return luaL_error(L, "pool:submit_batch: argument lists[%d] must be a table, got %s", (int)i,
                        luaL_typename(L, -1));
    int args = lua_gettop(L);
    lua_Integer na = (lua_Integer)lua_rawlen(L, args);
    /* an argument list is a sequence (or a table.pack table): a record here is a mistake */
    lua_pushnil(L);
    while (lua_next(L, args)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "n")) {
        lua_getfield(L, args, "n");
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < na || lua_tointeger(L, -1) > na + 250)
          return luaL_error(L, "pool:submit_batch: lists[%I].n must count its arguments", i);
        na = lua_tointeger(L, -1);
        lua_pop(L, 1);
      } else if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > na) {
        return luaL_error(L, "pool:submit_batch: lists[%I] must be a list of arguments, has key %s", i,
                          luaL_tolstring(L, -1, NULL));
      }
    }
    if (na > 250) return luaL_error(L, "pool:submit_batch: lists[%I] has %I arguments (at most 250)", i, na);
    luaL_checkstack(L, (int)na + 4, "too many arguments");
    c.list = i;
    lua_pushvalue(L, 2);
    int fidx = lua_gettop(L);
    for (lua_Integer k = 1; k <= na; k++) lua_geti(L, args, k);
    _Alignas(8) unsigned char stack[512];
    wire_writer w;
    wire_writer_init(&w, stack, sizeof stack);
    lcodec_encode_task(&c, fidx, fidx + 1, (int)na, &w);
    const void *buf;
    size_t len;
    if (wire_writer_finish(&w, &buf, &len) != 0) {
      wire_writer_free(&w);
      return luaL_error(L, "pool:submit_batch: %s", wire_writer_error(&w));
    }
    offs[i - 1] = bytes->len;
    lbuf_put(L, bytes, buf, len);
    wire_writer_free(&w);
    lua_settop(L, base);
    /* Hand tasks over in small runs: workers start on the first while the rest are encoded, and
     * the publication fence and wake decision are paid once per run. */
    size_t upto = (size_t)i;
    if (upto - from == 32 || upto == nn) {
      offs[upto] = bytes->len;
      for (size_t k = from; k < upto; k++)
        specs[k] = (suiro_task_spec){ SUIRO_FN_BINDING, bytes->p + offs[k], offs[k + 1] - offs[k] };
      size_t got = 0;
      st = suiro_submit_batch(lp->p, specs + from, upto - from, tasks + from, &got, lp->default_timeout);
      accepted += got;
      if (st == SUIRO_FULL && suiro_free_slots(lp->p, NULL) == 0) { /* as in submit */
        drop_slab(L, 1);
        lua_gc(L, LUA_GCCOLLECT);
        size_t more = 0, at = from + got;
        st = suiro_submit_batch(lp->p, specs + at, upto - at, tasks + at, &more, lp->default_timeout);
        accepted += more;
      }
      if (st != SUIRO_OK) break;
      from = upto;
      bytes->len = 0; /* the engine copied them */
    }
  }
  if (st == SUIRO_ERR && accepted == 0) return luaL_error(L, "pool:submit_batch: %s", suiro_last_error());
  /* One finalizer per batch instead of one per task: finalizers cost a Lua call each and keep
   * their objects for a second collection, as much as the rest of a task's host-side work. The
   * batch's handles and states live in a guard that every task of the batch references; the
   * guard is finalized once none of them is reachable and releases those never collected. */
  lua_createtable(L, (int)accepted, 0);
  int out = lua_gettop(L);
  batch_guard *g = lua_newuserdatauv(L, sizeof *g + accepted * sizeof g->e[0], 1);
  int guard = lua_gettop(L);
  g->n = accepted;
  lsuiro_setmt(L, &key_batch_guard);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, guard, 1);
  for (size_t i = 0; i < accepted; i++) {
    g->e[i].t = tasks[i];
    g->e[i].state = 0;
    ltask *k = lua_newuserdatauv(L, sizeof *k, 1);
    k->t = tasks[i];
    k->state = &g->e[i].state;
    k->lp = lp;
    lsuiro_setmt(L, &key_batch_task);
    lua_pushvalue(L, guard);
    lua_setiuservalue(L, -2, 1);
    lua_rawseti(L, out, (lua_Integer)i + 1);
  }
  lua_settop(L, out);
  if (accepted == nn) return 1;
  lua_pushstring(L, st == SUIRO_TIMEOUT ? "timeout" : st == SUIRO_CLOSED ? "closed" : "full");
  return 2;
}

/* task:collect([timeout]) -> values... | nil, "timeout" */
static int l_task_collect(lua_State *L) {
  ltask *k = checktask(L, 1);
  lpool *lp = k->lp;
  if (*k->state == 1) return luaL_error(L, "task:collect: this task was collected already");
  if (*k->state == 2) return luaL_error(L, "task:collect: this task was released");
  if (lp->closed || !lp->p) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  double timeout = opt_timeout(L, 2, lp, "task:collect");
  suiro_result r;
  suiro_status st = suiro_collect(lp->p, k->t, &r, timeout);
  if (st != SUIRO_OK) return push_outcome(L, st, "task:collect");
  *k->state = 1;
  lua_settop(L, 0);
  return push_result(L, &r, 0);
}

static int l_task_ready(lua_State *L) {
  ltask *k = checktask(L, 1);
  lpool *lp = k->lp;
  /* a task of a stopped pool is ready: collect answers at once (nil, "closed") */
  lua_pushboolean(L, *k->state == 0 && (!lp->p || lp->closed || suiro_task_ready(lp->p, k->t)));
  return 1;
}

static int l_task_cancel(lua_State *L) {
  ltask *k = checktask(L, 1);
  lpool *lp = k->lp;
  lua_pushboolean(L, *k->state == 0 && lp->p && !lp->closed && suiro_cancel(lp->p, k->t));
  return 1;
}

/* task:kill(): a task that has not started is cancelled; a running one's worker is killed and
 * replaced; either way it completes as an error of class "cancelled". */
static int l_task_kill(lua_State *L) {
  ltask *k = checktask(L, 1);
  lpool *lp = k->lp;
  if (*k->state != 0) return luaL_error(L, "task:kill: this task was %s already", *k->state == 1 ? "collected" : "released");
  if (lp->closed || !lp->p) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  if (suiro_task_kill(lp->p, k->t) != SUIRO_OK) return luaL_error(L, "task:kill: %s", suiro_last_error());
  lua_pushboolean(L, 1);
  return 1;
}

static int l_task_gc(lua_State *L) {
  ltask *k = checktask(L, 1);
  if (*k->state != 0) return 0;
  lpool *lp = k->lp;
  if (lp && lp->p && !lp->closed) suiro_task_release(lp->p, k->t);
  *k->state = 2;
  return 0;
}

/* A guard's finalizer: releases its tasks that were never collected. */
static int batch_guard_gc(lua_State *L) {
  batch_guard *g = lua_touserdata(L, 1);
  lua_getiuservalue(L, 1, 1);
  lpool *lp = lua_touserdata(L, -1);
  for (size_t i = 0; i < g->n; i++) {
    if (g->e[i].state != 0) continue;
    if (lp && lp->p && !lp->closed) suiro_task_release(lp->p, g->e[i].t);
    g->e[i].state = 2;
  }
  return 0;
}

static int l_task_tostring(lua_State *L) {
  ltask *k = checktask(L, 1);
  static const char *states[] = { "pending", "collected", "released" };
  lua_pushfstring(L, "suiro.task(%p, %s)", (void *)k, states[*k->state]);
  return 1;
}

/* Collects the tasks in the table at idx: the shared part of collect_all and collect_any. Pushes
 * a scratch userdata holding the handles, then the ltask pointers. */
static suiro_task *gather(lua_State *L, int idx, lua_Integer *n, lpool *lp, const char *verb, ltask ***ks) {
  table_arg(L, idx, verb, "argument 1 (a list of tasks)");
  *n = luaL_len(L, idx);
  size_t m = (size_t)(*n ? *n : 1);
  suiro_task *ts = lua_newuserdatauv(L, (sizeof *ts + sizeof(ltask *)) * m, 0);
  *ks = (ltask **)(ts + m);
  for (lua_Integer i = 1; i <= *n; i++) {
    lua_geti(L, idx, i);
    ltask *k = testtask(L, -1);
    if (!k) luaL_error(L, "%s: tasks[%d] is not a task (got %s)", verb, (int)i, luaL_typename(L, -1));
    if (*k->state != 0)
      luaL_error(L, "%s: tasks[%d] was %s already", verb, (int)i, *k->state == 1 ? "collected" : "released");
    if (k->lp != lp)
      luaL_error(L, "%s: tasks[%d] belongs to %s", verb, (int)i,
                 k->lp->closed ? "a pool that was stopped" : "another pool");
    lua_pop(L, 1);
    ts[i - 1] = k->t;
    (*ks)[i - 1] = k;
  }
  /* the same task twice would be collected twice: name both places (a sort would cost more for
   * the usual handful of tasks; big lists take the hash path) */
  if (*n <= 64) {
    for (lua_Integer i = 1; i < *n; i++)
      for (lua_Integer j = 0; j < i; j++)
        if (ts[i] == ts[j]) luaL_error(L, "%s: tasks[%d] is the same task as tasks[%d]", verb, (int)i + 1, (int)j + 1);
  } else {
    lua_createtable(L, 0, (int)*n);
    for (lua_Integer i = 0; i < *n; i++) {
      lua_pushinteger(L, (lua_Integer)ts[i]);
      if (lua_rawget(L, -2) != LUA_TNIL)
        luaL_error(L, "%s: tasks[%d] is the same task as tasks[%d]", verb, (int)i + 1, (int)lua_tointeger(L, -1));
      lua_pop(L, 1);
      lua_pushinteger(L, (lua_Integer)ts[i]);
      lua_pushinteger(L, i + 1);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
  return ts;
}

/* pool:collect_all(tasks, [timeout], [{ errors = "raise" | "return" }]) -> { first value of each
 * task, in input order }. Nothing is consumed unless everything is handed out: a timeout leaves
 * every task collectable; under errors = "raise" (the default) a failure raises the first failed
 * task's error and only that task is consumed; with errors = "return" the error objects take the
 * place of the failed values. */
static int l_collect_all(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  double timeout = opt_timeout(L, 3, lp, "pool:collect_all");
  int return_errors = 0;
  if (!lua_isnoneornil(L, 4)) {
    table_arg(L, 4, "pool:collect_all", "argument 3 (options)");
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "errors") != 0)
        return luaL_error(L, "pool:collect_all: unknown option %s (valid: errors)", luaL_tolstring(L, -2, NULL));
      lua_pop(L, 1);
    }
    lua_getfield(L, 4, "errors");
    const char *e = lua_tostring(L, -1);
    if (!lua_isnil(L, -1) && (!e || (strcmp(e, "raise") && strcmp(e, "return"))))
      return luaL_error(L, "pool:collect_all: errors must be \"raise\" or \"return\", got %s", luaL_tolstring(L, -1, NULL));
    return_errors = e && !strcmp(e, "return");
  }
  lua_settop(L, 2);
  lua_Integer n;
  ltask **ks;
  suiro_task *ts = gather(L, 2, &n, lp, "pool:collect_all", &ks);
  suiro_status st = suiro_wait_all(lp->p, ts, (size_t)n, timeout);
  if (st != SUIRO_OK) return push_outcome(L, st, "pool:collect_all");
  if (!return_errors)
    for (lua_Integer i = 0; i < n; i++) {
      int kind = suiro_task_kind(lp->p, ts[i]);
      if (kind == SUIRO_RESULT_VALUE) continue;
      /* the first failure is delivered (that task is collected: its error is its result); every
       * other task stays collectable */
      suiro_result r;
      st = suiro_collect(lp->p, ts[i], &r, 0);
      if (st != SUIRO_OK) return push_outcome(L, st, "pool:collect_all");
      *ks[i]->state = 1;
      lerror_push_result(L, &r, (int)i + 1);
      return lerror_raise(L);
    }
  lua_createtable(L, (int)n, 0);
  int out = lua_gettop(L);
  for (lua_Integer i = 0; i < n; i++) {
    suiro_result r;
    st = suiro_collect(lp->p, ts[i], &r, 0);
    if (st != SUIRO_OK) return push_outcome(L, st, "pool:collect_all");
    *ks[i]->state = 1;
    if (r.kind != SUIRO_RESULT_VALUE) {
      lerror_push_result(L, &r, (int)i + 1);
    } else {
      int top = lua_gettop(L);
      int nv = lcodec_decode_values(L, r.data, r.len);
      if (nv == 0) lua_pushnil(L);
      lua_settop(L, top + 1); /* first value of each task */
    }
    lua_rawseti(L, out, i + 1);
  }
  return 1;
}

/* pool:collect_any(tasks, [timeout]) -> index, values... */
static int l_collect_any(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  double timeout = opt_timeout(L, 3, lp, "pool:collect_any");
  lua_settop(L, 2);
  lua_Integer n;
  ltask **ks;
  suiro_task *ts = gather(L, 2, &n, lp, "pool:collect_any", &ks);
  if (n == 0) return luaL_error(L, "pool:collect_any: no tasks given");
  size_t idx;
  suiro_result r;
  suiro_status st = suiro_collect_any(lp->p, ts, (size_t)n, &idx, &r, timeout);
  if (st != SUIRO_OK) return push_outcome(L, st, "pool:collect_any");
  *ks[idx]->state = 1;
  lua_pushinteger(L, (lua_Integer)idx + 1);
  int base = lua_gettop(L);
  if (r.kind != SUIRO_RESULT_VALUE) {
    lerror_push_result(L, &r, 0);
    return lerror_raise(L);
  }
  lcodec_decode_values(L, r.data, r.len);
  return lua_gettop(L) - base + 1;
}

static int l_status(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  suiro_pool_stats s;
  suiro_worker_info w[64];
  int n = suiro_pool_status(lp->p, &s, w, 64);
  if (n < 0) n = 0; /* not a live pool (the error is set): no workers to list */
  lua_createtable(L, 0, 12);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, 0, 7);
    lua_pushinteger(L, w[i].slot); lua_setfield(L, -2, "slot");
    lua_pushinteger(L, w[i].pid); lua_setfield(L, -2, "pid");
    lua_pushstring(L, suiro_worker_state_name(w[i].state)); lua_setfield(L, -2, "state");
    lua_pushinteger(L, (lua_Integer)w[i].tasks); lua_setfield(L, -2, "tasks");
    lua_pushinteger(L, (lua_Integer)w[i].steals); lua_setfield(L, -2, "steals");
    lua_pushinteger(L, (lua_Integer)w[i].parks); lua_setfield(L, -2, "parks");
    lua_pushinteger(L, (lua_Integer)w[i].moves); lua_setfield(L, -2, "moves");
    lua_pushboolean(L, w[i].parked); lua_setfield(L, -2, "parked");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "workers");
#define F(name) lua_pushinteger(L, (lua_Integer)s.name); lua_setfield(L, -2, #name)
  F(max_workers); F(submitted); F(collected); F(tasks); F(steals); F(parks); F(host_parks);
  F(deaths); F(respawns); F(wakes); F(moves);
#undef F
  lua_pushinteger(L, s.workers);
  lua_setfield(L, -2, "live");
  lua_pushstring(L, lp->name[0] ? lp->name : suiro_pool_name(lp->p));
  lua_setfield(L, -2, "name");
  lua_pushstring(L, suiro_pool_name(lp->p));
  lua_setfield(L, -2, "region");
  return 1;
}

static int l_spawn(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  lua_Integer ln = lua_isnoneornil(L, 2) ? 1 : int_arg(L, 2, "pool:spawn", "n", 1, 64);
  int n = (int)ln;
  if (suiro_pool_spawn_workers(lp->p, n) != SUIRO_OK) return luaL_error(L, "pool:spawn: %s", suiro_last_error());
  return 0;
}

static int l_retire(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  lua_Integer ls = int_arg(L, 2, "pool:retire", "slot", 0, 63);
  int slot = (int)ls;
  double timeout = lua_isnoneornil(L, 3) ? 10 : lpool_seconds(L, 3, "pool:retire", "timeout");
  suiro_status st = suiro_pool_retire(lp->p, slot, timeout);
  if (st != SUIRO_OK) return push_outcome(L, st, "pool:retire");
  lua_pushboolean(L, 1);
  return 1;
}

static int l_eventfd(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  lua_pushinteger(L, suiro_pool_eventfd(lp->p));
  return 1;
}

static int l_event_ack(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  suiro_pool_event_ack(lp->p);
  return 0;
}

static int l_pool_tostring(lua_State *L) {
  lpool *lp = lsuiro_checkud(L, 1, &lsuiro_key_pool, LSUIRO_POOL);
  if (!lp->p || lp->closed) lua_pushfstring(L, "suiro.pool(%s%sstopped)", lp->name, lp->name[0] ? ", " : "");
  else lua_pushfstring(L, "suiro.pool(%s)", lp->name[0] ? lp->name : suiro_pool_name(lp->p));
  return 1;
}

static int l_pool_index_timeout(lua_State *L) { /* pool:set_timeout(seconds) */
  lpool *lp = lpool_check(L, 1);
  double t = luaL_checknumber(L, 2);
  lp->default_timeout = t >= 1e12 ? -1 : t;
  return 0;
}

/* The worker is leaving (its engine handle is about to be freed): its borrowed pool answers
 * "closed" from now on, so finalizers of tasks it left uncollected touch nothing freed. */
void lpool_forget_current(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "suiro.current_pool") == LUA_TUSERDATA) {
    lpool *lp = lua_touserdata(L, -1);
    lp->p = NULL;
    lp->closed = 1;
  }
  lua_pop(L, 1);
}

void lpool_push_current(lua_State *L) {
  suiro_pool *p = suiro_current_pool();
  if (!p) {
    lua_pushnil(L);
    return;
  }
  /* One borrowed handle per worker process, cached in the registry. */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "suiro.current_pool") == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  lpool *lp = lua_newuserdatauv(L, sizeof *lp, 2);
  memset(lp, 0, sizeof *lp);
  lp->p = p;
  lp->owner = 0;
  lp->default_timeout = -1;
  lsuiro_setmt(L, &lsuiro_key_pool);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.current_pool");
}

static int l_current_pool(lua_State *L) {
  lpool_push_current(L);
  return 1;
}

static int l_now(lua_State *L) {
  lua_pushnumber(L, suiro_now());
  return 1;
}

static int l_reap(lua_State *L) {
  lua_pushinteger(L, suiro_reap());
  return 1;
}

/* core.task_pool(task or map) -> its pool: their first user value, or for a task with a guard
 * the guard's. */
static int l_task_pool(lua_State *L) {
  luaL_checktype(L, 1, LUA_TUSERDATA);
  lua_getiuservalue(L, 1, 1);
  if (lsuiro_testud(L, 1, &key_batch_task)) lua_getiuservalue(L, -1, 1);
  return 1;
}

/* Executable of the Lua worker: this program when it is the suiro CLI, else the suiro binary next
 * to this module (build/lib/suiro/core.so -> build/bin/suiro); SUIRO_WORKER_EXE overrides. */
int lpool_is_cli;
static int l_worker_exe(lua_State *L) {
  const char *env = getenv("SUIRO_WORKER_EXE");
  if (env && *env) {
    lua_pushstring(L, env);
    return 1;
  }
  char buf[PATH_MAX];
  if (lpool_is_cli) {
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
      buf[n] = 0;
      lua_pushstring(L, buf);
      return 1;
    }
  }
  Dl_info info;
  if (dladdr((void *)luaopen_suiro_core, &info) && info.dli_fname) {
    char dir[PATH_MAX - 32];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    /* build/lib/suiro/core.so -> build/bin; PREFIX/lib/lua/5.4/suiro/core.so -> PREFIX/bin */
    static const char *const up[] = { "/../../bin/suiro", "/../../../../bin/suiro" };
    for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
      snprintf(buf, sizeof buf, "%s%s", dir, up[i]);
      char real[PATH_MAX];
      if (realpath(buf, real) && access(real, X_OK) == 0) {
        lua_pushstring(L, real);
        return 1;
      }
    }
  }
  return luaL_error(L, "cannot find the suiro worker binary (build/bin/suiro); build it with scripts/build "
                       "or set SUIRO_WORKER_EXE");
}

/* core.arm_events(pools): arm each pool's eventfd before checking for finished tasks. */
static int l_arm_events(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    lpool *lp = lsuiro_checkud(L, -1, &lsuiro_key_pool, LSUIRO_POOL);
    if (lp->p && !lp->closed) suiro_pool_eventfd(lp->p);
    lua_pop(L, 1);
  }
  return 0;
}

/* core.wait_events(pools, timeout): sleep until a result lands in one of the pools (or the
 * timeout passes), then drain and re-arm. Inside a worker there is no eventfd: sleep a slice. */
static int l_wait_events(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  double timeout = luaL_optnumber(L, 2, -1);
  lua_Integer n = luaL_len(L, 1);
  suiro_pool *pools[256];
  int np = 0;
  for (lua_Integer i = 1; i <= n && np < 256; i++) {
    lua_geti(L, 1, i);
    lpool *lp = lsuiro_checkud(L, -1, &lsuiro_key_pool, LSUIRO_POOL);
    lua_pop(L, 1);
    if (lp->p && !lp->closed && lp->owner) pools[np++] = lp->p; /* a worker's own pool has no event fd */
  }
  if (np == 0 || np < n) { /* nothing to sleep on (or a worker's pool among them): a short slice */
    double s = timeout < 0 || timeout > 0.001 ? 0.001 : timeout;
    struct timespec ts = { 0, (long)(s * 1e9) };
    nanosleep(&ts, NULL);
    if (np == 0) return 0;
    timeout = 0;
  }
  if (suiro_wait_pools(pools, (size_t)np, timeout) < 0) return luaL_error(L, "suiro.run: %s", suiro_last_error());
  return 0;
}

/* core.zc_floor([bytes]) -> the zero-copy floor (sets it first when given): for measurements. */
static int l_zc_floor(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) {
    lua_Integer b = luaL_checkinteger(L, 1);
    if (b < 1) return luaL_error(L, "zc_floor: bytes must be positive");
    suiro_zc_configure((size_t)b, 0, 0);
    larray_big_bytes = (size_t)b;
  }
  lua_pushinteger(L, (lua_Integer)suiro_zc_floor);
  return 1;
}

static const luaL_Reg pool_methods[] = {
  { "submit", l_submit },
  { "submit_batch", l_submit_batch },
  { "collect_all", l_collect_all },
  { "collect_any", l_collect_any },
  { "status", l_status },
  { "stop", l_pool_stop },
  { "spawn", l_spawn },
  { "retire", l_retire },
  { "eventfd", l_eventfd },
  { "event_ack", l_event_ack },
  { "set_timeout", l_pool_index_timeout },
  { NULL, NULL },
};

static const luaL_Reg task_methods[] = {
  { "collect", l_task_collect },
  { "ready", l_task_ready },
  { "cancel", l_task_cancel },
  { "kill", l_task_kill },
  { "release", l_task_gc },
  { NULL, NULL },
};

static const luaL_Reg pool_funcs[] = {
  { "pool", l_pool_new },
  { "current_pool", l_current_pool },
  { "now", l_now },
  { "reap", l_reap },
  { "zc_floor", l_zc_floor },
  { "task_pool", l_task_pool },
  { "worker_exe", l_worker_exe },
  { "arm_events", l_arm_events },
  { "wait_events", l_wait_events },
  { NULL, NULL },
};

/* ---- interrupts ------------------------------------------------------------------------------
 * The engine asks after each sleep of a wait whether to give up (suiro_set_interrupt_check). In
 * the suiro command a SIGINT or SIGTERM handler sets lpool_signal; in stock lua5.4 its SIGINT
 * handler sets a count hook of 1 on the main thread (lua.c's laction), which we recognise. Either
 * way the wait ends with "interrupted" and the error unwinds the script, closing its pools. */
volatile sig_atomic_t lpool_signal;

static int interrupt_check(void *ud) {
  if (lpool_signal) return 1;
  lua_State *main = ud;
  int all = LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT;
  return lua_gethook(main) != NULL && lua_gethookcount(main) == 1 && (lua_gethookmask(main) & all) == all;
}

void lpool_check_interrupt(lua_State *L) {
  lua_State *main = NULL;
  if (!lpool_signal) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    main = lua_tothread(L, -1);
    lua_pop(L, 1);
  }
  if (lpool_signal || (main && interrupt_check(main)))
    luaL_error(L, "%s", lpool_signal == SIGTERM ? "terminated" : "interrupted!");
}

/* Registers the pool and task metatables and sets the pool functions (pool, current_pool, now,
 * reap, task_pool, worker_exe, arm_events, wait_events) and the method tables into the table on
 * top (linit.c's module table). */
void lpool_open(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  suiro_set_interrupt_check(interrupt_check, lua_tothread(L, -1));
  lua_pop(L, 1);
  static const luaL_Reg pool_meta[] = {
    { "__gc", l_pool_gc }, { "__close", l_pool_gc }, { "__tostring", l_pool_tostring }, { NULL, NULL },
  };
  static const luaL_Reg task_meta[] = { { "__gc", l_task_gc }, { "__tostring", l_task_tostring }, { NULL, NULL } };
  static const luaL_Reg batch_task_meta[] = { { "__tostring", l_task_tostring }, { NULL, NULL } };
  static const luaL_Reg guard_meta[] = { { "__gc", batch_guard_gc }, { NULL, NULL } };
  lsuiro_newmt(L, LSUIRO_POOL, &lsuiro_key_pool);
  luaL_setfuncs(L, pool_meta, 0);
  int pool_mt = lua_gettop(L);
  lsuiro_newmt(L, LSUIRO_TASK, &lsuiro_key_task);
  luaL_setfuncs(L, task_meta, 0);
  /* a batch's tasks: the same methods and name, no finalizer of their own */
  lua_newtable(L);
  luaL_setfuncs(L, batch_task_meta, 0);
  lua_pushliteral(L, LSUIRO_TASK);
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_batch_task);
  /* the method tables, each function with the metatables as upvalues (UP_*) */
  static const struct { const luaL_Reg *fns; const char *name; } tables[] = {
    { pool_methods, "suiro.pool_methods" }, { task_methods, "suiro.task_methods" },
  };
  for (int i = 0; i < 2; i++) {
    lua_newtable(L);
    for (int up = 0; up < 3; up++) lua_pushvalue(L, pool_mt + up);
    lua_pushlightuserdata(L, (void *)&key_upvalues);
    luaL_setfuncs(L, tables[i].fns, N_UPVALUES);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, tables[i].name);
    if (i == 0) {
      lua_setfield(L, pool_mt, "__index");
    } else {
      lua_pushvalue(L, -1);
      lua_setfield(L, pool_mt + 1, "__index");
      lua_setfield(L, pool_mt + 2, "__index");
    }
  }
  lua_settop(L, pool_mt - 1);
  lua_newtable(L); /* the guard of a batch or a slab of tasks */
  luaL_setfuncs(L, guard_meta, 0);
  lua_pushliteral(L, "suiro.task_guard");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_batch_guard);

  luaL_setfuncs(L, pool_funcs, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.pool_methods");
  lua_setfield(L, -2, "pool_methods");
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.task_methods");
  lua_setfield(L, -2, "task_methods");
}
