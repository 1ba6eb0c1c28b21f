/* suiro_chan.h — channels: bounded single-producer single-consumer streams between any two
 * processes of a pool family (engine/src/chan.c).
 *
 * A channel is a shared region holding a ring of messages (bytes, usually one wire value each).
 * It has two endpoints, a sending end (tx) and a receiving end (rx); each endpoint has one owner
 * process at a time. suiro_chan_create makes both, owned by the calling process; an endpoint
 * moves to another process of the family by suiro_chan_export (which gives it up here) and
 * suiro_chan_import there (which claims it; a second claimer is refused by name). The wire form
 * of an endpoint is a REF item of kind WIRE_REF_CHAN (docs/wire-format.md): suiro_chan_put
 * writes it, suiro_chan_open reads it.
 *
 * Outcomes (suiro.h): SUIRO_OK; SUIRO_TIMEOUT (the wait ran out); SUIRO_FULL (send with timeout
 * 0 on a full ring); SUIRO_CLOSED (the peer closed its end; a receiver sees it only after every
 * queued message); SUIRO_PEER_GONE (the peer's owner process died; likewise after the queued
 * messages); SUIRO_ERR with suiro_last_error() (misuse, bad sizes, an endpoint owned elsewhere).
 * Timeouts are seconds: 0 polls, negative waits forever. An endpoint is used by one thread at a
 * time; the two endpoints of one channel may be used by two threads of one process.
 */
#ifndef SUIRO_CHAN_H
#define SUIRO_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "suiro.h"
#include "suiro_wire.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct suiro_chan suiro_chan;

#define SUIRO_CHAN_TX 0 /* the sending end */
#define SUIRO_CHAN_RX 1 /* the receiving end */

#define SUIRO_CHAN_MAX_CAPACITY (1u << 24) /* messages */
#define SUIRO_CHAN_MAX_BYTES ((size_t)1 << 30) /* the largest byte cap */
#define SUIRO_CHAN_MIN_BYTES ((size_t)64)

typedef struct suiro_chan_opts {
  size_t size;       /* sizeof(suiro_chan_opts), set by suiro_chan_opts_init */
  uint32_t capacity; /* messages queued at most, 1..2^24 (default 1024) */
  size_t bytes;      /* the byte cap: the largest message, 64..2^30 (default 260 KiB: every value
                        below the zero-copy floor fits; larger arrays cross by reference). The
                        ring holds at least twice this in queued messages. */
} suiro_chan_opts;

void suiro_chan_opts_init(suiro_chan_opts *o);
/* Both endpoints, owned by this process. */
suiro_status suiro_chan_create(const suiro_chan_opts *o, suiro_chan **tx, suiro_chan **rx);

/* Sends one message of len bytes (len <= the byte cap, else SUIRO_ERR naming the size), waiting
 * while the ring is full. Timeout 0 on a full ring: SUIRO_FULL. */
suiro_status suiro_chan_send(suiro_chan *tx, const void *data, size_t len, double timeout);

typedef struct suiro_chan_iov {
  const void *data;
  size_t len;
} suiro_chan_iov;
/* Sends n messages in order, as many per publication (one release store) as there is room for.
 * *sent says how many went (all of them with SUIRO_OK; fewer with TIMEOUT, FULL, CLOSED,
 * PEER_GONE). A message above the byte cap refuses the whole batch (nothing sent). */
suiro_status suiro_chan_send_batch(suiro_chan *tx, const suiro_chan_iov *msgs, size_t n, size_t *sent,
                                   double timeout);
/* Reserves room for one message of len bytes and returns where to write it (NULL with the
 * outcome in *st); suiro_chan_commit(tx, len) then queues it and suiro_chan_flush publishes
 * every committed message at once (send and send_batch flush themselves). */
void *suiro_chan_reserve(suiro_chan *tx, size_t len, double timeout, suiro_status *st);
/* The fast path of reserve: room now, or NULL with nothing else done (no wait, no peer check,
 * no error set: call suiro_chan_reserve for the outcome). For faces that release a lock (the
 * GIL) only around waits. */
void *suiro_chan_try_reserve(suiro_chan *tx, size_t len);
void suiro_chan_commit(suiro_chan *tx, size_t len);
void suiro_chan_flush(suiro_chan *tx);

typedef struct suiro_chan_msg {
  const void *data; /* 8-aligned, inside the ring: valid until suiro_chan_recv_done */
  size_t len;
} suiro_chan_msg;
/* Waits for at least one message, then takes up to max of them as views into the ring. Every
 * view stays valid until suiro_chan_recv_done, which gives their room back with one release
 * store (the next recv_batch calls it first). */
suiro_status suiro_chan_recv_batch(suiro_chan *rx, suiro_chan_msg *out, size_t max, size_t *n, double timeout);
void suiro_chan_recv_done(suiro_chan *rx);
/* The fast path of recv_batch: the messages queued now (0 when none, or on any misuse, with
 * nothing else done: call suiro_chan_recv_batch for the outcome). */
