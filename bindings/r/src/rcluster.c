/*
 * rcluster.c — backend = "mpi" for the R face: binds the table of suiro_cluster.h
 * (build/lib/suiro/cluster.so, loaded with dlopen only when a pool asks for MPI; the package
 * never links MPI). R/cluster.R drives it: serving ranks call C_cluster_serve and quit; rank 0
 * wraps its local pool and runs maps over every node.
 *
 * A map is staged by the ordinary path (suiro_map_prepare: suiro_plan_create on the local pool,
 * never started); the tier reads the staged plan back and deals it out. Results come back as a
 * local map's: a vector of the template's type, an array, a data frame, or a list.
 *
 * Threads: the tier is not thread-safe; everything here runs on R's thread. Handles are external
 * pointers; a map's finalizer frees its map.
 */
#include <dlfcn.h>
#include <string.h>

#include "rsuiro.h"
#include "suiro_cluster.h"

static const suiro_cluster_api *A;

suiro_map *rs_map_engine(SEXP x); /* rmap.c */

static void need(void) {
  if (!A) Rf_error("backend \"mpi\": the cluster library is not loaded");
}

SEXP C_cluster_load(SEXP path) {
  if (A) return R_NilValue;
  const char *p = CHAR(STRING_ELT(path, 0));
  /* one engine per process: the package's engine symbols become global for the tier to use */
  Dl_info di;
  if (!dladdr((void *)C_cluster_load, &di) || !di.dli_fname || !dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL))
    Rf_error("backend \"mpi\": cannot make the engine of the suiro package global: %s", dlerror());
  void *h = dlopen(p, RTLD_NOW | RTLD_GLOBAL); /* Open MPI's plugins expect libmpi's symbols globally */
  if (!h) Rf_error("backend \"mpi\": cannot load %s: %s", p, dlerror());
  const suiro_cluster_api *(*get)(void) = (const suiro_cluster_api *(*)(void))dlsym(h, "suiro_cluster");
  const suiro_cluster_api *a = get ? get() : NULL;
  if (!a || a->version != SUIRO_CLUSTER_VERSION)
    Rf_error("backend \"mpi\": %s is not suiro's cluster library of this version", p);
  A = a;
  return R_NilValue;
}

SEXP C_cluster_start(void) {
  need();
  char err[700];
  if (A->start(NULL, err, sizeof err) != 0) Rf_error("suiro_pool: backend \"mpi\": %s", err);
  SEXP v = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(v, 0, Rf_ScalarInteger(A->rank()));
  SET_VECTOR_ELT(v, 1, Rf_ScalarInteger(A->size()));
  SET_VECTOR_ELT(v, 2, Rf_mkString(A->node_name(A->rank())));
  UNPROTECT(1);
  return v;
}

SEXP C_cluster_serve(void) {
  need();
  return Rf_ScalarInteger(A->serve());
}

SEXP C_cluster_shutdown(void) {
  if (A) A->shutdown(0);
  return R_NilValue;
}

static void *ptr_of(SEXP x, const char *what) {
  void *p = TYPEOF(x) == EXTPTRSXP ? R_ExternalPtrAddr(x) : NULL;
  if (!p) Rf_error("backend \"mpi\": %s was freed", what);
  return p;
}

SEXP C_cluster_pool(SEXP pool, SEXP spec, SEXP start_timeout) {
  need();
  rpool *rp = rs_pool_of(pool, "suiro_pool", 1);
  char err[700];
  void *x = A->pool_new(&rp->p, &rp->timeout, RAW(spec), (size_t)XLENGTH(spec), Rf_asReal(start_timeout), err,
                        sizeof err);
  if (!x) Rf_error("suiro_pool: backend \"mpi\": %s", err);
  /* the local pool stays reachable as long as this (the tier frees its pools at the job's end) */
  return R_MakeExternalPtr(x, R_NilValue, pool);
}

