/*
 * map.c — parallel maps (suiro_bind.h, section 6): the host stages a plan (function, input,
 * seed, template) with suiro_plan_create; runners in the workers claim ranges of elements and
 * write typed cells (suiro_cell_put_*, the range rules every face shares) or one encoded value
 * per element. Seeded maps set each element's random stream (suiro_plan_enter), which
 * suiro.random draws from, so results depend on the seed and the index only.
 *
 * Inputs: range -> RANGE; a 1-d numpy array of f64/f32/i64/i32/u8/bool, or a list of only ints
 * (only floats) -> ARRAY; anything else iterable -> VALUES (one wire buffer per element).
 * Results: template -> numpy array (n, or n x cell shape) or a suiro.Frame of columns (record);
 * no template -> a list of values.
 *
 * The host's Map object owns the engine map; every engine call on it holds the pool lock
 * (it collects the runner tasks through the pool handle).
 */
#include <math.h>
#include <string.h>

#include "suiro_py.h"

int sp_decode_task(const void *buf, size_t len, PyObject **fn, PyObject **args, PyObject **kwargs);

typedef struct MapObject {
  PyObject_HEAD
  PoolObject *pool;
  suiro_map *m;
  uint64_t n;
  int running;      /* a run is in flight */
  int finished;     /* the last run ended */
  int prepared;
  int cancelled;    /* cancel() was called during the run */
  int in_type;      /* ARRAY input type (prepared maps swap inputs of this type) */
  int in_kind;
  suiro_template tpl;
  int has_tpl;
  uint64_t width;
} MapObject;

/* ---- host: creating ---------------------------------------------------------------------------- */

static int array_input(PyObject *xs, Py_buffer *v, int *type) {
  if (!SP.ndarray || !PyObject_TypeCheck(xs, (PyTypeObject *)SP.ndarray)) return 0;
  if (PyObject_GetBuffer(xs, v, PyBUF_RECORDS_RO) < 0) {
    PyErr_Clear();
    return 0;
  }
  int t = 0;
  const char *f = v->format ? v->format : "B";
  if (*f == '=' || *f == '<' || *f == '@') f++;
  if (v->ndim == 1 && PyBuffer_IsContiguous(v, 'C') && f[0] && !f[1]) switch (f[0]) {
    case 'd': t = v->itemsize == 8 ? WIRE_T_F64 : 0; break;
    case 'f': t = v->itemsize == 4 ? WIRE_T_F32 : 0; break;
    case 'l': case 'q': t = v->itemsize == 8 ? WIRE_T_I64 : 0; break;
    case 'i': t = v->itemsize == 4 ? WIRE_T_I32 : 0; break;
    case 'B': t = WIRE_T_U8; break;
    case '?': t = WIRE_T_BOOL; break;
    }
  if (!t) {
    PyBuffer_Release(v);
    return 0;
  }
  *type = t;
  return 1;
}

/* The staged input (suiro_face.h section 7): element i of a list as a number, or encoded. */
typedef struct stage_ud {
  PyObject **items;
  sp_enc_opts *eo;
} stage_ud;

/* Elements i..i+count-1 as numbers: an int that fits in 64 bits is an i64, a float an f64; a
 * bool, a subclass or anything else is a value (stops the chunk). */
static uint64_t stage_num(void *ud, uint64_t i, uint64_t count, unsigned char *kinds, void *cells) {
  PyObject **x = ((stage_ud *)ud)->items + i;
  unsigned char *c = cells;
  for (uint64_t k = 0; k < count; k++) {
    PyObject *o = x[k];
    if (Py_TYPE(o) == &PyFloat_Type) {
      double v = PyFloat_AS_DOUBLE(o);
      memcpy(c + k * 8, &v, 8);
      kinds[k] = 'f';
    } else if (Py_TYPE(o) == &PyLong_Type) {
      int of;
      long long v = PyLong_AsLongLongAndOverflow(o, &of);
      if (of) return k;
      int64_t w = v;
      memcpy(c + k * 8, &w, 8);
      kinds[k] = 'i';
    } else {
      return k;
    }
  }
  return count;
}

static int stage_put(void *ud, uint64_t i, suiro_msg *m) {
  stage_ud *u = ud;
  return sp_encode_list(u->eo, u->items + i, 1, SP_SEG_ELEMENT, (Py_ssize_t)i, &m->w);
}

