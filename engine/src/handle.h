/* handle.h — the live word every public handle (pool, map, buffer) starts with (see handle.c). */
#ifndef SUIRO_HANDLE_H
#define SUIRO_HANDLE_H

#include "internal.h"

/* Kind tags (ASCII, so a dump reads "POOL"...). */
#define HANDLE_POOL 0x4c4f4f50u /* "POOL" */
#define HANDLE_MAP 0x2050414du  /* "MAP " */
#define HANDLE_BUF 0x20465542u  /* "BUF " */
#define HANDLE_CHAN 0x4e414843u /* "CHAN" */
#define HANDLE_DEAD 0x44414544u /* "DEAD" */

/* The first member of struct suiro_pool, suiro_map and suiro_buf. word = kind << 32 | epoch while
 * the handle lives; a retired handle reads DEAD << 32 | kind. pid: the process that made it. */
typedef struct handle_live {
  _Atomic uint64_t word;
  int32_t pid;
  uint32_t pad;
} handle_live;

/* This process's fork epoch: 1 in a process that never forked from a suiro process; each fork
 * gives the child a new one, so handles made before the fork read as another process's. */
extern _Atomic uint32_t handle_epoch_now;
static inline uint32_t handle_epoch(void) { return atomic_load_explicit(&handle_epoch_now, memory_order_relaxed); }

/* The fast path of every entry: a live handle of this kind made in this process's epoch. */
static inline int handle_ok(const void *obj, uint32_t kind) {
  return SUIRO_LIKELY(obj != NULL) &&
         SUIRO_LIKELY(atomic_load_explicit(&((const handle_live *)obj)->word, memory_order_relaxed) ==
                      ((uint64_t)kind << 32 | handle_epoch()));
}
/* return `ret` from the calling entry `fn` unless obj is such a handle (the error names fn). */
#define HANDLE_GUARD(obj, kind, fn, ret)                                                     \
  do {                                                                                       \
    if (!handle_ok((obj), (kind))) {                                                         \
      handle_check((obj), (kind), (fn));                                                     \
      return ret;                                                                            \
    }                                                                                        \
  } while (0)
#define POOL_GUARD(p, fn, ret) HANDLE_GUARD(p, HANDLE_POOL, fn, ret)
#define MAP_GUARD(m, fn, ret) HANDLE_GUARD(m, HANDLE_MAP, fn, ret)

/* Marks h live: kind, the current epoch and this process. Registers the fork handlers. */
void handle_init(handle_live *h, uint32_t kind);

/* The outcomes of handle_state. */
enum { HS_OK = 0, HS_NULL, HS_DEAD, HS_FOREIGN, HS_BAD };
int handle_state(const void *obj, uint32_t kind);

/* SUIRO_OK, or SUIRO_ERR with "<fn>: <what is wrong>": NULL, freed, made by another process (the
 * parent of a fork: "this pool belongs to process N"), or not a handle of this kind. */
suiro_status handle_check(const void *obj, uint32_t kind, const char *fn);

/* 1 when obj is a live handle of this kind made before a fork this process came out of. */
static inline int handle_inherited(const void *obj) {
  if (!obj) return 0;
  uint64_t w = atomic_load_explicit(&((const handle_live *)obj)->word, memory_order_relaxed);
  return (uint32_t)(w >> 32) != HANDLE_DEAD && (uint32_t)w != handle_epoch();
}

/* Retires a handle instead of free(): poisons it (a dead word, the rest 0xdd) and keeps it in a
 * small quarantine per kind, so a stale pointer reads a dead word rather than reused memory; the
 * oldest quarantined handle is freed when the quarantine is full. */
void handle_retire(void *obj, size_t size);

/* Fork hooks of the modules that keep process-wide state (called by handle.c's pthread_atfork
 * handlers in the forking thread: prepare before fork, parent and child after it). */
void buf_fork_prepare(void);
void buf_fork_parent(void);
void buf_fork_child(void);
void pool_fork_prepare(void);
void pool_fork_parent(void);
void pool_fork_child(void);

#endif
