/*
 * rasync.c — promises without polling: a watcher thread per pool sleeps on the pool's eventfd
 * (suiro_pool_eventfd) and, when results land, schedules one callback on R's main thread through
 * later's C entry point (the thread: rwatch.c, shared with rchan.c). The callback
 * acknowledges the event, finds every pending promise whose task or map is done in one pass over
 * the pool's pending list (here, in C) and hands just those to R (R/async.R:
 * .suiro_async_settle), which collects each and resolves or rejects its promise. A burst of
 * completions is one wake-up, and a wake-up costs one cheap readiness check per pending promise
 * plus the settling of the ready ones: 2,000 task promises settle in a few wake-ups.
 *
 * A promise registered for a task that is already done (or collected already, or whose pool
 * stopped) gets one "kick" callback (one per burst of registrations); otherwise the next event
 * settles it. When the pool stops, every pending promise is settled from a callback: collecting
 * then gives the closed sentinel, which R turns into a rejection.
 *
 * Threads and ownership (the watcher thread itself: rwatch.c):
 *   - The watcher thread (rwatch.c) only polls file descriptors and calls later; it never
 *     touches R, the engine's pool handle, or the rwatch here.
 *   - The main thread (callbacks, C_async_add, rs_async_stop) acknowledges events, owns the
 *     pending list (`pending`, `npending`, `kicked`), runs R code and frees.
 *   - Hand-over: after scheduling a callback the thread waits until on_results calls
 *     rs_watch_release, which it does after re-arming the pool's eventfd
 *     (suiro_pool_event_ack) and checking readiness, so a result that lands after the check
 *     writes the eventfd again: no completion is missed.
 *   - In a forked child the callbacks do nothing (watch_live): the thread and the fds are the
 *     parent's.
 *   - The rwatch here belongs to the pool: rs_async_stop stops the rs_watch (after which no
 *     callback of it calls in here) and frees the rwatch; the rs_watch is refcounted in rwatch.c.
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"
#include "rwatch.h"

/* Counters for the tests (main thread only): callbacks run, promises settled. */
static double n_wakeups, n_settled;

typedef struct rwatch {
  rs_watch *rw;      /* the thread on the pool's eventfd (owned by the engine) */
  rpool *rp;         /* main thread only */
  SEXP pending;      /* main thread only: VECSXP of entries (preserved), or NULL: list(x, resolve,
                        reject) for a task or map, list(tasks, resolve, reject, cursor, state) for
                        a batch (suiro_collect_async) */
  R_xlen_t npending; /* entries in use (the first ones) */
  int kicked;        /* a kick callback is scheduled */
} rwatch;

int rs_task_settled(SEXP x); /* rpool.c: 1 when collecting it now would not wait */
int rs_map_settled(SEXP x);  /* rmap.c: the same for a map */

static SEXP sym_done;

/* A batch entry (suiro_collect_async): tasks, resolve, reject, cursor (INTSXP: the tasks before it
 * are settled; each stays settled, so every task is checked once while the batch waits), state (an
 * environment: `done` is bound once the promise was settled, here or by R/async.R's timeout). */
static int is_batch(SEXP e) { return XLENGTH(e) == 5; }
static int batch_done(SEXP e) { return Rf_findVarInFrame(VECTOR_ELT(e, 4), sym_done) != R_UnboundValue; }
static int entry_gone(SEXP e) { return is_batch(e) && batch_done(e); }

/* 0: pending, 1: settles now, 2: a batch settled already (timed out): it just leaves the list. */
static int entry_settled(SEXP e) {
  SEXP x = VECTOR_ELT(e, 0);
  if (is_batch(e)) {
    if (batch_done(e)) return 2;
    int *cur = INTEGER(VECTOR_ELT(e, 3));
    R_xlen_t n = XLENGTH(x);
    while (*cur < n && rs_task_settled(VECTOR_ELT(x, *cur))) (*cur)++;
    return *cur == n;
  }
  return Rf_inherits(x, "suiro_map") ? rs_map_settled(x) : rs_task_settled(x);
}

/* An entry handed to R to settle: a batch is marked done first (its timeout then does nothing). */
static void entry_taken(SEXP e) {
  if (is_batch(e)) Rf_defineVar(sym_done, Rf_ScalarLogical(1), VECTOR_ELT(e, 4));
}

/* Hands a list of entries to R, which collects each and settles its promise. */
static void settle_entries(SEXP ready) {
  if (!XLENGTH(ready)) return;
  n_settled += (double)XLENGTH(ready);
  SEXP fn = PROTECT(rs_call_fn("suiro", ".suiro_async_settle"));
  SEXP call = PROTECT(Rf_lang2(fn, ready));
  int err = 0;
  R_tryEvalSilent(call, R_GlobalEnv, &err);
  UNPROTECT(2);
}

