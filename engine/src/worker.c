/*
 * worker.c — the worker process: attach, find work, run it, publish the result.
 *
 * A worker owns: its worker record (state, counters, in-flight stack), its own task queue (as
 * producer, for nested submissions) and its partition of result slots. It claims tasks from any
 * queue (taskq.c) and writes results into the submitter's slots (ownership via RUNNING, pool.c).
 *
 * Memory ordering
 *   - The in-flight stack is written with relaxed stores: it is read by the host's monitor only
 *     after this process is dead, when all its stores are visible.
 *   - Idle parking: snapshot the worker's own park word, announce in parked_mask (seq_cst RMW),
 *     re-scan the queues, then futex-wait on the word; submitters fence after publishing and read
 *     parked_mask, and a waker bumps the word only after seeing the announcement, so the wait
 *     returns at once if the bump came first (pool.c, wake policy).
 *   - counters (tasks/steals/parks/moves) are relaxed: statistics only.
 *   - CPU records (worker_rec.cpu, placement below) are relaxed hints: a stale one costs at most
 *     one needless move.
 */
#include "pool.h"
#include "suiro_chan.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- native function registry (process-local) ---------------------------------------------- */

typedef struct reg_entry {
  uint64_t id;
  suiro_native_fn fn;
  void *ud;
  char name[64];
} reg_entry;

static reg_entry *registry;
static size_t nregistry, registry_cap;
static suiro_exec_fn binding_exec;
static void *binding_ud;

uint64_t suiro_fn_id(const char *name) {
  uint64_t h = suiro_hash64(name, strlen(name));
  return h > SUIRO_FN_MAP ? h : h + 2; /* 0 and 1 are the binding executor's */
}

suiro_status suiro_register(const char *name, suiro_native_fn fn, void *ud) {
  if (!name || !*name || !fn) return suiro_set_error(SUIRO_ERR, "suiro_register: name and fn are required");
  uint64_t id = suiro_fn_id(name);
  for (size_t i = 0; i < nregistry; i++) {
    if (registry[i].id == id) {
      if (strcmp(registry[i].name, name) != 0)
        return suiro_set_error(SUIRO_ERR, "suiro_register: '%s' collides with '%s'", name, registry[i].name);
      registry[i].fn = fn;
      registry[i].ud = ud;
      return SUIRO_OK;
    }
  }
  if (nregistry == registry_cap) {
    size_t cap = registry_cap ? registry_cap * 2 : 16;
    reg_entry *r = realloc(registry, cap * sizeof *r);
    if (!r) return suiro_set_error(SUIRO_ERR, "out of memory");
    registry = r;
    registry_cap = cap;
  }
  reg_entry *e = &registry[nregistry++];
  e->id = id;
  e->fn = fn;
  e->ud = ud;
  snprintf(e->name, sizeof e->name, "%s", name);
  return SUIRO_OK;
}

void suiro_set_executor(suiro_exec_fn fn, void *ud) {
  binding_exec = fn;
  binding_ud = ud;
}

/* ---- result writer ------------------------------------------------------------------------- */

struct suiro_out {
  unsigned char *buf; /* the result slot's inline area, then a region (or the heap) as it grows */
  size_t len, cap;
  int heap;
  int error;
  suiro_buf *spill;   /* the region buf lives in: the result crosses by its name, no copy */
};

static int out_grow(suiro_out *o, size_t need) {
  size_t cap = o->cap * 2;
  if (cap < 256) cap = 256;
  while (cap < need) cap *= 2;
  if (!o->heap) { /* straight into a region: the host reads it where it is */
    suiro_buf *s = suiro_buf_alloc(need > o->cap * 2 ? need : o->cap * 2);
    if (s) {
      memcpy(suiro_buf_data(s), o->buf, o->len);
      if (o->spill) suiro_buf_unref(o->spill);
      o->spill = s;
      o->buf = suiro_buf_data(s);
      o->cap = suiro_buf_size(s);
      return 0;
    }
    if (o->spill) { /* no region for more: carry on in the heap */
      unsigned char *b = malloc(cap);
      if (!b) return -1;
      memcpy(b, o->buf, o->len);
      suiro_buf_unref(o->spill);
      o->spill = NULL;
      o->buf = b;
      o->cap = cap;
      o->heap = 1;
      return 0;
    }
  }
  unsigned char *b;
  if (o->heap) {
    b = realloc(o->buf, cap);
    if (!b) return -1;
  } else {
    b = malloc(cap);
    if (!b) return -1;
    memcpy(b, o->buf, o->len);
    o->heap = 1;
  }
  o->buf = b;
  o->cap = cap;
  return 0;
}

