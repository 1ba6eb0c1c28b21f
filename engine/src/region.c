/*
 * region.c — named POSIX shared-memory regions (suiro_region_*), their owners' liveness anchors, and
 * reaping of orphans.
 *
 * Ownership: a region belongs to the process named in it ("owner"): /suiro_<pid>_<id>_<n>, the
 * pid and a random 64-bit id drawn when the process first names a region (getrandom), in hex; <n>
 * is random too. So no other user can predict (and squat) a name before it is made; a name that
 * exists anyway is skipped (O_EXCL, another random <n>). The pid is only a label. Whoever creates
 * a region may unlink it; suiro_reap() unlinks every region whose owner is gone.
 *
 * Liveness is a lock, not a pid: before its first region an owner creates its anchor,
 * /suiro_<pid>_<id>_o, and holds an open-file-description write lock on it for the rest of its
 * life. The kernel drops the lock when the process dies, however it dies, so a reaper that can take
 * the lock knows the owner is gone — across PID namespaces sharing /dev/shm (where pids mean
 * nothing), pid reuse and zombies alike. The anchor is locked under a temporary name and renamed
 * into place, so no reaper ever sees an owner's anchor unlocked while the owner lives.
 * Regions are created mode 0600 with O_EXCL, so a name is never reused while it exists. No shared
 * words live here: each user of a region documents its own ordering rules.
 */
#include "region.h"

#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

uint64_t region_random64(void) {
  uint64_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
  /* no entropy yet (early boot): unpredictable enough to stay unique, and O_EXCL catches the rest */
  static _Atomic uint64_t mix;
  uint64_t x = suiro_ns() ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&mix, 0x9e3779b97f4a7c15ull);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t cached_pid;
static uint64_t cached_id;

void region_identity(int *pid, uint64_t *id) {
  pid_t now = getpid();
  pthread_mutex_lock(&id_lock);
  if (cached_pid != now) { /* first call, or we are a forked child: a new identity */
    cached_id = region_random64() | 1u; /* never 0 */
    cached_pid = now;
  }
  *id = cached_id;
  pthread_mutex_unlock(&id_lock);
  *pid = now;
}

/* A new identity for this process, while it has named nothing yet (its anchor's name was taken). */
static void renew_identity(void) {
  pthread_mutex_lock(&id_lock);
  cached_id = region_random64() | 1u;
  pthread_mutex_unlock(&id_lock);
}

/* ---- where a region's bytes live ---------------------------------------------------------------
 * A region is a file: in /dev/shm (POSIX shared memory) when it has room, else in the fallback
 * directory, SUIRO_SHM_DIR (default $TMPDIR, else /var/tmp; "off" for none), with REGION_FILE_MARK
 * appended to its name so every process of the family knows where to look (a pool's workers get
 * the host's directory in their environment, peer.c). Every byte a region may be written at is
 * reserved (posix_fallocate) before anyone touches it: a full file system is then an error
 * naming the size and the free space, never a SIGBUS on a page fault. */

static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
static char fallback_dir[PATH_MAX]; /* "" when there is none */
static int fallback_off;            /* SUIRO_SHM_DIR=off */

static void resolve_fallback_dir(void) {
  const char *d = getenv("SUIRO_SHM_DIR");
  if (d && (!*d || strcmp(d, "off") == 0 || strcmp(d, "none") == 0)) {
    fallback_off = 1;
    return;
  }
  if (!d) {
    d = getenv("TMPDIR");
    if (!d || d[0] != '/') d = "/var/tmp";
  }
  char real[PATH_MAX];
  if (!realpath(d, real)) { /* missing: keep it as given, the error will name it */
    if (strlen(d) >= sizeof fallback_dir) return;
    snprintf(real, sizeof real, "%s", d);
  }
  size_t n = strlen(real);
  while (n > 1 && real[n - 1] == '/') real[--n] = 0;
  if (strcmp(real, "/dev/shm") == 0) return; /* the same place: no fallback */
  snprintf(fallback_dir, sizeof fallback_dir, "%s", real);
}

const char *region_fallback_dir(void) {
  pthread_once(&dir_once, resolve_fallback_dir);
  return fallback_off ? "off" : fallback_dir;
}

