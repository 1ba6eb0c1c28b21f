/*
 * region.c — named POSIX shared-memory regions (suiro_region_*), their owners' liveness anchors, and
 * reaping of orphans.
 *
 * Ownership: a region belongs to the process named in it ("owner"): /suiro_<pid>_<start>_<n>,
 * pid and start time in hex (unique names; the pid is only a label). Whoever creates a region may
 * unlink it; suiro_reap() unlinks every region whose owner is gone.
 *
 * Liveness is a lock, not a pid: before its first region an owner creates its anchor,
 * /suiro_<pid>_<start>_o, and holds an open-file-description write lock on it for the rest of its
 * life. The kernel drops the lock when the process dies, however it dies, so a reaper that can take
 * the lock knows the owner is gone — across PID namespaces sharing /dev/shm (where pids mean
 * nothing), pid reuse and zombies alike. The anchor is locked under a temporary name and renamed
 * into place, so no reaper ever sees an owner's anchor unlocked while the owner lives.
 * Regions are created mode 0600 with O_EXCL, so a name is never reused while it exists. No shared
 * words live here: each user of a region documents its own ordering rules.
 */
#include "region.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static _Atomic uint32_t name_counter;
static _Atomic int counter_seeded;

static uint32_t next_counter(void) {
  /* Start from a random value so a crashed process whose pid and start time were somehow reused
   * cannot collide with its own leftovers. */
  if (!atomic_load(&counter_seeded)) {
    uint32_t seed = (uint32_t)(suiro_ns() ^ ((uint64_t)getpid() << 16));
    uint32_t zero = 0;
    atomic_compare_exchange_strong(&name_counter, &zero, seed | 1u);
    atomic_store(&counter_seeded, 1);
  }
  return atomic_fetch_add(&name_counter, 1);
}

static pid_t cached_pid;
static uint64_t cached_start;

void region_identity(int *pid, uint64_t *start) {
  pid_t now = getpid();
  if (cached_pid != now) { /* first call, or we are a forked child */
    cached_start = suiro_proc_start(now);
    cached_pid = now;
  }
  *pid = now;
  *start = cached_start;
}

/* ---- liveness anchors ---------------------------------------------------------------------- */

static pthread_mutex_t anchor_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t anchor_pid; /* the process whose anchor anchor_fd holds (a forked child makes its own) */
static int anchor_fd = -1;
static int anchor_users;  /* regions and pools that need it: the anchor goes with the last one */

