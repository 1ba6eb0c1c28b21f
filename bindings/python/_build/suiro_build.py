"""An in-tree PEP 517 backend: setuptools' own, found where Debian installs it.

pip builds in an isolated environment that hides the system's site-packages; offline it cannot
download setuptools into it. This backend adds the interpreter's dist-packages back (only for the
build) and asks for no build requirements, then delegates everything to setuptools.build_meta.
"""
import os
import sys


def _find_setuptools():
    try:
        import setuptools  # noqa: F401
        return
    except ImportError:
        pass
    base = sys.base_prefix
    ver = "python%d.%d" % sys.version_info[:2]
    for d in (os.path.join(base, "lib", "python3", "dist-packages"), "/usr/lib/python3/dist-packages",
              os.path.join(base, "lib", ver, "site-packages"), os.path.join(base, "local", "lib", ver, "dist-packages")):
        if os.path.isdir(os.path.join(d, "setuptools")) and d not in sys.path:
            sys.path.append(d)


_find_setuptools()

from setuptools import build_meta as _meta  # noqa: E402

build_wheel = _meta.build_wheel
build_sdist = _meta.build_sdist
prepare_metadata_for_build_wheel = _meta.prepare_metadata_for_build_wheel
if hasattr(_meta, "build_editable"):
    build_editable = _meta.build_editable
    prepare_metadata_for_build_editable = _meta.prepare_metadata_for_build_editable


def get_requires_for_build_wheel(config_settings=None):
    return []  # setuptools and wheel come from the system


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
