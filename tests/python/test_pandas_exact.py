"""Issue 18 items 2 and 3: between Python processes pandas and numpy values come back as they were
sent (index, names, dtypes, masks, string arrays, scalars, subclasses, byte order), through a pool
and through suiro.PoolExecutor, arguments and results; Lua and R receivers get the documented
mapping or a refusal naming the path; suiro.Frame is a read-only mapping with the dataframe
interchange protocol."""

import collections.abc

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

import suiro
from suiro import _core

I64_MIN = np.iinfo(np.int64).min
pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


def identity(x):
    return x


def worker_view(df):
    """In the worker: what df is, whether pandas works on it, and the region its big column is in."""
    b = df["x"].to_numpy()
    while isinstance(b, np.ndarray):
        b = b.base
    b = b if isinstance(b, _core.View) else None
    return type(df).__name__, float(df.groupby("k")["x"].sum().sum()), None if b is None else b.region(), df


def region_of(a):
    while isinstance(a, np.ndarray):
        a = a.base
    return a.region() if isinstance(a, _core.View) else None


def frames():
    """(label, DataFrame) pairs that a Frame loses today: index, names and dtypes."""
    out = []
    df = pd.DataFrame({"a": [1, 2, 3], "b": [1.5, 2.5, 3.5]}, index=pd.Index(["x", "y", "z"], name="key"))
    out.append(("named index", df))
    out.append(("MultiIndex", pd.DataFrame({"v": [1.0, 2.0, 3.0]},
                                           index=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)],
                                                                           names=["g", "n"]))))
    out.append(("RangeIndex", pd.DataFrame({"v": [1, 2, 3]}, index=pd.RangeIndex(10, 16, 2))))
    rep = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])
    out.append(("repeated names", rep))
    out.append(("dtypes", pd.DataFrame({
        "I64": pd.array([1, 2, 3], dtype="Int64"),        # no NA: stays Int64
        "F64": pd.array([1.5, 2.0, 3.0], dtype="Float64"),
        "str": pd.array(["a", None, "c"], dtype="string"),
        "i8": np.array([-1, 0, 1], dtype=np.int8),
        "i16": np.array([-300, 0, 300], dtype=np.int16),
        "u16": np.array([0, 1, 65535], dtype=np.uint16),
        "u32": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
        "u64": np.array([0, 1, 2**64 - 1], dtype=np.uint64),
        "min": np.array([I64_MIN, 0, 1], dtype=np.int64),  # a value, not NA
        "icat": pd.Categorical([1, 2, 1]),
        "td": pd.to_timedelta([1, 2, 3], unit="s"),
        "per": pd.period_range("2024-01", periods=3, freq="M"),
        "iv": pd.IntervalIndex.from_breaks([0, 1, 2, 3]),
        "sp": pd.arrays.SparseArray([0.0, 0.0, 1.0]),
        "tz": pd.date_range("2024-01-01", periods=3, tz="Europe/Paris"),
        "obj": [1, "two", 3.0],
    })))
    return out


def series():
    return [pd.Series([1.5, 2.5], index=pd.Index(["p", "q"], name="k"), name="s"),
            pd.Series(pd.array([1, None], dtype="Int16"), name=None),
            pd.Series(pd.Categorical([3, 1, 3]), index=pd.RangeIndex(5, 8)),
            pd.Series(np.array([I64_MIN, 5]), name=("tuple", "name"))]


@pytest.mark.parametrize("label,df", frames(), ids=[lbl for lbl, _ in frames()])
def test_a_dataframe_comes_back_as_sent(pool, label, df):
    back = pool.submit(identity, df).collect(timeout=20)
    assert type(back) is pd.DataFrame
    pdt.assert_frame_equal(back, df, check_exact=True)


def test_a_series_comes_back_as_sent(pool):
    for s in series():
        back = pool.submit(identity, s).collect(timeout=20)
        assert type(back) is pd.Series
        pdt.assert_series_equal(back, s, check_exact=True)


def test_integer_categories_stay_integer_categories(pool):
    c = pd.Series(pd.Categorical([1, 2, 1]))
    back = pool.submit(identity, c).collect(timeout=20)
    assert (back == 1).sum() == 2
    # a Categorical of str crosses as a factor, and comes back the same
    sc = pd.Categorical(["x", None, "y"], categories=["y", "x"], ordered=True)
    back = pool.submit(identity, sc).collect(timeout=20)
    pdt.assert_extension_array_equal(back, sc)


