/*
 * chan.c — channels (suiro_chan.h): a bounded single-producer single-consumer ring of messages in
 * a shared region, between any two processes of a pool family.
 *
 * Layout. One region, /suiro_<root>_<id>_ch<n> (named after the family root, like a worker's
 * pools, so every process of the family accepts it): a header (chan_hdr below), then the ring,
 * `ring` bytes (a power of two, at least twice the byte cap plus a header, so any message that
 * passes the cap fits an empty ring). A message is an 8-byte header (u32 length, u32 kind) and
 * its bytes padded to 8, so every message starts 8-aligned (a wire buffer is decoded in place).
 * A message never wraps: when the end of the ring lacks room, a SKIP header fills it and the
 * message starts at 0. Next to the region lives a FIFO (the region's name + ".e") that wakes the
 * receiving end's event fd.
 *
 * Memory ordering
 *   - tail (byte position) is written by the sender only: message bytes and headers (plain),
 *     then `sent` (relaxed), then tail with release — one release store per publication
 *     (suiro_chan_flush; send_batch publishes as many messages per store as there is room for).
 *     head and `received` are written by the receiver only, in the same way, when it gives views
 *     back (suiro_chan_recv_done). Each side reads the other's position with acquire, and only
 *     when its private cached copy says full (sender) or empty (receiver). Bytes in [head, tail)
 *     belong to the receiver, the rest to the sender.
 *   - Waiting: spin (an adaptive budget, park.h), then park on a futex word. The waiter announces
 *     itself (seq_cst exchange on rx_waiting / tx_waiting), reads the futex word, re-checks, and
 *     parks; the other side publishes, fences (seq_cst), and only when it sees the announce bumps
 *     the word (release) and wakes. So either the waiter sees the publication or the publisher
 *     sees the waiter. Waits are cut in slices of at most 10 ms, after each of which the peer's
 *     liveness is checked.
 *   - The event fd: the receiver arms rx_armed (seq_cst store) and then looks for messages; a
 *     publisher that sees it armed disarms it (exchange: once per burst) and writes the FIFO.
 *   - close: a side publishes what it committed, then stores its end's `closed` with release
 *     and wakes the other; a receiver that sees `closed` (acquire) reads tail after it, so it
 *     drains every message sent before the close, then answers CLOSED.
 *
 * Ownership
 *   - Each end has one owner process at a time: end.owner = pid << 32 | the low word of its
 *     region id (region.c), claimed by CAS from 0 (free: between owners); end.owner_id is the
 *     owner's full id, written after the claim. An owner holds its liveness anchor (region.c)
 *     while it owns an end, so a peer knows it died when its anchor's lock is free — however it
 *     died, whatever its pid became. Death is reported after the queued messages (PEER_GONE).
 *   - export gives an end up (CAS owner -> 0); the local handle then refuses everything but
 *     free. import claims (CAS 0 -> self): a second claimer finds it owned and gets an error
 *     naming the owner. A handle copied into a forked child refuses (handle.c).
 *   - Trust: an endpoint is accepted only by name from this process's pool family, and only with
 *     the channel's token (64 random bits, in the header and in the endpoint's wire form); sizes
 *     in the shared header are checked against the mapping as made here.
 *   - In transit: an exported end's handle stays with its face (refusing use) in this process's
 *     list of exported handles, and every put is recorded per writer (put_recs). A message that
 *     never goes (suiro_msg_free, suiro_zc_revoke) takes its endpoints back: one still between
 *     owners since our export (end.epoch unchanged) comes back to its handle (a face that freed
 *     the handle counted the endpoint as sent: nothing is done). A message dropped unread (a
 *     worker skipping a cancelled task, the host dropping a dead worker's claims or what is still
 *     queued when a pool stops) revokes them: taken back likewise, else, still between owners,
 *     dropped: owner set to OWNER_DROPPED and the end freed, so the peer sees CLOSED and the
 *     names go with the last end. The last end to go also revokes the endpoints in its ring's
 *     unread messages.
 *   - Names: `ends` counts ends not yet freed; whoever takes it to 0 unlinks the region and the
 *     FIFO. A survivor that frees its end while the peer's owner is dead frees the peer's end
 *     too, and reaps the dead owner's names (its anchor), so nothing stays in /dev/shm.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "handle.h"
#include "park.h"
#include "region.h"
#include "suiro_chan.h"

#define CHAN_MAGIC 0x6e6168636f727573ull /* "surochan" */
#define CHAN_VERSION 1u
#define MSG_HDR 8u
#define KIND_MSG 0u
#define KIND_SKIP 1u
#define SLICE_NS 10000000ull /* liveness is checked at least this often while waiting */
#define DEFAULT_BYTES ((size_t)260 << 10)

int buf_family_root(int *pid, uint64_t *id); /* buf.c */

typedef struct chan_end {
  _Atomic uint64_t owner;    /* pid << 32 | low word of the owner's region id; 0 between owners */
  _Atomic uint64_t owner_id; /* the owner's full region id */
  _Atomic uint32_t closed;   /* written by the end's owner */
  _Atomic uint32_t freed;    /* 1 once freed by its last owner (or found dead by the peer) */
  _Atomic uint32_t epoch;    /* exports so far: a taken-back export must still be the latest */
  uint32_t pad;
} chan_end;

typedef struct chan_hdr {
  uint64_t magic;
  uint32_t version, capacity;
  uint64_t bytes; /* the byte cap: the largest message */
  uint64_t ring;  /* ring bytes, a power of two */
  uint64_t token;
  uint64_t data_off;
  SUIRO_ALIGNED _Atomic uint64_t tail; /* sender */
  _Atomic uint64_t sent;               /* sender: messages published */
  SUIRO_ALIGNED _Atomic uint64_t head; /* receiver */
  _Atomic uint64_t received;           /* receiver: messages taken */
  SUIRO_ALIGNED _Atomic uint32_t data_seq; /* the receiver parks here */
  _Atomic uint32_t rx_waiting;
  _Atomic uint32_t rx_armed;
  SUIRO_ALIGNED _Atomic uint32_t space_seq; /* the sender parks here */
  _Atomic uint32_t tx_waiting;
  SUIRO_ALIGNED chan_end end[2];
  _Atomic uint32_t ends; /* ends not yet freed */
} chan_hdr;

enum { ST_OWNED = 1, ST_EXPORTED = 2 };

