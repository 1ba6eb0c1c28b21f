/*
 * rcodec.c — R values <-> wire values (docs/wire-format.md, section "R conventions").
 *
 * Two encodings, chosen by who receives the value:
 *   rich   the receiver runs R (an R pool, or a host that is R): every R object crosses exactly.
 *          Plain vectors, lists and named lists use the wire's own items; attributes travel in a
 *          wrapper FUNC(R, key 0) "base::structure" [bare value, DICT attributes]; what the wire
 *          cannot express at all (closures inside values, environments, formulas, S4 objects)
 *          travels as FUNC(R, key 0) "base::unserialize" [BYTES of serialize()].
 *   strict the receiver runs Lua or Python: only the portable mapping (factors, Date, POSIXct,
 *          integer64, matrices, data frames, named lists, call specs); anything else is refused
 *          at send time with the path of the offending part.
 * Large numeric vectors (from suiro_zc_floor up) cross by reference: a view received earlier
 * goes as its own REF (O(1)); private vectors are copied once into a region, one region for all
 * the large vectors of a message (rs_enc_prescan sizes it).
 *
 * Decoding maps wire items to R's usual types (int -> integer when it fits, double up to 2^53,
 * else integer64; f32 -> double; REFs -> ALTREP views, rview.c). It never trusts its input: the
 * wire reader validates everything, and strings with NUL bytes are refused naming the element.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

SEXP rs_sym_class, rs_sym_levels, rs_sym_tzone, rs_sym_names, rs_sym_dim, rs_sym_rownames;
static SEXP sym_suiro_bits, sym_suiro_type, sym_suiro_form, sym_suiro_order, sym_suiro_shape, sym_suiro_unit;
static SEXP cls_factor, cls_ordered, cls_date, cls_posixct, cls_integer64, cls_frame, cls_call, cls_remote;
static SEXP cls_wire_ref, cls_wire_func;
static int native_utf8 = 1; /* the session's native encoding is UTF-8 */

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

void rs_codec_init(void) {
  rs_sym_class = R_ClassSymbol;
  rs_sym_levels = R_LevelsSymbol;
  rs_sym_names = R_NamesSymbol;
  rs_sym_dim = R_DimSymbol;
  rs_sym_rownames = R_RowNamesSymbol;
  rs_sym_tzone = Rf_install("tzone");
  sym_suiro_type = Rf_install("suiro_type");
  sym_suiro_bits = Rf_install("suiro_bits");
  sym_suiro_form = Rf_install("suiro_form");
  sym_suiro_order = Rf_install("suiro_order");
  sym_suiro_shape = Rf_install("suiro_shape");
  sym_suiro_unit = Rf_install("suiro_unit");
  cls_factor = mkclass(1, "factor");
  cls_ordered = mkclass(2, "ordered", "factor");
  cls_date = mkclass(1, "Date");
  cls_posixct = mkclass(2, "POSIXct", "POSIXt");
  cls_integer64 = mkclass(1, "integer64");
  cls_frame = mkclass(1, "data.frame");
  cls_call = mkclass(1, "suiro_call");
  cls_remote = mkclass(4, "suiro_error_remote", "suiro_error", "error", "condition");
  cls_wire_ref = mkclass(1, "suiro_wire_ref");
  cls_wire_func = mkclass(1, "suiro_wire_func");
  SEXP call = PROTECT(Rf_lang1(Rf_install("l10n_info")));
  SEXP info = PROTECT(Rf_eval(call, R_BaseEnv));
  SEXP nm = Rf_getAttrib(info, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(info); i++)
    if (!strcmp(CHAR(STRING_ELT(nm, i)), "UTF-8")) native_utf8 = LOGICAL(VECTOR_ELT(info, i))[0] == 1;
  UNPROTECT(2);
}

/* ---- small helpers ------------------------------------------------------------------------------ */

int rs_inherits(SEXP x, const char *cls) { return Rf_inherits(x, cls); }

static int class_is(SEXP x, SEXP cls) { /* class attribute exactly cls */
  SEXP c = Rf_getAttrib(x, R_ClassSymbol);
  if (TYPEOF(c) != STRSXP || XLENGTH(c) != XLENGTH(cls)) return 0;
  for (R_xlen_t i = 0; i < XLENGTH(c); i++)
    if (strcmp(CHAR(STRING_ELT(c, i)), CHAR(STRING_ELT(cls, i)))) return 0;
  return 1;
}

int rs_is_integer64(SEXP x) { return TYPEOF(x) == REALSXP && class_is(x, cls_integer64); }

SEXP rs_integer64(R_xlen_t n) {
  SEXP x = PROTECT(Rf_allocVector(REALSXP, n));
  Rf_setAttrib(x, R_ClassSymbol, cls_integer64);
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
static SEXP attr_raw(SEXP x, SEXP sym) {
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a))
    if (TAG(a) == sym) return CAR(a);
  return R_NilValue;
}

static int attr_count(SEXP x) {
  int n = 0;
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a)) n++;
  return n;
}

/* ---- encoder state ------------------------------------------------------------------------------ */

void rs_encoder_init(rs_encoder *e, const rs_enc_opts *o) {
  /* field by field: the path segments and buffers need no clearing (a few KB per task) */
  e->o = *o;
  e->stage = NULL;
  e->stage_used = e->stage_cap = e->stage_need = 0;
  e->finished = 0;
  e->plen = 0;
  e->path[0] = 0;
  e->depth = 0;
  e->ncont = 0;
  suiro_msg_init(&e->m, e->stack, sizeof e->stack);
}

void rs_encoder_cleanup(rs_encoder *e) {
  if (e->finished) suiro_msg_sent(&e->m);
  else suiro_msg_free(&e->m); /* never sent: every grant given back */
  if (e->stage) suiro_buf_unref(e->stage);
  e->stage = NULL;
}

void rs_encoder_finish(rs_encoder *e, const void **buf, size_t *len) {
  if (wire_writer_finish(&e->m.w, buf, len) != WIRE_OK) Rf_error("cannot encode: %s", wire_writer_error(&e->m.w));
}

void rs_encoder_sent(rs_encoder *e) {
  e->finished = 1;
  if (e->stage) suiro_buf_unref(e->stage); /* the grants keep the region alive */
  e->stage = NULL;
}

void rs_enc_path_push(rs_encoder *e, const char *fmt, ...) {
  if (e->plen >= sizeof e->seg / sizeof *e->seg) { /* deeper than any value can be: keep counting */
    e->plen++;
    return;
  }
  struct rs_path_seg *g = &e->seg[e->plen++];
  g->fmt = fmt;
  g->s[0] = g->s[1] = NULL;
  g->d = 0;
  va_list ap;
  va_start(ap, fmt);
  int ns = 0;
  for (const char *f = fmt; *f; f++) {
    if (f[0] != '%') continue;
    if (f[1] == 's') {
      const char *v = va_arg(ap, const char *);
      if (ns < 2) g->s[ns++] = v;
      f++;
    } else if (!strncmp(f, "%.0f", 4)) {
      g->d = va_arg(ap, double);
      f += 3;
    }
  }
  va_end(ap);
}

void rs_enc_path_pop(rs_encoder *e, size_t at) { e->plen = at; }

const char *rs_enc_path(rs_encoder *e) {
  size_t n = 0, cap = sizeof e->path;
  size_t nseg = e->plen < sizeof e->seg / sizeof *e->seg ? e->plen : sizeof e->seg / sizeof *e->seg;
  for (size_t k = 0; k < nseg && n + 1 < cap; k++) {
    const struct rs_path_seg *g = &e->seg[k];
    int ns = 0;
    for (const char *f = g->fmt; *f && n + 1 < cap; f++) {
      int w = 0;
      if (f[0] == '%' && f[1] == 's') {
        w = snprintf(e->path + n, cap - n, "%s", ns < 2 && g->s[ns] ? g->s[ns] : "?");
        ns++;
        f++;
      } else if (!strncmp(f, "%.0f", 4)) {
        w = snprintf(e->path + n, cap - n, "%.0f", g->d);
        f += 3;
      } else {
        e->path[n] = *f;
        w = 1;
      }
      n += w > 0 ? (size_t)w : 0;
      if (n >= cap) n = cap - 1;
    }
  }
  e->path[n] = 0;
  return e->path;
}

static void __attribute__((noreturn, format(printf, 2, 3))) efail(rs_encoder *e, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Rf_error("%s: %s", rs_enc_path(e), msg);
}

static void wcheck(rs_encoder *e) {
  if (e->m.w.status != WIRE_OK) efail(e, "%s", wire_writer_error(&e->m.w));
}

static const char *peer(rs_encoder *e) { return e->o.peer ? e->o.peer : "a foreign receiver"; }

static const char *type_word(SEXP x) {
  switch (TYPEOF(x)) {
  case LGLSXP: return "logical";
  case INTSXP: return "integer";
  case REALSXP: return rs_is_integer64(x) ? "integer64" : "double";
  case CPLXSXP: return "complex";
  case STRSXP: return "character";
  case RAWSXP: return "raw";
  case VECSXP: return "list";
  default: return Rf_type2char(TYPEOF(x));
  }
}

/* ---- zero-copy staging -------------------------------------------------------------------------- */

static int zc_candidate(rs_encoder *e, SEXP x, size_t bytes) {
  return e->o.zc && bytes >= suiro_zc_floor && bytes > 0;
}

