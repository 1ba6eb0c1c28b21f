/*
 * dec.c — the wire format -> Python values (the table in enc.c, read backwards), and the tasks a
 * worker receives (the function item, then its arguments).
 *
 * Untrusted bytes (SP_DEC_TRUSTED not set) never unpickle nor import: what is refused is named.
 * FUNC items resolve through func.c (names, code keys, functions built from their plans).
 *
 * Ownership and the GIL: called with the GIL held. The decoder returns new references; arrays it
 * makes own their bytes (copies) unless they are views of a region, which hold a reference to it.
 * Containers seen by ordinal (back-references) are held in d->refs until the decode ends.
 */
#include <string.h>

#include "suiro_py.h"

/* ---- decoder -------------------------------------------------------------------------------------- */

typedef struct dec {
  wire_reader r;
  int flags;
  suiro_buf *region;  /* the buffer lies in this region: large arrays are views of it */
  PyObject *refs;     /* containers by ordinal (when the buffer has back-references) */
} dec;

static int dec_fail(dec *d) {
  PyErr_Format(PyExc_ValueError, "cannot decode value: %s", wire_reader_error(&d->r));
  return -1;
}

static int dec_next(dec *d, wire_item *it) {
  int st = wire_next(&d->r, it);
  if (st == WIRE_OK) return 0;
  if (st == WIRE_END) {
    PyErr_SetString(PyExc_ValueError, "cannot decode value: the buffer ended early");
    return -1;
  }
  return dec_fail(d);
}

static PyObject *dec_value(dec *d, wire_item *it);

static PyObject *dec_child(dec *d) {
  wire_item c;
  if (dec_next(d, &c) < 0) return NULL;
  return dec_value(d, &c);
}

static int remember(dec *d, PyObject *o) {
  if (!d->r.shared) return 0;
  if (!d->refs && !(d->refs = PyList_New(0))) return -1;
  return PyList_Append(d->refs, o);
}

static PyObject *str_of(const void *p, size_t n) { return PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "surrogateescape"); }

/* numpy dtype of a wire element type */
static PyObject *dtype_of(int type) { return SP.np_dtypes[type]; }

/* A private, writable numpy array holding a copy of the bytes. */
static PyObject *array_copy(int type, const void *data, uint64_t count, int order, int ndim, const uint64_t *dims) {
  if (sp_numpy() < 0) return NULL;
  size_t es = wire_type_size(type);
  Py_ssize_t bytes = (Py_ssize_t)(count * es);
  PyObject *ba = PyByteArray_FromStringAndSize(data, bytes);
  if (!ba) return NULL;
  PyObject *a = PyObject_CallFunctionObjArgs(SP.np_frombuffer, ba, dtype_of(type), NULL);
  Py_DECREF(ba);
  if (!a || ndim == 1 || ndim < 0) return a;
  PyObject *r = sp_reshape(a, ndim, dims, order);
  Py_DECREF(a);
  return r;
}

static int has_na_bool(const unsigned char *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] == WIRE_NA_BOOL) return 1;
  return 0;
}

static PyObject *dec_array(dec *d, wire_item *it) {
  int nd = it->tag == WIRE_NDARRAY ? it->ndim : 1;
  uint64_t one[1] = { it->n };
  const uint64_t *dims = it->tag == WIRE_NDARRAY ? it->dims : one;
  size_t bytes = (size_t)(it->n * wire_type_size(it->type));
  if (it->type == WIRE_T_BOOL && has_na_bool(it->data, it->n)) {
    PyObject *raw = array_copy(WIRE_T_U8, it->data, it->n, it->tag == WIRE_NDARRAY ? it->flag : 0, nd, dims);
    if (!raw) return NULL;
    PyObject *r = PyObject_CallOneArg(SP.make_bool_na, raw);
    Py_DECREF(raw);
    return r;
  }
  if (d->region && bytes >= suiro_zc_floor && nd >= 1) {
    if (sp_numpy() < 0) return NULL;
    suiro_buf_hold(d->region);
    return sp_view_array(d->region, it->data, bytes, it->type, it->tag == WIRE_NDARRAY ? it->flag : 0,
                         it->tag == WIRE_NDARRAY ? it->ndim : 0, dims);
  }
  return array_copy(it->type, it->data, it->n, it->tag == WIRE_NDARRAY ? it->flag : 0,
                    it->tag == WIRE_NDARRAY ? it->ndim : 1, dims);
}

