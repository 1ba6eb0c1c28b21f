/*
 * func.c — function identity and its caches: what a callable is on the wire (a name, or a key of
 * its code in the pool's blob store), each pool's caches of those (fn_cache, code_plans: plans of
 * functions sent by value), the classes sent by key (_values reaches the engine's content key and
 * a worker's code cache through the four functions installed here), and on the worker's side the
 * names resolved once, the code fetched by key once (suiro_exec's cache) and the functions built
 * from a plan's template with what the task captured.
 *
 * enc.c writes the function item with these; dec.c reads it with them.
 *
 * Ownership and the GIL: called with the GIL held, which guards the caches (a pool's live in its
 * PoolObject; a submit encodes before it takes the pool lock). The caches hold strong references;
 * the helpers of suiro._values are looked up once and kept.
 */
#include <stdlib.h>
#include <string.h>

#include "suiro_py.h"

/* ---- classes sent by key --------------------------------------------------------------------- */

/* Classes sent by key (_values, "classes sent by value, once per pool"): _values reaches the
 * engine's content key and (in a worker) the code cache by key through these two, installed in
 * the module when func.c first looks it up (sp_values_module). */
static PyObject *m_fn_key(PyObject *self, PyObject *b) {
  (void)self;
  if (!PyBytes_Check(b)) return PyErr_Format(PyExc_TypeError, "_fn_key: bytes expected");
  return PyLong_FromUnsignedLongLong(suiro_fn_key(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b)));
}

static PyObject *m_fetch_class(PyObject *self, PyObject *k) {
  (void)self;
  unsigned long long key = PyLong_AsUnsignedLongLong(k);
  if (PyErr_Occurred()) return NULL;
  if (!sp_in_worker)
    return PyErr_Format(PyExc_LookupError, "a class sent by key %#llx is not known in this process", key);
  return sp_function_from_key((uint64_t)key);
}

/* the bytes stored under a key in the pool this worker serves */
static PyObject *m_fetch_blob(PyObject *self, PyObject *k) {
  (void)self;
  unsigned long long key = PyLong_AsUnsignedLongLong(k);
  if (PyErr_Occurred()) return NULL;
  suiro_pool *p = sp_in_worker ? suiro_current_pool() : NULL;
  void *code = NULL;
  size_t len = 0;
  if (!p || suiro_fn_fetch(p, (uint64_t)key, &code, &len) != SUIRO_OK)
    return PyErr_Format(PyExc_LookupError, "nothing is stored under key %#llx here", key);
  PyObject *b = PyBytes_FromStringAndSize(code, (Py_ssize_t)len);
  free(code);
  return b;
}

/* _values._checks_hold in C (a send re-reads a class's check list, _values._deps, ~0.3 us here
 * against ~3 us): True when every object still is what the list holds. Any other shape: False
 * (a new blob is made). */
static int same_items(PyObject *have, PyObject *want) { /* have: a list or tuple; want: a tuple */
  Py_ssize_t n = PySequence_Fast_GET_SIZE(have);
  if (!PyTuple_Check(want) || n != PyTuple_GET_SIZE(want)) return 0;
  PyObject **h = PySequence_Fast_ITEMS(have);
  for (Py_ssize_t i = 0; i < n; i++)
    if (h[i] != PyTuple_GET_ITEM(want, i)) return 0;
  return 1;
}

static int dict_holds(PyObject *d, PyObject *keys, PyObject *vals) {
  if (!PyDict_Check(d) || !PyTuple_Check(keys) || !PyTuple_Check(vals) || PyDict_GET_SIZE(d) != PyTuple_GET_SIZE(keys) ||
      PyTuple_GET_SIZE(vals) != PyTuple_GET_SIZE(keys))
    return 0;
  PyObject *k, *v;
  Py_ssize_t pos = 0, i = 0;
  while (PyDict_Next(d, &pos, &k, &v)) {
    if (i >= PyTuple_GET_SIZE(keys) || k != PyTuple_GET_ITEM(keys, i) || v != PyTuple_GET_ITEM(vals, i)) return 0;
    i++;
  }
  return 1;
}

