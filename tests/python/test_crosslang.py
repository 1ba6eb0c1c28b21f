"""Lua <-> Python through call specs, both directions: a Python host on Lua workers, and a Lua
host (the suiro CLI) on Python workers."""

import os
import subprocess
import textwrap

import numpy as np
import pytest

import suiro
from conftest import LUA_WORKER, ROOT


def test_python_host_lua_workers_source(luapool):
    assert luapool.submit(suiro.call(source="return a + b", a=1, b=2)).collect(timeout=10) == 3


def test_python_host_lua_workers_named(luapool):
    assert luapool.submit("string.format", "%d-%s", 5, "x").collect(timeout=10) == "5-x"
    assert luapool.submit(suiro.call("math.max", 3, 9, 2)).collect(timeout=10) == 9


def test_python_host_lua_workers_arrays(luapool):
    got = luapool.submit(suiro.call(source="return x:sum(), #x", x=np.arange(5.0))).collect(timeout=10)
    assert got == (10.0, 5)  # several Lua results arrive as a tuple
    doubled = luapool.submit(suiro.call(source="local y = require('suiro').array('f64', #x)\n"
                                               "for i = 1, #x do y[i] = x[i] * 2 end\nreturn y",
                                        x=np.array([1.0, 2.5]))).collect(timeout=10)
    assert isinstance(doubled, np.ndarray) and doubled.tolist() == [2.0, 5.0]


def test_python_host_lua_workers_large_array_by_reference(luapool):
    x = np.arange(100000, dtype=np.float64)  # above the zero-copy floor
    assert luapool.submit(suiro.call(source="return x:sum()", x=x)).collect(timeout=10) == x.sum()


def test_lua_worker_error_is_remote_error(luapool):
    with pytest.raises(suiro.RemoteError) as e:
        luapool.submit(suiro.call(source="error('bad thing')")).collect(timeout=10)
    assert e.value.remote_class == "remote"
    assert "bad thing" in e.value.message and "stack traceback" in e.value.traceback


def test_python_values_refused_by_lua_workers(luapool):
    with pytest.raises(TypeError, match=r"submit: argument 2: set cannot be sent to lua workers"):
        luapool.submit("string.rep", {1, 2})
    with pytest.raises(TypeError, match="cannot run on lua workers"):
        luapool.submit(len, "abc")
    with pytest.raises(TypeError, match=r"dict key of type int cannot be sent to lua workers"):
        luapool.submit(suiro.call(source="return 1", t={1: 2}))
    with pytest.raises(TypeError, match="a Python function cannot run on lua workers|cannot run on lua workers"):
        luapool.map(abs, [1.0])


def test_python_host_maps_on_lua_workers(luapool):
    got = luapool.map("math.sqrt", np.array([1.0, 4.0, 9.0]), template="f64").collect(timeout=10)
    assert got.tolist() == [1.0, 2.0, 3.0]
    assert luapool.map("string.upper", ["a", "b"]).collect(timeout=10) == ["A", "B"]
    # seeded: Lua's suiro.random draws the same streams as Python's
    lua = luapool.map("suiro.random", range(1, 101), template="i64", seed=11)  # random(i): 1..i
    with suiro.pool(workers=1) as p:
        import pyfuncs
        py = p.map(pyfuncs.rand_upto, range(1, 101), template="i64", seed=11).collect(timeout=10)
    assert lua.collect(timeout=10).tolist() == py.tolist()


