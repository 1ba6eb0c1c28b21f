/*
 * func.c — function identity (suiro_bind.h, section 3): content keys, publishing code once per
 * pool, fetching it in workers.
 *
 * Code is stored in the pool's blob store (blob.c) under its content key; tasks carry the key.
 * Each pool handle remembers the keys it published (an open-addressing set private to the
 * handle), so the usual loop that sends one function again and again pays one lookup. No shared
 * words here: blob.c states the ordering of the store itself.
 */
#include <stdlib.h>

#include "pool.h"
#include "suiro_bind.h"

uint64_t suiro_fn_key(const void *code, size_t len) {
  uint64_t k = suiro_hash64(code, len);
  return k ? k : 1;
}

static int memo_has(const suiro_pool *p, uint64_t key) {
  if (!p->fn_cap) return 0;
  for (uint32_t i = (uint32_t)key & (p->fn_cap - 1);; i = (i + 1) & (p->fn_cap - 1)) {
    if (p->fn_keys[i] == key) return 1;
    if (p->fn_keys[i] == 0) return 0;
  }
}

static void memo_add(suiro_pool *p, uint64_t key) {
  if ((p->fn_count + 1) * 2 > p->fn_cap) {
    uint32_t cap = p->fn_cap ? p->fn_cap * 2 : 64;
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t) return; /* not remembering costs a blob-store probe next time, nothing worse */
    for (uint32_t i = 0; i < p->fn_cap; i++) {
      uint64_t k = p->fn_keys[i];
      if (!k) continue;
      uint32_t j = (uint32_t)k & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = k;
    }
    free(p->fn_keys);
    p->fn_keys = t;
    p->fn_cap = cap;
  }
  uint32_t j = (uint32_t)key & (p->fn_cap - 1);
  while (p->fn_keys[j]) j = (j + 1) & (p->fn_cap - 1);
  p->fn_keys[j] = key;
  p->fn_count++;
}

suiro_status suiro_fn_publish(suiro_pool *p, uint64_t key, const void *code, size_t len) {
  if (!p) return suiro_set_error(SUIRO_ERR, "fn_publish: pool is NULL");
  if (key == 0) return suiro_set_error(SUIRO_ERR, "fn_publish: key 0 names functions by name, not by code");
  if (memo_has(p, key)) return SUIRO_OK;
  suiro_status st = suiro_blob_put(p, key, code, len);
  if (st == SUIRO_OK) memo_add(p, key);
  return st;
}

suiro_status suiro_fn_fetch(suiro_pool *p, uint64_t key, void **code, size_t *len) {
  if (!p) return suiro_set_error(SUIRO_ERR, "fn_fetch: no pool (not in a worker?)");
  return suiro_blob_get(p, key, code, len);
}

void func_forget(suiro_pool *p) {
  free(p->fn_keys);
  p->fn_keys = NULL;
  p->fn_cap = p->fn_count = 0;
}
