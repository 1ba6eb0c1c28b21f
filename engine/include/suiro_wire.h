/*
 * suiro_wire.h — suiro's one value format: an encoder (suiro_wire_writer) and a validating pull decoder
 * (suiro_wire_reader). docs/wire-format.md is the specification; this header is the C API that the
 * Lua, Python and R bindings build their values from.
 *
 * Layout in one breath: a buffer is an 8-byte header word ("SUIRO", version 1, a flags byte, a
 * zero byte) followed by exactly one value. Every item starts on an 8-byte boundary with a header word
 * (byte 0 tag, byte 1 aux, bytes 2..7 a 48-bit count); payloads are padded with zero bytes to
 * the next word, so array data is always 8-aligned and can be viewed in place.
 *
 * Ownership
 *   - A writer owns its heap buffer (if it grew out of the caller's one) until suiro_wire_writer_free.
 *     Pointers returned by suiro_wire_put_array & co. are valid only until the next call on the writer
 *     (the buffer may move when it grows): fill them at once.
 *   - A reader never allocates and never copies: every pointer in a suiro_wire_item points into the
 *     caller's buffer, which must outlive its use. The buffer must be 8-byte aligned.
 * Trust: the reader assumes nothing about its input. Every length, offset, tag, padding byte and
 *   nesting level is checked before use; counts it reports are bounded by the bytes present
 *   (a LIST of n items has at least 8n bytes behind it), so allocating by them is safe.
 * Threads: a writer or reader is used by one thread at a time; there is no shared state.
 */
#ifndef SUIRO_WIRE_H
#define SUIRO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* The engine is built with -fvisibility=hidden: what this header declares is its API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define WIRE_VERSION 1
#define WIRE_MAX_DEPTH 64                      /* the top-level value has depth 1 */
#define WIRE_MAX_NDIM 64
#define WIRE_MAX_COUNT ((UINT64_C(1) << 48) - 1) /* any count, length or dimension */
#define WIRE_REF_NAME_MAX 255

/* Status of reader and writer calls. */
#define WIRE_OK 0
#define WIRE_END 1   /* suiro_wire_next: the top-level value has been read completely */
#define WIRE_ERR (-1) /* malformed input or writer misuse: see the reader's/writer's err */

/* Item tags (byte 0 of a header word). suiro_wire_next reports both integer forms as WIRE_I64. */
enum {
  WIRE_NIL = 0x01,
  WIRE_BOOL = 0x02,      /* flag: 0, 1 or WIRE_NA_BOOL */
  WIRE_I48 = 0x03,       /* wire-level only: an integer in [-2^47, 2^47) inside the header word */
  WIRE_I64 = 0x04,
  WIRE_F64 = 0x05,
  WIRE_STR = 0x06,       /* text, UTF-8 by convention (not checked) */
  WIRE_BYTES = 0x07,
  WIRE_ARRAY = 0x08,     /* 1-d typed array */
  WIRE_NDARRAY = 0x09,   /* n-d typed array with shape and order */
  WIRE_STRS = 0x0A,      /* string vector with NA */
  WIRE_LIST = 0x0B,
  WIRE_DICT = 0x0C,      /* ordered string keys */
  WIRE_FRAME = 0x0D,     /* named columns of equal length */
  WIRE_FACTOR = 0x0E,    /* int32 codes (0-based, -1 = NA) + levels */
  WIRE_DATE = 0x0F,      /* days since 1970-01-01 */
  WIRE_TIMESTAMP = 0x10, /* time since 1970-01-01T00:00:00Z in a unit, with a time zone */
  WIRE_ERROR = 0x11,
  WIRE_CALL = 0x12,
  WIRE_REF = 0x13,       /* a typed array (or bytes, or an encoded value) in a shared region */
  WIRE_FUNC = 0x14,      /* a function of one language: key + name (or nil) + captured values */
  WIRE_BACKREF = 0x15,   /* the container with this ordinal again (shared parts, cycles) */
  WIRE_RANGE = 0x16,     /* the integers start, start + step, ... (n of them), not materialised */
  WIRE_TAG_MAX = 0x16
};

