/*
 * rmap.c — suiro_map for R: stage a function and its input once (a map plan, suiro_bind.h
 * section 6), let one runner per worker claim ranges of elements, shape the results.
 *
 *   m <- suiro_map(p, xs, f, ..., .template = numeric(1), .seed = 42, .stream = FALSE)
 *   suiro_collect(m); suiro_map_next(m)   # streamed ranges; suiro_map_prepare / suiro_map_run
 *
 * Inputs: numeric, integer, logical, raw and integer64 vectors are staged as packed arrays (no
 * per-element encoding); lists (and data frames: their columns) and character vectors element
 * by element (each a wire LIST [value], large vectors inside by reference). The function item
 * is LIST [function, extra args...] (rfunc.c); each element is passed first.
 * Templates follow vapply's FUN.VALUE: numeric(1) gives a double vector, numeric(k) a k x n
 * matrix, a matrix an array, a named list of scalars a data frame; the Lua face's strings
 * ("f64", "f64[3]", "{mean: f64, sd: f64}") work too. Without a template the result is a list.
 * Seeded maps seed suiro_random()'s stream from (seed, element) (rworker's runner enters each
 * element with suiro_plan_enter): the draws do not depend on worker count or scheduling.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

void rs_write_fn_item(rs_encoder *e, rpool *rp, SEXP fn, SEXP args, const char *verb);

typedef struct rmap {
  suiro_map *m;
  rpool *rp;
  uint64_t n;
  int started, collected, prepared, stream;
  int has_tpl;
  int chr;                /* .template = character(1): results as a character vector, as vapply */
  suiro_template tpl;
  int in_kind, in_type;
  unsigned char *values;  /* VALUES input as staged (its references are revoked at the end) */
  size_t values_len;
  uint64_t range_b, range_e, delivered;
} rmap;

static SEXP cls_map;

/* ---- templates ---------------------------------------------------------------------------------- */

static int proto_type(SEXP x) {
  switch (TYPEOF(x)) {
  case REALSXP: return rs_is_integer64(x) ? WIRE_T_I64 : WIRE_T_F64;
  case INTSXP: return Rf_inherits(x, "factor") ? 0 : WIRE_T_I32;
  case LGLSXP: return WIRE_T_BOOL;
  case RAWSXP: return WIRE_T_U8;
  default: return 0;
  }
}

static void template_of(SEXP proto, suiro_template *t, const char *verb) {
  memset(t, 0, sizeof *t);
  char err[256];
  if (TYPEOF(proto) == STRSXP && XLENGTH(proto) == 1) {
    if (rs_template_from_string(CHAR(STRING_ELT(proto, 0)), t, err, sizeof err) != 0)
      Rf_error("%s: .template: %s", verb, err);
    return;
  }
  if (TYPEOF(proto) == VECSXP) {
    SEXP nm = Rf_getAttrib(proto, R_NamesSymbol);
    R_xlen_t nf = XLENGTH(proto);
    if (nm == R_NilValue || nf < 1 || nf > SUIRO_TEMPLATE_MAX_FIELDS)
      Rf_error("%s: .template: a record template is a named list of 1..%d scalars, e.g. list(mean = numeric(1), n = integer(1))",
               verb, SUIRO_TEMPLATE_MAX_FIELDS);
    t->kind = SUIRO_OUT_RECORD;
    t->nfields = (int)nf;
    for (R_xlen_t k = 0; k < nf; k++) {
      const char *fname = Rf_translateCharUTF8(STRING_ELT(nm, k));
      SEXP f = VECTOR_ELT(proto, k);
      int ty = proto_type(f);
      if (!ty || XLENGTH(f) != 1)
        Rf_error("%s: .template: field '%s' must be a numeric, integer, logical or raw scalar", verb, fname);
      if (strlen(fname) == 0 || strlen(fname) > SUIRO_TEMPLATE_NAME_MAX)
        Rf_error("%s: .template: field %.0f needs a name of 1..%d bytes", verb, (double)k + 1, SUIRO_TEMPLATE_NAME_MAX);
      strcpy(t->fields[k].name, fname);
      t->fields[k].type = ty;
    }
  } else {
    int ty = proto_type(proto);
    if (!ty) Rf_error("%s: .template must be like vapply's FUN.VALUE (numeric(1), integer(3), a matrix, a named list of scalars) or a template string such as \"f64\", got %s",
                      verb, Rf_type2char(TYPEOF(proto)));
    R_xlen_t n = XLENGTH(proto);
    SEXP dim = Rf_getAttrib(proto, R_DimSymbol);
    t->type = ty;
    if (n == 1 && dim == R_NilValue) {
      t->kind = SUIRO_OUT_SCALAR;
    } else {
      if (n < 1) Rf_error("%s: .template has no elements", verb);
      t->kind = SUIRO_OUT_ARRAY;
      if (dim != R_NilValue) {
        if (XLENGTH(dim) > SUIRO_TEMPLATE_MAX_NDIM) Rf_error("%s: .template has too many dimensions", verb);
        t->ndim = (int)XLENGTH(dim);
        for (int k = 0; k < t->ndim; k++) t->shape[k] = (uint64_t)INTEGER(dim)[k];
      } else {
        t->ndim = 1;
        t->shape[0] = (uint64_t)n;
      }
    }
  }
  if (suiro_template_check(t, NULL, err, sizeof err) != 0) Rf_error("%s: .template: %s", verb, err);
}

/* ---- the map object ----------------------------------------------------------------------------- */

static void map_release(rmap *mp) {
  if (mp->m) suiro_map_free(mp->m);
  mp->m = NULL;
  if (mp->values) {
    suiro_zc_revoke(mp->values, mp->values_len); /* grants no runner took */
    free(mp->values);
    mp->values = NULL;
  }
}

static void map_fin(SEXP x) {
  rmap *mp = R_ExternalPtrAddr(x);
  if (!mp) return;
  R_ClearExternalPtr(x);
  if (mp->rp && mp->rp->p) map_release(mp);
  else {
    mp->m = NULL; /* the pool stopped: its maps went with it */
    free(mp->values);
  }
  if (mp->rp) rs_pool_unref(mp->rp);
  free(mp);
}

static rmap *map_of(SEXP x, const char *verb) {
  if (TYPEOF(x) != EXTPTRSXP || !Rf_inherits(x, "suiro_map")) Rf_error("%s: argument 1 must be a suiro_map", verb);
  rmap *mp = R_ExternalPtrAddr(x);
  if (!mp) Rf_error("%s: the map is gone", verb);
  return mp;
}

/* prot slot: list(pool, names of x, template prototype) */
static SEXP prot_names(SEXP x) { return VECTOR_ELT(R_ExternalPtrProtected(x), 1); }
static SEXP prot_proto(SEXP x) { return VECTOR_ELT(R_ExternalPtrProtected(x), 2); }

/* ---- staging ------------------------------------------------------------------------------------ */

