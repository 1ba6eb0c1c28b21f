/*
 * lchan.c — channels in Lua (suiro.channel; engine/include/suiro_chan.h): endpoint userdata,
 * their methods, their wire form (lenc.c / ldec.c call lchan_encode / lchan_push_ref), and the
 * wait of suiro.run on pools and channels together (core.wait_any).
 *
 * Every message is one wire value (lenc.c); nil is refused, so that recv's nil always comes with
 * a reason. Outcomes are values (`nil, "full" | "closed" | "timeout"`); misuse raises a message
 * naming the argument; a dead peer raises an error object of class "peer_died" (lerror.c). Long
 * waits are cut in slices so that Ctrl-C ends them (lpool_check_interrupt).
 */
#include <poll.h>
#include <string.h>

#include "lsuiro.h"
#include "suiro_chan.h"

const char lsuiro_key_chan;

typedef struct lchan {
  suiro_chan *ch;
  int side;
} lchan;

static lchan *check_chan(lua_State *L, int idx, const char *verb) {
  lchan *c = lsuiro_testud(L, idx, &lsuiro_key_chan);
  if (!c) luaL_error(L, "%s: argument %d must be a channel endpoint, got %s", verb, idx, luaL_typename(L, idx));
  if (!c->ch || suiro_chan_given(c->ch))
    luaL_error(L, "%s: this channel endpoint was sent to another process or freed", verb);
  return c;
}

static lchan *check_side(lua_State *L, int side, const char *verb) {
  lchan *c = check_chan(L, 1, verb);
  if (c->side != side)
    luaL_error(L, "%s: this is the %s of the channel (%s)", verb, c->side == SUIRO_CHAN_TX ? "sending end" : "receiving end",
               side == SUIRO_CHAN_TX ? "only the sending end sends" : "only the receiving end receives");
  return c;
}

static void push_chan(lua_State *L, suiro_chan *ch) {
  lchan *c = lua_newuserdatauv(L, sizeof *c, 0);
  c->ch = ch;
  c->side = suiro_chan_side(ch);
  lsuiro_setmt(L, &lsuiro_key_chan);
}

/* Raises the error object of class peer_died. */
static int raise_peer_died(lua_State *L, lchan *c, const char *verb) {
  suiro_chan_stats s;
  int pid = 0;
  if (suiro_chan_status(c->ch, &s) == SUIRO_OK) pid = s.peer_pid;
  const char *msg = lua_pushfstring(L, "%s: the %s of the channel died (process %d)", verb,
                                    c->side == SUIRO_CHAN_TX ? "receiving end's owner" : "sending end's owner", pid);
  lerror_push(L, "peer_died", 9, msg, strlen(msg), "", 0, -1);
  if (pid > 0) {
    lua_pushinteger(L, pid);
    lua_setfield(L, -2, "pid");
  }
  return lua_error(L);
}

static int outcome(lua_State *L, lchan *c, suiro_status st, const char *verb) {
  switch (st) {
  case SUIRO_TIMEOUT: lua_pushnil(L); lua_pushliteral(L, "timeout"); return 2;
  case SUIRO_FULL: lua_pushnil(L); lua_pushliteral(L, "full"); return 2;
  case SUIRO_CLOSED: lua_pushnil(L); lua_pushliteral(L, "closed"); return 2;
  case SUIRO_PEER_GONE: return raise_peer_died(L, c, verb);
  default: return luaL_error(L, "%s: %s", verb, suiro_last_error());
  }
}

static double opt_timeout(lua_State *L, int idx, const char *verb) {
  if (lua_isnoneornil(L, idx)) return -1;
  return lpool_seconds(L, idx, verb, "timeout");
}

/* The slices of a long wait: at most 100 ms each, with an interrupt check between. */
#define SLICE 0.1
static double slice_of(double left) { return left < 0 || left > SLICE ? SLICE : left; }

