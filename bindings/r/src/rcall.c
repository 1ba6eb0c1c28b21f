/*
 * rcall.c — the suiro_call object (a call spec): a function by name or source text with its
 * positional and named arguments, built in one .Call so that a spec made per call, as users
 * write it, costs less than the round trip that sends it.
 */
#include "rsuiro.h"

/* class(x)[1], for messages */
static const char *class_of(SEXP x) {
  SEXP call = PROTECT(Rf_lang2(Rf_install("class"), x));
  SEXP cls = Rf_eval(call, R_BaseEnv);
  UNPROTECT(1);
  return TYPEOF(cls) == STRSXP && XLENGTH(cls) ? CHAR(STRING_ELT(cls, 0)) : Rf_type2char(TYPEOF(x));
}

static int one_string(SEXP s) { return TYPEOF(s) == STRSXP && XLENGTH(s) == 1 && STRING_ELT(s, 0) != NA_STRING; }

/* args: list(...) of the call; name and source as given (NULL when absent). */
SEXP C_call_new(SEXP name, SEXP args, SEXP source) {
  if (Rf_isNull(name) == Rf_isNull(source))
    Rf_error("suiro_call: give a function name (\"pkg::fn\", \"module.fn\") or .source, not both");
  if (!Rf_isNull(name)) {
    if (!one_string(name))
      Rf_error("suiro_call: the function name must be one string, got %s", class_of(name));
    char err[512];
    if (rs_fnref_check(CHAR(STRING_ELT(name, 0)), err, sizeof err) != 0) Rf_error("suiro_call: %s", err);
  } else if (!one_string(source)) {
    Rf_error("suiro_call: .source must be one string");
  }
  R_xlen_t n = XLENGTH(args), npos = 0;
  SEXP nm = Rf_getAttrib(args, R_NamesSymbol);
  for (R_xlen_t i = 0; i < n; i++)
    if (Rf_isNull(nm) || CHAR(STRING_ELT(nm, i))[0] == '\0') npos++;
  SEXP pos = PROTECT(Rf_allocVector(VECSXP, npos));
  SEXP named = PROTECT(Rf_allocVector(VECSXP, n - npos));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, n - npos));
  for (R_xlen_t i = 0, p = 0, k = 0; i < n; i++) {
    if (Rf_isNull(nm) || CHAR(STRING_ELT(nm, i))[0] == '\0') {
      SET_VECTOR_ELT(pos, p++, VECTOR_ELT(args, i));
    } else {
      SET_VECTOR_ELT(named, k, VECTOR_ELT(args, i));
      SET_STRING_ELT(names, k++, STRING_ELT(nm, i));
    }
  }
  Rf_setAttrib(named, R_NamesSymbol, names);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(out, 0, name);
  SET_VECTOR_ELT(out, 1, source);
  SET_VECTOR_ELT(out, 2, pos);
  SET_VECTOR_ELT(out, 3, named);
  static SEXP onames, cls; /* shared by every spec: made once, never changed */
  if (!onames) {
    onames = Rf_allocVector(STRSXP, 4);
    R_PreserveObject(onames);
    SET_STRING_ELT(onames, 0, Rf_mkChar("target"));
    SET_STRING_ELT(onames, 1, Rf_mkChar("source"));
    SET_STRING_ELT(onames, 2, Rf_mkChar("args"));
    SET_STRING_ELT(onames, 3, Rf_mkChar("named"));
    MARK_NOT_MUTABLE(onames);
    cls = Rf_mkString("suiro_call");
    R_PreserveObject(cls);
    MARK_NOT_MUTABLE(cls);
  }
  Rf_setAttrib(out, R_NamesSymbol, onames);
  Rf_setAttrib(out, R_ClassSymbol, cls);
  UNPROTECT(4);
  return out;
}