static PyObject *strs_list(const wire_strs *s) {
  PyObject *l = PyList_New((Py_ssize_t)s->n);
  if (!l) return NULL;
  wire_strs_iter si = wire_strs_begin(s);
  const char *p;
  size_t len;
  Py_ssize_t i = 0;
  while (wire_strs_next(&si, &p, &len)) {
    PyObject *x = p ? str_of(p, len) : Py_NewRef(Py_None);
    if (!x) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, i++, x);
  }
  return l;
}

static PyObject *dec_ref(dec *d, wire_item *it) {
  const wire_ref *r = &it->ref;
  if (d->flags & SP_DEC_DESCRIBE) {
    PyObject *dims = PyTuple_New(r->ndim);
    if (!dims) return NULL;
    for (int k = 0; k < r->ndim; k++) PyTuple_SET_ITEM(dims, k, PyLong_FromUnsignedLongLong(r->dims[k]));
    PyObject *name = str_of(r->name.ptr, r->name.len);
    PyObject *o = name ? PyObject_CallFunction(SP.make_ref, "OiiKKKO", name, r->type, r->order, (unsigned long long)r->flags,
                                              (unsigned long long)r->offset, (unsigned long long)r->length, dims)
                       : NULL;
    Py_XDECREF(name);
    Py_DECREF(dims);
    return o;
  }
  if (r->type == WIRE_REF_CHAN) return sp_chan_decode(r); /* a channel endpoint (chan.c) */
  suiro_view v;
  if (suiro_zc_open(r, &v) != SUIRO_OK) {
    PyErr_Format(PyExc_ValueError, "cannot decode value: %s (byte %zu)", suiro_last_error(), it->pos);
    return NULL;
  }
  if (r->type == WIRE_REF_BYTES) {
    PyObject *b = PyBytes_FromStringAndSize(v.data, (Py_ssize_t)v.bytes);
    suiro_buf_unref(v.buf);
    return b;
  }
  if (r->type == WIRE_REF_WIRE) { /* a whole value in the region: decoded in place */
    PyObject *o = sp_decode(v.data, (size_t)v.bytes, d->flags, v.buf);
    suiro_buf_unref(v.buf);
    return o;
  }
  if (sp_numpy() < 0) {
    suiro_buf_unref(v.buf);
    return NULL;
  }
  if (r->type == WIRE_T_BOOL && has_na_bool(v.data, v.count)) {
    uint64_t one[1] = { v.count };
    PyObject *raw = array_copy(WIRE_T_U8, v.data, v.count, r->order, r->ndim ? r->ndim : 1, r->ndim ? r->dims : one);
    suiro_buf_unref(v.buf);
    if (!raw) return NULL;
    PyObject *res = PyObject_CallOneArg(SP.make_bool_na, raw);
    Py_DECREF(raw);
    return res;
  }
  return sp_view_array(v.buf, v.data, v.bytes, r->type, r->order, r->ndim, r->dims);
}

/* The one-element array of a "scalar:" item, as the numpy scalar of its dtype. */
static PyObject *dec_scalar(dec *d, const wire_item *it) {
  wire_item b;
  if (dec_next(d, &b) < 0) return NULL;
  if (b.tag != WIRE_ARRAY || b.n != 1 || it->n != 2)
    return PyErr_SetString(PyExc_ValueError, "cannot decode value: a numpy scalar without its one-element array"), NULL;
  PyObject *a = array_copy(b.type, b.data, 1, 0, 1, NULL);
  PyObject *r = a ? PySequence_GetItem(a, 0) : NULL;
  Py_XDECREF(a);
  return r;
}

/* A Python FUNC item in bytes nobody vouched for: a tuple is plain data; a pickle, a named
 * function (imported) or a function by code (unpickled) is refused, naming what it was. */
