"""Objects of a main script (issue 18 item 4): functions passed as arguments, instances of its
classes, dataclasses and enums, its exceptions, PoolExecutor(initializer=...), scipy's
quad_vec(workers=ex.map), and task functions of a script re-run by multiprocessing (spawn,
forkserver) as __mp_main__. No worker can import them by name: they travel by value
(cloudpickle) and come back as the host's own classes.

Each test runs a real main script in a new interpreter (pytest's own __main__ is not one)."""

import importlib.util

import pytest

from conftest import run_script


def run(tmp_path, name, text):
    r = run_script(tmp_path, name, text)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.splitlines()


ARGS_SCRIPT = r'''
import suiro
import pyfuncs

def square(x):
    return x * x

def neg(x):
    return -x

def apply(f, x):
    return f(x)

def apply_fn(f):
    return f(7)

with suiro.pool(workers=1) as p:
    print(p.submit(apply, square, 3).collect(timeout=30))             # by-value task, function argument
    print(p.submit(sorted, [3, 1, 2], key=neg).collect(timeout=30))   # importable task, keyword function
    back = p.submit(pyfuncs.identity, [square, {"f": neg}]).collect(timeout=30)  # a copy comes back
    print(back[0](4) + back[1]["f"](1) == 15 and back[0].__name__ == "square")
    print(p.map(apply_fn, [square, neg, square]).collect(timeout=30))
with suiro.PoolExecutor(2) as ex:
    print(list(ex.map(apply_fn, [square] * 50)) == [49] * 50)
    print(ex.submit(apply, neg, 4).result(timeout=30))
'''


def test_main_script_functions_as_arguments(tmp_path):
    assert run(tmp_path, "args.py", ARGS_SCRIPT) == ["9", "[3, 2, 1]", "True", "[49, -7, 49]", "True", "-4"]


ARGS_ONCE_SCRIPT = r'''
import suiro

SCALE = 2

def scaled(x):
    return x * SCALE

def apply_one(f):
    return f(5)

with suiro.pool(workers=1) as p:
    before = p.status()["functions_published"]
    got = [p.submit(sorted, [3, 1, 2], key=scaled).collect(timeout=30) for _ in range(30)]
    print(got == [[1, 2, 3]] * 30, p.status()["functions_published"] - before)
    SCALE = -1                                  # what it reads travels with it
    print(p.submit(sorted, [3, 1, 2], key=scaled).collect(timeout=30), p.status()["functions_published"] - before)
    print(p.map(apply_one, [scaled] * 20).collect(timeout=30) == [-5] * 20, p.status()["functions_published"] - before)
'''


def test_a_main_script_function_argument_is_published_once(tmp_path):
    # as a task function is (issue 20 item 2): its code once per pool, its globals with each task
    assert run(tmp_path, "argsonce.py", ARGS_ONCE_SCRIPT) == ["True 1", "[3, 2, 1] 1", "True 2"]


CLASSES_SCRIPT = r'''
import dataclasses
import enum
import suiro
import pyfuncs

@dataclasses.dataclass(frozen=True)
class Pt:
    x: int
    y: int

class Box:
    def __init__(self, v):
        self.v = v
    def twice(self):
        return self.v * 2

class Color(enum.Enum):
    RED = 1
    GREEN = 2

class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2

def make():
    return Pt(3, 4), Box(5), Color.GREEN, Level.HIGH

def moved(pt):
    return dataclasses.replace(pt, x=pt.x + 1)

def show(r):
    print(" ".join(str(v) for v in r))

with suiro.pool(workers=2) as p:
    r = p.submit(pyfuncs.identity, Pt(1, 2)).collect(timeout=30)
    show([type(r) is Pt, r == Pt(1, 2)])
    r = p.submit(pyfuncs.identity, Box(7)).collect(timeout=30)
    show([type(r) is Box, r.v, r.twice()])
    r = p.submit(pyfuncs.identity, [Color.RED, {"l": Level.LOW}]).collect(timeout=30)
    show([r[0] is Color.RED, r[1]["l"] is Level.LOW])
    pt, box, c, lv = p.submit(make).collect(timeout=30)    # made in the worker
    show([type(pt) is Pt, pt == Pt(3, 4), isinstance(box, Box), box.v, c is Color.GREEN, lv is Level.HIGH])
    show([p.submit(moved, Pt(1, 1)).collect(timeout=30) == Pt(2, 1)])
    show([p.submit(getattr, Color, "GREEN").collect(timeout=30) is Color.GREEN])  # the class itself
    show([p.submit(pyfuncs.identity, Pt).collect(timeout=30) is Pt])
    got = p.map(moved, [Pt(i, 0) for i in range(20)]).collect(timeout=30)
    show([got == [Pt(i + 1, 0) for i in range(20)]])
with suiro.PoolExecutor(2) as ex:
    show([list(ex.map(moved, [Pt(i, i) for i in range(30)])) == [Pt(i + 1, i) for i in range(30)]])
'''


