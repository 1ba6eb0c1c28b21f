"""The type matrix, Python -> R -> Python (issue 18, acceptance 2): every wire type and every
documented mapping of a Python host's values, sent to an R worker that passes each on to a Python
pool of its own (started inside the worker once: a nested pool across languages, item 9) and
returns what came back. Each value has one expected outcome: "exact" (the same type, dtype,
shape and bits; assert_frame_equal / assert_series_equal for pandas), the documented change
(the value that comes back is given), or a refusal whose message names the path.

The outcome table is docs/wire-format.md's "What crosses: the type matrix" (Python -> R ->
Python); test_the_doc_table_is_this_table checks that it is this file's table.
"""

import datetime
import decimal
import math
import os
import re
import struct

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

import suiro
from conftest import ROOT

ROUTE = "Python → R → Python"
PY_WORKER = os.path.join(ROOT, "bindings", "python", "suiro", "_worker.py")

# The R worker's task: start a Python pool of its own once (kept in an option), pass x on to it
# and return what comes back. Each value is one task; the pools live for the whole file.
RELAY = """
p <- getOption("suiro.matrix.pool")
if (is.null(p)) {
  p <- suiro::suiro_pool(1, launcher = suiro::suiro_python(argv = c("/usr/bin/python3", "-I", script)))
  options(suiro.matrix.pool = p)
}
suiro::suiro_collect(suiro::suiro_submit(p, suiro::suiro_call(.source = "x", x = x)), timeout = 60)
"""

EXACT = ("exact",)


def changed(value, note):
    return ("changed", value, note)


def refused(pattern, note):
    return ("refused", pattern, note)