typedef struct map_job {
  rs_encoder e;        /* the function item */
  rs_encoder ev;       /* element values */
  SEXP pool, x, f, extras, proto, seed;
  rpool *rp;
  int stream, prepare;
  double timeout;
  const char *verb;
  rmap *mp;            /* owned by the job until the map object exists */
  suiro_stage stage;   /* element values (suiro_face.h section 7), written by ev */
  SEXP els;            /* the elements, as a list */
  SEXP out;
} map_job;

/* Element i as LIST [value], into the encoder ev's message (the stage's msg): its zero-copy grants
 * gather there for the whole input. Raises (an R error naming the element) when it cannot cross. */
static int stage_put(void *ud, uint64_t i, suiro_msg *m) {
  map_job *j = ud;
  (void)m; /* &j->ev.m */
  j->ev.depth = 0;
  wire_put_list(&j->ev.m.w, 1);
  rs_enc_path_push(&j->ev, "%s: element %.0f", j->verb, (double)i + 1);
  rs_enc_value(&j->ev, VECTOR_ELT(j->els, (R_xlen_t)i), NULL);
  rs_enc_path_pop(&j->ev, 0);
  return 0;
}

static SEXP map_run(void *p) {
  map_job *j = p;
  rpool *rp = j->rp;
  SEXP x = j->x;
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  /* the function: LIST [function item, extras...] */
  R_xlen_t ne = XLENGTH(j->extras);
  wire_put_list(&j->e.m.w, (uint64_t)ne + 1);
  if (rp->lang == WIRE_LANG_R) {
    rs_enc_prescan(&j->e, j->extras);
    rs_write_fn_item(&j->e, rp, j->f, j->extras, j->verb);
  } else {
    if (TYPEOF(j->f) != STRSXP || XLENGTH(j->f) != 1)
      Rf_error("%s: %s workers map a \"module.fn\" name, not an R function", j->verb,
               rp->lang == WIRE_LANG_LUA ? "lua" : "python");
    const char *nm = Rf_translateCharUTF8(STRING_ELT(j->f, 0));
    wire_put_str(&j->e.m.w, nm, strlen(nm));
  }
  SEXP enm = Rf_getAttrib(j->extras, R_NamesSymbol);
  for (R_xlen_t i = 0; i < ne; i++) {
    size_t at = j->e.plen;
    if (enm != R_NilValue && CHAR(STRING_ELT(enm, i))[0]) rs_enc_path_push(&j->e, "%s: argument '%s'", j->verb, CHAR(STRING_ELT(enm, i)));
    else rs_enc_path_push(&j->e, "%s: argument %.0f", j->verb, (double)i + 4);
    rs_enc_value(&j->e, VECTOR_ELT(j->extras, i), NULL);
    rs_enc_path_pop(&j->e, at);
  }
  const void *fbuf;
  size_t flen;
  rs_encoder_finish(&j->e, &fbuf, &flen);
  s.fn = fbuf;
  s.fn_len = flen;
  /* the input */
  R_xlen_t n = XLENGTH(x);
  s.n = (uint64_t)n;
  int t = TYPEOF(x);
  int packed = ATTRIB(x) == R_NilValue || (Rf_getAttrib(x, R_ClassSymbol) == R_NilValue) || rs_is_integer64(x);
  if (packed && (t == REALSXP || t == INTSXP || t == RAWSXP || t == LGLSXP)) {
    s.in_kind = SUIRO_IN_ARRAY;
    s.in_type = t == REALSXP ? (rs_is_integer64(x) ? WIRE_T_I64 : WIRE_T_F64) : t == INTSXP ? WIRE_T_I32 : t == RAWSXP ? WIRE_T_U8 : WIRE_T_BOOL;
    if (t == LGLSXP) {
      uint8_t *b = (uint8_t *)R_alloc((size_t)n ? (size_t)n : 1, 1);
      for (R_xlen_t i = 0; i < n; i++) {
        int v = LOGICAL_ELT(x, i);
        b[i] = v == NA_LOGICAL ? WIRE_NA_BOOL : (uint8_t)(v != 0);
      }
      s.in_data = b;
    } else {
      s.in_data = DATAPTR_RO(x);
    }
  } else if (t == VECSXP || t == STRSXP || t == CPLXSXP || t == REALSXP || t == INTSXP || t == LGLSXP) {
    j->els = t == VECSXP ? x : PROTECT(Rf_coerceVector(x, VECSXP));
    rs_enc_prescan(&j->ev, j->els);
    j->stage.msg = &j->ev.m;
    if (suiro_stage_values(&j->stage, &s, (uint64_t)n, stage_put, j) != SUIRO_OK)
      Rf_error("%s: %s", j->verb, suiro_last_error());
    if (t != VECSXP) UNPROTECT(1);
  } else {
    Rf_error("%s: argument 2 must be a vector or a list, got %s", j->verb, Rf_type2char(t));
  }
  /* template, seed, options */
  rmap *mp = j->mp;
  if (TYPEOF(j->proto) == STRSXP && XLENGTH(j->proto) == 1 && STRING_ELT(j->proto, 0) != NA_STRING &&
      CHAR(STRING_ELT(j->proto, 0))[0] == 0) {
    /* character(1), vapply's prototype of a string: no engine template (strings have no fixed
     * width); the results are checked and made a character vector when collected */
    mp->chr = 1;
  } else if (j->proto != R_NilValue) {
    template_of(j->proto, &mp->tpl, j->verb);
    mp->has_tpl = 1;
    s.tpl = &mp->tpl;
  }
  if (j->seed != R_NilValue) {
    if (!(TYPEOF(j->seed) == REALSXP || TYPEOF(j->seed) == INTSXP) || XLENGTH(j->seed) != 1 || ISNAN(Rf_asReal(j->seed)) ||
        Rf_asReal(j->seed) != floor(Rf_asReal(j->seed)))
      Rf_error("%s: .seed must be a whole number", j->verb);
    s.seeded = 1;
    s.seed = (uint64_t)(int64_t)Rf_asReal(j->seed);
  }
  s.stream = j->stream;
  mp->stream = j->stream;
  mp->prepared = j->prepare;
  mp->n = (uint64_t)n;
  mp->in_kind = s.in_kind;
  mp->in_type = s.in_type;
  if (suiro_plan_create(rp->p, &s, &mp->m) != SUIRO_OK) Rf_error("%s: %s", j->verb, suiro_last_error());
  rs_encoder_sent(&j->e); /* the plan holds the function's references now */
  if (s.in_kind == SUIRO_IN_VALUES) {
    rs_encoder_sent(&j->ev);
    mp->values = suiro_stage_take(&j->stage, &mp->values_len); /* revoked when the map goes */
  }
  if (!j->prepare) {
    if (suiro_map_start(mp->m, j->timeout) != SUIRO_OK) Rf_error("%s: %s", j->verb, suiro_last_error());
    mp->started = 1;
  }
  SEXP prot = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(prot, 0, j->pool);
  /* as vapply names its results (USE.NAMES): by x's names, or by x itself when it is an unnamed
   * character vector and a template is given (without one, a list as lapply gives) */
  SEXP xnames = Rf_getAttrib(x, R_NamesSymbol);
  if (xnames == R_NilValue && TYPEOF(x) == STRSXP && j->proto != R_NilValue && !Rf_isObject(x)) xnames = x;
  SET_VECTOR_ELT(prot, 1, xnames);
  SET_VECTOR_ELT(prot, 2, j->proto);
  SEXP out = PROTECT(R_MakeExternalPtr(mp, R_NilValue, prot));
  mp->rp = rp;
  rp->refs++;
  j->mp = NULL; /* the object owns it */
  R_RegisterCFinalizerEx(out, map_fin, TRUE);
  Rf_setAttrib(out, R_ClassSymbol, cls_map);
  UNPROTECT(2);
  return out;
}

