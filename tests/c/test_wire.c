/* test_wire.c — the wire format: golden vectors both ways, random round trips, and every class of
 * malformed input we could think of (each must fail with the byte position, never crash; the
 * asan build runs the same tests).
 *
 * The golden checks use two paths independent of the builders in gen_vectors.c:
 *   .bin -> reader -> notation (wire_dump)       must equal the .txt
 *   .txt -> the parser below -> writer            must equal the .bin
 * so a change in either the encoder or the decoder breaks a test. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_wire.h"

#define GEN_VECTORS_NO_MAIN
#include "../vectors/gen_vectors.c"

/* ---- files ---------------------------------------------------------------------------------- */

static const char *vec_dir(void) { return harness_vectors_dir(); }

/* Reads a file into a malloc'd buffer of exactly its size (so ASan sees any over-read). */
static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
  CHECK(p != NULL);
  CHECK(fread(p, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return p;
}

static unsigned char *read_vec(int i, const char *ext, size_t *len) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s.%s", vec_dir(), goldens[i].name, ext);
  unsigned char *p = read_file(path, len);
  CHECK(p != NULL);
  return p;
}

static unsigned char *dup_exact(const void *p, size_t n) {
  unsigned char *q = malloc(n ? n : 1);
  CHECK(q != NULL);
  if (n) memcpy(q, p, n);
  return q;
}

/* The notation without comment lines. */
static char *strip_comments(const char *t, size_t n, size_t *out_len) {
  char *o = malloc(n + 1);
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t e = i;
    while (e < n && t[e] != '\n') e++;
    if (t[i] != '#') {
      memcpy(o + k, t + i, e - i);
      k += e - i;
      if (e < n) o[k++] = '\n';
    }
    i = e + 1;
  }
  o[k] = 0;
  *out_len = k;
  return o;
}

/* "... at byte N" -> N; -1 if the message does not end that way. */
static long long err_byte(const char *msg) {
  const char *p = strstr(msg, " at byte ");
  if (!p) return -1;
  while (strstr(p + 1, " at byte ")) p = strstr(p + 1, " at byte ");
  char *end;
  long long v = strtoll(p + 9, &end, 10);
  return *end == 0 && end != p + 9 ? v : -1;
}

/* ---- the notation parser: text -> writer (independent of the dumper) ------------------------ */

typedef struct tp {
  char *text;
  char **lines;
  int n, i;
  char err[256];
} tp;

static void tp_init(tp *t, const char *text, size_t len) {
  t->text = malloc(len + 1);
  memcpy(t->text, text, len);
  t->text[len] = 0;
  t->lines = malloc(sizeof(char *) * (len + 1));
  t->n = t->i = 0;
  t->err[0] = 0;
  for (char *p = t->text; *p;) {
    char *e = strchr(p, '\n');
    if (e) *e = 0;
    if (*p != '#') t->lines[t->n++] = p;
    if (!e) break;
    p = e + 1;
  }
}

static void tp_free(tp *t) {
  free(t->text);
  free(t->lines);
}

static int tp_fail(tp *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tp_fail(tp *t, const char *fmt, ...) {
  if (t->err[0]) return -1;
  int k = snprintf(t->err, sizeof t->err, "line %d: ", t->i);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err + k, sizeof t->err - (size_t)k, fmt, ap);
  va_end(ap);
  return -1;
}

/* Splits the next line into tokens; -1 at the end. */
static int tp_tokens(tp *t, char **tok, int max) {
  if (t->i >= t->n) return -1;
  char *p = t->lines[t->i++];
  int n = 0;
  while (*p && n < max) {
    tok[n++] = p;
    char *s = strchr(p, ' ');
    if (!s) break;
    *s = 0;
    p = s + 1;
  }
  return n;
}

static int parse_u64(const char *s, uint64_t *v) {
  if (!isdigit((unsigned char)s[0])) return -1;
  char *end;
  errno = 0;
  *v = strtoull(s, &end, 10);
  return *end || errno ? -1 : 0;
}

static int parse_i64(const char *s, int64_t *v) {
  if (strcmp(s, "na") == 0) return *v = INT64_MIN, 0;
  char *end;
  errno = 0;
  *v = strtoll(s, &end, 10);
  return *end || errno || end == s ? -1 : 0;
}

/* "x" + hex -> bytes (malloc'd). */
static int parse_hex(const char *s, unsigned char **out, size_t *len) {
  if (s[0] != 'x') return -1;
  size_t n = strlen(s + 1);
  if (n & 1) return -1;
  unsigned char *p = malloc(n / 2 + 1);
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v = 0;
    for (int k = 0; k < 2; k++) {
      char c = s[1 + 2 * i + k];
      if (c >= '0' && c <= '9') v = v * 16 + (unsigned)(c - '0');
      else if (c >= 'a' && c <= 'f') v = v * 16 + (unsigned)(c - 'a' + 10);
      else return free(p), -1;
    }
    p[i] = (unsigned char)v;
  }
  *out = p;
  *len = n / 2;
  return 0;
}

static int parse_f64(const char *s, uint64_t *bits) {
  if (strcmp(s, "na") == 0) return *bits = WIRE_NA_F64_BITS, 0;
  if (strcmp(s, "nan") == 0) return *bits = UINT64_C(0x7FF8000000000000), 0;
  if (strcmp(s, "inf") == 0) return *bits = f64_bits(INFINITY), 0;
  if (strcmp(s, "-inf") == 0) return *bits = f64_bits(-INFINITY), 0;
  if (strncmp(s, "nan:", 4) == 0) {
    if (strlen(s + 4) != 16) return -1;
    char *end;
    *bits = strtoull(s + 4, &end, 16);
    return *end ? -1 : 0;
  }
  if (strncmp(s, "0x", 2) != 0 && strncmp(s, "-0x", 3) != 0) return -1;
  char *end;
  double d = strtod(s, &end);
  if (*end) return -1;
  *bits = f64_bits(d);
  return 0;
}

static int parse_f32(const char *s, uint32_t *bits) {
  float f;
  if (strcmp(s, "nan") == 0) return *bits = 0x7FC00000u, 0;
  if (strncmp(s, "nan:", 4) == 0) {
    if (strlen(s + 4) != 8) return -1;
    char *end;
    *bits = (uint32_t)strtoul(s + 4, &end, 16);
    return *end ? -1 : 0;
  }
  uint64_t b;
  if (strcmp(s, "na") == 0 || parse_f64(s, &b) < 0) return -1;
  double d = bits_f64(b);
  f = (float)d;
  if ((double)f != d && !isnan(d)) return -1; /* not exactly an f32 */
  memcpy(bits, &f, 4);
  return 0;
}

static int type_by_name(const char *s) {
  for (int t = 1; t <= WIRE_T_MAX; t++)
    if (strcmp(s, suiro_wire_type_name(t)) == 0) return t;
  if (strcmp(s, "bytes") == 0) return WIRE_REF_BYTES;
  if (strcmp(s, "wire") == 0) return WIRE_REF_WIRE;
  return -1;
}

static int tp_elem(tp *t, int type, unsigned char *out) {
  char *tok[4];
  int nt = tp_tokens(t, tok, 4);
  if (nt != (type == WIRE_T_C128 ? 2 : 1)) return tp_fail(t, "bad element line");
  uint64_t u;
  int64_t i;
  uint32_t f;
  switch (type) {
  case WIRE_T_F64:
    if (parse_f64(tok[0], &u) < 0) return tp_fail(t, "bad f64 %s", tok[0]);
    memcpy(out, &u, 8);
    return 0;
  case WIRE_T_C128:
    for (int k = 0; k < 2; k++) {
      if (parse_f64(tok[k], &u) < 0) return tp_fail(t, "bad f64 %s", tok[k]);
      memcpy(out + 8 * k, &u, 8);
    }
    return 0;
  case WIRE_T_F32:
    if (parse_f32(tok[0], &f) < 0) return tp_fail(t, "bad f32 %s", tok[0]);
    memcpy(out, &f, 4);
    return 0;
  case WIRE_T_I64:
    if (parse_i64(tok[0], &i) < 0) return tp_fail(t, "bad i64 %s", tok[0]);
    memcpy(out, &i, 8);
    return 0;
  case WIRE_T_I32: {
    if (parse_i64(tok[0], &i) < 0) return tp_fail(t, "bad i32 %s", tok[0]);
    if (strcmp(tok[0], "na") == 0) i = INT32_MIN;
    else if (i < INT32_MIN || i > INT32_MAX || i == INT32_MIN) return tp_fail(t, "bad i32 %s", tok[0]);
    int32_t v = (int32_t)i;
    memcpy(out, &v, 4);
    return 0;
  }
  case WIRE_T_U8:
    if (parse_u64(tok[0], &u) < 0 || u > 255) return tp_fail(t, "bad u8 %s", tok[0]);
    out[0] = (unsigned char)u;
    return 0;
  case WIRE_T_BOOL:
    if (strcmp(tok[0], "true") == 0) out[0] = 1;
    else if (strcmp(tok[0], "false") == 0) out[0] = 0;
    else if (strcmp(tok[0], "na") == 0) out[0] = WIRE_NA_BOOL;
    else return tp_fail(t, "bad bool %s", tok[0]);
    return 0;
  }
  return tp_fail(t, "bad type");
}

static int tp_elems(tp *t, int type, void *data, uint64_t n) {
  if (!data) return tp_fail(t, "writer: %s", "refused the array");
  for (uint64_t i = 0; i < n; i++)
    if (tp_elem(t, type, (unsigned char *)data + i * suiro_wire_type_size(type)) < 0) return -1;
  return 0;
}

/* A "str <hex>" line (a key, a name, a part). */
static int tp_str_line(tp *t, unsigned char **p, size_t *n) {
  char *tok[3];
  if (tp_tokens(t, tok, 3) != 2 || strcmp(tok[0], "str") != 0 || parse_hex(tok[1], p, n) < 0)
    return tp_fail(t, "expected a str line");
  return 0;
}

static int tp_value(tp *t, suiro_wire_writer *w);

static int tp_children(tp *t, suiro_wire_writer *w, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (tp_value(t, w) < 0) return -1;
  return 0;
}

