/* harness.c — runs each test in a child process (see harness.h). */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct { const char *name; test_fn fn; double timeout; } test_case;
static test_case tests[256];
static int ntests;

void harness_add(const char *name, test_fn fn, double timeout) {
  if (ntests < 256) tests[ntests++] = (test_case){ name, fn, timeout };
}

suiro_pool *test_pool_opts(suiro_pool_opts *o) {
  suiro_pool *p = NULL;
  suiro_status st = suiro_pool_create(o, &p);
  if (st != SUIRO_OK) {
    fprintf(stderr, "pool_create: %s: %s\n", suiro_status_name(st), suiro_last_error());
    exit(1);
  }
  return p;
}

suiro_pool *test_pool(int workers) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = workers;
  return test_pool_opts(&o);
}

int shm_count(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  size_t len = strlen(prefix);
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, len) == 0) n++;
  closedir(d);
  return n;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int run_child(const char *self, const test_case *t) {
  pid_t pid;
  char *argv[] = { (char *)self, (char *)t->name, NULL };
  if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) return -1;
  double deadline = now() + t->timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (now() > deadline) {
      fprintf(stderr, "  %s: timed out after %.0f s\n", t->name, t->timeout);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 1;
    }
    struct timespec ts = { 0, 2000000 };
    nanosleep(&ts, NULL);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFSIGNALED(status)) fprintf(stderr, "  %s: killed by signal %d\n", t->name, WTERMSIG(status));
  return 1;
}

/* A test file may define its own commands (test_bind: --write-rng); -1 when argv is not one. */
__attribute__((weak)) int harness_command(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return -1;
}

int main(int argc, char **argv) {
  int rc = suiro_worker_main(argc, argv);
  if (rc >= 0) return rc;
  if ((rc = harness_command(argc, argv)) >= 0) return rc;
  const char *base = strrchr(argv[0], '/');
  base = base ? base + 1 : argv[0];
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (int i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  if (argc > 1) {
    for (int i = 0; i < ntests; i++) {
      if (strcmp(tests[i].name, argv[1]) == 0) {
        tests[i].fn();
        return 0;
      }
    }
    fprintf(stderr, "no test named %s\n", argv[1]);
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = 0;
  int passed = 0, failed = 0;
  for (int i = 0; i < ntests; i++) {
    double t0 = now();
    int r = run_child(self, &tests[i]);
    printf("%s %s.%s (%.2f s)\n", r == 0 ? "ok  " : "FAIL", base, tests[i].name, now() - t0);
    fflush(stdout);
    if (r == 0) passed++;
    else failed++;
  }
  printf("# %s: %d passed, %d failed\n", base, passed, failed);
  return failed ? 1 : 0;
}

const char *harness_vectors_dir(void) {
  static char dir[4096];
  if (dir[0]) return dir;
  const char *env = getenv("SUIRO_VECTORS");
  if (env) return snprintf(dir, sizeof dir, "%s", env), dir;
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) {
    path[n] = 0;
    for (int up = 0; up < 5; up++) { /* build/tests/x, build/asan/tests/x -> the checkout */
      char *slash = strrchr(path, '/');
      if (!slash) break;
      *slash = 0;
      char probe[4200];
      struct stat st;
      snprintf(probe, sizeof probe, "%s/tests/vectors/nil.bin", path);
      if (stat(probe, &st) == 0) return snprintf(dir, sizeof dir, "%.4000s/tests/vectors", path), dir;
    }
  }
  return snprintf(dir, sizeof dir, "tests/vectors"), dir;
}
