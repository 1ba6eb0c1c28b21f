/*
 * exec.c — a worker's task, read once for every language (suiro_face.h section 2).
 *
 * suiro_exec reads the task list [function, args...] and its function item, refuses what the
 * protocol refuses (suiro_bind.h section 1) with one class and one message per rule, finds the
 * function in the face's cache (by name, or by code key: fetched from the pool's blob store,
 * checked against its key and compiled by the face on first sight) and hands the reader to the
 * face's run callback. The faces keep only their language: resolving a name, compiling code,
 * decoding arguments, calling, encoding the result, and their pending errors.
 *
 * Ownership: a suiro_exec_cache belongs to one face in one worker process and is used only by
 * the thread that runs the executor (suiro_exec may nest: a task that waits on a nested task
 * runs other tasks meanwhile, so nothing here keeps a pointer into the cache's arrays across a
 * callback: they may grow). No state is shared between threads; there is no atomic.
 * Raising: every face callback runs inside the face's protect. What a protected body takes (the
 * fetched code bytes) sits in the cache's `held` slot, so a raise that leaves the body loses
 * nothing: suiro_exec frees it after protect returns, and suiro_exec_code frees a stale one
 * before fetching again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suiro_face.h"

struct suiro_exec_name {
  void *fn;
  char *name; /* a copy: names are compared, their hash only indexes */
  size_t len;
};

enum { BODY_OK = 0, BODY_REFUSED = 1 }; /* and -1: the face's error is pending */

/* ---- messages ------------------------------------------------------------------------------------- */

static int refuse(suiro_out *out, const char *msg) {
  return suiro_out_fail(out, WIRE_CSTR(SUIRO_CLASS_REMOTE), (suiro_wire_str){ msg, strlen(msg) }, WIRE_CSTR(""), -1);
}