struct suiro_chan {
  handle_live live; /* first: checked at every entry (handle.c) */
  int side, state, closed;
  chan_hdr *h;
  unsigned char *ring;
  uint64_t mask;
  suiro_region *reg;
  uint64_t pos;       /* tx: next byte to write; rx: next byte to read (after views given back) */
  uint64_t published; /* tx: tail as published */
  uint64_t cache;     /* tx: head last seen; rx: tail last seen */
  uint64_t count;     /* tx: messages committed; rx: messages given back */
  uint64_t peer_count; /* tx: `received` last seen */
  uint64_t view_pos, view_n; /* rx: views out (view_n > 0) end at view_pos */
  int anchored;
  int fifo;           /* the FIFO, opened read and write on both sides (never hung up) */
  int epfd, pidfd;
  uint64_t pid_owner; /* rx: the sender's owner word pidfd was opened for */
  spin_adapt spin;
  suiro_chan *exp_next; /* in exp_list while exported */
  uint32_t exp_epoch;   /* the end's epoch written by our export */
};

#define OWNER_DROPPED UINT64_MAX /* an end in transit whose message was dropped: never claimed */

static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static uint64_t self_word(uint64_t *id) {
  int pid;
  uint64_t i;
  region_identity(&pid, &i);
  if (id) *id = i;
  return (uint64_t)(uint32_t)pid << 32 | (uint32_t)i;
}

static const char *side_name(int side) { return side == SUIRO_CHAN_TX ? "sending end" : "receiving end"; }

static suiro_status guard(const suiro_chan *ch, const char *fn) {
  if (!handle_ok(ch, HANDLE_CHAN)) return handle_check(ch, HANDLE_CHAN, fn);
  if (ch->state == ST_EXPORTED)
    return suiro_set_error(SUIRO_ERR, "%s: this %s of %s was sent to another process: it is no longer this "
                                      "process's", fn, side_name(ch->side), ch->reg->name);
  return SUIRO_OK;
}

#define GUARD(ch, fn, ret)                                                           \
  do {                                                                               \
    if (!handle_ok((ch), HANDLE_CHAN) || (ch)->state != ST_OWNED) {                  \
      guard((ch), (fn));                                                             \
      return ret;                                                                    \
    }                                                                                \
  } while (0)

static void fifo_path(const char *name, char *out, size_t cap) { snprintf(out, cap, "/dev/shm/%s.e", name + 1); }

/* ---- the peer ------------------------------------------------------------------------------ */

/* SUIRO_CHAN_PEER_*: closed wins over died (a peer that closed and then exited closed). */
static int peer_state(suiro_chan *ch, int *pid_out) {
  chan_end *e = &ch->h->end[1 - ch->side];
  if (pid_out) *pid_out = 0;
  if (ld_acq(&e->closed) || ld_acq(&e->freed)) return SUIRO_CHAN_PEER_CLOSED;
  uint64_t w = ld_acq(&e->owner);
  if (w == 0) return SUIRO_CHAN_PEER_MOVING;
  uint64_t id = ld_acq(&e->owner_id);
  if (pid_out) *pid_out = (int)(w >> 32);
  if ((uint32_t)id != (uint32_t)w) return SUIRO_CHAN_PEER_OPEN; /* being claimed right now */
  if (region_owner_alive((unsigned)(w >> 32), id)) return SUIRO_CHAN_PEER_OPEN;
  /* dead, unless it closed (or gave the end away) on its way out */
  if (ld_acq(&e->closed)) return SUIRO_CHAN_PEER_CLOSED;
  if (ld_acq(&e->owner) != w) return SUIRO_CHAN_PEER_MOVING;
  return SUIRO_CHAN_PEER_DIED;
}

static void fifo_poke(suiro_chan *ch) {
  if (ch->fifo < 0) {
    char path[128];
    fifo_path(ch->reg->name, path, sizeof path);
    /* read-write: the FIFO then always has a reader, so a write after the receiver closed its
     * end is no SIGPIPE (R turned one into an error inside gc()); bytes nobody reads stay in the
     * pipe, and a full pipe is readable already */
    ch->fifo = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (ch->fifo < 0) return; /* no FIFO: nothing to wake */
  }
  char b = 1;
  ssize_t w = write(ch->fifo, &b, 1);
  (void)w; /* a full FIFO is readable already */
}

/* After a publication, a close or an owner change on the sending side. */
static void notify_rx(suiro_chan *ch) {
  chan_hdr *h = ch->h;
  atomic_thread_fence(memory_order_seq_cst);
  if (ld_rlx(&h->rx_waiting)) {
    atomic_fetch_add_explicit(&h->data_seq, 1, memory_order_release);
    park_wake(&h->data_seq, 1);
  }
  if (ld_rlx(&h->rx_armed) && atomic_exchange_explicit(&h->rx_armed, 0, memory_order_acq_rel)) fifo_poke(ch);
}

/* After views were given back, or a close on the receiving side. */
static void notify_tx(suiro_chan *ch) {
  chan_hdr *h = ch->h;
  atomic_thread_fence(memory_order_seq_cst);
  if (ld_rlx(&h->tx_waiting)) {
    atomic_fetch_add_explicit(&h->space_seq, 1, memory_order_release);
    park_wake(&h->space_seq, 1);
  }
}

/* ---- this process's exported handles ----------------------------------------------------------- */

/* Handles this process gave away (state EXPORTED) and still holds: a message that carried one and
 * is then dropped takes it back (revoke_one). Guarded by exp_lock; exp_count lets the hot paths
 * skip the lock when there are none. */
static pthread_mutex_t exp_lock = PTHREAD_MUTEX_INITIALIZER;
static suiro_chan *exp_list;
static _Atomic int exp_count;

static void exp_unlink(suiro_chan *ch) { /* exp_lock held */
  for (suiro_chan **pp = &exp_list; *pp; pp = &(*pp)->exp_next)
    if (*pp == ch) {
      *pp = ch->exp_next;
      ch->exp_next = NULL;
      atomic_fetch_sub(&exp_count, 1);
      return;
    }
}

static int in_family(const char *name);

/* ---- creating, opening, freeing --------------------------------------------------------------- */

void suiro_chan_opts_init(suiro_chan_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->capacity = 1024;
  o->bytes = DEFAULT_BYTES;
}

static suiro_chan *new_end(suiro_region *reg, int side) {
  suiro_chan *ch = calloc(1, sizeof *ch);
  if (!ch) return NULL;
  handle_init(&ch->live, HANDLE_CHAN);
  ch->side = side;
  ch->reg = reg;
  ch->h = reg->addr;
  ch->ring = (unsigned char *)reg->addr + ch->h->data_off;
  ch->mask = ch->h->ring - 1;
  ch->fifo = ch->epfd = ch->pidfd = -1;
  return ch;
}

