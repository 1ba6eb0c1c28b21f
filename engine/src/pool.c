/*
 * pool.c — pools: the region's layout, creating and stopping, status, growing and shrinking.
 *
 * Layout of the pool region (pool.h): header, worker records, submitter records, one task queue
 * per submitter (taskq.c), then result slots partitioned by submitter. There is no dispatcher:
 * a submitter writes a task into its own queue (submit.c) and workers claim it (worker.c);
 * results come back through the slots (collect.c); wake-ups follow wake.c's policy.
 *
 * Ownership
 *   - A submitter's queue has one producer: the submitter. Its result slots are allocated and
 *     freed only by that submitter (a private free stack), so allocation needs no atomics.
 *   - A result slot's state word arbitrates everything else: the submitter stores PENDING(gen)
 *     before publishing the task; the worker that claims the task CASes PENDING -> RUNNING(gen, w)
 *     (a cancel CASes PENDING -> CANCELLED, so exactly one of the two wins); only the RUNNING
 *     worker writes the slot's data, then stores the terminal state with release. After a worker
 *     dies, the host's monitor (peer.c) CASes its PENDING/RUNNING slots to DIED.
 *   - The host's handle belongs to the thread using the pool; the registry of this process's
 *     host pools is guarded by hosts_lock.
 *
 * Memory ordering: stop publishes `closing` (seq_cst) before waking everyone; workers and
 * submitters re-check it after every wake-up. The rest of this file runs before workers attach
 * or after they are gone, or reads statistics (relaxed).
 */
#include "pool.h"
#include "suiro_bind.h"
#include "suiro_chan.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The first bytes of a worker's queue, reserved when it attaches (pool_attach). */
#define QUEUE_FIRST_RESERVE ((size_t)64 << 10)

#define PAGE 4096u

static _Atomic int live_host_pools; /* pools this process created and has not stopped */

static int has_home(void) {
  suiro_pool *cur = suiro_current_pool();
  return (cur && !handle_inherited(cur)) || atomic_load(&live_host_pools) > 0;
}

/* This process's live host pools: for the recycle list (recycle.c finds a region's pool by its
 * name) and the cleanup at exit. */
static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static suiro_pool *hosts[POOL_MAX_HOSTS];

void pool_hosts_lock(void) { pthread_mutex_lock(&hosts_lock); }
void pool_hosts_unlock(void) { pthread_mutex_unlock(&hosts_lock); }
/* A forked child's inherited pools are its parent's: not offered (handle.c). */
suiro_pool *pool_host(int i) {
  return i >= 0 && i < POOL_MAX_HOSTS && hosts[i] && !handle_inherited(hosts[i]) ? hosts[i] : NULL;
}

/* fork (handle.c): the registry's lock is held across the fork, so the child's copy is
 * consistent; the child hosts nothing (its inherited pools are its parent's). */
void pool_fork_prepare(void) { pthread_mutex_lock(&hosts_lock); }
void pool_fork_parent(void) { pthread_mutex_unlock(&hosts_lock); }
void pool_fork_child(void) {
  pthread_mutex_unlock(&hosts_lock);
  atomic_store(&live_host_pools, 0);
}

/* At exit (os.exit, exit() from any thread), whatever this process still hosts goes: its workers
 * are killed and every name it owns is removed. Signals that kill the process skip this; then
 * its workers remove what it left (worker.c, watch_host). */
