/* test_workers.c — the task protocol of suiro_bind.h section 1 against a Lua, a Python and an R
 * worker: the same malformed or refused tasks, sent through suiro_submit, must come back with one
 * class and one message per case in all three (suiro_exec, engine/src/exec.c, reads every
 * worker's tasks).
 *
 * The workers are those of this checkout: build/bin/suiro (next to this binary's build/tests),
 * python3 -I bindings/python/suiro/_worker.py with the in-tree extension, and Rscript with the
 * package installed in build/R-lib (scripts/build makes all three). A worker that cannot be
 * found fails the test: CI has Python and R, so a suite that silently skipped a face would hide
 * the drift it is here to catch. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_bind.h"
#include "suiro_face.h"

enum { LUA, PY, R, NFACES };
static const char *const face_name[NFACES] = { "Lua", "Python", "R" };
static const int face_lang[NFACES] = { WIRE_LANG_LUA, WIRE_LANG_PYTHON, WIRE_LANG_R };

static char root[PATH_MAX], bindir[PATH_MAX + 16];

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* The checkout (from tests/vectors) and the build's bin directory (this binary's ../bin). */
static void find_paths(void) {
  snprintf(root, sizeof root, "%s", harness_vectors_dir());
  char *v = strstr(root, "/tests/vectors");
  CHECK(v != NULL);
  *v = 0;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0);
  self[n] = 0;
  char *slash = strrchr(self, '/');
  CHECK(slash != NULL);
  *slash = 0;
  snprintf(bindir, sizeof bindir, "%s/../bin", self);
}

static void need(const char *path, const char *what) {
  if (exists(path)) return;
  fprintf(stderr, "test_workers: %s is missing (%s): run scripts/build release\n", path, what);
  exit(1);
}

static suiro_pool *face_pool(int face) {
  static char exe[PATH_MAX + 32], script[PATH_MAX + 64], rlib[PATH_MAX + 32];
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.start_timeout = 60;
  const char *argv_lua[2], *argv_py[4], *argv_r[6], *env[3];
  if (face == LUA) {
    snprintf(exe, sizeof exe, "%s/suiro", bindir);
    need(exe, "the Lua worker");
    argv_lua[0] = exe;
    argv_lua[1] = NULL;
    o.exe = exe;
    o.argv = argv_lua;
    env[0] = "SUIRO_HOST_LANG=lua";
    env[1] = NULL;
  } else if (face == PY) {
    snprintf(script, sizeof script, "%s/bindings/python/suiro/_worker.py", root);
    need(script, "the Python worker");
    need("/usr/bin/python3", "Python");
    argv_py[0] = "/usr/bin/python3";
    argv_py[1] = "-I";
    argv_py[2] = script;
    argv_py[3] = NULL;
    o.exe = "/usr/bin/python3";
    o.argv = argv_py;
    env[0] = "SUIRO_HOST_LANG=python";
    env[1] = NULL;
  } else {
    snprintf(rlib, sizeof rlib, "%s/build/R-lib/suiro", root);
    need(rlib, "the R package");
    snprintf(rlib, sizeof rlib, "R_LIBS=%s/build/R-lib", root);
    const char *rscript = exists("/usr/bin/Rscript") ? "/usr/bin/Rscript" : "/usr/local/bin/Rscript";
    need(rscript, "R");
    argv_r[0] = rscript;
    argv_r[1] = "--vanilla";
    argv_r[2] = "--default-packages=NULL";
    argv_r[3] = "-e";
    argv_r[4] = "suiro:::worker_main()";
    argv_r[5] = NULL;
    o.exe = rscript;
    o.argv = argv_r;
    env[0] = rlib;
    env[1] = "SUIRO_HOST_LANG=r";
    env[2] = NULL;
  }
  o.env = env;
  suiro_pool *p = NULL;
  if (suiro_pool_create(&o, &p) != SUIRO_OK) {
    fprintf(stderr, "test_workers: cannot start the %s pool: %s\n", face_name[face], suiro_last_error());
    exit(1);
  }
  return p;
}

/* ---- tasks ------------------------------------------------------------------------------------ */

typedef struct task_buf {
  suiro_wire_writer w;
  const void *buf;
  size_t len;
} task_buf;

static void begin(task_buf *t) { suiro_wire_writer_init(&t->w, NULL, 0); }
static void finish(task_buf *t) {
  if (suiro_wire_writer_finish(&t->w, &t->buf, &t->len) != WIRE_OK) {
    fprintf(stderr, "test_workers: %s\n", suiro_wire_writer_error(&t->w));
    exit(1);
  }
}

