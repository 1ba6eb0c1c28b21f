/*
 * pool.c — pools: layout, submit, collect, cancel, status (host and nested submitters).
 *
 * Layout of the pool region (pool.h): header, worker records, submitter records, one task queue
 * per submitter (taskq.c), then result slots partitioned by submitter. There is no dispatcher:
 * a submitter writes a task into its own queue and workers claim it.
 *
 * Ownership
 *   - A submitter's queue has one producer: the submitter. Its result slots are allocated and
 *     freed only by that submitter (a private free stack), so allocation needs no atomics.
 *   - A result slot's state word arbitrates everything else: the submitter stores PENDING(gen)
 *     before publishing the task; the worker that claims the task CASes PENDING -> RUNNING(gen, w)
 *     (a cancel CASes PENDING -> CANCELLED, so exactly one of the two wins); only the RUNNING
 *     worker writes the slot's data, then stores the terminal state with release. After a worker
 *     dies, the host's monitor (peer.c) CASes its PENDING/RUNNING slots to DIED.
 *
 * Memory ordering
 *   - PENDING store (relaxed) precedes the queue entry's READY release store; the claimer's
 *     acquire on the entry therefore sees PENDING.
 *   - Result data is written before the terminal state (release); the collector loads the state
 *     with acquire before reading data.
 *   - Wake-ups use the announce / re-check / park protocol of park.c: waiters announce with a
 *     seq_cst RMW, wakers issue a seq_cst fence after publishing and only then read the announce
 *     word. No system call happens unless somebody sleeps.
 */
#include "pool.h"
#include "suiro_bind.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PAGE 4096u

static _Atomic int live_host_pools; /* pools this process created and has not stopped */

int pool_live_host_pools(void) { return atomic_load(&live_host_pools); }

/* This process's live host pools, for the recycle list (region.c finds a region's pool by name). */
static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static suiro_pool *hosts[64];

/* At exit (os.exit, exit() from any thread), whatever this process still hosts goes: its workers
 * are killed and every name it owns is removed. Signals that kill the process skip this; then
 * its workers remove what it left (worker.c, watch_host). */
static void pools_at_exit(void) {
  pthread_mutex_lock(&hosts_lock);
  int any = 0;
  for (int i = 0; i < 64; i++) {
    suiro_pool *p = hosts[i];
    if (!p || !p->hdr || p->hdr->host_pid != getpid()) continue; /* a forked child hosts nothing */
    any = 1;
    atomic_store(&p->hdr->closing, 1);
    for (int w = 0; w < p->hdr->max_workers; w++) {
      int pid = ld_rlx(&p->workers[w].pid);
      if (pid > 0 && p->pidfds[w] >= 0) kill(pid, SIGKILL);
    }
  }
  pthread_mutex_unlock(&hosts_lock);
  if (!any) return;
  int pid;
  uint64_t start;
  shm_self_identity(&pid, &start);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "suiro_%x_%llx_", (unsigned)pid, (unsigned long long)start);
  shm_unlink_prefix(prefix);
}

static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;
static void register_at_exit(void) { atexit(pools_at_exit); }

static void hosts_add(suiro_pool *p) {
  pthread_once(&at_exit_once, register_at_exit);
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < 64; i++)
    if (!hosts[i]) {
      hosts[i] = p;
      break;
    }
  pthread_mutex_unlock(&hosts_lock);
}

static void hosts_remove(suiro_pool *p) {
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < 64; i++)
    if (hosts[i] == p) hosts[i] = NULL;
  pthread_mutex_unlock(&hosts_lock);
}

static int recycle_push_to(pool_hdr *h, const char *name, uint64_t capacity) {
  for (int i = 0; i < POOL_RECYCLE; i++) {
    recycle_slot *r = &h->recycle[i];
    uint32_t zero = 0;
    if (ld_rlx(&r->state) != 0 || !atomic_compare_exchange_strong(&r->state, &zero, 2)) continue;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->capacity = capacity;
    st_rel(&r->state, 1);
    return 1;
  }
  return 0;
}

static int recycle_pop_from(pool_hdr *h, size_t bytes, char *name_out, uint64_t *capacity) {
  for (int i = 0; i < POOL_RECYCLE; i++) {
    recycle_slot *r = &h->recycle[i];
    if (ld_acq(&r->state) != 1 || r->capacity < bytes || r->capacity / 2 > bytes + ((uint64_t)64 << 10)) continue;
    uint32_t one = 1;
    if (!atomic_compare_exchange_strong(&r->state, &one, 2)) continue;
    memcpy(name_out, r->name, SUIRO_NAME_MAX);
    *capacity = r->capacity;
    st_rel(&r->state, 0);
    return 1;
  }
  return 0;
}

int pool_recycle_push(const char *region_name, uint64_t capacity) {
  suiro_pool *cur = suiro_current_pool();
  if (cur) return recycle_push_to(cur->hdr, region_name, capacity);
  int done = 0;
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < 64 && !done; i++) {
    if (!hosts[i] || !hosts[i]->region) continue;
    const char *pn = suiro_region_name(hosts[i]->region);
    size_t pl = strlen(pn);
    if (strncmp(region_name, pn, pl) == 0 && region_name[pl] == 'd') done = recycle_push_to(hosts[i]->hdr, region_name, capacity);
  }
  pthread_mutex_unlock(&hosts_lock);
  return done;
}

