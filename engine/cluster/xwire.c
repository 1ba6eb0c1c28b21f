/*
 * xwire.c — wire buffers that cross hosts. Two kinds of item name something that exists on
 * one host only:
 *   FUNC  a function by its content key in the pool's blob store: rank 0 sends the code once per
 *         host (lua/lmpi.c), the host publishes it into its own pool under the same key;
 *   REF   a large value in a shared region of the sender's host: rank 0 sends the bytes once per
 *         host and the host rewrites the reference to its own copy (serve.c); results going
 *         back to rank 0 carry their large values inline (copied out of the region here).
 * A rewrite copies the buffer item by item (suiro_wire_put_item) and replaces only the REF items.
 * No shared state: every function works on the caller's buffers (engine calls are thread-safe).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

int xwire_scan(const void *buf, size_t len, void (*func)(void *ud, uint64_t key),
               void (*ref)(void *ud, const suiro_wire_ref *r), void *ud) {
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, buf, len) != WIRE_OK) return -1;
  int nref = 0, st;
  while ((st = suiro_wire_next(&r, &it)) == WIRE_OK) {
    if (it.tag == WIRE_FUNC && it.i != 0 && func) func(ud, (uint64_t)it.i);
    if (it.tag == WIRE_REF) {
      nref++;
      if (ref) ref(ud, &it.ref);
    }
  }
  return st == WIRE_END ? nref : -1;
}

int xwire_rewrite(const void *buf, size_t len, suiro_wire_writer *w,
                  int (*subst)(void *ud, const suiro_wire_ref *r, suiro_wire_writer *w), void *ud, char *err, size_t cap) {
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, buf, len) != WIRE_OK) {
    snprintf(err, cap, "%s", suiro_wire_reader_error(&r));
    return WIRE_ERR;
  }
  int st;
  while ((st = suiro_wire_next(&r, &it)) == WIRE_OK) {
    int rc = it.tag == WIRE_REF ? subst(ud, &it.ref, w) : suiro_wire_put_item(w, &it);
    if (rc != WIRE_OK) {
      if (w->status != WIRE_OK) snprintf(err, cap, "%s", suiro_wire_writer_error(w));
      else snprintf(err, cap, "a large value cannot cross hosts: %s", suiro_last_error());
      return WIRE_ERR;
    }
  }
  if (st != WIRE_END) {
    snprintf(err, cap, "%s", suiro_wire_reader_error(&r));
    return WIRE_ERR;
  }
  return WIRE_OK;
}

/* The value a WIRE_REF_WIRE reference holds, copied in; its BACKREF ordinals move by the
 * containers already written. */
static int inline_wire(suiro_wire_writer *w, const void *data, size_t bytes) {
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, data, bytes) != WIRE_OK) return WIRE_ERR;
  uint64_t base = w->ncont;
  int st;
  while ((st = suiro_wire_next(&r, &it)) == WIRE_OK) {
    if (it.tag == WIRE_BACKREF) it.i += (int64_t)base;
    if ((it.tag == WIRE_REF ? xwire_inline_ref(NULL, &it.ref, w) : suiro_wire_put_item(w, &it)) != WIRE_OK) return WIRE_ERR;
  }
  return st == WIRE_END ? WIRE_OK : WIRE_ERR;
}

int xwire_inline_ref(void *ud, const suiro_wire_ref *ref, suiro_wire_writer *w) {
  (void)ud;
  suiro_view v;
  if (suiro_zc_open(ref, &v) != SUIRO_OK) return WIRE_ERR;
  int rc = WIRE_ERR;
  if (ref->type == WIRE_REF_BYTES) {
    rc = suiro_wire_put_bytes(w, v.data, (size_t)v.bytes);
  } else if (ref->type == WIRE_REF_WIRE) {
    rc = inline_wire(w, v.data, (size_t)v.bytes);
  } else if (ref->type >= 1 && ref->type <= WIRE_T_MAX) {
    void *d = ref->ndim == 0 ? suiro_wire_put_array(w, ref->type, v.count)
                             : suiro_wire_put_ndarray(w, ref->type, ref->order, ref->ndim, ref->dims);
    if (d) {
      if (v.bytes) memcpy(d, v.data, (size_t)v.bytes);
      rc = WIRE_OK;
    }
  }
  suiro_buf_unref(v.buf); /* the grant the sender made for this message */
  return rc;
}

int xwire_inline_all(const void *buf, size_t len, void **out, size_t *outlen, char *err, size_t cap) {
  int nref = xwire_scan(buf, len, NULL, NULL, NULL);
  if (nref < 0) {
    snprintf(err, cap, "a malformed value");
    return -1;
  }
  if (nref == 0) return 0;
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  if (xwire_rewrite(buf, len, &w, xwire_inline_ref, NULL, err, cap) != WIRE_OK) {
    suiro_wire_writer_free(&w);
    return -1;
  }
  const void *p;
  size_t n;
  if (suiro_wire_writer_finish(&w, &p, &n) != WIRE_OK) {
    snprintf(err, cap, "%s", suiro_wire_writer_error(&w));
    suiro_wire_writer_free(&w);
    return -1;
  }
  void *copy = malloc(n ? n : 8);
  if (!copy) {
    suiro_wire_writer_free(&w);
    snprintf(err, cap, "out of memory");
    return -1;
  }
  memcpy(copy, p, n);
  suiro_wire_writer_free(&w);
  *out = copy;
  *outlen = n;
  return 1;
}

size_t cluster_tpl_width(const suiro_template *t) {
  size_t w = 1;
  if (t->kind == SUIRO_OUT_ARRAY)
    for (int k = 0; k < t->ndim; k++) w *= (size_t)t->shape[k];
  return w;
}

size_t cluster_tpl_elem_bytes(const suiro_template *t) {
  if (t->kind == SUIRO_OUT_RECORD) {
    size_t b = 0;
    for (int k = 0; k < t->nfields; k++) b += suiro_wire_type_size(t->fields[k].type);
    return b;
  }
  return cluster_tpl_width(t) * suiro_wire_type_size(t->type);
}

/* "element 3: ..." (1-based, as the runners write it) in a range starting at `base` becomes
 * "element <base + 3>: ...": messages name the element of the whole map. */
void cluster_fix_element(const char *msg, size_t len, uint64_t base, char *out, size_t cap, size_t *outlen) {
  unsigned long long k = 0;
  int used = 0;
  if (cap == 0) {
    *outlen = 0;
    return;
  }
  if (len > 8 && !strncmp(msg, "element ", 8) && sscanf(msg + 8, "%llu%n", &k, &used) == 1 && used > 0 &&
      (size_t)(8 + used) < len && msg[8 + used] == ':') {
    int n = snprintf(out, cap, "element %llu%.*s", k + (unsigned long long)base, (int)(len - 8 - (size_t)used),
                     msg + 8 + used);
    *outlen = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
    return;
  }
  size_t n = len < cap - 1 ? len : cap - 1;
  memcpy(out, msg, n);
  out[n] = 0;
  *outlen = n;
}
