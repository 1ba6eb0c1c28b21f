/*
 * rrandom.c — suiro_random(): inside an element of a seeded map, draws from the element's own
 * stream (suiro_rng_current, seeded from (seed, element) by suiro_plan_enter), so results do not
 * depend on worker count or scheduling and equal the Lua and Python faces' draws
 * (tests/vectors/rng.txt). Elsewhere it falls back to R's generator.
 *
 *   suiro_random()      a double in [0, 1)
 *   suiro_random(m)     an integer in 1..m
 *   suiro_random(m, n)  an integer in m..n
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

static int64_t int_arg(SEXP x, const char *what) {
  if ((TYPEOF(x) != REALSXP && TYPEOF(x) != INTSXP) || XLENGTH(x) != 1) Rf_error("suiro_random: %s must be a whole number", what);
  if (rs_is_integer64(x)) {
    int64_t v;
    double d = REAL(x)[0];
    memcpy(&v, &d, 8);
    return v;
  }
  double d = Rf_asReal(x);
  if (ISNAN(d) || d != floor(d) || fabs(d) > 9007199254740992.0) Rf_error("suiro_random: %s must be a whole number", what);
  return (int64_t)d;
}

static SEXP int_result(int64_t v) {
  if (v > INT32_MIN && v <= INT32_MAX) return Rf_ScalarInteger((int)v);
  return Rf_ScalarReal((double)v);
}

SEXP C_random(SEXP m, SEXP n) {
  suiro_rng *r = suiro_rng_current();
  int nargs = (m != R_NilValue) + (n != R_NilValue);
  if (!r) return R_NilValue; /* R/random.R falls back to R's generator */
  if (nargs == 0) return Rf_ScalarReal(suiro_rng_unit(r));
  int64_t lo = 1, hi;
  if (nargs == 1) {
    hi = int_arg(m, "m");
  } else {
    lo = int_arg(m, "m");
    hi = int_arg(n, "n");
  }
  if (lo > hi) Rf_error("suiro_random: the interval %.0f..%.0f is empty", (double)lo, (double)hi);
  return int_result(suiro_rng_range(r, lo, hi));
}

/* For tests: the first draws of a stream, as in tests/vectors/rng.txt. kind: 0 next (as decimal
 * strings), 1 unit, 2 range(lo, hi). */
SEXP C_rng_draws(SEXP seed, SEXP index, SEXP kind, SEXP count, SEXP lo, SEXP hi) {
  suiro_rng r;
  const char *s = CHAR(STRING_ELT(seed, 0)), *i = CHAR(STRING_ELT(index, 0));
  suiro_rng_seed(&r, strtoull(s, NULL, 10), strtoull(i, NULL, 10));
  int k = Rf_asInteger(kind), n = Rf_asInteger(count);
  SEXP out = PROTECT(Rf_allocVector(STRSXP, n));
  char b[64];
  int64_t l = k == 2 ? strtoll(CHAR(STRING_ELT(lo, 0)), NULL, 10) : 0, h = k == 2 ? strtoll(CHAR(STRING_ELT(hi, 0)), NULL, 10) : 0;
  for (int q = 0; q < n; q++) {
    if (k == 0) snprintf(b, sizeof b, "%llu", (unsigned long long)suiro_rng_next(&r));
    else if (k == 1) snprintf(b, sizeof b, "%.17g", suiro_rng_unit(&r));
    else snprintf(b, sizeof b, "%lld", (long long)suiro_rng_range(&r, l, h));
    SET_STRING_ELT(out, q, Rf_mkChar(b));
  }
  UNPROTECT(1);
  return out;
}
