"""suiro.PoolExecutor: a concurrent.futures.Executor over a suiro pool, a drop-in for
ProcessPoolExecutor code.

    with suiro.PoolExecutor(max_workers=4) as ex:
        futures = [ex.submit(pow, 2, i) for i in range(4)]
        [f.result() for f in futures]                        # [1, 2, 4, 8]

- submit() returns real concurrent.futures.Future objects (wait, as_completed and
  asyncio.wrap_future work); one drain thread per executor completes them, woken by the pool's
  eventfd (a burst of results is one wake-up).
- map(fn, *iterables, timeout=None, chunksize=1) runs on the engine's map, each of its elements a
  chunk of the input (chunksize when above 1, else sized so each worker gets ~16 chunks; short
  maps are not chunked); results come in order, an element's exception is raised when the
  iteration reaches it, and every element runs.
- A worker that dies fails only the futures it was running, with WorkerLost (a BrokenProcessPool
  and a suiro.WorkerDied); the pool respawns it and stays usable. A failing initializer breaks the
  executor, as in ProcessPoolExecutor.
- Futures are never "running" (the engine does not say when a task starts); cancel() is advisory:
  a task that already started runs to its end and its result is dropped.
"""

import logging
import os
import select
import threading
import uuid
import weakref
from concurrent.futures import Executor, Future, InvalidStateError
from concurrent.futures.process import BrokenProcessPool

from . import _api, _core, _errors
from ._errors import WorkerDied
from ._values import _MAIN_NAMES, PICKLE_MARK, describe_exception

__all__ = ["PoolExecutor", "WorkerLost"]

LOGGER = logging.getLogger("concurrent.futures")
_interpreter_exiting = False



def _settle(f, value=None, exc=None):
    """Completes future f unless it is done already: a caller may cancel it at any moment, and
    then the cancel wins (set_* would raise InvalidStateError in the thread completing it)."""
    try:
        if exc is not None:
            f.set_exception(exc)
        else:
            f.set_result(value)
    except InvalidStateError:
        pass


class WorkerLost(BrokenProcessPool, WorkerDied):
    """The worker running this future died (the executor stays usable)."""

    def __init__(self, message="", slot=None, pid=None, index=None):
        WorkerDied.__init__(self, message, slot, pid, index)

    def __str__(self):
        return "A process in the pool died while running this future: worker %s (pid %s): %s" % (
            self.slot, self.pid, self.message)


class _Future(Future):
    """A Future whose cancel() succeeds only while its task has not started (as a
    ProcessPoolExecutor future stops being cancellable once a worker holds it)."""

    __slots__ = ("_task",)

    def cancel(self):
        t = getattr(self, "_task", None)
        if t is not None and not self.done():
            try:
                if not t.cancel():
                    return False
            except Exception:
                return False
        return super().cancel()


class _InitializerFailed(Exception):
    """Raised in a worker whose initializer failed (the host then breaks the executor)."""


_initialized = {}  # worker side: executor key -> what its initializer left (False: nothing to carry)


def _run(key, init, initargs, fn, args, kwargs):
    """The worker side of a submit with an initializer: runs it once per process first."""
    st = _initialized.get(key)
    if st is None:
        try:
            init(*initargs)
        except BaseException as e:
            cls, msg, tb = describe_exception(e)
            raise _InitializerFailed(tb.partition(PICKLE_MARK)[0], "%s: %s" % (cls, msg)) from None
        st = _initialized[key] = _init_state(init) or False
    if st:
        _with_state(fn, st)
    return fn(*args, **kwargs)


