/*
 * lmpi.c — rank 0 of the MPI tier for the Lua face, and the module (build/lib/suiro/mpi.so, luaopen_suiro_mpi):
 * MPI pools whose tasks and maps are spread over every host of the job.
 *
 *   local x = core.pool_new(local_pool, options, start_timeout)   -- POOL_NEW to every rank
 *   core.submit(x, host, f, ...)      a task on host `host` (>= 1; host 0 is the local pool)
 *   core.map(x, f, xs, spec)          a map dealt out across every host, rank 0 included
 *
 * The tier itself (dealing, placing results, shipping code and large values, tasks) is
 * engine/cluster/deal.c, language-neutral; this file is the Lua side of rank 0: it stages tasks
 * and maps as for a local pool (lcodec_encode_task, lmap_stage), hands them to deal.c, and turns
 * what deal.c collected into Lua values and error objects. Everything here runs on the Lua
 * state's thread; a task's or map's state is deal.c's C memory, reachable from the Lua object.
 */
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "larray.h"
#include "cluster.h"
#include "lsuiro.h"
#include "lvalues.h"

#define R cluster_r0
#define node_name cluster_node_name

static const char key_xpool, key_xtask, key_xmap;

/* The suiro command turns a signal into a Lua error with a hook that fires at the next call or
 * return: after this wait raised its own message, that hook would raise a bare "terminated" as
 * pcall returns, which no script can catch. The message here is the one to see: the hook goes. */
static void drop_signal_hook(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  if (main) lua_sethook(main, NULL, 0, 0);
  lua_sethook(L, NULL, 0, 0);
}

static int interrupted(lua_State *L) {
  if (lpool_signal == SIGTERM && R.size > 1) {
    drop_signal_hook(L);
    luaL_error(L, "terminated: Open MPI is ending the job (a rank exited or was killed, or mpirun was stopped; "
                  "Open MPI 4.1 ends every rank when one dies)");
  }
  if (lpool_signal) luaL_error(L, "%s", lpool_signal == SIGTERM ? "terminated" : "interrupted!");
  return 0;
}

static void pump(lua_State *L) {
  (void)L;
  cluster_pump();
}

/* Sleeps until something arrives (cluster_sleep), then raises if a signal came. */
static void sleep_events(lua_State *L, double timeout) {
  cluster_sleep(timeout);
  interrupted(L);
}

/* ---- tasks ---------------------------------------------------------------------------------- */

typedef struct ltaskx { xtask *t; int state; } ltaskx; /* the Lua object: 0 pending, 1 collected, 2 released */

/* ---- pools ------------------------------------------------------------------------------------ */

typedef struct lxpool { xpool *x; } lxpool;

static xpool *check_xpool(lua_State *L, int idx) {
  lxpool *u = lsuiro_checkud(L, idx, &key_xpool, "suiro.mpi_pool");
  if (!u->x) luaL_error(L, "this MPI pool was stopped");
  return u->x;
}

/* core.pool_new(local_pool, options_wire, start_timeout) -> xpool: the same pool on every host */
static int l_pool_new(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  size_t olen;
  const char *opts = luaL_checklstring(L, 2, &olen);
  double timeout = luaL_optnumber(L, 3, 10);
  lxpool *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->x = NULL;
  lsuiro_setmt(L, &key_xpool);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the local pool lives as long as this */
  char err[700];
  xpool *x = cluster_pool_new(&lp->p, &lp->default_timeout, opts, olen, timeout, err, sizeof err);
  if (!x) {
    interrupted(L);
    return luaL_error(L, "suiro.pool: %s", err);
  }
  u->x = x;
  return 1;
}

static int l_pool_stop(lua_State *L) {
  lxpool *u = lsuiro_checkud(L, 1, &key_xpool, "suiro.mpi_pool");
  if (u->x) cluster_pool_close(u->x);
  return 0;
}

/* core.place(x) -> the host of the next task: round robin over the hosts whose pool started. */
static int l_place(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  int h = (int)(x->rr++ % (uint64_t)x->nranks);
  lua_pushinteger(L, h);
  return 1;
}