static void map_clean(void *p) {
  map_job *j = p;
  rs_encoder_cleanup(&j->e);
  rs_encoder_cleanup(&j->ev);
  if (j->mp) { /* failed before the object existed */
    if (j->mp->m) suiro_map_free(j->mp->m);
    free(j->mp);
  }
  suiro_stage_free(&j->stage);
}

SEXP C_map_new(SEXP pool, SEXP x, SEXP f, SEXP extras, SEXP proto, SEXP seed, SEXP stream, SEXP prepare, SEXP timeout) {
  map_job j;
  memset(&j, 0, sizeof j);
  suiro_stage_init(&j.stage);
  j.verb = Rf_asLogical(prepare) == 1 ? "suiro_map_prepare" : "suiro_map";
  j.rp = rs_pool_of(pool, j.verb, 1);
  rs_enc_opts o = { j.rp->lang == WIRE_LANG_R, suiro_zc_active(),
                    j.rp->lang == WIRE_LANG_R ? "R workers" : j.rp->lang == WIRE_LANG_LUA ? "lua workers" : "python workers" };
  rs_encoder_init(&j.e, &o);
  rs_encoder_init(&j.ev, &o);
  j.pool = pool;
  j.x = x;
  j.f = f;
  j.extras = extras;
  j.proto = proto;
  j.seed = seed;
  j.stream = Rf_asLogical(stream) == 1;
  j.prepare = Rf_asLogical(prepare) == 1;
  j.timeout = rs_timeout_arg(timeout, j.rp->timeout, j.verb);
  j.mp = calloc(1, sizeof *j.mp);
  if (!j.mp) Rf_error("%s: out of memory", j.verb);
  return R_ExecWithCleanup(map_run, &j, map_clean, &j);
}

/* ---- results ------------------------------------------------------------------------------------ */

static SEXP cell_vector(int type, R_xlen_t n) {
  switch (type) {
  case WIRE_T_F64: case WIRE_T_F32: return Rf_allocVector(REALSXP, n);
  case WIRE_T_I64: return rs_integer64(n);
  case WIRE_T_I32: return Rf_allocVector(INTSXP, n);
  case WIRE_T_U8: return Rf_allocVector(RAWSXP, n);
  default: return Rf_allocVector(LGLSXP, n);
  }
}

/* Copies `n` cells of `type` starting at cell `from` of src into element `at` of v onwards. */
static void cells_into(SEXP v, R_xlen_t at, const void *src, int type, uint64_t from, R_xlen_t n) {
  switch (type) {
  case WIRE_T_F64: memcpy(REAL(v) + at, (const double *)src + from, (size_t)n * 8); break;
  case WIRE_T_F32:
    for (R_xlen_t i = 0; i < n; i++) REAL(v)[at + i] = ((const float *)src)[from + (uint64_t)i];
    break;
  case WIRE_T_I64: memcpy(REAL(v) + at, (const int64_t *)src + from, (size_t)n * 8); break;
  case WIRE_T_I32: memcpy(INTEGER(v) + at, (const int32_t *)src + from, (size_t)n * 4); break;
  case WIRE_T_U8: memcpy(RAW(v) + at, (const uint8_t *)src + from, (size_t)n); break;
  default:
    for (R_xlen_t i = 0; i < n; i++) {
      uint8_t b = ((const uint8_t *)src)[from + (uint64_t)i];
      LOGICAL(v)[at + i] = b == WIRE_NA_BOOL ? NA_LOGICAL : b;
    }
  }
}

/* Results of elements [b, e) from the map's output (template) or slots (values). */
static SEXP results_range(SEXP self, rmap *mp, uint64_t b, uint64_t e) {
  R_xlen_t n = (R_xlen_t)(e - b);
  const suiro_plan *pl = suiro_plan_of(mp->m);
  if (!pl) Rf_error("suiro_map: %s", suiro_last_error());
  const void *out = suiro_map_output(mp->m);
  SEXP names = prot_names(self);
  int whole = b == 0 && e == mp->n;
  if (!mp->has_tpl) {
    SEXP v = PROTECT(Rf_allocVector(VECSXP, n));
    rs_dec_opts o = { 0, NULL, "element result", NULL, rs_lang_origin(mp->rp ? mp->rp->lang : -1) };
    for (R_xlen_t i = 0; i < n; i++) {
      const void *d;
      size_t len;
      if (suiro_map_result(mp->m, b + (uint64_t)i, &d, &len)) SET_VECTOR_ELT(v, i, rs_decode_single(d, len, &o));
    }
    if (mp->chr) { /* as vapply(x, f, character(1)): one string per element */
      SEXP c = PROTECT(Rf_allocVector(STRSXP, n));
      for (R_xlen_t i = 0; i < n; i++) {
        SEXP r = VECTOR_ELT(v, i);
        if (TYPEOF(r) != STRSXP || XLENGTH(r) != 1)
          Rf_error("suiro_map: element %.0f: the template character(1) wants one string, got %s of length %.0f",
                   (double)(b + (uint64_t)i + 1), Rf_type2char(TYPEOF(r)), (double)Rf_xlength(r));
        SET_STRING_ELT(c, i, STRING_ELT(r, 0));
      }
      if (whole && names != R_NilValue) Rf_setAttrib(c, R_NamesSymbol, names);
      UNPROTECT(2);
      return c;
    }
    if (whole && names != R_NilValue) Rf_setAttrib(v, R_NamesSymbol, names);
    UNPROTECT(1);
    return v;
  }
  const suiro_template *t = &mp->tpl;
  if (t->kind == SUIRO_OUT_SCALAR) {
    uint64_t count;
    const void *col = suiro_plan_column(pl, out, 0, &count);
    SEXP v = PROTECT(cell_vector(t->type, n));
    cells_into(v, 0, col, t->type, b, n);
    if (whole && names != R_NilValue) Rf_setAttrib(v, R_NamesSymbol, names);
    UNPROTECT(1);
    return v;
  }
  if (t->kind == SUIRO_OUT_ARRAY) {
    uint64_t width = 1;
    for (int k = 0; k < t->ndim; k++) width *= t->shape[k];
    uint64_t count;
    const void *col = suiro_plan_column(pl, out, 0, &count);
    SEXP v = PROTECT(cell_vector(t->type, n * (R_xlen_t)width));
    cells_into(v, 0, col, t->type, b * width, n * (R_xlen_t)width);
    SEXP dim = PROTECT(Rf_allocVector(INTSXP, t->ndim + 1));
    for (int k = 0; k < t->ndim; k++) INTEGER(dim)[k] = (int)t->shape[k];
    INTEGER(dim)[t->ndim] = (int)n;
    Rf_setAttrib(v, R_DimSymbol, dim);
    SEXP proto = prot_proto(self);
    SEXP pn = TYPEOF(proto) == STRSXP ? R_NilValue : Rf_getAttrib(proto, R_NamesSymbol);
    if (t->ndim == 1 && (pn != R_NilValue || (whole && names != R_NilValue))) {
      SEXP dn = PROTECT(Rf_allocVector(VECSXP, 2));
      SET_VECTOR_ELT(dn, 0, pn);
      if (whole) SET_VECTOR_ELT(dn, 1, names);
      Rf_setAttrib(v, R_DimNamesSymbol, dn);
      UNPROTECT(1);
    }
    UNPROTECT(2);
    return v;
  }
  /* record: a data frame, one column per field */
  SEXP v = PROTECT(Rf_allocVector(VECSXP, t->nfields));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, t->nfields));
  for (int k = 0; k < t->nfields; k++) {
    uint64_t count;
    const void *col = suiro_plan_column(pl, out, k, &count);
    SEXP c = PROTECT(cell_vector(t->fields[k].type, n));
    cells_into(c, 0, col, t->fields[k].type, b, n);
    SET_VECTOR_ELT(v, k, c);
    SET_STRING_ELT(nm, k, Rf_mkCharCE(t->fields[k].name, CE_UTF8));
    UNPROTECT(1);
  }
  Rf_setAttrib(v, R_NamesSymbol, nm);
  Rf_setAttrib(v, R_ClassSymbol, Rf_mkString("data.frame"));
  SEXP rn = PROTECT(Rf_allocVector(INTSXP, 2));
  INTEGER(rn)[0] = NA_INTEGER;
  INTEGER(rn)[1] = -(int)n;
  Rf_setAttrib(v, R_RowNamesSymbol, rn);
  UNPROTECT(3);
  return v;
}

