/* test_opts.c — suiro_pool_create_from (suiro_face.h section 6): a pool from a wire DICT of
 * options, every option's refusal (one message per rule, compared whole), bytes that are no dict,
 * damaged or truncated, and what the face keeps (suiro_pool_info). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suiro_face.h"

NATIVE(o_getenv) { /* the worker's value of the variable named by arg ("" when unset) */
  (void)ud;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)len, (const char *)arg);
  const char *v = getenv(name);
  return suiro_out_write(out, v ? v : "", v ? strlen(v) : 0);
}

typedef struct enc {
  suiro_wire_writer w;
  uint64_t stack[128];
  const void *buf;
  size_t len;
} enc;

static void begin(enc *e, uint64_t n) {
  suiro_wire_writer_init(&e->w, e->stack, sizeof e->stack);
  CHECK(suiro_wire_put_dict(&e->w, n) == WIRE_OK);
}
static void key(enc *e, const char *k) { CHECK(suiro_wire_put_str(&e->w, k, strlen(k)) == WIRE_OK); }
static void str(enc *e, const char *s) { CHECK(suiro_wire_put_str(&e->w, s, strlen(s)) == WIRE_OK); }
static void done(enc *e) { CHECK(suiro_wire_writer_finish(&e->w, &e->buf, &e->len) == WIRE_OK); }

/* The bytes are refused with exactly this message, and no pool is made. */
static void refused_bytes(const void *buf, size_t len, const char *msg) {
  suiro_pool *p = (suiro_pool *)&p;
  suiro_pool_info info;
  CHECK_EQ(suiro_pool_create_from(buf, len, WIRE_LANG_LUA, &p, &info), SUIRO_ERR);
  CHECK(p == NULL);
  if (strcmp(suiro_last_error(), msg) != 0) {
    fprintf(stderr, "got:      %s\nexpected: %s\n", suiro_last_error(), msg);
    exit(1);
  }
}
static void refused(enc *e, const char *msg) {
  done(e);
  refused_bytes(e->buf, e->len, msg);
  suiro_wire_writer_free(&e->w);
}

/* A dict of one option whose value `put` writes, refused with msg. */
#define ONE(k, put, msg)  \
  do {                    \
    enc e_;               \
    begin(&e_, 1);        \
    key(&e_, k);          \
    { enc *e = &e_; put; } \
    refused(&e_, msg);    \
  } while (0)

TEST(good_dict_makes_the_pool_and_its_info) {
  enc e;
  begin(&e, 15);
  key(&e, "workers"); CHECK(suiro_wire_put_f64(&e.w, 1.0) == WIRE_OK); /* R's numbers are doubles */
  key(&e, "max_workers"); suiro_wire_put_i64(&e.w, 3);
  key(&e, "ring_cap"); suiro_wire_put_i64(&e.w, 64);
  key(&e, "slot_size"); suiro_wire_put_i64(&e.w, 512);
  key(&e, "result_slots"); suiro_wire_put_i64(&e.w, 1024);
  key(&e, "result_size"); suiro_wire_put_i64(&e.w, 128);
  key(&e, "respawn"); suiro_wire_put_bool(&e.w, 0);
  key(&e, "start_timeout"); suiro_wire_put_i64(&e.w, 20);
  key(&e, "timeout"); suiro_wire_put_f64(&e.w, 2.5);
  key(&e, "name"); str(&e, "ingest");
  key(&e, "lang"); str(&e, "python");
  key(&e, "argv"); suiro_wire_put_nil(&e.w); /* NIL: absent, the default command */
  key(&e, "env"); suiro_wire_put_dict(&e.w, 1); str(&e, "SUIRO_OPTS_TEST"); str(&e, "a=b c");
  key(&e, "backend"); str(&e, "local");
  key(&e, "launcher"); suiro_wire_put_dict(&e.w, 1); str(&e, "kind"); suiro_wire_put_list(&e.w, 1); str(&e, "x");
  done(&e);
  suiro_pool *p = NULL;
  suiro_pool_info info;
  CHECK_OK(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_LUA, &p, &info));
  CHECK(p != NULL);
  CHECK_EQ(info.lang, WIRE_LANG_PYTHON);
  CHECK(info.timeout == 2.5);
  CHECK(strcmp(info.name, "ingest") == 0);
  suiro_pool_stats s;
  CHECK(suiro_pool_status(p, &s, NULL, 0) >= 0);
  CHECK_EQ(s.workers, 1);
  CHECK_EQ(s.max_workers, 3);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("o_getenv"), "SUIRO_OPTS_TEST", 15, &t, 5));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  CHECK(r.len == 5 && memcmp(r.data, "a=b c", 5) == 0);
  CHECK_OK(suiro_pool_stop(p, 5));
  suiro_wire_writer_free(&e.w);
}