PyObject *sp_map_new(PoolObject *po, PyObject *args, PyObject *kw) {
  static char *kwl[] = { "fn", "xs", "template", "seed", "stream", "prepare", NULL };
  PyObject *fn, *xs, *tspec = Py_None, *seed = Py_None;
  int stream = 0, prepare = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOpp:map", kwl, &fn, &xs, &tspec, &seed, &stream, &prepare)) return NULL;
  if (sp_pool_check(po, "map") < 0) return NULL;
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  suiro_template tpl;
  if (tspec != Py_None) {
    if (sp_template(tspec, &tpl) < 0) return NULL;
    s.tpl = &tpl;
  }
  if (seed != Py_None) {
    if (!PyLong_Check(seed)) return PyErr_Format(PyExc_TypeError, "map: seed must be an int, got %s", Py_TYPE(seed)->tp_name);
    int of;
    long long v = PyLong_AsLongLongAndOverflow(seed, &of);
    if (of > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(seed);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "map: seed must fit in 64 bits, got %R", seed);
      }
      s.seed = u;
    } else if (of < 0) {
      return PyErr_Format(PyExc_ValueError, "map: seed must fit in 64 bits, got %R", seed);
    } else {
      s.seed = (uint64_t)v;
    }
    s.seeded = 1;
  }
  s.stream = stream;
  /* the function */
  _Alignas(8) unsigned char fstack[512];
  suiro_msg g;
  suiro_msg_init(&g, fstack, sizeof fstack);
  sp_enc_opts o = { "map", po->lang != WIRE_LANG_PYTHON, sp_lang_name(po->lang),
                    po->lang == WIRE_LANG_LUA ? "lua workers" : po->lang == WIRE_LANG_R ? "r workers" : "python workers",
                    1, po, &g };
  const void *fbuf;
  size_t flen;
  if (sp_encode_fn_list(&o, fn, &g.w) < 0 || wire_writer_finish(&g.w, &fbuf, &flen) != WIRE_OK) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "map: %s", wire_writer_error(&g.w));
    wire_writer_free(&g.w);
    suiro_msg_free(&g);
    return NULL;
  }
  s.fn = fbuf;
  s.fn_len = flen;
  /* the input */
  Py_buffer view;
  int have_view = 0, type = 0;
  suiro_stage stage;
  suiro_stage_init(&stage);
  stage.origin = 0;
  PyObject *seq = NULL;
  PyObject *res = NULL;
  if (PyRange_Check(xs)) {
    PyObject *start = PyObject_GetAttrString(xs, "start"), *step = start ? PyObject_GetAttrString(xs, "step") : NULL;
    Py_ssize_t n = step ? PyObject_Length(xs) : -1;
    int of1 = 1, of2 = 1;
    long long a = start ? PyLong_AsLongLongAndOverflow(start, &of1) : 0, st = step ? PyLong_AsLongLongAndOverflow(step, &of2) : 0;
    Py_XDECREF(start);
    Py_XDECREF(step);
    if (n < 0 || of1 || of2) {
      PyErr_Clear();
      PyErr_SetString(PyExc_ValueError, "map: argument 2: the range leaves the 64-bit integers");
      goto out;
    }
    s.in_kind = SUIRO_IN_RANGE;
    s.start = a;
    s.step = st;
    s.n = (uint64_t)n;
  } else if (array_input(xs, &view, &type)) {
    have_view = 1;
    s.in_kind = SUIRO_IN_ARRAY;
    s.in_type = type;
    s.in_data = view.buf;
    s.n = (uint64_t)(view.len / view.itemsize);
  } else {
    seq = PySequence_Fast(xs, "map: argument 2 must be a range, a numpy array or an iterable of values");
    if (!seq) goto out;
    sp_enc_opts eo = o;
    eo.verb = "map: argument 2";
    eo.zero_copy = 0;
    eo.grants = NULL;
    stage_ud u = { PySequence_Fast_ITEMS(seq), &eo };
    uint64_t n = (uint64_t)PySequence_Fast_GET_SIZE(seq);
    int k = suiro_stage_numbers(&stage, &s, n, stage_num, &u);
    if (k == 0 && suiro_stage_values(&stage, &s, n, stage_put, &u) != SUIRO_OK) k = -1;
    if (k < 0) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "map: argument 2: %s", suiro_last_error());
      goto out;
    }
  }
  MapObject *mo = PyObject_New(MapObject, &SpMap_Type);
  if (!mo) goto out;
  mo->pool = (PoolObject *)Py_NewRef(po);
  mo->m = NULL;
  mo->n = s.n;
  mo->running = mo->finished = 0;
  mo->prepared = prepare;
  mo->cancelled = 0;
  mo->in_kind = s.in_kind;
  mo->in_type = s.in_type;
  mo->has_tpl = s.tpl != NULL;
  if (s.tpl) mo->tpl = tpl;
  mo->width = 1;
  if (s.tpl && suiro_template_check(s.tpl, &mo->width, NULL, 0) != 0) mo->width = 1;
  if (sp_pool_lock(po) < 0) {
    Py_DECREF(mo);
    goto out;
  }
  suiro_status st = po->p ? suiro_plan_create(po->p, &s, &mo->m) : SP_CLOSED;
  if (st == SUIRO_OK && !prepare) {
    st = suiro_map_start(mo->m, po->timeout);
    if (st == SUIRO_OK) mo->running = 1;
  }
  sp_pool_unlock(po);
  if (st != SUIRO_OK) {
    const char *msg = suiro_last_error();
    PyErr_Format(st == SUIRO_ERR ? PyExc_ValueError : PyExc_RuntimeError, strncmp(msg, "map:", 4) ? "map: %s" : "%s", msg);
    Py_DECREF(mo);
    goto out;
  }
  suiro_msg_sent(&g);
  res = (PyObject *)mo;
