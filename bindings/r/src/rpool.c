/*
 * rpool.c — pools and tasks for R: create, submit, collect (one, any, all), outcomes, errors.
 *
 * A pool object is an external pointer to an rpool (rsuiro.h) with class "suiro_pool"; a task is
 * an external pointer whose tag holds its state (a raw vector) and whose protected slot holds the
 * pool object, so a pool is never collected while one of its tasks can still be collected. A task
 * dropped uncollected gives its result slot back (suiro_task_release) from its finalizer.
 *
 * The task protocol is suiro_bind.h section 1: the argument is a LIST [function, args...]; to R
 * workers the function item is FUNC(R) [name or nil, environment, argument names] (rworker.c
 * reads it); to Lua and Python workers a "module.fn" STR or a CALL spec.
 *
 * Waits are sliced (RS_CHECK_INTERRUPT_SLICE) so that R_CheckUserInterrupt can stop them; nothing
 * is held across the check, so an interrupt loses nothing (the task stays collectable).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

static SEXP cls_pool, cls_task;
static SEXP sentinels[4]; /* timeout, closed, peer_gone, full */
static SEXP sym_stop;

void rs_pool_init(void) {
  cls_pool = Rf_mkString("suiro_pool");
  R_PreserveObject(cls_pool);
  cls_task = Rf_mkString("suiro_task");
  R_PreserveObject(cls_task);
  sym_stop = Rf_install("stop");
  const char *names[] = { "suiro_timeout", "suiro_closed", "suiro_peer_gone", "suiro_full" };
  for (int i = 0; i < 4; i++) {
    SEXP s = PROTECT(Rf_allocVector(VECSXP, 0));
    SEXP cls = PROTECT(Rf_allocVector(STRSXP, 2));
    SET_STRING_ELT(cls, 0, Rf_mkChar(names[i]));
    SET_STRING_ELT(cls, 1, Rf_mkChar("suiro_sentinel"));
    Rf_setAttrib(s, R_ClassSymbol, cls);
    MARK_NOT_MUTABLE(s);
    R_PreserveObject(s);
    sentinels[i] = s;
    UNPROTECT(2);
  }
}

SEXP rs_sentinel(const char *which) {
  if (!strcmp(which, "timeout")) return sentinels[0];
  if (!strcmp(which, "closed")) return sentinels[1];
  if (!strcmp(which, "peer_gone")) return sentinels[2];
  return sentinels[3];
}

SEXP C_sentinel(SEXP which) { return rs_sentinel(CHAR(STRING_ELT(which, 0))); }

SEXP C_is_sentinel(SEXP x) {
  for (int i = 0; i < 4; i++)
    if (x == sentinels[i]) return Rf_ScalarLogical(1);
  return Rf_ScalarLogical(0);
}

SEXP rs_outcome(suiro_status st, const char *verb) {
  switch (st) {
  case SUIRO_TIMEOUT: return sentinels[0];
  case SUIRO_CLOSED: return sentinels[1];
  case SUIRO_PEER_GONE: return sentinels[2];
  case SUIRO_FULL: return sentinels[3];
  default: Rf_error("%s: %s", verb, suiro_last_error());
  }
}

/* ---- conditions --------------------------------------------------------------------------------- */

SEXP rs_condition(const char *cls, int nfields, const char **names, SEXP *values) {
  SEXP x = PROTECT(Rf_allocVector(VECSXP, nfields));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, nfields));
  for (int i = 0; i < nfields; i++) {
    SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
    SET_VECTOR_ELT(x, i, values[i]);
  }
  Rf_setAttrib(x, R_NamesSymbol, nm);
  SEXP c = PROTECT(Rf_allocVector(STRSXP, 4));
  SET_STRING_ELT(c, 0, Rf_mkChar(cls));
  SET_STRING_ELT(c, 1, Rf_mkChar("suiro_error"));
  SET_STRING_ELT(c, 2, Rf_mkChar("error"));
  SET_STRING_ELT(c, 3, Rf_mkChar("condition"));
  Rf_setAttrib(x, R_ClassSymbol, c);
  UNPROTECT(3);
  return x;
}

static SEXP wstr(wire_str s) {
  /* messages come from any language: keep what R can hold (NUL bytes end the text) */
  size_t n = s.len;
  const char *z = memchr(s.ptr, 0, n);
  if (z) n = (size_t)(z - s.ptr);
  return Rf_ScalarString(Rf_mkCharLenCE(s.ptr, (int)n, CE_UTF8));
}

static void __attribute__((noreturn)) raise(SEXP cond) {
  PROTECT(cond);
  SEXP call = PROTECT(Rf_lang2(sym_stop, cond));
  Rf_eval(call, R_BaseEnv);
  UNPROTECT(2);
  Rf_error("unreachable");
}

void rs_signal_error_info(const suiro_error_info *e) { rs_signal_error_cond(e, R_NilValue); }

/* e as a condition; with cond (the error condition an R worker raised, or R_NilValue), that
 * condition itself with suiro's classes and fields added (R/worker.R remote_condition). */
void rs_signal_error_cond(const suiro_error_info *e, SEXP cond) {
  if (cond != R_NilValue) {
    PROTECT(cond);
    const char *names[] = { "remote_class", "traceback", "index", "slot", "pid" };
    SEXP vals[] = { PROTECT(wstr(e->cls)), PROTECT(wstr(e->traceback)),
                    PROTECT(e->index < 0 ? Rf_ScalarInteger(NA_INTEGER) : Rf_ScalarReal((double)e->index + 1)),
                    PROTECT(Rf_ScalarInteger(e->slot)), PROTECT(Rf_ScalarInteger(e->pid)) };
    SEXP fields = PROTECT(Rf_allocVector(VECSXP, 5));
    SEXP nm = PROTECT(Rf_allocVector(STRSXP, 5));
    for (int i = 0; i < 5; i++) {
      SET_VECTOR_ELT(fields, i, vals[i]);
      SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
    }
    Rf_setAttrib(fields, R_NamesSymbol, nm);
    SEXP fn = PROTECT(rs_call_fn("suiro", "remote_condition"));
    SEXP call = PROTECT(Rf_lang4(fn, cond, fields, e->index >= 0 ? wstr(e->message) : R_NilValue));
    int err = 0;
    SEXP c = R_tryEvalSilent(call, R_GlobalEnv, &err);
    if (!err && c != R_NilValue) raise(c);
    UNPROTECT(10);
  }
  rs_signal_plain(e);
}

