/* cluster.h — the MPI tier of the engine (engine/cluster/, built into build/lib/suiro/mpi.so with
 * Open MPI; libsuiro, the suiro command and the workers never link MPI).
 *
 * One suiro engine runs per node (an MPI rank; older text says "host", which in the engine is the
 * process that made a pool), each with its own shared-memory pool;
 * rank 0 runs the script, every other rank serves: it starts the pools rank 0 asks for and runs
 * the tasks and map ranges rank 0 deals it on them. MPI is used by one thread per process only,
 * the communication thread (comm.c); the rest talks to it through two queues.
 *
 *   comm.c    the communication thread: MPI_Init_thread(FUNNELED) .. MPI_Finalize, an outbox
 *             and an inbox of messages, an eventfd for the inbox, the end's handshake
 *   reap.c    Open MPI's shared-memory files that killed jobs left, removed at the next start
 *   xwire.c   what crosses nodes in wire buffers: function keys (code goes once per node),
 *             region references (large values go once per node, or inline)
 *   serve.c   ranks 1..K-1: the serving loop (pools, plans, map ranges, tasks), C only: the
 *             pools start from the resolved options rank 0 sends (exe, argv, env, sizes)
 *   lua/lmpi.c  rank 0 for the Lua face: MPI pools, their tasks and maps (dealt out across
 *             nodes), the module luaopen_suiro_mpi
 *
 * Everything here uses the engine only through its public headers (suiro.h, suiro_bind.h,
 * suiro_wire.h). The module resolves the engine from the process that loads it (the suiro
 * command exports it; stock lua5.4 after suiro.core was loaded globally), so one engine runs per
 * process. The module is loaded with global symbols (Open MPI's plugins need libmpi's): every
 * name declared here is hidden, so none of them can meet a name of the loading process.
 */
#ifndef SUIRO_CLUSTER_H
#define SUIRO_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <signal.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_wire.h"

#pragma GCC visibility push(hidden)

/* ---- messages ------------------------------------------------------------------------------- */

enum {
  MSG_HELLO = 1,    /* r -> 0: a: pid, b: CPUs its workers may use; payload: host name */
  MSG_EXIT,         /* 0 -> r: stop serving and finalize */
  MSG_POOL_NEW,     /* 0 -> r: pool; payload: the pool's options (a wire value) */
  MSG_POOL_UP,      /* r -> 0: pool; a: 1 started / 0 failed; payload: status (wire) or message */
  MSG_POOL_STOP,    /* 0 -> r: pool */
  MSG_BLOB,         /* 0 -> r: pool, a: content key; payload: the code */
  MSG_REGION,       /* 0 -> r: payload: region_wire + the bytes of a large value */
  MSG_FORGET,       /* 0 -> r: payload: region_wire (no bytes): drop that copy */
  MSG_PLAN,         /* 0 -> r: pool, id: map; payload: plan_wire + function */
  MSG_CHUNK,        /* 0 -> r: id: map, a: begin, b: end; payload: the input of that range */
  MSG_NOMORE,       /* 0 -> r: id: map: nothing left to deal */
  MSG_NEED,         /* r -> 0: id: map: room for another range */
  MSG_RESULT,       /* r -> 0: id: map, a: begin, b: end; payload: the range's results */
  MSG_FAIL,         /* r -> 0: id: map, a: kind, b: slot, c: pid; payload: error (wire ERROR) */
  MSG_MAP_END,      /* 0 -> r: id: map, a: 0 done, 1 cancel, 2 kill */
  MSG_TASK,         /* 0 -> r: pool, id: task; payload: the task's wire buffer */
  MSG_TRESULT,      /* r -> 0: id: task, a: kind, b: slot, c: pid; payload: the result */
  MSG_TCANCEL,      /* 0 -> r: id: task */
  MSG_TCANCEL_ACK,  /* r -> 0: id: task, a: 1 cancelled before it started */
  MSG_TKILL,        /* 0 -> r: id: task */
  MSG_STATUS,       /* 0 -> r: pool, id: request */
  MSG_STATUS_REPLY, /* r -> 0: pool, id: request; payload: pool:status() (wire) */
  MSG_LOST,         /* comm thread -> its own inbox: MPI failed (payload: the message) */
  MSG_BYE,          /* r -> 0, the last message a serving rank sends (its comm thread, at stop) */
  MSG_PROGRESS,     /* r -> 0: id: map, a: elements finished in its ranges still running */
  MSG_TYPE_MAX
};