/* Takes end `side` for this process: the anchor, then CAS owner 0 -> self. In that order: a peer
 * that reads the new owner word must find its anchor locked (region_owner_alive), or it takes a
 * live owner for dead (peer_died while a worker claimed its first end, a flake of channel_spec);
 * and making the anchor may renew this process's identity, which the owner word carries. */
static suiro_status claim(suiro_chan *ch) {
  chan_end *e = &ch->h->end[ch->side];
  if (ld_acq(&e->freed))
    return suiro_set_error(SUIRO_ERR, "channel %s: its %s was closed and freed: refused", ch->reg->name,
                           side_name(ch->side));
  if (region_hold_anchor() != SUIRO_OK) return SUIRO_ERR;
  uint64_t id, me = self_word(&id), w = 0;
  if (!atomic_compare_exchange_strong_explicit(&e->owner, &w, me, memory_order_acq_rel, memory_order_acquire)) {
    region_release_anchor();
    if (w == OWNER_DROPPED || ld_acq(&e->freed))
      return suiro_set_error(SUIRO_ERR, "channel %s: its %s was dropped with a message nobody read: refused",
                             ch->reg->name, side_name(ch->side));
    if (w == me)
      return suiro_set_error(SUIRO_ERR, "channel %s: this process already holds its %s (one handle per owner)",
                             ch->reg->name, side_name(ch->side));
    return suiro_set_error(SUIRO_ERR, "channel %s: its %s is owned by process %u: an endpoint has one owner "
                                      "at a time", ch->reg->name, side_name(ch->side), (unsigned)(w >> 32));
  }
  st_rel(&e->owner_id, id);
  ch->anchored = 1;
  ch->state = ST_OWNED;
  if (ch->side == SUIRO_CHAN_TX) {
    ch->pos = ch->published = ld_acq(&ch->h->tail);
    ch->count = ld_rlx(&ch->h->sent);
    ch->cache = ld_acq(&ch->h->head);
    ch->peer_count = ld_rlx(&ch->h->received);
    notify_rx(ch); /* an owner change: the receiver's event fd follows the new owner */
  } else {
    ch->pos = ld_acq(&ch->h->head);
    ch->count = ld_rlx(&ch->h->received);
    ch->cache = ld_acq(&ch->h->tail);
  }
  return SUIRO_OK;
}

suiro_status suiro_chan_create(const suiro_chan_opts *o, suiro_chan **tx, suiro_chan **rx) {
  if (!tx || !rx) return suiro_set_error(SUIRO_ERR, "suiro_chan_create: %s is NULL", !tx ? "tx" : "rx");
  *tx = *rx = NULL;
  suiro_chan_opts d;
  suiro_chan_opts_init(&d);
  if (o) {
    if (o->size != sizeof *o)
      return suiro_set_error(SUIRO_ERR, "suiro_chan_create: opts.size is %zu, expected %zu (use "
                                        "suiro_chan_opts_init)", o->size, sizeof *o);
    d = *o;
  }
  if (d.capacity < 1 || d.capacity > SUIRO_CHAN_MAX_CAPACITY)
    return suiro_set_error(SUIRO_ERR, "channel: capacity must be 1..%u messages, got %u", SUIRO_CHAN_MAX_CAPACITY,
                           d.capacity);
  if (d.bytes < SUIRO_CHAN_MIN_BYTES || d.bytes > SUIRO_CHAN_MAX_BYTES)
    return suiro_set_error(SUIRO_ERR, "channel: bytes (the byte cap) must be %zu..%zu, got %zu", SUIRO_CHAN_MIN_BYTES,
                           SUIRO_CHAN_MAX_BYTES, d.bytes);
  uint64_t ring = 64;
  while (ring < 2 * (pad8(d.bytes) + MSG_HDR)) ring <<= 1;
  size_t off = (sizeof(chan_hdr) + 63) & ~(size_t)63;
  if (suiro_budget_check("channel ring bytes", ring + off, 1) != SUIRO_OK) return SUIRO_ERR;
  int pid;
  uint64_t id;
  region_identity(&pid, &id);
  buf_family_root(&pid, &id); /* in a worker: the family root's name, so the whole family accepts it */
  suiro_region *r1, *r2 = NULL;
  suiro_status st = region_create_owned(off + ring, off + ring, pid, id, "ch", &r1);
  if (st != SUIRO_OK) return st;
  chan_hdr *h = r1->addr;
  h->magic = CHAN_MAGIC;
  h->version = CHAN_VERSION;
  h->capacity = d.capacity;
  h->bytes = d.bytes;
  h->ring = ring;
  h->token = region_random64() | 1;
  h->data_off = off;
  atomic_store(&h->ends, 2);
  char path[128];
  fifo_path(r1->name, path, sizeof path);
  if (mkfifo(path, 0600) != 0) path[0] = 0; /* no event fd for this channel; blocking waits still work */
  st = suiro_region_open(r1->name, 1, &r2);
  suiro_chan *t = st == SUIRO_OK ? new_end(r1, SUIRO_CHAN_TX) : NULL;
  suiro_chan *r = t ? new_end(r2, SUIRO_CHAN_RX) : NULL;
  if (!r || claim(t) != SUIRO_OK || claim(r) != SUIRO_OK) {
    if (st == SUIRO_OK && (!t || !r)) st = suiro_set_error(SUIRO_ERR, "channel: out of memory");
    else if (st == SUIRO_OK) st = SUIRO_ERR;
    if (t && t->anchored) region_release_anchor();
    if (r && r->anchored) region_release_anchor();
    free(t);
    free(r);
    if (path[0]) unlink(path);
    if (st != SUIRO_OK && r2 && r2 != r1) suiro_region_close(r2, 0);
    suiro_region_close(r1, 1);
    return st;
  }
  *tx = t;
  *rx = r;
  return SUIRO_OK;
}

static void revoke_ring(chan_hdr *h);

static void drop_end(chan_hdr *h, int side, const char *name) {
  uint32_t z = 0;
  if (!atomic_compare_exchange_strong(&h->end[side].freed, &z, 1)) return;
  if (atomic_fetch_sub(&h->ends, 1) == 1) {
    revoke_ring(h); /* endpoints in messages nobody will read go too */
    char path[128];
    fifo_path(name, path, sizeof path);
    unlink(path);
    region_file_unlink(name);
  }
}

static void local_close(suiro_chan *ch) {
  if (ch->closed) return;
  if (ch->side == SUIRO_CHAN_TX) {
    suiro_chan_flush(ch);
    st_rel(&ch->h->end[SUIRO_CHAN_TX].closed, 1);
    notify_rx(ch);
  } else {
    if (ch->view_n) suiro_chan_recv_done(ch);
    st_rel(&ch->h->end[SUIRO_CHAN_RX].closed, 1);
    notify_tx(ch);
  }
  ch->closed = 1;
}

