/*
 * rprobe.c — measurements for the R benchmarks, a test build only (build/tests/r/suiro_probe.so;
 * bench/bench_r.R loads it with dyn.load). The R package carries no such hook.
 *
 *   .Call("rprobe_memcpy_ms", bytes, rounds)   median ms of one memcpy between warm buffers
 *                                             (the floor of floor.h, as Lua's and Python's)
 */
#include <R.h>
#include <Rinternals.h>

#include "floor.h"

SEXP rprobe_memcpy_ms(SEXP bytes, SEXP rounds);

SEXP rprobe_memcpy_ms(SEXP bytes, SEXP rounds) {
  double n = Rf_asReal(bytes);
  int k = Rf_asInteger(rounds);
  if (!(n >= 1 && n <= 1e15)) Rf_error("memcpy_ms: bytes must be in 1..1e15, got %g", n);
  if (k == NA_INTEGER || k < 1 || k > 1000) Rf_error("memcpy_ms: rounds must be in 1..1000");
  double ms = probe_memcpy_ms((size_t)n, k);
  if (ms < 0) Rf_error("memcpy_ms: out of memory for two buffers of %.0f bytes", n);
  return Rf_ScalarReal(ms);
}
