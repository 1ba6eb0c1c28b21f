/*
 * worker.c — the Python worker: runs tasks sent by any host (suiro_bind.h, section 1).
 *
 * A task is a list [function, arguments...]; the function is a reference ("module.fn", resolved
 * with import and cached), a FUNC of pickled code (fetched from the pool's blob store once and
 * cached by key), or a call spec (a target name or source text with positional and named
 * arguments). The result goes back as a list of one value; an exception as an ERROR value with
 * the exception's qualified class name, its message and the worker's traceback.
 *
 * The worker runs suiro_worker_run with the GIL held: it is the only thread that runs Python,
 * and the executor is called from it (also re-entrantly, when a task waits on a nested task
 * and the engine runs other tasks meanwhile).
 * Results for a host of another language (SUIRO_HOST_LANG=lua or r) are encoded without pickles.
 * The engine reads the task (suiro_exec, engine/src/exec.c: the list, the function item, the
 * protocol's refusals, the cache of names and code keys); this file keeps the callbacks that need
 * Python: resolve a name, unpickle code, decode the arguments, call, encode, the pending exception.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "suiro_py.h"

static PyObject *run_call_helper;

/* The pending exception as an ERROR payload. */
int sp_error_out(suiro_out *out, PyObject *unused, int64_t index) {
  wire_str cls, msg, trace;
  PyObject *hold;
  sp_take_exception(&cls, &msg, &trace, &hold);
  int rc = suiro_out_fail(out, cls, msg, trace, index);
  Py_XDECREF(hold);
  return rc;
}

static int write_result(suiro_out *out, PyObject *value) {
  _Alignas(8) unsigned char stack[512];
  suiro_msg g;
  suiro_msg_init(&g, stack, sizeof stack);
  sp_enc_opts o = { "task result", sp_host_foreign, sp_host_lang, sp_host_dest, 1, NULL, &g };
  const void *buf;
  size_t len;
  if (sp_encode_list(&o, &value, 1, SP_SEG_RESULT, 0, &g.w) < 0 || wire_writer_finish(&g.w, &buf, &len) != WIRE_OK) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "task result: %s", wire_writer_error(&g.w));
    suiro_msg_free(&g);
    wire_writer_free(&g.w);
    return sp_error_out(out, NULL, -1);
  }
  int rc = suiro_out_write(out, buf, len);
  wire_writer_free(&g.w);
  if (rc != 0) {
    suiro_msg_free(&g);
    return suiro_out_error(out, "out of memory for the result");
  }
  suiro_msg_sent(&g);
  return 0;
}

/* ---- the callbacks of suiro_exec (suiro_face.h section 2): the engine reads the task ----------- */

static int py_protect(void *ud, int (*body)(void *ctx), void *ctx) {
  (void)ud;
  return body(ctx); /* Python does not unwind: a failure is a pending exception */
}

/* An exception of suiro._values.resolve that says there is no such function. */
static int not_found(void) {
  if (!PyErr_ExceptionMatches(PyExc_ImportError) && !PyErr_ExceptionMatches(PyExc_AttributeError) &&
      !PyErr_ExceptionMatches(PyExc_NameError) && !PyErr_ExceptionMatches(PyExc_ValueError))
    return 0;
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyObject *s = v ? PyObject_Str(v) : NULL;
  const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
  int nf = m && !strncmp(m, "cannot find function", 20);
  Py_XDECREF(s);
  if (nf) {
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    PyErr_Clear();
  } else {
    PyErr_Restore(t, v, tb);
  }
  return nf;
}

static int py_by_name(void *ud, suiro_wire_str name, void **fn) {
  (void)ud;
  PyObject *f = sp_resolve_name(name.ptr, name.len);
  if (!f) return not_found() ? 0 : -1;
  *fn = f; /* the engine's cache keeps this reference */
  return 1;
}

static void exit_if_asked(void) {
  /* a task whose arguments asked to exit while they were read (sys.exit in an unpickler): the
   * worker exits, as the process asked; the engine reports the task's worker as dead */
  if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
    PyErr_Clear();
    fflush(NULL);
    _exit(1);
  }
}

