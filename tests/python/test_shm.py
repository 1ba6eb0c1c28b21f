"""/dev/shm at its edges (issue 17, items 1 and 3): small or full, and what a host keeps of it.

Each case runs a child Python in a private mount namespace with a /dev/shm of its own
(unshare -m, a tmpfs of a known size), so its statvfs counts this pool family alone: other
processes of the machine share the real /dev/shm. Needs root (or unprivileged user namespaces);
skipped otherwise.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PKG = os.environ.get("SUIRO_PY_PKG_DIR", os.path.join(ROOT, "bindings", "python"))
MIB = 1 << 20
CAP = 512 * MIB  # the documented cap of a process's warm free regions (docs/zero-copy.md)

PRELUDE = textwrap.dedent("""
    import gc, os, sys
    sys.path[:0] = [%r]
    import numpy as np
    import suiro

    def used():
        s = os.statvfs("/dev/shm")
        return (s.f_blocks - s.f_bfree) * s.f_frsize
""") % PKG


def _can_unshare():
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    return r.returncode == 0


needs_ns = pytest.mark.skipif(not _can_unshare(), reason="needs unshare -m (root) for a private /dev/shm")


def run_in_private_shm(code, size="3g", env=None, timeout=240):
    """Runs PRELUDE + code in a child with a private /dev/shm of `size`; returns (rc, stdout, stderr)."""
    script = PRELUDE + textwrap.dedent(code)
    shell = ('mount --make-rprivate / && mount -t tmpfs -o size=%s tmpfs /dev/shm && exec "$@"' % size)
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(["unshare", "-m", "sh", "-c", shell, "_", sys.executable, "-c", script],
                       capture_output=True, text=True, timeout=timeout, env=e)
    return r.returncode, r.stdout, r.stderr


def values(out):
    """The child's "key value" lines as a dict of ints."""
    d = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().lstrip("-").isdigit():
            d[k] = int(v)
    return d


@needs_ns
def test_dropping_a_large_argument_gives_dev_shm_back():
    # 600 MiB: more than the cap, so no list may keep it (it was kept whole, in the pool's
    # recycle list, and the worker's mapping cache pinned it).
    rc, out, err = run_in_private_shm("""
        with suiro.pool(workers=1) as p:
            base = used()
            a = np.ones(600 * 2**20 // 8)
            assert p.submit(np.sum, a).collect(120) == a.size
            del a
            gc.collect()
            print("after_arg", used() - base)
            b = p.submit(np.ones, 600 * 2**20 // 8).collect(120)
            assert b.sum() == b.size
            del b
            gc.collect()
            p.submit(int, 1).collect(30)  # the worker has let go of its result by now
            print("after_result", used() - base)
        print("stopped", used())
    """)
    assert rc == 0, err
    v = values(out)
    assert v["after_arg"] < 64 * MIB, out
    assert v["after_result"] < 64 * MIB, out
    assert v["stopped"] == 0, out


@needs_ns
def test_warm_regions_stay_within_the_cap():
    # Three arguments of 200 MiB, one after the other: what stays warm stays within the cap.
    rc, out, err = run_in_private_shm("""
        with suiro.pool(workers=1) as p:
            base = used()
            for i in range(3):
                a = np.full(200 * 2**20 // 8 + i * 1000, float(i))
                assert p.submit(np.sum, a).collect(120) == i * a.size
                del a
                gc.collect()
            print("held", used() - base)
    """)
    assert rc == 0, err
    assert values(out)["held"] <= CAP + 64 * MIB, out


@needs_ns
def test_a_small_dev_shm_still_carries_100_mb(tmp_path):
    # 64 MB as in a Docker container: the regions go to the fallback directory (a private one:
    # /var/tmp is shared with every process of the machine, whose reapers cannot judge files of a
    # private /dev/shm's owners; region.c leaves them, older builds did not).
    tmp = str(tmp_path)
    rc, out, err = run_in_private_shm("""
        with suiro.pool(workers=1) as p:
            a = np.arange(100 * 2**20 // 8, dtype=np.float64)
            b = p.submit(np.multiply, a, 2.0).collect(120)
            assert b.shape == a.shape and b[-1] == 2 * a[-1] and b.sum() == 2 * a.sum()
            print("ok 1")
        print("left", len([n for n in os.listdir(%r) if n.startswith("suiro_%%x_" %% os.getpid())]))
    """ % tmp, size="64m", env={"SUIRO_SHM_DIR": tmp})
    assert rc == 0, err
    assert values(out) == {"ok": 1, "left": 0}, out


@needs_ns
def test_a_full_dev_shm_is_an_error_naming_the_way_out():
    # No fallback: the host gets an error naming the size, the free space and SUIRO_SHM_DIR;
    # the pool stays usable.
    rc, out, err = run_in_private_shm("""
        with suiro.pool(workers=1) as p:
            a = np.ones(100 * 2**20 // 8)
            try:
                p.submit(np.sum, a).collect(60)
            except (suiro.SuiroError, RuntimeError) as e:  # the binding raises RuntimeError for engine errors
                print("error", 1)
                sys.stderr.write(str(e))
            print("after", p.submit(int, 7).collect(30))
            # a worker whose result does not fit reports it, and lives on
            try:
                p.submit(np.ones, 100 * 2**20 // 8).collect(60)
            except (suiro.SuiroError, RuntimeError) as e:  # the binding raises RuntimeError for engine errors
                print("result_error", 1)
                sys.stderr.write("\\n" + str(e))
            print("again", p.submit(int, 8).collect(30))
    """, size="64m", env={"SUIRO_SHM_DIR": "off"})
    assert rc == 0, err
    assert values(out) == {"error": 1, "after": 7, "result_error": 1, "again": 8}, out
    assert "SUIRO_SHM_DIR" in err and "free" in err and "MiB" in err, err