static size_t elt_size(SEXP x) {
  switch (TYPEOF(x)) {
  case INTSXP: return 4;
  case REALSXP: return 8;
  case CPLXSXP: return 16;
  case RAWSXP: return 1;
  default: return 0;
  }
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Sums the large private vectors of x (what the encoder will copy into the stage region). */
static void prescan(rs_encoder *e, SEXP x, int depth) {
  if (depth > 64) return;
  int t = TYPEOF(x);
  if (t == VECSXP) {
    R_xlen_t n = XLENGTH(x);
    for (R_xlen_t i = 0; i < n; i++) prescan(e, VECTOR_ELT(x, i), depth + 1);
    return;
  }
  size_t es = elt_size(x);
  if (!es) return;
  size_t bytes = (size_t)XLENGTH(x) * es;
  if (!zc_candidate(e, x, bytes)) return;
  suiro_buf *b;
  const void *d;
  size_t vb;
  if (rs_view_info(x, &b, &d, &vb)) return; /* goes as its own reference */
  e->stage_need += align8(bytes);
}

void rs_enc_prescan(rs_encoder *e, SEXP x) {
  if (e->o.zc) prescan(e, x, 0);
}

/* Copies n elements of x (from element 0) to dst, without materialising ALTREP vectors. */
static void copy_elements(SEXP x, void *dst, R_xlen_t n) {
  const void *src = DATAPTR_OR_NULL(x);
  size_t es = elt_size(x);
  if (src) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  switch (TYPEOF(x)) {
  case INTSXP: INTEGER_GET_REGION(x, 0, n, dst); break;
  case REALSXP: REAL_GET_REGION(x, 0, n, dst); break;
  case RAWSXP: RAW_GET_REGION(x, 0, n, dst); break;
  case CPLXSXP: COMPLEX_GET_REGION(x, 0, n, dst); break;
  default: break;
  }
}

/* Writes x as a REF when it is large and zero-copy is on: 1 done, 0 not (write it inline). */
static int try_ref(rs_encoder *e, SEXP x, int type, int ndim, const uint64_t *dims) {
  size_t es = elt_size(x);
  size_t bytes = (size_t)XLENGTH(x) * es;
  if (!es || !zc_candidate(e, x, bytes)) return 0;
  suiro_buf *b;
  const void *d;
  size_t vb;
  if (rs_view_info(x, &b, &d, &vb) && vb == bytes) {
    if (suiro_msg_put_ref(&e->m, b, 0, d, bytes, type, ndim ? WIRE_ORDER_F : WIRE_ORDER_C, ndim, dims) != WIRE_OK)
      return e->m.w.status = WIRE_OK, 0; /* its region lost its name (the pool stopped): copy */
    return 1;
  }
  if (!suiro_zc_active()) return 0;
  if (!e->stage || e->stage_used + align8(bytes) > e->stage_cap) {
    size_t want = e->stage_need > align8(bytes) ? e->stage_need : align8(bytes);
    suiro_buf *nb = suiro_buf_alloc(want);
    if (!nb) return 0; /* no region: inline */
    rs_region_made(nb);
    if (e->stage) suiro_buf_unref(e->stage); /* its grants keep it */
    e->stage = nb;
    e->stage_used = 0;
    e->stage_cap = suiro_buf_size(nb);
  }
  char *dst = (char *)suiro_buf_data(e->stage) + e->stage_used;
  copy_elements(x, dst, XLENGTH(x));
  if (suiro_msg_put_ref(&e->m, e->stage, 0, dst, bytes, type, ndim ? WIRE_ORDER_F : WIRE_ORDER_C, ndim, dims) != WIRE_OK) {
    e->m.w.status = WIRE_OK;
    return 0;
  }
  e->stage_used += align8(bytes);
  e->stage_need = e->stage_need > align8(bytes) ? e->stage_need - align8(bytes) : 0;
  return 1;
}

/* ---- encoding: vectors ---------------------------------------------------------------------------- */

static void put_cstr(rs_encoder *e, const char *s) { wire_put_str(&e->m.w, s, strlen(s)); }

/* The UTF-8 bytes of a CHARSXP (translated when marked latin1 or native non-UTF-8). */
static const char *char_utf8(SEXP c, size_t *len) {
  cetype_t ce = Rf_getCharCE(c);
  if (ce == CE_UTF8 || ce == CE_BYTES || (ce == CE_NATIVE && native_utf8)) {
    *len = (size_t)LENGTH(c);
    return CHAR(c);
  }
  const char *s = Rf_translateCharUTF8(c);
  *len = strlen(s);
  return s;
}

static void put_strs(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  wire_put_strs(&e->m.w, (uint64_t)n);
  const void *vmax = vmaxget();
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP c = STRING_ELT(x, i);
    if (c == NA_STRING) {
      wire_strs_add_na(&e->m.w);
    } else {
      size_t len;
      const char *s = char_utf8(c, &len);
      wire_strs_add(&e->m.w, s, len);
    }
    if ((i & 1023) == 1023) vmaxset(vmax);
  }
  vmaxset(vmax);
  wcheck(e);
}

static void put_bool_array(rs_encoder *e, SEXP x, int nd, const uint64_t *dims) {
  R_xlen_t n = XLENGTH(x);
  uint8_t *d = nd ? wire_put_ndarray(&e->m.w, WIRE_T_BOOL, WIRE_ORDER_F, nd, dims) : wire_put_array(&e->m.w, WIRE_T_BOOL, (uint64_t)n);
  wcheck(e);
  const int *s = LOGICAL_RO(x);
  for (R_xlen_t i = 0; i < n; i++) d[i] = s[i] == NA_LOGICAL ? WIRE_NA_BOOL : (uint8_t)(s[i] != 0);
}

/* A numeric vector as an array or ndarray (nd > 0): by reference when large. */
static void put_numeric(rs_encoder *e, SEXP x, int type, int nd, const uint64_t *dims) {
  if (try_ref(e, x, type, nd, dims)) return;
  R_xlen_t n = XLENGTH(x);
  void *d = nd ? wire_put_ndarray(&e->m.w, type, WIRE_ORDER_F, nd, dims) : wire_put_array(&e->m.w, type, (uint64_t)n);
  wcheck(e);
  if (n) copy_elements(x, d, n);
}

static int wire_type_of(SEXP x) {
  switch (TYPEOF(x)) {
  case INTSXP: return WIRE_T_I32;
  case REALSXP: return rs_is_integer64(x) ? WIRE_T_I64 : WIRE_T_F64;
  case CPLXSXP: return WIRE_T_C128;
  case RAWSXP: return WIRE_T_U8;
  case LGLSXP: return WIRE_T_BOOL;
  default: return 0;
  }
}

/* An attribute-free vector. column: inside a frame (always the array form; raw is u8). */
static void enc_bare(rs_encoder *e, SEXP x, int column) {
  R_xlen_t n = XLENGTH(x);
  switch (TYPEOF(x)) {
  case LGLSXP:
    if (n == 1 && !column) {
      int v = LOGICAL_ELT(x, 0);
      wire_put_bool(&e->m.w, v == NA_LOGICAL ? WIRE_NA_BOOL : v != 0);
    } else {
      put_bool_array(e, x, 0, NULL);
    }
    break;
  case INTSXP:
    if (n == 1 && !column && INTEGER_ELT(x, 0) != NA_INTEGER) wire_put_i64(&e->m.w, INTEGER_ELT(x, 0));
    else put_numeric(e, x, WIRE_T_I32, 0, NULL);
    break;
  case REALSXP:
    if (n == 1 && !column) wire_put_f64(&e->m.w, REAL_ELT(x, 0));
    else put_numeric(e, x, WIRE_T_F64, 0, NULL);
    break;
  case CPLXSXP: put_numeric(e, x, WIRE_T_C128, 0, NULL); break;
  case STRSXP:
    if (n == 1 && !column && STRING_ELT(x, 0) != NA_STRING) {
      size_t len;
      const void *vmax = vmaxget();
      const char *s = char_utf8(STRING_ELT(x, 0), &len);
      wire_put_str(&e->m.w, s, len);
      vmaxset(vmax);
    } else {
      put_strs(e, x);
    }
    break;
  case RAWSXP:
    if (column || zc_candidate(e, x, (size_t)n)) {
      if (!column && try_ref(e, x, WIRE_T_U8, 0, NULL)) break;
      void *d = wire_put_array(&e->m.w, WIRE_T_U8, (uint64_t)n);
      wcheck(e);
      if (n) memcpy(d, RAW_RO(x), (size_t)n);
    } else {
      wire_put_bytes(&e->m.w, RAW_RO(x), (size_t)n);
    }
    break;
  default: efail(e, "a %s cannot be sent", Rf_type2char(TYPEOF(x)));
  }
  wcheck(e);
}

/* integer64 (bit64's layout: the bits of an int64 in a double). A length-1 value small enough
 * to be an R integer goes as a 1-element array so that it comes back as integer64. */
static void enc_i64(rs_encoder *e, SEXP x, int column) {
  R_xlen_t n = XLENGTH(x);
  if (n == 1 && !column) {
    int64_t v;
    double d = REAL_ELT(x, 0);
    memcpy(&v, &d, 8);
    if (v == INT64_MIN || v > 9007199254740992LL || v < -9007199254740992LL) {
      wire_put_i64(&e->m.w, v);
      wcheck(e);
      return;
    }
  }
  put_numeric(e, x, WIRE_T_I64, 0, NULL);
}

static void enc_factor(rs_encoder *e, SEXP x) {
  SEXP lev = Rf_getAttrib(x, R_LevelsSymbol);
  if (TYPEOF(lev) != STRSXP) efail(e, "a factor without character levels cannot be sent");
  R_xlen_t n = XLENGTH(x), nl = XLENGTH(lev);
  for (R_xlen_t k = 0; k < nl; k++)
    if (STRING_ELT(lev, k) == NA_STRING) efail(e, "factor level %.0f is NA, which the wire cannot hold", (double)k + 1);
  int32_t *codes = wire_put_factor(&e->m.w, (uint64_t)n, Rf_inherits(x, "ordered"), (uint64_t)nl);
  wcheck(e);
  const int *s = INTEGER_RO(x);
  for (R_xlen_t i = 0; i < n; i++) {
    int v = s[i];
    if (v == NA_INTEGER) codes[i] = WIRE_NA_CODE;
    else if (v < 1 || v > nl) efail(e, "factor code %d (element %.0f) is not a level (1..%.0f)", v, (double)i + 1, (double)nl);
    else codes[i] = v - 1;
  }
  const void *vmax = vmaxget();
  for (R_xlen_t k = 0; k < nl; k++) {
    size_t len;
    const char *sl = char_utf8(STRING_ELT(lev, k), &len);
    wire_strs_add(&e->m.w, sl, len);
  }
  vmaxset(vmax);
  wcheck(e);
}

static void enc_date(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  if (TYPEOF(x) == INTSXP) {
    void *d = wire_put_date(&e->m.w, WIRE_T_I32, (uint64_t)n);
    wcheck(e);
    if (n) memcpy(d, INTEGER_RO(x), (size_t)n * 4);
  } else {
    void *d = wire_put_date(&e->m.w, WIRE_T_F64, (uint64_t)n);
    wcheck(e);
    if (n) memcpy(d, REAL_RO(x), (size_t)n * 8);
  }
}

static void enc_timestamp(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  SEXP tz = Rf_getAttrib(x, rs_sym_tzone);
  const char *tzs = "";
  size_t tzl = 0;
  if (TYPEOF(tz) == STRSXP && XLENGTH(tz) >= 1 && STRING_ELT(tz, 0) != NA_STRING) tzs = char_utf8(STRING_ELT(tz, 0), &tzl);
  double *d = wire_put_timestamp(&e->m.w, WIRE_T_F64, WIRE_UNIT_S, (wire_str){ tzs, tzl }, (uint64_t)n);
  wcheck(e);
  if (TYPEOF(x) == REALSXP) {
    if (n) memcpy(d, REAL_RO(x), (size_t)n * 8);
  } else {
    const int *s = INTEGER_RO(x);
    for (R_xlen_t i = 0; i < n; i++) d[i] = s[i] == NA_INTEGER ? NA_REAL : (double)s[i];
  }
}

