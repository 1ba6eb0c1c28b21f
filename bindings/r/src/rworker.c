/*
 * rworker.c — the R worker: runs tasks from R hosts (and call specs from anyone).
 *
 * `Rscript --vanilla --default-packages=NULL -e 'suiro:::worker_main()' --suiro-worker TOKEN`
 * enters C_worker_run, which registers the executor and hands the process to the engine
 * (suiro_worker_run) until the pool stops. Tasks run on R's main thread, each caught at its own
 * frame (r_protect) so that an R error never unwinds through the engine: it becomes the task's
 * ERROR payload (class, message, traceback), read by rerror.c's handler (the condition and the
 * call stack of errors that reach the top; a task that succeeds pays nothing for it). The error
 * and relay handlers are established once around the loop; a task run while another waits on a
 * nested result runs isolated under R_ToplevelExec with handlers of its own.
 *
 * A task is LIST [function, args...] (suiro_bind.h section 1); the function item is FUNC(R)
 * (rfunc.c: code by key, environment, argument names), a "pkg::fn" STR, or a CALL spec (a name,
 * or source text evaluated with the named arguments as variables and the positional ones as
 * `...`). Code fetched by key is cached for the worker's life.
 * The engine reads the task (suiro_exec, engine/src/exec.c: the list, the function item, the
 * protocol's refusals, the cache of names and code keys); this file keeps the callbacks that need
 * R, all run inside one protected body per task (r_protect).
 *
 * Results are encoded rich (every R object crosses) when the task came from R (a FUNC(R) item,
 * or an R host: SUIRO_HOST_LANG=r), and strictly (the portable mapping) otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <setjmp.h>

#include "rsuiro.h"

#include <R_ext/Parse.h>

int rs_in_worker;
void rs_views_after_task(void); /* rview.c */
static int host_is_r;
static const char *host_origin = "the host"; /* for messages: "the lua host", ... */

const char *rs_task_foreign(void) {
  if (host_is_r || suiro_task_origin() >= 0) return NULL; /* an R host, or a sibling R worker */
  return host_origin;
}
static SEXP sym_quote, sym_brace, sym_dots;

SEXP rs_resolve_fn(const char *name, size_t len);
SEXP rs_mkclosure(SEXP formals, SEXP body, SEXP env);

/* ---- the code cache: exec.c keeps key -> closure (with the global environment) or expression -- */

static suiro_exec_cache code_cache; /* this worker's (names and code keys) */
static const suiro_exec_ops r_ops;

static SEXP code_get(uint64_t key) {
  void *fn;
  char err[400];
  if (suiro_exec_code(&r_ops, NULL, key, &fn, err, sizeof err) != 1) Rf_error("%s", err);
  return (SEXP)fn;
}

/* ---- environments and calls --------------------------------------------------------------------- */

static SEXP ns_env(SEXP name) {
  if (!strcmp(CHAR(name), "base")) return R_BaseNamespace;
  return R_FindNamespace(Rf_ScalarString(name));
}

/* The environment a FUNC(R) item's child 2 describes (decoding the captured variables). */
static SEXP read_env(rs_decoder *d) {
  wire_item it;
  rs_dec_next(d, &it);
  if (it.tag == WIRE_NIL) return R_GlobalEnv;
  if (it.tag == WIRE_STR) {
    SEXP nm = PROTECT(rs_mkstr_utf8(it.data, (size_t)it.n, "namespace"));
    SEXP env = ns_env(nm);
    UNPROTECT(1);
    return env;
  }
  if (it.tag != WIRE_LIST || it.n != 2) Rf_error("malformed task: a function's environment");
  rs_dec_count_container(d);
  SEXP parent = PROTECT(rs_dec_next_value(d));
  SEXP vars = PROTECT(rs_dec_next_value(d));
  SEXP penv = TYPEOF(parent) == STRSXP ? ns_env(STRING_ELT(parent, 0)) : R_GlobalEnv;
  SEXP env = PROTECT(R_NewEnv(penv, TRUE, 29));
  SEXP nm = Rf_getAttrib(vars, R_NamesSymbol);
  if (TYPEOF(vars) != VECSXP || TYPEOF(nm) != STRSXP || XLENGTH(nm) != XLENGTH(vars))
    Rf_error("malformed task: a function's captured variables need names");
  for (R_xlen_t i = 0; i < XLENGTH(vars); i++) Rf_defineVar(Rf_installTrChar(STRING_ELT(nm, i)), VECTOR_ELT(vars, i), env);
  UNPROTECT(3);
  return env;
}

