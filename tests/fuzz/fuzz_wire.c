/*
 * fuzz_wire.c — libFuzzer harness for the wire format (built and run by scripts/fuzz).
 *
 * Each input is used twice:
 *   1. as a buffer: suiro_wire_validate, the pull cursor (touching every byte of every span it hands
 *      out, so ASan sees any out-of-bounds pointer), a skip walk and suiro_wire_copy must all agree;
 *      an error must read "wire: ... at byte N" with N inside the buffer; a valid buffer must
 *      re-encode to exactly itself (the format is canonical) and be refused at a misaligned
 *      address;
 *   2. as a script of writer calls (including misuse): whenever suiro_wire_writer_finish succeeds,
 *      the bytes must validate and re-encode to themselves.
 * Any broken invariant aborts, which libFuzzer reports as a crash with the input saved.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suiro_wire.h"

#define REQUIRE(c)                                                            \
  do {                                                                        \
    if (!(c)) {                                                               \
      fprintf(stderr, "fuzz_wire: invariant failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                \
    }                                                                         \
  } while (0)

static volatile unsigned sink;

static void touch(const void *p, size_t n) {
  const unsigned char *s = p;
  unsigned x = 0;
  for (size_t i = 0; i < n; i++) x += s[i];
  sink += x;
}

static void touch_strs(const suiro_wire_strs *s) {
  touch(s->lens, 8 * s->n);
  suiro_wire_strs_iter it = suiro_wire_strs_begin(s);
  const char *p;
  size_t n;
  while (suiro_wire_strs_next(&it, &p, &n))
    if (p) touch(p, n);
}

static void touch_item(const suiro_wire_item *it) {
  switch (it->tag) {
  case WIRE_STR:
  case WIRE_BYTES: touch(it->data, it->n); break;
  case WIRE_ARRAY:
  case WIRE_DATE: touch(it->data, it->n * suiro_wire_type_size(it->type)); break;
  case WIRE_NDARRAY:
    touch(it->dims, 8 * (size_t)it->ndim);
    touch(it->data, it->n * suiro_wire_type_size(it->type));
    break;
  case WIRE_TIMESTAMP:
    touch(it->text[0].ptr, it->text[0].len);
    touch(it->data, it->n * 8);
    break;
  case WIRE_STRS: touch_strs(&it->strs); break;
  case WIRE_FACTOR:
    touch(it->data, 4 * it->n);
    touch_strs(&it->strs);
    break;
  case WIRE_ERROR:
    for (int i = 0; i < 3; i++) touch(it->text[i].ptr, it->text[i].len);
    break;
  case WIRE_CALL: touch(it->text[0].ptr, it->text[0].len); break;
  case WIRE_REF:
    touch(it->ref.name.ptr, it->ref.name.len);
    touch(it->ref.dims, 8 * (size_t)it->ref.ndim);
    break;
  }
  if (it->tag == WIRE_ARRAY || it->tag == WIRE_NDARRAY || it->tag == WIRE_DATE ||
      it->tag == WIRE_TIMESTAMP || it->tag == WIRE_FACTOR)
    REQUIRE(((uintptr_t)it->data & 7) == 0);
}

static void check_message(const char *err, size_t len) {
  REQUIRE(strncmp(err, "wire: ", 6) == 0);
  const char *at = strstr(err, " at byte ");
  REQUIRE(at != NULL);
  while (strstr(at + 1, " at byte ")) at = strstr(at + 1, " at byte ");
  char *end;
  unsigned long long pos = strtoull(at + 9, &end, 10);
  REQUIRE(*end == 0 && end != at + 9);
  REQUIRE(pos <= len);
}

/* Copies a whole buffer through the writer; returns 1 and the bytes when it worked. */
static int reencode(const unsigned char *buf, size_t len, suiro_wire_writer *w, const void **out, size_t *olen) {
  suiro_wire_reader r;
  suiro_wire_item it;
  suiro_wire_writer_init(w, NULL, 0);
  return suiro_wire_reader_init(&r, buf, len) == WIRE_OK && suiro_wire_copy(w, &r) == WIRE_OK &&
         suiro_wire_next(&r, &it) == WIRE_END && suiro_wire_writer_finish(w, out, olen) == WIRE_OK;
}

