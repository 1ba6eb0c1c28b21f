"""Values that cross between processes, and the helpers the C codec calls.

The wire format (docs/wire-format.md) has kinds Python lacks a native type for; these classes
carry them so that every value decodes and re-encodes to the same bytes:

  NA          the missing value of a bool (R's NA), also NA in string vectors
  Strings     a string vector (a list of str and None): wire STRS
  Dates       dates as int32 or float64 days (R); int64 days decode to numpy datetime64[D]
  Timestamps  instants in a unit with a time zone; naive int64 ones decode to numpy datetime64
  Frame       a data frame: named columns of equal length (to_pandas())
  Call        a call spec: suiro.call("numpy.mean", x) / suiro.call(source="...", x=x)
  Ref, Func   descriptors of region references and foreign functions (suiro.wire.decode(...,
              describe=True), and functions of other languages received as values)

numpy and pandas are imported only when a value needs them, so workers start fast.
"""

import builtins
import importlib
import os
import pickle
import sys
import operator
from operator import is_ as _is

__all__ = ["NA", "Strings", "Dates", "Timestamps", "Frame", "Call", "Ref", "Func", "call"]


class _NAType:
    """suiro.NA: a missing bool (R's NA), or a missing string in a string vector."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "suiro.NA"

    def __bool__(self):
        raise TypeError("the truth value of suiro.NA is unknown (it is a missing value)")

    def __reduce__(self):
        return (_NAType, ())


NA = _NAType()


class Strings(list):
    """A string vector (wire STRS): str items and None for NA. A plain list of str is a wire LIST."""

    __slots__ = ()

    def __repr__(self):
        return "suiro.Strings(%s)" % list.__repr__(self)


_UNITS = ("s", "ms", "us", "ns")


def _np():
    import numpy

    return numpy


class Dates:
    """Calendar dates as days since 1970-01-01 in an int32 or float64 array (R's Date).

    int64 days cross as numpy datetime64[D]; this class keeps the other element types exactly.
    """

    __slots__ = ("values",)

    def __init__(self, values):
        np = _np()
        values = np.asarray(values)
        if values.dtype not in (np.int32, np.int64, np.float64) or values.ndim != 1:
            raise TypeError("suiro.Dates: values must be a 1-d int32, int64 or float64 array of days")
        self.values = np.ascontiguousarray(values)

    def __len__(self):
        return len(self.values)

    def to_numpy(self):
        """datetime64[D] (fractions of days are dropped; NA becomes NaT)."""
        np = _np()
        v = self.values
        if v.dtype == np.float64:
            out = np.full(len(v), np.datetime64("NaT"), dtype="datetime64[D]")
            ok = ~np.isnan(v)
            out[ok] = np.floor(v[ok]).astype(np.int64).astype("datetime64[D]")
            return out
        out = v.astype(np.int64).astype("datetime64[D]")
        if v.dtype == np.int32:
            out[v == np.iinfo(np.int32).min] = np.datetime64("NaT")
        return out

    def __eq__(self, other):
        return isinstance(other, Dates) and _same_array(self.values, other.values)

    def __repr__(self):
        return "suiro.Dates(%r)" % (self.to_numpy(),)


class Timestamps:
    """Instants since 1970-01-01T00:00:00Z: int64 or float64 values in a unit (s, ms, us, ns) with
    a time zone ("" for none). Naive int64 timestamps cross as numpy datetime64[unit]."""

    __slots__ = ("values", "unit", "tz")

    def __init__(self, values, unit="ns", tz=""):
        np = _np()
        values = np.asarray(values)
        if values.dtype not in (np.int64, np.float64) or values.ndim != 1:
            raise TypeError("suiro.Timestamps: values must be a 1-d int64 or float64 array")
        if isinstance(unit, int):
            unit = _UNITS[unit]
        if unit not in _UNITS:
            raise ValueError("suiro.Timestamps: unit must be s, ms, us or ns, got %r" % (unit,))
        if not isinstance(tz, str):
            raise TypeError("suiro.Timestamps: tz must be a str")
        self.values = np.ascontiguousarray(values)
        self.unit = unit
        self.tz = tz

    def __len__(self):
        return len(self.values)

    def to_numpy(self):
        """datetime64[unit] in UTC (float seconds are rounded to the unit)."""
        np = _np()
        v = self.values
        if v.dtype == np.float64:
            out = np.full(len(v), np.datetime64("NaT"), dtype="datetime64[%s]" % self.unit)
            ok = ~np.isnan(v)
            out[ok] = np.round(v[ok]).astype(np.int64)
            return out
        return v.view("datetime64[%s]" % self.unit)

    def to_pandas(self):
        import pandas as pd

        idx = pd.DatetimeIndex(self.to_numpy())
        if self.tz:
            idx = idx.tz_localize("UTC").tz_convert(self.tz)
        return idx

    def __eq__(self, other):
        return (isinstance(other, Timestamps) and self.unit == other.unit and self.tz == other.tz
                and _same_array(self.values, other.values))

    def __repr__(self):
        return "suiro.Timestamps(%r, unit=%r, tz=%r)" % (self.values, self.unit, self.tz)


def _same_array(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Frame(dict):
    """A data frame: named columns of equal length, in order -- what a frame from R or Lua (wire
    FRAME) arrives as, and what suiro.Frame(df) makes of a pandas DataFrame for them.

    A read-only mapping of column names to arrays: frame["x"], list(frame) (the names, in order),
    len(frame) (the number of columns; frame.nrow the rows), "x" in frame, frame.items(). The
    arrays are what pandas takes: numpy arrays, pandas masked arrays where the wire marks NA in
    ints, floats or bools, object arrays of str/None for strings, Categorical for factors,
    datetime64 for dates and timestamps (as frame.to_pandas() gives them). frame.columns keeps
    the wire columns themselves (numpy arrays with R's NA markers, masked bool arrays, Strings,
    Categorical, Dates, Timestamps), which cross back unchanged.

    A name may repeat (R allows it): frame["a"] of a repeated name raises ValueError (which of
    them is meant is not known); frame.items(), frame.columns and frame.to_pandas() have every
    column, in order.

    pd.DataFrame(frame) builds the DataFrame frame.to_pandas() gives (it reads the mapping: the
    class is a dict subclass because pandas 1.5 takes column-wise input only from dicts; its
    methods that would change it raise TypeError). frame.__dataframe__() is the dataframe
    interchange protocol (pandas.api.interchange.from_dataframe(frame)).
    """

    __slots__ = ("names", "columns", "nrow")

    def __init__(self, data=None, nrow=None):
        if data is None:
            data = {}
        if hasattr(data, "columns") and hasattr(data, "iloc"):  # a pandas DataFrame
            f = _frames().from_pandas(data)
            self.names, self.columns, self.nrow = f.names, f.columns, f.nrow
            return
        items = list(data.items()) if hasattr(data, "items") else list(data)
        names, cols = [], []
        for name, col in items:
            if not isinstance(name, str):
                raise TypeError("suiro.Frame: column names must be str, got %s" % type(name).__name__)
            names.append(name)
            cols.append(_column(col))
        n = nrow
        for name, col in zip(names, cols):
            if n is None:
                n = len(col)
            elif len(col) != n:
                raise ValueError("suiro.Frame: column %r has %d rows, the frame %d" % (name, len(col), n))
        self.names = names
        self.columns = cols
        self.nrow = 0 if n is None else n

    @classmethod
    def _make(cls, names, columns, nrow):
        f = dict.__new__(cls)
        f.names, f.columns, f.nrow = names, columns, nrow
        return f

    # ---- the mapping (read-only) ----

    def __len__(self):
        return len(self.names)

    def __iter__(self):
        return iter(list(self.names))

    def __reversed__(self):
        return reversed(list(self.names))

    def __getitem__(self, name):
        return _frames().column_array(self.column(name))

    def column(self, name):
        """The wire column of that name (as frame.columns holds it)."""
        k = self.names.count(name) if isinstance(name, str) else 0
        if k == 1:
            return self.columns[self.names.index(name)]
        if k == 0:
            raise KeyError(name)
        raise ValueError("suiro.Frame: %d columns are named %r: take them from frame.items() or frame.columns"
                         % (k, name))

    def __contains__(self, name):
        return name in self.names

    def get(self, name, default=None):
        return self[name] if name in self.names else default

    def keys(self):
        return list(self.names)

    def values(self):
        return [_frames().column_array(c) for c in self.columns]

    def items(self):
        """(name, wire column) pairs, every column in order (repeated names too)."""
        return list(zip(self.names, self.columns))

    def to_dict(self):
        return dict(zip(self.names, self.columns))

    def copy(self):
        return Frame._make(list(self.names), list(self.columns), self.nrow)

    def _read_only(self, *args, **kwargs):
        raise TypeError("suiro.Frame is read-only (frame.to_pandas() gives a DataFrame to change)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __or__(self, other):
        return NotImplemented

    __ror__ = __or__

    def __dataframe__(self, nan_as_null=False, allow_copy=True):
        """The dataframe interchange protocol (pandas.api.interchange.from_dataframe(frame))."""
        return _frames().Interchange(self, allow_copy)

    def to_pandas(self):
        return _frames().to_pandas(self)

    def __eq__(self, other):
        if not isinstance(other, Frame) or self.names != other.names or self.nrow != other.nrow:
            return False
        return all(_column_equal(a, b) for a, b in zip(self.columns, other.columns))

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return "suiro.Frame(%d rows: %s)" % (self.nrow, ", ".join(self.names))

    def __reduce__(self):
        return (Frame._make, (self.names, self.columns, self.nrow))


def _column(col):
    np = _np()
    if isinstance(col, (Strings, Dates, Timestamps)):
        return col
    if type(col).__name__ == "Categorical":
        return col
    if isinstance(col, np.ndarray):
        return col
    if isinstance(col, (list, tuple)):
        if all(x is None or isinstance(x, str) for x in col) and any(isinstance(x, str) for x in col):
            return Strings(col)
        return np.asarray(col)
    return np.asarray(col)


def _column_equal(a, b):
    np = _np()
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ma.MaskedArray):
        return (a.dtype == b.dtype and np.array_equal(np.ma.getmaskarray(a), np.ma.getmaskarray(b))
                and np.array_equal(a.filled(False) if a.dtype == bool else a.filled(0),
                                   b.filled(False) if b.dtype == bool else b.filled(0)))
    if isinstance(a, np.ndarray):
        return _same_array(a, b)
    if type(a).__name__ == "Categorical":
        return (list(a.categories) == list(b.categories) and a.ordered == b.ordered
                and list(a.codes) == list(b.codes))
    return a == b


_frames_mod = None


def _frames():
    global _frames_mod
    if _frames_mod is None:
        from . import _frames as f

        _frames_mod = f
    return _frames_mod


class Call:
    """A call spec: a function named by a qualified name, or source text whose last expression
    is the value, with positional and named arguments. Runs on workers of any language."""

    __slots__ = ("target", "source", "args", "kwargs")

    def __init__(self, target=None, source=None, args=(), kwargs=None):
        self.target = target
        self.source = source
        self.args = list(args)
        self.kwargs = dict(kwargs or {})

    def __repr__(self):
        what = repr(self.target) if self.source is None else "source=%r" % (self.source[:40],)
        return "suiro.call(%s, %d positional, %d named)" % (what, len(self.args), len(self.kwargs))

    def __eq__(self, other):
        return (isinstance(other, Call) and self.target == other.target and self.source == other.source
                and _deep_eq(self.args, other.args) and _deep_eq(self.kwargs, other.kwargs))


def call(name=None, /, *args, source=None, **kwargs):
    """suiro.call("numpy.mean", x) or suiro.call(source="import numpy as np\\nnp.std(x)", x=x).

    Exactly one of name and source. In source mode positional arguments are bound as _1, _2, ...
    and named ones by their names; the value is that of the last expression (or of a `return`).
    """
    if (name is None) == (source is None):
        raise TypeError("suiro.call: give a function name or source=, not both" if name is not None
                        else "suiro.call: give a function name (\"module.fn\") or source=\"...\"")
    if name is not None:
        if not isinstance(name, str):
            raise TypeError("suiro.call: the function name must be a str, got %s" % type(name).__name__)
        from . import _core

        try:
            _core.check_fnref(name)
        except ValueError as e:
            raise ValueError("suiro.call: %s" % e) from None
    elif not isinstance(source, str):
        raise TypeError("suiro.call: source must be a str, got %s" % type(source).__name__)
    for k in kwargs:
        if not isinstance(k, str):
            raise TypeError("suiro.call: keyword names must be str")
    return Call(name, source, args, kwargs)


class Ref:
    """A region reference as the wire describes it (suiro.wire.decode(..., describe=True))."""

    __slots__ = ("name", "kind", "order", "flags", "offset", "length", "shape")

    _KINDS = {0x00: "bytes", 0x40: "wire", 1: "f64", 2: "f32", 3: "i64", 4: "i32", 5: "u8", 6: "bool", 7: "c128"}

    def __init__(self, name, kind, order, flags, offset, length, shape):
        self.name, self.kind, self.order = name, kind, order
        self.flags, self.offset, self.length, self.shape = flags, offset, length, tuple(shape)

    def _wire(self):
        return (self.name, self.kind, self.order, self.flags, self.offset, self.length, self.shape)

    def __eq__(self, other):
        return isinstance(other, Ref) and self._wire() == other._wire()

    def __repr__(self):
        return "suiro.Ref(%r, %s, %s, offset=%d, length=%d, shape=%r)" % (
            self.name, self._KINDS.get(self.kind, self.kind), "CF"[self.order], self.offset, self.length, self.shape)


class Func:
    """A function of another language (or a described one): lang, key, name, captured values.
    It can be sent back to workers of its language."""

    __slots__ = ("lang", "key", "name", "captured", "__weakref__")

    def __init__(self, lang, key, name=None, captured=None):
        self.lang, self.key, self.name = lang, key, name
        self.captured = list(captured or [])

    def __eq__(self, other):
        if not isinstance(other, Func):
            return False
        if self is other:
            return True
        if (self.lang, self.key, self.name, len(self.captured)) != (other.lang, other.key, other.name,
                                                                     len(other.captured)):
            return False
        return all((a is self and b is other) or _deep_eq(a, b) for a, b in zip(self.captured, other.captured))

    def __repr__(self):
        return "suiro.Func(%s, key=%d, name=%r, %d captured)" % (self.lang, self.key, self.name, len(self.captured))


def _deep_eq(a, b):
    try:
        np = sys.modules.get("numpy")
        if np is not None and isinstance(a, np.ndarray):
            return isinstance(b, np.ndarray) and _same_array(a, b)
        return bool(a == b)
    except Exception:
        return False


# ---- helpers the C codec calls ------------------------------------------------------------------

def make_bool_na(raw):
    """A bool array with NA bytes (0xFF): a numpy masked array, masked where NA."""
    np = _np()
    mask = raw == 0xFF  # elementwise: keeps raw's memory order (C or F)
    data = raw == 1
    return np.ma.MaskedArray(data, mask=mask)


def make_factor(codes, levels, ordered):
    import pandas as pd

    return pd.Categorical.from_codes(codes, categories=levels, ordered=bool(ordered))


def make_dates(values, wtype):
    if wtype == 3:  # int64 days: numpy's own dates
        return values.view("datetime64[D]")
    return Dates(values)


def make_timestamps(values, unit, tz):
    if values.dtype.kind == "i" and not tz:
        return values.view("datetime64[%s]" % _UNITS[unit])
    return Timestamps(values, _UNITS[unit], tz)


def make_frame(names, columns, nrow):
    return Frame._make(names, columns, nrow)


def make_call(form, text, args, kwargs):
    return Call(None, text, args, kwargs) if form == 1 else Call(text, None, args, kwargs)


def make_ref(name, kind, order, flags, offset, length, shape):
    return Ref(name, kind, order, flags, offset, length, shape)


def make_func(lang, key):
    return Func(lang, key)


def to_wire(obj, foreign):
    """A replacement the codec knows for obj, or None (pickle it, or refuse it for foreign
    receivers), or ("array", wire type, contiguous ndarray), ("factor",) or ("refuse", why).

    foreign (enc.c, wire_mode): 0 for a Python receiver, which gets every object as it was
    (None: pickled, large buffers out of band); 1 for Lua and R receivers, which get the
    documented mapping or a refusal; 2 for a frame column going to a Python receiver (a FRAME's
    columns are wire vectors: the mapping)."""
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(obj, np.ma.MaskedArray):
            if not foreign and not _masked_is_wire_exact(np, obj):
                return None  # pickled: mask, fill_value and the data under the mask kept
            return _masked_to_wire(np, obj)
        if isinstance(obj, np.ndarray):
            if not foreign and type(obj) is not np.ndarray:
                return None  # np.matrix and other subclasses: pickled, their type kept
            return _array_to_wire(np, obj, foreign)
    mod = type(obj).__module__ or ""
    if foreign == 1:
        rep = _scalar_to_wire(np, obj, mod)
        if rep is not None:
            return rep
    if mod.startswith("pandas"):
        return _frames().to_wire(obj, foreign)
    if isinstance(obj, (bytearray, memoryview)) and foreign:
        return bytes(obj)
    return None


def _scalar_to_wire(np, obj, mod):
    """For other languages, the scalars whose arrays cross: complex, datetime, date, numpy
    datetime64 and pandas Timestamp as one-element vectors (R's scalars are those), pandas.NA as
    NA. None when obj is none of them."""
    import datetime
    if mod.startswith("pandas"):
        pd = sys.modules.get("pandas")
        if pd is not None and obj is pd.NA:
            return NA
        if pd is not None and isinstance(obj, pd.Timestamp):
            if obj is pd.NaT:
                return None
            return Timestamps(np.array([obj.value], dtype=np.int64), "ns", "" if obj.tz is None else str(obj.tz))
        return None
    if np is None:
        return None
    if isinstance(obj, complex):  # np.complex128 too
        return np.array([obj], dtype=np.complex128)
    if isinstance(obj, datetime.datetime):
        if obj.tzinfo is None:  # wall time, as a numpy datetime64 array of it crosses
            return Timestamps(np.array([np.datetime64(obj, "us")]).view(np.int64), "us", "")
        zone = getattr(obj.tzinfo, "key", None)  # zoneinfo
        if zone is None and obj.utcoffset() == datetime.timedelta(0):
            zone = "UTC"
        if zone is None:
            return ("refuse", "a datetime with a fixed UTC offset has no time zone name: give it a zoneinfo "
                    "zone, or convert it to UTC")
        us = (obj - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
        return Timestamps(np.array([us], dtype=np.int64), "us", zone)
    if isinstance(obj, datetime.date):
        return _dates(np, np.array([np.datetime64(obj, "D")]).view(np.int64))
    if isinstance(obj, np.datetime64):
        return _array_to_wire(np, np.array([obj]), True)
    return None


def _masked_is_wire_exact(np, a):
    """A masked bool array that the wire's bool-with-NA gives back exactly (what a decoded one
    is: some entry masked, False under the mask, the default fill_value, a soft mask)."""
    if type(a) is not np.ma.MaskedArray or a.dtype != np.bool_ or a.ndim == 0 or a.hardmask:
        return False
    m = np.ma.getmask(a)
    if m is np.ma.nomask or not m.any() or bool(np.ma.getdata(a)[m].any()):
        return False
    return a.fill_value == np.ma.default_fill_value(a)


def _masked_to_wire(np, a):
    mask = np.ma.getmaskarray(a)
    data = np.ma.getdata(a)
    if not (data.flags.c_contiguous or data.flags.f_contiguous):
        data = np.ascontiguousarray(data)
        mask = np.ascontiguousarray(mask)
    if data.dtype == bool:
        raw = data.view(np.uint8).copy(order="K")
        raw[mask] = 0xFF
        return ("array", 6, raw)
    fill = _na_fill(np, data.dtype)
    if fill is None:
        return ("refuse", "a masked %s array (this type has no NA)" % data.dtype)
    out = data.copy()
    out[mask] = fill
    return out


def _na_fill(np, dt):
    if dt == np.float64:
        return np.frombuffer(b"\xa2\x07\x00\x00\x00\x00\xf0\x7f", dtype=np.float64)[0]
    if dt == np.int32:
        return np.iinfo(np.int32).min
    if dt == np.int64:
        return np.iinfo(np.int64).min
    return None


def _array_to_wire(np, a, foreign):
    dt = a.dtype
    if dt.byteorder == ">":
        if not foreign:
            return None  # pickled: the byte order kept
        return a.astype(dt.newbyteorder("="))
    if dt.kind == "M":
        unit, count = np.datetime_data(dt)
        if count != 1 or unit not in ("D", "s", "ms", "us", "ns"):
            if foreign:
                return ("refuse", "datetime64[%s] (use D, s, ms, us or ns)" % unit)
            return None
        if a.ndim != 1:
            return ("refuse", "an n-d datetime64 array (dates and timestamps are 1-d)") if foreign else None
        v = np.ascontiguousarray(a).view(np.int64)
        return _dates(np, v) if unit == "D" else Timestamps(v, unit, "")
    if dt.kind in "OUS":
        if not foreign:
            return None  # pickled: str_, bytes_ and object arrays stay what they are
        if a.ndim != 1:
            return ("refuse", "an n-d array of strings or objects") if foreign else None
        items = a.tolist()
        if dt.kind == "S":
            return None if not foreign else ("refuse", "an array of bytes strings")
        if all(x is None or isinstance(x, str) for x in items):
            return Strings(items)
        return None if not foreign else ("refuse", "an object array")
    if dt in (np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_, np.complex128):
        # a known type that came here: strided or non-contiguous
        return np.ascontiguousarray(a)
    if not foreign:
        return None  # pickled: the exact dtype survives
    if dt in (np.int8, np.int16, np.uint16):
        return a.astype(np.int32)
    if dt == np.uint32:
        return a.astype(np.int64)
    if dt == np.float16:
        return a.astype(np.float32)
    if dt == np.complex64:
        return a.astype(np.complex128)
    return ("refuse", "numpy arrays of %s (the wire has f64, f32, i64, i32, u8, bool and c128)" % dt)


def _dates(np, v):
    d = Dates.__new__(Dates)
    d.values = v
    return d


def dumps(obj, pubs=None):
    """Pickles obj for another Python process: pickle, else cloudpickle (lambdas, local classes,
    and anything that names the main script, which no worker can import: see _by_value).
    pubs: the list of (key, blob) class blobs enc.c publishes in the receiving pool (None:
    no pool, only the keys classes arrived under go by key)."""
    if type(obj) in _class_entries or type(obj) in _received:
        data = _keyed_dumps(obj, pubs, pickle.HIGHEST_PROTOCOL)
        if data is not None:
            return data
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as first:
        cp = _cloudpickle()
        if cp is None:
            raise first from None
        data = _keyed_dumps(obj, pubs, pickle.HIGHEST_PROTOCOL)
        return data if data is not None else cp.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if _names_main(data):
        cp = _cloudpickle()
        if cp is not None:
            keyed = _keyed_dumps(obj, pubs, pickle.HIGHEST_PROTOCOL)
            return keyed if keyed is not None else cp.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return data


loads = pickle.loads


def dumps_oob(obj, pubs=None):
    """obj pickled for another Python process with protocol 5: the bytes, or (bytes, buffers)
    when it has out-of-band buffers (numpy and pandas data), which the codec sends as arrays
    (by reference when large) beside the pickle instead of copying them into it. pubs: as dumps."""
    bufs = []
    if type(obj) in _class_entries or type(obj) in _received:  # a class sent by key before
        data = _keyed_dumps(obj, pubs, 5, bufs.append)
        if data is not None:
            return (data, bufs) if bufs else data
        bufs = []
    try:
        data = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
        cp = _cloudpickle() if _names_main(data) else None
    except Exception as first:
        cp = _cloudpickle()
        if cp is None:
            raise first from None
    if cp is not None:
        bufs = []
        data = _keyed_dumps(obj, pubs, 5, bufs.append)
        if data is None:
            bufs = []
            data = cp.dumps(obj, protocol=5, buffer_callback=bufs.append)
    return (data, bufs) if bufs else data


# Main-script objects (functions, classes and their instances, enums, exceptions of a host's
# main script, or of a script multiprocessing re-ran as "__mp_main__"): pickle writes them as
# references to a module no worker can import ("Can't get attribute 'f' on <module '__main__'>").
# A pickle is plain pickle's, at plain pickle's speed, unless its bytes name one of those modules
# (every reference to a module writes the module's name, so a pickle that names neither refers to
# neither); then the object is pickled again by cloudpickle, which sends such functions and
# classes by value, and its class tracker gives a class that went out and comes back the host's
# own class again (isinstance, enum identity, `except AppError` hold). cloudpickle is imported on
# first need only.
def _names_main(data):
    return b"__main__" in data or b"__mp_main__" in data


def _cloudpickle():
    try:
        import cloudpickle
    except ImportError:
        return None
    if "__mp_main__" in sys.modules:
        _mp_main_by_value(cloudpickle)
    return cloudpickle


def dumps_captured(obj, pubs=None):
    """A value a function sent by value captured: cloudpickle, as the function was pickled whole
    (an instance of a main-script class goes by value, not by a name no worker imports; its
    class by key, as dumps sends it)."""
    cp = _cloudpickle()
    if cp is None:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = _keyed_dumps(obj, pubs, pickle.HIGHEST_PROTOCOL)
    return data if data is not None else cp.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


# Modules no worker can import: a host's main script, and the same script re-run as
# "__mp_main__" in a child of multiprocessing's spawn (its functions name that module; a worker
# importing "__mp_main__.f" fails). Their functions travel by value, with their globals.
_MAIN_NAMES = ("__main__", "__mp_main__")


def pickle_function(fn):
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
    if "__mp_main__" in sys.modules:  # fn may be a callable object holding such functions
        _mp_main_by_value(cloudpickle)
    return cloudpickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)


def _mp_main_by_value(cloudpickle):
    """cloudpickle pickles only "__main__" by value of itself: "__mp_main__" too."""
    m = sys.modules.get("__mp_main__")
    try:
        if m is not None and "__mp_main__" not in cloudpickle.list_registry_pickle_by_value():
            cloudpickle.register_pickle_by_value(m)
    except (AttributeError, ValueError, TypeError):  # an old cloudpickle: by reference, as before
        pass


# ---- classes sent by value, once per pool --------------------------------------------------------
#
# A class no worker can import (a main-script class, dataclass, enum or exception) would go by
# value, pickled by cloudpickle, with every object of it (~0.1-1 ms). Instead the class is pickled
# once (by cloudpickle: its blob), published by content in the receiving pool's blob store
# (enc.c publishes the (key, blob) pairs a pickle used, before the task is sent), and a pickle
# names it as _main_class(key): an object costs its own state at plain pickle speed. A worker
# rebuilds the class once per key (the engine's code cache, as for task functions), so objects
# of one class received apart have one type; cloudpickle's class tracker makes a class that came
# back the sender's own one, and _host_classes gives the host its class for a key it published.
# Objects a worker makes of such a class go back under the key the class arrived with.
#
# The key is the blob's content key. Per class object this process keeps the blob with a check
# list of what the blob was made from (the class's dict, its main-script bases, its methods'
# code, defaults, closure cells and the globals they read, recursively, and the items of small
# containers among them, by identity); a send re-reads the list (func.c, _checks_hold_c: ~0.4 µs
# for a dataclass; _checks_hold is the same in Python) and a change (an
# attribute or method rebound, a global a method reads rebound, a redefined class: a new class
# object) makes a new blob and key. Changes inside large (> 64 items) or non-container mutable
# values are not looked for.

_class_entries = {}  # class -> (key, blob, checks): the blob this process made of the class
_host_classes = {}  # key -> the class this process published under key
_received = {}  # class -> the key it arrived under (a worker: results go back under that key)
class_blobs = 0  # class blobs made (cloudpickled) by this process: tests read it
_MAX_CLASSES = 4096
_MAX_REBLOBS = 64  # blobs of one class object: past that it changes too often to be worth keys
CLASS_TAG = "suiro-class-1"
_ABSENT = object()
_keyed_pickler = _fast_pickler = None
_fn_key = None  # func.c installs the engine's content key (suiro_fn_key) and
_fetch_class = None  # the worker's code cache by key (suiro_exec_code), and
_fetch_blob = None  # the bytes under a key (suiro_fn_fetch), and _checks_hold in C
_checks_hold_c = None


def _main_class(key):
    """The class published under key: the host's own for a key it made, else (a worker) the
    one rebuilt from the pool's blob store, once per key."""
    cls = _host_classes.get(key)
    if cls is not None:
        return cls
    if _fetch_class is None:
        raise pickle.UnpicklingError("a class sent by key %#x is not known in this process" % key)
    t = _fetch_class(key)
    if not (type(t) is tuple and len(t) == 3 and t[0] == CLASS_TAG and isinstance(t[2], type)):
        raise pickle.UnpicklingError("the blob under key %#x is not a class" % key)
    cls = t[2]
    if _received.get(cls, key) != key:  # its tracker gave the class another blob's state since:
        t = loads(_fetch_blob(key))  # this one's again (a class attribute set back, say)
    if len(_received) < _MAX_CLASSES or cls in _received:
        _received[cls] = key
    return cls


def _keyed_dumps(obj, pubs, protocol, buffer_callback=None):
    """obj pickled with the classes it names that no worker imports by key: by plain pickle's
    C pickler when that is all it names of the main script, else by cloudpickle (functions and
    classes without a key by value). None without cloudpickle."""
    global _fast_pickler, _keyed_pickler
    if _keyed_pickler is None:
        cp = _cloudpickle()
        if cp is None:
            return None

        class FastPickler(pickle.Pickler):
            pubs = None

            def reducer_override(self, o):
                if isinstance(o, type):
                    k = _class_key(o, self.pubs)
                    if k is not None:
                        return (_main_class, (k,))
                return NotImplemented

        class KeyedPickler(cp.Pickler):
            pubs = None

            def reducer_override(self, o):
                if isinstance(o, type):
                    k = _class_key(o, self.pubs)
                    if k is not None:
                        return (_main_class, (k,))
                return super().reducer_override(o)

        _fast_pickler, _keyed_pickler = FastPickler, KeyedPickler
    import io
    bufs = [] if buffer_callback is not None else None  # handed on only if this pickle is kept
    f = io.BytesIO()
    p = _fast_pickler(f, protocol=protocol, buffer_callback=None if bufs is None else bufs.append)
    p.pubs = pubs
    try:
        p.dump(obj)
        data = f.getvalue()
        if not _names_main(data):
            for b in bufs or ():
                buffer_callback(b)
            return data
    except Exception:
        pass
    f = io.BytesIO()
    p = _keyed_pickler(f, protocol=protocol, buffer_callback=buffer_callback)
    p.pubs = pubs
    p.dump(obj)
    return f.getvalue()


def _class_key(cls, pubs):
    """The key cls goes by (its (key, blob) added to pubs), or None: by value, or by reference."""
    if pubs is None:  # no pool to publish in: only a key the receiver published
        return _received.get(cls)
    ent = _class_entries.get(cls)
    if ent is not None:
        if ent[0] is None:  # changed at nearly every send: by value, as cloudpickle sends it
            return _received.get(cls)
        if (_checks_hold_c or _checks_hold)(ent[2]):
            pubs.append((ent[0], ent[1]))
            return ent[0]
    elif (getattr(cls, "__module__", None) not in _MAIN_NAMES or "<" in getattr(cls, "__qualname__", "<")
          or function_ref(cls) is not None or _fn_key is None or len(_class_entries) >= _MAX_CLASSES):
        return _received.get(cls)  # importable (by reference), local (by value), or no key to give
    global class_blobs
    n = ent[3] + 1 if ent is not None else 1
    if n > _MAX_REBLOBS:
        _class_entries[cls] = (None, None, None, n)
        return _received.get(cls)
    checks = []
    _deps(cls, checks, set(), 0)
    class_blobs += 1  # the serial makes a class changed back a new key: a worker's class takes
    blob = _cloudpickle().dumps((CLASS_TAG, class_blobs, cls), protocol=pickle.HIGHEST_PROTOCOL)  # its state
    key = _fn_key(blob)
    if len(_host_classes) >= _MAX_CLASSES and key not in _host_classes:
        _class_entries.pop(cls, None)  # no key a result could come back under: by value
        return _received.get(cls)
    _host_classes[key] = cls
    _class_entries[cls] = (key, blob, checks, n)
    pubs.append((key, blob))
    return key


_ATOMS = (int, float, complex, str, bytes, bool, type(None))
_global_names = {}  # code -> the global names it (and its nested code) reads


def _code_globals(code):
    names = _global_names.get(code)
    if names is None:
        names = tuple(_code_global_names(code, []))
        if len(_global_names) < 65536:
            _global_names[code] = names
    return names


def _deps(v, checks, seen, depth):
    """Adds to checks what cloudpickle's bytes of v depend on, to be re-read by _checks_hold."""
    import types
    t = type(v)
    if t in _ATOMS or id(v) in seen or depth > 8:
        return
    seen.add(id(v))
    if t is types.FunctionType:
        cl = v.__closure__ or ()
        cells = tuple(c.cell_contents if _cell_full(c) else _ABSENT for c in cl)
        fd = v.__dict__
        checks.append(("f", v, v.__code__, v.__defaults__, v.__kwdefaults__, v.__closure__, cells, len(fd)))
        g = v.__globals__
        names = _code_globals(v.__code__)
        vals = tuple(g.get(n, _ABSENT) for n in names)
        if names:
            checks.append(("g", g, names, vals, (_ABSENT,) * len(names)))
        for x in vals + cells + (v.__defaults__ or ()) + tuple((v.__kwdefaults__ or {}).values()) + tuple(fd.values()):
            _deps(x, checks, seen, depth + 1)
    elif t in (staticmethod, classmethod):
        checks.append(("a", v, "__func__", v.__func__))
        _deps(v.__func__, checks, seen, depth + 1)
    elif t is property:
        fs = (v.fget, v.fset, v.fdel)
        checks.append(("p", v, fs))
        for x in fs:
            _deps(x, checks, seen, depth + 1)
    elif isinstance(v, type):
        if function_ref(v) is not None:
            return  # by reference
        try:  # what pickling an instance adds to the class (__slotnames__), added now
            import copyreg
            copyreg._slotnames(v)
        except Exception:
            pass
        d = v.__dict__
        checks.append(("c", v, tuple(d.keys()), tuple(d.values())))
        checks.append(("a", v, "__bases__", v.__bases__))
        for x in v.__bases__ + tuple(d.values()):
            _deps(x, checks, seen, depth + 1)
    elif t in (dict, list, tuple, set, frozenset) and len(v) <= 64:
        if t is dict:
            checks.append(("d", v, tuple(v.keys()), tuple(v.values())))
            items = tuple(v.values())
        else:
            items = tuple(v)
            if t is not tuple and t is not frozenset:
                checks.append(("s", v, items))
        for x in items:
            _deps(x, checks, seen, depth + 1)


_cell_get = operator.attrgetter("cell_contents")


def _checks_hold(checks):
    try:
        for c in checks:
            k = c[0]
            if k == "g":
                if not all(map(_is, map(c[1].get, c[2], c[4]), c[3])):
                    return False
            elif k == "d" or k == "c":
                d = c[1] if k == "d" else c[1].__dict__
                if len(d) != len(c[2]) or not all(map(_is, d, c[2])) or not all(map(_is, d.values(), c[3])):
                    return False
            elif k == "f":
                f = c[1]
                if (f.__code__ is not c[2] or f.__defaults__ is not c[3] or f.__kwdefaults__ is not c[4]
                        or f.__closure__ is not c[5] or len(f.__dict__) != c[7]):
                    return False
                if c[6] and not all(map(_is, map(_cell_get, c[5]), c[6])):
                    return False  # (an empty cell raises: a new snapshot)
            elif k == "a":
                if getattr(c[1], c[2]) is not c[3]:
                    return False
            elif k == "p":
                p = c[1]
                if p.fget is not c[2][0] or p.fset is not c[2][1] or p.fdel is not c[2][2]:
                    return False
            elif k == "s":
                if len(c[1]) != len(c[2]) or not all(map(_is, c[1], c[2])):
                    return False
    except Exception:
        return False
    return True


def _cell_full(c):
    try:
        c.cell_contents
    except ValueError:
        return False
    return True


# ---- functions sent by value, their code once per pool -------------------------------------------
#
# A function no worker can import (a lambda, a main-script or nested function) is split in two:
# its code, with what it names that a worker imports (modules, importable functions and classes),
# pickled once and published by content; and what it captured (the values of the globals it reads
# that are not of that kind, its closure cells, its defaults), sent with every task, so a global
# changed (or mutated) between submits is seen by the next task. The host keeps the plan below per
# code object and checks, at each submit, that every name still holds what the code was pickled
# with (func.c, sp_function_plan); a change makes a new plan. The worker rebuilds the function from
# the template (func.c, sp_build_function): a fresh globals dict and cells per task, as unpickling
# afresh gave.

PLAN_DYN = object()  # a captured value: sent per task
PLAN_SELF = object()  # the function itself (recursion): the worker's own instance
PLAN_ABSENT = object()  # a name the function's globals lack (a builtin, or undefined)
TEMPLATE_TAG = "suiro-fn-1"

_GLOBAL_OPS = None


def _code_global_names(code, out):
    global _GLOBAL_OPS
    if _GLOBAL_OPS is None:
        import dis
        _GLOBAL_OPS = {dis.opmap[n] for n in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME",
                                              "STORE_NAME", "DELETE_NAME") if n in dis.opmap}
    import dis
    for ins in dis.get_instructions(code):
        if ins.opcode in _GLOBAL_OPS:
            name = ins.argval
            if isinstance(name, str) and name not in out:
                out.append(name)
    for c in code.co_consts:
        if isinstance(c, type(code)):
            _code_global_names(c, out)
    return out