/* dim as wire extents; 0 when x has no usable dim. */
static int dims_of(rs_encoder *e, SEXP x, uint64_t *dims) {
  SEXP dim = attr_raw(x, R_DimSymbol);
  if (dim == R_NilValue) return 0;
  R_xlen_t nd = XLENGTH(dim);
  if (nd < 1 || nd > WIRE_MAX_NDIM) efail(e, "an array of %.0f dimensions cannot be sent", (double)nd);
  for (R_xlen_t k = 0; k < nd; k++) {
    double v = TYPEOF(dim) == INTSXP ? INTEGER_ELT(dim, k) : Rf_asReal(dim);
    if (TYPEOF(dim) == REALSXP) v = REAL_ELT(dim, k);
    if (!(v >= 0)) efail(e, "dimension %.0f is %g", (double)k + 1, v);
    dims[k] = (uint64_t)v;
  }
  return (int)nd;
}

static void enc_ndarray(rs_encoder *e, SEXP x) {
  uint64_t dims[WIRE_MAX_NDIM];
  int nd = dims_of(e, x, dims);
  switch (TYPEOF(x)) {
  case LGLSXP: put_bool_array(e, x, nd, dims); break;
  case INTSXP: put_numeric(e, x, WIRE_T_I32, nd, dims); break;
  case REALSXP: put_numeric(e, x, WIRE_T_F64, nd, dims); break;
  case CPLXSXP: put_numeric(e, x, WIRE_T_C128, nd, dims); break;
  case RAWSXP: put_numeric(e, x, WIRE_T_U8, nd, dims); break;
  default: efail(e, "a %s array cannot be sent to %s (only numeric and logical arrays cross)", type_word(x), peer(e));
  }
  wcheck(e);
}

/* ---- typed values (suiro_typed(): wire forms R has no type of its own for) --------------------- */

static const char *typed_str(SEXP x, SEXP sym, const char *dflt) {
  SEXP v = attr_raw(x, sym);
  return TYPEOF(v) == STRSXP && XLENGTH(v) == 1 ? CHAR(STRING_ELT(v, 0)) : dflt;
}

static int type_code(const char *name) {
  for (int k = 1; k <= WIRE_T_MAX; k++)
    if (!strcmp(name, wire_type_name(k))) return k;
  return 0;
}

/* Element i of a typed value's data, as an int64 (integer64 bits, integers or doubles). A double
 * that is no int64 (NaN, infinite, beyond 2^63) is refused naming it: the cast would be undefined. */
static int64_t data_i64_of(rs_encoder *e, SEXP x, R_xlen_t i) {
  if (rs_is_integer64(x) || (TYPEOF(x) == REALSXP && attr_raw(x, sym_suiro_bits) != R_NilValue)) {
    int64_t v;
    double d = REAL_ELT(x, i);
    memcpy(&v, &d, 8);
    return v;
  }
  if (TYPEOF(x) == INTSXP || TYPEOF(x) == LGLSXP) {
    int v = INTEGER_ELT(x, i);
    return v == NA_INTEGER ? INT64_MIN : v;
  }
  if (TYPEOF(x) == RAWSXP) return RAW(x)[i];
  if (TYPEOF(x) != REALSXP) efail(e, "suiro_typed: a %s vector has no integer values", Rf_type2char(TYPEOF(x)));
  double d = REAL_ELT(x, i);
  if (ISNA(d)) return INT64_MIN;
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    efail(e, "suiro_typed: element %.0f (%g) is not a 64-bit integer", (double)i + 1, d);
  return (int64_t)d;
}
#define data_i64(x, i) data_i64_of(e, x, i)

static void fill_typed(rs_encoder *e, SEXP x, int type, void *dst, R_xlen_t n) {
  for (R_xlen_t i = 0; i < n; i++) {
    switch (type) {
    case WIRE_T_F64: ((double *)dst)[i] = TYPEOF(x) == REALSXP ? REAL_ELT(x, i) : (double)INTEGER_ELT(x, i); break;
    case WIRE_T_F32: ((float *)dst)[i] = (float)(TYPEOF(x) == REALSXP ? REAL_ELT(x, i) : (double)INTEGER_ELT(x, i)); break;
    case WIRE_T_I64: ((int64_t *)dst)[i] = data_i64(x, i); break;
    case WIRE_T_I32: ((int32_t *)dst)[i] = (int32_t)data_i64(x, i); break;
    case WIRE_T_U8: ((uint8_t *)dst)[i] = (uint8_t)data_i64(x, i); break;
    case WIRE_T_BOOL: {
      int v = TYPEOF(x) == LGLSXP ? LOGICAL_ELT(x, i) : (int)data_i64(x, i);
      ((uint8_t *)dst)[i] = v == NA_LOGICAL ? WIRE_NA_BOOL : (uint8_t)(v != 0);
      break;
    }
    case WIRE_T_C128:
      if (TYPEOF(x) == CPLXSXP) memcpy((char *)dst + 16 * i, &COMPLEX_RO(x)[i], 16);
      else efail(e, "suiro_typed: c128 needs a complex vector");
      break;
    }
  }
}

static void enc_typed(rs_encoder *e, SEXP x) {
  const char *form = typed_str(x, sym_suiro_form, "array");
  const char *tn = typed_str(x, sym_suiro_type, "f64");
  int type = type_code(tn);
  if (!type) efail(e, "suiro_typed: unknown type \"%s\"", tn);
  R_xlen_t n = XLENGTH(x);
  if (!strcmp(form, "scalar")) {
    if (n != 1) efail(e, "suiro_typed: a scalar has one element, got %.0f", (double)n);
    if (type == WIRE_T_I64) wire_put_i64(&e->m.w, data_i64(x, 0));
    else if (type == WIRE_T_F64) wire_put_f64(&e->m.w, REAL_ELT(x, 0));
    else efail(e, "suiro_typed: scalars are i64 or f64");
  } else if (!strcmp(form, "array") || !strcmp(form, "ndarray")) {
    void *d;
    if (!strcmp(form, "ndarray")) {
      SEXP shape = attr_raw(x, sym_suiro_shape);
      uint64_t dims[WIRE_MAX_NDIM];
      if (TYPEOF(shape) != REALSXP) efail(e, "suiro_typed: an ndarray needs its shape");
      int nd = (int)XLENGTH(shape);
      if (XLENGTH(shape) > WIRE_MAX_NDIM) efail(e, "suiro_typed: %.0f dimensions, at most %d", (double)XLENGTH(shape), WIRE_MAX_NDIM);
      /* the shape must hold exactly the data's elements: the writer reserves the product */
      double prod = 1;
      for (int k = 0; k < nd; k++) {
        double v = REAL_ELT(shape, k);
        if (!(v >= 0 && v <= 281474976710655.0) || v != floor(v))
          efail(e, "suiro_typed: shape[%d] = %g is not a count (0 .. 2^48-1)", k + 1, v);
        dims[k] = (uint64_t)v;
        prod *= v;
      }
      if (prod != (double)n)
        efail(e, "suiro_typed: a shape of %.0f elements for %.0f values", prod, (double)n);
      int order = !strcmp(typed_str(x, sym_suiro_order, "F"), "C") ? WIRE_ORDER_C : WIRE_ORDER_F;
      d = wire_put_ndarray(&e->m.w, type, order, nd, dims);
    } else {
      d = wire_put_array(&e->m.w, type, (uint64_t)n);
    }
    wcheck(e);
    fill_typed(e, x, type, d, n);
  } else if (!strcmp(form, "date")) {
    void *d = wire_put_date(&e->m.w, type, (uint64_t)n);
    wcheck(e);
    fill_typed(e, x, type, d, n);
  } else if (!strcmp(form, "timestamp")) {
    const char *unit = typed_str(x, sym_suiro_unit, "s");
    int u = !strcmp(unit, "s") ? WIRE_UNIT_S : !strcmp(unit, "ms") ? WIRE_UNIT_MS : !strcmp(unit, "us") ? WIRE_UNIT_US : WIRE_UNIT_NS;
    SEXP tz = Rf_getAttrib(x, rs_sym_tzone);
    const char *tzs = TYPEOF(tz) == STRSXP && XLENGTH(tz) == 1 ? CHAR(STRING_ELT(tz, 0)) : "";
    void *d = wire_put_timestamp(&e->m.w, type, u, (wire_str){ tzs, strlen(tzs) }, (uint64_t)n);
    wcheck(e);
    fill_typed(e, x, type, d, n);
  } else if (!strcmp(form, "range")) {
    if (n != 3) efail(e, "suiro_typed: a range is c(start, step, n)");
    int64_t cnt = data_i64(x, 2);
    if (cnt < 0 || cnt > ((int64_t)1 << 48) - 1) efail(e, "suiro_typed: a range of %.0f elements (0 .. 2^48-1)", (double)cnt);
    wire_put_range(&e->m.w, data_i64(x, 0), data_i64(x, 1), (uint64_t)cnt);
  } else if (!strcmp(form, "strs")) {
    put_strs(e, x);
  } else {
    efail(e, "suiro_typed: unknown form \"%s\"", form);
  }
  wcheck(e);
}

/* ---- encoding: containers and objects ------------------------------------------------------------- */

static void enc(rs_encoder *e, SEXP x);

static int names_ok(SEXP nm, R_xlen_t n) {
  if (TYPEOF(nm) != STRSXP || XLENGTH(nm) != n) return 0;
  for (R_xlen_t i = 0; i < n; i++)
    if (STRING_ELT(nm, i) == NA_STRING) return 0;
  return 1;
}

static void enc_dict_of(rs_encoder *e, SEXP x, SEXP nm) {
  R_xlen_t n = XLENGTH(x);
  wire_put_dict(&e->m.w, (uint64_t)n);
  e->ncont++;
  wcheck(e);
  size_t at = e->plen;
  const void *vmax = vmaxget();
  for (R_xlen_t i = 0; i < n; i++) {
    size_t len;
    const char *k = char_utf8(STRING_ELT(nm, i), &len);
    wire_put_str(&e->m.w, k, len);
    rs_enc_path_push(e, "[['%s']]", k);
    enc(e, VECTOR_ELT(x, i));
    rs_enc_path_pop(e, at);
    vmaxset(vmax);
  }
}

static void enc_list_items(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  wire_put_list(&e->m.w, (uint64_t)n);
  e->ncont++;
  wcheck(e);
  size_t at = e->plen;
  for (R_xlen_t i = 0; i < n; i++) {
    rs_enc_path_push(e, "[[%.0f]]", (double)i + 1);
    enc(e, VECTOR_ELT(x, i));
    rs_enc_path_pop(e, at);
  }
}

/* The rich form of an object with attributes: FUNC(R, 0) "base::structure" [bare value, DICT]. */
static void enc_structure(rs_encoder *e, SEXP x) {
  wire_put_func(&e->m.w, WIRE_LANG_R, 0, 3);
  e->ncont++;
  put_cstr(e, "base::structure");
  wcheck(e);
  if (TYPEOF(x) == VECSXP) enc_list_items(e, x);
  else enc_bare(e, x, 0);
  int na = attr_count(x);
  wire_put_dict(&e->m.w, (uint64_t)na);
  e->ncont++;
  size_t at = e->plen;
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a)) {
    const char *k = CHAR(PRINTNAME(TAG(a)));
    put_cstr(e, k);
    rs_enc_path_push(e, " attribute '%s'", k);
    enc(e, CAR(a));
    rs_enc_path_pop(e, at);
  }
  wcheck(e);
}

