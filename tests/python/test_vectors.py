"""The golden vectors of tests/vectors: every .bin decodes to the value its .txt describes (read
here from the notation of docs/wire-format.md, section 9), that value and the decoded one both
encode back to the .bin byte for byte, and every truncation fails cleanly."""

import glob
import os
import struct

import numpy as np
import pandas as pd
import pytest

import suiro
from conftest import VECTORS

NAMES = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(VECTORS, "*.bin")))
DTYPES = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "i32": np.int32, "u8": np.uint8,
          "bool": np.uint8, "c128": np.complex128}
KINDS = {"bytes": 0x00, "wire": 0x40, "f64": 1, "f32": 2, "i64": 3, "i32": 4, "u8": 5, "bool": 6, "c128": 7}
UNITS = ("s", "ms", "us", "ns")


def f64(tok):
    if tok == "na":
        return struct.unpack("<d", struct.pack("<Q", 0x7FF00000000007A2))[0]
    if tok == "nan":
        return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000))[0]
    if tok.startswith("nan:"):
        return struct.unpack("<d", struct.pack("<Q", int(tok[4:], 16)))[0]
    return float.fromhex(tok)


def f32_bits(tok):
    if tok == "nan":
        return 0x7FC00000
    if tok.startswith("nan:"):
        return int(tok[4:], 16)
    return struct.unpack("<I", struct.pack("<f", float.fromhex(tok)))[0]


def hexbytes(tok):
    assert tok[0] == "x"
    return bytes.fromhex(tok[1:])


class Reader:
    """Reads the notation depth-first, building the value the Python decoder must produce."""

    def __init__(self, text):
        self.lines = [l.split(" ") for l in text.split("\n") if l and not l.startswith("#")]
        self.i = 0
        self.containers = []

    def line(self):
        l = self.lines[self.i]
        self.i += 1
        return l

    def elements(self, typ, n):
        toks = [self.line() for _ in range(n)]
        if typ == "f64":
            return np.array([f64(t[0]) for t in toks], dtype=np.float64)
        if typ == "f32":
            return np.array([f32_bits(t[0]) for t in toks], dtype=np.uint32).view(np.float32)
        if typ == "c128":
            pairs = np.array([[f64(t[0]), f64(t[1])] for t in toks], dtype=np.float64)
            return pairs.reshape(-1).view(np.complex128) if n else np.zeros(0, np.complex128)
        if typ == "bool":
            return np.array([{"true": 1, "false": 0, "na": 0xFF}[t[0]] for t in toks], dtype=np.uint8)
        if typ == "i32":
            return np.array([-2**31 if t[0] == "na" else int(t[0]) for t in toks], dtype=np.int32)
        if typ == "i64":
            return np.array([-2**63 if t[0] == "na" else int(t[0]) for t in toks], dtype=np.int64)
        return np.array([int(t[0]) for t in toks], dtype=DTYPES[typ])

    def typed(self, typ, arr, shape=None, order="C"):
        if shape is not None:
            arr = arr.reshape(shape, order=order)
        if typ == "bool":
            if (arr == 0xFF).any():
                return np.ma.MaskedArray(arr == 1, mask=arr == 0xFF)
            return arr.astype(bool)
        return arr

    def strs(self, n):
        out = []
        for _ in range(n):
            t = self.line()[0]
            out.append(None if t == "na" else hexbytes(t).decode("utf-8", "surrogateescape"))
        return suiro.Strings(out)

    def text(self):
        l = self.line()
        assert l[0] == "str", l
        return hexbytes(l[1]).decode("utf-8", "surrogateescape")

    def value(self):
        l = self.line()
        k = l[0]
        if k == "nil":
            return None
        if k == "bool":
            return {"true": True, "false": False, "na": suiro.NA}[l[1]]
        if k == "i64":
            return -2**63 if l[1] == "na" else int(l[1])
        if k == "f64":
            return f64(l[1])
        if k == "str":
            return hexbytes(l[1]).decode("utf-8", "surrogateescape")
        if k == "bytes":
            return hexbytes(l[1])
        if k == "array":
            return self.typed(l[1], self.elements(l[1], int(l[2])))
        if k == "ndarray":
            typ, order, nd = l[1], l[2], int(l[3])
            dims = tuple(int(x) for x in l[4:4 + nd])
            n = int(np.prod(dims)) if nd else 1
            return self.typed(typ, self.elements(typ, n), dims, order)
        if k == "strs":
            return self.strs(int(l[1]))
        if k == "list":
            out = []
            self.containers.append(out)
            for _ in range(int(l[1])):
                out.append(self.value())
            return out
        if k == "dict":
            out = {}
            self.containers.append(out)
            for _ in range(int(l[1])):
                key = self.text()
                out[key] = self.value()
            return out
        if k == "frame":
            names, cols = [], []
            for _ in range(int(l[1])):
                names.append(self.text())
                cols.append(self.value())
            return suiro.Frame._make(names, cols, int(l[2]))
        if k == "factor":
            toks = [self.line()[0] for _ in range(int(l[2]))]
            codes = np.array([-1 if t == "na" else int(t) for t in toks], dtype=np.int32)
            lv = self.line()
            assert lv[0] == "strs"
            levels = list(self.strs(int(lv[1])))
            return pd.Categorical.from_codes(codes, categories=levels, ordered=l[1] == "ordered")
        if k == "date":
            vals = self.elements(l[1], int(l[2]))
            return vals.view("datetime64[D]") if l[1] == "i64" else suiro.Dates(vals)
        if k == "timestamp":
            typ, unit, n = l[1], l[2], int(l[3])
            tz = self.text()
            vals = self.elements(typ, n)
            if typ == "i64" and not tz:
                return vals.view("datetime64[%s]" % unit)
            return suiro.Timestamps(vals, unit, tz)
        if k == "error":
            cls, msg, tb = self.text(), self.text(), self.text()
            idx = int(l[1])
            return suiro.RemoteError(msg, cls, tb, None if idx < 0 else idx)
        if k == "call":
            text = self.text()
            args, kwargs = self.value(), self.value()
            return suiro.Call(text, None, args, kwargs) if l[1] == "name" else suiro.Call(None, text, args, kwargs)
        if k == "ref":
            kind, order, flags, offset, length, nd = KINDS[l[1]], "CF".index(l[2]), int(l[3]), int(l[4]), int(l[5]), int(l[6])
            dims = tuple(int(x) for x in l[7:7 + nd])
            return suiro.Ref(self.text(), kind, order, flags, offset, length, dims)
        if k == "func":
            f = suiro.Func(l[1], int(l[2]))
            self.containers.append(f)
            n = int(l[3])
            f.name = self.value()
            for _ in range(n - 1):
                f.captured.append(self.value())
            return f
        if k == "backref":
            return self.containers[int(l[1])]
        if k == "range":
            start, step, n = int(l[1]), int(l[2]), int(l[3])
            return range(start, start + step * n, step)
        raise AssertionError("unknown notation line %r" % (l,))