suiro_status suiro_chan_close(suiro_chan *ch) {
  GUARD(ch, "suiro_chan_close", SUIRO_ERR);
  local_close(ch);
  return SUIRO_OK;
}

void suiro_chan_free(suiro_chan *ch) {
  if (!ch) return;
  if (!handle_ok(ch, HANDLE_CHAN)) {
    handle_check(ch, HANDLE_CHAN, "suiro_chan_free");
    return;
  }
  chan_hdr *h = ch->h;
  if (ch->state == ST_OWNED) {
    local_close(ch);
    int peer = peer_state(ch, NULL);
    if (peer == SUIRO_CHAN_PEER_DIED) { /* the dead peer's end is freed too, its anchor reaped */
      chan_end *e = &h->end[1 - ch->side];
      uint64_t w = ld_acq(&e->owner), id = ld_acq(&e->owner_id);
      drop_end(h, 1 - ch->side, ch->reg->name);
      region_reap_owner((int)(w >> 32), id);
    }
    drop_end(h, ch->side, ch->reg->name);
    if (ch->anchored) region_release_anchor();
  } else if (ch->state == ST_EXPORTED) {
    pthread_mutex_lock(&exp_lock);
    exp_unlink(ch);
    pthread_mutex_unlock(&exp_lock);
  }
  if (ch->fifo >= 0) close(ch->fifo);
  if (ch->pidfd >= 0) close(ch->pidfd);
  if (ch->epfd >= 0) close(ch->epfd);
  suiro_region_close(ch->reg, 0);
  atomic_store_explicit(&ch->live.word, (uint64_t)HANDLE_DEAD << 32 | HANDLE_CHAN, memory_order_relaxed);
  free(ch);
}

/* ---- moving ends ------------------------------------------------------------------------------ */

static int in_family(const char *name) {
  int pid;
  uint64_t id;
  char pre[SUIRO_NAME_MAX];
  region_identity(&pid, &id);
  int n = snprintf(pre, sizeof pre, "/suiro_%x_%llx_", (unsigned)pid, (unsigned long long)id);
  if (strncmp(name, pre, (size_t)n) == 0) return 1;
  if (!buf_family_root(&pid, &id)) return 0;
  n = snprintf(pre, sizeof pre, "/suiro_%x_%llx_", (unsigned)pid, (unsigned long long)id);
  return strncmp(name, pre, (size_t)n) == 0;
}

suiro_status suiro_chan_export(suiro_chan *ch, suiro_chan_ref *ref) {
  GUARD(ch, "suiro_chan_export", SUIRO_ERR);
  if (!ref) return suiro_set_error(SUIRO_ERR, "suiro_chan_export: ref is NULL");
  if (ch->side == SUIRO_CHAN_TX) suiro_chan_flush(ch);
  else if (ch->view_n) suiro_chan_recv_done(ch);
  memset(ref, 0, sizeof *ref);
  snprintf(ref->name, sizeof ref->name, "%s", ch->reg->name);
  ref->side = ch->side;
  ref->token = ch->h->token;
  ch->exp_epoch = atomic_fetch_add(&ch->h->end[ch->side].epoch, 1) + 1;
  pthread_mutex_lock(&exp_lock);
  ch->exp_next = exp_list;
  exp_list = ch;
  atomic_fetch_add(&exp_count, 1);
  pthread_mutex_unlock(&exp_lock);
  st_rel(&ch->h->end[ch->side].owner, 0);
  ch->state = ST_EXPORTED;
  if (ch->anchored) region_release_anchor();
  ch->anchored = 0;
  if (ch->side == SUIRO_CHAN_TX) notify_rx(ch);
  return SUIRO_OK;
}

/* Takes an exported handle back (exp_lock held): only while the end is still between owners
 * since our export (its epoch unchanged), so a later export by someone else is never stolen. */
static suiro_status take_back(suiro_chan *ch) {
  chan_end *e = &ch->h->end[ch->side];
  if (ld_acq(&e->epoch) != ch->exp_epoch || ld_acq(&e->owner) != 0)
    return suiro_set_error(SUIRO_ERR, "channel %s: its %s was claimed by another process since it was sent: "
                                      "it cannot be taken back", ch->reg->name, side_name(ch->side));
  ch->state = 0;
  suiro_status st = claim(ch);
  if (st != SUIRO_OK) {
    ch->state = ST_EXPORTED;
    return st;
  }
  exp_unlink(ch);
  return SUIRO_OK;
}

suiro_status suiro_chan_unexport(suiro_chan *ch) {
  if (!handle_ok(ch, HANDLE_CHAN)) return handle_check(ch, HANDLE_CHAN, "suiro_chan_unexport");
  if (ch->state != ST_EXPORTED) return SUIRO_OK;
  pthread_mutex_lock(&exp_lock);
  suiro_status st = take_back(ch);
  pthread_mutex_unlock(&exp_lock);
  return st;
}

int suiro_chan_given(const suiro_chan *ch) { return handle_ok(ch, HANDLE_CHAN) && ch->state == ST_EXPORTED; }

/* An end named by a reference this process wrote, in a message that will never be read: it
 * comes back to our exported handle when we still have one (the face's endpoint works again),
 * else, when it is still between owners, it is dropped: freed as by its owner, so the peer sees
 * CLOSED after what was queued, and the channel's names go with its last end. */
static void revoke_end(const suiro_wire_ref *r, int drop);
void suiro_chan_revoke(const suiro_wire_ref *r) { revoke_end(r, 1); }
void suiro_chan_take_back(const suiro_wire_ref *r) { revoke_end(r, 0); }

