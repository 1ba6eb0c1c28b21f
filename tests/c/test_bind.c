/* test_bind.c — the binding seam (suiro_bind.h): random streams against their golden draws,
 * error payloads, function identity, map plans and cells, zero-copy references (validation,
 * grants, families), waiting on several pools. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_bind.h"

/* ---- random streams ------------------------------------------------------------------------- */

/* tests/vectors/rng.txt: the first draws of a few streams, which every face reproduces:
 *   next  SEED INDEX n1 n2 n3 n4          suiro_rng_next, as unsigned decimals
 *   unit  SEED INDEX u1 u2 u3             suiro_rng_unit (%.17g)
 *   range SEED INDEX LO HI v1 v2 v3 v4    suiro_rng_range(LO, HI)
 * SEED is an unsigned 64-bit integer (a Lua, Python or R seed s is (uint64) s). Regenerate with
 * `build/tests/test_bind --write-rng` only when the stream is meant to change (never lightly:
 * seeded results of every user change with it). */
static const uint64_t seeds[] = { 0, 1, 42, 12345678901234ull, UINT64_MAX };
static const uint64_t indexes[] = { 0, 1, 7, 999999 };

static void write_rng(FILE *f) {
  fprintf(f, "# suiro per-element random streams: see tests/c/test_bind.c for the format\n");
  for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++)
    for (size_t i = 0; i < sizeof indexes / sizeof *indexes; i++) {
      suiro_rng r;
      suiro_rng_seed(&r, seeds[s], indexes[i]);
      fprintf(f, "next %llu %llu", (unsigned long long)seeds[s], (unsigned long long)indexes[i]);
      for (int k = 0; k < 4; k++) fprintf(f, " %llu", (unsigned long long)suiro_rng_next(&r));
      fprintf(f, "\nunit %llu %llu", (unsigned long long)seeds[s], (unsigned long long)indexes[i]);
      suiro_rng_seed(&r, seeds[s], indexes[i]);
      for (int k = 0; k < 3; k++) fprintf(f, " %.17g", suiro_rng_unit(&r));
      static const int64_t los[] = { 1, -5, INT64_MIN };
      static const int64_t his[] = { 6, 5, INT64_MAX };
      for (int q = 0; q < 3; q++) {
        suiro_rng_seed(&r, seeds[s], indexes[i]);
        fprintf(f, "\nrange %llu %llu %lld %lld", (unsigned long long)seeds[s], (unsigned long long)indexes[i],
                (long long)los[q], (long long)his[q]);
        for (int k = 0; k < 4; k++) fprintf(f, " %lld", (long long)suiro_rng_range(&r, los[q], his[q]));
      }
      fprintf(f, "\n");
    }
}

TEST(rng_matches_golden_draws) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rng.txt", harness_vectors_dir());
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  char line[512];
  int checked = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char kind[8];
    unsigned long long seed, index;
    int off = 0;
    CHECK(sscanf(line, "%7s %llu %llu%n", kind, &seed, &index, &off) == 3);
    suiro_rng r;
    suiro_rng_seed(&r, seed, index);
    const char *p = line + off;
    if (!strcmp(kind, "next")) {
      for (int k = 0; k < 4; k++) {
        unsigned long long want;
        int used;
        CHECK(sscanf(p, "%llu%n", &want, &used) == 1);
        p += used;
        CHECK(suiro_rng_next(&r) == want);
      }
    } else if (!strcmp(kind, "unit")) {
      for (int k = 0; k < 3; k++) {
        double want;
        int used;
        CHECK(sscanf(p, "%lf%n", &want, &used) == 1);
        p += used;
        double got = suiro_rng_unit(&r);
        CHECK(got == want && got >= 0 && got < 1);
      }
    } else {
      CHECK(!strcmp(kind, "range"));
      long long lo, hi;
      int used;
      CHECK(sscanf(p, "%lld %lld%n", &lo, &hi, &used) == 2);
      p += used;
      for (int k = 0; k < 4; k++) {
        long long want;
        CHECK(sscanf(p, "%lld%n", &want, &used) == 1);
        p += used;
        int64_t got = suiro_rng_range(&r, lo, hi);
        CHECK(got == want && got >= lo && got <= hi);
      }
    }
    checked++;
  }
  fclose(f);
  CHECK_EQ(checked, 5 * 4 * 5);
}

