"""Edges of the Python face's contracts (issue 17): the pool's timeout as the default of every
collect, durations wherever a timeout is taken, and elements that never end stopped by cancel()
and kill(). Elements that would run for minutes (or forever) are stopped; every wait is bounded
and no assertion depends on how fast the machine is beyond "well before the element would end"."""

import time

import pytest

import suiro
import pyfuncs
from conftest import run_script, wait_until

LONG = 60.0  # "never ends" as far as a test is concerned


def test_pool_timeout_is_the_default_of_collect():
    with suiro.pool(workers=1, timeout="300ms") as p:
        assert p.timeout == 0.3
        t = p.submit(pyfuncs.sleep_then, 60, 1)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=r"^collect: not done after 0\.3 s$"):
            t.collect()
        with pytest.raises(TimeoutError):
            t.result()
        with pytest.raises(TimeoutError, match="collect_all"):
            p.collect_all([t])
        with pytest.raises(TimeoutError, match="collect_any"):
            p.collect_any([t])
        assert time.monotonic() - t0 < 30  # long before the task would end
        assert t.kill() is True


def test_pool_timeout_is_the_default_of_map_collect():
    with suiro.pool(workers=1, timeout=0.3) as p:
        m = p.map(pyfuncs.nap, [60.0])
        with pytest.raises(TimeoutError, match="map: not done after 0.3 s"):
            m.collect()
        m.kill()
        with pytest.raises(suiro.CancelledError):
            m.collect(timeout=10)
        # the map's own timeout comes before the pool's, an explicit one before both
        m = p.map(pyfuncs.nap, [0.5], timeout="10s")
        assert m.collect() == [0.5]
        assert p.map(pyfuncs.nap, [0.5]).collect(timeout="inf") == [0.5]


def test_durations_are_accepted_as_in_lua_and_r(pool):
    t = pool.submit(pyfuncs.sleep_then, 0.2, "x")
    assert t.collect(timeout="10s") == "x"
    assert pool.collect_all([pool.submit(pow, 2, 3)], timeout="1m") == [8]
    assert pool.collect_any([pool.submit(pow, 2, 4)], "1m30s") == (0, 16)
    assert pool.map(abs, [-1], timeout="2s").collect(timeout="500ms") == [1]
    t = pool.submit(pyfuncs.sleep_then, 30, 1)
    with pytest.raises(TimeoutError, match=r"not done after 0\.05 s"):
        t.collect("50ms")
    with pytest.raises(ValueError, match='collect: timeout: bad duration "2x"'):
        t.collect("2x")
    with pytest.raises(ValueError, match="collect: timeout must be >= 0"):
        t.collect(-1)
    with pytest.raises(TypeError, match="collect: timeout must be a number of seconds, a duration"):
        t.collect([1])
    with pytest.raises(ValueError, match='map: timeout: bad duration'):
        pool.map(abs, [1], timeout="soon")
    t.kill()
    with pytest.raises(suiro.CancelledError):
        t.collect(10)


def _stopped_and_usable(p, m):
    with pytest.raises(suiro.CancelledError):
        m.collect(timeout=30)
    assert p.submit(pow, 2, 10).collect(timeout=30) == 1024  # replaced workers serve again


def test_map_kill_stops_a_spinning_element():
    with suiro.pool(workers=2) as p:
        m = p.map(pyfuncs.spin_forever, range(4))
        wait_until(lambda: all(w["state"] == "busy" for w in p.status()["workers"]), 10)
        m.kill()
        _stopped_and_usable(p, m)


def test_map_cancel_stops_a_spinning_element():
    with suiro.pool(workers=2) as p:
        m = p.map(pyfuncs.spin_forever, range(4))
        wait_until(lambda: all(w["state"] == "busy" for w in p.status()["workers"]), 10)
        m.cancel()  # does not wait: the elements in flight get a grace, then their workers go
        _stopped_and_usable(p, m)


def test_cancelled_map_lets_elements_in_flight_end():
    with suiro.pool(workers=1) as p:
        m = p.map(pyfuncs.nap, [0.2] * 50)
        wait_until(lambda: m.progress()[0] >= 1, 10)
        m.cancel()
        with pytest.raises(suiro.CancelledError):
            m.collect(timeout=30)
        assert p.status()["deaths"] == 0  # nothing was killed: the element in flight ended in time


def test_dropping_a_spinning_map_does_not_hang():
    with suiro.pool(workers=1) as p:
        m = p.map(pyfuncs.spin_forever, range(2))
        wait_until(lambda: p.status()["workers"][0]["state"] == "busy", 10)
        del m  # freed: cancelled, then its worker is killed after the grace
        assert p.submit(pow, 3, 2).collect(timeout=30) == 9
        it = iter(p.map(pyfuncs.spin_forever, range(2), stream=True))
        wait_until(lambda: p.status()["workers"][0]["state"] == "busy", 10)
        del it
        assert p.submit(pow, 3, 3).collect(timeout=30) == 27


