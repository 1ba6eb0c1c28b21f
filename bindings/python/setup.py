"""Builds suiro._core: the binding (src/*.c) over the engine.

In a checkout, scripts/build sets SUIRO_LIBSUIRO to build/lib/libsuiro.a (the engine built with
-fPIC) and the extension links it; otherwise (pip install bindings/python) the engine's sources
are compiled into the extension from ../../engine. The config readers (engine/conf/conf.c, public
headers only) are compiled in either way; the Lua modules they run (suiro/parse.lua and config.lua)
are copied into the package from ../../engine/conf.
"""
import glob
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LUA_INC = "/usr/include/lua5.4"


def vendor(paths, sub):
    """Copies sources from outside the package into build/vendor/<sub> (setuptools wants sources
    given relative to setup.py, and their objects inside the build directory); returns the
    copies' relative paths. Copies only what changed, so rebuilds stay incremental."""
    dst = os.path.join(HERE, "build", "vendor", sub)
    os.makedirs(dst, exist_ok=True)
    ext = {os.path.splitext(p)[1] for p in paths}
    keep = {os.path.basename(p) for p in paths}
    for old in os.listdir(dst):  # a source renamed or removed upstream must not linger here
        if os.path.splitext(old)[1] in ext and old not in keep:
            os.unlink(os.path.join(dst, old))
    out = []
    for p in paths:
        q = os.path.join(dst, os.path.basename(p))
        if not os.path.exists(q) or os.path.getmtime(q) < os.path.getmtime(p):
            shutil.copy2(p, q)
        out.append(os.path.relpath(q, HERE))
    return out


def copy_lua_modules():
    """suiro/parse.lua and suiro/config.lua into the package (suiro/lua/suiro/), for the embedded
    readers; copies, not committed."""
    dst = os.path.join(HERE, "suiro", "lua", "suiro")
    os.makedirs(dst, exist_ok=True)
    for name in ("parse.lua", "config.lua"):
        src = os.path.join(ROOT, "engine", "conf", "suiro", name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(dst, name))
        elif not os.path.exists(os.path.join(dst, name)):
            raise SystemExit("suiro: %s is missing (build from a suiro checkout)" % src)


class BuildPy(build_py):
    def run(self):
        copy_lua_modules()
        super().run()


copy_lua_modules()

sources = [os.path.relpath(p, HERE) for p in sorted(glob.glob(os.path.join(HERE, "src", "*.c")))]
sources += vendor([os.path.join(ROOT, "engine", "conf", "conf.c")], "conf")
extra_objects = []
libsuiro = os.environ.get("SUIRO_LIBSUIRO")
if libsuiro:
    extra_objects.append(libsuiro)
else:  # the engine compiled in, as standalone sources (its private headers expanded in place)
    dst = os.path.join(HERE, "build", "vendor", "engine")
    subprocess.run(["sh", os.path.join(ROOT, "engine", "standalone.sh"), dst], check=True)
    sources += [os.path.relpath(p, HERE) for p in sorted(glob.glob(os.path.join(dst, "*.c")))]

ext = Extension(
    "suiro._core",
    sources=sources,
    include_dirs=[os.path.join(ROOT, "engine", "include"), LUA_INC],
    extra_objects=extra_objects,
    depends=extra_objects + sorted(glob.glob(os.path.join(HERE, "src", "*.h"))) + [
        os.path.join(ROOT, "engine", "include", h) for h in ("suiro.h", "suiro_wire.h", "suiro_wire_compat.h", "suiro_bind.h", "suiro_face.h", "suiro_conf.h", "suiro_embed.h")],
    libraries=["lua5.4", "lua5.4-lpeg", "m", "dl", "pthread"],
    extra_compile_args=["-std=gnu11", "-D_GNU_SOURCE", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Werror=implicit-function-declaration", "-pthread",
                        "-O2", "-fno-strict-aliasing", "-fvisibility=hidden"],
    extra_link_args=["-pthread"],
)

setup(
    ext_modules=[ext],
    packages=["suiro"],
    package_data={"suiro": ["lua/suiro/*.lua", "py.typed", "__init__.pyi"]},
    cmdclass={"build_py": BuildPy},
)