typedef struct msg_hdr {
  uint32_t type;
  uint32_t pool;
  uint64_t id, a, b, c;
  uint64_t len; /* payload bytes after the header */
} msg_hdr;

/* A message: the link and peer are local; header and payload are what travels (contiguous). */
typedef struct msg {
  struct msg *next;
  int peer;          /* destination (outbox) or source (inbox) rank */
  int parts_left;    /* comm thread: sends of this message still in flight */
  /* outgoing only: the payload's tail sent from memory the message does not hold (the pages of a
   * large value), kept alive by a reference to its region until the send completes */
  const unsigned char *ext;
  size_t ext_len;
  suiro_buf *ext_buf;
  msg_hdr h;         /* the payload follows, 8-aligned */
} msg;

static inline unsigned char *msg_payload(msg *m) { return (unsigned char *)(m + 1); }
static inline size_t align8z(size_t x) { return (x + 7) & ~(size_t)7; }

/* A new message with room for `payload` bytes (h.len set, header fields zero); NULL when out of
 * memory. */
msg *msg_new(uint32_t type, size_t payload);
/* The same with `inline_len` bytes (a multiple of 8) in the message and then `ext_len` bytes sent
 * from ext, which lives in region b (a reference is taken for the message). */
msg *msg_new_ext(uint32_t type, size_t inline_len, const void *ext, size_t ext_len, suiro_buf *b);
void msg_free(msg *m);

/* ---- the communication thread (comm.c) ------------------------------------------------- */

/* Starts it (MPI_Init_thread in that thread): 0, or -1 with a message in err. Once per process. */
int comm_start(char *err, size_t cap);
int comm_started(void);
int comm_rank(void);
int comm_size(void);
const char *comm_host(void);      /* this rank's host name (MPI_Get_processor_name) */
const char *comm_version(void);   /* the MPI library, "Open MPI v4.1.4" */
/* Queues m for rank `peer` (takes it; m is freed once sent). */
void comm_send(int peer, msg *m);
/* Sends a copy of m to every rank but this one (m stays the caller's). */
void comm_send_all(const msg *m);
/* The next inbox message (the caller frees it), or NULL. */
msg *comm_recv(void);
/* Readable while the inbox is not empty (level-triggered: comm_recv drains it). */
int comm_inbox_fd(void);
/* rank 0: messages the communication thread handles itself (dealing map ranges while the Lua
 * state is busy): the hook returns 1 when it took the message. Runs on the comm thread. */
void comm_set_intercept(int (*hook)(msg *m));
/* While on, the thread sleeps at most 50 us between polls (replies are expected soon). */
void comm_set_eager(int on);
/* Bytes sent to and received from each rank (for status). */
void comm_traffic(int peer, uint64_t *sent, uint64_t *received);
/* Ends the communication (once): sends what is queued, then finalizes MPI and joins the thread.
 * The end is a handshake, so that no rank finalizes while a message to or from it is in flight
 * (a send that is never received never completes, and its rank would never finalize):
 *   - rank 0 sends its last message (EXIT) before comm_stop; from then on comm_send drops;
 *   - a serving rank's comm_stop queues BYE to rank 0 as its last message;
 *   - after stop, the thread keeps receiving (and drops what arrives) until its sends have
 *     completed and, on rank 0, every serving rank's BYE arrived (messages from a rank arrive in
 *     order, so BYE means every earlier message of that rank was received); then MPI_Finalize.
 * Bounded: after `timeout` seconds (0.5 when `ending`, a signal, or a lost host ends the job) the thread
 * leaves without MPI_Finalize (mpirun then ends the job), and comm_stop joins it. */
void comm_stop(double timeout, int ending);
/* Removes Open MPI's vader segments that killed jobs left in /dev/shm on this node (reap.c):
 * only those of other jobs that no live process maps. Returns how many went. */