TEST(rng_streams_differ_and_range_is_unbiased) {
  suiro_rng a, b;
  suiro_rng_seed(&a, 42, 0);
  suiro_rng_seed(&b, 42, 1);
  CHECK(suiro_rng_next(&a) != suiro_rng_next(&b));
  int counts[6] = { 0 };
  suiro_rng_seed(&a, 7, 3);
  for (int i = 0; i < 60000; i++) counts[suiro_rng_range(&a, 1, 6) - 1]++;
  for (int k = 0; k < 6; k++) CHECK(counts[k] > 9400 && counts[k] < 10600);
  CHECK(suiro_rng_current() == NULL);
}

/* ---- error payloads ------------------------------------------------------------------------- */

TEST(error_payloads_round_trip) {
  _Alignas(8) unsigned char buf[256];
  size_t n = suiro_error_encode(buf, sizeof buf, WIRE_CSTR("ValueError"), WIRE_CSTR("bad x"), WIRE_CSTR("tb"), 41);
  CHECK(n > 0 && n <= sizeof buf);
  suiro_error_info e;
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, buf, n, &e), 0);
  CHECK(e.cls.len == 10 && !memcmp(e.cls.ptr, "ValueError", 10));
  CHECK(e.message.len == 5 && !memcmp(e.message.ptr, "bad x", 5));
  CHECK(e.traceback.len == 2 && e.index == 41);
  /* unaligned payloads (map heaps) are read through a copy */
  unsigned char odd[260];
  memcpy(odd + 1, buf, n);
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, odd + 1, n, &e), 0);
  CHECK(e.index == 41 && e.message.len == 5);
  /* plain text counts as a remote message; the engine's kinds have their classes */
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, "oops", 4, &e), 0);
  CHECK(!memcmp(e.cls.ptr, "remote", 6) && e.message.len == 4 && e.index == -1);
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_DIED, "worker 0 (pid 9) died", 21, &e), 0);
  CHECK(!memcmp(e.cls.ptr, SUIRO_CLASS_WORKER_DIED, e.cls.len));
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_CANCELLED, "", 0, &e), 0);
  CHECK(!memcmp(e.cls.ptr, SUIRO_CLASS_CANCELLED, e.cls.len) && e.message.len > 0);
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_VALUE, "", 0, &e), -1);
  /* a message too long for the buffer is cut, never overflowing it */
  char big[4000];
  memset(big, 'x', sizeof big);
  n = suiro_error_encode(buf, sizeof buf, WIRE_CSTR("remote"), (suiro_wire_str){ big, sizeof big }, (suiro_wire_str){ big, 100 }, -1);
  CHECK(n > 0 && n <= sizeof buf);
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, buf, n, &e), 0);
  CHECK(e.message.len > 0 && e.message.len < sizeof buf);
}

NATIVE(fails_with_class) {
  (void)arg; (void)len; (void)ud;
  return suiro_out_fail(out, WIRE_CSTR("KeyError"), WIRE_CSTR("'k'"), WIRE_CSTR("at line 3"), -1);
}

TEST(out_fail_reaches_the_host) {
  suiro_pool *p = test_pool(1);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("fails_with_class"), "", 0, &t, 5));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_ERROR);
  suiro_error_info e;
  CHECK_EQ(suiro_result_error(&r, &e), 0);
  CHECK(e.cls.len == 8 && !memcmp(e.cls.ptr, "KeyError", 8));
  CHECK(e.traceback.len == 9 && e.slot == 0 && e.pid > 0);
  CHECK_OK(suiro_pool_stop(p, 5));
}

/* ---- function identity ---------------------------------------------------------------------- */

