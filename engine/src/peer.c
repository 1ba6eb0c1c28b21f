/*
 * peer.c — starting workers and noticing their deaths (host side).
 *
 * Workers are started with posix_spawn (never fork-without-exec: the host may have threads or an
 * interpreter), in their own process group (a terminal's Ctrl-C goes to the host, which decides),
 * with a whitelisted environment. Each worker gets a pidfd; a monitor thread waits on all of them
 * with epoll, so a death is an OS event handled within microseconds, not a polling interval.
 * Where pidfd_open is missing (Linux before 5.3, valgrind, sandboxes that filter it) or
 * SUIRO_WATCH=pipe asks for it, each worker instead inherits the write end of a pipe of its own:
 * the kernel closes it when the worker ends, the monitor sees the hang-up and reaps by pid. The
 * pid is safe to use until then: the worker is our child and nobody reaped it yet.
 *
 * On a death the monitor, holding p->lock:
 *   1. fails exactly the tasks the worker held: queue entries CLAIMED by it and the tasks on its
 *      in-flight stack, by CASing their result slots PENDING/RUNNING(gen) -> DIED(gen);
 *   2. drains the dead worker's own queue (its nested submissions: nobody will collect them) and
 *      marks its pending result slots ORPHANED;
 *   3. wakes every submitter so collectors re-check, and respawns the slot if asked to.
 * These steps race with nobody who could write the same words: the dead process cannot, and
 * live claimers only CAS entries that are READY, never CLAIMED ones.
 *
 * Ordering: the dead process's stores are all visible (it is gone); the monitor's writes use the
 * same release/CAS discipline as workers (pool.c), so collectors need nothing special.
 */
#include "pool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static const char *default_keep[] = {
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
  "LD_LIBRARY_PATH", "LUA_PATH", "LUA_CPATH", "LUA_PATH_5_4", "LUA_CPATH_5_4", "PYTHONPATH",
  "PYTHONHOME", "R_HOME", "R_LIBS", "R_LIBS_USER", "R_LIBS_SITE", "OMP_NUM_THREADS",
  "OPENBLAS_NUM_THREADS", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS",
  /* where the workers of each language live: a worker's own pools start the ones its host would */
  "SUIRO_WORKER_EXE", "SUIRO_PY_WORKER", "SUIRO_R_LIBS", "SUIRO_SANITIZED", NULL
};

static int keep_var(const char *entry, const char *const *keep) {
  size_t n = strcspn(entry, "=");
  for (const char *const *k = keep; *k; k++)
    if (strlen(*k) == n && strncmp(entry, *k, n) == 0) return 1;
  return 0;
}

/* Every process of a family must agree where region files that do not fit /dev/shm live (their
 * names say only "in the fallback directory"): workers get the host's, whatever else they get. */
static char shm_dir_env[PATH_MAX + 16];
static void fill_shm_dir_env(void) {
  const char *d = region_fallback_dir();
  snprintf(shm_dir_env, sizeof shm_dir_env, "SUIRO_SHM_DIR=%s", *d ? d : "off");
}
static const char *shm_dir_entry(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill_shm_dir_env);
  return shm_dir_env;
}

static char **build_env(suiro_pool *p) {
  const char *const *keep = p->opts.env_keep ? p->opts.env_keep : default_keep;
  size_t n = 0, extra = 0;
  for (char **e = environ; e && *e; e++) n++;
  for (char **e = p->env; e && *e; e++) extra++;
  char **out = calloc(n + extra + 2, sizeof *out);
  if (!out) return NULL;
  size_t k = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "SUIRO_SHM_DIR=", 14) == 0) continue;
    if (!keep_var(*e, keep)) continue;
    /* an explicit entry overrides the inherited one */
    size_t len = strcspn(*e, "=");
    int overridden = 0;
    for (char **x = p->env; x && *x; x++)
      if (strncmp(*x, *e, len) == 0 && (*x)[len] == '=') overridden = 1;
    if (!overridden) out[k++] = *e;
  }
  for (char **x = p->env; x && *x; x++)
    if (strncmp(*x, "SUIRO_SHM_DIR=", 14) != 0) out[k++] = *x;
  out[k++] = (char *)shm_dir_entry();
  out[k] = NULL;
  return out;
}