/* What an MPI serving rank does (engine/cluster/serve.c): its own variables over the options' env. */
TEST(extra_env_replaces_the_options_entries_of_its_names) {
  enc e;
  begin(&e, 2);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 1);
  key(&e, "env"); suiro_wire_put_dict(&e.w, 2);
  str(&e, "SUIRO_OPTS_TEST"); str(&e, "from rank 0");
  str(&e, "SUIRO_OPTS_KEPT"); str(&e, "kept");
  done(&e);
  const char *const extra[] = { "SUIRO_OPTS_TEST=this rank", "SUIRO_OPTS_NEW=new", NULL };
  suiro_pool *p = NULL;
  CHECK_OK(suiro_pool_create_from_env(e.buf, e.len, WIRE_LANG_LUA, extra, &p, NULL));
  const char *names[3] = { "SUIRO_OPTS_TEST", "SUIRO_OPTS_KEPT", "SUIRO_OPTS_NEW" };
  const char *want[3] = { "this rank", "kept", "new" };
  for (int i = 0; i < 3; i++) {
    suiro_task t;
    CHECK_OK(suiro_submit(p, suiro_fn_id("o_getenv"), names[i], strlen(names[i]), &t, 5));
    suiro_result r;
    CHECK_OK(suiro_collect(p, t, &r, 10));
    CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
    CHECK(r.len == strlen(want[i]) && memcmp(r.data, want[i], r.len) == 0);
  }
  CHECK_OK(suiro_pool_stop(p, 5));
  suiro_wire_writer_free(&e.w);
}

TEST(defaults_no_info_and_unaligned_bytes) {
  enc e;
  begin(&e, 2);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 0);
  key(&e, "timeout"); suiro_wire_put_f64(&e.w, INFINITY);
  done(&e);
  suiro_pool *p = NULL;
  suiro_pool_info info;
  CHECK_OK(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_R, &p, &info));
  CHECK_EQ(info.lang, WIRE_LANG_R); /* no lang: the host's */
  CHECK(info.timeout == -1);        /* no limit */
  CHECK(info.name[0] == 0);
  CHECK_OK(suiro_pool_stop(p, 5));
  CHECK_OK(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_LUA, &p, NULL));
  CHECK_OK(suiro_pool_stop(p, 5));
  char *odd = malloc(e.len + 1); /* read from an aligned copy */
  memcpy(odd + 1, e.buf, e.len);
  CHECK_OK(suiro_pool_create_from(odd + 1, e.len, WIRE_LANG_LUA, &p, NULL));
  CHECK_OK(suiro_pool_stop(p, 5));
  free(odd);
  begin(&e, 0); /* an empty dict: every default (one worker) */
  done(&e);
  CHECK_OK(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_PYTHON, &p, &info));
  suiro_pool_stats s;
  CHECK(suiro_pool_status(p, &s, NULL, 0) >= 0);
  CHECK_EQ(s.workers, 1);
  CHECK(info.timeout == -1);
  CHECK_OK(suiro_pool_stop(p, 5));
  suiro_wire_writer_free(&e.w);
}

