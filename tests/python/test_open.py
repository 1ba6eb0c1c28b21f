"""suiro.open: the Lua face's config scripts, read by the same Lua code (embedded), with the same
checks and messages; and templates parsed by the one LPeg grammar."""

import collections.abc
import os
import subprocess

import pytest

import suiro
from conftest import LUA_WORKER, ROOT

EXAMPLE = os.path.join(ROOT, "examples", "pools.lua")


def test_open_examples_pools():
    with suiro.open(EXAMPLE) as pools:
        assert pools.names() == ["parse", "score"]
        o = pools.options("parse")
        assert o["workers"] == 2 and o["timeout"] == 30.0 and o["env"] == {"PIPELINE_STAGE": "parse"}
        assert o["launcher"]["kind"] == "lua" and pools.options("score")["start_timeout"] == 5.0
        p = pools.parse  # created on first use: Lua workers, as the script says
        assert p.lang == "lua"
        got = p.submit(suiro.call(source="return os.getenv('PIPELINE_STAGE')")).collect(timeout=10)
        assert got == "parse"
        assert pools["parse"] is p
        assert p.status()["live"] == 2
        with pytest.raises(KeyError, match='no pool "nope"'):
            pools["nope"]
    assert p.closed  # closing the set stops its pools


def lua_open_error(path):
    script = os.path.join(ROOT, "build", "python-test-open.lua")
    with open(script, "w") as f:
        f.write('local ok, err = pcall(require("suiro").open, %r)\nio.write(tostring(err))\n' % path)
    try:
        out = subprocess.run([LUA_WORKER, "run", script], capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(script)
    return out.stdout


@pytest.mark.parametrize("body", [
    'return { ingest = { workers = 2, timeout = "1m30" } }',
    'return { a = { workers = "two" } }',
    'return { a = { launcher = "fortran" } }',
    'return { a = { bogus = 1 } }',
    'return { a = { env = { ["bad name"] = "x" } } }',
    'return 42',
    'syntax error here',
])
def test_config_errors_match_lua(tmp_path, body):
    path = str(tmp_path / "pools.lua")
    with open(path, "w") as f:
        f.write(body + "\n")
    with pytest.raises(ValueError) as e:
        suiro.open(path)
    msg = str(e.value)
    assert msg.startswith("suiro.open: ")
    assert msg == lua_open_error(path)


def test_python_launcher_in_a_config(tmp_path):
    path = str(tmp_path / "py.lua")
    with open(path, "w") as f:
        f.write('return { py = { workers = 1, launcher = suiro.python { python = "/usr/bin/python3" },\n'
                '                env = { K = 7 } } }\n')
    with suiro.open(path) as pools:
        p = pools.py
        assert p.lang == "python"
        assert p.submit(os.getenv, "K").collect(timeout=10) == "7"


def test_an_mpi_pool_in_a_config_is_one_node_outside_mpirun(tmp_path):
    path = str(tmp_path / "mpi.lua")
    with open(path, "w") as f:
        f.write('return { m = { workers = 1, backend = "mpi" }, l = { workers = 1, backend = "local" } }\n')
    with suiro.open(path) as pools:
        assert pools.l.submit("math.max", 2, 3).collect(timeout=10) == 3
        st = pools.m.status()  # backend = "mpi" without mpirun: the local pool, one node
        assert st["backend"] == "mpi" and [n["rank"] for n in st["nodes"]] == [0]
        assert pools.m.submit("math.max", 2, 3).collect(timeout=10) == 3
    with pytest.raises(ValueError, match='suiro.pool: backend: must be "local" or "mpi", got "x"'):
        suiro.pool(workers=1, backend="x")


def test_open_misuse():
    with pytest.raises(TypeError, match="argument 1 must be a file name"):
        suiro.open(42)
    with pytest.raises(ValueError, match="suiro.open: cannot open"):
        suiro.open("/nonexistent/pools.lua")


def test_templates_use_the_lua_grammar():
    assert suiro._core.template("f64") == {"kind": "scalar", "type": "f64", "shape": ()}
    assert suiro._core.template("i32[2,3]") == {"kind": "array", "type": "i32", "shape": (2, 3)}
    assert suiro._core.template("{mean: f64, n: i64}") == {"kind": "record", "fields": [("mean", "f64"), ("n", "i64")]}
    with pytest.raises(ValueError, match="column"):
        suiro._core.template("{mean f64}")
    assert suiro._core.duration("1m30s") == 90.0


def test_open_is_a_mapping_of_names(tmp_path):
    # a pool that cannot start: iterating, len, `in` and keys() must not try to start it
    path = str(tmp_path / "pools.lua")
    with open(path, "w") as f:
        f.write('return { good = { workers = 1 }, broken = { workers = 1, launcher = suiro.lua '
                '{ exe = "/nonexistent/suiro-worker" } } }\n')
    with suiro.open(path) as pools:
        assert list(pools) == ["broken", "good"] == pools.names()
        assert len(pools) == 2 and "good" in pools and "nope" not in pools
        assert sorted(pools.keys()) == ["broken", "good"]
        assert isinstance(pools, collections.abc.Mapping)
        assert pools.get("nope") is None
        assert pools["good"].submit(suiro.call(source="return 1 + 1")).collect(timeout=10) == 2
        with pytest.raises(suiro.StartError):
            pools["broken"]


def test_dir_lists_lazy_names():
    names = dir(suiro)
    assert "PoolExecutor" in names and "RemoteTraceback" in names and "pool" in names
