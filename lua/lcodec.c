/*
 * lcodec.c — Lua values <-> the wire format (docs/wire-format.md).
 *
 *   Lua                         wire
 *   nil, boolean, suiro.NA      NIL, BOOL (suiro.NA: BOOL NA)
 *   integer / float             I64 (I48 when small) / F64
 *   string / suiro.bytes        STR / BYTES
 *   sequence {1, 2, 3}          LIST        (a table with n = N is a list of N with holes)
 *   {a = 1, b = 2}              DICT        (keys in the order they arrived in or were given
 *                                            with suiro.dict, else sorted; see KEYORDER)
 *   suiro.strings {...}         STRS
 *   suiro.array                 ARRAY / NDARRAY / DATE / TIMESTAMP / FACTOR (or REF: zero-copy)
 *   suiro.frame                 FRAME
 *   suiro.call {...}            CALL
 *   error object                ERROR
 *   REF / FUNC descriptors      REF / FUNC  (suiro.wire.decode(s, { describe = true }) makes them)
 *   Lua function                FUNC (prototype key + captured values; bytecode in the pool's
 *                               blob store), C function of a loaded module: FUNC by name
 *   the same table twice        BACKREF (cycles and shared parts survive)
 *
 * Everything else (userdata, coroutines, tables with other keys) raises at send time with the
 * path to the offending part: "submit: argument 2.conn: userdata (FILE*) cannot be sent".
 *
 * Function identity: a Lua function is sent as the 64-bit hash of its bytecode plus its
 * upvalues. The bytecode goes once per pool into the pool's blob store; workers load it on first
 * sight and cache it by key (lworker.c). Globals (_ENV) are not sent: the worker rebinds them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larray.h"
#include "lsuiro.h"
#include "suiro_bind.h"
#include "lvalues.h"

/* KEYORDER: weak table, record -> its key order: a table with the keys at 1..m and, for each
 * key k, ord[k] = true when k is sent even while t[k] is nil (it arrived with a nil value, or
 * suiro.dict listed it without one), false otherwise. Recorded for decoded dicts whose keys are
 * not sorted, that hold nil values, or that would read as a list ({} and { n = 3 }); and by
 * suiro.dict. A record without one sends its keys sorted. */
#define KEYORDER "suiro.keyorder"
#define FNINFO "suiro.fninfo"       /* weak table: function -> { key, nups, blob published } */
#define CNAMES "suiro.cnames"       /* C function -> "module.name" */

/* ---- encoding -------------------------------------------------------------------------------- */

typedef struct seg { int kind; lua_Integer i; const char *s; } seg; /* path segment */
enum { SEG_ARG, SEG_INDEX, SEG_KEY, SEG_UPVAL, SEG_NAMED, SEG_RESULT, SEG_VALUE };

#define SEEN_INLINE 8 /* the first containers are tracked in C; a Lua table takes the rest */

typedef struct enc {
  lcodec_ctx *c;
  wire_writer *w;
  int seen;              /* stack index of the visited table (0 until needed) */
  int nseen;             /* entries in seen_ptr */
  const void *seen_ptr[SEEN_INLINE];
  uint64_t seen_ord[SEEN_INLINE];
  uint64_t ncontainers;  /* LIST/DICT/FUNC opened so far: the BACKREF ordinal space */
  int nseg;
  seg path[WIRE_MAX_DEPTH + 8];
} enc;

static void push_path(lua_State *L, enc *e) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (e->c->list > 0) {
    lua_pushfstring(L, "lists[%I] ", e->c->list);
    luaL_addvalue(&b);
  }
  for (int k = 0; k < e->nseg; k++) {
    const seg *s = &e->path[k];
    switch (s->kind) {
    case SEG_ARG: lua_pushfstring(L, "argument %I", s->i); break;
    case SEG_RESULT: lua_pushfstring(L, "result %I", s->i); break;
    case SEG_VALUE: lua_pushliteral(L, "value"); break;
    case SEG_INDEX: lua_pushfstring(L, "[%I]", s->i); break;
    case SEG_KEY: lua_pushfstring(L, ".%s", s->s); break;
    case SEG_UPVAL: lua_pushfstring(L, "%supvalue '%s'", k ? " " : "", s->s); break;
    case SEG_NAMED: lua_pushfstring(L, "%s%s", k ? "." : "", s->s); break;
    }
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
}

static int enc_fail(lua_State *L, enc *e, const char *what) {
  /* the message is abandoned: give back the references granted to REFs written so far */
  if (e->w->status == WIRE_OK && e->w->len >= 8) suiro_zc_revoke(e->w->buf, e->w->len);
  wire_writer_free(e->w);
  push_path(L, e);
  return luaL_error(L, "%s: %s: %s", e->c->verb, lua_tostring(L, -1), what);
}

static void enc_value(enc *e, int idx);

static void with_seg(enc *e, int kind, lua_Integer i, const char *s) {
  if (e->nseg < (int)(sizeof e->path / sizeof e->path[0])) e->path[e->nseg] = (seg){ kind, i, s };
  e->nseg++;
}

/* Registers a table/function as the next shareable container; if it was seen already, writes a
 * BACKREF and returns 1. The common case (a handful of containers) stays in C. */
static int enc_shared(enc *e, int idx) {
  lua_State *L = e->c->L;
  const void *ptr = lua_topointer(L, idx);
  for (int i = 0; i < e->nseen; i++) {
    if (e->seen_ptr[i] == ptr) {
      wire_put_backref(e->w, e->seen_ord[i]);
      return 1;
    }
  }
  if (e->seen) { /* beyond the inline entries: a table in the registry (not on the stack, where
                  * it would shift the indices our callers hold) */
    lua_getfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TNUMBER) {
      uint64_t ord = (uint64_t)lua_tointeger(L, -1);
      lua_pop(L, 2);
      wire_put_backref(e->w, ord);
      return 1;
    }
    lua_pop(L, 2);
  }
  uint64_t ord = e->ncontainers++;
  if (e->nseen < SEEN_INLINE) {
    e->seen_ptr[e->nseen] = ptr;
    e->seen_ord[e->nseen++] = ord;
    return 0;
  }
  if (!e->seen) {
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
    e->seen = 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.enc_seen");
  lua_pushvalue(L, idx);
  lua_pushinteger(L, (lua_Integer)ord);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return 0;
}

