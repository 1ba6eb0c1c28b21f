"""pool.map: inputs, templates, streaming, prepared maps, progress, and seeded random streams
(bitwise equal for any worker count, and equal to Lua's: tests/vectors/rng.txt)."""

import math
import os
import subprocess
import textwrap

import numpy as np
import pytest

import suiro
import pyfuncs
from conftest import LUA_WORKER, ROOT, VECTORS


def test_map_sqrt_template(pool):
    m = pool.map(math.sqrt, range(1, 10**5), template="f64", seed=42)
    got = m.collect(timeout=60)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and len(got) == 10**5 - 1
    assert np.array_equal(got, np.sqrt(np.arange(1, 10**5, dtype=np.float64)))


def test_map_without_template_gives_values(pool):
    got = pool.map(lambda x: {"x": x, "sq": x * x}, [1, 2, 3]).collect(timeout=10)
    assert got == [{"x": 1, "sq": 1}, {"x": 2, "sq": 4}, {"x": 3, "sq": 9}]
    assert pool.map(abs, range(-5, 5)).collect(timeout=10) == [5, 4, 3, 2, 1, 0, 1, 2, 3, 4]


@pytest.mark.parametrize("xs", [np.arange(10, dtype=np.int32), np.arange(10.0, dtype=np.float32),
                                np.arange(10, dtype=np.uint8), [float(i) for i in range(10)], list(range(10)),
                                [str(i) for i in range(10)]])
def test_map_inputs(pool, xs):
    got = pool.map(pyfuncs.identity, xs).collect(timeout=10)
    assert [float(g) for g in got] == [float(x) for x in xs]


def test_map_bool_input_and_template(pool):
    xs = np.array([True, False, True])
    assert pool.map(lambda b: not b, xs, template="bool").collect(timeout=10).tolist() == [False, True, False]
    got = pool.map(lambda b: None if b else False, xs, template="bool").collect(timeout=10)
    assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [True, False, True]


def test_map_array_and_record_templates(pool):
    got = pool.map(lambda x: [x, x * 2, x * 3], range(4), template="i64[3]").collect(timeout=10)
    assert got.shape == (4, 3) and got[2].tolist() == [2, 4, 6]
    got = pool.map(lambda x: np.array([x, -x], dtype=np.float64), range(3), template="f64[2]").collect(timeout=10)
    assert got.tolist() == [[0.0, -0.0], [1.0, -1.0], [2.0, -2.0]]
    f = pool.map(lambda x: {"mean": x / 2, "n": x}, range(5), template="{mean: f64, n: i64}").collect(timeout=10)
    assert isinstance(f, suiro.Frame) and f.names == ["mean", "n"]
    assert f["n"].tolist() == [0, 1, 2, 3, 4] and f["mean"].tolist() == [0, 0.5, 1, 1.5, 2]


def test_template_rules(pool):
    assert pool.map(lambda x: x, [1, 2], template="f32").collect(timeout=10).dtype == np.float32
    assert pool.map(lambda x: 2.0 * x, [1, 2], template="i32").collect(timeout=10).tolist() == [2, 4]
    with pytest.raises(ValueError, match="template i32 cannot hold 2.5"):
        pool.map(lambda x: 2.5, [1], template="i32").collect(timeout=10)
    with pytest.raises(ValueError, match="template f64 cannot hold a str"):
        pool.map(lambda x: "s", [1], template="f64").collect(timeout=10)
    with pytest.raises(ValueError, match=r"template"):
        pool.map(abs, [1], template="f99")
    with pytest.raises(ValueError, match='field "b" is missing'):
        pool.map(lambda x: {"a": 1}, [1], template="{a: f64, b: f64}").collect(timeout=10)


def test_map_stream_yields_every_element(pool):
    seen = {}
    for i, v in pool.map(pyfuncs.identity, range(1000), stream=True):
        seen[i] = v
    assert seen == {i: i for i in range(1000)}
    got = dict(pool.map(lambda x: x * 2, range(50), template="i64", stream=True))
    assert got == {i: 2 * i for i in range(50)}


def test_map_iterates_in_order_without_stream(pool):
    assert list(pool.map(lambda x: x + 1, range(5))) == [(i, i + 1) for i in range(5)]


def test_map_prepare_runs_again(pool):
    xs = np.arange(1000, dtype=np.float64)
    with pool.map_prepare(lambda x: x * 2, xs, template="f64") as pm:
        assert pm.run().tolist() == (xs * 2).tolist()
        assert pm.run(xs + 1).tolist() == ((xs + 1) * 2).tolist()
        assert pm.run().tolist() == ((xs + 1) * 2).tolist()
        with pytest.raises(ValueError, match="same type and length"):
            pm.run(np.arange(10.0))


def test_map_progress_callback(pool):
    calls = []
    got = pool.map(pyfuncs.nap, [0.05] * 6, progress=lambda done, n: calls.append((done, n))).collect(timeout=20)
    assert got == [0.05] * 6
    assert calls and calls[-1] == (6, 6) and all(n == 6 for _, n in calls)


def test_map_timeout_then_collect(pool1):
    m = pool1.map(pyfuncs.nap, [0.3] * 2)
    with pytest.raises(TimeoutError):
        m.collect(timeout=0.05)
    assert len(m.collect(timeout=10)) == 2


def test_map_cancel(pool1):
    m = pool1.map(pyfuncs.nap, [0.05] * 200)
    m.cancel()
    with pytest.raises(suiro.CancelledError):
        m.collect(timeout=20)