/* Whether this process can watch workers with pidfds (decided once: the answer cannot change). */
static int pidfds_work(void) {
  static _Atomic int known = 0; /* 0: not yet asked, 1: yes, 2: no */
  int k = atomic_load(&known);
  if (k == 0) {
    const char *w = getenv("SUIRO_WATCH");
    int fd = w && strcmp(w, "pipe") == 0 ? -1 : (int)syscall(SYS_pidfd_open, getpid(), 0);
    k = fd >= 0 ? 1 : 2;
    if (fd >= 0) close(fd);
    atomic_store(&known, k);
  }
  return k == 1;
}

suiro_status peer_spawn(suiro_pool *p, int slot) {
  worker_rec *w = &p->workers[slot];
  uint32_t inc = ld_rlx(&w->incarnation) + 1;
  st_rlx(&w->incarnation, inc);
  st_rlx(&w->retire, 0);
  st_rlx(&w->doom, 0);
  st_rlx(&w->depth, 0);
  st_rlx(&w->pid, 0);
  st_rel(&w->state, SUIRO_WORKER_STARTING);
  p->exit_reported[slot] = 0;

  /* Without pidfds, the worker's end of its death pipe rides in the token (name:slot:inc:fd). */
  int death[2] = { -1, -1 };
  if (p->watch_by_pipe && pipe2(death, O_CLOEXEC) != 0) {
    st_rel(&w->state, SUIRO_WORKER_EMPTY);
    return suiro_set_error(SUIRO_ERR, "cannot watch worker %d: pipe: %s%s", slot, strerror(errno),
                           errno == EMFILE || errno == ENFILE ? " (raise the open-file limit, ulimit -n)" : "");
  }
  char token[SUIRO_NAME_MAX + 48];
  if (death[1] >= 0)
    snprintf(token, sizeof token, "%s:%d:%u:%d", suiro_region_name(p->region), slot, inc, death[1]);
  else
    snprintf(token, sizeof token, "%s:%d:%u", suiro_region_name(p->region), slot, inc);
  size_t nargs = 0;
  for (char **a = p->argv; a && *a; a++) nargs++;
  char **argv = calloc(nargs + 4, sizeof *argv);
  char **env = build_env(p);
  if (!argv || !env) {
    free(argv);
    free(env);
    if (death[0] >= 0) close(death[0]), close(death[1]);
    st_rel(&w->state, SUIRO_WORKER_EMPTY);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  size_t k = 0;
  if (nargs) for (size_t i = 0; i < nargs; i++) argv[k++] = p->argv[i];
  else argv[k++] = p->exe;
  argv[k++] = "--suiro-worker";
  argv[k++] = token;
  argv[k] = NULL;

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  /* The eventfd is close-on-exec; dup2 onto itself clears that flag in the child only. */
  posix_spawn_file_actions_adddup2(&fa, p->evfd, p->evfd);
  if (death[1] >= 0) posix_spawn_file_actions_adddup2(&fa, death[1], death[1]);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  int rc = strchr(p->exe, '/') ? posix_spawn(&pid, p->exe, &fa, &at, argv, env)
                               : posix_spawnp(&pid, p->exe, &fa, &at, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(argv);
  free(env);
  if (death[1] >= 0) close(death[1]); /* only the worker holds the write end now */
  if (rc != 0) {
    if (death[0] >= 0) close(death[0]);
    st_rel(&w->state, SUIRO_WORKER_EMPTY);
    return suiro_set_error(SUIRO_ERR, "cannot start worker %d: %s: %s%s", slot, p->exe, strerror(rc),
                           rc == E2BIG ? " (the workers' environment and arguments are too large)" : "");
  }
  int fd = death[0] >= 0 ? death[0] : (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    int e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    st_rel(&w->state, SUIRO_WORKER_EMPTY);
    if (e == ENOSYS) return suiro_set_error(SUIRO_ERR, "cannot watch worker %d: pidfd_open needs Linux 5.3 or later", slot);
    return suiro_set_error(SUIRO_ERR, "cannot watch worker %d: pidfd_open: %s%s", slot, strerror(e),
                           e == EMFILE || e == ENFILE ? " (raise the open-file limit, ulimit -n)" : "");
  }
  struct epoll_event ev = { .events = EPOLLIN, .data = { .u32 = (uint32_t)slot } };
  epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev);
  p->watchfds[slot] = fd;
  st_rlx(&w->pid, pid);
  atomic_fetch_add(&p->hdr->live, 1);
  return SUIRO_OK;
}

/* ---- failing a dead worker's tasks --------------------------------------------------------- */

static void fail_task(suiro_pool *p, suiro_task t, int slot, int pid, const char *why) {
  unsigned result = RS_DIED;
  if (t && p->killing[slot] == t) { /* killed on request: the task is cancelled, not a casualty */
    result = RS_CANCELLED;
    why = "the task was killed (task:kill()); its worker was replaced";
  }
  uint32_t rs = task_rs(t);
  uint32_t total = p->hdr->host_results + p->hdr->worker_results * (uint32_t)p->hdr->max_workers;
  if (rs >= total) return;
  uint64_t gen = task_gen(t);
  result_slot *r = pool_result(p, rs);
  uint64_t s = ld_acq(&r->state);
  if (rs_gen(s) != gen) return;
  unsigned kind = rs_kind(s);
  if (kind != RS_PENDING && !(kind == RS_RUNNING && rs_worker(s) == (unsigned)slot)) return;
  /* Nobody else writes this slot now: its runner is the dead worker. */
  size_t cap = result_inline_cap(p->result_size);
  size_t n = strlen(why);
  if (n > cap) n = cap;
  memcpy(result_data(r), why, n);
  r->len = (uint32_t)n;
  r->flags = 0;
  r->pid = pid;
  r->slot = slot;
  atomic_compare_exchange_strong(&r->state, &s, rs_state(gen, (unsigned)slot, result));
}

void pool_revoke_entry(const taskq_entry *e); /* pool.c */

void peer_fail_worker_tasks(suiro_pool *p, int slot, int pid, const char *why) {
  pool_hdr *h = p->hdr;
  unsigned claimer = (unsigned)slot + 1;
  /* 1. entries it had claimed but not yet copied out */
  for (int qi = 0; qi < h->nsubs; qi++) {
    const taskq_view *q = &p->queues[qi];
    uint64_t used = ld_rlx(&q->q->tail) + 1; /* entries beyond the producer were never written */
    for (uint32_t i = 0; i < q->cap && i < used; i++) {
      taskq_entry *e = (taskq_entry *)(q->q->entries + (size_t)i * q->slot_size);
      uint64_t s = ld_acq(&e->state);
      if (tq_kind(s) != TQ_CLAIMED || tq_claimer(s) != claimer) continue;
      fail_task(p, e->task, slot, pid, why);
      uint64_t pos = (tq_lap(s) << q->shift) | i;
      pool_revoke_entry(e); /* endpoints in its argument come back (chan.c) */
      if ((e->flags & TQ_SPILLED)) {
        char name[SUIRO_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)(e + 1));
        spill_discard(name);
      }
      taskq_release(q, e, pos);
    }
  }
  /* 2. tasks it was running (a stack when it was helping a nested wait) */
  worker_rec *w = &p->workers[slot];
  uint32_t depth = ld_acq(&w->depth);
  if (depth > INFLIGHT_MAX) depth = INFLIGHT_MAX;
  for (uint32_t i = 0; i < depth; i++) fail_task(p, ld_rlx(&w->inflight[i]), slot, pid, why);
  st_rlx(&w->depth, 0);
  /* 3. its own submissions: drain what nobody claimed, orphan its pending slots */
  const taskq_view *own = &p->queues[1 + slot];
  uint64_t pos;
  taskq_entry *e;
  while ((e = taskq_claim(own, MONITOR_CLAIMER, &pos)) != NULL) {
    pool_revoke_entry(e);
    if (e->flags & TQ_SPILLED) {
      char name[SUIRO_NAME_MAX];
      snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)(e + 1));
      spill_discard(name);
    }
    taskq_release(own, e, pos);
  }
  /* The producer position: its last publication may have missed the tail mirror. */
  uint64_t tail = ld_rlx(&own->q->tail);
  if (ld_acq(&taskq_at(own, tail)->state) != tq_state(own, tail, 0, TQ_FREE)) tail++;
  st_rlx(&own->q->tail, tail);
  sub_rec *sr = &p->subs[1 + slot];
  uint32_t hi = ld_acq(&sr->hiwater);
  for (uint32_t i = 0; i < sr->nresults && i < hi; i++) {
    result_slot *r = pool_result(p, sr->result_base + i);
    uint64_t s = ld_acq(&r->state);
    if (rs_kind(s) == RS_PENDING)
      atomic_compare_exchange_strong(&r->state, &s, rs_state(rs_gen(s), RS_NOWORKER, RS_ORPHANED));
  }
}