static void pools_at_exit(void) {
  pthread_mutex_lock(&hosts_lock);
  int any = 0;
  for (int i = 0; i < POOL_MAX_HOSTS; i++) {
    suiro_pool *p = hosts[i];
    /* a forked child hosts nothing: the pools it inherited are its parent's */
    if (!p || !p->hdr || handle_inherited(p) || p->hdr->host_pid != getpid()) continue;
    any = 1;
    atomic_store(&p->hdr->closing, 1);
    for (int w = 0; w < p->hdr->max_workers; w++) {
      int pid = ld_rlx(&p->workers[w].pid);
      if (pid > 0 && p->watchfds[w] >= 0) kill(pid, SIGKILL);
    }
  }
  /* the pools' own names: a worker's pools are named after its family's root, not after it */
  char names[POOL_MAX_HOSTS][SUIRO_NAME_MAX];
  int nn = 0;
  for (int i = 0; i < POOL_MAX_HOSTS; i++) {
    suiro_pool *p = hosts[i];
    if (p && p->hdr && p->region && !handle_inherited(p) && p->hdr->host_pid == getpid())
      snprintf(names[nn++], SUIRO_NAME_MAX, "%s", suiro_region_name(p->region) + 1);
  }
  pthread_mutex_unlock(&hosts_lock);
  if (!any) return;
  for (int i = 0; i < nn; i++) region_unlink_prefix(names[i]);
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "suiro_%x_%llx_", (unsigned)pid, (unsigned long long)start);
  region_unlink_prefix(prefix);
}

static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;
static void register_at_exit(void) { atexit(pools_at_exit); }

static void hosts_add(suiro_pool *p) {
  pthread_once(&at_exit_once, register_at_exit);
  pool_install_buf_env();
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < POOL_MAX_HOSTS; i++)
    if (!hosts[i]) {
      hosts[i] = p;
      break;
    }
  pthread_mutex_unlock(&hosts_lock);
}

static void hosts_remove(suiro_pool *p) {
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < POOL_MAX_HOSTS; i++)
    if (hosts[i] == p) hosts[i] = NULL;
  pthread_mutex_unlock(&hosts_lock);
}

static pthread_once_t buf_env_once = PTHREAD_ONCE_INIT;
static void set_buf_env(void) {
  static const buf_env e = { pool_recycle_push, pool_recycle_pop, has_home };
  buf_set_env(&e);
}
void pool_install_buf_env(void) { pthread_once(&buf_env_once, set_buf_env); }

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }

void suiro_pool_opts_init(suiro_pool_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->workers = 1;
  o->max_workers = 0;
  o->ring_cap = 4096;
  o->slot_size = 256;      /* room inline for a task with a shared-array reference */
  o->result_slots = 131072;
  o->result_size = 256;
  o->respawn = 0;
  o->start_timeout = 10.0;
}

/* ---- mapping a pool region into a handle -------------------------------------------------- */