static void revoke_end(const suiro_wire_ref *r, int drop) {
  char name[64];
  if (!r || r->type != WIRE_REF_CHAN || r->length > 1 || r->name.len == 0 || r->name.len >= sizeof name ||
      memchr(r->name.ptr, 0, r->name.len))
    return;
  memcpy(name, r->name.ptr, r->name.len);
  name[r->name.len] = 0;
  int side = (int)r->length;
  if (ld_acq(&exp_count) > 0) {
    pthread_mutex_lock(&exp_lock);
    suiro_chan *c = exp_list;
    for (; c; c = c->exp_next)
      if (c->side == side && c->h->token == r->flags && strcmp(c->reg->name, name) == 0 &&
          ld_acq(&c->h->end[side].epoch) == c->exp_epoch && handle_ok(c, HANDLE_CHAN))
        break;
    int back = c && take_back(c) == SUIRO_OK;
    pthread_mutex_unlock(&exp_lock);
    if (back) return;
  }
  if (!drop || !in_family(name)) return;
  suiro_region *reg;
  if (suiro_region_open(name, 1, &reg) != SUIRO_OK) return;
  chan_hdr *h = reg->addr;
  if (reg->size >= sizeof *h && h->magic == CHAN_MAGIC && h->version == CHAN_VERSION && h->token == r->flags &&
      h->data_off >= sizeof *h && h->data_off <= reg->size && h->ring >= 64 && !(h->ring & (h->ring - 1)) &&
      h->ring <= reg->size - h->data_off) {
    uint64_t z = 0;
    if (atomic_compare_exchange_strong(&h->end[side].owner, &z, OWNER_DROPPED)) {
      suiro_chan *tmp = new_end(reg, side);
      drop_end(h, side, name);
      if (tmp) { /* wake the peer: it finds the end freed */
        if (side == SUIRO_CHAN_TX) notify_rx(tmp);
        else notify_tx(tmp);
        if (tmp->fifo >= 0) close(tmp->fifo);
        free(tmp);
      }
    }
  }
  suiro_region_close(reg, 0);
}

static _Thread_local int revoke_depth; /* endpoints inside rings inside rings: bounded */

void suiro_chan_revoke_refs(const void *buf, size_t len) {
  if (!buf || len < 8 || ((uintptr_t)buf & 7) || revoke_depth > 8) return;
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, buf, len) != WIRE_OK) return;
  revoke_depth++;
  while (suiro_wire_next(&r, &it) == WIRE_OK)
    if (it.tag == WIRE_REF && it.ref.type == WIRE_REF_CHAN) suiro_chan_revoke(&it.ref);
  revoke_depth--;
}

int suiro_chan_exports_pending(void) { return ld_acq(&exp_count) > 0; }

/* The last end is gone: messages still queued will never be read; endpoints in them go. */
static void revoke_ring(chan_hdr *h) {
  unsigned char *ring = (unsigned char *)h + h->data_off;
  uint64_t p = ld_acq(&h->head), t = ld_acq(&h->tail), mask = h->ring - 1;
  if (t - p > h->ring) return;
  while (p != t) {
    uint64_t idx = p & mask;
    const uint32_t *m = (const uint32_t *)(const void *)(ring + idx);
    if (m[1] == KIND_SKIP) {
      p += h->ring - idx;
      continue;
    }
    uint64_t len = m[0];
    if (len > h->bytes || idx + MSG_HDR + pad8(len) > h->ring) return;
    suiro_chan_revoke_refs(m + 2, (size_t)len);
    p += MSG_HDR + pad8(len);
  }
}

suiro_status suiro_chan_import(const suiro_chan_ref *ref, suiro_chan **out) {
  if (!ref || !out) return suiro_set_error(SUIRO_ERR, "suiro_chan_import: %s is NULL", !ref ? "ref" : "out");
  *out = NULL;
  const char *name = ref->name;
  if (memchr(name, 0, sizeof ref->name) == NULL || name[0] != '/' || strchr(name + 1, '/') ||
      strncmp(name, "/suiro_", 7) != 0)
    return suiro_set_error(SUIRO_ERR, "channel endpoint: malformed channel name");
  if (ref->side != SUIRO_CHAN_TX && ref->side != SUIRO_CHAN_RX)
    return suiro_set_error(SUIRO_ERR, "channel endpoint %s: side %d (0 sending, 1 receiving)", name, ref->side);
  if (!in_family(name))
    return suiro_set_error(SUIRO_ERR, "channel endpoint %s belongs to another pool family: refused", name);
  suiro_region *reg;
  suiro_status st = suiro_region_open(name, 1, &reg);
  if (st != SUIRO_OK) {
    if (st == SUIRO_PEER_GONE)
      return suiro_set_error(SUIRO_ERR, "channel endpoint %s does not exist (forged, or both its ends were "
                                        "freed)", name);
    return st;
  }
  chan_hdr *h = reg->addr;
  const char *bad = NULL;
  if (reg->size < sizeof *h || h->magic != CHAN_MAGIC) bad = "is not a suiro channel";
  else if (h->version != CHAN_VERSION) bad = "is a channel of another version";
  else if (h->token != ref->token) bad = "carries the wrong token: a forged endpoint";
  else if (h->data_off < sizeof *h || h->data_off > reg->size || (h->ring & (h->ring - 1)) || h->ring < 64 ||
           h->ring > reg->size - h->data_off || h->capacity < 1 || h->capacity > SUIRO_CHAN_MAX_CAPACITY ||
           h->bytes > h->ring / 2)
    bad = "has a corrupt header";
  if (bad) {
    suiro_region_close(reg, 0);
    return suiro_set_error(SUIRO_ERR, "channel endpoint %s %s: refused", name, bad);
  }
  suiro_chan *ch = new_end(reg, ref->side);
  if (!ch) {
    suiro_region_close(reg, 0);
    return suiro_set_error(SUIRO_ERR, "channel: out of memory");
  }
  if ((st = claim(ch)) != SUIRO_OK) {
    suiro_region_close(reg, 0);
    free(ch);
    return st;
  }
  *out = ch;
  return SUIRO_OK;
}

/* Endpoints put into writers on this thread, so a message (msg.c) that ends unsent takes back
 * what was written into it, even once a face freed its writer: (writer, end, epoch) records, the
 * oldest forgotten first. A message starting at a writer's address forgets what was recorded
 * there before (a plain writer's, since handed over or revoked by its bytes). */
typedef struct put_rec {
  const void *w;
  char name[64];
  int side;
  uint64_t token;
} put_rec;
#define PUT_RECS 32
static _Thread_local put_rec put_recs[PUT_RECS];
static _Thread_local int put_n;
/* Records held by all threads: every message's end reads this plain global first, so the common
 * message, with no endpoint in it, never reaches the thread-local table (a __tls_get_addr call
 * each time in a dlopen'd face module). A thread's own updates are visible to itself, so a zero
 * read means this thread holds none; relaxed is enough. */
static _Atomic int put_live;

static void put_record(const void *w, const suiro_chan_ref *ref) {
  if (put_n == PUT_RECS) {
    memmove(put_recs, put_recs + 1, sizeof put_recs[0] * (PUT_RECS - 1));
    put_n--;
  } else
    atomic_fetch_add_explicit(&put_live, 1, memory_order_relaxed);
  put_rec *r = &put_recs[put_n++];
  r->w = w;
  memcpy(r->name, ref->name, sizeof r->name);
  r->side = ref->side;
  r->token = ref->token;
}

