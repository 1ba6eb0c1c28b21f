/* test_shm.c — regions at the edges of /dev/shm (issue 17, items 1 and 6): a region that fits
 * nowhere is an error naming the way out, not a sparse file that faults later; a file of another
 * user under one of our names is refused; names carry a random id, not the start time. (A small
 * and a full /dev/shm, through every host: tests/shm/run.sh, in a private mount namespace.) */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "region.h"

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
