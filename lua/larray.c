/*
 * larray.c — suiro.array: typed arrays (f64, f32, i64, i32, u8, bool, c128) for Lua. Arrays of a
 * kind (date, timestamp, factor: their constructors, attributes and methods) are lkind.c's.
 *
 *   local a = suiro.f64 { 1, 2, 3 }         -- also f32, i64, i32, u8, bool, c128
 *   local z = suiro.array("i32", 10)        -- zero-filled
 *   a[1], #a, ipairs(a), a:sum(), a:mean(), a:min(), a:max(), a:totable(), a:slice(2, 3),
 *   a:type(), a * 2, a + a, -a, a / 2, tostring(a)
 *   local m = suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "F")   -- an n-d array (NDARRAY)
 *   suiro.date({ 0, 19723 }), suiro.timestamp({ 0, 1.7e9 }, { unit = "s", tz = "UTC" }),
 *   suiro.factor({ "hi", "lo", suiro.NA }, { levels = { "lo", "hi" } }): arrays of a kind
 *   (DATE / TIMESTAMP / FACTOR); a:kind(), a:unit(), a:tz(), a:levels(), a:ordered(), a:codes()
 *
 * An array either owns its memory (malloc, or a shared region from larray_alloc_big) or is a view
 * of memory owned elsewhere (a zero-copy value received from another process: a private
 * copy-on-write mapping of the region's pages, writable like any array, a write copying its page
 * for this view alone; released once at __gc or a:release()). Indexing is 1-based; element access converts to Lua numbers
 * (integers for integer types, booleans for bool, {re, im} for c128); a bool NA reads as
 * suiro.NA. A factor is an i32 array of 0-based codes (-1 = NA) with its levels in the user value;
 * its elements read and write as level strings (or suiro.NA).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "larray.h"
#include "lsuiro.h"
#include "lvalues.h"

void *(*larray_alloc_big)(size_t bytes, void **region, larray_release_fn *release);
size_t larray_big_bytes = SIZE_MAX;

static int type_from_name(lua_State *L, int idx) {
  const char *s = lua_tostring(L, idx);
  if (lua_type(L, idx) != LUA_TSTRING)
    return luaL_error(L, "suiro.array: argument 1 (the element type) must be a string such as \"f64\", got %s",
                      luaL_typename(L, idx));
  for (int t = 1; t <= WIRE_T_MAX; t++)
    if (strcmp(s, wire_type_name(t)) == 0) return t;
  return luaL_error(L, "suiro.array: unknown element type \"%s\" (f64, f32, i64, i32, u8, bool, c128)", s);
}

size_t larray_bytes(const larray *a) { return (size_t)a->n * wire_type_size(a->type); }

static void free_data(larray *a) {
  if (a->release) {
    larray_release_fn r = a->release;
    a->release = NULL;
    r(a);
  } else if (a->owns) {
    free(a->data);
  }
  a->data = NULL;
  a->owns = 0;
}

static larray *push_raw(lua_State *L, int type, int64_t n) {
  larray *a = lua_newuserdatauv(L, sizeof *a, 1);
  memset(a, 0, sizeof *a);
  a->type = type;
  a->n = n;
  a->ndim = 1;
  a->shape[0] = n;
  lsuiro_setmt(L, &lsuiro_key_array);
  return a;
}

/* Big arrays and views live outside the Lua heap, where the collector cannot see them: a loop of
 * 1 MB round trips would pile up garbage views (each holding its region) because the GC only sees
 * 100-byte userdata. So external bytes are counted, and every 64 MiB of them the collector takes
 * a step as if that much had been allocated: incremental, proportional, and rare for small data. */
static size_t external_bytes;

static void gc_pressure(lua_State *L, size_t bytes) {
  if (bytes < ((size_t)64 << 10)) return;
  external_bytes += bytes;
  if (external_bytes >= ((size_t)64 << 20)) {
    int kb = external_bytes >> 10 > INT32_MAX ? INT32_MAX : (int)(external_bytes >> 10);
    external_bytes = 0;
    lua_gc(L, LUA_GCSTEP, kb);
  }
}

static larray *new_array(lua_State *L, int type, int64_t n, int zero) {
  if (n < 0) luaL_error(L, "suiro.array: length must be >= 0, got %I", (lua_Integer)n);
  if ((uint64_t)n > WIRE_MAX_COUNT) /* what a value can count (wire), checked before any allocation */
    luaL_error(L, "suiro.array: %I elements are too many (at most 2^48 - 1)", (lua_Integer)n);
  size_t es = wire_type_size(type);
  if (!es) luaL_error(L, "suiro.array: bad element type %d", type);
  if ((uint64_t)n > (SIZE_MAX / 2) / es) luaL_error(L, "suiro.array: %I elements of %d bytes are too many", (lua_Integer)n, (int)es);
  lvalues_check_budget(L, "suiro.array", n, es); /* the memory it would take, before taking it */
  size_t bytes = (size_t)n * es;
  gc_pressure(L, bytes);
  larray *a = push_raw(L, type, n);
  if (larray_alloc_big && bytes >= larray_big_bytes) {
    a->data = larray_alloc_big(bytes, &a->region, &a->release);
    if (a->data) {
      if (zero) memset(a->data, 0, bytes);
      return a;
    }
  }
  a->data = zero ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
  if (!a->data) luaL_error(L, "suiro.array: out of memory for %I bytes", (lua_Integer)bytes);
  a->owns = 1;
  return a;
}

