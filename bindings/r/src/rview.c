/*
 * rview.c — read-only ALTREP vectors over shared pages (docs/zero-copy.md; R 4.2.2 facts).
 *
 * A view is an ALTREP double, integer, complex or raw vector whose data are `n` elements at
 * `data` inside a region (suiro_buf). The view owns one reference of the region, given back by
 * the finalizer of its record (data1: an external pointer), so a region lives while any view of
 * it is reachable from R, and is recycled after gc() once none is.
 *
 * A received vector behaves as a private copy (docs/zero-copy.md). Views are MARK_NOT_MUTABLE: R
 * copies before changing them. Much of base R asks for a writable pointer even to read (REAL(x));
 * such a request gets a private copy-on-write mapping of the same pages (suiro_zc_private, for
 * regions in /dev/shm and in the fallback directory alike: a write copies its page for this view
 * alone, so the shared pages never change whatever C code does), and from then on the view reads
 * through it. Duplicate makes a new, mutable view of the same pages (x[1] <- 0 then copies one
 * page, not the vector). A view is sent by reference while no page of its private mapping was
 * written (suiro_zc_written), and by value once one was (C code writing into a view in place):
 * what a receiver gets is always what the sender reads.
 * Serialized_state returns NULL, so serialize()/saveRDS() write views as plain vectors.
 *
 * Ownership: the record is freed by its finalizer only; everything runs on R's main thread.
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

typedef struct view_rec {
  suiro_buf *buf;      /* one reference, ours */
  const void *data;    /* the shared bytes */
  void *priv;          /* private copy-on-write mapping (suiro_zc_private), NULL until asked */
  R_xlen_t n;
  size_t bytes;
  int type;            /* WIRE_T_* */
  int is_copy;         /* made by Duplicate: R may write into it (through the private mapping) */
  size_t pinned;       /* of bytes, what counted as newly pinned here (0 or bytes) */
} view_rec;

static R_altrep_class_t cls_real, cls_int, cls_cplx, cls_raw;
static size_t live_views, live_bytes, made_since_gc, regions_since_gc, pinned_live, pinned_after_full;

/* R's collector cannot see the mapped pages a view holds and runs by how much R allocated, so
 * a program moving large values through views but allocating little keeps dropped views (and
 * their regions) for a long time, and every new large value needs a fresh region (pages the
 * kernel zeroes) instead of a warm one. So views count the shared memory they newly pin here: a
 * worker collects after a task once 16 MiB were pinned since the last collection (the arguments
 * of finished tasks are garbage by then), a host before making a view once 64 MiB were; either
 * once 24 regions were (many small values: the regions a collection frees come back warm only
 * while they fit the pool's recycle list of 32 and a process's free list of 16; past those they
 * are destroyed, and a fresh 512 KiB region costs ~300 us of page faults here). A
 * collection of the young generation suffices (views die young: ~0.2 ms in a worker, where a
 * full one is ~3 ms, and tens of ms in a host with a large heap); views that lived through one and
 * died later wait for R's own older-generation collections, unless what is pinned after a young
 * collection grew by 256 MiB since the last full one: then a full one runs. Views of a region
 * already pinned here (a view sent on and back) pin nothing new, nor, in a worker, views of its
 * own regions: resending a large view never collects for it. */
#define WORKER_LITE_GC_BYTES ((size_t)16 << 20)
#define HOST_LITE_GC_BYTES ((size_t)64 << 20)
#define FULL_GC_BYTES ((size_t)256 << 20)
#define LITE_GC_REGIONS 24

extern int rs_in_worker;

static void collect_young(void) {
  static SEXP lite;
  if (!lite) { /* .Internal(gc(verbose = FALSE, reset = FALSE, full = FALSE)) */
    SEXP inner = PROTECT(Rf_lang4(Rf_install("gc"), Rf_ScalarLogical(0), Rf_ScalarLogical(0), Rf_ScalarLogical(0)));
    lite = Rf_lang2(Rf_install(".Internal"), inner);
    R_PreserveObject(lite);
    UNPROTECT(1);
  }
  int err = 0;
  R_tryEvalSilent(lite, R_BaseEnv, &err);
}

static void collect_views(size_t lite_after) {
  if (made_since_gc < lite_after && regions_since_gc < LITE_GC_REGIONS) return;
  made_since_gc = 0;
  regions_since_gc = 0;
  collect_young(); /* finalizers included: pinned_live is what survived */
  if (pinned_live >= pinned_after_full + FULL_GC_BYTES) {
    R_gc();
    pinned_after_full = pinned_live;
  } else if (pinned_live < pinned_after_full)
    pinned_after_full = pinned_live;
}