static int tp_value(tp *t, suiro_wire_writer *w) {
  char *tok[80];
  int nt = tp_tokens(t, tok, 80);
  if (nt <= 0) return tp_fail(t, "unexpected end of the notation");
  const char *k = tok[0];
  uint64_t n, m;
  int64_t iv;
  int type;
  int rc = 0;
  if (strcmp(k, "nil") == 0 && nt == 1) {
    rc = suiro_wire_put_nil(w);
  } else if (strcmp(k, "bool") == 0 && nt == 2) {
    int b;
    if (strcmp(tok[1], "true") == 0) b = 1;
    else if (strcmp(tok[1], "false") == 0) b = 0;
    else if (strcmp(tok[1], "na") == 0) b = WIRE_NA_BOOL;
    else return tp_fail(t, "bad bool");
    rc = suiro_wire_put_bool(w, b);
  } else if (strcmp(k, "i64") == 0 && nt == 2) {
    if (parse_i64(tok[1], &iv) < 0) return tp_fail(t, "bad i64");
    rc = suiro_wire_put_i64(w, iv);
  } else if (strcmp(k, "f64") == 0 && nt == 2) {
    if (parse_f64(tok[1], &n) < 0) return tp_fail(t, "bad f64");
    rc = suiro_wire_put_f64(w, bits_f64(n));
  } else if ((strcmp(k, "str") == 0 || strcmp(k, "bytes") == 0) && nt == 2) {
    unsigned char *p;
    size_t len;
    if (parse_hex(tok[1], &p, &len) < 0) return tp_fail(t, "bad hex");
    rc = k[0] == 's' ? suiro_wire_put_str(w, p, len) : suiro_wire_put_bytes(w, p, len);
    free(p);
  } else if ((strcmp(k, "array") == 0 || strcmp(k, "date") == 0) && nt == 3) {
    if ((type = type_by_name(tok[1])) < 1 || parse_u64(tok[2], &n) < 0) return tp_fail(t, "bad header");
    void *d = k[0] == 'a' ? suiro_wire_put_array(w, type, n) : suiro_wire_put_date(w, type, n);
    return tp_elems(t, type, d, n);
  } else if (strcmp(k, "ndarray") == 0 && nt >= 4) {
    uint64_t dims[WIRE_MAX_NDIM], count = 1;
    if ((type = type_by_name(tok[1])) < 1 || (strcmp(tok[2], "C") && strcmp(tok[2], "F")) ||
        parse_u64(tok[3], &n) < 0 || n > WIRE_MAX_NDIM || (uint64_t)nt != 4 + n)
      return tp_fail(t, "bad ndarray header");
    for (uint64_t i = 0; i < n; i++) {
      if (parse_u64(tok[4 + i], &dims[i]) < 0) return tp_fail(t, "bad dim");
      count *= dims[i];
    }
    void *d = suiro_wire_put_ndarray(w, type, tok[2][0] == 'F', (int)n, dims);
    return tp_elems(t, type, d, count);
  } else if (strcmp(k, "strs") == 0 && nt == 2) {
    if (parse_u64(tok[1], &n) < 0) return tp_fail(t, "bad strs count");
    rc = suiro_wire_put_strs(w, n);
    for (uint64_t i = 0; i < n && rc == 0; i++) {
      char *s[2];
      if (tp_tokens(t, s, 2) != 1) return tp_fail(t, "bad strs element");
      if (strcmp(s[0], "na") == 0) {
        rc = suiro_wire_strs_add_na(w);
      } else {
        unsigned char *p;
        size_t len;
        if (parse_hex(s[0], &p, &len) < 0) return tp_fail(t, "bad strs element");
        rc = suiro_wire_strs_add(w, p, len);
        free(p);
      }
    }
  } else if (strcmp(k, "list") == 0 && nt == 2) {
    if (parse_u64(tok[1], &n) < 0) return tp_fail(t, "bad count");
    if (suiro_wire_put_list(w, n)) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
    return tp_children(t, w, n);
  } else if (strcmp(k, "dict") == 0 && nt == 2) {
    if (parse_u64(tok[1], &n) < 0) return tp_fail(t, "bad count");
    if (suiro_wire_put_dict(w, n)) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
    return tp_children(t, w, 2 * n);
  } else if (strcmp(k, "frame") == 0 && nt == 3) {
    if (parse_u64(tok[1], &n) < 0 || parse_u64(tok[2], &m) < 0) return tp_fail(t, "bad frame");
    if (suiro_wire_put_frame(w, n, m)) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
    return tp_children(t, w, 2 * n);
  } else if (strcmp(k, "factor") == 0 && nt == 3) {
    int ordered = strcmp(tok[1], "ordered") == 0;
    if ((!ordered && strcmp(tok[1], "unordered")) || parse_u64(tok[2], &n) < 0)
      return tp_fail(t, "bad factor");
    int32_t *codes = malloc(4 * n + 4);
    for (uint64_t i = 0; i < n; i++) {
      char *s[2];
      if (tp_tokens(t, s, 2) != 1 || parse_i64(s[0], &iv) < 0) return free(codes), tp_fail(t, "bad code");
      codes[i] = strcmp(s[0], "na") == 0 ? WIRE_NA_CODE : (int32_t)iv;
    }
    char *s[3];
    if (tp_tokens(t, s, 3) != 2 || strcmp(s[0], "strs") || parse_u64(s[1], &m) < 0)
      return free(codes), tp_fail(t, "factor levels: expected a strs line");
    int first = t->i;
    t->i += (int)m; /* levels are read after the codes went in */
    if (t->i > t->n) return free(codes), tp_fail(t, "truncated levels");
    int32_t *c = suiro_wire_put_factor(w, n, ordered, m);
    if (c && n) memcpy(c, codes, 4 * n);
    free(codes);
    for (uint64_t i = 0; i < m; i++) {
      unsigned char *p;
      size_t len;
      if (parse_hex(t->lines[first + (int)i], &p, &len) < 0) return tp_fail(t, "bad level");
      rc |= suiro_wire_strs_add(w, p, len);
      free(p);
    }
  } else if (strcmp(k, "timestamp") == 0 && nt == 4) {
    int unit = -1;
    for (int u = 0; u < 4; u++)
      if (strcmp(tok[2], unit_names[u]) == 0) unit = u;
    if ((type = type_by_name(tok[1])) < 1 || unit < 0 || parse_u64(tok[3], &n) < 0)
      return tp_fail(t, "bad timestamp");
    unsigned char *tz;
    size_t tzl;
    if (tp_str_line(t, &tz, &tzl) < 0) return -1;
    void *d = suiro_wire_put_timestamp(w, type, unit, (suiro_wire_str){ (char *)tz, tzl }, n);
    free(tz);
    return tp_elems(t, type, d, n);
  } else if (strcmp(k, "error") == 0 && nt == 2) {
    unsigned char *s[3] = { 0 };
    size_t l[3];
    if (parse_i64(tok[1], &iv) < 0) return tp_fail(t, "bad index");
    for (int i = 0; i < 3; i++)
      if (tp_str_line(t, &s[i], &l[i]) < 0) return -1;
    rc = suiro_wire_put_error(w, (suiro_wire_str){ (char *)s[0], l[0] }, (suiro_wire_str){ (char *)s[1], l[1] },
                        (suiro_wire_str){ (char *)s[2], l[2] }, iv);
    for (int i = 0; i < 3; i++) free(s[i]);
  } else if (strcmp(k, "call") == 0 && nt == 2) {
    int form = strcmp(tok[1], "source") == 0;
    if (!form && strcmp(tok[1], "name")) return tp_fail(t, "bad call form");
    unsigned char *s;
    size_t l;
    if (tp_str_line(t, &s, &l) < 0) return -1;
    rc = suiro_wire_put_call(w, form, (suiro_wire_str){ (char *)s, l });
    free(s);
    if (rc) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
    return tp_children(t, w, 2);
  } else if (strcmp(k, "ref") == 0 && nt >= 7) {
    suiro_wire_ref r = { 0 };
    uint64_t dims[WIRE_MAX_NDIM];
    if ((r.type = type_by_name(tok[1])) < 0 || (strcmp(tok[2], "C") && strcmp(tok[2], "F")) ||
        parse_u64(tok[3], &r.flags) < 0 || parse_u64(tok[4], &r.offset) < 0 ||
        parse_u64(tok[5], &r.length) < 0 || parse_u64(tok[6], &n) < 0 || n > WIRE_MAX_NDIM ||
        (uint64_t)nt != 7 + n)
      return tp_fail(t, "bad ref");
    for (uint64_t i = 0; i < n; i++)
      if (parse_u64(tok[7 + i], &dims[i]) < 0) return tp_fail(t, "bad dim");
    r.order = tok[2][0] == 'F';
    r.ndim = (int)n;
    r.dims = dims;
    unsigned char *s;
    size_t l;
    if (tp_str_line(t, &s, &l) < 0) return -1;
    r.name = (suiro_wire_str){ (char *)s, l };
    rc = suiro_wire_put_ref(w, &r);
    free(s);
  } else if (strcmp(k, "func") == 0 && nt == 4) {
    int lang = -1;
    for (int l = 1; l <= 3; l++)
      if (strcmp(tok[1], lang_names[l]) == 0) lang = l;
    if (lang < 0 || parse_u64(tok[2], &m) < 0 || parse_u64(tok[3], &n) < 0) return tp_fail(t, "bad func");
    if (suiro_wire_put_func(w, lang, m, n)) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
    return tp_children(t, w, n);
  } else if (strcmp(k, "backref") == 0 && nt == 2) {
    if (parse_u64(tok[1], &n) < 0) return tp_fail(t, "bad backref");
    rc = suiro_wire_put_backref(w, n);
  } else if (strcmp(k, "range") == 0 && nt == 4) {
    char *end1, *end2;
    errno = 0;
    long long start = strtoll(tok[1], &end1, 10), step = strtoll(tok[2], &end2, 10);
    if (errno || *end1 || *end2 || parse_u64(tok[3], &n) < 0) return tp_fail(t, "bad range");
    rc = suiro_wire_put_range(w, start, step, n);
  } else {
    return tp_fail(t, "unknown line '%s' (%d tokens)", k, nt);
  }
  if (rc) return tp_fail(t, "writer: %s", suiro_wire_writer_error(w));
  return 0;
}

/* Encodes a whole notation text; returns a malloc'd buffer or NULL with err set. */
static unsigned char *text_encode(const char *text, size_t len, size_t *out_len, char *err, size_t cap) {
  tp t;
  tp_init(&t, text, len);
  suiro_wire_writer w;
  _Alignas(8) unsigned char stack[48];
  suiro_wire_writer_init(&w, stack, sizeof stack);
  unsigned char *res = NULL;
  const void *p;
  if (tp_value(&t, &w) < 0) {
    snprintf(err, cap, "%s", t.err);
  } else if (t.i != t.n) {
    snprintf(err, cap, "line %d: lines after the value", t.i);
  } else if (suiro_wire_writer_finish(&w, &p, out_len) != WIRE_OK) {
    snprintf(err, cap, "%s", suiro_wire_writer_error(&w));
  } else {
    res = dup_exact(p, *out_len);
  }
  suiro_wire_writer_free(&w);
  tp_free(&t);
  return res;
}

static char *dump_text(const void *buf, size_t len, size_t *tlen) {
  sbuf b = { 0 };
  char err[256];
  if (wire_dump(buf, len, &b, err, sizeof err) != WIRE_OK) {
    fprintf(stderr, "dump failed: %s\n", err);
    sb_free(&b);
    return NULL;
  }
  sb_reserve(&b, 0);
  *tlen = b.len;
  return b.p;
}

/* Copies a whole buffer through suiro_wire_copy; returns the new bytes (malloc'd) or NULL. */
static unsigned char *copy_buffer(const void *buf, size_t len, size_t *out_len) {
  suiro_wire_reader r;
  suiro_wire_writer w;
  const void *p;
  unsigned char *res = NULL;
  suiro_wire_writer_init(&w, NULL, 0);
  if (suiro_wire_reader_init(&r, buf, len) == WIRE_OK && suiro_wire_copy(&w, &r) == WIRE_OK &&
      suiro_wire_next(&r, &(suiro_wire_item){ 0 }) == WIRE_END && suiro_wire_writer_finish(&w, &p, out_len) == WIRE_OK)
    res = dup_exact(p, *out_len);
  suiro_wire_writer_free(&w);
  return res;
}

/* Walks a buffer with suiro_wire_next only; returns the final status and fills positions. */
static int walk(const void *buf, size_t len, size_t *pos, int cap, int *count, char *err, size_t errcap) {
  suiro_wire_reader r;
  suiro_wire_item it;
  int n = 0;
  int st = suiro_wire_reader_init(&r, buf, len);
  while (st == WIRE_OK && (st = suiro_wire_next(&r, &it)) == WIRE_OK) {
    if (pos && n < cap) pos[n] = it.pos;
    n++;
    /* every pointer handed out lies inside the buffer and array data is 8-aligned */
    const unsigned char *b = buf;
    if (it.tag == WIRE_ARRAY || it.tag == WIRE_NDARRAY || it.tag == WIRE_DATE ||
        it.tag == WIRE_TIMESTAMP || it.tag == WIRE_FACTOR) {
      CHECK(((uintptr_t)it.data & 7) == 0);
      size_t bytes = it.tag == WIRE_FACTOR ? 4 * it.n : it.n * suiro_wire_type_size(it.type);
      CHECK((const unsigned char *)it.data >= b && (const unsigned char *)it.data + bytes <= b + len);
    }
    if (it.tag == WIRE_STR || it.tag == WIRE_BYTES)
      CHECK((const unsigned char *)it.data >= b && (const unsigned char *)it.data + it.n <= b + len);
  }
  if (count) *count = n;
  if (st != WIRE_END && errcap) snprintf(err, errcap, "%s", r.err);
  return st;
}

/* ---- golden vectors --------------------------------------------------------------------------- */

