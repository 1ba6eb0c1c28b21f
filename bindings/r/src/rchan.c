/*
 * rchan.c — channels in R (suiro_channel(); engine/include/suiro_chan.h): endpoint objects, send
 * and receive, status, their wire form (renc.c / rdec.c call rs_chan_export / rs_chan_from_ref),
 * and suiro_recv_async's watcher.
 *
 * An endpoint is an external pointer of class "suiro_endpoint" over an rchan. Every message is
 * one wire value in the portable (strict) encoding, since any language may receive it; large
 * vectors cross by reference. Outcomes are the face's sentinels (suiro_timeout, suiro_closed,
 * suiro_full); a dead peer signals a condition of class suiro_error_peer_died after the queued
 * messages; misuse is an error naming the argument. Waits go through rs_wait (slices with
 * R_CheckUserInterrupt between them); an interrupt leaves the endpoint usable.
 *
 * Sending an endpoint: renc.c writes its reference (suiro_chan_put, which exports it) and links
 * the rchan into the encoder's list; when the message went out (rs_encoder_sent, then cleanup)
 * the handle is freed here (the endpoint is the receiver's); when it did not (an error, a full
 * queue) the endpoint is taken back (suiro_chan_unexport) and stays usable.
 *
 * Async (suiro_recv_async, R/channel.R): a watcher thread per receiving end sleeps on the
 * endpoint's event fd and schedules one callback on later's loop (rwatch.c, shared with
 * rasync.c); the callback re-arms the fd and calls R (.suiro_chan_fire), which receives with
 * timeout 0 for each pending promise in order. Threads and hand-over as in rwatch.c: the thread
 * only polls fds and calls later; after scheduling it waits until the callback has re-armed the
 * fd and called rs_watch_release. While no promise is pending the callback leaves the thread
 * waiting (no wake-up per message nobody awaits); the next suiro_recv_async re-arms and
 * releases it.
 */
#include <stdlib.h>
#include <string.h>

#include "rsuiro.h"
#include "rwatch.h"
#include "suiro_chan.h"

typedef struct cwatch cwatch;

typedef struct rchan {
  suiro_chan *ch;          /* NULL once sent away */
  int side;
  int exported;            /* written into a message that is not sent yet */
  struct rchan *enc_next;  /* the encoder's list of exported endpoints */
  cwatch *watch;           /* suiro_recv_async's watcher, or NULL */
} rchan;

static SEXP cls_endpoint, tag_endpoint;


/* ---- the async watcher --------------------------------------------------------------------------- */

static double n_wakeups; /* callbacks that found the endpoint live (main thread; for the tests) */

struct cwatch {
  rs_watch *rw;  /* the thread on the endpoint's event fd (rwatch.c) */
  SEXP ep;       /* main thread: the endpoint (not preserved: the watch ends before it is freed) */
  int npending;  /* promises waiting (main thread; R/channel.R holds them) */
  int idle;      /* the thread waits on ack while nothing is pending */
  int kicked;    /* a kick callback is scheduled */
};

static void wake_thread(cwatch *w) { rs_watch_release(w->rw); }

/* Hands the pending promises to R, which receives for them in order; R returns how many still
 * wait (a message may not be there yet: the watcher's next event). */
static void fire(cwatch *w) {
  n_wakeups++;
  SEXP fn = PROTECT(rs_call_fn("suiro", ".suiro_chan_fire"));
  SEXP call = PROTECT(Rf_lang2(fn, w->ep));
  int err = 0;
  SEXP left = R_tryEvalSilent(call, R_GlobalEnv, &err);
  w->npending = err ? 0 : Rf_asInteger(left);
  if (w->npending == NA_INTEGER) w->npending = 0;
  UNPROTECT(2);
}

static void on_news(void *p) { /* main thread, from later's loop: the fd fired (watch running) */
  cwatch *w = p;
  rchan *c = R_ExternalPtrAddr(w->ep);
  if (w->npending > 0 && c && c->ch) {
    suiro_chan_event_ack(c->ch);
    fire(w);
  }
  if (w->npending > 0) wake_thread(w);
  else w->idle = 1; /* the fd stays readable: the thread waits until a promise comes */
}

