/*
 * plan.c — map plans (suiro_bind.h, section 6): the language-neutral description of a map that its
 * creator stages at the start of the map region and every runner, in any language, reads.
 *
 * Layout of the description (suiro_map_desc):
 *   plan_hdr | function (LIST [fn]) | input: ARRAY elements, or VALUES offsets[n + 1] + buffers
 * The output area (suiro_map_output) holds the template's cells: SCALAR n cells, ARRAY n rows of
 * `width` cells, RECORD one 8-aligned column of n cells per field.
 *
 * Trust: the plan lives in shared memory that the creator wrote. A reader copies the header once
 * (suiro_plan_of), checks every offset, length and product against the region as mapped, and
 * from then on uses only its private copy, so a later scribble cannot move it out of bounds. The
 * per-element offsets of VALUES inputs stay in shared memory and are checked at each read.
 * Ownership: the creator writes the plan before the runner tasks are published and never after
 * (but for swapping an ARRAY input between runs of a prepared map); runners only read it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "pool.h"
#include "suiro_bind.h"

#define PLAN_MAGIC 0x6e616c706f727573ull /* "suroplan" */

typedef struct plan_hdr {
  uint64_t magic;
  uint64_t n;
  uint64_t fn_off, fn_len;
  uint64_t in_off, in_len;   /* ARRAY: elements; VALUES: offsets then buffers (in_len: buffers) */
  int64_t start, step;
  uint32_t in_kind, in_type;
  uint32_t seeded, has_tpl;
  uint64_t seed;
  uint64_t index_base;       /* random streams: (seed, index_base + i) */
  uint64_t width;            /* SCALAR 1, ARRAY cells per element */
  uint64_t col_off[SUIRO_TEMPLATE_MAX_FIELDS]; /* RECORD: column offsets in the output area */
  uint64_t out_bytes;
  suiro_template tpl;
} plan_hdr;

struct suiro_plan {
  plan_hdr h;                /* private, validated copy */
  suiro_map *map;
  char *desc;                /* the shared description */
  size_t desc_bytes;
};

static size_t align8(size_t x) { return (x + 7) & ~(size_t)7; }

static int numeric_type(int t) { return t >= WIRE_T_F64 && t <= WIRE_T_BOOL; }

void suiro_plan_spec_init(suiro_plan_spec *s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  s->size = sizeof *s;
}

/* ---- templates ------------------------------------------------------------------------------ */

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static int add_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

int suiro_template_check(const suiro_template *t, uint64_t *width, char *err, size_t errcap) {
  if (!err) errcap = 0;
  if (!t) {
    if (errcap) snprintf(err, errcap, "template: the template is NULL");
    return -1;
  }
  uint64_t w = 1;
  switch (t->kind) {
  case SUIRO_OUT_SCALAR:
    if (!numeric_type(t->type)) goto badtype;
    break;
  case SUIRO_OUT_ARRAY:
    if (!numeric_type(t->type)) goto badtype;
    if (t->ndim < 1 || t->ndim > SUIRO_TEMPLATE_MAX_NDIM) {
      snprintf(err, errcap, "template: an array cell has 1..%d dimensions, got %d", SUIRO_TEMPLATE_MAX_NDIM, t->ndim);
      return -1;
    }
    for (int k = 0; k < t->ndim; k++) {
      if (t->shape[k] < 1 || !mul_ok(w, t->shape[k], &w) || w > (UINT64_C(1) << 31)) {
        snprintf(err, errcap, "template: array cells of %llu x ... elements are too large (at most 2^31 per element)",
                 (unsigned long long)t->shape[k]);
        return -1;
      }
    }
    break;
  case SUIRO_OUT_RECORD:
    if (t->nfields < 1 || t->nfields > SUIRO_TEMPLATE_MAX_FIELDS) {
      snprintf(err, errcap, "template: a record has 1..%d fields, got %d", SUIRO_TEMPLATE_MAX_FIELDS, t->nfields);
      return -1;
    }
    for (int k = 0; k < t->nfields; k++) {
      const char *nm = t->fields[k].name;
      if (!memchr(nm, 0, sizeof t->fields[k].name) || !nm[0]) {
        snprintf(err, errcap, "template: record field %d needs a name of 1..%d bytes", k + 1, SUIRO_TEMPLATE_NAME_MAX);
        return -1;
      }
      if (!numeric_type(t->fields[k].type)) {
        snprintf(err, errcap, "template: record field \"%s\" must be f64, f32, i64, i32, u8 or bool", nm);
        return -1;
      }
      for (int j = 0; j < k; j++)
        if (strcmp(t->fields[j].name, nm) == 0) {
          snprintf(err, errcap, "template: record field \"%s\" appears twice", nm);
          return -1;
        }
    }
    break;
  default:
    snprintf(err, errcap, "template: unknown kind %d (a scalar, an array or a record)", t->kind);
    return -1;
  }
  if (width) *width = w;
  return 0;
badtype:
  snprintf(err, errcap, "template: the element type must be f64, f32, i64, i32, u8 or bool, got %s",
           suiro_wire_type_name(t->type) ? suiro_wire_type_name(t->type) : "an unknown type");
  return -1;
}