int cluster_reap_vader(void);
/* Set (with a message) when an MPI call failed: a host is lost; every wait should end. */
const char *comm_lost(void);

/* The state lock shared by rank 0's dealer (comm thread) and its Lua side. */
void comm_lock(void);
void comm_unlock(void);

/* ---- wire buffers that cross hosts (xwire.c) ------------------------------------------------ */

/* Calls func for each FUNC item with a content key and ref for each REF item of buf. Returns
 * the number of REF items, or -1 when buf is malformed. */
int xwire_scan(const void *buf, size_t len, void (*func)(void *ud, uint64_t key),
               void (*ref)(void *ud, const suiro_wire_ref *r), void *ud);
/* Copies buf into w, writing each REF item with subst (which writes its replacement: an inline
 * copy or a reference to a local region). WIRE_OK, or WIRE_ERR with a message in err. */
int xwire_rewrite(const void *buf, size_t len, suiro_wire_writer *w,
                  int (*subst)(void *ud, const suiro_wire_ref *r, suiro_wire_writer *w), void *ud, char *err, size_t cap);
/* A REF written as its data (a typed array, bytes, or the value a wire REF holds): the region is
 * mapped, copied and the reference (the grant the sender made) given back. */
int xwire_inline_ref(void *ud, const suiro_wire_ref *r, suiro_wire_writer *w);
/* buf with every REF inlined, in a malloc'd buffer (*out, *outlen); 0 when buf had no REF (out
 * untouched), 1 when rewritten, -1 on error (message in err). */
int xwire_inline_all(const void *buf, size_t len, void **out, size_t *outlen, char *err, size_t cap);

/* Region identity of a REF as it travels: where the sender's copy lives. */
typedef struct region_wire {
  char name[WIRE_REF_NAME_MAX + 1];
  uint64_t offset, length;
} region_wire;

/* ---- plans as they travel (rank 0 -> r) ----------------------------------------------------- */

typedef struct plan_wire {
  uint64_t n;
  int32_t in_kind, in_type;
  int64_t start, step;
  uint32_t seeded, has_tpl;
  uint64_t seed;
  uint64_t fn_len;       /* the function's wire buffer follows this header */
  suiro_template tpl;    /* the same binary on every host of a cluster: sent as is */
} plan_wire;

/* Element size of a plan's ARRAY input or typed cells. */
size_t cluster_tpl_width(const suiro_template *t);
/* Cell bytes of one element of a template (every field of a record). */
size_t cluster_tpl_elem_bytes(const suiro_template *t);

/* ---- the serving side (serve.c) ---------------------------------------------------------- */

/* The results of range [b, e) of map `id` from its finished plan m, as a RESULT message
 * (references inlined when inline_refs); NULL with a message in err. */
msg *cluster_chunk_result(suiro_map *m, uint64_t id, uint64_t b, uint64_t e, int inline_refs, char *err, size_t cap);
/* A FAIL message for map `id` from failure e of a range that starts at base. */
msg *cluster_chunk_failure(uint64_t id, const suiro_error_info *e, int kind, uint64_t base, const char *host, int rank);
/* SUIRO_RESULT_ERROR, _DIED or _CANCELLED for a failure's class. */
int cluster_failure_kind(const suiro_error_info *e);

/* Runs ranks 1..K-1 until rank 0 says EXIT, MPI fails or *interrupt (a signal flag) is set. The
 * pools start from the options rank 0 sends in POOL_NEW: a DICT of the resolved pool (workers,
 * max_workers, ring_cap, slot_size, result_slots, result_size, respawn, start_timeout, exe, argv
 * (list), env (dict)); workers get SUIRO_MPI_RANK and SUIRO_MPI_HOST of this rank. C only: no
 * language runs on a serving rank but its workers'. Returns 0 after EXIT, 1 otherwise. */
int cluster_serve(volatile sig_atomic_t *interrupt);
/* Error message fix-up: "element <local>:" in a message of range [base, ...) becomes the element
 * of the whole map; writes into out. */
void cluster_fix_element(const char *msg, size_t len, uint64_t base, char *out, size_t cap, size_t *outlen);

