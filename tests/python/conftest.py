"""pytest setup: the checkout's binding on sys.path, pool fixtures, bounded waits."""

import os
import sys
import time

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.environ.get("SUIRO_PY_PKG_DIR", os.path.join(ROOT, "bindings", "python")))  # or a sanitizer build
sys.path.insert(0, os.path.dirname(__file__))  # helper modules (pyfuncs) importable by reference

import suiro  # noqa: E402

VECTORS = os.path.join(ROOT, "tests", "vectors")
LUA_WORKER = os.path.join(ROOT, "build", "bin", "suiro")


@pytest.fixture(scope="session")
def pool():
    """Two Python workers shared by the tests that leave them as they found them."""
    with suiro.pool(workers=2) as p:
        yield p


@pytest.fixture(scope="session")
def pool1():
    with suiro.pool(workers=1) as p:
        yield p


@pytest.fixture(scope="session")
def luapool():
    with suiro.pool(workers=2, launcher=suiro.lua()) as p:
        yield p


def wait_until(cond, timeout=10.0, step=0.01):
    """Polls cond() until it is true; fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    raise AssertionError("condition not met within %.1f s" % timeout)


def own_regions():
    """Names of this process's shared regions in /dev/shm (shared with other users of the machine)."""
    prefix = "suiro_%x_" % os.getpid()
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))


def run_script(tmp_path, name, text):
    """Runs text as the main script tmp_path/name in a new interpreter that imports this suiro;
    returns the finished process (stdout, stderr as text)."""
    import subprocess
    script = tmp_path / name
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(tmp_path))