/* Output bytes of n elements under a checked template, 0 with err set on overflow. */
static int output_bytes(const suiro_template *t, uint64_t n, uint64_t width, uint64_t *col_off, uint64_t *bytes) {
  uint64_t total = 0, b;
  if (!t) {
    *bytes = 0;
    return 0;
  }
  if (t->kind == SUIRO_OUT_RECORD) {
    for (int k = 0; k < t->nfields; k++) {
      col_off[k] = total;
      if (!mul_ok(n, suiro_wire_type_size(t->fields[k].type), &b) || !add_ok(total, b, &total) || total > UINT64_MAX - 8)
        return -1;
      total = align8(total);
    }
  } else {
    if (!mul_ok(n, width, &b) || !mul_ok(b, suiro_wire_type_size(t->type), &total)) return -1;
  }
  *bytes = total;
  return 0;
}

/* Free bytes where a map's region can go: /dev/shm, or the fallback directory when /dev/shm lacks
 * the room (region.c); UINT64_MAX when unknown. */
static uint64_t shm_free_bytes(uint64_t need) {
  uint64_t room = region_dir_free("/dev/shm");
  if (room != UINT64_MAX && room < need) {
    const char *d = region_fallback_dir();
    if (*d && strcmp(d, "off") != 0) {
      uint64_t fb = region_dir_free(d);
      if (fb != UINT64_MAX && fb > room) room = fb;
    }
  }
  return room;
}

#define human region_human

/* ---- creating ------------------------------------------------------------------------------- */

