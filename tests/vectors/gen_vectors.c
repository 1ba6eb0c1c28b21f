/*
 * gen_vectors.c — writes the wire format's golden vectors: NAME.bin (the bytes) and NAME.txt
 * (the value in the line notation of docs/wire-format.md, "Golden vectors").
 *
 *   cc -std=gnu11 -D_GNU_SOURCE -Iengine/include -Iengine/src tests/vectors/gen_vectors.c \
 *      engine/src/wire.c engine/src/util.c -o build/gen_vectors
 *   build/gen_vectors tests/vectors          # (re)write the files
 *   build/gen_vectors --check tests/vectors  # compare, exit 1 on any difference
 *
 * The files are golden: change them only with a format version bump. test_wire includes this
 * file (with GEN_VECTORS_NO_MAIN) to check that the committed files match these builders, and
 * decodes/encodes them through paths independent of the builders below: .bin -> reader ->
 * notation must give the .txt, and .txt -> its own parser -> writer must give the .bin.
 *
 * Each vector is built with the writer starting on a 64-byte stack buffer, so the bigger ones
 * also exercise the switch to the heap.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suiro_wire.h"

#define GV_FN static __attribute__((unused))

/* ---- a growable string -------------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

GV_FN void sb_reserve(sbuf *b, size_t n) {
  if (b->len + n + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1) cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) abort();
  b->cap = cap;
}

GV_FN void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
GV_FN void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_reserve(b, (size_t)n);
  if ((size_t)n < sizeof tmp) {
    memcpy(b->p + b->len, tmp, (size_t)n + 1);
  } else {
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  b->len += (size_t)n;
}

GV_FN void sb_hex(sbuf *b, const void *data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *s = data;
  sb_reserve(b, 2 * n + 1);
  b->p[b->len++] = 'x';
  for (size_t i = 0; i < n; i++) {
    b->p[b->len++] = digits[s[i] >> 4];
    b->p[b->len++] = digits[s[i] & 15];
  }
  b->p[b->len] = 0;
}

GV_FN void sb_free(sbuf *b) {
  free(b->p);
  *b = (sbuf){ 0 };
}

/* ---- element tokens (exact: hex floats, NaN payloads, NA markers) ------------------------- */

GV_FN uint64_t f64_bits(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return b;
}
GV_FN double bits_f64(uint64_t b) {
  double d;
  memcpy(&d, &b, 8);
  return d;
}
GV_FN float bits_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

GV_FN void fmt_f64(sbuf *b, uint64_t bits) {
  double d = bits_f64(bits);
  if (bits == WIRE_NA_F64_BITS) sb_printf(b, "na");
  else if (bits == UINT64_C(0x7FF8000000000000)) sb_printf(b, "nan");
  else if (isnan(d)) sb_printf(b, "nan:%016" PRIx64, bits);
  else if (isinf(d)) sb_printf(b, "%s", d > 0 ? "inf" : "-inf");
  else sb_printf(b, "%a", d);
}

GV_FN void fmt_f32(sbuf *b, uint32_t bits) {
  float f = bits_f32(bits);
  if (bits == 0x7FC00000u) sb_printf(b, "nan");
  else if (isnan(f)) sb_printf(b, "nan:%08" PRIx32, bits);
  else if (isinf(f)) sb_printf(b, "%s", f > 0 ? "inf" : "-inf");
  else sb_printf(b, "%a", (double)f);
}

GV_FN void fmt_elem(sbuf *b, int type, const unsigned char *p) {
  uint64_t u64;
  uint32_t u32;
  switch (type) {
  case WIRE_T_F64: memcpy(&u64, p, 8); fmt_f64(b, u64); break;
  case WIRE_T_F32: memcpy(&u32, p, 4); fmt_f32(b, u32); break;
  case WIRE_T_I64:
    memcpy(&u64, p, 8);
    if ((int64_t)u64 == WIRE_NA_I64) sb_printf(b, "na");
    else sb_printf(b, "%" PRId64, (int64_t)u64);
    break;
  case WIRE_T_I32:
    memcpy(&u32, p, 4);
    if ((int32_t)u32 == WIRE_NA_I32) sb_printf(b, "na");
    else sb_printf(b, "%" PRId32, (int32_t)u32);
    break;
  case WIRE_T_U8: sb_printf(b, "%u", p[0]); break;
  case WIRE_T_BOOL: sb_printf(b, "%s", p[0] == 0 ? "false" : p[0] == 1 ? "true" : "na"); break;
  case WIRE_T_C128:
    memcpy(&u64, p, 8);
    fmt_f64(b, u64);
    sb_printf(b, " ");
    memcpy(&u64, p + 8, 8);
    fmt_f64(b, u64);
    break;
  }
}

GV_FN void dump_elems(sbuf *b, int type, const void *data, uint64_t n) {
  size_t sz = suiro_wire_type_size(type);
  for (uint64_t i = 0; i < n; i++) {
    fmt_elem(b, type, (const unsigned char *)data + i * sz);
    sb_printf(b, "\n");
  }
}

GV_FN void dump_str(sbuf *b, const char *kw, const void *p, size_t n) {
  sb_printf(b, "%s ", kw);
  sb_hex(b, p, n);
  sb_printf(b, "\n");
}

GV_FN void dump_strs(sbuf *b, const suiro_wire_strs *s) {
  sb_printf(b, "strs %" PRIu64 "\n", s->n);
  suiro_wire_strs_iter it = suiro_wire_strs_begin(s);
  const char *p;
  size_t n;
  while (suiro_wire_strs_next(&it, &p, &n)) {
    if (p) {
      sb_hex(b, p, n);
      sb_printf(b, "\n");
    } else {
      sb_printf(b, "na\n");
    }
  }
}

