/*
 * opts.c — pools from options, for every face (suiro_face.h section 6).
 *
 * suiro_pool_create_from reads a wire DICT of normalised pool options (what suiro_conf's
 * suiro_conf_pool_options returns, plus the worker command the face built from the launcher:
 * exe, argv, env, lang), checks every field with one message per rule, naming the option, fills
 * a suiro_pool_opts and starts the pool. The faces keep only their encoding of the options
 * (their own value encoder) and what the pool object remembers (suiro_pool_info). The ranges
 * are the ones suiro_pool_create accepts, so its own checks never speak for an option here.
 *
 * No state: everything read is the caller's bytes (never written) or this call's heap (the
 * NUL-terminated copies of exe, argv and env, freed before returning: suiro_pool_create keeps
 * copies of its own). Any thread; no lock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pool.h"
#include "suiro_face.h"

enum { K_INT, K_POW2, K_SECONDS, K_BOOL, K_NAME, K_LANG, K_EXE, K_ARGV, K_ENV, K_BACKEND, K_LAUNCHER };

static const struct opt_key {
  const char *name;
  int kind;
  int64_t lo, hi;
} keys[] = {
  { "workers", K_INT, 0, POOL_MAX_WORKERS },
  { "max_workers", K_INT, 1, POOL_MAX_WORKERS },
  { "ring_cap", K_POW2, 2, 1 << 20 },
  { "slot_size", K_POW2, 64, 65536 },
  { "result_slots", K_INT, 1, 1 << 22 },
  { "result_size", K_POW2, 64, 65536 },
  { "respawn", K_BOOL, 0, 0 },
  { "start_timeout", K_SECONDS, 0, 0 },
  { "timeout", K_SECONDS, 0, 0 },
  { "name", K_NAME, 0, 0 },
  { "lang", K_LANG, 0, 0 },
  { "exe", K_EXE, 0, 0 },
  { "argv", K_ARGV, 0, 0 },
  { "env", K_ENV, 0, 0 },
  { "backend", K_BACKEND, 0, 0 },
  { "launcher", K_LAUNCHER, 0, 0 },
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* NUL-terminated strings made here (exe, argv, env), each list NULL-terminated. */
typedef struct strvec {
  char **v;
  size_t n, cap;
} strvec;

static int strvec_add(strvec *sv, const char *a, size_t al, const char *b, size_t bl) {
  if (sv->n + 2 > sv->cap) {
    size_t cap = sv->cap ? sv->cap * 2 : 8;
    char **v = realloc(sv->v, cap * sizeof *v);
    if (!v) return -1;
    sv->v = v;
    sv->cap = cap;
  }
  size_t len = al + (b ? 1 + bl : 0);
  char *c = malloc(len + 1);
  if (!c) return -1;
  memcpy(c, a, al);
  if (b) {
    c[al] = '=';
    memcpy(c + al + 1, b, bl);
  }
  c[len] = 0;
  sv->v[sv->n++] = c;
  sv->v[sv->n] = NULL;
  return 0;
}

static void strvec_free(strvec *sv) {
  for (size_t i = 0; i < sv->n; i++) free(sv->v[i]);
  free(sv->v);
}

/* A value as a message shows it: numbers and strings as themselves, others by kind. */
static const char *shown(const suiro_wire_item *v, char *buf, size_t cap) {
  switch (v->tag) {
  case WIRE_I64: snprintf(buf, cap, "%lld", (long long)v->i); return buf;
  case WIRE_F64: snprintf(buf, cap, "%.15g", v->f); return buf;
  case WIRE_BOOL: return v->flag == 1 ? "true" : v->flag == 0 ? "false" : "NA";
  case WIRE_STR:
    if (v->n > 40) snprintf(buf, cap, "\"%.40s...\" (a string)", (const char *)v->data);
    else snprintf(buf, cap, "\"%.*s\" (a string)", (int)v->n, (const char *)v->data);
    return buf;
  default: return suiro_wire_tag_desc(v->tag);
  }
}