static int check_holds(PyObject *c) {
  if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) < 3 || !PyUnicode_Check(PyTuple_GET_ITEM(c, 0)) ||
      PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(c, 0)) != 1)
    return 0;
  Py_UCS4 k = PyUnicode_READ_CHAR(PyTuple_GET_ITEM(c, 0), 0);
  PyObject *o = PyTuple_GET_ITEM(c, 1);
  Py_ssize_t n = PyTuple_GET_SIZE(c);
  switch (k) {
  case 'g': { /* globals dict, names, values (absent: the marker) */
    if (n != 5 || !PyDict_Check(o)) return 0;
    PyObject *names = PyTuple_GET_ITEM(c, 2), *vals = PyTuple_GET_ITEM(c, 3), *abs = PyTuple_GET_ITEM(c, 4);
    if (!PyTuple_Check(names) || !PyTuple_Check(vals) || !PyTuple_Check(abs) || PyTuple_GET_SIZE(vals) != PyTuple_GET_SIZE(names) ||
        PyTuple_GET_SIZE(abs) != PyTuple_GET_SIZE(names))
      return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
      PyObject *v = PyDict_GetItemWithError(o, PyTuple_GET_ITEM(names, i));
      if (!v && PyErr_Occurred()) return PyErr_Clear(), 0;
      if ((v ? v : PyTuple_GET_ITEM(abs, i)) != PyTuple_GET_ITEM(vals, i)) return 0;
    }
    return 1;
  }
  case 'd': return n == 4 && dict_holds(o, PyTuple_GET_ITEM(c, 2), PyTuple_GET_ITEM(c, 3));
  case 'c': return n == 4 && PyType_Check(o) && dict_holds(((PyTypeObject *)o)->tp_dict, PyTuple_GET_ITEM(c, 2), PyTuple_GET_ITEM(c, 3));
  case 'f': { /* fn, code, defaults, kwdefaults, closure, cell contents, len(__dict__) */
    if (n != 8 || !PyFunction_Check(o)) return 0;
    PyFunctionObject *f = (PyFunctionObject *)o;
    PyObject *none = Py_None;
    if (f->func_code != PyTuple_GET_ITEM(c, 2) || (f->func_defaults ? f->func_defaults : none) != PyTuple_GET_ITEM(c, 3) ||
        (f->func_kwdefaults ? f->func_kwdefaults : none) != PyTuple_GET_ITEM(c, 4) ||
        (f->func_closure ? f->func_closure : none) != PyTuple_GET_ITEM(c, 5))
      return 0;
    Py_ssize_t nd = f->func_dict ? PyDict_GET_SIZE(f->func_dict) : 0;
    if (PyLong_AsSsize_t(PyTuple_GET_ITEM(c, 7)) != nd) return PyErr_Clear(), 0;
    PyObject *cells = PyTuple_GET_ITEM(c, 6), *cl = f->func_closure;
    if (!PyTuple_Check(cells)) return 0;
    if (PyTuple_GET_SIZE(cells) == 0) return 1;
    if (!cl || !PyTuple_Check(cl) || PyTuple_GET_SIZE(cl) != PyTuple_GET_SIZE(cells)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cl); i++) {
      PyObject *v = PyCell_GET(PyTuple_GET_ITEM(cl, i));
      if (!v || v != PyTuple_GET_ITEM(cells, i)) return 0; /* an empty cell: a new snapshot */
    }
    return 1;
  }
  case 's': { /* a list or set: its items in order */
    if (n != 3) return 0;
    PyObject *want = PyTuple_GET_ITEM(c, 2);
    if (PyList_CheckExact(o)) return same_items(o, want);
    if (!PyAnySet_CheckExact(o) || !PyTuple_Check(want) || PySet_GET_SIZE(o) != PyTuple_GET_SIZE(want)) return 0;
    PyObject *it = PyObject_GetIter(o), *x;
    Py_ssize_t i = 0;
    int ok = it != NULL;
    while (ok && (x = PyIter_Next(it))) {
      ok = i < PyTuple_GET_SIZE(want) && x == PyTuple_GET_ITEM(want, i);
      Py_DECREF(x);
      i++;
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) PyErr_Clear(), ok = 0;
    return ok;
  }
  default: { /* 'a' (obj, attr, value), 'p' (property, (fget, fset, fdel)) */
    static const char *const pa[] = { "fget", "fset", "fdel" };
    for (int j = 0; j < (k == 'p' ? 3 : k == 'a' ? 1 : 0); j++) {
      if (k == 'p' && (n != 3 || !PyTuple_Check(PyTuple_GET_ITEM(c, 2)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(c, 2)) != 3)) return 0;
      if (k == 'a' && (n != 4 || !PyUnicode_Check(PyTuple_GET_ITEM(c, 2)))) return 0;
      PyObject *v = k == 'p' ? PyObject_GetAttrString(o, pa[j]) : PyObject_GetAttr(o, PyTuple_GET_ITEM(c, 2));
      if (!v) return PyErr_Clear(), 0;
      PyObject *want = k == 'p' ? PyTuple_GET_ITEM(PyTuple_GET_ITEM(c, 2), j) : PyTuple_GET_ITEM(c, 3);
      Py_DECREF(v);
      if (v != want) return 0;
    }
    return k == 'p' || k == 'a';
  }
  }
}

