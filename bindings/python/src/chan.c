/*
 * chan.c — channels in Python (suiro.channel; engine/include/suiro_chan.h): the Channel type, one
 * object per endpoint. suiro/_chan.py adds iteration, async iteration and recv_async (through the
 * receiving end's event fd) and the exceptions.
 *
 * Every message is one wire value (enc.c, dec.c; None is a value like any other: the end of a
 * stream is an exception). Waits release the GIL in slices of 100 ms and check signals between
 * them. An endpoint is used by one thread at a time (a second thread is refused by name).
 * Outcomes: recv raises ChannelClosed at the close (after the queued messages), TimeoutError
 * when the timeout passes; send raises ChannelFull (a TimeoutError) when the ring stayed full,
 * ChannelClosed when the receiver closed; a dead peer raises PeerDied after the queued messages.
 */
#include <string.h>

#include "suiro_chan.h"
#include "suiro_py.h"

typedef struct ChanObject {
  PyObject_HEAD
  suiro_chan *ch;
  int side;
  int busy;
} ChanObject;

PyTypeObject SpChan_Type;

static PyObject *exc(const char *name) {
  PyObject *m = PyImport_ImportModule("suiro._chan");
  if (!m) return NULL;
  PyObject *e = PyObject_GetAttrString(m, name);
  Py_DECREF(m);
  return e;
}

static PyObject *raise_named(const char *name, const char *fmt, ...) {
  PyObject *e = exc(name);
  if (!e) return NULL;
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (msg) {
    PyErr_SetObject(e, msg);
    Py_DECREF(msg);
  }
  Py_DECREF(e);
  return NULL;
}

static PyObject *raise_outcome(ChanObject *c, suiro_status st, const char *verb) {
  switch (st) {
  case SUIRO_TIMEOUT:
    if (c->side == SUIRO_CHAN_TX) return raise_named("ChannelFull", "%s: the channel stayed full", verb);
    PyErr_Format(PyExc_TimeoutError, "%s: no message within the timeout", verb);
    return NULL;
  case SUIRO_FULL: return raise_named("ChannelFull", "%s: the channel is full", verb);
  case SUIRO_CLOSED:
    return raise_named("ChannelClosed", "%s: the %s closed the channel", verb,
                       c->side == SUIRO_CHAN_TX ? "receiver" : "sender");
  case SUIRO_PEER_GONE: {
    suiro_chan_stats s;
    int pid = suiro_chan_status(c->ch, &s) == SUIRO_OK ? s.peer_pid : 0;
    return raise_named("PeerDied", "%s: the %s of the channel died (process %d)", verb,
                       c->side == SUIRO_CHAN_TX ? "receiving end's owner" : "sending end's owner", pid);
  }
  default: PyErr_Format(PyExc_ValueError, "%s: %s", verb, suiro_last_error()); return NULL;
  }
}

static int check(ChanObject *c, int side, const char *verb) {
  if (!c->ch || suiro_chan_given(c->ch)) {
    PyErr_Format(PyExc_ValueError, "%s: this channel endpoint was sent to another process or freed", verb);
    return -1;
  }
  if (side >= 0 && c->side != side) {
    PyErr_Format(PyExc_ValueError, "%s: this is the %s of the channel", verb,
                 c->side == SUIRO_CHAN_TX ? "sending end" : "receiving end");
    return -1;
  }
  if (c->busy) {
    PyErr_Format(PyExc_RuntimeError, "%s: another thread is using this channel endpoint", verb);
    return -1;
  }
  return 0;
}

static PyObject *wrap(PyTypeObject *tp, suiro_chan *ch) {
  ChanObject *c = (ChanObject *)tp->tp_alloc(tp, 0);
  if (!c) {
    suiro_chan_free(ch);
    return NULL;
  }
  c->ch = ch;
  c->side = suiro_chan_side(ch);
  c->busy = 0;
  return (PyObject *)c;
}