suiro_status suiro_plan_create(suiro_pool *p, const suiro_plan_spec *s, suiro_map **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_plan_create: out (argument 3) is NULL");
  *out = NULL;
  char err[256];
  if (!p) return suiro_set_error(SUIRO_ERR, "map: pool is NULL");
  if (!s || s->size != sizeof *s) return suiro_set_error(SUIRO_ERR, "map: spec not initialised with suiro_plan_spec_init");
  if (!s->fn || s->fn_len < 8 || s->fn_len % 8)
    return suiro_set_error(SUIRO_ERR, "map: the function must be a wire buffer holding a list of one item");
  if (suiro_wire_validate(s->fn, s->fn_len, err, sizeof err) != WIRE_OK)
    return suiro_set_error(SUIRO_ERR, "map: the function's buffer is malformed: %s", err);
  plan_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = PLAN_MAGIC;
  h.n = s->n;
  h.in_kind = (uint32_t)s->in_kind;
  uint64_t in_bytes = 0, offs_bytes = 0;
  switch (s->in_kind) {
  case SUIRO_IN_ARRAY:
    if (!numeric_type(s->in_type))
      return suiro_set_error(SUIRO_ERR, "map: an input array must be f64, f32, i64, i32, u8 or bool, got %s",
                             suiro_wire_type_name(s->in_type) ? suiro_wire_type_name(s->in_type) : "an unknown type");
    if (!mul_ok(s->n, suiro_wire_type_size(s->in_type), &in_bytes))
      return suiro_set_error(SUIRO_ERR, "map: %llu input elements overflow", (unsigned long long)s->n);
    if (in_bytes && !s->in_data) return suiro_set_error(SUIRO_ERR, "map: input data is NULL");
    h.in_type = (uint32_t)s->in_type;
    break;
  case SUIRO_IN_RANGE: {
    if (s->step == 0 && s->n > 1) return suiro_set_error(SUIRO_ERR, "map: a range's step must not be 0");
    int64_t last;
    if (s->n > 0 && (s->n - 1 > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)(s->n - 1), s->step, &last) ||
                     __builtin_add_overflow(s->start, last, &last)))
      return suiro_set_error(SUIRO_ERR, "map: a range of %llu elements from %lld by %lld leaves the 64-bit integers",
                             (unsigned long long)s->n, (long long)s->start, (long long)s->step);
    h.start = s->start;
    h.step = s->step;
    break;
  }
  case SUIRO_IN_VALUES: {
    if (s->n >= (UINT64_C(1) << 56) || !s->in_offsets) return suiro_set_error(SUIRO_ERR, "map: value offsets are missing");
    offs_bytes = (s->n + 1) * 8;
    const uint64_t *o = s->in_offsets;
    if (o[0] != 0 || o[s->n] != s->in_len) return suiro_set_error(SUIRO_ERR, "map: value offsets do not span the data");
    for (uint64_t i = 0; i < s->n; i++)
      if (o[i + 1] < o[i] + 8 || o[i + 1] % 8)
        return suiro_set_error(SUIRO_ERR, "map: element %llu's buffer is not a whole, aligned wire buffer",
                               (unsigned long long)i + 1);
    in_bytes = s->in_len;
    break;
  }
  default:
    return suiro_set_error(SUIRO_ERR, "map: unknown input kind %d", s->in_kind);
  }
  uint64_t width = 1;
  if (s->tpl) {
    if (suiro_template_check(s->tpl, &width, err, sizeof err) != 0) return suiro_set_error(SUIRO_ERR, "map: %s", err);
    h.tpl = *s->tpl;
    h.has_tpl = 1;
  }
  h.width = width;
  if (output_bytes(s->tpl, s->n, width, h.col_off, &h.out_bytes) != 0)
    return suiro_set_error(SUIRO_ERR, "map: the output of %llu elements overflows 64 bits", (unsigned long long)s->n);
  h.seeded = s->seeded ? 1 : 0;
  h.seed = s->seed;
  h.index_base = s->index_base;
  /* description layout */
  uint64_t desc;
  h.fn_off = align8(sizeof h);
  h.fn_len = s->fn_len;
  h.in_off = h.fn_off + align8(s->fn_len);
  h.in_len = in_bytes;
  if (!add_ok(h.in_off, offs_bytes, &desc) || !add_ok(desc, in_bytes, &desc) || desc > UINT64_MAX / 4)
    return suiro_set_error(SUIRO_ERR, "map: the input is too large");
  desc = align8(desc);
  /* Every dense part must fit in /dev/shm: refuse up front rather than fault on a sparse region. */
  uint64_t slots = s->tpl ? 0 : s->n * 16, dense;
  if (!s->tpl && s->n > UINT64_MAX / 16) return suiro_set_error(SUIRO_ERR, "map: too many elements");
  if (!add_ok(desc, h.out_bytes, &dense) || !add_ok(dense, slots, &dense))
    return suiro_set_error(SUIRO_ERR, "map: the map's memory overflows 64 bits");
  uint64_t room = shm_free_bytes(dense + ((uint64_t)16 << 20));
  if (dense > room) {
    char need[32], have[32];
    human(dense, need, sizeof need);
    human(room, have, sizeof have);
    return suiro_set_error(SUIRO_ERR, "map: %llu elements need %s of shared memory; /dev/shm (or SUIRO_SHM_DIR, "
                           "the fallback directory) has %s free: make room, or set SUIRO_SHM_DIR to a directory with it",
                           (unsigned long long)s->n, need, have);
  }
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  o.n = s->n;
  o.desc_bytes = desc;
  o.out_bytes = h.out_bytes;
  o.slots = !s->tpl;
  /* the heap holds untyped results and the error message; reserved with the region, so no more
   * than the room left (and at least 1 MiB for an error message) */
  uint64_t heap = ((uint64_t)16 << 20);
  if (!s->tpl) heap += s->n * 64 + in_bytes * 2;
  if (room != UINT64_MAX && heap > room - dense) heap = room - dense;
  if (heap < ((uint64_t)1 << 20)) heap = (uint64_t)1 << 20;
  o.heap_bytes = heap;
  o.stream = s->stream;
  o.runners = s->runners;
  suiro_map *m;
  suiro_status st = suiro_map_create(p, &o, &m);
  if (st != SUIRO_OK) return st;
  char *base = suiro_map_desc(m);
  memcpy(base, &h, sizeof h);
  memcpy(base + h.fn_off, s->fn, s->fn_len);
  if (s->in_kind == SUIRO_IN_VALUES) {
    memcpy(base + h.in_off, s->in_offsets, offs_bytes);
    if (in_bytes) memcpy(base + h.in_off + offs_bytes, s->in_data, in_bytes);
  } else if (in_bytes) {
    memcpy(base + h.in_off, s->in_data, in_bytes);
  }
  *out = m;
  return SUIRO_OK;
}