/* FUNC languages (aux byte). */
#define WIRE_LANG_LUA 1
#define WIRE_LANG_PYTHON 2
#define WIRE_LANG_R 3

/* Header flags (byte 6): set by the writer when the buffer holds a BACKREF. */
#define WIRE_HDR_BACKREFS 0x01

/* Element types (aux byte of ARRAY, NDARRAY, DATE, TIMESTAMP, REF). */
enum {
  WIRE_T_F64 = 1,  /* 8 bytes, IEEE 754 binary64 */
  WIRE_T_F32 = 2,  /* 4 bytes */
  WIRE_T_I64 = 3,  /* 8 bytes, two's complement */
  WIRE_T_I32 = 4,  /* 4 bytes */
  WIRE_T_U8 = 5,   /* 1 byte */
  WIRE_T_BOOL = 6, /* 1 byte: 0, 1 or WIRE_NA_BOOL */
  WIRE_T_C128 = 7, /* 16 bytes: real f64 then imaginary f64 */
  WIRE_T_MAX = 7
};
#define WIRE_REF_BYTES 0x00 /* REF kind: raw bytes, no shape */
#define WIRE_REF_WIRE 0x40  /* REF kind: a complete wire buffer (header word included) */
#define WIRE_REF_CHAN 0x41  /* REF kind: a channel endpoint (suiro_chan.h): flags = token, length = side */

#define WIRE_ORDER_C 0 /* row-major: last index varies fastest */
#define WIRE_ORDER_F 1 /* column-major (Fortran, R): first index varies fastest */

#define WIRE_CALL_NAME 0   /* call target is a qualified name such as "stats::quantile" */
#define WIRE_CALL_SOURCE 1 /* call target is source text */

enum { WIRE_UNIT_S = 0, WIRE_UNIT_MS = 1, WIRE_UNIT_US = 2, WIRE_UNIT_NS = 3 };

/* NA values. R's NA_real_ is this signalling-NaN bit pattern; arithmetic on it yields the quiet
 * 0x7FF80000000007A2. R treats any NaN whose low 32 bits are 1954 as NA: suiro_wire_is_na_f64_bits. */
#define WIRE_NA_BOOL 0xFF
#define WIRE_NA_I32 INT32_MIN
#define WIRE_NA_I64 INT64_MIN
#define WIRE_NA_F64_BITS UINT64_C(0x7FF00000000007A2)
#define WIRE_NA_CODE (-1) /* factor code */

static inline int suiro_wire_is_na_f64_bits(uint64_t b) {
  return (b & UINT64_C(0x7FF0000000000000)) == UINT64_C(0x7FF0000000000000) &&
         (b & UINT64_C(0x000FFFFFFFFFFFFF)) != 0 && (uint32_t)b == 1954u;
}

/* Size in bytes of one element of a type, 0 for an unknown type. */
size_t suiro_wire_type_size(int type);
/* "f64", "i32", ... ; "bytes"/"wire" for the REF kinds; NULL when unknown. */
const char *suiro_wire_type_name(int type);
/* "nil", "list", ... ; NULL when unknown. */
const char *suiro_wire_tag_name(int tag);
/* The tag in a user's words ("a function", "a string vector"), for messages; never NULL. */
const char *suiro_wire_tag_desc(int tag);

typedef struct suiro_wire_str {
  const char *ptr;
  size_t len;
} suiro_wire_str;
#define WIRE_CSTR(s) ((suiro_wire_str){ (s), sizeof(s) - 1 }) /* for string literals */

/* A string vector inside a buffer: n little-endian u64 lengths (UINT64_MAX = NA), then the bytes
 * of all strings back to back. Walk it with suiro_wire_strs_next. */
typedef struct suiro_wire_strs {
  uint64_t n;
  const uint64_t *lens;
  const char *bytes;
} suiro_wire_strs;

typedef struct suiro_wire_strs_iter {
  const uint64_t *lens, *end;
  const char *p;
} suiro_wire_strs_iter;