/* The raised value beside a failure's ERROR (LIST [ERROR, raised]) when an R worker wrote it: the
 * conditions signalled before the error (*conds) and the error condition (returned), or
 * R_NilValue for both. Never signals: a payload that does not decode counts as none. */
typedef struct raised_job {
  const void *data;
  size_t len;
  SEXP out;
} raised_job;

static void raised_body(void *p) {
  raised_job *j = p;
  rs_dec_opts o = { 0, NULL, "error", NULL, NULL };
  SEXP l = rs_decode(j->data, j->len, &o);
  if (TYPEOF(l) == VECSXP && XLENGTH(l) == 2) {
    SEXP conds;
    SEXP v = rs_unrelay(VECTOR_ELT(l, 1), &conds);
    if (conds != R_NilValue) {
      SEXP out = Rf_allocVector(VECSXP, 2);
      SET_VECTOR_ELT(out, 0, v);
      SET_VECTOR_ELT(out, 1, conds);
      j->out = out;
      R_PreserveObject(out);
    }
  }
}

SEXP rs_failure_raised(int lang, const suiro_result *r, SEXP *conds) {
  *conds = R_NilValue;
  suiro_error_info e;
  if (lang != WIRE_LANG_R || r->kind != SUIRO_RESULT_ERROR || ((uintptr_t)r->data & 7) ||
      suiro_error_read(r->kind, r->data, r->len, &e) != 0 || !e.has_value)
    return R_NilValue;
  raised_job j = { r->data, r->len, NULL };
  if (!R_ToplevelExec(raised_body, &j) || !j.out) return R_NilValue;
  R_ReleaseObject(j.out); /* the caller protects what it keeps */
  *conds = VECTOR_ELT(j.out, 1);
  return VECTOR_ELT(j.out, 0);
}

/* A failed result of a pool of language lang: its relayed conditions, then its error. */
void rs_signal_result_failure(int lang, const suiro_result *r, int64_t index) {
  SEXP conds;
  SEXP cond = PROTECT(rs_failure_raised(lang, r, &conds));
  PROTECT(conds);
  rs_relay_signal(conds);
  suiro_error_info e;
  if (suiro_result_error(r, &e) != 0) Rf_error("suiro: a result that is not a failure");
  if (index >= 0 && e.index < 0) e.index = index;
  rs_signal_error_cond(&e, cond);
}

void rs_signal_plain(const suiro_error_info *e) {
  SEXP idx = PROTECT(e->index < 0 ? Rf_ScalarInteger(NA_INTEGER) : Rf_ScalarReal((double)e->index + 1));
  if (e->cls.len == strlen(SUIRO_CLASS_WORKER_DIED) && !memcmp(e->cls.ptr, SUIRO_CLASS_WORKER_DIED, e->cls.len)) {
    const char *names[] = { "message", "call", "slot", "pid", "index" };
    SEXP vals[] = { PROTECT(wstr(e->message)), R_NilValue, PROTECT(Rf_ScalarInteger(e->slot)),
                    PROTECT(Rf_ScalarInteger(e->pid)), idx };
    raise(rs_condition("suiro_error_worker_died", 5, names, vals));
  }
  if (e->cls.len == strlen(SUIRO_CLASS_CANCELLED) && !memcmp(e->cls.ptr, SUIRO_CLASS_CANCELLED, e->cls.len)) {
    const char *names[] = { "message", "call", "index" };
    SEXP vals[] = { PROTECT(wstr(e->message)), R_NilValue, idx };
    raise(rs_condition("suiro_error_cancelled", 3, names, vals));
  }
  const char *names[] = { "message", "call", "remote_class", "traceback", "index", "slot", "pid" };
  SEXP vals[] = { PROTECT(wstr(e->message)), R_NilValue, PROTECT(wstr(e->cls)), PROTECT(wstr(e->traceback)), idx,
                  PROTECT(Rf_ScalarInteger(e->slot)), PROTECT(Rf_ScalarInteger(e->pid)) };
  raise(rs_condition("suiro_error_remote", 7, names, vals));
}

void rs_signal_failure(const suiro_result *r, int64_t index) {
  suiro_error_info e;
  if (suiro_result_error(r, &e) != 0) Rf_error("suiro: a result that is not a failure");
  if (index >= 0 && e.index < 0) e.index = index;
  rs_signal_error_info(&e);
}

/* ---- pools -------------------------------------------------------------------------------------- */

void rs_pool_unref(rpool *rp) {
  if (--rp->refs > 0) return;
  /* a forked child (mcparallel, mclapply) never stops its parent's pool */
  if (rp->p && rp->owner && !suiro_pool_inherited(rp->p)) suiro_pool_stop(rp->p, 5);
  if (rp->fn_last) R_ReleaseObject(rp->fn_last);
  free(rp);
}

void rs_async_stop(rpool *rp); /* rasync.c */

static void pool_stop(rpool *rp, double timeout) {
  if (!rp->p) return;
  if (suiro_pool_inherited(rp->p)) { /* a forked child: the parent's pool, not ours to stop */
    rp->p = NULL;
    return;
  }
  rs_async_stop(rp);
  if (rp->owner) suiro_pool_stop(rp->p, timeout);
  rp->p = NULL;
}

static void pool_fin(SEXP x) {
  rpool *rp = R_ExternalPtrAddr(x);
  if (!rp) return;
  R_ClearExternalPtr(x);
  pool_stop(rp, 5);
  rs_pool_retire_slab(rp); /* its tasks are all garbage too: they hold the pool object */
  rs_pool_unref(rp);
}

SEXP rs_pool_new_sexp(rpool *rp, SEXP info) {
  rp->refs++;
  SEXP x = PROTECT(R_MakeExternalPtr(rp, R_NilValue, info));
  R_RegisterCFinalizerEx(x, pool_fin, TRUE);
  Rf_setAttrib(x, R_ClassSymbol, cls_pool);
  UNPROTECT(1);
  return x;
}