def _static_kind(v):
    """v travels with the code (by reference) and is checked by identity."""
    import types
    if isinstance(v, types.ModuleType):
        return v.__name__ not in _MAIN_NAMES and sys.modules.get(v.__name__) is v
    if isinstance(v, (types.BuiltinFunctionType, type, types.FunctionType)):
        return function_ref(v) is not None
    return False


def function_plan(fn):
    """(blob, globals, gnames, gkinds, ckinds) for a function sent by value, or None (pickled whole).

    gkinds: per name, PLAN_DYN, PLAN_SELF, PLAN_ABSENT or the static value; ckinds: per closure
    cell, the same without PLAN_ABSENT. The blob unpickles to the worker's template tuple."""
    import types
    if type(fn) is not types.FunctionType or fn.__dict__:
        return None
    try:
        import cloudpickle
    except ImportError:
        return None
    g = fn.__globals__
    mod = g.get("__name__", fn.__module__)
    gnames, gkinds, base, dyn, selfn = [], [], {"__builtins__": builtins}, [], []
    if isinstance(mod, str):
        base["__name__"] = mod
    for n in _code_global_names(fn.__code__, []):
        if n in ("__builtins__", "__name__"):
            continue
        if n not in g:
            kind = PLAN_ABSENT
        else:
            v = g[n]
            if v is fn:
                kind = PLAN_SELF
                selfn.append(n)
            elif _static_kind(v):
                kind = v
                base[n] = v
            else:
                kind = PLAN_DYN
                dyn.append(n)
        gnames.append(n)
        gkinds.append(kind)
    ckinds, cspec = [], []
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later)
            return None
        if v is fn:
            ckinds.append(PLAN_SELF)
            cspec.append(1)
        elif _static_kind(v):
            ckinds.append(v)
            cspec.append((v,))
        else:
            ckinds.append(PLAN_DYN)
            cspec.append(0)
    template = (TEMPLATE_TAG, fn.__code__, fn.__name__, fn.__qualname__, base, tuple(dyn), tuple(selfn), tuple(cspec))
    blob = cloudpickle.dumps(template, protocol=pickle.HIGHEST_PROTOCOL)
    return (blob, g, tuple(gnames), tuple(gkinds), tuple(ckinds))