larray *larray_new(lua_State *L, int type, int64_t n) { return new_array(L, type, n, 1); }
larray *larray_new_raw(lua_State *L, int type, int64_t n) { return new_array(L, type, n, 0); }

/* The array's elements move to d (copied; the old memory is let go of). */
static void move_data(larray *a, void *d, void *region, larray_release_fn release, int owns) {
  memcpy(d, a->data, larray_bytes(a));
  if (a->release) a->release(a);
  else if (a->owns) free(a->data);
  a->data = d;
  a->region = region;
  a->release = release;
  a->owns = owns;
}

int larray_to_region(lua_State *L, larray *a) {
  (void)L;
  if (a->region) return 1;
  if (!larray_alloc_big) return 0;
  size_t bytes = larray_bytes(a);
  void *region = NULL;
  larray_release_fn release = NULL;
  void *d = larray_alloc_big(bytes, &region, &release);
  if (!d) return 0;
  move_data(a, d, region, release, 0);
  return 1;
}

/* Copy on write: a shared array gets a private copy of its data before it changes. */
static void unshare(lua_State *L, larray *a) {
  size_t bytes = larray_bytes(a);
  void *region = NULL;
  larray_release_fn release = NULL;
  void *d = larray_alloc_big && bytes >= larray_big_bytes ? larray_alloc_big(bytes, &region, &release) : NULL;
  int owns = 0;
  if (!d) {
    d = malloc(bytes ? bytes : 1);
    if (!d) luaL_error(L, "suiro.array: out of memory for %I bytes", (lua_Integer)bytes);
    owns = 1;
  }
  move_data(a, d, region, release, owns);
  a->shared = 0;
}

larray *larray_new_view(lua_State *L, int type, int64_t n, void *data, int readonly, void *region,
                        larray_release_fn release, int pinned_already) {
  larray *a = push_raw(L, type, n);
  a->data = data;
  a->readonly = readonly;
  /* Another view here holds the region already: this one pins no new memory (sending a view on
   * and back must stay O(1) whatever its size, not a GC step as large as the array). */
  if (!pinned_already) gc_pressure(L, (size_t)n * wire_type_size(type));
  a->region = region;
  a->release = release;
  return a;
}

larray *larray_test(lua_State *L, int idx) { return lsuiro_testud(L, idx, &lsuiro_key_array); }

larray *larray_check(lua_State *L, int idx) {
  larray *a = lsuiro_checkud(L, idx, &lsuiro_key_array, LARRAY_MT);
  if (!a->data && a->n > 0) luaL_error(L, "suiro.array: this array was released");
  return a;
}

/* ---- elements -------------------------------------------------------------------------------- */

/* Pushes element i of the array a at stack index aidx (factors look up their levels there). */
static void push_elem(lua_State *L, const larray *a, int aidx, int64_t i) {
  switch (a->type) {
  case WIRE_T_F64: lua_pushnumber(L, ((const double *)a->data)[i]); break;
  case WIRE_T_F32: lua_pushnumber(L, ((const float *)a->data)[i]); break;
  case WIRE_T_I64: lua_pushinteger(L, ((const int64_t *)a->data)[i]); break;
  case WIRE_T_I32: {
    int32_t v = ((const int32_t *)a->data)[i];
    if (a->kind == LARRAY_FACTOR) {
      lkind_push_levels(L, aidx);
      if (v < 0 || lua_rawgeti(L, -1, (lua_Integer)v + 1) != LUA_TSTRING) {
        if (v >= 0) lua_pop(L, 1);
        lvalues_push_na(L);
      }
      lua_remove(L, -2);
      break;
    }
    lua_pushinteger(L, v);
    break;
  }
  case WIRE_T_U8: lua_pushinteger(L, ((const uint8_t *)a->data)[i]); break;
  case WIRE_T_BOOL: {
    uint8_t b = ((const uint8_t *)a->data)[i];
    if (b == WIRE_NA_BOOL) lvalues_push_na(L);
    else lua_pushboolean(L, b);
    break;
  }
  case WIRE_T_C128: {
    const double *c = (const double *)a->data + 2 * i;
    lua_createtable(L, 0, 2);
    lua_pushnumber(L, c[0]);
    lua_setfield(L, -2, "re");
    lua_pushnumber(L, c[1]);
    lua_setfield(L, -2, "im");
    break;
  }
  }
}