rpool *rs_pool_of(SEXP pool, const char *verb, int must_run) {
  if (TYPEOF(pool) != EXTPTRSXP || !Rf_inherits(pool, "suiro_pool"))
    Rf_error("%s: argument 1 must be a suiro_pool, got %s", verb,
             Rf_isNull(Rf_getAttrib(pool, R_ClassSymbol)) ? Rf_type2char(TYPEOF(pool))
                                                           : CHAR(STRING_ELT(Rf_getAttrib(pool, R_ClassSymbol), 0)));
  rpool *rp = R_ExternalPtrAddr(pool);
  if (!rp) Rf_error("%s: the pool is gone", verb);
  if (must_run && !rp->p) Rf_error("%s: the pool is stopped", verb);
  int owner = rp->p ? suiro_pool_inherited(rp->p) : 0;
  if (must_run && owner)
    Rf_error("%s: this pool belongs to process %d (inherited across fork: a forked child, e.g. of mclapply "
             "or mcparallel, cannot use its parent's pools; create a pool in the child)", verb, owner);
  return rp;
}

/* C_pool_new(spec, info): spec is the raw wire DICT R/pool.R encoded (the normalised options, with
 * exe, argv, env and lang built from the launcher); the engine reads and checks every field
 * (suiro_pool_create_from, suiro_face.h section 6). */
SEXP C_pool_new(SEXP spec, SEXP info) {
  if (TYPEOF(spec) != RAWSXP) Rf_error("suiro_pool: the pool's options must be wire bytes (a raw vector)");
  rpool *rp = calloc(1, sizeof *rp);
  if (!rp) Rf_error("suiro_pool: out of memory");
  suiro_pool_info pi;
  suiro_status st = suiro_pool_create_from(RAW(spec), (size_t)XLENGTH(spec), WIRE_LANG_R, &rp->p, &pi);
  if (st != SUIRO_OK) {
    free(rp);
    const char *msg = suiro_last_error();
    Rf_error("suiro_pool: %s", strncmp(msg, "pool: ", 6) ? msg : msg + 6); /* our verb, not the engine's */
  }
  rp->lang = pi.lang;
  rp->timeout = pi.timeout;
  rp->owner = 1;
  return rs_pool_new_sexp(rp, info);
}

SEXP C_pool_stop(SEXP pool, SEXP timeout) {
  rpool *rp = rs_pool_of(pool, "suiro_pool_stop", 0);
  if (!rp->owner) Rf_error("suiro_pool_stop: a worker's own pool cannot be stopped");
  pool_stop(rp, Rf_asReal(timeout));
  return R_NilValue;
}

SEXP C_pool_alive(SEXP pool) {
  rpool *rp = R_ExternalPtrAddr(pool);
  return Rf_ScalarLogical(rp && rp->p);
}

SEXP C_pool_lang(SEXP pool) {
  rpool *rp = rs_pool_of(pool, "suiro", 0);
  return Rf_ScalarInteger(rp->lang);
}

SEXP C_pool_status(SEXP pool) {
  rpool *rp = rs_pool_of(pool, "suiro_pool_status", 1);
  suiro_pool_stats s;
  suiro_worker_info w[64];
  int n = suiro_pool_status(rp->p, &s, w, 64);
  if (n < 0) n = 0;
  const char *wn[] = { "slot", "pid", "state", "tasks", "steals", "parks", "moves" };
  SEXP df = PROTECT(Rf_allocVector(VECSXP, 7));
  SEXP dfn = PROTECT(Rf_allocVector(STRSXP, 7));
  for (int k = 0; k < 7; k++) {
    SET_STRING_ELT(dfn, k, Rf_mkChar(wn[k]));
    SET_VECTOR_ELT(df, k, Rf_allocVector(k == 2 ? STRSXP : k < 2 ? INTSXP : REALSXP, n));
  }
  for (int i = 0; i < n; i++) {
    INTEGER(VECTOR_ELT(df, 0))[i] = w[i].slot;
    INTEGER(VECTOR_ELT(df, 1))[i] = w[i].pid;
    SET_STRING_ELT(VECTOR_ELT(df, 2), i, Rf_mkChar(suiro_worker_state_name(w[i].state)));
    REAL(VECTOR_ELT(df, 3))[i] = (double)w[i].tasks;
    REAL(VECTOR_ELT(df, 4))[i] = (double)w[i].steals;
    REAL(VECTOR_ELT(df, 5))[i] = (double)w[i].parks;
    REAL(VECTOR_ELT(df, 6))[i] = (double)w[i].moves;
  }
  Rf_setAttrib(df, R_NamesSymbol, dfn);
  SEXP cls = PROTECT(Rf_mkString("data.frame"));
  Rf_setAttrib(df, R_ClassSymbol, cls);
  SEXP rn = PROTECT(Rf_allocVector(INTSXP, 2));
  INTEGER(rn)[0] = NA_INTEGER;
  INTEGER(rn)[1] = -n;
  Rf_setAttrib(df, R_RowNamesSymbol, rn);
  const char *sn[] = { "workers", "max_workers", "submitted", "collected", "tasks", "steals", "parks",
                       "host_parks", "deaths", "respawns", "wakes", "moves" };
  double sv[] = { s.workers, s.max_workers, (double)s.submitted, (double)s.collected, (double)s.tasks,
                  (double)s.steals, (double)s.parks, (double)s.host_parks, (double)s.deaths, (double)s.respawns,
                  (double)s.wakes, (double)s.moves };
  int ns = 12;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, ns + 2));
  SEXP on = PROTECT(Rf_allocVector(STRSXP, ns + 2));
  SET_STRING_ELT(on, 0, Rf_mkChar("name"));
  SET_VECTOR_ELT(out, 0, Rf_mkString(suiro_pool_name(rp->p)));
  for (int k = 0; k < ns; k++) {
    SET_STRING_ELT(on, k + 1, Rf_mkChar(sn[k]));
    SET_VECTOR_ELT(out, k + 1, Rf_ScalarReal(sv[k]));
  }
  SET_STRING_ELT(on, ns + 1, Rf_mkChar("worker"));
  SET_VECTOR_ELT(out, ns + 1, df);
  Rf_setAttrib(out, R_NamesSymbol, on);
  UNPROTECT(6);
  return out;
}

SEXP C_pool_spawn(SEXP pool, SEXP n) {
  rpool *rp = rs_pool_of(pool, "suiro_pool_spawn", 1);
  if (!rp->owner) Rf_error("suiro_pool_spawn: only the pool's host can grow it");
  if (suiro_pool_spawn_workers(rp->p, Rf_asInteger(n)) != SUIRO_OK) Rf_error("suiro_pool_spawn: %s", suiro_last_error());
  return R_NilValue;
}