TEST(golden_set_matches_generator) {
  /* every builder's output equals the committed files, and there are no stray files */
  for (int i = 0; i < NGOLDENS; i++) {
    size_t blen, flen, tlen, ftl;
    char err[256];
    unsigned char *built = golden_build(i, &blen, err, sizeof err);
    if (!built) fprintf(stderr, "%s\n", err);
    CHECK(built != NULL);
    unsigned char *file = read_vec(i, "bin", &flen);
    if (flen != blen || memcmp(file, built, blen) != 0)
      fprintf(stderr, "%s.bin differs from its builder: regenerate or bump the version\n", goldens[i].name);
    CHECK(flen == blen && memcmp(file, built, blen) == 0);
    sbuf txt = { 0 };
    CHECK_EQ(golden_text(i, built, blen, &txt, err, sizeof err), WIRE_OK);
    char *ftxt = (char *)read_vec(i, "txt", &ftl);
    tlen = txt.len;
    CHECK(ftl == tlen && memcmp(ftxt, txt.p, tlen) == 0);
    free(built), free(file), free(ftxt), sb_free(&txt);
  }
  char cmd[4600];
  snprintf(cmd, sizeof cmd, "ls %s/*.bin | wc -l", vec_dir());
  FILE *f = popen(cmd, "r");
  int nfiles = 0;
  CHECK(f && fscanf(f, "%d", &nfiles) == 1);
  pclose(f);
  CHECK_EQ(nfiles, NGOLDENS);
}

TEST(golden_decode) {
  for (int i = 0; i < NGOLDENS; i++) {
    size_t blen, tlen, slen, dlen;
    unsigned char *bin = read_vec(i, "bin", &blen);
    char *txt = (char *)read_vec(i, "txt", &tlen);
    char *want = strip_comments(txt, tlen, &slen);
    char err[256];
    CHECK_EQ(suiro_wire_validate(bin, blen, err, sizeof err), WIRE_OK);
    CHECK_EQ(walk(bin, blen, NULL, 0, NULL, err, sizeof err), WIRE_END);
    char *got = dump_text(bin, blen, &dlen);
    CHECK(got != NULL);
    if (dlen != slen || memcmp(got, want, slen) != 0)
      fprintf(stderr, "%s: decoded\n%s\nwant\n%s\n", goldens[i].name, got, want);
    CHECK(dlen == slen && memcmp(got, want, slen) == 0);
    free(bin), free(txt), free(want), free(got);
  }
}

TEST(golden_encode_from_text) {
  for (int i = 0; i < NGOLDENS; i++) {
    size_t blen, tlen, elen;
    unsigned char *bin = read_vec(i, "bin", &blen);
    char *txt = (char *)read_vec(i, "txt", &tlen);
    char err[256];
    unsigned char *enc = text_encode(txt, tlen, &elen, err, sizeof err);
    if (!enc) fprintf(stderr, "%s: %s\n", goldens[i].name, err);
    CHECK(enc != NULL);
    if (elen != blen || memcmp(enc, bin, blen) != 0) {
      size_t k = 0;
      while (k < elen && k < blen && enc[k] == bin[k]) k++;
      fprintf(stderr, "%s: encoding differs at byte %zu (len %zu vs %zu)\n", goldens[i].name, k, elen, blen);
    }
    CHECK(elen == blen && memcmp(enc, bin, blen) == 0);
    free(bin), free(txt), free(enc);
  }
}

TEST(golden_copy_is_identity) {
  for (int i = 0; i < NGOLDENS; i++) {
    size_t blen, clen;
    unsigned char *bin = read_vec(i, "bin", &blen);
    unsigned char *c = copy_buffer(bin, blen, &clen);
    CHECK(c != NULL);
    CHECK(clen == blen && memcmp(c, bin, blen) == 0);
    free(bin), free(c);
  }
}

TEST(golden_skip) {
  /* skipping any mix of values ends exactly at the end; a top-level skip spans the value */
  for (int i = 0; i < NGOLDENS; i++) {
    size_t blen;
    unsigned char *bin = read_vec(i, "bin", &blen);
    suiro_wire_reader r;
    CHECK_OK(suiro_wire_reader_init(&r, bin, blen));
    CHECK_EQ(suiro_wire_skip(&r), WIRE_OK);
    CHECK_EQ(r.pos, blen);
    CHECK_EQ(suiro_wire_skip(&r), WIRE_END);
    for (unsigned pattern = 1; pattern < 8; pattern++) {
      CHECK_OK(suiro_wire_reader_init(&r, bin, blen));
      suiro_wire_item it;
      int st, k = 0;
      do {
        st = (pattern >> (k++ % 3)) & 1 ? suiro_wire_skip(&r) : suiro_wire_next(&r, &it);
      } while (st == WIRE_OK);
      CHECK_EQ(st, WIRE_END);
      CHECK_EQ(r.pos, blen);
    }
    free(bin);
  }
}

TEST(reader_fields) {
  /* spot checks of item fields a binding relies on (the dump covers the rest) */
  size_t len;
  int idx = -1;
  for (int i = 0; i < NGOLDENS; i++)
    if (strcmp(goldens[i].name, "nd_f64_f") == 0) idx = i;
  CHECK(idx >= 0);
  unsigned char *b = read_vec(idx, "bin", &len);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_OK(suiro_wire_reader_init(&r, b, len));
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_NDARRAY);
  CHECK_EQ(it.type, WIRE_T_F64);
  CHECK_EQ(it.flag, WIRE_ORDER_F);
  CHECK_EQ(it.ndim, 2);
  CHECK_EQ(it.dims[0], 2);
  CHECK_EQ(it.dims[1], 3);
  CHECK_EQ(it.n, 6);
  CHECK(((const double *)it.data)[1] == 4.0); /* column-major: (2,1) comes second */
  CHECK_EQ(it.pos, 8);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_END);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_END);
  free(b);

  /* the hot path: (1, 2) is 32 bytes with the header */
  _Alignas(8) unsigned char stack[256];
  suiro_wire_writer w;
  const void *p;
  suiro_wire_writer_init(&w, stack, sizeof stack);
  suiro_wire_put_list(&w, 2), suiro_wire_put_i64(&w, 1), suiro_wire_put_i64(&w, 2);
  CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
  CHECK_EQ(len, 32);
  CHECK(p == stack);
  CHECK(w.heap == NULL); /* no malloc for small values */
  CHECK_OK(suiro_wire_reader_init(&r, p, len));
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_LIST);
  CHECK_EQ(it.n, 2);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_I64);
  CHECK_EQ(it.i, 1);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.i, 2);
  CHECK_EQ(r.depth, 0);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_END);
  suiro_wire_writer_free(&w);
}

TEST(na_bit_patterns) {
  /* R 4.2: writeBin(NA_real_, raw(), endian = "little") == a2 07 00 00 00 00 f0 7f */
  const unsigned char r_na[8] = { 0xa2, 0x07, 0, 0, 0, 0, 0xf0, 0x7f };
  uint64_t bits;
  memcpy(&bits, r_na, 8);
  CHECK(bits == WIRE_NA_F64_BITS);
  CHECK(suiro_wire_is_na_f64_bits(WIRE_NA_F64_BITS));
  CHECK(suiro_wire_is_na_f64_bits(UINT64_C(0x7FF80000000007A2))); /* NA after arithmetic */
  CHECK(!suiro_wire_is_na_f64_bits(UINT64_C(0x7FF8000000000000)));  /* NaN */
  CHECK(!suiro_wire_is_na_f64_bits(f64_bits(1954.0)));
  CHECK(!suiro_wire_is_na_f64_bits(UINT64_C(0x7FF0000000000000))); /* inf, not a NaN */
  CHECK(WIRE_NA_I32 == INT32_MIN && WIRE_NA_I64 == INT64_MIN);
  /* the signalling NA survives put_f64 and suiro_wire_copy bit for bit */
  suiro_wire_writer w;
  const void *p;
  size_t len, clen;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_OK(suiro_wire_put_f64(&w, bits_f64(WIRE_NA_F64_BITS)));
  CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
  CHECK(memcmp((const char *)p + 16, r_na, 8) == 0);
  unsigned char *c = copy_buffer(p, len, &clen);
  CHECK(c && clen == len && memcmp(c, p, len) == 0);
  free(c);
  suiro_wire_writer_free(&w);
}

/* ---- random round trips ----------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * UINT64_C(2685821657736338717);
}
static int rndn(uint64_t *s, int n) { return (int)(rnd(s) % (uint64_t)n); }

static void gen_hex_line(sbuf *b, const char *kw, uint64_t *s, int maxlen, int allow_nul) {
  unsigned char buf[64];
  int n = rndn(s, maxlen + 1);
  for (int i = 0; i < n; i++) {
    buf[i] = (unsigned char)(rndn(s, 4) ? (uint64_t)('a' + rndn(s, 26)) : rnd(s));
    if (!allow_nul && !buf[i]) buf[i] = 'z';
  }
  if (kw) sb_printf(b, "%s ", kw);
  sb_hex(b, buf, (size_t)n);
  sb_printf(b, "\n");
}

static void gen_elem_bytes(unsigned char *out, int type, uint64_t *s) {
  static const double nice[] = { 0, -0.0, 1, -1, 0.5, 1e-300, 1e300, 3.25, INFINITY, -INFINITY };
  uint64_t v = rnd(s);
  switch (type) {
  case WIRE_T_F64:
  case WIRE_T_C128:
    for (int k = 0; k < (type == WIRE_T_C128 ? 2 : 1); k++) {
      int c = rndn(s, 4);
      uint64_t bits = c == 0 ? rnd(s) : c == 1 ? WIRE_NA_F64_BITS : f64_bits(nice[rndn(s, 10)]);
      if (c == 3) bits = UINT64_C(0x7FF0000000000000) | (rnd(s) & 0xFFFFF); /* NaN payloads */
      if (c == 3 && (bits & UINT64_C(0xFFFFFFFFFFFFF)) == 0) bits |= 1;
      memcpy(out + 8 * k, &bits, 8);
    }
    break;
  case WIRE_T_F32: {
    uint32_t b = (uint32_t)v;
    if (rndn(s, 3) == 0) b = 0x7FC00000u;
    memcpy(out, &b, 4);
    break;
  }
  case WIRE_T_I64: {
    int64_t x = rndn(s, 5) == 0 ? INT64_MIN : (int64_t)(v >> rndn(s, 64)) * (rndn(s, 2) ? 1 : -1);
    memcpy(out, &x, 8);
    break;
  }
  case WIRE_T_I32: {
    int32_t x = rndn(s, 5) == 0 ? INT32_MIN : (int32_t)(uint32_t)(v >> rndn(s, 40));
    memcpy(out, &x, 4);
    break;
  }
  case WIRE_T_U8: out[0] = (unsigned char)v; break;
  case WIRE_T_BOOL: out[0] = (unsigned char[]){ 0, 1, WIRE_NA_BOOL }[rndn(s, 3)]; break;
  }
}

static void gen_elems(sbuf *b, int type, uint64_t n, uint64_t *s) {
  unsigned char e[16];
  for (uint64_t i = 0; i < n; i++) {
    gen_elem_bytes(e, type, s);
    fmt_elem(b, type, e);
    sb_printf(b, "\n");
  }
}

static void gen_strs(sbuf *b, uint64_t n, uint64_t *s, int na_ok) {
  sb_printf(b, "strs %" PRIu64 "\n", n);
  for (uint64_t i = 0; i < n; i++) {
    if (na_ok && rndn(s, 4) == 0) sb_printf(b, "na\n");
    else gen_hex_line(b, NULL, s, 12, 1);
  }
}