static const char *const unit_names[] = { "s", "ms", "us", "ns" };
static const char *const lang_names[] = { NULL, "lua", "python", "r" };

/* Decodes buf with the pull reader and writes the notation. WIRE_OK or WIRE_ERR (err set). */
GV_FN int wire_dump(const void *buf, size_t len, sbuf *b, char *err, size_t errcap) {
  suiro_wire_reader r;
  suiro_wire_item it;
  int st = suiro_wire_reader_init(&r, buf, len);
  while (st == WIRE_OK && (st = suiro_wire_next(&r, &it)) == WIRE_OK) {
    switch (it.tag) {
    case WIRE_NIL: sb_printf(b, "nil\n"); break;
    case WIRE_BOOL: sb_printf(b, "bool %s\n", it.flag == 0 ? "false" : it.flag == 1 ? "true" : "na"); break;
    case WIRE_I64:
      sb_printf(b, "i64 ");
      fmt_elem(b, WIRE_T_I64, (const unsigned char *)&it.i);
      sb_printf(b, "\n");
      break;
    case WIRE_F64:
      sb_printf(b, "f64 ");
      fmt_f64(b, f64_bits(it.f));
      sb_printf(b, "\n");
      break;
    case WIRE_STR: dump_str(b, "str", it.data, it.n); break;
    case WIRE_BYTES: dump_str(b, "bytes", it.data, it.n); break;
    case WIRE_ARRAY:
      sb_printf(b, "array %s %" PRIu64 "\n", suiro_wire_type_name(it.type), it.n);
      dump_elems(b, it.type, it.data, it.n);
      break;
    case WIRE_NDARRAY:
      sb_printf(b, "ndarray %s %s %d", suiro_wire_type_name(it.type), it.flag ? "F" : "C", it.ndim);
      for (int i = 0; i < it.ndim; i++) sb_printf(b, " %" PRIu64, it.dims[i]);
      sb_printf(b, "\n");
      dump_elems(b, it.type, it.data, it.n);
      break;
    case WIRE_STRS: dump_strs(b, &it.strs); break;
    case WIRE_LIST: sb_printf(b, "list %" PRIu64 "\n", it.n); break;
    case WIRE_DICT: sb_printf(b, "dict %" PRIu64 "\n", it.n); break;
    case WIRE_FRAME: sb_printf(b, "frame %" PRIu64 " %" PRIu64 "\n", it.n, it.nrow); break;
    case WIRE_FACTOR:
      sb_printf(b, "factor %s %" PRIu64 "\n", it.flag ? "ordered" : "unordered", it.n);
      for (uint64_t i = 0; i < it.n; i++) {
        int32_t c;
        memcpy(&c, (const char *)it.data + 4 * i, 4);
        if (c == WIRE_NA_CODE) sb_printf(b, "na\n");
        else sb_printf(b, "%" PRId32 "\n", c);
      }
      dump_strs(b, &it.strs);
      break;
    case WIRE_DATE:
      sb_printf(b, "date %s %" PRIu64 "\n", suiro_wire_type_name(it.type), it.n);
      dump_elems(b, it.type, it.data, it.n);
      break;
    case WIRE_TIMESTAMP:
      sb_printf(b, "timestamp %s %s %" PRIu64 "\n", suiro_wire_type_name(it.type), unit_names[it.flag], it.n);
      dump_str(b, "str", it.text[0].ptr, it.text[0].len);
      dump_elems(b, it.type, it.data, it.n);
      break;
    case WIRE_ERROR:
      sb_printf(b, "error %" PRId64 "\n", it.i);
      for (int i = 0; i < 3; i++) dump_str(b, "str", it.text[i].ptr, it.text[i].len);
      break;
    case WIRE_CALL:
      sb_printf(b, "call %s\n", it.flag == WIRE_CALL_NAME ? "name" : "source");
      dump_str(b, "str", it.text[0].ptr, it.text[0].len);
      break;
    case WIRE_REF:
      sb_printf(b, "ref %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %d", suiro_wire_type_name(it.ref.type),
                it.ref.order ? "F" : "C", it.ref.flags, it.ref.offset, it.ref.length, it.ref.ndim);
      for (int i = 0; i < it.ref.ndim; i++) sb_printf(b, " %" PRIu64, it.ref.dims[i]);
      sb_printf(b, "\n");
      dump_str(b, "str", it.ref.name.ptr, it.ref.name.len);
      break;
    case WIRE_FUNC:
      sb_printf(b, "func %s %" PRIu64 " %" PRIu64 "\n", lang_names[it.flag], (uint64_t)it.i, it.n);
      break;
    case WIRE_BACKREF: sb_printf(b, "backref %" PRId64 "\n", it.i); break;
    case WIRE_RANGE: sb_printf(b, "range %" PRId64 " %" PRId64 " %" PRIu64 "\n", it.i, it.step, it.n); break;
    }
  }
  if (st == WIRE_END) return WIRE_OK;
  if (errcap) snprintf(err, errcap, "%s", r.err);
  return WIRE_ERR;
}

/* ---- the vectors --------------------------------------------------------------------------- */

#define NA_F64 bits_f64(WIRE_NA_F64_BITS)

static void put_s(suiro_wire_writer *w, const char *s) { suiro_wire_put_str(w, s, strlen(s)); }

static void put_f64s(suiro_wire_writer *w, int n, const double *v) {
  double *d = suiro_wire_put_array(w, WIRE_T_F64, (uint64_t)n);
  if (d) memcpy(d, v, 8 * (size_t)n);
}