def f64(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


NA_REAL = f64(0x7FF00000000007A2)
I64_MIN = -2 ** 63
I64_MAX = 2 ** 63 - 1
BIG = 40000  # elements: 320 KB of f64, above the 256 KiB channel floor and the 32 KiB pool floor


def arr(values, dtype):
    return np.array(values, dtype=dtype)


def nested(depth):
    v = 1
    for _ in range(depth):
        v = [v]
    return v


def shared_list():
    a = [1, 2]
    return [a, a]


def cyclic_list():
    a = [1]
    a.append(a)
    return a


class Point:
    def __init__(self, x):
        self.x = x


class FrameOf:
    """Expected: a suiro.Frame (what a frame from R arrives as) equal to frame (default
    suiro.Frame(df)) whose to_pandas() passes assert_frame_equal with df (its index reset)."""

    def __init__(self, df, frame=None):
        self.df = df.reset_index(drop=True)
        self.frame = suiro.Frame(df) if frame is None else frame

    def __repr__(self):
        return "FrameOf(%r)" % (self.frame,)


def values():
    """(name, class, value, expected outcome) for every row of the table."""
    big_f64 = np.arange(BIG, dtype=np.float64) / 3
    big_i32 = np.arange(BIG * 2, dtype=np.int32) - BIG
    big_i64 = np.arange(BIG, dtype=np.int64) * (2 ** 40)
    big_bool = (np.arange(BIG * 8) % 3 == 0)
    big_c128 = big_f64[: BIG // 2] + 1j
    big_u8 = (np.arange(BIG * 8) % 256).astype(np.uint8)
    strs_u = np.array(["a", "héllo", ""])
    nd_c = np.arange(6.0).reshape(2, 3)
    nd_f = np.asfortranarray(nd_c)
    nd3 = np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    masked_f = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    masked_i = np.ma.masked_array(np.array([1, 2, 3], dtype=np.int32), mask=[False, True, False])
    masked_b = np.ma.masked_array([True, False, False], mask=[False, True, False])
    df_num = pd.DataFrame({"a": [1.5, np.nan, -0.0], "b": np.array([1, 2, 3], dtype=np.int32),
                           "c": np.array([1, 2, I64_MIN + 1], dtype=np.int64), "d": [True, False, True]})
    df_str = pd.DataFrame({"s": ["x", None, "ü"], "k": pd.Categorical(["lo", "hi", "lo"], categories=["lo", "hi"])})
    df_time = pd.DataFrame({"t": pd.to_datetime(["2024-01-01 12:00:00", None, "1969-12-31 23:59:59"]),
                            "tz": pd.to_datetime(["2024-01-01", "2024-06-01", "2024-12-31"]).tz_localize("UTC")})
    df_ext = pd.DataFrame({"I": pd.array([1, None, 3], dtype="Int64"), "F": pd.array([1.5, None, 2.0], dtype="Float64"),
                           "B": pd.array([True, None, False], dtype="boolean")})
    df_big = pd.DataFrame({"x": big_f64, "i": np.arange(BIG, dtype=np.int32)})
    df_idx = pd.DataFrame({"x": [1.0, 2.0]}, index=["r1", "r2"])
    df_empty = pd.DataFrame({"x": np.array([], dtype=np.float64)})
    df_td = pd.DataFrame({"d": pd.to_timedelta([1, 2], unit="s")})
    df_u64 = pd.DataFrame({"u": np.array([1, 2], dtype=np.uint64)})
    cat = pd.Categorical(["b", "a", None, "b"], categories=["b", "a"])
    cat_o = pd.Categorical(["s", "l"], categories=["s", "m", "l"], ordered=True)
    ser = pd.Series([1.5, 2.5, 3.5], name="v")
    ser_s = pd.Series(["a", None, "c"])
    ts_ns = np.array(["2024-01-01T00:00:00.123456789", "NaT"], dtype="datetime64[ns]")
    ts_us = np.array(["2024-01-01T00:00:00.123456", "NaT", "1969-12-31T23:59:59.999999"], dtype="datetime64[us]")
    ts_s = np.array(["2024-01-01T00:00:00", "1969-07-20T20:17:40"], dtype="datetime64[s]")
    days = np.array(["2024-01-01", "NaT", "1969-12-31"], dtype="datetime64[D]")
    V = []

    def add(name, cls, value, outcome=EXACT):
        V.append((name, cls, value, outcome))

    # nil, booleans
    add("None", "nil", None)
    add("True", "bool", True)
    add("False", "bool", False)
    add("suiro.NA", "bool NA", suiro.NA)
    add("pd.NA", "bool NA", pd.NA, changed(suiro.NA, "suiro.NA (bool NA)"))
    # integers
    for v in (0, 1, -1, 42, 2 ** 31 - 1, -(2 ** 31) + 1):
        add("int %d" % v, "int (i32 range)", v)
    for v in (-(2 ** 31), 2 ** 31, 2 ** 40, -(2 ** 47), 2 ** 47 - 1, 2 ** 53):
        add("int %d" % v, "int (R double)", v, changed(float(v), "float (R keeps it as a double)"))
    for v in (2 ** 53 + 1, -(2 ** 53) - 1, I64_MAX, I64_MIN + 1, I64_MIN):
        add("int %d" % v, "int (R integer64)", v)
    add("int 2**64", "int beyond 64 bits", 2 ** 64,
        refused(r"keyword argument 'x': int cannot be sent to r workers: the int does not fit in 64 bits",
                "refused: int beyond 64 bits"))
    # doubles
    for name, v in (("0.0", 0.0), ("-0.0", -0.0), ("1.5", 1.5), ("2.0", 2.0), ("-1e300", -1e300),
                    ("5e-324 (subnormal)", 5e-324), ("2.2250738585072e-308 (subnormal)", 2.225073858507201e-308),
                    ("1.7976931348623157e308", 1.7976931348623157e308), ("inf", math.inf), ("-inf", -math.inf),
                    ("nan", math.nan), ("R's NA_real_", NA_REAL), ("NaN payload 0x7ff8dead", f64(0x7FF800000000DEAD)),
                    ("signalling NaN 0x7ff0000000000001", f64(0x7FF0000000000001)),
                    ("negative NaN", f64(0xFFF8000000000000))):
        add("float %s" % name, "f64", v)
    add("complex 1+2j", "complex", 1 + 2j, changed(arr([1 + 2j], np.complex128), "a one-element complex128 array"))
    # strings and bytes
    for name, v in (("''", ""), ("'abc'", "abc"), ("'héllo'", "héllo"), ("'日本語'", "日本語"),
                    ("emoji", "\U0001F30A"), ("'a\\nb\\tc'", "a\nb\tc"), ("1 MB", "x" * (1 << 20)),
                    ("300 KB non-ASCII", "é" * 150000)):
        add("str %s" % name, "str", v)
    # refused by the R worker's decoder (the Python sender lets it through), naming the argument
    add("str with NUL", "str", "a\x00b", refused(r"cannot decode the task: argument 'x': a string holds a NUL byte",
                                                  "refused by the R worker: a NUL byte"))
    add("str with a lone surrogate", "str", "a\udc80b")
    add("bytes b''", "bytes", b"")
    add("bytes 00 ff 7f", "bytes", b"\x00\xff\x7f")
    add("bytes 300 KB", "bytes", bytes(range(256)) * 1200,
        changed(np.frombuffer(bytes(range(256)) * 1200, dtype=np.uint8), "a uint8 array (R raw from 32 KiB goes as u8)"))
    # lists, dicts, ranges, tuples
    add("[]", "list", [])
    add("[1, 2, 3]", "list", [1, 2, 3])
    add("[1, 'a', None, 2.5, True]", "list", [1, "a", None, 2.5, True])
    add("[[1, [2, [3]]], {'a': []}]", "nested list", [[1, [2, [3]]], {"a": []}])
    add("nested 40 deep", "nested list", nested(40))
    add("nested 70 deep", "nested list", nested(70), refused(r"keyword argument 'x'(\[0\]){6}\.\.\.(\[0\]){4}: nested more than 64 levels deep", "refused: deeper than 64"))
    add("a list shared twice", "shared list", shared_list())
    add("a cyclic list", "cyclic list", cyclic_list(),  # refused by the R worker's decoder, naming the argument
        refused(r"cannot decode the task: argument 'x'\[\[2\]\]: the value contains itself \(a cycle\)",
                "refused by the R worker: a cycle"))
    add("{}", "dict", {})
    add("{'a': 1, 'b': 'x'}", "dict", {"a": 1, "b": "x"})
    add("{'b': 1, 'a': 2} (order)", "dict", {"b": 1, "a": 2})
    add("{'': 1, 'x y': 2}", "dict", {"": 1, "x y": 2})
    add("{'é': {'deep': [1, {'k': None}]}}", "nested dict", {"é": {"deep": [1, {"k": None}]}})
    add("{1: 2} (int key)", "dict", {1: 2}, refused(r"keyword argument 'x'\[1\]: a dict key of type int cannot be sent to r workers",
                                                     "refused: a non-str key"))
    add("(1, 'a')", "tuple", (1, "a"), changed([1, "a"], "a list"))
    add("range(5)", "range", range(5), changed(arr(range(5), np.int32), "an int32 array"))
    add("range(0, 10, 3)", "range", range(0, 10, 3), changed(arr([0, 3, 6, 9], np.int32), "an int32 array"))
    # numpy arrays of every wire type
    add("f64 [1.5, -0.0, nan, inf]", "numpy f64", arr([1.5, -0.0, math.nan, math.inf], np.float64))
    add("f64 with R's NA and a NaN payload", "numpy f64", arr([NA_REAL, f64(0x7FF800000000DEAD), 5e-324], np.float64))
    add("f64 empty", "numpy f64", arr([], np.float64))
    add("f64 big (320 KB)", "numpy f64", big_f64)
    add("f32 [1.5, nan]", "numpy f32", arr([1.5, math.nan], np.float32),
        changed(arr([1.5, math.nan], np.float64), "float64 (R has no float32)"))
    add("i64 [1, I64_MAX, I64_MIN]", "numpy i64", arr([1, I64_MAX, I64_MIN], np.int64))
    add("i64 big (320 KB)", "numpy i64", big_i64)
    add("i32 [1, -2, INT32_MIN]", "numpy i32", arr([1, -2, -(2 ** 31)], np.int32))
    add("i32 empty", "numpy i32", arr([], np.int32))
    add("i32 big (320 KB)", "numpy i32", big_i32)
    add("u8 [0, 255]", "numpy u8", arr([0, 255], np.uint8), changed(b"\x00\xff", "bytes (R raw)"))
    add("u8 big (320 KB)", "numpy u8", big_u8)
    add("bool [T, F]", "numpy bool", arr([True, False], np.bool_))
    add("bool big (320 KB)", "numpy bool", big_bool)
    add("c128 [1+2j, nan]", "numpy c128", arr([1 + 2j, complex(math.nan, 0)], np.complex128))
    add("c128 big (320 KB)", "numpy c128", big_c128)
    add("int8 [-1, 2]", "numpy int8", arr([-1, 2], np.int8), changed(arr([-1, 2], np.int32), "int32"))
    add("int16 [-1, 2]", "numpy int16", arr([-1, 2], np.int16), changed(arr([-1, 2], np.int32), "int32"))
    add("uint16 [65535]", "numpy uint16", arr([65535], np.uint16), changed(65535, "an int (a length-1 vector is a scalar)"))
    add("uint32 [4294967295]", "numpy uint32", arr([4294967295], np.uint32),
        changed(arr([4294967295], np.int64), "int64"))
    add("float16 [1.5]", "numpy float16", arr([1.5], np.float16), changed(1.5, "a float (a length-1 vector is a scalar)"))
    add("complex64 [1+1j]", "numpy complex64", arr([1 + 1j], np.complex64),
        changed(arr([1 + 1j], np.complex128), "complex128"))
    add("uint64 [1]", "numpy uint64", arr([1], np.uint64), refused(r"keyword argument 'x': numpy.ndarray cannot be sent to r workers: numpy arrays of uint64",
                "refused: uint64"))
    add("big-endian f64 [1.5]", "numpy >f8", arr([1.5, 2.5], ">f8"), changed(arr([1.5, 2.5], np.float64), "native order"))
    add("2-d f64, F order", "numpy ndarray", nd_f)
    add("2-d f64, C order", "numpy ndarray", nd_c, changed(nd_f, "the same values in F order"))
    add("3-d i32, F order", "numpy ndarray", nd3)
    add("2-d bool, F order", "numpy ndarray", np.asfortranarray(np.array([[True, False], [False, True]])))
    add("2-d f64 big (320 KB), F order", "numpy ndarray", np.asfortranarray(big_f64.reshape(200, 200)))
    add("0-d f64", "numpy ndarray", np.array(2.5), changed(2.5, "a float"))
    add("np.matrix", "numpy subclass", np.matrix([[1.0, 2.0]]), changed(np.asfortranarray([[1.0, 2.0]]), "a 2-d array"))
    add("U array ['a', 'héllo', '']", "numpy U", strs_u, changed(suiro.Strings(["a", "héllo", ""]), "suiro.Strings"))
    add("object array of str/None", "numpy object", np.array(["a", None], dtype=object),
        changed(suiro.Strings(["a", None]), "suiro.Strings"))
    add("object array of ints", "numpy object", np.array([1, "a"], dtype=object),
        refused(r"keyword argument 'x': numpy.ndarray cannot be sent to r workers: an object array",
                "refused: objects that are not str"))
    add("masked f64", "numpy masked", masked_f, changed(arr([1.0, NA_REAL, 3.0], np.float64), "float64, R's NA where masked"))
    add("masked i32", "numpy masked", masked_i, changed(arr([1, -(2 ** 31), 3], np.int32), "int32, INT32_MIN where masked"))
    add("masked bool", "numpy masked", masked_b)
    add("masked f32", "numpy masked", np.ma.masked_array(arr([1, 2], np.float32), mask=[True, False]),
        refused(r"keyword argument 'x': MaskedArray cannot be sent to r workers: a masked float32 array",
                "refused: float32 has no NA"))
    # numpy scalars
    add("np.float64(1.5)", "numpy scalar", np.float64(1.5), changed(1.5, "float"))
    add("np.int32(7)", "numpy scalar", np.int32(7), changed(7, "int"))
    add("np.int64(2**40)", "numpy scalar", np.int64(2 ** 40), changed(float(2 ** 40), "float (R double)"))
    add("np.bool_(True)", "numpy scalar", np.bool_(True), changed(True, "bool"))
    add("np.complex128(1-1j)", "numpy scalar", np.complex128(1 - 1j), changed(arr([1 - 1j], np.complex128),
                                                                            "a one-element complex128 array"))
    # dates and times
    add("datetime64[D] with NaT", "numpy date", days,
        changed(suiro.Dates(arr([19723.0, NA_REAL, -1.0], np.float64)), "suiro.Dates of float64 days (R Date)"))
    add("datetime64[s]", "numpy timestamp", ts_s)
    add("datetime64[ms]", "numpy timestamp", ts_s.astype("datetime64[ms]") + np.timedelta64(123, "ms"))
    add("datetime64[us] with NaT", "numpy timestamp", ts_us)
    add("datetime64[ns], whole microseconds, with NaT", "numpy timestamp", ts_us.astype("datetime64[ns]"))
    add("datetime64[ns] with a sub-microsecond part", "numpy timestamp", ts_ns,
        refused(r"cannot decode the task: argument 'x': timestamp 1 \(1704067200123456789 ns\) has a "
                r"sub-microsecond part, which R's POSIXct \(double seconds\) cannot hold",
                "refused by the R worker: a sub-microsecond part"))
    add("datetime.date(2024, 1, 2)", "date", datetime.date(2024, 1, 2),
        changed(suiro.Dates(arr([19724.0], np.float64)), "suiro.Dates (R Date)"))
    add("datetime.datetime UTC", "datetime", datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc),
        changed(suiro.Timestamps(arr([1704110400000000], np.int64), "us", "UTC"), "suiro.Timestamps, i64 us, UTC"))
    add("pd.Timestamp UTC", "pandas Timestamp", pd.Timestamp("2024-01-01 12:00", tz="UTC"),
        changed(suiro.Timestamps(arr([1704110400000000000], np.int64), "ns", "UTC"), "suiro.Timestamps, i64 ns, UTC"))
    add("suiro.Dates i32", "suiro.Dates", suiro.Dates(arr([1, -(2 ** 31)], np.int32)))
    add("suiro.Dates f64", "suiro.Dates", suiro.Dates(arr([1.5, NA_REAL], np.float64)))
    add("suiro.Timestamps f64 s Europe/Warsaw", "suiro.Timestamps",
        suiro.Timestamps(arr([0.5, NA_REAL], np.float64), "s", "Europe/Warsaw"))
    add("suiro.Timestamps i64 ms UTC", "suiro.Timestamps", suiro.Timestamps(arr([1, 2], np.int64), "ms", "UTC"))
    add("suiro.Timestamps i64 ns Asia/Tokyo", "suiro.Timestamps",
        suiro.Timestamps(arr([1704067200123456000, -2**63], np.int64), "ns", "Asia/Tokyo"))
    add("suiro.Strings with NA", "suiro.Strings", suiro.Strings(["a", None, ""]))
    add("suiro.Strings empty", "suiro.Strings", suiro.Strings([]))
    # pandas
    add("DataFrame numeric", "pandas DataFrame", df_num, changed(FrameOf(df_num), "suiro.Frame"))
    add("DataFrame str + category", "pandas DataFrame", df_str, changed(FrameOf(df_str), "suiro.Frame"))
    add("DataFrame datetimes", "pandas DataFrame", df_time,
        changed(FrameOf(df_time), "suiro.Frame, datetime64[ns] (and UTC) columns kept"))
    add("DataFrame Int64/Float64/boolean", "pandas DataFrame", df_ext, changed(FrameOf(df_ext), "suiro.Frame"))
    add("DataFrame big (320 KB column)", "pandas DataFrame", df_big, changed(FrameOf(df_big), "suiro.Frame"))
    add("DataFrame with an index", "pandas DataFrame", df_idx, changed(FrameOf(df_idx), "suiro.Frame, index dropped"))
    add("DataFrame, 0 rows", "pandas DataFrame", df_empty, changed(FrameOf(df_empty), "suiro.Frame"))
    add("DataFrame timedelta column", "pandas DataFrame", df_td,
        refused(r"argument 'x': DataFrame cannot be sent to r workers: column 'd' \(timedelta64",
                "refused: timedelta column"))
    add("DataFrame uint64 column", "pandas DataFrame", df_u64,
        refused(r"argument 'x': DataFrame cannot be sent to r workers: column 'u' \(uint64", "refused: uint64 column"))
    add("Series f64", "pandas Series", ser, changed(ser.to_numpy(), "its float64 array"))
    add("Series of str", "pandas Series", ser_s, changed(suiro.Strings(["a", None, "c"]), "suiro.Strings"))
    add("Categorical", "pandas Categorical", cat)
    add("Categorical ordered", "pandas Categorical", cat_o)
    add("suiro.Frame", "suiro.Frame", suiro.Frame({"a": arr([1, 2], np.int32), "s": suiro.Strings(["x", None])}))
    # call specs and errors as values
    add("suiro.call by name", "call", suiro.call("numpy.add", 1, k=2.5))
    add("suiro.call by source", "call", suiro.call(source="x + 1", x=np.arange(3.0)))
    add("a call inside a list", "call", [suiro.call("math.sqrt", 4.0), "after"])
    add("suiro.RemoteError with an index", "error",
        suiro.RemoteError("bad thing", remote_class="ValueError", traceback="line 1\nline 2", index=3))
    # refused Python-only values
    add("set {1}", "set", {1}, refused(r"argument 'x': set cannot be sent to r workers", "refused: set"))
    add("Decimal('1.5')", "Decimal", decimal.Decimal("1.5"),
        refused(r"keyword argument 'x': decimal.Decimal cannot be sent to r workers",
                "refused: Decimal"))
    add("an instance", "class instance", Point(1), refused(r"argument 'x': .*Point cannot be sent to r workers",
                                                          "refused: class instance"))
    add("a set inside a list", "set in list", [1, {2}], refused(r"argument 'x'\[1\]: set cannot be sent to r workers",
                                                                "refused, naming the element"))
    add("a set inside a dict", "set in dict", {"k": {2}}, refused(r"argument 'x'\['k'\]: set cannot be sent",
                                                                  "refused, naming the key"))
    add("a function", "function", len, refused(r"keyword argument 'x': builtin_function_or_method cannot be sent to r workers",
                                       "refused: a Python function"))
    return V


# ---- running and comparing ----

def same(a, b):
    """Exact equality: type, dtype, shape, order and bits (NaN payloads, -0.0)."""
    if isinstance(a, FrameOf):
        return same(a.frame, b) and same(a.df, b.to_pandas())
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        if type(a) is not type(b):
            return False
        try:
            pdt.assert_frame_equal(a, b, check_exact=True)
        except AssertionError:
            return False
        return all(same(a[c].to_numpy(), b[c].to_numpy()) for c in a.columns
                   if isinstance(a[c].dtype, np.dtype) and a[c].dtype.kind == "f")
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        if type(a) is not type(b):
            return False
        try:
            pdt.assert_series_equal(a, b, check_exact=True)
        except AssertionError:
            return False
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, np.ma.MaskedArray):
        return (same(np.ma.getdata(a), np.ma.getdata(b)) and same(np.ma.getmaskarray(a), np.ma.getmaskarray(b)))
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.ndim > 1 and (a.flags.f_contiguous, a.flags.c_contiguous) != (b.flags.f_contiguous, b.flags.c_contiguous):
            return False
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a.ravel(), b.ravel()))
        return a.tobytes(order="A") == b.tobytes(order="A")
    if type(a).__name__ == "Categorical":
        try:
            pdt.assert_extension_array_equal(a, b)
        except AssertionError:
            return False
        return True
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and not isinstance(a, suiro.Frame):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, suiro.Frame):
        return a.names == b.names and a.nrow == b.nrow and all(
            same(x, y) for x, y in zip(a.columns, b.columns))
    if isinstance(a, suiro.RemoteError):
        return (a.message, a.remote_class, a.traceback, a.index) == (b.message, b.remote_class, b.traceback, b.index)
    if isinstance(a, suiro.Call):
        return (a.target, a.source) == (b.target, b.source) and same(a.args, b.args) and same(a.kwargs, b.kwargs)
    if isinstance(a, (suiro.Dates, suiro.Timestamps)):
        return a == b and (not isinstance(a, suiro.Timestamps) or (a.unit, a.tz) == (b.unit, b.tz))
    return a == b