def function_ref(fn):
    """"module.qualname" when fn can be imported back by that name, else None."""
    mod = getattr(fn, "__module__", None)
    qn = getattr(fn, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qn, str) or "<" in qn or mod in _MAIN_NAMES:
        return None
    m = sys.modules.get(mod)
    if m is None:
        return None
    obj = m
    for part in qn.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    if obj is not fn:
        return None
    return mod + "." + qn


def resolve(name):
    """The object a "module.attr.attr" name refers to, importing the longest module prefix."""
    parts = name.split(".")
    if not all(parts):
        raise ValueError("cannot find function %r: not a dotted name" % name)
    if len(parts) == 1:
        obj = getattr(builtins, name, None)
        if obj is None:
            raise NameError("cannot find function %r" % name)
        return obj
    err = None
    for k in range(len(parts) - 1, 0, -1):
        modname = ".".join(parts[:k])
        try:
            obj = importlib.import_module(modname)
        except ImportError as e:
            if err is None:
                err = e
            continue
        try:
            for p in parts[k:]:
                obj = getattr(obj, p)
        except AttributeError as e:
            raise AttributeError("cannot find function %r: %s" % (name, e)) from None
        return obj
    raise ImportError("cannot find function %r: %s" % (name, err)) from None


def call_target(c):
    """The callable of a call spec used as a map function (element first, then its args)."""
    if c.target is None:
        raise TypeError("a map's function cannot be a source call spec; use a named function")
    f = resolve(c.target)
    if c.args or c.kwargs:
        return lambda x: f(x, *c.args, **c.kwargs)
    return f