/* ---- remote tasks ------------------------------------------------------------------------------ */

static ltaskx *check_xtask(lua_State *L, int idx) { return lsuiro_checkud(L, idx, &key_xtask, "suiro.task"); }

/* core.submit(x, host, f, ...) -> a task running on host `host` */
static int l_submit(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  lua_Integer host = luaL_checkinteger(L, 2);
  if (host < 1 || host >= x->nranks) return luaL_error(L, "pool:submit: no host %I", host);
  if (x->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  int n = lua_gettop(L) - 3;
  if (n < 0) return luaL_error(L, "pool:submit: argument 1 must be a function or call spec, got no value");
  lua_getiuservalue(L, 1, 1); /* the local pool, where functions are published */
  lpool *lp = lpool_check(L, -1);
  lua_pop(L, 1);
  _Alignas(8) unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  lcodec_ctx c = { .L = L, .pool = lp, .verb = "submit" };
  lcodec_encode_task(&c, 3, 4, n, &w);
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    wire_writer_free(&w);
    return luaL_error(L, "pool:submit: %s", wire_writer_error(&w));
  }
  char err[400];
  xtask *t = cluster_submit(x, (int)host, buf, len, err, sizeof err);
  if (!t) {
    suiro_zc_revoke(buf, len);
    wire_writer_free(&w);
    return luaL_error(L, "pool:submit: %s", err);
  }
  wire_writer_free(&w);
  ltaskx *k = lua_newuserdatauv(L, sizeof *k, 1);
  k->t = t;
  k->state = 0;
  lsuiro_setmt(L, &key_xtask);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

static int push_task_result(lua_State *L, xtask *t) {
  suiro_result r = { .kind = t->kind, .data = t->data, .len = t->len, .worker_slot = t->slot, .worker_pid = t->pid };
  if (r.kind == SUIRO_RESULT_VALUE) {
    int top = lua_gettop(L);
    lcodec_decode_values(L, r.data, r.len);
    return lua_gettop(L) - top;
  }
  lerror_push_result(L, &r, 0);
  return lerror_raise(L);
}

/* task:collect([timeout]) */
static int l_task_collect(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state == 1) return luaL_error(L, "task:collect: this task was collected already");
  if (k->state == 2) return luaL_error(L, "task:collect: this task was released");
  xtask *t = k->t;
  double timeout = lua_isnoneornil(L, 2) ? *t->pool->default_timeout : lpool_seconds(L, 2, "task:collect", "timeout");
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  for (;;) {
    pump(L);
    if (t->arrived) break;
    if (t->closed) {
      lua_pushnil(L);
      lua_pushliteral(L, "closed");
      return 2;
    }
    if (R.lost[0]) { /* class host_lost, as the maps' */
      char text[800];
      int n = snprintf(text, sizeof text, "host %s (rank %d): %s", node_name(t->host), t->host, R.lost);
      lerror_push(L, "host_lost", 9, text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, "", 0, -1);
      return lua_error(L);
    }
    double left = deadline - suiro_now();
    if (left <= 0) {
      lua_pushnil(L);
      lua_pushliteral(L, "timeout");
      return 2;
    }
    sleep_events(L, left);
  }
  k->state = 1;
  k->t = NULL;
  lua_settop(L, 0);
  /* decode from a Lua-owned copy, so the C state is freed even when decoding raises */
  lbuf *keep = lbuf_push(L);
  lbuf_put(L, keep, t->data ? (const void *)t->data : "", t->len);
  xtask copy = *t;
  copy.data = keep->len ? keep->p : (unsigned char *)""; /* an empty result: no NULL for the decoder */
  cluster_task_free(t);
  int base = lua_gettop(L);
  int n = push_task_result(L, &copy);
  lua_remove(L, base);
  return n;
}

static int l_task_ready(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  pump(L);
  lua_pushboolean(L, k->t->arrived || k->t->closed);
  return 1;
}

