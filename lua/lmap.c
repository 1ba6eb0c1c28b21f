/*
 * lmap.c — pool:map for Lua: stage a function and its input once in a map region, let one
 * runner per worker claim ranges of elements (engine/src/map.c), assemble the results.
 *
 *   local m = pool:map(f, xs, { template = "f64", seed = 42, stream = false })
 *   m:collect([timeout]), m:cancel(), m:results(), m:progress(), m:ready()
 *   local pm = pool:map_prepare(f, xs, opts); pm:run([new_xs])
 *
 * Inputs: a suiro.array (elements are numbers), a suiro.range (never materialised) or a Lua
 * table of any values that cross (each element encoded on its own so a runner decodes only its
 * elements). Results: a typed output area for templates ("f64" -> suiro.array, "f64[3]" -> an
 * n x 3 array, "{a: f64, b: i32}" -> columns), else one encoded value per element.
 * The Lua side of the runner lives in lworker.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "larray.h"
#include "lmap.h"
#include "lsuiro.h"
#include "lvalues.h"

const char lsuiro_key_map, lsuiro_key_range;

typedef struct lmap {
  suiro_map *m;
  uint64_t n;
  int started;      /* a run is in flight */
  int finished;     /* the last run ended (its results are there to collect) */
  int collected;    /* its results were handed out (a plain map runs once) */
  int prepared;
  int stream;
  uint64_t next_i;  /* results(): next index of a non-streamed map */
  uint64_t range_b, range_e; /* results(): the range being handed out */
  double t0;
  double last_draw;
  lmap_desc d;      /* a copy of the description's fixed part */
} lmap;

/* ---- suiro.range ------------------------------------------------------------------------------ */

typedef struct lrange { int64_t start, step; uint64_t n; } lrange;

static int l_range(lua_State *L) {
  lua_Integer a = luaL_checkinteger(L, 1), b = luaL_checkinteger(L, 2), step = luaL_optinteger(L, 3, 1);
  if (step == 0) return luaL_error(L, "suiro.range: step must not be 0");
  lrange *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->start = a;
  r->step = step;
  if ((step > 0 && b < a) || (step < 0 && b > a)) r->n = 0;
  else r->n = (uint64_t)((step > 0 ? b - a : a - b) / (step > 0 ? step : -step)) + 1;
  lsuiro_setmt(L, &lsuiro_key_range);
  return 1;
}

void lmap_push_range(lua_State *L, int64_t start, int64_t step, uint64_t n) {
  lrange *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->start = start;
  r->step = step;
  r->n = n;
  lsuiro_setmt(L, &lsuiro_key_range);
}

int lmap_torange(lua_State *L, int idx, int64_t *start, int64_t *step, uint64_t *n) {
  lrange *r = lsuiro_testud(L, idx, &lsuiro_key_range);
  if (!r) return 0;
  *start = r->start;
  *step = r->step;
  *n = r->n;
  return 1;
}

static lrange *checkrange(lua_State *L, int i) { return lsuiro_checkud(L, i, &lsuiro_key_range, "suiro.range"); }

static int l_range_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkrange(L, 1)->n);
  return 1;
}

static int l_range_index(lua_State *L) {
  lrange *r = checkrange(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || (uint64_t)i > r->n) return 0;
    lua_pushinteger(L, r->start + (i - 1) * r->step);
    return 1;
  }
  const char *k = luaL_checkstring(L, 2);
  if (!strcmp(k, "start")) lua_pushinteger(L, r->start);
  else if (!strcmp(k, "step")) lua_pushinteger(L, r->step);
  else if (!strcmp(k, "stop")) lua_pushinteger(L, r->start + ((lua_Integer)r->n - 1) * r->step);
  else lua_pushnil(L);
  return 1;
}

static int l_range_eq(lua_State *L) {
  lrange *a = lsuiro_testud(L, 1, &lsuiro_key_range), *b = lsuiro_testud(L, 2, &lsuiro_key_range);
  lua_pushboolean(L, a && b && a->n == b->n && (a->n == 0 || (a->start == b->start && (a->n == 1 || a->step == b->step))));
  return 1;
}