static int is_str(const suiro_wire_item *v) { return v->tag == WIRE_STR && !memchr(v->data, 0, (size_t)v->n); }

static int str_is(const suiro_wire_item *v, const char *s) {
  return v->tag == WIRE_STR && v->n == strlen(s) && !memcmp(v->data, s, (size_t)v->n);
}

/* An integer: I64, or an F64 with an integral value (R's numbers are doubles). */
static int int_of(const suiro_wire_item *v, int64_t *out) {
  if (v->tag == WIRE_I64) return *out = v->i, 1;
  if (v->tag == WIRE_F64 && v->f >= -9.0e15 && v->f <= 9.0e15 && v->f == (double)(int64_t)v->f)
    return *out = (int64_t)v->f, 1;
  return 0;
}

static int env_name_ok(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return 0;
  }
  return 1;
}

#define FAIL(...) (suiro_set_error(SUIRO_ERR, __VA_ARGS__), -1)

/* Reads the DICT into o (its strings into exe, argv, env) and info. 0, or -1 with the error set. */
static int read_opts(suiro_wire_reader *r, suiro_pool_opts *o, suiro_pool_info *info, strvec *exe, strvec *argv,
                     strvec *env) {
  suiro_wire_item it, k, v;
  char g[96];
  if (suiro_wire_next(r, &it) != WIRE_OK) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
  if (it.tag != WIRE_DICT) return FAIL("pool: options must be a dict, got %s", suiro_wire_tag_desc(it.tag));
  unsigned seen = 0;
  for (uint64_t i = 0; i < it.n; i++) {
    if (suiro_wire_next(r, &k) != WIRE_OK) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
    size_t ki = 0;
    while (ki < NKEYS && !str_is(&k, keys[ki].name)) ki++;
    if (ki == NKEYS)
      return FAIL("pool: unknown option \"%.*s\" (options: workers, max_workers, ring_cap, slot_size, result_slots, "
                  "result_size, respawn, start_timeout, timeout, name, lang, exe, argv, env, backend, launcher)",
                  k.tag == WIRE_STR ? (int)(k.n > 40 ? 40 : k.n) : 0, k.tag == WIRE_STR ? (const char *)k.data : "");
    const struct opt_key *key = &keys[ki];
    if (seen & (1u << ki)) return FAIL("pool: option \"%s\" is given twice", key->name);
    seen |= 1u << ki;
    suiro_wire_reader before = *r;
    if (suiro_wire_next(r, &v) != WIRE_OK) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
    if (v.tag == WIRE_NIL) continue; /* absent */
    int64_t n;
    double d;
    switch (key->kind) {
    case K_INT:
    case K_POW2:
      if (!int_of(&v, &n) || n < key->lo || n > key->hi || (key->kind == K_POW2 && (n & (n - 1))))
        return FAIL("pool: %s must be %s in %lld..%lld, got %s", key->name,
                    key->kind == K_POW2 ? "a power of two" : "an integer", (long long)key->lo, (long long)key->hi,
                    shown(&v, g, sizeof g));
      if (!strcmp(key->name, "workers")) o->workers = (int)n;
      else if (!strcmp(key->name, "max_workers")) o->max_workers = (int)n;
      else if (!strcmp(key->name, "ring_cap")) o->ring_cap = (uint32_t)n;
      else if (!strcmp(key->name, "slot_size")) o->slot_size = (uint32_t)n;
      else if (!strcmp(key->name, "result_slots")) o->result_slots = (uint32_t)n;
      else o->result_size = (uint32_t)n;
      break;
    case K_SECONDS:
      d = v.tag == WIRE_I64 ? (double)v.i : v.tag == WIRE_F64 ? v.f : -1;
      if ((v.tag != WIRE_I64 && v.tag != WIRE_F64) || suiro_timeout_norm(d, &d) != 0)
        return FAIL("pool: %s must be a number of seconds >= 0 (1e12 or more: no limit), got %s", key->name,
                    shown(&v, g, sizeof g));
      if (key->name[0] == 't') info->timeout = d;
      else o->start_timeout = d < 0 ? 1e12 : d; /* no limit: a wait as long as any */
      break;
    case K_BOOL:
      if (v.tag != WIRE_BOOL || (v.flag != 0 && v.flag != 1))
        return FAIL("pool: respawn must be true or false, got %s", shown(&v, g, sizeof g));
      o->respawn = v.flag;
      break;
    case K_NAME:
      if (!is_str(&v) || v.n == 0)
        return FAIL("pool: name must be a non-empty string without NUL bytes, got %s", shown(&v, g, sizeof g));
      snprintf(info->name, sizeof info->name, "%.*s", (int)v.n, (const char *)v.data);
      break;
    case K_LANG:
      if (str_is(&v, "lua")) info->lang = WIRE_LANG_LUA;
      else if (str_is(&v, "python")) info->lang = WIRE_LANG_PYTHON;
      else if (str_is(&v, "r")) info->lang = WIRE_LANG_R;
      else return FAIL("pool: lang must be \"lua\", \"python\" or \"r\", got %s", shown(&v, g, sizeof g));
      break;
    case K_EXE:
      if (!is_str(&v) || v.n == 0)
        return FAIL("pool: exe must be a non-empty string without NUL bytes (a path), got %s", shown(&v, g, sizeof g));
      if (strvec_add(exe, v.data, (size_t)v.n, NULL, 0)) return FAIL("pool: out of memory");
      break;
    case K_ARGV:
      if (v.tag != WIRE_LIST) return FAIL("pool: argv must be a list of strings, got %s", shown(&v, g, sizeof g));
      for (uint64_t j = 0; j < v.n; j++) {
        suiro_wire_item a;
        if (suiro_wire_next(r, &a) != WIRE_OK) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
        if (!is_str(&a))
          return FAIL("pool: argv item %llu (of %llu) must be a string without NUL bytes, got %s",
                      (unsigned long long)j + 1, (unsigned long long)v.n, shown(&a, g, sizeof g));
        if (strvec_add(argv, a.data, (size_t)a.n, NULL, 0)) return FAIL("pool: out of memory");
      }
      break;
    case K_ENV:
      if (v.tag != WIRE_DICT && !(v.tag == WIRE_LIST && v.n == 0)) /* an empty table or list: no entries */
        return FAIL("pool: env must be a dict of strings, got %s", shown(&v, g, sizeof g));
      for (uint64_t j = 0; j < (v.tag == WIRE_DICT ? v.n : 0); j++) {
        suiro_wire_item a, b;
        if (suiro_wire_next(r, &a) != WIRE_OK || suiro_wire_next(r, &b) != WIRE_OK)
          return FAIL("pool: options: %s", suiro_wire_reader_error(r));
        if (!env_name_ok(a.data, (size_t)a.n))
          return FAIL("pool: env: variable names are letters, digits and _, got %s", shown(&a, g, sizeof g));
        if (!is_str(&b))
          return FAIL("pool: env.%.*s must be a string without NUL bytes, got %s", (int)a.n, (const char *)a.data,
                      shown(&b, g, sizeof g));
        if (strvec_add(env, a.data, (size_t)a.n, b.data, (size_t)b.n)) return FAIL("pool: out of memory");
      }
      break;
    case K_BACKEND: /* the face runs the MPI tier over the pool made here */
      if (!str_is(&v, "local") && !str_is(&v, "mpi"))
        return FAIL("pool: backend must be \"local\" or \"mpi\", got %s", shown(&v, g, sizeof g));
      break;
    default: /* launcher: the face built exe, argv and env from it */
      *r = before;
      if (suiro_wire_skip(r) == WIRE_ERR) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
    }
  }
  if (suiro_wire_next(r, &it) != WIRE_END) return FAIL("pool: options: %s", suiro_wire_reader_error(r));
  if (o->max_workers && o->max_workers < o->workers)
    return FAIL("pool: max_workers must be at least workers (%d), got %d", o->workers, o->max_workers);
  o->exe = exe->n ? exe->v[0] : NULL;
  o->argv = argv->n ? (const char *const *)argv->v : NULL; /* an empty list: the default command */
  o->env = env->n ? (const char *const *)env->v : NULL;
  return 0;
}