static PyObject *refuse_untrusted(dec *d, wire_item *it) {
  static const char how[] = "pass trusted=True to suiro.wire.decode only for bytes from a source you trust";
  static const char why[] = "the bytes do not come from this host's own Python workers";
  char msg[640];
  size_t pos = it->pos;
  if (it->i != 0) {
    snprintf(msg, sizeof msg, "cannot decode value: refused a Python function sent by code at byte %zu (unpickling it "
             "runs code chosen by the bytes; %s); %s", pos, why, how);
    PyErr_SetString(PyExc_ValueError, msg);
    return NULL;
  }
  wire_item c;
  if (dec_next(d, &c) < 0) return NULL;
  if (c.tag != WIRE_STR) return PyErr_SetString(PyExc_ValueError, "cannot decode value: a named function without a name"), NULL;
  if (c.n == 6 && memcmp(c.data, "tuple:", 6) == 0) { /* data only: decoded as trusted bytes would be */
    wire_item b;
    if (dec_next(d, &b) < 0) return NULL;
    if (b.tag != WIRE_LIST || it->n != 2)
      return PyErr_SetString(PyExc_ValueError, "cannot decode value: a tuple without its items"), NULL;
    if (d->r.shared && remember(d, Py_None) < 0) return NULL;
    Py_ssize_t slot = d->r.shared ? PyList_GET_SIZE(d->refs) - 1 : -1;
    PyObject *l = dec_value(d, &b);
    PyObject *res = l ? PyList_AsTuple(l) : NULL;
    Py_XDECREF(l);
    if (res && slot >= 0) PyList_SetItem(d->refs, slot, Py_NewRef(res));
    return res;
  }
  if (c.n == 7 && memcmp(c.data, "scalar:", 7) == 0) { /* data only, as a tuple */
    if (d->r.shared && remember(d, Py_None) < 0) return NULL;
    Py_ssize_t slot = d->r.shared ? PyList_GET_SIZE(d->refs) - 1 : -1;
    PyObject *res = dec_scalar(d, it);
    if (res && slot >= 0) PyList_SetItem(d->refs, slot, Py_NewRef(res));
    return res;
  }
  int pickled = c.n > 7 && memcmp(c.data, "pickle:", 7) == 0;
  const char *name = pickled ? (const char *)c.data + 7 : (const char *)c.data;
  int shown = (int)((pickled ? c.n - 7 : c.n) > 120 ? 120 : (pickled ? c.n - 7 : c.n));
  char label[128];
  size_t k = 0; /* the name as printable ASCII (the bytes chose it) */
  for (int j = 0; j < shown && k < sizeof label - 1; j++) {
    unsigned char ch = (unsigned char)name[j];
    label[k++] = ch >= 32 && ch < 127 ? (char)ch : '?';
  }
  label[k] = 0;
  if (pickled)
    snprintf(msg, sizeof msg, "cannot decode value: refused a pickled Python object (%s) at byte %zu: unpickling runs "
             "code chosen by the bytes, and %s; %s", label, pos, why, how);
  else
    snprintf(msg, sizeof msg, "cannot decode value: refused to import the Python function '%s' at byte %zu: importing "
             "runs module code, and %s; %s", label, pos, why, how);
  PyErr_SetString(PyExc_ValueError, msg);
  return NULL;
}
static PyObject *dec_func(dec *d, wire_item *it) {
  uint64_t key = (uint64_t)it->i;
  uint64_t n = it->n;
  if (it->flag != WIRE_LANG_PYTHON || (d->flags & SP_DEC_DESCRIBE)) {
    static const char *const langs[] = { "?", "lua", "python", "r" };
    PyObject *f = PyObject_CallFunction(SP.make_func, "sK", langs[it->flag >= 1 && it->flag <= 3 ? it->flag : 0],
                                        (unsigned long long)key);
    if (!f || remember(d, f) < 0) return Py_XDECREF(f), NULL;
    PyObject *name = dec_child(d);
    if (!name || PyObject_SetAttrString(f, "name", name) < 0) {
      Py_XDECREF(name);
      Py_DECREF(f);
      return NULL;
    }
    Py_DECREF(name);
    PyObject *cap = PyObject_GetAttrString(f, "captured");
    for (uint64_t i = 1; cap && i < n; i++) {
      PyObject *x = dec_child(d);
      if (!x || PyList_Append(cap, x) < 0) {
        Py_XDECREF(x);
        Py_CLEAR(cap);
        break;
      }
      Py_DECREF(x);
    }
    if (!cap) {
      Py_DECREF(f);
      return NULL;
    }
    Py_DECREF(cap);
    return f;
  }
  /* a Python function (or a pickled object) */
  if (!(d->flags & SP_DEC_TRUSTED)) return refuse_untrusted(d, it);
  Py_ssize_t slot = -1;
  if (d->r.shared) {
    if (remember(d, Py_None) < 0) return NULL;
    slot = PyList_GET_SIZE(d->refs) - 1;
  }
  wire_item c;
  if (dec_next(d, &c) < 0) return NULL;
  PyObject *res = NULL;
  if (key == 0) {
    if (c.tag != WIRE_STR) return PyErr_SetString(PyExc_ValueError, "cannot decode value: a named function without a name"), NULL;
    if (c.n == 6 && memcmp(c.data, "tuple:", 6) == 0) { /* a tuple: its items in a list */
      wire_item b;
      if (dec_next(d, &b) < 0) return NULL;
      if (b.tag != WIRE_LIST || n != 2)
        return PyErr_SetString(PyExc_ValueError, "cannot decode value: a tuple without its items"), NULL;
      PyObject *l = dec_value(d, &b);
      res = l ? PyList_AsTuple(l) : NULL;
      Py_XDECREF(l);
      if (!res) return NULL;
      n = 0;
    } else if (c.n == 7 && memcmp(c.data, "scalar:", 7) == 0) { /* a numpy scalar */
      if (!(res = dec_scalar(d, it))) return NULL;
      n = 0;
    } else if (c.n > 7 && memcmp(c.data, "pickle:", 7) == 0) {
      wire_item b;
      if (dec_next(d, &b) < 0) return NULL;
      if (!sp_class_keys_installed) { /* the pickle may name a class by key (_values._main_class) */
        PyObject *m = sp_values_module();
        if (!m) return NULL;
        Py_DECREF(m);
      }
      if (b.tag != WIRE_BYTES || n < 2)
        return PyErr_SetString(PyExc_ValueError, "cannot decode value: a pickled object without its bytes"), NULL;
      PyObject *bytes = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.n);
      PyObject *bufs = bytes && n > 2 ? PyList_New(0) : NULL;
      for (uint64_t i = 2; bufs && i < n; i++) { /* its out-of-band buffers (protocol 5) */
        PyObject *x = dec_child(d);
        if (!x || PyList_Append(bufs, x) < 0) Py_CLEAR(bufs);
        Py_XDECREF(x);
      }
      if (bytes && n > 2 && !bufs) {
        Py_DECREF(bytes);
        return NULL;
      }
      if (bufs) {
        PyObject *args = PyTuple_Pack(1, bytes), *kw = args ? Py_BuildValue("{s:O}", "buffers", bufs) : NULL;
        res = kw ? PyObject_Call(SP.pickle_loads, args, kw) : NULL;
        Py_XDECREF(args);
        Py_XDECREF(kw);
        Py_DECREF(bufs);
      } else {
        res = bytes ? PyObject_CallOneArg(SP.pickle_loads, bytes) : NULL;
      }
      Py_XDECREF(bytes);
      if (!res) return NULL;
      n = 0;
    } else {
      res = sp_resolve_name(c.data, (size_t)c.n);
    }
  } else {
    if (c.tag != WIRE_NIL) {
      PyObject *x = dec_value(d, &c);
      Py_XDECREF(x);
      if (!x) return NULL;
    }
    res = sp_function_from_key(key);
  }
  if (!res) return NULL;
  if (n >= 2) { /* bound keyword arguments, then what a function sent by value captured */
    PyObject *kw = dec_child(d), *cap = NULL;
    if (!kw) {
      Py_DECREF(res);
      return NULL;
    }
    for (uint64_t i = 2; i < n; i++) { /* nothing else is defined: skip */
      PyObject *x = dec_child(d);
      if (!x) {
        Py_XDECREF(cap);
        Py_DECREF(kw);
        Py_DECREF(res);
        return NULL;
      }
      if (i == 2) cap = x;
      else Py_DECREF(x);
    }
    if (sp_is_template(res)) {
      PyObject *f = sp_build_function(res, cap);
      Py_DECREF(res);
      res = f;
    }
    Py_XDECREF(cap);
    if (!res) {
      Py_DECREF(kw);
      return NULL;
    }
    if (PyDict_Check(kw) && PyDict_GET_SIZE(kw)) {
      PyObject *ft = PyImport_ImportModule("functools");
      PyObject *partial = ft ? PyObject_GetAttrString(ft, "partial") : NULL;
      Py_XDECREF(ft);
      PyObject *args = partial ? PyTuple_Pack(1, res) : NULL;
      PyObject *p = args ? PyObject_Call(partial, args, kw) : NULL;
      Py_XDECREF(args);
      Py_XDECREF(partial);
      Py_DECREF(res);
      res = p;
    }
    Py_DECREF(kw);
    if (!res) return NULL;
  }
  if (sp_is_template(res)) /* it captured nothing */
    Py_SETREF(res, sp_build_function(res, NULL));
  if (!res) return NULL;
  if (slot >= 0) PyList_SetItem(d->refs, slot, Py_NewRef(res));
  return res;
}