static void on_kick(void *p) { /* (watch running) */
  cwatch *w = p;
  w->kicked = 0;
  if (w->npending > 0) fire(w);
}

static void watch_stop(rchan *c) {
  cwatch *w = c->watch;
  if (!w) return;
  c->watch = NULL;
  rs_watch_stop(w->rw); /* no callback of it calls in here from now on */
  free(w);
}

/* ---- endpoints ------------------------------------------------------------------------------------ */

static void ep_finalize(SEXP x) {
  rchan *c = R_ExternalPtrAddr(x);
  if (!c) return;
  watch_stop(c);
  if (c->ch) suiro_chan_free(c->ch); /* closes an end still owned here */
  free(c);
  R_ClearExternalPtr(x);
}

static SEXP wrap(suiro_chan *ch) {
  rchan *c = calloc(1, sizeof *c);
  if (!c) {
    suiro_chan_free(ch);
    Rf_error("suiro_channel: out of memory");
  }
  c->ch = ch;
  c->side = suiro_chan_side(ch);
  SEXP x = PROTECT(R_MakeExternalPtr(c, tag_endpoint, R_NilValue));
  R_RegisterCFinalizerEx(x, ep_finalize, TRUE);
  Rf_setAttrib(x, R_ClassSymbol, cls_endpoint);
  UNPROTECT(1);
  return x;
}

static const char *side_word(int side) { return side == SUIRO_CHAN_TX ? "sending end" : "receiving end"; }

static int is_endpoint(SEXP x) { return TYPEOF(x) == EXTPTRSXP && R_ExternalPtrTag(x) == tag_endpoint; }

/* The endpoint argument: side -1 (either), SUIRO_CHAN_TX or SUIRO_CHAN_RX; errors name it. */
static rchan *ep_of(SEXP x, int side, const char *verb, const char *arg) {
  if (!is_endpoint(x)) {
    SEXP cls = Rf_getAttrib(x, R_ClassSymbol);
    Rf_error("%s: %s must be a channel endpoint (suiro_channel()$%s), got %s", verb, arg,
             side == SUIRO_CHAN_RX ? "rx" : "tx",
             cls != R_NilValue ? CHAR(STRING_ELT(cls, 0)) : Rf_type2char(TYPEOF(x)));
  }
  rchan *c = R_ExternalPtrAddr(x);
  if (!c || !c->ch) Rf_error("%s: this channel endpoint was sent to another process", verb);
  if (c->exported) Rf_error("%s: this channel endpoint is being sent", verb);
  if (side >= 0 && c->side != side)
    Rf_error("%s: %s is the %s of the channel (only the %s %s)", verb, arg, side_word(c->side), side_word(side),
             side == SUIRO_CHAN_TX ? "sends" : "receives");
  return c;
}

void rs_chan_init(void) {
  cls_endpoint = Rf_mkString("suiro_endpoint");
  R_PreserveObject(cls_endpoint);
  tag_endpoint = Rf_install("suiro_endpoint");
}