NATIVE(fetch_code) {
  (void)len; (void)ud;
  uint64_t key;
  memcpy(&key, arg, 8);
  void *code;
  size_t n;
  if (suiro_fn_fetch(suiro_current_pool(), key, &code, &n) != SUIRO_OK) return suiro_out_error(out, "%s", suiro_last_error());
  suiro_out_write(out, code, n);
  free(code);
  return 0;
}

TEST(functions_publish_once_and_fetch_anywhere) {
  suiro_pool *p = test_pool(1);
  const char code[] = "function body";
  uint64_t key = suiro_fn_key(code, sizeof code);
  CHECK(key != 0 && key == suiro_fn_key(code, sizeof code) && key != suiro_fn_key(code, sizeof code - 1));
  CHECK_OK(suiro_fn_publish(p, key, code, sizeof code));
  CHECK_OK(suiro_fn_publish(p, key, code, sizeof code)); /* memo: no second store */
  CHECK_EQ(suiro_fn_publish(p, 0, code, 1), SUIRO_ERR);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("fetch_code"), &key, 8, &t, 5));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  CHECK(r.len == sizeof code && !memcmp(r.data, code, sizeof code));
  uint64_t missing = key ^ 1;
  CHECK_OK(suiro_submit(p, suiro_fn_id("fetch_code"), &missing, 8, &t, 5));
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_ERROR);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(key_index_gives_dense_indices) {
  suiro_keyidx t = { 0 };
  CHECK_EQ(suiro_keyidx_find(&t, 42), -1);
  CHECK_EQ(suiro_keyidx_add(&t, 0), -1); /* 0 is never a key */
  for (uint64_t i = 0; i < 5000; i++) /* keys that share low bits, through several growths */
    CHECK_EQ(suiro_keyidx_add(&t, (i + 1) << 20), (ptrdiff_t)i);
  CHECK_EQ(t.n, 5000);
  CHECK_EQ(suiro_keyidx_add(&t, 7ull << 20), 6); /* present: its index, nothing added */
  CHECK_EQ(t.n, 5000);
  for (uint64_t i = 0; i < 5000; i++) CHECK_EQ(suiro_keyidx_find(&t, (i + 1) << 20), (ptrdiff_t)i);
  CHECK_EQ(suiro_keyidx_find(&t, 5001ull << 20), -1);
  CHECK_EQ(suiro_keyidx_find(&t, 1), -1);
  suiro_keyidx_free(&t);
  CHECK(t.n == 0 && t.cap == 0 && t.keys == NULL);
  CHECK_EQ(suiro_keyidx_find(&t, 1ull << 20), -1);
}

/* ---- cells ------------------------------------------------------------------------------------ */

