/*
 * ltask.c — suiro.core: tasks for Lua: submit and submit_batch, task:collect/ready/cancel/kill,
 * and pool:collect_all / collect_any over lists of tasks.
 *
 * A task userdata keeps its pool alive through its user value (the pool, or the guard holding
 * it), so a pool is never collected while one of its tasks can still be collected; a task
 * dropped uncollected is released (its result slot recycled) by its guard's finalizer or its own
 * __gc. A failed task raises an error object (lerror.c). Task states belong to the lua_State
 * that made them: no other thread touches them.
 */
#include <string.h>

#include "lsuiro.h"

const char lsuiro_key_task;

/* Tasks of a batch have their own metatable, without __gc (see submit_batch): both are tasks. */
static const char key_batch_task, key_batch_guard;

/* The pool and task methods carry the three metatables as upvalues (ltask_open), so the hot paths
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

static lpool *pool_arg(lua_State *L, int idx) {
  lpool *lp = lua_touserdata(L, idx);
  if (lp && has_mt_upvalues(L) && has_up_mt(L, idx, UP_POOL_MT)) {
    if (lp->closed || !lp->p) luaL_error(L, "the pool is stopped");
    return lp;
  }
  return lpool_check(L, idx); /* the registry, and its error message */
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

/* Pushes a task's values, or raises its error object. */
static int push_result(lua_State *L, const suiro_result *r, int index) {
  if (r->kind == SUIRO_RESULT_VALUE) return lcodec_decode_values(L, r->data, r->len);
  lerror_push_result(L, r, index);
  return lerror_raise(L);
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
  _Alignas(8) unsigned char stack[512];
  suiro_msg m; /* sent, or freed (its grants given back) on every way out below */
  suiro_msg_init(&m, stack, sizeof stack);
  lcodec_ctx c = { .L = L, .pool = lp, .verb = "submit", .msg = &m };
  lcodec_encode_task(&c, 2, 3, n, suiro_msg_writer(&m));
  const void *buf;
  size_t len;
  if (suiro_msg_finish(&m, &buf, &len) != 0) {
    lua_pushfstring(L, "pool:submit: %s", wire_writer_error(suiro_msg_writer(&m)));
    suiro_msg_free(&m);
    return lua_error(L);
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
  if (st != SUIRO_OK) {
    suiro_msg_free(&m); /* never sent: the grants of its shared arrays go back */
    return lpool_push_outcome(L, st, "pool:submit");
  }
  suiro_msg_sent(&m);
  push_task(L, 1, t);
  return 1;
}

/* pool:submit_batch(f, { {args...}, {args...}, ... }) -> { task, ... }
 * Every task is encoded first, then all go to the engine in one batch (one publication and one
 * wake decision per run of free ring entries). If the ring stays full past the pool's timeout,
 * returns the tasks that went in and "timeout" (or "full"). */
/* What a batch has handed over so far, for a way out by error (a to-be-closed value: an error
 * while encoding list i unwinds through it at once): the encoded lists not yet submitted give
 * their shared arrays' grants and their endpoints back, and the tasks already submitted are
 * released, since no task object will name them (their result slots would stay held). */
static const char key_batch_run;
typedef struct batch_run {
  lpool *lp;
  lbuf *bytes;
  size_t *offs;       /* offs[k]: where list k starts in bytes (lists from..encoded-1 are there) */
  suiro_task *tasks;  /* tasks[0..accepted-1] went to the engine */
  size_t from, encoded, accepted;
  int done;           /* handed over: the task objects own what went */
} batch_run;

static int batch_run_close(lua_State *L) {
  batch_run *r = lua_touserdata(L, 1);
  if (!r || r->done) return 0;
  r->done = 1;
  for (size_t k = r->from; k < r->encoded; k++) {
    size_t end = k + 1 < r->encoded ? r->offs[k + 1] : r->bytes->len;
    suiro_zc_revoke(r->bytes->p + r->offs[k], end - r->offs[k]);
  }
  if (r->lp->p && !r->lp->closed)
    for (size_t k = 0; k < r->accepted; k++) suiro_task_release(r->lp->p, r->tasks[k]);
  return 0;
}

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
  batch_run *run = lua_newuserdatauv(L, sizeof *run, 0);
  *run = (batch_run){ .lp = lp, .bytes = bytes, .offs = offs, .tasks = tasks };
  lsuiro_setmt(L, &key_batch_run);
  lua_toclose(L, -1);
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
    run->encoded = (size_t)i;
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
      run->accepted = accepted;
      if (st != SUIRO_OK) { /* the run's tasks not taken never go: their shared arrays' grants go back */
        for (size_t k = accepted; k < upto; k++) suiro_zc_revoke(bytes->p + offs[k], offs[k + 1] - offs[k]);
        run->from = run->encoded = upto;
        break;
      }
      from = run->from = upto;
      bytes->len = 0; /* the engine copied them */
    }
  }
  if (st == SUIRO_ERR && accepted == 0) return luaL_error(L, "pool:submit_batch: %s", suiro_last_error());
  run->done = 1; /* from here the task objects (and their guard) own what went */
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
  if (st != SUIRO_OK) return lpool_push_outcome(L, st, "task:collect");
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
  if (st != SUIRO_OK) return lpool_push_outcome(L, st, "pool:collect_all");
  if (!return_errors)
    for (lua_Integer i = 0; i < n; i++) {
      int kind = suiro_task_kind(lp->p, ts[i]);
      if (kind == SUIRO_RESULT_VALUE) continue;
      /* the first failure is delivered (that task is collected: its error is its result); every
       * other task stays collectable */
      suiro_result r;
      st = suiro_collect(lp->p, ts[i], &r, 0);
      if (st != SUIRO_OK) return lpool_push_outcome(L, st, "pool:collect_all");
      *ks[i]->state = 1;
      lerror_push_result(L, &r, (int)i + 1);
      return lerror_raise(L);
    }
  lua_createtable(L, (int)n, 0);
  int out = lua_gettop(L);
  for (lua_Integer i = 0; i < n; i++) {
    suiro_result r;
    st = suiro_collect(lp->p, ts[i], &r, 0);
    if (st != SUIRO_OK) return lpool_push_outcome(L, st, "pool:collect_all");
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
  if (st != SUIRO_OK) return lpool_push_outcome(L, st, "pool:collect_any");
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

/* core.task_pool(task or map) -> its pool: their first user value, or for a task with a guard
 * the guard's. */
static int l_task_pool(lua_State *L) {
  luaL_checktype(L, 1, LUA_TUSERDATA);
  lua_getiuservalue(L, 1, 1);
  if (lsuiro_testud(L, 1, &key_batch_task)) lua_getiuservalue(L, -1, 1);
  return 1;
}

/* The methods that make and collect tasks, in the pool's method table (ltask_open). */
const luaL_Reg ltask_pool_methods[] = {
  { "submit", l_submit },
  { "submit_batch", l_submit_batch },
  { "collect_all", l_collect_all },
  { "collect_any", l_collect_any },
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

const luaL_Reg ltask_funcs[] = {
  { "task_pool", l_task_pool },
  { NULL, NULL },
};

/* Registers the task metatables and the guard's, and the method tables of pools (pool_methods,
 * lpool.c's, with ltask_pool_methods) and of tasks, each function with the three metatables as
 * upvalues (UP_*). Expects the pool metatable on top, and pops it (lpool_open). */
void ltask_open(lua_State *L, const luaL_Reg *pool_methods) {
  static const luaL_Reg task_meta[] = { { "__gc", l_task_gc }, { "__tostring", l_task_tostring }, { NULL, NULL } };
  static const luaL_Reg batch_task_meta[] = { { "__tostring", l_task_tostring }, { NULL, NULL } };
  static const luaL_Reg guard_meta[] = { { "__gc", batch_guard_gc }, { NULL, NULL } };
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
  const luaL_Reg *const fns[2][2] = { { pool_methods, ltask_pool_methods }, { task_methods, NULL } };
  static const char *const names[2] = { "suiro.pool_methods", "suiro.task_methods" };
  for (int i = 0; i < 2; i++) {
    lua_newtable(L);
    for (int f = 0; f < 2 && fns[i][f]; f++) {
      for (int up = 0; up < 3; up++) lua_pushvalue(L, pool_mt + up);
      lua_pushlightuserdata(L, (void *)&key_upvalues);
      luaL_setfuncs(L, fns[i][f], N_UPVALUES);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, names[i]);
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
  lua_newtable(L); /* a batch in the making (batch_run) */
  lua_pushcfunction(L, batch_run_close);
  lua_setfield(L, -2, "__close");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_batch_run);
}