static int cmp_keys(const void *a, const void *b) {
  const wire_str *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->ptr, y->ptr, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Pushes the recorded key order of the table at t (see KEYORDER), or nil; 1 when there is one. */
static int push_keyorder(lua_State *L, int t) {
  t = lua_absindex(L, t);
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEYORDER) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return 0;
  }
  lua_pushvalue(L, t);
  int ty = lua_rawget(L, -2);
  lua_remove(L, -2);
  return ty == LUA_TTABLE;
}

static int has_keyorder(lua_State *L, int t) {
  int has = push_keyorder(L, t);
  lua_pop(L, 1);
  return has;
}

/* The string keys of the record at t in the order they are sent: the recorded order (keys
 * present, or marked to be sent as nil), then any other keys sorted; without a recorded order,
 * all sorted. Pushes the order table (or nil) and an array of *count keys, which it returns; the
 * key strings live as long as t and the order table do. */
static wire_str *dict_keys(lua_State *L, int t, lua_Integer *count) {
  t = lua_absindex(L, t);
  int has = push_keyorder(L, t);
  int ord = lua_gettop(L);
  lua_Integer m = has ? (lua_Integer)lua_rawlen(L, ord) : 0, nt = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    nt++;
    lua_pop(L, 1);
  }
  wire_str *keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(m + nt + 1), 0);
  lua_Integer k = 0;
  for (lua_Integer i = 1; i <= m; i++) {
    if (lua_rawgeti(L, ord, i) == LUA_TSTRING) {
      lua_pushvalue(L, -1);
      int send = lua_rawget(L, t) != LUA_TNIL;
      lua_pop(L, 1);
      if (!send) {
        lua_pushvalue(L, -1);
        send = lua_rawget(L, ord) == LUA_TBOOLEAN && lua_toboolean(L, -1);
        lua_pop(L, 1);
      }
      if (send) {
        keys[k].ptr = lua_tolstring(L, -1, &keys[k].len);
        k++;
      }
    }
    lua_pop(L, 1);
  }
  lua_Integer first = k;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    if (has) {
      lua_pushvalue(L, -1);
      int listed = lua_rawget(L, ord) != LUA_TNIL;
      lua_pop(L, 1);
      if (listed) continue;
    }
    keys[k].ptr = lua_tolstring(L, -1, &keys[k].len);
    k++;
  }
  qsort(keys + first, (size_t)(k - first), sizeof *keys, cmp_keys);
  *count = k;
  return keys;
}

/* Writes the record at idx as a DICT, its values named by kind (SEG_KEY or SEG_NAMED). */
static void enc_dict(enc *e, int idx, int kind) {
  lua_State *L = e->c->L;
  lua_Integer count;
  wire_str *keys = dict_keys(L, idx, &count);
  wire_put_dict(e->w, (uint64_t)count);
  for (lua_Integer i = 0; i < count; i++) {
    wire_put_str(e->w, keys[i].ptr, keys[i].len);
    lua_pushlstring(L, keys[i].ptr, keys[i].len);
    lua_rawget(L, idx);
    with_seg(e, kind, 0, keys[i].ptr);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_pop(L, 2); /* keys and the order table */
}

static void enc_table(enc *e, int idx) {
  lua_State *L = e->c->L;
  luaL_checkstack(L, 8, "nested too deeply");
  /* Classify: a list (1..n, optionally with an integer field n), or a dict of string keys. */
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  lua_Integer count = 0, nkeys_str = 0, max_int = 0;
  int bad = 0, has_n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    int kt = lua_type(L, -2);
    if (kt == LUA_TSTRING) {
      nkeys_str++;
      size_t kl;
      const char *k = lua_tolstring(L, -2, &kl);
      if (kl == 1 && k[0] == 'n' && lua_isinteger(L, -1)) has_n = 1;
    } else if (lua_isinteger(L, -2)) {
      lua_Integer k = lua_tointeger(L, -2);
      if (k < 1) bad = 1;
      if (k > max_int) max_int = k;
    } else {
      bad = 1;
    }
    lua_pop(L, 1);
  }
  if (bad) {
    /* name the first key that is neither a positive integer nor a string */
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING && !(lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1)) {
        const char *k = luaL_tolstring(L, -1, NULL);
        enc_fail(L, e, lua_pushfstring(L, "table with a key of type %s (%s) cannot be sent",
                                       luaL_typename(L, -2), k));
      }
    }
  }
  lua_Integer list_n = -1;
  if (nkeys_str == 0) {
    list_n = count == n ? n : -1;
    if (list_n < 0) { /* integer keys with holes: name the first missing one */
      lua_Integer miss = 1;
      while (miss < max_int && lua_rawgeti(L, idx, miss) != LUA_TNIL) {
        lua_pop(L, 1);
        miss++;
      }
      if (miss < max_int) lua_pop(L, 1);
      enc_fail(L, e, lua_pushfstring(L, "list with holes (key %I but no key %I): give it a field n "
                                        "(table.pack) to send nils, or use string keys", max_int, miss));
    }
  } else if (nkeys_str == 1 && has_n) {
    lua_getfield(L, idx, "n");
    lua_Integer nn = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (nn >= max_int && nn >= 0) { /* table.pack style: a list with holes */
      /* every hole is a nil item on the wire: a huge n on a few items would write gigabytes */
      lua_Integer items = count - 1;
      if (nn - items > ((lua_Integer)1 << 20) && nn - items > items)
        enc_fail(L, e, lua_pushfstring(L, "field n = %I claims %I nil items beside %I values: too many "
                                          "holes to send", nn, nn - items, items));
      list_n = nn;
    }
  }
  /* {} and { n = 3 } are records when they came as one (or suiro.dict made them) */
  if (list_n >= 0 && (count == 0 || (count == 1 && has_n)) && has_keyorder(L, idx)) list_n = -1;
  if (list_n < 0 && nkeys_str != count) {
    /* mixed: name an integer key and a string key */
    lua_pushnil(L);
    const char *skey = NULL;
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING && !skey) skey = lua_tostring(L, -1);
    }
    enc_fail(L, e, lua_pushfstring(L, "table mixes list items (1..%I) and string keys (\"%s\"): make it all one "
                                      "or the other", count - nkeys_str, skey ? skey : "?"));
  }
  if (list_n >= 0) {
    if (list_n == 0 && count == 0) {
      wire_put_list(e->w, 0);
      return;
    }
    wire_put_list(e->w, (uint64_t)list_n);
    for (lua_Integer i = 1; i <= list_n; i++) {
      lua_rawgeti(L, idx, i);
      with_seg(e, SEG_INDEX, i, NULL);
      enc_value(e, lua_gettop(L));
      e->nseg--;
      lua_pop(L, 1);
    }
    return;
  }
  enc_dict(e, idx, SEG_KEY);
}