static void wake_everyone(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  for (int i = 0; i < h->nsubs; i++) {
    atomic_fetch_add(&p->subs[i].result_seq, 1);
    park_wake(&p->subs[i].result_seq, -1);
  }
  atomic_fetch_add(&h->state_seq, 1);
  park_wake(&h->state_seq, -1);
  /* an event loop waiting on the eventfd must re-check too */
  if (atomic_exchange(&p->subs[0].ev_armed, 0)) {
    uint64_t one = 1;
    ssize_t wr = write(p->evfd, &one, sizeof one);
    (void)wr;
  }
}

static void describe_exit(const siginfo_t *si, char *buf, size_t cap) {
  if (si->si_code == CLD_EXITED) snprintf(buf, cap, "exited with status %d", si->si_status);
  else if (si->si_status == 0) snprintf(buf, cap, "ended (reaped elsewhere, cause unknown)");
  else snprintf(buf, cap, "was killed by signal %d (%s)", si->si_status, strsignal(si->si_status));
}

/* Collects the exit status of worker `slot`, whose watch fd said it ended. 0 with *si filled, -1
 * when someone else reaped it (a SIGCHLD handler of the host application). A death pipe hangs up
 * as the process exits, a moment before it can be waited for: give it up to a second. A worker
 * that closed its end while alive cannot be watched any more; it is killed, so that the pool's
 * rule holds: the monitor knows of every worker that stops serving. */