def test_main_script_classes_dataclasses_and_enums_keep_their_types(tmp_path):
    assert run(tmp_path, "classes.py", CLASSES_SCRIPT) == [
        "True True", "True 7 14", "True True", "True True True 5 True True", "True", "True", "True", "True", "True"]


ERRORS_SCRIPT = r'''
import concurrent.futures as cf
import suiro
import pyfuncs

class AppError(Exception):
    pass

class CodeError(AppError):
    def __init__(self, code):
        super().__init__(code)
        self.code = code

    def __str__(self):
        return "code %d" % self.code

def boom(x):
    raise AppError("bad %s" % x)

def coded(x):
    if x == 3:
        raise CodeError(x)
    return x

def raiser(exc):
    raise exc

with suiro.pool(workers=1) as p:
    try:
        p.submit(boom, 1).collect(timeout=30)
    except AppError as e:
        print(type(e) is AppError, e.args, "in boom" in e.remote_traceback, "in boom" in str(e.__cause__))
    try:
        p.submit(pyfuncs.identity, None).collect(timeout=30)
        p.submit(raiser, CodeError(9)).collect(timeout=30)   # an instance sent from the host, raised there
    except CodeError as e:
        print(type(e) is CodeError, e.code, isinstance(e, AppError))
    try:
        p.map(coded, range(6)).collect(timeout=30)
    except CodeError as e:
        print(e.code, e.index)
    try:
        p.submit(pyfuncs.raise_, "value", "plain").collect(timeout=30)
    except ValueError as e:
        print(type(e).__name__, e.args)
with suiro.PoolExecutor(1) as ex:
    f = ex.submit(boom, 2)
    print(type(f.exception(timeout=30)) is AppError)
'''


def test_main_script_exceptions_arrive_as_their_class(tmp_path):
    assert run(tmp_path, "errors.py", ERRORS_SCRIPT) == [
        "True ('bad 1',) True True", "True 9 True", "3 3", "ValueError ('plain',)", "True"]


INIT_SCRIPT = r'''
import concurrent.futures as cf
import os
import suiro

CONN = None
CACHE = {}
RUNS = []

def init(tag):
    global CONN, LATE
    CONN = "conn-%s-%d" % (tag, os.getpid())
    LATE = tag                 # a name the host never defined
    CACHE["k"] = tag
    RUNS.append(1)

def probe(_):
    return CONN, LATE, CACHE.get("k"), len(RUNS), os.getpid()

def bad_init():
    raise RuntimeError("no database")

with suiro.PoolExecutor(2, initializer=init, initargs=("db",)) as ex:
    res = list(ex.map(probe, range(40))) + [ex.submit(probe, 0).result(timeout=30) for _ in range(10)]
    print(all(c == "conn-db-%d" % pid and late == "db" and k == "db" and n == 1 for c, late, k, n, pid in res),
          len({pid for *_, pid in res}) >= 1)
print(CONN, CACHE, RUNS)           # the host's own globals untouched
with suiro.PoolExecutor(1, initializer=bad_init) as ex:
    try:
        ex.submit(probe, 0).result(timeout=30)
        print("no error")
    except cf.process.BrokenProcessPool as e:
        print("broken", "RuntimeError: no database" in str(e), "in bad_init" in str(e.__cause__))
    try:
        ex.submit(probe, 0)
    except cf.process.BrokenProcessPool:
        print("stays broken")
with suiro.PoolExecutor(1, initializer=bad_init) as ex:
    try:
        list(ex.map(probe, range(5)))
    except cf.process.BrokenProcessPool as e:
        print("map broken", "RuntimeError: no database" in str(e))
'''