int pool_recycle_pop(size_t bytes, char *name_out, uint64_t *capacity) {
  suiro_pool *cur = suiro_current_pool();
  if (cur) return recycle_pop_from(cur->hdr, bytes, name_out, capacity);
  int done = 0;
  pthread_mutex_lock(&hosts_lock);
  for (int i = 0; i < 64 && !done; i++)
    if (hosts[i] && hosts[i]->hdr) done = recycle_pop_from(hosts[i]->hdr, bytes, name_out, capacity);
  pthread_mutex_unlock(&hosts_lock);
  return done;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }

void suiro_pool_opts_init(suiro_pool_opts *o) {
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

suiro_status pool_map(suiro_pool *p, suiro_region *r, int sub) {
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
  p->tail = ld_rlx(&p->queues[sub].q->tail);
  p->collect_spin.gap_ns = 2000;
  return SUIRO_OK;
}

void pool_unmap(suiro_pool *p) {
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
  p->evfd = -1;
  p->monitor_ctl = -1;
  p->epfd = -1;
  p->worker_slot = -1;
  p->is_host = 1;
  for (int i = 0; i < POOL_MAX_WORKERS; i++) p->pidfds[i] = -1;
  pthread_mutex_init(&p->lock, NULL);

  int pid;
  uint64_t start;
  shm_self_identity(&pid, &start);
  suiro_region *r;
  suiro_status st = shm_create_owned(size, pid, start, "", &r);
  if (st != SUIRO_OK) {
    free(p);
    return st;
  }
  p->region = r; /* from here on a failure goes through suiro_pool_stop */
  atomic_fetch_add(&live_host_pools, 1);
  pool_hdr *h = suiro_region_addr(r);
  h->magic = POOL_MAGIC;
  h->version = POOL_VERSION;
  h->hdr_size = sizeof(pool_hdr);
  h->size = size;
  h->host_pid = pid;
  h->host_start = start;
  h->ncpu = suiro_ncpu();
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
  st = pool_map(p, r, 0);
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

const char *suiro_pool_name(const suiro_pool *p) { return suiro_region_name(p->region); }

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

suiro_status suiro_pool_stop(suiro_pool *p, double timeout) {
  if (!p) return SUIRO_OK;
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
      if (p->pidfds[i] >= 0 && pid > 0) kill(pid, SIGKILL);
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
  map_pool_stopped(p);
  hosts_remove(p);
  if (p->region) {
    int last = atomic_fetch_sub(&live_host_pools, 1) == 1;
    region_pool_stopped(suiro_region_name(p->region), last);
    /* Spill regions ('s') and blobs ('b') of this pool carry its name as a prefix. */
    char prefix[SUIRO_NAME_MAX + 2];
    snprintf(prefix, sizeof prefix, "%ss", suiro_region_name(p->region) + 1);
    shm_unlink_prefix(prefix);
    snprintf(prefix, sizeof prefix, "%sb", suiro_region_name(p->region) + 1);
    shm_unlink_prefix(prefix);
    suiro_region_close(p->region, 1);
    p->region = NULL;
  }
  if (p->evfd >= 0) close(p->evfd);
  pool_unmap(p);
  free(p->exe);
  freevec(p->argv);
  freevec(p->env);
  freevec((char **)p->opts.env_keep);
  pthread_mutex_destroy(&p->lock);
  free(p);
  return SUIRO_OK;
}

/* ---- waking ------------------------------------------------------------------------------- */

void pool_wake_all(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  for (int w = 0; w < h->max_workers; w++) {
    atomic_fetch_add_explicit(&p->workers[w].park, 1, memory_order_release);
    park_wake(&p->workers[w].park, -1);
  }
}

/* Directed wake: take a worker off the parked set (the CAS-free fetch_and tells whether it was
 * still there), count it as waking until it runs, bump its own word and wake it. */
int pool_wake_one(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  uint64_t m = ld_acq(&h->parked_mask);
  while (m) {
    int w = __builtin_ctzll(m);
    uint64_t bit = 1ull << w;
    uint64_t old = atomic_fetch_and(&h->parked_mask, ~bit);
    if (old & bit) {
      atomic_fetch_or(&h->waking_mask, bit);
      atomic_fetch_add(&h->wakes, 1);
      atomic_fetch_add_explicit(&p->workers[w].park, 1, memory_order_release);
      park_wake(&p->workers[w].park, 1);
      return 1;
    }
    m = old & ~bit;
  }
  return 0;
}

/* Wake policy, after tasks were published into queue q (producer position `tail`):
 *   - nobody parked: nothing to do (no system call, one load);
 *   - idle spinners and workers already being woken cover the backlog: nothing;
 *   - as many workers awake as CPUs: waking more would only time-slice them against each other,
 *     so the host's monitor is asked to watch instead; it wakes a sleeper when the awake workers
 *     stop making progress (tasks that block or run long), see pool_backlog_tick;
 *   - else wake one parked worker. A woken worker that finds more queued work repeats the
 *     decision (chain wake), so a burst ramps up one wake at a time, never a thundering herd.
 * Lost wake-ups are impossible: a worker announces itself in parked_mask (seq_cst RMW) before
 * its last look at the queues, and a publisher fences before reading parked_mask. */
static void request_monitor(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  if (ld_rlx(&h->monitor_ticking)) return;
  uint32_t zero = 0;
  if (!atomic_compare_exchange_strong(&h->monitor_ticking, &zero, 1)) return;
  uint64_t one = 1;
  ssize_t w = write(p->monitor_ctl, &one, sizeof one);
  (void)w;
}

void pool_maybe_wake(suiro_pool *p, const taskq_view *q, uint64_t tail) {
  pool_hdr *h = p->hdr;
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t parked = ld_rlx(&h->parked_mask);
  if (SUIRO_LIKELY(parked == 0)) return;
  int waking = __builtin_popcountll(ld_rlx(&h->waking_mask));
  if (pool_awake(h) + waking >= h->ncpu) {
    if (p->is_host && !ld_rlx(&h->monitor_ticking)) request_monitor(p);
    return;
  }
  int64_t backlog = (int64_t)(tail - ld_rlx(&q->q->head));
  if (backlog <= (int64_t)ld_rlx(&h->idle_spinners) + waking) return; /* they will find it */
  if (pool_wake_one(p)) p->woke_at = suiro_ns();
}

/* Is the process sleeping or waiting (not running or runnable)? */
static int proc_blocked(int pid) {
  if (pid <= 0) return 0;
  char path[48], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && (rp[2] == 'S' || rp[2] == 'D');
}

int pool_backlog_tick(suiro_pool *p, uint64_t *last_tasks) {
  pool_hdr *h = p->hdr;
  int64_t backlog = 0;
  for (int i = 0; i < h->nsubs; i++) {
    const taskq_view *q = &p->queues[i];
    if (taskq_maybe_ready(q)) backlog += (int64_t)(ld_rlx(&q->q->tail) + 1 - ld_rlx(&q->q->head));
  }
  if (backlog <= 0 || ld_rlx(&h->parked_mask) == 0 || ld_acq(&h->closing)) {
    st_rlx(&h->monitor_ticking, 0);
    return 0;
  }
  /* A worker busy on the same task since the last tick is either blocked (sleeping, waiting for
   * I/O) or merely preempted. Only a blocked one frees its CPU, so only it makes room for another
   * worker; the kernel tells which (the state letter in /proc/<pid>/stat). */
  int stuck = 0;
  for (int i = 0; i < h->max_workers; i++) {
    uint64_t t = ld_rlx(&p->workers[i].tasks);
    if (ld_rlx(&p->workers[i].state) == SUIRO_WORKER_BUSY && t == last_tasks[i] &&
        proc_blocked(ld_rlx(&p->workers[i].pid)))
      stuck++;
    last_tasks[i] = t;
  }
  if (ld_rlx(&h->waking_mask) == 0 && pool_awake(h) - stuck < h->ncpu) pool_wake_one(p);
  return 1;
}

void pool_notify_result(suiro_pool *p, int sub) {
  sub_rec *s = &p->subs[sub];
  atomic_thread_fence(memory_order_seq_cst);
  if (ld_rlx(&s->waiting)) {
    atomic_fetch_add_explicit(&s->result_seq, 1, memory_order_release);
    park_wake(&s->result_seq, -1);
  }
  if (sub == 0 && ld_rlx(&s->ev_armed) &&
      atomic_exchange_explicit(&s->ev_armed, 0, memory_order_acq_rel)) {
    uint64_t one = 1;
    ssize_t w = write(p->hdr->evfd, &one, sizeof one);
    (void)w;
  }
}

/* ---- submitting --------------------------------------------------------------------------- */

static void reclaim_released(suiro_pool *p) {
  sub_rec *s = &p->subs[p->sub];
  for (uint32_t i = 0; i < s->nresults && p->nreleased; i++) {
    if (p->outstanding[i] != 2) continue;
    result_slot *r = pool_result(p, s->result_base + i);
    uint64_t st = ld_acq(&r->state);
    if (!rs_terminal(rs_kind(st))) continue;
    if (r->flags & RSF_SPILLED) {
      char name[SUIRO_NAME_MAX];
      snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)result_data(r));
      spill_discard(name);
    }
    p->gen[i] = rs_gen(st);
    p->outstanding[i] = 0;
    p->nreleased--;
    p->free_stack[p->nfree++] = i;
  }
}

