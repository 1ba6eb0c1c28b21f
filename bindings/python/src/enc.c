/*
 * enc.c — Python values -> the wire format (docs/wire-format.md; Python conventions in its
 * "Python" section); dec.c reads it back. The function item of a task is written here too: by
 * reference, by key, or by its plan (func.c keeps the identities, the plans and the caches).
 *
 *
 *   Python                          wire
 *   None, bool, suiro.NA            NIL, BOOL (suiro.NA: BOOL NA)
 *   int (64-bit) / float            I64 (I48 when small) / F64
 *   str / bytes                     STR (UTF-8, surrogateescape) / BYTES
 *   list                            LIST (a list seen twice: BACKREF, so sharing and cycles survive)
 *   tuple                           LIST for foreign receivers; FUNC(python, 0) "tuple:" + LIST for
 *                                   Python ones (a tuple comes back a tuple)
 *   dict with str keys              DICT (insertion order)
 *   range                           RANGE
 *   numpy array f64 f32 i64 i32     ARRAY (1-d) / NDARRAY (C or F order), or REF from the
 *     u8 bool c128                  zero-copy floor up (a view of a region goes by reference)
 *   numpy.ma array                  Python receivers: a pickle (mask, fill_value kept), but a bool
 *                                   one the bool NA holds exactly as below; foreign receivers and
 *                                   frame columns: ARRAY with the type's NA where masked
 *   datetime64[D] / [s..ns]         DATE i64 / TIMESTAMP i64 (no time zone)
 *   numpy scalars                   Python receivers: FUNC(python, 0) "scalar:" + a 1-element
 *                                   ARRAY (the scalar of its dtype comes back); others: the value
 *   other numpy arrays, subclasses  Python receivers: a pickle; others: to_wire's mapping
 *   suiro.Strings, Dates,           STRS, DATE, TIMESTAMP, FRAME, CALL, ERROR
 *     Timestamps, Frame, Call,
 *     RemoteError
 *   pandas objects                  Python receivers: a pickle (a Categorical of str: FACTOR);
 *                                   others: through suiro._values.to_wire (DataFrame -> FRAME, ...)
 *   anything else                   Python receivers: a pickle, FUNC(python, 0) named
 *                                   "pickle:<type>" with the bytes (protocol 5) and its out-of-band
 *                                   buffers as u8 arrays (REFs when large); foreign receivers
 *                                   refuse it
 *
 * Functions (the first item of a task): a str is a reference ("module.fn"); a callable that can
 * be imported back by module and qualified name goes by reference too; any other is pickled
 * (cloudpickle) once per pool into the blob store and sent as FUNC(python, key). Keyword
 * arguments ride in the function item: FUNC(python, key or 0, [name or nil, DICT kwargs]); for
 * foreign workers a task with keywords becomes a CALL.
 *
 * Ownership and the GIL: called with the GIL held (a submit encodes before it takes the pool lock).
 * The encoder borrows everything it reads; temporaries it makes (pandas conversions) are kept
 * alive in e->keep until the encode ends, so pointer identity (backrefs) stays sound. It writes
 * into the caller's wire_writer; large arrays become zero-copy grants of the caller's suiro_msg.
 */
#include <string.h>

#include "suiro_py.h"

/* ---- encoder -------------------------------------------------------------------------------- */

typedef struct seg {
  int kind;
  Py_ssize_t i;
  PyObject *key; /* borrowed */
} seg;

typedef struct enc {
  const sp_enc_opts *o;
  wire_writer *w;
  int nseg;
  seg path[WIRE_MAX_DEPTH + 8];
  int depth;
  int nseen;
  const void *seen_ptr[8];
  uint64_t seen_ord[8];
  PyObject *seen; /* dict: id -> ordinal, beyond the inline entries */
  PyObject *keep; /* temporaries */
  int in_frame;   /* inside a frame: only 1-d columns may be references */
  int captured;   /* writing what a function sent by value captured: pickles by cloudpickle */
  int nfn;        /* functions sent by value being written (the outer ones capture the inner) */
  PyObject *fns[8];
} enc;

static void enc_init(enc *e, const sp_enc_opts *o, wire_writer *w) {
  e->o = o;
  e->w = w;
  e->nseg = 0;
  e->depth = 0;
  e->nseen = 0;
  e->seen = NULL;
  e->keep = NULL;
  e->in_frame = 0;
  e->captured = 0;
  e->nfn = 0;
}

static void enc_end(enc *e) {
  Py_CLEAR(e->seen);
  Py_CLEAR(e->keep);
}

static int enc_keep(enc *e, PyObject *o) {
  if (!e->keep && !(e->keep = PyList_New(0))) return -1;
  return PyList_Append(e->keep, o);
}

static void push_seg(enc *e, int kind, Py_ssize_t i, PyObject *key) {
  if (e->nseg < (int)(sizeof e->path / sizeof e->path[0])) e->path[e->nseg] = (seg){ kind, i, key };
  e->nseg++;
}
static void pop_seg(enc *e) { e->nseg--; }

static PyObject *path_string(enc *e) {
  PyObject *parts = PyList_New(0);
  if (!parts) return NULL;
  int n = e->nseg < (int)(sizeof e->path / sizeof e->path[0]) ? e->nseg : (int)(sizeof e->path / sizeof e->path[0]);
  for (int k = 0; k < n; k++) {
    const seg *s = &e->path[k];
    PyObject *p = NULL;
    if (n > 16 && k >= 8 && k < n - 4) { /* a deep path: its first 8 and last 4 segments */
      if (k == 8 && (!(p = PyUnicode_FromString("...")) || PyList_Append(parts, p) < 0)) {
        Py_XDECREF(p);
        Py_DECREF(parts);
        return NULL;
      }
      Py_XDECREF(p);
      continue;
    }
    switch (s->kind) {
    case SP_SEG_ARG: p = PyUnicode_FromFormat("argument %zd", s->i); break;
    case SP_SEG_KWARG: p = PyUnicode_FromFormat("keyword argument %R", s->key); break;
    case SP_SEG_INDEX: p = PyUnicode_FromFormat("[%zd]", s->i); break;
    case SP_SEG_KEY: p = PyUnicode_FromFormat("[%R]", s->key); break;
    case SP_SEG_RESULT: p = PyUnicode_FromString("result"); break;
    case SP_SEG_ELEMENT: p = PyUnicode_FromFormat("element %zd", s->i); break;
    case SP_SEG_VALUE: p = PyUnicode_FromString("value"); break;
    case SP_SEG_COLUMN: p = PyUnicode_FromFormat("column %R", s->key); break;
    case SP_SEG_FUNCTION: p = PyUnicode_FromString("function"); break;
    default: p = PyUnicode_FromString("?");
    }
    /* subscripts attach to what they index ("argument 2[0]['k']"); words are separated
     * ("argument 1, keyword argument 'v'", "argument 2, column 'c'") */
    if (p && k > 0 && s->kind != SP_SEG_INDEX && s->kind != SP_SEG_KEY) Py_SETREF(p, PyUnicode_FromFormat(", %U", p));
    if (!p || PyList_Append(parts, p) < 0) {
      Py_XDECREF(p);
      Py_DECREF(parts);
      return NULL;
    }
    Py_DECREF(p);
  }
  PyObject *empty = PyUnicode_FromString("");
  PyObject *r = empty ? PyUnicode_Join(empty, parts) : NULL;
  Py_XDECREF(empty);
  Py_DECREF(parts);
  return r;
}

/* Raises exc with "verb: path: message"; returns -1. A pending exception becomes the cause. */
static int enc_fail(enc *e, PyObject *exc, const char *fmt, ...) {
  PyObject *cause = NULL, *ct, *ctb;
  if (PyErr_Occurred()) {
    PyErr_Fetch(&ct, &cause, &ctb);
    PyErr_NormalizeException(&ct, &cause, &ctb);
    Py_XDECREF(ct);
    Py_XDECREF(ctb);
  }
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  PyObject *path = path_string(e);
  if (msg && path) {
    PyObject *full = PyUnicode_GET_LENGTH(path) ? PyUnicode_FromFormat("%s: %U: %U", e->o->verb, path, msg)
                                                : PyUnicode_FromFormat("%s: %U", e->o->verb, msg);
    if (full) {
      PyErr_SetObject(exc, full);
      Py_DECREF(full);
    }
  }
  Py_XDECREF(msg);
  Py_XDECREF(path);
  if (cause && PyErr_Occurred()) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetCause(v, cause); /* steals cause */
    PyErr_Restore(t, v, tb);
  } else {
    Py_XDECREF(cause);
  }
  return -1;
}

static const char *type_name(PyObject *o) { return Py_TYPE(o)->tp_name; }

