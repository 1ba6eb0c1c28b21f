/*
 * rfunc.c — what a task runs: R functions as code keys, task lists, names resolved in workers.
 *
 * An R function crosses as its code (formals and body, serialized with the global environment,
 * source references dropped) published once per pool under its content key (suiro_bind.h
 * section 3); the task's FUNC(R) item names the key and carries:
 *   child 1  nil, or a "pkg::fn" name (key 0)
 *   child 2  the function's environment: nil (the global environment), a namespace name, or a
 *            LIST [nil | namespace name, DICT of the captured variables] for a local environment
 *            (copied: the variables of every enclosing local environment, innermost first)
 *   child 3  nil, or a STRS of the names of the arguments that follow in the task list ("" when
 *            positional)
 * A quoted expression travels the same way (its code is the expression; the arguments are its
 * bindings). Workers cache what they built from a key (rworker.c).
 *
 * The host remembers the key of each code object it serialized (by the identity of formals and
 * body, which every closure made by one `function` expression shares), so a loop submitting the
 * same function serializes it once; each pool also remembers the last function sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"

/* ---- the host's memo: code object -> (key, bytes) ----------------------------------------------- */

#define MEMO_SIZE 256
typedef struct memo_ent {
  SEXP hold;      /* preserved list(formals or expr, body, code bytes); NULL when empty */
  SEXP a, b;      /* identity */
  uint64_t key;
} memo_ent;
static memo_ent memo[MEMO_SIZE];

static size_t memo_slot(SEXP a, SEXP b) {
  uintptr_t h = ((uintptr_t)a >> 4) * 0x9E3779B97F4A7C15ull ^ ((uintptr_t)b >> 4);
  return (size_t)(h ^ (h >> 29)) & (MEMO_SIZE - 1);
}

static SEXP sym_srcref, sym_srcfile, sym_wholesrcref;

SEXP rs_mkclosure(SEXP formals, SEXP body, SEXP env) {
  SEXP f = PROTECT(Rf_allocSExp(CLOSXP));
  SET_FORMALS(f, formals);
  SET_BODY(f, body);
  SET_CLOENV(f, env);
  UNPROTECT(1);
  return f;
}

static SEXP strip_source(SEXP f) {
  SEXP b = BODY(f);
  if (TYPEOF(b) == LANGSXP && (Rf_getAttrib(b, sym_srcref) != R_NilValue ||
                               Rf_getAttrib(b, sym_wholesrcref) != R_NilValue)) {
    SEXP rm = PROTECT(rs_call_fn("utils", "removeSource"));
    SEXP call = PROTECT(Rf_lang2(rm, f));
    SEXP g = Rf_eval(call, R_BaseEnv);
    UNPROTECT(2);
    return g;
  }
  return f;
}

/* The code bytes and key of a closure (formals, body), a primitive or an expression, and the
 * names the code uses but does not bind (codetools::findGlobals; NULL: unknown, take all). */
static uint64_t code_key(SEXP fn, SEXP *code_out, SEXP *free_out) {
  SEXP a, b;
  if (TYPEOF(fn) == CLOSXP) {
    a = FORMALS(fn);
    b = BODY(fn);
  } else {
    a = fn;
    b = R_NilValue;
  }
  memo_ent *m = &memo[memo_slot(a, b)];
  if (m->hold && m->a == a && m->b == b) {
    *code_out = VECTOR_ELT(m->hold, 2);
    *free_out = VECTOR_ELT(m->hold, 3);
    return m->key;
  }
  SEXP bare;
  if (TYPEOF(fn) == CLOSXP) {
    bare = PROTECT(rs_mkclosure(FORMALS(fn), BODY(fn), R_GlobalEnv));
    bare = strip_source(bare);
    UNPROTECT(1);
  } else {
    bare = fn;
  }
  PROTECT(bare);
  SEXP code = PROTECT(rs_serialize(bare));
  uint64_t key = suiro_fn_key(RAW(code), (size_t)XLENGTH(code));
  SEXP hold = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(hold, 0, a);
  SET_VECTOR_ELT(hold, 1, b);
  SET_VECTOR_ELT(hold, 2, code);
  if (TYPEOF(fn) == CLOSXP) {
    SEXP fv = PROTECT(rs_call_fn("suiro", "free_variables"));
    SEXP call = PROTECT(Rf_lang2(fv, fn));
    SET_VECTOR_ELT(hold, 3, Rf_eval(call, R_BaseEnv));
    UNPROTECT(2);
  }
  if (m->hold) R_ReleaseObject(m->hold);
  R_PreserveObject(hold);
  m->hold = hold;
  m->a = a;
  m->b = b;
  m->key = key;
  UNPROTECT(3);
  *code_out = code;
  *free_out = VECTOR_ELT(hold, 3);
  return key;
}

