/*
 * error.c — error payloads (suiro_bind.h, section 2): how a failure travels between faces.
 *
 * A failed task's result is one wire ERROR value (class, message, traceback, element index). The
 * engine itself writes plain-text messages for the failures it detects (a worker that died, a
 * task cancelled before it ran), so the reader accepts both forms. No shared state. An unaligned
 * payload is parsed through a thread-local copy, but the strings returned point into the
 * caller's bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "suiro_bind.h"

int suiro_out_fail(suiro_out *o, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str traceback, int64_t index) {
  if (!o) return -1;
  _Alignas(8) unsigned char stack[1024];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, stack, sizeof stack);
  if (cls.len == 0) cls = WIRE_CSTR(SUIRO_CLASS_REMOTE);
  suiro_wire_put_error(&w, cls, msg, traceback, index < 0 ? -1 : index);
  const void *buf;
  size_t len;
  int rc;
  if (suiro_wire_writer_finish(&w, &buf, &len) == WIRE_OK) rc = suiro_out_error_bytes(o, buf, len);
  else rc = suiro_out_error(o, "%.*s", (int)(msg.len > 4000 ? 4000 : msg.len), msg.ptr ? msg.ptr : "");
  suiro_wire_writer_free(&w);
  return rc;
}

size_t suiro_error_encode(void *buf, size_t cap, suiro_wire_str cls, suiro_wire_str msg, suiro_wire_str traceback, int64_t index) {
  if (cls.len == 0) cls = WIRE_CSTR(SUIRO_CLASS_REMOTE);
  /* header word, ERROR word, index word, three length-prefixed strings: 8 * 6 bytes plus text */
  for (int attempt = 0; attempt < 3; attempt++) {
    suiro_wire_writer w;
    suiro_wire_writer_init(&w, NULL, 0);
    suiro_wire_put_error(&w, cls, msg, traceback, index < 0 ? -1 : index);
    const void *out;
    size_t len;
    if (suiro_wire_writer_finish(&w, &out, &len) == WIRE_OK && len <= cap) {
      memcpy(buf, out, len);
      suiro_wire_writer_free(&w);
      return len;
    }
    suiro_wire_writer_free(&w);
    /* too long: drop the traceback first, then cut the message */
    size_t room = cap > 128 ? cap - 128 : 0;
    if (traceback.len) traceback.len = traceback.len > room / 2 ? room / 2 : traceback.len;
    if (attempt >= 1) traceback.len = 0;
    if (cls.len > 64) cls.len = 64;
    if (msg.len > room) msg.len = room;
  }
  return 0;
}

static _Thread_local unsigned char *scratch;
static _Thread_local size_t scratch_cap;

/* An aligned copy of data when suiro_wire_reader needs one (payloads in map heaps need not be aligned). */
static const void *aligned(const void *data, size_t len) {
  if (((uintptr_t)data & 7) == 0) return data;
  if (len > scratch_cap) {
    unsigned char *b = realloc(scratch, len);
    if (!b) return NULL;
    scratch = b;
    scratch_cap = len;
  }
  memcpy(scratch, data, len);
  return scratch;
}

int suiro_error_read(int kind, const void *data, size_t len, suiro_error_info *e) {
  if (!e) return -1;
  if (!data) len = 0;
  memset(e, 0, sizeof *e);
  e->index = -1;
  e->slot = -1;
  switch (kind) {
  case SUIRO_RESULT_ERROR: {
    const void *a = len >= 8 && len % 8 == 0 ? aligned(data, len) : NULL;
    suiro_wire_reader rd;
    suiro_wire_item it;
    int ok = a && suiro_wire_reader_init(&rd, a, len) == WIRE_OK && suiro_wire_next(&rd, &it) == WIRE_OK;
    if (ok && it.tag == WIRE_LIST && it.n == 2) { /* LIST [ERROR, raised] */
      e->has_value = 1;
      ok = suiro_wire_next(&rd, &it) == WIRE_OK;
    }
    if (ok && it.tag == WIRE_ERROR && it.text[0].len > 0) {
      if (a != data) { /* point into the caller's bytes, not the scratch copy (reused by the next call) */
        const char *base = data;
        for (int k = 0; k < 3; k++) it.text[k].ptr = base + (it.text[k].ptr - (const char *)a);
      }
      e->cls = it.text[0];
      e->message = it.text[1];
      e->traceback = it.text[2];
      e->index = it.i;
      return 0;
    }
    e->has_value = 0;
    e->cls = WIRE_CSTR(SUIRO_CLASS_REMOTE);
    e->message = (suiro_wire_str){ data, len };
    e->traceback = WIRE_CSTR("");
    return 0;
  }
  case SUIRO_RESULT_DIED:
    e->cls = WIRE_CSTR(SUIRO_CLASS_WORKER_DIED);
    e->message = (suiro_wire_str){ data, len };
    e->traceback = WIRE_CSTR("");
    return 0;
  case SUIRO_RESULT_CANCELLED:
    e->cls = WIRE_CSTR(SUIRO_CLASS_CANCELLED);
    e->message = len ? (suiro_wire_str){ data, len } : WIRE_CSTR("the task was cancelled before it started");
    e->traceback = WIRE_CSTR("");
    return 0;
  }
  return -1;
}

int suiro_result_error(const suiro_result *r, suiro_error_info *e) {
  if (!r) return -1;
  if (suiro_error_read(r->kind, r->data, r->len, e) != 0) return -1;
  e->slot = r->worker_slot;
  e->pid = r->worker_pid;
  return 0;
}
