/* util.c — error messages, diagnostics and the exit of a worker, clocks, process facts. Shared
 * state: the diagnostics hook, two plain variables set once before pools start (as the interrupt
 * check of events.c); the rest is thread-local or none. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static _Thread_local char last_error[512];

suiro_status suiro_set_error(suiro_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return st;
}

suiro_status suiro_set_errno(const char *what) {
  int e = errno;
  return suiro_set_error(SUIRO_ERR, "%s: %s", what, strerror(e));
}

const char *suiro_last_error(void) { return last_error; }

/* The default diagnostics hook: the line and its newline to fd 2 in one writev (a line from one
 * process stays whole among others' on a pipe), through stdio nowhere. */
static void diag_to_fd2(void *ud, const char *msg, size_t len) {
  struct iovec v[2] = { { (void *)msg, len }, { (void *)"\n", 1 } };
  while (writev(2, v, 2) < 0 && errno == EINTR) {}
}

static suiro_diag_fn diag_fn = diag_to_fd2;
static void *diag_ud;

void suiro_set_diag(suiro_diag_fn fn, void *ud) {
  diag_fn = fn ? fn : diag_to_fd2;
  diag_ud = fn ? ud : NULL;
}

void suiro_diag(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  diag_fn(diag_ud, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

void suiro_exit_now(int code) {
  for (;;) syscall(SYS_exit_group, code);
}

const char *suiro_version(void) {
#define S_(x) #x
#define S(x) S_(x)
  return S(SUIRO_VERSION_MAJOR) "." S(SUIRO_VERSION_MINOR) "." S(SUIRO_VERSION_PATCH);
#undef S
#undef S_
}

const char *suiro_status_name(suiro_status s) {
  switch (s) {
  case SUIRO_OK: return "ok";
  case SUIRO_TIMEOUT: return "timeout";
  case SUIRO_CLOSED: return "closed";
  case SUIRO_PEER_GONE: return "peer_gone";
  case SUIRO_FULL: return "full";
  case SUIRO_ERR: return "error";
  }
  return "unknown";
}

double suiro_now(void) { return (double)suiro_ns() * 1e-9; }

int suiro_ncpu(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int suiro_proc_stat(int pid, suiro_proc_info *out) {
  memset(out, 0, sizeof *out);
  if (pid <= 0) return -1;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  /* The command name (field 2) may hold spaces and parentheses: count fields after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return -1;
  out->state = p[2];
  int field = 2;
  char *save = NULL;
  for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    field++;
    if (field == 14) out->utime = strtoull(tok, NULL, 10);
    else if (field == 15) out->stime = strtoull(tok, NULL, 10);
    else if (field == 22) {
      out->start = strtoull(tok, NULL, 10);
      return 0;
    }
  }
  return -1;
}

uint64_t suiro_proc_start(int pid) {
  suiro_proc_info pi;
  if (suiro_proc_stat(pid, &pi) != 0) return 0;
  if (pi.state == 'Z' || pi.state == 'X') return 0; /* a zombie is as good as gone */
  return pi.start;
}