/* A conversion failed: "X cannot be sent: <why>", keeping TypeError/ValueError. */
static int enc_fail_why(enc *e, PyObject *o) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (!t || !PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)PyExc_Exception)) {
    PyErr_Restore(t, v, tb);
    return -1;
  }
  PyObject *why = v ? PyObject_Str(v) : NULL;
  PyObject *exc = PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)PyExc_ValueError) ? PyExc_ValueError : PyExc_TypeError;
  PyErr_Restore(t, v, tb);
  int rc = why ? enc_fail(e, exc, "%s cannot be sent: %U", Py_TYPE(o)->tp_name, why)
               : enc_fail(e, exc, "%s cannot be sent", Py_TYPE(o)->tp_name);
  Py_XDECREF(why);
  return rc;
}

/* Registers a list/dict about to be written; 1 when it was seen already (a BACKREF was written). */
static int enc_shared(enc *e, PyObject *o) {
  for (int i = 0; i < e->nseen; i++)
    if (e->seen_ptr[i] == (void *)o) return wire_put_backref(e->w, e->seen_ord[i]), 1;
  uint64_t ord = e->w->ncont;
  if (e->nseen < 8) {
    e->seen_ptr[e->nseen] = o;
    e->seen_ord[e->nseen++] = ord;
    return 0;
  }
  PyObject *key = PyLong_FromVoidPtr(o);
  if (!key) return -1;
  if (!e->seen && !(e->seen = PyDict_New())) {
    Py_DECREF(key);
    return -1;
  }
  PyObject *got = PyDict_GetItemWithError(e->seen, key);
  if (got) {
    Py_DECREF(key);
    wire_put_backref(e->w, PyLong_AsUnsignedLongLong(got));
    return 1;
  }
  PyObject *v = PyLong_FromUnsignedLongLong(ord);
  int rc = v ? PyDict_SetItem(e->seen, key, v) : -1;
  Py_XDECREF(v);
  Py_DECREF(key);
  return rc < 0 ? -1 : 0;
}

static int enc_value(enc *e, PyObject *o);
static int enc_planned(enc *e, PyObject *fn, PyObject *kwargs);

static int put_str(enc *e, PyObject *s) {
  Py_ssize_t n;
  const char *p = PyUnicode_AsUTF8AndSize(s, &n);
  if (p) return wire_put_str(e->w, p, (size_t)n), 0;
  PyErr_Clear(); /* lone surrogates: what surrogateescape decoded comes back as it was */
  PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
  if (!b) return enc_fail(e, PyExc_ValueError, "a str that is not valid text cannot be sent");
  wire_put_str(e->w, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
  Py_DECREF(b);
  return 0;
}

/* A pickler's failure: raised again with the path in its message, keeping its type (PicklingError,
 * TypeError, ...) when that type can be built from a message; SystemExit and other exits pass
 * through untouched. */
static int enc_fail_pickling(enc *e, PyObject *o) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (!t || !PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)PyExc_Exception)) {
    PyErr_Restore(t, v, tb);
    return -1;
  }
  PyObject *path = path_string(e);
  PyObject *why = v ? PyObject_Str(v) : NULL;
  PyObject *msg = path && why ? (PyUnicode_GET_LENGTH(path) ? PyUnicode_FromFormat("%s: %U: %s cannot be sent (%U)", e->o->verb, path, type_name(o), why)
                                                      : PyUnicode_FromFormat("%s: %s cannot be sent (%U)", e->o->verb, type_name(o), why))
                               : NULL;
  PyObject *exc = msg ? PyObject_CallOneArg(t, msg) : NULL;
  if (!exc || !PyExceptionInstance_Check(exc)) {
    Py_XDECREF(exc);
    PyErr_Clear();
    exc = msg ? PyObject_CallOneArg(PyExc_TypeError, msg) : NULL;
  }
  Py_XDECREF(path);
  Py_XDECREF(why);
  Py_XDECREF(msg);
  if (!exc) {
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    return -1;
  }
  if (v) {
    if (tb) PyException_SetTraceback(v, tb);
    PyException_SetCause(exc, v); /* steals v */
  }
  Py_XDECREF(t);
  Py_XDECREF(tb);
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return -1;
}

/* Anything else: pickled for Python receivers, refused by the others. */
static PyObject *dumps_captured_helper;

static PyObject *dumps_captured(void) { return sp_values_attr(&dumps_captured_helper, "dumps_captured"); }

/* _values.dumps_oob (pickle protocol 5, its buffers out of band), looked up once */
static PyObject *dumps_oob_helper;
static PyObject *dumps_oob(void) { return sp_values_attr(&dumps_oob_helper, "dumps_oob"); }

/* dumps(o, pubs): pubs collects the (key, blob) pairs of the classes the pickle names by key,
 * published here in the receiving pool before the value is sent (None without a pool: then only
 * keys the receiver made go by key). */
static PyObject *call_dumps(enc *e, PyObject *dumps, PyObject *o) {
  PoolObject *po = e->o->pool;
  PyObject *pubs = po && po->p ? PyList_New(0) : Py_NewRef(Py_None);
  if (!pubs) return NULL;
  PyObject *b = PyObject_CallFunctionObjArgs(dumps, o, pubs, NULL);
  if (b && pubs != Py_None) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pubs); i++) {
      PyObject *kb = PyList_GET_ITEM(pubs, i);
      PyObject *k = PyTuple_Check(kb) && PyTuple_GET_SIZE(kb) == 2 ? PyTuple_GET_ITEM(kb, 0) : NULL;
      PyObject *blob = k ? PyTuple_GET_ITEM(kb, 1) : NULL;
      unsigned long long key = k ? PyLong_AsUnsignedLongLong(k) : 0;
      if (!blob || !PyBytes_Check(blob) || PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "internal: a class blob to publish is not (key, bytes)");
        Py_CLEAR(b);
        break;
      }
      if (suiro_fn_publish(po->p, (uint64_t)key, PyBytes_AS_STRING(blob), (size_t)PyBytes_GET_SIZE(blob)) != SUIRO_OK) {
        Py_SETREF(b, PyObject_CallFunctionObjArgs(dumps, o, Py_None, NULL)); /* the store is full: by value */
        break;
      }
    }
  }
  Py_DECREF(pubs);
  return b;
}

static int put_typed(enc *e, PyObject *owner, const Py_buffer *v, int type, int order);
static int format_type(const char *f, Py_ssize_t itemsize);

/* An out-of-band buffer of a pickle (a pickle.PickleBuffer over a contiguous array): its bytes as
 * a u8 ARRAY, by reference from the zero-copy floor up (a view of a region goes as it is). */
static int put_oob(enc *e, PyObject *pb) {
  Py_buffer v;
  if (PyObject_GetBuffer(pb, &v, PyBUF_FULL_RO) < 0) return enc_fail(e, PyExc_TypeError, "a pickle buffer has no buffer");
  if (!PyBuffer_IsContiguous(&v, 'A')) {
    PyBuffer_Release(&v);
    return enc_fail(e, PyExc_TypeError, "internal: a pickle buffer that is not contiguous");
  }
  Py_buffer f = v;
  Py_ssize_t len = v.len;
  f.ndim = 1;
  f.shape = &len;
  f.strides = NULL;
  f.itemsize = 1;
  f.format = "B";
  int rc = put_typed(e, v.obj, &f, WIRE_T_U8, WIRE_ORDER_C);
  PyBuffer_Release(&v);
  return rc;
}

/* A pickle for Python receivers: FUNC(python, 0, 2 + k) "pickle:<type>", the pickle's bytes, then
 * its k out-of-band buffers (protocol 5) as u8 arrays, so large arrays inside pickled objects
 * (pandas blocks, numpy arrays of other dtypes) cross by reference like plain arrays. */