static void enc_serialized(rs_encoder *e, SEXP x) {
  if (TYPEOF(x) == CLOSXP && CLOENV(x) != R_GlobalEnv) {
    /* a function inside a value keeps only the captured variables it uses */
    SEXP f = PROTECT(rs_call_fn("suiro", "strip_closure"));
    SEXP call = PROTECT(Rf_lang2(f, x));
    x = Rf_eval(call, R_BaseEnv);
    UNPROTECT(2);
  }
  PROTECT(x);
  SEXP raw = PROTECT(rs_serialize(x));
  wire_put_func(&e->m.w, WIRE_LANG_R, 0, 2);
  e->ncont++;
  put_cstr(e, "base::unserialize");
  wire_put_bytes(&e->m.w, RAW_RO(raw), (size_t)XLENGTH(raw));
  UNPROTECT(2);
  wcheck(e);
}

static int is_view(SEXP x) {
  suiro_buf *b;
  const void *d;
  size_t n;
  return rs_view_info(x, &b, &d, &n);
}

static const char *what_is(SEXP x) {
  switch (TYPEOF(x)) {
  case CLOSXP: case BUILTINSXP: case SPECIALSXP: return "a function";
  case ENVSXP: return "an environment";
  case EXTPTRSXP: return "an external pointer";
  case S4SXP: return "an S4 object";
  case LANGSXP: return Rf_inherits(x, "formula") ? "a formula" : "a call (language object)";
  case SYMSXP: return "a symbol";
  case EXPRSXP: return "an expression vector";
  case LISTSXP: return "a pairlist";
  case WEAKREFSXP: return "a weak reference";
  case BCODESXP: return "byte code";
  default: return Rf_type2char(TYPEOF(x));
  }
}

/* Strict mode: a data frame becomes a FRAME; row names that are not automatic become a first
 * column "_row_names" (docs/wire-format.md, R conventions). */
static void enc_column(rs_encoder *e, SEXP col);
static void enc_descriptor(rs_encoder *e, SEXP x);

static void enc_frame(rs_encoder *e, SEXP x) {
  SEXP nm = Rf_getAttrib(x, R_NamesSymbol);
  R_xlen_t nc = XLENGTH(x);
  if (!names_ok(nm, nc)) efail(e, "a data frame needs a name for every column");
  SEXP rn = attr_raw(x, R_RowNamesSymbol);
  R_xlen_t nrow;
  int keep_rn = 0;
  if (TYPEOF(rn) == INTSXP && XLENGTH(rn) == 2 && INTEGER_ELT(rn, 0) == NA_INTEGER) {
    nrow = abs(INTEGER_ELT(rn, 1));
  } else {
    nrow = XLENGTH(rn);
    keep_rn = nrow > 0;
  }
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a))
    if (TAG(a) != R_NamesSymbol && TAG(a) != R_RowNamesSymbol && TAG(a) != R_ClassSymbol)
      efail(e, "a data frame with attribute '%s' cannot be sent to %s", CHAR(PRINTNAME(TAG(a))), peer(e));
  wire_put_frame(&e->m.w, (uint64_t)(nc + keep_rn), (uint64_t)nrow);
  wcheck(e);
  size_t at = e->plen;
  if (keep_rn) {
    put_cstr(e, "_row_names");
    rs_enc_path_push(e, " row names");
    enc_column(e, rn);
    rs_enc_path_pop(e, at);
  }
  const void *vmax = vmaxget();
  for (R_xlen_t i = 0; i < nc; i++) {
    size_t len;
    const char *k = char_utf8(STRING_ELT(nm, i), &len);
    wire_put_str(&e->m.w, k, len);
    rs_enc_path_push(e, "$%s", k);
    SEXP col = VECTOR_ELT(x, i);
    if (XLENGTH(col) != nrow && !Rf_inherits(col, "suiro_wire_ref"))
      efail(e, "column has %.0f rows, the frame %.0f", (double)XLENGTH(col), (double)nrow);
    enc_column(e, col);
    rs_enc_path_pop(e, at);
    vmaxset(vmax);
  }
}

static void enc_column(rs_encoder *e, SEXP col) {
  int t = TYPEOF(col);
  if (Rf_inherits(col, "suiro_typed")) return enc_typed(e, col);
  if (t == VECSXP && Rf_inherits(col, "suiro_wire_ref")) return enc_descriptor(e, col);
  if (t == INTSXP && Rf_inherits(col, "factor")) return enc_factor(e, col);
  if ((t == REALSXP || t == INTSXP) && class_is(col, cls_date)) return enc_date(e, col);
  if ((t == REALSXP || t == INTSXP) && Rf_inherits(col, "POSIXct")) return enc_timestamp(e, col);
  if (rs_is_integer64(col)) return put_numeric(e, col, WIRE_T_I64, 0, NULL);
  if (ATTRIB(col) != R_NilValue) {
    SEXP cls = Rf_getAttrib(col, R_ClassSymbol);
    if (cls != R_NilValue) efail(e, "a column of class \"%s\" cannot be sent to %s", CHAR(STRING_ELT(cls, 0)), peer(e));
    if (attr_raw(col, R_DimSymbol) != R_NilValue) efail(e, "a matrix column cannot be sent to %s", peer(e));
    if (attr_raw(col, R_NamesSymbol) == R_NilValue)
      efail(e, "a column with attributes cannot be sent to %s", peer(e));
    /* names on a column are dropped by data.frame() itself; refuse the rare exception */
    efail(e, "a named column cannot be sent to %s (use unname())", peer(e));
  }
  switch (t) {
  case LGLSXP: case INTSXP: case REALSXP: case CPLXSXP: case STRSXP: case RAWSXP: enc_bare(e, col, 1); return;
  case VECSXP: efail(e, "a list column cannot be sent to %s", peer(e));
  default: efail(e, "a column of type %s cannot be sent", Rf_type2char(t));
  }
}

static void enc_call_spec(rs_encoder *e, SEXP x) {
  SEXP nm = Rf_getAttrib(x, R_NamesSymbol);
  SEXP target = R_NilValue, source = R_NilValue, args = R_NilValue, named = R_NilValue;
  for (R_xlen_t i = 0; i < XLENGTH(x); i++) {
    const char *k = CHAR(STRING_ELT(nm, i));
    if (!strcmp(k, "target")) target = VECTOR_ELT(x, i);
    else if (!strcmp(k, "source")) source = VECTOR_ELT(x, i);
    else if (!strcmp(k, "args")) args = VECTOR_ELT(x, i);
    else if (!strcmp(k, "named")) named = VECTOR_ELT(x, i);
  }
  const void *vmax = vmaxget();
  size_t len;
  if (TYPEOF(source) == STRSXP) {
    const char *s = char_utf8(STRING_ELT(source, 0), &len);
    wire_put_call(&e->m.w, WIRE_CALL_SOURCE, (wire_str){ s, len });
  } else if (TYPEOF(target) == STRSXP) {
    const char *s = char_utf8(STRING_ELT(target, 0), &len);
    wire_put_call(&e->m.w, WIRE_CALL_NAME, (wire_str){ s, len });
  } else {
    efail(e, "a call spec needs a target name or source");
  }
  vmaxset(vmax);
  wcheck(e);
  size_t at = e->plen;
  R_xlen_t na = TYPEOF(args) == VECSXP ? XLENGTH(args) : 0;
  wire_put_list(&e->m.w, (uint64_t)na);
  e->ncont++;
  for (R_xlen_t i = 0; i < na; i++) {
    rs_enc_path_push(e, " argument %.0f", (double)i + 1);
    enc(e, VECTOR_ELT(args, i));
    rs_enc_path_pop(e, at);
  }
  R_xlen_t nn = TYPEOF(named) == VECSXP ? XLENGTH(named) : 0;
  SEXP nnm = Rf_getAttrib(named, R_NamesSymbol);
  wire_put_dict(&e->m.w, (uint64_t)nn);
  e->ncont++;
  for (R_xlen_t i = 0; i < nn; i++) {
    const char *k = char_utf8(STRING_ELT(nnm, i), &len);
    wire_put_str(&e->m.w, k, len);
    rs_enc_path_push(e, " argument '%s'", k);
    enc(e, VECTOR_ELT(named, i));
    rs_enc_path_pop(e, at);
  }
  wcheck(e);
}

static SEXP list_get(SEXP x, const char *name) {
  SEXP nm = Rf_getAttrib(x, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(x); i++)
    if (nm != R_NilValue && !strcmp(CHAR(STRING_ELT(nm, i)), name)) return VECTOR_ELT(x, i);
  return R_NilValue;
}

static const char *str1(SEXP x, const char *dflt) {
  return TYPEOF(x) == STRSXP && XLENGTH(x) >= 1 && STRING_ELT(x, 0) != NA_STRING ? CHAR(STRING_ELT(x, 0)) : dflt;
}

static uint64_t u64_of(SEXP x) { /* integer64 bits, a double, or a decimal string */
  if (rs_is_integer64(x)) {
    uint64_t v;
    double d = REAL_ELT(x, 0);
    memcpy(&v, &d, 8);
    return v;
  }
  if (TYPEOF(x) == STRSXP) return strtoull(CHAR(STRING_ELT(x, 0)), NULL, 10);
  return (uint64_t)Rf_asReal(x);
}

static void enc_error_obj(rs_encoder *e, SEXP x) {
  const char *cls = str1(list_get(x, "remote_class"), "remote");
  const char *msg = str1(list_get(x, "message"), "");
  const char *tb = str1(list_get(x, "traceback"), "");
  SEXP idx = list_get(x, "index");
  int64_t index = idx == R_NilValue || Rf_asReal(idx) != Rf_asReal(idx) ? -1 : (int64_t)Rf_asReal(idx) - 1;
  wire_put_error(&e->m.w, (wire_str){ cls, strlen(cls) }, (wire_str){ msg, strlen(msg) }, (wire_str){ tb, strlen(tb) },
                 index < -1 ? -1 : index);
  wcheck(e);
}