/* ---- relayed conditions: the elements' map notes (R workers, rerror.c) ------------------------ */

typedef struct note_list {
  uint64_t *index;
  const void **data;
  size_t *len;
  size_t n, cap;
} note_list;

static void note_seen(void *ctx, uint64_t i, const void *data, size_t len) {
  note_list *l = ctx;
  if (l->n == l->cap) return; /* counted first: never more than that */
  l->index[l->n] = i;
  l->data[l->n] = data;
  l->len[l->n++] = len;
}

static void note_count(void *ctx, uint64_t i, const void *data, size_t len) {
  (void)i, (void)data, (void)len;
  (*(size_t *)ctx)++;
}

/* The conditions the elements in [b, e) relayed, in element order, as list(conditions, error
 * condition of element err_index or NULL); NULL when there are none (maps of other languages
 * never have any). Decoded before the map's region is released. */
static SEXP map_notes(rmap *mp, uint64_t b, uint64_t e, uint64_t err_index) {
  if (!mp->m || !mp->rp || mp->rp->lang != WIRE_LANG_R) return R_NilValue;
  size_t count = 0;
  suiro_map_notes(mp->m, b, e, note_count, &count);
  if (!count) return R_NilValue;
  note_list l = { (uint64_t *)R_alloc(count, sizeof(uint64_t)), (const void **)R_alloc(count, sizeof(void *)),
                  (size_t *)R_alloc(count, sizeof(size_t)), 0, count };
  suiro_map_notes(mp->m, b, e, note_seen, &l);
  SEXP per = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)l.n));
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  rs_dec_opts o = { 0, NULL, "element's conditions", NULL, NULL };
  R_xlen_t total = 0;
  for (size_t k = 0; k < l.n; k++) {
    SEXP conds;
    SEXP v = PROTECT(rs_unrelay(rs_decode(l.data[k], l.len[k], &o), &conds));
    if (conds != R_NilValue) {
      SET_VECTOR_ELT(per, (R_xlen_t)k, conds);
      total += XLENGTH(conds);
    }
    if (l.index[k] == err_index && v != R_NilValue) SET_VECTOR_ELT(out, 1, v);
    UNPROTECT(1);
  }
  SEXP all = PROTECT(Rf_allocVector(VECSXP, total));
  R_xlen_t at = 0;
  for (size_t k = 0; k < l.n; k++) {
    SEXP c = VECTOR_ELT(per, (R_xlen_t)k);
    for (R_xlen_t i = 0; c != R_NilValue && i < XLENGTH(c); i++) SET_VECTOR_ELT(all, at++, VECTOR_ELT(c, i));
  }
  SET_VECTOR_ELT(out, 0, all);
  UNPROTECT(3);
  return out;
}

static SEXP notes_conds(SEXP notes) { return notes == R_NilValue ? R_NilValue : VECTOR_ELT(notes, 0); }

/* The failure of a finished run as an R condition, signalled after the map is released: first the
 * conditions the elements relayed (all of them, in element order), then the error. */
static void raise_if_failed(rmap *mp) {
  suiro_error_info e;
  if (!suiro_map_failure(mp->m, &e)) return;
  SEXP notes = PROTECT(map_notes(mp, 0, mp->n, e.index < 0 ? UINT64_MAX : (uint64_t)e.index));
  char *cls = strndup(e.cls.ptr, e.cls.len), *msg = strndup(e.message.ptr, e.message.len),
       *tb = strndup(e.traceback.ptr, e.traceback.len);
  suiro_error_info c = e;
  if (!mp->prepared) map_release(mp);
  mp->collected = !mp->prepared;
  SEXP keep = PROTECT(Rf_allocVector(STRSXP, 3));
  SET_STRING_ELT(keep, 0, Rf_mkCharCE(cls ? cls : "remote", CE_UTF8));
  SET_STRING_ELT(keep, 1, Rf_mkCharCE(msg ? msg : "", CE_UTF8));
  SET_STRING_ELT(keep, 2, Rf_mkCharCE(tb ? tb : "", CE_UTF8));
  free(cls);
  free(msg);
  free(tb);
  c.cls = (wire_str){ CHAR(STRING_ELT(keep, 0)), (size_t)LENGTH(STRING_ELT(keep, 0)) };
  c.message = (wire_str){ CHAR(STRING_ELT(keep, 1)), (size_t)LENGTH(STRING_ELT(keep, 1)) };
  c.traceback = (wire_str){ CHAR(STRING_ELT(keep, 2)), (size_t)LENGTH(STRING_ELT(keep, 2)) };
  rs_relay_signal(notes_conds(notes));
  rs_signal_error_cond(&c, notes == R_NilValue ? R_NilValue : VECTOR_ELT(notes, 1));
}

static suiro_status step_map(void *ctx, double slice) { return suiro_map_wait(((rmap *)ctx)->m, slice); }