out:
  if (!res) suiro_msg_free(&g);
  wire_writer_free(&g.w);
  if (have_view) PyBuffer_Release(&view);
  suiro_stage_free(&stage);
  Py_XDECREF(seq);
  return res;
}

/* ---- host: running and results -------------------------------------------------------------------- */

static suiro_status step_map(void *ctx, double slice) {
  MapObject *mo = ctx;
  if (!mo->m) return SP_CLOSED; /* freed by another thread meanwhile (the caller checks) */
  return suiro_map_wait(mo->m, slice);
}

/* Seconds a cancelled run's elements in flight get before the workers running them are killed
 * (an element stuck in a loop never looks at the cancel flag). */
#define SP_MAP_GRACE 1.0

/* Ends a run still going (a map freed mid-run): cancelled; elements in flight get SP_MAP_GRACE s,
 * then the workers running them are killed and replaced. Lock held (released while waiting).
 * Returns -1 when a signal handler raised meanwhile (the run is killed all the same). */
static int end_run(MapObject *mo) {
  PoolObject *po = mo->pool;
  if (!mo->running || !mo->m || !po->p) return 0;
  suiro_map_cancel(mo->m);
  mo->cancelled = 1;
  int err = 0;
  int st = sp_wait(po, SP_MAP_GRACE, step_map, mo);
  if (st < 0) err = -1;
  if (st != SUIRO_OK && mo->m && po->p && !po->worker && suiro_map_kill(mo->m) == SUIRO_OK) {
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    st = sp_wait(po, 30, step_map, mo);
    if (st < 0) PyErr_Clear();
    PyErr_Restore(et, ev, etb);
  }
  if (st == SUIRO_OK) {
    mo->running = 0;
    mo->finished = 1;
  }
  return err;
}

static int check_map(MapObject *mo, const char *verb) {
  if (!mo->m) return PyErr_Format(PyExc_RuntimeError, "%s: this map was freed", verb), -1;
  return sp_pool_check(mo->pool, verb);
}

/* _wait(timeout) -> True when the run ended, False on timeout (still running). */
static PyObject *map_wait(MapObject *mo, PyObject *args) {
  PyObject *to = NULL;
  if (!PyArg_ParseTuple(args, "|O", &to)) return NULL;
  double timeout = sp_timeout_arg(to, -1, "map");
  if (timeout == -2) return NULL;
  if (!mo->running) Py_RETURN_TRUE;
  if (check_map(mo, "map") < 0 || sp_pool_lock(mo->pool) < 0) return NULL;
  int st = mo->pool->p && mo->m ? sp_wait(mo->pool, timeout, step_map, mo) : SP_CLOSED;
  sp_pool_unlock(mo->pool);
  if (st < 0) return NULL;
  if (!mo->m) return PyErr_Format(PyExc_RuntimeError, "map: this map was freed");
  if (st == SUIRO_CLOSED) {
    const char *why = sp_closed_by_face ? "the pool was stopped" : suiro_last_error();
    sp_closed_by_face = 0;
    return sp_pool_check(mo->pool, "map") < 0 ? NULL : PyErr_Format(PyExc_RuntimeError, "map: %s", why);
  }
  if (st == SUIRO_OK) {
    mo->running = 0;
    mo->finished = 1;
    Py_RETURN_TRUE;
  }
  if (st == SUIRO_TIMEOUT) Py_RETURN_FALSE;
  return PyErr_Format(PyExc_RuntimeError, "map: %s", suiro_last_error());
}

static PyObject *map_kill(MapObject *mo, PyObject *unused) {
  if (!mo->m || !mo->running) Py_RETURN_NONE;
  if (mo->pool->worker) return PyErr_Format(PyExc_RuntimeError, "kill: only the host can kill a map's workers");
  if (sp_pool_lock(mo->pool) < 0) return NULL;
  suiro_status st = mo->pool->p && mo->m ? suiro_map_kill(mo->m) : SP_CLOSED; /* m: freed meanwhile? */
  sp_pool_unlock(mo->pool);
  mo->cancelled = 1;
  if (st != SUIRO_OK && st != SUIRO_CLOSED) return PyErr_Format(PyExc_RuntimeError, "kill: %s", suiro_last_error());
  Py_RETURN_NONE;
}

static PyObject *map_done(MapObject *mo, PyObject *unused) {
  if (!mo->m) return PyLong_FromUnsignedLongLong(mo->n);
  return PyLong_FromUnsignedLongLong(suiro_map_done(mo->m));
}

static PyObject *map_cancel(MapObject *mo, PyObject *unused) {
  if (mo->m && mo->running && mo->pool->p) {
    suiro_map_cancel(mo->m);
    mo->cancelled = 1;
  }
  Py_RETURN_NONE;
}