static int l_range_tostring(lua_State *L) {
  lrange *r = checkrange(L, 1);
  lua_pushfstring(L, "suiro.range(%I, %I, %I)", (lua_Integer)r->start,
                  (lua_Integer)(r->start + ((lua_Integer)r->n - 1) * r->step), (lua_Integer)r->step);
  return 1;
}

/* ---- staging ---------------------------------------------------------------------------------- */

static lmap *checkmap(lua_State *L, int i) { return lsuiro_checkud(L, i, &lsuiro_key_map, "suiro.map"); }

typedef struct growbuf { unsigned char *p; size_t len, cap; } growbuf;

static void gb_put(lua_State *L, growbuf *g, const void *data, size_t n) {
  if (g->len + n > g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 4096;
    while (cap < g->len + n) cap *= 2;
    unsigned char *p = realloc(g->p, cap);
    if (!p) luaL_error(L, "pool:map: out of memory");
    g->p = p;
    g->cap = cap;
  }
  memcpy(g->p + g->len, data, n);
  g->len += n;
}

static int growbuf_gc(lua_State *L) {
  growbuf *g = lua_touserdata(L, 1);
  free(g->p);
  g->p = NULL;
  return 0;
}

static growbuf *push_growbuf(lua_State *L) {
  growbuf *g = lua_newuserdatauv(L, sizeof *g, 0);
  memset(g, 0, sizeof *g);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, growbuf_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  return g;
}

/* Encodes the value at idx as a stand-alone wire buffer (a list of one) into g. */
static void encode_one(lcodec_ctx *c, int idx, growbuf *g) {
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
  gb_put(c->L, g, buf, len);
  wire_writer_free(&w);
}

static int type_of_name(lua_State *L, const char *t) {
  for (int k = 1; k <= WIRE_T_MAX; k++)
    if (!strcmp(t, wire_type_name(k))) return k;
  return luaL_error(L, "pool:map: template type \"%s\" is not a numeric or bool type (f64, f32, i64, i32, u8, bool)", t);
}

