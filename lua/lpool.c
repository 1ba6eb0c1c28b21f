/*
 * lpool.c — suiro.core: pools for Lua: creating and stopping them, status, workers (spawn,
 * retire), the event fds that suiro.run sleeps on, and interrupts. Tasks are ltask.c's.
 *
 * A pool userdata owns an engine pool (or, inside a worker, borrows the worker's own pool for
 * nested submissions); its tasks keep it alive (ltask.c). Outcomes follow the Lua convention: a
 * timeout is `nil, "timeout"` (also "closed", "peer_gone", "full": lpool_push_outcome); misuse
 * raises a message that names the argument. lpool_signal is the one shared state: written by the
 * CLI's signal handlers, read by every wait.
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

const char lsuiro_key_pool, lsuiro_key_error, lsuiro_key_call, lsuiro_key_array;

/* ---- helpers ---------------------------------------------------------------------------------- */

lpool *lpool_check(lua_State *L, int idx) {
  lpool *lp = lsuiro_checkud(L, idx, &lsuiro_key_pool, LSUIRO_POOL);
  if (lp->closed || !lp->p) luaL_error(L, "the pool is stopped");
  return lp;
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
  } else {
    luaL_error(L, "%s: %s must be a number of seconds or a duration string (\"250ms\"), got %s", verb, what,
               luaL_typename(L, idx));
    return 0;
  }
  double out;
  if (suiro_timeout_norm(t, &out) != 0)
    luaL_error(L, "%s: %s must be zero or more seconds (math.huge or \"inf\" for no limit), got %s", verb, what,
               lua_tostring(L, idx));
  return out;
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

/* Pushes `nil, why` for an outcome; raises for SUIRO_ERR. Returns the number of results. */
int lpool_push_outcome(lua_State *L, suiro_status st, const char *verb) {
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

/* ---- pool ------------------------------------------------------------------------------------- */

/* A Lua function is code only Lua workers run: for others, refuse it at send time (their workers
 * would fail every task with it). Functions inside values still cross (as descriptors). */
void lpool_check_runs_lua(lua_State *L, const lpool *lp, const char *verb) {
  if (lp->lang[0] && strcmp(lp->lang, "lua") != 0) /* the message is formatted only on failure */
    luaL_error(L, "pool:%s: argument 1: a Lua function cannot run on %s workers; name one of their functions "
                  "(\"%s\") or send a suiro.call", verb, lp->lang, strcmp(lp->lang, "r") ? "module.fn" : "pkg::fn");
}

/* core.pool(spec): spec is init.lua's pool_spec (the normalised options, with exe, argv, env and
 * lang built from the launcher), handed to the engine as one DICT: suiro_pool_create_from checks
 * every field (suiro_face.h section 6) and gives back what the pool object keeps. */
static int l_pool_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  static lpool no_pool; /* functions in the options are refused ("a function cannot be sent here") */
  _Alignas(8) unsigned char stack[4096];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  lcodec_ctx c = { .L = L, .pool = &no_pool, .verb = "pool" };
  lcodec_encode_value(&c, 1, &w);
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    lua_pushfstring(L, "pool: %s", wire_writer_error(&w));
    wire_writer_free(&w);
    return lua_error(L);
  }
  lpool *lp = lua_newuserdatauv(L, sizeof *lp, 2);
  memset(lp, 0, sizeof *lp);
  lsuiro_setmt(L, &lsuiro_key_pool);
  lua_newtable(L); /* user value: per-pool caches (published function prototypes) */
  lua_setiuservalue(L, -2, 1);
  suiro_pool_info info;
  suiro_status st = suiro_pool_create_from(buf, len, WIRE_LANG_LUA, &lp->p, &info);
  wire_writer_free(&w);
  if (st != SUIRO_OK) return luaL_error(L, "%s", suiro_last_error()); /* "pool: ..." */
  lp->owner = 1;
  lp->default_timeout = info.timeout;
  snprintf(lp->name, sizeof lp->name, "%s", info.name);
  snprintf(lp->lang, sizeof lp->lang, "%s",
           info.lang == WIRE_LANG_PYTHON ? "python" : info.lang == WIRE_LANG_R ? "r" : "lua");
  return 1;
}

/* Forgets what was published to a pool (its blob store dies with it; a later pool may reuse the
 * handle's address). */
static void forget_published(lua_State *L, lpool *lp) {
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, lp);
  lua_pushnil(L); /* and the last function sent (lfunc.c) */
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
  if (st != SUIRO_OK) return lpool_push_outcome(L, st, "pool:retire");
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


/* core.worker_exe(): where this host finds the Lua worker, for suiro.config.launch (which puts a
 * launcher's exe and SUIRO_WORKER_EXE first): this program when it is the suiro CLI, else the
 * suiro binary next to this module (build/lib/suiro/core.so -> build/bin/suiro); nil if neither. */
int lpool_is_cli;
static int l_worker_exe(lua_State *L) {
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
  lua_pushnil(L);
  return 1;
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

/* The pool's own methods; those that make and collect tasks are ltask.c's (ltask_pool_methods). */
static const luaL_Reg pool_methods[] = {
  { "status", l_status },
  { "stop", l_pool_stop },
  { "spawn", l_spawn },
  { "retire", l_retire },
  { "eventfd", l_eventfd },
  { "event_ack", l_event_ack },
  { "set_timeout", l_pool_index_timeout },
  { NULL, NULL },
};

static const luaL_Reg pool_funcs[] = {
  { "pool", l_pool_new },
  { "current_pool", l_current_pool },
  { "now", l_now },
  { "reap", l_reap },
  { "zc_floor", l_zc_floor },
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

/* Registers the pool metatable (and, through ltask_open, the task ones) and sets the pool
 * functions (pool, current_pool, now, reap, task_pool, worker_exe, arm_events, wait_events) and
 * the method tables into the table on top (linit.c's module table). */
void lpool_open(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  suiro_set_interrupt_check(interrupt_check, lua_tothread(L, -1));
  lua_pop(L, 1);
  static const luaL_Reg pool_meta[] = {
    { "__gc", l_pool_gc }, { "__close", l_pool_gc }, { "__tostring", l_pool_tostring }, { NULL, NULL },
  };
  lsuiro_newmt(L, LSUIRO_POOL, &lsuiro_key_pool);
  luaL_setfuncs(L, pool_meta, 0);
  ltask_open(L, pool_methods); /* the task metatables and both method tables (ltask.c) */

  luaL_setfuncs(L, pool_funcs, 0);
  luaL_setfuncs(L, ltask_funcs, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.pool_methods");
  lua_setfield(L, -2, "pool_methods");
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.task_methods");
  lua_setfield(L, -2, "task_methods");
}
