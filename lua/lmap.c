/*
 * lmap.c — pool:map for Lua: stage a function and its input once in a map region, let one
 * runner per worker claim ranges of elements (engine/src/map.c), assemble the results.
 *
 *   local m = pool:map(f, xs, { template = "f64", seed = 42, stream = false })
 *   m:collect([timeout]), m:cancel(), m:results(), m:progress(), m:ready()
 *   local pm = pool:map_prepare(f, xs, opts); pm:run([new_xs])
 *
 * Inputs: a suiro.array (elements are numbers), a suiro.range (lrange.c, never materialised) or a Lua
 * table of any values that cross (each element encoded on its own so a runner decodes only its
 * elements). Results: a typed output area for templates ("f64" -> suiro.array, "f64[3]" -> an
 * n x 3 array, "{a: f64, b: i32}" -> columns), else one encoded value per element.
 * Both sides live here: the host stages and collects, the runner (in a worker, lmap_exec_runner)
 * claims ranges, calls the function on each element and stores its result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"
#include "suiro_face.h"

const char lmap_key_map;

typedef struct lmap {
  suiro_map *m;
  uint64_t n;
  int started;      /* a run is in flight */
  int finished;     /* the last run ended (its results are there to collect) */
  int collected;    /* its results were handed out (a plain map runs once) */
  int closed;       /* its pool was stopped */
  int prepared;
  int stream;
  int has_tpl;
  int in_kind, in_type;
  uint64_t next_i;  /* results(): next index of a non-streamed map */
  uint64_t range_b, range_e; /* results(): the range being handed out */
  double t0;
  double last_draw;
  suiro_template tpl;
} lmap;

/* ---- staging ---------------------------------------------------------------------------------- */

static lmap *checkmap(lua_State *L, int i) { return lsuiro_checkud(L, i, &lmap_key_map, "suiro.map"); }

/* Encodes the value at idx as a stand-alone wire buffer (a list of one) into g. */
static void encode_one(lcodec_ctx *c, int idx, lbuf *g) {
  _Alignas(8) unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  lcodec_encode_values(c, idx, 1, &w);
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    wire_writer_free(&w);
    luaL_error(c->L, "%s: %s", c->verb, wire_writer_error(&w));
  }
  lbuf_put(c->L, g, buf, len);
  wire_writer_free(&w);
}


/* The staged input (suiro_face.h section 7) lives in a userdata, so a raise while an element is
 * encoded (a value that cannot cross) leaves nothing behind: the collector frees it. */
static const char stage_key;

static int stage_gc(lua_State *L) {
  suiro_stage_free(lua_touserdata(L, 1));
  return 0;
}

static suiro_stage *stage_push(lua_State *L) {
  suiro_stage *st = lua_newuserdatauv(L, sizeof *st, 0);
  suiro_stage_init(st);
  lsuiro_setmt(L, &stage_key); /* lmap_open */
  return st;
}

typedef struct stage_ud {
  lcodec_ctx *c;
  int t; /* the input table */
} stage_ud;

/* Elements i..i+count-1 (0-based) of the table as numbers: an integer stays an i64, a float an
 * f64; anything else stops the chunk. */
static uint64_t stage_num(void *ud, uint64_t i, uint64_t count, unsigned char *kinds, void *cells) {
  stage_ud *u = ud;
  lua_State *L = u->c->L;
  unsigned char *c = cells;
  for (uint64_t k = 0; k < count; k++) {
    if (lua_rawgeti(L, u->t, (lua_Integer)(i + k) + 1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return k;
    }
    if (lua_isinteger(L, -1)) {
      int64_t v = (int64_t)lua_tointeger(L, -1);
      memcpy(c + k * 8, &v, 8);
      kinds[k] = 'i';
    } else {
      double v = (double)lua_tonumber(L, -1);
      memcpy(c + k * 8, &v, 8);
      kinds[k] = 'f';
    }
    lua_pop(L, 1);
  }
  return count;
}

/* Element i encoded on its own; raises naming it (argument 2[i]) when it cannot cross. */
static int stage_put(void *ud, uint64_t i, suiro_msg *m) {
  stage_ud *u = ud;
  lua_State *L = u->c->L;
  lua_rawgeti(L, u->t, (lua_Integer)i + 1);
  u->c->list = (lua_Integer)i + 1;
  lcodec_encode_values(u->c, lua_gettop(L), 1, suiro_msg_writer(m));
  lua_pop(L, 1);
  return 0;
}

/* The element count of a table input: its n field (a table.pack table) or its length, checked. */
static uint64_t table_count(lua_State *L, int t) {
  lua_getfield(L, t, "n");
  lua_Integer n, len = (lua_Integer)lua_rawlen(L, t);
  if (lua_isnil(L, -1)) {
    n = len;
  } else {
    if (!lua_isinteger(L, -1))
      luaL_error(L, "pool:map: argument 2: field n must be an integer, got %s", luaL_typename(L, -1));
    n = lua_tointeger(L, -1);
    if (n < 0 || n < len || n - len > ((lua_Integer)1 << 24))
      luaL_error(L, "pool:map: argument 2: field n = %I does not describe a list of %I elements", n, len);
  }
  lua_pop(L, 1);
  /* a list: keys 1..n (and n itself); a record here is a mistake */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int isn = lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "n");
    if (!isn && !(lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n)) {
      lua_pushvalue(L, -1);
      const char *k = luaL_tolstring(L, -1, NULL);
      luaL_error(L, "pool:map: argument 2 must be a list (keys 1..%I), has key %s", n, k);
    }
  }
  return (uint64_t)n;
}

