"""suiro.Frame (the wire FRAME, what Lua and R exchange): every column kind, with NA, both ways;
large frames as one region whose numeric columns arrive as views. Between Python processes a
pandas DataFrame itself crosses exactly (test_pandas_exact.py); suiro.Frame(df) sends the FRAME."""

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

import suiro
import pyfuncs
from suiro import _core


def frame_with_na():
    return pd.DataFrame({
        "f64": [1.5, np.nan, 3.0],
        "F64": pd.array([1.5, None, 3.0], dtype="Float64"),
        "i64": np.array([1, 2, 3], dtype=np.int64),
        "I64": pd.array([1, None, 3], dtype="Int64"),
        "I32": pd.array([None, 5, 6], dtype="Int32"),
        "i32": np.array([7, 8, 9], dtype=np.int32),
        "u8": np.array([0, 128, 255], dtype=np.uint8),
        "f32": np.array([0.5, np.nan, -1.0], dtype=np.float32),
        "flag": [True, False, True],
        "B": pd.array([True, None, False], dtype="boolean"),
        "s": ["a", None, "c"],
        "cat": pd.Categorical(["x", None, "y"]),
        "ord": pd.Categorical(["lo", "hi", None], categories=["lo", "hi"], ordered=True),
        "when": pd.to_datetime(["2024-01-01", None, "1969-12-31 23:59:59.5"]),
        "tz": pd.to_datetime(["2024-01-01 12:00", None, "2000-06-30"]).tz_localize("America/New_York"),
        "z": np.array([1 + 2j, 0, np.nan], dtype=np.complex128),
    })


def test_every_column_kind_round_trips(pool):
    df = frame_with_na()
    back = pool.submit(pyfuncs.identity, suiro.Frame(df)).collect(timeout=10)
    assert isinstance(back, suiro.Frame) and back.names == list(df.columns) and back.nrow == 3
    assert len(back) == len(df.columns)  # a mapping of the columns
    pdt.assert_frame_equal(back.to_pandas(), df, check_dtype=True)


def test_na_positions_are_kept(pool):
    df = frame_with_na()
    back = pool.submit(pyfuncs.identity, suiro.Frame(df)).collect(timeout=10).to_pandas()
    assert back.isna().to_numpy().tolist() == df.isna().to_numpy().tolist()


def test_a_frame_is_a_value_inside_values(pool):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    got = pool.submit(pyfuncs.identity, {"df": df, "f": suiro.Frame(df), "n": 2}).collect(timeout=10)
    pdt.assert_frame_equal(got["df"], df)
    pdt.assert_frame_equal(got["f"].to_pandas(), df)


def test_frame_for_lua_workers(luapool):
    df = pd.DataFrame({"x": [1.0, 2.0, 4.0], "name": ["a", "b", None], "f": [True, False, True]})
    got = luapool.submit(suiro.call(source="return #f, f.x:sum(), f.name[3] == require('suiro').NA", f=df)).collect(10)
    assert got == (3, 7.0, True)


def test_large_frames_go_as_one_region(pool):
    n = 100000
    df = pd.DataFrame({"x": np.arange(n, dtype=np.float64), "k": np.arange(n, dtype=np.int32) % 7,
                       "name": ["r%d" % (i % 10) for i in range(n)]})
    back = pool.submit(pyfuncs.identity, suiro.Frame(df)).collect(timeout=30)
    x = back["x"]
    assert x.flags.writeable  # a view of the region: a private copy-on-write mapping
    b = x.base
    while not isinstance(b, _core.View):
        b = b.base
    assert b.region().startswith("/suiro_")
    pdt.assert_frame_equal(back.to_pandas(), df)


def test_frame_from_lua_and_r_kinds():
    # date columns of R (i32, f64 days) and POSIXct timestamps decode and convert
    f = suiro.Frame([("d", suiro.Dates(np.array([0, -2**31, 19723], dtype=np.int32))),
                     ("t", suiro.Timestamps(np.array([0.0, np.nan, 86400.0]), "s", "UTC"))])
    back = suiro.wire.decode(suiro.wire.encode(f))
    assert back == f
    p = back.to_pandas()
    assert p["d"].isna().tolist() == [False, True, False] and str(p["t"].dtype) == "datetime64[ns, UTC]"


def test_bad_columns_are_refused(luapool):
    df = pd.DataFrame({"o": ["a", 3]})
    with pytest.raises(TypeError, match=r"submit: argument 2: DataFrame cannot be sent to lua workers: column 'o': "
                                        r"a int in a column of strings"):
        luapool.submit("tostring", df)
    with pytest.raises(TypeError, match="frame column names must be str"):
        luapool.submit("tostring", pd.DataFrame({1: [1]}))
    with pytest.raises(TypeError, match="column 'o': a int in a column of strings"):
        suiro.Frame(df)