static const char *fdir(void) {
  pthread_once(&dir_once, resolve_fallback_dir);
  return fallback_dir;
}

static int is_file_name(const char *name) {
  size_t n = strlen(name), m = sizeof REGION_FILE_MARK - 1;
  return n > m && strcmp(name + n - m, REGION_FILE_MARK) == 0;
}

static int file_path(const char *name, char *out, size_t cap) {
  const char *d = fdir();
  if (!*d) {
    errno = ENOENT;
    return -1;
  }
  if ((size_t)snprintf(out, cap, "%s/%s", d, name + 1) >= cap) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

uint64_t region_dir_free(const char *dir) {
  struct statvfs sv;
  if (!dir || !*dir || statvfs(dir, &sv) != 0) return UINT64_MAX;
  return (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
}

void region_human(uint64_t b, char *out, size_t cap) {
  const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  if (b == UINT64_MAX) {
    snprintf(out, cap, "unknown");
    return;
  }
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 6) { v /= 1024; i++; }
  snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* The error for bytes that fit nowhere: the size, the free space, and what to do. */
static suiro_status no_room(size_t bytes, int err) {
  char need[32], shm[32], fb[32];
  region_human(bytes, need, sizeof need);
  region_human(region_dir_free("/dev/shm"), shm, sizeof shm);
  const char *d = fdir();
  if (!*d)
    return suiro_set_error(SUIRO_ERR,
                           "shared memory: cannot reserve %s for a region (%s): /dev/shm has %s free and "
                           "the fallback directory is off (SUIRO_SHM_DIR=%s); make room in /dev/shm or set "
                           "SUIRO_SHM_DIR to a directory with room",
                           need, strerror(err), shm, fallback_off ? "off" : "unusable");
  region_human(region_dir_free(d), fb, sizeof fb);
  return suiro_set_error(SUIRO_ERR,
                         "shared memory: cannot reserve %s for a region (%s): /dev/shm has %s free and %s "
                         "(SUIRO_SHM_DIR) has %s free; make room in one of them or set SUIRO_SHM_DIR to a "
                         "directory with room",
                         need, strerror(err), shm, d, fb);
}

static int no_space(int err) { return err == ENOSPC || err == EFBIG || err == ENOMEM || err == EDQUOT; }

/* posix_fallocate, retried when interrupted; 0 or an errno value. */
static int reserve_fd(int fd, off_t off, off_t len) {
  if (len <= 0) return 0;
  int rc;
  do rc = posix_fallocate(fd, off, len);
  while (rc == EINTR);
  return rc;
}

int region_file_create(char *name, size_t cap, size_t size, size_t reserve) {
  if (reserve > size) reserve = size;
  if (size > (size_t)INT64_MAX) {
    suiro_set_error(SUIRO_ERR, "shared memory: a region of %zu bytes is too large", size);
    errno = EFBIG;
    return -1;
  }
  int err = ENOSPC;
  /* /dev/shm first, unless it visibly lacks the room */
  uint64_t room = region_dir_free("/dev/shm");
  if (room == UINT64_MAX || room >= reserve) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) return -1;
    if (fd >= 0) {
      err = ftruncate(fd, (off_t)size) == 0 ? reserve_fd(fd, 0, (off_t)reserve) : errno;
      if (err == 0) return fd;
      close(fd);
      shm_unlink(name);
    } else {
      err = errno;
    }
    if (!no_space(err) && err != EMFILE && err != ENFILE) {
      errno = err;
      suiro_set_errno("shared memory: creating a region in /dev/shm");
      return -1;
    }
  }
  /* the fallback directory */
  size_t n = strlen(name);
  if (!*fdir()) {
    no_room(reserve, err);
    errno = err;
    return -1;
  }
  if (n + sizeof REGION_FILE_MARK > cap || n + sizeof REGION_FILE_MARK > SUIRO_NAME_MAX) {
    suiro_set_error(SUIRO_ERR, "shared memory: region name %s is too long for the fallback directory", name);
    errno = ENAMETOOLONG;
    return -1;
  }
  /* A disk file system allocates as it goes: asking it for more than it has would fill it
   * (for every user) before it fails. */
  uint64_t fb_room = region_dir_free(fdir());
  if (fb_room != UINT64_MAX && fb_room < reserve) {
    no_room(reserve, ENOSPC);
    errno = ENOSPC;
    return -1;
  }
  memcpy(name + n, REGION_FILE_MARK, sizeof REGION_FILE_MARK);
  char path[PATH_MAX];
  int fd = file_path(name, path, sizeof path) == 0
               ? open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
  if (fd < 0) {
    int e = errno;
    name[n] = 0;
    errno = e;
    if (e != EEXIST) suiro_set_errno("shared memory: creating a region in SUIRO_SHM_DIR");
    return -1;
  }
  err = ftruncate(fd, (off_t)size) == 0 ? reserve_fd(fd, 0, (off_t)reserve) : errno;
  if (err == 0) return fd;
  close(fd);
  unlink(path);
  name[n] = 0;
  if (no_space(err)) no_room(reserve, err);
  else {
    errno = err;
    suiro_set_errno("shared memory: creating a region in SUIRO_SHM_DIR");
  }
  errno = err;
  return -1;
}

