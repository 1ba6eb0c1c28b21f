"""suiro.PoolExecutor: a concurrent.futures.Executor over a suiro pool, a drop-in for
ProcessPoolExecutor code.

    with suiro.PoolExecutor(max_workers=4) as ex:
        futures = [ex.submit(pow, 2, i) for i in range(4)]
        [f.result() for f in futures]                        # [1, 2, 4, 8]

- submit() returns real concurrent.futures.Future objects (wait, as_completed and
  asyncio.wrap_future work); one drain thread per executor completes them, woken by the pool's
  eventfd (a burst of results is one wake-up).
- map(fn, *iterables, timeout=None, chunksize=1) runs on the engine's map (chunksize is accepted
  for compatibility: the engine sizes its batches itself); results come in order, an element's
  exception is raised when the iteration reaches it.
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
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool

from . import _api, _core, _errors
from ._errors import WorkerDied
from ._values import describe_exception

__all__ = ["PoolExecutor", "WorkerLost"]

LOGGER = logging.getLogger("concurrent.futures")
_executors = weakref.WeakSet()
_interpreter_exiting = False


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


_initialized = {}  # worker side: executor key -> True once its initializer ran here


def _run(key, init, initargs, fn, args, kwargs):
    """The worker side of a submit with an initializer: runs it once per process first."""
    if key not in _initialized:
        try:
            init(*initargs)
        except BaseException as e:
            cls, msg, tb = describe_exception(e)
            raise _InitializerFailed(tb) from None
        _initialized[key] = True
    return fn(*args, **kwargs)


class _Star:
    """fn(*args) for one map element, with the element's exception returned as a value, so that
    every element runs (as in ProcessPoolExecutor.map) and the iteration raises it in place."""

    __slots__ = ("fn", "key", "init", "initargs")

    def __init__(self, fn, key=None, init=None, initargs=()):
        self.fn, self.key, self.init, self.initargs = fn, key, init, initargs

    def __call__(self, args):
        try:
            if self.init is not None:
                return ("v", _run(self.key, self.init, self.initargs, self.fn, args, {}))
            return ("v", self.fn(*args))
        except BaseException as e:
            return ("e", describe_exception(e))

    def __reduce__(self):
        return (_Star, (self.fn, self.key, self.init, self.initargs))


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
            self._pool = pool
            self._own = False
            self._max_workers = pool.status()["live"]
        else:
            if max_workers is None:
                max_workers = os.cpu_count() or 1
            elif max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            self._pool = _api.pool(workers=max_workers, launcher=launcher, **pool_options)
            self._own = True
            self._max_workers = max_workers
        if mp_context is None and max_tasks_per_child is not None:
            import multiprocessing

            mp_context = multiprocessing.get_context("spawn")
        self._mp_context = mp_context
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._key = uuid.uuid4().hex if initializer is not None else None
        self._max_tasks_per_child = max_tasks_per_child
        self._tasks_by_pid = {}
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._pending = {}      # Task -> Future
        self._shutdown = False
        self._broken = False
        self._thread = None
        _executors.add(self)

    # ---- submitting -----------------------------------------------------------------------------

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            if self._broken:
                raise BrokenProcessPool(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if _interpreter_exiting:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            f = _Future()
            try:
                if self._initializer is not None:
                    t = self._pool.submit(_run, self._key, self._initializer, self._initargs, fn, args, kwargs)
                else:
                    t = self._pool.submit(fn, *args, **kwargs)
            except (_errors.PoolClosed, _errors.PoolFull):
                raise
            except Exception as e:  # the arguments could not be sent: the future fails, as in PPE
                f.set_exception(e)
                return f
            f._task = t
            self._pending[t] = f
            self._start()
            self._cv.notify()
        return f

    submit.__doc__ = Executor.submit.__doc__

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """Like Executor.map, on the engine's map: results in order, an element's exception raised
        when the iteration reaches it; timeout counts from the call."""
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        if timeout is not None:
            end = _core.now() + timeout
        with self._lock:
            if self._broken:
                raise BrokenProcessPool(self._broken)
            if self._shutdown or _interpreter_exiting:
                raise RuntimeError("cannot schedule new futures after shutdown")
        args = [list(a) for a in zip(*iterables)]
        star = _Star(fn, self._key, self._initializer, self._initargs)
        m = self._pool.map(star, args, stream=True)
        return _map_results(m, len(args), None if timeout is None else end)

    map.__doc__ = Executor.map.__doc__ or map.__doc__

    # ---- completing ------------------------------------------------------------------------------

    def _start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=_drain, args=(weakref.ref(self), self._pool, self._cv),
                                            name="suiro-executor-drain", daemon=True)
            self._thread.start()

    def _finish(self, t):
        """Completes the future of collected task t (called by the drain thread, lock not held)."""
        with self._lock:
            f = self._pending.pop(t, None)
        if f is None:
            return
        try:
            v = t.collect(0)
        except _InitializerFailed as e:
            self._break("A child process terminated abruptly, the process pool is not usable anymore",
                        str(e.args[0]) if e.args else "")
            if not f.cancelled():
                f.set_exception(BrokenProcessPool(self._broken))
            return
        except WorkerDied as e:
            if not f.done():
                f.set_exception(WorkerLost(e.message, e.slot, e.pid))
            self._count(e.pid, e.slot)
            return
        except _errors.CancelledError:
            f.cancel()
            if not f.cancelled() and not f.done():
                f.set_exception(_errors.CancelledError("the task was cancelled"))
            return
        except BaseException as e:
            if not f.done():
                f.set_exception(e)
        else:
            if not f.done():
                f.set_result(v)
        self._count(t.worker_pid, t.worker_slot)

    def _count(self, pid, slot):
        """max_tasks_per_child: a worker that ran that many tasks is replaced."""
        n = self._max_tasks_per_child
        if n is None or pid is None or slot is None:
            return
        c = self._tasks_by_pid.get(pid, 0) + 1
        self._tasks_by_pid[pid] = c
        if c >= n:
            del self._tasks_by_pid[pid]
            try:
                self._pool.retire(slot, 10)
                self._pool.spawn(1)
            except Exception:
                pass

    def _break(self, why, tb):
        with self._lock:
            if self._broken:
                return
            self._broken = why
            pending = list(self._pending.items())
            self._pending.clear()
        LOGGER.critical("Exception in initializer:\n%s", tb)
        for t, f in pending:
            t.cancel()
            if not f.done():
                f.set_exception(BrokenProcessPool(why))

    # ---- shutting down ---------------------------------------------------------------------------

    def shutdown(self, wait=True, *, cancel_futures=False):
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                # As in ProcessPoolExecutor, the oldest max_workers futures count as handed to the
                # workers already (its call queue): they run; the rest are cancelled if they can be.
                for t, f in list(self._pending.items())[self._max_workers:]:
                    if f.cancel():
                        self._pending.pop(t, None)
            self._cv.notify_all()
            th = self._thread
        if th is None:
            self._stop_pool()
            return
        if wait:
            th.join()
            self._stop_pool()

    shutdown.__doc__ = Executor.shutdown.__doc__

    def _stop_pool(self):
        if self._own and not self._pool.closed:
            self._pool.stop()

    # ---- for code that looks at ProcessPoolExecutor's insides --------------------------------------

    @property
    def _processes(self):
        if self._pool.closed:
            return {}
        return {w["pid"]: _Proc(w["pid"]) for w in self._pool.status()["workers"]
                if w["state"] in ("starting", "idle", "busy", "retiring") and w["pid"] > 0}

    @property
    def _executor_manager_thread(self):
        return self._thread

    @property
    def pool(self):
        """The suiro pool under this executor."""
        return self._pool


def _drain(ref, pool, cv):
    """The drain thread: completes futures as their tasks finish, woken by the pool's eventfd."""
    while True:
        ex = ref()
        if ex is None:
            return
        with cv:
            while not ex._pending and not ex._shutdown:
                cv.wait(0.1)
            if not ex._pending:  # shut down and nothing left
                del ex
                break
            tasks = list(ex._pending)
        try:
            fd = pool._eventfd()
            ready = pool._ready(tasks)
        except _errors.PoolClosed:
            with cv:
                pending = list(ex._pending.items())
                ex._pending.clear()
            for t, f in pending:
                if not f.done():
                    f.set_exception(BrokenProcessPool("the pool was stopped"))
            break
        if ready:
            for i in ready:
                ex._finish(tasks[i])
        else:
            del ex
            if fd >= 0:
                select.select([fd], [], [], 0.05)
                try:
                    pool._event_ack()
                except Exception:
                    pass
            else:
                select.select([], [], [], 0.001)
        ex = None
    ex = ref()
    if ex is not None and ex._own and ex._shutdown and not pool.closed:
        pool.stop()


def _map_results(m, n, end):
    """Results of an executor map in order (elements finish in any order)."""
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
            if got[i][0] == "e":
                cls, msg, tb = got.pop(i)[1]
                raise _errors.from_result(2, cls, msg, tb, i, -1, 0, True)
            yield got.pop(i)[1]  # no local keeps the result alive while the caller holds it
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
    for ex in list(_executors):
        with ex._lock:
            ex._shutdown = True
            ex._cv.notify_all()
            th = ex._thread
        if th is not None:
            th.join()
        ex._stop_pool()


threading._register_atexit(_python_exit)