SEXP C_cluster_pool_close(SEXP xp) {
  void *x = TYPEOF(xp) == EXTPTRSXP ? R_ExternalPtrAddr(xp) : NULL;
  if (x && A) A->pool_close(x);
  if (x) R_ClearExternalPtr(xp);
  return R_NilValue;
}

SEXP C_cluster_nodes(SEXP xp) {
  void *x = ptr_of(xp, "the MPI pool");
  int n = A->pool_nodes(x);
  SEXP rank = PROTECT(Rf_allocVector(INTSXP, n)), node = PROTECT(Rf_allocVector(STRSXP, n)),
       pid = PROTECT(Rf_allocVector(INTSXP, n)), cpus = PROTECT(Rf_allocVector(INTSXP, n)),
       workers = PROTECT(Rf_allocVector(INTSXP, n));
  for (int r = 0; r < n; r++) {
    suiro_cluster_node nd;
    memset(&nd, 0, sizeof nd);
    A->pool_node(x, r, &nd);
    INTEGER(rank)[r] = r;
    SET_STRING_ELT(node, r, Rf_mkChar(nd.name ? nd.name : "?"));
    INTEGER(pid)[r] = nd.pid;
    INTEGER(cpus)[r] = nd.cpus;
    INTEGER(workers)[r] = nd.workers;
  }
  SEXP v = PROTECT(Rf_allocVector(VECSXP, 5));
  SET_VECTOR_ELT(v, 0, rank);
  SET_VECTOR_ELT(v, 1, node);
  SET_VECTOR_ELT(v, 2, pid);
  SET_VECTOR_ELT(v, 3, cpus);
  SET_VECTOR_ELT(v, 4, workers);
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 5));
  const char *names[] = { "rank", "node", "pid", "cpus", "workers" };
  for (int k = 0; k < 5; k++) SET_STRING_ELT(nm, k, Rf_mkChar(names[k]));
  Rf_setAttrib(v, R_NamesSymbol, nm);
  Rf_setAttrib(v, R_ClassSymbol, Rf_mkString("data.frame"));
  SEXP rn = PROTECT(Rf_allocVector(INTSXP, 2));
  INTEGER(rn)[0] = NA_INTEGER;
  INTEGER(rn)[1] = -n;
  Rf_setAttrib(v, R_RowNamesSymbol, rn);
  UNPROTECT(8);
  return v;
}

static void xmap_finalize(SEXP x) {
  void *m = R_ExternalPtrAddr(x);
  if (m && A) A->map_free(m);
  R_ClearExternalPtr(x);
}

/* C_cluster_map(xpool, staged, seeded, seed (a double holding the 64 bits), stream) */
SEXP C_cluster_map(SEXP xp, SEXP staged, SEXP seeded, SEXP seed, SEXP stream) {
  need();
  void *x = ptr_of(xp, "the MPI pool");
  suiro_map *m = rs_map_engine(staged);
  if (!m) Rf_error("suiro_map: the staged plan was freed");
  uint64_t s = 0;
  if (Rf_asLogical(seeded)) {
    double d = Rf_asReal(seed);
    s = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  }
  char err[700];
  void *xm = A->map_new(x, m, Rf_asLogical(seeded), s, Rf_asLogical(stream), err, sizeof err);
  if (!xm) Rf_error("suiro_map: %s", err);
  SEXP v = PROTECT(R_MakeExternalPtr(xm, R_NilValue, xp));
  R_RegisterCFinalizerEx(v, xmap_finalize, TRUE);
  UNPROTECT(1);
  return v;
}

typedef struct cluster_wait {
  void *x;
  int r; /* map_wait's answer: 1 ended, -1 its pool stopped */
} cluster_wait;

static suiro_status step_cluster_map(void *ctx, double slice) {
  cluster_wait *c = ctx;
  c->r = A->map_wait(c->x, slice);
  if (c->r != 0) return SUIRO_OK;
  return A->lost() ? SUIRO_ERR : SUIRO_TIMEOUT;
}