static int l_task_cancel(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0 || k->t->arrived || k->t->closed) {
    lua_pushboolean(L, 0);
    return 1;
  }
  int ok = cluster_task_cancel(k->t);
  interrupted(L);
  lua_pushboolean(L, ok);
  return 1;
}

static int l_task_kill(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) return luaL_error(L, "task:kill: this task was %s already", k->state == 1 ? "collected" : "released");
  if (k->t->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  cluster_task_kill(k->t);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_task_gc(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) return 0;
  k->state = 2;
  xtask *t = k->t;
  k->t = NULL;
  if (t->arrived || t->closed || R.exited) cluster_task_free(t);
  else t->released = 1; /* freed when its result arrives */
  return 0;
}

static int l_task_tostring(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  static const char *states[] = { "pending", "collected", "released" };
  if (k->t) lua_pushfstring(L, "suiro.task(%p, %s, host %s)", (void *)k, states[k->state], node_name(k->t->host));
  else lua_pushfstring(L, "suiro.task(%p, %s)", (void *)k, states[k->state]);
  return 1;
}

/* core.task_host(task) -> the rank running it (nil: not a remote task) */
static int l_task_host(lua_State *L) {
  ltaskx *k = lsuiro_testud(L, 1, &key_xtask);
  if (!k || !k->t) lua_pushnil(L);
  else lua_pushinteger(L, k->t->host);
  return 1;
}

/* core.wait(timeout): pumps once and sleeps until something arrives (collect_any / collect_all) */
static int l_wait(lua_State *L) {
  double t = luaL_optnumber(L, 1, 0.1);
  pump(L);
  if (t > 0) sleep_events(L, t);
  if (R.lost[0]) return luaL_error(L, "%s", R.lost);
  return 0;
}

/* ---- maps ---------------------------------------------------------------------------------------- */

typedef struct lxmap { xmap *x; int collected; uint64_t n; } lxmap;

static lxmap *check_xmap(lua_State *L, int idx) { return lsuiro_checkud(L, idx, &key_xmap, "suiro.map"); }

/* core.map(x, f, xs, spec) -> a map running on every host */
static int l_map(lua_State *L) {
  xpool *xp = check_xpool(L, 1);
  if (xp->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  lua_getiuservalue(L, 1, 1); /* the local pool */
  lpool *lp = lpool_check(L, -1);
  lua_pop(L, 1);
  suiro_plan_spec s;
  lmap_stage(L, lp, &s); /* stack: x f xs spec | fn, staged input */
  lxmap *u = lua_newuserdatauv(L, sizeof *u, 2);
  u->x = NULL;
  u->collected = 0;
  u->n = 0;
  lsuiro_setmt(L, &key_xmap);
  int self = lua_gettop(L);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, self, 1);
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, self, 2);
  suiro_template tpl;
  int has_tpl = 0;
  lua_getfield(L, 4, "template");
  if (!lua_isnil(L, -1)) {
    char err[256];
    if (lembed_template_read(L, -1, &tpl, err, sizeof err) != 0) return luaL_error(L, "pool:map: %s", err);
    has_tpl = 1;
  }
  lua_pop(L, 1);
  lua_getfield(L, 4, "seed");
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1)) return luaL_error(L, "pool:map: seed must be an integer, got %s", luaL_typename(L, -1));
    s.seeded = 1;
    s.seed = (uint64_t)lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  lua_getfield(L, 4, "stream");
  int stream = lua_toboolean(L, -1);
  lua_pop(L, 1);
  char err[400];
  xmap *x = cluster_map_new(xp, &s, has_tpl ? &tpl : NULL, stream, err, sizeof err);
  if (!x) return luaL_error(L, "pool:map: %s", err);
  u->x = x;
  u->n = s.n;
  lua_settop(L, self);
  return 1;
}

/* The timeout of a collect: the argument, else the map's timeout option, else the pool's. */
static double map_timeout(lua_State *L, int arg, xmap *x) {
  if (!lua_isnoneornil(L, arg)) return lpool_seconds(L, arg, "map:collect", "timeout");
  lua_getiuservalue(L, 1, 2);
  lua_getfield(L, -1, "timeout_s");
  double t = -1;
  if (!lua_isnil(L, -1)) t = lua_tonumber(L, -1) >= 1e12 ? -1 : lua_tonumber(L, -1);
  lua_pop(L, 2);
  if (t < 0 && x->pool) t = *x->pool->default_timeout;
  return t;
}