static PyObject *dec_value(dec *d, wire_item *it) {
  switch (it->tag) {
  case WIRE_NIL: return Py_NewRef(Py_None);
  case WIRE_BOOL:
    if (it->flag == WIRE_NA_BOOL) return Py_NewRef(SP.NA);
    return PyBool_FromLong(it->flag);
  case WIRE_I64: return PyLong_FromLongLong(it->i);
  case WIRE_F64: return PyFloat_FromDouble(it->f);
  case WIRE_STR: return str_of(it->data, (size_t)it->n);
  case WIRE_BYTES: return PyBytes_FromStringAndSize(it->data, (Py_ssize_t)it->n);
  case WIRE_ARRAY:
  case WIRE_NDARRAY: return dec_array(d, it);
  case WIRE_STRS: {
    PyObject *l = strs_list(&it->strs);
    if (!l) return NULL;
    PyObject *r = PyObject_CallOneArg(SP.Strings, l);
    Py_DECREF(l);
    return r;
  }
  case WIRE_LIST: {
    uint64_t n = it->n;
    PyObject *l = PyList_New((Py_ssize_t)n);
    if (!l) return NULL;
    for (uint64_t i = 0; i < n; i++) PyList_SET_ITEM(l, (Py_ssize_t)i, Py_NewRef(Py_None));
    if (remember(d, l) < 0) return Py_DECREF(l), NULL;
    for (uint64_t i = 0; i < n; i++) {
      PyObject *x = dec_child(d);
      if (!x) return Py_DECREF(l), NULL;
      PyList_SetItem(l, (Py_ssize_t)i, x);
    }
    return l;
  }
  case WIRE_DICT: {
    PyObject *dct = PyDict_New();
    if (!dct || remember(d, dct) < 0) return Py_XDECREF(dct), NULL;
    for (uint64_t i = 0; i < it->n; i++) {
      PyObject *k = dec_child(d);
      PyObject *v = k ? dec_child(d) : NULL;
      if (!v || PyDict_SetItem(dct, k, v) < 0) {
        Py_XDECREF(k);
        Py_XDECREF(v);
        Py_DECREF(dct);
        return NULL;
      }
      Py_DECREF(k);
      Py_DECREF(v);
    }
    return dct;
  }
  case WIRE_FRAME: {
    PyObject *names = PyList_New(0), *cols = PyList_New(0);
    for (uint64_t i = 0; names && cols && i < it->n; i++) {
      PyObject *k = dec_child(d);
      PyObject *v = k ? dec_child(d) : NULL;
      if (!v || PyList_Append(names, k) < 0 || PyList_Append(cols, v) < 0) {
        Py_XDECREF(k);
        Py_XDECREF(v);
        Py_CLEAR(names);
        break;
      }
      Py_DECREF(k);
      Py_DECREF(v);
    }
    PyObject *r = names && cols ? PyObject_CallFunction(SP.make_frame, "OOK", names, cols, (unsigned long long)it->nrow) : NULL;
    Py_XDECREF(names);
    Py_XDECREF(cols);
    return r;
  }
  case WIRE_FACTOR: {
    PyObject *codes = array_copy(WIRE_T_I32, it->data, it->n, 0, 1, NULL);
    PyObject *levels = codes ? strs_list(&it->strs) : NULL;
    PyObject *r = levels ? PyObject_CallFunction(SP.make_factor, "OOi", codes, levels, it->flag) : NULL;
    Py_XDECREF(codes);
    Py_XDECREF(levels);
    return r;
  }
  case WIRE_DATE:
  case WIRE_TIMESTAMP: {
    PyObject *vals = array_copy(it->type, it->data, it->n, 0, 1, NULL);
    if (!vals) return NULL;
    PyObject *r;
    if (it->tag == WIRE_DATE) {
      r = PyObject_CallFunction(SP.make_dates, "Oi", vals, it->type);
    } else {
      PyObject *tz = str_of(it->text[0].ptr, it->text[0].len);
      r = tz ? PyObject_CallFunction(SP.make_timestamps, "OiO", vals, it->flag, tz) : NULL;
      Py_XDECREF(tz);
    }
    Py_DECREF(vals);
    return r;
  }
  case WIRE_ERROR: {
    PyObject *c = str_of(it->text[0].ptr, it->text[0].len), *m = c ? str_of(it->text[1].ptr, it->text[1].len) : NULL;
    PyObject *t = m ? str_of(it->text[2].ptr, it->text[2].len) : NULL;
    PyObject *r = t ? PyObject_CallFunction(SP.make_remote_error, "OOOL", c, m, t, (long long)it->i) : NULL;
    Py_XDECREF(c);
    Py_XDECREF(m);
    Py_XDECREF(t);
    return r;
  }
  case WIRE_CALL: {
    PyObject *text = str_of(it->text[0].ptr, it->text[0].len);
    PyObject *args = text ? dec_child(d) : NULL;
    PyObject *kwargs = args ? dec_child(d) : NULL;
    PyObject *r = kwargs ? PyObject_CallFunction(SP.make_call, "iOOO", it->flag, text, args, kwargs) : NULL;
    Py_XDECREF(text);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return r;
  }
  case WIRE_REF: return dec_ref(d, it);
  case WIRE_FUNC: return dec_func(d, it);
  case WIRE_RANGE: {
    PyObject *start = PyLong_FromLongLong(it->i), *step = PyLong_FromLongLong(it->step);
    PyObject *n = PyLong_FromUnsignedLongLong(it->n);
    PyObject *span = n && step ? PyNumber_Multiply(n, step) : NULL;
    PyObject *stop = span && start ? PyNumber_Add(start, span) : NULL;
    PyObject *r = stop ? PyObject_CallFunctionObjArgs((PyObject *)&PyRange_Type, start, stop, step, NULL) : NULL;
    Py_XDECREF(start);
    Py_XDECREF(step);
    Py_XDECREF(n);
    Py_XDECREF(span);
    Py_XDECREF(stop);
    return r;
  }
  case WIRE_BACKREF:
    if (!d->refs || it->i < 0 || it->i >= PyList_GET_SIZE(d->refs)) {
      PyErr_Format(PyExc_ValueError, "cannot decode value: unexpected back-reference at byte %zu", it->pos);
      return NULL;
    }
    return Py_NewRef(PyList_GET_ITEM(d->refs, it->i));
  }
  PyErr_Format(PyExc_ValueError, "cannot decode value: unexpected %s at byte %zu", wire_tag_name(it->tag), it->pos);
  return NULL;
}