/* ---- environments ------------------------------------------------------------------------------- */

static SEXP ns_name(SEXP env) { /* a namespace's or an attached package's name, or NULL */
  if (env == R_BaseEnv || env == R_BaseNamespace) return Rf_mkChar("base");
  if (R_IsNamespaceEnv(env)) {
    SEXP spec = R_NamespaceEnvSpec(env);
    if (TYPEOF(spec) == STRSXP && XLENGTH(spec) >= 1) return STRING_ELT(spec, 0);
  }
  if (R_IsPackageEnv(env)) {
    SEXP nm = R_PackageEnvName(env);
    if (TYPEOF(nm) == STRSXP) {
      const char *s = CHAR(STRING_ELT(nm, 0));
      if (!strncmp(s, "package:", 8)) return Rf_mkChar(s + 8);
    }
  }
  return NULL;
}

static int env_is_terminal(SEXP env) {
  return env == R_GlobalEnv || env == R_EmptyEnv || ns_name(env) != NULL;
}

static int wanted(SEXP nm, SEXP free) {
  if (free == R_NilValue) return 1;
  for (R_xlen_t i = 0; i < XLENGTH(free); i++)
    if (STRING_ELT(free, i) == nm || !strcmp(CHAR(STRING_ELT(free, i)), CHAR(nm))) return 1;
  return 0;
}

/* Writes the environment child of a FUNC(R) item: the variables of the local environments the
 * code uses (free: names it does not bind itself; R_NilValue: all). */
static void write_env(rs_encoder *e, SEXP env, SEXP free) {
  wire_writer *w = &e->m.w;
  if (env == R_GlobalEnv || env == R_EmptyEnv) {
    wire_put_nil(w);
    return;
  }
  SEXP ns = ns_name(env);
  if (ns) {
    wire_put_str(w, CHAR(ns), (size_t)LENGTH(ns));
    return;
  }
  /* a local environment: its variables and those of the local environments around it */
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 0));
  SEXP vals = PROTECT(Rf_allocVector(VECSXP, 0));
  PROTECT_INDEX pin, piv;
  R_ProtectWithIndex(names, &pin);
  R_ProtectWithIndex(vals, &piv);
  SEXP top = env;
  R_xlen_t count = 0;
  for (; !env_is_terminal(top); top = ENCLOS(top)) {
    SEXP ls = PROTECT(R_lsInternal3(top, TRUE, FALSE));
    R_xlen_t k = XLENGTH(ls);
    SEXP nn = PROTECT(Rf_allocVector(STRSXP, count + k));
    SEXP nv = PROTECT(Rf_allocVector(VECSXP, count + k));
    for (R_xlen_t i = 0; i < count; i++) {
      SET_STRING_ELT(nn, i, STRING_ELT(names, i));
      SET_VECTOR_ELT(nv, i, VECTOR_ELT(vals, i));
    }
    R_xlen_t c = count;
    for (R_xlen_t i = 0; i < k; i++) {
      SEXP nm = STRING_ELT(ls, i);
      if (!wanted(nm, free)) continue;
      int seen = 0;
      for (R_xlen_t q = 0; q < count && !seen; q++) seen = STRING_ELT(names, q) == nm;
      if (seen) continue;
      SEXP sym = Rf_installTrChar(nm);
      if (R_BindingIsActive(sym, top)) Rf_error("%s: the function captures '%s', an active binding", rs_enc_path(e), CHAR(nm));
      SEXP v = Rf_findVarInFrame3(top, sym, TRUE);
      if (TYPEOF(v) == PROMSXP) v = Rf_eval(v, top);
      SET_STRING_ELT(nn, c, nm);
      SET_VECTOR_ELT(nv, c, v);
      c++;
    }
    REPROTECT(names = Rf_lengthgets(nn, c), pin);
    REPROTECT(vals = Rf_lengthgets(nv, c), piv);
    count = c;
    UNPROTECT(3);
  }
  wire_put_list(w, 2);
  e->ncont++;
  SEXP tns = env_is_terminal(top) && top != R_GlobalEnv && top != R_EmptyEnv ? ns_name(top) : NULL;
  if (tns) wire_put_str(w, CHAR(tns), (size_t)LENGTH(tns));
  else wire_put_nil(w);
  wire_put_dict(w, (uint64_t)count);
  e->ncont++;
  size_t at = e->plen;
  for (R_xlen_t i = 0; i < count; i++) {
    const char *k = CHAR(STRING_ELT(names, i));
    wire_put_str(w, k, strlen(k));
    rs_enc_path_push(e, " captured '%s'", k);
    rs_enc_value(e, VECTOR_ELT(vals, i), NULL);
    rs_enc_path_pop(e, at);
  }
  UNPROTECT(4);
}

