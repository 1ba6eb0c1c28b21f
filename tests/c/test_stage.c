/* test_stage.c — a map's staged input (suiro_face.h section 7, engine/src/stage.c): VALUES blocks
 * with their offsets and alignment, accepted by suiro_plan_create and read back element by
 * element; number lists as ARRAY inputs; and the refusals: a callback that fails, a writer left
 * broken, the memory budget, counts too large for offsets, each naming the element. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suiro_face.h"

/* Element i is the string of (i * 37) % 700 bytes 'a' + i % 26: from empty to beyond the stage's
 * first buffer (512 bytes), so the writer grows to the heap and is reset after it. */
static size_t elem_len(uint64_t i) { return (size_t)((i * 37) % 700); }

typedef struct fake {
  int calls;
  int fail_at;   /* put returns -1 here (-1: never) */
  int break_at;  /* put leaves an unclosed list here (-1: never) */
  size_t size;   /* > 0: every element is a string of this many bytes */
  suiro_msg *seen;
} fake;

static int put_str(void *ud, uint64_t i, suiro_msg *m) {
  fake *f = ud;
  f->calls++;
  f->seen = m;
  if ((int)i == f->fail_at) return -1;
  suiro_wire_writer *w = suiro_msg_writer(m);
  size_t n = f->size ? f->size : elem_len(i);
  char buf[1024];
  memset(buf, 'a' + (int)(i % 26), n);
  suiro_wire_put_list(w, (int)i == f->break_at ? 2 : 1);
  suiro_wire_put_str(w, buf, n);
  return 0;
}

static void check_msg_prefix(const char *want) {
  if (strncmp(suiro_last_error(), want, strlen(want)) != 0) {
    fprintf(stderr, "got:      %s\nexpected: %s...\n", suiro_last_error(), want);
    exit(1);
  }
}

static size_t fn_buf(void *buf, size_t cap) {
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, buf, cap);
  suiro_wire_put_list(&w, 1);
  suiro_wire_put_str(&w, "id", 2);
  const void *p;
  size_t n;
  CHECK(suiro_wire_writer_finish(&w, &p, &n) == WIRE_OK);
  memmove(buf, p, n);
  suiro_wire_writer_free(&w);
  return n;
}

TEST(values_offsets_are_aligned_and_the_plan_reads_them) {
  enum { N = 300 };
  suiro_stage st;
  suiro_stage_init(&st);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  fake f = { 0, -1, -1, 0, NULL };
  CHECK_OK(suiro_stage_values(&st, &s, N, put_str, &f));
  CHECK_EQ(f.calls, N);
  CHECK(f.seen == &st.own);
  CHECK_EQ(s.in_kind, SUIRO_IN_VALUES);
  CHECK_EQ(s.n, N);
  CHECK(s.in_data == st.data && s.in_offsets == st.offs && s.in_len == st.len);
  CHECK_EQ((uintptr_t)s.in_data % 8, 0);
  CHECK_EQ(s.in_offsets[0], 0);
  CHECK_EQ(s.in_offsets[N], s.in_len);
  for (uint64_t i = 0; i < N; i++) {
    uint64_t a = s.in_offsets[i], b = s.in_offsets[i + 1];
    CHECK(b >= a + 8);
    CHECK_EQ(a % 8, 0);
    /* each element a whole wire buffer: LIST [its string] */
    suiro_wire_reader r;
    suiro_wire_item it;
    CHECK(suiro_wire_reader_init(&r, (const unsigned char *)s.in_data + a, b - a) == WIRE_OK);
    CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_LIST && it.n == 1);
    CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_STR);
    CHECK_EQ(it.n, elem_len(i));
    CHECK(it.n == 0 || ((const char *)it.data)[it.n - 1] == 'a' + (int)(i % 26));
  }
  /* the plan takes the block as it is and hands each element back */
  suiro_pool *p = test_pool(0);
  _Alignas(8) unsigned char fb[64];
  s.fn = fb;
  s.fn_len = fn_buf(fb, sizeof fb);
  suiro_map *m;
  CHECK_OK(suiro_plan_create(p, &s, &m));
  suiro_stage_sent(&st);
  suiro_stage_free(&st);
  CHECK(st.data == NULL && st.offs == NULL);
  const suiro_plan *pl = suiro_plan_of(m);
  CHECK(pl != NULL);
  for (uint64_t i = 0; i < N; i++) {
    suiro_elem e;
    CHECK_EQ(suiro_plan_elem(pl, i, &e), 0);
    CHECK_EQ(e.kind, 'v');
    suiro_wire_reader r;
    suiro_wire_item it;
    CHECK(suiro_wire_reader_init(&r, e.buf, e.len) == WIRE_OK);
    CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_LIST);
    CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_STR);
    CHECK_EQ(it.n, elem_len(i));
  }
  suiro_map_free(m);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(values_of_none_and_a_face_message) {
  suiro_stage st;
  suiro_stage_init(&st);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  fake f = { 0, -1, -1, 0, NULL };
  CHECK_OK(suiro_stage_values(&st, &s, 0, put_str, &f));
  CHECK_EQ(f.calls, 0);
  CHECK_EQ(s.n, 0);
  CHECK_EQ(s.in_len, 0);
  CHECK(s.in_offsets != NULL && s.in_offsets[0] == 0);
  /* a face with a message of its own: every element is written there */
  _Alignas(8) unsigned char stack[256];
  suiro_msg mine;
  suiro_msg_init(&mine, stack, sizeof stack);
  st.msg = &mine;
  CHECK_OK(suiro_stage_values(&st, &s, 5, put_str, &f));
  CHECK(f.seen == &mine);
  CHECK_EQ(s.n, 5);
  size_t len;
  void *block = suiro_stage_take(&st, &len);
  CHECK(block != NULL && len == s.in_offsets[5] && st.data == NULL);
  suiro_stage_free(&st);
  free(block);
  suiro_msg_free(&mine);
}

