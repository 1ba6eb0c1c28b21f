/*
 * larray.c — suiro.array: typed arrays (f64, f32, i64, i32, u8, bool, c128) for Lua.
 *
 *   local a = suiro.f64 { 1, 2, 3 }         -- also f32, i64, i32, u8, bool, c128
 *   local z = suiro.array("i32", 10)        -- zero-filled
 *   a[1], #a, ipairs(a), a:sum(), a:mean(), a:min(), a:max(), a:totable(), a:slice(2, 3),
 *   a:type(), a * 2, a + a, -a, a / 2, tostring(a)
 *
 * An array either owns its memory (malloc, or a shared region from larray_alloc_big) or is a view
 * of memory owned elsewhere (a zero-copy value received from another process: read-only, released
 * once at __gc or a:release()). Indexing is 1-based; element access converts to Lua numbers
 * (integers for integer types, booleans for bool, {re, im} for c128).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "larray.h"
#include "lsuiro.h"

void *(*larray_alloc_big)(size_t bytes, void **region, larray_release_fn *release);
size_t larray_big_bytes = SIZE_MAX;

static const char *const type_names[] = { NULL, "f64", "f32", "i64", "i32", "u8", "bool", "c128" };

static int type_from_name(lua_State *L, int idx) {
  const char *s = luaL_checkstring(L, idx);
  for (int t = 1; t <= WIRE_T_MAX; t++)
    if (strcmp(s, type_names[t]) == 0) return t;
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

larray *larray_new(lua_State *L, int type, int64_t n) {
  if (n < 0) luaL_error(L, "suiro.array: length must be >= 0");
  size_t es = wire_type_size(type);
  if (!es) luaL_error(L, "suiro.array: bad element type %d", type);
  if ((uint64_t)n > (SIZE_MAX / 2) / es) luaL_error(L, "suiro.array: %lld elements is too many", (long long)n);
  size_t bytes = (size_t)n * es;
  larray *a = push_raw(L, type, n);
  if (larray_alloc_big && bytes >= larray_big_bytes) {
    a->data = larray_alloc_big(bytes, &a->region, &a->release);
    if (a->data) {
      memset(a->data, 0, bytes);
      return a;
    }
  }
  a->data = calloc(bytes ? bytes : 1, 1);
  if (!a->data) luaL_error(L, "suiro.array: out of memory for %zu bytes", bytes);
  a->owns = 1;
  return a;
}

larray *larray_new_view(lua_State *L, int type, int64_t n, void *data, int readonly, void *region,
                        larray_release_fn release) {
  larray *a = push_raw(L, type, n);
  a->data = data;
  a->readonly = readonly;
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

static void push_elem(lua_State *L, const larray *a, int64_t i) {
  switch (a->type) {
  case WIRE_T_F64: lua_pushnumber(L, ((const double *)a->data)[i]); break;
  case WIRE_T_F32: lua_pushnumber(L, ((const float *)a->data)[i]); break;
  case WIRE_T_I64: lua_pushinteger(L, ((const int64_t *)a->data)[i]); break;
  case WIRE_T_I32: lua_pushinteger(L, ((const int32_t *)a->data)[i]); break;
  case WIRE_T_U8: lua_pushinteger(L, ((const uint8_t *)a->data)[i]); break;
  case WIRE_T_BOOL: {
    uint8_t b = ((const uint8_t *)a->data)[i];
    if (b == WIRE_NA_BOOL) lua_pushnil(L);
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

static void store_elem(lua_State *L, larray *a, int64_t i, int v) {
  switch (a->type) {
  case WIRE_T_F64: ((double *)a->data)[i] = luaL_checknumber(L, v); break;
  case WIRE_T_F32: ((float *)a->data)[i] = (float)luaL_checknumber(L, v); break;
  case WIRE_T_I64: ((int64_t *)a->data)[i] = luaL_checkinteger(L, v); break;
  case WIRE_T_I32: {
    lua_Integer x = luaL_checkinteger(L, v);
    if (x < INT32_MIN || x > INT32_MAX) luaL_error(L, "suiro.array: %I does not fit in i32", x);
    ((int32_t *)a->data)[i] = (int32_t)x;
    break;
  }
  case WIRE_T_U8: {
    lua_Integer x = luaL_checkinteger(L, v);
    if (x < 0 || x > 255) luaL_error(L, "suiro.array: %I does not fit in u8", x);
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
  lua_Integer i = luaL_checkinteger(L, idx);
  if (i < 1 || i > a->n) luaL_error(L, "suiro.array: index %I out of range 1..%I", i, (lua_Integer)a->n);
  return i - 1;
}

static int l_index(lua_State *L) {
  larray *a = larray_check(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || i > a->n) return 0; /* nil past the end, so ipairs stops */
    push_elem(L, a, i - 1);
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
  if (a->readonly)
    return luaL_error(L, "suiro.array: this %s array is a read-only view of shared memory; copy it first "
                         "(a:copy()) to modify it", type_names[a->type]);
  store_elem(L, a, check_index(L, a, 2), 3);
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
  a->shape[0] = 0;
  return 0;
}