suiro_status pool_attach(suiro_pool *p, suiro_region *r, int sub) {
  pool_hdr *h = suiro_region_addr(r);
  char *base = (char *)h;
  p->region = r;
  p->hdr = h;
  p->workers = (worker_rec *)(base + h->off_workers);
  p->subs = (sub_rec *)(base + h->off_subs);
  p->results = base + h->off_results;
  p->result_size = h->result_size;
  p->sub = sub;
  p->queues = calloc((size_t)h->nsubs, sizeof *p->queues);
  if (!p->queues) return suiro_set_error(SUIRO_ERR, "out of memory");
  for (int i = 0; i < h->nsubs; i++)
    taskq_init_view(&p->queues[i], base + h->off_queues + (size_t)i * h->queue_stride,
                    h->ring_cap, h->slot_size);
  sub_rec *s = &p->subs[sub];
  uint32_t n = s->nresults;
  /* Sized for every slot (a host has 131072) but touched only as slots get used: fresh anonymous
   * pages, zero and unfaulted. From malloc, a calloc this big had to clear recycled heap first,
   * after consolidating every small chunk a Lua host had just freed: milliseconds per pool. */
  size_t gen_bytes = sizeof(uint64_t) * n, stack_bytes = sizeof(uint32_t) * n;
  p->book_bytes = gen_bytes + stack_bytes + n;
  void *book = mmap(NULL, p->book_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (book == MAP_FAILED) {
    p->book_bytes = 0;
    return suiro_set_errno("mmap of result-slot bookkeeping");
  }
  p->gen = book; /* never used: generation 0 */
  p->free_stack = (uint32_t *)((char *)book + gen_bytes);
  p->outstanding = (uint8_t *)book + gen_bytes + stack_bytes;
  /* A worker adopting the slot of a dead predecessor resumes its generations; slots still being
   * run for the predecessor are reclaimed once they finish. */
  p->nfree = 0;
  p->nreleased = 0;
  uint32_t hi = ld_acq(&s->hiwater);
  if (hi > n) hi = n;
  p->fresh = hi; /* slots [hi, n) were never used: handed out in order once the stack is empty */
  p->reserved_to = hi; /* and reserved as they are first handed out (pool_reserve_slots) */
  for (uint32_t i = hi; i-- > 0;) {
    uint64_t st = ld_acq(&pool_result(p, s->result_base + i)->state);
    p->gen[i] = rs_gen(st);
    if (st != 0 && !rs_terminal(rs_kind(st))) {
      p->outstanding[i] = 2;
      p->nreleased++;
    } else {
      p->free_stack[p->nfree++] = i;
    }
  }
  p->collect_spin.gap_ns = 2000;
  /* This process's queue (the host's was reserved with the region): its first pages now, since
   * every consumer polls the head and tail words there; the entries past them when this worker
   * first submits (pool_reserve_slots), so a worker that never submits reserves 64 KiB, not a
   * whole queue (fallocate of 1 MiB was a fifth of a Lua worker's start). A predecessor that
   * used slots here reserved the whole queue already. */
  p->queue_reserved = sub == 0 || hi > 0;
  if (!p->queue_reserved) {
    size_t first = h->queue_stride < QUEUE_FIRST_RESERVE ? h->queue_stride : QUEUE_FIRST_RESERVE;
    suiro_status st = region_reserve(r, (size_t)h->off_queues + (size_t)sub * h->queue_stride, first);
    if (st != SUIRO_OK) return st;
  }
  p->tail = ld_rlx(&p->queues[sub].q->tail);
  return SUIRO_OK;
}

/* Reserves room for the next never-used result slots of this submitter (and, the first time, for
 * the rest of its queue) before the first of them is handed out, so that touching them cannot
 * fault on a full /dev/shm. The chunks grow with what was reserved so far, from 64 KiB to 1 MiB:
 * a pool that runs a few tasks reserves little, a busy one calls fallocate a few times. */
suiro_status pool_reserve_slots(suiro_pool *p) {
  sub_rec *s = &p->subs[p->sub];
  if (!p->queue_reserved) {
    const pool_hdr *h = p->hdr;
    suiro_status st = region_reserve(p->region, (size_t)h->off_queues + (size_t)p->sub * h->queue_stride,
                                     h->queue_stride);
    if (st != SUIRO_OK) return st;
    p->queue_reserved = 1;
  }
  size_t bytes = (size_t)p->reserved_to * p->result_size;
  if (bytes < ((size_t)64 << 10)) bytes = (size_t)64 << 10;
  if (bytes > ((size_t)1 << 20)) bytes = (size_t)1 << 20;
  uint32_t chunk = (uint32_t)(bytes / p->result_size);
  if (chunk == 0) chunk = 1;
  uint32_t to = s->nresults - p->fresh > chunk ? p->fresh + chunk : s->nresults;
  size_t off = (size_t)((char *)pool_result(p, s->result_base + p->fresh) - (char *)p->hdr);
  suiro_status st = region_reserve(p->region, off, (size_t)(to - p->fresh) * p->result_size);
  if (st == SUIRO_OK) p->reserved_to = to;
  return st;
}

void pool_detach(suiro_pool *p) {
  func_forget(p);
  if (p->held) suiro_buf_unref(p->held);
  p->held = NULL;
  free(p->queues);
  if (p->book_bytes) munmap(p->gen, p->book_bytes);
  p->book_bytes = 0;
  free(p->scratch);
  p->queues = NULL;
  p->free_stack = NULL;
  p->gen = NULL;
  p->outstanding = NULL;
  p->scratch = NULL;
}

/* ---- create / stop ------------------------------------------------------------------------ */

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

static char **dupvec(const char *const *v) {
  if (!v) return NULL;
  size_t n = 0;
  while (v[n]) n++;
  char **out = calloc(n + 1, sizeof *out);
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) out[i] = strdup(v[i]);
  return out;
}