/* Stages the function (argument 2) and input (argument 3) of core.map(pool, f, xs, spec) into s:
 * the part every map shares (the MPI tier's too, lua/lmpi.c). Pushes the function's lbuf and the
 * staged input (stack 5, 6) that hold the bytes s points to: keep them while s is in use. Raises
 * naming the argument. */
void lmap_stage(lua_State *L, lpool *lp, suiro_plan_spec *sp) {
  int ft = lua_type(L, 2);
  if (ft == LUA_TTABLE && lsuiro_is(L, 2, &lsuiro_key_call))
    luaL_error(L, "pool:map: argument 1 must be a function or a \"module.fn\" reference; a call spec "
                         "carries its own arguments (map over a function that calls it)");
  if (ft != LUA_TFUNCTION && ft != LUA_TSTRING)
    luaL_error(L, "pool:map: argument 1 must be a function or a \"module.fn\" reference, got %s",
                      luaL_typename(L, 2));
  if (ft == LUA_TFUNCTION) lpool_check_runs_lua(L, lp, "map");
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  larray *a = larray_test(L, 3);
  int64_t r_start = 0, r_step = 0; /* a suiro.range's (lrange.c) */
  uint64_t r_n = 0;
  int rg = !a && lrange_to(L, 3, &r_start, &r_step, &r_n);
  lcodec_ctx c = { .L = L, .pool = lp, .verb = "pool:map" };
  lbuf *fn = lbuf_push(L);            /* 5 */
  suiro_stage *stage = stage_push(L); /* 6 */
  if (ft == LUA_TSTRING) lfunc_check_ref(L, 2, "pool:map");
  encode_one(&c, 2, fn);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  s.fn = fn->p;
  s.fn_len = fn->len;
  if (a) {
    if (a->type == WIRE_T_C128) luaL_error(L, "pool:map: c128 arrays cannot be mapped over");
    if (larray_is_nd(a) && a->ndim != 1)
      luaL_error(L, "pool:map: map over a 1-d array (this one has %d dimensions)", a->ndim);
    if (!a->data && a->n) luaL_error(L, "pool:map: this array was released");
    s.in_kind = SUIRO_IN_ARRAY;
    s.in_type = a->type;
    s.n = (uint64_t)a->n;
    s.in_data = a->data;
  } else if (rg) {
    s.in_kind = SUIRO_IN_RANGE;
    s.start = r_start;
    s.step = r_step;
    s.n = r_n;
  } else if (lua_type(L, 3) == LUA_TTABLE) {
    uint64_t n = table_count(L, 3);
    s.n = n;
    stage_ud u = { &c, 3 };
    int k = suiro_stage_numbers(stage, &s, n, stage_num, &u);
    if (k < 0) luaL_error(L, "pool:map: argument 2: %s", suiro_last_error());
    if (k == 0) {
      c.element = 1; /* messages name the element: argument 2[i] */
      if (suiro_stage_values(stage, &s, n, stage_put, &u) != SUIRO_OK)
        luaL_error(L, "pool:map: argument 2: %s", suiro_last_error());
    }
  } else {
    luaL_error(L, "pool:map: argument 2 must be a table, a suiro.array or a suiro.range, got %s",
               luaL_typename(L, 3));
  }
  *sp = s;
}

/* core.map(pool, f, xs, spec) -> a map (started unless spec.prepare) */
static int l_map_new(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  suiro_plan_spec s;
  lmap_stage(L, lp, &s);
  lmap *lm = lua_newuserdatauv(L, sizeof *lm, 2);
  memset(lm, 0, sizeof *lm);
  lsuiro_setmt(L, &lmap_key_map);
  int self = lua_gettop(L);
  lua_getfield(L, 4, "template");
  if (!lua_isnil(L, -1)) {
    char err[256];
    if (lembed_template_read(L, -1, &lm->tpl, err, sizeof err) != 0) return luaL_error(L, "pool:map: %s", err);
    lm->has_tpl = 1;
    s.tpl = &lm->tpl;
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
  s.stream = lua_toboolean(L, -1);
  lua_getfield(L, 4, "prepare");
  int prepare = lua_toboolean(L, -1);
  lua_pop(L, 2);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, self, 1); /* the pool, kept alive by its map */
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, self, 2); /* the options (progress, timeout) */
  suiro_status st = suiro_plan_create(lp->p, &s, &lm->m);
  if (st != SUIRO_OK) {
    const char *msg = suiro_last_error();
    if (!strncmp(msg, "map: ", 5)) msg += 5;
    return luaL_error(L, "pool:map: %s", msg);
  }
  lm->n = s.n;
  lm->stream = s.stream;
  lm->prepared = prepare;
  lm->in_kind = s.in_kind;
  lm->in_type = s.in_type;
  if (!prepare) {
    st = suiro_map_start(lm->m, lp->default_timeout);
    if (st != SUIRO_OK) return luaL_error(L, "pool:map: %s", suiro_last_error());
    lm->started = 1;
    lm->t0 = suiro_now();
  }
  return 1;
}

