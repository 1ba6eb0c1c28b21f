"""Pools and tasks from a Python host with Python workers: submit, collect, batches, timeouts,
cancellation, status, nesting, worker deaths."""

import os
import signal
import socket
import sys
import time

import pytest

import suiro
import pyfuncs
from conftest import wait_until


def test_submit_builtin_by_reference(pool):
    t = pool.submit(pow, 2, 16)
    assert t.collect(timeout=5) == 65536
    assert t.done()
    assert t.collect() == 65536  # the outcome is kept
    assert t.result(timeout=1) == 65536


def test_values_cross(pool):
    v = [None, True, False, 1, -2**63, 2**63 - 1, 2.5, "héllo", b"\x00\xff", [1, [2]], {"a": 1, "b": [None]},
         range(3, 30, 3)]
    assert pool.submit(pyfuncs.identity, v).collect(timeout=5) == v
    assert pool.submit(pyfuncs.identity, (1, (2, [3]))).collect(timeout=5) == (1, (2, [3]))  # tuples stay tuples


def test_python_objects_cross_by_pickle(pool):
    import decimal
    import fractions

    v = {"d": decimal.Decimal("1.5"), "f": fractions.Fraction(1, 3), "s": {1, 2}, "big": 2**100, 3: "int key",
         "c": 1 + 2j}
    assert pool.submit(pyfuncs.identity, v).collect(timeout=5) == v


def test_functions_by_value(pool):
    k = 10
    assert pool.submit(lambda x: x * k, 4).collect(timeout=5) == 40

    def local(x, y=1):
        return x - y

    assert pool.submit(local, 5, y=2).collect(timeout=5) == 3


def test_keyword_arguments(pool):
    assert pool.submit(pyfuncs.add, 1, 2, c=3).collect(timeout=5) == 6
    assert pool.submit(pyfuncs.add, 1, b=5).collect(timeout=5) == 6
    assert pool.submit("pyfuncs.add", 1, c=7).collect(timeout=5) == 8


def test_name_reference(pool):
    assert pool.submit("math.sqrt", 16.0).collect(timeout=5) == 4.0
    with pytest.raises(Exception) as e:
        pool.submit("no_such_module_xyz.fn", 1).collect(timeout=5)
    assert "no_such_module_xyz" in str(e.value)


def test_call_specs(pool):
    assert pool.submit(suiro.call("math.hypot", 3, 4)).collect(timeout=5) == 5.0
    assert pool.submit(suiro.call(source="a + b", a=1, b=2)).collect(timeout=5) == 3
    assert pool.submit(suiro.call(None, 10, source="import math\nmath.floor(x) + _1", x=2.5)).collect(timeout=5) == 12
    assert pool.submit(suiro.call(source="return a * 2", a=21)).collect(timeout=5) == 42
    assert pool.submit(suiro.call(source="x = 1")).collect(timeout=5) is None
    with pytest.raises(TypeError, match="call spec carries its own arguments"):
        pool.submit(suiro.call("math.hypot", 3, 4), 5)


def test_call_spec_numpy(pool):
    np = pytest.importorskip("numpy")
    x = np.array([1.0, 2.0, 3.0])
    assert pool.submit(suiro.call("numpy.mean", x)).collect(timeout=5) == 2.0
    got = pool.submit(suiro.call(source="import numpy as np\nnp.std(x)", x=x)).collect(timeout=5)
    assert got == pytest.approx(np.std(x))


def test_submit_batch_and_collect_all(pool):
    tasks = pool.submit_batch(pow, [(2, 1), (2, 2), (2, 10)])
    assert pool.collect_all(tasks, timeout=10) == [2, 4, 1024]
    tasks = pool.submit_batch(pyfuncs.identity, ["a", 5])  # non-tuples are single arguments
    assert pool.collect_all(tasks, timeout=10) == ["a", 5]


def test_collect_any_gives_the_first(pool):
    tasks = [pool.submit(pyfuncs.sleep_then, 2.0, "slow"), pool.submit(pyfuncs.sleep_then, 0.0, "fast")]
    assert pool.collect_any(tasks, timeout=10) == (1, "fast")
    assert pool.collect_all(tasks, timeout=10) == ["slow", "fast"]


