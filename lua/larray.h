/* larray.h — suiro.array: typed arrays for Lua (see larray.c), and their kinds (lkind.c). */
#ifndef LARRAY_H
#define LARRAY_H

#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>

#include "suiro_wire.h"

#define LARRAY_MT "suiro.array"
#define LARRAY_MAX_NDIM 8

/* What the elements mean beyond their storage type (wire DATE / TIMESTAMP / FACTOR). */
enum { LARRAY_PLAIN = 0, LARRAY_DATE, LARRAY_TIMESTAMP, LARRAY_FACTOR };

typedef struct larray larray;
typedef void (*larray_release_fn)(larray *a);

struct larray {
  void *data;
  int64_t n;            /* elements (product of shape) */
  int type;             /* WIRE_T_* */
  int ndim;             /* 1 for vectors; shape holds the extents */
  int order;            /* WIRE_ORDER_C / WIRE_ORDER_F */
  int nd;               /* 1: an n-d array (wire NDARRAY) even when ndim is 0 or 1; 0: a vector */
  int kind;             /* LARRAY_PLAIN / DATE / TIMESTAMP / FACTOR */
  int unit;             /* TIMESTAMP: WIRE_UNIT_* */
  int ordered;          /* FACTOR */
  int readonly;         /* a received view (a private copy-on-write mapping: writes stay here) */
  int shared;           /* sent by reference: the next write copies it first (copy on write) */
  int owns;             /* data was malloc'd here */
  int64_t shape[LARRAY_MAX_NDIM];
  /* Zero-copy: the region the data lives in (NULL for private memory) and how to let go. */
  void *region;
  larray_release_fn release;
  /* user value 1: a table with kind attributes, or nil:
   *   TIMESTAMP  tz = "Europe/Warsaw" ("" for none)
   *   FACTOR     levels = { "lo", "hi" } (a sequence of strings; codes index it 0-based) */
};

/* A new zero-filled array of n elements (1-d), owned by Lua. */
larray *larray_new(lua_State *L, int type, int64_t n);
/* The same without zeroing, for arrays the caller fills completely. */
larray *larray_new_raw(lua_State *L, int type, int64_t n);
/* An array over memory someone else owns (a view): release is called once, at __gc or
 * a:release(). */
larray *larray_new_view(lua_State *L, int type, int64_t n, void *data, int readonly, void *region,
                        larray_release_fn release, int pinned_already);
larray *larray_check(lua_State *L, int idx);
larray *larray_test(lua_State *L, int idx);
size_t larray_bytes(const larray *a);
/* The array at idx is an n-d array, i.e. sent as NDARRAY (nd set, or ndim other than 1). */
static inline int larray_is_nd(const larray *a) { return a->nd || a->ndim != 1; }
/* Fills the new array at the top from the sequence at t (n elements). */
void larray_fill(lua_State *L, larray *a, int t, lua_Integer n);

/* lkind.c — arrays of a kind (LARRAY_DATE / TIMESTAMP / FACTOR). */
extern const char *const lkind_names[];      /* by kind: "plain", "date", "timestamp", "factor" */
extern const char *const lkind_unit_names[]; /* by WIRE_UNIT_*: "s", "ms", "us", "ns" */
/* TIMESTAMP time zone of the array at idx ("" when none); valid while the array lives. */
const char *lkind_tz(lua_State *L, int idx, size_t *len);
/* Pushes the FACTOR levels of the array at idx (an empty table when none); returns their count. */
lua_Integer lkind_push_levels(lua_State *L, int idx);
/* Sets user value 1 of the array at idx to a new table { [field] = value at the top } (pops it). */
void lkind_set_attr(lua_State *L, int idx, const char *field);
/* The kinds' methods, in the array's method table; lkind_open sets the constructors into the table
 * on top (luaopen_suiro_array's). */
extern const luaL_Reg lkind_methods[];
void lkind_open(lua_State *L);

/* Hook for large results: when set, arrays of at least `larray_big_bytes` are allocated by it
 * (in a shared region) instead of malloc, so they can leave a worker without another copy. */
extern void *(*larray_alloc_big)(size_t bytes, void **region, larray_release_fn *release);
extern size_t larray_big_bytes;
/* The release of an array whose data lives in a region (made here, or a view received): gives the
 * region's reference back. */
void larray_release_region(larray *a);
void larray_release_view(larray *a); /* a received view (ldec.c) */
/* Moves a private array's data into memory from larray_alloc_big (so it can be sent by
 * reference); returns 0 when no region can be had. */
int larray_to_region(lua_State *L, larray *a);

int luaopen_suiro_array(lua_State *L);

#endif