TEST(sizes_and_counts_are_range_checked) {
  ONE("workers", suiro_wire_put_i64(&e->w, -1), "pool: workers must be an integer in 0..64, got -1");
  ONE("workers", suiro_wire_put_i64(&e->w, 65), "pool: workers must be an integer in 0..64, got 65");
  ONE("workers", suiro_wire_put_f64(&e->w, 2.5), "pool: workers must be an integer in 0..64, got 2.5");
  ONE("workers", str(e, "4"), "pool: workers must be an integer in 0..64, got \"4\" (a string)");
  ONE("workers", suiro_wire_put_bool(&e->w, 1), "pool: workers must be an integer in 0..64, got true");
  ONE("max_workers", suiro_wire_put_i64(&e->w, 0), "pool: max_workers must be an integer in 1..64, got 0");
  ONE("ring_cap", suiro_wire_put_i64(&e->w, 1000), "pool: ring_cap must be a power of two in 2..1048576, got 1000");
  ONE("ring_cap", suiro_wire_put_i64(&e->w, 1 << 21), "pool: ring_cap must be a power of two in 2..1048576, got 2097152");
  ONE("slot_size", suiro_wire_put_i64(&e->w, 32), "pool: slot_size must be a power of two in 64..65536, got 32");
  ONE("result_size", suiro_wire_put_i64(&e->w, 131072),
      "pool: result_size must be a power of two in 64..65536, got 131072");
  ONE("result_slots", suiro_wire_put_i64(&e->w, 0), "pool: result_slots must be an integer in 1..4194304, got 0");
  enc e;
  begin(&e, 2);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 4);
  key(&e, "max_workers"); suiro_wire_put_i64(&e.w, 2);
  refused(&e, "pool: max_workers must be at least workers (4), got 2");
}

TEST(durations_flags_and_names) {
  ONE("timeout", suiro_wire_put_f64(&e->w, NAN),
      "pool: timeout must be a number of seconds >= 0 (1e12 or more: no limit), got nan");
  ONE("start_timeout", suiro_wire_put_i64(&e->w, -1),
      "pool: start_timeout must be a number of seconds >= 0 (1e12 or more: no limit), got -1");
  ONE("timeout", str(e, "1s"),
      "pool: timeout must be a number of seconds >= 0 (1e12 or more: no limit), got \"1s\" (a string)");
  ONE("respawn", suiro_wire_put_i64(&e->w, 1), "pool: respawn must be true or false, got 1");
  ONE("respawn", suiro_wire_put_bool(&e->w, WIRE_NA_BOOL), "pool: respawn must be true or false, got NA");
  ONE("name", str(e, ""), "pool: name must be a non-empty string without NUL bytes, got \"\" (a string)");
  ONE("lang", str(e, "go"), "pool: lang must be \"lua\", \"python\" or \"r\", got \"go\" (a string)");
  ONE("backend", str(e, "cloud"), "pool: backend must be \"local\" or \"mpi\", got \"cloud\" (a string)");
}

TEST(command_exe_argv_env) {
  ONE("exe", suiro_wire_put_i64(&e->w, 5), "pool: exe must be a non-empty string without NUL bytes (a path), got 5");
  ONE("exe", CHECK(suiro_wire_put_str(&e->w, "a\0b", 3) == WIRE_OK),
      "pool: exe must be a non-empty string without NUL bytes (a path), got \"a\" (a string)");
  ONE("argv", str(e, "x"), "pool: argv must be a list of strings, got \"x\" (a string)");
  ONE("argv", (suiro_wire_put_list(&e->w, 2), str(e, "a"), suiro_wire_put_i64(&e->w, 1)),
      "pool: argv item 2 (of 2) must be a string without NUL bytes, got 1");
  ONE("env", (suiro_wire_put_list(&e->w, 1), str(e, "A=1")), "pool: env must be a dict of strings, got a list");
  ONE("env", (suiro_wire_put_dict(&e->w, 1), str(e, "A-B"), str(e, "1")),
      "pool: env: variable names are letters, digits and _, got \"A-B\" (a string)");
  ONE("env", (suiro_wire_put_dict(&e->w, 1), str(e, "A"), suiro_wire_put_i64(&e->w, 1)),
      "pool: env.A must be a string without NUL bytes, got 1");
}