/* .Call(C_chan_new, capacity, bytes) -> list(tx = , rx = ) */
SEXP C_chan_new(SEXP capacity, SEXP bytes) {
  suiro_chan_opts o;
  suiro_chan_opts_init(&o);
  if ((TYPEOF(capacity) != REALSXP && TYPEOF(capacity) != INTSXP) || XLENGTH(capacity) != 1)
    Rf_error("suiro_channel: capacity must be a number of messages");
  double cap = Rf_asReal(capacity);
  if (!(cap >= 1 && cap <= SUIRO_CHAN_MAX_CAPACITY) || cap != (double)(long long)cap)
    Rf_error("suiro_channel: capacity must be a whole number of messages in 1..%u, got %g", SUIRO_CHAN_MAX_CAPACITY, cap);
  o.capacity = (uint32_t)cap;
  if (bytes != R_NilValue) {
    if ((TYPEOF(bytes) != REALSXP && TYPEOF(bytes) != INTSXP) || XLENGTH(bytes) != 1)
      Rf_error("suiro_channel: bytes must be a number of bytes");
    double b = Rf_asReal(bytes);
    if (!(b >= (double)SUIRO_CHAN_MIN_BYTES && b <= (double)SUIRO_CHAN_MAX_BYTES) || b != (double)(long long)b)
      Rf_error("suiro_channel: bytes must be a whole number in %zu..%zu, got %g", SUIRO_CHAN_MIN_BYTES, SUIRO_CHAN_MAX_BYTES, b);
    o.bytes = (size_t)b;
  }
  suiro_chan *tx, *rx;
  suiro_status st;
  st = suiro_chan_create(&o, &tx, &rx);
  if (st != SUIRO_OK) Rf_error("suiro_channel: %s", suiro_last_error());
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 2));
  SET_STRING_ELT(nm, 0, Rf_mkChar("tx"));
  SET_STRING_ELT(nm, 1, Rf_mkChar("rx"));
  Rf_setAttrib(out, R_NamesSymbol, nm);
  SEXP a = wrap(tx);
  SET_VECTOR_ELT(out, 0, a);
  SET_VECTOR_ELT(out, 1, wrap(rx));
  UNPROTECT(2);
  return out;
}

/* ---- outcomes ------------------------------------------------------------------------------------- */

static SEXP cond_new(const char *cls, const char *msg, int pid) {
  const char *names[3] = { "message", "call", "pid" };
  SEXP values[3] = { PROTECT(Rf_mkString(msg)), R_NilValue, R_NilValue };
  if (pid > 0) values[2] = PROTECT(Rf_ScalarInteger(pid));
  SEXP x = rs_condition(cls, pid > 0 ? 3 : 2, names, values);
  UNPROTECT(pid > 0 ? 2 : 1);
  return x;
}

static void __attribute__((noreturn)) raise_cond(SEXP cond) {
  PROTECT(cond);
  SEXP call = PROTECT(Rf_lang2(Rf_install("stop"), cond));
  Rf_eval(call, R_BaseEnv);
  UNPROTECT(2);
  Rf_error("unreachable");
}

static SEXP outcome(rchan *c, suiro_status st, const char *verb) {
  switch (st) {
  case SUIRO_TIMEOUT: return rs_sentinel(c->side == SUIRO_CHAN_TX ? "full" : "timeout");
  case SUIRO_FULL: return rs_sentinel("full");
  case SUIRO_CLOSED: return rs_sentinel("closed");
  case SUIRO_PEER_GONE: {
    suiro_chan_stats s;
    int pid = suiro_chan_status(c->ch, &s) == SUIRO_OK ? s.peer_pid : 0;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: the %s of the channel died (process %d)", verb,
             c->side == SUIRO_CHAN_TX ? "receiving end's owner" : "sending end's owner", pid);
    raise_cond(cond_new("suiro_error_peer_died", msg, pid));
  }
  default: Rf_error("%s: %s", verb, suiro_last_error());
  }
}

/* ---- sending -------------------------------------------------------------------------------------- */

typedef struct send_job {
  rs_encoder e;
  int live;          /* e holds a message not yet queued */
  rchan *c;
  SEXP values;       /* one value (send) or a list (send_batch) */
  int batch;
  double timeout;
  const char *verb;
  const void *buf;
  size_t len;
} send_job;

static suiro_status step_put(void *ctx, double slice) {
  send_job *j = ctx;
  suiro_status st;
  void *p;
  p = suiro_chan_reserve(j->c->ch, j->len, slice, &st);
  if (!p) return st;
  memcpy(p, j->buf, j->len);
  suiro_chan_commit(j->c->ch, j->len);
  return SUIRO_OK;
}