/* ---- reading -------------------------------------------------------------------------------- */

void plan_free(struct suiro_plan *pl) { free(pl); }

const suiro_plan *suiro_plan_of(suiro_map *m) {
  struct suiro_plan **slot = map_plan_slot(m);
  if (!slot) return NULL; /* not a live map: the error is set */
  if (*slot) return *slot;
  size_t desc_bytes, out_bytes;
  uint64_t n;
  char *desc = map_region_parts(m, &desc_bytes, &out_bytes, &n);
  plan_hdr h;
  char err[200];
  if (!desc || desc_bytes < sizeof h) {
    suiro_set_error(SUIRO_ERR, "map: the region holds no plan");
    return NULL;
  }
  memcpy(&h, desc, sizeof h); /* private from here on */
  uint64_t end, width = 1, out_need = 0, col_off[SUIRO_TEMPLATE_MAX_FIELDS];
  const char *why = NULL;
  if (h.magic != PLAN_MAGIC) why = "bad magic";
  else if (h.n != n) why = "element count differs from the map's";
  else if (h.fn_off < sizeof h || !add_ok(h.fn_off, h.fn_len, &end) || end > desc_bytes || h.fn_len < 8 || h.fn_off % 8)
    why = "function out of bounds";
  else if (h.in_off % 8 || h.in_off > desc_bytes) why = "input out of bounds";
  else if (h.has_tpl && suiro_template_check(&h.tpl, &width, err, sizeof err) != 0) why = err;
  else if (h.has_tpl && (width != h.width || output_bytes(&h.tpl, n, width, col_off, &out_need) != 0 ||
                         out_need != h.out_bytes || out_need > out_bytes ||
                         memcmp(col_off, h.col_off, sizeof(uint64_t) * (h.tpl.kind == SUIRO_OUT_RECORD ? (size_t)h.tpl.nfields : 0))))
    why = "output area does not match the template";
  if (!why) {
    uint64_t need;
    switch (h.in_kind) {
    case SUIRO_IN_ARRAY:
      if (!numeric_type((int)h.in_type) || !mul_ok(n, suiro_wire_type_size((int)h.in_type), &need) || need != h.in_len ||
          !add_ok(h.in_off, need, &end) || end > desc_bytes)
        why = "input array out of bounds";
      break;
    case SUIRO_IN_RANGE: {
      int64_t last;
      if (n > 0 && (n - 1 > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)(n - 1), h.step, &last) ||
                    __builtin_add_overflow(h.start, last, &last)))
        why = "range overflows";
      break;
    }
    case SUIRO_IN_VALUES:
      if (n >= (UINT64_C(1) << 56) || !add_ok(h.in_off, (n + 1) * 8, &end) || !add_ok(end, h.in_len, &end) ||
          end > desc_bytes)
        why = "input values out of bounds";
      break;
    default: why = "unknown input kind";
    }
  }
  if (why) {
    suiro_set_error(SUIRO_ERR, "map: the plan is damaged (%s)", why);
    return NULL;
  }
  struct suiro_plan *pl = malloc(sizeof *pl);
  if (!pl) {
    suiro_set_error(SUIRO_ERR, "out of memory");
    return NULL;
  }
  pl->h = h;
  pl->map = m;
  pl->desc = desc;
  pl->desc_bytes = desc_bytes;
  *slot = pl;
  return pl;
}

/* Plans come from suiro_plan_of, which answers NULL (with a message) for a map without a valid
 * plan: the accessors take NULL for "no plan" rather than reading through it. */
uint64_t suiro_plan_size(const suiro_plan *pl) { return pl ? pl->h.n : 0; }
int suiro_plan_in_kind(const suiro_plan *pl) { return pl ? (int)pl->h.in_kind : 0; }
int suiro_plan_in_type(const suiro_plan *pl) { return pl ? (int)pl->h.in_type : 0; }
const suiro_template *suiro_plan_template(const suiro_plan *pl) { return pl && pl->h.has_tpl ? &pl->h.tpl : NULL; }

