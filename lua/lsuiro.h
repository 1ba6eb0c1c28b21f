/* lsuiro.h — the Lua binding's internal interface (module suiro.core and the suiro CLI). */
#ifndef LSUIRO_H
#define LSUIRO_H

#include <lauxlib.h>
#include <lua.h>
#include <signal.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_face.h"
#include "suiro_wire.h"
#include "suiro_conf.h"
#include "suiro_wire_compat.h" /* the face still spells the wire API wire_* */

#define LSUIRO_POOL "suiro.pool"
#define LSUIRO_TASK "suiro.task"
#define LSUIRO_ERROR "suiro.error"
#define LSUIRO_CALL "suiro.call"
#define LSUIRO_ARRAY "suiro.array"

/* Metatables are found through light-userdata keys in the registry (a hash lookup on a pointer):
 * cheaper on hot paths than luaL_checkudata's name lookup, and per lua_State. */
extern const char lsuiro_key_pool, lsuiro_key_task, lsuiro_key_error, lsuiro_key_call, lsuiro_key_array;

/* The userdata or table at idx if its metatable is registry[key], else NULL (tables: non-NULL). */
static inline int lsuiro_is(lua_State *L, int idx, const void *key) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, key);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}
static inline void *lsuiro_testud(lua_State *L, int idx, const void *key) {
  void *p = lua_touserdata(L, idx);
  return p && lsuiro_is(L, idx, key) ? p : NULL;
}
static inline void *lsuiro_checkud(lua_State *L, int idx, const void *key, const char *tname) {
  void *p = lsuiro_testud(L, idx, key);
  if (!p) luaL_typeerror(L, idx, tname);
  return p;
}
static inline void lsuiro_setmt(lua_State *L, const void *key) { /* on the value at the top */
  lua_rawgetp(L, LUA_REGISTRYINDEX, key);
  lua_setmetatable(L, -2);
}
/* luaL_newmetatable plus registration under key; leaves the metatable on the stack. */
static inline int lsuiro_newmt(lua_State *L, const char *tname, const void *key) {
  int fresh = luaL_newmetatable(L, tname);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
  return fresh;
}

/* A pool as Lua sees it: the engine handle plus what the binding caches per pool. */
typedef struct lpool {
  suiro_pool *p;
  int owner;    /* 1: created here (stop on close/gc); 0: a worker's current pool */
  int closed;
  double default_timeout; /* seconds for collect when none is given (<0: forever) */
  struct batch_guard *slab; /* where single tasks keep their state (ltask.c); user value 2 */
  const void *fn_ptr;       /* the last function sent (lfunc.c), pinned in the registry */
  uint64_t fn_key;
  char name[64];            /* the name option ("" when none): status().name, tostring */
  char lang[8];             /* the workers' language: "lua", "python", "r" ("" in a worker) */
} lpool;

/* Raises when a Lua function is to be a task of workers that are not Lua (lpool.c). */
/* Raises "pool:<verb>: argument 1: a Lua function cannot run on ... workers" unless lp runs Lua. */
void lpool_check_runs_lua(lua_State *L, const lpool *lp, const char *verb);

typedef struct ltask {
  suiro_task t;
  int own;      /* the state of a task with a finalizer of its own */
  int *state;   /* 0 outstanding, 1 collected, 2 released: &own, or its guard's entry (ltask.c) */
  lpool *lp;    /* its pool, kept alive by user value 1 (the pool, or the guard holding it) */
} ltask;

/* linit.c: the module */
int luaopen_suiro_core(lua_State *L);

/* lbuf.c — a growable byte buffer, a userdata on the stack (freed by the GC, also on errors). */
typedef struct lbuf {
  unsigned char *p;
  size_t len, cap;
} lbuf;
lbuf *lbuf_push(lua_State *L);
void lbuf_put(lua_State *L, lbuf *b, const void *data, size_t n); /* raises when out of memory */

/* lpool.c */
void lpool_open(lua_State *L);
/* Seconds from the duration at idx (a number or a string such as "250ms"); raises naming verb and
 * what for NaN, negative numbers and malformed strings; no limit (math.huge, "inf") is -1. */
double lpool_seconds(lua_State *L, int idx, const char *verb, const char *what);
lpool *lpool_check(lua_State *L, int idx);
void lpool_push_current(lua_State *L);
void lpool_forget_current(lua_State *L);
/* Pushes `nil, why` for a timeout, "closed", "peer_gone" or "full" (returns 2); raises otherwise,
 * naming verb. */
int lpool_push_outcome(lua_State *L, suiro_status st, const char *verb);

/* ltask.c: the task metatables and the method tables (called by lpool_open with the pool
 * metatable on top and its own methods); ltask_funcs are module functions (task_pool). */
void ltask_open(lua_State *L, const luaL_Reg *pool_methods);
extern const luaL_Reg ltask_pool_methods[], ltask_funcs[];