static int reap(suiro_pool *p, int slot, siginfo_t *si, int block) {
  memset(si, 0, sizeof *si);
  if (!p->watch_by_pipe)
    return syscall(SYS_waitid, P_PIDFD, p->watchfds[slot], si, WEXITED | (block ? 0 : WNOHANG), NULL) == 0 &&
                   si->si_pid != 0 ? 0 : -1;
  pid_t pid = (pid_t)ld_rlx(&p->workers[slot].pid);
  if (pid <= 0) return -1;
  for (int i = 0; block || i < 1000; i++) {
    int r = waitid(P_PID, (id_t)pid, si, WEXITED | (block ? 0 : WNOHANG));
    if (r != 0 && errno == EINTR) continue;
    if (r != 0) return -1;
    if (si->si_pid != 0) return 0;
    struct timespec ms = { 0, 1000000 };
    nanosleep(&ms, NULL);
  }
  kill(pid, SIGKILL);
  return waitid(P_PID, (id_t)pid, si, WEXITED) == 0 ? 0 : -1;
}

static void handle_exit(suiro_pool *p, int slot) {
  pool_hdr *h = p->hdr;
  worker_rec *w = &p->workers[slot];
  int fd = p->watchfds[slot];
  if (fd < 0) return;
  siginfo_t si;
  if (reap(p, slot, &si, 0) != 0) {
    /* Reaped by someone else (a SIGCHLD handler of the host app): treat as an unknown death. */
    si.si_code = CLD_KILLED;
    si.si_status = 0;
  }
  epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  p->watchfds[slot] = -1;
  p->exit_reported[slot] = 1;
  int pid = ld_rlx(&w->pid);
  int state = ld_acq(&w->state);
  int clean = state == SUIRO_WORKER_EXITED;
  int attached = state != SUIRO_WORKER_STARTING;
  atomic_fetch_and(&h->active_mask, ~(1ull << slot));
  atomic_fetch_and(&h->awake_mask, ~(1ull << slot)); /* it may have died awake: see pool_awake */
  atomic_fetch_and(&h->parked_mask, ~(1ull << slot));
  atomic_fetch_and(&h->waking_mask, ~(1ull << slot));
  if (!clean) {
    char how[96], why[200];
    describe_exit(&si, how, sizeof how);
    snprintf(why, sizeof why, "worker %d (pid %d) %s", slot, pid, how);
    st_rel(&w->state, SUIRO_WORKER_DEAD);
    peer_fail_worker_tasks(p, slot, pid, why);
    atomic_fetch_add(&h->deaths, 1);
  }
  int killed = p->killing[slot] != 0; /* a worker killed on request is always replaced */
  p->killing[slot] = 0;
  /* The replacement counts as live before the dead one stops counting, so a collector woken now
   * never sees an empty pool that is about to be refilled. */
  if (!clean && attached && (p->opts.respawn || killed) && !ld_acq(&h->closing)) {
    if (peer_spawn(p, slot) == SUIRO_OK) atomic_fetch_add(&h->respawns, 1);
  }
  atomic_fetch_sub(&h->live, 1);
  wake_everyone(p);
}