def test_pandas_in_the_worker_is_pandas(pool):
    df = pd.DataFrame({"k": [1, 2, 1], "x": [1.0, 2.0, 4.0]})
    kind, total, _, back = pool.submit(worker_view, df).collect(timeout=20)
    assert kind == "DataFrame" and total == 7.0
    pdt.assert_frame_equal(back, df)


def test_through_the_pool_executor_both_ways():
    dfs = [df for _, df in frames()]
    with suiro.PoolExecutor(max_workers=2) as ex:
        for df in dfs:
            pdt.assert_frame_equal(ex.submit(identity, df).result(timeout=20), df)
        for df, back in zip(dfs, ex.map(identity, dfs, timeout=30)):
            pdt.assert_frame_equal(back, df)
        for s, back in zip(series(), ex.map(identity, series(), timeout=30)):
            pdt.assert_series_equal(back, s)
        arrays = numpy_values()
        for a, back in zip(arrays, ex.map(identity, arrays, timeout=30)):
            assert_same_numpy(back, a)


def test_a_large_column_crosses_by_reference(pool):
    # 80 MB of float64: written once into a region on the way out (the one memcpy a private
    # array needs, as a suiro.Frame column had), a view in the worker, and by reference back
    n = 10_000_000
    df = pd.DataFrame({"x": np.arange(n, dtype=np.float64), "k": np.arange(n, dtype=np.int64) % 3})
    kind, total, seen, back = pool.submit(worker_view, df).collect(timeout=60)
    assert kind == "DataFrame" and total == float(df["x"].sum())
    assert seen is not None and seen.startswith("/suiro_")  # the worker's column is a view of a region
    assert region_of(back["x"].to_numpy()) == seen  # and came back by reference: no copy
    pdt.assert_frame_equal(back, df)


def numpy_values():
    m = np.ma.array([1, 2, 3], mask=[False, True, False], fill_value=7)
    return [
        m,
        np.ma.array([1.5, 2.5], mask=[True, False]),
        np.ma.array([True, False, True], mask=[False, True, False]),  # True under the mask
        np.ma.array([[1, 2], [3, 4]], mask=[[0, 1], [0, 0]], dtype=np.int32),
        np.array(["a", "bc", ""]),
        np.array([b"x", b"yz"]),
        np.array([["a", "b"], ["c", "d"]]),
        np.array(["s", None, 3], dtype=object),
        np.float64(1.5), np.float32(2.5), np.int64(-3), np.int32(4), np.uint8(5), np.bool_(True),
        np.complex128(1 + 2j), np.int8(-6), np.uint64(2**64 - 1), np.float16(0.5), np.datetime64("2024-01-02"),
        np.str_("text"),
        np.matrix([[1.0, 2.0], [3.0, 4.0]]),
        np.arange(5, dtype=">f8"), np.arange(5, dtype=">i4"),
        np.arange(40000, dtype=">f8"),  # a large one: its buffer by reference
        np.arange(6, dtype=np.int16).reshape(2, 3),
    ]


def assert_same_numpy(back, a):
    assert type(back) is type(a), (type(back), type(a))
    if isinstance(a, np.generic):
        assert back.dtype == a.dtype and (back == a or (back != back and a != a))
        return
    assert back.dtype == a.dtype and back.shape == a.shape
    if isinstance(a, np.ma.MaskedArray):
        assert np.array_equal(np.ma.getmaskarray(back), np.ma.getmaskarray(a))
        assert back.fill_value == a.fill_value
        assert np.array_equal(np.ma.getdata(back), np.ma.getdata(a))
        return
    assert np.array_equal(back, a)


def test_numpy_comes_back_as_sent(pool):
    for a in numpy_values():
        assert_same_numpy(pool.submit(identity, a).collect(timeout=20), a)
        assert_same_numpy(pool.submit(identity, [a]).collect(timeout=20)[0], a)  # nested too


def test_a_masked_sum_in_the_worker_skips_the_masked_value(pool):
    m = np.ma.array([1, 2, 3], mask=[False, True, False])
    assert pool.submit(np.ma.sum, m).collect(timeout=20) == 4