static inline int alloc_slot(suiro_pool *p, uint32_t *local) {
  if (SUIRO_UNLIKELY(p->nfree == 0)) {
    sub_rec *s = &p->subs[p->sub];
    if (p->fresh < s->nresults) {
      *local = p->fresh++;
      st_rlx(&s->hiwater, p->fresh);
      return 0;
    }
    if (p->nreleased) reclaim_released(p);
    if (p->nfree == 0) return -1;
  }
  *local = p->free_stack[--p->nfree];
  return 0;
}

uint32_t suiro_free_slots(suiro_pool *p, uint32_t *total) {
  uint32_t n = p->subs[p->sub].nresults;
  if (total) *total = n;
  return p->nfree + (n - p->fresh);
}

static inline void free_slot(suiro_pool *p, uint32_t local) {
  p->outstanding[local] = 0;
  p->free_stack[p->nfree++] = local;
}

/* ---- interrupts: a host's waits end early when its face says so (Ctrl-C, a signal) ------- */

static int (*interrupt_check)(void *ud);
static void *interrupt_ud;

void suiro_set_interrupt_check(int (*check)(void *ud), void *ud) {
  interrupt_check = check;
  interrupt_ud = ud;
}

/* Asked after every sleep of a host's wait (a slice of at most 100 ms, cut short by signals). */
static inline int interrupted(const suiro_pool *p) {
  return p->is_host && interrupt_check && interrupt_check(interrupt_ud);
}

/* Sleeps until a result for this submitter lands (or the deadline/slice passes). */
static void park_for_results(suiro_pool *p, uint64_t deadline, int (*ready)(void *), void *ctx) {
  sub_rec *s = &p->subs[p->sub];
  atomic_exchange(&s->waiting, 1); /* seq_cst RMW: the announce */
  uint32_t seq = ld_acq(&s->result_seq);
  if (!ready(ctx) && !ld_acq(&p->hdr->closing)) {
    uint64_t slice = suiro_ns() + 100000000ull; /* re-check liveness every 100 ms */
    park_wait(&s->result_seq, seq, deadline < slice ? deadline : slice);
    if (p->is_host) p->host_parks++;
  }
  atomic_store_explicit(&s->waiting, 0, memory_order_relaxed);
}

