/* spsc.h — a single-producer single-consumer ring of fixed-size slots (see spsc.c). */
#ifndef SUIRO_SPSC_H
#define SUIRO_SPSC_H

#include "internal.h"

typedef struct spsc {
  SUIRO_ALIGNED _Atomic uint64_t tail; /* written by the producer only */
  SUIRO_ALIGNED _Atomic uint64_t head; /* written by the consumer only */
  SUIRO_ALIGNED char slots[];
} spsc;

/* A slot holds a 4-byte length, 4 bytes of user flags, then the message. */
typedef struct spsc_slot {
  uint32_t len;
  uint32_t flags;
  unsigned char data[];
} spsc_slot;

typedef struct spsc_producer {
  spsc *r;
  uint32_t cap, slot_size;
  uint64_t tail;       /* next position to write (private) */
  uint64_t head_cache; /* last head seen: refreshed only when the spsc looks full */
} spsc_producer;

typedef struct spsc_consumer {
  spsc *r;
  uint32_t cap, slot_size;
  uint64_t head;       /* next position to read (private) */
  uint64_t tail_cache; /* last tail seen: refreshed only when the spsc looks empty */
} spsc_consumer;

static inline size_t spsc_bytes(uint32_t cap, uint32_t slot_size) {
  return sizeof(spsc) + (size_t)cap * slot_size;
}

void spsc_producer_init(spsc_producer *p, void *mem, uint32_t cap, uint32_t slot_size);
void spsc_consumer_init(spsc_consumer *c, void *mem, uint32_t cap, uint32_t slot_size);

/* Producer: reserve the next slot (NULL when full), fill it, then spsc_push_commit; the batch
 * becomes visible at spsc_publish (one release store for the whole batch). */
spsc_slot *spsc_reserve(spsc_producer *p);
static inline void spsc_push_commit(spsc_producer *p) { p->tail++; }
static inline void spsc_publish(spsc_producer *p) { st_rel(&p->r->tail, p->tail); }
/* Convenience: copy one message in and publish it. Returns 0, or -1 when full or too large. */
int spsc_push(spsc_producer *p, const void *data, uint32_t len, uint32_t flags);

/* Consumer: peek at the next slot (NULL when empty), use it, spsc_pop; freed slots go back to the
 * producer at spsc_release (one release store for the batch). */
const spsc_slot *spsc_peek(spsc_consumer *c);
static inline void spsc_pop(spsc_consumer *c) { c->head++; }
static inline void spsc_release(spsc_consumer *c) { st_rel(&c->r->head, c->head); }
/* How many messages are visible to the consumer right now (refreshes the tail cache). */
uint64_t spsc_available(spsc_consumer *c);

#endif