/* The progress option: called when the count changed, at most every 50 ms (and once at the end),
 * not on every wake of the wait (hundreds a second). */
static void draw_progress(lua_State *L, xmap *x, int self, int final) {
  uint64_t done = cluster_map_progress(x);
  if (cluster_progress_due(x, done, final)) lmap_progress(L, self, done, x->n, x->t0, &x->last_draw, x->nodes, final);
}

/* Waits for the map to end: 1 done, 0 on timeout (it keeps running), -1 when its pool stopped. */
static int wait_map(lua_State *L, xmap *x, int self, double timeout) {
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  lua_getiuservalue(L, self, 2);
  lua_getfield(L, -1, "progress");
  int progress = lua_toboolean(L, -1);
  lua_pop(L, 2);
  for (;;) {
    pump(L);
    if (x->closed) return -1;
    if (x->finished) break;
    double left = deadline - suiro_now();
    if (left <= 0) return 0;
    sleep_events(L, progress && left > 0.1 ? 0.1 : left);
    if (progress) draw_progress(L, x, self, 0);
  }
  if (progress) draw_progress(L, x, self, 1);
  return 1;
}

static void raise_failure(lua_State *L, xmap *x) {
  if (!x->fail.kind) return;
  suiro_error_info e;
  memset(&e, 0, sizeof e);
  e.cls = (wire_str){ x->fail.cls, strlen(x->fail.cls) };
  e.message = (wire_str){ x->fail.msg ? x->fail.msg : "", x->fail.msg ? strlen(x->fail.msg) : 0 };
  e.traceback = (wire_str){ x->fail.tb ? x->fail.tb : "", x->fail.tb ? strlen(x->fail.tb) : 0 };
  e.index = x->fail.index;
  e.slot = x->fail.slot;
  e.pid = x->fail.pid;
  lerror_push_info(L, &e);
  lua_error(L);
}

/* Element i's result (what a local map's results() hands out). */
static void push_element(lua_State *L, xmap *x, uint64_t i) {
  if (x->pw.has_tpl) {
    const suiro_template *t = &x->pw.tpl;
    if (t->kind == SUIRO_OUT_RECORD) {
      lua_createtable(L, 0, t->nfields);
      for (int k = 0; k < t->nfields; k++) {
        size_t es = wire_type_size(t->fields[k].type);
        lmap_push_cell(L, t->fields[k].type, x->out + x->col_off[k] + (size_t)i * es);
        lua_setfield(L, -2, t->fields[k].name);
      }
      return;
    }
    size_t es = wire_type_size(t->type);
    const unsigned char *cell = x->out + (size_t)i * (size_t)x->width * es;
    if (t->kind == SUIRO_OUT_ARRAY) {
      larray *a = larray_new_raw(L, t->type, (int64_t)x->width);
      memcpy(a->data, cell, larray_bytes(a));
      if (t->ndim > 1) {
        a->nd = 1;
        a->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) a->shape[k] = (int64_t)t->shape[k];
      }
      return;
    }
    lmap_push_cell(L, t->type, cell);
    return;
  }
  if (!x->slots[i].p || x->slots[i].len == 0) {
    lua_pushnil(L);
    return;
  }
  int top = lua_gettop(L);
  int n = lcodec_decode_values(L, x->slots[i].p, (size_t)x->slots[i].len);
  if (n == 0) lua_pushnil(L);
  lua_settop(L, top + 1);
}

static const void *out_column(void *ud, int k) {
  xmap *x = ud;
  const suiro_template *t = &x->pw.tpl;
  return t->kind == SUIRO_OUT_RECORD ? x->out + x->col_off[k] : x->out;
}
static void out_element(lua_State *L, void *ud, uint64_t i) { push_element(L, ud, i); }