def test_a_main_script_initializer_runs_once_per_worker_before_tasks(tmp_path):
    assert run(tmp_path, "init.py", INIT_SCRIPT) == ["True True", "None {} []", "broken True True", "stays broken", "map broken True"]


QUAD_SCRIPT = r'''
import numpy as np
from scipy.integrate import quad_vec
import suiro

def f(x):
    return np.array([x, x * x, np.sin(x)])

with suiro.PoolExecutor(2) as ex:
    got, err = quad_vec(f, 0.0, 2.0, workers=ex.map)
want, _ = quad_vec(f, 0.0, 2.0)
print(np.allclose(got, want), np.allclose(got, [2.0, 8.0 / 3.0, 1 - np.cos(2.0)]))
'''


def test_scipy_quad_vec_with_an_executor_map(tmp_path):
    if importlib.util.find_spec("scipy") is None:
        pytest.skip("scipy is not installed (scripts/setup installs python3-scipy)")
    assert run(tmp_path, "quad.py", QUAD_SCRIPT) == ["True True"]


MP_SCRIPT = r'''
import dataclasses
import multiprocessing as mp
import sys
import suiro

@dataclasses.dataclass
class Pt:
    x: int

class AppError(Exception):
    pass

def square(x):
    return x * x

def apply(f, x):
    return f(x)

def bump(pt):
    return Pt(pt.x + 1)

def boom():
    raise AppError("child")

def child(q):
    out = []
    try:
        with suiro.pool(workers=1) as p:
            out.append(p.submit(square, 5).collect(timeout=30))
            out.append(p.submit(apply, square, 6).collect(timeout=30))
            r = p.submit(bump, Pt(1)).collect(timeout=30)
            out.append(type(r) is Pt and r == Pt(2))
            rs = [p.submit(bump, Pt(i)).collect(timeout=30) for i in range(50)]   # the class by key, once
            out.append(all(type(r) is Pt and r == Pt(i + 1) for i, r in enumerate(rs)))
            try:
                p.submit(boom).collect(timeout=30)
            except AppError:
                out.append("AppError")
    except BaseException as e:
        out.append("error: %r" % (e,))
    q.put(out)

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    q = ctx.Queue()
    pr = ctx.Process(target=child, args=(q,))
    pr.start()
    print(q.get(timeout=60))
    pr.join(30)
    print("exit", pr.exitcode)
'''


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_main_script_functions_in_a_multiprocessing_child(tmp_path, method):
    import subprocess
    import sys
    import os

    script = tmp_path / "mpchild.py"
    script.write_text(MP_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, str(script), method], capture_output=True, text=True, timeout=120, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["[25, 36, True, True, 'AppError']", "exit 0"], r.stdout + r.stderr


FAST_SCRIPT = r'''
import collections
import decimal
import fractions
import signal
import sys
import suiro
import pyfuncs

with suiro.pool(workers=1) as p:
    vals = [fractions.Fraction(1, 3), decimal.Decimal("1.5"), collections.Counter("aab"), signal.Signals.SIGTERM,
            {1, 2}, pyfuncs.identity, b"__main_"]
    print(p.submit(pyfuncs.identity, vals).collect(timeout=30) == vals)
    try:
        p.submit(pyfuncs.raise_, "my", "m").collect(timeout=30)
    except pyfuncs.MyError as e:
        print("MyError", e.args)
    print("cloudpickle" in sys.modules)      # importable objects never need it
'''


