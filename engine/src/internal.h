/* internal.h — helpers shared by the engine's modules (not installed). */
#ifndef SUIRO_INTERNAL_H
#define SUIRO_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "suiro.h"

#define SUIRO_CACHELINE 64
#define SUIRO_ALIGNED _Alignas(SUIRO_CACHELINE)

#define SUIRO_LIKELY(x) __builtin_expect(!!(x), 1)
#define SUIRO_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SUIRO_COLD __attribute__((cold, noinline))

/* Relaxed/acquire/release shorthands: every shared word is _Atomic, and each access names its
 * ordering so the reasoning in each module's header comment can be checked line by line. */
#define ld_rlx(p) atomic_load_explicit((p), memory_order_relaxed)
#define ld_acq(p) atomic_load_explicit((p), memory_order_acquire)
#define st_rlx(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define st_rel(p, v) atomic_store_explicit((p), (v), memory_order_release)

static inline uint64_t suiro_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* 1 when m has more than n bits set. A loop over at most n + 1 bits: without -mpopcnt,
 * __builtin_popcountll is a library call (~20 instructions), too dear for a per-task test. */
static inline int bits_more_than(uint64_t m, int n) {
  if (n < 0) return 1;
  for (int i = 0; i < n; i++) {
    if (!m) return 0;
    m &= m - 1;
  }
  return m != 0;
}

/* memcpy for the hot paths' small payloads (a task's argument, its result): up to 16 bytes
 * without a library call, touching only [src, src + n) and [dst, dst + n); more goes to memcpy. */
static inline void copy_small(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (SUIRO_UNLIKELY(n > 16)) {
    __builtin_memcpy(d, s, n);
  } else if (n >= 8) { /* two 8-byte moves, overlapping when n < 16 */
    uint64_t a, b;
    __builtin_memcpy(&a, s, 8);
    __builtin_memcpy(&b, s + n - 8, 8);
    __builtin_memcpy(d, &a, 8);
    __builtin_memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    __builtin_memcpy(&a, s, 4);
    __builtin_memcpy(&b, s + n - 4, 4);
    __builtin_memcpy(d, &a, 4);
    __builtin_memcpy(d + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  }
}

/* Deadline helpers: timeout in seconds, <0 forever, 0 poll. */
static inline uint64_t deadline_from(double timeout) {
  if (timeout != timeout) return 0; /* NaN: a poll, never a conversion of NaN */
  if (timeout < 0) return UINT64_MAX;
  if (timeout > 1e9) return UINT64_MAX;
  return suiro_ns() + (uint64_t)(timeout * 1e9);
}

/* Error reporting: a thread-local message for suiro_last_error(). Returns SUIRO_ERR (or the given
 * status) so call sites can `return set_error(...)`. */
suiro_status suiro_set_error(suiro_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
suiro_status suiro_set_errno(const char *what); /* "<what>: strerror(errno)" */

/* A diagnostic line (no newline) to the hook of suiro_set_diag: for what has no caller to
 * return it to. The engine writes to stderr nowhere else. */
void suiro_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Ends this process at once with code, as _exit() does (no atexit handlers, no stdio flush):
 * a worker whose host is gone. The engine exits nowhere else. */
void suiro_exit_now(int code) __attribute__((noreturn));

/* Number of CPUs this process may run on (sched_getaffinity), at least 1. */
int suiro_ncpu(void);

/* What /proc/<pid>/stat says of a process: its state letter (R, S, D, Z, ...), CPU time and start
 * time in clock ticks. 0, or -1 when the process is gone. The one reader of that file. */
typedef struct suiro_proc_info {
  char state;
  uint64_t utime, stime, start;
} suiro_proc_info;
int suiro_proc_stat(int pid, suiro_proc_info *out);
/* Start time of a process in clock ticks since boot, 0 if gone (a zombie counts as gone). */
uint64_t suiro_proc_start(int pid);

/* 64-bit FNV-1a. */
static inline uint64_t suiro_hash64(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ull; }
  return h;
}

#endif
