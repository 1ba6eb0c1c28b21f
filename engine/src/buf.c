/*
 * buf.c — zero-copy buffers (suiro_buf_*, suiro_zc_*): shared regions that cross processes by name,
 * recycled warm.
 *
 * A large value is written once into a region; what crosses a pool is the region's name. The
 * receiver maps the same pages (a view). A region carries a reference count in its first cache
 * line, shared by every process: each holder (a view, or a message in flight) owns one
 * reference. The process that drops the last reference keeps the region mapped in its free list,
 * already faulted in, and reuses it for its next large value: a fresh 80 MB mapping costs tens of
 * milliseconds to fault in, a write into warm pages a few.
 *
 * Ownership and ordering
 *   - refs counts holders. A sender grants the receiver a reference before publishing the task or
 *     result that names the region (refs and grants both +1; the publication's release ordering
 *     covers them). A receiver takes a grant over (grants -1, CAS, never below 0) or, when none is
 *     left (a forged or replayed name), adds a reference of its own (refs +1, CAS, only while
 *     refs > 0: a region nobody holds is in someone's free list). So every holder owns exactly the
 *     reference it drops: a message can make a receiver release only what it was given.
 *     fetch_sub (acq_rel) when a holder lets go; whoever takes refs to 0 is the only holder left
 *     and owns the region: it may reuse (CAS 0 -> 1), unmap or unlink it.
 *   - Trust: names are accepted only from this process's pool family (its own regions and its
 *     pool host's); sizes are checked against the mapping as made here, never against the shared
 *     header, which any process of the family can write.
 *   - The process-local table (name -> mapping) is guarded by a mutex; its entries count local
 *     holders, so one mapping serves every view of a region in this process.
 *   - Names: a worker names its regions after its pool (/suiro_<host>_<start>_<pool>d<n>), so
 *     they outlive the worker and are removed when the pool stops; a host names its own
 *     (/suiro_<pid>_<start>_a<n>), removed when its last pool stops. A region whose name was
 *     removed while still mapped here is "unnamed": it is still readable, but sending it again
 *     copies it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "handle.h"
#include "region.h"
#include "suiro_bind.h"
#include "suiro_chan.h"

#define REGION_MAGIC 0x6e6f69676572756full /* "uregion" */
#define REGION_HDR 64                     /* data starts one cache line in */

typedef struct region_hdr {
  uint64_t magic;
  _Atomic int64_t refs;   /* holders: views, messages in flight, the owner */
  uint64_t capacity;      /* data bytes the region can hold (a hint: readers trust their mapping) */
  int32_t creator;
  int32_t pad;
  _Atomic int64_t grants; /* of refs, those granted to messages in flight and not yet taken */
} region_hdr;