static inline suiro_wire_strs_iter suiro_wire_strs_begin(const suiro_wire_strs *s) {
  return (suiro_wire_strs_iter){ s->lens, s->lens + s->n, s->bytes };
}
/* Next string: returns 0 at the end, else 1 with *s and *len set; *s == NULL marks NA. */
static inline int suiro_wire_strs_next(suiro_wire_strs_iter *it, const char **s, size_t *len) {
  if (it->lens == it->end) return 0;
  uint64_t l = *it->lens++;
  if (l == UINT64_MAX) {
    *s = NULL;
    *len = 0;
  } else {
    *s = it->p;
    *len = (size_t)l;
    it->p += l;
  }
  return 1;
}

/* A region reference: what lives at [offset, offset + length) of a named shared region. */
typedef struct suiro_wire_ref {
  suiro_wire_str name;            /* region name, 1..255 bytes, no NUL */
  uint64_t flags;           /* opaque to the wire: defined by the zero-copy layer */
  uint64_t offset;          /* multiple of 8 */
  uint64_t length;          /* bytes */
  int type;                 /* WIRE_REF_BYTES, WIRE_REF_WIRE or an element type */
  int order;                /* WIRE_ORDER_C/F (typed only; 0 otherwise) */
  int ndim;                 /* 0: a 1-d array of length/size elements (or untyped); else shape */
  const uint64_t *dims;     /* ndim extents */
} suiro_wire_ref;

/* ---------------------------------------------------------------------------------------------
 * Writer. Values are written depth-first in wire order: a container call announces its child
 * count, then the children follow (dict: key string, value, key, value ...; frame: name string,
 * column, ...; call: a list of positional args, then a dict of named args). The writer checks the
 * structure as it goes (counts, key kinds, frame column lengths, depth) and records the first
 * error; later calls fail at once, so a binding may check only suiro_wire_writer_finish.
 */
typedef struct suiro_wire_level {
  uint64_t left; /* items still to come in this container */
  uint64_t arg;  /* FRAME: the row count columns must match; FUNC: the child count */
  int kind;
  int flag;      /* FUNC: 1 when the key is 0 (the first child must then be a name) */
} suiro_wire_level;

typedef struct suiro_wire_writer {
  unsigned char *buf;       /* the caller's buffer or, once grown, `heap` */
  size_t len, cap;
  unsigned char *heap;      /* owned; freed by suiro_wire_writer_free */
  int status;               /* WIRE_OK or WIRE_ERR (sticky) */
  int depth;                /* open containers */
  uint64_t ncont;           /* LIST, DICT and FUNC items so far: the BACKREF ordinal space */
  uint64_t strs_left;       /* strings still to add to an open STRS (or factor levels) */
  size_t strs_lens;         /* offset of the next length word of that STRS */
  int strs_na_ok;
  suiro_wire_level lv[WIRE_MAX_DEPTH + 1];
  char err[160];
} suiro_wire_writer;

/* Starts a buffer in buf (8-aligned part of it used; may be NULL/0) and writes the header word.
 * Small values never touch the heap when buf has room (a few hundred bytes cover task args). */
void suiro_wire_writer_init(suiro_wire_writer *w, void *buf, size_t cap);
/* Starts over in the same memory (keeps a grown heap buffer for reuse). */
void suiro_wire_writer_reset(suiro_wire_writer *w);
/* Completes the buffer: WIRE_OK with *ptr and *len set (valid until reset/free), or WIRE_ERR. */
int suiro_wire_writer_finish(suiro_wire_writer *w, const void **ptr, size_t *len);
void suiro_wire_writer_free(suiro_wire_writer *w);
/* "wire: ..." message of the first error ("" if none). */
const char *suiro_wire_writer_error(const suiro_wire_writer *w);