int region_file_open(const char *name, int writable) {
  int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  int fd;
  if (is_file_name(name)) {
    char path[PATH_MAX];
    fd = file_path(name, path, sizeof path) == 0 ? open(path, flags | O_NOFOLLOW) : -1;
  } else {
    fd = shm_open(name, flags, 0);
  }
  if (fd < 0) return -1;
  /* Only this user's regions: a file someone else put under a name of ours is not one. */
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
    close(fd);
    errno = EACCES;
    return -1;
  }
  return fd;
}

int region_file_unlink(const char *name) {
  if (!is_file_name(name)) return shm_unlink(name);
  char path[PATH_MAX];
  if (file_path(name, path, sizeof path) != 0) return -1;
  return unlink(path);
}

suiro_status region_file_reserve(int fd, size_t off, size_t len) {
  if (off > (size_t)INT64_MAX || len > (size_t)INT64_MAX - off)
    return suiro_set_error(SUIRO_ERR, "shared memory: a reservation of %zu bytes is too large", len);
  struct statvfs sv; /* (more than the file system has would fill it before failing) */
  if (fstatvfs(fd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < len) {
    struct stat sb; /* unless those bytes are allocated already */
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_blocks * 512 < off + len) return no_room(len, ENOSPC);
  }
  int err = reserve_fd(fd, (off_t)off, (off_t)len);
  if (err == 0) return SUIRO_OK;
  if (no_space(err)) return no_room(len, err);
  errno = err;
  return suiro_set_errno("shared memory: reserving room in a region");
}

/* Calls fn(dirfd, file name, region name) for every entry named suiro_* in the fallback directory
 * (only those with the mark) and then in /dev/shm, in that order: the reaper decides on a fallback
 * file by its owner's anchor in /dev/shm, which it may remove in the second pass. */