/* The result writers are called inside a task with the task's own suiro_out; NULL (or a size past
 * what memory can hold) is refused, never written through. */
void *suiro_out_reserve(suiro_out *o, size_t n) {
  if (!o || n > SIZE_MAX / 2 - o->len) return NULL;
  if (o->len + n > o->cap && out_grow(o, o->len + n) != 0) return NULL;
  return o->buf + o->len;
}
void suiro_out_commit(suiro_out *o, size_t n) {
  if (o && n <= o->cap - o->len) o->len += n; /* never past what was reserved */
}
void suiro_out_reset(suiro_out *o) {
  if (!o) return;
  o->len = 0;
  o->error = 0;
}

int suiro_out_write(suiro_out *o, const void *data, size_t n) {
  if (!o || (!data && n)) return -1;
  if (SUIRO_UNLIKELY(n > o->cap - o->len) && !suiro_out_reserve(o, n)) return -1; /* grows it */
  copy_small(o->buf + o->len, data, n);
  o->len += n;
  return 0;
}

int suiro_out_error(suiro_out *o, const char *fmt, ...) {
  if (!o) return -1;
  if (!fmt) fmt = "task failed";
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  o->len = 0;
  suiro_out_write(o, msg, (size_t)n);
  o->error = 1;
  return -1;
}

int suiro_out_error_bytes(suiro_out *o, const void *data, size_t n) {
  if (!o) return -1;
  o->len = 0;
  suiro_out_write(o, data, n);
  o->error = 1;
  return -1;
}

/* ---- running one task ---------------------------------------------------------------------- */

static suiro_pool *current;      /* this worker's handle on its pool (NULL in hosts) */
static suiro_task running_task;  /* innermost task being run, for suiro_cancelled */
static int running_origin = -2;  /* its submitter, for suiro_task_origin */

suiro_pool *suiro_current_pool(void) { return current; }
int suiro_worker_slot(void) { return current ? current->worker_slot : -1; }
int suiro_task_origin(void) { return current && running_task ? running_origin : -2; }

int suiro_cancelled(void) {
  if (!current || !running_task) return 0;
  if (ld_rlx(&current->hdr->closing)) return 1;
  result_slot *r = pool_result(current, task_rs(running_task));
  return ld_rlx(&r->cancel) == task_gen(running_task);
}

static int run_fn(uint64_t fn, const void *arg, size_t len, suiro_out *o) {
  if (fn != SUIRO_FN_BINDING) {
    for (size_t i = 0; i < nregistry; i++)
      if (registry[i].id == fn) return registry[i].fn(arg, len, o, registry[i].ud);
  }
  if (binding_exec) return binding_exec(fn, arg, len, o, binding_ud);
  return suiro_out_error(o, "no task function with code %#llx is registered in this worker",
                         (unsigned long long)fn);
}

/* Maps a spilled argument (its region's name is in the entry) and returns where its bytes are;
 * NULL with a message on failure. Out of line: the common task fits its entry. */
static __attribute__((noinline, cold)) unsigned char *open_spilled_arg(const taskq_entry *e, size_t len, suiro_buf **b,
                                                                     char *err, size_t errcap) {
  char name[SUIRO_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)(e + 1));
  if (suiro_buf_open(name, len, b) == SUIRO_OK) return suiro_buf_data(*b);
  *b = NULL;
  snprintf(err, errcap, "%s", suiro_last_error());
  return NULL;
}

/* A result that outgrew the slot's inline area: in a region (it crosses by name) or, when no
 * region could be had, in the heap (copied into one now). Returns the result flags. */
