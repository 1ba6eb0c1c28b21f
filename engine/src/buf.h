/* buf.h — zero-copy buffers inside the engine (see buf.c). */
#ifndef SUIRO_BUF_H
#define SUIRO_BUF_H

#include "internal.h"

/* What buffers need from the pool layer, given to buf.c rather than called, so that the buffer
 * layer sits below pools and never calls up into them. pool.c installs it (pool_install_buf_env). */
typedef struct buf_env {
  /* The pool-wide recycle list of the pool a region belongs to (by its name, or this worker's
   * pool): offer a free region; take one of at least `bytes`. 1 on success. */
  /* (offered regions hold room in /dev/shm: no more than `limit` bytes of them, pool-wide) */
  int (*recycle_push)(const char *region_name, uint64_t capacity, uint64_t limit);
  int (*recycle_pop)(size_t bytes, char *name_out, uint64_t *capacity);
  /* Regions have a home in this process: it hosts a pool, or is a worker. */
  int (*has_home)(void);
} buf_env;
void buf_set_env(const buf_env *env);

/* A pool stopped: its workers' regions are removed (names only: mappings here stay valid); with
 * the last pool of the process gone, the host's own regions go too. */
void buf_pool_stopped(const char *pool_name, int last_pool);
/* Data bytes as mapped here (not the shared header's word). */
size_t buf_mapped_bytes(const suiro_buf *b);
/* A worker's family (the root in its pool's name) and the prefix of its own regions; NULL clears. */
void buf_set_worker(const char *pool_name);
/* In a worker: 1 with the identity of its family's root (the pools it hosts are named after it);
 * else 0 (this process is a root: its pools carry its own identity). */
int buf_family_root(int *pid, uint64_t *id);

#endif
