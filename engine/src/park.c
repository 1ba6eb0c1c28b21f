/*
 * park.c — futex-based parking for waiters in different processes.
 *
 * Protocol (used by pool.c for both idle workers and collecting submitters):
 *   waiter: announce (seq_cst RMW on a "sleepers"/"waiting" word), re-check the condition,
 *           then park_wait(word, snapshot) where snapshot was read before the re-check;
 *   waker:  make the condition true (release), seq_cst fence, read the announce word; only if a
 *           sleeper is announced bump `word` and futex_wake.
 * The fence pair (announce RMW / waker fence) is the Dekker handshake that makes a lost wake-up
 * impossible while keeping the common case (nobody asleep) free of system calls.
 * The futexes are shared (no FUTEX_PRIVATE_FLAG) because the words live in shared memory.
 */
#include "park.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

int park_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
  struct timespec ts, *tp = NULL;
  if (deadline_ns != UINT64_MAX) {
    uint64_t now = suiro_ns();
    if (now >= deadline_ns) return 1;
    uint64_t d = deadline_ns - now;
    ts.tv_sec = (time_t)(d / 1000000000u);
    ts.tv_nsec = (long)(d % 1000000000u);
    tp = &ts;
  }
  long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tp, NULL, 0);
  if (r != 0 && errno == ETIMEDOUT) return 1;
  return 0;
}

void park_wake(_Atomic uint32_t *word, int n) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n < 0 ? INT32_MAX : n, NULL, NULL, 0);
}