def test_task_kill_stops_a_spinning_task():
    with suiro.pool(workers=1) as p:
        t = p.submit(pyfuncs.spin_forever)
        wait_until(lambda: p.status()["workers"][0]["state"] == "busy", 10)
        assert t.cancel() is False  # advisory: it runs already
        assert t.kill() is True
        with pytest.raises(suiro.CancelledError):
            t.collect(timeout=30)
        assert p.submit(pow, 2, 2).collect(timeout=30) == 4


# ---- asyncio: awaiting a task or a map whose pool stops meanwhile (item 11) ---------------------

import asyncio  # noqa: E402
import threading  # noqa: E402


def _arun(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_await_task_raises_when_its_pool_stops():
    p = suiro.pool(workers=1)

    async def main():
        t = p.submit(pyfuncs.sleep_then, LONG, 1)
        asyncio.get_running_loop().call_later(0.2, p.stop, 0.5)
        with pytest.raises(suiro.PoolClosed, match="stopped while awaited"):
            await t
        return True

    try:
        assert _arun(main())
    finally:
        p.stop()


def test_await_map_raises_when_its_pool_stops():
    p = suiro.pool(workers=1)

    async def main():
        m = p.map(pyfuncs.nap, [LONG])
        asyncio.get_running_loop().call_later(0.2, p.stop, 0.5)
        with pytest.raises(suiro.PoolClosed):
            await m
        return True

    try:
        assert _arun(main())
    finally:
        p.stop()


def test_await_raises_when_another_thread_stops_the_pool():
    p = suiro.pool(workers=1)

    async def main():
        t = p.submit(pyfuncs.sleep_then, LONG, 1)
        m = p.map(pyfuncs.nap, [LONG])
        th = threading.Timer(0.2, p.stop, (0.5,))
        th.start()
        res = await asyncio.gather(t, m, return_exceptions=True)
        th.join()
        return res

    try:
        res = _arun(main())
        assert all(isinstance(r, suiro.PoolClosed) for r in res), res
    finally:
        p.stop()


def test_awaiting_after_a_stop_and_a_new_pool_still_works():
    async def main():
        p = suiro.pool(workers=1)
        t = p.submit(pyfuncs.sleep_then, LONG, 1)
        asyncio.get_running_loop().call_later(0.1, p.stop, 0.5)
        with pytest.raises(suiro.PoolClosed):
            await t
        with suiro.pool(workers=1) as q:  # may get the same eventfd number: watched afresh
            return await q.submit(pow, 2, 9)

    assert _arun(main()) == 512


# ---- multiprocessing spawn: a script re-run as __mp_main__ (item 13) ----------------------------


SPAWN_SCRIPT = r'''
import multiprocessing as mp
import suiro

def twice(x):
    return 2 * x

def child(q):
    out = []
    try:
        with suiro.PoolExecutor(1) as ex:          # a new executor, its first submit
            out.append(ex.submit(twice, 21).result(timeout=30))
            out.append(list(ex.map(twice, [1, 2], timeout=30)))
        with suiro.pool(workers=1) as p:
            out.append(p.submit(twice, 5).collect(timeout=30))
            out.append(p.submit(lambda: twice(7)).collect(timeout=30))
    except BaseException as e:
        out.append("error: %r" % (e,))
    q.put(out)

with suiro.PoolExecutor(1) as top:                  # runs again in the child, as __mp_main__
    assert top.submit(twice, 1).result(timeout=30) == 2

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    pr = ctx.Process(target=child, args=(q,))
    pr.start()
    print(q.get(timeout=60))
    pr.join(30)
    print("exit", pr.exitcode)
'''


def test_functions_of_a_script_rerun_as_mp_main_travel_by_value(tmp_path):
    r = run_script(tmp_path, "spawned.py", SPAWN_SCRIPT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[42, [2, 4], 10, 14]", "exit 0"], r.stdout + r.stderr


def test_executor_map_timeout_with_a_spinning_element_frees_its_worker():
    import concurrent.futures as cf

    with suiro.PoolExecutor(1) as ex:
        it = ex.map(pyfuncs.spin_forever, [1, 2], timeout=0.3)
        with pytest.raises(cf.TimeoutError):
            next(it)
        # the abandoned map's element got its grace, then its worker was replaced
        assert ex.submit(pow, 2, 3).result(timeout=30) == 8


def _nest(n):
    v = 1
    for _ in range(n):
        v = [v]
    return v


def test_values_nested_past_the_wire_limit_are_refused_naming_the_path(pool):
    # issue 18 item 8: at 63 levels the writer refused "a i64 at depth 65" with no path
    assert pool.submit(len, _nest(62)).collect(timeout=10) == 1
    for depth in (63, 64, 900):
        with pytest.raises(ValueError) as ei:
            pool.submit(len, _nest(depth))
        msg = str(ei.value)
        assert msg.startswith("submit: argument 2[0][0]"), msg
        assert "...[0][0][0][0]: nested more than 64 levels deep" in msg, msg
        assert len(msg) < 300, msg
    with pytest.raises(ValueError, match=r"result\[0\].*nested more than 64 levels deep"):
        pool.submit(pyfuncs.nested_list, 63).collect(timeout=10)