SEXP C_pool_retire(SEXP pool, SEXP slot, SEXP timeout) {
  rpool *rp = rs_pool_of(pool, "suiro_pool_retire", 1);
  if (!rp->owner) Rf_error("suiro_pool_retire: only the pool's host can shrink it");
  suiro_status st = suiro_pool_retire(rp->p, Rf_asInteger(slot), Rf_asReal(timeout));
  if (st != SUIRO_OK && st != SUIRO_TIMEOUT) Rf_error("suiro_pool_retire: %s", suiro_last_error());
  return Rf_ScalarLogical(st == SUIRO_OK);
}

/* ---- timeouts ----------------------------------------------------------------------------------- */

int rs_duration(const char *s, double *sec, char *err, size_t cap); /* rembed.c */

double rs_timeout_arg(SEXP t, double dflt, const char *verb) {
  if (t == R_NilValue) return dflt;
  if ((TYPEOF(t) == REALSXP || TYPEOF(t) == INTSXP) && XLENGTH(t) == 1) {
    double v = Rf_asReal(t), out;
    int bad = suiro_timeout_norm(v, &out);
    if (bad == SUIRO_TIMEOUT_NAN) Rf_error("%s: timeout is NA", verb);
    if (bad) Rf_error("%s: timeout must be zero or more seconds (Inf for no limit), got %g", verb, v);
    return out;
  }
  if (TYPEOF(t) == STRSXP && XLENGTH(t) == 1 && STRING_ELT(t, 0) != NA_STRING) {
    double v, out;
    char err[256];
    if (rs_duration(CHAR(STRING_ELT(t, 0)), &v, err, sizeof err) != 0) Rf_error("%s: timeout: %s", verb, err);
    if (suiro_timeout_norm(v, &out) != 0) Rf_error("%s: timeout must be zero or more seconds, got %g", verb, v);
    return out;
  }
  Rf_error("%s: timeout must be a number of seconds or a duration string such as \"250ms\"", verb);
}

/* ---- tasks -------------------------------------------------------------------------------------- */

typedef struct rtask {
  suiro_task t;
  rpool *rp;
  int state; /* 0 pending, 1 collected, 2 released */
} rtask;

/* Tasks live in slabs of up to TASK_SLAB: a task object is an external pointer to its entry, with the
 * slab's object in its tag (and the pool's in its protected slot); only the slab has a finalizer.
 * A finalizer per task (an R weak reference each, scanned at every collection and run one by
 * one) cost R round trips 10-50% (2.3 against 2.7-4.9 us, growing with the heap). The pool holds
 * the slab being filled (preserved), so a slab can only be collected once it is full or retired
 * and every task in it is garbage; then it releases the tasks that were never collected. A pool
 * short of result slots retires its slab first (slots_exhausted), so tasks dropped from a partly
 * filled slab still give theirs back. A task kept alive holds the slots of the dropped tasks of
 * its slab: slabs are sized so that this takes over 2048 such tasks to exhaust the pool's slots
 * (64 with the default 131072; one task a slab, a finalizer each, with 2048 slots or fewer). */
#define TASK_SLAB 64

typedef struct task_slab {
  rpool *rp; /* one reference for the slab */
  int used, cap;
  rtask tasks[];
} task_slab;

static void slab_fin(SEXP x) {
  task_slab *s = R_ExternalPtrAddr(x);
  if (!s) return;
  R_ClearExternalPtr(x);
  for (int i = 0; i < s->used; i++)
    if (s->tasks[i].state == 0 && s->rp->p) suiro_task_release(s->rp->p, s->tasks[i].t);
  rs_pool_unref(s->rp);
  free(s);
}

void rs_pool_retire_slab(rpool *rp) {
  if (!rp->slab) return;
  R_ReleaseObject(rp->slab);
  rp->slab = NULL;
}

/* A task object for t (which it owns: released if the object cannot be made). */
static SEXP task_new(SEXP pool, rpool *rp, suiro_task t) {
  task_slab *s = rp->slab ? R_ExternalPtrAddr(rp->slab) : NULL;
  if (!s || s->used == s->cap) {
    rs_pool_retire_slab(rp);
    if (!rp->slab_cap) {
      uint32_t total = 0;
      suiro_free_slots(rp->p, &total);
      rp->slab_cap = total / 2048 < 1 ? 1 : total / 2048 > TASK_SLAB ? TASK_SLAB : (int)(total / 2048);
    }
    s = calloc(1, sizeof *s + (size_t)rp->slab_cap * sizeof(rtask));
    if (!s) {
      suiro_task_release(rp->p, t);
      Rf_error("out of memory for a task");
    }
    s->rp = rp;
    s->cap = rp->slab_cap;
    rp->refs++;
    SEXP x = PROTECT(R_MakeExternalPtr(s, R_NilValue, R_NilValue));
    R_RegisterCFinalizerEx(x, slab_fin, FALSE);
    R_PreserveObject(x);
    rp->slab = x;
    UNPROTECT(1);
  }
  rtask *k = &s->tasks[s->used++];
  k->t = t;
  k->rp = rp;
  k->state = 0;
  SEXP x = PROTECT(R_MakeExternalPtr(k, rp->slab, pool));
  SEXP cls = Rf_cons(cls_task, R_NilValue); /* a fresh attribute list: class<- may edit it in place */
  SET_TAG(cls, R_ClassSymbol);
  SET_ATTRIB(x, cls);
  SET_OBJECT(x, 1);
  UNPROTECT(1);
  return x;
}

static rtask *task_of(SEXP x, const char *verb, int argi) {
  if (TYPEOF(x) != EXTPTRSXP || !Rf_inherits(x, "suiro_task"))
    Rf_error("%s: argument %d must be a suiro_task%s, got %s", verb, argi, !strcmp(verb, "suiro_collect") ? " or a suiro_map" : "",
             Rf_isNull(Rf_getAttrib(x, R_ClassSymbol)) ? Rf_type2char(TYPEOF(x)) : CHAR(STRING_ELT(Rf_getAttrib(x, R_ClassSymbol), 0)));
  rtask *k = R_ExternalPtrAddr(x);
  if (!k) Rf_error("%s: the task is gone", verb);
  return k;
}

SEXP C_task_pool(SEXP task) { return R_ExternalPtrProtected(task); }

static int rs_wait_interrupted(void *ud) {
  (void)ud;
  R_CheckUserInterrupt();
  return 0;
}

