/*
 * wire.c — encoder and validating decoder of the wire format (docs/wire-format.md).
 *
 * Ownership: a writer owns only its heap buffer; a reader owns nothing and hands out pointers into
 * the caller's buffer. No shared state, no atomics: one thread per writer/reader.
 *
 * Decoding rules that keep hostile input harmless:
 *   - every read is bounds-checked against the bytes left *before* it happens, with lengths
 *     capped at 2^48-1 so that no size computation can overflow 64 bits;
 *   - claimed counts are checked against the bytes that must back them (a LIST of n items needs
 *     8n bytes) before anyone allocates by them;
 *   - nesting is bounded by a fixed stack (WIRE_MAX_DEPTH), the reader never recurses;
 *   - only canonical encodings are accepted (zero padding and reserved bits, the shortest integer
 *     form), so a valid buffer re-encodes to itself byte for byte — the fuzzer checks exactly that.
 * Words are read with memcpy, so a reader never makes an unaligned access even when it points at
 * a buffer it then rejects as misaligned.
 */
#include "suiro_wire.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");
_Static_assert(sizeof(size_t) == 8, "64-bit platforms only");

#define MAXN WIRE_MAX_COUNT
#define NA_LEN UINT64_MAX
#define I48_MIN (-(INT64_C(1) << 47))
#define I48_MAX ((INT64_C(1) << 47) - 1)

static const unsigned char magic[6] = { 'S', 'U', 'I', 'R', 'O', WIRE_VERSION };

/* Container kinds of a level on the reader's or writer's stack. */
enum { K_TOP = 0, K_LIST, K_DICT, K_FRAME, K_CALL, K_FUNC };

static const unsigned char type_size[WIRE_T_MAX + 1] = { 0, 8, 4, 8, 4, 1, 1, 16 };

size_t suiro_wire_type_size(int type) {
  return type >= 1 && type <= WIRE_T_MAX ? type_size[type] : 0;
}

const char *suiro_wire_type_name(int type) {
  static const char *const names[] = { NULL, "f64", "f32", "i64", "i32", "u8", "bool", "c128" };
  if (type >= 1 && type <= WIRE_T_MAX) return names[type];
  if (type == WIRE_REF_BYTES) return "bytes";
  if (type == WIRE_REF_WIRE) return "wire";
  if (type == WIRE_REF_CHAN) return "channel";
  return NULL;
}

const char *suiro_wire_tag_name(int tag) {
  static const char *const names[] = { NULL, "nil", "bool", "i48", "i64", "f64", "str", "bytes",
                                       "array", "ndarray", "strs", "list", "dict", "frame",
                                       "factor", "date", "timestamp", "error", "call", "ref",
                                       "func", "backref", "range" };
  return tag >= 1 && tag <= WIRE_TAG_MAX ? names[tag] : NULL;
}

const char *suiro_wire_tag_desc(int tag) {
  static const char *const descs[] = { NULL, "nil", "a logical", "an integer", "an integer",
                                       "a number", "a string", "raw bytes", "an array", "an n-d array",
                                       "a string vector", "a list", "a dict", "a data frame",
                                       "a factor", "a date vector", "a timestamp vector", "an error value",
                                       "a call spec", "a shared-memory array", "a function",
                                       "a back-reference", "a range" };
  return tag >= 1 && tag <= WIRE_TAG_MAX ? descs[tag] : "an unknown value";
}

static inline uint64_t ld64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void st64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint64_t hdr(int tag, int aux, uint64_t n) {
  return (uint64_t)tag | (uint64_t)aux << 8 | n << 16;
}
static inline uint64_t pad8(uint64_t n) { return (n + 7) & ~UINT64_C(7); }

static inline int is_column(int tag) {
  return tag == WIRE_ARRAY || tag == WIRE_STRS || tag == WIRE_FACTOR || tag == WIRE_DATE ||
         tag == WIRE_TIMESTAMP || tag == WIRE_REF;
}

/* The element count of a ref as a frame column: typed and 1-d (a column in shared memory), else
 * NOT_A_COLUMN. */
#define NOT_A_COLUMN UINT64_MAX
static uint64_t ref_rows(const suiro_wire_ref *r) {
  size_t es = suiro_wire_type_size(r->type);
  if (!es || r->type == WIRE_REF_BYTES || r->type == WIRE_REF_WIRE || r->ndim > 1) return NOT_A_COLUMN;
  return r->ndim == 1 ? r->dims[0] : r->length / es;
}

/* Product of dims with every factor and the product capped at MAXN (zero extents are skipped
 * for the cap so that a 0 x 2^60 array cannot smuggle in a huge extent). -1 when over the cap. */
static int dims_count(int ndim, const uint64_t *dims, uint64_t *count) {
  uint64_t prod = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    uint64_t d = dims[i];
    if (d > MAXN) return -1;
    if (d == 0) {
      zero = 1;
      continue;
    }
    if (prod > MAXN / d) return -1;
    prod *= d;
  }
  *count = zero ? 0 : prod;
  return 0;
}

/* Whether an item with this tag and element count may come next in container l; on failure
 * writes the reason to msg. TOP and LIST accept anything. */
static int slot_ok(const suiro_wire_level *l, int tag, uint64_t count, char *msg, size_t cap) {
  const char *name = suiro_wire_tag_desc(tag); /* words of the user, not tag names */
  switch (l->kind) {
  case K_DICT:
    if (!(l->left & 1) && tag != WIRE_STR) {
      snprintf(msg, cap, "a dict key is %s (keys are strings)", name);
      return 0;
    }
    return 1;
  case K_FRAME:
    if (!(l->left & 1)) {
      if (tag != WIRE_STR) {
        snprintf(msg, cap, "a data frame column name is %s (names are strings)", name);
        return 0;
      }
    } else if (!is_column(tag)) {
      snprintf(msg, cap, "a data frame column is %s (columns are vectors: numbers, logicals, strings, "
                         "factor, dates, timestamps)", name);
      return 0;
    } else if (tag == WIRE_REF && count == NOT_A_COLUMN) {
      snprintf(msg, cap, "a data frame column is an untyped or n-d shared-memory array (a column is typed and 1-d)");
      return 0;
    } else if (count != l->arg) {
      snprintf(msg, cap, "a data frame column has %llu rows, the frame has %llu",
               (unsigned long long)count, (unsigned long long)l->arg);
      return 0;
    }
    return 1;
  case K_FUNC:
    if (l->left == l->arg && tag != WIRE_STR && (l->flag || tag != WIRE_NIL)) {
      snprintf(msg, cap, "a function's name is %s (a string%s)", name, l->flag ? ": it is called by name" : ", or nil");
      return 0;
    }
    return 1;
  case K_CALL:
    if (l->left == 2 && tag != WIRE_LIST) {
      snprintf(msg, cap, "a call spec's arguments are %s (they are a list)", name);
      return 0;
    }
    if (l->left == 1 && tag != WIRE_DICT) {
      snprintf(msg, cap, "a call spec's named arguments are %s (they are a dict)", name);
      return 0;
    }
    return 1;
  default:
    return 1;
  }
}

/* =============================================================================================
 * Writer
 */

