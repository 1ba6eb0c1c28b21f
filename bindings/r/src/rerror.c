/*
 * rerror.c — an R worker's errors: the calling handler every task and map runner runs under
 * (worker_main installs it: it records the condition and sys.calls() of an error that reaches the
 * top; errors caught by the task's own tryCatch never get there), and rs_error_parts, which turns
 * the last one into the class, message and traceback of the task's ERROR payload.
 * The noted condition is this worker's one piece of state: R's main thread only, set by the
 * handler, read and cleared by rs_error_parts.
 *
 * Relaying (R hosts only, docs/r.md "Conditions"): while a task or a map element from an R
 * process runs, a calling handler for every condition (rs_relay_on) records the warnings,
 * messages and other conditions that reach the top of the task, muffling warnings and messages
 * (so the worker no longer prints them); the task's result, or the element's map note, carries
 * them (rs_put_relay: FUNC(R) "suiro::relay" [value or error condition, list of conditions]) and
 * the host signals them again when it collects the result. Errors are left to the error handler.
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

static SEXP noted_cond, noted_calls; /* from the error handler (preserved) */
static SEXP add_handler;              /* .Internal(.addCondHands("error", list(h), ...)) */
static SEXP note_handler;             /* h itself: function(e) note the condition and sys.calls() */
static SEXP add_relay;                /* .Internal(.addCondHands("condition", list(relay handler), ...)) */
static SEXP relayed;                  /* the conditions recorded so far (preserved VECSXP), relay_n used */
static R_xlen_t relay_n, relay_dropped;
#define RS_RELAY_MAX 1000             /* per task or element; beyond, a count of what was dropped */

/* The calling handler for errors, established at the start of each map runner and nested task
 * (rs_worker_handle_errors, rs_on_task_error; the tasks at the worker loop's top see the loop's,
 * rworker.c): R_ToplevelExec starts with an empty handler stack (so a global handler would not be
 * seen), and evaluating .addCondHands directly (what withCallingHandlers does inside) costs a
 * fraction of calling withCallingHandlers itself. The entry lives until the top-level context
 * ends. */
SEXP C_worker_set_handler(SEXP h) {
  SEXP hl = PROTECT(Rf_allocVector(VECSXP, 1));
  SET_VECTOR_ELT(hl, 0, h);
  SEXP inner = PROTECT(Rf_lang6(Rf_install(".addCondHands"), Rf_mkString("error"), hl, R_GlobalEnv, R_NilValue,
                                Rf_ScalarLogical(1)));
  add_handler = Rf_lang2(Rf_install(".Internal"), inner);
  R_PreserveObject(add_handler);
  note_handler = h;
  R_PreserveObject(note_handler);
  UNPROTECT(2);
  return R_NilValue;
}

static void make_relay_global(SEXP h);
static SEXP add_cond_hands_call(SEXP h);

/* The relay handler (R/worker.R relay_handler) as an .addCondHands call, made once (and the loop's
 * flagged copy of it). */
/* .Internal(.addCondHands("condition", list(h), globalenv(), NULL, TRUE)), preserved: evaluated, it
 * establishes h as a calling handler of every condition until the enclosing handler scope ends. */
static SEXP add_cond_hands_call(SEXP h) {
  SEXP hl = PROTECT(Rf_allocVector(VECSXP, 1));
  SET_VECTOR_ELT(hl, 0, h);
  SEXP inner = PROTECT(Rf_lang6(Rf_install(".addCondHands"), Rf_mkString("condition"), hl, R_GlobalEnv, R_NilValue,
                                Rf_ScalarLogical(1)));
  SEXP call = Rf_lang2(Rf_install(".Internal"), inner);
  R_PreserveObject(call);
  UNPROTECT(2);
  return call;
}

SEXP C_worker_set_relay(SEXP h) {
  add_relay = add_cond_hands_call(h);
  make_relay_global(h);
  return R_NilValue;
}

/* The relay handler for the whole worker loop (rworker.c's fast path: tasks at the loop's top run
 * without a top-level context of their own, so handlers established once are seen): the same
 * handler behind a flag, function(cond) if (relaying[1L]) h(cond), so that it records only while
 * a task from an R process runs (rs_relay_global_set), and conditions elsewhere keep R's default
 * handling (printed by the worker, as without a relay). */