def test_importable_objects_pickle_without_cloudpickle(tmp_path):
    assert run(tmp_path, "fast.py", FAST_SCRIPT) == ["True", "MyError ('m',)", "False"]


ONCE_SCRIPT = r'''
import dataclasses
import enum
import suiro
from suiro import _values
import pyfuncs

@dataclasses.dataclass
class Pt:
    x: int
    y: int

class Color(enum.Enum):
    RED = 1
    GREEN = 2

def same_type(a, b):
    return type(a) is type(b) and type(a).__name__ == "Pt"

def rebuilt():
    import suiro._values as v     # the classes this worker rebuilt, by the key they came under
    return sorted(c.__name__ for c in v._received)

with suiro.pool(workers=1) as p:
    before = _values.class_blobs
    got = [p.submit(pyfuncs.identity, Pt(i, -i)).collect(timeout=30) for i in range(1000)]
    print(all(type(r) is Pt for r in got), got[999] == Pt(999, -999), _values.class_blobs - before)
    print(p.submit(same_type, Pt(1, 2), Pt(3, 4)).collect(timeout=30),
          p.submit(pyfuncs.identity, [Color.RED, Color.GREEN]).collect(timeout=30) == [Color.RED, Color.GREEN],
          _values.class_blobs - before)
    print(rebuilt() if False else p.submit(rebuilt).collect(timeout=30))
with suiro.pool(workers=1) as q:              # another pool: published there too, the blob made once
    print(q.submit(pyfuncs.identity, Pt(5, 6)).collect(timeout=30) == Pt(5, 6), _values.class_blobs - before)
'''


def test_a_main_script_class_is_published_once_per_pool(tmp_path):
    # issue 20: an object costs its state; its class goes once (a key afterwards), both ways
    assert run(tmp_path, "once.py", ONCE_SCRIPT) == ["True True 1", "True True 2", "['Color', 'Pt']", "True 2"]


CHANGE_SCRIPT = r'''
import dataclasses
import suiro
from suiro import _values
import pyfuncs

OFFSET = 10

class Pt:
    tags = ["a"]
    scale = 2
    def __init__(self, x):
        self.x = x
    def value(self):
        return self.x * self.scale + OFFSET

def value(pt):
    return pt.value(), list(pt.tags), type(pt).__name__

with suiro.pool(workers=1) as p:
    b0 = _values.class_blobs
    print(p.submit(value, Pt(1)).collect(timeout=30), p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    k1 = _values._class_entries[Pt][0]
    Pt.scale = 3                              # a class attribute rebound
    print(p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    # a task sent before the change that runs after it (a work-stealing order) sees the class it was sent with
    print(p.submit(lambda k: __import__("suiro._values").__dict__["_values"]._main_class(k).scale, k1).collect(timeout=30),
          p.submit(value, Pt(1)).collect(timeout=30))
    Pt.scale = 2                              # and set back
    print(p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    Pt.scale = 3
    OFFSET = 100                              # a global a method reads
    print(p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    Pt.tags.append("b")                       # a small container changed in place
    print(p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    def value_m(self):
        return -self.x
    Pt.value = value_m                        # a method replaced
    print(p.submit(value, Pt(1)).collect(timeout=30), _values.class_blobs - b0)
    Old = Pt
    old = Old(4)

    class Pt:                                 # redefined, as a notebook cell run again
        tags = ()
        def __init__(self, x):
            self.x = x
        def value(self):
            return self.x + 0.5

    r_new = p.submit(pyfuncs.identity, Pt(1)).collect(timeout=30)
    r_old = p.submit(pyfuncs.identity, old).collect(timeout=30)
    print(p.submit(value, Pt(1)).collect(timeout=30), type(r_new) is Pt, type(r_old) is Old, r_old.value(),
          _values.class_blobs - b0)

@dataclasses.dataclass
class D:
    n: int

with suiro.pool(workers=1) as p:
    r = p.submit(pyfuncs.identity, D(1)).collect(timeout=30)
    D.__eq__ = lambda a, b: True              # dataclass methods changed between sends
    print(p.submit(lambda a, b: a == b, D(1), D(2)).collect(timeout=30), type(r) is D)
'''


