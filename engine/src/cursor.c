/*
 * cursor.c — a ticket dispenser for element ranges.
 *
 * A map's runners (one per worker) share one 64-bit cursor in the map region; each claim is a
 * single fetch_add of the batch it wants, so claimers never wait for one another and the
 * hand-out order is global. The batch adapts: it starts at 1 (a slow first element must not
 * take a big range with it), doubles while the work left is plentiful, and is capped at a
 * quarter of the remaining share of each runner, so the tail is split finely and no runner is
 * left holding a large last batch while the others idle.
 *
 * Ordering: relaxed. The cursor only partitions indices; what a runner then reads was staged
 * before the runner tasks were published (release/acquire through the task queue), and what it
 * writes is published by the runner's completion (map.c).
 */
#include "cursor.h"

int cursor_claim(_Atomic uint64_t *cursor, uint64_t n, unsigned runners, cursor_claimer *c,
                 uint64_t *begin, uint64_t *end) {
  uint64_t at = atomic_load_explicit(cursor, memory_order_relaxed);
  if (at >= n) return 0;
  uint64_t left = n - at;
  uint64_t want = c->batch ? c->batch * 2 : 1;
  uint64_t share = left / ((uint64_t)(runners ? runners : 1) * 4);
  if (want > share) want = share;
  if (want > CURSOR_MAX_BATCH) want = CURSOR_MAX_BATCH;
  if (want < 1) want = 1;
  uint64_t b = atomic_fetch_add_explicit(cursor, want, memory_order_relaxed);
  if (b >= n) return 0;
  c->batch = want;
  *begin = b;
  *end = b + want < n ? b + want : n;
  return 1;
}