/* ---- waiting and results ------------------------------------------------------------------------ */

static void push_element(lua_State *L, lmap *lm, uint64_t i);


/* A map's progress: the `progress` option of the map at `self` (its user value 2) is a function,
 * called with (done, n), or true for a bar on a terminal's stderr, redrawn at most every 100 ms.
 * `hosts` > 0 names the hosts in the final line (the MPI tier shares this). */
void lmap_progress(lua_State *L, int self, uint64_t done, uint64_t n, double t0, double *last_draw, int hosts,
                   int final) {
  lua_getiuservalue(L, self, 2);
  lua_getfield(L, -1, "progress");
  if (lua_isfunction(L, -1)) {
    lua_pushinteger(L, (lua_Integer)done);
    lua_pushinteger(L, (lua_Integer)n);
    lua_call(L, 2, 0);
    lua_pop(L, 1);
    return;
  }
  int want = lua_toboolean(L, -1);
  lua_pop(L, 2);
  if (!want || !isatty(2)) return;
  double now = suiro_now();
  if (!final && now - *last_draw < 0.1) return;
  *last_draw = now;
  double el = now - t0, rate = el > 0 ? (double)done / el : 0;
  double frac = n ? (double)done / (double)n : 1;
  char bar[31], where[32] = "";
  int fill = (int)(frac * 30);
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '-';
  bar[30] = 0;
  if (hosts > 0) snprintf(where, sizeof where, ", %d hosts", hosts);
  if (final)
    fprintf(stderr, "\r[%s] %3.0f%% %llu/%llu in %.1fs (%.0f/s%s)\033[K\n", bar, frac * 100,
            (unsigned long long)done, (unsigned long long)n, el, rate, where);
  else
    fprintf(stderr, "\r[%s] %3.0f%% %llu/%llu %.0f/s ETA %.1fs\033[K", bar, frac * 100, (unsigned long long)done,
            (unsigned long long)n, rate, rate > 0 ? (double)(n - done) / rate : 0.0);
  fflush(stderr);
}

static void draw_progress(lua_State *L, lmap *lm, int self, int final) {
  lmap_progress(L, self, suiro_map_done(lm->m), lm->n, lm->t0, &lm->last_draw, 0, final);
}

/* Waits for the run to end: 1 when done, 0 on timeout (the map keeps running: collect again
 * later), -1 when its pool was stopped under it. */
static int wait_run(lua_State *L, lmap *lm, int self, double timeout) {
  if (lm->closed) return -1;
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  lua_getiuservalue(L, self, 2);
  lua_getfield(L, -1, "progress");
  int progress = !lua_isnil(L, -1) && lua_toboolean(L, -1);
  lua_pop(L, 2);
  for (;;) {
    double left = deadline - suiro_now();
    double slice = progress ? 0.1 : left;
    if (slice > left) slice = left;
    if (slice < 0) slice = 0;
    suiro_status st = suiro_map_wait(lm->m, isinf(slice) ? -1 : slice);
    if (st == SUIRO_OK) break;
    if (st == SUIRO_CLOSED) {
      lm->closed = 1;
      lm->started = 0;
      return -1;
    }
    if (st != SUIRO_TIMEOUT) luaL_error(L, "map: %s", suiro_last_error());
    if (progress) draw_progress(L, lm, self, 0); /* may stop the pool: the next wait says so */
    if (lm->closed || !lm->m) return -1;
    if (suiro_now() >= deadline) return 0;
  }
  lm->started = 0;
  lm->finished = 1;
  if (progress) draw_progress(L, lm, self, 1);
  return 1;
}

/* Raises the map's failure, if any: an element that raised (with its index), a worker that died
 * (the element it ran, its slot and pid), a cancelled or killed map (class "cancelled"). */
static void raise_failure(lua_State *L, lmap *lm) {
  suiro_error_info e;
  if (!suiro_map_failure(lm->m, &e)) return;
  lerror_push_info(L, &e);
  lua_error(L);
}

/* Pushes one typed cell (the MPI tier's results use it too). */
void lmap_push_cell(lua_State *L, int type, const void *cell) {
  const char *p = cell;
  switch (type) {
  case WIRE_T_F64: { double v; memcpy(&v, p, 8); lua_pushnumber(L, v); return; }
  case WIRE_T_F32: { float v; memcpy(&v, p, 4); lua_pushnumber(L, v); return; }
  case WIRE_T_I64: { int64_t v; memcpy(&v, p, 8); lua_pushinteger(L, v); return; }
  case WIRE_T_I32: { int32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); return; }
  case WIRE_T_U8: lua_pushinteger(L, *(const uint8_t *)p); return;
  case WIRE_T_BOOL:
    if (*(const uint8_t *)p == WIRE_NA_BOOL) lvalues_push_na(L);
    else lua_pushboolean(L, *(const uint8_t *)p == 1);
    return;
  }
  lua_pushnil(L);
}