/* One pass over the pending list: the entries that settle now leave it (order kept). */
static void settle_ready(rwatch *w) {
  if (!w->pending || !w->npending) return;
  R_xlen_t n = w->npending, k = 0, gone = 0;
  char *flag = R_alloc((size_t)n, 1);
  for (R_xlen_t i = 0; i < n; i++) {
    flag[i] = (char)entry_settled(VECTOR_ELT(w->pending, i));
    k += flag[i] == 1;
    gone += flag[i] == 2;
  }
  if (!k && !gone) return;
  SEXP ready = PROTECT(Rf_allocVector(VECSXP, k));
  R_xlen_t r = 0, keep = 0;
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP e = VECTOR_ELT(w->pending, i);
    if (flag[i] == 1) {
      entry_taken(e);
      SET_VECTOR_ELT(ready, r++, e);
    } else if (!flag[i]) {
      SET_VECTOR_ELT(w->pending, keep++, e);
    }
  }
  for (R_xlen_t i = keep; i < n; i++) SET_VECTOR_ELT(w->pending, i, R_NilValue);
  w->npending = keep;
  settle_entries(ready);
  UNPROTECT(1);
}

/* The watch can act: its pool runs, and this process is the one that made it (in a forked child
 * the callbacks copied with later's queue must neither drain the parent's eventfd nor write the
 * parent's ack: the watcher thread is the parent's). */
static int watch_live(rwatch *w) {
  return w->rp && w->rp->p && !suiro_pool_inherited(w->rp->p);
}

static void on_results(void *p) { /* main thread, from later's loop: the eventfd fired */
  rwatch *w = p;
  if (watch_live(w)) {
    n_wakeups++;
    suiro_pool_event_ack(w->rp->p);
    const void *vmax = vmaxget();
    settle_ready(w);
    vmaxset(vmax);
    rs_watch_release(w->rw);
  }
}

static void on_kick(void *p) { /* main thread: promises registered for tasks already done */
  rwatch *w = p;
  w->kicked = 0;
  if (watch_live(w)) {
    n_wakeups++;
    const void *vmax = vmaxget();
    settle_ready(w);
    vmaxset(vmax);
  }
}

/* The promises pending when their pool stopped, settled from later's loop. */
typedef struct stopped_batch {
  SEXP list; /* preserved */
} stopped_batch;

static void on_stopped(void *p) {
  stopped_batch *b = p;
  n_wakeups++;
  settle_entries(b->list);
  R_ReleaseObject(b->list);
  free(b);
}

/* Starts the pool's watcher (once). */
static rwatch *watch_start(SEXP pool, const char *verb) {
  rpool *rp = rs_pool_of(pool, verb, 1);
  if (rp->watch) return rp->watch;
  if (!rp->owner) Rf_error("%s: promises need a host's pool (inside a worker, collect instead)", verb);
  rs_later_need(verb);
  rwatch *w = calloc(1, sizeof *w);
  if (!w) Rf_error("%s: out of memory", verb);
  w->rp = rp;
  w->rw = rs_watch_start(suiro_pool_eventfd(rp->p), on_results, w); /* arms it: results from now on write it */
  if (!w->rw) {
    free(w);
    Rf_error("%s: cannot start the event watcher", verb);
  }
  rp->watch = w;
  return w;
}

/* The entry of suiro_collect_async (x = list(tasks, timeout) of class suiro_async_batch): the
 * tasks are checked (each a suiro_task of pool), the timeout resolved like suiro_collect_all's.
 * *out gets list(state, seconds) for R/async.R (its timeout). */
static SEXP batch_entry(SEXP pool, SEXP x, SEXP *out) {
  const char *verb = "suiro_collect_async";
  SEXP tasks = VECTOR_ELT(x, 0);
  if (TYPEOF(tasks) != VECSXP) Rf_error("%s: tasks must be a list of tasks", verb);
  R_xlen_t n = XLENGTH(tasks);
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP t = VECTOR_ELT(tasks, i);
    if (TYPEOF(t) != EXTPTRSXP || !Rf_inherits(t, "suiro_task"))
      Rf_error("%s: tasks[[%.0f]] is not a suiro_task", verb, (double)i + 1);
    if (R_ExternalPtrProtected(t) != pool)
      Rf_error("%s: tasks[[%.0f]] belongs to another pool than tasks[[1]]", verb, (double)i + 1);
  }
  rpool *rp = rs_pool_of(pool, verb, 1);
  double secs = rs_timeout_arg(VECTOR_ELT(x, 1), rp->timeout, verb);
  if (!sym_done) sym_done = Rf_install("done");
  SEXP e = PROTECT(Rf_allocVector(VECSXP, 5));
  SET_VECTOR_ELT(e, 0, tasks);
  SET_VECTOR_ELT(e, 3, Rf_ScalarInteger(0));
  SEXP state = R_NewEnv(R_EmptyEnv, 0, 4);
  SET_VECTOR_ELT(e, 4, state);
  *out = Rf_allocVector(VECSXP, 2);
  SET_VECTOR_ELT(e, 1, *out); /* protected here until resolve takes the slot */
  SET_VECTOR_ELT(*out, 0, state);
  SET_VECTOR_ELT(*out, 1, Rf_ScalarReal(secs));
  UNPROTECT(1);
  return e;
}