static void enc_call(enc *e, int idx) {
  lua_State *L = e->c->L;
  lua_getfield(L, idx, "target");
  lua_getfield(L, idx, "source");
  size_t len;
  if (!lua_isnil(L, -2)) {
    const char *t = lua_tolstring(L, -2, &len);
    wire_put_call(e->w, WIRE_CALL_NAME, (wire_str){ t, len });
  } else {
    const char *s = lua_tolstring(L, -1, &len);
    wire_put_call(e->w, WIRE_CALL_SOURCE, (wire_str){ s ? s : "", s ? len : 0 });
  }
  lua_pop(L, 2);
  lua_getfield(L, idx, "args");
  int args = lua_gettop(L);
  lua_getfield(L, args, "n");
  lua_Integer n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, args);
  lua_pop(L, 1);
  wire_put_list(e->w, (uint64_t)n);
  e->ncontainers++;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, args, i);
    with_seg(e, SEG_INDEX, i, NULL);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  e->ncontainers++;
  if (lua_getfield(L, idx, "named") == LUA_TTABLE) enc_dict(e, lua_gettop(L), SEG_NAMED); /* as they came */
  else wire_put_dict(e->w, 0);
  lua_pop(L, 1);
}

static void enc_error_obj(enc *e, int idx) {
  lua_State *L = e->c->L;
  wire_str f[3];
  static const char *names[] = { "class", "message", "traceback" };
  for (int i = 0; i < 3; i++) {
    lua_getfield(L, idx, names[i]);
    f[i].ptr = lua_isstring(L, -1) ? lua_tolstring(L, -1, &f[i].len) : "";
    if (!lua_isstring(L, -1)) f[i].len = 0;
  }
  lua_getfield(L, idx, "index");
  int64_t index = lua_isinteger(L, -1) ? (int64_t)((uint64_t)lua_tointeger(L, -1) - 1) : -1;
  wire_put_error(e->w, f[0], f[1], f[2], index);
  lua_pop(L, 4);
}

/* FACTOR: codes (checked against the levels, so a bad code is refused here with its path rather
 * than by a reader) and the levels from the array's user value. */