/* The results in the shape the template asks for, as a local map gives them. */
static void push_results(lua_State *L, xmap *x) {
  lmap_push_results(L, x->pw.has_tpl ? &x->pw.tpl : NULL, x->n, out_column, out_element, x);
}

/* m:collect([timeout]) -> results | nil, "timeout" | nil, "closed" */
static int l_map_collect(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->collected) return luaL_error(L, "map:collect: the results were collected already");
  xmap *x = u->x;
  if (!x) return luaL_error(L, "map:collect: this map was freed");
  if (x->closed) return lmap_push_closed(L);
  int w = wait_map(L, x, 1, map_timeout(L, 2, x));
  if (w < 0) return lmap_push_closed(L);
  if (w == 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "timeout");
    return 2;
  }
  u->collected = 1;
  raise_failure(L, x);
  push_results(L, x);
  cluster_map_free(x); /* the results are copies */
  u->x = NULL;
  return 1;
}

static int l_map_cancel(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  int running = x && !x->finished && !x->closed;
  if (running) {
    char text[160];
    pump(L);
    snprintf(text, sizeof text, "the map was cancelled with %llu of %llu elements done", (unsigned long long)x->done,
             (unsigned long long)x->n);
    x->user_cancel = 1;
    cluster_map_fail(x, SUIRO_RESULT_CANCELLED, SUIRO_CLASS_CANCELLED, text, 1);
  }
  lua_pushboolean(L, running);
  return 1;
}

static int l_map_kill(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x && x->closed) return lmap_push_closed(L);
  int running = x && !x->finished;
  if (running) {
    const char *text = "the map was killed (map:kill()); its workers were replaced";
    x->killed = 1;
    cluster_map_fail(x, SUIRO_RESULT_CANCELLED, SUIRO_CLASS_CANCELLED, text, 2);
  }
  lua_pushboolean(L, running);
  return 1;
}

static int l_map_ready(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x) pump(L);
  lua_pushboolean(L, !x || x->finished || x->closed);
  return 1;
}

static int l_map_progress(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x) pump(L);
  lua_Integer n = (lua_Integer)u->n, done = x ? (lua_Integer)cluster_map_progress(x) : u->collected ? (lua_Integer)u->n : 0;
  lua_pushinteger(L, done);
  lua_pushinteger(L, n);
  return 2;
}

/* results() step: (i, value) in completion order (streamed maps) or index order. Upvalues: the
 * map, then the range being handed out (b, e) and the next index. */
static int l_map_next(lua_State *L) {
  lxmap *u = check_xmap(L, lua_upvalueindex(1));
  xmap *x = u->x;
  lua_Integer b = lua_tointeger(L, lua_upvalueindex(2)), e = lua_tointeger(L, lua_upvalueindex(3));
  for (;;) {
    if (!x) return luaL_error(L, "map:results: this map was freed");
    if (x->closed) return luaL_error(L, "map:results: the map's pool was stopped");
    if (b < e) {
      lua_pushinteger(L, b + 1);
      lua_replace(L, lua_upvalueindex(2));
      lua_pushinteger(L, b + 1);
      push_element(L, x, (uint64_t)b);
      return 2;
    }
    if (!x->stream) {
      if (lua_toboolean(L, lua_upvalueindex(4))) return 0; /* handed out */
      int w = wait_map(L, x, lua_upvalueindex(1), -1);
      if (w < 0) return luaL_error(L, "map:results: the map's pool was stopped");
      raise_failure(L, x);
      b = 0;
      e = (lua_Integer)x->n;
      lua_pushboolean(L, 1);
      lua_replace(L, lua_upvalueindex(4));
    } else if (x->next_range < x->nranges) {
      b = (lua_Integer)x->ranges[x->next_range].b;
      e = (lua_Integer)x->ranges[x->next_range].e;
      x->next_range++;
    } else if (x->finished) {
      raise_failure(L, x);
      return 0;
    } else {
      sleep_events(L, 0.1);
      pump(L);
      continue;
    }
    lua_pushinteger(L, b);
    lua_replace(L, lua_upvalueindex(2));
    lua_pushinteger(L, e);
    lua_replace(L, lua_upvalueindex(3));
  }
}