/* Reads the parsed template (suiro.parse.template's table) at idx into d. */
static void read_template(lua_State *L, int idx, lmap_desc *d, growbuf *names) {
  if (lua_isnoneornil(L, idx)) {
    d->out_kind = LMAP_OUT_VALUES;
    return;
  }
  lua_getfield(L, idx, "kind");
  const char *kind = luaL_checkstring(L, -1);
  if (!strcmp(kind, "scalar")) {
    lua_getfield(L, idx, "type");
    d->out_kind = LMAP_OUT_SCALAR;
    d->out_type = (uint32_t)type_of_name(L, luaL_checkstring(L, -1));
    d->width = 1;
    lua_pop(L, 1);
  } else if (!strcmp(kind, "array")) {
    lua_getfield(L, idx, "type");
    d->out_kind = LMAP_OUT_ARRAY;
    d->out_type = (uint32_t)type_of_name(L, luaL_checkstring(L, -1));
    lua_getfield(L, idx, "shape");
    uint64_t w = 1;
    lua_Integer nd = luaL_len(L, -1);
    for (lua_Integer k = 1; k <= nd; k++) {
      lua_geti(L, -1, k);
      w *= (uint64_t)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    d->width = (uint32_t)w;
    lua_pop(L, 2);
  } else if (!strcmp(kind, "record")) {
    d->out_kind = LMAP_OUT_RECORD;
    lua_getfield(L, idx, "fields");
    lua_Integer nf = luaL_len(L, -1);
    if (nf > LMAP_MAX_FIELDS) luaL_error(L, "pool:map: a record template has at most %d fields", LMAP_MAX_FIELDS);
    d->nfields = (uint32_t)nf;
    for (lua_Integer k = 1; k <= nf; k++) {
      lua_geti(L, -1, k);
      lua_getfield(L, -1, "name");
      size_t nl;
      const char *nm = luaL_checklstring(L, -1, &nl);
      gb_put(L, names, nm, nl + 1);
      lua_getfield(L, -2, "type");
      lua_getfield(L, -1, "kind");
      if (strcmp(luaL_checkstring(L, -1), "scalar") != 0)
        luaL_error(L, "pool:map: record field \"%s\" must have a scalar type", nm);
      lua_getfield(L, -2, "type");
      d->field_type[k - 1] = (uint32_t)type_of_name(L, luaL_checkstring(L, -1));
      lua_pop(L, 5);
    }
    lua_pop(L, 1);
  } else {
    luaL_error(L, "pool:map: template kind \"%s\" cannot be a map result (use a scalar, an array or a record)", kind);
  }
  lua_pop(L, 1);
}

static size_t align8(size_t x) { return (x + 7) & ~(size_t)7; }

/* A table of only integers (or only floats) is staged as an i64 (f64) array: no per-element
 * encoding on the host, no decoding in the runners, and each element keeps its Lua subtype. */
static int stage_numbers(lua_State *L, int t, lua_Integer n, lmap_desc *d, growbuf *data) {
  if (n < 1) return 0;
  lua_rawgeti(L, t, 1);
  int isint = lua_isinteger(L, -1), isnum = lua_type(L, -1) == LUA_TNUMBER;
  lua_pop(L, 1);
  if (!isnum) return 0;
  size_t at = data->len;
  for (lua_Integer i = 1; i <= n; i++) {
    int tt = lua_rawgeti(L, t, i);
    int ok = tt == LUA_TNUMBER && lua_isinteger(L, -1) == isint;
    if (ok) {
      char cell[8];
      if (isint) {
        int64_t v = (int64_t)lua_tointeger(L, -1);
        memcpy(cell, &v, 8);
      } else {
        double v = lua_tonumber(L, -1);
        memcpy(cell, &v, 8);
      }
      gb_put(L, data, cell, 8);
    }
    lua_pop(L, 1);
    if (!ok) {
      data->len = at;
      return 0;
    }
  }
  d->in_kind = LMAP_IN_ARRAY;
  d->in_type = isint ? WIRE_T_I64 : WIRE_T_F64;
  return 1;
}

/* core.map(pool, f, xs, spec) -> a map (started unless spec.prepare) */
static int l_map_new(lua_State *L) {
  lpool *lp = lsuiro_checkpool(L, 1);
  int ft = lua_type(L, 2);
  if (ft != LUA_TFUNCTION && ft != LUA_TSTRING)
    return luaL_error(L, "pool:map: argument 1 must be a function or \"module.fn\", got %s", luaL_typename(L, 2));
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  lmap_desc d;
  memset(&d, 0, sizeof d);
  larray *a = larray_test(L, 3);
  lrange *rg = a ? NULL : lsuiro_testud(L, 3, &lsuiro_key_range);
  lcodec_ctx c = { L, lp, "pool:map", NULL, 0 };
  growbuf *fn = push_growbuf(L);      /* 5 */
  growbuf *data = push_growbuf(L);    /* 6 */
  growbuf *names = push_growbuf(L);   /* 7 */
  encode_one(&c, 2, fn);
  if (a) {
    if (a->type == WIRE_T_C128) return luaL_error(L, "pool:map: c128 arrays cannot be mapped over");
    if (a->ndim > 1) return luaL_error(L, "pool:map: map over a 1-d array (this one has %d dimensions)", a->ndim);
    d.in_kind = LMAP_IN_ARRAY;
    d.in_type = (uint32_t)a->type;
    d.n = (uint64_t)a->n;
  } else if (rg) {
    d.in_kind = LMAP_IN_RANGE;
    d.start = rg->start;
    d.step = rg->step;
    d.n = rg->n;
  } else if (lua_type(L, 3) == LUA_TTABLE) {
    d.in_kind = LMAP_IN_VALUES;
    lua_getfield(L, 3, "n");
    lua_Integer n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, 3);
    lua_pop(L, 1);
    d.n = (uint64_t)n;
    if (stage_numbers(L, 3, n, &d, data)) goto staged;
    uint64_t zero = 0;
    for (uint64_t i = 0; i <= d.n; i++) gb_put(L, data, &zero, 8); /* offsets, filled below */
    for (lua_Integer i = 1; i <= n; i++) {
      ((uint64_t *)data->p)[i - 1] = data->len;
      lua_rawgeti(L, 3, i);
      c.verb = "pool:map: element";
      encode_one(&c, lua_gettop(L), data);
      lua_pop(L, 1);
    }
    ((uint64_t *)data->p)[d.n] = data->len;
  staged:;
  } else {
    return luaL_error(L, "pool:map: argument 2 must be a table, a suiro.array or a suiro.range, got %s",
                      luaL_typename(L, 3));
  }
  lua_getfield(L, 4, "template");
  read_template(L, lua_gettop(L), &d, names);
  lua_pop(L, 1);
  lua_getfield(L, 4, "seed");
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1)) return luaL_error(L, "pool:map: seed must be an integer, got %s", luaL_typename(L, -1));
    d.seeded = 1;
    d.seed = (uint64_t)lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  lua_getfield(L, 4, "stream");
  int stream = lua_toboolean(L, -1);
  lua_getfield(L, 4, "prepare");
  int prepare = lua_toboolean(L, -1);
  lua_pop(L, 2);

  /* layout of the description: lmap_desc | function | input data | field names */
  size_t in_bytes = a ? larray_bytes(a) : data->len;
  d.fn_off = align8(sizeof d);
  d.fn_len = fn->len;
  d.data_off = align8(d.fn_off + fn->len);
  d.data_len = in_bytes;
  d.names_off = align8(d.data_off + in_bytes);
  size_t desc_bytes = d.names_off + names->len + 8;
  size_t esize = d.out_type ? wire_type_size((int)d.out_type) : 0;
  size_t out_bytes = 0;
  if (d.out_kind == LMAP_OUT_SCALAR || d.out_kind == LMAP_OUT_ARRAY) out_bytes = (size_t)d.n * d.width * esize;
  else if (d.out_kind == LMAP_OUT_RECORD)
    for (uint32_t k = 0; k < d.nfields; k++) {
      d.field_off[k] = out_bytes;
      out_bytes = align8(out_bytes + (size_t)d.n * wire_type_size((int)d.field_type[k]));
    }
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  o.n = d.n;
  o.desc_bytes = desc_bytes;
  o.out_bytes = out_bytes;
  o.slots = d.out_kind == LMAP_OUT_VALUES;
  /* the heap holds untyped results and the error message: sparse, so generous is cheap */
  o.heap_bytes = ((size_t)16 << 20) + (o.slots ? (size_t)d.n * 64 + in_bytes * 2 : 0);
  o.stream = stream;
  lmap *lm = lua_newuserdatauv(L, sizeof *lm, 2);
  memset(lm, 0, sizeof *lm);
  lsuiro_setmt(L, &lsuiro_key_map);
  int self = lua_gettop(L);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, self, 1); /* the pool, kept alive by its map */
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, self, 2); /* the options (progress, template for names) */
  suiro_status st = suiro_map_create(lp->p, &o, &lm->m);
  if (st != SUIRO_OK) return luaL_error(L, "pool:map: %s", suiro_last_error());
  char *base = suiro_map_desc(lm->m);
  memcpy(base, &d, sizeof d);
  memcpy(base + d.fn_off, fn->p, fn->len);
  if (a && in_bytes) memcpy(base + d.data_off, a->data, in_bytes);
  else if (in_bytes) memcpy(base + d.data_off, data->p, in_bytes);
  if (names->len) memcpy(base + d.names_off, names->p, names->len);
  lm->d = d;
  lm->n = d.n;
  lm->stream = stream;
  lm->prepared = prepare;
  if (!prepare) {
    st = suiro_map_start(lm->m, lp->default_timeout);
    if (st != SUIRO_OK) return luaL_error(L, "pool:map: %s", suiro_last_error());
    lm->started = 1;
    lm->t0 = suiro_now();
  }
  return 1;
}

/* ---- waiting and results ------------------------------------------------------------------------ */

static void draw_progress(lua_State *L, lmap *lm, int self, int final) {
  lua_getiuservalue(L, self, 2);
  lua_getfield(L, -1, "progress");
  uint64_t done = suiro_map_done(lm->m);
  if (lua_isfunction(L, -1)) {
    lua_pushinteger(L, (lua_Integer)done);
    lua_pushinteger(L, (lua_Integer)lm->n);
    lua_call(L, 2, 0);
    lua_pop(L, 1);
    return;
  }
  int want = lua_toboolean(L, -1);
  lua_pop(L, 2);
  if (!want || !isatty(2)) return;
  double now = suiro_now();
  if (!final && now - lm->last_draw < 0.1) return;
  lm->last_draw = now;
  double el = now - lm->t0, rate = el > 0 ? (double)done / el : 0;
  double frac = lm->n ? (double)done / (double)lm->n : 1;
  char bar[31];
  int fill = (int)(frac * 30);
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '-';
  bar[30] = 0;
  if (final)
    fprintf(stderr, "\r[%s] %3.0f%% %llu/%llu in %.1fs (%.0f/s)\033[K\n", bar, frac * 100,
            (unsigned long long)done, (unsigned long long)lm->n, el, rate);
  else
    fprintf(stderr, "\r[%s] %3.0f%% %llu/%llu %.0f/s ETA %.1fs\033[K", bar, frac * 100, (unsigned long long)done,
            (unsigned long long)lm->n, rate, rate > 0 ? (double)(lm->n - done) / rate : 0.0);
  fflush(stderr);
}