void rs_views_after_task(void) { collect_views(WORKER_LITE_GC_BYTES); }

/* Regions this process made (its encoders' stages): views of them pin nothing another process
 * waits for (a view sent back to its maker), so in a worker they do not count. A small table of
 * names. */
#define OWN_CAP 256
static char own_names[OWN_CAP][72];
static int own_next;

void rs_region_made(suiro_buf *b) {
  const char *name = suiro_buf_name(b);
  if (!name || strlen(name) >= sizeof own_names[0]) return;
  for (int i = 0; i < OWN_CAP; i++)
    if (!strcmp(own_names[i], name)) return;
  snprintf(own_names[own_next], sizeof own_names[0], "%s", name);
  own_next = (own_next + 1) % OWN_CAP;
}

/* Which message pinned a region here first (a view of a region already pinned by an earlier
 * message pins nothing new: a view sent on and back, or a column read again). */
static unsigned message_gen;
static struct {
  suiro_buf *b;
  unsigned gen;
} pinned[64];

void rs_views_new_message(void) { message_gen++; }

static int pins_new(suiro_buf *b, int fresh) {
  size_t k = ((uintptr_t)b >> 6) & 63;
  if (fresh) {
    pinned[k].b = b;
    pinned[k].gen = message_gen;
    return 1;
  }
  return pinned[k].b == b && pinned[k].gen == message_gen;
}

static int region_is_own(suiro_buf *b) {
  const char *name = suiro_buf_name(b);
  if (!name) return 1;
  for (int i = 0; i < OWN_CAP; i++)
    if (own_names[i][0] && !strcmp(own_names[i], name)) return 1;
  return 0;
}

static size_t esize(int type) { return type == WIRE_T_C128 ? 16 : type == WIRE_T_I32 ? 4 : type == WIRE_T_U8 ? 1 : 8; }

static void rec_free(SEXP ptr) {
  view_rec *v = R_ExternalPtrAddr(ptr);
  if (!v) return;
  R_ClearExternalPtr(ptr);
  if (v->priv) suiro_zc_unprivate(v->buf, v->priv);
  suiro_buf_unref(v->buf);
  live_views--;
  live_bytes -= v->bytes;
  pinned_live -= v->pinned;
  free(v);
}

static view_rec *rec_of(SEXP x) {
  view_rec *v = R_ExternalPtrAddr(R_altrep_data1(x));
  if (!v) Rf_error("suiro: a view whose region was released");
  return v;
}

static SEXP make_view(view_rec *v, int type) {
  SEXP ptr = PROTECT(R_MakeExternalPtr(v, R_NilValue, R_NilValue));
  R_RegisterCFinalizerEx(ptr, rec_free, TRUE);
  R_altrep_class_t c = type == WIRE_T_I32 ? cls_int : type == WIRE_T_C128 ? cls_cplx : type == WIRE_T_U8 ? cls_raw : cls_real;
  SEXP x = R_new_altrep(c, ptr, R_NilValue);
  UNPROTECT(1);
  return x;
}

SEXP rs_view_new(suiro_buf *b, const void *data, R_xlen_t n, int type, int fresh) {
  view_rec *v = calloc(1, sizeof *v);
  if (!v) {
    suiro_buf_unref(b);
    Rf_error("suiro: out of memory for a view");
  }
  v->buf = b;
  v->data = data;
  v->n = n;
  v->type = type;
  v->bytes = (size_t)n * esize(type);
  if (!rs_in_worker) collect_views(HOST_LITE_GC_BYTES); /* before this view exists: it is not garbage */
  live_views++;
  live_bytes += v->bytes;
  /* what counts is shared memory newly pinned here: views of a region no earlier view here holds.
   * A host's own regions count (its result views hold the regions it staged arguments in, which
   * it wants back warm for the next argument); a worker's do not (a view of its own region is a
   * result the host sent back, and the host usually still holds it: collecting for it would only
   * slow the resending of large views down) */
  if (pins_new(b, fresh) && (!rs_in_worker || !region_is_own(b))) {
    made_since_gc += v->bytes;
    regions_since_gc += fresh;
    pinned_live += v->bytes;
    v->pinned = v->bytes;
  }
  SEXP x = PROTECT(make_view(v, type));
  if (type == WIRE_T_I64) Rf_setAttrib(x, R_ClassSymbol, Rf_mkString("integer64"));
  MARK_NOT_MUTABLE(x);
  UNPROTECT(1);
  return x;
}

