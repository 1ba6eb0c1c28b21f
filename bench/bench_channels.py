"""bench_channels.py — channels from Python, against multiprocessing, in one run.

    scripts/bench channels [rounds]      (scripts/python bench/bench_channels.py [rounds])

py_chan_msgs_per_s        small messages (an integer) one way, tx.send in a suiro worker, rx.recv here
py_chan_batch_msgs_per_s  the same with tx.send_batch (1000 per call) and rx.recv_batch(1000)
py_mpqueue_msgs_per_s     the same through multiprocessing.Queue (put in a child process, get here)
py_mppipe_msgs_per_s      the same through multiprocessing.Pipe (send / recv)
py_chan_pingpong_ns       send here, the worker sends it back over a second channel, receive here
py_pool_rt_ns             the same face's pool round trip: pool.submit(abs, -1).collect()
chan_80mb_ms              an 80 MB float64 array sent by a worker, received here (clock before
                          the send to the view in hand)
memcpy_80mb_ms            one memcpy of 80 MB between warm buffers

Senders run in a worker process, receivers here; rates are timed from the first message received
to the sender's close. Rounds interleave the figures; medians are reported. Last line: JSON.
"""

import json
import multiprocessing as mp
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "tests", "python"))  # suiro_probe, a test build

import numpy as np  # noqa: E402

import suiro  # noqa: E402
from bench_channels_tasks import echo, mp_pipe_sender, mp_queue_sender, send_batches, send_big, send_ints  # noqa: E402

now = time.perf_counter
N_SMALL = 300000
N_BATCH = 3000000
N_MP = 100000
N_PING = 20000
N80 = 10 * 1000 * 1000  # float64: 80 MB


def chan_one_way(pool, n):
    tx, rx = suiro.channel(capacity=4096)
    t = pool.submit(send_ints, tx, n)
    recv = rx.recv
    recv(timeout=30)
    t0 = now()
    got = 1
    try:
        while True:
            recv()
            got += 1
    except suiro.ChannelClosed:
        pass
    dt = now() - t0
    assert got == n and t.collect(timeout=30) == n
    return (n - 1) / dt


def chan_batch(pool, n, b=1000):
    tx, rx = suiro.channel(capacity=4096)
    t = pool.submit(send_batches, tx, n, b)
    rb = rx.recv_batch
    got = len(rb(b, timeout=30))
    t0 = now()
    try:
        while True:
            got += len(rb(b))
    except suiro.ChannelClosed:
        pass
    dt = now() - t0
    assert got == n and t.collect(timeout=30) == n
    return (n - b) / dt


def mp_queue(ctx, n):
    q = ctx.Queue()
    p = ctx.Process(target=mp_queue_sender, args=(q, n))
    p.start()
    get = q.get
    get(timeout=30)
    t0 = now()
    got = 1
    while get() is not None:
        got += 1
    dt = now() - t0
    p.join(30)
    assert got == n
    return (n - 1) / dt


def mp_pipe(ctx, n):
    a, b = ctx.Pipe(duplex=False)
    p = ctx.Process(target=mp_pipe_sender, args=(b, n))
    p.start()
    b.close()
    recv = a.recv
    if not a.poll(30):
        raise RuntimeError("multiprocessing.Pipe: no message in 30 s")
    recv()
    t0 = now()
    got = 1
    while recv() is not None:
        got += 1
    dt = now() - t0
    p.join(30)
    assert got == n
    return (n - 1) / dt


def pingpong(pool, n, warm=2000):
    atx, arx = suiro.channel()
    btx, brx = suiro.channel()
    t = pool.submit(echo, arx, btx, n + warm)
    send, recv = atx.send, brx.recv
    for i in range(warm):
        send(i)
        recv(timeout=30)
    t0 = now()
    for i in range(n):
        send(i)
        recv()
    dt = now() - t0
    assert t.collect(timeout=30) == n + warm
    return dt / n * 1e9