/* _core.channel(capacity=1024, bytes=-1, cls=Channel) -> (tx, rx), objects of cls (a subclass) */
static PyObject *m_channel(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "capacity", "bytes", "cls", NULL };
  long long cap = 1024, bytes = -1;
  PyTypeObject *tp = &SpChan_Type;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|LLO!", kwl, &cap, &bytes, &PyType_Type, &tp)) return NULL;
  if (!PyType_IsSubtype(tp, &SpChan_Type)) return PyErr_Format(PyExc_TypeError, "channel: cls must be a Channel type");
  if (cap < 1 || cap > SUIRO_CHAN_MAX_CAPACITY)
    return PyErr_Format(PyExc_ValueError, "channel: capacity must be 1..%u messages, got %lld", SUIRO_CHAN_MAX_CAPACITY, cap);
  suiro_chan_opts o;
  suiro_chan_opts_init(&o);
  o.capacity = (uint32_t)cap;
  if (bytes != -1) {
    if (bytes < (long long)SUIRO_CHAN_MIN_BYTES || bytes > (long long)SUIRO_CHAN_MAX_BYTES)
      return PyErr_Format(PyExc_ValueError, "channel: bytes must be %zu..%zu, got %lld", SUIRO_CHAN_MIN_BYTES,
                          SUIRO_CHAN_MAX_BYTES, bytes);
    o.bytes = (size_t)bytes;
  }
  suiro_chan *tx, *rx;
  if (suiro_chan_create(&o, &tx, &rx) != SUIRO_OK) return PyErr_Format(PyExc_OSError, "channel: %s", suiro_last_error());
  PyObject *a = wrap(tp, tx);
  if (!a) return suiro_chan_free(rx), NULL;
  PyObject *b = wrap(tp, rx);
  if (!b) return Py_DECREF(a), NULL;
  PyObject *t = PyTuple_Pack(2, a, b);
  Py_DECREF(a);
  Py_DECREF(b);
  return t;
}

#define SLICE 0.1

/* One message into the ring (not yet published): 0, or -1 with an exception. */
static int put_one(ChanObject *c, PyObject *v, double timeout, const char *verb) {
  _Alignas(8) unsigned char stack[256];
  suiro_msg m;
  suiro_msg_init(&m, stack, sizeof stack);
  sp_enc_opts o = { verb, 1, "another language", "a channel's receiver", 1, NULL, &m };
  if (sp_encode_value(&o, v, suiro_msg_writer(&m)) < 0) return suiro_msg_free(&m), -1;
  const void *buf;
  size_t len;
  if (suiro_msg_finish(&m, &buf, &len) != WIRE_OK) {
    PyErr_Format(PyExc_ValueError, "%s: %s", verb, wire_writer_error(suiro_msg_writer(&m)));
    suiro_msg_free(&m);
    return -1;
  }
  void *fast = suiro_chan_try_reserve(c->ch, len); /* room now: no GIL release, no clock */
  if (fast) {
    memcpy(fast, buf, len);
    suiro_chan_commit(c->ch, len);
    suiro_msg_sent(&m);
    return 0;
  }
  double t0 = suiro_now(), left = timeout;
  suiro_status st;
  for (;;) {
    void *p;
    double slice = timeout == 0 ? 0 : left < 0 || left > SLICE ? SLICE : left;
    c->busy = 1;
    if (slice == 0) {
      p = suiro_chan_reserve(c->ch, len, 0, &st);
    } else {
      Py_BEGIN_ALLOW_THREADS
      p = suiro_chan_reserve(c->ch, len, slice, &st);
      Py_END_ALLOW_THREADS
    }
    c->busy = 0;
    if (p) {
      memcpy(p, buf, len);
      suiro_chan_commit(c->ch, len);
      suiro_msg_sent(&m);
      return 0;
    }
    if ((st != SUIRO_TIMEOUT && st != SUIRO_FULL) || timeout == 0) break;
    if (timeout > 0 && (left = timeout - (suiro_now() - t0)) <= 0) break;
    if (PyErr_CheckSignals() < 0) {
      suiro_msg_free(&m);
      return -1;
    }
  }
  suiro_msg_free(&m);
  raise_outcome(c, st, verb);
  return -1;
}

static int parse_timeout(PyObject *t, double *out, const char *verb) {
  *out = sp_timeout_arg(t, -1, verb);
  return *out == -2 ? -1 : 0;
}

static PyObject *c_send(ChanObject *c, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "value", "timeout", NULL };
  PyObject *v, *t = Py_None;
  double timeout;
  if (!kw && PyTuple_GET_SIZE(args) == 1) v = PyTuple_GET_ITEM(args, 0); /* send(v): the common call */
  else if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &v, &t)) return NULL;
  if (check(c, SUIRO_CHAN_TX, "send") < 0 || parse_timeout(t, &timeout, "send") < 0) return NULL;
  int r = put_one(c, v, timeout, "send");
  suiro_chan_flush(c->ch);
  if (r < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *c_send_batch(ChanObject *c, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "values", "timeout", NULL };
  PyObject *v, *t = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &v, &t)) return NULL;
  if (check(c, SUIRO_CHAN_TX, "send_batch") < 0 || parse_timeout(t, &timeout, "send_batch") < 0) return NULL;
  PyObject *seq = PySequence_Fast(v, "send_batch: values must be a sequence");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; i++)
    if (put_one(c, items[i], timeout, "send_batch") < 0) {
      suiro_chan_flush(c->ch);
      Py_DECREF(seq);
      return NULL;
    }
  suiro_chan_flush(c->ch);
  Py_DECREF(seq);
  Py_RETURN_NONE;
}