static const suiro_wait_hooks rs_wait_hooks = { 0, RS_CHECK_INTERRUPT_SLICE, RS_CHECK_INTERRUPT_SLICE, 0, NULL, NULL,
                                                rs_wait_interrupted };

suiro_status rs_wait(suiro_pool *p, double timeout, suiro_wait_step step, void *ctx) {
  return (suiro_status)suiro_wait_sliced(p, timeout, step, ctx, &rs_wait_hooks, NULL);
}

typedef struct collect_one {
  suiro_pool *p;
  suiro_task t;
  suiro_result *res;
} collect_one;

static suiro_status step_collect(void *ctx, double slice) {
  collect_one *c = ctx;
  return suiro_collect(c->p, c->t, c->res, slice);
}

suiro_status rs_collect_sliced(suiro_pool *p, suiro_task t, suiro_result *res, double timeout) {
  collect_one c = { p, t, res };
  return rs_wait(p, timeout, step_collect, &c);
}

/* A collected result: its value (after the conditions it relayed are signalled), or the
 * condition of a failure. */
static SEXP result_value(const rpool *rp, const suiro_result *r) {
  if (r->kind == SUIRO_RESULT_VALUE) {
    rs_dec_opts o = { 0, NULL, "result", NULL, rs_lang_origin(rp->lang) };
    SEXP conds;
    SEXP v = PROTECT(rs_unrelay(rs_decode_single(r->data, r->len, &o), &conds));
    PROTECT(conds);
    rs_relay_signal(conds);
    UNPROTECT(2);
    return v;
  }
  rs_signal_result_failure(rp->lang, r, -1);
  return R_NilValue;
}

SEXP C_map_collect(SEXP self, SEXP timeout); /* rmap.c */

/* A map of an MPI pool is an R list (R/cluster.R collects it). */
static SEXP cluster_collect(SEXP x, SEXP timeout) {
  SEXP ns = PROTECT(R_FindNamespace(PROTECT(Rf_mkString("suiro"))));
  SEXP call = PROTECT(Rf_lang3(Rf_install("cluster_collect"), x, timeout));
  SEXP v = Rf_eval(call, ns);
  UNPROTECT(3);
  return v;
}

SEXP C_collect(SEXP task, SEXP timeout) {
  if (TYPEOF(task) == EXTPTRSXP && Rf_inherits(task, "suiro_map")) return C_map_collect(task, timeout);
  if (TYPEOF(task) == VECSXP && Rf_inherits(task, "suiro_cluster_map")) return cluster_collect(task, timeout);
  /* what suiro_submit returned instead of a task (suiro_full, suiro_closed, ...): collecting it
   * gives the same outcome back, so suiro_collect(suiro_submit(...)) tells what happened */
  if (TYPEOF(task) != EXTPTRSXP)
    for (int i = 0; i < 4; i++)
      if (task == sentinels[i]) return task;
  rtask *k = task_of(task, "suiro_collect", 1);
  if (k->state == 1) Rf_error("suiro_collect: this task was collected already");
  if (!k->rp || !k->rp->p) return rs_sentinel("closed");
  double t = rs_timeout_arg(timeout, k->rp->timeout, "suiro_collect");
  suiro_result r;
  suiro_status st = rs_collect_sliced(k->rp->p, k->t, &r, t);
  if (st != SUIRO_OK) return rs_outcome(st, "suiro_collect");
  k->state = 1;
  return result_value(k->rp, &r);
}

SEXP C_task_ready(SEXP task) {
  rtask *k = task_of(task, "suiro_task_ready", 1);
  if (k->state != 0 || !k->rp || !k->rp->p) return Rf_ScalarLogical(k->state == 0 ? 1 : 0);
  return Rf_ScalarLogical(suiro_task_ready(k->rp->p, k->t) != 0);
}

/* For promises (rasync.c): 1 when collecting the task now would not wait (ready, collected
 * already, or its pool stopped), 0 while it is pending. Never signals. */
int rs_task_settled(SEXP x) {
  rtask *k = TYPEOF(x) == EXTPTRSXP ? R_ExternalPtrAddr(x) : NULL;
  if (!k || k->state != 0 || !k->rp || !k->rp->p) return 1;
  return suiro_task_ready(k->rp->p, k->t) != 0;
}

SEXP C_task_cancel(SEXP task) {
  rtask *k = task_of(task, "suiro_cancel", 1);
  if (k->state != 0 || !k->rp || !k->rp->p) return Rf_ScalarLogical(0);
  return Rf_ScalarLogical(suiro_cancel(k->rp->p, k->t) == 1);
}

SEXP C_task_state(SEXP task) {
  rtask *k = task_of(task, "suiro", 1);
  const char *s = k->state == 1 ? "collected" : k->state == 2 ? "released" : !k->rp || !k->rp->p ? "pool stopped"
                  : suiro_task_ready(k->rp->p, k->t) ? "ready" : "pending";
  return Rf_mkString(s);
}

static void tasks_of(SEXP tasks, const char *verb, suiro_task *out, rtask **ks, rpool **rpp) {
  R_xlen_t n = XLENGTH(tasks);
  rpool *rp = NULL;
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP x = VECTOR_ELT(tasks, i);
    if (TYPEOF(x) != EXTPTRSXP || !Rf_inherits(x, "suiro_task"))
      Rf_error("%s: tasks[[%.0f]] is not a suiro_task", verb, (double)i + 1);
    rtask *k = R_ExternalPtrAddr(x);
    if (!k) Rf_error("%s: tasks[[%.0f]] is gone", verb, (double)i + 1);
    if (k->state == 1) Rf_error("%s: tasks[[%.0f]] was collected already", verb, (double)i + 1);
    if (!k->rp || !k->rp->p) Rf_error("%s: tasks[[%.0f]]'s pool is stopped", verb, (double)i + 1);
    if (rp && k->rp != rp) Rf_error("%s: tasks[[%.0f]] belongs to another pool than tasks[[1]]", verb, (double)i + 1);
    rp = k->rp;
    out[i] = k->t;
    ks[i] = k;
  }
  *rpp = rp;
}

typedef struct collect_any_step {
  suiro_pool *p;
  const suiro_task *ts;
  size_t n, *idx;
  suiro_result *r;
} collect_any_step;

static suiro_status step_collect_any(void *ctx, double slice) {
  collect_any_step *c = ctx;
  return suiro_collect_any(c->p, c->ts, c->n, c->idx, c->r, slice);
}