static void enc_factor(enc *e, int idx, larray *a) {
  lua_State *L = e->c->L;
  lua_Integer nl = larray_push_levels(L, idx);
  const int32_t *src = a->data;
  for (int64_t i = 0; i < a->n; i++)
    if (src[i] < WIRE_NA_CODE || src[i] >= nl)
      enc_fail(L, e, lua_pushfstring(L, "factor code %d (element %I) is not in -1..%I", (int)src[i],
                                     (lua_Integer)i + 1, nl - 1));
  int32_t *codes = wire_put_factor(e->w, (uint64_t)a->n, a->ordered, (uint64_t)nl);
  if (codes && a->n) memcpy(codes, src, (size_t)a->n * 4);
  for (lua_Integer k = 1; k <= nl; k++) {
    if (lua_rawgeti(L, -1, k) != LUA_TSTRING)
      enc_fail(L, e, lua_pushfstring(L, "factor level %I is a %s, not a string", k, luaL_typename(L, -1)));
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    wire_strs_add(e->w, s, len);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The array a at stack index idx: its kind decides the item. */
/* Large plain arrays cross by reference: the bytes are written into a region once (or are there
 * already: arrays made big, views received) and the receiver maps the same pages. */
static int enc_array_ref(enc *e, larray *a, size_t bytes) {
  if (!e->c->pool || bytes < suiro_zc_floor || a->kind != LARRAY_PLAIN || a->ndim > WIRE_MAX_NDIM ||
      !suiro_zc_active())
    return 0;
  if (larray_is_nd(a) && a->ndim == 0) return 0; /* a 0-d array has no reference form */
  if (a->region && !suiro_buf_name(a->region)) return 0; /* its pool stopped: send a copy */
  if (!a->region && !larray_to_region(e->c->L, a)) return 0;
  uint64_t dims[LARRAY_MAX_NDIM];
  int nd = larray_is_nd(a) ? a->ndim : 0;
  for (int d = 0; d < nd; d++) dims[d] = (uint64_t)a->shape[d];
  if (suiro_zc_put(e->w, a->region, a->data, bytes, a->type, a->order, nd, dims) != WIRE_OK) return 0;
  if (!a->readonly) a->shared = 1; /* the sender's next write copies first */
  return 1;
}

static void enc_array(enc *e, int idx, larray *a) {
  size_t bytes = larray_bytes(a);
  void *dst;
  if (enc_array_ref(e, a, bytes)) return;
  if (a->kind == LARRAY_DATE) {
    dst = wire_put_date(e->w, a->type, (uint64_t)a->n);
  } else if (a->kind == LARRAY_TIMESTAMP) {
    size_t tzlen;
    const char *tz = larray_tz(e->c->L, idx, &tzlen);
    dst = wire_put_timestamp(e->w, a->type, a->unit, (wire_str){ tz, tzlen }, (uint64_t)a->n);
  } else if (a->kind == LARRAY_FACTOR) {
    enc_factor(e, idx, a);
    return;
  } else if (larray_is_nd(a)) {
    uint64_t dims[LARRAY_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) dims[d] = (uint64_t)a->shape[d];
    dst = wire_put_ndarray(e->w, a->type, a->order, a->ndim, dims);
  } else {
    dst = wire_put_array(e->w, a->type, (uint64_t)a->n);
  }
  if (dst && bytes) memcpy(dst, a->data, bytes);
}

/* A string vector: n from its field n (else its length); elements strings, suiro.NA or nil. */
static void enc_strings(enc *e, int idx) {
  lua_State *L = e->c->L;
  lua_pushliteral(L, "n");
  lua_Integer n = lua_rawget(L, idx) == LUA_TNUMBER && lua_isinteger(L, -1) ? lua_tointeger(L, -1)
                                                                             : (lua_Integer)lua_rawlen(L, idx);
  lua_pop(L, 1);
  if (n < 0) enc_fail(L, e, lua_pushfstring(L, "string vector with n = %I", n));
  if (lua_rawgeti(L, idx, n + 1) != LUA_TNIL)
    enc_fail(L, e, lua_pushfstring(L, "string vector has an element %I past its n = %I: update n", n + 1, n));
  lua_pop(L, 1);
  wire_put_strs(e->w, (uint64_t)n);
  for (lua_Integer i = 1; i <= n; i++) {
    int t = lua_rawgeti(L, idx, i);
    if (t == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      wire_strs_add(e->w, s, len);
    } else if (t == LUA_TNIL || lsuiro_is_na(L, -1)) {
      wire_strs_add_na(e->w);
    } else {
      enc_fail(L, e, lua_pushfstring(L, "string vector element %I is a %s (string vectors hold strings and suiro.NA)",
                                     i, luaL_typename(L, -1)));
    }
    lua_pop(L, 1);
  }
}

/* FRAME: every column a 1-d suiro.array or a string vector of nrow elements. */
static void enc_refdesc(enc *e, int idx);
static void enc_frame(enc *e, int idx, lframe *f) {
  lua_State *L = e->c->L;
  luaL_checkstack(L, 8, "nested too deeply");
  lframe_push_parts(L, idx);
  int names = lua_gettop(L) - 1, cols = names + 1;
  wire_put_frame(e->w, (uint64_t)f->ncol, (uint64_t)f->nrow);
  for (lua_Integer i = 1; i <= f->ncol; i++) {
    size_t len;
    lua_rawgeti(L, names, i);
    const char *name = lua_tolstring(L, -1, &len);
    wire_put_str(e->w, name, len);
    lua_rawgeti(L, cols, i);
    int c = lua_gettop(L);
    with_seg(e, SEG_KEY, 0, name);
    larray *a = larray_test(L, c);
    int64_t n = -1;
    if (!a && lsuiro_is(L, c, &lsuiro_key_refdesc)) { /* suiro.wire.decode(s, { describe = true }) */
      enc_refdesc(e, c);
      e->nseg--;
      lua_pop(L, 2);
      continue;
    }
    if (a) {
      if (!a->data && a->n) enc_fail(L, e, "a released suiro.array cannot be sent");
      if (larray_is_nd(a)) enc_fail(L, e, "a frame column must be 1-d, this is an n-d array");
      n = a->n;
    } else if (lsuiro_is_strings(L, c)) {
      lua_pushliteral(L, "n");
      n = lua_rawget(L, c) == LUA_TNUMBER ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, c);
      lua_pop(L, 1);
    } else {
      enc_fail(L, e, lua_pushfstring(L, "a frame column must be a suiro.array or suiro.strings, got %s",
                                     luaL_typename(L, c)));
    }
    if (n != f->nrow)
      enc_fail(L, e, lua_pushfstring(L, "frame column has %I rows, the frame %I", (lua_Integer)n, (lua_Integer)f->nrow));
    if (a) enc_array(e, c, a);
    else enc_strings(e, c);
    e->nseg--;
    lua_pop(L, 2);
  }
  lua_pop(L, 2);
}

/* REF descriptor: { name =, type =, order =, flags =, offset =, length =, shape = {...} } */
static lua_Integer desc_int(enc *e, int idx, const char *field, int required) {
  lua_State *L = e->c->L;
  int t = lua_getfield(L, idx, field);
  if (t == LUA_TNIL && !required) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_isinteger(L, -1))
    enc_fail(L, e, lua_pushfstring(L, "a %s descriptor needs %s (an integer), got %s",
                                   lsuiro_is(L, idx, &lsuiro_key_refdesc) ? "ref" : "func", field, luaL_typename(L, -1)));
  lua_Integer v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

static void enc_refdesc(enc *e, int idx) {
  lua_State *L = e->c->L;
  wire_ref r;
  memset(&r, 0, sizeof r);
  uint64_t dims[WIRE_MAX_NDIM];
  int base = lua_gettop(L);
  if (lua_getfield(L, idx, "name") != LUA_TSTRING)
    enc_fail(L, e, lua_pushfstring(L, "a ref descriptor needs name (a string), got %s", luaL_typename(L, -1)));
  r.name.ptr = lua_tolstring(L, -1, &r.name.len);
  const char *ty = lua_getfield(L, idx, "type") == LUA_TSTRING ? lua_tostring(L, -1) : "";
  r.type = -1;
  for (int k = 0; k <= WIRE_REF_WIRE; k++)
    if (wire_type_name(k) && strcmp(ty, wire_type_name(k)) == 0) r.type = k;
  if (r.type < 0)
    enc_fail(L, e, lua_pushfstring(L, "a ref descriptor needs type (f64, f32, i64, i32, u8, bool, c128, bytes or "
                                      "wire), got %s", luaL_tolstring(L, -1, NULL)));
  int ot = lua_getfield(L, idx, "order");
  const char *o = ot == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (ot != LUA_TNIL && (!o || (strcmp(o, "C") != 0 && strcmp(o, "F") != 0)))
    enc_fail(L, e, "a ref descriptor's order must be \"C\" or \"F\"");
  r.order = o && o[0] == 'F' ? WIRE_ORDER_F : WIRE_ORDER_C;
  r.flags = (uint64_t)desc_int(e, idx, "flags", 0);
  r.offset = (uint64_t)desc_int(e, idx, "offset", 1);
  r.length = (uint64_t)desc_int(e, idx, "length", 1);
  if (lua_getfield(L, idx, "shape") == LUA_TTABLE) {
    lua_Integer nd = (lua_Integer)lua_rawlen(L, -1);
    if (nd > WIRE_MAX_NDIM) enc_fail(L, e, lua_pushfstring(L, "a ref descriptor with %I dimensions", nd));
    for (lua_Integer d = 0; d < nd; d++) {
      lua_rawgeti(L, -1, d + 1);
      if (!lua_isinteger(L, -1)) enc_fail(L, e, "a ref descriptor's shape must hold integers");
      dims[d] = (uint64_t)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    r.ndim = (int)nd;
  } else if (!lua_isnil(L, -1)) {
    enc_fail(L, e, "a ref descriptor's shape must be a table of extents");
  }
  r.dims = dims;
  wire_put_ref(e->w, &r); /* the writer checks the rules of a ref */
  lua_settop(L, base);
}

/* FUNC descriptor: { lang =, key =, name = (or nil), captured = { n =, ... } } */
static void enc_funcdesc(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (enc_shared(e, idx)) return;
  static const char *const langs[] = { NULL, "lua", "python", "r" };
  int lang = 0;
  if (lua_getfield(L, idx, "lang") == LUA_TSTRING)
    for (int k = 1; k <= 3; k++)
      if (strcmp(lua_tostring(L, -1), langs[k]) == 0) lang = k;
  if (!lang) enc_fail(L, e, "a func descriptor needs lang (\"lua\", \"python\" or \"r\")");
  lua_pop(L, 1);
  uint64_t key = (uint64_t)desc_int(e, idx, "key", 1);
  lua_Integer n = 0;
  int caps = 0;
  if (lua_getfield(L, idx, "captured") == LUA_TTABLE) {
    caps = lua_gettop(L);
    lua_getfield(L, caps, "n");
    n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, caps);
    lua_pop(L, 1);
  } else if (!lua_isnil(L, -1)) {
    enc_fail(L, e, "a func descriptor's captured values must be a table");
  }
  wire_put_func(e->w, lang, key, (uint64_t)n + 1);
  int nt = lua_getfield(L, idx, "name");
  if (nt == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    wire_put_str(e->w, s, len);
  } else if (nt == LUA_TNIL) {
    wire_put_nil(e->w);
  } else {
    enc_fail(L, e, "a func descriptor's name must be a string or nil");
  }
  lua_pop(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, caps, i);
    with_seg(e, SEG_INDEX, i, NULL);
    enc_value(e, lua_gettop(L));
    e->nseg--;
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* captured */
}

/* "string.format" for a C function of a loaded module, via a reverse map built once. */
static const char *cfunction_name(lua_State *L, int idx) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, CNAMES) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CNAMES);
  }
  int map = lua_gettop(L);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, map) == LUA_TSTRING) {
    lua_remove(L, map);
    return lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  /* (re)build from package.loaded: module.name for every C function found one level deep */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  int loaded = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, loaded)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_istable(L, -1)) {
      const char *mod = lua_tostring(L, -2);
      int modt = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, modt)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
          lua_pushvalue(L, -1);
          lua_rawget(L, map);
          int known = !lua_isnil(L, -1);
          lua_pop(L, 1);
          if (!known) {
            lua_pushvalue(L, -1);
            if (strcmp(mod, "_G") == 0) lua_pushstring(L, lua_tostring(L, -3));
            else lua_pushfstring(L, "%s.%s", mod, lua_tostring(L, -3));
            lua_rawset(L, map);
          }
        }
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushvalue(L, idx);
  lua_rawget(L, map);
  lua_remove(L, map);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  return lua_tostring(L, -1);
}