static SUIRO_COLD int wfail(suiro_wire_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static SUIRO_COLD int wfail(suiro_wire_writer *w, const char *fmt, ...) {
  if (w->status != WIRE_OK) return WIRE_ERR;
  char what[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(w->err, sizeof w->err, "wire: %s", what);
  w->status = WIRE_ERR;
  suiro_set_error(SUIRO_ERR, "%s", w->err);
  return WIRE_ERR;
}

static SUIRO_COLD unsigned char *grow(suiro_wire_writer *w, size_t n) {
  if (w->status != WIRE_OK) return NULL;
  size_t need = w->len + n; /* n < 2^53 (counts are capped), so this cannot wrap */
  size_t cap = w->cap > 128 ? w->cap : 128;
  while (cap < need) cap *= 2;
  unsigned char *nb = w->heap ? realloc(w->heap, cap) : malloc(cap);
  if (!nb) {
    wfail(w, "out of memory growing the buffer to %zu bytes", cap);
    return NULL;
  }
  if (!w->heap && w->len) memcpy(nb, w->buf, w->len);
  w->heap = w->buf = nb;
  w->cap = cap;
  return nb + w->len;
}

static inline unsigned char *reserve(suiro_wire_writer *w, size_t n) {
  if (SUIRO_LIKELY(w->cap - w->len >= n)) return w->buf + w->len;
  return grow(w, n);
}

static void write_header(suiro_wire_writer *w) {
  unsigned char *p = reserve(w, 8);
  if (!p) return;
  uint64_t h = 0;
  memcpy(&h, magic, sizeof magic);
  st64(p, h);
  w->len = 8;
}

void suiro_wire_writer_init(suiro_wire_writer *w, void *buf, size_t cap) {
  uintptr_t a = (uintptr_t)buf, b = (a + 7) & ~(uintptr_t)7;
  if (!buf || cap < b - a + 8) {
    w->buf = NULL;
    w->cap = 0;
  } else {
    w->buf = (unsigned char *)b;
    w->cap = (cap - (b - a)) & ~(size_t)7;
  }
  w->heap = NULL;
  w->len = 0;
  w->status = WIRE_OK;
  w->err[0] = 0;
  suiro_wire_writer_reset(w);
}

void suiro_wire_writer_reset(suiro_wire_writer *w) {
  w->len = 0;
  w->status = WIRE_OK;
  w->err[0] = 0;
  w->depth = 0;
  w->strs_left = 0;
  w->strs_na_ok = 1;
  w->ncont = 0;
  w->lv[0] = (suiro_wire_level){ 1, 0, K_TOP, 0 };
  write_header(w);
}

void suiro_wire_writer_free(suiro_wire_writer *w) {
  free(w->heap);
  w->heap = NULL;
  w->buf = NULL;
  w->cap = w->len = 0;
}

const char *suiro_wire_writer_error(const suiro_wire_writer *w) { return w->err; }

int suiro_wire_writer_finish(suiro_wire_writer *w, const void **ptr, size_t *len) {
  if (w->status != WIRE_OK) return WIRE_ERR;
  if (w->strs_left)
    return wfail(w, "unfinished strs: %llu strings still to add", (unsigned long long)w->strs_left);
  if (w->depth > 0)
    return wfail(w, "unfinished %s at depth %d: %llu items still to come",
                 (const char *const[]){ "?", "list", "dict", "frame", "call", "function" }[w->lv[w->depth].kind],
                 w->depth, (unsigned long long)w->lv[w->depth].left);
  if (w->lv[0].left) return wfail(w, "no value written");
  *ptr = w->buf;
  *len = w->len;
  return WIRE_OK;
}

/* Why begin() refused: exactly one of its unlikely conditions holds. */
static SUIRO_COLD unsigned char *begin_slow(suiro_wire_writer *w, int tag) {
  if (w->status != WIRE_OK) return NULL;
  if (w->strs_left) {
    wfail(w, "a %s put while a strs still needs %llu strings", suiro_wire_tag_name(tag),
          (unsigned long long)w->strs_left);
    return NULL;
  }
  suiro_wire_level *l = &w->lv[w->depth];
  if (l->left == 0) {
    wfail(w, "a %s put after the top-level value is complete", suiro_wire_tag_name(tag));
    return NULL;
  }
  wfail(w, "a %s at depth %d: values nest at most %d deep", suiro_wire_tag_name(tag), w->depth + 1,
        WIRE_MAX_DEPTH);
  return NULL;
}

/* Common entry of every put: checks the writer's state and the enclosing container, reserves
 * nbytes and counts the item in its container. The caller writes, advances len and then calls
 * leaf() or open_level(). */
static inline unsigned char *begin(suiro_wire_writer *w, int tag, uint64_t count, size_t nbytes) {
  suiro_wire_level *l = &w->lv[w->depth];
  if (SUIRO_UNLIKELY(w->status != WIRE_OK || w->strs_left || l->left == 0 ||
                     w->depth >= WIRE_MAX_DEPTH)) {
    begin_slow(w, tag);
    return NULL;
  }
  if (l->kind > K_LIST) {
    char msg[128];
    if (!slot_ok(l, tag, count, msg, sizeof msg)) {
      wfail(w, "%s", msg);
      return NULL;
    }
  }
  unsigned char *p = reserve(w, nbytes);
  if (SUIRO_UNLIKELY(!p)) return NULL;
  l->left--;
  return p;
}

/* After a leaf: close every container whose last item this was. */
static inline void leaf(suiro_wire_writer *w) {
  while (w->depth > 0 && w->lv[w->depth].left == 0) w->depth--;
}

static inline void open_level(suiro_wire_writer *w, int kind, uint64_t children, uint64_t arg, int flag) {
  if (children == 0) {
    leaf(w);
    return;
  }
  w->depth++;
  w->lv[w->depth] = (suiro_wire_level){ children, arg, kind, flag };
}

/* Zeroes the padding word at the end of a payload of nbytes starting at p. */
static inline void zero_tail(unsigned char *p, uint64_t nbytes) {
  if (nbytes & 7) st64(p + (nbytes & ~UINT64_C(7)), 0);
}

int suiro_wire_put_nil(suiro_wire_writer *w) {
  unsigned char *p = begin(w, WIRE_NIL, 0, 8);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_NIL, 0, 0));
  w->len += 8;
  leaf(w);
  return WIRE_OK;
}

int suiro_wire_put_bool(suiro_wire_writer *w, int v) {
  if (v != 0 && v != 1 && v != WIRE_NA_BOOL) return wfail(w, "bool value %d (0, 1 or 0xFF)", v);
  unsigned char *p = begin(w, WIRE_BOOL, 0, 8);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_BOOL, v, 0));
  w->len += 8;
  leaf(w);
  return WIRE_OK;
}

int suiro_wire_put_i64(suiro_wire_writer *w, int64_t v) {
  if (v >= I48_MIN && v <= I48_MAX) { /* the common case: the value rides in the header word */
    unsigned char *p = begin(w, WIRE_I64, 0, 8);
    if (!p) return WIRE_ERR;
    st64(p, (uint64_t)v << 16 | WIRE_I48);
    w->len += 8;
  } else {
    unsigned char *p = begin(w, WIRE_I64, 0, 16);
    if (!p) return WIRE_ERR;
    st64(p, hdr(WIRE_I64, 0, 0));
    st64(p + 8, (uint64_t)v);
    w->len += 16;
  }
  leaf(w);
  return WIRE_OK;
}

int suiro_wire_put_f64(suiro_wire_writer *w, double v) {
  unsigned char *p = begin(w, WIRE_F64, 0, 16);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_F64, 0, 0));
  memcpy(p + 8, &v, 8);
  w->len += 16;
  leaf(w);
  return WIRE_OK;
}

static int put_blob(suiro_wire_writer *w, int tag, const void *s, size_t len) {
  if (len > MAXN) return wfail(w, "%s of %zu bytes (max 2^48-1)", suiro_wire_tag_name(tag), len);
  size_t nb = 8 + pad8(len);
  unsigned char *p = begin(w, tag, 0, nb);
  if (!p) return WIRE_ERR;
  st64(p, hdr(tag, 0, len));
  zero_tail(p + 8, len);
  if (len) memcpy(p + 8, s, len);
  w->len += nb;
  leaf(w);
  return WIRE_OK;
}