/* suiro.channel { capacity =, bytes = } -> tx, rx */
static int l_channel(lua_State *L) {
  suiro_chan_opts o;
  suiro_chan_opts_init(&o);
  if (!lua_isnoneornil(L, 1)) {
    luaL_argexpected(L, lua_istable(L, 1), 1, "table of options");
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (!k || (strcmp(k, "capacity") && strcmp(k, "bytes")))
        return luaL_error(L, "suiro.channel: unknown option %s (capacity, bytes)",
                          k ? k : luaL_tolstring(L, -2, NULL));
      lua_Integer v;
      int isint;
      v = lua_tointegerx(L, -1, &isint);
      if (!isint) return luaL_error(L, "suiro.channel: %s must be an integer, got %s", k, luaL_typename(L, -1));
      if (!strcmp(k, "capacity")) {
        if (v < 1 || v > SUIRO_CHAN_MAX_CAPACITY)
          return luaL_error(L, "suiro.channel: capacity must be 1..%d messages, got %I", (int)SUIRO_CHAN_MAX_CAPACITY, v);
        o.capacity = (uint32_t)v;
      } else {
        if (v < (lua_Integer)SUIRO_CHAN_MIN_BYTES || v > (lua_Integer)SUIRO_CHAN_MAX_BYTES)
          return luaL_error(L, "suiro.channel: bytes must be %d..%I, got %I", (int)SUIRO_CHAN_MIN_BYTES,
                            (lua_Integer)SUIRO_CHAN_MAX_BYTES, v);
        o.bytes = (size_t)v;
      }
      lua_pop(L, 1);
    }
  }
  suiro_chan *tx, *rx;
  if (suiro_chan_create(&o, &tx, &rx) != SUIRO_OK) return luaL_error(L, "suiro.channel: %s", suiro_last_error());
  push_chan(L, tx);
  push_chan(L, rx);
  return 2;
}

/* Encodes the value at idx as one message into the ring (reserve, encode, commit): 0 OK, else
 * the outcome of the reserve. The encoder's own buffer is used, then copied once. */
static suiro_status put_one(lua_State *L, lchan *c, int idx, double timeout, const char *verb, suiro_msg *m) {
  if (lua_isnil(L, idx))
    luaL_error(L, "%s: nil cannot be sent on a channel (recv answers nil only with a reason)", verb);
  /* a pool without a handle: large arrays may go by reference (lenc.c asks for a pool), functions
   * are refused ("a function cannot be sent here": no pool to publish their code in) */
  static lpool no_pool;
  lcodec_ctx cx = { .L = L, .pool = &no_pool, .verb = verb, .msg = m };
  lcodec_encode_value(&cx, idx, suiro_msg_writer(m));
  const void *buf;
  size_t len;
  if (suiro_msg_finish(m, &buf, &len) != 0) {
    lua_pushfstring(L, "%s: %s", verb, wire_writer_error(suiro_msg_writer(m)));
    suiro_msg_free(m);
    lua_error(L);
  }
  suiro_status st = SUIRO_TIMEOUT;
  double left = timeout;
  double t0 = timeout > 0 ? suiro_now() : 0;
  for (;;) {
    void *p = suiro_chan_reserve(c->ch, len, timeout == 0 ? 0 : slice_of(left), &st);
    if (p) {
      memcpy(p, buf, len);
      suiro_chan_commit(c->ch, len);
      suiro_msg_sent(m);
      return SUIRO_OK;
    }
    if (st != SUIRO_TIMEOUT && st != SUIRO_FULL) break;
    if (timeout == 0) break;
    if (timeout > 0) {
      left = timeout - (suiro_now() - t0);
      if (left <= 0) break;
    }
    lpool_check_interrupt(L);
  }
  suiro_msg_free(m);
  return st == SUIRO_TIMEOUT ? SUIRO_FULL : st;
}

/* tx:send(v, [timeout]) -> true | nil, "full" | nil, "closed" */
static int l_send(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_TX, "send");
  luaL_checkany(L, 2);
  double timeout = opt_timeout(L, 3, "send");
  _Alignas(8) unsigned char stack[256];
  suiro_msg m;
  suiro_msg_init(&m, stack, sizeof stack);
  suiro_status st = put_one(L, c, 2, timeout, "send", &m);
  suiro_chan_flush(c->ch);
  if (st != SUIRO_OK) return outcome(L, c, st, "send");
  lua_pushboolean(L, 1);
  return 1;
}

/* tx:send_batch(list, [timeout]) -> true | nil, "full" | "closed", sent: one publication per
 * room's worth of messages. */