static SEXP quoted(SEXP v) {
  int t = TYPEOF(v);
  if (t == LANGSXP || t == SYMSXP || t == PROMSXP || t == DOTSXP) return Rf_lang2(sym_quote, v);
  return v;
}

/* f(args...) with names; args is a VECSXP, names a STRSXP or R_NilValue. */
static SEXP call_with(SEXP f, SEXP args, SEXP names, SEXP extra_named) {
  R_xlen_t n = XLENGTH(args), nn = extra_named == R_NilValue ? 0 : XLENGTH(extra_named);
  SEXP call = PROTECT(Rf_allocVector(LANGSXP, n + nn + 1));
  SETCAR(call, f);
  SEXP c = CDR(call);
  for (R_xlen_t i = 0; i < n; i++, c = CDR(c)) {
    SETCAR(c, quoted(VECTOR_ELT(args, i)));
    if (names != R_NilValue && i < XLENGTH(names) && CHAR(STRING_ELT(names, i))[0])
      SET_TAG(c, Rf_installTrChar(STRING_ELT(names, i)));
  }
  SEXP enm = nn ? Rf_getAttrib(extra_named, R_NamesSymbol) : R_NilValue;
  for (R_xlen_t i = 0; i < nn; i++, c = CDR(c)) {
    SETCAR(c, quoted(VECTOR_ELT(extra_named, i)));
    SET_TAG(c, Rf_installTrChar(STRING_ELT(enm, i)));
  }
  SEXP r = Rf_eval(call, R_GlobalEnv);
  UNPROTECT(1);
  return r;
}

static SEXP eval_expr(SEXP expr, SEXP env) {
  if (TYPEOF(expr) == EXPRSXP) {
    SEXP r = R_NilValue;
    for (R_xlen_t i = 0; i < XLENGTH(expr); i++) r = Rf_eval(VECTOR_ELT(expr, i), env);
    return r;
  }
  return Rf_eval(expr, env);
}

/* Source text of a call spec, parsed once into `function(...) { exprs }` (its environment is set
 * per call). */
static SEXP sources;

static SEXP source_fn(SEXP src) {
  if (!sources) {
    sources = R_NewEnv(R_EmptyEnv, TRUE, 29);
    R_PreserveObject(sources);
  }
  SEXP sym = Rf_installTrChar(STRING_ELT(src, 0));
  SEXP f = Rf_findVarInFrame3(sources, sym, TRUE);
  if (f != R_UnboundValue) return f;
  ParseStatus st;
  SEXP exprs = PROTECT(R_ParseVector(src, -1, &st, R_NilValue));
  if (st != PARSE_OK) Rf_error("cannot parse the call's source (R syntax error)");
  SEXP body = PROTECT(Rf_allocVector(LANGSXP, XLENGTH(exprs) + 1));
  SETCAR(body, sym_brace);
  SEXP c = CDR(body);
  for (R_xlen_t i = 0; i < XLENGTH(exprs); i++, c = CDR(c)) SETCAR(c, VECTOR_ELT(exprs, i));
  SEXP formals = PROTECT(Rf_cons(R_MissingArg, R_NilValue));
  SET_TAG(formals, sym_dots);
  f = PROTECT(rs_mkclosure(formals, body, R_GlobalEnv));
  Rf_defineVar(sym, f, sources);
  UNPROTECT(4);
  return f;
}