TEST(cells_follow_the_range_rules) {
  char err[128];
  double d;
  float f;
  int64_t i64;
  int32_t i32;
  uint8_t u8;
  CHECK_EQ(suiro_cell_put_int(&d, WIRE_T_F64, 3, err, sizeof err), 0);
  CHECK(d == 3.0);
  CHECK_EQ(suiro_cell_put_int(&i32, WIRE_T_I32, 3000000000ll, err, sizeof err), -1);
  CHECK(strstr(err, "template i32 cannot hold 3000000000") != NULL);
  CHECK_EQ(suiro_cell_put_int(&u8, WIRE_T_U8, 300, err, sizeof err), -1);
  CHECK(!strcmp(err, "template u8 cannot hold 300"));
  CHECK_EQ(suiro_cell_put_int(&u8, WIRE_T_U8, 255, err, sizeof err), 0);
  CHECK_EQ(u8, 255);
  CHECK_EQ(suiro_cell_put_real(&i64, WIRE_T_I64, 4.0, err, sizeof err), 0);
  CHECK_EQ(i64, 4);
  CHECK_EQ(suiro_cell_put_real(&i64, WIRE_T_I64, 4.5, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_real(&i64, WIRE_T_I64, NAN, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_real(&i64, WIRE_T_I64, 0x1p63, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_real(&i64, WIRE_T_I64, -0x1p63, err, sizeof err), 0);
  CHECK(i64 == INT64_MIN);
  CHECK_EQ(suiro_cell_put_real(&f, WIRE_T_F32, 1.5, err, sizeof err), 0);
  CHECK(f == 1.5f);
  CHECK_EQ(suiro_cell_put_bool(&u8, WIRE_T_BOOL, 1, err, sizeof err), 0);
  CHECK_EQ(u8, 1);
  CHECK_EQ(suiro_cell_put_bool(&d, WIRE_T_F64, 1, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_int(&u8, WIRE_T_BOOL, 1, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_na(&d, WIRE_T_F64, err, sizeof err), 0);
  uint64_t bits;
  memcpy(&bits, &d, 8);
  CHECK(suiro_wire_is_na_f64_bits(bits));
  CHECK_EQ(suiro_cell_put_na(&i32, WIRE_T_I32, err, sizeof err), 0);
  CHECK(i32 == INT32_MIN);
  CHECK_EQ(suiro_cell_put_na(&u8, WIRE_T_U8, err, sizeof err), -1);
  CHECK(strstr(err, "no NA") != NULL);
}

TEST(templates_are_checked) {
  char err[200];
  suiro_template t;
  memset(&t, 0, sizeof t);
  uint64_t w;
  t.kind = SUIRO_OUT_SCALAR;
  t.type = WIRE_T_C128;
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), -1);
  t.type = WIRE_T_F64;
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), 0);
  CHECK_EQ(w, 1);
  t.kind = SUIRO_OUT_ARRAY;
  t.ndim = 2;
  t.shape[0] = 3;
  t.shape[1] = 4;
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), 0);
  CHECK_EQ(w, 12);
  t.shape[1] = UINT64_MAX / 2;
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), -1);
  t.kind = SUIRO_OUT_RECORD;
  t.nfields = 2;
  strcpy(t.fields[0].name, "mean");
  t.fields[0].type = WIRE_T_F64;
  strcpy(t.fields[1].name, "mean");
  t.fields[1].type = WIRE_T_I32;
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), -1);
  CHECK(strstr(err, "twice") != NULL);
  strcpy(t.fields[1].name, "n");
  CHECK_EQ(suiro_template_check(&t, &w, err, sizeof err), 0);
}

/* ---- map plans ------------------------------------------------------------------------------- */

/* A native runner over plans: the function buffer holds a LIST [STR op]; "square" writes x*x into
 * the template's cells (or x*x as an i64 wire value into slots), "fail3" fails element 3, "draw"
 * writes the element's first random unit. */
static int plan_runner(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)ud;
  if (fn != SUIRO_FN_MAP) return suiro_out_error(out, "unexpected task");
  suiro_map *m;
  unsigned r;
  if (suiro_map_attach(arg, len, &m, &r) != SUIRO_OK) return suiro_out_error(out, "%s", suiro_last_error());
  const suiro_plan *pl = suiro_plan_of(m);
  if (!pl) {
    suiro_map_detach(m);
    return suiro_out_error(out, "%s", suiro_last_error());
  }
  const void *fb;
  size_t fl;
  suiro_plan_fn(pl, &fb, &fl);
  suiro_wire_reader rd;
  suiro_wire_item it;
  char op[16] = "";
  if (suiro_wire_reader_init(&rd, fb, fl) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK &&
      it.tag == WIRE_STR && it.n < sizeof op)
    memcpy(op, it.data, it.n);
  void *outp = suiro_map_runner_output(m);
  uint64_t b, e;
  char err[128];
  while (suiro_map_claim(m, &b, &e)) {
    for (uint64_t i = b; i < e; i++) {
      suiro_plan_enter(pl, i);
      suiro_elem el;
      if (suiro_plan_elem(pl, i, &el) != 0) {
        suiro_map_fail(m, i, "bad", 3);
        break;
      }
      double x = el.kind == 'f' ? el.f : (double)el.i;
      if (!strcmp(op, "fail3") && i == 3) {
        _Alignas(8) unsigned char eb[128];
        size_t n = suiro_error_encode(eb, sizeof eb, WIRE_CSTR("remote"), WIRE_CSTR("three"), WIRE_CSTR(""), (int64_t)i);
        suiro_map_fail(m, i, eb, n);
        suiro_plan_leave();
        break;
      }
      if (!strcmp(op, "spin") && i == 0)
        for (volatile unsigned long k = 0;; k++) {
        }
      if (!strcmp(op, "draw")) x = suiro_rng_current() ? suiro_rng_unit(suiro_rng_current()) : -1;
      const suiro_template *t = suiro_plan_template(pl);
      if (t) {
        int type;
        void *cell = suiro_plan_cell(pl, outp, i, 0, &type);
        if (!strcmp(op, "draw")) suiro_cell_put_real(cell, type, x, err, sizeof err);
        else if (suiro_cell_put_real(cell, type, x * x, err, sizeof err) != 0) {
          suiro_map_fail(m, i, err, strlen(err));
          suiro_plan_leave();
          break;
        }
      } else {
        _Alignas(8) unsigned char vb[64];
        suiro_wire_writer w;
        suiro_wire_writer_init(&w, vb, sizeof vb);
        suiro_wire_put_list(&w, 1);
        suiro_wire_put_i64(&w, (int64_t)(x * x));
        const void *vp;
        size_t vl;
        suiro_wire_writer_finish(&w, &vp, &vl);
        suiro_map_put(m, i, vp, vl);
        suiro_wire_writer_free(&w);
      }
      suiro_plan_leave();
      if (suiro_map_cancelled(m)) break;
    }
    suiro_map_completed(m, b, e);
  }
  suiro_map_detach(m);
  return 0;
}

