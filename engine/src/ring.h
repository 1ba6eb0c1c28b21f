/* ring.h — single-producer single-consumer ring of fixed-size slots (see ring.c). */
#ifndef SUIRO_RING_H
#define SUIRO_RING_H

#include "internal.h"

typedef struct ring {
  SUIRO_ALIGNED _Atomic uint64_t tail; /* written by the producer only */
  SUIRO_ALIGNED _Atomic uint64_t head; /* written by the consumer only */
  SUIRO_ALIGNED char slots[];
} ring;

/* A slot holds a 4-byte length, 4 bytes of user flags, then the message. */
typedef struct ring_slot {
  uint32_t len;
  uint32_t flags;
  unsigned char data[];
} ring_slot;

typedef struct ring_producer {
  ring *r;
  uint32_t cap, slot_size;
  uint64_t tail;       /* next position to write (private) */
  uint64_t head_cache; /* last head seen: refreshed only when the ring looks full */
} ring_producer;

typedef struct ring_consumer {
  ring *r;
  uint32_t cap, slot_size;
  uint64_t head;       /* next position to read (private) */
  uint64_t tail_cache; /* last tail seen: refreshed only when the ring looks empty */
} ring_consumer;

static inline size_t ring_bytes(uint32_t cap, uint32_t slot_size) {
  return sizeof(ring) + (size_t)cap * slot_size;
}

void ring_producer_init(ring_producer *p, void *mem, uint32_t cap, uint32_t slot_size);
void ring_consumer_init(ring_consumer *c, void *mem, uint32_t cap, uint32_t slot_size);

/* Producer: reserve the next slot (NULL when full), fill it, then ring_push_commit; the batch
 * becomes visible at ring_publish (one release store for the whole batch). */
ring_slot *ring_reserve(ring_producer *p);
static inline void ring_push_commit(ring_producer *p) { p->tail++; }
static inline void ring_publish(ring_producer *p) { st_rel(&p->r->tail, p->tail); }
/* Convenience: copy one message in and publish it. Returns 0, or -1 when full or too large. */
int ring_push(ring_producer *p, const void *data, uint32_t len, uint32_t flags);

/* Consumer: peek at the next slot (NULL when empty), use it, ring_pop; freed slots go back to the
 * producer at ring_release (one release store for the batch). */
const ring_slot *ring_peek(ring_consumer *c);
static inline void ring_pop(ring_consumer *c) { c->head++; }
static inline void ring_release(ring_consumer *c) { st_rel(&c->r->head, c->head); }
/* How many messages are visible to the consumer right now (refreshes the tail cache). */
uint64_t ring_available(ring_consumer *c);

#endif
