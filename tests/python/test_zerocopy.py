"""Zero-copy arrays: from the floor (32 KiB) up, arrays cross as region references and arrive as
numpy arrays over private copy-on-write mappings of the shared pages (writable; a write stays in
this process, at every size); a view sent on unwritten goes by reference, written by value; a
view keeps its region until it is collected."""

import ctypes
import gc

import numpy as np
import pytest

import suiro
import pyfuncs
import zc_funcs
from suiro import _core

FLOOR = _core.zc_floor()


def region_of(a):
    b = a.base
    while b is not None and not isinstance(b, _core.View):
        b = getattr(b, "base", None)
    return b.region() if b is not None else None


def test_floor_is_32k():
    assert FLOOR == 32 * 1024


def test_large_results_are_writable_views(pool):
    x = np.arange(FLOOR // 8, dtype=np.float64)  # exactly the floor
    y = pool.submit(pyfuncs.times2, x).collect(timeout=10)
    assert np.array_equal(y, x * 2)
    assert y.flags.writeable  # before: read-only from the floor up, writable below it
    assert region_of(y).startswith("/suiro_")
    y[0] = 1.0


SIZES = [FLOOR // 8 - 1, FLOOR // 8, 1_000_000]  # float64s: below the floor, at it, far above


@pytest.mark.parametrize("n", SIZES)
def test_received_arguments_are_private_copies(pool, n):
    """A worker writing into its argument in place changes nothing anyone else reads."""
    y = pool.submit(pyfuncs.identity, np.arange(n, dtype=np.float64)).collect(timeout=10)
    w = pool.submit(pyfuncs.identity, y).collect(timeout=10)  # a second holder (by reference when large)
    last = float(n - 1)
    # before: ValueError (read-only) from the floor up
    assert pool.submit(zc_funcs.write_first, y, -1.0).collect(timeout=10) == [0.0, last, -1.0, -1.0]
    assert zc_funcs.ends(y) == [0.0, last] and zc_funcs.ends(w) == [0.0, last]  # the sender
    assert pool.submit(zc_funcs.ends, y).collect(timeout=10) == [0.0, last]  # another task, worker
    assert pool.submit(zc_funcs.ends, w).collect(timeout=10) == [0.0, last]


@pytest.mark.parametrize("n", SIZES)
def test_received_results_are_private_copies(pool, n):
    """The host writing into a result changes no other holder; sent on, it goes as written."""
    y = pool.submit(pyfuncs.identity, np.arange(n, dtype=np.float64)).collect(timeout=10)
    w = pool.submit(pyfuncs.identity, y).collect(timeout=10)
    last = float(n - 1)
    assert y.flags.writeable and w.flags.writeable
    y[0] = y[-1] = 7.0
    assert zc_funcs.ends(w) == [0.0, last]
    assert pool.submit(zc_funcs.ends, w).collect(timeout=10) == [0.0, last]
    assert pool.submit(zc_funcs.ends, y).collect(timeout=10) == [7.0, 7.0]  # what the host reads


@pytest.mark.parametrize("n", SIZES)
def test_a_write_through_the_address_stays_private(pool, n):
    """ctypes (as any C code) writing through a received array's address: before, the "read-only"
    view was mapped writable over the shared pages, and the write reached every holder."""
    y = pool.submit(pyfuncs.identity, np.arange(n, dtype=np.float64)).collect(timeout=10)
    w = pool.submit(pyfuncs.identity, y).collect(timeout=10)
    ctypes.c_double.from_address(w.ctypes.data).value = 99.0
    assert w[0] == 99.0 and y[0] == 0.0
    assert pool.submit(zc_funcs.ends, y).collect(timeout=10)[0] == 0.0
    assert pool.submit(zc_funcs.ends, w).collect(timeout=10)[0] == 99.0
    assert pool.submit(zc_funcs.poke, y, -5.0).collect(timeout=10) == -5.0  # in a worker
    assert y[0] == 0.0 and pool.submit(zc_funcs.ends, y).collect(timeout=10)[0] == 0.0


@pytest.mark.parametrize("n", SIZES)
def test_what_a_receiver_holds_is_a_snapshot(pool1, n):
    """Neither side's later writes change what the other already holds (one worker, keeping it)."""
    x = np.arange(n, dtype=np.float64)
    last = float(n - 1)
    try:
        y = pool1.submit(zc_funcs.hold, x).collect(timeout=10)  # the worker keeps its argument
        x[0] = x[-1] = 3.0  # the sender's original
        assert pool1.submit(zc_funcs.held_ends).collect(timeout=10) == [0.0, last]
        y[0] = y[-1] = 4.0  # the host's view of what the worker holds
        assert pool1.submit(zc_funcs.held_ends).collect(timeout=10) == [0.0, last]
        assert pool1.submit(zc_funcs.write_held, 5.0).collect(timeout=10) == [5.0, 5.0]
        assert zc_funcs.ends(y) == [4.0, 4.0]
    finally:
        pool1.submit(zc_funcs.drop_held).collect(timeout=10)


def test_a_view_sent_on_unwritten_goes_by_reference_written_by_value(pool):
    y = pool.submit(pyfuncs.times2, np.ones(100000)).collect(timeout=10)
    name = region_of(y)
    assert pool.submit(pyfuncs.view_region, y).collect(timeout=10) == name
    assert not view_of(y).written()
    y[50000] = 0.0
    assert view_of(y).written()
    r = pool.submit(pyfuncs.view_region, y).collect(timeout=10)
    assert r is not None and r != name  # copied into a region of its own
    s = y[:40000]  # pages before the written one: still the region's
    assert pool.submit(pyfuncs.view_region, s).collect(timeout=10) == name


def test_small_arrays_are_private_copies(pool):
    x = np.arange(FLOOR // 8 - 1, dtype=np.float64)
    y = pool.submit(pyfuncs.times2, x).collect(timeout=10)
    assert y.flags.writeable and region_of(y) is None
    y[0] = 5.0


def test_arguments_arrive_as_views(pool):
    x = np.arange(10000, dtype=np.int32).reshape(100, 100)
    assert pool.submit(pyfuncs.array_info, x).collect(timeout=10) == ["int32", [100, 100], True, False]
    f = np.asfortranarray(x)
    assert pool.submit(pyfuncs.array_info, f).collect(timeout=10) == ["int32", [100, 100], True, True]
    assert pool.submit(pyfuncs.view_region, x).collect(timeout=10).startswith("/suiro_")


def test_every_wire_type_by_reference(pool):
    n = FLOOR  # elements: above the floor for every type
    for dt in (np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_, np.complex128):
        x = (np.arange(n) % 3 == 0) if dt is np.bool_ else np.arange(n).astype(dt)
        y = pool.submit(pyfuncs.identity, x).collect(timeout=10)
        assert y.dtype == x.dtype and np.array_equal(x, y) and region_of(y) is not None, dt


def test_view_sent_again_goes_by_reference(pool):
    y = pool.submit(pyfuncs.times2, np.ones(100000)).collect(timeout=10)
    name = region_of(y)
    assert pool.submit(pyfuncs.view_region, y).collect(timeout=10) == name
    z = pool.submit(pyfuncs.identity, y).collect(timeout=10)
    assert region_of(z) == name and np.array_equal(z, y)
    s = y[1000:51000]  # a contiguous, aligned slice of the view: by reference too
    assert pool.submit(pyfuncs.view_region, s).collect(timeout=10) == name
    assert pool.submit(pyfuncs.identity, s).collect(timeout=10).tolist() == s.tolist()


def test_view_outlives_its_task(pool):
    keep = [pool.submit(pyfuncs.times2, np.full(50000, float(i))).collect(timeout=10) for i in range(5)]
    for i in range(40):  # much traffic of large values: a region still held must not be reused
        pool.submit(pyfuncs.times2, np.full(50000, -1.0)).collect(timeout=10)
    gc.collect()
    for i, v in enumerate(keep):
        assert (v == 2.0 * i).all()


def view_of(a):
    b = a.base
    while not isinstance(b, _core.View):
        b = b.base
    return b


def test_views_release_their_region_when_collected(pool):
    y = pool.submit(pyfuncs.times2, np.ones(100000)).collect(timeout=10)
    v = view_of(y)
    assert v.holders() == 1
    z = pool.submit(pyfuncs.identity, y).collect(timeout=10)  # back by reference: a second view
    assert region_of(z) == region_of(y) and v.holders() == 2
    del z
    gc.collect()
    assert v.holders() == 1
    w = y[10:20000]  # a numpy view of the view: no new holder
    assert v.holders() == 1 and region_of(w) == region_of(y)


def test_strided_arrays_are_copied(pool):
    x = np.arange(200000, dtype=np.float64)[::2]
    y = pool.submit(pyfuncs.identity, x).collect(timeout=10)
    assert np.array_equal(x, y)


def test_lua_workers_see_python_views():
    with suiro.pool(workers=1, launcher=suiro.lua()) as lp:
        x = np.arange(100000, dtype=np.float64)
        y = lp.submit(suiro.call(source="return x", x=x)).collect(timeout=10)
        assert region_of(y) is not None and np.array_equal(x, y)
