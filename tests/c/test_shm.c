/* test_shm.c — regions at the edges of /dev/shm (issue 17, items 1 and 6): a region that fits
 * nowhere is an error naming the way out, not a sparse file that faults later; a file of another
 * user under one of our names is refused; names carry a random id, not the start time. (A small
 * and a full /dev/shm, through every host: tests/shm/run.sh, in a private mount namespace.) */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "region.h"
#include "suiro_bind.h"

static uint64_t free_of(const char *dir) {
  struct statvfs sv;
  if (statvfs(dir, &sv) != 0) return 0;
  return (uint64_t)sv.f_bavail * sv.f_frsize;
}

TEST(a_region_that_fits_nowhere_is_an_error) {
  const char *d = getenv("TMPDIR");
  uint64_t a = free_of("/dev/shm"), b = free_of(d && *d == '/' ? d : "/var/tmp");
  /* with no fallback directory (a child: the directory is resolved once per process) */
  pid_t c = fork();
  if (c == 0) {
    setenv("SUIRO_SHM_DIR", "off", 1);
    suiro_region *r2 = NULL;
    int ok = suiro_region_create((size_t)(a + ((uint64_t)1 << 30)), &r2) != SUIRO_OK &&
             strstr(suiro_last_error(), "SUIRO_SHM_DIR=off") != NULL;
    if (!ok) fprintf(stderr, "child: %s\n", suiro_last_error());
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* with one: more than either has */
  uint64_t big = (a > b ? a : b) + ((uint64_t)1 << 30);
  suiro_region *r = NULL;
  CHECK(suiro_region_create((size_t)big, &r) != SUIRO_OK); /* before: a sparse file, SIGBUS later */
  CHECK(r == NULL);
  const char *e = suiro_last_error();
  CHECK(strstr(e, "cannot reserve") && strstr(e, "/dev/shm has") && strstr(e, "SUIRO_SHM_DIR"));
}

TEST(a_region_is_reserved_before_use) {
  suiro_region *r = NULL;
  size_t n = (size_t)8 << 20;
  CHECK_EQ(suiro_region_create(n, &r), SUIRO_OK);
  char path[128];
  snprintf(path, sizeof path, "/dev/shm%s", suiro_region_name(r));
  struct stat sb;
  CHECK(stat(path, &sb) == 0);
  CHECK((uint64_t)sb.st_blocks * 512 >= n); /* allocated, not sparse */
  suiro_region_close(r, 1);
}

TEST(another_users_file_under_our_name_is_refused) {
  if (geteuid() != 0) return; /* needs root to give a file away */
  int pid;
  uint64_t id;
  region_identity(&pid, &id);
  char name[96], path[128];
  snprintf(name, sizeof name, "/suiro_%x_%llx_planted", (unsigned)pid, (unsigned long long)id);
  snprintf(path, sizeof path, "/dev/shm%s", name);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0666);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, 4096) == 0);
  CHECK(fchown(fd, 65534, 65534) == 0);
  close(fd);
  suiro_region *r = NULL;
  suiro_status st = suiro_region_open(name, 0, &r);
  unlink(path);
  CHECK(st != SUIRO_OK && r == NULL);
  CHECK(strstr(suiro_last_error(), "not this user's") != NULL);
}

TEST(names_carry_a_random_id) {
  suiro_region *a = NULL, *b = NULL;
  CHECK_EQ(suiro_region_create(4096, &a), SUIRO_OK);
  CHECK_EQ(suiro_region_create(4096, &b), SUIRO_OK);
  unsigned pa, pb;
  unsigned long long ia, ib;
  unsigned na, nb;
  CHECK(sscanf(suiro_region_name(a), "/suiro_%x_%llx_%x", &pa, &ia, &na) == 3);
  CHECK(sscanf(suiro_region_name(b), "/suiro_%x_%llx_%x", &pb, &ib, &nb) == 3);
  CHECK(pa == (unsigned)getpid() && pa == pb && ia == ib);
  CHECK(ia != suiro_proc_start(getpid()));  /* not the start time anyone can read in /proc */
  CHECK(nb != na + 1 && na != nb);          /* numbers do not follow each other */
  /* a forked child names its regions with an id of its own */
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t c = fork();
  if (c == 0) {
    int p;
    uint64_t id;
    region_identity(&p, &id);
    ssize_t w = write(fds[1], &id, sizeof id);
    _exit(w == (ssize_t)sizeof id ? 0 : 1);
  }
  uint64_t child_id = 0;
  CHECK(read(fds[0], &child_id, sizeof child_id) == (ssize_t)sizeof child_id);
  int st;
  CHECK(waitpid(c, &st, 0) == c);
  CHECK(child_id != 0 && child_id != ia);
  suiro_region_close(a, 1);
  suiro_region_close(b, 1);
}