static void gen_column(sbuf *b, uint64_t nrow, uint64_t *s) {
  int k = rndn(s, 5), type;
  switch (k) {
  case 0:
    type = 1 + rndn(s, WIRE_T_MAX);
    sb_printf(b, "array %s %" PRIu64 "\n", suiro_wire_type_name(type), nrow);
    gen_elems(b, type, nrow, s);
    break;
  case 1: gen_strs(b, nrow, s, 1); break;
  case 2: {
    int nlev = rndn(s, 4);
    sb_printf(b, "factor %s %" PRIu64 "\n", rndn(s, 2) ? "ordered" : "unordered", nrow);
    for (uint64_t i = 0; i < nrow; i++) {
      int c = rndn(s, nlev + 1) - 1;
      if (c < 0) sb_printf(b, "na\n");
      else sb_printf(b, "%d\n", c);
    }
    gen_strs(b, (uint64_t)nlev, s, 0);
    break;
  }
  case 3:
    type = (int[]){ WIRE_T_I32, WIRE_T_I64, WIRE_T_F64 }[rndn(s, 3)];
    sb_printf(b, "date %s %" PRIu64 "\n", suiro_wire_type_name(type), nrow);
    gen_elems(b, type, nrow, s);
    break;
  default:
    type = rndn(s, 2) ? WIRE_T_I64 : WIRE_T_F64;
    sb_printf(b, "timestamp %s %s %" PRIu64 "\n", suiro_wire_type_name(type), unit_names[rndn(s, 4)], nrow);
    gen_hex_line(b, "str", s, 20, 1);
    gen_elems(b, type, nrow, s);
  }
}

static uint64_t g_ncont; /* LIST, DICT, FUNC lines so far: what a backref may point at */

static void gen_value(sbuf *b, uint64_t *s, int depth) {
  int k = rndn(s, depth < 6 ? 22 : 15);
  uint64_t n;
  int type;
  switch (k) {
  case 0: sb_printf(b, "nil\n"); break;
  case 1: sb_printf(b, "bool %s\n", (const char *[]){ "true", "false", "na" }[rndn(s, 3)]); break;
  case 2: {
    unsigned char e[8];
    gen_elem_bytes(e, WIRE_T_I64, s);
    sb_printf(b, "i64 ");
    fmt_elem(b, WIRE_T_I64, e);
    sb_printf(b, "\n");
    break;
  }
  case 3: {
    unsigned char e[8];
    gen_elem_bytes(e, WIRE_T_F64, s);
    sb_printf(b, "f64 ");
    fmt_elem(b, WIRE_T_F64, e);
    sb_printf(b, "\n");
    break;
  }
  case 4: gen_hex_line(b, rndn(s, 2) ? "str" : "bytes", s, 40, 1); break;
  case 5:
    type = 1 + rndn(s, WIRE_T_MAX);
    n = (uint64_t)rndn(s, 20);
    sb_printf(b, "array %s %" PRIu64 "\n", suiro_wire_type_name(type), n);
    gen_elems(b, type, n, s);
    break;
  case 6: {
    type = 1 + rndn(s, WIRE_T_MAX);
    int nd = rndn(s, 5);
    uint64_t count = 1;
    sb_printf(b, "ndarray %s %s %d", suiro_wire_type_name(type), rndn(s, 2) ? "F" : "C", nd);
    for (int i = 0; i < nd; i++) {
      uint64_t d = (uint64_t)rndn(s, 4);
      count *= d;
      sb_printf(b, " %" PRIu64, d);
    }
    sb_printf(b, "\n");
    gen_elems(b, type, count, s);
    break;
  }
  case 7: gen_strs(b, (uint64_t)rndn(s, 6), s, 1); break;
  case 8: gen_column(b, (uint64_t)rndn(s, 5), s); break;
  case 9: {
    int ni = rndn(s, 4);
    sb_printf(b, "error %d\n", ni == 0 ? -1 : rndn(s, 100000));
    for (int i = 0; i < 3; i++) gen_hex_line(b, "str", s, 30, 1);
    break;
  }
  case 10:
  case 11: {
    type = (int[]){ WIRE_REF_BYTES, WIRE_REF_WIRE, 1, 2, 3, 4, 5, 6, 7 }[rndn(s, 9)];
    int nd = type >= 1 && type <= WIRE_T_MAX ? rndn(s, 4) : 0;
    uint64_t dims[4], count = 1, length;
    for (int i = 0; i < nd; i++) dims[i] = (uint64_t)rndn(s, 1000), count *= dims[i];
    if (type == WIRE_REF_BYTES) length = rnd(s) % 100000;
    else if (type == WIRE_REF_WIRE) length = 8 + 8 * (rnd(s) % 10000);
    else if (nd == 0) length = suiro_wire_type_size(type) * (rnd(s) % 5000);
    else length = count * suiro_wire_type_size(type);
    sb_printf(b, "ref %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %d", suiro_wire_type_name(type),
              nd && rndn(s, 2) ? "F" : "C", rnd(s), 8 * (rnd(s) % 1000000), length, nd);
    for (int i = 0; i < nd; i++) sb_printf(b, " %" PRIu64, dims[i]);
    sb_printf(b, "\n");
    unsigned char name[40];
    int nl = 1 + rndn(s, 30);
    for (int i = 0; i < nl; i++) name[i] = (unsigned char)(1 + rndn(s, 255));
    sb_printf(b, "str ");
    sb_hex(b, name, (size_t)nl);
    sb_printf(b, "\n");
    break;
  }
  case 12: sb_printf(b, "list 0\n"), g_ncont++; break;
  case 13: {
    int64_t start = (int64_t)(rnd(s) % 2000001) - 1000000, step = (int64_t)(rnd(s) % 201) - 100;
    if (step == 0) step = 1;
    sb_printf(b, "range %" PRId64 " %" PRId64 " %" PRIu64 "\n", start, step, rnd(s) % 100000);
    break;
  }
  case 14:
    if (g_ncont) sb_printf(b, "backref %" PRIu64 "\n", rnd(s) % g_ncont);
    else sb_printf(b, "nil\n");
    break;
  case 15:
  case 16:
    n = (uint64_t)rndn(s, 5);
    sb_printf(b, "list %" PRIu64 "\n", n);
    g_ncont++;
    for (uint64_t i = 0; i < n; i++) gen_value(b, s, depth + 1);
    break;
  case 20: {
    uint64_t key = rndn(s, 3) ? rnd(s) : 0;
    n = 1 + (uint64_t)rndn(s, 4);
    sb_printf(b, "func %s %" PRIu64 " %" PRIu64 "\n", lang_names[1 + rndn(s, 3)], key, n);
    g_ncont++;
    if (key == 0 || rndn(s, 2)) gen_hex_line(b, "str", s, 10, 1);
    else sb_printf(b, "nil\n");
    for (uint64_t i = 1; i < n; i++) gen_value(b, s, depth + 1);
    break;
  }
  case 17:
    n = (uint64_t)rndn(s, 4);
    sb_printf(b, "dict %" PRIu64 "\n", n);
    g_ncont++;
    for (uint64_t i = 0; i < n; i++) {
      gen_hex_line(b, "str", s, 8, 1);
      gen_value(b, s, depth + 1);
    }
    break;
  case 18: {
    uint64_t nc = (uint64_t)rndn(s, 4), nr = (uint64_t)rndn(s, 5);
    sb_printf(b, "frame %" PRIu64 " %" PRIu64 "\n", nc, nr);
    for (uint64_t i = 0; i < nc; i++) {
      gen_hex_line(b, "str", s, 8, 1);
      gen_column(b, nr, s);
    }
    break;
  }
  default: {
    int form = rndn(s, 2);
    sb_printf(b, "call %s\n", form ? "source" : "name");
    unsigned char t[8] = { 'f' };
    int tl = form ? rndn(s, 8) : 1 + rndn(s, 7);
    for (int i = 1; i < tl; i++) t[i] = (unsigned char)('a' + rndn(s, 26));
    sb_printf(b, "str ");
    sb_hex(b, t, (size_t)tl);
    sb_printf(b, "\n");
    n = (uint64_t)rndn(s, 3);
    sb_printf(b, "list %" PRIu64 "\n", n);
    g_ncont++;
    for (uint64_t i = 0; i < n; i++) gen_value(b, s, depth + 1);
    n = (uint64_t)rndn(s, 3);
    sb_printf(b, "dict %" PRIu64 "\n", n);
    g_ncont++;
    for (uint64_t i = 0; i < n; i++) {
      gen_hex_line(b, "str", s, 6, 1);
      gen_value(b, s, depth + 1);
    }
  }
  }
}

TEST(random_round_trips) {
  uint64_t s = 0x9E3779B97F4A7C15u;
  for (int iter = 0; iter < 4000; iter++) {
    sbuf txt = { 0 };
    g_ncont = 0;
    gen_value(&txt, &s, 0);
    size_t len, dlen, clen;
    char err[256];
    unsigned char *bin = text_encode(txt.p, txt.len, &len, err, sizeof err);
    if (!bin) fprintf(stderr, "iteration %d: %s\n%s", iter, err, txt.p);
    CHECK(bin != NULL);
    CHECK_EQ(suiro_wire_validate(bin, len, err, sizeof err), WIRE_OK);
    char *back = dump_text(bin, len, &dlen);
    CHECK(back != NULL);
    if (dlen != txt.len || memcmp(back, txt.p, dlen) != 0)
      fprintf(stderr, "iteration %d: sent\n%s\ngot back\n%s\n", iter, txt.p, back);
    CHECK(dlen == txt.len && memcmp(back, txt.p, dlen) == 0);
    unsigned char *c = copy_buffer(bin, len, &clen);
    CHECK(c && clen == len && memcmp(c, bin, len) == 0);
    /* every strict prefix fails */
    for (size_t cut = 0; cut < len; cut += 1 + (size_t)rndn(&s, 8)) {
      unsigned char *t = dup_exact(bin, cut);
      CHECK_EQ(suiro_wire_validate(t, cut, err, sizeof err), WIRE_ERR);
      CHECK(err_byte(err) >= 0 && err_byte(err) <= (long long)cut);
      free(t);
    }
    free(bin), free(back), free(c), sb_free(&txt);
  }
}

/* ---- malformed input -------------------------------------------------------------------------- */

/* Validates a buffer and checks the outcome: every failure names a byte inside the buffer; the
 * cursor walk, skip walk and copy agree with suiro_wire_validate; a valid buffer re-encodes to itself. */
static int check_outcome(const unsigned char *buf, size_t len, char *err, size_t errcap) {
  int v = suiro_wire_validate(buf, len, err, errcap);
  char err2[256];
  int w = walk(buf, len, NULL, 0, NULL, err2, sizeof err2);
  if (v == WIRE_OK) {
    CHECK_EQ(w, WIRE_END);
    size_t clen;
    unsigned char *c = copy_buffer(buf, len, &clen);
    if (!c || clen != len || memcmp(c, buf, len) != 0) {
      fprintf(stderr, "valid buffer of %zu bytes does not re-encode to itself\n", len);
      CHECK(0);
    }
    free(c);
  } else {
    CHECK_EQ(w, WIRE_ERR);
    CHECK(strcmp(err, err2) == 0);
    long long at = err_byte(err);
    if (at < 0 || at > (long long)len) fprintf(stderr, "message without a good position: %s\n", err);
    CHECK(at >= 0 && at <= (long long)len);
    CHECK(strncmp(err, "wire: ", 6) == 0);
    suiro_wire_reader r;
    if (suiro_wire_reader_init(&r, buf, len) == WIRE_OK) CHECK_EQ(suiro_wire_skip(&r), WIRE_ERR);
  }
  return v;
}

TEST(truncation_at_every_byte) {
  for (int i = 0; i < NGOLDENS; i++) {
    size_t len;
    unsigned char *bin = read_vec(i, "bin", &len);
    for (size_t cut = 0; cut < len; cut++) {
      unsigned char *t = dup_exact(bin, cut); /* exact size: ASan catches any over-read */
      char err[256];
      if (check_outcome(t, cut, err, sizeof err) != WIRE_ERR)
        fprintf(stderr, "%s cut at %zu validated\n", goldens[i].name, cut);
      CHECK(err_byte(err) <= (long long)cut);
      if (cut % 8) CHECK(strstr(err, "not a multiple of 8") || cut < 8);
      free(t);
    }
    free(bin);
  }
}