static int dec_init(dec *d, const void *buf, size_t len, int flags, suiro_buf *region) {
  d->flags = flags;
  d->region = region;
  d->refs = NULL;
  if (wire_reader_init(&d->r, buf, len) != WIRE_OK) return dec_fail(d);
  return 0;
}

static int dec_finish(dec *d) {
  wire_item it;
  int st = wire_next(&d->r, &it);
  Py_CLEAR(d->refs);
  if (st == WIRE_END) return 0;
  if (st == WIRE_ERR) return dec_fail(d);
  PyErr_SetString(PyExc_ValueError, "cannot decode value: bytes after the value");
  return -1;
}

PyObject *sp_decode(const void *buf, size_t len, int flags, suiro_buf *region) {
  dec d;
  if (dec_init(&d, buf, len, flags, region) < 0) return NULL;
  PyObject *v = dec_child(&d);
  if (!v || dec_finish(&d) < 0) {
    Py_CLEAR(d.refs);
    Py_XDECREF(v);
    return NULL;
  }
  return v;
}

PyObject *sp_decode_list(const void *buf, size_t len, int flags, suiro_buf *region) {
  PyObject *v = sp_decode(buf, len, flags, region);
  if (v && !PyList_CheckExact(v)) {
    Py_DECREF(v);
    PyErr_SetString(PyExc_ValueError, "cannot decode result: expected a list of values");
    return NULL;
  }
  return v;
}
/* ---- tasks in workers ---------------------------------------------------------------------------- */

