/*
 * rclass.c — what the encoder (renc.c) and the decoder (rdec.c) both need to know of R objects:
 * the class vectors and attribute symbols of the R conventions (docs/wire-format.md, "R
 * conventions"), made once by rs_class_init and preserved for the session, the session's native
 * encoding, and small helpers (classes, attributes, integer64, UTF-8 strings, serialize()).
 * Written once at load (init.c), read-only after, on R's main thread only.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "rsuiro.h"


SEXP rs_sym_class, rs_sym_levels, rs_sym_tzone, rs_sym_names, rs_sym_dim, rs_sym_rownames;
SEXP rs_sym_suiro_bits, rs_sym_suiro_type, rs_sym_suiro_form, rs_sym_suiro_order, rs_sym_suiro_shape, rs_sym_suiro_unit;
SEXP rs_cls_factor, rs_cls_ordered, rs_cls_date, rs_cls_posixct, rs_cls_integer64, rs_cls_frame;
SEXP rs_cls_call, rs_cls_remote, rs_cls_wire_ref, rs_cls_wire_func, rs_cls_relay;
int rs_native_utf8 = 1; /* the session's native encoding is UTF-8 */

static SEXP mkclass(int n, ...) {
  va_list ap;
  va_start(ap, n);
  SEXP c = Rf_allocVector(STRSXP, n);
  R_PreserveObject(c);
  for (int i = 0; i < n; i++) SET_STRING_ELT(c, i, Rf_mkChar(va_arg(ap, const char *)));
  va_end(ap);
  MARK_NOT_MUTABLE(c);
  return c;
}

void rs_class_init(void) {
  rs_sym_class = R_ClassSymbol;
  rs_sym_levels = R_LevelsSymbol;
  rs_sym_names = R_NamesSymbol;
  rs_sym_dim = R_DimSymbol;
  rs_sym_rownames = R_RowNamesSymbol;
  rs_sym_tzone = Rf_install("tzone");
  rs_sym_suiro_type = Rf_install("suiro_type");
  rs_sym_suiro_bits = Rf_install("suiro_bits");
  rs_sym_suiro_form = Rf_install("suiro_form");
  rs_sym_suiro_order = Rf_install("suiro_order");
  rs_sym_suiro_shape = Rf_install("suiro_shape");
  rs_sym_suiro_unit = Rf_install("suiro_unit");
  rs_cls_factor = mkclass(1, "factor");
  rs_cls_ordered = mkclass(2, "ordered", "factor");
  rs_cls_date = mkclass(1, "Date");
  rs_cls_posixct = mkclass(2, "POSIXct", "POSIXt");
  rs_cls_integer64 = mkclass(1, "integer64");
  rs_cls_frame = mkclass(1, "data.frame");
  rs_cls_call = mkclass(1, "suiro_call");
  rs_cls_remote = mkclass(4, "suiro_error_remote", "suiro_error", "error", "condition");
  rs_cls_wire_ref = mkclass(1, "suiro_wire_ref");
  rs_cls_wire_func = mkclass(1, "suiro_wire_func");
  rs_cls_relay = mkclass(1, "suiro_relayed");
  SEXP call = PROTECT(Rf_lang1(Rf_install("l10n_info")));
  SEXP info = PROTECT(Rf_eval(call, R_BaseEnv));
  SEXP nm = Rf_getAttrib(info, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(info); i++)
    if (!strcmp(CHAR(STRING_ELT(nm, i)), "UTF-8")) rs_native_utf8 = LOGICAL(VECTOR_ELT(info, i))[0] == 1;
  UNPROTECT(2);
}

/* ---- small helpers ------------------------------------------------------------------------------ */

int rs_inherits(SEXP x, const char *cls) { return Rf_inherits(x, cls); }

int rs_class_is(SEXP x, SEXP cls) { /* class attribute exactly cls */
  SEXP c = Rf_getAttrib(x, R_ClassSymbol);
  if (TYPEOF(c) != STRSXP || XLENGTH(c) != XLENGTH(cls)) return 0;
  for (R_xlen_t i = 0; i < XLENGTH(c); i++)
    if (strcmp(CHAR(STRING_ELT(c, i)), CHAR(STRING_ELT(cls, i)))) return 0;
  return 1;
}

int rs_is_integer64(SEXP x) { return TYPEOF(x) == REALSXP && rs_class_is(x, rs_cls_integer64); }

SEXP rs_integer64(R_xlen_t n) {
  SEXP x = PROTECT(Rf_allocVector(REALSXP, n));
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_integer64);
  UNPROTECT(1);
  return x;
}