/* Queues one value (not yet published): SUIRO_OK or the outcome. */
static suiro_status put_one(send_job *j, SEXP v, const char *what) {
  rs_enc_opts o = { 0, 1, "a channel's receiver" };
  rs_encoder_init(&j->e, &o);
  j->live = 1;
  rs_enc_prescan(&j->e, v);
  rs_enc_value(&j->e, v, what);
  rs_encoder_finish(&j->e, &j->buf, &j->len);
  suiro_status st = rs_wait(NULL, j->timeout, step_put, j);
  if (st == SUIRO_OK) rs_encoder_sent(&j->e); /* the message in the ring owns its grants */
  rs_encoder_cleanup(&j->e);
  j->live = 0;
  return st;
}

static SEXP send_run(void *p) {
  send_job *j = p;
  if (!j->batch) {
    suiro_status st = put_one(j, j->values, "value");
    suiro_chan_flush(j->c->ch);
    return st == SUIRO_OK ? Rf_ScalarLogical(1) : outcome(j->c, st, j->verb);
  }
  R_xlen_t n = XLENGTH(j->values);
  char what[48];
  for (R_xlen_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "values[[%.0f]]", (double)i + 1);
    suiro_status st = put_one(j, VECTOR_ELT(j->values, i), what);
    if (st != SUIRO_OK) {
      suiro_chan_flush(j->c->ch);
      return outcome(j->c, st, j->verb);
    }
  }
  suiro_chan_flush(j->c->ch);
  return Rf_ScalarLogical(1);
}

static void send_clean(void *p) {
  send_job *j = p;
  if (j->live) rs_encoder_cleanup(&j->e);
  if (j->c->ch) suiro_chan_flush(j->c->ch); /* what was queued before an error goes */
}

static SEXP do_send(SEXP tx, SEXP values, SEXP timeout, int batch, const char *verb) {
  send_job j;
  j.c = ep_of(tx, SUIRO_CHAN_TX, verb, "tx");
  if (batch && TYPEOF(values) != VECSXP) Rf_error("%s: values must be a list, got %s", verb, Rf_type2char(TYPEOF(values)));
  j.timeout = rs_timeout_arg(timeout, -1, verb);
  j.values = values;
  j.batch = batch;
  j.verb = verb;
  j.live = 0;
  return R_ExecWithCleanup(send_run, &j, send_clean, &j);
}

SEXP C_chan_send(SEXP tx, SEXP value, SEXP timeout) { return do_send(tx, value, timeout, 0, "suiro_send"); }
SEXP C_chan_send_batch(SEXP tx, SEXP values, SEXP timeout) { return do_send(tx, values, timeout, 1, "suiro_send_batch"); }

/* ---- receiving ------------------------------------------------------------------------------------ */

typedef struct recv_job {
  rchan *c;
  suiro_chan_msg *views;
  size_t max, n;
  int batch;
  int taken;         /* views are held: recv_done in the cleanup */
  double timeout;
  const char *verb;
} recv_job;

static suiro_status step_take(void *ctx, double slice) {
  recv_job *j = ctx;
  return suiro_chan_recv_batch(j->c->ch, j->views, j->max, &j->n, slice);
}

static SEXP decode_msg(const suiro_chan_msg *m) {
  rs_dec_opts o = { 0, NULL, "message", NULL, "a channel's sender" };
  return rs_decode(m->data, m->len, &o);
}

static SEXP recv_run(void *p) {
  recv_job *j = p;
  suiro_status st = rs_wait(NULL, j->timeout, step_take, j);
  if (st != SUIRO_OK) return outcome(j->c, st, j->verb);
  j->taken = 1;
  if (!j->batch) return decode_msg(&j->views[0]); /* a decode error leaves it taken: it never would decode */
  SEXP out = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)j->n));
  for (size_t i = 0; i < j->n; i++) SET_VECTOR_ELT(out, (R_xlen_t)i, decode_msg(&j->views[i]));
  UNPROTECT(1);
  return out;
}

static void recv_clean(void *p) {
  recv_job *j = p;
  if (j->taken && j->c->ch) suiro_chan_recv_done(j->c->ch);
}

