/* pool.h — the pool's shared-memory layout and the process-local handle (see pool.c). */
#ifndef SUIRO_POOL_H
#define SUIRO_POOL_H

#include <pthread.h>

#include "buf.h"
#include "handle.h"
#include "suiro_bind.h"
#include "internal.h"
#include "park.h"
#include "region.h"
#include "taskq.h"

#define POOL_MAGIC 0x6c6f6f706f726975ull /* "suiropool" */
#define POOL_VERSION 3u
#define POOL_MAX_WORKERS 64
#define INFLIGHT_MAX 120 /* nesting depth a worker can help through */
#define MONITOR_CLAIMER 255u

/* Result slot states: (gen << 16) | (worker << 8) | kind. gen counts uses of the slot; a zero word
 * is a slot never used. */
enum {
  RS_EMPTY = 0,
  RS_PENDING = 1,   /* submitted, not started */
  RS_RUNNING = 2,   /* a worker (the `worker` field) is running it */
  RS_VALUE = 3,     /* terminal states from here on */
  RS_ERROR = 4,
  RS_DIED = 5,
  RS_CANCELLED = 6,
  RS_ORPHANED = 7   /* its submitter died: nobody will collect it */
};
#define RS_NOWORKER 0xffu
static inline uint64_t rs_state(uint64_t gen, unsigned worker, unsigned kind) {
  return (gen << 16) | ((uint64_t)worker << 8) | kind;
}
static inline unsigned rs_kind(uint64_t s) { return (unsigned)(s & 0xff); }
static inline unsigned rs_worker(uint64_t s) { return (unsigned)((s >> 8) & 0xff); }
static inline uint64_t rs_gen(uint64_t s) { return s >> 16; }
static inline int rs_terminal(unsigned kind) { return kind >= RS_VALUE; }

#define GEN_BITS 40
#define GEN_MASK ((1ull << GEN_BITS) - 1)
/* Task handle: (global result slot << 40) | gen. */
static inline suiro_task task_make(uint32_t rs, uint64_t gen) {
  return ((uint64_t)rs << GEN_BITS) | (gen & GEN_MASK);
}
static inline uint32_t task_rs(suiro_task t) { return (uint32_t)(t >> GEN_BITS); }
static inline uint64_t task_gen(suiro_task t) { return t & GEN_MASK; }

typedef struct result_slot {
  _Atomic uint64_t state;
  uint32_t len;    /* bytes of data (inline), or of the spilled value */
  uint32_t flags;  /* RSF_SPILLED: data holds a region name */
  int32_t pid;     /* the worker that wrote it */
  int32_t slot;
  _Atomic uint64_t cancel; /* gen the submitter asked to cancel while it ran (advisory) */
  /* data follows */
} result_slot;
#define RSF_SPILLED 1u

/* The pool-wide recycle list: regions that came free in a process other than their creator's
 * (a worker's result dropped by the host), offered to whichever process needs a region next. */
#define POOL_RECYCLE 32
typedef struct recycle_slot {
  _Atomic uint32_t state; /* 0 empty, 1 offered, 2 being written or taken */
  uint32_t pad;
  uint64_t capacity;
  char name[SUIRO_NAME_MAX];
} recycle_slot;