/* Pushes a new table with weak keys. */
static void new_weak_table(lua_State *L) {
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
}

/* Pushes registry[name], a table with weak keys, creating it on first use. */
static void push_weak_table(lua_State *L, const char *name) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, name) == LUA_TTABLE) return;
  lua_pop(L, 1);
  new_weak_table(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, name);
}

/* The name under which the table at idx is in package.loaded (pushed, and returned), or NULL
 * (nothing pushed). Answers are cached per table, weakly. */
static const char *module_name(lua_State *L, int idx) {
  push_weak_table(L, "suiro.modnames");
  int cache = lua_gettop(L);
  lua_pushvalue(L, idx);
  int t = lua_rawget(L, cache);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushboolean(L, 0); /* not a module, unless found below */
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, idx)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_replace(L, -4); /* the answer: the module's name */
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1); /* package.loaded */
    lua_pushvalue(L, idx);
    lua_pushvalue(L, -2);
    lua_rawset(L, cache);
  }
  lua_remove(L, cache);
  if (lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
  lua_pop(L, 1);
  return NULL;
}

/* lua_dump's writer. The buffer starts at the first write, above the function being dumped (as
 * string.dump does): a luaL_Buffer's box must stay on top of the stack while it grows. */
typedef struct dump_state {
  int init;
  luaL_Buffer b;
} dump_state;

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  dump_state *s = ud;
  if (!s->init) {
    s->init = 1;
    luaL_buffinit(L, &s->b);
  }
  luaL_addlstring(&s->b, p, sz);
  return 0;
}

/* Pushes the function info { key =, nups =, names = {...}, blob = string } for the function at
 * idx, computing and caching it on first sight. */
static void function_info(lua_State *L, int idx) {
  push_weak_table(L, FNINFO);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  /* the bytecode first, on its own */
  lua_pushvalue(L, idx);
  dump_state ds;
  ds.init = 0;
  lua_dump(L, dump_writer, &ds, 0);
  if (ds.init) luaL_pushresult(&ds.b);
  else lua_pushliteral(L, "");
  lua_remove(L, -2); /* the function copy */
  int code = lua_gettop(L);
  /* blob: u32 nups, then per upvalue u16 name length + name, then the bytecode */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1) != NULL) { lua_pop(L, 1); nups++; }
  uint32_t n32 = (uint32_t)nups;
  luaL_addlstring(&b, (const char *)&n32, 4);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
    size_t l = strlen(name);
    lua_pop(L, 1);
    if (l > 65535) l = 65535;
    uint16_t l16 = (uint16_t)l;
    luaL_addlstring(&b, (const char *)&l16, 2);
    luaL_addlstring(&b, name, l);
  }
  lua_pushvalue(L, code);
  luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_remove(L, code);
  size_t blen;
  const char *blob = lua_tolstring(L, -1, &blen);
  uint64_t key = suiro_fn_key(blob, blen);
  lua_createtable(L, 0, 4);
  lua_insert(L, -2);
  lua_setfield(L, -2, "blob");
  lua_pushinteger(L, (lua_Integer)key);
  lua_setfield(L, -2, "key");
  lua_pushinteger(L, nups);
  lua_setfield(L, -2, "nups");
  lua_pushvalue(L, idx);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4); /* fninfo[f] = info */
  lua_remove(L, -2);
}

/* Pushes the pool's table of published functions (function -> prototype key, weak keys). */
static void push_published(lua_State *L, lpool *lp) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, lp) == LUA_TTABLE) return;
  lua_pop(L, 1);
  new_weak_table(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, lp);
}