static double num_at(const larray *a, int64_t i) {
  switch (a->type) {
  case WIRE_T_F64: return ((const double *)a->data)[i];
  case WIRE_T_F32: return ((const float *)a->data)[i];
  case WIRE_T_I64: return (double)((const int64_t *)a->data)[i];
  case WIRE_T_I32: return ((const int32_t *)a->data)[i];
  case WIRE_T_U8: return ((const uint8_t *)a->data)[i];
  case WIRE_T_BOOL: return ((const uint8_t *)a->data)[i] == 1;
  default: return NAN;
  }
}

static double na_f64(void) {
  uint64_t bits = WIRE_NA_F64_BITS;
  double d;
  memcpy(&d, &bits, 8);
  return d;
}

/* The 0-based code of the level named by the value at v (-1 for suiro.NA or nil). */
static int32_t factor_code(lua_State *L, int aidx, int v) {
  if (lua_isnil(L, v) || lvalues_is_na(L, v)) return WIRE_NA_CODE;
  if (lua_type(L, v) != LUA_TSTRING)
    luaL_error(L, "suiro.array: a factor element must be one of its levels (a string) or suiro.NA, got %s",
               luaL_typename(L, v));
  lua_Integer n = lkind_push_levels(L, aidx);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, -1, k);
    int same = lua_rawequal(L, -1, v);
    lua_pop(L, 1);
    if (same) {
      lua_pop(L, 1);
      return (int32_t)(k - 1);
    }
  }
  return luaL_error(L, "suiro.array: \"%s\" is not a level of this factor", lua_tostring(L, v));
}

/* Stores the value at v as element i of the array a at stack index aidx. suiro.NA stores the
 * type's NA (f64, i32, i64, c128, bool; factors also take nil); f32 and u8 have none. */
/* Element v for slot i of a numeric array: a number (strings are not numbers here), or raises
 * naming the element. */
static lua_Number elem_number(lua_State *L, const larray *a, int v, int64_t i) {
  if (lua_type(L, v) != LUA_TNUMBER)
    luaL_error(L, "suiro.array: element %I: a %s array holds numbers, got %s", (lua_Integer)i + 1,
               wire_type_name(a->type), luaL_typename(L, v));
  return lua_tonumber(L, v);
}

static lua_Integer elem_integer(lua_State *L, const larray *a, int v, int64_t i) {
  int ok = 0;
  lua_Integer x = lua_type(L, v) == LUA_TNUMBER ? lua_tointegerx(L, v, &ok) : 0;
  if (!ok) {
    if (lua_type(L, v) == LUA_TNUMBER)
      luaL_error(L, "suiro.array: element %I: %s does not fit in %s (an integer type)", (lua_Integer)i + 1,
                 lua_tostring(L, v), wire_type_name(a->type));
    luaL_error(L, "suiro.array: element %I: a %s array holds integers, got %s", (lua_Integer)i + 1,
               wire_type_name(a->type), luaL_typename(L, v));
  }
  return x;
}

static void store_elem(lua_State *L, larray *a, int aidx, int64_t i, int v) {
  if (a->kind == LARRAY_FACTOR) {
    ((int32_t *)a->data)[i] = factor_code(L, aidx, v);
    return;
  }
  if (lvalues_is_na(L, v)) {
    switch (a->type) {
    case WIRE_T_F64: ((double *)a->data)[i] = na_f64(); return;
    case WIRE_T_I64: ((int64_t *)a->data)[i] = WIRE_NA_I64; return;
    case WIRE_T_I32: ((int32_t *)a->data)[i] = WIRE_NA_I32; return;
    case WIRE_T_BOOL: ((uint8_t *)a->data)[i] = WIRE_NA_BOOL; return;
    case WIRE_T_C128: ((double *)a->data)[2 * i] = ((double *)a->data)[2 * i + 1] = na_f64(); return;
    default: luaL_error(L, "suiro.array: %s arrays have no NA", wire_type_name(a->type)); return;
    }
  }
  switch (a->type) {
  case WIRE_T_F64: ((double *)a->data)[i] = elem_number(L, a, v, i); break;
  case WIRE_T_F32: ((float *)a->data)[i] = (float)elem_number(L, a, v, i); break;
  case WIRE_T_I64: ((int64_t *)a->data)[i] = elem_integer(L, a, v, i); break;
  case WIRE_T_I32: {
    lua_Integer x = elem_integer(L, a, v, i);
    if (x < INT32_MIN || x > INT32_MAX) luaL_error(L, "suiro.array: element %I: %I does not fit in i32", (lua_Integer)i + 1, x);
    ((int32_t *)a->data)[i] = (int32_t)x;
    break;
  }
  case WIRE_T_U8: {
    lua_Integer x = elem_integer(L, a, v, i);
    if (x < 0 || x > 255) luaL_error(L, "suiro.array: element %I: %I does not fit in u8", (lua_Integer)i + 1, x);
    ((uint8_t *)a->data)[i] = (uint8_t)x;
    break;
  }
  case WIRE_T_BOOL:
    ((uint8_t *)a->data)[i] = lua_isnil(L, v) ? WIRE_NA_BOOL : (uint8_t)lua_toboolean(L, v);
    break;
  case WIRE_T_C128: {
    double *c = (double *)a->data + 2 * i;
    if (lua_istable(L, v)) {
      lua_getfield(L, v, "re");
      lua_getfield(L, v, "im");
      c[0] = luaL_optnumber(L, -2, 0);
      c[1] = luaL_optnumber(L, -1, 0);
      lua_pop(L, 2);
    } else {
      c[0] = luaL_checknumber(L, v);
      c[1] = 0;
    }
    break;
  }
  }
}

