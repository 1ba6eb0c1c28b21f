/*
 * rdec.c — wire values -> R values (docs/wire-format.md, section "R conventions"); renc.c is the
 * other direction, rclass.c what both know of R's classes and attributes.
 *
 * Decoding maps wire items to R's usual types (int -> integer when it fits, double up to 2^53,
 * else integer64; f32 -> double; REFs -> ALTREP views, rview.c). It never trusts its input: the
 * wire reader validates everything, and strings with NUL bytes are refused naming the element.
 * A decoder lives on its user's C stack, on R's main thread.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

/* ---- decoding ---------------------------------------------------------------------------------- */

/* The path of the value being decoded, R's way ("argument 1[[2]][['k']]", "[[3]]"), into buf. */
static void path_text(const rs_decoder *d, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < d->depth && i < RS_PATH_MAX && n + 1 < cap; i++) {
    const struct rs_path_step *s = &d->path[i];
    char prev = i ? d->path[i - 1].kind : 0;
    int w = 0;
    if (s->kind == 'i')
      w = snprintf(buf + n, cap - n, prev == 'a' ? "argument %.0f" : "[[%.0f]]", (double)s->at + 1);
    else if (s->kind == 'k')
      w = snprintf(buf + n, cap - n, prev == 'n' ? "argument '%.40s'" : "[['%.40s']]", s->key ? s->key : "");
    if (w < 0) break;
    n += (size_t)w;
    if (n >= cap) n = cap - 1;
  }
}

static void __attribute__((noreturn)) dfail(rs_decoder *d, const char *fmt, ...) {
  char msg[400], path[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  path_text(d, path, sizeof path);
  if (path[0])
    Rf_error("cannot decode the %s: %s%s: %s", d->o.where ? d->o.where : "value",
             path[0] == '[' ? "at " : "", path, msg);
  Rf_error("cannot decode the %s: %s", d->o.where ? d->o.where : "value", msg);
}

/* Path steps: an element, a key, or a call's argument lists (popped by path_pop). */
static void path_push(rs_decoder *d, char kind, uint64_t at, const char *key) {
  if (d->depth < RS_PATH_MAX) {
    d->path[d->depth].kind = kind;
    d->path[d->depth].at = at;
    d->path[d->depth].key = key;
  }
  d->depth++;
}
static void path_pop(rs_decoder *d) { d->depth--; }
static void path_set(rs_decoder *d, char kind, uint64_t at, const char *key) { /* the top step */
  if (d->depth > 0 && d->depth <= RS_PATH_MAX) {
    d->path[d->depth - 1].kind = kind;
    d->path[d->depth - 1].at = at;
    d->path[d->depth - 1].key = key;
  }
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
  if (Rf_inherits(src, "integer64")) Rf_setAttrib(out, R_ClassSymbol, rs_cls_integer64);
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
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_date);
  UNPROTECT(1);
  return x;
}

/* f64 timestamps are POSIXct seconds as they are; i64 ones become POSIXct seconds that remember
 * their unit (attribute suiro_unit), so that sent on they are the same i64 again, and are
 * refused when R's double seconds cannot hold them exactly (rs_ts_decode). The zone "" (none)
 * is a POSIXct without tzone, as .POSIXct() and Sys.time() make. */
static SEXP dec_timestamp(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  if (memchr(it->text[0].ptr, 0, it->text[0].len)) dfail(d, "a time zone holds a NUL byte");
  SEXP x = PROTECT(Rf_allocVector(REALSXP, n));
  if (it->type == WIRE_T_F64) {
    double scale = unit_scale(it->flag);
    const double *s = it->data;
    for (R_xlen_t i = 0; i < n; i++) REAL(x)[i] = scale == 1 ? s[i] : s[i] * scale;
  } else {
    const int64_t *s = it->data;
    for (R_xlen_t i = 0; i < n; i++) {
      if (s[i] == INT64_MIN) {
        REAL(x)[i] = NA_REAL;
        continue;
      }
      int ok = rs_ts_decode(s[i], it->flag, &REAL(x)[i]);
      if (ok < 0)
        dfail(d, "timestamp %.0f (%lld ns) has a sub-microsecond part, which R's POSIXct (double seconds) "
                 "cannot hold: round it to microseconds before sending (e.g. .astype(\"datetime64[us]\"))",
              (double)i + 1, (long long)s[i]);
      if (!ok)
        dfail(d, "timestamp %.0f (%lld %s) is beyond what R's POSIXct (double seconds) holds exactly",
              (double)i + 1, (long long)s[i], rs_ts_unit_name(it->flag));
    }
  }
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_posixct);
  if (it->text[0].len) {
    SEXP tz = PROTECT(Rf_allocVector(STRSXP, 1));
    SET_STRING_ELT(tz, 0, Rf_mkCharLenCE(it->text[0].ptr, (int)it->text[0].len, CE_UTF8));
    Rf_setAttrib(x, rs_sym_tzone, tz);
    UNPROTECT(1);
  }
  if (it->type == WIRE_T_I64) Rf_setAttrib(x, rs_sym_suiro_unit, Rf_mkString(rs_ts_unit_name(it->flag)));
  UNPROTECT(1);
  return x;
}