TEST(values_refusals_name_the_element) {
  suiro_stage st;
  suiro_stage_init(&st);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  fake f = { 0, 4, -1, 0, NULL };
  CHECK_EQ(suiro_stage_values(&st, &s, 10, put_str, &f), SUIRO_ERR);
  CHECK_EQ(f.calls, 5); /* nothing after the failure */
  check_msg_prefix("element 5: the face's encoder failed");
  st.origin = 0; /* a face counting from 0 (Python) */
  f = (fake){ 0, 4, -1, 0, NULL };
  CHECK_EQ(suiro_stage_values(&st, &s, 10, put_str, &f), SUIRO_ERR);
  check_msg_prefix("element 4: ");
  /* a writer left with an open list: the engine's finish refuses it, naming the element */
  st.origin = 1;
  f = (fake){ 0, -1, 2, 0, NULL };
  CHECK_EQ(suiro_stage_values(&st, &s, 10, put_str, &f), SUIRO_ERR);
  check_msg_prefix("element 3: wire: ");
  CHECK_EQ(f.calls, 3);
  /* the stage is usable again after a refusal */
  f = (fake){ 0, -1, -1, 0, NULL };
  CHECK_OK(suiro_stage_values(&st, &s, 10, put_str, &f));
  CHECK_EQ(s.in_offsets[10], s.in_len);
  suiro_stage_free(&st);
  suiro_stage_free(&st); /* twice is harmless */
}

TEST(values_too_many_or_too_large) {
  suiro_stage st;
  suiro_stage_init(&st);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  fake f = { 0, -1, -1, 0, NULL };
  /* offsets: a count the plan cannot hold, and one whose offsets exceed the budget */
  CHECK_EQ(suiro_stage_values(&st, &s, UINT64_C(1) << 56, put_str, &f), SUIRO_ERR);
  check_msg_prefix("72057594037927936 elements are too many");
  CHECK_EQ(suiro_stage_values(&st, &s, (UINT64_C(1) << 56) - 1, put_str, &f), SUIRO_ERR);
  check_msg_prefix("value offsets: ");
  CHECK_EQ(f.calls, 0);
  /* the block: 1000 elements of 1000 bytes under a 64 KiB budget stop at the element that
   * would pass it (the block doubles while it can, then grows to what is needed) */
  setenv("SUIRO_MAX_BYTES", "64K", 1);
  f = (fake){ 0, -1, -1, 1000, NULL };
  CHECK_EQ(suiro_stage_values(&st, &s, 1000, put_str, &f), SUIRO_ERR);
  size_t each = (size_t)(st.offs[1] - st.offs[0]); /* every element is this long */
  CHECK(each >= 1000 && each % 8 == 0);
  CHECK_EQ(st.len % each, 0);
  uint64_t staged = st.len / each;
  CHECK(st.len <= 65536 && st.len + each > 65536);
  char want[64];
  snprintf(want, sizeof want, "element %llu: staged input: ", (unsigned long long)staged + 1);
  check_msg_prefix(want);
  CHECK(strstr(suiro_last_error(), "exceed the memory limit") != NULL);
  CHECK_EQ(f.calls, (int)staged + 1);
  suiro_stage_free(&st);
}