static SEXP add_relay_global;
static SEXP relay_flag; /* LGLSXP 1, "relaying" in the wrapper's environment */

static void make_relay_global(SEXP h) {
  relay_flag = Rf_allocVector(LGLSXP, 1);
  R_PreserveObject(relay_flag);
  LOGICAL(relay_flag)[0] = 0;
  SEXP env = PROTECT(R_NewEnv(R_BaseEnv, FALSE, 0));
  Rf_defineVar(Rf_install("relaying"), relay_flag, env);
  Rf_defineVar(Rf_install("h"), h, env);
  SEXP wrap = PROTECT(R_ParseEvalString("function(cond) if (relaying[1L]) h(cond)", env));
  add_relay_global = add_cond_hands_call(wrap);
  UNPROTECT(2);
}

/* Establishes the loop's relay handler until the enclosing handler scope ends (rworker.c). */
void rs_relay_global_push(void) {
  if (add_relay_global) Rf_eval(add_relay_global, R_GlobalEnv);
}

/* The loop's relay handler records (1) or lets conditions by (0). */
void rs_relay_global_set(int on) {
  if (relay_flag) LOGICAL(relay_flag)[0] = on != 0;
}

SEXP C_worker_note_condition(SEXP cond);

void rs_relay_clear(void) {
  for (R_xlen_t i = 0; i < relay_n; i++) SET_VECTOR_ELT(relayed, i, R_NilValue);
  relay_n = relay_dropped = 0;
}

/* From here to the end of the current top-level context (the task or the map runner), conditions
 * are recorded for the host. */
void rs_relay_on(void) {
  rs_relay_clear();
  if (add_relay) Rf_eval(add_relay, R_GlobalEnv);
}

/* What a task waiting on a nested result had recorded (R_NilValue: nothing), and back. */
SEXP rs_relay_save(void) {
  if (!relay_n && !relay_dropped) return R_NilValue;
  SEXP v = PROTECT(Rf_allocVector(VECSXP, relay_n + 1));
  for (R_xlen_t i = 0; i < relay_n; i++) SET_VECTOR_ELT(v, i, VECTOR_ELT(relayed, i));
  SET_VECTOR_ELT(v, relay_n, Rf_ScalarReal((double)relay_dropped));
  rs_relay_clear();
  UNPROTECT(1);
  return v;
}

void rs_relay_restore(SEXP v) {
  rs_relay_clear();
  if (v == R_NilValue) return;
  R_xlen_t n = XLENGTH(v) - 1;
  for (R_xlen_t i = 0; i < n; i++) C_worker_note_condition(VECTOR_ELT(v, i));
  relay_dropped = (R_xlen_t)REAL(VECTOR_ELT(v, n))[0];
}

R_xlen_t rs_relay_count(void) { return relay_n + (relay_dropped > 0); }

SEXP C_worker_note_condition(SEXP cond) {
  if (relay_n >= RS_RELAY_MAX) {
    relay_dropped++;
    return R_NilValue;
  }
  if (!relayed || relay_n == XLENGTH(relayed)) {
    R_xlen_t cap = relayed ? XLENGTH(relayed) * 2 : 8;
    SEXP nv = PROTECT(Rf_allocVector(VECSXP, cap));
    for (R_xlen_t i = 0; i < relay_n; i++) SET_VECTOR_ELT(nv, i, VECTOR_ELT(relayed, i));
    if (relayed) R_ReleaseObject(relayed);
    R_PreserveObject(nv);
    relayed = nv;
    UNPROTECT(1);
  }
  SET_VECTOR_ELT(relayed, relay_n++, cond);
  return R_NilValue;
}

/* The recorded conditions as a list (a warning says how many were dropped beyond the limit); clears
 * the record. */
static SEXP relay_take(void) {
  R_xlen_t n = relay_n;
  SEXP v = PROTECT(Rf_allocVector(VECSXP, n + (relay_dropped > 0)));
  for (R_xlen_t i = 0; i < n; i++) SET_VECTOR_ELT(v, i, VECTOR_ELT(relayed, i));
  if (relay_dropped) {
    SEXP fn = PROTECT(rs_call_fn("suiro", "relay_dropped"));
    SEXP call = PROTECT(Rf_lang2(fn, Rf_ScalarReal((double)relay_dropped)));
    SET_VECTOR_ELT(v, n, Rf_eval(call, R_GlobalEnv));
    UNPROTECT(2);
  }
  rs_relay_clear();
  UNPROTECT(1);
  return v;
}