def test_a_changed_or_redefined_class_is_seen(tmp_path):
    assert run(tmp_path, "change.py", CHANGE_SCRIPT) == [
        "(12, ['a'], 'Pt') (12, ['a'], 'Pt') 1",
        "(13, ['a'], 'Pt') 2",
        "2 (13, ['a'], 'Pt')",
        "(12, ['a'], 'Pt') 3",
        "(103, ['a'], 'Pt') 4",
        "(103, ['a', 'b'], 'Pt') 5",
        "(-1, ['a', 'b'], 'Pt') 6",
        "(1.5, [], 'Pt') True True -4 7",
        "True True",
    ]


RESULTS_SCRIPT = r'''
import dataclasses
import enum
import suiro

@dataclasses.dataclass(order=True)
class Pt:
    x: int
    y: int

    def norm1(self):
        return abs(self.x) + abs(self.y)

class Color(enum.Enum):
    RED = 1
    GREEN = 2

class AppError(Exception):
    pass

def make(i):                                 # instances made in the worker, of host classes
    return Pt(i, -i)

def shift(pt):
    return Pt(pt.x + 1, pt.y)

def paint(i):
    return Color(1 + i % 2)

def pair(i):
    return [Pt(i, i), {"c": Color.GREEN, "p": Pt(0, i)}]

def fail(i):
    if i == 7:
        raise AppError(Pt(i, 0))
    return i

with suiro.pool(workers=2) as p:
    got = p.map(make, range(300)).collect(timeout=30)
    print(all(type(r) is Pt for r in got), got == [Pt(i, -i) for i in range(300)], max(got).norm1())
    got = p.map(shift, [Pt(i, i) for i in range(300)]).collect(timeout=30)
    print(got == [Pt(i + 1, i) for i in range(300)], len({type(r) for r in got}))
    cs = p.map(paint, range(10)).collect(timeout=30)
    print(all(c is (Color.RED if i % 2 == 0 else Color.GREEN) for i, c in enumerate(cs)))
    r = [p.submit(pair, i).collect(timeout=30) for i in range(50)]
    print(all(x[0] == Pt(i, i) and x[1]["c"] is Color.GREEN and type(x[1]["p"]) is Pt for i, x in enumerate(r)))
    try:
        p.map(fail, range(10)).collect(timeout=30)
    except AppError as e:
        print(type(e.args[0]) is Pt, e.args[0] == Pt(7, 0), e.index)
with suiro.PoolExecutor(2) as ex:
    print(list(ex.map(shift, [Pt(i, 0) for i in range(500)])) == [Pt(i + 1, 0) for i in range(500)],
          list(ex.map(make, range(100), chunksize=7)) == [Pt(i, -i) for i in range(100)])
'''


def test_results_carry_instances_of_main_script_classes(tmp_path):
    assert run(tmp_path, "results.py", RESULTS_SCRIPT) == ["True True 598", "True 1", "True", "True", "True True 7",
                                                          "True True"]


NESTED_SCRIPT = r'''
import dataclasses
import suiro

@dataclasses.dataclass
class Pt:
    x: int

def inc(pt):
    return Pt(pt.x + 1)

def fan(pt):                                  # a worker sends the class on (its own key there)
    p = suiro.current_pool()
    rs = [t.collect(timeout=30) for t in [p.submit(inc, Pt(pt.x + i)) for i in range(5)]]
    with suiro.pool(workers=1) as q:          # and to a pool of its own
        rs += q.map(inc, rs).collect(timeout=30)
    return rs, all(type(r) is type(pt) for r in rs)

with suiro.pool(workers=2) as p:
    rs, same = p.submit(fan, Pt(10)).collect(timeout=60)
    print([r.x for r in rs], same, all(type(r) is Pt for r in rs))
'''


def test_a_worker_sends_main_script_objects_on(tmp_path):
    assert run(tmp_path, "nested.py", NESTED_SCRIPT) == ["[11, 12, 13, 14, 15, 12, 13, 14, 15, 16] True True"]
