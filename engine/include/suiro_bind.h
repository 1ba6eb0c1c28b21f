/*
 * suiro_bind.h — the seam every language face (Lua, Python, R, a C host) stands on.
 *
 * The engine moves bytes between processes; a face turns its language's values into wire values
 * (suiro_wire.h) and back, and runs tasks. Everything both sides of a face must agree on, whatever
 * the language, lives here, written once:
 *
 *   1. the task protocol      what a task's argument and result bytes hold
 *   2. error payloads         how a failure travels (class, message, traceback, element index)
 *   3. function identity      content keys, publishing code once per pool, fetching it in workers
 *   4. zero-copy references   sending a region as a REF item, receiving a validated view
 *   5. random streams         the per-element streams of seeded maps, bit-identical everywhere
 *   6. map plans              how a map's function, input and template are staged, and the cells
 *   7. waiting on pools       one call for an event loop or scheduler watching several pools
 *
 * A face includes suiro.h, suiro_wire.h and this header, and nothing of engine/src.
 * Threads: unless a function says otherwise, it is used by one thread at a time per handle.
 */
#ifndef SUIRO_BIND_H
#define SUIRO_BIND_H

#include "suiro.h"
#include "suiro_wire.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The engine is built with -fvisibility=hidden: what this header declares is its API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---------------------------------------------------------------------------------------------
 * 1. The task protocol (docs/wire-format.md, "Tasks")
 *
 * A binding task (fn code SUIRO_FN_BINDING) carries one wire buffer: a LIST [function, args...].
 * The function item is one of
 *   FUNC   a function of the worker's language: (lang, key) names its code in the pool's blob
 *          store (section 3), key 0 names it by the STR that follows; captured values follow;
 *   STR    a reference, "module.fn" (Lua, Python) or "pkg::fn" (R), resolved by the worker;
 *   CALL   a call spec: a target name or source text, a LIST of positional and a DICT of named
 *          arguments; no further arguments follow it in the task list.
 * A worker answers with a LIST of the values returned (Lua may return several; Python and R
 * return one), or fails with an ERROR value (section 2). A worker that is asked to run a FUNC of
 * another language fails with class "remote" and a message naming both languages.
 * Map runners (fn code SUIRO_FN_MAP) follow section 6.
 */

/* ---------------------------------------------------------------------------------------------
 * 2. Error payloads
 *
 * A task that fails carries an ERROR value: class, message, traceback (may be empty) and the
 * 0-based element index in a map (-1 otherwise); or LIST [ERROR, raised], whose second item is
 * the raised object itself, for faces whose errors can be any value (a Lua table; R's condition
 * objects with the conditions signalled before them, docs/wire-format.md "R conventions"): a reader that
 * wants it decodes the whole payload with its own decoder. The engine reports the failures it detects
 * itself with the classes below; a face may use other classes for its language's exceptions
 * (Python: the exception's qualified name).
 */
#define SUIRO_CLASS_REMOTE "remote"           /* the task's code raised */
#define SUIRO_CLASS_WORKER_DIED "worker_died" /* the worker running it died */
#define SUIRO_CLASS_CANCELLED "cancelled"     /* cancelled, or killed with task:kill() */

typedef struct suiro_error_info {
  suiro_wire_str cls;       /* never empty */
  suiro_wire_str message;
  suiro_wire_str traceback; /* the remote traceback, "" when none */
  int64_t index;      /* 0-based element index, or -1 */
  int slot;           /* worker slot, -1 when unknown */
  int pid;            /* worker pid, 0 when unknown */
  int has_value;      /* the payload is LIST [ERROR, raised] */
} suiro_error_info;

/* Inside a task function: writes an ERROR payload (replacing what was written) and marks the task
 * failed. Returns -1, so `return suiro_out_fail(...)` reads well. */
int suiro_out_fail(suiro_out *o, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str traceback, int64_t index);
/* The same payload for a map element (suiro_map_fail takes it): encoded into buf (at least 64
 * bytes; long messages are cut to fit). Returns its length. */
size_t suiro_error_encode(void *buf, size_t cap, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str traceback, int64_t index);
/* Reads any failed result (kind ERROR, DIED or CANCELLED; a plain-text payload counts as the
 * message of a "remote" error). The strings point into data (or are static). Returns 0, or -1
 * when kind is not a failure. */
int suiro_error_read(int kind, const void *data, size_t len, suiro_error_info *e);
/* suiro_error_read on a collected result; fills slot and pid from it. */
int suiro_result_error(const suiro_result *r, suiro_error_info *e);
/* After suiro_map_wait: the map's first failure (an element that raised, with its index; a worker
 * that died, with the element it was running, its slot and pid; a killed map, class cancelled):
 * 1 with e filled, or 0 when the run succeeded. */