typedef void (*scan_fn)(int dfd, const char *file, const char *region, void *ctx);
static void scan_regions(scan_fn fn, void *ctx) {
  const char *dirs[2] = { fdir(), "/dev/shm" };
  for (int i = 0; i < 2; i++) {
    if (!*dirs[i]) continue;
    DIR *d = opendir(dirs[i]);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strncmp(e->d_name, "suiro_", 6) != 0) continue;
      /* "/" and the name, without snprintf: every pool's start and stop scans both directories,
       * which other processes' regions may fill (600 instructions an entry, half the scan) */
      char region[300];
      size_t n = strlen(e->d_name); /* at most 255 */
      region[0] = '/';
      memcpy(region + 1, e->d_name, n);
      region[n + 1] = '\0';
      if (i == 0 && !is_file_name(region)) continue;
      fn(dirfd(d), e->d_name, region, ctx);
    }
    closedir(d);
  }
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
  suiro_status st = SUIRO_OK;
  int fd = -1;
  /* Locked under a temporary name, then linked into place without replacing anything: a name
   * that exists (squatted, however unlikely with a random id) gets this process a new identity. */
  for (int attempt = 0; attempt < 8; attempt++) {
    snprintf(tmp, sizeof tmp, "/dev/shm/.suiro-anchor-%x-%016llx", (unsigned)pid,
             (unsigned long long)region_random64());
    snprintf(final, sizeof final, "/dev/shm/suiro_%x_%llx_o", (unsigned)pid, (unsigned long long)start);
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      st = suiro_set_errno("shared memory anchor: open in /dev/shm");
      break;
    }
    if (lock_fd(fd, F_WRLCK) != 0) {
      st = suiro_set_errno("shared memory anchor: lock");
      close(fd);
      unlink(tmp);
      fd = -1;
      break;
    }
    int rc = link(tmp, final);
    int err = errno;
    unlink(tmp);
    if (rc == 0) break;
    close(fd);
    fd = -1;
    if (err != EEXIST) {
      errno = err;
      st = suiro_set_errno("shared memory anchor: link");
      break;
    }
    renew_identity();
    region_identity(&pid, &start);
  }
  if (fd >= 0) {
    anchor_fd = fd;
    anchor_pid = pid;
    anchor_users = 1;
  } else if (st == SUIRO_OK) {
    st = suiro_set_error(SUIRO_ERR, "shared memory anchor: every name tried in /dev/shm was taken");
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

suiro_status region_create_owned(size_t size, size_t reserve, int owner_pid, uint64_t owner_start,
                                 const char *tag, suiro_region **out) {
  *out = NULL;
  if (size == 0) return suiro_set_error(SUIRO_ERR, "region size must be > 0");
  int self;
  uint64_t self_start;
  region_identity(&self, &self_start);
  int anchored = self == owner_pid && self_start == owner_start;
  if (anchored) {
    suiro_status ast = region_hold_anchor();
    if (ast != SUIRO_OK) return ast;
    region_identity(&self, &owner_start); /* the anchor may have renewed it */
  }
  suiro_region *r = calloc(1, sizeof *r);
  if (!r) {
    if (anchored) region_release_anchor();
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  r->anchored = anchored;
  int fd = -1;
  for (int attempt = 0; attempt < 16; attempt++) {
    snprintf(r->name, sizeof r->name, "/suiro_%x_%llx_%s%x", (unsigned)owner_pid,
             (unsigned long long)owner_start, tag ? tag : "", (unsigned)region_random64());
    fd = region_file_create(r->name, sizeof r->name, size, reserve);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    suiro_status st = errno == EEXIST ? suiro_set_error(SUIRO_ERR, "shared memory: every region name tried was taken")
                                      : SUIRO_ERR; /* region_file_create said why */
    if (r->anchored) region_release_anchor();
    free(r);
    return st;
  }
  void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (a == MAP_FAILED) {
    suiro_status st = suiro_set_errno("mmap");
    close(fd);
    region_file_unlink(r->name);
    if (r->anchored) region_release_anchor();
    free(r);
    return st;
  }
  r->fd = fd;
  r->addr = a;
  r->size = size;
  r->writable = 1;
  *out = r;
  return SUIRO_OK;
}

suiro_status suiro_region_create(size_t size, suiro_region **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_region_create: out (argument 2) is NULL");
  int pid;
  uint64_t start;
  region_identity(&pid, &start);
  return region_create_owned(size, size, pid, start, "", out);
}

suiro_status suiro_region_open(const char *name, int writable, suiro_region **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_region_open: out (argument 3) is NULL");
  *out = NULL;
  if (!name || name[0] != '/' || strlen(name) >= SUIRO_NAME_MAX || strchr(name + 1, '/'))
    return suiro_set_error(SUIRO_ERR, "invalid region name '%s'", name ? name : "(null)");
  int fd = region_file_open(name, writable);
  if (fd < 0) {
    if (errno == ENOENT) return suiro_set_error(SUIRO_PEER_GONE, "region %s does not exist", name);
    if (errno == EACCES) return suiro_set_error(SUIRO_ERR, "region %s is not this user's: refused", name);
    return suiro_set_errno("shm_open");
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
    close(fd);
    return suiro_set_error(SUIRO_ERR, "region %s has no size", name);
  }
  void *a = mmap(NULL, (size_t)sb.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED, fd, 0);
  if (a == MAP_FAILED) {
    close(fd);
    return suiro_set_errno("mmap");
  }
  suiro_region *r = calloc(1, sizeof *r);
  if (!r) {
    close(fd);
    munmap(a, (size_t)sb.st_size);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  r->fd = writable ? fd : -1;
  if (!writable) close(fd);
  r->addr = a;
  r->size = (size_t)sb.st_size;
  r->writable = writable;
  snprintf(r->name, sizeof r->name, "%s", name);
  *out = r;
  return SUIRO_OK;
}

suiro_status region_reserve(suiro_region *r, size_t off, size_t len) {
  if (off > r->size || len > r->size - off)
    return suiro_set_error(SUIRO_ERR, "region %s: reserving bytes %zu..+%zu outside its %zu", r->name, off, len, r->size);
  if (r->fd < 0) return suiro_set_error(SUIRO_ERR, "region %s: not writable here", r->name);
  return region_file_reserve(r->fd, off, len);
}

void *suiro_region_addr(const suiro_region *r) { return r ? r->addr : NULL; }
size_t suiro_region_size(const suiro_region *r) { return r ? r->size : 0; }
const char *suiro_region_name(const suiro_region *r) { return r ? r->name : NULL; }

void suiro_region_close(suiro_region *r, int unlink) {
  if (!r) return;
  if (r->addr) munmap(r->addr, r->size);
  if (r->fd >= 0) close(r->fd);
  if (unlink) region_file_unlink(r->name);
  if (r->anchored) region_release_anchor();
  free(r);
}

/* "<pid hex>_<id hex>_..." (what sscanf "%x_%llx_" reads, at a tenth of its cost: the reaper
 * parses every entry of /dev/shm at every pool start). 0, or -1 when it is not such a name. */
static int parse_owner(const char *s, unsigned *pid, unsigned long long *start) {
  char *end;
  if (!isxdigit((unsigned char)*s)) return -1;
  errno = 0;
  unsigned long p = strtoul(s, &end, 16);
  if (*end != '_' || errno || p > UINT_MAX) return -1;
  s = end + 1;
  if (!isxdigit((unsigned char)*s)) return -1;
  unsigned long long v = strtoull(s, &end, 16);
  if (*end != '_' || errno) return -1;
  *pid = (unsigned)p;
  *start = v;
  return 0;
}

/* Most names share a few owners (this process above all): decide once per owner. */
struct reap_ctx {
  struct owner { unsigned pid; uint64_t start; int alive; } seen[32];
  int nseen, n;
};

static void reap_one(int dfd, const char *file, const char *region, void *c) {
  (void)region;
  struct reap_ctx *x = c;
  unsigned pid;
  unsigned long long start;
  if (parse_owner(file + 6, &pid, &start) != 0) return;
  int alive = -1;
  for (int i = 0; i < x->nseen; i++)
    if (x->seen[i].pid == pid && x->seen[i].start == start) alive = x->seen[i].alive;
  if (alive < 0) {
    alive = region_owner_alive(pid, start);
    x->seen[x->nseen < 32 ? x->nseen++ : 31] = (struct owner){ pid, start, alive };
  }
  /* The fallback directory may be shared by processes that do not share this /dev/shm (other
   * mount namespaces, containers): a file there whose owner has no anchor here is not ours to
   * judge. Only an anchor that exists, unlocked, says its owner is gone. */
  if (!alive && is_file_name(region)) {
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/suiro_%x_%llx_o", pid, start);
    if (access(path, F_OK) != 0) return;
  }
  if (!alive && unlinkat(dfd, file, 0) == 0) x->n++;
}

int suiro_reap(void) {
  struct reap_ctx x;
  x.nseen = x.n = 0;
  scan_regions(reap_one, &x);
  return x.n;
}

int region_reap_owner(int pid, uint64_t start) {
  if (region_owner_alive((unsigned)pid, start)) return 0;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "suiro_%x_%llx_", (unsigned)pid, (unsigned long long)start);
  return region_unlink_prefix(prefix);
}

struct prefix_ctx { const char *prefix; size_t n; int count; };

static void unlink_matching(int dfd, const char *file, const char *region, void *c) {
  (void)region;
  struct prefix_ctx *x = c;
  if (strncmp(file, x->prefix, x->n) == 0 && unlinkat(dfd, file, 0) == 0) x->count++;
}

int region_unlink_prefix(const char *prefix) {
  struct prefix_ctx x = { prefix, strlen(prefix), 0 };
  scan_regions(unlink_matching, &x);
  return x.count;
}

/* ---- private copy-on-write views of a region ------------------------------------------------
 * A received value behaves as a private copy: its view is a MAP_PRIVATE mapping of the region's
 * file (in /dev/shm or the fallback directory alike), so nothing is copied until a page is written,
 * and a write — by any code, through any pointer into the view — copies that page for this
 * mapping alone. No other process, and no other view here, ever sees it. The region's shared
 * mapping (its header's counts) is the engine's alone; faces hand out only these. */

/* Kept mappings. A view's private mapping that no page was written through is kept when the view
 * goes (up to COW_KEEP mappings, COW_KEEP_BYTES of address space), and the next view of the same
 * file takes it over: its page table already maps the region's pages, so reading them again
 * faults nothing, and the view costs no open, fstat, mmap or munmap (an 80 MB value read through a
 * fresh mapping faults ~1,300 times here). A kept mapping holds only the file's own pages (pages
 * are written nowhere else in it: checked with PAGEMAP_SCAN when it is given back, and without
 * that ioctl nothing is kept), and those pages are the region's: whatever the region holds when the
 * mapping is taken again is what it reads — a region freed and reused by its maker for another
 * value shows that value, never the old one. A kept mapping serves one view at a time (a second
 * view of the same file maps afresh), so no view here sees another's writes. It maps the whole
 * file, so any later value in the region fits it. Keyed by (dev, ino): a file mapped here cannot
 * be replaced by another of the same number while it is mapped. region_cow_forget drops a file's
 * kept mappings when its shared mapping goes. */
/* /proc/self/pagemap, opened once per process (an fd inherited across fork names the parent). */
static pthread_mutex_t pagemap_lock = PTHREAD_MUTEX_INITIALIZER;
static int pagemap_fd = -1;
static pid_t pagemap_pid;

#define COW_KEEP 16
#define COW_KEEP_BYTES ((size_t)1 << 30)
typedef struct {
  void *base;
  size_t len;
  uint64_t dev, ino, used;
} cow_kept;
static pthread_mutex_t cow_lock = PTHREAD_MUTEX_INITIALIZER;
static cow_kept cow_keep[COW_KEEP];
static size_t cow_keep_bytes;
static uint64_t cow_clock;
static int scan_written(int fd, uintptr_t start, uintptr_t end);
static int pagemap_open_locked(void);

/* A kept mapping of (dev, ino) covering [0, end) of the file, taken out of the cache; 0 if none. */
static int cow_take(uint64_t dev, uint64_t ino, size_t end, region_cow *out) {
  int got = 0;
  pthread_mutex_lock(&cow_lock);
  for (int i = 0; i < COW_KEEP && !got; i++) {
    cow_kept *k = &cow_keep[i];
    if (k->base && k->dev == dev && k->ino == ino && k->len >= end) {
      out->base = k->base;
      out->len = k->len;
      out->dev = dev;
      out->ino = ino;
      out->keepable = 1;
      cow_keep_bytes -= k->len;
      memset(k, 0, sizeof *k);
      got = 1;
    }
  }
  pthread_mutex_unlock(&cow_lock);
  return got;
}

int region_map_cow(const char *name, uint64_t dev, uint64_t ino, const void *shared_base, size_t off, size_t len,
                   region_cow *out) {
  memset(out, 0, sizeof *out);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t start = off - off % page;
  size_t span = off - start + (len ? len : 1);
  span = (span + page - 1) / page * page;
  /* a kept mapping of this very file (the file of the caller's shared mapping: dev, ino) */
  if (name && cow_take(dev, ino, start + span, out)) {
    out->file_off = 0;
    out->data_off = off;
    return 0;
  }
  out->len = span;
  out->file_off = start;
  out->data_off = off - start;
  int fd = name ? region_file_open(name, 0) : -1;
  size_t file_len = 0;
  if (fd >= 0) {
    /* the very file the shared mapping was made of (a name removed and made again is not it) */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_dev != dev || (uint64_t)sb.st_ino != ino ||
        (uint64_t)sb.st_size < (uint64_t)off + len) { /* (the last page may end past the end of the file) */
      close(fd);
      fd = -1;
    } else {
      file_len = ((size_t)sb.st_size + page - 1) / page * page;
    }
  }
  if (fd >= 0) {
    /* The whole file, so the mapping can be kept for any later value of the region. Not
     * populated: mapping costs the same for any size (a view sent on unread costs nothing
     * more), and a read faults in the page cache's pages 16 at a time (fault-around; 8 MB read
     * once: ~0.3 ms here, where populating up front took ~0.6-0.8 ms before the first read). A
     * write copies its page. */
    void *m = mmap(NULL, file_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m != MAP_FAILED) {
      out->base = m;
      out->len = file_len;
      out->file_off = 0;
      out->data_off = off;
      out->dev = dev;
      out->ino = ino;
      out->keepable = 1;
      return 0;
    }
  }
  /* no file to map (its name is gone): a plain private copy */
  void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    suiro_set_errno("region: mapping a private copy");
    return -1;
  }
  memcpy((char *)m + out->data_off, (const char *)shared_base + off, len);
  out->base = m;
  out->anon = 1;
  return 0;
}

