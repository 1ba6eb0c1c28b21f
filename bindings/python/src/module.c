/*
 * module.c — suiro._core: module init and its method table, the embedded Lua readers (templates,
 * config scripts), per-element random numbers and suiro.wire's encode/decode (over enc.c, dec.c).
 * The package's Python helpers (_setup) and lazy numpy/pandas live in sp.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suiro_embed.h"
#include "suiro_py.h"

/* ---- embedded Lua readers ----------------------------------------------------------------- */

static suiro_embed *embed;

static int embed_ready(void) {
  if (embed) return 0;
  PyObject *m = PyImport_ImportModule("suiro");
  PyObject *dir = m ? PyObject_CallMethod(m, "_lua_dir", NULL) : NULL;
  Py_XDECREF(m);
  if (!dir) return -1;
  const char *d = PyUnicode_AsUTF8(dir);
  if (!d) return Py_DECREF(dir), -1;
  char err[512];
  embed = suiro_embed_open(d, err, sizeof err);
  Py_DECREF(dir);
  if (!embed) {
    PyErr_Format(PyExc_RuntimeError, "cannot start the embedded Lua readers: %s", err);
    return -1;
  }
  return 0;
}

int sp_template(PyObject *spec, suiro_template *t) {
  const char *s = PyUnicode_Check(spec) ? PyUnicode_AsUTF8(spec) : NULL;
  if (!s) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "template must be a str such as \"f64\", got %s", Py_TYPE(spec)->tp_name);
    return -1;
  }
  if (embed_ready() < 0) return -1;
  char err[512];
  if (suiro_embed_template(embed, s, t, err, sizeof err) != 0) {
    PyErr_SetString(PyExc_ValueError, err);
    return -1;
  }
  return 0;
}

static PyObject *m_template(PyObject *self, PyObject *spec) {
  suiro_template t;
  if (sp_template(spec, &t) < 0) return NULL;
  static const char *const kinds[] = { "values", "scalar", "array", "record" };
  if (t.kind == SUIRO_OUT_RECORD) {
    PyObject *fields = PyList_New(t.nfields);
    if (!fields) return NULL;
    for (int k = 0; k < t.nfields; k++)
      PyList_SET_ITEM(fields, k, Py_BuildValue("(ss)", t.fields[k].name, wire_type_name(t.fields[k].type)));
    return Py_BuildValue("{s:s,s:N}", "kind", kinds[t.kind], "fields", fields);
  }
  PyObject *shape = PyTuple_New(t.kind == SUIRO_OUT_ARRAY ? t.ndim : 0);
  if (!shape) return NULL;
  for (int k = 0; t.kind == SUIRO_OUT_ARRAY && k < t.ndim; k++)
    PyTuple_SET_ITEM(shape, k, PyLong_FromUnsignedLongLong(t.shape[k]));
  return Py_BuildValue("{s:s,s:s,s:N}", "kind", kinds[t.kind], "type", wire_type_name(t.type), "shape", shape);
}

static PyObject *buf_result(int rc, void *buf, size_t len, const char *err, PyObject *exc) {
  if (rc != 0) {
    PyErr_SetString(exc, err);
    return NULL;
  }
  PyObject *v = sp_decode(buf, len, 0, NULL);
  free(buf);
  return v;
}

static PyObject *m_embed_config(PyObject *self, PyObject *path) {
  PyObject *b = NULL;
  if (!PyUnicode_FSConverter(path, &b)) return NULL;
  if (embed_ready() < 0) return Py_DECREF(b), NULL;
  void *buf = NULL;
  size_t len = 0;
  char err[1024];
  int rc = suiro_embed_config(embed, PyBytes_AS_STRING(b), &buf, &len, err, sizeof err);
  Py_DECREF(b);
  return buf_result(rc, buf, len, err, PyExc_ValueError);
}

static PyObject *m_embed_pool_options(PyObject *self, PyObject *args) {
  PyObject *opts;
  const char *where;
  if (!PyArg_ParseTuple(args, "Os", &opts, &where)) return NULL;
  if (embed_ready() < 0) return NULL;
  _Alignas(8) unsigned char stack[1024];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  sp_enc_opts o = { "suiro.pool", 1, "lua", "the config reader", 0, NULL, NULL };
  if (sp_encode_value(&o, opts, &w) < 0) return wire_writer_free(&w), NULL;
  const void *ob;
  size_t ol;
  wire_writer_finish(&w, &ob, &ol);
  void *buf = NULL;
  size_t len = 0;
  char err[1024];
  int rc = suiro_embed_pool_options(embed, ob, ol, where, &buf, &len, err, sizeof err);
  wire_writer_free(&w);
  return buf_result(rc, buf, len, err, PyExc_ValueError);
}

