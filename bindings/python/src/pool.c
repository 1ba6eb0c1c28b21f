/*
 * pool.c — suiro._core.Pool and Task: pools of worker processes and the tasks sent to them.
 *
 * Locking and the GIL (see suiro_py.h): engine calls on a host handle are made with the pool
 * lock held. Waits release the GIL: first one short engine wait (spin, then park) with the lock
 * held, then slices of at most 50 ms on the pool's eventfd with the lock released (other threads
 * may submit and collect meanwhile), checking signals between slices so Ctrl-C interrupts.
 * Results are decoded with the GIL and the lock held (a collected result's bytes stay valid
 * only until the handle's next collect).
 *
 * A task remembers its outcome once collected (value or exception), so collect() and result()
 * may be called again; a task dropped uncollected is released (its result slot recycled).
 */
#include <math.h>
#include <string.h>

#include "suiro_py.h"

/* ---- outcomes and errors ---------------------------------------------------------------------- */

static PyObject *errors_mod;

static PyObject *error_class(const char *name) {
  if (!errors_mod && !(errors_mod = PyImport_ImportModule("suiro._errors"))) return NULL;
  return PyObject_GetAttrString(errors_mod, name);
}

/* Raises for a non-OK status; returns NULL. */
_Thread_local int sp_closed_by_face;

static PyObject *raise_status(suiro_status st, const char *verb, const char *what) {
  PyObject *cls = NULL;
  switch (st) {
  case SUIRO_TIMEOUT: PyErr_Format(PyExc_TimeoutError, "%s: %s", verb, what ? what : "timed out"); return NULL;
  case SUIRO_CLOSED: cls = error_class("PoolClosed"); break;
  case SUIRO_PEER_GONE: cls = error_class("PeerGone"); break;
  case SUIRO_FULL: cls = error_class("PoolFull"); break;
  default: cls = Py_NewRef(PyExc_RuntimeError);
  }
  if (!cls) return NULL;
  const char *msg = suiro_last_error();
  if (st == SUIRO_CLOSED && sp_closed_by_face) msg = "the pool was stopped";
  sp_closed_by_face = 0;
  size_t vl = strlen(verb);
  if (strncmp(msg, verb, vl) == 0 && msg[vl] == ':') PyErr_SetString(cls, msg); /* it names the verb already */
  else PyErr_Format(cls, "%s: %s", verb, msg);
  Py_DECREF(cls);
  return NULL;
}