int rs_view_info(SEXP x, suiro_buf **b, const void **data, size_t *bytes) {
  if (!ALTREP(x)) return 0;
  if (!(R_altrep_inherits(x, cls_real) || R_altrep_inherits(x, cls_int) || R_altrep_inherits(x, cls_cplx) ||
        R_altrep_inherits(x, cls_raw)))
    return 0;
  view_rec *v = R_ExternalPtrAddr(R_altrep_data1(x));
  /* A view written through its private mapping (R changing a duplicate, C code writing into any
   * view) goes by value: the receiver gets what this process reads. Unwritten, by reference. */
  if (!v || (v->priv && suiro_zc_written(v->buf, v->priv, v->bytes))) return 0;
  *b = v->buf;
  *data = v->data;
  *bytes = v->bytes;
  return 1;
}

/* A private copy-on-write mapping of the view's pages (a copy when the region has no name). */
static void *privatize(view_rec *v) {
  if (v->priv) return v->priv;
  v->priv = suiro_zc_private(v->buf, v->data, v->bytes);
  if (!v->priv) Rf_error("suiro: cannot make a writable copy of a view: %s", suiro_last_error());
  return v->priv;
}

/* ---- ALTREP methods ---------------------------------------------------------------------------- */

static R_xlen_t view_length(SEXP x) { return rec_of(x)->n; }

static void *view_dataptr(SEXP x, Rboolean writeable) {
  view_rec *v = rec_of(x);
  if (writeable) return privatize(v);
  return v->priv ? v->priv : (void *)v->data;
}

static const void *view_dataptr_or_null(SEXP x) {
  view_rec *v = rec_of(x);
  return v->priv ? v->priv : v->data;
}

static SEXP view_serialized_state(SEXP x) { return NULL; /* written as a plain vector */ }

static SEXP view_duplicate(SEXP x, Rboolean deep) {
  view_rec *v = rec_of(x);
  if (v->priv) return NULL; /* R copies the (private) data itself */
  view_rec *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  suiro_buf_hold(v->buf);
  *c = (view_rec){ v->buf, v->data, NULL, v->n, v->bytes, v->type, 1, 0 };
  live_views++;
  live_bytes += c->bytes;
  return make_view(c, v->type); /* R copies the attributes (altrep_DuplicateEX_default) */
}

static Rboolean view_inspect(SEXP x, int pre, int deep, int pvec, void (*inspect_subtree)(SEXP, int, int, int)) {
  view_rec *v = rec_of(x);
  const char *name = suiro_buf_name(v->buf);
  Rprintf(" suiro view of %.0f %s in %s%s\n", (double)v->n, wire_type_name(v->type), name ? name : "(unnamed region)",
          v->priv ? " (private copy)" : "");
  return TRUE;
}

static double real_elt(SEXP x, R_xlen_t i) { return ((const double *)view_dataptr_or_null(x))[i]; }
static int int_elt(SEXP x, R_xlen_t i) { return ((const int *)view_dataptr_or_null(x))[i]; }
static Rbyte raw_elt(SEXP x, R_xlen_t i) { return ((const Rbyte *)view_dataptr_or_null(x))[i]; }
static Rcomplex cplx_elt(SEXP x, R_xlen_t i) { return ((const Rcomplex *)view_dataptr_or_null(x))[i]; }

static R_xlen_t get_region(SEXP x, R_xlen_t i, R_xlen_t n, void *buf, size_t es) {
  view_rec *v = rec_of(x);
  R_xlen_t m = i + n > v->n ? v->n - i : n;
  if (m <= 0) return 0;
  memcpy(buf, (const char *)view_dataptr_or_null(x) + (size_t)i * es, (size_t)m * es);
  return m;
}
static R_xlen_t real_region(SEXP x, R_xlen_t i, R_xlen_t n, double *buf) { return get_region(x, i, n, buf, 8); }
static R_xlen_t int_region(SEXP x, R_xlen_t i, R_xlen_t n, int *buf) { return get_region(x, i, n, buf, 4); }
static R_xlen_t raw_region(SEXP x, R_xlen_t i, R_xlen_t n, Rbyte *buf) { return get_region(x, i, n, buf, 1); }
static R_xlen_t cplx_region(SEXP x, R_xlen_t i, R_xlen_t n, Rcomplex *buf) { return get_region(x, i, n, buf, 16); }