/* The environment every face gives workers of a launcher kind by default (suiro.config). */
static PyObject *m_embed_worker_env(PyObject *self, PyObject *kind) {
  const char *k = PyUnicode_AsUTF8(kind);
  if (!k || embed_ready() < 0) return NULL;
  void *buf = NULL;
  size_t len = 0;
  char err[512];
  int rc = suiro_conf_worker_env(embed, k, &buf, &len, err, sizeof err);
  return buf_result(rc, buf, len, err, PyExc_ValueError);
}

/* The command and environment of a launcher's workers (suiro.config.launch): kind, the
 * launcher's options and what this host knows of itself (dicts) -> {exe, argv, env}. */
static PyObject *m_embed_launch(PyObject *self, PyObject *args) {
  const char *kind;
  PyObject *opts, *host;
  if (!PyArg_ParseTuple(args, "sOO", &kind, &opts, &host)) return NULL;
  if (embed_ready() < 0) return NULL;
  wire_writer w[2];
  const void *b[2];
  size_t n[2];
  sp_enc_opts o = { "suiro.pool", 1, "lua", "the launcher", 0, NULL, NULL };
  PyObject *in[2] = { opts, host };
  for (int i = 0; i < 2; i++) {
    wire_writer_init(&w[i], NULL, 0);
    if (sp_encode_value(&o, in[i], &w[i]) < 0 || wire_writer_finish(&w[i], &b[i], &n[i]) != WIRE_OK) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, wire_writer_error(&w[i]));
      for (int k = 0; k <= i; k++) wire_writer_free(&w[k]);
      return NULL;
    }
  }
  void *buf = NULL;
  size_t len = 0;
  char err[1024];
  int rc = suiro_conf_launch(embed, kind, b[0], n[0], b[1], n[1], &buf, &len, err, sizeof err);
  wire_writer_free(&w[0]);
  wire_writer_free(&w[1]);
  return buf_result(rc, buf, len, err, PyExc_RuntimeError);
}

int sp_duration(const char *s, double *sec) {
  if (embed_ready() < 0) return -1;
  char err[512];
  if (suiro_embed_duration(embed, s, sec, err, sizeof err) != 0) return PyErr_SetString(PyExc_ValueError, err), -1;
  return 0;
}

static PyObject *m_embed_duration(PyObject *self, PyObject *s) {
  const char *str = PyUnicode_AsUTF8(s);
  if (!str || embed_ready() < 0) return NULL;
  double v;
  char err[512];
  if (suiro_embed_duration(embed, str, &v, err, sizeof err) != 0) return PyErr_SetString(PyExc_ValueError, err), NULL;
  return PyFloat_FromDouble(v);
}

/* The function reference grammar of every face (the embedded Lua reader): 0 when s is well
 * formed, -1 with why in err, -2 with a Python error set. Called with the GIL held. */
int sp_fnref_check(PyObject *s, char *err, size_t cap) {
  const char *str = PyUnicode_AsUTF8(s);
  if (!str || embed_ready() < 0) return -2;
  return suiro_embed_fnref(embed, str, err, cap) != 0 ? -1 : 0;
}

static PyObject *m_embed_fnref(PyObject *self, PyObject *s) {
  const char *str = PyUnicode_AsUTF8(s);
  if (!str || embed_ready() < 0) return NULL;
  char err[512];
  if (suiro_embed_fnref(embed, str, err, sizeof err) != 0) return PyErr_SetString(PyExc_ValueError, err), NULL;
  Py_RETURN_NONE;
}

/* ---- random numbers ------------------------------------------------------------------------ */

static PyObject *py_random_fallback(PyObject *const *args, Py_ssize_t n) {
  PyObject *rnd = PyImport_ImportModule("random");
  if (!rnd) return NULL;
  PyObject *r;
  if (n == 0) r = PyObject_CallMethod(rnd, "random", NULL);
  else if (n == 1) r = PyObject_CallMethod(rnd, "randint", "iO", 1, args[0]);
  else r = PyObject_CallMethod(rnd, "randint", "OO", args[0], args[1]);
  Py_DECREF(rnd);
  return r;
}

/* suiro.random([m [, n]]): Lua's math.random contract, drawn from the element's own stream inside
 * a seeded map (the same numbers as Lua's suiro.random), from Python's random module elsewhere. */