size_t suiro_chan_try_recv_batch(suiro_chan *rx, suiro_chan_msg *out, size_t max);
/* One message copied into buf (cap bytes; a longer message is left queued: SUIRO_ERR naming
 * its size). */
suiro_status suiro_chan_recv(suiro_chan *rx, void *buf, size_t cap, size_t *len, double timeout);

/* Closes this end (either side): the peer's receiver drains what was queued, then gets CLOSED;
 * the peer's sender gets CLOSED at once. Idempotent. */
suiro_status suiro_chan_close(suiro_chan *ch);
/* Closes (if owned here) and frees the handle. The last endpoint freed removes the channel's
 * names from /dev/shm (a dead peer's endpoint counts as freed). NULL is a no-op. */
void suiro_chan_free(suiro_chan *ch);

/* The receiving end's event fd (an epoll fd: poll it for POLLIN): readable when messages arrive,
 * or the sender closes, dies or changes owner. Arms it; the caller then looks for messages
 * (recv with timeout 0) before it sleeps on the fd. -1 with the error set on a sending end. */
int suiro_chan_eventfd(suiro_chan *rx);
/* Drains the event fd and re-arms it. */
void suiro_chan_event_ack(suiro_chan *rx);

enum { SUIRO_CHAN_PEER_OPEN = 0, SUIRO_CHAN_PEER_CLOSED, SUIRO_CHAN_PEER_DIED, SUIRO_CHAN_PEER_MOVING };
typedef struct suiro_chan_stats {
  uint64_t queued;   /* messages in the ring */
  uint64_t sent;     /* messages published, ever */
  uint64_t received; /* messages taken, ever */
  uint32_t capacity;
  size_t bytes;      /* the byte cap */
  int side;          /* SUIRO_CHAN_TX or SUIRO_CHAN_RX */
  int closed;        /* this end is closed */
  int peer;          /* SUIRO_CHAN_PEER_*: MOVING while the peer end is between owners */
  int peer_pid;      /* the peer end's owner (0 while moving) */
} suiro_chan_stats;
suiro_status suiro_chan_status(suiro_chan *ch, suiro_chan_stats *st);
int suiro_chan_side(const suiro_chan *ch);

/* Moving an endpoint to another process of the pool family. export gives up this process's
 * ownership (the handle then refuses every call but free) and fills the reference; import claims
 * the endpoint a reference names, as this process's. name: the channel's region, side, token:
 * the channel's secret (bytes that do not carry it are refused as forged). */
typedef struct suiro_chan_ref {
  char name[64];
  int side;
  uint64_t token;
} suiro_chan_ref;
suiro_status suiro_chan_export(suiro_chan *ch, suiro_chan_ref *ref);
suiro_status suiro_chan_import(const suiro_chan_ref *ref, suiro_chan **out);
/* The endpoint as a wire REF (kind WIRE_REF_CHAN), exporting it; WIRE_OK or WIRE_ERR. The face
 * keeps the handle (it refuses use while given away: suiro_chan_given) and frees it as usual.
 * On an encode that is then dropped, suiro_chan_unexport(ch) takes it back; so does ending the
 * message with suiro_msg_free or suiro_zc_revoke (they call suiro_chan_take_back for each
 * endpoint in it), as long as nobody claimed it since. */
int suiro_chan_put(suiro_wire_writer *w, suiro_chan *ch);
suiro_status suiro_chan_unexport(suiro_chan *ch);
/* 1 while the handle's end is given away (exported and not taken back). */
int suiro_chan_given(const suiro_chan *ch);

/* Endpoints named in a message that will never be read. suiro_chan_take_back, for one REF of
 * kind WIRE_REF_CHAN written by this process (its message refused: suiro_msg_free and
 * suiro_zc_revoke call it): an end whose exported handle this process still holds comes back to
 * that handle (owned here again, if still between owners since that export); without a handle
 * (the face freed it: it counts the endpoint as sent) nothing is done. suiro_chan_revoke, for a
 * message dropped unread (a cancelled or dropped task, a channel's unread messages when its last
 * end goes): the same, and an end with no handle here that is still between owners is dropped:
 * freed, so its peer sees CLOSED after the queued messages and the channel's names leave
 * /dev/shm with its last end. An end that was claimed meanwhile is left alone.
 * suiro_chan_revoke_refs revokes every endpoint in a wire buffer (8-aligned; anything that is
 * not a wire buffer is ignored). */
void suiro_chan_take_back(const suiro_wire_ref *ref);
void suiro_chan_revoke(const suiro_wire_ref *ref);
void suiro_chan_revoke_refs(const void *buf, size_t len);
/* 1 while this process holds exported handles (a hint for skipping scans). */
int suiro_chan_exports_pending(void);
/* A REF of kind WIRE_REF_CHAN to an endpoint of this process (imports it). */
suiro_status suiro_chan_open(const suiro_wire_ref *ref, suiro_chan **out);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif
