/*
 * ldec.c — the wire format -> Lua values (docs/wire-format.md): the inverse of lenc.c. Decoding
 * never trusts its input: the engine's reader validates every item, and this file checks what is
 * Lua's to check (dimensions a suiro.array can hold, keys, counts it can allocate). Large arrays
 * arrive as views (suiro_zc_open), private copy-on-write mappings (suiro_zc_private); dicts whose
 * key order is not the sorted one keep it (lrecord.c); functions arrive only in workers
 * (lworker.c decodes them) or as descriptors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"
#include "suiro_bind.h"

/* ---- decoding -------------------------------------------------------------------------------- */

typedef lcodec_dec dec;

static int dec_fail(dec *d) {
  return luaL_error(d->L, "cannot decode value: %s", wire_reader_error(d->r));
}

static void dec_next(dec *d, wire_item *it) {
  int st = wire_next(d->r, it);
  if (st != WIRE_OK) {
    if (st == WIRE_END) luaL_error(d->L, "cannot decode value: truncated");
    dec_fail(d);
  }
}

static void dec_value(dec *d, wire_item *it);
static void remember(dec *d);
static void push_refdesc(lua_State *L, const wire_ref *r);
static void dec_funcdesc(dec *d, wire_item *it);

static void remember(dec *d) { /* the container on top of the stack gets the next ordinal */
  if (!d->refs) { d->nref++; return; }
  lua_pushvalue(d->L, -1);
  lua_rawseti(d->L, d->refs, d->nref++);
}

static void dec_array_like(dec *d, wire_item *it) {
  lua_State *L = d->L;
  larray *a = larray_new(L, it->type, (int64_t)it->n);
  size_t bytes = larray_bytes(a);
  if (bytes) memcpy(a->data, it->data, bytes);
  if (it->tag == WIRE_NDARRAY) {
    if (it->ndim > LARRAY_MAX_NDIM)
      luaL_error(L, "cannot decode value: an array of %d dimensions at byte %d (suiro.array has at most %d)", it->ndim,
                 (int)it->pos, LARRAY_MAX_NDIM);
    a->nd = 1;
    a->ndim = it->ndim;
    a->order = it->flag;
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

/* A REF described: { name, type, order, flags, offset, length, shape } (flags as the bits of a Lua
 * integer). */
static void push_refdesc(lua_State *L, const wire_ref *r) {
  lua_createtable(L, 0, 7);
  lua_pushlstring(L, r->name.ptr, r->name.len);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, wire_type_name(r->type));
  lua_setfield(L, -2, "type");
  lua_pushstring(L, r->order == WIRE_ORDER_F ? "F" : "C");
  lua_setfield(L, -2, "order");
  lua_pushinteger(L, (lua_Integer)r->flags);
  lua_setfield(L, -2, "flags");
  lua_pushinteger(L, (lua_Integer)r->offset);
  lua_setfield(L, -2, "offset");
  lua_pushinteger(L, (lua_Integer)r->length);
  lua_setfield(L, -2, "length");
  lua_createtable(L, r->ndim, 0);
  for (int k = 0; k < r->ndim; k++) {
    lua_pushinteger(L, (lua_Integer)r->dims[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "shape");
  lvalues_push_mt(L, &lvalues_key_refdesc);
  lua_setmetatable(L, -2);
}

/* A FUNC described: { lang, key (the bits of a Lua integer), name (or nil), captured = { n, ... } }.
 * It is a container: back-references to it (a recursive function) give this table. */
static void dec_funcdesc(dec *d, wire_item *it) {
  static const char *const langs[] = { NULL, "lua", "python", "r" };
  lua_State *L = d->L;
  lua_createtable(L, 0, 4);
  remember(d);
  lua_pushstring(L, it->flag >= 1 && it->flag <= 3 ? langs[it->flag] : "?");
  lua_setfield(L, -2, "lang");
  lua_pushinteger(L, (lua_Integer)it->i);
  lua_setfield(L, -2, "key");
  lvalues_push_mt(L, &lvalues_key_funcdesc);
  lua_setmetatable(L, -2);
  uint64_t n = it->n;
  wire_item c;
  dec_next(d, &c);
  dec_value(d, &c); /* the name: a str or nil */
  lua_setfield(L, -2, "name");
  lua_createtable(L, n - 1 < (1u << 26) ? (int)(n - 1) : 0, 1);
  for (uint64_t i = 1; i < n; i++) {
    dec_next(d, &c);
    dec_value(d, &c);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
  lua_pushinteger(L, (lua_Integer)(n - 1));
  lua_setfield(L, -2, "n");
  lua_setfield(L, -2, "captured");
}

/* A typed reference becomes a view: a private copy-on-write mapping of the shared pages (the sender
 * added a reference for us; the view owns it and drops it when collected or released). */
static void dec_ref_view(dec *d, wire_item *it) {
  lua_State *L = d->L;
  const wire_ref *r = &it->ref;
  if (r->type < 1 || r->type > WIRE_T_MAX)
    luaL_error(L, "cannot decode value: a %s reference cannot be viewed here (byte %d)", wire_type_name(r->type),
               (int)it->pos);
  if (r->ndim > LARRAY_MAX_NDIM) luaL_error(L, "cannot decode value: %d dimensions (at most %d)", r->ndim, LARRAY_MAX_NDIM);
  suiro_view v;
  if (suiro_zc_open(r, &v) != SUIRO_OK)
    luaL_error(L, "cannot decode value: %s (byte %d)", suiro_last_error(), (int)it->pos);
  void *copy = suiro_zc_private(v.buf, v.data, (size_t)v.bytes); /* a private copy-on-write mapping */
  if (!copy) {
    suiro_buf_unref(v.buf);
    luaL_error(L, "cannot decode value: %s (byte %d)", suiro_last_error(), (int)it->pos);
  }
  larray *a = larray_new_view(L, r->type, (int64_t)v.count, copy, 1, v.buf, larray_release_view, !v.fresh);
  if (r->ndim >= 1) {
    a->nd = 1;
    a->ndim = r->ndim;
    a->order = r->order;
    for (int k = 0; k < r->ndim; k++) a->shape[k] = (int64_t)r->dims[k];
  }
}

static void dec_value(dec *d, wire_item *it) {
  lua_State *L = d->L;
  luaL_checkstack(L, 8, "value nested too deeply");
  switch (it->tag) {
  case WIRE_NIL: lua_pushnil(L); return;
  case WIRE_BOOL:
    if (it->flag == WIRE_NA_BOOL) lvalues_push_na(L);
    else lua_pushboolean(L, it->flag);
    return;
  case WIRE_I64: lua_pushinteger(L, (lua_Integer)it->i); return;
  case WIRE_F64: lua_pushnumber(L, it->f); return;
  case WIRE_STR: lua_pushlstring(L, it->data, (size_t)it->n); return;
  case WIRE_BYTES: lvalues_push_bytes(L, it->data, (size_t)it->n); return;
  case WIRE_ARRAY:
  case WIRE_NDARRAY:
  case WIRE_DATE:
  case WIRE_TIMESTAMP: dec_array_like(d, it); return;
  case WIRE_STRS: {
    lua_createtable(L, it->n < (1u << 26) ? (int)it->n : 0, 1);
    wire_strs_iter si = wire_strs_begin(&it->strs);
    const char *s;
    size_t len;
    lua_Integer i = 1;
    while (wire_strs_next(&si, &s, &len)) {
      if (s) lua_pushlstring(L, s, len);
      else lvalues_push_na(L);
      lua_rawseti(L, -2, i++);
    }
    lua_pushinteger(L, (lua_Integer)it->n);
    lua_setfield(L, -2, "n");
    lvalues_setmt_strings(L);
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
    int order = 0, sorted = 1, nils = 0, only_n = 0;
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
        if (lrecord_cmp(&a, &b) >= 0) sorted = 0;
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
      if (n == 1 && kl == 1 && ks[0] == 'n') only_n = 1;
      dec_next(d, &v);
      dec_value(d, &v);
      if (lua_isnil(L, -1)) nils = 1;
      lua_rawset(L, t);
    }
    if (n == 0 || !sorted || nils || only_n) {
      /* keep the order (and which keys came with nil) so the dict goes back as it came */
      if (!order) {
        lua_newtable(L);
        order = lua_gettop(L);
      }
      for (uint64_t i = 1; i <= n; i++) {
        lua_rawgeti(L, order, (lua_Integer)i);
        lua_pushvalue(L, -1);
        int isnil = lua_rawget(L, t) == LUA_TNIL;
        lua_pop(L, 1);
        lua_pushboolean(L, isnil);
        lua_rawset(L, order);
      }
      lrecord_set_order(L, t, order);
    }
    if (order) lua_remove(L, order);
    return;
  }
  case WIRE_FRAME: {
    /* the reader has checked the names (str) and the columns (kind and length) */
    lframe_push(L, (int64_t)it->nrow);
    int f = lua_gettop(L);
    for (uint64_t i = 1; i <= it->n; i++) {
      wire_item k, v;
      dec_next(d, &k);
      lua_pushlstring(L, k.data, (size_t)k.n);
      dec_next(d, &v);
      dec_value(d, &v);
      lframe_append(L, f);
    }
    return;
  }
  case WIRE_ERROR:
    lerror_push(L, it->text[0].ptr, it->text[0].len, it->text[1].ptr, it->text[1].len, it->text[2].ptr,
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
    if (d->describe) {
      dec_funcdesc(d, it);
      return;
    }
    if (!d->func) luaL_error(L, "cannot decode value: a function arrived where none can run (at byte %d)", (int)it->pos);
    d->func(L, d, it, d->func_ud);
    return;
  case WIRE_RANGE:
    lrange_push(L, it->i, it->step, it->n);
    return;
  case WIRE_BACKREF:
    if (!d->refs) luaL_error(L, "cannot decode value: unexpected back-reference at byte %d", (int)it->pos);
    lua_rawgeti(L, d->refs, (lua_Integer)it->i);
    return;
  case WIRE_REF:
    if (d->describe) { /* suiro.wire.decode(s, { describe = true }): what the reference says */
      push_refdesc(L, &it->ref);
      return;
    }
    if (it->ref.type == WIRE_REF_CHAN) { /* a channel endpoint, claimed by this process */
      lchan_push_ref(L, &it->ref);
      return;
    }
    dec_ref_view(d, it);
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
  d->describe = 0;
  d->refs = 0;
  d->nref = 0;
  d->func = NULL;
  d->func_ud = NULL;
  d->r = &d->own_r;
  if (wire_reader_init(d->r, buf, len) != WIRE_OK) dec_fail(d);
  if (d->r->shared) {
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

/* One value (suiro.wire.decode): pushes it. describe: REF and FUNC items become descriptors. */
int lcodec_decode_value(lua_State *L, const void *buf, size_t len, int describe) {
  dec d;
  dec_init(&d, L, buf, len);
  d.describe = describe;
  wire_item it;
  dec_next(&d, &it);
  dec_value(&d, &it);
  int st = wire_next(d.r, &it);
  if (st == WIRE_ERR) dec_fail(&d);
  if (st != WIRE_END) luaL_error(L, "cannot decode value: more than one value (at byte %d)", (int)it.pos);
  if (d.refs) lua_remove(L, d.refs);
  return 1;
}

/* Decoder for the worker's task payloads: lworker.c drives it (d lives on the C stack). When
 * the buffer holds back-references, a table of containers is pushed on the Lua stack. */
void lcodec_dec_init(lcodec_dec *d, lua_State *L, const void *buf, size_t len, lcodec_func_fn func, void *ud) {
  dec_init(d, L, buf, len);
  d->func = func;
  d->func_ud = ud;
}

/* The same over a reader that has already read part of the buffer (suiro_exec read the task list
 * and its function item): decoding continues where it stopped, with nref containers counted. */
void lcodec_dec_init_at(lcodec_dec *d, lua_State *L, wire_reader *r, lua_Integer nref, lcodec_func_fn func,
                        void *ud) {
  d->L = L;
  d->describe = 0;
  d->refs = 0;
  d->nref = nref;
  d->func = func;
  d->func_ud = ud;
  d->r = r;
  if (d->r->shared) {
    lua_newtable(L);
    d->refs = lua_gettop(L);
  }
}

int lcodec_dec_item(lcodec_dec *d, wire_item *it) {
  int st = wire_next(d->r, it);
  if (st == WIRE_ERR) dec_fail(d);
  return st;
}

void lcodec_dec_value(lcodec_dec *d, wire_item *it) { dec_value(d, it); }

