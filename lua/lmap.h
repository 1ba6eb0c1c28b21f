/* lmap.h — the layout of a Lua map's description in the map region (lmap.c writes it on the
 * host, lworker.c's runner reads it). */
#ifndef LMAP_H
#define LMAP_H

#include <stdint.h>

enum { LMAP_IN_ARRAY = 1, LMAP_IN_RANGE = 2, LMAP_IN_VALUES = 3 };
enum { LMAP_OUT_VALUES = 0, LMAP_OUT_SCALAR = 1, LMAP_OUT_ARRAY = 2, LMAP_OUT_RECORD = 3 };
#define LMAP_MAX_FIELDS 32

typedef struct lmap_desc {
  uint64_t n;
  uint64_t fn_off, fn_len;   /* the function: a wire buffer holding a list of one FUNC */
  uint32_t in_kind;          /* LMAP_IN_* */
  uint32_t in_type;          /* ARRAY: wire element type */
  int64_t start, step;       /* RANGE */
  uint64_t data_off;         /* ARRAY: elements; VALUES: n + 1 offsets (u64), then the buffers */
  uint64_t data_len;
  uint32_t seeded;
  uint32_t out_kind;         /* LMAP_OUT_* */
  uint64_t seed;
  uint32_t out_type;         /* SCALAR / ARRAY: wire element type */
  uint32_t width;            /* ARRAY: elements per result */
  uint32_t nfields;          /* RECORD */
  uint32_t pad;
  uint32_t field_type[LMAP_MAX_FIELDS];
  uint64_t field_off[LMAP_MAX_FIELDS]; /* RECORD: column offsets in the output area */
  uint64_t names_off;        /* RECORD: field names, NUL-separated */
} lmap_desc;

#endif