SEXP C_collect_any(SEXP tasks, SEXP timeout) {
  if (TYPEOF(tasks) != VECSXP) Rf_error("suiro_collect_any: argument 1 must be a list of tasks");
  R_xlen_t n = XLENGTH(tasks);
  if (n == 0) Rf_error("suiro_collect_any: no tasks given");
  suiro_task *ts = (suiro_task *)R_alloc((size_t)n, sizeof *ts);
  rtask **ks = (rtask **)R_alloc((size_t)n, sizeof *ks);
  rpool *rp;
  tasks_of(tasks, "suiro_collect_any", ts, ks, &rp);
  double t = rs_timeout_arg(timeout, rp->timeout, "suiro_collect_any");
  size_t idx = 0;
  suiro_result r;
  collect_any_step c = { rp->p, ts, (size_t)n, &idx, &r };
  suiro_status st = rs_wait(rp->p, t, step_collect_any, &c);
  if (st != SUIRO_OK) return rs_outcome(st, "suiro_collect_any");
  ks[idx]->state = 1;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 2));
  SET_STRING_ELT(nm, 0, Rf_mkChar("index"));
  SET_STRING_ELT(nm, 1, Rf_mkChar("value"));
  Rf_setAttrib(out, R_NamesSymbol, nm);
  SET_VECTOR_ELT(out, 0, Rf_ScalarInteger((int)idx + 1));
  SET_VECTOR_ELT(out, 1, result_value(rp, &r));
  UNPROTECT(2);
  return out;
}

typedef struct all_ctx {
  SEXP out;      /* protected by the caller */
  SEXP conds;    /* per task its relayed conditions, then the first failure's error condition */
  int lang;
  const char *foreign; /* who wrote the results (rs_dec_opts.foreign) */
  rtask **ks;
  long failed;   /* 1-based index of the first failed task (0: none), -index: undecodable */
  char *cls, *msg, *tb; /* its error, copied (signalled once every result was handed over) */
  int slot, pid;
  char decode_err[512];
} all_ctx;

/* collect_all's sink: decodes each result as it is handed over (its bytes are valid only then).
 * Nothing may unwind through the engine: decoding runs under R_ToplevelExec. */
typedef struct sink_job {
  all_ctx *c;
  size_t i;
  const suiro_result *r;
} sink_job;

static void sink_decode(void *p) {
  sink_job *j = p;
  rs_dec_opts o = { 0, NULL, "result", NULL, j->c->foreign };
  SEXP conds;
  SEXP v = PROTECT(rs_unrelay(rs_decode_single(j->r->data, j->r->len, &o), &conds));
  SET_VECTOR_ELT(j->c->out, (R_xlen_t)j->i, v);
  SET_VECTOR_ELT(j->c->conds, (R_xlen_t)j->i, conds);
  UNPROTECT(1);
}

static char *dupws(wire_str s) {
  char *d = malloc(s.len + 1);
  if (d) {
    memcpy(d, s.ptr, s.len);
    d[s.len] = 0;
  }
  return d;
}

static int all_sink(void *ctx, size_t i, const suiro_result *r) {
  all_ctx *c = ctx;
  c->ks[i]->state = 1;
  if (r->kind != SUIRO_RESULT_VALUE) {
    SEXP conds;
    SEXP cond = PROTECT(rs_failure_raised(c->lang, r, &conds));
    SET_VECTOR_ELT(c->conds, (R_xlen_t)i, conds);
    if (!c->failed) SET_VECTOR_ELT(c->conds, XLENGTH(c->conds) - 1, cond);
    UNPROTECT(1);
    if (!c->failed) {
      suiro_error_info e;
      suiro_result_error(r, &e);
      c->cls = dupws(e.cls);
      c->msg = dupws(e.message);
      c->tb = dupws(e.traceback);
      c->slot = e.slot;
      c->pid = e.pid;
      c->failed = (long)i + 1;
    }
    return 0;
  }
  sink_job j = { c, i, r };
  if (!R_ToplevelExec(sink_decode, &j) && !c->failed) {
    c->failed = -((long)i + 1);
    snprintf(c->decode_err, sizeof c->decode_err, "%s", R_curErrorBuf());
  }
  return 0;
}

typedef struct collect_all_step {
  suiro_pool *p;
  const suiro_task *ts;
  size_t n;
  void *sink_ctx;
} collect_all_step;

static suiro_status step_collect_all(void *ctx, double slice) {
  collect_all_step *c = ctx;
  return suiro_collect_all(c->p, c->ts, c->n, all_sink, c->sink_ctx, slice);
}

typedef struct all_job {
  all_ctx c;
  SEXP tasks;
  SEXP timeout;
} all_job;

static SEXP all_run(void *p) {
  all_job *j = p;
  SEXP tasks = j->tasks;
  R_xlen_t n = XLENGTH(tasks);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP nm = Rf_getAttrib(tasks, R_NamesSymbol);
  if (nm != R_NilValue) Rf_setAttrib(out, R_NamesSymbol, nm);
  if (n == 0) {
    UNPROTECT(1);
    return out;
  }
  suiro_task *ts = (suiro_task *)R_alloc((size_t)n, sizeof *ts);
  rtask **ks = (rtask **)R_alloc((size_t)n, sizeof *ks);
  rpool *rp;
  tasks_of(tasks, "suiro_collect_all", ts, ks, &rp);
  double t = rs_timeout_arg(j->timeout, rp->timeout, "suiro_collect_all");
  j->c.out = out;
  j->c.conds = PROTECT(Rf_allocVector(VECSXP, n + 1));
  j->c.lang = rp->lang;
  j->c.ks = ks;
  j->c.foreign = rs_lang_origin(rp->lang);
  collect_all_step c = { rp->p, ts, (size_t)n, &j->c };
  suiro_status st = rs_wait(rp->p, t, step_collect_all, &c); /* a timeout consumes nothing */
  if (st != SUIRO_OK) {
    UNPROTECT(2);
    return rs_outcome(st, "suiro_collect_all");
  }
  /* every task's conditions in task order (all were collected), then the first failure */
  for (R_xlen_t i = 0; i < n; i++) rs_relay_signal(VECTOR_ELT(j->c.conds, i));
  if (j->c.failed > 0) {
    suiro_error_info e;
    memset(&e, 0, sizeof e);
    e.cls = (wire_str){ j->c.cls ? j->c.cls : "remote", j->c.cls ? strlen(j->c.cls) : 6 };
    e.message = (wire_str){ j->c.msg ? j->c.msg : "", j->c.msg ? strlen(j->c.msg) : 0 };
    e.traceback = (wire_str){ j->c.tb ? j->c.tb : "", j->c.tb ? strlen(j->c.tb) : 0 };
    e.index = j->c.failed - 1;
    e.slot = j->c.slot;
    e.pid = j->c.pid;
    rs_signal_error_cond(&e, VECTOR_ELT(j->c.conds, n)); /* the cleanup frees the copies */
  }
  if (j->c.failed < 0) Rf_error("suiro_collect_all: tasks[[%ld]]: %s", -j->c.failed, j->c.decode_err);
  UNPROTECT(2);
  return out;
}