PyObject *sp_raise_failure(PoolObject *po, int kind, const void *data, size_t len, int slot, int pid, int64_t index) {
  suiro_error_info e;
  if (suiro_error_read(kind, data, len, &e) != 0) {
    PyErr_Format(PyExc_RuntimeError, "task failed (result kind %d)", kind);
    return NULL;
  }
  if (slot >= 0) e.slot = slot;
  if (pid > 0) e.pid = pid;
  if (index >= 0 && e.index < 0) e.index = index;
  PyObject *exc = PyObject_CallFunction(SP.make_failure, "is#s#s#Liii", kind, e.cls.ptr, (Py_ssize_t)e.cls.len, e.message.ptr,
                                        (Py_ssize_t)e.message.len, e.traceback.ptr, (Py_ssize_t)e.traceback.len,
                                        (long long)e.index, e.slot, e.pid, po ? po->lang == WIRE_LANG_PYTHON : 1);
  if (!exc) return NULL;
  if (e.has_value && ((uintptr_t)data & 7) == 0) { /* LIST [ERROR, raised]: the raised value too */
    PyObject *l = sp_decode(data, len, sp_result_trust(po), NULL);
    if (l && PyList_Check(l) && PyList_GET_SIZE(l) == 2) PyObject_SetAttrString(exc, "value", PyList_GET_ITEM(l, 1));
    Py_XDECREF(l);
    PyErr_Clear();
  }
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* A result list: none -> None, one -> it, several (Lua) -> a tuple. */
static PyObject *unpack_values(PyObject *l) {
  Py_ssize_t n = PyList_GET_SIZE(l);
  PyObject *r;
  if (n == 0) r = Py_NewRef(Py_None);
  else if (n == 1) r = Py_NewRef(PyList_GET_ITEM(l, 0));
  else r = PyList_AsTuple(l);
  Py_DECREF(l);
  return r;
}

PyObject *sp_result(PoolObject *po, const suiro_result *r, Py_ssize_t index) {
  if (r->kind == SUIRO_RESULT_VALUE) {
    PyObject *l = sp_decode_list(r->data, r->len, sp_result_trust(po), NULL);
    return l ? unpack_values(l) : NULL;
  }
  return sp_raise_failure(po, r->kind, r->data, r->len, r->worker_slot, r->worker_pid, index);
}

double sp_timeout_arg(PyObject *v, double dflt, const char *verb) {
  if (!v || v == Py_None) return dflt;
  if (PyUnicode_Check(v)) {
    const char *s = PyUnicode_AsUTF8(v);
    double t;
    if (!s) return -2;
    if (sp_duration(s, &t) < 0) {
      PyObject *et, *ev, *etb;
      PyErr_Fetch(&et, &ev, &etb);
      PyObject *msg = ev ? PyObject_Str(ev) : NULL;
      PyErr_Format(PyExc_ValueError, "%s: timeout: %U", verb, msg ? msg : Py_None);
      Py_XDECREF(msg), Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(etb);
      return -2;
    }
    double out;
    if (suiro_timeout_norm(t, &out) != 0) {
      PyErr_Format(PyExc_ValueError, "%s: timeout must be >= 0 seconds or None, got %R", verb, v);
      return -2;
    }
    return out;
  }
  double t = PyFloat_AsDouble(v);
  if (t == -1 && PyErr_Occurred()) {
    PyErr_Format(PyExc_TypeError, "%s: timeout must be a number of seconds, a duration such as \"250ms\", or None, got %s",
                 verb, Py_TYPE(v)->tp_name);
    return -2;
  }
  double out;
  if (suiro_timeout_norm(t, &out) != 0) {
    PyErr_Format(PyExc_ValueError, "%s: timeout must be >= 0 seconds or None, got %R", verb, v);
    return -2;
  }
  return out;
}

/* ---- the lock ---------------------------------------------------------------------------------- */

int sp_pool_lock(PoolObject *po) {
  if (po->worker) return 0;
  unsigned long me = PyThread_get_thread_ident();
  if (!PyThread_acquire_lock(po->lock, NOWAIT_LOCK)) {
    if (po->locked && po->lock_owner == me) {
      PyErr_SetString(PyExc_RuntimeError,
                      "suiro: the pool was used from inside its own operation (a finalizer or pickler called back)");
      return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(po->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
  po->lock_owner = me;
  po->locked = 1;
  if (po->npending && po->p) {
    for (size_t i = 0; i < po->npending; i++) suiro_task_release(po->p, po->pending[i]);
    po->npending = 0;
  }
  return 0;
}

void sp_pool_unlock(PoolObject *po) {
  if (po->worker) return;
  po->locked = 0;
  PyThread_release_lock(po->lock);
}

int sp_pool_check(PoolObject *po, const char *verb) {
  int owner = po->p ? suiro_pool_inherited(po->p) : 0;
  if (owner) { /* after os.fork(): the parent's pool, inert here */
    PyErr_Format(PyExc_RuntimeError,
                 "%s: this pool belongs to process %d (inherited across fork: a forked child cannot use its "
                 "parent's pools; create a pool in the child)", verb, owner);
    return -1;
  }
  if (po->p) return 0;
  PyObject *cls = error_class("PoolClosed");
  if (cls) {
    PyErr_Format(cls, "%s: the pool is stopped", verb);
    Py_DECREF(cls);
  }
  return -1;
}

/* A host's wait (suiro_wait_sliced, suiro_face.h section 5): the first 50 us with the GIL held
 * (a quick result, the common case, then costs no GIL hand-over, and no other thread waits longer
 * than a GIL switch interval would make it); then 2 ms blocked without the GIL; then slices of
 * 50 ms polling the pool's event fd without the GIL and the pool lock (other threads use the pool
 * meanwhile), signals checked between them. */
typedef struct sp_waiter {
  PoolObject *po;
  PyThreadState *ts;
  int raised, closed;
} sp_waiter;

static void sp_wait_release(void *ud, int deep) {
  sp_waiter *w = ud;
  if (deep) sp_pool_unlock(w->po);
  w->ts = PyEval_SaveThread();
}

static int sp_wait_reacquire(void *ud, int deep) {
  sp_waiter *w = ud;
  PyEval_RestoreThread(w->ts);
  if (!deep) return 0;
  if (sp_pool_lock(w->po) < 0) return w->raised = 1;
  if (!w->po->p) return w->closed = 1;
  return 0;
}

static int sp_wait_interrupted(void *ud) {
  sp_waiter *w = ud;
  return PyErr_CheckSignals() < 0 ? (w->raised = 1) : 0;
}

static const suiro_wait_hooks sp_wait_hooks = { 50e-6, 0.002, 0.05, 1, sp_wait_release, sp_wait_reacquire,
                                                sp_wait_interrupted };

int sp_wait(PoolObject *po, double timeout, sp_wait_step step, void *ctx) {
  if (po->worker && timeout != 0) return step(ctx, timeout); /* helps: runs other tasks meanwhile */
  sp_waiter w = { po, NULL, 0, 0 };
  int st = suiro_wait_sliced(po->p, timeout, step, ctx, &sp_wait_hooks, &w);
  if (st == SUIRO_WAIT_STOPPED) return w.closed && !w.raised ? SP_CLOSED : -1;
  if (st == SUIRO_ERR && PyErr_Occurred()) return -1; /* a signal handler raised (interrupt check) */
  return st;
}

/* ---- Pool ---------------------------------------------------------------------------------------- */

static PyObject *pool_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  PoolObject *po = (PoolObject *)type->tp_alloc(type, 0);
  if (!po) return NULL;
  po->lock = PyThread_allocate_lock();
  po->fn_cache = PyDict_New();
  po->lang = WIRE_LANG_PYTHON;
  po->timeout = -1;
  if (!po->lock || !po->fn_cache) {
    Py_DECREF(po);
    return PyErr_NoMemory();
  }
  return (PyObject *)po;
}

/* A list of str as a NULL-terminated array of UTF-8 pointers kept alive by `keep`. */
/* Pool.__init__(spec): spec is the dict _api._start builds (the normalised options, with exe,
 * argv, env and lang built from the launcher), handed to the engine as one DICT:
 * suiro_pool_create_from checks every field (suiro_face.h section 6). */
static int pool_init(PoolObject *po, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "spec", NULL };
  PyObject *spec;
  if (po->p) {
    PyErr_SetString(PyExc_RuntimeError, "pool: already started");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwl, &PyDict_Type, &spec)) return -1;
  _Alignas(8) unsigned char stack[4096];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  sp_enc_opts eo = { "suiro.pool", 0, NULL, NULL, 0, NULL, NULL };
  const void *buf;
  size_t len;
  if (sp_encode_value(&eo, spec, &w) < 0) return wire_writer_free(&w), -1;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    PyErr_Format(PyExc_ValueError, "suiro.pool: %s", wire_writer_error(&w));
    wire_writer_free(&w);
    return -1;
  }
  suiro_status st;
  suiro_pool *p = NULL;
  suiro_pool_info info;
  Py_BEGIN_ALLOW_THREADS
  st = suiro_pool_create_from(buf, len, WIRE_LANG_PYTHON, &p, &info);
  Py_END_ALLOW_THREADS
  wire_writer_free(&w);
  if (st != SUIRO_OK) {
    const char *msg = suiro_last_error();
    if (!strncmp(msg, "pool: ", 6)) msg += 6; /* the engine's verb: ours instead */
    PyObject *cls = error_class("StartError");
    if (cls) {
      PyErr_Format(cls, "suiro.pool: %s", msg);
      Py_DECREF(cls);
    }
    return -1;
  }
  po->p = p;
  po->owner = 1;
  po->lang = info.lang;
  po->timeout = info.timeout;
  return 0;
}

static void pool_stop_now(PoolObject *po, double timeout) {
  if (!po->p) return;
  suiro_pool *p = po->p;
  po->p = NULL;
  po->npending = 0;
  if (po->owner && !suiro_pool_inherited(p)) { /* after os.fork() the parent's pool is not ours */
    Py_BEGIN_ALLOW_THREADS
    suiro_pool_stop(p, timeout);
    Py_END_ALLOW_THREADS
  }
}

static void pool_dealloc(PoolObject *po) {
  PyObject_GC_UnTrack(po);
  if (po->weakreflist) PyObject_ClearWeakRefs((PyObject *)po);
  pool_stop_now(po, 5.0);
  Py_CLEAR(po->fn_cache);
  Py_CLEAR(po->last_fn);
  Py_CLEAR(po->last_item);
  Py_CLEAR(po->code_plans);
  Py_CLEAR(po->last_code);
  Py_CLEAR(po->last_plan);
  Py_CLEAR(po->dict);
  if (po->lock) PyThread_free_lock(po->lock);
  PyMem_Free(po->pending);
  Py_TYPE(po)->tp_free((PyObject *)po);
}