static int lock_fd(int fd, int type) {
  struct flock fl = { .l_type = (short)type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
  return fcntl(fd, F_OFD_SETLK, &fl);
}

suiro_status region_hold_anchor(void) {
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  pthread_mutex_lock(&anchor_lock);
  if (anchor_pid != pid) anchor_users = 0; /* a forked child: the parent's anchor is not ours */
  if (anchor_pid == pid && anchor_fd >= 0) {
    anchor_users++;
    pthread_mutex_unlock(&anchor_lock);
    return SUIRO_OK;
  }
  char tmp[128], final[128];
  snprintf(tmp, sizeof tmp, "/dev/shm/.suiro-anchor-%x-%llx", (unsigned)pid, (unsigned long long)suiro_ns());
  snprintf(final, sizeof final, "/dev/shm/suiro_%x_%llx_o", (unsigned)pid, (unsigned long long)start);
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  suiro_status st = SUIRO_OK;
  if (fd < 0) {
    st = suiro_set_errno("shared memory anchor: open in /dev/shm");
  } else if (lock_fd(fd, F_WRLCK) != 0) {
    st = suiro_set_errno("shared memory anchor: lock");
    close(fd);
    unlink(tmp);
  } else if (rename(tmp, final) != 0) {
    st = suiro_set_errno("shared memory anchor: rename");
    close(fd);
    unlink(tmp);
  } else {
    anchor_fd = fd;
    anchor_pid = pid;
    anchor_users = 1;
  }
  pthread_mutex_unlock(&anchor_lock);
  return st;
}

void region_release_anchor(void) {
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  pthread_mutex_lock(&anchor_lock);
  if (anchor_pid == pid && anchor_fd >= 0 && --anchor_users <= 0) {
    char name[96];
    snprintf(name, sizeof name, "/suiro_%x_%llx_o", (unsigned)pid, (unsigned long long)start);
    shm_unlink(name); /* first the name, then the lock: a reaper never finds it unlocked */
    close(anchor_fd);
    anchor_fd = -1;
    anchor_users = 0;
  }
  pthread_mutex_unlock(&anchor_lock);
}

/* 1 when the owner pid/start still lives (holds its anchor's lock). An owner without an anchor is
 * gone: every owner makes its anchor before its first region. */
int region_owner_alive(unsigned pid, uint64_t start) {
  int self;
  uint64_t self_start;
  region_identity(&self, &self_start);
  if ((unsigned)self == pid && self_start == start) return 1;
  char path[128];
  snprintf(path, sizeof path, "/dev/shm/suiro_%x_%llx_o", pid, (unsigned long long)start);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : 1; /* cannot tell: leave it */
  int free_lock = lock_fd(fd, F_WRLCK) == 0;
  close(fd); /* drops our lock too, if we took it */
  return !free_lock;
}

suiro_status region_create_owned(size_t size, int owner_pid, uint64_t owner_start, const char *tag,
                              suiro_region **out) {
  *out = NULL;
  if (size == 0) return suiro_set_error(SUIRO_ERR, "region size must be > 0");
  int self;
  uint64_t self_start;
  region_identity(&self, &self_start);
  int anchored = self == owner_pid && self_start == owner_start;
  if (anchored) {
    suiro_status ast = region_hold_anchor();
    if (ast != SUIRO_OK) return ast;
  }
  suiro_region *r = calloc(1, sizeof *r);
  if (!r) {
    if (anchored) region_release_anchor();
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  r->anchored = anchored;
  int fd = -1;
  for (int attempt = 0; attempt < 8; attempt++) {
    snprintf(r->name, sizeof r->name, "/suiro_%x_%llx_%s%x", (unsigned)owner_pid,
             (unsigned long long)owner_start, tag ? tag : "", next_counter());
    fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    suiro_status st = suiro_set_errno("shm_open");
    if (r->anchored) region_release_anchor();
    free(r);
    return st;
  }
  if (ftruncate(fd, (off_t)size) != 0) {
    suiro_status st = suiro_set_errno("ftruncate of shared memory (is /dev/shm full?)");
    close(fd);
    shm_unlink(r->name);
    if (r->anchored) region_release_anchor();
    free(r);
    return st;
  }
  void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (a == MAP_FAILED) {
    suiro_status st = suiro_set_errno("mmap");
    shm_unlink(r->name);
    if (r->anchored) region_release_anchor();
    free(r);
    return st;
  }
  r->addr = a;
  r->size = size;
  r->writable = 1;
  *out = r;
  return SUIRO_OK;
}

suiro_status suiro_region_create(size_t size, suiro_region **out) {
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  return region_create_owned(size, pid, start, "", out);
}

suiro_status suiro_region_open(const char *name, int writable, suiro_region **out) {
  *out = NULL;
  if (!name || name[0] != '/' || strlen(name) >= SUIRO_NAME_MAX)
    return suiro_set_error(SUIRO_ERR, "invalid region name '%s'", name ? name : "(null)");
  int fd = shm_open(name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return suiro_set_error(SUIRO_PEER_GONE, "region %s does not exist", name);
    return suiro_set_errno("shm_open");
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
    close(fd);
    return suiro_set_error(SUIRO_ERR, "region %s has no size", name);
  }
  void *a = mmap(NULL, (size_t)sb.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED, fd, 0);
  close(fd);
  if (a == MAP_FAILED) return suiro_set_errno("mmap");
  suiro_region *r = calloc(1, sizeof *r);
  if (!r) {
    munmap(a, (size_t)sb.st_size);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  r->addr = a;
  r->size = (size_t)sb.st_size;
  r->writable = writable;
  snprintf(r->name, sizeof r->name, "%s", name);
  *out = r;
  return SUIRO_OK;
}

void *suiro_region_addr(const suiro_region *r) { return r->addr; }
size_t suiro_region_size(const suiro_region *r) { return r->size; }
const char *suiro_region_name(const suiro_region *r) { return r->name; }

void suiro_region_close(suiro_region *r, int unlink) {
  if (!r) return;
  if (r->addr) munmap(r->addr, r->size);
  if (unlink) shm_unlink(r->name);
  if (r->anchored) region_release_anchor();
  free(r);
}

int suiro_reap(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  /* Most names share a few owners (this process above all): decide once per owner. */
  struct owner { unsigned pid; uint64_t start; int alive; } seen[32];
  int nseen = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned pid;
    unsigned long long start;
    if (strncmp(e->d_name, "suiro_", 6) != 0) continue;
    if (sscanf(e->d_name + 6, "%x_%llx_", &pid, &start) != 2) continue;
    int alive = -1;
    for (int i = 0; i < nseen; i++)
      if (seen[i].pid == pid && seen[i].start == start) alive = seen[i].alive;
    if (alive < 0) {
      alive = region_owner_alive(pid, start);
      seen[nseen < 32 ? nseen++ : 31] = (struct owner){ pid, start, alive };
    }
    if (alive) continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) n++;
  }
  closedir(d);
  return n;
}

int region_reap_owner(int pid, uint64_t start) {
  if (region_owner_alive((unsigned)pid, start)) return 0;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "suiro_%x_%llx_", (unsigned)pid, (unsigned long long)start);
  return region_unlink_prefix(prefix);
}

int region_unlink_prefix(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  size_t n = strlen(prefix);
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, n) != 0) continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) count++;
  }
  closedir(d);
  return count;
}
