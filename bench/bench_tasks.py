"""Task functions of bench_python.py (imported by reference in suiro's workers and pickled by
reference for ProcessPoolExecutor's)."""

import time


def identity(x):
    return x


def spin5(x):
    """About 5 us of pure-Python work (a busy loop on the clock)."""
    end = time.perf_counter() + 5e-6
    while time.perf_counter() < end:
        pass
    return x


def times2(a):
    return a * 2


def calibrate_spin(n=20000):
    t0 = time.perf_counter()
    for i in range(n):
        spin5(i)
    return (time.perf_counter() - t0) / n * 1e6