static void check_buffer(const unsigned char *buf, size_t len, uint64_t seed) {
  char err[256];
  int v = suiro_wire_validate(buf, len, err, sizeof err);
  if (v != WIRE_OK) check_message(err, len);

  /* the cursor, touching every span */
  suiro_wire_reader r;
  suiro_wire_item it;
  int st = suiro_wire_reader_init(&r, buf, len);
  while (st == WIRE_OK && (st = suiro_wire_next(&r, &it)) == WIRE_OK) touch_item(&it);
  REQUIRE(v == WIRE_OK ? st == WIRE_END : st == WIRE_ERR);
  if (v != WIRE_OK) REQUIRE(strcmp(r.err, err) == 0 && r.err_pos <= len);
  REQUIRE(suiro_wire_next(&r, &it) == st); /* sticky */

  /* a skip walk mixing skips and single steps */
  st = suiro_wire_reader_init(&r, buf, len);
  for (int k = 0; st == WIRE_OK; k++) st = (seed >> (k & 63)) & 1 ? suiro_wire_skip(&r) : suiro_wire_next(&r, &it);
  REQUIRE(v == WIRE_OK ? st == WIRE_END && r.pos == len : st == WIRE_ERR);

  /* canonical: a valid buffer re-encodes to itself */
  suiro_wire_writer w;
  const void *out;
  size_t olen;
  int copied = reencode(buf, len, &w, &out, &olen);
  REQUIRE(copied == (v == WIRE_OK));
  if (copied) REQUIRE(olen == len && memcmp(out, buf, len) == 0);
  suiro_wire_writer_free(&w);

  /* the same bytes at a misaligned address are refused */
  if (v == WIRE_OK) {
    unsigned char *mis = malloc(len + 1);
    memcpy(mis + 1, buf, len);
    REQUIRE(suiro_wire_validate(mis + 1, len, err, sizeof err) == WIRE_ERR);
    free(mis);
  }
}

/* ---- the writer, driven by the input --------------------------------------------------------- */

typedef struct src {
  const uint8_t *p;
  size_t n;
} src;

static unsigned u8(src *s) {
  if (!s->n) return 0;
  s->n--;
  return *s->p++;
}
static uint64_t u64(src *s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)u8(s) << (8 * i);
  return v;
}
/* len bytes of input (zeros past the end) in tmp */
static const char *take(src *s, size_t len, char *tmp) {
  for (size_t i = 0; i < len; i++) tmp[i] = (char)u8(s);
  return tmp;
}

static void fill(src *s, void *dst, int type, uint64_t count) {
  unsigned char *d = dst;
  size_t bytes = count * suiro_wire_type_size(type);
  for (size_t i = 0; i < bytes; i++) d[i] = (unsigned char)u8(s);
  if (type == WIRE_T_BOOL)
    for (size_t i = 0; i < bytes; i++) d[i] = d[i] % 3 == 2 ? 0xFF : d[i] % 3;
}