struct suiro_buf {
  handle_live live;   /* first: checked at every entry (handle.c) */
  char name[SUIRO_NAME_MAX];
  int named;          /* the name still exists in /dev/shm */
  void *map;
  size_t map_size;
  size_t cap;         /* data bytes as mapped here: the truth every bound is checked against */
  region_hdr *hdr;
  size_t size;        /* bytes in use (what the holder asked for / the sender announced) */
  int local;          /* holders in this process */
  int in_free;        /* ours alone, kept warm for reuse */
  int in_cache;       /* held elsewhere only: mapping kept for the next view of it */
  uint64_t freed_at;  /* for eviction: oldest first */
  uint64_t dev, ino;  /* the file mapped (a private copy maps it again: region_map_cow) */
  region_cow *cows;   /* private copies handed out here (suiro_zc_private), lock held */
  suiro_buf *next;    /* hash chain */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define NBUCKETS 256
static suiro_buf *buckets[NBUCKETS];
static size_t free_bytes, free_count;
static size_t cache_count, cache_bytes; /* mappings kept of regions held elsewhere */
#define CACHE_CAP 16
static size_t free_cap_bytes = (size_t)512 << 20;
static size_t free_cap_count = 64;

/* The pool layer's services (buf.h); until a pool installs them, no recycling and no home. */
static int no_push(const char *n, uint64_t c, uint64_t l) { (void)n; (void)c; (void)l; return 0; }
static int no_pop(size_t b, char *n, uint64_t *c) { (void)b; (void)n; (void)c; return 0; }
static int no_home(void) { return 0; }
static buf_env env = { no_push, no_pop, no_home };

void buf_set_env(const buf_env *e) {
  pthread_mutex_lock(&lock);
  env = *e;
  pthread_mutex_unlock(&lock);
}

size_t suiro_zc_floor = 32 * 1024;

static unsigned bucket_of(const char *name) {
  return (unsigned)(suiro_hash64(name, strlen(name)) % NBUCKETS);
}

static suiro_buf *lookup(const char *name) {
  for (suiro_buf *b = buckets[bucket_of(name)]; b; b = b->next)
    if (strcmp(b->name, name) == 0) return b;
  return NULL;
}

static void table_add(suiro_buf *b) {
  unsigned k = bucket_of(b->name);
  b->next = buckets[k];
  buckets[k] = b;
}

static void table_remove(suiro_buf *b) {
  suiro_buf **p = &buckets[bucket_of(b->name)];
  while (*p && *p != b) p = &(*p)->next;
  if (*p) *p = b->next;
}

static void destroy(suiro_buf *b, int unlink_name) {
  table_remove(b);
  munmap(b->map, b->map_size);
  region_cow_forget(b->dev, b->ino); /* private mappings kept of it (region.c) go with it */
  if (unlink_name && b->named) region_file_unlink(b->name);
  handle_retire(b, sizeof *b); /* a stale pointer reads a dead word (handle.c) */
}

/* Evicts free regions, oldest first (the largest among equals), until within the caps. */
static void evict_locked(size_t need_bytes) {
  while (free_count > free_cap_count || free_bytes + need_bytes > free_cap_bytes) {
    suiro_buf *victim = NULL;
    for (int k = 0; k < NBUCKETS; k++)
      for (suiro_buf *b = buckets[k]; b; b = b->next)
        if (b->in_free && (!victim || b->freed_at < victim->freed_at ||
                           (b->freed_at == victim->freed_at && b->cap > victim->cap)))
          victim = b;
    if (!victim) return;
    free_bytes -= victim->cap;
    free_count--;
    destroy(victim, 1);
  }
}

/* ---- the pool family ------------------------------------------------------------------------
 * A family is a tree of processes: a host, its pools' workers, the pools those workers start, and
 * so on down. Every name in the tree carries the root host's identity ("/suiro_<pid>_<id>_", its
 * family root): a worker names its own regions after its pool, and the pools it hosts after its
 * root (pool.c), so what a worker may read, its own pools' workers may read when it passes it on,
 * and a host reads what comes back up from any depth. Names this process accepts: its own
 * identity's and, in a worker, its family root's. The worker sets the latter when it attaches
 * (worker.c), from its pool's name. */
static char worker_family[SUIRO_NAME_MAX]; /* "/suiro_<root pid>_<root id>_", or "" */
static char worker_prefix[SUIRO_NAME_MAX + 16]; /* a worker's own regions: "<pool name>d<pid>_" */

/* The family root at the head of a pool's name: 0, or -1 when the name has no such head. */
static int name_root(const char *name, char *out, size_t cap, int *pid, uint64_t *id) {
  unsigned p;
  unsigned long long i;
  int n = 0;
  if (sscanf(name, "/suiro_%x_%llx_%n", &p, &i, &n) != 2 || n == 0) return -1;
  if (out) snprintf(out, cap, "%.*s", n, name);
  if (pid) *pid = (int)p;
  if (id) *id = (uint64_t)i;
  return 0;
}

void buf_set_worker(const char *pool_name) {
  pthread_mutex_lock(&lock);
  worker_family[0] = worker_prefix[0] = 0;
  if (pool_name && name_root(pool_name, worker_family, sizeof worker_family, NULL, NULL) == 0)
    snprintf(worker_prefix, sizeof worker_prefix, "%sd%x_", pool_name, (unsigned)getpid());
  pthread_mutex_unlock(&lock);
}

int buf_family_root(int *pid, uint64_t *id) {
  pthread_mutex_lock(&lock);
  int nested = worker_family[0] && name_root(worker_family, NULL, 0, pid, id) == 0;
  pthread_mutex_unlock(&lock);
  return nested;
}

static int in_family(const char *name) {
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  char own[SUIRO_NAME_MAX];
  int n = snprintf(own, sizeof own, "/suiro_%x_%llx_", (unsigned)pid, (unsigned long long)start);
  if (strncmp(name, own, (size_t)n) == 0) return 1;
  return worker_family[0] && strncmp(name, worker_family, strlen(worker_family)) == 0;
}

/* The prefix for regions this process creates. */
static void name_prefix(char *out, size_t cap) {
  if (worker_prefix[0]) {
    snprintf(out, cap, "%s", worker_prefix);
  } else {
    int pid;
    uint64_t start;
    region_identity(&pid, &start);
    snprintf(out, cap, "/suiro_%x_%llx_a", (unsigned)pid, (unsigned long long)start);
  }
}

static size_t round_capacity(size_t bytes) {
  size_t unit = (size_t)64 << 10;
  if (bytes <= unit) return unit;
  if (bytes < ((size_t)1 << 20)) { /* powers of two below 1 MiB */
    size_t c = unit;
    while (c < bytes) c <<= 1;
    return c;
  }
  size_t mib = (size_t)1 << 20;
  return (bytes + mib - 1) / mib * mib;
}

/* ---- the shared count --------------------------------------------------------------------- */

/* A reference for a holder that has none: a grant if one is in flight, else a reference of its
 * own, but never for a region nobody holds (it belongs to a free list). 0 or -1. */
static int take_ref(region_hdr *h) {
  int64_t g = atomic_load_explicit(&h->grants, memory_order_relaxed);
  while (g > 0)
    if (atomic_compare_exchange_weak_explicit(&h->grants, &g, g - 1, memory_order_acq_rel, memory_order_relaxed))
      return 0;
  int64_t r = atomic_load_explicit(&h->refs, memory_order_relaxed);
  while (r > 0)
    if (atomic_compare_exchange_weak_explicit(&h->refs, &r, r + 1, memory_order_acq_rel, memory_order_relaxed))
      return 0;
  return -1;
}

/* Ownership of a region nobody holds (a warm free one): refs 0 -> 1, grants cleared. */
static int claim_free(region_hdr *h) {
  int64_t zero = 0;
  if (!atomic_compare_exchange_strong_explicit(&h->refs, &zero, 1, memory_order_acq_rel, memory_order_relaxed))
    return -1;
  atomic_store_explicit(&h->grants, 0, memory_order_relaxed);
  return 0;
}

/* A region held again leaves the warm free list or the mapping cache it was on; lock held. */
static void off_lists(suiro_buf *b) {
  if (b->in_free) {
    b->in_free = 0;
    free_bytes -= b->cap;
    free_count--;
  }
  if (b->in_cache) {
    b->in_cache = 0;
    cache_count--;
    cache_bytes -= b->cap;
  }
}

/* Maps a region by name (or finds it mapped), with one more local holder and no change to the
 * shared count; the caller takes or claims the reference. Lock not held. */
static suiro_status map_region(const char *name, suiro_buf **out) {
  *out = NULL;
  if (!name || name[0] != '/' || strlen(name) >= SUIRO_NAME_MAX || strchr(name + 1, '/'))
    return suiro_set_error(SUIRO_ERR, "shared value name is malformed");
  if (!in_family(name))
    return suiro_set_error(SUIRO_ERR, "shared value %s belongs to another pool family: refused", name);
  pthread_mutex_lock(&lock);
  suiro_buf *b = lookup(name);
  if (b) {
    b->local++;
    pthread_mutex_unlock(&lock);
    *out = b;
    return SUIRO_OK;
  }
  pthread_mutex_unlock(&lock);
  int fd = region_file_open(name, 1);
  if (fd < 0) {
    if (errno == ENOENT)
      return suiro_set_error(SUIRO_PEER_GONE, "shared value %s is gone (its pool stopped?)", name);
    if (errno == EACCES) return suiro_set_error(SUIRO_ERR, "shared value %s is not this user's: refused", name);
    return suiro_set_errno("region: open");
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size < REGION_HDR || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX / 2) {
    close(fd);
    return suiro_set_error(SUIRO_ERR, "shared value %s is truncated", name);
  }
  void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return suiro_set_errno("region: mmap");
  region_hdr *h = map;
  if (h->magic != REGION_MAGIC) {
    munmap(map, (size_t)sb.st_size);
    return suiro_set_error(SUIRO_ERR, "%s is not a suiro shared value", name);
  }
  b = calloc(1, sizeof *b);
  if (!b) {
    munmap(map, (size_t)sb.st_size);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  handle_init(&b->live, HANDLE_BUF);
  snprintf(b->name, sizeof b->name, "%s", name);
  b->map = map;
  b->map_size = (size_t)sb.st_size;
  b->dev = (uint64_t)sb.st_dev;
  b->ino = (uint64_t)sb.st_ino;
  b->cap = b->map_size - REGION_HDR;
  b->hdr = h;
  b->named = 1;
  b->local = 1;
  pthread_mutex_lock(&lock);
  suiro_buf *raced = lookup(name); /* another thread mapped it meanwhile: use that one */
  if (raced) {
    raced->local++;
    pthread_mutex_unlock(&lock);
    munmap(map, b->map_size);
    free(b);
    *out = raced;
    return SUIRO_OK;
  }
  table_add(b);
  pthread_mutex_unlock(&lock);
  *out = b;
  return SUIRO_OK;
}

/* Drops a local holder added by map_region that never got a reference (lock not held). */
static void cache_mapping(suiro_buf *b);
static void unmap_holder(suiro_buf *b) {
  pthread_mutex_lock(&lock);
  if (--b->local == 0 && !b->in_free && !b->in_cache) cache_mapping(b);
  pthread_mutex_unlock(&lock);
}

suiro_buf *suiro_buf_alloc(size_t bytes) {
  if (suiro_budget_check("suiro_buf_alloc: bytes", 1, bytes) != SUIRO_OK) return NULL;
  pthread_mutex_lock(&lock);
  /* the smallest warm region that fits without wasting more than half of it */
  suiro_buf *best = NULL;
  for (int k = 0; k < NBUCKETS; k++)
    for (suiro_buf *b = buckets[k]; b; b = b->next)
      if (b->in_free && b->named && b->cap >= bytes && b->cap / 2 <= bytes + ((size_t)64 << 10) &&
          (!best || b->cap < best->cap))
        best = b;
  if (best) {
    best->in_free = 0;
    free_bytes -= best->cap;
    free_count--;
    if (claim_free(best->hdr) == 0) {
      best->local = 1;
      best->size = bytes;
      pthread_mutex_unlock(&lock);
      return best;
    }
    /* someone holds it after all (a stale name came back): leave it to them */
    cache_count++;
    cache_bytes += best->cap;
    best->in_cache = 1;
    best->freed_at = suiro_ns();
  }
  pthread_mutex_unlock(&lock);

  /* Next best: a region another process of the pool let go of (it may be mapped here already). */
  char rname[SUIRO_NAME_MAX];
  uint64_t rcap;
  while (env.recycle_pop(bytes, rname, &rcap)) {
    suiro_buf *r;
    if (map_region(rname, &r) != SUIRO_OK) continue; /* gone meanwhile */
    if (r->cap < bytes || claim_free(r->hdr) != 0) {
      unmap_holder(r);
      continue;
    }
    pthread_mutex_lock(&lock);
    off_lists(r);
    pthread_mutex_unlock(&lock);
    r->size = bytes;
    return r;
  }

  if (bytes > (size_t)SIZE_MAX / 2 - REGION_HDR) {
    suiro_set_error(SUIRO_ERR, "region: %zu bytes is too large", bytes);
    return NULL;
  }
  size_t capacity = round_capacity(bytes);
  suiro_buf *b = calloc(1, sizeof *b);
  if (!b) {
    suiro_set_error(SUIRO_ERR, "out of memory");
    return NULL;
  }
  handle_init(&b->live, HANDLE_BUF);
  char prefix[SUIRO_NAME_MAX + 16];
  name_prefix(prefix, sizeof prefix);
  int fd = -1;
  b->map_size = REGION_HDR + capacity;
  /* Warm regions of our own that nobody uses hold room in /dev/shm: when it lacks the room for
   * this one, they go first (oldest first), before the region goes to the fallback directory. */
  pthread_mutex_lock(&lock);
  if (free_count) {
    uint64_t room = region_dir_free("/dev/shm");
    if (room != UINT64_MAX && room < b->map_size) {
      size_t keep = free_bytes > b->map_size - room ? free_bytes - (b->map_size - room) : 0;
      size_t cap = free_cap_bytes;
      free_cap_bytes = keep;
      evict_locked(0);
      free_cap_bytes = cap;
    }
  }
  pthread_mutex_unlock(&lock);
  /* A random number after the prefix: names nobody can guess ahead (a taken one is skipped). The
   * whole region is reserved here, once per region: a warm one is reused without a system call. */
  for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
    unsigned tag = (unsigned)region_random64();
    if (snprintf(b->name, sizeof b->name, "%s%x", prefix, tag) >= (int)(sizeof b->name - sizeof REGION_FILE_MARK)) {
      suiro_set_error(SUIRO_ERR, "region: name prefix %s is too long", prefix);
      free(b);
      return NULL;
    }
    fd = region_file_create(b->name, sizeof b->name, b->map_size, b->map_size);
    if (fd < 0 && errno != EEXIST) {
      free(b); /* region_file_create said why (the size, the free space, SUIRO_SHM_DIR) */
      return NULL;
    }
  }
  if (fd < 0) {
    suiro_set_error(SUIRO_ERR, "region: every name tried was taken");
    free(b);
    return NULL;
  }
  b->map = mmap(NULL, b->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  struct stat sb;
  if (fstat(fd, &sb) == 0) {
    b->dev = (uint64_t)sb.st_dev;
    b->ino = (uint64_t)sb.st_ino;
  }
  close(fd);
  if (b->map == MAP_FAILED) {
    suiro_set_errno("region: mmap");
    region_file_unlink(b->name);
    free(b);
    return NULL;
  }
  b->cap = capacity;
  b->hdr = b->map;
  b->hdr->magic = REGION_MAGIC;
  b->hdr->capacity = capacity;
  b->hdr->creator = (int32_t)getpid();
  atomic_store_explicit(&b->hdr->refs, 1, memory_order_relaxed);
  atomic_store_explicit(&b->hdr->grants, 0, memory_order_relaxed);
  b->named = 1;
  b->local = 1;
  b->size = bytes;
  pthread_mutex_lock(&lock);
  table_add(b);
  pthread_mutex_unlock(&lock);
  return b;
}

suiro_status suiro_buf_open(const char *name, size_t size, suiro_buf **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_buf_open: out (argument 3) is NULL");
  *out = NULL;
  suiro_buf *b;
  suiro_status st = map_region(name, &b);
  if (st != SUIRO_OK) return st;
  if (size > b->cap) {
    unmap_holder(b);
    return suiro_set_error(SUIRO_ERR, "shared value %s holds %zu bytes, a message announced %zu", name, b->cap, size);
  }
  if (take_ref(b->hdr) != 0) {
    unmap_holder(b);
    return suiro_set_error(SUIRO_ERR, "shared value %s is free (a stale or forged reference)", name);
  }
  pthread_mutex_lock(&lock);
  off_lists(b); /* it came back to us */
  b->size = size;
  pthread_mutex_unlock(&lock);
  *out = b;
  return SUIRO_OK;
}

/* Fork (handle.c): a buffer made before the fork is the parent's; the child's copy of its
 * holders owns no reference in the shared count. Its data stays readable; it cannot be sent
 * (no name), and dropping it only unmaps it here. */
#define BUF_GUARD(b, fn, ret) HANDLE_GUARD(b, HANDLE_BUF, fn, ret)
static int buf_readable(const suiro_buf *b, const char *fn) {
  int s = handle_state(b, HANDLE_BUF);
  if (s == HS_OK || s == HS_FOREIGN) return 1;
  handle_check(b, HANDLE_BUF, fn);
  return 0;
}

void buf_fork_prepare(void) { pthread_mutex_lock(&lock); }
void buf_fork_parent(void) { pthread_mutex_unlock(&lock); }
void buf_fork_child(void) {
  /* The child forgets the parent's table: its free list and cached mappings are the parent's
   * (reusing one would write into a region the parent also reuses), and lookups must not find
   * them. Mappings nobody here holds stay mapped until exit (they cost no memory). */
  memset(buckets, 0, sizeof buckets);
  free_bytes = free_count = cache_count = 0;
  pthread_mutex_unlock(&lock);
}

void suiro_buf_ref(suiro_buf *b) { /* a grant for a message about to name b */
  BUF_GUARD(b, "suiro_buf_ref", );
  atomic_fetch_add_explicit(&b->hdr->refs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&b->hdr->grants, 1, memory_order_release);
}

void suiro_buf_unsend(suiro_buf *b) { /* the message was never sent: take the grant back */
  BUF_GUARD(b, "suiro_buf_unsend", );
  int64_t g = atomic_load_explicit(&b->hdr->grants, memory_order_relaxed);
  while (g > 0)
    if (atomic_compare_exchange_weak_explicit(&b->hdr->grants, &g, g - 1, memory_order_acq_rel, memory_order_relaxed)) {
      atomic_fetch_sub_explicit(&b->hdr->refs, 1, memory_order_relaxed); /* the sender still holds one */
      return;
    }
}

int suiro_buf_holders(suiro_buf *b) {
  if (!buf_readable(b, "suiro_buf_holders")) return 0;
  pthread_mutex_lock(&lock);
  int n = b->local;
  pthread_mutex_unlock(&lock);
  return n;
}

void suiro_buf_hold(suiro_buf *b) {
  if (!buf_readable(b, "suiro_buf_hold")) return;
  if (!handle_inherited(b)) atomic_fetch_add_explicit(&b->hdr->refs, 1, memory_order_relaxed);
  pthread_mutex_lock(&lock);
  b->local++;
  pthread_mutex_unlock(&lock);
}

/* Keeps a mapping nobody here holds (LRU of CACHE_CAP mappings and the free list's byte cap: a
 * mapping keeps its pages even once the region's name is gone); lock held. */
static void cache_mapping(suiro_buf *b) {
  b->in_cache = 1;
  b->freed_at = suiro_ns();
  cache_count++;
  cache_bytes += b->cap;
  while (cache_count > CACHE_CAP || cache_bytes > free_cap_bytes) {
    suiro_buf *victim = NULL;
    for (int k = 0; k < NBUCKETS; k++)
      for (suiro_buf *c = buckets[k]; c; c = c->next)
        if (c->in_cache && (!victim || c->freed_at < victim->freed_at ||
                            (c->freed_at == victim->freed_at && c->cap > victim->cap)))
          victim = c;
    if (!victim) break;
    cache_count--;
    cache_bytes -= victim->cap;
    destroy(victim, 0);
  }
}

void suiro_buf_unref(suiro_buf *b) {
  if (!b) return;
  if (!buf_readable(b, "suiro_buf_unref")) return; /* a buffer freed already */
  pthread_mutex_lock(&lock);
  if (b->local <= 0) { /* no holder here: a second unref of the same holder */
    pthread_mutex_unlock(&lock);
    suiro_set_error(SUIRO_ERR, "suiro_buf_unref: %s has no holder in this process (unreferenced twice?)", b->name);
    return;
  }
  if (handle_inherited(b)) { /* the parent's (fork): no reference of ours in the shared count */
    if (--b->local == 0) {
      munmap(b->map, b->map_size);
      region_cow_forget(b->dev, b->ino);
      handle_retire(b, sizeof *b);
    }
    pthread_mutex_unlock(&lock);
    return;
  }
  int64_t left = atomic_fetch_sub_explicit(&b->hdr->refs, 1, memory_order_acq_rel) - 1;
  b->local--;
  if (left == 0 && b->local == 0 && b->named && b->hdr->creator != (int32_t)getpid() &&
      env.recycle_push(b->name, b->cap, free_cap_bytes)) {
    /* Another process made it: offer it to the pool (its maker likely still has it mapped and
     * warm) and keep our mapping a while in case it comes back to us. */
    cache_mapping(b);
  } else if (left == 0 && b->local == 0) {
    /* Ours alone now: keep it warm for the next large value. Not another process's that no pool
     * took back (too large for its list, or a region of a worker's own pool forwarded up to us):
     * its name lives only as long as its maker's pool, which may stop before we would reuse it.
     * Nobody holds it (refs 0) and no list has it, so its name goes now: /dev/shm given back. */
    if (b->named && b->hdr->creator == (int32_t)getpid()) {
      evict_locked(b->cap);
      b->in_free = 1;
      b->freed_at = suiro_ns();
      free_bytes += b->cap;
      free_count++;
      evict_locked(0);
    } else {
      destroy(b, 1);
    }
  } else if (b->local == 0) {
    /* Others still hold it: keep the mapping a while, since views of one region tend to come back
     * (a value sent on, returned, sent again), and mapping costs more than the round trip. */
    cache_mapping(b);
  }
  pthread_mutex_unlock(&lock);
}

size_t buf_mapped_bytes(const suiro_buf *b) { return b->cap; }

void *suiro_buf_data(const suiro_buf *b) { return buf_readable(b, "suiro_buf_data") ? (char *)b->map + REGION_HDR : NULL; }
size_t suiro_buf_size(const suiro_buf *b) { return buf_readable(b, "suiro_buf_size") ? b->size : 0; }
size_t suiro_buf_offset(const suiro_buf *b) { (void)b; return REGION_HDR; }
const char *suiro_buf_name(const suiro_buf *b) {
  if (handle_state(b, HANDLE_BUF) != HS_OK) return NULL; /* freed, or the parent's: send a copy */
  return b->named ? b->name : NULL;
}

/* ---- zero-copy references (suiro_bind.h, section 4) ------------------------------------------ */

/* ---- private copies (suiro_bind.h, section 4; region_map_cow) ------------------------------- */

void *suiro_zc_private(suiro_buf *b, const void *data, size_t bytes) {
  if (!buf_readable(b, "suiro_zc_private")) return NULL;
  const char *base = (const char *)b->map, *p = data;
  if (!p || p < base + REGION_HDR || (size_t)(p - base) > b->map_size || bytes > b->map_size - (size_t)(p - base)) {
    suiro_set_error(SUIRO_ERR, "suiro_zc_private: the bytes are not inside region %s as mapped here", b->name);
    return NULL;
  }
  region_cow *c = malloc(sizeof *c);
  if (!c) {
    suiro_set_error(SUIRO_ERR, "out of memory");
    return NULL;
  }
  /* the name may be removed meanwhile: then the file is not the one mapped (dev/ino) or gone,
   * and region_map_cow copies instead */
  const char *name = suiro_buf_name(b);
  if (region_map_cow(name, b->dev, b->ino, base, (size_t)(p - base), bytes, c) != 0) {
    free(c);
    return NULL;
  }
  pthread_mutex_lock(&lock);
  c->next = b->cows;
  b->cows = c;
  pthread_mutex_unlock(&lock);
  return (char *)c->base + c->data_off;
}

static region_cow *cow_of(suiro_buf *b, const void *p, size_t bytes) { /* lock held */
  for (region_cow *c = b->cows; c; c = c->next) {
    const char *lo = c->base;
    if ((const char *)p >= lo && (size_t)((const char *)p - lo) <= c->len && bytes <= c->len - (size_t)((const char *)p - lo))
      return c;
  }
  return NULL;
}

void suiro_zc_unprivate(suiro_buf *b, void *copy) {
  if (!copy || !buf_readable(b, "suiro_zc_unprivate")) return;
  pthread_mutex_lock(&lock);
  region_cow **pp = &b->cows;
  while (*pp && (char *)(*pp)->base + (*pp)->data_off != (char *)copy) pp = &(*pp)->next;
  region_cow *c = *pp;
  if (c) *pp = c->next;
  pthread_mutex_unlock(&lock);
  if (!c) {
    suiro_set_error(SUIRO_ERR, "suiro_zc_unprivate: not a private copy of region %s", b->name);
    return;
  }
  region_unmap_cow(c);
  free(c);
}

/* A copy of the private copy holding [p, p+bytes), 0; or -1 when p is in none of b's. The page
 * table is read (region_cow_written) outside the lock: the copy lives while its view does, and
 * the caller holds that view. */
static int find_cow(suiro_buf *b, const void *p, size_t bytes, region_cow *out) {
  pthread_mutex_lock(&lock);
  region_cow *c = cow_of(b, p, bytes);
  if (c) *out = *c;
  pthread_mutex_unlock(&lock);
  return c ? 0 : -1;
}

int suiro_zc_written(suiro_buf *b, const void *p, size_t bytes) {
  if (!buf_readable(b, "suiro_zc_written")) return 1;
  region_cow c;
  return find_cow(b, p, bytes, &c) != 0 || region_cow_written(&c, p, bytes);
}

/* The region's own bytes for [p, p+bytes) of a private copy no page of which was written here, or
 * NULL (written, or not a copy of b): a view sent on unchanged goes by reference. */
static const char *shared_of(suiro_buf *b, const char *p, size_t bytes) {
  region_cow c;
  if (find_cow(b, p, bytes, &c) != 0 || region_cow_written(&c, p, bytes)) return NULL;
  return (const char *)b->map + c.file_off + (size_t)(p - (const char *)c.base);
}

int suiro_zc_put(suiro_wire_writer *w, suiro_buf *b, const void *data, size_t bytes, int type, int order, int ndim,
                 const uint64_t *dims) {
  const char *name = b ? suiro_buf_name(b) : NULL;
  if (!name || !w || !data) return WIRE_ERR;
  const char *base = (const char *)b->map;
  const char *p = data;
  if (p < base || p >= base + b->map_size) p = shared_of(b, p, bytes); /* a private copy, unwritten */
  if (!p || p < base + REGION_HDR || (size_t)(p - base) > b->map_size || bytes > b->map_size - (size_t)(p - base))
    return WIRE_ERR;
  suiro_wire_ref ref;
  memset(&ref, 0, sizeof ref);
  ref.name = (suiro_wire_str){ name, strlen(name) };
  ref.offset = (uint64_t)(p - base);
  ref.length = bytes;
  ref.type = type;
  ref.order = ndim ? order : 0;
  ref.ndim = ndim;
  ref.dims = dims;
  if (suiro_wire_put_ref(w, &ref) != WIRE_OK) return WIRE_ERR;
  suiro_buf_ref(b); /* the receiver's reference, taken over when it maps the region */
  return WIRE_OK;
}

suiro_status suiro_zc_open(const suiro_wire_ref *ref, suiro_view *v) {
  if (!v || !ref) return suiro_set_error(SUIRO_ERR, "suiro_zc_open: %s is NULL", !v ? "v" : "ref");
  memset(v, 0, sizeof *v);
  if (ref->type == WIRE_REF_CHAN) /* a face that binds channels opens it with suiro_chan_open */
    return suiro_set_error(SUIRO_ERR, "a channel endpoint was received, but this language does not bind "
                                      "channels yet: refused");
  char name[SUIRO_NAME_MAX];
  if (ref->name.len == 0 || ref->name.len >= sizeof name || memchr(ref->name.ptr, 0, ref->name.len))
    return suiro_set_error(SUIRO_ERR, "reference: region name of %zu bytes", ref->name.len);
  memcpy(name, ref->name.ptr, ref->name.len);
  name[ref->name.len] = 0;
  uint64_t end;
  if (ref->offset < REGION_HDR || ref->offset % 8 || __builtin_add_overflow(ref->offset, ref->length, &end))
    return suiro_set_error(SUIRO_ERR, "reference to %s: offset %llu is not inside a region", name,
                           (unsigned long long)ref->offset);
  size_t es = ref->type == WIRE_REF_BYTES || ref->type == WIRE_REF_WIRE ? 1 : suiro_wire_type_size(ref->type);
  if (!es || ref->length % es)
    return suiro_set_error(SUIRO_ERR, "reference to %s: length %llu is not whole elements", name,
                           (unsigned long long)ref->length);
  suiro_buf *b;
  suiro_status st = map_region(name, &b);
  if (st != SUIRO_OK) return st;
  if (end > b->map_size) {
    unmap_holder(b);
    return suiro_set_error(SUIRO_ERR, "reference to %s: bytes %llu..%llu are outside its %zu bytes", name,
                           (unsigned long long)ref->offset, (unsigned long long)end, b->map_size);
  }
  if (take_ref(b->hdr) != 0) {
    unmap_holder(b);
    return suiro_set_error(SUIRO_ERR, "reference to %s: the region is free (a stale or forged reference)", name);
  }
  pthread_mutex_lock(&lock);
  off_lists(b);
  v->fresh = b->local == 1;
  if (b->size < end - REGION_HDR) b->size = (size_t)(end - REGION_HDR);
  pthread_mutex_unlock(&lock);
  v->buf = b;
  v->data = (char *)b->map + ref->offset;
  v->bytes = ref->length;
  v->count = ref->length / es;
  return SUIRO_OK;
}

void suiro_zc_revoke(const void *buf, size_t len) {
  if (!buf) return;
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, buf, len) != WIRE_OK) return;
  while (suiro_wire_next(&r, &it) == WIRE_OK) {
    if (it.tag != WIRE_REF) continue;
    if (it.ref.type == WIRE_REF_CHAN) { /* an endpoint comes back to its sender's handle (chan.c) */
      suiro_chan_take_back(&it.ref);
      continue;
    }
    suiro_view v;
    if (suiro_zc_open(&it.ref, &v) == SUIRO_OK) suiro_buf_unref(v.buf); /* takes the grant, drops it */
  }
}