_sources = {}


def run_call(c):
    """Runs a call spec in this worker."""
    if c.source is None:
        f = resolve(c.target)
        return f(*c.args, **c.kwargs)
    code = _sources.get(c.source)
    if code is None:
        code = _compile_source(c.source)
        if len(_sources) < 512:
            _sources[c.source] = code
    ns = {"__builtins__": builtins, "__name__": "__suiro_call__"}
    for i, a in enumerate(c.args):
        ns["_%d" % (i + 1)] = a
    ns.update(c.kwargs)
    kind, body, last = code
    if kind == "func":
        exec(body, ns)
        return ns["__suiro_source__"]()
    if body is not None:
        exec(body, ns)
    return eval(last, ns) if last is not None else None


def _compile_source(src):
    """(kind, statements, last expression): the value of a source is its last expression; a
    source with a top-level `return` (Lua style) runs as a function body."""
    import ast

    try:
        compile(src, "<suiro.call source>", "exec")
    except SyntaxError as e:
        if "'return' outside function" not in str(e):
            raise
        body = "def __suiro_source__():\n" + "".join("    " + line + "\n" for line in src.splitlines())
        return ("func", compile(body, "<suiro.call source>", "exec"), None)
    tree = ast.parse(src, "<suiro.call source>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), "<suiro.call source>", "eval")
    stmts = compile(tree, "<suiro.call source>", "exec") if tree.body else None
    return ("exec", stmts, last)


def describe_exception(exc):
    """(class, message, traceback) of an exception raised by a task, for the ERROR payload."""
    import traceback

    t = type(exc)
    mod = t.__module__
    cls = t.__qualname__ if mod in ("builtins", "__main__") else "%s.%s" % (mod, t.__qualname__)
    if len(exc.args) == 1 and isinstance(exc.args[0], str):
        msg = exc.args[0]
    else:
        try:
            msg = str(exc)
        except Exception:
            msg = "<unprintable %s>" % t.__name__
    tb = exc.__traceback__
    # drop the frames of suiro's own machinery (the call helper) at the top
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(t, exc, tb))
    if _HOST_IS_PYTHON:
        text += _pickled_exception(exc)
    return (cls, msg, text)


# Between Python processes an exception travels whole: the ERROR's traceback part ends with a
# line "suiro-pickle:<base64 of the pickled exception>", which a Python host strips and unpickles
# (so its args and attributes survive). Workers serving a Lua or R host never add it.
_HOST_IS_PYTHON = os.environ.get("SUIRO_HOST_LANG", "python") == "python"
PICKLE_MARK = "suiro-pickle:"


def _pickled_exception(exc):
    import base64

    try:
        if "<locals>" in type(exc).__qualname__:  # no class in the host it could be: RemoteError
            data = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        else:  # a main-script class too, by value (the host's own class again)
            data = dumps(exc)
        if len(data) > 1 << 20:
            return ""
        pickle.loads(data)  # only what can be read back
    except Exception:
        return ""
    return PICKLE_MARK + base64.b64encode(data).decode("ascii")