static int enc_pickle(enc *e, PyObject *o, const char *why) {
  if (e->o->foreign)
    return enc_fail(e, PyExc_TypeError, "%s cannot be sent to %s%s%s", type_name(o), e->o->foreign_dest,
                    why ? ": " : " (only Python processes read pickled objects)", why ? why : "");
  PyObject *dumps = e->captured ? dumps_captured() : dumps_oob();
  if (!dumps) return enc_fail(e, PyExc_TypeError, "%s cannot be sent", type_name(o));
  PyObject *b = call_dumps(e, dumps, o);
  if (!b) return enc_fail_pickling(e, o);
  PyObject *bufs = NULL;
  if (PyTuple_CheckExact(b) && PyTuple_GET_SIZE(b) == 2 && PyList_CheckExact(PyTuple_GET_ITEM(b, 1))) {
    bufs = Py_NewRef(PyTuple_GET_ITEM(b, 1));
    Py_SETREF(b, Py_NewRef(PyTuple_GET_ITEM(b, 0)));
  }
  if (!PyBytes_Check(b)) {
    Py_DECREF(b);
    Py_XDECREF(bufs);
    return enc_fail(e, PyExc_TypeError, "%s cannot be sent (pickling gave no bytes)", type_name(o));
  }
  PyObject *tn = PyUnicode_FromFormat("pickle:%s", type_name(o));
  if (!tn) {
    Py_DECREF(b);
    Py_XDECREF(bufs);
    return -1;
  }
  Py_ssize_t tl, nb = bufs ? PyList_GET_SIZE(bufs) : 0;
  const char *ts = PyUnicode_AsUTF8AndSize(tn, &tl);
  wire_put_func(e->w, WIRE_LANG_PYTHON, 0, 2 + (uint64_t)nb);
  wire_put_str(e->w, ts, (size_t)tl);
  wire_put_bytes(e->w, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
  Py_DECREF(tn);
  Py_DECREF(b);
  int rc = 0;
  for (Py_ssize_t i = 0; i < nb && rc == 0; i++) rc = put_oob(e, PyList_GET_ITEM(bufs, i));
  Py_XDECREF(bufs);
  return rc;
}

/* A numpy scalar of a wire element type, for Python receivers: FUNC(python, 0, 2) "scalar:" and a
 * one-element array, which decodes to the scalar of that dtype. 1 when o has no such form. */
static int enc_np_scalar(enc *e, PyObject *o) {
  Py_buffer v;
  if (PyObject_GetBuffer(o, &v, PyBUF_RECORDS_RO) < 0) return PyErr_Clear(), 1;
  int type = v.ndim == 0 ? format_type(v.format, v.itemsize) : 0;
  if (!type) return PyBuffer_Release(&v), 1;
  wire_put_func(e->w, WIRE_LANG_PYTHON, 0, 2);
  wire_put_str(e->w, "scalar:", 7);
  void *dst = wire_put_array(e->w, type, 1);
  if (dst) memcpy(dst, v.buf, wire_type_size(type));
  PyBuffer_Release(&v);
  return 0;
}

static int enc_list(enc *e, PyObject *o) {
  int sh = PyList_CheckExact(o) ? enc_shared(e, o) : 0;
  if (sh) return sh < 0 ? -1 : 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  wire_put_list(e->w, (uint64_t)n);
  for (Py_ssize_t i = 0; i < n; i++) {
    push_seg(e, SP_SEG_INDEX, i, NULL);
    /* a list may change under a pickler's __reduce__: read items by index, bounded each time */
    if (i >= PySequence_Fast_GET_SIZE(o)) return enc_fail(e, PyExc_RuntimeError, "the list changed size while it was sent");
    PyObject *it = PySequence_Fast_GET_ITEM(o, i);
    Py_INCREF(it);
    int rc = enc_value(e, it);
    Py_DECREF(it);
    if (rc < 0) return -1;
    pop_seg(e);
  }
  return 0;
}

/* A dict with str keys; other keys: pickled whole (Python) or refused. */
static int enc_dict(enc *e, PyObject *o) {
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(o, &pos, &k, &v))
    if (!PyUnicode_Check(k)) {
      if (!e->o->foreign) return enc_pickle(e, o, NULL);
      push_seg(e, SP_SEG_KEY, 0, k);
      return enc_fail(e, PyExc_TypeError, "a dict key of type %s cannot be sent to %s (keys must be str)",
                      type_name(k), e->o->foreign_dest);
    }
  int sh = PyDict_CheckExact(o) ? enc_shared(e, o) : 0;
  if (sh) return sh < 0 ? -1 : 0;
  Py_ssize_t n = PyDict_GET_SIZE(o);
  wire_put_dict(e->w, (uint64_t)n);
  pos = 0;
  Py_ssize_t i = 0;
  while (PyDict_Next(o, &pos, &k, &v)) {
    if (i++ >= n) return enc_fail(e, PyExc_RuntimeError, "the dict changed size while it was sent");
    Py_INCREF(k);
    Py_INCREF(v);
    push_seg(e, SP_SEG_KEY, 0, k);
    int rc = put_str(e, k) < 0 ? -1 : enc_value(e, v);
    pop_seg(e);
    Py_DECREF(k);
    Py_DECREF(v);
    if (rc < 0) return -1;
  }
  if (i != n) return enc_fail(e, PyExc_RuntimeError, "the dict changed size while it was sent");
  return 0;
}

/* ---- arrays -------------------------------------------------------------------------------- */

/* Wire element type of a buffer format, 0 if none. */
static int format_type(const char *f, Py_ssize_t itemsize) {
  if (!f) return WIRE_T_U8;
  if (f[0] == '@' || f[0] == '=' || f[0] == '<') f++;
  if (f[0] && f[1] == 0) {
    switch (f[0]) {
    case 'd': return itemsize == 8 ? WIRE_T_F64 : 0;
    case 'f': return itemsize == 4 ? WIRE_T_F32 : 0;
    case 'l':
    case 'q': return itemsize == 8 ? WIRE_T_I64 : 0;
    case 'i': return itemsize == 4 ? WIRE_T_I32 : 0;
    case 'B': return itemsize == 1 ? WIRE_T_U8 : 0;
    case '?': return itemsize == 1 ? WIRE_T_BOOL : 0;
    }
    return 0;
  }
  if (f[0] == 'Z' && f[1] == 'd' && f[2] == 0 && itemsize == 16) return WIRE_T_C128;
  return 0;
}

/* Writes the bytes of a contiguous buffer as an array of wire type `type` (in a region when
 * large). 0, or -1 with an exception. */
static int put_typed(enc *e, PyObject *owner, const Py_buffer *v, int type, int order) {
  size_t bytes = (size_t)v->len;
  int ndim = v->ndim;
  uint64_t dims[WIRE_MAX_NDIM];
  if (ndim > WIRE_MAX_NDIM) return enc_fail(e, PyExc_ValueError, "an array of %d dimensions cannot be sent (at most %d)", ndim, WIRE_MAX_NDIM);
  for (int d = 0; d < ndim; d++) dims[d] = (uint64_t)v->shape[d];
  /* frame columns may be references too (typed 1-d refs, wire format section 4) */
  if (e->o->zero_copy && (!e->in_frame || ndim == 1) && ndim >= 1 && bytes >= suiro_zc_floor && suiro_zc_active()) {
    int nd = ndim == 1 ? 0 : ndim;
    suiro_buf *b = owner && ((uintptr_t)v->buf & 7) == 0 ? sp_view_region_of(owner) : NULL;
    /* the REF goes into the message whose writer this is, so its grant is in that message's ledger */
    suiro_msg *m = e->o->grants && e->w == suiro_msg_writer(e->o->grants) ? e->o->grants : NULL;
    if (m) {
      if (b && suiro_msg_put_ref(m, b, 0, v->buf, bytes, type, order, nd, dims) == WIRE_OK) return 0;
      b = suiro_buf_alloc(bytes);
      if (b) { /* own = 1: the message keeps the region's reference until it ends (dropped on failure) */
        memcpy(suiro_buf_data(b), v->buf, bytes);
        if (suiro_msg_put_ref(m, b, 1, suiro_buf_data(b), bytes, type, order, nd, dims) == WIRE_OK) return 0;
      }
    }
    /* no region to be had: send a copy */
  }
  void *dst = ndim == 1 ? wire_put_array(e->w, type, dims[0]) : wire_put_ndarray(e->w, type, order, ndim, dims);
  if (dst && bytes) memcpy(dst, v->buf, bytes);
  return 0;
}

static int enc_replacement(enc *e, PyObject *o, PyObject *rep);

/* What _values.to_wire is asked for: 0 a Python receiver (exact forms: None means pickle it),
 * 1 a foreign one (the documented mapping, or a refusal), 2 a frame column for a Python receiver
 * (the mapping: a FRAME's columns are wire vectors). */
static int wire_mode(const enc *e) { return e->o->foreign ? 1 : e->in_frame ? 2 : 0; }

/* A numpy array: the common types straight from its buffer, the rest through to_wire. */
static int enc_ndarray(enc *e, PyObject *o) {
  Py_buffer v;
  if (PyObject_GetBuffer(o, &v, PyBUF_RECORDS_RO) == 0) {
    int type = format_type(v.format, v.itemsize);
    int order = -1;
    if (type) {
      if (PyBuffer_IsContiguous(&v, 'C')) order = WIRE_ORDER_C;
      else if (PyBuffer_IsContiguous(&v, 'F')) order = WIRE_ORDER_F;
    }
    if (type && order >= 0) {
      int rc = put_typed(e, o, &v, type, order);
      PyBuffer_Release(&v);
      return rc;
    }
    PyBuffer_Release(&v);
  } else {
    PyErr_Clear(); /* datetime64 and others export no buffer */
  }
  /* strided, other types: to_wire converts (contiguous copy, widened type, strings, dates) */
  PyObject *rep = PyObject_CallFunction(SP.to_wire, "Oi", o, wire_mode(e));
  if (!rep) return enc_fail_why(e, o);
  int rc = enc_replacement(e, o, rep);
  Py_DECREF(rep);
  return rc;
}