struct slot_ready_ctx { suiro_pool *p; const taskq_view *q; uint64_t pos; };
static int queue_slot_free(void *c) {
  struct slot_ready_ctx *x = c;
  return taskq_reserve(x->q, x->pos) != NULL;
}

/* Every slot is taken: if some belong to released tasks still running, wait (up to the deadline)
 * for one of them to finish, then take its slot. Returns 0 with a slot, -1 without. */
static int released_finished(void *c) {
  suiro_pool *p = c;
  reclaim_released(p);
  return p->nfree > 0;
}
static int wait_released_slot(suiro_pool *p, uint32_t *local, uint64_t deadline) {
  while (p->nreleased) {
    if (released_finished(p)) return alloc_slot(p, local);
    if (suiro_ns() >= deadline || ld_acq(&p->hdr->closing)) return -1;
    park_for_results(p, deadline, released_finished, p);
    if (interrupted(p)) return -1;
  }
  return -1;
}

/* Reserves the producer's next queue entry, waiting up to the deadline for room. */
static taskq_entry *reserve_entry(suiro_pool *p, uint64_t deadline) {
  const taskq_view *q = &p->queues[p->sub];
  taskq_entry *e = taskq_reserve(q, p->tail);
  if (SUIRO_LIKELY(e != NULL)) return e;
  struct slot_ready_ctx c = { p, q, p->tail };
  uint64_t spin_until = suiro_ns() + 20000;
  for (;;) {
    if (ld_acq(&p->hdr->closing)) return NULL;
    if ((e = taskq_reserve(q, p->tail)) != NULL) return e;
    uint64_t now = suiro_ns();
    if (now >= deadline) return NULL;
    if (!p->is_host) {
      /* A worker whose own queue is full runs one of its queued tasks itself. */
      if (worker_claim_and_run(p, 1)) continue;
    }
    if (now < spin_until) {
      cpu_relax();
      continue;
    }
    /* Ring full: entries free up as workers claim tasks, and claimed tasks end in results, so
     * sleeping until the next result (bounded) cannot miss progress. */
    park_for_results(p, deadline, queue_slot_free, &c);
    if (interrupted(p)) return NULL;
  }
}

static suiro_status fill_entry(suiro_pool *p, taskq_entry *e, suiro_task t, uint64_t fn,
                               const void *arg, size_t len) {
  e->task = t;
  e->fn = fn;
  size_t cap = taskq_payload_cap(p->hdr->slot_size);
  unsigned char *payload = (unsigned char *)(e + 1);
  if (len <= cap) {
    if (len) memcpy(payload, arg, len);
    e->len = (uint32_t)len;
    e->flags = 0;
    return SUIRO_OK;
  }
  if (len > UINT32_MAX) return suiro_set_error(SUIRO_ERR, "submit: argument of %zu bytes is too large", len);
  suiro_status st = spill_write(p, arg, len, (char *)payload, cap);
  if (st != SUIRO_OK) return st;
  e->len = (uint32_t)len;
  e->flags = TQ_SPILLED;
  return SUIRO_OK;
}

static suiro_status check_open(suiro_pool *p, const char *verb) {
  if (SUIRO_UNLIKELY(!p)) return suiro_set_error(SUIRO_ERR, "%s: pool is NULL", verb);
  if (SUIRO_UNLIKELY(ld_rlx(&p->hdr->closing)))
    return suiro_set_error(SUIRO_CLOSED, "%s: the pool is stopping", verb);
  return SUIRO_OK;
}

suiro_status suiro_submit(suiro_pool *p, uint64_t fn, const void *arg, size_t len,
                          suiro_task *out, double timeout) {
  suiro_status st = check_open(p, "submit");
  if (st != SUIRO_OK) return st;
  uint32_t local;
  if (SUIRO_UNLIKELY(alloc_slot(p, &local) != 0) &&
      wait_released_slot(p, &local, timeout == 0 ? 0 : deadline_from(timeout)) != 0)
    return interrupted(p) ? suiro_set_error(SUIRO_ERR, "interrupted") : suiro_set_error(SUIRO_FULL, "submit: all %u result slots hold uncollected tasks; collect or release some",
                           p->subs[p->sub].nresults);
  sub_rec *s = &p->subs[p->sub];
  uint32_t rs = s->result_base + local;
  uint64_t gen = (p->gen[local] + 1) & GEN_MASK;
  if (gen == 0) gen = 1;
  suiro_task t = task_make(rs, gen);
  taskq_entry *e = reserve_entry(p, timeout == 0 ? 0 : deadline_from(timeout));
  if (SUIRO_UNLIKELY(!e)) {
    p->free_stack[p->nfree++] = local;
    if (ld_rlx(&p->hdr->closing)) return suiro_set_error(SUIRO_CLOSED, "submit: the pool is stopping");
    if (interrupted(p)) return suiro_set_error(SUIRO_ERR, "interrupted");
    return suiro_set_error(SUIRO_FULL, "submit: the task ring is full (%u tasks waiting)", p->hdr->ring_cap);
  }
  st = fill_entry(p, e, t, fn, arg, len);
  if (SUIRO_UNLIKELY(st != SUIRO_OK)) {
    p->free_stack[p->nfree++] = local;
    return st;
  }
  p->gen[local] = gen;
  p->outstanding[local] = 1;
  st_rlx(&pool_result(p, rs)->state, rs_state(gen, RS_NOWORKER, RS_PENDING));
  const taskq_view *q = &p->queues[p->sub];
  taskq_publish(q, e, p->tail);
  p->tail++;
  taskq_set_tail(q, p->tail);
  p->submitted++;
  pool_maybe_wake(p, q, p->tail);
  *out = t;
  return SUIRO_OK;
}