/* The prototype key of the Lua function at idx, its blob stored in the pool on first use. The
 * hot path is two table lookups keyed by pointers (none when the same function comes again). */
static uint64_t function_key_slow(enc *e, int idx) {
  lua_State *L = e->c->L;
  push_published(L, e->c->pool);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TNUMBER) {
    uint64_t key = (uint64_t)lua_tointeger(L, -1);
    lua_pop(L, 2);
    return key;
  }
  lua_pop(L, 1);
  function_info(L, idx);
  lua_getfield(L, -1, "key");
  uint64_t key = (uint64_t)lua_tointeger(L, -1);
  /* A new closure of a known prototype (a function defined in a loop) has the same key: the
   * table also remembers keys, so the blob store is asked once per prototype. */
  lua_pushinteger(L, (lua_Integer)key);
  if (lua_rawget(L, -4) == LUA_TNIL) {
    lua_getfield(L, -3, "blob");
    size_t blen;
    const char *blob = lua_tolstring(L, -1, &blen);
    if (suiro_blob_put(e->c->pool->p, key, blob, blen) != SUIRO_OK) enc_fail(L, e, suiro_last_error());
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)key);
    lua_pushboolean(L, 1);
    lua_rawset(L, -6);
  }
  lua_pop(L, 3);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, (lua_Integer)key);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return key;
}

static uint64_t function_key(enc *e, int idx) {
  lua_State *L = e->c->L;
  const void *fp = lua_topointer(L, idx);
  if (fp == e->c->fn_ptr) return e->c->fn_key;
  lpool *lp = e->c->pool;
  uint64_t key;
  if (fp == lp->fn_ptr) {
    key = lp->fn_key;
  } else {
    key = function_key_slow(e, idx);
    /* The pool remembers the last function too (the usual loop sends one function again and
     * again), pinned: the published table is weak, and the address of a collected function
     * could come back as another one's. */
    lua_pushvalue(L, idx);
    lua_rawsetp(L, LUA_REGISTRYINDEX, (const char *)lp + 1);
    lp->fn_ptr = fp;
    lp->fn_key = key;
  }
  e->c->fn_ptr = fp;
  e->c->fn_key = key;
  return key;
}

static void enc_function(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (e->c->returning)
    enc_fail(L, e, "a function cannot be returned from a task (hosts run no functions: return its result, "
                   "or send functions as arguments)");
  if (lua_iscfunction(L, idx)) {
    const char *name = cfunction_name(L, idx);
    if (!name) enc_fail(L, e, "a C function that is not part of a loaded module cannot be sent");
    if (enc_shared(e, idx)) { lua_pop(L, 1); return; }
    wire_put_func(e->w, WIRE_LANG_LUA, 0, 1);
    wire_put_str(e->w, name, strlen(name));
    lua_pop(L, 1);
    return;
  }
  if (!e->c->pool || !e->c->pool->p) enc_fail(L, e, "a function cannot be sent here");
  if (enc_shared(e, idx)) return;
  uint64_t key = function_key(e, idx);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1) != NULL) { lua_pop(L, 1); nups++; }
  wire_put_func(e->w, WIRE_LANG_LUA, key, (uint64_t)nups + 1);
  wire_put_nil(e->w); /* no name: a prototype */
  if (!nups) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  int globals = lua_gettop(L);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
    /* _ENV (or the globals table under a stripped name) is rebound by the worker */
    const char *mod;
    if ((name[0] == '_' && strcmp(name, "_ENV") == 0) || lua_rawequal(L, -1, globals)) {
      wire_put_nil(e->w);
    } else if (lua_type(L, -1) == LUA_TTABLE && (mod = module_name(L, lua_gettop(L))) != NULL) {
      /* a loaded module (local json = require "json"): the worker requires it by name */
      if (!enc_shared(e, lua_gettop(L))) {
        wire_put_func(e->w, WIRE_LANG_LUA, 0, 1);
        wire_put_str(e->w, mod, strlen(mod));
      }
      lua_pop(L, 1); /* the name */
    } else {
      with_seg(e, SEG_UPVAL, 0, name);
      enc_value(e, lua_gettop(L));
      e->nseg--;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static void enc_value(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (e->nseg > WIRE_MAX_DEPTH) enc_fail(L, e, "nested more than 64 levels deep");
  switch (lua_type(L, idx)) {
  case LUA_TNIL: wire_put_nil(e->w); return;
  case LUA_TBOOLEAN: wire_put_bool(e->w, lua_toboolean(L, idx)); return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) wire_put_i64(e->w, (int64_t)lua_tointeger(L, idx));
    else wire_put_f64(e->w, (double)lua_tonumber(L, idx));
    return;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    wire_put_str(e->w, s, len);
    return;
  }
  case LUA_TTABLE:
    if (lua_getmetatable(L, idx)) {
      static const void *const kinds[] = { &lsuiro_key_call, &lsuiro_key_error, &lsuiro_key_strings,
                                           &lsuiro_key_refdesc, &lsuiro_key_funcdesc };
      int kind = -1;
      for (int k = 0; k < 5 && kind < 0; k++) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, kinds[k]);
        if (lua_rawequal(L, -1, -2)) kind = k;
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
      switch (kind) {
      case 0: enc_call(e, idx); return;
      case 1: enc_error_obj(e, idx); return;
      case 2: enc_strings(e, idx); return;
      case 3: enc_refdesc(e, idx); return;
      case 4: enc_funcdesc(e, idx); return;
      }
    }
    if (enc_shared(e, idx)) return;
    enc_table(e, idx);
    return;
  case LUA_TFUNCTION: enc_function(e, idx); return;
  case LUA_TUSERDATA: {
    larray *a = larray_test(L, idx);
    if (a) {
      if (!a->data && a->n) enc_fail(L, e, "a released suiro.array cannot be sent");
      enc_array(e, idx, a);
      return;
    }
    lframe *f = lframe_test(L, idx);
    if (f) {
      enc_frame(e, idx, f);
      return;
    }
    int64_t rstart, rstep;
    uint64_t rn;
    if (lmap_torange(L, idx, &rstart, &rstep, &rn)) {
      wire_put_range(e->w, rstart, rstep, rn);
      return;
    }
    size_t blen;
    const char *b = lsuiro_tobytes(L, idx, &blen);
    if (b) {
      wire_put_bytes(e->w, b, blen);
      return;
    }
    if (lsuiro_is_na(L, idx)) {
      wire_put_bool(e->w, WIRE_NA_BOOL);
      return;
    }
    const char *tn = "userdata";
    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) tn = lua_tostring(L, -1);
    enc_fail(L, e, lua_pushfstring(L, "userdata (%s) cannot be sent", tn));
    return;
  }
  case LUA_TLIGHTUSERDATA: enc_fail(L, e, "light userdata cannot be sent"); return;
  case LUA_TTHREAD: enc_fail(L, e, "a coroutine cannot be sent"); return;
  default: enc_fail(L, e, lua_pushfstring(L, "a %s cannot be sent", luaL_typename(L, idx))); return;
  }
}