/* Runs a decoded call spec (suiro_call object). */
static SEXP run_call_spec(SEXP spec) {
  SEXP target = VECTOR_ELT(spec, 0), source = VECTOR_ELT(spec, 1);
  SEXP args = VECTOR_ELT(spec, 2), named = VECTOR_ELT(spec, 3);
  if (TYPEOF(source) == STRSXP) {
    SEXP tmpl = source_fn(source);
    SEXP env = PROTECT(R_NewEnv(R_GlobalEnv, TRUE, 29));
    SEXP nm = Rf_getAttrib(named, R_NamesSymbol);
    for (R_xlen_t i = 0; i < XLENGTH(named); i++) Rf_defineVar(Rf_installTrChar(STRING_ELT(nm, i)), VECTOR_ELT(named, i), env);
    SEXP f = PROTECT(rs_mkclosure(FORMALS(tmpl), BODY(tmpl), env));
    SEXP r = call_with(f, args, R_NilValue, R_NilValue);
    UNPROTECT(2);
    return r;
  }
  const char *t = CHAR(STRING_ELT(target, 0));
  SEXP f = PROTECT(rs_resolve_fn(t, strlen(t)));
  SEXP r = call_with(f, args, R_NilValue, named);
  UNPROTECT(1);
  return r;
}

/* ---- the function of a task or a map --------------------------------------------------------- */

/* Reads the children of a FUNC(R) item f (already read): the function or expression to run, and
 * the argument names (child 3). A closure gets its copied environment. */
static SEXP func_r(rs_decoder *d, wire_item *f, SEXP *names) {
  rs_dec_count_container(d);
  wire_item nmi;
  rs_dec_next(d, &nmi);
  SEXP obj;
  if (f->i == 0) {
    if (nmi.tag != WIRE_STR) Rf_error("malformed task: a function by name without its name");
    obj = rs_resolve_fn(nmi.data, (size_t)nmi.n);
  } else {
    obj = code_get((uint64_t)f->i);
  }
  PROTECT(obj);
  SEXP env = PROTECT(read_env(d));
  *names = rs_dec_next_value(d);
  PROTECT(*names);
  if (TYPEOF(obj) == CLOSXP && env != R_GlobalEnv) obj = rs_mkclosure(FORMALS(obj), BODY(obj), env);
  else if ((TYPEOF(obj) == LANGSXP || TYPEOF(obj) == SYMSXP || TYPEOF(obj) == EXPRSXP) && env != R_GlobalEnv) {
    /* an expression is evaluated in a child of its environment: keep it next to it */
    SEXP pair = PROTECT(Rf_allocVector(VECSXP, 2));
    SET_VECTOR_ELT(pair, 0, obj);
    SET_VECTOR_ELT(pair, 1, env);
    obj = pair;
    UNPROTECT(1);
  }
  UNPROTECT(3);
  return obj;
}

SEXP rs_runner_function(rs_decoder *d, wire_item *f, SEXP *names, int *rich) {
  *names = R_NilValue;
  if (f->tag == WIRE_FUNC && f->flag == WIRE_LANG_R && d->o.foreign)
    Rf_error("a map from %s cannot carry an R function: R code is accepted only from R processes of the pool family "
             "(send a \"pkg::fn\" name)", d->o.foreign);
  if (f->tag == WIRE_FUNC && f->flag == WIRE_LANG_R && f->n == 3) {
    *rich = 1;
    SEXP fn = func_r(d, f, names);
    int t = TYPEOF(fn);
    if (t != CLOSXP && t != BUILTINSXP && t != SPECIALSXP) Rf_error("a map's function must be a function");
    return fn;
  }
  *rich = host_is_r;
  if (f->tag == WIRE_STR) return rs_resolve_fn(f->data, (size_t)f->n);
  if (f->tag == WIRE_FUNC)
    Rf_error("a %s function cannot run on R workers", f->flag == WIRE_LANG_LUA ? "lua" : f->flag == WIRE_LANG_PYTHON ? "python" : "foreign");
  Rf_error("malformed map: expected a function, got %s", wire_tag_name(f->tag));
}

