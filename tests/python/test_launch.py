"""Worker commands from a Python host: suiro.config.launch (through suiro_conf_launch) resolves them
by the rule every host shares: the launcher's option beats the variable (SUIRO_WORKER_EXE,
SUIRO_PY_WORKER, SUIRO_R_LIBS), which beats what this host knows of itself (its interpreter, its
package's worker script, the checkout's build/bin/suiro and build/R-lib), then what is installed."""
import os
import shutil
import sys

import pytest

import suiro
from suiro import _api, _core

from conftest import LUA_WORKER, ROOT

CHECKOUT_SCRIPT = os.path.join(ROOT, "bindings", "python", "suiro", "_worker.py")
R_LIB = os.path.join(ROOT, "build", "R-lib")


@pytest.fixture
def clean(monkeypatch):
    for v in ("SUIRO_WORKER_EXE", "SUIRO_PY_WORKER", "SUIRO_R_LIBS", "R_LIBS"):
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def launch(kind, pool_env=None, **opts):
    return _core.embed_launch(kind, opts, _api._host_info(kind, pool_env))


def test_python_workers_interpreter_and_script(clean):
    c = launch("python")
    assert c["exe"] == sys.executable and c["argv"] == [sys.executable, "-I", suiro.worker_script()]
    assert c["env"]["SUIRO_HOST_LANG"] == "python" and c["env"]["SUIRO_CWD"] == os.getcwd()
    assert c["env"]["OMP_NUM_THREADS"] == "1"
    # the variable beats the package's own script; the launcher's options beat both
    clean.setenv("SUIRO_PY_WORKER", CHECKOUT_SCRIPT)
    assert launch("python")["argv"] == [sys.executable, "-I", CHECKOUT_SCRIPT]
    assert launch("python", python="/usr/bin/python3")["argv"] == ["/usr/bin/python3", "-I", CHECKOUT_SCRIPT]
    c = launch("python", argv=["/usr/bin/python3", "-I", "/x.py"])
    assert c["exe"] == sys.executable and c["argv"] == ["/usr/bin/python3", "-I", "/x.py"]
    clean.setenv("SUIRO_PY_WORKER", "/nonexistent.py")
    with pytest.raises(RuntimeError, match=r"SUIRO_PY_WORKER names no file \(/nonexistent.py\)"):
        launch("python")


def test_lua_workers_exe(clean):
    if _api._host_info("lua", None).get("worker_exe"):  # the package runs from the checkout
        assert launch("lua")["exe"] == LUA_WORKER and "argv" not in launch("lua")  # the checkout's
    clean.setenv("SUIRO_WORKER_EXE", "/v/suiro")
    assert launch("lua")["exe"] == "/v/suiro"
    assert launch("lua", exe="/o/suiro")["exe"] == "/o/suiro"


def test_r_workers_library_and_rscript(clean):
    sh = shutil.which("sh")
    # a package loaded from outside the checkout (the sanitizer run's build/asan/python) knows no
    # R library of its own: the variable then names the checkout's
    own = bool(_api._host_info("r", None).get("r_libs"))
    if not own:
        clean.setenv("SUIRO_R_LIBS", R_LIB)
    c = launch("r", rscript=sh)
    assert c["argv"] == [sh, "--vanilla", "--default-packages=NULL", "-e", "suiro:::worker_main()"]
    assert c["env"]["R_LIBS"] == R_LIB and c["env"]["SUIRO_HOST_LANG"] == "python"
    clean.setenv("R_LIBS", "/e")
    assert launch("r", rscript=sh)["env"]["R_LIBS"] == R_LIB + ":/e"
    clean.setenv("SUIRO_R_LIBS", "/nonexistent")
    with pytest.raises(RuntimeError, match=r"suiro's R package in /nonexistent \(SUIRO_R_LIBS\)"):
        launch("r", rscript=sh)
    # the launcher's and then the pool's env beat what launch derives; SUIRO_HOST_LANG stays the host's
    if own:
        clean.delenv("SUIRO_R_LIBS")
    else:
        clean.setenv("SUIRO_R_LIBS", R_LIB)
    c = launch("r", {"R_LIBS": "/pool", "SUIRO_HOST_LANG": "x"}, rscript=sh,
               env={"R_LIBS": "/launcher", "OMP_NUM_THREADS": "4"})
    assert (c["env"]["R_LIBS"], c["env"]["OMP_NUM_THREADS"], c["env"]["SUIRO_HOST_LANG"]) == ("/pool", "4", "python")


def test_a_python_worker_starts_through_suiro_py_worker(clean, tmp_path):
    # no argv: the variable's script is what runs (a copy elsewhere; the package comes from the
    # host's path, SUIRO_PYTHONPATH)
    script = tmp_path / "w.py"
    shutil.copy(suiro.worker_script(), script)
    clean.setenv("SUIRO_PY_WORKER", str(script))
    with suiro.pool(1, timeout=30) as p:
        assert p.submit(suiro.call(source="import sys\nsys.argv[0]")).collect(timeout=30) == str(script)


@pytest.mark.parametrize("kind", ["python", "lua", "r"])
def test_a_worker_of_each_kind_starts(kind):
    spec = {"python": suiro.call("operator.add", 40, 2), "lua": suiro.call(source="return 40 + 2"),
            "r": suiro.call(source="40L + 2L")}[kind]
    with suiro.pool(1, launcher=kind, timeout=60) as p:
        assert p.submit(spec).collect(timeout=60) == 42