/* A received value is a private copy (issue 18, item 5): a copy-on-write mapping of the region's
 * pages, whoever writes through it, never the region itself; unwritten, it is sent on by reference,
 * written, by value. */
TEST(a_private_copy_is_copy_on_write) {
  size_t n = 300000, bytes = n * sizeof(double);
  suiro_buf *b = suiro_buf_alloc(bytes);
  CHECK(b != NULL);
  double *d = suiro_buf_data(b);
  for (size_t i = 0; i < n; i++) d[i] = (double)i;
  char wbuf[512];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, wbuf, sizeof wbuf);
  CHECK_EQ(suiro_zc_put(&w, b, d, bytes, WIRE_T_F64, 0, 0, NULL), WIRE_OK);
  const void *msg;
  size_t len;
  CHECK_EQ(suiro_wire_writer_finish(&w, &msg, &len), WIRE_OK);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, msg, len), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_REF);
  suiro_view v;
  CHECK_EQ(suiro_zc_open(&it.ref, &v), SUIRO_OK); /* takes the grant: a second holder */
  double *p = suiro_zc_private(v.buf, v.data, (size_t)v.bytes), *q = suiro_zc_private(v.buf, v.data, (size_t)v.bytes);
  CHECK(p != NULL && q != NULL && p != (double *)v.data && p != q);
  CHECK(p[0] == 0.0 && p[n - 1] == (double)(n - 1));
  CHECK_EQ(suiro_zc_written(v.buf, p, (size_t)v.bytes), 0);
  /* unwritten: sent on by reference, naming the region's own bytes */
  suiro_wire_writer_init(&w, wbuf, sizeof wbuf);
  CHECK_EQ(suiro_zc_put(&w, v.buf, p + 10, 80, WIRE_T_F64, 0, 0, NULL), WIRE_OK);
  suiro_wire_writer_finish(&w, &msg, &len);
  suiro_wire_reader_init(&r, msg, len);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.ref.offset, (uint64_t)(suiro_buf_offset(b) + 10 * sizeof(double)));
  suiro_zc_revoke(msg, len);
  /* a write (here plain C, as any code through the address) stays in that copy */
  p[0] = -1.0;
  p[n - 1] = -2.0;
  CHECK(d[0] == 0.0 && d[n - 1] == (double)(n - 1)); /* the region */
  CHECK(q[0] == 0.0 && q[n - 1] == (double)(n - 1)); /* another copy of it */
  CHECK_EQ(suiro_zc_written(v.buf, p, (size_t)v.bytes), 1);
  CHECK_EQ(suiro_zc_written(v.buf, p + 1024, 8 * 1024), 0); /* pages in between: still the region's */
  CHECK_EQ(suiro_zc_written(v.buf, q, (size_t)v.bytes), 0);
  /* written: no reference (the caller sends the bytes) */
  suiro_wire_writer_init(&w, wbuf, sizeof wbuf);
  CHECK(suiro_zc_put(&w, v.buf, p, bytes, WIRE_T_F64, 0, 0, NULL) != WIRE_OK);
  suiro_wire_writer_free(&w);
  suiro_zc_unprivate(v.buf, p);
  suiro_zc_unprivate(v.buf, q);
  suiro_buf_unref(v.buf);
  suiro_buf_unref(b);
}

