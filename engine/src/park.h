/* park.h — spin-then-park waiting on words in shared memory (see park.c). */
#ifndef SUIRO_PARK_H
#define SUIRO_PARK_H

#include "internal.h"

/* Sleeps while *word == expected, until woken or the deadline (suiro_ns clock) passes.
 * Returns 0 when woken or the word changed, 1 on timeout. Spurious returns are allowed. */
int park_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);
/* Wakes up to n sleepers on word (n < 0: all). */
void park_wake(_Atomic uint32_t *word, int n);

/* Adaptive spin budget: spin for 1.5x the recently observed gap + 8 us, at most SPIN_CAP_NS.
 * Long gaps keep the full cap rather than dropping to nothing: a wait that ends in a wake-up
 * measures the wake-up too (tens of microseconds here), so a budget that shrank after one long
 * task would keep every later short task parking, and never learn otherwise. The cost of the cap
 * is bounded: 64 us of spin per wait, against waits that are long anyway. */
#define SPIN_BASE_NS 8000u
#define SPIN_CAP_NS 64000u

typedef struct spin_adapt {
  uint64_t gap_ns; /* exponentially weighted mean of observed waits */
} spin_adapt;

static inline uint64_t spin_budget(const spin_adapt *a) {
  uint64_t b = a->gap_ns + a->gap_ns / 2 + SPIN_BASE_NS;
  return b > SPIN_CAP_NS ? SPIN_CAP_NS : b;
}

static inline void spin_observe(spin_adapt *a, uint64_t gap_ns) {
  if (gap_ns > 100 * SPIN_CAP_NS) gap_ns = 100 * SPIN_CAP_NS;
  a->gap_ns = a->gap_ns - a->gap_ns / 8 + gap_ns / 8;
}

/* The pre-spin: a waiter first looks for what it waits for this many times (a pause between
 * looks, ~1-2 us in all), before the spin proper. A short task's result, or the next task of a
 * busy host, usually shows up within a few hundred nanoseconds; found in the pre-spin, it costs
 * no clock read (~60 ns in a VM), no RMW on the spinner count and no store to host_cpu, cache
 * lines that the host and the workers would otherwise pass back and forth on every task. Too
 * short to matter for the spinning limits below. */
#define PRESPIN_LOOKS 32

/* Spinners are counted pool-wide: a waiter may spin only while the count stays below the CPUs
 * available, because spinning oversubscribed turns microsecond hand-offs into scheduler-tick
 * stalls. Returns 1 when the caller may spin (and is counted), 0 when it must park at once. */
static inline int spin_enter(_Atomic int32_t *spinners, int ncpu) {
  int32_t n = atomic_fetch_add_explicit(spinners, 1, memory_order_relaxed);
  if (n < ncpu) return 1;
  atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
  return 0;
}
static inline void spin_leave(_Atomic int32_t *spinners) {
  atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
}

#endif