/* Field by field: the path and seen arrays are filled as used, not cleared per message. */
static inline void enc_init(enc *e, lcodec_ctx *c, wire_writer *w) {
  e->c = c;
  e->w = w;
  e->seen = 0;
  e->nseen = 0;
  e->ncontainers = 0;
  e->nseg = 0;
}

/* Drops the table of values seen, when the value had more shared parts than fit inline. */
static void enc_end(enc *e) {
  if (!e->seen) return;
  lua_pushnil(e->c->L);
  lua_setfield(e->c->L, LUA_REGISTRYINDEX, "suiro.enc_seen");
}

void lcodec_encode_task(lcodec_ctx *c, int fidx, int first, int n, wire_writer *w) {
  lua_State *L = c->L;
  enc e;
  enc_init(&e, c, w);
  int t = lua_type(L, fidx);
  int is_call = 0;
  if (t == LUA_TTABLE) is_call = lsuiro_is(L, fidx, &lsuiro_key_call);
  if (t != LUA_TFUNCTION && t != LUA_TSTRING && !is_call)
    luaL_error(L, "pool:%s: argument 1 must be a function or call spec, got %s", c->verb, luaL_typename(L, fidx));
  if (is_call && n > 0)
    luaL_error(L, "pool:%s: a call spec carries its own arguments; put them in suiro.call { ... }", c->verb);
  luaL_checkstack(L, 16, "too many arguments");
  wire_put_list(w, (uint64_t)n + 1);
  e.ncontainers = 1;
  with_seg(&e, SEG_ARG, 1, NULL);
  if (t == LUA_TSTRING) {
    lcodec_check_fnref(L, fidx, c->verb);
    size_t len;
    const char *s = lua_tolstring(L, fidx, &len);
    wire_put_str(w, s, len);
  } else {
    enc_value(&e, fidx);
  }
  e.nseg = 0;
  for (int i = 0; i < n; i++) {
    with_seg(&e, SEG_ARG, i + 2, NULL);
    enc_value(&e, first + i);
    e.nseg = 0;
  }
  enc_end(&e);
}

void lcodec_encode_values(lcodec_ctx *c, int first, int n, wire_writer *w) {
  lua_State *L = c->L;
  enc e;
  enc_init(&e, c, w);
  luaL_checkstack(L, 16, "too many values");
  wire_put_list(w, (uint64_t)n);
  e.ncontainers = 1;
  for (int i = 0; i < n; i++) {
    with_seg(&e, SEG_RESULT, i + 1, NULL);
    enc_value(&e, first + i);
    e.nseg = 0;
  }
  enc_end(&e);
}

/* One value (not a list): suiro.wire.encode. */
void lcodec_encode_value(lcodec_ctx *c, int idx, wire_writer *w) {
  lua_State *L = c->L;
  enc e;
  enc_init(&e, c, w);
  luaL_checkstack(L, 16, "too many values");
  with_seg(&e, SEG_VALUE, 0, NULL);
  enc_value(&e, lua_absindex(L, idx));
  enc_end(&e);
}

/* ---- decoding -------------------------------------------------------------------------------- */

typedef lcodec_dec dec;

static int dec_fail(dec *d) {
  return luaL_error(d->L, "cannot decode value: %s", wire_reader_error(&d->r));
}