static SEXP dec_factor(rs_decoder *d, wire_item *it) {
  R_xlen_t n = xlen_of(d, it->n);
  SEXP x = PROTECT(Rf_allocVector(INTSXP, n));
  const int32_t *c = it->data;
  for (R_xlen_t i = 0; i < n; i++) INTEGER(x)[i] = c[i] < 0 ? NA_INTEGER : c[i] + 1;
  SEXP lev = PROTECT(dec_strs(d, &it->strs));
  Rf_setAttrib(x, R_LevelsSymbol, lev);
  Rf_setAttrib(x, R_ClassSymbol, it->flag ? rs_cls_ordered : rs_cls_factor);
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
  path_push(d, 'i', 0, NULL);
  for (R_xlen_t i = 0; i < nc; i++) {
    path_set(d, 'i', (uint64_t)i, NULL);
    SEXP key = PROTECT(dec_key(d));
    path_set(d, 'k', (uint64_t)i, CHAR(key));
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
  path_pop(d);
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
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_frame);
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
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_remote);
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
  path_push(d, 'a', 0, NULL); /* the list's elements are "argument 1", ... */
  SET_VECTOR_ELT(x, 2, rs_dec_next_value(d)); /* list */
  path_set(d, 'n', 0, NULL);  /* the dict's are "argument 'name'" */
  SEXP named = rs_dec_next_value(d);          /* dict: a named list (an empty one has names too) */
  path_pop(d);
  SET_VECTOR_ELT(x, 3, named);
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_call);
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
  Rf_setAttrib(x, R_ClassSymbol, rs_cls_wire_ref);
  UNPROTECT(2);
  return x;
}

static SEXP dec_ref(rs_decoder *d, wire_item *it) {
  const wire_ref *r = &it->ref;
  if (d->o.describe) return describe_ref(r);
  if (r->type == WIRE_REF_CHAN) { /* a channel endpoint, claimed by this process (rchan.c) */
    SEXP x = rs_chan_from_ref(r);
    if (!x) dfail(d, "%s", suiro_last_error());
    return x;
  }
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
    Rf_setAttrib(x, R_ClassSymbol, rs_cls_wire_func);
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
    } else if (nmi.n == 12 && !memcmp(nmi.data, "suiro::relay", 12) && it->n == 3) {
      /* a result with the conditions its task signalled (rerror.c): list(value, conditions) */
      x = PROTECT(Rf_allocVector(VECSXP, 2));
      SET_VECTOR_ELT(x, 0, rs_dec_next_value(d));
      SET_VECTOR_ELT(x, 1, rs_dec_next_value(d));
      if (TYPEOF(VECTOR_ELT(x, 1)) != VECSXP && VECTOR_ELT(x, 1) != R_NilValue) dfail(d, "malformed relayed conditions");
      Rf_setAttrib(x, R_ClassSymbol, rs_cls_relay);
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
    path_push(d, 'i', 0, NULL);
    for (uint64_t i = 0; i < it->n; i++) {
      path_set(d, 'i', i, NULL);
      SET_VECTOR_ELT(x, (R_xlen_t)i, rs_dec_next_value(d));
    }
    path_pop(d);
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
    path_push(d, 'i', 0, NULL);
    for (uint64_t i = 0; i < it->n; i++) {
      path_set(d, 'i', i, NULL); /* a key's own trouble: its element */
      SET_STRING_ELT(nm, (R_xlen_t)i, dec_key(d));
      path_set(d, 'k', i, CHAR(STRING_ELT(nm, (R_xlen_t)i)));
      SET_VECTOR_ELT(x, (R_xlen_t)i, rs_dec_next_value(d));
    }
    path_pop(d);
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
  d->depth = 0;
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
  d->depth = 0;
  suiro_wire_reader_copy(&d->r, r);
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
  if (it.tag != WIRE_LIST) dfail(d, "expected a list of values, got %s", wire_tag_name(it.tag));
  container_begin(d);
  SEXP x;
  if (it.n == 1) {
    x = PROTECT(rs_dec_next_value(d));
  } else { /* none (a Lua function that returns nothing): NULL; several (Lua's return a, b): a list, as
            * Python gets a tuple; n is bounded by the reader (every item takes 8 bytes of the buffer) */
    x = PROTECT(it.n == 0 ? R_NilValue : Rf_allocVector(VECSXP, (R_xlen_t)it.n));
    for (uint64_t k = 0; k < it.n; k++) SET_VECTOR_ELT(x, (R_xlen_t)k, rs_dec_next_value(d));
  }
  UNPROTECT(2);
  return x;
}

SEXP rs_unrelay(SEXP x, SEXP *conds) {
  *conds = R_NilValue;
  if (TYPEOF(x) != VECSXP || ATTRIB(x) == R_NilValue || Rf_getAttrib(x, R_ClassSymbol) != rs_cls_relay) return x;
  *conds = VECTOR_ELT(x, 1);
  return VECTOR_ELT(x, 0);
}

void rs_relay_signal(SEXP conds) {
  if (conds == R_NilValue || XLENGTH(conds) == 0) return;
  PROTECT(conds);
  SEXP fn = PROTECT(rs_call_fn("suiro", "relay_conditions"));
  SEXP call = PROTECT(Rf_lang2(fn, conds));
  Rf_eval(call, R_GlobalEnv);
  UNPROTECT(3);
}

/* ---- .Call entry point: suiro_wire_decode ------------------------------------------------------- */

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
