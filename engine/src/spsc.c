/*
 * spsc.c — a single-producer single-consumer ring of fixed-size slots in shared memory (the map
 * streams of completed ranges).
 *
 * Each index lives on its own cache line and is written by one side only: the producer owns
 * `tail`, the consumer owns `head`. Each side keeps a private cached copy of the other's index and
 * reads the shared one only when the cache says full (producer) or empty (consumer), so in steady
 * state a message costs no cross-core traffic beyond the slot itself.
 *
 * Memory ordering
 *   producer: slot writes (plain), then tail = t with release (spsc_publish) — one store per batch.
 *   consumer: tail loaded with acquire before reading slots; after reading, head = h with release
 *             (spsc_release) — one store per batch.
 *   producer: head loaded with acquire before overwriting a slot, pairing with that release.
 * Ownership: slots in [head, tail) belong to the consumer, the rest to the producer.
 */
#include "spsc.h"

#include <string.h>

static void spsc_common(void *mem, spsc **r) { *r = mem; }

void spsc_producer_init(spsc_producer *p, void *mem, uint32_t cap, uint32_t slot_size) {
  spsc_common(mem, &p->r);
  p->cap = cap;
  p->slot_size = slot_size;
  p->tail = ld_rlx(&p->r->tail);
  p->head_cache = ld_acq(&p->r->head);
}

void spsc_consumer_init(spsc_consumer *c, void *mem, uint32_t cap, uint32_t slot_size) {
  spsc_common(mem, &c->r);
  c->cap = cap;
  c->slot_size = slot_size;
  c->head = ld_rlx(&c->r->head);
  c->tail_cache = ld_acq(&c->r->tail);
}

static inline spsc_slot *slot_at(spsc *r, uint32_t cap, uint32_t slot_size, uint64_t pos) {
  return (spsc_slot *)(r->slots + (size_t)(pos & (cap - 1)) * slot_size);
}

spsc_slot *spsc_reserve(spsc_producer *p) {
  if (p->tail - p->head_cache >= p->cap) {
    p->head_cache = ld_acq(&p->r->head);
    if (p->tail - p->head_cache >= p->cap) return NULL;
  }
  return slot_at(p->r, p->cap, p->slot_size, p->tail);
}

int spsc_push(spsc_producer *p, const void *data, uint32_t len, uint32_t flags) {
  if (len > p->slot_size - sizeof(spsc_slot)) return -1;
  spsc_slot *s = spsc_reserve(p);
  if (!s) return -1;
  s->len = len;
  s->flags = flags;
  memcpy(s->data, data, len);
  spsc_push_commit(p);
  spsc_publish(p);
  return 0;
}

const spsc_slot *spsc_peek(spsc_consumer *c) {
  if (c->head == c->tail_cache) {
    c->tail_cache = ld_acq(&c->r->tail);
    if (c->head == c->tail_cache) return NULL;
  }
  return slot_at(c->r, c->cap, c->slot_size, c->head);
}

uint64_t spsc_available(spsc_consumer *c) {
  c->tail_cache = ld_acq(&c->r->tail);
  return c->tail_cache - c->head;
}
