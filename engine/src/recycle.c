/*
 * recycle.c — the pool-wide recycle list: regions that came free in a process other than their
 * creator's (a worker's result dropped by the host), offered to whichever process of the pool
 * needs a region next (its maker likely still has it mapped and warm).
 *
 * Ownership and ordering: each of the POOL_RECYCLE entries in the pool header is a small state
 * machine, 0 empty -> 2 being written -> 1 offered -> 2 being taken -> 0, moved by CAS so that one
 * process at a time owns an entry in state 2; the name and capacity are written before the
 * release store of 1 and read after the acquire load that saw it. Whoever takes an entry owns
 * the region it names only after claiming it (buf.c, refs 0 -> 1). recycle_bytes bounds what
 * the list holds in /dev/shm: a push adds (CAS, never past the limit) before it takes an entry,
 * and gives back when it finds none; a pop subtracts. A region refused is the releasing
 * process's to keep under its own caps, or to remove (buf.c).
 */
#include <stdio.h>
#include <string.h>

#include "pool.h"

static int recycle_push_to(pool_hdr *h, const char *name, uint64_t capacity, uint64_t limit) {
  uint64_t used = ld_rlx(&h->recycle_bytes);
  do {
    if (capacity > limit || used > limit - capacity) return 0;
  } while (!atomic_compare_exchange_weak_explicit(&h->recycle_bytes, &used, used + capacity, memory_order_relaxed,
                                                  memory_order_relaxed));
  for (int i = 0; i < POOL_RECYCLE; i++) {
    recycle_slot *r = &h->recycle[i];
    uint32_t zero = 0;
    if (ld_rlx(&r->state) != 0 || !atomic_compare_exchange_strong(&r->state, &zero, 2)) continue;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->capacity = capacity;
    st_rel(&r->state, 1);
    return 1;
  }
  atomic_fetch_sub_explicit(&h->recycle_bytes, capacity, memory_order_relaxed);
  return 0;
}

static int recycle_pop_from(pool_hdr *h, size_t bytes, char *name_out, uint64_t *capacity) {
  for (int i = 0; i < POOL_RECYCLE; i++) {
    recycle_slot *r = &h->recycle[i];
    if (ld_acq(&r->state) != 1 || r->capacity < bytes || r->capacity / 2 > bytes + ((uint64_t)64 << 10)) continue;
    uint32_t one = 1;
    if (!atomic_compare_exchange_strong(&r->state, &one, 2)) continue;
    memcpy(name_out, r->name, SUIRO_NAME_MAX);
    *capacity = r->capacity;
    atomic_fetch_sub_explicit(&h->recycle_bytes, r->capacity, memory_order_relaxed);
    st_rel(&r->state, 0);
    return 1;
  }
  return 0;
}

/* A worker's forked child inherited its pool: the parent's, so not offered to (handle.c). */
int pool_recycle_push(const char *region_name, uint64_t capacity, uint64_t limit) {
  suiro_pool *cur = suiro_current_pool();
  if (cur) return handle_inherited(cur) ? 0 : recycle_push_to(cur->hdr, region_name, capacity, limit);
  int done = 0;
  pool_hosts_lock();
  for (int i = 0; i < POOL_MAX_HOSTS && !done; i++) {
    suiro_pool *h = pool_host(i);
    if (!h || !h->region) continue;
    const char *pn = suiro_region_name(h->region);
    size_t pl = strlen(pn);
    if (strncmp(region_name, pn, pl) == 0 && region_name[pl] == 'd') done = recycle_push_to(h->hdr, region_name, capacity, limit);
  }
  pool_hosts_unlock();
  return done;
}

int pool_recycle_pop(size_t bytes, char *name_out, uint64_t *capacity) {
  suiro_pool *cur = suiro_current_pool();
  if (cur) return handle_inherited(cur) ? 0 : recycle_pop_from(cur->hdr, bytes, name_out, capacity);
  int done = 0;
  pool_hosts_lock();
  for (int i = 0; i < POOL_MAX_HOSTS && !done; i++) {
    suiro_pool *h = pool_host(i);
    if (h && h->hdr) done = recycle_pop_from(h->hdr, bytes, name_out, capacity);
  }
  pool_hosts_unlock();
  return done;
}