/* ---- task lists --------------------------------------------------------------------------------- */

static int has_names(SEXP args) {
  SEXP nm = Rf_getAttrib(args, R_NamesSymbol);
  if (nm == R_NilValue) return 0;
  for (R_xlen_t i = 0; i < XLENGTH(nm); i++)
    if (STRING_ELT(nm, i) != NA_STRING && CHAR(STRING_ELT(nm, i))[0]) return 1;
  return 0;
}

static void write_argnames(rs_encoder *e, SEXP args) {
  if (!has_names(args)) {
    wire_put_nil(&e->m.w);
    return;
  }
  SEXP nm = Rf_getAttrib(args, R_NamesSymbol);
  R_xlen_t n = XLENGTH(nm);
  wire_put_strs(&e->m.w, (uint64_t)n);
  for (R_xlen_t i = 0; i < n; i++) {
    SEXP c = STRING_ELT(nm, i);
    const char *s = c == NA_STRING ? "" : Rf_translateCharUTF8(c);
    wire_strs_add(&e->m.w, s, strlen(s));
  }
}

static int is_call_spec(SEXP fn) { return TYPEOF(fn) == VECSXP && Rf_inherits(fn, "suiro_call"); }

/* The function item of an R task (rpool.c, rmap.c). nargs_named: names of what follows. */
void rs_write_fn_item(rs_encoder *e, rpool *rp, SEXP fn, SEXP args, const char *verb) {
  wire_writer *w = &e->m.w;
  int t = TYPEOF(fn);
  if (t == STRSXP) {
    if (XLENGTH(fn) != 1 || STRING_ELT(fn, 0) == NA_STRING)
      Rf_error("%s: a function name must be one string, got %.0f", verb, (double)XLENGTH(fn));
    const char *name = Rf_translateCharUTF8(STRING_ELT(fn, 0));
    wire_put_func(w, WIRE_LANG_R, 0, 3);
    e->ncont++;
    wire_put_str(w, name, strlen(name));
    wire_put_nil(w);
    write_argnames(e, args);
    return;
  }
  int is_expr = t == LANGSXP || t == SYMSXP || t == EXPRSXP;
  if (t != CLOSXP && t != BUILTINSXP && t != SPECIALSXP && !is_expr)
    Rf_error("%s: argument 2 must be a function, a quoted expression, a \"pkg::fn\" name or a suiro_call(), got %s",
             verb, Rf_type2char(t));
  if (is_expr) {
    R_xlen_t n = args == R_NilValue ? 0 : XLENGTH(args);
    SEXP nm = Rf_getAttrib(args, R_NamesSymbol);
    for (R_xlen_t i = 0; i < n; i++)
      if (nm == R_NilValue || STRING_ELT(nm, i) == NA_STRING || !CHAR(STRING_ELT(nm, i))[0])
        Rf_error("%s: an expression is evaluated with its arguments as variables: argument %.0f needs a name", verb,
                 (double)i + 1);
  }
  uint64_t key;
  SEXP env = t == CLOSXP ? CLOENV(fn) : R_GlobalEnv;
  SEXP free = R_NilValue;
  if (rp && fn == rp->fn_last && (env == R_GlobalEnv || ns_name(env))) {
    key = rp->fn_last_key; /* the submit loop's case: sent just before, already published */
  } else {
    SEXP code;
    key = code_key(fn, &code, &free);
    PROTECT(code);
    if (rp && suiro_fn_publish(rp->p, key, RAW(code), (size_t)XLENGTH(code)) != SUIRO_OK)
      Rf_error("%s: cannot publish the function: %s", verb, suiro_last_error());
    UNPROTECT(1);
    if (rp) {
      if (rp->fn_last) R_ReleaseObject(rp->fn_last);
      R_PreserveObject(fn);
      rp->fn_last = fn;
      rp->fn_last_key = key;
    }
  }
  wire_put_func(w, WIRE_LANG_R, key, 3);
  e->ncont++;
  wire_put_nil(w);
  size_t at = e->plen;
  rs_enc_path_push(e, "%s: argument 2", verb);
  PROTECT(free);
  write_env(e, env, free);
  UNPROTECT(1);
  rs_enc_path_pop(e, at);
  write_argnames(e, args);
}