static __attribute__((noinline, cold)) uint32_t store_big_result(suiro_pool *p, suiro_out *o, result_slot *r,
                                                               size_t inline_cap, size_t *rlen) {
  uint32_t rflags = 0;
  if (o->spill) {
    const char *name = suiro_buf_name(o->spill);
    if (o->len <= inline_cap) {
      memmove(result_data(r), o->buf, o->len);
    } else if (name && strlen(name) < inline_cap) {
      memcpy(result_data(r), name, strlen(name) + 1);
      suiro_buf_ref(o->spill); /* the result's reference... */
      rflags = RSF_SPILLED;
    } else {
      static const char msg[] = "the task's result region lost its name";
      memcpy(result_data(r), msg, sizeof msg - 1);
      *rlen = sizeof msg - 1;
      o->error = 1;
    }
    suiro_buf_unref(o->spill); /* ...replaces ours */
    return rflags;
  }
  if (o->len <= inline_cap) {
    memcpy(result_data(r), o->buf, o->len);
  } else if (spill_write(p, o->buf, o->len, (char *)result_data(r), inline_cap) == SUIRO_OK) {
    rflags = RSF_SPILLED;
  } else {
    char msg[300];
    snprintf(msg, sizeof msg, "the task's %zu-byte result could not be stored: %s", o->len, suiro_last_error());
    *rlen = strlen(msg);
    if (*rlen > inline_cap) *rlen = inline_cap;
    memcpy(result_data(r), msg, *rlen);
    o->error = 1;
  }
  free(o->buf);
  return rflags;
}

static void run_entry(suiro_pool *p, int qi, taskq_entry *e, uint64_t pos) {
  worker_rec *me = &p->workers[p->worker_slot];
  const taskq_view *q = &p->queues[qi];
  suiro_task t = e->task;
  uint64_t fn = e->fn;
  size_t len = e->len;
  uint32_t flags = e->flags;
  uint32_t depth = ld_rlx(&me->depth);
  if (depth >= INFLIGHT_MAX) depth = INFLIGHT_MAX - 1; /* cannot happen: helpers stop before */
  st_rlx(&me->inflight[depth], t);
  st_rlx(&me->depth, depth + 1);
  st_rlx(&me->cpu, sched_getcpu()); /* where the task runs: a spinning host yields only to a worker on its CPU */

  _Alignas(16) unsigned char small[512];
  unsigned char *arg = small;
  int arg_heap = 0;
  suiro_buf *arg_buf = NULL; /* a spilled argument is read where it is, in its region */
  int spill_failed = 0;
  char spill_err[256];
  if (SUIRO_UNLIKELY(flags & TQ_SPILLED)) {
    arg = open_spilled_arg(e, len, &arg_buf, spill_err, sizeof spill_err);
    taskq_release(q, e, pos);
    spill_failed = arg == NULL;
  } else {
    if (SUIRO_UNLIKELY(len > sizeof small)) {
      arg = malloc(len);
      arg_heap = 1;
    }
    if (arg) copy_small(arg, e + 1, len);
    else {
      spill_failed = 1;
      snprintf(spill_err, sizeof spill_err, "out of memory for a %zu-byte argument", len);
    }
    taskq_release(q, e, pos);
  }

  uint32_t rs = task_rs(t);
  uint64_t gen = task_gen(t);
  result_slot *r = pool_result(p, rs);
  unsigned w = (unsigned)p->worker_slot;
  uint64_t expect = rs_state(gen, RS_NOWORKER, RS_PENDING);
  if (!atomic_compare_exchange_strong_explicit(&r->state, &expect, rs_state(gen, w, RS_RUNNING),
                                               memory_order_acq_rel, memory_order_relaxed)) {
    /* Cancelled before it started, or its submitter died: skip it. Channel endpoints in its
     * argument will never be claimed: they are dropped, so their names go (chan.c). */
    if (arg && !spill_failed) suiro_chan_revoke_refs(arg, len);
    if (arg_heap) free(arg);
    if (arg_buf) suiro_buf_unref(arg_buf);
    st_rlx(&me->depth, depth);
    return;
  }
  if (depth == 0) {
    st_rlx(&me->state, SUIRO_WORKER_BUSY);
    /* a waker may have marked us "being woken" after we settled: we are running now */
    uint64_t bit = 1ull << p->worker_slot;
    if (SUIRO_UNLIKELY(ld_rlx(&p->hdr->waking_mask) & bit)) atomic_fetch_and(&p->hdr->waking_mask, ~bit);
  }

  size_t inline_cap = result_inline_cap(p->result_size);
  suiro_out o = { result_data(r), 0, inline_cap, 0, 0, NULL };
  int rc;
  suiro_task outer = running_task;
  int outer_origin = running_origin;
  running_task = t;
  running_origin = qi == 0 ? -1 : qi - 1; /* queues are per submitter: 0 the host, 1 + slot */
  if (spill_failed) rc = suiro_out_error(&o, "reading the task's argument failed: %s", spill_err);
  else rc = run_fn(fn, arg, len, &o);
  running_task = outer;
  running_origin = outer_origin;
  if (arg_heap) free(arg);
  if (arg_buf) suiro_buf_unref(arg_buf);
  if (rc != 0 && !o.error) suiro_out_error(&o, "task function failed (returned %d)", rc);

  uint32_t rflags = 0;
  size_t rlen = o.len;
  if (SUIRO_UNLIKELY(o.spill || o.heap)) rflags = store_big_result(p, &o, r, inline_cap, &rlen);
  r->len = (uint32_t)rlen;
  r->flags = rflags;
  r->pid = ld_rlx(&me->pid);
  r->slot = (int32_t)w;
  st_rel(&r->state, rs_state(gen, w, o.error ? RS_ERROR : RS_VALUE));
  st_rlx(&me->depth, depth);
  /* own counters: one writer, so a load and a store, not a locked add */
  st_rlx(&me->tasks, ld_rlx(&me->tasks) + 1);
  if (qi != p->sub && qi != 0) st_rlx(&me->steals, ld_rlx(&me->steals) + 1);
  if (depth == 0) st_rlx(&me->state, SUIRO_WORKER_IDLE);
  pool_notify_result(p, sub_of_rs(p, rs));
}

