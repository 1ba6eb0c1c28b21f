/*
 * spill.c — values too large for a queue entry or a result slot travel in a region of their own.
 *
 * The writer creates a region owned by the pool's host (so it is reaped with the host's
 * segments) and tagged with the pool's name (so suiro_pool_stop removes leftovers), copies the
 * bytes in and passes the region's name inline. The reader copies the bytes out and unlinks the
 * name. Ownership passes with the name: exactly one reader consumes it. No shared words here.
 */
#include "pool.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

suiro_status spill_write(suiro_pool *p, const void *data, size_t n, char *name_out, size_t name_cap) {
  /* tag: the pool region's counter part, then 's' */
  const char *pool_name = suiro_region_name(p->region);
  const char *last = strrchr(pool_name, '_');
  char tag[32];
  snprintf(tag, sizeof tag, "%ss", last ? last + 1 : "");
  suiro_region *r;
  suiro_status st = shm_create_owned(n, p->hdr->host_pid, p->hdr->host_start, tag, &r);
  if (st != SUIRO_OK) return st;
  memcpy(suiro_region_addr(r), data, n);
  if (strlen(suiro_region_name(r)) + 1 > name_cap) {
    suiro_region_close(r, 1);
    return suiro_set_error(SUIRO_ERR, "slot too small for a region name");
  }
  memcpy(name_out, suiro_region_name(r), strlen(suiro_region_name(r)) + 1);
  suiro_region_close(r, 0);
  return SUIRO_OK;
}

suiro_status spill_read(const char *name, size_t n, void *dst) {
  suiro_region *r;
  suiro_status st = suiro_region_open(name, 0, &r);
  if (st != SUIRO_OK) return st;
  if (suiro_region_size(r) < n) {
    suiro_region_close(r, 1);
    return suiro_set_error(SUIRO_ERR, "spilled value %s is shorter than announced", name);
  }
  memcpy(dst, suiro_region_addr(r), n);
  suiro_region_close(r, 1);
  return SUIRO_OK;
}