static void write_args(rs_encoder *e, SEXP args, const char *verb) {
  R_xlen_t n = args == R_NilValue ? 0 : XLENGTH(args);
  SEXP nm = Rf_getAttrib(args, R_NamesSymbol);
  size_t at = e->plen;
  for (R_xlen_t i = 0; i < n; i++) {
    if (nm != R_NilValue && STRING_ELT(nm, i) != NA_STRING && CHAR(STRING_ELT(nm, i))[0])
      rs_enc_path_push(e, "%s: argument '%s'", verb, CHAR(STRING_ELT(nm, i)));
    else
      rs_enc_path_push(e, "%s: argument %.0f", verb, (double)i + 3);
    rs_enc_value(e, VECTOR_ELT(args, i), NULL);
    rs_enc_path_pop(e, at);
  }
}

void rs_write_task(rs_encoder *e, rpool *rp, SEXP fn, SEXP args, const char *verb) {
  R_xlen_t n = args == R_NilValue ? 0 : XLENGTH(args);
  if (is_call_spec(fn)) {
    if (n) Rf_error("%s: a suiro_call() carries its own arguments; pass them to suiro_call()", verb);
    wire_put_list(&e->m.w, 1);
    e->ncont++;
    rs_enc_value(e, fn, verb);
    return;
  }
  if (rp->lang != WIRE_LANG_R) {
    const char *lang = rp->lang == WIRE_LANG_LUA ? "lua" : "python";
    if (TYPEOF(fn) != STRSXP || XLENGTH(fn) != 1)
      Rf_error("%s: %s workers cannot run an R %s: pass a \"module.fn\" name or a suiro_call()", verb, lang,
               TYPEOF(fn) == CLOSXP ? "function" : "expression");
    if (has_names(args))
      Rf_error("%s: named arguments to %s workers need a call spec: suiro_call(\"%s\", ..., name = value)", verb, lang,
               CHAR(STRING_ELT(fn, 0)));
    wire_put_list(&e->m.w, (uint64_t)n + 1);
    e->ncont++;
    const char *name = Rf_translateCharUTF8(STRING_ELT(fn, 0));
    wire_put_str(&e->m.w, name, strlen(name));
    write_args(e, args, verb);
    return;
  }
  wire_put_list(&e->m.w, (uint64_t)n + 1);
  e->ncont++;
  rs_write_fn_item(e, rp, fn, args, verb);
  write_args(e, args, verb);
}

/* ---- names, resolved (workers and hosts) -------------------------------------------------------- */

static SEXP resolve_cache; /* an environment: name -> function */

SEXP rs_resolve_fn(const char *name, size_t len) {
  if (!resolve_cache) {
    resolve_cache = R_NewEnv(R_EmptyEnv, TRUE, 64);
    R_PreserveObject(resolve_cache);
  }
  SEXP key = PROTECT(Rf_mkCharLenCE(name, (int)len, CE_UTF8));
  SEXP sym = Rf_installTrChar(key);
  SEXP f = Rf_findVarInFrame3(resolve_cache, sym, TRUE);
  if (f != R_UnboundValue) {
    UNPROTECT(1);
    return f;
  }
  SEXP fn = PROTECT(rs_call_fn("suiro", "resolve_function"));
  SEXP call = PROTECT(Rf_lang2(fn, Rf_ScalarString(key)));
  f = PROTECT(Rf_eval(call, R_GlobalEnv));
  Rf_defineVar(sym, f, resolve_cache);
  UNPROTECT(4);
  return f;
}

void rs_func_init(void) {
  sym_srcref = Rf_install("srcref");
  sym_srcfile = Rf_install("srcfile");
  sym_wholesrcref = Rf_install("wholeSrcref");
}