void suiro_plan_fn(const suiro_plan *pl, const void **buf, size_t *len) {
  if (!buf || !len) return;
  if (!pl) {
    *buf = NULL;
    *len = 0;
    return;
  }
  *buf = pl->desc + pl->h.fn_off;
  *len = pl->h.fn_len;
}

uint64_t suiro_plan_index_base(const suiro_plan *pl) { return pl ? pl->h.index_base : 0; }

void *suiro_plan_in_data(const suiro_plan *pl) {
  return pl && pl->h.in_kind == SUIRO_IN_ARRAY ? pl->desc + pl->h.in_off : NULL;
}

int suiro_plan_elem(const suiro_plan *pl, uint64_t i, suiro_elem *e) {
  if (!pl || !e) return suiro_set_error(SUIRO_ERR, "suiro_plan_elem: %s is NULL", !pl ? "the plan" : "e"), -1;
  const plan_hdr *h = &pl->h;
  memset(e, 0, sizeof *e);
  if (i >= h->n) return suiro_set_error(SUIRO_ERR, "map: element %llu is out of range", (unsigned long long)i + 1), -1;
  const char *in = pl->desc + h->in_off;
  switch (h->in_kind) {
  case SUIRO_IN_ARRAY:
    switch (h->in_type) {
    case WIRE_T_F64: e->kind = 'f'; memcpy(&e->f, in + i * 8, 8); return 0;
    case WIRE_T_F32: { float v; memcpy(&v, in + i * 4, 4); e->kind = 'f'; e->f = v; return 0; }
    case WIRE_T_I64: e->kind = 'i'; memcpy(&e->i, in + i * 8, 8); return 0;
    case WIRE_T_I32: { int32_t v; memcpy(&v, in + i * 4, 4); e->kind = 'i'; e->i = v; return 0; }
    case WIRE_T_U8: e->kind = 'i'; e->i = ((const uint8_t *)in)[i]; return 0;
    case WIRE_T_BOOL: {
      uint8_t v = ((const uint8_t *)in)[i];
      e->kind = 'b';
      e->i = v == 0 || v == 1 ? v : WIRE_NA_BOOL;
      return 0;
    }
    }
    break;
  case SUIRO_IN_RANGE:
    e->kind = 'i';
    e->i = (int64_t)((uint64_t)h->start + i * (uint64_t)h->step); /* checked at creation: no overflow */
    return 0;
  case SUIRO_IN_VALUES: {
    const _Atomic uint64_t *offs = (const _Atomic uint64_t *)(const void *)in;
    uint64_t a = ld_rlx(&offs[i]), b = ld_rlx(&offs[i + 1]);
    if (a > b || b > h->in_len || a % 8 || b % 8 || b - a < 8)
      return suiro_set_error(SUIRO_ERR, "map: element %llu's buffer is out of bounds", (unsigned long long)i + 1), -1;
    e->kind = 'v';
    e->buf = in + (h->n + 1) * 8 + a;
    e->len = (size_t)(b - a);
    return 0;
  }
  }
  return suiro_set_error(SUIRO_ERR, "map: the plan's input is damaged"), -1;
}

void suiro_plan_enter(const suiro_plan *pl, uint64_t i) {
  if (!pl) return;
  map_runner_at(pl->map, i);
  if (pl->h.seeded) rng_enter(pl->h.seed, pl->h.index_base + i);
}
void suiro_plan_leave(void) { rng_leave(); }

void plan_runner_fast(const suiro_plan *pl, runner_fast *f) {
  const plan_hdr *h = &pl->h;
  f->in = pl->desc + h->in_off;
  f->in_kind = h->in_kind;
  f->in_type = h->in_type;
  f->start = h->start;
  f->step = h->step;
  f->seeded = (int)h->seeded;
  f->seed = h->seed;
  f->index_base = h->index_base;
}

void *suiro_plan_cell(const suiro_plan *pl, void *out, uint64_t i, int k, int *type) {
  if (!pl || !out || !type) return NULL;
  const plan_hdr *h = &pl->h;
  if (!h->has_tpl || i >= h->n) return NULL;
  if (h->tpl.kind == SUIRO_OUT_RECORD) {
    if (k < 0 || k >= h->tpl.nfields) return NULL;
    int t = h->tpl.fields[k].type;
    if (type) *type = t;
    return (char *)out + h->col_off[k] + i * suiro_wire_type_size(t);
  }
  if (k != 0) return NULL;
  if (type) *type = h->tpl.type;
  return (char *)out + i * h->width * suiro_wire_type_size(h->tpl.type);
}

