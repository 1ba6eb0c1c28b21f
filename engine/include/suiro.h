/*
 * suiro.h — the public C API of libsuiro, an embeddable task engine whose worker processes talk
 * through shared memory.
 *
 * Conventions
 *   - Handles are opaque. Functions return a suiro_status; SUIRO_ERR comes with a message from
 *     suiro_last_error() (thread-local, valid until the next failing call on the same thread).
 *   - Timeouts are seconds as a double: 0 polls, a negative value waits forever.
 *   - TIMEOUT, CLOSED, PEER_GONE and FULL are outcomes, not failures: nothing was consumed.
 *   - A pool handle is used by one thread at a time. Workers are processes, not threads.
 */
#ifndef SUIRO_H
#define SUIRO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* The engine is built with -fvisibility=hidden: what this header declares is its API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define SUIRO_VERSION_MAJOR 0
#define SUIRO_VERSION_MINOR 1
#define SUIRO_VERSION_PATCH 0

const char *suiro_version(void);

typedef enum suiro_status {
  SUIRO_OK = 0,
  SUIRO_TIMEOUT,   /* the wait ran out; retry later */
  SUIRO_CLOSED,    /* the pool is stopping or stopped */
  SUIRO_PEER_GONE, /* no live worker can serve the request */
  SUIRO_FULL,      /* a ring or the result slots are full */
  SUIRO_ERR        /* misuse or a system failure: see suiro_last_error() */
} suiro_status;

const char *suiro_status_name(suiro_status s);
const char *suiro_last_error(void);

/* Monotonic clock in seconds (nanosecond resolution). */
double suiro_now(void);

/* Memory budget: the most bytes one allocation a caller asks for may take. The smallest of the
 * physical memory, RLIMIT_AS and RLIMIT_DATA, and SUIRO_MAX_BYTES (bytes, or with a K/M/G/T
 * suffix) when set. Every count read from a caller or from bytes is checked against it before
 * anything is allocated. */
uint64_t suiro_budget(void);
/* OK when count items of size bytes each fit the budget; otherwise SUIRO_ERR with a message
 * naming what (the argument), the count, the bytes it would cost and the limit. */
suiro_status suiro_budget_check(const char *what, uint64_t count, uint64_t size);

/* ---------------------------------------------------------------------------------------------
 * Regions: named POSIX shared memory, mode 0600, named /suiro_<pid>_<start>_<counter> so that a
 * later process can tell whether the creator still lives.
 */
typedef struct suiro_region suiro_region;

suiro_status suiro_region_create(size_t size, suiro_region **out);
suiro_status suiro_region_open(const char *name, int writable, suiro_region **out);
void *suiro_region_addr(const suiro_region *r);
size_t suiro_region_size(const suiro_region *r);
const char *suiro_region_name(const suiro_region *r);
/* Unmaps; with unlink != 0 also removes the name. */
void suiro_region_close(suiro_region *r, int unlink);

/* Removes every /dev/shm/suiro_* segment whose creating process is gone. Returns how many.
 * Pool creation calls it, so a crashed host's segments never outlive the next start. */
int suiro_reap(void);

/* ---------------------------------------------------------------------------------------------
 * Pools
 */
typedef struct suiro_pool suiro_pool;

/* A task handle: result slot and generation packed in one word. */
typedef uint64_t suiro_task;

typedef struct suiro_pool_opts {
  size_t size;             /* sizeof(suiro_pool_opts), set by suiro_pool_opts_init */
  int workers;             /* workers started at create (default 1) */
  int max_workers;         /* upper bound for spawn_workers (default max(workers, 16), <= 64) */
  uint32_t ring_cap;       /* entries per submitter ring, power of two (default 4096) */
  uint32_t slot_size;      /* bytes per ring entry, power of two 64..65536 (default 256) */
  uint32_t result_slots;   /* result slots of the host submitter (default 131072) */
  uint32_t result_size;    /* bytes per result slot, power of two 64..65536 (default 256) */
  const char *exe;         /* worker executable (default: this program) */
  const char *const *argv; /* worker argv, NULL-terminated (default: { exe }); the engine appends
                              "--suiro-worker" TOKEN */
  const char *const *env;  /* extra KEY=VALUE entries for workers, NULL-terminated */
  const char *const *env_keep; /* variables passed through from the host (default: a whitelist) */
  int respawn;             /* 1: replace a worker that dies (default 0) */
  double start_timeout;    /* wait this long at create for workers to attach (default 10 s;
                              0: do not wait) */
} suiro_pool_opts;

