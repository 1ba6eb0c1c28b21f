/*
 * sp.c — the face's shared state, used by every other file: the package's Python helpers
 * (registered by suiro/_values.py through _setup into SP), numpy and pandas imported on first need
 * (sp_numpy, sp_pandas_seen), whether this process is a worker (and for which host), and the
 * pending exception taken as the wire's (class, message, traceback) (sp_take_exception: worker
 * results and map runners).
 *
 * Ownership and the GIL: everything here is called with the GIL held. SP holds strong references,
 * set by _setup (a second _setup replaces them) or on first need, and kept for the process's life.
 * Nothing here calls another file of the face: it is the bottom of the face's call graph.
 */
#include "suiro_py.h"

sp_state SP;
int sp_in_worker; /* this process is a worker (worker.c sets it once, before the first task) */
/* a worker's host (worker.c sets them from SUIRO_HOST_LANG): not Python, so results take the
 * documented mapping; its language, and how messages name it */
int sp_host_foreign;
const char *sp_host_lang = "python", *sp_host_dest = "a python host";

/* ---- helpers registered by the package ------------------------------------------------------ */

static int take(PyObject *d, const char *k, PyObject **slot) {
  PyObject *v = PyDict_GetItemString(d, k);
  if (!v) {
    PyErr_Format(PyExc_KeyError, "_setup: missing %s", k);
    return -1;
  }
  Py_XSETREF(*slot, Py_NewRef(v));
  return 0;
}

/* _setup(dict): suiro/_values.py hands over its helpers (module.c registers this as _setup). */
PyObject *sp_setup(PyObject *self, PyObject *d) {
  if (!PyDict_Check(d)) return PyErr_Format(PyExc_TypeError, "_setup: a dict");
  if (take(d, "NA", &SP.NA) || take(d, "Strings", &SP.Strings) || take(d, "Frame", &SP.Frame) ||
      take(d, "Dates", &SP.Dates) || take(d, "Timestamps", &SP.Timestamps) || take(d, "Call", &SP.Call) ||
      take(d, "Ref", &SP.Ref) || take(d, "Func", &SP.Func) || take(d, "RemoteError", &SP.RemoteError) ||
      take(d, "to_wire", &SP.to_wire) || take(d, "make_factor", &SP.make_factor) ||
      take(d, "make_dates", &SP.make_dates) || take(d, "make_timestamps", &SP.make_timestamps) ||
      take(d, "make_bool_na", &SP.make_bool_na) || take(d, "make_frame", &SP.make_frame) ||
      take(d, "make_call", &SP.make_call) || take(d, "make_ref", &SP.make_ref) || take(d, "make_func", &SP.make_func) ||
      take(d, "make_remote_error", &SP.make_remote_error) || take(d, "make_failure", &SP.make_failure) ||
      take(d, "describe_exception", &SP.format_exc) || take(d, "dumps", &SP.pickle_dumps) ||
      take(d, "loads", &SP.pickle_loads))
    return NULL;
  Py_RETURN_NONE;
}

/* ---- numpy and pandas, imported on first need ------------------------------------------------ */

int sp_numpy(void) {
  if (SP.ndarray) return 0;
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np) return -1;
  static const char *const names[] = { NULL, "float64", "float32", "int64", "int32", "uint8", "bool", "complex128" };
  PyObject *dtype = PyObject_GetAttrString(np, "dtype");
  if (!dtype) return Py_DECREF(np), -1;
  for (int k = 1; k <= 7; k++) {
    Py_XSETREF(SP.np_dtypes[k], PyObject_CallFunction(dtype, "s", names[k]));
    if (!SP.np_dtypes[k]) return Py_DECREF(dtype), Py_DECREF(np), -1;
  }
  Py_DECREF(dtype);
  SP.np_generic = PyObject_GetAttrString(np, "generic");
  SP.np_bool = PyObject_GetAttrString(np, "bool_");
  SP.np_frombuffer = PyObject_GetAttrString(np, "frombuffer");
  PyObject *nd = PyObject_GetAttrString(np, "ndarray");
  SP.numpy = np;
  if (!SP.np_generic || !SP.np_bool || !SP.np_frombuffer || !nd) return Py_XDECREF(nd), -1;
  SP.ndarray = nd; /* last: its presence means numpy is ready */
  return 0;
}

void sp_pandas_seen(void) {
  if (SP.pd_categorical) return;
  PyObject *mods = PyImport_GetModuleDict();
  PyObject *pd = PyDict_GetItemString(mods, "pandas");
  if (!pd) return;
  PyObject *c = PyObject_GetAttrString(pd, "Categorical");
  if (!c) {
    PyErr_Clear(); /* pandas is still importing */
    return;
  }
  SP.pd_categorical = c;
}

/* ---- the pending exception as wire strings --------------------------------------------------- */

/* The pending exception's class, message and traceback (as _errors.format_exc gives them),
 * taken and cleared; *hold keeps the strings alive until the caller drops it (Py_XDECREF). */
void sp_take_exception(wire_str *cls, wire_str *msg, wire_str *trace, PyObject **hold) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (tb && v) PyException_SetTraceback(v, tb);
  PyObject *d = v ? PyObject_CallOneArg(SP.format_exc, v) : NULL;
  *cls = (wire_str){ "remote", 6 };
  *msg = (wire_str){ "unknown error", 13 };
  *trace = (wire_str){ "", 0 };
  if (d && PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 3) {
    Py_ssize_t cl, ml, tl;
    const char *c = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(d, 0), &cl);
    const char *m = c ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(d, 1), &ml) : NULL;
    const char *r = m ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(d, 2), &tl) : NULL;
    if (r) {
      *cls = (wire_str){ c, (size_t)cl };
      *msg = (wire_str){ m, (size_t)ml };
      *trace = (wire_str){ r, (size_t)tl };
    }
  }
  PyErr_Clear();
  Py_XDECREF(t);
  Py_XDECREF(v);
  Py_XDECREF(tb);
  *hold = d;
}