/* A contiguous ndarray `arr` written with an explicit wire type (bool with NA, dates). */
static int put_raw(enc *e, PyObject *arr, int type, int tag, int unit, PyObject *tz) {
  Py_buffer v;
  if (PyObject_GetBuffer(arr, &v, PyBUF_RECORDS_RO) < 0) return enc_fail(e, PyExc_TypeError, "array has no buffer");
  size_t es = wire_type_size(type);
  int order = PyBuffer_IsContiguous(&v, 'C') ? WIRE_ORDER_C : PyBuffer_IsContiguous(&v, 'F') ? WIRE_ORDER_F : -1;
  if (order < 0 || (size_t)v.itemsize != es || (tag != WIRE_ARRAY && v.ndim != 1)) {
    PyBuffer_Release(&v);
    return enc_fail(e, PyExc_TypeError, "internal: expected a contiguous %s array", wire_type_name(type));
  }
  uint64_t n = (uint64_t)(v.len / (Py_ssize_t)es);
  void *dst = NULL;
  int rc = 0;
  if (tag == WIRE_DATE) {
    dst = wire_put_date(e->w, type, n);
  } else if (tag == WIRE_TIMESTAMP) {
    Py_ssize_t tl = 0;
    const char *ts = tz && tz != Py_None ? PyUnicode_AsUTF8AndSize(tz, &tl) : "";
    if (!ts) rc = -1;
    else dst = wire_put_timestamp(e->w, type, unit, (wire_str){ ts, (size_t)tl }, n);
  } else {
    rc = put_typed(e, NULL, &v, type, order);
    PyBuffer_Release(&v);
    return rc;
  }
  if (dst && v.len) memcpy(dst, v.buf, (size_t)v.len);
  PyBuffer_Release(&v);
  return rc;
}

static int enc_strings(enc *e, PyObject *o) {
  PyObject *seq = PySequence_Fast(o, "a string vector must be a sequence");
  if (!seq) return enc_fail(e, PyExc_TypeError, "a string vector must be a sequence");
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  wire_put_strs(e->w, (uint64_t)n);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
    if (s == Py_None || s == SP.NA) {
      wire_strs_add_na(e->w);
    } else if (PyUnicode_Check(s)) {
      Py_ssize_t l;
      const char *p = PyUnicode_AsUTF8AndSize(s, &l);
      PyObject *tmp = NULL;
      if (!p) {
        PyErr_Clear();
        tmp = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
        if (!tmp) {
          Py_DECREF(seq);
          return enc_fail(e, PyExc_ValueError, "string %zd is not valid text", i);
        }
        p = PyBytes_AS_STRING(tmp);
        l = PyBytes_GET_SIZE(tmp);
      }
      wire_strs_add(e->w, p, (size_t)l);
      Py_XDECREF(tmp);
    } else {
      Py_DECREF(seq);
      return enc_fail(e, PyExc_TypeError, "string vector element %zd is a %s (string vectors hold str and None)", i,
                      type_name(s));
    }
  }
  Py_DECREF(seq);
  return 0;
}

static PyObject *getattr_s(PyObject *o, PyObject *name) { return PyObject_GetAttr(o, name); }

/* pandas.Categorical (or anything with codes, categories, ordered) -> FACTOR */
static int enc_factor(enc *e, PyObject *o) {
  PyObject *codes = getattr_s(o, SP.s_codes), *cats = codes ? getattr_s(o, SP.s_categories) : NULL;
  PyObject *ordered = cats ? getattr_s(o, SP.s_ordered) : NULL;
  int rc = -1;
  PyObject *c32 = NULL, *levels = NULL;
  if (!ordered) goto out;
  c32 = PyObject_CallMethod(codes, "astype", "s", "int32");
  levels = c32 ? PySequence_List(cats) : NULL;
  if (!levels) goto out;
  Py_buffer v;
  if (PyObject_GetBuffer(c32, &v, PyBUF_C_CONTIGUOUS) < 0) goto out;
  Py_ssize_t nl = PyList_GET_SIZE(levels);
  uint64_t n = (uint64_t)(v.len / 4);
  int32_t *dst = wire_put_factor(e->w, n, PyObject_IsTrue(ordered) == 1, (uint64_t)nl);
  if (dst) {
    const int32_t *src = v.buf;
    for (uint64_t i = 0; i < n; i++) {
      if (src[i] < -1 || src[i] >= nl) {
        PyBuffer_Release(&v);
        rc = enc_fail(e, PyExc_ValueError, "factor code %d out of range", (int)src[i]);
        goto out;
      }
      dst[i] = src[i];
    }
  }
  PyBuffer_Release(&v);
  for (Py_ssize_t i = 0; i < nl; i++) {
    PyObject *s = PyList_GET_ITEM(levels, i);
    PyObject *str = PyObject_Str(s);
    if (!str) goto out;
    Py_ssize_t l;
    const char *p = PyUnicode_AsUTF8AndSize(str, &l);
    if (!p) {
      Py_DECREF(str);
      goto out;
    }
    wire_strs_add(e->w, p, (size_t)l);
    Py_DECREF(str);
  }
  rc = 0;
out:
  if (rc < 0 && PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
    rc = enc_fail(e, PyExc_TypeError, "a categorical cannot be sent");
  Py_XDECREF(codes);
  Py_XDECREF(cats);
  Py_XDECREF(ordered);
  Py_XDECREF(c32);
  Py_XDECREF(levels);
  return rc;
}

static int unit_code(PyObject *u) {
  if (PyLong_Check(u)) return (int)PyLong_AsLong(u);
  const char *s = PyUnicode_Check(u) ? PyUnicode_AsUTF8(u) : NULL;
  if (!s) return -1;
  if (!strcmp(s, "s")) return WIRE_UNIT_S;
  if (!strcmp(s, "ms")) return WIRE_UNIT_MS;
  if (!strcmp(s, "us")) return WIRE_UNIT_US;
  if (!strcmp(s, "ns")) return WIRE_UNIT_NS;
  return -1;
}

static int array_type_of(PyObject *arr) {
  Py_buffer v;
  if (PyObject_GetBuffer(arr, &v, PyBUF_RECORDS_RO) < 0) return PyErr_Clear(), 0;
  int t = format_type(v.format, v.itemsize);
  PyBuffer_Release(&v);
  return t;
}

static int enc_dates(enc *e, PyObject *o, int ts) {
  PyObject *vals = getattr_s(o, SP.s_values);
  if (!vals) return enc_fail(e, PyExc_TypeError, "%s has no values", type_name(o));
  int type = array_type_of(vals);
  int rc;
  if (!ts) {
    if (type != WIRE_T_I32 && type != WIRE_T_I64 && type != WIRE_T_F64)
      rc = enc_fail(e, PyExc_TypeError, "dates must be int32, int64 or float64 days");
    else
      rc = put_raw(e, vals, type, WIRE_DATE, 0, NULL);
  } else {
    PyObject *unit = getattr_s(o, SP.s_unit), *tz = unit ? getattr_s(o, SP.s_tz) : NULL;
    int u = unit ? unit_code(unit) : -1;
    if (!tz) rc = enc_fail(e, PyExc_TypeError, "timestamps need a unit and a tz");
    else if (u < 0 || u > 3) rc = enc_fail(e, PyExc_ValueError, "timestamp unit must be s, ms, us or ns");
    else if (type != WIRE_T_I64 && type != WIRE_T_F64) rc = enc_fail(e, PyExc_TypeError, "timestamps must be int64 or float64");
    else rc = put_raw(e, vals, type, WIRE_TIMESTAMP, u, tz);
    Py_XDECREF(unit);
    Py_XDECREF(tz);
  }
  Py_DECREF(vals);
  return rc;
}

/* A frame column: arrays, strings, factors, dates, timestamps of nrow elements. */
static int enc_column(enc *e, PyObject *col) {
  return enc_value(e, col);
}

static int enc_frame(enc *e, PyObject *o) {
  PyObject *names = getattr_s(o, SP.s_names), *cols = names ? getattr_s(o, SP.s_columns) : NULL;
  PyObject *nrow = cols ? getattr_s(o, SP.s_nrow) : NULL;
  int rc = -1;
  if (!nrow) {
    rc = enc_fail(e, PyExc_TypeError, "a frame needs names, columns and nrow");
    goto out;
  }
  Py_ssize_t nc = PySequence_Size(names), nr = PyLong_AsSsize_t(nrow);
  if (nc < 0 || nr < 0 || PySequence_Size(cols) != nc) {
    rc = enc_fail(e, PyExc_TypeError, "a frame's names and columns differ in number");
    goto out;
  }
  wire_put_frame(e->w, (uint64_t)nc, (uint64_t)nr);
  e->in_frame++;
  for (Py_ssize_t i = 0; i < nc; i++) {
    PyObject *nm = PySequence_GetItem(names, i), *c = nm ? PySequence_GetItem(cols, i) : NULL;
    if (!c) {
      Py_XDECREF(nm);
      goto out;
    }
    push_seg(e, SP_SEG_COLUMN, 0, nm);
    int r2 = PyUnicode_Check(nm) ? put_str(e, nm) : enc_fail(e, PyExc_TypeError, "column names must be str");
    if (r2 == 0) r2 = enc_column(e, c);
    if (r2 == 0 && e->w->status != WIRE_OK) r2 = enc_fail(e, PyExc_ValueError, "%s", wire_writer_error(e->w));
    pop_seg(e);
    Py_DECREF(nm);
    Py_DECREF(c);
    if (r2 < 0) goto out;
  }
  rc = 0;
out:
  if (nrow) e->in_frame--;
  Py_XDECREF(names);
  Py_XDECREF(cols);
  Py_XDECREF(nrow);
  return rc;
}

static int enc_call(enc *e, PyObject *o) {
  PyObject *target = getattr_s(o, SP.s_target), *source = target ? getattr_s(o, SP.s_source) : NULL;
  PyObject *args = source ? getattr_s(o, SP.s_args) : NULL, *kwargs = args ? getattr_s(o, SP.s_kwargs) : NULL;
  int rc = -1;
  if (!kwargs) goto out;
  int is_src = source != Py_None;
  PyObject *text = is_src ? source : target;
  if (!PyUnicode_Check(text)) {
    rc = enc_fail(e, PyExc_TypeError, "a call spec needs a target name or source text");
    goto out;
  }
  Py_ssize_t tl;
  const char *ts = PyUnicode_AsUTF8AndSize(text, &tl);
  if (!ts) goto out;
  wire_put_call(e->w, is_src ? WIRE_CALL_SOURCE : WIRE_CALL_NAME, (wire_str){ ts, (size_t)tl });
  PyObject *a = PySequence_Fast(args, "call args");
  if (!a) goto out;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
  wire_put_list(e->w, (uint64_t)n);
  for (Py_ssize_t i = 0; i < n; i++) {
    push_seg(e, SP_SEG_ARG, i + 1, NULL);
    int r2 = enc_value(e, PySequence_Fast_GET_ITEM(a, i));
    pop_seg(e);
    if (r2 < 0) {
      Py_DECREF(a);
      goto out;
    }
  }
  Py_DECREF(a);
  if (!PyDict_Check(kwargs)) {
    rc = enc_fail(e, PyExc_TypeError, "call spec keyword arguments must be a dict");
    goto out;
  }
  wire_put_dict(e->w, (uint64_t)PyDict_GET_SIZE(kwargs));
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &k, &v)) {
    if (!PyUnicode_Check(k)) {
      rc = enc_fail(e, PyExc_TypeError, "call spec keyword names must be str");
      goto out;
    }
    push_seg(e, SP_SEG_KWARG, 0, k);
    int r2 = put_str(e, k) < 0 ? -1 : enc_value(e, v);
    pop_seg(e);
    if (r2 < 0) goto out;
  }
  rc = 0;