int suiro_map_failure(suiro_map *m, suiro_error_info *e);

/* ---------------------------------------------------------------------------------------------
 * 3. Function identity
 *
 * A face that ships code (Lua bytecode, a pickled Python function, a serialized R closure) stores
 * it once per pool under a content key and sends only the key in FUNC items. Workers fetch the
 * code by key on first sight and cache what they compiled from it (the cache is the face's: its
 * values are its language's objects).
 */
/* The content key of code bytes: a 64-bit hash, never 0 (0 means "by name" in FUNC items). */
uint64_t suiro_fn_key(const void *code, size_t len);
/* Host or worker: makes sure the pool's blob store holds code under key. Each handle remembers the
 * keys it published, so publishing again costs one lookup. */
suiro_status suiro_fn_publish(suiro_pool *p, uint64_t key, const void *code, size_t len);
/* Worker: the code stored under key (a malloc'd copy: free it). PEER_GONE when none is stored. */
suiro_status suiro_fn_fetch(suiro_pool *p, uint64_t key, void **code, size_t *len);

/* A key index: nonzero 64-bit keys (function keys), each given the dense index 0, 1, 2, ... in the
 * order they were added, so a face keeps what it caches per key in an array of its own. Zero it to
 * start; not thread-safe (one per thread or process, like the caches it serves). */
typedef struct suiro_keyidx {
  uint64_t *keys; /* open addressing, 0 = empty */
  uint32_t *idx;
  size_t n, cap;
} suiro_keyidx;
/* The index of key, or -1 when absent. */
ptrdiff_t suiro_keyidx_find(const suiro_keyidx *t, uint64_t key);
/* The index of key, added (as index n) when absent; -1 when key is 0 or memory runs out. */
ptrdiff_t suiro_keyidx_add(suiro_keyidx *t, uint64_t key);
void suiro_keyidx_free(suiro_keyidx *t);

/* ---------------------------------------------------------------------------------------------
 * 4. Zero-copy references (docs/zero-copy.md)
 *
 * Large arrays cross as REF items naming a region (suiro_buf, see suiro.h). The sender grants the
 * receiver a reference in the region's shared count; the receiver's view owns it and gives it back
 * with suiro_buf_unref. A receiver validates every REF against the region as mapped (magic, size,
 * offset, length, element size, shape) and accepts only regions of its own pool family (names of
 * its host's pools); a REF that no sender granted (forged, or a descriptor) still yields a view
 * with a reference of its own, so no process can drop a reference it was not given.
 */
/* Sender: writes a REF item for `bytes` bytes at `data` inside region b (type: a WIRE_T_* element
 * type, WIRE_REF_BYTES or WIRE_REF_WIRE; ndim 0 for a 1-d array or untyped bytes) and grants the
 * receiver its reference. WIRE_OK, or WIRE_ERR (nothing granted) when b has lost its name or the
 * arguments do not describe bytes inside b. */
int suiro_zc_put(suiro_wire_writer *w, suiro_buf *b, const void *data, size_t bytes, int type, int order, int ndim,
                 const uint64_t *dims);
/* Undoes the grants of REF items written into a buffer that will never be sent (an encode that
 * failed after some REFs were written): walks the buffer and gives back one grant per REF. */
void suiro_zc_revoke(const void *buf, size_t len);

typedef struct suiro_view {
  suiro_buf *buf;     /* the region; the view owns one reference (suiro_buf_unref when done) */
  void *data;         /* the bytes the REF names (read-only by convention: others share them) */
  uint64_t bytes;
  uint64_t count;     /* elements (bytes / element size; bytes for untyped kinds) */
  int fresh;          /* 1 when no other holder in this process maps this region: a garbage-
                         collected face counts `bytes` as new memory pressure */
} suiro_view;
/* Receiver: validates ref and maps it. OK, or ERR/PEER_GONE with a message naming the problem. */
suiro_status suiro_zc_open(const suiro_wire_ref *ref, suiro_view *v);

/* Private copies: a received value behaves as a private copy (docs/zero-copy.md). What a face
 * hands out is never the region's shared mapping but a copy-on-write mapping of its pages:
 * nothing is copied until a page is written, and a write — by any code, through any pointer into
 * it — copies that page for this copy alone, so no other process (nor another view here) sees it.
 * suiro_zc_private returns the copy's counterpart of `data` (bytes inside b as mapped here:
 * suiro_view.data, or bytes decoded in place in a region), or NULL with the error set; each copy
 * is given back with suiro_zc_unprivate (the pointer it returned) before b's reference is.
 * suiro_zc_put accepts a pointer into a copy: unwritten, it sends the region's reference; once a
 * page of the bytes was written it returns WIRE_ERR (the caller sends them by value).
 * suiro_zc_written: 1 when a page of [p, p+bytes) of a copy of b was written here (or p is not in
 * one, or it cannot be told), else 0. */
void *suiro_zc_private(suiro_buf *b, const void *data, size_t bytes);
void suiro_zc_unprivate(suiro_buf *b, void *copy);
int suiro_zc_written(suiro_buf *b, const void *p, size_t bytes);

/* ---------------------------------------------------------------------------------------------
 * 5. Per-element random streams
 *
 * xoshiro256** seeded from (seed, element index) through splitmix64: a seeded map's draws depend
 * only on the seed and the element, never on worker count, batch sizes or steal order, and every
 * face draws the same numbers (tests/vectors/rng.txt holds the first draws of a few streams).
 */
typedef struct suiro_rng {
  uint64_t s[4];
} suiro_rng;

void suiro_rng_seed(suiro_rng *r, uint64_t seed, uint64_t index);
uint64_t suiro_rng_next(suiro_rng *r);
/* A double in [0, 1) with 53 random bits: (next >> 11) * 2^-53. */
double suiro_rng_unit(suiro_rng *r);
/* An integer uniform in [lo, hi] (lo <= hi), unbiased by rejection. */
int64_t suiro_rng_range(suiro_rng *r, int64_t lo, int64_t hi);
/* The stream of the map element this thread is running (set by suiro_plan_enter), or NULL outside
 * a seeded map's element. A face's random() draws from it when it is not NULL. */
suiro_rng *suiro_rng_current(void);

/* ---------------------------------------------------------------------------------------------
 * 6. Map plans
 *
 * A plan is the description a map's creator stages at the start of its region (suiro_map_desc)
 * and its runners read: the function (a wire buffer holding a LIST of one item, as in section 1),
 * the input, the seed and the result template. Inputs:
 *   ARRAY   n elements of a numeric or bool type, packed (element i at data + i * size)
 *   RANGE   start + i * step (checked: every element fits in int64)
 *   VALUES  one wire buffer per element (a LIST of one value), 8-aligned, offsets[0..n]
 * Results: a template gives a typed output area (SCALAR: n cells; ARRAY: n x width cells, row
 * major; RECORD: one column of n cells per field); without one each element's result is a wire
 * buffer in its own slot (suiro_map_put / suiro_map_result).
 */
enum { SUIRO_IN_ARRAY = 1, SUIRO_IN_RANGE = 2, SUIRO_IN_VALUES = 3 };
enum { SUIRO_OUT_VALUES = 0, SUIRO_OUT_SCALAR = 1, SUIRO_OUT_ARRAY = 2, SUIRO_OUT_RECORD = 3 };
#define SUIRO_TEMPLATE_MAX_FIELDS 32
#define SUIRO_TEMPLATE_MAX_NDIM 8
#define SUIRO_TEMPLATE_NAME_MAX 63

/* A result template as C sees it (faces parse "f64", "f64[3]", "{mean: f64, sd: f64}" with the
 * one LPeg grammar, engine/conf/suiro/parse.lua, and fill this). */
typedef struct suiro_template {
  int kind;                    /* SUIRO_OUT_* */
  int type;                    /* SCALAR, ARRAY: WIRE_T_F64 .. WIRE_T_BOOL (not C128) */
  int ndim;                    /* ARRAY: cell shape */
  uint64_t shape[SUIRO_TEMPLATE_MAX_NDIM];
  int nfields;                 /* RECORD */
  struct {
    char name[SUIRO_TEMPLATE_NAME_MAX + 1];
    int type;                  /* WIRE_T_F64 .. WIRE_T_BOOL */
  } fields[SUIRO_TEMPLATE_MAX_FIELDS];
} suiro_template;

/* Checks a template (types, extents, field names unique and non-empty); 0, or -1 with a message
 * in err. width (cells per element for SCALAR and ARRAY) is set when not NULL. */
int suiro_template_check(const suiro_template *t, uint64_t *width, char *err, size_t errcap);

typedef struct suiro_plan_spec {
  size_t size;                 /* sizeof(suiro_plan_spec), set by suiro_plan_spec_init */
  const void *fn;              /* wire buffer: LIST [function] */
  size_t fn_len;
  int in_kind;                 /* SUIRO_IN_* */
  uint64_t n;                  /* elements */
  int in_type;                 /* ARRAY: element type (not C128) */
  const void *in_data;         /* ARRAY: n elements; VALUES: the element buffers back to back */
  size_t in_len;               /* VALUES: bytes of in_data */
  const uint64_t *in_offsets;  /* VALUES: n + 1 offsets into in_data (8-aligned, increasing) */
  int64_t start, step;         /* RANGE */
  int seeded;
  uint64_t seed;
  const suiro_template *tpl;   /* NULL: untyped results */
  int stream;                  /* completed ranges can be read as they finish */
  int runners;                 /* 0: one per live worker */
  uint64_t index_base;         /* element i of this plan is element index_base + i of a larger map
                                  (a range of it run elsewhere, e.g. on one host of a cluster): its
                                  random stream is (seed, index_base + i); 0 for a whole map */
} suiro_plan_spec;

void suiro_plan_spec_init(suiro_plan_spec *s);
/* Checks the spec (every size and product before use), creates the map and stages the plan.
 * ERR with a message naming the bad field; nothing is left behind on failure. */
suiro_status suiro_plan_create(suiro_pool *p, const suiro_plan_spec *s, suiro_map **out);

typedef struct suiro_plan suiro_plan; /* read-only view of a staged plan */

/* The plan of a map (creator side) or of a runner's attached map; NULL (with a message) when the
 * region does not hold a valid plan: runners never trust what they read. */
const suiro_plan *suiro_plan_of(suiro_map *m);
uint64_t suiro_plan_size(const suiro_plan *pl);
int suiro_plan_in_kind(const suiro_plan *pl);
int suiro_plan_in_type(const suiro_plan *pl);
const suiro_template *suiro_plan_template(const suiro_plan *pl); /* NULL: untyped results */
/* The function's wire buffer (LIST [function]). */
void suiro_plan_fn(const suiro_plan *pl, const void **buf, size_t *len);
/* The spec's index_base: element i's index in the whole map is index_base + i. */
uint64_t suiro_plan_index_base(const suiro_plan *pl);
/* ARRAY input: the elements (swap in new ones of the same type and length for a prepared map's
 * next run, creator side only). */
void *suiro_plan_in_data(const suiro_plan *pl);

typedef struct suiro_elem {
  int kind;                    /* 'i' int64, 'f' double, 'b' bool (0/1/WIRE_NA_BOOL), 'v' wire value */
  int64_t i;
  double f;
  const void *buf;             /* 'v': LIST [value] */
  size_t len;
} suiro_elem;

/* Element i of the input (i < n): 0, or -1 with a message when the staged input is damaged. */
int suiro_plan_elem(const suiro_plan *pl, uint64_t i, suiro_elem *e);

/* Runner: around each element. enter seeds this thread's stream (suiro_rng_current) when the map
 * is seeded; leave clears it. */
void suiro_plan_enter(const suiro_plan *pl, uint64_t i);
void suiro_plan_leave(void);

/* Result cells. suiro_plan_cell gives the cell of element i (field k for RECORD, else k = 0;
 * ARRAY cells hold `width` values in a row) and its type. */
void *suiro_plan_cell(const suiro_plan *pl, void *out, uint64_t i, int k, int *type);
/* Typed stores with the range rules every face shares: integers into any numeric type (range-
 * checked; f32 rounds), reals into f64/f32, or into integer types when integral and in range;
 * bools only into bool cells; NA into types that have one (f64, i32, i64, bool). Returns 0, or
 * -1 with a message in err ("template i32 cannot hold 3000000000"). */
int suiro_cell_put_int(void *cell, int type, int64_t v, char *err, size_t errcap);
int suiro_cell_put_real(void *cell, int type, double v, char *err, size_t errcap);
int suiro_cell_put_bool(void *cell, int type, int v, char *err, size_t errcap);
int suiro_cell_put_na(void *cell, int type, char *err, size_t errcap);
/* Output column of field k (RECORD) or the whole area (k = 0), and its element count. */
const void *suiro_plan_column(const suiro_plan *pl, const void *out, int k, uint64_t *count);

/* ---------------------------------------------------------------------------------------------
 * 7. Waiting on several pools
 */
/* Host handles only: sleeps until a result lands for one of the pools or timeout passes (< 0:
 * forever), acknowledging the events it saw. Returns how many pools had events, 0 on timeout,
 * -1 on misuse (a worker's handle, more than 256 pools). Collect with timeout 0 afterwards. */
int suiro_wait_pools(suiro_pool *const *pools, size_t n, double timeout);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* SUIRO_BIND_H */
