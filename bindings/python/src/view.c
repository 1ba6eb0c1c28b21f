/*
 * view.c — suiro._core.View: a private copy of bytes in a shared region, exported through the
 * buffer protocol so numpy.frombuffer makes arrays over it (no numpy C API).
 *
 * A received array behaves as a private copy at every size (docs/zero-copy.md): writable, and no
 * write reaches another process. The copy is a copy-on-write mapping of the region's pages
 * (suiro_zc_private): nothing is copied until a page is written, and then that page only, whoever
 * writes (numpy, ctypes, C code through the array's address). Sent on unwritten, it goes by
 * reference (suiro_zc_put knows the copy); once written, by value.
 *
 * Ownership: a View owns one reference of its region (suiro_buf) and its private copy, given back
 * (suiro_zc_unprivate, then suiro_buf_unref) when it is deallocated; numpy arrays made from it keep
 * it alive through their `base`.
 */
#include "suiro_py.h"

typedef struct ViewObject {
  PyObject_HEAD
  suiro_buf *b;
  void *data;     /* the private copy (suiro_zc_private) */
  Py_ssize_t len;
} ViewObject;

static void view_dealloc(ViewObject *v) {
  if (v->b && v->data) suiro_zc_unprivate(v->b, v->data);
  if (v->b) suiro_buf_unref(v->b);
  v->b = NULL;
  Py_TYPE(v)->tp_free((PyObject *)v);
}

static int view_getbuffer(ViewObject *v, Py_buffer *view, int flags) {
  return PyBuffer_FillInfo(view, (PyObject *)v, v->data, v->len, 0, flags);
}

static PyBufferProcs view_as_buffer = { (getbufferproc)view_getbuffer, NULL };

static PyObject *view_region(ViewObject *v, PyObject *unused) {
  const char *n = v->b ? suiro_buf_name(v->b) : NULL;
  if (!n) Py_RETURN_NONE;
  return PyUnicode_FromString(n);
}

static PyObject *view_nbytes(ViewObject *v, void *unused) { return PyLong_FromSsize_t(v->len); }

static PyObject *view_holders(ViewObject *v, PyObject *unused) {
  return PyLong_FromLong(v->b ? suiro_buf_holders(v->b) : 0);
}

static PyObject *view_written(ViewObject *v, PyObject *unused) {
  return PyBool_FromLong(v->b && v->data ? suiro_zc_written(v->b, v->data, (size_t)v->len) : 1);
}

static PyMethodDef view_methods[] = {
  { "region", (PyCFunction)view_region, METH_NOARGS, "The name of the shared region (None once it is gone)." },
  { "holders", (PyCFunction)view_holders, METH_NOARGS, "Holders of the region in this process (views, messages)." },
  { "written", (PyCFunction)view_written, METH_NOARGS, "Whether a page of this private copy was written here." },
  { NULL, NULL, 0, NULL },
};

static PyGetSetDef view_getset[] = {
  { "nbytes", (getter)view_nbytes, NULL, "bytes viewed", NULL },
  { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject SpView_Type = {
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "suiro._core.View",
  .tp_basicsize = sizeof(ViewObject),
  .tp_dealloc = (destructor)view_dealloc,
  .tp_as_buffer = &view_as_buffer,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "A private copy-on-write copy of bytes in a shared region (the base of suiro's zero-copy numpy arrays).",
  .tp_methods = view_methods,
  .tp_getset = view_getset,
};

PyObject *sp_view_array(suiro_buf *b, const void *data, uint64_t bytes, int type, int order, int ndim,
                        const uint64_t *dims) {
  void *copy = suiro_zc_private(b, data, (size_t)bytes);
  if (!copy) {
    PyErr_Format(PyExc_OSError, "cannot map a received array: %s", suiro_last_error());
    suiro_buf_unref(b);
    return NULL;
  }
  ViewObject *v = PyObject_New(ViewObject, &SpView_Type);
  if (!v) {
    suiro_zc_unprivate(b, copy);
    suiro_buf_unref(b);
    return NULL;
  }
  v->b = b;
  v->data = copy;
  v->len = (Py_ssize_t)bytes;
  PyObject *a = PyObject_CallFunctionObjArgs(SP.np_frombuffer, (PyObject *)v, SP.np_dtypes[type], NULL);
  Py_DECREF(v);
  if (!a || ndim == 0) return a;
  PyObject *r = sp_reshape(a, ndim, dims, order);
  Py_DECREF(a);
  return r;
}

suiro_buf *sp_view_region_of(PyObject *arr) {
  PyObject *base = arr;
  for (int guard = 0; guard < 64 && base; guard++) {
    if (Py_TYPE(base) == &SpView_Type) return ((ViewObject *)base)->b;
    if (!SP.ndarray || !PyObject_TypeCheck(base, (PyTypeObject *)SP.ndarray)) return NULL;
    PyObject *next = PyObject_GetAttr(base, SP.s_base);
    if (!next) {
      PyErr_Clear();
      return NULL;
    }
    Py_DECREF(next); /* kept alive by the array that holds it */
    if (next == Py_None) return NULL;
    base = next;
  }
  return NULL;
}

PyObject *sp_reshape(PyObject *a, int ndim, const uint64_t *dims, int order) {
  PyObject *shape = PyTuple_New(ndim);
  if (!shape) return NULL;
  for (int k = 0; k < ndim; k++) {
    PyObject *d = PyLong_FromUnsignedLongLong(dims[k]);
    if (!d) return Py_DECREF(shape), NULL;
    PyTuple_SET_ITEM(shape, k, d);
  }
  PyObject *meth = PyObject_GetAttrString(a, "reshape");
  if (!meth) return Py_DECREF(shape), NULL;
  PyObject *args = PyTuple_Pack(1, shape);
  Py_DECREF(shape);
  PyObject *kw = args ? Py_BuildValue("{s:s}", "order", order == WIRE_ORDER_F ? "F" : "C") : NULL;
  PyObject *r = kw ? PyObject_Call(meth, args, kw) : NULL;
  Py_XDECREF(kw);
  Py_XDECREF(args);
  Py_DECREF(meth);
  return r;
}