/* Waits for the run: 1 done, 0 timed out (still running). */
static int map_wait(rmap *mp, double timeout) {
  suiro_status st = rs_wait(NULL, timeout, step_map, mp);
  if (st == SUIRO_TIMEOUT) return 0;
  if (st != SUIRO_OK) Rf_error("suiro_collect: %s", suiro_last_error());
  mp->started = 0;
  return 1;
}

SEXP C_map_collect(SEXP self, SEXP timeout) {
  rmap *mp = map_of(self, "suiro_collect");
  if (mp->collected) Rf_error("suiro_collect: this map's results were collected already");
  if (!mp->m) return rs_sentinel("closed");
  if (!mp->rp || !mp->rp->p) return rs_sentinel("closed");
  if (!mp->started && mp->prepared) Rf_error("suiro_collect: a prepared map runs with suiro_map_run()");
  double t = rs_timeout_arg(timeout, mp->rp->timeout, "suiro_collect");
  if (mp->started && !map_wait(mp, t)) return rs_sentinel("timeout");
  raise_if_failed(mp);
  SEXP notes = PROTECT(map_notes(mp, 0, mp->n, UINT64_MAX));
  SEXP v = PROTECT(results_range(self, mp, 0, mp->n));
  if (!mp->prepared) {
    mp->collected = 1;
    map_release(mp); /* the region goes back warm for the next map */
  }
  rs_relay_signal(notes_conds(notes));
  UNPROTECT(2);
  return v;
}

/* Streamed maps: the next range of finished elements as list(index, value), NULL once every
 * element was handed out, or the timeout sentinel. */
SEXP C_map_next(SEXP self, SEXP timeout) {
  rmap *mp = map_of(self, "suiro_map_next");
  if (!mp->stream) Rf_error("suiro_map_next: the map was not made with .stream = TRUE");
  if (!mp->m) return R_NilValue;
  double t = rs_timeout_arg(timeout, mp->rp->timeout, "suiro_map_next");
  double deadline = t < 0 ? INFINITY : suiro_now() + t;
  for (;;) {
    uint64_t b, e;
    if (suiro_map_next_range(mp->m, &b, &e)) {
      mp->delivered += e - b;
      SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
      SEXP nm = PROTECT(Rf_allocVector(STRSXP, 2));
      SET_STRING_ELT(nm, 0, Rf_mkChar("index"));
      SET_STRING_ELT(nm, 1, Rf_mkChar("value"));
      Rf_setAttrib(out, R_NamesSymbol, nm);
      SEXP idx = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)(e - b)));
      for (uint64_t i = b; i < e; i++) REAL(idx)[i - b] = (double)i + 1;
      SET_VECTOR_ELT(out, 0, idx);
      SET_VECTOR_ELT(out, 1, results_range(self, mp, b, e));
      rs_relay_signal(notes_conds(map_notes(mp, b, e, UINT64_MAX)));
      UNPROTECT(3);
      return out;
    }
    if (!mp->started) {
      if (suiro_map_next_range(mp->m, &b, &e)) continue;
      raise_if_failed(mp);
      return R_NilValue;
    }
    if (suiro_map_wait(mp->m, 0.001) == SUIRO_OK) {
      mp->started = 0;
      continue;
    }
    if (t >= 0 && suiro_now() >= deadline) return rs_sentinel("timeout");
    R_CheckUserInterrupt();
  }
}

/* suiro_map_run(pm, x, timeout): swaps in x (same type and length) and runs the prepared map,
 * returning its results. */
SEXP C_map_run(SEXP self, SEXP x, SEXP timeout) {
  rmap *mp = map_of(self, "suiro_map_run");
  if (!mp->prepared) Rf_error("suiro_map_run: argument 1 must be a map made by suiro_map_prepare()");
  if (!mp->m || !mp->rp || !mp->rp->p) Rf_error("suiro_map_run: the map was freed (its pool stopped)");
  if (mp->started) Rf_error("suiro_map_run: the previous run is still going");
  if (x != R_NilValue) {
    if (mp->in_kind != SUIRO_IN_ARRAY)
      Rf_error("suiro_map_run: only a map over a numeric, integer, logical or raw vector takes new input");
    int t = TYPEOF(x);
    int ty = t == REALSXP ? (rs_is_integer64(x) ? WIRE_T_I64 : WIRE_T_F64) : t == INTSXP ? WIRE_T_I32
           : t == RAWSXP ? WIRE_T_U8 : t == LGLSXP ? WIRE_T_BOOL : 0;
    if (ty != mp->in_type || (uint64_t)XLENGTH(x) != mp->n)
      Rf_error("suiro_map_run: .x must be a %s vector of length %.0f like the prepared one", wire_type_name(mp->in_type),
               (double)mp->n);
    const suiro_plan *pl = suiro_plan_of(mp->m);
    void *dst = suiro_plan_in_data(pl);
    if (ty == WIRE_T_BOOL) {
      uint8_t *b = dst;
      for (R_xlen_t i = 0; i < XLENGTH(x); i++) {
        int v = LOGICAL_ELT(x, i);
        b[i] = v == NA_LOGICAL ? WIRE_NA_BOOL : (uint8_t)(v != 0);
      }
    } else if (mp->n) {
      memcpy(dst, DATAPTR_RO(x), (size_t)mp->n * wire_type_size(ty));
    }
  }
  double t = rs_timeout_arg(timeout, mp->rp->timeout, "suiro_map_run");
  if (suiro_map_start(mp->m, t) != SUIRO_OK) Rf_error("suiro_map_run: %s", suiro_last_error());
  mp->started = 1;
  if (!map_wait(mp, t)) {
    suiro_map_cancel(mp->m);
    suiro_map_wait(mp->m, -1);
    mp->started = 0;
    return rs_sentinel("timeout");
  }
  raise_if_failed(mp);
  SEXP notes = PROTECT(map_notes(mp, 0, mp->n, UINT64_MAX));
  SEXP v = PROTECT(results_range(self, mp, 0, mp->n));
  rs_relay_signal(notes_conds(notes));
  UNPROTECT(2);
  return v;
}

SEXP C_map_cancel(SEXP self) {
  rmap *mp = map_of(self, "suiro_cancel");
  if (mp->m && mp->started) suiro_map_cancel(mp->m);
  return R_NilValue;
}

SEXP C_map_progress(SEXP self) {
  rmap *mp = map_of(self, "suiro_map_progress");
  SEXP v = PROTECT(Rf_allocVector(REALSXP, 2));
  REAL(v)[0] = mp->m ? (double)suiro_map_done(mp->m) : mp->collected ? (double)mp->n : 0;
  REAL(v)[1] = (double)mp->n;
  UNPROTECT(1);
  return v;
}

SEXP C_map_ready(SEXP self) {
  rmap *mp = map_of(self, "suiro_map");
  if (!mp->m || !mp->started) return Rf_ScalarLogical(1);
  return Rf_ScalarLogical(suiro_map_wait(mp->m, 0) == SUIRO_OK);
}