const void *suiro_plan_column(const suiro_plan *pl, const void *out, int k, uint64_t *count) {
  if (count) *count = 0;
  if (!pl || !out || !count) return NULL;
  const plan_hdr *h = &pl->h;
  if (!h->has_tpl) return NULL;
  if (h->tpl.kind == SUIRO_OUT_RECORD) {
    if (k < 0 || k >= h->tpl.nfields) return NULL;
    if (count) *count = h->n;
    return (const char *)out + h->col_off[k];
  }
  if (k != 0) return NULL;
  if (count) *count = h->n * h->width;
  return out;
}

/* ---- cells ---------------------------------------------------------------------------------- */

static int cell_fail(char *err, size_t cap, int type, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int cell_fail(char *err, size_t cap, int type, const char *fmt, ...) {
  if (err && cap) {
    int n = snprintf(err, cap, "template %s cannot hold ", suiro_wire_type_name(type) ? suiro_wire_type_name(type) : "?");
    if (n >= 0 && (size_t)n < cap) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, cap - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

int suiro_cell_put_int(void *cell, int type, int64_t v, char *err, size_t errcap) {
  if (!cell) return cell_fail(err, errcap, type, "anything (the cell is NULL)");
  switch (type) {
  case WIRE_T_F64: { double d = (double)v; memcpy(cell, &d, 8); return 0; }
  case WIRE_T_F32: { float f = (float)v; memcpy(cell, &f, 4); return 0; }
  case WIRE_T_I64: memcpy(cell, &v, 8); return 0;
  case WIRE_T_I32:
    if (v < INT32_MIN || v > INT32_MAX) return cell_fail(err, errcap, type, "%lld", (long long)v);
    { int32_t x = (int32_t)v; memcpy(cell, &x, 4); }
    return 0;
  case WIRE_T_U8:
    if (v < 0 || v > 255) return cell_fail(err, errcap, type, "%lld", (long long)v);
    *(uint8_t *)cell = (uint8_t)v;
    return 0;
  case WIRE_T_BOOL: return cell_fail(err, errcap, type, "the integer %lld", (long long)v);
  }
  return cell_fail(err, errcap, type, "a value");
}

int suiro_cell_put_real(void *cell, int type, double v, char *err, size_t errcap) {
  if (!cell) return cell_fail(err, errcap, type, "anything (the cell is NULL)");
  switch (type) {
  case WIRE_T_F64: memcpy(cell, &v, 8); return 0;
  case WIRE_T_F32: { float f = (float)v; memcpy(cell, &f, 4); return 0; }
  case WIRE_T_I64:
  case WIRE_T_I32:
  case WIRE_T_U8:
    /* integral and inside int64 (-2^63 <= v < 2^63), then the integer rules */
    if (v != v || v != floor(v) || v < -0x1p63 || v >= 0x1p63) return cell_fail(err, errcap, type, "%.17g", v);
    return suiro_cell_put_int(cell, type, (int64_t)v, err, errcap) == 0 ? 0 : cell_fail(err, errcap, type, "%.17g", v);
  case WIRE_T_BOOL: return cell_fail(err, errcap, type, "the number %.17g", v);
  }
  return cell_fail(err, errcap, type, "a value");
}

int suiro_cell_put_bool(void *cell, int type, int v, char *err, size_t errcap) {
  if (!cell) return cell_fail(err, errcap, type, "anything (the cell is NULL)");
  if (type != WIRE_T_BOOL) return cell_fail(err, errcap, type, "a boolean");
  *(uint8_t *)cell = v == WIRE_NA_BOOL ? WIRE_NA_BOOL : (v != 0);
  return 0;
}

int suiro_cell_put_na(void *cell, int type, char *err, size_t errcap) {
  if (!cell) return cell_fail(err, errcap, type, "anything (the cell is NULL)");
  switch (type) {
  case WIRE_T_F64: { uint64_t b = WIRE_NA_F64_BITS; memcpy(cell, &b, 8); return 0; }
  case WIRE_T_I64: { int64_t x = WIRE_NA_I64; memcpy(cell, &x, 8); return 0; }
  case WIRE_T_I32: { int32_t x = WIRE_NA_I32; memcpy(cell, &x, 4); return 0; }
  case WIRE_T_BOOL: *(uint8_t *)cell = WIRE_NA_BOOL; return 0;
  }
  return cell_fail(err, errcap, type, "NA (it has no NA value)");
}