static void drive_writer(const uint8_t *data, size_t size) {
  src s = { data, size };
  unsigned char stack[96];
  char tmp[64];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, stack + (size & 7), sizeof stack - 8); /* sometimes misaligned */
  for (int ops = 0; s.n && ops < 200; ops++) {
    unsigned op = u8(&s) % 24;
    switch (op) {
    case 0: suiro_wire_put_nil(&w); break;
    case 1: suiro_wire_put_bool(&w, (int)(u8(&s) % 4 == 3 ? 0xFF : u8(&s) % 3)); break;
    case 2: suiro_wire_put_i64(&w, (int64_t)u64(&s) >> (u8(&s) % 64)); break;
    case 3: {
      uint64_t b = u64(&s);
      double d;
      memcpy(&d, &b, 8);
      suiro_wire_put_f64(&w, d);
      break;
    }
    case 4:
    case 5: {
      size_t len = u8(&s) % 40;
      (op == 4 ? suiro_wire_put_str : suiro_wire_put_bytes)(&w, take(&s, len, tmp), len);
      break;
    }
    case 6: {
      int type = (int)(u8(&s) % 9);
      uint64_t count = u8(&s) % 17;
      void *d = suiro_wire_put_array(&w, type, count);
      if (d) fill(&s, d, type, count);
      break;
    }
    case 7: {
      int type = (int)(u8(&s) % 8), order = (int)(u8(&s) % 3), ndim = (int)(u8(&s) % 5);
      uint64_t dims[4], count = 1;
      for (int i = 0; i < ndim; i++) dims[i] = u8(&s) % 4, count *= dims[i];
      void *d = suiro_wire_put_ndarray(&w, type, order, ndim, dims);
      if (d) fill(&s, d, type, count);
      break;
    }
    case 8: suiro_wire_put_strs(&w, u8(&s) % 5); break;
    case 9: {
      size_t len = u8(&s) % 12;
      suiro_wire_strs_add(&w, take(&s, len, tmp), len);
      break;
    }
    case 10: suiro_wire_strs_add_na(&w); break;
    case 11: suiro_wire_put_list(&w, u8(&s) % 5); break;
    case 12: suiro_wire_put_dict(&w, u8(&s) % 4); break;
    case 13: suiro_wire_put_frame(&w, u8(&s) % 3, u8(&s) % 4); break;
    case 14: {
      uint64_t count = u8(&s) % 5, nlev = u8(&s) % 4;
      int ordered = (int)(u8(&s) % 3);
      int32_t *codes = suiro_wire_put_factor(&w, count, ordered, nlev);
      if (codes)
        for (uint64_t i = 0; i < count; i++) codes[i] = (int32_t)(u8(&s) % (nlev + 1)) - 1;
      break;
    }
    case 15: {
      int type = (int)(u8(&s) % 8);
      uint64_t count = u8(&s) % 5;
      void *d = suiro_wire_put_date(&w, type, count);
      if (d) fill(&s, d, type, count);
      break;
    }
    case 16: {
      int type = (int)(u8(&s) % 8), unit = (int)(u8(&s) % 5);
      size_t tzl = u8(&s) % 20;
      uint64_t count = u8(&s) % 5;
      void *d = suiro_wire_put_timestamp(&w, type, unit, (suiro_wire_str){ take(&s, tzl, tmp), tzl }, count);
      if (d) fill(&s, d, type, count);
      break;
    }
    case 17: {
      char a[16], b[16], c[16];
      size_t la = u8(&s) % 16, lb = u8(&s) % 16, lc = u8(&s) % 16;
      suiro_wire_put_error(&w, (suiro_wire_str){ take(&s, la, a), la }, (suiro_wire_str){ take(&s, lb, b), lb },
                     (suiro_wire_str){ take(&s, lc, c), lc }, (int64_t)(u8(&s) % 8) - 2);
      break;
    }
    case 18: {
      size_t len = u8(&s) % 10;
      suiro_wire_put_call(&w, (int)(u8(&s) % 3), (suiro_wire_str){ take(&s, len, tmp), len });
      break;
    }
    case 19: {
      uint64_t dims[3];
      suiro_wire_ref ref = { 0 };
      ref.type = (int)(u8(&s) % 10);
      if (ref.type == 8) ref.type = WIRE_REF_WIRE;
      if (ref.type == 9) ref.type = 0x41; /* invalid */
      ref.order = (int)(u8(&s) % 3);
      ref.ndim = (int)(u8(&s) % 4);
      for (int i = 0; i < ref.ndim; i++) dims[i] = u8(&s) % 5;
      ref.dims = dims;
      ref.flags = u64(&s);
      ref.offset = 8 * (uint64_t)u8(&s) + (u8(&s) % 4 == 0);
      ref.length = u8(&s) % 4 ? (uint64_t)u8(&s) * 8 : u64(&s);
      size_t nl = u8(&s) % 12;
      ref.name = (suiro_wire_str){ take(&s, nl, tmp), nl };
      suiro_wire_put_ref(&w, &ref);
      break;
    }
    case 20: suiro_wire_put_func(&w, (int)(u8(&s) % 5), u8(&s) % 3 ? u64(&s) : 0, u8(&s) % 4); break;
    case 21: suiro_wire_put_backref(&w, u8(&s) % 8); break;
    case 22: { /* counts over the 48-bit limit are refused before any allocation */
      uint64_t huge = WIRE_MAX_COUNT + 1 + u8(&s);
      switch (u8(&s) % 5) {
      case 0: REQUIRE(suiro_wire_put_list(&w, huge) == WIRE_ERR); break;
      case 1: REQUIRE(suiro_wire_put_array(&w, WIRE_T_F64, huge) == NULL); break;
      case 2: REQUIRE(suiro_wire_put_strs(&w, huge) == WIRE_ERR); break;
      case 3: REQUIRE(suiro_wire_put_factor(&w, huge, 0, 1) == NULL); break;
      default: REQUIRE(suiro_wire_put_frame(&w, 1, huge) == WIRE_ERR); break;
      }
      break;
    }
    default:
      if (u8(&s) % 4 == 0) suiro_wire_writer_reset(&w);
      break;
    }
  }
  const void *out;
  size_t len;
  if (suiro_wire_writer_finish(&w, &out, &len) == WIRE_OK) {
    char err[256];
    if (suiro_wire_validate(out, len, err, sizeof err) != WIRE_OK) {
      fprintf(stderr, "fuzz_wire: the writer produced an invalid buffer: %s\n", err);
      abort();
    }
    suiro_wire_writer w2;
    const void *o2;
    size_t l2;
    REQUIRE(reencode(out, len, &w2, &o2, &l2) && l2 == len && memcmp(o2, out, len) == 0);
    suiro_wire_writer_free(&w2);
  } else {
    REQUIRE(strncmp(suiro_wire_writer_error(&w), "wire: ", 6) == 0);
  }
  suiro_wire_writer_free(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size heap copy: malloc is 16-aligned and ASan flags any byte read past the end */
  unsigned char *buf = malloc(size ? size : 1);
  if (size) memcpy(buf, data, size);
  uint64_t seed = 0x9E3779B97F4A7C15u ^ size;
  for (size_t i = 0; i < size && i < 16; i++) seed = seed * 31 + data[i];
  check_buffer(buf, size, seed);
  free(buf);
  drive_writer(data, size);
  return 0;
}