static char memo_name[256];
static size_t memo_len;
static PyObject *memo_fn;

/* A task's arguments after its function *fn (NULL: that failed, with the error set): *args a
 * tuple of nargs values and the buffer's end checked; 0, or -1 with *fn, *args and the decoder's
 * references released. */
static int task_args(dec *d, uint64_t nargs, PyObject **fn, PyObject **args) {
  if (*fn && (*args = PyTuple_New((Py_ssize_t)nargs))) {
    uint64_t i = 0;
    for (PyObject *x; i < nargs && (x = dec_child(d)); i++) PyTuple_SET_ITEM(*args, (Py_ssize_t)i, x);
    if (i == nargs && dec_finish(d) == 0) return 0;
  }
  Py_CLEAR(d->refs);
  Py_CLEAR(*fn);
  Py_CLEAR(*args);
  return -1;
}

/* The rest of a task after suiro_exec read its list and function item f (fn: what the engine's
 * cache gave for a STR; FUNC items are decoded here, their code from the same cache): *fn the
 * callable (or a suiro.Call for a call spec), *args a tuple of the nargs arguments. */
int sp_decode_task_at(const wire_reader *r, const wire_item *fi, PyObject *fn_in, uint64_t nargs, PyObject **fn,
                      PyObject **args) {
  *fn = *args = NULL;
  dec d;
  suiro_wire_reader_copy(&d.r, r);
  d.flags = SP_DEC_TRUSTED; /* from this worker's host */
  d.region = NULL;
  d.refs = NULL;
  if (remember(&d, Py_None) < 0) return -1; /* the task list: container 0 */
  wire_item f = *fi;
  if (f.tag == WIRE_STR) *fn = Py_NewRef(fn_in);
  else if (f.tag == WIRE_FUNC) *fn = dec_func(&d, &f);
  else *fn = dec_value(&d, &f); /* CALL */
  return task_args(&d, nargs, fn, args);
}