/* 1 when no page of the whole mapping was written here, by the kernel's word (PAGEMAP_SCAN);
 * 0 when one was or it cannot be told cheaply. */
static int cow_clean(const region_cow *c) {
  pthread_mutex_lock(&pagemap_lock);
  int fd = pagemap_open_locked();
  int scan = fd >= 0 ? scan_written(fd, (uintptr_t)c->base, (uintptr_t)c->base + c->len) : -1;
  pthread_mutex_unlock(&pagemap_lock);
  return scan == 0;
}

void region_unmap_cow(region_cow *c) {
  if (!c->base) return;
  if (c->keepable && !c->anon && c->len <= COW_KEEP_BYTES && cow_clean(c)) {
    cow_kept evicted[COW_KEEP];
    int ne = 0;
    pthread_mutex_lock(&cow_lock);
    /* room: the oldest go first */
    for (;;) {
      int used = 0, oldest = -1;
      for (int i = 0; i < COW_KEEP; i++)
        if (cow_keep[i].base) {
          used++;
          if (oldest < 0 || cow_keep[i].used < cow_keep[oldest].used) oldest = i;
        }
      if (oldest < 0 || (used < COW_KEEP && cow_keep_bytes + c->len <= COW_KEEP_BYTES)) break;
      evicted[ne++] = cow_keep[oldest];
      cow_keep_bytes -= cow_keep[oldest].len;
      memset(&cow_keep[oldest], 0, sizeof cow_keep[oldest]);
    }
    for (int i = 0; i < COW_KEEP; i++)
      if (!cow_keep[i].base) {
        cow_keep[i] = (cow_kept){ c->base, c->len, c->dev, c->ino, ++cow_clock };
        cow_keep_bytes += c->len;
        break;
      }
    pthread_mutex_unlock(&cow_lock);
    for (int i = 0; i < ne; i++) munmap(evicted[i].base, evicted[i].len);
  } else {
    munmap(c->base, c->len);
  }
  c->base = NULL;
}