static void freevec(char **v) {
  if (!v) return;
  for (char **q = v; *q; q++) free(*q);
  free(v);
}

static suiro_status wait_workers_ready(suiro_pool *p, int from, int to, double timeout);

suiro_status suiro_pool_create(const suiro_pool_opts *user, suiro_pool **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_pool_create: out (argument 2) is NULL");
  *out = NULL;
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  if (user) {
    if (user->size != sizeof o)
      return suiro_set_error(SUIRO_ERR, "suiro_pool_create: opts not initialised with suiro_pool_opts_init");
    o = *user;
  }
  if (o.workers < 0 || o.workers > POOL_MAX_WORKERS)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: workers must be in 0..%d, got %d",
                           POOL_MAX_WORKERS, o.workers);
  if (o.max_workers <= 0) o.max_workers = o.workers > 16 ? o.workers : 16;
  if (o.max_workers < o.workers || o.max_workers > POOL_MAX_WORKERS)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: max_workers must be in workers..%d, got %d",
                           POOL_MAX_WORKERS, o.max_workers);
  if (!is_pow2(o.ring_cap) || o.ring_cap < 2 || o.ring_cap > (1u << 20))
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: ring_cap must be a power of two in 2..2^20, got %u", o.ring_cap);
  if (!is_pow2(o.slot_size) || o.slot_size < 64 || o.slot_size > 65536)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: slot_size must be a power of two in 64..65536, got %u", o.slot_size);
  if (!is_pow2(o.result_size) || o.result_size < 64 || o.result_size > 65536)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: result_size must be a power of two in 64..65536, got %u", o.result_size);
  if (o.result_slots < 1 || o.result_slots > (1u << 22))
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: result_slots must be in 1..2^22, got %u", o.result_slots);
  if (o.start_timeout != o.start_timeout)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: start_timeout is NaN");
  if (o.respawn != 0 && o.respawn != 1)
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: respawn must be 0 or 1, got %d", o.respawn);

  suiro_reap(); /* segments of crashed hosts go first */

  const uint32_t worker_results = 16384;
  int nsubs = 1 + o.max_workers;
  size_t off_workers = round_up(sizeof(pool_hdr), PAGE);
  size_t off_subs = off_workers + round_up(sizeof(worker_rec) * (size_t)o.max_workers, SUIRO_CACHELINE);
  size_t off_queues = round_up(off_subs + sizeof(sub_rec) * (size_t)nsubs, PAGE);
  size_t qstride = round_up(taskq_bytes(o.ring_cap, o.slot_size), PAGE);
  size_t off_results = off_queues + qstride * (size_t)nsubs;
  size_t nres = (size_t)o.result_slots + (size_t)worker_results * (size_t)o.max_workers;
  if (nres >= (1u << 24))
    return suiro_set_error(SUIRO_ERR, "suiro_pool_create: too many result slots (%zu)", nres);
  size_t size = round_up(off_results + nres * o.result_size, PAGE);

  suiro_pool *p = calloc(1, sizeof *p);
  if (!p) return suiro_set_error(SUIRO_ERR, "out of memory");
  handle_init(&p->live, HANDLE_POOL);
  p->evfd = -1;
  p->monitor_ctl = -1;
  p->epfd = -1;
  p->worker_slot = -1;
  p->is_host = 1;
  for (int i = 0; i < POOL_MAX_WORKERS; i++) p->watchfds[i] = -1;
  pthread_mutex_init(&p->lock, NULL);

  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  suiro_region *r;
  /* Reserved now: the header, the worker records and the host's queue; each worker reserves the
   * first pages of its own queue when it attaches and the rest when it first submits, each
   * submitter its result slots as it first uses them (pool_attach, pool_reserve_slots). */
  /* A worker's pools carry its family's root (buf.c): its workers then read what it may read. */
  int owner_pid = pid;
  uint64_t owner_id = start;
  buf_family_root(&owner_pid, &owner_id);
  suiro_status st = region_create_owned(size, off_queues + qstride, owner_pid, owner_id, "", &r);
  if (st != SUIRO_OK) {
    free(p);
    return st;
  }
  region_identity(&pid, &start); /* making the anchor may have renewed the id */
  p->region = r; /* from here on a failure goes through suiro_pool_stop */
  atomic_fetch_add(&live_host_pools, 1);
  pool_hdr *h = suiro_region_addr(r);
  h->magic = POOL_MAGIC;
  h->version = POOL_VERSION;
  h->hdr_size = sizeof(pool_hdr);
  h->size = size;
  h->host_pid = pid;
  h->host_start = suiro_proc_start(pid);
  h->host_id = start;
  h->ncpu = suiro_ncpu();
  st_rlx(&h->host_cpu, -1);
  h->max_workers = o.max_workers;
  h->nsubs = nsubs;
  h->ring_cap = o.ring_cap;
  h->slot_size = o.slot_size;
  h->result_size = o.result_size;
  h->host_results = o.result_slots;
  h->worker_results = worker_results;
  h->off_workers = off_workers;
  h->off_subs = off_subs;
  h->off_queues = off_queues;
  h->off_results = off_results;
  h->queue_stride = qstride;
  sub_rec *subs = (sub_rec *)((char *)h + off_subs);
  subs[0].result_base = 0;
  subs[0].nresults = o.result_slots;
  for (int i = 1; i < nsubs; i++) {
    subs[i].result_base = o.result_slots + (uint32_t)(i - 1) * worker_results;
    subs[i].nresults = worker_results;
  }

  p->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (p->evfd < 0) {
    st = suiro_set_errno("eventfd");
    goto fail;
  }
  h->evfd = p->evfd;
  st = pool_attach(p, r, 0);
  if (st != SUIRO_OK) goto fail;

  p->opts = o;
  p->exe = dupstr(o.exe);
  p->argv = dupvec(o.argv);
  p->env = dupvec(o.env);
  p->opts.exe = NULL;
  p->opts.argv = NULL;
  p->opts.env = NULL;
  p->opts.env_keep = NULL;
  if (o.env_keep) { /* keep a private copy: stored in opts as a vector we own */
    char **keep = dupvec(o.env_keep);
    p->opts.env_keep = (const char *const *)keep;
  }
  if (!p->exe) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) {
      st = suiro_set_errno("readlink /proc/self/exe");
      goto fail;
    }
    buf[n] = 0;
    p->exe = strdup(buf);
  }

  hosts_add(p);
  st = peer_start_monitor(p);
  if (st != SUIRO_OK) goto fail;
  for (int i = 0; i < o.workers; i++) {
    pthread_mutex_lock(&p->lock);
    st = peer_spawn(p, i);
    pthread_mutex_unlock(&p->lock);
    if (st != SUIRO_OK) goto fail;
  }
  if (o.workers > 0 && o.start_timeout > 0) {
    st = wait_workers_ready(p, 0, o.workers, o.start_timeout);
    if (st != SUIRO_OK) goto fail;
  }
  *out = p;
  return SUIRO_OK;

