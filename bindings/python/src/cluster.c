/*
 * cluster.c — backend = "mpi" for the Python face: binds the table of suiro_cluster.h
 * (build/lib/suiro/cluster.so, loaded with dlopen only when a pool asks for MPI; this module
 * never links MPI). suiro/_cluster.py drives it: serving ranks call _cluster_serve and exit;
 * rank 0 wraps its local pool (_cluster_pool) and runs maps over every node (_cluster_map).
 *
 * A map is staged by the ordinary path (Pool._map_new(..., prepare=True): suiro_plan_create on
 * the local pool, never started); the tier reads the staged plan back and deals it out, and the
 * results come back as the local map's do (numpy arrays, a suiro.Frame, a list of values).
 *
 * Threads and ownership: the tier is not thread-safe; every call here holds the GIL throughout
 * (waits are sliced by the caller) and the pool lock around the tier's engine calls on the
 * local pool. The handles are capsules; a map's capsule frees its map.
 */
#include <dlfcn.h>
#include <string.h>

#include "suiro_py.h"
#include "suiro_cluster.h"

static const suiro_cluster_api *A;

suiro_map *sp_map_engine(PyObject *o); /* map.c */
PyObject *sp_array_from(int type, const void *data, uint64_t count, int ndim, const uint64_t *dims); /* dec.c */

static PyObject *c_load(PyObject *self, PyObject *arg) {
  if (A) Py_RETURN_NONE;
  const char *path = PyUnicode_AsUTF8(arg);
  if (!path) return NULL;
  /* one engine per process: this module's engine symbols become global for the tier to use */
  Dl_info di;
  if (!dladdr((void *)c_load, &di) || !di.dli_fname || !dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL))
    return PyErr_Format(PyExc_ImportError, "backend \"mpi\": cannot make the engine of suiro._core global: %s",
                        dlerror());
  /* Open MPI loads plugins that expect libmpi's symbols globally */
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) return PyErr_Format(PyExc_ImportError, "backend \"mpi\": cannot load %s: %s", path, dlerror());
  const suiro_cluster_api *(*get)(void) = (const suiro_cluster_api *(*)(void))dlsym(h, "suiro_cluster");
  const suiro_cluster_api *a = get ? get() : NULL;
  if (!a || a->version != SUIRO_CLUSTER_VERSION)
    return PyErr_Format(PyExc_ImportError, "backend \"mpi\": %s is not suiro's cluster library of this version", path);
  A = a;
  Py_RETURN_NONE;
}

static int need(void) {
  if (A) return 0;
  PyErr_SetString(PyExc_RuntimeError, "backend \"mpi\": the cluster library is not loaded");
  return -1;
}

static PyObject *c_start(PyObject *self, PyObject *unused) {
  if (need() < 0) return NULL;
  char err[700];
  if (A->start(NULL, err, sizeof err) != 0) return PyErr_Format(PyExc_RuntimeError, "suiro.pool: backend \"mpi\": %s", err);
  return Py_BuildValue("iis", A->rank(), A->size(), A->node_name(A->rank()));
}