TEST(bad_tags_at_every_item) {
  for (int i = 0; i < NGOLDENS; i++) {
    size_t len, pos[4096];
    int n;
    char err[256];
    unsigned char *bin = read_vec(i, "bin", &len);
    CHECK_EQ(walk(bin, len, pos, 4096, &n, err, sizeof err), WIRE_END);
    for (int k = 0; k < n && k < 4096; k++) {
      const int bad[] = { 0x00, WIRE_TAG_MAX + 1, 0x3f, 0x80, 0xff };
      for (int j = 0; j < 5; j++) {
        unsigned char *t = dup_exact(bin, len);
        t[pos[k]] = (unsigned char)bad[j];
        CHECK_EQ(check_outcome(t, len, err, sizeof err), WIRE_ERR);
        char want[64];
        snprintf(want, sizeof want, "wire: bad tag 0x%02x at byte %zu", bad[j], pos[k]);
        if (strcmp(err, want)) fprintf(stderr, "%s: got '%s', want '%s'\n", goldens[i].name, err, want);
        CHECK(strcmp(err, want) == 0);
        free(t);
      }
      /* every valid tag in the wrong place: an error or, rarely, another valid value */
      for (int tag = 1; tag <= WIRE_TAG_MAX; tag++) {
        unsigned char *t = dup_exact(bin, len);
        t[pos[k]] = (unsigned char)tag;
        check_outcome(t, len, err, sizeof err);
        free(t);
      }
    }
    free(bin);
  }
}

TEST(bad_lengths_at_every_item) {
  /* overwrite each item's 48-bit field and aux byte with hostile values */
  const uint64_t ns[] = { 1, 2, 7, 9, 64, 65, 255, 4096, UINT64_C(0xFFFFFFFF), UINT64_C(0x7FFFFFFFFFFF),
                          UINT64_C(0xFFFFFFFFFFFF) };
  for (int i = 0; i < NGOLDENS; i++) {
    size_t len, pos[4096];
    int n;
    char err[256];
    unsigned char *bin = read_vec(i, "bin", &len);
    CHECK_EQ(walk(bin, len, pos, 4096, &n, err, sizeof err), WIRE_END);
    for (int k = 0; k < n && k < 4096; k++) {
      for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
        unsigned char *t = dup_exact(bin, len);
        uint64_t h;
        memcpy(&h, t + pos[k], 8);
        uint64_t old = h >> 16;
        h = (h & 0xFFFF) | ((old + ns[j]) & UINT64_C(0xFFFFFFFFFFFF)) << 16;
        memcpy(t + pos[k], &h, 8);
        check_outcome(t, len, err, sizeof err);
        h = (h & ~UINT64_C(0xFFFFFFFFFFFF0000)) | ns[j] << 16;
        memcpy(t + pos[k], &h, 8);
        check_outcome(t, len, err, sizeof err);
        t[pos[k] + 1] ^= (unsigned char)ns[j];
        check_outcome(t, len, err, sizeof err);
        free(t);
      }
    }
    free(bin);
  }
}

TEST(bit_flips_everywhere) {
  uint64_t s = 12345;
  for (int i = 0; i < NGOLDENS; i++) {
    size_t len;
    unsigned char *bin = read_vec(i, "bin", &len);
    for (size_t at = 0; at < len; at++) {
      const unsigned char masks[] = { 0x01, 0x02, 0x10, 0x80, 0xff, (unsigned char)(1 + rndn(&s, 254)) };
      for (int j = 0; j < 6; j++) {
        unsigned char *t = dup_exact(bin, len);
        char err[256];
        t[at] ^= masks[j];
        check_outcome(t, len, err, sizeof err);
        free(t);
      }
    }
    free(bin);
  }
}

typedef struct mbuf {
  unsigned char *p; /* malloc'd, exact size */
  size_t len;
} mbuf;

/* Builds a buffer from words after the header. */
static mbuf mk(int nw, ...) {
  mbuf b = { malloc(8 * (size_t)(nw + 1)), 8 * (size_t)(nw + 1) };
  memcpy(b.p, "SUIRO\x01\0\0", 8);
  va_list ap;
  va_start(ap, nw);
  for (int i = 0; i < nw; i++) {
    uint64_t v = va_arg(ap, uint64_t);
    memcpy(b.p + 8 * (i + 1), &v, 8);
  }
  va_end(ap);
  return b;
}

static mbuf mdup(const void *p, size_t n) { return (mbuf){ dup_exact(p, n), n }; }

#define H(tag, aux, n) ((uint64_t)(tag) | (uint64_t)(aux) << 8 | (uint64_t)(n) << 16)
#define W(x) ((uint64_t)(x))

/* Expects exactly this error message. */
static void expect_err(mbuf b, const char *want) {
  char err[256];
  CHECK_EQ(check_outcome(b.p, b.len, err, sizeof err), WIRE_ERR);
  if (strcmp(err, want) != 0) fprintf(stderr, "got  '%s'\nwant '%s'\n", err, want);
  CHECK(strcmp(err, want) == 0);
  free(b.p);
}

static void expect_ok(mbuf b) {
  char err[256];
  if (check_outcome(b.p, b.len, err, sizeof err) != WIRE_OK) fprintf(stderr, "unexpected: %s\n", err);
  CHECK(err[0] == 0);
  free(b.p);
}

TEST(malformed_header) {
  mbuf b = mk(1, H(WIRE_NIL, 0, 0));
  expect_ok(mdup(b.p, b.len));
  const struct { int at, val; const char *want; } cases[] = {
    { 0, 'X', "wire: bad magic (not a suiro wire buffer) at byte 0" },
    { 5, 2, "wire: unsupported version 2 (this reader knows 1) at byte 5" },
    { 7, 1, "wire: reserved header byte is not zero at byte 7" },
    { 6, 2, "wire: unknown header flags 0x02 at byte 6" },
    { 6, WIRE_HDR_BACKREFS, "wire: header announces back-references but there are none at byte 6" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mbuf t = mdup(b.p, b.len);
    t.p[cases[i].at] = (unsigned char)cases[i].val;
    expect_err(t, cases[i].want);
  }
  expect_err(mdup(b.p, 0), "wire: truncated: 0 bytes, a buffer starts with an 8-byte header at byte 0");
  expect_err(mdup(b.p, 5), "wire: truncated: 5 bytes, a buffer starts with an 8-byte header at byte 5");
  expect_err(mdup(b.p, 8), "wire: truncated: expected an item header, 0 bytes remain at byte 8");
  /* lengths that are not a multiple of 8 */
  unsigned char big[24];
  memcpy(big, b.p, 16);
  memset(big + 16, 0, 8);
  expect_err(mdup(big, 13), "wire: buffer length 13 is not a multiple of 8 at byte 8");
  expect_err(mdup(big, 17), "wire: buffer length 17 is not a multiple of 8 at byte 16");
  /* misaligned buffer address */
  unsigned char *mis = malloc(b.len + 1);
  memcpy(mis + 1, b.p, b.len);
  char err[256];
  CHECK_EQ(suiro_wire_validate(mis + 1, b.len, err, sizeof err), WIRE_ERR);
  CHECK(strcmp(err, "wire: buffer address is not 8-byte aligned at byte 0") == 0);
  suiro_wire_reader r;
  CHECK_EQ(suiro_wire_reader_init(&r, mis + 1, b.len), WIRE_ERR);
  CHECK(strcmp(suiro_wire_reader_error(&r), err) == 0 && r.err_pos == 0);
  CHECK(strcmp(suiro_last_error(), err) == 0);
  free(mis);
  /* trailing bytes and a second value */
  expect_err(mk(2, H(WIRE_NIL, 0, 0), H(WIRE_NIL, 0, 0)),
             "wire: 8 trailing bytes after the value at byte 16");
  expect_err(mk(2, H(WIRE_I48, 0, 5), W(0)), "wire: 8 trailing bytes after the value at byte 16");
  free(b.p);
}

TEST(malformed_scalars) {
  expect_err(mk(1, H(WIRE_NIL, 1, 0)), "wire: nonzero field in nil at byte 9");
  expect_err(mk(1, H(WIRE_NIL, 0, 3)), "wire: nonzero field in nil at byte 10");
  expect_err(mk(1, H(WIRE_BOOL, 2, 0)), "wire: bool value 0x02 (0, 1 or 0xFF) at byte 9");
  expect_ok(mk(1, H(WIRE_BOOL, 0xFF, 0)));
  expect_err(mk(2, H(WIRE_I64, 0, 0), W(5)),
             "wire: non-canonical i64 5 (fits the 48-bit form) at byte 8");
  expect_err(mk(2, H(WIRE_I64, 0, 0), W(-(INT64_C(1) << 47))),
             "wire: non-canonical i64 -140737488355328 (fits the 48-bit form) at byte 8");
  expect_ok(mk(2, H(WIRE_I64, 0, 0), W(INT64_C(1) << 47)));
  expect_err(mk(1, H(WIRE_I64, 0, 0)), "wire: truncated: i64 needs 8 bytes, 0 remain at byte 8");
  expect_err(mk(1, H(WIRE_F64, 0, 0)), "wire: truncated: f64 needs 8 bytes, 0 remain at byte 8");
  expect_err(mk(1, H(WIRE_I48, 1, 0)), "wire: nonzero aux byte in i48 at byte 9");
  /* 48-bit integers: sign extension */
  mbuf b = mk(1, (UINT64_C(0xFFFFFFFFFFFF) << 16) | WIRE_I48);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_OK(suiro_wire_reader_init(&r, b.p, b.len));
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_I64);
  CHECK_EQ(it.i, -1);
  free(b.p);
  /* strings: truncation, huge lengths, padding */
  expect_err(mk(2, H(WIRE_STR, 0, 9), W(0)), "wire: truncated: str of 9 bytes, 8 remain at byte 8");
  expect_err(mk(1, H(WIRE_BYTES, 0, UINT64_C(0xFFFFFFFFFFFF))),
             "wire: truncated: bytes of 281474976710655 bytes, 0 remain at byte 8");
  expect_err(mk(2, H(WIRE_STR, 0, 5), W(0x0100006f6c6c6568)),
             "wire: nonzero padding byte 0x01 at byte 23");
  expect_ok(mk(2, H(WIRE_STR, 0, 5), W(0x0000006f6c6c6568)));
  expect_err(mk(2, H(WIRE_STR, 1, 5), W(0x0000006f6c6c6568)), "wire: nonzero aux byte in str at byte 9");
}