/* extra: NULL, or "NAME=value" strings set over the options' env (suiro_pool_create_from_env). */
static int env_override(strvec *env, const char *const *extra) {
  for (; extra && *extra; extra++) {
    const char *eq = strchr(*extra, '=');
    size_t nl = eq ? (size_t)(eq - *extra) : strlen(*extra);
    size_t k = 0;
    for (size_t i = 0; i < env->n; i++) { /* drop the options' own entry of that name */
      if (!strncmp(env->v[i], *extra, nl) && env->v[i][nl] == '=') free(env->v[i]);
      else env->v[k++] = env->v[i];
    }
    env->n = k;
    if (env->v) env->v[k] = NULL;
    if (strvec_add(env, *extra, nl, eq ? eq + 1 : "", eq ? strlen(eq + 1) : 0)) return -1;
  }
  return 0;
}

suiro_status suiro_pool_create_from(const void *dict, size_t len, int host_lang, suiro_pool **out,
                                    suiro_pool_info *info) {
  return suiro_pool_create_from_env(dict, len, host_lang, NULL, out, info);
}

suiro_status suiro_pool_create_from_env(const void *dict, size_t len, int host_lang, const char *const *extra_env,
                                        suiro_pool **out, suiro_pool_info *info) {
  if (!out) return suiro_set_error(SUIRO_ERR, "pool: out (argument 4) is NULL");
  *out = NULL;
  suiro_pool_info mine;
  if (!info) info = &mine;
  memset(info, 0, sizeof *info);
  info->timeout = -1;
  if (host_lang != WIRE_LANG_LUA && host_lang != WIRE_LANG_PYTHON && host_lang != WIRE_LANG_R)
    return suiro_set_error(SUIRO_ERR, "pool: host_lang must be WIRE_LANG_LUA, _PYTHON or _R, got %d", host_lang);
  info->lang = host_lang;
  if (!dict) return suiro_set_error(SUIRO_ERR, "pool: options: NULL");
  void *copy = NULL;
  if ((uintptr_t)dict & 7) { /* the reader reads words: an unaligned buffer is read from a copy */
    if (!(copy = malloc(len ? len : 1))) return suiro_set_error(SUIRO_ERR, "pool: out of memory");
    memcpy(copy, dict, len);
    dict = copy;
  }
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.respawn = 1; /* a face's pool replaces a worker that dies unless the options say no */
  strvec exe = { 0 }, argv = { 0 }, env = { 0 };
  suiro_wire_reader r;
  suiro_status st = SUIRO_ERR;
  if (suiro_wire_reader_init(&r, dict, len) != WIRE_OK) {
    suiro_set_error(SUIRO_ERR, "pool: options: %s", suiro_wire_reader_error(&r));
  } else if (read_opts(&r, &o, info, &exe, &argv, &env) == 0) {
    if (extra_env && env_override(&env, extra_env) != 0) {
      suiro_set_error(SUIRO_ERR, "pool: out of memory");
      goto done;
    }
    if (extra_env) o.env = env.n ? (const char *const *)env.v : NULL;
    st = suiro_pool_create(&o, out);
    if (st != SUIRO_OK) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", suiro_last_error());
      suiro_set_error(st, "pool: %s", msg);
    }
  }
done:
  strvec_free(&exe);
  strvec_free(&argv);
  strvec_free(&env);
  free(copy);
  return st;
}
