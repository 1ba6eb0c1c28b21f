/*
 * wait.c — a host's long wait, sliced, for every face (suiro_face.h section 5).
 *
 * One loop in place of one per face and verb: Python's (GIL and pool lock released, the pool's
 * event fd polled so other threads may use the pool meanwhile) and R's (slices with an interrupt
 * check between them) are the same algorithm with different hooks.
 *
 * Threads and ownership: suiro_wait_sliced runs on the waiting thread and owns nothing; the
 * hooks say what the face holds. Between hooks it keeps only locals, so an interrupted() that
 * raises (a longjmp) leaves nothing behind. The event fd belongs to the pool (suiro_pool_eventfd);
 * it is armed before the last step(0) of a slice, so a completion between that look and the poll
 * still wakes the poll.
 */
#include <math.h>
#include <poll.h>

#include "internal.h"
#include "suiro_face.h"

static inline double min2(double a, double b) { return a < b ? a : b; }

int suiro_timeout_norm(double seconds, double *out) {
  if (seconds != seconds) return SUIRO_TIMEOUT_NAN;
  if (seconds < 0) return SUIRO_TIMEOUT_NEGATIVE;
  *out = seconds >= 1e12 ? -1 : seconds; /* also infinity */
  return 0;
}

int suiro_wait_sliced(suiro_pool *p, double timeout, suiro_wait_step step, void *ctx, const suiro_wait_hooks *h,
                      void *ud) {
  if (timeout == 0) return step(ctx, 0);
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  suiro_status st = SUIRO_TIMEOUT;
  double left = deadline - suiro_now();
  if (h->held > 0) {
    st = step(ctx, min2(h->held, left > 0 ? left : 0));
    if (st != SUIRO_TIMEOUT) return st;
    left = deadline - suiro_now();
  }
  if (left > 0 && h->block > 0) {
    if (h->release) h->release(ud, 0);
    st = step(ctx, min2(h->block, left));
    if (h->reacquire && h->reacquire(ud, 0) != 0) return SUIRO_WAIT_STOPPED;
    if (st != SUIRO_TIMEOUT) return st;
  }
  for (;;) {
    if (h->interrupted && h->interrupted(ud)) return SUIRO_WAIT_STOPPED;
    left = deadline - suiro_now();
    if (left <= 0) return SUIRO_TIMEOUT;
    double slice = min2(h->slice > 0 ? h->slice : 0.05, left);
    if (h->use_eventfd) {
      int fd = suiro_pool_eventfd(p); /* arm, then look, then sleep */
      st = step(ctx, 0);
      if (st != SUIRO_TIMEOUT) return st;
      if (h->release) h->release(ud, 1);
      struct pollfd pf = { fd, POLLIN, 0 };
      poll(&pf, 1, (int)(slice * 1000 + 0.999));
      if (h->reacquire && h->reacquire(ud, 1) != 0) return SUIRO_WAIT_STOPPED;
      suiro_pool_event_ack(p);
      st = step(ctx, 0);
    } else {
      if (h->release) h->release(ud, 0);
      st = step(ctx, slice);
      if (h->reacquire && h->reacquire(ud, 0) != 0) return SUIRO_WAIT_STOPPED;
    }
    if (st != SUIRO_TIMEOUT) return st;
  }
}