# A main-script initializer and the executor's main-script tasks travel by value (_values.dumps):
# each arrives with its own copy of the globals it names, so what the initializer set up there
# (`global conn; conn = connect()`, `CACHE.update(...)`) would be lost to the tasks. As with
# ProcessPoolExecutor, whose tasks share the worker's main module with the initializer, the
# globals the initializer assigned, and the values (not modules, functions or classes) it read,
# are kept per worker and given to every main-script task function of the executor (and the
# main-script functions it names) before it runs; the host's globals are left as they are.
def _init_state(init):
    import types

    if type(init) is not types.FunctionType or init.__globals__.get("__name__") not in _MAIN_NAMES:
        return None  # an importable initializer sets up its own module, which tasks import
    stored = _stored_names(init.__code__, set())
    static = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return {k: v for k, v in init.__globals__.items()
            if not (k.startswith("__") and k.endswith("__")) and v is not init
            and (k in stored or not isinstance(v, static))}


def _stored_names(code, out):
    import dis

    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            out.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, type(code)):
            _stored_names(c, out)
    return out


def _with_state(fn, state):
    import types

    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if type(f) is not types.FunctionType:
            continue
        g = f.__globals__
        if id(g) in seen or g.get("__name__") not in _MAIN_NAMES:
            continue
        seen.add(id(g))
        g.update(state)
        todo.extend(v for v in g.values() if type(v) is types.FunctionType)


class _Chunk:
    """fn over one chunk of a map's elements: cols holds the chunk of each iterable (a column per
    argument). Every element runs (as in ProcessPoolExecutor.map); the values come back as a
    list, or as ("e", values, {position: exception}) when some raised, so that the iteration
    raises each one in place."""

    __slots__ = ("fn", "key", "init", "initargs")

    def __init__(self, fn, key=None, init=None, initargs=()):
        self.fn, self.key, self.init, self.initargs = fn, key, init, initargs

    def __call__(self, cols):
        fn = self.fn
        if self.init is not None:
            key, init, initargs = self.key, self.init, self.initargs
            fn = lambda *args: _run(key, init, initargs, self.fn, args, {})  # noqa: E731
        out = []
        put = out.append
        errs = None
        it = zip(*cols)
        while True:
            try:
                for args in it:
                    put(fn(*args))
                break
            except BaseException as e:  # this element failed: the others still run
                if errs is None:
                    errs = {}
                errs[len(out)] = describe_exception(e)
                put(None)
        return out if errs is None else ("e", out, errs)

    def __reduce__(self):
        return (_Chunk, (self.fn, self.key, self.init, self.initargs))