out:
  Py_XDECREF(target);
  Py_XDECREF(source);
  Py_XDECREF(args);
  Py_XDECREF(kwargs);
  return rc;
}

static int enc_error_value(enc *e, PyObject *o) {
  PyObject *cls = PyObject_GetAttrString(o, "remote_class"), *msg = cls ? PyObject_GetAttrString(o, "message") : NULL;
  PyObject *tb = msg ? PyObject_GetAttrString(o, "traceback") : NULL, *ix = tb ? PyObject_GetAttrString(o, "index") : NULL;
  int rc = -1;
  if (!ix) goto out;
  Py_ssize_t cl, ml, tl;
  const char *c = PyUnicode_Check(cls) ? PyUnicode_AsUTF8AndSize(cls, &cl) : NULL;
  const char *m = PyUnicode_Check(msg) ? PyUnicode_AsUTF8AndSize(msg, &ml) : NULL;
  const char *t = PyUnicode_Check(tb) ? PyUnicode_AsUTF8AndSize(tb, &tl) : (tl = 0, "");
  long long index = ix == Py_None ? -1 : PyLong_AsLongLong(ix);
  if (!c || !m || !t || (index == -1 && PyErr_Occurred())) {
    rc = enc_fail(e, PyExc_TypeError, "a remote error needs str remote_class, message and traceback");
    goto out;
  }
  wire_put_error(e->w, (wire_str){ c, (size_t)cl }, (wire_str){ m, (size_t)ml }, (wire_str){ t, (size_t)tl }, index);
  rc = 0;
out:
  Py_XDECREF(cls);
  Py_XDECREF(msg);
  Py_XDECREF(tb);
  Py_XDECREF(ix);
  return rc;
}

static int enc_refdesc(enc *e, PyObject *o) {
  PyObject *t = PyObject_CallMethod(o, "_wire", NULL); /* (name, kind, order, flags, offset, length, dims) */
  if (!t) return enc_fail(e, PyExc_TypeError, "a bad region reference");
  wire_ref r;
  memset(&r, 0, sizeof r);
  PyObject *name, *dims;
  unsigned long long flags, offset, length;
  int kind, order;
  int rc = -1;
  if (!PyArg_ParseTuple(t, "UiiKKKO", &name, &kind, &order, &flags, &offset, &length, &dims)) goto out;
  Py_ssize_t nl;
  r.name.ptr = PyUnicode_AsUTF8AndSize(name, &nl);
  r.name.len = (size_t)nl;
  r.type = kind;
  r.order = order;
  r.flags = flags;
  r.offset = offset;
  r.length = length;
  uint64_t d[WIRE_MAX_NDIM];
  Py_ssize_t nd = PySequence_Size(dims);
  if (nd < 0 || nd > WIRE_MAX_NDIM) goto out;
  for (Py_ssize_t i = 0; i < nd; i++) {
    PyObject *x = PySequence_GetItem(dims, i);
    d[i] = x ? PyLong_AsUnsignedLongLong(x) : 0;
    Py_XDECREF(x);
  }
  if (PyErr_Occurred()) goto out;
  r.ndim = (int)nd;
  r.dims = d;
  wire_put_ref(e->w, &r);
  rc = 0;
out:
  Py_DECREF(t);
  if (rc < 0) enc_fail(e, PyExc_TypeError, "a bad region reference");
  return rc;
}

static int enc_funcdesc(enc *e, PyObject *o) {
  PyObject *lang = PyObject_GetAttrString(o, "lang"), *key = lang ? PyObject_GetAttrString(o, "key") : NULL;
  PyObject *name = key ? PyObject_GetAttrString(o, "name") : NULL;
  PyObject *cap = name ? PyObject_GetAttrString(o, "captured") : NULL;
  int rc = -1;
  if (!cap) goto out;
  const char *ls = PyUnicode_Check(lang) ? PyUnicode_AsUTF8(lang) : NULL;
  int l = !ls ? 0 : !strcmp(ls, "lua") ? WIRE_LANG_LUA : !strcmp(ls, "python") ? WIRE_LANG_PYTHON : !strcmp(ls, "r") ? WIRE_LANG_R : 0;
  unsigned long long k = PyLong_AsUnsignedLongLong(key);
  Py_ssize_t nc = PySequence_Size(cap);
  if (!l || PyErr_Occurred() || nc < 0) {
    rc = enc_fail(e, PyExc_TypeError, "a bad function descriptor");
    goto out;
  }
  for (int i = 0; i < e->nseen; i++)
    if (e->seen_ptr[i] == (void *)o) {
      wire_put_backref(e->w, e->seen_ord[i]);
      rc = 0;
      goto out;
    }
  if (enc_shared(e, o) < 0) goto out; /* registers it: a recursive function refers to itself */
  wire_put_func(e->w, l, k, (uint64_t)nc + 1);
  if (name == Py_None) wire_put_nil(e->w);
  else if (put_str(e, name) < 0) goto out;
  for (Py_ssize_t i = 0; i < nc; i++) {
    PyObject *x = PySequence_GetItem(cap, i);
    if (!x) goto out;
    push_seg(e, SP_SEG_INDEX, i, NULL);
    int r2 = enc_value(e, x);
    pop_seg(e);
    Py_DECREF(x);
    if (r2 < 0) goto out;
  }
  rc = 0;
out:
  Py_XDECREF(lang);
  Py_XDECREF(key);
  Py_XDECREF(name);
  Py_XDECREF(cap);
  return rc;
}

/* What to_wire gave back for o: another value, or a tuple ("array", type, ndarray),
 * ("date"/"timestamp", ...) handled here; None: pickle or refuse. */