static PyObject *m_random(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n > 2) return PyErr_Format(PyExc_TypeError, "suiro.random takes at most 2 arguments (%zd given)", n);
  suiro_rng *r = suiro_rng_current();
  if (!r) return py_random_fallback(args, n);
  if (n == 0) return PyFloat_FromDouble(suiro_rng_unit(r));
  long long lo = 1, hi;
  int of = 0;
  if (n == 1) {
    hi = PyLong_AsLongLongAndOverflow(args[0], &of);
  } else {
    lo = PyLong_AsLongLongAndOverflow(args[0], &of);
    if (!of && !(lo == -1 && PyErr_Occurred())) hi = PyLong_AsLongLongAndOverflow(args[1], &of);
    else hi = 0;
  }
  if (PyErr_Occurred()) return NULL;
  if (of) return PyErr_Format(PyExc_OverflowError, "suiro.random: bounds must fit in 64 bits");
  if (lo > hi) return PyErr_Format(PyExc_ValueError, "suiro.random: interval is empty (%lld > %lld)", lo, hi);
  return PyLong_FromLongLong(suiro_rng_range(r, lo, hi));
}

/* _rng_draws(seed, index, what, count, lo, hi): the first draws of a stream (tests). */
static PyObject *m_rng_draws(PyObject *self, PyObject *args) {
  unsigned long long seed, index;
  const char *what;
  int count;
  long long lo = 0, hi = 0;
  if (!PyArg_ParseTuple(args, "KKsi|LL", &seed, &index, &what, &count, &lo, &hi)) return NULL;
  suiro_rng r;
  suiro_rng_seed(&r, seed, index);
  PyObject *l = PyList_New(count);
  for (int i = 0; l && i < count; i++) {
    PyObject *x;
    if (!strcmp(what, "next")) x = PyLong_FromUnsignedLongLong(suiro_rng_next(&r));
    else if (!strcmp(what, "unit")) x = PyFloat_FromDouble(suiro_rng_unit(&r));
    else x = PyLong_FromLongLong(suiro_rng_range(&r, lo, hi));
    PyList_SET_ITEM(l, i, x);
  }
  return l;
}

/* ---- wire for suiro.wire ----------------------------------------------------------------- */

/* encode(value, portable=False): portable writes what Lua and R receivers get (a DataFrame as
 * a FRAME, no pickles: what has no form there is refused by name). */
static PyObject *m_wire_encode(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "value", "portable", NULL };
  PyObject *v;
  int portable = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwl, &v, &portable)) return NULL;
  _Alignas(8) unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  sp_enc_opts o = { "suiro.wire.encode", portable, portable ? "lua" : NULL,
                    portable ? "other languages (portable=True)" : NULL, 0, NULL, NULL };
  if (sp_encode_value(&o, v, &w) < 0) return wire_writer_free(&w), NULL;
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    PyErr_Format(PyExc_ValueError, "suiro.wire.encode: %s", wire_writer_error(&w));
    wire_writer_free(&w);
    return NULL;
  }
  PyObject *b = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
  wire_writer_free(&w);
  return b;
}

static PyObject *m_wire_decode(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "data", "describe", "trusted", NULL };
  Py_buffer b;
  int describe = 0, trusted = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|pp", kwl, &b, &describe, &trusted)) return NULL;
  /* the reader wants an 8-aligned buffer: copy when it is not */
  void *tmp = NULL;
  const void *p = b.buf;
  if (((uintptr_t)p & 7) != 0) {
    tmp = PyMem_Malloc((size_t)b.len + 8);
    if (!tmp) return PyBuffer_Release(&b), PyErr_NoMemory();
    memcpy(tmp, b.buf, (size_t)b.len);
    p = tmp;
  }
  PyObject *v = sp_decode(p, (size_t)b.len, (describe ? SP_DEC_DESCRIBE : 0) | (trusted ? SP_DEC_TRUSTED : 0), NULL);
  PyMem_Free(tmp);
  PyBuffer_Release(&b);
  return v;
}

/* ---- misc ------------------------------------------------------------------------------- */

static PyObject *m_now(PyObject *self, PyObject *unused) { return PyFloat_FromDouble(suiro_now()); }
static PyObject *m_reap(PyObject *self, PyObject *unused) { return PyLong_FromLong(suiro_reap()); }
static PyObject *m_version(PyObject *self, PyObject *unused) { return PyUnicode_FromString(suiro_version()); }

static PyObject *m_zc_floor(PyObject *self, PyObject *args) {
  Py_ssize_t b = 0;
  if (!PyArg_ParseTuple(args, "|n", &b)) return NULL;
  if (b < 0) return PyErr_Format(PyExc_ValueError, "zc_floor: bytes must be positive");
  if (b > 0) suiro_zc_configure((size_t)b, 0, 0);
  return PyLong_FromSize_t(suiro_zc_floor);
}

static PyObject *m_in_worker(PyObject *self, PyObject *unused) { return PyBool_FromLong(sp_in_worker); }

static PyObject *m_current_pool(PyObject *self, PyObject *unused) { return sp_current_pool(); }

PyObject *sp_worker_run(PyObject *self, PyObject *args); /* worker.c */

