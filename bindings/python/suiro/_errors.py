"""suiro's exceptions, and how a failed task's error payload becomes one.

A task that raised in a Python worker re-raises in a Python host as the original exception type
(pickled, main-script classes by value; else imported and built from its message), with the
worker's traceback chained as __cause__ (a RemoteTraceback), as concurrent.futures does.
Failures from Lua or R workers (or of exceptions that cannot be rebuilt) raise RemoteError; a
dead worker WorkerDied; a task cancelled before it started CancelledError.
"""

import builtins
import importlib

__all__ = ["SuiroError", "RemoteError", "TaskError", "WorkerDied", "CancelledError", "PoolClosed", "PoolFull",
           "PeerGone", "StartError"]  # and RemoteTraceback, resolved on first use (see __getattr__)


class SuiroError(Exception):
    """Base class of suiro's own errors."""


class RemoteError(SuiroError):
    """A task failed in a worker: remote_class, message, traceback, index (map element or None)."""

    def __init__(self, message="", remote_class="remote", traceback="", index=None):
        super().__init__(message)
        self.remote_class = remote_class
        self.message = message
        self.traceback = traceback
        self.index = index

    def __str__(self):
        where = " at element %d" % self.index if self.index is not None else ""
        cls = "" if self.remote_class == "remote" else " (%s)" % self.remote_class
        return "remote error%s%s: %s" % (cls, where, self.message)

    def __reduce__(self):
        return (RemoteError, (self.message, self.remote_class, self.traceback, self.index))


TaskError = RemoteError


class WorkerDied(SuiroError):
    """The worker running the task died: slot, pid (and index for a map element)."""

    def __init__(self, message="", slot=None, pid=None, index=None):
        super().__init__(message)
        self.message = message
        self.slot = slot
        self.pid = pid
        self.index = index

    def __str__(self):
        return "worker %s (pid %s) died: %s" % (self.slot, self.pid, self.message)

    def __reduce__(self):
        return (WorkerDied, (self.message, self.slot, self.pid, self.index))


class CancelledError(SuiroError):
    """The task was cancelled before it started."""


def _remote_traceback_class():
    """concurrent.futures' own _RemoteTraceback, so code written for ProcessPoolExecutor sees the
    same cause type (imported on first need: it pulls in multiprocessing)."""
    from concurrent.futures.process import _RemoteTraceback

    return _RemoteTraceback


def __getattr__(name):
    if name == "RemoteTraceback":
        return _remote_traceback_class()
    raise AttributeError("module 'suiro._errors' has no attribute %r" % name)


class PoolClosed(SuiroError, RuntimeError):
    """The pool is stopped (or stopping)."""


class PoolFull(SuiroError, RuntimeError):
    """The pool's queue or its result slots stayed full."""


class PeerGone(SuiroError, RuntimeError):
    """No live worker can serve the request."""


class StartError(SuiroError, RuntimeError):
    """The pool's workers did not start."""


def _exception_type(name):
    if "." not in name:
        t = getattr(builtins, name, None)
    else:
        mod, _, qual = name.rpartition(".")
        t = None
        for k in range(name.count("."), 0, -1):
            parts = name.split(".")
            try:
                m = importlib.import_module(".".join(parts[:k]))
            except Exception:
                continue
            t = m
            try:
                for p in parts[k:]:
                    t = getattr(t, p)
            except AttributeError:
                t = None
            break
    if isinstance(t, type) and issubclass(t, BaseException):
        return t
    return None


PICKLE_MARK = "suiro-pickle:"


def _unpickle_exception(tb):
    """(traceback text, the pickled exception or None) of a Python worker's error."""
    import base64
    import pickle

    at = tb.rfind(PICKLE_MARK)
    text, data = tb[:at], tb[at + len(PICKLE_MARK):].strip()
    try:
        exc = pickle.loads(base64.b64decode(data))
    except Exception:
        return text, None
    return text, exc if isinstance(exc, BaseException) else None


def from_result(kind, cls, msg, tb, index, slot, pid, python):
    """The exception for a failed result (the C core raises what this returns)."""
    idx = index if index is not None and index >= 0 else None
    if kind == 3:  # died
        return WorkerDied(msg, slot if slot >= 0 else None, pid if pid > 0 else None, idx)
    if kind == 4 or cls == "cancelled":
        e = CancelledError(msg or "the task was cancelled before it started")
        e.index = idx
        return e
    if cls == "worker_died":
        return WorkerDied(msg, slot if slot >= 0 else None, pid if pid > 0 else None, idx)
    exc = None
    if python and tb and PICKLE_MARK in tb:  # only a Python worker's own traceback part is unpickled
        tb, exc = _unpickle_exception(tb)
    if exc is not None:
        exc.__cause__ = _remote_traceback_class()(tb)
        try:
            exc.remote_class = cls
            exc.remote_traceback = tb
            exc.index = idx
        except Exception:
            pass
        return exc
    if python and cls != "remote":
        t = _exception_type(cls)
        if t is not None:
            try:
                exc = t(msg)
            except Exception:
                exc = None
            if exc is not None:
                exc.__cause__ = _remote_traceback_class()(tb)
                try:
                    exc.remote_class = cls
                    exc.remote_traceback = tb
                    exc.index = idx
                except Exception:
                    pass
                return exc
    e = RemoteError(msg, cls, tb, idx)
    if tb:
        e.__cause__ = _remote_traceback_class()(tb)
    return e