/* ---- the callbacks of suiro_exec (suiro_face.h section 2): the engine reads the task ----------- */

typedef struct task_job {
  rs_encoder *e;
} task_job;

typedef struct r_body {
  int (*body)(void *ctx);
  void *ctx;
  int rc;
} r_body;

static SEXP r_body_run(void *p) {
  r_body *b = p;
  b->rc = b->body(b->ctx);
  return R_NilValue;
}

static void r_body_handled(void *p) { R_withCallingErrorHandler(r_body_run, p, rs_on_task_error, NULL); }

/* The fast path: a task at the loop's top (exec depth 1) runs under R_UnwindProtect, whose cleanup
 * catches a jump (an error or an interrupt heading for R's top level) by leaving for the setjmp
 * below instead of continuing the unwind: R has run the task's on.exit code and restored its
 * globals (contexts, protect stack, handler stack) to the unwind context's, which are this
 * frame's. Unlike R_ToplevelExec it keeps the handler stack, so the error and relay handlers
 * are established once for the whole loop (C_worker_run) rather than per task (about 3,500 of a
 * trivial task's 7,800 instructions). A task run while another waits on a nested result (depth
 * > 1) takes the isolated path, R_ToplevelExec and its own handlers: the waiting task's handlers
 * (its withCallingHandlers, say) must not see another task's conditions. */
static int depth;   /* exec() nesting */
static int fast;    /* the loop's handlers are established */
static SEXP unwind_cont;

static void unwind_caught(void *jb, Rboolean jump) {
  if (jump) siglongjmp(*(sigjmp_buf *)jb, 1);
}

static int fast_path(void) { return fast && depth == 1; }

/* One protected body per task: an R error never unwinds through the engine. */
static int r_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  (void)ud;
  r_body b = { body, ctx, -1 };
  if (fast_path()) {
    sigjmp_buf jb;
    if (sigsetjmp(jb, 0)) {
      rs_relay_global_set(0);
      SETCAR(unwind_cont, R_NilValue); /* the value the jump carried */
      return -1;
    }
    R_UnwindProtect(r_body_run, &b, unwind_caught, &jb, unwind_cont);
    rs_relay_global_set(0);
    SETCAR(unwind_cont, R_NilValue); /* the result, no longer held */
    return b.rc;
  }
  if (!R_ToplevelExec(r_body_handled, &b)) return -1;
  return b.rc;
}

static int r_by_name(void *ud, suiro_wire_str name, void **fn) {
  (void)ud;
  SEXP rf = PROTECT(rs_call_fn("suiro", "resolve_function"));
  SEXP nm = PROTECT(Rf_ScalarString(PROTECT(rs_mkstr_utf8(name.ptr, name.len, "function name"))));
  SEXP call = PROTECT(Rf_lang3(rf, nm, Rf_ScalarLogical(0)));
  SEXP f = Rf_eval(call, R_GlobalEnv);
  int found = f != R_NilValue;
  if (found) {
    R_PreserveObject(f); /* the engine's cache holds it for the worker's life */
    *fn = f;
  }
  UNPROTECT(4);
  return found;
}

static SEXP unserialize_body(void *raw) { return rs_unserialize((SEXP)raw); }
static SEXP unserialize_failed(SEXP cond, void *flag) {
  (void)cond;
  *(int *)flag = 1;
  return R_NilValue;
}