/* lenc.c, ldec.c — Lua values <-> wire. Errors are raised as Lua errors naming the path
 * ("submit: argument 2.conn: userdata (FILE*) cannot be sent"). */
typedef struct lcodec_ctx {
  lua_State *L;
  lpool *pool;          /* where function prototypes get published (NULL: refuse functions) */
  const char *verb;     /* for messages: "submit", "send", ... */
  const void *fn_ptr;   /* the last function looked up (a batch sends one function many times) */
  uint64_t fn_key;
  lua_Integer list;     /* submit_batch: the argument list being encoded (1-based; 0 none);
                           with element set, pool:map's input element */
  int element;
  int returning;        /* a worker's results: functions cannot go back (the host runs none) */
  suiro_msg *msg;       /* when set, the writer is msg's and its grants are recorded there
                           (suiro_face.h section 3): the caller ends it sent or freed */
} lcodec_ctx;

/* Encodes the task payload: the function (or call spec / reference) at fidx and n arguments
 * starting at first. */
void lcodec_encode_task(lcodec_ctx *c, int fidx, int first, int n, wire_writer *w);
/* Encodes n values starting at stack index first as one list. */
void lcodec_encode_values(lcodec_ctx *c, int first, int n, wire_writer *w);
/* Decodes a list of values and pushes them; returns how many. Raises on malformed input. */
int lcodec_decode_values(lua_State *L, const void *buf, size_t len);
/* One value each way (suiro.wire.encode / decode); describe: REF and FUNC items decode to
 * descriptors that encode back to the same bytes. */
void lcodec_encode_value(lcodec_ctx *c, int idx, wire_writer *w);
int lcodec_decode_value(lua_State *L, const void *buf, size_t len, int describe);
/* A decoder the worker drives item by item (lworker.c). FUNC items go to `func`. */
typedef struct lcodec_dec lcodec_dec;
typedef void (*lcodec_func_fn)(lua_State *L, lcodec_dec *d, wire_item *it, void *ud);
struct lcodec_dec {
  lua_State *L;
  wire_reader *r;       /* own_r, or the caller's reader (init_at): continued in place, not copied */
  wire_reader own_r;    /* (a reader is ~1.8 KB: copying one cost a tenth of a worker's task) */
  int refs;             /* stack index of ordinal -> container (0: buffer has no BACKREF) */
  lua_Integer nref;
  lcodec_func_fn func;  /* how to turn FUNC items into functions (worker), or NULL */
  void *func_ud;
  int describe;         /* REF and FUNC items decode to descriptors (suiro.wire.decode) */
};
/* Starts decoding buf; pushes a table on the Lua stack when the buffer has back-references. */
void lcodec_dec_init(lcodec_dec *d, lua_State *L, const void *buf, size_t len, lcodec_func_fn func, void *ud);
void lcodec_dec_init_at(lcodec_dec *d, lua_State *L, wire_reader *r, lua_Integer nref, lcodec_func_fn func,
                        void *ud); /* continues (and advances) a reader that read nref containers already */
int lcodec_dec_item(lcodec_dec *d, wire_item *it);     /* next item (raises when malformed) */
void lcodec_dec_value(lcodec_dec *d, wire_item *it);   /* pushes the value `it` starts */
void lcodec_dec_child(lcodec_dec *d);                  /* reads and pushes the next value */
void lcodec_dec_remember(lcodec_dec *d);               /* top of stack: next shareable container */
/* lerror.c — error objects (suiro.error): a failed task's error, read with the seam's protocol.
 * lerror_push_result pushes the object for a failed result (index > 0 overrides its 1-based
 * element index); lerror_raise raises the value at the top; lerror_open makes the metatable. */
void lerror_push(lua_State *L, const char *cls, size_t cl, const char *msg, size_t ml, const char *tb, size_t tl,
                 int64_t index);
void lerror_push_info(lua_State *L, const suiro_error_info *e);
void lerror_push_result(lua_State *L, const suiro_result *r, int index);
int lerror_raise(lua_State *L);
void lerror_open(lua_State *L);

/* lfunc.c — function identity: the content key of the Lua function at idx (its code published to
 * c->pool on first use); "module.name" of a C function of a loaded module (pushed) or NULL; the
 * name a table is loaded under (pushed) or NULL; a string function reference checked (raises
 * "verb: argument 1: bad function reference ..."). */
uint64_t lfunc_key(lcodec_ctx *c, int idx);
const char *lfunc_cname(lua_State *L, int idx);
const char *lfunc_module_name(lua_State *L, int idx);
void lfunc_check_ref(lua_State *L, int idx, const char *verb);

/* lrecord.c — records' key order (see there): the order of the table at t pushed (or nil), 1 when
 * it has one; the keys to send, in order (pushes the order and an array it returns); recording an
 * order (the table at `order`) for t; the byte order of keys. */