static int l_type(lua_State *L) {
  lua_pushstring(L, type_names[larray_check(L, 1)->type]);
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

static int l_isview(lua_State *L) {
  larray *a = larray_check(L, 1);
  lua_pushboolean(L, a->readonly);
  return 1;
}

static int l_totable(lua_State *L) {
  larray *a = larray_check(L, 1);
  lua_createtable(L, (int)(a->n < 1 << 26 ? a->n : 0), 0);
  for (int64_t i = 0; i < a->n; i++) {
    push_elem(L, a, i);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_tostring(lua_State *L) {
  larray *a = luaL_checkudata(L, 1, LARRAY_MT);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "suiro.array ");
  luaL_addstring(&b, type_names[a->type]);
  if (a->ndim > 1) {
    for (int d = 0; d < a->ndim; d++) {
      lua_pushfstring(L, "%s%I", d ? "x" : "[", (lua_Integer)a->shape[d]);
      luaL_addvalue(&b);
    }
    luaL_addstring(&b, "]");
  }
  if (a->readonly) luaL_addstring(&b, " view");
  luaL_addstring(&b, " {");
  int64_t shown = a->n < 10 ? a->n : 8;
  for (int64_t i = 0; i < shown && a->data; i++) {
    if (i) luaL_addstring(&b, ", ");
    if (a->type == WIRE_T_C128) {
      const double *c = (const double *)a->data + 2 * i;
      lua_pushfstring(L, "%f%+fi", c[0], c[1]);
    } else {
      push_elem(L, a, i);
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "NA");
      } else {
        luaL_tolstring(L, -1, NULL);
        lua_remove(L, -2);
      }
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

/* suiro.array(type, n) or suiro.array(type, {values}) */
static int l_new(lua_State *L) {
  int type = type_from_name(L, 1);
  if (lua_istable(L, 2)) {
    lua_Integer n = luaL_len(L, 2);
    larray *a = larray_new(L, type, n);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, 2, i);
      store_elem(L, a, i - 1, lua_gettop(L));
      lua_pop(L, 1);
    }
    return 1;
  }
  lua_Integer n = luaL_checkinteger(L, 2);
  larray_new(L, type, n);
  return 1;
}

/* suiro.f64 {...} and friends: the element type is the upvalue. */
static int l_typed_new(lua_State *L) {
  int type = (int)lua_tointeger(L, lua_upvalueindex(1));
  if (lua_isinteger(L, 1)) {
    larray_new(L, type, lua_tointeger(L, 1));
    return 1;
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  larray *a = larray_new(L, type, n);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    store_elem(L, a, i - 1, lua_gettop(L));
    lua_pop(L, 1);
  }
  return 1;
}

static int l_copy(lua_State *L) {
  larray *a = larray_check(L, 1);
  larray *b = larray_new(L, a->type, a->n);
  memcpy(b->data, a->data, larray_bytes(a));
  b->ndim = a->ndim;
  b->order = a->order;
  memcpy(b->shape, a->shape, sizeof b->shape);
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
  larray *b = larray_new(L, a->type, n);
  size_t es = wire_type_size(a->type);
  if (n) memcpy(b->data, (char *)a->data + (size_t)(i - 1) * es, (size_t)n * es);
  return 1;
}

/* ---- reductions ------------------------------------------------------------------------------ */

static int reduce(lua_State *L, int op) { /* 0 sum, 1 min, 2 max, 3 mean */
  larray *a = larray_check(L, 1);
  if (a->type == WIRE_T_C128) return luaL_error(L, "suiro.array: reductions of c128 arrays are not supported");
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
  larray *r = larray_new(L, rtype, n);
  const larray *shape_src = x.a ? x.a : y.a;
  r->ndim = shape_src->ndim;
  r->order = shape_src->order;
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

static int l_eq(lua_State *L) {
  larray *a = larray_test(L, 1), *b = larray_test(L, 2);
  int eq = a && b && a->type == b->type && a->n == b->n && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
           (larray_bytes(a) == 0 || memcmp(a->data, b->data, larray_bytes(a)) == 0);
  lua_pushboolean(L, eq);
  return 1;
}

static const luaL_Reg methods[] = {
  { "type", l_type },     { "shape", l_shape }, { "totable", l_totable }, { "sum", l_sum },
  { "min", l_min },       { "max", l_max },     { "mean", l_mean },       { "slice", l_slice },
  { "copy", l_copy },     { "release", l_release }, { "isview", l_isview }, { NULL, NULL },
};

static const luaL_Reg meta[] = {
  { "__index", l_index }, { "__newindex", l_newindex }, { "__len", l_len }, { "__gc", l_gc },
  { "__close", l_release }, { "__tostring", l_tostring }, { "__add", l_add }, { "__sub", l_sub },
  { "__mul", l_mul }, { "__div", l_div }, { "__unm", l_unm }, { "__eq", l_eq }, { NULL, NULL },
};

/* Pushes a table of constructors: array(type, n|{...}), f64{...}, f32{...}, ... */
int luaopen_suiro_array(lua_State *L) {
  if (lsuiro_newmt(L, LARRAY_MT, &lsuiro_key_array)) {
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
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
    lua_setfield(L, -2, type_names[t]);
  }
  return 1;
}