static int r_by_code(void *ud, uint64_t key, const void *code, size_t len, void **fn) {
  (void)ud;
  (void)key;
  const char *foreign = rs_task_foreign();
  if (foreign) /* refused before the bytes are unserialized */
    Rf_error("a task from %s cannot carry an R function: R code is accepted only from R processes of the pool "
             "family (send a \"pkg::fn\" name or a call spec)", foreign);
  SEXP raw = PROTECT(Rf_allocVector(RAWSXP, (R_xlen_t)len));
  memcpy(RAW(raw), code, len);
  int damaged = 0;
  SEXP obj = PROTECT(R_tryCatchError(unserialize_body, raw, unserialize_failed, &damaged));
  if (!damaged) {
    R_PreserveObject(obj);
    *fn = obj;
  }
  UNPROTECT(2);
  return !damaged;
}

static int task_rich; /* the running task answers an R process: its conditions are relayed */

static void relay_start(int rich) {
  task_rich = rich;
  if (fast_path()) {
    if (rich) rs_relay_clear();
    rs_relay_global_set(rich); /* the loop's handler records until r_protect returns */
  } else if (rich) {
    rs_relay_on();
  }
}

static void result_out(rs_encoder *e, SEXP result, int rich, suiro_out *out) {
  e->o.rich = rich;
  e->o.peer = rich ? "R" : "a host of another language";
  wire_put_list(&e->m.w, 1);
  rs_enc_prescan(e, result);
  if (rich && rs_relay_count()) rs_put_relay(e, result); /* the value with the conditions it signalled */
  else rs_enc_value(e, result, "result");
  const void *buf;
  size_t blen;
  if (wire_writer_finish(&e->m.w, &buf, &blen) != WIRE_OK)
    suiro_out_error(out, "cannot encode the result: %s", wire_writer_error(&e->m.w));
  else if (suiro_out_write(out, buf, blen) == 0)
    rs_encoder_sent(e);
  else
    suiro_out_error(out, "out of memory for the result");
}

static int r_run(void *ud, void *fnp, const suiro_wire_item *fi, suiro_wire_reader *r, uint64_t nargs, suiro_out *out) {
  task_job *j = ud;
  rs_dec_opts o = { 0, NULL, "task", suiro_current_pool(), rs_task_foreign() };
  rs_decoder dd, *d = &dd;
  rs_decoder_init_at(d, r, &o);
  rs_dec_count_container(d); /* the task list */
  wire_item f = *fi;
  SEXP result;
  int rich = host_is_r;
  if (f.tag == WIRE_FUNC) {
    if (d->o.foreign)
      Rf_error("a task from %s cannot carry an R function: R code is accepted only from R processes of the pool "
               "family (send a \"pkg::fn\" name or a call spec)", d->o.foreign);
    if (f.n != 3) Rf_error("malformed task: an R function item has %d children, not 3", (int)f.n);
    rich = 1;
    relay_start(1);
    SEXP names;
    SEXP obj = PROTECT(func_r(d, &f, &names));
    PROTECT(names);
    SEXP args = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)nargs));
    for (uint64_t i = 0; i < nargs; i++) SET_VECTOR_ELT(args, (R_xlen_t)i, rs_dec_next_value(d));
    SEXP env = R_GlobalEnv;
    if (TYPEOF(obj) == VECSXP) { /* an expression with its environment */
      env = VECTOR_ELT(obj, 1);
      obj = VECTOR_ELT(obj, 0);
    }
    int t = TYPEOF(obj);
    if (t == LANGSXP || t == SYMSXP || t == EXPRSXP) {
      SEXP ev = PROTECT(R_NewEnv(env, TRUE, 29));
      if (XLENGTH(args) && TYPEOF(names) != STRSXP) Rf_error("malformed task: an expression's arguments need names");
      for (R_xlen_t i = 0; i < XLENGTH(args); i++) Rf_defineVar(Rf_installTrChar(STRING_ELT(names, i)), VECTOR_ELT(args, i), ev);
      result = eval_expr(obj, ev);
      UNPROTECT(1);
    } else {
      result = call_with(obj, args, names, R_NilValue);
    }
    UNPROTECT(3);
  } else { /* STR: the engine resolved it */
    relay_start(rich);
    SEXP args = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)nargs));
    for (uint64_t i = 0; i < nargs; i++) SET_VECTOR_ELT(args, (R_xlen_t)i, rs_dec_next_value(d));
    result = call_with((SEXP)fnp, args, R_NilValue, R_NilValue);
    UNPROTECT(1);
  }
  PROTECT(result);
  result_out(j->e, result, rich, out);
  UNPROTECT(2); /* result, the decoder's table */
  return 0;
}

