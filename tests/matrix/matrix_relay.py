"""The middle of the type matrix's chains (docs/wire-format.md, "What crosses: the type matrix"):
task functions run in a Python worker that start a pool of their own, once per worker, pass the
value on to it and return what came back. Lua and R hosts start the Python pool with this
directory on the workers' path (SUIRO_PYTHONPATH / PYTHONPATH)."""

import atexit

import suiro

_pools = {}


def _pool():
    p = _pools.get("r")
    if p is None:
        p = _pools["r"] = suiro.pool(workers=1, launcher=suiro.r(), timeout=60)
        atexit.register(p.close)
    return p


def to_r(x):
    """x sent to this worker's own R pool (base::identity there) and back."""
    return _pool().submit(suiro.call("base::identity", x)).collect(timeout=60)


def to_r_all(xs):
    """Each of xs through to_r: a list of [True, value] or [False, message] (one task for all)."""
    out = []
    for x in xs:
        try:
            out.append([True, to_r(x)])
        except Exception as e:
            out.append([False, "%s: %s" % (type(e).__name__, e)])
    return out