int suiro_wire_put_str(suiro_wire_writer *w, const void *s, size_t len) { return put_blob(w, WIRE_STR, s, len); }
int suiro_wire_put_bytes(suiro_wire_writer *w, const void *p, size_t len) {
  return put_blob(w, WIRE_BYTES, p, len);
}

/* Writes a STR part (not an item of its own) at p; returns its size. */
static size_t str_part(unsigned char *p, suiro_wire_str s) {
  st64(p, hdr(WIRE_STR, 0, s.len));
  zero_tail(p + 8, s.len);
  if (s.len) memcpy(p + 8, s.ptr, s.len);
  return 8 + pad8(s.len);
}

/* A leaf of count elements of a (checked) type after its header: ARRAY and DATE. Returns where
 * the elements go; the padding after them is zeroed. */
static void *put_typed_block(suiro_wire_writer *w, int tag, const char *what, int type, uint64_t count) {
  if (count > MAXN) {
    wfail(w, "%s of %llu elements (max 2^48-1)", what, (unsigned long long)count);
    return NULL;
  }
  uint64_t bytes = count * suiro_wire_type_size(type);
  size_t nb = 8 + pad8(bytes);
  unsigned char *p = begin(w, tag, count, nb);
  if (!p) return NULL;
  st64(p, hdr(tag, type, count));
  zero_tail(p + 8, bytes);
  w->len += nb;
  leaf(w);
  return p + 8;
}

void *suiro_wire_put_array(suiro_wire_writer *w, int type, uint64_t count) {
  if (!suiro_wire_type_size(type)) {
    wfail(w, "array of unknown element type %d", type);
    return NULL;
  }
  return put_typed_block(w, WIRE_ARRAY, "array", type, count);
}

void *suiro_wire_put_ndarray(suiro_wire_writer *w, int type, int order, int ndim, const uint64_t *dims) {
  size_t sz = suiro_wire_type_size(type);
  uint64_t count;
  if (!sz) {
    wfail(w, "ndarray of unknown element type %d", type);
    return NULL;
  }
  if (order != WIRE_ORDER_C && order != WIRE_ORDER_F) {
    wfail(w, "ndarray order %d (0 = C, 1 = F)", order);
    return NULL;
  }
  if (ndim < 0 || ndim > WIRE_MAX_NDIM) {
    wfail(w, "ndarray with %d dimensions (max %d)", ndim, WIRE_MAX_NDIM);
    return NULL;
  }
  if (dims_count(ndim, dims, &count) < 0) {
    wfail(w, "ndarray shape exceeds 2^48-1 elements");
    return NULL;
  }
  uint64_t bytes = count * sz;
  size_t nb = 16 + 8 * (size_t)ndim + pad8(bytes);
  unsigned char *p = begin(w, WIRE_NDARRAY, count, nb);
  if (!p) return NULL;
  st64(p, hdr(WIRE_NDARRAY, type, (uint64_t)ndim));
  st64(p + 8, (uint64_t)order);
  for (int i = 0; i < ndim; i++) st64(p + 16 + 8 * i, dims[i]);
  unsigned char *data = p + 16 + 8 * ndim;
  zero_tail(data, bytes);
  w->len += nb;
  leaf(w);
  return data;
}

/* Writes a STRS header plus n length words at p and opens the string state. */
static size_t strs_open(suiro_wire_writer *w, unsigned char *p, uint64_t n, int na_ok) {
  st64(p, hdr(WIRE_STRS, 0, n));
  w->strs_left = n;
  w->strs_na_ok = na_ok;
  w->strs_lens = (size_t)(p + 8 - w->buf);
  return 8 + 8 * (size_t)n;
}

int suiro_wire_put_strs(suiro_wire_writer *w, uint64_t n) {
  if (n > MAXN) return wfail(w, "strs of %llu strings (max 2^48-1)", (unsigned long long)n);
  size_t nb = 8 + 8 * (size_t)n;
  unsigned char *p = begin(w, WIRE_STRS, n, nb);
  if (!p) return WIRE_ERR;
  w->len += strs_open(w, p, n, 1);
  leaf(w);
  return WIRE_OK;
}

static int strs_push(suiro_wire_writer *w, const void *s, size_t len, uint64_t lenword) {
  if (w->status != WIRE_OK) return WIRE_ERR;
  if (!w->strs_left) return wfail(w, "suiro_wire_strs_add without an open strs");
  if (len > MAXN) return wfail(w, "string of %zu bytes (max 2^48-1)", len);
  unsigned char *p = reserve(w, len + 8); /* + room for the final padding */
  if (!p) return WIRE_ERR;
  if (len) memcpy(p, s, len);
  w->len += len;
  st64(w->buf + w->strs_lens, lenword);
  w->strs_lens += 8;
  if (--w->strs_left == 0) {
    size_t pad = pad8(w->len) - w->len;
    memset(w->buf + w->len, 0, pad);
    w->len += pad;
  }
  return WIRE_OK;
}

int suiro_wire_strs_add(suiro_wire_writer *w, const void *s, size_t len) { return strs_push(w, s, len, len); }

int suiro_wire_strs_add_na(suiro_wire_writer *w) {
  if (w->status == WIRE_OK && w->strs_left && !w->strs_na_ok)
    return wfail(w, "NA factor level (levels cannot be NA)");
  return strs_push(w, NULL, 0, NA_LEN);
}

static int put_container(suiro_wire_writer *w, int tag, int kind, uint64_t n, uint64_t children,
                         uint64_t nrow) {
  size_t nb = tag == WIRE_FRAME ? 16 : 8;
  unsigned char *p = begin(w, tag, 0, nb);
  if (!p) return WIRE_ERR;
  st64(p, hdr(tag, 0, n));
  if (tag == WIRE_FRAME) st64(p + 8, nrow);
  w->len += nb;
  if (kind != K_FRAME) w->ncont++;
  open_level(w, kind, children, nrow, 0);
  return WIRE_OK;
}

int suiro_wire_put_list(suiro_wire_writer *w, uint64_t n) {
  if (n > MAXN) return wfail(w, "list of %llu items (max 2^48-1)", (unsigned long long)n);
  return put_container(w, WIRE_LIST, K_LIST, n, n, 0);
}

int suiro_wire_put_dict(suiro_wire_writer *w, uint64_t n) {
  if (n > MAXN) return wfail(w, "dict of %llu entries (max 2^48-1)", (unsigned long long)n);
  return put_container(w, WIRE_DICT, K_DICT, n, 2 * n, 0);
}

int suiro_wire_put_frame(suiro_wire_writer *w, uint64_t ncol, uint64_t nrow) {
  if (ncol > MAXN || nrow > MAXN)
    return wfail(w, "frame of %llu columns x %llu rows (max 2^48-1)", (unsigned long long)ncol,
                 (unsigned long long)nrow);
  return put_container(w, WIRE_FRAME, K_FRAME, ncol, 2 * ncol, nrow);
}

int32_t *suiro_wire_put_factor(suiro_wire_writer *w, uint64_t count, int ordered, uint64_t nlevels) {
  if (ordered != 0 && ordered != 1) {
    wfail(w, "factor ordered flag %d (0 or 1)", ordered);
    return NULL;
  }
  if (count > MAXN || nlevels > MAXN) {
    wfail(w, "factor of %llu codes, %llu levels (max 2^48-1)", (unsigned long long)count,
          (unsigned long long)nlevels);
    return NULL;
  }
  uint64_t cbytes = 4 * count;
  size_t nb = 8 + pad8(cbytes) + 8 + 8 * (size_t)nlevels;
  unsigned char *p = begin(w, WIRE_FACTOR, count, nb);
  if (!p) return NULL;
  st64(p, hdr(WIRE_FACTOR, ordered, count));
  zero_tail(p + 8, cbytes);
  w->len += 8 + pad8(cbytes);
  w->len += strs_open(w, p + 8 + pad8(cbytes), nlevels, 0);
  leaf(w);
  return (int32_t *)(void *)(p + 8);
}