def test_collect_timeout_consumes_nothing(pool):
    t = pool.submit(pyfuncs.sleep_then, 0.5, 7)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^collect: not done after 0\.05 s$"):
        t.collect(timeout=0.05)
    assert time.monotonic() - t0 < 0.4
    assert not t.done()
    with pytest.raises(TimeoutError):
        pool.collect_all([t], timeout=0)
    assert t.collect(timeout=5) == 7


def test_collect_all_raises_first_failure(pool):
    tasks = [pool.submit(pyfuncs.identity, 1), pool.submit(pyfuncs.raise_, "value", "second"),
             pool.submit(pyfuncs.identity, 3)]
    with pytest.raises(ValueError, match="second"):
        pool.collect_all(tasks, timeout=10)
    assert tasks[0].collect() == 1 and tasks[2].collect() == 3  # the others were collected too


def test_cancel_before_start(pool1):
    busy = pool1.submit(pyfuncs.sleep_then, 0.5, "busy")
    queued = pool1.submit(pyfuncs.identity, "never")
    assert queued.cancel() is True
    with pytest.raises(suiro.CancelledError):
        queued.collect(timeout=5)
    assert busy.collect(timeout=5) == "busy"
    assert busy.cancel() is False  # finished already


def test_held_tasks_fill_the_result_slots():
    with suiro.pool(workers=1, result_slots=2) as p:
        held = [p.submit(pyfuncs.sleep_then, 0.2, i) for i in range(2)]
        with pytest.raises(suiro.PoolFull, match=r"^submit: all 2 result slots hold uncollected tasks"):
            p.submit(pyfuncs.identity, 1)
        assert p.collect_all(held, timeout=10) == [0, 1]
        assert p.submit(pyfuncs.identity, 1).collect(timeout=10) == 1


def test_dropped_tasks_release_their_slots():
    with suiro.pool(workers=1, result_slots=64) as p:
        for _ in range(300):  # more than the slots: dropped tasks give theirs back
            p.submit(pyfuncs.identity, 1)
        assert p.submit(pyfuncs.identity, 2).collect(timeout=10) == 2


def test_status(pool):
    pool.submit(pyfuncs.identity, 1).collect(timeout=5)
    s = pool.status()
    assert s["live"] == 2 and len(s["workers"]) == 2
    w = s["workers"][0]
    assert set(w) >= {"slot", "pid", "state", "tasks"}
    assert w["pid"] > 0 and w["state"] in ("idle", "busy")
    assert s["tasks"] >= 1 and s["submitted"] >= 1


def test_nested_maps_from_a_python_host():
    parts = [range(1, 25001), range(25001, 50001), range(50001, 75001), range(75001, 100001)]
    for workers in (1, 2):
        with suiro.pool(workers=workers) as p:
            got = p.map(pyfuncs.part_total, parts).collect(timeout=60)
            assert [round(v) for v in got] == [2635310, 4818361, 6239529, 7388808]
            got = p.map(pyfuncs.part_total_f64, parts, template="f64").collect(timeout=60)
            assert [round(v) for v in got] == [2635310, 4818361, 6239529, 7388808]


def test_nested_tasks_one_worker(pool1):
    assert pool1.submit(pyfuncs.nested_submit, 20).collect(timeout=20) == sum(range(1, 21))


def test_current_pool_is_none_in_a_host():
    assert suiro.current_pool() is None


def test_worker_killed_mid_task():
    with suiro.pool(workers=1) as p:
        wpid = p.submit(pyfuncs.pid).collect(timeout=5)
        t = p.submit(pyfuncs.sleep_then, 30, "never")
        wait_until(lambda: p.status()["workers"][0]["state"] == "busy", 5)
        os.kill(wpid, signal.SIGKILL)
        with pytest.raises(suiro.WorkerDied) as e:
            t.collect(timeout=10)
        assert e.value.pid == wpid and e.value.slot == 0
        # the pool respawns and stays usable
        assert p.submit(pyfuncs.identity, "again").collect(timeout=10) == "again"
        assert p.submit(pyfuncs.pid).collect(timeout=5) != wpid