void chan_msg_mark(const void *w, int revoke); /* msg.c */
void chan_msg_mark(const void *w, int revoke) {
  if (atomic_load_explicit(&put_live, memory_order_relaxed) == 0 || put_n == 0) return;
  int k = 0;
  for (int i = 0; i < put_n; i++) {
    if (put_recs[i].w != w) {
      put_recs[k++] = put_recs[i];
      continue;
    }
    if (!revoke) continue;
    put_rec rec = put_recs[i];
    suiro_wire_ref r;
    memset(&r, 0, sizeof r);
    r.type = WIRE_REF_CHAN;
    r.flags = rec.token;
    r.length = (uint64_t)rec.side;
    r.name.ptr = rec.name;
    r.name.len = strlen(rec.name);
    suiro_chan_take_back(&r);
  }
  if (k != put_n) atomic_fetch_sub_explicit(&put_live, put_n - k, memory_order_relaxed);
  put_n = k;
}

int suiro_chan_put(suiro_wire_writer *w, suiro_chan *ch) {
  suiro_chan_ref ref;
  if (suiro_chan_export(ch, &ref) != SUIRO_OK) return WIRE_ERR;
  suiro_wire_ref r;
  memset(&r, 0, sizeof r);
  r.type = WIRE_REF_CHAN;
  r.flags = ref.token;
  r.length = (uint64_t)ref.side;
  r.name.ptr = ref.name;
  r.name.len = strlen(ref.name);
  if (suiro_wire_put_ref(w, &r) != WIRE_OK) {
    suiro_chan_unexport(ch);
    return WIRE_ERR;
  }
  put_record(w, &ref);
  return WIRE_OK;
}

suiro_status suiro_chan_open(const suiro_wire_ref *r, suiro_chan **out) {
  if (!r || !out) return suiro_set_error(SUIRO_ERR, "suiro_chan_open: %s is NULL", !r ? "ref" : "out");
  if (r->type != WIRE_REF_CHAN) return suiro_set_error(SUIRO_ERR, "suiro_chan_open: a ref of kind %d is not a channel", r->type);
  suiro_chan_ref ref;
  memset(&ref, 0, sizeof ref);
  if (r->name.len == 0 || r->name.len >= sizeof ref.name || memchr(r->name.ptr, 0, r->name.len))
    return suiro_set_error(SUIRO_ERR, "channel endpoint: a name of %zu bytes", r->name.len);
  memcpy(ref.name, r->name.ptr, r->name.len);
  ref.side = r->length > 1 ? -1 : (int)r->length;
  ref.token = r->flags;
  return suiro_chan_import(&ref, out);
}

int suiro_chan_side(const suiro_chan *ch) { return handle_ok(ch, HANDLE_CHAN) ? ch->side : -1; }

/* ---- waiting ---------------------------------------------------------------------------------- */

/* One wait of the side `ch` for `ready` (spin, then park in slices). Returns OK when ready says
 * so, else the outcome: TIMEOUT, CLOSED, PEER_GONE (the caller re-checks for data first). */
typedef int (*ready_fn)(suiro_chan *ch);

static suiro_status wait_for(suiro_chan *ch, ready_fn ready, uint64_t deadline) {
  chan_hdr *h = ch->h;
  int rx = ch->side == SUIRO_CHAN_RX;
  _Atomic uint32_t *waiting = rx ? &h->rx_waiting : &h->tx_waiting;
  _Atomic uint32_t *seq = rx ? &h->data_seq : &h->space_seq;
  chan_end *peer = &h->end[1 - ch->side];
  uint64_t start = suiro_ns();
  uint64_t spin_until = start + spin_budget(&ch->spin);
  if (spin_until > deadline) spin_until = deadline;
  for (;;) {
    if (ready(ch)) {
      spin_observe(&ch->spin, suiro_ns() - start);
      return SUIRO_OK;
    }
    if (ld_acq(&peer->closed) || ld_acq(&peer->freed)) return SUIRO_CLOSED;
    uint64_t now = suiro_ns();
    if (now >= deadline) return SUIRO_TIMEOUT;
    if (now < spin_until) {
      for (int i = 0; i < 16; i++) cpu_relax();
      continue;
    }
    atomic_exchange(waiting, 1); /* seq_cst: the announce */
    uint32_t s = ld_acq(seq);
    if (!ready(ch) && !ld_acq(&peer->closed)) {
      uint64_t until = now + SLICE_NS < deadline ? now + SLICE_NS : deadline;
      park_wait(seq, s, until);
    }
    st_rlx(waiting, 0);
    if (!ready(ch) && peer_state(ch, NULL) == SUIRO_CHAN_PEER_DIED) return SUIRO_PEER_GONE;
  }
}

/* ---- sending ---------------------------------------------------------------------------------- */

static uint64_t need_for(suiro_chan *ch, uint64_t need) {
  uint64_t idx = ch->pos & ch->mask, room_end = ch->h->ring - idx;
  return room_end < need ? need + room_end : need;
}

static _Thread_local uint64_t want_bytes;

static int has_room(suiro_chan *ch) {
  chan_hdr *h = ch->h;
  uint64_t total = need_for(ch, want_bytes);
  if (ch->pos + total - ch->cache > h->ring || ch->count - ch->peer_count >= h->capacity) {
    ch->cache = ld_acq(&h->head);
    ch->peer_count = ld_rlx(&h->received);
    if (ch->pos + total - ch->cache > h->ring || ch->count - ch->peer_count >= h->capacity) return 0;
  }
  return 1;
}

/* Where the message of want_bytes goes, room known (a skip fills the ring's end when needed). */
static void *place(suiro_chan *tx) {
  uint64_t idx = tx->pos & tx->mask, room_end = tx->h->ring - idx;
  if (room_end < want_bytes) { /* fill the end with a skip; the message starts at 0 */
    uint32_t *sk = (uint32_t *)(void *)(tx->ring + idx);
    sk[0] = (uint32_t)(room_end - MSG_HDR);
    sk[1] = KIND_SKIP;
    tx->pos += room_end;
    idx = 0;
  }
  return tx->ring + idx + MSG_HDR;
}