def test_numpy_scalars_stay_numpy_scalars_both_ways(pool):
    got = pool.submit(np.mean, np.array([1.0, 2.0])).collect(timeout=20)
    assert type(got) is np.float64 and got == 1.5
    got = pool.submit(np.int32, 7).collect(timeout=20)
    assert type(got) is np.int32 and got == 7


# ---- other languages: the documented mapping, or a refusal naming the path -----------------------

def test_frames_for_lua_keep_the_mapping_and_refuse_by_name(luapool):
    df = pd.DataFrame({"x": [1.0, 2.0], "i": np.array([1, 2], dtype=np.int8)}, index=["a", "b"])
    got = luapool.submit(suiro.call(source="return f", f=df)).collect(timeout=20)
    assert isinstance(got, suiro.Frame) and got.names == ["x", "i"]
    pdt.assert_frame_equal(got.to_pandas(), pd.DataFrame({"x": [1.0, 2.0], "i": np.array([1, 2], dtype=np.int32)}))
    for col, dt in (("d", "timedelta64[ns]"), ("p", "period[M]"), ("u", "uint64"), ("s", "Sparse[float64, nan]"),
                    ("v", "interval[int64, right]")):
        bad = {"d": pd.to_timedelta([1], unit="s"), "p": pd.period_range("2024-01", periods=1, freq="M"),
               "u": np.array([1], dtype=np.uint64), "s": pd.arrays.SparseArray([1.0]),
               "v": pd.IntervalIndex.from_breaks([0, 1])}[col]
        with pytest.raises(TypeError) as ei:
            luapool.submit("tostring", pd.DataFrame({col: bad}))
        msg = str(ei.value)
        assert msg.startswith("submit: argument 2: DataFrame cannot be sent to lua workers: column %r (%s) has no "
                              "form for R/Lua workers" % (col, dt)), msg


def test_numpy_for_lua_keeps_the_mapping(luapool):
    s = "return x"
    got = luapool.submit(suiro.call(source=s, x=np.array(["a", "b"]))).collect(timeout=20)
    assert got == suiro.Strings(["a", "b"])
    got = luapool.submit(suiro.call(source=s, x=np.arange(3, dtype=">f8"))).collect(timeout=20)
    assert got.dtype == np.float64 and got.tolist() == [0.0, 1.0, 2.0]
    got = luapool.submit(suiro.call(source=s, x=np.matrix([[1.0, 2.0]]))).collect(timeout=20)
    assert type(got) is np.ndarray and got.shape == (1, 2)
    assert luapool.submit(suiro.call(source="return math.type(x)", x=np.int32(3))).collect(timeout=20) == "integer"
    # masked arrays: masked entries become the type's NA (bool, i32, i64, f64); others are refused
    got = luapool.submit(suiro.call(source=s, x=np.ma.array([1, 2], mask=[0, 1], dtype=np.int32))).collect(timeout=20)
    assert got.tolist() == [1, np.iinfo(np.int32).min]
    with pytest.raises(TypeError, match=r"submit: argument 1, keyword argument 'x': MaskedArray cannot be sent to lua "
                                        r"workers: a masked float32 array \(this type has no NA\)"):
        luapool.submit(suiro.call(source=s, x=np.ma.array([1.0], mask=[1], dtype=np.float32)))


# ---- suiro.Frame: a read-only mapping with the interchange protocol -------------------------------

def lua_frame(luapool):
    src = ("local s = require('suiro'); return s.frame { x = s.f64 { 1.5, 2.5, 3 }, n = s.i32 { 1, 2, 3 }, "
           "name = s.strings { 'a', 'b', 'c' } }")
    return luapool.submit(suiro.call(source=src)).collect(timeout=20)


def test_a_frame_is_a_read_only_mapping(luapool):
    f = lua_frame(luapool)
    assert isinstance(f, suiro.Frame) and isinstance(f, collections.abc.Mapping)
    assert sorted(f) == ["n", "name", "x"] and len(f) == 3 and f.nrow == 3 and "x" in f
    assert f["x"].tolist() == [1.5, 2.5, 3.0] and f.get("nope") is None
    assert dict(f.items()).keys() == set(f)
    with pytest.raises(TypeError, match="read-only"):
        f["y"] = np.zeros(3)
    with pytest.raises(TypeError, match="read-only"):
        del f["x"]
    with pytest.raises(KeyError):
        f["nope"]