static PyObject *m_checks_hold(PyObject *self, PyObject *checks) {
  (void)self;
  if (!PyList_Check(checks)) Py_RETURN_FALSE;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(checks); i++) {
    PyObject *c = PyList_GET_ITEM(checks, i);
    Py_INCREF(c);
    int ok = check_holds(c);
    Py_DECREF(c);
    if (!ok) Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

static PyMethodDef class_key_defs[] = {
  { "_checks_hold_c", m_checks_hold, METH_O, NULL },
  { "_fn_key", m_fn_key, METH_O, NULL },
  { "_fetch_class", m_fetch_class, METH_O, NULL },
  { "_fetch_blob", m_fetch_blob, METH_O, NULL },
};

int sp_class_keys_installed; /* sp_values_module installed them (dec.c checks it before unpickling) */

PyObject *sp_values_module(void) {
  PyObject *m = PyImport_ImportModule("suiro._values");
  if (!m || sp_class_keys_installed) return m;
  for (size_t i = 0; i < sizeof class_key_defs / sizeof class_key_defs[0]; i++) {
    PyObject *f = PyCFunction_New(&class_key_defs[i], NULL);
    if (!f || PyObject_SetAttrString(m, class_key_defs[i].ml_name, f) < 0) {
      Py_XDECREF(f);
      Py_DECREF(m);
      return NULL;
    }
    Py_DECREF(f);
  }
  sp_class_keys_installed = 1;
  return m;
}

PyObject *sp_values_attr(PyObject **slot, const char *name) {
  if (!*slot) {
    PyObject *m = sp_values_module();
    *slot = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
  }
  return *slot;
}

/* ---- function identity (hosts): by name, or the code by key ---------------------------------- */

static PyObject *fn_ref_helper, *fn_pickle_helper, *resolve_helper;

/* The function item for callable fn, cached per pool: a str (by reference) or an int key. */
PyObject *sp_function_identity(PoolObject *po, PyObject *fn) {
  if (po && po->fn_cache) {
    PyObject *got = PyDict_GetItemWithError(po->fn_cache, fn);
    if (got) return Py_NewRef(got);
    if (PyErr_Occurred()) PyErr_Clear(); /* unhashable: no cache */
  }
  if (!sp_values_attr(&fn_ref_helper, "function_ref") || !sp_values_attr(&fn_pickle_helper, "pickle_function"))
    return NULL;
  PyObject *name = PyObject_CallOneArg(fn_ref_helper, fn);
  if (!name) return NULL;
  if (name != Py_None) {
    if (po && po->fn_cache && PyDict_GET_SIZE(po->fn_cache) < 4096) {
      if (PyDict_SetItem(po->fn_cache, fn, name) < 0) PyErr_Clear();
    }
    return name;
  }
  Py_DECREF(name);
  /* by value: pickled afresh each time (its globals may have changed), published by content */
  if (!po || !po->p) {
    PyErr_Format(PyExc_TypeError, "a function that cannot be imported by name (%R) cannot be sent here", fn);
    return NULL;
  }
  PyObject *code = PyObject_CallOneArg(fn_pickle_helper, fn);
  if (!code) return NULL;
  if (!PyBytes_Check(code)) {
    Py_DECREF(code);
    PyErr_SetString(PyExc_TypeError, "pickling the function gave no bytes");
    return NULL;
  }
  uint64_t key = suiro_fn_key(PyBytes_AS_STRING(code), (size_t)PyBytes_GET_SIZE(code));
  suiro_status st = suiro_fn_publish(po->p, key, PyBytes_AS_STRING(code), (size_t)PyBytes_GET_SIZE(code));
  Py_DECREF(code);
  if (st == SUIRO_OK) po->fn_published++;
  if (st != SUIRO_OK) {
    PyErr_Format(PyExc_RuntimeError, "cannot publish the function's code: %s", suiro_last_error());
    return NULL;
  }
  return PyLong_FromUnsignedLongLong(key);
}

/* ---- functions sent by value: the code once per pool, what they captured with every task ----------
 *
 * _values.function_plan splits a function no worker imports into a template (its code and what it
 * names that a worker imports: published once, by content) and what it captured (the globals it
 * reads of other kinds, its closure cells, its defaults). The pool keeps the plan per code object;
 * each submit checks that the names still hold what the template was made with (a global rebound
 * to another module, say, makes a new plan) and writes
 *   FUNC(python, key, 3) [nil, kwargs DICT or nil, LIST [globals..., cells..., defaults, kwdefaults]]
 * (the two defaults left out when the function has none; FUNC(python, key, 1) [nil] when it
 * captured nothing and there are no keyword arguments), so a global changed or mutated between submits is seen by the next task. The worker builds the
 * function from the template with a fresh globals dict and fresh cells (sp_build_function). */

PyObject *sp_plan_dyn;
static PyObject *plan_helper, *plan_self, *plan_absent;

static int plan_helpers(void) {
  if (plan_helper) return 0;
  PyObject *m = PyImport_ImportModule("suiro._values");
  if (!m) return -1;
  sp_plan_dyn = PyObject_GetAttrString(m, "PLAN_DYN");
  plan_self = sp_plan_dyn ? PyObject_GetAttrString(m, "PLAN_SELF") : NULL;
  plan_absent = plan_self ? PyObject_GetAttrString(m, "PLAN_ABSENT") : NULL;
  PyObject *h = plan_absent ? PyObject_GetAttrString(m, "function_plan") : NULL;
  Py_DECREF(m);
  if (!h) return -1;
  plan_helper = h;
  return 0;
}

/* 1 when v still is what kind k says (PLAN_DYN: any value but fn itself), else 0 */
static int plan_kind_holds(PyObject *k, PyObject *v, PyObject *fn) {
  if (k == plan_absent) return v == NULL;
  if (k == plan_self) return v == fn;
  if (k == sp_plan_dyn) return v != NULL && v != fn;
  return v == k;
}

/* 1 when fn's names hold what its plan's template was made with; 0 when not; -1 on error */
static int plan_valid(PyObject *plan, PyObject *fn) {
  PyObject *g = PyFunction_GET_GLOBALS(fn);
  if (g != PyTuple_GET_ITEM(plan, PLAN_GLOBALS)) return 0;
  PyFunctionObject *fo = (PyFunctionObject *)fn; /* renamed: the template has the other name */
  if (fo->func_name != PyTuple_GET_ITEM(plan, PLAN_NAME) || fo->func_qualname != PyTuple_GET_ITEM(plan, PLAN_QUALNAME) ||
      (fo->func_dict && PyDict_GET_SIZE(fo->func_dict))) /* attributes: pickled whole */
    return 0;
  PyObject *names = PyTuple_GET_ITEM(plan, PLAN_GNAMES), *kinds = PyTuple_GET_ITEM(plan, PLAN_GKINDS);
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(names); i < n; i++) {
    PyObject *v = PyDict_GetItemWithError(g, PyTuple_GET_ITEM(names, i));
    if (!v && PyErr_Occurred()) return -1;
    if (!plan_kind_holds(PyTuple_GET_ITEM(kinds, i), v, fn)) return 0;
  }
  PyObject *cl = PyFunction_GET_CLOSURE(fn), *ck = PyTuple_GET_ITEM(plan, PLAN_CKINDS);
  Py_ssize_t nc = cl && cl != Py_None ? PyTuple_GET_SIZE(cl) : 0;
  if (nc != PyTuple_GET_SIZE(ck)) return 0;
  for (Py_ssize_t i = 0; i < nc; i++) {
    PyObject *v = PyCell_GET(PyTuple_GET_ITEM(cl, i));
    if (!plan_kind_holds(PyTuple_GET_ITEM(ck, i), v, fn)) return 0;
  }
  return 1;
}

