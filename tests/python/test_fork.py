"""os.fork() with a live pool (issue 17, item 8): in the child the parent's pools are inert (a clear
error naming the parent, never a hang), the child's exit (sys.exit: atexit handlers, finalizers)
never touches them, and views of the parent's values stay readable.

Each scenario is a small program run in a fresh interpreter (a fork inside pytest's own process
would run the rest of the session twice); every wait in it is bounded, and the program itself runs
under a 60 s timeout."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

PRELUDE = """\
import os, signal, sys, time
sys.path[:0] = %r
import suiro
import pyfuncs


def wait_child(pid, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise SystemExit("forked child %%d did not finish within %%s s" %% (pid, timeout))
        time.sleep(0.01)


def worker_pids(p):
    return sorted(w["pid"] for w in p.status()["workers"])
"""


def run(body, timeout=60):
    code = PRELUDE % (sys.path[:3],) + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, "stdout:\n%s\nstderr:\n%s" % (out.stdout, out.stderr)
    return out.stdout


def test_child_sys_exit_does_not_stop_parent_pool():
    out = run("""
        p = suiro.pool(workers=2)
        assert p.submit(pow, 2, 3).collect(timeout=10) == 8
        before = worker_pids(p)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # atexit handlers and finalizers run in the child
        assert wait_child(pid) == 0
        assert worker_pids(p) == before, (worker_pids(p), before)
        assert [p.submit(pyfuncs.identity, i).collect(timeout=10) for i in range(50)] == list(range(50))
        name = p.name
        assert any(n.startswith(name.lstrip("/")) for n in os.listdir("/dev/shm"))
        p.stop()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_child_use_raises_belongs_to_parent():
    out = run("""
        p = suiro.pool(workers=1)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            for what, call in [("submit", lambda: p.submit(pow, 2, 3)), ("status", p.status),
                               ("map", lambda: p.map(pyfuncs.identity, range(10)).collect(timeout=5))]:
                try:
                    call()
                    print("child: %s did not raise" % what)
                    code = 2
                except Exception as e:
                    if "belongs to process %d" % parent not in str(e):
                        print("child: %s raised %r" % (what, e))
                        code = 3
            p.stop()  # the parent's: refused quietly, touching nothing
            q = suiro.pool(workers=1)  # a pool of its own works
            if q.submit(pow, 2, 5).collect(timeout=10) != 32:
                code = 4
            q.stop()
            sys.exit(code)
        assert wait_child(pid) == 0
        assert p.submit(pow, 3, 4).collect(timeout=10) == 81
        p.stop()
        print("ok")
    """)
    assert out.strip().splitlines()[-1] == "ok"


def test_child_and_parent_submit_without_hang():
    out = run("""
        p = suiro.pool(workers=2)
        pid = os.fork()
        if pid == 0:
            t0 = time.monotonic()
            errors = 0
            for i in range(200):
                try:
                    p.submit(pyfuncs.identity, i).collect(timeout=2)
                except Exception:
                    errors += 1
            # each attempt failed at once (none waited for its timeout)
            sys.exit(0 if errors == 200 and time.monotonic() - t0 < 10 else 7)
        got = [p.submit(pyfuncs.identity, i).collect(timeout=10) for i in range(500)]
        assert wait_child(pid) == 0
        assert got == list(range(500))
        assert list(p.map(pyfuncs.identity, range(1000)).collect(timeout=30)) == list(range(1000))
        p.stop()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_views_stay_readable_in_child():
    pytest.importorskip("numpy")
    out = run("""
        import numpy as np
        p = suiro.pool(workers=1)
        a = p.submit(np.arange, 200000, dtype=np.float64).collect(timeout=10)  # a zero-copy view
        total = float(a.sum())
        pid = os.fork()
        if pid == 0:
            ok = float(a.sum()) == total and a[123] == 123.0
            del a
            import gc; gc.collect()
            sys.exit(0 if ok else 8)
        assert wait_child(pid) == 0
        assert float(a.sum()) == total
        b = p.submit(lambda v: v * 2, a).collect(timeout=10)  # the view still crosses
        assert float(b.sum()) == 2 * total
        del a, b
        p.stop()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_executor_in_child_is_inert():
    out = run("""
        p = suiro.pool(workers=1)
        ex = p.executor()
        assert ex.submit(pow, 2, 2).result(timeout=10) == 4
        own = suiro.PoolExecutor(1)
        assert own.submit(pow, 2, 2).result(timeout=10) == 4
        pid = os.fork()
        if pid == 0:
            code = 0
            for e in (ex, own):
                try:
                    e.submit(pow, 2, 3).result(timeout=5)
                    code = 9
                except Exception:
                    pass
            sys.exit(code)  # the executors' exit handlers must not stop the parent's pools
        assert wait_child(pid) == 0
        assert ex.submit(pow, 2, 4).result(timeout=10) == 16
        assert own.submit(pow, 2, 5).result(timeout=10) == 32
        own.shutdown()
        p.stop()
        print("ok")
    """)
    assert out.strip() == "ok"
