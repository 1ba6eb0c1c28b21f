/*
 * floor.h — the one memcpy floor of the benchmarks (suiro.probe in Lua, suiro_probe in Python):
 * the median milliseconds of one memcpy of `bytes` between two warm buffers, over `rounds`
 * copies. Test builds only (tests/probe/); it links nothing of the engine.
 */
#ifndef SUIRO_PROBE_FLOOR_H
#define SUIRO_PROBE_FLOOR_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double probe_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int probe_cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median in ms; -1 when out of memory. bytes >= 1, rounds in 1..1000 (the caller checks). */
static double probe_memcpy_ms(size_t bytes, int rounds) {
  char *a = malloc(bytes), *b = malloc(bytes);
  double *t = malloc(sizeof *t * (size_t)rounds);
  if (!a || !b || !t) {
    free(a), free(b), free(t);
    return -1;
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes); /* both warm: faulted in before timing */
  for (int r = 0; r < rounds; r++) {
    double t0 = probe_now_s();
    memcpy(b, a, bytes);
    t[r] = (probe_now_s() - t0) * 1e3;
    a[(size_t)r % bytes] = (char)r; /* keep the copy from being elided */
  }
  qsort(t, (size_t)rounds, sizeof *t, probe_cmp_dbl);
  double med = t[rounds / 2];
  free(a), free(b), free(t);
  return med;
}

#endif