static int64_t check_index(lua_State *L, const larray *a, int idx) {
  int ok;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "suiro.array: an index must be an integer, got %s",
               lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  if (i < 1 || i > a->n) luaL_error(L, "suiro.array: index %I out of range 1..%I", i, (lua_Integer)a->n);
  return i - 1;
}

static int l_index(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || i > a->n) return 0; /* nil past the end, so ipairs stops */
    push_elem(L, a, 1, i - 1);
    return 1;
  }
  /* methods */
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "__methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int l_newindex(lua_State *L) {
  larray *a = larray_check(L, 1);
  int64_t i = check_index(L, a, 2);
  if (a->shared) unshare(L, a);
  store_elem(L, a, 1, i, 3);
  return 0;
}

static int l_len(lua_State *L) {
  lua_pushinteger(L, larray_check(L, 1)->n);
  return 1;
}

static int l_gc(lua_State *L) {
  larray *a = luaL_checkudata(L, 1, LARRAY_MT);
  free_data(a);
  return 0;
}

static int l_release(lua_State *L) {
  larray *a = luaL_checkudata(L, 1, LARRAY_MT);
  free_data(a);
  a->n = 0;
  a->ndim = 1;
  a->nd = 0;
  a->shape[0] = 0;
  return 0;
}

static int l_type(lua_State *L) {
  lua_pushstring(L, wire_type_name(larray_check(L, 1)->type));
  return 1;
}

