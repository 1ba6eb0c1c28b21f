"""asyncio: await tasks and maps, async for over streamed maps, driven by the pool's eventfd."""

import asyncio
import time

import pytest

import suiro
import pyfuncs
from suiro import _aio


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_await_a_task(pool):
    async def main():
        return await pool.submit(pow, 2, 16)

    assert run(main()) == 65536


def test_thousand_tasks_in_flight(pool):
    async def main():
        tasks = [pool.submit(pyfuncs.add, i, 1) for i in range(1000)]
        return await asyncio.gather(*tasks)

    assert run(main()) == [i + 1 for i in range(1000)]


def test_awaiting_does_not_poll(pool1):
    async def main():
        before = _aio.stats()["wakeups"]
        t0 = time.monotonic()
        v = await pool1.submit(pyfuncs.sleep_then, 0.3, "late")
        return v, _aio.stats()["wakeups"] - before, time.monotonic() - t0

    v, wakeups, took = run(main())
    assert v == "late" and 0.25 < took < 5
    assert wakeups <= 3  # woken by the result, not by a timer


def test_loop_stays_responsive(pool1):
    async def ticker(box):
        while not box["stop"]:
            box["ticks"] += 1
            await asyncio.sleep(0.01)

    async def main():
        box = {"stop": False, "ticks": 0}
        tk = asyncio.ensure_future(ticker(box))
        v = await pool1.submit(pyfuncs.sleep_then, 0.3, 1)
        box["stop"] = True
        await tk
        return v, box["ticks"]

    v, ticks = run(main())
    assert v == 1 and ticks >= 10


def test_await_raises_the_task_error(pool):
    async def main():
        await pool.submit(pyfuncs.raise_, "value", "async boom")

    with pytest.raises(ValueError, match="async boom"):
        run(main())


def test_await_a_map(pool):
    async def main():
        return await pool.map(lambda x: x * 2, range(10000), template="i64")

    got = run(main())
    assert got.tolist() == [2 * i for i in range(10000)]


def test_async_for_over_a_streamed_map(pool):
    async def main():
        seen = {}
        async for i, v in pool.map(pyfuncs.identity, range(500), stream=True):
            seen[i] = v
        return seen

    assert run(main()) == {i: i for i in range(500)}


def test_async_for_without_stream_in_order(pool):
    async def main():
        return [iv async for iv in pool.map(lambda x: -x, range(5))]

    assert run(main()) == [(i, -i) for i in range(5)]


def test_await_in_two_pools(pool, pool1):
    async def main():
        a = pool.submit(pyfuncs.sleep_then, 0.1, "a")
        b = pool1.submit(pyfuncs.sleep_then, 0.05, "b")
        return await asyncio.gather(a, b)

    assert run(main()) == ["a", "b"]


def test_wrap_future_via_executor():
    async def main(ex):
        return await asyncio.wrap_future(ex.submit(pow, 3, 4))

    with suiro.PoolExecutor(max_workers=1) as ex:
        assert run(main(ex)) == 81
