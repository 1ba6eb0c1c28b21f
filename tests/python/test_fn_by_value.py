"""Functions no worker can import (lambdas, nested and main-script functions): their code is
published once per pool, what they captured travels with every task (func.c, "functions sent by
value"); PoolExecutor.map runs chunks of elements on the engine's map."""

import math
import os
import threading

import pytest

import suiro
from conftest import run_script

SCALE = 3
ITEMS = [1, 2]
mathlike = math


def published(p):
    return p.status()["functions_published"]


def test_a_lambda_submitted_again_is_published_once(pool1):
    f = lambda x: x + 1  # noqa: E731
    before = published(pool1)
    assert [pool1.submit(f, i).collect(timeout=10) for i in range(50)] == list(range(1, 51))
    assert published(pool1) - before == 1


def test_lambdas_made_in_a_loop_share_their_code(pool1):
    before = published(pool1)
    got = [pool1.submit(lambda x: x * i, 2).collect(timeout=10) for i in range(40)]
    assert got == [2 * i for i in range(40)]  # each task sees the i its lambda captured
    assert published(pool1) - before == 1


def test_a_changed_global_is_seen_by_the_next_task(pool1):
    global SCALE
    f = lambda x: x * SCALE  # noqa: E731
    before = published(pool1)
    try:
        assert pool1.submit(f, 2).collect(timeout=10) == 6
        SCALE = 5
        assert pool1.submit(f, 2).collect(timeout=10) == 10
        SCALE = "ab"
        assert pool1.submit(f, 2).collect(timeout=10) == "abab"
    finally:
        SCALE = 3
    assert published(pool1) - before == 1  # the values travel, the code stays


COUNT = 0


def test_a_task_writing_a_global_leaves_the_next_task_the_hosts_value(pool1):
    def bump():
        global COUNT
        COUNT += 1
        return COUNT

    assert [pool1.submit(bump).collect(timeout=10) for _ in range(3)] == [1, 1, 1]
    assert COUNT == 0


def test_a_mutated_global_is_seen_by_the_next_task(pool1):
    f = lambda: list(ITEMS)  # noqa: E731
    assert pool1.submit(f).collect(timeout=10) == [1, 2]
    ITEMS.append(3)
    try:
        assert pool1.submit(f).collect(timeout=10) == [1, 2, 3]
    finally:
        del ITEMS[2:]


def test_a_large_captured_list_goes_by_content(pool1):
    big = list(range(10000))
    f = lambda i: (big[i], len(big))  # noqa: E731
    assert [pool1.submit(f, i).collect(timeout=10) for i in (0, 9999)] == [(0, 10000), (9999, 10000)]
    big[0] = "changed"
    big.append(None)
    assert pool1.submit(f, 0).collect(timeout=10) == ("changed", 10001)


def test_a_global_rebound_to_another_module_makes_new_code(pool1):
    global mathlike
    f = lambda x: mathlike.floor(x)  # noqa: E731
    before = published(pool1)
    try:
        assert pool1.submit(f, 2.5).collect(timeout=10) == 2
        assert pool1.submit(f, 3.5).collect(timeout=10) == 3
        assert published(pool1) - before == 1
        import numpy as np

        mathlike = np
        r = pool1.submit(f, 2.5).collect(timeout=10)
        assert type(r) is np.float64 and r == 2.0  # numpy.floor now (math.floor gives an int; numpy scalars stay numpy)
        assert published(pool1) - before == 2
    finally:
        mathlike = math


def test_closures_and_their_cells(pool1):
    box = [1]

    def reader():
        return sum(box)

    assert pool1.submit(reader).collect(timeout=10) == 1
    box.append(10)  # a cell's value mutated: seen
    assert pool1.submit(reader).collect(timeout=10) == 11

    n = 0

    def counter():
        return n

    for k in range(3):
        n = k  # the cell rebound: seen
        assert pool1.submit(counter).collect(timeout=10) == k

    def make(a, helper):
        return lambda x: helper(x) + a

    assert pool1.submit(make(1, abs), -5).collect(timeout=10) == 6
    assert pool1.submit(make(2, math.floor), 2.5).collect(timeout=10) == 4  # another static cell: new code


def test_recursion_defaults_and_keywords(pool1):
    def fact(k):
        return 1 if k <= 1 else k * fact(k - 1)  # its own cell

    assert pool1.submit(fact, 6).collect(timeout=10) == 720

    def f(x, y=[2], *, z=3, **kw):
        return (x, y, z, sorted(kw))

    assert pool1.submit(f, 1).collect(timeout=10) == (1, [2], 3, [])
    assert pool1.submit(f, 1, z=4, w=5).collect(timeout=10) == (1, [2], 4, ["w"])
    f.__defaults__[0].append(9)
    assert pool1.submit(f, 1).collect(timeout=10) == (1, [2, 9], 3, [])


