/*
 * events.c — sleeping and being woken from outside: a submitter parking until its results land,
 * interrupts (a face's check asked after every sleep), the event fd for event loops, and waiting
 * on several pools at once.
 *
 * Memory ordering: a submitter announces with a seq_cst exchange on its `waiting` word, then
 * re-checks and parks on result_seq (wake.c bumps it only after seeing the announce); the event
 * fd is armed with a seq_cst store before the caller re-checks, and disarmed by the notifier's
 * exchange, so a burst of results writes it once.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#include "pool.h"
#include "suiro_bind.h"


static int (*interrupt_check)(void *ud);
static void *interrupt_ud;

void suiro_set_interrupt_check(int (*check)(void *ud), void *ud) {
  interrupt_check = check;
  interrupt_ud = ud;
}

/* Asked after every sleep of a host's wait (a slice of at most 100 ms, cut short by signals). */
int pool_interrupted(const suiro_pool *p) {
  return p->is_host && interrupt_check && interrupt_check(interrupt_ud);
}

/* Sleeps until a result for this submitter lands (or the deadline/slice passes). */
void pool_park_for_results(suiro_pool *p, uint64_t deadline, int (*ready)(void *), void *ctx) {
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

/* ---- events ------------------------------------------------------------------------------- */

int suiro_pool_eventfd(suiro_pool *p) {
  POOL_GUARD(p, "suiro_pool_eventfd", -1);
  if (!p->is_host) return -1;
  atomic_store(&p->subs[0].ev_armed, 1);
  return p->evfd;
}

void suiro_pool_event_ack(suiro_pool *p) {
  POOL_GUARD(p, "suiro_pool_event_ack", );
  if (!p->is_host) return;
  uint64_t v;
  while (read(p->evfd, &v, sizeof v) == sizeof v) {
  }
  atomic_store(&p->subs[0].ev_armed, 1); /* seq_cst: re-armed before the caller polls results */
}

/* ---- waiting on several pools (suiro_bind.h, section 7) ---------------------------------- */

int suiro_wait_pools(suiro_pool *const *pools, size_t n, double timeout) {
  if (n > 256) return suiro_set_error(SUIRO_ERR, "wait_pools: at most 256 pools, got %zu", n), -1;
  if (n && !pools) return suiro_set_error(SUIRO_ERR, "wait_pools: pools is NULL with n = %zu", n), -1;
  if (timeout != timeout) timeout = 0;
  struct pollfd fds[256];
  for (size_t i = 0; i < n; i++) {
    if (handle_check(pools[i], HANDLE_POOL, "wait_pools") != SUIRO_OK) return -1;
    if (!pools[i]->is_host) return suiro_set_error(SUIRO_ERR, "wait_pools: pool %zu is not a host handle", i + 1), -1;
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