static int l_send_batch(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_TX, "send_batch");
  luaL_argexpected(L, lua_istable(L, 2), 2, "list of values");
  double timeout = opt_timeout(L, 3, "send_batch");
  lua_Integer n;
  if (lua_getfield(L, 2, "n") == LUA_TNUMBER) n = lua_tointeger(L, -1);
  else n = (lua_Integer)lua_rawlen(L, 2);
  lua_pop(L, 1);
  _Alignas(8) unsigned char stack[256];
  suiro_msg m;
  suiro_msg_init(&m, stack, sizeof stack);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    suiro_status st = put_one(L, c, lua_gettop(L), timeout, "send_batch", &m);
    lua_pop(L, 1);
    if (st != SUIRO_OK) {
      suiro_chan_flush(c->ch);
      int r = outcome(L, c, st, "send_batch");
      lua_pushinteger(L, i - 1);
      return r + 1;
    }
  }
  suiro_chan_flush(c->ch);
  lua_pushboolean(L, 1);
  return 1;
}

/* Waits for messages in slices; OK with *n views, or the outcome. */
static suiro_status take(lua_State *L, lchan *c, suiro_chan_msg *views, size_t max, size_t *n, double timeout) {
  double t0 = timeout > 0 ? suiro_now() : 0, left = timeout;
  for (;;) {
    suiro_status st = suiro_chan_recv_batch(c->ch, views, max, n, timeout == 0 ? 0 : slice_of(left));
    if (st != SUIRO_TIMEOUT || timeout == 0) return st;
    if (timeout > 0) {
      left = timeout - (suiro_now() - t0);
      if (left <= 0) return SUIRO_TIMEOUT;
    }
    lpool_check_interrupt(L);
  }
}

static void push_message(lua_State *L, lchan *c, const suiro_chan_msg *v) {
  if (lcodec_decode_value(L, v->data, v->len, 0) != 1) {
    suiro_chan_recv_done(c->ch);
    luaL_error(L, "recv: a message did not decode to one value");
  }
}

/* rx:recv([timeout]) -> value | nil, "closed" | nil, "timeout" */
static int l_recv(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_RX, "recv");
  double timeout = opt_timeout(L, 2, "recv");
  suiro_chan_msg v;
  size_t n;
  suiro_status st = take(L, c, &v, 1, &n, timeout);
  if (st != SUIRO_OK) return outcome(L, c, st, "recv");
  push_message(L, c, &v); /* a decode error leaves the message taken: it could never be read */
  suiro_chan_recv_done(c->ch);
  return 1;
}