/* Waits for the run to end: 1 when done, 0 on timeout (the map is then cancelled). */
static int wait_run(lua_State *L, lmap *lm, int self, double timeout) {
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
    if (st != SUIRO_TIMEOUT) luaL_error(L, "map: %s", suiro_last_error());
    if (progress) draw_progress(L, lm, self, 0);
    if (suiro_now() >= deadline) {
      suiro_map_cancel(lm->m);
      suiro_map_wait(lm->m, -1);
      lm->started = 0;
      return 0;
    }
  }
  lm->started = 0;
  lm->finished = 1;
  if (progress) draw_progress(L, lm, self, 1);
  return 1;
}

/* Raises the map's failure, if any. */
static void raise_failure(lua_State *L, lmap *lm) {
  uint64_t idx;
  const void *data;
  size_t len;
  int kind;
  if (!suiro_map_error(lm->m, &idx, &data, &len, &kind)) return;
  suiro_result r = { kind, data, len, -1, 0 };
  /* the payload is the runner's encoded ERROR; it may sit unaligned in the heap: copy it */
  void *copy = malloc(len + 8);
  if (copy) {
    memcpy(copy, data, len);
    r.data = copy;
  }
  lcodec_push_error(L, &r, idx == UINT64_MAX ? 0 : (int)(idx + 1));
  free(copy);
  if (idx != UINT64_MAX) {
    lua_pushinteger(L, (lua_Integer)idx + 1);
    lua_setfield(L, -2, "index");
  }
  lua_error(L);
}

static void push_element(lua_State *L, lmap *lm, uint64_t i);

/* Pushes the results of a finished map in the shape its template asks for. */
static void push_results(lua_State *L, lmap *lm, int self) {
  const lmap_desc *d = &lm->d;
  char *out = suiro_map_output(lm->m);
  switch (d->out_kind) {
  case LMAP_OUT_SCALAR: {
    larray *a = larray_new(L, (int)d->out_type, (int64_t)lm->n);
    if (lm->n) memcpy(a->data, out, larray_bytes(a));
    return;
  }
  case LMAP_OUT_ARRAY: {
    larray *a = larray_new(L, (int)d->out_type, (int64_t)(lm->n * d->width));
    if (lm->n) memcpy(a->data, out, larray_bytes(a));
    a->ndim = 2;
    a->shape[0] = (int64_t)lm->n;
    a->shape[1] = d->width;
    return;
  }
  case LMAP_OUT_RECORD: {
    /* a suiro.frame: one column per field, in the template's order */
    lframe_push(L, (int64_t)lm->n);
    int f = lua_gettop(L);
    const char *nm = (const char *)suiro_map_desc(lm->m) + d->names_off;
    for (uint32_t k = 0; k < d->nfields; k++) {
      lua_pushstring(L, nm);
      larray *a = larray_new_raw(L, (int)d->field_type[k], (int64_t)lm->n);
      if (lm->n) memcpy(a->data, out + d->field_off[k], larray_bytes(a));
      lframe_append(L, f);
      nm += strlen(nm) + 1;
    }
    return;
  }
  default: {
    lua_createtable(L, lm->n < (1u << 26) ? (int)lm->n : 0, 0);
    int t = lua_gettop(L);
    int holes = 0;
    for (uint64_t i = 0; i < lm->n; i++) {
      push_element(L, lm, i);
      if (lua_isnil(L, -1)) holes = 1;
      lua_rawseti(L, t, (lua_Integer)i + 1);
    }
    if (holes) {
      lua_pushinteger(L, (lua_Integer)lm->n);
      lua_setfield(L, t, "n");
    }
    (void)self;
    return;
  }
  }
}