__attribute__((constructor)) static void install(void) { suiro_set_executor(plan_runner, NULL); }

static size_t fn_buf(void *buf, const char *op) {
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, buf, 64);
  suiro_wire_put_list(&w, 1);
  suiro_wire_put_str(&w, op, strlen(op));
  const void *p;
  size_t n;
  suiro_wire_writer_finish(&w, &p, &n);
  memmove(buf, p, n);
  suiro_wire_writer_free(&w);
  return n;
}

/* A scalar f64 template, and a spec mapping op over the range 0, 1, ..., n - 1 into it. */
static suiro_template f64_template(void) {
  suiro_template t;
  memset(&t, 0, sizeof t);
  t.kind = SUIRO_OUT_SCALAR;
  t.type = WIRE_T_F64;
  return t;
}

static suiro_plan_spec range_spec(void *fb, const char *op, uint64_t n, const suiro_template *t) {
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, op);
  s.in_kind = SUIRO_IN_RANGE;
  s.n = n;
  s.step = 1;
  s.tpl = t;
  return s;
}

TEST(plans_run_ranges_arrays_and_values) {
  suiro_pool *p = test_pool(2);
  _Alignas(8) unsigned char fb[64];
  suiro_plan_spec s;
  suiro_template t;
  memset(&t, 0, sizeof t);
  t.kind = SUIRO_OUT_SCALAR;
  t.type = WIRE_T_F64;
  /* a range into f64 cells */
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, "square");
  s.in_kind = SUIRO_IN_RANGE;
  s.n = 1000;
  s.start = -10;
  s.step = 3;
  s.tpl = &t;
  suiro_map *m;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_OK(suiro_map_wait(m, 20));
  suiro_error_info e;
  CHECK_EQ(suiro_map_failure(m, &e), 0);
  const suiro_plan *pl = suiro_plan_of(m);
  CHECK(pl != NULL);
  uint64_t count;
  const double *col = suiro_plan_column(pl, suiro_map_output(m), 0, &count);
  CHECK_EQ(count, 1000);
  for (int i = 0; i < 1000; i++) CHECK(col[i] == (double)(-10 + 3 * i) * (-10 + 3 * i));
  suiro_map_free(m);
  /* an i32 array into untyped slots */
  int32_t xs[50];
  for (int i = 0; i < 50; i++) xs[i] = i - 25;
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, "square");
  s.in_kind = SUIRO_IN_ARRAY;
  s.in_type = WIRE_T_I32;
  s.in_data = xs;
  s.n = 50;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_OK(suiro_map_wait(m, 20));
  for (int i = 0; i < 50; i++) {
    const void *d;
    size_t n;
    CHECK(suiro_map_result(m, (uint64_t)i, &d, &n));
    suiro_wire_reader rd;
    suiro_wire_item it;
    CHECK(suiro_wire_reader_init(&rd, d, n) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK);
    CHECK(it.tag == WIRE_I64 && it.i == (int64_t)(i - 25) * (i - 25));
  }
  suiro_map_free(m);
  /* a failing element reports its index */
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, "fail3");
  s.in_kind = SUIRO_IN_RANGE;
  s.n = 10;
  s.start = 0;
  s.step = 1;
  s.tpl = &t;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_OK(suiro_map_wait(m, 20));
  CHECK_EQ(suiro_map_failure(m, &e), 1);
  CHECK_EQ(e.index, 3);
  CHECK(e.message.len == 5 && !memcmp(e.message.ptr, "three", 5));
  suiro_map_free(m);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(seeded_plans_draw_the_same_on_any_worker_count) {
  double first[2][200];
  for (int k = 0; k < 2; k++) {
    suiro_pool *p = test_pool(k + 1);
    _Alignas(8) unsigned char fb[64];
    suiro_template t = f64_template();
    suiro_plan_spec s = range_spec(fb, "draw", 200, &t);
    s.seeded = 1;
    s.seed = 42;
    s.tpl = &t;
    suiro_map *m;
    CHECK_OK(suiro_plan_create(p, &s, &m));
    CHECK_OK(suiro_map_start(m, 5));
    CHECK_OK(suiro_map_wait(m, 20));
    memcpy(first[k], suiro_map_output(m), sizeof first[k]);
    suiro_map_free(m);
    CHECK_OK(suiro_pool_stop(p, 5));
  }
  CHECK(memcmp(first[0], first[1], sizeof first[0]) == 0);
  for (int i = 0; i < 200; i++) {
    suiro_rng r;
    suiro_rng_seed(&r, 42, (uint64_t)i);
    CHECK(first[0][i] == suiro_rng_unit(&r));
  }
}