static int r_run_call(void *ud, const suiro_wire_item *spec_item, suiro_wire_reader *r, suiro_out *out) {
  task_job *j = ud;
  rs_dec_opts o = { 0, NULL, "task", suiro_current_pool(), rs_task_foreign() };
  rs_decoder dd, *d = &dd;
  rs_decoder_init_at(d, r, &o);
  rs_dec_count_container(d); /* the task list */
  wire_item f = *spec_item;
  relay_start(host_is_r);
  SEXP spec = PROTECT(rs_dec_item(d, &f));
  SEXP result = PROTECT(run_call_spec(spec));
  result_out(j->e, result, host_is_r, out);
  UNPROTECT(3); /* result, spec, the decoder's table */
  return 0;
}

/* A failure for an R receiver: LIST [ERROR, FUNC(R) "suiro::relay" [the error condition, the
 * conditions signalled before it]] (suiro_bind.h section 2: the raised value rides beside the
 * ERROR), encoded under its own top-level context (fail runs outside the task's). */
typedef struct fail_job {
  SEXP cond;
  const char *cls, *msg, *tb;
  int64_t index;
  suiro_out *out;
  int rc;
} fail_job;

static void fail_rich(void *p) {
  fail_job *j = p;
  rs_encoder e;
  rs_enc_opts o = { 1, 1, "R" };
  rs_encoder_init(&e, &o);
  wire_put_list(&e.m.w, 2);
  wire_put_error(&e.m.w, (wire_str){ j->cls, strlen(j->cls) }, (wire_str){ j->msg, strlen(j->msg) },
                 (wire_str){ j->tb, strlen(j->tb) }, j->index < 0 ? -1 : j->index);
  rs_put_relay(&e, j->cond);
  const void *buf;
  size_t len;
  rs_encoder_finish(&e, &buf, &len);
  suiro_out_error_bytes(j->out, buf, len); /* marks the task failed */
  rs_encoder_sent(&e);
  rs_encoder_cleanup(&e);
  j->rc = 0;
}

static int r_fail(void *ud, suiro_out *out, int64_t index) {
  (void)ud;
  char *cls, *msg, *tb;
  SEXP cond = task_rich ? rs_error_cond() : R_NilValue;
  PROTECT(cond);
  rs_error_parts(&cls, &msg, &tb);
  int rc = -1;
  fail_job j = { cond, cls, msg, tb, index, out, -1 };
  if (task_rich && (cond != R_NilValue || rs_relay_count()) && R_ToplevelExec(fail_rich, &j) && j.rc == 0) {
    rc = -1; /* written: the task failed with it */
  } else { /* not an R receiver, nothing to relay, or the relay could not be encoded */
    rc = suiro_out_fail(out, (wire_str){ cls, strlen(cls) }, (wire_str){ msg, strlen(msg) },
                        (wire_str){ tb, strlen(tb) }, index);
  }
  UNPROTECT(1);
  rs_relay_clear();
  task_rich = 0;
  free(cls);
  free(msg);
  free(tb);
  return rc;
}