/* deadline: the suiro_ns() deadline, or 0 to poll (FULL when there is no room). */
static void *reserve_dl(suiro_chan *tx, size_t len, uint64_t deadline, suiro_status *st) {
  chan_hdr *h = tx->h;
  if (SUIRO_UNLIKELY(len > h->bytes)) {
    *st = suiro_set_error(SUIRO_ERR, "send: a message of %zu bytes is larger than the channel's byte cap (%llu "
                                     "bytes)", len, (unsigned long long)h->bytes);
    return NULL;
  }
  if (SUIRO_UNLIKELY(tx->closed)) {
    *st = suiro_set_error(SUIRO_ERR, "send: this sending end of %s is closed", tx->reg->name);
    return NULL;
  }
  if (SUIRO_UNLIKELY(ld_rlx(&h->end[SUIRO_CHAN_RX].closed))) {
    *st = SUIRO_CLOSED;
    return NULL;
  }
  want_bytes = MSG_HDR + pad8(len);
  if (!has_room(tx)) {
    suiro_chan_flush(tx); /* what is committed must be visible before we wait for room */
    if (deadline == 0) {
      *st = SUIRO_FULL;
      if (ld_acq(&h->end[SUIRO_CHAN_RX].freed)) *st = SUIRO_CLOSED;
      else if (peer_state(tx, NULL) == SUIRO_CHAN_PEER_DIED) *st = SUIRO_PEER_GONE;
      return NULL;
    }
    suiro_status w = wait_for(tx, has_room, deadline);
    if (w != SUIRO_OK) {
      *st = w;
      return NULL;
    }
  }
  *st = SUIRO_OK;
  return place(tx);
}

static uint64_t deadline_or_poll(double timeout) { return timeout == 0 || timeout != timeout ? 0 : deadline_from(timeout); }

static suiro_status tx_guard(suiro_chan *tx, const char *fn) {
  if (SUIRO_UNLIKELY(!handle_ok(tx, HANDLE_CHAN) || tx->state != ST_OWNED)) {
    guard(tx, fn);
    return SUIRO_ERR;
  }
  if (SUIRO_UNLIKELY(tx->side != SUIRO_CHAN_TX))
    return suiro_set_error(SUIRO_ERR, "send: this is the receiving end of %s", tx->reg->name);
  return SUIRO_OK;
}

void *suiro_chan_reserve(suiro_chan *tx, size_t len, double timeout, suiro_status *st) {
  suiro_status dummy;
  if (!st) st = &dummy;
  if ((*st = tx_guard(tx, "suiro_chan_reserve")) != SUIRO_OK) return NULL;
  return reserve_dl(tx, len, deadline_or_poll(timeout), st);
}

void *suiro_chan_try_reserve(suiro_chan *tx, size_t len) {
  if (SUIRO_UNLIKELY(!handle_ok(tx, HANDLE_CHAN) || tx->state != ST_OWNED || tx->side != SUIRO_CHAN_TX)) return NULL;
  chan_hdr *h = tx->h;
  if (SUIRO_UNLIKELY(len > h->bytes || tx->closed || ld_rlx(&h->end[SUIRO_CHAN_RX].closed))) return NULL;
  want_bytes = MSG_HDR + pad8(len);
  if (!has_room(tx)) return NULL;
  return place(tx);
}

void suiro_chan_commit(suiro_chan *tx, size_t len) {
  uint32_t *m = (uint32_t *)(void *)(tx->ring + (tx->pos & tx->mask));
  m[0] = (uint32_t)len;
  m[1] = KIND_MSG;
  uint64_t pad = pad8(len);
  if (pad > len) memset((unsigned char *)(m + 2) + len, 0, pad - len);
  tx->pos += MSG_HDR + pad;
  tx->count++;
}

void suiro_chan_flush(suiro_chan *tx) {
  if (!handle_ok(tx, HANDLE_CHAN) || tx->side != SUIRO_CHAN_TX || tx->pos == tx->published) return;
  st_rlx(&tx->h->sent, tx->count);
  st_rel(&tx->h->tail, tx->pos); /* the one publication */
  tx->published = tx->pos;
  notify_rx(tx);
}

suiro_status suiro_chan_send(suiro_chan *tx, const void *data, size_t len, double timeout) {
  suiro_status st;
  if ((st = tx_guard(tx, "suiro_chan_send")) != SUIRO_OK) return st;
  void *p = reserve_dl(tx, len, deadline_or_poll(timeout), &st);
  if (!p) return st;
  if (len) memcpy(p, data, len);
  suiro_chan_commit(tx, len);
  suiro_chan_flush(tx);
  return SUIRO_OK;
}

suiro_status suiro_chan_send_batch(suiro_chan *tx, const suiro_chan_iov *msgs, size_t n, size_t *sent,
                                   double timeout) {
  size_t dummy;
  if (!sent) sent = &dummy;
  *sent = 0;
  suiro_status st;
  if ((st = tx_guard(tx, "suiro_chan_send_batch")) != SUIRO_OK) return st;
  if (n && !msgs) return suiro_set_error(SUIRO_ERR, "send_batch: msgs is NULL with n = %zu", n);
  for (size_t i = 0; i < n; i++)
    if (msgs[i].len > tx->h->bytes)
      return suiro_set_error(SUIRO_ERR, "send_batch: message %zu of %zu bytes is larger than the channel's byte "
                                        "cap (%llu bytes)", i + 1, msgs[i].len, (unsigned long long)tx->h->bytes);
  uint64_t deadline = deadline_or_poll(timeout);
  for (size_t i = 0; i < n; i++) {
    /* without room, reserve publishes what is committed so far, then waits */
    void *p = reserve_dl(tx, msgs[i].len, deadline, &st);
    if (!p) {
      suiro_chan_flush(tx);
      return st;
    }
    if (msgs[i].len) memcpy(p, msgs[i].data, msgs[i].len);
    suiro_chan_commit(tx, msgs[i].len);
    *sent = i + 1;
  }
  suiro_chan_flush(tx);
  return SUIRO_OK;
}

/* ---- receiving -------------------------------------------------------------------------------- */

static int has_data(suiro_chan *ch) {
  if (ch->pos != ch->cache) return 1;
  ch->cache = ld_acq(&ch->h->tail);
  return ch->pos != ch->cache;
}

void suiro_chan_recv_done(suiro_chan *rx) {
  if (!handle_ok(rx, HANDLE_CHAN) || rx->side != SUIRO_CHAN_RX || rx->view_n == 0) return;
  rx->pos = rx->view_pos;
  rx->count += rx->view_n;
  rx->view_n = 0;
  st_rlx(&rx->h->received, rx->count);
  st_rel(&rx->h->head, rx->pos); /* the one release of the batch's room */
  notify_tx(rx);
}