void suiro_pool_opts_init(suiro_pool_opts *o);

suiro_status suiro_pool_create(const suiro_pool_opts *o, suiro_pool **out);
/* Stops workers (waiting up to timeout for them to finish their current task, then killing them),
 * removes the pool's shared memory and frees the handle. Pending tasks are dropped. */
suiro_status suiro_pool_stop(suiro_pool *p, double timeout);
/* The name another process passes to suiro_pool_attach (not yet implemented across processes). */
const char *suiro_pool_name(const suiro_pool *p);
/* fork: the pid of the process that made p when this process was forked from it (0 when p is
 * this process's own, or not a live pool). Such a pool is
 * inert here: every call on it fails with "this pool belongs to process N" (suiro_pool_stop
 * too, touching nothing: its workers, names and rings are the parent's); views of its values
 * stay readable. A face's finalizers and exit handlers skip such pools. */
int suiro_pool_inherited(const suiro_pool *p);

/* Function codes. 0 is the binding executor (suiro_set_executor), 1 a map runner (also handed to
 * the binding executor, see suiro_map_*); other codes name native functions registered with
 * suiro_register. */
#define SUIRO_FN_BINDING 0u
#define SUIRO_FN_MAP 1u
uint64_t suiro_fn_id(const char *name);

/* Submit one task; its argument bytes are copied. Waits up to timeout for ring space (FULL when
 * there is none). */
suiro_status suiro_submit(suiro_pool *p, uint64_t fn, const void *arg, size_t len,
                          suiro_task *out, double timeout);

typedef struct suiro_task_spec {
  uint64_t fn;
  const void *arg;
  size_t len;
} suiro_task_spec;

/* Submit n tasks with one publication per run of free entries. *accepted tells how many went in
 * (in order); FULL or TIMEOUT when fewer than n did. */
suiro_status suiro_submit_batch(suiro_pool *p, const suiro_task_spec *specs, size_t n,
                                suiro_task *out, size_t *accepted, double timeout);

typedef enum suiro_result_kind {
  SUIRO_RESULT_VALUE = 1,     /* the task returned data */
  SUIRO_RESULT_ERROR = 2,     /* the task failed; data is the error payload (UTF-8 for native) */
  SUIRO_RESULT_DIED = 3,      /* the worker running it died; data is a message */
  SUIRO_RESULT_CANCELLED = 4  /* cancelled before it started */
} suiro_result_kind;

typedef struct suiro_result {
  int kind;            /* suiro_result_kind */
  const void *data;    /* valid until the next collect on this handle */
  size_t len;
  int worker_slot;     /* the worker that ran it (or died running it), -1 if none */
  int worker_pid;
} suiro_result;

/* Waits for one task. On OK the handle is consumed. */
suiro_status suiro_collect(suiro_pool *p, suiro_task t, suiro_result *res, double timeout);
/* Waits for the first of n tasks to finish; consumes it and tells its index. */
suiro_status suiro_collect_any(suiro_pool *p, const suiro_task *tasks, size_t n, size_t *index,
                               suiro_result *res, double timeout);
/* Waits until all n tasks have finished, then hands each result to sink in input order and
 * consumes them. A timeout consumes nothing. A nonzero return from sink stops the delivery
 * (the remaining tasks stay uncollected) and collect_all returns SUIRO_ERR. */
typedef int (*suiro_sink_fn)(void *ctx, size_t index, const suiro_result *res);
suiro_status suiro_collect_all(suiro_pool *p, const suiro_task *tasks, size_t n,
                               suiro_sink_fn sink, void *ctx, double timeout);
/* Nonzero when the task has a result waiting (does not consume it). */
int suiro_task_ready(suiro_pool *p, suiro_task t);
/* Its result's kind (SUIRO_RESULT_*) when finished, 0 when not, -1 for a handle that is not
 * outstanding; consumes nothing. */
int suiro_task_kind(suiro_pool *p, suiro_task t);
/* Waits until all n tasks have finished; consumes nothing (collect them afterwards, timeout 0). */
suiro_status suiro_wait_all(suiro_pool *p, const suiro_task *tasks, size_t n, double timeout);
/* Advisory: returns 1 when the task will not start (it completes as CANCELLED), 0 when it has
 * started or finished already. A running task may poll suiro_cancelled(). */
int suiro_cancel(suiro_pool *p, suiro_task t);
/* Stops a task for good: not started yet, it is cancelled; running, the worker running it is
 * killed and replaced (even without respawn) and the task completes as CANCELLED; finished, it
 * keeps its result. Host only. Other tasks the worker was running (nested helping) fail as DIED. */
