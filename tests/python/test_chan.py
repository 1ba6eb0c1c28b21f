"""suiro.channel: streams between a Python host and its workers (src/chan.c, suiro/_chan.py)."""

import asyncio
import os
import time

import pytest

import suiro
from conftest import own_regions


def produce(out, n):
    out.send_batch(list(range(n)))
    out.close()
    return "sent"


def produce_and_die(out, n):
    for i in range(n):
        out.send(i)
    os._exit(3)  # dies without closing


def consume(inp, n):
    total = sum(inp.recv(timeout=10) for _ in range(n))
    inp.close()
    return total


def test_send_recv_in_order_with_outcomes():
    tx, rx = suiro.channel(capacity=4)
    assert (tx.side, rx.side) == ("tx", "rx")
    tx.send(1)
    tx.send("two")
    tx.send({"a": [1, 2]})
    tx.send(None)  # None is a value like any other
    assert rx.recv() == 1
    assert rx.recv(timeout=0) == "two"
    assert rx.recv(timeout=1.0) == {"a": [1, 2]}
    assert rx.recv() is None
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="recv: no message"):
        rx.recv(timeout=0.1)
    assert time.monotonic() - t0 >= 0.09
    for i in range(4):
        tx.send(i, timeout=0)
    with pytest.raises(suiro.ChannelFull):
        tx.send(9, timeout=0)
    with pytest.raises(TimeoutError):  # ChannelFull is a TimeoutError
        tx.send(9, timeout=0.05)
    st = rx.status()
    assert (st["side"], st["queued"], st["capacity"], st["peer"]) == ("rx", 4, 4, "open")
    assert rx.recv_batch(100) == [0, 1, 2, 3]
    tx.close()
    with pytest.raises(suiro.ChannelClosed):
        rx.recv()
    assert rx.status()["peer"] == "closed"


def test_iteration_ends_at_close_and_batches():
    tx, rx = suiro.channel(capacity=100)
    tx.send_batch(range(50))
    assert rx.recv_batch(30) == list(range(30))
    tx.send_batch([50, 51])
    tx.close()
    assert list(rx) == list(range(30, 52))


def test_bad_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="capacity must be 1..16777216 messages, got 0"):
        suiro.channel(capacity=0)
    with pytest.raises(ValueError, match="bytes must be 64"):
        suiro.channel(bytes=8)
    with pytest.raises(TypeError, match="capacity must be an int"):
        suiro.channel(capacity=1.5)
    tx, rx = suiro.channel(bytes=1000)
    with pytest.raises(ValueError, match="a message of 2016 bytes is larger than the channel's byte cap"):
        tx.send("x" * 2000)
    with pytest.raises(ValueError, match="this is the receiving end"):
        rx.send(1)
    with pytest.raises(ValueError, match="this is the sending end"):
        tx.recv()
    with pytest.raises(TypeError, match="set cannot be sent"):
        tx.send({1, 2})  # no pickles: the receiver may be of another language
    rx.close()
    with pytest.raises(suiro.ChannelClosed):
        tx.send(1)


def test_a_python_worker_streams_to_the_host(pool1):
    tx, rx = suiro.channel(capacity=256)
    t = pool1.submit(produce, tx, 10000)
    assert list(rx) == list(range(10000))
    assert t.result(timeout=30) == "sent"
    with pytest.raises(ValueError, match="sent to another process"):
        tx.send(1)


def big_array(out):
    import numpy as np
    out.send(np.arange(1e6))  # 8 MB: by reference, past the byte cap
    out.close()


def test_arrays_above_the_zero_copy_floor_cross_by_reference(pool1):
    tx, rx = suiro.channel(capacity=4)
    t = pool1.submit(big_array, tx)
    a = rx.recv(timeout=30)
    assert a.shape == (1000000,) and a[-1] == 999999.0
    t.result(timeout=30)


def test_the_host_streams_to_a_python_worker_that_closes(pool1):
    tx, rx = suiro.channel(capacity=4)
    t = pool1.submit(consume, rx, 5)
    with pytest.raises(suiro.ChannelClosed):
        for i in range(1, 1000):
            tx.send(i, timeout=10)
    assert t.result(timeout=30) == 15


def test_a_lua_worker_streams_to_a_python_host(luapool):
    tx, rx = suiro.channel()
    t = luapool.submit(suiro.call(source="for i = 1, 100 do out:send(i * i) end out:close() return 'ok'", out=tx))
    assert list(rx) == [i * i for i in range(1, 101)]
    assert t.collect(timeout=30) == "ok"