/* For promises (rasync.c): 1 when collecting the map now would not wait (done, collected, freed,
 * never started, or its pool stopped), 0 while it runs. Never signals. */
int rs_map_settled(SEXP x) {
  rmap *mp = TYPEOF(x) == EXTPTRSXP ? R_ExternalPtrAddr(x) : NULL;
  if (!mp || mp->collected || !mp->m || !mp->started || !mp->rp || !mp->rp->p) return 1;
  return suiro_map_wait(mp->m, 0) != SUIRO_TIMEOUT;
}

SEXP C_map_info(SEXP self) {
  rmap *mp = map_of(self, "suiro_map");
  SEXP v = PROTECT(Rf_allocVector(VECSXP, 4));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 4));
  const char *names[] = { "n", "state", "prepared", "stream" };
  for (int i = 0; i < 4; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  SET_VECTOR_ELT(v, 0, Rf_ScalarReal((double)mp->n));
  const char *st = mp->collected ? "collected" : !mp->m ? "freed" : mp->started ? (suiro_map_wait(mp->m, 0) == SUIRO_OK ? "done" : "running") : mp->prepared ? "prepared" : "done";
  SET_VECTOR_ELT(v, 1, Rf_mkString(st));
  SET_VECTOR_ELT(v, 2, Rf_ScalarLogical(mp->prepared));
  SET_VECTOR_ELT(v, 3, Rf_ScalarLogical(mp->stream));
  Rf_setAttrib(v, R_NamesSymbol, nm);
  UNPROTECT(2);
  return v;
}

/* ---- the runner (in R workers) ------------------------------------------------------------------ */

SEXP rs_mkclosure(SEXP formals, SEXP body, SEXP env);

typedef struct runner {
  suiro_map *m;
  const suiro_plan *pl;
  void *out;
  const suiro_template *tpl;
  uint64_t current;
  int in_kind, in_type;
  suiro_runner *sr;  /* the engine's side (suiro_run_map) */
  int (*body)(void *ctx);
  void *body_ctx;
  int body_rc;
  rs_encoder enc;    /* a wire result being written (enc_live): cleaned up if R unwinds */
  int enc_live;
  char *ecls, *emsg, *etb, *efull; /* what fail lent, freed by done */
  SEXP call;       /* f(element, extras...): the element slot is CADR */
  char err[256];   /* a template store failure */
  int rich;
  SEXP saved_seed; /* the worker's .Random.seed before a seeded map's elements (restored in done) */
  int seed_saved;
} runner;

/* ---- R's own generators in a seeded map ------------------------------------------------------
 * Inside an element of a seeded map, runif(), sample() and the rest draw from an L'Ecuyer-CMRG
 * stream of that element (as future.seed gives each element), so they too are the same for any
 * worker count. Its seed is made from a copy of the element's suiro stream (suiro_rng_current),
 * mixed so that R's draws are not suiro_random()'s and the stream itself is not advanced. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void element_r_seed(runner *r, const suiro_rng *cur) {
  static SEXP sym = NULL;
  if (!sym) sym = Rf_install(".Random.seed");
  if (!r->seed_saved) { /* once per runner: what the worker had, to put back */
    SEXP old = Rf_findVarInFrame(R_GlobalEnv, sym);
    r->saved_seed = old == R_UnboundValue ? NULL : old;
    if (r->saved_seed) R_PreserveObject(r->saved_seed);
    r->seed_saved = 1;
  }
  suiro_rng local;
  for (int k = 0; k < 4; k++) local.s[k] = mix64(cur->s[k] ^ (0x5eedc0ffee5eedULL + (uint64_t)k));
  const uint64_t m1 = 4294967087ULL, m2 = 4294944443ULL; /* the generator's two moduli */
  SEXP v = PROTECT(Rf_allocVector(INTSXP, 7));
  int *iv = INTEGER(v);
  iv[0] = 10407; /* RNGkind("L'Ecuyer-CMRG", "Inversion", "Rejection") */
  for (int k = 0; k < 6; k++) {
    uint64_t x = suiro_rng_next(&local) % (k < 3 ? m1 : m2);
    iv[k + 1] = (int)(uint32_t)x;
  }
  if (!iv[1] && !iv[2] && !iv[3]) iv[1] = 1; /* each half must not be all zero */
  if (!iv[4] && !iv[5] && !iv[6]) iv[4] = 1;
  Rf_defineVar(sym, v, R_GlobalEnv);
  UNPROTECT(1);
}

static void restore_r_seed(runner *r) {
  if (!r->seed_saved) return;
  SEXP sym = Rf_install(".Random.seed");
  if (r->saved_seed) {
    Rf_defineVar(sym, r->saved_seed, R_GlobalEnv);
    R_ReleaseObject(r->saved_seed);
  } else if (Rf_findVarInFrame(R_GlobalEnv, sym) != R_UnboundValue) {
    R_removeVarFromFrame(sym, R_GlobalEnv);
  }
  r->saved_seed = NULL;
  r->seed_saved = 0;
}

static SEXP element(runner *r, const suiro_elem *e) {
  suiro_elem el = *e;
  switch (el.kind) {
  case 'f': return Rf_ScalarReal(el.f);
  case 'b': return Rf_ScalarLogical(el.i == WIRE_NA_BOOL ? NA_LOGICAL : (int)el.i);
  case 'i':
    if (r->in_kind == SUIRO_IN_ARRAY && r->in_type == WIRE_T_I64) {
      SEXP x = PROTECT(rs_integer64(1));
      memcpy(REAL(x), &el.i, 8);
      UNPROTECT(1);
      return x;
    }
    if (r->in_kind == SUIRO_IN_ARRAY && r->in_type == WIRE_T_U8) return Rf_ScalarRaw((Rbyte)el.i);
    if (r->in_kind == SUIRO_IN_ARRAY && r->in_type == WIRE_T_BOOL)
      return Rf_ScalarLogical(el.i == WIRE_NA_BOOL ? NA_LOGICAL : (int)el.i);
    if (el.i > INT32_MIN && el.i <= INT32_MAX) return Rf_ScalarInteger((int)el.i);
    return Rf_ScalarReal((double)el.i);
  default: {
    rs_dec_opts o = { 0, NULL, "map element", suiro_current_pool(), rs_task_foreign() };
    return rs_decode_single(el.buf, el.len, &o);
  }
  }
}

static const char *r_kind(SEXP v) {
  switch (TYPEOF(v)) {
  case REALSXP: return rs_is_integer64(v) ? "an integer64" : "a double";
  case INTSXP: return "an integer";
  case LGLSXP: return "a logical";
  case STRSXP: return "a character";
  case VECSXP: return "a list";
  case NILSXP: return "NULL";
  default: return "a value";
  }
}