void *suiro_wire_put_date(suiro_wire_writer *w, int type, uint64_t count) {
  if (type != WIRE_T_I32 && type != WIRE_T_I64 && type != WIRE_T_F64) {
    wfail(w, "date of element type %d (i32, i64 or f64)", type);
    return NULL;
  }
  return put_typed_block(w, WIRE_DATE, "date", type, count);
}

void *suiro_wire_put_timestamp(suiro_wire_writer *w, int type, int unit, suiro_wire_str tz, uint64_t count) {
  if (type != WIRE_T_I64 && type != WIRE_T_F64) {
    wfail(w, "timestamp of element type %d (i64 or f64)", type);
    return NULL;
  }
  if (unit < WIRE_UNIT_S || unit > WIRE_UNIT_NS) {
    wfail(w, "timestamp unit %d (0 s, 1 ms, 2 us, 3 ns)", unit);
    return NULL;
  }
  if (count > MAXN || tz.len > MAXN) {
    wfail(w, "timestamp of %llu elements (max 2^48-1)", (unsigned long long)count);
    return NULL;
  }
  uint64_t bytes = count * 8;
  size_t nb = 16 + 8 + pad8(tz.len) + bytes;
  unsigned char *p = begin(w, WIRE_TIMESTAMP, count, nb);
  if (!p) return NULL;
  st64(p, hdr(WIRE_TIMESTAMP, type, count));
  st64(p + 8, (uint64_t)unit);
  size_t off = 16 + str_part(p + 16, tz);
  w->len += nb;
  leaf(w);
  return p + off;
}

int suiro_wire_put_error(suiro_wire_writer *w, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str tb, int64_t index) {
  if (index < -1) return wfail(w, "error element index %lld (>= 0, or -1 for none)", (long long)index);
  if (cls.len > MAXN || msg.len > MAXN || tb.len > MAXN) return wfail(w, "error text too long");
  size_t nb = 16 + 24 + pad8(cls.len) + pad8(msg.len) + pad8(tb.len);
  unsigned char *p = begin(w, WIRE_ERROR, 0, nb);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_ERROR, 0, 0));
  st64(p + 8, (uint64_t)index);
  size_t off = 16;
  off += str_part(p + off, cls);
  off += str_part(p + off, msg);
  str_part(p + off, tb);
  w->len += nb;
  leaf(w);
  return WIRE_OK;
}

int suiro_wire_put_call(suiro_wire_writer *w, int form, suiro_wire_str text) {
  if (form != WIRE_CALL_NAME && form != WIRE_CALL_SOURCE) return wfail(w, "call form %d", form);
  if (form == WIRE_CALL_NAME && text.len == 0) return wfail(w, "call with an empty target name");
  if (text.len > MAXN) return wfail(w, "call text too long");
  size_t nb = 8 + 8 + pad8(text.len);
  unsigned char *p = begin(w, WIRE_CALL, 0, nb);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_CALL, form, 0));
  str_part(p + 8, text);
  w->len += nb;
  open_level(w, K_CALL, 2, 0, 0);
  return WIRE_OK;
}

int suiro_wire_put_func(suiro_wire_writer *w, int lang, uint64_t key, uint64_t n) {
  if (lang < WIRE_LANG_LUA || lang > WIRE_LANG_R) return wfail(w, "function language %d (1 Lua, 2 Python, 3 R)", lang);
  if (n < 1 || n > MAXN)
    return wfail(w, "function with %llu children (1 or more: name or nil, then captured values)",
                 (unsigned long long)n);
  unsigned char *p = begin(w, WIRE_FUNC, 0, 16);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_FUNC, lang, n));
  st64(p + 8, key);
  w->len += 16;
  w->ncont++;
  open_level(w, K_FUNC, n, n, key == 0);
  return WIRE_OK;
}

int suiro_wire_put_backref(suiro_wire_writer *w, uint64_t ordinal) {
  if (w->status == WIRE_OK && ordinal >= w->ncont)
    return wfail(w, "back-reference to container %llu, only %llu so far", (unsigned long long)ordinal,
                 (unsigned long long)w->ncont);
  unsigned char *p = begin(w, WIRE_BACKREF, 0, 8);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_BACKREF, 0, ordinal));
  w->len += 8;
  w->buf[6] |= WIRE_HDR_BACKREFS;
  leaf(w);
  return WIRE_OK;
}

/* A range's last element must fit in int64: start + (n - 1) * step. */
/* Whether every element start + i*step (i < n) is an int64. The span (n-1)*step may itself exceed
 * int64 while the last element fits (start near INT64_MIN, a large step), so the room between start
 * and the end it runs towards is measured in unsigned arithmetic. */
static int range_fits(int64_t start, int64_t step, uint64_t n) {
  if (n == 0 || step == 0) return 1;
  uint64_t room = step > 0 ? (uint64_t)INT64_MAX - (uint64_t)start : (uint64_t)start - (uint64_t)INT64_MIN;
  uint64_t mag = step > 0 ? (uint64_t)step : (uint64_t)(-(step + 1)) + 1;
  return n - 1 <= room / mag;
}

int suiro_wire_put_range(suiro_wire_writer *w, int64_t start, int64_t step, uint64_t n) {
  if (step == 0) return wfail(w, "range with step 0");
  if (n > MAXN) return wfail(w, "range of %llu elements (at most 2^48 - 1)", (unsigned long long)n);
  if (!range_fits(start, step, n)) return wfail(w, "range overflows int64");
  unsigned char *p = begin(w, WIRE_RANGE, n, 24);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_RANGE, 0, n));
  st64(p + 8, (uint64_t)start);
  st64(p + 16, (uint64_t)step);
  w->len += 24;
  leaf(w);
  return WIRE_OK;
}

/* Checks a reference's fields; returns NULL or the reason. Shared by writer and reader. */
static const char *ref_problem(const suiro_wire_ref *r, char *buf, size_t cap) {
  if (r->name.len == 0 || r->name.len > WIRE_REF_NAME_MAX) {
    snprintf(buf, cap, "ref region name of %zu bytes (1..%d)", r->name.len, WIRE_REF_NAME_MAX);
    return buf;
  }
  if (memchr(r->name.ptr, 0, r->name.len)) return "ref region name contains a NUL byte";
  if (r->offset > MAXN || r->length > MAXN) return "ref offset or length exceeds 2^48-1";
  if (r->offset & 7) return "ref offset is not a multiple of 8";
  if (r->type == WIRE_REF_CHAN) { /* a channel endpoint: flags the token, length the side */
    if (r->ndim != 0 || r->order != 0 || r->offset != 0) return "channel ref with a shape, order or offset";
    if (r->length > 1) return "channel ref side is not 0 (sending) or 1 (receiving)";
    return NULL;
  }
  if (r->type == WIRE_REF_BYTES || r->type == WIRE_REF_WIRE) {
    if (r->ndim != 0 || r->order != 0) return "untyped ref with a shape or order";
    if (r->type == WIRE_REF_WIRE && (r->length < 8 || (r->length & 7)))
      return "wire ref length is not a positive multiple of 8";
    return NULL;
  }
  size_t sz = suiro_wire_type_size(r->type);
  if (!sz) {
    snprintf(buf, cap, "ref of unknown kind %d", r->type);
    return buf;
  }
  if (r->order != WIRE_ORDER_C && r->order != WIRE_ORDER_F) return "ref order is not 0 (C) or 1 (F)";
  if (r->ndim < 0 || r->ndim > WIRE_MAX_NDIM) return "ref with more than 64 dimensions";
  if (r->ndim == 0) {
    if (r->length % sz) return "ref length is not a multiple of the element size";
    return NULL;
  }
  uint64_t count;
  if (dims_count(r->ndim, r->dims, &count) < 0) return "ref shape exceeds 2^48-1 elements";
  if (count * sz != r->length) {
    snprintf(buf, cap, "ref length %llu does not match its shape (%llu elements of %zu bytes)",
             (unsigned long long)r->length, (unsigned long long)count, sz);
    return buf;
  }
  return NULL;
}