static int enc_replacement(enc *e, PyObject *o, PyObject *rep) {
  if (rep == Py_None) return enc_pickle(e, o, NULL);
  if (PyTuple_CheckExact(rep) && PyTuple_GET_SIZE(rep) >= 1 && PyUnicode_Check(PyTuple_GET_ITEM(rep, 0))) {
    const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(rep, 0));
    if (!strcmp(k, "array") && PyTuple_GET_SIZE(rep) == 3) /* ("array", wire type, contiguous ndarray) */
      return put_raw(e, PyTuple_GET_ITEM(rep, 2), (int)PyLong_AsLong(PyTuple_GET_ITEM(rep, 1)), WIRE_ARRAY, 0, NULL);
    if (!strcmp(k, "factor")) return enc_factor(e, o); /* a Categorical that FACTOR holds exactly */
    if (!strcmp(k, "refuse") && PyTuple_GET_SIZE(rep) == 2) /* ("refuse", why) */
      return enc_fail(e, PyExc_TypeError, "%s cannot be sent%s%s: %U", type_name(o), e->o->foreign ? " to " : "",
                      e->o->foreign ? e->o->foreign_dest : "", PyTuple_GET_ITEM(rep, 1));
    return enc_fail(e, PyExc_TypeError, "internal: unknown conversion %s", k);
  }
  if (rep == o || (SP.ndarray && Py_TYPE(rep) != (PyTypeObject *)SP.ndarray && Py_TYPE(rep) == Py_TYPE(o)))
    return enc_fail(e, PyExc_TypeError, "internal: no wire form for %s", type_name(o));
  if (enc_keep(e, rep) < 0) return -1;
  return enc_value(e, rep);
}

static int is_type(PyObject *o, PyObject *t) { return t && (PyObject *)Py_TYPE(o) == t; }
static int is_instance(PyObject *o, PyObject *t) {
  return t && PyType_Check(t) && PyObject_TypeCheck(o, (PyTypeObject *)t);
}

static int enc_value(enc *e, PyObject *o) {
  wire_writer *w = e->w;
  /* the writer's depth counts the task's (or result's) own list: checked here, the path is named */
  if (w->depth >= WIRE_MAX_DEPTH)
    return enc_fail(e, PyExc_ValueError, "nested more than %d levels deep (the wire's limit, counting the list "
                    "that holds a task's arguments or results)", WIRE_MAX_DEPTH);
  /* the common kinds, by exact type */
  if (o == Py_None) return wire_put_nil(w), 0;
  if (o == Py_True || o == Py_False) return wire_put_bool(w, o == Py_True), 0;
  PyTypeObject *t = Py_TYPE(o);
  if (t == &PyLong_Type) {
    int of;
    long long v = PyLong_AsLongLongAndOverflow(o, &of);
    if (!of) return wire_put_i64(w, v), 0;
    return enc_pickle(e, o, "the int does not fit in 64 bits");
  }
  if (t == &PyFloat_Type) return wire_put_f64(w, PyFloat_AS_DOUBLE(o)), 0;
  if (t == &PyUnicode_Type) return put_str(e, o);
  if (t == &PyBytes_Type) return wire_put_bytes(w, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o)), 0;
  if (t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type) {
    if (++e->depth > WIRE_MAX_DEPTH)
      return enc_fail(e, PyExc_ValueError, "nested deeper than %d levels", WIRE_MAX_DEPTH);
    int rc;
    if (t == &PyTuple_Type && !e->o->foreign) { /* Python receivers get a tuple back */
      wire_put_func(w, WIRE_LANG_PYTHON, 0, 2);
      wire_put_str(w, "tuple:", 6);
      rc = enc_list(e, o);
    } else {
      rc = t == &PyDict_Type ? enc_dict(e, o) : enc_list(e, o);
    }
    e->depth--;
    return rc;
  }
  if (o == SP.NA) return wire_put_bool(w, WIRE_NA_BOOL), 0;
  if (PyObject_TypeCheck(o, &SpChan_Type)) { /* a channel endpoint: given to the receiver (chan.c) */
    const char *why = sp_chan_encode(o, w);
    return why ? enc_fail(e, PyExc_ValueError, "%s", why) : 0;
  }
  if (!SP.ndarray && PyDict_GetItemString(PyImport_GetModuleDict(), "numpy") && sp_numpy() < 0) return -1;
  if (SP.ndarray && t == (PyTypeObject *)SP.ndarray) return enc_ndarray(e, o);
  if (t == &PyRange_Type) {
    PyObject *start = PyObject_GetAttrString(o, "start"), *step = start ? PyObject_GetAttrString(o, "step") : NULL;
    Py_ssize_t n = step ? PyObject_Length(o) : -1;
    int of1 = 1, of2 = 1;
    long long a = start ? PyLong_AsLongLongAndOverflow(start, &of1) : 0;
    long long s = step ? PyLong_AsLongLongAndOverflow(step, &of2) : 0;
    Py_XDECREF(start);
    Py_XDECREF(step);
    if (n < 0) PyErr_Clear();
    if (n >= 0 && !of1 && !of2 && wire_put_range(w, a, s, (uint64_t)n) == WIRE_OK) return 0;
    if (w->status != WIRE_OK) return enc_fail(e, PyExc_ValueError, "%s", wire_writer_error(w));
    return enc_pickle(e, o, "the range leaves the 64-bit integers");
  }
  if (is_type(o, SP.Strings)) return enc_strings(e, o);
  if (is_type(o, SP.Frame)) return enc_frame(e, o);
  if (is_type(o, SP.Dates)) return enc_dates(e, o, 0);
  if (is_type(o, SP.Timestamps)) return enc_dates(e, o, 1);
  if (is_type(o, SP.Call)) return enc_call(e, o);
  if (is_type(o, SP.Ref)) return enc_refdesc(e, o);
  if (is_type(o, SP.Func)) return enc_funcdesc(e, o);
  if (is_instance(o, SP.RemoteError)) return enc_error_value(e, o);
  if (SP.pd_categorical || (sp_pandas_seen(), SP.pd_categorical))
    if (is_type(o, SP.pd_categorical)) {
      if (e->o->foreign || e->in_frame) return enc_factor(e, o);
      /* Python receivers: FACTOR when it holds the Categorical exactly (str categories), else a
       * pickle (integer categories stay integers) */
      PyObject *rep = PyObject_CallFunction(SP.to_wire, "Oi", o, 0);
      if (!rep) return enc_fail_why(e, o);
      int rc = enc_replacement(e, o, rep);
      Py_DECREF(rep);
      return rc;
    }
  /* numpy scalars: for Python receivers the scalar of its dtype; for others its Python value
   * (np.float64 is a float subclass, np.int64 is not) */
  if (SP.np_generic && is_instance(o, SP.np_generic) && !is_instance(o, SP.ndarray)) {
    if (!e->o->foreign) {
      int r = enc_np_scalar(e, o);
      return r <= 0 ? r : enc_pickle(e, o, NULL);
    }
    PyObject *py = PyObject_CallMethod(o, "item", NULL);
    if (!py) return enc_fail(e, PyExc_TypeError, "%s cannot be sent", type_name(o));
    PyTypeObject *pt = Py_TYPE(py);
    int rc;
    if (pt == &PyLong_Type || pt == &PyFloat_Type || pt == &PyBool_Type || pt == &PyUnicode_Type || pt == &PyBytes_Type) {
      rc = enc_value(e, py);
      Py_DECREF(py);
      return rc;
    }
    Py_DECREF(py);
    /* complex, datetime64 and the like: to_wire knows their vector forms (below) */
  }
  /* subclasses of the basic kinds: Python receivers get them back exactly (pickle), others the
   * plain value */
  if (e->o->foreign) {
    if (PyLong_Check(o)) {
      int of;
      long long v = PyLong_AsLongLongAndOverflow(o, &of);
      if (!of && !PyErr_Occurred()) return wire_put_i64(w, v), 0;
      PyErr_Clear();
    } else if (PyFloat_Check(o)) {
      return wire_put_f64(w, PyFloat_AS_DOUBLE(o)), 0;
    } else if (PyUnicode_Check(o)) {
      return put_str(e, o);
    } else if (PyBytes_Check(o)) {
      return wire_put_bytes(w, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o)), 0;
    } else if (PyList_Check(o) || PyTuple_Check(o)) {
      if (++e->depth > WIRE_MAX_DEPTH) return enc_fail(e, PyExc_ValueError, "nested deeper than %d levels", WIRE_MAX_DEPTH);
      int rc = enc_list(e, o);
      e->depth--;
      return rc;
    } else if (PyDict_Check(o)) {
      if (++e->depth > WIRE_MAX_DEPTH) return enc_fail(e, PyExc_ValueError, "nested deeper than %d levels", WIRE_MAX_DEPTH);
      int rc = enc_dict(e, o);
      e->depth--;
      return rc;
    }
  } else if (PyFloat_Check(o) && SP.np_generic && is_instance(o, SP.np_generic)) {
    return wire_put_f64(w, PyFloat_AS_DOUBLE(o)), 0;
  }
  /* a function as a value (an argument, a result, an element): one no worker imports (a lambda,
   * a main-script function) by its plan, as a task function is -- its code published once per
   * pool, what it captured with the value; importable ones and those the plan cannot split are
   * pickled below (main-script ones by cloudpickle, _values.dumps_oob) */
  if (PyFunction_Check(o) && !e->captured && e->nfn < (int)(sizeof e->fns / sizeof e->fns[0])) {
    e->fns[e->nfn++] = o;
    int rc = enc_planned(e, o, NULL);
    e->nfn--;
    if (rc <= 0) return rc;
  }
  /* the rest: pandas objects, masked arrays, other numpy arrays, ... */
  PyObject *rep = PyObject_CallFunction(SP.to_wire, "Oi", o, wire_mode(e));
  if (!rep) return enc_fail_why(e, o);
  if (rep == Py_None) {
    Py_DECREF(rep);
    return enc_pickle(e, o, NULL);
  }
  int rc = enc_replacement(e, o, rep);
  Py_DECREF(rep);
  return rc;
}