static int l_map_results(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->collected) return luaL_error(L, "map:results: the results were collected already");
  if (!u->x) return luaL_error(L, "map:results: this map was freed");
  if (u->x->closed) return luaL_error(L, "map:results: the map's pool was stopped");
  u->collected = 1;
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  lua_pushinteger(L, 0);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, l_map_next, 4);
  return 1;
}

static int l_map_gc(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->x) cluster_map_free(u->x); /* a map still running is cancelled; its local ranges are waited for */
  u->x = NULL;
  return 0;
}

static int l_map_tostring(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (!x) lua_pushfstring(L, "suiro.map(%s)", u->collected ? "collected" : "freed");
  else
    lua_pushfstring(L, "suiro.map(%I elements, %s, %d hosts)", (lua_Integer)x->n,
                    x->closed ? "closed" : x->finished ? "finished" : "running", x->nodes);
  return 1;
}

/* ---- status ------------------------------------------------------------------------------------ */

/* core.status(x) -> { { rank =, host =, status = (pool:status() there), sent =, received = }, ... }
 * for ranks 1..K-1 (rank 0's is the local pool's) */
static int l_status(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  lua_createtable(L, x->nranks > 1 ? x->nranks - 1 : 0, 0);
  int out = lua_gettop(L);
  if (x->nranks < 2) return 1;
  for (int r = 1; r < x->nranks; r++) free(x->status ? x->status[r] : NULL);
  free(x->status);
  x->status = calloc((size_t)x->nranks, sizeof *x->status);
  if (!x->status) return luaL_error(L, "pool:status: out of memory");
  x->status_req = ++R.next_req;
  x->status_left = 0;
  for (int r = 1; r < x->nranks; r++) {
    if (x->nodes[r].up != 1) continue;
    msg *m = msg_new(MSG_STATUS, 0);
    if (!m) continue;
    m->h.pool = x->id;
    m->h.id = x->status_req;
    comm_send(r, m);
    x->status_left++;
  }
  double deadline = suiro_now() + 10;
  while (x->status_left > 0 && !R.lost[0] && suiro_now() < deadline) {
    pump(L);
    if (x->status_left > 0) sleep_events(L, 0.05);
  }
  for (int r = 1; r < x->nranks; r++) {
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, r);
    lua_setfield(L, -2, "rank");
    lua_pushstring(L, node_name(r));
    lua_setfield(L, -2, "host");
    lua_pushinteger(L, R.pids[r]);
    lua_setfield(L, -2, "pid");
    lua_pushinteger(L, R.cpus[r]);
    lua_setfield(L, -2, "cpus");
    uint64_t sent, recvd;
    comm_traffic(r, &sent, &recvd);
    lua_pushinteger(L, (lua_Integer)sent);
    lua_setfield(L, -2, "bytes_sent");
    lua_pushinteger(L, (lua_Integer)recvd);
    lua_setfield(L, -2, "bytes_received");
    msg *m = x->status[r];
    if (m && m->h.len) {
      int top = lua_gettop(L);
      if (lcodec_decode_values(L, msg_payload(m), (size_t)m->h.len) >= 1) {
        lua_settop(L, top + 1);
        lua_setfield(L, -2, "status");
      } else {
        lua_settop(L, top);
      }
    } else if (x->nodes[r].up != 1) {
      lua_pushstring(L, x->nodes[r].err[0] ? x->nodes[r].err : "its pool did not start");
      lua_setfield(L, -2, "error");
    } else {
      lua_pushliteral(L, "no answer within 10 s");
      lua_setfield(L, -2, "error");
    }
    lua_rawseti(L, out, r);
    free(m);
    x->status[r] = NULL;
  }
  return 1;
}

/* ---- the module -------------------------------------------------------------------------------- */

/* core.start() -> rank, size, host: MPI comes up (once); rank 0 waits for every host's hello */
static void shutdown_all(void) { cluster_shutdown(lpool_signal != 0); }