SEXP rs_mkstr_utf8(const char *s, size_t n, const char *what) {
  if (memchr(s, 0, n)) Rf_error("%s: the string holds a NUL byte, which an R string cannot", what);
  if (n > INT_MAX) Rf_error("%s: a string of %.0f bytes is longer than R allows", what, (double)n);
  return Rf_mkCharLenCE(s, (int)n, CE_UTF8);
}

SEXP rs_call_fn(const char *pkg, const char *name) {
  /* suiro's own helpers are internal: ::: (other packages' functions are exported ones) */
  SEXP op = !strcmp(pkg, "suiro") ? R_TripleColonSymbol : R_DoubleColonSymbol;
  SEXP call = PROTECT(Rf_lang3(op, Rf_install(pkg), Rf_install(name)));
  SEXP f = Rf_eval(call, R_BaseEnv);
  UNPROTECT(1);
  return f;
}

SEXP rs_serialize(SEXP x) {
  static SEXP fn = NULL;
  if (!fn) {
    fn = rs_call_fn("base", "serialize");
    R_PreserveObject(fn);
  }
  SEXP q = PROTECT(Rf_lang2(Rf_install("quote"), x)); /* x may be a language object */
  SEXP call = PROTECT(Rf_lang4(fn, q, R_NilValue, Rf_ScalarLogical(0)));
  SET_TAG(CDDDR(call), Rf_install("xdr"));
  SEXP r = Rf_eval(call, R_BaseEnv);
  UNPROTECT(2);
  return r;
}

SEXP rs_unserialize(SEXP raw) {
  static SEXP fn = NULL;
  if (!fn) {
    fn = rs_call_fn("base", "unserialize");
    R_PreserveObject(fn);
  }
  SEXP call = PROTECT(Rf_lang2(fn, raw));
  SEXP r = Rf_eval(call, R_BaseEnv);
  UNPROTECT(1);
  return r;
}

/* The raw value of an attribute (row.names stays compact: getAttrib would expand it). */
SEXP rs_attr_raw(SEXP x, SEXP sym) {
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a))
    if (TAG(a) == sym) return CAR(a);
  return R_NilValue;
}

int rs_attr_count(SEXP x) {
  int n = 0;
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a)) n++;
  return n;
}

/* ---- i64 timestamps as POSIXct ------------------------------------------------------------------ */

/* R holds a time as double seconds, so its precision is the microsecond (format's digits.secs):
 * s, ms and us values convert exactly while the double holds them; ns ones must be whole
 * microseconds, kept as such. Each direction checks that the other gives the value back, so
 * whatever converts, converts both ways exactly. */
static const double ts_per_s[4] = { 1, 1e3, 1e6, 1e6 }; /* ns: via microseconds */

static double ts_seconds(int64_t v, int unit) {
  if (unit == WIRE_UNIT_NS) v /= 1000;
  return unit == WIRE_UNIT_S ? (double)v : (double)v / ts_per_s[unit]; /* correctly rounded */
}

int rs_ts_encode(double x, int unit, int64_t *v) {
  if (unit < WIRE_UNIT_S || unit > WIRE_UNIT_NS) return 0;
  double y = nearbyint(x * ts_per_s[unit]);
  if (!(fabs(y) < 9.2e18)) return 0; /* NaN and Inf too */
  int64_t w = (int64_t)y;
  if (unit == WIRE_UNIT_NS) {
    if (w > INT64_MAX / 1000 || w < -(INT64_MAX / 1000)) return 0;
    w *= 1000;
  }
  double back = ts_seconds(w, unit);
  if (memcmp(&back, &x, sizeof x)) return 0; /* -0 too: it has no i64 form */
  *v = w;
  return 1;
}

int rs_ts_decode(int64_t v, int unit, double *x) {
  if (unit == WIRE_UNIT_NS && v % 1000) return -1;
  double s = ts_seconds(v, unit);
  int64_t back;
  if (!rs_ts_encode(s, unit, &back) || back != v) return 0;
  *x = s;
  return 1;
}

static const char *ts_unit_names[4] = { "s", "ms", "us", "ns" };

int rs_ts_unit(SEXP x) {
  SEXP u = rs_attr_raw(x, rs_sym_suiro_unit);
  if (TYPEOF(u) != STRSXP || XLENGTH(u) != 1 || STRING_ELT(u, 0) == NA_STRING) return -1;
  for (int k = 0; k < 4; k++)
    if (!strcmp(CHAR(STRING_ELT(u, 0)), ts_unit_names[k])) return k;
  return -1;
}

const char *rs_ts_unit_name(int unit) { return unit >= 0 && unit < 4 ? ts_unit_names[unit] : "?"; }