/* ---- the function item (identities and plans: func.c) ---------------------------------------- */

static int put_kwargs(enc *e, PyObject *kwargs) {
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  wire_put_dict(e->w, (uint64_t)PyDict_GET_SIZE(kwargs));
  while (PyDict_Next(kwargs, &pos, &k, &v)) {
    push_seg(e, SP_SEG_KWARG, 0, k);
    int rc = put_str(e, k) < 0 ? -1 : enc_value(e, v);
    pop_seg(e);
    if (rc < 0) return -1;
  }
  return 0;
}

static int enc_planned(enc *e, PyObject *fn, PyObject *kwargs);

/* A large captured list or dict: pickled, published by content in the pool's blob store and sent
 * as FUNC(python, key, 1) [nil], which a worker unpickles once per content (its code cache) --
 * as the whole function pickled at each submit was, when the value had not changed. Unpickling
 * is also ~3x faster than reading the wire's items (100k ints: 3 ms against 9 ms). */
static int put_captured_blob(enc *e, PyObject *v) {
  PoolObject *po = e->o->pool;
  if (!po || !po->p) return enc_value(e, v);
  PyObject *dumps = dumps_captured();
  if (!dumps) return -1;
  PyObject *b = call_dumps(e, dumps, v);
  if (!b) return enc_fail_pickling(e, v);
  if (!PyBytes_Check(b)) {
    Py_DECREF(b);
    return enc_fail(e, PyExc_TypeError, "%s cannot be sent (pickling gave no bytes)", type_name(v));
  }
  uint64_t key = suiro_fn_key(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
  suiro_status st = suiro_fn_publish(po->p, key, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
  Py_DECREF(b);
  if (st != SUIRO_OK) return enc_value(e, v); /* the blob store is full: inline */
  wire_put_func(e->w, WIRE_LANG_PYTHON, key, 1);
  wire_put_nil(e->w);
  return 0;
}

static int put_captured(enc *e, PyObject *v) {
  if (!v) return enc_fail(e, PyExc_RuntimeError, "a global the function reads changed while the task was sent");
  Py_INCREF(v);
  int rc = 1;
  if (PyFunction_Check(v) && e->nfn < (int)(sizeof e->fns / sizeof e->fns[0])) {
    /* a helper function of the script: by its plan too, unless it is being written already
     * (mutual recursion: then pickled whole, which keeps the cycle) */
    int k = 0;
    while (k < e->nfn && e->fns[k] != v) k++;
    if (k == e->nfn) {
      e->fns[e->nfn++] = v;
      rc = enc_planned(e, v, NULL);
      e->nfn--;
    }
  }
  if (rc > 0) {
    Py_ssize_t n = PyList_CheckExact(v) ? PyList_GET_SIZE(v) : PyDict_CheckExact(v) ? PyDict_GET_SIZE(v) : 0;
    rc = n > 4096 ? put_captured_blob(e, v) : enc_value(e, v);
  }
  Py_DECREF(v);
  return rc;
}

/* A captured value that cannot be sent: the function and the name that captured it, with the
 * first reason (as pickling the whole function said) */
static int captured_fail(enc *e, PyObject *fn, PyObject *label) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  PyObject *root = v ? Py_NewRef(v) : NULL;
  for (int k = 0; root && k < 16; k++) {
    PyObject *c = PyException_GetCause(root);
    if (!c) break;
    Py_SETREF(root, c);
  }
  PyObject *why = root ? PyObject_Str(root) : NULL;
  Py_XDECREF(root);
  if (!why) PyErr_Clear();
  PyErr_Restore(t, v, tb);
  int rc = why ? enc_fail(e, PyExc_TypeError, "the function %R cannot be sent: %U (captured as %U)", fn, why, label)
               : enc_fail(e, PyExc_TypeError, "the function %R cannot be sent (captured as %U)", fn, label);
  Py_XDECREF(why);
  return rc;
}

static int captured_fail_s(enc *e, PyObject *fn, const char *label) {
  PyObject *l = PyUnicode_FromString(label);
  int rc = l ? captured_fail(e, fn, l) : -1;
  Py_XDECREF(l);
  return rc;
}

static int plan_write(enc *e, PyObject *plan, PyObject *fn, PyObject *kwargs) {
  wire_writer *w = e->w;
  uint64_t key; /* 8 bytes: a 64-bit int's conversion is the slow path of PyLong */
  memcpy(&key, PyBytes_AS_STRING(PyTuple_GET_ITEM(plan, PLAN_KEY)), sizeof key);
  Py_ssize_t ndyn = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, PLAN_NDYN));
  if (PyErr_Occurred()) return -1;
  int has_kw = kwargs && PyDict_GET_SIZE(kwargs) > 0;
  int has_defs = PyFunction_GET_DEFAULTS(fn) || PyFunction_GET_KW_DEFAULTS(fn);
  if (!has_kw && !has_defs && ndyn == 0) { /* nothing captured: the code alone */
    wire_put_func(w, WIRE_LANG_PYTHON, key, 1);
    wire_put_nil(w);
    return 0;
  }
  wire_put_func(w, WIRE_LANG_PYTHON, key, 3);
  wire_put_nil(w);
  if (has_kw) {
    if (put_kwargs(e, kwargs) < 0) return -1;
  } else {
    wire_put_nil(w);
  }
  wire_put_list(w, (uint64_t)ndyn + (has_defs ? 2 : 0));
  int was = e->captured, rc = 0;
  e->captured = 1;
  PyObject *g = PyFunction_GET_GLOBALS(fn);
  PyObject *names = PyTuple_GET_ITEM(plan, PLAN_GNAMES), *kinds = PyTuple_GET_ITEM(plan, PLAN_GKINDS);
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(names); rc == 0 && i < n; i++) {
    if (PyTuple_GET_ITEM(kinds, i) != sp_plan_dyn) continue;
    PyObject *name = PyTuple_GET_ITEM(names, i);
    PyObject *v = PyDict_GetItemWithError(g, name);
    rc = !v && PyErr_Occurred() ? -1 : put_captured(e, v);
    if (rc < 0) rc = captured_fail(e, fn, name);
  }
  PyObject *cl = PyFunction_GET_CLOSURE(fn), *ck = PyTuple_GET_ITEM(plan, PLAN_CKINDS);
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(ck); rc == 0 && i < n; i++) {
    if (PyTuple_GET_ITEM(ck, i) != sp_plan_dyn) continue;
    rc = put_captured(e, PyCell_GET(PyTuple_GET_ITEM(cl, i)));
    if (rc < 0) {
      PyObject *fv = PyObject_GetAttrString(PyFunction_GET_CODE(fn), "co_freevars"), *label;
      if (fv && PyTuple_Check(fv) && i < PyTuple_GET_SIZE(fv)) label = Py_NewRef(PyTuple_GET_ITEM(fv, i));
      else label = PyUnicode_FromFormat("cell %zd", i);
      Py_XDECREF(fv);
      rc = label ? captured_fail(e, fn, label) : -1;
      Py_XDECREF(label);
    }
  }
  if (!has_defs) {
    e->captured = was;
    return rc;
  }
  PyObject *d = rc == 0 ? PyFunction_GET_DEFAULTS(fn) : NULL;
  if (rc == 0) rc = d ? put_captured(e, d) : (wire_put_nil(w), 0);
  if (rc < 0 && d) rc = captured_fail_s(e, fn, "__defaults__");
  d = rc == 0 ? PyFunction_GET_KW_DEFAULTS(fn) : NULL;
  if (rc == 0) rc = d ? put_captured(e, d) : (wire_put_nil(w), 0);
  if (rc < 0 && d) rc = captured_fail_s(e, fn, "__kwdefaults__");
  e->captured = was;
  return rc;
}

