/*
 * func.c — function identity (suiro_bind.h, section 3): content keys, publishing code once per
 * pool, fetching it in workers.
 *
 * Code is stored in the pool's blob store (blob.c) under its content key; tasks carry the key.
 * Each pool handle remembers the keys it published (a key index private to the handle; faces
 * use the same index for their caches), so the usual loop that sends one function again and
 * again pays one lookup. No shared
 * words here: blob.c states the ordering of the store itself.
 */
#include <stdlib.h>

#include "pool.h"
#include "suiro_bind.h"

uint64_t suiro_fn_key(const void *code, size_t len) {
  uint64_t k = suiro_hash64(code, code ? len : 0);
  return k ? k : 1;
}

/* ---- key index ------------------------------------------------------------------------------- */

static size_t slot_of(uint64_t key, size_t cap) { return (size_t)(key * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1); }

ptrdiff_t suiro_keyidx_find(const suiro_keyidx *t, uint64_t key) {
  if (!t || !t->cap || !key) return -1;
  for (size_t i = slot_of(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
    if (t->keys[i] == key) return (ptrdiff_t)t->idx[i];
    if (t->keys[i] == 0) return -1;
  }
}

ptrdiff_t suiro_keyidx_add(suiro_keyidx *t, uint64_t key) {
  if (!t || !key) return -1;
  ptrdiff_t have = suiro_keyidx_find(t, key);
  if (have >= 0) return have;
  if ((t->n + 1) * 2 > t->cap) { /* at most half full */
    size_t cap = t->cap ? t->cap * 2 : 64;
    if (cap > UINT32_MAX) return -1;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *idx = malloc(cap * sizeof *idx);
    if (!keys || !idx) {
      free(keys);
      free(idx);
      return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
      if (!t->keys[i]) continue;
      size_t j = slot_of(t->keys[i], cap);
      while (keys[j]) j = (j + 1) & (cap - 1);
      keys[j] = t->keys[i];
      idx[j] = t->idx[i];
    }
    free(t->keys);
    free(t->idx);
    t->keys = keys;
    t->idx = idx;
    t->cap = cap;
  }
  size_t j = slot_of(key, t->cap);
  while (t->keys[j]) j = (j + 1) & (t->cap - 1);
  t->keys[j] = key;
  t->idx[j] = (uint32_t)t->n;
  return (ptrdiff_t)t->n++;
}

void suiro_keyidx_free(suiro_keyidx *t) {
  if (!t) return;
  free(t->keys);
  free(t->idx);
  *t = (suiro_keyidx){ 0 };
}

/* ---- publishing and fetching ------------------------------------------------------------------ */

suiro_status suiro_fn_publish(suiro_pool *p, uint64_t key, const void *code, size_t len) {
  POOL_GUARD(p, "suiro_fn_publish", SUIRO_ERR);
  if (key == 0) return suiro_set_error(SUIRO_ERR, "fn_publish: key 0 names functions by name, not by code");
  if (suiro_keyidx_find(&p->fn_published, key) >= 0) return SUIRO_OK;
  suiro_status st = suiro_blob_put(p, key, code, len);
  /* not remembering (out of memory) costs a blob-store probe next time, nothing worse */
  if (st == SUIRO_OK) suiro_keyidx_add(&p->fn_published, key);
  return st;
}

suiro_status suiro_fn_fetch(suiro_pool *p, uint64_t key, void **code, size_t *len) {
  if (!p) return suiro_set_error(SUIRO_ERR, "fn_fetch: no pool (not in a worker?)");
  POOL_GUARD(p, "suiro_fn_fetch", SUIRO_ERR);
  return suiro_blob_get(p, key, code, len);
}

void func_forget(suiro_pool *p) { suiro_keyidx_free(&p->fn_published); }