def test_pd_dataframe_and_from_dataframe_take_a_frame(luapool):
    from pandas.api.interchange import from_dataframe

    f = lua_frame(luapool)
    pdt.assert_frame_equal(pd.DataFrame(f), f.to_pandas())
    pdt.assert_frame_equal(from_dataframe(f)[f.names], f.to_pandas())
    df = from_dataframe(f.__dataframe__())
    assert df["name"].tolist() == ["a", "b", "c"]


def test_frame_with_na_through_the_interchange_protocol():
    f = suiro.Frame([("i", np.array([1, np.iinfo(np.int32).min, 3], dtype=np.int32)),
                     ("f", np.array([1.0, 2.0, 3.0])), ("s", suiro.Strings(["x", None, "z"])),
                     ("c", pd.Categorical(["u", None, "v"])),
                     ("d", suiro.Dates(np.array([0, np.iinfo(np.int32).min, -3], dtype=np.int32)))])
    pdt.assert_frame_equal(pd.DataFrame(f), f.to_pandas())
    from pandas.api.interchange import from_dataframe

    x = from_dataframe(f)
    assert x["i"].isna().tolist() == [False, True, False] and x["i"][2] == 3
    assert x["s"].isna().tolist() == [False, True, False] and x["c"].isna().tolist() == [False, True, False]
    assert x["d"].isna().tolist() == [False, True, False] and str(x["d"][2].date()) == "1969-12-29"
    assert f.__dataframe__().num_rows() == 3 and f.__dataframe__().column_names() == ["i", "f", "s", "c", "d"]


def test_repeated_names_in_a_frame():
    f = suiro.Frame([("a", np.array([1, 2])), ("a", np.array([3, 4])), ("b", np.array([5, 6]))])
    assert list(f) == ["a", "a", "b"] and len(f) == 3
    with pytest.raises(ValueError, match="2 columns are named 'a'"):
        f["a"]
    assert [(k, v.tolist()) for k, v in f.items()] == [("a", [1, 2]), ("a", [3, 4]), ("b", [5, 6])]
    df = f.to_pandas()
    assert list(df.columns) == ["a", "a", "b"] and df.iloc[:, 1].tolist() == [3, 4]
    assert f["b"].tolist() == [5, 6]


def as_frame_and_tuple(x):
    return (pd.DataFrame({"x": [x]}), np.float64(x) / 2)


def test_map_results_of_python_workers_follow_the_host_language():
    # a Lua host's map without a template: each element's result takes the Lua mapping, as task
    # results do (a DataFrame a frame, a tuple a list, a numpy scalar a number), not Python's
    from test_crosslang import run_lua

    out = run_lua("""
        local suiro = require "suiro"
        local py <close> = suiro.pool { workers = 1, launcher = suiro.python {} }
        local m = py:map("test_pandas_exact.as_frame_and_tuple", suiro.f64 { 3, 5 }):collect()
        print(#m, #m[2], m[2][1].x[1], m[2][2], math.type(m[1][2]))
    """)
    assert out[0] == "2\t2\t5.0\t2.5\tfloat", out


def test_wire_encode_portable_writes_what_lua_and_r_read():
    # wire.encode writes what a Python receiver gets (a DataFrame pickled); portable=True writes
    # the frame Lua and R read, and refuses by name what has no form there
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    f = suiro.wire.decode(suiro.wire.encode(df, portable=True))
    assert isinstance(f, suiro.Frame)
    pd.testing.assert_frame_equal(f.to_pandas(), df)
    with pytest.raises(ValueError, match="trusted"):
        suiro.wire.decode(suiro.wire.encode(df))
    with pytest.raises(TypeError, match=r"column 'd' \(timedelta64\[ns\]\) has no form"):
        suiro.wire.encode(pd.DataFrame({"d": pd.to_timedelta([1, 2], unit="s")}), portable=True)
    with pytest.raises(TypeError, match="only Python processes read pickled objects"):
        suiro.wire.encode(object(), portable=True)