suiro_status suiro_submit_batch(suiro_pool *p, const suiro_task_spec *specs, size_t n,
                                suiro_task *out, size_t *accepted, double timeout) {
  size_t done = 0;
  if (accepted) *accepted = 0;
  suiro_status st = check_open(p, "submit_batch");
  if (st != SUIRO_OK) return st;
  const taskq_view *q = &p->queues[p->sub];
  sub_rec *s = &p->subs[p->sub];
  uint64_t deadline = timeout == 0 ? 0 : deadline_from(timeout);
  while (done < n) {
    /* Fill as many free entries as there are, then publish them with one wake decision. */
    size_t run = 0;
    while (done + run < n) {
      uint32_t local;
      taskq_entry *e = taskq_reserve(q, p->tail);
      if (!e) break;
      if (alloc_slot(p, &local) != 0) {
        if (run) break; /* count and announce the tasks of this run first, then wait with none pending */
        if (wait_released_slot(p, &local, deadline) != 0) {
          st = suiro_set_error(SUIRO_FULL, "submit_batch: all %u result slots hold uncollected tasks", s->nresults);
          goto out;
        }
      }
      const suiro_task_spec *sp = &specs[done + run];
      uint32_t rs = s->result_base + local;
      uint64_t gen = (p->gen[local] + 1) & GEN_MASK;
      if (gen == 0) gen = 1;
      suiro_task t = task_make(rs, gen);
      st = fill_entry(p, e, t, sp->fn, sp->arg, sp->len);
      if (st != SUIRO_OK) {
        p->free_stack[p->nfree++] = local;
        goto out;
      }
      p->gen[local] = gen;
      p->outstanding[local] = 1;
      st_rlx(&pool_result(p, rs)->state, rs_state(gen, RS_NOWORKER, RS_PENDING));
      taskq_publish(q, e, p->tail);
      p->tail++;
      out[done + run] = t;
      run++;
    }
    if (run) {
      done += run;
      if (accepted) *accepted = done;
      p->submitted += run;
      taskq_set_tail(q, p->tail);
      pool_maybe_wake(p, q, p->tail);
      continue;
    }
    /* Ring full: wait for room like a single submit would. */
    taskq_entry *e = reserve_entry(p, deadline);
    if (!e) {
      if (ld_rlx(&p->hdr->closing)) st = suiro_set_error(SUIRO_CLOSED, "submit_batch: the pool is stopping");
      else st = suiro_set_error(timeout == 0 ? SUIRO_FULL : SUIRO_TIMEOUT,
                                "submit_batch: the task ring stayed full; %zu of %zu tasks submitted", done, n);
      goto out;
    }
  }
out:
  if (accepted) *accepted = done;
  return done == n ? SUIRO_OK : st;
}

/* ---- collecting --------------------------------------------------------------------------- */

static suiro_status check_task(suiro_pool *p, suiro_task t, uint32_t *local, const char *verb) {
  sub_rec *s = &p->subs[p->sub];
  uint32_t rs = task_rs(t);
  if (SUIRO_UNLIKELY(rs < s->result_base || rs >= s->result_base + s->nresults))
    return suiro_set_error(SUIRO_ERR, "%s: task handle %#llx does not belong to this pool handle", verb,
                           (unsigned long long)t);
  uint32_t l = rs - s->result_base;
  if (SUIRO_UNLIKELY(p->outstanding[l] != 1 || p->gen[l] != task_gen(t)))
    return suiro_set_error(SUIRO_ERR, "%s: task handle %#llx is not outstanding (collected or released already)",
                           verb, (unsigned long long)t);
  *local = l;
  return SUIRO_OK;
}

static inline int is_done(uint64_t st, uint64_t gen) {
  return rs_gen(st) == gen && rs_terminal(rs_kind(st));
}

/* No worker can run this pending task: every worker is gone and none will come back. */
static int nobody_left(suiro_pool *p, uint64_t st) {
  if (ld_acq(&p->hdr->live) > 0) return 0;
  if (rs_kind(st) != RS_PENDING) return 0;
  if (p->is_host && p->opts.respawn) return 0;
  return 1;
}

static int ensure_scratch(suiro_pool *p, size_t n) {
  if (n <= p->scratch_cap) return 0;
  size_t cap = p->scratch_cap ? p->scratch_cap : 256;
  while (cap < n) cap *= 2;
  unsigned char *b = realloc(p->scratch, cap);
  if (!b) return -1;
  p->scratch = b;
  p->scratch_cap = cap;
  return 0;
}

/* A result that crossed in a region: a value is read where it is, until the next collect; an
 * error message is copied out (and NUL-terminated like the inline ones). */
static __attribute__((noinline, cold)) suiro_status take_spilled(suiro_pool *p, result_slot *r, int in_place,
                                                                size_t len, const void **data) {
  char name[SUIRO_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)result_data(r));
  r->flags = 0;
  if (in_place) {
    suiro_status st = suiro_buf_open(name, len, &p->held);
    if (st != SUIRO_OK) {
      p->held = NULL;
      return st;
    }
    *data = suiro_buf_data(p->held);
    return SUIRO_OK;
  }
  if (ensure_scratch(p, len + 1) != 0) {
    spill_discard(name);
    return suiro_set_error(SUIRO_ERR, "collect: out of memory for %zu bytes", len);
  }
  suiro_status st = spill_read(name, len, p->scratch);
  if (st != SUIRO_OK) return st;
  p->scratch[len] = 0;
  *data = p->scratch;
  return SUIRO_OK;
}