static void all_clean(void *p) {
  all_job *j = p;
  free(j->c.cls);
  free(j->c.msg);
  free(j->c.tb);
}

SEXP C_collect_all(SEXP tasks, SEXP timeout) {
  if (TYPEOF(tasks) != VECSXP) Rf_error("suiro_collect_all: argument 1 must be a list of tasks");
  all_job j;
  memset(&j, 0, sizeof j);
  j.tasks = tasks;
  j.timeout = timeout;
  return R_ExecWithCleanup(all_run, &j, all_clean, &j);
}

/* ---- submitting --------------------------------------------------------------------------------- */

/* Every result slot is held (each submitted task holds one until collected): tasks dropped
 * uncollected give theirs back once garbage-collected and finished, so collect garbage first and
 * give them a moment; slots held by tasks still referenced are only freed by collecting them.
 * 1: give up (the caller returns "full"); 0: wait on. *since: when the slots first ran out. */
static int slots_exhausted(rpool *rp, double *since) {
  uint32_t total;
  if (suiro_free_slots(rp->p, &total) > 0) {
    *since = 0;
    return 0;
  }
  if (*since == 0) {
    *since = suiro_now();
    rs_pool_retire_slab(rp); /* tasks dropped from the slab being filled can go too */
    R_gc();
    return 0;
  }
  return suiro_now() - *since > 2.0;
}

void rs_write_task(rs_encoder *e, rpool *rp, SEXP fn, SEXP args, const char *verb); /* rfunc.c */

typedef struct submit_job {
  rs_encoder e;
  SEXP pool, fn, args;
  rpool *rp;
  double timeout;
  const char *verb;
  SEXP out;
  suiro_task t;  /* suiro_run: the task sent and not yet collected (pending) */
  int pending;
} submit_job;

/* Sending into a full queue waits (a worker frees room), unless every result slot is taken by
 * tasks nobody collects yet: then FULL ends the wait. */
typedef struct submit_step {
  rpool *rp;
  const void *buf;
  size_t len;
  suiro_task *t;
  double gcs;
} submit_step;

static suiro_status step_submit(void *ctx, double slice) {
  submit_step *c = ctx;
  suiro_status st = suiro_submit(c->rp->p, SUIRO_FN_BINDING, c->buf, c->len, c->t, slice);
  if (st == SUIRO_FULL && !slots_exhausted(c->rp, &c->gcs)) return SUIRO_TIMEOUT;
  return st;
}

/* Encodes and sends the task; 0 once sent (*t is the task), else the early outcome in j->out. */
static int submit_send(submit_job *j, suiro_task *t) {
  rs_enc_prescan(&j->e, j->args);
  rs_write_task(&j->e, j->rp, j->fn, j->args, j->verb);
  const void *buf;
  size_t len;
  rs_encoder_finish(&j->e, &buf, &len);
  submit_step c = { j->rp, buf, len, t, 0 };
  suiro_status st = rs_wait(j->rp->p, j->timeout, step_submit, &c);
  /* not sent: the cleanup takes the grants back */
  if (st == SUIRO_TIMEOUT || st == SUIRO_FULL) return j->out = rs_sentinel("full"), 1;
  if (st != SUIRO_OK) return j->out = rs_outcome(st, j->verb), 1;
  rs_encoder_sent(&j->e); /* the task's message owns its grants now */
  return 0;
}

static SEXP submit_run(void *p) {
  submit_job *j = p;
  suiro_task t;
  if (submit_send(j, &t)) return j->out;
  j->out = task_new(j->pool, j->rp, t);
  return j->out;
}

static void submit_clean(void *p) {
  submit_job *j = p;
  if (j->pending && j->rp->p) { /* suiro_run left early (an interrupt, a timeout): nobody collects it */
    suiro_cancel(j->rp->p, j->t);
    suiro_task_release(j->rp->p, j->t);
  }
  rs_encoder_cleanup(&j->e);
}

/* suiro_run: submit and collect in one call, with no task object in between (the round trip
 * costs one .Call); one timeout covers the wait for room and the wait for the result. */
static SEXP run_run(void *p) {
  submit_job *j = p;
  double t0 = suiro_now();
  if (submit_send(j, &j->t)) return j->out;
  j->pending = 1;
  double left = j->timeout < 0 ? -1 : j->timeout - (suiro_now() - t0);
  suiro_result r;
  suiro_status st = rs_collect_sliced(j->rp->p, j->t, &r, left < 0 && j->timeout >= 0 ? 0 : left);
  if (st != SUIRO_OK) return rs_outcome(st, j->verb); /* the cleanup drops the task */
  j->pending = 0;
  return result_value(j->rp, &r);
}

static rs_enc_opts enc_opts_for(rpool *rp) {
  rs_enc_opts o;
  o.rich = rp->lang == WIRE_LANG_R;
  o.zc = suiro_zc_active();
  o.peer = rp->lang == WIRE_LANG_R ? "R workers" : rp->lang == WIRE_LANG_LUA ? "lua workers" : "python workers";
  return o;
}

SEXP C_submit(SEXP pool, SEXP fn, SEXP args, SEXP timeout) {
  submit_job j;
  j.rp = rs_pool_of(pool, "suiro_submit", 1);
  rs_enc_opts o = enc_opts_for(j.rp);
  j.pool = pool;
  j.fn = fn;
  j.args = args;
  j.verb = "suiro_submit";
  j.pending = 0;
  j.timeout = rs_timeout_arg(timeout, j.rp->timeout, "suiro_submit");
  rs_encoder_init(&j.e, &o);
  return R_ExecWithCleanup(submit_run, &j, submit_clean, &j);
}