static int l_start(lua_State *L) {
  if (!R.started) {
    static int registered;
    if (!registered) atexit(shutdown_all); /* os.exit() without closing the state still ends the job cleanly */
    registered = 1;
    char err[700];
    if (cluster_start(&lpool_signal, err, sizeof err) != 0) {
      interrupted(L);
      return luaL_error(L, "suiro.mpi: %s", err);
    }
  }
  lua_pushinteger(L, R.rank);
  lua_pushinteger(L, R.size);
  lua_pushstring(L, comm_host());
  return 3;
}

/* core.serve() -> ok, lost message or nil, signal: ranks 1..K-1 until rank 0 ends the job (the
 * serving loop is C only, engine/cluster/serve.c: no Lua runs from here on) */
static int l_serve(lua_State *L) {
  if (!R.started) return luaL_error(L, "suiro.mpi: serve before start");
  int rc = cluster_serve(&lpool_signal);
  if (lpool_signal) drop_signal_hook(L); /* serve() ends quietly on a signal (suiro/mpi.lua) */
  R.exited = 1;
  comm_stop(8, lpool_signal != 0); /* bounded: the job ends within seconds even when a rank hangs (cluster.h) */
  lua_pushboolean(L, rc == 0);
  if (comm_lost()) lua_pushstring(L, comm_lost());
  else lua_pushnil(L);
  lua_pushinteger(L, lpool_signal);
  return 3;
}

static int l_shutdown(lua_State *L) {
  (void)L;
  shutdown_all();
  return 0;
}

/* core.cpus() -> the CPUs this process's workers may use */
static int l_cpus(lua_State *L) {
  lua_pushinteger(L, cluster_cpus());
  return 1;
}

/* core.nodes() -> { [rank] = host name } (0-based ranks as integer keys) */
static int l_hosts(lua_State *L) {
  if (R.started) pump(L);
  lua_createtable(L, 0, R.size);
  for (int r = 0; r < R.size; r++) {
    lua_pushstring(L, node_name(r));
    lua_rawseti(L, -2, r);
  }
  return 1;
}

/* core.version() -> the MPI library's version line ("Open MPI v4.1.4, ..."), once started */
static int l_version(lua_State *L) {
  lua_pushstring(L, comm_version());
  return 1;
}

int luaopen_suiro_mpi(lua_State *L) {
  static const luaL_Reg task_methods[] = {
    { "collect", l_task_collect }, { "ready", l_task_ready }, { "cancel", l_task_cancel },
    { "kill", l_task_kill },       { "release", l_task_gc },  { NULL, NULL },
  };
  static const luaL_Reg map_methods[] = {
    { "collect", l_map_collect },   { "cancel", l_map_cancel },   { "kill", l_map_kill },
    { "ready", l_map_ready },       { "progress", l_map_progress }, { "results", l_map_results },
    { "free", l_map_gc },           { NULL, NULL },
  };
  static const luaL_Reg funcs[] = {
    { "start", l_start },   { "serve", l_serve },     { "shutdown", l_shutdown }, { "hosts", l_hosts },
    { "pool_new", l_pool_new }, { "pool_stop", l_pool_stop }, { "place", l_place }, { "submit", l_submit },
    { "map", l_map },       { "status", l_status },   { "wait", l_wait },         { "task_host", l_task_host },
    { "version", l_version }, { "cpus", l_cpus }, { NULL, NULL },
  };
  lsuiro_newmt(L, "suiro.mpi_pool", &key_xpool);
  lua_pushcfunction(L, l_pool_stop);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.mpi_task", &key_xtask);
  luaL_newlib(L, task_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_task_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_task_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.mpi_map", &key_xmap);
  luaL_newlib(L, map_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, l_map_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  luaL_getmetatable(L, "suiro.mpi_task");
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "task_methods");
  lua_pop(L, 1);
  luaL_getmetatable(L, "suiro.mpi_map");
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "map_methods");
  lua_pop(L, 1);
  return 1;
}