/* Pushes element i's result (any template). */
static void push_element(lua_State *L, lmap *lm, uint64_t i) {
  const lmap_desc *d = &lm->d;
  const char *out = suiro_map_output(lm->m);
  switch (d->out_kind) {
  case LMAP_OUT_SCALAR:
  case LMAP_OUT_ARRAY: {
    size_t es = wire_type_size((int)d->out_type);
    if (d->out_kind == LMAP_OUT_ARRAY) {
      larray *a = larray_new(L, (int)d->out_type, d->width);
      memcpy(a->data, out + i * d->width * es, d->width * es);
      return;
    }
    const char *p = out + i * es;
    switch (d->out_type) {
    case WIRE_T_F64: { double v; memcpy(&v, p, 8); lua_pushnumber(L, v); break; }
    case WIRE_T_F32: { float v; memcpy(&v, p, 4); lua_pushnumber(L, v); break; }
    case WIRE_T_I64: { int64_t v; memcpy(&v, p, 8); lua_pushinteger(L, v); break; }
    case WIRE_T_I32: { int32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); break; }
    case WIRE_T_U8: lua_pushinteger(L, *(const uint8_t *)p); break;
    case WIRE_T_BOOL:
      if (*(const uint8_t *)p == WIRE_NA_BOOL) lsuiro_push_na(L);
      else lua_pushboolean(L, *(const uint8_t *)p);
      break;
    default: lua_pushnil(L);
    }
    return;
  }
  case LMAP_OUT_RECORD: {
    lua_createtable(L, 0, (int)d->nfields);
    const char *nm = (const char *)suiro_map_desc(lm->m) + d->names_off;
    for (uint32_t k = 0; k < d->nfields; k++) {
      size_t es = wire_type_size((int)d->field_type[k]);
      const char *p = out + d->field_off[k] + i * es;
      switch (d->field_type[k]) {
      case WIRE_T_F64: { double v; memcpy(&v, p, 8); lua_pushnumber(L, v); break; }
      case WIRE_T_F32: { float v; memcpy(&v, p, 4); lua_pushnumber(L, v); break; }
      case WIRE_T_I64: { int64_t v; memcpy(&v, p, 8); lua_pushinteger(L, v); break; }
      case WIRE_T_I32: { int32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); break; }
      case WIRE_T_U8: lua_pushinteger(L, *(const uint8_t *)p); break;
      case WIRE_T_BOOL: lua_pushboolean(L, *(const uint8_t *)p == 1); break;
      default: lua_pushnil(L);
      }
      lua_setfield(L, -2, nm);
      nm += strlen(nm) + 1;
    }
    return;
  }
  default: {
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
    return;
  }
  }
}

/* Waits for the run in flight (if any) and hands out its results: the tail of collect and run. */
static int finish_run(lua_State *L, lmap *lm, double timeout) {
  if (lm->started && !wait_run(L, lm, 1, timeout)) {
    lua_pushnil(L);
    lua_pushliteral(L, "timeout");
    return 2;
  }
  lm->collected = 1;
  raise_failure(L, lm);
  push_results(L, lm, 1);
  if (!lm->prepared) { /* results are copies: give the region back now, warm for the next map */
    suiro_map_free(lm->m);
    lm->m = NULL;
  }
  return 1;
}