static int pool_traverse(PoolObject *po, visitproc visit, void *arg) {
  Py_VISIT(po->fn_cache);
  Py_VISIT(po->last_fn);
  Py_VISIT(po->last_item);
  Py_VISIT(po->code_plans);
  Py_VISIT(po->last_code);
  Py_VISIT(po->last_plan);
  Py_VISIT(po->dict);
  return 0;
}

static int pool_clear(PoolObject *po) {
  Py_CLEAR(po->fn_cache);
  Py_CLEAR(po->last_fn);
  Py_CLEAR(po->last_item);
  Py_CLEAR(po->code_plans);
  Py_CLEAR(po->last_code);
  Py_CLEAR(po->last_plan);
  Py_CLEAR(po->dict);
  return 0;
}

static PyObject *pool_stop(PoolObject *po, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "timeout", NULL };
  double timeout = 5.0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|d", kwl, &timeout)) return NULL;
  if (po->worker) Py_RETURN_NONE; /* a worker's own pool is not ours to stop */
  if (sp_pool_lock(po) < 0) return NULL;
  suiro_pool *p = po->p;
  po->p = NULL;
  po->npending = 0;
  sp_pool_unlock(po);
  if (p && po->owner && !suiro_pool_inherited(p)) { /* after os.fork() the parent's pool is not ours */
    Py_BEGIN_ALLOW_THREADS
    suiro_pool_stop(p, timeout);
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

static TaskObject *task_make(PoolObject *po, suiro_task t) {
  TaskObject *k = PyObject_GC_New(TaskObject, &SpTask_Type);
  if (!k) return NULL;
  k->pool = (PoolObject *)Py_NewRef(po);
  k->t = t;
  k->state = 0;
  k->outcome = NULL;
  k->failed = 0;
  k->slot = -1;
  k->pid = 0;
  k->weakreflist = NULL;
  PyObject_GC_Track(k);
  return k;
}

/* Submits one encoded task: with the GIL while the ring has room, without it while waiting. */
static suiro_status submit_bytes(PoolObject *po, const void *buf, size_t len, suiro_task *t) {
  suiro_status st = suiro_submit(po->p, SUIRO_FN_BINDING, buf, len, t, 0);
  if (st == SUIRO_FULL && suiro_free_slots(po->p, NULL) == 0) {
    /* every result slot is held: finalise dropped tasks, then wait for released ones */
    sp_pool_unlock(po);
    PyGC_Collect();
    if (sp_pool_lock(po) < 0) return SUIRO_ERR;
    if (!po->p) return SP_CLOSED;
  }
  if (st == SUIRO_FULL || st == SUIRO_TIMEOUT) {
    if (po->worker) return suiro_submit(po->p, SUIRO_FN_BINDING, buf, len, t, po->timeout);
    double timeout = po->timeout;
    Py_BEGIN_ALLOW_THREADS
    st = suiro_submit(po->p, SUIRO_FN_BINDING, buf, len, t, timeout);
    Py_END_ALLOW_THREADS
  }
  return st;
}

static PyObject *kwargs_of(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  if (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) return NULL;
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++)
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
      Py_DECREF(d);
      return NULL;
    }
  return d;
}

static void enc_opts(sp_enc_opts *o, PoolObject *po, const char *verb, suiro_msg *g) {
  o->verb = verb;
  o->foreign = po->lang != WIRE_LANG_PYTHON;
  o->foreign_lang = sp_lang_name(po->lang);
  o->foreign_dest = po->lang == WIRE_LANG_LUA ? "lua workers" : po->lang == WIRE_LANG_R ? "r workers" : "python workers";
  o->zero_copy = 1;
  o->pool = po;
  o->grants = g;
}

/* pool.submit(fn, *args, **kwargs) -> Task */
static PyObject *pool_submit(PoolObject *po, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) return PyErr_Format(PyExc_TypeError, "submit: argument 1 must be a function or call spec, got no value");
  if (sp_pool_check(po, "submit") < 0) return NULL;
  PyObject *kwargs = NULL;
  if (kwnames && PyTuple_GET_SIZE(kwnames) && !(kwargs = kwargs_of(args, nargs, kwnames))) return NULL;
  _Alignas(8) unsigned char stack[512];
  suiro_msg g;
  suiro_msg_init(&g, stack, sizeof stack);
  sp_enc_opts o;
  enc_opts(&o, po, "submit", &g);
  const void *buf;
  size_t len;
  if (sp_encode_task(&o, args[0], args + 1, nargs - 1, kwargs, &g.w) < 0 || wire_writer_finish(&g.w, &buf, &len) != WIRE_OK) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "submit: %s", wire_writer_error(&g.w));
    Py_XDECREF(kwargs);
    suiro_msg_free(&g);
    wire_writer_free(&g.w);
    return NULL;
  }
  Py_XDECREF(kwargs);
  if (sp_pool_lock(po) < 0) {
    suiro_msg_free(&g);
    wire_writer_free(&g.w);
    return NULL;
  }
  suiro_task t;
  suiro_status st = po->p ? submit_bytes(po, buf, len, &t) : SP_CLOSED;
  sp_pool_unlock(po);
  wire_writer_free(&g.w);
  if (st != SUIRO_OK) {
    suiro_msg_free(&g);
    if (PyErr_Occurred()) return NULL;
    return raise_status(st, "submit", "the pool's queue stayed full");
  }
  suiro_msg_sent(&g);
  return (PyObject *)task_make(po, t);
}