static int l_shape(lua_State *L) {
  larray *a = larray_check(L, 1);
  lua_createtable(L, a->ndim, 0);
  for (int d = 0; d < a->ndim; d++) {
    lua_pushinteger(L, a->shape[d]);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static int l_order(lua_State *L) {
  lua_pushstring(L, larray_check(L, 1)->order == WIRE_ORDER_F ? "F" : "C");
  return 1;
}

static int l_isview(lua_State *L) {
  larray *a = larray_check(L, 1);
  lua_pushboolean(L, a->readonly);
  return 1;
}

static int l_totable(lua_State *L) {
  larray *a = larray_check(L, 1);
  lvalues_check_budget(L, "array:totable", a->n, LVALUES_SLOT_BYTES); /* a table of n values */
  lua_createtable(L, (int)(a->n < 1 << 26 ? a->n : 0), 0);
  for (int64_t i = 0; i < a->n; i++) {
    LSUIRO_POLL(L, i + 1);
    push_elem(L, a, 1, i);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_tostring(lua_State *L) {
  larray *a = luaL_checkudata(L, 1, LARRAY_MT);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "suiro.array ");
  if (a->kind == LARRAY_FACTOR) {
    luaL_addstring(&b, a->ordered ? "factor ordered" : "factor");
  } else {
    if (a->kind != LARRAY_PLAIN) {
      luaL_addstring(&b, lkind_names[a->kind]);
      luaL_addchar(&b, ' ');
    }
    luaL_addstring(&b, wire_type_name(a->type));
  }
  if (a->kind == LARRAY_TIMESTAMP) {
    size_t len;
    const char *tz = lkind_tz(L, 1, &len);
    lua_pushfstring(L, " %s%s%s", lkind_unit_names[a->unit & 3], len ? " " : "", tz);
    luaL_addvalue(&b);
  }
  if (larray_is_nd(a)) {
    luaL_addstring(&b, " [");
    for (int d = 0; d < a->ndim; d++) {
      lua_pushfstring(L, "%s%I", d ? "x" : "", (lua_Integer)a->shape[d]);
      luaL_addvalue(&b);
    }
    luaL_addstring(&b, a->order == WIRE_ORDER_F && a->ndim > 1 ? "] F" : "]");
  }
  if (a->readonly) luaL_addstring(&b, " view");
  luaL_addstring(&b, " {");
  int64_t shown = a->n < 10 ? a->n : 8;
  for (int64_t i = 0; i < shown && a->data; i++) {
    if (i) luaL_addstring(&b, ", ");
    if (a->type == WIRE_T_C128) {
      const double *c = (const double *)a->data + 2 * i;
      char buf[64];
      snprintf(buf, sizeof buf, "%g%+gi", c[0], c[1]);
      lua_pushstring(L, buf);
    } else {
      push_elem(L, a, 1, i);
      luaL_tolstring(L, -1, NULL); /* suiro.NA prints as NA */
      lua_remove(L, -2);
    }
    luaL_addvalue(&b);
  }
  if (shown < a->n) {
    lua_pushfstring(L, ", ... (%I elements)", (lua_Integer)a->n);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "}");
  luaL_pushresult(&b);
  return 1;
}

/* Fills the new array at the top from the sequence at t (n elements). */
void larray_fill(lua_State *L, larray *a, int t, lua_Integer n) {
  int aidx = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    LSUIRO_POLL(L, i);
    lua_geti(L, t, i);
    store_elem(L, a, aidx, i - 1, lua_gettop(L));
    lua_pop(L, 1);
  }
}

/* A length: an integer, or a float with an integral value (as Lua's own functions take them:
 * string.rep("a", 3.0)). */
static int length_arg(lua_State *L, int idx, lua_Integer *n) {
  int ok = 0;
  if (lua_type(L, idx) == LUA_TNUMBER) *n = lua_tointegerx(L, idx, &ok);
  return ok;
}

/* suiro.array(type, n) or suiro.array(type, {values}) */
static int l_new(lua_State *L) {
  int type = type_from_name(L, 1);
  if (lua_istable(L, 2)) {
    lua_Integer n = luaL_len(L, 2);
    larray *a = larray_new(L, type, n);
    larray_fill(L, a, 2, n);
    return 1;
  }
  lua_Integer n = 0;
  if (!length_arg(L, 2, &n))
    return luaL_error(L, "suiro.array: argument 2 must be a length (an integer) or a table of values, got %s",
                      lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : luaL_typename(L, 2));
  larray_new(L, type, n);
  return 1;
}

/* suiro.f64 {...} and friends: the element type is the upvalue. */
static int l_typed_new(lua_State *L) {
  int type = (int)lua_tointeger(L, lua_upvalueindex(1));
  lua_Integer len = 0;
  if (length_arg(L, 1, &len)) {
    larray_new(L, type, len);
    return 1;
  }
  if (!lua_istable(L, 1))
    return luaL_error(L, "suiro.%s: argument 1 must be a length (an integer) or a table of values, got %s",
                      wire_type_name(type), lua_type(L, 1) == LUA_TNUMBER ? lua_tostring(L, 1) : luaL_typename(L, 1));
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  larray *a = larray_new(L, type, n);
  larray_fill(L, a, 1, n);
  return 1;
}

/* Gives the new array at the top the kind, unit, order flag and attributes of a (at aidx). */
static void copy_kind(lua_State *L, const larray *a, int aidx, larray *b) {
  b->kind = a->kind;
  b->unit = a->unit;
  b->ordered = a->ordered;
  lua_getiuservalue(L, aidx, 1); /* shared: attributes are never modified in place */
  lua_setiuservalue(L, -2, 1);
}

static int l_copy(lua_State *L) {
  larray *a = larray_check(L, 1);
  larray *b = larray_new_raw(L, a->type, a->n);
  memcpy(b->data, a->data, larray_bytes(a));
  b->ndim = a->ndim;
  b->nd = a->nd;
  b->order = a->order;
  memcpy(b->shape, a->shape, sizeof b->shape);
  copy_kind(L, a, 1, b);
  return 1;
}

static int l_slice(lua_State *L) {
  larray *a = larray_check(L, 1);
  lua_Integer i = luaL_optinteger(L, 2, 1), j = luaL_optinteger(L, 3, a->n);
  if (i < 0) i = a->n + i + 1;
  if (j < 0) j = a->n + j + 1;
  if (i < 1) i = 1;
  if (j > a->n) j = a->n;
  int64_t n = j >= i ? j - i + 1 : 0;
  larray *b = larray_new_raw(L, a->type, n);
  size_t es = wire_type_size(a->type);
  if (n) memcpy(b->data, (char *)a->data + (size_t)(i - 1) * es, (size_t)n * es);
  copy_kind(L, a, 1, b);
  return 1;
}

/* a:reshape(shape [, order]): a copy with these extents ("C" row-major, default, or "F"
 * column-major), sent as an n-d array; {} makes a 0-d array of one element. */
static int l_reshape(lua_State *L) {
  larray *a = larray_check(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *ord = luaL_optstring(L, 3, "C");
  if (strcmp(ord, "C") != 0 && strcmp(ord, "F") != 0)
    return luaL_argerror(L, 3, lua_pushfstring(L, "order must be \"C\" or \"F\", got \"%s\"", ord));
  if (a->kind != LARRAY_PLAIN)
    return luaL_error(L, "suiro.array: reshape: a %s array cannot have a shape", lkind_names[a->kind]);
  lua_Integer nd = (lua_Integer)lua_rawlen(L, 2);
  if (nd > LARRAY_MAX_NDIM) return luaL_error(L, "suiro.array: reshape: %I dimensions (at most %d)", nd, LARRAY_MAX_NDIM);
  int64_t shape[LARRAY_MAX_NDIM];
  uint64_t prod = 1;
  for (lua_Integer d = 0; d < nd; d++) {
    lua_rawgeti(L, 2, d + 1);
    int ok;
    lua_Integer x = lua_tointegerx(L, -1, &ok);
    if (!ok || x < 0)
      return luaL_error(L, "suiro.array: reshape: extent %I must be a non-negative integer, got %s", d + 1,
                        luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    shape[d] = x;
    if (x && prod > (uint64_t)INT64_MAX / (uint64_t)x) prod = (uint64_t)INT64_MAX;
    else prod *= (uint64_t)x;
  }
  if (prod != (uint64_t)a->n) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer d = 0; d < nd; d++) {
      lua_pushfstring(L, "%s%I", d ? "x" : "", (lua_Integer)shape[d]);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return luaL_error(L, "suiro.array: reshape: shape [%s] holds %I elements, the array has %I", lua_tostring(L, -1),
                      (lua_Integer)prod, (lua_Integer)a->n);
  }
  larray *b = larray_new(L, a->type, a->n);
  memcpy(b->data, a->data, larray_bytes(a));
  b->nd = 1;
  b->ndim = (int)nd;
  b->order = ord[0] == 'F' ? WIRE_ORDER_F : WIRE_ORDER_C;
  memset(b->shape, 0, sizeof b->shape);
  for (lua_Integer d = 0; d < nd; d++) b->shape[d] = shape[d];
  return 1;
}

/* ---- reductions ------------------------------------------------------------------------------ */

static int reduce(lua_State *L, int op) { /* 0 sum, 1 min, 2 max, 3 mean */
  larray *a = larray_check(L, 1);
  if (a->type == WIRE_T_C128) return luaL_error(L, "suiro.array: reductions of c128 arrays are not supported");
  if (a->kind == LARRAY_FACTOR) return luaL_error(L, "suiro.array: reductions of a factor are not supported");
  int integer = a->type == WIRE_T_I64 || a->type == WIRE_T_I32 || a->type == WIRE_T_U8 || a->type == WIRE_T_BOOL;
  if (a->n == 0) {
    if (op == 0) {
      if (integer) lua_pushinteger(L, 0);
      else lua_pushnumber(L, 0);
    } else {
      lua_pushnil(L);
    }
    return 1;
  }
  if (integer && op != 3) {
    int64_t acc = op == 0 ? 0 : (int64_t)num_at(a, 0);
    for (int64_t i = 0; i < a->n; i++) {
      int64_t v = a->type == WIRE_T_I64 ? ((const int64_t *)a->data)[i] : (int64_t)num_at(a, i);
      if (op == 0) acc = (int64_t)((uint64_t)acc + (uint64_t)v);
      else if (op == 1 ? v < acc : v > acc) acc = v;
    }
    lua_pushinteger(L, acc);
    return 1;
  }
  double acc = op == 0 || op == 3 ? 0 : num_at(a, 0);
  if (a->type == WIRE_T_F64) {
    const double *d = a->data;
    if (op == 0 || op == 3) for (int64_t i = 0; i < a->n; i++) acc += d[i];
    else if (op == 1) for (int64_t i = 0; i < a->n; i++) acc = d[i] < acc ? d[i] : acc;
    else for (int64_t i = 0; i < a->n; i++) acc = d[i] > acc ? d[i] : acc;
  } else {
    for (int64_t i = 0; i < a->n; i++) {
      double v = num_at(a, i);
      if (op == 0 || op == 3) acc += v;
      else if (op == 1 ? v < acc : v > acc) acc = v;
    }
  }
  lua_pushnumber(L, op == 3 ? acc / (double)a->n : acc);
  return 1;
}

static int l_sum(lua_State *L) { return reduce(L, 0); }
static int l_min(lua_State *L) { return reduce(L, 1); }
static int l_max(lua_State *L) { return reduce(L, 2); }
static int l_mean(lua_State *L) { return reduce(L, 3); }

/* ---- element-wise arithmetic ----------------------------------------------------------------- */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_NEG };

static int is_int_type(int t) { return t == WIRE_T_I64 || t == WIRE_T_I32 || t == WIRE_T_U8 || t == WIRE_T_BOOL; }

typedef struct operand {
  larray *a;      /* or NULL for a scalar */
  double d;
  int64_t i;
  int is_int;     /* scalar is an integer */
} operand;

static operand get_operand(lua_State *L, int idx, const char *opname) {
  operand o = { 0 };
  o.a = larray_test(L, idx);
  if (o.a) {
    if (o.a->type == WIRE_T_C128) luaL_error(L, "suiro.array: '%s' on c128 arrays is not supported", opname);
    if (o.a->kind == LARRAY_FACTOR) luaL_error(L, "suiro.array: '%s' on a factor is not supported", opname);
    return o;
  }
  if (lua_isinteger(L, idx)) {
    o.is_int = 1;
    o.i = lua_tointeger(L, idx);
    o.d = (double)o.i;
  } else if (lua_type(L, idx) == LUA_TNUMBER) {
    o.d = lua_tonumber(L, idx);
  } else {
    luaL_error(L, "suiro.array: cannot apply '%s' to an array and a %s", opname, luaL_typename(L, idx));
  }
  return o;
}

static int arith(lua_State *L, int op) {
  static const char *names[] = { "+", "-", "*", "/", "-" };
  operand x = get_operand(L, 1, names[op]);
  operand y = op == OP_NEG ? x : get_operand(L, 2, names[op]);
  int64_t n = x.a ? x.a->n : y.a->n;
  if (x.a && y.a && x.a->n != y.a->n)
    return luaL_error(L, "suiro.array: '%s' needs arrays of the same length (%I and %I)", names[op],
                      (lua_Integer)x.a->n, (lua_Integer)y.a->n);
  /* result type: integers stay integers (i64) for + - * and negation, f32 stays f32, else f64 */
  int xi = x.a ? is_int_type(x.a->type) : x.is_int, yi = y.a ? is_int_type(y.a->type) : y.is_int;
  int xf32 = x.a ? x.a->type == WIRE_T_F32 : !x.is_int, yf32 = y.a ? y.a->type == WIRE_T_F32 : !y.is_int;
  int rtype;
  if (op != OP_DIV && xi && yi) rtype = WIRE_T_I64;
  else if ((x.a && x.a->type == WIRE_T_F32 && yf32) || (y.a && y.a->type == WIRE_T_F32 && xf32)) rtype = WIRE_T_F32;
  else rtype = WIRE_T_F64;
  larray *r = larray_new_raw(L, rtype, n); /* every element is written below */
  const larray *shape_src = x.a ? x.a : y.a;
  r->ndim = shape_src->ndim;
  r->order = shape_src->order;
  r->nd = shape_src->nd;
  memcpy(r->shape, shape_src->shape, sizeof r->shape);
  if (rtype == WIRE_T_F64 && (!x.a || x.a->type == WIRE_T_F64) && (!y.a || y.a->type == WIRE_T_F64)) {
    /* the hot path: doubles with doubles or scalars, written so the compiler vectorises it */
    double *out = r->data;
    const double *a = x.a ? x.a->data : NULL, *b = y.a ? y.a->data : NULL;
    double s = a ? y.d : x.d;
    switch (op) {
    case OP_ADD:
      if (a && b) for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
      else if (a) for (int64_t i = 0; i < n; i++) out[i] = a[i] + s;
      else for (int64_t i = 0; i < n; i++) out[i] = s + b[i];
      break;
    case OP_SUB:
      if (a && b) for (int64_t i = 0; i < n; i++) out[i] = a[i] - b[i];
      else if (a) for (int64_t i = 0; i < n; i++) out[i] = a[i] - s;
      else for (int64_t i = 0; i < n; i++) out[i] = s - b[i];
      break;
    case OP_MUL:
      if (a && b) for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
      else if (a) for (int64_t i = 0; i < n; i++) out[i] = a[i] * s;
      else for (int64_t i = 0; i < n; i++) out[i] = s * b[i];
      break;
    case OP_DIV:
      if (a && b) for (int64_t i = 0; i < n; i++) out[i] = a[i] / b[i];
      else if (a) for (int64_t i = 0; i < n; i++) out[i] = a[i] / s;
      else for (int64_t i = 0; i < n; i++) out[i] = s / b[i];
      break;
    case OP_NEG:
      for (int64_t i = 0; i < n; i++) out[i] = -a[i];
      break;
    }
    return 1;
  }
  for (int64_t i = 0; i < n; i++) {
    if (rtype == WIRE_T_I64) {
      int64_t a = x.a ? (x.a->type == WIRE_T_I64 ? ((int64_t *)x.a->data)[i] : (int64_t)num_at(x.a, i)) : x.i;
      int64_t b = y.a ? (y.a->type == WIRE_T_I64 ? ((int64_t *)y.a->data)[i] : (int64_t)num_at(y.a, i)) : y.i;
      uint64_t ua = (uint64_t)a, ub = (uint64_t)b, v;
      switch (op) {
      case OP_ADD: v = ua + ub; break;
      case OP_SUB: v = ua - ub; break;
      case OP_MUL: v = ua * ub; break;
      default: v = 0 - ua; break;
      }
      ((int64_t *)r->data)[i] = (int64_t)v;
    } else {
      double a = x.a ? num_at(x.a, i) : x.d, b = y.a ? num_at(y.a, i) : y.d, v;
      switch (op) {
      case OP_ADD: v = a + b; break;
      case OP_SUB: v = a - b; break;
      case OP_MUL: v = a * b; break;
      case OP_DIV: v = a / b; break;
      default: v = -a; break;
      }
      if (rtype == WIRE_T_F32) ((float *)r->data)[i] = (float)v;
      else ((double *)r->data)[i] = v;
    }
  }
  return 1;
}

static int l_add(lua_State *L) { return arith(L, OP_ADD); }
static int l_sub(lua_State *L) { return arith(L, OP_SUB); }
static int l_mul(lua_State *L) { return arith(L, OP_MUL); }
static int l_div(lua_State *L) { return arith(L, OP_DIV); }
static int l_unm(lua_State *L) { return arith(L, OP_NEG); }

/* Equal: same type, kind and attributes, shape (and order when n-d), and the same bytes (so
 * NaN payloads count and a NaN equals itself). */
static int l_eq(lua_State *L) {
  larray *a = larray_test(L, 1), *b = larray_test(L, 2);
  int eq = a && b && a->type == b->type && a->n == b->n && a->ndim == b->ndim && a->nd == b->nd &&
           a->kind == b->kind && (!larray_is_nd(a) || a->order == b->order) &&
           (larray_bytes(a) == 0 || (a->data && b->data && memcmp(a->data, b->data, larray_bytes(a)) == 0));
  for (int d = 0; eq && d < a->ndim; d++) eq = a->shape[d] == b->shape[d];
  if (eq && a->kind == LARRAY_TIMESTAMP) {
    size_t la, lb;
    const char *ta = lkind_tz(L, 1, &la), *tb = lkind_tz(L, 2, &lb);
    eq = a->unit == b->unit && la == lb && memcmp(ta, tb, la) == 0;
  }
  if (eq && a->kind == LARRAY_FACTOR) {
    lua_Integer na = lkind_push_levels(L, 1), nb = lkind_push_levels(L, 2);
    eq = a->ordered == b->ordered && na == nb;
    for (lua_Integer k = 1; eq && k <= na; k++) {
      lua_rawgeti(L, -2, k);
      lua_rawgeti(L, -2, k);
      eq = lua_rawequal(L, -1, -2);
      lua_pop(L, 2);
    }
    lua_pop(L, 2);
  }
  lua_pushboolean(L, eq);
  return 1;
}

static const luaL_Reg methods[] = {
  { "type", l_type },       { "shape", l_shape },     { "totable", l_totable }, { "sum", l_sum },
  { "min", l_min },         { "max", l_max },         { "mean", l_mean },       { "slice", l_slice },
  { "copy", l_copy },       { "release", l_release }, { "isview", l_isview },   { "order", l_order },
  { "reshape", l_reshape }, { NULL, NULL }, /* and lkind_methods: kind, unit, tz, levels, ordered, codes */
};

static const luaL_Reg meta[] = {
  { "__index", l_index }, { "__newindex", l_newindex }, { "__len", l_len }, { "__gc", l_gc },
  { "__close", l_release }, { "__tostring", l_tostring }, { "__add", l_add }, { "__sub", l_sub },
  { "__mul", l_mul }, { "__div", l_div }, { "__unm", l_unm }, { "__eq", l_eq }, { NULL, NULL },
};

/* A received view: its private copy-on-write mapping, then its reference of the region. */
void larray_release_view(larray *a) {
  suiro_zc_unprivate(a->region, a->data);
  suiro_buf_unref(a->region);
  a->region = NULL;
}

/* Large arrays live in shared regions when the process has a pool (zero-copy sends). */
void larray_release_region(larray *a) {
  suiro_buf_unref(a->region);
  a->region = NULL;
}

static void *alloc_in_region(size_t bytes, void **region, larray_release_fn *release) {
  if (!suiro_zc_active()) return NULL;
  suiro_buf *b = suiro_buf_alloc(bytes);
  if (!b) return NULL;
  *region = b;
  *release = larray_release_region;
  return suiro_buf_data(b);
}

/* Pushes a table of constructors: array(type, n|{...}), f64{...}, f32{...}, ..., and lkind.c's
 * date(...), timestamp(...), factor(...) */
int luaopen_suiro_array(lua_State *L) {
  larray_alloc_big = alloc_in_region;
  larray_big_bytes = suiro_zc_floor;
  if (lsuiro_newmt(L, LARRAY_MT, &lsuiro_key_array)) {
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    luaL_setfuncs(L, lkind_methods, 0);
    lua_setfield(L, -2, "__methods");
    lua_pushliteral(L, "suiro.array");
    lua_setfield(L, -2, "__name");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, l_new);
  lua_setfield(L, -2, "array");
  for (int t = 1; t <= WIRE_T_MAX; t++) {
    lua_pushinteger(L, t);
    lua_pushcclosure(L, l_typed_new, 1);
    lua_setfield(L, -2, wire_type_name(t));
  }
  lkind_open(L); /* date, timestamp, factor */
  return 1;
}