/* rx:recv_batch(max, [timeout]) -> { values..., n = } | nil, "closed" | nil, "timeout" */
static int l_recv_batch(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_RX, "recv_batch");
  lua_Integer max = luaL_checkinteger(L, 2);
  if (max < 1 || max > 1 << 20) return luaL_error(L, "recv_batch: max must be 1..%d, got %I", 1 << 20, max);
  double timeout = opt_timeout(L, 3, "recv_batch");
  suiro_chan_msg stackv[64], *views = stackv;
  if (max > 64) views = lua_newuserdatauv(L, sizeof *views * (size_t)max, 0);
  size_t n;
  suiro_status st = take(L, c, views, (size_t)max, &n, timeout);
  if (st != SUIRO_OK) return outcome(L, c, st, "recv_batch");
  lua_createtable(L, (int)n, 1);
  for (size_t i = 0; i < n; i++) {
    push_message(L, c, &views[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  suiro_chan_recv_done(c->ch);
  lua_pushinteger(L, (lua_Integer)n);
  lua_setfield(L, -2, "n");
  return 1;
}

/* for v in rx:values() do ... end: ends when the sender closes; a dead sender raises. */
static int values_step(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_RX, "values");
  suiro_chan_msg v;
  size_t n;
  suiro_status st = take(L, c, &v, 1, &n, -1);
  if (st == SUIRO_CLOSED) return 0;
  if (st != SUIRO_OK) return outcome(L, c, st, "values");
  push_message(L, c, &v);
  suiro_chan_recv_done(c->ch);
  return 1;
}
static int l_values(lua_State *L) {
  check_side(L, SUIRO_CHAN_RX, "values");
  lua_pushcfunction(L, values_step);
  lua_pushvalue(L, 1);
  return 2;
}

static int l_close(lua_State *L) {
  lchan *c = check_chan(L, 1, "close");
  if (suiro_chan_close(c->ch) != SUIRO_OK) return luaL_error(L, "close: %s", suiro_last_error());
  return 0;
}

static const char *const peer_names[] = { "open", "closed", "died", "moving" };

/* ch:status() -> { side, queued, sent, received, capacity, bytes, closed, peer, peer_pid } */
static int l_status(lua_State *L) {
  lchan *c = check_chan(L, 1, "status");
  suiro_chan_stats s;
  if (suiro_chan_status(c->ch, &s) != SUIRO_OK) return luaL_error(L, "status: %s", suiro_last_error());
  lua_createtable(L, 0, 9);
  lua_pushstring(L, s.side == SUIRO_CHAN_TX ? "tx" : "rx");
  lua_setfield(L, -2, "side");
  lua_pushinteger(L, (lua_Integer)s.queued);
  lua_setfield(L, -2, "queued");
  lua_pushinteger(L, (lua_Integer)s.sent);
  lua_setfield(L, -2, "sent");
  lua_pushinteger(L, (lua_Integer)s.received);
  lua_setfield(L, -2, "received");
  lua_pushinteger(L, (lua_Integer)s.capacity);
  lua_setfield(L, -2, "capacity");
  lua_pushinteger(L, (lua_Integer)s.bytes);
  lua_setfield(L, -2, "bytes");
  lua_pushboolean(L, s.closed);
  lua_setfield(L, -2, "closed");
  lua_pushstring(L, peer_names[s.peer & 3]);
  lua_setfield(L, -2, "peer");
  if (s.peer_pid) {
    lua_pushinteger(L, s.peer_pid);
    lua_setfield(L, -2, "peer_pid");
  }
  return 1;
}

/* rx:ready() -> true when recv(0) would not time out (a message, or the sender closed or died);
 * for suiro.run's scheduler. */
static int l_ready(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_RX, "ready");
  suiro_chan_stats s;
  if (suiro_chan_status(c->ch, &s) != SUIRO_OK) return luaL_error(L, "ready: %s", suiro_last_error());
  lua_pushboolean(L, s.queued > 0 || s.peer == SUIRO_CHAN_PEER_CLOSED || s.peer == SUIRO_CHAN_PEER_DIED);
  return 1;
}

/* rx:eventfd() -> the fd (armed; readable when messages arrive or the sender closes, dies or
 * moves); rx:event_ack() drains it. */
static int l_eventfd(lua_State *L) {
  lchan *c = check_side(L, SUIRO_CHAN_RX, "eventfd");
  int fd = suiro_chan_eventfd(c->ch);
  if (fd < 0) return luaL_error(L, "eventfd: %s", suiro_last_error());
  lua_pushinteger(L, fd);
  return 1;
}
static int l_event_ack(lua_State *L) {
  suiro_chan_event_ack(check_side(L, SUIRO_CHAN_RX, "event_ack")->ch);
  return 0;
}

static int l_gc(lua_State *L) {
  lchan *c = lua_touserdata(L, 1);
  if (c && c->ch) {
    suiro_chan_free(c->ch); /* closes an end still owned here */
    c->ch = NULL;
  }
  return 0;
}

static int l_tostring(lua_State *L) {
  lchan *c = lua_touserdata(L, 1);
  if (!c->ch || suiro_chan_given(c->ch)) lua_pushliteral(L, "suiro.channel (sent away)");
  else lua_pushfstring(L, "suiro.channel (%s): %p", c->side == SUIRO_CHAN_TX ? "sending end" : "receiving end", c->ch);
  return 1;
}

/* core.wait_any(pools, chans, timeout): sleeps until a result lands in one of the pools or a
 * channel's receiving end has news (or the timeout passes), then drains and re-arms. The caller
 * armed them (core.arm_events, rx:eventfd()) and looked for what it waits for first. */