fail: {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", suiro_last_error());
    suiro_pool_stop(p, 0.5);
    return suiro_set_error(st == SUIRO_OK ? SUIRO_ERR : st, "%s", msg);
  }
}

const char *suiro_pool_name(const suiro_pool *p) {
  int s = handle_state(p, HANDLE_POOL);
  if (s != HS_OK && s != HS_FOREIGN) { /* an inherited pool still has its name */
    handle_check(p, HANDLE_POOL, "suiro_pool_name");
    return NULL;
  }
  return suiro_region_name(p->region);
}

int suiro_pool_inherited(const suiro_pool *p) { return handle_state(p, HANDLE_POOL) == HS_FOREIGN ? p->live.pid : 0; }

/* Waits until workers in [from, to) have attached, or one of them died trying. */
static suiro_status wait_workers_ready(suiro_pool *p, int from, int to, double timeout) {
  uint64_t deadline = deadline_from(timeout);
  pool_hdr *h = p->hdr;
  for (;;) {
    uint32_t seq = ld_acq(&h->state_seq);
    int ready = 1;
    for (int i = from; i < to; i++) {
      int s = ld_acq(&p->workers[i].state);
      if (s == SUIRO_WORKER_STARTING) ready = 0;
      else if (s == SUIRO_WORKER_DEAD || s == SUIRO_WORKER_EXITED || s == SUIRO_WORKER_EMPTY) {
        char why[160];
        pthread_mutex_lock(&p->lock);
        snprintf(why, sizeof why, "%s", p->exit_reported[i] ? "it exited before attaching" : "it died");
        pthread_mutex_unlock(&p->lock);
        return suiro_set_error(SUIRO_PEER_GONE,
                               "worker %d failed to start (%s %s): %s; check the worker command",
                               i, p->exe, p->argv && p->argv[0] ? p->argv[0] : "", why);
      }
    }
    if (ready) return SUIRO_OK;
    if (suiro_ns() >= deadline)
      return suiro_set_error(SUIRO_TIMEOUT, "workers did not attach within %.3g s", timeout);
    park_wait(&h->state_seq, seq, deadline);
  }
}