/* The outcome of one task: the kind, class and message (copied). */
typedef struct outcome {
  int kind;
  char cls[64];
  char msg[512];
} outcome;

static outcome run(suiro_pool *p, const void *buf, size_t len) {
  suiro_task t;
  CHECK_OK(suiro_submit(p, SUIRO_FN_BINDING, buf, len, &t, 30));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 60));
  outcome o = { r.kind, "", "" };
  suiro_error_info e;
  if (suiro_result_error(&r, &e) == 0) {
    snprintf(o.cls, sizeof o.cls, "%.*s", (int)e.cls.len, e.cls.ptr);
    snprintf(o.msg, sizeof o.msg, "%.*s", (int)e.message.len, e.message.ptr);
  }
  return o;
}

static int failures;

/* Every face answered the same failure: the class and the message given (a message with %s
 * names the worker's language; want_msg NULL: only the three must agree). */
static void expect(const char *what, outcome got[NFACES], const char *want_cls, const char *want_msg[NFACES]) {
  int bad = 0;
  if (getenv("SUIRO_TEST_VERBOSE"))
    for (int f = 0; f < NFACES; f++)
      fprintf(stderr, "%s: %s: kind %d class \"%s\" message \"%s\"\n", what, face_name[f], got[f].kind, got[f].cls,
              got[f].msg);
  for (int f = 0; f < NFACES; f++) {
    if (got[f].kind != SUIRO_RESULT_ERROR || strcmp(got[f].cls, want_cls) != 0) bad = 1;
    if (want_msg && strcmp(got[f].msg, want_msg[f]) != 0) bad = 1;
    if (!want_msg && (strcmp(got[f].msg, got[0].msg) != 0 || !got[f].msg[0])) bad = 1;
  }
  if (!bad) return;
  failures++;
  fprintf(stderr, "test_workers: %s: the workers disagree with the protocol\n", what);
  for (int f = 0; f < NFACES; f++)
    fprintf(stderr, "  %-6s kind %d class \"%s\" message \"%s\"%s%s%s\n", face_name[f], got[f].kind, got[f].cls,
            got[f].msg, want_msg ? " (want \"" : "", want_msg ? want_msg[f] : "", want_msg ? "\")" : "");
}

static const char *same3(const char *m, const char *out[NFACES]) {
  for (int f = 0; f < NFACES; f++) out[f] = m;
  return m;
}

