/*
 * renc.c — R values -> wire values (docs/wire-format.md, section "R conventions"); rdec.c is the
 * other direction, rclass.c what both know of R's classes and attributes.
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
 * the large vectors of a message (rs_enc_prescan sizes it). An encoder lives on its user's C
 * stack, on R's main thread.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

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
  e->chans = NULL;
  suiro_msg_init(&e->m, e->stack, sizeof e->stack);
}

void rs_encoder_cleanup(rs_encoder *e) {
  if (e->finished) suiro_msg_sent(&e->m);
  else suiro_msg_free(&e->m); /* never sent: every grant given back */
  if (e->stage) suiro_buf_unref(e->stage);
  e->stage = NULL;
  if (e->chans) rs_chan_exports_done(e->chans, e->finished);
  e->chans = NULL;
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
    if (nseg > 16 && k >= 8 && k < nseg - 4) { /* a deep path: its first 8 and last 4 segments */
      if (k == 8) n += (size_t)snprintf(e->path + n, cap - n, "...");
      if (n >= cap) n = cap - 1;
      continue;
    }
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

/* "a" or "an", for the word w */
static const char *an(const char *w) { return strchr("aeiou", w[0]) && w[0] ? "an" : "a"; }

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

static void refuse_bytes(rs_encoder *e, R_xlen_t i) {
  efail(e, "element %.0f is a string marked \"bytes\" that is not UTF-8 text, which %s cannot read: send "
        "charToRaw() of it for its bytes, or iconv() it to UTF-8", (double)i, peer(e));
}

static void put_cstr(rs_encoder *e, const char *s) { wire_put_str(&e->m.w, s, strlen(s)); }

/* Whether n bytes are well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 ? 1 : 0;
    if (!k || c > 0xF4 || n - i <= k) return 0; /* a bad lead byte, or cut short */
    for (size_t j = 1; j <= k; j++)
      if ((s[i + j] & 0xC0) != 0x80) return 0;
    unsigned c1 = s[i + 1];
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
      return 0;
    i += k + 1;
  }
  return 1;
}

/* Whether x (a character vector) holds a string marked "bytes" that is not UTF-8 text: 1-based
 * index of the first, or 0. Such a string reaches another language only as bytes it cannot read
 * as text, and R itself marks it UTF-8 (invalid) when it comes back: it is refused, or (to R)
 * serialized. */
static R_xlen_t bytes_not_utf8(SEXP x) {
  R_xlen_t n = XLENGTH(x);
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP c = STRING_ELT(x, i);
    if (c != NA_STRING && Rf_getCharCE(c) == CE_BYTES && !utf8_valid((const unsigned char *)CHAR(c), (size_t)LENGTH(c))) return i + 1;
  }
  return 0;
}

/* The UTF-8 bytes of a CHARSXP (translated when marked latin1 or native non-UTF-8; a "bytes" one
 * as it is: bytes_not_utf8 refused those that are not UTF-8 text before). */
static const char *char_utf8(SEXP c, size_t *len) {
  cetype_t ce = Rf_getCharCE(c);
  if (ce == CE_UTF8 || ce == CE_BYTES || (ce == CE_NATIVE && rs_native_utf8)) {
    *len = (size_t)LENGTH(c);
    return CHAR(c);
  }
  const char *s = Rf_translateCharUTF8(c);
  *len = strlen(s);
  return s;
}

static void __attribute__((noreturn)) refuse_bytes(rs_encoder *e, R_xlen_t i);