static void enc_descriptor(rs_encoder *e, SEXP x) {
  if (Rf_inherits(x, "suiro_wire_ref")) {
    wire_ref r;
    memset(&r, 0, sizeof r);
    const char *name = str1(list_get(x, "name"), "");
    r.name = (wire_str){ name, strlen(name) };
    const char *t = str1(list_get(x, "type"), "bytes");
    r.type = !strcmp(t, "bytes") ? WIRE_REF_BYTES : !strcmp(t, "wire") ? WIRE_REF_WIRE : type_code(t);
    r.order = !strcmp(str1(list_get(x, "order"), "C"), "F");
    r.flags = u64_of(list_get(x, "flags"));
    r.offset = (uint64_t)Rf_asReal(list_get(x, "offset"));
    r.length = (uint64_t)Rf_asReal(list_get(x, "length"));
    SEXP shape = list_get(x, "shape");
    uint64_t dims[WIRE_MAX_NDIM];
    r.ndim = (int)XLENGTH(shape);
    if (r.ndim > WIRE_MAX_NDIM) efail(e, "a reference of too many dimensions");
    for (int k = 0; k < r.ndim; k++) dims[k] = (uint64_t)(TYPEOF(shape) == INTSXP ? INTEGER_ELT(shape, k) : REAL_ELT(shape, k));
    r.dims = dims;
    wire_put_ref(&e->m.w, &r);
  } else {
    const char *lang = str1(list_get(x, "lang"), "lua");
    int l = !strcmp(lang, "lua") ? WIRE_LANG_LUA : !strcmp(lang, "python") ? WIRE_LANG_PYTHON : WIRE_LANG_R;
    SEXP cap = list_get(x, "captured");
    R_xlen_t nc = TYPEOF(cap) == VECSXP ? XLENGTH(cap) : 0;
    wire_put_func(&e->m.w, l, u64_of(list_get(x, "key")), (uint64_t)nc + 1);
    e->ncont++;
    enc(e, list_get(x, "name"));
    size_t at = e->plen;
    for (R_xlen_t i = 0; i < nc; i++) {
      rs_enc_path_push(e, " captured %.0f", (double)i + 1);
      enc(e, VECTOR_ELT(cap, i));
      rs_enc_path_pop(e, at);
    }
  }
  wcheck(e);
}

static void enc_list(rs_encoder *e, SEXP x) {
  SEXP at = ATTRIB(x);
  if (at == R_NilValue) return enc_list_items(e, x);
  if (TAG(at) == R_NamesSymbol && CDR(at) == R_NilValue && names_ok(CAR(at), XLENGTH(x)))
    return enc_dict_of(e, x, CAR(at));
  if (class_is(x, cls_call)) return enc_call_spec(e, x);
  if (Rf_inherits(x, "suiro_wire_ref") || Rf_inherits(x, "suiro_wire_func")) return enc_descriptor(e, x);
  if (e->o.rich) return enc_structure(e, x);
  if (class_is(x, cls_frame)) return enc_frame(e, x);
  if (Rf_inherits(x, "suiro_error_remote")) return enc_error_obj(e, x);
  if (Rf_inherits(x, "data.frame"))
    efail(e, "a data frame of class \"%s\" cannot be sent to %s (use as.data.frame())",
          CHAR(STRING_ELT(Rf_getAttrib(x, R_ClassSymbol), 0)), peer(e));
  SEXP cls = Rf_getAttrib(x, R_ClassSymbol);
  if (cls != R_NilValue) efail(e, "a list of class \"%s\" cannot be sent to %s", CHAR(STRING_ELT(cls, 0)), peer(e));
  if (attr_raw(x, R_NamesSymbol) != R_NilValue && attr_count(x) == 1)
    efail(e, "a list with NA names cannot be sent to %s", peer(e));
  efail(e, "a list with attributes (%s) cannot be sent to %s", CHAR(PRINTNAME(TAG(at))), peer(e));
}

/* Atomic vectors with attributes. */
static void enc_atomic(rs_encoder *e, SEXP x) {
  SEXP at = ATTRIB(x);
  int t = TYPEOF(x);
  if (at == R_NilValue) return enc_bare(e, x, 0);
  if (Rf_inherits(x, "suiro_typed")) return enc_typed(e, x);
  int na = attr_count(x);
  /* the portable forms, when they carry exactly these attributes (then they also round-trip
   * exactly between R processes) */
  int exact = 0;
  if (t == INTSXP && na == 2 && (class_is(x, cls_factor) || class_is(x, cls_ordered)) &&
      TYPEOF(attr_raw(x, R_LevelsSymbol)) == STRSXP)
    exact = 1;
  else if ((t == REALSXP || t == INTSXP) && na == 1 && class_is(x, cls_date)) exact = 2;
  else if (t == REALSXP && na == 2 && class_is(x, cls_posixct) && TYPEOF(attr_raw(x, rs_sym_tzone)) == STRSXP &&
           XLENGTH(attr_raw(x, rs_sym_tzone)) == 1)
    exact = 3;
  else if (na == 1 && rs_is_integer64(x)) exact = 4;
  else if (na == 1 && TAG(at) == R_DimSymbol && t != STRSXP) exact = 5;
  if (e->o.rich) {
    size_t es = elt_size(x);
    int large = es && zc_candidate(e, x, (size_t)XLENGTH(x) * es);
    if (exact == 4 || exact == 5 || (exact && !large)) goto portable;
    return enc_structure(e, x);
  }
  if (exact) goto portable;
  /* strict: what is close to portable but not quite */
  if (t == INTSXP && Rf_inherits(x, "factor")) return enc_factor(e, x);
  if ((t == REALSXP || t == INTSXP) && Rf_inherits(x, "POSIXct")) return enc_timestamp(e, x);
  if ((t == REALSXP || t == INTSXP) && Rf_inherits(x, "Date")) return enc_date(e, x);
  if (attr_raw(x, R_NamesSymbol) != R_NilValue)
    efail(e, "a named %s vector cannot be sent to %s (names do not cross; use unname() or as.list())", type_word(x),
          peer(e));
  if (attr_raw(x, Rf_install("dimnames")) != R_NilValue)
    efail(e, "a matrix with dimnames cannot be sent to %s (use unname())", peer(e));
  SEXP cls = Rf_getAttrib(x, R_ClassSymbol);
  if (cls != R_NilValue) efail(e, "a %s vector of class \"%s\" cannot be sent to %s", type_word(x), CHAR(STRING_ELT(cls, 0)), peer(e));
  efail(e, "a %s vector with attribute '%s' cannot be sent to %s", type_word(x), CHAR(PRINTNAME(TAG(at))), peer(e));
portable:
  switch (exact) {
  case 1: return enc_factor(e, x);
  case 2: return enc_date(e, x);
  case 3: return enc_timestamp(e, x);
  case 4: return enc_i64(e, x, 0);
  default: return enc_ndarray(e, x);
  }
}

static void enc(rs_encoder *e, SEXP x) {
  if (++e->depth > WIRE_MAX_DEPTH) efail(e, "nested more than %d levels deep", WIRE_MAX_DEPTH);
  switch (TYPEOF(x)) {
  case NILSXP: wire_put_nil(&e->m.w); break;
  case LGLSXP: case INTSXP: case REALSXP: case CPLXSXP: case STRSXP: case RAWSXP:
    if (IS_S4_OBJECT(x)) {
      if (!e->o.rich) efail(e, "an S4 object cannot be sent to %s", peer(e));
      enc_serialized(e, x);
      break;
    }
    if (ATTRIB(x) != R_NilValue && e->o.rich && is_view(x) && attr_raw(x, R_DimSymbol) == R_NilValue) {
      enc_structure(e, x); /* a view with a class (Date, integer64): its reference and the attributes */
      break;
    }
    enc_atomic(e, x);
    break;
  case VECSXP:
    if (IS_S4_OBJECT(x) && e->o.rich) enc_serialized(e, x);
    else enc_list(e, x);
    break;
  default:
    if (TYPEOF(x) == EXTPTRSXP || TYPEOF(x) == WEAKREFSXP)
      efail(e, "%s cannot be sent (it points into this process)%s", what_is(x),
            Rf_inherits(x, "suiro_pool") ? "; inside a worker use suiro_current_pool()" : "");
    if (e->o.rich) enc_serialized(e, x);
    else if (TYPEOF(x) == CLOSXP || TYPEOF(x) == BUILTINSXP || TYPEOF(x) == SPECIALSXP)
      efail(e, "a function cannot be sent to %s (R functions run only on R workers; use a call spec)", peer(e));
    else efail(e, "%s cannot be sent to %s", what_is(x), peer(e));
  }
  wcheck(e);
  e->depth--;
}

void rs_enc_value(rs_encoder *e, SEXP x, const char *what) {
  size_t at = e->plen;
  if (what) rs_enc_path_push(e, "%s", what);
  enc(e, x);
  rs_enc_path_pop(e, at);
}

/* ---- decoding ---------------------------------------------------------------------------------- */

static void __attribute__((noreturn)) dfail(rs_decoder *d, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Rf_error("cannot decode the %s: %s", d->o.where ? d->o.where : "value", msg);
}

int rs_dec_next(rs_decoder *d, wire_item *it) {
  int rc = wire_next(&d->r, it);
  if (rc != WIRE_OK) dfail(d, "%s", rc == WIRE_END ? "unexpected end of the value" : wire_reader_error(&d->r));
  return rc;
}

static SEXP dec_item(rs_decoder *d, wire_item *it);

SEXP rs_dec_next_value(rs_decoder *d) {
  wire_item it;
  rs_dec_next(d, &it);
  return dec_item(d, &it);
}

/* A container starts: its ordinal (for backrefs). */
static uint64_t container_begin(rs_decoder *d) {
  uint64_t k = d->ncont++;
  if (d->have_refs) {
    if (k >= d->open_cap) {
      size_t cap = d->open_cap ? d->open_cap * 2 : 64;
      while (cap <= k) cap *= 2;
      char *o = R_alloc(cap, 1);
      if (d->open_cap) memcpy(o, d->open, d->open_cap);
      memset(o + d->open_cap, 0, cap - d->open_cap);
      d->open = o;
      d->open_cap = cap;
      if ((R_xlen_t)cap > XLENGTH(d->refs)) {
        SEXP nr = Rf_allocVector(VECSXP, (R_xlen_t)cap);
        for (R_xlen_t i = 0; i < XLENGTH(d->refs); i++) SET_VECTOR_ELT(nr, i, VECTOR_ELT(d->refs, i));
        REPROTECT(d->refs = nr, d->refs_pi);
      }
    }
    d->open[k] = 1;
  }
  return k;
}

static void container_end(rs_decoder *d, uint64_t k, SEXP v) {
  if (!d->have_refs) return;
  d->open[k] = 0;
  SET_VECTOR_ELT(d->refs, (R_xlen_t)k, v);
}

void rs_dec_count_container(rs_decoder *d) { container_begin(d); }

static R_xlen_t xlen_of(rs_decoder *d, uint64_t n) {
  if (n > (uint64_t)R_XLEN_T_MAX) dfail(d, "%.0f elements are more than an R vector holds", (double)n);
  return (R_xlen_t)n;
}

/* Whether array data inside the region being decoded should become a view. */
static int view_here(rs_decoder *d, size_t bytes) { return d->o.region && bytes >= suiro_zc_floor; }

static SEXP view_in_region(rs_decoder *d, const void *data, R_xlen_t n, int type) {
  suiro_buf_hold(d->o.region);
  return rs_view_new(d->o.region, data, n, type, 0);
}

