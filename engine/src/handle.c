/*
 * handle.c — live words of public handles, their quarantine, and the fork epoch.
 *
 * Every public handle (suiro_pool, suiro_map, suiro_buf) starts with a handle_live: a word
 * holding its kind and the fork epoch it was made in. Every public entry checks it
 * (handle_check) before trusting anything else in the handle:
 *   - NULL, or a word of another kind: misuse, an error naming the function;
 *   - DEAD: the handle was stopped or freed (a use after stop, a double free): retired handles are
 *     poisoned and kept in a quarantine instead of being freed, so a stale pointer reads the dead
 *     word rather than memory reused by a later allocation (the quarantine holds the last
 *     QUARANTINE handles of each kind; older ones are freed for real);
 *   - another epoch: the handle was made before a fork this process came out of. It belongs to
 *     the parent: its pool's rings, slots and workers are the parent's, so the child must not
 *     touch them (not submit, not collect, not stop, not kill workers, not unlink names).
 *
 * Fork: pthread_atfork handlers (registered once, at the first handle_init) give the child a new
 * epoch, and let pool.c and buf.c keep their process-wide locks consistent across the fork (held
 * by the forking thread from prepare to parent/child) and forget what the child inherited.
 *
 * Memory ordering: the live word is _Atomic and accessed relaxed. A handle is used by one thread
 * at a time (suiro.h); the word only has to be read whole (no torn reads), and a retire happens
 * after its owner's last use. epoch is written only in the child handler, when the child has a
 * single thread. The quarantine is guarded by its own mutex.
 */
#include "handle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic uint32_t handle_epoch_now = 1;
#define epoch handle_epoch_now

static void fork_prepare(void) {
  pool_fork_prepare();
  buf_fork_prepare();
}
static void fork_parent(void) {
  buf_fork_parent();
  pool_fork_parent();
}
static void fork_child(void) {
  uint32_t e = atomic_load_explicit(&epoch, memory_order_relaxed) + 1;
  if (e == 0 || e == HANDLE_DEAD) e = 1; /* never 0, never a word that reads dead */
  atomic_store_explicit(&epoch, e, memory_order_relaxed);
  buf_fork_child();
  pool_fork_child();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void handle_init(handle_live *h, uint32_t kind) {
  pthread_once(&atfork_once, register_atfork);
  h->pid = (int32_t)getpid();
  h->pad = 0;
  atomic_store_explicit(&h->word, (uint64_t)kind << 32 | handle_epoch(), memory_order_relaxed);
}

int handle_state(const void *obj, uint32_t kind) {
  if (!obj) return HS_NULL;
  uint64_t w = atomic_load_explicit(&((const handle_live *)obj)->word, memory_order_relaxed);
  if ((uint32_t)(w >> 32) == HANDLE_DEAD && (uint32_t)w == kind) return HS_DEAD;
  if ((uint32_t)(w >> 32) != kind) return HS_BAD;
  if ((uint32_t)w != handle_epoch()) return HS_FOREIGN;
  return HS_OK;
}

static const char *kind_name(uint32_t kind) {
  switch (kind) {
  case HANDLE_POOL: return "pool";
  case HANDLE_MAP: return "map";
  case HANDLE_BUF: return "buffer";
  case HANDLE_CHAN: return "channel endpoint";
  }
  return "handle";
}

suiro_status handle_check(const void *obj, uint32_t kind, const char *fn) {
  int s = handle_state(obj, kind);
  if (SUIRO_LIKELY(s == HS_OK)) return SUIRO_OK;
  const char *k = kind_name(kind);
  switch (s) {
  case HS_NULL: return suiro_set_error(SUIRO_ERR, "%s: the %s is NULL", fn, k);
  case HS_DEAD:
    return suiro_set_error(SUIRO_ERR, "%s: this %s was %s (a stale handle)", fn, k,
                           kind == HANDLE_POOL ? "stopped" : "freed");
  case HS_FOREIGN:
    return suiro_set_error(SUIRO_ERR,
                           "%s: this %s belongs to process %d (inherited across fork: a forked child "
                           "cannot use its parent's pools; create a pool in the child)",
                           fn, k, (int)((const handle_live *)obj)->pid);
  }
  return suiro_set_error(SUIRO_ERR, "%s: not a suiro %s (a stray or corrupted pointer)", fn, k);
}

/* ---- quarantine --------------------------------------------------------------------------- */

#define QUARANTINE 64
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint32_t kind;
  void *ring[QUARANTINE];
  unsigned next;
} quarantine[3] = { { HANDLE_POOL, { 0 }, 0 }, { HANDLE_MAP, { 0 }, 0 }, { HANDLE_BUF, { 0 }, 0 } };

void handle_retire(void *obj, size_t size) {
  if (!obj) return;
  handle_live *h = obj;
  uint32_t kind = (uint32_t)(atomic_load_explicit(&h->word, memory_order_relaxed) >> 32);
  if (size > sizeof *h) memset((char *)obj + sizeof *h, 0xdd, size - sizeof *h);
  atomic_store_explicit(&h->word, (uint64_t)HANDLE_DEAD << 32 | kind, memory_order_relaxed);
  void *old = obj;
  pthread_mutex_lock(&q_lock);
  for (int i = 0; i < 3; i++)
    if (quarantine[i].kind == kind) {
      unsigned k = quarantine[i].next++ % QUARANTINE;
      old = quarantine[i].ring[k];
      quarantine[i].ring[k] = obj;
      break;
    }
  pthread_mutex_unlock(&q_lock);
  free(old);
}
