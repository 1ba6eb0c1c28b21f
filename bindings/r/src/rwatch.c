/*
 * rwatch.c — the fd watcher thread shared by promises (rasync.c) and suiro_recv_async (rchan.c):
 * a thread sleeps on an event fd and, when it fires, schedules one callback on R's main thread
 * through later's C entry point (execLaterNative2; later 1.3.0 has no later_fd).
 *
 * Threads:
 *   - The watcher thread only polls file descriptors (evfd, ack, stopfd), reads ack and calls
 *     execLaterNative2 (thread-safe by later's contract). It never touches R, the engine, or ctx.
 *   - Everything else (rs_watch_start/release/kick/stop and the callbacks) runs on the main
 *     thread; ctx belongs to the caller and is only used there.
 * Hand-over: after scheduling a callback the thread waits on `ack` (an eventfd) until the
 *   callback, or later code, calls rs_watch_release. The caller re-arms its evfd before it
 *   checks for news, so news arriving after the check makes evfd readable again: nothing is
 *   missed, and the thread never schedules twice for one event.
 * Ownership: the rs_watch is shared by the thread, the caller (until rs_watch_stop) and every
 *   callback pending on later's queue. `refs` counts them; whoever drops it to zero closes ack
 *   and stopfd and frees it (evfd is the caller's). The thread's reference is always dropped
 *   before rs_watch_stop returns (it joins), so the last one goes on the main thread.
 * Memory ordering: `refs` and `stopped` are seq_cst atomics. rs_watch_stop stores stopped = 1
 *   before it wakes the thread through stopfd; a callback checks stopped before calling into
 *   ctx, so after rs_watch_stop no callback uses ctx. The fetch_sub that drops the last
 *   reference orders every earlier use of the watch before the free.
 * Fork: in a forked child, callbacks copied with later's queue still call on_event (stopped is
 *   0 in the copy); the caller's callback must tell (rasync.c: suiro_pool_inherited) and then
 *   neither drain the parent's fd nor call rs_watch_release (the thread is the parent's).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rsuiro.h"
#include "rwatch.h"

typedef void (*later_fn)(void (*)(void *), void *, double, int);
static later_fn later_native;

struct rs_watch {
  pthread_t th;
  int evfd;          /* the caller's event fd */
  int ack;           /* eventfd: the callback ran, poll again */
  int stopfd;        /* eventfd: stop the thread */
  atomic_int refs;
  atomic_int stopped;
  rs_watch_fn on_event, kick_fn;
  void *ctx;         /* main thread only */
};

void rs_later_need(const char *verb) {
  if (later_native) return;
  later_native = (later_fn)(void (*)(void))R_GetCCallable("later", "execLaterNative2");
  if (!later_native) Rf_error("%s: the later package has no execLaterNative2", verb);
}

void rs_later(void (*fn)(void *), void *ctx, double delay) { later_native(fn, ctx, delay, 0); }

static void watch_unref(rs_watch *w) {
  if (atomic_fetch_sub(&w->refs, 1) == 1) {
    close(w->ack);
    close(w->stopfd);
    free(w);
  }
}

static void on_fired(void *p) { /* main thread, from later's loop: evfd fired */
  rs_watch *w = p;
  if (!atomic_load(&w->stopped)) w->on_event(w->ctx);
  watch_unref(w);
}

static void on_kick(void *p) {
  rs_watch *w = p;
  if (!atomic_load(&w->stopped)) w->kick_fn(w->ctx);
  watch_unref(w);
}

static void *watch_main(void *p) {
  rs_watch *w = p;
  for (;;) {
    struct pollfd f[2] = { { w->evfd, POLLIN, 0 }, { w->stopfd, POLLIN, 0 } };
    int r = poll(f, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (f[1].revents & POLLIN) || atomic_load(&w->stopped)) break;
    if (!(f[0].revents & POLLIN)) continue;
    atomic_fetch_add(&w->refs, 1);
    later_native(on_fired, w, 0, 0);
    /* wait for the callback (or a stop) before polling evfd again */
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

rs_watch *rs_watch_start(int evfd, rs_watch_fn on_event, void *ctx) {
  if (evfd < 0) return NULL;
  rs_watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->evfd = evfd;
  w->ack = eventfd(0, EFD_CLOEXEC);
  w->stopfd = eventfd(0, EFD_CLOEXEC);
  w->on_event = on_event;
  w->ctx = ctx;
  atomic_init(&w->refs, 2); /* the thread and the caller */
  atomic_init(&w->stopped, 0);
  if (w->ack < 0 || w->stopfd < 0 || pthread_create(&w->th, NULL, watch_main, w) != 0) {
    if (w->ack >= 0) close(w->ack);
    if (w->stopfd >= 0) close(w->stopfd);
    free(w);
    return NULL;
  }
  return w;
}

void rs_watch_release(rs_watch *w) {
  uint64_t one = 1;
  if (write(w->ack, &one, sizeof one) < 0) { /* cannot fail on an eventfd below 2^64 - 1 */
  }
}

void rs_watch_kick(rs_watch *w, rs_watch_fn fn) {
  w->kick_fn = fn;
  atomic_fetch_add(&w->refs, 1);
  later_native(on_kick, w, 0, 0);
}

void rs_watch_stop(rs_watch *w) {
  atomic_store(&w->stopped, 1);
  uint64_t one = 1;
  if (write(w->stopfd, &one, sizeof one) < 0) {
  }
  pthread_join(w->th, NULL);
  watch_unref(w); /* the caller's reference; a pending callback holds its own */
}