def run_lua(script, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tests", "python"))
    path = os.path.join(ROOT, "build", "python-test-host.lua")
    with open(path, "w") as f:
        f.write(textwrap.dedent(script))
    try:
        out = subprocess.run([LUA_WORKER, "run", path], capture_output=True, text=True, timeout=timeout, env=env)
    finally:
        os.unlink(path)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split("\n")


def test_lua_host_python_workers():
    out = run_lua("""
        local suiro = require "suiro"
        local py <close> = suiro.pool { workers = 2, launcher = suiro.python {} }
        local x = py:submit(suiro.call { "numpy.multiply", suiro.f64 { 1, 2, 3 }, 2 }):collect()
        print(tostring(x), #x, x[1], x[3])
        print(string.format("%.6f", py:submit(suiro.call { source = "import numpy as np\\nnp.std(x)", x = x }):collect()))
        print(py:submit(suiro.call { "operator.add", 1, 2 }):collect())
        print(py:submit("math.sqrt", 16):collect())
        print(py:submit(suiro.call { "pyfuncs.echo", 1, "two", k = suiro.f64 { 1.5 } }):collect()[2].k[1])
        local big = suiro.array("f64", 100000)
        for i = 1, #big do big[i] = i end
        local back = py:submit(suiro.call { "pyfuncs.times2", big }):collect()
        print(#back, back[100000])
    """)
    assert out[0] == "suiro.array f64 {2.0, 4.0, 6.0}\t3\t2.0\t6.0"
    assert out[1] == "%.6f" % np.std([2.0, 4.0, 6.0])
    assert out[2] == "3"
    assert out[3] == "4.0"
    assert out[4] == "1.5"
    assert out[5] == "100000\t200000.0"


def test_lua_host_python_errors():
    out = run_lua("""
        local suiro = require "suiro"
        local py <close> = suiro.pool { workers = 1, launcher = suiro.python {} }
        local ok, err = pcall(function() return py:submit(suiro.call { "pyfuncs.raise_", "value", "oops" }):collect() end)
        print(ok, err.class, err.message)
        print(err.traceback:find("pyfuncs.py", 1, true) ~= nil)
        ok, err = pcall(function() return py:submit(suiro.call { "decimal.Decimal", "1.5" }):collect() end)
        print(ok, err.message)
        -- a Lua function is refused at send time: these workers could not run it
        ok, err = pcall(function() return py:submit(function(a) return a end, 1) end)
        print(ok, (err:gsub("^.-:%d+: ", "")))
        ok, err = pcall(function() return py:map(function(a) return a end, { 1 }) end)
        print(ok, (err:gsub("^.-:%d+: ", "")))
        print(py:submit(suiro.call { "abs", -2 }):collect())  -- and the pool serves on
    """)
    assert out[0] == "false\tValueError\toops"
    assert out[1] == "true"
    assert out[2] == ("false\ttask result: result: decimal.Decimal cannot be sent to a lua host "
                      "(only Python processes read pickled objects)")
    assert out[3] == ("false\tpool:submit: argument 1: a Lua function cannot run on python workers; "
                      "name one of their functions (\"module.fn\") or send a suiro.call")
    assert out[4] == ("false\tpool:map: argument 1: a Lua function cannot run on python workers; "
                      "name one of their functions (\"module.fn\") or send a suiro.call")
    assert out[5] == "2"


def test_lua_host_maps_on_python_workers():
    out = run_lua("""
        local suiro = require "suiro"
        local py <close> = suiro.pool { workers = 2, launcher = suiro.python {} }
        local m = py:map("math.sqrt", suiro.f64 { 1, 4, 9, 16 }, { template = "f64" }):collect()
        print(tostring(m))
        local r = py:map("pyfuncs.draws", suiro.range(1, 5), { template = "f64", seed = 3 }):collect()
        local lu <close> = suiro.pool { workers = 1 }
        local l = lu:map(function() return suiro.random() end, suiro.range(1, 5), { template = "f64", seed = 3 }):collect()
        local same = true
        for i = 1, 5 do same = same and r[i] == l[i] end
        print(same)
    """)
    assert out[0] == "suiro.array f64 {1.0, 2.0, 3.0, 4.0}"
    assert out[1] == "true"


def test_lua_doctor_reports_python():
    out = subprocess.run([LUA_WORKER, "doctor"], capture_output=True, text=True, timeout=60)
    line = [l for l in out.stdout.split("\n") if " python " in l][0]
    assert line.startswith("ok"), line