def pool_rt(pool, n, warm=2000):
    sub = pool.submit
    for _ in range(warm):
        sub(abs, -1).collect()
    t0 = now()
    for _ in range(n):
        sub(abs, -1).collect()
    return (now() - t0) / n * 1e9


def big(pool, rounds):
    tx, rx = suiro.channel()
    atx, arx = suiro.channel()
    t = pool.submit(send_big, tx, arx, N80, rounds + 1)
    out = []
    for r in range(rounds + 1):
        a = rx.recv(timeout=60)
        t1 = now()
        t0 = rx.recv(timeout=60)
        assert a.shape == (N80,) and a[0] == r and a[-1] == 1.0
        del a
        atx.send(r)
        if r:  # the first one maps fresh pages on both sides
            out.append((t1 - t0) * 1e3)
    t.collect(timeout=60)
    return statistics.median(out)


def memcpy_ms():
    try:
        import suiro_probe

        return suiro_probe.memcpy_ms(N80 * 8, 5)
    except ImportError:
        a, b = np.ones(N80), np.empty(N80)
        np.copyto(b, a)
        ts = []
        for _ in range(5):
            t0 = now()
            np.copyto(b, a)
            ts.append((now() - t0) * 1e3)
        return min(ts)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ctx = mp.get_context("spawn")  # no fork of a process with a pool's threads
    figs = {k: [] for k in ("py_chan_msgs_per_s", "py_chan_batch_msgs_per_s", "py_mpqueue_msgs_per_s",
                            "py_mppipe_msgs_per_s", "py_chan_pingpong_ns", "py_pool_rt_ns", "chan_80mb_ms",
                            "memcpy_80mb_ms")}
    with suiro.pool(1) as pool:
        chan_one_way(pool, 10000)  # warm: the worker imported the task module
        for _ in range(rounds):
            figs["py_chan_msgs_per_s"].append(chan_one_way(pool, N_SMALL))
            figs["py_chan_batch_msgs_per_s"].append(chan_batch(pool, N_BATCH))
            figs["py_mpqueue_msgs_per_s"].append(mp_queue(ctx, N_MP))
            figs["py_mppipe_msgs_per_s"].append(mp_pipe(ctx, N_MP))
            figs["py_chan_pingpong_ns"].append(pingpong(pool, N_PING))
            figs["py_pool_rt_ns"].append(pool_rt(pool, N_PING))
            figs["memcpy_80mb_ms"].append(memcpy_ms())
        figs["chan_80mb_ms"] = [big(pool, max(rounds, 3))]
    med = {k: statistics.median(v) for k, v in figs.items()}
    rows = [
        ("py_chan_msgs_per_s", "msg/s", "%.0fx Queue (>= 50x), %.1fx Pipe (>= 10x)" % (
            med["py_chan_msgs_per_s"] / med["py_mpqueue_msgs_per_s"], med["py_chan_msgs_per_s"] / med["py_mppipe_msgs_per_s"])),
        ("py_chan_batch_msgs_per_s", "msg/s", "target >= 3 M/s"),
        ("py_mpqueue_msgs_per_s", "msg/s", "multiprocessing.Queue"),
        ("py_mppipe_msgs_per_s", "msg/s", "multiprocessing.Pipe"),
        ("py_chan_pingpong_ns", "ns", "%.2fx the pool round trip (<= 1.5x)" % (med["py_chan_pingpong_ns"] / med["py_pool_rt_ns"])),
        ("py_pool_rt_ns", "ns", ""),
        ("chan_80mb_ms", "ms", "%.2fx memcpy (<= 3x)" % (med["chan_80mb_ms"] / med["memcpy_80mb_ms"])),
        ("memcpy_80mb_ms", "ms", ""),
    ]
    for k, unit, note in rows:
        print("%-26s %14.1f %-6s %s" % (k, med[k], unit, note))
    out = {"bench": "channels_py", "rounds": rounds, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.update({k: round(v, 3) for k, v in med.items()})
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