/* Waits for up to max views; 0 with *n, or -1 with an exception. */
static int take(ChanObject *c, suiro_chan_msg *views, size_t max, size_t *n, double timeout, const char *verb) {
  if ((*n = suiro_chan_try_recv_batch(c->ch, views, max)) > 0) return 0; /* queued: no GIL release */
  double t0 = suiro_now(), left = timeout;
  for (;;) {
    suiro_status st;
    double slice = timeout == 0 ? 0 : left < 0 || left > SLICE ? SLICE : left;
    c->busy = 1;
    if (slice == 0) {
      st = suiro_chan_recv_batch(c->ch, views, max, n, 0);
    } else {
      Py_BEGIN_ALLOW_THREADS
      st = suiro_chan_recv_batch(c->ch, views, max, n, slice);
      Py_END_ALLOW_THREADS
    }
    c->busy = 0;
    if (st == SUIRO_OK) return 0;
    if (st != SUIRO_TIMEOUT || timeout == 0 || (timeout > 0 && (left = timeout - (suiro_now() - t0)) <= 0)) {
      raise_outcome(c, st, verb);
      return -1;
    }
    if (PyErr_CheckSignals() < 0) return -1;
  }
}

static PyObject *c_recv(ChanObject *c, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "timeout", NULL };
  PyObject *t = Py_None;
  double timeout;
  if ((kw || PyTuple_GET_SIZE(args)) && !PyArg_ParseTupleAndKeywords(args, kw, "|O", kwl, &t)) return NULL;
  if (check(c, SUIRO_CHAN_RX, "recv") < 0 || parse_timeout(t, &timeout, "recv") < 0) return NULL;
  suiro_chan_msg m;
  size_t n;
  if (take(c, &m, 1, &n, timeout, "recv") < 0) return NULL;
  PyObject *v = sp_decode(m.data, m.len, 0, NULL);
  suiro_chan_recv_done(c->ch);
  return v;
}

static PyObject *c_recv_batch(ChanObject *c, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "max", "timeout", NULL };
  Py_ssize_t max;
  PyObject *t = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "n|O", kwl, &max, &t)) return NULL;
  if (check(c, SUIRO_CHAN_RX, "recv_batch") < 0 || parse_timeout(t, &timeout, "recv_batch") < 0) return NULL;
  if (max < 1 || max > (1 << 20)) return PyErr_Format(PyExc_ValueError, "recv_batch: max must be 1..%d, got %zd", 1 << 20, max);
  suiro_chan_msg *views = PyMem_Malloc(sizeof *views * (size_t)max);
  if (!views) return PyErr_NoMemory();
  size_t n;
  if (take(c, views, (size_t)max, &n, timeout, "recv_batch") < 0) return PyMem_Free(views), NULL;
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *v = sp_decode(views[i].data, views[i].len, 0, NULL);
    if (!v) Py_CLEAR(l);
    else PyList_SET_ITEM(l, (Py_ssize_t)i, v);
  }
  suiro_chan_recv_done(c->ch);
  PyMem_Free(views);
  return l;
}

static PyObject *c_close(ChanObject *c, PyObject *unused) {
  if (check(c, -1, "close") < 0) return NULL;
  if (suiro_chan_close(c->ch) != SUIRO_OK) return PyErr_Format(PyExc_ValueError, "close: %s", suiro_last_error());
  Py_RETURN_NONE;
}

static const char *const peer_names[] = { "open", "closed", "died", "moving" };

static PyObject *c_status(ChanObject *c, PyObject *unused) {
  if (check(c, -1, "status") < 0) return NULL;
  suiro_chan_stats s;
  if (suiro_chan_status(c->ch, &s) != SUIRO_OK) return PyErr_Format(PyExc_ValueError, "status: %s", suiro_last_error());
  return Py_BuildValue("{s:s,s:K,s:K,s:K,s:I,s:n,s:O,s:s,s:i}", "side", s.side == SUIRO_CHAN_TX ? "tx" : "rx", "queued",
                       (unsigned long long)s.queued, "sent", (unsigned long long)s.sent, "received",
                       (unsigned long long)s.received, "capacity", s.capacity, "bytes", (Py_ssize_t)s.bytes, "closed",
                       s.closed ? Py_True : Py_False, "peer", peer_names[s.peer & 3], "peer_pid", s.peer_pid);
}

static PyObject *c_eventfd(ChanObject *c, PyObject *unused) {
  if (check(c, SUIRO_CHAN_RX, "eventfd") < 0) return NULL;
  int fd = suiro_chan_eventfd(c->ch);
  if (fd < 0) return PyErr_Format(PyExc_OSError, "eventfd: %s", suiro_last_error());
  return PyLong_FromLong(fd);
}