static void put_strs(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  R_xlen_t bad = e->o.rich ? 0 : bytes_not_utf8(x); /* to R, enc() serialized such vectors before */
  if (bad) refuse_bytes(e, bad);
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
      if (bytes_not_utf8(x)) refuse_bytes(e, 1);
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
  default: efail(e, "%s %s cannot be sent", an(Rf_type2char(TYPEOF(x))), Rf_type2char(TYPEOF(x)));
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

/* A POSIXct is f64 seconds; one that came as an i64 timestamp (attribute suiro_unit, rdec.c) is
 * that i64 form again when every element converts exactly (rs_ts_encode: arithmetic that leaves
 * a value between two units sends f64 seconds, which hold it). The zone is tzone, "" without. */
static void enc_timestamp(rs_encoder *e, SEXP x) {
  R_xlen_t n = XLENGTH(x);
  SEXP tz = Rf_getAttrib(x, rs_sym_tzone);
  const char *tzs = "";
  size_t tzl = 0;
  if (TYPEOF(tz) == STRSXP && XLENGTH(tz) >= 1 && STRING_ELT(tz, 0) != NA_STRING) tzs = char_utf8(STRING_ELT(tz, 0), &tzl);
  int unit = TYPEOF(x) == REALSXP ? rs_ts_unit(x) : -1;
  if (unit >= 0) {
    const double *s = REAL_RO(x);
    int64_t v;
    for (R_xlen_t i = 0; i < n && unit >= 0; i++)
      if (!R_IsNA(s[i]) && !rs_ts_encode(s[i], unit, &v)) unit = -1;
  }
  if (unit >= 0) {
    int64_t *d = wire_put_timestamp(&e->m.w, WIRE_T_I64, unit, (wire_str){ tzs, tzl }, (uint64_t)n);
    wcheck(e);
    const double *s = REAL_RO(x);
    for (R_xlen_t i = 0; i < n; i++)
      if (R_IsNA(s[i]) || !rs_ts_encode(s[i], unit, &d[i])) d[i] = INT64_MIN;
    return;
  }
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
  SEXP dim = rs_attr_raw(x, R_DimSymbol);
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
  default: efail(e, "%s %s array cannot be sent to %s (only numeric and logical arrays cross)", an(type_word(x)), type_word(x), peer(e));
  }
  wcheck(e);
}

/* ---- typed values (suiro_typed(): wire forms R has no type of its own for) --------------------- */