/* Cells per element of an ARRAY template. */
static uint64_t tpl_width(const suiro_template *t) {
  uint64_t w = 1;
  for (int k = 0; k < t->ndim; k++) w *= t->shape[k];
  return w;
}

/* Pushes a finished map's n results in the shape template t asks for (NULL: a table of values):
 * a scalar or array template gives one suiro.array (n x cell shape), a record template a frame,
 * from the typed cells col(ud, k) of field k (column 0 for scalars and arrays); untyped results
 * come element by element from elem (a table with n set when it has holes). The MPI tier, whose
 * cells live elsewhere, shares it. */
void lmap_push_results(lua_State *L, const suiro_template *t, uint64_t n, lmap_column_fn col, lmap_element_fn elem,
                       void *ud) {
  if (t && (t->kind == SUIRO_OUT_SCALAR || t->kind == SUIRO_OUT_ARRAY)) {
    uint64_t width = 1;
    if (t->kind == SUIRO_OUT_ARRAY)
      for (int k = 0; k < t->ndim; k++) width *= t->shape[k];
    larray *a = larray_new_raw(L, t->type, (int64_t)(n * width));
    if (n) memcpy(a->data, col(ud, 0), larray_bytes(a));
    if (t->kind == SUIRO_OUT_ARRAY) { /* n x cell shape */
      a->nd = 1;
      a->ndim = 1 + t->ndim;
      a->shape[0] = (int64_t)n;
      for (int k = 0; k < t->ndim; k++) a->shape[k + 1] = (int64_t)t->shape[k];
      if (t->ndim == 1) a->nd = 0;
    }
    return;
  }
  if (t) { /* RECORD: a suiro.frame, one column per field in the template's order */
    lframe_push(L, (int64_t)n);
    int f = lua_gettop(L);
    for (int k = 0; k < t->nfields; k++) {
      lua_pushstring(L, t->fields[k].name);
      larray *a = larray_new_raw(L, t->fields[k].type, (int64_t)n);
      if (n) memcpy(a->data, col(ud, k), larray_bytes(a));
      lframe_append(L, f);
    }
    return;
  }
  lua_createtable(L, n < (1u << 26) ? (int)n : 0, 0);
  int tt = lua_gettop(L);
  int holes = 0;
  for (uint64_t i = 0; i < n; i++) {
    elem(L, ud, i);
    if (lua_isnil(L, -1)) holes = 1;
    lua_rawseti(L, tt, (lua_Integer)i + 1);
  }
  if (holes) {
    lua_pushinteger(L, (lua_Integer)n);
    lua_setfield(L, tt, "n");
  }
}

static const void *plan_column(void *ud, int k) {
  lmap *lm = ud;
  uint64_t count;
  return suiro_plan_column(suiro_plan_of(lm->m), suiro_map_output(lm->m), k, &count);
}
static void plan_element(lua_State *L, void *ud, uint64_t i) { push_element(L, ud, i); }

/* Pushes the results of a finished map in the shape its template asks for. */
static void push_results(lua_State *L, lmap *lm) {
  if (!suiro_plan_of(lm->m)) luaL_error(L, "map: %s", suiro_last_error());
  lmap_push_results(L, lm->has_tpl ? &lm->tpl : NULL, lm->n, plan_column, plan_element, lm);
}

/* Pushes element i's result (any template). */
static void push_element(lua_State *L, lmap *lm, uint64_t i) {
  const suiro_template *t = lm->has_tpl ? &lm->tpl : NULL;
  if (t) {
    const suiro_plan *pl = suiro_plan_of(lm->m);
    if (!pl) luaL_error(L, "map: %s", suiro_last_error());
    void *out = suiro_map_output(lm->m);
    int type;
    if (t->kind == SUIRO_OUT_RECORD) {
      lua_createtable(L, 0, t->nfields);
      for (int k = 0; k < t->nfields; k++) {
        lmap_push_cell(L, t->fields[k].type, suiro_plan_cell(pl, out, i, k, &type));
        lua_setfield(L, -2, t->fields[k].name);
      }
      return;
    }
    const char *cell = suiro_plan_cell(pl, out, i, 0, &type);
    if (t->kind == SUIRO_OUT_ARRAY) {
      uint64_t w = tpl_width(t);
      larray *a = larray_new_raw(L, type, (int64_t)w);
      memcpy(a->data, cell, larray_bytes(a));
      if (t->ndim > 1) {
        a->nd = 1;
        a->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) a->shape[k] = (int64_t)t->shape[k];
      }
      return;
    }
    lmap_push_cell(L, type, cell);
    return;
  }
  const void *data;
  size_t len;
  if (!suiro_map_result(lm->m, i, &data, &len)) {
    lua_pushnil(L);
    return;
  }
  /* heap results are 8-aligned (map.c allocates in 8-byte units) */
  int top = lua_gettop(L);
  int n = lcodec_decode_values(L, data, len);
  if (n == 0) lua_pushnil(L);
  lua_settop(L, top + 1);
}