void region_cow_forget(uint64_t dev, uint64_t ino) {
  cow_kept gone[COW_KEEP];
  int n = 0;
  pthread_mutex_lock(&cow_lock);
  for (int i = 0; i < COW_KEEP; i++)
    if (cow_keep[i].base && cow_keep[i].dev == dev && cow_keep[i].ino == ino) {
      gone[n++] = cow_keep[i];
      cow_keep_bytes -= cow_keep[i].len;
      memset(&cow_keep[i], 0, sizeof cow_keep[i]);
    }
  pthread_mutex_unlock(&cow_lock);
  for (int i = 0; i < n; i++) munmap(gone[i].base, gone[i].len);
}

int region_cow_kept(void) {
  int n = 0;
  pthread_mutex_lock(&cow_lock);
  for (int i = 0; i < COW_KEEP; i++) n += cow_keep[i].base != NULL;
  pthread_mutex_unlock(&cow_lock);
  return n;
}

static int pagemap_open_locked(void) {
  if (pagemap_fd < 0 || pagemap_pid != getpid()) {
    if (pagemap_fd >= 0) close(pagemap_fd);
    pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    pagemap_pid = getpid();
  }
  return pagemap_fd;
}

#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_FILE (1ull << 61)

/* PAGEMAP_SCAN (Linux 6.7): the kernel walks the page tables and stops at the first page that
 * is anonymous (present without the file bit, or swapped out), so a large unwritten view is
 * checked without copying its table out (80 MB: 20,480 entries read by pread took ~0.4-1.7 ms).
 * 1 written, 0 not, -1 when the kernel has no such ioctl (the caller reads the table). The
 * structure is the kernel's uapi (linux/fs.h), spelled here for older headers. */
