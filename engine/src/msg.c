/*
 * msg.c — outgoing messages: a wire writer that remembers the zero-copy grants written into it
 * (suiro_face.h section 3), so every face ends a message the same way: sent (the receiver owns the
 * grants) or freed (every grant given back).
 *
 * Ownership: a message belongs to the thread writing it. Each ledger entry stands for one grant
 * (suiro_zc_put's suiro_buf_ref, the receiver's reference); entries with `own` also hold one
 * reference of the sender (a region the face made for a copy), dropped when the message ends.
 * Giving a grant back is suiro_buf_unsend (an atomic on the region's shared count, buf.c); no
 * other memory is shared. Channel endpoints written into a freed message are taken back the same
 * way: chan.c records every endpoint put into a writer, and the message's end takes back those of
 * its writer, so faces record nothing for them.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "suiro_face.h"

void chan_msg_mark(const void *w, int revoke); /* chan.c: endpoints put into the writer at w */

void suiro_msg_init(suiro_msg *m, void *stack, size_t cap) {
  chan_msg_mark(&m->w, 0); /* a new message here: what was recorded at this address is stale */
  suiro_wire_writer_init(&m->w, stack, cap);
  m->n = 0;
  m->cap = (int)(sizeof m->inl / sizeof m->inl[0]);
  m->g = m->inl;
  m->stack = stack;
  m->stack_cap = cap;
}

/* Room for one more entry: 0, or -1 (no memory). */
static int ledger_room(suiro_msg *m) {
  if (m->n < m->cap) return 0;
  if (m->cap > (1 << 28)) return -1;
  int cap = m->cap * 2;
  suiro_msg_grant *ng = malloc(sizeof *ng * (size_t)cap);
  if (!ng) return -1;
  memcpy(ng, m->g, sizeof *ng * (size_t)m->n);
  if (m->g != m->inl) free(m->g);
  m->g = ng;
  m->cap = cap;
  return 0;
}

int suiro_msg_put_ref(suiro_msg *m, suiro_buf *b, int own, const void *data, size_t bytes, int type, int order,
                      int ndim, const uint64_t *dims) {
  /* room first, so a grant once written is always recorded */
  if (ledger_room(m) != 0 || suiro_zc_put(&m->w, b, data, bytes, type, order, ndim, dims) != WIRE_OK) {
    if (own && b) suiro_buf_unref(b);
    return WIRE_ERR;
  }
  m->g[m->n].b = b;
  m->g[m->n].own = own;
  m->n++;
  return WIRE_OK;
}

int suiro_msg_finish(suiro_msg *m, const void **buf, size_t *len) { return suiro_wire_writer_finish(&m->w, buf, len); }

static void msg_end(suiro_msg *m, int unsend) {
  /* channel endpoints written into a message that never goes come back too (chan.c) */
  chan_msg_mark(&m->w, unsend);
  for (int i = 0; i < m->n; i++) {
    if (unsend) suiro_buf_unsend(m->g[i].b);
    if (m->g[i].own) suiro_buf_unref(m->g[i].b);
  }
  if (m->g != m->inl) free(m->g);
  m->n = 0;
  m->cap = (int)(sizeof m->inl / sizeof m->inl[0]);
  m->g = m->inl;
  if (m->w.heap || !m->w.buf) { /* grown, or freed by the face: back to the caller's buffer */
    suiro_wire_writer_free(&m->w);
    suiro_wire_writer_init(&m->w, m->stack, m->stack_cap);
  } else /* still in the caller's buffer (a reused message, e.g. a runner's): start over in place */
    suiro_wire_writer_reset(&m->w);
}

void suiro_msg_sent(suiro_msg *m) { msg_end(m, 0); }
void suiro_msg_free(suiro_msg *m) { msg_end(m, 1); }
