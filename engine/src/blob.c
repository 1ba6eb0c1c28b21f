/*
 * blob.c — content-addressed blobs shared by every process of a pool.
 *
 * Bindings store things many tasks refer to (a Lua function's bytecode, say) once, under a
 * 64-bit key derived from the content, and tasks carry only the key. Each blob is a region of its
 * own, named after the pool and the key, so any process of the pool can open it without a
 * directory; the pool's stop removes them (their names carry the pool's name and 'b').
 *
 * Ownership and ordering: the first writer creates the region with O_EXCL, copies the bytes and
 * then sets `ready` with release; readers check `ready` with acquire. A writer that finds the
 * name taken stops: the key names the content, so the existing blob holds the same bytes. A task
 * referring to a blob is published after the put returns, so its readers see `ready` set.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct blob_hdr {
  _Atomic uint32_t ready;
  uint32_t pad;
  uint64_t len;
} blob_hdr;

static void blob_name(suiro_pool *p, uint64_t key, char *out, size_t cap) {
  snprintf(out, cap, "%sb%016llx", suiro_region_name(p->region), (unsigned long long)key);
}

suiro_status suiro_blob_put(suiro_pool *p, uint64_t key, const void *data, size_t len) {
  POOL_GUARD(p, "suiro_blob_put", SUIRO_ERR);
  if (!data && len) return suiro_set_error(SUIRO_ERR, "suiro_blob_put: data is NULL with len %zu", len);
  char name[SUIRO_NAME_MAX + 24];
  blob_name(p, key, name, sizeof name);
  if (len > SIZE_MAX - sizeof(blob_hdr)) return suiro_set_error(SUIRO_ERR, "blob: %zu bytes is too large", len);
  size_t size = sizeof(blob_hdr) + len;
  /* The same key in /dev/shm or in the fallback directory: whichever holds it, it is stored. */
  int have = region_file_open(name, 0);
  if (have < 0) {
    char file[sizeof name + sizeof REGION_FILE_MARK];
    snprintf(file, sizeof file, "%s%s", name, REGION_FILE_MARK);
    have = region_file_open(file, 0);
  }
  if (have >= 0) {
    close(have);
    return SUIRO_OK;
  }
  if (errno == EACCES) return suiro_set_error(SUIRO_ERR, "blob %s is not this user's: refused", name);
  int fd = region_file_create(name, sizeof name, size, size);
  if (fd < 0) {
    if (errno == EEXIST) return SUIRO_OK; /* another process of the pool stored it meanwhile */
    return SUIRO_ERR;                     /* region_file_create said why */
  }
  void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (a == MAP_FAILED) {
    region_file_unlink(name);
    return suiro_set_errno("blob: mmap");
  }
  blob_hdr *h = a;
  h->len = len;
  memcpy(h + 1, data, len);
  st_rel(&h->ready, 1);
  munmap(a, size);
  return SUIRO_OK;
}

suiro_status suiro_blob_get(suiro_pool *p, uint64_t key, void **data, size_t *len) {
  if (!data || !len) return suiro_set_error(SUIRO_ERR, "suiro_blob_get: %s is NULL", !data ? "data" : "len");
  *data = NULL;
  *len = 0;
  POOL_GUARD(p, "suiro_blob_get", SUIRO_ERR);
  char name[SUIRO_NAME_MAX + 24];
  blob_name(p, key, name, sizeof name);
  int fd = region_file_open(name, 0);
  if (fd < 0 && errno == ENOENT) { /* it may be in the fallback directory */
    char file[sizeof name + sizeof REGION_FILE_MARK];
    snprintf(file, sizeof file, "%s%s", name, REGION_FILE_MARK);
    fd = region_file_open(file, 0);
  }
  if (fd < 0) {
    if (errno == ENOENT)
      return suiro_set_error(SUIRO_PEER_GONE, "blob %016llx is not stored in this pool", (unsigned long long)key);
    if (errno == EACCES) return suiro_set_error(SUIRO_ERR, "blob %016llx is not this user's: refused", (unsigned long long)key);
    return suiro_set_errno("blob: open");
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(blob_hdr)) {
    close(fd);
    return suiro_set_error(SUIRO_ERR, "blob %016llx is truncated", (unsigned long long)key);
  }
  void *a = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (a == MAP_FAILED) return suiro_set_errno("blob: mmap");
  const blob_hdr *h = a;
  suiro_status st = SUIRO_OK;
  if (!ld_acq(&((blob_hdr *)h)->ready) || h->len > (size_t)sb.st_size - sizeof *h) {
    st = suiro_set_error(SUIRO_ERR, "blob %016llx is incomplete", (unsigned long long)key);
  } else {
    *data = malloc(h->len ? h->len : 1);
    if (!*data) st = suiro_set_error(SUIRO_ERR, "out of memory");
    else {
      memcpy(*data, h + 1, h->len);
      *len = h->len;
    }
  }
  munmap(a, (size_t)sb.st_size);
  return st;
}