SEXP C_chan_recv(SEXP rx, SEXP timeout) {
  recv_job j;
  suiro_chan_msg m;
  j.c = ep_of(rx, SUIRO_CHAN_RX, "suiro_recv", "rx");
  j.timeout = rs_timeout_arg(timeout, -1, "suiro_recv");
  j.views = &m;
  j.max = 1;
  j.n = 0;
  j.batch = 0;
  j.taken = 0;
  j.verb = "suiro_recv";
  return R_ExecWithCleanup(recv_run, &j, recv_clean, &j);
}

SEXP C_chan_recv_batch(SEXP rx, SEXP max, SEXP timeout) {
  recv_job j;
  j.c = ep_of(rx, SUIRO_CHAN_RX, "suiro_recv_batch", "rx");
  if ((TYPEOF(max) != REALSXP && TYPEOF(max) != INTSXP) || XLENGTH(max) != 1)
    Rf_error("suiro_recv_batch: max must be a number of messages");
  double mx = Rf_asReal(max);
  if (!(mx >= 1 && mx <= (1 << 20)) || mx != (double)(long)mx)
    Rf_error("suiro_recv_batch: max must be a whole number in 1..%d, got %g", 1 << 20, mx);
  j.timeout = rs_timeout_arg(timeout, -1, "suiro_recv_batch");
  j.max = (size_t)mx;
  j.views = (suiro_chan_msg *)R_alloc(j.max, sizeof *j.views);
  j.n = 0;
  j.batch = 1;
  j.taken = 0;
  j.verb = "suiro_recv_batch";
  return R_ExecWithCleanup(recv_run, &j, recv_clean, &j);
}

/* ---- close, status, side -------------------------------------------------------------------------- */

SEXP C_chan_close(SEXP x) {
  rchan *c = ep_of(x, -1, "suiro_close", "x");
  suiro_status st;
  st = suiro_chan_close(c->ch);
  if (st != SUIRO_OK) Rf_error("suiro_close: %s", suiro_last_error());
  return R_NilValue;
}

SEXP C_chan_status(SEXP x) {
  rchan *c = ep_of(x, -1, "suiro_channel_status", "x");
  suiro_chan_stats s;
  if (suiro_chan_status(c->ch, &s) != SUIRO_OK) Rf_error("suiro_channel_status: %s", suiro_last_error());
  static const char *const names[] = { "side", "queued", "sent", "received", "capacity", "bytes", "closed", "peer",
                                       "peer_pid" };
  static const char *const peers[] = { "open", "closed", "died", "moving" };
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 9));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, 9));
  for (int i = 0; i < 9; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  SET_VECTOR_ELT(out, 0, Rf_mkString(s.side == SUIRO_CHAN_TX ? "tx" : "rx"));
  SET_VECTOR_ELT(out, 1, Rf_ScalarReal((double)s.queued));
  SET_VECTOR_ELT(out, 2, Rf_ScalarReal((double)s.sent));
  SET_VECTOR_ELT(out, 3, Rf_ScalarReal((double)s.received));
  SET_VECTOR_ELT(out, 4, Rf_ScalarReal((double)s.capacity));
  SET_VECTOR_ELT(out, 5, Rf_ScalarReal((double)s.bytes));
  SET_VECTOR_ELT(out, 6, Rf_ScalarLogical(s.closed != 0));
  SET_VECTOR_ELT(out, 7, Rf_mkString(peers[s.peer & 3]));
  SET_VECTOR_ELT(out, 8, Rf_ScalarInteger(s.peer_pid));
  Rf_setAttrib(out, R_NamesSymbol, nm);
  UNPROTECT(2);
  return out;
}

/* .Call(C_chan_side, x) -> "tx", "rx", or "sent" (sent away); NULL when x is not an endpoint */
SEXP C_chan_side(SEXP x) {
  if (!is_endpoint(x)) return R_NilValue;
  rchan *c = R_ExternalPtrAddr(x);
  if (!c || !c->ch) return Rf_mkString("sent");
  return Rf_mkString(c->side == SUIRO_CHAN_TX ? "tx" : "rx");
}

/* ---- async ---------------------------------------------------------------------------------------- */