/* The plan of fn (a plain Python function) in pool po, from its cache or made now (and published):
 * 0 with *plan a new reference whose names still hold, -1 with an exception, or 1 when fn does not
 * go by plan (importable, or a kind of function the plan cannot split: it is pickled whole). */
int sp_function_plan(PoolObject *po, PyObject *fn, PyObject **plan_out) {
  if (!po->code_plans && !(po->code_plans = PyDict_New())) return -1;
  if (plan_helpers() < 0) return -1;
  PyObject *code = PyFunction_GET_CODE(fn);
  PyObject *plan = code == po->last_code ? po->last_plan : PyDict_GetItemWithError(po->code_plans, code);
  if (!plan && PyErr_Occurred()) return -1;
  if (plan == Py_None) return 1;
  if (plan) {
    int ok = plan_valid(plan, fn);
    if (ok < 0) return -1;
    if (ok) {
      Py_INCREF(plan);
      if (code != po->last_code) {
        Py_XSETREF(po->last_code, Py_NewRef(code));
        Py_XSETREF(po->last_plan, Py_NewRef(plan));
      }
      *plan_out = plan;
      return 0;
    }
  } else {
    if (!sp_values_attr(&fn_ref_helper, "function_ref") || !sp_values_attr(&fn_pickle_helper, "pickle_function"))
      return -1;
    PyObject *name = PyObject_CallOneArg(fn_ref_helper, fn);
    if (!name) return -1;
    int importable = name != Py_None;
    Py_DECREF(name);
    if (importable) {
      if (PyDict_GET_SIZE(po->code_plans) < 4096 && PyDict_SetItem(po->code_plans, code, Py_None) < 0) return -1;
      return 1;
    }
  }
  PyObject *r = PyObject_CallOneArg(plan_helper, fn);
  if (!r) { /* pickled whole, which says why it cannot be sent */
    PyErr_Clear();
    return 1;
  }
  if (r == Py_None || !PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 5 || !PyBytes_Check(PyTuple_GET_ITEM(r, 0))) {
    Py_DECREF(r);
    if (code == po->last_code) {
      Py_CLEAR(po->last_code);
      Py_CLEAR(po->last_plan);
    }
    if (PyDict_GET_SIZE(po->code_plans) < 4096 && PyDict_SetItem(po->code_plans, code, Py_None) < 0) return -1;
    return 1;
  }
  PyObject *blob = PyTuple_GET_ITEM(r, 0);
  uint64_t key = suiro_fn_key(PyBytes_AS_STRING(blob), (size_t)PyBytes_GET_SIZE(blob));
  if (suiro_fn_publish(po->p, key, PyBytes_AS_STRING(blob), (size_t)PyBytes_GET_SIZE(blob)) != SUIRO_OK) {
    Py_DECREF(r);
    PyErr_Format(PyExc_RuntimeError, "cannot publish the function's code: %s", suiro_last_error());
    return -1;
  }
  po->fn_published++;
  Py_ssize_t ndyn = 0;
  for (int t = 3; t <= 4; t++) {
    PyObject *ks = PyTuple_GET_ITEM(r, t);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ks); i++) ndyn += PyTuple_GET_ITEM(ks, i) == sp_plan_dyn;
  }
  PyFunctionObject *fo = (PyFunctionObject *)fn;
  plan = Py_BuildValue("(y#OOOOnOO)", (const char *)&key, (Py_ssize_t)sizeof key, PyTuple_GET_ITEM(r, 1), PyTuple_GET_ITEM(r, 2),
                       PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 4), ndyn, fo->func_name, fo->func_qualname);
  Py_DECREF(r);
  if (!plan) return -1;
  if (PyDict_GET_SIZE(po->code_plans) < 4096 || PyDict_Contains(po->code_plans, code) == 1)
    if (PyDict_SetItem(po->code_plans, code, plan) < 0) PyErr_Clear();
  Py_XSETREF(po->last_code, Py_NewRef(code));
  Py_XSETREF(po->last_plan, Py_NewRef(plan));
  int ok = plan_valid(plan, fn); /* planned from fn itself: holds, unless planning ran code that changed it */
  if (ok > 0) {
    *plan_out = plan;
    return 0;
  }
  Py_DECREF(plan);
  return ok < 0 ? -1 : 1;
}