typedef struct pool_hdr {
  uint64_t magic;
  uint32_t version;
  uint32_t hdr_size;
  uint64_t size;
  int32_t host_pid;
  int32_t ncpu;
  uint64_t host_start;     /* the host's start time (/proc), for workers watching it */
  uint64_t host_id;        /* the host's random id, as in every name of the family (region.c) */
  int32_t max_workers;
  int32_t nsubs;          /* host + one per worker slot */
  uint32_t ring_cap;
  uint32_t slot_size;
  uint32_t result_size;
  uint32_t host_results;
  uint32_t worker_results;
  int32_t evfd;           /* the host's eventfd, inherited by workers under the same number */
  uint64_t off_workers, off_subs, off_queues, off_results;
  uint64_t queue_stride;

  SUIRO_ALIGNED _Atomic uint32_t closing;    /* set once by stop */
  /* Each group below is written by different parties at different rates: one cache line each,
   * so a busy counter does not slow the readers of a quiet one. */
  SUIRO_ALIGNED _Atomic uint64_t parked_mask; /* bit w: worker w parked (or about to), unclaimed */
  _Atomic uint64_t waking_mask;              /* bit w: claimed by a waker, not running yet */
  SUIRO_ALIGNED _Atomic uint64_t awake_mask; /* bit w: worker w attached and not parked; the
                                               monitor clears a dead worker's bit (pool_awake) */
  _Atomic uint32_t monitor_ticking;          /* the host's monitor is watching a backlog */
  SUIRO_ALIGNED _Atomic int32_t spinners;    /* processes spinning right now */
  _Atomic int32_t host_cpu;                  /* the CPU of the host while it spins, else -1 */
  SUIRO_ALIGNED _Atomic int32_t idle_spinners; /* idle workers spinning for work */
  SUIRO_ALIGNED _Atomic uint32_t state_seq;  /* futex: bumped on worker attach/exit/death */
  _Atomic uint64_t active_mask;              /* bit w: worker slot w attached and alive */
  _Atomic int32_t live;                      /* workers starting or attached */
  _Atomic uint64_t deaths, respawns;
  _Atomic uint64_t wakes;                    /* directed wakes of parked workers */
  SUIRO_ALIGNED _Atomic uint64_t recycle_bytes; /* capacity offered in recycle[] */
  recycle_slot recycle[POOL_RECYCLE];
} pool_hdr;

typedef struct worker_rec {
  SUIRO_ALIGNED _Atomic uint32_t park;   /* futex the worker sleeps on when idle */
  SUIRO_ALIGNED _Atomic int32_t state;   /* suiro_worker_state */
  _Atomic int32_t pid;
  _Atomic uint32_t incarnation;          /* bumped at each spawn into this slot */
  _Atomic uint32_t retire;               /* host asks the worker to exit */
  _Atomic uint64_t doom;                 /* a task the host is killing this worker for: claim
                                            nothing new (suiro_task_kill) */
  _Atomic uint64_t tasks, steals, parks, moves; /* written by the worker (relaxed) */
  SUIRO_ALIGNED _Atomic uint32_t depth;  /* tasks on the in-flight stack */
  _Atomic int32_t cpu;                   /* where it last ran (-1: parked or unknown), placement */
  _Atomic uint64_t inflight[INFLIGHT_MAX]; /* handles of the tasks it runs (nested help) */
} worker_rec;

typedef struct sub_rec {
  SUIRO_ALIGNED _Atomic uint32_t result_seq; /* futex: bumped when a result lands and waiting */
  _Atomic uint32_t waiting;                  /* the submitter is parked or about to */
  _Atomic uint32_t ev_armed;                 /* write the eventfd on the next result */
  uint32_t result_base;                      /* first global result slot */
  uint32_t nresults;
  _Atomic uint32_t hiwater;                  /* slots [0, hiwater) have been used */
} sub_rec;

/* The process-local handle. The host has one per pool; each worker has one (its current pool)
 * that submits from the worker's own submitter slot. */