static suiro_status take_result(suiro_pool *p, uint32_t local, suiro_result *res) {
  sub_rec *s = &p->subs[p->sub];
  result_slot *r = pool_result(p, s->result_base + local);
  uint64_t st = ld_acq(&r->state);
  unsigned kind = rs_kind(st);
  size_t len = r->len;
  if (SUIRO_UNLIKELY(p->held != NULL)) { /* the previous collect's data is no longer promised */
    suiro_buf_unref(p->held);
    p->held = NULL;
  }
  const void *data;
  if (SUIRO_UNLIKELY(r->flags & RSF_SPILLED)) {
    suiro_status rst = take_spilled(p, r, kind == RS_VALUE, len, &data);
    if (rst != SUIRO_OK) {
      free_slot(p, local);
      return rst;
    }
  } else {
    if (SUIRO_UNLIKELY(ensure_scratch(p, len + 1) != 0))
      return suiro_set_error(SUIRO_ERR, "collect: out of memory for %zu bytes", len);
    if (len) memcpy(p->scratch, result_data(r), len);
    p->scratch[len] = 0; /* messages are handy as C strings */
    data = p->scratch;
  }
  switch (kind) {
  case RS_VALUE: res->kind = SUIRO_RESULT_VALUE; break;
  case RS_ERROR: res->kind = SUIRO_RESULT_ERROR; break;
  case RS_DIED: res->kind = SUIRO_RESULT_DIED; break;
  default: res->kind = SUIRO_RESULT_CANCELLED; break;
  }
  res->data = data;
  res->len = len;
  res->worker_slot = rs_worker(st) == RS_NOWORKER ? -1 : (int)rs_worker(st);
  res->worker_pid = r->pid;
  p->gen[local] = rs_gen(st);
  free_slot(p, local);
  p->collected++;
  return SUIRO_OK;
}

struct done_ctx { suiro_pool *p; const uint32_t *locals; const uint64_t *gens; size_t n; size_t *which; };
static int any_done(void *c) {
  struct done_ctx *x = c;
  sub_rec *s = &x->p->subs[x->p->sub];
  for (size_t i = 0; i < x->n; i++) {
    if (x->locals[i] == UINT32_MAX) continue;
    uint64_t st = ld_acq(&pool_result(x->p, s->result_base + x->locals[i])->state);
    if (is_done(st, x->gens[i])) {
      if (x->which) *x->which = i;
      return 1;
    }
  }
  return 0;
}

/* Waits until one of the tasks is done (ctx->which tells which). */
static suiro_status wait_any(suiro_pool *p, struct done_ctx *c, uint64_t deadline) {
  if (any_done(c)) return SUIRO_OK;
  if (deadline == 0) return SUIRO_TIMEOUT;
  pool_hdr *h = p->hdr;
  uint64_t t0 = suiro_ns();
  if (!p->is_host) {
    /* A worker waiting on nested results runs its own queued work meanwhile: this is what makes
     * nested fan-out deadlock-free even with one worker (worker.c explains why only its own). */
    for (;;) {
      if (any_done(c)) return SUIRO_OK;
      if (worker_claim_and_run(p, 1)) continue;
      uint64_t now = suiro_ns();
      if (now >= deadline) return SUIRO_TIMEOUT;
      if (ld_acq(&h->closing)) return suiro_set_error(SUIRO_CLOSED, "collect: the pool is stopping");
      uint64_t spin_end = now + spin_budget(&p->collect_spin);
      int spun = 0;
      if (spin_enter(&h->spinners, h->ncpu)) {
        while (suiro_ns() < spin_end) {
          for (int i = 0; i < 32; i++) cpu_relax();
          if (any_done(c)) { spin_leave(&h->spinners); spin_observe(&p->collect_spin, suiro_ns() - t0); return SUIRO_OK; }
          if (taskq_maybe_ready(&p->queues[p->sub])) break;
        }
        spin_leave(&h->spinners);
        spun = 1;
      }
      if (spun && suiro_ns() < spin_end) continue; /* left the spin because work showed up */
      park_for_results(p, deadline, any_done, c);
    }
  }
  /* Host: spin for the adaptive budget while spinning can pay, then park. Awake workers hold CPUs
   * too: spinning beside as many busy workers as there are CPUs would slow the very tasks we wait
   * for. Right after this handle woke a parked worker, the scheduler tends to put that worker on
   * our CPU (the waker's): the spin then yields the CPU instead of holding it, and after a long
   * quiet spell (the worker was deep asleep, the task will take a wake-up at least) we park at
   * once. */
  int woke = t0 - p->woke_at < 200000;
  if (!(woke && p->collect_spin.gap_ns > SPIN_CAP_NS) && pool_awake(h) < h->ncpu &&
      spin_enter(&h->spinners, h->ncpu)) {
    uint64_t spin_end = t0 + spin_budget(&p->collect_spin);
    int yield = woke;
    for (;;) {
      for (int i = 0; i < 8; i++) {
        if (any_done(c)) {
          spin_leave(&h->spinners);
          spin_observe(&p->collect_spin, suiro_ns() - t0);
          return SUIRO_OK;
        }
        if (SUIRO_UNLIKELY(yield)) sched_yield();
        else cpu_relax();
      }
      uint64_t now = suiro_ns();
      if (now >= spin_end || now >= deadline) break;
    }
    spin_leave(&h->spinners);
  }
  for (;;) {
    if (any_done(c)) break;
    uint64_t now = suiro_ns();
    if (now >= deadline) return SUIRO_TIMEOUT;
    if (ld_acq(&h->closing)) return suiro_set_error(SUIRO_CLOSED, "collect: the pool is stopping");
    int gone = 1;
    for (size_t i = 0; i < c->n && gone; i++) {
      if (c->locals[i] == UINT32_MAX) continue;
      uint64_t st = ld_acq(&pool_result(p, p->subs[p->sub].result_base + c->locals[i])->state);
      gone = nobody_left(p, st);
    }
    if (gone)
      return suiro_set_error(SUIRO_PEER_GONE, "collect: no live worker is left to run the task");
    park_for_results(p, deadline, any_done, c);
    if (interrupted(p) && !any_done(c)) return suiro_set_error(SUIRO_ERR, "interrupted");
  }
  spin_observe(&p->collect_spin, suiro_ns() - t0);
  return SUIRO_OK;
}