static PyObject *c_event_ack(ChanObject *c, PyObject *unused) {
  if (check(c, SUIRO_CHAN_RX, "event_ack") < 0) return NULL;
  suiro_chan_event_ack(c->ch);
  Py_RETURN_NONE;
}

static void c_dealloc(ChanObject *c) {
  if (c->ch) suiro_chan_free(c->ch);
  c->ch = NULL;
  Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *c_repr(ChanObject *c) {
  if (!c->ch || suiro_chan_given(c->ch)) return PyUnicode_FromString("<suiro.Channel (sent away)>");
  return PyUnicode_FromFormat("<suiro.Channel %s>", c->side == SUIRO_CHAN_TX ? "sending end" : "receiving end");
}

static PyObject *c_side(ChanObject *c, void *unused) { return PyUnicode_FromString(c->side == SUIRO_CHAN_TX ? "tx" : "rx"); }

static PyMethodDef c_methods[] = {
  { "send", (PyCFunction)(void (*)(void))c_send, METH_VARARGS | METH_KEYWORDS, "send(value, timeout=None)" },
  { "send_batch", (PyCFunction)(void (*)(void))c_send_batch, METH_VARARGS | METH_KEYWORDS,
    "send_batch(values, timeout=None): one publication per room's worth" },
  { "recv", (PyCFunction)(void (*)(void))c_recv, METH_VARARGS | METH_KEYWORDS, "recv(timeout=None) -> value" },
  { "recv_batch", (PyCFunction)(void (*)(void))c_recv_batch, METH_VARARGS | METH_KEYWORDS,
    "recv_batch(max, timeout=None) -> list of 1..max values" },
  { "close", (PyCFunction)c_close, METH_NOARGS, "closes this end" },
  { "status", (PyCFunction)c_status, METH_NOARGS, "a dict: side, queued, sent, received, capacity, bytes, closed, peer" },
  { "eventfd", (PyCFunction)c_eventfd, METH_NOARGS, "the receiving end's fd, armed" },
  { "event_ack", (PyCFunction)c_event_ack, METH_NOARGS, "drains and re-arms the fd" },
  { NULL, NULL, 0, NULL },
};

static PyGetSetDef c_getset[] = {
  { "side", (getter)c_side, NULL, "'tx' or 'rx'", NULL },
  { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject SpChan_Type = {
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "suiro._core.Channel",
  .tp_basicsize = sizeof(ChanObject),
  .tp_dealloc = (destructor)c_dealloc,
  .tp_repr = (reprfunc)c_repr,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
  .tp_doc = "One end of a channel (suiro.channel).",
  .tp_methods = c_methods,
  .tp_getset = c_getset,
};

/* ---- the wire form (enc.c, dec.c) --------------------------------------------------------------- */

static PyObject *chan_cls; /* suiro._chan.Channel, for endpoints that arrive */

const char *sp_chan_encode(PyObject *o, wire_writer *w) {
  ChanObject *c = (ChanObject *)o;
  if (!c->ch) return "a channel endpoint that was sent away already cannot be sent again";
  if (c->busy) return "a channel endpoint in use by another thread cannot be sent";
  if (suiro_chan_given(c->ch)) return "a channel endpoint that was sent to another process cannot be sent again";
  if (suiro_chan_put(w, c->ch) != WIRE_OK) return suiro_last_error();
  /* given away; the handle stays, so a message that never goes gives it back (suiro_msg_free,
   * suiro_zc_revoke: engine/src/chan.c), and its dealloc only unmaps once it went */
  return NULL;
}

PyObject *sp_chan_decode(const wire_ref *r) {
  suiro_chan *ch;
  if (suiro_chan_open(r, &ch) != SUIRO_OK) return PyErr_Format(PyExc_ValueError, "cannot decode value: %s", suiro_last_error());
  if (!chan_cls) {
    PyObject *m = PyImport_ImportModule("suiro._chan");
    chan_cls = m ? PyObject_GetAttrString(m, "Channel") : NULL;
    Py_XDECREF(m);
    if (!chan_cls) return suiro_chan_free(ch), NULL;
  }
  return wrap((PyTypeObject *)chan_cls, ch);
}

static PyMethodDef funcs[] = {
  { "channel", (PyCFunction)(void (*)(void))m_channel, METH_VARARGS | METH_KEYWORDS,
    "channel(capacity=1024, bytes=None) -> (tx, rx)" },
  { NULL, NULL, 0, NULL },
};

int sp_chan_add(PyObject *m) {
  if (PyType_Ready(&SpChan_Type) < 0) return -1;
  if (PyModule_AddObjectRef(m, "Channel", (PyObject *)&SpChan_Type) < 0) return -1;
  return PyModule_AddFunctions(m, funcs);
}