/* One view of b's bytes [d, d+bytes): a reference put, opened (a second holder), its private copy. */
static double *view_of(suiro_buf *b, const double *d, size_t bytes, suiro_buf **vb) {
  char wbuf[512];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, wbuf, sizeof wbuf);
  CHECK_EQ(suiro_zc_put(&w, b, d, bytes, WIRE_T_F64, 0, 0, NULL), WIRE_OK);
  const void *msg;
  size_t len;
  CHECK_EQ(suiro_wire_writer_finish(&w, &msg, &len), WIRE_OK);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, msg, len), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  suiro_view v;
  CHECK_EQ(suiro_zc_open(&it.ref, &v), SUIRO_OK);
  suiro_wire_writer_free(&w);
  *vb = v.buf;
  double *p = suiro_zc_private(v.buf, v.data, (size_t)v.bytes);
  CHECK(p != NULL && p != (const double *)v.data);
  return p;
}

static void unview(suiro_buf *vb, double *p) {
  suiro_zc_unprivate(vb, p);
  suiro_buf_unref(vb);
}

/* A view's private mapping, unwritten, is kept for the next view of the region (its pages are
 * already mapped: no faults, no open/mmap). Kept or not, a view reads what the region holds when
 * it is received — never what an earlier view of it read or wrote — and no two live views share
 * a mapping. */
TEST(a_kept_private_mapping_never_shows_stale_data) {
  size_t n = 1 << 18, bytes = n * sizeof(double); /* 2 MiB */
  suiro_buf *b = suiro_buf_alloc(bytes), *vb;
  CHECK(b != NULL);
  double *d = suiro_buf_data(b);
  for (size_t i = 0; i < n; i++) d[i] = 1.0;
  int kept0 = region_cow_kept();
  double *p = view_of(b, d, bytes, &vb);
  double s = 0;
  for (size_t i = 0; i < n; i++) s += p[i]; /* read through: the page table maps the region's pages */
  CHECK(s == (double)n);
  unview(vb, p);
  CHECK_EQ(region_cow_kept(), kept0 + 1); /* unwritten: kept */
  /* the sender writes the region again (a region freed and reused for its next value) */
  for (size_t i = 0; i < n; i++) d[i] = 2.0;
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  p = view_of(b, d, bytes, &vb);
  CHECK_EQ(region_cow_kept(), kept0); /* taken over, not mapped again */
  s = 0;
  for (size_t i = 0; i < n; i++) s += p[i];
  getrusage(RUSAGE_SELF, &ru1);
  CHECK(s == 2.0 * (double)n);            /* the region's new value, not the one read before */
  CHECK(ru1.ru_minflt - ru0.ru_minflt < 64); /* 512 pages read again: their entries were kept */
  /* given back unwritten again: kept again (and taken by the next view) */
  unview(vb, p);
  CHECK_EQ(region_cow_kept(), kept0 + 1);
  p = view_of(b, d, bytes, &vb);
  CHECK_EQ(region_cow_kept(), kept0);
  CHECK(p[0] == 2.0);
  /* a second live view of the same region maps afresh: writes in one never show in the other */
  double *q = view_of(b, d, bytes, &vb);
  suiro_buf *qb = vb;
  CHECK(q != p);
  q[7] = -1.0;
  CHECK(p[7] == 2.0 && d[7] == 2.0);
  unview(qb, q); /* written: unmapped, not kept */
  CHECK_EQ(region_cow_kept(), kept0);
  /* a view written, then given back: not kept; the next view reads the region, not the write */
  p[3] = -3.0;
  unview(b, p);
  CHECK_EQ(region_cow_kept(), kept0);
  p = view_of(b, d, bytes, &vb);
  CHECK(p[3] == 2.0 && p[7] == 2.0);
  unview(vb, p);
  CHECK_EQ(region_cow_kept(), kept0 + 1);
  /* freed by its last holder and reused warm (the free list) for a new value of another size */
  suiro_buf_unref(b);
  b = suiro_buf_alloc(bytes / 2);
  CHECK(b != NULL);
  d = suiro_buf_data(b);
  for (size_t i = 0; i < n / 2; i++) d[i] = 3.0 + (double)i;
  p = view_of(b, d, bytes / 2, &vb);
  CHECK(p[0] == 3.0 && p[n / 2 - 1] == 3.0 + (double)(n / 2 - 1));
  unview(vb, p);
  suiro_buf_unref(b);
}

