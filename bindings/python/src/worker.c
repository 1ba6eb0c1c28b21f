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
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "suiro_py.h"

int sp_in_worker;
static int host_foreign;
static const char *host_lang = "python", *host_dest = "a python host";

int sp_decode_task(const void *buf, size_t len, PyObject **fn, PyObject **args, PyObject **kwargs); /* codec.c */

static PyObject *run_call_helper;

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
  sp_enc_opts o = { "task result", host_foreign, host_lang, host_dest, 1, NULL, &g };
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

int sp_exec_task(const void *arg, size_t len, suiro_out *out) {
  PyObject *fn = NULL, *args = NULL, *kwargs = NULL;
  if (sp_decode_task(arg, len, &fn, &args, &kwargs) < 0) {
    /* a task whose arguments asked to exit while they were read (sys.exit in an unpickler):
     * the worker exits, as the process asked; the engine reports the task's worker as dead */
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
      PyErr_Clear();
      fflush(NULL);
      _exit(1);
    }
    return sp_error_out(out, NULL, -1);
  }
  PyObject *res;
  if (SP.Call && Py_TYPE(fn) == (PyTypeObject *)SP.Call) {
    if (!run_call_helper) {
      PyObject *m = PyImport_ImportModule("suiro._values");
      run_call_helper = m ? PyObject_GetAttrString(m, "run_call") : NULL;
      Py_XDECREF(m);
    }
    res = run_call_helper ? PyObject_CallOneArg(run_call_helper, fn) : NULL;
  } else if (!kwargs) {
    res = PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(args, 0), (size_t)PyTuple_GET_SIZE(args), NULL);
  } else {
    res = PyObject_Call(fn, args, kwargs);
  }
  Py_DECREF(fn);
  Py_DECREF(args);
  Py_XDECREF(kwargs);
  if (!res) return sp_error_out(out, NULL, -1);
  int rc = write_result(out, res);
  Py_DECREF(res);
  return rc;
}

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
    host_foreign = 1;
    host_lang = hl[0] == 'l' ? "lua" : "r";
    host_dest = hl[0] == 'l' ? "a lua host" : "an r host";
  }
  sp_in_worker = 1;
  suiro_set_executor(executor, NULL);
  int rc = suiro_worker_run(token);
  return PyLong_FromLong(rc);
}
