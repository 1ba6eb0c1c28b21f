/* taskq.h — the task queue: one producer, many claimers, per-entry claims (see taskq.c). */
#ifndef SUIRO_TASKQ_H
#define SUIRO_TASKQ_H

#include "internal.h"

/* Entry states. An entry's state word packs (lap << 10) | (claimer << 2) | kind, where
 * lap = position / capacity. A zero word is FREE for lap 0, so fresh (zero-filled) shared memory
 * is an empty queue without any initialisation pass. */
enum { TQ_FREE = 0, TQ_READY = 1, TQ_CLAIMED = 2 };
#define TQ_CLAIMER_MAX 255u

typedef struct taskq_entry {
  _Atomic uint64_t state;
  uint64_t task;  /* suiro_task handle of the result slot this task answers to */
  uint64_t fn;    /* function code */
  uint32_t len;   /* payload bytes (inline), or the spilled payload's size */
  uint32_t flags; /* TQ_SPILLED: payload holds a region name */
  /* payload follows, up to slot_size - sizeof(taskq_entry) bytes */
} taskq_entry;

#define TQ_SPILLED 1u

typedef struct taskq {
  SUIRO_ALIGNED _Atomic uint64_t head;  /* claim hint: every position below it is taken */
  SUIRO_ALIGNED _Atomic uint64_t tail;  /* next position the producer writes (producer-owned) */
  SUIRO_ALIGNED char entries[];
} taskq;

typedef struct taskq_view { /* process-local description of one queue */
  taskq *q;
  uint32_t cap;        /* entries, a power of two */
  uint32_t shift;      /* log2(cap) */
  uint32_t slot_size;  /* bytes per entry, a power of two >= 64 */
} taskq_view;

static inline size_t taskq_bytes(uint32_t cap, uint32_t slot_size) {
  return sizeof(taskq) + (size_t)cap * slot_size;
}
static inline size_t taskq_payload_cap(uint32_t slot_size) {
  return slot_size - sizeof(taskq_entry);
}
static inline taskq_entry *taskq_at(const taskq_view *v, uint64_t pos) {
  return (taskq_entry *)(v->q->entries + (size_t)(pos & (v->cap - 1)) * v->slot_size);
}
static inline uint64_t tq_state(const taskq_view *v, uint64_t pos, unsigned claimer, unsigned kind) {
  return ((pos >> v->shift) << 10) | ((uint64_t)claimer << 2) | kind;
}
static inline unsigned tq_kind(uint64_t s) { return (unsigned)(s & 3u); }
static inline unsigned tq_claimer(uint64_t s) { return (unsigned)((s >> 2) & 0xffu); }
static inline uint64_t tq_lap(uint64_t s) { return s >> 10; }

void taskq_init_view(taskq_view *v, void *mem, uint32_t cap, uint32_t slot_size);

/* Producer side. reserve returns the entry for position `pos` (the producer's tail) when it is
 * free, else NULL (queue full). The producer fills task/fn/len/flags/payload and publishes. */
static inline taskq_entry *taskq_reserve(const taskq_view *v, uint64_t pos) {
  taskq_entry *e = taskq_at(v, pos);
  return ld_acq(&e->state) == tq_state(v, pos, 0, TQ_FREE) ? e : NULL;
}
static inline void taskq_publish(const taskq_view *v, taskq_entry *e, uint64_t pos) {
  st_rel(&e->state, tq_state(v, pos, 0, TQ_READY));
}
/* Records the producer position for whoever adopts the queue after the producer dies. */
static inline void taskq_set_tail(const taskq_view *v, uint64_t pos) { st_rlx(&v->q->tail, pos); }

/* Claimer side. Claims the oldest ready entry: returns it (state CLAIMED by `claimer`, position
 * in *pos) or NULL when nothing is ready. The claimer copies what it needs, then calls
 * taskq_release so the producer can reuse the entry. */
taskq_entry *taskq_claim(const taskq_view *v, unsigned claimer, uint64_t *pos);
/* The owner's end: claims the newest ready entry below `tail` (the owner's producer position),
 * looking back at most `window` entries. Nested helping uses it so a waiting worker runs its most
 * recent submissions first (depth first), which keeps its stack as shallow as the task tree. */
taskq_entry *taskq_claim_newest(const taskq_view *v, unsigned claimer, uint64_t tail, uint32_t window,
                                uint64_t *pos);
static inline void taskq_release(const taskq_view *v, taskq_entry *e, uint64_t pos) {
  st_rel(&e->state, tq_state(v, pos + v->cap, 0, TQ_FREE));
}
/* Cheap test used while spinning: is there possibly something to claim? (Anything but "free for
 * the current lap" at the claim hint; taskq_claim sorts out the rest.) */
static inline int taskq_maybe_ready(const taskq_view *v) {
  uint64_t h = ld_rlx(&v->q->head);
  return ld_rlx(&taskq_at(v, h)->state) != tq_state(v, h, 0, TQ_FREE);
}

#endif