struct suiro_pm_region {
  uint64_t start, end, categories;
};
struct suiro_pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define SUIRO_PAGEMAP_SCAN _IOWR('f', 16, struct suiro_pm_scan_arg)
#define SUIRO_PAGE_IS_FILE (1ull << 2)
#define SUIRO_PAGE_IS_PRESENT (1ull << 3)
#define SUIRO_PAGE_IS_SWAPPED (1ull << 4)

static int scan_unsupported;
static int scan_disabled;

void region_pagemap_scan(int enabled) {
  pthread_mutex_lock(&pagemap_lock);
  scan_disabled = !enabled;
  pthread_mutex_unlock(&pagemap_lock);
}

static int scan_written(int fd, uintptr_t start, uintptr_t end) {
  if (scan_unsupported || scan_disabled) return -1;
  struct suiro_pm_region r;
  struct suiro_pm_scan_arg a = {
    .size = sizeof a, .start = start, .end = end, .vec = (uintptr_t)&r, .vec_len = 1, .max_pages = 1,
    .category_inverted = SUIRO_PAGE_IS_FILE, .category_mask = SUIRO_PAGE_IS_FILE,
    .category_anyof_mask = SUIRO_PAGE_IS_PRESENT | SUIRO_PAGE_IS_SWAPPED,
    .return_mask = SUIRO_PAGE_IS_FILE | SUIRO_PAGE_IS_PRESENT | SUIRO_PAGE_IS_SWAPPED,
  };
  int n = ioctl(fd, SUIRO_PAGEMAP_SCAN, &a);
  if (n < 0) {
    if (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP) scan_unsupported = 1;
    return -1;
  }
  return n > 0;
}