/* Each returns WIRE_OK or WIRE_ERR (pointers: NULL on error). */
int suiro_wire_put_nil(suiro_wire_writer *w);
int suiro_wire_put_bool(suiro_wire_writer *w, int v); /* 0, 1 or WIRE_NA_BOOL */
int suiro_wire_put_i64(suiro_wire_writer *w, int64_t v);
int suiro_wire_put_f64(suiro_wire_writer *w, double v); /* bits kept exactly (NaN payloads included) */
int suiro_wire_put_str(suiro_wire_writer *w, const void *s, size_t len);
int suiro_wire_put_bytes(suiro_wire_writer *w, const void *p, size_t len);
/* Typed arrays: returns where to write count elements (little-endian, as in memory here).
 * Padding is already zeroed. Bool elements must be 0, 1 or WIRE_NA_BOOL. */
void *suiro_wire_put_array(suiro_wire_writer *w, int type, uint64_t count);
void *suiro_wire_put_ndarray(suiro_wire_writer *w, int type, int order, int ndim, const uint64_t *dims);
/* A string vector of n strings: follow with exactly n suiro_wire_strs_add / suiro_wire_strs_add_na calls. */
int suiro_wire_put_strs(suiro_wire_writer *w, uint64_t n);
int suiro_wire_strs_add(suiro_wire_writer *w, const void *s, size_t len);
int suiro_wire_strs_add_na(suiro_wire_writer *w);
int suiro_wire_put_list(suiro_wire_writer *w, uint64_t n);
int suiro_wire_put_dict(suiro_wire_writer *w, uint64_t n); /* n entries: 2n items follow */
int suiro_wire_put_frame(suiro_wire_writer *w, uint64_t ncol, uint64_t nrow); /* 2*ncol items follow */
/* Factor: returns the count int32 codes to fill (0-based, WIRE_NA_CODE for NA, < nlevels);
 * then add exactly nlevels level strings (no NA) with suiro_wire_strs_add. Fill codes first. */
int32_t *suiro_wire_put_factor(suiro_wire_writer *w, uint64_t count, int ordered, uint64_t nlevels);
/* Dates: type I32, I64 or F64 (days since 1970-01-01). Returns where to write the elements. */
void *suiro_wire_put_date(suiro_wire_writer *w, int type, uint64_t count);
/* Timestamps: type I64 or F64, unit WIRE_UNIT_*, tz an IANA name or "" (unspecified). */
void *suiro_wire_put_timestamp(suiro_wire_writer *w, int type, int unit, suiro_wire_str tz, uint64_t count);
/* Error: index is the 0-based element index of a failed map element, or -1. */
int suiro_wire_put_error(suiro_wire_writer *w, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str traceback, int64_t index);
/* Call spec: form WIRE_CALL_NAME (text non-empty) or WIRE_CALL_SOURCE; then put a list
 * (positional args) and a dict (named args). */
int suiro_wire_put_call(suiro_wire_writer *w, int form, suiro_wire_str text);
int suiro_wire_put_ref(suiro_wire_writer *w, const suiro_wire_ref *ref);
/* Function of language lang (WIRE_LANG_*): key identifies its code (0: resolve by name); n >= 1
 * children follow: the name (a str, required when key is 0) or nil, then the captured values. */
int suiro_wire_put_func(suiro_wire_writer *w, int lang, uint64_t key, uint64_t n);
/* The container (LIST, DICT or FUNC item, numbered from 0 in buffer order) with this ordinal
 * again; it must have started already (it may still be open: a cycle). Sets the header flag. */
int suiro_wire_put_backref(suiro_wire_writer *w, uint64_t ordinal);
/* The integers start, start + step, ..., n of them (step != 0; the last must fit in int64). */
int suiro_wire_put_range(suiro_wire_writer *w, int64_t start, int64_t step, uint64_t n);

/* ---------------------------------------------------------------------------------------------
 * Reader: a pull cursor over one buffer. suiro_wire_next returns items depth-first in wire order; a
 * container item tells how many items follow as its children (LIST n, DICT 2n, FRAME 2n,
 * CALL 2, FUNC n). Only the fields listed for the item's tag are set.
 */