/* .Call(C_async_add, pool, x, resolve, reject): x (a task or map of pool, or a batch of
 * suiro_collect_async) settles its promise through resolve/reject once it is done. Returns NULL,
 * or for a batch list(state, seconds). */
SEXP C_async_add(SEXP pool, SEXP x, SEXP resolve, SEXP reject) {
  int batch = TYPEOF(x) == VECSXP && Rf_inherits(x, "suiro_async_batch");
  const char *verb = batch ? "suiro_collect_async" : "as.promise";
  if (!Rf_isFunction(resolve) || !Rf_isFunction(reject)) Rf_error("%s: resolve and reject must be functions", verb);
  SEXP out = R_NilValue, e;
  if (batch) {
    e = PROTECT(batch_entry(pool, x, &out));
    PROTECT(out);
  } else {
    e = PROTECT(Rf_allocVector(VECSXP, 3));
    PROTECT(out);
    SET_VECTOR_ELT(e, 0, x);
  }
  rwatch *w = watch_start(pool, verb);
  SET_VECTOR_ELT(e, 1, resolve);
  SET_VECTOR_ELT(e, 2, reject);
  if (!w->pending || w->npending == XLENGTH(w->pending)) { /* grow by doubling: adds stay O(1) */
    R_xlen_t cap = w->pending ? 2 * XLENGTH(w->pending) : 16;
    SEXP np = PROTECT(Rf_allocVector(VECSXP, cap));
    for (R_xlen_t i = 0; i < w->npending; i++) SET_VECTOR_ELT(np, i, VECTOR_ELT(w->pending, i));
    R_PreserveObject(np);
    if (w->pending) R_ReleaseObject(w->pending);
    w->pending = np;
    UNPROTECT(1);
  }
  SET_VECTOR_ELT(w->pending, w->npending++, e);
  /* done already (before the watch was armed, or collected): no event will come for it */
  if (!w->kicked && entry_settled(e)) {
    w->kicked = 1;
    rs_watch_kick(w->rw, on_kick);
  }
  UNPROTECT(2);
  return out;
}

/* .Call(C_async_counts): callbacks run and promises settled so far (for the tests). */
SEXP C_async_counts(void) {
  SEXP v = PROTECT(Rf_allocVector(REALSXP, 2));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 2));
  REAL(v)[0] = n_wakeups;
  REAL(v)[1] = n_settled;
  SET_STRING_ELT(nm, 0, Rf_mkChar("wakeups"));
  SET_STRING_ELT(nm, 1, Rf_mkChar("settled"));
  Rf_setAttrib(v, R_NamesSymbol, nm);
  UNPROTECT(2);
  return v;
}

/* Called before the pool stops (main thread): the thread ends, and the promises still pending
 * settle from a callback (rejected: their pool stopped). */
void rs_async_stop(rpool *rp) {
  rwatch *w = rp->watch;
  if (!w) return;
  rp->watch = NULL;
  w->rp = NULL;
  rs_watch_stop(w->rw); /* no callback of it calls in here from now on */
  if (w->pending && w->npending) {
    stopped_batch *b = malloc(sizeof *b);
    R_xlen_t k = 0;
    for (R_xlen_t i = 0; i < w->npending; i++) k += !entry_gone(VECTOR_ELT(w->pending, i));
    SEXP list = PROTECT(Rf_allocVector(VECSXP, k));
    for (R_xlen_t i = 0, r = 0; i < w->npending; i++) {
      SEXP e = VECTOR_ELT(w->pending, i);
      if (entry_gone(e)) continue; /* timed out already */
      entry_taken(e);
      SET_VECTOR_ELT(list, r++, e);
    }
    w->npending = 0;
    if (b) {
      R_PreserveObject(list);
      b->list = list;
      rs_later(on_stopped, b, 0);
    }
    UNPROTECT(1);
  }
  if (w->pending) R_ReleaseObject(w->pending);
  free(w);
}