/* ---- placement ---------------------------------------------------------------------------------
 * A woken worker runs where the kernel puts it, and on a wake-up the kernel favours the waker's
 * CPU or the wakee's previous one. When that CPU is running another busy worker while a CPU sits
 * idle (the host parked right after submitting), the two time-slice one CPU for milliseconds until
 * the periodic load balancer separates them: measured here as 2-5 ms late starts in a third of
 * 10 ms maps, while pinned workers never showed it. So workers record the CPU they run on, and
 * one that finds itself on a CPU recorded by another awake worker, while an allowed CPU is
 * recorded by none, moves itself there: pinning to that CPU migrates at once, and restoring the
 * mask right after leaves the kernel free again. Only the worker that runs can notice (the other
 * is waiting for the CPU), so exactly one moves; after a move the worker leaves placement to the
 * kernel for 10 ms, and checks are at most one a millisecond, so stale records cannot ping-pong.
 * Records are relaxed hints: a wrong one costs one needless move at worst. A host spinning for
 * results records its CPU too (collect.c): a worker the kernel left on it (a worker starts on its
 * host's CPU, and nothing parks to let the kernel rebalance: R round trips measured 10-14 us
 * sharing, 2 us apart) sees that while it spins idle and moves the same way. */
static cpu_set_t allowed_cpus;
static int nallowed = -1;
static uint64_t placement_next; /* suiro_ns: no check before this */
/* Set when this worker comes out of a park: its placement is checked after the task it was woken
 * for, not before. A worker woken onto the CPU of the host that waits for it would otherwise move
 * (two sched_setaffinity calls, tens of microseconds in a VM) before running that task. */
static int place_due;