def test_worker_that_kills_itself():
    with suiro.pool(workers=1) as p:
        with pytest.raises(suiro.WorkerDied):
            p.submit(pyfuncs.die).collect(timeout=10)
        assert p.submit(pow, 3, 3).collect(timeout=10) == 27


def test_misuse_names_the_argument(pool):
    with pytest.raises(TypeError, match="argument 1"):
        pool.submit(42)
    with pytest.raises(TypeError, match="no value"):
        pool.submit()
    s = socket.socket()
    try:
        with pytest.raises(TypeError, match=r"submit: argument 2\['conn'\]: socket cannot be sent"):
            pool.submit(pyfuncs.identity, {"conn": s})
        with pytest.raises(TypeError, match=r"submit: argument 3\[1\]: socket cannot be sent"):
            pool.submit(pyfuncs.echo, 1, [0, s])
    finally:
        s.close()
    with pytest.raises(TypeError, match="timeout"):
        pool.submit(pyfuncs.identity, 1).collect(timeout=b"soon")
    with pytest.raises(ValueError, match='timeout: bad duration "soon"'):
        pool.submit(pyfuncs.identity, 1).collect(timeout="soon")
    with pytest.raises(ValueError, match="timeout"):
        pool.submit(pyfuncs.identity, 1).collect(timeout=-1)


def test_stopped_pool_refuses():
    p = suiro.pool(workers=1)
    t = p.submit(pyfuncs.sleep_then, 0.2, 1)
    p.stop()
    with pytest.raises(suiro.PoolClosed):
        p.submit(pyfuncs.identity, 1)
    with pytest.raises(suiro.PoolClosed):
        t.collect(timeout=1)


def test_pool_options_are_checked_like_lua():
    with pytest.raises(ValueError, match=r"suiro.pool: timeout: bad duration"):
        suiro.pool(workers=1, timeout="1m30")
    with pytest.raises(ValueError, match=r"workers: must be in 0..64"):
        suiro.pool(workers=100)
    with pytest.raises(TypeError, match="unknown option 'bogus'"):
        suiro.pool(bogus=1)


def test_env_reaches_workers():
    with suiro.pool(workers=1, env={"SUIRO_TEST_VAR": "yes", "OTHER": 5}) as p:
        assert p.submit(pyfuncs.env, "SUIRO_TEST_VAR").collect(timeout=5) == "yes"
        assert p.submit(pyfuncs.env, "OTHER").collect(timeout=5) == "5"
        assert p.submit(pyfuncs.env, "OMP_NUM_THREADS").collect(timeout=5) == "1"


def test_worker_start_is_quick():
    t0 = time.monotonic()
    with suiro.pool(workers=1) as p:
        p.submit(pow, 2, 2).collect(timeout=10)
    assert time.monotonic() - t0 < 5  # the figure itself is measured by the benchmark


def test_nothing_left_in_dev_shm():
    import subprocess
    import sys

    code = ("import sys; sys.path[:0] = %r\nimport suiro\nimport numpy as np\n"
            "with suiro.pool(workers=2) as p:\n"
            "    p.submit(sum, [1, 2]).collect(5)\n"
            "    v = p.submit(lambda a: a * 2, np.ones(100000)).collect(5)\n"
            "    assert v.sum() == 200000\n"
            "print('%%x' %% __import__('os').getpid())\n" % (sys.path[:3],))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    prefix = "suiro_%s_" % out.stdout.strip()
    assert [n for n in os.listdir("/dev/shm") if n.startswith(prefix)] == []


def _interrupted(setup, call):
    """Runs setup, then call with a SIGINT 0.3 s later, in a child process: (word, seconds)."""
    import subprocess
    import sys

    code = ("import sys; sys.path[:0] = %r\n"
            "import os, signal, threading, time, suiro\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started ignoring it\n"
            "%s\n"
            "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
            "t0 = time.monotonic()\n"
            "try:\n"
            "    %s\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted %%.2f' %% (time.monotonic() - t0))\n"
            "p.stop(timeout=1)\n" % (sys.path[:3], setup, call))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    word, took = out.stdout.split()
    return word, float(took)


def test_ctrl_c_interrupts_collect():
    word, took = _interrupted("p = suiro.pool(workers=1)\nt = p.submit(time.sleep, 30)", "t.collect()")
    assert word == "interrupted" and 0.25 < took < 3.0