static void put_strs(suiro_wire_writer *w, int n, const char *const *v) {
  suiro_wire_put_strs(w, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    if (v[i]) suiro_wire_strs_add(w, v[i], strlen(v[i]));
    else suiro_wire_strs_add_na(w);
  }
}

static void put_factor(suiro_wire_writer *w, int n, const int32_t *codes, int ordered, int nlev,
                       const char *const *levels) {
  int32_t *c = suiro_wire_put_factor(w, (uint64_t)n, ordered, (uint64_t)nlev);
  if (c && n) memcpy(c, codes, 4 * (size_t)n);
  for (int i = 0; i < nlev; i++) suiro_wire_strs_add(w, levels[i], strlen(levels[i]));
}

static void v_nil(suiro_wire_writer *w) { suiro_wire_put_nil(w); }
static void v_bool_true(suiro_wire_writer *w) { suiro_wire_put_bool(w, 1); }
static void v_bool_false(suiro_wire_writer *w) { suiro_wire_put_bool(w, 0); }
static void v_bool_na(suiro_wire_writer *w) { suiro_wire_put_bool(w, WIRE_NA_BOOL); }
static void v_i64_small(suiro_wire_writer *w) { suiro_wire_put_i64(w, 5); }
static void v_i64_negative(suiro_wire_writer *w) { suiro_wire_put_i64(w, -1); }
static void v_i64_int48_edges(suiro_wire_writer *w) {
  const int64_t v[] = { 0, (INT64_C(1) << 47) - 1, -(INT64_C(1) << 47), INT64_C(1) << 47,
                        -(INT64_C(1) << 47) - 1, 1000000 };
  suiro_wire_put_list(w, 6);
  for (int i = 0; i < 6; i++) suiro_wire_put_i64(w, v[i]);
}
static void v_i64_extremes(suiro_wire_writer *w) {
  suiro_wire_put_list(w, 3);
  suiro_wire_put_i64(w, INT64_MAX);
  suiro_wire_put_i64(w, INT64_MIN + 1);
  suiro_wire_put_i64(w, INT64_MIN); /* NA for R (bit64) */
}
static void v_f64_scalar(suiro_wire_writer *w) { suiro_wire_put_f64(w, 3.141592653589793); }
static void v_f64_values(suiro_wire_writer *w) {
  const double v[] = { 3.0, 0.1, -0.0, 0.0, 1e300, 5e-324, -2.5, INFINITY, -INFINITY };
  suiro_wire_put_list(w, 9);
  for (int i = 0; i < 9; i++) suiro_wire_put_f64(w, v[i]);
}
static void v_f64_nan_na(suiro_wire_writer *w) {
  suiro_wire_put_list(w, 4);
  suiro_wire_put_f64(w, bits_f64(UINT64_C(0x7FF8000000000000))); /* the default quiet NaN */
  suiro_wire_put_f64(w, NA_F64);                                   /* R's NA_real_ */
  suiro_wire_put_f64(w, bits_f64(UINT64_C(0x7FF80000000007A2)));   /* NA_real_ after arithmetic */
  suiro_wire_put_f64(w, bits_f64(UINT64_C(0xFFF8000000000000)));   /* -nan */
}
static void v_str_hello(suiro_wire_writer *w) { put_s(w, "hello"); }
static void v_str_empty(suiro_wire_writer *w) { put_s(w, ""); }
static void v_str_utf8(suiro_wire_writer *w) { put_s(w, "\xc5\xbc\xc3\xb3\xc5\x82w \xe2\x9c\x93 \xe6\xb0\xb4\xe8\xb7\xaf"); }
static void v_str_8(suiro_wire_writer *w) { put_s(w, "exactly8"); }
static void v_str_nul(suiro_wire_writer *w) { suiro_wire_put_str(w, "a\0b", 3); }
static void v_bytes_empty(suiro_wire_writer *w) { suiro_wire_put_bytes(w, "", 0); }
static void v_bytes_data(suiro_wire_writer *w) { suiro_wire_put_bytes(w, "\x00\x01\xfe\xff\x80\x7f" "ABC", 9); }

