/*
 * suiro_py.h — the CPython face of suiro (module suiro._core): shared declarations.
 *
 * Files: sp.c (the package's Python helpers, lazy numpy/pandas, the pending exception as wire
 * strings), module.c (init, embedded Lua readers, suiro.wire), enc.c (Python values -> wire),
 * dec.c (wire -> Python values, a worker's tasks), func.c (function identity and its caches),
 * view.c (read-only buffers over shared regions), pool.c (pools and tasks), map.c (maps: host
 * side and the worker's runner), worker.c (the worker's executor), chan.c (channels), cluster.c
 * (backend = "mpi"). Every file includes this header only (and engine headers).
 *
 * Threads and the GIL
 *   - Every engine call on a host pool handle is made holding the pool's lock (pool_lock): the
 *     engine wants one thread at a time per handle, and a collect waits with the GIL released, so
 *     other Python threads (an executor's drain thread, an asyncio loop) may call in meanwhile.
 *     The lock is taken with the GIL held and never the other way round while waiting for it
 *     (waiting for the pool lock releases the GIL first), so the two cannot deadlock.
 *   - Objects finalised while their pool is locked (a Task collected by the garbage collector
 *     during a decode) do not take the lock: their release is queued and done at the next lock.
 *   - A worker's own pool handle (suiro.current_pool() in a worker) is used by the worker's main
 *     thread only; it is never locked and never waits with the GIL released, because waiting on a
 *     nested task runs other tasks of the pool in this thread, which needs the GIL.
 */
#ifndef SUIRO_PY_H
#define SUIRO_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_face.h"
#include "suiro_wire.h"
#include "suiro_wire_compat.h" /* the face still spells the wire API wire_* */

/* ---- pools and tasks (pool.c) ---------------------------------------------------------------- */

typedef struct PoolObject {
  PyObject_HEAD
  suiro_pool *p;          /* NULL once stopped */
  int owner;              /* created here: stop on close */
  int worker;             /* the worker's own handle (borrowed) */
  int lang;               /* WIRE_LANG_* of the workers */
  double timeout;         /* default for submit waits (< 0: forever) */
  PyThread_type_lock lock;
  unsigned long lock_owner;
  int locked;
  suiro_task *pending;    /* releases queued while the lock was held */
  size_t npending, cap_pending;
  PyObject *fn_cache;     /* dict: callable -> bytes of its encoded function item */
  PyObject *last_fn;      /* the last callable submitted (borrowed key of fn_cache, kept alive) */
  PyObject *last_item;    /* its encoded item (bytes) */
  PyObject *code_plans;   /* dict: code object -> plan of a function sent by value (func.c), or None */
  PyObject *last_code;    /* the code of the last function sent by its plan, and that plan */
  PyObject *last_plan;
  unsigned long long fn_published; /* function code blobs published (pool.status()) */
  PyObject *weakreflist;
  PyObject *dict;
} PoolObject;

typedef struct TaskObject {
  PyObject_HEAD
  PoolObject *pool;
  suiro_task t;
  int state;              /* 0 pending, 1 collected, 2 released */
  int failed;             /* outcome is the exception it raised */
  int slot, pid;          /* the worker that ran it (once collected; -1/0 when unknown) */
  PyObject *outcome;      /* once collected: the value or the exception */
  PyObject *weakreflist;
} TaskObject;

extern PyTypeObject SpPool_Type, SpTask_Type, SpView_Type, SpMap_Type;
/* chan.c: channel endpoints; their wire form (encode exports it: NULL, or why not; decode claims
 * it: a new reference, or NULL with an exception). */
extern PyTypeObject SpChan_Type;
const char *sp_chan_encode(PyObject *ch, wire_writer *w);
PyObject *sp_chan_decode(const wire_ref *r);

int sp_pool_lock(PoolObject *po);   /* 0, or -1 with an exception (re-entrant use) */
void sp_pool_unlock(PoolObject *po);
int sp_pool_check(PoolObject *po, const char *verb); /* -1 with an exception when stopped */
/* A collected result as a Python value (new reference), or NULL with the task's exception set.
 * index: the position in collect_any / collect_all, or -1. */