static void start_watch(SEXP x, rchan *c) {
  rs_later_need("suiro_recv_async");
  cwatch *w = calloc(1, sizeof *w);
  if (!w) Rf_error("suiro_recv_async: out of memory");
  w->ep = x;
  w->rw = rs_watch_start(suiro_chan_eventfd(c->ch), on_news, w); /* arms it */
  if (!w->rw) {
    free(w);
    Rf_error("suiro_recv_async: cannot start the event watcher (%s)", suiro_last_error());
  }
  c->watch = w;
}

/* .Call(C_chan_async_arm, rx, npending): R/channel.R queued a promise (npending wait now); the
 * watcher is started or released, and a kick is scheduled when something is there already. */
SEXP C_chan_async_arm(SEXP x, SEXP npending) {
  rchan *c = ep_of(x, SUIRO_CHAN_RX, "suiro_recv_async", "rx");
  if (!c->watch) start_watch(x, c);
  cwatch *w = c->watch;
  w->ep = x;
  w->npending = Rf_asInteger(npending);
  if (w->idle) { /* the thread waits on ack: re-arm the fd, then let it poll again */
    w->idle = 0;
    suiro_chan_event_ack(c->ch);
    wake_thread(w);
  }
  suiro_chan_stats s;
  int ready = suiro_chan_status(c->ch, &s) == SUIRO_OK &&
              (s.queued > 0 || s.closed || s.peer == SUIRO_CHAN_PEER_CLOSED || s.peer == SUIRO_CHAN_PEER_DIED);
  if (ready && !w->kicked) {
    w->kicked = 1;
    rs_watch_kick(w->rw, on_kick);
  }
  return R_NilValue;
}

/* .Call(C_chan_async_count, rx, npending): promises left after a timeout removed one. */
SEXP C_chan_async_count(SEXP x, SEXP npending) {
  rchan *c = is_endpoint(x) ? R_ExternalPtrAddr(x) : NULL;
  if (c && c->watch) c->watch->npending = Rf_asInteger(npending);
  return R_NilValue;
}

/* .Call(C_chan_async_env, rx): the environment holding rx's pending promises (R/channel.R). */
SEXP C_chan_async_env(SEXP x) {
  ep_of(x, SUIRO_CHAN_RX, "suiro_recv_async", "rx");
  SEXP env = R_ExternalPtrProtected(x);
  if (env == R_NilValue) {
    env = PROTECT(R_NewEnv(R_EmptyEnv, 0, 8));
    R_SetExternalPtrProtected(x, env);
    UNPROTECT(1);
  }
  return env;
}

SEXP C_chan_async_counts(void) { return Rf_ScalarReal(n_wakeups); }

/* ---- the wire form (renc.c, rdec.c) --------------------------------------------------------------- */

int rs_chan_is(SEXP x) { return is_endpoint(x); }

const char *rs_chan_export(SEXP x, wire_writer *w, void **list) {
  rchan *c = R_ExternalPtrAddr(x);
  if (!c || !c->ch) return "a channel endpoint that was sent away already cannot be sent again";
  if (c->exported) return "a channel endpoint cannot be sent twice in one message";
  if (c->watch) {
    if (c->watch->npending > 0) return "a receiving end with suiro_recv_async promises pending cannot be sent";
    watch_stop(c);
  }
  int rc;
  rc = suiro_chan_put(w, c->ch);
  if (rc != WIRE_OK) return suiro_last_error();
  c->exported = 1;
  c->enc_next = *list;
  *list = c;
  return NULL;
}

void rs_chan_exports_done(void *list, int sent) {
  for (rchan *c = list, *next; c; c = next) {
    next = c->enc_next;
    c->enc_next = NULL;
    c->exported = 0;
    if (!c->ch) continue;
    if (sent) {
      suiro_chan_free(c->ch); /* the receiver's now: this handle only unmaps */
      c->ch = NULL;
    } else {
      suiro_chan_unexport(c->ch); /* never went: ours again */
    }
  }
}

SEXP rs_chan_from_ref(const wire_ref *r) {
  suiro_chan *ch;
  suiro_status st;
  st = suiro_chan_open(r, &ch);
  if (st != SUIRO_OK) return NULL;
  return wrap(ch);
}