TEST(malformed_arrays) {
  expect_err(mk(2, H(WIRE_ARRAY, 0, 1), W(0)), "wire: bad element type 0 in array at byte 9");
  expect_err(mk(2, H(WIRE_ARRAY, 8, 1), W(0)), "wire: bad element type 8 in array at byte 9");
  expect_err(mk(2, H(WIRE_ARRAY, WIRE_T_F64, 2), W(0)),
             "wire: truncated: array of 2 f64 elements needs 16 bytes, 8 remain at byte 8");
  expect_err(mk(1, H(WIRE_ARRAY, WIRE_T_C128, UINT64_C(0xFFFFFFFFFFFF))),
             "wire: truncated: array of 281474976710655 c128 elements needs 4503599627370480 bytes, 0 remain at byte 8");
  expect_err(mk(2, H(WIRE_ARRAY, WIRE_T_BOOL, 3), W(0x020001)),
             "wire: bool element 2 is 0x02 (0, 1 or 0xFF) at byte 18");
  expect_ok(mk(2, H(WIRE_ARRAY, WIRE_T_BOOL, 3), W(0xFF0001)));
  for (unsigned v = 0; v < 256; v++) { /* every byte value in a bool element (array and ndarray) */
    mbuf b = mk(2, H(WIRE_ARRAY, WIRE_T_BOOL, 2), W(1 | v << 8));
    mbuf nd = mk(4, H(WIRE_NDARRAY, WIRE_T_BOOL, 1), W(0), W(2), W(1 | v << 8));
    if (v == 0 || v == 1 || v == 0xFF) {
      expect_ok(b), expect_ok(nd);
    } else {
      char want[80];
      snprintf(want, sizeof want, "wire: bool element 1 is 0x%02x (0, 1 or 0xFF) at byte 17", v);
      expect_err(b, want);
      snprintf(want, sizeof want, "wire: bool element 1 is 0x%02x (0, 1 or 0xFF) at byte 33", v);
      expect_err(nd, want);
    }
  }
  expect_err(mk(2, H(WIRE_ARRAY, WIRE_T_I32, 1), W(0x0000000100000007)),
             "wire: nonzero padding byte 0x01 at byte 20");
  /* ndarray */
  expect_err(mk(1, H(WIRE_NDARRAY, WIRE_T_F64, 65)),
             "wire: ndarray with 65 dimensions (max 64) at byte 10");
  expect_err(mk(4, H(WIRE_NDARRAY, WIRE_T_F64, 1), W(2), W(1), W(0)),
             "wire: ndarray order 2 (0 = C, 1 = F) at byte 16");
  expect_err(mk(4, H(WIRE_NDARRAY, WIRE_T_F64, 2), W(0), W(UINT64_C(1) << 30), W(UINT64_C(1) << 30)),
             "wire: ndarray shape exceeds 2^48-1 elements at byte 24");
  expect_err(mk(4, H(WIRE_NDARRAY, WIRE_T_F64, 2), W(0), W(0), W(UINT64_MAX)),
             "wire: ndarray shape exceeds 2^48-1 elements at byte 24");
  expect_ok(mk(4, H(WIRE_NDARRAY, WIRE_T_F64, 2), W(0), W(0), W(UINT64_C(1) << 40)));
  expect_err(mk(3, H(WIRE_NDARRAY, WIRE_T_F64, 2), W(0), W(1)),
             "wire: truncated: ndarray shape needs 24 bytes, 16 remain at byte 8");
  expect_err(mk(4, H(WIRE_NDARRAY, WIRE_T_F64, 2), W(1), W(2), W(2)),
             "wire: truncated: ndarray of 4 f64 elements needs 32 bytes, 0 remain at byte 8");
  /* strs */
  expect_err(mk(1, H(WIRE_STRS, 0, UINT64_C(0xFFFFFFFFFFFF))),
             "wire: truncated: strs of 281474976710655 strings needs 281474976710655 length words, 0 bytes remain at byte 8");
  expect_err(mk(3, H(WIRE_STRS, 0, 2), W(3), W(UINT64_C(1) << 40)),
             "wire: truncated: string 0 of 3 bytes, 0 bytes remain at byte 16");
  expect_err(mk(4, H(WIRE_STRS, 0, 2), W(3), W(UINT64_C(0xFFFFFFFFFFFFFFF0)), W(0x636261)),
             "wire: truncated: string 1 of 18446744073709551600 bytes, 5 bytes remain at byte 24");
  expect_err(mk(4, H(WIRE_STRS, 0, 2), W(4), W(5), W(0)),
             "wire: truncated: string 1 of 5 bytes, 4 bytes remain at byte 24");
  expect_ok(mk(4, H(WIRE_STRS, 0, 2), W(UINT64_MAX), W(3), W(0x636261)));
  expect_err(mk(4, H(WIRE_STRS, 0, 2), W(UINT64_MAX), W(3), W(0x01636261)),
             "wire: nonzero padding byte 0x01 at byte 35");
  /* factor */
  expect_err(mk(4, H(WIRE_FACTOR, 0, 2), W(0x0000000200000000), H(WIRE_STRS, 0, 1), W(0)),
             "wire: factor code 2 out of range (1 levels) at byte 20");
  expect_err(mk(4, H(WIRE_FACTOR, 0, 2), W(0xFFFFFFFEFFFFFFFF), H(WIRE_STRS, 0, 1), W(0)),
             "wire: factor code -2 out of range (1 levels) at byte 20");
  expect_ok(mk(4, H(WIRE_FACTOR, 0, 2), W(0xFFFFFFFF00000000), H(WIRE_STRS, 0, 1), W(0)));
  for (int nlev = 0; nlev < 3; nlev++) { /* codes around both ends of [-1, nlevels) */
    for (int32_t c = -3; c <= nlev + 1; c++) {
      uint64_t lens[2] = { 0, 0 };
      mbuf b = mk(5, H(WIRE_FACTOR, 0, 1), W((uint32_t)c), H(WIRE_STRS, 0, nlev), W(lens[0]), W(lens[1]));
      b.len = 8 * (size_t)(4 + nlev); /* the length words actually used */
      if (c >= -1 && c < nlev) {
        expect_ok(b);
      } else {
        char want[80];
        snprintf(want, sizeof want, "wire: factor code %d out of range (%d levels) at byte 16", c, nlev);
        expect_err(b, want);
      }
    }
  }
  expect_err(mk(4, H(WIRE_FACTOR, 0, 2), W(0xFFFFFFFF00000000), H(WIRE_STRS, 0, 1), W(UINT64_MAX)),
             "wire: NA factor level 0 at byte 32");
  expect_err(mk(4, H(WIRE_FACTOR, 2, 2), W(0), H(WIRE_STRS, 0, 1), W(0)),
             "wire: factor ordered flag 2 (0 or 1) at byte 9");
  expect_err(mk(4, H(WIRE_FACTOR, 0, 2), W(0), H(WIRE_LIST, 0, 1), W(0)),
             "wire: bad tag 0x0b for the factor levels (expected strs) at byte 24");
  /* date and timestamp */
  expect_err(mk(2, H(WIRE_DATE, WIRE_T_U8, 1), W(0)),
             "wire: bad element type 5 in date (i32, i64 or f64) at byte 9");
  expect_err(mk(2, H(WIRE_TIMESTAMP, WIRE_T_I32, 0), W(0)),
             "wire: bad element type 4 in timestamp (i64 or f64) at byte 9");
  expect_err(mk(3, H(WIRE_TIMESTAMP, WIRE_T_I64, 0), W(4), H(WIRE_STR, 0, 0)),
             "wire: timestamp unit 4 (0..3) at byte 16");
  expect_err(mk(3, H(WIRE_TIMESTAMP, WIRE_T_I64, 0), W(0), H(WIRE_BYTES, 0, 0)),
             "wire: bad tag 0x07 for the time zone (expected str) at byte 24");
  expect_ok(mk(3, H(WIRE_TIMESTAMP, WIRE_T_I64, 0), W(0), H(WIRE_STR, 0, 0)));
  expect_err(mk(3, H(WIRE_TIMESTAMP, WIRE_T_I64, 1), W(0), H(WIRE_STR, 0, 0)),
             "wire: truncated: timestamp of 1 i64 elements needs 8 bytes, 0 remain at byte 8");
}

TEST(malformed_structure) {
  /* claimed counts are checked against the bytes before anything trusts them */
  expect_err(mk(1, H(WIRE_LIST, 0, UINT64_C(0xFFFFFFFFFFFF))),
             "wire: list of 281474976710655 items cannot fit in the 0 bytes that remain at byte 8");
  expect_err(mk(3, H(WIRE_DICT, 0, 2), H(WIRE_STR, 0, 0), H(WIRE_NIL, 0, 0)),
             "wire: dict of 2 entries cannot fit in the 16 bytes that remain at byte 8");
  expect_err(mk(3, H(WIRE_LIST, 0, 3), H(WIRE_NIL, 0, 0), H(WIRE_NIL, 0, 0)),
             "wire: list of 3 items cannot fit in the 16 bytes that remain at byte 8");
  expect_err(mk(3, H(WIRE_DICT, 0, 1), H(WIRE_I48, 0, 1), H(WIRE_NIL, 0, 0)),
             "wire: a dict key is an integer (keys are strings) at byte 16");
  expect_ok(mk(3, H(WIRE_DICT, 0, 1), H(WIRE_STR, 0, 0), H(WIRE_NIL, 0, 0)));
  expect_err(mk(4, H(WIRE_FRAME, 0, 1), W(2), H(WIRE_STR, 0, 0), H(WIRE_ARRAY, WIRE_T_U8, 1)),
             "wire: truncated: array of 1 u8 elements needs 8 bytes, 0 remain at byte 32");
  expect_err(mk(5, H(WIRE_FRAME, 0, 1), W(2), H(WIRE_STR, 0, 0), H(WIRE_ARRAY, WIRE_T_U8, 1), W(0)),
             "wire: a data frame column has 1 rows, the frame has 2 at byte 32");
  expect_err(mk(4, H(WIRE_FRAME, 0, 1), W(0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 0)),
             "wire: a data frame column is a list (columns are vectors: numbers, logicals, strings, factor, dates, "
             "timestamps) at byte 32");
  expect_err(mk(4, H(WIRE_FRAME, 0, 1), W(0), H(WIRE_NIL, 0, 0), H(WIRE_STRS, 0, 0)),
             "wire: a data frame column name is nil (names are strings) at byte 24");
  expect_err(mk(4, H(WIRE_FRAME, 0, 1), W(UINT64_C(1) << 48), H(WIRE_STR, 0, 0), H(WIRE_STRS, 0, 0)),
             "wire: frame row count 281474976710656 exceeds 2^48-1 at byte 16");
  expect_ok(mk(4, H(WIRE_FRAME, 0, 1), W(0), H(WIRE_STR, 0, 0), H(WIRE_STRS, 0, 0)));
  /* calls */
  expect_ok(mk(5, H(WIRE_CALL, 0, 0), H(WIRE_STR, 0, 1), W('f'), H(WIRE_LIST, 0, 0), H(WIRE_DICT, 0, 0)));
  expect_err(mk(5, H(WIRE_CALL, 0, 0), H(WIRE_STR, 0, 1), W('f'), H(WIRE_DICT, 0, 0), H(WIRE_LIST, 0, 0)),
             "wire: a call spec's arguments are a dict (they are a list) at byte 32");
  expect_err(mk(5, H(WIRE_CALL, 0, 0), H(WIRE_STR, 0, 1), W('f'), H(WIRE_LIST, 0, 0), H(WIRE_NIL, 0, 0)),
             "wire: a call spec's named arguments are nil (they are a dict) at byte 40");
  expect_err(mk(4, H(WIRE_CALL, 0, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 0), H(WIRE_DICT, 0, 0)),
             "wire: call with an empty target name at byte 16");
  expect_ok(mk(4, H(WIRE_CALL, 1, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 0), H(WIRE_DICT, 0, 0)));
  expect_err(mk(4, H(WIRE_CALL, 2, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 0), H(WIRE_DICT, 0, 0)),
             "wire: call form 2 (0 name, 1 source) at byte 9");
  expect_err(mk(3, H(WIRE_CALL, 1, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 0)),
             "wire: truncated: call needs its arguments, 8 bytes remain at byte 8");
  /* errors */
  expect_err(mk(5, H(WIRE_ERROR, 0, 0), W(-2), H(WIRE_STR, 0, 0), H(WIRE_STR, 0, 0), H(WIRE_STR, 0, 0)),
             "wire: error element index -2 (>= 0, or -1) at byte 16");
  expect_ok(mk(5, H(WIRE_ERROR, 0, 0), W(-1), H(WIRE_STR, 0, 0), H(WIRE_STR, 0, 0), H(WIRE_STR, 0, 0)));
  expect_err(mk(4, H(WIRE_ERROR, 0, 0), W(0), H(WIRE_STR, 0, 0), H(WIRE_STR, 0, 0)),
             "wire: truncated: error traceback needs a str header, 0 bytes remain at byte 40");
  expect_err(mk(5, H(WIRE_ERROR, 0, 0), W(0), H(WIRE_STR, 0, 0), H(WIRE_STRS, 0, 0), H(WIRE_STR, 0, 0)),
             "wire: bad tag 0x0a for the error message (expected str) at byte 32");
}

static mbuf shared(mbuf b) {
  b.p[6] = WIRE_HDR_BACKREFS;
  return b;
}