/* ---- functions built from a plan's template (workers) ---------------------------------------- */

/* Templates: their layout (TPL_*) and sp_is_template are in suiro_py.h. */

/* The last function built from a template that captured only plain immutable values (or none):
 * the next task of that template reuses it when nothing else holds it and its globals still are
 * what a fresh build would make (its task may have written them), so it is as good as new. */
static PyObject *built_tpl, *built_fn;

static int plain_atom(PyObject *v) {
  PyTypeObject *t = Py_TYPE(v);
  return v == Py_None || t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBytes_Type ||
         t == &PyBool_Type;
}

static PyObject *memo_reuse(PyObject *t, PyObject *cap, Py_ssize_t nd) {
  if (t != built_tpl || !built_fn || Py_REFCNT(built_fn) != 1) return NULL;
  PyFunctionObject *f = (PyFunctionObject *)built_fn;
  if (f->func_closure || f->func_defaults || f->func_kwdefaults || (f->func_dict && PyDict_GET_SIZE(f->func_dict)) ||
      f->func_code != PyTuple_GET_ITEM(t, TPL_CODE))
    return NULL;
  PyObject *g = f->func_globals, *base = PyTuple_GET_ITEM(t, TPL_BASE), *dyn = PyTuple_GET_ITEM(t, TPL_DYN);
  if (Py_REFCNT(g) != 1 || PyDict_GET_SIZE(g) != PyDict_GET_SIZE(base) + nd) return NULL; /* none kept globals() */
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(base, &pos, &k, &v))
    if (PyDict_GetItemWithError(g, k) != v) return PyErr_Clear(), NULL;
  for (Py_ssize_t i = 0; i < nd; i++) {
    PyObject *want = PyList_GET_ITEM(cap, i), *have = PyDict_GetItemWithError(g, PyTuple_GET_ITEM(dyn, i));
    if (!have) return PyErr_Clear(), NULL;
    if (have == want) continue;
    if (Py_TYPE(have) != Py_TYPE(want) || !plain_atom(want)) return NULL;
    int eq = PyObject_RichCompareBool(have, want, Py_EQ);
    if (eq != 1) return PyErr_Clear(), NULL;
  }
  return Py_NewRef(built_fn);
}