/* Numbers: a table of kinds ('i', 'f', 0) and values. */
typedef struct nums {
  const char *kinds; /* NULL: all 'i' */
  int calls;
  uint64_t asked;
} nums;

static uint64_t num_of(void *ud, uint64_t i, uint64_t count, unsigned char *kinds, void *cells) {
  nums *u = ud;
  u->calls++;
  u->asked += count;
  CHECK_EQ((uintptr_t)cells % 8, 0);
  for (uint64_t k = 0; k < count; k++) {
    uint64_t j = i + k;
    char want = u->kinds ? u->kinds[j] : 'i';
    if (want == 'i') {
      int64_t v = -(int64_t)j * 1000000007;
      memcpy((char *)cells + k * 8, &v, 8);
    } else if (want == 'f') {
      double v = (double)j + 0.25;
      memcpy((char *)cells + k * 8, &v, 8);
    } else {
      return k;
    }
    kinds[k] = (unsigned char)want;
  }
  return count;
}

TEST(numbers_of_one_kind_become_an_array) {
  suiro_stage st;
  suiro_stage_init(&st);
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  nums u = { "iiiiiii", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 7, num_of, &u), 1);
  CHECK_EQ(s.in_kind, SUIRO_IN_ARRAY);
  CHECK_EQ(s.in_type, WIRE_T_I64);
  CHECK_EQ(s.n, 7);
  for (int i = 0; i < 7; i++) CHECK_EQ(((const int64_t *)s.in_data)[i], -(int64_t)i * 1000000007);
  suiro_plan_spec_init(&s);
  u = (nums){ "fffff", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 5, num_of, &u), 1);
  CHECK_EQ(s.in_type, WIRE_T_F64);
  for (int i = 0; i < 5; i++) CHECK(((const double *)s.in_data)[i] == (double)i + 0.25);
  /* many: in chunks, every element once */
  u = (nums){ NULL, 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 5000, num_of, &u), 1);
  CHECK_EQ(u.asked, 5000);
  CHECK(u.calls > 1);
  for (int i = 0; i < 5000; i++) CHECK_EQ(((const int64_t *)s.in_data)[i], -(int64_t)i * 1000000007);
  /* mixed kinds, or an element that is no number: not staged, VALUES instead */
  suiro_plan_spec_init(&s);
  u = (nums){ "iiifi", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 5, num_of, &u), 0);
  CHECK(s.in_kind != SUIRO_IN_ARRAY);
  u = (nums){ "fi", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 2, num_of, &u), 0);
  u = (nums){ "iis", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 3, num_of, &u), 0);
  u = (nums){ "", 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, 0, num_of, &u), 0);
  CHECK_EQ(u.calls, 0);
  CHECK(s.in_kind != SUIRO_IN_ARRAY);
  /* a mismatch in a later chunk: no further chunk is asked for */
  {
    char *k = malloc(3000);
    memset(k, 'f', 3000);
    k[1500] = 'i';
    u = (nums){ k, 0, 0 };
    CHECK_EQ(suiro_stage_numbers(&st, &s, 3000, num_of, &u), 0);
    CHECK(u.asked < 3000);
    CHECK(u.asked > 1500);
    free(k);
  }
  /* after a refusal the same stage stages values */
  fake f = { 0, -1, -1, 0, NULL };
  CHECK_OK(suiro_stage_values(&st, &s, 3, put_str, &f));
  CHECK_EQ(s.in_kind, SUIRO_IN_VALUES);
  CHECK_EQ(s.in_offsets[3], s.in_len);
  /* too many numbers for the budget: -1, with the message, before the face is asked */
  setenv("SUIRO_MAX_BYTES", "1M", 1);
  u = (nums){ NULL, 0, 0 };
  CHECK_EQ(suiro_stage_numbers(&st, &s, UINT64_C(1) << 20, num_of, &u), -1);
  check_msg_prefix("staged numbers: ");
  CHECK_EQ(u.calls, 0);
  suiro_stage_free(&st);
}