/* Decodes a task list: *fn the callable (or a suiro.Call for call specs), *args a tuple. The map
 * runner's function (map.c); workers' tasks go through suiro_exec. */
int sp_decode_task(const void *buf, size_t len, PyObject **fn, PyObject **args, PyObject **kwargs) {
  *fn = *args = *kwargs = NULL;
  dec d;
  if (dec_init(&d, buf, len, SP_DEC_TRUSTED, NULL) < 0) return -1; /* from this worker's host */
  wire_item it, f;
  if (dec_next(&d, &it) < 0) return -1;
  if (it.tag != WIRE_LIST || it.n < 1) {
    PyErr_SetString(PyExc_ValueError, "malformed task: expected a list [function, arguments...]");
    return -1;
  }
  uint64_t nargs = it.n - 1;
  if (remember(&d, Py_None) < 0 || dec_next(&d, &f) < 0) return task_args(&d, nargs, fn, args);
  if (f.tag == WIRE_STR) {
    if (memo_fn && f.n == memo_len && memcmp(f.data, memo_name, memo_len) == 0) {
      *fn = Py_NewRef(memo_fn);
    } else {
      *fn = sp_resolve_name(f.data, (size_t)f.n);
      if (*fn && f.n < sizeof memo_name) {
        memcpy(memo_name, f.data, (size_t)f.n);
        memo_len = (size_t)f.n;
        Py_XSETREF(memo_fn, Py_NewRef(*fn));
      }
    }
  } else if (f.tag == WIRE_FUNC && f.flag == WIRE_LANG_PYTHON) {
    *fn = dec_func(&d, &f);
  } else if (f.tag == WIRE_FUNC) {
    PyErr_Format(PyExc_TypeError, "this is a python worker: it cannot run a %s function",
                 f.flag == WIRE_LANG_LUA ? "lua" : f.flag == WIRE_LANG_R ? "r" : "foreign");
  } else if (f.tag == WIRE_CALL) {
    if (nargs) {
      PyErr_SetString(PyExc_ValueError, "malformed task: a call spec takes no further arguments");
      return task_args(&d, nargs, fn, args);
    }
    *fn = dec_value(&d, &f);
  } else {
    PyErr_Format(PyExc_ValueError, "malformed task: expected a function, got %s", wire_tag_name(f.tag));
  }
  return task_args(&d, nargs, fn, args);
}

/* A private numpy array holding a copy of n elements (bool with NA: a masked array). */
PyObject *sp_array_from(int type, const void *data, uint64_t count, int ndim, const uint64_t *dims) {
  if (type == WIRE_T_BOOL && has_na_bool(data, count)) {
    PyObject *raw = array_copy(WIRE_T_U8, data, count, 0, ndim, dims);
    if (!raw) return NULL;
    PyObject *r = PyObject_CallOneArg(SP.make_bool_na, raw);
    Py_DECREF(raw);
    return r;
  }
  return array_copy(type, data, count, 0, ndim, dims);
}