struct suiro_pool {
  handle_live live;        /* first: checked at every entry (handle.c) */
  suiro_region *region;
  pool_hdr *hdr;
  worker_rec *workers;
  sub_rec *subs;
  char *results;
  uint32_t result_size;
  int is_host;
  int sub;                 /* own submitter index: 0 host, 1 + slot for workers */
  int worker_slot;         /* -1 in the host */
  taskq_view *queues;      /* one view per submitter */
  /* result-slot allocator (private to the submitter) */
  uint32_t *free_stack;
  uint32_t nfree;
  uint32_t fresh;          /* slots from here on were never used */
  uint32_t reserved_to;    /* slots below this have room reserved (pool_reserve_slots) */
  int queue_reserved;      /* the whole of this submitter's queue has room reserved (pool_reserve_slots) */
  uint64_t *gen;           /* current generation per local slot */
  uint8_t *outstanding;    /* 1 submitted not collected, 2 released (collect when done) */
  size_t book_bytes;       /* one private mapping holds gen, free_stack and outstanding */
  suiro_buf *held;         /* the region of the last spilled value collected (valid until the next) */
  uint32_t nreleased;
  uint64_t tail;           /* producer position in own queue */
  struct suiro_map *maps;  /* maps created on this handle and not freed (map.c): a stop orphans them */
  suiro_keyidx fn_published; /* function keys this handle published (func.c) */
  spin_adapt collect_spin;
  /* result staging for collect */
  unsigned char *scratch;
  size_t scratch_cap;
  /* host only */
  suiro_pool_opts opts;
  char **argv;             /* owned copies for respawn */
  char **env;
  char *exe;
  int evfd;
  int watchfds[POOL_MAX_WORKERS]; /* each worker's pidfd, or the read end of its death pipe
                                    * (peer.c); -1 once reaped */
  int watch_by_pipe;       /* no pidfds here: deaths are watched through pipes (peer.c) */
  int exit_reported[POOL_MAX_WORKERS];
  suiro_task killing[POOL_MAX_WORKERS]; /* the task each worker is being killed for (0: none) */
  pthread_t monitor;
  int monitor_started;
  int monitor_ctl;         /* eventfd to wake the monitor */
  _Atomic int monitor_stop;
  int epfd;
  pthread_mutex_t lock;    /* guards spawning, watchfds and worker records against the monitor */
  uint64_t submitted, collected, host_parks;
  uint64_t woke_at;        /* when this handle last woke a parked worker (suiro_ns) */
  uint64_t woke_submitted; /* `submitted` at that wake: equal while the latest submit woke one */
};

/* Workers attached and not parked. A mask, not a counter: a worker that dies awake would leave a
 * counter one too high forever (and the wake policy would believe the CPUs busy); its bit is
 * cleared by the monitor like every other trace of it. */
static inline int pool_awake(pool_hdr *h) {
  return __builtin_popcountll(atomic_load_explicit(&h->awake_mask, memory_order_relaxed));
}

static inline result_slot *pool_result(const suiro_pool *p, uint32_t rs) {
  return (result_slot *)(p->results + (size_t)rs * p->result_size);
}
static inline unsigned char *result_data(result_slot *r) { return (unsigned char *)(r + 1); }
static inline size_t result_inline_cap(uint32_t result_size) {
  return result_size - sizeof(result_slot);
}
static inline int sub_of_rs(const suiro_pool *p, uint32_t rs) {
  uint32_t hr = p->hdr->host_results;
  if (rs < hr) return 0;
  return 1 + (int)((rs - hr) / p->hdr->worker_results);
}

/* pool.c */
suiro_status pool_attach(suiro_pool *p, suiro_region *r, int sub);
void pool_detach(suiro_pool *p);
void pool_notify_result(suiro_pool *p, int sub);
/* Wakes every parked worker (stop, retire). */
void pool_wake_all(suiro_pool *p);
/* Claims one parked worker and wakes it; returns 0 when none is parked. */
int pool_wake_one(suiro_pool *p);
/* Wakes one parked worker if the backlog in queue q calls for it (see the policy in pool.c). */
void pool_maybe_wake(suiro_pool *p, const taskq_view *q, uint64_t tail);
/* Host monitor's periodic check while a backlog waits for a CPU (see pool.c). */
int pool_backlog_tick(suiro_pool *p, uint64_t *last_tasks);