suiro_status suiro_task_kill(suiro_pool *p, suiro_task t);
/* Gives up a handle that will never be collected (finalizer path): its slot is recycled once the
 * task finishes. */
void suiro_task_release(suiro_pool *p, suiro_task t);
/* Result slots this handle can still hand out, and how many it has in all: every submitted task
 * holds one until it is collected or released (a released one once it finishes). */
uint32_t suiro_free_slots(suiro_pool *p, uint32_t *total);

/* Interrupts: every wait of a host (collect, a full queue, map waits) asks check(ud) after each
 * sleep (at most 100 ms; a signal cuts it short) and ends with SUIRO_ERR "interrupted" when it
 * returns nonzero. A face sets it to see Ctrl-C (Lua: a signal flag; R: R_CheckUserInterrupt). */
void suiro_set_interrupt_check(int (*check)(void *ud), void *ud);

/* Diagnostics: the few messages the engine has no caller to return to (a worker process that
 * cannot join its pool says why before it gives up) go to fn(ud, msg, len): one line, without its
 * newline, msg[len] == 0. The default (fn NULL) writes the line and a newline to file descriptor
 * 2. The engine calls it only from the thread of the engine call that reports (never from a
 * thread of its own); set it once, before pools or workers start (R: REprintf). */
typedef void (*suiro_diag_fn)(void *ud, const char *msg, size_t len);
void suiro_set_diag(suiro_diag_fn fn, void *ud);

/* Event loop integration: a file descriptor that becomes readable when a result arrives. A burst
 * of completions makes it readable once. After it fires call suiro_pool_event_ack (which drains
 * and re-arms it) and only then collect with timeout 0. */
int suiro_pool_eventfd(suiro_pool *p);
void suiro_pool_event_ack(suiro_pool *p);

/* Growing and shrinking (host only). */
suiro_status suiro_pool_spawn_workers(suiro_pool *p, int n);
/* The worker in `slot` finishes its current task and exits; waits up to timeout for it. */
suiro_status suiro_pool_retire(suiro_pool *p, int slot, double timeout);

typedef enum suiro_worker_state {
  SUIRO_WORKER_EMPTY = 0,  /* slot unused */
  SUIRO_WORKER_STARTING,   /* spawned, not attached yet */
  SUIRO_WORKER_IDLE,       /* attached, waiting for work */
  SUIRO_WORKER_BUSY,       /* running a task */
  SUIRO_WORKER_RETIRING,   /* asked to exit after its current task */
  SUIRO_WORKER_EXITED,     /* exited cleanly */
  SUIRO_WORKER_DEAD        /* died (signal or unexpected exit) */
} suiro_worker_state;

const char *suiro_worker_state_name(int state);

typedef struct suiro_worker_info {
  int slot;
  int pid;
  int state;            /* suiro_worker_state */
  uint64_t tasks;       /* tasks run */
  uint64_t steals;      /* tasks taken from another worker's queue */
  uint64_t parks;       /* times it went to sleep */
  uint64_t moves;       /* times it moved itself off a CPU shared with another worker */
  int parked;           /* 1 while it sleeps waiting for work */
} suiro_worker_info;

typedef struct suiro_pool_stats {
  int workers;          /* live workers (starting, idle, busy) */
  int max_workers;
  uint64_t submitted;   /* by the host handle */
  uint64_t collected;
  uint64_t tasks;       /* run by all workers */
  uint64_t steals;
  uint64_t parks;       /* worker parks */
  uint64_t host_parks;  /* parks of the host while collecting */
  uint64_t deaths;      /* workers that died */
  uint64_t respawns;
  uint64_t wakes;       /* times a submitter woke parked workers */
  uint64_t moves;       /* placement moves of all workers */
} suiro_pool_stats;

/* Fills stats and up to cap worker records (slots in use); returns the number of records. */
int suiro_pool_status(suiro_pool *p, suiro_pool_stats *stats, suiro_worker_info *workers, int cap);

/* ---------------------------------------------------------------------------------------------
 * Task functions and workers
 */
typedef struct suiro_out suiro_out;

/* A native task function: reads its argument bytes, writes its result with suiro_out_*.
 * Returns 0 on success; nonzero marks the task failed (with the message from suiro_out_error,
 * or a generic one). */
typedef int (*suiro_native_fn)(const void *arg, size_t len, suiro_out *out, void *ud);

/* Registers a named native function in this process. Host and workers register the same names
 * (typically the host re-executes itself as its workers). */
suiro_status suiro_register(const char *name, suiro_native_fn fn, void *ud);