/* pool.submit_batch(fn, arglists) -> [Task]: one task per argument tuple, sent in runs. */
static PyObject *pool_submit_batch(PoolObject *po, PyObject *args) {
  PyObject *fn, *lists;
  if (!PyArg_ParseTuple(args, "OO:submit_batch", &fn, &lists)) return NULL;
  if (sp_pool_check(po, "submit_batch") < 0) return NULL;
  PyObject *seq = PySequence_Fast(lists, "submit_batch: argument 2 must be a sequence of argument tuples");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject *out = PyList_New(0);
  size_t *offs = PyMem_Malloc(sizeof *offs * (size_t)(n + 1));
  suiro_task_spec *specs = PyMem_Malloc(sizeof *specs * (size_t)(n ? n : 1));
  suiro_task *ts = PyMem_Malloc(sizeof *ts * (size_t)(n ? n : 1));
  suiro_msg *gs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *gs);
  unsigned char *bytes = NULL;
  size_t blen = 0, bcap = 0;
  Py_ssize_t encoded = 0, accepted = 0;
  /* The writers' first buffer, shared: one message is written at a time, and an ended message
   * re-initialises its writer in it (suiro_face.h section 3), so it must outlive them all. */
  _Alignas(8) unsigned char stack[512];
  if (!out || !offs || !specs || !ts || !gs) {
    PyErr_NoMemory();
    goto fail;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *a = PySequence_Fast_GET_ITEM(seq, i);
    PyObject *targs = PyTuple_Check(a) ? Py_NewRef(a) : PyList_Check(a) ? PyList_AsTuple(a) : PyTuple_Pack(1, a);
    if (!targs) goto fail;
    char verb[64];
    snprintf(verb, sizeof verb, "submit_batch: task %zd", i + 1);
    suiro_msg_init(&gs[i], stack, sizeof stack); /* its writer ends below, its ledger when sent */
    sp_enc_opts o;
    enc_opts(&o, po, verb, &gs[i]);
    const void *buf;
    size_t len;
    int rc = sp_encode_task(&o, fn, &PyTuple_GET_ITEM(targs, 0), PyTuple_GET_SIZE(targs), NULL, &gs[i].w);
    Py_DECREF(targs);
    if (rc < 0 || wire_writer_finish(&gs[i].w, &buf, &len) != WIRE_OK) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: %s", verb, wire_writer_error(&gs[i].w));
      suiro_msg_free(&gs[i]);
      wire_writer_free(&gs[i].w);
      goto fail;
    }
    encoded = i + 1;
    if (blen + len > bcap) {
      size_t cap = bcap ? bcap * 2 : 4096;
      while (cap < blen + len) cap *= 2;
      unsigned char *nb = PyMem_Realloc(bytes, cap);
      if (!nb) {
        wire_writer_free(&gs[i].w);
        PyErr_NoMemory();
        goto fail;
      }
      bytes = nb;
      bcap = cap;
    }
    memcpy(bytes + blen, buf, len);
    offs[i] = blen;
    blen += len;
    wire_writer_free(&gs[i].w);
  }
  offs[n] = blen;
  for (Py_ssize_t i = 0; i < n; i++) specs[i] = (suiro_task_spec){ SUIRO_FN_BINDING, bytes + offs[i], offs[i + 1] - offs[i] };
  if (sp_pool_lock(po) < 0) goto fail;
  suiro_status st = SUIRO_OK;
  while (accepted < n && po->p) {
    size_t got = 0;
    st = suiro_submit_batch(po->p, specs + accepted, (size_t)(n - accepted), ts + accepted, &got, 0);
    accepted += (Py_ssize_t)got;
    if (st == SUIRO_OK) break;
    if (st != SUIRO_FULL && st != SUIRO_TIMEOUT) break;
    if (suiro_free_slots(po->p, NULL) == 0) {
      sp_pool_unlock(po);
      PyGC_Collect();
      if (sp_pool_lock(po) < 0) goto fail;
      if (!po->p) break;
    }
    size_t more = 0;
    double timeout = po->timeout;
    if (po->worker) {
      st = suiro_submit_batch(po->p, specs + accepted, (size_t)(n - accepted), ts + accepted, &more, timeout);
    } else {
      Py_BEGIN_ALLOW_THREADS
      st = suiro_submit_batch(po->p, specs + accepted, (size_t)(n - accepted), ts + accepted, &more, timeout);
      Py_END_ALLOW_THREADS
    }
    accepted += (Py_ssize_t)more;
    if (st != SUIRO_OK) break;
  }
  if (!po->p && accepted < n) st = SP_CLOSED;
  sp_pool_unlock(po);
  for (Py_ssize_t i = 0; i < accepted; i++) {
    suiro_msg_sent(&gs[i]);
    TaskObject *k = task_make(po, ts[i]);
    if (!k || PyList_Append(out, (PyObject *)k) < 0) {
      Py_XDECREF(k);
      accepted = i + 1;
      goto fail;
    }
    Py_DECREF(k);
  }
  if (accepted < n) {
    raise_status(st, "submit_batch", "the pool's queue stayed full");
    goto fail;
  }
  Py_DECREF(seq);
  PyMem_Free(offs);
  PyMem_Free(specs);
  PyMem_Free(ts);
  PyMem_Free(gs);
  PyMem_Free(bytes);
  return out;
fail:
  for (Py_ssize_t i = accepted; i < encoded; i++) suiro_msg_free(&gs[i]);
  Py_XDECREF(out); /* the tasks that went in are released by their finalizers */
  Py_DECREF(seq);
  PyMem_Free(offs);
  PyMem_Free(specs);
  PyMem_Free(ts);
  PyMem_Free(gs);
  PyMem_Free(bytes);
  return NULL;
}

/* ---- collecting --------------------------------------------------------------------------------- */

typedef struct one_ctx {
  PoolObject *po;
  suiro_task t;
  suiro_result r;
} one_ctx;

static suiro_status step_one(void *ctx, double slice) {
  one_ctx *c = ctx;
  return suiro_collect(c->po->p, c->t, &c->r, slice);
}

/* Stores the outcome of a collected result in the task (value, or the exception). */
static void task_settle(TaskObject *k, PyObject *value, const suiro_result *r) {
  k->state = 1;
  k->slot = r->worker_slot;
  k->pid = r->worker_pid;
  if (value) {
    k->outcome = value;
    k->failed = 0;
  } else {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v) PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    k->outcome = v;
    k->failed = 1;
  }
}

static PyObject *task_outcome(TaskObject *k) {
  if (!k->failed) return Py_NewRef(k->outcome);
  PyErr_SetObject((PyObject *)Py_TYPE(k->outcome), k->outcome);
  return NULL;
}

static PyObject *timeout_error(const char *verb, double timeout) {
  /* PyErr_Format knows no floating-point conversions: format the number with C's printf */
  char secs[32];
  snprintf(secs, sizeof secs, "%g", timeout);
  PyErr_Format(PyExc_TimeoutError, "%s: not done after %s s", verb, secs);
  return NULL;
}

static PyObject *task_collect_impl(TaskObject *k, double timeout, const char *verb) {
  if (k->state == 1) return task_outcome(k);
  if (k->state == 2) return PyErr_Format(PyExc_RuntimeError, "%s: this task was released", verb);
  PoolObject *po = k->pool;
  if (sp_pool_check(po, verb) < 0) return NULL;
  if (sp_pool_lock(po) < 0) return NULL;
  if (!po->p) {
    sp_pool_unlock(po);
    return (PyObject *)(sp_pool_check(po, verb), NULL);
  }
  one_ctx c = { po, k->t, { 0 } };
  int st = sp_wait(po, timeout, step_one, &c);
  if (st == SUIRO_OK) {
    task_settle(k, sp_result(po, &c.r, -1), &c.r);
    sp_pool_unlock(po);
    return task_outcome(k);
  }
  sp_pool_unlock(po);
  if (st < 0) return NULL;
  if (st == SUIRO_TIMEOUT) return timeout_error(verb, timeout);
  return raise_status(st, verb, NULL);
}