def same(a, b, memo=None):
    """Deep equality that sees float bits, dtypes, memory order, masks and shared structure."""
    memo = {} if memo is None else memo
    key = (id(a), id(b))
    if key in memo:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, np.ma.MaskedArray):
        return (a.dtype == b.dtype and a.shape == b.shape and
                np.array_equal(np.ma.getmaskarray(a), np.ma.getmaskarray(b)) and
                np.ma.getdata(a)[~np.ma.getmaskarray(a)].tobytes() == np.ma.getdata(b)[~np.ma.getmaskarray(b)].tobytes()
                and a.flags.f_contiguous == b.flags.f_contiguous)
    if isinstance(a, np.ndarray):
        return (a.dtype == b.dtype and a.shape == b.shape and a.tobytes(order="A") == b.tobytes(order="A")
                and a.flags.c_contiguous == b.flags.c_contiguous)
    if isinstance(a, (list, suiro.Strings)):
        memo[key] = True
        return len(a) == len(b) and all(same(x, y, memo) for x, y in zip(a, b))
    if isinstance(a, suiro.Frame):  # a read-only mapping (a dict subclass): before dicts
        return a.names == b.names and a.nrow == b.nrow and all(same(x, y, memo) for x, y in zip(a.columns, b.columns))
    if isinstance(a, dict):
        memo[key] = True
        return list(a) == list(b) and all(same(a[k], b[k], memo) for k in a)
    if isinstance(a, pd.Categorical):
        return (list(a.categories) == list(b.categories) and a.ordered == b.ordered
                and list(a.codes) == list(b.codes))
    if isinstance(a, (suiro.Dates, suiro.Timestamps)):
        return a == b and a.values.dtype == b.values.dtype
    if isinstance(a, suiro.RemoteError):
        return (a.remote_class, a.message, a.traceback, a.index) == (b.remote_class, b.message, b.traceback, b.index)
    if isinstance(a, suiro.Call):
        return a.target == b.target and a.source == b.source and same(a.args, b.args, memo) and same(a.kwargs, b.kwargs, memo)
    if isinstance(a, suiro.Func):
        memo[key] = True
        return ((a.lang, a.key, a.name) == (b.lang, b.key, b.name) and len(a.captured) == len(b.captured)
                and all(same(x, y, memo) for x, y in zip(a.captured, b.captured)))
    return a == b


def load(name):
    with open(os.path.join(VECTORS, name + ".bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(VECTORS, name + ".txt")) as f:
        expected = Reader(f.read()).value()
    return data, expected


def test_all_vectors_are_covered():
    assert len(NAMES) >= 60  # the groups of docs/wire-format.md, section 9


@pytest.mark.parametrize("name", NAMES)
def test_vector(name):
    data, expected = load(name)
    got = suiro.wire.decode(data, describe=True)
    assert same(got, expected), "%s: decoded %r, expected %r" % (name, got, expected)
    assert suiro.wire.encode(expected) == data, name
    assert suiro.wire.encode(got) == data, name
    for cut in range(0, len(data), 8 if len(data) > 4096 else 1):
        with pytest.raises(ValueError):
            suiro.wire.decode(data[:cut], describe=True)


def test_backrefs_keep_sharing_and_cycles():
    data, _ = load("backref_cycle")
    d = suiro.wire.decode(data)
    assert d["self"] is d
    data, _ = load("backref_shared")
    l = suiro.wire.decode(data)
    assert l[0] is l[1]


def test_nan_payloads_survive():
    data, _ = load("f64_nan_na")
    vals = suiro.wire.decode(data)
    bits = [struct.unpack("<Q", struct.pack("<d", v))[0] for v in vals.tolist()] if isinstance(vals, np.ndarray) \
        else [struct.unpack("<Q", struct.pack("<d", v))[0] for v in vals]
    assert 0x7FF00000000007A2 in bits and 0x7FF80000000007A2 in bits