int suiro_wire_put_ref(suiro_wire_writer *w, const suiro_wire_ref *ref) {
  char why[128];
  const char *bad = ref_problem(ref, why, sizeof why);
  if (bad) return wfail(w, "%s", bad);
  size_t nb = 8 + 32 + 8 * (size_t)ref->ndim + 8 + pad8(ref->name.len);
  unsigned char *p = begin(w, WIRE_REF, ref_rows(ref), nb);
  if (!p) return WIRE_ERR;
  st64(p, hdr(WIRE_REF, ref->type, (uint64_t)ref->ndim));
  st64(p + 8, ref->flags);
  st64(p + 16, (uint64_t)ref->order);
  st64(p + 24, ref->offset);
  st64(p + 32, ref->length);
  for (int i = 0; i < ref->ndim; i++) st64(p + 40 + 8 * i, ref->dims[i]);
  str_part(p + 40 + 8 * ref->ndim, ref->name);
  w->len += nb;
  leaf(w);
  return WIRE_OK;
}

/* =============================================================================================
 * Reader
 */

static SUIRO_COLD int rfail(suiro_wire_reader *r, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static SUIRO_COLD int rfail(suiro_wire_reader *r, size_t pos, const char *fmt, ...) {
  char what[150];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(r->err, sizeof r->err, "wire: %s at byte %zu", what, pos);
  r->err_pos = pos;
  r->status = WIRE_ERR;
  suiro_set_error(SUIRO_ERR, "%s", r->err);
  return WIRE_ERR;
}

const char *suiro_wire_reader_error(const suiro_wire_reader *r) { return r->err; }

int suiro_wire_reader_init(suiro_wire_reader *r, const void *buf, size_t len) {
  r->buf = buf;
  r->len = len;
  r->pos = 8;
  r->depth = 0;
  r->status = WIRE_OK;
  r->err[0] = 0;
  r->err_pos = 0;
  r->shared = 0;
  r->ncont = r->nbackrefs = 0;
  r->lv[0] = (suiro_wire_level){ 1, 0, K_TOP, 0 };
  if ((uintptr_t)buf & 7) return rfail(r, 0, "buffer address is not 8-byte aligned");
  if (!buf) return rfail(r, 0, "the buffer is NULL");
  if (len < 8) return rfail(r, len, "truncated: %zu bytes, a buffer starts with an 8-byte header", len);
  const unsigned char *b = buf;
  if (memcmp(b, magic, 5) != 0) return rfail(r, 0, "bad magic (not a suiro wire buffer)");
  if (b[5] != WIRE_VERSION)
    return rfail(r, 5, "unsupported version %d (this reader knows %d)", b[5], WIRE_VERSION);
  if (b[6] & ~WIRE_HDR_BACKREFS) return rfail(r, 6, "unknown header flags 0x%02x", b[6]);
  if (b[7]) return rfail(r, 7, "reserved header byte is not zero");
  r->shared = b[6] & WIRE_HDR_BACKREFS;
  if (len & 7)
    return rfail(r, len & ~(size_t)7, "buffer length %zu is not a multiple of 8", len);
  return WIRE_OK;
}

/* Fails unless nbytes more bytes are present at p. */
#define NEED(p, nbytes, ...)                                         \
  do {                                                               \
    if ((uint64_t)(nbytes) > (uint64_t)(len - (p))) return rfail(r, __VA_ARGS__); \
  } while (0)

/* Checks the k padding bytes at p are zero. */
static int pad_check(suiro_wire_reader *r, size_t p, size_t k) {
  for (size_t i = 0; i < k; i++)
    if (r->buf[p + i]) return rfail(r, p + i, "nonzero padding byte 0x%02x", r->buf[p + i]);
  return WIRE_OK;
}

/* Reads a STR part at *pp (the fixed fields of ERROR, CALL, TIMESTAMP, REF). */
static int str_part_read(suiro_wire_reader *r, size_t *pp, suiro_wire_str *out, const char *what) {
  size_t p = *pp, len = r->len;
  NEED(p, 8, p, "truncated: %s needs a str header, %zu bytes remain", what, len - p);
  uint64_t h = ld64(r->buf + p);
  if ((h & 0xff) != WIRE_STR)
    return rfail(r, p, "bad tag 0x%02x for the %s (expected str)", (unsigned)(h & 0xff), what);
  if ((h >> 8) & 0xff) return rfail(r, p + 1, "nonzero aux byte in the %s", what);
  uint64_t n = h >> 16;
  NEED(p + 8, pad8(n), p, "truncated: %s of %llu bytes, %zu bytes remain", what,
       (unsigned long long)n, len - p - 8);
  if (pad_check(r, p + 8 + n, pad8(n) - n)) return WIRE_ERR;
  out->ptr = (const char *)r->buf + p + 8;
  out->len = n;
  *pp = p + 8 + pad8(n);
  return WIRE_OK;
}

/* Reads a STRS body (header at *pp) */
static int strs_read(suiro_wire_reader *r, size_t *pp, suiro_wire_strs *s, int levels) {
  size_t p = *pp, len = r->len;
  const char *what = levels ? "factor levels" : "strs";
  NEED(p, 8, p, "truncated: %s needs a header, %zu bytes remain", what, len - p);
  uint64_t h = ld64(r->buf + p);
  if ((h & 0xff) != WIRE_STRS)
    return rfail(r, p, "bad tag 0x%02x for the %s (expected strs)", (unsigned)(h & 0xff), what);
  if ((h >> 8) & 0xff) return rfail(r, p + 1, "nonzero aux byte in %s", what);
  uint64_t n = h >> 16;
  size_t q = p + 8;
  NEED(q, 8 * n, p, "truncated: %s of %llu strings needs %llu length words, %zu bytes remain",
       what, (unsigned long long)n, (unsigned long long)n, len - q);
  size_t data = q + 8 * (size_t)n, avail = len - data;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t l = ld64(r->buf + q + 8 * i);
    if (l == NA_LEN) {
      if (levels) return rfail(r, q + 8 * i, "NA factor level %llu", (unsigned long long)i);
      continue;
    }
    if (l > avail - total)
      return rfail(r, q + 8 * i, "truncated: string %llu of %llu bytes, %zu bytes remain",
                   (unsigned long long)i, (unsigned long long)l, (size_t)(avail - total));
    total += l;
  }
  NEED(data, pad8(total), p, "truncated: %s padding, %zu bytes remain", what, avail - total);
  if (pad_check(r, data + total, pad8(total) - total)) return WIRE_ERR;
  s->n = n;
  s->lens = (const uint64_t *)(const void *)(r->buf + q);
  s->bytes = (const char *)r->buf + data;
  *pp = data + pad8(total);
  return WIRE_OK;
}