/* worker.c */
int worker_claim_and_run(suiro_pool *p, int waiting);
/* In a worker: records its CPU and, at most once a millisecond, moves off a CPU it shares with
 * another awake worker when one is free (worker.c, placement). No-op in a host. */
void worker_placement_tick(void);

/* peer.c: spawning workers and watching them */
suiro_status peer_spawn(suiro_pool *p, int slot);
suiro_status peer_start_monitor(suiro_pool *p);
void peer_stop_monitor(suiro_pool *p);
void peer_fail_worker_tasks(suiro_pool *p, int slot, int pid, const char *why);

/* pool.c: gives the buffer layer what it needs from pools (buf_env); idempotent. */
void pool_install_buf_env(void);
/* pool.c: this process's live host pools (for recycle.c): lock, look, unlock. */
#define POOL_MAX_HOSTS 64
void pool_hosts_lock(void);
void pool_hosts_unlock(void);
suiro_pool *pool_host(int i);
/* recycle.c: the recycle list of the pool a region belongs to (by its name) or of this worker's
 * pool: offer a free region; take one of at least `bytes`. 1 on success. */
/* Reserves room for the next never-used result slots of this submitter (pool.c). */
suiro_status pool_reserve_slots(suiro_pool *p);
int pool_recycle_push(const char *region_name, uint64_t capacity, uint64_t limit);
int pool_recycle_pop(size_t bytes, char *name_out, uint64_t *capacity);
/* submit.c: gives back the slots of released tasks that have finished. */
void pool_reclaim_released(suiro_pool *p);
static inline void pool_free_slot(suiro_pool *p, uint32_t local) {
  p->outstanding[local] = 0;
  p->free_stack[p->nfree++] = local;
}
/* events.c: sleeps until a result for this submitter lands, ready(ctx) says so, or a 100 ms slice
 * (or the deadline) passes; whether a host's face asks to give up (suiro_set_interrupt_check). */
void pool_park_for_results(suiro_pool *p, uint64_t deadline, int (*ready)(void *), void *ctx);
int pool_interrupted(const suiro_pool *p);



/* map.c, for plan.c: the description (desc_bytes), output bytes and element count of a map as
 * mapped here, and the slot where its plan's private copy is cached (plan_free frees it). */
struct suiro_plan;
char *map_region_parts(suiro_map *m, size_t *desc_bytes, size_t *out_bytes, uint64_t *n);
struct suiro_plan **map_plan_slot(suiro_map *m);
void map_runner_at(suiro_map *m, uint64_t i); /* runner: the element it is about to run */
/* The pool is stopping: its maps lose their pool (their calls answer CLOSED from now on) but keep
 * their regions, so finished results stay readable and freeing them later is safe. */
void map_pool_stopped(suiro_pool *p);
void plan_free(struct suiro_plan *pl);

/* runner.c's per-element fast path (suiro_runner_next): map.c gives the cancel flag and the
 * runner's progress cell, plan.c the input's layout and the map's seed. Same orders as the calls
 * they replace (relaxed loads of cancel, relaxed stores of progress). */
typedef struct runner_fast {
  const _Atomic uint32_t *cancel;
  _Atomic uint64_t *at;
  const char *in;
  uint32_t in_kind, in_type;
  int64_t start, step;
  int seeded;
  uint64_t seed, index_base;
} runner_fast;
void map_runner_fast(suiro_map *m, runner_fast *f);
void plan_runner_fast(const struct suiro_plan *pl, runner_fast *f);

/* rng.c: the stream of the element this thread runs */
void rng_enter(uint64_t seed, uint64_t index);
void rng_leave(void);

/* func.c */
void func_forget(suiro_pool *p);

/* spill.c: values too large for a slot travel in a region of their own */
suiro_status spill_write(suiro_pool *p, const void *data, size_t n, char *name_out, size_t name_cap);
suiro_status spill_read(const char *name, size_t n, void *dst);
void spill_discard(const char *name); /* a spilled value nobody will read */

#endif