static PyObject *task_collect(TaskObject *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *to = NULL;
  if (nargs > 1 || (kwnames && PyTuple_GET_SIZE(kwnames) > 1))
    return PyErr_Format(PyExc_TypeError, "collect() takes at most 1 argument (timeout)");
  if (nargs == 1) {
    to = args[0];
    if (kwnames && PyTuple_GET_SIZE(kwnames)) return PyErr_Format(PyExc_TypeError, "collect(): timeout given twice");
  } else if (kwnames && PyTuple_GET_SIZE(kwnames) == 1) {
    if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "timeout") != 0)
      return PyErr_Format(PyExc_TypeError, "collect() got an unexpected keyword argument %R", PyTuple_GET_ITEM(kwnames, 0));
    to = args[0];
  }
  if (k->state == 1) return task_outcome(k); /* collected already: no wait */
  double timeout = sp_timeout_arg(to, k->pool->timeout, "collect"); /* default: the pool's timeout, as in Lua */
  if (timeout == -2) return NULL;
  return task_collect_impl(k, timeout, "collect");
}

static PyObject *task_done(TaskObject *k, PyObject *unused) {
  if (k->state != 0) Py_RETURN_TRUE;
  PoolObject *po = k->pool;
  if (!po->p) Py_RETURN_TRUE;
  if (sp_pool_lock(po) < 0) return NULL;
  int r = po->p && suiro_task_ready(po->p, k->t);
  sp_pool_unlock(po);
  return PyBool_FromLong(r);
}

static PyObject *task_cancel(TaskObject *k, PyObject *unused) {
  if (k->state != 0) Py_RETURN_FALSE;
  PoolObject *po = k->pool;
  if (!po->p) Py_RETURN_FALSE;
  if (sp_pool_lock(po) < 0) return NULL;
  int r = po->p && suiro_cancel(po->p, k->t);
  sp_pool_unlock(po);
  return PyBool_FromLong(r);
}

static PyObject *task_kill(TaskObject *k, PyObject *unused) {
  if (k->state != 0) Py_RETURN_FALSE;
  PoolObject *po = k->pool;
  if (po->worker) return PyErr_Format(PyExc_RuntimeError, "kill: only the host can kill a worker");
  if (sp_pool_check(po, "kill") < 0 || sp_pool_lock(po) < 0) return NULL;
  suiro_status st = po->p ? suiro_task_kill(po->p, k->t) : SP_CLOSED;
  sp_pool_unlock(po);
  if (st != SUIRO_OK) return raise_status(st, "kill", NULL);
  Py_RETURN_TRUE;
}

static void task_release_handle(TaskObject *k) {
  PoolObject *po = k->pool;
  if (k->state != 0 || !po || !po->p) return;
  k->state = 2;
  if (po->worker) {
    suiro_task_release(po->p, k->t);
  } else if (PyThread_acquire_lock(po->lock, NOWAIT_LOCK)) {
    suiro_task_release(po->p, k->t);
    PyThread_release_lock(po->lock);
  } else { /* the pool is busy (maybe in this very thread): release at its next lock */
    if (po->npending == po->cap_pending) {
      size_t cap = po->cap_pending ? po->cap_pending * 2 : 64;
      suiro_task *np = PyMem_Realloc(po->pending, cap * sizeof *np);
      if (!np) return; /* the slot stays held: a leak, not a crash */
      po->pending = np;
      po->cap_pending = cap;
    }
    po->pending[po->npending++] = k->t;
  }
}

static PyObject *task_release(TaskObject *k, PyObject *unused) {
  task_release_handle(k);
  Py_RETURN_NONE;
}

static void task_dealloc(TaskObject *k) {
  PyObject_GC_UnTrack(k);
  if (k->weakreflist) PyObject_ClearWeakRefs((PyObject *)k);
  task_release_handle(k);
  Py_CLEAR(k->outcome);
  Py_CLEAR(k->pool);
  PyObject_GC_Del(k);
}

static int task_traverse(TaskObject *k, visitproc visit, void *arg) {
  Py_VISIT(k->outcome);
  Py_VISIT(k->pool);
  return 0;
}

static int task_clear(TaskObject *k) {
  Py_CLEAR(k->outcome);
  return 0;
}

static PyObject *task_repr(TaskObject *k) {
  static const char *const states[] = { "pending", "done", "released" };
  return PyUnicode_FromFormat("<suiro.Task %s>", states[k->state]);
}

static PyObject *aio_await;

static PyObject *task_await(TaskObject *k) {
  if (!aio_await) {
    PyObject *m = PyImport_ImportModule("suiro._aio");
    aio_await = m ? PyObject_GetAttrString(m, "await_task") : NULL;
    Py_XDECREF(m);
    if (!aio_await) return NULL;
  }
  PyObject *coro = PyObject_CallOneArg(aio_await, (PyObject *)k);
  if (!coro) return NULL;
  PyObject *it = PyObject_CallMethod(coro, "__await__", NULL);
  Py_DECREF(coro);
  return it;
}

static PyObject *task_get_pool(TaskObject *k, void *unused) { return Py_NewRef((PyObject *)k->pool); }
static PyObject *task_get_handle(TaskObject *k, void *unused) { return PyLong_FromUnsignedLongLong(k->t); }
static PyObject *task_get_state(TaskObject *k, void *unused) { return PyLong_FromLong(k->state); }
static PyObject *task_get_slot(TaskObject *k, void *unused) {
  if (k->slot < 0) Py_RETURN_NONE;
  return PyLong_FromLong(k->slot);
}
static PyObject *task_get_pid(TaskObject *k, void *unused) {
  if (k->pid <= 0) Py_RETURN_NONE;
  return PyLong_FromLong(k->pid);
}

/* gathers handles of the pending tasks among `tasks` (all of pool po) */
static int gather(PoolObject *po, PyObject *seq, TaskObject ***ks, const char *verb) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  *ks = PyMem_Malloc(sizeof **ks * (size_t)(n ? n : 1));
  if (!*ks) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
    if (Py_TYPE(o) != &SpTask_Type) {
      PyErr_Format(PyExc_TypeError, "%s: tasks[%zd] is not a task (got %s)", verb, i, Py_TYPE(o)->tp_name);
      return -1;
    }
    TaskObject *k = (TaskObject *)o;
    if (k->pool != po) {
      PyErr_Format(PyExc_ValueError, "%s: tasks[%zd] belongs to another pool", verb, i);
      return -1;
    }
    if (k->state == 2) {
      PyErr_Format(PyExc_ValueError, "%s: tasks[%zd] was released", verb, i);
      return -1;
    }
    (*ks)[i] = k;
  }
  return 0;
}