static const char *typed_str(SEXP x, SEXP sym, const char *dflt) {
  SEXP v = rs_attr_raw(x, sym);
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
  if (rs_is_integer64(x) || (TYPEOF(x) == REALSXP && rs_attr_raw(x, rs_sym_suiro_bits) != R_NilValue)) {
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
  if (TYPEOF(x) != REALSXP) efail(e, "suiro_typed: %s %s vector has no integer values", an(Rf_type2char(TYPEOF(x))), Rf_type2char(TYPEOF(x)));
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
  const char *form = typed_str(x, rs_sym_suiro_form, "array");
  const char *tn = typed_str(x, rs_sym_suiro_type, "f64");
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
      SEXP shape = rs_attr_raw(x, rs_sym_suiro_shape);
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
      int order = !strcmp(typed_str(x, rs_sym_suiro_order, "F"), "C") ? WIRE_ORDER_C : WIRE_ORDER_F;
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
    const char *unit = typed_str(x, rs_sym_suiro_unit, "s");
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
  int na = rs_attr_count(x);
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

/* FUNC(R, 0) "suiro::relay" [value, conditions] (docs/wire-format.md, "R conventions"): a result
 * with the conditions its task signalled; also what rdec.c's list(value, conditions) of the
 * class object rs_cls_relay encodes back to. */
static void enc_relay(rs_encoder *e, SEXP value, SEXP conds) {
  wire_put_func(&e->m.w, WIRE_LANG_R, 0, 3);
  e->ncont++;
  put_cstr(e, "suiro::relay");
  wcheck(e);
  enc(e, value);
  size_t at = e->plen;
  rs_enc_path_push(e, "%s", " (its conditions)");
  enc(e, conds);
  rs_enc_path_pop(e, at);
  wcheck(e);
}

void rs_enc_relay(rs_encoder *e, SEXP value, SEXP conds, const char *what) {
  size_t at = e->plen;
  if (what) rs_enc_path_push(e, "%s", what);
  if (++e->depth > WIRE_MAX_DEPTH) efail(e, "nested more than %d levels deep", WIRE_MAX_DEPTH);
  enc_relay(e, value, conds);
  e->depth--;
  rs_enc_path_pop(e, at);
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
  SEXP rn = rs_attr_raw(x, R_RowNamesSymbol);
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
  if ((t == REALSXP || t == INTSXP) && rs_class_is(col, rs_cls_date)) return enc_date(e, col);
  if ((t == REALSXP || t == INTSXP) && Rf_inherits(col, "POSIXct")) return enc_timestamp(e, col);
  if (rs_is_integer64(col)) return put_numeric(e, col, WIRE_T_I64, 0, NULL);
  if (ATTRIB(col) != R_NilValue) {
    SEXP cls = Rf_getAttrib(col, R_ClassSymbol);
    if (cls != R_NilValue) efail(e, "a column of class \"%s\" cannot be sent to %s", CHAR(STRING_ELT(cls, 0)), peer(e));
    if (rs_attr_raw(col, R_DimSymbol) != R_NilValue) efail(e, "a matrix column cannot be sent to %s", peer(e));
    if (rs_attr_raw(col, R_NamesSymbol) == R_NilValue)
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
  if (TAG(at) == R_NamesSymbol && CDR(at) == R_NilValue && names_ok(CAR(at), XLENGTH(x))) {
    /* names become dict keys: another language keeps one value per key, so a repeated name
     * (two "" of a partly named list too) would silently lose elements there */
    R_xlen_t dup = e->o.rich ? 0 : Rf_any_duplicated(CAR(at), FALSE);
    if (dup)
      efail(e, "names repeat (element %.0f is named \"%s\" again): %s take names as dict keys, one value "
               "each; give unique names (make.unique()) or send an unnamed list", (double)dup,
            CHAR(STRING_ELT(CAR(at), dup - 1)), peer(e));
    return enc_dict_of(e, x, CAR(at));
  }
  if (rs_class_is(x, rs_cls_call)) return enc_call_spec(e, x);
  if (Rf_inherits(x, "suiro_wire_ref") || Rf_inherits(x, "suiro_wire_func")) return enc_descriptor(e, x);
  if (e->o.rich && XLENGTH(x) == 2 && Rf_getAttrib(x, R_ClassSymbol) == rs_cls_relay)
    return enc_relay(e, VECTOR_ELT(x, 0), VECTOR_ELT(x, 1));
  if (e->o.rich) return enc_structure(e, x);
  if (rs_class_is(x, rs_cls_frame)) return enc_frame(e, x);
  if (Rf_inherits(x, "suiro_error_remote")) return enc_error_obj(e, x);
  if (Rf_inherits(x, "data.frame"))
    efail(e, "a data frame of class \"%s\" cannot be sent to %s (use as.data.frame())",
          CHAR(STRING_ELT(Rf_getAttrib(x, R_ClassSymbol), 0)), peer(e));
  SEXP cls = Rf_getAttrib(x, R_ClassSymbol);
  if (cls != R_NilValue) efail(e, "a list of class \"%s\" cannot be sent to %s", CHAR(STRING_ELT(cls, 0)), peer(e));
  if (rs_attr_raw(x, R_NamesSymbol) != R_NilValue && rs_attr_count(x) == 1)
    efail(e, "a list with NA names cannot be sent to %s", peer(e));
  efail(e, "a list with attributes (%s) cannot be sent to %s", CHAR(PRINTNAME(TAG(at))), peer(e));
}

/* Atomic vectors with attributes. */
static void enc_atomic(rs_encoder *e, SEXP x) {
  SEXP at = ATTRIB(x);
  int t = TYPEOF(x);
  if (at == R_NilValue) return enc_bare(e, x, 0);
  if (Rf_inherits(x, "suiro_typed")) return enc_typed(e, x);
  int na = rs_attr_count(x);
  /* the portable forms, when they carry exactly these attributes (then they also round-trip
   * exactly between R processes) */
  int exact = 0;
  if (t == INTSXP && na == 2 && (rs_class_is(x, rs_cls_factor) || rs_class_is(x, rs_cls_ordered)) &&
      TYPEOF(rs_attr_raw(x, R_LevelsSymbol)) == STRSXP)
    exact = 1;
  else if ((t == REALSXP || t == INTSXP) && na == 1 && rs_class_is(x, rs_cls_date)) exact = 2;
  else if (t == REALSXP && na == 2 && rs_class_is(x, rs_cls_posixct) && TYPEOF(rs_attr_raw(x, rs_sym_tzone)) == STRSXP &&
           XLENGTH(rs_attr_raw(x, rs_sym_tzone)) == 1 && STRING_ELT(rs_attr_raw(x, rs_sym_tzone), 0) != NA_STRING &&
           CHAR(STRING_ELT(rs_attr_raw(x, rs_sym_tzone), 0))[0])
    exact = 3; /* tzone "" reads back as none (rdec.c) */
  else if (t == REALSXP && na == 1 && rs_class_is(x, rs_cls_posixct)) exact = 3;
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
  if (rs_attr_raw(x, R_NamesSymbol) != R_NilValue)
    efail(e, "a named %s vector cannot be sent to %s (names do not cross; use unname() or as.list())", type_word(x),
          peer(e));
  if (rs_attr_raw(x, Rf_install("dimnames")) != R_NilValue)
    efail(e, "a matrix with dimnames cannot be sent to %s (use unname())", peer(e));
  SEXP cls = Rf_getAttrib(x, R_ClassSymbol);
  if (cls != R_NilValue) efail(e, "%s %s vector of class \"%s\" cannot be sent to %s", an(type_word(x)), type_word(x), CHAR(STRING_ELT(cls, 0)), peer(e));
  efail(e, "%s %s vector with attribute '%s' cannot be sent to %s", an(type_word(x)), type_word(x), CHAR(PRINTNAME(TAG(at))), peer(e));
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
  /* the writer's depth counts the task's (or result's) own list: checked here, the path is named */
  if (++e->depth > WIRE_MAX_DEPTH || e->m.w.depth >= WIRE_MAX_DEPTH)
    efail(e, "nested more than %d levels deep (the wire's limit, counting the list that holds a task's arguments "
             "or results)", WIRE_MAX_DEPTH);
  switch (TYPEOF(x)) {
  case NILSXP: wire_put_nil(&e->m.w); break;
  case LGLSXP: case INTSXP: case REALSXP: case CPLXSXP: case STRSXP: case RAWSXP:
    if (IS_S4_OBJECT(x)) {
      if (!e->o.rich) efail(e, "an S4 object cannot be sent to %s", peer(e));
      enc_serialized(e, x);
      break;
    }
    if (TYPEOF(x) == STRSXP && e->o.rich && bytes_not_utf8(x)) { /* R keeps the "bytes" mark exactly */
      enc_serialized(e, x);
      break;
    }
    if (ATTRIB(x) != R_NilValue && e->o.rich && is_view(x) && rs_attr_raw(x, R_DimSymbol) == R_NilValue) {
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
    if (TYPEOF(x) == EXTPTRSXP && rs_chan_is(x)) { /* a channel endpoint: it goes to the receiver (rchan.c) */
      const char *why = rs_chan_export(x, &e->m.w, &e->chans);
      if (why) efail(e, "%s", why);
      break;
    }
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

/* ---- .Call entry point: suiro_wire_encode ------------------------------------------------------- */

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
  /* channel endpoints went into the bytes: whoever decodes them claims them (as in Lua and Python) */
  rs_chan_exports_done(j->e.chans, 1);
  j->e.chans = NULL;
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