/* A 1-d typed array (data points at n elements of `type`). */
static SEXP dec_array(rs_decoder *d, int type, const void *data, uint64_t n64) {
  R_xlen_t n = xlen_of(d, n64);
  SEXP x;
  switch (type) {
  case WIRE_T_F64:
    if (view_here(d, (size_t)n * 8)) return view_in_region(d, data, n, WIRE_T_F64);
    x = Rf_allocVector(REALSXP, n);
    if (n) memcpy(REAL(x), data, (size_t)n * 8);
    return x;
  case WIRE_T_F32: {
    x = Rf_allocVector(REALSXP, n);
    const float *s = data;
    double *o = REAL(x);
    for (R_xlen_t i = 0; i < n; i++) o[i] = s[i];
    return x;
  }
  case WIRE_T_I64:
    if (view_here(d, (size_t)n * 8)) return view_in_region(d, data, n, WIRE_T_I64);
    x = PROTECT(rs_integer64(n));
    if (n) memcpy(REAL(x), data, (size_t)n * 8);
    UNPROTECT(1);
    return x;
  case WIRE_T_I32:
    if (view_here(d, (size_t)n * 4)) return view_in_region(d, data, n, WIRE_T_I32);
    x = Rf_allocVector(INTSXP, n);
    if (n) memcpy(INTEGER(x), data, (size_t)n * 4);
    return x;
  case WIRE_T_U8:
    if (view_here(d, (size_t)n)) return view_in_region(d, data, n, WIRE_T_U8);
    x = Rf_allocVector(RAWSXP, n);
    if (n) memcpy(RAW(x), data, (size_t)n);
    return x;
  case WIRE_T_BOOL: {
    x = Rf_allocVector(LGLSXP, n);
    const uint8_t *s = data;
    int *o = LOGICAL(x);
    for (R_xlen_t i = 0; i < n; i++) o[i] = s[i] == WIRE_NA_BOOL ? NA_LOGICAL : s[i];
    return x;
  }
  case WIRE_T_C128:
    if (view_here(d, (size_t)n * 16)) return view_in_region(d, data, n, WIRE_T_C128);
    x = Rf_allocVector(CPLXSXP, n);
    if (n) memcpy(COMPLEX(x), data, (size_t)n * 16);
    return x;
  default: dfail(d, "unknown element type %d", type);
  }
}

/* C order -> R's F order: a copy with the index order reversed. */
static SEXP c_to_f(rs_decoder *d, SEXP src, int ndim, const uint64_t *dims) {
  R_xlen_t n = XLENGTH(src);
  SEXP out = PROTECT(Rf_allocVector(TYPEOF(src), n));
  if (Rf_inherits(src, "integer64")) Rf_setAttrib(out, R_ClassSymbol, cls_integer64);
  size_t es = TYPEOF(src) == CPLXSXP ? 16 : TYPEOF(src) == REALSXP ? 8 : TYPEOF(src) == RAWSXP ? 1 : 4;
  const char *s = (const char *)DATAPTR_RO(src);
  char *o = (char *)DATAPTR(out);
  /* C strides */
  R_xlen_t cstride[WIRE_MAX_NDIM];
  R_xlen_t st = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    cstride[k] = st;
    st *= (R_xlen_t)dims[k];
  }
  R_xlen_t idx[WIRE_MAX_NDIM] = { 0 };
  R_xlen_t ci = 0;
  for (R_xlen_t fi = 0; fi < n; fi++) {
    if (!((fi + 1) & RS_INTERRUPT_MASK) && d->interruptible) R_CheckUserInterrupt();
    memcpy(o + fi * es, s + ci * es, es);
    for (int k = 0; k < ndim; k++) { /* F order: first index fastest */
      idx[k]++;
      ci += cstride[k];
      if (idx[k] < (R_xlen_t)dims[k]) break;
      ci -= cstride[k] * idx[k];
      idx[k] = 0;
    }
  }
  UNPROTECT(1);
  return out;
}

static void set_dim(SEXP x, int ndim, const uint64_t *dims) {
  SEXP dim = PROTECT(Rf_allocVector(INTSXP, ndim));
  for (int k = 0; k < ndim; k++) INTEGER(dim)[k] = (int)dims[k];
  Rf_setAttrib(x, R_DimSymbol, dim);
  UNPROTECT(1);
}

static SEXP dec_ndarray(rs_decoder *d, wire_item *it) {
  for (int k = 0; k < it->ndim; k++)
    if (it->dims[k] > INT_MAX) dfail(d, "dimension %d of %.0f is more than R allows", k + 1, (double)it->dims[k]);
  SEXP x = PROTECT(dec_array(d, it->type, it->data, it->n));
  if (it->ndim == 0) {
    UNPROTECT(1);
    return x; /* R has no 0-d arrays: a length-1 vector */
  }
  if (it->flag == WIRE_ORDER_C && it->ndim > 1) x = c_to_f(d, x, it->ndim, it->dims);
  PROTECT(x);
  set_dim(x, it->ndim, it->dims);
  UNPROTECT(2);
  return x;
}

static SEXP dec_strs(rs_decoder *d, const wire_strs *s) {
  R_xlen_t n = xlen_of(d, s->n);
  SEXP x = PROTECT(Rf_allocVector(STRSXP, n));
  wire_strs_iter iter = wire_strs_begin(s);
  const char *p;
  size_t len;
  char what[64];
  for (R_xlen_t i = 0; wire_strs_next(&iter, &p, &len); i++) {
    if (!((i + 1) & RS_INTERRUPT_MASK) && d->interruptible) R_CheckUserInterrupt();
    if (!p) {
      SET_STRING_ELT(x, i, NA_STRING);
      continue;
    }
    if (memchr(p, 0, len)) {
      snprintf(what, sizeof what, "string %.0f", (double)i + 1);
      dfail(d, "%s holds a NUL byte, which an R string cannot", what);
    }
    SET_STRING_ELT(x, i, Rf_mkCharLenCE(p, (int)len, CE_UTF8));
  }
  UNPROTECT(1);
  return x;
}

static SEXP mk_str(rs_decoder *d, const void *p, size_t n) {
  if (memchr(p, 0, n)) dfail(d, "a string holds a NUL byte, which an R string cannot");
  if (n > INT_MAX) dfail(d, "a string of %.0f bytes is longer than R allows", (double)n);
  return Rf_ScalarString(Rf_mkCharLenCE(p, (int)n, CE_UTF8));
}

static SEXP scalar_i64(int64_t v) {
  if (v > INT32_MIN && v <= INT32_MAX) return Rf_ScalarInteger((int)v);
  if (v != INT64_MIN && v >= -9007199254740992LL && v <= 9007199254740992LL) return Rf_ScalarReal((double)v);
  SEXP x = PROTECT(rs_integer64(1));
  memcpy(REAL(x), &v, 8);
  UNPROTECT(1);
  return x;
}

static SEXP named_list(R_xlen_t n, SEXP *names_out) {
  SEXP x = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, n));
  Rf_setAttrib(x, R_NamesSymbol, nm);
  *names_out = nm;
  UNPROTECT(2);
  return x;
}

static SEXP dec_key(rs_decoder *d) {
  wire_item k;
  rs_dec_next(d, &k);
  if (k.tag != WIRE_STR) dfail(d, "a key is %s, not a string", wire_tag_name(k.tag));
  if (memchr(k.data, 0, k.n)) dfail(d, "a key holds a NUL byte");
  return Rf_mkCharLenCE(k.data, (int)k.n, CE_UTF8);
}

static double unit_scale(int unit) {
  switch (unit) {
  case WIRE_UNIT_MS: return 1e-3;
  case WIRE_UNIT_US: return 1e-6;
  case WIRE_UNIT_NS: return 1e-9;
  default: return 1;
  }
}

static SEXP dec_date(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  SEXP x;
  if (it->type == WIRE_T_I32) {
    x = PROTECT(Rf_allocVector(INTSXP, n));
    if (n) memcpy(INTEGER(x), it->data, (size_t)n * 4);
  } else {
    x = PROTECT(Rf_allocVector(REALSXP, n));
    if (it->type == WIRE_T_F64) {
      if (n) memcpy(REAL(x), it->data, (size_t)n * 8);
    } else {
      const int64_t *s = it->data;
      for (R_xlen_t i = 0; i < n; i++) REAL(x)[i] = s[i] == INT64_MIN ? NA_REAL : (double)s[i];
    }
  }
  Rf_setAttrib(x, R_ClassSymbol, cls_date);
  UNPROTECT(1);
  return x;
}

static SEXP dec_timestamp(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  SEXP x = PROTECT(Rf_allocVector(REALSXP, n));
  double scale = unit_scale(it->flag);
  if (it->type == WIRE_T_F64) {
    const double *s = it->data;
    for (R_xlen_t i = 0; i < n; i++) REAL(x)[i] = scale == 1 ? s[i] : s[i] * scale;
  } else {
    const int64_t *s = it->data;
    for (R_xlen_t i = 0; i < n; i++) REAL(x)[i] = s[i] == INT64_MIN ? NA_REAL : (double)s[i] * scale;
  }
  Rf_setAttrib(x, R_ClassSymbol, cls_posixct);
  SEXP tz = PROTECT(Rf_allocVector(STRSXP, 1));
  if (memchr(it->text[0].ptr, 0, it->text[0].len)) dfail(d, "a time zone holds a NUL byte");
  SET_STRING_ELT(tz, 0, Rf_mkCharLenCE(it->text[0].ptr, (int)it->text[0].len, CE_UTF8));
  Rf_setAttrib(x, rs_sym_tzone, tz);
  UNPROTECT(2);
  return x;
}

static SEXP dec_factor(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  SEXP x = PROTECT(Rf_allocVector(INTSXP, n));
  const int32_t *c = it->data;
  for (R_xlen_t i = 0; i < n; i++) INTEGER(x)[i] = c[i] < 0 ? NA_INTEGER : c[i] + 1;
  SEXP lev = PROTECT(dec_strs(d, &it->strs));
  Rf_setAttrib(x, R_LevelsSymbol, lev);
  Rf_setAttrib(x, R_ClassSymbol, it->flag ? cls_ordered : cls_factor);
  UNPROTECT(2);
  return x;
}