def test_peer_death_after_the_queued_messages(pool1):
    tx, rx = suiro.channel(capacity=64)
    t = pool1.submit(produce_and_die, tx, 10)
    assert [rx.recv(timeout=10) for _ in range(10)] == list(range(10))
    with pytest.raises(suiro.PeerDied, match="died"):
        rx.recv(timeout=10)
    assert rx.status()["peer"] == "died"
    with pytest.raises(Exception):
        t.result(timeout=10)


def test_async_for_and_recv_async_wake_on_the_event_fd():
    async def main():
        tx, rx = suiro.channel()

        async def producer():
            for i in range(5):
                await asyncio.sleep(0.01)
                tx.send(i)
            tx.close()

        task = asyncio.ensure_future(producer())
        got = [v async for v in rx]
        await task
        tx2, rx2 = suiro.channel()
        with pytest.raises(TimeoutError):
            await rx2.recv_async(timeout=0.05)
        tx2.send("x")
        return got, await rx2.recv_async(timeout=1)

    assert asyncio.run(main()) == ([0, 1, 2, 3, 4], "x")


def test_endpoints_cross_as_wire_values_once():
    tx, rx = suiro.channel()
    b = suiro.wire.encode(tx)
    with pytest.raises(ValueError, match="sent to another process"):
        tx.send(1)
    t2 = suiro.wire.decode(b)
    t2.send("again")
    assert rx.recv(timeout=1) == "again"
    with pytest.raises(ValueError, match="already holds"):
        suiro.wire.decode(b)
    forged = bytearray(b)
    forged[16] ^= 1  # the token
    with pytest.raises(ValueError, match="forged"):
        suiro.wire.decode(bytes(forged))


def test_nothing_left_in_dev_shm():
    before = [n for n in own_regions() if "_ch" in n]
    tx, rx = suiro.channel()
    tx.send(1)
    assert len([n for n in own_regions() if "_ch" in n]) > len(before)
    del tx, rx
    assert [n for n in own_regions() if "_ch" in n] == before


def _chan_regions():
    import gc

    gc.collect()  # endpoints of earlier tests held by reference cycles (tracebacks) go first
    return [n for n in own_regions() if "_ch" in n]


def test_an_endpoint_comes_back_when_its_message_never_goes():
    import threading

    before = _chan_regions()
    tx, rx = suiro.channel(capacity=4)
    with suiro.pool(0, ring_cap=2, timeout=0.01) as full:  # no worker: the queue fills
        queued = []
        with pytest.raises(suiro.PoolFull):
            for i in range(64):
                queued.append(full.submit(int, i))
        assert len(queued) < 64
        with pytest.raises(suiro.PoolFull):  # the queue stays full past the pool's timeout
            full.submit(consume, rx, 1)
        tx.send(1)
        assert rx.recv(timeout=1) == 1
        with pytest.raises(TypeError):  # an encode error later in the arguments
            full.submit(consume, rx, threading.Lock())
        tx.send(2)
        assert rx.recv(timeout=1) == 2
        with pytest.raises(TimeoutError):  # a batch refused by the full queue
            full.submit_batch(produce, [(tx, 1)])
        tx.send(3)
        assert rx.recv(timeout=1) == 3
    ftx, frx = suiro.channel(capacity=1)
    ftx.send(0)
    with pytest.raises(suiro.ChannelFull):  # sent on a channel that stays full
        ftx.send(tx, timeout=0.01)
    tx.send(4)
    assert rx.recv(timeout=1) == 4
    assert "sent away" not in repr(tx)
    del tx, rx, ftx, frx, queued
    assert _chan_regions() == before


def test_an_endpoint_whose_task_never_runs_is_dropped():
    before = _chan_regions()
    tx, rx = suiro.channel()
    gtx, grx = suiro.channel()
    with suiro.pool(1) as one:
        busy = one.submit(consume, grx, 1)  # the one worker waits for a go
        t = one.submit(produce, tx, 3)
        assert t.cancel()
        gtx.send(5)
        assert busy.collect(timeout=10) == 5
        # the worker skipped the cancelled task: the endpoint it carried is dropped, the
        # receiver sees the end closed
        with pytest.raises(suiro.ChannelClosed):
            rx.recv(timeout=10)
    del tx, rx, gtx, grx, busy, t
    assert _chan_regions() == before