TEST(unknown_twice_and_not_a_dict) {
  ONE("wrokers", suiro_wire_put_i64(&e->w, 1),
      "pool: unknown option \"wrokers\" (options: workers, max_workers, ring_cap, slot_size, result_slots, "
      "result_size, respawn, start_timeout, timeout, name, lang, exe, argv, env, backend, launcher)");
  enc e;
  begin(&e, 2);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 1);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 2);
  refused(&e, "pool: option \"workers\" is given twice");
  suiro_wire_writer_init(&e.w, e.stack, sizeof e.stack);
  suiro_wire_put_list(&e.w, 1);
  suiro_wire_put_i64(&e.w, 1);
  refused(&e, "pool: options must be a dict, got a list");
  suiro_wire_writer_init(&e.w, e.stack, sizeof e.stack);
  suiro_wire_put_i64(&e.w, 7);
  refused(&e, "pool: options must be a dict, got an integer");
}

/* "pool: options: wire: ..." with the reader's words (not compared whole: the reader's). */
static void damaged(const void *buf, size_t len) {
  suiro_pool *p = (suiro_pool *)&p;
  CHECK_EQ(suiro_pool_create_from(buf, len, WIRE_LANG_LUA, &p, NULL), SUIRO_ERR);
  CHECK(p == NULL);
  if (strncmp(suiro_last_error(), "pool: options: wire: ", 21) != 0) {
    fprintf(stderr, "got: %s\n", suiro_last_error());
    exit(1);
  }
}

TEST(truncated_damaged_and_misused) {
  enc e;
  begin(&e, 3);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 1);
  key(&e, "argv"); suiro_wire_put_list(&e.w, 2); str(&e, "a-long-enough-argument"); str(&e, "b");
  key(&e, "env"); suiro_wire_put_dict(&e.w, 1); str(&e, "A"); str(&e, "1");
  done(&e);
  for (size_t cut = 8; cut < e.len; cut += 8) damaged(e.buf, cut); /* every word-aligned prefix */
  damaged(e.buf, 3);                                               /* not whole words */
  damaged(e.buf, 0);
  char *junk = calloc(1, e.len + 8); /* the dict and a word after it */
  memcpy(junk, e.buf, e.len);
  damaged(junk, e.len + 8);
  memset(junk, 0xff, e.len); /* no header */
  damaged(junk, e.len);
  free(junk);
  refused_bytes(NULL, 8, "pool: options: NULL");
  suiro_pool *p = (suiro_pool *)&p;
  CHECK_EQ(suiro_pool_create_from(e.buf, e.len, 9, &p, NULL), SUIRO_ERR);
  CHECK(p == NULL);
  CHECK(strcmp(suiro_last_error(), "pool: host_lang must be WIRE_LANG_LUA, _PYTHON or _R, got 9") == 0);
  CHECK_EQ(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_LUA, NULL, NULL), SUIRO_ERR);
  suiro_wire_writer_free(&e.w);
}

TEST(create_failure_keeps_its_message) {
  enc e;
  begin(&e, 3);
  key(&e, "workers"); suiro_wire_put_i64(&e.w, 1);
  key(&e, "start_timeout"); suiro_wire_put_i64(&e.w, 5);
  key(&e, "exe"); str(&e, "/nonexistent/suiro-worker");
  done(&e);
  suiro_pool *p = (suiro_pool *)&p;
  CHECK(suiro_pool_create_from(e.buf, e.len, WIRE_LANG_LUA, &p, NULL) != SUIRO_OK);
  CHECK(p == NULL);
  CHECK(strncmp(suiro_last_error(), "pool: ", 6) == 0 && strlen(suiro_last_error()) > 6);
  suiro_wire_writer_free(&e.w);
}
