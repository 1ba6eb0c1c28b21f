/* region.h — named shared-memory regions and their owners (see region.c). */
#ifndef SUIRO_REGION_H
#define SUIRO_REGION_H

#include <sys/mman.h>

#include "internal.h"

#define SUIRO_NAME_MAX 64

struct suiro_region {
  void *addr;
  size_t size;
  int writable;
  int anchored;   /* its creation holds this process's anchor (released when it is closed) */
  char name[SUIRO_NAME_MAX];
};

/* Creates a region whose name carries owner_pid/owner_start (the process whose death makes the
 * region an orphan) and then `tag` (letters, may be empty) before a counter:
 * /suiro_<pid>_<start>_<tag><counter>. suiro_region_create uses the calling process, no tag. */
suiro_status region_create_owned(size_t size, int owner_pid, uint64_t owner_start, const char *tag,
                              suiro_region **out);
/* The calling process's identity as written into region names. */
void region_identity(int *pid, uint64_t *start);
/* Unlinks every region whose name starts with /<prefix> (prefix without the slash). */
int region_unlink_prefix(const char *prefix);
/* Makes sure this process holds its liveness anchor (once per process; see region.c). */
suiro_status region_hold_anchor(void);
void region_release_anchor(void); /* one hold less; the anchor goes with the last */
/* 1 while the owner of names /suiro_<pid>_<start>_* lives (holds its anchor), 0 once it is gone. */
int region_owner_alive(unsigned pid, uint64_t start);
/* Unlinks everything of a dead owner (nothing while it lives); returns how many. */
int region_reap_owner(int pid, uint64_t start);

#endif
