"""pandas <-> suiro.Frame (wire FRAME): column kinds and their missing values.

    pandas column                          wire column        back in pandas (Frame.to_pandas())
    float64 / float32 (NaN)                f64 / f32          the same (NaN bits kept)
    Float64 (pd.NA)                        f64, NA = R's NA   Float64 with pd.NA
    int64 / int32 / uint8                  i64 / i32 / u8     the same
    int8 / int16 / uint16 (uint32)         i32 (i64)          int32 (int64)
    Int64 / Int32 / Int16 / Int8 (pd.NA)   i64 / i32, NA = INT_MIN   Int64 / Int32 with pd.NA
    bool / boolean (pd.NA)                 bool (0xFF = NA)   bool / boolean with pd.NA
    object or string of str (None/NaN/NA)  strs (NA)          object (None)
    category                               factor (-1 = NA)   category (NaN)
    datetime64[ns] (NaT)                   timestamp i64 ns   datetime64[ns]
    datetime64[ns, tz]                     timestamp i64 ns, tz   datetime64[ns, tz]
    complex128                             c128               complex128
  and from R or Lua: date (i32/f64/i64 days) -> datetime64[ns] (pandas 1.5 keeps no [D] column),
  f64 timestamps (POSIXct seconds) -> datetime64[ns, tz].
The row index is not part of the wire format: it is dropped (reset_index() first to keep it).
"""

import numpy as np

from ._values import Dates, Frame, Strings, Timestamps

_F64_NA = np.frombuffer(b"\xa2\x07\x00\x00\x00\x00\xf0\x7f", dtype=np.float64)[0]
_I32_NA = np.iinfo(np.int32).min
_I64_NA = np.iinfo(np.int64).min


def _pd():
    import pandas

    return pandas


def _is_r_na(v):
    """R's NA_real_ among f64 values: a NaN whose low word is 1954 (wire_is_na_f64_bits)."""
    b = v.view(np.uint64)
    return ((b & np.uint64(0x7FF0000000000000)) == np.uint64(0x7FF0000000000000)) & \
           ((b & np.uint64(0x000FFFFFFFFFFFFF)) != 0) & ((b & np.uint64(0xFFFFFFFF)) == np.uint64(1954))