PyObject *sp_result(PoolObject *po, const suiro_result *r, Py_ssize_t index);
/* Raises for a failed result (kind ERROR, DIED, CANCELLED); index as above. Returns NULL. */
PyObject *sp_raise_failure(PoolObject *po, int kind, const void *data, size_t len, int slot, int pid,
                           int64_t index);
/* Waits with the GIL released in slices, checking signals: the one wait loop of collects and
 * maps. step(ctx, slice) makes one engine call with the lock held and returns its status;
 * SUIRO_TIMEOUT means "wait again". Returns the final status, or -1 with an exception set
 * (a signal handler raised). Called with the lock held; returns with it held. */
/* SUIRO_CLOSED made up by the face (its pool object was stopped meanwhile, so the engine was not
 * asked): the engine's last error then belongs to an earlier call, and raise_status must not
 * read it ("collect: timed out" was reported for a stop). */
extern _Thread_local int sp_closed_by_face;
#define SP_CLOSED (sp_closed_by_face = 1, SUIRO_CLOSED)

typedef suiro_status (*sp_wait_step)(void *ctx, double slice);
int sp_wait(PoolObject *po, double timeout, sp_wait_step step, void *ctx);
/* A timeout argument: seconds (int or float) or a duration string ("250ms", "2s", "inf", as in Lua
 * and R); None gives dflt. Returns seconds, -1 for forever, or -2 with an exception. */
double sp_timeout_arg(PyObject *v, double dflt, const char *verb);
int sp_duration(const char *s, double *sec); /* module.c: 0, or -1 with ValueError */

/* ---- encoding (enc.c) ------------------------------------------------------------------------ */

/* A message's zero-copy grants live in its suiro_msg (suiro_face.h section 3): the encoder
 * writes into suiro_msg_writer(grants) and records each REF there; suiro_msg_sent when the message
 * went out, suiro_msg_free when it never will. */

typedef struct sp_enc_opts {
  const char *verb;       /* "submit", "task result", ... (error messages) */
  int foreign;            /* the receiver is not Python: no pickles */
  const char *foreign_lang; /* "lua", "r" for messages */
  const char *foreign_dest; /* "lua workers", "a lua host" */
  int zero_copy;          /* large arrays may go by reference (a pool is there) */
  PoolObject *pool;       /* for publishing function code (NULL: functions by value refused) */
  suiro_msg *grants;      /* zero_copy: the message being written (its writer is the w passed) */
} sp_enc_opts;

/* The task list [function, args...] (kwargs: see enc.c, "Functions"). 0, or -1 with an
 * exception naming the argument. */
int sp_encode_task(const sp_enc_opts *o, PyObject *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs,
                   wire_writer *w);
/* A LIST of n values (results, map elements). seg: first path segment kind (SP_SEG_*). */
int sp_encode_list(const sp_enc_opts *o, PyObject *const *vals, Py_ssize_t n, int seg, Py_ssize_t seg_i,
                   wire_writer *w);
/* One value as a whole buffer (suiro.wire.encode). */
int sp_encode_value(const sp_enc_opts *o, PyObject *v, wire_writer *w);
/* The function item alone, as a LIST [function] (maps). */
int sp_encode_fn_list(const sp_enc_opts *o, PyObject *fn, wire_writer *w);

enum { SP_SEG_ARG = 1, SP_SEG_KWARG, SP_SEG_INDEX, SP_SEG_KEY, SP_SEG_RESULT, SP_SEG_ELEMENT, SP_SEG_VALUE,
       SP_SEG_COLUMN, SP_SEG_FUNCTION };

/* ---- decoding (dec.c) ------------------------------------------------------------------------ */

#define SP_DEC_DESCRIBE 1 /* REF and FUNC items become descriptors (suiro.wire.decode) */
/* The bytes come from this host's own Python processes (results of its Python workers, a
 * worker's task from its host) or the caller vouches for them (suiro.wire.decode(trusted=True)):
 * pickled objects are unpickled and named Python functions imported. Without it both are refused
 * with an error naming what was refused: unpickling and importing run code the bytes choose. */