/* Called when a pool stops: its workers' regions are removed (names only: mappings here stay
 * valid); with the last pool of the process gone, the host's own regions go too. */
void buf_pool_stopped(const char *pool_name, int last_pool) {
  char wprefix[SUIRO_NAME_MAX + 2];
  snprintf(wprefix, sizeof wprefix, "%sd", pool_name);
  char aprefix[SUIRO_NAME_MAX];
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  snprintf(aprefix, sizeof aprefix, "/suiro_%x_%llx_a", (unsigned)pid, (unsigned long long)start);
  pthread_mutex_lock(&lock);
  for (int k = 0; k < NBUCKETS; k++) {
    suiro_buf *b = buckets[k];
    while (b) {
      suiro_buf *next = b->next;
      int in_pool = strncmp(b->name, wprefix, strlen(wprefix)) == 0;
      int ours = last_pool && strncmp(b->name, aprefix, strlen(aprefix)) == 0;
      if (in_pool || ours) {
        if (b->in_free) {
          free_bytes -= b->cap;
          free_count--;
          destroy(b, 1);
        } else if (b->in_cache) {
          cache_count--;
          cache_bytes -= b->cap;
          destroy(b, 0);
        } else {
          b->named = 0; /* still readable here; sending it again copies it */
        }
      }
      b = next;
    }
  }
  pthread_mutex_unlock(&lock);
  region_unlink_prefix(wprefix + 1);
  if (last_pool) region_unlink_prefix(aprefix + 1);
}

int suiro_zc_active(void) { return env.has_home(); }

void suiro_zc_configure(size_t floor, size_t free_bytes_cap, size_t free_count_cap) {
  pthread_mutex_lock(&lock);
  if (floor) suiro_zc_floor = floor;
  if (free_bytes_cap) free_cap_bytes = free_bytes_cap;
  if (free_count_cap) free_cap_count = free_count_cap;
  evict_locked(0);
  pthread_mutex_unlock(&lock);
}