static PyMethodDef methods[] = {
  { "_setup", sp_setup, METH_O, NULL },
  { "template", m_template, METH_O, "Parse a result template (\"f64\", \"{a: f64, n: i64}\")." },
  { "embed_config", m_embed_config, METH_O, "Read a config script with the Lua face's reader." },
  { "embed_pool_options", m_embed_pool_options, METH_VARARGS, "Check and normalise pool options." },
  { "embed_worker_env", m_embed_worker_env, METH_O, "Default environment of workers of a launcher kind." },
  { "embed_launch", m_embed_launch, METH_VARARGS, "Command and environment of a launcher's workers." },
  { "duration", m_embed_duration, METH_O, "A duration (\"250ms\") in seconds." },
  { "check_fnref", m_embed_fnref, METH_O, "Check a function reference (\"numpy.mean\")." },
  { "random", (PyCFunction)(void (*)(void))m_random, METH_FASTCALL, "suiro.random([m [, n]])" },
  { "_rng_draws", m_rng_draws, METH_VARARGS, NULL },
  { "wire_encode", (PyCFunction)(void (*)(void))m_wire_encode, METH_VARARGS | METH_KEYWORDS, "One value to wire bytes." },
  { "wire_decode", (PyCFunction)(void (*)(void))m_wire_decode, METH_VARARGS | METH_KEYWORDS, "Wire bytes to a value." },
  { "now", m_now, METH_NOARGS, NULL },
  { "reap", m_reap, METH_NOARGS, NULL },
  { "version", m_version, METH_NOARGS, NULL },
  { "zc_floor", m_zc_floor, METH_VARARGS, NULL },
  { "in_worker", m_in_worker, METH_NOARGS, NULL },
  { "current_pool", m_current_pool, METH_NOARGS, NULL },
  { "worker_run", sp_worker_run, METH_VARARGS, NULL },
  { NULL, NULL, 0, NULL },
};

/* The engine's interrupt check (asked after each sleep of a host wait: a full queue, collects):
 * Python's signal handlers run here, so Ctrl-C ends a wait; the exception stays pending and the
 * call that waited returns it. Waits are made with the GIL released: take it for the check. */
static int interrupt_check(void *ud) {
  PyGILState_STATE g = PyGILState_Ensure();
  int r = PyErr_CheckSignals() < 0;
  PyGILState_Release(g);
  return r;
}

static struct PyModuleDef moddef = { PyModuleDef_HEAD_INIT, "suiro._core", "suiro's engine binding", -1, methods };

#define INTERN(field, s) if (!(SP.field = PyUnicode_InternFromString(s))) return NULL

PyMODINIT_FUNC PyInit__core(void) {
  INTERN(s_dtype, "dtype");
  INTERN(s_base, "base");
  INTERN(s_values, "values");
  INTERN(s_unit, "unit");
  INTERN(s_tz, "tz");
  INTERN(s_names, "names");
  INTERN(s_columns, "columns");
  INTERN(s_nrow, "nrow");
  INTERN(s_codes, "codes");
  INTERN(s_categories, "categories");
  INTERN(s_ordered, "ordered");
  INTERN(s_target, "target");
  INTERN(s_source, "source");
  INTERN(s_args, "args");
  INTERN(s_kwargs, "kwargs");
  INTERN(s_mask, "mask");
  INTERN(s_data, "data");
  if (PyType_Ready(&SpView_Type) < 0 || PyType_Ready(&SpPool_Type) < 0 || PyType_Ready(&SpTask_Type) < 0 ||
      PyType_Ready(&SpMap_Type) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&moddef);
  if (!m) return NULL;
  int sp_cluster_add(PyObject *m); /* cluster.c: backend = "mpi" */
  if (sp_cluster_add(m) < 0) return NULL;
  int sp_chan_add(PyObject *m); /* chan.c: channels */
  if (sp_chan_add(m) < 0) return NULL;
  suiro_set_interrupt_check(interrupt_check, NULL);
  PyModule_AddObjectRef(m, "View", (PyObject *)&SpView_Type);
  PyModule_AddObjectRef(m, "Pool", (PyObject *)&SpPool_Type);
  PyModule_AddObjectRef(m, "Task", (PyObject *)&SpTask_Type);
  PyModule_AddObjectRef(m, "Map", (PyObject *)&SpMap_Type);
  PyModule_AddIntConstant(m, "LANG_LUA", WIRE_LANG_LUA);
  PyModule_AddIntConstant(m, "LANG_PYTHON", WIRE_LANG_PYTHON);
  PyModule_AddIntConstant(m, "LANG_R", WIRE_LANG_R);
  PyModule_AddIntConstant(m, "RESULT_ERROR", SUIRO_RESULT_ERROR);
  PyModule_AddIntConstant(m, "RESULT_DIED", SUIRO_RESULT_DIED);
  PyModule_AddIntConstant(m, "RESULT_CANCELLED", SUIRO_RESULT_CANCELLED);
  return m;
}
