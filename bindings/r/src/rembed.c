/*
 * rembed.c — the Lua face's readers for R (suiro_embed.h): config scripts (suiro_open), pool
 * options, templates ("f64", "{mean: f64, sd: f64}") and durations ("250ms") are read by the one
 * implementation in engine/conf/suiro/{config,parse}.lua, so R accepts the same strings with the same
 * messages as Lua and Python. The private Lua state opens on first use (workers rarely need it).
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"
#include "suiro_embed.h"

static suiro_embed *E;
static char lua_dir[4096];

SEXP C_embed_set_dir(SEXP dir) {
  snprintf(lua_dir, sizeof lua_dir, "%s", CHAR(STRING_ELT(dir, 0)));
  return R_NilValue;
}

static suiro_embed *embed(void) {
  if (E) return E;
  char err[512];
  E = suiro_embed_open(lua_dir[0] ? lua_dir : ".", err, sizeof err);
  if (!E) Rf_error("suiro: cannot start the config reader (%s): %s", lua_dir, err);
  return E;
}

int rs_template_from_string(const char *spec, suiro_template *t, char *err, size_t cap) {
  return suiro_embed_template(embed(), spec, t, err, cap);
}

int rs_duration(const char *s, double *sec, char *err, size_t cap) { return suiro_embed_duration(embed(), s, sec, err, cap); }

/* suiro_open(path): the pools of a config script, checked and normalised (a named list). */
SEXP C_config_load(SEXP path) {
  void *buf;
  size_t len;
  char err[1024];
  if (suiro_embed_config(embed(), Rf_translateCharUTF8(STRING_ELT(path, 0)), &buf, &len, err, sizeof err) != 0)
    Rf_error("suiro_open: %s", err);
  rs_dec_opts o = { 0, NULL, "config", NULL, "a Lua config script" };
  SEXP raw = PROTECT(Rf_allocVector(RAWSXP, (R_xlen_t)len)); /* decoding may signal: no malloc'd copy then */
  memcpy(RAW(raw), buf, len);
  free(buf);
  SEXP v = rs_decode(RAW(raw), len, &o);
  UNPROTECT(1);
  return v;
}

/* The R value of a wire buffer the config readers malloc'd (freed here). Decoding may signal, and
 * buf would leak then: a copy made by R is decoded. */
static SEXP decode_owned(void *buf, size_t len, const char *what) {
  rs_dec_opts o = { 0, NULL, what, NULL, "the Lua option checks" };
  SEXP raw = PROTECT(Rf_allocVector(RAWSXP, (R_xlen_t)len));
  memcpy(RAW(raw), buf, len);
  free(buf);
  SEXP v = rs_decode(RAW(raw), len, &o);
  UNPROTECT(1);
  return v;
}

/* Checks and normalises one pool's options (a named list, already wire-encodable). */
SEXP C_pool_options(SEXP wire, SEXP where) {
  void *buf;
  size_t len;
  char err[1024];
  /* copy to aligned memory */
  size_t n = (size_t)XLENGTH(wire);
  void *in = malloc(n ? n : 8);
  if (!in) Rf_error("out of memory");
  memcpy(in, RAW(wire), n);
  int rc = suiro_embed_pool_options(embed(), in, n, CHAR(STRING_ELT(where, 0)), &buf, &len, err, sizeof err);
  free(in);
  if (rc != 0) Rf_error("%s", err);
  return decode_owned(buf, len, "options");
}

/* The environment every face gives workers of a launcher kind by default (suiro.config):
 * a named list of strings. */
SEXP C_worker_env(SEXP kind) {
  void *buf;
  size_t len;
  char err[512];
  if (suiro_conf_worker_env(embed(), CHAR(STRING_ELT(kind, 0)), &buf, &len, err, sizeof err) != 0)
    Rf_error("%s", err);
  return decode_owned(buf, len, "env");
}

/* The command and environment of a launcher's workers (suiro.config.launch): kind, the launcher's
 * options and what this R knows of itself (both wire-encoded named lists) -> list(exe, argv, env). */
SEXP C_launch(SEXP kind, SEXP opts, SEXP host) {
  size_t n[2] = { (size_t)XLENGTH(opts), (size_t)XLENGTH(host) };
  void *in[2] = { malloc(n[0] ? n[0] : 8), malloc(n[1] ? n[1] : 8) }; /* aligned copies */
  if (!in[0] || !in[1]) {
    free(in[0]);
    free(in[1]);
    Rf_error("out of memory");
  }
  memcpy(in[0], RAW(opts), n[0]);
  memcpy(in[1], RAW(host), n[1]);
  void *buf;
  size_t len;
  char err[1024];
  int rc = suiro_conf_launch(embed(), CHAR(STRING_ELT(kind, 0)), in[0], n[0], in[1], n[1], &buf, &len, err, sizeof err);
  free(in[0]);
  free(in[1]);
  if (rc != 0) Rf_error("%s", err);
  return decode_owned(buf, len, "launch");
}

SEXP C_duration(SEXP s) {
  double v;
  char err[512];
  if (rs_duration(CHAR(STRING_ELT(s, 0)), &v, err, sizeof err) != 0) Rf_error("%s", err);
  return Rf_ScalarReal(v);
}

SEXP C_template_check(SEXP s) {
  suiro_template t;
  char err[512];
  if (rs_template_from_string(CHAR(STRING_ELT(s, 0)), &t, err, sizeof err) != 0) Rf_error("%s", err);
  return Rf_ScalarInteger(t.kind);
}

int rs_fnref_check(const char *name, char *err, size_t cap) { return suiro_embed_fnref(embed(), name, err, cap); }

SEXP C_fnref_check(SEXP s) {
  char err[512];
  if (rs_fnref_check(CHAR(STRING_ELT(s, 0)), err, sizeof err) != 0) Rf_error("%s", err);
  return Rf_ScalarLogical(1);
}
