/*
 * rasync.c — promises without polling: a watcher thread per pool sleeps on the pool's eventfd
 * (suiro_pool_eventfd) and, when results land, schedules one callback on R's main thread through
 * later's C entry point (execLaterNative2; later 1.3.0 has no later_fd). The callback
 * acknowledges the event and lets R settle the promises whose tasks are ready
 * (R/async.R: .suiro_async_dispatch); a burst of completions is one wake-up.
 *
 * Threads and ownership:
 *   - The watcher thread only polls file descriptors and calls execLaterNative2 (thread-safe by
 *     later's contract). It never touches R or the engine's pool handle.
 *   - The main thread (the callback, rs_async_stop) acknowledges events, runs R code and frees.
 *   - Hand-over: after scheduling a callback the thread waits on `ack` (an eventfd) until the
 *     callback has re-armed the pool's eventfd, so it never schedules twice for one event.
 *   - The watch record is shared by the thread and at most one pending callback: `refs` counts
 *     them (atomic); whoever drops it to zero frees it. `stopped` (atomic) tells a late callback
 *     that the pool is gone.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rsuiro.h"

typedef void (*later_fn)(void (*)(void *), void *, double, int);
static later_fn later_native;

typedef struct rwatch {
  pthread_t th;
  int evfd;          /* the pool's eventfd (owned by the engine) */
  int ack;           /* eventfd: the callback ran, poll again */
  int stopfd;        /* eventfd: stop the thread */
  atomic_int refs;
  atomic_int stopped;
  rpool *rp;         /* main thread only */
  SEXP pool;         /* the pool object, for the R dispatcher (not owned: the registry keeps it) */
} rwatch;

static void watch_unref(rwatch *w) {
  if (atomic_fetch_sub(&w->refs, 1) == 1) {
    close(w->ack);
    close(w->stopfd);
    free(w);
  }
}

static void on_results(void *p) { /* main thread, from later's loop */
  rwatch *w = p;
  if (!atomic_load(&w->stopped) && w->rp && w->rp->p) {
    suiro_pool_event_ack(w->rp->p);
    SEXP fn = PROTECT(rs_call_fn("suiro", ".suiro_async_dispatch"));
    SEXP call = PROTECT(Rf_lang2(fn, w->pool));
    int err = 0;
    R_tryEvalSilent(call, R_GlobalEnv, &err);
    UNPROTECT(2);
    uint64_t one = 1;
    if (write(w->ack, &one, sizeof one) < 0) { /* cannot happen with an eventfd below 2^64 - 1 */
    }
  }
  watch_unref(w);
}

static void *watch_main(void *p) {
  rwatch *w = p;
  for (;;) {
    struct pollfd f[2] = { { w->evfd, POLLIN, 0 }, { w->stopfd, POLLIN, 0 } };
    int r = poll(f, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (f[1].revents & POLLIN) || atomic_load(&w->stopped)) break;
    if (!(f[0].revents & POLLIN)) continue;
    atomic_fetch_add(&w->refs, 1);
    later_native(on_results, w, 0, 0);
    /* wait for the callback (or a stop) before polling the eventfd again */
    struct pollfd g[2] = { { w->ack, POLLIN, 0 }, { w->stopfd, POLLIN, 0 } };
    for (;;) {
      r = poll(g, 2, -1);
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    if (r < 0 || (g[1].revents & POLLIN)) break;
    uint64_t v;
    if (read(w->ack, &v, sizeof v) < 0) break;
  }
  watch_unref(w);
  return NULL;
}

/* .Call(C_async_watch, pool): starts the pool's watcher (once). */
SEXP C_async_watch(SEXP pool) {
  rpool *rp = rs_pool_of(pool, "as.promise", 1);
  if (rp->watch) return Rf_ScalarLogical(1);
  if (!rp->owner) Rf_error("as.promise: promises need a host's pool (inside a worker, collect instead)");
  if (!later_native) {
    later_native = (later_fn)R_GetCCallable("later", "execLaterNative2");
    if (!later_native) Rf_error("as.promise: the later package has no execLaterNative2");
  }
  rwatch *w = calloc(1, sizeof *w);
  if (!w) Rf_error("as.promise: out of memory");
  w->evfd = suiro_pool_eventfd(rp->p);
  w->ack = eventfd(0, EFD_CLOEXEC);
  w->stopfd = eventfd(0, EFD_CLOEXEC);
  w->rp = rp;
  w->pool = pool;
  atomic_init(&w->refs, 2); /* the thread and the pool */
  if (w->evfd < 0 || w->ack < 0 || w->stopfd < 0 || pthread_create(&w->th, NULL, watch_main, w) != 0) {
    if (w->ack >= 0) close(w->ack);
    if (w->stopfd >= 0) close(w->stopfd);
    free(w);
    Rf_error("as.promise: cannot start the event watcher");
  }
  rp->watch = w;
  return Rf_ScalarLogical(1);
}

/* Called before the pool stops (main thread). */
void rs_async_stop(rpool *rp) {
  rwatch *w = rp->watch;
  if (!w) return;
  rp->watch = NULL;
  atomic_store(&w->stopped, 1);
  w->rp = NULL;
  uint64_t one = 1;
  if (write(w->stopfd, &one, sizeof one) < 0) {
  }
  pthread_join(w->th, NULL);
  watch_unref(w); /* the pool's reference; a pending callback holds its own */
}