#define SP_DEC_TRUSTED 2
/* One value from a whole buffer (new reference), or NULL with an exception. region: the buffer
 * lies inside that region (a WIRE reference): large arrays in it become views of it. */
PyObject *sp_decode(const void *buf, size_t len, int flags, suiro_buf *region);
/* A task or result list: the values as a new list. */
PyObject *sp_decode_list(const void *buf, size_t len, int flags, suiro_buf *region);
/* SP_DEC_TRUSTED for results of pool po's workers when they are Python processes, else 0. */
static inline int sp_result_trust(const PoolObject *po) { return po && po->lang == WIRE_LANG_PYTHON ? SP_DEC_TRUSTED : 0; }
/* A worker's task after suiro_exec read its list and function item f (worker.c). */
int sp_decode_task_at(const wire_reader *r, const wire_item *f, PyObject *fn_in, uint64_t nargs, PyObject **fn,
                      PyObject **args);
/* A whole task list: *fn, *args (a tuple), *kwargs (the map runner's function, map.c). */
int sp_decode_task(const void *buf, size_t len, PyObject **fn, PyObject **args, PyObject **kwargs);
/* A private numpy array holding a copy of count elements (bool with NA: a masked array). */
PyObject *sp_array_from(int type, const void *data, uint64_t count, int ndim, const uint64_t *dims);

/* ---- functions: identity and caches (func.c) ------------------------------------------------ */

/* Host side. The item of callable fn, cached in po->fn_cache: a str (by reference) or an int key
 * of its pickled code, published in po's blob store (new reference, or NULL with an exception). */
PyObject *sp_function_identity(PoolObject *po, PyObject *fn);
/* fn (a plain function) by its plan: 0 with *plan (a new reference; PLAN_* below) whose names
 * still hold, 1 when fn does not go by plan, -1 with an exception. */
int sp_function_plan(PoolObject *po, PyObject *fn, PyObject **plan);
enum { PLAN_KEY, PLAN_GLOBALS, PLAN_GNAMES, PLAN_GKINDS, PLAN_CKINDS, PLAN_NDYN, PLAN_NAME, PLAN_QUALNAME, PLAN_N };
extern PyObject *sp_plan_dyn; /* _values.PLAN_DYN: the kind of a name whose value goes with every task */
/* suiro._values (new reference), with the class-key functions installed in it on first use. */
PyObject *sp_values_module(void);
/* suiro._values.<name>, looked up once into *slot (borrowed, kept for the process); NULL with the
 * error set. */
PyObject *sp_values_attr(PyObject **slot, const char *name);
extern int sp_class_keys_installed; /* set once sp_values_module has installed them */

/* Worker side: the callable a FUNC / STR item names (new reference). */
PyObject *sp_resolve_name(const char *name, size_t len);
PyObject *sp_function_from_key(uint64_t key);
extern const suiro_exec_ops sp_exec_ops; /* worker.c: the worker's callbacks for suiro_exec */
/* The function of a plan's template t (from the code cache) with what the task captured (cap: a
 * list, or NULL when nothing was): new reference, or NULL with an exception. */
PyObject *sp_build_function(PyObject *t, PyObject *cap);
/* A template of _values.function_plan: (tag, code, name, qualname, base globals, names of the
 * captured globals, names bound to the function itself, per closure cell 0 captured / 1 itself /
 * (value,)). Inline: dec.c asks it of every FUNC item (a call to func.c cost 5 instructions). */
enum { TPL_TAG, TPL_CODE, TPL_NAME, TPL_QUALNAME, TPL_BASE, TPL_DYN, TPL_SELF, TPL_CELLS, TPL_N };
static inline int sp_is_template(PyObject *o) {
  if (!PyTuple_CheckExact(o) || PyTuple_GET_SIZE(o) != TPL_N) return 0;
  PyObject *t = PyTuple_GET_ITEM(o, TPL_TAG);
  return PyUnicode_Check(t) && PyUnicode_CompareWithASCIIString(t, "suiro-fn-1") == 0;
}

