/*
 * stage.c — a map's input staged on the host, for every face (suiro_face.h section 7).
 *
 * A map over values the face walks itself (a Lua table, a Python list, an R list) reaches the
 * plan (suiro_plan_spec, suiro_bind.h section 6) as one of two inputs:
 *   VALUES  each element encoded on its own as a stand-alone wire buffer (LIST [value]), the
 *           buffers back to back in one 8-aligned block, with n + 1 offsets into it, so a runner
 *           decodes only its elements;
 *   ARRAY   a list of only integers (only floats) as an i64 (f64) array: nothing encoded on the
 *           host, nothing decoded in the runners, and each element keeps its subtype.
 * The face knows its values; the engine keeps the block, the offsets, their alignment and growth,
 * the size checks (every sum and product checked, the memory budget of suiro_budget_check) and
 * the messages, which name the element: "element 7: ...".
 *
 * Longjmp-safe (suiro_face.h section 1): everything the staging holds lives in the caller's
 * suiro_stage, so a callback may raise (lua_error, Rf_error) and the face's cleanup calls
 * suiro_stage_free. Speed: one indirect call per element and an append; the element's writer is
 * reset, not made again, so an element that outgrew the first buffer leaves its heap for the next.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "suiro_face.h"

void suiro_stage_init(suiro_stage *st) {
  memset(st, 0, offsetof(suiro_stage, own));
  st->origin = 1;
  suiro_msg_init(&st->own, st->stack, sizeof st->stack);
  st->msg = &st->own;
}

void suiro_stage_free(suiro_stage *st) {
  free(st->data);
  free(st->offs);
  st->data = NULL;
  st->offs = NULL;
  st->len = st->cap = 0;
  suiro_msg_free(&st->own); /* after suiro_stage_sent: empty, nothing to give back */
}

void suiro_stage_sent(suiro_stage *st) {
  if (st->msg == &st->own) suiro_msg_sent(&st->own);
}

void *suiro_stage_take(suiro_stage *st, size_t *len) {
  void *p = st->data;
  *len = st->len;
  st->data = NULL;
  st->len = st->cap = 0;
  return p;
}

/* Room for `more` bytes after st->len, for element i: the block doubles (within the budget, else
 * grows to just what is needed). */
static suiro_status stage_room(suiro_stage *st, size_t more, uint64_t i) {
  unsigned long long el = (unsigned long long)(i + st->origin);
  size_t need;
  if (__builtin_add_overflow(st->len, more, &need))
    return suiro_set_error(SUIRO_ERR, "element %llu: the staged input would exceed 2^64 bytes", el);
  size_t cap = st->cap ? st->cap : 4096;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  if (suiro_budget_check("staged input", 1, cap) != SUIRO_OK) {
    if (cap == need || suiro_budget_check("staged input", 1, need) != SUIRO_OK) {
      char why[256];
      snprintf(why, sizeof why, "%s", suiro_last_error());
      return suiro_set_error(SUIRO_ERR, "element %llu: %s", el, why);
    }
    cap = need;
  }
  unsigned char *p = realloc(st->data, cap);
  if (!p) return suiro_set_error(SUIRO_ERR, "element %llu: out of memory for %zu bytes of staged input", el, cap);
  st->data = p;
  st->cap = cap;
  return SUIRO_OK;
}

suiro_status suiro_stage_values(suiro_stage *st, suiro_plan_spec *s, uint64_t n, suiro_stage_put put, void *ud) {
  if (n >= (UINT64_C(1) << 56))
    return suiro_set_error(SUIRO_ERR, "%llu elements are too many (at most 2^56)", (unsigned long long)n);
  if (suiro_budget_check("value offsets", n + 1, 8) != SUIRO_OK) return SUIRO_ERR;
  free(st->offs);
  st->offs = malloc((size_t)(n + 1) * 8);
  if (!st->offs) return suiro_set_error(SUIRO_ERR, "out of memory for %llu value offsets", (unsigned long long)n + 1);
  st->len = 0;
  st->offs[0] = 0;
  suiro_msg *m = st->msg;
  for (uint64_t i = 0; i < n; i++) {
    suiro_wire_writer_reset(&m->w);
    if (put(ud, i, m) != 0)
      return suiro_set_error(SUIRO_ERR, "element %llu: the face's encoder failed", (unsigned long long)(i + st->origin));
    const void *b;
    size_t bl;
    if (suiro_wire_writer_finish(&m->w, &b, &bl) != WIRE_OK)
      return suiro_set_error(SUIRO_ERR, "element %llu: %s", (unsigned long long)(i + st->origin),
                             suiro_wire_writer_error(&m->w));
    if (bl % 8 || bl < 8) /* a writer's buffers are whole words: this is a broken writer */
      return suiro_set_error(SUIRO_ERR, "element %llu: its encoding is not a whole, aligned wire buffer",
                             (unsigned long long)(i + st->origin));
    if (bl > st->cap - st->len && stage_room(st, bl, i) != SUIRO_OK) return SUIRO_ERR;
    memcpy(st->data + st->len, b, bl);
    st->len += bl;
    st->offs[i + 1] = st->len;
  }
  s->in_kind = SUIRO_IN_VALUES;
  s->n = n;
  s->in_data = st->data;
  s->in_len = st->len;
  s->in_offsets = st->offs;
  return SUIRO_OK;
}

int suiro_stage_numbers(suiro_stage *st, suiro_plan_spec *s, uint64_t n, suiro_stage_num num, void *ud) {
  if (n == 0) return 0;
  if (n >= (UINT64_C(1) << 56) || suiro_budget_check("staged numbers", n, 8) != SUIRO_OK) return -1;
  if (st->cap < n * 8) {
    free(st->data);
    st->len = st->cap = 0;
    st->data = malloc((size_t)n * 8);
    if (!st->data) {
      suiro_set_error(SUIRO_ERR, "out of memory for %llu staged numbers", (unsigned long long)n);
      return -1;
    }
    st->cap = (size_t)n * 8;
  }
  /* chunks, so the face's loop is its own (no call per element); element 0 decides the kind */
  enum { CHUNK = 512 };
  uint64_t kw[CHUNK / 8]; /* the kinds, checked a word (8 elements) at a time */
  unsigned char *kinds = (unsigned char *)kw;
  uint64_t pattern = 0;
  for (uint64_t i = 0; i < n; i += CHUNK) {
    uint64_t c = n - i < CHUNK ? n - i : CHUNK;
    if (num(ud, i, c, kinds, st->data + i * 8) != c) return 0;
    if (i == 0) {
      if (kinds[0] != 'i' && kinds[0] != 'f') return 0;
      pattern = kinds[0] * UINT64_C(0x0101010101010101);
    }
    uint64_t other = 0, k = 0;
    for (; k + 8 <= c; k += 8) other |= kw[k / 8] ^ pattern;
    for (; k < c; k++) other |= (uint64_t)(kinds[k] ^ kinds[0]);
    if (other) return 0;
  }
  unsigned char kind = (unsigned char)pattern;
  st->len = (size_t)n * 8;
  s->in_kind = SUIRO_IN_ARRAY;
  s->in_type = kind == 'i' ? WIRE_T_I64 : WIRE_T_F64;
  s->n = n;
  s->in_data = st->data;
  return 1;
}