def outcome_text(outcome):
    return outcome[0] if outcome[0] == "exact" else outcome[2]


def doc_rows(route):
    """The rows of route's table in docs/wire-format.md: (value, class, outcome)."""
    with open(os.path.join(ROOT, "docs", "wire-format.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^### %s\n(.*?)(?=^#|\Z)" % re.escape(route), text, re.M | re.S)
    assert m, "docs/wire-format.md has no section '### %s'" % route
    rows = []
    for line in m.group(1).split("\n"):
        if line.startswith("| ") and not line.startswith("| value |"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows.append(tuple(c[1:-1] if c.startswith("`") else c for c in cells))
    return rows


def table_rows():
    return [(name, cls, outcome_text(o)) for name, cls, _, o in values()]


def markdown(rows):
    out = ["| value | class | outcome |", "|---|---|---|"]
    for name, cls, o in rows:
        out.append("| `%s` | %s | %s |" % (name, cls, o))
    return "\n".join(out)


@pytest.fixture(scope="module")
def relay():
    with suiro.pool(workers=1, launcher=suiro.r(), timeout=60) as rp:
        yield lambda v: rp.submit(suiro.call(source=RELAY, x=v, script=PY_WORKER)).collect(timeout=90)


def test_every_value_crosses_as_the_table_says(relay):
    vals = values()
    assert len(vals) >= 100
    assert len({v[0] for v in vals}) == len(vals), "value names repeat"
    bad = []
    for name, cls, v, o in vals:
        try:
            got, err = relay(v), None
        except Exception as e:  # a refusal at send time or in the chain
            got, err = None, "%s: %s" % (type(e).__name__, e)
        if o[0] == "refused":
            if err is None or not re.search(o[1], err):
                bad.append("%s: expected a refusal matching %r, got %s" % (name, o[1], err or repr(got)[:200]))
        elif err is not None:
            bad.append("%s: %s" % (name, err[:300]))
        else:
            want = v if o[0] == "exact" else o[1]
            if not same(want, got):
                bad.append("%s: expected %s, got %s" % (name, repr(want)[:150], repr(got)[:150]))
    assert not bad, "%d of %d values:\n" % (len(bad), len(vals)) + "\n".join(bad)


def test_the_doc_table_is_this_table():
    out = os.environ.get("SUIRO_MATRIX_TABLE")  # tests/matrix/update-doc.py: write the table there
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(markdown(table_rows()) + "\n")
    assert doc_rows(ROUTE) == table_rows(), "docs/wire-format.md, '### %s' should read:\n%s" % (
        ROUTE, markdown(table_rows()))