/* A task that will never run: channel endpoints in its argument are revoked (suiro_chan_revoke:
 * back to this process's handle, or dropped), so none stays between owners with its names in
 * /dev/shm. The entry is claimed by the caller. */
void pool_revoke_entry(const taskq_entry *e); /* peer.c too */
void pool_revoke_entry(const taskq_entry *e) {
  if (!(e->flags & TQ_SPILLED)) {
    suiro_chan_revoke_refs(e + 1, e->len);
    return;
  }
  char name[SUIRO_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)(e + 1));
  suiro_buf *b;
  if (suiro_buf_open(name, e->len, &b) != SUIRO_OK) return;
  suiro_chan_revoke_refs(suiro_buf_data(b), e->len);
  suiro_buf_unref(b);
}

/* Stopping: whatever is still queued will never run. */
static void revoke_queued(suiro_pool *p) {
  if (!p->hdr || !p->queues) return;
  for (int qi = 0; qi < p->hdr->nsubs; qi++) {
    const taskq_view *q = &p->queues[qi];
    uint64_t pos;
    taskq_entry *e;
    while ((e = taskq_claim(q, MONITOR_CLAIMER, &pos)) != NULL) {
      pool_revoke_entry(e);
      taskq_release(q, e, pos);
    }
  }
}