/* Raises the run's failure, if any (1), else 0. */
static int raise_map_failure(MapObject *mo) {
  suiro_error_info e;
  if (!suiro_map_failure(mo->m, &e)) return 0;
  int kind = SUIRO_RESULT_ERROR;
  if (e.cls.len == 11 && !memcmp(e.cls.ptr, SUIRO_CLASS_WORKER_DIED, 11)) kind = SUIRO_RESULT_DIED;
  else if (e.cls.len == 9 && !memcmp(e.cls.ptr, SUIRO_CLASS_CANCELLED, 9)) kind = SUIRO_RESULT_CANCELLED;
  PyObject *exc = PyObject_CallFunction(SP.make_failure, "is#s#s#Liii", kind, e.cls.ptr, (Py_ssize_t)e.cls.len, e.message.ptr,
                                        (Py_ssize_t)e.message.len, e.traceback.ptr, (Py_ssize_t)e.traceback.len,
                                        (long long)e.index, e.slot, e.pid, mo->pool->lang == WIRE_LANG_PYTHON);
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return 1;
}


static PyObject *cell_value(int type, const void *p) {
  switch (type) {
  case WIRE_T_F64: { double v; memcpy(&v, p, 8); return PyFloat_FromDouble(v); }
  case WIRE_T_F32: { float v; memcpy(&v, p, 4); return PyFloat_FromDouble(v); }
  case WIRE_T_I64: { int64_t v; memcpy(&v, p, 8); return PyLong_FromLongLong(v); }
  case WIRE_T_I32: { int32_t v; memcpy(&v, p, 4); return PyLong_FromLong(v); }
  case WIRE_T_U8: return PyLong_FromLong(*(const uint8_t *)p);
  case WIRE_T_BOOL: {
    uint8_t v = *(const uint8_t *)p;
    if (v == WIRE_NA_BOOL) return Py_NewRef(SP.NA);
    return PyBool_FromLong(v);
  }
  }
  Py_RETURN_NONE;
}

static PyObject *element(MapObject *mo, uint64_t i) {
  const suiro_plan *pl = suiro_plan_of(mo->m);
  if (!pl) return PyErr_Format(PyExc_RuntimeError, "map: %s", suiro_last_error());
  void *outp = suiro_map_output(mo->m);
  if (!mo->has_tpl) {
    const void *data;
    size_t len;
    if (!suiro_map_result(mo->m, i, &data, &len)) Py_RETURN_NONE;
    PyObject *l = sp_decode_list(data, len, sp_result_trust(mo->pool), NULL);
    if (!l) return NULL;
    PyObject *v = PyList_GET_SIZE(l) ? Py_NewRef(PyList_GET_ITEM(l, 0)) : Py_NewRef(Py_None);
    Py_DECREF(l);
    return v;
  }
  int type;
  if (mo->tpl.kind == SUIRO_OUT_RECORD) {
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < mo->tpl.nfields; k++) {
      void *cell = suiro_plan_cell(pl, outp, i, k, &type);
      PyObject *v = cell_value(type, cell);
      if (!v || PyDict_SetItemString(d, mo->tpl.fields[k].name, v) < 0) {
        Py_XDECREF(v);
        Py_CLEAR(d);
        break;
      }
      Py_DECREF(v);
    }
    return d;
  }
  void *cell = suiro_plan_cell(pl, outp, i, 0, &type);
  if (mo->tpl.kind == SUIRO_OUT_SCALAR) return cell_value(type, cell);
  uint64_t dims[SUIRO_TEMPLATE_MAX_NDIM];
  for (int k = 0; k < mo->tpl.ndim; k++) dims[k] = mo->tpl.shape[k];
  return sp_array_from(type, cell, mo->width, mo->tpl.ndim, dims);
}

static PyObject *map_element(MapObject *mo, PyObject *arg) {
  unsigned long long i = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  if (check_map(mo, "map") < 0) return NULL;
  if (i >= mo->n) return PyErr_Format(PyExc_IndexError, "map: element %llu of %llu", i, (unsigned long long)mo->n);
  return element(mo, i);
}