/* Reads count elements of type at p: bounds, element values (bool), padding. */
static int elems_read(suiro_wire_reader *r, size_t p, size_t item, int type, uint64_t count,
                      const char *what, size_t *end) {
  size_t len = r->len;
  uint64_t bytes = count * suiro_wire_type_size(type);
  NEED(p, pad8(bytes), item, "truncated: %s of %llu %s elements needs %llu bytes, %zu remain",
       what, (unsigned long long)count, suiro_wire_type_name(type), (unsigned long long)pad8(bytes),
       len - p);
  if (type == WIRE_T_BOOL) {
    const unsigned char *e = r->buf + p;
    for (uint64_t i = 0; i < count; i++)
      if (e[i] > 1 && e[i] != WIRE_NA_BOOL)
        return rfail(r, p + i, "bool element %llu is 0x%02x (0, 1 or 0xFF)",
                     (unsigned long long)i, e[i]);
  }
  if (pad_check(r, p + bytes, pad8(bytes) - bytes)) return WIRE_ERR;
  *end = p + pad8(bytes);
  return WIRE_OK;
}

/* ---- reading: one step per tag --------------------------------------------------------------
 * suiro_wire_next reads the header word and hands the item to the step of its tag; a step checks its
 * fields and payload, fills the item, says where the next item starts (s->p) and, for a container,
 * its kind and how many children follow. */
typedef struct step {
  const unsigned char *b;
  size_t len, pos, p;   /* the buffer, the item's header word, the first byte after it */
  uint64_t h, n;        /* the header word and its 48-bit count */
  int tag, aux;
  int kind;             /* out: a container kind when the item has children */
  uint64_t children;
} step;

/* The names every step uses (so each reads like the rest of this file). */
#define STEP_LOCALS                                                                      \
  const unsigned char *b = s->b;                                                         \
  size_t len = s->len, pos = s->pos, p = s->p;                                           \
  uint64_t h = s->h, n = s->n;                                                           \
  int tag = s->tag, aux = s->aux;                                                        \
  (void)b; (void)len; (void)pos; (void)h; (void)n; (void)tag; (void)aux

static int read_nil(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux || n) return rfail(r, pos + (aux ? 1 : 2), "nonzero field in nil");
  s->p = p;
  return WIRE_OK;
}

static int read_bool(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux > 1 && aux != WIRE_NA_BOOL) return rfail(r, pos + 1, "bool value 0x%02x (0, 1 or 0xFF)", aux);
  if (n) return rfail(r, pos + 2, "nonzero field in bool");
  it->flag = aux;
  s->p = p;
  return WIRE_OK;
}

static int read_i48(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in i48");
  it->tag = WIRE_I64;
  it->i = (int64_t)h >> 16;
  s->p = p;
  return WIRE_OK;
}

static int read_i64(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux || n) return rfail(r, pos + (aux ? 1 : 2), "nonzero field in i64");
  NEED(p, 8, pos, "truncated: i64 needs 8 bytes, %zu remain", len - p);
  int64_t v = (int64_t)ld64(b + p);
  if (v >= I48_MIN && v <= I48_MAX)
    return rfail(r, pos, "non-canonical i64 %lld (fits the 48-bit form)", (long long)v);
  it->i = v;
  p += 8;
  s->p = p;
  return WIRE_OK;
}

static int read_f64(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux || n) return rfail(r, pos + (aux ? 1 : 2), "nonzero field in f64");
  NEED(p, 8, pos, "truncated: f64 needs 8 bytes, %zu remain", len - p);
  memcpy(&it->f, b + p, 8);
  p += 8;
  s->p = p;
  return WIRE_OK;
}

static int read_str_or_bytes(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in %s", suiro_wire_tag_name(tag));
  NEED(p, pad8(n), pos, "truncated: %s of %llu bytes, %zu remain", suiro_wire_tag_name(tag),
       (unsigned long long)n, len - p);
  if (pad_check(r, p + n, pad8(n) - n)) return WIRE_ERR;
  it->data = b + p;
  it->n = n;
  p += pad8(n);
  s->p = p;
  return WIRE_OK;
}

static int read_array(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux < 1 || aux > WIRE_T_MAX) return rfail(r, pos + 1, "bad element type %d in array", aux);
  if (elems_read(r, p, pos, aux, n, "array", &p)) return WIRE_ERR;
  it->type = aux;
  it->n = n;
  it->data = b + pos + 8;
  s->p = p;
  return WIRE_OK;
}

static int read_ndarray(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux < 1 || aux > WIRE_T_MAX) return rfail(r, pos + 1, "bad element type %d in ndarray", aux);
  if (n > WIRE_MAX_NDIM)
    return rfail(r, pos + 2, "ndarray with %llu dimensions (max %d)", (unsigned long long)n,
                 WIRE_MAX_NDIM);
  NEED(p, 8 + 8 * n, pos, "truncated: ndarray shape needs %llu bytes, %zu remain",
       (unsigned long long)(8 + 8 * n), len - p);
  uint64_t order = ld64(b + p);
  if (order > 1) return rfail(r, p, "ndarray order %llu (0 = C, 1 = F)", (unsigned long long)order);
  const uint64_t *dims = (const uint64_t *)(const void *)(b + p + 8);
  uint64_t count;
  if (dims_count((int)n, dims, &count) < 0)
    return rfail(r, p + 8, "ndarray shape exceeds 2^48-1 elements");
  size_t data = p + 8 + 8 * (size_t)n;
  if (elems_read(r, data, pos, aux, count, "ndarray", &p)) return WIRE_ERR;
  it->type = aux;
  it->flag = (int)order;
  it->ndim = (int)n;
  it->dims = dims;
  it->n = count;
  it->data = b + data;
  s->p = p;
  return WIRE_OK;
}

static int read_strs(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  p = pos;
  if (strs_read(r, &p, &it->strs, 0)) return WIRE_ERR;
  it->n = it->strs.n;
  s->p = p;
  return WIRE_OK;
}

static int read_list_or_dict(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in %s", suiro_wire_tag_name(tag));
  uint64_t per = tag == WIRE_LIST ? 8 : 16; /* the smallest item is one word */
  if (n > (len - p) / per)
    return rfail(r, pos, "%s of %llu %s cannot fit in the %zu bytes that remain",
                 suiro_wire_tag_name(tag), (unsigned long long)n, tag == WIRE_LIST ? "items" : "entries",
                 len - p);
  it->n = n;
  s->kind = tag == WIRE_LIST ? K_LIST : K_DICT;
  s->children = tag == WIRE_LIST ? n : 2 * n;
  r->ncont++;
  s->p = p;
  return WIRE_OK;
}

static int read_frame(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in frame");
  NEED(p, 8, pos, "truncated: frame needs a row count, %zu bytes remain", len - p);
  uint64_t nrow = ld64(b + p);
  if (nrow > MAXN) return rfail(r, p, "frame row count %llu exceeds 2^48-1", (unsigned long long)nrow);
  p += 8;
  if (n > (len - p) / 16)
    return rfail(r, pos, "frame of %llu columns cannot fit in the %zu bytes that remain",
                 (unsigned long long)n, len - p);
  it->n = n;
  it->nrow = nrow;
  s->kind = K_FRAME;
  s->children = 2 * n;
  s->p = p;
  return WIRE_OK;
}

static int read_factor(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux > 1) return rfail(r, pos + 1, "factor ordered flag %d (0 or 1)", aux);
  NEED(p, pad8(4 * n), pos, "truncated: factor of %llu codes, %zu bytes remain",
       (unsigned long long)n, len - p);
  size_t codes = p;
  if (pad_check(r, p + 4 * n, pad8(4 * n) - 4 * n)) return WIRE_ERR;
  p += pad8(4 * n);
  if (strs_read(r, &p, &it->strs, 1)) return WIRE_ERR;
  int64_t nlev = (int64_t)it->strs.n;
  for (uint64_t i = 0; i < n; i++) {
    int32_t c;
    memcpy(&c, b + codes + 4 * i, 4);
    if (c < -1 || c >= nlev)
      return rfail(r, codes + 4 * i, "factor code %d out of range (%lld levels)", c, (long long)nlev);
  }
  it->flag = aux;
  it->n = n;
  it->data = b + codes;
  s->p = p;
  return WIRE_OK;
}

