/*
 * shm.c — named POSIX shared-memory regions, and reaping of orphans.
 *
 * Ownership: a region belongs to the process named in it ("owner"): /suiro_<pid>_<start>_<n>,
 * pid and start (the owner's start time in clock ticks, which tells a live owner from a reused
 * pid) in hex. Whoever creates a region may unlink it; suiro_reap() unlinks every region whose
 * owner is gone. Regions are created mode 0600 with O_EXCL, so a name is never reused while it
 * exists. No shared words live here: each user of a region documents its own ordering rules.
 */
#include "shm.h"

#include <dirent.h>
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

void shm_self_identity(int *pid, uint64_t *start) {
  pid_t now = getpid();
  if (cached_pid != now) { /* first call, or we are a forked child */
    cached_start = suiro_proc_start(now);
    cached_pid = now;
  }
  *pid = now;
  *start = cached_start;
}

suiro_status shm_create_owned(size_t size, int owner_pid, uint64_t owner_start, const char *tag,
                              suiro_region **out) {
  *out = NULL;
  if (size == 0) return suiro_set_error(SUIRO_ERR, "region size must be > 0");
  suiro_region *r = calloc(1, sizeof *r);
  if (!r) return suiro_set_error(SUIRO_ERR, "out of memory");
  int fd = -1;
  for (int attempt = 0; attempt < 8; attempt++) {
    snprintf(r->name, sizeof r->name, "/suiro_%x_%llx_%s%x", (unsigned)owner_pid,
             (unsigned long long)owner_start, tag ? tag : "", next_counter());
    fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    suiro_status st = suiro_set_errno("shm_open");
    free(r);
    return st;
  }
  if (ftruncate(fd, (off_t)size) != 0) {
    suiro_status st = suiro_set_errno("ftruncate of shared memory (is /dev/shm full?)");
    close(fd);
    shm_unlink(r->name);
    free(r);
    return st;
  }
  void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (a == MAP_FAILED) {
    suiro_status st = suiro_set_errno("mmap");
    shm_unlink(r->name);
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
  shm_self_identity(&pid, &start);
  return shm_create_owned(size, pid, start, "", out);
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
  free(r);
}

int suiro_reap(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  /* Most names share a few owners (this process above all): ask /proc once per owner. */
  struct owner { unsigned pid; uint64_t start; } seen[16];
  int nseen = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned pid;
    unsigned long long start;
    if (strncmp(e->d_name, "suiro_", 6) != 0) continue;
    if (sscanf(e->d_name + 6, "%x_%llx_", &pid, &start) != 2) continue;
    if (pid == 0) continue;
    uint64_t now = UINT64_MAX;
    for (int i = 0; i < nseen; i++)
      if (seen[i].pid == pid) now = seen[i].start;
    if (now == UINT64_MAX) {
      now = suiro_proc_start((int)pid);
      seen[nseen < 16 ? nseen++ : 15] = (struct owner){ pid, now };
    }
    if (now == (uint64_t)start) continue; /* owner alive */
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) n++;
  }
  closedir(d);
  return n;
}

int shm_unlink_prefix(const char *prefix) {
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
