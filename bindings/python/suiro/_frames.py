"""pandas and suiro.Frame (wire FRAME): what crosses how.

Between Python processes (a Python host and its Python workers, arguments and results both ways)
pandas objects are not converted: a DataFrame, Series, Index or extension array is pickled
(protocol 5) and its data buffers travel out of band as wire arrays, by reference from 32 KiB
up like any numpy array, so index, column names (repeated too), dtypes and values come back as
they were sent (pandas.testing.assert_frame_equal holds). A Categorical with str categories
crosses as a factor (exactly); one with other categories is pickled.

To Lua and R receivers (and in suiro.Frame(df), which makes the language-neutral frame) a
DataFrame becomes a FRAME, a Series or Index one column vector; the row index is dropped
(reset_index() first to keep it):

    pandas column                          wire column        back in pandas (Frame.to_pandas())
    float64 / float32 (NaN)                f64 / f32          the same (NaN bits kept)
    Float64 (pd.NA)                        f64, NA = R's NA   Float64 with pd.NA, float64 without NA
    int64 / int32 / uint8                  i64 / i32 / u8     the same (int64 INT64_MIN: NA)
    int8 / int16 / uint16 (uint32)         i32 (i64)          int32 (int64)
    Int64 / Int32 / Int16 / Int8 (pd.NA)   i64 / i32, NA = INT_MIN   Int64 / Int32 with pd.NA
                                                              (int64 / int32 without NA)
    bool / boolean (pd.NA)                 bool (0xFF = NA)   bool / boolean with pd.NA
    object or string of str (None/NaN/NA)  strs (NA)          object (None)
    category                               factor (-1 = NA)   category (NaN); levels as str
    datetime64[ns] (NaT)                   timestamp i64 ns   datetime64[ns]
    datetime64[ns, tz]                     timestamp i64 ns, tz   datetime64[ns, tz]
    complex128 / complex64, float16        c128 / f32         complex128 / float32
    uint64, UInt64, timedelta64, period,   refused, naming the column: "argument 1: DataFrame
    interval, sparse, other extension      cannot be sent to r workers: column 'd'
    types, objects that are not str        (timedelta64[ns]) has no form for R/Lua workers (...)"
  and from R or Lua: date (i32/f64/i64 days) -> datetime64[ns] (pandas 1.5 keeps no [D] column;
  df.attrs['suiro.date_columns'] remembers them, so a column still of whole days goes back as dates),
  f64 timestamps (POSIXct seconds) -> datetime64[ns, tz].

A suiro.Frame (what a frame from R or Lua arrives as) is a read-only mapping of column names to
the arrays of that table's right-hand column (frame["x"], pd.DataFrame(frame) ==
frame.to_pandas()), and has the dataframe interchange protocol (frame.__dataframe__(), for
pandas.api.interchange.from_dataframe: see Interchange below for what pandas 1.5 makes of it).
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
    nan = np.isnan(v)
    if not nan.any():  # the common column: no NaN at all, so no NA (two array passes, not nine)
        return nan
    b = v.view(np.uint64)
    return ((b & np.uint64(0x7FF0000000000000)) == np.uint64(0x7FF0000000000000)) & \
           ((b & np.uint64(0x000FFFFFFFFFFFFF)) != 0) & ((b & np.uint64(0xFFFFFFFF)) == np.uint64(1954))


def _no_form(name, dt, hint):
    raise TypeError("column %r (%s) has no form for R/Lua workers (%s)" % (name, dt, hint))


def series_column(s, name="?"):
    """A pandas Series (or array) as a wire column value (the mapping of the table above)."""
    pd = _pd()
    dt = s.dtype
    if isinstance(dt, pd.SparseDtype):
        _no_form(name, dt, "densify it first: .sparse.to_dense()")
    if isinstance(dt, pd.PeriodDtype):
        _no_form(name, dt, "convert it first: .dt.to_timestamp()")
    if isinstance(dt, pd.IntervalDtype):
        _no_form(name, dt, "send its .array.left and .array.right")
    if dt.kind == "m":
        _no_form(name, dt, "convert it first, e.g. to float seconds: .dt.total_seconds()")
    if str(dt) in ("uint64", "UInt64"):
        _no_form(name, dt, "cast it to int64 or float64 first")
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
            vals = np.asarray(pd.Series(s).fillna(0), dtype=wide)
            vals[na] = _I64_NA if wide is np.int64 else _I32_NA
            return vals
        if pd.api.types.is_float_dtype(dt):
            vals = np.array(s.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
            vals[na] = _F64_NA
            return vals
    if isinstance(dt, pd.api.extensions.ExtensionDtype) and not isinstance(dt, pd.StringDtype):
        _no_form(name, dt, "convert it to a numpy dtype first")
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
    if a.dtype.kind not in "fiub?cM":
        _no_form(name, a.dtype, "convert it to a numeric, bool, str or datetime64 dtype first")
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
    dates = df.attrs.get(_DATE_ATTR) if len(set(names)) == len(names) else None
    cols = []
    for i, name in enumerate(names):
        s = df.iloc[:, i]
        c = _as_dates(s, dates[name]) if isinstance(dates, dict) and name in dates else None
        cols.append(series_column(s, name) if c is None else c)
    return Frame._make(names, cols, len(df))


_DATE_ATTR = "suiro.date_columns"
_NS_PER_DAY = 86400 * 10**9


def _as_dates(s, dtype_str):
    """A datetime64[ns] column that came as dates (to_pandas' attrs) as suiro.Dates again, in the
    element type it came in, when every value is still a whole day; None otherwise (a column the
    user changed to times goes as timestamps)."""
    if s.dtype != np.dtype("datetime64[ns]"):
        return None
    ns = np.asarray(s).view(np.int64)
    nat = ns == np.iinfo(np.int64).min
    if (ns[~nat] % _NS_PER_DAY).any():
        return None
    days = ns // _NS_PER_DAY
    dt = np.dtype(dtype_str)
    if dt == np.float64:
        out = days.astype(np.float64)
        out[nat] = _F64_NA  # R's NA_real_
    elif dt == np.int32:
        out = days.astype(np.int32)
        out[nat] = _I32_NA
    else:
        return None
    return Dates(out)


def to_wire(obj, foreign):
    """_values.to_wire for pandas objects (foreign: see there)."""
    pd = _pd()
    if not foreign:
        # Python receivers: pickled (index, names, dtypes kept); a Categorical of str categories
        # as a factor, which holds it exactly (and decodes as the same Categorical)
        if type(obj) is pd.Categorical and obj.categories.dtype == object and \
                obj.categories.inferred_type in ("string", "empty"):
            return ("factor",)
        return None
    try:
        if isinstance(obj, pd.DataFrame):
            return from_pandas(obj)
        if isinstance(obj, pd.Series):
            return series_column(obj, obj.name)
        if isinstance(obj, (pd.Index, pd.api.extensions.ExtensionArray)) and not isinstance(obj, pd.Categorical):
            return series_column(pd.Series(obj), getattr(obj, "name", None))
    except TypeError as e:
        return ("refuse", str(e))
    return None  # Timestamps, Timedeltas, ...: pickled for Python, refused by others


def column_array(c):
    """frame[name]: the wire column as the array pandas takes (column_to_pandas), or as it is
    without pandas."""
    try:
        return column_to_pandas(c)
    except ImportError:
        return c


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
    # pandas has no date dtype (a date column is datetime64[ns]): which columns were dates, and of
    # which element type, rides in df.attrs so that the frame sent on unchanged gives R its Date
    # columns back, not POSIXct (from_pandas; pandas carries attrs through most operations)
    dates = {n: c.values.dtype.str for n, c in zip(frame.names, frame.columns) if isinstance(c, Dates)}
    if dates and len(set(frame.names)) == len(frame.names):
        df.attrs[_DATE_ATTR] = dates
    return df


# ---- the dataframe interchange protocol (https://data-apis.org/dataframe-protocol/latest/) ------
#
# frame.__dataframe__() describes each column by its buffers. Numeric and bool columns without NA
# are their arrays (no copy); NA goes as a byte mask over a private copy of the data (pandas 1.5
# writes its missing values into the buffers it is given). What pandas 1.5's from_dataframe makes
# of it: ints with NA become float64 with NaN, missing bools become False, missing strings NaN,
# dates and naive timestamps datetime64[ns]; time zones, complex columns and repeated names it
# refuses. frame.to_pandas() (or pd.DataFrame(frame)) keeps every kind exactly.

_K_INT, _K_UINT, _K_FLOAT, _K_BOOL, _K_STRING, _K_DATETIME, _K_CATEGORICAL = 0, 1, 2, 20, 21, 22, 23
_NON_NULLABLE, _USE_NAN, _USE_SENTINEL, _USE_BITMASK, _USE_BYTEMASK = 0, 1, 2, 3, 4
_FORMATS = {np.dtype(np.int8): "c", np.dtype(np.int16): "s", np.dtype(np.int32): "i", np.dtype(np.int64): "l",
            np.dtype(np.uint8): "C", np.dtype(np.uint16): "S", np.dtype(np.uint32): "I", np.dtype(np.uint64): "L",
            np.dtype(np.float32): "f", np.dtype(np.float64): "g", np.dtype(np.bool_): "b"}


def _xdtype(dt):
    kind = {"i": _K_INT, "u": _K_UINT, "f": _K_FLOAT, "b": _K_BOOL}[dt.kind]
    return (kind, dt.itemsize * 8, _FORMATS[dt], "=")


class XBuffer:
    """A contiguous block of memory (an interchange Buffer) over a numpy array."""

    def __init__(self, arr):
        self._arr = np.ascontiguousarray(arr)

    @property
    def bufsize(self):
        return self._arr.nbytes

    @property
    def ptr(self):
        return self._arr.__array_interface__["data"][0]

    def __dlpack__(self):
        return self._arr.__dlpack__()

    def __dlpack_device__(self):
        return (1, None)  # CPU

    def __repr__(self):
        return "suiro XBuffer(%d bytes)" % self.bufsize


class XColumn:
    """One column of a suiro.Frame as an interchange Column."""

    def __init__(self, col, name, allow_copy=True):
        self._name = name
        self._allow_copy = allow_copy
        self._data, self._dtype, self._null, self._mask, self._offsets, self._cat = self._describe(col)

    def _copy(self, what):
        if not self._allow_copy:
            raise RuntimeError("column %r: %s needs a copy, which allow_copy=False forbids" % (self._name, what))

    def _describe(self, c):
        """(data array, dtype, describe_null, byte mask or None, offsets or None, categorical)"""
        if isinstance(c, Strings):
            self._copy("a string column")
            enc = [b"" if v is None else v.encode("utf-8", "surrogateescape") for v in c]
            offsets = np.zeros(len(enc) + 1, dtype=np.int64)
            np.cumsum([len(b) for b in enc], out=offsets[1:])
            data = np.frombuffer(b"".join(enc), dtype=np.uint8) if enc else np.zeros(0, np.uint8)
            mask = np.array([v is None for v in c], dtype=bool)
            null = (_USE_BYTEMASK, 1) if mask.any() else (_NON_NULLABLE, None)
            return data, (_K_STRING, 8, "u", "="), null, mask if mask.any() else None, offsets, None
        if type(c).__name__ == "Categorical":
            codes = np.asarray(c.codes)
            dt = (_K_CATEGORICAL, codes.dtype.itemsize * 8, _FORMATS[codes.dtype], "=")
            na = codes == -1  # a byte mask, not the sentinel -1: pandas 1.5 looks for -1 among the values
            if na.any():
                return codes, dt, (_USE_BYTEMASK, 1), na, None, c
            return codes, dt, (_NON_NULLABLE, None), None, None, c
        if isinstance(c, (Dates, Timestamps)) or (isinstance(c, np.ndarray) and c.dtype.kind == "M"):
            self._copy("a date or timestamp column")
            tz = c.tz if isinstance(c, Timestamps) else ""
            ns = (c.to_numpy() if isinstance(c, (Dates, Timestamps)) else c).astype("datetime64[ns]").view(np.int64)
            nat = ns == np.iinfo(np.int64).min
            null = (_USE_SENTINEL, int(np.iinfo(np.int64).min)) if nat.any() else (_NON_NULLABLE, None)
            return ns, (_K_DATETIME, 64, "tsn:" + tz, "="), null, None, None, None
        if isinstance(c, np.ma.MaskedArray):  # bool with NA
            self._copy("a bool column with NA")
            mask = np.ma.getmaskarray(c).copy()
            return np.ma.getdata(c).astype(bool), _xdtype(np.dtype(bool)), (_USE_BYTEMASK, 1), mask, None, None
        if not isinstance(c, np.ndarray) or c.dtype not in _FORMATS or c.ndim != 1:
            raise NotImplementedError("column %r: a %s column has no interchange dtype"
                                      % (self._name, getattr(c, "dtype", type(c).__name__)))
        if c.dtype == np.float64:
            na = _is_r_na(c)
            if na.any():  # R's NA: a byte mask, over a copy (the consumer writes NaN there)
                self._copy("a float column with NA")
                return c.copy(), _xdtype(c.dtype), (_USE_BYTEMASK, 1), na, None, None
            return c, _xdtype(c.dtype), (_USE_NAN, None), None, None, None
        if c.dtype == np.float32:
            return c, _xdtype(c.dtype), (_USE_NAN, None), None, None, None
        sentinel = {np.dtype(np.int32): _I32_NA, np.dtype(np.int64): _I64_NA}.get(c.dtype)
        if sentinel is not None and (c == sentinel).any():
            return c, _xdtype(c.dtype), (_USE_SENTINEL, int(sentinel)), None, None, None
        return c, _xdtype(c.dtype), (_NON_NULLABLE, None), None, None, None

    def size(self):
        return len(self._data) if self._offsets is None else len(self._offsets) - 1

    @property
    def offset(self):
        return 0

    @property
    def dtype(self):
        return self._dtype

    @property
    def describe_categorical(self):
        if self._cat is None:
            raise TypeError("column %r is not categorical" % (self._name,))
        pd = _pd()
        cats = pd.Series(self._cat.categories)
        try:  # pandas (1.5 insists on its own column type for the categories)
            from pandas.core.interchange.column import PandasColumn

            catcol = PandasColumn(cats, allow_copy=self._allow_copy)
        except ImportError:
            catcol = cats.__dataframe__().get_column(0)
        return {"is_ordered": bool(self._cat.ordered), "is_dictionary": True, "categories": catcol}

    @property
    def describe_null(self):
        return self._null

    @property
    def null_count(self):
        kind, v = self._null
        if kind == _USE_BYTEMASK:
            return int(self._mask.sum())
        if kind == _USE_SENTINEL:
            return int((self._data == v).sum())
        if kind == _USE_NAN:
            return int(np.isnan(self._data).sum())
        return 0

    @property
    def metadata(self):
        return {}

    def num_chunks(self):
        return 1

    def get_chunks(self, n_chunks=None):
        yield self

    def get_buffers(self):
        data_dtype = self._dtype
        if self._dtype[0] == _K_CATEGORICAL:
            data_dtype = _xdtype(self._data.dtype)
        elif self._dtype[0] == _K_DATETIME:
            data_dtype = (_K_INT, 64, "l", "=")
        return {
            "data": (XBuffer(self._data), data_dtype),
            "validity": (XBuffer(self._mask), _xdtype(np.dtype(bool))) if self._mask is not None else None,
            "offsets": (XBuffer(self._offsets), _xdtype(np.dtype(np.int64))) if self._offsets is not None else None,
        }


class Interchange:
    """A suiro.Frame as an interchange DataFrame (frame.__dataframe__())."""

    def __init__(self, frame, allow_copy=True):
        self._frame = frame
        self._allow_copy = allow_copy

    def __dataframe__(self, nan_as_null=False, allow_copy=True):
        return Interchange(self._frame, allow_copy)

    @property
    def metadata(self):
        return {}

    def num_columns(self):
        return len(self._frame.names)

    def num_rows(self):
        return self._frame.nrow

    def num_chunks(self):
        return 1

    def column_names(self):
        return list(self._frame.names)

    def get_column(self, i):
        return XColumn(self._frame.columns[i], self._frame.names[i], self._allow_copy)

    def get_column_by_name(self, name):
        return XColumn(self._frame.column(name), name, self._allow_copy)

    def get_columns(self):
        return [self.get_column(i) for i in range(self.num_columns())]

    def select_columns(self, indices):
        f = self._frame
        return Interchange(Frame._make([f.names[i] for i in indices], [f.columns[i] for i in indices], f.nrow),
                           self._allow_copy)

    def select_columns_by_name(self, names):
        return self.select_columns([self._frame.names.index(n) for n in names])

    def get_chunks(self, n_chunks=None):
        yield self