static int store_scalar(runner *r, void *cell, int type, SEXP v, R_xlen_t k, const char *field) {
  char *err = r->err;
  size_t cap = sizeof r->err;
  int rc;
  switch (TYPEOF(v)) {
  case REALSXP:
    if (rs_is_integer64(v)) {
      int64_t x;
      double d = REAL_ELT(v, k);
      memcpy(&x, &d, 8);
      rc = x == INT64_MIN ? suiro_cell_put_na(cell, type, err, cap) : suiro_cell_put_int(cell, type, x, err, cap);
    } else {
      double d = REAL_ELT(v, k);
      rc = ISNA(d) && type != WIRE_T_F64 && type != WIRE_T_F32 ? suiro_cell_put_na(cell, type, err, cap)
                                                               : suiro_cell_put_real(cell, type, d, err, cap);
    }
    break;
  case INTSXP: {
    int x = INTEGER_ELT(v, k);
    rc = x == NA_INTEGER ? suiro_cell_put_na(cell, type, err, cap) : suiro_cell_put_int(cell, type, x, err, cap);
    break;
  }
  case LGLSXP: {
    int x = LOGICAL_ELT(v, k);
    if (x == NA_LOGICAL) rc = suiro_cell_put_na(cell, type, err, cap);
    else if (type == WIRE_T_BOOL) rc = suiro_cell_put_bool(cell, type, x, err, cap);
    else rc = suiro_cell_put_int(cell, type, x, err, cap);
    break;
  }
  case RAWSXP: rc = suiro_cell_put_int(cell, type, RAW(v)[k], err, cap); break;
  default:
    snprintf(err, cap, "template %s cannot hold %s", wire_type_name(type), Rf_type2char(TYPEOF(v)));
    rc = -1;
  }
  if (rc != 0 && field) {
    char tmp[sizeof r->err];
    snprintf(tmp, sizeof tmp, "%s", err);
    snprintf(err, cap, "field '%.64s': %.180s", field, tmp);
  }
  return rc;
}

static SEXP field_of(SEXP v, const char *name) {
  SEXP nm = Rf_getAttrib(v, R_NamesSymbol);
  if (nm == R_NilValue) return NULL;
  for (R_xlen_t i = 0; i < XLENGTH(nm); i++)
    if (!strcmp(Rf_translateCharUTF8(STRING_ELT(nm, i)), name)) {
      if (TYPEOF(v) == VECSXP) return VECTOR_ELT(v, i);
      return NULL; /* atomic: handled by the caller with the index */
    }
  return NULL;
}

static R_xlen_t index_of(SEXP v, const char *name) {
  SEXP nm = Rf_getAttrib(v, R_NamesSymbol);
  if (nm == R_NilValue) return -1;
  for (R_xlen_t i = 0; i < XLENGTH(nm); i++)
    if (!strcmp(Rf_translateCharUTF8(STRING_ELT(nm, i)), name)) return i;
  return -1;
}

/* Stores element i's result; 0, or -1 with r->err set. */
static int store(runner *r, uint64_t i, SEXP v) {
  const suiro_template *t = r->tpl;
  int type;
  if (!t) {
    rs_encoder *e = &r->enc;
    rs_enc_opts o = { r->rich, 1, r->rich ? "R" : "a host of another language" };
    rs_encoder_init(e, &o);
    r->enc_live = 1;
    /* encoding may signal an R error: suiro_run_map reports it for element i, rs_map_runner cleans up */
    wire_put_list(&e->m.w, 1);
    rs_enc_prescan(e, v);
    rs_enc_value(e, v, "result");
    const void *buf;
    size_t len;
    rs_encoder_finish(e, &buf, &len);
    int full = suiro_map_put(r->m, i, buf, len) != 0;
    if (!full) rs_encoder_sent(e);
    rs_encoder_cleanup(e);
    r->enc_live = 0;
    if (full) {
      snprintf(r->err, sizeof r->err, "the map's results outgrew its heap; give a .template");
      return -1;
    }
    return 0;
  }
  if (t->kind == SUIRO_OUT_SCALAR) {
    if (XLENGTH(v) != 1 || TYPEOF(v) == VECSXP) {
      snprintf(r->err, sizeof r->err, "the template wants one %s value, got %s of length %.0f", wire_type_name(t->type),
               r_kind(v), (double)XLENGTH(v));
      return -1;
    }
    void *cell = suiro_plan_cell(r->pl, r->out, i, 0, &type);
    return store_scalar(r, cell, type, v, 0, NULL);
  }
  if (t->kind == SUIRO_OUT_ARRAY) {
    uint64_t width = 1;
    for (int k = 0; k < t->ndim; k++) width *= t->shape[k];
    if ((uint64_t)XLENGTH(v) != width || TYPEOF(v) == VECSXP) {
      snprintf(r->err, sizeof r->err, "the template wants %.0f values, got %s of length %.0f", (double)width,
               r_kind(v), (double)XLENGTH(v));
      return -1;
    }
    char *cell = suiro_plan_cell(r->pl, r->out, i, 0, &type);
    size_t es = wire_type_size(type);
    for (uint64_t k = 0; k < width; k++)
      if (store_scalar(r, cell + k * es, type, v, (R_xlen_t)k, NULL) != 0) return -1;
    return 0;
  }
  for (int k = 0; k < t->nfields; k++) {
    void *cell = suiro_plan_cell(r->pl, r->out, i, k, &type);
    const char *fname = t->fields[k].name;
    if (TYPEOF(v) == VECSXP) {
      SEXP fv = field_of(v, fname);
      if (!fv || XLENGTH(fv) != 1) {
        snprintf(r->err, sizeof r->err, "the record template wants field '%s' (one value)", fname);
        return -1;
      }
      if (store_scalar(r, cell, type, fv, 0, fname) != 0) return -1;
    } else {
      R_xlen_t at = index_of(v, fname);
      if (at < 0) {
        snprintf(r->err, sizeof r->err, "the record template wants field '%s'", fname);
        return -1;
      }
      if (store_scalar(r, cell, type, v, at, fname) != 0) return -1;
    }
  }
  return 0;
}

/* The conditions element i signalled (and, for a failed element, its error condition) as the
 * element's map note: a wire buffer holding FUNC(R) "suiro::relay" [error condition or nil,
 * conditions], which the host decodes when it delivers the element. Encoded under a top-level
 * context of its own; what cannot be noted is said on stderr rather than lost silently. */
typedef struct note_job {
  runner *r;
  uint64_t i;
  SEXP value;
  int full;
} note_job;

static void note_body(void *p) {
  note_job *j = p;
  rs_encoder *e = &j->r->enc;
  rs_enc_opts o = { 1, 0, "R" };
  rs_encoder_init(e, &o);
  j->r->enc_live = 1;
  rs_put_relay(e, j->value);
  const void *buf;
  size_t len;
  rs_encoder_finish(e, &buf, &len);
  j->full = suiro_map_note(j->r->m, j->i, buf, len) != 0;
  rs_encoder_cleanup(e);
  j->r->enc_live = 0;
}