static void placement_check(suiro_pool *p, uint64_t now) {
  if (nallowed < 0) nallowed = sched_getaffinity(0, sizeof allowed_cpus, &allowed_cpus) == 0 ? CPU_COUNT(&allowed_cpus) : 0;
  worker_rec *me = &p->workers[p->worker_slot];
  int cpu = sched_getcpu();
  st_rlx(&me->cpu, cpu);
  if (nallowed < 2 || cpu < 0 || cpu >= CPU_SETSIZE || now < placement_next) return;
  placement_next = now + 1000000;
  pool_hdr *h = p->hdr;
  uint64_t awake = ld_rlx(&h->active_mask) & ~ld_rlx(&h->parked_mask) & ~(1ull << p->worker_slot);
  cpu_set_t used;
  CPU_ZERO(&used);
  int clash = 0;
  for (; awake; awake &= awake - 1) {
    int c = ld_rlx(&p->workers[__builtin_ctzll(awake)].cpu);
    if (c < 0 || c >= CPU_SETSIZE) continue;
    CPU_SET(c, &used);
    clash |= c == cpu;
  }
  int hc = ld_rlx(&h->host_cpu); /* a host spinning for results counts as a busy CPU too */
  if (hc >= 0 && hc < CPU_SETSIZE) {
    CPU_SET(hc, &used);
    clash |= hc == cpu;
  }
  if (!clash) return;
  /* the mask as it is now (someone may have changed it since), to restore after the move */
  if (sched_getaffinity(0, sizeof allowed_cpus, &allowed_cpus) != 0) return;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (c == cpu || !CPU_ISSET(c, &allowed_cpus) || CPU_ISSET(c, &used)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    sched_setaffinity(0, sizeof allowed_cpus, &allowed_cpus);
    st_rlx(&me->cpu, c);
    st_rlx(&me->moves, ld_rlx(&me->moves) + 1);
    placement_next = now + 10000000;
    return;
  }
}

/* A worker woken onto the CPU of a running one waits for it to use up its time slice (1.5-3.5
 * ms measured here) before it can even look around; a worker that sees another stay in the
 * waking set for over 100 us yields its CPU once, in case the wakee is queued behind it. Cheap
 * when nobody is being woken: one load. */
static uint64_t waking_since;

void worker_placement_tick(void) {
  suiro_pool *p = current;
  if (!p) return;
  uint64_t waking = ld_rlx(&p->hdr->waking_mask) & ~(1ull << p->worker_slot);
  uint64_t now = suiro_ns();
  if (!waking) {
    waking_since = 0;
  } else if (!waking_since) {
    waking_since = now;
  } else if (now - waking_since > 100000) {
    sched_yield();
    waking_since = now = suiro_ns();
  }
  if (now >= placement_next) placement_check(p, now);
}

/* Set when this worker comes out of a park: its first claim decides whether to bring in another
 * worker (chain wake), so a burst ramps up one wake at a time without every claim paying for the
 * check. */
static int just_woke;

static inline void chain_wake(suiro_pool *p, const taskq_view *q) {
  if (SUIRO_UNLIKELY(just_woke)) {
    just_woke = 0;
    if (ld_rlx(&p->hdr->parked_mask) != 0 && taskq_maybe_ready(q)) pool_maybe_wake(p, q, ld_rlx(&q->q->tail) + 1);
  }
}

/* Claims one task and runs it. Order: own queue (its nested work), then the host's queue, then
 * the other workers' queues (stealing).
 *
 * A worker waiting on a nested result (`waiting`) takes only from its own queue. Everything it
 * runs there was submitted from its own stack, so every frame on any worker's stack is a
 * descendant of the frame below it and a wait can never close a cycle; helping with unrelated
 * work (another worker's tasks, the host's) could put a task that blocks on us above our wait. */
int worker_claim_and_run(suiro_pool *p, int waiting) {
  worker_rec *me = &p->workers[p->worker_slot];
  if (ld_rlx(&me->depth) >= INFLIGHT_MAX - 1) return 0;
  /* Being killed for a task (suiro_task_kill): take nothing new. The seq_cst fence after our last
   * result (pool_notify_result) orders this load after that store, and the killer stores doom
   * before re-reading the task's state, so either we see doom here or it sees the task done. */
  if (SUIRO_UNLIKELY(ld_acq(&me->doom) != 0)) return 0;
  unsigned claimer = (unsigned)p->worker_slot + 1;
  uint64_t pos;
  const taskq_view *own = &p->queues[p->sub];
  taskq_entry *e = NULL;
  /* Our queue holds entries only below our producer position (p->tail); once its claim hint has
   * reached it, every one of them is taken (taskq.h): nothing to look at, the common case of a
   * worker that runs the host's tasks and submits none. */
  if (ld_rlx(&own->q->head) != p->tail) {
    e = taskq_claim_newest(own, claimer, p->tail, 64, &pos);
    if (!e) e = taskq_claim(own, claimer, &pos);
  }
  if (e) {
    run_entry(p, p->sub, e, pos);
    return 1;
  }
  if (waiting) return 0;
  e = taskq_claim(&p->queues[0], claimer, &pos);
  if (e) {
    chain_wake(p, &p->queues[0]);
    run_entry(p, 0, e, pos);
    return 1;
  }
  int nsubs = p->hdr->nsubs;
  uint64_t active = ld_rlx(&p->hdr->active_mask);
  for (int k = 1; k < nsubs; k++) {
    int qi = 1 + (p->sub - 1 + k) % (nsubs - 1); /* start after our own slot */
    if (qi == p->sub) continue;
    if (!(active & (1ull << (qi - 1))) && !taskq_maybe_ready(&p->queues[qi])) continue;
    e = taskq_claim(&p->queues[qi], claimer, &pos);
    if (e) {
      chain_wake(p, &p->queues[qi]);
      run_entry(p, qi, e, pos);
      return 1;
    }
  }
  return 0;
}