SEXP C_run(SEXP pool, SEXP fn, SEXP args, SEXP timeout) {
  submit_job j;
  j.rp = rs_pool_of(pool, "suiro_run", 1);
  rs_enc_opts o = enc_opts_for(j.rp);
  j.pool = pool;
  j.fn = fn;
  j.args = args;
  j.verb = "suiro_run";
  j.pending = 0;
  j.timeout = rs_timeout_arg(timeout, j.rp->timeout, "suiro_run");
  rs_encoder_init(&j.e, &o);
  return R_ExecWithCleanup(run_run, &j, submit_clean, &j);
}

typedef struct batch_job {
  rs_encoder e;
  SEXP pool, fn, arglists;
  rpool *rp;
  double timeout;
  unsigned char *arena;
  size_t alen, acap;
  suiro_task_spec *specs; /* set once every message is encoded */
  suiro_task *ts;
  size_t n, accepted;
  int handed;             /* task objects made for the accepted ones */
  SEXP out;
  double gcs;             /* slots_exhausted's clock */
} batch_job;

/* Sends what the queue takes, then waits for room for the rest; FULL ends the wait when every
 * result slot is taken by tasks nobody collects yet (the rest would wait for collects). */
static suiro_status step_batch(void *ctx, double slice) {
  batch_job *j = ctx;
  size_t got = 0;
  suiro_status st = suiro_submit_batch(j->rp->p, j->specs + j->accepted, j->n - j->accepted, j->ts + j->accepted, &got,
                                       slice);
  j->accepted += got;
  if (st == SUIRO_TIMEOUT && j->accepted == j->n) return SUIRO_OK;
  if (st == SUIRO_FULL && !slots_exhausted(j->rp, &j->gcs)) return SUIRO_TIMEOUT;
  return st;
}

static SEXP batch_run(void *p) {
  batch_job *j = p;
  R_xlen_t n = XLENGTH(j->arglists);
  rs_enc_prescan(&j->e, j->arglists);
  size_t *offs = (size_t *)R_alloc((size_t)n + 1, sizeof *offs);
  char what[64];
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP a = VECTOR_ELT(j->arglists, i);
    if (TYPEOF(a) != VECSXP) Rf_error("suiro_submit_batch: args[[%.0f]] must be a list of arguments", (double)i + 1);
    snprintf(what, sizeof what, "suiro_submit_batch: args[[%.0f]]", (double)i + 1);
    wire_writer_reset(&j->e.m.w);
    j->e.depth = 0;
    rs_write_task(&j->e, j->rp, j->fn, a, what);
    const void *buf;
    size_t len;
    rs_encoder_finish(&j->e, &buf, &len);
    if (j->alen + len > j->acap) {
      size_t cap = j->acap ? j->acap * 2 : 4096;
      while (cap < j->alen + len) cap *= 2;
      unsigned char *na = realloc(j->arena, cap);
      if (!na) Rf_error("suiro_submit_batch: out of memory");
      j->arena = na;
      j->acap = cap;
    }
    memcpy(j->arena + j->alen, buf, len);
    offs[i] = j->alen;
    j->alen += len; /* lengths are multiples of 8: every buffer stays 8-aligned */
  }
  offs[n] = j->alen;
  j->specs = (suiro_task_spec *)R_alloc((size_t)n ? (size_t)n : 1, sizeof *j->specs);
  for (R_xlen_t i = 0; i < n; i++)
    j->specs[i] = (suiro_task_spec){ SUIRO_FN_BINDING, j->arena + offs[i], offs[i + 1] - offs[i] };
  j->ts = (suiro_task *)R_alloc((size_t)n ? (size_t)n : 1, sizeof *j->ts);
  j->n = (size_t)n;
  rs_encoder_sent(&j->e); /* from here the cleanup revokes message by message */
  if (j->n) rs_wait(j->rp->p, j->timeout, step_batch, j); /* the tasks accepted are what counts */
  j->out = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)j->accepted));
  for (size_t i = 0; i < j->accepted; i++) SET_VECTOR_ELT(j->out, (R_xlen_t)i, task_new(j->pool, j->rp, j->ts[i]));
  j->handed = 1;
  SEXP nm = Rf_getAttrib(j->arglists, R_NamesSymbol);
  if (nm != R_NilValue) {
    SEXP onm = PROTECT(Rf_allocVector(STRSXP, (R_xlen_t)j->accepted));
    for (size_t i = 0; i < j->accepted; i++) SET_STRING_ELT(onm, (R_xlen_t)i, STRING_ELT(nm, (R_xlen_t)i));
    Rf_setAttrib(j->out, R_NamesSymbol, onm);
    UNPROTECT(1);
  }
  UNPROTECT(1);
  return j->out; /* shorter than the input when the ring stayed full */
}

static void batch_clean(void *p) {
  batch_job *j = p;
  if (j->specs) {
    for (size_t i = j->accepted; i < j->n; i++) suiro_zc_revoke(j->specs[i].arg, j->specs[i].len);
    if (!j->handed) /* interrupted before the handles were made: nobody will collect these */
      for (size_t i = 0; i < j->accepted; i++) suiro_task_release(j->rp->p, j->ts[i]);
  }
  rs_encoder_cleanup(&j->e);
  free(j->arena);
}

SEXP C_submit_batch(SEXP pool, SEXP fn, SEXP arglists, SEXP timeout) {
  batch_job j;
  memset(&j, 0, sizeof j);
  j.rp = rs_pool_of(pool, "suiro_submit_batch", 1);
  if (TYPEOF(arglists) != VECSXP) Rf_error("suiro_submit_batch: argument 3 must be a list of argument lists");
  rs_enc_opts o = enc_opts_for(j.rp);
  j.pool = pool;
  j.fn = fn;
  j.arglists = arglists;
  j.timeout = rs_timeout_arg(timeout, j.rp->timeout, "suiro_submit_batch");
  rs_encoder_init(&j.e, &o);
  return R_ExecWithCleanup(batch_run, &j, batch_clean, &j);
}

SEXP C_pool_info(SEXP pool) { return R_ExternalPtrProtected(pool); }

SEXP C_pool_addr(SEXP pool) { return Rf_ScalarReal((double)(uintptr_t)R_ExternalPtrAddr(pool)); }

/* For tests: whether this process still has a live pool (its large values go to regions). */
SEXP C_zc_active(void) { return Rf_ScalarLogical(suiro_zc_active()); }

SEXP C_now(void) { return Rf_ScalarReal(suiro_now()); }