/* _results() -> the run's results (raises its failure). */
static PyObject *map_results(MapObject *mo, PyObject *unused) {
  if (check_map(mo, "map") < 0) return NULL;
  if (mo->running) return PyErr_Format(PyExc_RuntimeError, "map: still running");
  if (!mo->finished) return PyErr_Format(PyExc_RuntimeError, "map: not run yet (prepared maps: run())");
  if (raise_map_failure(mo)) return NULL;
  if (mo->cancelled && suiro_map_done(mo->m) < mo->n) {
    PyObject *cls = PyObject_GetAttrString(PyImport_AddModule("suiro._errors"), "CancelledError");
    if (cls) {
      PyErr_Format(cls, "map: cancelled after %llu of %llu elements", (unsigned long long)suiro_map_done(mo->m),
                   (unsigned long long)mo->n);
      Py_DECREF(cls);
    }
    return NULL;
  }
  const suiro_plan *pl = suiro_plan_of(mo->m);
  if (!pl) return PyErr_Format(PyExc_RuntimeError, "map: %s", suiro_last_error());
  void *outp = suiro_map_output(mo->m);
  if (!mo->has_tpl) {
    PyObject *l = PyList_New((Py_ssize_t)mo->n);
    for (uint64_t i = 0; l && i < mo->n; i++) {
      PyObject *v = element(mo, i);
      if (!v) {
        Py_CLEAR(l);
        break;
      }
      PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
  }
  if (mo->tpl.kind == SUIRO_OUT_RECORD) {
    PyObject *names = PyList_New(mo->tpl.nfields), *cols = PyList_New(mo->tpl.nfields);
    for (int k = 0; names && cols && k < mo->tpl.nfields; k++) {
      uint64_t count;
      const void *col = suiro_plan_column(pl, outp, k, &count);
      PyObject *a = sp_array_from(mo->tpl.fields[k].type, col, count, 1, &count);
      if (!a) {
        Py_CLEAR(names);
        break;
      }
      PyList_SET_ITEM(names, k, PyUnicode_FromString(mo->tpl.fields[k].name));
      PyList_SET_ITEM(cols, k, a);
    }
    PyObject *f = names && cols ? PyObject_CallFunction(SP.make_frame, "OOK", names, cols, (unsigned long long)mo->n) : NULL;
    Py_XDECREF(names);
    Py_XDECREF(cols);
    return f;
  }
  uint64_t count;
  const void *col = suiro_plan_column(pl, outp, 0, &count);
  if (mo->tpl.kind == SUIRO_OUT_SCALAR) return sp_array_from(mo->tpl.type, col, count, 1, &count);
  uint64_t dims[SUIRO_TEMPLATE_MAX_NDIM + 1];
  dims[0] = mo->n;
  for (int k = 0; k < mo->tpl.ndim; k++) dims[k + 1] = mo->tpl.shape[k];
  return sp_array_from(mo->tpl.type, col, count, mo->tpl.ndim + 1, dims);
}

/* _next_range() -> (begin, end) of finished elements (streaming), or None. */
static PyObject *map_next_range(MapObject *mo, PyObject *unused) {
  if (check_map(mo, "map") < 0) return NULL;
  uint64_t b, e;
  if (!suiro_map_next_range(mo->m, &b, &e)) Py_RETURN_NONE;
  return Py_BuildValue("(KK)", (unsigned long long)b, (unsigned long long)e);
}

/* _start(new_xs=None): runs a prepared map (again), optionally over a new input of the same
 * type and length (an array input only). */
static PyObject *map_start(MapObject *mo, PyObject *args) {
  PyObject *xs = Py_None;
  if (!PyArg_ParseTuple(args, "|O", &xs)) return NULL;
  if (check_map(mo, "run") < 0) return NULL;
  if (mo->running) return PyErr_Format(PyExc_RuntimeError, "run: the map is still running");
  if (xs != Py_None) {
    const suiro_plan *pl = suiro_plan_of(mo->m);
    void *dst = pl ? suiro_plan_in_data(pl) : NULL;
    Py_buffer v;
    int type = 0, have_view = 0;
    PyObject *seq = NULL;
    const void *src = NULL;
    uint64_t n = 0;
    suiro_stage stage;
    suiro_stage_init(&stage);
    if (array_input(xs, &v, &type)) {
      have_view = 1;
      src = v.buf;
      n = (uint64_t)(v.len / v.itemsize);
    } else if ((seq = PySequence_Fast(xs, "run: new input")) != NULL) {
      suiro_plan_spec ns;
      suiro_plan_spec_init(&ns);
      stage_ud u = { PySequence_Fast_ITEMS(seq), NULL };
      n = (uint64_t)PySequence_Fast_GET_SIZE(seq);
      if (suiro_stage_numbers(&stage, &ns, n, stage_num, &u) == 1) {
        src = ns.in_data;
        type = ns.in_type;
      }
    }
    int ok = dst && src && type == mo->in_type && n == mo->n && mo->in_kind == SUIRO_IN_ARRAY;
    if (ok) memcpy(dst, src, (size_t)n * wire_type_size(type));
    if (have_view) PyBuffer_Release(&v);
    suiro_stage_free(&stage);
    Py_XDECREF(seq);
    PyErr_Clear();
    if (!ok)
      return PyErr_Format(PyExc_ValueError,
                          "run: a prepared map takes a new input of the same type and length as the first (%llu %s "
                          "numbers); prepare another map for other inputs",
                          (unsigned long long)mo->n, mo->in_kind == SUIRO_IN_ARRAY ? wire_type_name(mo->in_type) : "staged");
  }
  if (sp_pool_lock(mo->pool) < 0) return NULL;
  suiro_status st = mo->pool->p ? suiro_map_start(mo->m, mo->pool->timeout) : SP_CLOSED;
  sp_pool_unlock(mo->pool);
  if (st != SUIRO_OK) return PyErr_Format(PyExc_RuntimeError, "run: %s", suiro_last_error());
  mo->running = 1;
  mo->finished = 0;
  mo->cancelled = 0;
  Py_RETURN_NONE;
}

static PyObject *map_free(MapObject *mo, PyObject *unused) {
  if (!mo->m) Py_RETURN_NONE;
  PoolObject *po = mo->pool;
  suiro_map *m = mo->m;
  if (!po->p) { /* the pool stopped: its maps went with it */
    mo->m = NULL;
    Py_RETURN_NONE;
  }
  if (po->worker) {
    mo->m = NULL;
    suiro_map_free(m);
    Py_RETURN_NONE;
  }
  if (sp_pool_lock(po) < 0) return NULL;
  int err = end_run(mo); /* a run still going: cancelled, then killed after a grace */
  m = mo->m;
  mo->m = NULL;
  if (po->p && m) {
    Py_BEGIN_ALLOW_THREADS /* it may wait for runners to finish */
    suiro_map_free(m);
    Py_END_ALLOW_THREADS
  }
  sp_pool_unlock(po);
  if (err < 0) return NULL;
  Py_RETURN_NONE;
}

static void map_dealloc(MapObject *mo) {
  if (mo->m && mo->pool && mo->pool->p) {
    if (mo->pool->worker) {
      suiro_map_free(mo->m);
    } else if (mo->pool->locked == 0 && sp_pool_lock(mo->pool) == 0) {
      PyObject *et, *ev, *etb;
      PyErr_Fetch(&et, &ev, &etb);
      if (end_run(mo) < 0) PyErr_Clear(); /* a run still going: cancelled, then killed after a grace */
      PyErr_Restore(et, ev, etb);
      suiro_map *m = mo->m;
      mo->m = NULL;
      if (m && mo->pool->p) {
        Py_BEGIN_ALLOW_THREADS
        suiro_map_free(m);
        Py_END_ALLOW_THREADS
      }
      sp_pool_unlock(mo->pool);
    } else {
      /* the pool is busy in this or another thread: cancel, and let the pool's stop free it */
      suiro_map_cancel(mo->m);
    }
  }
  mo->m = NULL;
  Py_CLEAR(mo->pool);
  PyObject_Free(mo);
}

static PyObject *map_get_n(MapObject *mo, void *unused) { return PyLong_FromUnsignedLongLong(mo->n); }
static PyObject *map_get_running(MapObject *mo, void *unused) { return PyBool_FromLong(mo->running); }
static PyObject *map_get_finished(MapObject *mo, void *unused) { return PyBool_FromLong(mo->finished); }
static PyObject *map_get_pool(MapObject *mo, void *unused) { return Py_NewRef((PyObject *)mo->pool); }

static PyMethodDef map_methods[] = {
  { "_wait", (PyCFunction)map_wait, METH_VARARGS, NULL },
  { "_done", (PyCFunction)map_done, METH_NOARGS, NULL },
  { "_results", (PyCFunction)map_results, METH_NOARGS, NULL },
  { "_element", (PyCFunction)map_element, METH_O, NULL },
  { "_next_range", (PyCFunction)map_next_range, METH_NOARGS, NULL },
  { "_start", (PyCFunction)map_start, METH_VARARGS, NULL },
  { "_free", (PyCFunction)map_free, METH_NOARGS, NULL },
  { "cancel", (PyCFunction)map_cancel, METH_NOARGS, "cancel($self, /)\n--\n\nStop the run (elements in flight finish)." },
  { "kill", (PyCFunction)map_kill, METH_NOARGS, "kill($self, /)\n--\n\nKill the workers running the map (they are replaced)." },
  { NULL, NULL, 0, NULL },
};

static PyGetSetDef map_getset[] = {
  { "n", (getter)map_get_n, NULL, "elements", NULL },
  { "running", (getter)map_get_running, NULL, NULL, NULL },
  { "finished", (getter)map_get_finished, NULL, NULL, NULL },
  { "pool", (getter)map_get_pool, NULL, NULL, NULL },
  { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject SpMap_Type = {
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "suiro._core.Map",
  .tp_basicsize = sizeof(MapObject),
  .tp_dealloc = (destructor)map_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "An engine map (use pool.map()).",
  .tp_methods = map_methods,
  .tp_getset = map_getset,
};

/* ---- worker: the runner ---------------------------------------------------------------------- */

static int put_cell(void *cell, int type, PyObject *v, char *err, size_t cap) {
  if (Py_TYPE(v) == &PyFloat_Type) {
    if (type == WIRE_T_F64) return memcpy(cell, &((PyFloatObject *)v)->ob_fval, 8), 0;
    return suiro_cell_put_real(cell, type, PyFloat_AS_DOUBLE(v), err, cap);
  }
  if (v == Py_True || v == Py_False) return suiro_cell_put_bool(cell, type, v == Py_True, err, cap);
  if (PyLong_Check(v)) {
    int of;
    long long x = PyLong_AsLongLongAndOverflow(v, &of);
    if (of) return snprintf(err, cap, "template %s cannot hold %s", wire_type_name(type), "an int beyond 64 bits"), -1;
    return suiro_cell_put_int(cell, type, x, err, cap);
  }
  if (PyFloat_Check(v)) return suiro_cell_put_real(cell, type, PyFloat_AS_DOUBLE(v), err, cap);
  if (v == Py_None || v == SP.NA) return suiro_cell_put_na(cell, type, err, cap);
  if (!SP.ndarray && PyDict_GetItemString(PyImport_GetModuleDict(), "numpy") && sp_numpy() < 0) PyErr_Clear();
  if (SP.np_bool && Py_TYPE(v) == (PyTypeObject *)SP.np_bool) return suiro_cell_put_bool(cell, type, PyObject_IsTrue(v), err, cap);
  if (SP.np_generic && PyObject_TypeCheck(v, (PyTypeObject *)SP.np_generic)) {
    PyObject *py = PyObject_CallMethod(v, "item", NULL);
    if (!py) return PyErr_Clear(), snprintf(err, cap, "template %s cannot hold a %s", wire_type_name(type), Py_TYPE(v)->tp_name), -1;
    int rc = (PyLong_Check(py) || PyFloat_Check(py) || PyBool_Check(py)) ? put_cell(cell, type, py, err, cap)
             : (snprintf(err, cap, "template %s cannot hold a %s", wire_type_name(type), Py_TYPE(v)->tp_name), -1);
    Py_DECREF(py);
    return rc;
  }
  snprintf(err, cap, "template %s cannot hold a %s", wire_type_name(type), Py_TYPE(v)->tp_name);
  return -1;
}

/* Stores element i's result r under the template; raises (returns -1) on a mismatch. */
static int store(const suiro_plan *pl, const suiro_template *t, uint64_t width, void *outp, uint64_t i, PyObject *r) {
  char err[320];
  int type;
  if (t->kind == SUIRO_OUT_SCALAR) {
    void *cell = suiro_plan_cell(pl, outp, i, 0, &type);
    if (put_cell(cell, type, r, err, sizeof err) < 0) goto bad;
    return 0;
  }
  if (t->kind == SUIRO_OUT_ARRAY) {
    char *cell = suiro_plan_cell(pl, outp, i, 0, &type);
    size_t es = wire_type_size(type);
    Py_buffer v;
    if (SP.ndarray && PyObject_TypeCheck(r, (PyTypeObject *)SP.ndarray) && PyObject_GetBuffer(r, &v, PyBUF_RECORDS_RO) == 0) {
      int same = (uint64_t)(v.len / (v.itemsize ? v.itemsize : 1)) == width && PyBuffer_IsContiguous(&v, 'C') &&
                 (size_t)v.itemsize == es;
      const char *f = v.format ? v.format : "B";
      if (*f == '<' || *f == '=' || *f == '@') f++;
      static const char fmts[] = " dfqiB?";
      int t2 = 0;
      for (int k = 1; k <= 6; k++) if (f[0] == fmts[k] || (k == 3 && f[0] == 'l')) t2 = k;
      if (same && t2 == type && !f[1]) {
        memcpy(cell, v.buf, (size_t)v.len);
        PyBuffer_Release(&v);
        return 0;
      }
      PyBuffer_Release(&v);
    } else {
      PyErr_Clear();
    }
    PyObject *flat = r;
    Py_INCREF(flat);
    if (SP.ndarray && PyObject_TypeCheck(r, (PyTypeObject *)SP.ndarray)) Py_SETREF(flat, PyObject_CallMethod(r, "ravel", NULL));
    PyObject *seq = flat ? PySequence_Fast(flat, "") : NULL;
    Py_XDECREF(flat);
    if (!seq) {
      PyErr_Clear();
      snprintf(err, sizeof err, "template wants %llu values, got a %s", (unsigned long long)width, Py_TYPE(r)->tp_name);
      goto bad;
    }
    if ((uint64_t)PySequence_Fast_GET_SIZE(seq) != width) {
      snprintf(err, sizeof err, "template wants %llu values, got %zd", (unsigned long long)width, PySequence_Fast_GET_SIZE(seq));
      Py_DECREF(seq);
      goto bad;
    }
    for (uint64_t k = 0; k < width; k++)
      if (put_cell(cell + k * es, type, PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)k), err, sizeof err) < 0) {
        Py_DECREF(seq);
        goto bad;
      }
    Py_DECREF(seq);
    return 0;
  }
  /* record: a dict (or mapping) with the fields */
  if (!PyDict_Check(r) && !PyMapping_Check(r)) {
    snprintf(err, sizeof err, "a record template wants a dict, got %s", Py_TYPE(r)->tp_name);
    goto bad;
  }
  for (int k = 0; k < t->nfields; k++) {
    void *cell = suiro_plan_cell(pl, outp, i, k, &type);
    PyObject *v = PyDict_Check(r) ? Py_XNewRef(PyDict_GetItemString(r, t->fields[k].name))
                                  : PyMapping_GetItemString(r, t->fields[k].name);
    if (!v) {
      PyErr_Clear();
      snprintf(err, sizeof err, "template field \"%s\" is missing from the result", t->fields[k].name);
      goto bad;
    }
    char e2[200];
    int rc = put_cell(cell, type, v, e2, sizeof e2);
    Py_DECREF(v);
    if (rc < 0) {
      snprintf(err, sizeof err, "template field \"%s\": %s", t->fields[k].name, e2);
      goto bad;
    }
  }
  return 0;
bad:
  PyErr_Format(PyExc_ValueError, "element %llu: %s", (unsigned long long)i, err);
  return -1;
}

static PyObject *elem_value(const suiro_elem *e) {
  switch (e->kind) {
  case 'i': return PyLong_FromLongLong(e->i);
  case 'f': return PyFloat_FromDouble(e->f);
  case 'b': return e->i == WIRE_NA_BOOL ? Py_NewRef(SP.NA) : PyBool_FromLong((long)e->i);
  default: {
    PyObject *l = sp_decode_list(e->buf, e->len, SP_DEC_TRUSTED, NULL); /* an element from this worker's host */
    if (!l) return NULL;
    if (PyList_GET_SIZE(l) != 1) {
      Py_DECREF(l);
      PyErr_SetString(PyExc_ValueError, "map: malformed element");
      return NULL;
    }
    PyObject *v = Py_NewRef(PyList_GET_ITEM(l, 0));
    Py_DECREF(l);
    return v;
  }
  }
}

/* The runner's side (suiro_run_map, engine/src/runner.c): the engine claims, completes, cancels,
 * reports failures and detaches; this face builds the function, calls it on the elements of a
 * claimed range and stores the results. Python raises by returning -1 with the exception set. */
typedef struct prun {
  PyObject *fn, *fargs, *fkw;
  PyObject *hold; /* what fail lent */
} prun;

static int prun_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  (void)ud;
  return body(ctx);
}