def test_helpers_and_mutual_recursion(pool1):
    def even(k):
        return True if k == 0 else odd(k - 1)

    def odd(k):
        return False if k == 0 else even(k - 1)

    assert [pool1.submit(even, k).collect(timeout=10) for k in range(4)] == [True, False, True, False]

    def double(x):
        return x * 2

    def triple(x):
        return x * 3

    def make_outer(helper):
        def outer(x):
            return helper(x) + 1
        return outer

    before = published(pool1)
    outer = make_outer(double)
    assert [pool1.submit(outer, k).collect(timeout=10) for k in range(5)] == [1, 3, 5, 7, 9]
    assert published(pool1) - before == 2  # outer's code and double's, once each
    assert pool1.submit(make_outer(triple), 1).collect(timeout=10) == 4  # another helper in the cell


def test_a_function_with_attributes_is_pickled_whole(pool1):
    def f():
        return 7

    f.tag = "x"
    assert pool1.submit(f).collect(timeout=10) == 7
    g = lambda: g.tag  # noqa: E731
    g.tag = 1
    assert pool1.submit(g).collect(timeout=10) == 1
    h = lambda: getattr(h, "tag", None)  # noqa: E731
    assert pool1.submit(h).collect(timeout=10) is None  # by its plan
    h.tag = 2  # an attribute set since: pickled whole, with it
    assert pool1.submit(h).collect(timeout=10) == 2


def test_a_captured_value_that_cannot_be_sent_says_which(pool1):
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"lock"):
        pool1.submit(lambda: lock)
    assert pool1.submit(lambda: 1).collect(timeout=10) == 1  # the pool is fine


def test_nested_tasks_of_a_lambda(pool):
    def outer(k):
        p = suiro.current_pool()
        return p.submit(lambda: k * 2).collect(timeout=30) + 1

    assert [pool.submit(outer, k).collect(timeout=30) for k in range(3)] == [1, 3, 5]


def test_a_map_of_a_lambda(pool):
    off = 100
    assert pool.map(lambda x: x + off, range(10)).collect(timeout=30) == [x + 100 for x in range(10)]


MAIN_SCRIPT = r'''
import suiro

OFFSET = 10

class Point:
    def __init__(self, x):
        self.x = x

def helper(x):
    return x * 2

def mainfn(x):
    return x + OFFSET

def uses_helper(x):
    return helper(x) + 1

def uses_point(x):
    return P.x + x

P = Point(5)

with suiro.pool(workers=1) as p:
    before = p.status()["functions_published"]
    out = [p.submit(mainfn, i).collect(timeout=30) for i in range(20)]
    print(out == [i + 10 for i in range(20)], p.status()["functions_published"] - before)
    OFFSET = 1000
    print(p.submit(mainfn, 1).collect(timeout=30))
    before = p.status()["functions_published"]
    print([p.submit(uses_helper, 4).collect(timeout=30) for _ in range(5)], p.status()["functions_published"] - before)
    print(p.submit(uses_point, 1).collect(timeout=30))
    P.x = 50
    print(p.submit(uses_point, 1).collect(timeout=30))
'''


def test_main_script_functions_are_published_once(tmp_path):
    r = run_script(tmp_path, "mainfns.py", MAIN_SCRIPT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True 1", "1001", "[9, 9, 9, 9, 9] 2", "6", "51"], r.stdout + r.stderr


# ---- PoolExecutor.map in chunks ------------------------------------------------------------------


def test_executor_map_in_chunks_keeps_order_and_raises_in_place(pool):
    with pool.executor() as ex:
        n = 5000
        assert list(ex.map(lambda x: x * 2, range(n))) == [2 * x for x in range(n)]
        assert list(ex.map(pow, range(50), [2] * 50, chunksize=7)) == [x * x for x in range(50)]
        it = ex.map(lambda x: 1 // (x - 3001), range(n))
        got = []
        with pytest.raises(ZeroDivisionError) as e:
            for v in it:
                got.append(v)
        assert len(got) == 3001 and got[:2] == [1 // -3001, 1 // -3000]
        assert "3001" in str(e.value) or getattr(e.value, "index", 3001) == 3001


def test_executor_map_runs_every_element_of_a_chunk_that_raised(pool, tmp_path):
    mark = str(tmp_path)

    def touch(x):
        if x == 2:
            raise ValueError("two")
        open(os.path.join(mark, str(x)), "w").close()
        return x

    with pool.executor() as ex:
        it = ex.map(touch, range(6), chunksize=6)
        assert next(it) == 0 and next(it) == 1
        with pytest.raises(ValueError, match="two"):
            next(it)
    assert sorted(os.listdir(mark)) == ["0", "1", "3", "4", "5"]


def test_a_lambda_task_between_maps_by_name(pool1):
    import pyfuncs

    # the worker remembers the last function a map named and the last function it built: apart
    assert pool1.map(pyfuncs.identity, range(3)).collect(timeout=10) == [0, 1, 2]
    assert pool1.submit(lambda: "built").collect(timeout=10) == "built"
    assert pool1.map(pyfuncs.identity, range(3)).collect(timeout=10) == [0, 1, 2]