static void say(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t cap, const char *fmt, ...) {
  if (!cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

static const char *lang_name(int lang) {
  switch (lang) {
  case WIRE_LANG_LUA: return "Lua";
  case WIRE_LANG_PYTHON: return "Python";
  case WIRE_LANG_R: return "R";
  default: return NULL;
  }
}

static const char *worker_name(const suiro_exec_ops *ops) {
  const char *n = lang_name(ops->lang);
  return n ? n : ops->lang_name ? ops->lang_name : "this";
}

/* "a Lua function cannot run on a Python worker (...)": the rule of suiro_bind.h section 1. */
static void foreign_message(const suiro_exec_ops *ops, int lang, char *err, size_t cap) {
  const char *fl = lang_name(lang), *wl = worker_name(ops);
  if (fl)
    say(err, cap, "%s %s function cannot run on %s %s worker (send a function name or a call spec)",
        fl[0] == 'R' ? "an" : "a", fl, wl[0] == 'R' ? "an" : "a", wl);
  else
    say(err, cap, "a function of unknown language %d cannot run on %s %s worker (send a function name or a call spec)",
        lang, wl[0] == 'R' ? "an" : "a", wl);
}

/* ---- the cache -------------------------------------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *t = realloc(*arr, n * size);
  if (!t) return -1;
  *arr = t;
  *cap = n;
  return 0;
}

static int code_find(const suiro_exec_cache *c, uint64_t key, void **fn) {
  ptrdiff_t i = suiro_keyidx_find(&c->codes, key);
  if (i < 0) return 0;
  *fn = c->code_fn[i];
  return 1;
}

static int code_keep(suiro_exec_cache *c, uint64_t key, void *fn) {
  if (grow((void **)&c->code_fn, &c->code_cap, c->codes.n + 1, sizeof *c->code_fn) < 0) return -1;
  ptrdiff_t i = suiro_keyidx_add(&c->codes, key);
  if (i < 0) return -1;
  c->code_fn[i] = fn;
  return 0;
}

/* The index key of a function name: in-process only (names are compared after), so a word at a
 * time rather than suiro_fn_key's byte-wise FNV (the content key that crosses processes); a name
 * is hashed on every task. Never 0 (the key index's empty mark). */
static uint64_t name_hash(const char *p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n, v;
  const char *end = p + n;
  for (; end - p > 8; p += 8) {
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  if (n >= 8) /* the last 8 bytes, overlapping the words already mixed */
    memcpy(&v, end - 8, 8);
  else
    for (v = 0; p < end; p++) v = v << 8 | (unsigned char)*p;
  h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 32;
  return h ? h : 1;
}

static int name_find(const suiro_exec_cache *c, uint64_t h, suiro_wire_str name, void **fn) {
  ptrdiff_t i = suiro_keyidx_find(&c->names, h);
  if (i < 0) return 0;
  const struct suiro_exec_name *e = &c->name_fn[i];
  if (e->len != name.len || memcmp(e->name, name.ptr, name.len) != 0) return 0; /* another name, same hash */
  *fn = e->fn;
  return 1;
}

static void name_keep(suiro_exec_cache *c, uint64_t h, suiro_wire_str name, void *fn) {
  if (suiro_keyidx_find(&c->names, h) >= 0) return; /* a colliding name holds the entry: resolve each time */
  if (grow((void **)&c->name_fn, &c->name_cap, c->names.n + 1, sizeof *c->name_fn) < 0) return;
  char *copy = malloc(name.len + 1);
  if (!copy) return;
  ptrdiff_t i = suiro_keyidx_add(&c->names, h);
  if (i < 0) {
    free(copy);
    return;
  }
  memcpy(copy, name.ptr, name.len);
  copy[name.len] = 0;
  c->name_fn[i] = (struct suiro_exec_name){ fn, copy, name.len };
}

void suiro_exec_cache_free(suiro_exec_cache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->names.n; i++) free(c->name_fn[i].name);
  free(c->name_fn);
  free(c->code_fn);
  free(c->held);
  suiro_keyidx_free(&c->codes);
  suiro_keyidx_free(&c->names);
  memset(c, 0, sizeof *c);
}

static void drop_held(suiro_exec_cache *c) {
  free(c->held);
  c->held = NULL;
}

/* Fetches, checks and compiles the code under key (not in the cache). 1, 0 (message in err) or
 * -1 / a raise from by_code. Call inside protect. */
static int code_load(const suiro_exec_ops *ops, void *ud, uint64_t key, void **fn, char *err, size_t cap) {
  suiro_exec_cache *c = ops->cache;
  drop_held(c); /* a stale one: a by_code that raised into someone else's protect */
  suiro_pool *p = suiro_current_pool();
  void *code = NULL;
  size_t len = 0;
  if (!p) {
    say(err, cap, "cannot load the task's function (key %016llx): not in a worker", (unsigned long long)key);
    return 0;
  }
  if (suiro_fn_fetch(p, key, &code, &len) != SUIRO_OK) {
    say(err, cap, "cannot load the task's function (key %016llx): %s", (unsigned long long)key, suiro_last_error());
    return 0;
  }
  c->held = code;
  if (suiro_fn_key(code, len) != key) { /* another process stored other bytes under the key first */
    drop_held(c);
    say(err, cap, "cannot load the task's function (key %016llx): the code stored under its key does not match it",
        (unsigned long long)key);
    return 0;
  }
  void *f = NULL;
  int rc = ops->by_code(ud, key, code, len, &f);
  drop_held(c);
  if (rc < 0) return -1;
  if (rc == 0) {
    say(err, cap, "the task's function (key %016llx) is damaged: its code does not load", (unsigned long long)key);
    return 0;
  }
  if (code_keep(c, key, f) < 0) {
    say(err, cap, "cannot load the task's function (key %016llx): out of memory", (unsigned long long)key);
    return 0;
  }
  *fn = f;
  return 1;
}

int suiro_exec_code(const suiro_exec_ops *ops, void *ud, uint64_t key, void **fn, char *err, size_t errcap) {
  if (code_find(ops->cache, key, fn)) return 1;
  if (key == 0) {
    say(err, errcap, "malformed task: a function without a key or a name");
    return 0;
  }
  return code_load(ops, ud, key, fn, err, errcap);
}

/* ---- a task --------------------------------------------------------------------------------------- */

enum { NEED_NONE, NEED_NAME, NEED_CODE };

typedef struct exec_job {
  const suiro_exec_ops *ops;
  void *ud;
  suiro_out *out;
  void *fn;
  int need;
  uint64_t nargs, hash;
  suiro_wire_item f;
  suiro_wire_reader r;
  char err[400];
} exec_job;

static int exec_body(void *ctx) {
  exec_job *j = ctx;
  const suiro_exec_ops *ops = j->ops;
  if (j->f.tag == WIRE_CALL) return ops->run_call(j->ud, &j->f, &j->r, j->out) < 0 ? -1 : BODY_OK;
  void *fn = j->fn;
  if (j->need == NEED_NAME) {
    suiro_wire_str name = { j->f.data, (size_t)j->f.n };
    int rc = ops->by_name(j->ud, name, &fn);
    if (rc < 0) return -1;
    if (rc == 0) {
      say(j->err, sizeof j->err, "cannot find function \"%.*s\"", (int)(name.len > 200 ? 200 : name.len), name.ptr);
      return BODY_REFUSED;
    }
    name_keep(ops->cache, j->hash, name, fn);
  } else if (j->need == NEED_CODE) {
    int rc = code_load(ops, j->ud, (uint64_t)j->f.i, &fn, j->err, sizeof j->err);
    if (rc < 0) return -1;
    if (rc == 0) return BODY_REFUSED;
  }
  return ops->run(j->ud, fn, &j->f, &j->r, j->nargs, j->out) < 0 ? -1 : BODY_OK;
}

int suiro_exec(const void *arg, size_t len, suiro_out *out, const suiro_exec_ops *ops, void *ud) {
  exec_job j;
  j.ops = ops;
  j.ud = ud;
  j.out = out;
  j.fn = NULL;
  j.need = NEED_NONE;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&j.r, arg, len) != WIRE_OK || suiro_wire_next(&j.r, &it) != WIRE_OK) {
    say(j.err, sizeof j.err, "malformed task: %s", suiro_wire_reader_error(&j.r));
    return refuse(out, j.err);
  }
  if (it.tag != WIRE_LIST || it.n < 1)
    return refuse(out, "malformed task: expected a list [function, arguments...]");
  j.nargs = it.n - 1;
  if (j.nargs > SUIRO_EXEC_MAX_ARGS) {
    say(j.err, sizeof j.err, "malformed task: %llu arguments are too many (at most %d)", (unsigned long long)j.nargs,
        SUIRO_EXEC_MAX_ARGS);
    return refuse(out, j.err);
  }
  if (suiro_wire_next(&j.r, &j.f) != WIRE_OK) {
    say(j.err, sizeof j.err, "malformed task: %s", suiro_wire_reader_error(&j.r));
    return refuse(out, j.err);
  }
  switch (j.f.tag) {
  case WIRE_STR: {
    suiro_wire_str name = { j.f.data, (size_t)j.f.n };
    j.hash = name_hash(name.ptr, name.len);
    if (!name_find(ops->cache, j.hash, name, &j.fn)) j.need = NEED_NAME;
    break;
  }
  case WIRE_FUNC:
    if (j.f.flag != ops->lang) {
      foreign_message(ops, j.f.flag, j.err, sizeof j.err);
      return refuse(out, j.err);
    }
    if (j.f.i != 0 && !code_find(ops->cache, (uint64_t)j.f.i, &j.fn)) j.need = NEED_CODE;
    break;
  case WIRE_CALL:
    if (j.nargs) return refuse(out, "malformed task: a call spec takes no further arguments");
    break;
  default:
    say(j.err, sizeof j.err, "malformed task: expected a function, got %s", suiro_wire_tag_name(j.f.tag));
    return refuse(out, j.err);
  }
  int rc = ops->protect(ud, exec_body, &j);
  drop_held(ops->cache); /* by_code raised while loading (nothing else is held) */
  if (rc == BODY_OK) return 0;
  if (rc == BODY_REFUSED) return refuse(out, j.err);
  return ops->fail(ud, out, -1);
}
