"""Task functions of bench_channels.py: the senders that run in a worker (suiro's, or a
multiprocessing child), imported by reference there."""

import time


def send_ints(tx, n):
    send = tx.send
    for i in range(n):
        send(i)
    tx.close()
    return n


def send_batches(tx, n, b):
    xs = list(range(b))
    sb = tx.send_batch
    for _ in range(n // b):
        sb(xs)
    tx.close()
    return n


def echo(rx, tx, n):
    recv, send = rx.recv, tx.send
    for _ in range(n):
        send(recv())
    tx.close()
    return n


def send_big(tx, acks, n_elts, rounds):
    """An n_elts float64 array, rounds times, each followed by the clock before its send; waits
    for the receiver's ack (it dropped the array) before the next."""
    import numpy as np

    a = np.ones(n_elts)
    for r in range(rounds):
        a[0] = r
        t0 = time.perf_counter()
        tx.send(a)
        tx.send(t0)
        acks.recv(timeout=60)
    tx.close()
    return rounds


def mp_queue_sender(q, n):
    put = q.put
    for i in range(n):
        put(i)
    put(None)


def mp_pipe_sender(conn, n):
    send = conn.send
    for i in range(n):
        send(i)
    send(None)
    conn.close()
