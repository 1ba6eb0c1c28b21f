"""Functions the tests send by reference (workers import this module: the host's sys.path
reaches them through SUIRO_PYTHONPATH)."""

import math
import os
import signal
import time

import suiro


class MyError(Exception):
    pass


class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def add(a, b=0, *, c=0):
    return a + b + c


def echo(*args, **kwargs):
    if kwargs:
        return [list(args), kwargs]
    return args[0] if len(args) == 1 else list(args)


def sleep_then(seconds, value):
    time.sleep(seconds)
    return value


def nap(seconds):
    time.sleep(seconds)
    return seconds


def raise_(kind, msg="boom"):
    if kind == "value":
        raise ValueError(msg)
    if kind == "key":
        raise KeyError(msg)
    if kind == "zero":
        return 1 / 0
    if kind == "my":
        raise MyError(msg)
    if kind == "two":
        raise TwoArgError(msg, 2)
    if kind == "type":
        raise TypeError(msg)
    if kind == "local":
        class LocalError(Exception):
            pass

        raise LocalError(msg)
    raise RuntimeError(msg)


def deep_raise(n):
    if n == 0:
        raise ValueError("at the bottom")
    return deep_raise(n - 1)


def pid():
    return os.getpid()


def die():
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)


def slot_and_pid():
    return os.getpid()


def part_total(part):
    nested = suiro.current_pool().map(math.sqrt, part)
    return sum(nested.collect())


def part_total_f64(part):
    return float(suiro.current_pool().map(math.sqrt, part, template="f64").collect().sum())


def nested_submit(n):
    p = suiro.current_pool()
    tasks = [p.submit(add, i, 1) for i in range(n)]
    return sum(p.collect_all(tasks))


def draws(i):
    return suiro.random()


def draws_int(i):
    return suiro.random(1, 6)


def rand_upto(i):
    return suiro.random(i)


def env(name):
    return os.environ.get(name)


def array_info(a):
    return [str(a.dtype), list(a.shape), bool(a.flags.writeable), bool(a.flags.f_contiguous)]


def times2(a):
    return a * 2


def identity(x):
    return x


def spin(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass
    return us


def view_region(a):
    from suiro import _core

    b = a.base
    while b is not None and not isinstance(b, _core.View):
        b = getattr(b, "base", None)
    return b.region() if b is not None else None


def spin_forever(*_):
    """Never returns, in pure Python (only killing its worker stops it)."""
    while True:
        pass


def via_r_pool(n, rounds=2):
    """Run in a worker: starts an R pool of its own and sends it a shared array (n doubles) and a
    long string, `rounds` times; returns what came back (the sums, the lengths, the last array)."""
    import numpy as np
    import suiro
    out = []
    with suiro.pool(workers=1, launcher=suiro.r(), timeout=60) as q:
        x = np.arange(n, dtype=np.float64)
        for _ in range(rounds):
            y = q.submit(suiro.call(source="x + 1", x=x)).collect(timeout=60)
            s = q.submit(suiro.call(source="paste0(s, 'r')", s="p" * 4096)).collect(timeout=60)
            out.append((float(np.sum(y)), len(s)))
    return out, y


def nested_list(depth):
    """A list nested depth levels deep around 1 (a result too deep to send back)."""
    v = 1
    for _ in range(depth):
        v = [v]
    return v