int lrecord_push_order(lua_State *L, int t);
int lrecord_has_order(lua_State *L, int t);
wire_str *lrecord_keys(lua_State *L, int t, lua_Integer *count);
void lrecord_set_order(lua_State *L, int t, int order);
int lrecord_cmp(const void *a, const void *b);

/* Pushes suiro.parse's function `name` (try_duration, try_fnref, ...), required once and kept in
 * the registry: the one reader of the small languages, for C code too. */
static inline void lsuiro_push_parser(lua_State *L, const char *name) {
  lua_pushfstring(L, "suiro.parse.%s", name);
  if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TFUNCTION) return;
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "suiro.parse");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_pushfstring(L, "suiro.parse.%s", name);
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
}

/* Pushes a new table with weak keys; registry[name], such a table, made on first use. */
static inline void lsuiro_new_weak_table(lua_State *L) {
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
}
static inline void lsuiro_push_weak_table(lua_State *L, const char *name) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, name) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lsuiro_new_weak_table(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, name);
}
extern int lpool_is_cli;
/* Set by the suiro command's SIGINT/SIGTERM handler (the signal number): host waits end with an
 * "interrupted!" / "terminated" error (lpool.c). */
extern volatile sig_atomic_t lpool_signal;
/* Raises "interrupted!" / "terminated" when a SIGINT or SIGTERM is pending (the suiro command's
 * handler, or lua5.4's SIGINT hook on the main thread): long C loops call it every so often so a
 * signal ends them (LSUIRO_POLL: every 2^16 iterations). */
void lpool_check_interrupt(lua_State *L);
#define LSUIRO_POLL(L, i)                                                                       \
  do {                                                                                          \
    if ((((lua_Integer)(i)) & 0xffff) == 0) lpool_check_interrupt(L);                           \
  } while (0)

/* lworker.c — the Lua worker; and what the map runner (lmap.c) uses of it: decoding one value
 * with functions, resolving "module.fn", the error handler and the error payload, its own pool. */
int lworker_run(lua_State *L, const char *token);
void lworker_open(lua_State *L);
void lworker_decode_one(lua_State *L, const void *buf, size_t len, int env_idx);
void lworker_resolve(lua_State *L, const char *name, size_t len);
int lworker_msgh(lua_State *L);
struct lpool *lworker_self_pool(void);
int lworker_fail(lua_State *L, suiro_out *out, int errobj);

/* lmap.c — pool:map, suiro.random; the runner of map tasks (in workers) */
void lmap_open(lua_State *L);
/* Stages core.map's function (stack 2) and input (stack 3; the spec table at 4) into s; pushes
 * the three buffers s points into (keep them while s is in use). */
void lmap_stage(lua_State *L, lpool *lp, suiro_plan_spec *s);
/* Pushes a finished map's results in its template's shape (lmap.c explains). */
/* One typed cell of a map's results as a Lua value; nil, "closed" for a stopped pool's map. */
void lmap_push_cell(lua_State *L, int type, const void *cell);
int lmap_push_closed(lua_State *L);
typedef const void *(*lmap_column_fn)(void *ud, int k);
typedef void (*lmap_element_fn)(lua_State *L, void *ud, uint64_t i);
void lmap_push_results(lua_State *L, const suiro_template *t, uint64_t n, lmap_column_fn col, lmap_element_fn elem,
                       void *ud);
/* Reports a map's progress per its `progress` option (user value 2 of the map at self). */
void lmap_progress(lua_State *L, int self, uint64_t done, uint64_t n, double t0, double *last_draw, int hosts,
                   int final);
int lmap_exec_runner(lua_State *L, const void *arg, size_t len, suiro_out *out);

/* lchan.c — suiro.channel: registers the function and the endpoint metatable; an endpoint's wire
 * form (lchan_encode exports it: NULL, or why not; lchan_push_ref claims one and pushes it). */
extern const char lsuiro_key_chan;
void lchan_open(lua_State *L);
int lchan_test(lua_State *L, int idx);
const char *lchan_encode(lua_State *L, int idx, wire_writer *w);
void lchan_push_ref(lua_State *L, const wire_ref *r);

/* lrange.c — suiro.range: pushes one; reads the one at idx (returns 1 if it is a range, else 0). */
void lrange_open(lua_State *L);
void lrange_push(lua_State *L, int64_t start, int64_t step, uint64_t n);
int lrange_to(lua_State *L, int idx, int64_t *start, int64_t *step, uint64_t *n);

/* engine/conf/conf.c (suiro_conf.h) — a parsed template (suiro.parse.template's table at idx) as
 * the engine's description; the Lua face links the config readers. */
#define lembed_template_read suiro_conf_template_read

/* larray.c — typed arrays */
int luaopen_suiro_array(lua_State *L);

/* lvalues.c, lframe.c — suiro.NA, bytes, strings, dict, keys, frame and suiro.wire: sets them in
 * the table at the top (luaopen_suiro_core's). */
void lvalues_open(lua_State *L);

#endif
