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
  int fd;         /* kept open (writable regions) for later reservations, else -1 */
  char name[SUIRO_NAME_MAX];
};

/* Creates a region whose name carries owner_pid/owner_start (the process whose death makes the
 * region an orphan) and then `tag` (letters, may be empty) before a random number:
 * /suiro_<pid>_<id>_<tag><n>. Its first `reserve` bytes are reserved (region_reserve adds more
 * later); the rest must be reserved before it is touched. suiro_region_create uses the calling
 * process, no tag, and reserves everything. */
suiro_status region_create_owned(size_t size, size_t reserve, int owner_pid, uint64_t owner_start,
                                 const char *tag, suiro_region **out);
/* Reserves bytes [off, off+len) of a region opened writable here (a no-op where reserved). */
suiro_status region_reserve(suiro_region *r, size_t off, size_t len);
/* The calling process's identity as written into region names: its pid and a random id. */
void region_identity(int *pid, uint64_t *id);
uint64_t region_random64(void); /* from getrandom */

/* ---- region files (region.c): /dev/shm, or the fallback directory (SUIRO_SHM_DIR) ---------- */
#define REGION_FILE_MARK ".f" /* a name ending so lives in the fallback directory */
/* Creates the file of a new region `name` (buffer of `cap` bytes: the mark may be appended),
 * `size` bytes of which the first `reserve` are reserved. An fd, or -1: errno EEXIST when the
 * name is taken (try another), else with the error set (naming the size and the free space). */
int region_file_create(char *name, size_t cap, size_t size, size_t reserve);
/* Opens an existing region file; -1 with errno (ENOENT gone, EACCES not this user's). */
int region_file_open(const char *name, int writable);
int region_file_unlink(const char *name);
suiro_status region_file_reserve(int fd, size_t off, size_t len);
/* The fallback directory as resolved here ("" none usable, "off" disabled). */
const char *region_fallback_dir(void);
uint64_t region_dir_free(const char *dir); /* free bytes, UINT64_MAX unknown */
void region_human(uint64_t bytes, char *out, size_t cap);
/* Unlinks every region whose name starts with /<prefix> (prefix without the slash). */
int region_unlink_prefix(const char *prefix);
/* Makes sure this process holds its liveness anchor (once per process; see region.c). */
suiro_status region_hold_anchor(void);
void region_release_anchor(void); /* one hold less; the anchor goes with the last */
/* 1 while the owner of names /suiro_<pid>_<start>_* lives (holds its anchor), 0 once it is gone. */
int region_owner_alive(unsigned pid, uint64_t start);
/* Unlinks everything of a dead owner (nothing while it lives); returns how many. */
int region_reap_owner(int pid, uint64_t start);

/* ---- private copy-on-write views (region.c) ------------------------------------------------- */
typedef struct region_cow {
  void *base;       /* the private mapping (page aligned, len bytes) */
  size_t len;
  size_t file_off;  /* base's offset in the region's file */
  size_t data_off;  /* the mapped value's first byte: base + data_off */
  int anon;         /* 1: a plain copy (the region's file could not be mapped again) */
  int keepable;     /* the whole file, mapped here: may be kept for the next view of it */
  uint64_t dev, ino;
  struct region_cow *next;
} region_cow;
/* Maps bytes [off, off+len) of region `name` MAP_PRIVATE (copy on write), checking it is the file
 * (dev, ino) whose shared mapping is at shared_base; when it cannot be (the name is gone), copies
 * them from shared_base + off into private memory instead. 0, or -1 with the error set. */
int region_map_cow(const char *name, uint64_t dev, uint64_t ino, const void *shared_base, size_t off, size_t len,
                   region_cow *out);
/* Gives the mapping back: kept for the next view of the same file when no page of it was
 * written here (region.c, "Kept mappings"), else unmapped. */
void region_unmap_cow(region_cow *c);
/* Unmaps the kept mappings of file (dev, ino) (its shared mapping goes); region_cow_kept: how many
 * mappings are kept (tests). */
void region_cow_forget(uint64_t dev, uint64_t ino);
int region_cow_kept(void);
/* 1 when a page of [p, p+len) inside c was written here (or that cannot be told), 0 when every
 * page is still the region's (/proc/self/pagemap: a written page is anonymous). */
int region_cow_written(const region_cow *c, const void *p, size_t len);
/* Tests: 0 makes region_cow_written read the page table itself, as on kernels without PAGEMAP_SCAN
 * (1 again: use the ioctl where the kernel has it). */
void region_pagemap_scan(int enabled);

#endif