suiro_status suiro_collect(suiro_pool *p, suiro_task t, suiro_result *res, double timeout) {
  uint32_t local;
  suiro_status st = check_task(p, t, &local, "collect");
  if (st != SUIRO_OK) return st;
  uint64_t gen = task_gen(t);
  result_slot *r = pool_result(p, task_rs(t));
  if (SUIRO_LIKELY(is_done(ld_acq(&r->state), gen))) return take_result(p, local, res);
  struct done_ctx c = { p, &local, &gen, 1, NULL };
  st = wait_any(p, &c, timeout == 0 ? 0 : deadline_from(timeout));
  if (st != SUIRO_OK) {
    if (st == SUIRO_TIMEOUT) suiro_set_error(SUIRO_TIMEOUT, "collect: timed out");
    return st;
  }
  return take_result(p, local, res);
}

int suiro_task_ready(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "task_ready") != SUIRO_OK) return 0;
  return is_done(ld_acq(&pool_result(p, task_rs(t))->state), task_gen(t));
}

suiro_status suiro_collect_any(suiro_pool *p, const suiro_task *tasks, size_t n, size_t *index,
                               suiro_result *res, double timeout) {
  if (n == 0) return suiro_set_error(SUIRO_ERR, "collect_any: no tasks given");
  uint32_t stack_l[64];
  uint64_t stack_g[64];
  uint32_t *locals = n <= 64 ? stack_l : malloc(n * sizeof *locals);
  uint64_t *gens = n <= 64 ? stack_g : malloc(n * sizeof *gens);
  suiro_status st = SUIRO_OK;
  if (!locals || !gens) {
    st = suiro_set_error(SUIRO_ERR, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if ((st = check_task(p, tasks[i], &locals[i], "collect_any")) != SUIRO_OK) goto out;
    gens[i] = task_gen(tasks[i]);
  }
  size_t which = 0;
  struct done_ctx c = { p, locals, gens, n, &which };
  st = wait_any(p, &c, timeout == 0 ? 0 : deadline_from(timeout));
  if (st == SUIRO_OK) {
    *index = which;
    st = take_result(p, locals[which], res);
  } else if (st == SUIRO_TIMEOUT) {
    suiro_set_error(SUIRO_TIMEOUT, "collect_any: timed out");
  }
out:
  if (locals != stack_l) free(locals);
  if (gens != stack_g) free(gens);
  return st;
}

suiro_status suiro_wait_all(suiro_pool *p, const suiro_task *tasks, size_t n, double timeout) {
  uint64_t deadline = timeout == 0 ? 0 : deadline_from(timeout);
  sub_rec *s = &p->subs[p->sub];
  for (size_t i = 0; i < n; i++) {
    uint32_t local;
    suiro_status st = check_task(p, tasks[i], &local, "wait_all");
    if (st != SUIRO_OK) return st;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t local = task_rs(tasks[i]) - s->result_base;
    uint64_t gen = task_gen(tasks[i]);
    if (is_done(ld_acq(&pool_result(p, task_rs(tasks[i]))->state), gen)) continue;
    struct done_ctx c = { p, &local, &gen, 1, NULL };
    suiro_status st = wait_any(p, &c, deadline);
    if (st != SUIRO_OK) {
      if (st == SUIRO_TIMEOUT)
        suiro_set_error(SUIRO_TIMEOUT, "timed out with %zu of %zu tasks done", i, n);
      return st;
    }
  }
  return SUIRO_OK;
}

int suiro_task_kind(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "task_kind") != SUIRO_OK) return -1;
  uint64_t st = ld_acq(&pool_result(p, task_rs(t))->state);
  if (!is_done(st, task_gen(t))) return 0;
  switch (rs_kind(st)) {
  case RS_VALUE: return SUIRO_RESULT_VALUE;
  case RS_ERROR: return SUIRO_RESULT_ERROR;
  case RS_DIED: return SUIRO_RESULT_DIED;
  default: return SUIRO_RESULT_CANCELLED;
  }
}

suiro_status suiro_collect_all(suiro_pool *p, const suiro_task *tasks, size_t n,
                               suiro_sink_fn sink, void *ctx, double timeout) {
  /* First wait for every task (a timeout consumes nothing), then hand them over in order. */
  suiro_status st = suiro_wait_all(p, tasks, n, timeout);
  if (st != SUIRO_OK) {
    if (st == SUIRO_TIMEOUT) {
      char msg[200];
      snprintf(msg, sizeof msg, "collect_all: %s", suiro_last_error());
      suiro_set_error(SUIRO_TIMEOUT, "%s", msg);
    }
    return st;
  }
  sub_rec *s = &p->subs[p->sub];
  for (size_t i = 0; i < n; i++) {
    suiro_result res;
    st = take_result(p, task_rs(tasks[i]) - s->result_base, &res);
    if (st != SUIRO_OK) return st;
    if (sink && sink(ctx, i, &res) != 0)
      return suiro_set_error(SUIRO_ERR, "collect_all: the sink stopped at task %zu", i);
  }
  return SUIRO_OK;
}