static int read_date(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux != WIRE_T_I32 && aux != WIRE_T_I64 && aux != WIRE_T_F64)
    return rfail(r, pos + 1, "bad element type %d in date (i32, i64 or f64)", aux);
  if (elems_read(r, p, pos, aux, n, "date", &p)) return WIRE_ERR;
  it->type = aux;
  it->n = n;
  it->data = b + pos + 8;
  s->p = p;
  return WIRE_OK;
}

static int read_timestamp(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux != WIRE_T_I64 && aux != WIRE_T_F64)
    return rfail(r, pos + 1, "bad element type %d in timestamp (i64 or f64)", aux);
  NEED(p, 8, pos, "truncated: timestamp needs a unit, %zu bytes remain", len - p);
  uint64_t unit = ld64(b + p);
  if (unit > WIRE_UNIT_NS) return rfail(r, p, "timestamp unit %llu (0..3)", (unsigned long long)unit);
  p += 8;
  if (str_part_read(r, &p, &it->text[0], "time zone")) return WIRE_ERR;
  size_t data = p;
  if (elems_read(r, data, pos, aux, n, "timestamp", &p)) return WIRE_ERR;
  it->type = aux;
  it->flag = (int)unit;
  it->n = n;
  it->data = b + data;
  s->p = p;
  return WIRE_OK;
}

static int read_error(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux || n) return rfail(r, pos + (aux ? 1 : 2), "nonzero field in error");
  NEED(p, 8, pos, "truncated: error needs an element index, %zu bytes remain", len - p);
  int64_t idx = (int64_t)ld64(b + p);
  if (idx < -1) return rfail(r, p, "error element index %lld (>= 0, or -1)", (long long)idx);
  p += 8;
  if (str_part_read(r, &p, &it->text[0], "error class") ||
      str_part_read(r, &p, &it->text[1], "error message") ||
      str_part_read(r, &p, &it->text[2], "error traceback"))
    return WIRE_ERR;
  it->i = idx;
  s->p = p;
  return WIRE_OK;
}

static int read_call(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux > 1) return rfail(r, pos + 1, "call form %d (0 name, 1 source)", aux);
  if (n) return rfail(r, pos + 2, "nonzero field in call");
  if (str_part_read(r, &p, &it->text[0], aux ? "call source" : "call target")) return WIRE_ERR;
  if (aux == WIRE_CALL_NAME && it->text[0].len == 0)
    return rfail(r, pos + 8, "call with an empty target name");
  /* each of the two children takes at least one word */
  if (len - p < 16) return rfail(r, pos, "truncated: call needs its arguments, %zu bytes remain", len - p);
  it->flag = aux;
  s->kind = K_CALL;
  s->children = 2;
  s->p = p;
  return WIRE_OK;
}

static int read_ref(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  suiro_wire_ref *ref = &it->ref;
  if (suiro_wire_type_size(aux) == 0 && aux != WIRE_REF_BYTES && aux != WIRE_REF_WIRE && aux != WIRE_REF_CHAN)
    return rfail(r, pos + 1, "bad ref kind 0x%02x", aux);
  if (n > WIRE_MAX_NDIM)
    return rfail(r, pos + 2, "ref with %llu dimensions (max %d)", (unsigned long long)n, WIRE_MAX_NDIM);
  NEED(p, 32 + 8 * n, pos, "truncated: ref needs %llu bytes of fields, %zu remain",
       (unsigned long long)(32 + 8 * n), len - p);
  uint64_t order = ld64(b + p + 8);
  if (order > 1) return rfail(r, p + 8, "ref order %llu (0 = C, 1 = F)", (unsigned long long)order);
  ref->flags = ld64(b + p);
  ref->order = (int)order;
  ref->offset = ld64(b + p + 16);
  ref->length = ld64(b + p + 24);
  ref->type = aux;
  ref->ndim = (int)n;
  ref->dims = (const uint64_t *)(const void *)(b + p + 32);
  size_t fields = p;
  p += 32 + 8 * (size_t)n;
  if (str_part_read(r, &p, &ref->name, "ref region name")) return WIRE_ERR;
  char why[128];
  const char *bad = ref_problem(ref, why, sizeof why);
  if (bad) return rfail(r, fields, "%s", bad);
  s->p = p;
  return WIRE_OK;
}

static int read_func(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux < WIRE_LANG_LUA || aux > WIRE_LANG_R)
    return rfail(r, pos + 1, "function language %d (1 Lua, 2 Python, 3 R)", aux);
  if (n == 0) return rfail(r, pos + 2, "function without children (needs a name or nil)");
  NEED(p, 8, pos, "truncated: function needs a key, %zu bytes remain", len - p);
  uint64_t key = ld64(b + p);
  p += 8;
  if (n > (len - p) / 8)
    return rfail(r, pos, "function of %llu children cannot fit in the %zu bytes that remain",
                 (unsigned long long)n, len - p);
  it->flag = aux;
  it->i = (int64_t)key;
  it->n = n;
  s->kind = K_FUNC;
  s->children = n;
  r->ncont++;
  s->p = p;
  return WIRE_OK;
}

static int read_backref(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in backref");
  if (!r->shared) return rfail(r, pos, "back-reference in a buffer whose header announces none");
  if (n >= r->ncont)
    return rfail(r, pos, "back-reference to container %llu, only %llu so far", (unsigned long long)n,
                 (unsigned long long)r->ncont);
  it->i = (int64_t)n;
  r->nbackrefs++;
  s->p = p;
  return WIRE_OK;
}

static int read_range(suiro_wire_reader *r, suiro_wire_item *it, step *s) {
  STEP_LOCALS;
  if (aux) return rfail(r, pos + 1, "nonzero aux byte in range");
  NEED(p, 16, pos, "truncated: range needs 16 bytes, %zu remain", len - p);
  int64_t start = (int64_t)ld64(b + p), step = (int64_t)ld64(b + p + 8);
  if (step == 0) return rfail(r, pos + 16, "range with step 0");
  if (!range_fits(start, step, n)) return rfail(r, pos, "range overflows int64");
  it->i = start;
  it->step = step;
  it->n = n;
  p += 16;
  s->p = p;
  return WIRE_OK;
}


void suiro_wire_reader_copy(suiro_wire_reader *dst, const suiro_wire_reader *src) {
  int depth = src->depth < 0 ? 0 : src->depth > WIRE_MAX_DEPTH ? WIRE_MAX_DEPTH : src->depth;
  memcpy(dst, src, offsetof(suiro_wire_reader, lv) + (size_t)(depth + 1) * sizeof src->lv[0]);
  if (src->status == WIRE_ERR) memcpy(dst->err, src->err, sizeof dst->err);
  else dst->err[0] = 0;
}