def _chunksize(n, workers, asked):
    """Elements per map element: the caller's chunksize when above 1; else enough that each worker
    gets ~16 chunks (no chunking for short maps, whose elements may be long), at most 1024."""
    if asked > 1:
        return asked
    return max(1, min(1024, n // (16 * max(1, workers))))


class _Proc:
    """A worker process, as ProcessPoolExecutor._processes shows them (pid, terminate, join)."""

    def __init__(self, pid):
        self.pid = pid

    def is_alive(self):
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().split(") ")[-1][:1] not in ("Z", "X")
        except OSError:
            return False

    def terminate(self):
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass

    def kill(self):
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass

    def join(self, timeout=None):
        deadline = None if timeout is None else _core.now() + timeout
        while self.is_alive():
            if deadline is not None and _core.now() >= deadline:
                return
            select.select([], [], [], 0.01)


class _State:
    """What completing an executor's futures needs, apart from the executor itself: the drain
    thread holds this (and only a weak reference to the executor), so a future whose executor was
    dropped still completes, and the executor's own pool stops once nothing is pending (as a
    ProcessPoolExecutor goes on until its pending work is done when it is garbage collected).

    Locking: `lock` guards pending, shutdown, broken and thread; futures are completed with it
    released (their callbacks may call back into the executor)."""

    def __init__(self, pool, own, max_workers, max_tasks_per_child):
        self.pool = pool
        self.own = own
        self.max_workers = max_workers
        self.max_tasks_per_child = max_tasks_per_child
        self.tasks_by_pid = {}
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.pending = {}      # Task -> Future
        self.shutdown = False
        self.broken = False
        self.thread = None
        self.gone = False      # the executor was dropped (garbage collected)

    def executor_gone(self):
        """The executor was dropped: the drain thread completes what is pending, then ends; the
        pool goes when its last holder does (this state, a map still iterated), and an owned one
        stops then."""
        with self.cv:
            self.gone = True
            self.cv.notify_all()

    def start(self):
        if self.thread is None:
            self.thread = threading.Thread(target=_drain, args=(self,), name="suiro-executor-drain", daemon=True)
            self.thread.start()

    def stop_pool(self):
        if self.own and not self.pool.closed:
            self.pool.stop()

    def finish(self, t):
        """Completes the future of collected task t (called by the drain thread, lock not held)."""
        with self.lock:
            f = self.pending.pop(t, None)
        if f is None:
            return
        f._task = None  # a done future does not hold the task (nor, through it, the pool)
        try:
            v = t.collect(0)
        except _InitializerFailed as e:
            _settle(f, exc=self.init_failed(e))
            return
        except WorkerDied as e:
            _settle(f, exc=WorkerLost(e.message, e.slot, e.pid))
            self.count(e.pid, e.slot)
            return
        except _errors.CancelledError:
            f.cancel()
            if not f.cancelled():
                _settle(f, exc=_errors.CancelledError("the task was cancelled"))
            return
        except BaseException as e:
            _settle(f, exc=e)
        else:
            _settle(f, v)
        self.count(t.worker_pid, t.worker_slot)

    def count(self, pid, slot):
        """max_tasks_per_child: a worker that ran that many tasks is replaced."""
        n = self.max_tasks_per_child
        if n is None or pid is None or slot is None:
            return
        c = self.tasks_by_pid.get(pid, 0) + 1
        self.tasks_by_pid[pid] = c
        if c >= n:
            del self.tasks_by_pid[pid]
            try:
                self.pool.retire(slot, 10)
                self.pool.spawn(1)
            except Exception:
                pass

    def init_failed(self, e):
        """The BrokenProcessPool for a worker's _InitializerFailed e: the executor breaks; the
        message names the initializer's error, its traceback is the cause (and is logged)."""
        tb = str(e.args[0]) if e.args else ""
        what = str(e.args[1]) if len(e.args) > 1 else "?"
        self.break_("A child process terminated abruptly, the process pool is not usable anymore "
                    "(the initializer failed in a worker: %s)" % what, tb)
        b = BrokenProcessPool(self.broken)
        b.__cause__ = _errors.RemoteTraceback(tb)
        return b

    def break_(self, why, tb):
        with self.lock:
            if self.broken:
                return
            self.broken = why
            pending = list(self.pending.items())
            self.pending.clear()
        LOGGER.critical("Exception in initializer:\n%s", tb)
        for t, f in pending:
            t.cancel()
            if not f.done():
                f.set_exception(BrokenProcessPool(why))


_states = weakref.WeakSet()  # of live executors and of drain threads still completing futures


class PoolExecutor(Executor):
    """A concurrent.futures.Executor whose workers are a suiro pool.

    PoolExecutor(max_workers=None, mp_context=None, initializer=None, initargs=(), *,
                 max_tasks_per_child=None, pool=None, launcher=None, **pool_options)

    The arguments of ProcessPoolExecutor (mp_context is accepted and unused: workers are always
    fresh processes, like "spawn"); pool= wraps an existing pool (left open at shutdown);
    launcher= and pool options are those of suiro.pool().
    """

    def __init__(self, max_workers=None, mp_context=None, initializer=None, initargs=(), *,
                 max_tasks_per_child=None, pool=None, launcher=None, **pool_options):
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        if max_tasks_per_child is not None:
            if not isinstance(max_tasks_per_child, int):
                raise TypeError("max_tasks_per_child must be an integer")
            if max_tasks_per_child <= 0:
                raise ValueError("max_tasks_per_child must be >= 1")
            if mp_context is not None and mp_context.get_start_method(allow_none=False) == "fork":
                raise ValueError("max_tasks_per_child is incompatible with the 'fork' multiprocessing start method; "
                                 "supply a different mp_context.")
        if pool is not None:
            if max_workers is not None or pool_options or launcher is not None:
                raise TypeError("PoolExecutor: give pool= or the options of a new pool, not both")
            own = False
            max_workers = pool.status()["live"]
        else:
            if max_workers is None:
                max_workers = os.cpu_count() or 1
            elif max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            pool = _api.pool(workers=max_workers, launcher=launcher, **pool_options)
            own = True
        if mp_context is None and max_tasks_per_child is not None:
            import multiprocessing

            mp_context = multiprocessing.get_context("spawn")
        self._mp_context = mp_context
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._key = uuid.uuid4().hex if initializer is not None else None
        self._s = s = _State(pool, own, max_workers, max_tasks_per_child)
        weakref.finalize(self, s.executor_gone).atexit = False  # not a reference cycle: s knows no executor
        _states.add(s)

    # the state, under the names ProcessPoolExecutor-minded code and the tests look for
    _pool = property(lambda self: self._s.pool)
    _own = property(lambda self: self._s.own)
    _max_workers = property(lambda self: self._s.max_workers)
    _max_tasks_per_child = property(lambda self: self._s.max_tasks_per_child)
    _lock = property(lambda self: self._s.lock)
    _pending = property(lambda self: self._s.pending)
    _shutdown = property(lambda self: self._s.shutdown)
    _broken = property(lambda self: self._s.broken)
    _thread = property(lambda self: self._s.thread)

    # ---- submitting -----------------------------------------------------------------------------

    def submit(self, fn, /, *args, **kwargs):
        s = self._s
        with s.lock:
            if s.broken:
                raise BrokenProcessPool(s.broken)
            if s.shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if _interpreter_exiting:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            f = _Future()
            try:
                if self._initializer is not None:
                    t = s.pool.submit(_run, self._key, self._initializer, self._initargs, fn, args, kwargs)
                else:
                    t = s.pool.submit(fn, *args, **kwargs)
            except (_errors.PoolClosed, _errors.PoolFull):
                raise
            except Exception as e:  # the arguments could not be sent: the future fails, as in PPE
                f.set_exception(e)
                return f
            f._task = t
            s.pending[t] = f
            s.start()
            s.cv.notify()
        return f

    submit.__doc__ = Executor.submit.__doc__

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """Like Executor.map, on the engine's map: results in order, an element's exception raised
        when the iteration reaches it; timeout counts from the call (TimeoutError then, even while
        an element never ends)."""
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        if timeout is not None:
            end = _core.now() + timeout
        s = self._s
        with s.lock:
            if s.broken:
                raise BrokenProcessPool(s.broken)
            if s.shutdown or _interpreter_exiting:
                raise RuntimeError("cannot schedule new futures after shutdown")
        cols = [list(a) for a in iterables]
        n = min(map(len, cols)) if cols else 0
        cs = _chunksize(n, s.max_workers, chunksize)
        chunks = [[c[i:i + cs] for c in cols] for i in range(0, n, cs)]
        m = s.pool.map(_Chunk(fn, self._key, self._initializer, self._initargs), chunks, stream=True)
        return _map_results(m, len(chunks), cs, None if timeout is None else end, s)

    map.__doc__ = Executor.map.__doc__ or map.__doc__

    # ---- shutting down ---------------------------------------------------------------------------

    def shutdown(self, wait=True, *, cancel_futures=False):
        s = self._s
        with s.lock:
            s.shutdown = True
            if cancel_futures:
                # As in ProcessPoolExecutor, the oldest max_workers futures count as handed to the
                # workers already (its call queue): they run; the rest are cancelled if they can be.
                for t, f in list(s.pending.items())[s.max_workers:]:
                    if f.cancel():
                        s.pending.pop(t, None)
            s.cv.notify_all()
            th = s.thread
        if th is None:
            s.stop_pool()
            return
        if wait:
            th.join()
            s.stop_pool()

    shutdown.__doc__ = Executor.shutdown.__doc__

    def _stop_pool(self):
        self._s.stop_pool()

    # ---- for code that looks at ProcessPoolExecutor's insides --------------------------------------

    @property
    def _processes(self):
        pool = self._s.pool
        if pool.closed:
            return {}
        return {w["pid"]: _Proc(w["pid"]) for w in pool.status()["workers"]
                if w["state"] in ("starting", "idle", "busy", "retiring") and w["pid"] > 0}

    @property
    def _executor_manager_thread(self):
        return self._s.thread

    @property
    def pool(self):
        """The suiro pool under this executor."""
        return self._s.pool


def _drain(s):
    """The drain thread: completes futures as their tasks finish, woken by the pool's eventfd. It
    ends once shut down (or its executor dropped) with nothing pending; after a shutdown it stops
    an owned pool."""
    pool, cv = s.pool, s.cv
    while True:
        with cv:
            while not s.pending and not s.shutdown and not s.gone:
                cv.wait(1.0)
            if not s.pending:  # shut down (or dropped) and nothing left
                break
            tasks = list(s.pending)
        try:
            fd = pool._eventfd()
            ready = pool._ready(tasks)
        except _errors.PoolClosed:
            with cv:
                pending = list(s.pending.items())
                s.pending.clear()
            for t, f in pending:
                if not f.done():
                    f.set_exception(BrokenProcessPool("the pool was stopped"))
            break
        if ready:
            for i in ready:
                s.finish(tasks[i])
        elif fd >= 0:
            select.select([fd], [], [], 0.05)
            try:
                pool._event_ack()
            except Exception:
                pass
        else:
            select.select([], [], [], 0.001)
        tasks = ready = None
    if s.shutdown:
        s.stop_pool()


def _map_results(m, n, cs, end, s=None):
    """Results of an executor map in order (its n chunks of cs elements finish in any order)."""
    core = m._m
    got = {}
    ready = []  # finished indices not read yet
    try:
        for i in range(n):
            while i not in got:
                if ready:
                    k = ready.pop()
                    got[k] = core._element(k)
                    continue
                r = core._next_range()
                if r is not None:
                    ready.extend(range(r[1] - 1, r[0] - 1, -1))
                    continue
                if not core.running:
                    core._results()  # raises the map's failure (a worker that died)
                    raise RuntimeError("map: the run ended without element %d" % i)
                left = None if end is None else end - _core.now()
                if left is not None and left <= 0:
                    raise TimeoutError()
                core._wait(0.01 if left is None else min(0.01, left))
            vals = got.pop(i)
            errs = None
            if type(vals) is tuple:  # ("e", values, {position: exception})
                _, vals, errs = vals
            vals.reverse()  # popped as they go: no local keeps a result alive while the caller holds it
            j = 0
            while vals:
                if errs is not None and j in errs:
                    cls, msg, tb = errs[j]
                    exc = _errors.from_result(2, cls, msg, tb, i * cs + j, -1, 0, True)
                    if isinstance(exc, _InitializerFailed) and s is not None:
                        exc = s.init_failed(exc)
                    raise exc
                j += 1
                yield vals.pop()
    finally:
        if core.running and not core._wait(0):
            # abandoned (a timeout, an error raised in order, the caller stopped iterating): no
            # element starts any more, and nothing waits here for those in flight (as with
            # ProcessPoolExecutor); they get a grace to end, then their workers are killed, and
            # the map is freed, in the background
            core.cancel()
            _api._end_later(core, _api._GRACE, True)
        else:
            core._free()


def _python_exit():
    """At interpreter exit: refuse new futures, let pending ones finish (as concurrent.futures)."""
    global _interpreter_exiting
    _interpreter_exiting = True
    for s in list(_states):
        with s.lock:
            s.shutdown = True
            s.cv.notify_all()
            th = s.thread
        if th is not None:
            th.join()
        s.stop_pool()


threading._register_atexit(_python_exit)
