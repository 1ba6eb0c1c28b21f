/*
 * rerror.c — an R worker's errors: the calling handler every task and map runner runs under
 * (worker_main installs it: it records the condition and sys.calls() of an error that reaches the
 * top; errors caught by the task's own tryCatch never get there), and rs_error_parts, which turns
 * the last one into the class, message and traceback of the task's ERROR payload.
 * The noted condition is this worker's one piece of state: R's main thread only, set by the
 * handler, read and cleared by rs_error_parts.
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

static SEXP noted_cond, noted_calls; /* from the error handler (preserved) */
static SEXP add_handler;              /* .Internal(.addCondHands("error", list(h), ...)) */
static SEXP note_handler;             /* h itself: function(e) note the condition and sys.calls() */

/* The calling handler for errors, established at the start of each task and map runner: R_ToplevelExec
 * starts with an empty handler stack (so a global handler would not be seen), and evaluating
 * .addCondHands directly (what withCallingHandlers does inside) costs a fraction of calling
 * withCallingHandlers itself. The entry lives until the top-level context ends. */
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