int suiro_wire_next(suiro_wire_reader *r, suiro_wire_item *it) {
  if (SUIRO_UNLIKELY(r->status != WIRE_OK)) return r->status;
  suiro_wire_level *l = &r->lv[r->depth];
  if (l->left == 0) return r->status = WIRE_END; /* only the top level can be here */
  const unsigned char *b = r->buf;
  size_t len = r->len, pos = r->pos, p = pos + 8;
  if (SUIRO_UNLIKELY(r->depth >= WIRE_MAX_DEPTH))
    return rfail(r, pos, "nesting deeper than %d levels", WIRE_MAX_DEPTH);
  NEED(pos, 8, pos, "truncated: expected an item header, %zu bytes remain", len - pos);
  uint64_t h = ld64(b + pos);
  int tag = (int)(h & 0xff), aux = (int)((h >> 8) & 0xff);
  uint64_t n = h >> 16;
  it->tag = tag;
  it->pos = pos;
  it->n = 0;
  it->nrow = 0;

  step s = { b, len, pos, p, h, n, tag, aux, K_TOP, 0 };
  int st;
  switch (tag) {
  case WIRE_NIL: st = read_nil(r, it, &s); break;
  case WIRE_BOOL: st = read_bool(r, it, &s); break;
  case WIRE_I48: st = read_i48(r, it, &s); break;
  case WIRE_I64: st = read_i64(r, it, &s); break;
  case WIRE_F64: st = read_f64(r, it, &s); break;
  case WIRE_STR: st = read_str_or_bytes(r, it, &s); break;
  case WIRE_BYTES: st = read_str_or_bytes(r, it, &s); break;
  case WIRE_ARRAY: st = read_array(r, it, &s); break;
  case WIRE_NDARRAY: st = read_ndarray(r, it, &s); break;
  case WIRE_STRS: st = read_strs(r, it, &s); break;
  case WIRE_LIST: st = read_list_or_dict(r, it, &s); break;
  case WIRE_DICT: st = read_list_or_dict(r, it, &s); break;
  case WIRE_FRAME: st = read_frame(r, it, &s); break;
  case WIRE_FACTOR: st = read_factor(r, it, &s); break;
  case WIRE_DATE: st = read_date(r, it, &s); break;
  case WIRE_TIMESTAMP: st = read_timestamp(r, it, &s); break;
  case WIRE_ERROR: st = read_error(r, it, &s); break;
  case WIRE_CALL: st = read_call(r, it, &s); break;
  case WIRE_REF: st = read_ref(r, it, &s); break;
  case WIRE_FUNC: st = read_func(r, it, &s); break;
  case WIRE_BACKREF: st = read_backref(r, it, &s); break;
  case WIRE_RANGE: st = read_range(r, it, &s); break;
  default:
    return rfail(r, pos, "bad tag 0x%02x", tag);
  }
  if (st != WIRE_OK) return st;
  p = s.p;
  int kind = s.kind;
  uint64_t children = s.children;

  if (l->kind > K_LIST) {
    char msg[128];
    uint64_t count = it->tag == WIRE_REF ? ref_rows(&it->ref) : it->n;
    if (!slot_ok(l, it->tag, count, msg, sizeof msg)) return rfail(r, pos, "%s", msg);
  }
  l->left--;
  r->pos = p;
  if (children) {
    r->depth++;
    r->lv[r->depth] = kind == K_FUNC ? (suiro_wire_level){ children, children, kind, it->i == 0 }
                                     : (suiro_wire_level){ children, it->nrow, kind, 0 };
  } else {
    while (r->depth > 0 && r->lv[r->depth].left == 0) r->depth--;
  }
  if (SUIRO_UNLIKELY(r->depth == 0 && r->lv[0].left == 0)) { /* the value is complete */
    if (p != len) return rfail(r, p, "%zu trailing bytes after the value", len - p);
    if (r->shared && !r->nbackrefs) return rfail(r, 6, "header announces back-references but there are none");
  }
  return WIRE_OK;
}

int suiro_wire_skip(suiro_wire_reader *r) {
  int d0 = r->depth;
  suiro_wire_item it;
  do {
    int st = suiro_wire_next(r, &it);
    if (st != WIRE_OK) return st;
  } while (r->depth > d0);
  return WIRE_OK;
}

int suiro_wire_validate(const void *buf, size_t len, char *err, size_t errcap) {
  suiro_wire_reader r;
  suiro_wire_item it;
  int st = suiro_wire_reader_init(&r, buf, len);
  while (st == WIRE_OK) st = suiro_wire_next(&r, &it);
  if (st == WIRE_END) {
    if (errcap) err[0] = 0;
    return WIRE_OK;
  }
  if (errcap) snprintf(err, errcap, "%s", r.err);
  return WIRE_ERR;
}

/* Re-emits one item (not its children) through the writer. */
int suiro_wire_put_item(suiro_wire_writer *w, const suiro_wire_item *it) {
  switch (it->tag) {
  case WIRE_NIL: return suiro_wire_put_nil(w);
  case WIRE_BOOL: return suiro_wire_put_bool(w, it->flag);
  case WIRE_I64: return suiro_wire_put_i64(w, it->i);
  case WIRE_F64: return suiro_wire_put_f64(w, it->f);
  case WIRE_STR: return suiro_wire_put_str(w, it->data, it->n);
  case WIRE_BYTES: return suiro_wire_put_bytes(w, it->data, it->n);
  case WIRE_LIST: return suiro_wire_put_list(w, it->n);
  case WIRE_DICT: return suiro_wire_put_dict(w, it->n);
  case WIRE_FRAME: return suiro_wire_put_frame(w, it->n, it->nrow);
  case WIRE_CALL: return suiro_wire_put_call(w, it->flag, it->text[0]);
  case WIRE_ERROR: return suiro_wire_put_error(w, it->text[0], it->text[1], it->text[2], it->i);
  case WIRE_REF: return suiro_wire_put_ref(w, &it->ref);
  case WIRE_FUNC: return suiro_wire_put_func(w, it->flag, (uint64_t)it->i, it->n);
  case WIRE_BACKREF: return suiro_wire_put_backref(w, (uint64_t)it->i);
  case WIRE_RANGE: return suiro_wire_put_range(w, it->i, it->step, it->n);
  case WIRE_STRS:
  case WIRE_FACTOR: {
    if (it->tag == WIRE_STRS) {
      if (suiro_wire_put_strs(w, it->n)) return WIRE_ERR;
    } else {
      int32_t *codes = suiro_wire_put_factor(w, it->n, it->flag, it->strs.n);
      if (!codes) return WIRE_ERR;
      memcpy(codes, it->data, 4 * it->n);
    }
    suiro_wire_strs_iter si = suiro_wire_strs_begin(&it->strs);
    const char *s;
    size_t sl;
    while (suiro_wire_strs_next(&si, &s, &sl))
      if ((s ? suiro_wire_strs_add(w, s, sl) : suiro_wire_strs_add_na(w)) != WIRE_OK) return WIRE_ERR;
    return WIRE_OK;
  }
  case WIRE_ARRAY:
  case WIRE_NDARRAY:
  case WIRE_DATE:
  case WIRE_TIMESTAMP: {
    void *d = it->tag == WIRE_ARRAY     ? suiro_wire_put_array(w, it->type, it->n)
              : it->tag == WIRE_NDARRAY ? suiro_wire_put_ndarray(w, it->type, it->flag, it->ndim, it->dims)
              : it->tag == WIRE_DATE    ? suiro_wire_put_date(w, it->type, it->n)
                                        : suiro_wire_put_timestamp(w, it->type, it->flag, it->text[0], it->n);
    if (!d) return WIRE_ERR;
    if (it->n) memcpy(d, it->data, it->n * suiro_wire_type_size(it->type));
    return WIRE_OK;
  }
  }
  return wfail(w, "cannot copy an item with tag %d", it->tag);
}

int suiro_wire_copy(suiro_wire_writer *w, suiro_wire_reader *r) {
  int d0 = r->depth;
  suiro_wire_item it;
  do {
    int st = suiro_wire_next(r, &it);
    if (st != WIRE_OK) return st;
    if (suiro_wire_put_item(w, &it) != WIRE_OK) return WIRE_ERR;
  } while (r->depth > d0);
  return WIRE_OK;
}
