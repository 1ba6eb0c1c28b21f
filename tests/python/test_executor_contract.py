"""suiro.PoolExecutor against ProcessPoolExecutor, side by side: the same test body runs on
both, for the timeout, shutdown and lifetime contracts of concurrent.futures (issue 17, items
9 and 10). ProcessPoolExecutor runs with the spawn context (this process holds pools and
threads). Tasks that would run for a minute stand for tasks that never end: the tests stop the
workers running them, so every wait is bounded."""

import asyncio
import concurrent.futures as cf
import gc
import multiprocessing
import time

import pytest

import suiro
import pyfuncs

LONG = 60.0  # "never ends" as far as a test is concerned


def suiro_executor(n):
    return suiro.PoolExecutor(n)


def process_executor(n):
    return cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))


EXECUTORS = pytest.mark.parametrize("make", [suiro_executor, process_executor], ids=["suiro", "ProcessPool"])


def stop_workers(ex):
    """Kills the executor's worker processes (what is left of tasks that never end), then shuts
    it down: ProcessPoolExecutor breaks, suiro's replaces them; neither waits for the minute."""
    for p in list(ex._processes.values()):
        p.kill()
    ex.shutdown(wait=True)


@EXECUTORS
def test_result_timeout_then_result(make):
    with make(1) as ex:
        f = ex.submit(pyfuncs.nap, 0.5)
        with pytest.raises(cf.TimeoutError):
            f.result(timeout=0.01)
        assert f.result(timeout=60) == 0.5
        assert f.done() and not f.cancelled()


@EXECUTORS
def test_map_timeout_raises_at_t_while_an_element_never_ends(make):
    ex = make(2)
    try:
        assert ex.submit(pow, 2, 2).result(timeout=60) == 4  # started: the timeout is not about start-up
        t0 = time.monotonic()
        it = ex.map(pyfuncs.nap, [0.0, LONG, 0.0], timeout=0.5)
        assert next(it) == 0.0
        with pytest.raises(cf.TimeoutError):
            next(it)
        took = time.monotonic() - t0
        assert 0.45 <= took < LONG / 2  # at t after the call, not when the element ends
        with pytest.raises(StopIteration):
            next(it)  # an iterator that raised is finished
    finally:
        stop_workers(ex)


@EXECUTORS
def test_map_timeout_counts_from_the_call(make):
    with make(2) as ex:
        assert ex.submit(pow, 2, 2).result(timeout=60) == 4
        it = ex.map(pyfuncs.nap, [0.3, 0.3], timeout=30)
        assert list(it) == [0.3, 0.3]


@EXECUTORS
def test_shutdown_wait_waits_for_pending_futures(make):
    ex = make(1)
    fs = [ex.submit(pyfuncs.sleep_then, 0.1, i) for i in range(4)]
    ex.shutdown(wait=True)
    assert all(f.done() for f in fs)
    assert [f.result(timeout=0) for f in fs] == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.submit(pow, 2, 3)


@EXECUTORS
def test_shutdown_nowait_futures_still_complete(make):
    ex = make(1)
    fs = [ex.submit(pyfuncs.sleep_then, 0.1, i) for i in range(3)]
    ex.shutdown(wait=False)
    assert [f.result(timeout=60) for f in fs] == [0, 1, 2]


@EXECUTORS
def test_shutdown_cancel_futures(make):
    ex = make(1)
    first = ex.submit(pyfuncs.sleep_then, 0.5, "first")
    rest = [ex.submit(pyfuncs.sleep_then, 0.5, i) for i in range(8)]
    ex.shutdown(wait=True, cancel_futures=True)
    assert first.result(timeout=0) == "first"
    assert rest[-1].cancelled()  # the queued ones were cancelled, not run
    assert all(f.done() for f in rest)


@EXECUTORS
def test_future_of_a_dropped_executor_completes(make):
    f = make(1).submit(pyfuncs.sleep_then, 0.2, "kept")
    gc.collect()
    assert f.result(timeout=60) == "kept"


@EXECUTORS
def test_map_of_a_dropped_executor_completes(make):
    it = make(1).map(pyfuncs.add, [1, 2, 3], [10, 20, 30], timeout=60)
    gc.collect()
    assert list(it) == [11, 22, 33]


@EXECUTORS
def test_run_in_executor_with_a_dropped_executor(make):
    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(make(1), pyfuncs.sleep_then, 0.2, "async")
        gc.collect()
        return await asyncio.wait_for(fut, 60)

    assert asyncio.run(main()) == "async"


def test_executor_of_a_pool_dropped_with_pending_futures():
    with suiro.pool(workers=1) as p:
        assert p.executor().submit(pyfuncs.sleep_then, 0.2, 1).result(timeout=30) == 1
        f = p.executor().submit(pyfuncs.sleep_then, 0.2, 2)
        gc.collect()
        assert f.result(timeout=30) == 2

        async def main():
            return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(p.executor(), pow, 2, 5), 30)

        assert asyncio.run(main()) == 32
        assert not p.closed  # the pool's executors leave it open


def test_dropped_executor_stops_its_pool_when_done():
    ex = suiro.PoolExecutor(1)
    pool = ex.pool
    f = ex.submit(pyfuncs.sleep_then, 0.2, "x")
    del ex
    gc.collect()
    assert f.result(timeout=30) == "x"
    th = [t for t in __import__("threading").enumerate() if t.name == "suiro-executor-drain"]
    for t in th:
        t.join(10)
    del f
    gc.collect()
    import weakref

    r = weakref.ref(pool)
    del pool
    gc.collect()
    assert r() is None or r().closed  # nothing holds it any more: stopped


def test_cancelling_futures_while_they_complete_raises_nowhere():
    # a caller's cancel may meet the thread completing the same future: the cancel wins or the
    # result does, and no thread reports an InvalidStateError. suiro's executor only: Debian's
    # CPython 3.11.2 ProcessPoolExecutor hangs at shutdown after futures are submitted and
    # cancelled at once (CPython gh-94440, fixed in 3.11.4), so it cannot stand beside it here.
    # The body runs in a thread joined with a bound: a hang fails the test, not the suite.
    import threading
    errors, outcome = [], []
    old = threading.excepthook
    threading.excepthook = lambda a: errors.append(a.exc_value)

    def body():
        with suiro_executor(2) as ex:
            for _ in range(5):
                fs = [ex.submit(abs, -i) for i in range(300)]
                for f in fs:
                    f.cancel()
                for i, f in enumerate(fs):
                    assert f.cancelled() or f.result(timeout=60) == i
        outcome.append("done")

    try:
        t = threading.Thread(target=body, daemon=True)
        t.start()
        t.join(180)
    finally:
        threading.excepthook = old
    assert outcome == ["done"], "the executor did not finish (%r)" % (errors,)
    assert errors == []


def test_settle_leaves_a_cancelled_future_cancelled():
    from suiro._executor import _settle
    f = cf.Future()
    assert f.cancel()
    _settle(f, 1)
    _settle(f, exc=ValueError("late"))
    assert f.cancelled()