/* ---- rank 0: the dealer (deal.c) --------------------------------------------------------------
 *
 * What a face's rank 0 uses: MPI pools (rank 0's local pool plus the same pool on every serving
 * rank), remote tasks, and maps dealt out across every rank. The structs are open to the face
 * (it reads results and states from them); every call is made on the face's thread, and the
 * communication thread touches only what comm_lock guards (the maps being dealt: cursor, stop,
 * staged input, the dealt ranges). A face stages a map as a local plan (suiro_plan_spec) and
 * reads its results from xmap.out (typed cells, laid out as the template says) or xmap.slots
 * (untyped wire results).
 */
#define CLUSTER_MAX_LOCAL_RANGES 2

typedef struct xnode {
  int up;              /* 1 started, -1 failed, 0 waiting for POOL_UP */
  int workers;
  char err[512];
  suiro_keyidx funcs;  /* content keys whose code this host's pool has */
} xnode;

typedef struct xpool {
  uint32_t id;
  suiro_pool *const *local; /* rank 0's local pool, where the face keeps it (NULL once stopped) */
  const double *default_timeout; /* the face's pool timeout (seconds, -1 forever) */
  int nranks;
  xnode *nodes;        /* [nranks]; 0 is this node */
  int closed;
  uint64_t rr;         /* task placement */
  uint64_t status_req;
  int status_left;
  msg **status;        /* [nranks] replies */
  struct xpool *next;
} xpool;

typedef struct xregion { /* a large value sent to hosts: held open so its bytes cannot change */
  region_wire id;
  suiro_view view;
  unsigned char *sent; /* [nranks] */
  uint64_t last_use;
  struct xregion *next;
} xregion;

typedef struct xrange { uint64_t b, e; } xrange;

/* A range as dealt: to whom, and whether its results came (each is accepted once, complete, from
 * that rank only). Dealt in order, so the list is sorted by b. */
typedef struct xdealt { uint64_t b, e; int rank, got; } xdealt;

typedef struct xlocal { suiro_map *m; uint64_t b, e; } xlocal;

typedef struct xfail {
  int kind;
  char cls[64];
  char *msg, *tb;
  int64_t index;
  int slot, pid;
} xfail;

typedef struct xmap {
  uint64_t id;
  xpool *pool;
  uint64_t n;
  /* the plan (immutable once dealing starts) */
  plan_wire pw;
  unsigned char *fn;
  unsigned char *in;       /* ARRAY elements, or VALUES data */
  uint64_t *offs;          /* VALUES: n + 1 offsets into in */
  size_t in_es;
  int stream;
  uint64_t width;          /* cells per element (SCALAR 1) */
  /* dealing: under comm_lock */
  uint64_t cursor;         /* the first element not dealt yet */
  uint64_t min_chunk;
  int nodes;               /* ranks taking part */
  int stop;
  int listed;              /* in R.maps */
  xdealt *dealt;           /* [ndealt]: every range dealt, sorted by b */
  size_t ndealt, capdealt;
  /* results (Lua thread) */
  unsigned char *out;      /* typed cells */
  uint64_t col_off[SUIRO_TEMPLATE_MAX_FIELDS];
  struct { const unsigned char *p; uint64_t len; } *slots; /* untyped */
  msg **kept;              /* result messages the slots point into */
  size_t nkept, capkept;
  uint64_t done;
  xrange *ranges;          /* completed, in completion order */
  size_t nranges, capranges, next_range;
  xlocal local[CLUSTER_MAX_LOCAL_RANGES];
  int nlocal;
  xfail fail;              /* kind 0: none */
  int user_cancel, killed;
  int finished;            /* every element placed, or stopped and the local ranges ended */
  int ended_sent;
  int closed;              /* its pool was stopped */
  double t0, last_draw;
  uint64_t *running_done;  /* [nranks]: elements finished in each rank's ranges still running
                              (MSG_PROGRESS; 0 once that rank's results come) */
  uint64_t progress;       /* what cluster_map_progress said last: it never goes back */
  uint64_t fired;          /* the value the face's progress callback last got */
  double fired_at;
  int fired_any;
  struct xmap *next;       /* R.all_maps */
  struct xmap *dnext;      /* R.maps (being dealt), under comm_lock */
} xmap;