static void *monitor_main(void *arg) {
  suiro_pool *p = arg;
  struct epoll_event evs[16];
  uint64_t last_tasks[POOL_MAX_WORKERS] = { 0 };
  int ticking = 0;
  for (;;) {
    /* While a backlog waits for a CPU, look every millisecond (pool_backlog_tick). */
    int n = epoll_wait(p->epfd, evs, 16, ticking ? 1 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u32 == UINT32_MAX) {
        uint64_t v;
        ssize_t r = read(p->monitor_ctl, &v, sizeof v);
        (void)r;
        continue;
      }
      handle_exit(p, (int)evs[i].data.u32);
    }
    pthread_mutex_unlock(&p->lock);
    if (atomic_load(&p->monitor_stop)) break;
    ticking = ld_rlx(&p->hdr->monitor_ticking) ? pool_backlog_tick(p, last_tasks) : 0;
  }
  return NULL;
}

suiro_status peer_start_monitor(suiro_pool *p) {
  p->watch_by_pipe = !pidfds_work();
  p->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (p->epfd < 0) return suiro_set_errno("epoll_create1");
  p->monitor_ctl = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (p->monitor_ctl < 0) return suiro_set_errno("eventfd");
  struct epoll_event ev = { .events = EPOLLIN, .data = { .u32 = UINT32_MAX } };
  epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->monitor_ctl, &ev);
  /* The monitor must not take signals meant for the host application. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&p->monitor, NULL, monitor_main, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return suiro_set_error(SUIRO_ERR, "cannot start the monitor thread: %s", strerror(rc));
  p->monitor_started = 1;
  return SUIRO_OK;
}

void peer_stop_monitor(suiro_pool *p) {
  if (p->monitor_started) {
    atomic_store(&p->monitor_stop, 1);
    uint64_t one = 1;
    ssize_t w = write(p->monitor_ctl, &one, sizeof one);
    (void)w;
    pthread_join(p->monitor, NULL);
    p->monitor_started = 0;
  }
  /* Workers still around (stop timed out and the kill is in flight): reap what we can. */
  for (int i = 0; i < POOL_MAX_WORKERS; i++) {
    if (p->watchfds[i] < 0) continue;
    siginfo_t si;
    reap(p, i, &si, 1);
    close(p->watchfds[i]);
    p->watchfds[i] = -1;
  }
  if (p->monitor_ctl >= 0) close(p->monitor_ctl);
  if (p->epfd >= 0) close(p->epfd);
  p->monitor_ctl = -1;
  p->epfd = -1;
}
