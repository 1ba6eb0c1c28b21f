"""Hostile input to the Python face (issue 17, item 4 and acceptance 3): suiro.wire.decode of
crafted bytes runs no code (pickles and imports are refused unless trusted=True), results of
non-Python workers are never unpickled, and huge counts in decoders and constructors give a
clear error without allocating. Every case is bounded: nothing here waits or allocates much."""

import base64
import os
import pickle
import struct

import pytest

import suiro
from conftest import LUA_WORKER

HEADER = b"SUIRO\x01\x00\x00"


def item(tag, flag=0, n=0):
    return struct.pack("<BBHI", tag, flag, n & 0xFFFF, 0)


def str_item(s):
    data = s.encode()
    pad = b"\x00" * (-len(data) % 8)
    return struct.pack("<BB", 0x06, 0) + len(data).to_bytes(6, "little") + data + pad


class _Run:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def named_function(name):
    """Wire bytes of a Python function named by reference (a worker would import it)."""
    return HEADER + item(0x14, 2, 1) + b"\x00" * 8 + str_item(name)


def test_decode_refuses_a_pickle_that_runs_a_command(tmp_path):
    marker = tmp_path / "ran"
    b = suiro.wire.encode(_Run("touch %s" % marker))  # a pickled object, as a Python host sends one
    with pytest.raises(ValueError, match=r"refused a pickled Python object \(_Run\) at byte 8: unpickling runs code"):
        suiro.wire.decode(b)
    with pytest.raises(ValueError, match="trusted=True"):
        suiro.wire.decode(suiro.wire.encode([1, {"x": _Run("touch %s" % marker)}]))  # nested too
    assert not marker.exists()


def test_decode_refuses_to_import_a_named_function(tmp_path):
    for name in ("os.system", "antigravity.x", "subprocess.run"):
        with pytest.raises(ValueError, match="refused to import the Python function '%s' at byte 8" % name):
            suiro.wire.decode(named_function(name))
    assert "antigravity" not in __import__("sys").modules
    d = suiro.wire.decode(named_function("os.system"), describe=True)  # described, not imported
    assert isinstance(d, suiro.Func) and d.name == "os.system"


def test_decode_refuses_a_function_sent_by_code():
    b = HEADER + item(0x14, 2, 1) + struct.pack("<Q", 0x1234) + struct.pack("<BB6x", 0, 0)
    with pytest.raises(ValueError, match="refused a Python function sent by code"):
        suiro.wire.decode(b)


def test_decode_trusted_and_plain_data():
    assert suiro.wire.decode(suiro.wire.encode({1, 2}), trusted=True) == {1, 2}
    assert suiro.wire.decode(suiro.wire.encode((1, [2, (3,)]))) == (1, [2, (3,)])  # tuples are data
    assert suiro.wire.decode(suiro.wire.encode({"a": [1.5, None, "x", b"y"]})) == {"a": [1.5, None, "x", b"y"]}


def test_results_of_python_workers_still_unpickle(pool):
    assert pool.submit(set, [1, 2]).collect(timeout=30) == {1, 2}
    assert pool.map(frozenset, [[1], [2]]).collect(timeout=30) == [frozenset([1]), frozenset([2])]


@pytest.mark.skipif(not os.access(LUA_WORKER, os.X_OK), reason="needs the Lua worker (scripts/build)")
def test_a_lua_worker_error_is_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    payload = "suiro-pickle:" + base64.b64encode(pickle.dumps(_Run("touch %s" % marker))).decode()
    with suiro.pool(workers=1, launcher=suiro.lua()) as lp:
        with pytest.raises(suiro.RemoteError) as e:
            lp.submit(suiro.call(source="error(msg, 0)", msg=payload)).collect(timeout=30)
        assert payload in str(e.value.message) + str(e.value.traceback)
        with pytest.raises(suiro.RemoteError):
            lp.map("error", [payload]).collect(timeout=30)
    assert not marker.exists()


# ---- huge counts: a clear error, nothing allocated (acceptance 3) -------------------------------

HUGE = 1 << 60
MAXC = (1 << 48) - 1  # the most a wire count can say


def head(tag, aux, count):
    return HEADER + struct.pack("<BB", tag, aux) + count.to_bytes(6, "little")


@pytest.mark.parametrize("tag,aux", [(0x0B, 0), (0x0C, 0), (0x06, 0), (0x07, 0), (0x08, 1), (0x08, 3), (0x0A, 0)],
                         ids=["list", "dict", "str", "bytes", "f64", "i64", "strs"])
def test_decode_huge_counts(tag, aux):
    b = head(tag, aux, MAXC) + b"\x00" * 64
    with pytest.raises(ValueError, match="cannot decode value"):
        suiro.wire.decode(b)
    with pytest.raises(ValueError, match="cannot decode value"):
        suiro.wire.decode(b, trusted=True)


def test_constructors_refuse_huge_counts(pool):
    with pytest.raises(ValueError, match="suiro.pool: workers: must be in"):
        suiro.pool(workers=HUGE)
    for k in ("ring_cap", "slot_size", "result_slots", "result_size", "max_workers"):
        with pytest.raises(ValueError, match="suiro.pool: %s: must be in" % k):
            suiro.pool(workers=1, **{k: HUGE})
    with pytest.raises(ValueError, match="spawn: n must be in"):
        pool.spawn(HUGE)
    with pytest.raises(ValueError, match="^map: too many elements"):
        pool.map(abs, range(HUGE))
    with pytest.raises(ValueError, match="elements need .* of shared memory"):
        pool.map(abs, range(MAXC), template="f64")
    with pytest.raises(ValueError, match="too large"):
        pool.map(abs, range(3), template="f64[%d]" % HUGE)