typedef struct xtask {
  uint64_t id;
  xpool *pool;
  int host;
  int arrived, released, closed;
  int kind, slot, pid;
  unsigned char *data;
  size_t len;
  int cancel_ack;          /* -1 waiting, 0 / 1 */
  struct xtask *hnext;
} xtask;

#define TASK_BUCKETS 4096

typedef struct cluster_rank0 {
  int started;
  int rank, size;
  char **names;            /* host name of each rank (HELLO) */
  int *pids;               /* pid of each rank's process */
  int *cpus;               /* CPUs each rank's workers may use (its affinity) */
  uint32_t next_pool;
  uint64_t next_map, next_task, next_req;
  xpool *pools;
  xmap *maps;              /* being dealt (comm_lock for changes) */
  xmap *all_maps;          /* every live map of this module (Lua thread) */
  xtask *tasks[TASK_BUCKETS];
  xregion *regions;
  uint64_t region_bytes, region_count, use_clock;
  char lost[600];
  int exited;
  int waiting_tasks;       /* remote tasks whose result has not arrived */
} cluster_rank0;
extern cluster_rank0 cluster_r0;
/* Brings MPI up (once) and, on rank 0, waits for every rank's hello (60 s; *interrupt ends the
 * wait). 0, or -1 with a message in err. */
int cluster_start(volatile sig_atomic_t *interrupt, char *err, size_t cap);
/* Ends the job (once; atexit too): rank 0 stops its MPI pools and sends EXIT; then comm_stop. */
void cluster_shutdown(int ending);
const char *cluster_node_name(int rank);
int cluster_cpus(void);                 /* CPUs this process (and its workers) may use */
/* What arrived is handled; rank 0's own map ranges advance. */
void cluster_pump(void);
/* cluster_pump, then sleeps until a message or a local result arrives, at most timeout (and
 * 100 ms, 2 ms while rank 0 runs ranges of its own). */
void cluster_sleep(double timeout);

/* An MPI pool over the face's local pool (*local, its timeout *default_timeout, both where the
 * face keeps them): POOL_NEW with `spec` (the resolved options, cluster_serve) to every rank,
 * waiting up to start_timeout + 5 s for them. NULL with a message in err. */
xpool *cluster_pool_new(suiro_pool *const *local, const double *default_timeout, const void *spec, size_t len,
                        double start_timeout, char *err, size_t cap);
/* Stops it on every rank (its maps end, its tasks say closed); the struct stays (freed at exit). */
void cluster_pool_close(xpool *x);

/* Sends what buf names (code, large values) to host (or every remote host: -1) ahead of buf.
 * 0, or -1 with a message in err. */
int cluster_ship(xpool *x, int host, const void *buf, size_t len, char *err, size_t cap);
/* A task with the wire buffer buf on host (>= 1): shipped, then sent. NULL with a message. */
xtask *cluster_submit(xpool *x, int host, const void *buf, size_t len, char *err, size_t cap);
void cluster_task_free(xtask *t);
/* Sends a cancel and waits (10 s) for the answer: 1 when it was cancelled before it started. */
int cluster_task_cancel(xtask *t);
void cluster_task_kill(xtask *t);

/* A map of plan s on every rank of x (s as for suiro_plan_create; tpl: the template or NULL;
 * stream: hand ranges out as they complete). Dealing starts at once. NULL with a message. */
xmap *cluster_map_new(xpool *x, const suiro_plan_spec *s, const suiro_template *tpl, int stream, char *err,
                      size_t cap);
/* Elements finished so far on any node: completed ranges, plus what rank 0's running ranges and
 * the other ranks' running ranges (their MSG_PROGRESS) have finished; monotonic, at most n. */
uint64_t cluster_map_progress(xmap *x);
/* 1 when a progress callback should fire now: final, or the value changed and the last call
 * was at least 50 ms ago (waits wake far more often than that). Records the call. */
int cluster_progress_due(xmap *x, uint64_t done, int final);
/* The first failure wins; then dealing stops, the ranks are told (how: 1 cancel, 2 kill). */
void cluster_map_fail(xmap *x, int kind, const char *cls, const char *text, uint64_t how);
void cluster_map_free(xmap *x);

#pragma GCC visibility pop

#endif