static void set_common(R_altrep_class_t c) {
  R_set_altrep_Length_method(c, view_length);
  R_set_altrep_Serialized_state_method(c, view_serialized_state);
  R_set_altrep_Duplicate_method(c, view_duplicate);
  R_set_altrep_Inspect_method(c, view_inspect);
  R_set_altvec_Dataptr_method(c, view_dataptr);
  R_set_altvec_Dataptr_or_null_method(c, view_dataptr_or_null);
}

void rs_views_init(DllInfo *dll) {
  cls_real = R_make_altreal_class("suiro_view_real", "suiro", dll);
  set_common(cls_real);
  R_set_altreal_Elt_method(cls_real, real_elt);
  R_set_altreal_Get_region_method(cls_real, real_region);
  cls_int = R_make_altinteger_class("suiro_view_int", "suiro", dll);
  set_common(cls_int);
  R_set_altinteger_Elt_method(cls_int, int_elt);
  R_set_altinteger_Get_region_method(cls_int, int_region);
  cls_cplx = R_make_altcomplex_class("suiro_view_cplx", "suiro", dll);
  set_common(cls_cplx);
  R_set_altcomplex_Elt_method(cls_cplx, cplx_elt);
  R_set_altcomplex_Get_region_method(cls_cplx, cplx_region);
  cls_raw = R_make_altraw_class("suiro_view_raw", "suiro", dll);
  set_common(cls_raw);
  R_set_altraw_Elt_method(cls_raw, raw_elt);
  R_set_altraw_Get_region_method(cls_raw, raw_region);
}

/* suiro_is_view(x), and counts for tests */
SEXP C_is_view(SEXP x) {
  suiro_buf *b;
  const void *d;
  size_t n;
  if (rs_view_info(x, &b, &d, &n)) return Rf_ScalarLogical(1);
  if (ALTREP(x) && (R_altrep_inherits(x, cls_real) || R_altrep_inherits(x, cls_int) || R_altrep_inherits(x, cls_cplx) ||
                    R_altrep_inherits(x, cls_raw)))
    return Rf_ScalarLogical(1); /* a view read through its private copy */
  return Rf_ScalarLogical(0);
}

SEXP rs_view_stats(void) {
  SEXP x = PROTECT(Rf_allocVector(REALSXP, 4));
  REAL(x)[0] = (double)live_views;
  REAL(x)[1] = (double)live_bytes;
  REAL(x)[2] = (double)made_since_gc;
  REAL(x)[3] = (double)pinned_live;
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 4));
  SET_STRING_ELT(nm, 0, Rf_mkChar("views"));
  SET_STRING_ELT(nm, 1, Rf_mkChar("bytes"));
  SET_STRING_ELT(nm, 2, Rf_mkChar("pinned_since_gc"));
  SET_STRING_ELT(nm, 3, Rf_mkChar("pinned"));
  Rf_setAttrib(x, R_NamesSymbol, nm);
  UNPROTECT(2);
  return x;
}

SEXP C_view_stats(void) { return rs_view_stats(); }

/* The region name of a view (for tests: which region it maps), NULL otherwise. */
SEXP C_view_region(SEXP x) {
  if (!ALTREP(x) || !(R_altrep_inherits(x, cls_real) || R_altrep_inherits(x, cls_int) ||
                      R_altrep_inherits(x, cls_cplx) || R_altrep_inherits(x, cls_raw)))
    return R_NilValue;
  view_rec *v = R_ExternalPtrAddr(R_altrep_data1(x));
  if (!v) return R_NilValue;
  const char *name = suiro_buf_name(v->buf);
  return name ? Rf_mkString(name) : R_NilValue;
}

/* For tests: writes value into element i (0-based) of a double vector in place, as C code does
 * (REAL(x)[i] = value, whatever R's copy rules say). */
SEXP C_view_poke(SEXP x, SEXP i, SEXP value) {
  if (TYPEOF(x) != REALSXP) Rf_error("view_poke: x (argument 1) must be a double vector");
  R_xlen_t k = (R_xlen_t)Rf_asReal(i);
  if (k < 0 || k >= XLENGTH(x)) Rf_error("view_poke: i (argument 2) is outside the vector");
  REAL(x)[k] = Rf_asReal(value);
  return R_NilValue;
}
