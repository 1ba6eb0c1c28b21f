/*
 * spill.c — values too large for a queue entry or a result slot travel in a shared region.
 *
 * The writer takes a region from its warm free list (buf.c), copies the bytes in, and sends the
 * region's name inline; the message owns one reference. The reader maps the region (usually
 * mapped already), copies the bytes out and drops that reference, which leaves the region warm in
 * the reader's free list for its own next large value. A message that is never read (a released
 * task, a dead worker's claim) is discarded the same way. Regions carry the names of the pool's
 * processes, so whatever is left goes when the pool stops. No shared words here.
 */
#include "pool.h"

#include <stdio.h>
#include <string.h>

suiro_status spill_write(suiro_pool *p, const void *data, size_t n, char *name_out, size_t name_cap) {
  (void)p;
  suiro_buf *b = suiro_buf_alloc(n);
  if (!b) return SUIRO_ERR;
  memcpy(suiro_buf_data(b), data, n);
  const char *name = suiro_buf_name(b);
  size_t nl = strlen(name) + 1;
  if (nl > name_cap) {
    suiro_buf_unref(b);
    return suiro_set_error(SUIRO_ERR, "slot too small for a region name");
  }
  memcpy(name_out, name, nl);
  suiro_buf_ref(b);   /* the message's reference... */
  suiro_buf_unref(b); /* ...replaces ours */
  return SUIRO_OK;
}

suiro_status spill_read(const char *name, size_t n, void *dst) {
  suiro_buf *b;
  suiro_status st = suiro_buf_open(name, n, &b);
  if (st != SUIRO_OK) return st;
  memcpy(dst, suiro_buf_data(b), n);
  suiro_buf_unref(b);
  return SUIRO_OK;
}

void spill_discard(const char *name) {
  suiro_buf *b;
  if (suiro_buf_open(name, 0, &b) == SUIRO_OK) suiro_buf_unref(b);
}