/* Writes fn by its plan (func.c keeps the plans): 0, -1 with an exception, or 1 when fn does not
 * go this way (importable, or a kind of function the plan cannot split: it is pickled whole). */
static int enc_planned(enc *e, PyObject *fn, PyObject *kwargs) {
  PoolObject *po = e->o->pool;
  if (!po || !po->p || e->o->foreign || !PyFunction_Check(fn)) return 1;
  PyObject *plan;
  int rc = sp_function_plan(po, fn, &plan);
  if (rc) return rc;
  rc = plan_write(e, plan, fn, kwargs);
  Py_DECREF(plan);
  return rc;
}


/* Writes the function item (a callable, a "module.fn" str) for Python workers. */
/* A function given by name is checked by the grammar every face uses before it is sent (a bad
 * name was accepted and failed only in the worker); a name submitted again in a loop is checked
 * once (the pool remembers the last one, as it does the last callable). */
static int check_name(enc *e, PyObject *fn) {
  PoolObject *po = e->o->pool;
  if (po && fn == po->last_fn) return 0;
  char why[512];
  int bad = sp_fnref_check(fn, why, sizeof why);
  if (bad == -2) return -1;
  if (bad) return enc_fail(e, PyExc_ValueError, "%s", why);
  if (po) {
    Py_XSETREF(po->last_fn, Py_NewRef(fn));
    Py_XSETREF(po->last_item, Py_NewRef(fn));
  }
  return 0;
}

static int enc_function(enc *e, PyObject *fn, PyObject *kwargs) {
  int has_kw = kwargs && PyDict_GET_SIZE(kwargs) > 0;
  PyObject *id;
  if (PyUnicode_Check(fn)) {
    if (check_name(e, fn) < 0) return -1;
    id = Py_NewRef(fn);
  } else {
    PoolObject *po = e->o->pool;
    if (po && fn == po->last_fn) {
      id = Py_NewRef(po->last_item);
    } else {
      if (PyFunction_Check(fn) && po && po->fn_cache &&
          (PyFunction_GET_CODE(fn) == po->last_code || !PyDict_GetItemWithError(po->fn_cache, fn))) {
        if (PyErr_Occurred()) return -1;
        e->fns[e->nfn++] = fn;
        int rc = enc_planned(e, fn, kwargs);
        e->nfn--;
        if (rc <= 0) return rc;
      }
      id = sp_function_identity(e->o->pool, fn);
      if (!id) { /* say why (pickling it failed on what it captured, say), not only that */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        PyObject *why = v ? PyObject_Str(v) : NULL;
        PyErr_Restore(t, v, tb);
        int rc = why && PyUnicode_GET_LENGTH(why) ? enc_fail(e, PyExc_TypeError, "the function %R cannot be sent: %U", fn, why)
                                                  : enc_fail(e, PyExc_TypeError, "the function %R cannot be sent", fn);
        Py_XDECREF(why);
        return rc;
      }
      if (po && PyUnicode_Check(id)) { /* remember by-reference functions only: a function sent by
                                         value may hold objects the caller wants collected */
        Py_XSETREF(po->last_fn, Py_NewRef(fn));
        Py_XSETREF(po->last_item, Py_NewRef(id));
      }
    }
  }
  int rc;
  if (PyUnicode_Check(id)) {
    if (has_kw) wire_put_func(e->w, WIRE_LANG_PYTHON, 0, 2);
    rc = put_str(e, id);
  } else {
    uint64_t key = PyLong_AsUnsignedLongLong(id);
    wire_put_func(e->w, WIRE_LANG_PYTHON, key, has_kw ? 2 : 1);
    rc = wire_put_nil(e->w);
  }
  Py_DECREF(id);
  if (rc == 0 && has_kw) rc = put_kwargs(e, kwargs);
  return rc;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static int writer_check(enc *e) {
  if (e->w->status != WIRE_OK) return enc_fail(e, PyExc_ValueError, "%s", wire_writer_error(e->w));
  return 0;
}

int sp_encode_task(const sp_enc_opts *o, PyObject *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs,
                   wire_writer *w) {
  enc e;
  enc_init(&e, o, w);
  int rc = -1;
  int has_kw = kwargs && PyDict_GET_SIZE(kwargs) > 0;
  push_seg(&e, SP_SEG_ARG, 1, NULL);
  if (is_type(fn, SP.Call)) {
    if (nargs || has_kw) {
      PyErr_Format(PyExc_TypeError, "%s: a call spec carries its own arguments; put them in suiro.call(...)", o->verb);
      goto out;
    }
    wire_put_list(w, 1);
    rc = enc_call(&e, fn);
    goto out;
  }
  if (o->foreign) {
    if (!PyUnicode_Check(fn)) {
      PyErr_Format(PyExc_TypeError,
                   "%s: argument 1 must name a %s function (\"module.fn\") or be a suiro.call; a Python %s cannot run "
                   "on %s workers",
                   o->verb, o->foreign_lang, type_name(fn), o->foreign_lang);
      goto out;
    }
    if (check_name(&e, fn) < 0) goto out;
    if (has_kw) { /* named arguments: a call spec */
      wire_put_list(w, 1);
      Py_ssize_t tl;
      const char *ts = PyUnicode_AsUTF8AndSize(fn, &tl);
      if (!ts) goto out;
      wire_put_call(w, WIRE_CALL_NAME, (wire_str){ ts, (size_t)tl });
      wire_put_list(w, (uint64_t)nargs);
      for (Py_ssize_t i = 0; i < nargs; i++) {
        e.nseg = 0;
        push_seg(&e, SP_SEG_ARG, i + 2, NULL);
        if (enc_value(&e, args[i]) < 0) goto out;
      }
      e.nseg = 0;
      if (put_kwargs(&e, kwargs) < 0) goto out;
      rc = writer_check(&e);
      goto out;
    }
    wire_put_list(w, (uint64_t)nargs + 1);
    if (put_str(&e, fn) < 0) goto out;
  } else {
    if (!PyUnicode_Check(fn) && !PyCallable_Check(fn)) {
      PyErr_Format(PyExc_TypeError, "%s: argument 1 must be a callable, a \"module.fn\" name or a suiro.call, got %s",
                   o->verb, type_name(fn));
      goto out;
    }
    wire_put_list(w, (uint64_t)nargs + 1);
    if (enc_function(&e, fn, kwargs) < 0) goto out;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) {
    e.nseg = 0;
    push_seg(&e, SP_SEG_ARG, i + 2, NULL);
    if (enc_value(&e, args[i]) < 0) goto out;
  }
  e.nseg = 0;
  rc = writer_check(&e);
out:
  enc_end(&e);
  return rc;
}

int sp_encode_list(const sp_enc_opts *o, PyObject *const *vals, Py_ssize_t n, int segk, Py_ssize_t seg_i,
                   wire_writer *w) {
  enc e;
  enc_init(&e, o, w);
  int rc = -1;
  wire_put_list(w, (uint64_t)n);
  for (Py_ssize_t i = 0; i < n; i++) {
    e.nseg = 0;
    push_seg(&e, segk, seg_i + i, NULL);
    if (enc_value(&e, vals[i]) < 0) goto out;
  }
  e.nseg = 0;
  rc = writer_check(&e);
out:
  enc_end(&e);
  return rc;
}

int sp_encode_value(const sp_enc_opts *o, PyObject *v, wire_writer *w) {
  enc e;
  enc_init(&e, o, w);
  int rc = enc_value(&e, v);
  if (rc == 0) rc = writer_check(&e);
  enc_end(&e);
  return rc;
}

int sp_encode_fn_list(const sp_enc_opts *o, PyObject *fn, wire_writer *w) {
  enc e;
  enc_init(&e, o, w);
  int rc = -1;
  push_seg(&e, SP_SEG_FUNCTION, 0, NULL);
  wire_put_list(w, 1);
  if (is_type(fn, SP.Call)) {
    rc = enc_call(&e, fn);
  } else if (o->foreign) {
    if (!PyUnicode_Check(fn)) {
      PyErr_Format(PyExc_TypeError, "%s: the function must name a %s function (\"module.fn\"); a Python %s cannot run on %s workers",
                   o->verb, o->foreign_lang, type_name(fn), o->foreign_lang);
      goto out;
    }
    if (check_name(&e, fn) < 0) goto out;
    rc = put_str(&e, fn);
  } else if (!PyUnicode_Check(fn) && !PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "%s: argument 1 must be a callable or a \"module.fn\" name, got %s", o->verb, type_name(fn));
    goto out;
  } else {
    rc = enc_function(&e, fn, NULL);
  }
  if (rc == 0) rc = writer_check(&e);
out:
  enc_end(&e);
  return rc;
}