/* Whether the map's pool (user value 1 of the map at self) was stopped: then every verb answers
 * nil, "closed" (finished results included: a handle outlives its pool only to say so). */
static int pool_stopped(lua_State *L, lmap *lm, int self) {
  if (lm->closed) return 1;
  lua_getiuservalue(L, self, 1);
  lpool *lp = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!lp || lp->closed || !lp->p) {
    lm->closed = 1;
    lm->started = 0;
  }
  return lm->closed;
}

/* nil, "closed": a verb of a map whose pool was stopped (the MPI tier's maps answer the same). */
int lmap_push_closed(lua_State *L) {
  lua_pushnil(L);
  lua_pushliteral(L, "closed");
  return 2;
}

/* Waits for the run in flight (if any) and hands out its results: the tail of collect and run. */
static int finish_run(lua_State *L, lmap *lm, double timeout) {
  if (lm->started) {
    int w = wait_run(L, lm, 1, timeout);
    if (w < 0) return lmap_push_closed(L);
    if (w == 0) {
      lua_pushnil(L);
      lua_pushliteral(L, "timeout");
      return 2;
    }
  }
  if (lm->closed) return lmap_push_closed(L);
  lm->collected = 1;
  raise_failure(L, lm);
  push_results(L, lm);
  if (!lm->prepared) { /* results are copies: give the region back now, warm for the next map */
    suiro_map_free(lm->m);
    lm->m = NULL;
  }
  return 1;
}

/* The timeout of a collect: the argument, else the map's timeout option, else the pool's. */
static double map_timeout(lua_State *L, int arg) {
  if (!lua_isnoneornil(L, arg)) return lpool_seconds(L, arg, "map:collect", "timeout");
  lua_getiuservalue(L, 1, 2);
  lua_getfield(L, -1, "timeout_s");
  double t = -1;
  if (!lua_isnil(L, -1)) t = lua_tonumber(L, -1) >= 1e12 ? -1 : lua_tonumber(L, -1);
  lua_pop(L, 2);
  if (t < 0) {
    lua_getiuservalue(L, 1, 1);
    lpool *lp = lua_touserdata(L, -1);
    if (lp) t = lp->default_timeout;
    lua_pop(L, 1);
  }
  return t;
}

/* m:collect([timeout]) -> results | nil, "timeout" | nil, "closed" */
static int l_map_collect(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (lm->collected && !lm->prepared) return luaL_error(L, "map:collect: the results were collected already");
  if (pool_stopped(L, lm, 1)) return lmap_push_closed(L);
  if (!lm->m) return luaL_error(L, "map:collect: this map was freed");
  if (!lm->started && !lm->finished) return luaL_error(L, "map:collect: this prepared map is not running (pm:run())");
  return finish_run(L, lm, map_timeout(L, 2));
}

static int l_map_cancel(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  int running = !pool_stopped(L, lm, 1) && lm->m && lm->started;
  if (running) suiro_map_cancel(lm->m);
  lua_pushboolean(L, running);
  return 1;
}

/* m:kill(): the workers running the map are killed and replaced; collect raises class "cancelled". */
static int l_map_kill(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (pool_stopped(L, lm, 1)) return lmap_push_closed(L);
  int running = lm->m && lm->started;
  if (running && suiro_map_kill(lm->m) != SUIRO_OK) return luaL_error(L, "map:kill: %s", suiro_last_error());
  lua_pushboolean(L, running);
  return 1;
}

static int l_map_ready(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (pool_stopped(L, lm, 1)) {
    lua_pushboolean(L, 1); /* collect answers at once: nil, "closed" */
    return 1;
  }
  int ready = !lm->started;
  if (!ready && lm->m) {
    suiro_status st = suiro_map_wait(lm->m, 0);
    if (st == SUIRO_OK) {
      lm->started = 0;
      lm->finished = 1;
      ready = 1;
    } else if (st == SUIRO_CLOSED) {
      lm->closed = 1;
      lm->started = 0;
      ready = 1;
    }
  }
  lua_pushboolean(L, ready);
  return 1;
}

static int l_map_progress(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  lua_pushinteger(L, lm->m ? (lua_Integer)suiro_map_done(lm->m) : lm->collected ? (lua_Integer)lm->n : 0);
  lua_pushinteger(L, (lua_Integer)lm->n);
  return 2;
}

