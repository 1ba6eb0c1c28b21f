/*
 * taskq.c — the task queue behind every submitter's injection ring and every worker's deque.
 *
 * Shape: a ring of fixed-size entries in shared memory. Exactly one producer (the submitter that
 * owns the queue) writes entries; any worker may claim them, including the owner itself. A claim
 * is a CAS on the entry's own state word, so:
 *   - who holds a task is written in shared memory (CLAIMED by claimer), which lets the host
 *     fail exactly the tasks of a worker that died, whatever instant it died at;
 *   - entries are copied out and released right after the claim, so a long task never blocks the
 *     producer from reusing the ring.
 *
 * Memory ordering
 *   producer: writes the entry body (plain stores), then state = READY(pos) with release.
 *   claimer:  loads state with acquire; CAS READY(pos) -> CLAIMED(pos, c) (acq_rel) makes the
 *             body visible and the entry exclusively its own; after copying, state =
 *             FREE(pos + cap) with release, so the producer's acquire load in taskq_reserve
 *             orders its next writes after the claimer's reads.
 *   head:     a hint only (relaxed loads, monotonic CAS-max); correctness rests on entry states.
 *   tail:     mirrored by the producer (relaxed) for whoever adopts the queue after it died.
 * Ownership: entry bodies belong to the producer while FREE, to nobody while READY (read-only),
 * and to the claimer while CLAIMED.
 */
#include "taskq.h"

void taskq_init_view(taskq_view *v, void *mem, uint32_t cap, uint32_t slot_size) {
  v->q = mem;
  v->cap = cap;
  v->slot_size = slot_size;
  v->shift = (uint32_t)__builtin_ctz(cap);
}

static void advance_head(taskq *q, uint64_t to) {
  uint64_t cur = ld_rlx(&q->head);
  while (cur < to &&
         !atomic_compare_exchange_weak_explicit(&q->head, &cur, to, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

taskq_entry *taskq_claim(const taskq_view *v, unsigned claimer, uint64_t *pos) {
  uint64_t h = ld_rlx(&v->q->head);
  int skipped = 0;
  for (;;) {
    taskq_entry *e = taskq_at(v, h);
    uint64_t s = ld_acq(&e->state);
    uint64_t lap = h >> v->shift;
    if (s == tq_state(v, h, 0, TQ_READY)) {
      if (atomic_compare_exchange_strong_explicit(&e->state, &s, tq_state(v, h, claimer, TQ_CLAIMED),
                                                  memory_order_acq_rel, memory_order_acquire)) {
        advance_head(v->q, h + 1);
        *pos = h;
        return e;
      }
      continue; /* lost the race: look again at the same position */
    }
    if (tq_lap(s) == lap && tq_kind(s) == TQ_FREE) {
      if (skipped) advance_head(v->q, h);
      return NULL; /* nothing published at h yet: empty */
    }
    if (tq_lap(s) > lap || (tq_lap(s) == lap && tq_kind(s) == TQ_CLAIMED)) {
      h++; /* taken by someone else (claimed, or released for a later lap): move on */
      skipped = 1;
      continue;
    }
    /* An entry of an earlier lap still claimed (its claimer is copying it out): the producer has
     * not reached h yet, so there is nothing to claim. */
    if (skipped) advance_head(v->q, h);
    return NULL;
  }
}

taskq_entry *taskq_claim_newest(const taskq_view *v, unsigned claimer, uint64_t tail, uint32_t window,
                                uint64_t *pos) {
  uint64_t head = ld_rlx(&v->q->head);
  uint64_t low = tail > window ? tail - window : 0;
  if (low < head) low = head;
  for (uint64_t p = tail; p-- > low;) {
    taskq_entry *e = taskq_at(v, p);
    uint64_t s = ld_acq(&e->state);
    if (s != tq_state(v, p, 0, TQ_READY)) continue;
    if (atomic_compare_exchange_strong_explicit(&e->state, &s, tq_state(v, p, claimer, TQ_CLAIMED),
                                                memory_order_acq_rel, memory_order_acquire)) {
      if (p == head) advance_head(v->q, p + 1);
      *pos = p;
      return e;
    }
  }
  return NULL;
}