/* The function of template t with what it captured (cap: [globals..., cells..., defaults,
 * kwdefaults]): a fresh globals dict and cells, as unpickling the whole function gave. */
PyObject *sp_build_function(PyObject *t, PyObject *cap) {
  PyObject *code = PyTuple_GET_ITEM(t, TPL_CODE), *base = PyTuple_GET_ITEM(t, TPL_BASE);
  PyObject *dyn = PyTuple_GET_ITEM(t, TPL_DYN), *selfn = PyTuple_GET_ITEM(t, TPL_SELF);
  PyObject *cells = PyTuple_GET_ITEM(t, TPL_CELLS);
  if (!PyCode_Check(code) || !PyDict_Check(base) || !PyTuple_Check(dyn) || !PyTuple_Check(selfn) || !PyTuple_Check(cells) ||
      (cap && !PyList_Check(cap)))
    return PyErr_SetString(PyExc_ValueError, "cannot decode value: a damaged function template"), NULL;
  Py_ssize_t nd = PyTuple_GET_SIZE(dyn), nc = PyTuple_GET_SIZE(cells), ndc = 0;
  for (Py_ssize_t i = 0; i < nc; i++) ndc += PyLong_Check(PyTuple_GET_ITEM(cells, i)) && PyLong_AsLong(PyTuple_GET_ITEM(cells, i)) == 0;
  /* the defaults are left out when there are none, the whole list when nothing was captured */
  Py_ssize_t ncap = cap ? PyList_GET_SIZE(cap) : 0;
  if ((ncap != nd + ndc && ncap != nd + ndc + 2) || nc != PyCode_GetNumFree((PyCodeObject *)code))
    return PyErr_SetString(PyExc_ValueError, "cannot decode value: a function's captured values do not fit its code"), NULL;
  PyObject *defs = ncap > nd + ndc ? PyList_GET_ITEM(cap, nd + ndc) : Py_None;
  PyObject *kwd = ncap > nd + ndc ? PyList_GET_ITEM(cap, nd + ndc + 1) : Py_None;
  int memo = nc == 0 && PyTuple_GET_SIZE(selfn) == 0 && defs == Py_None && kwd == Py_None;
  for (Py_ssize_t i = 0; memo && i < nd; i++) memo = plain_atom(PyList_GET_ITEM(cap, i));
  if (memo) {
    PyObject *f = memo_reuse(t, cap, nd);
    if (f) return f;
  }
  PyObject *g = PyDict_Copy(base);
  if (!g) return NULL;
  for (Py_ssize_t i = 0; i < nd; i++)
    if (PyDict_SetItem(g, PyTuple_GET_ITEM(dyn, i), PyList_GET_ITEM(cap, i)) < 0) goto fail_g;
  PyObject *f = PyFunction_NewWithQualName(code, g, PyTuple_GET_ITEM(t, TPL_QUALNAME));
  if (!f) goto fail_g;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(selfn); i++)
    if (PyDict_SetItem(g, PyTuple_GET_ITEM(selfn, i), f) < 0) goto fail;
  if (nc) {
    PyObject *cl = PyTuple_New(nc);
    if (!cl) goto fail;
    for (Py_ssize_t i = 0, k = nd; i < nc; i++) {
      PyObject *s = PyTuple_GET_ITEM(cells, i), *v;
      if (PyTuple_Check(s) && PyTuple_GET_SIZE(s) == 1) v = PyTuple_GET_ITEM(s, 0);
      else if (PyLong_Check(s) && PyLong_AsLong(s) == 1) v = f;
      else v = PyList_GET_ITEM(cap, k++);
      PyObject *c = PyCell_New(v);
      if (!c) {
        Py_DECREF(cl);
        goto fail;
      }
      PyTuple_SET_ITEM(cl, i, c);
    }
    int rc = PyFunction_SetClosure(f, cl);
    Py_DECREF(cl);
    if (rc < 0) goto fail;
  }
  if (defs != Py_None && (!PyTuple_Check(defs) || PyFunction_SetDefaults(f, defs) < 0)) goto fail_defs;
  if (kwd != Py_None && (!PyDict_Check(kwd) || PyFunction_SetKwDefaults(f, kwd) < 0)) goto fail_defs;
  PyObject *name = PyTuple_GET_ITEM(t, TPL_NAME);
  if (PyUnicode_Check(name) && PyUnicode_Compare(name, ((PyCodeObject *)code)->co_name) != 0 &&
      PyObject_SetAttrString(f, "__name__", name) < 0)
    goto fail;
  Py_DECREF(g);
  if (memo) {
    Py_XSETREF(built_tpl, Py_NewRef(t));
    Py_XSETREF(built_fn, Py_NewRef(f));
  }
  return f;