static SEXP dec_frame(rs_decoder *d, wire_item *it) {
  R_xlen_t nc = xlen_of(d, it->n), nrow = xlen_of(d, it->nrow);
  if (nrow > INT_MAX) dfail(d, "a data frame of %.0f rows is more than R allows", (double)nrow);
  SEXP cols = PROTECT(Rf_allocVector(VECSXP, nc));
  SEXP nms = PROTECT(Rf_allocVector(STRSXP, nc));
  SEXP hold = PROTECT(Rf_allocVector(VECSXP, 1)); /* the row names column, if any */
  R_xlen_t k = 0;
  for (R_xlen_t i = 0; i < nc; i++) {
    SEXP key = PROTECT(dec_key(d));
    SEXP col = PROTECT(rs_dec_next_value(d));
    if (VECTOR_ELT(hold, 0) == R_NilValue && !strcmp(CHAR(key), "_row_names") &&
        (TYPEOF(col) == STRSXP || TYPEOF(col) == INTSXP) && ATTRIB(col) == R_NilValue) {
      SET_VECTOR_ELT(hold, 0, col);
    } else {
      SET_STRING_ELT(nms, k, key);
      SET_VECTOR_ELT(cols, k++, col);
    }
    UNPROTECT(2);
  }
  SEXP x = cols, nm = nms;
  if (k < nc) {
    x = PROTECT(Rf_allocVector(VECSXP, k));
    nm = PROTECT(Rf_allocVector(STRSXP, k));
    for (R_xlen_t i = 0; i < k; i++) {
      SET_VECTOR_ELT(x, i, VECTOR_ELT(cols, i));
      SET_STRING_ELT(nm, i, STRING_ELT(nms, i));
    }
  } else {
    PROTECT(x);
    PROTECT(nm);
  }
  Rf_setAttrib(x, R_NamesSymbol, nm);
  Rf_setAttrib(x, R_ClassSymbol, cls_frame);
  if (VECTOR_ELT(hold, 0) != R_NilValue) {
    Rf_setAttrib(x, R_RowNamesSymbol, VECTOR_ELT(hold, 0));
  } else {
    SEXP crn = PROTECT(Rf_allocVector(INTSXP, 2));
    INTEGER(crn)[0] = NA_INTEGER;
    INTEGER(crn)[1] = -(int)nrow;
    Rf_setAttrib(x, R_RowNamesSymbol, crn);
    UNPROTECT(1);
  }
  UNPROTECT(5);
  return x;
}

static SEXP wire_str_sexp(wire_str s) { return Rf_ScalarString(Rf_mkCharLenCE(s.ptr, (int)s.len, CE_UTF8)); }