/* Writes FUNC(R, key 0, n 3) "suiro::relay" [value, list of the recorded conditions] (clears the
 * record). May signal an R error (the encoder's). */
void rs_put_relay(rs_encoder *e, SEXP value) {
  SEXP conds = PROTECT(relay_take());
  rs_enc_relay(e, value, conds, "result");
  UNPROTECT(1);
}

/* The error condition of the last top-level error, made fit to travel (R/worker.R relay_condition),
 * or R_NilValue. Call before rs_error_parts (which clears it). */
SEXP rs_error_cond(void) {
  if (!noted_cond) return R_NilValue;
  SEXP fn = PROTECT(rs_call_fn("suiro", "relay_condition"));
  SEXP call = PROTECT(Rf_lang2(fn, noted_cond));
  int err = 0;
  SEXP c = R_tryEvalSilent(call, R_GlobalEnv, &err);
  UNPROTECT(2);
  return err ? R_NilValue : c;
}

void rs_worker_handle_errors(void) {
  if (add_handler) Rf_eval(add_handler, R_GlobalEnv);
}

/* The same handler for one task through R's C entry (R >= 4.1): it pushes the handler entry
 * without evaluating the .addCondHands call and its arguments, a third of a trivial task's cost
 * in the worker. The R handler still runs (on errors only) for the condition and the calls. */
SEXP rs_on_task_error(SEXP cond, void *unused) {
  (void)unused;
  if (note_handler) { /* called as h(e), a frame error_parts knows to leave out of the traceback */
    SEXP env = PROTECT(R_NewEnv(R_GlobalEnv, FALSE, 0));
    SEXP sym_e = Rf_install("e");
    Rf_defineVar(sym_e, cond, env);
    SEXP call = PROTECT(Rf_lang2(note_handler, sym_e));
    Rf_eval(call, env);
    UNPROTECT(2);
  }
  return R_NilValue; /* on to the default handling: the top-level exec ends with an error */
}

SEXP C_worker_note_error(SEXP cond, SEXP calls) {
  if (noted_cond) R_ReleaseObject(noted_cond);
  if (noted_calls) R_ReleaseObject(noted_calls);
  R_PreserveObject(cond);
  R_PreserveObject(calls);
  noted_cond = cond;
  noted_calls = calls;
  return R_NilValue;
}

static void note_clear(void) {
  if (noted_cond) R_ReleaseObject(noted_cond);
  if (noted_calls) R_ReleaseObject(noted_calls);
  noted_cond = noted_calls = NULL;
}

/* The failure of the last top-level error: class, message, traceback (malloc'd: the caller frees
 * them). Used by the task executor (rworker.c) and map runners (rmap.c). */
void rs_error_parts(char **cls, char **msg, char **tb) {
  *cls = *msg = *tb = NULL;
  if (noted_cond) {
    SEXP fn = PROTECT(rs_call_fn("suiro", "error_parts"));
    SEXP call = PROTECT(Rf_lang3(fn, noted_cond, noted_calls ? noted_calls : R_NilValue));
    SEXP parts = NULL;
    int err = 0;
    parts = R_tryEvalSilent(call, R_GlobalEnv, &err);
    if (!err && TYPEOF(parts) == STRSXP && XLENGTH(parts) == 3) {
      *cls = strdup(Rf_translateCharUTF8(STRING_ELT(parts, 0)));
      *msg = strdup(Rf_translateCharUTF8(STRING_ELT(parts, 1)));
      *tb = strdup(Rf_translateCharUTF8(STRING_ELT(parts, 2)));
    }
    UNPROTECT(2);
  }
  if (!*msg) {
    const char *b = R_curErrorBuf();
    if (!strncmp(b, "Error", 5)) { /* "Error in f(): msg\n" or "Error: msg\n" */
      const char *c = strstr(b, ": ");
      if (c) b = c + 2;
    }
    *msg = strdup(b);
    size_t l = strlen(*msg);
    while (l && (*msg)[l - 1] == '\n') (*msg)[--l] = 0;
    *cls = strdup("error");
    *tb = strdup("");
  }
  note_clear();
}