typedef struct copied { int kind; int slot, pid; size_t len; void *data; } copied;

typedef struct all_ctx {
  PoolObject *po;
  suiro_task *ts;
  size_t n;
  copied *out;
} all_ctx;

/* Runs without the GIL: copies each result's bytes (decoded afterwards, with the GIL). */
static int sink_copy(void *ctx, size_t i, const suiro_result *r) {
  all_ctx *c = ctx;
  copied *o = &c->out[i];
  o->kind = r->kind;
  o->slot = r->worker_slot;
  o->pid = r->worker_pid;
  o->len = r->len;
  o->data = aligned_alloc(8, (r->len + 7) & ~(size_t)7 ? (r->len + 7) & ~(size_t)7 : 8);
  if (o->data) memcpy(o->data, r->data, r->len);
  return 0;
}

static suiro_status step_all(void *ctx, double slice) {
  all_ctx *c = ctx;
  return suiro_collect_all(c->po->p, c->ts, c->n, sink_copy, c, slice);
}

/* pool.collect_all(tasks, timeout=None) -> values in input order; raises the first failure. */
static PyObject *pool_collect_all(PoolObject *po, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "tasks", "timeout", NULL };
  PyObject *tasks, *to = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:collect_all", kwl, &tasks, &to)) return NULL;
  double timeout = sp_timeout_arg(to, po->timeout, "collect_all");
  if (timeout == -2) return NULL;
  PyObject *seq = PySequence_Fast(tasks, "collect_all: tasks must be a sequence of tasks");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  TaskObject **ks = NULL;
  suiro_task *ts = NULL;
  size_t *map = NULL;
  copied *out = NULL;
  PyObject *res = NULL;
  if (gather(po, seq, &ks, "collect_all") < 0) goto done;
  ts = PyMem_Malloc(sizeof *ts * (size_t)(n ? n : 1));
  map = PyMem_Malloc(sizeof *map * (size_t)(n ? n : 1));
  out = PyMem_Calloc((size_t)(n ? n : 1), sizeof *out);
  if (!ts || !map || !out) {
    PyErr_NoMemory();
    goto done;
  }
  size_t m = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (ks[i]->state == 0) {
      ts[m] = ks[i]->t;
      map[m++] = (size_t)i;
    }
  if (m) {
    if (sp_pool_check(po, "collect_all") < 0 || sp_pool_lock(po) < 0) goto done;
    if (!po->p) {
      sp_pool_unlock(po);
      sp_pool_check(po, "collect_all");
      goto done;
    }
    all_ctx c = { po, ts, m, out };
    int st = sp_wait(po, timeout, step_all, &c);
    sp_pool_unlock(po);
    if (st != SUIRO_OK) {
      for (size_t j = 0; j < m; j++) free(out[j].data);
      if (st == SUIRO_TIMEOUT) timeout_error("collect_all", timeout);
      else if (st > 0) raise_status(st, "collect_all", NULL);
      goto done;
    }
    for (size_t j = 0; j < m; j++) {
      copied *o = &out[j];
      suiro_result r = { o->kind, o->data, o->len, o->slot, o->pid };
      if (!o->data && o->len) {
        PyErr_NoMemory();
        task_settle(ks[map[j]], NULL, &r);
      } else {
        task_settle(ks[map[j]], sp_result(po, &r, (Py_ssize_t)map[j]), &r);
      }
      free(o->data);
      o->data = NULL;
    }
  }
  res = PyList_New(n);
  for (Py_ssize_t i = 0; res && i < n; i++) {
    TaskObject *k = ks[i];
    if (k->failed) {
      Py_CLEAR(res);
      PyErr_SetObject((PyObject *)Py_TYPE(k->outcome), k->outcome);
      break;
    }
    PyList_SET_ITEM(res, i, Py_NewRef(k->outcome));
  }
done:
  Py_DECREF(seq);
  PyMem_Free(ks);
  PyMem_Free(ts);
  PyMem_Free(map);
  PyMem_Free(out);
  return res;
}

typedef struct any_ctx {
  PoolObject *po;
  suiro_task *ts;
  size_t n, index;
  suiro_result r;
} any_ctx;

static suiro_status step_any(void *ctx, double slice) {
  any_ctx *c = ctx;
  return suiro_collect_any(c->po->p, c->ts, c->n, &c->index, &c->r, slice);
}

/* pool.collect_any(tasks, timeout=None) -> (index, value) of the first to finish. Tasks that
 * were collected already count as finished. */
static PyObject *pool_collect_any(PoolObject *po, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "tasks", "timeout", NULL };
  PyObject *tasks, *to = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:collect_any", kwl, &tasks, &to)) return NULL;
  double timeout = sp_timeout_arg(to, po->timeout, "collect_any");
  if (timeout == -2) return NULL;
  PyObject *seq = PySequence_Fast(tasks, "collect_any: tasks must be a sequence of tasks");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  TaskObject **ks = NULL;
  suiro_task *ts = NULL;
  size_t *map = NULL;
  PyObject *res = NULL;
  if (n == 0) {
    PyErr_SetString(PyExc_ValueError, "collect_any: no tasks given");
    goto done;
  }
  if (gather(po, seq, &ks, "collect_any") < 0) goto done;
  for (Py_ssize_t i = 0; i < n; i++)
    if (ks[i]->state == 1) {
      PyObject *v = task_outcome(ks[i]);
      if (v) res = Py_BuildValue("(nN)", i, v);
      goto done;
    }
  ts = PyMem_Malloc(sizeof *ts * (size_t)n);
  if (!ts) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++) ts[i] = ks[i]->t;
  if (sp_pool_check(po, "collect_any") < 0 || sp_pool_lock(po) < 0) goto done;
  if (!po->p) {
    sp_pool_unlock(po);
    sp_pool_check(po, "collect_any");
    goto done;
  }
  any_ctx c = { po, ts, (size_t)n, 0, { 0 } };
  int st = sp_wait(po, timeout, step_any, &c);
  if (st == SUIRO_OK) {
    TaskObject *k = ks[c.index];
    task_settle(k, sp_result(po, &c.r, (Py_ssize_t)c.index), &c.r);
    sp_pool_unlock(po);
    PyObject *v = task_outcome(k);
    if (v) res = Py_BuildValue("(nN)", (Py_ssize_t)c.index, v);
    goto done;
  }
  sp_pool_unlock(po);
  if (st == SUIRO_TIMEOUT) timeout_error("collect_any", timeout);
  else if (st > 0) raise_status(st, "collect_any", NULL);
