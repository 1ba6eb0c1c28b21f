/*
 * pyprobe.c — suiro_probe: measurements for the Python benchmarks, a test build only
 * (build/tests/python/suiro_probe.so; bench/bench_python.py puts that directory on sys.path).
 * The suiro package and its extension carry no such hook.
 *
 *   suiro_probe.memcpy_ms(bytes [, rounds])   median ms of one memcpy between warm buffers
 *                                             (the floor of floor.h, as Lua's probe.memcpy_ms)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "floor.h"

static PyObject *p_memcpy_ms(PyObject *self, PyObject *args) {
  Py_ssize_t bytes;
  int rounds = 7;
  if (!PyArg_ParseTuple(args, "n|i", &bytes, &rounds)) return NULL;
  if (bytes < 1) return PyErr_Format(PyExc_ValueError, "memcpy_ms: bytes must be positive, got %zd", bytes);
  if (rounds < 1 || rounds > 1000) return PyErr_Format(PyExc_ValueError, "memcpy_ms: rounds must be in 1..1000, got %d", rounds);
  double ms;
  Py_BEGIN_ALLOW_THREADS
  ms = probe_memcpy_ms((size_t)bytes, rounds);
  Py_END_ALLOW_THREADS
  if (ms < 0) return PyErr_NoMemory();
  return PyFloat_FromDouble(ms);
}

static PyMethodDef probe_methods[] = {
  { "memcpy_ms", p_memcpy_ms, METH_VARARGS, "median ms of one memcpy of bytes between warm buffers" },
  { NULL, NULL, 0, NULL },
};

static struct PyModuleDef probe_module = { PyModuleDef_HEAD_INIT, "suiro_probe", NULL, -1, probe_methods,
                                           NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit_suiro_probe(void) { return PyModule_Create(&probe_module); }