/* A range of a seeded map run as a plan of its own (index_base) draws what the whole map draws
 * for those elements: how a host of a cluster runs its share. */
TEST(index_base_gives_a_range_the_whole_maps_streams) {
  suiro_pool *p = test_pool(2);
  _Alignas(8) unsigned char fb[64];
  suiro_template t = f64_template();
  suiro_plan_spec s = range_spec(fb, "draw", 50, &t);
  s.seeded = 1;
  s.seed = 7;
  s.index_base = 1000;
  suiro_map *m;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_EQ(suiro_plan_index_base(suiro_plan_of(m)), 1000);
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_OK(suiro_map_wait(m, 20));
  const double *out = suiro_map_output(m);
  for (int i = 0; i < 50; i++) {
    suiro_rng r;
    suiro_rng_seed(&r, 7, 1000 + (uint64_t)i);
    CHECK(out[i] == suiro_rng_unit(&r));
  }
  suiro_map_free(m);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(plan_sizes_are_checked_before_use) {
  suiro_pool *p = test_pool(1);
  _Alignas(8) unsigned char fb[64];
  suiro_template t;
  memset(&t, 0, sizeof t);
  t.kind = SUIRO_OUT_SCALAR;
  t.type = WIRE_T_F64;
  suiro_plan_spec s;
  suiro_map *m = NULL;
  /* a range that overflows int64 */
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, "square");
  s.in_kind = SUIRO_IN_RANGE;
  s.n = 3;
  s.start = INT64_MAX - 1;
  s.step = 1;
  s.tpl = &t;
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "64-bit") != NULL);
  /* the whole int64 range: n * 8 bytes overflows, and could never fit /dev/shm */
  s.start = 1;
  s.n = (uint64_t)INT64_MAX;
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  s.n = UINT64_C(1) << 40; /* 8 TiB of f64 cells */
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "/dev/shm") != NULL);
  /* untyped: 16 bytes of slot per element */
  s.tpl = NULL;
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  /* value offsets that do not describe the data */
  uint64_t offs[3] = { 0, 8, 12 };
  unsigned char data[16] = { 0 };
  suiro_plan_spec_init(&s);
  s.fn = fb;
  s.fn_len = fn_buf(fb, "square");
  s.in_kind = SUIRO_IN_VALUES;
  s.n = 2;
  s.in_data = data;
  s.in_len = 12;
  s.in_offsets = offs;
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  /* a function buffer that is not wire */
  suiro_plan_spec_init(&s);
  s.fn = data;
  s.fn_len = 16;
  s.in_kind = SUIRO_IN_RANGE;
  s.n = 1;
  s.step = 1;
  CHECK_EQ(suiro_plan_create(p, &s, &m), SUIRO_ERR);
  CHECK(m == NULL);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(killed_maps_fail_as_cancelled_and_pools_keep_serving) {
  suiro_pool *p = test_pool(2);
  _Alignas(8) unsigned char fb[64];
  suiro_template t = f64_template();
  suiro_plan_spec s = range_spec(fb, "spin", 100, &t);
  suiro_map *m;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_EQ(suiro_map_wait(m, 0.2), SUIRO_TIMEOUT); /* element 0 never returns */
  CHECK_OK(suiro_map_kill(m));
  CHECK_OK(suiro_map_wait(m, 10));
  suiro_error_info e;
  CHECK_EQ(suiro_map_failure(m, &e), 1);
  CHECK(e.cls.len == 9 && !memcmp(e.cls.ptr, "cancelled", 9));
  /* the same map runs again on the replaced workers */
  s.fn_len = fn_buf(fb, "square");
  suiro_map_free(m);
  CHECK_OK(suiro_plan_create(p, &s, &m));
  CHECK_OK(suiro_map_start(m, 5));
  CHECK_OK(suiro_map_wait(m, 10));
  CHECK_EQ(suiro_map_failure(m, &e), 0);
  CHECK(((double *)suiro_map_output(m))[9] == 81.0);
  suiro_map_free(m);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(maps_outlive_their_pool) {
  suiro_pool *p = test_pool(1);
  _Alignas(8) unsigned char fb[64];
  suiro_template t = f64_template();
  suiro_plan_spec s = range_spec(fb, "square", 10, &t);
  suiro_map *done, *running, *spinning;
  CHECK_OK(suiro_plan_create(p, &s, &done));
  CHECK_OK(suiro_map_start(done, 5));
  CHECK_OK(suiro_map_wait(done, 10));
  CHECK_OK(suiro_plan_create(p, &s, &running)); /* prepared, never started */
  s.fn_len = fn_buf(fb, "spin");
  CHECK_OK(suiro_plan_create(p, &s, &spinning));
  CHECK_OK(suiro_map_start(spinning, 5));
  CHECK_OK(suiro_pool_stop(p, 0.2));
  /* results of a finished run stay readable; the rest answer CLOSED */
  CHECK(((double *)suiro_map_output(done))[3] == 9.0);
  CHECK_EQ(suiro_map_wait(done, 0), SUIRO_OK);
  CHECK_EQ(suiro_map_start(running, 1), SUIRO_CLOSED);
  CHECK_EQ(suiro_map_wait(spinning, 1), SUIRO_CLOSED);
  CHECK_EQ(suiro_map_kill(spinning), SUIRO_CLOSED);
  suiro_map_free(spinning);
  suiro_map_free(running);
  suiro_map_free(done);
}

/* ---- zero-copy references ------------------------------------------------------------------- */

static int64_t shared_refs(suiro_buf *b) { /* the region header's first words: magic, refs */
  return ((const _Atomic int64_t *)((const char *)suiro_buf_data(b) - suiro_buf_offset(b)))[1];
}

TEST(references_are_validated_against_the_mapping) {
  suiro_pool *p = test_pool(0); /* this process needs a pool for regions to have a home */
  suiro_buf *b = suiro_buf_alloc(1 << 16);
  CHECK(b != NULL);
  double *d = suiro_buf_data(b);
  for (int i = 0; i < 100; i++) d[i] = i;
  _Alignas(8) unsigned char mem[512];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, mem, sizeof mem);
  CHECK_EQ(suiro_zc_put(&w, b, d, 100 * 8, WIRE_T_F64, 0, 0, NULL), WIRE_OK);
  CHECK_EQ(shared_refs(b), 2); /* ours and the grant */
  const void *buf;
  size_t len;
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &len), WIRE_OK);
  suiro_wire_reader rd;
  suiro_wire_item it;
  CHECK(suiro_wire_reader_init(&rd, buf, len) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK && it.tag == WIRE_REF);
  suiro_view v;
  CHECK_OK(suiro_zc_open(&it.ref, &v));
  CHECK_EQ(shared_refs(b), 2); /* the grant became the view's */
  CHECK(v.count == 100 && ((double *)v.data)[99] == 99.0);
  /* a forged copy of the same reference gets a reference of its own, not someone else's */
  suiro_view v2;
  CHECK_OK(suiro_zc_open(&it.ref, &v2));
  CHECK_EQ(shared_refs(b), 3);
  suiro_buf_unref(v2.buf);
  suiro_buf_unref(v.buf);
  CHECK_EQ(shared_refs(b), 1);
  /* lengths past the mapping, names outside the family, misaligned offsets */
  suiro_wire_ref bad = it.ref;
  bad.length = (uint64_t)1 << 40;
  CHECK_EQ(suiro_zc_open(&bad, &v), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "outside") != NULL);
  bad = it.ref;
  bad.offset = 8;
  CHECK_EQ(suiro_zc_open(&bad, &v), SUIRO_ERR);
  bad = it.ref;
  bad.name = WIRE_CSTR("/suiro_1_2_3");
  CHECK_EQ(suiro_zc_open(&bad, &v), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "another pool family") != NULL);
  bad.name = WIRE_CSTR("/etc");
  CHECK_EQ(suiro_zc_open(&bad, &v), SUIRO_ERR);
  CHECK_EQ(shared_refs(b), 1);
  /* a grant that was never sent is revoked */
  suiro_wire_writer_reset(&w);
  CHECK_EQ(suiro_zc_put(&w, b, d, 800, WIRE_T_F64, 0, 0, NULL), WIRE_OK);
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &len), WIRE_OK);
  CHECK_EQ(shared_refs(b), 2);
  suiro_zc_revoke(buf, len);
  CHECK_EQ(shared_refs(b), 1);
  /* once nobody holds it, no reference can bring it back */
  suiro_buf_unref(b);
  CHECK_EQ(suiro_zc_open(&it.ref, &v), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "free") != NULL);
  suiro_wire_writer_free(&w);
  CHECK_OK(suiro_pool_stop(p, 5));
}

/* ---- waiting on pools ------------------------------------------------------------------------- */

NATIVE(nap) {
  (void)arg; (void)len; (void)ud;
  usleep(20000);
  return suiro_out_write(out, "z", 1);
}

TEST(wait_pools_wakes_on_any_pool) {
  suiro_pool *a = test_pool(1), *b = test_pool(1);
  suiro_pool *both[2] = { a, b };
  CHECK_EQ(suiro_wait_pools(both, 2, 0.01), 0);
  suiro_task t;
  CHECK_OK(suiro_submit(b, suiro_fn_id("nap"), "", 0, &t, 5));
  double t0 = suiro_now();
  int hit = 0;
  while (!suiro_task_ready(b, t) && suiro_now() - t0 < 10) hit += suiro_wait_pools(both, 2, 5) > 0;
  CHECK(suiro_task_ready(b, t));
  CHECK(hit >= 1);
  suiro_result r;
  CHECK_OK(suiro_collect(b, t, &r, 0));
  CHECK_OK(suiro_pool_stop(a, 5));
  CHECK_OK(suiro_pool_stop(b, 5));
}

int harness_command(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--write-rng")) {
    write_rng(stdout);
    return 0;
  }
  return -1;
}
