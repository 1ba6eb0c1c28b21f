"""Packaging: `pip install bindings/python` into a venv made with --system-site-packages works
offline (no index: Debian's setuptools), and the installed package runs pools; scripts/python
runs the checkout's binding."""

import os
import subprocess
import sys

from conftest import ROOT

SNIPPET = r"""
import os, sys
import suiro
assert suiro.__file__.startswith(sys.prefix), suiro.__file__   # the installed copy, not the checkout
with suiro.pool(workers=2) as p:
    assert p.submit(pow, 2, 16).collect(timeout=30) == 65536
    assert p.submit(lambda x: x + 1, 41).collect(timeout=30) == 42
    assert p.map(abs, range(-3, 3), template="i64").collect(timeout=30).tolist() == [3, 2, 1, 0, 1, 2]
with suiro.open(sys.argv[1]) as pools:
    assert pools.options("parse")["timeout"] == 30.0
print("ok")
"""


def test_pip_install_offline_into_a_venv(tmp_path):
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True, timeout=120)
    py = os.path.join(venv, "bin", "python")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    out = subprocess.run([py, "-m", "pip", "install", "--no-index", "-q", os.path.join(ROOT, "bindings", "python")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run = subprocess.run([py, "-c", SNIPPET, os.path.join(ROOT, "examples", "pools.lua")], capture_output=True,
                         text=True, timeout=120, env=env, cwd=str(tmp_path))
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_scripts_python_runs_the_checkout():
    out = subprocess.run([os.path.join(ROOT, "scripts", "python"), "-c",
                          "import suiro; print(suiro.__file__); print(suiro.pool(workers=1).submit(pow, 3, 3).collect(10))"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == os.path.join(ROOT, "bindings", "python", "suiro", "__init__.py") and lines[1] == "27"


def test_c_methods_have_signatures():
    import inspect

    import suiro
    sigs = {
        suiro.Pool.submit: "(self, fn, /, *args, **kwargs)",
        suiro.Pool.collect_all: "(self, /, tasks, timeout=None)",
        suiro.Pool.stop: "(self, /, timeout=None)",
        suiro.Task.collect: "(self, /, timeout=None)",
        suiro.Task.kill: "(self, /)",
    }
    for f, want in sigs.items():
        assert str(inspect.signature(f)) == want, f.__name__


def test_type_stubs_name_the_public_api():
    # PEP 561: py.typed and a stub of the package; the stub must name what __all__ exports
    import ast

    import suiro
    pkg = os.path.dirname(suiro.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    with open(os.path.join(pkg, "__init__.pyi")) as f:
        tree = ast.parse(f.read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    public = {n for n in names if not n.startswith("_")}
    assert set(suiro.__all__) <= public, set(suiro.__all__) - public
    assert public <= set(suiro.__all__) | {"reap"}, public - set(suiro.__all__)
    for cls in ("Pool", "Task", "PoolExecutor"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        stubbed = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
        real = {m for m in dir(getattr(suiro, cls)) if not m.startswith("_")}
        assert {"submit", "collect"} & stubbed and stubbed - {"__await__"} <= real | {"__enter__", "__exit__"} | set(dir(object)), (cls, stubbed - real)


def test_import_suiro_leaves_heavy_modules_unloaded(tmp_path):
    # every Python worker imports suiro first: asyncio (channels' recv_async), numpy and pandas
    # are imported where they are used, or a worker's start costs several times more
    from conftest import run_script
    p = run_script(tmp_path, "imports.py", "import sys, suiro\n"
                   "print(sorted(m for m in ('asyncio', 'numpy', 'pandas') if m in sys.modules))\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