int suiro_cancel(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "cancel") != SUIRO_OK) return 0;
  result_slot *r = pool_result(p, task_rs(t));
  uint64_t gen = task_gen(t);
  uint64_t expect = rs_state(gen, RS_NOWORKER, RS_PENDING);
  if (atomic_compare_exchange_strong(&r->state, &expect, rs_state(gen, RS_NOWORKER, RS_CANCELLED))) {
    r->len = 0;
    r->flags = 0;
    return 1;
  }
  /* Already running: tell the task (suiro_cancelled), which may stop early. */
  if (rs_gen(expect) == gen && rs_kind(expect) == RS_RUNNING) st_rlx(&r->cancel, gen);
  return 0;
}

suiro_status suiro_task_kill(suiro_pool *p, suiro_task t) {
  uint32_t local;
  suiro_status st = check_task(p, t, &local, "kill");
  if (st != SUIRO_OK) return st;
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "kill: only the host can kill its workers");
  if (suiro_cancel(p, t)) return SUIRO_OK; /* had not started: cancelled */
  result_slot *r = pool_result(p, task_rs(t));
  uint64_t gen = task_gen(t);
  pthread_mutex_lock(&p->lock); /* against the monitor: the worker's pid and slot stay put */
  uint64_t s = atomic_load(&r->state);
  if (rs_gen(s) == gen && rs_kind(s) == RS_RUNNING && rs_worker(s) < (unsigned)p->hdr->max_workers) {
    unsigned w = rs_worker(s);
    worker_rec *wr = &p->workers[w];
    atomic_store(&wr->doom, t); /* seq_cst, then the re-read below (see worker_claim_and_run) */
    s = atomic_load(&r->state);
    int pid = ld_rlx(&wr->pid);
    if (rs_gen(s) == gen && rs_kind(s) == RS_RUNNING && rs_worker(s) == w && p->pidfds[w] >= 0 && pid > 0) {
      p->killing[w] = t;
      kill(pid, SIGKILL);
    } else {
      atomic_store(&wr->doom, 0); /* it finished meanwhile: nothing to kill */
    }
  }
  pthread_mutex_unlock(&p->lock);
  return SUIRO_OK;
}

void suiro_task_release(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (!p || check_task(p, t, &local, "task_release") != SUIRO_OK) return;
  suiro_cancel(p, t); /* nobody wants the result: do not run it if it has not started */
  p->outstanding[local] = 2;
  p->nreleased++;
  if (p->nreleased > 64 && p->nreleased * 4 > p->subs[p->sub].nresults) reclaim_released(p);
}

/* ---- events ------------------------------------------------------------------------------- */

int suiro_pool_eventfd(suiro_pool *p) {
  if (!p->is_host) return -1;
  atomic_store(&p->subs[0].ev_armed, 1);
  return p->evfd;
}

void suiro_pool_event_ack(suiro_pool *p) {
  if (!p->is_host) return;
  uint64_t v;
  while (read(p->evfd, &v, sizeof v) == sizeof v) {
  }
  atomic_store(&p->subs[0].ev_armed, 1); /* seq_cst: re-armed before the caller polls results */
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
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "spawn_workers: only the host can grow its pool");
  if (n <= 0) return suiro_set_error(SUIRO_ERR, "spawn_workers: n must be positive, got %d", n);
  if (ld_rlx(&p->hdr->closing)) return suiro_set_error(SUIRO_CLOSED, "spawn_workers: the pool is stopping");
  int spawned = 0, first = -1, last = -1;
  suiro_status st = SUIRO_OK;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->hdr->max_workers && spawned < n; i++) {
    int s = ld_acq(&p->workers[i].state);
    if (p->pidfds[i] >= 0) continue; /* still running or not yet reaped */
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
    int gone = p->pidfds[slot] < 0;
    pthread_mutex_unlock(&p->lock);
    if (gone) return SUIRO_OK;
    if (suiro_ns() >= deadline)
      return suiro_set_error(SUIRO_TIMEOUT, "retire: worker %d is still running its task", slot);
    park_wait(&p->hdr->state_seq, seq, deadline);
  }
}

/* ---- waiting on several pools (suiro_bind.h, section 7) ---------------------------------- */

int suiro_wait_pools(suiro_pool *const *pools, size_t n, double timeout) {
  if (n > 256) return suiro_set_error(SUIRO_ERR, "wait_pools: at most 256 pools, got %zu", n), -1;
  struct pollfd fds[256];
  for (size_t i = 0; i < n; i++) {
    if (!pools[i] || !pools[i]->is_host) return suiro_set_error(SUIRO_ERR, "wait_pools: pool %zu is not a host handle", i + 1), -1;
    fds[i].fd = suiro_pool_eventfd(pools[i]); /* arms it */
    fds[i].events = POLLIN;
    fds[i].revents = 0;
  }
  /* a result that landed before the arming is visible now: the caller polls after we return */
  int ms = timeout < 0 ? -1 : timeout > 2e6 ? 2000000000 : (int)(timeout * 1000 + 0.999);
  int r = poll(fds, (nfds_t)n, ms);
  if (r < 0) return errno == EINTR ? 0 : (suiro_set_errno("wait_pools: poll"), -1);
  int hit = 0;
  for (size_t i = 0; i < n; i++)
    if (fds[i].revents & POLLIN) {
      suiro_pool_event_ack(pools[i]);
      hit++;
    }
  return hit;
}