static int any_work(suiro_pool *p) {
  int nsubs = p->hdr->nsubs;
  if (taskq_maybe_ready(&p->queues[0])) return 1;
  uint64_t active = ld_rlx(&p->hdr->active_mask);
  for (int qi = 1; qi < nsubs; qi++)
    if ((active & (1ull << (qi - 1))) && taskq_maybe_ready(&p->queues[qi])) return 1;
  return 0;
}

/* ---- the worker's life --------------------------------------------------------------------- */

static int watched_pid;
static uint64_t watched_start, watched_id;
static char watched_pool[SUIRO_NAME_MAX]; /* the pool's name: its names go with a dead host */

/* The host watch: a pidfd of the host when the kernel has them; else (fd -1) the host's
 * /proc entry looked at every 100 ms, a pid whose start time changed being a host gone. */
static void *watch_host(void *arg) {
  int fd = (int)(intptr_t)arg;
  struct pollfd pfd = { fd, POLLIN, 0 };
  for (;;) {
    int r = fd >= 0 ? poll(&pfd, 1, -1) : poll(NULL, 0, 100);
    int gone = fd >= 0 ? r > 0 || (r < 0 && errno != EINTR)
                       : suiro_proc_start(watched_pid) != watched_start;
    if (gone) {
      /* The host is gone: nobody will collect our results. A host that was SIGKILLed left its
       * pools, regions and anchor behind; its workers are the first to know, so they remove it all
       * (only once its anchor's lock is free, i.e. it is really gone; unlinking twice is harmless). */
      region_reap_owner(watched_pid, watched_id);
      /* a pool hosted by a worker is named after its family's root, not its host (buf.c) */
      if (watched_pool[0]) region_unlink_prefix(watched_pool + 1);
      suiro_exit_now(0);
    }
  }
  return NULL;
}

/* 0: watching; 1: the host is already gone; -1: the watch thread could not start (errno set).
 * The thread runs on the default stack size: glibc carves the process's static TLS out of a
 * thread's stack, and an interpreter that loaded many libraries (R) needs more than a small
 * fixed size would leave. */
static int start_host_watch(pool_hdr *h, int by_pipe) {
  int fd = by_pipe ? -1 : (int)syscall(SYS_pidfd_open, h->host_pid, 0);
  if (fd < 0 && !by_pipe && errno == ESRCH) return 1;
  if (fd < 0 && !by_pipe && errno != ENOSYS && errno != EPERM) return -1;
  if (suiro_proc_start(h->host_pid) != h->host_start) { /* pid reused: host gone */
    if (fd >= 0) close(fd);
    return 1;
  }
  watched_pid = h->host_pid;
  watched_start = h->host_start;
  watched_id = h->host_id;
  pthread_t th;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&th, &a, watch_host, (void *)(intptr_t)fd);
  pthread_attr_destroy(&a);
  if (rc != 0) {
    if (fd >= 0) close(fd);
    errno = rc;
    return -1;
  }
  return 0;
}

const char *suiro_worker_token(int argc, char **argv) {
  if (!argv) return NULL;
  for (int i = 1; i + 1 < argc && argv[i]; i++)
    if (strcmp(argv[i], "--suiro-worker") == 0) return argv[i + 1];
  return NULL;
}

int suiro_worker_main(int argc, char **argv) {
  const char *token = suiro_worker_token(argc, argv);
  if (!token) return -1;
  return suiro_worker_run(token);
}