TEST(ranges) {
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, 1, 0, 5), WIRE_ERR);
  CHECK(strstr(suiro_wire_writer_error(&w), "step 0") != NULL);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MAX - 5, 1, 7), WIRE_ERR);
  CHECK(strstr(suiro_wire_writer_error(&w), "overflows") != NULL);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MAX - 5, 1, 6), WIRE_OK);
  const void *p;
  size_t len;
  CHECK_EQ(suiro_wire_writer_finish(&w, &p, &len), WIRE_OK);
  CHECK_EQ(len, 8 + 24);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, p, len), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_RANGE);
  CHECK_EQ(it.i, INT64_MAX - 5);
  CHECK_EQ(it.step, 1);
  CHECK_EQ(it.n, 6);
  suiro_wire_writer_free(&w);
  /* the span may exceed int64 while every element fits: INT64_MIN + 3 * 2^62 = 2^62 */
  int64_t big = (int64_t)1 << 62;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MIN, big, 4), WIRE_OK);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MIN, big, 5), WIRE_ERR);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MAX, -big, 4), WIRE_OK); /* down to INT64_MAX - 3 * 2^62 */
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MIN + 1, -1, 2), WIRE_OK);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, INT64_MIN + 1, -1, 3), WIRE_ERR);
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_range(&w, 0, INT64_MIN, 2), WIRE_OK);
  suiro_wire_writer_free(&w);
  /* the reader refuses step 0 and overflow, naming the byte */
  expect_err(mk(3, H(WIRE_RANGE, 0, 3), W(1), W(0)), "wire: range with step 0 at byte 24");
  expect_err(mk(3, H(WIRE_RANGE, 0, 3), W((uint64_t)INT64_MAX), W(1)), "wire: range overflows int64 at byte 8");
  expect_err(mk(2, H(WIRE_RANGE, 0, 3), W(1)), "wire: truncated: range needs 16 bytes, 8 remain at byte 8");
  expect_err(mk(3, H(WIRE_RANGE, 1, 3), W(1), W(1)), "wire: nonzero aux byte in range at byte 9");
}

TEST(malformed_funcs_and_backrefs) {
  mbuf b;
#define SHARED(x) shared(x)
  /* [<list 0>] as a cycle: fine; ordinals must point at containers already started */
  expect_ok(SHARED(mk(2, H(WIRE_LIST, 0, 1), H(WIRE_BACKREF, 0, 0))));
  expect_err(SHARED(mk(2, H(WIRE_LIST, 0, 1), H(WIRE_BACKREF, 0, 1))),
             "wire: back-reference to container 1, only 1 so far at byte 16");
  expect_err(SHARED(mk(1, H(WIRE_BACKREF, 0, 0))),
             "wire: back-reference to container 0, only 0 so far at byte 8");
  expect_err(mk(2, H(WIRE_LIST, 0, 1), H(WIRE_BACKREF, 0, 0)),
             "wire: back-reference in a buffer whose header announces none at byte 16");
  expect_err(SHARED(mk(2, H(WIRE_LIST, 0, 1), H(WIRE_BACKREF, 1, 0))),
             "wire: nonzero aux byte in backref at byte 17");
  expect_err(SHARED(mk(3, H(WIRE_DICT, 0, 1), H(WIRE_BACKREF, 0, 0), H(WIRE_NIL, 0, 0))),
             "wire: a dict key is a back-reference (keys are strings) at byte 16");
  /* frames and calls are not in the ordinal space; lists and dicts inside calls are */
  b = SHARED(mk(5, H(WIRE_CALL, 1, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 1), H(WIRE_BACKREF, 0, 0),
                H(WIRE_DICT, 0, 0)));
  expect_ok(b);
  expect_err(SHARED(mk(5, H(WIRE_CALL, 1, 0), H(WIRE_STR, 0, 0), H(WIRE_LIST, 0, 1),
                       H(WIRE_BACKREF, 0, 1), H(WIRE_DICT, 0, 0))),
             "wire: back-reference to container 1, only 1 so far at byte 32");
  /* functions */
  expect_ok(mk(3, H(WIRE_FUNC, WIRE_LANG_LUA, 1), W(7), H(WIRE_NIL, 0, 0)));
  expect_err(mk(3, H(WIRE_FUNC, WIRE_LANG_LUA, 1), W(0), H(WIRE_NIL, 0, 0)),
             "wire: a function's name is nil (a string: it is called by name) at byte 24");
  expect_err(mk(3, H(WIRE_FUNC, WIRE_LANG_LUA, 1), W(7), H(WIRE_I48, 0, 0)),
             "wire: a function's name is an integer (a string, or nil) at byte 24");
  expect_err(mk(3, H(WIRE_FUNC, 4, 1), W(7), H(WIRE_NIL, 0, 0)),
             "wire: function language 4 (1 Lua, 2 Python, 3 R) at byte 9");
  expect_err(mk(2, H(WIRE_FUNC, WIRE_LANG_R, 0), W(7)),
             "wire: function without children (needs a name or nil) at byte 10");
  expect_err(mk(1, H(WIRE_FUNC, WIRE_LANG_R, 1)),
             "wire: truncated: function needs a key, 0 bytes remain at byte 8");
  expect_err(mk(3, H(WIRE_FUNC, WIRE_LANG_LUA, 2), W(7), H(WIRE_NIL, 0, 0)),
             "wire: function of 2 children cannot fit in the 8 bytes that remain at byte 8");
  /* the item fields a binding reads */
  b = SHARED(mk(4, H(WIRE_FUNC, WIRE_LANG_PYTHON, 2), W(UINT64_MAX), H(WIRE_NIL, 0, 0), H(WIRE_BACKREF, 0, 0)));
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_OK(suiro_wire_reader_init(&r, b.p, b.len));
  CHECK_EQ(r.shared, 1);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_FUNC);
  CHECK_EQ(it.flag, WIRE_LANG_PYTHON);
  CHECK((uint64_t)it.i == UINT64_MAX);
  CHECK_EQ(it.n, 2);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_BACKREF);
  CHECK_EQ(it.i, 0);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_END);
  free(b.p);
#undef SHARED
}

TEST(malformed_refs) {
  /* ref f64 C, flags 0, offset 0, length 16, ndim 1 (2), name "r" */
#define REF(aux, nd, order, off, length, dim, name) \
  mk(8, H(WIRE_REF, aux, nd), W(0), W(order), W(off), W(length), W(dim), H(WIRE_STR, 0, 1), W(name))
  expect_ok(REF(WIRE_T_F64, 1, 0, 0, 16, 2, 'r'));
  expect_err(REF(WIRE_T_F64, 1, 0, 4, 16, 2, 'r'), "wire: ref offset is not a multiple of 8 at byte 16");
  expect_err(REF(WIRE_T_F64, 1, 0, 0, 24, 2, 'r'),
             "wire: ref length 24 does not match its shape (2 elements of 8 bytes) at byte 16");
  expect_err(REF(WIRE_T_F64, 1, 3, 0, 16, 2, 'r'), "wire: ref order 3 (0 = C, 1 = F) at byte 24");
  expect_err(REF(0x42, 1, 0, 0, 16, 2, 'r'), "wire: bad ref kind 0x42 at byte 9");
  /* a channel endpoint (kind 0x41): no shape, order or offset; its length is the side, 0 or 1 */
  expect_ok(mk(7, H(WIRE_REF, WIRE_REF_CHAN, 0), W(7), W(0), W(0), W(1), H(WIRE_STR, 0, 1), W('r')));
  expect_err(REF(WIRE_REF_CHAN, 1, 0, 0, 16, 2, 'r'), "wire: channel ref with a shape, order or offset at byte 16");
  expect_err(mk(7, H(WIRE_REF, WIRE_REF_CHAN, 0), W(7), W(0), W(0), W(2), H(WIRE_STR, 0, 1), W('r')),
             "wire: channel ref side is not 0 (sending) or 1 (receiving) at byte 16");
  expect_err(REF(WIRE_REF_BYTES, 1, 0, 0, 16, 2, 'r'), "wire: untyped ref with a shape or order at byte 16");
  expect_err(REF(WIRE_T_F64, 1, 0, 0, 16, 2, 0), "wire: ref region name contains a NUL byte at byte 16");
  expect_err(REF(WIRE_T_F64, 1, 0, UINT64_C(1) << 48, 16, 2, 'r'),
             "wire: ref offset or length exceeds 2^48-1 at byte 16");
  expect_err(mk(6, H(WIRE_REF, WIRE_REF_WIRE, 0), W(0), W(0), W(0), W(12), H(WIRE_STR, 0, 0)),
             "wire: ref region name of 0 bytes (1..255) at byte 16");
  expect_err(mk(7, H(WIRE_REF, WIRE_REF_WIRE, 0), W(0), W(0), W(0), W(12), H(WIRE_STR, 0, 1), W('r')),
             "wire: wire ref length is not a positive multiple of 8 at byte 16");
  expect_err(mk(7, H(WIRE_REF, WIRE_T_I32, 0), W(0), W(0), W(0), W(6), H(WIRE_STR, 0, 1), W('r')),
             "wire: ref length is not a multiple of the element size at byte 16");
  expect_err(mk(1, H(WIRE_REF, WIRE_T_I32, 65)), "wire: ref with 65 dimensions (max 64) at byte 10");
  expect_err(mk(3, H(WIRE_REF, WIRE_T_I32, 0), W(0), W(0)),
             "wire: truncated: ref needs 32 bytes of fields, 16 remain at byte 8");
  /* a 256-byte name */
  unsigned char *b = malloc(8 + 40 + 8 + 256);
  size_t n = 8 + 40 + 8 + 256;
  memcpy(b, "SUIRO\x01\0\0", 8);
  uint64_t f[5] = { H(WIRE_REF, WIRE_REF_BYTES, 0), 0, 0, 0, 0 }, sh = H(WIRE_STR, 0, 256);
  memcpy(b + 8, f, 40);
  memcpy(b + 48, &sh, 8);
  memset(b + 56, 'n', 256);
  expect_err((mbuf){ b, n }, "wire: ref region name of 256 bytes (1..255) at byte 16");
#undef REF
}

TEST(depth_limit) {
  /* 64 levels are fine (depth_64 vector); a value at depth 65 is refused, reader and writer */
  size_t len = 8 + 8 * 65;
  unsigned char *b = malloc(len);
  memcpy(b, "SUIRO\x01\0\0", 8);
  for (int i = 0; i < 64; i++) {
    uint64_t h = H(WIRE_LIST, 0, 1);
    memcpy(b + 8 + 8 * i, &h, 8);
  }
  uint64_t nil = H(WIRE_NIL, 0, 0);
  memcpy(b + 8 + 8 * 64, &nil, 8);
  expect_err(mdup(b, len), "wire: nesting deeper than 64 levels at byte 520");
  /* the innermost list empty instead: 64 levels, fine */
  uint64_t empty = H(WIRE_LIST, 0, 0);
  memcpy(b + 8 + 8 * 63, &empty, 8);
  expect_ok(mdup(b, len - 8));
  /* 10000 nested lists: refused at level 65, no recursion anywhere */
  size_t blen = 8 + 8 * 10000;
  unsigned char *deep = malloc(blen);
  memcpy(deep, "SUIRO\x01\0\0", 8);
  for (int i = 0; i < 10000; i++) {
    uint64_t h = H(WIRE_LIST, 0, 1);
    memcpy(deep + 8 + 8 * i, &h, 8);
  }
  expect_err((mbuf){ deep, blen }, "wire: nesting deeper than 64 levels at byte 520");
  free(b);

  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  for (int i = 0; i < 64; i++) CHECK_OK(suiro_wire_put_list(&w, 1));
  CHECK_EQ(suiro_wire_put_nil(&w), WIRE_ERR);
  CHECK(strstr(suiro_wire_writer_error(&w), "at depth 65") != NULL);
  suiro_wire_writer_reset(&w);
  for (int i = 0; i < 63; i++) CHECK_OK(suiro_wire_put_list(&w, 1));
  CHECK_OK(suiro_wire_put_list(&w, 0));
  const void *p;
  CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
  CHECK_EQ(suiro_wire_validate(p, len, NULL, 0), WIRE_OK);
  suiro_wire_writer_free(&w);
}

/* ---- writer --------------------------------------------------------------------------------- */