fail_defs:
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "cannot decode value: a function's defaults are damaged");
fail:
  Py_DECREF(f);
fail_g:
  Py_DECREF(g);
  return NULL;
}

/* ---- resolving functions in workers ------------------------------------------------------------------ */

static PyObject *name_cache;

PyObject *sp_resolve_name(const char *name, size_t len) {
  PyObject *s = PyUnicode_DecodeUTF8(name, (Py_ssize_t)len, "surrogateescape");
  if (!s) return NULL;
  if (!name_cache && !(name_cache = PyDict_New())) return Py_DECREF(s), NULL;
  PyObject *got = PyDict_GetItemWithError(name_cache, s);
  if (got) {
    Py_DECREF(s);
    return Py_NewRef(got);
  }
  if (!sp_values_attr(&resolve_helper, "resolve")) return Py_DECREF(s), NULL;
  PyObject *f = PyObject_CallOneArg(resolve_helper, s);
  if (f && PyDict_SetItem(name_cache, s, f) < 0) Py_CLEAR(f);
  Py_DECREF(s);
  return f;
}

/* A FUNC item's code: from the worker's cache of suiro_exec (engine/src/exec.c), which fetches it
 * by key, checks it and unpickles it (worker.c's by_code) on first sight. */
PyObject *sp_function_from_key(uint64_t key) {
  void *fn;
  char err[400];
  int rc = suiro_exec_code(&sp_exec_ops, NULL, key, &fn, err, sizeof err);
  if (rc == 1) return Py_NewRef((PyObject *)fn);
  if (rc == 0) PyErr_SetString(PyExc_RuntimeError, err);
  return NULL;
}