static void leave(suiro_pool *p, int state) {
  worker_rec *me = &p->workers[p->worker_slot];
  atomic_fetch_and(&p->hdr->awake_mask, ~(1ull << p->worker_slot));
  atomic_fetch_and(&p->hdr->active_mask, ~(1ull << p->worker_slot));
  st_rel(&me->state, state);
  atomic_fetch_add(&p->hdr->state_seq, 1);
  park_wake(&p->hdr->state_seq, -1);
}

int suiro_worker_run(const char *token) {
  char name[SUIRO_NAME_MAX];
  int slot = -1, death_fd = -1;
  unsigned inc = 0;
  if (!token) {
    suiro_diag("suiro worker: no worker token"); /* a line: the hook adds the newline */
    return 2;
  }
  const char *c1 = strchr(token, ':');
  /* name:slot:incarnation[:fd of the death pipe, when the host watches workers without pidfds] */
  int fields = c1 ? sscanf(c1 + 1, "%d:%u:%d", &slot, &inc, &death_fd) : 0;
  if (!c1 || (size_t)(c1 - token) >= sizeof name || fields < 2) {
    suiro_diag("suiro worker: malformed token '%s'", token);
    return 2;
  }
  memcpy(name, token, (size_t)(c1 - token));
  name[c1 - token] = 0;
  suiro_region *r;
  if (suiro_region_open(name, 1, &r) != SUIRO_OK) {
    suiro_diag("suiro worker: %s", suiro_last_error());
    return 2;
  }
  pool_hdr *h = suiro_region_addr(r);
  if (h->magic != POOL_MAGIC || h->version != POOL_VERSION || slot < 0 || slot >= h->max_workers) {
    suiro_diag("suiro worker: %s is not a compatible pool (or slot %d is out of range)", name, slot);
    suiro_region_close(r, 0);
    return 2;
  }
  suiro_pool *p = calloc(1, sizeof *p);
  if (p) handle_init(&p->live, HANDLE_POOL);
  if (!p || pool_attach(p, r, 1 + slot) != SUIRO_OK) {
    suiro_diag("suiro worker: %s", suiro_last_error());
    return 2;
  }
  p->is_host = 0;
  p->worker_slot = slot;
  p->evfd = -1;
  worker_rec *me = &p->workers[slot];
  if (ld_acq(&me->incarnation) != inc) {
    suiro_diag("suiro worker: slot %d was given to another worker", slot);
    return 2;
  }
  /* The death pipe stays with this process alone: what it starts must not keep it open. */
  if (death_fd >= 0) fcntl(death_fd, F_SETFD, FD_CLOEXEC);
  int watch = start_host_watch(h, death_fd >= 0);
  if (watch == 1) return 0; /* host already gone: nobody to tell */
  if (watch < 0) {
    suiro_diag("suiro worker: cannot watch host %d: %s", (int)h->host_pid, strerror(errno));
    return 2;
  }
  pool_install_buf_env();
  buf_set_worker(name);
  snprintf(watched_pool, sizeof watched_pool, "%s", name);
  st_rlx(&me->pid, (int32_t)getpid());
  st_rlx(&me->depth, 0);
  st_rlx(&me->cpu, -1);
  current = p;
  atomic_fetch_or(&h->awake_mask, 1ull << slot);
  atomic_fetch_or(&h->active_mask, 1ull << slot);
  st_rel(&me->state, SUIRO_WORKER_IDLE);
  atomic_fetch_add(&h->state_seq, 1);
  park_wake(&h->state_seq, -1);

  spin_adapt idle = { 4000 };
  uint64_t bit = 1ull << slot;
  for (;;) {
    if (SUIRO_UNLIKELY(ld_rlx(&h->closing) || ld_rlx(&me->retire))) break;
    if (worker_claim_and_run(p, 0)) {
      if (SUIRO_UNLIKELY(place_due)) {
        place_due = 0;
        placement_check(p, suiro_ns());
      }
      if (SUIRO_UNLIKELY(ld_rlx(&h->waking_mask) & ~bit)) worker_placement_tick();
      /* More workers awake than CPUs (a burst woke them, or the pool has more workers than the
       * machine has CPUs): step aside even though work remains, so the ones left run without
       * being time-sliced against each other. They wake us again when they need help (wake
       * policy in pool.c), and the host's monitor does when they block. */
      if (SUIRO_UNLIKELY(bits_more_than(ld_rlx(&h->awake_mask), h->ncpu))) { /* pool_awake > ncpu */
        if (__builtin_popcountll(atomic_fetch_and(&h->awake_mask, ~bit)) > h->ncpu) {
          uint32_t seq = ld_acq(&me->park);
          atomic_fetch_or(&h->parked_mask, bit);
          st_rlx(&me->parks, ld_rlx(&me->parks) + 1);
          st_rlx(&me->cpu, -1);
          if (!ld_rlx(&h->closing) && !ld_rlx(&me->retire)) park_wait(&me->park, seq, UINT64_MAX);
          atomic_fetch_and(&h->parked_mask, ~bit);
          atomic_fetch_and(&h->waking_mask, ~bit);
          just_woke = 1;
          st_rlx(&me->cpu, sched_getcpu());
          place_due = 1;
        }
        atomic_fetch_or(&h->awake_mask, bit);
      }
      continue;
    }
    /* Idle: the pre-spin (park.h), then spin while it can pay, then park. */
    if (SUIRO_UNLIKELY(place_due)) { /* woken with nothing to run (or it went to another worker) */
      place_due = 0;
      placement_check(p, suiro_ns());
    }
    int found = 0;
    for (int i = 0; i < PRESPIN_LOOKS && !found; i++) {
      cpu_relax();
      found = any_work(p);
    }
    if (found) continue;
    uint64_t t0 = suiro_ns();
    if (spin_enter(&h->spinners, h->ncpu)) {
      atomic_fetch_add_explicit(&h->idle_spinners, 1, memory_order_relaxed);
      uint64_t end = t0 + spin_budget(&idle);
      for (unsigned k = 1;; k++) {
        for (int i = 0; i < 16 && !found; i++) {
          found = any_work(p);
          if (!found) cpu_relax();
        }
        if (found || suiro_ns() >= end || ld_rlx(&h->closing) || ld_rlx(&me->retire)) break;
        /* Every few microseconds, let a process the kernel queued on this CPU run: typically
         * the host we just woke with a result, which otherwise waits out our whole budget. A
         * host spinning for our results on this very CPU is better served by our moving away
         * (placement, at most one check a millisecond). */
        if ((k & 3) == 0) {
          int hc = ld_rlx(&h->host_cpu);
          if (SUIRO_UNLIKELY(hc >= 0)) {
            uint64_t now = suiro_ns();
            if (now >= placement_next) placement_check(p, now);
          }
          /* A host spinning on another CPU, nobody being woken: nobody we know of waits for this
           * CPU, and a yield (~0.4 us in a VM) would only delay our next task. */
          int mc = sched_getcpu();
          st_rlx(&me->cpu, mc);
          if (hc < 0 || hc == mc || (ld_rlx(&h->waking_mask) & ~bit)) sched_yield();
        }
      }
      atomic_fetch_sub_explicit(&h->idle_spinners, 1, memory_order_relaxed);
      spin_leave(&h->spinners);
    }
    if (found) {
      spin_observe(&idle, suiro_ns() - t0);
      continue;
    }
    uint32_t seq = ld_acq(&me->park);
    atomic_fetch_or(&h->parked_mask, bit); /* seq_cst: the announce */
    if (!any_work(p) && !ld_rlx(&h->closing) && !ld_rlx(&me->retire)) {
      st_rlx(&me->parks, ld_rlx(&me->parks) + 1);
      atomic_fetch_and(&h->awake_mask, ~bit);
      st_rlx(&me->cpu, -1);
      park_wait(&me->park, seq, UINT64_MAX);
      atomic_fetch_or(&h->awake_mask, bit);
      just_woke = 1;
      st_rlx(&me->cpu, sched_getcpu());
      place_due = 1;
    }
    /* Off the parked set, and no longer "being woken" (a waker that claimed us set that bit). */
    atomic_fetch_and(&h->parked_mask, ~bit);
    atomic_fetch_and(&h->waking_mask, ~bit);
    spin_observe(&idle, suiro_ns() - t0);
  }
  current = NULL;
  buf_set_worker(NULL);
  leave(p, SUIRO_WORKER_EXITED);
  pool_detach(p);
  suiro_region_close(r, 0);
  handle_retire(p, sizeof *p);
  return 0;
}