static void writer_err(suiro_wire_writer *w, const char *want) {
  const void *p;
  size_t len;
  CHECK_EQ(suiro_wire_writer_finish(w, &p, &len), WIRE_ERR);
  if (!strstr(suiro_wire_writer_error(w), want)) fprintf(stderr, "got '%s', want '%s'\n", suiro_wire_writer_error(w), want);
  CHECK(strstr(suiro_wire_writer_error(w), want) != NULL);
  CHECK(strncmp(suiro_wire_writer_error(w), "wire: ", 6) == 0);
  CHECK(strcmp(suiro_last_error(), suiro_wire_writer_error(w)) == 0);
  suiro_wire_writer_reset(w);
}

TEST(writer_misuse) {
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  writer_err(&w, "no value written");
  suiro_wire_put_nil(&w), suiro_wire_put_nil(&w);
  writer_err(&w, "a nil put after the top-level value is complete");
  suiro_wire_put_list(&w, 2), suiro_wire_put_nil(&w);
  writer_err(&w, "unfinished list at depth 1: 1 items still to come");
  suiro_wire_put_dict(&w, 1), suiro_wire_put_i64(&w, 1);
  writer_err(&w, "a dict key is an integer (keys are strings)");
  suiro_wire_put_strs(&w, 2), suiro_wire_strs_add(&w, "a", 1);
  writer_err(&w, "unfinished strs: 1 strings still to add");
  suiro_wire_put_list(&w, 2), suiro_wire_put_strs(&w, 1), suiro_wire_put_nil(&w);
  writer_err(&w, "a nil put while a strs still needs 1 strings");
  suiro_wire_put_factor(&w, 0, 0, 1), suiro_wire_strs_add_na(&w);
  writer_err(&w, "NA factor level");
  suiro_wire_put_frame(&w, 1, 3), suiro_wire_put_str(&w, "x", 1), suiro_wire_put_array(&w, WIRE_T_F64, 2);
  writer_err(&w, "frame column has 2 rows, the frame has 3");
  suiro_wire_put_frame(&w, 1, 0), suiro_wire_put_str(&w, "x", 1), suiro_wire_put_nil(&w);
  writer_err(&w, "a data frame column is nil");
  suiro_wire_put_call(&w, WIRE_CALL_NAME, WIRE_CSTR("f")), suiro_wire_put_dict(&w, 0);
  writer_err(&w, "a call spec's arguments are a dict (they are a list)");
  suiro_wire_put_call(&w, WIRE_CALL_NAME, WIRE_CSTR(""));
  writer_err(&w, "call with an empty target name");
  suiro_wire_put_bool(&w, 2);
  writer_err(&w, "bool value 2");
  CHECK(suiro_wire_put_array(&w, 9, 1) == NULL);
  writer_err(&w, "array of unknown element type 9");
  CHECK(suiro_wire_put_array(&w, WIRE_T_F64, UINT64_C(1) << 48) == NULL);
  writer_err(&w, "array of 281474976710656 elements");
  CHECK(suiro_wire_put_ndarray(&w, WIRE_T_F64, 2, 0, NULL) == NULL);
  writer_err(&w, "ndarray order 2");
  uint64_t dims[65] = { UINT64_C(1) << 30, UINT64_C(1) << 30 };
  CHECK(suiro_wire_put_ndarray(&w, WIRE_T_F64, 0, 2, dims) == NULL);
  writer_err(&w, "ndarray shape exceeds");
  CHECK(suiro_wire_put_date(&w, WIRE_T_U8, 1) == NULL);
  writer_err(&w, "date of element type 5");
  CHECK(suiro_wire_put_timestamp(&w, WIRE_T_I64, 7, WIRE_CSTR(""), 1) == NULL);
  writer_err(&w, "timestamp unit 7");
  suiro_wire_put_error(&w, WIRE_CSTR("c"), WIRE_CSTR("m"), WIRE_CSTR(""), -5);
  writer_err(&w, "error element index -5");
  suiro_wire_put_ref(&w, &(suiro_wire_ref){ WIRE_CSTR("r"), 0, 3, 8, WIRE_T_F64, 0, 0, NULL });
  writer_err(&w, "ref offset is not a multiple of 8");
  suiro_wire_strs_add(&w, "a", 1);
  writer_err(&w, "suiro_wire_strs_add without an open strs");
  suiro_wire_put_list(&w, 1), suiro_wire_put_dict(&w, 1);
  writer_err(&w, "unfinished dict at depth 2: 2 items still to come");
  suiro_wire_put_call(&w, WIRE_CALL_SOURCE, WIRE_CSTR("x")), suiro_wire_put_list(&w, 0);
  writer_err(&w, "unfinished call at depth 1: 1 items still to come");
  suiro_wire_put_frame(&w, 2, 0);
  writer_err(&w, "unfinished frame at depth 1: 4 items still to come");
  suiro_wire_put_func(&w, WIRE_LANG_R, 3, 2), suiro_wire_put_nil(&w);
  writer_err(&w, "unfinished function at depth 1: 1 items still to come");
  CHECK(suiro_wire_put_ndarray(&w, 0, 0, 0, NULL) == NULL);
  writer_err(&w, "ndarray of unknown element type 0");
  CHECK(suiro_wire_put_ndarray(&w, WIRE_T_U8, 0, 65, dims) == NULL);
  writer_err(&w, "ndarray with 65 dimensions (max 64)");
  suiro_wire_put_frame(&w, 1, UINT64_C(1) << 48);
  writer_err(&w, "frame of 1 columns x 281474976710656 rows (max 2^48-1)");
  CHECK(suiro_wire_put_factor(&w, 1, 2, 1) == NULL);
  writer_err(&w, "factor ordered flag 2 (0 or 1)");
  CHECK(suiro_wire_put_factor(&w, 1, 0, UINT64_C(1) << 48) == NULL);
  writer_err(&w, "factor of 1 codes, 281474976710656 levels (max 2^48-1)");
  CHECK(suiro_wire_put_date(&w, WIRE_T_I32, UINT64_C(1) << 48) == NULL);
  writer_err(&w, "date of 281474976710656 elements (max 2^48-1)");
  CHECK(suiro_wire_put_timestamp(&w, WIRE_T_I32, 0, WIRE_CSTR(""), 1) == NULL);
  writer_err(&w, "timestamp of element type 4 (i64 or f64)");
  CHECK(suiro_wire_put_timestamp(&w, WIRE_T_F64, 0, WIRE_CSTR(""), UINT64_C(1) << 48) == NULL);
  writer_err(&w, "timestamp of 281474976710656 elements (max 2^48-1)");
  suiro_wire_put_ref(&w, &(suiro_wire_ref){ WIRE_CSTR("r"), 0, 0, 8, 9, 0, 0, NULL });
  writer_err(&w, "ref of unknown kind 9");
  suiro_wire_put_str(&w, "x", UINT64_C(1) << 48);
  writer_err(&w, "str of 281474976710656 bytes (max 2^48-1)");
  suiro_wire_put_list(&w, 1), suiro_wire_put_backref(&w, 1);
  writer_err(&w, "back-reference to container 1, only 1 so far");
  suiro_wire_put_func(&w, WIRE_LANG_LUA, 0, 1), suiro_wire_put_nil(&w);
  writer_err(&w, "a function's name is nil (a string: it is called by name)");
  suiro_wire_put_func(&w, WIRE_LANG_LUA, 5, 0);
  writer_err(&w, "function with 0 children");
  suiro_wire_put_func(&w, 9, 5, 1);
  writer_err(&w, "function language 9");
  /* the header flag follows the back-references */
  {
    const void *p;
    size_t len;
    suiro_wire_put_list(&w, 1), suiro_wire_put_backref(&w, 0);
    CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
    CHECK_EQ(((const unsigned char *)p)[6], WIRE_HDR_BACKREFS);
    suiro_wire_writer_reset(&w);
    suiro_wire_put_list(&w, 1), suiro_wire_put_nil(&w);
    CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
    CHECK_EQ(((const unsigned char *)p)[6], 0);
    suiro_wire_writer_reset(&w);
  }
  for (int i = 0; i < 65; i++) suiro_wire_put_list(&w, 1);
  writer_err(&w, "values nest at most 64 deep");
  /* errors are sticky: later puts fail, nothing is written after the first error */
  suiro_wire_put_list(&w, 1);
  suiro_wire_put_bool(&w, 7);
  CHECK_EQ(suiro_wire_put_nil(&w), WIRE_ERR);
  CHECK_EQ(suiro_wire_put_i64(&w, 1), WIRE_ERR);
  CHECK(suiro_wire_put_array(&w, WIRE_T_F64, 1) == NULL);
  writer_err(&w, "bool value 7");
  /* after reset the writer works again */
  suiro_wire_put_i64(&w, 3);
  const void *p;
  size_t len;
  CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
  CHECK_EQ(len, 16);
  suiro_wire_writer_free(&w);
}

TEST(writer_growth) {
  /* the same value through a tiny stack buffer, a roomy one, and no buffer: identical bytes */
  const size_t caps[] = { 0, 8, 13, 64, 1 << 20 };
  unsigned char *first = NULL;
  size_t first_len = 0;
  for (int c = 0; c < 5; c++) {
    unsigned char *mem = caps[c] ? malloc(caps[c] + 1) : NULL;
    suiro_wire_writer w;
    suiro_wire_writer_init(&w, mem ? mem + 1 : NULL, caps[c]); /* misaligned on purpose */
    suiro_wire_put_list(&w, 3);
    double *d = suiro_wire_put_array(&w, WIRE_T_F64, 50000);
    CHECK(d != NULL);
    CHECK(((uintptr_t)d & 7) == 0);
    for (int i = 0; i < 50000; i++) d[i] = i * 0.5;
    suiro_wire_put_strs(&w, 1000);
    for (int i = 0; i < 1000; i++) suiro_wire_strs_add(&w, "abcdefghijk", (size_t)(i % 12));
    suiro_wire_put_str(&w, "tail", 4);
    const void *p;
    size_t len;
    CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
    CHECK_EQ(suiro_wire_validate(p, len, NULL, 0), WIRE_OK);
    if (!first) {
      first = dup_exact(p, len);
      first_len = len;
    } else {
      CHECK(len == first_len && memcmp(p, first, len) == 0);
    }
    if (caps[c] == (1 << 20)) CHECK(w.heap == NULL);
    else CHECK(w.heap != NULL);
    /* reset keeps the grown buffer and produces the same bytes again */
    suiro_wire_writer_reset(&w);
    suiro_wire_put_i64(&w, -3);
    CHECK_OK(suiro_wire_writer_finish(&w, &p, &len));
    CHECK_EQ(len, 16);
    suiro_wire_writer_free(&w);
    free(mem);
  }
  free(first);
}

TEST(speed_small_values) {
  /* the hot path: encode (1, 2.5) and decode it, with no heap */
  _Alignas(8) unsigned char stack[256];
  const int N = 2000000;
  double t0 = suiro_now();
  int64_t sum = 0;
  for (int i = 0; i < N; i++) {
    suiro_wire_writer w;
    const void *p;
    size_t len;
    suiro_wire_writer_init(&w, stack, sizeof stack);
    suiro_wire_put_list(&w, 2);
    suiro_wire_put_i64(&w, i);
    suiro_wire_put_f64(&w, 2.5);
    if (suiro_wire_writer_finish(&w, &p, &len) != WIRE_OK) CHECK(0);
    suiro_wire_reader r;
    suiro_wire_item a, b, c;
    if (suiro_wire_reader_init(&r, p, len) || suiro_wire_next(&r, &a) || suiro_wire_next(&r, &b) || suiro_wire_next(&r, &c))
      CHECK(0);
    sum += b.i + (int64_t)c.f;
  }
  double per = (suiro_now() - t0) / N * 1e9;
  printf("  encode+decode of (i, 2.5): %.1f ns\n", per);
  CHECK_EQ(sum, (int64_t)N * (N - 1) / 2 + 2 * (int64_t)N);
  /* the figure is printed, not asserted: speed lives in bench/ (bench_core), and a loaded machine
   * made a bound here fail */
}
