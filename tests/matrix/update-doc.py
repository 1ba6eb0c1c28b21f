#!/usr/bin/python3
"""Writes the type matrix's tables into docs/wire-format.md ("What crosses: the type matrix"),
from the three drivers' own tables: each driver's doc-table test writes its table to
SUIRO_MATRIX_TABLE when that is set (and then fails or passes as the doc stands). Run from the
checkout after changing a driver's values: tests/matrix/update-doc.py"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ROUTES = {
    "Lua → Python → R → Lua": ["lua5.4", "/usr/bin/busted", "--ignore-lua", "-o", "TAP",
                               "--filter", "is the table", "tests/lua/type_matrix_spec.lua"],
    "Python → R → Python": ["/usr/bin/python3", "-m", "pytest", "-q", "tests/python/test_type_matrix.py",
                            "-k", "doc_table"],
    "R → Python → R": ["Rscript", "bindings/r/tools/run-tests.R"],
}


def table(route, cmd):
    with tempfile.NamedTemporaryFile(suffix=".md", delete=False) as f:
        path = f.name
    env = dict(os.environ, SUIRO_MATRIX_TABLE=path, SUIRO_ROOT=ROOT, R_LIBS=os.path.join(ROOT, "build", "R-lib"),
               SUIRO_R_TEST_FILES="test-type-matrix.R")
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=600)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    os.unlink(path)
    if not text.startswith("| value |"):
        sys.exit("update-doc: the %s driver wrote no table" % route)
    return text


def main():
    doc = os.path.join(ROOT, "docs", "wire-format.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    for route, cmd in ROUTES.items():
        head = "### %s\n" % route
        m = re.search(r"^%s(.*?)(?=^#|\Z)" % re.escape(head), text, re.M | re.S)
        if not m:
            sys.exit("update-doc: docs/wire-format.md has no section %r" % head.strip())
        body = m.group(1)
        t = re.search(r"^\| value \|.*?\n(?!\|)", body, re.M | re.S)
        new = table(route, cmd)
        body = body[:t.start()] + new + body[t.end():] if t else body.rstrip("\n") + "\n\n" + new + "\n"
        text = text[:m.start(1)] + body + text[m.end(1):]
    with open(doc, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