def test_map_record_template_gives_a_frame(pool):
    f = pool.map(lambda i: {"i": i, "half": i / 2}, range(4), template="{i: i64, half: f64}").collect(10)
    pdt.assert_frame_equal(f.to_pandas(), pd.DataFrame({"i": np.arange(4), "half": np.arange(4) / 2}))


def test_large_frame_columns_by_reference_to_lua(luapool):
    n = 50000
    df = pd.DataFrame({"x": np.arange(n, dtype=np.float64), "y": np.ones(n)})
    got = luapool.submit(suiro.call(source="return f.x:sum() + f.y:sum(), f", f=df)).collect(timeout=30)
    assert got[0] == df["x"].sum() + n
    back = got[1]
    assert isinstance(back, suiro.Frame) and back["x"].flags.writeable  # views again
    pdt.assert_frame_equal(back.to_pandas(), df)


def test_numeric_frames_take_the_one_block_path_and_keep_every_value():
    # a frame of one numpy dtype crosses as one block each way; the result is what the
    # column-by-column path gives (mixed dtypes and NA take that path)
    rng = np.random.default_rng(7)
    for df in (pd.DataFrame(rng.random((32, 11)), columns=list("abcdefghijk")),
               pd.DataFrame(rng.integers(-5, 5, (10, 3)), columns=["x", "y", "z"]),
               pd.DataFrame(rng.integers(-5, 5, (10, 2)).astype(np.int32), columns=["p", "q"]),
               pd.DataFrame({"only": [1.5, -0.0, np.inf]}),
               pd.DataFrame({"f": [1.0, 2.0], "i": [1, 2]})):
        fr = suiro.Frame(df)
        assert fr.names == list(df.columns)
        for name, col in zip(fr.names, fr.columns):
            np.testing.assert_array_equal(col, df[name].to_numpy())
            assert col.dtype == df[name].dtype and col.flags.c_contiguous
        back = suiro.wire.decode(suiro.wire.encode(fr)).to_pandas()
        pd.testing.assert_frame_equal(back, df.reset_index(drop=True))
    # -0.0 survives bit for bit
    fr = suiro.wire.decode(suiro.wire.encode(suiro.Frame(pd.DataFrame({"a": [-0.0, 1.0], "b": [2.0, 3.0]}))))
    assert np.signbit(fr.to_pandas()["a"][0])


def test_repeated_column_names_keep_every_column():
    # R allows data.frame(a = 1:2, a = 3:4, check.names = FALSE): to_pandas keeps both columns
    f = suiro.Frame([("a", np.array([1, 2], dtype=np.int32)), ("a", np.array([3, 4], dtype=np.int32)),
                     ("b", suiro.Strings(["x", None]))])
    df = f.to_pandas()
    assert list(df.columns) == ["a", "a", "b"]
    assert df.iloc[:, 0].tolist() == [1, 2] and df.iloc[:, 1].tolist() == [3, 4]


def test_datetime_columns_go_through_r_with_their_unit():
    """i64 timestamps become POSIXct in R that remember their unit (attribute suiro_unit) and
    come back as the same datetime64 of that unit; what R's double seconds cannot hold (a
    sub-microsecond part) is refused naming the column (docs/r.md, "Times")."""
    t = np.array(["2024-01-01T12:00:00.123456", "NaT", "1969-12-31T23:59:59.5"], dtype="datetime64[us]")
    df = pd.DataFrame({"ns": t.astype("datetime64[ns]"), "us": t, "ms": t.astype("datetime64[ms]"),
                       "s": t.astype("datetime64[s]"),
                       "utc": pd.Series(t.astype("datetime64[ns]")).dt.tz_localize("UTC")})
    with suiro.pool(workers=1, launcher=suiro.r(), timeout=60) as rp:
        back = rp.submit(suiro.call(source="x", x=df)).collect(timeout=60)
        assert isinstance(back, suiro.Frame)
        got = back.to_pandas()
        assert [str(d) for d in got.dtypes] == [str(d) for d in df.dtypes]
        pdt.assert_frame_equal(got, df, check_exact=True)
        # R sees an ordinary POSIXct of those seconds
        desc = rp.submit(suiro.call(source="c(class(x$ns)[1], attr(x$ns, 'suiro_unit'), "
                                           "format(x$ns[1], digits = 6, tz = 'UTC'), is.null(attr(x$ns, 'tzone')))",
                                    x=df)).collect(timeout=60)
        assert list(desc) == ["POSIXct", "ns", "2024-01-01 12:00:00.123456", "TRUE"]
        ns = pd.DataFrame({"t": np.array(["2024-01-01T00:00:00.123456789"], dtype="datetime64[ns]")})
        with pytest.raises(suiro.RemoteError, match=r"argument 'x'\[\['t'\]\]: timestamp 1 \(1704067200123456789 ns\) "
                                                    r"has a sub-microsecond part"):
            rp.submit(suiro.call(source="x", x=ns)).collect(timeout=60)