/* The binding executor: runs tasks with fn == SUIRO_FN_BINDING, and codes that match no
 * registered native function. */
typedef int (*suiro_exec_fn)(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud);
void suiro_set_executor(suiro_exec_fn fn, void *ud);

/* Result writers (valid only inside a task function). */
int suiro_out_write(suiro_out *o, const void *data, size_t n); /* appends; 0 or -1 (no memory) */
void *suiro_out_reserve(suiro_out *o, size_t n);  /* room for n more bytes, then suiro_out_commit */
void suiro_out_commit(suiro_out *o, size_t n);
void suiro_out_reset(suiro_out *o);               /* drops what was written */
/* Marks the task failed with a message (printf-style); returns -1 for `return suiro_out_error(...)`. */
int suiro_out_error(suiro_out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Marks the task failed with a binding-defined error payload. */
int suiro_out_error_bytes(suiro_out *o, const void *data, size_t n);

/* Inside a worker: a handle on its own pool for nested submissions (NULL in a host). Waiting on a
 * nested result runs other tasks meanwhile, so nesting never deadlocks. Do not stop it. */
suiro_pool *suiro_current_pool(void);
/* Inside a worker: its slot, or -1. */
int suiro_worker_slot(void);
/* Inside a task: who submitted it, -1 the pool's host, else the slot of the worker that did
 * (a nested submission; a map runner's submitter is the map's creator); -2 outside a task. Faces
 * use it to trust language-specific payloads only from processes of their own language. */
int suiro_task_origin(void);
/* Inside a task: nonzero when the host asked to cancel it. */
int suiro_cancelled(void);

/* Worker entry point. Returns -1 at once when argv is not a worker invocation (no
 * "--suiro-worker TOKEN"); otherwise runs the worker until the pool stops and returns the exit
 * status. A host that re-executes itself calls this first thing in main():
 *     int rc = suiro_worker_main(argc, argv); if (rc >= 0) return rc;            */
int suiro_worker_main(int argc, char **argv);
/* The same, with the token already extracted. */
int suiro_worker_run(const char *token);
/* Finds the token in argv (NULL if this is not a worker invocation). */
const char *suiro_worker_token(int argc, char **argv);

/* ---------------------------------------------------------------------------------------------
 * Services for language bindings
 */

/* Content-addressed blobs shared by every process of a pool (e.g. a function's bytecode): stored
 * once under a key derived from the content, read by any host or worker of the pool, removed when
 * the pool stops. Putting an existing key is a no-op. get returns a malloc'd copy (free it);
 * PEER_GONE when the key is not stored. */
suiro_status suiro_blob_put(suiro_pool *p, uint64_t key, const void *data, size_t len);
suiro_status suiro_blob_get(suiro_pool *p, uint64_t key, void **data, size_t *len);

/* Zero-copy buffers: a large value is written once into a shared region and crosses by name;
 * receivers map the same pages. Each holder (a view, or a message in flight) owns one reference
 * in the region's shared count; the process that drops the last one keeps the region warm for
 * its next large value. Regions of a pool's workers go when the pool stops, a host's own when its
 * last pool stops.
 *   alloc: a writable region of at least `bytes` (one reference: the caller's)
 *   open:  maps a region named in a message, taking over the reference its sender added
 *   ref:   adds a reference for a message about to carry the name (before sending it)
 *   hold:  adds a reference for another holder in this process
 *   unref: drops one (the caller's) */
typedef struct suiro_buf suiro_buf;
extern size_t suiro_zc_floor; /* values at least this large cross by reference (default 32 KiB) */
suiro_buf *suiro_buf_alloc(size_t bytes);
suiro_status suiro_buf_open(const char *name, size_t size, suiro_buf **out);
void suiro_buf_ref(suiro_buf *b);
void suiro_buf_hold(suiro_buf *b);
void suiro_buf_unref(suiro_buf *b);
void *suiro_buf_data(const suiro_buf *b);
size_t suiro_buf_size(const suiro_buf *b);
size_t suiro_buf_offset(const suiro_buf *b); /* of the data within the region */
const char *suiro_buf_name(const suiro_buf *b); /* NULL when its name is gone: send a copy */
int suiro_buf_holders(suiro_buf *b);            /* holders in this process (views, messages) */
/* Regions have a home: this process has a pool, or is a worker. Otherwise large values stay in
 * private memory (nothing would remove their names). */
int suiro_zc_active(void);
/* Floor (bytes), and caps of the warm free list (bytes, count); 0 keeps a setting. */
void suiro_zc_configure(size_t floor, size_t free_bytes_cap, size_t free_count_cap);

/* Parallel maps: n elements staged once in a shared region; one runner task per worker claims
 * ranges of indices from a shared cursor (small batches at first and near the end, growing while
 * work is plentiful). The binding writes the description (function, input) into the region,
 * runs the elements in its executor (tasks with fn == SUIRO_FN_MAP) and reads the results: a
 * typed output area it lays out itself, and/or one untyped result slot per element. The first
 * failing element cancels the rest. A map created inside a worker runs nested: the worker works
 * on it while it waits, so nesting never deadlocks. */
typedef struct suiro_map suiro_map;
typedef struct suiro_map_opts {
  size_t size;          /* sizeof, set by suiro_map_opts_init */
  uint64_t n;           /* elements */
  size_t desc_bytes;    /* room for the binding's description */
  size_t out_bytes;     /* typed output area */
  int slots;            /* 1: a result slot per element (untyped results, in the heap) */
  size_t heap_bytes;    /* heap for untyped results and error messages */
  int stream;           /* 1: runners report completed ranges (suiro_map_next_range) */
  int runners;          /* runner tasks; 0: one per live worker (at most n) */
} suiro_map_opts;

void suiro_map_opts_init(suiro_map_opts *o);
suiro_status suiro_map_create(suiro_pool *p, const suiro_map_opts *o, suiro_map **out);
void *suiro_map_desc(suiro_map *m);
size_t suiro_map_desc_bytes(suiro_map *m);
void *suiro_map_output(suiro_map *m);
uint64_t suiro_map_size(suiro_map *m);
/* Starts a run (a map can run again after it finished: prepared maps). */
suiro_status suiro_map_start(suiro_map *m, double timeout);
/* Waits for every runner: OK, TIMEOUT (still running: wait again or cancel). */
suiro_status suiro_map_wait(suiro_map *m, double timeout);
uint64_t suiro_map_done(suiro_map *m); /* elements finished so far */
void suiro_map_cancel(suiro_map *m);
/* Kills the workers running the map's runners (they are replaced); the run ends at once and
 * fails as CANCELLED. */
suiro_status suiro_map_kill(suiro_map *m);
/* After wait: 1 and the first failure (element index, the binding's error payload, kind
 * SUIRO_RESULT_ERROR or SUIRO_RESULT_DIED with index UINT64_MAX), or 0. */
int suiro_map_error(suiro_map *m, uint64_t *index, const void **data, size_t *len, int *kind);
/* Untyped result of element i (1), or 0 when it has none. */
int suiro_map_result(suiro_map *m, uint64_t i, const void **data, size_t *len);
/* After wait, or for a range suiro_map_next_range gave: calls fn for every note of the elements
 * in [begin, end), in element order (the bytes are valid until the next run or free). Returns
 * the number of notes. */
size_t suiro_map_notes(suiro_map *m, uint64_t begin, uint64_t end,
                       void (*fn)(void *ctx, uint64_t i, const void *data, size_t len), void *ctx);
/* Streaming maps: the next range of finished elements, in completion order (0: none yet). */
int suiro_map_next_range(suiro_map *m, uint64_t *begin, uint64_t *end);
void suiro_map_free(suiro_map *m); /* cancels and waits if it still runs */

/* Runner side, inside the binding executor for SUIRO_FN_MAP tasks. */
suiro_status suiro_map_attach(const void *arg, size_t len, suiro_map **out, unsigned *runner);
const void *suiro_map_runner_desc(suiro_map *m);
void *suiro_map_runner_output(suiro_map *m);
uint64_t suiro_map_runner_size(suiro_map *m);
int suiro_map_claim(suiro_map *m, uint64_t *begin, uint64_t *end); /* 0: nothing left */
int suiro_map_cancelled(suiro_map *m);
int suiro_map_put(suiro_map *m, uint64_t i, const void *data, size_t len); /* -1: heap full */
void suiro_map_completed(suiro_map *m, uint64_t begin, uint64_t end);
int suiro_map_fail(suiro_map *m, uint64_t index, const void *err, size_t len); /* 1: first */
/* Runner side: attaches a note to element i of this run (a face's bytes beside the element's
 * result, e.g. the warnings R relays); 0, or -1 when the heap is full. */
int suiro_map_note(suiro_map *m, uint64_t i, const void *data, size_t len);
void suiro_map_detach(suiro_map *m);

/* For map runners and other in-flight references that never got sent: undo suiro_buf_ref. */
void suiro_buf_unsend(suiro_buf *b);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* SUIRO_H */