/* The same for a region in the fallback directory (a file, "<name>.f"): mapped again privately. */
TEST(a_private_copy_of_a_fallback_region_is_copy_on_write) {
  const char *dir = region_fallback_dir();
  if (!*dir || !strcmp(dir, "off")) return; /* no fallback directory in this environment */
  int made_dir = mkdir(dir, 0700) == 0;
  int pid;
  uint64_t id;
  region_identity(&pid, &id);
  char name[96], path[512];
  snprintf(name, sizeof name, "/suiro_%x_%llx_cowtest.f", (unsigned)pid, (unsigned long long)id);
  snprintf(path, sizeof path, "%s%s", dir, name);
  size_t size = (size_t)1 << 20;
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, (off_t)size) == 0);
  unsigned char *shared = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(shared != MAP_FAILED);
  memset(shared, 7, size);
  struct stat sb;
  CHECK(fstat(fd, &sb) == 0);
  close(fd);
  region_cow c;
  CHECK_EQ(region_map_cow(name, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino, shared, 64, size - 64, &c), 0);
  unsigned char *p = (unsigned char *)c.base + c.data_off;
  CHECK(!c.anon); /* mapped, not copied */
  CHECK(p[0] == 7 && p[size - 65] == 7);
  for (int scan = 1; scan >= 0; scan--) { /* the kernel's PAGEMAP_SCAN, then reading the table */
    region_pagemap_scan(scan);
    CHECK_EQ(region_cow_written(&c, p, size - 64), 0);
  }
  p[5] = 1;
  CHECK(shared[64 + 5] == 7);
  for (int scan = 1; scan >= 0; scan--) {
    region_pagemap_scan(scan);
    CHECK_EQ(region_cow_written(&c, p, size - 64), 1);
    CHECK_EQ(region_cow_written(&c, p + 8192, size - 64 - 8192), 0); /* the pages after it: the file's */
  }
  region_pagemap_scan(1);
  shared[size - 1] = 9; /* an unwritten page is still the file's */
  CHECK(p[size - 65] == 9);
  region_unmap_cow(&c);
  /* another file under the name (dev/ino differ): copied from the shared mapping, not mapped */
  CHECK_EQ(region_map_cow(name, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino + 1, shared, 64, 128, &c), 0);
  CHECK(c.anon && ((unsigned char *)c.base)[c.data_off] == 7);
  region_unmap_cow(&c);
  munmap(shared, size);
  unlink(path);
  if (made_dir) rmdir(dir);
}

/* The fallback directory may be shared with processes of another /dev/shm (a container, a mount
 * namespace): the reaper removes a file there only when its owner's anchor is here, unlocked. */
TEST(the_reaper_leaves_fallback_files_it_cannot_judge) {
  char dir[] = "/tmp/suiro-test-fb.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("SUIRO_SHM_DIR", dir, 1); /* before this process resolves it */
  char other[256], dead[256], anchor[128];
  /* an owner of another /dev/shm: no anchor here */
  snprintf(other, sizeof other, "%s/suiro_7ffffff0_%llx_a1.f", dir, 0x1234567890abcdefull);
  /* an owner that died here: its anchor is left, unlocked */
  snprintf(dead, sizeof dead, "%s/suiro_7ffffff1_%llx_a1.f", dir, 0x1234567890abcdefull);
  snprintf(anchor, sizeof anchor, "/dev/shm/suiro_7ffffff1_%llx_o", 0x1234567890abcdefull);
  int fds[3] = { open(other, O_RDWR | O_CREAT, 0600), open(dead, O_RDWR | O_CREAT, 0600),
                 open(anchor, O_RDWR | O_CREAT, 0600) };
  for (int i = 0; i < 3; i++) {
    CHECK(fds[i] >= 0);
    close(fds[i]);
  }
  suiro_reap();
  int other_left = access(other, F_OK) == 0, dead_left = access(dead, F_OK) == 0, anchor_left = access(anchor, F_OK) == 0;
  unlink(other);
  unlink(dead);
  unlink(anchor);
  rmdir(dir);
  CHECK(other_left);   /* before: removed, while its owner (elsewhere) used it */
  CHECK(!dead_left);
  CHECK(!anchor_left);
}