def test_explicit_python_launcher():
    with suiro.pool(workers=1, launcher=suiro.python(python="/usr/bin/python3")) as p:
        assert p.lang == "python"
        assert p.submit(pyfuncs.identity, "x").collect(timeout=10) == "x"
    with pytest.raises(ValueError, match="launcher"):
        suiro.pool(workers=1, launcher="fortran")


def test_task_kill():
    with suiro.pool(workers=1) as p:
        t = p.submit(pyfuncs.sleep_then, 30, 1)
        wait_until(lambda: p.status()["workers"][0]["state"] == "busy", 5)
        assert t.kill() is True
        with pytest.raises(suiro.CancelledError):
            t.collect(timeout=10)
        assert p.submit(pow, 2, 3).collect(timeout=10) == 8


def test_threads_share_a_pool(pool):
    import threading

    results, errors = [], []

    def work(k):
        try:
            results.append(sum(pool.submit(pyfuncs.add, i, k).collect(timeout=10) for i in range(200)))
        except Exception as e:  # reported below
            errors.append(e)

    ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(30)
    assert not errors and sorted(results) == sorted(sum(range(200)) + 200 * k for k in range(4))


def test_large_values_spill_and_come_back(pool):
    big = list(range(200000))  # megabytes of wire: beyond ring slots and result slots
    s = "x" * 3000000
    assert pool.submit(pyfuncs.identity, big).collect(timeout=20) == big
    assert pool.submit(pyfuncs.identity, s).collect(timeout=20) == s
    assert pool.collect_all(pool.submit_batch(pyfuncs.identity, [(big,)] * 3), timeout=20) == [big] * 3
    got = pool.map(pyfuncs.identity, [big, s, b"y" * 100000]).collect(timeout=20)
    assert got[0] == big and got[1] == s and got[2] == b"y" * 100000


def test_ctrl_c_interrupts_a_submit_waiting_for_queue_room():
    word, took = _interrupted("p = suiro.pool(workers=1, ring_cap=2)\n"
                              "held = [p.submit(time.sleep, 30) for _ in range(3)]  # one runs, two fill the queue",
                              "p.submit(abs, 1)")
    assert word == "interrupted" and 0.25 < took < 3.0


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")


@pytest.mark.parametrize("kind", ["python", "lua", "r"])
def test_worker_environment_is_one_rule_for_every_kind(kind):
    # suiro.config.worker_env, as Lua and R hosts apply it: one thread per numeric library, R in a
    # UTF-8 locale; the pool's env overrides a default
    readers = {
        "python": suiro.call(source="[__import__('os').environ.get(k, '') for k in ks]", ks=list(THREAD_VARS)),
        "lua": suiro.call(source="local out = {} for i = 1, #ks do out[i] = os.getenv(ks[i]) or '' end "
                          "return out", ks=list(THREAD_VARS)),
        "r": suiro.call(source="as.list(unname(Sys.getenv(ks)))", ks=list(THREAD_VARS)),
    }
    launcher = getattr(suiro, kind)()
    with suiro.pool(workers=1, launcher=launcher, env={"MKL_NUM_THREADS": "3"}, timeout=60) as p:
        got = list(p.submit(readers[kind]).collect(timeout=60))
        want = ["3" if k == "MKL_NUM_THREADS" else "1" for k in THREAD_VARS]
        assert got == want
        if kind == "r":
            assert p.submit(suiro.call(source="Sys.getenv('LANG')")).collect(timeout=60) == "C.UTF-8"


def test_launcher_argv_and_pool_options_reach_the_engine():
    # the launcher's argv list goes to the engine's option reader once (not as a back-reference)
    argv = [sys.executable, "-I", suiro.worker_script()]
    with suiro.pool(1, launcher=suiro.python(argv=argv), timeout=7, name="opts", max_workers=3) as p:
        assert p.submit(pow, 2, 3).collect(timeout=30) == 8
        assert p.status()["max_workers"] == 3
    with pytest.raises(suiro.StartError, match=r"suiro\.pool: argv item 2 \(of 2\) must be a string"):
        q = suiro.Pool.__new__(suiro.Pool)
        suiro._core.Pool.__init__(q, {"workers": 0, "argv": ["a", 1]})