int region_cow_written(const region_cow *c, const void *p, size_t len) {
  if (c->anon) return 1;
  if (!len) return 0;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t first = (uintptr_t)p / page, last = ((uintptr_t)p + len - 1) / page;
  pthread_mutex_lock(&pagemap_lock);
  pagemap_open_locked();
  int written = pagemap_fd < 0; /* cannot tell: as if written (the value is then sent by copy) */
  if (!written) {
    int scan = scan_written(pagemap_fd, first * page, (last + 1) * page);
    if (scan >= 0) {
      pthread_mutex_unlock(&pagemap_lock);
      return scan;
    }
  }
  uint64_t e[512];
  for (uintptr_t pg = first; !written && pg <= last;) {
    size_t n = last - pg + 1 > 512 ? 512 : (size_t)(last - pg + 1);
    ssize_t got = pread(pagemap_fd, e, n * sizeof e[0], (off_t)(pg * sizeof e[0]));
    if (got <= 0 || got % (ssize_t)sizeof e[0]) {
      written = 1;
      break;
    }
    size_t k = (size_t)got / sizeof e[0];
    /* a page written here is anonymous (present without the file bit, or swapped out); one never
     * touched, or still the file's, is the region's */
    for (size_t i = 0; i < k; i++)
      if ((e[i] & PM_SWAPPED) || ((e[i] & PM_PRESENT) && !(e[i] & PM_FILE))) written = 1;
    pg += k;
  }
  pthread_mutex_unlock(&pagemap_lock);
  return written;
}