done:
  (void)map;
  Py_DECREF(seq);
  PyMem_Free(ks);
  PyMem_Free(ts);
  return res;
}

/* pool.status() -> {"workers": [{slot, pid, state, tasks, steals, parks, moves}], totals...} */
static PyObject *pool_status(PoolObject *po, PyObject *unused) {
  if (sp_pool_check(po, "status") < 0 || sp_pool_lock(po) < 0) return NULL;
  suiro_pool_stats s;
  suiro_worker_info w[64];
  int n = po->p ? suiro_pool_status(po->p, &s, w, 64) : 0;
  if (n < 0) n = 0;
  const char *name = po->p ? suiro_pool_name(po->p) : "";
  sp_pool_unlock(po);
  PyObject *ws = PyList_New(n);
  for (int i = 0; ws && i < n; i++)
    PyList_SET_ITEM(ws, i,
                    Py_BuildValue("{s:i,s:i,s:s,s:K,s:K,s:K,s:K}", "slot", w[i].slot, "pid", w[i].pid, "state",
                                  suiro_worker_state_name(w[i].state), "tasks", (unsigned long long)w[i].tasks, "steals",
                                  (unsigned long long)w[i].steals, "parks", (unsigned long long)w[i].parks, "moves",
                                  (unsigned long long)w[i].moves));
  if (!ws) return NULL;
  return Py_BuildValue("{s:N,s:i,s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:s,s:K}", "workers", ws, "live", s.workers,
                       "max_workers", s.max_workers, "submitted", (unsigned long long)s.submitted, "collected",
                       (unsigned long long)s.collected, "tasks", (unsigned long long)s.tasks, "steals",
                       (unsigned long long)s.steals, "parks", (unsigned long long)s.parks, "host_parks",
                       (unsigned long long)s.host_parks, "deaths", (unsigned long long)s.deaths, "respawns",
                       (unsigned long long)s.respawns, "wakes", (unsigned long long)s.wakes, "name", name,
                       "functions_published", po->fn_published);
}

static PyObject *pool_spawn(PoolObject *po, PyObject *args) {
  Py_ssize_t nn = 1;
  if (!PyArg_ParseTuple(args, "|n:spawn", &nn)) return NULL;
  if (nn < 1 || nn > 1024) return PyErr_Format(PyExc_ValueError, "spawn: n must be in 1..1024 workers, got %zd", nn);
  int n = (int)nn;
  if (po->worker) return PyErr_Format(PyExc_RuntimeError, "spawn: only the host can grow its pool");
  if (sp_pool_check(po, "spawn") < 0 || sp_pool_lock(po) < 0) return NULL;
  suiro_status st;
  suiro_pool *p = po->p;
  Py_BEGIN_ALLOW_THREADS
  st = suiro_pool_spawn_workers(p, n);
  Py_END_ALLOW_THREADS
  sp_pool_unlock(po);
  if (st != SUIRO_OK) return raise_status(st, "spawn", NULL);
  Py_RETURN_NONE;
}

static PyObject *pool_retire(PoolObject *po, PyObject *args) {
  int slot;
  double timeout = 10;
  if (!PyArg_ParseTuple(args, "i|d:retire", &slot, &timeout)) return NULL;
  if (po->worker) return PyErr_Format(PyExc_RuntimeError, "retire: only the host can shrink its pool");
  if (sp_pool_check(po, "retire") < 0 || sp_pool_lock(po) < 0) return NULL;
  suiro_status st;
  suiro_pool *p = po->p;
  Py_BEGIN_ALLOW_THREADS
  st = suiro_pool_retire(p, slot, timeout);
  Py_END_ALLOW_THREADS
  sp_pool_unlock(po);
  if (st != SUIRO_OK) return raise_status(st, "retire", NULL);
  Py_RETURN_NONE;
}

/* The eventfd for event loops: arms it and returns it (-1 in a worker). */
static PyObject *pool_eventfd(PoolObject *po, PyObject *unused) {
  if (sp_pool_check(po, "eventfd") < 0) return NULL;
  if (po->worker) return PyLong_FromLong(-1);
  if (sp_pool_lock(po) < 0) return NULL;
  int fd = po->p ? suiro_pool_eventfd(po->p) : -1;
  sp_pool_unlock(po);
  return PyLong_FromLong(fd);
}

static PyObject *pool_event_ack(PoolObject *po, PyObject *unused) {
  if (!po->p || po->worker) Py_RETURN_NONE;
  if (sp_pool_lock(po) < 0) return NULL;
  if (po->p) suiro_pool_event_ack(po->p);
  sp_pool_unlock(po);
  Py_RETURN_NONE;
}

/* Tasks among `tasks` whose results are there (without collecting): indices. */
static PyObject *pool_ready(PoolObject *po, PyObject *tasks) {
  PyObject *seq = PySequence_Fast(tasks, "ready: a sequence of tasks");
  if (!seq) return NULL;
  PyObject *out = PyList_New(0);
  if (out && po->p && sp_pool_lock(po) == 0) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
      PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
      if (Py_TYPE(o) != &SpTask_Type) continue;
      TaskObject *k = (TaskObject *)o;
      if (k->state != 0 || (po->p && suiro_task_ready(po->p, k->t))) {
        PyObject *ix = PyLong_FromSsize_t(i);
        PyList_Append(out, ix);
        Py_XDECREF(ix);
      }
    }
    sp_pool_unlock(po);
  }
  Py_DECREF(seq);
  return out;
}

static PyObject *pool_get_closed(PoolObject *po, void *unused) { return PyBool_FromLong(po->p == NULL); }
static PyObject *pool_get_lang(PoolObject *po, void *unused) { return PyUnicode_FromString(sp_lang_name(po->lang)); }
static PyObject *pool_get_name(PoolObject *po, void *unused) {
  if (!po->p) Py_RETURN_NONE;
  return PyUnicode_FromString(suiro_pool_name(po->p));
}
static PyObject *pool_get_timeout(PoolObject *po, void *unused) {
  if (po->timeout < 0) Py_RETURN_NONE;
  return PyFloat_FromDouble(po->timeout);
}
static int pool_set_timeout(PoolObject *po, PyObject *v, void *unused) {
  double t = sp_timeout_arg(v, -1, "timeout");
  if (t == -2) return -1;
  po->timeout = t;
  return 0;
}
static PyObject *pool_get_is_worker(PoolObject *po, void *unused) { return PyBool_FromLong(po->worker); }