/* results() iterator step: (i, value) in completion order (streamed maps) or index order. */
static int l_map_next(lua_State *L) {
  lmap *lm = checkmap(L, lua_upvalueindex(1));
  for (;;) {
    if (lm->range_b < lm->range_e) {
      uint64_t i = lm->range_b++;
      lua_pushinteger(L, (lua_Integer)i + 1);
      push_element(L, lm, i);
      return 2;
    }
    if (pool_stopped(L, lm, lua_upvalueindex(1)) || !lm->m) return luaL_error(L, "map:results: the map's pool was stopped");
    if (!lm->stream) { /* hand out everything, in index order, once the run is over */
      if (lm->started) {
        int w = wait_run(L, lm, lua_upvalueindex(1), -1);
        if (w < 0) return luaL_error(L, "map:results: the map's pool was stopped");
      }
      raise_failure(L, lm);
      if (lm->next_i >= lm->n) return 0;
      lm->range_b = lm->next_i;
      lm->range_e = lm->n;
      lm->next_i = lm->n;
      continue;
    }
    uint64_t b, e;
    if (suiro_map_next_range(lm->m, &b, &e)) {
      lm->range_b = b;
      lm->range_e = e;
      continue;
    }
    if (!lm->started) { /* finished: drain what is left, then report a failure */
      if (suiro_map_next_range(lm->m, &b, &e)) {
        lm->range_b = b;
        lm->range_e = e;
        continue;
      }
      raise_failure(L, lm);
      return 0;
    }
    suiro_status st = suiro_map_wait(lm->m, 0.001);
    if (st == SUIRO_OK) {
      lm->started = 0;
      lm->finished = 1;
    } else if (st == SUIRO_CLOSED) {
      lm->closed = 1;
      lm->started = 0;
    }
  }
}

static int l_map_results(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (pool_stopped(L, lm, 1)) return luaL_error(L, "map:results: the map's pool was stopped");
  if (lm->prepared && !lm->started && !lm->finished)
    return luaL_error(L, "map:results: this prepared map is not running (pm:run())");
  if (!lm->m)
    return luaL_error(L, lm->collected ? "map:results: the results were collected already" : "map:results: this map was freed");
  lm->collected = 1;
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, l_map_next, 1);
  return 1;
}

/* pm:run([xs], [timeout]) -> results: runs a prepared map, swapping its input when given. */
static int l_map_run(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (pool_stopped(L, lm, 1)) return lmap_push_closed(L);
  if (!lm->m) return luaL_error(L, "map:run: this map was freed");
  if (lm->started) return luaL_error(L, "map:run: the previous run is still going");
  lua_getiuservalue(L, 1, 1);
  lpool *lp = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!lp || lp->closed || !lp->p) {
    lm->closed = 1;
    return lmap_push_closed(L);
  }
  if (!lua_isnoneornil(L, 2)) {
    larray *a = larray_test(L, 2);
    if (lm->in_kind != SUIRO_IN_ARRAY || !a || a->type != lm->in_type || (uint64_t)a->n != lm->n || !a->data)
      return luaL_error(L, "map:run: a new input must be a suiro.array of the same type and length as the "
                           "prepared one (%I %s elements); prepare another map for other inputs",
                        (lua_Integer)lm->n, lm->in_kind == SUIRO_IN_ARRAY ? wire_type_name(lm->in_type) : "table");
    const suiro_plan *pl = suiro_plan_of(lm->m);
    if (!pl) return luaL_error(L, "map:run: %s", suiro_last_error());
    memcpy(suiro_plan_in_data(pl), a->data, larray_bytes(a));
  }
  double timeout = lua_isnoneornil(L, 3) ? -1 : lpool_seconds(L, 3, "map:run", "timeout");
  suiro_status st = suiro_map_start(lm->m, lp->default_timeout);
  if (st == SUIRO_CLOSED) return lmap_push_closed(L);
  if (st != SUIRO_OK) return luaL_error(L, "map:run: %s", suiro_last_error());
  lm->started = 1;
  lm->finished = 0;
  lm->collected = 0;
  lm->t0 = suiro_now();
  return finish_run(L, lm, timeout);
}

static int l_map_gc(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (lm->m) suiro_map_free(lm->m); /* cancels and waits for a run still going (none after a stop) */
  lm->m = NULL;
  return 0;
}

static int l_map_tostring(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  lua_pushfstring(L, "suiro.map(%I elements, %s)", (lua_Integer)lm->n,
                  lm->closed ? "closed" : lm->started ? "running" : lm->collected ? "collected" : "ready");
  return 1;
}

/* ---- the runner side (in workers): per-element random streams ------------------------------------------------------------- */

/* suiro.random([m [, n]]): math.random's contract, drawing from the element's own stream inside a
 * seeded map (suiro_rng_current: the same streams in every language), from math.random elsewhere. */
