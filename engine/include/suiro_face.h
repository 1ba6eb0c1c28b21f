/*
 * suiro_face.h — the loops the engine runs for a language face, over the face's callbacks.
 *
 * suiro_bind.h states the facts both sides of a face agree on (the task protocol, errors, keys);
 * this header holds the algorithms every face would otherwise write again in its own host API,
 * written once in C and driven by a small table of callbacks per face (as Redis's rio or Lua's
 * lua_Reader drive one reader over several backends):
 *
 *   1. callbacks and raising   how a face's callbacks may fail, and the one protected call
 *   2. a worker's task         suiro_exec: the [function, args...] dispatch and the code cache
 *   3. outgoing messages       suiro_msg: a wire writer that remembers the grants written into it
 *   4. map runners             suiro_run_map: attach, claim, elements, completion, cancel, failure
 *   5. waiting                 suiro_wait_sliced: a host's long wait in slices, with its lock and
 *                              interrupt hooks; suiro_timeout_norm, the rule of timeout arguments
 *   6. pools from options      suiro_pool_create_from: a DICT of normalised options checked and
 *                              started, one message per rule
 *   7. a map's staged input    suiro_stage_values, suiro_stage_numbers: the VALUES block and its
 *                              offsets, or a list of numbers as an ARRAY, over a face's callback
 *
 * A face includes suiro.h, suiro_wire.h, suiro_bind.h and this header, and nothing of engine/src.
 * Threads: the state a face hands in (a cache) is used by one thread at a time, the thread that
 * runs the worker's executor.
 */
#ifndef SUIRO_FACE_H
#define SUIRO_FACE_H