/* 1 ended, 0 still running, -1 its pool stopped; waits at most timeout seconds (sliced) */
SEXP C_cluster_map_wait(SEXP xm, SEXP timeout) {
  cluster_wait c = { ptr_of(xm, "the map"), 0 };
  suiro_status st = rs_wait(NULL, Rf_asReal(timeout), step_cluster_map, &c);
  if (st == SUIRO_ERR) Rf_error("suiro_collect: %s", A->lost());
  return Rf_ScalarInteger(st == SUIRO_OK ? c.r : 0);
}

SEXP C_cluster_map_done(SEXP xm) {
  void *x = ptr_of(xm, "the map");
  return Rf_ScalarReal((double)A->map_done(x));
}

SEXP C_cluster_map_cancel(SEXP xm) {
  A->map_cancel(ptr_of(xm, "the map"));
  return R_NilValue;
}

static SEXP cells(int type, const void *src, uint64_t n) {
  SEXP v;
  switch (type) {
  case WIRE_T_F64: v = Rf_allocVector(REALSXP, (R_xlen_t)n); memcpy(REAL(v), src, (size_t)n * 8); return v;
  case WIRE_T_F32:
    v = Rf_allocVector(REALSXP, (R_xlen_t)n);
    for (uint64_t i = 0; i < n; i++) REAL(v)[i] = ((const float *)src)[i];
    return v;
  case WIRE_T_I64: v = rs_integer64((R_xlen_t)n); memcpy(REAL(v), src, (size_t)n * 8); return v;
  case WIRE_T_I32: v = Rf_allocVector(INTSXP, (R_xlen_t)n); memcpy(INTEGER(v), src, (size_t)n * 4); return v;
  case WIRE_T_U8: v = Rf_allocVector(RAWSXP, (R_xlen_t)n); memcpy(RAW(v), src, (size_t)n); return v;
  default:
    v = Rf_allocVector(LGLSXP, (R_xlen_t)n);
    for (uint64_t i = 0; i < n; i++) {
      uint8_t b = ((const uint8_t *)src)[i];
      LOGICAL(v)[i] = b == WIRE_NA_BOOL ? NA_LOGICAL : b;
    }
    return v;
  }
}

/* The results as a local map gives them (signals the map's failure). */
SEXP C_cluster_map_results(SEXP xm, SEXP lang) {
  void *x = ptr_of(xm, "the map");
  suiro_error_info e;
  if (A->map_failure(x, &e)) rs_signal_error_info(&e); /* the strings live in the map until it is freed */
  const suiro_template *t = A->map_template(x);
  uint64_t count = 0, n = A->map_size(x);
  if (!t) {
    SEXP v = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)n));
    rs_dec_opts o = { 0, NULL, "element result", NULL, rs_lang_origin(Rf_asInteger(lang)) };
    for (uint64_t i = 0; i < n; i++) {
      const void *d;
      size_t len;
      if (A->map_result(x, i, &d, &len)) SET_VECTOR_ELT(v, (R_xlen_t)i, rs_decode_single(d, len, &o));
    }
    UNPROTECT(1);
    return v;
  }
  const void *col = A->map_column(x, 0, &count); /* before count is read */
  if (t->kind == SUIRO_OUT_SCALAR) return cells(t->type, col, count);
  if (t->kind == SUIRO_OUT_ARRAY) {
    SEXP v = PROTECT(cells(t->type, col, count));
    SEXP dim = PROTECT(Rf_allocVector(INTSXP, t->ndim + 1));
    for (int k = 0; k < t->ndim; k++) INTEGER(dim)[k] = (int)t->shape[k];
    INTEGER(dim)[t->ndim] = (int)n;
    Rf_setAttrib(v, R_DimSymbol, dim);
    UNPROTECT(2);
    return v;
  }
  SEXP v = PROTECT(Rf_allocVector(VECSXP, t->nfields));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, t->nfields));
  for (int k = 0; k < t->nfields; k++) {
    col = A->map_column(x, k, &count);
    SET_VECTOR_ELT(v, k, cells(t->fields[k].type, col, count));
    SET_STRING_ELT(nm, k, Rf_mkCharCE(t->fields[k].name, CE_UTF8));
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