static void note_element(runner *r, uint64_t i, SEXP value) {
  note_job j = { r, i, value, 0 };
  R_xlen_t n = rs_relay_count();
  int ok = R_ToplevelExec(note_body, &j);
  if (!ok && r->enc_live) {
    rs_encoder_cleanup(&r->enc);
    r->enc_live = 0;
  }
  if (!ok || j.full)
    REprintf("suiro: element %.0f: %.0f conditions could not be relayed to the host (%s)\n", (double)i + 1, (double)n,
             !ok ? "they could not be encoded" : "the map's heap is full");
  rs_relay_clear();
}

/* The runner's side (suiro_run_map, engine/src/runner.c): the engine claims, completes, cancels,
 * reports failures and detaches; this face builds the call, evaluates it on the elements of a
 * claimed range and stores the results. Everything runs inside one R_ToplevelExec. */
static int rrun_range(void *ud, suiro_runner *sr, uint64_t b, uint64_t e) {
  (void)b, (void)e;
  runner *r = ud;
  suiro_elem el;
  int k;
  while ((k = suiro_runner_next(sr, &el)) > 0) {
    uint64_t i = r->current = sr->current;
    const suiro_rng *cur = suiro_rng_current(); /* set for the element of a seeded map */
    if (cur) element_r_seed(r, cur);
    if (r->rich && rs_relay_count()) rs_relay_clear();
    SEXP x = PROTECT(element(r, &el));
    SETCADR(r->call, x);
    SEXP v = PROTECT(Rf_eval(r->call, R_GlobalEnv));
    int bad = store(r, i, v);
    UNPROTECT(2);
    if (bad) Rf_error("%s", r->err);
    if (r->rich && rs_relay_count()) note_element(r, i, R_NilValue);
  }
  if (k < 0) Rf_error("map: %s", suiro_last_error());
  return 0;
}

/* Builds the call f(<element>, extras...) from the plan's function buffer. */

SEXP rs_resolve_fn(const char *name, size_t len);
SEXP rs_runner_function(rs_decoder *d, wire_item *f, SEXP *names, int *rich); /* below */

static int rrun_prepare(void *ud, suiro_runner *sr) {
  runner *r = ud;
  r->sr = sr;
  r->m = sr->map;
  r->pl = sr->plan;
  r->out = sr->out;
  r->tpl = sr->tpl;
  r->in_kind = suiro_plan_in_kind(r->pl);
  r->in_type = suiro_plan_in_type(r->pl);
  const void *fb;
  size_t fl;
  suiro_plan_fn(r->pl, &fb, &fl);
  rs_dec_opts o = { 0, NULL, "map function", suiro_current_pool(), rs_task_foreign() };
  rs_decoder dd, *d = &dd;
  rs_decoder_init(d, fb, fl, &o);
  wire_item it;
  rs_dec_next(d, &it);
  if (it.tag != WIRE_LIST || it.n < 1) Rf_error("malformed map: expected a list [function, arguments...]");
  rs_dec_count_container(d);
  wire_item f;
  rs_dec_next(d, &f);
  SEXP names = R_NilValue;
  SEXP fn = PROTECT(rs_runner_function(d, &f, &names, &r->rich));
  PROTECT(names);
  uint64_t ne = it.n - 1;
  SEXP call = PROTECT(Rf_allocVector(LANGSXP, (R_xlen_t)ne + 2));
  SETCAR(call, fn);
  SEXP c = CDDR(call);
  for (uint64_t k = 0; k < ne; k++, c = CDR(c)) {
    SEXP v = rs_dec_next_value(d);
    int t = TYPEOF(v);
    SETCAR(c, t == LANGSXP || t == SYMSXP ? Rf_lang2(Rf_install("quote"), v) : v);
    if (names != R_NilValue && k < (uint64_t)XLENGTH(names) && CHAR(STRING_ELT(names, (R_xlen_t)k))[0])
      SET_TAG(c, Rf_installTrChar(STRING_ELT(names, (R_xlen_t)k)));
  }
  R_PreserveObject(call);
  r->call = call;
  UNPROTECT(4); /* call, names, fn, the decoder's table */
  if (r->rich) rs_relay_on(); /* for this runner's top-level context: every element's conditions */
  return 0;
}

static void rrun_call(void *p) {
  runner *r = p;
  rs_worker_handle_errors();
  r->body_rc = r->body(r->body_ctx);
}

static int rrun_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  runner *r = ud;
  r->body = body;
  r->body_ctx = ctx;
  r->body_rc = 0;
  int ok = R_ToplevelExec(rrun_call, r);
  if (!ok && r->enc_live) { /* R unwound out of a result's encoding: give its grants back */
    rs_encoder_cleanup(&r->enc);
    r->enc_live = 0;
  }
  return !ok || r->body_rc != 0;
}

static void rrun_fail(void *ud, suiro_runner *sr, suiro_wire_str *cls, suiro_wire_str *msg, suiro_wire_str *tb) {
  runner *r = ud;
  SEXP cond = r->rich ? rs_error_cond() : R_NilValue;
  PROTECT(cond);
  if (cond != R_NilValue || (r->rich && rs_relay_count())) note_element(r, sr->current, cond);
  UNPROTECT(1);
  rs_error_parts(&r->ecls, &r->emsg, &r->etb);
  const char *m = r->emsg ? r->emsg : "";
  size_t n = strlen(m) + 32;
  r->efull = malloc(n);
  if (r->efull) snprintf(r->efull, n, "element %.0f: %s", (double)sr->current + 1, m);
  if (r->ecls) *cls = (suiro_wire_str){ r->ecls, strlen(r->ecls) };
  *msg = r->efull ? (suiro_wire_str){ r->efull, strlen(r->efull) } : (suiro_wire_str){ m, strlen(m) };
  if (r->etb) *tb = (suiro_wire_str){ r->etb, strlen(r->etb) };
}

static void rrun_done(void *ud) {
  runner *r = ud;
  free(r->ecls);
  free(r->emsg);
  free(r->etb);
  free(r->efull);
  r->ecls = r->emsg = r->etb = r->efull = NULL;
}

static const suiro_runner_ops rrun_ops = { rrun_protect, rrun_prepare, rrun_range, rrun_fail, rrun_done };

void rs_map_runner(const void *arg, size_t len, suiro_out *out) {
  runner r;
  memset(&r, 0, sizeof r);
  const void *vmax = vmaxget();
  suiro_run_map(arg, len, out, &rrun_ops, &r);
  restore_r_seed(&r); /* the worker's own RNG state, as before the map's elements */
  if (r.call) R_ReleaseObject(r.call);
  vmaxset(vmax);
}

void rs_map_init(void) {
  cls_map = Rf_mkString("suiro_map");
  R_PreserveObject(cls_map);
}

SEXP C_map_pool(SEXP self) { return VECTOR_ELT(R_ExternalPtrProtected(self), 0); }

/* The engine map of a map object (rcluster.c stages cluster maps as prepared maps), or NULL. */
suiro_map *rs_map_engine(SEXP x) {
  rmap *mp = TYPEOF(x) == EXTPTRSXP ? R_ExternalPtrAddr(x) : NULL;
  return mp ? mp->m : NULL;
}