static void dec_next(dec *d, wire_item *it) {
  int st = wire_next(&d->r, it);
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

static void set_keyorder(lua_State *L, int t, int order) {
  push_weak_table(L, KEYORDER);
  lua_pushvalue(L, t);
  lua_pushvalue(L, order);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

static void push_error_obj(lua_State *L, const char *cls, size_t cl, const char *msg, size_t ml, const char *tb,
                           size_t tl, int64_t index) {
  lua_createtable(L, 0, 6);
  lua_pushlstring(L, cls, cl);
  lua_setfield(L, -2, "class");
  lua_pushlstring(L, msg, ml);
  lua_setfield(L, -2, "message");
  lua_pushlstring(L, tb, tl);
  lua_setfield(L, -2, "traceback");
  if (index >= 0) {
    lua_pushinteger(L, (lua_Integer)((uint64_t)index + 1)); /* wraps only for an absurd index */
    lua_setfield(L, -2, "index");
  }
  lsuiro_setmt(L, &lsuiro_key_error);
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
  lsuiro_push_mt(L, &lsuiro_key_refdesc);
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
  lsuiro_push_mt(L, &lsuiro_key_funcdesc);
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

static void release_view(larray *a) {
  suiro_buf_unref(a->region);
  a->region = NULL;
}

/* A typed reference becomes a read-only view of the shared pages (the sender added a reference
 * for us; the view owns it and drops it when collected or released). */
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
  larray *a = larray_new_view(L, r->type, (int64_t)v.count, v.data, 1, v.buf, release_view, !v.fresh);
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
    if (it->flag == WIRE_NA_BOOL) lsuiro_push_na(L);
    else lua_pushboolean(L, it->flag);
    return;
  case WIRE_I64: lua_pushinteger(L, (lua_Integer)it->i); return;
  case WIRE_F64: lua_pushnumber(L, it->f); return;
  case WIRE_STR: lua_pushlstring(L, it->data, (size_t)it->n); return;
  case WIRE_BYTES: lsuiro_push_bytes(L, it->data, (size_t)it->n); return;
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
      else lsuiro_push_na(L);
      lua_rawseti(L, -2, i++);
    }
    lua_pushinteger(L, (lua_Integer)it->n);
    lua_setfield(L, -2, "n");
    lsuiro_setmt_strings(L);
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
        if (cmp_keys(&a, &b) >= 0) sorted = 0;
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
      set_keyorder(L, t, order);
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
    push_error_obj(L, it->text[0].ptr, it->text[0].len, it->text[1].ptr, it->text[1].len, it->text[2].ptr,
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
    lmap_push_range(L, it->i, it->step, it->n);
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
  if (wire_reader_init(&d->r, buf, len) != WIRE_OK) dec_fail(d);
  if (d->r.shared) {
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
  int st = wire_next(&d.r, &it);
  if (st == WIRE_ERR) dec_fail(&d);
  if (st != WIRE_END) luaL_error(L, "cannot decode value: more than one value (at byte %d)", (int)it.pos);
  if (d.refs) lua_remove(L, d.refs);
  return 1;
}

/* suiro.keys(t): the keys of t in the order they are sent. */
void lcodec_push_keys(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_Integer n;
  wire_str *keys = dict_keys(L, idx, &n);
  lua_createtable(L, n < (1 << 26) ? (int)n : 0, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_pushlstring(L, keys[i].ptr, keys[i].len);
    lua_rawseti(L, -2, i + 1);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* suiro.dict(t, keys): records the sequence of distinct strings at keys as t's key order; keys
 * that t lacks are sent with nil values. */
void lcodec_set_keys(lua_State *L, int t, int keys) {
  t = lua_absindex(L, t);
  keys = lua_absindex(L, keys);
  lua_Integer m = (lua_Integer)lua_rawlen(L, keys);
  lua_createtable(L, (int)m, (int)m);
  int ord = lua_gettop(L);
  for (lua_Integer i = 1; i <= m; i++) {
    if (lua_rawgeti(L, keys, i) != LUA_TSTRING)
      luaL_error(L, "suiro.dict: key %I must be a string, got %s", i, luaL_typename(L, -1));
    lua_pushvalue(L, -1);
    if (lua_rawget(L, ord) != LUA_TNIL) luaL_error(L, "suiro.dict: key \"%s\" appears twice", lua_tostring(L, -2));
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    int absent = lua_rawget(L, t) == LUA_TNIL;
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, absent);
    lua_rawset(L, ord);
    lua_rawseti(L, ord, i);
  }
  set_keyorder(L, t, ord);
  lua_pop(L, 1);
}

/* Decoder for the worker's task payloads: lworker.c drives it (d lives on the C stack). When
 * the buffer holds back-references, a table of containers is pushed on the Lua stack. */
void lcodec_dec_init(lcodec_dec *d, lua_State *L, const void *buf, size_t len, lcodec_func_fn func, void *ud) {
  dec_init(d, L, buf, len);
  d->func = func;
  d->func_ud = ud;
}

int lcodec_dec_item(lcodec_dec *d, wire_item *it) {
  int st = wire_next(&d->r, it);
  if (st == WIRE_ERR) dec_fail(d);
  return st;
}

void lcodec_dec_value(lcodec_dec *d, wire_item *it) { dec_value(d, it); }

/* ---- error objects --------------------------------------------------------------------------- */

/* Pushes the error object for a failure read with the seam's protocol (suiro_bind.h, section 2). */
void lcodec_push_error_info(lua_State *L, const suiro_error_info *e) {
  push_error_obj(L, e->cls.ptr, e->cls.len, e->message.ptr, e->message.len, e->traceback.ptr, e->traceback.len,
                 e->index);
  if (e->slot >= 0) {
    lua_pushinteger(L, e->slot);
    lua_setfield(L, -2, "slot");
  }
  if (e->pid > 0) {
    lua_pushinteger(L, e->pid);
    lua_setfield(L, -2, "pid");
  }
}

void lcodec_push_error(lua_State *L, const suiro_result *r, int index) {
  suiro_error_info e;
  if (suiro_result_error(r, &e) != 0) luaL_error(L, "internal error: a successful result read as a failure");
  if (index > 0) e.index = index - 1;
  lcodec_push_error_info(L, &e);
  if (e.has_value && ((uintptr_t)r->data & 7) == 0) { /* the raised object: err.value */
    lcodec_decode_value(L, r->data, r->len, 0);
    lua_rawgeti(L, -1, 2);
    lua_setfield(L, -3, "value");
    lua_pop(L, 1);
  }
}

/* A function reference given as a string ("mymod.fn", "pkg::fn"): refused at once when it cannot
 * name anything (the LPeg grammar of suiro.parse reads it; names already seen are remembered). */
void lcodec_check_fnref(lua_State *L, int idx, const char *verb) {
  idx = lua_absindex(L, idx);
  push_weak_table(L, "suiro.fnrefs_ok");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, LUA_REGISTRYINDEX, "suiro.try_fnref") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "suiro.parse");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "try_fnref");
    lua_remove(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "suiro.try_fnref");
  }
  lua_pushvalue(L, idx);
  lua_call(L, 1, 2);
  if (lua_isnil(L, -2))
    luaL_error(L, "%s%s: argument 1: %s", strncmp(verb, "pool:", 5) ? "pool:" : "", verb, lua_tostring(L, -1));
  lua_pop(L, 2);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

int lsuiro_raise(lua_State *L) { return lua_error(L); }

static int l_error_tostring(lua_State *L) {
  lua_getfield(L, 1, "class");
  lua_getfield(L, 1, "message");
  lua_getfield(L, 1, "index");
  lua_getfield(L, 1, "traceback");
  const char *cls = luaL_optstring(L, 2, "error");
  const char *msg = luaL_optstring(L, 3, "");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (strcmp(cls, "remote") == 0) luaL_addstring(&b, "remote error");
  else if (strcmp(cls, "worker_died") == 0) luaL_addstring(&b, "worker died");
  else luaL_addstring(&b, cls);
  if (lua_isinteger(L, 4)) {
    lua_pushfstring(L, " at element %I", lua_tointeger(L, 4));
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, ": ");
  luaL_addstring(&b, msg);
  const char *tb = lua_tostring(L, 5);
  if (tb && *tb) {
    luaL_addstring(&b, "\nremote ");
    luaL_addstring(&b, tb);
  }
  luaL_pushresult(&b);
  return 1;
}

void lcodec_open(lua_State *L) {
  lsuiro_newmt(L, LSUIRO_ERROR, &lsuiro_key_error);
  lua_pushcfunction(L, l_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "suiro.error");
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
}