static int l_random(lua_State *L) {
  suiro_rng *rng = suiro_rng_current();
  if (!rng) {
    lua_getglobal(L, "math");
    lua_getfield(L, -1, "random");
    lua_insert(L, 1);
    lua_pop(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
  }
  lua_Integer lo, hi;
  switch (lua_gettop(L)) {
  case 0: lua_pushnumber(L, suiro_rng_unit(rng)); return 1;
  case 1: lo = 1; hi = luaL_checkinteger(L, 1); break;
  default: lo = luaL_checkinteger(L, 1); hi = luaL_checkinteger(L, 2); break;
  }
  luaL_argcheck(L, lo <= hi, lua_gettop(L) == 1 ? 1 : 2, "interval is empty");
  lua_pushinteger(L, (lua_Integer)suiro_rng_range(rng, (int64_t)lo, (int64_t)hi));
  return 1;
}

/* ---- map runners ------------------------------------------------------------------------------ */

/* Stores the value at idx into a typed cell with the seam's range rules; raises naming the
 * element (and the field of a record) on a mismatch. */
static void store_cell(lua_State *L, int idx, void *cell, int type, uint64_t i, const char *field) {
  char err[160];
  int rc;
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    rc = lua_isinteger(L, idx) ? suiro_cell_put_int(cell, type, (int64_t)lua_tointeger(L, idx), err, sizeof err)
                               : suiro_cell_put_real(cell, type, (double)lua_tonumber(L, idx), err, sizeof err);
    break;
  case LUA_TBOOLEAN: rc = suiro_cell_put_bool(cell, type, lua_toboolean(L, idx), err, sizeof err); break;
  default:
    if (lvalues_is_na(L, idx)) {
      rc = suiro_cell_put_na(cell, type, err, sizeof err);
    } else {
      snprintf(err, sizeof err, "template %s cannot hold %s", wire_type_name(type), luaL_typename(L, idx));
      rc = -1;
    }
  }
  if (rc == 0) return;
  if (field) luaL_error(L, "element %I: field \"%s\": %s", (lua_Integer)i + 1, field, err);
  luaL_error(L, "element %I: %s", (lua_Integer)i + 1, err);
}

/* Stores element i's result (at the top) into its cells per the template. */
static void store_result(lua_State *L, const suiro_plan *pl, const suiro_template *t, void *out, uint64_t i,
                         uint64_t width) {
  int type;
  if (t->kind == SUIRO_OUT_SCALAR) {
    char *cell = suiro_plan_cell(pl, out, i, 0, &type);
    if (type == WIRE_T_F64 && lua_type(L, -1) == LUA_TNUMBER) { /* the common case */
      double v = lua_tonumber(L, -1);
      memcpy(cell, &v, 8);
    } else {
      store_cell(L, -1, cell, type, i, NULL);
    }
    return;
  }
  if (t->kind == SUIRO_OUT_RECORD) {
    if (!lua_istable(L, -1))
      luaL_error(L, "element %I: a record template wants a table, got %s", (lua_Integer)i + 1, luaL_typename(L, -1));
    for (int k = 0; k < t->nfields; k++) {
      void *cell = suiro_plan_cell(pl, out, i, k, &type);
      lua_getfield(L, -1, t->fields[k].name);
      store_cell(L, -1, cell, type, i, t->fields[k].name);
      lua_pop(L, 1);
    }
    return;
  }
  char *cell = suiro_plan_cell(pl, out, i, 0, &type); /* ARRAY: width cells in a row */
  size_t es = wire_type_size(type);
  larray *a = larray_test(L, -1);
  if (a) {
    if ((uint64_t)a->n != width)
      luaL_error(L, "element %I: the template wants %I values, got an array of %I", (lua_Integer)i + 1,
                 (lua_Integer)width, (lua_Integer)a->n);
    if (a->type == type && a->kind == LARRAY_PLAIN) {
      memcpy(cell, a->data, width * es);
      return;
    }
    for (uint64_t k = 0; k < width; k++) {
      lua_geti(L, -1, (lua_Integer)k + 1);
      store_cell(L, -1, cell + k * es, type, i, NULL);
      lua_pop(L, 1);
    }
    return;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "element %I: the template wants %I values, got %s", (lua_Integer)i + 1, (lua_Integer)width,
               luaL_typename(L, -1));
  if ((uint64_t)lua_rawlen(L, -1) != width)
    luaL_error(L, "element %I: the template wants %I values, got a table of %I", (lua_Integer)i + 1,
               (lua_Integer)width, (lua_Integer)lua_rawlen(L, -1));
  for (uint64_t k = 0; k < width; k++) {
    lua_rawgeti(L, -1, (lua_Integer)k + 1);
    store_cell(L, -1, cell + k * es, type, i, NULL);
    lua_pop(L, 1);
  }
}

/* The runner's side (suiro_run_map, engine/src/runner.c): the engine claims, completes, cancels,
 * reports failures and detaches; this face builds the function, calls it on each element of a
 * claimed range and stores the result. The Lua stack inside the protected call: 1 the runner's
 * globals, 2 the function. */
typedef struct lrun {
  lua_State *L;
  int top;
  int (*body)(void *ctx);
  void *ctx;
} lrun;

static int lrun_call(lua_State *L) {
  lrun *u = lua_touserdata(L, 1);
  lua_settop(L, 0);
  if (u->body(u->ctx) != 0) return luaL_error(L, "map runner: %s", suiro_last_error());
  return 0;
}