static SEXP dec_error(rs_decoder *d, wire_item *it) {
  const char *names[] = { "message", "call", "remote_class", "traceback", "index" };
  SEXP nm;
  SEXP x = PROTECT(named_list(5, &nm));
  for (int i = 0; i < 5; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  for (int k = 0; k < 3; k++)
    if (memchr(it->text[k].ptr, 0, it->text[k].len)) dfail(d, "an error text holds a NUL byte");
  SET_VECTOR_ELT(x, 0, wire_str_sexp(it->text[1]));
  SET_VECTOR_ELT(x, 2, wire_str_sexp(it->text[0]));
  SET_VECTOR_ELT(x, 3, wire_str_sexp(it->text[2]));
  SET_VECTOR_ELT(x, 4, it->i < 0 ? Rf_ScalarInteger(NA_INTEGER) : Rf_ScalarReal((double)it->i + 1));
  Rf_setAttrib(x, R_ClassSymbol, cls_remote);
  UNPROTECT(1);
  return x;
}

static SEXP dec_call(rs_decoder *d, wire_item *it) {
  SEXP nm;
  SEXP x = PROTECT(named_list(4, &nm));
  const char *names[] = { "target", "source", "args", "named" };
  for (int i = 0; i < 4; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  if (memchr(it->text[0].ptr, 0, it->text[0].len)) dfail(d, "a call's text holds a NUL byte");
  SET_VECTOR_ELT(x, it->flag == WIRE_CALL_SOURCE ? 1 : 0, wire_str_sexp(it->text[0]));
  SET_VECTOR_ELT(x, 2, rs_dec_next_value(d)); /* list */
  SEXP named = rs_dec_next_value(d);          /* dict: a named list (an empty one has names too) */
  SET_VECTOR_ELT(x, 3, named);
  Rf_setAttrib(x, R_ClassSymbol, cls_call);
  UNPROTECT(1);
  return x;
}

static SEXP u64_sexp(uint64_t v) { /* an unsigned 64-bit value as its decimal string */
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return Rf_mkString(b);
}

static SEXP describe_ref(const wire_ref *r) {
  const char *names[] = { "name", "type", "order", "flags", "offset", "length", "shape" };
  SEXP nm;
  SEXP x = PROTECT(named_list(7, &nm));
  for (int i = 0; i < 7; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  SET_VECTOR_ELT(x, 0, wire_str_sexp(r->name));
  SET_VECTOR_ELT(x, 1, Rf_mkString(wire_type_name(r->type)));
  SET_VECTOR_ELT(x, 2, Rf_mkString(r->order == WIRE_ORDER_F ? "F" : "C"));
  SET_VECTOR_ELT(x, 3, u64_sexp(r->flags));
  SET_VECTOR_ELT(x, 4, Rf_ScalarReal((double)r->offset));
  SET_VECTOR_ELT(x, 5, Rf_ScalarReal((double)r->length));
  SEXP shape = PROTECT(Rf_allocVector(REALSXP, r->ndim));
  for (int k = 0; k < r->ndim; k++) REAL(shape)[k] = (double)r->dims[k];
  SET_VECTOR_ELT(x, 6, shape);
  Rf_setAttrib(x, R_ClassSymbol, cls_wire_ref);
  UNPROTECT(2);
  return x;
}

static SEXP dec_ref(rs_decoder *d, wire_item *it) {
  const wire_ref *r = &it->ref;
  if (d->o.describe) return describe_ref(r);
  suiro_view v;
  if (suiro_zc_open(r, &v) != SUIRO_OK) dfail(d, "%s", suiro_last_error());
  if (r->type == WIRE_REF_WIRE) { /* an encoded value in the region: decode it in place */
    rs_dec_opts o = d->o;
    o.region = v.buf;
    SEXP holder = PROTECT(rs_view_new(v.buf, v.data, (R_xlen_t)v.bytes, WIRE_T_U8, v.fresh)); /* unrefs at GC */
    (void)holder;
    SEXP x = rs_decode(v.data, (size_t)v.bytes, &o);
    UNPROTECT(1);
    return x;
  }
  int type = r->type == WIRE_REF_BYTES ? WIRE_T_U8 : r->type;
  if (type == WIRE_T_F32 || type == WIRE_T_BOOL || (r->ndim > 1 && r->order == WIRE_ORDER_C)) {
    /* no R type views these bytes as they are: a copy */
    wire_item a = *it;
    a.type = type;
    a.data = v.data;
    a.n = v.count;
    a.ndim = r->ndim;
    a.dims = r->dims;
    a.flag = r->order;
    rs_dec_opts o = d->o;
    int intr = d->interruptible;
    d->o.region = NULL;
    d->interruptible = 0; /* v.buf is held by nothing that unwinding would release */
    SEXP x = PROTECT(r->ndim ? dec_ndarray(d, &a) : dec_array(d, type, v.data, v.count));
    d->o = o;
    d->interruptible = intr;
    suiro_buf_unref(v.buf);
    UNPROTECT(1);
    return x;
  }
  if (v.count > (uint64_t)R_XLEN_T_MAX) {
    suiro_buf_unref(v.buf);
    dfail(d, "a reference of %.0f elements is more than R holds", (double)v.count);
  }
  SEXP x = PROTECT(rs_view_new(v.buf, v.data, (R_xlen_t)v.count, type, v.fresh));
  if (r->ndim >= 1) {
    for (int k = 0; k < r->ndim; k++)
      if (r->dims[k] > INT_MAX) dfail(d, "dimension %d is more than R allows", k + 1);
    set_dim(x, r->ndim, r->dims); /* F order, or 1-d (where the orders agree) */
  }
  UNPROTECT(1);
  return x;
}

const char *rs_lang_origin(int lang) {
  return lang == WIRE_LANG_R ? NULL : lang == WIRE_LANG_LUA ? "lua workers" : lang == WIRE_LANG_PYTHON ? "python workers"
                                                                            : "workers of another language";
}

static const char *lang_name(int l) {
  return l == WIRE_LANG_LUA ? "lua" : l == WIRE_LANG_PYTHON ? "python" : l == WIRE_LANG_R ? "r" : "unknown";
}

/* A function resolved by name: "pkg::fn", "pkg:::fn" or a plain name in the base environment. */
SEXP rs_resolve_fn(const char *name, size_t len);

static SEXP dec_func(rs_decoder *d, wire_item *it) {
  uint64_t ord = container_begin(d);
  if (d->o.describe && it->flag != WIRE_LANG_R) {
    SEXP nm;
    SEXP x = PROTECT(named_list(4, &nm));
    const char *names[] = { "lang", "key", "name", "captured" };
    for (int i = 0; i < 4; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
    SET_VECTOR_ELT(x, 0, Rf_mkString(lang_name(it->flag)));
    SET_VECTOR_ELT(x, 1, u64_sexp((uint64_t)it->i));
    Rf_setAttrib(x, R_ClassSymbol, cls_wire_func);
    SET_VECTOR_ELT(x, 2, rs_dec_next_value(d));
    SEXP cap = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)(it->n - 1)));
    SET_VECTOR_ELT(x, 3, cap);
    for (uint64_t k = 1; k < it->n; k++) SET_VECTOR_ELT(cap, (R_xlen_t)k - 1, rs_dec_next_value(d));
    container_end(d, ord, x); /* a function that captures itself is a cycle: refused above */
    UNPROTECT(2);
    return x;
  }
  if (it->flag != WIRE_LANG_R)
    dfail(d, "a %s function arrived (only %s workers run %s functions)", lang_name(it->flag), lang_name(it->flag),
          lang_name(it->flag));
  if (d->o.foreign)
    dfail(d, "an R object (serialized, with attributes, or a function) from %s is refused: R forms are accepted "
             "only from R processes of the pool family", d->o.foreign);
  wire_item nmi;
  rs_dec_next(d, &nmi);
  SEXP x;
  if (it->i == 0 && nmi.tag == WIRE_STR) {
    if (nmi.n == 15 && !memcmp(nmi.data, "base::structure", 15) && it->n == 3) {
      x = PROTECT(rs_dec_next_value(d));
      SEXP attrs = PROTECT(rs_dec_next_value(d));
      if (TYPEOF(attrs) != VECSXP) dfail(d, "malformed attributes");
      SEXP anm = Rf_getAttrib(attrs, R_NamesSymbol);
      if (TYPEOF(anm) != STRSXP || XLENGTH(anm) != XLENGTH(attrs)) dfail(d, "malformed attributes (no names)");
      if (MAYBE_SHARED(x)) x = Rf_shallow_duplicate(x);
      PROTECT(x);
      for (R_xlen_t k = 0; k < XLENGTH(attrs); k++) {
        SEXP sym = Rf_installTrChar(STRING_ELT(anm, k));
        Rf_setAttrib(x, sym, VECTOR_ELT(attrs, k)); /* row.names: a compact c(NA, -n) stays compact */
      }
      UNPROTECT(3);
    } else if (nmi.n == 17 && !memcmp(nmi.data, "base::unserialize", 17) && it->n == 2) {
      SEXP raw = PROTECT(rs_dec_next_value(d));
      if (TYPEOF(raw) != RAWSXP) dfail(d, "a serialized R object without its bytes");
      x = rs_unserialize(raw);
      UNPROTECT(1);
    } else {
      x = PROTECT(rs_resolve_fn(nmi.data, nmi.n));
      for (uint64_t k = 1; k < it->n; k++) rs_dec_next_value(d); /* captured values: none expected */
      UNPROTECT(1);
    }
  } else {
    dfail(d, "an R function by key arrived where only values are expected");
  }
  PROTECT(x);
  container_end(d, ord, x);
  UNPROTECT(1);
  return x;
}

/* A RANGE (start, step, n: 32 bytes for any n). Steps of 1 and -1 become R's compact sequence
 * (the ALTREP `from:to` makes: two numbers, whatever n, expanded only where R needs it); other
 * steps are expanded up to RS_RANGE_EXPAND_MAX elements and refused above, so a few bytes never
 * allocate more than 128 MB. The reader checked that the range fits int64. */
#define RS_RANGE_EXPAND_MAX ((R_xlen_t)1 << 24)
#define RS_RANGE_COMPACT_MIN 1024 /* shorter ones are plain vectors, as always */

static SEXP dec_range(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  int64_t last = it->i + (int64_t)(n ? n - 1 : 0) * it->step;
  int fits = it->i > INT32_MIN && it->i <= INT32_MAX && last > INT32_MIN && last <= INT32_MAX;
  const int64_t exact = (int64_t)1 << 53; /* doubles hold every integer up to here */
  if ((it->step == 1 || it->step == -1) && n >= RS_RANGE_COMPACT_MIN && it->i >= -exact && it->i <= exact &&
      last >= -exact && last <= exact) {
    SEXP from = PROTECT(fits ? Rf_ScalarInteger((int)it->i) : Rf_ScalarReal((double)it->i));
    SEXP to = PROTECT(fits ? Rf_ScalarInteger((int)last) : Rf_ScalarReal((double)last));
    SEXP call = PROTECT(Rf_lang3(Rf_install(":"), from, to));
    SEXP x = Rf_eval(call, R_BaseEnv);
    UNPROTECT(3);
    if (XLENGTH(x) != n) dfail(d, "a range of %.0f elements became %.0f", (double)n, (double)XLENGTH(x));
    return x;
  }
  if (n > RS_RANGE_EXPAND_MAX)
    dfail(d, "a range of %.0f elements with step %lld would take %.0f MB: only ranges with step 1 or -1 stay "
             "compact, others expand up to %.0f elements", (double)n, (long long)it->step,
          (double)n * (fits ? 4 : 8) / 1048576, (double)RS_RANGE_EXPAND_MAX);
  SEXP x = PROTECT(Rf_allocVector(fits ? INTSXP : REALSXP, n));
  for (R_xlen_t i = 0; i < n; i++) {
    int64_t v = it->i + (int64_t)i * it->step;
    if (fits) INTEGER(x)[i] = (int)v;
    else REAL(x)[i] = (double)v;
    if (!((i + 1) & RS_INTERRUPT_MASK) && d->interruptible) R_CheckUserInterrupt();
  }
  UNPROTECT(1);
  return x;
}

static SEXP dec_item(rs_decoder *d, wire_item *it) {
  switch (it->tag) {
  case WIRE_NIL: return R_NilValue;
  case WIRE_BOOL: return Rf_ScalarLogical(it->flag == WIRE_NA_BOOL ? NA_LOGICAL : it->flag);
  case WIRE_I64: return scalar_i64(it->i);
  case WIRE_F64: return Rf_ScalarReal(it->f);
  case WIRE_STR: return mk_str(d, it->data, (size_t)it->n);
  case WIRE_BYTES: {
    SEXP x = Rf_allocVector(RAWSXP, xlen_of(d, it->n));
    if (it->n) memcpy(RAW(x), it->data, (size_t)it->n);
    return x;
  }
  case WIRE_ARRAY: return dec_array(d, it->type, it->data, it->n);
  case WIRE_NDARRAY: return dec_ndarray(d, it);
  case WIRE_STRS: return dec_strs(d, &it->strs);
  case WIRE_LIST: {
    uint64_t ord = container_begin(d);
    SEXP x = PROTECT(Rf_allocVector(VECSXP, xlen_of(d, it->n)));
    container_end(d, ord, x);
    if (d->have_refs) d->open[ord] = 1;
    for (uint64_t i = 0; i < it->n; i++) SET_VECTOR_ELT(x, (R_xlen_t)i, rs_dec_next_value(d));
    container_end(d, ord, x);
    UNPROTECT(1);
    return x;
  }
  case WIRE_DICT: {
    uint64_t ord = container_begin(d);
    SEXP nm;
    SEXP x = PROTECT(named_list(xlen_of(d, it->n), &nm));
    container_end(d, ord, x);
    if (d->have_refs) d->open[ord] = 1;
    for (uint64_t i = 0; i < it->n; i++) {
      SET_STRING_ELT(nm, (R_xlen_t)i, dec_key(d));
      SET_VECTOR_ELT(x, (R_xlen_t)i, rs_dec_next_value(d));
    }
    container_end(d, ord, x);
    UNPROTECT(1);
    return x;
  }
  case WIRE_FRAME: return dec_frame(d, it);
  case WIRE_FACTOR: return dec_factor(d, it);
  case WIRE_DATE: return dec_date(d, it);
  case WIRE_TIMESTAMP: return dec_timestamp(d, it);
  case WIRE_ERROR: return dec_error(d, it);
  case WIRE_CALL: return dec_call(d, it);
  case WIRE_REF: return dec_ref(d, it);
  case WIRE_FUNC: return dec_func(d, it);
  case WIRE_BACKREF: {
    if (!d->have_refs || it->i < 0 || (uint64_t)it->i >= d->ncont) dfail(d, "a back-reference to nothing");
    if (d->open[it->i]) dfail(d, "the value contains itself (a cycle), which R values cannot");
    SEXP x = VECTOR_ELT(d->refs, (R_xlen_t)it->i);
    MARK_NOT_MUTABLE(x); /* shared: a change copies it first */
    return x;
  }
  case WIRE_RANGE: return dec_range(d, it);
  default: dfail(d, "unexpected %s", wire_tag_name(it->tag));
  }
}

SEXP rs_dec_item(rs_decoder *d, wire_item *it) { return dec_item(d, it); }

void rs_decoder_init(rs_decoder *d, const void *buf, size_t len, const rs_dec_opts *o) {
  if (!o->region) rs_views_new_message(); /* a message of its own (not a value inside a region) */
  /* the reader is set up by wire_reader_init; everything else is set here */
  d->o = *o;
  d->refs = R_NilValue;
  d->have_refs = 0;
  d->ncont = 0;
  d->open = NULL;
  d->open_cap = 0;
  d->interruptible = 1;
  if (wire_reader_init(&d->r, buf, len) != WIRE_OK) dfail(d, "%s", wire_reader_error(&d->r));
  if (d->r.shared) {
    d->have_refs = 1;
    d->refs = Rf_allocVector(VECSXP, 0);
  }
  R_ProtectWithIndex(d->refs, &d->refs_pi); /* the caller unprotects one */
}

/* The same over a reader that has already read part of its buffer (suiro_exec read the task list
 * and its function item): decoding continues where it stopped; no container is counted yet (the
 * caller counts those it consumed with rs_dec_count_container). */
void rs_decoder_init_at(rs_decoder *d, const wire_reader *r, const rs_dec_opts *o) {
  if (!o->region) rs_views_new_message();
  d->o = *o;
  d->refs = R_NilValue;
  d->have_refs = 0;
  d->ncont = 0;
  d->open = NULL;
  d->open_cap = 0;
  d->interruptible = 1;
  d->r = *r;
  if (d->r.shared) {
    d->have_refs = 1;
    d->refs = Rf_allocVector(VECSXP, 0);
  }
  R_ProtectWithIndex(d->refs, &d->refs_pi); /* the caller unprotects one */
}

SEXP rs_decode(const void *buf, size_t len, const rs_dec_opts *o) {
  rs_decoder dd, *d = &dd;
  rs_decoder_init(d, buf, len, o);
  SEXP x = PROTECT(rs_dec_next_value(d));
  wire_item it;
  if (wire_next(&d->r, &it) != WIRE_END) dfail(d, "%s", wire_reader_error(&d->r));
  UNPROTECT(2);
  return x;
}

SEXP rs_decode_single(const void *buf, size_t len, const rs_dec_opts *o) {
  rs_decoder dd, *d = &dd;
  rs_decoder_init(d, buf, len, o);
  wire_item it;
  rs_dec_next(d, &it);
  if (it.tag != WIRE_LIST || it.n < 1) dfail(d, "expected a list of one value, got %s", wire_tag_name(it.tag));
  container_begin(d);
  SEXP x = PROTECT(rs_dec_next_value(d));
  for (uint64_t k = 1; k < it.n; k++) rs_dec_next_value(d); /* further values (Lua returns several): dropped */
  UNPROTECT(2);
  return x;
}

/* ---- .Call entry points: suiro_wire_encode / suiro_wire_decode ---------------------------------- */

typedef struct enc_job {
  rs_encoder e;
  SEXP x;
  SEXP out;
} enc_job;

static SEXP enc_job_run(void *p) {
  enc_job *j = p;
  rs_enc_value(&j->e, j->x, "value");
  const void *buf;
  size_t len;
  rs_encoder_finish(&j->e, &buf, &len);
  j->out = Rf_allocVector(RAWSXP, (R_xlen_t)len);
  memcpy(RAW(j->out), buf, len);
  return j->out;
}

static void enc_job_clean(void *p) { rs_encoder_cleanup(&((enc_job *)p)->e); }

SEXP C_wire_encode(SEXP x, SEXP rich) {
  enc_job j;
  rs_enc_opts o = { Rf_asLogical(rich) == 1, 0, Rf_asLogical(rich) == 1 ? "R" : "another language" };
  rs_encoder_init(&j.e, &o);
  j.x = x;
  return R_ExecWithCleanup(enc_job_run, &j, enc_job_clean, &j);
}

SEXP C_wire_decode(SEXP raw, SEXP describe, SEXP trusted) {
  if (TYPEOF(raw) != RAWSXP) Rf_error("suiro_wire_decode: argument 1 must be a raw vector, got %s", Rf_type2char(TYPEOF(raw)));
  size_t len = (size_t)XLENGTH(raw);
  /* the reader needs an 8-aligned buffer: R's raw vectors are, but copy to be sure */
  void *buf = R_alloc(len + 8, 1);
  void *al = (void *)(((uintptr_t)buf + 7) & ~(uintptr_t)7);
  if (len) memcpy(al, RAW_RO(raw), len);
  rs_dec_opts o = { Rf_asLogical(describe) == 1, NULL, "value", NULL,
                    Rf_asLogical(trusted) == 1 ? NULL : "bytes given to suiro_wire_decode (trusted = TRUE takes them)" };
  return rs_decode(al, len, &o);
}