static const suiro_exec_ops r_ops = {
  .lang = WIRE_LANG_R,
  .lang_name = "r",
  .cache = &code_cache,
  .protect = r_protect,
  .by_name = r_by_name,
  .by_code = r_by_code,
  .run = r_run,
  .run_call = r_run_call,
  .fail = r_fail,
};

static int exec_one(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  if (fn == SUIRO_FN_MAP) {
    rs_map_runner(arg, len, out);
    rs_views_after_task();
    return 0;
  }
  rs_encoder e;
  rs_enc_opts o = { 0, 1, "the host" };
  rs_encoder_init(&e, &o);
  task_job j = { &e };
  const void *vmax = vmaxget();
  int rc = suiro_exec(arg, len, out, &r_ops, &j);
  rs_encoder_cleanup(&e);
  vmaxset(vmax);
  rs_views_after_task();
  return rc;
}

static int exec(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  /* a task waiting on a nested result runs others meanwhile: its record of conditions waits */
  int was_rich = task_rich;
  SEXP saved = PROTECT(rs_relay_save());
  task_rich = 0;
  depth++;
  int rc = exec_one(fn, arg, len, out, ud);
  depth--;
  rs_relay_restore(saved);
  task_rich = was_rich;
  UNPROTECT(1);
  return rc;
}

typedef struct worker_loop_job {
  SEXP token;
  int rc;
} worker_loop_job;

static SEXP worker_loop(void *p) {
  worker_loop_job *j = p;
  rs_relay_global_push();
  fast = 1;
  j->rc = suiro_worker_run(CHAR(STRING_ELT(j->token, 0)));
  return R_NilValue;
}

SEXP C_worker_run(SEXP token) {
  rs_in_worker = 1;
  /* A worker is long-lived and its tasks allocate alike: keep freed memory (up to 64 MB at the
   * top of the heap) for the next task rather than unmapping it and faulting it back in (glibc
   * serves large vectors by mmap otherwise): diamonds enrich 500 -> 400 us in the worker. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  const char *h = getenv("SUIRO_HOST_LANG");
  host_is_r = h && !strcmp(h, "r");
  host_origin = !h ? "a host of unknown language" : !strcmp(h, "lua") ? "the lua host"
              : !strcmp(h, "python") ? "the python host" : "a host of another language";
  suiro_set_executor(exec, NULL);
  unwind_cont = R_MakeUnwindCont();
  R_PreserveObject(unwind_cont);
  worker_loop_job j = { token, -1 };
  /* the error handler for the whole loop; the relay handler inside it (tried first, as per task) */
  R_withCallingErrorHandler(worker_loop, &j, rs_on_task_error, NULL);
  fast = 0;
  R_ReleaseObject(unwind_cont);
  unwind_cont = NULL;
  rs_in_worker = 0;
  return Rf_ScalarInteger(j.rc);
}

/* ---- the worker's own pool (nested submissions and maps) ---------------------------------------- */

static SEXP current;

SEXP rs_current_pool(void) {
  suiro_pool *p = suiro_current_pool();
  if (!p) return R_NilValue;
  if (current) {
    rpool *rp = R_ExternalPtrAddr(current);
    if (rp && rp->p == p) return current;
    R_ReleaseObject(current);
  }
  rpool *rp = calloc(1, sizeof *rp);
  if (!rp) Rf_error("out of memory");
  rp->p = p;
  rp->owner = 0;
  rp->lang = WIRE_LANG_R;
  rp->timeout = -1;
  SEXP info = PROTECT(Rf_mkString("the worker's own pool"));
  current = rs_pool_new_sexp(rp, info);
  R_PreserveObject(current);
  UNPROTECT(1);
  return current;
}

SEXP C_current_pool(void) { return rs_current_pool(); }
SEXP C_worker_slot(void) { return Rf_ScalarInteger(suiro_worker_slot()); }

void rs_worker_init(void) {
  sym_quote = Rf_install("quote");
  sym_brace = Rf_install("{");
  sym_dots = Rf_install("...");
}