static PyObject *c_serve(PyObject *self, PyObject *unused) {
  if (need() < 0) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = A->serve();
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

static PyObject *c_shutdown(PyObject *self, PyObject *unused) {
  if (A) A->shutdown(0);
  Py_RETURN_NONE;
}

static PyObject *c_version(PyObject *self, PyObject *unused) {
  if (need() < 0) return NULL;
  return PyUnicode_FromString(A->mpi_version());
}

/* ---- pools ------------------------------------------------------------------------------------ */

#define XPOOL "suiro.cluster_pool"
#define XMAP "suiro.cluster_map"

static PyObject *c_pool(PyObject *self, PyObject *args) {
  PyObject *pool;
  Py_buffer spec;
  double start_timeout;
  if (need() < 0 || !PyArg_ParseTuple(args, "O!y*d", &SpPool_Type, &pool, &spec, &start_timeout)) return NULL;
  PoolObject *po = (PoolObject *)pool;
  char err[700];
  void *x;
  if (sp_pool_lock(po) < 0) {
    PyBuffer_Release(&spec);
    return NULL;
  }
  x = A->pool_new(&po->p, &po->timeout, spec.buf, (size_t)spec.len, start_timeout, err, sizeof err);
  sp_pool_unlock(po);
  PyBuffer_Release(&spec);
  if (!x) return PyErr_Format(PyExc_RuntimeError, "suiro.pool: backend \"mpi\": %s", err);
  return PyCapsule_New(x, XPOOL, NULL); /* the tier frees its pools at the job's end */
}

static PyObject *c_pool_close(PyObject *self, PyObject *cap) {
  void *x = PyCapsule_GetPointer(cap, XPOOL);
  if (!x) return NULL;
  A->pool_close(x);
  Py_RETURN_NONE;
}

static PyObject *c_nodes(PyObject *self, PyObject *cap) {
  void *x = PyCapsule_GetPointer(cap, XPOOL);
  if (!x) return NULL;
  int n = A->pool_nodes(x);
  PyObject *l = PyList_New(0);
  for (int r = 0; l && r < n; r++) {
    suiro_cluster_node nd;
    if (A->pool_node(x, r, &nd) != 0) continue;
    PyObject *d = Py_BuildValue("{s:i,s:s,s:i,s:i,s:i,s:i}", "rank", nd.rank, "node", nd.name ? nd.name : "?", "pid",
                                nd.pid, "cpus", nd.cpus, "workers", nd.workers, "up", nd.up);
    if (d && nd.error) {
      PyObject *e = PyUnicode_FromString(nd.error);
      if (!e || PyDict_SetItemString(d, "error", e) < 0) Py_CLEAR(d);
      Py_XDECREF(e);
    }
    if (!d || PyList_Append(l, d) < 0) Py_CLEAR(l);
    Py_XDECREF(d);
  }
  return l;
}

/* ---- maps ------------------------------------------------------------------------------------- */

static void xmap_free(PyObject *cap) {
  void *x = PyCapsule_GetPointer(cap, XMAP);
  if (x && A) A->map_free(x);
}

static void *get_xmap(PyObject *cap) { return PyCapsule_GetPointer(cap, XMAP); }

/* _cluster_map(xpool, pool, staged_map, seeded, seed, stream) -> a map running on every node */
static PyObject *c_map(PyObject *self, PyObject *args) {
  PyObject *xcap, *pool, *staged;
  int seeded, stream;
  unsigned long long seed;
  if (need() < 0 ||
      !PyArg_ParseTuple(args, "OO!O!pKp", &xcap, &SpPool_Type, &pool, &SpMap_Type, &staged, &seeded, &seed, &stream))
    return NULL;
  void *xp = PyCapsule_GetPointer(xcap, XPOOL);
  if (!xp) return NULL;
  suiro_map *m = sp_map_engine(staged);
  if (!m) return PyErr_Format(PyExc_RuntimeError, "map: the staged plan was freed");
  PoolObject *po = (PoolObject *)pool;
  if (sp_pool_lock(po) < 0) return NULL;
  char err[700];
  void *x = A->map_new(xp, m, seeded, (uint64_t)seed, stream, err, sizeof err);
  sp_pool_unlock(po);
  if (!x) return PyErr_Format(PyExc_RuntimeError, "map: %s", err);
  PyObject *cap = PyCapsule_New(x, XMAP, xmap_free);
  if (!cap) A->map_free(x);
  return cap;
}

/* _cluster_map_wait(pool, xmap, timeout) -> 1 ended, 0 running, -1 its pool stopped */
static PyObject *c_map_wait(PyObject *self, PyObject *args) {
  PyObject *pool, *cap;
  double timeout;
  if (!PyArg_ParseTuple(args, "O!Od", &SpPool_Type, &pool, &cap, &timeout)) return NULL;
  void *x = get_xmap(cap);
  if (!x) return NULL;
  PoolObject *po = (PoolObject *)pool;
  if (sp_pool_lock(po) < 0) return NULL;
  int r = A->map_wait(x, timeout);
  sp_pool_unlock(po);
  if (r == 0 && A->lost())
    return PyErr_Format(PyExc_RuntimeError, "map: %s", A->lost());
  return PyLong_FromLong(r);
}

static PyObject *c_map_done(PyObject *self, PyObject *cap) {
  void *x = get_xmap(cap);
  return x ? PyLong_FromUnsignedLongLong(A->map_done(x)) : NULL;
}

static PyObject *c_map_cancel(PyObject *self, PyObject *args) {
  PyObject *pool, *cap;
  if (!PyArg_ParseTuple(args, "O!O", &SpPool_Type, &pool, &cap)) return NULL;
  void *x = get_xmap(cap);
  if (!x) return NULL;
  PoolObject *po = (PoolObject *)pool;
  if (sp_pool_lock(po) < 0) return NULL;
  A->map_cancel(x);
  sp_pool_unlock(po);
  Py_RETURN_NONE;
}

/* _cluster_map_results(pool, xmap) -> what a local map's results() gives (raises its failure) */
static PyObject *c_map_results(PyObject *self, PyObject *args) {
  PyObject *pool, *cap;
  if (!PyArg_ParseTuple(args, "O!O", &SpPool_Type, &pool, &cap)) return NULL;
  void *x = get_xmap(cap);
  if (!x) return NULL;
  PoolObject *po = (PoolObject *)pool;
  suiro_error_info e;
  if (A->map_failure(x, &e)) {
    int kind = SUIRO_RESULT_ERROR;
    if (e.cls.len == 11 && !memcmp(e.cls.ptr, SUIRO_CLASS_WORKER_DIED, 11)) kind = SUIRO_RESULT_DIED;
    else if (e.cls.len == 9 && !memcmp(e.cls.ptr, SUIRO_CLASS_CANCELLED, 9)) kind = SUIRO_RESULT_CANCELLED;
    PyObject *exc = PyObject_CallFunction(SP.make_failure, "is#s#s#Liii", kind, e.cls.ptr, (Py_ssize_t)e.cls.len,
                                          e.message.ptr, (Py_ssize_t)e.message.len, e.traceback.ptr,
                                          (Py_ssize_t)e.traceback.len, (long long)e.index, e.slot, e.pid,
                                          po->lang == WIRE_LANG_PYTHON);
    if (exc) {
      PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
      Py_DECREF(exc);
    }
    return NULL;
  }
  const suiro_template *t = A->map_template(x);
  uint64_t count = 0, n;
  if (!t) {
    /* untyped: one wire value per element, in input order */
    n = A->map_size(x);
    if (n > (uint64_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (uint64_t i = 0; l && i < n; i++) {
      const void *data;
      size_t len;
      PyObject *v;
      if (!A->map_result(x, i, &data, &len)) {
        v = Py_NewRef(Py_None);
      } else {
        PyObject *d = sp_decode_list(data, len, sp_result_trust(po), NULL);
        if (!d) {
          Py_CLEAR(l);
          break;
        }
        v = Py_NewRef(PyList_GET_SIZE(d) ? PyList_GET_ITEM(d, 0) : Py_None);
        Py_DECREF(d);
      }
      PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
  }
  if (t->kind == SUIRO_OUT_RECORD) {
    PyObject *names = PyList_New(t->nfields), *cols = PyList_New(t->nfields);
    n = 0;
    for (int k = 0; names && cols && k < t->nfields; k++) {
      const void *col = A->map_column(x, k, &count);
      n = count;
      PyObject *a = sp_array_from(t->fields[k].type, col, count, 1, &count);
      if (!a) {
        Py_CLEAR(names);
        break;
      }
      PyList_SET_ITEM(names, k, PyUnicode_FromString(t->fields[k].name));
      PyList_SET_ITEM(cols, k, a);
    }
    PyObject *f = names && cols ? PyObject_CallFunction(SP.make_frame, "OOK", names, cols, (unsigned long long)n) : NULL;
    Py_XDECREF(names);
    Py_XDECREF(cols);
    return f;
  }
  const void *col = A->map_column(x, 0, &count);
  if (t->kind == SUIRO_OUT_SCALAR) return sp_array_from(t->type, col, count, 1, &count);
  uint64_t width = 1;
  for (int k = 0; k < t->ndim; k++) width *= t->shape[k];
  uint64_t dims[SUIRO_TEMPLATE_MAX_NDIM + 1];
  dims[0] = width ? count / width : 0;
  for (int k = 0; k < t->ndim; k++) dims[k + 1] = t->shape[k];
  return sp_array_from(t->type, col, count, t->ndim + 1, dims);
}

static PyMethodDef methods[] = {
  { "_cluster_load", c_load, METH_O, NULL },
  { "_cluster_start", c_start, METH_NOARGS, NULL },
  { "_cluster_serve", c_serve, METH_NOARGS, NULL },
  { "_cluster_shutdown", c_shutdown, METH_NOARGS, NULL },
  { "_cluster_version", c_version, METH_NOARGS, NULL },
  { "_cluster_pool", c_pool, METH_VARARGS, NULL },
  { "_cluster_pool_close", c_pool_close, METH_O, NULL },
  { "_cluster_nodes", c_nodes, METH_O, NULL },
  { "_cluster_map", c_map, METH_VARARGS, NULL },
  { "_cluster_map_wait", c_map_wait, METH_VARARGS, NULL },
  { "_cluster_map_done", c_map_done, METH_O, NULL },
  { "_cluster_map_cancel", c_map_cancel, METH_VARARGS, NULL },
  { "_cluster_map_results", c_map_results, METH_VARARGS, NULL },
  { NULL, NULL, 0, NULL },
};

int sp_cluster_add(PyObject *m) { return PyModule_AddFunctions(m, methods); }
