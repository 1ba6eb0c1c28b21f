/* cursor.h — the shared cursor maps hand out element ranges from (see cursor.c). */
#ifndef SUIRO_CURSOR_H
#define SUIRO_CURSOR_H

#include "internal.h"

#define CURSOR_MAX_BATCH 4096u

/* A claimer's private state: the size of its last batch. */
typedef struct cursor_claimer {
  uint64_t batch;
} cursor_claimer;

/* Claims the next range [*begin, *end) of n elements shared by `runners` claimers. Batches start
 * at one element, double while plenty remains, and shrink near the end so the last elements are
 * spread over every claimer. Returns 0 when nothing is left. */
int cursor_claim(_Atomic uint64_t *cursor, uint64_t n, unsigned runners, cursor_claimer *c,
                 uint64_t *begin, uint64_t *end);

#endif