static int prun_prepare(void *ud, suiro_runner *r) {
  prun *u = ud;
  const void *fbuf;
  size_t flen;
  suiro_plan_fn(r->plan, &fbuf, &flen);
  if (sp_decode_task(fbuf, flen, &u->fn, &u->fargs, &u->fkw) < 0) return -1;
  if (SP.Call && Py_TYPE(u->fn) == (PyTypeObject *)SP.Call) { /* a call spec: its target, element first */
    PyObject *m2 = PyImport_ImportModule("suiro._values");
    PyObject *h = m2 ? PyObject_GetAttrString(m2, "call_target") : NULL;
    Py_XDECREF(m2);
    PyObject *f2 = h ? PyObject_CallOneArg(h, u->fn) : NULL;
    Py_XDECREF(h);
    Py_SETREF(u->fn, f2);
    if (!u->fn) return -1;
  }
  return 0;
}

static int prun_range(void *ud, suiro_runner *r, uint64_t b, uint64_t e) {
  (void)b, (void)e;
  PyObject *fn = ((prun *)ud)->fn;
  suiro_elem el;
  int k;
  while ((k = suiro_runner_next(r, &el)) > 0) {
    uint64_t i = r->current;
    PyObject *x = elem_value(&el);
    if (!x) return -1;
    PyObject *res = PyObject_CallOneArg(fn, x);
    Py_DECREF(x);
    if (!res) return -1;
    int rc = 0;
    if (r->tpl) {
      rc = store(r->plan, r->tpl, r->width, r->out, i, res);
    } else {
      suiro_msg *m = suiro_runner_msg(r);
      sp_enc_opts o = { "map: element result", sp_host_foreign, sp_host_lang, sp_host_dest, 0, NULL, NULL };
      if (sp_encode_list(&o, &res, 1, SP_SEG_ELEMENT, (Py_ssize_t)i, suiro_msg_writer(m)) < 0) rc = -1;
      else if (suiro_runner_put(r) != 0) rc = -1, PyErr_SetString(PyExc_ValueError, suiro_last_error());
    }
    Py_DECREF(res);
    if (rc < 0) return -1;
  }
  if (k < 0) return PyErr_Format(PyExc_ValueError, "map: %s", suiro_last_error()), -1;
  return 0;
}

/* The pending exception as the map's error (cancels the rest). */
static void prun_fail(void *ud, suiro_runner *r, suiro_wire_str *cls, suiro_wire_str *msg, suiro_wire_str *tb) {
  (void)r;
  sp_take_exception(cls, msg, tb, &((prun *)ud)->hold);
}

static void prun_done(void *ud) { Py_CLEAR(((prun *)ud)->hold); }

static const suiro_runner_ops prun_ops = { prun_protect, prun_prepare, prun_range, prun_fail, prun_done };

int sp_run_map(const void *arg, size_t len, suiro_out *out) {
  prun u = { NULL, NULL, NULL, NULL };
  int rc = suiro_run_map(arg, len, out, &prun_ops, &u);
  Py_XDECREF(u.fn);
  Py_XDECREF(u.fargs);
  Py_XDECREF(u.fkw);
  return rc;
}

/* The engine map of a Map object (cluster.c stages cluster maps through _map_new), or NULL. */
suiro_map *sp_map_engine(PyObject *o) {
  return PyObject_TypeCheck(o, &SpMap_Type) ? ((MapObject *)o)->m : NULL;
}