static void v_array_f64(suiro_wire_writer *w) {
  const double v[] = { 1, -2.5, NA_F64, NAN, INFINITY, 0.1 };
  put_f64s(w, 6, v);
}
static void v_array_f32(suiro_wire_writer *w) {
  const float v[] = { 1.0f, -2.5f, NAN, INFINITY, 0.1f };
  float *d = suiro_wire_put_array(w, WIRE_T_F32, 5);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_i64(suiro_wire_writer *w) {
  const int64_t v[] = { 0, -1, WIRE_NA_I64, INT64_MAX, INT64_C(1234567890123) };
  int64_t *d = suiro_wire_put_array(w, WIRE_T_I64, 5);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_i32(suiro_wire_writer *w) {
  const int32_t v[] = { 0, -1, WIRE_NA_I32, INT32_MAX, 42 };
  int32_t *d = suiro_wire_put_array(w, WIRE_T_I32, 5);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_u8(suiro_wire_writer *w) {
  const uint8_t v[] = { 0, 1, 127, 128, 255 };
  uint8_t *d = suiro_wire_put_array(w, WIRE_T_U8, 5);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_bool(suiro_wire_writer *w) {
  const uint8_t v[] = { 1, 0, WIRE_NA_BOOL, 1 };
  uint8_t *d = suiro_wire_put_array(w, WIRE_T_BOOL, 4);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_c128(suiro_wire_writer *w) {
  const double v[] = { 1, -1, 0, 0, NA_F64, 2.5, INFINITY, -0.0 };
  double *d = suiro_wire_put_array(w, WIRE_T_C128, 4);
  if (d) memcpy(d, v, sizeof v);
}
static void v_array_empty(suiro_wire_writer *w) {
  suiro_wire_put_list(w, WIRE_T_MAX);
  for (int t = 1; t <= WIRE_T_MAX; t++) suiro_wire_put_array(w, t, 0);
}
static void v_array_u8_long(suiro_wire_writer *w) {
  uint8_t *d = suiro_wire_put_array(w, WIRE_T_U8, 300);
  if (d) for (int i = 0; i < 300; i++) d[i] = (uint8_t)(i * 7);
}

static void v_nd_f64_c(suiro_wire_writer *w) { /* [[1 2 3] [4 5 6]] */
  const uint64_t dims[] = { 2, 3 };
  double *d = suiro_wire_put_ndarray(w, WIRE_T_F64, WIRE_ORDER_C, 2, dims);
  if (d) for (int i = 0; i < 6; i++) d[i] = i + 1;
}
static void v_nd_f64_f(suiro_wire_writer *w) { /* the same matrix stored column-major */
  const uint64_t dims[] = { 2, 3 };
  const double v[] = { 1, 4, 2, 5, 3, 6 };
  double *d = suiro_wire_put_ndarray(w, WIRE_T_F64, WIRE_ORDER_F, 2, dims);
  if (d) memcpy(d, v, sizeof v);
}
static void v_nd_i32_3d_f(suiro_wire_writer *w) { /* R: array(1:24, c(2, 3, 4)) with one NA */
  const uint64_t dims[] = { 2, 3, 4 };
  int32_t *d = suiro_wire_put_ndarray(w, WIRE_T_I32, WIRE_ORDER_F, 3, dims);
  if (d) {
    for (int i = 0; i < 24; i++) d[i] = i + 1;
    d[5] = WIRE_NA_I32;
  }
}
static void v_nd_bool_c(suiro_wire_writer *w) {
  const uint64_t dims[] = { 3, 1 };
  uint8_t *d = suiro_wire_put_ndarray(w, WIRE_T_BOOL, WIRE_ORDER_C, 2, dims);
  if (d) { d[0] = 1; d[1] = WIRE_NA_BOOL; d[2] = 0; }
}
static void v_nd_0d(suiro_wire_writer *w) {
  double *d = suiro_wire_put_ndarray(w, WIRE_T_F64, WIRE_ORDER_C, 0, NULL);
  if (d) d[0] = 42;
}
static void v_nd_empty(suiro_wire_writer *w) {
  const uint64_t dims[] = { 0, 3 };
  suiro_wire_put_ndarray(w, WIRE_T_I32, WIRE_ORDER_C, 2, dims);
}

static void v_strs(suiro_wire_writer *w) {
  const char *v[] = { "a", "", NULL, "h\xc3\xa9llo", "a longer string of 32 bytes here" };
  put_strs(w, 5, v);
}
static void v_strs_empty(suiro_wire_writer *w) { suiro_wire_put_strs(w, 0); }
static void v_strs_all_na(suiro_wire_writer *w) {
  const char *v[] = { NULL, NULL };
  put_strs(w, 2, v);
}

static void v_list_empty(suiro_wire_writer *w) { suiro_wire_put_list(w, 0); }
static void v_dict_empty(suiro_wire_writer *w) { suiro_wire_put_dict(w, 0); }
static void v_list_mixed(suiro_wire_writer *w) {
  const double v[] = { 1, 2 };
  suiro_wire_put_list(w, 8);
  suiro_wire_put_nil(w);
  suiro_wire_put_bool(w, 1);
  suiro_wire_put_i64(w, 1);
  suiro_wire_put_f64(w, 2.5);
  put_s(w, "x");
  suiro_wire_put_bytes(w, "\x01\x02", 2);
  put_f64s(w, 2, v);
  suiro_wire_put_list(w, 0);
}
static void v_dict_record(suiro_wire_writer *w) {
  const double score[] = { 1.5, 2 };
  const char *tags[] = { "x", NULL };
  suiro_wire_put_dict(w, 6);
  put_s(w, "name"), put_s(w, "ada");
  put_s(w, "age"), suiro_wire_put_i64(w, 36);
  put_s(w, "score"), put_f64s(w, 2, score);
  put_s(w, "tags"), put_strs(w, 2, tags);
  put_s(w, ""), suiro_wire_put_nil(w); /* R: an unnamed element of a partly named list */
  put_s(w, "nested"), suiro_wire_put_dict(w, 1), put_s(w, "k"), suiro_wire_put_bool(w, 0);
}
static void v_nested(suiro_wire_writer *w) { /* [1, {"a": [[], {}], "b": [[[nil]]]}, "end"] */
  suiro_wire_put_list(w, 3);
  suiro_wire_put_i64(w, 1);
  suiro_wire_put_dict(w, 2);
  put_s(w, "a");
  suiro_wire_put_list(w, 2), suiro_wire_put_list(w, 0), suiro_wire_put_dict(w, 0);
  put_s(w, "b");
  suiro_wire_put_list(w, 1), suiro_wire_put_list(w, 1), suiro_wire_put_list(w, 1), suiro_wire_put_nil(w);
  put_s(w, "end");
}
static void v_depth_64(suiro_wire_writer *w) { /* 63 nested lists around an integer: depth 64 */
  for (int i = 0; i < 63; i++) suiro_wire_put_list(w, 1);
  suiro_wire_put_i64(w, 64);
}

static void frame_all(suiro_wire_writer *w, int64_t when_ns) {
  suiro_wire_put_frame(w, 15, 3);
  const double num[] = { 1.5, NA_F64, 3 };
  put_s(w, "num"), put_f64s(w, 3, num);
  put_s(w, "int");
  int32_t *i32 = suiro_wire_put_array(w, WIRE_T_I32, 3);
  if (i32) i32[0] = 1, i32[1] = WIRE_NA_I32, i32[2] = 3;
  put_s(w, "big");
  int64_t *i64 = suiro_wire_put_array(w, WIRE_T_I64, 3);
  if (i64) i64[0] = INT64_C(9007199254740993), i64[1] = WIRE_NA_I64, i64[2] = -7;
  put_s(w, "flag");
  uint8_t *bl = suiro_wire_put_array(w, WIRE_T_BOOL, 3);
  if (bl) bl[0] = 1, bl[1] = WIRE_NA_BOOL, bl[2] = 0;
  const char *names[] = { "a", NULL, "c" };
  put_s(w, "name"), put_strs(w, 3, names);
  const int32_t sp[] = { 0, WIRE_NA_CODE, 1 };
  const char *species[] = { "setosa", "virginica" };
  put_s(w, "species"), put_factor(w, 3, sp, 0, 2, species);
  const int32_t gr[] = { 2, 0, 1 };
  const char *grades[] = { "low", "mid", "high" };
  put_s(w, "grade"), put_factor(w, 3, gr, 1, 3, grades);
  put_s(w, "day");
  int32_t *day = suiro_wire_put_date(w, WIRE_T_I32, 3);
  if (day) day[0] = 0, day[1] = WIRE_NA_I32, day[2] = 19723;
  put_s(w, "dayf");
  double *dayf = suiro_wire_put_date(w, WIRE_T_F64, 3);
  if (dayf) dayf[0] = -1, dayf[1] = NA_F64, dayf[2] = 19723;
  put_s(w, "when");
  double *ts = suiro_wire_put_timestamp(w, WIRE_T_F64, WIRE_UNIT_S, WIRE_CSTR("UTC"), 3);
  if (ts) ts[0] = 0, ts[1] = NA_F64, ts[2] = 1700000000.25;
  put_s(w, "when_ns");
  int64_t *tn = suiro_wire_put_timestamp(w, WIRE_T_I64, WIRE_UNIT_NS, WIRE_CSTR("America/New_York"), 3);
  if (tn) tn[0] = 0, tn[1] = WIRE_NA_I64, tn[2] = when_ns;
  put_s(w, "small");
  uint8_t *u8 = suiro_wire_put_array(w, WIRE_T_U8, 3);
  if (u8) u8[0] = 0, u8[1] = 128, u8[2] = 255;
  put_s(w, "ratio");
  float *f32 = suiro_wire_put_array(w, WIRE_T_F32, 3);
  if (f32) f32[0] = 0.5f, f32[1] = NAN, f32[2] = -1.0f;
  put_s(w, "z");
  double *z = suiro_wire_put_array(w, WIRE_T_C128, 3);
  if (z) z[0] = 1, z[1] = 2, z[2] = 0, z[3] = -1, z[4] = NA_F64, z[5] = 0;
  put_s(w, "day64");
  int64_t *d64 = suiro_wire_put_date(w, WIRE_T_I64, 3);
  if (d64) d64[0] = 1, d64[1] = WIRE_NA_I64, d64[2] = -719162;
}
static void v_frame_all(suiro_wire_writer *w) { frame_all(w, INT64_C(1700000000123456789)); }
/* the same with whole microseconds in when_ns: readers without nanoseconds (R) read it all */
static void v_frame_all_us(suiro_wire_writer *w) { frame_all(w, INT64_C(1700000000123456000)); }
static void v_frame_empty(suiro_wire_writer *w) { suiro_wire_put_frame(w, 0, 0); }
static void v_frame_zero_rows(suiro_wire_writer *w) {
  suiro_wire_put_frame(w, 3, 0);
  put_s(w, "x"), suiro_wire_put_array(w, WIRE_T_F64, 0);
  put_s(w, "s"), suiro_wire_put_strs(w, 0);
  const char *lv[] = { "a" };
  put_s(w, "f"), put_factor(w, 0, NULL, 0, 1, lv);
}

static void v_factor(suiro_wire_writer *w) {
  const int32_t c[] = { 1, 0, WIRE_NA_CODE, 1, 1 };
  const char *lv[] = { "lo", "hi" };
  put_factor(w, 5, c, 0, 2, lv);
}
static void v_factor_no_levels(suiro_wire_writer *w) {
  const int32_t c[] = { WIRE_NA_CODE, WIRE_NA_CODE };
  put_factor(w, 2, c, 1, 0, NULL);
}
static void v_date_f64(suiro_wire_writer *w) {
  double *d = suiro_wire_put_date(w, WIRE_T_F64, 4);
  if (d) d[0] = 0, d[1] = -1, d[2] = NA_F64, d[3] = 19723.5;
}
static void v_timestamp_ms(suiro_wire_writer *w) {
  int64_t *d = suiro_wire_put_timestamp(w, WIRE_T_I64, WIRE_UNIT_MS, WIRE_CSTR(""), 3);
  if (d) d[0] = 0, d[1] = INT64_C(1700000000000), d[2] = WIRE_NA_I64;
}
static void v_timestamp_us_empty(suiro_wire_writer *w) {
  suiro_wire_put_timestamp(w, WIRE_T_I64, WIRE_UNIT_US, WIRE_CSTR("Europe/Warsaw"), 0);
}

static void v_error_plain(suiro_wire_writer *w) {
  suiro_wire_put_error(w, WIRE_CSTR("simpleError"), WIRE_CSTR("boom"), WIRE_CSTR(""), -1);
}
static void v_error_indexed(suiro_wire_writer *w) {
  suiro_wire_put_error(w, WIRE_CSTR("ValueError"), WIRE_CSTR("math domain error: sqrt(-1)"),
                 WIRE_CSTR("Traceback (most recent call last):\n  File \"<task>\", line 1, in f\n"),
                 41);
}

static void v_call_name(suiro_wire_writer *w) { /* stats::quantile(c(1,2,3), probs = c(.25,.5,.75), names = FALSE) */
  const double x[] = { 1, 2, 3 }, probs[] = { 0.25, 0.5, 0.75 };
  suiro_wire_put_call(w, WIRE_CALL_NAME, WIRE_CSTR("stats::quantile"));
  suiro_wire_put_list(w, 1), put_f64s(w, 3, x);
  suiro_wire_put_dict(w, 2);
  put_s(w, "probs"), put_f64s(w, 3, probs);
  put_s(w, "names"), suiro_wire_put_bool(w, 0);
}
static void v_call_source(suiro_wire_writer *w) {
  const double x[] = { 1, 2, 3 };
  suiro_wire_put_call(w, WIRE_CALL_SOURCE, WIRE_CSTR("import numpy as np\nnp.std(x)"));
  suiro_wire_put_list(w, 0);
  suiro_wire_put_dict(w, 1), put_s(w, "x"), put_f64s(w, 3, x);
}
static void v_call_nested(suiro_wire_writer *w) { /* a call whose argument is itself a call spec */
  suiro_wire_put_call(w, WIRE_CALL_NAME, WIRE_CSTR("os.getpid"));
  suiro_wire_put_list(w, 1);
  suiro_wire_put_call(w, WIRE_CALL_SOURCE, WIRE_CSTR(""));
  suiro_wire_put_list(w, 0), suiro_wire_put_dict(w, 0);
  suiro_wire_put_dict(w, 0);
}

static void v_ref_f64_2d(suiro_wire_writer *w) {
  const uint64_t dims[] = { 1000, 10 };
  suiro_wire_put_ref(w, &(suiro_wire_ref){ WIRE_CSTR("/suiro_1234_5678_9"), 1, 4096, 80000, WIRE_T_F64,
                               WIRE_ORDER_F, 2, dims });
}
static void v_ref_i32_vector(suiro_wire_writer *w) {
  suiro_wire_put_ref(w, &(suiro_wire_ref){ WIRE_CSTR("/suiro_1234_5678_10"), 0, 0, 400, WIRE_T_I32,
                               WIRE_ORDER_C, 0, NULL });
}
static void v_ref_frame_column(suiro_wire_writer *w) { /* a 1000-row f64 column in shared memory */
  suiro_wire_put_frame(w, 2, 1000);
  put_s(w, "x");
  suiro_wire_put_ref(w, &(suiro_wire_ref){ WIRE_CSTR("/suiro_1234_5678_11"), 0, 64, 8000, WIRE_T_F64, 0, 0, NULL });
  put_s(w, "flag");
  uint8_t *b = suiro_wire_put_array(w, WIRE_T_BOOL, 1000);
  for (int i = 0; i < 1000; i++) b[i] = (uint8_t)(i % 3 == 0);
}
static void v_ref_bytes(suiro_wire_writer *w) {
  suiro_wire_put_ref(w, &(suiro_wire_ref){ WIRE_CSTR("/suiro_1_2_3"), UINT64_C(0x8000000000000001), 64, 13,
                               WIRE_REF_BYTES, 0, 0, NULL });
}
static void v_ref_wire(suiro_wire_writer *w) {
  suiro_wire_put_ref(w, &(suiro_wire_ref){ WIRE_CSTR("/suiro_1_2_4"), 0, 128, 4096, WIRE_REF_WIRE, 0, 0, NULL });
}

static void v_func_by_name(suiro_wire_writer *w) { /* a C function of a loaded Lua module */
  suiro_wire_put_func(w, WIRE_LANG_LUA, 0, 1);
  put_s(w, "string.format");
}
static void v_func_proto(suiro_wire_writer *w) { /* a Lua closure: prototype key, no name, 2 upvalues */
  suiro_wire_put_func(w, WIRE_LANG_LUA, UINT64_C(0xFEDCBA9876543210), 3);
  suiro_wire_put_nil(w);
  suiro_wire_put_i64(w, 10);
  suiro_wire_put_list(w, 1), put_s(w, "x");
}
static void v_func_recursive(suiro_wire_writer *w) { /* a local function that captures itself */
  suiro_wire_put_func(w, WIRE_LANG_LUA, 42, 2);
  suiro_wire_put_nil(w);
  suiro_wire_put_backref(w, 0);
}
static void v_func_r_relay(suiro_wire_writer *w) { /* an R task's value 42 with the warning it signalled */
  static const char *const cls[] = { "simpleWarning", "warning", "condition" };
  static const char *const names[] = { "message", "call" };
  suiro_wire_put_func(w, WIRE_LANG_R, 0, 3);
  put_s(w, "suiro::relay");
  suiro_wire_put_i64(w, 42);
  suiro_wire_put_list(w, 1);
  suiro_wire_put_func(w, WIRE_LANG_R, 0, 3); /* simpleWarning("careful"): base::structure(bare list, attributes) */
  put_s(w, "base::structure");
  suiro_wire_put_list(w, 2);
  put_s(w, "careful");
  suiro_wire_put_nil(w);
  suiro_wire_put_dict(w, 2);
  put_s(w, "names"), put_strs(w, 2, names);
  put_s(w, "class"), put_strs(w, 3, cls);
}
static void v_task_func(suiro_wire_writer *w) { /* a Lua task as submitted: [function, 1, 2] */
  suiro_wire_put_list(w, 3);
  suiro_wire_put_func(w, WIRE_LANG_LUA, UINT64_C(0x0123456789ABCDEF), 1);
  suiro_wire_put_nil(w);
  suiro_wire_put_i64(w, 1);
  suiro_wire_put_i64(w, 2);
}
static void v_backref_shared(suiro_wire_writer *w) { /* local d = {a = 1}; send {d, d} */
  suiro_wire_put_list(w, 2);
  suiro_wire_put_dict(w, 1), put_s(w, "a"), suiro_wire_put_i64(w, 1);
  suiro_wire_put_backref(w, 1);
}
static void v_backref_cycle(suiro_wire_writer *w) { /* local t = {}; t.self = t; send t */
  suiro_wire_put_dict(w, 1), put_s(w, "self"), suiro_wire_put_backref(w, 0);
}

static void v_task_args(suiro_wire_writer *w) { suiro_wire_put_list(w, 2), suiro_wire_put_i64(w, 1), suiro_wire_put_i64(w, 2); }
static void v_task_args_f64(suiro_wire_writer *w) {
  suiro_wire_put_list(w, 2), suiro_wire_put_f64(w, 1.5), suiro_wire_put_f64(w, 2.5);
}

static void v_range(suiro_wire_writer *w) { suiro_wire_put_range(w, 1, 1, 25000); }
static void v_range_parts(suiro_wire_writer *w) { /* a map over ranges: { range(1, 5), range(10, 2, -2), {} } */
  suiro_wire_put_list(w, 3), suiro_wire_put_range(w, 1, 1, 5), suiro_wire_put_range(w, 10, -2, 5), suiro_wire_put_range(w, 0, 1, 0);
}

typedef struct golden {
  const char *name, *desc;
  void (*build)(suiro_wire_writer *w);
} golden;

static const golden goldens[] = {
  { "nil", "nil", v_nil },
  { "bool_true", "true", v_bool_true },
  { "bool_false", "false", v_bool_false },
  { "bool_na", "R's NA logical as a scalar (aux 0xFF)", v_bool_na },
  { "i64_small", "5: the 48-bit form inside the header word", v_i64_small },
  { "i64_negative", "-1 (48-bit form, sign-extended)", v_i64_negative },
  { "i64_int48_edges", "0, 2^47-1, -2^47 (48-bit form); 2^47, -2^47-1 (full form); 1e6", v_i64_int48_edges },
  { "i64_extremes", "INT64_MAX, INT64_MIN+1, INT64_MIN (R bit64's NA)", v_i64_extremes },
  { "f64_scalar", "pi", v_f64_scalar },
  { "f64_values", "3, 0.1, -0, 0, 1e300, smallest subnormal, -2.5, inf, -inf", v_f64_values },
  { "f64_nan_na", "NaN, R NA_real_ (0x7FF00000000007A2), NA after arithmetic (0x7FF80000000007A2), -NaN", v_f64_nan_na },
  { "str_hello", "\"hello\"", v_str_hello },
  { "str_empty", "the empty string", v_str_empty },
  { "str_utf8", "UTF-8 text: zolw, a check mark, shuiro in kanji", v_str_utf8 },
  { "str_8", "a string of exactly 8 bytes: no padding", v_str_8 },
  { "str_nul", "\"a\\0b\": strings may hold NUL bytes", v_str_nul },
  { "bytes_empty", "empty bytes", v_bytes_empty },
  { "bytes_data", "9 raw bytes", v_bytes_data },
  { "array_f64", "f64 array with NA, NaN, inf", v_array_f64 },
  { "array_f32", "f32 array with NaN, inf", v_array_f32 },
  { "array_i64", "i64 array with NA (INT64_MIN)", v_array_i64 },
  { "array_i32", "i32 array with NA (INT32_MIN, R's NA_integer_)", v_array_i32 },
  { "array_u8", "u8 array (R raw, numpy uint8)", v_array_u8 },
  { "array_bool", "bool array, one byte per element: 1, 0, 0xFF (NA), 1", v_array_bool },
  { "array_c128", "complex array: (1-1i), 0, (NA+2.5i), (inf-0i)", v_array_c128 },
  { "array_empty", "a list of empty arrays, one of each element type", v_array_empty },
  { "array_u8_long", "300 u8 elements (i * 7 mod 256)", v_array_u8_long },
  { "nd_f64_c", "2x3 f64 matrix [[1 2 3] [4 5 6]], C order", v_nd_f64_c },
  { "nd_f64_f", "the same 2x3 matrix, Fortran order", v_nd_f64_f },
  { "nd_i32_3d_f", "R's array(1:24, c(2, 3, 4)) with element 6 NA, Fortran order", v_nd_i32_3d_f },
  { "nd_bool_c", "3x1 bool matrix with NA", v_nd_bool_c },
  { "nd_0d", "0-d f64 array holding 42", v_nd_0d },
  { "nd_empty", "0x3 i32 matrix", v_nd_empty },
  { "strs", "string vector: \"a\", \"\", NA, \"h\\u00e9llo\", a 32-byte string", v_strs },
  { "strs_empty", "empty string vector", v_strs_empty },
  { "strs_all_na", "string vector of two NAs", v_strs_all_na },
  { "list_empty", "empty list", v_list_empty },
  { "dict_empty", "empty dict", v_dict_empty },
  { "list_mixed", "list of nil, true, 1, 2.5, \"x\", bytes, f64 array, empty list", v_list_mixed },
  { "dict_record", "record with str, int, f64 array, strs, an empty key and a nested dict", v_dict_record },
  { "nested", "[1, {\"a\": [[], {}], \"b\": [[[nil]]]}, \"end\"]", v_nested },
  { "depth_64", "63 nested lists around the integer 64: the deepest value allowed", v_depth_64 },
  { "frame_all", "3-row frame with every column kind", v_frame_all },
  { "frame_all_us", "frame_all with whole microseconds in when_ns", v_frame_all_us },
  { "frame_empty", "frame with no columns and no rows", v_frame_empty },
  { "frame_zero_rows", "frame with three columns and no rows", v_frame_zero_rows },
  { "factor", "factor hi lo NA hi hi (levels lo, hi)", v_factor },
  { "factor_no_levels", "ordered factor of two NAs and no levels", v_factor_no_levels },
  { "date_f64", "dates as f64 days: 1970-01-01, 1969-12-31, NA, 2024-01-01 noon", v_date_f64 },
  { "timestamp_ms", "i64 milliseconds, no time zone, with NA (NaT)", v_timestamp_ms },
  { "timestamp_us_empty", "empty i64 microsecond timestamps in Europe/Warsaw", v_timestamp_us_empty },
  { "error_plain", "error without traceback or element index", v_error_plain },
  { "error_indexed", "error of map element 41 with a traceback", v_error_indexed },
  { "call_name", "stats::quantile(c(1,2,3), probs = c(.25,.5,.75), names = FALSE)", v_call_name },
  { "call_source", "source \"import numpy as np\\nnp.std(x)\" with x = c(1,2,3)", v_call_source },
  { "call_nested", "os.getpid(<an empty source call>)", v_call_nested },
  { "ref_f64_2d", "region reference to a 1000x10 f64 Fortran-order matrix at offset 4096", v_ref_f64_2d },
  { "ref_i32_vector", "region reference to a 1-d i32 vector of 100 elements", v_ref_i32_vector },
  { "ref_frame_column", "frame of 1000 rows whose f64 column is a region reference", v_ref_frame_column },
  { "ref_bytes", "region reference to 13 raw bytes, high flag bit set", v_ref_bytes },
  { "ref_wire", "region reference to an encoded wire value of 4096 bytes", v_ref_wire },
  { "func_by_name", "Lua function resolved by name: string.format", v_func_by_name },
  { "func_proto", "Lua closure: prototype key 0xFEDCBA9876543210, captured 10 and {\"x\"}", v_func_proto },
  { "func_recursive", "Lua closure capturing itself (backref 0)", v_func_recursive },
  { "task_func", "a Lua task: [function without upvalues, 1, 2]", v_task_func },
  { "func_r_relay", "R only: a value 42 with the warning its task signalled (suiro::relay)", v_func_r_relay },
  { "backref_shared", "the same dict twice: [{a = 1}, <container 1>]", v_backref_shared },
  { "backref_cycle", "a dict that contains itself: t.self = t", v_backref_cycle },
  { "task_args", "the hot path: task arguments (1, 2)", v_task_args },
  { "task_args_f64", "task arguments (1.5, 2.5)", v_task_args_f64 },
  { "range", "the integers 1..25000", v_range },
  { "range_parts", "ranges 1..5, 10..2 by -2, and an empty one, in a list", v_range_parts },
};
#define NGOLDENS ((int)(sizeof goldens / sizeof goldens[0]))

/* Builds vector i; returns a malloc'd copy of its bytes (NULL and a message on failure). */
GV_FN unsigned char *golden_build(int i, size_t *len, char *err, size_t errcap) {
  _Alignas(8) unsigned char stack[64];
  suiro_wire_writer w;
  const void *p;
  suiro_wire_writer_init(&w, stack, sizeof stack);
  goldens[i].build(&w);
  if (suiro_wire_writer_finish(&w, &p, len) != WIRE_OK) {
    snprintf(err, errcap, "%s: %s", goldens[i].name, suiro_wire_writer_error(&w));
    suiro_wire_writer_free(&w);
    return NULL;
  }
  unsigned char *copy = malloc(*len);
  if (!copy) abort();
  memcpy(copy, p, *len);
  suiro_wire_writer_free(&w);
  return copy;
}

/* The .txt text of vector i for bytes buf (comment line + notation). */
GV_FN int golden_text(int i, const void *buf, size_t len, sbuf *out, char *err, size_t errcap) {
  sb_printf(out, "# %s\n", goldens[i].desc);
  return wire_dump(buf, len, out, err, errcap);
}

#ifndef GEN_VECTORS_NO_MAIN
static int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

static int same_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char *buf = malloc(n + 1);
  size_t got = fread(buf, 1, n + 1, f);
  fclose(f);
  int same = got == n && memcmp(buf, p, n) == 0;
  free(buf);
  return same;
}

int main(int argc, char **argv) {
  int check = argc > 1 && strcmp(argv[1], "--check") == 0;
  const char *dir = argc > 1 + check ? argv[1 + check] : "tests/vectors";
  int bad = 0;
  for (int i = 0; i < NGOLDENS; i++) {
    char err[256], path[4096];
    size_t len;
    unsigned char *bin = golden_build(i, &len, err, sizeof err);
    sbuf txt = { 0 };
    if (!bin || golden_text(i, bin, len, &txt, err, sizeof err) != WIRE_OK) {
      fprintf(stderr, "%s: %s\n", goldens[i].name, err);
      return 1;
    }
    for (int k = 0; k < 2; k++) {
      snprintf(path, sizeof path, "%s/%s.%s", dir, goldens[i].name, k ? "txt" : "bin");
      const void *p = k ? (const void *)txt.p : bin;
      size_t n = k ? txt.len : len;
      if (check) {
        if (!same_file(path, p, n)) {
          fprintf(stderr, "differs: %s\n", path);
          bad = 1;
        }
      } else if (write_file(path, p, n) < 0) {
        return 1;
      }
    }
    free(bin);
    sb_free(&txt);
  }
  if (!check) printf("wrote %d vectors to %s\n", NGOLDENS, dir);
  return bad;
}
#endif