/* ---- views (view.c) -------------------------------------------------------------------------- */

/* A numpy array over `bytes` bytes at data inside region b (the view takes over one reference
 * of b). type: WIRE_T_*; ndim 0 means 1-d. Read-only. New reference or NULL. */
PyObject *sp_view_array(suiro_buf *b, const void *data, uint64_t bytes, int type, int order, int ndim,
                        const uint64_t *dims);
/* If obj (a numpy array) is a contiguous view of a shared region, its region and data. */
suiro_buf *sp_view_region_of(PyObject *base);

/* ---- the package's Python helpers, lazy imports (sp.c) ------------------------------------- */

typedef struct sp_state {
  PyObject *NA, *Strings, *Frame, *Dates, *Timestamps, *Call, *Ref, *Func, *RemoteError;
  PyObject *to_wire;        /* _values.to_wire(obj, foreign) -> replacement or None */
  PyObject *make_factor, *make_dates, *make_timestamps, *make_bool_na, *make_frame, *make_call,
           *make_ref, *make_func, *make_remote_error;
  PyObject *make_failure;   /* _errors.from_result(kind, cls, msg, tb, index, slot, pid, python) */
  PyObject *format_exc;     /* _worker_support.describe_exception(exc) -> (cls, msg, tb) */
  PyObject *pickle_dumps, *pickle_loads;
  PyObject *numpy, *ndarray, *np_generic, *np_bool, *np_frombuffer, *np_dtypes[8];
  PyObject *np_masked;      /* numpy.ma.MaskedArray */
  PyObject *pd_categorical; /* pandas.Categorical, when pandas was imported */
  PyObject *dtype_num_str;  /* interned "num" */
  PyObject *s_dtype, *s_base, *s_values, *s_unit, *s_tz, *s_names, *s_columns, *s_nrow, *s_codes,
           *s_categories, *s_ordered, *s_target, *s_source, *s_args, *s_kwargs, *s_mask, *s_data;
  PyObject *worker_host_lang; /* str: the language of the host this worker serves */
} sp_state;
extern sp_state SP;

PyObject *sp_setup(PyObject *self, PyObject *d); /* _core._setup(dict of helpers) */
int sp_numpy(void);                /* imports numpy on first need: 0, or -1 with an exception */
void sp_pandas_seen(void);         /* picks up pandas.Categorical if pandas has been imported */

/* Embedded Lua readers (templates, config scripts; module.c). */
int sp_template(PyObject *spec, suiro_template *t); /* 0, or -1 with ValueError */

/* ---- maps and workers ------------------------------------------------------------------------ */

int sp_run_map(const void *arg, size_t len, suiro_out *out); /* worker: a map runner task */
int sp_exec_task(const void *arg, size_t len, suiro_out *out); /* worker: one binding task */
int sp_error_out(suiro_out *out, PyObject *exc_info_unused, int64_t index); /* current exception -> ERROR */
void sp_take_exception(wire_str *cls, wire_str *msg, wire_str *trace, PyObject **hold); /* sp.c */
PyObject *sp_current_pool(void);   /* suiro.current_pool(): borrowed worker handle (new ref) */
extern int sp_in_worker;            /* sp.c; set by worker.c */
extern int sp_host_foreign; /* sp.c, set by worker.c: what a worker's results are encoded for */
extern const char *sp_host_lang, *sp_host_dest;

/* a.reshape(shape, order="C"/"F") (new reference) */
PyObject *sp_reshape(PyObject *a, int ndim, const uint64_t *dims, int order); /* a.reshape(dims, order=) */

/* small helpers */
static inline const char *sp_lang_name(int lang) {
  return lang == WIRE_LANG_LUA ? "lua" : lang == WIRE_LANG_R ? "r" : "python";
}

/* module.c: a function reference ("module.fn", "pkg::fn") checked by the shared grammar: 0 when
 * well formed, -1 with why in err, -2 with a Python error set. */
int sp_fnref_check(PyObject *s, char *err, size_t cap);

#endif
