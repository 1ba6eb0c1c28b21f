/* lvalues.h — Lua representations of the wire values plain Lua values cannot carry (lvalues.c,
 * lframe.c): suiro.NA, suiro.bytes, string vectors, ordered records, frames, and the descriptors
 * of region references and functions that suiro.wire.decode(s, { describe = true }) makes.
 * Each kind is recognised by its metatable, found through a light-userdata key in the registry
 * (created on first use, so the codec works in any state that loaded suiro.core). */
#ifndef LVALUES_H
#define LVALUES_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

extern const char lvalues_key_na, lvalues_key_bytes, lvalues_key_strings, lvalues_key_frame, lvalues_key_refdesc,
  lvalues_key_funcdesc;

/* Pushes the metatable registered under key (made on first use). */
void lvalues_push_mt(lua_State *L, const void *key);

/* The element count of the table at idx for constructor `who`: its field n when given (an integer,
 * or a float with an integral value), else #t; raises unless 0 <= n and n elements of elem_bytes
 * each fit the engine's memory budget (suiro_budget_check): a count read from a caller is checked
 * before anything is allocated. */
int64_t lvalues_count(lua_State *L, int idx, const char *who, size_t elem_bytes);
/* Raises unless n elements of elem_bytes fit the memory budget ("<who>: ..."). */
void lvalues_check_budget(lua_State *L, const char *who, int64_t n, size_t elem_bytes);
/* What one element of a Lua table costs (a TValue of its array part). */
#define LVALUES_SLOT_BYTES 16

/* suiro.NA: one userdata per Lua state (BOOL NA; NA elements of string vectors, bool arrays and
 * factors). */
void lvalues_push_na(lua_State *L);
int lvalues_is_na(lua_State *L, int idx);

/* suiro.bytes: binary data (wire BYTES); the bytes are a Lua string kept in its user value. */
void lvalues_push_bytes(lua_State *L, const void *p, size_t len);
const char *lvalues_tobytes(lua_State *L, int idx, size_t *len); /* NULL: not a suiro.bytes */

/* String vectors (wire STRS): a table holding strings or suiro.NA at 1..n and its length in
 * field n, with the suiro.strings metatable. */
void lvalues_setmt_strings(lua_State *L); /* sets it on the table at the top */
int lvalues_is_strings(lua_State *L, int idx);

/* Frames (lframe.c): a userdata with the row and column counts; user value 1 is the sequence of
 * names, 2 the sequence of columns, 3 the index name -> first position. */
typedef struct lframe {
  int64_t nrow;
  int64_t ncol;
} lframe;
lframe *lframe_push(lua_State *L, int64_t nrow);    /* a new frame without columns */
void lframe_append(lua_State *L, int fidx);          /* pops a name (-2) and a column (-1); the
                                                      * caller has checked the column */
lframe *lframe_test(lua_State *L, int idx);
void lframe_push_parts(lua_State *L, int fidx);      /* pushes the names and the columns */
void lframe_open(lua_State *L);                      /* frame constructor into the table at the top */
void lframe_init_mt(lua_State *L);                   /* fills the frame metatable at the top */

/* Ordered records (lrecord.c): the keys of the table at idx in the order they are sent, as a new
 * sequence; and the recorded key order of a table (keys listed but absent are sent as nil). */
void lrecord_push_keys(lua_State *L, int idx);
void lrecord_set_keys(lua_State *L, int t, int keys);

#endif