suiro_status suiro_pool_stop(suiro_pool *p, double timeout) {
  if (!p) return SUIRO_OK;
  /* A stale (stopped) handle, or one inherited across fork, is refused without touching anything:
   * the inherited pool's workers, names and rings are the parent's. */
  POOL_GUARD(p, "suiro_pool_stop", SUIRO_ERR);
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "suiro_pool_stop: a worker cannot stop its pool");
  pool_hdr *h = p->hdr;
  if (h) {
    atomic_store(&h->closing, 1);
    pool_wake_all(p);
    uint64_t deadline = deadline_from(timeout);
    /* Wait for workers to leave; the monitor records each exit. */
    for (;;) {
      uint32_t seq = ld_acq(&h->state_seq);
      if (ld_acq(&h->live) <= 0) break;
      if (suiro_ns() >= deadline) break;
      park_wait(&h->state_seq, seq, deadline);
    }
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < h->max_workers; i++) {
      int pid = ld_rlx(&p->workers[i].pid);
      if (p->watchfds[i] >= 0 && pid > 0) kill(pid, SIGKILL);
    }
    pthread_mutex_unlock(&p->lock);
    /* Killed workers are reaped by the monitor; give it a moment, bounded. */
    uint64_t kill_deadline = suiro_ns() + 2000000000ull;
    for (;;) {
      uint32_t seq = ld_acq(&h->state_seq);
      if (ld_acq(&h->live) <= 0 || suiro_ns() >= kill_deadline) break;
      park_wait(&h->state_seq, seq, kill_deadline);
    }
  }
  peer_stop_monitor(p);
  revoke_queued(p);
  map_pool_stopped(p);
  hosts_remove(p);
  if (p->region) {
    int last = atomic_fetch_sub(&live_host_pools, 1) == 1;
    buf_pool_stopped(suiro_region_name(p->region), last);
    /* Spill regions ('s') and blobs ('b') of this pool carry its name as a prefix. */
    char prefix[SUIRO_NAME_MAX + 2];
    snprintf(prefix, sizeof prefix, "%ss", suiro_region_name(p->region) + 1);
    region_unlink_prefix(prefix);
    snprintf(prefix, sizeof prefix, "%sb", suiro_region_name(p->region) + 1);
    region_unlink_prefix(prefix);
    suiro_region_close(p->region, 1);
    p->region = NULL;
  }
  if (p->evfd >= 0) close(p->evfd);
  pool_detach(p);
  free(p->exe);
  freevec(p->argv);
  freevec(p->env);
  freevec((char **)p->opts.env_keep);
  pthread_mutex_destroy(&p->lock);
  handle_retire(p, sizeof *p); /* a later use reads a dead word (handle.c) */
  return SUIRO_OK;
}

/* ---- status ------------------------------------------------------------------------------- */

const char *suiro_worker_state_name(int s) {
  switch (s) {
  case SUIRO_WORKER_EMPTY: return "empty";
  case SUIRO_WORKER_STARTING: return "starting";
  case SUIRO_WORKER_IDLE: return "idle";
  case SUIRO_WORKER_BUSY: return "busy";
  case SUIRO_WORKER_RETIRING: return "retiring";
  case SUIRO_WORKER_EXITED: return "exited";
  case SUIRO_WORKER_DEAD: return "dead";
  }
  return "unknown";
}

int suiro_pool_status(suiro_pool *p, suiro_pool_stats *stats, suiro_worker_info *w, int cap) {
  if (stats) memset(stats, 0, sizeof *stats);
  POOL_GUARD(p, "suiro_pool_status", -1);
  if (cap < 0 || (cap > 0 && !w)) {
    suiro_set_error(SUIRO_ERR, "suiro_pool_status: cap must be >= 0 with room for cap records, got %d", cap);
    return -1;
  }
  pool_hdr *h = p->hdr;
  suiro_pool_stats s;
  memset(&s, 0, sizeof s);
  s.max_workers = h->max_workers;
  int n = 0;
  for (int i = 0; i < h->max_workers; i++) {
    worker_rec *r = &p->workers[i];
    int state = ld_acq(&r->state);
    if (state == SUIRO_WORKER_EMPTY) continue;
    if (state == SUIRO_WORKER_STARTING || state == SUIRO_WORKER_IDLE || state == SUIRO_WORKER_BUSY ||
        state == SUIRO_WORKER_RETIRING)
      s.workers++;
    uint64_t tasks = ld_rlx(&r->tasks), steals = ld_rlx(&r->steals), parks = ld_rlx(&r->parks);
    uint64_t moves = ld_rlx(&r->moves);
    s.tasks += tasks;
    s.steals += steals;
    s.parks += parks;
    s.moves += moves;
    if (w && n < cap) {
      w[n].slot = i;
      w[n].pid = ld_rlx(&r->pid);
      w[n].state = state;
      w[n].tasks = tasks;
      w[n].steals = steals;
      w[n].parks = parks;
      w[n].moves = moves;
      w[n].parked = (int)((ld_rlx(&h->parked_mask) >> i) & 1);
      n++;
    }
  }
  s.submitted = p->submitted;
  s.collected = p->collected;
  s.host_parks = p->host_parks;
  s.deaths = ld_rlx(&h->deaths);
  s.respawns = ld_rlx(&h->respawns);
  s.wakes = ld_rlx(&h->wakes);
  if (stats) *stats = s;
  return n;
}