static int py_by_code(void *ud, uint64_t key, const void *code, size_t len, void **fn) {
  (void)ud;
  (void)key;
  PyObject *b = PyBytes_FromStringAndSize(code, (Py_ssize_t)len);
  if (!b) return -1;
  PyObject *f = PyObject_CallOneArg(SP.pickle_loads, b);
  Py_DECREF(b);
  if (!f) {
    /* a module or attribute the function needs is missing here: that error tells the user what to
     * install; anything else means the bytes are not a pickle of ours */
    exit_if_asked(); /* an unpickler that called sys.exit */
    if (PyErr_ExceptionMatches(PyExc_ImportError) || PyErr_ExceptionMatches(PyExc_AttributeError) ||
        PyErr_ExceptionMatches(PyExc_MemoryError))
      return -1;
    PyErr_Clear();
    return 0;
  }
  *fn = f;
  return 1;
}

static int call_and_write(PyObject *fn, PyObject *args, suiro_out *out) {
  PyObject *res;
  if (SP.Call && Py_TYPE(fn) == (PyTypeObject *)SP.Call) {
    PyObject *h = sp_values_attr(&run_call_helper, "run_call");
    res = h ? PyObject_CallOneArg(h, fn) : NULL;
  } else {
    res = PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(args, 0), (size_t)PyTuple_GET_SIZE(args), NULL);
  }
  Py_DECREF(fn);
  Py_DECREF(args);
  if (!res) return -1;
  write_result(out, res); /* writes a failure of its own when the result cannot be encoded */
  Py_DECREF(res);
  return 0;
}

static int py_run(void *ud, void *fnp, const suiro_wire_item *f, suiro_wire_reader *r, uint64_t nargs, suiro_out *out) {
  (void)ud;
  PyObject *fn, *args;
  if (sp_decode_task_at(r, f, fnp, nargs, &fn, &args) < 0) {
    exit_if_asked();
    return -1;
  }
  return call_and_write(fn, args, out);
}

static int py_run_call(void *ud, const suiro_wire_item *spec, suiro_wire_reader *r, suiro_out *out) {
  return py_run(ud, NULL, spec, r, 0, out);
}

static int py_fail(void *ud, suiro_out *out, int64_t index) {
  (void)ud;
  return sp_error_out(out, NULL, index);
}

static suiro_exec_cache code_cache;

const suiro_exec_ops sp_exec_ops = {
  .lang = WIRE_LANG_PYTHON,
  .lang_name = "python",
  .cache = &code_cache,
  .protect = py_protect,
  .by_name = py_by_name,
  .by_code = py_by_code,
  .run = py_run,
  .run_call = py_run_call,
  .fail = py_fail,
};

int sp_exec_task(const void *arg, size_t len, suiro_out *out) { return suiro_exec(arg, len, out, &sp_exec_ops, NULL); }

static int executor(uint64_t fn, const void *arg, size_t len, suiro_out *out, void *ud) {
  if (fn == SUIRO_FN_MAP) return sp_run_map(arg, len, out);
  return sp_exec_task(arg, len, out);
}

/* _core.worker_run(token) -> exit status: serves the pool until it stops. */
PyObject *sp_worker_run(PyObject *self, PyObject *args) {
  const char *token;
  if (!PyArg_ParseTuple(args, "s", &token)) return NULL;
  const char *hl = getenv("SUIRO_HOST_LANG");
  if (hl && (!strcmp(hl, "lua") || !strcmp(hl, "r"))) {
    sp_host_foreign = 1;
    sp_host_lang = hl[0] == 'l' ? "lua" : "r";
    sp_host_dest = hl[0] == 'l' ? "a lua host" : "an r host";
  }
  sp_in_worker = 1;
  suiro_set_executor(executor, NULL);
  int rc = suiro_worker_run(token);
  return PyLong_FromLong(rc);
}
