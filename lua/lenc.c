/*
 * lenc.c — Lua values -> the wire format (docs/wire-format.md); ldec.c reads them back.
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
 * Records keep their key order (lrecord.c); functions travel by content key (lfunc.c); large
 * arrays by reference (suiro_zc_put). The walk records the path to each part for messages.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"
#include "suiro_bind.h"

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

#define DEPTH_MSG "nested more than 64 levels deep (the wire's limit, counting the list that holds a task's " \
                  "arguments or results)"

/* A path of more than PATH_SHOWN segments shows its first PATH_HEAD and last PATH_TAIL, with "..."
 * between: a value nested 900 deep is named in a line, not 900 subscripts. */
#define PATH_SHOWN 16
#define PATH_HEAD 8
#define PATH_TAIL 4
static int path_elided(int k, int n) { return n > PATH_SHOWN && k >= PATH_HEAD && k < n - PATH_TAIL; }

static void push_path(lua_State *L, enc *e) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (e->c->list > 0 && e->c->element) { /* an element of pool:map's input: the path is its own */
    lua_pushfstring(L, "argument 2[%I]", e->c->list);
    luaL_addvalue(&b);
    int n = e->nseg < (int)(sizeof e->path / sizeof e->path[0]) ? e->nseg : (int)(sizeof e->path / sizeof e->path[0]);
    for (int k = 1; k < n; k++) { /* skip the "result 1" of the one-value list */
      const seg *s = &e->path[k];
      if (path_elided(k, n)) {
        if (k == PATH_HEAD) luaL_addstring(&b, "...");
        continue;
      }
      if (s->kind == SEG_INDEX) lua_pushfstring(L, "[%I]", s->i);
      else if (s->kind == SEG_KEY) lua_pushfstring(L, ".%s", s->s);
      else if (s->kind == SEG_UPVAL) lua_pushfstring(L, " upvalue '%s'", s->s);
      else lua_pushfstring(L, ".%s", s->s ? s->s : "?");
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return;
  }
  if (e->c->list > 0) {
    lua_pushfstring(L, "lists[%I] ", e->c->list);
    luaL_addvalue(&b);
  }
  int n = e->nseg < (int)(sizeof e->path / sizeof e->path[0]) ? e->nseg : (int)(sizeof e->path / sizeof e->path[0]);
  for (int k = 0; k < n; k++) {
    const seg *s = &e->path[k];
    if (path_elided(k, n)) {
      if (k == PATH_HEAD) luaL_addstring(&b, "...");
      continue;
    }
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
  if (e->c->msg) {
    suiro_msg_free(e->c->msg);
  } else {
    if (e->w->status == WIRE_OK && e->w->len >= 8) suiro_zc_revoke(e->w->buf, e->w->len);
    wire_writer_free(e->w);
  }
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

/* Writes the record at idx as a DICT, its values named by kind (SEG_KEY or SEG_NAMED). */
static void enc_dict(enc *e, int idx, int kind) {
  lua_State *L = e->c->L;
  lua_Integer count;
  wire_str *keys = lrecord_keys(L, idx, &count);
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
  if (list_n >= 0 && (count == 0 || (count == 1 && has_n)) && lrecord_has_order(L, idx)) list_n = -1;
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
  if (n < 0 || n > ((lua_Integer)1 << 20)) /* an argument list: each item is written below */
    enc_fail(L, e, lua_pushfstring(L, "a call's args.n = %I is not a count of arguments (0..2^20)", n));
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
  lua_Integer nl = lkind_push_levels(L, idx);
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
  if (e->c->msg ? suiro_msg_put_ref(e->c->msg, a->region, 0, a->data, bytes, a->type, a->order, nd, dims)
               : suiro_zc_put(e->w, a->region, a->data, bytes, a->type, a->order, nd, dims))
    return 0;
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
    const char *tz = lkind_tz(e->c->L, idx, &tzlen);
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
  /* n is the caller's word (a field anyone can set): every element is written, at least 8 bytes */
  if (suiro_budget_check("string vector: n", (uint64_t)n, 8) != SUIRO_OK)
    enc_fail(L, e, lua_pushstring(L, suiro_last_error()));
  if (lua_rawgeti(L, idx, n + 1) != LUA_TNIL)
    enc_fail(L, e, lua_pushfstring(L, "string vector has an element %I past its n = %I: update n", n + 1, n));
  lua_pop(L, 1);
  wire_put_strs(e->w, (uint64_t)n);
  for (lua_Integer i = 1; i <= n; i++) {
    LSUIRO_POLL(L, i);
    int t = lua_rawgeti(L, idx, i);
    if (t == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      wire_strs_add(e->w, s, len);
    } else if (t == LUA_TNIL || lvalues_is_na(L, -1)) {
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
    if (!a && lsuiro_is(L, c, &lvalues_key_refdesc)) { /* suiro.wire.decode(s, { describe = true }) */
      enc_refdesc(e, c);
      e->nseg--;
      lua_pop(L, 2);
      continue;
    }
    if (a) {
      if (!a->data && a->n) enc_fail(L, e, "a released suiro.array cannot be sent");
      if (larray_is_nd(a)) enc_fail(L, e, "a frame column must be 1-d, this is an n-d array");
      n = a->n;
    } else if (lvalues_is_strings(L, c)) {
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
                                   lsuiro_is(L, idx, &lvalues_key_refdesc) ? "ref" : "func", field, luaL_typename(L, -1)));
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
    if (n < 0 || n > ((lua_Integer)1 << 20))
      enc_fail(L, e, lua_pushfstring(L, "a func descriptor's captured.n = %I is not a count (0..2^20)", n));
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

static void enc_function(enc *e, int idx) {
  lua_State *L = e->c->L;
  if (e->c->returning)
    enc_fail(L, e, "a function cannot be returned from a task (hosts run no functions: return its result, "
                   "or send functions as arguments)");
  if (lua_iscfunction(L, idx)) {
    const char *name = lfunc_cname(L, idx);
    if (!name) enc_fail(L, e, "a C function that is not part of a loaded module cannot be sent");
    if (enc_shared(e, idx)) { lua_pop(L, 1); return; }
    wire_put_func(e->w, WIRE_LANG_LUA, 0, 1);
    wire_put_str(e->w, name, strlen(name));
    lua_pop(L, 1);
    return;
  }
  if (!e->c->pool || !e->c->pool->p) enc_fail(L, e, "a function cannot be sent here");
  if (enc_shared(e, idx)) return;
  uint64_t key = lfunc_key(e->c, idx);
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
    } else if (lua_type(L, -1) == LUA_TTABLE && (mod = lfunc_module_name(L, lua_gettop(L))) != NULL) {
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
  /* the writer's depth counts the task's (or result's) own list: checked here, the path is named */
  if (e->nseg > WIRE_MAX_DEPTH || e->w->depth >= WIRE_MAX_DEPTH)
    enc_fail(L, e, DEPTH_MSG);
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
      static const void *const kinds[] = { &lsuiro_key_call, &lsuiro_key_error, &lvalues_key_strings,
                                           &lvalues_key_refdesc, &lvalues_key_funcdesc };
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
    if (lrange_to(L, idx, &rstart, &rstep, &rn)) {
      wire_put_range(e->w, rstart, rstep, rn);
      return;
    }
    size_t blen;
    const char *b = lvalues_tobytes(L, idx, &blen);
    if (b) {
      wire_put_bytes(e->w, b, blen);
      return;
    }
    if (lvalues_is_na(L, idx)) {
      wire_put_bool(e->w, WIRE_NA_BOOL);
      return;
    }
    if (lchan_test(L, idx)) { /* a channel endpoint: it goes to the receiver (lchan.c) */
      const char *why = lchan_encode(L, idx, e->w);
      if (why) enc_fail(L, e, why);
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
  if (t == LUA_TFUNCTION && c->pool) lpool_check_runs_lua(L, c->pool, c->verb);
  luaL_checkstack(L, 16, "too many arguments");
  wire_put_list(w, (uint64_t)n + 1);
  e.ncontainers = 1;
  with_seg(&e, SEG_ARG, 1, NULL);
  if (t == LUA_TSTRING) {
    lfunc_check_ref(L, fidx, c->verb);
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

