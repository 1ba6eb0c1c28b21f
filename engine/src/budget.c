/*
 * budget.c — the memory budget every caller-supplied count is checked against before anything is
 * allocated (suiro_budget, suiro_budget_check in suiro.h).
 *
 * The budget is the smallest of the physical memory, the soft RLIMIT_AS and RLIMIT_DATA, and
 * SUIRO_MAX_BYTES. It is read once per call (getrlimit and sysconf are cheap; a face may change
 * its limits at run time). No shared state: nothing to order.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

static uint64_t env_bytes(void) {
  const char *s = getenv("SUIRO_MAX_BYTES");
  if (!s || !*s) return UINT64_MAX;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return UINT64_MAX;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 'K': shift = 10; break;
  case 'M': shift = 20; break;
  case 'G': shift = 30; break;
  case 'T': shift = 40; break;
  }
  if (shift && v > (UINT64_MAX >> shift)) return UINT64_MAX;
  return (uint64_t)v << shift;
}

uint64_t suiro_budget(void) {
  uint64_t b = UINT64_MAX;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) b = (uint64_t)pages * (uint64_t)page;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < b) b = rl.rlim_cur;
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < b) b = rl.rlim_cur;
  uint64_t e = env_bytes();
  return e < b ? e : b;
}

static void human(uint64_t b, char *out, size_t cap) {
  const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 6) { v /= 1024; i++; }
  snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

suiro_status suiro_budget_check(const char *what, uint64_t count, uint64_t size) {
  uint64_t bytes, limit = suiro_budget();
  int over = __builtin_mul_overflow(count, size, &bytes);
  if (!over && bytes <= limit) return SUIRO_OK;
  char need[32], have[32];
  human(limit, have, sizeof have);
  if (over) snprintf(need, sizeof need, "more than 2^64 bytes");
  else human(bytes, need, sizeof need);
  if (!what) what = "size";
  if (count == 1)
    return suiro_set_error(SUIRO_ERR, "%s: %llu bytes (%s) exceed the memory limit of %s (physical memory, "
                           "RLIMIT_AS/RLIMIT_DATA or SUIRO_MAX_BYTES)", what, (unsigned long long)size, need, have);
  return suiro_set_error(SUIRO_ERR, "%s: %llu elements of %llu bytes (%s) exceed the memory limit of %s "
                         "(physical memory, RLIMIT_AS/RLIMIT_DATA or SUIRO_MAX_BYTES)",
                         what, (unsigned long long)count, (unsigned long long)size, need, have);
}