PyObject *sp_map_new(PoolObject *po, PyObject *args, PyObject *kw); /* map.c */

static PyMethodDef pool_methods[] = {
  { "submit", (PyCFunction)(void (*)(void))pool_submit, METH_FASTCALL | METH_KEYWORDS,
    "submit($self, fn, /, *args, **kwargs)\n--\n\nRun fn(*args, **kwargs) in a worker; returns a Task." },
  { "submit_batch", (PyCFunction)pool_submit_batch, METH_VARARGS, "submit_batch($self, fn, arglists, /)\n--\n\nOne task per argument list (a list of Task)." },
  { "collect_all", (PyCFunction)(void (*)(void))pool_collect_all, METH_VARARGS | METH_KEYWORDS,
    "collect_all($self, tasks, timeout=None)\n--\n\nThe tasks' values in input order." },
  { "collect_any", (PyCFunction)(void (*)(void))pool_collect_any, METH_VARARGS | METH_KEYWORDS,
    "collect_any($self, tasks, timeout=None)\n--\n\n(index, value) of the first task to finish." },
  { "status", (PyCFunction)pool_status, METH_NOARGS, "status($self, /)\n--\n\nWorkers and totals." },
  { "stop", (PyCFunction)(void (*)(void))pool_stop, METH_VARARGS | METH_KEYWORDS, "stop($self, /, timeout=None)\n--\n\nStop the workers." },
  { "spawn", (PyCFunction)pool_spawn, METH_VARARGS, "spawn($self, n=1, /)\n--\n\nStart more workers." },
  { "retire", (PyCFunction)pool_retire, METH_VARARGS, "retire($self, slot, timeout=10, /)\n--\n\nStop one worker." },
  { "_eventfd", (PyCFunction)pool_eventfd, METH_NOARGS, NULL },
  { "_event_ack", (PyCFunction)pool_event_ack, METH_NOARGS, NULL },
  { "_ready", (PyCFunction)pool_ready, METH_O, NULL },
  { "_map_new", (PyCFunction)(void (*)(void))sp_map_new, METH_VARARGS | METH_KEYWORDS, NULL },
  { NULL, NULL, 0, NULL },
};

static PyGetSetDef pool_getset[] = {
  { "closed", (getter)pool_get_closed, NULL, "True once stopped", NULL },
  { "lang", (getter)pool_get_lang, NULL, "the workers' language", NULL },
  { "name", (getter)pool_get_name, NULL, "the engine's name of the pool", NULL },
  { "timeout", (getter)pool_get_timeout, (setter)pool_set_timeout, "default wait for queue room", NULL },
  { "is_worker_handle", (getter)pool_get_is_worker, NULL, "a worker's own pool", NULL },
  { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject SpPool_Type = {
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "suiro._core.Pool",
  .tp_basicsize = sizeof(PoolObject),
  .tp_dealloc = (destructor)pool_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
  .tp_doc = "An engine pool (use suiro.pool()).",
  .tp_traverse = (traverseproc)pool_traverse,
  .tp_clear = (inquiry)pool_clear,
  .tp_weaklistoffset = offsetof(PoolObject, weakreflist),
  .tp_dictoffset = offsetof(PoolObject, dict),
  .tp_methods = pool_methods,
  .tp_getset = pool_getset,
  .tp_init = (initproc)pool_init,
  .tp_new = pool_new,
};

static PyMethodDef task_methods[] = {
  { "collect", (PyCFunction)(void (*)(void))task_collect, METH_FASTCALL | METH_KEYWORDS,
    "collect($self, /, timeout=None)\n--\n\nThe value, or raises the task's error (TimeoutError when not done)." },
  { "result", (PyCFunction)(void (*)(void))task_collect, METH_FASTCALL | METH_KEYWORDS, "result($self, /, timeout=None)\n--\n\nAlias of collect." },
  { "done", (PyCFunction)task_done, METH_NOARGS, "done($self, /)\n--\n\nTrue when the result is there." },
  { "cancel", (PyCFunction)task_cancel, METH_NOARGS, "cancel($self, /)\n--\n\nAdvisory: True when it will not start." },
  { "release", (PyCFunction)task_release, METH_NOARGS, "release($self, /)\n--\n\nGive up the result." },
  { "kill", (PyCFunction)task_kill, METH_NOARGS,
    "kill($self, /)\n--\n\nStop it for good: a running task's worker is killed and replaced; collect() then raises CancelledError." },
  { NULL, NULL, 0, NULL },
};

static PyGetSetDef task_getset[] = {
  { "pool", (getter)task_get_pool, NULL, "the task's pool", NULL },
  { "_handle", (getter)task_get_handle, NULL, NULL, NULL },
  { "_state", (getter)task_get_state, NULL, NULL, NULL },
  { "worker_slot", (getter)task_get_slot, NULL, "the slot of the worker that ran it (once collected)", NULL },
  { "worker_pid", (getter)task_get_pid, NULL, "the pid of the worker that ran it (once collected)", NULL },
  { NULL, NULL, NULL, NULL, NULL },
};

static PyAsyncMethods task_async = { (unaryfunc)task_await, NULL, NULL, NULL };

PyTypeObject SpTask_Type = {
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "suiro.Task",
  .tp_basicsize = sizeof(TaskObject),
  .tp_dealloc = (destructor)task_dealloc,
  .tp_as_async = &task_async,
  .tp_repr = (reprfunc)task_repr,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
  .tp_doc = "A task submitted to a pool.",
  .tp_traverse = (traverseproc)task_traverse,
  .tp_clear = (inquiry)task_clear,
  .tp_weaklistoffset = offsetof(TaskObject, weakreflist),
  .tp_methods = task_methods,
  .tp_getset = task_getset,
};

/* ---- the worker's own pool -------------------------------------------------------------------- */

static PyObject *current;

PyObject *sp_current_pool(void) {
  suiro_pool *p = suiro_current_pool();
  if (!p) Py_RETURN_NONE;
  if (current) return Py_NewRef(current);
  PyObject *m = PyImport_ImportModule("suiro");
  PyObject *cls = m ? PyObject_GetAttrString(m, "Pool") : NULL;
  Py_XDECREF(m);
  if (!cls) return NULL;
  PoolObject *po = (PoolObject *)pool_new((PyTypeObject *)cls, NULL, NULL);
  Py_DECREF(cls);
  if (!po) return NULL;
  po->p = p;
  po->owner = 0;
  po->worker = 1;
  po->lang = WIRE_LANG_PYTHON;
  current = (PyObject *)po;
  return Py_NewRef(current);
}