typedef struct suiro_wire_item {
  int tag;            /* WIRE_NIL .. WIRE_REF (never WIRE_I48) */
  int type;           /* ARRAY, NDARRAY, DATE, TIMESTAMP: element type */
  int flag;           /* BOOL: 0/1/WIRE_NA_BOOL; NDARRAY: order; FACTOR: ordered;
                         CALL: form; TIMESTAMP: unit; FUNC: language */
  int ndim;           /* NDARRAY */
  uint64_t n;         /* STR, BYTES: bytes; ARRAY, NDARRAY (product of dims), STRS, FACTOR,
                         DATE, TIMESTAMP: elements; LIST: items; DICT: entries; FRAME: columns;
                         FUNC: children */
  uint64_t nrow;      /* FRAME */
  size_t pos;         /* byte offset of the item's header word */
  int64_t i;          /* I64; ERROR: element index or -1; FUNC: key (all 64 bits);
                         BACKREF: ordinal */
  double f;           /* F64 */
  int64_t step;       /* RANGE: step (start in i, count in n) */
  const void *data;   /* STR, BYTES: the bytes; arrays, DATE, TIMESTAMP: elements (8-aligned);
                         FACTOR: int32 codes */
  const uint64_t *dims; /* NDARRAY: ndim extents */
  suiro_wire_strs strs;     /* STRS; FACTOR: levels */
  suiro_wire_str text[3];   /* ERROR: class, message, traceback; CALL: target or source;
                         TIMESTAMP: time zone */
  suiro_wire_ref ref;       /* REF */
} suiro_wire_item;

typedef struct suiro_wire_reader {
  const unsigned char *buf;
  size_t len, pos;    /* pos: where the next item starts */
  int status;         /* WIRE_OK, WIRE_END or WIRE_ERR (sticky) */
  int depth;          /* open containers */
  int shared;         /* the header announces BACKREFs: keep an ordinal -> container table */
  uint64_t ncont;     /* LIST, DICT and FUNC items so far */
  uint64_t nbackrefs;
  size_t err_pos;     /* byte the error names */
  suiro_wire_level lv[WIRE_MAX_DEPTH + 1];
  char err[192];      /* "wire: <what> at byte <n>" */
} suiro_wire_reader;

/* Checks alignment, length (a multiple of 8) and the header word. WIRE_OK or WIRE_ERR. */
int suiro_wire_reader_init(suiro_wire_reader *r, const void *buf, size_t len);
/* dst = src for a face that goes on reading where the engine stopped (suiro_exec's task list):
 * the position, the counts and the levels in use only, not the whole level stack (~1.8 KB
 * copied per task was ~300 instructions of a Python worker's task). */
void suiro_wire_reader_copy(suiro_wire_reader *dst, const suiro_wire_reader *src);
/* The next item: WIRE_OK, WIRE_END once the top-level value is complete, or WIRE_ERR. Trailing
 * bytes after the value are an error reported with its last item. */
int suiro_wire_next(suiro_wire_reader *r, suiro_wire_item *it);
/* Skips the next value with all its children (still validating them). The skipped value's bytes
 * are [pos before, r->pos after). WIRE_OK, WIRE_END or WIRE_ERR. */
int suiro_wire_skip(suiro_wire_reader *r);
const char *suiro_wire_reader_error(const suiro_wire_reader *r);

/* Writes one item as suiro_wire_next read it (a container announces its children, which the caller
 * writes next): a copier that replaces some items (REF) and keeps the rest. */
int suiro_wire_put_item(suiro_wire_writer *w, const suiro_wire_item *it);
/* Re-encodes the next value (whole subtree) of r into w. Since every valid buffer is in
 * canonical form, copying a whole buffer reproduces it byte for byte. WIRE_OK, WIRE_END or
 * WIRE_ERR (message in r->err or w->err). */
int suiro_wire_copy(suiro_wire_writer *w, suiro_wire_reader *r);

/* Walks a whole buffer. WIRE_OK, or WIRE_ERR with the message in err (if errcap > 0). */
int suiro_wire_validate(const void *buf, size_t len, char *err, size_t errcap);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* SUIRO_WIRE_H */