static size_t take(suiro_chan *rx, suiro_chan_msg *out, size_t max) {
  uint64_t p = rx->pos, t = rx->cache;
  size_t n = 0;
  while (n < max) {
    if (p == t) {
      if (n) break;
      t = rx->cache = ld_acq(&rx->h->tail);
      if (p == t) break;
    }
    uint64_t idx = p & rx->mask;
    const uint32_t *m = (const uint32_t *)(const void *)(rx->ring + idx);
    if (m[1] == KIND_SKIP) {
      p += rx->h->ring - idx;
      continue;
    }
    uint64_t len = m[0];
    if (len > rx->h->bytes || idx + MSG_HDR + pad8(len) > rx->h->ring) { /* a corrupt ring: stop here */
      break;
    }
    out[n].data = m + 2;
    out[n].len = (size_t)len;
    n++;
    p += MSG_HDR + pad8(len);
  }
  rx->view_pos = p;
  rx->view_n = n;
  return n;
}

suiro_status suiro_chan_recv_batch(suiro_chan *rx, suiro_chan_msg *out, size_t max, size_t *n, double timeout) {
  size_t dummy;
  if (!n) n = &dummy;
  *n = 0;
  GUARD(rx, "suiro_chan_recv_batch", SUIRO_ERR);
  if (rx->side != SUIRO_CHAN_RX) return suiro_set_error(SUIRO_ERR, "recv: this is the sending end of %s", rx->reg->name);
  if (!out || max == 0) return suiro_set_error(SUIRO_ERR, "recv_batch: %s", !out ? "out is NULL" : "max must be >= 1");
  if (rx->closed) return suiro_set_error(SUIRO_ERR, "recv: this receiving end of %s is closed", rx->reg->name);
  if (rx->view_n) suiro_chan_recv_done(rx);
  if ((*n = take(rx, out, max)) > 0) return SUIRO_OK;
  uint64_t deadline = deadline_from(timeout);
  suiro_status st = SUIRO_TIMEOUT;
  if (timeout != 0 && deadline != 0) st = wait_for(rx, has_data, deadline);
  else if (ld_acq(&rx->h->end[SUIRO_CHAN_TX].closed)) st = SUIRO_CLOSED;
  else if (peer_state(rx, NULL) == SUIRO_CHAN_PEER_DIED) st = SUIRO_PEER_GONE;
  /* closed or dead: what was published before still comes first */
  if ((*n = take(rx, out, max)) > 0) return SUIRO_OK;
  return st;
}

size_t suiro_chan_try_recv_batch(suiro_chan *rx, suiro_chan_msg *out, size_t max) {
  if (SUIRO_UNLIKELY(!handle_ok(rx, HANDLE_CHAN) || rx->state != ST_OWNED || rx->side != SUIRO_CHAN_RX ||
                     rx->closed || !out || max == 0))
    return 0;
  if (rx->view_n) suiro_chan_recv_done(rx);
  return take(rx, out, max);
}

suiro_status suiro_chan_recv(suiro_chan *rx, void *buf, size_t cap, size_t *len, double timeout) {
  suiro_chan_msg m;
  size_t n;
  suiro_status st = suiro_chan_recv_batch(rx, &m, 1, &n, timeout);
  if (st != SUIRO_OK) return st;
  if (len) *len = m.len;
  if (m.len > cap) {
    rx->view_n = 0; /* left queued */
    return suiro_set_error(SUIRO_ERR, "recv: a message of %zu bytes does not fit the buffer of %zu", m.len, cap);
  }
  if (m.len) memcpy(buf, m.data, m.len);
  suiro_chan_recv_done(rx);
  return SUIRO_OK;
}

/* ---- the event fd ----------------------------------------------------------------------------- */

static void follow_owner(suiro_chan *rx) {
  uint64_t w = ld_acq(&rx->h->end[SUIRO_CHAN_TX].owner);
  uint64_t me = self_word(NULL);
  if (w == rx->pid_owner) return;
  if (rx->pidfd >= 0) {
    epoll_ctl(rx->epfd, EPOLL_CTL_DEL, rx->pidfd, NULL);
    close(rx->pidfd);
    rx->pidfd = -1;
  }
  rx->pid_owner = w;
  if (w == 0 || w == me) return;
#ifdef SYS_pidfd_open
  int fd = (int)syscall(SYS_pidfd_open, (pid_t)(w >> 32), 0);
  if (fd >= 0) {
    struct epoll_event ev = { .events = EPOLLIN, .data = { .fd = fd } };
    if (epoll_ctl(rx->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) rx->pidfd = fd;
    else close(fd);
  }
#endif
}

int suiro_chan_eventfd(suiro_chan *rx) {
  GUARD(rx, "suiro_chan_eventfd", -1);
  if (rx->side != SUIRO_CHAN_RX)
    return suiro_set_error(SUIRO_ERR, "eventfd: this is the sending end of %s (the receiving end has the fd)",
                           rx->reg->name), -1;
  if (rx->epfd < 0) {
    char path[128];
    fifo_path(rx->reg->name, path, sizeof path);
    int f = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC); /* a writer of our own: never hung up */
    if (f < 0) return suiro_set_errno("channel eventfd: opening its FIFO"), -1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data = { .fd = f } };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, f, &ev) != 0) {
      suiro_set_errno("channel eventfd: epoll");
      close(f);
      if (ep >= 0) close(ep);
      return -1;
    }
    rx->fifo = f;
    rx->epfd = ep;
  }
  follow_owner(rx);
  atomic_store(&rx->h->rx_armed, 1); /* seq_cst: armed before the caller looks for messages */
  return rx->epfd;
}

void suiro_chan_event_ack(suiro_chan *rx) {
  if (!handle_ok(rx, HANDLE_CHAN) || rx->state != ST_OWNED || rx->side != SUIRO_CHAN_RX || rx->fifo < 0) return;
  char buf[256];
  while (read(rx->fifo, buf, sizeof buf) > 0) {
  }
  follow_owner(rx);
  atomic_store(&rx->h->rx_armed, 1);
}

/* ---- status ----------------------------------------------------------------------------------- */

suiro_status suiro_chan_status(suiro_chan *ch, suiro_chan_stats *st) {
  GUARD(ch, "suiro_chan_status", SUIRO_ERR);
  if (!st) return suiro_set_error(SUIRO_ERR, "suiro_chan_status: st is NULL");
  memset(st, 0, sizeof *st);
  chan_hdr *h = ch->h;
  st->sent = ch->side == SUIRO_CHAN_TX ? ch->count : ld_acq(&h->sent);
  st->received = ch->side == SUIRO_CHAN_RX ? ch->count + ch->view_n : ld_acq(&h->received);
  st->queued = st->sent > st->received ? st->sent - st->received : 0;
  st->capacity = h->capacity;
  st->bytes = (size_t)h->bytes;
  st->side = ch->side;
  st->closed = ch->closed;
  st->peer = peer_state(ch, &st->peer_pid);
  return SUIRO_OK;
}