#include "suiro_bind.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---------------------------------------------------------------------------------------------
 * 1. Callbacks and raising
 *
 * A face's callbacks run the face's language and may fail in its own way: by raising (Lua's
 * lua_error, R's Rf_error: a longjmp) or by returning a failure with the error pending (Python's
 * PyErr_*). The engine calls them only inside the face's `protect` callback, which the face
 * implements with its own protected call (lua_pcall, R_ToplevelExec, a plain call in Python):
 *
 *   int protect(void *ud, int (*body)(void *ctx), void *ctx)
 *       runs body(ctx) and returns what it returned; -1 when body raised (the raised error is then
 *       the face's pending error, as when a callback returned -1).
 *
 * Across a call of protect the engine holds nothing that protect's return does not give back: a
 * raise may leave a body at any callback, and every buffer the engine took for that body is
 * released by the caller of protect, after it returns. So the engine's loops are longjmp-safe.
 * The face's `fail` callback turns its pending error into the task's ERROR payload; it runs
 * outside protect and must not raise.
 */

/* ---------------------------------------------------------------------------------------------
 * 2. A worker's task (suiro_bind.h section 1), read once for every language
 *
 * suiro_exec reads the task list and its function item, checks what the protocol says of them,
 * finds the function (a name resolved by the face, or code fetched by key from the pool's blob
 * store and compiled by the face, both cached), and hands the rest of the reader to the face to
 * decode the arguments and run. Every refusal is one class (SUIRO_CLASS_REMOTE) and one message,
 * written here, the same in every worker:
 *
 *   a task that is not a list [fn, ...]   "malformed task: expected a list [function, arguments...]"
 *   a wire error while reading it         "malformed task: wire: ..." (the reader's message)
 *   more than SUIRO_EXEC_MAX_ARGS args    "malformed task: N arguments are too many (at most ...)"
 *   a function item of no function kind   "malformed task: expected a function, got <tag>"
 *   a call spec followed by arguments     "malformed task: a call spec takes no further arguments"
 *   a FUNC of another language            "a <lang> function cannot run on a <lang> worker (...)"
 *   a name the face does not find         "cannot find function \"<name>\""
 *   code that is not stored under its key "cannot load the task's function (key <hex>): ..."
 *   code the face cannot load             "the task's function (key <hex>) is damaged: its code does not load"
 *
 * The reader the face receives has read the task list (container ordinal 0, the only container
 * read so far) and the function item's header (`f`). A FUNC item is container ordinal 1: a face
 * whose FUNC values can be shared (a Lua closure that captures itself) registers its function at
 * that ordinal before decoding the children. Then follow the FUNC's f->n children (its name or
 * nil, then what it captured), then the nargs arguments; a STR or CALL item has none of the
 * former (a CALL's list and dict of arguments follow its header, as suiro_wire_next gives them).
 *
 * The cache: names (STR items) and code keys (FUNC items) map to what the face's by_name and
 * by_code returned, for the life of the cache (a worker's life): the face keeps those objects
 * alive (a registry reference, a strong reference, R_PreserveObject). A name not found is not
 * cached (a later task may define it). Code is checked against its key (suiro_fn_key) before
 * by_code sees it.
 */
#define SUIRO_EXEC_MAX_ARGS 100000 /* arguments of one task (Lua's C stack holds ~1e6 slots) */

typedef struct suiro_exec_cache {
  /* private to exec.c; zero it to start (a static is zeroed) */
  suiro_keyidx codes, names;
  void **code_fn;           /* at the index codes gives a key */
  struct suiro_exec_name *name_fn; /* at the index names gives a name's hash */
  size_t code_cap, name_cap;
  void *held;               /* code bytes by_code is loading (freed by the next suiro_exec*) */
} suiro_exec_cache;

typedef struct suiro_exec_ops {
  int lang;                 /* WIRE_LANG_*: FUNC items of other languages are refused */
  const char *lang_name;    /* "lua", "python", "r": for the refusal's message */
  suiro_exec_cache *cache;  /* the face's (one per worker) */
  int (*protect)(void *ud, int (*body)(void *ctx), void *ctx);
  /* "module.fn" / "pkg::fn": 1 with *fn set, 0 when there is no such function (nothing pending),
   * or -1 (or a raise) when resolving it failed otherwise (a module that raised on load). */
  int (*by_name)(void *ud, suiro_wire_str name, void **fn);
  /* compiles the code stored under key: 1 with *fn set, 0 when the bytes are not code the face
   * can load (damaged; nothing pending), -1 (or a raise) for other failures (a pickled function
   * whose module is missing). Must not call suiro_exec or suiro_exec_code. */
  int (*by_code)(void *ud, uint64_t key, const void *code, size_t len, void **fn);
  /* runs fn (from the cache; NULL for a FUNC by name, key 0: the face resolves it from the
   * children) on the nargs arguments that follow in r, and writes the result into out (suiro_out_*).
   * 0, or -1 (or a raise) with the error pending. */
  int (*run)(void *ud, void *fn, const suiro_wire_item *f, suiro_wire_reader *r, uint64_t nargs, suiro_out *out);
  /* runs the call spec whose CALL header is `spec` (its arguments follow in r); as run. */
  int (*run_call)(void *ud, const suiro_wire_item *spec, suiro_wire_reader *r, suiro_out *out);
  /* writes the pending error as the task's ERROR payload (index: -1 for a task); returns -1. */
  int (*fail)(void *ud, suiro_out *out, int64_t index);
} suiro_exec_ops;

/* Runs one binding task (suiro_bind.h section 1): the executor's SUIRO_FN_BINDING case. Returns 0,
 * or nonzero with the task failed (an ERROR payload in out). */
int suiro_exec(const void *arg, size_t len, suiro_out *out, const suiro_exec_ops *ops, void *ud);

/* The function compiled from the code stored under key, from the cache or fetched and compiled
 * now: for a face's decoder meeting a FUNC value among the arguments or captured values (call it
 * inside protect). 1 with *fn set; 0 with the message (the one suiro_exec would give) in err;
 * -1 (or a raise) when by_code failed with the face's error pending. */
int suiro_exec_code(const suiro_exec_ops *ops, void *ud, uint64_t key, void **fn, char *err, size_t errcap);

/* Empties a cache (the face released or forgot the objects it holds). */
void suiro_exec_cache_free(suiro_exec_cache *c);

/* ---------------------------------------------------------------------------------------------
 * 3. Outgoing messages (before the map runner: a runner's results are messages)
 *
 * A message is a wire writer plus a ledger of the zero-copy grants (suiro_bind.h section 4) written
 * into it. Exactly one of these ends every message that was initialised:
 *   suiro_msg_sent  the bytes went out (the receiver now owns the grants): the message drops the
 *                   references it held of its own (regions it made for a copy);
 *   suiro_msg_free  they never will: every grant is given back (suiro_buf_unsend), then as sent.
 * Both free the writer's heap and leave the message initialised and empty (as after init), so a
 * message may be reused; calling either again is harmless. The ledger holds 8 grants inline and
 * grows on the heap. The writer starts in the caller's `stack` buffer (it must outlive the message).
 */
typedef struct suiro_msg_grant {
  suiro_buf *b;
  int own; /* 1: the message holds one reference of b (a region it made), dropped when it ends */
} suiro_msg_grant;

typedef struct suiro_msg {
  suiro_wire_writer w;     /* write the value here (suiro_msg_writer) */
  int n, cap;              /* grants written, room */
  suiro_msg_grant *g;      /* inl, or the heap */
  suiro_msg_grant inl[8];
  void *stack;             /* the writer's first buffer, for reuse */
  size_t stack_cap;
} suiro_msg;

void suiro_msg_init(suiro_msg *m, void *stack, size_t cap);
static inline suiro_wire_writer *suiro_msg_writer(suiro_msg *m) { return &m->w; }
/* Writes a REF to `bytes` at `data` inside region b (as suiro_zc_put) and records the grant; with
 * own = 1 the message takes over one reference of b (given or not: on WIRE_ERR it is dropped).
 * WIRE_OK; WIRE_ERR when no REF was written (b has no name, or out of memory: then nothing is
 * granted, and the caller may send a copy instead). */
int suiro_msg_put_ref(suiro_msg *m, suiro_buf *b, int own, const void *data, size_t bytes, int type, int order,
                      int ndim, const uint64_t *dims);
/* The message's bytes (suiro_wire_writer_finish): WIRE_OK, or an error (suiro_wire_writer_error). */
int suiro_msg_finish(suiro_msg *m, const void **buf, size_t *len);
void suiro_msg_sent(suiro_msg *m);
void suiro_msg_free(suiro_msg *m);

/* ---------------------------------------------------------------------------------------------
 * 4. Map runners (docs/maps.md; the plan of suiro_bind.h section 6)
 *
 * A map runner task (a worker's SUIRO_FN_MAP_RUNNER) is run by
 *   suiro_run_map(arg, len, out, ops, ud)
 * which attaches to the map, claims ranges of elements until none is left or the map is cancelled
 * (one rule: a cancel leaves the element loop and the claim loop), marks each range completed, and
 * detaches. The face's callbacks, all but `fail` inside one `protect`:
 *   prepare(ud, r)       build the plan's function (suiro_plan_fn(r->plan)); keep it in ud
 *   range(ud, r, b, e)   run elements b..e-1: the face's inner loop is
 *                          suiro_elem el;
 *                          while ((k = suiro_runner_next(r, &el)) > 0) {
 *                            v = f(el);                              the face's call
 *                            if (r->tpl) store v into the cells of suiro_plan_cell(r->plan,
 *                                        r->out, r->current, field, &type) (width r->width)
 *                            else { encode v into suiro_msg_writer(suiro_runner_msg(r));
 *                                   suiro_runner_put(r) }          -1: raise suiro_last_error()
 *                          }
 *                          k < 0: raise "map: " suiro_last_error() (damaged input)
 *                        suiro_runner_next leaves the previous element (suiro_plan_leave), stops at
 *                        e or at a cancel, decodes the next one and enters it (its random stream).
 *   fail(ud, r, &cls, &msg, &trace)  after protect failed: the pending error's parts (borrowed
 *                        until `done`); the engine encodes the payload (heap, the whole message
 *                        and traceback) and fails the map at r->current (element index, 0-based).
 *   done(ud)             (may be NULL) release what fail lent.
 * protect(ud, body, ctx) returns 0 when body returned 0, nonzero when it raised or returned
 * nonzero (a face without longjmp, Python, returns -1 from a callback with its exception set).
 * A failure before the map is attached, or an attach error, is the task's error (suiro_out_error).
 * After a failure the engine leaves the element (suiro_plan_leave) and frees the runner's message
 * if the failure came while it was being written (its grants given back). suiro_run_map returns 0
 * (the outcome is the map's), or -1 when the task itself failed (out holds the error).
 * The per-element work is the face's loop and direct calls; the callbacks run once per range
 * (measured: bench/bench_map.lua identity, docs in engine/src/runner.c).
 */
typedef struct suiro_runner {
  suiro_map *map;
  const suiro_plan *plan;
  const suiro_template *tpl; /* NULL: results are wire values (suiro_runner_put) */
  void *out;                 /* the runner's typed output area (tpl != NULL) */
  uint64_t width;            /* values per ARRAY cell, else 1 */
  uint64_t current;          /* the element running (0-based) */
  /* the engine's, below */
  uint64_t end;
  int entered, started, msg_live;
  suiro_msg msg;
  uint64_t stack[32];      /* the message's first buffer */
} suiro_runner;

typedef struct suiro_runner_ops {
  int (*protect)(void *ud, int (*body)(void *ctx), void *ctx);
  int (*prepare)(void *ud, suiro_runner *r);
  int (*range)(void *ud, suiro_runner *r, uint64_t begin, uint64_t end);
  void (*fail)(void *ud, suiro_runner *r, suiro_wire_str *cls, suiro_wire_str *msg, suiro_wire_str *trace);
  void (*done)(void *ud);
} suiro_runner_ops;

int suiro_run_map(const void *arg, size_t len, suiro_out *out, const suiro_runner_ops *ops, void *ud);
/* 1: element r->current is entered, its input in *e; 0: the range is over (or cancelled); -1: the
 * staged input is damaged (suiro_last_error). */
int suiro_runner_next(suiro_runner *r, suiro_elem *e);
/* The message for element r->current's wire result (initialised, empty). */
suiro_msg *suiro_runner_msg(suiro_runner *r);
/* Stores the message as element r->current's result and ends it (sent, or freed): 0, or -1 with
 * suiro_last_error (the writer's error, or the map's heap is full). */
int suiro_runner_put(suiro_runner *r);

/* ---------------------------------------------------------------------------------------------
 * 5. Waiting (a host's collect, collect_any, collect_all, map wait, submit into a full queue)
 *
 * A face waits through suiro_wait_sliced so that every language waits alike: a long wait is cut
 * into slices, between which the face may look for an interrupt (Ctrl-C), and around which it
 * may let go of what a waiting thread must not hold (Python's GIL and its pool lock). `step` is
 * the engine call being waited for (suiro_collect(p, t, &r, slice), ...); it is called with a
 * slice of seconds and returns SUIRO_TIMEOUT while the wait goes on. The order:
 *
 *   timeout 0             step(0) once.
 *   held  (seconds, >= 0) the first part of the wait, with everything held (a quick result then
 *                         costs no hand-over of the face's locks).
 *   block (seconds, > 0)  then step(block) inside release(ud, 0) / reacquire(ud, 0).
 *   slice (seconds, > 0)  then slices of at most `slice`: before each, interrupted(ud) (nonzero
 *                         ends the wait: the face has its error pending; it may also raise, as
 *                         R_CheckUserInterrupt longjmps: nothing is held across it); with
 *                         use_eventfd, the slice is a poll of the pool's event fd inside
 *                         release(ud, 1) / reacquire(ud, 1) (a deeper release: Python drops its
 *                         pool lock too, so other threads use the pool meanwhile) and step(0)
 *                         after it; without, step(slice) inside release(ud, 0) / reacquire(ud, 0).
 *
 * reacquire returns 0, or nonzero when the wait cannot go on (the pool was stopped meanwhile):
 * suiro_wait_sliced then returns SUIRO_WAIT_STOPPED. Any hook may be NULL (R: no locks). Returns
 * step's first status other than SUIRO_TIMEOUT, SUIRO_TIMEOUT when the deadline passed (a
 * negative timeout: none), SUIRO_WAIT_STOPPED as above or when interrupted.
 */
#define SUIRO_WAIT_STOPPED (-1)

typedef struct suiro_wait_hooks {
  double held, block, slice;
  int use_eventfd;
  void (*release)(void *ud, int deep);
  int (*reacquire)(void *ud, int deep);
  int (*interrupted)(void *ud);
} suiro_wait_hooks;

/* The one rule for a timeout argument of every face, once a face's duration string ("250ms",
 * "inf") became seconds: NaN is refused (SUIRO_TIMEOUT_NAN), a negative number is refused
 * (SUIRO_TIMEOUT_NEGATIVE), 1e12 seconds or more (infinity) means no limit (*out = -1), anything
 * else is itself. The face words the refusal in its language ("None", "math.huge", "Inf"). */
#define SUIRO_TIMEOUT_NAN (-1)
#define SUIRO_TIMEOUT_NEGATIVE (-2)
int suiro_timeout_norm(double seconds, double *out);

typedef suiro_status (*suiro_wait_step)(void *ctx, double slice);
int suiro_wait_sliced(suiro_pool *p, double timeout, suiro_wait_step step, void *ctx, const suiro_wait_hooks *h,
                      void *ud);

/* ---------------------------------------------------------------------------------------------
 * 6. Pools from options (engine/src/opts.c)
 *
 * A face's pool constructor: the options normalised by suiro_conf (suiro_conf_pool_options), plus
 * the worker command the face built from the launcher, encoded by the face as one wire DICT
 * (keys in any order; a NIL value is an absent option):
 *
 *   workers        integer 0..64 (default 1)         max_workers   integer 1..64, >= workers
 *   ring_cap       power of two 2..2^20              result_slots  integer 1..2^22
 *   slot_size      power of two 64..65536            result_size   power of two 64..65536
 *   respawn        bool (default true)               start_timeout seconds >= 0 (>= 1e12: no limit)
 *   timeout        seconds >= 0: the pool's default wait (suiro_pool_info.timeout; >= 1e12: -1)
 *   name           non-empty string (suiro_pool_info.name)
 *   lang           "lua", "python" or "r": the workers' language (default: host_lang)
 *   exe            non-empty string: the worker executable (default: this program)
 *   argv           list of strings (empty: the default command, { exe })
 *   env            dict NAME -> string (NAME: letters, digits, _): added to the workers' env
 *   backend        "local" or "mpi" (checked; the face runs the MPI tier over this pool)
 *   launcher       anything (skipped: the face built exe, argv and env from it)
 *
 * Integers may be I64 or integral F64 (R's numbers); seconds I64 or F64; strings hold no NUL;
 * a BACKREF is refused (a face encodes each list once: "got a back-reference").
 * Every refusal names its option and starts with "pool: " (a face replaces that with its own
 * verb): "pool: workers must be an integer in 0..64, got -1", "pool: argv item 2 (of 3) must be
 * a string without NUL bytes, got a number", "pool: unknown option \"x\" (options: ...)",
 * "pool: options must be a dict, got a list", "pool: options: wire: ..." (damaged or truncated
 * bytes); a failure of suiro_pool_create itself is "pool: " and its message.
 *
 * The pool's default timeout, name and workers' language are the face's to keep (the engine pool
 * has none of them): suiro_pool_create_from fills *info (may be NULL) with them, so a face reads
 * no option of its own. dict needs no alignment (an unaligned one is read from a copy).
 */
typedef struct suiro_pool_info {
  int lang;        /* WIRE_LANG_* of the workers: the lang option, else host_lang */
  double timeout;  /* the timeout option in seconds; -1: none given, or no limit */
  char name[64];   /* the name option ("" when none; a longer one is cut at 63 bytes) */
} suiro_pool_info;

/* host_lang: WIRE_LANG_* of the calling face. SUIRO_OK with *out, or SUIRO_ERR (a refusal or the
 * create's own failure; suiro_last_error) with *out NULL. */
suiro_status suiro_pool_create_from(const void *dict, size_t len, int host_lang, suiro_pool **out,
                                    suiro_pool_info *info);
/* The same with variables set over the options' env: extra_env, NULL-terminated "NAME=value"
 * strings, each replacing an entry of that name (an MPI serving rank's own rank and node). */
suiro_status suiro_pool_create_from_env(const void *dict, size_t len, int host_lang, const char *const *extra_env,
                                        suiro_pool **out, suiro_pool_info *info);

/* ---------------------------------------------------------------------------------------------
 * 7. A map's staged input (engine/src/stage.c)
 *
 * A map over values the face walks (a Lua table, a Python list, an R list) is staged as
 *   VALUES  (suiro_stage_values) each element a stand-alone wire buffer, LIST [value], written by
 *           put(ud, i, m) into suiro_msg_writer(m) (the writer is reset before each element; the
 *           face writes the LIST of one and its value); the engine appends the buffers to one
 *           8-aligned block and keeps the n + 1 offsets;
 *   ARRAY   (suiro_stage_numbers) a list of only integers, or only floats: num(ud, i, count,
 *           kinds, cells) converts elements i..i+count-1 in the face's own loop (a chunk of at most
 *           512; no call per element): kinds[k] = 'i' with an int64 in cells[8k..], or 'f' with a
 *           double, and returns count, or returns k at element i+k that is no number (a string,
 *           an integer that does not fit 64 bits). Element 0 decides the kind, and an element of
 *           the other kind or no number ends it: 0, nothing staged, the face stages VALUES
 *           instead. cells is the array itself (8-aligned); the engine checks the kinds.
 * Both fill s (in_kind, n, in_data, in_len, in_offsets, in_type), pointing into st: keep st until
 * suiro_plan_create returned. put returns 0, or -1 (or raises) with the face's error pending;
 * num must not fail. Every size is checked (sums, products, suiro_budget_check) before it is
 * allocated, and every refusal names the element, counted from st->origin (1 unless the face sets
 * 0): "element 7: wire: nesting deeper than 64", "element 3: staged input: ... exceed the memory
 * limit ...", "element 2: the face's encoder failed" (put returned -1: the face raises its own).
 *
 * The face owns the suiro_stage (in a Lua userdata, R's cleanup, a C local in Python) and ends it
 * with suiro_stage_free, after a raise too: the engine holds nothing outside it. It must not move
 * after suiro_stage_init (the message's first buffer is inside it). st->msg is the stage's own
 * message; a face whose encoder has a message of its own (its zero-copy stage, R) points st->msg
 * at it before staging, and then the grants of every element gather there, for the face to end.
 * After suiro_plan_create succeeded, suiro_stage_sent: the grants written into the stage's own
 * message now belong to the plan. suiro_stage_take hands the VALUES block over (free() it; R
 * keeps it to revoke the grants no runner took).
 */
typedef struct suiro_stage {
  suiro_msg *msg;          /* where each element is written: &own (init) or the face's */
  uint64_t origin;         /* element numbers in messages start here (init: 1) */
  unsigned char *data;     /* the block (malloc) */
  size_t len, cap;
  uint64_t *offs;          /* VALUES: n + 1 offsets (malloc) */
  suiro_msg own;
  uint64_t stack[64];      /* own's first buffer */
} suiro_stage;

typedef int (*suiro_stage_put)(void *ud, uint64_t i, suiro_msg *m);
typedef uint64_t (*suiro_stage_num)(void *ud, uint64_t i, uint64_t count, unsigned char *kinds, void *cells);

void suiro_stage_init(suiro_stage *st);
/* SUIRO_OK with s set, or SUIRO_ERR (suiro_last_error; after put failed the face's error is the
 * one to raise). */
suiro_status suiro_stage_values(suiro_stage *st, suiro_plan_spec *s, uint64_t n, suiro_stage_put put, void *ud);
/* 1: staged as an ARRAY (s set); 0: not a list of numbers of one kind; -1: too large (suiro_last_error). */
int suiro_stage_numbers(suiro_stage *st, suiro_plan_spec *s, uint64_t n, suiro_stage_num num, void *ud);
void suiro_stage_sent(suiro_stage *st);
void *suiro_stage_take(suiro_stage *st, size_t *len);
void suiro_stage_free(suiro_stage *st);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* SUIRO_FACE_H */