/* m:collect([timeout]) -> results | nil, "timeout" */
static int l_map_collect(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (lm->collected && !lm->prepared) return luaL_error(L, "map:collect: the results were collected already");
  if (!lm->m) return luaL_error(L, "map:collect: this map was freed");
  if (!lm->started && !lm->finished) return luaL_error(L, "map:collect: this map is not running (prepared maps: pm:run())");
  double timeout = -1;
  if (lua_isnoneornil(L, 2)) { /* the map's own timeout, if it was given one */
    lua_getiuservalue(L, 1, 2);
    lua_getfield(L, -1, "timeout_s");
    timeout = luaL_optnumber(L, -1, -1);
    lua_pop(L, 2);
  } else {
    timeout = luaL_checknumber(L, 2);
  }
  if (timeout >= 1e12) timeout = -1;
  return finish_run(L, lm, timeout);
}

static int l_map_cancel(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (lm->m && lm->started) suiro_map_cancel(lm->m);
  return 0;
}

static int l_map_ready(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  int ready = !lm->started || (lm->m && suiro_map_wait(lm->m, 0) == SUIRO_OK);
  if (ready && lm->started) {
    lm->started = 0;
    lm->finished = 1;
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
    if (!lm->stream) { /* hand out everything, in index order, once the run is over */
      if (lm->started && !wait_run(L, lm, lua_upvalueindex(1), -1)) return 0;
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
    if (suiro_map_wait(lm->m, 0.001) == SUIRO_OK) {
      lm->started = 0;
      lm->finished = 1;
    }
  }
}

static int l_map_results(lua_State *L) {
  lmap *lm = checkmap(L, 1);
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
  if (!lm->m) return luaL_error(L, "map:run: this map was freed");
  if (lm->started) return luaL_error(L, "map:run: the previous run is still going");
  if (!lua_isnoneornil(L, 2)) {
    larray *a = larray_test(L, 2);
    if (lm->d.in_kind != LMAP_IN_ARRAY || !a || a->type != (int)lm->d.in_type || (uint64_t)a->n != lm->n)
      return luaL_error(L, "map:run: a new input must be a suiro.array of the same type and length as the "
                           "prepared one (%d %s elements); prepare another map for other inputs",
                        (int)lm->n, lm->d.in_kind == LMAP_IN_ARRAY ? wire_type_name((int)lm->d.in_type) : "table");
    memcpy((char *)suiro_map_desc(lm->m) + lm->d.data_off, a->data, larray_bytes(a));
  }
  lua_getiuservalue(L, 1, 1);
  lpool *lp = lsuiro_checkpool(L, -1);
  lua_pop(L, 1);
  if (suiro_map_start(lm->m, lp->default_timeout) != SUIRO_OK) return luaL_error(L, "map:run: %s", suiro_last_error());
  lm->started = 1;
  lm->finished = 0;
  lm->collected = 0;
  lm->t0 = suiro_now();
  double timeout = luaL_optnumber(L, 3, -1);
  return finish_run(L, lm, timeout >= 1e12 ? -1 : timeout);
}

static int l_map_gc(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  if (lm->m) suiro_map_free(lm->m); /* cancels and waits for a run still going */
  lm->m = NULL;
  return 0;
}

static int l_map_tostring(lua_State *L) {
  lmap *lm = checkmap(L, 1);
  lua_pushfstring(L, "suiro.map(%I elements, %s)", (lua_Integer)lm->n,
                  lm->started ? "running" : lm->collected ? "collected" : "ready");
  return 1;
}

static const luaL_Reg map_methods[] = {
  { "collect", l_map_collect }, { "cancel", l_map_cancel },   { "ready", l_map_ready },
  { "progress", l_map_progress }, { "results", l_map_results }, { "run", l_map_run },
  { "free", l_map_gc },          { NULL, NULL },
};

/* Registers suiro.map and suiro.range; adds core.map_new and core.range to the table on top. */
void lmap_open(lua_State *L) {
  lsuiro_newmt(L, "suiro.map", &lsuiro_key_map);
  luaL_newlib(L, map_methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.map_methods");
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, l_map_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.range", &lsuiro_key_range);
  lua_pushcfunction(L, l_range_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, l_range_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_range_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, l_range_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushliteral(L, "suiro.range");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_map_new);
  lua_setfield(L, -2, "map_new");
  lua_pushcfunction(L, l_range);
  lua_setfield(L, -2, "range");
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.map_methods");
  lua_setfield(L, -2, "map_methods");
}