TEST_T(workers_answer_the_protocol_alike, 240) {
  find_paths();
  suiro_pool *pools[NFACES];
  for (int f = 0; f < NFACES; f++) pools[f] = face_pool(f);
  outcome got[NFACES];
  const char *want[NFACES];
  task_buf t;

  /* a control: a call spec each language can run */
  static const char *const max_name[NFACES] = { "math.max", "builtins.max", "base::max" };
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 1);
    suiro_wire_put_call(&t.w, WIRE_CALL_NAME, (suiro_wire_str){ max_name[f], strlen(max_name[f]) });
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_i64(&t.w, 1);
    suiro_wire_put_i64(&t.w, 2);
    suiro_wire_put_dict(&t.w, 0);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    if (got[f].kind != SUIRO_RESULT_VALUE) {
      failures++;
      fprintf(stderr, "test_workers: control: the %s worker failed: %s: %s\n", face_name[f], got[f].cls, got[f].msg);
    }
    suiro_wire_writer_free(&t.w);
  }

  /* an argument after a call spec */
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_call(&t.w, WIRE_CALL_NAME, (suiro_wire_str){ max_name[f], strlen(max_name[f]) });
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_i64(&t.w, 1);
    suiro_wire_put_i64(&t.w, 2);
    suiro_wire_put_dict(&t.w, 0);
    suiro_wire_put_i64(&t.w, 99);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("an argument after a call spec", got, SUIRO_CLASS_REMOTE,
         (same3("malformed task: a call spec takes no further arguments", want), want));

  /* a function of another language: the message names both */
  static char foreign_msg[NFACES][200];
  for (int f = 0; f < NFACES; f++) {
    int other = (f + 1) % NFACES;
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_func(&t.w, face_lang[other], 12345, 1);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_i64(&t.w, 1);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
    snprintf(foreign_msg[f], sizeof foreign_msg[f],
             "%s %s function cannot run on %s %s worker (send a function name or a call spec)",
             other == R ? "an" : "a", face_name[other], f == R ? "an" : "a", face_name[f]);
    want[f] = foreign_msg[f];
  }
  expect("a function of another language", got, SUIRO_CLASS_REMOTE, want);

  /* an unknown name */
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_str(&t.w, "suiro_no_such_module.no_such_function", 37);
    suiro_wire_put_i64(&t.w, 1);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("an unknown name", got, SUIRO_CLASS_REMOTE,
         (same3("cannot find function \"suiro_no_such_module.no_such_function\"", want), want));

  /* damaged code: bytes published under their own key that are no function of any language */
  static const char garbage[] = "these bytes are not code of any language \x01\x02\x03\xff";
  uint64_t gkey = suiro_fn_key(garbage, sizeof garbage - 1);
  char damaged[200];
  snprintf(damaged, sizeof damaged, "the task's function (key %016llx) is damaged: its code does not load",
           (unsigned long long)gkey);
  for (int f = 0; f < NFACES; f++) {
    CHECK_OK(suiro_fn_publish(pools[f], gkey, garbage, sizeof garbage - 1));
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_func(&t.w, face_lang[f], gkey, 3); /* R's shape: name, environment, argument names */
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_i64(&t.w, 1);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("damaged code", got, SUIRO_CLASS_REMOTE, (same3(damaged, want), want));

  /* code that was never published */
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_func(&t.w, face_lang[f], 0x5eed5eed5eedULL, 3);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_nil(&t.w);
    suiro_wire_put_i64(&t.w, 1);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("code never published", got, SUIRO_CLASS_REMOTE, NULL);
  if (!strstr(got[0].msg, "cannot load the task's function (key 00005eed5eed5eed)")) {
    failures++;
    fprintf(stderr, "test_workers: code never published: unexpected message \"%s\"\n", got[0].msg);
  }

  /* huge counts: a list that claims 2^40 items with one behind it (the reader refuses it) */
  _Alignas(8) unsigned char forged[32];
  {
    begin(&t);
    suiro_wire_put_list(&t.w, 1);
    suiro_wire_put_nil(&t.w);
    finish(&t);
    CHECK(t.len <= sizeof forged);
    memcpy(forged, t.buf, t.len);
    uint64_t hdr;
    memcpy(&hdr, forged + 8, 8);
    hdr = (hdr & 0xffff) | ((uint64_t)1 << 40 << 16); /* the count in bytes 2..7 */
    memcpy(forged + 8, &hdr, 8);
    size_t flen = t.len;
    suiro_wire_writer_free(&t.w);
    for (int f = 0; f < NFACES; f++) got[f] = run(pools[f], forged, flen);
  }
  expect("a count larger than the task", got, SUIRO_CLASS_REMOTE, NULL);
  if (strncmp(got[0].msg, "malformed task: wire: ", 22) != 0) {
    failures++;
    fprintf(stderr, "test_workers: huge count: unexpected message \"%s\"\n", got[0].msg);
  }

  /* huge counts: more arguments than a task may have */
  {
    begin(&t);
    suiro_wire_put_list(&t.w, SUIRO_EXEC_MAX_ARGS + 2);
    suiro_wire_put_str(&t.w, "suiro_no_such_module.no_such_function", 37);
    for (int i = 0; i <= SUIRO_EXEC_MAX_ARGS; i++) suiro_wire_put_nil(&t.w);
    finish(&t);
    for (int f = 0; f < NFACES; f++) got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  char toomany[200];
  snprintf(toomany, sizeof toomany, "malformed task: %d arguments are too many (at most %d)", SUIRO_EXEC_MAX_ARGS + 1,
           SUIRO_EXEC_MAX_ARGS);
  expect("too many arguments", got, SUIRO_CLASS_REMOTE, (same3(toomany, want), want));

  /* a task that is not a list, and an empty one */
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_i64(&t.w, 42);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("a task that is not a list", got, SUIRO_CLASS_REMOTE,
         (same3("malformed task: expected a list [function, arguments...]", want), want));
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 0);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("an empty task list", got, SUIRO_CLASS_REMOTE,
         (same3("malformed task: expected a list [function, arguments...]", want), want));

  /* a function item that is no function */
  for (int f = 0; f < NFACES; f++) {
    begin(&t);
    suiro_wire_put_list(&t.w, 2);
    suiro_wire_put_i64(&t.w, 7);
    suiro_wire_put_i64(&t.w, 1);
    finish(&t);
    got[f] = run(pools[f], t.buf, t.len);
    suiro_wire_writer_free(&t.w);
  }
  expect("a function item that is no function", got, SUIRO_CLASS_REMOTE,
         (same3("malformed task: expected a function, got i64", want), want));

  for (int f = 0; f < NFACES; f++) CHECK_OK(suiro_pool_stop(pools[f], 10));
  CHECK_EQ(failures, 0);
}
