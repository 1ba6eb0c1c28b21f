"""suiro: pools of worker processes over shared memory, for Python (the same API as Lua's).

    import suiro
    with suiro.pool(workers=4) as pool:
        t = pool.submit(pow, 2, 16)
        t.collect(timeout=5)                      # 65536
        pool.map(math.sqrt, range(1, 10**6), template="f64").collect()

See docs/python.md in the repository.
"""

from . import _core, _errors, _values
from . import _api
from ._api import Launcher, Map, Pool, Pools, PreparedMap, current_pool, lua, open, pool, python, r, worker_script
from ._errors import (CancelledError, PeerGone, PoolClosed, PoolFull, RemoteError, StartError, SuiroError,
                      TaskError, WorkerDied)
from ._values import NA, Call, Dates, Frame, Func, Ref, Strings, Timestamps, call
from ._chan import Channel, ChannelClosed, ChannelFull, PeerDied, channel

_lua_dir = _api._lua_dir  # where the embedded Lua readers find suiro/config.lua (used by _core)
Task = _core.Task
random = _core.random
now = _core.now
reap = _core.reap
__version__ = _core.version()

_core._setup({
    "NA": NA, "Strings": Strings, "Frame": Frame, "Dates": Dates, "Timestamps": Timestamps, "Call": Call,
    "Ref": Ref, "Func": Func, "RemoteError": RemoteError,
    "to_wire": _values.to_wire, "make_factor": _values.make_factor, "make_dates": _values.make_dates,
    "make_timestamps": _values.make_timestamps, "make_bool_na": _values.make_bool_na,
    "make_frame": _values.make_frame, "make_call": _values.make_call, "make_ref": _values.make_ref,
    "make_func": _values.make_func,
    "make_remote_error": lambda cls, msg, tb, index: RemoteError(msg, cls, tb, None if index < 0 else index),
    "make_failure": _errors.from_result, "describe_exception": _values.describe_exception,
    "dumps": _values.dumps, "loads": _values.loads,
})


class _Wire:
    """suiro.wire: one value to wire bytes and back (interop and debugging)."""

    @staticmethod
    def encode(value, portable=False):
        """The wire bytes of one value as a Python receiver gets it; portable=True: as Lua and R
        receivers get it (a DataFrame as a frame, no pickles; what has no form there is refused)."""
        return _core.wire_encode(value, portable=portable)

    @staticmethod
    def decode(data, describe=False, trusted=False):
        """The value of wire bytes. Pickled Python objects and Python functions named by the
        bytes are refused (unpickling and importing run code the bytes choose) unless
        trusted=True: pass it only for bytes from a source you trust."""
        return _core.wire_decode(data, describe=describe, trusted=trusted)


wire = _Wire()

__all__ = ["pool", "Pool", "Task", "Map", "PreparedMap", "Launcher", "python", "lua", "r", "open", "Pools",
           "current_pool", "call", "Call", "random", "NA", "Strings", "Frame", "Dates", "Timestamps", "Ref",
           "Func", "wire", "SuiroError", "RemoteError", "TaskError", "WorkerDied", "CancelledError",
           "RemoteTraceback", "PoolClosed", "PoolFull", "PeerGone", "StartError", "PoolExecutor", "now",
           "worker_script", "channel", "Channel", "PeerDied", "ChannelClosed", "ChannelFull"]


def __getattr__(name):
    if name == "PoolExecutor":
        from ._executor import PoolExecutor

        return PoolExecutor
    if name == "RemoteTraceback":  # concurrent.futures.process._RemoteTraceback
        return _errors._remote_traceback_class()
    raise AttributeError("module 'suiro' has no attribute %r" % name)


def __dir__():
    # the lazily imported names (PoolExecutor, RemoteTraceback) are listed too
    return sorted(set(globals()) | set(__all__))