static int lrun_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  lrun *u = ud;
  lua_State *L = u->L;
  u->body = body;
  u->ctx = ctx;
  lua_settop(L, u->top);
  lua_pushcfunction(L, lworker_msgh);
  lua_pushcfunction(L, lrun_call);
  lua_pushlightuserdata(L, u);
  return lua_pcall(L, 1, 0, u->top + 1) != LUA_OK; /* the error stays on top for lrun_fail */
}

static int lrun_prepare(void *ud, suiro_runner *r) {
  lua_State *L = ((lrun *)ud)->L;
  /* The runner's globals: a copy of the standard globals, made once per runner. A copy rather
   * than a table that falls back to _G: the map's elements may use globals in tight loops, and
   * every miss through __index costs (a quarter more time on math-heavy elements). */
  lua_createtable(L, 0, 64);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -5);
  }
  lua_pop(L, 1);
  const void *fb;
  size_t fl;
  suiro_plan_fn(r->plan, &fb, &fl);
  lworker_decode_one(L, fb, fl, 1); /* 2: the function, a "module.fn" name or a call spec */
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t nl;
    const char *nm = lua_tolstring(L, 2, &nl);
    lworker_resolve(L, nm, nl);
    lua_replace(L, 2);
  }
  return 0;
}

static int lrun_range(void *ud, suiro_runner *r, uint64_t b, uint64_t e) {
  (void)b, (void)e;
  lua_State *L = ((lrun *)ud)->L;
  suiro_elem el;
  int k;
  while ((k = suiro_runner_next(r, &el)) > 0) {
    uint64_t i = r->current;
    lua_pushvalue(L, 2);
    switch (el.kind) {
    case 'f': lua_pushnumber(L, el.f); break;
    case 'i': lua_pushinteger(L, (lua_Integer)el.i); break;
    case 'b':
      if (el.i == WIRE_NA_BOOL) lvalues_push_na(L);
      else lua_pushboolean(L, (int)el.i);
      break;
    default: lworker_decode_one(L, el.buf, el.len, 1); break;
    }
    lua_call(L, 1, 1);
    if (r->tpl) {
      store_result(L, r->plan, r->tpl, r->out, i, r->width);
    } else {
      lcodec_ctx cx = { .L = L, .pool = lworker_self_pool(), .verb = "element result", .returning = 1 };
      lcodec_encode_values(&cx, lua_gettop(L), 1, suiro_msg_writer(suiro_runner_msg(r)));
      if (suiro_runner_put(r) != 0) luaL_error(L, "%s", suiro_last_error());
    }
    lua_settop(L, 2);
  }
  if (k < 0) luaL_error(L, "map: %s", suiro_last_error());
  return 0;
}

static void lrun_fail(void *ud, suiro_runner *r, suiro_wire_str *cls, suiro_wire_str *msg, suiro_wire_str *tb) {
  (void)r, (void)cls;
  lua_State *L = ((lrun *)ud)->L;
  if (!lua_istable(L, -1)) return;
  lua_rawgeti(L, -1, 1);
  lua_rawgeti(L, -2, 2);
  size_t ml = 0, tl = 0;
  const char *m = lua_tolstring(L, -2, &ml), *t = lua_tolstring(L, -1, &tl);
  if (m) *msg = (suiro_wire_str){ m, ml };
  if (t) *tb = (suiro_wire_str){ t, tl };
}

static const suiro_runner_ops lrun_ops = { lrun_protect, lrun_prepare, lrun_range, lrun_fail, NULL };

/* A map runner task: errors become the element's failure (which cancels the map). */
int lmap_exec_runner(lua_State *L, const void *arg, size_t len, suiro_out *out) {
  lrun u = { L, lua_gettop(L), NULL, NULL };
  int rc = suiro_run_map(arg, len, out, &lrun_ops, &u);
  lua_settop(L, u.top);
  return rc;
}


static const luaL_Reg map_methods[] = {
  { "collect", l_map_collect }, { "cancel", l_map_cancel },   { "ready", l_map_ready },
  { "progress", l_map_progress }, { "results", l_map_results }, { "run", l_map_run },
  { "kill", l_map_kill },
  { "free", l_map_gc },          { NULL, NULL },
};

/* Registers suiro.map; adds core.map_new and core.random to the table on top. */
void lmap_open(lua_State *L) {
  static const luaL_Reg map_meta[] = {
    { "__gc", l_map_gc }, { "__close", l_map_gc }, { "__tostring", l_map_tostring }, { NULL, NULL },
  };
  lsuiro_newmt(L, "suiro.stage", &stage_key);
  lua_pushcfunction(L, stage_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.map", &lmap_key_map);
  luaL_newlib(L, map_methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.map_methods");
  lua_setfield(L, -2, "__index");
  luaL_setfuncs(L, map_meta, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_map_new);
  lua_setfield(L, -2, "map_new");
  lua_pushcfunction(L, l_random);
  lua_setfield(L, -2, "random");
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.map_methods");
  lua_setfield(L, -2, "map_methods");
}