def series_column(s, name="?"):
    """A pandas Series (or array) as a wire column value."""
    pd = _pd()
    dt = s.dtype
    if isinstance(dt, pd.CategoricalDtype):
        return pd.Categorical(s)
    if isinstance(dt, pd.DatetimeTZDtype):
        arr = pd.DatetimeIndex(s)
        return Timestamps(np.asarray(arr.asi8, dtype=np.int64), "ns", str(dt.tz))
    if dt.kind == "M":
        return np.asarray(s, dtype="datetime64[ns]")
    if isinstance(dt, pd.api.extensions.ExtensionDtype) and not isinstance(dt, pd.StringDtype):
        na = np.asarray(pd.isna(s))
        if pd.api.types.is_bool_dtype(dt):
            data = np.asarray(pd.Series(s).fillna(False), dtype=bool)
            return np.ma.MaskedArray(data, mask=na) if na.any() else data
        if pd.api.types.is_integer_dtype(dt):
            wide = np.int64 if dt.itemsize == 8 or str(dt).startswith("UInt32") else np.int32
            if str(dt) == "UInt64":
                raise TypeError("column %r: UInt64 has no wire type (cast to Int64 or float)" % name)
            vals = np.asarray(pd.Series(s).fillna(0), dtype=wide)
            vals[na] = _I64_NA if wide is np.int64 else _I32_NA
            return vals
        if pd.api.types.is_float_dtype(dt):
            vals = np.array(s.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
            vals[na] = _F64_NA
            return vals
    if dt == object or isinstance(dt, pd.StringDtype):
        out = []
        for v in (s.tolist() if hasattr(s, "tolist") else list(s)):
            if isinstance(v, str):
                out.append(v)
            elif v is None or v is pd.NA or (isinstance(v, float) and v != v):
                out.append(None)
            else:
                raise TypeError("column %r: a %s in a column of strings (frame columns hold one kind)" % (
                    name, type(v).__name__))
        return Strings(out)
    a = np.asarray(s)
    if a.dtype in (np.int8, np.int16, np.uint16):
        return a.astype(np.int32)
    if a.dtype == np.uint32:
        return a.astype(np.int64)
    if a.dtype == np.float16:
        return a.astype(np.float32)
    if a.dtype == np.complex64:
        return a.astype(np.complex128)
    if a.dtype == np.uint64:
        raise TypeError("column %r: uint64 has no wire type (cast to int64 or float64)" % name)
    return np.ascontiguousarray(a)


def from_pandas(df):
    names = []
    for name in df.columns:
        if not isinstance(name, str):
            raise TypeError("frame column names must be str, got %r (%s)" % (name, type(name).__name__))
        names.append(name)
    dts = df.dtypes
    if len(names) and all(isinstance(d, np.dtype) for d in dts) and len(set(dts)) == 1 and dts.iloc[0] in (np.float64, np.int64, np.int32):
        # one numpy block (the common numeric frame): its transpose holds each column contiguously,
        # taken without a Series per column (df.iloc per column cost ~30 us each)
        block = df.to_numpy().T
        cols = [np.ascontiguousarray(block[i]) for i in range(len(names))]
        return Frame._make(names, cols, len(df))
    cols = [series_column(df.iloc[:, i], name) for i, name in enumerate(names)]
    return Frame._make(names, cols, len(df))


def to_wire(obj, foreign):
    pd = _pd()
    if isinstance(obj, pd.DataFrame):
        return from_pandas(obj)
    if isinstance(obj, pd.Series):
        return series_column(obj, obj.name)
    if isinstance(obj, (pd.Index, pd.api.extensions.ExtensionArray)) and not isinstance(obj, pd.Categorical):
        return series_column(pd.Series(obj), getattr(obj, "name", None))
    return None  # Timestamps, Timedeltas, ...: pickled for Python, refused by others


def column_to_pandas(c):
    pd = _pd()
    if isinstance(c, np.ma.MaskedArray):  # bool with NA
        return pd.arrays.BooleanArray(np.ma.getdata(c).astype(bool), np.ma.getmaskarray(c).copy())
    if isinstance(c, Strings):
        return np.array(list(c), dtype=object)
    if isinstance(c, Dates):
        return c.to_numpy().astype("datetime64[ns]")
    if isinstance(c, Timestamps):
        if c.tz:
            return pd.Series(c.to_pandas()).array
        return c.to_numpy().astype("datetime64[ns]")
    if isinstance(c, np.ndarray):
        if c.dtype.kind == "M":
            return c.astype("datetime64[ns]")
        if c.dtype == np.int32 and (c == _I32_NA).any():
            return pd.arrays.IntegerArray(np.where(c == _I32_NA, 0, c).astype(np.int32), c == _I32_NA)
        if c.dtype == np.int64 and (c == _I64_NA).any():
            return pd.arrays.IntegerArray(np.where(c == _I64_NA, 0, c).astype(np.int64), c == _I64_NA)
        if c.dtype == np.float64:
            na = _is_r_na(c)
            if na.any():
                return pd.arrays.FloatingArray(np.where(na, 0.0, c), na)
        return c
    return c  # Categorical


def to_pandas(frame):
    pd = _pd()
    cs = frame.columns
    if cs and all(type(c) is np.ndarray and c.ndim == 1 for c in cs) and len({c.dtype for c in cs}) == 1 \
            and cs[0].dtype in (np.float64, np.int64) and not any(column_to_pandas(c) is not c for c in cs):
        # one dtype, no NA markers: one 2-D block (a DataFrame from a dict of columns cost ~0.5 ms)
        return pd.DataFrame(np.column_stack(cs) if len(cs) > 1 else cs[0].reshape(-1, 1), columns=list(frame.names))
    if not frame.columns:
        return pd.DataFrame(index=range(frame.nrow))
    # keyed by position, then named: a name that repeats (R allows it) keeps every column
    df = pd.DataFrame({i: column_to_pandas(col) for i, col in enumerate(frame.columns)})
    df.columns = list(frame.names)
    return df
