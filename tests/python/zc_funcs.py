"""Worker functions for test_zerocopy.py: received arrays are private copies (issue 18, item 5)."""

import ctypes

_held = []


def write_first(a, value):
    """Writes a[0] and a[-1] in place; returns what they were and what the array reads now."""
    before = [float(a[0]), float(a[-1])]
    a[0] = value
    a[-1] = value
    return before + [float(a[0]), float(a[-1])]


def poke(a, value):
    """Writes a[0] through the array's address (ctypes), as C code would, not through numpy."""
    ctypes.c_double.from_address(a.ctypes.data).value = value
    return float(a[0])


def ends(a):
    return [float(a[0]), float(a[-1])]


def hold(a):
    """Keeps a in this worker and sends it back (by reference when large)."""
    _held.append(a)
    return a


def held_ends():
    return [float(_held[-1][0]), float(_held[-1][-1])]


def write_held(value):
    _held[-1][0] = value
    _held[-1][-1] = value
    return held_ends()


def drop_held():
    _held.clear()
    return 0