static int l_wait_any(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  double timeout = luaL_optnumber(L, 3, -1);
  lua_Integer np = luaL_len(L, 1), nc = luaL_len(L, 2);
  if (np + nc > 1024) return luaL_error(L, "suiro.run: waiting on more than 1024 pools and channels");
  struct pollfd fds[1024];
  int n = 0, slice = 0;
  for (lua_Integer i = 1; i <= np; i++) {
    lua_geti(L, 1, i);
    lpool *lp = lsuiro_checkud(L, -1, &lsuiro_key_pool, LSUIRO_POOL);
    lua_pop(L, 1);
    if (!lp->p || lp->closed) continue;
    if (!lp->owner) { /* a worker's own pool has no event fd: short slices */
      slice = 1;
      continue;
    }
    fds[n].fd = suiro_pool_eventfd(lp->p);
    fds[n].events = POLLIN;
    fds[n++].revents = 0;
  }
  int first_chan = n;
  for (lua_Integer i = 1; i <= nc; i++) {
    lua_geti(L, 2, i);
    lchan *c = check_chan(L, lua_gettop(L), "await");
    fds[n].fd = suiro_chan_eventfd(c->ch);
    lua_pop(L, 1);
    if (fds[n].fd < 0) {
      slice = 1;
      continue;
    }
    fds[n].events = POLLIN;
    fds[n++].revents = 0;
  }
  int ms = timeout < 0 ? -1 : timeout > 2e6 ? 2000000000 : (int)(timeout * 1000 + 0.999);
  if (slice && (ms < 0 || ms > 1)) ms = 1;
  if (ms < 0 || ms > 100) ms = 100; /* interrupts are checked between slices */
  int r = poll(fds, (nfds_t)n, ms);
  if (r > 0) {
    int k = 0;
    for (lua_Integer i = 1; i <= np; i++) {
      lua_geti(L, 1, i);
      lpool *lp = lua_touserdata(L, -1);
      lua_pop(L, 1);
      if (!lp->p || lp->closed || !lp->owner) continue;
      if (fds[k++].revents & POLLIN) suiro_pool_event_ack(lp->p);
    }
    k = first_chan;
    for (lua_Integer i = 1; i <= nc; i++) {
      lua_geti(L, 2, i);
      lchan *c = lua_touserdata(L, -1);
      lua_pop(L, 1);
      if (k < n && (fds[k].revents & POLLIN)) suiro_chan_event_ack(c->ch);
      k++;
    }
  }
  lpool_check_interrupt(L);
  return 0;
}

/* ---- the wire form (lenc.c, ldec.c) ------------------------------------------------------------ */

int lchan_test(lua_State *L, int idx) { return lsuiro_testud(L, idx, &lsuiro_key_chan) != NULL; }

const char *lchan_encode(lua_State *L, int idx, wire_writer *w) {
  lchan *c = lsuiro_testud(L, idx, &lsuiro_key_chan);
  if (!c->ch) return "a channel endpoint that was sent away already cannot be sent again";
  if (suiro_chan_given(c->ch)) return "a channel endpoint that was sent to another process cannot be sent again";
  if (suiro_chan_put(w, c->ch) != WIRE_OK) return lua_pushfstring(L, "channel endpoint: %s", suiro_last_error());
  /* given away; the handle stays, so a message that never goes gives it back (suiro_msg_free,
   * suiro_zc_revoke: engine/src/chan.c), and its collection only unmaps once it went */
  return NULL;
}

void lchan_push_ref(lua_State *L, const wire_ref *r) {
  suiro_chan *ch;
  if (suiro_chan_open(r, &ch) != SUIRO_OK) luaL_error(L, "cannot decode value: %s", suiro_last_error());
  push_chan(L, ch);
}

static const luaL_Reg methods[] = {
  { "send", l_send },
  { "send_batch", l_send_batch },
  { "recv", l_recv },
  { "recv_batch", l_recv_batch },
  { "values", l_values },
  { "close", l_close },
  { "status", l_status },
  { "ready", l_ready },
  { "eventfd", l_eventfd },
  { "event_ack", l_event_ack },
  { NULL, NULL },
};

void lchan_open(lua_State *L) {
  lsuiro_newmt(L, "suiro.channel", &lsuiro_key_chan);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "__index");
  lua_setfield(L, LUA_REGISTRYINDEX, "suiro.channel.methods");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, l_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_channel);
  lua_setfield(L, -2, "channel");
  lua_pushcfunction(L, l_wait_any);
  lua_setfield(L, -2, "wait_any");
  lua_getfield(L, LUA_REGISTRYINDEX, "suiro.channel.methods");
  lua_setfield(L, -2, "channel_methods");
}