suiro_status suiro_pool_spawn_workers(suiro_pool *p, int n) {
  POOL_GUARD(p, "suiro_pool_spawn_workers", SUIRO_ERR);
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "spawn_workers: only the host can grow its pool");
  if (n <= 0) return suiro_set_error(SUIRO_ERR, "spawn_workers: n must be positive, got %d", n);
  if (ld_rlx(&p->hdr->closing)) return suiro_set_error(SUIRO_CLOSED, "spawn_workers: the pool is stopping");
  int spawned = 0, first = -1, last = -1;
  suiro_status st = SUIRO_OK;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->hdr->max_workers && spawned < n; i++) {
    int s = ld_acq(&p->workers[i].state);
    if (p->watchfds[i] >= 0) continue; /* still running or not yet reaped */
    if (s != SUIRO_WORKER_EMPTY && s != SUIRO_WORKER_EXITED && s != SUIRO_WORKER_DEAD) continue;
    st = peer_spawn(p, i);
    if (st != SUIRO_OK) break;
    if (first < 0) first = i;
    last = i;
    spawned++;
  }
  pthread_mutex_unlock(&p->lock);
  if (st != SUIRO_OK) return st;
  if (spawned < n)
    return suiro_set_error(SUIRO_FULL, "spawn_workers: only %d of %d workers fit (max_workers = %d)", spawned, n,
                           p->hdr->max_workers);
  if (p->opts.start_timeout > 0) return wait_workers_ready(p, first, last + 1, p->opts.start_timeout);
  return SUIRO_OK;
}

suiro_status suiro_pool_retire(suiro_pool *p, int slot, double timeout) {
  POOL_GUARD(p, "suiro_pool_retire", SUIRO_ERR);
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "retire: only the host can shrink its pool");
  if (slot < 0 || slot >= p->hdr->max_workers)
    return suiro_set_error(SUIRO_ERR, "retire: slot must be in 0..%d, got %d", p->hdr->max_workers - 1, slot);
  worker_rec *r = &p->workers[slot];
  int s = ld_acq(&r->state);
  if (s != SUIRO_WORKER_IDLE && s != SUIRO_WORKER_BUSY && s != SUIRO_WORKER_STARTING)
    return suiro_set_error(SUIRO_ERR, "retire: worker %d is %s", slot, suiro_worker_state_name(s));
  atomic_store(&r->retire, 1);
  pool_wake_all(p);
  uint64_t deadline = deadline_from(timeout);
  for (;;) {
    uint32_t seq = ld_acq(&p->hdr->state_seq);
    pthread_mutex_lock(&p->lock);
    int gone = p->watchfds[slot] < 0;
    pthread_mutex_unlock(&p->lock);
    if (gone) return SUIRO_OK;
    if (suiro_ns() >= deadline)
      return suiro_set_error(SUIRO_TIMEOUT, "retire: worker %d is still running its task", slot);
    park_wait(&p->hdr->state_seq, seq, deadline);
  }
}