def test_map_worker_death():
    with suiro.pool(workers=1) as p:
        with pytest.raises(suiro.WorkerDied) as e:
            p.map(lambda x: pyfuncs.die() if x == 3 else x, range(10)).collect(timeout=20)
        assert e.value.pid > 0
        assert p.map(abs, [-1, -2]).collect(timeout=20) == [1, 2]


def test_map_empty(pool):
    assert pool.map(abs, []).collect(timeout=5) == []
    assert len(pool.map(abs, range(0), template="f64").collect(timeout=5)) == 0


def test_map_misuse(pool):
    with pytest.raises(TypeError, match="seed must be an int"):
        pool.map(abs, [1], seed=1.5)
    with pytest.raises(TypeError, match="argument 1"):
        pool.map(42, [1])
    with pytest.raises(TypeError, match="progress"):
        pool.map(abs, [1], progress="yes")


# ---- random streams -------------------------------------------------------------------------------


def rng_lines():
    out = []
    with open(os.path.join(VECTORS, "rng.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            out.append(line.split())
    return out


def test_rng_vectors():
    lines = rng_lines()
    assert len(lines) >= 100
    for l in lines:
        kind, seed, index = l[0], int(l[1]), int(l[2])
        if kind == "next":
            assert suiro._core._rng_draws(seed, index, "next", 4) == [int(x) for x in l[3:7]], l
        elif kind == "unit":
            assert suiro._core._rng_draws(seed, index, "unit", 3) == [float(x) for x in l[3:6]], l
        else:
            lo, hi = int(l[3]), int(l[4])
            want = [int(x) for x in l[5:]]
            assert suiro._core._rng_draws(seed, index, "range", len(want), lo, hi) == want, l


def test_random_inside_a_seeded_map_follows_the_vectors(pool):
    units = {(int(l[1]), int(l[2])): float(l[3]) for l in rng_lines() if l[0] == "unit" and int(l[2]) < 8}
    for seed in {s for s, _ in units}:
        got = pool.map(pyfuncs.draws, range(8), template="f64", seed=seed).collect(timeout=10)
        for (s, i), v in units.items():
            if s == seed:
                assert got[i] == v


def test_seeded_maps_bitwise_equal_across_worker_counts():
    results = []
    for workers in (1, 2, 4):
        with suiro.pool(workers=workers) as p:
            a = p.map(pyfuncs.draws, range(5000), template="f64", seed=7).collect(timeout=60)
            b = p.map(pyfuncs.draws_int, range(5000), template="i64", seed=-3).collect(timeout=60)
            results.append((a.tobytes(), b.tobytes()))
    assert results[0] == results[1] == results[2]


def test_a_numpy_generator_made_from_the_element_stream_is_reproducible():
    # docs/python.md: numpy.random.default_rng(suiro.random(2**62)) inside a seeded map
    def f(i):
        import numpy as np
        import suiro
        return float(np.random.default_rng(suiro.random(2**62)).random())
    got = []
    for workers in (1, 2):
        with suiro.pool(workers=workers) as p:
            got.append(p.map(f, range(300), template="f64", seed=11).collect(timeout=60).tobytes())
    assert got[0] == got[1]
    assert len(set(np.frombuffer(got[0]).tolist())) == 300


def test_random_outside_maps_is_plain_random(pool):
    v = suiro.random()
    assert 0 <= v < 1 and 1 <= suiro.random(6) <= 6 and 3 <= suiro.random(3, 4) <= 4
    with pytest.raises(ValueError):
        pool.map(lambda x: suiro.random(5, 1), [1], seed=1).collect(timeout=5)


def test_seeded_map_equals_lua():
    script = textwrap.dedent("""
        local suiro = require "suiro"
        local p <close> = suiro.pool { workers = 2 }
        local a = p:map(function(i) return suiro.random() end, suiro.range(1, 2000), { template = "f64", seed = 42 }):collect()
        local b = p:map(function(i) return suiro.random(1, 6) end, suiro.range(1, 2000), { template = "i64", seed = 42 }):collect()
        local out = {}
        for i = 1, #a do out[#out + 1] = string.format("%a %d", a[i], b[i]) end
        print(table.concat(out, "\\n"))
    """)
    path = os.path.join(ROOT, "build", "python-test-rng.lua")
    with open(path, "w") as f:
        f.write(script)
    try:
        out = subprocess.run([LUA_WORKER, "run", path], capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(path)
    assert out.returncode == 0, out.stderr
    lua = [l.split() for l in out.stdout.strip().split("\n")]
    with suiro.pool(workers=2) as p:
        a = p.map(pyfuncs.draws, range(2000), template="f64", seed=42).collect(timeout=30)
        b = p.map(pyfuncs.draws_int, range(2000), template="i64", seed=42).collect(timeout=30)
    assert len(lua) == 2000
    assert [float.fromhex(x) for x, _ in lua] == a.tolist()
    assert [int(y) for _, y in lua] == b.tolist()


def test_numpy_scalars_fill_templates(pool):
    assert pool.map(lambda x: np.int64(x), range(3), template="i64").collect(timeout=10).tolist() == [0, 1, 2]
    assert pool.map(lambda x: np.float32(x) / 2, range(3), template="f64").collect(timeout=10).tolist() == [0, 0.5, 1]
    assert pool.map(lambda x: np.bool_(x % 2), range(3), template="bool").collect(timeout=10).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="template i64 cannot hold a boolean"):
        pool.map(lambda x: np.bool_(True), range(1), template="i64").collect(timeout=10)
